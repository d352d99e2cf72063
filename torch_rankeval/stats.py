"""Significance tests and confidence intervals over per-query scores.

Comparing two systems on the same queries is a *paired* problem: each query gives one difference
``d = x - y``. This module offers the tests papers report, on tensors of per-query values
``(Q,)`` or ``(Q, M)`` (queries first; trailing dimensions, e.g. one column per measure or per
pair of systems, are tested independently in one vectorised call):

- :func:`paired_t_test`: Student's paired t-test (scipy.stats.ttest_rel).
- :func:`randomization_test`: Fisher's paired randomization (sign-flip permutation) test; exact
  enumeration of all ``2^Q`` sign patterns for small ``Q``, seeded Monte Carlo otherwise.
- :func:`bootstrap_ci`: percentile bootstrap confidence interval of the mean difference.
- :func:`holm` and :func:`bonferroni`: family-wise corrections of several p-values.
- :func:`compare_runs`: all of the above for several runs and measures at once (means, pairwise
  differences, intervals, p-values, adjusted p-values, significance, winners); the command line's
  ``compare`` only formats its result.

Randomness comes from a ``torch.Generator`` seeded by ``seed``: the same call gives the same
numbers on the same device. Per-query values from :func:`torch_rankeval.trec.evaluate` (its
``per_query``) or from the functional metrics with ``reduction="none"`` plug in directly.

    >>> import torch
    >>> from torch_rankeval import stats
    >>> a = torch.tensor([0.61, 0.42, 0.55, 0.70, 0.38, 0.66, 0.59, 0.47], dtype=torch.float64)
    >>> b = torch.tensor([0.52, 0.40, 0.49, 0.64, 0.39, 0.58, 0.50, 0.41], dtype=torch.float64)
    >>> round(float(stats.paired_t_test(a, b).pvalue), 5)
    0.00266
    >>> float(stats.randomization_test(a, b).pvalue)     # exact: 4 of the 2^8 sign patterns
    0.015625
    >>> low, high = stats.bootstrap_ci(a, b, seed=0)
    >>> bool(0 < low < (a - b).mean() < high)
    True
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "ALTERNATIVES",
    "CORRECTIONS",
    "TESTS",
    "RunComparison",
    "TestResult",
    "adjust_pvalues",
    "bonferroni",
    "bootstrap_ci",
    "compare_runs",
    "holm",
    "paired_t_test",
    "randomization_test",
]

ALTERNATIVES = ("two-sided", "greater", "less")
CORRECTIONS = ("holm", "bonferroni", "none")
# Relative tolerance when comparing resampled statistics with the observed one (as scipy does), so
# that rounding noise does not decide whether an equally extreme resample counts.
_REL_TOL = 1e-14
# Resampling works in slices of about this many (resample, query) entries.
_SLICE = 1 << 22
# Resampled statistics kept in memory for an exact quantile (128 MiB, torch.quantile's limit); beyond,
# the resamples are streamed.
_KEEP = 1 << 24
_BINS = 4096  # histogram bins of a streamed quantile's pass
_MAX_PASSES = 64  # a streamed quantile needs a handful (each narrows a bracket 4096-fold); a guard


@dataclass(frozen=True)
class TestResult:
    """A test's statistic and p-value, with the shape of the input's trailing dimensions.

    Attributes:
        statistic: the t statistic (t-test) or the mean difference (randomization test).
        pvalue: the p-value.
    """

    statistic: Tensor
    pvalue: Tensor

    __test__ = False  # not a pytest test class


def _differences(x: Tensor, y: Tensor | None) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor of per-query values, got {type(x).__name__}")
    if y is not None:
        if not isinstance(y, Tensor):
            raise TypeError(f"y must be a tensor of per-query values, got {type(y).__name__}")
        if x.shape != y.shape:
            raise ValueError(
                f"x and y must have the same shape (paired per-query values), got {tuple(x.shape)} and {tuple(y.shape)}"
            )
        if x.device != y.device:
            raise ValueError(f"x is on {x.device} but y is on {y.device}: move both to one device")
    if x.ndim == 0:
        raise ValueError("x must hold one value per query, shape (Q,) or (Q, ...); got a scalar")
    if x.shape[0] < 2:
        raise ValueError(f"a paired test needs at least 2 queries, got {x.shape[0]}")
    if x.is_complex() or (y is not None and y.is_complex()):
        raise TypeError("per-query values must be real numbers")
    d = x.to(torch.float64) if y is None else x.to(torch.float64) - y.to(torch.float64)
    if not torch.isfinite(d).all():
        raise ValueError(
            "per-query values contain NaN or infinity: drop or fill those queries first "
            "(e.g. empty_target_action='neg')"
        )
    return d


def _check_alternative(alternative: str) -> None:
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative={alternative!r} is not valid: use one of {', '.join(map(repr, ALTERNATIVES))}")


def _check_count(n: int, name: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{name} must be a positive int, got {n!r}")


def _check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or not -(2**63) <= seed < 2**64:
        raise ValueError(f"seed must be an int between -2**63 and 2**64 - 1 (a torch.Generator seed), got {seed!r}")


def paired_t_test(x: Tensor, y: Tensor, *, alternative: str = "two-sided") -> TestResult:
    """Student's paired t-test of ``mean(x - y) = 0`` over the first dimension (queries).

    Uses ``scipy.stats.ttest_rel``. When every difference is equal the variance is 0 and scipy
    returns NaN; here identical systems (all differences 0) give ``statistic=0, pvalue=1`` and a
    constant non-zero difference gives ``statistic=±inf`` with p-value 0 (or 1 for the other
    one-sided alternative).

    Args:
        x, y: per-query values ``(Q,)`` or ``(Q, ...)`` of two systems on the same queries.
        alternative: ``"two-sided"`` (default), ``"greater"`` (``x > y``) or ``"less"``.

    Returns:
        :class:`TestResult` with the t statistics and p-values, shape ``x.shape[1:]``, float64,
        on ``x``'s device.

    Raises:
        ImportError: scipy is not installed (``pip install 'torch-rankeval[cli]'``).

    Example:
        >>> import torch
        >>> x, y = torch.tensor([0.5, 0.7, 0.9, 0.6]), torch.tensor([0.4, 0.5, 0.6, 0.6])
        >>> r = paired_t_test(x, y)
        >>> round(float(r.statistic), 4), round(float(r.pvalue), 4)
        (2.3238, 0.1027)
    """
    _check_alternative(alternative)
    d = _differences(x, y)
    try:
        from scipy import stats as scipy_stats
    except ImportError as exc:  # pragma: no cover - exercised without scipy only
        raise ImportError(
            "the paired t-test needs scipy: pip install 'torch-rankeval[cli]' (or pip install scipy)"
        ) from exc
    mean = d.mean(0).cpu()
    constant = (d == d[:1]).all(0).cpu()
    values = d.cpu().numpy()
    if bool(constant.any()):  # scipy would warn and return NaN: give it placeholder data, overridden below
        placeholder = (torch.arange(d.shape[0], dtype=torch.float64) % 2).reshape((-1,) + (1,) * (d.ndim - 1))
        values = torch.where(constant, placeholder, d.cpu()).numpy()
    result = scipy_stats.ttest_rel(values, values * 0.0, axis=0, alternative=alternative)
    signed = torch.where(mean == 0, 0.0, torch.sign(mean) * math.inf)
    reached = {"two-sided": mean != 0, "greater": mean > 0, "less": mean < 0}[alternative]  # by a constant difference
    statistic = torch.where(constant, signed, torch.as_tensor(result.statistic, dtype=torch.float64))
    pvalue = torch.where(constant, (~reached).to(torch.float64), torch.as_tensor(result.pvalue, dtype=torch.float64))
    return TestResult(statistic.to(d.device), pvalue.to(d.device))


def _p_from_null(null: Tensor, observed: Tensor, alternative: str) -> Tensor:
    """Counts of resampled statistics at least as extreme as the observed one, ``(...)``."""
    gamma = (observed.abs() * _REL_TOL).clamp(min=1e-300)
    if alternative == "greater":
        hits = null >= observed - gamma
    elif alternative == "less":
        hits = null <= observed + gamma
    else:
        hits = null.abs() >= observed.abs() - gamma
    return hits.sum(0)


def randomization_test(
    x: Tensor,
    y: Tensor,
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    alternative: str = "two-sided",
    exact: bool | None = None,
) -> TestResult:
    """Fisher's paired randomization test of ``mean(x - y) = 0`` (sign-flip permutation test).

    Under the null hypothesis the two systems are exchangeable on each query, so every query's
    difference is equally likely to have either sign. The p-value is the share of the ``2^Q``
    sign patterns whose mean difference is at least as extreme as the observed one.

    Args:
        x, y: per-query values ``(Q,)`` or ``(Q, ...)``.
        n_resamples: Monte Carlo sign patterns (when not exact).
        seed: seed of the ``torch.Generator`` on ``x``'s device.
        alternative: ``"two-sided"`` (``|mean| >=``, default), ``"greater"``, ``"less"``.
        exact: enumerate all ``2^Q`` patterns (``None``: when ``2^Q <= n_resamples``).

    Returns:
        :class:`TestResult`: the observed mean difference and the p-value, shape ``x.shape[1:]``.
        Exact: the share of all patterns (the observed pattern included). Monte Carlo:
        ``(hits + 1) / (n_resamples + 1)``, never 0 (Phipson & Smyth, 2010).

    Example:
        >>> import torch
        >>> x, y = torch.tensor([0.5, 0.7, 0.9, 0.6]), torch.tensor([0.4, 0.5, 0.6, 0.6])
        >>> randomization_test(x, y).pvalue    # exact: 4 of the 16 sign patterns reach |mean| >= 0.15
        tensor(0.2500, dtype=torch.float64)
        >>> round(float(randomization_test(x, y, exact=False, n_resamples=4000, seed=1).pvalue), 2)
        0.26
    """
    _check_alternative(alternative)
    _check_count(n_resamples, "n_resamples")
    _check_seed(seed)
    d = _differences(x, y)
    q = d.shape[0]
    flat = d.reshape(q, -1)
    observed = flat.mean(0)
    if exact is None:
        exact = q <= 62 and 2**q <= n_resamples
    hits = torch.zeros_like(observed, dtype=torch.int64)
    step = _step(q, flat.shape[1])
    if exact:
        if q > 24:
            raise ValueError(f"exact=True enumerates 2^Q sign patterns; Q={q} is too many, use exact=False")
        total = 2**q
        bits = torch.arange(q, device=d.device)
        for start in range(0, total, step):
            codes = torch.arange(start, min(total, start + step), device=d.device)
            signs = 1.0 - 2.0 * ((codes.unsqueeze(1) >> bits) & 1).to(torch.float64)
            hits += _p_from_null(signs @ flat / q, observed, alternative)
        pvalue = hits.to(torch.float64) / total
    else:
        generator = torch.Generator(device=d.device).manual_seed(seed)
        for start in range(0, n_resamples, step):
            b = min(step, n_resamples - start)
            signs = torch.randint(0, 2, (b, q), generator=generator, device=d.device).to(torch.float64) * 2 - 1
            hits += _p_from_null(signs @ flat / q, observed, alternative)
        pvalue = (hits.to(torch.float64) + 1) / (n_resamples + 1)
    shape = d.shape[1:]
    return TestResult(observed.reshape(shape), pvalue.reshape(shape))


def bootstrap_ci(
    x: Tensor,
    y: Tensor | None = None,
    *,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> tuple[Tensor, Tensor]:
    """Percentile bootstrap confidence interval of ``mean(x - y)`` (or of ``mean(x)``) over queries.

    Each resample draws ``Q`` queries with replacement; the interval is the ``(1 - confidence)/2``
    and ``(1 + confidence)/2`` quantiles (linear interpolation, as :func:`torch.quantile`) of the
    resampled means. Memory does not grow with ``n_resamples``: up to about 16 million resampled
    means (resamples x columns) are kept and their quantiles taken directly; beyond that the
    resamples are streamed in slices and drawn again from the same seed, a few times, to find the
    two order statistics exactly (a histogram narrows each one down to a bracket, then the bracket's
    values are sorted). Both ways give the same numbers.

    Args:
        x: per-query values ``(Q,)`` or ``(Q, ...)``.
        y: the paired system's values, or ``None`` for an interval of ``mean(x)``.
        confidence: the coverage, in ``(0, 1)``.
        n_resamples: bootstrap resamples.
        seed: seed of the ``torch.Generator`` on ``x``'s device.

    Returns:
        ``(low, high)``, each of shape ``x.shape[1:]``, float64. Constant differences give
        ``low == high`` (the constant).

    Example:
        >>> import torch
        >>> x = torch.tensor([0.2, 0.4, 0.6, 0.8, 1.0])
        >>> low, high = bootstrap_ci(x, seed=0)
        >>> round(float(low), 2), round(float(high), 2)
        (0.36, 0.84)
    """
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be a number in (0, 1), e.g. 0.95; got {confidence!r}")
    _check_count(n_resamples, "n_resamples")
    _check_seed(seed)
    d = _differences(x, y)
    q = d.shape[0]
    flat = d.reshape(q, -1)
    alpha = (1 - confidence) / 2
    probs = torch.tensor([alpha, 1 - alpha], dtype=torch.float64, device=d.device)
    bounds = _quantiles(lambda: _bootstrap_means(flat, n_resamples, seed), n_resamples, probs, flat.shape[1])
    shape = d.shape[1:]
    return bounds[0].reshape(shape), bounds[1].reshape(shape)


def _step(q: int, columns: int) -> int:
    """Resamples per slice, so that a slice holds about ``_SLICE`` (resample, query or column) entries."""
    return max(1, _SLICE // max(q, columns))


def _bootstrap_means(flat: Tensor, n_resamples: int, seed: int) -> Iterator[Tensor]:
    """The resampled means ``(b, C)`` of ``flat`` ``(Q, C)``, slice by slice; the same slices for the same seed."""
    q = flat.shape[0]
    generator = torch.Generator(device=flat.device).manual_seed(seed)
    step = _step(q, flat.shape[1])
    for start in range(0, n_resamples, step):
        b = min(step, n_resamples - start)
        idx = torch.randint(0, q, (b, q), generator=generator, device=flat.device)
        counts = torch.zeros(b, q, dtype=flat.dtype, device=flat.device)
        counts.scatter_add_(1, idx, torch.ones((), dtype=flat.dtype, device=flat.device).expand(b, q))
        yield counts @ flat / q  # how often each query is drawn, times its value: the resample's mean


def _quantiles(slices: Callable[[], Iterator[Tensor]], n: int, probs: Tensor, columns: int) -> Tensor:
    """:func:`torch.quantile` (linear) along the ``n`` rows that ``slices()`` yields, ``(K, C)``.

    ``slices`` yields the same rows, slice by slice, at every call. Up to ``_KEEP`` values are
    concatenated and handed to :func:`torch.quantile`; beyond that :func:`_order_statistics` finds
    the two order statistics around each quantile in passes of bounded memory, and they are
    interpolated as :func:`torch.quantile` does (same numbers, bit for bit).
    """
    if n * columns <= _KEEP:
        return torch.quantile(torch.cat(list(slices())), probs, dim=0)
    ranks = probs * (n - 1)
    below, above = ranks.floor().to(torch.int64), ranks.ceil().to(torch.int64)
    needed = torch.unique(torch.cat([below, above]))
    values = _order_statistics(slices, n, needed, columns)  # (R, C)
    low, high = values[torch.searchsorted(needed, below)], values[torch.searchsorted(needed, above)]
    return torch.lerp(low, high, (ranks - below).unsqueeze(1))


def _order_statistics(slices: Callable[[], Iterator[Tensor]], n: int, ranks: Tensor, columns: int) -> Tensor:
    """The ``ranks``-th smallest values (0-based) of each column of the rows ``slices()`` yields, ``(R, C)``.

    Memory is bounded (about ``_SLICE`` temporaries and ``_KEEP / 4`` kept values), whatever the
    number of rows. Each (rank, column) pair, a *track*, keeps a bracket ``[lo, hi)`` known to hold
    its order statistic, with ``below`` values under it and ``count`` inside. A pass over the rows
    sorts the values inside each bracket into ``_BINS`` bins by a monotone function of the value
    (equal widths of the bracket; in the first pass, where every bracket is unbounded, one histogram
    per column over the range of a pilot sample, the values outside it going to the end bins) and
    keeps the bin holding the rank, narrowed to its smallest and largest value; a bracket of one distinct value is done. Once the open brackets hold few
    enough values, a last pass gathers and sorts them. Each pass narrows a bracket about 4000-fold,
    so a few passes suffice.
    """
    device = ranks.device
    n_tracks = ranks.numel() * columns
    col = torch.arange(n_tracks, device=device) % columns
    rank = ranks.repeat_interleave(columns)
    lo = torch.full((n_tracks,), -math.inf, dtype=torch.float64, device=device)
    hi = torch.full_like(lo, math.inf)
    below = torch.zeros(n_tracks, dtype=torch.int64, device=device)
    count = torch.full_like(below, n)
    value = torch.full_like(lo, math.nan)
    done = torch.zeros(n_tracks, dtype=torch.bool, device=device)
    for passes in range(_MAX_PASSES):
        active = (~done).nonzero().squeeze(1)
        if active.numel() == 0:
            return value.reshape(ranks.numel(), columns)
        if int(count[active].sum()) <= _KEEP // 4:
            value[active] = _gather_ranked(slices, col[active], lo[active], hi[active], rank[active] - below[active])
            done[active] = True
            continue
        if passes == 0:  # every bracket is unbounded: one histogram per column serves all its ranks
            columns_seen = torch.arange(columns, device=device)
            counts, mins, maxs = _histogram_pass(slices, columns_seen, lo[:columns], hi[:columns], pilot=True)
            counts, mins, maxs = counts[col], mins[col], maxs[col]
        else:
            counts, mins, maxs = _histogram_pass(slices, col[active], lo[active], hi[active], pilot=False)
        ends = below[active].unsqueeze(1) + counts.cumsum(1)  # values under each bin's upper end
        j = torch.searchsorted(ends, rank[active].unsqueeze(1), right=True)  # the bin holding the rank
        below[active] = (ends.gather(1, j) - counts.gather(1, j)).squeeze(1)
        count[active] = counts.gather(1, j).squeeze(1)
        smallest, largest = mins.gather(1, j).squeeze(1), maxs.gather(1, j).squeeze(1)
        lo[active] = smallest
        hi[active] = torch.nextafter(largest, torch.full_like(largest, math.inf))
        single = smallest == largest
        value[active[single]] = smallest[single]
        done[active[single]] = True
    raise RuntimeError("streamed bootstrap quantiles did not converge; please report this")  # pragma: no cover


def _blocks(slices: Callable[[], Iterator[Tensor]], col: Tensor) -> Iterator[Tensor]:
    """The tracks' values ``(T, b)``, in blocks of about ``_SLICE / 8`` entries."""
    rows = max(1, _SLICE // (8 * col.numel()))
    for chunk in slices():
        for start in range(0, chunk.shape[0], rows):
            yield chunk[start : start + rows, col].T.contiguous()


def _histogram_pass(
    slices: Callable[[], Iterator[Tensor]], col: Tensor, lo: Tensor, hi: Tensor, *, pilot: bool
) -> tuple[Tensor, Tensor, Tensor]:
    """Count, smallest and largest value of each bin ``(T, _BINS)`` of the values in each track's ``[lo, hi)``.

    A value's bin is ``floor((v - a) / (b - a) * _BINS)``, clamped to the bins: monotone in ``v``,
    so a bin's values are exactly those between its smallest and its largest. ``[a, b)`` is the
    bracket, or with ``pilot`` (unbounded brackets) the range of the first rows.
    """
    n_tracks, device = col.numel(), col.device
    size = n_tracks * _BINS  # flat slots, one more for the values outside their bracket
    counts = torch.zeros(size + 1, dtype=torch.int64, device=device)
    mins = torch.full((size + 1,), math.inf, dtype=torch.float64, device=device)
    maxs = torch.full_like(mins, -math.inf)
    offsets = torch.arange(0, size, _BINS, device=device).unsqueeze(1)
    lo, hi = lo.unsqueeze(1), hi.unsqueeze(1)
    start, width = (None, None) if pilot else (lo, hi - lo)
    for values in _blocks(slices, col):
        if start is None:  # the pilot: the first block's range (values beyond it go to the end bins)
            start = values.min(1, keepdim=True).values
            end = values.max(1, keepdim=True).values
            width = torch.where(end > start, end - start, torch.ones_like(end))
        slot = ((values - start) / width * _BINS).floor_().clamp_(0, _BINS - 1).to(torch.int64) + offsets
        slot = torch.where((values >= lo) & (values < hi), slot, size).view(-1)
        values = values.view(-1)
        counts.scatter_add_(0, slot, torch.ones_like(slot))
        mins.scatter_reduce_(0, slot, values, "amin")
        maxs.scatter_reduce_(0, slot, values, "amax")
    shape = (n_tracks, _BINS)
    return counts[:size].view(shape), mins[:size].view(shape), maxs[:size].view(shape)


def _gather_ranked(
    slices: Callable[[], Iterator[Tensor]], col: Tensor, lo: Tensor, hi: Tensor, within: Tensor
) -> Tensor:
    """The ``within``-th smallest value in ``[lo, hi)`` of each track (one pass, then one sort)."""
    tracks, kept = [], []
    for values in _blocks(slices, col):
        inside = ((values >= lo.unsqueeze(1)) & (values < hi.unsqueeze(1))).nonzero()
        tracks.append(inside[:, 0])
        kept.append(values[inside[:, 0], inside[:, 1]])
    track, vals = torch.cat(tracks), torch.cat(kept)
    order = vals.argsort(stable=True)
    order = order[track[order].argsort(stable=True)]  # by track, then by value
    sizes = torch.bincount(track, minlength=col.numel())
    return vals[order][sizes.cumsum(0) - sizes + within]


def _check_pvalues(p: Tensor) -> Tensor:
    if not isinstance(p, Tensor):
        raise TypeError(f"pvalues must be a tensor, got {type(p).__name__}")
    if p.ndim == 0:
        raise ValueError("pvalues must hold one p-value per comparison along the last dimension")
    p = p.to(torch.float64)
    if torch.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("pvalues must lie in [0, 1]")
    return p


def bonferroni(pvalues: Tensor) -> Tensor:
    """Bonferroni-adjusted p-values ``min(1, m * p)`` over the last dimension (``m`` comparisons).

    Example:
        >>> import torch
        >>> bonferroni(torch.tensor([0.01, 0.04, 0.3]))
        tensor([0.0300, 0.1200, 0.9000], dtype=torch.float64)
    """
    p = _check_pvalues(pvalues)
    return (p * p.shape[-1]).clamp(max=1.0)


def holm(pvalues: Tensor) -> Tensor:
    """Holm's step-down adjusted p-values over the last dimension.

    With the p-values sorted increasingly, ``p_(1) <= ... <= p_(m)``, the adjusted value of the
    ``i``-th is ``max_{j <= i} min(1, (m - j + 1) p_(j))``; rejecting where it is below ``alpha``
    controls the family-wise error rate at ``alpha`` and is never less powerful than Bonferroni.

    Example:
        >>> import torch
        >>> holm(torch.tensor([0.01, 0.04, 0.03, 0.005]))
        tensor([0.0300, 0.0600, 0.0600, 0.0200], dtype=torch.float64)
    """
    p = _check_pvalues(pvalues)
    m = p.shape[-1]
    sorted_p, order = p.sort(-1)
    factors = torch.arange(m, 0, -1, dtype=torch.float64, device=p.device)
    adjusted = (sorted_p * factors).cummax(-1).values.clamp(max=1.0)
    return torch.empty_like(adjusted).scatter_(-1, order, adjusted)


def adjust_pvalues(pvalues: Tensor, method: str = "holm") -> Tensor:
    """Adjusted p-values by ``method``: ``"holm"``, ``"bonferroni"`` or ``"none"``.

    Example:
        >>> import torch
        >>> adjust_pvalues(torch.tensor([0.02, 0.5]), "none")
        tensor([0.0200, 0.5000], dtype=torch.float64)
    """
    adjust = {"holm": holm, "bonferroni": bonferroni, "none": _check_pvalues}.get(method)
    if adjust is not None:
        return adjust(pvalues)
    raise ValueError(f"correction={method!r} is not valid: use one of {', '.join(map(repr, CORRECTIONS))}")


# ----------------------------------------------------------------------------- comparing runs
TESTS = ("randomization", "t")


@dataclass(frozen=True)
class RunComparison:
    """Every number of a comparison of runs (see :func:`compare_runs`).

    Pairs are ``(i, j)`` with ``i < j`` in the order of ``runs``; a pair's difference is
    ``mean(run j) - mean(run i)``. Tensors indexed ``[m, p]`` are per measure ``m`` and pair ``p``.

    Attributes:
        runs, measures: the names, in the order given.
        n_queries: the number of queries (the first dimension of the scores).
        test, correction, alpha, confidence, n_resamples, seed: the settings.
        means: ``(R, M)`` each run's mean per measure.
        pairs: the ``(i, j)`` pairs, ``i < j``.
        difference: ``(M, P)`` the mean differences ``mean_j - mean_i``.
        ci_low, ci_high: ``(M, P)`` the bootstrap confidence interval of each difference.
        t_statistic, t_pvalue: ``(M, P)`` the paired t-test (NaN where scipy is missing).
        randomization_pvalue: ``(M, P)`` the paired randomization test.
        pvalue_adjusted: ``(M, P)`` the deciding test's p-value (``test``), adjusted over the pairs
            of each measure (``correction``).
        significant: ``(M, P)`` bool: ``pvalue_adjusted < alpha`` and a non-zero difference.
        winner: ``(M, P)`` int64: the index of the better run of a significant pair, else -1.
        t_test_skipped: True when scipy is not installed (the t-test columns are NaN).
    """

    runs: tuple[str, ...]
    measures: tuple[str, ...]
    n_queries: int
    test: str
    correction: str
    alpha: float
    confidence: float
    n_resamples: int
    seed: int
    means: Tensor
    pairs: tuple[tuple[int, int], ...]
    difference: Tensor
    ci_low: Tensor
    ci_high: Tensor
    t_statistic: Tensor
    t_pvalue: Tensor
    randomization_pvalue: Tensor
    pvalue_adjusted: Tensor
    significant: Tensor
    winner: Tensor
    t_test_skipped: bool

    def beats(self, run: int, measure: int) -> list[int]:
        """The runs that ``run`` beats significantly on ``measure`` (indices, increasing).

        Example:
            >>> import torch
            >>> bm25 = torch.tensor([0.31, 0.42, 0.25, 0.50, 0.38, 0.29, 0.44, 0.35])
            >>> scores = torch.stack([bm25, bm25 + 0.05])  # (runs, queries): dense is better on every query
            >>> c = compare_runs(scores, runs=["bm25", "dense"])
            >>> c.beats(1, 0), c.beats(0, 0)
            ([0], [])
        """
        return sorted(
            j if run == i else i for p, (i, j) in enumerate(self.pairs) if int(self.winner[measure, p]) == run
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain Python: the settings, ``means`` (``{run: {measure: mean}}``) and ``comparisons``
        (:meth:`records`). Valid JSON.

        Example:
            >>> import torch
            >>> bm25 = torch.tensor([0.31, 0.42, 0.25, 0.50, 0.38, 0.29, 0.44, 0.35])
            >>> d = compare_runs(torch.stack([bm25, bm25 + 0.05]), runs=["bm25", "dense"], measures=["ndcg@10"]).to_dict()
            >>> d["test"], d["correction"], round(d["means"]["dense"]["ndcg@10"], 4), d["comparisons"][0]["winner"]
            ('randomization', 'holm', 0.4175, 'dense')
        """
        settings = ("n_queries", "test", "correction", "alpha", "confidence", "n_resamples", "seed", "t_test_skipped")
        return {
            "runs": list(self.runs),
            "measures": list(self.measures),
            **{name: getattr(self, name) for name in settings},
            "means": {
                run: {m: float(self.means[i, k]) for k, m in enumerate(self.measures)}
                for i, run in enumerate(self.runs)
            },
            "comparisons": self.records(),
        }

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str:
        """:meth:`records` as CSV text (a row per measure and pair; floats as ``repr``, a skipped
        t-test empty), written to ``path`` too when given.

        Example:
            >>> import torch
            >>> bm25 = torch.tensor([0.31, 0.42, 0.25, 0.50, 0.38, 0.29, 0.44, 0.35])
            >>> text = compare_runs(torch.stack([bm25, bm25 + 0.05]), runs=["bm25", "dense"]).to_csv()
            >>> text.splitlines()[0].split(",")[:4]
            ['measure', 'run_a', 'run_b', 'mean_a']
        """
        from torch_rankeval.trec._tables import csv_text

        records = self.records()  # every record has the same keys, in the same order
        return csv_text(list(records[0]), [list(r.values()) for r in records], path)

    def to_pandas(self, what: str = "pairs") -> Any:
        """A pandas DataFrame: :meth:`records` (``what="pairs"``, a row per measure and pair) or the
        means (``what="means"``: a row per run, a column per measure).

        Raises:
            ImportError: pandas is not installed (``pip install torch-rankeval[pandas]``).

        Example:
            >>> import torch
            >>> bm25 = torch.tensor([0.31, 0.42, 0.25, 0.50, 0.38, 0.29, 0.44, 0.35])
            >>> c = compare_runs(torch.stack([bm25, bm25 + 0.05]), runs=["bm25", "dense"])
            >>> c.to_pandas("means").index.tolist()  # doctest: +SKIP
            ['bm25', 'dense']
        """
        from torch_rankeval.trec._tables import require_pandas

        if what not in ("pairs", "means"):
            raise ValueError(f"what must be 'pairs' or 'means', got {what!r}")
        pd = require_pandas()
        if what == "pairs":
            return pd.DataFrame(self.records())
        means = self.to_dict()["means"]
        return pd.DataFrame([means[r] for r in self.runs], index=pd.Index(list(self.runs), name="run"))

    def to_latex(self, *, decimals: int = 4, caption: str | None = None, label: str | None = None) -> str:
        r"""A paper table: a row per run, a column per measure, each run's mean; the best mean of
        each column in bold (every run that reaches it); a superscript letter for each run that a
        run beats significantly on that measure (the runs are lettered a, b, c... in the first
        column), and a footnote naming the test, the resamples, the correction and alpha.

        Example:
            >>> import torch
            >>> bm25 = torch.tensor([0.31, 0.42, 0.25, 0.50, 0.38, 0.29, 0.44, 0.35])
            >>> c = compare_runs(torch.stack([bm25, bm25 + 0.05]), runs=["bm25", "dense"], measures=["ndcg@10"])
            >>> print(c.to_latex(decimals=3))
            \begin{table}
            \centering
            \begin{tabular}{lr}
            \toprule
            Run & ndcg@10 \\
            \midrule
            (a) bm25 & 0.367 \\
            (b) dense & \textbf{0.418}$^{a}$ \\
            \bottomrule
            \end{tabular}
            \par\smallskip\footnotesize Superscripts mark a significant improvement over the run of that letter: paired randomization test (10000 resamples), Holm correction over the 1 pair of runs of each measure, $\alpha = 0.05$; best of each column in bold.
            \end{table}
        """
        from torch_rankeval.trec._tables import latex_escape, latex_number, latex_table

        letters = [_letter(i) for i in range(len(self.runs))]
        means = self.means.tolist()
        rows = []
        best = [max(row[m] for row in means) for m in range(len(self.measures))]
        for i, run in enumerate(self.runs):
            cells = [f"({letters[i]}) {latex_escape(run)}"]
            for m in range(len(self.measures)):
                cell = latex_number(means[i][m], decimals)
                if means[i][m] == best[m]:
                    cell = rf"\textbf{{{cell}}}"
                beaten = self.beats(i, m)
                if beaten:
                    cell += "$^{" + "".join(letters[j] for j in beaten) + "}$"
                cells.append(cell)
            rows.append(cells)
        test = "paired t-test"
        if self.test == "randomization":
            test = f"paired randomization test ({self.n_resamples} resamples)"
        pairs = f"{len(self.pairs)} pair{'s' if len(self.pairs) != 1 else ''} of runs"
        correction = f"{self.correction.capitalize()} correction over the {pairs} of each measure"
        if self.correction == "none":
            correction = "no correction for multiple comparisons"
        note = (
            r"\par\smallskip\footnotesize Superscripts mark a significant improvement over the run of that letter: "
            + f"{test}, {correction}, $\\alpha = {self.alpha:g}$; best of each column in bold."
        )
        return latex_table(self.measures, rows, caption, label, note)

    def records(self) -> list[dict[str, Any]]:
        """One dict per measure and pair: names, means, difference, interval, p-values, significance, winner.

        NaN (a skipped t-test) becomes None, so the records are valid JSON.

        Example:
            >>> import torch
            >>> bm25 = torch.tensor([0.31, 0.42, 0.25, 0.50, 0.38, 0.29, 0.44, 0.35])
            >>> scores = torch.stack([bm25, bm25 + 0.05])
            >>> r = compare_runs(scores, runs=["bm25", "dense"], measures=["ndcg@10"]).records()[0]
            >>> r["measure"], r["run_a"], r["run_b"], round(r["difference"], 4), r["winner"], r["t_pvalue"]
            ('ndcg@10', 'bm25', 'dense', 0.05, 'dense', 0.0)
        """
        out = []
        for m, name in enumerate(self.measures):
            for p, (i, j) in enumerate(self.pairs):
                winner = int(self.winner[m, p])
                out.append(
                    {
                        "measure": name,
                        "run_a": self.runs[i],
                        "run_b": self.runs[j],
                        "mean_a": float(self.means[i, m]),
                        "mean_b": float(self.means[j, m]),
                        "difference": float(self.difference[m, p]),
                        "ci_low": float(self.ci_low[m, p]),
                        "ci_high": float(self.ci_high[m, p]),
                        "t_statistic": _number(self.t_statistic[m, p]),
                        "t_pvalue": _number(self.t_pvalue[m, p]),
                        "randomization_pvalue": float(self.randomization_pvalue[m, p]),
                        "pvalue_adjusted": float(self.pvalue_adjusted[m, p]),
                        "significant": bool(self.significant[m, p]),
                        "winner": None if winner < 0 else self.runs[winner],
                    }
                )
        return out


def _letter(i: int) -> str:
    """a, b, ..., z, aa, ab, ...: the label of the ``i``-th run in :meth:`RunComparison.to_latex`."""
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out = chr(ord("a") + r) + out
    return out


def _number(value: Tensor) -> float | None:
    v = float(value)
    return None if math.isnan(v) else v


def _per_query(value: Any) -> Any:
    """An :class:`~torch_rankeval.trec.Evaluation`'s per-query values; anything else as it is."""
    per_query = getattr(value, "per_query", None)
    return per_query if isinstance(per_query, Mapping) and hasattr(value, "qids") else value


def _evaluated(
    runs_in: Any, qrels: object, names: Sequence[str] | None, measures: Sequence[Any] | None
) -> tuple[Tensor, list[str], list[str]]:
    """``(R, Q, M)`` per-query values of runs evaluated against ``qrels`` (``compare_runs(qrels=...)``)."""
    from torch_rankeval.trec import evaluate
    from torch_rankeval.trec.convert import as_qrels, as_run

    if isinstance(runs_in, Tensor) or isinstance(runs_in, (str, bytes)):
        raise TypeError("with qrels=, scores must be the runs: {name: run} or a sequence of runs")
    if isinstance(runs_in, Mapping):
        if names is not None:
            raise ValueError("runs= names a sequence's runs; a mapping's keys are already the run names")
        items = [(str(k), v) for k, v in runs_in.items()]
    elif isinstance(runs_in, Sequence):
        items = [(None, v) for v in runs_in]
    else:
        raise TypeError(
            f"with qrels=, scores must be {{name: run}} or a sequence of runs, got {type(runs_in).__name__}"
        )
    judged = as_qrels(qrels, argument="qrels")
    chosen = ["ndcg_cut.10", "map"] if measures is None else list(measures)
    results, labels = [], []
    for i, (name, value) in enumerate(items):
        run = as_run(value, argument=f"scores[{name!r}]" if name is not None else f"scores[{i}]")
        results.append(evaluate(judged, run, chosen, complete=True))
        labels.append(name if name is not None else run.path or run.tag)  # a run's name: its file, else its tag
    if names is not None:
        labels = list(names)
    elif len(set(labels)) < len(labels):  # tags alike ("run" for dicts): letters, as for a tensor
        labels = [_letter(i) for i in range(len(labels))]
    columns = [o.name for o in results[0].outputs if o.name in results[0].per_query]
    if not columns:
        raise ValueError("no measure with per-query values to compare (runid, num_q and gm_map have none)")
    answered = torch.stack([r.retrieved for r in results]).any(0)
    table = torch.stack([torch.stack([r.per_query[n][answered] for n in columns], -1) for r in results])
    return table, labels, columns


def _score_table(
    scores: Tensor | Mapping[str, Tensor | Mapping[str, Tensor]],
    runs: Sequence[str] | None,
    measures: Sequence[str] | None,
) -> tuple[Tensor, list[str], list[str]]:
    """``(R, Q, M)`` float64 scores and the run and measure names from :func:`compare_runs`' inputs."""
    if isinstance(scores, Mapping):
        if runs is not None:
            raise ValueError("runs= names the rows of a scores tensor; a mapping's keys are already the run names")
        runs = [str(k) for k in scores]
        columns = []
        for run, value in scores.items():
            if isinstance(value, Mapping):
                names = list(value) if measures is None else list(measures)
                missing = [n for n in names if n not in value]
                if missing:
                    raise ValueError(f"run {run!r} has no per-query values for {missing}; it has {sorted(value)}")
                parts = [value[n] for n in names]
                if not all(isinstance(t, Tensor) and t.ndim == 1 for t in parts):
                    raise ValueError(f"run {run!r}: each measure's per-query values must be a 1-D tensor (Q,)")
                if len({t.shape[0] for t in parts}) > 1:
                    raise ValueError(f"run {run!r}: the measures have different numbers of queries")
                columns.append(torch.stack(parts, -1) if parts else None)
                measures = names
            elif isinstance(value, Tensor):
                columns.append(value.unsqueeze(-1) if value.ndim == 1 else value)
            else:
                raise TypeError(f"scores[{run!r}] must be a tensor (Q,) / (Q, M) or a mapping measure -> (Q,) tensor")
        if not columns or any(c is None for c in columns):
            raise ValueError("compare_runs needs at least one measure and two runs")
        shapes = {tuple(c.shape) for c in columns}
        if len(shapes) > 1:
            raise ValueError(f"every run must have the same queries and measures, got shapes {sorted(shapes)}")
        if len({c.device for c in columns}) > 1:
            raise ValueError("the runs' scores are on different devices: move them to one device")
        table = torch.stack(columns)
    elif isinstance(scores, Tensor):
        if scores.ndim not in (2, 3):
            raise ValueError(
                f"scores must be (runs, queries) or (runs, queries, measures), got shape {tuple(scores.shape)}"
            )
        table = scores if scores.ndim == 3 else scores.unsqueeze(-1)
    else:
        raise TypeError(f"scores must be a tensor or a mapping run -> per-query values, got {type(scores).__name__}")
    if table.ndim != 3:
        raise ValueError("each run's scores must be (queries,) or (queries, measures)")
    n_runs, _, n_measures = table.shape
    runs = [chr(ord("a") + i) if n_runs <= 26 else f"r{i + 1}" for i in range(n_runs)] if runs is None else list(runs)
    measures = [f"m{k + 1}" for k in range(n_measures)] if measures is None else list(measures)
    if len(runs) != n_runs:
        raise ValueError(f"runs= has {len(runs)} names for {n_runs} runs")
    if len(measures) != n_measures:
        raise ValueError(f"measures= has {len(measures)} names for {n_measures} measures")
    if n_runs < 2:
        raise ValueError(f"compare_runs needs at least two runs, got {n_runs}")
    if n_measures < 1:
        raise ValueError("compare_runs needs at least one measure")
    if table.is_complex() or table.dtype == torch.bool:
        raise TypeError(f"scores must be real numbers, got {table.dtype}")
    return table.to(torch.float64), runs, measures


def compare_runs(
    scores: Tensor | Mapping[str, Any] | Sequence[Any],
    *,
    qrels: object = None,
    runs: Sequence[str] | None = None,
    measures: Sequence[Any] | str | None = None,
    test: str = "randomization",
    correction: str = "holm",
    alpha: float = 0.05,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> RunComparison:
    """Compare several runs on the same queries: means, paired differences, intervals, tests, winners.

    For every measure and every pair of runs ``(i, j)``, ``i < j``: the mean difference
    ``mean_j - mean_i``, its percentile bootstrap interval (:func:`bootstrap_ci`), the paired
    t-test (:func:`paired_t_test`; skipped, NaN, when scipy is not installed) and the paired
    randomization test (:func:`randomization_test`). The deciding ``test``'s p-values are adjusted
    over the pairs of each measure (``correction``: Holm, Bonferroni or none); a pair is
    significant when the adjusted p-value is below ``alpha`` and the difference is not 0, and its
    winner is the run with the higher mean. Every pair and measure share one set of resamples
    (the same seed), in one vectorised call per statistic. This is what ``torch-rankeval compare``
    prints.

    Args:
        scores: per-query values of every run on the same queries: a tensor ``(R, Q)`` or
            ``(R, Q, M)``, or a mapping ``{run: (Q,) or (Q, M) tensor}``, or
            ``{run: {measure: (Q,) tensor}}`` (e.g. ``{e.run: e.per_query for e in evaluations}``).
            With ``qrels``: the runs themselves, ``{name: run}`` or a sequence of runs, each a
            :class:`~torch_rankeval.trec.Run`, a path or a peer's object (a pandas DataFrame, a dict
            of dicts, a ranx ``Run``, ir_measures' ``ScoredDoc`` rows:
            :func:`~torch_rankeval.trec.convert.as_run`); a mapping's values may also be
            :class:`~torch_rankeval.trec.Evaluation` results (their ``per_query``).
        qrels: the judgments (any form :func:`~torch_rankeval.trec.convert.as_qrels` takes): the
            runs are evaluated with :func:`~torch_rankeval.trec.evaluate` (``complete=True``) and
            compared on the queries that at least one run answers (missing ones score 0), as
            ``torch-rankeval compare`` does; measures default to ``ndcg_cut.10`` and ``map``.
        runs: names of the tensor's runs (default ``"a"``, ``"b"``, ...); a mapping's keys are its
            names; for a sequence of runs with ``qrels``, default: the run's file, else ranx's ``name`` or the run tag.
        measures: names of the ``M`` measures (default ``"m1"``, ...), or the measures to take
            from the per-run mappings (default: all, in the first run's order); ir_measures'
            measure objects (``ir_measures.nDCG@10``) stand for their names.
        test: ``"randomization"`` (default) or ``"t"``: the test that decides significance.
        correction: ``"holm"`` (default), ``"bonferroni"`` or ``"none"``.
        alpha: the significance level, in ``(0, 1)``.
        confidence: the bootstrap interval's coverage, in ``(0, 1)``.
        n_resamples: bootstrap and randomization resamples (memory does not grow with it).
        seed: the random seed.

    Returns:
        A :class:`RunComparison`.

    Raises:
        ValueError: fewer than two runs or queries, shapes that differ between runs, NaN or
            infinite scores, a bad setting.
        ImportError: ``test="t"`` without scipy.

    Example:
        >>> import torch
        >>> from torch_rankeval.stats import compare_runs
        >>> bm25 = torch.tensor([0.31, 0.42, 0.25, 0.50, 0.38, 0.29, 0.44, 0.35])
        >>> dense = bm25 + torch.tensor([0.08, 0.05, 0.11, 0.02, 0.07, 0.09, 0.04, 0.06])
        >>> c = compare_runs({"bm25": bm25, "dense": dense}, measures=["ndcg@10"])
        >>> round(float(c.difference[0, 0]), 4), float(c.randomization_pvalue[0, 0])  # exact: 2 of 2^8 patterns
        (0.065, 0.0078125)
        >>> bool(c.significant[0, 0]), c.runs[int(c.winner[0, 0])], c.beats(1, 0)
        (True, 'dense', [0])

    Runs and qrels in any form :mod:`torch_rankeval.trec.convert` reads (here dicts of dicts):

        >>> qrels = {f"q{i}": {"d1": 1, "d2": 0} for i in range(8)}
        >>> good, bad = ({q: {"d1": 2.0, "d2": 1.0} for q in qrels}, {q: {"d1": 1.0, "d2": 2.0} for q in qrels})
        >>> c = compare_runs({"good": good, "bad": bad}, qrels=qrels, measures=["P.1"])
        >>> c.means.tolist(), c.n_queries, c.runs[int(c.winner[0, 0])]
        ([[1.0], [0.0]], 8, 'good')
    """
    if test not in TESTS:
        raise ValueError(f"test={test!r} is not valid: use one of {', '.join(map(repr, TESTS))}")
    if correction not in CORRECTIONS:
        raise ValueError(f"correction={correction!r} is not valid: use one of {', '.join(map(repr, CORRECTIONS))}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a number in (0, 1), e.g. 0.05; got {alpha!r}")
    from torch_rankeval.trec.convert import as_measures

    if measures is not None:
        measures = as_measures(measures, argument="measures")
        measures = [measures] if isinstance(measures, str) else measures
    if qrels is not None:
        scores, runs, measures = _evaluated(scores, qrels, runs, measures)
    elif isinstance(scores, Mapping):
        scores = {k: _per_query(v) for k, v in scores.items()}
    if measures is not None:
        measures = [m if isinstance(m, str) else m.label for m in measures]
    table, run_names, measure_names = _score_table(scores, runs, measures)
    n_runs, n_queries, _ = table.shape
    if n_queries < 2:
        raise ValueError(f"comparing runs needs at least 2 queries, got {n_queries}")
    pairs = tuple((i, j) for i in range(n_runs) for j in range(i + 1, n_runs))
    first = torch.tensor([i for i, _ in pairs], device=table.device)
    second = torch.tensor([j for _, j in pairs], device=table.device)
    x = table[second].permute(1, 2, 0)  # (Q, M, P): the second run of each pair
    y = table[first].permute(1, 2, 0)
    low, high = bootstrap_ci(x, y, confidence=confidence, n_resamples=n_resamples, seed=seed)
    randomized = randomization_test(x, y, n_resamples=n_resamples, seed=seed)
    try:
        t = paired_t_test(x, y)
        t_statistic, t_pvalue, skipped = t.statistic, t.pvalue, False
    except ImportError:
        if test == "t":
            raise
        t_statistic = t_pvalue = torch.full_like(randomized.pvalue, math.nan)
        skipped = True
    deciding = t_pvalue if test == "t" else randomized.pvalue
    adjusted = adjust_pvalues(deciding, correction)
    means = table.mean(1)  # (R, M)
    difference = means[second].T - means[first].T  # (M, P)
    significant = (adjusted < alpha) & (difference != 0)
    winner = torch.where(significant, torch.where(difference > 0, second, first), -1)
    return RunComparison(
        runs=tuple(run_names),
        measures=tuple(measure_names),
        n_queries=n_queries,
        test=test,
        correction=correction,
        alpha=float(alpha),
        confidence=float(confidence),
        n_resamples=n_resamples,
        seed=seed,
        means=means,
        pairs=pairs,
        difference=difference,
        ci_low=low,
        ci_high=high,
        t_statistic=t_statistic,
        t_pvalue=t_pvalue,
        randomization_pvalue=randomized.pvalue,
        pvalue_adjusted=adjusted,
        significant=significant,
        winner=winner,
        t_test_skipped=skipped,
    )
