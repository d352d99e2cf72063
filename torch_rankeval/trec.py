"""TREC files: qrels and run readers and writers, and trec_eval's evaluation on padded tensors.

Qrels lines are ``qid iteration docno relevance``; run lines are ``qid Q0 docno rank score tag``.
Files may be gzip-compressed (detected by content), separate fields by any whitespace (every byte
up to 0x20: spaces, tabs, CR/LF), and hold ``#`` comment lines. Reading is vectorised (numpy over
blocks of the file, parsed by a thread pool, no Python code per line), so a 10-million-line run
reads in seconds; large files show a progress bar (tqdm or rich) on a terminal. Malformed lines,
duplicate ``(qid, docno)`` pairs and empty files raise :class:`TrecFormatError` naming the file
and the line.

:func:`to_tensors` joins a run with its qrels into padded tensors in trec_eval's ranking order
(score descending, ties by docno descending, so that the ranking core's stable sort,
``ties="first"``, keeps it) together with the grades of every judged document (trec_eval's IDCG
and relevant counts). :func:`evaluate` computes measures on them:

    >>> import os, tempfile
    >>> from torch_rankeval import trec
    >>> folder = tempfile.mkdtemp()
    >>> qrels_path, run_path = os.path.join(folder, "qrels"), os.path.join(folder, "run")
    >>> trec.write_qrels(qrels_path, {"q1": {"d1": 2, "d2": 0, "d3": 1}, "q2": {"d1": 1}})
    >>> trec.write_run(run_path, {"q1": {"d1": 0.5, "d2": 0.9, "d4": 0.1}, "q2": {"d2": 0.3, "d1": 0.2}}, tag="bm25")
    >>> result = trec.evaluate(qrels_path, run_path, ["map", "ndcg_cut.3", "P.1"])
    >>> result.summary  # doctest: +ELLIPSIS
    {'map': 0.375, 'ndcg_cut_3': 0.5552..., 'P_1': 0.0}
    >>> result.per_query["map"].tolist()
    [0.25, 0.5]
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from torch_rankeval._trec_join import docno_keys, padded_join, ranking_order, same_docno, sorted_by_query_and_docno
from torch_rankeval._trec_text import Table, TrecFormatError, decode, encode, read_table, table_from_rows
from torch_rankeval.measures import Measure, compute, parse_measures, summarize

__all__ = [
    "TrecFormatError",
    "Qrels",
    "Run",
    "read_qrels",
    "read_run",
    "write_qrels",
    "write_run",
    "TrecBatch",
    "to_tensors",
    "Output",
    "Evaluation",
    "evaluate",
]

PathLike = str | os.PathLike


def _two_lines(path: str | None, lines: tuple[int, int]) -> str:
    """``"file, lines 3 and 9"`` (or just the file for rows built from a dict)."""
    a, b = sorted(lines)
    return f"{path or '<dict>'}, lines {a} and {b}" if a else f"{path or '<dict>'}"


def _sorted_qids(names: list[bytes]) -> tuple[list[str], np.ndarray]:
    """Query ids sorted as trec_eval sorts them (byte order) and the rank of each input id."""
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names))
    return [decode(names[i]) for i in order], rank


class _Judgments:
    """Shared shape of :class:`Qrels` and :class:`Run`: rows of (query, docno, value, line)."""

    path: str | None
    qids: list[str]
    qid: np.ndarray
    docno: np.ndarray
    line: np.ndarray

    def __len__(self) -> int:
        return len(self.qid)

    def docnos(self) -> list[str]:
        """The docno of every row, as text."""
        strings = np.ascontiguousarray(self.docno).view(f"S{self.docno.shape[1]}").ravel()
        return [decode(bytes(s)) for s in strings]

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
        docno: ``(n, W)`` uint8 docnos (NUL-padded bytes).
        relevance: ``(n,)`` int64 grades; negative grades mean "judged as unjudged" (trec_eval).
        line: ``(n,)`` int64 1-based line numbers in the file (0 when built from a dict).
        path: the file read, or ``None``.

    Example:
        >>> q = Qrels.from_dict({"q1": {"d1": 1, "d2": 0}})
        >>> len(q), q.qids, q.to_dict()
        (2, ['q1'], {'q1': {'d2': 0, 'd1': 1}})
    """

    def __init__(self, table: Table, path: str | None = None) -> None:
        self.path = path
        self.qids, rank = _sorted_qids(table.qid_names)
        qid = rank[table.qid]
        order, same = sorted_by_query_and_docno(qid, table.docno)
        if same.any():
            i = int(np.flatnonzero(same)[0])
            a, b = order[i], order[i + 1]
            docno = decode(table.docno[a].tobytes().rstrip(b"\0"))
            where = _two_lines(path, (int(table.line[a]), int(table.line[b])))
            raise TrecFormatError(f"{where}: duplicate judgment of document {docno!r} for query {self.qids[qid[a]]!r}")
        self.qid = qid[order]
        self.docno = table.docno[order]
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
        docno: ``(n, W)`` uint8 docnos.
        score: ``(n,)`` float64 scores (parsed exactly, as C's ``strtod``).
        line: ``(n,)`` int64 1-based line numbers (0 when built from a dict).
        tag: the run tag of the file's last line (trec_eval's ``runid``).
        path: the file read, or ``None``.

    Example:
        >>> r = Run.from_dict({"q1": {"d1": 0.5, "d2": 1.5}}, tag="bm25")
        >>> r.tag, r.score.tolist()
        ('bm25', [0.5, 1.5])
    """

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
    """Read a run file (``qid Q0 docno rank score tag``, extra fields ignored), plain or gzip.

    Raises:
        TrecFormatError: unreadable or empty file, a line with fewer than six fields, or a score
            that is not a finite number. Duplicate documents are reported by :func:`to_tensors`.

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
    return (
        gzip.open(path, "wt", encoding="utf-8", errors="surrogateescape")
        if str(path).endswith(".gz")
        else open(path, "w", encoding="utf-8", errors="surrogateescape")
    )


def write_qrels(path: PathLike, qrels: Qrels | Mapping[str, Mapping[str, int]]) -> None:
    """Write qrels as ``qid 0 docno grade`` lines (gzip when ``path`` ends in ``.gz``).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "qrels.txt")
        >>> write_qrels(path, {"q1": {"d1": 1}})
        >>> open(path).read()
        'q1 0 d1 1\\n'
    """
    data = qrels.to_dict() if isinstance(qrels, Qrels) else qrels
    with _open_text(path) as f:
        for q, docs in data.items():
            f.writelines(f"{q} 0 {d} {int(g)}\n" for d, g in docs.items())


def write_run(path: PathLike, run: Run | Mapping[str, Mapping[str, float]], tag: str | None = None) -> None:
    """Write a run as ``qid Q0 docno rank score tag`` lines, ranked as trec_eval ranks them
    (score descending, then docno descending). Scores are written so that they read back exactly.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "run.txt")
        >>> write_run(path, {"q1": {"d1": 0.5, "d2": 0.5, "d3": 0.9}}, tag="demo")
        >>> print(open(path).read(), end="")
        q1 Q0 d3 1 0.9 demo
        q1 Q0 d2 2 0.5 demo
        q1 Q0 d1 3 0.5 demo
    """
    if isinstance(run, Run):
        data, tag = run.to_dict(), tag or run.tag
    else:
        data = run
    tag = tag or "torch_rankeval"
    if any(c.isspace() for c in tag) or not tag:
        raise ValueError(f"tag must be a non-empty word without whitespace, got {tag!r}")
    with _open_text(path) as f:
        for q, docs in data.items():
            ranked = sorted(docs.items(), key=lambda item: (-float(item[1]), _DescendingBytes(item[0])))
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


@dataclass
class TrecBatch:
    """A run joined with its qrels as padded tensors, ready for the ranking core.

    Attributes:
        qids: the evaluated queries (rows), sorted as trec_eval sorts them.
        preds: ``(N, L)`` float64 scores; each row holds a query's documents in trec_eval's ranking
            order (score descending, ties by docno descending). It may share memory with the
            run's ``score`` array.
        target: ``(N, L)`` int64 grades; ``-1``: not judged (absent from the qrels, or a negative
            grade) or padding.
        mask: ``(N, L)`` bool, False = padding.
        ideal_target: ``(N, M)`` int64 grades of every judged document of each query, ``-1``
            for padding and negative grades.
        retrieved: ``(N,)`` bool, False for queries of the qrels that the run does not answer
            (only with ``complete=True``).
        runid: the run's tag.
    """

    qids: list[str]
    preds: Tensor
    target: Tensor
    mask: Tensor
    ideal_target: Tensor
    retrieved: Tensor
    runid: str

    def to(self, device: torch.device | str) -> TrecBatch:
        """The same batch on another device."""
        move = {k: getattr(self, k).to(device) for k in ("preds", "target", "mask", "ideal_target", "retrieved")}
        return TrecBatch(qids=self.qids, runid=self.runid, **move)


class _Layout:
    """Where a query-grouped sequence of values goes in an ``(n, width)`` matrix: the values of
    each group fill its row from the left, in their order.

    Args:
        group_rows: the matrix row of each group.
        starts: where each group starts in the sequence.
        m: the sequence's length.
        n: the number of matrix rows (rows without a group stay padding).
    """

    def __init__(self, group_rows: np.ndarray, starts: np.ndarray, m: int, n: int) -> None:
        lengths = np.diff(starts, append=m)
        self.n, self.width = n, max(int(lengths.max()) if len(lengths) else 0, 1)
        # The common case, every query with the same number of documents and in order: a reshape.
        self.identity = n * self.width == m and np.array_equal(group_rows, np.arange(n))
        if not self.identity:
            self.flat = np.repeat(group_rows * self.width - starts, lengths) + np.arange(m)

    def scatter(self, values: np.ndarray, fill, dtype) -> np.ndarray:
        if self.identity:
            return np.asarray(values, dtype=dtype).reshape(self.n, self.width)
        out = np.full(self.n * self.width, fill, dtype=dtype)
        out[self.flat] = values
        return out.reshape(self.n, self.width)

    def mask(self) -> np.ndarray:
        if self.identity:
            return np.ones((self.n, self.width), dtype=bool)
        return self.scatter(True, False, np.bool_)

    def source(self) -> np.ndarray:
        """The sequence index of each matrix position (-1 for padding)."""
        return self.scatter(np.arange(self.n * self.width if self.identity else len(self.flat)), -1, np.int64)


def _group_starts(rows: np.ndarray) -> np.ndarray:
    return (
        np.concatenate([np.zeros(1, dtype=np.int64), np.flatnonzero(rows[1:] != rows[:-1]) + 1]) if len(rows) else rows
    )


def to_tensors(qrels: Qrels, run: Run, *, complete: bool = False) -> TrecBatch:
    """Join a run with its qrels into padded tensors in trec_eval's order (see :class:`TrecBatch`).

    Each row holds a query's documents ranked as trec_eval ranks them (score descending, ties by
    docno descending), so the ranking core's stable sort (``ties="first"``) keeps that order.
    Queries of the run that the qrels do not judge are ignored; ``complete=True`` (trec_eval's
    ``-c``) adds the qrels' queries that the run does not answer, as empty rows that score 0.

    Raises:
        TrecFormatError: a document appears twice for one query in the run, or the run has no
            query in common with the qrels.

    Example:
        >>> qrels = Qrels.from_dict({"q1": {"a": 1, "b": 2, "z": 1}, "q2": {"a": 1}})
        >>> run = Run.from_dict({"q1": {"a": 0.5, "b": 0.5, "c": 0.9}, "q3": {"a": 1.0}})
        >>> batch = to_tensors(qrels, run, complete=True)
        >>> batch.qids, batch.preds.tolist(), batch.target.tolist()
        (['q1', 'q2'], [[0.9, 0.5, 0.5], [0.0, 0.0, 0.0]], [[-1, 2, 1], [-1, -1, -1]])
        >>> batch.ideal_target.tolist(), batch.retrieved.tolist()
        ([[1, 2, 1], [1, -1, -1]], [True, False])
    """
    judged_index = {q: i for i, q in enumerate(qrels.qids)}
    run_to_qrels = np.array([judged_index.get(q, -1) for q in run.qids], dtype=np.int64)
    run_q = run_to_qrels[run.qid]
    keep = np.flatnonzero(run_q >= 0)
    if not len(keep):
        raise TrecFormatError(
            f"{run.path or 'the run'} has no query in common with {qrels.path or 'the qrels'} "
            f"(run queries such as {', '.join(map(repr, run.qids[:3]))}; judged queries such as "
            f"{', '.join(map(repr, qrels.qids[:3]))})"
        )
    q = run_q[keep]
    docno = run.docno[keep] if len(keep) < len(run) else run.docno
    score = run.score[keep] if len(keep) < len(run) else run.score

    order, starts = ranking_order(q, score, docno)
    group_qid = q[starts] if order.full is None else q[order.full[starts]]  # ties stay inside a query
    answered = np.zeros(len(qrels.qids), dtype=bool)
    answered[group_qid] = True
    evaluated = np.ones(len(qrels.qids), dtype=bool) if complete else answered
    eval_index = np.cumsum(evaluated) - 1
    n = int(evaluated.sum())

    # Each query's retrieved documents in ranking order, and its judged documents, as padded rows.
    layout = _Layout(eval_index[group_qid], starts, len(q), n)
    judged_rows = np.flatnonzero(evaluated[qrels.qid])
    judged_qid = qrels.qid[judged_rows]
    judged_starts = _group_starts(judged_qid)
    ideal_layout = _Layout(eval_index[judged_qid[judged_starts]], judged_starts, len(judged_rows), n)
    run_docno = order.apply(docno)
    run_keys, qrels_keys, exact = docno_keys(run_docno, qrels.docno[judged_rows])
    valid = layout.mask()
    qrels_source = ideal_layout.source()
    run_source = None

    def run_rows(flat: np.ndarray) -> np.ndarray:
        """Row of ``run_docno`` at flat positions of the run matrix."""
        nonlocal run_source
        if run_source is None:
            run_source = layout.source()
        return run_source.flat[flat]

    def confirm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return same_docno(run_docno[run_rows(a)], qrels.docno[judged_rows[qrels_source.flat[b]]])

    def confirm_run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return same_docno(run_docno[run_rows(a)], run_docno[run_rows(b)])

    duplicate, run_flat, qrels_flat = padded_join(
        layout.scatter(run_keys, 0, np.int64),
        valid,
        ideal_layout.scatter(qrels_keys, 0, np.int64),
        qrels_source >= 0,
        None if exact else confirm,
        None if exact else confirm_run,
    )
    if duplicate is not None:
        first, second = run_rows(np.array(duplicate))
        a, b = keep[order.index()[[first, second]]]
        where = _two_lines(run.path, (int(run.line[a]), int(run.line[b])))
        docno_text = decode(run.docno[a].tobytes().rstrip(b"\0"))
        raise TrecFormatError(f"{where}: document {docno_text!r} appears twice for query {run.qids[run.qid[a]]!r}")

    preds = torch.from_numpy(layout.scatter(order.apply(score, tie_invariant=True), 0.0, np.float64))
    mask = torch.from_numpy(valid)
    target = np.full(n * layout.width, -1, dtype=np.int64)
    target[run_flat] = np.maximum(qrels.relevance[judged_rows[qrels_source.flat[qrels_flat]]], -1)
    target = torch.from_numpy(target.reshape(n, layout.width))
    ideal = torch.from_numpy(ideal_layout.scatter(np.maximum(qrels.relevance[judged_rows], -1), -1, np.int64))
    qids = [name for name, e in zip(qrels.qids, evaluated) if e]
    return TrecBatch(qids, preds, target, mask, ideal, torch.from_numpy(answered[evaluated]), run.tag)


@dataclass(frozen=True)
class Output:
    """One printed measure: a measure and one of its cutoffs, with its names.

    Attributes:
        measure: the parsed :class:`~torch_rankeval.measures.Measure`.
        index: which of the measure's cutoffs.
        name: the name as written (``"nDCG@10"`` or ``"ndcg_cut_10"``).
        trec_name: trec_eval's printed name where trec_eval has the measure, else ``name``.
    """

    measure: Measure
    index: int
    name: str
    trec_name: str


@dataclass
class Evaluation:
    """The measures of one run: per-query values and trec_eval's summary.

    Attributes:
        run: the run's file (or ``"run"``).
        runid: the run's tag.
        qids: the evaluated queries, sorted.
        outputs: the :class:`Output` columns, in the order the measures were given.
        per_query: ``{name: (N,) float64 tensor}`` for every measure with per-query values.
        summary: ``{name: value}``: the mean over queries (``num_*``: the sum, ``num_q``: the
            number of queries, ``runid``: the tag, ``gm_map``: the geometric mean).
        retrieved: ``(N,)`` bool, False for queries the run does not answer (``complete=True``).
    """

    run: str
    runid: str
    qids: list[str]
    outputs: list[Output]
    per_query: dict[str, Tensor]
    summary: dict[str, float | int | str]
    retrieved: Tensor


def _as_measures(measures: Sequence[str | Measure] | str) -> list[Measure]:
    if isinstance(measures, str):
        measures = [measures]
    names = [m for m in measures if isinstance(m, str)]
    parsed = parse_measures(names) if names else []
    return [m for m in measures if isinstance(m, Measure)] + parsed


def evaluate(
    qrels: Qrels | PathLike,
    run: Run | PathLike,
    measures: Sequence[str | Measure] | str = "official",
    *,
    relevance_level: int = 1,
    complete: bool = False,
    device: torch.device | str | None = None,
) -> Evaluation:
    """Evaluate a run against qrels with trec_eval's semantics.

    Ties are broken by docno descending; negative grades count as unjudged; IDCG and the AP,
    recall and R-precision denominators come from every judged document; queries only in the run
    are ignored; ``complete=True`` (``-c``) scores the qrels' queries missing from the run as 0;
    ``relevance_level`` (``-l``) is the minimum grade of a relevant document for binary measures.
    Everything is computed in float64.

    Args:
        qrels: a :class:`Qrels` or a path.
        run: a :class:`Run` or a path.
        measures: names (trec_eval or ir_measures spelling, or nicknames such as ``"official"``)
            or parsed measures.
        relevance_level: trec_eval's ``-l``.
        complete: trec_eval's ``-c``.
        device: where to compute (``"cuda"`` for the GPU); results come back on the CPU.

    Example:
        >>> qrels = Qrels.from_dict({"q1": {"d1": 1, "d2": 2}, "q2": {"d9": 1}})
        >>> run = Run.from_dict({"q1": {"d1": 0.2, "d2": 0.1}}, tag="demo")
        >>> evaluate(qrels, run, ["num_q", "P.2", "recip_rank"]).summary
        {'num_q': 1, 'P_2': 1.0, 'recip_rank': 1.0}
        >>> evaluate(qrels, run, ["num_q", "P.2", "recip_rank"], complete=True).summary
        {'num_q': 2, 'P_2': 0.5, 'recip_rank': 0.5}
        >>> evaluate(qrels, run, ["P@2", "P(rel=2)@2"], relevance_level=2).summary
        {'P@2': 0.5, 'P(rel=2)@2': 0.5}
    """
    if isinstance(relevance_level, bool) or not isinstance(relevance_level, (int, np.integer)) or relevance_level < 1:
        raise ValueError(f"relevance_level must be an int >= 1 (the minimum relevant grade), got {relevance_level!r}")
    qrels = qrels if isinstance(qrels, Qrels) else read_qrels(qrels)
    run = run if isinstance(run, Run) else read_run(run)
    parsed = _as_measures(measures)
    batch = to_tensors(qrels, run, complete=complete)
    if device is not None:
        batch = batch.to(device)
    values = compute(
        parsed,
        batch.preds,
        batch.target,
        mask=batch.mask,
        ideal_target=batch.ideal_target,
        relevance_level=relevance_level,
        validate_args=False,
    )
    outputs: list[Output] = []
    per_query: dict[str, Tensor] = {}
    summary: dict[str, float | int | str] = {}
    for m in parsed:
        for j, (name, trec_name) in enumerate(zip(m.names(), m.names("trec"))):
            outputs.append(Output(m, j, name, trec_name))
            if m.family.aggregate == "info":
                summary[name] = run.tag
            elif m.family.aggregate == "count":
                summary[name] = len(batch.qids)
            else:
                v = values[name].cpu()
                summary[name] = summarize(m, v)
                if m.per_query:
                    per_query[name] = v
    return Evaluation(run.path or "run", run.tag, batch.qids, outputs, per_query, summary, batch.retrieved.cpu())
