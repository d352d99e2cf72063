"""Reciprocal rank of the first relevant document, exact under averaged ties."""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import no_relevant
from torch_rankeval.ranking.view import RankedView

__all__ = ["reciprocal_rank_values"]


def reciprocal_rank_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Per-query RR@k, ``(N, K)``, and the "no relevant document" flag ``(N, 1)``.

    Under averaged ties the first relevant document lies in the first tie group that holds any.
    Going through that group's ``n`` slots (``r`` relevant), slot ``j`` holds the first relevant
    document with probability ``P(none before j) * r / (n - j + 1)``, i.e.
    ``C(n - j, r - 1) / C(n, r)`` (``TieGroups.first_hazard`` and ``no_relevant_yet``). Running
    products of ratios in float64: exact at any group size, no ``lgamma`` of large counts. Without
    ties this is 1 at the first relevant position.
    """
    width = rb.span(ks)
    g = rb.groups(width)
    if rb.averaged:
        before = torch.constant_pad_nd(g.no_relevant_yet[:, :-1], (1, 0), 1.0)
        first = before * g.first_hazard
        values = rb.cumulative_per_rank(first, ks).to(rb.dtype)
    else:
        first = (g.rel_count_before == 0) & (g.rel_count > 0)
        values = rb.cumulative_per_rank(first.to(rb.dtype), ks)
    return values, no_relevant(rb)
