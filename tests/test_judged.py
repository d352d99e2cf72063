"""Unjudged documents in padded tensors (``judged=False``): never relevant, no gain, in every API;
against pytrec_eval, where a retrieved document absent from the qrels is unjudged."""

from __future__ import annotations

import pytest
import torch

from torch_rankeval import RankingMetrics
from torch_rankeval import functional as F
from torch_rankeval.conventions import DEFAULT
from torch_rankeval.ranking.inputs import prepare

pytrec_eval = pytest.importorskip("pytrec_eval")


def test_unjudged_documents_count_as_nothing_hand_example():
    preds = torch.tensor([[0.9, 0.8, 0.7, 0.6]])
    target = torch.tensor([[3, 1, 2, -7]])  # the 3 and the -7 are not judged: their grades are ignored
    judged = torch.tensor([[False, True, True, False]])
    out = F.evaluate(preds, target, ["ndcg@4", "P@2", "mrr"], judged=judged, gain="linear")
    # ranked gains 0, 1, 2, 0 -> DCG = 1/log2(3) + 2/2; ideal 2, 1 -> 2 + 1/log2(3)
    log3 = torch.log2(torch.tensor(3.0))
    assert out["ndcg@4"].item() == pytest.approx(((1 / log3 + 1) / (2 + 1 / log3)).item(), abs=1e-6)
    assert out["P@2"].item() == pytest.approx(0.5)
    assert out["mrr"].item() == pytest.approx(0.5)
    rb, _ = prepare(preds, target, convention=DEFAULT, judged=judged, uses_gain=True)
    assert rb.judged.tolist() == [[False, True, True, False]]
    # exp2 gain: the negative grade of an unjudged document is not an error; of a judged one it is
    assert F.evaluate(preds, target, ["ndcg"], judged=judged)["ndcg"].isfinite()
    with pytest.raises(ValueError, match="negative grades"):
        F.evaluate(preds, target, ["ndcg"])


def test_judged_mask_equals_pytrec_eval_on_unjudged_retrieved_documents():
    g = torch.Generator().manual_seed(3)
    n, length = 20, 9
    preds = torch.rand(n, length, generator=g, dtype=torch.float64)
    target = torch.randint(0, 4, (n, length), generator=g)
    judged = torch.rand(n, length, generator=g) < 0.6
    judged[:, 0] = True
    qrels = {f"q{i}": {f"d{j}": int(target[i, j]) for j in range(length) if judged[i, j]} for i in range(n)}
    run = {f"q{i}": {f"d{j}": float(preds[i, j]) for j in range(length)} for i in range(n)}
    res = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.5", "map", "P.3"}).evaluate(run)
    metric = RankingMetrics(["ndcg_cut.5", "map", "P.3"], convention="trec_eval")
    metric.update(preds, target, judged=judged)
    got = metric.compute()
    for ours, theirs in (("ndcg_cut_5", "ndcg_cut_5"), ("map", "map"), ("P_3", "P_3")):
        want = sum(v[theirs] for v in res.values()) / n
        assert got[ours].item() == pytest.approx(want, abs=1e-6), ours


@pytest.mark.parametrize(
    ("judged", "exc", "match"),
    [
        (torch.ones(2, 3, dtype=torch.long), TypeError, "judged must be a bool"),
        (torch.ones(2, 4, dtype=torch.bool), ValueError, "judged must have the shape"),
        ([[True] * 3] * 2, TypeError, "judged must be a torch.Tensor"),
    ],
)
def test_bad_judged_names_the_argument(judged, exc, match):
    with pytest.raises(exc, match=match):
        F.evaluate(torch.rand(2, 3), torch.ones(2, 3).long(), ["ndcg"], judged=judged)


def test_judged_is_padded_input_only():
    with pytest.raises(ValueError, match="judged apply to padded"):
        RankingMetrics(["ndcg"]).update(
            torch.rand(4), torch.ones(4).long(), indexes=torch.zeros(4).long(), judged=torch.ones(4, dtype=torch.bool)
        )
