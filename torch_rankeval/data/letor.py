"""LETOR / SVMlight ranking files: ``<grade> qid:<query> <index>:<value> ... # comment``.

The format of MSLR-WEB10K/30K, Yahoo! Learning to Rank, istella and LETOR 3.0/4.0, one document
per line::

    2 qid:10 1:0.031 2:0.666 3:0.5 # docid = GX000-00-0000000
    0 qid:10 1:0.000 3:0.2

Feature indices are 1-based and may be skipped (missing features are 0, as in Yahoo!'s sparse
files); text after ``#`` is a comment. :func:`read_letor` streams the file (plain, ``.gz``,
``.bz2`` or ``.xz``) in chunks of lines, so memory holds the parsed ``float32`` features and never
the text, groups the documents of each query into a :class:`~torch_rankeval.data.QueryDataset`,
and rejects a malformed line with its line number. :func:`write_letor` writes the format back.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import math
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Union

import numpy as np
import torch

from torch_rankeval.data.dataset import QueryDataset

__all__ = ["read_letor", "write_letor"]

Source = Union[str, "os.PathLike[str]", IO[str], Iterable[str]]
_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
_TWO_COLONS = re.compile(r":[^\s:]*:")
_MAX_INDEX = 1 << 24  # 16.7M features: beyond that a "dense" row is not what anyone wants


def _open(path: str | os.PathLike[str], mode: str) -> IO[str]:
    opener = _OPENERS.get(Path(path).suffix.lower(), open)
    return opener(path, mode, encoding="utf-8", errors="replace" if "r" in mode else "strict")  # type: ignore[call-arg]


def _lines(source: Source) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of a path or of an open text file / iterable of lines."""
    if isinstance(source, (str, os.PathLike)):
        with _open(source, "rt") as f:
            yield from enumerate(f, start=1)
        return
    for number, line in enumerate(source, start=1):
        if isinstance(line, bytes):
            raise TypeError("read_letor reads text: open the file in text mode ('rt') or pass its path")
        yield number, line


class _Chunk:
    """Raw tokens of up to ``size`` documents, parsed to arrays in one pass (numpy's C parser)."""

    def __init__(self) -> None:
        self.numbers: list[int] = []
        self.labels: list[str] = []
        self.qids: list[str] = []
        self.tokens: list[str] = []
        self.counts: list[int] = []
        self.lines: list[str] = []

    def add(self, number: int, line: str, body: list[str]) -> None:
        self.numbers.append(number)
        self.lines.append(line)
        self.labels.append(body[0])
        self.qids.append(body[1])
        self.tokens.extend(body[2:])
        self.counts.append(len(body) - 2)


class _Parser:
    def __init__(self, name: str, n_features: int | None, zero_based: bool) -> None:
        self.name = name
        self.n_features = n_features
        self.zero_based = zero_based

    def error(self, number: int, message: str) -> ValueError:
        return ValueError(f"{self.name}, line {number}: {message}")

    # -- one line, strictly: used to locate and explain any error of a chunk
    def parse_line(self, number: int, body: list[str]) -> tuple[float, str, list[int], list[float]]:
        if len(body) < 2:
            raise self.error(number, f"expected '<grade> qid:<query> <index>:<value> ...', got {' '.join(body)!r}")
        try:
            label = float(body[0])
        except ValueError:
            raise self.error(number, f"the grade {body[0]!r} is not a number") from None
        if not math.isfinite(label):
            raise self.error(number, f"the grade {body[0]!r} is not finite")
        if not body[1].startswith("qid:") or len(body[1]) == 4:
            raise self.error(number, f"the second field must be 'qid:<query id>', got {body[1]!r}")
        indices, values, seen = [], [], set()
        lowest = 0 if self.zero_based else 1
        for token in body[2:]:
            index_text, colon, value_text = token.partition(":")
            if not colon or ":" in value_text:
                raise self.error(number, f"feature {token!r} is not '<index>:<value>'")
            try:
                index_value = float(index_text)
            except ValueError:
                index_value = math.nan
            if not index_value.is_integer():
                raise self.error(number, f"feature index {index_text!r} in {token!r} is not an integer")
            index = int(index_value)
            if index < lowest:
                hint = "" if self.zero_based else " (indices are 1-based; pass zero_based=True for 0-based files)"
                raise self.error(number, f"feature index {index} is below {lowest}{hint}")
            if self.n_features is not None and index - lowest >= self.n_features:
                raise self.error(number, f"feature index {index} is beyond n_features={self.n_features}")
            if index - lowest >= _MAX_INDEX:
                raise self.error(number, f"feature index {index} is beyond the supported {_MAX_INDEX} features")
            if index in seen:
                raise self.error(number, f"feature index {index} appears twice")
            seen.add(index)
            try:
                value = float(value_text)
            except ValueError:
                raise self.error(number, f"feature value {value_text!r} in {token!r} is not a number") from None
            if not math.isfinite(value):
                raise self.error(number, f"feature value {value_text!r} in {token!r} is not finite")
            indices.append(index - lowest)
            values.append(value)
        return label, body[1][4:], indices, values

    def parse_chunk_strictly(self, chunk: _Chunk) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray, np.ndarray]:
        labels, qids, rows, columns, values = [], [], [], [], []
        for row, (number, line) in enumerate(zip(chunk.numbers, chunk.lines)):
            label, qid, index, value = self.parse_line(number, line.partition("#")[0].split())
            labels.append(label)
            qids.append(qid)
            rows.extend([row] * len(index))
            columns.extend(index)
            values.extend(value)
        return (
            np.asarray(labels, dtype=np.float64),
            qids,
            np.asarray(rows, dtype=np.int64),
            np.asarray(columns, dtype=np.int64),
            np.asarray(values, dtype=np.float32),
        )

    # -- a chunk at once (numpy's C parser); on any doubt, the strict parser decides
    def parse_chunk(self, chunk: _Chunk) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray, np.ndarray]:
        """(labels (n,), qids, row (T,), column (T,), value (T,)) of the chunk's feature tokens."""
        try:
            labels = np.array(chunk.labels, dtype=np.float64) if chunk.labels else np.zeros(0)
            ok = bool(np.isfinite(labels).all()) and all(len(q) > 4 and q.startswith("qid:") for q in chunk.qids)
            joined = " ".join(chunk.tokens)
            # every token holds exactly one colon: as many colons as tokens, and no token with two
            ok = ok and joined.count(":") == len(chunk.tokens) and _TWO_COLONS.search(joined) is None
            if ok and chunk.tokens:
                numbers = np.fromstring(joined.replace(":", " "), dtype=np.float64, sep=" ")
                ok = numbers.size == 2 * len(chunk.tokens)
            else:
                numbers = np.zeros(0)
        except ValueError:
            ok = False
        if ok:
            index, value = numbers[0::2], numbers[1::2]
            lowest = 0 if self.zero_based else 1
            column = index - lowest
            limit = min(self.n_features, _MAX_INDEX) if self.n_features is not None else _MAX_INDEX
            ok = bool(np.isfinite(value).all()) and bool(
                ((column >= 0) & (column < limit) & (column == np.floor(column))).all()
            )
        if ok:
            row = np.repeat(np.arange(len(chunk.counts)), chunk.counts)
            column = column.astype(np.int64)
            if column.size > 1:  # no index twice on a line: increasing indices (the norm), else a full check
                same_row = row[1:] == row[:-1]
                if not bool((np.diff(column)[same_row] > 0).all()):
                    key = row * _MAX_INDEX + column
                    ok = np.unique(key).size == key.size
        if not ok:  # the strict parser names the bad line, or parses what the fast one could not
            return self.parse_chunk_strictly(chunk)
        return labels, [q[4:] for q in chunk.qids], row, column, value.astype(np.float32)


def read_letor(
    source: Source,
    *,
    n_features: int | None = None,
    zero_based: bool = False,
    chunk_lines: int = 8192,
) -> QueryDataset:
    """Read a LETOR/SVMlight ranking file into a :class:`~torch_rankeval.data.QueryDataset`.

    Args:
        source: a path (``.gz``, ``.bz2`` and ``.xz`` are decompressed on the fly), an open text
            file, or any iterable of lines.
        n_features: number of features; default the largest index in the file. A larger index is an
            error. Give it to read several files (train/validation/test) to the same width.
        zero_based: feature indices start at 0 (default False: 1-based, as in all the public sets).
        chunk_lines: documents parsed per chunk (memory/speed trade-off only).

    Returns:
        The documents grouped by query in order of first appearance (documents of a query need not
        be contiguous; within a query they keep the file's order), with ``float32`` features
        (missing features are 0), ``float32`` grades and the file's query ids as ``qids``.

    Raises:
        ValueError: on a malformed line, naming the file and line number: fewer than two fields, a
            grade that is not a finite number, a second field that is not ``qid:<id>``, a feature
            that is not ``<index>:<value>``, a non-integer, out-of-range or repeated index, a
            non-finite value. Blank lines and lines holding only a comment are skipped.

    Example:
        >>> import io
        >>> from torch_rankeval.data import read_letor
        >>> text = '''2 qid:7 1:0.5 3:1.0 # docid = d1
        ... 0 qid:7 2:0.25
        ... 1 qid:9 1:1 2:2 3:3
        ... '''
        >>> data = read_letor(io.StringIO(text))
        >>> data.qids, data.list_lengths.tolist(), data.target.tolist()
        (['7', '9'], [2, 1], [2.0, 0.0, 1.0])
        >>> data.features
        tensor([[0.5000, 0.0000, 1.0000],
                [0.0000, 0.2500, 0.0000],
                [1.0000, 2.0000, 3.0000]])
        >>> read_letor(io.StringIO("1 qid:7 1:0.5\\n0 7 1:0.5\\n"))
        Traceback (most recent call last):
        ...
        ValueError: <lines>, line 2: the second field must be 'qid:<query id>', got '7'
    """
    if n_features is not None and (isinstance(n_features, bool) or not isinstance(n_features, int) or n_features < 1):
        raise ValueError(f"n_features must be a positive int or None, got {n_features!r}")
    if isinstance(chunk_lines, bool) or not isinstance(chunk_lines, int) or chunk_lines < 1:
        raise ValueError(f"chunk_lines must be a positive int, got {chunk_lines!r}")
    name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else getattr(source, "name", "<lines>")
    parser = _Parser(name, n_features, zero_based)

    blocks: list[np.ndarray] = []  # dense float32 features of each chunk, width = max column + 1 so far
    label_parts: list[np.ndarray] = []
    codes: list[int] = []  # query of each document, numbered by first appearance
    qid_code: dict[str, int] = {}
    width = n_features or 0

    def flush(chunk: _Chunk) -> None:
        nonlocal width
        labels, qids, row, column, value = parser.parse_chunk(chunk)
        if n_features is None and column.size:
            width = max(width, int(column.max()) + 1)
        block = np.zeros((len(labels), width), dtype=np.float32)
        block[row, column] = value
        blocks.append(block)
        label_parts.append(labels.astype(np.float32))
        codes.extend(qid_code.setdefault(q, len(qid_code)) for q in qids)

    chunk = _Chunk()
    for number, line in _lines(source):
        body = line.partition("#")[0].split()
        if not body:
            continue
        if len(body) < 2:
            parser.parse_line(number, body)  # raises with the line number
        chunk.add(number, line, body)
        if len(chunk.counts) >= chunk_lines:
            flush(chunk)
            chunk = _Chunk()
    if chunk.counts:
        flush(chunk)

    features = np.zeros((len(codes), width), dtype=np.float32)
    start = 0
    for block in blocks:  # earlier chunks may be narrower: their missing columns are 0
        features[start : start + block.shape[0], : block.shape[1]] = block
        start += block.shape[0]
    blocks.clear()
    target = np.concatenate(label_parts) if label_parts else np.zeros(0, dtype=np.float32)
    code_arr = np.asarray(codes, dtype=np.int64)
    if code_arr.size and bool((np.diff(code_arr) < 0).any()):  # a query's documents are not contiguous
        order = np.argsort(code_arr, kind="stable")
        features, target, code_arr = features[order], target[order], code_arr[order]
    counts = np.bincount(code_arr, minlength=len(qid_code))
    offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(counts)]))
    return QueryDataset(torch.from_numpy(features), torch.from_numpy(target), offsets, list(qid_code))


def _number(value: float) -> str:
    """A grade as text: an integer without decimals."""
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def _shortest(values: np.ndarray) -> list[str]:
    """float32 values as the shortest of ``%.7g`` / ``%.9g`` that reads back to the same float32."""
    if values.size == 0:
        return []
    text = " ".join(["%.7g"] * values.size) % tuple(values.tolist())
    back = np.fromstring(text, dtype=np.float64, sep=" ").astype(np.float32)
    short = text.split(" ")
    for i in np.flatnonzero(back != values).tolist():
        short[i] = "%.9g" % float(values[i])
    return short


def write_letor(destination: str | os.PathLike[str] | IO[str], data: QueryDataset, *, sparse: bool = False) -> None:
    """Write a :class:`~torch_rankeval.data.QueryDataset` as a LETOR/SVMlight file.

    Args:
        destination: a path (``.gz``, ``.bz2``, ``.xz`` are compressed) or an open text file.
        data: the queries; their ``qids`` become the ``qid:`` fields.
        sparse: write only non-zero features (as Yahoo!'s files do); default all features
            (as MSLR's). Values are written with the fewest digits that read back to the same
            ``float32``, so :func:`read_letor` restores the data exactly.

    Example:
        >>> import io, torch
        >>> from torch_rankeval.data import QueryDataset, read_letor, write_letor
        >>> data = QueryDataset(torch.tensor([[0.5, 0.0], [0.1, 2.0]]), torch.tensor([1.0, 0.0]), torch.tensor([0, 2]), ["q1"])
        >>> out = io.StringIO()
        >>> write_letor(out, data)
        >>> print(out.getvalue(), end="")
        1 qid:q1 1:0.5 2:0
        0 qid:q1 1:0.1 2:2
        >>> torch.equal(read_letor(io.StringIO(out.getvalue())).features, data.features)
        True
    """
    if not isinstance(data, QueryDataset):
        raise TypeError(f"data must be a QueryDataset, got {type(data).__name__}")
    if isinstance(destination, (str, os.PathLike)):
        with _open(destination, "wt") as f:
            _write(f, data, sparse)
    elif hasattr(destination, "write"):  # an open text file
        _write(destination, data, sparse)
    else:
        raise TypeError(f"destination must be a path or an open text file, got {type(destination).__name__}")


def _write(f: IO[str], data: QueryDataset, sparse: bool) -> None:
    for qid in data.qids:
        if not qid or any(c.isspace() for c in qid) or "#" in qid:
            raise ValueError(f"query id {qid!r} cannot be written: it must be non-empty, without spaces or '#'")
    features = data.features.detach().cpu().to(torch.float32).numpy()
    target = data.target.detach().cpu().to(torch.float64).numpy()
    width = features.shape[1]
    prefixes = [f"{c + 1}:" for c in range(width)]
    qid_of = np.repeat(np.arange(len(data.qids)), np.diff(data.offsets.tolist()))
    block = 4096
    for start in range(0, features.shape[0], block):  # format a block of documents at once
        rows = features[start : start + block]
        if sparse:
            nonzero = rows != 0
            texts = _shortest(rows[nonzero])
            counts = nonzero.sum(1).tolist()
            columns = np.nonzero(nonzero)[1].tolist()
        else:
            texts = _shortest(rows.reshape(-1))
            counts = [width] * rows.shape[0]
        lines, at = [], 0
        for i, count in enumerate(counts):
            d = start + i
            names = [prefixes[c] for c in columns[at : at + count]] if sparse else prefixes
            fields = " ".join(map(str.__add__, names, texts[at : at + count]))
            at += count
            lines.append(f"{_number(target[d])} qid:{data.qids[qid_of[d]]}{' ' if fields else ''}{fields}\n")
        f.write("".join(lines))
