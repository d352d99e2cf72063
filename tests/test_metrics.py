"""The streaming Metric classes against independent oracles (pytrec_eval, torchmetrics' classes) and
torchmetrics' Metric contract (reset, forward, state_dict, clone, merge_state, MetricCollection)."""

from __future__ import annotations

import copy

import pytest
import torch
from torchmetrics import MetricCollection
from torchmetrics.retrieval import RetrievalMAP, RetrievalMRR, RetrievalNormalizedDCG, RetrievalPrecision

from tests.oracles import random_batch, to_pytrec
from torch_rankeval import MAP, MRR, NDCG, HitRate, Precision, RankingMetrics, Recall, RPrecision

pytrec_eval = pytest.importorskip("pytrec_eval")


def _chunks(n, sizes):
    start = 0
    for s in sizes:
        yield slice(start, start + s)
        start += s
    assert start == n


def test_streaming_padded_updates_match_pytrec_eval():
    preds, target, mask, ideal = random_batch(90, 20, seed=11, extra_judged=4)
    metric = RankingMetrics(
        ("ndcg", "ndcg@10", "map", "mrr", "precision@5", "recall@10", "r_precision", "success@5"),
        convention="trec_eval",
    )
    for sl in _chunks(90, [7, 30, 1, 52]):
        metric.update(preds[sl], target[sl], mask=mask[sl], ideal_target=ideal[sl])
    got = metric.compute()
    qrels, run = to_pytrec(preds, target, mask, ideal)
    res = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg", "ndcg_cut.10", "map", "recip_rank", "P.5", "recall.10", "Rprec", "success.5"}
    ).evaluate(run)
    n = 90  # trec_eval leaves out queries without relevant documents; ours score them 0 and count them
    names = {
        "ndcg": "ndcg",
        "ndcg@10": "ndcg_cut_10",
        "map": "map",
        "mrr": "recip_rank",
        "precision@5": "P_5",
        "recall@10": "recall_10",
        "r_precision": "Rprec",
        "success@5": "success_5",
    }
    assert set(got) == set(names)
    for ours, theirs in names.items():
        want = sum(v[theirs] for v in res.values()) / n
        assert got[ours].item() == pytest.approx(want, abs=1e-6), ours


def _flat(seed, n_queries=40, length=12):
    g = torch.Generator().manual_seed(seed)
    preds = torch.rand(n_queries * length, generator=g) + 0.01
    target = (torch.rand(n_queries * length, generator=g) < 0.3).long()
    indexes = torch.arange(n_queries).repeat_interleave(length)
    perm = torch.randperm(n_queries * length, generator=g)  # documents of a query scattered everywhere
    return preds[perm], target[perm], indexes[perm]


@pytest.mark.parametrize(
    "ours,theirs",
    [
        (lambda: NDCG(k=5, convention="torchmetrics"), lambda: RetrievalNormalizedDCG(top_k=5)),
        (lambda: MAP(convention="torchmetrics"), lambda: RetrievalMAP()),
        (lambda: MAP(k=4, convention="torchmetrics"), lambda: RetrievalMAP(top_k=4)),
        (lambda: MRR(convention="torchmetrics"), lambda: RetrievalMRR()),
        (lambda: Precision(k=3, convention="torchmetrics"), lambda: RetrievalPrecision(top_k=3)),
    ],
)
def test_flat_drop_in_matches_torchmetrics_classes(ours, theirs):
    preds, target, indexes = _flat(3)
    a, b = ours(), theirs()
    for sl in _chunks(preds.shape[0], [100, 200, 180]):  # queries split across updates
        a.update(preds[sl], target[sl], indexes=indexes[sl])
        b.update(preds[sl], target[sl], indexes=indexes[sl])
    assert a.compute().item() == pytest.approx(b.compute().item(), abs=1e-6)


def test_flat_whole_queries_keeps_only_sums():
    preds, target, indexes = _flat(4)
    order = torch.argsort(indexes, stable=True)
    preds, target, indexes = preds[order], target[order], indexes[order]
    streaming = RankingMetrics(("ndcg@5", "map"), input_format="flat", whole_queries=True)
    reference = RetrievalNormalizedDCG(top_k=5)
    for sl in _chunks(preds.shape[0], [120, 240, 120]):  # each update holds whole queries
        streaming.update(preds[sl], target[sl], indexes=indexes[sl])
        reference.update(preds[sl], target[sl], indexes=indexes[sl])
    assert streaming.flat_preds == [] and streaming.flat_indexes == []
    assert streaming.compute()["ndcg@5"].item() == pytest.approx(reference.compute().item(), abs=1e-6)


def test_keep_per_query_returns_values_by_id_and_generated_ids_are_unique():
    preds, target, mask, _ = random_batch(10, 6, seed=2)
    metric = RankingMetrics(("mrr", "ndcg@3"), keep_per_query=True)
    metric.update(preds[:4], target[:4], mask=mask[:4])
    metric.update(preds[4:], target[4:], mask=mask[4:])
    per = metric.compute_per_query()
    assert per["query_id"].tolist() == list(range(10))
    qrels, run = to_pytrec(preds, target, mask)
    res = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run)
    for i in range(10):
        assert per["mrr"][i].item() == pytest.approx(res.get(f"q{i}", {"recip_rank": 0.0})["recip_rank"], abs=1e-6)
    # the mean of the per-query values is compute()
    assert per["ndcg@3"].mean().item() == pytest.approx(metric.compute()["ndcg@3"].item(), abs=1e-6)
    with pytest.raises(ValueError, match="keep_per_query=True"):
        RankingMetrics(("mrr",)).compute_per_query()


def test_explicit_query_ids_for_padded_input():
    metric = MRR(keep_per_query=True)
    metric.update(torch.tensor([[0.1, 0.9], [0.8, 0.2]]), torch.tensor([[1, 0], [1, 0]]), indexes=torch.tensor([50, 7]))
    per = metric.compute_per_query()
    assert per["query_id"].tolist() == [7, 50]
    assert per["mrr"].tolist() == [1.0, 0.5]


def test_skip_policy_counts_and_per_query_nan():
    metric = RankingMetrics(("mrr",), empty_target_action="skip", keep_per_query=True)
    metric.update(torch.tensor([[0.9, 0.1], [0.9, 0.1]]), torch.tensor([[0, 1], [0, 0]]))
    assert metric.compute()["mrr"].item() == pytest.approx(0.5)
    assert metric.counts.tolist() == [1]
    assert torch.isnan(metric.compute_per_query()["mrr"][1])


def test_empty_metric_warns_and_returns_nan():
    metric = NDCG(k=5)
    with pytest.warns(UserWarning):
        value = metric.compute()
    assert torch.isnan(value)


def test_forward_returns_batch_value_and_accumulates():
    metric = MRR()
    batch1 = metric(torch.tensor([[0.1, 0.9]]), torch.tensor([[1, 0]]))
    batch2 = metric(torch.tensor([[0.9, 0.1]]), torch.tensor([[1, 0]]))
    assert batch1.item() == pytest.approx(0.5) and batch2.item() == pytest.approx(1.0)
    assert metric.compute().item() == pytest.approx(0.75)
    metric.reset()
    assert metric.sums.tolist() == [0.0] and metric.counts.tolist() == [0]


def test_state_dict_roundtrip_clone_and_merge_state():
    preds, target, mask, _ = random_batch(20, 8, seed=5)
    a = RankingMetrics(("ndcg@5", "map"))
    a.persistent(True)
    a.update(preds[:10], target[:10], mask=mask[:10])
    state = a.state_dict()
    assert {"sums", "counts"} <= set(state)
    b = RankingMetrics(("ndcg@5", "map"))
    b.persistent(True)
    b.load_state_dict(state)
    c = b.clone()
    c.update(preds[10:], target[10:], mask=mask[10:])
    d = RankingMetrics(("ndcg@5", "map"))
    d.update(preds[10:], target[10:], mask=mask[10:])
    b.merge_state(d)
    whole = RankingMetrics(("ndcg@5", "map"))
    whole.update(preds, target, mask=mask)
    for key, v in whole.compute().items():
        assert c.compute()[key].item() == pytest.approx(v.item(), abs=1e-7)
        assert b.compute()[key].item() == pytest.approx(v.item(), abs=1e-7)


def test_metric_collection_of_classes_and_of_ranking_metrics():
    preds, target, mask, _ = random_batch(30, 10, seed=6)
    coll = MetricCollection(
        {"ndcg": NDCG(k=5), "map": MAP(), "hit": HitRate(k=[1, 3]), "rp": RPrecision(), "rec": Recall(k=5)}
    )
    coll.update(preds, target, mask=mask)
    out = coll.compute()
    from torch_rankeval import functional as F

    assert out["ndcg"].item() == pytest.approx(F.ndcg(preds, target, 5, mask=mask).item(), abs=1e-6)
    assert out["map"].item() == pytest.approx(F.average_precision(preds, target, mask=mask).item(), abs=1e-6)
    assert out["hit"].shape == (2,)
    nested = MetricCollection([RankingMetrics(("ndcg@5", "mrr"))])
    nested.update(preds, target, mask=mask)
    assert set(nested.compute()) == {"ndcg@5", "mrr"}


def test_half_and_set_dtype_keep_float64_sums_and_tables():
    metric = NDCG(k=3)
    metric.half()
    metric.set_dtype(torch.float16)
    assert metric.sums.dtype == torch.float64 and metric.counts.dtype == torch.int64
    assert metric._discounts.dtype == torch.float64
    metric.update(torch.tensor([[0.3, 0.2, 0.1]], dtype=torch.float16), torch.tensor([[0, 0, 1]]))
    assert metric.compute().item() == pytest.approx(0.5, rel=1e-3)


def test_discount_table_grows_with_longer_lists():
    metric = NDCG(gain="linear")
    metric.update(
        torch.arange(300, 0, -1).float().unsqueeze(0), torch.zeros(1, 300).long().index_fill_(1, torch.tensor([299]), 1)
    )
    import math

    assert metric._discounts.shape[0] >= 300
    assert metric.compute().item() == pytest.approx(1 / math.log2(301), rel=1e-6)


def test_mapping_gain_table_is_a_buffer_on_the_metric_device():
    metric = NDCG(gain={0: 0.0, 1: 1.0, 2: 10.0})
    assert metric._gain_keys.tolist() == [0.0, 1.0, 2.0]
    metric.update(torch.tensor([[0.9, 0.1]]), torch.tensor([[1, 2]]))
    import math

    assert metric.compute().item() == pytest.approx((1 + 10 / math.log2(3)) / (10 + 1 / math.log2(3)), rel=1e-6)


@pytest.mark.parametrize(
    "make,call,exc,match",
    [
        (lambda: NDCG(), lambda m: m.update(torch.rand(2, 3), torch.zeros(2, 4).long()), ValueError, "same shape"),
        (
            lambda: NDCG(),
            lambda m: m.update(torch.rand(6), torch.zeros(6).long(), indexes=torch.zeros(6)),
            TypeError,
            "indexes must be an integer",
        ),
        (
            lambda: NDCG(),
            lambda m: m.update(torch.tensor([[float("nan"), 0.1]]), torch.tensor([[1, 0]])),
            ValueError,
            "NaN",
        ),
        (
            lambda: NDCG(),
            lambda m: m.update(torch.tensor([float("nan"), 0.1]), torch.tensor([1, 0]), indexes=torch.tensor([0, 0])),
            ValueError,
            "NaN",
        ),
        (lambda: NDCG(k=0), None, ValueError, "positive int"),
        (lambda: RankingMetrics(("ndcg@0",)), None, ValueError, "positive int"),
        (lambda: RankingMetrics(("ndgc",)), None, ValueError, "Did you mean .*'ndcg'"),
        (lambda: RankingMetrics(("r_precision@5",)), None, ValueError, "takes no cutoff"),
        (
            lambda: NDCG(input_format="flat"),
            lambda m: m.update(torch.rand(4), torch.zeros(4).long()),
            ValueError,
            "indexes is required",
        ),
        (
            lambda: NDCG(),
            lambda m: m.update(torch.rand(4), torch.zeros(4).long(), indexes=torch.zeros(3).long()),
            ValueError,
            "indexes must have the shape of preds",
        ),
        (
            lambda: NDCG(),
            lambda m: m.update(
                torch.rand(4),
                torch.zeros(4).long(),
                indexes=torch.zeros(4).long(),
                mask=torch.ones(4, dtype=torch.bool),
            ),
            ValueError,
            "apply to padded",
        ),
        (
            lambda: NDCG(),
            lambda m: m.update(torch.rand(2, 3, device="meta"), torch.zeros(2, 3, device="meta").long()),
            ValueError,
            "metric.to",
        ),
        (lambda: NDCG(input_format="columns"), None, ValueError, "input_format"),
        (lambda: NDCG(keep_per_query=1), None, TypeError, "keep_per_query must be a bool"),
        (
            lambda: MAP(empty_target_action="error"),
            lambda m: m.update(torch.rand(1, 3), torch.zeros(1, 3).long()),
            ValueError,
            "no relevant document",
        ),
    ],
)
def test_bad_input_names_the_argument(make, call, exc, match):
    with pytest.raises(exc, match=match):
        m = make()
        call(m)


def test_update_compiles_fullgraph_without_validation():
    torch._dynamo.reset()
    metric = RankingMetrics(("ndcg@5", "map", "mrr@10"), validate_args=False)
    preds, target, mask, _ = random_batch(16, 12, seed=9)
    preds = preds.float()
    compiled = torch.compile(metric.update, fullgraph=True, backend="inductor")
    compiled(preds, target, mask=mask)
    reference = RankingMetrics(("ndcg@5", "map", "mrr@10"))
    reference.update(preds, target, mask=mask)
    for key, value in reference.compute().items():
        assert metric.compute()[key].item() == pytest.approx(value.item(), abs=1e-6)


def test_metrics_follow_to_device_and_copy():
    metric = RankingMetrics(("ndcg@3",)).to("meta")
    assert metric.sums.device.type == "meta" and metric._discounts.device.type == "meta"
    clone = copy.deepcopy(RankingMetrics(("ndcg@3",)))
    assert clone.keys == ["ndcg@3"]
