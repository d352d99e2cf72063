"""Diagnostics: relevance inversions (constructed rankings, hand-computed means, scipy's paired
t-test), per-query breakdowns (numpy's histogram and quantiles), logger scalars, one-run summaries."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
import torch
from scipy import stats

from torch_rankeval import PositionProfile, RankingMetrics
from torch_rankeval.diagnostics import (
    default_bands,
    inversion_report,
    parse_band,
    per_query_breakdown,
    profile_from_tensors,
    profile_scalars,
)
from torch_rankeval.functional import ndcg

# Eight queries ranked as given (scores 8..1): poor documents at ranks 1-3, good ones at 5-8.
INVERTED = torch.tensor(
    [
        [0, 0, 1, 0, 2, 3, 2, 3],
        [1, 0, 0, 0, 3, 2, 2, 2],
        [0, 1, 0, 1, 2, 2, 3, 1],
        [0, 0, 0, 0, 1, 2, 3, 3],
        [1, 1, 0, 0, 2, 3, 3, 2],
        [0, 0, 0, 1, 3, 1, 2, 2],
        [0, 1, 1, 0, 2, 2, 2, 3],
        [0, 0, 0, 0, 2, 3, 1, 2],
    ]
)
SCORES = torch.arange(8, 0, -1).double().expand(8, 8)


def _profile(target, *, keep=False, positions=8):
    m = PositionProfile(positions=positions, keep_per_query=keep)
    m.update(SCORES[: target.shape[0], : target.shape[1]], target)
    return m


def test_good_items_at_5_8_and_poor_at_1_3_is_an_inversion_with_hand_computed_effect():
    m = _profile(INVERTED, keep=True)
    upper = INVERTED[:, :3].double()
    lower = INVERTED[:, 4:8].double()
    report = inversion_report(m.compute(), ["1-3", "5-8"])
    (c,) = report.comparisons
    assert c.name == "inversion@1-3_vs_5-8" and c.inverted and report.inversions == (c,)
    assert c.upper_mean == pytest.approx(upper.mean().item()) and c.lower_mean == pytest.approx(lower.mean().item())
    assert c.effect == pytest.approx(lower.mean().item() - upper.mean().item())
    assert (c.n_upper, c.n_lower) == (24, 32) and c.p_value is None  # profile only: no test
    assert report.scalars("val/") == {"val/inversion@1-3_vs_5-8": c.effect}

    # per-query rows: the same means, plus a one-sided paired t-test over the 8 queries
    paired = inversion_report(m.compute_per_query(), [(1, 3), (5, 8)]).comparisons[0]
    upper_q = [sum(row[:3]) / 3 for row in INVERTED.tolist()]
    lower_q = [sum(row[4:8]) / 4 for row in INVERTED.tolist()]
    diff = [b - a for a, b in zip(upper_q, lower_q)]
    assert paired.effect == pytest.approx(c.effect) and paired.n_paired == 8
    assert paired.standardized == pytest.approx(statistics.mean(diff) / statistics.stdev(diff))
    assert paired.p_value == pytest.approx(stats.ttest_rel(lower_q, upper_q, alternative="greater").pvalue)
    assert paired.p_value < 1e-4 and paired.significant(0.01)


@pytest.mark.parametrize("stat", ["relevance", "gain", "relevant_share"])
def test_a_perfect_ranking_reports_no_inversion(stat):
    g = torch.Generator().manual_seed(0)
    grades = torch.randint(0, 4, (12, 10), generator=g).sort(-1, descending=True).values
    m = PositionProfile(positions=10, keep_per_query=True)
    m.update(torch.arange(10, 0, -1).double().expand(12, 10), grades)
    for data in (m.compute(), m.compute_per_query()):
        report = inversion_report(data, stat=stat)  # default bands 1-3, 4-6, 7-8, 9-10: 6 comparisons
        assert len(report.comparisons) == 6 and report.inversions == ()
        assert all(c.effect <= 0 for c in report.comparisons)
    # the profile's own ideal is a perfect ranking too
    ideal = {"relevance": m.compute()["ideal_relevance"], "count": m.compute()["ideal_count"]}
    assert inversion_report(ideal).inversions == ()


def test_bands_with_padding_pool_documents_and_degenerate_paired_tests():
    # query 0 reaches rank 5, query 1 only rank 2: band 4-5 holds one query's documents
    target = torch.tensor([[0, 0, 0, 2, 2], [0, 1, 0, 0, 0]])
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    m = PositionProfile(positions=6, keep_per_query=True)
    m.update(SCORES[:2, :5], target, mask=mask)
    report = inversion_report(m.compute(), ["1-2", "4-5", "6"])
    names = [c.name for c in report.comparisons]
    assert names == ["inversion@1-2_vs_4-5", "inversion@1-2_vs_6", "inversion@4-5_vs_6"]
    first = report.comparisons[0]
    assert first.upper_mean == pytest.approx(1 / 4) and first.lower_mean == pytest.approx(2.0) and first.n_lower == 2
    nothing = report.comparisons[1]  # position 6: no query reaches it
    assert math.isnan(nothing.lower_mean) and not nothing.inverted and nothing.n_lower == 0
    assert "inversion@1-2_vs_6" not in profile_scalars(m.compute(), report)  # NaN never reaches a logger
    paired = inversion_report(m.compute_per_query(), ["1-2", "4-5"]).comparisons[0]
    assert paired.n_paired == 1 and paired.p_value is None and paired.standardized is None
    # identical differences in every query: the t statistic is infinite, p is 0
    same = PositionProfile(positions=2, keep_per_query=True)
    same.update(SCORES[:3, :2], torch.tensor([[0, 1], [0, 1], [0, 1]]))
    c = inversion_report(same.compute_per_query(), ["1", "2"]).comparisons[0]
    assert c.p_value == 0.0 and c.standardized == math.inf and c.inverted


def test_min_effect_and_band_validation():
    m = _profile(INVERTED)
    out = m.compute()
    assert inversion_report(out, ["1-3", "5-8"], min_effect=5.0).inversions == ()
    assert parse_band("5-8") == (5, 8) and parse_band(" 3 ") == (3, 3) and parse_band([2, 4]) == (2, 4)
    assert default_bands(10) == [(1, 3), (4, 6), (7, 8), (9, 10)] and default_bands(2) == [(1, 1), (2, 2)]
    for bad, exc, match in [
        ("3-1", ValueError, "first <= last"),
        ("0-2", ValueError, "1-based"),
        ("a-b", ValueError, "first-last"),
        (2.5, TypeError, "band must be"),
    ]:
        with pytest.raises(exc, match=match):
            parse_band(bad)
    with pytest.raises(ValueError, match="beyond the 8 profiled positions"):
        inversion_report(out, ["1-3", "7-9"])
    with pytest.raises(ValueError, match="no pair"):
        inversion_report(out, ["1-3", "2-4"])
    with pytest.raises(ValueError, match="stat="):
        inversion_report(out, stat="dcg_contribution")
    with pytest.raises(ValueError, match="PositionProfile result"):
        inversion_report({"ndcg": torch.ones(3)})


def test_per_query_breakdown_matches_numpy():
    g = torch.Generator().manual_seed(1)
    values = torch.rand(57, generator=g, dtype=torch.float64)
    values[[3, 17]] = float("nan")  # skipped queries
    values[[5, 40]] = 0.05  # a tie among the worst: id order
    ids = torch.arange(100, 157)
    b = per_query_breakdown({"query_id": ids, "ndcg@10": values}, bins=7, worst=4)
    kept = values[~values.isnan()].numpy()
    counts, edges = np.histogram(kept, bins=7, range=(0, 1))
    assert b.key == "ndcg@10" and b.n_queries == 55 and b.n_skipped == 2
    assert list(b.counts) == counts.tolist() and np.allclose(b.edges, edges)
    assert b.mean == pytest.approx(kept.mean())
    qs = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
    assert list(b.quantiles) == qs and np.allclose(list(b.quantiles.values()), np.quantile(kept, qs))
    order = sorted((v, i) for i, v in zip(ids.tolist(), values.tolist()) if not math.isnan(v))[:4]
    assert b.worst == tuple((i, v) for v, i in order) and b.worst[0][0] < b.worst[1][0]
    assert b.scalars("val/")["val/ndcg@10/q50"] == pytest.approx(np.median(kept))
    # values outside [0, 1] (e.g. DCG): the range follows the data
    dcg = per_query_breakdown({"query_id": ids[:3], "dcg": torch.tensor([0.5, 4.0, 2.0])}, bins=2)
    assert dcg.edges == (0.5, 2.25, 4.0) and dcg.counts == (2, 1)  # [0.5, 2.25), [2.25, 4.0]


def test_per_query_breakdown_edge_cases():
    with pytest.warns(UserWarning, match="no query has a value"):
        b = per_query_breakdown({"query_id": torch.tensor([1]), "map": torch.tensor([float("nan")])})
    assert b.n_queries == 0 and b.n_skipped == 1 and math.isnan(b.mean) and b.worst == ()
    with pytest.raises(ValueError, match="pass key="):
        per_query_breakdown({"query_id": torch.tensor([1]), "map": torch.ones(1), "mrr": torch.ones(1)})
    with pytest.raises(ValueError, match="compute_per_query"):
        per_query_breakdown({"map": torch.ones(1)})
    with pytest.raises(ValueError, match="quantiles"):
        per_query_breakdown({"query_id": torch.tensor([1]), "map": torch.ones(1)}, quantiles=(50,))


def test_breakdown_from_ranking_metrics_per_query_values():
    m = RankingMetrics(("ndcg@3", "map"), keep_per_query=True)
    preds = torch.tensor([[0.9, 0.5, 0.1], [0.9, 0.5, 0.1], [0.1, 0.5, 0.9]])
    target = torch.tensor([[1, 0, 0], [0, 1, 0], [1, 0, 0]])
    m.update(preds, target, indexes=torch.tensor([11, 12, 13]))
    b = per_query_breakdown(m.compute_per_query(), "ndcg@3", worst=1)
    assert b.worst == ((13, 0.5),)  # 1 / log2(4)
    assert b.mean == pytest.approx(ndcg(preds, target, k=3).item())


def test_profile_scalars_names_values_and_nan_skipping():
    target = torch.tensor([[0, 2, 1]])
    m = PositionProfile(positions=4, gain="linear")
    m.update(torch.tensor([[0.9, 0.5, 0.1]]), target)
    out = m.compute()
    report = inversion_report(out, ["1", "2-3"])
    scalars = profile_scalars(out, report)
    assert scalars["profile/relevance@2"] == 2.0 and scalars["profile/ideal_relevance@1"] == 2.0
    assert scalars["profile/dcg_contribution@2"] == pytest.approx(2 / math.log2(3))
    assert scalars["inversion@1_vs_2-3"] == pytest.approx(1.5)
    assert len(scalars) == 4 * 3 * 2 + 1  # 4 stats x 3 reached positions x (model, ideal) + 1 comparison
    assert all(isinstance(v, float) and not math.isnan(v) for v in scalars.values())
    assert set(profile_scalars(out, prefix="", stats=("gain",), ideal=False)) == {"gain@1", "gain@2", "gain@3"}
    with pytest.raises(ValueError, match="unknown stats"):
        profile_scalars(out, stats=("ndcg",))


def test_profile_from_tensors_summarises_one_run():
    preds = SCORES[:8, :8].float()
    s = profile_from_tensors(
        preds, INVERTED, positions=8, bands=["1-3", "5-8"], worst=3, query_ids=torch.arange(8) + 100
    )
    assert s.report.inversions[0].name == "inversion@1-3_vs_5-8" and s.report.inversions[0].p_value < 1e-4
    expected = ndcg(preds, INVERTED, k=8, reduction="none")
    assert s.breakdown.key == "ndcg@8" and s.breakdown.mean == pytest.approx(expected.mean().item(), abs=1e-6)
    worst = expected.argsort()[:3]
    assert [q for q, _ in s.breakdown.worst] == (worst + 100).tolist()
    text = s.to_text()
    assert "INVERTED" in text and "worst queries" in text
    flat = s.scalars("val/")
    assert "val/inversion@1-3_vs_5-8" in flat and "val/ndcg@8/mean" in flat and "val/profile/relevance@1" in flat
    with pytest.raises(TypeError, match="unknown convention"):
        profile_from_tensors(preds, INVERTED, denominator="all_relevant")
