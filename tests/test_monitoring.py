"""Monitoring (issue 21): standard errors beside every mean the metrics report.

Oracle: ``scipy.stats.sem`` (``ddof=1``) on the per-query values, which ``keep_per_query=True`` gives
(skipped queries are NaN there and left out); for sums (``num_rel``) ``n * sem``, for geometric means
(``gm_map``) the delta method ``gm * sem(log(max(v, 1e-5)))`` written out here with numpy.
"""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest
import scipy.stats
import torch
import torch.distributed as dist

from tests.distributed_helpers import spawn
from tests.oracles import assert_close_dict, feed, random_batch
from torch_rankeval import MRR, NDCG, RankingMetrics
from torch_rankeval.measures.reduction import sample_stderr

METRICS = ("ndcg@10", "map", "mrr", "precision@3", "gm_map", "num_rel")


def _expected(per_query: dict, keys) -> dict[str, float]:
    """Means and standard errors from the per-query values, with numpy and scipy only."""
    out = {}
    for key in keys:
        v = per_query[key].double().numpy()
        v = v[~np.isnan(v)]
        n = v.size
        if key == "gm_map":
            logs = np.log(np.maximum(v, 1e-5))
            out[key] = math.exp(logs.mean())
            out[key + "/stderr"] = out[key] * scipy.stats.sem(logs) if n >= 2 else math.nan
        elif key == "num_rel":
            out[key] = v.sum()
            out[key + "/stderr"] = n * scipy.stats.sem(v) if n >= 2 else math.nan
        else:
            out[key] = v.mean()
            out[key + "/stderr"] = scipy.stats.sem(v) if n >= 2 else math.nan
    return out


def _batches():
    out = []
    for seed, n in ((1, 7), (2, 0), (3, 12), (4, 1)):  # an empty update (0 lists) among them
        preds, target, mask, _ = random_batch(max(n, 1), 9, seed=seed, max_grade=2)
        out.append((preds[:n], target[:n], mask[:n]))
    return out


@pytest.mark.parametrize(
    ("action", "compile"),
    # compiled: "skip" (its NaN rows left out of the sums of squares inside the kernel); the compiled
    # update under "neg" is checked against the eager one, standard errors included, in
    # tests/test_one_path.py (test_compiled_update_equals_eager): each compiled case here costs three
    # inductor compilations (batches of 7, 12 and 1 lists), half a minute of a cold CI machine
    [("neg", False), ("skip", False), ("skip", True)],
)
def test_stderr_equals_scipy_sem_over_several_updates(action, compile):
    batches = _batches()
    rows = RankingMetrics(METRICS, empty_target_action=action, keep_per_query=True)
    feed(rows, batches)
    per_query = rows.compute_per_query()
    if action == "skip":  # some queries have no relevant document and are left out
        assert torch.isnan(per_query["map"]).any()
    want = _expected(per_query, rows.keys)
    metric = RankingMetrics(METRICS, empty_target_action=action, compile=compile, validate_args=not compile)
    feed(metric, batches)
    assert_close_dict(metric.compute(stderr=True), want)
    assert_close_dict(rows.compute(stderr=True), want)


@pytest.mark.torchmetrics  # the overridden _wrap_compute (tests/conftest.py)
def test_compute_without_stderr_keeps_its_keys_and_the_cache_is_per_argument():
    metric = RankingMetrics(("ndcg@10", "mrr"))
    feed(metric, _batches())
    plain = metric.compute()
    assert list(plain) == ["ndcg@10", "mrr"]
    with_errors = metric.compute(stderr=True)  # not the cached result of compute()
    assert list(with_errors) == ["ndcg@10", "ndcg@10/stderr", "mrr", "mrr/stderr"]
    assert list(metric.compute()) == ["ndcg@10", "mrr"]
    with pytest.raises(TypeError, match="stderr must be a bool"):
        metric.compute(stderr="yes")


def test_single_metric_classes_return_a_dict_with_stderr():
    preds, target, mask, _ = random_batch(9, 6, seed=5, max_grade=1)
    rows = NDCG(k=(3, 5), keep_per_query=True)
    rows.update(preds, target, mask=mask)
    want = _expected(rows.compute_per_query(), ["ndcg@3", "ndcg@5"])
    metric = NDCG(k=(3, 5))
    metric.update(preds, target, mask=mask)
    assert metric.compute().shape == (2,)
    assert_close_dict(metric.compute(stderr=True), want)


def test_fewer_than_two_queries_give_nan_and_hand_values():
    metric = MRR()
    metric.update(torch.tensor([[0.9, 0.1]]), torch.tensor([[0, 1]]))
    out = metric.compute(stderr=True)
    assert out["mrr"].item() == 0.5 and math.isnan(out["mrr/stderr"].item())
    metric.update(torch.tensor([[0.9, 0.1]]), torch.tensor([[1, 0]]))
    # reciprocal ranks 1/2 and 1: sample sd = 0.5 / sqrt(2), sem = sd / sqrt(2) = 0.25
    assert metric.compute(stderr=True)["mrr/stderr"].item() == pytest.approx(0.25)


def test_every_query_skipped_gives_nan_stderr():
    metric = RankingMetrics(("map",), empty_target_action="skip")
    metric.update(torch.tensor([[0.9, 0.1], [0.2, 0.4]]), torch.tensor([[0, 0], [0, 0]]))
    with pytest.warns(UserWarning, match="no query was counted"):
        out = metric.compute(stderr=True)
    assert math.isnan(out["map"].item()) and math.isnan(out["map/stderr"].item())


def test_sample_stderr_equals_scipy():
    v = torch.tensor([0.1, 0.7, 0.3, 0.9, float("nan"), 0.25], dtype=torch.float64)
    clean = v[~torch.isnan(v)].numpy()
    assert sample_stderr(v) == pytest.approx(scipy.stats.sem(clean), rel=1e-12)
    assert sample_stderr(v, "sum") == pytest.approx(5 * scipy.stats.sem(clean), rel=1e-12)
    gm = math.exp(np.log(clean).mean())
    assert sample_stderr(v, "gmean") == pytest.approx(gm * scipy.stats.sem(np.log(clean)), rel=1e-12)
    assert math.isnan(sample_stderr(torch.tensor([0.5])))
    with pytest.raises(ValueError, match="aggregate"):
        sample_stderr(v, "median")


def test_an_old_state_dict_without_squares_loads_with_nan_stderr():
    metric = RankingMetrics(("ndcg@10", "mrr"))
    metric.persistent(True)
    feed(metric, _batches())
    state = metric.state_dict()
    del state["squares"]  # what a checkpoint written before standard errors holds
    fresh = RankingMetrics(("ndcg@10", "mrr"))
    fresh.persistent(True)
    fresh.load_state_dict(state)
    means = metric.compute()
    out = fresh.compute(stderr=True)
    for key in ("ndcg@10", "mrr"):
        assert out[key].item() == pytest.approx(means[key].item())
        assert math.isnan(out[key + "/stderr"].item())
    fresh.reset()  # a reset starts the squares again
    feed(fresh, _batches())
    assert not math.isnan(fresh.compute(stderr=True)["mrr/stderr"].item())
    # merging an old state: means add up, the errors are unknown
    merged = RankingMetrics(("ndcg@10", "mrr"))
    feed(merged, _batches())
    merged.merge_state({k: v for k, v in metric.metric_state.items() if k != "squares"})
    assert math.isnan(merged.compute(stderr=True)["mrr/stderr"].item())
    # a new state_dict round-trips the squares
    again = RankingMetrics(("ndcg@10", "mrr"))
    again.persistent(True)
    again.load_state_dict(metric.state_dict())
    assert_close_dict(again.compute(stderr=True), {k: v.item() for k, v in metric.compute(stderr=True).items()})


# ---------------------------------------------------------------------- DDP (2 gloo processes)
def _ddp_worker(rank, world, rdv, out):
    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=world)
    batches = _batches()
    metric = RankingMetrics(METRICS, empty_target_action="skip")
    for i, batch in enumerate(batches):
        if (0 if i < 3 else 1) == rank:  # uneven: rank 0 three updates (one empty), rank 1 one
            feed(metric, [batch])
    torch.save({k: v.item() for k, v in metric.compute(stderr=True).items()}, f"{out}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


def test_ddp_two_gloo_processes_equal_one_process(tmp_path):
    out = tmp_path / "result"
    spawn(_ddp_worker, (2, str(tmp_path / "rdv"), str(out)), 2)
    single = RankingMetrics(METRICS, empty_target_action="skip")
    feed(single, _batches())
    want = {k: v.item() for k, v in single.compute(stderr=True).items()}
    for rank in range(2):
        got = torch.load(f"{out}.{rank}")
        assert list(got) == list(want)
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), (rank, key)


# ---------------------------------------------------------------------- the command line
def _run_files(tmp_path):
    qrels = tmp_path / "qrels.txt"
    run = tmp_path / "run.txt"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\nq2 0 d4 1\nq3 0 d5 1\n")
    run.write_text(
        "q1 Q0 d2 1 0.9 r\nq1 Q0 d1 2 0.5 r\nq2 Q0 d3 1 0.9 r\nq2 Q0 d4 2 0.8 r\nq3 Q0 d9 1 0.9 r\nq3 Q0 d5 2 0.1 r\n"
    )
    return str(qrels), str(run)


def _cli(*argv) -> str:
    from torch_rankeval.cli import main

    out = io.StringIO()
    assert main(["evaluate", *argv], out=out) == 0
    return out.getvalue()


def test_cli_json_and_csv_carry_the_standard_error(tmp_path):
    qrels, run = _run_files(tmp_path)
    # per-query reciprocal ranks: q1 1/2, q2 1, q3 1/2
    want = scipy.stats.sem([0.5, 1.0, 0.5])
    runs = json.loads(_cli(qrels, run, "-m", "recip_rank", "-m", "num_rel", "--format", "json"))["runs"]
    assert runs[0]["stderr"]["recip_rank"] == pytest.approx(want)
    assert runs[0]["stderr"]["num_rel"] == pytest.approx(3 * scipy.stats.sem([1, 2, 1]))
    rows = list(csv.DictReader(io.StringIO(_cli(qrels, run, "-m", "recip_rank", "--format", "csv", "-q"))))
    assert list(rows[0]) == ["run", "qid", "measure", "value", "stderr"]
    summary = [r for r in rows if r["qid"] == "all"]
    assert float(summary[0]["stderr"]) == pytest.approx(want)
    assert all(r["stderr"] == "" for r in rows if r["qid"] != "all")


@pytest.mark.torchmetrics  # the overridden _wrap_compute (tests/conftest.py)
def test_the_wrapped_compute_hook_exists_with_the_signature_we_override():
    # metrics/_hooks.py overrides torchmetrics' private Metric._wrap_compute (the per-argument cache)
    import inspect

    from torchmetrics import Metric

    assert list(inspect.signature(Metric._wrap_compute).parameters)[:2] == ["self", "compute"]
    metric = MRR()
    metric.update(torch.tensor([[0.9, 0.1]]), torch.tensor([[1, 0]]))
    assert metric.compute() is metric.compute()  # torchmetrics' cache still serves repeated calls
