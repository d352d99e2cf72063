"""torchmetrics' MetricCollection merges metrics whose states are equal after the first update into
one compute group that shares states from then on. Running means of different metrics can be equal
by chance (a first batch without relevant documents: every metric holds sums=[0], counts=[N]);
they must never be merged, while identical metrics still may be."""

from __future__ import annotations

import pytest
import torch
from torchmetrics import MetricCollection

from torch_rankeval import MAP, MRR, NDCG, RankingMetrics

NO_RELEVANT = (torch.tensor([[0.9, 0.1]]), torch.tensor([[0, 0]]))
SECOND = (torch.tensor([[0.9, 0.1, 0.5]]), torch.tensor([[0, 1, 0]]))


def test_different_metrics_with_equal_first_states_are_not_merged():
    coll = MetricCollection({"ndcg": NDCG(k=2), "map": MAP(), "mrr": MRR(k=2), "ndcg_lin": NDCG(k=2, gain="linear")})
    coll.update(*NO_RELEVANT)  # every metric: sums [0], counts [1]
    coll.update(*SECOND)
    out = {name: v.item() for name, v in coll.compute().items()}
    # by hand: list 1 scores 0 everywhere; list 2 has its relevant document at rank 3
    assert out["map"] == pytest.approx((0 + 1 / 3) / 2)
    assert out["ndcg"] == 0.0 and out["mrr"] == 0.0 and out["ndcg_lin"] == 0.0
    assert all(len(members) == 1 for members in coll.compute_groups.values())


def test_identical_metrics_may_share_a_compute_group():
    coll = MetricCollection({"a": NDCG(k=2), "b": NDCG(k=2), "c": NDCG(k=2, keep_per_query=True)})
    coll.update(*SECOND)
    coll.update(*NO_RELEVANT)
    assert sorted(map(sorted, coll.compute_groups.values())) == [["a", "b"], ["c"]]
    out = coll.compute()
    assert out["a"].item() == out["b"].item() == out["c"].item() == pytest.approx(0.0)
    assert coll["c"].compute_per_query()["query_id"].tolist() == [0, 1]


def test_the_fingerprint_state_is_empty_stable_across_instances_and_not_persisted():
    def config_states(metric):
        return [k for k in metric._defaults if k.startswith("_config_")]

    a = RankingMetrics(("ndcg@5", "map"), gain={0: 0.0, 1: 1.0})
    config_a = config_states(a)
    assert len(config_a) == 1 and getattr(a, config_a[0]).numel() == 0
    # the same configuration (mapping order does not matter) gives the same name
    assert config_a == config_states(RankingMetrics(("ndcg@5", "map"), gain={1: 1.0, 0: 0.0}))
    other = config_states(RankingMetrics(("ndcg@5", "map")))
    assert len(other) == 1 and other != config_a
    # state_dicts keep their keys: the fingerprint is never persisted
    a.persistent(True)
    assert set(a.state_dict()) == {
        "sums",
        "counts",
        "squares",
        "flat_preds",
        "flat_target",
        "flat_indexes",
        "query_values",
        "query_ids",
    }


def test_merge_state_takes_state_dicts_and_refuses_other_configurations():
    preds, target = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.3, 0.4]]), torch.tensor([[0, 1, 0], [1, 0, 0]])
    a, b, whole = NDCG(k=2), NDCG(k=2), NDCG(k=2)
    a.update(preds[:1], target[:1])
    b.update(preds[1:], target[1:])
    whole.update(preds, target)
    b.persistent(True)
    a.merge_state(dict(b.state_dict()))  # a plain state dict, without the fingerprint
    assert a.compute().item() == pytest.approx(whole.compute().item(), abs=1e-7)
    with pytest.raises(ValueError, match="differently configured"):
        NDCG(k=3).merge_state(b)
