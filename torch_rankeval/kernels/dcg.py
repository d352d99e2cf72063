"""DCG, ideal DCG and nDCG: one kernel, pluggable gain and discount."""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.kernels.ideal import k_relevant_idcg
from torch_rankeval.ranking.view import RankedView

__all__ = ["dcg_values", "idcg_values", "ndcg_values"]


def dcg_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, None]:
    """Per-query (expected, under averaged ties) DCG at each cutoff, ``(N, K)``: the sum over the first
    ``k`` positions of the position's expected gain (its tie group's mean gain) times its discount.
    DCG has no empty case."""
    return rb.discounted_top("gains", ks), None


def idcg_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, None]:
    """Per-query ideal DCG (gains of the judged set in decreasing order), ``(N, K)``; no empty case."""
    return rb.ideal_discounted(ks), None


def ndcg_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Per-query nDCG and the "empty" flag (ideal DCG is 0), both ``(N, K)``: DCG over ideal DCG (the two
    kernels above, written out here: one update's hot path); the ideal per the convention's
    ``ideal_ranking`` (``"k_relevant"``: :func:`~torch_rankeval.kernels.ideal.k_relevant_idcg`)."""
    d = rb.discounted_top("gains", ks)
    if conv.ideal_ranking == "achievable":
        i = rb.ideal_discounted(ks)
    else:
        i = k_relevant_idcg(rb, ks, conv)
    empty = i <= 0
    return d / torch.where(empty, 1.0, i), empty
