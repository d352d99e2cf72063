"""ir_measures' definitions that the library had no expression for (issue 28): Clarke et al.'s
``Compat``, the pairwise ``Accuracy``, ``NumQ`` per query and the ``SetP@k`` / ``SetR@k`` spellings.

Each against ir_measures' own expected values, transcribed from its test files (terrierteam/ir_measures
at dc04a88, version 0.4.3; the file and test named at each), and against ir_measures run live on seeded
random data with tied scores, graded and unjudged documents, relevant documents the run misses,
queries without relevant documents and queries the run does not answer; then each surface by name.
"""

from __future__ import annotations

import io
import math
import os
import random

import pytest
import torch

from torch_rankeval import RankingMetrics, trec
from torch_rankeval import functional as F
from torch_rankeval import measures as M
from torch_rankeval.cli import main
from torch_rankeval.trec.io import write_qrels

DATA = os.path.join(os.path.dirname(__file__), "data", "ir_measures")

# ----------------------------------------------------------------------------------------------------
# ir_measures' expected values

#: tests/test_compat.py, TestCompat.test_measures ("based on a manual execution of
#: https://github.com/claclark/Compatibility"), on tests/compat.qrels and tests/compat.run (copied,
#: gzipped, to tests/data/ir_measures/; see the README there).
COMPAT_EXPECTED = {
    "Compat(p=0.95)": {"31_1": 0.51779512165509, "31_2": 0.018400100569017922},
    "Compat(p=0.9)": {"31_1": 0.3761334522946854, "31_2": 0.004344079941789211},
    "Compat(p=0.8)": {"31_1": 0.16723008845234535, "31_2": 0.00022806427320561776},
}
COMPAT_AGGREGATE = ("Compat(p=0.95)", 0.268097611)


def test_compat_matches_ir_measures_test_compat():
    result = trec.evaluate(
        os.path.join(DATA, "compat.qrels.gz"),
        os.path.join(DATA, "compat.run.gz"),
        list(COMPAT_EXPECTED),
        convention="ir_measures",
    )
    assert result.qids == ["31_1", "31_2"]
    for name, expected in COMPAT_EXPECTED.items():
        got = dict(zip(result.qids, result.per_query[name].tolist()))
        assert got == pytest.approx(expected, abs=1e-9), name
    name, value = COMPAT_AGGREGATE
    assert result.summary[name] == pytest.approx(value, abs=1e-9)


#: tests/test_providers.py, TestPytrecEval.test_empty: the qrels and run of its Compat and Accuracy cases.
PROVIDERS_QRELS = {
    "0": {"D0": 0, "D1": 1, "D2": 1, "D3": 2, "D4": 0},
    "1": {"D0": 1, "D3": 2, "D5": 2},
}
PROVIDERS_RUN = [
    ("0", "D0", 0.8),
    ("0", "D2", 0.7),
    ("0", "D1", 0.3),
    ("0", "D3", 0.4),
    ("0", "D4", 0.1),
    ("1", "D1", 0.8),
    ("1", "D3", 0.7),
    ("1", "D4", 0.3),
    ("1", "D2", 0.4),
]


def _write_run(path: str, rows: list[tuple[str, str, float]]) -> None:
    """A run file with its lines in the order given (ir_measures' accuracy provider keeps tied scores in it)."""
    with open(path, "w") as f:
        f.writelines(f"{q} Q0 {d} {i} {s!r} run\n" for i, (q, d, s) in enumerate(rows))


@pytest.fixture
def providers_files(tmp_path):
    def files(qids_qrels=("0", "1"), qids_run=("0", "1")):
        qrels, run = str(tmp_path / "qrels"), str(tmp_path / "run")
        write_qrels(qrels, {q: PROVIDERS_QRELS[q] for q in qids_qrels})
        _write_run(run, [r for r in PROVIDERS_RUN if r[0] in qids_run])
        return qrels, run

    return files


def test_compat_and_accuracy_match_ir_measures_test_providers(providers_files):
    # "qrels but partial run" and "run but partial qrels": Compat per query (the unanswered query 0) and its
    # mean; Accuracy only for query 0 (none for an unanswered query, and no 0 filled in).
    for qids_qrels, qids_run, compat, compat_mean in [
        (("0", "1"), ("0",), {"0": 0.4744431703672816, "1": 0.0}, 0.2372215851836408),
        (("0",), ("0", "1"), {"0": 0.4744431703672816}, 0.4744431703672816),
    ]:
        files = providers_files(qids_qrels, qids_run)
        r = trec.evaluate(*files, ["Compat(p=0.8)"], convention="ir_measures")  # each provider on its own
        assert dict(zip(r.qids, r.per_query["Compat(p=0.8)"].tolist())) == pytest.approx(compat, abs=1e-12)
        assert r.summary["Compat(p=0.8)"] == pytest.approx(compat_mean, abs=1e-12)
        r = trec.evaluate(*files, ["Accuracy"], convention="ir_measures")
        accuracy = {q: v for q, v in zip(r.qids, r.per_query["Accuracy"].tolist()) if not math.isnan(v)}
        assert accuracy == {"0": 0.5}
        assert r.summary["Accuracy"] == 0.5


#: tests/test_accuracy.py, TestMeasures.test_accuracy.
ACCURACY_QRELS = {
    "0": {"C0_1": 0, "B0_1": 1, "A0_1": 2},
    "1": {"A1_1": 2, "A1_2": 2, "B1_1": 1, "C1_2": 0},
    "2": {"B1_1": 1},
}
ACCURACY_RUN = [
    ("0", "C0_1", 0.4),
    ("0", "A0_1", 0.3),
    ("0", "C0_2", 0.2),
    ("0", "C0_3", 0.1),
    ("1", "C1_1", 0.8),
    ("1", "A1_1", 0.7),
    ("1", "C1_2", 0.6),
    ("1", "B1_1", 0.5),
    ("1", "C1_3", 0.4),
    ("2", "B1_1", 0.2),
    ("2", "C1_1", 0.1),
]
ACCURACY_EXPECTED = {
    "Accuracy(rel=1)": {"0": 2.0 / 3.0, "1": 0.5 * (2 / 3.0 + 1.0 / 3), "2": 1.0},
    "Accuracy(rel=2)": {"0": 2.0 / 3, "1": 0.75},
}


def test_accuracy_matches_ir_measures_test_accuracy(tmp_path):
    qrels, run = str(tmp_path / "qrels"), str(tmp_path / "run")
    write_qrels(qrels, ACCURACY_QRELS)
    _write_run(run, ACCURACY_RUN)
    r = trec.evaluate(qrels, run, list(ACCURACY_EXPECTED), convention="ir_measures")
    for name, expected in ACCURACY_EXPECTED.items():
        got = {q: v for q, v in zip(r.qids, r.per_query[name].tolist()) if not math.isnan(v)}
        assert got == pytest.approx(expected, abs=1e-9), name
    expected_mean = sum(ACCURACY_EXPECTED["Accuracy(rel=1)"].values()) / 3
    assert r.summary["Accuracy(rel=1)"] == pytest.approx(expected_mean, abs=1e-9)


#: tests/test_pytrec_eval.py, TestPytrecEval.test_NumQ (the qrels and run of test_providers): NumQ is 1 per
#: query, 2 in all.
def test_num_q_per_query_matches_ir_measures_test_num_q(providers_files):
    r = trec.evaluate(*providers_files(), ["NumQ"], convention="ir_measures")
    assert dict(zip(r.qids, r.per_query["NumQ"].tolist())) == {"0": 1.0, "1": 1.0}
    assert r.summary["NumQ"] == 2
    plain = trec.evaluate(*providers_files(), ["NumQ"])  # trec_eval prints num_q in the summary only
    assert "NumQ" not in plain.per_query and plain.summary["NumQ"] == 2
    preds, target = torch.tensor([[0.8, 0.7], [0.3, 0.1]]), torch.tensor([[0, 1], [1, 1]])
    assert F.evaluate(preds, target, ["NumQ"], reduction="none")["NumQ"].tolist() == [1.0, 1.0]


#: tests/test_ranx.py, TestRanx.test_P: SetP, SetR and their spellings with a cutoff, on one query.
RANX_QRELS = {"0": {"D0": 0, "D1": 1, "D2": 1, "D3": 2, "D4": 0}}
RANX_RUN = [("0", "D0", 0.8), ("0", "D2", 0.7), ("0", "D1", 0.3), ("0", "D3", 0.4), ("0", "D4", 0.1)]
RANX_EXPECTED = {"SetP": 0.6, "SetP(rel=2)@5": 0.2, "SetR": 1.0, "SetR(rel=2)@5": 1.0}


def test_set_p_and_set_r_with_a_cutoff_match_ir_measures_test_ranx(tmp_path):
    qrels, run = str(tmp_path / "qrels"), str(tmp_path / "run")
    write_qrels(qrels, RANX_QRELS)
    _write_run(run, RANX_RUN)
    for convention in (None, "ir_measures"):
        r = trec.evaluate(qrels, run, list(RANX_EXPECTED), convention=convention)
        assert r.summary == pytest.approx(RANX_EXPECTED, abs=1e-12)


def test_set_p_at_k_is_the_set_precision_of_the_top_k():
    """``SetP@k`` is the set precision of the documents retrieved down to rank ``k``: relevant / min(k,
    retrieved), ``P(adaptive_k=True)@k``; ``SetR@k`` is ``R@k``. (ir_measures' own check refuses a cutoff
    on SetP and SetR; its pytrec_eval and ranx providers drop it, which is the same value whenever a
    query retrieves at most k documents, as in test_ranx.)"""
    preds = torch.tensor([[0.8, 0.7, 0.4, 0.3, 0.1, 0.05]], dtype=torch.float64)
    target = torch.tensor([[0, 1, 2, 1, 0, 0]])
    out = F.evaluate(preds, target, ["SetP@2", "SetP@4", "SetP@10", "SetP", "SetR@2", "R@2"], reduction="none")
    assert {k: v.item() for k, v in out.items()} == pytest.approx(
        {"SetP@2": 1 / 2, "SetP@4": 3 / 4, "SetP@10": 3 / 6, "SetP": 3 / 6, "SetR@2": 1 / 3, "R@2": 1 / 3}
    )
    assert M.parse_measure("SetP(rel=2)@5") == M.parse_measure("P(rel=2,adaptive_k=True)@5")
    assert M.parse_measure("SetR@5") == M.parse_measure("R@5")
    for name in ("SetAP@5", "SetP(relative=True)@5", "set_P@5"):  # no cutoff for these
        with pytest.raises(ValueError, match="takes no cutoff"):
            M.parse_measure(name)


# ----------------------------------------------------------------------------------------------------
# ir_measures live on seeded random data

ir_measures = pytest.importorskip("ir_measures")


def _collection(seed: int) -> tuple[dict[str, dict[str, int]], list[tuple[str, str, float]]]:
    """Qrels (each query's documents by docno, as TREC qrels files list them) and run lines in a random order:
    tied scores, grades 0-3, unjudged documents, relevant documents the run misses, a query without relevant
    documents and one the run does not answer."""
    rng = random.Random(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: list[tuple[str, str, float]] = []
    for q in range(14):
        qid = f"q{q:02d}"
        docs = [f"d{i:03d}" for i in rng.sample(range(200), rng.randint(3, 40))]
        judged = {d: rng.choice([0, 0, 1, 1, 2, 3]) for d in docs if rng.random() < 0.75}
        judged.update({f"x{i:02d}": rng.choice([0, 1, 2, 3]) for i in range(rng.randint(0, 5))})  # never retrieved
        if q == 3:
            judged = {d: 0 for d in judged}
        if judged:
            qrels[qid] = dict(sorted(judged.items()))
        if q != 5:
            run.extend((qid, d, float(rng.randint(0, 4))) for d in docs)
    rng.shuffle(run)
    return qrels, run


def _files(tmp_path, seed: int) -> tuple[str, str]:
    qrels, run = _collection(seed)
    qrels_path, run_path = str(tmp_path / f"qrels{seed}"), str(tmp_path / f"run{seed}")
    write_qrels(qrels_path, qrels)
    _write_run(run_path, run)
    return qrels_path, run_path


def _theirs(measure: str, qrels_path: str, run_path: str) -> dict[str, float]:
    """ir_measures' per-query values (its compat and accuracy providers, or pytrec_eval for NumQ), one
    query at a time: its accuracy provider divides by zero where the top k hold no non-relevant
    document, which then has no value. (One provider on its own: ``ir_measures.iter_calc`` and
    ``calc_aggregate`` give the same unless the call mixes providers, see
    test_accuracy_mixed_with_other_providers_scores_0_as_ir_measures.)"""
    parsed = ir_measures.parse_measure(measure)
    provider = {"Compat": ir_measures.compat, "Accuracy": ir_measures.accuracy}.get(
        parsed.NAME, ir_measures.pytrec_eval
    )
    qrels = list(ir_measures.read_trec_qrels(qrels_path))
    run = list(ir_measures.read_trec_run(run_path))
    out = {}
    for qid in sorted({q.query_id for q in qrels}):
        try:
            got = list(
                provider.iter_calc(
                    [parsed], [q for q in qrels if q.query_id == qid], [r for r in run if r.query_id == qid]
                )
            )
        except ZeroDivisionError:
            got = []
        out.update({m.query_id: float(m.value) for m in got})
    return out


LIVE = [
    "Compat",
    "Compat(p=0.8)",
    "Compat(p=0.5,normalize=False)",
    "Compat(p=1)",
    "Accuracy",
    "Accuracy(rel=2)",
    "Accuracy@5",
    "Accuracy(rel=2)@10",
    "NumQ",
]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_trec_evaluate_matches_ir_measures_live(tmp_path, seed):
    qrels_path, run_path = _files(tmp_path, seed)
    empty_ones = 0
    for name in LIVE:  # one measure a call: one provider (see the next test for a mixed call)
        ours = trec.evaluate(qrels_path, run_path, [name], convention="ir_measures")
        theirs = _theirs(name, qrels_path, run_path)
        mine = {q: v for q, v in zip(ours.qids, ours.per_query[name].tolist()) if not math.isnan(v)}
        assert mine == pytest.approx(theirs, abs=1e-12), name
        expected = sum(theirs.values()) / (1 if name == "NumQ" else len(theirs))  # NumQ: a sum
        assert ours.summary[name] == pytest.approx(expected, abs=1e-12), name
        empty_ones += len(ours.qids) - len(theirs)
    assert empty_ones > 0  # the data hold queries ir_measures' Accuracy leaves out


def test_accuracy_mixed_with_other_providers_scores_0_as_ir_measures(tmp_path):
    """ir_measures' accuracy provider alone leaves out the queries without a pair and those the run does
    not answer; asked for with another provider's measures (Compat, P@5), its FallbackEvaluator gives
    each of them 0. The preset follows both (the numbers of ir_measures.calc_aggregate on the same call)."""
    qrels_path, run_path = _files(tmp_path, 1)
    qrels = list(ir_measures.read_trec_qrels(qrels_path))
    run = list(ir_measures.read_trec_run(run_path))
    for names in (["Accuracy", "Accuracy(rel=2)"], ["Accuracy", "Compat"], ["Accuracy(rel=2)", "P@5"]):
        theirs = ir_measures.calc_aggregate([ir_measures.parse_measure(n) for n in names], qrels, run)
        ours = trec.evaluate(qrels_path, run_path, names, convention="ir_measures").summary
        assert ours == pytest.approx({str(m): v for m, v in theirs.items()}, abs=1e-12), names
    alone, mixed = (
        trec.evaluate(qrels_path, run_path, names, convention="ir_measures").summary["Accuracy"]
        for names in (["Accuracy"], ["Accuracy", "Compat"])
    )
    assert alone > mixed  # the same measure, two numbers in ir_measures: queries left out, or scored 0


def _peer_tensors(seed: int, order: str) -> tuple[list[str], torch.Tensor, torch.Tensor, torch.Tensor]:
    """The answered queries as tensors, each list in a peer's order (``"docno"``: score, then docno
    ascending, ir_measures' compat provider; ``"run"``: score, then the run file's order, its accuracy
    provider) with falling scores, its grades (0 for an unjudged document) and every judged grade (-1: padding)."""
    qrels, run = _collection(seed)
    qids = sorted({q for q, _, _ in run} & set(qrels))
    lists = []
    for qid in qids:
        rows = [(i, d, s) for i, (q, d, s) in enumerate(run) if q == qid]
        rows.sort(key=lambda r: (-r[2], r[1] if order == "docno" else r[0]))
        lists.append([qrels[qid].get(d, 0) for _, d, _ in rows])
    width, ideal_width = max(map(len, lists)), max(len(qrels[q]) for q in qids)
    preds = torch.full((len(qids), width), float("nan"), dtype=torch.float64)
    target = torch.zeros((len(qids), width), dtype=torch.long)
    ideal = torch.full((len(qids), ideal_width), -1, dtype=torch.long)
    for i, (qid, grades) in enumerate(zip(qids, lists)):
        preds[i, : len(grades)] = torch.arange(len(grades), 0, -1, dtype=torch.float64)
        target[i, : len(grades)] = torch.tensor(grades)
        ideal[i, : len(qrels[qid])] = torch.tensor(list(qrels[qid].values()))
    return qids, preds, target, ideal


@pytest.mark.parametrize("seed", [0, 1])
def test_functional_and_classes_match_ir_measures_live_in_its_order(tmp_path, seed):
    """On tensors each list is given in the peer's order and ``ties="first"`` keeps it; ``empty_target_action=
    "skip"`` leaves out what ir_measures' Accuracy leaves out (its Compat scores a query without relevant
    documents 0, ``"neg"``)."""
    qrels_path, run_path = _files(tmp_path, seed)
    compat = ["Compat", "Compat(p=0.8)", "Compat(p=0.5,normalize=False)", "Compat(p=1)"]
    for names, order, action in ((compat, "docno", "neg"), (["Accuracy", "Accuracy(rel=2)@10"], "run", "skip")):
        qids, preds, target, ideal = _peer_tensors(seed, order)
        mask = ~torch.isnan(preds)
        options = {"ties": "first", "empty_target_action": action}
        out = F.evaluate(
            preds.nan_to_num(-1e9), target, names, mask=mask, ideal_target=ideal, reduction="none", **options
        )
        metric = RankingMetrics(names, **options)
        metric.update(preds.nan_to_num(-1e9), target, mask=mask, ideal_target=ideal)
        means = metric.compute()
        for name in names:
            theirs = {q: v for q, v in _theirs(name, qrels_path, run_path).items() if q in qids}
            mine = {q: v for q, v in zip(qids, out[name].tolist()) if not math.isnan(v)}
            assert mine == pytest.approx(theirs, abs=1e-12), name
            assert means[name].item() == pytest.approx(sum(theirs.values()) / len(theirs), abs=1e-6), name


def test_compat_ideal_ties_follow_the_run_not_the_qrels_file(tmp_path):
    """ir_measures' compat provider orders relevant documents of one grade and one score by the qrels file;
    here they follow the ranking (score, then docno ascending), which is its value on qrels listed by
    docno (TREC's files, and the live tests). A file in another order can change its value: a difference
    of definition, shown here."""
    run = [("q", "b", 1.0), ("q", "ab", 1.0), ("q", "a", 1.0)]  # one tied score: ranked a, ab, b
    sorted_q, shuffled_q, run_path = str(tmp_path / "s"), str(tmp_path / "u"), str(tmp_path / "r")
    write_qrels(sorted_q, {"q": {"a": 1, "ab": 0, "b": 1}})
    write_qrels(shuffled_q, {"q": {"b": 1, "ab": 0, "a": 1}})
    _write_run(run_path, run)
    ours = trec.evaluate(sorted_q, run_path, ["Compat(p=0.5)"], convention="ir_measures").summary["Compat(p=0.5)"]
    assert (
        ours
        == trec.evaluate(shuffled_q, run_path, ["Compat(p=0.5)"], convention="ir_measures").summary["Compat(p=0.5)"]
    )
    by_docno, by_file = (
        _theirs("Compat(p=0.5)", sorted_q, run_path)["q"],
        _theirs("Compat(p=0.5)", shuffled_q, run_path)["q"],
    )
    # ideal a, b: O = 1, 1, 2 -> (1 + 0.5 / 2 + 0.25 * 2 / 3) / (1 + 0.5 + 0.25 * 2 / 3)
    assert ours == pytest.approx(by_docno, abs=1e-12) and ours == pytest.approx(
        (1.25 + 1 / 6) / (1.5 + 1 / 6), abs=1e-12
    )
    # ir_measures' ideal from the other file: b, a: O = 0, 1, 2
    assert by_file == pytest.approx((0.25 + 1 / 6) / (1.5 + 1 / 6), abs=1e-12)


def test_accuracy_without_a_pair_is_empty_where_ir_measures_divides_by_zero():
    preds = torch.tensor([[0.9, 0.8, 0.1], [0.9, 0.8, 0.1], [0.9, 0.8, 0.1]], dtype=torch.float64)
    target = torch.tensor([[1, 1, 0], [0, 0, 0], [0, 1, 0]])
    out = F.evaluate(
        preds, target, ["Accuracy@2", "Accuracy"], reduction="none", ties="first", empty_target_action="skip"
    )
    assert (
        torch.isnan(out["Accuracy@2"][:2]).all() and out["Accuracy@2"][2].item() == 0.0
    )  # all relevant; none relevant
    assert (
        out["Accuracy"].tolist()[0] == 1.0
        and math.isnan(out["Accuracy"][1].item())
        and out["Accuracy"][2].item() == 0.5
    )
    with pytest.raises(ZeroDivisionError):  # ir_measures 0.4.3 on the first list, top 2
        list(
            ir_measures.accuracy.iter_calc(
                [ir_measures.parse_measure("Accuracy@2")],
                [ir_measures.Qrel("q", d, g) for d, g in (("a", 1), ("b", 1), ("c", 0))],
                [ir_measures.ScoredDoc("q", d, s) for d, s in (("a", 0.9), ("b", 0.8), ("c", 0.1))],
            )
        )


# ----------------------------------------------------------------------------------------------------
# every surface by name


def test_every_surface_by_name(tmp_path, providers_files):
    preds = torch.tensor([[0.8, 0.7, 0.4, 0.3, 0.1], [0.8, 0.7, 0.4, 0.3, 0.1]], dtype=torch.float64)
    target = torch.tensor([[0, 1, 2, 1, 0], [1, 2, 0, 0, 0]])
    names = ["Compat(p=0.8)", "compatibility(p=0.8)", "Accuracy", "pairwise_accuracy@3", "SetP@2", "SetR@2"]
    out = F.evaluate(preds, target, names, reduction="none", ties="first")
    assert out["Compat(p=0.8)"].tolist() == out["compatibility(p=0.8)"].tolist()
    # list 1: ranking 0 1 2 1 0 (grades), ideal 2 1 1; list 2: ranking 1 2 0 0 0, ideal 2 1
    assert out["Accuracy"].tolist() == pytest.approx([1 - (1 + 1 + 1) / (2 * 3), 1.0])
    assert out["pairwise_accuracy@3"].tolist() == pytest.approx([1 - 2 / (2 * 1), 1.0])
    metric = RankingMetrics(names, ties="first")
    metric.update(preds, target)
    means = metric.compute()
    for name in names:
        assert means[name].item() == pytest.approx(out[name].mean().item(), abs=1e-6), name
    with pytest.raises(ValueError, match="ties='average'"):
        F.evaluate(preds, target, ["Compat"])  # no exact tie-averaged value: refused, not approximated
    qrels, run = providers_files()
    summary = trec.evaluate(qrels, run, ["Compat(p=0.8)", "Accuracy", "NumQ"], convention="ir_measures").summary
    stream = io.StringIO()
    assert (
        main(
            [
                "evaluate",
                qrels,
                run,
                "-m",
                "Compat(p=0.8)",
                "-m",
                "Accuracy",
                "-m",
                "NumQ",
                "-q",
                "--convention",
                "ir_measures",
                "--format",
                "csv",
            ],
            stream,
        )
        == 0
    )
    text = stream.getvalue()
    assert "Compat(p=0.8)" in text and "Accuracy" in text and "NumQ" in text
    assert f"{summary['Compat(p=0.8)']:.4f}"[:5] in text


def test_accuracy_under_averaged_ties_is_the_mean_over_tie_orders():
    """``ties="average"``: the mean over every order of the tied documents of the value in that order (an
    order whose top k lack a relevant or a non-relevant document counting 0, as AUROC@k), brute force."""
    import itertools

    g = torch.Generator().manual_seed(3)
    preds = torch.randint(0, 3, (24, 5), generator=g).double()
    target = torch.randint(0, 3, (24, 5), generator=g) * (torch.rand(24, 5, generator=g) < 0.7)
    for k in (None, 2, 4):
        name = "Accuracy" if k is None else f"Accuracy@{k}"
        out = F.evaluate(preds, target, [name], reduction="none", ties="average")[name]
        for i in range(preds.shape[0]):
            values = []
            for perm in itertools.permutations(range(5)):  # an order of the list, kept when it ranks by score
                order = sorted(perm, key=lambda j: -preds[i, j].item())
                if order != list(perm):
                    continue
                top = [int(target[i, j] >= 1) for j in order[: k or 5]]
                rel, non = sum(top), len(top) - sum(top)
                above = sum(top[:p].count(0) for p in range(len(top)) if top[p])
                values.append(1 - above / (rel * non) if rel and non else 0.0)
            assert out[i].item() == pytest.approx(sum(values) / len(values), abs=1e-9), (name, i)


def test_classes_stream_compat_and_accuracy_over_batches():
    g = torch.Generator().manual_seed(5)
    preds = torch.rand(16, 9, generator=g, dtype=torch.float64)
    target = torch.randint(0, 4, (16, 9), generator=g)
    names = ["Compat", "Compat(p=0.8,normalize=False)", "Accuracy", "Accuracy(rel=2)@4"]
    whole = F.evaluate(preds, target, names, ties="first", empty_target_action="skip")
    metric = RankingMetrics(names, ties="first", empty_target_action="skip")
    for rows in (slice(0, 5), slice(5, 11), slice(11, 16)):
        metric.update(preds[rows], target[rows])
    streamed = metric.compute()
    for name in names:
        assert streamed[name].item() == pytest.approx(whole[name].item(), abs=1e-6), name
