"""Vectorised joins for TREC data: trec_eval's ranking order, duplicate detection and the qrels
lookup. No Python loop runs per line or per query.

Docnos are :class:`~torch_rankeval.trec._text.Strings`: a NUL-padded head of a few 8-byte words
per row plus, for the rare longer docnos, a tail buffer. Viewed as native 64-bit words (no copy)
the head hashes and compares for equality; only where order matters (documents tied on score,
which trec_eval orders by docno) are the words converted to big-endian, order-preserving keys,
so comparing key tuples compares docnos as C's ``strcmp`` does; rows still tied on their head are
refined word by word on their tails (only those rows, only as far as they stay tied). Lookups and
duplicate checks go through a 64-bit hash of the whole docno, and every hash match is confirmed
on the exact bytes, so a hash collision can never pair two different documents.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from torch_rankeval.trec._text import Strings

__all__ = [
    "lexsort",
    "sort_by_docno",
    "sorted_by_query_and_docno",
    "Order",
    "ranking_order",
    "docno_keys",
    "same_docno",
    "padded_join",
]

_SIGN = np.uint64(1 << 63)
_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)


def lexsort(keys: list[np.ndarray]) -> np.ndarray:
    """Stable order by several int64 keys (most significant first): LSD passes of torch's stable sort."""
    order = None
    for key in reversed(keys):
        k = torch.from_numpy(np.ascontiguousarray(key))
        if order is None:
            order = torch.sort(k, stable=True).indices
        else:
            order = order[torch.sort(k[order], stable=True).indices]
    return order.numpy()


def sort_by_docno(
    prefix: list[np.ndarray], docno: Strings, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Stable order of ``rows`` (default: all) by the int64 keys ``prefix`` (ascending, most
    significant first), then docno descending (bytes, as ``strcmp``); and, per sorted neighbour
    pair, whether both are equal on every key and on the docno.

    ``prefix`` keys are aligned with ``rows``. The head words are sorted at once; rows still tied
    on their head and holding a tail are refined word by word, each pass only over the rows still
    tied, so the cost follows the tied bytes and never the longest docno.
    """
    head = docno.head if rows is None else docno.head[rows]
    # int64 keys, 8 docno bytes per column (most significant first): their tuple order is the byte order
    keys = (np.ascontiguousarray(head).view(">u8").astype(np.uint64) ^ _SIGN).view(np.int64)
    cols = list(prefix) + [~keys[:, c] for c in range(keys.shape[1])]
    order = lexsort(cols)
    same = np.ones(max(len(order) - 1, 0), dtype=bool)
    for k in cols:
        ks = k[order]
        same &= ks[1:] == ks[:-1]
    if docno.has_tail and same.any():
        _refine_tails(order, same, docno, np.arange(len(docno)) if rows is None else rows)
    return order, same


def _segments(equal: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """For ``n`` sorted items whose neighbours are ``equal``: which items share a run with a
    neighbour, and each item's run number."""
    member = np.zeros(n, dtype=bool)
    member[:-1] |= equal
    member[1:] |= equal
    start = np.ones(n, dtype=bool)
    start[1:] = ~equal
    return member, np.cumsum(start)


def _refine_tails(order: np.ndarray, same: np.ndarray, docno: Strings, rows: np.ndarray) -> None:
    """Reorder (in place) the runs of ``order`` that are equal on their head by the docnos' tails
    (descending), and set ``same`` for their neighbour pairs."""
    c = docno.width // 8
    member, seg = _segments(same, len(order))
    pos, seg = np.flatnonzero(member), seg[member]
    while len(pos):
        # Runs whose members all end before word c are equal docnos: they leave the refinement.
        words = docno.n_words(rows[order[pos]])
        first = np.flatnonzero(np.concatenate([[True], seg[1:] != seg[:-1]]))
        longest = np.maximum.reduceat(words, first)
        live = np.repeat(longest > c, np.diff(np.append(first, len(pos))))
        pos, seg = pos[live], seg[live]
        if not len(pos):
            break
        w = docno.word(rows[order[pos]], c, order=True)
        sub = lexsort([seg, ~w])
        order[pos] = order[pos][sub]
        w = w[sub]
        inner = seg[1:] == seg[:-1]  # pairs inside a run (positions of a run are contiguous)
        equal = inner & (w[1:] == w[:-1])
        same[pos[:-1][inner]] = equal[inner]
        member, seg = _segments(equal, len(pos))
        pos, seg = pos[member], seg[member]
        c += 1


def sorted_by_query_and_docno(qid: np.ndarray, docno: Strings) -> tuple[np.ndarray, np.ndarray]:
    """Order by (qid ascending, docno descending) and, per sorted neighbour pair, whether both are equal."""
    return sort_by_docno([qid], docno)


def _hash(docno: Strings) -> np.ndarray:
    """A 64-bit mix of each row's docno words (splitmix64 rounds). All-zero words, which are only
    ever padding, leave the hash unchanged, so the hash depends on the docno alone, not on how it
    is stored (head width, tail)."""
    w = np.ascontiguousarray(docno.head).view(np.uint64)
    h = np.zeros(len(w), dtype=np.uint64)
    for c in range(w.shape[1]):
        h = _mix(h, w[:, c], first=c == 0)
    if docno.has_tail:
        rows = docno.long
        words = docno.n_words(rows)
        c = w.shape[1]
        hl = h[rows]
        while len(rows):
            hl = _mix(hl, docno.word(rows, c), first=False)
            c += 1
            more = words > c
            h[rows[~more]] = hl[~more]
            rows, words, hl = rows[more], words[more], hl[more]
    return h.view(np.int64)


def _mix(h: np.ndarray, col: np.ndarray, *, first: bool) -> np.ndarray:
    with np.errstate(over="ignore"):
        mixed = (h ^ col) * _M1
        mixed ^= mixed >> np.uint64(30)
        mixed *= _M2
        mixed ^= mixed >> np.uint64(27)
        mixed *= _M3
        mixed ^= mixed >> np.uint64(31)
    return mixed if first else np.where(col != 0, mixed, h)


def docno_keys(a: Strings, b: Strings) -> tuple[np.ndarray, np.ndarray, bool]:
    """Comparable int64 keys for two docno sets and whether equal keys mean equal docnos.

    Docnos of at most 8 bytes are their own (exact) key; longer ones are hashed and equal keys
    must be confirmed on the bytes (:func:`same_docno`).
    """
    if a.width == b.width == 8 and not a.has_tail and not b.has_tail:
        return a.head.view(np.int64)[:, 0], b.head.view(np.int64)[:, 0], True
    return _hash(a), _hash(b), False


def same_docno(a: Strings, rows_a: np.ndarray, b: Strings, rows_b: np.ndarray) -> np.ndarray:
    """Whether docno ``a[rows_a[i]]`` equals ``b[rows_b[i]]``, for each ``i``."""
    c = min(a.width, b.width)
    same = (a.head[rows_a, :c] == b.head[rows_b, :c]).all(1)
    words = np.maximum(a.n_words(rows_a), b.n_words(rows_b))
    todo = np.flatnonzero(same & (words > c // 8))
    c //= 8
    while len(todo):
        equal = a.word(rows_a[todo], c) == b.word(rows_b[todo], c)
        same[todo[~equal]] = False
        c += 1
        todo = todo[equal & (words[todo] > c)]
    return same


_PAD = np.iinfo(np.int64).max


def padded_join(
    run_keys: np.ndarray,
    run_valid: np.ndarray,
    qrels_keys: np.ndarray,
    qrels_valid: np.ndarray,
    confirm: Callable[[np.ndarray, np.ndarray], np.ndarray] | None,
    confirm_run: Callable[[np.ndarray, np.ndarray], np.ndarray] | None,
) -> tuple[tuple[int, int] | None, np.ndarray, np.ndarray]:
    """Duplicates and matches between the documents of each query, row by row.

    ``run_keys`` ``(N, L)`` and ``qrels_keys`` ``(N, M)`` hold docno keys of each query's retrieved
    and judged documents (``*_valid`` False for padding). Each row of run keys is sorted once; the
    judged keys are binary-searched in their own row (a small, cache-friendly search).
    ``confirm(flat_a, flat_b)`` checks that flat positions ``a`` of the run matrix and ``b`` of the
    qrels matrix hold equal docnos, ``confirm_run`` the same for two run positions; both are
    ``None`` when keys are exact.

    Returns:
        ``(duplicate, run_flat, qrels_flat)``: two run positions with the same docno in one query
        (or ``None``), and the flat positions of each retrieved-and-judged pair.
    """
    length = run_keys.shape[1]
    all_valid = bool(run_valid.all())
    keys = torch.from_numpy(run_keys if all_valid else np.where(run_valid, run_keys, _PAD))
    sorted_keys, perm = torch.sort(keys, dim=1)
    sorted_keys, perm = sorted_keys.numpy(), perm.numpy()
    sorted_valid = run_valid if all_valid else np.take_along_axis(run_valid, perm, 1)

    duplicate = None
    equal = sorted_keys[:, 1:] == sorted_keys[:, :-1]
    if not all_valid:
        equal &= sorted_valid[:, 1:] & sorted_valid[:, :-1]
    rows, cols = np.nonzero(equal)
    if len(rows):
        a = rows * length + perm[rows, cols]
        b = rows * length + perm[rows, cols + 1]
        real = np.ones(len(a), dtype=bool) if confirm_run is None else confirm_run(a, b)
        if real.any():
            i = int(np.flatnonzero(real)[0])
            duplicate = (int(min(a[i], b[i])), int(max(a[i], b[i])))
        elif confirm_run is not None:  # neighbours that only share a hash: check all pairs of each run
            duplicate = _scan_duplicates(sorted_keys, sorted_valid, perm, rows, cols, confirm_run)

    qrels_width = qrels_keys.shape[1]
    pos = torch.searchsorted(torch.from_numpy(sorted_keys), torch.from_numpy(np.ascontiguousarray(qrels_keys))).numpy()
    q_rows, q_cols = np.nonzero(qrels_valid)
    p = pos[q_rows, q_cols]
    target = qrels_keys[q_rows, q_cols]
    run_flat, qrels_flat = [], []
    while len(q_rows):
        inside = p < length
        q_rows, q_cols, p, target = q_rows[inside], q_cols[inside], p[inside], target[inside]
        hit = sorted_keys[q_rows, p] == target
        q_rows, q_cols, p, target = q_rows[hit], q_cols[hit], p[hit], target[hit]
        a = q_rows * length + perm[q_rows, p]
        b = q_rows * qrels_width + q_cols
        ok = sorted_valid[q_rows, p]
        if confirm is not None and len(a):
            ok &= confirm(a, b)
        run_flat.append(a[ok])
        qrels_flat.append(b[ok])
        q_rows, q_cols, p, target = q_rows[~ok], q_cols[~ok], p[~ok] + 1, target[~ok]
    return duplicate, np.concatenate(run_flat), np.concatenate(qrels_flat)


def _scan_duplicates(sorted_keys, sorted_valid, perm, rows, cols, confirm) -> tuple[int, int] | None:
    """Pairs beyond neighbours inside runs of equal hashes (only after a hash collision)."""
    for r, c in zip(rows.tolist(), cols.tolist()):
        end = c + 1
        while (
            end + 1 < sorted_keys.shape[1] and sorted_keys[r, end + 1] == sorted_keys[r, c] and sorted_valid[r, end + 1]
        ):
            end += 1
        members = r * perm.shape[1] + perm[r, c : end + 1]
        for i in range(len(members)):
            others = members[i + 1 :]
            same = confirm(np.full(len(others), members[i]), others)
            if same.any():
                j = int(others[np.flatnonzero(same)[0]])
                return int(min(members[i], j)), int(max(members[i], j))
    return None


class Order:
    """A permutation of rows, stored cheaply: the identity, the identity but for some positions
    (documents tied on score, reordered by docno), or a full index array."""

    def __init__(self, n: int, full: np.ndarray | None = None) -> None:
        self.n, self.full = n, full
        self.positions: np.ndarray | None = None
        self.sources: np.ndarray | None = None

    def index(self) -> np.ndarray:
        """The permutation as an index array."""
        if self.full is not None:
            return self.full
        out = np.arange(self.n)
        if self.positions is not None:
            out[self.positions] = self.sources
        return out

    def apply(self, x: np.ndarray | Strings, *, tie_invariant: bool = False) -> np.ndarray | Strings:
        """``x`` in this order. ``tie_invariant``: ``x`` is equal within ties (scores)."""
        if self.full is not None:
            return x.take(self.full)  # (x is 1-D)
        if isinstance(x, Strings):
            return x if self.positions is None else x.replaced(self.positions, self.sources)
        if self.positions is None or tie_invariant:
            return x
        out = x.copy()
        out[self.positions] = x[self.sources]
        return out


def ranking_order(qid: np.ndarray, score: np.ndarray, docno: Strings) -> tuple[Order, np.ndarray]:
    """Row order by query, then trec_eval's ranking: score descending, ties by docno descending.

    Returns the :class:`Order` and where each query's rows start in that order. Runs are usually
    grouped by query and sorted by score; then nothing is sorted but the tied rows. Otherwise the
    rows are sorted by (query, score) first.
    """
    n = len(qid)
    order = Order(n)
    q, s = qid, score
    same_query = q[1:] == q[:-1]
    n_groups = n - int(np.count_nonzero(same_query))
    if n_groups != np.count_nonzero(np.bincount(qid)):  # some query's rows are not contiguous
        order = Order(n, lexsort([qid]))
        q, s = qid[order.full], score[order.full]
        same_query = q[1:] == q[:-1]
    if (same_query & (s[1:] > s[:-1])).any():  # some query's rows are not by decreasing score
        order = Order(n, lexsort([qid, _descending_score_key(score)]))
        q, s = qid[order.full], score[order.full]
        same_query = q[1:] == q[:-1]
    tie = same_query & (s[1:] == s[:-1])
    if tie.any():
        member, group = _segments(tie, n)
        positions = np.flatnonzero(member)
        rows = positions if order.full is None else order.full[positions]
        sorted_rows = rows[sort_by_docno([group[positions]], docno, rows)[0]]
        if order.full is None:
            order.positions, order.sources = positions, sorted_rows
        else:
            order.full[positions] = sorted_rows
    return order, np.flatnonzero(np.concatenate([[n > 0], ~same_query]))


def _descending_score_key(score: np.ndarray) -> np.ndarray:
    """int64 keys that sort float64 scores in descending order (``-0.0`` equals ``0.0``)."""
    bits = (score + 0.0).view(np.int64)  # + 0.0 turns -0.0 into 0.0
    ascending = np.where(bits < 0, bits ^ np.int64(0x7FFFFFFFFFFFFFFF), bits)
    return ~ascending
