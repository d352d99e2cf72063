"""Significance tests against scipy.stats and exhaustive enumeration; corrections against their
definitions and a hand-computed example."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from torch_rankeval import stats

scipy_stats = pytest.importorskip("scipy.stats")


def _pair(seed: int, q: int, m: int | None = None, shift: float = 0.03):
    g = torch.Generator().manual_seed(seed)
    shape = (q,) if m is None else (q, m)
    x = torch.rand(shape, generator=g, dtype=torch.float64)
    y = (x - shift + 0.1 * torch.randn(shape, generator=g, dtype=torch.float64)).clamp(0, 1)
    return x, y


# ----------------------------------------------------------------------------- t-test
@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_t_test_matches_scipy_column_by_column(alternative):
    x, y = _pair(0, 30, 4)
    ours = stats.paired_t_test(x, y, alternative=alternative)
    for j in range(4):
        ref = scipy_stats.ttest_rel(x[:, j].numpy(), y[:, j].numpy(), alternative=alternative)
        assert ours.statistic[j].item() == pytest.approx(ref.statistic, rel=1e-12)
        assert ours.pvalue[j].item() == pytest.approx(ref.pvalue, rel=1e-10)


def test_t_test_on_constant_differences():
    """scipy returns NaN for zero variance; identical systems get p = 1, a constant gain p = 0."""
    x = torch.tensor([0.25, 0.5, 0.75])
    same = stats.paired_t_test(x, x)
    assert same.statistic.item() == 0 and same.pvalue.item() == 1
    up = stats.paired_t_test(x + 0.125, x)  # exactly representable: every difference is 0.125
    assert up.statistic.item() == float("inf") and up.pvalue.item() == 0
    assert stats.paired_t_test(x + 0.125, x, alternative="less").pvalue.item() == 1


# ----------------------------------------------------------------------------- randomization
def _brute_force_p(d: np.ndarray, alternative: str) -> float:
    obs = d.mean()
    hits = 0
    for signs in itertools.product((1.0, -1.0), repeat=len(d)):
        v = (np.array(signs) * d).mean()
        if alternative == "two-sided":
            hits += abs(v) >= abs(obs) - 1e-12
        elif alternative == "greater":
            hits += v >= obs - 1e-12
        else:
            hits += v <= obs + 1e-12
    return hits / 2 ** len(d)


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_randomization_equals_enumeration(seed, alternative):
    x, y = _pair(seed, 9)
    x[3] = y[3]  # a zero difference, and ties among |d|
    ours = stats.randomization_test(x, y, alternative=alternative)
    assert ours.pvalue.item() == pytest.approx(_brute_force_p((x - y).numpy(), alternative), abs=1e-15)
    ref = scipy_stats.permutation_test(
        (x.numpy(), y.numpy()),
        lambda a, b: np.mean(a - b),
        permutation_type="samples",
        n_resamples=np.inf,
        alternative=alternative,
    )
    assert ours.pvalue.item() == pytest.approx(ref.pvalue, abs=1e-12)
    assert ours.statistic.item() == pytest.approx((x - y).mean().item())


def test_monte_carlo_randomization_converges_to_exact_and_is_seeded():
    x, y = _pair(3, 14, shift=0.04)
    exact = stats.randomization_test(x, y, exact=True).pvalue.item()
    sampled = stats.randomization_test(x, y, exact=False, n_resamples=40_000, seed=5).pvalue.item()
    assert abs(sampled - exact) < 4 * np.sqrt(exact * (1 - exact) / 40_000) + 1e-4
    again = stats.randomization_test(x, y, exact=False, n_resamples=40_000, seed=5).pvalue.item()
    assert again == sampled
    assert stats.randomization_test(x, y, exact=False, n_resamples=40_000, seed=6).pvalue.item() != sampled
    # never 0, even when nothing is as extreme
    big = torch.full((40,), 0.5)
    assert stats.randomization_test(big + 0.1, big, exact=False, n_resamples=99).pvalue.item() == pytest.approx(1 / 100)


def test_vectorised_columns_equal_single_calls():
    x, y = _pair(4, 25, 3)
    together = stats.randomization_test(x, y, n_resamples=500, seed=1)
    for j in range(3):
        alone = stats.randomization_test(x[:, j], y[:, j], n_resamples=500, seed=1)
        assert alone.pvalue.item() == together.pvalue[j].item()
    low, high = stats.bootstrap_ci(x, y, n_resamples=500, seed=2)
    for j in range(3):
        lo, hi = stats.bootstrap_ci(x[:, j], y[:, j], n_resamples=500, seed=2)
        assert (lo.item(), hi.item()) == (low[j].item(), high[j].item())


# ----------------------------------------------------------------------------- bootstrap
def test_bootstrap_interval_agrees_with_scipy():
    x, y = _pair(5, 60)
    low, high = stats.bootstrap_ci(x, y, n_resamples=20_000, seed=0)
    d = (x - y).numpy()
    ref = scipy_stats.bootstrap(
        (d,), np.mean, n_resamples=20_000, method="percentile", random_state=0
    ).confidence_interval
    spread = d.std(ddof=1) / np.sqrt(len(d))
    assert low.item() == pytest.approx(ref.low, abs=0.05 * spread)
    assert high.item() == pytest.approx(ref.high, abs=0.05 * spread)
    assert low < d.mean() < high


def test_bootstrap_edge_cases():
    constant = torch.full((10,), 0.25, dtype=torch.float64)
    low, high = stats.bootstrap_ci(constant, n_resamples=100)
    assert low.item() == high.item() == 0.25
    x, y = _pair(6, 40)
    narrow = stats.bootstrap_ci(x, y, confidence=0.5, seed=1)
    wide = stats.bootstrap_ci(x, y, confidence=0.99, seed=1)
    assert wide[0] < narrow[0] < narrow[1] < wide[1]


# ----------------------------------------------------------------------------- corrections
def _holm_reference(p: list[float]) -> list[float]:
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def test_holm_hand_example_and_definition():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, max(0.04*1, 0.06) = 0.06
    assert stats.holm(torch.tensor([0.01, 0.04, 0.03, 0.005])).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    g = torch.Generator().manual_seed(0)
    p = torch.rand(5, 7, generator=g, dtype=torch.float64) ** 3
    adjusted = stats.holm(p)
    for row, adj in zip(p.tolist(), adjusted.tolist()):
        assert adj == pytest.approx(_holm_reference(row))
    bonf = stats.bonferroni(p)
    assert (adjusted >= p).all() and (adjusted <= bonf).all()
    assert torch.equal(bonf, (p * 7).clamp(max=1))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: stats.paired_t_test(torch.zeros(3), torch.zeros(4)), "same shape"),
        (lambda: stats.randomization_test(torch.zeros(1), torch.zeros(1)), "at least 2 queries"),
        (lambda: stats.bootstrap_ci(torch.tensor([0.1, float("nan")])), "NaN"),
        (lambda: stats.randomization_test(torch.zeros(3), torch.zeros(3), alternative="bigger"), "alternative"),
        (lambda: stats.bootstrap_ci(torch.zeros(3), confidence=95), "confidence"),
        (lambda: stats.randomization_test(torch.zeros(3), torch.zeros(3), n_resamples=0), "n_resamples"),
        (lambda: stats.holm(torch.tensor([0.5, 1.5])), r"\[0, 1\]"),
        (lambda: stats.adjust_pvalues(torch.tensor([0.5]), "fdr"), "correction"),
        (lambda: stats.randomization_test(torch.zeros(30), torch.zeros(30), exact=True), "too many"),
    ],
)
def test_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()
