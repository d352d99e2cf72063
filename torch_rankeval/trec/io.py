"""TREC files: qrels and run readers and writers.

Qrels lines are ``qid iteration docno relevance``; run lines are ``qid Q0 docno rank score tag``.
Files may be gzip-compressed (detected by content, in pipes and on standard input ``"-"`` too), separate fields by any whitespace (every byte
up to 0x20: spaces, tabs, CR/LF), and hold ``#`` comment lines. Reading is vectorised (numpy over
blocks of the file, parsed by a thread pool, no Python code per line), so a 10-million-line run
reads in seconds; large files show a progress bar (tqdm or rich) on a terminal. Malformed lines,
duplicate ``(qid, docno)`` pairs and empty files raise :class:`TrecFormatError` naming the file
and the line.
"""

from __future__ import annotations

import gzip
import math
import os
import re
from collections.abc import Mapping
from typing import Union

import numpy as np

from torch_rankeval.trec._join_kernels import sorted_by_query_and_docno
from torch_rankeval.trec._text import Strings, Table, TrecFormatError, decode, encode, read_table, table_from_rows

__all__ = ["TrecFormatError", "Qrels", "Run", "read_qrels", "read_run", "write_qrels", "write_run", "PathLike"]

PathLike = Union[str, os.PathLike[str]]


def _two_lines(path: str | None, lines: tuple[int, int]) -> str:
    """``"file, lines 3 and 9"`` (or just the file for rows built from a dict)."""
    a, b = sorted(lines)
    return f"{path or '<dict>'}, lines {a} and {b}" if a else f"{path or '<dict>'}"


def _sorted_qids(names: list[bytes]) -> tuple[list[str], np.ndarray]:
    """Query ids sorted as trec_eval sorts them (byte order) and the rank of each input id."""
    order = sorted(range(len(names)), key=names.__getitem__)
    return [decode(names[i]) for i in order], np.argsort(np.asarray(order, dtype=np.int64))


class _Judgments:
    """Shared shape of :class:`Qrels` and :class:`Run`: rows of (query, docno, value, line)."""

    path: str | None
    qids: list[str]
    qid: np.ndarray
    docno: Strings
    line: np.ndarray

    def __len__(self) -> int:
        return len(self.qid)

    def docnos(self) -> list[str]:
        """The docno of every row, as text."""
        return [decode(s) for s in self.docno.tolist()]

    def _rows(self, values: np.ndarray) -> dict[str, dict[str, object]]:
        out: dict[str, dict[str, object]] = {q: {} for q in self.qids}
        for q, d, v in zip(self.qid.tolist(), self.docnos(), values.tolist()):
            out[self.qids[q]][d] = v
        return out


class Qrels(_Judgments):
    """Relevance judgments: for each query, the grade of every judged document.

    Rows are sorted by query id (byte order, as trec_eval) and, within a query, by docno
    descending. Build one with :func:`read_qrels` or :meth:`from_dict`.

    Attributes:
        qids: distinct query ids, sorted.
        qid: ``(n,)`` int64 index into ``qids`` of each row.
        docno: the docnos (:class:`~torch_rankeval.trec._text.Strings`: bytes without padding to
            the longest); :meth:`docnos` gives them as text.
        relevance: ``(n,)`` int64 grades; negative grades mean "judged as unjudged" (trec_eval).
        line: ``(n,)`` int64 1-based line numbers in the file (0 when built from a dict).
        path: the file read, or ``None``.

    Example:
        >>> q = Qrels.from_dict({"q1": {"d1": 1, "d2": 0}})
        >>> len(q), q.qids, q.to_dict()
        (2, ['q1'], {'q1': {'d2': 0, 'd1': 1}})
    """

    path: str | None
    qids: list[str]
    qid: np.ndarray
    docno: Strings
    relevance: np.ndarray
    line: np.ndarray

    def __init__(self, table: Table, path: str | None = None) -> None:
        self.path = path
        self.qids, rank = _sorted_qids(table.qid_names)
        qid = rank[table.qid]
        order, same = sorted_by_query_and_docno(qid, table.docno)
        if same.any():
            i = int(np.flatnonzero(same)[0])
            a, b = order[i], order[i + 1]
            docno = decode(table.docno.item(a))
            where = _two_lines(path, (int(table.line[a]), int(table.line[b])))
            raise TrecFormatError(f"{where}: duplicate judgment of document {docno!r} for query {self.qids[qid[a]]!r}")
        self.qid = qid[order]
        self.docno = table.docno.take(order)
        self.relevance = table.value[order]
        self.line = table.line[order]

    @classmethod
    def from_dict(cls, qrels: Mapping[str, Mapping[str, int]]) -> Qrels:
        """Qrels from ``{qid: {docno: grade}}`` (pytrec_eval's and ranx's format)."""
        rows = [(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
        if not rows:
            raise TrecFormatError("qrels dict holds no judgment")
        for q, d, g in rows:
            if isinstance(g, bool) or not isinstance(g, (int, np.integer)):
                raise TypeError(f"qrels[{q!r}][{d!r}] must be an int grade, got {g!r}")
        qs, ds, gs = zip(*rows)
        return cls(table_from_rows(list(qs), list(ds), np.array(gs, dtype=np.int64)))

    def to_dict(self) -> dict[str, dict[str, int]]:
        """``{qid: {docno: grade}}`` (docnos in descending order)."""
        return self._rows(self.relevance)  # type: ignore[return-value]


class Run(_Judgments):
    """A ranking run: for each query, the score of every retrieved document.

    Rows keep the file's order; ranks in the file are ignored (trec_eval ranks by score, then by
    docno descending). Build one with :func:`read_run` or :meth:`from_dict`.

    Attributes:
        qids: distinct query ids, sorted.
        qid: ``(n,)`` int64 index into ``qids`` of each row.
        docno: the docnos (:class:`~torch_rankeval.trec._text.Strings`); :meth:`docnos` gives them as text.
        score: ``(n,)`` float64 scores (parsed exactly, as C's ``strtod``).
        line: ``(n,)`` int64 1-based line numbers (0 when built from a dict).
        tag: the run tag of the file's last line (trec_eval's ``runid``).
        path: the file read, or ``None``.

    Example:
        >>> r = Run.from_dict({"q1": {"d1": 0.5, "d2": 1.5}}, tag="bm25")
        >>> r.tag, r.score.tolist()
        ('bm25', [0.5, 1.5])
    """

    path: str | None
    qids: list[str]
    qid: np.ndarray
    docno: Strings
    score: np.ndarray
    line: np.ndarray
    tag: str

    def __init__(self, table: Table, path: str | None = None) -> None:
        self.path = path
        self.qids, rank = _sorted_qids(table.qid_names)
        self.qid = rank[table.qid]
        self.docno = table.docno
        self.score = table.value.astype(np.float64, copy=False)
        self.line = table.line
        self.tag = decode(table.tag) if table.tag is not None else "run"

    @classmethod
    def from_dict(cls, run: Mapping[str, Mapping[str, float]], tag: str = "run") -> Run:
        """A run from ``{qid: {docno: score}}`` (pytrec_eval's and ranx's format)."""
        rows = [(q, d, s) for q, docs in run.items() for d, s in docs.items()]
        if not rows:
            raise TrecFormatError("run dict holds no document")
        qs, ds, ss = zip(*rows)
        scores = np.array(ss, dtype=np.float64)
        if not np.isfinite(scores).all():
            raise ValueError("run scores must be finite numbers")
        return cls(table_from_rows(list(qs), list(ds), scores, tag))

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{qid: {docno: score}}``."""
        return self._rows(self.score)  # type: ignore[return-value]


def read_qrels(path: PathLike, *, progress: bool | None = None) -> Qrels:
    """Read a qrels file (``qid iteration docno relevance``), plain or gzip; ``"-"`` reads stdin.

    Args:
        path: the file.
        progress: show a progress bar (``None``: for files of 64 MiB or more, on a terminal).

    Raises:
        TrecFormatError: unreadable or empty file, a line without exactly four fields, a grade
            that is not an integer, or a document judged twice for one query.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "qrels.txt")
        >>> with open(path, "w") as f:
        ...     _ = f.write("# judged by hand\\n301 0 FT-1 1\\n301 0 FT-2 0\\n302\\t0\\tLA-9\\t2\\n")
        >>> read_qrels(path).to_dict()
        {'301': {'FT-2': 0, 'FT-1': 1}, '302': {'LA-9': 2}}
    """
    return Qrels(read_table(path, "qrels", progress=progress), str(path))


def read_run(path: PathLike, *, progress: bool | None = None) -> Run:
    """Read a run file (``qid Q0 docno rank score tag``, extra fields ignored), plain or gzip; ``"-"`` reads stdin.

    Raises:
        TrecFormatError: unreadable or empty file, a line with fewer than six fields, or a score
            that is not a finite number as C's strtod reads it whole (``1_000``, which strtod reads
            as 1, is refused). Duplicate documents are reported by :func:`to_tensors`.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "run.txt")
        >>> with open(path, "w") as f:
        ...     _ = f.write("301 Q0 FT-1 1 2.5 bm25\\n301 Q0 FT-2 2 -1e-3 bm25\\n")
        >>> run = read_run(path)
        >>> run.tag, run.to_dict()
        ('bm25', {'301': {'FT-1': 2.5, 'FT-2': -0.001}})
    """
    return Run(read_table(path, "run", progress=progress), str(path))


def _open_text(path: PathLike):
    return (gzip.open if str(path).endswith(".gz") else open)(path, "wt", encoding="utf-8", errors="surrogateescape")


# Bytes up to 0x20 (the readers' field separators: whitespace and control characters) and any
# Unicode whitespace (which other readers, pytrec_eval's among them, split on).
_NOT_IN_FIELD = re.compile(r"[\x00-\x20\s]")


def _field(what: str, name: object, where: str) -> str:
    """``name`` checked as one field of a TREC line: it must read back as itself."""
    if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
        name = str(name)
    if not isinstance(name, str):
        raise TypeError(f"{what} {where}must be a str, got {type(name).__name__} {name!r}")
    if not name:
        raise ValueError(f"{what} {where}is empty; an empty field cannot be written to a TREC file")
    bad = _NOT_IN_FIELD.search(name)
    if bad is not None:
        raise ValueError(
            f"{what} {name!r} {where}holds whitespace or a control character ({bad.group()!r} at position "
            f"{bad.start()}); TREC files separate fields by whitespace, so it would not read back: replace it "
            "(e.g. with '_')"
        )
    if what == "query id" and name[0] in "#\ufeff":
        reason = "marks a comment line" if name[0] == "#" else "is a byte-order mark"
        raise ValueError(f"query id {name!r} starts with {name[0]!r}, which {reason} when read back: rename it")
    try:
        encode(name)
    except UnicodeEncodeError as exc:
        raise ValueError(f"{what} {name!r} {where}cannot be encoded as UTF-8: {exc.reason}") from None
    return name


def write_qrels(path: PathLike, qrels: Qrels | Mapping[str, Mapping[str, int]]) -> None:
    """Write qrels as ``qid 0 docno grade`` lines (gzip when ``path`` ends in ``.gz``).

    What is written reads back as the same judgments (:func:`read_qrels`).

    Raises:
        ValueError: a query id or docno is empty, holds whitespace or a control character (it
            would split into several fields), or a query id starts with ``#`` (a comment when read).
        TypeError: a grade is not an int.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "qrels.txt")
        >>> write_qrels(path, {"q1": {"d1": 1}})
        >>> open(path).read()
        'q1 0 d1 1\\n'
        >>> write_qrels(path, {"q 1": {"d1": 1}})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: query id 'q 1' holds whitespace or a control character (' ' at position 1); ...
    """
    data = qrels.to_dict() if isinstance(qrels, Qrels) else qrels
    for q, docs in data.items():  # everything is checked before the file is touched
        q = _field("query id", q, "")
        for d, g in docs.items():
            d = _field("docno", d, f"of query {q!r} ")
            if isinstance(g, bool) or not isinstance(g, (int, np.integer)):
                raise TypeError(f"qrels[{q!r}][{d!r}] must be an int grade, got {g!r}")
    with _open_text(path) as f:
        for q, docs in data.items():
            f.writelines(f"{q} 0 {d} {int(g)}\n" for d, g in docs.items())


def write_run(path: PathLike, run: Run | Mapping[str, Mapping[str, float]], tag: str | None = None) -> None:
    """Write a run as ``qid Q0 docno rank score tag`` lines, ranked as trec_eval ranks them
    (score descending, then docno descending). Scores are written so that they read back exactly:
    :func:`read_run` gives back the same run.

    Raises:
        ValueError: a query id, docno or the tag is empty or holds whitespace or a control
            character (it would split into several fields), a query id starts with ``#`` (a
            comment when read), or a score is not a finite number.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "run.txt")
        >>> write_run(path, {"q1": {"d1": 0.5, "d2": 0.5, "d3": 0.9}}, tag="demo")
        >>> print(open(path).read(), end="")
        q1 Q0 d3 1 0.9 demo
        q1 Q0 d2 2 0.5 demo
        q1 Q0 d1 3 0.5 demo
    """
    data = run.to_dict() if isinstance(run, Run) else run
    tag = _field("tag", tag or (run.tag if isinstance(run, Run) else "") or "torch_rankeval", "")
    for q, docs in data.items():  # everything is checked before the file is touched
        q = _field("query id", q, "")
        for d, s in docs.items():
            d = _field("docno", d, f"of query {q!r} ")
            if not math.isfinite(float(s)):
                raise ValueError(f"run[{q!r}][{d!r}] is {s!r}: scores must be finite numbers")
    with _open_text(path) as f:
        for q, docs in data.items():
            ranked = sorted(docs.items(), key=lambda item: (-float(item[1]), _DescendingBytes(str(item[0]))))
            f.writelines(f"{q} Q0 {d} {r} {float(s)!r} {tag}\n" for r, (d, s) in enumerate(ranked, 1))


class _DescendingBytes:
    """Sort key that orders docnos descending by their bytes (trec_eval's tie rule)."""

    __slots__ = ("b",)

    def __init__(self, docno: str) -> None:
        self.b = encode(docno)

    def __lt__(self, other: _DescendingBytes) -> bool:
        return self.b > other.b

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _DescendingBytes) and self.b == other.b
