"""Every family on the one input stage (issue 26, item 3): the same bad input gives the same error, word
for word, in RankingMetrics and in the classes and functions that once read their input on a side route:
PositionProfile, the debiased metrics and function, the intent-aware measures (RankingMetrics and
F.evaluate with a subtopic target), and compat.torchmetrics' two curve classes (whose reference is the
compat Retrieval* classes, torchmetrics' messages). An option a class does not take is a TypeError
naming it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from torch_rankeval import PositionDebiasedDCG, PositionDebiasedNDCG, PositionProfile, RankingMetrics
from torch_rankeval import functional as F
from torch_rankeval.compat import torchmetrics as compat
from torch_rankeval.ranking.inputs import SCORES_NOT_FINITE

P = torch.tensor([[0.9, 0.5, 0.1], [0.2, 0.3, 0.4]])
T = torch.tensor([[0, 1, 1], [1, 0, 0]])
ONES = torch.ones(2, 3)


def _nan_preds() -> torch.Tensor:
    return torch.tensor([[0.9, float("nan"), 0.1], [0.2, 0.3, 0.4]])


#: bad inputs (preds, target, keyword arguments) that every entry point checks alike
BAD = {
    "preds not a tensor": (P.tolist(), T, {}),
    "integer preds": (T, T, {}),
    "three-dimensional preds": (P[None], T[None], {}),
    "integer mask": (P, T, {"mask": torch.ones_like(T)}),
    "mask of another shape": (P, T, {"mask": torch.ones(2, 2, dtype=torch.bool)}),
    "list ids of another shape": (P, T, {"indexes": torch.zeros(3, dtype=torch.long)}),
    "float list ids": (P, T, {"indexes": torch.zeros(2)}),
}


def _message(call: Callable[[], object]) -> tuple[type, str]:
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    return info.type, str(info.value)


def _ranking_metrics(preds, target, kw, metrics=("ndcg",)):  # noqa: ANN001, ANN202
    return lambda: RankingMetrics(metrics).update(preds, target, **kw)


def _subtopics(target):  # noqa: ANN001, ANN202
    """The same grades as one subtopic (an intent-aware target ``(N, L, 1)``)."""
    return target.unsqueeze(-1) if isinstance(target, torch.Tensor) and target.ndim == 2 else target


def _entry_points(preds, target, kw) -> dict[str, Callable[[], object]]:  # noqa: ANN001
    padded = {k: v for k, v in kw.items() if k != "indexes"}  # the functions take no list ids
    out = {
        "PositionProfile": lambda: PositionProfile(3).update(preds, target, **kw),
        "RankingMetrics(alpha_nDCG@3)": _ranking_metrics(preds, _subtopics(target), kw, ("alpha_nDCG@3",)),
        "PositionDebiasedNDCG": lambda: PositionDebiasedNDCG(2).update(preds, target, propensities=ONES, **kw),
        "PositionDebiasedDCG": lambda: PositionDebiasedDCG(2).update(preds, target, propensities=ONES, **kw),
    }
    if "indexes" not in kw:
        out["F.evaluate(ndcg)"] = lambda: F.evaluate(preds, target, ["ndcg"], **padded)
        out["F.evaluate(alpha_nDCG@3)"] = lambda: F.evaluate(preds, _subtopics(target), ["alpha_nDCG@3"], **padded)
        out["F.position_debiased_ndcg"] = lambda: F.position_debiased_ndcg(preds, target, propensities=ONES, **padded)
    return out


@pytest.mark.parametrize("case", list(BAD))
def test_the_same_bad_input_gives_the_same_error_everywhere(case: str) -> None:
    preds, target, kw = BAD[case]
    reference = _message(_ranking_metrics(preds, target, kw))
    for name, call in _entry_points(preds, target, kw).items():
        assert _message(call) == reference, name


def test_preds_and_target_of_other_shapes_name_the_argument() -> None:
    """The same check everywhere; the debiased entry points call their target ``clicks``."""
    kind, message = _message(_ranking_metrics(P, T[:, :2], {}))
    assert (kind, message) == (ValueError, "preds and target must have the same shape, got (2, 3) and (2, 2)")
    assert _message(lambda: PositionProfile(3).update(P, T[:, :2])) == (kind, message)
    assert _message(lambda: F.evaluate(P, T[:, :2], ["ndcg"])) == (kind, message)
    clicks = (kind, message.replace("target", "clicks"))
    assert _message(lambda: PositionDebiasedNDCG().update(P, T[:, :2], propensities=ONES)) == clicks
    assert _message(lambda: F.position_debiased_ndcg(P, T[:, :2], propensities=ONES)) == clicks


def test_one_dimensional_preds_without_indexes_is_an_error_in_every_metric_that_reads_flat_input() -> None:
    """The forgotten ``indexes=``: RankingMetrics, PositionProfile (once silently one list) and the
    intent-aware measures say the same. The functions read a 1-D input as one list, as documented."""
    kind, message = _message(_ranking_metrics(P[0], T[0], {}))
    assert kind is ValueError and message.startswith("1-D preds without indexes=")
    assert _message(lambda: PositionProfile(3).update(P[0], T[0])) == (kind, message)
    assert _message(_ranking_metrics(P[0], T[0].unsqueeze(-1), {}, ("alpha_nDCG@3",))) == (kind, message)
    # input_format="padded", a mask or indexes make it one list, as in RankingMetrics
    profile = PositionProfile(3, input_format="padded", ideal=False)
    profile.update(P[0], T[0])
    assert profile.compute()["relevance"].tolist() == [0.0, 1.0, 1.0]


def test_flat_input_is_grouped_by_indexes_in_position_profile_as_in_ranking_metrics() -> None:
    """The same flat documents, grouped by their query ids, give the padded batch's profile."""
    flat, padded = PositionProfile(3), PositionProfile(3)
    order = torch.tensor([4, 0, 2, 5, 1, 3])  # documents of both queries interleaved
    flat.update(P.reshape(-1)[order], T.reshape(-1)[order], indexes=torch.tensor([0, 0, 0, 1, 1, 1])[order])
    padded.update(P, T)
    for key, value in padded.compute().items():
        torch.testing.assert_close(flat.compute()[key], value, msg=key)


def test_scores_that_are_not_finite() -> None:
    """One message on the one input stage; the debiased estimators rank +-inf scores (documented) and
    refuse NaN with their own message."""
    reference = _message(_ranking_metrics(_nan_preds(), T, {}))
    assert reference == (ValueError, SCORES_NOT_FINITE)
    assert _message(lambda: PositionProfile(3).update(_nan_preds(), T)) == reference
    assert _message(_ranking_metrics(_nan_preds(), _subtopics(T), {}, ("alpha_nDCG@3",))) == reference
    assert _message(lambda: F.evaluate(_nan_preds(), _subtopics(T), ["alpha_nDCG@3"])) == reference
    kind, message = _message(lambda: F.position_debiased_ndcg(_nan_preds(), T, propensities=ONES))
    assert kind is ValueError and message.startswith("preds contains NaN scores at unmasked positions")


@pytest.mark.parametrize(
    ("make", "option"),
    [
        (lambda: PositionProfile(empty_target_action="skip"), "empty_target_action"),
        (lambda: PositionProfile(compile=True), "compile"),
        (lambda: PositionDebiasedNDCG(ignore_index=-1), "ignore_index"),
        (lambda: PositionDebiasedNDCG(input_format="flat"), "input_format"),
        (lambda: PositionDebiasedNDCG(gain="linear"), "gain="),
        (lambda: PositionDebiasedDCG(empty_target_action="skip"), "empty_target_action="),
        (lambda: RankingMetrics(("alpha_nDCG@3",), denominator="min_k_relevant"), "denominator="),
    ],
)
def test_an_option_a_class_does_not_take_is_a_type_error_naming_it(make: Callable[[], object], option: str) -> None:
    with pytest.raises(TypeError, match=option):
        make()


CURVES = (compat.RetrievalPrecisionRecallCurve, compat.RetrievalRecallAtFixedPrecision)
FLAT_BAD = {
    "no indexes": (P.reshape(-1), T.reshape(-1), None),
    "shapes differ": (P.reshape(-1), T.reshape(-1)[:5], torch.zeros(6, dtype=torch.long)),
    "integer preds": (T.reshape(-1), T.reshape(-1), torch.zeros(6, dtype=torch.long)),
    "preds not a tensor": (P.reshape(-1).tolist(), T.reshape(-1), torch.zeros(6, dtype=torch.long)),
}


@pytest.mark.parametrize("case", list(FLAT_BAD))
def test_the_curve_classes_check_their_input_as_the_retrieval_classes(case: str) -> None:
    preds, target, indexes = FLAT_BAD[case]
    reference = _message(lambda: compat.RetrievalMAP().update(preds, target, indexes))
    for cls in CURVES:
        assert _message(lambda cls=cls: cls().update(preds, target, indexes)) == reference, cls.__name__


@pytest.mark.parametrize("kw", [{}, {"max_k": 10}, {"max_k": 40, "adaptive_k": True}, {"empty_target_action": "skip"}])
def test_the_curves_through_the_plan_equal_torchmetrics_on_long_tied_lists_of_skewed_lengths(kw: dict) -> None:
    """The oracle: torchmetrics' own curve class. Lists beyond torch's 16-element insertion sort, six
    distinct scores (ties everywhere), one query of 700 documents among short ones (the flat documents
    go in several length buckets), queries split over three updates."""
    from torchmetrics.retrieval import RetrievalPrecisionRecallCurve as TMCurve

    for seed in range(2):
        g = torch.Generator().manual_seed(seed)
        sizes = torch.randint(1, 80, (30,), generator=g)
        sizes[0] = 700
        ids = torch.repeat_interleave(torch.randperm(5000, generator=g)[:30], sizes)
        perm = torch.randperm(len(ids), generator=g)
        preds = torch.rand(len(ids), generator=g).mul(5).round().div(5)[perm]
        target = (torch.rand(len(ids), generator=g) < 0.3).long()[perm]
        ours, theirs = compat.RetrievalPrecisionRecallCurve(**kw), TMCurve(**kw)
        for part in torch.tensor_split(torch.arange(len(ids)), 3):
            ours.update(preds[part], target[part], ids[part])
            theirs.update(preds[part], target[part], ids[part])
        for got, want in zip(ours.compute(), theirs.compute()):
            assert got.shape == want.shape
            torch.testing.assert_close(got, want.to(got.dtype), atol=1e-6, rtol=0)


def test_ignore_index_with_a_subtopic_target_is_a_type_error_naming_it() -> None:
    """Subtopic grades have no padding value (a negative one is refused): ignore_index= was compared with
    the ad-hoc view (the largest subtopic grade), so ignore_index=0 silently dropped every document
    relevant to no subtopic. Now a TypeError naming it, in the class (at construction) and the function."""
    target = torch.tensor([[[0, 1], [1, 0], [0, 0]]])
    preds = torch.tensor([[0.9, 0.5, 0.1]])
    with pytest.raises(TypeError, match="ignore_index= does not apply") as in_class:
        RankingMetrics(("alpha_nDCG@3",), ignore_index=0)
    with pytest.raises(TypeError, match="ignore_index= does not apply") as in_function:
        F.evaluate(preds, target, ["alpha_nDCG@3"], ignore_index=0)
    assert str(in_class.value) == str(in_function.value)
    # the fix the message names: padding as mask=False
    masked = F.evaluate(preds, target, ["alpha_nDCG@3"], mask=torch.tensor([[True, True, False]]))
    assert masked["alpha_nDCG@3"].item() == pytest.approx(
        F.evaluate(preds[:, :2], target[:, :2], ["alpha_nDCG@3"])["alpha_nDCG@3"].item()
    )
