"""trec_eval's counts: queries, documents retrieved, relevant documents, relevant documents retrieved.

Each is a count per query (summed over queries, not averaged: the registry's ``aggregate="sum"``),
independent of ties and of cutoffs (``cutoffs`` is ``(None,)``), with no empty case.

Example:
    >>> import torch
    >>> from torch_rankeval.conventions import DEFAULT
    >>> from torch_rankeval.ranking.view import RankedBatch
    >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 2]]), None, DEFAULT,
    ...                  ideal_target=torch.tensor([[1, 0, 2, 1]]))
    >>> [f(rb, (None,), DEFAULT)[0].tolist() for f in (num_q_values, num_ret_values, num_rel_values, num_rel_ret_values)]
    [[[1.0]], [[3.0]], [[3.0]], [[2.0]]]
"""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.view import RankedView

__all__ = ["num_q_values", "num_rel_ret_values", "num_rel_values", "num_ret_values"]


def num_q_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, None]:
    """1 per query (trec_eval's ``num_q``), ``(N, K)``."""
    return torch.ones(rb.n_lists, len(ks), dtype=rb.dtype, device=rb.device), None


def num_ret_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, None]:
    """The number of documents retrieved (``num_ret``), ``(N, K)``."""
    return rb.n_valid.unsqueeze(-1).expand(-1, len(ks)), None


def num_rel_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, None]:
    """The number of relevant documents, retrieved or not (``num_rel``), ``(N, K)``."""
    return rb.n_relevant.unsqueeze(-1).expand(-1, len(ks)), None


def num_rel_ret_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, None]:
    """The number of relevant documents retrieved (``num_rel_ret``), ``(N, K)``."""
    return rb.rel.sum(-1, keepdim=True).expand(-1, len(ks)), None
