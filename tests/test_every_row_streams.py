"""Every measure of the registry streams and syncs like every other (issue 28: each new definition is
"streaming and exact under DDP like every other measure"): for every ad-hoc row (its required
parameters given their documented example), a ``RankingMetrics`` fed the batch in uneven chunks gives
the one-shot :func:`~torch_rankeval.functional.evaluate` mean, and two gloo processes holding
uneven shards (one update on one rank, three on the other) give the single process's values after
the sync. The measures come from the rows, so a row added later is covered without a line here."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from tests.distributed_helpers import spawn
from tests.oracles import random_batch
from torch_rankeval import RankingMetrics
from torch_rankeval import functional as F
from torch_rankeval.measures import FAMILIES

CUTS = [(0, 10), (10, 17), (17, 30), (30, 41)]
OWNER = [0, 0, 0, 1]  # rank 0 three updates, rank 1 one


def _names() -> list[str]:
    """One name per ad-hoc row that has per-query values (no run tag, no text), required parameters
    set to their documented example, cutoff measures at 5, ``@``-parameter measures at 0.5."""
    names = []
    for key, row in FAMILIES.items():
        if row.kernel is None or row.subtopics or row.aggregate in ("info", "text"):
            continue
        required = [p for p in row.params if getattr(p, "required", False)]
        name = key + ("(" + ",".join(f"{p.name}={p.example}" for p in required) + ")" if required else "")
        if row.at != "cutoff":
            name += "@0.5"
        elif row.cutoff:
            name += "@5"
        names.append(name)
    return names


NAMES = _names()


def _batch():
    preds, target, mask, ideal = random_batch(41, 9, seed=21, extra_judged=3)
    return preds, target, mask, ideal


def _metric() -> RankingMetrics:
    # ties="first": several rows have no exact tie-averaged value (ties_average=False); streaming and
    # syncing do not depend on the tie rule
    return RankingMetrics(NAMES, ties="first", empty_target_action="neg")


def test_the_rows_cover_this_rounds_measures():
    for key in ("ncrr@5", "pwa@5", "compat", "pairwise_accuracy@5", "bpm@5", "insq", "nerr11", "sdcg@5"):
        assert key in NAMES
    assert "mcc(catalog_size=1000)@5" in NAMES and len(NAMES) >= 55


def test_uneven_updates_equal_one_evaluation():
    preds, target, mask, ideal = _batch()
    metric = _metric()
    for a, b in CUTS:
        metric.update(preds[a:b], target[a:b], mask=mask[a:b], ideal_target=ideal[a:b])
    streamed = metric.compute()
    once = F.evaluate(preds, target, NAMES, mask=mask, ideal_target=ideal, ties="first", empty_target_action="neg")
    assert set(streamed) == set(once)
    for name, value in once.items():
        assert torch.isfinite(streamed[name]), name
        assert streamed[name].item() == pytest.approx(value.item(), rel=1e-6, abs=1e-9), name


def _worker(rank: int, world: int, rdv: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=world)
    preds, target, mask, ideal = _batch()
    metric = _metric()
    for (a, b), owner in zip(CUTS, OWNER):
        if owner == rank:
            metric.update(preds[a:b], target[a:b], mask=mask[a:b], ideal_target=ideal[a:b])
    torch.save({k: v.item() for k, v in metric.compute().items()}, f"{out}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


def test_two_processes_equal_one(tmp_path):
    out = tmp_path / "result"
    spawn(_worker, (2, str(tmp_path / "rdv"), str(out)), 2)
    preds, target, mask, ideal = _batch()
    single = _metric()
    single.update(preds, target, mask=mask, ideal_target=ideal)
    want = {k: v.item() for k, v in single.compute().items()}
    for rank in range(2):
        got = torch.load(f"{out}.{rank}")
        assert set(got) == set(want)
        for name, value in want.items():
            assert got[name] == pytest.approx(value, rel=1e-6, abs=1e-9), (rank, name)
