"""Vectorised reading of whitespace-separated TREC text (qrels and run files).

A file is read in blocks of a few megabytes that end at a line boundary. Each block is tokenised
with numpy (whitespace transitions -> token boundaries, newlines -> lines), the wanted fields are
gathered into fixed-width byte matrices, and numbers are parsed column-wise: no Python code runs per
line. Scores take Clinger's exact fast path (at most 2^53 as a decimal mantissa, at most 22
fraction digits: one correctly rounded division, the same double as C's ``strtod``); other
spellings (exponents, long mantissas) go through numpy's exact string conversion.

Rules follow trec_eval: fields are separated by any whitespace, blank lines are skipped, a line
whose first token starts with ``#`` is a comment, run lines have at least six fields (later fields
are ignored) and the run tag comes from the last line. Qrels lines have exactly four fields with an
integer grade. Errors name the file and line.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import sys
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator

import numpy as np

__all__ = ["TrecFormatError", "Table", "read_table", "progress_bar", "BLOCK_BYTES", "PROGRESS_MIN_BYTES"]

BLOCK_BYTES = 4 << 20
PROGRESS_MIN_BYTES = 64 << 20

_POW10_INT = np.array([10**i for i in range(19)], dtype=np.int64)
_POW10_FLOAT = np.array([float(10**i) for i in range(23)], dtype=np.float64)  # exact up to 1e22
_MAX_EXACT = 2**53


class TrecFormatError(ValueError):
    """A qrels or run file that cannot be read; the message names the file and the line."""


@dataclass
class Table:
    """The fields read from a qrels or run file, one entry per content line.

    Attributes:
        qid: ``(n,)`` int64 index into ``qid_names`` (in order of first appearance).
        qid_names: the distinct query ids as bytes.
        docno: ``(n, W)`` uint8 docnos, NUL-padded to a width that is a multiple of 8.
        value: ``(n,)`` int64 grades (qrels) or float64 scores (run).
        line: ``(n,)`` int64 1-based line numbers in the file.
        tag: the run tag of the last line (runs), else ``None``.
    """

    qid: np.ndarray
    qid_names: list[bytes]
    docno: np.ndarray
    value: np.ndarray
    line: np.ndarray
    tag: bytes | None = None


@dataclass(frozen=True)
class _Kind:
    what: str
    fields: str
    exact: int | None  # exact field count, or None with a minimum
    minimum: int
    value_field: int
    integer: bool


_KINDS = {
    "qrels": _Kind("qrels", "'qid iteration docno relevance'", 4, 4, 3, True),
    "run": _Kind("run", "'qid Q0 docno rank score tag'", None, 6, 4, False),
}


def progress_bar(
    total: int | None, desc: str, enabled: bool | None
) -> tuple[Callable[[int], None], Callable[[], None]]:
    """``(advance, close)`` of a progress bar on stderr: tqdm if installed, else rich, else none.

    ``enabled=None`` shows it for inputs of at least 64 MiB when stderr is a terminal.
    """
    if enabled is None:
        enabled = total is not None and total >= PROGRESS_MIN_BYTES and sys.stderr.isatty()
    if not enabled:
        return (lambda n: None), (lambda: None)
    try:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, leave=False, file=sys.stderr)
        return bar.update, bar.close
    except ImportError:
        pass
    try:
        from rich.progress import Progress

        progress = Progress(transient=True)
        progress.start()
        task = progress.add_task(desc, total=total)
        return (lambda n: progress.advance(task, n)), progress.stop
    except ImportError:
        return (lambda n: None), (lambda: None)


@contextlib.contextmanager
def _open(path: str | os.PathLike) -> Iterator[tuple[BinaryIO, BinaryIO, int | None]]:
    """(decoded stream, raw stream for progress, raw size); gzip is detected by its magic bytes."""
    if str(path) == "-":
        yield sys.stdin.buffer, sys.stdin.buffer, None
        return
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise TrecFormatError(f"{path}: cannot open: {exc.strerror or exc}") from None
    with raw:
        size = os.fstat(raw.fileno()).st_size
        magic = raw.read(2)
        raw.seek(0)
        if magic == b"\x1f\x8b":
            with gzip.GzipFile(fileobj=raw, mode="rb") as decoded:
                yield decoded, raw, size
        else:
            yield raw, raw, size


def _blocks(stream: BinaryIO, path: str, block_bytes: int) -> Iterator[bytes]:
    """Blocks of whole lines (each ends with a newline)."""
    rest = b""
    while True:
        try:
            data = stream.read(block_bytes)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise TrecFormatError(f"{path}: cannot read: {exc}") from None
        if not data:
            break
        data = rest + data if rest else data
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            rest = data
            continue
        rest = data[cut:]
        yield data[:cut]
    if rest:
        yield rest + b"\n"


def _tokenize(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Token starts/ends, per-line token count and first token, and newline positions.

    ``a`` is a block of bytes that ends with a newline. Every byte up to 0x20 separates fields:
    space, tab, CR, LF, vertical tab and form feed (C's ``isspace``) and the other control
    characters, which have no place in qrels or runs.
    """
    ws = a <= 32
    bounds = np.flatnonzero(ws[1:] != ws[:-1]) + 1
    if not ws[0]:
        bounds = np.concatenate([np.zeros(1, dtype=bounds.dtype), bounds])
    starts, ends = bounds[0::2], bounds[1::2]
    newlines = np.flatnonzero(a == 10)
    line_starts = np.empty(len(newlines), dtype=np.int64)
    line_starts[0] = 0
    line_starts[1:] = newlines[:-1] + 1
    first = np.searchsorted(starts, line_starts)
    counts = np.diff(first, append=len(starts))
    return starts, ends, counts, first, newlines


def _columns(a: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tokens as a NUL-padded ``(W, n)`` uint8 matrix (one contiguous row per character
    position, so that the per-position loops below are plain vector operations) and their lengths."""
    lengths = ends - starts
    width = int(lengths.max()) if len(lengths) else 1
    out = np.empty((width, len(starts)), dtype=np.uint8)
    last = len(a) - 1
    for j in range(width):
        col = a[np.minimum(starts + j, last)]
        col[lengths <= j] = 0
        out[j] = col
    return out, lengths


def _decimal(cols: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decimal fast path over ``(W, n)`` characters: ``(ok, mantissa, fraction digits, negative)``.

    ``ok`` marks tokens of the form ``[+-]digits[.digits]`` with 1 to 18 digits; the mantissa is
    exact for them (other tokens get meaningless values and must be parsed another way).
    """
    n = cols.shape[1]
    mantissa = np.zeros(n, dtype=np.int64)
    frac = np.zeros(n, dtype=np.int64)
    ndig = np.zeros(n, dtype=np.int64)
    ndot = np.zeros(n, dtype=np.int64)
    seen_dot = np.zeros(n, dtype=bool)
    ok = np.ones(n, dtype=bool)
    negative = cols[0] == 45
    with np.errstate(over="ignore"):
        for j, c in enumerate(cols):
            d = c - np.uint8(48)
            isd = d < 10  # padding (0) wraps to 208
            isdot = c == 46
            allowed = isd | isdot | (lengths <= j)
            if j == 0:
                allowed |= negative | (c == 43)
            ok &= allowed
            mantissa = np.where(isd, mantissa * 10 + d, mantissa)
            frac += isd & seen_dot
            seen_dot |= isdot
            ndig += isd
            ndot += isdot
    ok &= (ndig >= 1) & (ndig <= 18) & (ndot <= 1)
    return ok, mantissa, frac, negative


class _LineError(Exception):
    """A malformed line, by its 1-based number inside a block (made global by the reader)."""

    def __init__(self, line: int, message: str, text: bytes | None = None) -> None:
        super().__init__(message)
        self.line, self.message, self.text = line, message, text


def _line_text(a: np.ndarray, newlines: np.ndarray, i: int) -> bytes:
    start = 0 if i == 0 else int(newlines[i - 1]) + 1
    return a[start : int(newlines[i])].tobytes()


def _token(cols: np.ndarray, lengths: np.ndarray, i: int) -> bytes:
    return cols[: lengths[i], i].tobytes()


def _parse_values(kind: _Kind, cols: np.ndarray, lengths: np.ndarray, lines: np.ndarray) -> np.ndarray:
    ok, mantissa, frac, negative = _decimal(cols, lengths)
    if kind.integer:
        ok &= frac == 0
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            token = _token(cols, lengths, i)
            raise _LineError(int(lines[i]), f"relevance {token.decode('utf-8', 'replace')!r} is not an integer grade")
        return np.where(negative, -mantissa, mantissa)
    ok &= (mantissa <= _MAX_EXACT) & (frac <= 22)
    values = mantissa / _POW10_FLOAT[np.minimum(frac, 22)]
    values = np.where(negative, -values, values)
    slow = np.flatnonzero(~ok)
    if len(slow):
        tokens = np.ascontiguousarray(cols[:, slow].T).view(f"S{cols.shape[0]}").ravel()
        try:
            values[slow] = tokens.astype(np.float64)
        except ValueError:
            for j, token in zip(slow, tokens):
                try:
                    float(token)
                except ValueError:
                    raise _LineError(
                        int(lines[j]), f"score {token.decode('utf-8', 'replace')!r} is not a number"
                    ) from None
            raise
        finite = np.isfinite(values[slow])
        if not finite.all():
            j = slow[int(np.flatnonzero(~finite)[0])]
            token = _token(cols, lengths, j).decode("utf-8", "replace")
            raise _LineError(int(lines[j]), f"score {token!r} is not a finite number")
    return values


def _parse_block(kind: _Kind, block: bytes) -> tuple[tuple | None, int]:
    """The parsed content lines of a block (``None`` if it has none) and its number of lines.

    Line numbers and query ids are local to the block (query ids index the block's own sorted
    names), so blocks parse independently, in parallel threads: numpy releases the GIL.
    """
    a = np.frombuffer(block, dtype=np.uint8)
    starts, ends, counts, first, newlines = _tokenize(a)
    filled = np.flatnonzero(counts > 0)
    content = filled[a[starts[first[filled]]] != 35]  # '#' starts a comment line
    if not len(content):
        return None, len(newlines)
    n_fields = counts[content]
    bad = n_fields != kind.exact if kind.exact is not None else n_fields < kind.minimum
    if bad.any():
        i = int(content[np.flatnonzero(bad)[0]])
        found = int(counts[i])
        want = f"{kind.exact}" if kind.exact is not None else f"at least {kind.minimum}"
        raise _LineError(i + 1, f"expected {want} fields {kind.fields}, found {found}", _line_text(a, newlines, i))
    lines = content + 1
    base = first[content]
    qm, _ = _columns(a, starts[base], ends[base])
    dm, _ = _columns(a, starts[base + 2], ends[base + 2])
    vm, vlen = _columns(a, starts[base + kind.value_field], ends[base + kind.value_field])
    values = _parse_values(kind, vm, vlen, lines)

    # Query ids: only the first line of each run of equal qids is looked up.
    head = np.zeros(len(content), dtype=bool)
    head[0] = True
    for c in qm:
        head[1:] |= c[1:] != c[:-1]
    heads = np.flatnonzero(head)
    names, inverse = np.unique(
        np.ascontiguousarray(qm[:, heads].T).view(f"S{qm.shape[0]}").ravel(), return_inverse=True
    )
    qid = inverse.ravel()[np.cumsum(head) - 1]
    tag = None
    if kind.what == "run":
        last = int(first[content[-1]]) + 5
        tag = a[starts[last] : ends[last]].tobytes()
    return (names, qid, np.ascontiguousarray(dm.T), values, lines, tag), len(newlines)


def read_table(
    path: str | os.PathLike, kind: str, *, progress: bool | None = None, block_bytes: int = BLOCK_BYTES
) -> Table:
    """Read a qrels (``kind="qrels"``) or run (``kind="run"``) file, plain or gzip, or ``"-"`` for stdin.

    Blocks are parsed by a pool of threads (one per CPU) while the next blocks are read.

    Raises:
        TrecFormatError: the file cannot be opened or read, a line is malformed (wrong number of
            fields, a non-numeric score, a non-integer grade), or it holds no content line.
    """
    spec = _KINDS[kind]
    name = str(path)
    qid_ids: dict[bytes, int] = {}
    parts = []
    tag = None
    line0 = 0

    def consume(result: tuple[tuple | None, int]) -> None:
        nonlocal line0, tag
        parsed, n_lines = result
        if parsed is not None:
            names, qid, docno, values, lines, block_tag = parsed
            ids = np.array([qid_ids.setdefault(bytes(n), len(qid_ids)) for n in names], dtype=np.int64)
            parts.append((ids[qid], docno, values, lines + line0))
            tag = block_tag if block_tag is not None else tag
        line0 += n_lines

    def located(exc: _LineError) -> TrecFormatError:
        shown = "" if exc.text is None else f": {exc.text.decode('utf-8', 'replace').strip()[:200]!r}"
        return TrecFormatError(f"{name}, line {line0 + exc.line}: {exc.message}{shown}")

    workers = min(os.cpu_count() or 1, 8)
    with _open(path) as (stream, raw, size), ThreadPoolExecutor(max_workers=workers) as pool:
        advance, close = progress_bar(size, os.path.basename(name), progress)
        position = 0
        pending: deque = deque()
        try:
            for block in _blocks(stream, name, block_bytes):
                pending.append(pool.submit(_parse_block, spec, block))
                while len(pending) > 2 * workers or (pending and pending[0].done()):
                    consume(pending.popleft().result())
                if size is not None:
                    now = raw.tell()
                    advance(now - position)
                    position = now
            while pending:
                consume(pending.popleft().result())
        except _LineError as exc:
            for future in pending:
                future.cancel()
            raise located(exc) from None
        finally:
            close()
    if not parts:
        raise TrecFormatError(f"{name}: no {spec.what} lines (the file is empty or holds only comments)")
    width = _round8(max(p[1].shape[1] for p in parts))
    docno = np.zeros((sum(len(p[0]) for p in parts), width), dtype=np.uint8)
    offset = 0
    for p in parts:
        docno[offset : offset + len(p[0]), : p[1].shape[1]] = p[1]
        offset += len(p[0])
    return Table(
        qid=np.concatenate([p[0] for p in parts]),
        qid_names=list(qid_ids),
        docno=docno,
        value=np.concatenate([p[2] for p in parts]),
        line=np.concatenate([p[3] for p in parts]),
        tag=tag,
    )


def _round8(width: int) -> int:
    """Docno matrices are padded to whole 8-byte words (one int64 key column per word)."""
    return max(8, -(-width // 8) * 8)


def decode(name: bytes) -> str:
    """A query id or docno as text (undecodable bytes survive a round trip)."""
    return name.decode("utf-8", "surrogateescape")


def encode(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


def table_from_rows(qids: list[str], docnos: list[str], values: np.ndarray, tag: str | None = None) -> Table:
    """A :class:`Table` from Python rows (used by ``from_dict``)."""
    qid_ids: dict[bytes, int] = {}
    qid = np.array([qid_ids.setdefault(encode(q), len(qid_ids)) for q in qids], dtype=np.int64)
    encoded = [encode(d) for d in docnos]
    width = _round8(max((len(d) for d in encoded), default=1))
    docno = np.frombuffer(b"".join(d.ljust(width, b"\0") for d in encoded), dtype=np.uint8).reshape(len(encoded), width)
    return Table(
        qid,
        list(qid_ids),
        docno.copy(),
        values,
        np.zeros(len(qid), dtype=np.int64),
        None if tag is None else encode(tag),
    )
