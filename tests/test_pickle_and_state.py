"""Metrics pickle (pickle, deepcopy, torch.save of the metric and of its state_dict), and refuse the
state of a differently configured metric on load_state_dict and merge_state, naming both
configurations, without adding a key to the state_dict (old checkpoints load, new ones load into
older versions)."""

from __future__ import annotations

import copy
import io
import pickle
from collections import OrderedDict

import pytest
import torch
from torchmetrics import MetricCollection

from tests.oracles import random_batch
from torch_rankeval import (
    AUROC,
    DCG,
    IDCG,
    MAP,
    MRR,
    NDCG,
    FallOut,
    HitRate,
    IntraListDiversity,
    ItemExposure,
    Novelty,
    PositionDebiasedDCG,
    PositionDebiasedNDCG,
    PositionProfile,
    Precision,
    RankingMetrics,
    Recall,
    RPrecision,
)
from torch_rankeval.measures.registry import UnjudgedZeroGain
from torch_rankeval.metrics import AvgRecPopularity, MeanInvUserFreq
from torch_rankeval.metrics.beyond import hamming_distances


def steep_discount(ranks: torch.Tensor) -> torch.Tensor:  # a module-level callable pickles by reference
    return 1.0 / ranks


def half_gain(grades: torch.Tensor) -> torch.Tensor:
    return grades / 2


RANKING = {
    "RankingMetrics": lambda: RankingMetrics(
        ("ndcg@5", "map", "mrr@3", "P(rel=2)@2", "r_precision"), keep_per_query=True
    ),
    "gain mapping": lambda: RankingMetrics(("ndcg", "ndcg(gains={0:0,1:1,2:3,3:7,4:15})@3"), gain={0: 0, 1: 2, 2: 5}),
    "callables": lambda: RankingMetrics(("dcg@3",), gain=half_gain, discount=steep_discount),
    "unjudged gain": lambda: RankingMetrics(("ndcg@3",), gain=UnjudgedZeroGain("exp2")),
    "trec_eval": lambda: RankingMetrics(("ndcg", "gm_map", "num_rel_ret"), convention="trec_eval"),
    "flat": lambda: NDCG(k=[2, 4], input_format="flat"),
    "whole queries": lambda: MAP(whole_queries=True),
    "DCG": lambda: DCG(k=3),
    "IDCG": lambda: IDCG(),
    "NDCG": lambda: NDCG(k=[1, 3]),
    "MAP": lambda: MAP(k=2),
    "MRR": lambda: MRR(),
    "Precision": lambda: Precision(k=2, adaptive_k=True),
    "Recall": lambda: Recall(k=3),
    "HitRate": lambda: HitRate(k=[1, 3]),
    "RPrecision": lambda: RPrecision(),
    "FallOut": lambda: FallOut(k=2),
    "AUROC": lambda: AUROC(),
    "trec measures": lambda: RankingMetrics(("bpref", "P(rel=2)@3", "Judged@3"), convention="trec_eval"),
    "PositionProfile": lambda: PositionProfile(positions=4, keep_per_query=True),
    "collection": lambda: MetricCollection({"ndcg": NDCG(k=3), "map": MAP(), "profile": PositionProfile(positions=3)}),
}
DEBIASED = {
    "PositionDebiasedNDCG eta": lambda: PositionDebiasedNDCG(k=[2, 4], eta=1.0, keep_per_query=True),
    "PositionDebiasedDCG table": lambda: PositionDebiasedDCG(
        k=3, propensity_table=torch.tensor([1.0, 0.5, 0.4, 0.2, 0.1])
    ),
    "PositionDebiasedNDCG affine": lambda: PositionDebiasedNDCG(
        affine=(torch.tensor([0.8, 0.6, 0.5, 0.4, 0.3]), torch.tensor([0.1, 0.1, 0.05, 0.05, 0.0])),
        empty_target_action="neg",
    ),
}


def _feed(name: str, metric, part: int) -> None:
    preds, target, mask, _ = random_batch(6, 5, seed=10 + part, max_grade=3)
    if name in EXPOSURE:
        metric.update(torch.rand(4, 7, generator=torch.Generator().manual_seed(part)))
    elif name in DEBIASED:
        positions = torch.arange(1, 6).expand(6, -1)
        metric.update(preds, (target > 1).float(), logged_positions=positions, mask=mask)
    elif name in ("flat", "whole queries"):
        ids = torch.arange(6).unsqueeze(1).expand(-1, 5) + 6 * part
        metric.update(preds[mask], target[mask], indexes=ids[mask])
    else:
        metric.update(preds, target, mask=mask)


def _values(out) -> dict:
    if isinstance(out, torch.Tensor):
        return {"value": out}
    flat = {}
    for key, value in out.items():
        for sub, v in _values(value).items():
            flat[f"{key}/{sub}"] = v
    return flat


def _assert_same(a, b) -> None:
    va, vb = _values(a), _values(b)
    assert va.keys() == vb.keys()
    for key in va:
        torch.testing.assert_close(va[key], vb[key], equal_nan=True, atol=0, rtol=0, msg=key)


EXPOSURE = {
    "ItemExposure": lambda: ItemExposure(num_items=7, k=3, popularity=torch.arange(7.0)),
    "IntraListDiversity": lambda: IntraListDiversity(num_items=7, k=3, embeddings=torch.arange(14.0).view(7, 2) + 1),
    "Novelty": lambda: Novelty(num_items=7, k=3, popularity=torch.arange(7.0)),
    "AvgRecPopularity": lambda: AvgRecPopularity(num_items=7, k=3, popularity=torch.arange(7.0), normalize=True),
    "MeanInvUserFreq": lambda: MeanInvUserFreq(num_items=7, k=3, users_per_item=torch.arange(7.0), num_users=9),
    "IntraListDiversity RecTools": lambda: IntraListDiversity(
        num_items=7,
        k=3,
        one_item="zero",
        featureless="skip",
        distance=hamming_distances(torch.tensor([[0.0, 1], [1, 1], [float("nan"), 0], [0, 0], [1, 0], [2, 1], [2, 2]])),
    ),  # fmt: skip
}
ALL = {**RANKING, **DEBIASED, **EXPOSURE}


@pytest.mark.parametrize("name", list(ALL))
def test_every_metric_pickles_fresh_updated_and_computed_and_the_copy_keeps_streaming(name):
    metric = ALL[name]()
    fresh = pickle.loads(pickle.dumps(metric))
    assert type(fresh) is type(metric)
    _feed(name, metric, 0)
    _feed(name, fresh, 0)
    metric.compute()  # torchmetrics caches the result: a computed metric must pickle too
    for copied in (pickle.loads(pickle.dumps(metric)), copy.deepcopy(metric), _torch_roundtrip(metric)):
        _assert_same(copied.compute(), metric.compute())
        # the copy is a working metric: more updates give what the original gives
        _feed(name, copied, 1)
    _feed(name, metric, 1)
    _feed(name, fresh, 1)
    _assert_same(copied.compute(), metric.compute())
    _assert_same(fresh.compute(), metric.compute())
    if getattr(metric, "keep_per_query", False):
        _assert_same(copied.compute_per_query(), metric.compute_per_query())


def _torch_roundtrip(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


@pytest.mark.parametrize("name", list(ALL))
def test_state_dict_saved_with_torch_save_loads_with_weights_only_into_a_fresh_metric(name):
    metric = ALL[name]()
    _feed(name, metric, 0)
    metric.persistent(True)
    buffer = io.BytesIO()
    torch.save(metric.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer)  # weights_only=True, the default: the metadata holds plain data only
    restored = ALL[name]()
    restored.load_state_dict(state)
    _assert_same(restored.compute(), metric.compute())


# ----------------------------------------------------------------------------- foreign state
PREDS, TARGET = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.3, 0.4]]), torch.tensor([[0, 1, 2], [1, 0, 0]])


def _persisted(metric):
    if isinstance(metric, PositionDebiasedNDCG):
        metric.update(PREDS, (TARGET > 0).float(), logged_positions=torch.tensor([[1, 2, 3], [1, 2, 3]]))
    else:
        metric.update(PREDS, TARGET)
    metric.persistent(True)
    return metric


def test_load_state_dict_of_other_cutoffs_raises_naming_both_configurations():
    saved = _persisted(NDCG(k=10)).state_dict()
    with pytest.raises(
        ValueError, match=r"(?s)load_state_dict.*state from:  NDCG \['ndcg@10'\].*this metric: NDCG \['ndcg@5'\]"
    ):
        NDCG(k=5).load_state_dict(saved)


def test_load_state_dict_of_other_conventions_names_the_difference():
    saved = _persisted(NDCG(k=3, gain="linear")).state_dict()
    with pytest.raises(
        ValueError, match=r"(?s)convention: Convention\(gain='linear'.*\(state\) vs Convention\(gain='exp2'"
    ):
        NDCG(k=3).load_state_dict(saved)
    saved = _persisted(PositionDebiasedNDCG(k=3, eta=1.0)).state_dict()
    with pytest.raises(ValueError, match=r"eta: 1\.0 \(state\) vs 2\.0 \(this metric\)"):
        PositionDebiasedNDCG(k=3, eta=2.0).load_state_dict(saved)


def test_foreign_state_is_refused_after_torch_save_and_inside_a_parent_module():
    class Model(torch.nn.Module):
        def __init__(self, k: int) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(2, 1)
            self.ranking = MetricCollection({"ndcg": NDCG(k=k), "map": MAP()})

    source = Model(10)
    source.ranking.update(PREDS, TARGET)
    source.ranking.persistent(True)
    buffer = io.BytesIO()
    torch.save(source.state_dict(), buffer)  # what a Lightning checkpoint holds
    buffer.seek(0)
    state = torch.load(buffer)
    with pytest.raises(ValueError, match=r"NDCG\.load_state_dict.*differently configured"):
        Model(5).load_state_dict(state)
    same = Model(10)
    same.load_state_dict(state)
    _assert_same(same.ranking.compute(), source.ranking.compute())


def test_merge_state_refuses_a_metric_its_metric_state_and_its_state_dict():
    other = _persisted(RankingMetrics(("ndcg@5", "map")))
    for incoming in (other, other.metric_state, other.state_dict()):
        with pytest.raises(
            ValueError, match=r"(?s)merge_state.*RankingMetrics \['ndcg@5','map'\].*RankingMetrics \['ndcg@5','mrr'\]"
        ):
            RankingMetrics(("ndcg@5", "mrr")).merge_state(incoming)
    # a subclass instance passes torchmetrics' isinstance check: the configuration still tells them apart
    with pytest.raises(ValueError, match="differently configured"):
        RankingMetrics(("ndcg@5",)).merge_state(_persisted(NDCG(k=10)))


def test_a_state_without_configuration_is_checked_by_shape():
    # a plain dict (or a state_dict from a version that wrote no metadata) carries no configuration:
    # states of another width are refused ...
    two_values = dict(_persisted(RankingMetrics(("ndcg", "map"))).state_dict())
    for act in (lambda m: m.load_state_dict(two_values), lambda m: m.merge_state(two_values)):
        with pytest.raises(
            ValueError, match=r"'sums' has shape \(2,\) but this metric reports 1 value\(s\) \['ndcg@5'\]"
        ):
            act(NDCG(k=5))
    rows = _persisted(RankingMetrics(("ndcg", "map"), keep_per_query=True)).state_dict()
    rows = {k: v for k, v in rows.items() if k not in ("sums", "counts")}
    with pytest.raises(ValueError, match="'query_values' has shape"):
        RankingMetrics(("ndcg", "map", "mrr"), keep_per_query=True).load_state_dict(rows)
    # ... and an old-style state_dict of the same configuration loads as before
    source = _persisted(NDCG(k=5))
    old_style = OrderedDict(dict(source.state_dict()))  # no _metadata
    assert not hasattr(old_style, "_metadata")
    restored = NDCG(k=5)
    restored.load_state_dict(old_style)
    _assert_same(restored.compute(), source.compute())


def test_state_dict_keys_are_unchanged_and_the_configuration_is_plain_metadata():
    metric = _persisted(NDCG(k=5))
    state = metric.state_dict()
    assert set(state) == {
        "sums",
        "counts",
        "squares",
        "flat_preds",
        "flat_target",
        "flat_indexes",
        "query_values",
        "query_ids",
    }
    meta = state._metadata[""]
    assert set(meta) == {"version", "torch_rankeval_config"}
    config = meta["torch_rankeval_config"]
    assert isinstance(config["fingerprint"], str) and all(isinstance(v, str) for v in config["fields"].values())
    assert config["fields"]["values"] == "['ndcg@5']"


def test_identical_configurations_still_merge_and_load():
    a, b, whole = NDCG(k=2), NDCG(k=2), NDCG(k=2)
    a.update(PREDS[:1], TARGET[:1])
    b.update(PREDS[1:], TARGET[1:])
    whole.update(PREDS, TARGET)
    b.persistent(True)
    for incoming in (b, b.metric_state, b.state_dict()):
        merged = copy.deepcopy(a)
        merged.merge_state(incoming)
        assert merged.compute().item() == pytest.approx(whole.compute().item(), abs=1e-7)


# ----------------------------------------------------------------------------- spawned processes
def _tensor_states(metric) -> dict:
    members = metric.items() if isinstance(metric, MetricCollection) else [("", metric)]
    return {f"{n}/{k}": v for n, m in members for k, v in m.metric_state.items() if isinstance(v, torch.Tensor)}


def _spawned(rank: int, metrics: dict, rdv: str, out: str) -> None:
    """Each process adds its half; ``metrics`` arrived pickled through torch.multiprocessing, which
    puts CPU tensors in shared memory (as Lightning's ddp_spawn does)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=2)
    local = {}
    for name, metric in metrics.items():
        _feed(name, metric, rank)
        dist.barrier()  # both processes have added: a shared tensor would now hold both halves
        local[name] = {k: v.clone() for k, v in _tensor_states(metric).items()}
        local[f"{name}/compute"] = metric.compute()
    torch.save(local, f"{out}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.slow
def test_spawned_processes_get_states_of_their_own(tmp_path):
    import torch.multiprocessing as mp

    names = ["NDCG", "PositionProfile", "PositionDebiasedDCG table", "ItemExposure", "collection"]
    mp.spawn(_spawned, args=({n: ALL[n]() for n in names}, str(tmp_path / "rdv"), str(tmp_path / "out")), nprocs=2)
    for name in names:
        both = ALL[name]()
        halves = [ALL[name](), ALL[name]()]
        for rank in (0, 1):
            _feed(name, both, rank)
            _feed(name, halves[rank], rank)
        for rank in (0, 1):
            got = torch.load(f"{tmp_path / 'out'}.{rank}")
            expected_local = _tensor_states(halves[rank])
            _assert_same(got[name], expected_local)  # only this process's updates
            _assert_same(got[f"{name}/compute"], both.compute())  # synced: both halves once
