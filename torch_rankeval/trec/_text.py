"""Vectorised reading of whitespace-separated TREC text (qrels and run files).

A file is read in blocks of a few megabytes that end at a line boundary. Each block is tokenised
with numpy (whitespace transitions -> token boundaries, newlines -> lines), the wanted fields are
gathered into byte matrices, and numbers are parsed column-wise: no Python code runs per line.
Docnos and query ids are stored as wide as most of them need, not as wide as the longest: the
bytes beyond that width of the few longer ones go to a separate buffer (:class:`Strings`), so
memory follows the file's size whatever one line holds. Scores take Clinger's exact fast path (at
most 2^53 as a decimal mantissa, at most 22 fraction digits: one correctly rounded division, the
same double as C's ``strtod``); other spellings (exponents, long mantissas) go through numpy's
exact string conversion, and the rare rest (hexadecimal floats, or a token with ``_``, which numpy
would read as Python's ``float`` does, ``1_000`` as 1000) through :func:`_strtod`, which reads what
strtod reads whole and refuses, with the line, a token strtod would read only in part.

Rules follow trec_eval: fields are separated by any whitespace, blank lines are skipped, a line
whose first token starts with ``#`` is a comment, run lines have at least six fields (later fields
are ignored) and the run tag comes from the last line. Qrels lines have exactly four fields with an
integer grade. A UTF-8 byte-order mark at the start of a file (or of stdin) is skipped; a UTF-16
or UTF-32 file is an error (convert it to UTF-8). Errors name the file and line. Pipes read as files:
``"-"`` (standard input), ``/dev/stdin``, a FIFO or a process substitution is read without seeking,
gzip detected by its first two bytes there too.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import re
import stat
import sys
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator

import numpy as np

__all__ = [
    "EmptyTrecFile",
    "TrecFormatError",
    "Strings",
    "Table",
    "read_table",
    "progress_bar",
    "BLOCK_BYTES",
    "PROGRESS_MIN_BYTES",
]

BLOCK_BYTES = 4 << 20
PROGRESS_MIN_BYTES = 64 << 20

_POW10_INT = np.array([10**i for i in range(19)], dtype=np.int64)
_POW10_FLOAT = np.array([float(10**i) for i in range(23)], dtype=np.float64)  # exact up to 1e22
_MAX_EXACT = 2**53


class TrecFormatError(ValueError):
    """A qrels or run file that cannot be read; the message names the file and the line."""


class EmptyTrecFile(TrecFormatError):
    """A qrels or run file without a single line of content (empty, or only comments): trec_eval refuses it,
    ir_measures scores it (``trec.evaluate(..., convention="ir_measures")``)."""


# Shared read-only empties: strings without tails (nearly all) allocate nothing for them.
_NO_ROWS = np.zeros(0, dtype=np.int64)
_NO_BYTES = np.zeros(0, dtype=np.uint8)
_NO_OFFSETS = np.zeros(1, dtype=np.int64)
_ONE_WORD = np.ones(1, dtype=np.int64)
for _empty in (_NO_ROWS, _NO_BYTES, _NO_OFFSETS, _ONE_WORD):
    _empty.flags.writeable = False


class Strings:
    """Byte strings (docnos, query ids) stored without padding to the longest one.

    The first ``width`` bytes of every string sit in a NUL-padded ``(n, width)`` uint8 matrix
    ``head`` (``width`` a multiple of 8, chosen by :func:`head_width` so that the matrix takes at
    most about twice the strings' own bytes); the bytes beyond ``width`` of the few longer strings
    are concatenated in ``tail``: ``long`` lists those rows (ascending) and ``tail_offsets`` where
    each one's tail starts. So one 10,000-byte docno costs 10,000 bytes, not 10,000 per line.
    Strings hold no NUL byte (NUL is padding; the readers split fields at every byte up to 0x20).

    Example:
        >>> s = Strings.from_bytes([b"d1", b"a-much-longer-docno", b"d22"], width=8)
        >>> s.width, s.long.tolist(), s.tail.tobytes(), s.tolist()
        (8, [1], b'onger-docno', [b'd1', b'a-much-longer-docno', b'd22'])
        >>> s.take(np.array([1, 1, 0])).tolist()
        [b'a-much-longer-docno', b'a-much-longer-docno', b'd1']
    """

    __slots__ = ("head", "long", "tail", "tail_offsets")
    head: np.ndarray
    long: np.ndarray
    tail: np.ndarray
    tail_offsets: np.ndarray

    def __init__(
        self,
        head: np.ndarray,
        long: np.ndarray | None = None,
        tail: np.ndarray | None = None,
        tail_offsets: np.ndarray | None = None,
    ) -> None:
        self.head = head
        self.long = _NO_ROWS if long is None else long
        self.tail = _NO_BYTES if tail is None else tail
        self.tail_offsets = _NO_OFFSETS if tail_offsets is None else tail_offsets

    def __len__(self) -> int:
        return self.head.shape[0]

    @property
    def width(self) -> int:
        """Bytes per row of ``head`` (a multiple of 8)."""
        return self.head.shape[1]

    @property
    def has_tail(self) -> bool:
        return len(self.long) > 0

    @property
    def nbytes(self) -> int:
        return self.head.nbytes + self.long.nbytes + self.tail.nbytes + self.tail_offsets.nbytes

    @classmethod
    def from_bytes(cls, items: list[bytes], width: int | None = None) -> Strings:
        """Strings from Python bytes objects (``width``: the head width, default :func:`head_width`)."""
        lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
        buf = np.frombuffer(b"".join(items), dtype=np.uint8)
        starts = np.cumsum(lengths) - lengths
        return split_strings(buf, starts, lengths, head_width(lengths) if width is None else width)

    # ------------------------------------------------------------------ rows
    def _tail_rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each row: its index in ``long`` (clipped) and whether it has a tail."""
        pos = np.minimum(np.searchsorted(self.long, rows), len(self.long) - 1)
        return pos, self.long[pos] == rows

    def take(self, index: np.ndarray) -> Strings:
        """The strings at integer positions ``index``."""
        index = np.asarray(index)
        if index.dtype == np.bool_:
            index = np.flatnonzero(index)
        head = self.head[index]
        if not self.has_tail:
            return Strings(head)
        pos, member = self._tail_rows(index)
        rows = np.flatnonzero(member)
        src = pos[rows]
        start = self.tail_offsets[src]
        lengths = self.tail_offsets[src + 1] - start
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        gather = np.repeat(start - offsets[:-1], lengths) + np.arange(offsets[-1])
        return Strings(head, rows.astype(np.int64), self.tail[gather], offsets)

    def replaced(self, positions: np.ndarray, sources: np.ndarray) -> Strings:
        """A copy whose rows ``positions`` hold the strings of rows ``sources`` (a permutation of them)."""
        if self.has_tail:
            index = np.arange(len(self))
            index[positions] = sources
            return self.take(index)
        head = self.head.copy()
        head[positions] = self.head[sources]
        return Strings(head)

    def item(self, i: int) -> bytes:
        """The string of row ``i``."""
        return self.take(np.array([i])).tolist()[0]

    def tolist(self) -> list[bytes]:
        """Every string, as bytes."""
        out = np.ascontiguousarray(self.head).view(f"S{self.width}").ravel().tolist()
        for j, i in enumerate(self.long.tolist()):
            out[i] += self.tail[self.tail_offsets[j] : self.tail_offsets[j + 1]].tobytes()
        return out

    # ------------------------------------------------------------------ 8-byte words
    def n_words(self, rows: np.ndarray) -> np.ndarray:
        """An upper bound of each row's number of 8-byte words (exact for rows with a tail)."""
        out = np.full(len(rows), self.width // 8, dtype=np.int64)
        if self.has_tail:
            pos, member = self._tail_rows(rows)
            tail = self.tail_offsets[pos + 1] - self.tail_offsets[pos]
            out[member] += (tail[member] + 7) // 8
        return out

    def word(self, rows: np.ndarray, c: int, order: bool = False) -> np.ndarray:
        """Word ``c`` (bytes ``8c .. 8c+7``, NUL past the end) of each row: native uint64 words, or
        with ``order=True`` int64 keys whose order is the bytes' order (big-endian, sign flipped)."""
        dtype = ">u8" if order else np.uint64
        hw = self.width // 8
        if c < hw:
            out = np.ascontiguousarray(self.head[rows, 8 * c : 8 * c + 8]).view(dtype).ravel()
        else:
            out = np.zeros(len(rows), dtype=dtype)
            if self.has_tail:
                pos, member = self._tail_rows(rows)
                start = self.tail_offsets[pos] + 8 * (c - hw)
                count = np.clip(self.tail_offsets[pos + 1] - start, 0, 8)
                sel = np.flatnonzero(member & (count > 0))
                if len(sel):
                    offsets = np.arange(8)
                    index = np.minimum(start[sel, None] + offsets, len(self.tail) - 1)
                    b = self.tail[index]
                    b[offsets >= count[sel, None]] = 0
                    out[sel] = b.view(dtype).ravel()
        if order:
            return (out.astype(np.uint64) ^ np.uint64(1 << 63)).view(np.int64)
        return out

    # ------------------------------------------------------------------ layout
    def rewidth(self, width: int) -> Strings:
        """The same strings with another head width."""
        if width == self.width:
            return self
        if width > self.width and not self.has_tail:
            head = np.zeros((len(self), width), dtype=np.uint8)
            head[:, : self.width] = self.head
            return Strings(head)
        # Rebuild from the strings' own bytes (their head bytes, then their tails).
        nonzero = self.head != 0
        head_len = nonzero.sum(1)
        lengths = head_len.copy()
        tail_len = np.diff(self.tail_offsets)
        lengths[self.long] += tail_len
        offsets = np.zeros(len(self) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        buf = np.empty(offsets[-1], dtype=np.uint8)
        head_at = np.repeat(offsets[:-1] - (np.cumsum(head_len) - head_len), head_len) + np.arange(head_len.sum())
        buf[head_at] = self.head[nonzero]
        tail_at = offsets[self.long] + head_len[self.long]
        buf[np.repeat(tail_at - self.tail_offsets[:-1], tail_len) + np.arange(len(self.tail))] = self.tail
        return split_strings(buf, offsets[:-1], lengths, width)

    @staticmethod
    def concat(parts: list[Strings]) -> Strings:
        """The rows of several :class:`Strings` of one width, one after the other."""
        if len(parts) == 1:
            return parts[0]
        head = np.concatenate([p.head for p in parts])
        sizes = np.cumsum([0] + [len(p) for p in parts])
        tails = np.cumsum([0] + [len(p.tail) for p in parts])
        long = np.concatenate([p.long + s for p, s in zip(parts, sizes)])
        offsets = np.concatenate([np.zeros(1, dtype=np.int64)] + [p.tail_offsets[1:] + t for p, t in zip(parts, tails)])
        return Strings(head, long.astype(np.int64), np.concatenate([p.tail for p in parts]), offsets)


def word_stats(lengths: np.ndarray) -> tuple[int, int, np.ndarray]:
    """``(n, words, sizes)`` of strings of these lengths: how many, their 8-byte words in all (at
    least one each) and the distinct sizes in words, ascending (a bincount, not a sort)."""
    if not len(lengths) or lengths.max() <= 8:  # the common case: one word each
        return len(lengths), len(lengths), _ONE_WORD
    words = np.maximum((lengths + 7) // 8, 1)
    return len(words), int(words.sum()), np.flatnonzero(np.bincount(words))


def head_width(
    lengths: np.ndarray | None = None, *, n: int = 0, words: int = 0, sizes: np.ndarray | None = None
) -> int:
    """Head width (bytes) for strings of these ``lengths`` (or ``n`` strings of ``words`` 8-byte
    words in all, whose distinct sizes in words are ``sizes``): the widest string's size among
    those that every string can be padded to within twice the strings' own words.

    Example:
        >>> head_width(np.array([3, 7, 12])), head_width(np.array([20] * 1000 + [10_000]))
        (16, 24)
    """
    if lengths is not None:
        n, words, sizes = word_stats(lengths)
    if n == 0 or sizes is None or not len(sizes):
        return 8
    fits = sizes[sizes * n <= 2 * words]
    return 8 * int(fits.max()) if len(fits) else 8


def split_columns(
    buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Strings ``buf[starts[i] : starts[i] + lengths[i]]`` as a NUL-padded ``(width, n)`` column
    matrix of their first ``width`` bytes (one contiguous row per byte position, so that
    per-position loops are plain vector operations), plus ``(long, tail, tail_offsets)`` of the
    longer ones (see :class:`Strings`)."""
    filled = min(width, int(lengths.max())) if len(lengths) else 0
    cols = np.empty((width, len(starts)), dtype=np.uint8)
    cols[filled:] = 0
    last = len(buf) - 1
    for j in range(filled):
        col = buf[np.minimum(starts + j, last)]
        col[lengths <= j] = 0
        cols[j] = col
    long = np.flatnonzero(lengths > width)
    if not len(long):
        return cols, _NO_ROWS, _NO_BYTES, _NO_OFFSETS
    offsets = np.zeros(len(long) + 1, dtype=np.int64)
    tail_len = lengths[long] - width
    np.cumsum(tail_len, out=offsets[1:])
    tail = buf[np.repeat(starts[long] + width - offsets[:-1], tail_len) + np.arange(offsets[-1])]
    return cols, long.astype(np.int64), tail, offsets


def split_strings(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int) -> Strings:
    """:class:`Strings` of the byte ranges ``buf[starts[i] : starts[i] + lengths[i]]``."""
    cols, long, tail, offsets = split_columns(buf, starts, lengths, width)
    return Strings(np.ascontiguousarray(cols.T), long, tail, offsets)


@dataclass
class Table:
    """The fields read from a qrels or run file, one entry per content line.

    Attributes:
        qid: ``(n,)`` int64 index into ``qid_names`` (in order of first appearance).
        qid_names: the distinct query ids as bytes.
        docno: the docnos (:class:`Strings`).
        value: ``(n,)`` int64 grades (qrels) or float64 scores (run).
        line: ``(n,)`` int64 1-based line numbers in the file.
        tag: the run tag of the last line (runs), else ``None``.
    """

    qid: np.ndarray
    qid_names: list[bytes]
    docno: Strings
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
    # TREC's diversity qrels, read for their second field (the subtopic number) as the value
    "subtopics": _Kind("diversity qrels", "'topic subtopic docno judgment'", 4, 4, 1, True),
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
    with contextlib.suppress(ImportError):
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, leave=False, file=sys.stderr)
        return bar.update, bar.close
    with contextlib.suppress(ImportError):
        from rich.progress import Progress

        progress = Progress(transient=True)
        progress.start()
        task = progress.add_task(desc, total=total)
        return (lambda n: progress.advance(task, n)), progress.stop
    return (lambda n: None), (lambda: None)


class _Prefixed(io.RawIOBase):
    """A stream that serves ``prefix`` (bytes already read from ``stream``) and then the rest of ``stream``:
    how a pipe, which cannot seek back, is read after its first bytes were looked at."""

    def __init__(self, prefix: bytes, stream: BinaryIO) -> None:
        self._prefix, self._stream = prefix, stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _sniffed(raw: BinaryIO, path: str) -> tuple[bytes, BinaryIO]:
    """The first two bytes of ``raw`` (gzip's magic number, when it is gzip) and a stream from its start.

    A regular file seeks back; a pipe, a FIFO, ``/dev/stdin`` or a process substitution cannot, so its
    first bytes are served again in front of the rest (no seek, no second read)."""
    try:
        start = raw.tell() if raw.seekable() else None  # standard input may start past a file's beginning
    except (OSError, ValueError):
        start = None
    try:
        magic = raw.read(2)
        if len(magic) == 1:  # a pipe may deliver one byte at a time
            magic += raw.read(1) or b""
        if start is not None:
            raw.seek(start)
            return magic, raw
    except OSError as exc:
        raise TrecFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return magic, io.BufferedReader(_Prefixed(magic, raw), buffer_size=1 << 20)


@contextlib.contextmanager
def _open(path: str | os.PathLike[str]) -> Iterator[tuple[BinaryIO, BinaryIO, int | None]]:
    """(decoded stream, raw stream for progress, raw size or None for a pipe); gzip is detected by its
    magic bytes, in files and in pipes alike (``"-"``: standard input)."""
    name = str(path)
    if name == "-":
        raw: BinaryIO = sys.stdin.buffer
        closing: contextlib.AbstractContextManager = contextlib.nullcontext()
    else:
        try:
            raw = open(path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise TrecFormatError(f"{path}: cannot open: {exc.strerror or exc}") from None
        closing = raw
    with closing:
        try:
            status = os.fstat(raw.fileno())
            size = status.st_size if stat.S_ISREG(status.st_mode) else None
        except (OSError, ValueError, io.UnsupportedOperation):
            size = None
        magic, stream = _sniffed(raw, name)
        if size is not None and stream is not raw:  # a regular file that cannot seek: no progress by position
            size = None
        if magic == b"\x1f\x8b":
            with gzip.GzipFile(fileobj=stream, mode="rb") as decoded:
                yield decoded, stream, size
        else:
            yield stream, stream, size


_UTF8_BOM = b"\xef\xbb\xbf"
_OTHER_BOMS = {
    b"\xff\xfe\x00\x00": "UTF-32",
    b"\x00\x00\xfe\xff": "UTF-32",
    b"\xff\xfe": "UTF-16",
    b"\xfe\xff": "UTF-16",
}


def _blocks(stream: BinaryIO, path: str, block_bytes: int) -> Iterator[bytes]:
    """Blocks of whole lines (each ends with a newline); a leading UTF-8 byte-order mark is dropped."""
    rest = b""
    first = True
    while True:
        try:
            data = stream.read(block_bytes)
            while first and data and len(data) < 4:  # enough bytes to recognise a byte-order mark
                more = stream.read(block_bytes)
                if not more:
                    break
                data += more
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise TrecFormatError(f"{path}: cannot read: {exc}") from None
        if first:
            first = False
            data = _drop_bom(data, path)
            if not data:
                continue
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


def _drop_bom(data: bytes, path: str) -> bytes:
    """The first bytes of a file without a UTF-8 byte-order mark; other byte-order marks are errors."""
    if data.startswith(_UTF8_BOM):
        return data[len(_UTF8_BOM) :]
    for bom, encoding in _OTHER_BOMS.items():
        if data.startswith(bom):
            raise TrecFormatError(
                f"{path}: the file is {encoding}-encoded (it starts with a {encoding} byte-order mark); "
                f"TREC files are read as UTF-8 or ASCII: convert it, e.g. with iconv -f {encoding} -t UTF-8"
            )
    return data


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
    first = np.searchsorted(starts, np.concatenate([[0], newlines[:-1] + 1]))  # the first token of each line
    counts = np.diff(first, append=len(starts))
    return starts, ends, counts, first, newlines


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


def _token(cols: np.ndarray, lengths: np.ndarray, i: int) -> bytes:
    return cols[: lengths[i], i].tobytes()


# What C's strtod reads at the start of a token (glibc: decimal, hexadecimal, inf/infinity, nan(...)).
_STRTOD_DECIMAL = re.compile(rb"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_STRTOD_HEX = re.compile(rb"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?")
_STRTOD_WORD = re.compile(rb"[+-]?(?:inf(?:inity)?|nan(?:\([0-9A-Za-z_]*\))?)", re.IGNORECASE)


def _strtod(token: bytes, line: int) -> float:
    """``token`` read as C's strtod reads it, when strtod reads all of it (else a :class:`_LineError`
    that says what strtod would read: trec_eval, which calls ``atof``, would take that prefix silently).

    Decimal tokens give the correctly rounded double (as glibc's strtod); hexadecimal floats
    (``0x1.8p1``) the exact one; ``inf``, ``nan`` and overflows give non-finite values, which the
    caller refuses.
    """
    matches = [m.group() for m in (r.match(token) for r in (_STRTOD_HEX, _STRTOD_DECIMAL, _STRTOD_WORD)) if m]
    read = max(matches, key=len, default=b"")
    if read != token:
        text = token.decode("utf-8", "replace")
        if not read:
            raise _LineError(line, f"score {text!r} is not a number")
        raise _LineError(
            line,
            f"score {text!r} is not a number: C's strtod (trec_eval's reader) would read only "
            f"{read.decode()!r} of it and drop the rest; write the number alone (no '_' separators, no suffix)",
        )
    if _STRTOD_HEX.fullmatch(token):
        try:
            return float.fromhex(token.decode())
        except OverflowError:
            return float("-inf") if token.startswith(b"-") else float("inf")
    if _STRTOD_WORD.fullmatch(token):
        return float(token.split(b"(")[0])  # inf, -Infinity, nan (the payload of nan(...) aside)
    return float(token)


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
        sub = cols[:, slow]
        tokens = np.ascontiguousarray(sub.T).view(f"S{cols.shape[0]}").ravel()
        try:
            if (sub == 95).any():  # '_': numpy (Python's float) reads 1_000 as 1000, strtod as 1
                raise ValueError("underscore")
            values[slow] = tokens.astype(np.float64)
        except ValueError:  # hexadecimal floats, or a token strtod does not read whole: one by one
            for j, token in zip(slow.tolist(), tokens.tolist()):
                values[j] = _strtod(token, int(lines[j]))
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
        start = 0 if i == 0 else int(newlines[i - 1]) + 1
        raise _LineError(
            i + 1, f"expected {want} fields {kind.fields}, found {found}", a[start : newlines[i]].tobytes()
        )
    lines = content + 1
    base = first[content]
    q_start, q_len = starts[base], ends[base] - starts[base]
    qm, q_long, q_tail, q_offsets = split_columns(a, q_start, q_len, head_width(q_len))
    d_start, d_len = starts[base + 2], ends[base + 2] - starts[base + 2]
    d_stats = word_stats(d_len)
    docno = split_strings(a, d_start, d_len, head_width(n=d_stats[0], words=d_stats[1], sizes=d_stats[2]))
    v_start = starts[base + kind.value_field]
    vlen = ends[base + kind.value_field] - v_start
    vm = split_columns(a, v_start, vlen, int(vlen.max()))[0]  # the values as (W, n) columns
    values = _parse_values(kind, vm, vlen, lines)

    # Query ids: only the first line of each run of equal qids is looked up.
    head = np.zeros(len(content), dtype=bool)
    head[0] = True
    for c in qm:
        head[1:] |= c[1:] != c[:-1]
    if len(q_long):  # query ids longer than the head: compare their tails too
        tails = np.full(len(content), b"", dtype=object)
        tails[q_long] = [q_tail[q_offsets[j] : q_offsets[j + 1]].tobytes() for j in range(len(q_long))]
        head[1:] |= tails[1:] != tails[:-1]
    heads = np.flatnonzero(head)
    head_names = np.ascontiguousarray(qm[:, heads].T).view(f"S{qm.shape[0]}").ravel()
    if len(q_long):
        head_names = np.array([bytes(h) + t for h, t in zip(head_names.tolist(), tails[heads])], dtype=object)
    names, inverse = np.unique(head_names, return_inverse=True)
    qid = inverse.ravel()[np.cumsum(head) - 1]
    tag = None
    if kind.what == "run":
        last = int(first[content[-1]]) + 5
        tag = a[starts[last] : ends[last]].tobytes()
    return (names, qid, docno, values, lines, tag, d_stats), len(newlines)


def read_table(
    path: str | os.PathLike[str], kind: str, *, progress: bool | None = None, block_bytes: int = BLOCK_BYTES
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
            names, qid, docno, values, lines, block_tag, stats = parsed
            ids = np.array([qid_ids.setdefault(bytes(n), len(qid_ids)) for n in names], dtype=np.int64)
            parts.append((ids[qid], docno, values, lines + line0, stats))
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
        raise EmptyTrecFile(f"{name}: no {spec.what} lines (the file is empty or holds only comments)")
    # One head width for the whole file, chosen from every block's docno sizes (blocks chose their own).
    width = head_width(
        n=sum(p[4][0] for p in parts),
        words=sum(p[4][1] for p in parts),
        sizes=np.unique(np.concatenate([p[4][2] for p in parts])),
    )
    return Table(
        qid=np.concatenate([p[0] for p in parts]),
        qid_names=list(qid_ids),
        docno=Strings.concat([p[1].rewidth(width) for p in parts]),
        value=np.concatenate([p[2] for p in parts]),
        line=np.concatenate([p[3] for p in parts]),
        tag=tag,
    )


def decode(name: bytes) -> str:
    """A query id or docno as text (undecodable bytes survive a round trip)."""
    return name.decode("utf-8", "surrogateescape")


def encode(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


def table_from_rows(qids: list[str], docnos: list[str], values: np.ndarray, tag: str | None = None) -> Table:
    """A :class:`Table` from Python rows (used by ``from_dict``).

    Raises:
        ValueError: a query id or docno holds a NUL character (C strings, and trec_eval, end there).
    """
    qid_ids: dict[bytes, int] = {}
    qid = np.array([qid_ids.setdefault(encode(q), len(qid_ids)) for q in qids], dtype=np.int64)
    encoded = [encode(d) for d in docnos]
    for what, names in (("query id", list(qid_ids)), ("docno", encoded)):
        bad = next((name for name in names if b"\0" in name), None)
        if bad is not None:
            raise ValueError(f"{what} {decode(bad)!r} holds a NUL character, which cannot be part of a TREC field")
    return Table(
        qid,
        list(qid_ids),
        Strings.from_bytes(encoded),
        values,
        np.zeros(len(qid), dtype=np.int64),
        None if tag is None else encode(tag),
    )
