"""Presets reproduce their peer exactly, quirks included, on random lists with tied, negative and zero
scores and queries without relevant documents: ``convention="torchmetrics"`` against torchmetrics'
functional retrieval metrics and its Retrieval* classes, ``convention="lightgbm"`` against
LightGBM's own ndcg@k / map@k evaluation. Our defaults stay ours.

Tied scores and torchmetrics. torchmetrics ranks with ``torch.topk(min(k, n), sorted=True)`` (AP, RR,
precision) or ``torch.argsort(descending=True)`` (recall, hit rate, R-precision, fall-out) on each
query's float32 scores; their order among tied scores is unspecified and depends on the tensor's
length and on ``k`` (on CPU ``topk`` keeps the input order only up to 3 documents, ``argsort`` up to
16). The preset makes the same calls (``ties="torch_topk"`` / ``"torch_argsort"``), so every test
here feeds both libraries the SAME input, in its original order: lists long enough (up to 40
documents) for torch's order to differ from the input order, heavy ties.
"""

from __future__ import annotations

import pytest
import torch
from packaging.version import Version

from torch_rankeval import MAP, MRR, NDCG, FallOut, HitRate, Precision, RankingMetrics, Recall, RPrecision
from torch_rankeval import functional as F
from torch_rankeval.conventions import PRESETS, resolve_convention

torchmetrics = pytest.importorskip("torchmetrics")
tmf = pytest.importorskip("torchmetrics.functional.retrieval")

#: the preset for the installed torchmetrics (1.8 started to treat scores <= 0 as not relevant)
TM = "torchmetrics" if Version(torchmetrics.__version__) >= Version("1.8") else "torchmetrics_1.7"
KS = [None, 1, 3, 10]


def _lists(seed: int, n: int = 80, length: int = 40, max_grade: int = 1, positive: bool = False):
    """Random lists of random length with heavily tied, negative and zero scores; some without relevant
    documents, some whose relevant documents all score <= 0 (``positive``: scores > 0 only)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        m = int(torch.randint(1, length + 1, (1,), generator=g))
        preds = torch.randint(-3, 4, (m,), generator=g).double() / 2  # 7 values: ties, negatives, zeros
        if i % 3 == 0:
            preds = torch.randint(0, 2, (m,), generator=g).double()  # two values: long tie groups
        target = torch.randint(0, max_grade + 1, (m,), generator=g) * (torch.rand(m, generator=g) < 0.5)
        if i % 7 == 0:
            target = torch.zeros_like(target)  # no relevant document
        if i % 11 == 1:
            preds = -preds.abs()  # every score <= 0
        if positive:
            preds = preds.abs() + 0.5
        out.append((preds, target))
    return out


def _fall_out(preds, target, k):
    return F.evaluate(preds, target, "fall_out" if k is None else f"fall_out@{k}", convention=TM)


def _r_precision(preds, target, k):
    return F.r_precision(preds, target, convention=TM)


OURS = {
    "ap": (F.average_precision, tmf.retrieval_average_precision),
    "rr": (F.reciprocal_rank, tmf.retrieval_reciprocal_rank),
    "precision": (F.precision, tmf.retrieval_precision),
    "recall": (F.recall, tmf.retrieval_recall),
    "hit_rate": (F.hit_rate, tmf.retrieval_hit_rate),
}
_LABEL = {"ap": "map", "rr": "mrr", "precision": "P", "recall": "recall", "hit_rate": "success"}


def test_the_sample_has_lists_whose_torch_order_is_not_the_input_order():
    """The test data reach the cases the old test could not: torch's order differs from the input order."""
    moved = sum(
        not torch.equal(torch.argsort(p.float(), descending=True), torch.sort(p, descending=True, stable=True).indices)
        for p, _ in _lists(seed=7)
    )
    moved_topk = sum(
        not torch.equal(
            p.float().topk(min(3, p.shape[0])).indices, torch.sort(p, descending=True, stable=True).indices[:3]
        )
        for p, _ in _lists(seed=7)
    )
    assert moved >= 20 and moved_topk >= 20


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("name", list(OURS))
def test_torchmetrics_preset_equals_torchmetrics_functional_on_tied_lists(name, k):
    ours, theirs = OURS[name]
    lists = _lists(seed=7)
    for preds, target in lists:  # the original input: no reordering
        want = theirs(preds, target.bool(), top_k=k).item()
        got = ours(preds, target, k, convention=TM).item()
        assert got == pytest.approx(want, abs=1e-6), (preds.tolist(), target.tolist())  # torchmetrics: float32
    # the same lists as one padded batch (every row its own length), through the function and F.evaluate
    batch = torch.nn.utils.rnn.pad_sequence([p for p, _ in lists], batch_first=True, padding_value=7.0)
    grades = torch.nn.utils.rnn.pad_sequence([t for _, t in lists], batch_first=True, padding_value=1)
    mask = torch.nn.utils.rnn.pad_sequence([torch.ones_like(t, dtype=torch.bool) for _, t in lists], batch_first=True)
    want = torch.stack([theirs(p, t.bool(), top_k=k) for p, t in lists]).double()
    got = ours(batch, grades, k, mask=mask, convention=TM, reduction="none")
    torch.testing.assert_close(got.double(), want, atol=1e-6, rtol=0)
    label = _LABEL[name] if k is None else f"{_LABEL[name]}@{k}"
    got = F.evaluate(batch, grades, [label], mask=mask, convention=TM, reduction="none")[label]
    torch.testing.assert_close(got.double(), want, atol=1e-6, rtol=0)


def test_several_cutoffs_in_one_call_each_take_torchs_order_for_their_k():
    """torch.topk(1) and topk(3) order tied scores differently: each cutoff is ranked by its own call."""
    lists = _lists(seed=11)
    batch = torch.nn.utils.rnn.pad_sequence([p for p, _ in lists], batch_first=True)
    grades = torch.nn.utils.rnn.pad_sequence([t for _, t in lists], batch_first=True)
    mask = torch.nn.utils.rnn.pad_sequence([torch.ones_like(t, dtype=torch.bool) for _, t in lists], batch_first=True)
    names = ["map@1", "map@3", "map", "mrr@3", "P@1", "P@3", "P@10", "recall@3", "success@1", "Rprec", "ndcg@3"]
    got = F.evaluate(batch, grades, names, mask=mask, convention=TM, reduction="none")
    for i, (p, t) in enumerate(lists):
        want = {
            "map@1": tmf.retrieval_average_precision(p, t, top_k=1),
            "map@3": tmf.retrieval_average_precision(p, t, top_k=3),
            "map": tmf.retrieval_average_precision(p, t),
            "mrr@3": tmf.retrieval_reciprocal_rank(p, t, top_k=3),
            "P@1": tmf.retrieval_precision(p, t, top_k=1),
            "P@3": tmf.retrieval_precision(p, t, top_k=3),
            "P@10": tmf.retrieval_precision(p, t, top_k=10),
            "recall@3": tmf.retrieval_recall(p, t, top_k=3),
            "success@1": tmf.retrieval_hit_rate(p, t, top_k=1),
            "Rprec": tmf.retrieval_r_precision(p, t),
            "ndcg@3": tmf.retrieval_normalized_dcg(p, t, top_k=3),
        }
        for name in names:
            assert got[name][i].item() == pytest.approx(want[name].item(), abs=1e-6), (name, p.tolist(), t.tolist())


@pytest.mark.parametrize("convention", ["torchmetrics", "torchmetrics_1.7"])
def test_long_rows_and_sparse_targets_rank_ties_as_torchmetrics_too(convention):
    """Rows of 4,096 or more documents and sparse targets would take the top-k route, which has no
    torch tie order: under the presets they take the dense one and still equal torchmetrics."""
    g = torch.Generator().manual_seed(12)
    preds = torch.randint(1, 4, (3, 5000), generator=g).float()  # positive: both presets apply
    target = (torch.rand(3, 5000, generator=g) < 0.1).long()
    names = {"map@3": tmf.retrieval_average_precision, "success@3": tmf.retrieval_hit_rate, "P@10": None}
    for sparse in (False, True):
        got = F.evaluate(
            preds, target.to_sparse() if sparse else target, list(names), convention=convention, reduction="none"
        )
        for name, fn in names.items():
            fn, k = (fn, 3) if fn is not None else (tmf.retrieval_precision, 10)
            want = torch.stack([fn(preds[i], target[i], top_k=k) for i in range(3)])
            torch.testing.assert_close(got[name].float(), want, atol=1e-6, rtol=0)


@pytest.mark.parametrize("adaptive", [False, True])
@pytest.mark.parametrize("k", [1, 3, 10, 50])
def test_torchmetrics_precision_adaptive_k(k, adaptive):
    for preds, target in _lists(seed=8):
        want = tmf.retrieval_precision(preds, target.bool(), top_k=k, adaptive_k=adaptive).item()
        got = F.precision(preds, target, k, convention=TM, adaptive_k=adaptive).item()
        assert got == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("k", KS)
def test_torchmetrics_r_precision_fall_out_and_ndcg(k):
    for preds, target in _lists(seed=9, max_grade=3):
        binary = target > 0
        if k is None:
            got = F.r_precision(preds, binary, convention=TM).item()
            assert got == pytest.approx(tmf.retrieval_r_precision(preds, binary).item(), abs=1e-6)
        got = _fall_out(preds, binary, k)
        want = tmf.retrieval_fall_out(preds, binary, top_k=k).item()
        assert next(iter(got.values())).item() == pytest.approx(want, abs=1e-6), (preds.tolist(), binary.tolist())
        want = tmf.retrieval_normalized_dcg(preds, target, top_k=k).item()  # nDCG averages ties, graded targets
        assert F.ndcg(preds, target, k, convention=TM).item() == pytest.approx(want, abs=1e-6)


def test_scores_that_tie_only_in_float32_tie_as_in_torchmetrics():
    """torchmetrics ranks float32 scores: float64 scores equal after rounding are tied there too."""
    preds = torch.tensor([1.0, 1.0 + 1e-12, 1.0 + 2e-12, 0.5] * 6, dtype=torch.float64)
    target = torch.tensor([1, 0, 0, 1] * 6)
    for k in KS:
        for name, (ours, theirs) in OURS.items():
            want = theirs(preds, target, top_k=k).item()
            assert ours(preds, target, k, convention=TM).item() == pytest.approx(want, abs=1e-6), (name, k)


@pytest.mark.parametrize("k", KS)
def test_torchmetrics_1_7_preset_ranks_ties_as_torchmetrics_too(k):
    """torchmetrics_1.7 differs from the installed torchmetrics only on scores <= 0: on positive scores
    the two agree, ties included."""
    for preds, target in _lists(seed=10, positive=True):
        for name, (ours, theirs) in OURS.items():
            want = theirs(preds, target, top_k=k).item()
            got = ours(preds, target, k, convention="torchmetrics_1.7").item()
            assert got == pytest.approx(want, abs=1e-6), (name, preds.tolist(), target.tolist())


def test_the_issue_reproducer_and_the_quirks_by_hand():
    # scores [1, 1], grades [0, 1]: torchmetrics ranks in its sort order, AP 0.5 (averaging gave 0.75)
    assert F.average_precision(torch.tensor([1.0, 1.0]), torch.tensor([0, 1]), convention="torchmetrics").item() == 0.5
    # 20 tied documents, the relevant one last: its rank is where torch's own call puts it (on this
    # machine's torch: argsort 2nd, topk(20) 19th, topk(1) not at all), not where input order puts it (20th)
    preds, target = torch.ones(20), torch.zeros(20, dtype=torch.long)
    target[19] = 1
    by_argsort = torch.argsort(preds, descending=True).tolist().index(19) + 1
    by_topk = preds.topk(20).indices.tolist().index(19) + 1
    assert F.reciprocal_rank(preds, target, convention="torchmetrics").item() == pytest.approx(1 / by_topk)
    for k in (1, 3, 10):
        assert F.hit_rate(preds, target, k, convention="torchmetrics").item() == float(by_argsort <= k)
        top = preds.topk(k).indices.tolist()
        assert F.precision(preds, target, k, convention="torchmetrics").item() == pytest.approx((19 in top) / k)
    assert F.reciprocal_rank(preds, target, ties="first").item() == pytest.approx(1 / 20)  # input order
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
    assert PRESETS["torchmetrics"].for_measure("hit_rate").ties == "torch_argsort"
    assert PRESETS["torchmetrics"].for_measure("map").ties == "torch_topk"
    assert resolve_convention("torchmetrics_1.7") == resolve_convention("torchmetrics", nonpositive_not_relevant=False)


# ----------------------------------------------------------------------------- torchmetrics classes
def _flat(seed: int, n_queries: int = 30, length: int = 40):
    """Flat input as torchmetrics takes it: documents of queries of random length in random order,
    heavily tied, negative and zero scores, queries without relevant documents (every fifth)."""
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, length + 1, (n_queries,), generator=g)
    indexes = torch.arange(n_queries).repeat_interleave(sizes)
    n = indexes.shape[0]
    preds = torch.randint(-2, 3, (n,), generator=g).float() / 2
    target = (torch.rand(n, generator=g) < 0.3).long()
    target[indexes % 5 == 0] = 0
    perm = torch.randperm(n, generator=g)
    return preds[perm], target[perm], indexes[perm]


def _class_pairs(k, action):
    from torchmetrics import retrieval as tr

    return [
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
            Precision(k=k, convention=TM, empty_target_action=action, adaptive_k=True),
            tr.RetrievalPrecision(top_k=k, empty_target_action=action, adaptive_k=True),
        ),
        (
            Recall(k=k, convention=TM, empty_target_action=action),
            tr.RetrievalRecall(top_k=k, empty_target_action=action),
        ),
        (
            HitRate(k=k, convention=TM, empty_target_action=action),
            tr.RetrievalHitRate(top_k=k, empty_target_action=action),
        ),
        (
            FallOut(k=k, convention=TM, empty_target_action=action),
            tr.RetrievalFallOut(top_k=k, empty_target_action=action),
        ),
        (RPrecision(convention=TM, empty_target_action=action), tr.RetrievalRPrecision(empty_target_action=action)),
    ]


@pytest.mark.parametrize("action", ["neg", "pos", "skip"])
@pytest.mark.parametrize("k", KS)
def test_torchmetrics_preset_classes_equal_torchmetrics_classes_on_tied_flat_input(k, action):
    preds, target, indexes = _flat(seed=5)
    for ours, theirs in _class_pairs(k, action):
        for part in (slice(0, 200), slice(200, 450), slice(450, None)):  # queries split across updates
            ours.update(preds[part], target[part], indexes=indexes[part])
            theirs.update(preds[part], target[part], indexes=indexes[part])
        assert ours.compute().item() == pytest.approx(theirs.compute().item(), abs=1e-6), type(ours).__name__
        # forward: the batch's own value, as torchmetrics' forward gives it
        ours.reset(), theirs.reset()
        got, want = (
            ours(preds[:300], target[:300], indexes=indexes[:300]),
            theirs(preds[:300], target[:300], indexes=indexes[:300]),
        )
        assert got.item() == pytest.approx(want.item(), abs=1e-6), type(ours).__name__
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
