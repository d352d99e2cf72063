"""Intent-aware measures (issue 20 items 1-2) against their oracles: ndeval itself (the ``pyndeval``
package compiles ndeval.c 4.5) per query on random diversity collections; TF-Ranking's AlphaDCG and
PrecisionIA formulas on hand-computed cases; brute force over the orders of tied documents for the
tie-exact measures (P-IA, subtopic recall, MAP-IA); the distributed sums against one process."""

from __future__ import annotations

import itertools
import json
import math
import pickle
import random

import numpy as np
import pytest
import torch
import torch.distributed as dist

from tests.distributed_helpers import spawn
from torch_rankeval import RankingMetrics
from torch_rankeval import functional as F
from torch_rankeval.measures import parse_measure, parse_measures
from torch_rankeval.ranking.subtopics import subtopic_target

pyndeval = pytest.importorskip("pyndeval")

NDEVAL = [
    "ERR-IA@1",
    "ERR-IA@5",
    "ERR-IA@10",
    "ERR-IA@20",
    "nERR-IA@1",
    "nERR-IA@5",
    "nERR-IA@20",
    "alpha-DCG@1",
    "alpha-DCG@5",
    "alpha-DCG@10",
    "alpha-DCG@20",
    "alpha-nDCG@1",
    "alpha-nDCG@5",
    "alpha-nDCG@10",
    "alpha-nDCG@20",
    "NRBP",
    "nNRBP",
    "MAP-IA",
    "P-IA@1",
    "P-IA@5",
    "P-IA@20",
    "strec@1",
    "strec@5",
    "strec@20",
]
#: ndeval's name -> ir_measures' spelling (the registry's ``ir`` names)
IR = {
    "ERR-IA": "ERR_IA",
    "nERR-IA": "nERR_IA",
    "alpha-DCG": "alpha_DCG",
    "alpha-nDCG": "alpha_nDCG",
    "NRBP": "NRBP",
    "nNRBP": "nNRBP",
    "MAP-IA": "AP_IA",
    "P-IA": "P_IA",
    "strec": "StRecall",
}


def _ir(name: str) -> str:
    base, at, k = name.partition("@")
    return IR[base] + at + k


def collection(seed: int, n: int = 24, length: int = 30, judged: int = 28, subtopics: int = 5):
    """A random diversity collection: qrels ``(topic, subtopic, docno, judgment)`` and a run for ndeval,
    and the same as tensors: scores ``(N, L)`` with padding (lists of 3..L documents, so that k=20
    reaches past some), subtopic grades ``(N, L, S)`` (0..2; unjudged documents hold 0), and every
    judged document's grades ``(N, M, S)`` in docno order (ndeval breaks ties of its ideal ranking
    toward the larger docno: the later column). Some queries have no relevant subtopic, and each
    query uses a random subset of the subtopic ids (ndeval numbers them globally)."""
    rng = random.Random(seed)
    qrels, run = [], []
    preds = torch.zeros(n, length, dtype=torch.float64)
    mask = torch.zeros(n, length, dtype=torch.bool)
    target = torch.zeros(n, length, subtopics, dtype=torch.int64)
    ideal = torch.zeros(n, judged, subtopics, dtype=torch.int64)
    for q in range(n):
        nothing = q % 6 == 5
        used = rng.sample(range(subtopics), rng.randint(1, subtopics))
        for d in range(judged):
            if rng.random() < 0.3:
                continue  # not judged at all
            for s in used:
                grade = 0 if nothing else rng.choice([0, 0, 0, 1, 2])
                qrels.append((f"q{q}", f"s{s}", f"d{d:03d}", grade))
                ideal[q, d, s] = grade
        size = rng.randint(3, length)
        docs = rng.sample(range(judged + 15), size)  # ids >= judged: never judged
        scores = rng.sample(range(10_000), size)  # distinct: every tool ranks alike
        for i, (d, score) in enumerate(zip(docs, scores)):
            run.append((f"q{q}", f"d{d:03d}", float(score)))
            preds[q, i], mask[q, i] = score, True
            if d < judged:
                target[q, i] = ideal[q, d]
    return qrels, run, preds, target, mask, ideal


def _ndeval(qrels, run, measures, **params):
    out = pyndeval.ndeval(qrels, run, measures=measures, **params)
    return {m: torch.tensor([out[q][m] for q in sorted(out, key=lambda s: int(s[1:]))]) for m in measures}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_measure_equals_ndeval_per_query(seed):
    qrels, run, preds, target, mask, ideal = collection(seed)
    expected = _ndeval(qrels, run, NDEVAL)
    names = [_ir(m) for m in NDEVAL]
    out = F.evaluate(preds, target, names, mask=mask, ideal_target=ideal, ties="first", reduction="none")
    for nd, ours in zip(NDEVAL, names):
        theirs = expected[nd]
        if nd == "nNRBP":  # ndeval divides 0 by 0 for a query without a relevant subtopic: NaN
            nan = torch.isnan(theirs)
            assert nan.any() and (out[ours][nan] == 0).all()
            theirs = torch.where(nan, 0.0, theirs)
        torch.testing.assert_close(out[ours].double(), theirs.double(), atol=1e-6, rtol=1e-6, msg=nd)
    # ndeval's printed names are the same measures
    printed = F.evaluate(preds, target, NDEVAL, mask=mask, ideal_target=ideal, ties="first", reduction="none")
    for nd, ours in zip(NDEVAL, names):
        torch.testing.assert_close(printed[nd], out[ours])


@pytest.mark.parametrize(("alpha", "beta"), [(0.25, 0.8), (1.0, 0.0), (0.0, 0.9), (0.5, 1.0)])
def test_alpha_and_beta_equal_ndeval(alpha, beta):
    """(alpha, beta) = (0, 1) is left out: NRBP's factor 1 - (1 - alpha) beta is 0 there, and ndeval's
    nNRBP divides that 0 by the ideal's 0 (NaN for every query); ours is the ratio of the unscaled sums."""
    qrels, run, preds, target, mask, ideal = collection(7, n=12)
    measures = ["alpha-nDCG@10", "alpha-DCG@20", "ERR-IA@10", "nERR-IA@20", "NRBP", "nNRBP"]
    expected = _ndeval(qrels, run, measures, alpha=alpha, beta=beta)
    for nd in measures:
        base, at, k = _ir(nd).partition("@")
        name = f"{base}(alpha={alpha},beta={beta}){at}{k}" if "NRBP" in base else f"{base}(alpha={alpha}){at}{k}"
        got = F.evaluate(preds, target, name, mask=mask, ideal_target=ideal, ties="first", reduction="none")[name]
        theirs = torch.nan_to_num(expected[nd].double(), nan=0.0)
        torch.testing.assert_close(got.double(), theirs, atol=1e-6, rtol=1e-6, msg=nd)


def test_sparse_target_from_judgment_lists_equals_dense():
    qrels, run, preds, target, mask, ideal = collection(3, n=10)
    q, i, s = target.nonzero(as_tuple=True)
    sparse = subtopic_target(q, s, i, target[q, i, s], shape=tuple(target.shape))
    names = ["alpha_nDCG@20", "ERR_IA@20", "NRBP", "P_IA@10", "AP_IA", "StRecall@10"]
    dense = F.evaluate(preds, target, names, mask=mask, ideal_target=ideal, ties="first", reduction="none")
    sp = F.evaluate(preds, sparse, names, mask=mask, ideal_target=ideal.to_sparse(), ties="first", reduction="none")
    for name in names:
        torch.testing.assert_close(sp[name], dense[name])


def test_the_list_is_its_own_ideal_when_it_holds_every_judged_document():
    """Without ideal_target the ideal ranking and the subtopic counts come from the list: ndeval's values
    when the run retrieves every judged document (here: the run is the judged set, in docno order)."""
    rng = random.Random(5)
    n, m, s = 8, 12, 4
    qrels, run = [], []
    target = torch.zeros(n, m, s, dtype=torch.int64)
    preds = torch.zeros(n, m, dtype=torch.float64)
    for q in range(n):
        scores = rng.sample(range(1000), m)
        for d in range(m):
            for j in range(s):
                g = rng.choice([0, 0, 1])
                qrels.append((f"q{q}", f"s{j}", f"d{d:03d}", g))
                target[q, d, j] = g
            run.append((f"q{q}", f"d{d:03d}", float(scores[d])))
            preds[q, d] = scores[d]
    measures = ["alpha-nDCG@5", "nERR-IA@10", "nNRBP", "MAP-IA", "strec@5"]
    expected = _ndeval(qrels, run, measures)
    out = F.evaluate(preds, target, measures, ties="first", reduction="none")
    for name in measures:
        torch.testing.assert_close(out[name].double(), torch.nan_to_num(expected[name].double()), atol=1e-6, rtol=0)


def test_summary_is_the_mean_over_queries_as_ndeval_prints_it():
    qrels, run, preds, target, mask, ideal = collection(4, n=15)
    expected = _ndeval(qrels, run, ["alpha-nDCG@20", "P-IA@10"])
    out = F.evaluate(preds, target, ["alpha-nDCG@20", "P-IA@10"], mask=mask, ideal_target=ideal, ties="first")
    for name in ("alpha-nDCG@20", "P-IA@10"):  # every topic in both counts, 0 for no relevant subtopic
        assert out[name].item() == pytest.approx(expected[name].mean().item(), abs=1e-6)


# ----------------------------------------------------------------------------- TF-Ranking's definitions
def test_alpha_dcg_plain_sum_is_tf_ranking_alpha_dcg():
    """TF-Ranking (metrics_impl.py, AlphaDCGMetric): sum_i sum_t label_it (1 - alpha)^(labels of t above i)
    / log2(1 + i), no normalisation. Scores 3, 2, 1; subtopic labels [1, 0], [1, 1], [0, 1]; alpha 0.5:
    gains 1, 0.5 + 1 = 1.5, 0.5, so alphaDCG@3 = 1 + 1.5 / log2(3) + 0.5 / 2 = 2.196394...; @2 = 1.946394...
    ndeval's alpha-DCG divides by the ideal ideal A sum_r (1 - alpha)^(r-1) / log2(r + 1), A = 2:
    2 (1 + 0.5 / log2(3) + 0.25 / 2) at k = 3."""
    preds = torch.tensor([[3.0, 2.0, 1.0]])
    target = torch.tensor([[[1, 0], [1, 1], [0, 1]]])
    out = F.evaluate(
        preds, target, ["alpha_DCG(norm='none')@3", "alpha_DCG(norm='none')@2", "alpha_DCG@3"], ties="first"
    )
    assert out["alpha_DCG(norm='none')@3"].item() == pytest.approx(1 + 1.5 / math.log2(3) + 0.5 / 2, abs=1e-6)
    assert out["alpha_DCG(norm='none')@3"].item() == pytest.approx(2.196394, abs=1e-6)
    assert out["alpha_DCG(norm='none')@2"].item() == pytest.approx(1.946394, abs=1e-6)
    ideal_ideal = 2 * (1 + 0.5 / math.log2(3) + 0.25 / 2)
    assert out["alpha_DCG@3"].item() == pytest.approx(2.196394 / ideal_ideal, abs=1e-6)
    # alpha = 0.2: the repeat of subtopic 0 at rank 2 gains 0.8, that of subtopic 1 at rank 3 0.8
    out = F.evaluate(preds, target, "alpha_DCG(alpha=0.2,norm='none')@3", ties="first")
    assert out["alpha_DCG(alpha=0.2,norm='none')@3"].item() == pytest.approx(1 + 1.8 / math.log2(3) + 0.8 / 2, abs=1e-6)


def test_precision_ia_is_tf_ranking_precision_ia_with_adaptive_k():
    """TF-Ranking (PrecisionIAMetric): relevant (document, subtopic) pairs in the top n over
    min(n, valid documents) times the subtopics any document of the list covers. The list above:
    pairs 1, 2, 1. topn 2: 3 / (2 * 2) = 0.75; topn 5 on 3 documents: 4 / (3 * 2) = 0.6667 (ndeval
    divides by k: 4 / (5 * 2) = 0.4)."""
    preds = torch.tensor([[3.0, 2.0, 1.0]])
    target = torch.tensor([[[1, 0], [1, 1], [0, 1]]])
    tf = F.evaluate(preds, target, ["P_IA@2", "P_IA@5"], ties="first", adaptive_k=True)
    assert tf["P_IA@2"].item() == pytest.approx(0.75)
    assert tf["P_IA@5"].item() == pytest.approx(4 / 6)
    nd = F.evaluate(preds, target, ["P_IA@2", "P_IA@5"], ties="first")
    assert nd["P_IA@2"].item() == pytest.approx(0.75) and nd["P_IA@5"].item() == pytest.approx(0.4)


# ----------------------------------------------------------------------------- ties
def _p_ia(rel: np.ndarray, k: int, a: int) -> float:
    """ndeval's P-IA@k of a ranked 0/1 matrix (rank x subtopic), written out."""
    return rel[:k].sum() / (k * a) if a else 0.0


def _strec(rel: np.ndarray, k: int, a: int) -> float:
    return (rel[:k].sum(0) > 0).sum() / a if a else 0.0


def _map_ia(rel: np.ndarray) -> float:
    """ndeval's MAP-IA (computeMAP) of a ranked 0/1 matrix whose documents are all the judged ones."""
    total, a = 0.0, 0
    for j in range(rel.shape[1]):
        n_rel = rel[:, j].sum()
        if n_rel:
            a += 1
            hits = np.cumsum(rel[:, j])
            total += sum(hits[i] / (i + 1) for i in range(len(rel)) if rel[i, j]) / n_rel
    return total / a if a else 0.0


@pytest.mark.parametrize("seed", range(6))
def test_tie_exact_measures_equal_brute_force_over_tie_orders(seed):
    g = torch.Generator().manual_seed(seed)
    n_docs, n_sub = 6, 3
    preds = torch.randint(0, 3, (n_docs,), generator=g).double()  # many ties
    target = torch.randint(0, 2, (n_docs, n_sub), generator=g)
    ks = [1, 2, 3, 4, 6, 9]
    names = [f"P_IA@{k}" for k in ks] + [f"StRecall@{k}" for k in ks] + ["AP_IA"]
    got = F.evaluate(preds, target, names)  # ties="average", the default
    rel = target.numpy()
    a = int((rel.sum(0) > 0).sum())
    totals = dict.fromkeys(names, 0.0)
    count = 0
    # every order consistent with the scores: the tie groups permuted independently
    levels = sorted(set(preds.tolist()), reverse=True)
    groups = [[i for i in range(n_docs) if preds[i] == v] for v in levels]
    for perms in itertools.product(*(itertools.permutations(gr) for gr in groups)):
        ranked = rel[[i for p in perms for i in p]]
        count += 1
        totals["AP_IA"] += _map_ia(ranked)
        for k in ks:
            totals[f"P_IA@{k}"] += _p_ia(ranked, k, a)
            totals[f"StRecall@{k}"] += _strec(ranked, k, a)
    for name in names:
        assert got[name].item() == pytest.approx(totals[name] / count, abs=1e-6), name


def _nd_values(ranked: np.ndarray, judged: np.ndarray, alpha: float, beta: float, k: int) -> dict[str, float]:
    """ndeval's alpha-DCG, alpha-nDCG, ERR-IA, nERR-IA (@k), NRBP and nNRBP of a ranked 0/1 matrix
    (rank x subtopic) against the judged documents ``judged``, written out from ndeval.c."""
    a = int((judged.sum(0) > 0).sum())
    if a == 0:
        return dict.fromkeys(["alpha_DCG", "alpha_nDCG", "ERR_IA", "nERR_IA", "NRBP", "nNRBP"], 0.0)
    seen = np.zeros(ranked.shape[1])
    gains = []
    for row in ranked:
        gains.append(float((row * (1 - alpha) ** seen).sum()))
        seen += row
    gains += [0.0] * max(0, k - len(gains))
    ideal = _ndeval_ideal_gains(judged, alpha)
    ideal += [0.0] * max(0, k - len(ideal))
    disc = [math.log(2) / math.log(r + 2) for r in range(k)]
    inv = [1 / (r + 1) for r in range(k)]
    dcg = sum(g * d for g, d in zip(gains[:k], disc))
    idcg = sum(g * d for g, d in zip(ideal[:k], disc))
    err = sum(g * w for g, w in zip(gains[:k], inv))
    ierr = sum(g * w for g, w in zip(ideal[:k], inv))
    ii_dcg = a * sum((1 - alpha) ** r * disc[r] for r in range(k))
    ii_err = a * sum((1 - alpha) ** r * inv[r] for r in range(k))
    nrbp = sum(g * beta**r for r, g in enumerate(gains[: len(ranked)]))
    inrbp = sum(g * beta**r for r, g in enumerate(ideal[: len(judged)]))
    return {
        "alpha_DCG": dcg / ii_dcg if k > 1 else dcg,
        "alpha_nDCG": dcg / idcg if dcg else 0.0,
        "ERR_IA": err / ii_err if k > 1 else err,
        "nERR_IA": err / ierr if err else 0.0,
        "NRBP": nrbp * (1 - (1 - alpha) * beta) / a,
        "nNRBP": nrbp / inrbp,
    }


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(("alpha", "beta"), [(0.5, 0.5), (0.3, 0.8)])
@pytest.mark.parametrize("sync_free", [False, True])
def test_novelty_measures_equal_brute_force_over_tie_orders(seed, alpha, beta, sync_free):
    """alpha-(n)DCG, ERR-IA, nERR-IA, NRBP, nNRBP under ties="average": the expected novelty gain of
    each rank (a hypergeometric series per tie group and subtopic) against the mean over every order;
    the series stops at the batch's largest term count on the CPU (read from memory), at the static
    bound without host reads (``HostSyncGuard``: the path of CUDA)."""
    import contextlib

    from tests.sync_guard import HostSyncGuard

    g = torch.Generator().manual_seed(100 + seed)
    n_docs, n_sub = 7, 3
    preds = torch.randint(0, 3, (n_docs,), generator=g).double()
    target = (torch.rand(n_docs, n_sub, generator=g) < 0.4).long()
    ks = [1, 3, 5, 9]
    names = {
        f"{base}{'(alpha=' + str(alpha) + (',beta=' + str(beta) if 'NRBP' in base else '') + ')' if alpha != 0.5 else ''}"
        + (f"@{k}" if "NRBP" not in base else ""): (base, k)
        for base in ["alpha_DCG", "alpha_nDCG", "ERR_IA", "nERR_IA", "NRBP", "nNRBP"]
        for k in (ks if "NRBP" not in base else [max(ks)])
    }
    with HostSyncGuard() if sync_free else contextlib.nullcontext():
        got = F.evaluate(preds, target, list(names), validate_args=not sync_free)
    rel = target.numpy()
    levels = sorted(set(preds.tolist()), reverse=True)
    groups = [[i for i in range(n_docs) if preds[i] == v] for v in levels]
    totals = dict.fromkeys(names, 0.0)
    count = 0
    for perms in itertools.product(*(itertools.permutations(gr) for gr in groups)):
        ranked = rel[[i for p in perms for i in p]]
        count += 1
        for k in ks:
            values = _nd_values(ranked, rel, alpha, beta, k)
            for name, (base, kk) in names.items():
                if kk == k:
                    totals[name] += values[base]
    for name in names:
        assert got[name].item() == pytest.approx(totals[name] / count, abs=1e-6), name


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("preds", "target", "kwargs", "message"),
    [
        (torch.rand(2, 3), torch.ones(2, 4, 2, dtype=torch.int64), {}, "shape of preds plus a subtopic axis"),
        (torch.rand(2, 3), torch.ones(3, 3, 2, dtype=torch.int64), {}, "shape of preds plus a subtopic axis"),
        (torch.rand(2, 3), torch.ones(2, 3, 0, dtype=torch.int64), {}, "subtopic axis of target is empty"),
        (torch.rand(2, 3), -torch.ones(2, 3, 2, dtype=torch.int64), {}, "negative"),
        (torch.rand(2, 3), torch.ones(2, 3, 2), {"ideal_target": torch.ones(2, 5, 3)}, "same subtopic axis"),
        (torch.rand(2, 3), torch.ones(2, 3, 2), {"ideal_target": torch.ones(2, 5)}, "same subtopic axis"),
        (torch.rand(2, 3), torch.ones(2, 3, dtype=torch.int64), {}, "needs subtopic judgments"),
    ],
)
def test_bad_subtopic_input_is_refused(preds, target, kwargs, message):
    with pytest.raises(ValueError, match=message):
        F.evaluate(preds, target, "P_IA@2", **kwargs)


def test_a_subtopic_target_with_an_ad_hoc_measure_is_refused():
    with pytest.raises(ValueError, match="target.amax"):
        F.evaluate(torch.rand(2, 3), torch.ones(2, 3, 2, dtype=torch.int64), "nDCG@3")
    with pytest.raises(ValueError, match="two calls"):
        F.evaluate(torch.rand(2, 3), torch.ones(2, 3, 2, dtype=torch.int64), ["nDCG@3", "P_IA@3"])


def test_subtopic_target_helper_refuses_duplicates_and_out_of_range():
    idx = torch.tensor([0, 0])
    with pytest.raises(ValueError, match="judged twice"):
        subtopic_target(idx, idx, idx, shape=(1, 1, 1))
    with pytest.raises(ValueError, match="out of range"):
        subtopic_target(torch.tensor([1]), torch.tensor([0]), torch.tensor([0]), shape=(1, 1, 1))


def test_names_and_parameters():
    assert parse_measure("alpha-nDCG@20") == parse_measure("alpha_nDCG@20")
    assert parse_measure("MAP-IA") == parse_measure("AP_IA") and parse_measure("strec@10") == parse_measure(
        "StRecall@10"
    )
    assert parse_measure("NRBP(alpha=0.5,beta=0.5)") == parse_measure("NRBP")
    assert [m.label for m in parse_measures(["ERR-IA@5", "nERR_IA@5"])] == ["ERR-IA@5", "nERR_IA@5"]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        parse_measure("alpha_nDCG(alpha=1.5)@5")


def test_one_list_and_lists_without_documents():
    preds, target = torch.tensor([0.3, 0.9]), torch.tensor([[1, 0], [0, 1]])
    one = F.evaluate(preds, target, ["alpha_nDCG@2", "StRecall@1"], ties="first")
    assert one["alpha_nDCG@2"].item() == pytest.approx(1.0) and one["StRecall@1"].item() == pytest.approx(0.5)
    empty = F.evaluate(
        torch.zeros(2, 0), torch.zeros(2, 0, 3), ["alpha_nDCG@5", "P_IA@5"], ties="first", reduction="none"
    )
    assert (empty["alpha_nDCG@5"] == 0).all() and (empty["P_IA@5"] == 0).all()


# ----------------------------------------------------------------------------- metric classes
METRICS = ["alpha_nDCG@20", "ERR_IA@10", "nERR_IA@20", "NRBP", "nNRBP", "AP_IA", "P_IA@5", "StRecall@10"]


def test_ranking_metrics_accumulate_as_the_functional_api():
    qrels, run, preds, target, mask, ideal = collection(9, n=20)
    metric = RankingMetrics(METRICS, ties="first")
    for a, b in [(0, 7), (7, 8), (8, 20)]:
        metric.update(preds[a:b], target[a:b], mask=mask[a:b], ideal_target=ideal[a:b])
    metric.update(preds[:0], target[:0], mask=mask[:0], ideal_target=ideal[:0])  # an empty update is a no-op
    expected = F.evaluate(preds, target, METRICS, mask=mask, ideal_target=ideal, ties="first")
    got = metric.compute()
    for name in METRICS:
        assert got[name].item() == pytest.approx(expected[name].item(), abs=1e-6)
    clone = pickle.loads(pickle.dumps(metric))
    assert clone.compute()["alpha_nDCG@20"].item() == pytest.approx(got["alpha_nDCG@20"].item())
    nd = _ndeval(qrels, run, ["alpha-nDCG@20"])["alpha-nDCG@20"].mean().item()
    assert got["alpha_nDCG@20"].item() == pytest.approx(nd, abs=1e-6)


def _worker(rank, world, rdv, out):
    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=world)
    _, _, preds, target, mask, ideal = collection(11, n=23)
    cuts = [(0, 9), (9, 12), (12, 23)]
    metric = RankingMetrics(METRICS, ties="first")
    for j, (a, b) in enumerate(cuts):
        if j % world == rank:
            metric.update(preds[a:b], target[a:b], mask=mask[a:b], ideal_target=ideal[a:b])
    torch.save({k: v.item() for k, v in metric.compute().items()}, f"{out}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


def test_distributed_sums_equal_one_process(tmp_path):
    world = 2
    spawn(_worker, (world, str(tmp_path / "rdv"), str(tmp_path / "out")), world)
    _, _, preds, target, mask, ideal = collection(11, n=23)
    single = RankingMetrics(METRICS, ties="first")
    single.update(preds, target, mask=mask, ideal_target=ideal)
    expected = {k: v.item() for k, v in single.compute().items()}
    for rank in range(world):
        got = torch.load(f"{tmp_path / 'out'}.{rank}")
        for name in METRICS:
            assert got[name] == pytest.approx(expected[name], abs=1e-6), (rank, name)


# ----------------------------------------------------------------------------- TREC files and the CLI
def _write_trec(tmp_path, qrels, run, *, integer_subtopics=True):
    """The collection as files: diversity qrels (``topic subtopic docno judgment``, numeric topics and
    subtopics as TREC writes them) and a run (``qid Q0 docno rank score tag``)."""
    qpath, rpath = tmp_path / "qrels.div", tmp_path / "run.txt"
    qpath.write_text("".join(f"{q[1:]} {s[1:]} {d} {g}\n" for q, s, d, g in qrels))
    rpath.write_text("".join(f"{q[1:]} Q0 {d} {i} {score} tag\n" for i, (q, d, score) in enumerate(run)))
    return qpath, rpath


def test_trec_evaluate_on_diversity_files_equals_ndeval(tmp_path):
    from torch_rankeval import trec
    from torch_rankeval.trec.diversity import read_subtopic_qrels

    qrels, run, *_ = collection(13, n=10)
    qpath, rpath = _write_trec(tmp_path, qrels, run)
    expected = pyndeval.ndeval(qrels, run, measures=NDEVAL)
    names = [_ir(m) for m in NDEVAL]
    result = trec.evaluate(qpath, rpath, names)
    assert result.qids == sorted((q[1:] for q in expected), key=str.encode)
    for nd, ours in zip(NDEVAL, names):
        theirs = torch.tensor([expected["q" + q][nd] for q in result.qids], dtype=torch.float64)
        torch.testing.assert_close(result.per_query[ours], torch.nan_to_num(theirs), atol=1e-6, rtol=0, msg=nd)
    # ad-hoc measures on the same file: a document is relevant when it is relevant to any subtopic
    mixed = trec.evaluate(read_subtopic_qrels(qpath), rpath, ["alpha_nDCG@20", "P.10", "map"])
    adhoc = trec.evaluate(read_subtopic_qrels(qpath).adhoc(), rpath, ["P.10", "map"])
    assert mixed.summary["P_10"] == adhoc.summary["P_10"] and mixed.summary["map"] == adhoc.summary["map"]
    assert mixed.summary["alpha_nDCG@20"] == pytest.approx(result.summary["alpha_nDCG@20"])


def test_cli_prints_per_query_and_summary_in_every_format(tmp_path):
    from tests.test_cli import run_cli

    qrels, run, *_ = collection(14, n=6)
    qpath, rpath = _write_trec(tmp_path, qrels, run)
    expected = pyndeval.ndeval(qrels, run, measures=["alpha-nDCG@20", "ERR-IA@10", "strec@5"])
    code, text = run_cli(
        "evaluate", qpath, rpath, "-m", "alpha-nDCG@20", "-m", "ERR_IA@10", "-m", "strec@5", "-q", "--format", "json"
    )
    assert code == 0
    data = json.loads(text)
    result = data["runs"][0]
    per_query = result["per_query"]
    for q, values in per_query.items():
        assert values["alpha-nDCG@20"] == pytest.approx(expected["q" + q]["alpha-nDCG@20"], abs=1e-6)
        assert values["ERR_IA@10"] == pytest.approx(expected["q" + q]["ERR-IA@10"], abs=1e-6)
        assert values["strec@5"] == pytest.approx(expected["q" + q]["strec@5"], abs=1e-6)
    mean = sum(v["alpha-nDCG@20"] for v in expected.values()) / len(expected)
    assert result["summary"]["alpha-nDCG@20"] == pytest.approx(mean, abs=1e-6)
    code, text = run_cli("evaluate", qpath, rpath, "-m", "alpha_nDCG@20", "-q", "--format", "trec")
    lines = [line.split() for line in text.splitlines()]
    assert code == 0 and ["alpha_nDCG@20", "all", f"{mean:.4f}"] in lines
    assert len([x for x in lines if x[1] != "all"]) == len(expected)
    code, text = run_cli("evaluate", qpath, rpath, "-m", "P_IA@5", "--format", "csv")
    assert code == 0 and "P_IA@5" in text


def test_diversity_qrels_reader_refuses_bad_lines(tmp_path):
    from torch_rankeval.trec import TrecFormatError
    from torch_rankeval.trec.diversity import read_subtopic_qrels

    path = tmp_path / "q"
    path.write_text("1 1 d1 1\n1 1 d1 0\n")
    with pytest.raises(TrecFormatError, match="duplicate judgment"):
        read_subtopic_qrels(path)
    path.write_text("1 x d1 1\n")
    with pytest.raises(TrecFormatError, match="subtopic"):
        read_subtopic_qrels(path)
    path.write_text("1 1 d1 -1\n")
    with pytest.raises(TrecFormatError, match="negative"):
        read_subtopic_qrels(path)


def test_lightning_callback_logs_intent_aware_measures(tmp_path):
    pl = pytest.importorskip("lightning.pytorch")
    from torch.utils.data import DataLoader

    from tests.lightning_helpers import quiet_trainer
    from torch_rankeval.lightning import RankingMetricsCallback

    _, _, preds, target, mask, ideal = collection(15, n=9)
    rows = [{"preds": preds[i], "target": target[i], "mask": mask[i], "ideal_target": ideal[i]} for i in range(9)]

    class Scores(pl.LightningModule):
        def validation_step(self, batch, batch_idx):  # noqa: ANN001
            return batch  # the step's outputs: scores, subtopic grades, mask, every judged document

    names = ["alpha_nDCG@20", "P_IA@5", "StRecall@10"]
    callback = RankingMetricsCallback(lambda: RankingMetrics(names, ties="first"))
    trainer = quiet_trainer(tmp_path, [callback])
    (logged,) = trainer.validate(Scores(), DataLoader(rows, batch_size=4), verbose=False)
    truth = F.evaluate(preds, target, names, mask=mask, ideal_target=ideal, ties="first")
    for name in names:
        assert logged[f"val/{name}"] == pytest.approx(truth[name].item(), abs=1e-6)


def test_relevance_level_equals_ndeval_relevance_level():
    """``rel=2``: a subtopic judgment counts when >= 2 (pyndeval's relevance_level)."""
    qrels, run, preds, target, mask, ideal = collection(16, n=12)
    measures = ["alpha-nDCG@10", "ERR-IA@20", "P-IA@5", "strec@10", "MAP-IA", "nNRBP"]
    evaluator = pyndeval.RelevanceEvaluator(qrels, measures, relevance_level=2)
    out = evaluator.evaluate(run)
    for nd in measures:
        base, at, k = _ir(nd).partition("@")
        name = f"{base}(rel=2){at}{k}"
        got = F.evaluate(preds, target, name, mask=mask, ideal_target=ideal, ties="first", reduction="none")[name]
        theirs = torch.tensor([out[f"q{q}"][nd] for q in range(12)], dtype=torch.float64)
        torch.testing.assert_close(got.double(), torch.nan_to_num(theirs), atol=1e-6, rtol=0, msg=nd)


def test_no_host_sync_without_validation():
    """validate_args=False: the subtopic split, the ranking, the greedy ideal and every kernel run
    without reading a value on the host (tests/sync_guard.py, the CPU stand-in of CUDA's sync check)."""
    from tests.sync_guard import HostSyncGuard

    _, _, preds, target, mask, ideal = collection(17, n=6)
    names = [
        "alpha_nDCG@20",
        "alpha_DCG@5",
        "ERR_IA@10",
        "nERR_IA@10",
        "NRBP",
        "nNRBP",
        "AP_IA",
        "P_IA@5",
        "StRecall@5",
    ]
    F.evaluate(preds, target, names, mask=mask, ideal_target=ideal, ties="first", validate_args=False)  # warm caches
    with HostSyncGuard():
        F.evaluate(preds, target, names, mask=mask, ideal_target=ideal, ties="first", validate_args=False)
        F.evaluate(preds, target, ["P_IA@5", "StRecall@5", "AP_IA"], mask=mask, validate_args=False)  # averaged ties


def test_judged_exclude_and_mask_follow_the_ad_hoc_contract():
    """An unjudged document (judged=False) gains nothing, as an all-zero row does; an excluded item
    (exclude=) is neither ranked nor counted, as a masked one (mask=False)."""
    _, _, preds, target, mask, ideal = collection(18, n=8)
    names = ["alpha_nDCG@10", "ERR_IA@10", "NRBP", "AP_IA", "P_IA@5", "StRecall@5"]
    judged = torch.rand(preds.shape, generator=torch.Generator().manual_seed(1)) > 0.3
    a = F.evaluate(preds, target, names, mask=mask, judged=judged, ideal_target=ideal, ties="first", reduction="none")
    zeroed = target * judged.unsqueeze(-1)
    b = F.evaluate(preds, zeroed, names, mask=mask, ideal_target=ideal, ties="first", reduction="none")
    for name in names:
        torch.testing.assert_close(a[name], b[name])
    out = F.evaluate(preds, target, names, exclude=~judged, ideal_target=ideal, ties="first", reduction="none")
    ref = F.evaluate(preds, target, names, mask=judged, ideal_target=ideal, ties="first", reduction="none")
    for name in names:
        torch.testing.assert_close(out[name], ref[name])


def test_a_batch_where_few_lists_tie_equals_each_list_alone():
    """A validated batch whose lists mostly have no tie takes the plain formulas and redoes the tied
    lists with tie statistics (split_rows): the subtopic grades follow those rows."""
    g = torch.Generator().manual_seed(3)
    preds = torch.rand(16, 7, generator=g, dtype=torch.float64)
    preds[5] = torch.tensor([0.5, 0.5, 0.5, 0.2, 0.2, 0.9, 0.1], dtype=torch.float64)  # one list with ties
    target = torch.randint(0, 2, (16, 7, 3), generator=g)
    names = ["P_IA@3", "StRecall@2", "AP_IA"]
    batch = F.evaluate(preds, target, names, reduction="none")
    for i in range(16):
        alone = F.evaluate(preds[i], target[i], names, reduction="none")
        for name in names:
            assert batch[name][i].item() == pytest.approx(alone[name].item(), abs=1e-6), (i, name)


def _ndeval_ideal_gains(rel: np.ndarray, alpha: float) -> list[float]:
    """ndeval's idealResult, transcribed: at each rank the document of largest gain (sequential sums
    over subtopics, in double), ties to the larger docno (here: the later row)."""
    gain = [1.0] * rel.shape[1]
    free = list(range(rel.shape[0]))
    out = []
    while free:
        best, where = 0.0, -1
        for i in free:
            score = 0.0
            for j in range(rel.shape[1]):
                if rel[i, j]:
                    score += gain[j]
            if where == -1 or score > best or (score == best and i > where):
                best, where = score, i
        free.remove(where)
        out.append(best)
        for j in range(rel.shape[1]):
            if rel[where, j]:
                gain[j] *= 1.0 - alpha
    return out


@pytest.mark.parametrize(("alpha", "steps"), [(0.5, 20), (0.5, 40), (0.3, 20), (1.0, 20), (0.0, 20)])
def test_greedy_ideal_equals_ndeval_transcription(alpha, steps):
    """The vectorised greedy (float32 where exact: alpha 1/2 to depth 20, alpha 0 or 1; float64 else)
    against ndeval's loop, on documents with many equal gains (ties decided by the docno rule)."""
    from torch_rankeval.kernels.intent_aware import greedy_ideal_gains

    g = torch.Generator().manual_seed(int(alpha * 10) + steps)
    rel = torch.rand(40, 40, 10, generator=g) < 0.15
    got = greedy_ideal_gains(rel, steps, alpha)
    for q in range(rel.shape[0]):
        want = _ndeval_ideal_gains(rel[q].numpy(), alpha)[:steps]
        torch.testing.assert_close(got[q, : len(want)], torch.tensor(want, dtype=torch.float64), rtol=0, atol=1e-12)


def test_complete_scores_the_queries_the_run_misses_as_zero(tmp_path):
    """``complete=True`` (ndeval -c): the mean over every query of the qrels, a missed one scoring 0."""
    from torch_rankeval import trec

    qrels, run, *_ = collection(19, n=6)
    run = [r for r in run if r[0] != "q2"]
    qpath, rpath = _write_trec(tmp_path, qrels, run)
    part = trec.evaluate(qpath, rpath, ["alpha_nDCG@20", "map"])
    full = trec.evaluate(qpath, rpath, ["alpha_nDCG@20", "map"], complete=True)
    assert "2" not in part.qids and "2" in full.qids and len(full.qids) == len(part.qids) + 1
    assert full.per_query["alpha_nDCG@20"][full.qids.index("2")].item() == 0
    n = len(full.qids)
    assert full.summary["alpha_nDCG@20"] == pytest.approx(part.summary["alpha_nDCG@20"] * (n - 1) / n)
    assert full.summary["map"] == pytest.approx(part.summary["map"] * (n - 1) / n)
