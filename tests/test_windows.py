"""Monitoring (issue 21 items 1, 2): windows over the last N updates / lists and exponential decay.

Oracles, written out here with numpy and scipy: the window is the mean (``scipy.stats.sem``) of the
per-query values of the last N updates (or the last N lists) of each process; the decayed value
is the weighted mean ``sum(w x) / sum(w)`` with ``w = 2 ** (-age / half_life)`` and its error the
documented formula ``sqrt(var_w / n_eff)``, ``var_w = sum(w (x - m)^2) / (W - W2 / W)``,
``n_eff = W^2 / W2``. The per-query values of each batch come from a fresh ``keep_per_query=True``
metric (checked against trec_eval / pyndeval elsewhere); ``ItemExposure``'s histograms from a numpy
top-k of continuous scores (no ties).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.stats
import torch
import torch.distributed as dist

from tests.distributed_helpers import spawn
from tests.oracles import assert_close_dict, feed, random_batch
from tests.sync_guard import HostSyncGuard
from torch_rankeval import RankingMetrics
from torch_rankeval import metrics as M

METRICS = ("ndcg@5", "map", "mrr", "gm_map", "num_rel")
SINGLE = ("DCG", "IDCG", "NDCG", "MAP", "MRR", "Precision", "Recall", "HitRate", "RPrecision", "FallOut", "AUROC")


def _batches(sizes=(3, 0, 5, 1, 4, 2), seed=0):
    out = []
    for i, n in enumerate(sizes):  # an empty update (0 lists) among them
        preds, target, mask, _ = random_batch(max(n, 1), 7, seed=seed + 10 * i, max_grade=2)
        out.append((preds[:n], target[:n], mask[:n]))
    return out


def _per_query(make, batch, keys):
    """``(n, V)`` per-query values of one batch (NaN: skipped), from a fresh keep_per_query metric."""
    preds, target, mask = batch
    if preds.shape[0] == 0:
        return np.zeros((0, len(keys)))
    m = make(keep_per_query=True)
    m.update(preds, target, mask=mask)
    rows = m.compute_per_query()
    return np.stack([rows[k].double().numpy() for k in keys], axis=1)


def _summary(key, x, w=None):
    """The value of ``key`` over per-query ``x`` (NaN skipped) with weights ``w`` and its error."""
    w = np.ones_like(x) if w is None else w
    keep = ~np.isnan(x)
    x, w = x[keep], w[keep]
    if key.endswith("gm_map"):
        x = np.log(np.maximum(x, 1e-5))
    if x.size == 0:
        return math.nan, math.nan
    W, W2 = w.sum(), (w**2).sum()
    m = (w * x).sum() / W
    if x.size >= 2:
        var = (w * (x - m) ** 2).sum() / (W - W2 / W)
        se = math.sqrt(var / (W**2 / W2))
        if np.all(w == 1):
            assert se == pytest.approx(scipy.stats.sem(x))
    else:
        se = math.nan
    if key.endswith("gm_map"):
        return math.exp(m), math.exp(m) * se
    if key.endswith("num_rel"):
        return (w * x).sum(), W * se
    return m, se


def _expected(rows_per_update, keys, prefix, *, window=None, half_life=None, unit="updates"):
    """The windowed / decayed values from the per-update per-query rows (one list per process)."""
    out = {}
    xs, ws = [], []
    for rows in rows_per_update:  # one process each
        if unit == "updates":
            kept = rows[-window:] if window is not None else rows
            ages = np.concatenate([np.full(len(r), len(kept) - 1 - u) for u, r in enumerate(kept)] or [np.zeros(0)])
            x = np.concatenate(kept) if kept else np.zeros((0, len(keys)))
        else:
            x = np.concatenate(rows) if rows else np.zeros((0, len(keys)))
            x = x[-window:] if window is not None else x
            ages = np.arange(len(x) - 1, -1, -1)
        xs.append(x)
        ws.append(np.ones(len(x)) if half_life is None else 2.0 ** (-ages / half_life))
    x, w = np.concatenate(xs), np.concatenate(ws)
    for i, key in enumerate(keys):
        value, se = _summary(key, x[:, i], w)
        out[prefix + key] = value
        out[prefix + key + "/stderr"] = se
    return out


# ---------------------------------------------------------------------- RankingMetrics
@pytest.mark.parametrize(
    "window, half_life, unit",
    [(2, None, "updates"), (3, None, "queries"), (20, None, "queries"), (None, 1.5, "updates"), (None, 2.0, "queries")],
)
@pytest.mark.parametrize("action", ["neg", "skip"])
def test_ranking_metrics_window_and_decay_equal_numpy(window, half_life, unit, action):
    batches = _batches()

    def make(**kw):
        return RankingMetrics(METRICS, empty_target_action=action, **kw)

    metric = make(window=window, half_life=half_life, window_unit=unit)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gm_map: logs of zeros, a window without counted lists
        for batch in batches:
            feed(metric, [batch])
            rows.append(_per_query(make, batch, metric.keys))
            prefix = "window/" if window is not None else "decay/"
            got = metric.compute(stderr=True)
            nonempty = [[r for r in rows if len(r)]]  # an empty update takes no slot and ages nothing
            assert_close_dict(
                got,
                _expected(nonempty, metric.keys, prefix, window=window, half_life=half_life, unit=unit),
                same_keys=False,
            )
            lifetime = _expected(nonempty, metric.keys, "", unit="queries")
            assert_close_dict(got, lifetime, same_keys=False)
    assert list(metric.compute()) == metric.keys + [prefix + k for k in metric.keys]


def test_compiled_update_fills_the_window_as_the_eager_one():
    batches = _batches((4, 3, 5))
    eager = RankingMetrics(("ndcg@5", "mrr"), window=2, half_life=1.0)
    compiled = RankingMetrics(("ndcg@5", "mrr"), window=2, half_life=1.0, compile=True, validate_args=False)
    feed(eager, batches)
    feed(compiled, batches)
    want = {k: v.item() for k, v in eager.compute(stderr=True).items()}
    assert_close_dict(compiled.compute(stderr=True), want, same_keys=False)


# ---------------------------------------------------------------------- the other classes
@pytest.mark.parametrize("name", SINGLE)
def test_every_one_metric_class_window_and_decay_equal_numpy(name):
    cls = getattr(M, name)
    batches = _batches((3, 2, 4))

    def make(**kw):
        return cls(**kw) if name == "RPrecision" else cls(k=3, **kw)

    metric = make(window=2, half_life=1.0)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for batch in batches:
            feed(metric, [batch])
            rows.append(_per_query(make, batch, metric.keys))
    got = metric.compute(stderr=True)
    assert_close_dict(got, _expected([rows], metric.keys, "window/", window=2), same_keys=False)
    assert_close_dict(got, _expected([rows], metric.keys, "decay/", half_life=1.0), same_keys=False)
    assert set(metric.compute()) == {
        *metric.keys,
        *("window/" + k for k in metric.keys),
        *("decay/" + k for k in metric.keys),
    }


def _clicks(seed, n=4, length=5):
    g = torch.Generator().manual_seed(seed)
    preds = torch.rand(n, length, generator=g, dtype=torch.float64)
    clicks = (torch.rand(n, length, generator=g) < 0.4).long()
    props = torch.rand(n, length, generator=g, dtype=torch.float64) * 0.8 + 0.2
    return preds, clicks, props


@pytest.mark.parametrize("unit", ["updates", "queries"])
def test_a_debiased_metric_window_and_decay_equal_numpy(unit):
    metric = M.PositionDebiasedNDCG(k=3, window=5 if unit == "queries" else 2, half_life=1.0, window_unit=unit)
    rows = []
    for seed in range(4):
        preds, clicks, props = _clicks(seed)
        metric.update(preds, clicks, propensities=props)
        one = M.PositionDebiasedNDCG(k=3, keep_per_query=True)
        one.update(preds, clicks, propensities=props)
        rows.append(one.compute_per_query()[metric.keys[0]].double().numpy()[:, None])
    got = metric.compute(stderr=True)
    assert_close_dict(
        got, _expected([rows], metric.keys, "window/", window=5 if unit == "queries" else 2, unit=unit), same_keys=False
    )
    assert_close_dict(got, _expected([rows], metric.keys, "decay/", half_life=1.0, unit=unit), same_keys=False)


def _exposure_oracle(preds, k):
    """numpy: each row's top-k items (continuous scores, no ties) counted once."""
    h = np.zeros(preds.shape[1])
    for row in preds.numpy():
        h[np.argsort(-row)[:k]] += 1
    return h


def _exposure_measures(h):
    n = h.size
    total = h.sum()
    c = np.sort(h)
    i = np.arange(1, n + 1)
    p = h[h > 0] / total
    return {
        "coverage@2": (h > 0).mean(),
        "gini@2": ((2 * i - n - 1) * c).sum() / (n * total),
        "entropy@2": -(p * np.log(p)).sum(),
    }


@pytest.mark.parametrize("unit", ["updates", "queries"])
def test_item_exposure_window_and_decay_equal_numpy(unit):
    g = torch.Generator().manual_seed(5)
    batches = [torch.rand(n, 8, generator=g, dtype=torch.float64) for n in (3, 2, 4, 1)]
    metric = M.ItemExposure(8, 2, window=None if unit == "queries" else 2, half_life=1.5, window_unit=unit)
    for preds in batches:
        metric.update(preds)
    got = metric.compute()
    gamma = 2.0 ** (-1 / 1.5)
    if unit == "updates":
        window = sum(_exposure_oracle(p, 2) for p in batches[-2:])
        for key, value in _exposure_measures(window).items():
            assert got["window/" + key].item() == pytest.approx(value, rel=1e-6)
        decayed = sum(gamma ** (len(batches) - 1 - u) * _exposure_oracle(p, 2) for u, p in enumerate(batches))
    else:
        rows = torch.cat(batches)
        decayed = sum(gamma ** (len(rows) - 1 - i) * _exposure_oracle(rows[i : i + 1], 2) for i in range(len(rows)))
    for key, value in _exposure_measures(decayed).items():
        assert got["decay/" + key].item() == pytest.approx(value, rel=1e-6)
    lifetime = _exposure_measures(sum(_exposure_oracle(p, 2) for p in batches))
    for key, value in lifetime.items():
        assert got[key].item() == pytest.approx(value, rel=1e-6)


@pytest.mark.parametrize("unit", ["updates", "queries"])
def test_item_exposure_with_several_cutoffs_windows_and_decays_each_cutoff_as_numpy(unit):
    g = torch.Generator().manual_seed(7)
    batches = [torch.rand(n, 8, generator=g, dtype=torch.float64) for n in (3, 2, 4, 1)]
    metric = M.ItemExposure(8, (1, 2), window=None if unit == "queries" else 2, half_life=1.5, window_unit=unit)
    for preds in batches:
        metric.update(preds)
    got = metric.compute()
    gamma = 2.0 ** (-1 / 1.5)
    for k in (1, 2):

        def at(measures, k=k):
            return {key.replace("@2", f"@{k}"): value for key, value in measures.items()}

        if unit == "updates":
            window = sum(_exposure_oracle(p, k) for p in batches[-2:])
            for key, value in at(_exposure_measures(window)).items():
                assert got["window/" + key].item() == pytest.approx(value, rel=1e-6)
            decayed = sum(gamma ** (len(batches) - 1 - u) * _exposure_oracle(p, k) for u, p in enumerate(batches))
        else:
            rows = torch.cat(batches)
            decayed = sum(gamma ** (len(rows) - 1 - i) * _exposure_oracle(rows[i : i + 1], k) for i in range(len(rows)))
        for key, value in at(_exposure_measures(decayed)).items():
            assert got["decay/" + key].item() == pytest.approx(value, rel=1e-6)
        for key, value in at(_exposure_measures(sum(_exposure_oracle(p, k) for p in batches))).items():
            assert got[key].item() == pytest.approx(value, rel=1e-6)


def test_item_exposure_with_several_cutoffs_and_tied_scores_decays_each_expected_histogram():
    preds = torch.tensor(
        [[0.9, 0.5, 0.5, 0.5, 0.1], [0.1, 0.2, 0.3, 0.4, 0.5], [0.7, 0.7, 0.1, 0.1, 0.1]], dtype=torch.float64
    )
    metric = M.ItemExposure(5, (1, 2), half_life=1.0, window_unit="queries")
    metric.update(preds)
    # the expected histograms of each row (tied items share the slots left), written out per cutoff
    at_1 = [np.array([1, 0, 0, 0, 0]), np.array([0, 0, 0, 0, 1]), np.array([0.5, 0.5, 0, 0, 0])]
    at_2 = [np.array([1, 1 / 3, 1 / 3, 1 / 3, 0]), np.array([0, 0, 0, 1, 1]), np.array([1, 1, 0, 0, 0])]
    weights = (0.25, 0.5, 1.0)  # rows aged 2, 1, 0 with a half-life of one list
    expected = np.concatenate([sum(w * h for w, h in zip(weights, hs)) for hs in (at_1, at_2)])
    assert metric.decay_sums[0].numpy() == pytest.approx(expected)
    assert metric.counts.numpy() == pytest.approx(np.stack([sum(at_1), sum(at_2)]))


def test_item_exposure_refuses_a_windowed_tail_percentage():
    with pytest.raises(ValueError, match="tail_ratio= is not windowed"):
        M.ItemExposure(8, 2, popularity=torch.arange(8.0), tail_ratio=0.5, window=3)


def test_item_exposure_with_tied_scores_decays_per_row_as_its_expected_histogram():
    preds = torch.tensor([[0.9, 0.5, 0.5, 0.5, 0.1], [0.1, 0.2, 0.3, 0.4, 0.5]], dtype=torch.float64)
    metric = M.ItemExposure(5, 2, half_life=1.0, window_unit="queries")
    metric.update(preds)
    first = np.array([1, 1 / 3, 1 / 3, 1 / 3, 0])  # 1 slot for 3 tied items
    second = np.array([0, 0, 0, 1, 1])
    assert metric.decay_sums[0].numpy() == pytest.approx(0.5 * first + second)


# ---------------------------------------------------------------------- forward, merge, no sync
@pytest.mark.parametrize("unit", ["updates", "queries"])
def test_forward_gives_the_window_and_decay_of_update(unit):
    batches = _batches((3, 4, 0, 5, 2))
    a = RankingMetrics(("ndcg@5", "mrr"), window=3, half_life=1.5, window_unit=unit)
    b = RankingMetrics(("ndcg@5", "mrr"), window=3, half_life=1.5, window_unit=unit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for preds, target, mask in batches:
            a.update(preds, target, mask=mask)
            b(preds, target, mask=mask)
    for name in a._window_states:
        assert torch.allclose(getattr(a, name), getattr(b, name)), name
    e = M.ItemExposure(6, 2, window=2, half_life=1.0)
    f = M.ItemExposure(6, 2, window=2, half_life=1.0)
    g = torch.Generator().manual_seed(1)
    for n in (2, 3, 1):
        preds = torch.rand(n, 6, generator=g)
        e.update(preds)
        f(preds)
    for name in e._window_states:
        assert torch.allclose(getattr(e, name), getattr(f, name)), name


def test_merge_state_adds_the_windows_as_a_sync_does():
    batches = _batches((3, 4, 5, 2))
    a = RankingMetrics(("mrr",), window=1, half_life=1.0)
    b = RankingMetrics(("mrr",), window=1, half_life=1.0)
    feed(a, batches[:2])
    feed(b, batches[2:])
    rows = [
        [_per_query(lambda **kw: RankingMetrics(("mrr",), **kw), x, ["mrr"]) for x in part]
        for part in (batches[:2], batches[2:])
    ]
    a.merge_state(b)
    got = a.compute(stderr=True)
    assert_close_dict(got, _expected(rows, ["mrr"], "window/", window=1), same_keys=False)
    assert_close_dict(got, _expected(rows, ["mrr"], "decay/", half_life=1.0), same_keys=False)


@pytest.mark.parametrize("unit", ["updates", "queries"])
def test_update_has_no_host_sync(unit):
    preds, target, mask, _ = random_batch(4, 6, seed=3)
    metric = RankingMetrics(("ndcg@5", "map"), validate_args=False, window=3, half_life=2.0, window_unit=unit)
    exposure = M.ItemExposure(6, 2, validate_args=False, window=None if unit == "queries" else 3, half_life=2.0,
                              window_unit=unit)  # fmt: skip
    with HostSyncGuard():
        metric.update(preds, target, mask=mask)
        metric.update(preds, target, mask=mask)
        exposure.update(preds)


def test_state_stays_window_by_values():
    metric = RankingMetrics(("ndcg@5", "map", "mrr"), window=100, half_life=10.0)
    for _ in range(3):
        preds, target, mask, _ = random_batch(50, 6, seed=1)
        metric.update(preds, target, mask=mask)
    assert metric.window_entries.shape == (100, 3, 3) and metric.decay_sums.shape == (4, 3)
    assert int(metric.window_clock) == 3


# ---------------------------------------------------------------------- bad arguments
def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="window=0 is not valid"):
        M.NDCG(window=0)
    with pytest.raises(TypeError, match="window must be an int"):
        M.NDCG(window=2.5)
    with pytest.raises(ValueError, match="half_life=-1 is not valid"):
        RankingMetrics(half_life=-1)
    with pytest.raises(ValueError, match="window_unit='lists' is not valid"):
        M.MRR(window=3, window_unit="lists")
    with pytest.raises(ValueError, match="whole_queries=True"):
        RankingMetrics(window=3, input_format="flat")
    metric = RankingMetrics(window=3)
    with pytest.raises(ValueError, match="whole_queries=True"):
        metric.update(torch.rand(4), torch.ones(4), indexes=torch.tensor([0, 0, 1, 1]))
    with pytest.raises(ValueError, match="window of updates only"):
        M.ItemExposure(5, 2, window=3, window_unit="queries")
    flat = RankingMetrics(("mrr",), window=1, whole_queries=True)
    flat.update(torch.tensor([0.9, 0.1, 0.5]), torch.tensor([0, 1, 1]), indexes=torch.tensor([0, 0, 1]))
    flat.update(torch.tensor([0.9, 0.1]), torch.tensor([1, 0]), indexes=torch.tensor([2, 2]))
    assert flat.compute()["window/mrr"].item() == 1.0


# ---------------------------------------------------------------------- checkpoints
def test_a_window_survives_state_dict_and_goes_on_identically():
    batches = _batches((3, 4, 5, 2, 6))
    a = RankingMetrics(("ndcg@5", "mrr"), window=2, half_life=1.0, window_unit="queries")
    a.persistent(True)
    feed(a, batches[:3])
    b = RankingMetrics(("ndcg@5", "mrr"), window=2, half_life=1.0, window_unit="queries")
    b.persistent(True)
    b.load_state_dict(torch.load(_saved(a.state_dict()), weights_only=True))
    feed(a, batches[3:])
    feed(b, batches[3:])
    want = {k: v.item() for k, v in a.compute(stderr=True).items()}
    assert_close_dict(b.compute(stderr=True), want, same_keys=False)


def _saved(state):
    import io

    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return buffer


def test_an_old_checkpoint_without_window_states_loads_with_an_empty_window():
    batches = _batches((3, 4))
    old = M.NDCG(k=5)  # as before windows: the same metric, no window states, its metadata
    old.persistent(True)
    feed(old, batches)
    state = torch.load(_saved(old.state_dict()), weights_only=True)
    new = M.NDCG(k=5, window=3, half_life=2.0)
    new.persistent(True)
    new.load_state_dict(state)
    with pytest.warns(UserWarning, match="window/ndcg@5"):
        got = new.compute()
    assert got["ndcg@5"].item() == pytest.approx(old.compute().item())
    assert math.isnan(got["window/ndcg@5"].item()) and math.isnan(got["decay/ndcg@5"].item())
    feed(new, batches[:1])  # the window fills from here
    assert not math.isnan(new.compute()["window/ndcg@5"].item())
    plain = {k: v for k, v in state.items()}  # a plain dict (no metadata): by shape
    again = M.NDCG(k=5, window=3)
    again.persistent(True)
    again.load_state_dict(plain)
    # exposure too
    e = M.ItemExposure(6, 2)
    e.persistent(True)
    e.update(torch.rand(3, 6))
    f = M.ItemExposure(6, 2, window=2)
    f.persistent(True)
    f.load_state_dict(e.state_dict())
    assert torch.equal(f.counts, e.counts) and int(f.window_clock) == 0


def test_a_checkpoint_of_another_window_is_refused():
    a = M.MRR(window=3)
    a.persistent(True)
    a.update(torch.tensor([[0.9, 0.1]]), torch.tensor([[1, 0]]))
    b = M.MRR(window=4)
    b.persistent(True)
    with pytest.raises(ValueError, match="window: 3 .state. vs 4"):
        b.load_state_dict(a.state_dict())
    plain = M.MRR()
    plain.persistent(True)
    with pytest.raises(ValueError, match="differently configured"):
        plain.load_state_dict(a.state_dict())
    with pytest.raises(ValueError, match="another window"):
        b.merge_state({k: v for k, v in a.metric_state.items() if not k.startswith("_config_")})


# ---------------------------------------------------------------------- DDP (3 gloo processes)
WORLD = 3
UPDATES = (4, 1, 2)  # uneven update counts per rank


def _rank_batches(rank):
    return _batches(tuple(2 + (u + rank) % 3 for u in range(UPDATES[rank])), seed=100 * rank)


def _rank_clicks(rank):
    return [_clicks(1000 * rank + u) for u in range(UPDATES[rank])]


def _rank_exposure(rank):
    g = torch.Generator().manual_seed(rank)
    return [torch.rand(2 + u, 7, generator=g, dtype=torch.float64) for u in range(UPDATES[rank])]


def _ddp_metrics():
    return {
        "rm_w": RankingMetrics(METRICS, empty_target_action="skip", window=2),
        "rm_q": RankingMetrics(METRICS, empty_target_action="skip", window=5, half_life=2.0, window_unit="queries"),
        "ndcg": M.NDCG(k=5, window=2, half_life=1.0),
        "debiased": M.PositionDebiasedNDCG(k=3, window=2, half_life=1.0),
        "exposure": M.ItemExposure(7, 2, window=2, half_life=1.0),
    }


def _ddp_worker(rank, world, rdv, out):
    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=world)
    metrics = _ddp_metrics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for batch in _rank_batches(rank):
            for name in ("rm_w", "rm_q", "ndcg"):
                feed(metrics[name], [batch])
        for preds, clicks, props in _rank_clicks(rank):
            metrics["debiased"].update(preds, clicks, propensities=props)
        for preds in _rank_exposure(rank):
            metrics["exposure"].update(preds)
        results = {}
        for name, metric in metrics.items():
            value = metric.compute() if name == "exposure" else metric.compute(stderr=True)
            results[name] = {k: v.item() for k, v in value.items()}
    torch.save(results, f"{out}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


def test_ddp_three_gloo_processes_of_uneven_update_counts_equal_numpy(tmp_path):
    out = tmp_path / "result"
    spawn(_ddp_worker, (WORLD, str(tmp_path / "rdv"), str(out)), WORLD)
    metrics = _ddp_metrics()
    want = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = {
            name: [[_per_query(make, b, metrics[name].keys) for b in _rank_batches(r)] for r in range(WORLD)]
            for name, make in (
                ("rm_w", lambda **kw: RankingMetrics(METRICS, empty_target_action="skip", **kw)),
                ("ndcg", lambda **kw: M.NDCG(k=5, **kw)),
            )
        }
    rows["rm_q"] = rows["rm_w"]
    want["rm_w"] = _expected(rows["rm_w"], metrics["rm_w"].keys, "window/", window=2)
    want["rm_q"] = {
        **_expected(rows["rm_q"], metrics["rm_q"].keys, "window/", window=5, unit="queries"),
        **_expected(rows["rm_q"], metrics["rm_q"].keys, "decay/", half_life=2.0, unit="queries"),
    }
    want["ndcg"] = {
        **_expected(rows["ndcg"], metrics["ndcg"].keys, "window/", window=2),
        **_expected(rows["ndcg"], metrics["ndcg"].keys, "decay/", half_life=1.0),
    }
    clicks_rows = []
    for r in range(WORLD):
        per = []
        for preds, clicks, props in _rank_clicks(r):
            one = M.PositionDebiasedNDCG(k=3, keep_per_query=True)
            one.update(preds, clicks, propensities=props)
            per.append(one.compute_per_query()[metrics["debiased"].keys[0]].double().numpy()[:, None])
        clicks_rows.append(per)
    want["debiased"] = {
        **_expected(clicks_rows, metrics["debiased"].keys, "window/", window=2),
        **_expected(clicks_rows, metrics["debiased"].keys, "decay/", half_life=1.0),
    }
    window = sum(_exposure_oracle(p, 2) for r in range(WORLD) for p in _rank_exposure(r)[-2:])
    decayed = sum(
        2.0 ** (-(UPDATES[r] - 1 - u)) * _exposure_oracle(p, 2)
        for r in range(WORLD)
        for u, p in enumerate(_rank_exposure(r))
    )
    want["exposure"] = {
        **{"window/" + k: v for k, v in _exposure_measures(window).items()},
        **{"decay/" + k: v for k, v in _exposure_measures(decayed).items()},
    }
    for rank in range(WORLD):
        got = torch.load(f"{out}.{rank}")
        for name, values in want.items():
            for key, value in values.items():
                g = got[name][key]
                if math.isnan(value):
                    assert math.isnan(g), (rank, name, key)
                else:
                    assert g == pytest.approx(value, rel=1e-5, abs=1e-6), (rank, name, key)


# ---------------------------------------------------------------------- compute groups, dtypes, pickle
def test_metrics_of_other_half_lives_never_share_a_compute_group():
    from torchmetrics import MetricCollection

    collection = MetricCollection({"a": M.NDCG(k=5, half_life=1.0), "b": M.NDCG(k=5, half_life=4.0)})
    batches = _batches((3, 4))
    for preds, target, mask in batches:
        collection.update(preds, target, mask=mask)
    out = collection.compute()
    assert out["a_decay/ndcg@5"].item() != pytest.approx(out["b_decay/ndcg@5"].item())
    rows = [_per_query(lambda **kw: M.NDCG(k=5, **kw), b, ["ndcg@5"]) for b in batches]
    for name, h in (("a", 1.0), ("b", 4.0)):
        want = _expected([rows], ["ndcg@5"], "decay/", half_life=h)["decay/ndcg@5"]
        assert out[f"{name}_decay/ndcg@5"].item() == pytest.approx(want, rel=1e-5)


def test_half_precision_keeps_the_window_states_in_float64_and_pickle_round_trips():
    import pickle

    batches = _batches((3, 4, 2))
    metric = RankingMetrics(("ndcg@5", "mrr"), window=2, half_life=1.0, window_unit="queries")
    metric.set_dtype(torch.half)
    feed(metric, batches)
    for name in (*metric._window_states, "_decay_log", "_decay_factor"):
        assert getattr(metric, name).dtype in (torch.float64, torch.int64), name
    reference = RankingMetrics(("ndcg@5", "mrr"), window=2, half_life=1.0, window_unit="queries")
    feed(reference, batches)
    want = {k: v.item() for k, v in reference.compute(stderr=True).items()}
    got = metric.compute(stderr=True)
    assert all(v.dtype == torch.half for v in got.values())
    for key, value in want.items():
        assert got[key].item() == pytest.approx(value, rel=2e-3, abs=1e-3), key
    copy = pickle.loads(pickle.dumps(reference))
    feed(copy, batches[:1])
    feed(reference, batches[:1])
    assert_close_dict(
        copy.compute(stderr=True), {k: v.item() for k, v in reference.compute(stderr=True).items()}, same_keys=False
    )


@pytest.mark.parametrize("unit", ["updates", "queries"])
def test_a_pickle_from_before_the_window_flags_keeps_filling_its_window(unit):
    """A metric pickled when ``_windowed`` / ``_per_query`` were properties (not in its ``__dict__``)
    unpickles with them set from its window states, and goes on exactly as the metric it was."""
    import pickle

    batches = _batches((4, 3, 5))
    metric = RankingMetrics(("ndcg@5", "mrr"), window=2, half_life=1.0, window_unit=unit)
    feed(metric, batches[:1])
    state = metric.__getstate__()
    del state["_windowed"], state["_per_query"]  # as an older version pickled it
    old = RankingMetrics.__new__(RankingMetrics)
    old.__setstate__(state)
    old = pickle.loads(pickle.dumps(old))
    assert old._windowed and old._per_query == (unit == "queries")
    feed(old, batches[1:])
    feed(metric, batches[1:])
    want = {k: v.item() for k, v in metric.compute(stderr=True).items()}
    assert_close_dict(old.compute(stderr=True), want, same_keys=False)
