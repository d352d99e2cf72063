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
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "TestResult",
    "paired_t_test",
    "randomization_test",
    "bootstrap_ci",
    "holm",
    "bonferroni",
    "adjust_pvalues",
    "ALTERNATIVES",
]

ALTERNATIVES = ("two-sided", "greater", "less")
CORRECTIONS = ("holm", "bonferroni", "none")
# Relative tolerance when comparing resampled statistics with the observed one (as scipy does), so
# that rounding noise does not decide whether an equally extreme resample counts.
_REL_TOL = 1e-14
# Resampling works in slices of about this many (resample, query) entries.
_SLICE = 1 << 22


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


def _differences(x: Tensor, y: Tensor | None, name: str = "x") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a tensor of per-query values, got {type(x).__name__}")
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
    statistic = torch.as_tensor(result.statistic, dtype=torch.float64)
    pvalue = torch.as_tensor(result.pvalue, dtype=torch.float64)
    signed = torch.sign(mean) * math.inf
    const_p = {
        "two-sided": torch.where(mean == 0, 1.0, 0.0),
        "greater": torch.where(mean > 0, 0.0, 1.0),
        "less": torch.where(mean < 0, 0.0, 1.0),
    }[alternative].to(torch.float64)
    statistic = torch.where(constant, torch.where(mean == 0, torch.zeros_like(mean), signed), statistic)
    pvalue = torch.where(constant, const_p, pvalue)
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
    d = _differences(x, y)
    q = d.shape[0]
    flat = d.reshape(q, -1)
    observed = flat.mean(0)
    if exact is None:
        exact = q <= 62 and 2**q <= n_resamples
    if exact:
        if q > 24:
            raise ValueError(f"exact=True enumerates 2^Q sign patterns; Q={q} is too many, use exact=False")
        hits = torch.zeros_like(observed, dtype=torch.int64)
        total = 2**q
        bits = torch.arange(q, device=d.device)
        step = max(1, _SLICE // q)
        for start in range(0, total, step):
            codes = torch.arange(start, min(total, start + step), device=d.device)
            signs = 1.0 - 2.0 * ((codes.unsqueeze(1) >> bits) & 1).to(torch.float64)
            hits += _p_from_null(signs @ flat / q, observed, alternative)
        pvalue = hits.to(torch.float64) / total
    else:
        generator = torch.Generator(device=d.device).manual_seed(seed)
        hits = torch.zeros_like(observed, dtype=torch.int64)
        step = max(1, _SLICE // q)
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
    and ``(1 + confidence)/2`` quantiles (linear interpolation) of the resampled means.

    Args:
        x: per-query values ``(Q,)`` or ``(Q, ...)``.
        y: the paired system's values, or ``None`` for an interval of ``mean(x)``.
        confidence: the coverage, in ``(0, 1)``.
        n_resamples: bootstrap resamples.
        seed: seed of the ``torch.Generator`` on ``x``'s device.

    Returns:
        ``(low, high)``, each of shape ``x.shape[1:]``, float64.

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
    d = _differences(x, y)
    q = d.shape[0]
    flat = d.reshape(q, -1)
    generator = torch.Generator(device=d.device).manual_seed(seed)
    means = []
    step = max(1, _SLICE // q)
    for start in range(0, n_resamples, step):
        b = min(step, n_resamples - start)
        idx = torch.randint(0, q, (b, q), generator=generator, device=d.device)
        means.append(flat[idx].mean(1))
    dist = torch.cat(means)
    alpha = (1 - confidence) / 2
    bounds = torch.quantile(dist, torch.tensor([alpha, 1 - alpha], dtype=torch.float64, device=d.device), dim=0)
    shape = d.shape[1:]
    return bounds[0].reshape(shape), bounds[1].reshape(shape)


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
    if method == "holm":
        return holm(pvalues)
    if method == "bonferroni":
        return bonferroni(pvalues)
    if method == "none":
        return _check_pvalues(pvalues)
    raise ValueError(f"correction={method!r} is not valid: use one of {', '.join(map(repr, CORRECTIONS))}")
