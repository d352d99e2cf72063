"""The private torchmetrics (and nn.Module) hooks that torch_rankeval/metrics/_hooks.py overrides or
reads, one test each: the hook still exists with the signature we override (so an upgrade or a
downgrade of torchmetrics that changes it fails here), and our override is what runs in a merge,
a forward, a load, a dtype change and a distributed sync. No other module of the package touches a
private torchmetrics name (checked by scanning the sources)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torchmetrics import Metric, MetricCollection
from torchmetrics.utilities.data import dim_zero_cat, dim_zero_sum
from torchmetrics.utilities.distributed import gather_all_tensors

import torch_rankeval
from torch_rankeval import NDCG, ItemExposure, RankingMetrics
from torch_rankeval.metrics._hooks import CONFIG_METADATA, ConfiguredMetric

PREDS, TARGET = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.3, 0.4]]), torch.tensor([[0, 1, 2], [1, 0, 0]])

#: hook -> (owner class, the leading parameters our override takes, in order)
HOOKS = {
    "_load_from_state_dict": (
        Metric,
        ["self", "state_dict", "prefix", "local_metadata", "strict", "missing_keys", "unexpected_keys", "error_msgs"],
    ),
    "_reduce_states": (Metric, ["self", "incoming_state"]),
    "_sync_dist": (Metric, ["self", "dist_sync_fn", "process_group"]),
    "_apply": (Metric, ["self", "fn"]),
    "_register_state_dict_hook": (torch.nn.Module, ["self", "hook"]),
    "sync_context": (Metric, ["self", "dist_sync_fn", "process_group", "should_sync", "should_unsync"]),
    "persistent": (Metric, ["self", "mode"]),
    "__setstate__": (Metric, ["self", "state"]),
}


@pytest.mark.parametrize("name", list(HOOKS))
def test_the_hook_exists_with_the_signature_we_override(name):
    owner, leading = HOOKS[name]
    assert hasattr(owner, name), f"{owner.__name__}.{name} is gone: torch_rankeval/metrics/_hooks.py overrides it"
    params = list(inspect.signature(getattr(owner, name)).parameters)
    assert params[: len(leading)] == leading, (name, params)


def test_the_sync_fast_path_keys_are_torchmetrics_own():
    # _sync_dist takes its one-all-reduce path when torchmetrics passes its default gather and
    # registers "sum" / "cat" states with these very functions
    default = inspect.signature(Metric._sync_dist).parameters["dist_sync_fn"].default
    assert default is gather_all_tensors
    metric = NDCG(k=2, keep_per_query=True)
    assert metric._reductions["sums"] is dim_zero_sum and metric._reductions["query_ids"] is dim_zero_cat
    # the registries and flags the base reads
    for attr in ("_defaults", "_reductions", "_persistent"):
        assert isinstance(getattr(metric, attr), dict)
    assert isinstance(metric._to_sync, bool) and isinstance(metric._should_unsync, bool)
    assert isinstance(Metric.metric_state, property)


def test_compute_groups_compare_state_names_as_the_fingerprint_assumes():
    a, b = ItemExposure(4, 1), ItemExposure(4, 2)  # equal (zero) histograms, other configurations
    assert torch.equal(a.counts, b.counts)
    assert not MetricCollection._equal_metric_states(a, b)
    assert MetricCollection._equal_metric_states(ItemExposure(4, 2), ItemExposure(4, 2))


@pytest.fixture
def calls(monkeypatch):
    """Spy on every override of ConfiguredMetric: {hook name: number of calls}."""
    seen: dict[str, int] = {}
    for name in ("_load_from_state_dict", "_reduce_states", "_sync_dist", "_apply"):
        original = getattr(ConfiguredMetric, name)

        def spy(self, *args, __name=name, __original=original, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            seen[__name] = seen.get(__name, 0) + 1
            return __original(self, *args, **kwargs)

        monkeypatch.setattr(ConfiguredMetric, name, spy)
    return seen


@pytest.mark.parametrize("make", [lambda: NDCG(k=2), lambda: ItemExposure(3, 2)], ids=["NDCG", "ItemExposure"])
def test_merge_forward_load_and_dtype_changes_run_our_overrides(calls, make):
    def feed(m):  # noqa: ANN001, ANN202
        return m(PREDS) if isinstance(m, ItemExposure) else m(PREDS, TARGET)

    metric = make()
    feed(metric)  # forward: torchmetrics adds the batch state through _reduce_states
    assert calls.get("_reduce_states") == 1
    other = make()
    feed(other)
    metric.merge_state(other)
    assert calls["_reduce_states"] == 3
    other.persistent(True)
    state = other.state_dict()
    assert CONFIG_METADATA in state._metadata[""]  # our state_dict hook wrote the configuration
    make().load_state_dict(state)
    assert calls.get("_load_from_state_dict") == 1
    metric.set_dtype(torch.float16)
    assert calls.get("_apply") == 1
    metric.to("cpu")
    assert calls["_apply"] == 2
    kept = metric.sums if isinstance(metric, NDCG) else metric.counts
    assert kept.dtype == torch.float64  # what our _apply exists for


def test_a_distributed_sync_runs_our_one_all_reduce(calls, tmp_path, monkeypatch):
    import torchmetrics.metric

    import torch_rankeval.metrics._hooks as hooks

    if not dist.is_available() or dist.is_initialized():
        pytest.skip("needs torch.distributed and no process group of its own")
    metric = RankingMetrics(("ndcg@2", "mrr"))
    metric.update(PREDS, TARGET)
    want = {k: v.item() for k, v in metric.compute().items()}  # no process group yet: no sync
    reduces, gathers = [], []
    real_all_reduce = dist.all_reduce

    def all_reduce(t, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        reduces.append(t.numel())
        return real_all_reduce(t, *args, **kwargs)

    def gather(t, group=None):  # noqa: ANN001, ANN202
        gathers.append(tuple(t.shape))
        return gather_all_tensors(t, group=group)

    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    # torchmetrics' default gather, as sync() passes it and as our fast path recognises it
    monkeypatch.setattr(torchmetrics.metric, "gather_all_tensors", gather)
    monkeypatch.setattr(hooks, "gather_all_tensors", gather)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rdv'}", rank=0, world_size=1)
    try:
        metric.sync()
        assert calls.get("_sync_dist") == 1
        # one all-reduce of the 2 sums, 2 counts, 2 sums of squares and the sizes of the 5 list states; no gather
        assert reduces == [2 + 2 + 2 + 5] and gathers == []
        metric.unsync()
        exposure = ItemExposure(3, 2)
        exposure.update(PREDS)
        exposure.sync()
        assert calls["_sync_dist"] == 2 and reduces[-1] == 3  # the histogram alone
        exposure.unsync()
        rows = NDCG(k=2, keep_per_query=True)
        rows.update(PREDS, TARGET)
        rows.sync()
        assert gathers == [(2, 1), (2,)]  # query_values and query_ids: the only list states with rows
        rows.unsync()
        metric._computed = None  # compute again, now through the sync
        assert {k: v.item() for k, v in metric.compute().items()} == want
    finally:
        dist.destroy_process_group()


def test_no_other_module_touches_a_private_torchmetrics_name():
    private = re.compile(
        r"def (_load_from_state_dict|_reduce_states|_sync_dist|_apply)\b|\b_register_state_dict_hook\b|"
        r"\.(_defaults|_reductions|_persistent|_to_sync|_should_unsync)\b"
    )
    package = Path(torch_rankeval.__file__).parent
    offenders = [
        f"{path.relative_to(package)}:{i}"
        for path in package.rglob("*.py")
        if path.name != "_hooks.py"
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if private.search(line)
    ]
    assert offenders == []
