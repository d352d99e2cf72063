"""trec_eval's experimental gain measures: ``binG``, ``G`` (normalised gain), ``ndcg_rel``
(nDCG averaged at the relevant documents) and ``Rndcg`` (nDCG averaged at the R levels), each
trec_eval's loop written as a few vectorised reductions.

Gains come from the measure's convention (trec_eval: the grade; ``gains=`` maps grades), ``0`` for
unjudged documents and padding. The ideal ranking is the judged set sorted by decreasing gain,
read up to its last positive gain (trec_eval stops there). Discounts are the convention's (trec_eval:
``1 / log2(rank + 1)``).

They take no cutoff. ``binG`` and ``Rndcg`` average ties exactly; ``G`` and ``ndcg_rel`` have no
practical exact tie-averaged form (the registry refuses ``ties="average"``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import check_deterministic, group_sums, no_relevant, per_relevant
from torch_rankeval.ranking.view import RankedView

__all__ = ["bing_values", "g_values", "ndcg_rel_values", "rndcg_values"]


def _positive_ideal(rb: RankedView, width: int | None = None) -> Tensor:
    """The ideal gains in decreasing order with every non-positive gain set to 0 (trec_eval's ideal
    ranking ends at its first gain ``<= 0``), ``(N, width)`` (default: every judged document),
    zero-padded."""
    ideal = rb.ideal_top((None,)).clamp(min=0)
    return ideal if width is None else torch.constant_pad_nd(ideal, (0, width - ideal.shape[-1]))


def bing_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Binary G (trec_eval's ``binG``): ``1/R * sum over retrieved relevant documents of
    1 / log2(2 + number of non-relevant documents above it)``, ``(N, K)``.

    Exact under averaged ties: the number of the tie group's ``m`` non-relevant documents above a
    relevant one is uniform on ``0..m``, so its term is the mean of ``1 / log2(2 + B + u)``.

    Edge cases: no relevant document: 0 (flagged empty).

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds = torch.tensor([[3.0, 2.0, 1.0]], dtype=torch.float64)
        >>> round(compute(parse_measures(["binG"]), preds, torch.tensor([[1, 0, 1]]))["binG"].item(), 6)   # (1 + 1/log2(3)) / 2
        0.815465
    """
    rel = rb.rel
    other = rb.valid.to(rb.dtype) - rel  # every non-relevant document, judged or not
    if rb.averaged:
        inside, above = group_sums(rb, other)
        terms = 1.0 / torch.log2(2.0 + torch.arange(rb.length + 1, dtype=torch.float64, device=rb.device))
        table = torch.cat([terms.new_zeros(1), terms.cumsum(0)])  # table[t] = sum_{u < t} 1/log2(2 + u)
        lo, hi = above.long(), (above + inside).long() + 1
        term = ((table[hi] - table[lo]) / (inside.to(torch.float64) + 1)).to(rb.dtype)
    else:
        # trec_eval's 1 / log2(3 + i - rel_so_far), i 0-based and rel_so_far inclusive
        term = 1.0 / torch.log2(2.0 + rb.positions - rel.cumsum(-1))
    total = torch.where(rel > 0, term, torch.zeros_like(term)).sum(-1)
    return per_relevant(rb, total).unsqueeze(-1).expand(-1, len(ks)), no_relevant(rb)


def g_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Normalised gain (trec_eval's ``G``), ``(N, K)``: ``sum_i g_i / log2(2 + C_i - S_i)`` over the
    retrieved documents with a non-zero gain, divided by the sum of the ideal's positive gains,
    where ``S_i`` is the ranking's cumulative gain to rank ``i`` and ``C_i`` the ideal's, each ideal
    gain counted as at least 1. Raises ValueError under averaged ties.

    Edge cases: no positive ideal gain: 0 (flagged empty).

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds = torch.tensor([[3.0, 2.0, 1.0]], dtype=torch.float64)
        >>> # ideal gains 2, 1: C = 2, 3, 4; S = 0, 2, 3; (2 / log2(2 + 3 - 2) + 1 / log2(2 + 4 - 3)) / (2 + 1)
        >>> round(compute(parse_measures(["G"]), preds, torch.tensor([[0, 2, 1]]))["G"].item(), 6)
        0.63093
    """
    check_deterministic(rb, "g_values")
    g = rb.gains
    ideal = _positive_ideal(rb)
    cost = _positive_ideal(rb, rb.length).clamp(min=1.0).cumsum(-1)
    got = g.cumsum(-1)
    term = torch.where(g != 0, g / torch.log2((2.0 + cost) - got), torch.zeros_like(g))
    best = ideal.sum(-1)
    values = torch.where(best > 0, term.sum(-1) / torch.where(best > 0, best, 1.0), torch.zeros_like(best))
    return values.unsqueeze(-1).expand(-1, len(ks)), (best <= 0).unsqueeze(-1)


def _dcg_prefix(rb: RankedView, gains: Tensor) -> Tensor:
    return (gains * rb.discounts[: gains.shape[-1]]).cumsum(-1)


def ndcg_rel_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """nDCG averaged over the relevant documents (trec_eval's ``ndcg_rel``), ``(N, K)``: at each
    retrieved document with a positive gain, DCG to its rank over the ideal DCG to that rank; each
    positive-gain document of the ideal that is not retrieved adds the final DCG over the final
    ideal DCG; the sum is divided by the number of positive ideal gains. Raises ValueError under
    averaged ties.

    Edge cases: no positive ideal gain: 0 (flagged empty).

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds = torch.tensor([[3.0, 2.0]], dtype=torch.float64)
        >>> ideal = torch.tensor([[1, 0, 1]])        # a relevant document is not retrieved
        >>> round(compute(parse_measures(["ndcg_rel"]), preds, torch.tensor([[0, 1]]), ideal_target=ideal)["ndcg_rel"].item(), 6)
        0.386853
    """
    check_deterministic(rb, "ndcg_rel_values")
    g = rb.gains
    ideal = _positive_ideal(rb)
    dcg = _dcg_prefix(rb, g)
    idcg_at = _dcg_prefix(rb, _positive_ideal(rb, rb.length))
    idcg = _dcg_prefix(rb, ideal)[:, -1]
    hit = (g > 0) & rb.valid
    ratio = torch.where(hit & (idcg_at > 0), dcg / torch.where(idcg_at > 0, idcg_at, 1.0), torch.zeros_like(dcg))
    n_ideal = (ideal > 0).sum(-1).to(rb.dtype)
    missed = n_ideal - hit.sum(-1).to(rb.dtype)
    ok = idcg > 0
    total = ratio.sum(-1) + torch.where(ok, missed * dcg[:, -1] / torch.where(ok, idcg, 1.0), torch.zeros_like(idcg))
    values = torch.where(total > 0, total / n_ideal.clamp(min=1), torch.zeros_like(total))
    return values.unsqueeze(-1).expand(-1, len(ks)), (~ok).unsqueeze(-1)


def rndcg_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """nDCG averaged at the R levels (trec_eval's ``Rndcg``), ``(N, K)``: the mean of
    ``DCG@t / IDCG@t`` over the ranks ``t`` where the ideal gain changes (the ends of the ideal's
    gain levels, the last at the number of positive ideal gains ``P``), plus ``DCG@n / IDCG@P`` at
    the number retrieved ``n`` when ``n > P + 1`` (trec_eval's loop adds that point then only).

    Exact under averaged ties: the points do not depend on the ranking and DCG at a fixed rank is
    linear in it (the expected gain at a rank is its tie group's mean gain).

    Edge cases: no relevant document (at the relevance level): 0 (flagged empty).

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds = torch.tensor([[3.0, 2.0, 1.0]], dtype=torch.float64)
        >>> # ideal gains 2, 1: points at ranks 1 and 2: (1/2 + (1 + 2/log2(3)) / (2 + 1/log2(3))) / 2
        >>> round(compute(parse_measures(["Rndcg"]), preds, torch.tensor([[1, 2, 0]]))["Rndcg"].item(), 6)
        0.679859
    """
    ideal = _positive_ideal(rb)
    m = ideal.shape[-1]
    dcg = _dcg_prefix(rb, rb.expected(rb.gains))  # expected DCG to each rank
    idcg = _dcg_prefix(rb, ideal)
    ranks = torch.arange(1, m + 1, device=rb.device).clamp(max=rb.length)
    dcg_at = dcg.index_select(-1, ranks - 1)  # DCG@t for t = 1..M (ranks beyond the list add nothing)
    following = torch.constant_pad_nd(ideal[:, 1:], (0, 1))
    point = (following != ideal) & (ideal > 0)  # the ideal gain changes after rank t
    ratio = torch.where(point & (idcg > 0), dcg_at / torch.where(idcg > 0, idcg, 1.0), torch.zeros_like(idcg))
    n_positive = (ideal > 0).sum(-1)
    best = idcg[:, -1]
    end = (rb.n_valid > n_positive + 1) & (best > 0)
    total = ratio.sum(-1) + torch.where(end, dcg[:, -1] / torch.where(best > 0, best, 1.0), torch.zeros_like(best))
    count = point.sum(-1) + end.long()
    r = rb.n_relevant
    ok = (r > 0) & (count > 0)
    values = torch.where(ok, total / count.clamp(min=1).to(rb.dtype), torch.zeros_like(total))
    return values.unsqueeze(-1).expand(-1, len(ks)), no_relevant(rb)
