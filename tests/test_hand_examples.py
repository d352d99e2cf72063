"""The seed article's formulas on examples computed by hand and written out here."""

from __future__ import annotations

import math

import pytest
import torch

from torch_rankeval import functional as F

L2 = 1 / math.log2(3)  # discount at rank 2
L3 = 1 / math.log2(4)  # rank 3 = 0.5
L4 = 1 / math.log2(5)


def test_dcg_with_exp2_gain_and_log2_discount():
    # ranked relevance 3, 2, 0, 1 -> gains 7, 3, 0, 1
    preds = torch.tensor([0.9, 0.8, 0.7, 0.6])
    target = torch.tensor([3, 2, 0, 1])
    want = 7 / 1 + 3 * L2 + 0 * L3 + 1 * L4
    assert F.dcg(preds, target).item() == pytest.approx(want, rel=1e-6)
    # IDCG sorts the relevance: 3, 2, 1, 0
    ideal = 7 + 3 * L2 + 1 * L3
    assert F.idcg(preds, target).item() == pytest.approx(ideal, rel=1e-6)
    assert F.ndcg(preds, target).item() == pytest.approx(want / ideal, rel=1e-6)
    assert F.ndcg(preds, target, k=2).item() == pytest.approx(1.0)


def test_ndcg_is_zero_when_idcg_is_zero():
    preds = torch.tensor([0.3, 0.2, 0.1])
    target = torch.tensor([0, 0, 0])
    assert F.idcg(preds, target).item() == 0
    assert F.ndcg(preds, target).item() == 0
    assert F.ndcg(preds, target, empty_target_action="pos").item() == 1
    assert torch.isnan(F.ndcg(preds, target, empty_target_action="skip", reduction="none"))


def test_ndcg_with_unretrieved_relevant_documents():
    # the ranking returned grades 0, 1; the query also has an unretrieved grade-2 document
    preds, target = torch.tensor([0.9, 0.1]), torch.tensor([0, 1])
    ideal = torch.tensor([2, 1, 0])
    want = (1 * L2) / (3 + 1 * L2)
    assert F.ndcg(preds, target, ideal_target=ideal).item() == pytest.approx(want, rel=1e-6)


def test_custom_gain_discount_and_log_base():
    preds, target = torch.tensor([0.9, 0.8]), torch.tensor([1, 2])
    assert F.dcg(preds, target, gain={1: 10.0, 2: 20.0}).item() == pytest.approx(10 + 20 * L2, rel=1e-6)
    assert F.dcg(preds, target, gain=lambda t: t * t).item() == pytest.approx(1 + 4 * L2, rel=1e-6)
    assert F.dcg(preds, target, gain="linear", discount=lambda r: 1 / r).item() == pytest.approx(1 + 2 / 2)
    # log base 10: 1/log10(rank + 1)
    want = 1 / math.log10(2) + 3 / math.log10(3)
    assert F.dcg(preds, target, log_base=10).item() == pytest.approx(want, rel=1e-6)


def test_average_precision_denominators_written_out():
    # relevant at ranks 1, 3, 6 of a 6-document list; the query has 4 relevant documents in all
    preds = torch.tensor([6.0, 5, 4, 3, 2, 1])
    target = torch.tensor([1, 0, 1, 0, 0, 1])
    n_rel = torch.tensor(4)
    prec = [1 / 1, 2 / 3, 3 / 6]
    assert F.average_precision(preds, target, n_relevant=n_rel).item() == pytest.approx(sum(prec) / 4)
    assert F.average_precision(
        preds, target, n_relevant=n_rel, denominator="retrieved_relevant"
    ).item() == pytest.approx(sum(prec) / 3)
    at3 = F.average_precision(preds, target, [3], n_relevant=n_rel, denominator="min_k_relevant")
    assert at3.item() == pytest.approx((1 + 2 / 3) / 3)
    assert F.average_precision(preds, target, 3, n_relevant=n_rel).item() == pytest.approx((1 + 2 / 3) / 4)


def test_graded_average_precision_written_out():
    # gains (exp2): grade 2 -> 3, grade 1 -> 1; weights w = gain / 3 -> 1, 0, 1/3 at ranks 1..3
    preds = torch.tensor([0.9, 0.5, 0.1])
    target = torch.tensor([2, 0, 1])
    w = [1.0, 0.0, 1 / 3]
    terms = [w[0] * (w[0]) / 1, 0.0, w[2] * (w[0] + w[1] + w[2]) / 3]
    want = sum(terms) / sum(w)
    assert F.average_precision(preds, target, graded=True).item() == pytest.approx(want, rel=1e-6)
    # binary grades: graded AP is plain AP
    b = torch.tensor([1, 0, 1])
    assert F.average_precision(preds, b, graded=True).item() == pytest.approx(F.average_precision(preds, b).item())


def test_reciprocal_rank_precision_recall_hit_rprec_written_out():
    preds = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5])
    target = torch.tensor([0, 0, 1, 0, 1])
    assert F.reciprocal_rank(preds, target).item() == pytest.approx(1 / 3)
    assert F.reciprocal_rank(preds, target, k=2).item() == 0
    assert F.precision(preds, target, k=3).item() == pytest.approx(1 / 3)
    assert F.precision(preds, target, k=10).item() == pytest.approx(2 / 10)
    assert F.recall(preds, target, k=3).item() == pytest.approx(1 / 2)
    assert F.hit_rate(preds, target, k=[2, 3]).tolist() == [0.0, 1.0]
    assert F.r_precision(preds, target).item() == 0.0  # R = 2, nothing relevant in the top 2
    assert F.r_precision(preds, target, n_relevant=torch.tensor(3)).item() == pytest.approx(1 / 3)


def test_relevance_threshold_for_binary_metrics():
    preds = torch.tensor([0.9, 0.8, 0.7])
    target = torch.tensor([1, 0, 2])
    assert F.reciprocal_rank(preds, target).item() == 1.0
    assert F.reciprocal_rank(preds, target, relevance_threshold=2).item() == pytest.approx(1 / 3)
    floats = torch.tensor([0.2, 0.0, 0.9])
    assert F.reciprocal_rank(preds, floats).item() == 1.0  # float grades: > 0 is relevant
    assert F.reciprocal_rank(preds, torch.tensor([False, False, True])).item() == pytest.approx(1 / 3)


def test_empty_target_actions_and_reductions():
    preds = torch.tensor([[0.9, 0.1], [0.9, 0.1]])
    target = torch.tensor([[0, 1], [0, 0]])
    rr = 0.5
    assert F.reciprocal_rank(preds, target).item() == pytest.approx(rr / 2)
    assert F.reciprocal_rank(preds, target, empty_target_action="pos").item() == pytest.approx((rr + 1) / 2)
    assert F.reciprocal_rank(preds, target, empty_target_action="skip").item() == pytest.approx(rr)
    assert F.reciprocal_rank(preds, target, reduction="sum").item() == pytest.approx(rr)
    with pytest.raises(ValueError, match="no relevant document"):
        F.reciprocal_rank(preds, target, empty_target_action="error")
    with pytest.warns(UserWarning, match="every list was skipped"):
        out = F.reciprocal_rank(preds[1:], target[1:], empty_target_action="skip")
    assert torch.isnan(out)


def test_k_sequence_shapes_and_k_beyond_list():
    preds = torch.rand(4, 6)
    target = torch.randint(0, 3, (4, 6))
    assert F.ndcg(preds, target, [1, 3, 100]).shape == (3,)
    assert F.ndcg(preds, target, [1, 3, 100], reduction="none").shape == (4, 3)
    assert F.ndcg(preds, target, 3, reduction="none").shape == (4,)
    assert F.ndcg(preds[0], target[0], [1, 2], reduction="none").shape == (2,)
    torch.testing.assert_close(F.ndcg(preds, target, 100), F.ndcg(preds, target))


def test_all_padding_list():
    preds = torch.tensor([[0.5, 0.4], [0.3, 0.2]])
    target = torch.tensor([[1, 0], [1, 1]])
    mask = torch.tensor([[True, True], [False, False]])
    per = F.ndcg(preds, target, mask=mask, reduction="none")
    assert per.tolist() == [1.0, 0.0]  # an all-padding list has no ideal: empty -> "neg" 0
    assert F.dcg(preds, target, mask=mask, reduction="none")[1].item() == 0
    assert F.precision(preds, target, 1, mask=mask, reduction="none")[1].item() == 0


def test_ignore_index_marks_padding():
    preds = torch.tensor([[0.9, 0.8, 0.7]])
    target = torch.tensor([[-100, 0, 1]])
    want = F.ndcg(preds[:, 1:], target[:, 1:])
    assert F.ndcg(preds, target, ignore_index=-100).item() == pytest.approx(want.item())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_score_dtypes(dtype):
    preds = torch.tensor([[0.75, 0.5, 0.25]], dtype=dtype)
    target = torch.tensor([[0, 1, 1]])
    out = F.ndcg(preds, target, gain="linear")
    assert out.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    assert out.item() == pytest.approx((L2 + L3) / (1 + L2), rel=1e-6)


@pytest.mark.parametrize(
    "target", [torch.tensor([0, 1, 1]), torch.tensor([0.0, 1.0, 1.0]), torch.tensor([False, True, True])]
)
def test_target_dtypes(target):
    assert F.average_precision(torch.tensor([0.9, 0.5, 0.1]), target).item() == pytest.approx((1 / 2 + 2 / 3) / 2)


def test_padding_does_not_outrank_a_negative_gain_in_the_ideal():
    # Linear gain on grades 1, -1 (one padded slot). The ranking is the ideal one, so nDCG = 1;
    # before the fix the padded slot (gain 0) sorted above the -1 in the ideal ranking, which
    # pushed the -1 to rank 3 and inflated IDCG to 1 - 0.5 instead of 1 - L2.
    preds = torch.tensor([0.9, 0.8, 0.1])
    target = torch.tensor([1.0, -1.0, 5.0])
    mask = torch.tensor([True, True, False])
    assert F.idcg(preds, target, mask=mask, gain="linear").item() == pytest.approx(1 - L2, rel=1e-6)
    assert F.ndcg(preds, target, mask=mask, gain="linear").item() == pytest.approx(1.0, rel=1e-6)
    # Same result as the unpadded list.
    assert F.ndcg(preds, target, mask=mask, gain="linear").item() == pytest.approx(
        F.ndcg(preds[:2], target[:2], gain="linear").item()
    )
