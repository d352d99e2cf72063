"""Normalised cumulative reciprocal rank (Cornac's ``NCRR``), exact under averaged ties."""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import harmonic_top, no_relevant
from torch_rankeval.ranking.view import RankedView

__all__ = ["ncrr_values"]


def ncrr_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Per-query NCRR@k, ``(N, K)``, and the "no relevant document" flag ``(N, 1)``.

    The sum of ``1 / rank`` over the relevant documents of the top ``k`` (under averaged ties each
    position's expected relevance, its tie group's share of relevant documents), over the same sum for
    the ideal ranking: the harmonic number ``H(min(R, k, n))``, ``R`` the relevant documents of the query
    and ``n`` the list's length, as Cornac's ``NCRR`` cuts the ideal at the ranked list.

    Example:
        >>> from torch_rankeval.measures import compute, parse_measures
        >>> preds, target = torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[0, 1, 1]])
        >>> round(compute(parse_measures(["ncrr"]), preds, target)["ncrr"].item(), 6)   # (1/2 + 1/3) / (1 + 1/2)
        0.555556
    """
    width = rb.span(ks)
    crr = rb.cumulative(rb.groups(width).mean("rel") * rb.inverse_ranks(width), ks)
    ideal = harmonic_top(rb, torch.minimum(rb.n_relevant, rb.n_valid), ks)  # the relevant documents first
    return crr / torch.where(ideal > 0, ideal, 1.0), no_relevant(rb)
