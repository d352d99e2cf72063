"""ItemExposure: coverage / Gini / entropy / popularity against a plain numpy computation, ties at the
cutoff against brute-force enumeration of tie orders, the Metric contract (pickle, merge_state,
state_dict, empty updates, dtype moves), validation, and gloo 2-process sync == one process."""

from __future__ import annotations

import itertools
import math
import pickle

import numpy as np
import pytest
import torch
import torch.distributed as dist

from tests.distributed_helpers import counting_collectives, spawn
from tests.sync_guard import PATHS, select_path
from torch_rankeval.metrics import ItemExposure

pytestmark = pytest.mark.filterwarnings("ignore:Sparse (CSR tensor support is in beta|invariant checks are implicitly)")


# ---------------------------------------------------------------------------------------- numpy oracle
def numpy_exposure(scores, excluded, k, popularity=None):
    """Top-k histogram with a plain numpy argsort (distinct scores), then the measures."""
    scores, excluded = np.asarray(scores, dtype=np.float64), np.asarray(excluded, dtype=bool)
    n_items = scores.shape[1]
    counts = np.zeros(n_items)
    for row, ex in zip(scores, excluded):
        allowed = np.flatnonzero(~ex)
        top = allowed[np.argsort(-row[allowed], kind="stable")][:k]
        counts[top] += 1
    return counts, numpy_measures(counts, k, popularity)


def numpy_measures(counts, k, popularity=None):
    n = counts.size
    total = counts.sum()
    c = np.sort(counts)
    gini = np.sum((2 * np.arange(1, n + 1) - n - 1) * c) / (n * total)
    p = counts[counts > 0] / total
    out = {f"coverage@{k}": np.count_nonzero(counts) / n, f"gini@{k}": gini, f"entropy@{k}": -np.sum(p * np.log(p))}
    if popularity is not None:
        out[f"popularity@{k}"] = np.sum(counts * np.asarray(popularity, dtype=np.float64)) / total
    return out


def _data(n=40, items=30, seed=0, p_exclude=0.2):
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(n, items, generator=g, dtype=torch.float64)
    excluded = torch.rand(n, items, generator=g) < p_exclude
    excluded[0, :-3] = True  # a row with fewer than k non-excluded items
    excluded[1] = True  # a row with none
    popularity = torch.randint(0, 100, (items,), generator=g).double()
    return scores, excluded, popularity


@pytest.mark.parametrize("exclude_kind", ["none", "dense", "sparse"])
@pytest.mark.parametrize("validate_args", PATHS)
def test_against_numpy(exclude_kind, validate_args, monkeypatch):
    validate_args = select_path(validate_args, monkeypatch)
    scores, excluded, popularity = _data()
    if exclude_kind == "none":
        excluded = torch.zeros_like(excluded)
    for k in (1, 5, 30):
        metric = ItemExposure(30, k, popularity=popularity, validate_args=validate_args)
        for a, b in ((0, 25), (25, 40)):
            part = excluded[a:b]
            metric.update(scores[a:b], {"none": None, "dense": part, "sparse": part.to_sparse_csr()}[exclude_kind])
        counts, want = numpy_exposure(scores, excluded, k, popularity)
        np.testing.assert_allclose(metric.counts.numpy(), counts, atol=1e-12)
        got = metric.compute()
        assert list(got) == list(want)
        for key, value in want.items():
            assert got[key].item() == pytest.approx(value, rel=1e-6, abs=1e-6), key


def test_hand_examples():
    # one item takes every slot: Gini 1 - 1/n, entropy 0, coverage 1/n
    m = ItemExposure(4, 1)
    m.update(torch.tensor([[0.9, 0.1, 0.2, 0.3], [0.8, 0.1, 0.2, 0.3]]))
    out = m.compute()
    assert (
        out["coverage@1"].item() == 0.25
        and out["gini@1"].item() == pytest.approx(0.75)
        and out["entropy@1"].item() == 0
    )
    # every item equally exposed: Gini 0, entropy log n, coverage 1
    m = ItemExposure(3, 1)
    m.update(torch.eye(3))
    out = m.compute()
    assert out["gini@1"].item() == pytest.approx(0.0, abs=1e-7) and out["entropy@1"].item() == pytest.approx(
        math.log(3)
    )
    assert out["coverage@1"].item() == 1.0


# ---------------------------------------------------------------------------------------- ties
def _enumerated_counts(scores, excluded, k):
    """Expected top-k histogram over every order of tied items (all orders equally likely)."""
    counts = np.zeros(len(scores[0]))
    for row, ex in zip(scores, excluded):
        allowed = [j for j in range(len(row)) if not ex[j]]
        levels = sorted({row[j] for j in allowed}, reverse=True)
        groups = [[j for j in allowed if row[j] == lvl] for lvl in levels]
        orders = list(itertools.product(*[itertools.permutations(g) for g in groups]))
        for order in orders:
            ranked = [j for group in order for j in group]
            for j in ranked[:k]:
                counts[j] += 1.0 / len(orders)
    return counts


@pytest.mark.parametrize("validate_args", PATHS)
@pytest.mark.parametrize("exclude_kind", ["dense", "sparse"])
def test_ties_at_the_cutoff_against_enumeration(validate_args, exclude_kind, monkeypatch):
    validate_args = select_path(validate_args, monkeypatch)
    g = torch.Generator().manual_seed(3)
    scores = torch.randint(0, 3, (12, 7), generator=g).float()
    scores[0] = 1.0  # every score tied
    excluded = torch.rand(12, 7, generator=g) < 0.2
    exclude = excluded if exclude_kind == "dense" else excluded.to_sparse()
    for k in (1, 2, 3, 6, 7):
        metric = ItemExposure(7, k, validate_args=validate_args, chunk_elements=10)
        metric.update(scores, exclude=exclude)
        want = _enumerated_counts(scores.tolist(), excluded.tolist(), k)
        np.testing.assert_allclose(metric.counts.numpy(), want, atol=1e-12)
        got = metric.compute()
        for key, value in numpy_measures(want, k).items():
            assert got[key].item() == pytest.approx(value, abs=1e-6)


def test_ties_first_takes_input_order():
    scores = torch.tensor([[0.5, 0.9, 0.5, 0.5, 0.1]])
    m = ItemExposure(5, 3, ties="first")
    m.update(scores)
    assert m.counts.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    m = ItemExposure(5, 3)  # average: 2 slots for 3 tied items
    m.update(scores)
    assert m.counts.tolist() == pytest.approx([2 / 3, 1.0, 2 / 3, 2 / 3, 0.0])


# ---------------------------------------------------------------------------------------- metric contract
def test_no_update_is_nan_with_a_warning_and_empty_update_is_a_no_op():
    m = ItemExposure(5, 2, popularity=torch.arange(5.0))
    with pytest.warns(UserWarning, match="no recommendation slot was filled"):
        out = m.compute()
    assert set(out) == {"coverage@2", "gini@2", "entropy@2", "popularity@2"} and all(
        torch.isnan(v) for v in out.values()
    )
    m.update(torch.zeros(0, 5))
    assert m.counts.sum().item() == 0
    m.update(torch.rand(3, 5), exclude=torch.ones(3, 5, dtype=torch.bool))  # every item excluded: nothing filled
    with pytest.warns(UserWarning):
        m.compute()
    m.update(torch.tensor([0.1, 0.9, 0.2, 0.0, 0.3]))  # one user as a 1-D row
    assert m.counts.tolist() == [0.0, 1.0, 0.0, 0.0, 1.0]


def test_validation_errors():
    with pytest.raises(ValueError, match="k=6 is larger than the catalogue"):
        ItemExposure(5, 6)
    with pytest.raises(ValueError, match="num_items must be a positive int"):
        ItemExposure(0, 1)
    with pytest.raises(ValueError, match="ties='random' is not valid"):
        ItemExposure(5, 2, ties="random")
    with pytest.raises(ValueError, match="popularity must be a real"):
        ItemExposure(5, 2, popularity=torch.ones(4))
    with pytest.raises(ValueError, match="finite"):
        ItemExposure(5, 2, popularity=torch.tensor([1.0, float("nan"), 0, 0, 0]))
    m = ItemExposure(5, 2)
    with pytest.raises(ValueError, match=r"preds must be \(N, num_items\) = \(N, 5\)"):
        m.update(torch.rand(2, 4))
    with pytest.raises(TypeError, match="preds must be a floating tensor"):
        m.update(torch.ones(2, 5, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"exclude must have the shape of preds \(2, 5\)"):
        m.update(torch.rand(2, 5), exclude=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="exclude must be a bool tensor"):
        m.update(torch.rand(2, 5), exclude=torch.zeros(2, 5))
    with pytest.raises(ValueError, match="NaN or infinite scores"):
        m.update(torch.tensor([[0.1, float("nan"), 0.2, 0.3, 0.4]]))
    with pytest.raises(ValueError, match="exclude is on"):
        m.update(torch.rand(1, 5), exclude=torch.zeros(1, 5, dtype=torch.bool, device="meta"))


def _legacy_digest(num_items, k, ties, popularity) -> str:
    """The configuration key that versions before the state_dict metadata wrote (15 hex digits of a sha1)."""
    import hashlib

    config = f"{num_items}|{k}|{ties}|" + popularity.double().numpy().tobytes().hex()
    return hashlib.sha1(config.encode()).hexdigest()[:15]


def test_pickle_clone_merge_and_state_dict():
    scores, excluded, popularity = _data(seed=4)
    whole = ItemExposure(30, 5, popularity=popularity)
    whole.update(scores, exclude=excluded)
    a, b = ItemExposure(30, 5, popularity=popularity), ItemExposure(30, 5, popularity=popularity)
    a.update(scores[:10], exclude=excluded[:10])
    b.update(scores[10:], exclude=excluded[10:])
    restored = pickle.loads(pickle.dumps(a))
    assert torch.equal(restored.counts, a.counts) and torch.equal(restored.popularity, popularity)
    c = a.clone()
    c.merge_state(b)
    for key, value in whole.compute().items():
        assert c.compute()[key].item() == pytest.approx(value.item(), abs=1e-7)
    # a plain state dict merges too
    d = restored
    d.merge_state({"counts": b.counts})
    assert torch.allclose(d.counts, whole.counts)
    # foreign states are refused
    with pytest.raises(ValueError, match="different configuration"):
        ItemExposure(30, 4, popularity=popularity).merge_state(b)
    with pytest.raises(ValueError, match="different configuration"):
        ItemExposure(30, 5).merge_state(b)
    with pytest.raises(ValueError, match="another catalogue"):
        ItemExposure(31, 5).merge_state({"counts": b.counts})
    # state_dict round trip, and refusal of another configuration's state
    b.persistent(True)
    state = b.state_dict()
    assert set(state) == {"counts"}  # the configuration rides in the metadata, as for every metric
    e = ItemExposure(30, 5, popularity=popularity)
    e.load_state_dict(state)
    assert torch.equal(e.counts, b.counts)
    with pytest.raises(ValueError, match="different configuration"):
        ItemExposure(30, 3, popularity=popularity).load_state_dict(state)
    # a state_dict of the previous version (an "_exposure_config" key, no metadata) still loads and is checked
    legacy = {
        "counts": b.counts.clone(),
        "_exposure_config": torch.tensor([int(_legacy_digest(30, 5, "average", popularity), 16)]),
    }
    f = ItemExposure(30, 5, popularity=popularity)
    f.load_state_dict(dict(legacy))
    assert torch.equal(f.counts, b.counts)
    with pytest.raises(ValueError, match="different configuration"):
        ItemExposure(30, 5, ties="first", popularity=popularity).load_state_dict(dict(legacy))
    with pytest.raises(ValueError, match="another catalogue"):
        ItemExposure(29, 5).load_state_dict({"counts": torch.zeros(30, dtype=torch.float64)})
    # an unpersisted metric has no state entries
    assert ItemExposure(30, 5).state_dict() == {}


def test_forward_half_and_reset_keep_float64_counts():
    m = ItemExposure(4, 2)
    batch = m(torch.tensor([[0.9, 0.8, 0.1, 0.0]]))
    assert batch["coverage@2"].item() == 0.5
    m(torch.tensor([[0.0, 0.1, 0.8, 0.9]]))
    assert m.compute()["coverage@2"].item() == 1.0
    m.half()
    m.set_dtype(torch.float16)
    assert m.counts.dtype == torch.float64 and m.compute()["gini@2"].dtype == torch.float16
    m.reset()
    assert m.counts.dtype == torch.float64 and m.counts.sum().item() == 0


def test_float16_scores_match_float64():
    scores, excluded, _ = _data(seed=7)
    scores = scores.half()  # ties appear after rounding: averaged the same way in both
    a, b = ItemExposure(30, 4), ItemExposure(30, 4)
    a.update(scores, exclude=excluded)
    b.update(scores.double(), exclude=excluded.to_sparse())
    assert torch.allclose(a.counts, b.counts)


# ---------------------------------------------------------------------------------------- distributed
def _dist_worker(rank, world, rdv, out):
    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=world)
    scores, excluded, popularity = _data(n=50, seed=9)
    scores = (scores * 4).round()  # ties at the cutoff
    metric = ItemExposure(30, 4, popularity=popularity)
    shards = [(0, 20), (20, 23), (23, 50)]
    for i, (a, b) in enumerate(shards):
        if i % world == rank:
            metric.update(scores[a:b], exclude=excluded[a:b].to_sparse() if rank else excluded[a:b])
    with counting_collectives() as calls:
        result = {key: v.item() for key, v in metric.compute().items()}
    torch.save({"result": result, "calls": calls}, f"{out}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


def test_gloo_two_processes_equal_one_process(tmp_path):
    out = tmp_path / "result"
    spawn(_dist_worker, (2, str(tmp_path / "rdv"), str(out)), 2)
    scores, excluded, popularity = _data(n=50, seed=9)
    single = ItemExposure(30, 4, popularity=popularity)
    single.update((scores * 4).round(), exclude=excluded)
    want = {key: v.item() for key, v in single.compute().items()}
    for rank in range(2):
        res = torch.load(f"{out}.{rank}")
        for key, value in want.items():
            assert res["result"][key] == pytest.approx(value, abs=1e-9), (rank, key)
        assert res["calls"]["all_reduce"] == 1 and res["calls"]["all_gather"] == 0
        assert res["calls"]["bytes"] == 8 * 30
