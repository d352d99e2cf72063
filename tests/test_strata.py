"""Strata and post-stratification (issue 21 item 4).

Oracle: the textbook post-stratified estimator written out here with numpy, from the per-query
values (``keep_per_query=True``) and the strata fed: ``mean_ps = sum_h W_h * ybar_h`` and
``SE = sqrt(sum_h W_h**2 * s_h**2 / n_h)``, ``s_h`` with ``ddof=1`` (``np.var(ddof=1)``); each
stratum's mean, ``scipy.stats.sem`` and count. Hand-computed values for the edge cases.
"""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest
import scipy.stats
import torch
import torch.distributed as dist

from tests.distributed_helpers import counting_collectives, spawn
from tests.oracles import random_batch
from tests.sync_guard import HostSyncGuard
from torch_rankeval import MRR, NDCG, PositionDebiasedDCG, PositionDebiasedNDCG, RankingMetrics
from torch_rankeval.measures.reduction import Reduction

METRICS = ("ndcg@10", "map", "mrr", "precision@3", "gm_map", "num_rel")
S = 4
WEIGHTS = [0.1, 0.2, 0.3, 0.4]


def _batches(seed: int = 0):
    """Four updates (one of 0 lists), tied scores, strata drawn unevenly."""
    out = []
    for i, n in enumerate((12, 0, 20, 6)):
        preds, target, mask, _ = random_batch(max(n, 1), 8, seed=seed + i, max_grade=2)
        preds = (preds * 2).round() / 2  # ties
        g = torch.Generator().manual_seed(100 + seed + i)
        strata = torch.multinomial(torch.tensor([0.35, 0.3, 0.2, 0.15]), max(n, 1), replacement=True, generator=g)
        out.append((preds[:n], target[:n], mask[:n], strata[:n]))
    return out


def _feed(metric, batches) -> None:
    for preds, target, mask, strata in batches:
        metric.update(preds, target, mask=mask, strata=strata)


def _all_strata(batches) -> np.ndarray:
    return torch.cat([b[3] for b in batches]).numpy()


def _textbook(values: np.ndarray, strata: np.ndarray, n_strata: int, weights, aggregate: str = "mean") -> dict:
    """Per-stratum and post-stratified summaries, written out. Skipped queries are NaN."""
    keep = ~np.isnan(values)
    v, h = values[keep], strata[keep]
    if aggregate == "gmean":
        v = np.log(np.maximum(v, 1e-5))
    n_h = np.array([(h == s).sum() for s in range(n_strata)])
    ybar = np.array([v[h == s].mean() if n_h[s] else np.nan for s in range(n_strata)])
    s2 = np.array([np.var(v[h == s], ddof=1) if n_h[s] >= 2 else np.nan for s in range(n_strata)])
    sem = np.array([scipy.stats.sem(v[h == s]) if n_h[s] >= 2 else np.nan for s in range(n_strata)])
    w = n_h / n_h.sum() if weights is None else np.asarray(weights, dtype=np.float64)
    used = w > 0
    mean_ps = float(np.sum(w[used] * ybar[used]))
    se_ps = float(np.sqrt(np.sum(w[used] ** 2 * s2[used] / n_h[used])))
    n = n_h.sum()
    if aggregate == "sum":
        mean_ps, se_ps = n * mean_ps, n * se_ps
        ybar, sem = ybar * n_h, sem * n_h
    elif aggregate == "gmean":
        mean_ps, se_ps = math.exp(mean_ps), math.exp(mean_ps) * se_ps
        ybar, sem = np.exp(ybar), np.exp(ybar) * sem
    return {"ps": mean_ps, "ps_se": se_ps, "mean": ybar, "sem": sem, "count": n_h, "weight": w}


def _aggregate(key: str) -> str:
    return "gmean" if key.startswith("gm_") else "sum" if key == "num_rel" else "mean"


def _close(got: float, want: float, key: str) -> None:
    if math.isnan(want):
        assert math.isnan(got), key
    else:
        assert got == pytest.approx(want, rel=1e-5, abs=1e-6), key


def _check_against_textbook(metric, per_query: dict, strata: np.ndarray, n_strata: int, weights) -> None:
    out = metric.compute(stderr=True)
    table = metric.compute_per_stratum()
    assert table["stratum"].tolist() == list(range(n_strata))
    # the data give numbers to compare, not NaN against NaN
    assert not math.isnan(out[f"{metric.keys[0]}/poststratified/stderr"].item())
    for key in metric.keys:
        want = _textbook(per_query[key].double().numpy(), strata, n_strata, weights, _aggregate(key))
        _close(out[f"{key}/poststratified"].item(), want["ps"], key)
        _close(out[f"{key}/poststratified/stderr"].item(), want["ps_se"], key + " se")
        assert table[key + "/count"].tolist() == want["count"].tolist(), key
        assert table[key + "/count"].dtype == torch.int64
        for h in range(n_strata):
            _close(out[f"{key}/stratum/{h}"].item(), want["mean"][h], f"{key} stratum {h}")
            _close(out[f"{key}/stratum/{h}/stderr"].item(), want["sem"][h], f"{key} stratum {h} se")
            _close(table[key][h].item(), want["mean"][h], f"{key} table {h}")
            _close(table[key + "/stderr"][h].item(), want["sem"][h], f"{key} table se {h}")
            _close(table[key + "/weight"][h].item(), want["weight"][h], f"{key} weight {h}")


# ---------------------------------------------------------------------- the formulas
@pytest.mark.parametrize("weights", [WEIGHTS, None])
@pytest.mark.parametrize("action", ["neg", "skip"])
def test_poststratified_means_and_errors_equal_the_textbook_formulas(action, weights):
    batches = _batches()
    rows = RankingMetrics(METRICS, empty_target_action=action, keep_per_query=True)
    for preds, target, mask, _ in batches:
        rows.update(preds, target, mask=mask)
    per_query = rows.compute_per_query()
    if action == "skip":
        assert torch.isnan(per_query["map"]).any()  # some queries are left out, per stratum too
    metric = RankingMetrics(METRICS, empty_target_action=action, strata=S, stratum_weights=weights)
    _feed(metric, batches)
    _check_against_textbook(metric, per_query, _all_strata(batches), S, weights)
    # kept rows carry their stratum
    kept = RankingMetrics(METRICS, empty_target_action=action, strata=S, keep_per_query=True)
    _feed(kept, batches)
    rows_kept = kept.compute_per_query()
    assert rows_kept["stratum"].tolist() == _all_strata(batches).tolist()
    torch.testing.assert_close(rows_kept["map"], per_query["map"], equal_nan=True)
    # the plain keys are the plain means, unchanged, first
    plain = rows.compute(stderr=True)
    out = metric.compute(stderr=True)
    assert list(out)[: len(plain)] == list(plain)
    for key, value in plain.items():
        _close(out[key].item(), value.item(), key)


def test_with_the_observed_shares_the_poststratified_mean_is_the_plain_mean():
    # stratum 0: the relevant document at rank 1 or 2; stratum 1: at rank 3 or 4 (strata differ, lists
    # within a stratum hardly): the mean is the plain mean, its error the much smaller within-strata error
    g = torch.Generator().manual_seed(8)
    strata = torch.randint(0, 2, (60,), generator=g)
    rank = 2 * strata + torch.randint(0, 2, (60,), generator=g)
    target = torch.nn.functional.one_hot(rank, 4)
    preds = torch.tensor([0.9, 0.7, 0.5, 0.3]).expand(60, -1)
    metric = MRR(strata=2)
    metric.update(preds, target, strata=strata)
    out = metric.compute(stderr=True)
    assert out["mrr/poststratified"].item() == pytest.approx(out["mrr"].item(), rel=1e-6)
    rr = (1.0 / (rank + 1).double()).numpy()
    h = strata.numpy()
    n_h = np.array([(h == 0).sum(), (h == 1).sum()])
    within = math.sqrt(sum((n_h[s] / 60) ** 2 * np.var(rr[h == s], ddof=1) / n_h[s] for s in (0, 1)))
    assert out["mrr/poststratified/stderr"].item() == pytest.approx(within, rel=1e-5)
    assert out["mrr/stderr"].item() == pytest.approx(scipy.stats.sem(rr), rel=1e-5)
    assert within < 0.75 * scipy.stats.sem(rr)  # 0.021 vs 0.037


@pytest.mark.parametrize("compile", [False, True])
def test_compiled_and_unvalidated_updates_give_the_same_strata(compile):
    batches = _batches(seed=3)
    want = RankingMetrics(("ndcg@10", "map"), strata=S, stratum_weights=WEIGHTS)
    _feed(want, batches)
    metric = RankingMetrics(("ndcg@10", "map"), strata=S, stratum_weights=WEIGHTS, compile=compile, validate_args=False)
    _feed(metric, batches)
    for key, value in want.compute(stderr=True).items():
        _close(metric.compute(stderr=True)[key].item(), value.item(), key)


def test_hand_computed_strata_with_empty_and_single_query_strata():
    # reciprocal ranks: stratum 0 holds 1 and 1/2, stratum 1 holds 1, stratum 2 nothing
    preds = torch.tensor([[0.9, 0.1], [0.9, 0.1], [0.9, 0.1]])
    target = torch.tensor([[1, 0], [0, 1], [1, 0]])
    strata = torch.tensor([0, 0, 1])
    # a stratum of weight 0 without queries adds nothing; stratum 1 (n = 1) has a mean but no variance
    metric = MRR(strata=3, stratum_weights=[0.5, 0.5, 0.0])
    metric.update(preds, target, strata=strata)
    out = metric.compute(stderr=True)
    assert out["mrr/poststratified"].item() == pytest.approx(0.5 * 0.75 + 0.5 * 1.0)
    assert math.isnan(out["mrr/poststratified/stderr"].item())  # W_1 > 0 and n_1 = 1: s_1 undefined
    assert out["mrr/stratum/0"].item() == pytest.approx(0.75)
    assert out["mrr/stratum/0/stderr"].item() == pytest.approx(0.25)  # sem([1, 0.5])
    assert out["mrr/stratum/1"].item() == 1.0 and math.isnan(out["mrr/stratum/1/stderr"].item())
    assert math.isnan(out["mrr/stratum/2"].item()) and math.isnan(out["mrr/stratum/2/stderr"].item())
    # only stratum 0 weighted: its mean and error alone
    alone = MRR(strata=3, stratum_weights=[1.0, 0.0, 0.0])
    alone.update(preds, target, strata=strata)
    res = alone.compute(stderr=True)
    assert res["mrr/poststratified"].item() == pytest.approx(0.75)
    assert res["mrr/poststratified/stderr"].item() == pytest.approx(0.25)
    # a stratum of weight > 0 without any query: the post-stratified mean is unknown (NaN, a warning)
    missing = MRR(strata=3, stratum_weights=[0.4, 0.4, 0.2])
    missing.update(preds, target, strata=strata)
    with pytest.warns(UserWarning, match=r"strata \[2\] have a weight > 0 but no counted list"):
        res = missing.compute(stderr=True)
    assert math.isnan(res["mrr/poststratified"].item()) and math.isnan(res["mrr/poststratified/stderr"].item())
    assert res["mrr"].item() == pytest.approx(2.5 / 3)  # the plain mean is untouched
    # observed shares: the empty stratum has weight 0
    observed = MRR(strata=3)
    observed.update(preds, target, strata=strata)
    table = observed.compute_per_stratum()
    assert table["mrr/weight"].tolist() == pytest.approx([2 / 3, 1 / 3, 0.0])
    assert table["mrr/count"].tolist() == [2, 1, 0]


def test_nothing_counted_gives_nan_everywhere():
    metric = RankingMetrics(("map",), empty_target_action="skip", strata=2)
    metric.update(torch.tensor([[0.9, 0.1]]), torch.tensor([[0, 0]]), strata=torch.tensor([1]))
    with pytest.warns(UserWarning, match="no query was counted"):
        out = metric.compute(stderr=True)
    assert all(math.isnan(v.item()) for v in out.values())


def test_reduction_poststratified_is_the_formula():
    r = Reduction(("mean", "sum", "gmean"))
    v = [np.array([0.2, 0.4, 0.9]), np.array([0.5, 0.7])]
    w = np.array([0.25, 0.75])
    sums = torch.tensor([[x.sum(), x.sum(), np.log(x).sum()] for x in v], dtype=torch.float64)
    squares = torch.tensor([[(x**2).sum(), (x**2).sum(), (np.log(x) ** 2).sum()] for x in v], dtype=torch.float64)
    counts = torch.tensor([[3] * 3, [2] * 3])
    values, errors = r.poststratified(sums, squares, counts, torch.tensor(w))
    mean = sum(wh * x.mean() for wh, x in zip(w, v))
    se = math.sqrt(sum(wh**2 * np.var(x, ddof=1) / x.size for wh, x in zip(w, v)))
    gm = math.exp(sum(wh * np.log(x).mean() for wh, x in zip(w, v)))
    gse = gm * math.sqrt(sum(wh**2 * np.var(np.log(x), ddof=1) / x.size for wh, x in zip(w, v)))
    assert values.tolist() == pytest.approx([mean, 5 * mean, gm])
    assert errors.tolist() == pytest.approx([se, 5 * se, gse])


# ---------------------------------------------------------------------- the other classes
def test_one_metric_classes_with_strata_report_a_dict_as_with_windows():
    batches = _batches(seed=11)
    rows = NDCG(k=(3, 5), keep_per_query=True)
    for preds, target, mask, _ in batches:
        rows.update(preds, target, mask=mask)
    metric = NDCG(k=(3, 5), strata=S, stratum_weights=WEIGHTS)
    _feed(metric, batches)
    plain = metric.compute()  # created with strata: a dict (as with window=), the plain means first
    assert list(plain)[:2] == ["ndcg@3", "ndcg@5"] and "ndcg@3/poststratified" in plain
    assert "ndcg@3/stderr" not in plain and "ndcg@3/stratum/0" in plain
    _check_against_textbook(metric, rows.compute_per_query(), _all_strata(batches), S, WEIGHTS)


@pytest.mark.parametrize("cls", [PositionDebiasedNDCG, PositionDebiasedDCG])
def test_debiased_metrics_report_strata(cls):
    g = torch.Generator().manual_seed(4)
    preds = torch.rand(30, 6, generator=g)
    clicks = (torch.rand(30, 6, generator=g) < 0.3).float()
    positions = torch.arange(1, 7).expand(30, -1)
    strata = torch.randint(0, 3, (30,), generator=g)
    rows = cls(k=4, eta=1.0, keep_per_query=True)
    rows.update(preds, clicks, logged_positions=positions)
    metric = cls(k=4, eta=1.0, strata=3, stratum_weights=[0.5, 0.3, 0.2])
    metric.update(preds[:17], clicks[:17], logged_positions=positions[:17], strata=strata[:17])
    metric.update(preds[17:], clicks[17:], logged_positions=positions[17:], strata=strata[17:])
    _check_against_textbook(metric, rows.compute_per_query(), strata.numpy(), 3, [0.5, 0.3, 0.2])


def test_flat_whole_queries_equal_padded_input():
    preds = torch.tensor([0.9, 0.1, 0.5, 0.3, 0.3, 0.8, 0.2])
    target = torch.tensor([1, 0, 0, 1, 1, 0, 1])
    indexes = torch.tensor([7, 7, 2, 2, 2, 5, 5])
    doc_strata = torch.tensor([1, 1, 0, 0, 0, 1, 1])
    flat = RankingMetrics(("ndcg", "mrr"), strata=2, stratum_weights=[0.3, 0.7], whole_queries=True)
    flat.update(preds, target, indexes=indexes, strata=doc_strata)
    # the same queries, padded, in query-id order 2, 5, 7
    padded = RankingMetrics(("ndcg", "mrr"), strata=2, stratum_weights=[0.3, 0.7])
    padded.update(
        torch.tensor([[0.5, 0.3, 0.3], [0.8, 0.2, 0.0], [0.9, 0.1, 0.0]]),
        torch.tensor([[0, 1, 1], [0, 1, 0], [1, 0, 0]]),
        mask=torch.tensor([[True, True, True], [True, True, False], [True, True, False]]),
        strata=torch.tensor([0, 1, 1]),
    )
    for key, value in padded.compute(stderr=True).items():
        _close(flat.compute(stderr=True)[key].item(), value.item(), key)
    with pytest.raises(ValueError, match="the same for every document of a query"):
        flat.update(preds, target, indexes=indexes, strata=torch.tensor([1, 0, 0, 0, 0, 1, 1]))
    not_whole = RankingMetrics(("ndcg",), strata=2)
    with pytest.raises(ValueError, match="strata with flat input needs whole_queries=True"):
        not_whole.update(preds, target, indexes=indexes, strata=doc_strata)


# ---------------------------------------------------------------------- bad input
def test_constructor_refuses_bad_strata_and_weights():
    with pytest.raises(TypeError, match="strata must be None or an int"):
        RankingMetrics(("ndcg",), strata=2.0)
    with pytest.raises(TypeError, match="strata must be None or an int"):
        NDCG(strata=True)
    with pytest.raises(ValueError, match="strata must be at least 1"):
        NDCG(strata=0)
    with pytest.raises(ValueError, match="stratum_weights needs strata="):
        NDCG(stratum_weights=[0.5, 0.5])
    with pytest.raises(ValueError, match=r"must sum to 1 .* got a sum of 0.9"):
        NDCG(strata=2, stratum_weights=[0.5, 0.4])
    with pytest.raises(ValueError, match="must be >= 0"):
        NDCG(strata=2, stratum_weights=[1.5, -0.5])
    with pytest.raises(ValueError, match=r"one weight per stratum: shape \(3,\), got \(2,\)"):
        NDCG(strata=3, stratum_weights=[0.5, 0.5])
    with pytest.raises(ValueError, match=r"shape \(2,\), got \(1, 2\)"):
        NDCG(strata=2, stratum_weights=torch.tensor([[0.5, 0.5]]))
    with pytest.raises(ValueError, match="must be finite"):
        NDCG(strata=2, stratum_weights=[float("nan"), 1.0])
    with pytest.raises(TypeError, match="stratum_weights must be numbers"):
        NDCG(strata=2, stratum_weights=["a", "b"])
    with pytest.raises(TypeError, match="stratum_weights must be None"):
        NDCG(strata=2, stratum_weights=0.5)
    with pytest.raises(TypeError, match="strata must be None or an int"):
        PositionDebiasedNDCG(strata="3")
    assert NDCG(strata=2, stratum_weights=torch.tensor([0.25, 0.75])).stratum_weights.dtype == torch.float64


def test_update_refuses_bad_strata():
    preds, target = torch.tensor([[0.9, 0.1], [0.2, 0.8]]), torch.tensor([[1, 0], [0, 1]])
    metric = NDCG(strata=3)
    with pytest.raises(ValueError, match=r"created with strata=3: pass strata="):
        metric.update(preds, target)
    with pytest.raises(ValueError, match=r"one stratum per list: shape \(2,\), got \(3,\)"):
        metric.update(preds, target, strata=torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=r"shape \(2,\), got \(2, 1\)"):
        metric.update(preds, target, strata=torch.tensor([[0], [1]]))
    with pytest.raises(TypeError, match="strata must be an integer tensor"):
        metric.update(preds, target, strata=torch.tensor([0.0, 1.0]))
    with pytest.raises(TypeError, match="strata must be an integer tensor"):
        metric.update(preds, target, strata=torch.tensor([True, False]))
    with pytest.raises(TypeError, match="strata must be a torch.Tensor"):
        metric.update(preds, target, strata=[0, 1])
    with pytest.raises(ValueError, match=r"strata must lie in \[0, 3\) .* got values in \[0, 3\]"):
        metric.update(preds, target, strata=torch.tensor([0, 3]))
    with pytest.raises(ValueError, match=r"got values in \[-1, 1\]"):
        metric.update(preds, target, strata=torch.tensor([-1, 1]))
    # nothing was added by the refused updates
    assert metric.stratum_counts.sum().item() == 0 and metric.counts.sum().item() == 0
    with pytest.raises(ValueError, match="created without strata: create it with strata=S"):
        NDCG().update(preds, target, strata=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="created without strata"):
        PositionDebiasedNDCG(eta=1.0).update(
            preds, target.float(), logged_positions=torch.tensor([[1, 2], [1, 2]]), strata=torch.tensor([0, 1])
        )
    with pytest.raises(ValueError, match="compute_per_stratum needs strata=S"):
        NDCG().compute_per_stratum()
    # unvalidated: no range check (no host sync); on CPU index_add_ still refuses the index
    loose = NDCG(strata=3, validate_args=False)
    with pytest.raises((RuntimeError, IndexError)):
        loose.update(preds, target, strata=torch.tensor([0, 3]))


def test_unvalidated_update_with_strata_makes_no_host_sync():
    batches = _batches(seed=5)
    metric = RankingMetrics(("ndcg@10", "map", "mrr"), strata=S, stratum_weights=WEIGHTS, validate_args=False)
    _feed(metric, batches[:1])  # tables grown on the host once
    with HostSyncGuard():
        _feed(metric, batches)


def test_an_empty_update_is_a_no_op():
    metric = NDCG(k=3, strata=2)
    metric.update(torch.zeros(0, 4), torch.zeros(0, 4, dtype=torch.long), strata=torch.zeros(0, dtype=torch.long))
    assert metric.stratum_counts.sum().item() == 0 and metric.stratum_sums.abs().sum().item() == 0


# ---------------------------------------------------------------------- state
def test_state_pickles_loads_merges_and_refuses_other_strata():
    batches = _batches(seed=9)
    metric = RankingMetrics(("ndcg@10", "mrr"), strata=S, stratum_weights=WEIGHTS)
    metric.persistent(True)
    _feed(metric, batches)
    want = metric.compute(stderr=True)
    assert metric.stratum_sums.shape == (S, 2) and metric.stratum_counts.dtype == torch.int64
    for other in (pickle.loads(pickle.dumps(metric)), copy.deepcopy(metric)):
        for key, value in want.items():
            torch.testing.assert_close(other.compute(stderr=True)[key], value, equal_nan=True)
    fresh = RankingMetrics(("ndcg@10", "mrr"), strata=S, stratum_weights=WEIGHTS)
    fresh.persistent(True)
    fresh.load_state_dict(metric.state_dict())
    for key, value in want.items():
        torch.testing.assert_close(fresh.compute(stderr=True)[key], value, equal_nan=True)
    # merge two halves: the union
    a = RankingMetrics(("ndcg@10", "mrr"), strata=S, stratum_weights=WEIGHTS)
    b = RankingMetrics(("ndcg@10", "mrr"), strata=S, stratum_weights=WEIGHTS)
    _feed(a, batches[:2])
    _feed(b, batches[2:])
    a.merge_state(b)
    for key, value in want.items():
        _close(a.compute(stderr=True)[key].item(), value.item(), key)
    # other strata, or none: refused
    with pytest.raises(ValueError, match="differently configured"):
        RankingMetrics(("ndcg@10", "mrr"), strata=S + 1).merge_state(metric)
    with pytest.raises(ValueError, match="differently configured"):
        RankingMetrics(("ndcg@10", "mrr")).load_state_dict(metric.state_dict())
    plain_state = {k: v for k, v in metric.state_dict().items()}  # a plain dict: checked by shape
    other = RankingMetrics(("ndcg@10", "mrr"), strata=S + 1)
    other.persistent(True)
    with pytest.raises(ValueError, match="created with other strata="):
        other.load_state_dict(plain_state)
    # set_dtype keeps the float64/int64 stratum states; reset clears them
    metric.set_dtype(torch.float16)
    assert metric.stratum_sums.dtype == torch.float64 and metric.stratum_counts.dtype == torch.int64
    metric.reset()
    assert metric.stratum_counts.sum().item() == 0


def test_a_metric_without_strata_keeps_its_states_and_fingerprint():
    plain = RankingMetrics(("ndcg@10",))
    assert not any(name.startswith("stratum") for name in plain._defaults)
    with_strata = RankingMetrics(("ndcg@10",), strata=2)
    assert plain._config_state != with_strata._config_state
    # weights change what compute reports, not the states: the same fingerprint
    assert RankingMetrics(("ndcg@10",), strata=2, stratum_weights=[0.5, 0.5])._config_state == with_strata._config_state


def test_forward_gives_the_batch_and_accumulates():
    batches = _batches(seed=2)
    metric = RankingMetrics(("mrr",), strata=S, stratum_weights=WEIGHTS)
    preds, target, mask, strata = batches[0]
    batch = metric(preds, target, mask=mask, strata=strata)
    alone = RankingMetrics(("mrr",), strata=S, stratum_weights=WEIGHTS)
    alone.update(preds, target, mask=mask, strata=strata)
    expected = alone.compute()
    assert list(batch) == list(expected)
    for key, value in expected.items():
        torch.testing.assert_close(batch[key], value, equal_nan=True)
    metric(*batches[2][:2], mask=batches[2][2], strata=batches[2][3])  # forward accumulates too
    alone.update(*batches[2][:2], mask=batches[2][2], strata=batches[2][3])
    for key, value in alone.compute().items():
        torch.testing.assert_close(metric.compute()[key], value, equal_nan=True)


# ---------------------------------------------------------------------- DDP (3 gloo processes)
_OTHERS = {
    "NDCG": lambda: NDCG(k=(3, 10), strata=S, stratum_weights=WEIGHTS),
    "PositionDebiasedDCG": lambda: PositionDebiasedDCG(k=5, eta=1.0, strata=S, stratum_weights=WEIGHTS),
}


def _feed_other(metric, batch) -> None:
    preds, target, mask, strata = batch
    if isinstance(metric, PositionDebiasedDCG):
        positions = torch.arange(1, preds.shape[1] + 1).expand(preds.shape[0], -1)
        metric.update(preds, (target > 0).float(), logged_positions=positions, mask=mask, strata=strata)
    else:
        metric.update(preds, target, mask=mask, strata=strata)


def _ddp_worker(rank, world, rdv, out):
    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=world)
    batches = _batches()
    metric = RankingMetrics(METRICS, empty_target_action="skip", strata=S, stratum_weights=WEIGHTS)
    owner = {0: 0, 1: 0, 2: 1, 3: 0}  # uneven: rank 0 three updates (one empty), rank 1 one, rank 2 none
    for i, batch in enumerate(batches):
        if owner[i] == rank:
            _feed(metric, [batch])
    with counting_collectives() as calls:
        result = {k: v.item() for k, v in metric.compute(stderr=True).items()}
    table = {k: v.tolist() for k, v in metric.compute_per_stratum().items()}
    others = {}
    for name, build in _OTHERS.items():  # a one-metric class and a debiased metric, the same uneven split
        other = build()
        for i, batch in enumerate(batches):
            if owner[i] == rank:
                _feed_other(other, batch)
        others[name] = {k: v.item() for k, v in other.compute(stderr=True).items()}
    kept = RankingMetrics(("mrr",), strata=S, keep_per_query=True)
    for i, batch in enumerate(batches):
        if owner[i] == rank:
            _feed(kept, [batch])
    rows = {k: v.tolist() for k, v in kept.compute_per_query().items()}
    torch.save(
        {"result": result, "table": table, "calls": dict(calls), "others": others, "rows": rows}, f"{out}.{rank}"
    )
    dist.barrier()
    dist.destroy_process_group()


def test_ddp_three_gloo_processes_equal_one_process(tmp_path):
    world = 3
    out = tmp_path / "result"
    spawn(_ddp_worker, (world, str(tmp_path / "rdv"), str(out)), world)
    single = RankingMetrics(METRICS, empty_target_action="skip", strata=S, stratum_weights=WEIGHTS)
    _feed(single, _batches())
    want = {k: v.item() for k, v in single.compute(stderr=True).items()}
    table = {k: v.tolist() for k, v in single.compute_per_stratum().items()}
    values = len(METRICS)
    for rank in range(world):
        got = torch.load(f"{out}.{rank}")
        assert list(got["result"]) == list(want)
        for key, value in want.items():
            _close(got["result"][key], value, f"rank {rank} {key}")
        assert got["table"].keys() == table.keys()
        for key, value in table.items():
            np.testing.assert_allclose(got["table"][key], value, rtol=1e-6, atol=1e-9, err_msg=key)
        for name, build in _OTHERS.items():
            alone = build()
            for batch in _batches():
                _feed_other(alone, batch)
            for key, value in alone.compute(stderr=True).items():
                _close(got["others"][name][key], value.item(), f"rank {rank} {name} {key}")
        # kept rows: every query once, with its stratum (ids are rank + world * position)
        assert sorted(got["rows"]["stratum"]) == sorted(_all_strata(_batches()).tolist())
        assert len(set(got["rows"]["query_id"])) == len(_all_strata(_batches()))
        # one all-reduce: sums, squares, counts, the three (S, V) stratum states and the list sizes
        assert got["calls"]["all_reduce"] == 1 and got["calls"]["all_gather"] == 0
        assert got["calls"]["bytes"] == 8 * (3 * values + 3 * S * values + 5)
