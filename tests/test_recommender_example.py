"""examples/recommender_eval.py: a matrix-factorisation model trained with Lightning beats random and
most-popular scores on full-catalogue validation, and every logged number equals an independent
computation (torchmetrics' functional metrics per user, numpy) on the final model's scores."""

from __future__ import annotations

import importlib.util
import math
import sys

import numpy as np
import pytest
import torch
from torchmetrics.functional.retrieval import retrieval_normalized_dcg, retrieval_recall

pl = pytest.importorskip("lightning.pytorch")

from tests.conftest import REPO
from tests.lightning_helpers import single_thread  # noqa: F401

K = 20
EPOCHS = 4
ARGS = ["--epochs", str(EPOCHS)]  # the example's defaults otherwise: 600 users x 2,000 items

pytestmark = pytest.mark.usefixtures("single_thread")  # one thread, as the script itself uses


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("recommender_eval", REPO / "examples" / "recommender_eval.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["recommender_eval"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["recommender_eval"]


@pytest.fixture(scope="module")
def run(example):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield example.main(ARGS)
    finally:
        torch.set_num_threads(threads)


def _numpy_reference(scores: np.ndarray, train_ids: np.ndarray, held_out: np.ndarray) -> dict[str, np.ndarray]:
    """Per user, by hand: drop the seen items, sort the rest by score, read the top 20."""
    num_items = scores.shape[1]
    ndcg, recall, ap, top_items = [], [], [], []
    for s, seen, targets in zip(scores, train_ids, held_out):
        keep = np.setdiff1d(np.arange(num_items), seen[seen >= 0])
        order = keep[np.argsort(-s[keep], kind="stable")]
        top = order[:K]
        hits = np.isin(top, targets).astype(np.float64)
        n_rel = len(targets)
        ranks = np.arange(1, K + 1)
        dcg = (hits / np.log2(ranks + 1)).sum()
        idcg = (1.0 / np.log2(np.arange(1, min(n_rel, K) + 1) + 1)).sum()
        ndcg.append(dcg / idcg)
        recall.append(hits.sum() / n_rel)
        ap.append((np.cumsum(hits) / ranks * hits).sum() / n_rel)  # trec_eval's AP@k: / all relevant
        top_items.append(top)
    return {"ndcg": np.array(ndcg), "recall": np.array(recall), "map": np.array(ap), "top": np.stack(top_items)}


def test_data_is_seeded_and_split_cleanly(example):
    a, b = example.make_data(seed=3), example.make_data(seed=3)
    assert torch.equal(a.train_ids, b.train_ids) and torch.equal(a.held_out, b.held_out)
    assert not torch.equal(a.held_out, example.make_data(seed=4).held_out)
    assert a.train_ids.shape[0] == a.held_out.shape[0] == 600 and a.held_out.shape[1] == 5
    n_train = (a.train_ids >= 0).sum(1)
    assert int(n_train.min()) >= 20 - 5 and int(n_train.max()) <= 60 - 5
    for train, held in zip(a.train_ids.tolist(), a.held_out.tolist()):
        train = [i for i in train if i >= 0]
        assert len(set(train)) == len(train) and len(set(held)) == len(held)  # distinct items
        assert not set(train) & set(held)  # a target is never a training interaction
    assert torch.equal(a.popularity, torch.bincount(a.train_ids[a.train_ids >= 0], minlength=2000).float())
    # the popularity skew is real: the 20 most popular items (1 % of the catalogue) hold over 10 % of the interactions
    assert a.popularity.topk(20).values.sum() / a.popularity.sum() > 0.1
    with pytest.raises(ValueError, match="held_out < min_interactions"):
        example.make_data(held_out=25)


def test_trained_model_beats_random_and_most_popular(run):
    random, popular, trained = run.random, run.most_popular, run.metrics
    assert len(run.history) == EPOCHS
    # random scores: expected recall@20 of a user is 20 / (their unseen items); 600 users average it
    unseen = run.data.num_items - (run.data.train_ids >= 0).sum(1).double()
    assert random["recall@20"] == pytest.approx((K / unseen).mean().item(), abs=0.006)
    assert random["ndcg@20"] < 0.02 and random["coverage@20"] > 0.95
    assert trained["ndcg@20"] > random["ndcg@20"] + 0.2
    assert trained["recall@20"] > random["recall@20"] + 0.2
    assert trained["map@20"] > random["map@20"] + 0.1
    # the factor structure is learned, not just popularity
    assert trained["ndcg@20"] > popular["ndcg@20"] + 0.08
    assert trained["coverage@20"] > 3 * popular["coverage@20"]
    assert run.history[-1]["ndcg@20"] > run.history[0]["ndcg@20"]  # it learns across epochs


def test_logged_values_equal_an_independent_computation(run):
    model, data = run.model, run.data
    logged = {key: value.item() for key, value in model.trainer.callback_metrics.items()}
    assert {key: logged[f"val/{key}"] for key in run.metrics} == pytest.approx(run.metrics, abs=1e-6)

    with torch.no_grad():  # the final epoch's validation saw exactly these scores (no step after it)
        scores = model(torch.arange(data.num_users)).double()
    train_ids, held_out = data.train_ids.numpy(), data.held_out.numpy()

    # torchmetrics' functional metrics, one user at a time, on the unseen items only; scores shifted
    # above 0 (torchmetrics counts a relevant item with a score <= 0 as not retrieved in recall)
    shifted = scores - scores.min() + 1.0
    tm_ndcg, tm_recall = [], []
    for u in range(data.num_users):
        keep = torch.ones(data.num_items, dtype=torch.bool)
        keep[data.train_ids[u][data.train_ids[u] >= 0]] = False
        target = torch.zeros(data.num_items, dtype=torch.long)
        target[data.held_out[u]] = 1
        tm_ndcg.append(retrieval_normalized_dcg(shifted[u][keep], target[keep], top_k=K))
        tm_recall.append(retrieval_recall(shifted[u][keep], target[keep], top_k=K))
    assert run.metrics["ndcg@20"] == pytest.approx(torch.stack(tm_ndcg).mean().item(), abs=1e-5)
    assert run.metrics["recall@20"] == pytest.approx(torch.stack(tm_recall).mean().item(), abs=1e-5)

    ref = _numpy_reference(scores.numpy(), train_ids, held_out)
    assert run.metrics["ndcg@20"] == pytest.approx(ref["ndcg"].mean(), abs=1e-5)
    assert run.metrics["recall@20"] == pytest.approx(ref["recall"].mean(), abs=1e-5)
    assert run.metrics["map@20"] == pytest.approx(ref["map"].mean(), abs=1e-5)

    # excluding the seen items matters: ranking them too (the model puts them on top) scores far lower
    no_exclusion = _numpy_reference(scores.numpy(), np.full_like(train_ids, -1), held_out)
    assert no_exclusion["ndcg"].mean() < run.metrics["ndcg@20"] - 0.1

    # exposure of the top-20 lists, from a numpy histogram
    top = ref["top"]
    assert not any(np.isin(top[u], train_ids[u]).any() for u in range(data.num_users))
    counts = np.bincount(top.ravel(), minlength=data.num_items).astype(np.float64)
    coverage = len(np.unique(top)) / data.num_items
    assert 0.0 <= run.metrics["coverage@20"] <= 1.0
    assert run.metrics["coverage@20"] == pytest.approx(coverage, abs=1e-6)
    n, total = data.num_items, counts.sum()
    gini = ((2 * np.arange(1, n + 1) - n - 1) * np.sort(counts)).sum() / (n * total)
    p = counts[counts > 0] / total
    assert run.metrics["gini@20"] == pytest.approx(gini, abs=1e-5)
    assert run.metrics["entropy@20"] == pytest.approx(-(p * np.log(p)).sum(), abs=1e-5)
    assert run.metrics["entropy@20"] <= math.log(n)
    assert run.metrics["popularity@20"] == pytest.approx((counts * data.popularity.numpy()).sum() / total, rel=1e-5)


def test_cli_prints_the_baselines_and_the_epochs(example, capsys):
    result = example.main(
        ["--users", "60", "--items", "300", "--epochs", "1", "--eval-batch-size", "25", "--seed", "1"]
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("60 users x 300 items: ") and out[0].endswith(" 300 held out")
    assert out[1].startswith("random scores: ndcg@20=") and out[2].startswith("most popular:  ndcg@20=")
    assert out[3].startswith("epoch 0: ndcg@20=")
    assert f"-> trained {result.metrics['ndcg@20']:.4f}" in out[4]
    assert len(result.history) == 1 and all(0.0 <= result.metrics[k] <= 1.0 for k in ("ndcg@20", "coverage@20"))


def test_beyond_accuracy_tells_a_diverse_and_a_popularity_biased_model_apart(run, example):
    """Close nDCG@20, visibly different intra-list diversity and novelty; both recomputed with numpy
    (Recommenders' definitions: 1 - mean pairwise cosine per user; mean -log2(count / total) per slot)."""
    pop, div = run.beyond["popularity-biased"], run.beyond["diverse"]
    assert abs(pop["ndcg@20"] - div["ndcg@20"]) < 0.02
    assert div["diversity@20"] - pop["diversity@20"] > 0.03
    assert div["novelty@20"] - pop["novelty@20"] > 0.15
    data, model = run.data, run.model
    with torch.no_grad():
        scores = model(torch.arange(data.num_users))
        emb = model.item.weight.detach().double().numpy()
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    popularity = data.popularity.double().numpy()
    info = np.where(popularity > 0, -np.log2(np.where(popularity > 0, popularity, 1) / popularity.sum()), 0.0)
    seen = example.seen_mask(data).numpy()
    variants = {
        "popularity-biased": example.popularity_biased(scores, data.popularity),
        "diverse": example.diversified(scores, model.item.weight.detach(), example.seen_mask(data)),
    }
    for name, s in variants.items():
        s = s.double().numpy()
        ild, slots = [], []
        for row, ex in zip(s, seen):
            keep = np.flatnonzero(~ex)
            top = keep[np.argsort(-row[keep], kind="stable")][:K]
            cos = unit[top] @ unit[top].T
            ild.append(1 - cos[np.triu_indices(K, 1)].mean())
            slots.extend(info[top])
        assert run.beyond[name]["diversity@20"] == pytest.approx(np.mean(ild), rel=1e-5)
        assert run.beyond[name]["novelty@20"] == pytest.approx(np.mean(slots), rel=1e-5)
