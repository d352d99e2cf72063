"""Issue 27 (third reliability round), items 3, 4, 10, 11, 12: each against an independent oracle."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from torch_rankeval.metrics import ItemExposure


# ---------------------------------------------------------------------------------------- 3: RecBole's tail
def _scores_of(item_matrix, num_items):
    """Scores whose top-k lists are the rows of ``item_matrix``, in order (the other items score 0)."""
    scores = torch.zeros(len(item_matrix), num_items, dtype=torch.float64)
    for r, row in enumerate(item_matrix):
        for j, item in enumerate(row):
            scores[r, item] = len(row) - j
    return scores


def test_tail_percentage_equals_recbole_test_tailpercentage():
    """RecBole tests/metrics/test_topk_metrics.py::TestTopKMetrics::test_tailpercentage: its fixture
    (item_matrix, num_items=8, item_count with item 1 counted 0 times; tail_ratio unset, so 0.1) and its
    expected per-user, per-position values [[0,0,0],[0,0,0],[0,0,0],[1/1,1/2,1/3],[0,0,0]], averaged over
    the five users at each position k as RecBole's topk_result does."""
    item_matrix = [[5, 7, 3], [4, 5, 2], [2, 3, 5], [1, 4, 6], [5, 3, 7]]
    item_count = {1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 6: 5}
    expected = np.array([[0, 0, 0], [0, 0, 0], [0, 0, 0], [1 / 1, 1 / 2, 1 / 3], [0, 0, 0]]).mean(axis=0)
    metric = ItemExposure(8, (1, 2, 3), popularity=item_count, tail_ratio=0.1)
    assert metric.tail.tolist() == [False, True, False, False, False, False, False, False]  # item 1, count 0
    metric.update(_scores_of(item_matrix, 8))
    got = metric.compute()
    for k in (1, 2, 3):
        assert got[f"tail_percentage@{k}"].item() == pytest.approx(expected[k - 1], rel=1e-6)
    # RecBole's test_averagepopularity on the same fixture (item_count.get(item, 0)), at k = 3
    assert got["popularity@3"].item() == pytest.approx(np.mean([6 / 3, 8 / 3, 7 / 3, 8 / 3, 6 / 3]), rel=1e-6)


@pytest.mark.parametrize("tail_ratio", [0.1, 0.3, 0.5, 1.0, 2, 3.5])
def test_tail_of_a_counter_with_zero_counts_equals_recbole_get_tail(tail_ratio):
    """A counter holding zero counts (random, many ties of popularity) against a transcription of
    RecBole's TailPercentage.get_tail (recbole/evaluator/metrics.py), key for key."""
    from tests.test_exposure_recbole import rb_tail_items

    g = torch.Generator().manual_seed(3)
    counts = torch.randint(0, 4, (30,), generator=g)
    keys = torch.randperm(30, generator=g)[:22].tolist()
    counter = Counter({np.int64(i): np.int64(counts[i]) for i in keys})  # RecBole's Counter has numpy keys
    metric = ItemExposure(30, 5, popularity=counter, tail_ratio=tail_ratio)
    want = sorted(int(i) for i in rb_tail_items(dict(counter), tail_ratio))
    assert torch.nonzero(metric.tail).flatten().tolist() == want
    assert any(counts[i] == 0 for i in want)  # the fixture does put zero-count items in the tail


def test_counter_popularity_bad_keys():
    with pytest.raises(ValueError, match=r"item indices in \[0, 4\)"):
        ItemExposure(4, 2, popularity={7: 1.0})
    with pytest.raises(ValueError, match="finite numbers"):
        ItemExposure(4, 2, popularity={1: "a"})


# ---------------------------------------------------------------------------------------- 4: Lightning slots
def test_validate_after_a_fit_with_two_loaders_logs_one_loader_without_suffix(tmp_path):
    """fit with two validation loaders, then validate (and fit again) with one: each loop logs the keys
    of its own loaders, exactly, and the values of its own data."""
    from tests.lightning_helpers import LinearRanker, dataset, loader, quiet_trainer
    from torch_rankeval import functional as F
    from torch_rankeval.lightning import RankingMetricsCallback

    train, val, other, model = dataset(8, seed=1), dataset(9, seed=2), dataset(7, seed=3), LinearRanker()
    callback = RankingMetricsCallback(("ndcg", "map"), k=10)
    trainer = quiet_trainer(tmp_path, [callback], max_epochs=1)
    trainer.fit(model, loader(train, 4, exact=False), [loader(val, 3, exact=True), loader(other, 3, exact=True)])
    two = {f"val/{m}@10/dataloader_idx_{i}" for m in ("ndcg", "map") for i in (0, 1)}
    assert {k for k in trainer.callback_metrics if k.startswith("val/")} == two
    (logged,) = trainer.validate(model, loader(val, 3, exact=True), verbose=False)
    assert set(logged) == {"val/ndcg@10", "val/map@10"}
    assert set(callback.results["validate"]) == {"val/ndcg@10", "val/map@10"}
    batch = val.padded()
    with torch.no_grad():
        want = F.ndcg(model(batch["features"]), batch["target"], k=10, mask=batch["mask"]).item()
    assert logged["val/ndcg@10"] == pytest.approx(want, abs=1e-6)
    assert len(callback._slots["validate"]) == 1
    # and back: two loaders again get two slots, fresh
    logged = trainer.validate(model, [loader(other, 3, exact=True), loader(val, 3, exact=True)], verbose=False)
    assert set(logged[0]) | set(logged[1]) == two
    assert logged[1]["val/ndcg@10/dataloader_idx_1"] == pytest.approx(want, abs=1e-6)


# ---------------------------------------------------------------------------------------- 10: 1-D without indexes
@pytest.mark.parametrize("validate_args", [True, False])
def test_flat_input_without_indexes_is_an_error_naming_indexes(validate_args):
    """A torchmetrics user's flat (D,) input without indexes= is refused (not one giant query), with or
    without validation; the documented spellings of one list give the number of the (1, L) batch, which
    is torchmetrics' own nDCG of that list."""
    from torchmetrics.functional.retrieval import retrieval_normalized_dcg

    from tests.sync_guard import HostSyncGuard
    from torch_rankeval import NDCG, RankingMetrics

    preds = torch.tensor([0.9, 0.2, 0.5, 0.5, 0.1])
    target = torch.tensor([0, 1, 1, 0, 2])
    for make in (
        lambda: NDCG(k=3, convention="torchmetrics", validate_args=validate_args),
        lambda: RankingMetrics(("ndcg@3", "map")),
    ):
        with pytest.raises(ValueError, match=r"without indexes=.*\(1, L\) batch.*indexes=torch.zeros_like\(preds"):
            make().update(preds, target)
    with HostSyncGuard():  # the refusal reads shapes only: no host sync
        with pytest.raises(ValueError, match="indexes="):
            NDCG(k=3, validate_args=False).update(preds, target)
    want = retrieval_normalized_dcg(preds, target, top_k=3).item()
    spellings = (
        (NDCG(k=3, convention="torchmetrics", validate_args=validate_args), (preds[None], target[None]), {}),
        (
            NDCG(k=3, convention="torchmetrics", validate_args=validate_args),
            (preds, target),
            {"indexes": torch.zeros_like(preds, dtype=torch.long)},
        ),
        (NDCG(k=3, convention="torchmetrics", validate_args=validate_args, input_format="padded"), (preds, target), {}),
        (
            NDCG(k=3, convention="torchmetrics", validate_args=validate_args),
            (preds, target),
            {"mask": torch.ones(5, dtype=torch.bool)},
        ),
    )
    for metric, args, kw in spellings:
        metric.update(*args, **kw)
        assert metric.compute().item() == pytest.approx(want, abs=1e-6)
