"""torch.distributed (gloo, 2 and 3 CPU processes): synced results equal the single-process result on
the union of the data, with uneven shards, a rank that saw nothing, and queries split across ranks;
a padded-only metric syncs with exactly one all-reduce."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from tests.distributed_helpers import counting_collectives, spawn
from tests.oracles import random_batch
from torch_rankeval import NDCG, RankingMetrics

METRICS = ("ndcg@5", "ndcg", "map", "mrr@10", "precision@3", "recall@10", "hit_rate@1", "r_precision")


def _padded_shards(world):
    """Uneven shards: rank 0 gets 3 updates, rank 1 one, rank 2 (if any) none."""
    preds, target, mask, ideal = random_batch(41, 9, seed=21, extra_judged=3)
    cuts = {2: [(0, 10), (10, 17), (17, 30), (30, 41)], 3: [(0, 10), (10, 17), (17, 30), (30, 41)]}[world]
    owner = {2: [0, 0, 0, 1], 3: [0, 0, 0, 1]}[world]
    return (preds, target, mask, ideal), cuts, owner


def _flat_shards():
    g = torch.Generator().manual_seed(22)
    n = 300
    preds = torch.rand(n, generator=g, dtype=torch.float64)
    target = torch.randint(0, 3, (n,), generator=g)
    indexes = torch.randint(0, 25, (n,), generator=g)  # queries spread over every rank
    return preds, target, indexes


def _worker(rank, world, rdv, out):
    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=world)
    results = {}
    (preds, target, mask, ideal), cuts, owner = _padded_shards(world)

    metric = RankingMetrics(METRICS, keep_per_query=False)
    for (a, b), o in zip(cuts, owner):
        if o == rank:
            metric.update(preds[a:b], target[a:b], mask=mask[a:b], ideal_target=ideal[a:b])
    with counting_collectives() as calls:
        results["padded"] = {k: v.item() for k, v in metric.compute().items()}
    results["calls"] = calls

    per_query = RankingMetrics(("ndcg@5",), keep_per_query=True)
    for (a, b), o in zip(cuts, owner):
        if o == rank:
            per_query.update(preds[a:b], target[a:b], mask=mask[a:b])
    pq = per_query.compute_per_query()
    results["per_query_ids"] = pq["query_id"].tolist()
    results["per_query_mean"] = pq["ndcg@5"].mean().item()

    fp, ft, fi = _flat_shards()
    flat = NDCG(k=3, keep_per_query=True)
    mine = torch.arange(fp.shape[0]) % world == rank  # documents of one query land on several ranks
    if rank != world - 1 or world == 2:  # with 3 ranks, the last rank gets no flat data
        flat.update(fp[mine], ft[mine], indexes=fi[mine])
    results["flat"] = flat.compute().item()
    results["flat_ids"] = flat.compute_per_query()["query_id"].tolist()
    torch.save(results, f"{out}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


def _single_process(world):
    (preds, target, mask, ideal), cuts, owner = _padded_shards(world)
    m = RankingMetrics(METRICS)
    m.update(preds, target, mask=mask, ideal_target=ideal)
    fp, ft, fi = _flat_shards()
    if world == 3:
        keep = torch.arange(fp.shape[0]) % 3 != 2
        fp, ft, fi = fp[keep], ft[keep], fi[keep]
    f = NDCG(k=3)
    f.update(fp, ft, indexes=fi)
    pq = RankingMetrics(("ndcg@5",))
    pq.update(preds, target, mask=mask)
    return (
        {k: v.item() for k, v in m.compute().items()},
        f.compute().item(),
        pq.compute()["ndcg@5"].item(),
        fi.unique().tolist(),
    )


@pytest.mark.parametrize("world", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_distributed_equals_single_process_on_the_union(world, tmp_path):
    out = tmp_path / "result"
    spawn(_worker, (world, str(tmp_path / "rdv"), str(out)), world)
    padded, flat, pq_mean, flat_ids = _single_process(world)
    for rank in range(world):
        res = torch.load(f"{out}.{rank}")
        for key, value in padded.items():
            assert res["padded"][key] == pytest.approx(value, abs=1e-6), (rank, key)
        # one all-reduce of (sums, counts, list sizes) and nothing gathered for a padded-only metric
        assert res["calls"]["all_reduce"] == 1 and res["calls"]["all_gather"] == 0
        assert res["calls"]["bytes"] == 8 * (3 * len(padded) + 5)  # sums, squares, counts, list sizes
        # generated per-query ids are global: 41 distinct queries, none merged
        assert sorted(res["per_query_ids"]) == sorted(set(res["per_query_ids"])) and len(res["per_query_ids"]) == 41
        assert res["per_query_mean"] == pytest.approx(pq_mean, abs=1e-6)
        # flat: a query's documents split over ranks are one query
        assert res["flat"] == pytest.approx(flat, abs=1e-6)
        assert res["flat_ids"] == flat_ids
