"""Vectorised joins for TREC data: docno keys, trec_eval's ranking order, duplicate detection and
the qrels lookup. No Python loop runs per line or per query.

Docnos are NUL-padded byte rows; 8 bytes at a time they become order-preserving int64 keys (big
endian, sign bit flipped), so comparing key tuples compares docnos as C's ``strcmp`` does.
Lookups and duplicate checks go through a 64-bit hash of ``(query, docno)`` and every hash match
is confirmed on the exact keys, so a hash collision can never pair two different documents.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["docno_keys", "lexsort", "sorted_by_query_and_docno", "ranking_order", "first_duplicate", "RunIndex", "hashes"]

_SIGN = np.uint64(1 << 63)
_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)


def docno_keys(docno: np.ndarray, columns: int | None = None) -> np.ndarray:
    """``(n, C)`` int64 keys of NUL-padded docnos ``(n, W)``, 8 bytes per column, most significant first."""
    width = docno.shape[1]
    columns = max(columns or 0, -(-width // 8))
    padded = columns * 8
    if width != padded:
        docno = np.concatenate([docno, np.zeros((len(docno), padded - width), dtype=np.uint8)], axis=1)
    keys = np.ascontiguousarray(docno).view(">u8").astype(np.uint64)
    return (keys ^ _SIGN).view(np.int64).reshape(len(docno), columns)


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


def sorted_by_query_and_docno(qid: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order by (qid ascending, docno descending) and, per sorted neighbour pair, whether the keys are equal."""
    cols = [qid] + [~keys[:, c] for c in range(keys.shape[1])]
    order = lexsort(cols)
    same = np.ones(max(len(order) - 1, 0), dtype=bool)
    for k in cols:
        ks = k[order]
        same &= ks[1:] == ks[:-1]
    return order, same


def _hash(qid: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """A 64-bit mix of (qid, docno key columns) (splitmix64 finaliser rounds)."""
    h = qid.astype(np.uint64) * _M1
    with np.errstate(over="ignore"):
        for c in range(keys.shape[1]):
            h ^= keys[:, c].view(np.uint64)
            h ^= h >> np.uint64(30)
            h *= _M2
            h ^= h >> np.uint64(27)
            h *= _M3
            h ^= h >> np.uint64(31)
    return h.view(np.int64)


def _same_key(qa: np.ndarray, ka: np.ndarray, qb: np.ndarray, kb: np.ndarray) -> np.ndarray:
    return (qa == qb) & (ka == kb).all(1)


def _sorted_hashes(qid: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values, order = torch.sort(torch.from_numpy(_hash(qid, keys)))
    return values.numpy(), order.numpy()


def first_duplicate(qid: np.ndarray, keys: np.ndarray, index: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[int, int] | None:
    """Two rows with the same (qid, docno), or ``None``. ``index`` is :func:`_sorted_hashes` of the rows."""
    values, order = index if index is not None else _sorted_hashes(qid, keys)
    candidates = np.flatnonzero(values[1:] == values[:-1])
    if not len(candidates):
        return None
    a, b = order[candidates], order[candidates + 1]
    real = np.flatnonzero(_same_key(qid[a], keys[a], qid[b], keys[b]))
    if len(real):
        return int(a[real[0]]), int(b[real[0]])
    # Rows that merely share a hash: an exact sort settles it.
    order, same = sorted_by_query_and_docno(qid, keys)
    hit = np.flatnonzero(same)
    return (int(order[hit[0]]), int(order[hit[0] + 1])) if len(hit) else None


class RunIndex:
    """Hash index of a run's (qid, docno) rows: finds duplicates and the rows the qrels judge."""

    def __init__(self, qid: np.ndarray, keys: np.ndarray) -> None:
        self.qid, self.keys = qid, keys
        self.hashes, self.order = _sorted_hashes(qid, keys)

    def first_duplicate(self) -> tuple[int, int] | None:
        """Two rows with the same (qid, docno), or ``None``."""
        return first_duplicate(self.qid, self.keys, (self.hashes, self.order))

    def judged(self, qrels_qid: np.ndarray, qrels_keys: np.ndarray, qrels_hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(run rows, qrels rows)`` of every judged document that the run retrieved.

        Each qrels row looks its hash up among the run's sorted hashes (one binary search per
        judgment, not per retrieved document) and the match is confirmed on the exact keys.
        """
        n = len(self.hashes)
        # Searching in sorted order keeps the binary searches cache-friendly.
        qrels_order = np.argsort(qrels_hashes, kind="stable")
        pos = np.empty(len(qrels_hashes), dtype=np.int64)
        pos[qrels_order] = np.searchsorted(self.hashes, qrels_hashes[qrels_order])
        run_rows, qrels_rows = [], []
        pending = np.arange(len(qrels_hashes))
        while len(pending):  # equal hashes in the run (collisions) are scanned one step at a time
            inside = pos[pending] < n
            pending = pending[inside]
            p = pos[pending]
            same_hash = self.hashes[p] == qrels_hashes[pending]
            pending, p = pending[same_hash], p[same_hash]
            rows = self.order[p]
            exact = _same_key(self.qid[rows], self.keys[rows], qrels_qid[pending], qrels_keys[pending])
            run_rows.append(rows[exact])
            qrels_rows.append(pending[exact])
            pending = pending[~exact]
            pos[pending] += 1
        return np.concatenate(run_rows), np.concatenate(qrels_rows)


def ranking_order(qid: np.ndarray, score: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Row order by query, then trec_eval's ranking: score descending, ties by docno descending.

    Runs are usually grouped by query and sorted by score already; then only the tied rows are
    re-sorted. Otherwise the rows are sorted by (query, score) first.
    """
    n = len(qid)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.arange(n)
    blocks = int((qid[1:] != qid[:-1]).sum()) + 1
    if blocks != len(np.unique(qid)):
        order = lexsort([qid])
    q, s = qid[order], score[order]
    same_query = q[1:] == q[:-1]
    if (same_query & (s[1:] > s[:-1])).any():
        order = lexsort([qid, _descending_score_key(score)])
        q, s = qid[order], score[order]
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
        rows = order[positions]
        sub = lexsort([group] + [~keys[rows, c] for c in range(keys.shape[1])])
        order[positions] = rows[sub]
    return order


def _descending_score_key(score: np.ndarray) -> np.ndarray:
    """int64 keys that sort float64 scores in descending order (``-0.0`` equals ``0.0``)."""
    bits = (score + 0.0).view(np.int64)  # + 0.0 turns -0.0 into 0.0
    ascending = np.where(bits < 0, bits ^ np.int64(0x7FFFFFFFFFFFFFFF), bits)
    return ~ascending


def hashes(qid: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The (qid, docno) hash of each row."""
    return _hash(qid, keys)
