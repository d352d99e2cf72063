"""Precision@k, recall@k, hit rate@k and R-precision: counts of relevant documents in the top k."""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.ranking.view import RankedView, take_columns

__all__ = ["precision_values", "recall_values", "hit_rate_values", "r_precision_values"]


def _empty(rb: RankedView) -> Tensor:
    return (rb.n_relevant <= 0).unsqueeze(-1)


def _safe_div(num: Tensor, den: Tensor) -> Tensor:
    positive = den > 0
    return torch.where(positive, num / torch.where(positive, den, torch.ones_like(den)), torch.zeros_like(num))


def precision_values(rb: RankedView, ks: tuple, *, adaptive_k: bool) -> tuple[Tensor, Tensor]:
    """Expected relevant documents in the top k divided by k (or by ``min(k, list length)``)."""
    found = rb.expected_in_top("rel", ks)
    n_valid = rb.n_valid.unsqueeze(-1)
    cut = rb.constant([float("inf") if k is None else float(k) for k in ks])
    den = torch.minimum(cut, n_valid) if adaptive_k else torch.where(torch.isinf(cut), n_valid, cut)
    return _safe_div(found, den), _empty(rb)


def recall_values(rb: RankedView, ks: tuple) -> tuple[Tensor, Tensor]:
    """Expected relevant documents in the top k divided by all relevant documents of the query."""
    return _safe_div(rb.expected_in_top("rel", ks), rb.n_relevant.unsqueeze(-1)), _empty(rb)


def hit_rate_values(rb: RankedView, ks: tuple) -> tuple[Tensor, Tensor]:
    """Probability that the top k hold a relevant document.

    If nothing relevant ranks above the tie group the cutoff ends in and the cutoff takes ``m`` of
    its ``n`` slots, ``r`` of its documents relevant, a miss has probability
    ``C(n - r, m) / C(n, m) = prod_{j <= m} (1 - r / (n - j + 1))``: a running product over the
    group's slots in float64 (:attr:`TieGroups.no_relevant_yet`), exact at any group size.
    """
    idx = rb.cutoff_index(ks)
    g = rb.groups(rb.span(ks))
    if not rb.averaged:
        return (g.at("rel_before", idx) + g.at("rel", idx) > 0).to(rb.dtype), _empty(rb)
    return (1 - take_columns(g.no_relevant_yet, idx)).to(rb.dtype), _empty(rb)


def r_precision_values(rb: RankedView, ks: tuple) -> tuple[Tensor, Tensor]:
    """Precision at rank R, the number of relevant documents of the query (cutoffs are ignored)."""
    r_total = rb.n_relevant
    idx = (r_total.clamp(min=1, max=rb.length) - 1).long().unsqueeze(-1)  # a cutoff per list
    g = rb.groups(rb.length)
    s, n, r, c = (t.gather(-1, idx) for t in (g.start, g.size, g.rel, g.rel_before))
    found = c + (idx + 1 - s) * r / n
    return _safe_div(found, r_total.unsqueeze(-1)).expand(-1, len(ks)), _empty(rb)
