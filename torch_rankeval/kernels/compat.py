"""Clarke, Vtyurina and Smucker's compatibility (ir_measures' ``Compat``): the rank-biased overlap
(RBO) of the ranking with an ideal ranking, over its value for the ideal ranking itself.

The ideal ranking lists the relevant documents of the judged set by grade, highest first; within a
grade, the retrieved ones in the order the ranking gives them, then those not retrieved. With ``D =
max(n, R)`` (``n`` documents retrieved, ``R`` relevant) and ``O(d)`` the number of documents among
both the ranking's and the ideal ranking's first ``d``::

    RBO = sum_{d=1..D} p^(d-1) O(d) / d  /  sum_{d=1..D} p^(d-1)

and with ``normalize`` (the default) RBO over that of the ideal ranking against itself
(``O(d) = min(d, R)``), 0 for a query without relevant document.

The judged set's grades come from ``ideal_target`` (else the list's own). Relevant documents known
only by their count (``n_relevant=`` beyond the grades given) come last in the ideal ranking, after
every relevant document whose grade is given: they can overlap with nothing, and only their number
counts (exact for binary grades). Within a grade, ir_measures' ``compat`` provider orders the relevant
documents by their scores in the run, and documents of equal scores (retrieved or not) by the qrels
file's order: the same as here when that file lists them by docno, as the ranking (score, then docno
ascending) does.

A retrieved relevant document at rank ``r`` and ideal position ``s`` is in both prefixes from depth
``max(r, s)`` on, so the sum over depths is a sum over those documents of a table ``T(k) = sum_{d<=k}
p^(d-1) / d``: no loop over depths or queries, no data-dependent shape.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import no_relevant
from torch_rankeval.ranking.view import RankedBatch, RankedView  # noqa: F401 (RankedBatch: the doctests)

__all__ = ["compat_values"]

_NEGLIGIBLE = 40.0  # p^J <= e^-40: the depths past J add nothing to a float64 sum
_MAX_EXTRA = 1 << 22
_EULER = 0.5772156649015329


def _tables(p: float, width: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """``T(k) = sum_{d <= k} p^(d-1) / d`` and ``P(k) = sum_{d <= k} p^(d-1)`` for ``k = 0..width + J``,
    float64: ``J`` more depths than the lists hold, after which ``p^(d-1)`` no longer changes a float64
    sum (a relevant count beyond the lists, ``n_relevant=``, reads them)."""
    f64 = torch.float64
    extra = 1 if p <= 0 else min(int(math.ceil(_NEGLIGIBLE / -math.log(p))), _MAX_EXTRA)
    d = torch.arange(1, width + extra + 1, dtype=f64, device=device)
    weight = torch.pow(torch.tensor(float(p), dtype=f64, device=device), d - 1)
    zero = torch.zeros(1, dtype=f64, device=device)
    return torch.cat([zero, (weight / d).cumsum(0)]), torch.cat([zero, weight.cumsum(0)])


def compat_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, *, p: float = 0.95, normalize: bool = True
) -> tuple[Tensor, Tensor]:
    """Compatibility of each list with its ideal ranking, ``(N, K)``, and the "no relevant document"
    flag ``(N, 1)``. ``p``: RBO's persistence; ``normalize``: divide by the ideal ranking's own RBO.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> from dataclasses import replace
        >>> first = replace(DEFAULT, ties="first")
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[0, 2, 1]]), None, first)
        >>> # ideal (2, 1): O = 0, 1, 2; RBO = (0 + 0.5 * 1/2 + 0.25 * 2/3) / 1.75; ideal's (1 + 0.5 + 0.25 * 2/3) / 1.75
        >>> compat_values(rb, (None,), first, p=0.5)[0]
        tensor([[0.2500]])
        >>> compat_values(rb, (None,), first, p=0.5, normalize=False)[0]      # (0.25 + 1/6) / 1.75
        tensor([[0.2381]])
    """
    if not 0 <= p <= 1:
        raise ValueError(f"Compat's persistence p must be in [0, 1], got {p!r}")
    if 1 - 1e-5 < p < 1:
        raise ValueError(f"Compat's persistence p must be 1 or at most 0.99999 (its depth table), got {p!r}")
    f64 = torch.float64
    length = rb.length
    width = length if rb.ideal_target is None else max(length, rb.ideal_target.shape[-1])
    valid, relevant = rb.valid, rb.rel > 0
    grade = rb.target.to(f64)
    n = rb.n_valid.to(torch.int64)
    # T(k) = sum_{d <= k} p^(d-1) / d and P(k) = sum_{d <= k} p^(d-1); for p = 1, H(k) and k
    if p == 1:
        t_table = p_table = None
        top = None
    else:
        t_table, p_table = _tables(p, width, rb.device)
        top = t_table.shape[0] - 1
    big_r = rb.n_relevant.to(torch.int64)
    depth = torch.maximum(n, big_r)
    if top is not None:
        big_r, depth = big_r.clamp(max=top), depth.clamp(max=top)
    # The ideal position of each retrieved relevant document: the relevant documents of higher grade
    # (retrieved or not), then the retrieved ones of its grade that rank above it.
    inf = torch.tensor(float("inf"), dtype=f64, device=rb.device)
    key = torch.where(relevant, -grade, inf)
    order = torch.argsort(key, dim=-1, stable=True)  # grade descending, ranked order within a grade
    place = torch.empty_like(order).scatter_(-1, order, torch.arange(length, device=rb.device).expand_as(order))
    retrieved_above = torch.searchsorted(key.gather(-1, order).contiguous(), key.contiguous())  # higher grades
    if rb.ideal_target is None:
        judged_above = retrieved_above
    else:
        ideal = rb.ideal_target.to(f64)
        keep = ideal == ideal if rb.ideal_valid is None else rb.ideal_valid
        ideal_key = torch.where(keep, -ideal, inf).sort(-1).values
        judged_above = torch.searchsorted(ideal_key.contiguous(), key.contiguous())
    ideal_pos = place + 1 + (judged_above - retrieved_above).clamp(min=0)
    rank = torch.arange(1, length + 1, device=rb.device)
    both_from = torch.maximum(rank, ideal_pos).clamp(max=width)  # the depth from which it is in both prefixes

    def t_at(k: Tensor) -> Tensor:
        if t_table is None:  # p = 1: the harmonic number H(k) = digamma(k + 1) + Euler's gamma
            return torch.where(k > 0, torch.digamma(k.to(f64) + 1) + _EULER, 0.0)
        return t_table[k]

    def p_at(k: Tensor) -> Tensor:
        return k.to(f64) if p_table is None else p_table[k]

    t_depth = t_at(depth)
    counted = relevant & valid
    tail = t_depth.unsqueeze(-1) - t_at(both_from - 1)
    overlap = torch.where(counted, tail, torch.zeros((), dtype=f64, device=rb.device)).sum(-1)
    if normalize:
        best = p_at(big_r) + big_r.to(f64) * (t_depth - t_at(big_r))
        values = torch.where(best > 0, overlap / torch.where(best > 0, best, 1.0), 0.0)
    else:
        norm = p_at(depth)
        values = torch.where(norm > 0, overlap / torch.where(norm > 0, norm, 1.0), 0.0)
    return values.to(rb.dtype).unsqueeze(-1).expand(-1, len(ks)), no_relevant(rb)
