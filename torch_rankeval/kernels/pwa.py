"""Position-weighted average (TF-Ranking's ``PWAMetric``), exact under averaged ties."""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import harmonic_top, judged_grades
from torch_rankeval.ranking.view import RankedView

__all__ = ["pwa_values"]


def pwa_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, None]:
    """Per-query position-weighted average of the grades in the top ``k``, ``(N, K)``; no empty case.

    ``sum_{p <= n} grade_p / p`` over ``H(n) = sum_{p <= n} 1 / p``, ``n = min(k, documents in the
    list)``: the grades weighted by ``1 / rank`` over the sum of the weights of the ranks that hold a
    document (TF-Ranking's position weights, masked at padding). The grade itself is the rating
    (no gain, no relevance threshold); negative grades and unjudged documents add 0 and keep their
    rank. A list without documents scores 0. Under averaged ties each position's grade is its tie
    group's mean, which makes the value the exact mean over the orders of the tied documents (it is
    linear in the grade at each position).

    Example:
        >>> from torch_rankeval.measures import compute, parse_measures
        >>> preds, target = torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 2, 0]])
        >>> compute(parse_measures(["pwa", "pwa@1"]), preds, target)   # (1 + 2/2 + 0/3) / (11/6); 1 / 1
        {'pwa': tensor([1.0909]), 'pwa@1': tensor([1.])}
    """
    width = rb.span(ks)
    grades = rb.expected(judged_grades(rb).to(rb.dtype), width)
    weighted = rb.cumulative(grades * rb.inverse_ranks(width), ks)
    total = harmonic_top(rb, rb.n_valid, ks)  # the weights of the ranks that hold a document
    return weighted / torch.where(total > 0, total, 1.0), None
