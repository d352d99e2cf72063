"""Issue 18 item 15: ``empty_target_action="skip"`` with every query skipped. torchmetrics' retrieval
classes return 0.0 (``RetrievalMetric.compute``: ``tensor(0.0)`` when no query is left); the
torchmetrics presets must too, on the same input. Our default stays NaN with a warning (a mean
over nothing is undefined)."""

from __future__ import annotations

import warnings

import pytest
import torch
from packaging.version import Version

from torch_rankeval import MAP, MRR, NDCG, HitRate, Precision, RankingMetrics, Recall
from torch_rankeval import functional as F

torchmetrics = pytest.importorskip("torchmetrics")
from torchmetrics import retrieval as tmr  # noqa: E402

#: the preset for the installed torchmetrics (1.8 started to treat scores <= 0 as not relevant)
TM = "torchmetrics" if Version(torchmetrics.__version__) >= Version("1.8") else "torchmetrics_1.7"

# ours, torchmetrics' class, and the cutoff argument each takes
PAIRS = [
    (NDCG, tmr.RetrievalNormalizedDCG, 3),
    (NDCG, tmr.RetrievalNormalizedDCG, None),
    (MAP, tmr.RetrievalMAP, None),
    (MRR, tmr.RetrievalMRR, 2),
    (Precision, tmr.RetrievalPrecision, 2),
    (Recall, tmr.RetrievalRecall, 3),
    (HitRate, tmr.RetrievalHitRate, 2),
]


def _flat(n_queries: int, seed: int, *, relevant: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Flat torchmetrics-style input: queries of 1-5 documents, tied scores, scores <= 0 among them;
    ``relevant=False``: no query holds a relevant document."""
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, 6, (n_queries,), generator=g)
    indexes = torch.repeat_interleave(torch.arange(n_queries), sizes)
    preds = torch.randint(-2, 3, (len(indexes),), generator=g).float() / 2  # ties, and scores <= 0
    target = (
        torch.randint(0, 2, (len(indexes),), generator=g) if relevant else torch.zeros(len(indexes), dtype=torch.long)
    )
    return preds, target, indexes


def _peer(cls, k):  # noqa: ANN001, ANN202
    return cls(empty_target_action="skip") if k is None else cls(empty_target_action="skip", top_k=k)


@pytest.mark.parametrize(("ours", "theirs", "k"), PAIRS)
@pytest.mark.parametrize("n_queries", [1, 4])
def test_every_query_skipped_is_what_torchmetrics_returns(ours, theirs, k, n_queries):
    preds, target, indexes = _flat(n_queries, seed=n_queries, relevant=False)
    peer = _peer(theirs, k)
    peer.update(preds, target, indexes=indexes)
    want = peer.compute()
    assert want.item() == 0.0  # torchmetrics' own answer, not an assumption
    for convention in (TM, "torchmetrics_1.7"):
        metric = ours(k=k, convention=convention, empty_target_action="skip")
        metric.update(preds, target, indexes=indexes)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            got = metric.compute()
        assert got.item() == want.item(), (convention, ours.__name__)
    # padded input, streamed in two updates: the same
    metric = ours(k=k, convention=TM, empty_target_action="skip")
    metric.update(torch.tensor([[0.5, 0.5, -1.0]]), torch.tensor([[0, 0, 0]]))
    metric.update(torch.tensor([[0.0, 1.0]]), torch.tensor([[0, 0]]))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert metric.compute().item() == 0.0


# measures whose value does not depend on the order of tied scores in either library (nDCG averages
# ties in both; whole-list recall and hit rate read no order): the tie order of the others is issue 18
# item 14's, tested in test_presets.py
TIE_FREE = [
    (NDCG, tmr.RetrievalNormalizedDCG, 3),
    (NDCG, tmr.RetrievalNormalizedDCG, None),
    (Recall, tmr.RetrievalRecall, None),
    (HitRate, tmr.RetrievalHitRate, None),
]


@pytest.mark.parametrize(("ours", "theirs", "k"), TIE_FREE)
@pytest.mark.parametrize("seed", [3, 4])
def test_some_queries_skipped_still_equal_torchmetrics(ours, theirs, k, seed):
    preds, target, indexes = _flat(12, seed=seed, relevant=True)
    target[indexes < 4] = 0  # four queries without a relevant document: skipped by both
    peer = _peer(theirs, k)
    peer.update(preds, target, indexes=indexes)
    metric = ours(k=k, convention=TM, empty_target_action="skip")
    metric.update(preds, target, indexes=indexes)
    assert metric.compute().item() == pytest.approx(peer.compute().item(), abs=1e-6)


def test_the_default_stays_nan_with_a_warning():
    preds, target, indexes = _flat(3, seed=0, relevant=False)
    metric = NDCG(k=3, empty_target_action="skip")
    metric.update(preds, target, indexes=indexes)
    with pytest.warns(UserWarning, match="no query was counted.*returning NaN"):
        assert torch.isnan(metric.compute())
    with pytest.warns(UserWarning, match="every list was skipped.*the mean is NaN"):
        assert torch.isnan(F.ndcg(torch.tensor([[0.5, 0.1]]), torch.tensor([[0, 0]]), empty_target_action="skip"))


def test_the_preset_functional_and_many_metrics_agree():
    preds, target = torch.tensor([[0.5, 0.1, -0.5], [0.2, 0.2, 0.0]]), torch.zeros(2, 3, dtype=torch.long)
    with pytest.warns(UserWarning, match=r"every list was skipped.*the mean is 0\.0"):
        assert F.ndcg(preds, target, 2, convention=TM, empty_target_action="skip").item() == 0.0
    with pytest.warns(UserWarning, match=r"every list was skipped"):
        out = F.evaluate(preds, target, ["ndcg@2", "map", "mrr"], convention=TM, empty_target_action="skip")
    assert {name: v.item() for name, v in out.items()} == {"ndcg@2": 0.0, "map": 0.0, "mrr": 0.0}
    metric = RankingMetrics(("ndcg@2", "map", "mrr"), convention=TM, empty_target_action="skip")
    metric.update(preds, target)
    with pytest.warns(UserWarning, match=r"returning 0\.0"):
        assert {name: v.item() for name, v in metric.compute().items()} == {"ndcg@2": 0.0, "map": 0.0, "mrr": 0.0}
    # every column's summary over no query is 0.0, a geometric mean's too (not exp(0) = 1)
    with pytest.warns(UserWarning, match=r"every list was skipped"):
        out = F.evaluate(preds, target, ["gm_map", "num_rel"], convention=TM, empty_target_action="skip")
    assert {name: v.item() for name, v in out.items()} == {"gm_map": 0.0, "num_rel": 0.0}
    # per query, skipped lists stay NaN in every convention
    none = F.ndcg(preds, target, 2, convention=TM, empty_target_action="skip", reduction="none")
    assert torch.isnan(none).all()
