"""Vectorised joins for TREC data: trec_eval's ranking order, duplicate detection and the qrels
lookup. No Python loop runs per line or per query.

Docnos are NUL-padded byte rows whose width is a multiple of 8. Viewed as native 64-bit words
(no copy) they hash and compare for equality; only where order matters (documents tied on score,
which trec_eval orders by docno) are the words converted to big-endian, order-preserving keys,
so comparing key tuples compares docnos as C's ``strcmp`` does. Lookups and duplicate checks go
through a 64-bit hash of ``(query, docno)``, and every hash match is confirmed on the exact bytes,
so a hash collision can never pair two different documents.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

__all__ = [
    "words",
    "order_keys",
    "lexsort",
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


def words(docno: np.ndarray) -> np.ndarray:
    """``(n, W/8)`` uint64 view of a NUL-padded ``(n, W)`` docno matrix (no copy when contiguous)."""
    return np.ascontiguousarray(docno).view(np.uint64)


def order_keys(docno: np.ndarray, columns: int | None = None) -> np.ndarray:
    """``(n, C)`` int64 keys, 8 docno bytes per column (most significant first) whose tuple order
    is the docnos' byte order; ``columns`` pads with zero (padding) columns."""
    keys = np.ascontiguousarray(docno).view(">u8").astype(np.uint64)
    if columns is not None and columns > keys.shape[1]:
        keys = np.concatenate([keys, np.zeros((len(keys), columns - keys.shape[1]), dtype=np.uint64)], axis=1)
    return (keys ^ _SIGN).view(np.int64)


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


def sorted_by_query_and_docno(qid: np.ndarray, docno: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order by (qid ascending, docno descending) and, per sorted neighbour pair, whether both are equal."""
    keys = order_keys(docno)
    cols = [qid] + [~keys[:, c] for c in range(keys.shape[1])]
    order = lexsort(cols)
    same = np.ones(max(len(order) - 1, 0), dtype=bool)
    for k in cols:
        ks = k[order]
        same &= ks[1:] == ks[:-1]
    return order, same


def _hash(w: np.ndarray) -> np.ndarray:
    """A 64-bit mix of each row's docno words (splitmix64 rounds). All-zero words, which are only
    ever padding, leave the hash unchanged, so the hash does not depend on the padded width."""
    h = np.zeros(len(w), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in range(w.shape[1]):
            col = w[:, c]
            mixed = (h ^ col) * _M1
            mixed ^= mixed >> np.uint64(30)
            mixed *= _M2
            mixed ^= mixed >> np.uint64(27)
            mixed *= _M3
            mixed ^= mixed >> np.uint64(31)
            h = mixed if c == 0 else np.where(col != 0, mixed, h)
    return h.view(np.int64)


def docno_keys(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """Comparable int64 keys for two docno matrices and whether equal keys mean equal docnos.

    Docnos of at most 8 bytes are their own (exact) key; longer ones are hashed and equal keys
    must be confirmed on the bytes.
    """
    wa, wb = words(a), words(b)
    if max(wa.shape[1], wb.shape[1]) == 1:
        return wa[:, 0].view(np.int64), wb[:, 0].view(np.int64), True
    return _hash(wa), _hash(wb), False


def same_docno(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise equality of two docno matrices of possibly different padded widths."""
    wa, wb = words(a), words(b)
    c = min(wa.shape[1], wb.shape[1])
    same = (wa[:, :c] == wb[:, :c]).all(1)
    for extra in (wa[:, c:], wb[:, c:]):
        if extra.shape[1]:
            same &= (extra == 0).all(1)
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
    n, length = run_keys.shape
    all_valid = bool(run_valid.all())
    keys = torch.from_numpy(run_keys if all_valid else np.where(run_valid, run_keys, _PAD))
    sorted_keys, perm = torch.sort(keys, dim=1)
    sorted_keys, perm = sorted_keys.numpy(), perm.numpy()
    sorted_valid = run_valid if all_valid else np.take_along_axis(run_valid, perm, 1)
    row_base = (np.arange(n, dtype=np.int64) * length)[:, None]

    duplicate = None
    equal = sorted_keys[:, 1:] == sorted_keys[:, :-1]
    if not all_valid:
        equal &= sorted_valid[:, 1:] & sorted_valid[:, :-1]
    rows, cols = np.nonzero(equal)
    if len(rows):
        a = row_base[rows, 0] + perm[rows, cols]
        b = row_base[rows, 0] + perm[rows, cols + 1]
        real = np.ones(len(a), dtype=bool) if confirm_run is None else confirm_run(a, b)
        if real.any():
            i = int(np.flatnonzero(real)[0])
            duplicate = (int(min(a[i], b[i])), int(max(a[i], b[i])))
        elif confirm_run is not None:  # neighbours that only share a hash: check all pairs of each run
            duplicate = _scan_duplicates(sorted_keys, sorted_valid, perm, row_base, rows, cols, confirm_run)

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


def _scan_duplicates(sorted_keys, sorted_valid, perm, row_base, rows, cols, confirm) -> tuple[int, int] | None:
    """Pairs beyond neighbours inside runs of equal hashes (only after a hash collision)."""
    for r, c in zip(rows.tolist(), cols.tolist()):
        end = c + 1
        while (
            end + 1 < sorted_keys.shape[1] and sorted_keys[r, end + 1] == sorted_keys[r, c] and sorted_valid[r, end + 1]
        ):
            end += 1
        members = row_base[r, 0] + perm[r, c : end + 1]
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

    @property
    def identity(self) -> bool:
        return self.full is None and self.positions is None

    def index(self) -> np.ndarray:
        """The permutation as an index array."""
        if self.full is not None:
            return self.full
        out = np.arange(self.n)
        if self.positions is not None:
            out[self.positions] = self.sources
        return out

    def apply(self, x: np.ndarray, *, tie_invariant: bool = False) -> np.ndarray:
        """``x`` in this order. ``tie_invariant``: ``x`` is equal within ties (scores)."""
        if self.full is not None:
            return x[self.full]
        if self.positions is None or tie_invariant:
            return x
        out = x.copy()
        out[self.positions] = x[self.sources]
        return out


def ranking_order(qid: np.ndarray, score: np.ndarray, docno: np.ndarray) -> tuple[Order, np.ndarray]:
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
        member = np.zeros(n, dtype=bool)
        member[1:] |= tie
        member[:-1] |= tie
        positions = np.flatnonzero(member)
        starts = np.ones(len(positions), dtype=bool)
        starts[1:] = ~tie[positions[1:] - 1]
        group = np.cumsum(starts)
        rows = positions if order.full is None else order.full[positions]
        keys = order_keys(docno[rows])
        sorted_rows = rows[lexsort([group] + [~keys[:, c] for c in range(keys.shape[1])])]
        if order.full is None:
            order.positions, order.sources = positions, sorted_rows
        else:
            order.full[positions] = sorted_rows
    group_starts = (
        np.concatenate([np.zeros(1, dtype=np.int64), np.flatnonzero(~same_query) + 1])
        if n
        else np.zeros(0, dtype=np.int64)
    )
    return order, group_starts


def _descending_score_key(score: np.ndarray) -> np.ndarray:
    """int64 keys that sort float64 scores in descending order (``-0.0`` equals ``0.0``)."""
    bits = (score + 0.0).view(np.int64)  # + 0.0 turns -0.0 into 0.0
    ascending = np.where(bits < 0, bits ^ np.int64(0x7FFFFFFFFFFFFFFF), bits)
    return ~ascending
