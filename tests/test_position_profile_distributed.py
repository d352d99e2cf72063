"""PositionProfile under torch.distributed (gloo, 2 CPU processes): the synced profile and per-query
rows equal the single-process result on the union of the data, with one all-reduce for the profile."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from tests.distributed_helpers import counting_collectives, spawn
from tests.oracles import random_batch
from torch_rankeval import PositionProfile

POSITIONS = 12  # beyond the longest list (9): positions 10-12 are NaN everywhere


def _data():
    preds, target, mask, ideal = random_batch(23, 9, seed=31, extra_judged=4)
    preds = (preds * 2).round() / 2  # ties, averaged
    return preds, target, mask, ideal


def _worker(rank, world, rdv, out):
    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=world)
    preds, target, mask, ideal = _data()
    mine = slice(0, 15) if rank == 0 else slice(15, 23)  # uneven shards
    ids = torch.arange(23)[mine]

    profile = PositionProfile(positions=POSITIONS)
    profile.update(preds[mine], target[mine], mask=mask[mine], ideal_target=ideal[mine])
    with counting_collectives() as calls:
        result = {"profile": profile.compute()}
    result["calls"] = calls
    rows = PositionProfile(positions=POSITIONS, keep_per_query=True)
    rows.update(preds[mine], target[mine], ids, mask=mask[mine], ideal_target=ideal[mine])
    result["rows"] = rows.compute_per_query()
    torch.save(result, f"{out}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.slow
def test_two_processes_equal_one_process(tmp_path):
    out = tmp_path / "result"
    spawn(_worker, (2, str(tmp_path / "rdv"), str(out)), 2)
    preds, target, mask, ideal = _data()
    single = PositionProfile(positions=POSITIONS, keep_per_query=True)
    single.update(preds, target, torch.arange(23), mask=mask, ideal_target=ideal)
    expected, expected_rows = single.compute(), single.compute_per_query()
    assert expected["count"][-1].item() == 0 and expected["n_queries"].item() == 23
    for rank in range(2):
        res = torch.load(f"{out}.{rank}")
        assert (res["calls"]["all_reduce"], res["calls"]["all_gather"]) == (1, 0)  # the whole profile in one all-reduce
        for key, value in expected.items():
            torch.testing.assert_close(res["profile"][key], value, equal_nan=True, atol=1e-6, rtol=0)
        assert res["rows"]["query_id"].tolist() == list(range(23))
        for key, value in expected_rows.items():
            torch.testing.assert_close(res["rows"][key], value, equal_nan=True, atol=1e-6, rtol=0)
