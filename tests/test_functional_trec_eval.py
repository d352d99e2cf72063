"""The functional metrics against trec_eval: pytrec_eval (trec_eval's C code) and trec_eval's own
test collection with its expected outputs."""

from __future__ import annotations

import pytest
import torch

from tests.oracles import random_batch, read_expected, read_qrels, read_run, to_pytrec, trec_tensors
from torch_rankeval import functional as F

pytrec_eval = pytest.importorskip("pytrec_eval")

MEASURES = {"ndcg", "ndcg_cut.5,10", "map", "map_cut.10", "recip_rank", "P.5,10", "recall.10", "Rprec", "success.1,5"}


def ours(preds, target, mask, ideal, *, threshold=None):
    """Per-query values under the trec_eval preset, keyed like pytrec_eval's output."""
    kw = dict(mask=mask, ideal_target=ideal, convention="trec_eval", reduction="none")
    bkw = dict(kw, relevance_threshold=threshold)
    nd = F.ndcg(preds, target, [5, 10], **kw)
    out = {
        "ndcg": F.ndcg(preds, target, **kw),
        "ndcg_cut_5": nd[:, 0],
        "ndcg_cut_10": nd[:, 1],
        "map": F.average_precision(preds, target, **bkw),
        "map_cut_10": F.average_precision(preds, target, 10, **bkw),
        "recip_rank": F.reciprocal_rank(preds, target, **bkw),
        "recall_10": F.recall(preds, target, 10, **bkw),
        "Rprec": F.r_precision(preds, target, **bkw),
    }
    p = F.precision(preds, target, [5, 10], **bkw)
    out["P_5"], out["P_10"] = p[:, 0], p[:, 1]
    h = F.hit_rate(preds, target, [1, 5], **bkw)
    out["success_1"], out["success_5"] = h[:, 0], h[:, 1]
    return out


@pytest.mark.parametrize("extra_judged", [0, 6])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_batches_match_pytrec_eval(seed, extra_judged):
    preds, target, mask, ideal = random_batch(60, 25, seed=seed, extra_judged=extra_judged)
    qrels, run = to_pytrec(preds, target, mask, ideal)
    expected = pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(run)
    got = ours(preds, target, mask, ideal)
    qids = [f"q{i}" for i in range(preds.shape[0])]
    # trec_eval drops queries without relevant judgments from its evaluation; compare the rest.
    evaluated = [i for i, q in enumerate(qids) if q in expected]
    assert len(evaluated) > 40
    for name, values in got.items():
        want = torch.tensor([expected[qids[i]][name] for i in evaluated], dtype=torch.float64)
        torch.testing.assert_close(values[evaluated].double(), want, atol=1e-6, rtol=0, msg=name)


def test_float32_scores_match_pytrec_eval_to_1e6():
    preds, target, mask, ideal = random_batch(50, 30, seed=7, extra_judged=3)
    preds32 = preds.float()
    qrels, run = to_pytrec(preds32.double(), target, mask, ideal)
    expected = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "map"}).evaluate(run)
    got = ours(preds32, target, mask, ideal)
    for name in ("ndcg_cut_10", "map"):
        assert got[name].dtype == torch.float32
        for i in range(50):
            if f"q{i}" in expected:
                assert abs(got[name][i].item() - expected[f"q{i}"][name]) <= 1e-6


def _compare_with_expected(qrels, run, expected_path, threshold=None):
    expected = read_expected(expected_path)
    qids = sorted(set(qrels) & set(run))
    preds, target, mask, ideal = trec_tensors(qrels, run, qids)
    got = ours(preds, target, mask, ideal, threshold=threshold)
    compared = 0
    for name, values in got.items():
        for i, q in enumerate(qids):
            if name in expected[q]:
                assert f"{values[i].item():.4f}" == expected[q][name], (name, q)
                compared += 1
    return compared


def test_trec_eval_collection_per_query(trec_eval_test_dir):
    """out.test.aq: ``trec_eval -q -m all_trec qrels.test results.test`` (results hold exact ties)."""
    d = trec_eval_test_dir
    compared = _compare_with_expected(read_qrels(d / "qrels.test"), read_run(d / "results.test"), d / "out.test.aq")
    assert compared == 3 * 12  # 12 measures x 3 topics


def test_trec_eval_collection_relevance_level(trec_eval_test_dir):
    """out.test.aql: ``-l2`` with graded qrels (-1..4); -1 counts as unjudged."""
    d = trec_eval_test_dir
    compared = _compare_with_expected(
        read_qrels(d / "qrels.rel_level"), read_run(d / "results.test"), d / "out.test.aql", threshold=2
    )
    assert compared == 3 * 12  # 12 measures x 3 topics


def test_trec_eval_collection_has_ties_that_matter(trec_eval_test_dir):
    """The tie rule is load-bearing: averaging ties instead of trec_eval's docno order changes a value."""
    d = trec_eval_test_dir
    qrels, run = read_qrels(d / "qrels.test"), read_run(d / "results.test")
    qids = sorted(set(qrels) & set(run))
    preds, target, mask, ideal = trec_tensors(qrels, run, qids)
    first = F.average_precision(preds, target, mask=mask, ideal_target=ideal, convention="trec_eval", reduction="none")
    averaged = F.average_precision(
        preds, target, mask=mask, ideal_target=ideal, convention="trec_eval", ties="average", reduction="none"
    )
    assert not torch.equal(first, averaged)
