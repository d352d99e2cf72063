"""Flat (torchmetrics-style) input to padded lists: one vectorised segment sort, no loop over queries.

:func:`group_by_query` pads every query to the longest; :func:`group_by_query_buckets` groups
queries into length buckets, each padded only to its own longest, so that memory follows the
number of documents however skewed the query lengths are.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["MAX_PADDING", "group_by_query", "group_by_query_buckets"]

MAX_PADDING = 2.0
""":func:`group_by_query_buckets` builds one padded batch when it holds at most this many times
the documents plus queries; otherwise it buckets queries by length (powers of two)."""


def _sort(indexes: Tensor, values: tuple[Tensor, ...]) -> tuple[Tensor, Tensor, Tensor]:
    """Checks, then ``(order, query_ids, counts)``: documents sorted by query id (input order kept)."""
    if indexes.is_floating_point() or indexes.is_complex() or indexes.dtype == torch.bool:
        raise TypeError(f"indexes must be an integer tensor of query ids, got {indexes.dtype}")
    if indexes.ndim != 1:
        raise ValueError(f"indexes must be 1-D (one query id per document), got shape {tuple(indexes.shape)}")
    for i, v in enumerate(values):
        if v.shape != indexes.shape:
            raise ValueError(f"flat input {i} has shape {tuple(v.shape)} but indexes has {tuple(indexes.shape)}")
    sorted_ids, order = torch.sort(indexes, stable=True)  # one sort groups the documents, input order kept
    query_ids, counts = torch.unique_consecutive(sorted_ids, return_counts=True)
    return order, query_ids, counts


def _pad(order: Tensor, counts: Tensor, values: tuple[Tensor, ...]) -> tuple[Tensor, tuple[Tensor, ...]]:
    """Documents ``order`` (grouped by query, ``counts`` per query) as padded ``(Q, max(counts))`` lists."""
    device = order.device
    n_queries, n_docs = counts.shape[0], order.shape[0]
    width = int(counts.max()) if n_queries else 0
    rows = torch.repeat_interleave(torch.arange(n_queries, device=device), counts, output_size=n_docs)
    starts = counts.cumsum(0) - counts
    cols = torch.arange(n_docs, device=device) - starts.index_select(0, rows)
    mask = torch.arange(width, device=device) < counts.unsqueeze(-1)
    grouped = []
    flat_index = rows * width + cols
    for v in values:
        out = torch.zeros(n_queries * width, dtype=v.dtype, device=v.device)
        out.index_copy_(0, flat_index, v.index_select(0, order))
        grouped.append(out.view(n_queries, width))
    return mask, tuple(grouped)


def group_by_query(indexes: Tensor, *values: Tensor) -> tuple[Tensor, Tensor, tuple[Tensor, ...]]:
    """Group flat per-document tensors by query id into padded ``(Q, L_max)`` lists.

    Documents keep their input order inside each query (so ``ties="first"`` means input order);
    queries come out sorted by id. This needs the number of queries and the longest list, so it
    reads two numbers from the device (a host sync): use it outside compiled code. Every query is
    padded to the longest: with skewed lengths use :func:`group_by_query_buckets`.

    Args:
        indexes: ``(D,)`` integer query id of each document. Ids are global: equal ids are one query.
        values: ``(D,)`` tensors to group (scores, grades, ...).

    Returns:
        ``(query_ids (Q,), mask (Q, L_max), grouped values (Q, L_max) each)``; padding is 0.

    Example:
        >>> import torch
        >>> ids, mask, (scores,) = group_by_query(torch.tensor([7, 3, 7]), torch.tensor([0.1, 0.2, 0.3]))
        >>> ids, mask, scores
        (tensor([3, 7]), tensor([[ True, False],
                [ True,  True]]), tensor([[0.2000, 0.0000],
                [0.1000, 0.3000]]))
    """
    order, query_ids, counts = _sort(indexes, values)
    mask, grouped = _pad(order, counts, values)
    return query_ids, mask, grouped


def group_by_query_buckets(
    indexes: Tensor, *values: Tensor, max_padding: float | None = None
) -> tuple[Tensor, list[tuple[Tensor, Tensor, tuple[Tensor, ...]]]]:
    """Group flat per-document tensors by query id into length buckets of padded lists.

    When padding every query to the longest holds at most ``max_padding`` (default
    :data:`MAX_PADDING`) times the documents plus queries, there is one bucket, exactly
    :func:`group_by_query`'s lists. Otherwise each query goes to the bucket of its length's power
    of two (1, 2, 3-4, 5-8, ...), padded to that bucket's longest: the buckets together hold at
    most about twice the documents, however skewed the lengths (one query of a million documents
    among thousands of one). Documents keep their input order inside each query. This reads the
    number of queries, the lengths present and the bucket sizes from the device (host syncs): use
    it outside compiled code.

    Args:
        indexes: ``(D,)`` integer query id of each document. Ids are global: equal ids are one query.
        values: ``(D,)`` tensors to group (scores, grades, ...).
        max_padding: see above; ``0`` always buckets.

    Returns:
        ``(query_ids (Q,), buckets)``: the query ids, sorted, and for each bucket ``(rows (Q_k,),
        mask (Q_k, L_k), grouped values (Q_k, L_k) each)``, ``rows`` the positions of its queries
        in ``query_ids``; padding is 0.

    Example:
        >>> import torch
        >>> indexes = torch.tensor([5, 5, 5, 5, 5, 1, 2])
        >>> ids, buckets = group_by_query_buckets(indexes, torch.arange(7.0), max_padding=0)  # always bucket
        >>> ids
        tensor([1, 2, 5])
        >>> [(rows.tolist(), tuple(mask.shape), scores.tolist()) for rows, mask, (scores,) in buckets]
        [([0, 1], (2, 1), [[5.0], [6.0]]), ([2], (1, 5), [[0.0, 1.0, 2.0, 3.0, 4.0]])]
    """
    order, query_ids, counts = _sort(indexes, values)
    n_queries, n_docs = counts.shape[0], order.shape[0]
    width = int(counts.max()) if n_queries else 0
    limit = MAX_PADDING if max_padding is None else max_padding
    if n_queries * width <= limit * (n_docs + n_queries):
        mask, grouped = _pad(order, counts, values)
        return query_ids, [(torch.arange(n_queries, device=indexes.device), mask, grouped)]
    powers = torch.tensor([1 << i for i in range(63)], device=counts.device)
    key = torch.searchsorted(powers, counts)  # ceil(log2(count))
    doc_key = torch.repeat_interleave(key, counts, output_size=n_docs)
    buckets = []
    for b in torch.unique(key).tolist():
        rows = torch.nonzero(key == b).squeeze(1)
        docs = torch.nonzero(doc_key == b).squeeze(1)
        mask, grouped = _pad(order.index_select(0, docs), counts.index_select(0, rows), values)
        buckets.append((rows, mask, grouped))
    return query_ids, buckets
