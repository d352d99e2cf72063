"""The ``profile`` subcommand through ``run(parsed_args)`` on tiny TREC files written here: hand-computed
profile under trec_eval's tie order, per-query nDCG against pytrec_eval and trec_eval's own output."""

from __future__ import annotations

import argparse
import json
import math

import pytest

from tests.oracles import read_expected
from torch_rankeval.cli import profile as cli_profile

QRELS = """\
q1 0 d1 2
q1 0 d2 0
q1 0 d3 1
q1 0 d4 3
q1 0 d5 -1
q2 0 a 1
q2 0 b 2
q3 0 x 1
"""
# q1: d2 and d3 tie at 0.5 (trec_eval: docno descending, so d3 first); d4 (grade 3) is not retrieved;
# d9 and d6 are unjudged. q2 is ranked a, b, c. q9 has no qrels and q3 no run: both are left out.
RUN = """\
q1 Q0 d1 1 0.9 t
q1 Q0 d2 2 0.5 t
q1 Q0 d3 3 0.5 t
q1 Q0 d5 4 0.4 t
q1 Q0 d9 5 0.3 t
q1 Q0 d6 6 0.1 t
q2 Q0 b 1 0.2 t
q2 Q0 a 2 0.8 t
q2 Q0 c 3 0.1 t
q9 Q0 z 1 1.0 t
"""


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="torch-rankeval")
    cli_profile.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["profile", *argv])


@pytest.fixture
def files(tmp_path):
    (tmp_path / "qrels").write_text(QRELS)
    (tmp_path / "run").write_text(RUN)
    return str(tmp_path / "qrels"), str(tmp_path / "run")


def test_json_profile_matches_hand_values_and_pytrec_eval(files, capsys, tmp_path):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    plot = tmp_path / "profile.png"
    args = _args(*files, "-k", "7", "--bands", "1-2,3-5", "--format", "json", "--plot", str(plot))
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    profile = out["profile"]
    # ranked grades: q1 2, 1, 0, 0, 0, 0 ; q2 1, 2, 0 ; ideal: q1 3, 2, 1, 0 ; q2 2, 1
    assert profile["n_queries"] == 2 and profile["count"] == [2, 2, 2, 1, 1, 1, 0]
    assert profile["relevance"] == [1.5, 1.5, 0.0, 0.0, 0.0, 0.0, None]  # NaN -> null
    # d5's grade -1 means "not judged" (trec_eval), so q1's ideal holds 4 judged documents
    assert profile["ideal_count"] == [2, 2, 1, 1, 0, 0, 0]
    assert profile["ideal_relevance"][:5] == [2.5, 1.5, 1.0, 0.0, None]
    assert profile["dcg_contribution"][1] == pytest.approx(1.5 / math.log2(3))  # linear gain (trec_eval)
    (inv,) = out["inversions"]
    assert inv["name"] == "inversion@1-2_vs_3-5" and inv["effect"] == pytest.approx(-1.5) and not inv["inverted"]

    qrels = {"q1": {"d1": 2, "d2": 0, "d3": 1, "d4": 3, "d5": -1}, "q2": {"a": 1, "b": 2}}
    run = {"q1": {"d1": 0.9, "d2": 0.5, "d3": 0.5, "d5": 0.4, "d9": 0.3, "d6": 0.1}, "q2": {"b": 0.2, "a": 0.8, "c": 0.1}}
    expected = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.7"}).evaluate(run)
    per_query = out["per_query"]
    assert per_query["key"] == "ndcg@7" and per_query["n_queries"] == 2
    for qid, value in per_query["worst"]:
        assert value == pytest.approx(expected[qid]["ndcg_cut_7"], abs=1e-6)
    assert [q for q, _ in per_query["worst"]] == sorted(expected, key=lambda q: expected[q]["ndcg_cut_7"])
    assert plot.stat().st_size > 1000


def test_text_output_flags_an_inversion_and_saves_the_histogram(files, capsys, tmp_path):
    qrels, _ = files
    inverted = tmp_path / "inverted"
    inverted.write_text("q1 Q0 d6 1 0.9 t\nq1 Q0 d2 2 0.8 t\nq1 Q0 d1 3 0.7 t\nq1 Q0 d3 4 0.6 t\n")
    hist = tmp_path / "hist.svg"
    args = _args(qrels, str(inverted), "-k", "4", "--bands", "1-2,3-4", "--hist", str(hist), "--gain", "exp2")
    assert cli_profile.run(args) == 0
    text = capsys.readouterr().out
    assert "1 queries, 4 positions" in text
    assert "1-2 vs 3-4" in text and "INVERTED" in text and "effect=+1.5000" in text  # (0 + 0) / 2 vs (2 + 1) / 2
    assert "q1" in text.split("worst queries:")[1]
    assert "<svg" in hist.read_text()


def test_trec_eval_collection_ndcg_cut_10_per_query(trec_eval_test_dir, capsys):
    d = trec_eval_test_dir
    args = _args(str(d / "qrels.test"), str(d / "results.test"), "--worst", "1000", "--format", "json")
    assert cli_profile.run(args) == 0
    out = json.loads(capsys.readouterr().out)
    expected = read_expected(d / "out.test.aq")
    worst = dict(out["per_query"]["worst"])
    assert set(worst) == {q for q in expected if q != "all"}
    for qid, value in worst.items():
        assert f"{value:.4f}" == expected[qid]["ndcg_cut_10"], qid


@pytest.mark.parametrize(
    "argv, message",
    [
        (["missing-qrels", "RUN"], "No such file"),
        (["QRELS", "RUN", "-k", "0"], "--positions must be a positive int"),
        (["QRELS", "RUN", "--bands", "5-3"], "first <= last"),
        (["QRELS", "RUN", "--bands", "1-3,20-30"], "beyond the 10 profiled positions"),
        (["QRELS", "BAD", "-l", "1"], "line 1: expected at least 6 fields 'qid Q0 docno rank score tag'"),
    ],
)
def test_bad_input_exits_2_with_a_message(files, tmp_path, capsys, argv, message):
    qrels, run = files
    bad = tmp_path / "bad"
    bad.write_text("q1 d1 0.5\n")
    argv = [{"QRELS": qrels, "RUN": run, "BAD": str(bad)}.get(a, a) for a in argv]
    assert cli_profile.run(_args(*argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("torch-rankeval profile: error:") and message in err
