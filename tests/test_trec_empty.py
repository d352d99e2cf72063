"""Empty runs and empty qrels: ``convention="ir_measures"`` scores them as ir_measures does (every query of the
qrels 0 without a run, no query and a NaN mean without qrels), against ir_measures' expected values transcribed
from its tests/test_providers.py::TestPytrecEval::test_empty and ir_measures run live; trec_eval's conventions
(the default) refuse them, as trec_eval 10.0 does (``trec_eval qrels empty_run`` and ``trec_eval empty_qrels run``:
"Cannot read results file" / "Cannot read qrels file", exit status 2)."""

from __future__ import annotations

import math

import pytest

from tests.test_cli import run_cli
from torch_rankeval import trec
from torch_rankeval.cli import EXIT_BAD_INPUT
from torch_rankeval.trec import Qrels, Run, TrecFormatError

ir_measures = pytest.importorskip("ir_measures")

# tests/test_providers.py::TestPytrecEval::test_empty: its qrels and run, verbatim
QRELS = {"0": {"D0": 0, "D1": 1, "D2": 1, "D3": 2, "D4": 0}, "1": {"D0": 1, "D3": 2, "D5": 2}}
RUN = {
    "0": {"D0": 0.8, "D2": 0.7, "D1": 0.3, "D3": 0.4, "D4": 0.1},
    "1": {"D1": 0.8, "D3": 0.7, "D4": 0.3, "D2": 0.4},
}
PARTIAL_QRELS = {"0": QRELS["0"]}
PARTIAL_RUN = {"0": RUN["0"]}
NAN = float("nan")

# (qrels, run): {measure: ({qid: value} of iter_calc, calc_aggregate)}; P@5 is the value of ir_measures' default
# provider and of its pytrec_eval, trectools and cwl_eval providers (cwl_eval: 0.6000000000000001 for 0.6),
# Judged@5 its judged provider's, RR@5 its msmarco provider's.
EXPECTED = {
    "qrels but no run": (
        QRELS,
        {},
        {
            "P@5": ({"0": 0.0, "1": 0.0}, 0.0),
            "Judged@5": ({"0": 0.0, "1": 0.0}, 0.0),
            "RR@5": ({"0": 0.0, "1": 0.0}, 0.0),
        },
    ),
    "qrels but partial run": (
        QRELS,
        PARTIAL_RUN,
        {
            "P@5": ({"0": 0.6, "1": 0.0}, 0.3),
            "Judged@5": ({"0": 1.0, "1": 0.0}, 0.5),
            "RR@5": ({"0": 0.5, "1": 0.0}, 0.25),
        },
    ),
    "run but no qrels": ({}, RUN, {"P@5": ({}, NAN), "Judged@5": ({}, NAN), "RR@5": ({}, NAN)}),
    "run but partial qrels": (
        PARTIAL_QRELS,
        RUN,
        {"P@5": ({"0": 0.6}, 0.6), "Judged@5": ({"0": 1.0}, 1.0), "RR@5": ({"0": 0.5}, 0.5)},
    ),
    "both no run and no qrels": ({}, {}, {"P@5": ({}, NAN), "Judged@5": ({}, NAN), "RR@5": ({}, NAN)}),
}


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-15)


@pytest.mark.parametrize("case", list(EXPECTED))
def test_ir_measures_test_empty_expected_values(case):
    """The 30 assertions of test_empty on P@5, Judged@5 and RR@5 (iter_calc's rows, calc_aggregate's mean):
    the rows are the queries of the qrels, a query the run does not answer scores 0, no qrels give no row and a
    NaN mean. (test_empty's ERR@5 is gdeval's, which the preset refuses; Compat and Accuracy are other measures.)"""
    qrels, run, expected = EXPECTED[case]
    result = trec.evaluate(qrels, run, list(expected), convention="ir_measures")
    for name, (rows, mean) in expected.items():
        assert dict(zip(result.qids, result.per_query[name].tolist())) == rows, name
        assert _same(result.summary[name], mean), (name, result.summary[name], mean)


def test_gdeval_measures_stay_refused_on_empty_inputs():
    with pytest.raises(ValueError, match=r"'ERR@5' under convention='ir_measures': ir_measures computes ERR@k"):
        trec.evaluate(QRELS, {}, ["ERR@5"], convention="ir_measures")


MEASURES = ["P@5", "NumQ", "NumRet", "NumRel", "NumRet(rel=1)", "AP", "AP@5", "RR", "RR@5", "Judged@5", "nDCG"]
MEASURES += ["nDCG@10", "Bpref", "infAP", "SetP", "SetF", "R@5", "Rprec", "IPrec@0.5", "Success@5"]
OTHER_RUN = {"7": {"D0": 0.8}}  # answers no query of the qrels


@pytest.mark.parametrize(
    ("qrels", "run"),
    [(QRELS, {}), ({}, RUN), ({}, {}), (QRELS, OTHER_RUN), (QRELS, PARTIAL_RUN), (PARTIAL_QRELS, RUN)],
    ids=["no run", "no qrels", "neither", "no common query", "partial run", "partial qrels"],
)
def test_every_pytrec_eval_measure_matches_ir_measures_live(qrels, run):
    """ir_measures.calc_aggregate and iter_calc on twenty measures, counts included (NumQ, NumRet and NumRel are
    0 without a run or without qrels)."""
    parsed = [ir_measures.parse_measure(m) for m in MEASURES]
    their_qrels = [ir_measures.Qrel(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    their_run = [ir_measures.ScoredDoc(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    want = {str(m): v for m, v in ir_measures.calc_aggregate(parsed, their_qrels, their_run).items()}
    result = trec.evaluate(qrels, run, MEASURES, convention="ir_measures")
    for name in MEASURES:
        assert _same(result.summary[name], want[name]), (name, result.summary[name], want[name])
    rows = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(parsed, their_qrels, their_run)}
    ours = {(q, name): v[i].item() for name, v in result.per_query.items() for i, q in enumerate(result.qids)}
    # NumQ has a value per query (1 where the run answers the query) where the run answers one; without an
    # answered query it is the summary's 0 only
    answered = any(q in qrels for q in run)
    assert set(ours) == {key for key in rows if answered or key[1] != "NumQ"}
    for key, value in ours.items():
        assert value == pytest.approx(rows[key], abs=1e-12), key


def test_every_form_of_an_empty_input(tmp_path):
    """An empty dict, list, iterator, DataFrame and file (one of comments only) are all "no row"."""
    comments = tmp_path / "run.txt"
    comments.write_text("# nothing retrieved\n")
    empties = [{}, [], iter([]), comments, str(comments)]
    pandas = pytest.importorskip("pandas")
    empties.append(pandas.DataFrame({"query_id": [], "doc_id": [], "score": []}))
    for empty in empties:
        result = trec.evaluate(QRELS, empty, ["P@5", "num_q"], convention="ir_measures")
        assert result.qids == ["0", "1"] and result.per_query["P@5"].tolist() == [0.0, 0.0]
        assert result.summary == {"P@5": 0.0, "num_q": 0}
    assert trec.evaluate(QRELS, comments, ["P@5"], convention="ir_measures").run == str(comments)
    qrels_file = tmp_path / "qrels.txt"
    qrels_file.write_text("")
    for empty in [{}, {"0": {}}, [], qrels_file, pandas.DataFrame({"query_id": [], "doc_id": [], "relevance": []})]:
        result = trec.evaluate(empty, RUN, ["P@5", "num_q", "num_ret"], convention="ir_measures")
        assert result.qids == [] and math.isnan(result.summary["P@5"])
        assert result.summary["num_q"] == 0 and result.summary["num_ret"] == 0


def test_trec_eval_conventions_refuse_empty_inputs(tmp_path):
    """trec_eval 10.0 refuses an empty run file and an empty qrels file (exit status 2), and a run that answers
    no query of the qrels ("No queries with both results and relevance info"): so do the default and ranx's
    preset, with errors naming the input."""
    for convention in [None, "trec_eval", "ranx"]:
        with pytest.raises(ValueError, match=r"run holds no row"):
            trec.evaluate(QRELS, [], ["P@5"], convention=convention)
        with pytest.raises(TrecFormatError, match=r"qrels dict holds no judgment"):
            trec.evaluate({}, RUN, ["P@5"], convention=convention)
    with pytest.raises(TrecFormatError, match=r"has no query in common with"):
        trec.evaluate(Qrels.from_dict(QRELS), Run.from_dict(OTHER_RUN), ["P@5"])
    empty = tmp_path / "run.txt"
    empty.write_text("")
    with pytest.raises(TrecFormatError, match=r"no run lines \(the file is empty or holds only comments\)"):
        trec.evaluate(QRELS, empty, ["P@5"])


def test_command_line(tmp_path):
    qrels, run, empty = tmp_path / "qrels.txt", tmp_path / "run.txt", tmp_path / "empty.txt"
    trec.write_qrels(qrels, QRELS)
    trec.write_run(run, RUN)
    empty.write_text("")
    code, out = run_cli("evaluate", qrels, empty, "-m", "P@5", "-m", "num_q", "--convention", "ir_measures", "-q")
    assert code == 0
    assert out.split() == ["run", "qid", "P@5", "empty.txt", "0", "0.0000", "empty.txt", "1", "0.0000"] + [
        "empty.txt",
        "all",
        "0.0000",
    ]
    code, out = run_cli("evaluate", empty, run, "-m", "P@5", "-m", "num_q", "--convention", "ir_measures")
    assert code == 0 and out.split() == ["run", "P@5", "num_q", "run.txt", "nan", "0"]
    for args in [(qrels, empty), (empty, run)]:
        code, out = run_cli("evaluate", *args, "-m", "P@5")
        assert code == EXIT_BAD_INPUT and out == ""


@pytest.mark.parametrize("run", [{}, OTHER_RUN], ids=["no run", "no common query"])
@pytest.mark.parametrize("names", [["Accuracy"], ["Accuracy", "P@5"], ["Compat(p=0.8)"]])
def test_accuracy_and_compat_on_an_unanswered_run_match_ir_measures_live(run, names):
    """ir_measures' accuracy provider alone reports no value for a query the run does not answer (its mean
    is NaN); with another provider's measure its FallbackEvaluator scores those queries 0; Compat scores 0."""
    parsed = [ir_measures.parse_measure(m) for m in names]
    their_qrels = [ir_measures.Qrel(q, d, g) for q, docs in QRELS.items() for d, g in docs.items()]
    their_run = [ir_measures.ScoredDoc(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    want = {str(m): v for m, v in ir_measures.calc_aggregate(parsed, their_qrels, their_run).items()}
    result = trec.evaluate(QRELS, run, names, convention="ir_measures")
    for name in names:
        assert _same(result.summary[name], want[name]), (name, result.summary[name], want[name])
    if names == ["Accuracy"]:
        assert math.isnan(result.summary["Accuracy"]) and result.per_query["Accuracy"].isnan().all()
