"""ItemExposure's several cutoffs, tail percentage and RecBole entropy against numpy transcriptions of
RecBole's recbole/evaluator/metrics.py (ItemCoverage, GiniIndex, ShannonEntropy, TailPercentage),
written here; several cutoffs equal one metric per cutoff (ties included); tail percentage under ties
against brute-force enumeration; gloo 3 processes (uneven, one empty) == one process."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
import torch
import torch.distributed as dist

from tests.distributed_helpers import counting_collectives, spawn
from tests.sync_guard import PATHS, select_path
from torch_rankeval.metrics import ItemExposure

pytestmark = pytest.mark.filterwarnings("ignore:Sparse (CSR tensor support is in beta|invariant checks are implicitly)")


# ---------------------------------------------------------------------------------------- RecBole transcriptions
def rb_coverage(item_matrix, num_items):
    return np.unique(item_matrix).shape[0] / num_items


def rb_gini(item_matrix, num_items):
    item_count = dict(Counter(item_matrix.flatten()))
    sorted_count = np.array(sorted(item_count.values()))
    num_recommended_items = sorted_count.shape[0]
    total_num = item_matrix.shape[0] * item_matrix.shape[1]
    idx = np.arange(num_items - num_recommended_items + 1, num_items + 1)
    return np.sum((2 * idx - num_items - 1) * sorted_count) / total_num / num_items


def rb_entropy(item_matrix):
    item_count = dict(Counter(item_matrix.flatten()))
    total_num = item_matrix.shape[0] * item_matrix.shape[1]
    result = 0.0
    for cnt in item_count.values():
        p = cnt / total_num
        result += -p * np.log(p)
    return result / len(item_count)


def rb_tail_items(count_items, tail):
    """TailPercentage.get_tail's tail set; count_items is RecBole's Counter (items with a count > 0)."""
    if tail > 1:
        return [item for item, cnt in count_items.items() if cnt <= tail]
    ordered = sorted(count_items.items(), key=lambda kv: (kv[1], kv[0]))
    cut = max(int(len(ordered) * tail), 1)
    return [item for item, cnt in ordered[:cut]]


def rb_tail_percentage(item_matrix, count_items, tail, k):
    tail_items = rb_tail_items(count_items, tail)
    value = np.array([[1 if i in tail_items else 0 for i in row] for row in item_matrix])
    per_position = (value.cumsum(axis=1) / np.arange(1, value.shape[1] + 1)).mean(axis=0)
    return per_position[k - 1]


def _data(n=30, items=25, seed=0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(n, items, generator=g, dtype=torch.float64)
    excluded = torch.rand(n, items, generator=g) < 0.2
    popularity = torch.randint(0, 6, (items,), generator=g).double()  # zeros: not in RecBole's counter
    return scores, excluded, popularity


def _item_matrix(scores, excluded, k):
    rows = []
    for row, ex in zip(scores.numpy(), excluded.numpy()):
        allowed = np.flatnonzero(~ex)
        rows.append(allowed[np.argsort(-row[allowed], kind="stable")][:k])
    return np.array(rows)


@pytest.mark.parametrize("tail_ratio", [0.2, 0.5, 1.0, 2, 3.5])
@pytest.mark.parametrize("validate_args", PATHS)
def test_equals_recbole(tail_ratio, validate_args, monkeypatch):
    validate_args = select_path(validate_args, monkeypatch)
    scores, excluded, popularity = _data()
    ks = (1, 5, 10)
    metric = ItemExposure(25, ks, popularity=popularity, tail_ratio=tail_ratio, entropy="recbole",
                          validate_args=validate_args)  # fmt: skip
    metric.update(scores[:13], excluded[:13])
    metric.update(scores[13:], excluded[13:].to_sparse())
    got = metric.compute()
    assert list(got) == [
        f"{m}@{k}" for k in ks for m in ("coverage", "gini", "entropy", "popularity", "tail_percentage")
    ]
    counter = Counter({i: int(c) for i, c in enumerate(popularity.tolist()) if c > 0})
    full = _item_matrix(scores, excluded, max(ks))
    for k in ks:
        im = full[:, :k]
        assert got[f"coverage@{k}"].item() == pytest.approx(rb_coverage(im, 25), rel=1e-6)
        assert got[f"gini@{k}"].item() == pytest.approx(rb_gini(im, 25), rel=1e-6, abs=1e-7)
        assert got[f"entropy@{k}"].item() == pytest.approx(rb_entropy(im), rel=1e-6)
        assert got[f"tail_percentage@{k}"].item() == pytest.approx(
            rb_tail_percentage(full, counter, tail_ratio, k), rel=1e-6, abs=1e-7
        )


def test_natural_entropy_is_recbole_times_the_distinct_items():
    scores, excluded, _ = _data(seed=1)
    a, b = ItemExposure(25, 4), ItemExposure(25, 4, entropy="recbole")
    a.update(scores, excluded)
    b.update(scores, excluded)
    distinct = (a.counts > 0).sum().item()
    assert a.compute()["entropy@4"].item() == pytest.approx(b.compute()["entropy@4"].item() * distinct, rel=1e-6)


@pytest.mark.parametrize("validate_args", PATHS)
@pytest.mark.parametrize("ties", ["average", "first"])
def test_several_cutoffs_equal_one_metric_per_cutoff_with_ties(validate_args, ties, monkeypatch):
    validate_args = select_path(validate_args, monkeypatch)
    scores, excluded, popularity = _data(seed=2)
    scores = (scores * 3).round()  # many ties, at and inside the cutoffs
    ks = (2, 3, 7, 25)
    many = ItemExposure(25, ks, popularity=popularity + 1, tail_ratio=0.3, ties=ties, validate_args=validate_args,
                        chunk_elements=60)  # fmt: skip
    many.update(scores, excluded)
    assert many.counts.shape == (4, 25)
    got = many.compute()
    for j, k in enumerate(ks):
        one = ItemExposure(25, k, popularity=popularity + 1, tail_ratio=0.3, ties=ties, validate_args=validate_args)
        one.update(scores, excluded)
        torch.testing.assert_close(many.counts[j], one.counts, rtol=0, atol=1e-12)
        for key, value in one.compute().items():
            assert got[key].item() == pytest.approx(value.item(), rel=1e-6, abs=1e-7), key


@pytest.mark.parametrize("validate_args", PATHS)
def test_tail_percentage_ties_against_enumeration(validate_args, monkeypatch):
    validate_args = select_path(validate_args, monkeypatch)
    g = torch.Generator().manual_seed(5)
    scores = torch.randint(0, 3, (10, 7), generator=g).double()
    scores[0] = 1.0
    excluded = torch.rand(10, 7, generator=g) < 0.2
    popularity = torch.tensor([5.0, 1.0, 2.0, 0.0, 9.0, 3.0, 1.0])
    tail = set(rb_tail_items(Counter({i: int(c) for i, c in enumerate(popularity.tolist()) if c > 0}), 0.5))
    ks = (1, 2, 4, 7)
    metric = ItemExposure(7, ks, popularity=popularity, tail_ratio=0.5, validate_args=validate_args, chunk_elements=10)
    metric.update(scores, excluded)
    got = metric.compute()
    for k in ks:
        per_user = []
        for row, ex in zip(scores.tolist(), excluded.tolist()):
            allowed = [j for j in range(7) if not ex[j]]
            if not allowed:
                continue
            levels = sorted({row[j] for j in allowed}, reverse=True)
            groups = [[j for j in allowed if row[j] == lvl] for lvl in levels]
            orders = [[j for grp in o for j in grp] for o in itertools.product(*map(itertools.permutations, groups))]
            per_user.append(np.mean([np.mean([i in tail for i in o[:k]]) for o in orders]))
        assert got[f"tail_percentage@{k}"].item() == pytest.approx(np.mean(per_user), rel=1e-6, abs=1e-7)


def test_bad_arguments():
    with pytest.raises(ValueError, match="tail_ratio needs popularity"):
        ItemExposure(5, 2, tail_ratio=0.1)
    with pytest.raises(ValueError, match="tail_ratio must be a ratio in"):
        ItemExposure(5, 2, popularity=torch.ones(5), tail_ratio=-1)
    with pytest.raises(ValueError, match="no item has popularity > 0"):
        ItemExposure(5, 2, popularity=torch.zeros(5), tail_ratio=0.5)
    with pytest.raises(ValueError, match="entropy='log2' is not valid"):
        ItemExposure(5, 2, entropy="log2")
    with pytest.raises(ValueError, match="k=6 is larger than the catalogue"):
        ItemExposure(5, (2, 6))
    with pytest.raises(ValueError, match="repeats a cutoff"):
        ItemExposure(5, (2, 2))
    with pytest.raises(ValueError, match="other cutoffs"):
        ItemExposure(5, (1, 2)).merge_state({"counts": torch.zeros(5, dtype=torch.float64)})
    with pytest.raises(ValueError, match="different configuration"):
        ItemExposure(5, (1, 2)).merge_state(ItemExposure(5, (1, 3)))


# ---------------------------------------------------------------------------------------- distributed
def _make(popularity):
    return ItemExposure(25, (3, 10), popularity=popularity, tail_ratio=0.4, entropy="recbole")


def _dist_worker(rank, world, rdv, out):
    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=world)
    scores, excluded, popularity = _data(n=40, seed=9)
    metric = _make(popularity)
    for i, (a, b) in enumerate([(0, 25), (25, 26), (26, 40)]):
        if i % 2 == rank:  # rank 2 of 3 sees nothing
            metric.update((scores[a:b] * 4).round(), excluded[a:b].to_sparse() if rank else excluded[a:b])
    with counting_collectives() as calls:
        result = {key: v.item() for key, v in metric.compute().items()}
    torch.save({"result": result, "calls": calls}, f"{out}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


def test_gloo_three_processes_equal_one_process(tmp_path):
    out = tmp_path / "result"
    spawn(_dist_worker, (3, str(tmp_path / "rdv"), str(out)), 3)
    scores, excluded, popularity = _data(n=40, seed=9)
    single = _make(popularity)
    single.update((scores * 4).round(), excluded)
    want = {key: v.item() for key, v in single.compute().items()}
    for rank in range(3):
        res = torch.load(f"{out}.{rank}")
        for key, value in want.items():
            assert res["result"][key] == pytest.approx(value, rel=1e-6, abs=1e-7), (rank, key)
        assert res["calls"]["all_reduce"] == 1 and res["calls"]["all_gather"] == 0
        assert res["calls"]["bytes"] == 8 * (2 * 25 + 4)
