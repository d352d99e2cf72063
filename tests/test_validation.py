"""Bad input raises a clear error that names the argument."""

from __future__ import annotations

import math

import pytest
import torch

from torch_rankeval import functional as F
from torch_rankeval.conventions import Convention, resolve_convention

P = torch.tensor([[0.3, 0.2, 0.1]])
T = torch.tensor([[1, 0, 2]])


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda: F.ndcg(P, T[:, :2]), ValueError, "same shape"),
        (lambda: F.ndcg(P.long(), T), TypeError, "preds must be a floating"),
        (lambda: F.ndcg([0.1], T), TypeError, "preds must be a torch.Tensor"),
        (lambda: F.ndcg(P, T.to(torch.complex64)), TypeError, "target must hold"),
        (lambda: F.ndcg(P.reshape(1, 1, 3), T.reshape(1, 1, 3)), ValueError, r"\(L,\) for one list or \(N, L\)"),
        (lambda: F.ndcg(P, T, 0), ValueError, "k must be a positive int"),
        (lambda: F.ndcg(P, T, [5, -1]), ValueError, "k must be a positive int"),
        (lambda: F.ndcg(P, T, []), ValueError, "k is an empty sequence"),
        (lambda: F.ndcg(P, T, 2.5), TypeError, "k must be None"),
        (lambda: F.ndcg(P, T, True), TypeError, "k must be None"),
        (lambda: F.ndcg(P, T, mask=torch.ones(1, 3)), TypeError, "mask must be a bool"),
        (lambda: F.ndcg(P, T, mask=torch.ones(1, 2, dtype=torch.bool)), ValueError, "mask must have the shape"),
        (lambda: F.ndcg(torch.tensor([[float("nan"), 0.2, 0.1]]), T), ValueError, "preds contains NaN or infinite"),
        (lambda: F.ndcg(torch.tensor([[float("inf"), 0.2, 0.1]]), T), ValueError, "preds contains NaN or infinite"),
        (lambda: F.ndcg(P, torch.tensor([[1.0, float("nan"), 0]])), ValueError, "target contains NaN"),
        (lambda: F.ndcg(P, torch.tensor([[1, -1, 0]])), ValueError, "negative grades"),
        (lambda: F.ndcg(P, T, ideal_target=torch.tensor([[-2, 1]])), ValueError, "ideal_target has negative grades"),
        (lambda: F.ndcg(P, T, ideal_target=torch.tensor([1, 2])), ValueError, "ideal_target must have shape"),
        (lambda: F.ndcg(P, T, gain="exp"), ValueError, "gain='exp' is not known"),
        (lambda: F.ndcg(P, T, gain={}), ValueError, "gain mapping is empty"),
        (lambda: F.ndcg(P, T, log_base=1), ValueError, "log_base must be"),
        (lambda: F.ndcg(P, T, ties="random"), ValueError, "ties='random' is not valid"),
        (lambda: F.ndcg(P, T, reduction="avg"), ValueError, "reduction='avg' is not valid"),
        (lambda: F.ndcg(P, T, empty_target_action="zero"), ValueError, "empty_target_action='zero'"),
        (lambda: F.ndcg(P, T, convention="pyterrier"), ValueError, "not a known preset"),
        (lambda: F.average_precision(P, T, denominator="found"), ValueError, "denominator='found'"),
        (lambda: F.average_precision(P, T, graded="yes"), TypeError, "graded must be a bool"),
        (lambda: F.recall(P, T, relevance_threshold=0), ValueError, "relevance_threshold must be"),
        (lambda: F.recall(P, T, relevance_threshold=float("nan")), ValueError, "relevance_threshold must be"),
        (lambda: F.recall(P, T, n_relevant=torch.tensor([1])), ValueError, "n_relevant is smaller"),
        (lambda: F.recall(P, T, n_relevant=torch.tensor([1.0])), TypeError, "n_relevant must be an integer"),
        (lambda: F.recall(P, T, n_relevant=torch.tensor([3, 3])), ValueError, "n_relevant must have shape"),
        (lambda: F.recall(P, T, ignore_index="pad"), TypeError, "ignore_index must be"),
        (lambda: F.precision(P, T, adaptive_k=1), TypeError, "adaptive_k must be a bool"),
        (lambda: F.dcg(P, T, discount=lambda r: torch.ones(2)), ValueError, "discount callable must return"),
    ],
)
def test_bad_input_raises_a_clear_error(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_meta_device_mismatch_is_named():
    with pytest.raises(ValueError, match="target is on meta but preds is on cpu"):
        F.ndcg(P, T.to("meta"))


def test_masked_nan_scores_are_allowed():
    preds = torch.tensor([[0.3, float("nan"), 0.1]])
    mask = torch.tensor([[True, False, True]])
    assert torch.isfinite(F.ndcg(preds, T, mask=mask)).all()


def test_negative_grades_are_allowed_with_linear_gain_and_skipped_check():
    # Hand computation. Ranked by P (0.3, 0.2, 0.1) the grades are 1, -1, 0; the ideal order is 1, 0, -1.
    # Discounts 1/log2(rank + 1): 1, 1/log2(3), 1/2.
    # Linear gain (g): DCG = 1 - 1/log2(3), IDCG = 1 + 0 - 1/2 = 0.5, nDCG = 0.738140...
    # Default exp2 gain (2^g - 1: 1, -0.5, 0), allowed only with validate_args=False:
    # DCG = 1 - 0.5/log2(3), IDCG = 1 + 0 - 0.5/2 = 0.75, nDCG = 0.912713...
    target = torch.tensor([[1, -1, 0]])
    linear = (1 - 1 / math.log2(3)) / 0.5
    exp2 = (1 - 0.5 / math.log2(3)) / 0.75
    torch.testing.assert_close(F.ndcg(P, target, gain="linear"), torch.tensor(linear))
    torch.testing.assert_close(F.ndcg(P, target, validate_args=False), torch.tensor(exp2))


def test_resolve_convention_rejects_unknown_arguments():
    with pytest.raises(TypeError, match="unknown convention argument"):
        resolve_convention(None, gian="exp2")
    with pytest.raises(TypeError, match="convention must be"):
        resolve_convention(3)
    assert resolve_convention(Convention(ties="first")).ties == "first"
