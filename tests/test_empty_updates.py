"""An update without documents is a no-op in every class and API: padded ``(0, L)``, flat input with
zero documents (a rank whose filtered batch is empty; raising there would hang the other ranks at
the next sync), a 1-D list without documents. ``(N, 0)`` is N lists without documents: exactly
the same N rows padded to any width with ``mask=False`` (the empty-list policy), so a result never
depends on how wide a batch was padded."""

from __future__ import annotations

import datetime
import warnings

import pytest
import torch
import torch.distributed as dist

from tests.distributed_helpers import spawn
from tests.oracles import random_batch
from torch_rankeval import (
    MAP,
    NDCG,
    PositionDebiasedDCG,
    PositionDebiasedNDCG,
    PositionProfile,
    RankingMetrics,
)
from torch_rankeval import functional as F

METRICS = ("ndcg@3", "map", "mrr", "precision@2", "recall@5", "hit_rate@1", "r_precision", "dcg", "idcg")
CLASSES = {
    "RankingMetrics": lambda: RankingMetrics(METRICS, keep_per_query=True),
    "skip": lambda: RankingMetrics(METRICS, empty_target_action="skip"),
    "NDCG flat": lambda: NDCG(k=[1, 3], input_format="flat"),
    "MAP whole_queries": lambda: MAP(whole_queries=True),
    "PositionProfile": lambda: PositionProfile(positions=4, keep_per_query=True),
    "unvalidated": lambda: RankingMetrics(("ndcg@3", "map"), validate_args=False),
}


def _data(seed: int = 3):
    preds, target, mask, _ = random_batch(5, 4, seed=seed, max_grade=3)
    return preds, target, mask


def _update(metric, preds, target, mask) -> None:
    """Padded input, or the same lists flat (query ids 0..N-1) for the flat-only classes."""
    if metric.input_format == "flat" or metric.whole_queries:
        ids = torch.arange(preds.shape[0]).unsqueeze(1).expand_as(preds)
        metric.update(preds[mask], target[mask], indexes=ids[mask])
    else:
        metric.update(preds, target, mask=mask)


def _result(metric) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = metric.compute()
        out = out if isinstance(out, dict) else {"value": out}
        if getattr(metric, "keep_per_query", False):
            out.update({f"per_query/{k}": v for k, v in metric.compute_per_query().items()})
    return out


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key, value in a.items():
        torch.testing.assert_close(value, b[key], equal_nan=True, atol=0, rtol=0, msg=key)


EMPTY_UPDATES = {
    "padded (0, L)": lambda m: m.update(torch.zeros(0, 4), torch.zeros(0, 4, dtype=torch.long)),
    "padded (0, L) with mask": lambda m: m.update(
        torch.zeros(0, 4), torch.zeros(0, 4), mask=torch.zeros(0, 4, dtype=torch.bool)
    ),
    "flat, 0 documents": lambda m: m.update(
        torch.zeros(0), torch.zeros(0, dtype=torch.long), indexes=torch.zeros(0, dtype=torch.long)
    ),
    "flat, every document ignored": lambda m: (
        m.update(torch.tensor([0.3, 0.1]), torch.tensor([-1, -1]), indexes=torch.tensor([7, 7]))
        if m.ignore_index == -1
        else m.update(torch.zeros(0), torch.zeros(0), indexes=torch.zeros(0, dtype=torch.int32))
    ),
}


@pytest.mark.parametrize("empty", list(EMPTY_UPDATES))
@pytest.mark.parametrize("name", list(CLASSES))
def test_an_update_without_documents_changes_nothing(name, empty):
    preds, target, mask = _data()
    reference, metric = CLASSES[name](), CLASSES[name]()
    for m in (reference, metric):
        m.ignore_index = -1 if empty == "flat, every document ignored" else None
    if name in ("NDCG flat", "MAP whole_queries") and "padded" in empty:
        pytest.skip("a flat-only metric takes no padded input")
    EMPTY_UPDATES[empty](metric)  # before any data
    _update(reference, preds[:3], target[:3], mask[:3])
    _update(metric, preds[:3], target[:3], mask[:3])
    EMPTY_UPDATES[empty](metric)  # between updates
    _update(reference, preds[3:], target[3:], mask[3:])
    _update(metric, preds[3:], target[3:], mask[3:])
    EMPTY_UPDATES[empty](metric)  # after
    _same(_result(metric), _result(reference))


@pytest.mark.parametrize("validate_args", [True, False])
def test_an_empty_update_of_a_compiled_metric_compiles_nothing(validate_args):
    """``compile=True``: a batch of no list never reaches the compiled kernel, which dynamo would
    otherwise compile for a size-0 batch (sizes 0 and 1 are always specialised): seconds of compiling
    for a no-op. No kernel is built, no graph traced, and the state is a fresh metric's."""
    from torch._dynamo.utils import counters

    from torch_rankeval.metrics import _compiled

    metric = RankingMetrics(("ndcg@3", "map"), compile=True, validate_args=validate_args)
    graphs = counters["stats"]["unique_graphs"]
    metric.update(torch.zeros(0, 4), torch.zeros(0, 4, dtype=torch.long))
    metric.update(torch.zeros(0, 4), torch.zeros(0, 4), mask=torch.zeros(0, 4, dtype=torch.bool))
    assert id(metric) not in _compiled._KERNELS  # no kernel built, so none compiled
    assert counters["stats"]["unique_graphs"] == graphs
    _same(_result(metric), _result(RankingMetrics(("ndcg@3", "map"))))  # NaN where no list was counted
    with pytest.raises(TypeError, match="mask must be a bool tensor"):  # the input stage still checks it
        metric.update(torch.zeros(0, 4), torch.zeros(0, 4), mask=torch.zeros(0, 4))


@pytest.mark.parametrize("name", ["RankingMetrics", "skip", "PositionProfile", "unvalidated"])
def test_lists_without_documents_score_as_fully_masked_lists_of_any_width(name):
    preds, target, mask = _data()
    zero_width, masked = CLASSES[name](), CLASSES[name]()
    for m, width in ((zero_width, 0), (masked, 6)):
        m.update(preds, target, mask=mask)
        m.update(
            torch.zeros(2, width), torch.zeros(2, width, dtype=torch.long), mask=torch.zeros(2, width, dtype=torch.bool)
        )
        m.update(torch.zeros(width), torch.zeros(width, dtype=torch.long), mask=torch.zeros(width, dtype=torch.bool))
    _same(_result(zero_width), _result(masked))
    if name == "RankingMetrics":  # by hand: the 3 empty lists score 0 and count (empty_target_action="neg")
        alone = CLASSES[name]()
        alone.update(preds, target, mask=mask)
        assert zero_width.counts.tolist() == [8] * len(METRICS)
        torch.testing.assert_close(zero_width.sums, alone.sums)


def test_debiased_metrics_take_empty_updates():
    preds, target, mask = _data()
    clicks = (target > 1).float()
    positions = torch.arange(1, 5).expand(5, -1)
    for cls in (PositionDebiasedNDCG, PositionDebiasedDCG):
        reference, metric, masked = cls(k=[2, 4], eta=1.0), cls(k=[2, 4], eta=1.0), cls(k=[2, 4], eta=1.0)
        for m in (reference, metric, masked):
            m.update(preds, clicks, logged_positions=positions, mask=mask)
        metric.update(torch.zeros(0, 4), torch.zeros(0, 4), logged_positions=torch.zeros(0, 4, dtype=torch.long))
        _same(_result(metric), _result(reference))
        metric.update(torch.zeros(3, 0), torch.zeros(3, 0), logged_positions=torch.zeros(3, 0, dtype=torch.long))
        masked.update(
            torch.zeros(3, 2),
            torch.zeros(3, 2),
            logged_positions=torch.ones(3, 2, dtype=torch.long),
            mask=torch.zeros(3, 2, dtype=torch.bool),
        )
        _same(_result(metric), _result(masked))
    per_item = PositionDebiasedNDCG(k=2)
    per_item.update(torch.zeros(0, 3), torch.zeros(0, 3), propensities=torch.zeros(0, 3))
    with pytest.warns(UserWarning, match="no query was counted"):
        assert torch.isnan(per_item.compute())


FUNCTIONS = {
    "ndcg": lambda *a, **kw: F.ndcg(*a, k=3, **kw),
    "dcg": F.dcg,
    "idcg": F.idcg,
    "ap": F.average_precision,
    "rr": F.reciprocal_rank,
    "precision": lambda *a, **kw: F.precision(*a, k=2, **kw),
    "recall": F.recall,
    "hit_rate": F.hit_rate,
    "r_precision": F.r_precision,
    "evaluate": lambda *a, **kw: torch.stack(list(F.evaluate(*a, ["ndcg@2", "map", "P@3"], **kw).values()), -1),
}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_functional_api_on_zero_lists_and_on_lists_without_documents(name):
    fn = FUNCTIONS[name]
    none = fn(torch.zeros(0, 4), torch.zeros(0, 4, dtype=torch.long), reduction="none")
    assert none.shape[0] == 0
    assert (fn(torch.zeros(0, 4), torch.zeros(0, 4, dtype=torch.long), reduction="sum") == 0).all()
    with pytest.warns(UserWarning, match="no list to average"):
        assert torch.isnan(fn(torch.zeros(0, 4), torch.zeros(0, 4, dtype=torch.long))).all()
    # (N, 0): N lists without documents, exactly as fully masked lists of any width
    for reduction in ("none", "mean"):
        zero = fn(torch.zeros(3, 0), torch.zeros(3, 0, dtype=torch.long), reduction=reduction)
        masked = fn(
            torch.zeros(3, 5),
            torch.ones(3, 5, dtype=torch.long),
            mask=torch.zeros(3, 5, dtype=torch.bool),
            reduction=reduction,
        )
        torch.testing.assert_close(zero, masked, atol=0, rtol=0)
        assert (zero == 0).all()  # no relevant document: empty_target_action="neg" scores 0
    one = fn(torch.zeros(0), torch.zeros(0, dtype=torch.long), reduction="none")
    assert one.numel() == (3 if name == "evaluate" else 1) and (one == 0).all()


def test_debiased_functions_on_zero_lists_and_on_lists_without_items():
    with pytest.warns(UserWarning, match="no list to average"):
        assert torch.isnan(
            F.position_debiased_ndcg(torch.zeros(0, 3), torch.zeros(0, 3), propensities=torch.zeros(0, 3))
        )
    zero = F.position_debiased_dcg(
        torch.zeros(2, 0),
        torch.zeros(2, 0),
        logged_positions=torch.zeros(2, 0, dtype=torch.long),
        eta=1.0,
        reduction="none",
    )
    assert zero.tolist() == [0.0, 0.0]
    skipped = F.position_debiased_ndcg(
        torch.zeros(2, 0), torch.zeros(2, 0), propensities=torch.zeros(2, 0), reduction="none"
    )
    assert torch.isnan(skipped).all()  # no click: skipped (the default empty_target_action)
    assert F.ips_gains(torch.zeros(0, 3), torch.ones(0, 3)).shape == (0, 3)


# ----------------------------------------------------------------------------- distributed
def _worker(rank: int, world: int, rdv: str, out: str) -> None:
    # a short timeout: a rank that raised (or skipped the sync) would make the other one fail, not hang
    dist.init_process_group(
        "gloo", init_method=f"file://{rdv}", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60)
    )
    preds, target, mask = _data(seed=9)
    metrics = {name: make() for name, make in CLASSES.items()}
    metrics["debiased"] = PositionDebiasedNDCG(k=3, eta=1.0, keep_per_query=True)
    for name, m in metrics.items():
        m.ignore_index = None if name == "debiased" else -1
        if rank == 0:
            if name == "debiased":
                m.update(preds, (target > 1).float(), logged_positions=torch.arange(1, 5).expand(5, -1), mask=mask)
            else:
                _update(m, preds, target, mask)
        elif name == "debiased":  # rank 1: only empty updates
            m.update(torch.zeros(0, 4), torch.zeros(0, 4), logged_positions=torch.zeros(0, 4, dtype=torch.long))
        else:
            for kind, empty in EMPTY_UPDATES.items():
                if not (kind.startswith("padded") and (m.input_format == "flat" or m.whole_queries)):
                    empty(m)
    torch.save({name: _result(m) for name, m in metrics.items()}, f"{out}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


def test_a_rank_with_only_empty_updates_syncs_and_gets_the_one_process_result(tmp_path):
    out = tmp_path / "result"
    spawn(_worker, (2, str(tmp_path / "rdv"), str(out)), 2)
    preds, target, mask = _data(seed=9)
    expected = {}
    for name, make in CLASSES.items():
        m = make()
        _update(m, preds, target, mask)
        expected[name] = _result(m)
    m = PositionDebiasedNDCG(k=3, eta=1.0, keep_per_query=True)
    m.update(preds, (target > 1).float(), logged_positions=torch.arange(1, 5).expand(5, -1), mask=mask)
    expected["debiased"] = _result(m)
    for values in expected.values():  # generated query ids are global: rank + world_size * local position
        if "per_query/query_id" in values:  # (padded input: ids generated on rank 0)
            values["per_query/query_id"] = values["per_query/query_id"] * 2
    for rank in (0, 1):
        got = torch.load(f"{out}.{rank}")
        for name, values in expected.items():
            _same(got[name], values)
