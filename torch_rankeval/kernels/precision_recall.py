"""Precision@k, recall@k, hit rate@k and R-precision: counts of relevant documents in the top k."""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import cutoff_sizes, no_relevant, safe_div
from torch_rankeval.ranking.view import RankedView, take_columns

__all__ = ["precision_values", "recall_values", "hit_rate_values", "r_precision_values"]


def precision_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, *, adaptive_k: bool | None = None
) -> tuple[Tensor, Tensor]:
    """Expected relevant documents in the top k divided by k (by ``min(k, list length)`` with
    ``adaptive_k``: the measure's parameter, ``None``: the convention's; by at most the query's relevant
    documents with the convention's ``min_k_relevant``)."""
    found = rb.expected_in_top("rel", ks)
    adaptive = conv.adaptive_k if adaptive_k is None else adaptive_k
    size = cutoff_sizes(rb, ks, adaptive_k=adaptive)
    if conv.min_k_relevant:  # RecTools' r_precision: at most the relevant documents count
        size = torch.minimum(size, rb.n_relevant.to(size.dtype).unsqueeze(-1))
    elif not adaptive and None not in ks and min(ks) > 0:  # a constant divisor of at least 1
        return found / size, no_relevant(rb)
    return safe_div(found, size), no_relevant(rb)


def recall_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Expected relevant documents in the top k divided by all relevant documents of the query."""
    # 0 where the query has no relevant document (the quotient there is not read): the count is never
    # negative, so its "no relevant" flag (shared with the other measures' empty case) picks those rows
    empty = no_relevant(rb)
    return torch.where(empty, 0.0, rb.expected_in_top("rel", ks) / rb.n_relevant.unsqueeze(-1)), empty


def hit_rate_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Probability that the top k hold a relevant document.

    If nothing relevant ranks above the tie group the cutoff ends in and the cutoff takes ``m`` of
    its ``n`` slots, ``r`` of its documents relevant, a miss has probability
    ``C(n - r, m) / C(n, m) = prod_{j <= m} (1 - r / (n - j + 1))``: a running product over the
    group's slots in float64 (:attr:`TieGroups.no_relevant_yet`), exact at any group size.
    """
    idx = rb.cutoff_index(ks)
    g = rb.groups(rb.span(ks))
    if not rb.averaged:
        return (g.at("rel_count_before", idx) + g.at("rel_count", idx) > 0).to(rb.dtype), no_relevant(rb)
    return (1 - take_columns(g.no_relevant_yet, idx)).to(rb.dtype), no_relevant(rb)


def r_precision_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Precision at rank R, the number of relevant documents of the query (cutoffs are ignored)."""
    r_total = rb.n_relevant
    idx = (r_total.clamp(min=1, max=rb.length) - 1).long().unsqueeze(-1)  # a cutoff per list
    g = rb.groups(rb.length)
    s, n, r, c = (t.gather(-1, idx) for t in (g.start, g.size, g.rel, g.rel_before))
    found = c + (idx + 1 - s) * r / n
    return safe_div(found, r_total.unsqueeze(-1)).expand(-1, len(ks)), no_relevant(rb)
