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
x_g^i a_{j-i}`` (all terms positive: no cancellation), whose weights follow from one another by their
ratio (:func:`_join`). The sum has ``min(c, j) + 1`` terms: on the CPU in eager mode the batch's
largest such count is read from memory (a handful: one block of vectorised terms per level), elsewhere
(CUDA, ``torch.compile``) every position takes the static bound ``W + 1``, ``O(max_grade * W^2)`` per
list for the ``W`` leading positions the cutoffs need (``W`` = the largest cutoff, or the list length
without one): cheap for ERR@10 or ERR@20, quadratic in the list length for an uncut ERR on long lists
(use a cutoff, or ``ties="first"``). Without ties the cost is one cumulative product.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import between, bounds, judged_grades, prefix
from torch_rankeval.ranking.inputs import reads_host
from torch_rankeval.ranking.view import RankedBatch, RankedView, device_constant  # noqa: F401 (RankedBatch: doctests)

__all__ = ["err_grade_checks", "err_values"]

#: terms of the tie-group sum computed together in :func:`_join` (a block of ``(N, W, _BLOCK)`` tensors)
_BLOCK = 8


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
    host = reads_host(a)  # CPU eager: the levels read their largest term count (no device to wait for)
    log_fact = torch.lgamma(
        torch.arange(getattr(rb, "row_length", rb.length) + 1, dtype=torch.float64, device=rb.device) + 1
    )
    for g, c in zip(range(1, m_top + 1), counts):
        a = _join(a, j, size, c, 1.0 - (2.0**g - 1.0) / 2.0**m_top, log_fact, host=host)
        size = size + c
    ones = torch.ones_like(n)
    a_prev = torch.where(j == 1, ones, torch.cat([ones[:, :1], a[:, :-1]], dim=-1))
    term = p_before * (a_prev - a) / ranks
    return rb.cumulative(term, ks).to(rb.dtype), None


def _join(a: Tensor, j: Tensor, n_old: Tensor, c: Tensor, x: float, log_fact: Tensor, *, host: bool) -> Tensor:
    """``a'_j = sum_i H(i; n_old + c, c, j) x^i a_{j-i}`` at each position's own slot ``j``: the mean
    product over the ``j``-subsets once ``c`` documents of weight ``x`` join the ``n_old`` of ``a``
    (``a_{j-i}`` sits ``i`` positions earlier in the same group; ``a_0 = 1``), float64 ``(N, W)``;
    ``log_fact[m] = log m!`` up to the list length.

    The terms are summed from the largest ``i = min(c, j)`` down, whose weight is never 0 (``j - i <=
    n_old``); each next weight is the last times its ratio, ``i (n_old - j + i) / ((c - i + 1)(j - i + 1)
    x)``, which reaches 0 exactly where the support ends (no ``lgamma`` per term), in blocks of
    :data:`_BLOCK` terms (a cumulative product each). Terms up to the static bound ``W`` (``i <= j <=
    W``), or on the CPU in eager mode up to the largest ``min(c, j)`` of the batch, read from memory (a
    tie group's count of one grade: a handful, one block).

    Example:
        >>> a = torch.ones(1, 2, dtype=torch.float64)     # two documents with x = 1, slots 1 and 2
        >>> one = torch.ones(1, 2, dtype=torch.float64)
        >>> log_fact = torch.lgamma(torch.arange(3, dtype=torch.float64) + 1)
        >>> _join(a, torch.tensor([[1.0, 2.0]], dtype=torch.float64), one, one, 0.5, log_fact, host=True)
        tensor([[0.7500, 0.5000]], dtype=torch.float64)
    """
    n_new = n_old + c
    top = torch.minimum(c, j)
    live = j <= n_new  # a slot past the set so far holds 0 (a later level fills it)
    zero = torch.zeros((), dtype=a.dtype, device=a.device)
    # log H(top) x^top = log C(c, top) + log C(n_old, j - top) - log C(n_new, j) + top log x, off the table
    # of log m!: nine entries, read in one take (past the set, j > n_new, the two clamped ones are dead)
    counts = (c, top, c - top, n_old, j - top, (n_old - j + top).clamp(min=0), n_new, j, (n_new - j).clamp(min=0))
    signs = device_constant((1.0, -1.0, -1.0, 1.0, -1.0, -1.0, -1.0, 1.0, 1.0), a.dtype, a.device)
    log_w = torch.tensordot(signs, log_fact.take(torch.stack(counts).long()), 1) + top * math.log(x)
    w = torch.where(live, torch.exp(log_w), zero).unsqueeze(-1)  # the term i = top's weight, times x^top
    n, width = a.shape
    steps = int(top.max()) + 1 if host and top.numel() else width + 1
    t = torch.arange(min(steps, _BLOCK), dtype=a.dtype, device=a.device)  # a block of terms, vectorised
    slot, old_gap = j.unsqueeze(-1), (n_old - j).unsqueeze(-1)
    c_next, slot_next = (c + 1).unsqueeze(-1), (j + 1).unsqueeze(-1)
    first_at = (torch.arange(width, device=a.device) - top.long()).unsqueeze(-1)  # the position of slot j - top
    one = torch.ones((), dtype=a.dtype, device=a.device)
    out = torch.zeros_like(a)
    for first in range(0, steps, t.shape[0]):
        i = top.unsqueeze(-1) - (t + first)  # (N, W, B): the block's terms
        ratio = i * (old_gap + i) / ((c_next - i) * (slot_next - i) * x)  # from term i to term i - 1
        weights = w * torch.cat([torch.ones_like(w), ratio[..., :-1]], dim=-1).cumprod(-1)
        # slot 0: the empty product; past i = 0 the weight is 0 and the index only has to be in the row
        at = (first_at + (t.long() + first)).clamp_(0, width - 1)
        prev = torch.where(slot == i, one, a.gather(-1, at.view(n, -1)).view_as(i))
        out += (weights * prev).sum(-1)
        w = weights[..., -1:] * ratio[..., -1:]
    return out
