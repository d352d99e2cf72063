"""Hostile inputs never give a silent wrong number: each reproducer below returned NaN, inf or a
value above 1 before; now it raises a ValueError that names the argument and the fix, or gives the
oracle's value."""

from __future__ import annotations

import math

import pytest
import torch

from torch_rankeval import NDCG, PositionDebiasedDCG, PositionDebiasedNDCG, RankingMetrics
from torch_rankeval import functional as F
from torch_rankeval.conventions import Convention
from torch_rankeval.propensity import pbm_propensity

sklearn_metrics = pytest.importorskip("sklearn.metrics")

PREDS = torch.tensor([[0.9, 0.5, 0.1]])


# ----------------------------------------------------------------------------- exp2 overflow
@pytest.mark.parametrize(
    "target",
    [
        torch.tensor([[128.0, 0.0, 1.0]]),  # float32 grades
        torch.tensor([[128, 0, 1]]),  # int grades work in float32
        torch.tensor([[255, 0, 1]], dtype=torch.uint8),
        torch.tensor([[1100.0, 0.0, 1.0]], dtype=torch.float64),  # beyond float64 too
    ],
)
def test_exp2_gain_that_overflows_raises(target):
    for fn in (F.ndcg, F.dcg, F.idcg):
        with pytest.raises(ValueError, match=r"grades >= (128|1024), whose gain 2\*\*rel - 1 overflows"):
            fn(PREDS.to(target.dtype) if target.is_floating_point() else PREDS, target)
    metric = NDCG()
    with pytest.raises(ValueError, match="overflows"):
        metric.update(PREDS, target)
    assert metric.counts.tolist() == [0]  # nothing reached the running sums
    with pytest.raises(ValueError, match="overflows"):  # ideal_target is checked the same way
        F.ndcg(PREDS, torch.tensor([[1, 0, 1]]), ideal_target=target.to(torch.float32))


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16])
@pytest.mark.parametrize("scores", [torch.float32, torch.float64])
def test_narrow_integer_grades_cannot_overflow_and_are_not_refused(dtype, scores):
    """Grades of a dtype whose largest value stays below the overflow limit (int8 and uint8 in float32
    and float64, int16 in float64) pass the check; the limit wrapped around in the comparison before
    (int8 read 128 as -128, uint8 read 1024 as 0): every int8 grade was refused. sklearn's ndcg_score
    on the exp2 gains is the oracle; grades 127 / 255 / 1023 (int16 in float64) are exact there."""
    top = min(torch.iinfo(dtype).max, 127 if scores == torch.float32 else 1023)
    preds = torch.tensor([[0.9, 0.5, 0.1, 0.7]], dtype=scores)
    grades = torch.tensor([[3, 0, top, 1]]).to(dtype)
    gains = [2.0**g - 1 for g in grades[0].tolist()]
    expected = sklearn_metrics.ndcg_score([gains], preds.double().tolist(), k=3)
    assert F.ndcg(preds, grades, k=3).item() == pytest.approx(expected, rel=1e-6)
    if dtype == torch.int16 and scores == torch.float32:  # int16 reaches 128: still refused in float32
        with pytest.raises(ValueError, match="grades >= 128"):
            F.ndcg(preds, torch.tensor([[128, 0, 1, 2]], dtype=dtype))


def test_float64_grades_up_to_1023_follow_sklearn_on_exact_gains():
    preds = torch.tensor([[0.9, 0.5, 0.1, 0.7]], dtype=torch.float64)
    grades = torch.tensor([[300.0, 0.0, 1000.0, 128.0]], dtype=torch.float64)
    gains = [2.0**g - 1 for g in grades[0].tolist()]  # exact in float64
    expected = sklearn_metrics.ndcg_score([gains], preds.tolist(), k=3)
    assert F.ndcg(preds, grades, k=3).item() == pytest.approx(expected, rel=1e-12)
    assert math.isfinite(F.dcg(preds, grades).item())


def test_linear_gains_that_overflow_and_bad_gain_functions_raise():
    with pytest.raises(ValueError, match="gains are not finite"):
        F.dcg(PREDS, torch.tensor([[3e38, 3e38, 3e38]]), gain="linear")  # the sum overflows float32
    assert F.dcg(PREDS.double(), torch.tensor([[3e38, 3e38, 3e38]], dtype=torch.float64), gain="linear").isfinite()
    with pytest.raises(ValueError, match="gains are not finite"):
        F.ndcg(PREDS, torch.tensor([[1, 0, 1]]), gain=lambda g: g / 0)
    with pytest.raises(ValueError, match="gain mapping must map finite grades to finite gains"):
        Convention(gain={1: float("inf")})
    with pytest.raises(ValueError, match="discount callable must return finite, non-negative"):
        F.dcg(PREDS, torch.tensor([[1, 0, 1]]), discount=lambda r: r * float("nan"))
    with pytest.raises(ValueError, match="discount callable must return finite, non-negative"):
        RankingMetrics(("dcg",), discount=lambda r: -1.0 / r)


# ----------------------------------------------------------------------------- ideal_target
def test_ideal_target_that_lacks_relevant_documents_of_the_list_raises():
    # the list holds three relevant documents, its ideal_target row one: nDCG 2.13, AP 3, recall 3 before
    target, ideal = torch.tensor([[1, 1, 1]]), torch.tensor([[0, 0, 1, 0]])
    for fn in (F.ndcg, F.average_precision, F.recall, F.r_precision, F.reciprocal_rank, F.precision):
        with pytest.raises(ValueError, match="fewer relevant documents than its list"):
            fn(PREDS, target, ideal_target=ideal)
    with pytest.raises(ValueError, match="fewer relevant documents than its list"):
        RankingMetrics(("ndcg", "map", "recall")).update(PREDS, target, ideal_target=ideal)


def test_ideal_target_that_lacks_a_grade_of_the_list_raises():
    # as many relevant documents, but the list's two grade-2 documents have one counterpart: nDCG@2 > 1
    target, ideal = torch.tensor([[2, 2, 0]]), torch.tensor([[3, 1, 0, 0]])
    with pytest.raises(ValueError, match="whose grade \\(gain\\) its ideal_target row lacks"):
        F.ndcg(PREDS, target, ideal_target=ideal, gain="linear")
    assert F.average_precision(PREDS, target, ideal_target=ideal).item() == 1.0  # binary: consistent, allowed


def test_consistent_ideal_targets_are_accepted():
    target = torch.tensor([[2, 2, 0]])
    for ideal, kw, expected in (
        (torch.tensor([[0, 2, 2]]), {}, 1.0),  # the list's own grades, reordered
        (torch.tensor([[2, 2]]), {}, 1.0),  # judged non-relevant ones left out
        (torch.tensor([[2, 2, -1, -1]]), {"ignore_index": -1}, 1.0),  # padded with ignore_index
        (torch.tensor([[2, 2, 0, 3]]), {"gain": "linear"}, (2 + 2 / math.log2(3)) / (3 + 2 / math.log2(3) + 1)),
    ):
        assert F.ndcg(PREDS, target, ideal_target=ideal, **kw).item() == pytest.approx(expected, rel=1e-6)
    # an empty ideal row is a query without judged documents: consistent only with a list without relevant ones
    assert (
        F.ndcg(PREDS, torch.zeros(1, 3, dtype=torch.long), ideal_target=torch.zeros(1, 0, dtype=torch.long)).item()
        == 0.0
    )


# ----------------------------------------------------------------------------- propensity underflow
CLICKS = torch.tensor([[1.0, 0.0, 1.0]])
DEEP = torch.tensor([[1, 2, 30]])


def test_eta_that_underflows_the_propensity_raises():
    # rho = 30 ** -100 is 0 in float32: the gain was inf and DCG inf / nDCG NaN
    for fn in (F.position_debiased_dcg, F.position_debiased_ndcg):
        with pytest.raises(ValueError, match=r"eta=100.0 makes rho = position \*\* -eta underflow"):
            fn(PREDS, CLICKS, logged_positions=DEEP, eta=100.0)
    with pytest.raises(ValueError, match="underflow"):
        F.ips_gains(CLICKS, logged_positions=DEEP, eta=100.0)
    for cls in (PositionDebiasedDCG, PositionDebiasedNDCG):
        metric = cls(eta=100.0)
        with pytest.raises(ValueError, match="underflow"):
            metric.update(PREDS, CLICKS, logged_positions=DEEP)
        assert metric.counts.tolist() == [0]
    with pytest.raises(ValueError, match=r"underflow to 0 in torch.float32 \(position 30"):
        pbm_propensity(torch.tensor([1, 2, 30]), eta=100.0)


def test_float64_positions_hold_the_same_eta_and_give_the_hand_value():
    dcg = F.position_debiased_dcg(PREDS.double(), CLICKS.double(), logged_positions=DEEP, eta=100.0)
    expected = 1.0 + 30.0**100 / math.log2(
        4
    )  # ranked by preds: position-1 click at rank 1, position-30 click at rank 3
    assert dcg.item() == pytest.approx(expected, rel=1e-12)
    rho = pbm_propensity(torch.tensor([1.0, 2.0, 30.0], dtype=torch.float64), eta=100.0)
    assert rho[-1].item() == pytest.approx(30.0**-100, rel=1e-12)


def test_tiny_propensities_and_huge_clicks_raise():
    with pytest.raises(ValueError, match="a propensity is too small or a click count too large for float32"):
        F.position_debiased_dcg(PREDS, CLICKS, propensities=torch.tensor([[1.0, 1.0, 1e-45]]))
    with pytest.raises(ValueError, match="too small"):
        F.position_debiased_dcg(
            PREDS, CLICKS, logged_positions=torch.tensor([[1, 2, 3]]), propensity_table=torch.tensor([1.0, 1.0, 1e-45])
        )
    with pytest.raises(ValueError, match="a click count is too large for float32"):
        F.position_debiased_dcg(PREDS, torch.tensor([[3e38, 0.0, 3e38]]), propensities=torch.ones(1, 3), clip=0.5)
    # clip bounds the weights: the same tiny propensity is fine
    value = F.position_debiased_dcg(PREDS, CLICKS, propensities=torch.tensor([[1.0, 1.0, 1e-45]]), clip=0.01)
    assert value.item() == pytest.approx(1.0 + 100.0 / math.log2(4), rel=1e-6)


# ----------------------------------------------------------------------------- inputs that are fine
def test_bool_and_uint8_grades_equal_int64_grades():
    target = torch.tensor([[1, 0, 1], [0, 1, 1]])
    preds = torch.tensor([[0.9, 0.5, 0.1], [0.3, 0.2, 0.1]])
    for fn in (F.ndcg, F.average_precision, F.reciprocal_rank, F.recall):
        reference = fn(preds, target, reduction="none")
        torch.testing.assert_close(fn(preds, target.bool(), reduction="none"), reference)
        torch.testing.assert_close(fn(preds, target.to(torch.uint8), reduction="none"), reference)


def test_half_precision_scores_tie_where_they_are_equal_in_half_precision():
    # 1.0001 and 1.0002 are the same float16 number: a tie, averaged (expected value over both orders)
    preds = torch.tensor([[1.0001, 1.0002, 0.5]])
    target = torch.tensor([[0, 1, 1]])
    half = F.ndcg(preds.half(), target, gain="linear")
    assert preds.half()[0, 0] == preds.half()[0, 1]
    both_orders = [(1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3)), (1 + 0.5) / (1 + 1 / math.log2(3))]
    assert half.item() == pytest.approx(sum(both_orders) / 2, rel=1e-6)
    assert F.ndcg(preds, target, gain="linear").item() == pytest.approx(both_orders[1], rel=1e-6)


def test_huge_cutoffs_follow_the_conventions():
    target = torch.tensor([[1, 0, 1]])
    huge = 10**12
    assert F.precision(PREDS, target, k=huge).item() == pytest.approx(2 / huge)  # trec_eval: divide by k
    assert F.precision(PREDS, target, k=huge, adaptive_k=True).item() == pytest.approx(2 / 3)
    assert F.ndcg(PREDS, target, k=huge).item() == F.ndcg(PREDS, target).item()
    metric = RankingMetrics((f"recall@{huge}", f"map@{huge}"))
    metric.update(PREDS, target)
    assert [v.item() for v in metric.compute().values()] == pytest.approx([1.0, (1 + 2 / 3) / 2])


def test_recall_class_without_k_is_recall_over_the_whole_list():
    # "recall" is also trec_eval's name for recall at its nine default cutoffs: Recall() computed recall@5
    from torch_rankeval import Recall

    metric = Recall()
    metric.update(torch.tensor([[0.9, 0.8, 0.7, 0.6, 0.5, 0.4]]), torch.tensor([[0, 0, 0, 0, 0, 1]]))
    assert metric.keys == ["recall"] and metric.compute().item() == 1.0
