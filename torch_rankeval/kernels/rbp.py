"""Rank-biased precision and its residual (Moffat & Zobel, TOIS 2008; trec_eval 10.0's ``rbp``, ``rbp_resid``).

``RBP@k = (1 - p) * sum_{i <= k} u_i p^(i-1)`` for the persistence ``p`` and the utility ``u_i`` in
[0, 1] of the document at rank ``i``:

- with ``rel`` given (ir_measures' ``RBP(rel=1)``): 1 for a judged document with grade ``>= rel``, else 0;
- otherwise graded, as trec_eval: the gain of a grade is the grade itself, or the value ``gains``
  maps it to; when a gain of the query's relevance levels (``0 .. G``, ``G`` its largest judged
  grade, retrieved or not, plus every level ``gains`` names) lies outside [0, 1], all gains are
  rescaled to ``(gain - lo) / (hi - lo)`` over those levels. Binary grades are used as they are;
  grades ``0..4`` become ``grade / 4``.

Unjudged documents (``judged=False``) and padding have utility 0; negative grades count as 0.

``depth=D`` is RBP as cwl_eval computes it (the C/W/L form, ir_measures' ``RBP(rel=...)`` with ``D=1000``):
only the first ``D`` ranks count and the weights are normalised over them,
``(1 - p) / (1 - p**D) * sum_{i <= min(k, D)} u_i p^(i-1)``.

The residual ``rbp_resid@k`` is the most RBP could still rise if every unjudged document in the
top ``k`` were fully relevant and the ranking went on past its end with relevant documents:
``(1 - p) * sum_{unjudged i <= k} p^(i-1) + p^m`` with ``m = min(k, n)`` the documents inside the
cutoff (Moffat & Zobel's residual). ``tail="if_unjudged"`` is trec_eval 10.0's variant: the same
value, but 0 for a ranking without unjudged document (trec_eval's ``rbp_resid``).

Ties: RBP and the unjudged weight are linear in the ranked utilities, so their expectation over
the orders of tied documents replaces each utility by its tie group's mean (exact). For
``tail="if_unjudged"`` the tail is weighted by the exact probability that the top ``k`` hold an
unjudged document (hypergeometric in the tie group the cutoff splits). Neither has an empty case:
a list without relevant documents scores RBP 0.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import between, bounds, cut_groups, judged_grades, prefix
from torch_rankeval.ranking.view import RankedBatch, RankedView, device_constant, log_comb  # noqa: F401 (RankedBatch: the doctests)

__all__ = ["rbp_residual_values", "rbp_values"]


def _weighted_expected(
    rb: RankedView, u: Tensor, ks: tuple[int | None, ...], p: float, depth: int | None = None
) -> Tensor:
    """``(1 - p) * sum_{i <= k} E[u_i] p^(i-1)``, ``(N, K)`` float64; with ``depth``, over the first ``depth``
    ranks only, divided by ``1 - p**depth``."""
    start, end = bounds(rb)
    cs = prefix(u)
    mean = between(cs, start, end) / (end - start).to(torch.float64)
    ranks = torch.arange(rb.length, dtype=torch.float64, device=rb.device)
    w = (1.0 - p) * torch.pow(float(p), ranks)
    if depth is not None:
        w = torch.where(ranks < depth, w, torch.zeros((), dtype=torch.float64, device=rb.device)) / (1.0 - p**depth)
    return rb.cumulative(mean * w, ks)


def _levels_range(top: Tensor, gains: Mapping[float, float] | None) -> tuple[Tensor, Tensor]:
    """trec_eval's lowest and highest gain over the levels ``0 .. top`` and the levels ``gains`` names."""
    if gains is None:
        return torch.zeros_like(top), top
    keys = sorted(float(k) for k in gains)
    values = [float(gains[k]) for k in keys]
    hi_free = top.clone()  # the highest level in 0..top that `gains` does not name
    for key in reversed(keys):
        hi_free = torch.where(hi_free == key, hi_free - 1, hi_free)
    lo_free = torch.zeros_like(top)  # the lowest such level
    for key in keys:
        lo_free = torch.where(lo_free == key, lo_free + 1, lo_free)
    vmin, vmax = min(values), max(values)
    lo = torch.where(lo_free <= top, torch.clamp(lo_free, max=vmin), torch.full_like(top, vmin))
    hi = torch.where(hi_free >= 0, torch.clamp(hi_free, min=vmax), torch.full_like(top, vmax))
    return lo, hi


def _top_grade(rb: RankedView, grades: Tensor) -> Tensor:
    """The largest judged grade of each query (0 at least): over every judged document when the
    batch carries them (``ideal_target``), else over the list."""
    ideal = rb._ideal_target  # trec_eval's relevance levels count unretrieved judged documents too
    if ideal is None:
        return grades.amax(-1).clamp(min=0)
    t = ideal.to(torch.float64)
    if rb._ideal_valid is not None:
        t = torch.where(rb._ideal_valid, t, torch.zeros_like(t))
    return t.amax(-1).clamp(min=0)


def utilities(rb: RankedView, *, rel: float | None = None, gains: Mapping[float, float] | None = None) -> Tensor:
    """Utility in [0, 1] of each ranked document, ``(N, L)`` float64 (see the module docstring)."""
    judged = rb.judged & rb.valid
    grades = judged_grades(rb)
    if rel is not None:
        return (judged & (rb.target >= rel)).to(torch.float64)
    g = grades
    if gains is not None:
        keys = device_constant(tuple(float(k) for k in gains), torch.float64, rb.device)
        vals = device_constant(tuple(float(gains[k]) for k in gains), torch.float64, rb.device)
        hit = grades.unsqueeze(-1) == keys
        g = torch.where(hit.any(-1), (hit * vals).sum(-1), grades)
    lo, hi = (t.unsqueeze(-1) for t in _levels_range(_top_grade(rb, grades), gains))
    rescale = (lo < 0) | (hi > 1)
    scaled = (g - lo) / torch.where(hi > lo, hi - lo, torch.ones_like(hi))
    return torch.where(judged, torch.where(rescale, scaled, g), torch.zeros_like(g))


def rbp_values(
    rb: RankedView,
    ks: tuple[int | None, ...],
    conv: Convention,
    *,
    p: float = 0.9,
    rel: float | None = None,
    gains: Mapping[float, float] | None = None,
    depth: int | None = None,
) -> tuple[Tensor, None]:
    """Rank-biased precision at each cutoff, ``(N, K)``; ``depth``: cwl_eval's (see the module docstring).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 1]]), None, DEFAULT)
        >>> rbp_values(rb, (None,), DEFAULT, p=0.5)[0]                     # 0.5 * (1 + 0.25)
        tensor([[0.6250]])
        >>> rbp_values(rb, (None,), DEFAULT, p=0.5, depth=2)[0]            # 0.5 * 1 / (1 - 0.25)
        tensor([[0.6667]])
    """
    return _weighted_expected(rb, utilities(rb, rel=rel, gains=gains), ks, p, depth).to(rb.dtype), None


def rbp_residual_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, *, p: float = 0.9, tail: str = "always"
) -> tuple[Tensor, None]:
    """RBP's residual at each cutoff, ``(N, K)`` (see the module docstring).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 1]]), None, DEFAULT,
        ...                  judged=torch.tensor([[True, False, True]]))
        >>> rbp_residual_values(rb, (None,), DEFAULT, p=0.5)[0]            # 0.5 * 0.5 + 0.5 ** 3
        tensor([[0.3750]])
    """
    unjudged = rb.valid & ~rb.judged
    weight = _weighted_expected(rb, unjudged, ks, p)
    inside = rb.constant([rb.length if k is None else k for k in ks], torch.float64)
    m = torch.minimum(inside, rb.n_valid.to(torch.float64).unsqueeze(-1))
    resid = weight + torch.pow(float(p), m)
    if tail == "if_unjudged":
        resid = weight + (resid - weight) * _any_in_top(rb, unjudged, ks)
    elif tail != "always":
        raise ValueError(f"tail must be 'always' or 'if_unjudged', got {tail!r}")
    return resid.to(rb.dtype), None


def _any_in_top(rb: RankedView, flags: Tensor, ks: tuple[int | None, ...]) -> Tensor:
    """Probability that the top ``k`` hold a flagged document, over the orders of tied documents."""
    cs = prefix(flags)
    idx, s, e = cut_groups(rb, ks)
    before = cs.gather(-1, s)
    n = (e - s).to(torch.float64)
    f = between(cs, s, e)
    m = (idx + 1 - s).to(torch.float64)
    can_miss = n - f >= m
    miss = torch.where(
        can_miss, torch.exp(log_comb(torch.where(can_miss, n - f, m), m) - log_comb(n, m)), torch.zeros_like(n)
    )
    return torch.where(before > 0, torch.ones_like(miss), 1 - miss)
