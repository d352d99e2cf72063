"""Average precision (binary and graded), exact under averaged ties."""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import cutoff_sizes, no_relevant
from torch_rankeval.ranking.view import RankedView, divide_into, prefix_sums

__all__ = ["average_precision_values"]


def _terms(rb: RankedView, width: int, *, binary: bool) -> Tensor:
    """Expected AP numerator term times its rank, ``w_p * (sum_{q <= p} w_q)``, at each of the first
    ``width`` ranked positions over the orders of tied documents, ``(N, width)`` (the caller divides by
    the ranks in the sum over each cutoff, :meth:`~torch_rankeval.ranking.view.RankedBatch.cumulative_per_rank`).

    For the ``j``-th slot ``p = s + j`` of a group of size ``n`` whose weights sum to ``S1`` (squares
    ``S2``) after ``C`` weight ranked above it, a uniformly random order gives
    ``E[term_p] = A + B (j - 1)`` with ``A = (S1 C + S2) / n`` and ``B = (S1^2 - S2) / (n (n - 1))``.
    With binary weights ``S2 = S1 = r`` (relevant in the group) and ``C = c``; without ties it is the
    classic ``rel_p * (relevant up to p)``. Binary terms are products of exact counts (in the dtype the
    counts are held in, :attr:`~torch_rankeval.ranking.view.TieGroups.rel_count`); graded ones are
    formed in float64, where ``S1^2 - S2`` does not cancel.
    """
    if binary and not rb.averaged:  # rel_p times the relevant documents up to p: exact counts
        # counted in int32 (half the memory of float64, whose row-sized temporaries cost page faults on
        # CPU), kept for the list's relevant count (the last column); the product in float64, which the
        # caller sums in
        rel = rb.head("relmask", width).view(torch.uint8)  # bytes: the fast kernels of cumsum and mul
        counts = rb.cached(f"rel_counts_{width}", lambda: rel.cumsum(-1, dtype=torch.int32))
        return (counts * rel).to(torch.float64)
    g = rb.groups(width)
    if binary:
        r, c = g.rel_count, g.rel_count_before
        # A + B (j - 1) = r / n * (1 + c + (r - 1) (j - 1) / (n - 1)); j - 1 = 0 when n = 1 (g.slot_share)
        mean = g.mean("rel")
        return torch.addcmul(mean, mean, torch.addcmul(c, r - 1, g.slot_share))
    s1, s2, c, n = g.gain, g.gain_sq, g.gain_before, g.size.double()
    a = (s1 * c + s2) / n
    b = (s1 * s1 - s2) / (n * (n - 1)).clamp(min=1)
    return a + b * g.offset.double()


def _harmonic(rb: RankedView) -> Tensor:
    """``H[i] = sum_{p <= i} 1/p`` for ``i = 0..L`` (float64)."""

    def make() -> Tensor:
        ranks = torch.arange(1, rb.length + 1, dtype=torch.float64, device=rb.device)
        return torch.cat([torch.zeros(1, dtype=torch.float64, device=rb.device), (1.0 / ranks).cumsum(0)])

    return rb.cached("harmonic", make)


def _retrieved_denominator_expectation(rb: RankedView, terms: Tensor, ks: tuple[int | None, ...]) -> Tensor:
    """Exact ``E[numerator / relevant retrieved]`` for binary AP when a tie group straddles a cutoff.

    Groups entirely above the cutoff contribute a numerator ``A`` independent of the straddling
    group. Of that group's ``n`` documents (``r`` relevant) ``m`` fall inside the cutoff, so the
    number ``X`` of relevant ones inside is hypergeometric; given ``X = x`` the ``x`` relevant
    documents sit uniformly in the ``m`` slots, which gives ``E[B | x]`` in closed form with
    harmonic sums. The result is ``sum_x P(X = x) (A + E[B | x]) / (c + x)``, in float64 (the
    hypergeometric law through ``lgamma``, exact at any group size).
    """
    idx = rb.cutoff_index(ks)
    width = max(idx) + 1
    g = rb.groups(width)
    f64 = torch.float64
    s, n, r, c = (g.at(name, idx).to(f64) for name in ("start", "size", "rel", "rel_before"))
    ends = rb.constant([i + 1 for i in idx], f64)
    m = ends - s
    cum = terms.to(f64).cumsum(-1)
    a = (cum - terms.to(f64)).gather(-1, g.at("start", idx).long())  # the numerator of the groups above
    harmonic = _harmonic(rb)
    h1 = harmonic[ends.long()] - harmonic.index_select(0, s.long().reshape(-1)).reshape(
        s.shape
    )  # sum_{s < p <= s + m} 1/p
    h2 = m - (s + 1) * h1  # sum over the m slots of (j - 1) / (s + j)
    x = torch.arange(width + 1, dtype=f64, device=rb.device)
    s, n, r, c, m, a, h1, h2 = (t.unsqueeze(-1) for t in (s, n, r, c, m, a, h1, h2))
    feasible = (x <= r) & (x <= m) & (m - x <= n - r)
    zero = torch.zeros((), dtype=f64, device=rb.device)

    def safe(t: Tensor) -> Tensor:  # keep lgamma's arguments in range
        return torch.where(feasible, t, zero)

    log_pmf = (
        torch.lgamma(r + 1)
        + torch.lgamma(n - r + 1)
        + torch.lgamma(m + 1)
        + torch.lgamma(n - m + 1)
        - torch.lgamma(n + 1)
        - torch.lgamma(x + 1)
        - torch.lgamma(safe(r - x) + 1)
        - torch.lgamma(safe(m - x) + 1)
        - torch.lgamma(safe(n - r - m + x) + 1)
    )
    pmf = torch.where(feasible, torch.exp(log_pmf), zero)
    expected_b = x / m * ((c + 1) * h1 + (x - 1) / (m - 1).clamp(min=1) * h2)
    found = c + x
    ratio = torch.where(found > 0, (a + expected_b) / found.clamp(min=1), zero)
    return (pmf * ratio).sum(-1).to(rb.dtype)


def average_precision_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Per-query AP at each cutoff and the "no relevant document" flag, ``(N, K)`` / ``(N, 1)``."""
    if conv.graded and conv.denominator == "retrieved_relevant" and conv.ties == "average":  # static: no sync
        if any(isinstance(k, int) and k < rb.length for k in ks):
            raise ValueError(
                "average_precision(graded=True, denominator='retrieved_relevant') has no exact tie-averaged value "
                "at a cutoff inside the list; use ties='first'/'pessimistic'/'optimistic' or another denominator"
            )
    denominator, graded = conv.denominator, conv.graded
    width = rb.span(ks)
    terms = _terms(rb, width, binary=not graded).to(torch.float64)  # the numerator is summed in float64
    inside_list = rb.truncated or any(i < rb.length - 1 for i in rb.cutoff_index(ks))
    if not graded and denominator == "retrieved_relevant" and rb.averaged and inside_list:
        return _retrieved_denominator_expectation(rb, terms / rb.ranks(width, torch.float64), ks), no_relevant(rb)
    numerator = rb.cumulative_per_rank(terms, ks)  # float64, rounded once in the division below
    if graded:
        ideal = rb.ideal_gains
        top = ideal.amax(-1, keepdim=True)  # the largest judged gain normalises weights to [0, 1]
        empty = top <= 0
        if denominator == "all_relevant":
            den = ideal.clamp(min=0).sum(-1, keepdim=True)
        elif denominator == "min_k_relevant":
            best = rb.ideal_top(ks).clamp(min=0)
            m = best.shape[-1]
            den = prefix_sums(best, [m - 1 if k is None else min(k, m) - 1 for k in ks])
        elif denominator == "k":  # k documents of the largest gain (normalised below: weight 1)
            den = cutoff_sizes(rb, ks, adaptive_k=False, dtype=rb.dtype) * top
        else:
            den = rb.expected_in_top("gains", ks)
        den = den * top
    else:
        r_total = rb.relevant_count.unsqueeze(-1)
        empty = no_relevant(rb)
        if denominator == "all_relevant":
            den = r_total
        elif denominator == "min_k_relevant":
            cut = rb.constant([float("inf") if k is None else float(k) for k in ks])
            den = torch.minimum(r_total, cut)
        elif denominator == "k":
            den = cutoff_sizes(rb, ks, adaptive_k=False)
        else:
            den = rb.expected_in_top("rel", ks)
    # den == 0 means no relevant weight anywhere counted, where the numerator is 0 too: 0 / 1
    if not graded and denominator != "retrieved_relevant":
        return divide_into(numerator, den.clamp(min=1), rb.dtype), empty  # a count: 0 or at least 1
    return divide_into(numerator, torch.where(den > 0, den, 1.0), rb.dtype), empty
