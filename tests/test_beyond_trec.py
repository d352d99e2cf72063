"""Measures beyond trec_eval's core: ERR, RBP and its residual, Judged / unj, fall-out, AUROC, OPA, ARP.

Oracles: gdeval (ERR, through ir_measures), cwl_eval (RBP, through ir_measures), ir_measures' Judged,
torchmetrics (fall-out, AUROC) and sklearn (AUROC), trec_eval 10.0's expected outputs (rbp,
rbp_resid, unj), TF-Ranking's own test cases (OPA, ARP), and brute-force enumeration of every
order of the tied documents for the tie-averaged values.
"""

from __future__ import annotations

import itertools
import random
import shutil

import pytest
import torch

from tests.oracles import read_expected
from torch_rankeval import AUROC, FallOut, RankingMetrics, trec
from torch_rankeval import functional as F
from torch_rankeval import measures as M

NEW = [
    "ERR@5",
    "RBP",
    "rbp",
    "rbp_resid",
    "unj@5",
    "Judged@5",
    "fall_out@3",
    "auroc",
    "AUROC(max_fpr=0.5)@4",
    "opa",
    "arp",
]


# ----------------------------------------------------------------------------- brute-force oracles
def _orders(scores):
    """Every order of the documents that ranks higher scores first (uniform over tie orders)."""
    groups: dict[float, list[int]] = {}
    for i, s in enumerate(scores):
        groups.setdefault(s, []).append(i)
    parts = [list(itertools.permutations(groups[s])) for s in sorted(groups, reverse=True)]
    for combo in itertools.product(*parts):
        yield [i for part in combo for i in part]


def _mean_over_orders(scores, fn):
    values = [fn(order) for order in _orders(scores)]
    return sum(values) / len(values)


def _err(grades, k, max_grade=4):  # gdeval's formula
    score, keep = 0.0, 1.0
    for i, g in enumerate(grades[:k]):
        r = (2**g - 1) / 2**max_grade
        score += keep * r / (i + 1)
        keep *= 1 - r
    return score


def _auroc(rel, max_fpr=None):  # strict order (distinct scores), as torchmetrics / sklearn score it
    from torchmetrics.functional.retrieval import retrieval_auroc

    pr = torch.tensor([float(len(rel) - j) for j in range(len(rel))])
    return retrieval_auroc(pr, torch.tensor(rel), max_fpr=max_fpr).item()


def _case(rng, length):
    scores = [rng.choice([0.1, 0.2, 0.3, 0.5, 0.7]) for _ in range(length)]
    grades = [rng.randint(0, 4) for _ in range(length)]
    judged = [rng.random() < 0.7 for _ in range(length)]
    return scores, grades, judged


def _ours(scores, grades, names, judged=None, **kw):
    out = F.evaluate(
        torch.tensor([scores], dtype=torch.float64),
        torch.tensor([grades]),
        names,
        reduction="none",
        judged=None if judged is None else torch.tensor([judged]),
        **kw,
    )
    return [v.item() for v in out.values()]


def _brute_force_values(scores, grades, judged, kk):
    """Each measure of :func:`test_tie_averaged_values_equal_the_mean_over_all_tie_orders`, averaged
    over every order of the tied documents (written from the definitions, one order at a time)."""
    length = len(scores)
    rel = [j and g >= 1 for g, j in zip(grades, judged)]  # unjudged documents are never relevant

    def resid(o, mode):
        top = o[:kk]
        unj = [i for i, d in enumerate(top) if not judged[d]]
        value = 0.1 * sum(0.9**i for i in unj) + 0.9 ** len(top)
        return value if mode == "always" or unj else 0.0

    def opa(o):
        pos = {d: r for r, d in enumerate(o)}
        pairs = [
            (a, b) for a in range(length) for b in range(length) if judged[a] and judged[b] and grades[a] > grades[b]
        ]
        return sum(pos[a] < pos[b] for a, b in pairs) / len(pairs) if pairs else 0.0

    def arp(o):
        w = [grades[d] if judged[d] else 0 for d in o]
        return sum((r + 1) * x for r, x in enumerate(w)) / sum(w) if sum(w) else 0.0

    n_non = sum(not r for r in rel)  # fall-out and AUROC count unjudged documents as non-relevant
    mean = _mean_over_orders
    return [
        mean(scores, lambda o: _err([grades[d] if judged[d] else 0 for d in o], kk)),
        mean(scores, lambda o: 0.2 * sum(0.8**i for i, d in enumerate(o[:kk]) if judged[d] and grades[d] >= 2)),
        mean(scores, lambda o: resid(o, "if_unjudged")),
        mean(scores, lambda o: resid(o, "always")),
        mean(scores, lambda o: sum(judged[d] for d in o[:kk]) / kk),
        mean(scores, lambda o: sum(not judged[d] for d in o[:kk]) / kk),
        mean(scores, lambda o: sum(not rel[d] for d in o[:kk]) / n_non) if n_non else 0.0,
        mean(scores, lambda o: _auroc([rel[d] for d in o[:kk]])) if any(rel) else 0.0,
        mean(scores, opa),
        mean(scores, arp),
    ]


@pytest.mark.parametrize("validate_args", [True, False])
def test_tie_averaged_values_equal_the_mean_over_all_tie_orders(validate_args):
    """ties="average" is the exact expectation over the orders of tied documents, for every measure."""
    rng = random.Random(0)
    for _ in range(60):
        length = rng.randint(1, 7)
        scores, grades, judged = _case(rng, length)
        for k in (1, 2, 3, 5, None):
            at = "" if k is None else f"@{k}"
            names = [
                f"ERR{at}",
                f"RBP(rel=2){at}",
                f"rbp_residual(tail='if_unjudged'){at}",
                f"rbp_residual{at}",
                f"judged{at}",  # the library's spelling divides by k, as the brute force (ir_measures' Judged: min(k, n))
                f"unjudged{at}",
                f"fall_out{at}",
                f"auroc{at}",
                "opa",
                "arp",
            ]
            got = _ours(scores, grades, names, judged, validate_args=validate_args)
            want = _brute_force_values(scores, grades, judged, length if k is None else k)
            for name, g, w in zip(names, got, want):
                assert g == pytest.approx(w, abs=2e-6), (name, scores, grades, judged)


def test_strict_tie_policies_are_the_plain_measures():
    """Other tie policies rank tied documents in one order: pessimistic OPA is TF-Ranking's strict OPA."""
    rng = random.Random(3)
    for _ in range(40):
        scores, grades, _ = _case(rng, rng.randint(2, 8))
        pairs = [(a, b) for a in range(len(grades)) for b in range(len(grades)) if grades[a] > grades[b]]
        strict = sum(scores[a] > scores[b] for a, b in pairs) / len(pairs) if pairs else 0.0
        assert _ours(scores, grades, ["opa"], ties="pessimistic")[0] == pytest.approx(strict, abs=1e-12)
        order = sorted(range(len(scores)), key=lambda i: -scores[i])  # stable: input order among ties
        assert _ours(scores, grades, ["ERR@3"], ties="first")[0] == pytest.approx(
            _err([grades[i] for i in order], 3), abs=1e-12
        )


# ----------------------------------------------------------------------------- ERR
def _numeric_collection(seed, n_queries=25, max_grade=4):
    rng = random.Random(seed)
    qrels = {
        str(q): {f"d{i}": rng.choice([-1, 0, 0, 1, 2, max_grade]) for i in rng.sample(range(50), 20)}
        for q in range(1, n_queries + 1)
    }
    run = {
        str(q): {f"d{i}": round(rng.random(), 2) for i in rng.sample(range(50), rng.randint(1, 30))}
        for q in range(1, n_queries + 1)
    }
    return qrels, run


@pytest.mark.skipif(shutil.which("perl") is None, reason="gdeval (ir_measures' ERR) needs perl")
@pytest.mark.parametrize("seed", [0, 1])
def test_err_matches_gdeval(seed):
    ir_measures = pytest.importorskip("ir_measures")
    qrels, run = _numeric_collection(seed)  # scores with ties: gdeval breaks them by docno, descending, as trec_eval
    want: dict[str, dict[str, float]] = {}
    for m in ir_measures.iter_calc([ir_measures.ERR @ 5, ir_measures.ERR @ 20], qrels, run):
        want.setdefault(str(m.measure), {})[m.query_id] = m.value
    res = trec.evaluate(trec.Qrels.from_dict(qrels), trec.Run.from_dict(run), ["ERR@5", "ERR@20"])
    compared = 0
    for name in ("ERR@5", "ERR@20"):
        for q, value in want[name].items():
            assert res.per_query[name][res.qids.index(q)].item() == pytest.approx(value, abs=6e-6), (name, q)
            compared += 1
    assert compared > 30


def test_err_hand_example_and_grade_checks():
    preds, target = torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[0, 4, 2]])
    # R = 0, 15/16, 3/16: ERR@3 = (15/16) / 2 + (1/16)(3/16) / 3
    got = F.evaluate(preds, target, ["ERR@1", "ERR@3"])
    assert got["ERR@1"].item() == 0.0
    assert got["ERR@3"].item() == pytest.approx(15 / 32 + 3 / 768)
    with pytest.raises(ValueError, match="integer grades in 0..max_grade=2"):
        F.evaluate(preds, target, ["ERR(max_grade=2)@3"])
    with pytest.raises(ValueError, match="integer grades"):
        F.evaluate(preds, torch.tensor([[0.0, 1.5, 2.0]]), ["ERR@3"])
    with pytest.raises(ValueError, match="max_grade must be a positive integer"):
        F.evaluate(preds, target, ["ERR(max_grade=2.5)@3"])
    # without validation, grades above max_grade are clamped (documented); negative grades count 0
    clamped = F.evaluate(preds, target, ["ERR(max_grade=2)@3"], validate_args=False)["ERR(max_grade=2)@3"]
    assert clamped.item() == pytest.approx(
        F.evaluate(preds, target.clamp(max=2), ["ERR(max_grade=2)@3"])["ERR(max_grade=2)@3"].item()
    )
    assert F.evaluate(preds, torch.tensor([[-1, 4, 2]]), ["ERR@3"])["ERR@3"].item() == pytest.approx(
        got["ERR@3"].item()
    )
    # edge cases: no relevant document, k beyond the list, all padding
    assert F.evaluate(preds, torch.zeros(1, 3, dtype=torch.long), ["ERR@3"])["ERR@3"].item() == 0.0
    assert F.evaluate(preds, target, ["ERR@50"])["ERR@50"].item() == pytest.approx(got["ERR@3"].item())
    pad = F.evaluate(
        preds, target, ["ERR@3", "RBP", "auroc", "opa", "arp", "Judged@2"], mask=torch.zeros(1, 3, dtype=torch.bool)
    )
    assert all(v.item() == 0.0 for v in pad.values())


def _err_over_tie_orders(scores, grades, k, max_grade=4):
    """Tie-averaged ERR@k by enumeration of grade counts, not of orders (groups of any size): for a
    group of ``n`` documents with ``c_g`` of grade ``g``, the mean product of ``1 - R`` over its
    ``m``-subsets is ``sum over (k_g) with sum m of prod C(c_g, k_g) x_g^k_g / C(n, m)``; the group adds
    ``P_before * sum_j (a_{j-1} - a_j) / (s + j)`` over its slots inside the cutoff."""
    from itertools import product
    from math import comb

    x = [1 - (2**g - 1) / 2**max_grade for g in range(max_grade + 1)]
    by_score: dict[float, list[int]] = {}
    for score, grade in zip(scores, grades):
        by_score.setdefault(score, []).append(min(max(grade, 0), max_grade))
    total, before, s = 0.0, 1.0, 0
    for score in sorted(by_score, reverse=True):
        group = by_score[score]
        n, c = len(group), [group.count(g) for g in range(max_grade + 1)]

        def a(m, n=n, c=c):
            acc = 0.0
            for ks in product(*[range(cg + 1) for cg in c[1:]]):
                k0 = m - sum(ks)
                if 0 <= k0 <= c[0]:
                    weight = comb(c[0], k0)
                    for g, kg in enumerate(ks, start=1):
                        weight *= comb(c[g], kg) * x[g] ** kg
                    acc += weight
            return acc / comb(n, m)

        total += before * sum((a(j - 1) - a(j)) / (s + j) for j in range(1, n + 1) if k is None or s + j <= k)
        for grade in group:
            before *= x[grade]
        s += n
    return total


@pytest.mark.parametrize("sync_free", [False, True])
def test_err_large_tie_groups_match_counting_over_grades(sync_free):
    """Tie groups of up to ~30 documents, cutoffs inside and across them: ERR equals the enumeration over
    grade counts above, on the CPU path that reads its largest term count and on the sync-free path of
    CUDA (``HostSyncGuard``: one step per slot of the head)."""
    import contextlib

    from tests.sync_guard import HostSyncGuard

    g = torch.Generator().manual_seed(7)
    preds = torch.randint(0, 4, (6, 60), generator=g).double()  # 4 levels: groups of ~15, up to ~30
    preds[0] = 0.0  # one group of 60
    target = torch.randint(0, 5, (6, 60), generator=g)
    names = ["ERR@1", "ERR@5", "ERR@20", "ERR@37", "ERR"]
    with HostSyncGuard() if sync_free else contextlib.nullcontext():
        got = F.evaluate(preds, target, names, reduction="none", validate_args=False)
    for row in range(6):
        for name in names:
            k = int(name[4:]) if "@" in name else None
            want = _err_over_tie_orders(preds[row].tolist(), target[row].tolist(), k)
            assert got[name][row].item() == pytest.approx(want, rel=1e-9, abs=1e-12), (row, name)


def test_err_long_tie_group_is_exact_and_finite():
    """A tie group much longer than the cutoff (all scores equal): ERR@k is the mean over random orders."""
    g = torch.Generator().manual_seed(0)
    target = torch.randint(0, 5, (3, 200), generator=g)
    preds = torch.zeros(3, 200, dtype=torch.float64)
    got = F.evaluate(preds, target, ["ERR@3"], reduction="none")["ERR@3"]
    # Exact expectation of the first three slots of a uniformly random order, by inclusion of ordered triples.
    for row, t in zip(got, target.tolist()):
        r = [(2**x - 1) / 16 for x in t]
        n, s1 = len(r), sum(r)
        e1 = s1 / n
        e2 = sum(r[a] * (s1 - r[a]) for a in range(n)) / (n * (n - 1))  # E[R_1 R_2]
        s2 = sum(x * x for x in r)
        # E[(1-R1)(1-R2)R3] = E[R3] - 2 E[R1 R3] + E[R1 R2 R3]
        e3 = (s1**3 - 3 * s1 * s2 + 2 * sum(x**3 for x in r)) / (n * (n - 1) * (n - 2))
        want = e1 + (e1 - e2) / 2 + (e1 - 2 * e2 + e3) / 3
        assert row.item() == pytest.approx(want, rel=1e-9)


# ----------------------------------------------------------------------------- RBP, residual, Judged, unj
def test_rbp_matches_cwl_eval():
    ir_measures = pytest.importorskip("ir_measures")
    pytest.importorskip("cwl")
    rng = random.Random(5)
    qrels = {str(q): {f"d{i}": rng.choice([0, 0, 1, 2, 3]) for i in rng.sample(range(40), 15)} for q in range(1, 21)}
    run = {str(q): {f"d{i}": rng.random() for i in rng.sample(range(40), 25)} for q in range(1, 21)}  # no ties
    measures = {"RBP(rel=1)": ir_measures.RBP(rel=1), "RBP(p=0.5,rel=2)": ir_measures.RBP(rel=2, p=0.5)}
    got = trec.evaluate(trec.Qrels.from_dict(qrels), trec.Run.from_dict(run), list(measures))
    for name, measure in measures.items():
        for m in ir_measures.iter_calc([measure], qrels, run):
            assert got.per_query[name][got.qids.index(m.query_id)].item() == pytest.approx(m.value, abs=1e-12)


def test_rbp_hand_examples_and_gain_rescaling():
    preds = torch.tensor([[0.9, 0.8, 0.7, 0.6]])
    # binary: (1 - p) sum p^(i-1) over relevant ranks 1 and 3
    assert _ours([0.9, 0.8, 0.7], [1, 0, 1], ["RBP(p=0.5)"])[0] == pytest.approx(0.5 * (1 + 0.25))
    # graded grades 0..4 are rescaled to grade / 4 (trec_eval), from the query's top grade
    names = ["rbp", "rbp.p=0.5", "rbp.0=0,1=1,2=1,3=1,4=1", "rbp.0=0,1=1,2=1,4=1", "RBP(rel=2)"]
    got = F.evaluate(preds, torch.tensor([[4, 0, 2, 1]]), names)
    assert got["rbp"].item() == pytest.approx(0.1 * (1 + 0.81 * 0.5 + 0.729 * 0.25))
    assert got["rbp_p=0.5"].item() == pytest.approx(0.5 * (1 + 0.25 * 0.5 + 0.125 * 0.25))
    assert got["rbp_0=0,1=1,2=1,3=1,4=1"].item() == pytest.approx(0.1 * (1 + 0.81 + 0.729))
    # a level that the gains do not name keeps its grade as gain (3 here), and the rescaling follows it
    assert got["rbp_0=0,1=1,2=1,4=1"].item() == pytest.approx(0.1 * (1 + 0.81 + 0.729) / 3)
    assert got["RBP(rel=2)"].item() == pytest.approx(0.2 * (1 + 0.64))
    # the top grade comes from every judged document of the query (ideal_target) when given
    with_ideal = F.evaluate(preds, torch.tensor([[2, 0, 2, 1]]), ["rbp"], ideal_target=torch.tensor([[2, 0, 2, 1, 4]]))
    assert with_ideal["rbp"].item() == pytest.approx(0.1 * (0.5 + 0.81 * 0.5 + 0.729 * 0.25))


def test_residual_hand_examples():
    judged = torch.tensor([[True, False, True, True]])
    preds, target = torch.tensor([[0.9, 0.8, 0.7, 0.6]]), torch.tensor([[1, 0, 1, 0]])
    got = F.evaluate(preds, target, ["rbp_residual", "rbp_resid", "rbp_residual@2", "rbp_resid.p=0.5"], judged=judged)
    assert got["rbp_residual"].item() == pytest.approx(0.1 * 0.9 + 0.9**4)  # rank 2 unjudged, then the tail
    assert got["rbp_resid"].item() == pytest.approx(0.1 * 0.9 + 0.9**4)
    assert got["rbp_residual@2"].item() == pytest.approx(0.1 * 0.9 + 0.9**2)
    assert got["rbp_resid_p=0.5"].item() == pytest.approx(0.5 * 0.5 + 0.5**4)
    all_judged = F.evaluate(preds, target, ["rbp_residual", "rbp_resid"])
    assert all_judged["rbp_residual"].item() == pytest.approx(0.9**4)  # Moffat & Zobel: the unread tail
    assert all_judged["rbp_resid"].item() == 0.0  # trec_eval 10.0: 0 without unjudged documents


@pytest.mark.parametrize(
    ("qrels", "run", "expected", "options"),
    [
        ("qrels.test", "results.test", "out.test.aq", {}),
        ("qrels.rel_level", "results.test", "out.test.aql", {"relevance_level": 2}),
        ("qrels.test", "results.trunc", "out.test.aqc", {"complete": True}),
    ],
)
def test_trec_eval_10_rbp_rbp_resid_unj(trec_eval_test_dir, qrels, run, expected, options):
    """trec_eval 10.0's expected outputs: graded qrels (-1..4, rescaled gains), exact score ties, -c."""
    d = trec_eval_test_dir
    want = read_expected(d / expected)
    res = trec.evaluate(d / qrels, d / run, ["rbp", "rbp_resid", "unj"], **options)
    names = ["rbp", "rbp_resid", "unj_5", "unj_10", "unj_20"]
    assert list(res.per_query) == names
    for name in names:
        for i, q in enumerate(res.qids):
            assert f"{res.per_query[name][i].item():.4f}" == want[q][name], (name, q)
        assert f"{res.summary[name]:.4f}" == want["all"][name]


def test_judged_matches_ir_measures():
    ir_measures = pytest.importorskip("ir_measures")
    rng = random.Random(2)
    # ir_measures counts any qrels entry as judged: no negative grades here
    qrels = {str(q): {f"d{i}": rng.choice([0, 1, 2]) for i in rng.sample(range(30), 12)} for q in range(1, 16)}
    run = {str(q): {f"d{i}": rng.random() for i in rng.sample(range(30), rng.randint(1, 25))} for q in range(1, 16)}
    batch = trec.to_tensors(trec.Qrels.from_dict(qrels), trec.Run.from_dict(run))
    for k in (1, 5, 10, 40):
        want = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.Judged @ k], qrels, run)}
        # ir_measures divides by min(k, list length): adaptive_k
        got = F.evaluate(
            batch.preds,
            batch.target,
            [f"Judged@{k}"],
            mask=batch.mask,
            judged=batch.target >= 0,
            adaptive_k=True,
            reduction="none",
        )[f"Judged@{k}"]
        for i, q in enumerate(batch.qids):
            assert got[i].item() == pytest.approx(want[q], abs=1e-6), (k, q)


def test_judged_and_unj_edge_cases():
    preds, target = torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 0]])
    judged = torch.tensor([[True, False, True]])
    got = F.evaluate(preds, target, ["judged@2", "judged@5", "judged", "unj@2", "unj@5", "unjudged"], judged=judged)
    assert [round(v.item(), 4) for v in got.values()] == [0.5, 0.4, 0.6667, 0.5, 0.2, 0.3333]
    adaptive = F.evaluate(preds, target, ["judged@5", "unj@5"], judged=judged, adaptive_k=True)
    assert [round(v.item(), 4) for v in adaptive.values()] == [0.6667, 0.3333]
    # ir_measures' spelling implies its denominator, min(k, retrieved): 2 judged of 3 retrieved
    ir = F.evaluate(preds, target, ["Judged@2", "Judged@5", "Judged"], judged=judged)
    assert [round(v.item(), 4) for v in ir.values()] == [0.5, 0.6667, 0.6667]
    # without judged flags every real document is judged
    assert F.evaluate(preds, target, ["judged@5"], mask=torch.tensor([[True, True, False]]))[
        "judged@5"
    ].item() == pytest.approx(0.4)


# ----------------------------------------------------------------------------- fall-out, AUROC
def test_fall_out_and_auroc_match_torchmetrics_with_ties():
    from sklearn.metrics import roc_auc_score
    from torchmetrics.functional.retrieval import retrieval_auroc, retrieval_fall_out

    g = torch.Generator().manual_seed(0)
    preds = (torch.rand(40, 12, generator=g) * 5).round() / 5  # many ties
    target = torch.rand(40, 12, generator=g) < 0.4
    target[0], target[1] = True, False  # all relevant, none relevant
    for k in (None, 12, 20):  # cutoffs that split no tie group
        at = "" if k is None else f"@{k}"
        ours = F.evaluate(
            preds,
            target,
            [f"fall_out{at}", f"auroc{at}", f"auroc(max_fpr=0.3){at}"],
            reduction="none",
            empty_target_action="neg",
        )
        for i in range(40):
            assert ours[f"fall_out{at}"][i].item() == pytest.approx(
                retrieval_fall_out(preds[i], target[i], top_k=k).item(), abs=1e-6
            )
            assert ours[f"auroc{at}"][i].item() == pytest.approx(
                retrieval_auroc(preds[i], target[i], top_k=k).item(), abs=1e-6
            )
            tm = retrieval_auroc(preds[i], target[i], top_k=k, max_fpr=0.3).item()
            assert ours[f"auroc(max_fpr=0.3){at}"][i].item() == pytest.approx(tm, abs=1e-6)
            if 0 < target[i].sum() < 12:
                assert ours[f"auroc{at}"][i].item() == pytest.approx(
                    roc_auc_score(target[i].numpy(), preds[i].numpy()), abs=1e-6
                )
    # distinct scores: any cutoff
    preds = torch.rand(40, 12, generator=g)
    for k in (1, 3, 7):
        ours = F.evaluate(preds, target, [f"fall_out@{k}", f"auroc@{k}", f"auroc(max_fpr=0.5)@{k}"], reduction="none")
        for i in range(40):
            assert ours[f"fall_out@{k}"][i].item() == pytest.approx(
                retrieval_fall_out(preds[i], target[i], top_k=k).item(), abs=1e-6
            )
            assert ours[f"auroc@{k}"][i].item() == pytest.approx(
                retrieval_auroc(preds[i], target[i], top_k=k).item(), abs=1e-6
            )
            tm = retrieval_auroc(preds[i], target[i], top_k=k, max_fpr=0.5).item()
            assert ours[f"auroc(max_fpr=0.5)@{k}"][i].item() == pytest.approx(tm, abs=1e-6)


def test_classes_are_drop_ins_for_torchmetrics():
    from torchmetrics.retrieval import RetrievalAUROC, RetrievalFallOut

    g = torch.Generator().manual_seed(1)
    preds = torch.rand(60, generator=g)
    target = torch.rand(60, generator=g) < 0.3
    indexes = torch.randint(0, 8, (60,), generator=g)
    target[indexes == 0] = True  # a query without non-relevant documents: fall-out's empty case
    for ours, theirs in [
        (FallOut(k=3), RetrievalFallOut(top_k=3)),
        (FallOut(), RetrievalFallOut()),
        (AUROC(k=4), RetrievalAUROC(top_k=4)),
        (AUROC(max_fpr=0.5), RetrievalAUROC(max_fpr=0.5)),
    ]:
        ours.update(preds, target, indexes=indexes)
        theirs.update(preds, target, indexes=indexes)
        assert ours.compute().item() == pytest.approx(theirs.compute().item(), abs=1e-6)
    with pytest.raises(ValueError, match=r"max_fpr must be a number in \(0, 1\]"):
        AUROC(max_fpr=1.5)


def test_auroc_tie_split_by_the_cutoff_is_averaged_exactly():
    # The cutoff keeps 1 of a tie group of 3 (1 relevant, 2 not): with probability 1/3 the kept one is relevant.
    preds, target = torch.tensor([[0.9, 0.5, 0.5, 0.5]]), torch.tensor([[0, 1, 0, 0]])
    got = F.evaluate(preds, target, ["auroc@2"])["auroc@2"].item()
    # relevant kept: the non-relevant 0.9 outranks it -> AUROC 0; otherwise no relevant document in the top 2 -> 0
    assert got == 0.0
    preds, target = torch.tensor([[0.9, 0.5, 0.5, 0.5]]), torch.tensor([[1, 1, 0, 0]])
    # kept relevant (1/3): top = {1, 1} -> 0 (one class); kept non-relevant (2/3): pair (0.9 rel > non-rel) -> 1
    assert F.evaluate(preds, target, ["auroc@2"])["auroc@2"].item() == pytest.approx(2 / 3)


# ----------------------------------------------------------------------------- OPA, ARP: TF-Ranking's test cases
@pytest.mark.parametrize(
    ("scores", "labels", "opa"),
    [
        ([3.0, 2.0, 1.0], [0, 1, 0], 1 / 2),
        ([3.0, 2.0, 1.0], [0, 0, 0], 0.0),
        ([4.0, 3.0, 2.0, 1.0], [1, 3, 0, 1], 3 / 5),
        ([4.0, 1.0, 2.0, 3.0], [2, -1, 1, 0], 2 / 3),  # -1: padding (ignore_index)
        ([4.0, 1.0, 2.0, 3.0], [1, 0, 1, 0], 3 / 4),
        ([3.0, 1.0, 2.0], [1, 0, 1], 1.0),
    ],
)
def test_opa_tf_ranking_cases(scores, labels, opa):
    """TF-Ranking's OPAMetric tests (metrics_impl_test.py): correct pairs / pairs with different labels."""
    got = F.evaluate(torch.tensor([scores]), torch.tensor([labels]), ["opa"], ignore_index=-1, reduction="none")["opa"]
    assert got.item() == pytest.approx(opa)


@pytest.mark.parametrize(
    ("scores", "labels", "arp"),
    [
        ([1.0, 3.0, 2.0], [0, 0, 1], 2.0),
        ([1.0, 2.0, 3.0], [0, 1, 2], (1 * 2 + 2 * 1) / 3),
        ([1.0, 3.0, 2.0], [0, 0, 0], 0.0),
        ([1.0, 5.0, 4.0, 3.0, 2.0], [1, -1, 1, -1, 0], 2.0),  # -1: padding, pushed to the end
        ([1.0, 3.0, 2.0, 4.0], [0, 0, 1, 0], 3.0),
    ],
)
def test_arp_tf_ranking_cases(scores, labels, arp):
    """TF-Ranking's ARPMetric tests: sum(rank * label) / sum(label), 0 without relevant items."""
    got = F.evaluate(torch.tensor([scores]), torch.tensor([labels]), ["arp"], ignore_index=-1, reduction="none")["arp"]
    assert got.item() == pytest.approx(arp)


def test_opa_long_lists_memory_follows_the_list():
    """OPA counts pairs by sorting (no L x L tensor): a long list against an O(L^2) count."""
    g = torch.Generator().manual_seed(0)
    preds = (torch.rand(2, 3000, generator=g) * 50).round()
    target = torch.randint(0, 5, (2, 3000), generator=g)
    got = F.evaluate(preds, target, ["opa"], reduction="none")["opa"]
    for i in range(2):
        p, t = preds[i], target[i]
        higher = t.unsqueeze(1) > t.unsqueeze(0)
        diff = p.unsqueeze(1) - p.unsqueeze(0)
        want = ((diff > 0) & higher).sum() + 0.5 * ((diff == 0) & higher).sum()
        assert got[i].item() == pytest.approx((want / higher.sum()).item(), rel=1e-6)


# ----------------------------------------------------------------------------- names and every API
def test_names_in_every_spelling():
    cases = {
        "ERR@20": ("err", 20, "ERR@20", "ERR@20"),
        "err@20": ("err", 20, "ERR@20", "ERR@20"),
        "RBP": ("rbp", None, "RBP", "rbp_p=0.8"),
        "RBP(p=0.9)": ("rbp", None, "RBP(p=0.9)", "rbp"),
        "rbp": ("rbp", None, "RBP(p=0.9)", "rbp"),
        "rbp.p=0.8": ("rbp", None, "RBP", "rbp_p=0.8"),
        "rbp_p=0.5": ("rbp", None, "RBP(p=0.5)", "rbp_p=0.5"),
        "rbp_resid": ("rbp_residual", None, "rbp_residual(tail='if_unjudged')", "rbp_resid"),
        "Judged@10": ("judged", 10, "Judged@10", "Judged@10"),
        "unj_10": ("unjudged", 10, "unjudged@10", "unj_10"),
        "fallout@5": ("fall_out", 5, "fall_out@5", "fall_out@5"),
        "AUROC(max_fpr=0.5)@5": ("auroc", 5, "auroc(max_fpr=0.5)@5", "auroc(max_fpr=0.5)@5"),
        "OPA": ("opa", None, "opa", "opa"),
        "arp": ("arp", None, "arp", "arp"),
    }
    for name, (key, cutoff, ir, trec_name) in cases.items():
        m = M.parse_measure(name)
        assert (m.key, m.cutoff, m.ir_name(), m.trec_name()) == (key, cutoff, ir, trec_name), name
        assert M.parse_measure(m.canonical()) == m, name  # the canonical spelling reads back
    assert M.parse_measure("RBP") == M.parse_measure("rbp(p=0.8)") != M.parse_measure("rbp")
    assert [m.label for m in M.parse_measures("unj")] == ["unj_5", "unj_10", "unj_20"]
    printed = [m.trec_label for m in M.trec_order(M.parse_measures("all_trec"))]
    assert printed[-5:] == ["rbp", "rbp_resid", "unj_5", "unj_10", "unj_20"]
    ir_measures = pytest.importorskip("ir_measures")
    for name in ("ERR@20", "RBP", "RBP(p=0.5)", "RBP(rel=2)", "Judged@10"):
        theirs, ours = ir_measures.parse_measure(name), M.parse_measure(name)
        for param, value in theirs.params.items():
            assert (ours.cutoff if param == "cutoff" else ours.param(param)) == value, (name, param)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("rbp.q=0.5", "is not one of"),
        ("rbp_resid.1=1", "takes no gains"),
        ("rbp.p=1.5", "p must be a number in (0, 1)"),
        ("rbp.p", "is not 'name=number'"),
        ("RBP(p=0)", "p must be a number in (0, 1)"),
        ("rbp_residual(tail='sometimes')", "tail must be one of"),
        ("opa@10", "takes no cutoff"),
        ("AUROC(max_fpr=0)", "max_fpr must be a number in (0, 1]"),
    ],
)
def test_bad_names_explain_themselves(name, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        M.parse_measure(name)


def test_every_api_gives_the_same_values(tmp_path):
    from tests.trec_fixtures import random_collection, write_dicts
    from torch_rankeval.cli import main

    qrels, run = random_collection(4)
    qrels = {q: {d: min(g, 4) for d, g in docs.items()} for q, docs in qrels.items()}
    qrels_path, run_path = write_dicts(tmp_path, qrels, run)
    names = ["ERR@20", "rbp", "RBP(p=0.5)", "rbp_resid", "unj_5", "Judged@10", "fall_out@5", "auroc@10", "opa", "arp"]
    res = trec.evaluate(qrels_path, run_path, names)
    batch = trec.to_tensors(trec.Qrels.from_dict(qrels), trec.Run.from_dict(run))
    kw = {"mask": batch.mask, "ideal_target": batch.ideal_target, "judged": batch.target >= 0}
    functional = F.evaluate(batch.preds, batch.target.clamp(min=0), names, convention="trec_eval", **kw)
    metric = RankingMetrics(metrics=names, convention="trec_eval")
    metric.update(batch.preds, batch.target.clamp(min=0), **kw)
    streamed = metric.compute()
    import io
    import json

    out = io.StringIO()
    assert (
        main(
            [
                "evaluate",
                str(qrels_path),
                str(run_path),
                *[arg for n in names for arg in ("-m", n)],
                "--format",
                "json",
            ],
            out,
        )
        == 0
    )
    cli = json.loads(out.getvalue())["runs"][0]["summary"]
    for name in names:
        assert functional[name].item() == pytest.approx(res.summary[name], abs=1e-6), name
        assert streamed[name].item() == pytest.approx(res.summary[name], abs=1e-6), name
        assert cli[name] == pytest.approx(res.summary[name], abs=1e-12), name


def test_callback_logs_the_new_measures(tmp_path):
    pytest.importorskip("lightning.pytorch")
    from tests.lightning_helpers import LinearRanker, dataset, loader, quiet_trainer
    from torch_rankeval.lightning import RankingMetricsCallback

    data, model = dataset(9, seed=2), LinearRanker()
    names = ("ERR@10", "RBP", "opa", "auroc@5")
    callback = RankingMetricsCallback(metrics=names, k=None)
    trainer = quiet_trainer(tmp_path, [callback])
    (val,) = trainer.validate(model, loader(data, 4, exact=True), verbose=False)
    batch = data.padded()
    with torch.no_grad():
        truth = F.evaluate(model(batch["features"]), batch["target"], list(names), mask=batch["mask"])
    for name in names:
        assert val[f"val/{name}"] == pytest.approx(truth[name].item(), abs=1e-6), name


@pytest.mark.slow
def test_fullgraph_compile_of_the_new_kernels():
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(0)
    preds = (torch.rand(6, 12, generator=g) * 4).round() / 4  # ties
    target = torch.randint(0, 5, (6, 12), generator=g)
    mask = torch.rand(6, 12, generator=g) > 0.2
    judged = torch.rand(6, 12, generator=g) > 0.2

    from torch_rankeval.conventions import DEFAULT

    plan = M.MeasurePlan(M.parse_measures(NEW), DEFAULT)

    def fn(p, t, m, j):
        return plan.values(p, t, mask=m, judged=j, validate_args=False)[0]

    compiled = torch.compile(fn, fullgraph=True, backend="inductor")
    eager = fn(preds, target, mask, judged)
    torch.testing.assert_close(compiled(preds, target, mask, judged), eager)
    assert not eager.isnan().any()
