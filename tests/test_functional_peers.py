"""The functional metrics against sklearn's ndcg_score and torchmetrics' functional retrieval
metrics, under the matching presets."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torch_rankeval import functional as F

sklearn_metrics = pytest.importorskip("sklearn.metrics")
tmf = pytest.importorskip("torchmetrics.functional.retrieval")


def _tied_batch(seed, n=40, length=12):
    g = torch.Generator().manual_seed(seed)
    preds = torch.randint(0, 4, (n, length), generator=g).double() / 4  # many ties
    target = torch.randint(0, 4, (n, length), generator=g)
    return preds, target


@pytest.mark.parametrize("k", [None, 1, 3, 5, 12, 20])
@pytest.mark.parametrize("seed", [0, 1])
def test_ndcg_matches_sklearn_with_ties(seed, k):
    preds, target = _tied_batch(seed)
    want = sklearn_metrics.ndcg_score(target.numpy(), preds.numpy(), k=k)
    got = F.ndcg(preds, target, k, convention="sklearn")
    assert abs(got.item() - want) < 1e-6
    per_query = F.ndcg(preds, target, k, convention="sklearn", reduction="none")
    for i in range(3):
        want_i = sklearn_metrics.ndcg_score(target[i : i + 1].numpy(), preds[i : i + 1].numpy(), k=k)
        assert abs(per_query[i].item() - want_i) < 1e-6


def test_ndcg_matches_sklearn_float_relevance():
    g = torch.Generator().manual_seed(3)
    preds, target = torch.rand(30, 9, generator=g), torch.rand(30, 9, generator=g) * 3
    want = sklearn_metrics.ndcg_score(target.numpy(), preds.numpy(), k=5)
    assert abs(F.ndcg(preds, target, 5, convention="sklearn").item() - want) < 1e-5


def _positive_untied(seed, n=30, length=15):
    g = torch.Generator().manual_seed(seed)
    preds = torch.rand(n, length, generator=g, dtype=torch.float64) + 0.01  # torchmetrics: scores > 0
    target = (torch.rand(n, length, generator=g) < 0.3).long() * torch.randint(1, 4, (n, length), generator=g)
    target[0] = 0  # an empty query
    return preds, target


def _per_query(fn, preds, target, **kw):
    return torch.stack([fn(preds[i], target[i], **kw).double() for i in range(preds.shape[0])])


@pytest.mark.parametrize("k", [None, 1, 4, 15, 30])
def test_matches_torchmetrics_functional(k):
    preds, target = _positive_untied(k or 0)
    binary = target > 0
    tk = {"top_k": k}
    cases = [
        (
            F.ndcg(preds, target, k, convention="torchmetrics", reduction="none"),
            _per_query(tmf.retrieval_normalized_dcg, preds, target, **tk),
        ),
        (
            F.average_precision(preds, target, k, convention="torchmetrics", reduction="none"),
            _per_query(tmf.retrieval_average_precision, preds, binary, **tk),
        ),
        (
            F.reciprocal_rank(preds, target, k, convention="torchmetrics", reduction="none"),
            _per_query(tmf.retrieval_reciprocal_rank, preds, binary, **tk),
        ),
        (
            F.recall(preds, target, k, convention="torchmetrics", reduction="none"),
            _per_query(tmf.retrieval_recall, preds, binary, **tk),
        ),
        (
            F.hit_rate(preds, target, k, convention="torchmetrics", reduction="none"),
            _per_query(tmf.retrieval_hit_rate, preds, binary, **tk),
        ),
        (
            F.r_precision(preds, target, convention="torchmetrics", reduction="none"),
            _per_query(tmf.retrieval_r_precision, preds, binary),
        ),
    ]
    for adaptive in (False, True):
        cases.append(
            (
                F.precision(preds, target, k, convention="torchmetrics", adaptive_k=adaptive, reduction="none"),
                _per_query(tmf.retrieval_precision, preds, binary, top_k=k, adaptive_k=adaptive),
            )
        )
    for ours, theirs in cases:
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)


def test_ndcg_ties_match_torchmetrics():
    preds, target = _tied_batch(5)
    for k in (None, 2, 6):
        want = _per_query(tmf.retrieval_normalized_dcg, preds, target, top_k=k)
        torch.testing.assert_close(
            F.ndcg(preds, target, k, convention="torchmetrics", reduction="none"), want, atol=1e-6, rtol=0
        )


def test_raw_logits_are_retrieved_unlike_torchmetrics():
    """torchmetrics' AP/MRR drop documents scored <= 0; raw logits must not change our answer."""
    preds = torch.tensor([-0.1, -2.0, -3.0])
    target = torch.tensor([0, 1, 0])
    assert F.reciprocal_rank(preds, target).item() == pytest.approx(0.5)
    assert F.average_precision(preds, target).item() == pytest.approx(0.5)
    shifted = F.average_precision(preds + 10, target)
    assert F.average_precision(preds, target).item() == shifted.item()


def test_lightgbm_preset_exp2_gain_and_adaptive_precision():
    preds = torch.tensor([0.9, 0.5, 0.1])
    target = torch.tensor([2, 0, 1])
    # 2^2-1 = 3 at rank 1 and 2^1-1 = 1 at rank 3 against the ideal 3, 1 at ranks 1, 2
    want = (3 + 1 / np.log2(4)) / (3 + 1 / np.log2(3))
    assert F.ndcg(preds, target, convention="lightgbm").item() == pytest.approx(want, abs=1e-6)
    assert F.precision(preds, target, 10, convention="lightgbm").item() == pytest.approx(2 / 3)
