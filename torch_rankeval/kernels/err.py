"""Expected reciprocal rank (Chapelle, Metzler, Zhang & Grinspan, CIKM 2009), as gdeval computes it.

``ERR@k = sum_{i <= k} (1 / i) R_i prod_{j < i} (1 - R_j)`` with the stopping probability
``R = (2^g - 1) / 2^max_grade`` of a document of grade ``g`` (gdeval: ``max_grade = 4``). Grades must
be integers in ``0 .. max_grade``; negative grades count as 0 (gdeval), and so do unjudged documents
and padding. With ``validate_args=True`` a judged grade above ``max_grade`` or with a fraction is a
``ValueError``; without validation it is clamped to ``max_grade`` and rounded down. ERR has no
empty case: a list without relevant documents scores 0; a cutoff beyond the list sums the list.

**Ties** (``ties="average"``): the exact expected value over all orders of the tied documents.
The product over the documents above a tie group does not depend on their order, so the
expectation is, per group starting at 0-based position ``s``, ``P_before * sum_j (a_{j-1} - a_j) /
(s + j)`` over its slots ``j`` inside the cutoff, with ``a_j`` the mean of ``prod (1 - R)`` over the
``j``-subsets of the group. ``a_j`` is built level by level: adding the group's ``c`` documents of
grade ``g`` to a set of ``n - c`` documents is a hypergeometric mixture ``a'_j = sum_i H(i; n, c, j)
x_g^i a_{j-i}`` (all terms positive: no cancellation). This costs ``O(max_grade * W^2)`` per list for
the ``W`` leading positions the cutoffs need (``W`` = the largest cutoff, or the list length
without one) — cheap for ERR@10 or ERR@20, quadratic in the list length for an uncut ERR on long
lists with ties (use a cutoff, or ``ties="first"``). Without ties the cost is one cumulative product.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import between, bounds, judged_grades, prefix
from torch_rankeval.ranking.view import RankedBatch, RankedView, log_comb  # noqa: F401 (RankedBatch: the doctests)

__all__ = ["err_grade_checks", "err_values"]


def err_grade_checks(rb: RankedView, *, max_grade: int = 4) -> list[tuple[Tensor, str]]:
    """Value checks (flag, message) for ERR's grades, resolved by the caller in its one host sync."""
    t = rb.target
    bad = rb.judged & rb.valid & ((t > max_grade) | (t != t.floor()))
    message = (
        f"ERR needs integer grades in 0..max_grade={max_grade} (gdeval's scale); got a larger or fractional "
        "grade: give ERR(max_grade=...) the top grade of your scale (e.g. ERR(max_grade=5)@10)"
    )
    return [(bad.any(), message)]


def err_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, *, max_grade: int = 4
) -> tuple[Tensor, None]:
    """Expected reciprocal rank at each cutoff, ``(N, K)``.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[0, 4, 2]]), None, DEFAULT)
        >>> err_values(rb, (1, 2, 3), DEFAULT)[0]          # R = 15/16 at rank 2, then 3/16 at rank 3
        tensor([[0.0000, 0.4688, 0.4727]])
    """
    m_top = int(max_grade)
    level = judged_grades(rb).clamp(max=m_top).floor()
    stop = (torch.exp2(level) - 1) / 2.0**m_top
    log_keep = torch.log1p(-stop)  # log(1 - R) >= -max_grade * log(2): finite
    width = rb.span(ks)
    ranks = torch.arange(1, width + 1, dtype=torch.float64, device=rb.device)
    if not rb.averaged:
        before = log_keep.cumsum(-1) - log_keep
        return rb.cumulative((stop * torch.exp(before))[:, :width] / ranks, ks).to(rb.dtype), None

    start, end = bounds(rb)
    s, e = start[:, :width], end[:, :width]
    n = (e - s).to(torch.float64)
    j = ranks - s.to(torch.float64)  # 1-based slot inside the group
    p_before = torch.exp(prefix(log_keep).gather(-1, s))
    counts = [between(prefix(level == g), s, e) for g in range(1, m_top + 1)]
    size = n - sum(counts)  # documents with R = 0 (x = 1): the mean of their products is 1
    a = torch.ones_like(n)  # a_j of the current set, at each slot j of the group
    ones = torch.ones_like(n)
    for g, c in zip(range(1, m_top + 1), counts):
        x = 1.0 - (2.0**g - 1.0) / 2.0**m_top
        n_old, n_new = size, size + c
        fixed = torch.lgamma(c + 1) + torch.lgamma(n_old + 1) - log_comb(n_new, torch.minimum(j, n_new))
        new = torch.zeros_like(a)
        for i in range(width + 1):
            ok = (c >= i) & (j >= i) & (n_old >= j - i) & (j <= n_new)
            ci, ji = torch.where(ok, c - i, ones), torch.where(ok, j - i, ones)
            log_h = (
                fixed
                - math.lgamma(i + 1)
                - torch.lgamma(ci + 1)
                - torch.lgamma(ji + 1)
                - torch.lgamma(torch.where(ok, n_old - ji, ones) + 1)
            )
            shifted = a if i == 0 else ones if i >= width else torch.cat([ones[:, :i], a[:, : width - i]], dim=-1)
            old = torch.where(j == i, ones, shifted)
            new = new + torch.where(ok, torch.exp(log_h) * (x**i) * old, torch.zeros_like(a))
        a, size = new, n_new
    a_prev = torch.where(j == 1, ones, torch.cat([ones[:, :1], a[:, :-1]], dim=-1))
    term = p_before * (a_prev - a) / ranks
    return rb.cumulative(term, ks).to(rb.dtype), None
