"""trec_eval's ``-J`` (judged documents only): ``trec.evaluate(judged_only=True)``, ``torch-rankeval evaluate -J``
and the tensor route (mask the unjudged documents), against pytrec_eval's ``judged_docs_only_flag`` on trec_eval's
own collection and on seeded random collections, against ir_measures' expected values (transcribed from its
tests/test_pytrec_eval.py) and ir_measures run live, and hand-computed examples of form_res_rels.c's rules."""

from __future__ import annotations

import math
import random
import warnings

import pytest
import torch

from tests.oracles import read_qrels, read_run
from tests.test_cli import run_cli
from tests.test_trec_measures import PARAMETERS, PYTREC_MEASURES
from tests.trec_fixtures import random_collection, write_dicts
from torch_rankeval import functional as F
from torch_rankeval import trec
from torch_rankeval.trec import Qrels, Run

pytrec_eval = pytest.importorskip("pytrec_eval")


def _pytrec(qrels, run, measures, level=1, judged_only=True):
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, set(measures), relevance_level=level, judged_docs_only_flag=judged_only
    )
    return evaluator.evaluate(run)


def _same(a: float, b: float) -> bool:
    """Equal to 1e-12, NaN equal to NaN (trec_eval's 0 / 0 on a ranking that -J leaves empty)."""
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def _compare_with_pytrec_eval(qrels: dict, run: dict, level: int) -> tuple[int, int]:
    """Every per-query value and summary of every measure pytrec_eval prints (trec_eval 9.0.8), default
    and other parameters, under -J; returns (values compared, values that -J changed)."""
    q, r = Qrels.from_dict(qrels), Run.from_dict(run)
    compared = changed = 0
    for names, theirs in [("all_trec", PYTREC_MEASURES), *((spec, {spec}) for spec in PARAMETERS)]:
        expected = _pytrec(qrels, run, theirs, level)
        plain = _pytrec(qrels, run, theirs, level, judged_only=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the NaN of emptied rankings: checked below
            result = trec.evaluate(q, r, [names], relevance_level=level, trec_eval_version="9.0.8", judged_only=True)
        assert result.qids == sorted(expected, key=lambda s: s.encode())
        first = next(iter(expected.values()))
        for o in result.outputs:
            if o.name == "runid":
                continue
            key = o.trec_name if o.trec_name in first else o.measure.trec_spelling().name
            values = [expected[qid][key] for qid in result.qids]
            if o.name in result.per_query:
                for i, qid in enumerate(result.qids):
                    got = result.per_query[o.name][i].item()
                    assert _same(got, values[i]), (o.trec_name, qid, got, values[i])
                    compared += 1
                    changed += values[i] != plain[qid][key]
            if o.trec_name == "num_q":
                assert result.summary[o.name] == len(values)
            elif o.measure.integer:
                assert result.summary[o.name] == sum(values)
            else:
                assert _same(result.summary[o.name], pytrec_eval.compute_aggregated_measure(key, values)), o.name
    return compared, changed


@pytest.mark.parametrize(
    ("qrels_file", "level", "thin"),
    [("qrels.test", 1, False), ("qrels.rel_level", 1, False), ("qrels.rel_level", 2, False), ("qrels.test", 1, True)],
)
def test_every_measure_matches_pytrec_evals_judged_docs_only_on_trec_evals_collection(
    trec_eval_test_dir, qrels_file, level, thin
):
    """results.test against trec_eval's qrels (qrels.rel_level has negative grades: pooled, unjudged) and, so that
    -J removes many documents, against qrels.test with every third judgment of each query left out (seeded)."""
    qrels = read_qrels(trec_eval_test_dir / qrels_file)
    run = read_run(trec_eval_test_dir / "results.test")
    if thin:
        rng = random.Random(28)
        qrels = {q: {d: g for d, g in docs.items() if rng.random() > 1 / 3} for q, docs in qrels.items()}
    compared, changed = _compare_with_pytrec_eval(qrels, run, level)
    assert compared > 300
    if thin:
        assert changed > 100  # -J changes the values there: the comparison is not the plain evaluation's


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize(("seed", "tie_levels"), [(0, 6), (1, 3), (2, 2), (3, 6)])
def test_every_measure_matches_pytrec_evals_judged_docs_only_on_random_collections(seed, tie_levels, level):
    """Ties broken by docno, documents absent from the qrels and with negative grades, queries that -J leaves
    without documents (interpolated precision is trec_eval's 0 / 0 there: NaN, as pytrec_eval)."""
    compared, changed = _compare_with_pytrec_eval(*random_collection(seed, tie_levels=tie_levels), level)
    assert compared > 2000 and changed > 10


# ir_measures' tests/test_pytrec_eval.py (terrierteam/ir_measures), test_P and test_judged_only.
_QRELS_P = {"0": {"D0": -1, "D1": 1, "D3": 2, "D4": 1}, "1": {"D0": 1, "D3": 0, "D4": -1}}
_RUN_P = {
    "0": {"D0": 0.8, "D2": 0.7, "D1": 0.3, "D3": 0.4, "D4": 0.1},
    "1": {"D1": 0.8, "D0": 0.7, "D3": 0.3, "D2": 0.4},
}


def test_ir_measures_test_p_judged_only_expected_values():
    """test_pytrec_eval.py::test_P: P@4 is 0.5 and 0.25; P(judged_only=True)@4 is 0.75 and 0.25."""
    q, r = Qrels.from_dict(_QRELS_P), Run.from_dict(_RUN_P)
    assert trec.evaluate(q, r, ["P@4"]).per_query["P@4"].tolist() == [0.5, 0.25]
    assert trec.evaluate(q, r, ["P@4"], judged_only=True).per_query["P@4"].tolist() == [0.75, 0.25]
    # the same under ir_measures' preset (its pytrec_eval provider)
    result = trec.evaluate(q, r, ["P@4"], judged_only=True, convention="ir_measures")
    assert result.per_query["P@4"].tolist() == [0.75, 0.25]


_JUDGED_ONLY_MEASURES = ["P@4", "RR", "Rprec", "AP", "AP@4", "nDCG", "nDCG@4", "R@2", "SetP", "SetAP", "SetF"]
_JUDGED_ONLY_MEASURES += ["Success@2", "IPrec@0.5"]


@pytest.mark.parametrize("measure", _JUDGED_ONLY_MEASURES)
def test_ir_measures_test_judged_only_equals_the_run_without_unjudged_documents(measure):
    """test_pytrec_eval.py::test_judged_only: each measure under judged_only on the run equals the measure on
    the run without its unjudged documents (D0, graded -1, and D2, absent), and differs from the plain one."""
    qrels = Qrels.from_dict({"0": {"D0": -1, "D1": 1, "D3": 2, "D4": 1}})
    run = Run.from_dict({"0": {"D0": 0.8, "D2": 0.7, "D1": 0.3, "D3": 0.4, "D4": 0.1}})
    removed = Run.from_dict({"0": {"D1": 0.3, "D3": 0.4, "D4": 0.1}})
    judged = trec.evaluate(qrels, run, [measure], judged_only=True).summary[measure]
    assert judged == trec.evaluate(qrels, removed, [measure]).summary[measure]
    assert judged != trec.evaluate(qrels, run, [measure]).summary[measure]


def test_under_the_ir_measures_preset_matches_ir_measures_judged_only_live():
    """ir_measures.calc_aggregate and iter_calc with judged_only=True (its pytrec_eval provider) on a seeded
    collection, against trec.evaluate(convention="ir_measures", judged_only=True)."""
    ir_measures = pytest.importorskip("ir_measures")
    qrels, run = random_collection(7, tie_levels=3)
    theirs = [ir_measures.parse_measure(m)(judged_only=True) for m in ["P@5", "AP", "nDCG@10", "R@5", "Rprec"]]
    names = ["P@5", "AP", "nDCG@10", "R@5", "Rprec"]
    want = {
        str(m).replace("(judged_only=True)", ""): v for m, v in ir_measures.calc_aggregate(theirs, qrels, run).items()
    }
    result = trec.evaluate(
        Qrels.from_dict(qrels), Run.from_dict(run), names, judged_only=True, convention="ir_measures"
    )
    for name in names:
        assert result.summary[name] == pytest.approx(want[name], rel=1e-12, abs=1e-15), name
    index = {q: i for i, q in enumerate(result.qids)}
    rows = 0
    for metric in ir_measures.iter_calc(theirs, qrels, run):
        name = str(metric.measure).replace("(judged_only=True)", "")
        assert result.per_query[name][index[metric.query_id]].item() == pytest.approx(metric.value, abs=1e-12)
        rows += 1
    assert rows == len(names) * len(result.qids)


def test_ir_measures_spelling_asks_it_of_one_measure():
    """ir_measures' P(judged_only=True)@4 (test_pytrec_eval.py::test_P: 0.75 and 0.25) among other measures, as
    a name and as ir_measures' measure object, in the order given; ir_measures live on the same measures."""
    ir_measures = pytest.importorskip("ir_measures")
    q, r = Qrels.from_dict(_QRELS_P), Run.from_dict(_RUN_P)
    result = trec.evaluate(q, r, ["map", "P(judged_only=True)@4", "P@4", "AP(rel=2, judged_only=True)"])
    assert [o.name for o in result.outputs] == ["map", "P(judged_only=True)@4", "P@4", "AP(rel=2, judged_only=True)"]
    assert list(result.summary) == [o.name for o in result.outputs]
    assert result.per_query["P(judged_only=True)@4"].tolist() == [0.75, 0.25]
    assert result.per_query["P@4"].tolist() == [0.5, 0.25]
    assert (
        result.summary["AP(rel=2, judged_only=True)"]
        == trec.evaluate(q, r, ["AP(rel=2)"], judged_only=True).summary["AP(rel=2)"]
    )
    both = trec.evaluate(q, r, ["P(judged_only=True)@4", "P@4"], judged_only=True).per_query  # -J for all
    assert both["P(judged_only=True)@4"].tolist() == both["P@4"].tolist() == [0.75, 0.25]
    objects = [ir_measures.P(judged_only=True) @ 4, ir_measures.AP, ir_measures.nDCG(judged_only=True) @ 4]
    qrels, run = random_collection(11, tie_levels=3)
    want = {str(m): v for m, v in ir_measures.calc_aggregate(objects, qrels, run).items()}
    got = trec.evaluate(qrels, run, objects, convention="ir_measures").summary
    assert list(got) == ["P(judged_only=True)@4", "AP", "nDCG(judged_only=True)@4"]
    for name, value in want.items():
        assert got[name] == pytest.approx(value, rel=1e-12), name


def test_the_tensor_functions_refuse_the_spelling_and_say_what_to_do():
    with pytest.raises(ValueError, match=r"judged_only=True is not supported here .* mark the unjudged documents"):
        F.evaluate(torch.tensor([[0.5, 0.2]]), torch.tensor([[1, 0]]), ["P(judged_only=True)@2"])


def test_max_docs_cuts_before_unjudged_documents_are_removed():
    """form_res_rels.c keeps the first -M ranked documents, then (with -J) drops the unjudged among them: with
    -M 2 the ranking u1, d1, u2, d2 (u unjudged) keeps d1 only, not d1 and d2."""
    qrels = Qrels.from_dict({"q": {"d1": 1, "d2": 1}})
    run = Run.from_dict({"q": {"u1": 4.0, "d1": 3.0, "u2": 2.0, "d2": 1.0}})
    result = trec.evaluate(qrels, run, ["num_ret", "num_rel_ret", "P.2", "map"], max_docs=2, judged_only=True)
    assert result.summary == {"num_ret": 1, "num_rel_ret": 1, "P_2": 0.5, "map": 0.5}
    result = trec.evaluate(qrels, run, ["num_ret", "num_rel_ret", "P.2", "map", "unj.5"], judged_only=True)
    assert result.summary == {"num_ret": 2, "num_rel_ret": 2, "P_2": 1.0, "map": 1.0, "unj_5": 0.0}


def test_a_query_left_without_documents_scores_as_an_empty_ranking():
    """Every retrieved document unjudged: num_ret 0, P and AP 0 (num_rel still counts the judgments); trec_eval's
    interpolated precision is num_rel_ret / num_ret = 0 / 0 at a level that rounds to 0 relevant documents
    (m_iprec_at_recall.c): NaN there, with a warning, 0 at the other levels (hand-computed, R = 2: lround(0.2 * 2)
    = 0, lround(0.3 * 2) = 1; trec_eval 10.0 -J prints -nan and 0.0000)."""
    qrels = Qrels.from_dict({"a": {"d1": 1, "d2": 1}, "b": {"d1": 1}})
    run = Run.from_dict({"a": {"x1": 2.0, "x2": 1.0}, "b": {"d1": 1.0}})
    names = ["num_ret", "num_rel", "P.2", "map", "iprec_at_recall.0.2,0.3", "11pt_avg"]
    with pytest.warns(RuntimeWarning) as record:
        result = trec.evaluate(qrels, run, names, judged_only=True)
    assert sorted(str(w.message).split(":")[0] for w in record) == ["11pt_avg", "iprec_at_recall_0.20"]
    assert "1 queries have no judged retrieved document under judged_only (trec_eval -J)" in str(record[0].message)
    values = {name: v.tolist() for name, v in result.per_query.items()}
    assert values["num_ret"] == [0, 1] and values["num_rel"] == [2, 1]
    assert values["P_2"] == [0.0, 0.5] and values["map"] == [0.0, 1.0]
    assert math.isnan(values["iprec_at_recall_0.20"][0]) and values["iprec_at_recall_0.20"][1] == 1.0
    assert values["iprec_at_recall_0.30"] == [0.0, 1.0]
    assert math.isnan(values["11pt_avg"][0]) and math.isnan(result.summary["11pt_avg"])
    # the same query and measures under pytrec_eval's -J (trec_eval 9.0.8 rounds level * R + 0.9: only the
    # level 0 is 0 relevant documents there)
    expected = _pytrec(qrels.to_dict(), run.to_dict(), {"iprec_at_recall", "11pt_avg"})
    with pytest.warns(RuntimeWarning):
        old = trec.evaluate(qrels, run, ["iprec_at_recall", "11pt_avg"], judged_only=True, trec_eval_version="9.0.8")
    for name, v in old.per_query.items():
        key = name if name in expected["a"] else "11pt_avg"
        assert all(_same(v[i].item(), expected[q][key]) for i, q in enumerate(old.qids)), name


def test_trec_eval_10_output_with_dash_c_and_dash_j():
    """``trec_eval -J -q -c -m iprec_at_recall -m 11pt_avg -m num_ret -m num_rel -m map -m P.1`` (trec_eval 10.0,
    built from usnistgov/trec_eval at f4253652), its lines transcribed: query 0 retrieves only unjudged documents
    (R = 1: the levels 0 to 0.4 round to 0 relevant documents, NaN), query 1 an unjudged one first, and query 2,
    which -c adds, is empty too under -J (R = 3: the levels 0 and 0.1 are NaN); the means are NaN where one is."""
    qrels = {"0": {"D0": 0, "D1": 1}, "1": {"D0": 1, "D1": 0}, "2": {"D0": 1, "D1": 1, "D2": 1}}
    run = {"0": {"X1": 0.8, "X2": 0.7}, "1": {"D0": 0.5, "Z": 0.9}}
    names = ["num_ret", "num_rel", "map", "iprec_at_recall", "P.1", "11pt_avg"]
    with pytest.warns(RuntimeWarning):
        result = trec.evaluate(qrels, run, names, complete=True, judged_only=True)
    nan = float("nan")
    iprec = {  # query: values at 0.0, 0.1, ..., 1.0
        "0": [nan] * 5 + [0.0] * 6,
        "1": [1.0] * 11,
        "2": [nan] * 2 + [0.0] * 9,
    }
    expected = {
        "num_ret": ([0, 1, 0], 1),
        "num_rel": ([1, 1, 3], 5),
        "map": ([0.0, 1.0, 0.0], 1 / 3),
        "P_1": ([0.0, 1.0, 0.0], 1 / 3),
        "11pt_avg": ([nan, 1.0, nan], nan),
    }
    for i, level in enumerate([f"{x / 10:.2f}" for x in range(11)]):
        values = [iprec[q][i] for q in "012"]
        expected[f"iprec_at_recall_{level}"] = (values, nan if any(map(math.isnan, values)) else sum(values) / 3)
    assert result.qids == ["0", "1", "2"]
    for name, (values, mean) in expected.items():
        assert all(_same(a, b) for a, b in zip(result.per_query[name].tolist(), values)), name
        assert _same(result.summary[name], mean), name


def test_without_unjudged_documents_nothing_changes():
    qrels, run = random_collection(3)
    qrels = {q: {d: max(g, 0) for d, g in docs.items()} for q, docs in qrels.items()}
    run = {q: {d: s for d, s in docs.items() if d in qrels.get(q, {})} for q, docs in run.items()}
    run = {q: docs for q, docs in run.items() if docs}
    q, r = Qrels.from_dict(qrels), Run.from_dict(run)
    plain, judged = trec.evaluate(q, r, ["all_trec"]), trec.evaluate(q, r, ["all_trec"], judged_only=True)
    assert plain.summary == judged.summary


def test_the_tensor_route_masks_the_unjudged_documents():
    """On tensors, judged-only is the mask: unjudged documents marked False in ``mask`` leave the ranking (the
    others close up), which is what -J does; the values equal trec.evaluate(judged_only=True)."""
    preds = torch.tensor([[0.9, 0.8, 0.7, 0.6, 0.5], [0.9, 0.8, 0.7, 0.6, 0.5]])
    target = torch.tensor([[0, 1, 0, 1, 0], [1, 0, 0, 0, 1]])
    judged = torch.tensor([[False, True, True, False, True], [True, False, False, True, True]])
    got = F.evaluate(preds, target, ["P@2", "AP", "RR"], mask=judged, reduction="none")
    qrels = {f"q{i}": {f"d{j}": int(target[i, j]) for j in range(5) if judged[i, j]} for i in range(2)}
    run = {f"q{i}": {f"d{j}": float(preds[i, j]) for j in range(5)} for i in range(2)}
    want = trec.evaluate(Qrels.from_dict(qrels), Run.from_dict(run), ["P@2", "AP", "RR"], judged_only=True)
    for name in ["P@2", "AP", "RR"]:
        torch.testing.assert_close(got[name].double(), want.per_query[name])
    # hand-computed: q0 keeps d1 (rel), d2, d4: P@2 = 1/2, AP = 1, RR = 1; q1 keeps d0 (rel), d3, d4 (rel):
    # P@2 = 1/2, AP = (1 + 2/3) / 2, RR = 1
    torch.testing.assert_close(got["AP"], torch.tensor([1.0, 5 / 6]))


def test_command_line_dash_j(tmp_path):
    qrels, run = random_collection(5)
    qrels_path, run_path = write_dicts(tmp_path, qrels, run)
    code, out = run_cli("evaluate", qrels_path, run_path, "-m", "map", "-m", "P.5", "-J", "-q", "--format", "trec")
    assert code == 0
    want = trec.evaluate(qrels_path, run_path, ["map", "P.5"], judged_only=True)
    assert out.splitlines() == want.trec_lines(per_query=True)
    plain = trec.evaluate(qrels_path, run_path, ["map", "P.5"])
    assert want.summary != plain.summary
    code, long = run_cli(
        "evaluate", qrels_path, run_path, "-m", "map", "-m", "P.5", "--judged-only", "--format", "trec"
    )
    assert code == 0 and long.splitlines() == want.trec_lines()


def test_bad_judged_only():
    q, r = Qrels.from_dict({"q": {"d": 1}}), Run.from_dict({"q": {"d": 1.0}})
    with pytest.raises(TypeError, match=r"judged_only must be a bool \(trec_eval's -J\), got 1"):
        trec.evaluate(q, r, ["map"], judged_only=1)


def test_intent_aware_measures_refuse_judged_only(tmp_path):
    path = tmp_path / "diversity.qrels"
    path.write_text("q1 1 d1 1\nq1 2 d2 1\n")
    run = Run.from_dict({"q1": {"d1": 2.0, "d2": 1.0}})
    with pytest.raises(ValueError, match=r"judged_only \(trec_eval's -J\) applies to ad-hoc measures"):
        trec.evaluate(path, run, ["alpha_nDCG@5"], judged_only=True)
