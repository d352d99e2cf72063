"""Flat (torchmetrics-style) input to padded lists: one vectorised segment sort, no loop over queries."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["group_by_query"]


def group_by_query(indexes: Tensor, *values: Tensor) -> tuple[Tensor, Tensor, tuple[Tensor, ...]]:
    """Group flat per-document tensors by query id into padded ``(Q, L_max)`` lists.

    Documents keep their input order inside each query (so ``ties="first"`` means input order);
    queries come out sorted by id. This needs the number of queries and the longest list, so it
    reads two numbers from the device (a host sync): use it outside compiled code.

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
    if indexes.is_floating_point() or indexes.is_complex() or indexes.dtype == torch.bool:
        raise TypeError(f"indexes must be an integer tensor of query ids, got {indexes.dtype}")
    if indexes.ndim != 1:
        raise ValueError(f"indexes must be 1-D (one query id per document), got shape {tuple(indexes.shape)}")
    for i, v in enumerate(values):
        if v.shape != indexes.shape:
            raise ValueError(f"flat input {i} has shape {tuple(v.shape)} but indexes has {tuple(indexes.shape)}")
    sorted_ids, order = torch.sort(indexes, stable=True)  # one sort groups the documents, input order kept
    query_ids, counts = torch.unique_consecutive(sorted_ids, return_counts=True)
    n_queries = query_ids.shape[0]
    width = int(counts.max()) if n_queries else 0
    rows = torch.repeat_interleave(torch.arange(n_queries, device=indexes.device), counts, output_size=indexes.shape[0])
    starts = counts.cumsum(0) - counts
    cols = torch.arange(indexes.shape[0], device=indexes.device) - starts.index_select(0, rows)
    mask = torch.arange(width, device=indexes.device) < counts.unsqueeze(-1)
    grouped = []
    flat_index = rows * width + cols
    for v in values:
        out = torch.zeros(n_queries * width, dtype=v.dtype, device=v.device)
        out.index_copy_(0, flat_index, v.index_select(0, order))
        grouped.append(out.view(n_queries, width))
    return query_ids, mask, tuple(grouped)
