"""The streaming PositionDebiasedNDCG / PositionDebiasedDCG classes: the spec's worked examples
(shared/debias.md section 5) streamed through the classes, streaming == the functional result on the
whole batch (1e-9, float64), the empty-list policies, torchmetrics' Metric contract (MetricCollection,
forward, reset, state_dict, clone, merge_state, device and dtype moves), validation, and the
multi-process sync (gloo, 2 processes, uneven shards and a rank without data)."""

from __future__ import annotations

import copy
import math
import warnings

import pytest
import torch
import torch.distributed as dist
from torchmetrics import MetricCollection

from tests.distributed_helpers import counting_collectives, spawn
from torch_rankeval import PositionDebiasedDCG, PositionDebiasedNDCG
from torch_rankeval import functional as F

L1, L2, L3, L4 = 1.0, 1 / math.log2(3), 0.5, 1 / math.log2(5)
TOL = 1e-9

# Example 1 of the spec: items listed in logged order, PBM eta = 1.
PREDS = [[0.1, 0.4, 0.9, 0.2]]
CLICKS = [[1, 0, 1, 0]]
POS = [[1, 2, 3, 4]]


def t(x, dtype=None):
    return torch.tensor(x, dtype=dtype)


def f64(metric):
    """float64 results (the sums are float64 anyway; compute returns the metric dtype)."""
    return metric.set_dtype(torch.float64)


def click_batch(n=40, length=9, seed=0):
    """Random lists: a permutation of logged positions, PBM(eta=1) clicks (many lists without a
    click), ragged lengths via the mask, and garbage at padding."""
    g = torch.Generator().manual_seed(seed)
    preds = torch.rand(n, length, generator=g, dtype=torch.float64)
    positions = torch.argsort(torch.rand(n, length, generator=g), dim=1) + 1
    clicks = (torch.rand(n, length, generator=g) < 0.6 / positions).long()
    lengths = torch.randint(1, length + 1, (n,), generator=g)
    mask = torch.arange(length) < lengths[:, None]
    clicks = torch.where(mask, clicks, torch.full_like(clicks, 7))  # never read
    return preds, clicks, positions, mask


CHUNKS = [(0, 5), (5, 6), (6, 23), (23, 40)]


# ----------------------------------------------------------------------------- worked examples
def test_example_1_streamed_one_list_per_update():
    ndcg = f64(PositionDebiasedNDCG(k=[2, 4], eta=1.0))
    dcg = f64(PositionDebiasedDCG(k=[2, 4], eta=1.0))
    naive = f64(PositionDebiasedNDCG(k=4, eta=0.0))
    naive_dcg = f64(PositionDebiasedDCG(k=4, eta=0.0))
    for m in (ndcg, dcg, naive, naive_dcg):
        m.update(t(PREDS, torch.float64), t(CLICKS), logged_positions=t(POS))
    # rho = [1, 1/2, 1/3, 1/4] -> g = [1, 0, 3, 0]; gains by new rank [3, 0, 0, 1]
    assert ndcg.compute().tolist() == pytest.approx([3 / (3 + L2), (3 + L4) / (3 + L2)], abs=TOL)
    assert ndcg.compute().tolist() == pytest.approx([0.826234657129, 0.944847956560], abs=TOL)
    assert dcg.compute().tolist() == pytest.approx([3.0, 3.430676558073], abs=TOL)
    assert naive.compute().item() == pytest.approx(0.877215315338, abs=TOL)
    assert naive_dcg.compute().item() == pytest.approx(1.430676558073, abs=TOL)
    assert ndcg.compute().dtype == torch.float64 and naive.compute().shape == ()


def test_the_three_propensity_sources_and_zero_propensity_on_unclicked_items():
    preds, clicks = t(PREDS, torch.float64), t(CLICKS)
    by_eta = f64(PositionDebiasedNDCG(eta=1.0))
    by_table = f64(PositionDebiasedNDCG(propensity_table=t([1, 1 / 2, 1 / 3, 1 / 4, 1 / 5], torch.float64)))
    by_item = f64(PositionDebiasedNDCG())
    zero_unclicked = f64(PositionDebiasedNDCG())
    by_eta.update(preds, clicks, logged_positions=t(POS))
    by_table.update(preds, clicks, logged_positions=t(POS))
    by_item.update(preds, clicks, propensities=t([[1, 1 / 2, 1 / 3, 1 / 4]], torch.float64))
    zero_unclicked.update(preds, clicks, propensities=t([[1, 0, 1 / 3, 0]], torch.float64))
    for m in (by_eta, by_table, by_item, zero_unclicked):
        assert m.compute().item() == pytest.approx(0.944847956560, abs=TOL)


def test_example_2_clipping_and_example_4_single_click():
    clipped, clipped_dcg = (
        f64(PositionDebiasedNDCG(k=4, eta=1.0, clip=0.5)),
        f64(PositionDebiasedDCG(k=4, eta=1.0, clip=0.5)),
    )
    for m in (clipped, clipped_dcg):
        m.update(t(PREDS, torch.float64), t(CLICKS), logged_positions=t(POS))
    assert clipped.compute().item() == pytest.approx(0.923885008626, abs=TOL)  # g = [1, 0, 2, 0]
    assert clipped_dcg.compute().item() == pytest.approx(2.430676558073, abs=TOL)
    single, single_dcg = f64(PositionDebiasedNDCG(k=4, eta=1.0)), f64(PositionDebiasedDCG(k=4, eta=1.0))
    for m in (single, single_dcg):
        m.update(t(PREDS, torch.float64), t([[0, 1, 0, 0]]), logged_positions=t(POS))
    assert single.compute().item() == pytest.approx(L2, abs=TOL)  # the propensity cancels
    assert single_dcg.compute().item() == pytest.approx(1.261859507143, abs=TOL)


EX5_PREDS = [[0.1, 0.4, 0.9, 0.2], [0.3, 0.2, 0.1, 0.0]]
EX5_CLICKS = [[1, 0, 1, 0], [0, 0, 0, 0]]
EX5_POS = [[1, 2, 3, 4], [1, 2, 3, 1]]
EX5_MASK = [[True, True, True, True], [True, True, True, False]]


@pytest.mark.parametrize("action,want", [("skip", 0.944847956560), ("neg", 0.472423978280), ("pos", 0.972423978280)])
def test_example_5_policies_over_two_updates(action, want):
    metric = f64(PositionDebiasedNDCG(eta=1.0, empty_target_action=action, keep_per_query=True))
    for i in range(2):  # the clicked list, then the list without clicks (padded)
        metric.update(
            t(EX5_PREDS[i : i + 1], torch.float64),
            t(EX5_CLICKS[i : i + 1]),
            logged_positions=t(EX5_POS[i : i + 1]),
            mask=t(EX5_MASK[i : i + 1]),
        )
    assert metric.compute().item() == pytest.approx(want, abs=TOL)
    assert metric.counts.tolist() == [1 if action == "skip" else 2]
    per_list = metric.compute_per_query()
    assert per_list["query_id"].tolist() == [0, 1]
    assert per_list["position_debiased_ndcg"][0].item() == pytest.approx(0.944847956560, abs=TOL)
    second = per_list["position_debiased_ndcg"][1].item()
    assert math.isnan(second) if action == "skip" else second == {"neg": 0.0, "pos": 1.0}[action]


def test_example_5_error_policy_and_dcg():
    metric = PositionDebiasedNDCG(eta=1.0, empty_target_action="error")
    metric.update(t(EX5_PREDS[:1]), t(EX5_CLICKS[:1]), logged_positions=t(EX5_POS[:1]))
    with pytest.raises(ValueError, match="1 list\\(s\\) have no click.*empty_target_action='error'"):
        metric.update(t(EX5_PREDS), t(EX5_CLICKS), logged_positions=t(EX5_POS), mask=t(EX5_MASK))
    dcg = f64(PositionDebiasedDCG(eta=1.0))
    dcg.update(t(EX5_PREDS, torch.float64), t(EX5_CLICKS), logged_positions=t(EX5_POS), mask=t(EX5_MASK))
    assert dcg.compute().item() == pytest.approx(1.715338279037, abs=TOL)  # the no-click list counts as 0
    assert dcg.counts.tolist() == [2]


def test_example_6_a_padded_item_is_never_ranked():
    metric = f64(PositionDebiasedNDCG(k=3, eta=1.0))
    metric.update(
        t([[0.1, 0.4, 0.9, 99.0]], torch.float64),
        t([[1, 0, 1, 1]]),
        logged_positions=t(POS),
        mask=t([[True, True, True, False]]),
    )
    assert metric.compute().item() == pytest.approx((3 + L3) / (3 + L2), abs=TOL)
    assert metric.compute().item() == pytest.approx(0.963940433317, abs=TOL)


def test_example_7_affine_tables_at_construction_or_per_item_in_update():
    alpha, beta = t([0.8, 0.5, 0.3], torch.float64), t([0.1, 0.08, 0.05], torch.float64)
    preds, clicks = t([[0.2, 0.9, 0.5]], torch.float64), t([[1, 0, 1]])
    tables = f64(PositionDebiasedDCG(k=3, affine=(alpha, beta)))
    tables.update(preds, clicks, logged_positions=t([[1, 2, 3]]))
    per_item = f64(PositionDebiasedDCG(k=3))
    per_item.update(preds, clicks, affine=(alpha[None], beta[None]))
    # g = (c - beta) / alpha = [1.125, -0.16, 3.1667]; new order 1, 2, 0
    for m in (tables, per_item):
        assert m.compute().item() == pytest.approx(1.125 * L3 - 0.16 * L1 + (0.95 / 0.3) * L2, abs=TOL)
        assert m.compute().item() == pytest.approx(2.400444219643, abs=TOL)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-6), (torch.float16, 2e-3)])
def test_lower_precision_inputs(dtype, tol):
    metric = PositionDebiasedNDCG(k=[2, 4], eta=1.0)  # default: float32 results
    metric.update(t(PREDS, dtype), t(CLICKS), logged_positions=t(POS))
    assert metric.compute().dtype == torch.float32
    assert metric.compute().tolist() == pytest.approx([0.826234657129, 0.944847956560], abs=tol)


# ----------------------------------------------------------------------------- streaming == functional
SOURCES = {
    "eta": (dict(eta=1.0), lambda pos: dict(logged_positions=pos)),
    "eta-clip": (dict(eta=0.7, clip=0.3), lambda pos: dict(logged_positions=pos)),
    "table": (
        dict(propensity_table=torch.linspace(1.0, 0.2, 9, dtype=torch.float64)),
        lambda pos: dict(logged_positions=pos),
    ),
    "propensities": ({}, lambda pos: dict(propensities=1 / pos.double().sqrt())),
}


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("action", ["skip", "neg", "pos"])
def test_streaming_equals_the_functional_result_on_the_whole_batch(source, action):
    preds, clicks, positions, mask = click_batch(seed=3)
    static, per_item = SOURCES[source]
    ks = [1, 3, 20]  # 20: beyond the list, i.e. the whole list
    ndcg = f64(PositionDebiasedNDCG(k=ks, empty_target_action=action, **static))
    dcg = f64(PositionDebiasedDCG(k=ks, **static))
    for a, b in CHUNKS:
        kw = {name: v[a:b] for name, v in per_item(positions).items()}
        ndcg.update(preds[a:b], clicks[a:b], mask=mask[a:b], **kw)
        dcg.update(preds[a:b], clicks[a:b], mask=mask[a:b], **kw)
    kw = {**per_item(positions), **{n: v for n, v in static.items()}}
    want = F.position_debiased_ndcg(preds, clicks, ks, mask=mask, empty_target_action=action, **kw)
    want_dcg = F.position_debiased_dcg(preds, clicks, ks, mask=mask, **kw)
    assert ndcg.compute().tolist() == pytest.approx(want.tolist(), abs=TOL)
    assert dcg.compute().tolist() == pytest.approx(want_dcg.tolist(), abs=TOL)
    skipped = int((clicks * mask).sum(1).eq(0).sum())
    assert 0 < skipped < 40  # the batch exercises the policy
    assert ndcg.counts.tolist() == [40 - skipped if action == "skip" else 40] * 3


def test_aggregated_gains_through_the_class():
    """The recommended use of the nDCG: sum c / rho per (query, document) over sessions first."""
    q = t([0, 0, 0, 0, 0, 0, 1, 1, 1])
    d = t([0, 1, 2, 0, 1, 2, 0, 1, 2])
    pos = t([1, 2, 3, 1, 2, 3, 1, 2, 3])
    clicks = t([1, 0, 1, 0, 1, 0, 0, 0, 1])
    qu, du, gains = F.aggregate_ips_gains(q, d, clicks, logged_positions=pos, eta=1.0)
    dense = torch.zeros(2, 3, dtype=torch.float64).index_put_((qu, du), gains.double())  # [[1, 2, 3], [0, 0, 3]]
    scores = t([[0.2, 0.9, 0.5], [0.3, 0.1, 0.8]], torch.float64)
    metric = f64(PositionDebiasedNDCG())
    metric.update(scores, dense, propensities=torch.ones_like(dense))
    first = (2 + 3 * L2 + 1 * L3) / (3 + 2 * L2 + 1 * L3)  # new order 1, 2, 0
    assert metric.compute().item() == pytest.approx((first + 1.0) / 2, abs=TOL)


# ----------------------------------------------------------------------------- empty results
BEFORE_UPDATE = "ignore:The ``compute`` method of metric"  # torchmetrics' own notice, not ours


@pytest.mark.filterwarnings(BEFORE_UPDATE)
def test_every_list_skipped_is_nan_with_a_warning():
    metric = PositionDebiasedNDCG(k=[1, 3], eta=1.0)
    metric.update(t(EX5_PREDS), t([[0, 0, 0, 0], [0, 0, 0, 0]]), logged_positions=t(EX5_POS))
    with pytest.warns(UserWarning, match="no query was counted.*aggregate clicks per query"):
        value = metric.compute()
    assert value.shape == (2,) and bool(torch.isnan(value).all())
    with pytest.warns(UserWarning, match="returning NaN"):
        assert torch.isnan(PositionDebiasedDCG(eta=1.0).compute())  # nothing updated
    # a counted list: no warning from compute
    metric.update(t(PREDS), t(CLICKS), logged_positions=t(POS))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert metric.compute().tolist() == pytest.approx([1.0, 3 / (3 + L2)], abs=1e-6)  # g = 3 ranked first


# ----------------------------------------------------------------------------- Metric contract
def test_metric_collection_compares_naive_and_debiased():
    coll = MetricCollection(
        {
            "ips": PositionDebiasedNDCG(k=4, eta=1.0),
            "naive": PositionDebiasedNDCG(k=4, eta=0.0),
            "ips_dcg": PositionDebiasedDCG(k=4, eta=1.0),
            "table": PositionDebiasedNDCG(k=4, propensity_table=t([1, 1 / 2, 1 / 3, 1 / 4])),
        }
    )
    # first batch without clicks: every metric holds sums 0, counts 0 (DCG: counts 1); they must
    # not be merged into one compute group
    coll.update(t([[0.3, 0.2, 0.1, 0.0]]), t([[0, 0, 0, 0]]), logged_positions=t(POS))
    coll.update(t(PREDS), t(CLICKS), logged_positions=t(POS))
    out = {name: v.item() for name, v in coll.compute().items()}
    assert out["ips"] == pytest.approx(0.944847956560, abs=1e-6)
    assert out["naive"] == pytest.approx(0.877215315338, abs=1e-6)
    assert out["ips_dcg"] == pytest.approx(3.430676558073 / 2, abs=1e-6)
    assert out["table"] == pytest.approx(0.944847956560, abs=1e-6)
    # ...while identically configured metrics still share one
    same = MetricCollection({"a": PositionDebiasedNDCG(k=4, eta=1.0), "b": PositionDebiasedNDCG(k=4, eta=1.0)})
    same.update(t(PREDS), t(CLICKS), logged_positions=t(POS))
    assert list(same.compute_groups.values()) == [["a", "b"]]
    assert same.compute()["b"].item() == pytest.approx(0.944847956560, abs=1e-6)


@pytest.mark.filterwarnings(BEFORE_UPDATE)
def test_forward_reset_state_dict_clone_and_merge_state():
    preds, clicks, positions, mask = click_batch(seed=5)
    make = lambda: f64(PositionDebiasedNDCG(k=[3, 5], eta=1.0))  # noqa: E731
    whole = make()
    whole.update(preds, clicks, logged_positions=positions, mask=mask)
    # forward: the batch value, and accumulation
    fwd = make()
    batch_value = fwd(preds[:20], clicks[:20], logged_positions=positions[:20], mask=mask[:20])
    want_batch = F.position_debiased_ndcg(
        preds[:20], clicks[:20], [3, 5], logged_positions=positions[:20], eta=1.0, mask=mask[:20]
    )
    assert batch_value.tolist() == pytest.approx(want_batch.tolist(), abs=TOL)
    fwd(preds[20:], clicks[20:], logged_positions=positions[20:], mask=mask[20:])
    assert fwd.compute().tolist() == pytest.approx(whole.compute().tolist(), abs=TOL)
    # state_dict round trip with persistent(True), then clone and continue
    a = make()
    a.persistent(True)
    a.update(preds[:20], clicks[:20], logged_positions=positions[:20], mask=mask[:20])
    state = a.state_dict()
    assert {"sums", "counts"} <= set(state) and not any("propensity" in key or "affine" in key for key in state)
    b = make()
    b.persistent(True)
    b.load_state_dict(state)
    c = b.clone()
    c.update(preds[20:], clicks[20:], logged_positions=positions[20:], mask=mask[20:])
    assert c.compute().tolist() == pytest.approx(whole.compute().tolist(), abs=TOL)
    # merge_state of two halves
    d = make()
    d.update(preds[20:], clicks[20:], logged_positions=positions[20:], mask=mask[20:])
    b.merge_state(d)
    assert b.compute().tolist() == pytest.approx(whole.compute().tolist(), abs=TOL)
    # reset
    b.reset()
    assert b.sums.tolist() == [0.0, 0.0] and b.counts.tolist() == [0, 0]


def test_propensity_table_is_a_non_persistent_buffer_that_follows_the_device_and_keeps_its_dtype():
    table = t([1.0, 0.5, 0.25], torch.float32)
    metric = PositionDebiasedNDCG(propensity_table=table, affine=None)
    assert metric._propensity_table is not table and torch.equal(metric._propensity_table, table)
    metric.persistent(True)
    assert "_propensity_table" not in metric.state_dict()
    metric.set_dtype(torch.float16)
    assert metric._propensity_table.dtype == torch.float32 and metric.sums.dtype == torch.float64
    moved = copy.deepcopy(metric).to("meta")
    assert moved._propensity_table.device.type == "meta" and moved.sums.device.type == "meta"
    alpha = PositionDebiasedDCG(affine=(t([0.8, 0.5]), t([0.1, 0.1]))).to("meta")
    assert alpha._affine_alpha.device.type == "meta" and alpha._affine_beta.device.type == "meta"
    with pytest.raises(ValueError, match="metric.to"):
        moved.update(t(PREDS), t(CLICKS), logged_positions=t(POS))


def test_update_compiles_fullgraph_without_validation():
    torch._dynamo.reset()
    preds, clicks, positions, mask = click_batch(n=12, seed=9)
    preds = preds.float()
    metric = PositionDebiasedNDCG(k=[3, 5], propensity_table=torch.linspace(1.0, 0.2, 9), validate_args=False)
    compiled = torch.compile(metric.update, fullgraph=True, backend="inductor")
    compiled(preds, clicks, logged_positions=positions, mask=mask)
    reference = PositionDebiasedNDCG(k=[3, 5], propensity_table=torch.linspace(1.0, 0.2, 9))
    reference.update(preds, clicks, logged_positions=positions, mask=mask)
    torch.testing.assert_close(metric.compute(), reference.compute())
    assert metric.counts.tolist() == reference.counts.tolist()


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: PositionDebiasedNDCG(eta=-1.0), "eta must be finite and >= 0"),
        (lambda: PositionDebiasedNDCG(eta=float("nan")), "eta must be finite"),
        (
            lambda: PositionDebiasedNDCG(eta=1.0, propensity_table=t([1.0, 0.5])),
            "at most one of eta=, propensity_table=",
        ),
        (lambda: PositionDebiasedNDCG(propensity_table=t([1.0, 2.0])), "pass 1/weights"),
        (lambda: PositionDebiasedNDCG(propensity_table=t([1.0, float("nan")])), "propensity_table must be finite"),
        (lambda: PositionDebiasedNDCG(propensity_table=t([[1.0, 0.5]])), "non-empty 1-D"),
        (lambda: PositionDebiasedNDCG(affine=(t([0.8, 0.0]), t([0.1, 0.1]))), "alpha must be in"),
        (lambda: PositionDebiasedNDCG(eta=1.0, clip=0.0), "clip must be a number in \\(0, 1\\]"),
        (lambda: PositionDebiasedDCG(clip=1.5), "clip must be a number in \\(0, 1\\]"),
        (lambda: PositionDebiasedNDCG(k=0, eta=1.0), "positive int"),
        (lambda: PositionDebiasedNDCG(eta=1.0, normalize="max"), "normalize='max' is not valid"),
        (lambda: PositionDebiasedNDCG(eta=1.0, empty_target_action="drop"), "empty_target_action='drop' is not valid"),
        (lambda: PositionDebiasedNDCG(eta=1.0, ties="random"), "ties='random' is not valid"),
    ],
)
def test_bad_construction_raises_a_value_error_naming_the_argument(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    "make,call,exc,match",
    [
        (
            lambda: PositionDebiasedNDCG(eta=1.0),
            lambda m: m.update(t(PREDS), t(CLICKS)),
            ValueError,
            "created with eta=, so update takes logged_positions=",
        ),
        (
            lambda: PositionDebiasedNDCG(eta=1.0),
            lambda m: m.update(t(PREDS), t(CLICKS), propensities=t([[1.0, 0.5, 0.3, 0.2]])),
            ValueError,
            "created with eta=",
        ),
        (
            lambda: PositionDebiasedNDCG(),
            lambda m: m.update(t(PREDS), t(CLICKS), logged_positions=t(POS)),
            ValueError,
            "needs a position model",
        ),
        (
            lambda: PositionDebiasedNDCG(),
            lambda m: m.update(t(PREDS), t(CLICKS)),
            ValueError,
            "pass per-item propensities=",
        ),
        (
            lambda: PositionDebiasedNDCG(propensity_table=t([1.0, 0.5, 0.3])),
            lambda m: m.update(t(PREDS), t(CLICKS), logged_positions=t(POS)),
            ValueError,
            "beyond propensity_table",
        ),
        (
            lambda: PositionDebiasedNDCG(eta=1.0),
            lambda m: m.update(t(PREDS), t(CLICKS), logged_positions=t([[0, 1, 2, 3]])),
            ValueError,
            "1-based",
        ),
        (
            lambda: PositionDebiasedNDCG(),
            lambda m: m.update(t(PREDS), t(CLICKS), propensities=t([[1.0, 0.5, 0.0, 0.25]])),
            ValueError,
            "0 for a clicked item",
        ),
        (
            lambda: PositionDebiasedNDCG(),
            lambda m: m.update(t(PREDS), t(CLICKS), propensities=t([[1.0, 0.5, 3.0, 0.25]])),
            ValueError,
            "pass 1/weights",
        ),
        (
            lambda: PositionDebiasedNDCG(),
            lambda m: m.update(t(PREDS), t(CLICKS), propensities=t([[1.0, float("nan"), 0.3, 0.25]])),
            ValueError,
            "finite probabilities",
        ),
        (
            lambda: PositionDebiasedNDCG(eta=1.0),
            lambda m: m.update(t(PREDS), t([[1, -1, 0, 0]]), logged_positions=t(POS)),
            ValueError,
            "clicks must be finite and >= 0",
        ),
        (
            lambda: PositionDebiasedNDCG(eta=1.0),
            lambda m: m.update(t([[0.1, float("nan"), 0.3, 0.2]]), t(CLICKS), logged_positions=t(POS)),
            ValueError,
            "NaN",
        ),
        (
            lambda: PositionDebiasedNDCG(eta=1.0),
            lambda m: m.update(t(PREDS), t([[1, 0, 1]]), logged_positions=t(POS)),
            ValueError,
            "same shape",
        ),
        (
            lambda: PositionDebiasedNDCG(eta=1.0),
            lambda m: m.update(t(PREDS), t(CLICKS), logged_positions=t(POS), indexes=t([1, 2])),
            ValueError,
            "one id per list",
        ),
        (
            lambda: PositionDebiasedNDCG(eta=1.0),
            lambda m: m.update(t(PREDS), t(CLICKS), logged_positions=t(POS), indexes=t([1.0])),
            TypeError,
            "indexes must be an integer",
        ),
        (
            lambda: PositionDebiasedNDCG(eta=1.0),
            lambda m: m.update(t([[1, 2, 3, 4]]), t(CLICKS), logged_positions=t(POS)),
            TypeError,
            "preds must be a floating",
        ),
    ],
)
def test_bad_update_names_the_argument(make, call, exc, match):
    metric = make()
    with pytest.raises(exc, match=match):
        call(metric)
    assert metric.counts.tolist() == [0]  # nothing was added


def test_explicit_list_ids_for_per_query_values():
    preds, clicks, positions, mask = click_batch(n=6, seed=4)
    metric = f64(PositionDebiasedDCG(k=3, eta=1.0, keep_per_query=True))
    metric.update(preds[:4], clicks[:4], logged_positions=positions[:4], mask=mask[:4], indexes=t([40, 10, 30, 20]))
    metric.update(preds[4:], clicks[4:], logged_positions=positions[4:], mask=mask[4:], indexes=t([5, 50]))
    per = metric.compute_per_query()
    want = F.position_debiased_dcg(preds, clicks, 3, logged_positions=positions, eta=1.0, mask=mask, reduction="none")
    order = [4, 1, 3, 2, 0, 5]  # ids 5, 10, 20, 30, 40, 50
    assert per["query_id"].tolist() == [5, 10, 20, 30, 40, 50]
    assert per["position_debiased_dcg@3"].tolist() == pytest.approx(want[order].tolist(), abs=TOL)


# ----------------------------------------------------------------------------- distributed
def _dist_worker(rank, world, rdv, out):
    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=world)
    preds, clicks, positions, mask = click_batch(seed=11)
    owner = [0, 0, 0, 1]  # uneven: rank 0 gets three updates, rank 1 one
    results = {}
    ndcg = f64(PositionDebiasedNDCG(k=[3, 20], eta=1.0))
    dcg = f64(PositionDebiasedDCG(k=5, propensity_table=torch.linspace(1.0, 0.2, 9, dtype=torch.float64)))
    per_list = f64(PositionDebiasedNDCG(k=3, eta=1.0, keep_per_query=True))
    only_rank0 = f64(PositionDebiasedNDCG(k=3, eta=1.0, empty_target_action="neg"))  # rank 1 sees nothing
    for (a, b), o in zip(CHUNKS, owner):
        if o == rank:
            for m in (ndcg, dcg, per_list):
                m.update(preds[a:b], clicks[a:b], logged_positions=positions[a:b], mask=mask[a:b])
            if rank == 0:
                only_rank0.update(preds[a:b], clicks[a:b], logged_positions=positions[a:b], mask=mask[a:b])
    with counting_collectives() as calls:
        results["ndcg"] = ndcg.compute().tolist()
    results["calls"] = calls
    results["dcg"] = dcg.compute().item()
    results["only_rank0"] = only_rank0.compute().item()
    pq = per_list.compute_per_query()
    results["per_list_ids"] = pq["query_id"].tolist()
    results["per_list_mean"] = pq["position_debiased_ndcg@3"].nanmean().item()
    torch.save(results, f"{out}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


def test_two_processes_equal_one_process(tmp_path):
    out = tmp_path / "result"
    spawn(_dist_worker, (2, str(tmp_path / "rdv"), str(out)), 2)
    preds, clicks, positions, mask = click_batch(seed=11)
    kw = dict(logged_positions=positions, mask=mask)
    want_ndcg = F.position_debiased_ndcg(preds, clicks, [3, 20], eta=1.0, **kw).tolist()
    want_dcg = F.position_debiased_dcg(
        preds, clicks, 5, propensity_table=torch.linspace(1.0, 0.2, 9, dtype=torch.float64), **kw
    ).item()
    want_pq = F.position_debiased_ndcg(preds, clicks, 3, eta=1.0, **kw).item()
    rank0 = slice(0, 23)  # the updates of rank 0
    want_rank0 = F.position_debiased_ndcg(
        preds[rank0],
        clicks[rank0],
        3,
        eta=1.0,
        logged_positions=positions[rank0],
        mask=mask[rank0],
        empty_target_action="neg",
    ).item()
    for rank in range(2):
        res = torch.load(f"{out}.{rank}")
        assert res["ndcg"] == pytest.approx(want_ndcg, abs=TOL), rank
        assert res["dcg"] == pytest.approx(want_dcg, abs=TOL), rank
        assert res["only_rank0"] == pytest.approx(want_rank0, abs=TOL), rank
        # one all-reduce of (sums, counts, the two list-state sizes), nothing gathered
        assert res["calls"] == {
            "all_reduce": 1,
            "all_gather": 0,
            "bytes": 8 * (3 * 2 + 2),
        }  # sums, squares, counts, list sizes
        # generated list ids are global: 40 distinct lists, none merged
        assert sorted(res["per_list_ids"]) == sorted(set(res["per_list_ids"])) and len(res["per_list_ids"]) == 40
        assert res["per_list_mean"] == pytest.approx(want_pq, abs=TOL)
