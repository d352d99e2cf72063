"""Presets reproduce their peer exactly, quirks included, on random lists with tied, negative and zero
scores and queries without relevant documents: ``convention="torchmetrics"`` against torchmetrics'
functional retrieval metrics and its Retrieval* classes, ``convention="lightgbm"`` against
LightGBM's own ndcg@k / map@k evaluation. Our defaults stay ours.

Tied scores and torchmetrics. torchmetrics ranks with ``torch.topk`` (AP, RR, precision) or
``torch.argsort`` (recall, hit rate, R-precision), whose order among tied scores is unspecified (on
CPU ``topk`` keeps the input order only up to 3 documents, ``argsort`` up to 16; CUDA differs). No
fixed rule reproduces it, so the preset takes the input order, and the tests check the numbers given
the order torch picked: the list is first rearranged so that the documents torch ranked first come
first (then our stable order is torch's), and the value must equal torchmetrics' on the original list.
"""

from __future__ import annotations

import pytest
import torch
from packaging.version import Version

from torch_rankeval import MAP, MRR, NDCG, HitRate, Precision, RankingMetrics, Recall, RPrecision
from torch_rankeval import functional as F
from torch_rankeval.conventions import PRESETS, resolve_convention

torchmetrics = pytest.importorskip("torchmetrics")
tmf = pytest.importorskip("torchmetrics.functional.retrieval")

#: the preset for the installed torchmetrics (1.8 started to treat scores <= 0 as not relevant)
TM = "torchmetrics" if Version(torchmetrics.__version__) >= Version("1.8") else "torchmetrics_1.7"


def _lists(seed: int, n: int = 60, length: int = 9, max_grade: int = 1):
    """Random lists of random length with tied, negative and zero scores; some without relevant documents,
    some whose relevant documents all score <= 0."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        m = int(torch.randint(1, length + 1, (1,), generator=g))
        preds = torch.randint(-3, 4, (m,), generator=g).double() / 2  # 7 values: ties, negatives, zeros
        target = torch.randint(0, max_grade + 1, (m,), generator=g) * (torch.rand(m, generator=g) < 0.5)
        if i % 7 == 0:
            target = torch.zeros_like(target)  # no relevant document
        if i % 11 == 1:
            preds = -preds.abs()  # every score <= 0
        out.append((preds, target))
    return out


def _torch_order(preds: torch.Tensor, k: int | None, kind: str) -> torch.Tensor:
    """The documents in the order torchmetrics ranked them: its top k first, then the rest."""
    n = preds.shape[0]
    if kind == "topk":
        top = preds.topk(min(k or n, n), sorted=True, dim=-1).indices
    else:
        top = torch.argsort(preds, dim=-1, descending=True)[: (k or n)]
    rest = torch.tensor([i for i in range(n) if i not in set(top.tolist())], dtype=torch.long)
    return torch.cat([top, rest]).long()


OURS = {
    "ap": (F.average_precision, tmf.retrieval_average_precision, "topk"),
    "rr": (F.reciprocal_rank, tmf.retrieval_reciprocal_rank, "topk"),
    "precision": (F.precision, tmf.retrieval_precision, "topk"),
    "recall": (F.recall, tmf.retrieval_recall, "argsort"),
    "hit_rate": (F.hit_rate, tmf.retrieval_hit_rate, "argsort"),
}


@pytest.mark.parametrize("k", [None, 1, 2, 4, 12])
@pytest.mark.parametrize("name", list(OURS))
def test_torchmetrics_preset_equals_torchmetrics_functional_given_its_tie_order(name, k):
    ours, theirs, kind = OURS[name]
    checked = 0
    for preds, target in _lists(seed=7):
        want = theirs(preds, target.bool(), top_k=k).item()
        order = _torch_order(preds, k, kind)
        got = ours(preds[order], target[order], k, convention=TM).item()
        assert got == pytest.approx(want, abs=1e-6), (preds.tolist(), target.tolist())  # torchmetrics: float32
        checked += 1
    assert checked == 60


@pytest.mark.parametrize("adaptive", [False, True])
@pytest.mark.parametrize("k", [1, 3, 12])
def test_torchmetrics_precision_adaptive_k(k, adaptive):
    for preds, target in _lists(seed=8):
        want = tmf.retrieval_precision(preds, target.bool(), top_k=k, adaptive_k=adaptive).item()
        order = _torch_order(preds, k, "topk")
        got = F.precision(preds[order], target[order], k, convention=TM, adaptive_k=adaptive).item()
        assert got == pytest.approx(want, abs=1e-6)


def test_torchmetrics_r_precision_and_ndcg():
    for preds, target in _lists(seed=9, max_grade=3):
        binary = target > 0
        order = _torch_order(preds, int(binary.sum()) or None, "argsort")
        got = F.r_precision(preds[order], binary[order], convention=TM).item()
        assert got == pytest.approx(tmf.retrieval_r_precision(preds, binary).item(), abs=1e-6)
        for k in (None, 1, 3, 20):  # nDCG averages ties: no reordering, graded targets
            want = tmf.retrieval_normalized_dcg(preds, target, top_k=k).item()
            assert F.ndcg(preds, target, k, convention=TM).item() == pytest.approx(want, abs=1e-6)


def test_the_issue_reproducer_and_the_quirks_by_hand():
    # scores [1, 1], grades [0, 1]: torchmetrics ranks in its sort order, AP 0.5 (averaging gave 0.75)
    assert F.average_precision(torch.tensor([1.0, 1.0]), torch.tensor([0, 1]), convention="torchmetrics").item() == 0.5
    preds, target = torch.tensor([0.5, -1.0, 2.0, 0.0]), torch.tensor([1, 1, 0, 1])
    # >= 1.8: the documents scored -1 and 0 are not relevant in AP / RR / P / R, but still count for recall
    assert F.average_precision(preds, target, convention="torchmetrics").item() == 0.5  # 1 found at rank 2
    assert F.recall(preds, target, convention="torchmetrics").item() == pytest.approx(1 / 3)
    assert F.precision(preds, target, 4, convention="torchmetrics").item() == 0.25
    assert F.hit_rate(preds, target, 1, convention="torchmetrics").item() == 0.0
    assert F.r_precision(preds, target, convention="torchmetrics").item() == pytest.approx(2 / 3)  # no filter here
    # 1.6 and 1.7 counted them
    assert F.recall(preds, target, convention="torchmetrics_1.7").item() == 1.0
    assert F.average_precision(preds, target, convention="torchmetrics_1.7").item() == pytest.approx(
        (1 / 2 + 2 / 3 + 3 / 4) / 3
    )
    # our default counts every score and averages ties
    assert F.average_precision(torch.tensor([1.0, 1.0]), torch.tensor([0, 1])).item() == 0.75
    assert F.recall(preds, target, 1).item() == 0.0 and F.recall(preds, target).item() == 1.0


def test_explicit_arguments_win_over_the_presets_per_measure_settings():
    c = resolve_convention("torchmetrics", ties="pessimistic")
    assert c.for_measure("ndcg").ties == c.for_measure("map").ties == "pessimistic"
    c = resolve_convention("torchmetrics", nonpositive_not_relevant=False)
    assert not c.for_measure("map").nonpositive_not_relevant
    assert PRESETS["torchmetrics"].for_measure("ndcg").ties == "average"
    assert PRESETS["torchmetrics"].for_measure("hit_rate").ties == "first"
    assert resolve_convention("torchmetrics_1.7") == resolve_convention("torchmetrics", nonpositive_not_relevant=False)


# ----------------------------------------------------------------------------- torchmetrics classes
def _flat(seed: int):
    """Flat input without ties (torchmetrics' classes also reorder documents by an unstable sort on
    the query id), with negative scores and queries without relevant documents."""
    g = torch.Generator().manual_seed(seed)
    n_queries, length = 30, 8
    preds = torch.randn(n_queries * length, generator=g, dtype=torch.float64)
    target = (torch.rand(n_queries * length, generator=g) < 0.3).long()
    indexes = torch.arange(n_queries).repeat_interleave(length)
    target[indexes % 5 == 0] = 0
    perm = torch.randperm(n_queries * length, generator=g)
    return preds[perm].float(), target[perm], indexes[perm]


@pytest.mark.parametrize("action", ["neg", "pos", "skip"])
@pytest.mark.parametrize("k", [None, 3])
def test_torchmetrics_preset_classes_equal_torchmetrics_classes(k, action):
    from torchmetrics import retrieval as tr

    pairs = [
        (
            NDCG(k=k, convention=TM, empty_target_action=action),
            tr.RetrievalNormalizedDCG(top_k=k, empty_target_action=action),
        ),
        (MAP(k=k, convention=TM, empty_target_action=action), tr.RetrievalMAP(top_k=k, empty_target_action=action)),
        (MRR(k=k, convention=TM, empty_target_action=action), tr.RetrievalMRR(top_k=k, empty_target_action=action)),
        (
            Precision(k=k, convention=TM, empty_target_action=action),
            tr.RetrievalPrecision(top_k=k, empty_target_action=action),
        ),
        (
            Recall(k=k, convention=TM, empty_target_action=action),
            tr.RetrievalRecall(top_k=k, empty_target_action=action),
        ),
        (
            HitRate(k=k, convention=TM, empty_target_action=action),
            tr.RetrievalHitRate(top_k=k, empty_target_action=action),
        ),
        (RPrecision(convention=TM, empty_target_action=action), tr.RetrievalRPrecision(empty_target_action=action)),
    ]
    preds, target, indexes = _flat(seed=5)
    for ours, theirs in pairs:
        for part in (slice(0, 100), slice(100, 170), slice(170, None)):  # queries split across updates
            ours.update(preds[part], target[part], indexes=indexes[part])
            theirs.update(preds[part], target[part], indexes=indexes[part])
        assert ours.compute().item() == pytest.approx(theirs.compute().item(), abs=1e-6), type(ours).__name__
    collection = RankingMetrics(("ndcg@3", "map@3", "mrr@3", "P@3", "recall@3", "success@3"), convention=TM)
    collection.update(preds, target, indexes=indexes)
    assert collection.compute()["map@3"].item() == pytest.approx(
        MAP(k=3, convention=TM).forward(preds, target, indexes=indexes).item(), abs=1e-7
    )


# ----------------------------------------------------------------------------- LightGBM
def _groups(seed: int, n: int = 80):
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, 16, (n,), generator=g)
    total = int(sizes.sum())
    preds = torch.randint(-4, 5, (total,), generator=g).double() / 3  # ties, negative and zero scores
    labels = torch.randint(0, 5, (total,), generator=g) * (torch.rand(total, generator=g) < 0.5)
    ids = torch.arange(n).repeat_interleave(sizes)
    labels[ids % 6 == 0] = 0  # queries without relevant documents: LightGBM scores them 1
    return sizes, preds, labels, ids


def _lightgbm_eval(sizes, preds, labels, eval_at):
    lgb = pytest.importorskip("lightgbm")
    import numpy as np

    params = {"objective": "lambdarank", "metric": ["ndcg", "map"], "eval_at": list(eval_at), "verbosity": -1}
    features = np.zeros((labels.shape[0], 1))
    train = lgb.Dataset(
        features, labels.numpy().astype(float), group=sizes.tolist(), params=params, init_score=preds.numpy()
    )
    valid = lgb.Dataset(
        features, labels.numpy().astype(float), group=sizes.tolist(), init_score=preds.numpy(), reference=train
    )
    booster = lgb.Booster(params, train)
    booster.add_valid(valid, "valid")  # no tree yet: the scores are the init_score, ours
    return {result[1]: result[2] for result in booster.eval_valid()}


@pytest.mark.parametrize("seed", [0, 1])
def test_lightgbm_preset_equals_lightgbm_ndcg_and_map(seed):
    eval_at = (1, 2, 3, 5, 10, 20)
    sizes, preds, labels, ids = _groups(seed)
    theirs = _lightgbm_eval(sizes, preds, labels, eval_at)
    metric = RankingMetrics(("ndcg", "map"), k=eval_at, convention="lightgbm")
    metric.update(preds, labels, indexes=ids)  # flat input keeps the input order: LightGBM's stable sort
    ours = metric.compute()
    for k in eval_at:
        assert ours[f"ndcg@{k}"].item() == pytest.approx(theirs[f"ndcg@{k}"], abs=1e-6)
        assert ours[f"map@{k}"].item() == pytest.approx(theirs[f"map@{k}"], abs=1e-6)
    # the functional API on padded lists, in float64: to the last digit
    _, mask, (p, t) = F.group_by_query(ids, preds, labels)
    ndcg = F.ndcg(p, t, list(eval_at), mask=mask, convention="lightgbm")
    ap = F.average_precision(p, t, list(eval_at), mask=mask, convention="lightgbm")
    for j, k in enumerate(eval_at):
        assert ndcg[j].item() == pytest.approx(theirs[f"ndcg@{k}"], abs=1e-12)
        assert ap[j].item() == pytest.approx(theirs[f"map@{k}"], abs=1e-12)


def test_lightgbm_quirks_by_hand():
    # no relevant document: 1 in ndcg and map
    none = F.evaluate(torch.tensor([0.3, 0.2]), torch.tensor([0, 0]), ["ndcg@2", "map@2"], convention="lightgbm")
    assert [v.item() for v in none.values()] == [1.0, 1.0]
    # map@1 divides by min(1, relevant): a relevant document on top scores 1 (all_relevant would give 1/3)
    assert (
        F.average_precision(torch.tensor([0.9, 0.5, 0.1]), torch.tensor([1, 1, 1]), 1, convention="lightgbm").item()
        == 1.0
    )
    # ties keep the input order (stable sort)
    assert F.reciprocal_rank(torch.tensor([1.0, 1.0]), torch.tensor([0, 1]), convention="lightgbm").item() == 0.5
    # our default: 0 for a query without relevant documents, AP over all relevant, ties averaged
    assert F.ndcg(torch.tensor([0.3, 0.2]), torch.tensor([0, 0])).item() == 0.0
    assert F.average_precision(torch.tensor([0.9, 0.5, 0.1]), torch.tensor([1, 1, 1]), 1).item() == pytest.approx(1 / 3)
