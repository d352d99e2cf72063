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
        assert alone.pvalue.item() == together.pvalue[j].item()  # counts of resamples: exact
    # The resampled means of three columns and of one column come from matrix products of other
    # shapes (another blocking of the sums): equal to rounding, not bit for bit.
    low, high = stats.bootstrap_ci(x, y, n_resamples=500, seed=2)
    for j in range(3):
        lo, hi = stats.bootstrap_ci(x[:, j], y[:, j], n_resamples=500, seed=2)
        assert lo.item() == pytest.approx(low[j].item(), rel=1e-12, abs=1e-15)
        assert hi.item() == pytest.approx(high[j].item(), rel=1e-12, abs=1e-15)


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


# ----------------------------------------------------------------------------- streamed bootstrap
@pytest.fixture
def tiny_memory(monkeypatch):
    """Room for 64 resampled means and 8 histogram bins: every interval below is streamed."""
    monkeypatch.setattr(stats, "_KEEP", 64)
    monkeypatch.setattr(stats, "_BINS", 8)
    gathered = []
    original = stats._gather_ranked

    def spy(slices, col, lo, hi, within):
        inside = sum(int(((v >= lo.unsqueeze(1)) & (v < hi.unsqueeze(1))).sum()) for v in stats._blocks(slices, col))
        gathered.append(inside)
        return original(slices, col, lo, hi, within)

    monkeypatch.setattr(stats, "_gather_ranked", spy)
    return gathered


@pytest.mark.parametrize(
    ("q", "columns", "n_resamples", "confidence", "kind"),
    [
        (30, 3, 5000, 0.95, "continuous"),
        (7, 2, 20001, 0.9, "ties"),  # few distinct values: brackets close on single values
        (200, 4, 3000, 0.99, "continuous"),
        (5, 1, 100_000, 0.5, "continuous"),
        (12, 3, 777, 0.999, "constant"),  # one column constant: low == high == the constant
        (2, 1, 65, 0.95, "continuous"),  # two queries: three distinct means
        (40, 1, 1, 0.95, "continuous"),  # one resample
    ],
)
def test_streamed_bootstrap_equals_the_in_memory_quantiles(tiny_memory, q, columns, n_resamples, confidence, kind):
    """The streamed order statistics reproduce torch.quantile over all resamples bit for bit (the oracle:
    the same resampled means, concatenated and sorted), in bounded memory."""
    g = torch.Generator().manual_seed(q * columns)
    x = torch.rand(q, columns, dtype=torch.float64, generator=g)
    if kind == "ties":
        x = (x * 3).round() / 3
    if kind == "constant":
        x[:, 1] = 0.375
    alpha = (1 - confidence) / 2
    probs = torch.tensor([alpha, 1 - alpha], dtype=torch.float64)
    expected = torch.quantile(torch.cat(list(stats._bootstrap_means(x, n_resamples, 4))), probs, dim=0)
    low, high = stats.bootstrap_ci(x, n_resamples=n_resamples, seed=4, confidence=confidence)
    assert torch.equal(low, expected[0]) and torch.equal(high, expected[1])
    if kind == "constant":
        assert low[1].item() == high[1].item() == 0.375
    assert all(count <= 64 // 4 for count in tiny_memory)  # never more than the budget gathered


@pytest.mark.slow
def test_streamed_bootstrap_needs_memory_independent_of_the_resamples(monkeypatch):
    """Ten times the resamples: the same largest slice and the same gathered values' budget."""
    largest = []
    original = stats._bootstrap_means

    def spy(flat, n_resamples, seed):
        for chunk in original(flat, n_resamples, seed):
            largest.append(chunk.numel())
            yield chunk

    monkeypatch.setattr(stats, "_SLICE", 1024)
    monkeypatch.setattr(stats, "_KEEP", 256)
    monkeypatch.setattr(stats, "_bootstrap_means", spy)
    x = torch.rand(16, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for n in (10_000, 100_000):
        largest.clear()
        stats.bootstrap_ci(x, n_resamples=n)
        assert max(largest) == (1024 // 16) * 2  # a slice: 64 resamples x 2 columns, whatever n


# ----------------------------------------------------------------------------- compare_runs
def _runs(seed: int, r: int = 3, q: int = 11, m: int = 2) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    base = torch.rand(q, m, generator=g, dtype=torch.float64)
    runs = [base]
    for k in range(1, r):
        runs.append((base + 0.08 * k + 0.1 * torch.randn(q, m, generator=g, dtype=torch.float64)).clamp(0, 1))
    return torch.stack(runs)  # (R, Q, M)


def test_compare_runs_against_scipy_and_enumeration():
    scores = _runs(0)
    c = stats.compare_runs(scores, runs=["bm25", "dense", "hybrid"], measures=["map", "ndcg@10"], n_resamples=20_000)
    assert c.pairs == ((0, 1), (0, 2), (1, 2)) and c.n_queries == 11 and not c.t_test_skipped
    np.testing.assert_allclose(c.means.numpy(), scores.mean(1).numpy(), rtol=1e-15)
    for m in range(2):
        raw = []
        for p, (i, j) in enumerate(c.pairs):
            x, y = scores[j, :, m].numpy(), scores[i, :, m].numpy()
            assert c.difference[m, p].item() == pytest.approx(x.mean() - y.mean(), abs=1e-15)
            ref = scipy_stats.ttest_rel(x, y)
            assert c.t_statistic[m, p].item() == pytest.approx(ref.statistic, rel=1e-12)
            assert c.t_pvalue[m, p].item() == pytest.approx(ref.pvalue, rel=1e-10)
            exact = _brute_force_p(x - y, "two-sided")  # 2^11 <= 20000: exact enumeration
            assert c.randomization_pvalue[m, p].item() == pytest.approx(exact, abs=1e-15)
            raw.append(exact)
            boot = scipy_stats.bootstrap((x - y,), np.mean, n_resamples=20_000, method="percentile", random_state=0)
            spread = (x - y).std(ddof=1) / np.sqrt(len(x))  # Monte Carlo error of each bound: ~0.03 spread
            assert c.ci_low[m, p].item() == pytest.approx(boot.confidence_interval.low, abs=0.15 * spread)
            assert c.ci_high[m, p].item() == pytest.approx(boot.confidence_interval.high, abs=0.15 * spread)
        adjusted = _holm_reference(raw)
        assert c.pvalue_adjusted[m].tolist() == pytest.approx(adjusted, abs=1e-15)
        for p, (i, j) in enumerate(c.pairs):
            d = c.difference[m, p].item()
            significant = adjusted[p] < 0.05 and d != 0
            assert bool(c.significant[m, p]) == significant
            assert c.winner[m, p].item() == ((j if d > 0 else i) if significant else -1)
    assert c.significant.any() and not c.significant.all()  # the example exercises both outcomes


def test_compare_runs_input_forms_settings_and_records():
    scores = _runs(1, r=2, q=9, m=2)
    by_tensor = stats.compare_runs(scores, runs=["a", "b"], measures=["map", "P@5"], n_resamples=300, seed=3)
    by_runs = stats.compare_runs({"a": scores[0], "b": scores[1]}, measures=["map", "P@5"], n_resamples=300, seed=3)
    per_query = {run: {"map": s[:, 0], "P@5": s[:, 1], "num_ret": s[:, 1] * 0} for run, s in zip("ab", scores)}
    by_name = stats.compare_runs(per_query, measures=["map", "P@5"], n_resamples=300, seed=3)
    for other in (by_runs, by_name):
        assert other.runs == by_tensor.runs and other.measures == by_tensor.measures
        for field in ("means", "difference", "ci_low", "ci_high", "randomization_pvalue", "pvalue_adjusted"):
            assert torch.equal(getattr(other, field), getattr(by_tensor, field)), field
    # the t-test decides when asked; Bonferroni over one pair equals the raw p-value
    t = stats.compare_runs(scores, test="t", correction="bonferroni", n_resamples=300)
    assert torch.equal(t.pvalue_adjusted, t.t_pvalue) and t.runs == ("a", "b") and t.measures == ("m1", "m2")
    records = by_tensor.records()
    assert [(r["measure"], r["run_a"], r["run_b"]) for r in records] == [("map", "a", "b"), ("P@5", "a", "b")]
    assert records[1]["difference"] == by_tensor.difference[1, 0].item()
    assert records[1]["winner"] == (None if not by_tensor.significant[1, 0] else "ab"[by_tensor.winner[1, 0]])


def test_compare_runs_identical_runs_are_never_significant():
    scores = _runs(2, r=2)
    c = stats.compare_runs(torch.stack([scores[0], scores[0]]), n_resamples=200)
    assert (c.difference == 0).all() and (c.t_pvalue == 1).all() and not c.significant.any()
    assert (c.winner == -1).all() and c.beats(0, 0) == [] and c.beats(1, 1) == []


def test_compare_runs_without_scipy(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "scipy", None)
    c = stats.compare_runs(_runs(3, r=2), n_resamples=200)
    assert c.t_test_skipped and torch.isnan(c.t_pvalue).all() and c.records()[0]["t_pvalue"] is None
    with pytest.raises(ImportError, match="scipy"):
        stats.compare_runs(_runs(3, r=2), test="t")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"scores": torch.zeros(1, 5)}, ValueError, "at least two runs"),
        ({"scores": torch.zeros(2, 1)}, ValueError, "at least 2 queries"),
        ({"scores": torch.zeros(2, 5, 2, 2)}, ValueError, r"\(runs, queries\) or \(runs, queries, measures\)"),
        ({"scores": torch.zeros(2, 5), "runs": ["a"]}, ValueError, "runs= has 1 names for 2 runs"),
        ({"scores": torch.zeros(2, 5), "measures": ["x", "y"]}, ValueError, "measures= has 2 names for 1 measures"),
        ({"scores": torch.zeros(2, 5), "test": "wilcoxon"}, ValueError, "test='wilcoxon'"),
        ({"scores": torch.zeros(2, 5), "correction": "fdr"}, ValueError, "correction='fdr'"),
        ({"scores": torch.zeros(2, 5), "alpha": 1.5}, ValueError, "alpha must be a number in"),
        ({"scores": torch.zeros(2, 5), "seed": 2**70}, ValueError, "seed must be an int"),
        ({"scores": torch.tensor([[0.1, float("nan")], [0.2, 0.3]])}, ValueError, "NaN"),
        ({"scores": {"a": torch.zeros(4), "b": torch.zeros(5)}}, ValueError, "same queries"),
        ({"scores": {"a": {"map": torch.zeros(4)}, "b": {"P@5": torch.zeros(4)}}}, ValueError, "no per-query values"),
        ({"scores": {"a": torch.zeros(4), "b": torch.zeros(4)}, "runs": ["x", "y"]}, ValueError, "mapping's keys"),
        ({"scores": [[0.1, 0.2], [0.3, 0.4]]}, TypeError, "a tensor or a mapping"),
        ({"scores": torch.zeros(2, 5, dtype=torch.bool)}, TypeError, "real numbers"),
    ],
)
def test_compare_runs_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        stats.compare_runs(**kwargs)
