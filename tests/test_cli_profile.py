"""The ``profile`` subcommand on tiny TREC files written here: hand-computed profile under trec_eval's
tie order, per-query nDCG against pytrec_eval and trec_eval's own output, the core install (no scipy,
no matplotlib) and bad input."""

from __future__ import annotations

import io
import json
import math
import sys

import pytest

from tests.oracles import read_expected
from torch_rankeval.cli import main

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


def profile(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["profile", *map(str, argv)], out), out.getvalue()


@pytest.fixture
def files(tmp_path):
    (tmp_path / "qrels").write_text(QRELS)
    (tmp_path / "run").write_text(RUN)
    return str(tmp_path / "qrels"), str(tmp_path / "run")


def test_json_profile_matches_hand_values_and_pytrec_eval(files, capsys, tmp_path):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    plot = tmp_path / "profile.png"
    status, text = profile(*files, "-k", "6", "--bands", "1-2,3-5", "--format", "json", "--plot", plot)
    assert status == 0 and capsys.readouterr().err == ""
    out = json.loads(text)
    profile_ = out["profile"]
    # ranked grades: q1 2, 1, 0, 0, 0, 0 ; q2 1, 2, 0 ; ideal: q1 3, 2, 1, 0 ; q2 2, 1
    assert profile_["n_queries"] == 2 and profile_["count"] == [2, 2, 2, 1, 1, 1]
    assert profile_["relevance"] == [1.5, 1.5, 0.0, 0.0, 0.0, 0.0]
    # d5's grade -1 means "not judged" (trec_eval), so q1's ideal holds 4 judged documents
    assert profile_["ideal_count"] == [2, 2, 1, 1, 0, 0]
    assert profile_["ideal_relevance"] == [2.5, 1.5, 1.0, 0.0, None, None]  # no query reaches 5: NaN -> null
    assert profile_["dcg_contribution"][1] == pytest.approx(1.5 / math.log2(3))  # linear gain (trec_eval)
    (inv,) = out["inversions"]
    assert inv["name"] == "inversion@1-2_vs_3-5" and inv["effect"] == pytest.approx(-1.5) and not inv["inverted"]
    assert inv["p_value"] is not None  # scipy is installed here: the t-test ran

    qrels = {"q1": {"d1": 2, "d2": 0, "d3": 1, "d4": 3, "d5": -1}, "q2": {"a": 1, "b": 2}}
    run = {
        "q1": {"d1": 0.9, "d2": 0.5, "d3": 0.5, "d5": 0.4, "d9": 0.3, "d6": 0.1},
        "q2": {"b": 0.2, "a": 0.8, "c": 0.1},
    }
    expected = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.6"}).evaluate(run)
    per_query = out["per_query"]
    assert per_query["key"] == "ndcg@6" and per_query["n_queries"] == 2
    for qid, value in per_query["worst"]:
        assert value == pytest.approx(expected[qid]["ndcg_cut_6"], abs=1e-6)
    assert [q for q, _ in per_query["worst"]] == sorted(expected, key=lambda q: expected[q]["ndcg_cut_6"])
    assert plot.read_bytes().startswith(b"\x89PNG") and plot.stat().st_size > 1000


def test_positions_beyond_the_longest_list_are_not_allocated(files, capsys):
    """-k larger than every list (run and judged) profiles the longest list, with a note: -k 10**7 neither
    allocates 10**7 positions per query nor changes any value."""
    status, text = profile(*files, "-k", 10**7, "--format", "json")
    err = capsys.readouterr().err
    assert status == 0
    assert (
        err == "torch-rankeval: note: -k 10000000 is more than the longest list (6 documents); profiling 6 positions\n"
    )
    clamped = json.loads(text)
    assert len(clamped["profile"]["relevance"]) == 6 and clamped["per_query"]["key"] == "ndcg@6"
    status, text = profile(*files, "-k", "6", "--format", "json")
    assert status == 0 and json.loads(text) == clamped


def test_text_output_flags_an_inversion_and_saves_the_histogram(files, capsys, tmp_path):
    qrels, _ = files
    inverted = tmp_path / "inverted"
    inverted.write_text("q1 Q0 d6 1 0.9 t\nq1 Q0 d2 2 0.8 t\nq1 Q0 d1 3 0.7 t\nq1 Q0 d3 4 0.6 t\n")
    hist = tmp_path / "hist.svg"
    status, text = profile(qrels, inverted, "-k", "4", "--bands", "1-2,3-4", "--hist", hist, "--gain", "exp2")
    assert status == 0
    assert "1 queries, 4 positions" in text
    assert "1-2 vs 3-4" in text and "INVERTED" in text and "effect=+1.5000" in text  # (0 + 0) / 2 vs (2 + 1) / 2
    assert "q1" in text.split("worst queries:")[1]
    assert "<svg" in hist.read_text()


def test_trec_eval_collection_ndcg_cut_10_per_query(trec_eval_test_dir, capsys):
    d = trec_eval_test_dir
    status, text = profile(d / "qrels.test", d / "results.test", "--worst", "1000", "--format", "json")
    assert status == 0
    out = json.loads(text)
    expected = read_expected(d / "out.test.aq")
    worst = dict(out["per_query"]["worst"])
    assert set(worst) == {q for q in expected if q != "all"}
    for qid, value in worst.items():
        assert f"{value:.4f}" == expected[qid]["ndcg_cut_10"], qid


def test_core_install_without_scipy_skips_the_t_test_with_a_note(files, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy", None)  # import scipy -> ImportError, find_spec -> ValueError
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "scipy" else object())
    status, text = profile(*files, "-k", "5", "--bands", "1-2,3-5", "--format", "json")
    assert status == 0
    assert "scipy is not installed, the inversions' t-test is skipped" in capsys.readouterr().err
    (inv,) = json.loads(text)["inversions"]
    assert inv["p_value"] is None and inv["effect"] == pytest.approx(-1.5)  # the effect size stays


def test_core_install_without_matplotlib(files, capsys, tmp_path, monkeypatch):
    """No matplotlib: the profile prints; only --plot / --hist fail, with one line, before any work."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.backend_bases", None)
    status, text = profile(*files, "-k", "3")
    assert status == 0 and "2 queries, 3 positions" in text
    for option in ("--plot", "--hist"):
        status, text = profile(*files, option, tmp_path / "x.png")
        err = capsys.readouterr().err
        assert status == 2 and text == "" and not (tmp_path / "x.png").exists()
        assert err == f"torch-rankeval profile: error: {option} needs matplotlib: pip install 'torch-rankeval[plot]'\n"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["missing-qrels", "RUN"], "No such file"),
        (["QRELS", "RUN", "-k", "0"], "-k/--positions must be 1 or more, got 0"),
        (["QRELS", "RUN", "-l", "0"], "-l/--relevance-level must be 1 or more"),
        (["QRELS", "RUN", "--bands", "5-3"], "first <= last"),
        (["QRELS", "RUN", "-k", "3", "--bands", "1-3,4-5"], "beyond the 3 profiled positions"),
        (["QRELS", "RUN", "--bands", "1-3,20-30"], "--bands: band 20-30 goes beyond the longest list (6 documents)"),
        (["QRELS", "RUN", "--bands", "1-x"], "band '1-x' is not valid"),
        (["QRELS", "BAD", "-l", "1"], "line 1: expected at least 6 fields 'qid Q0 docno rank score tag'"),
    ],
)
def test_bad_input_exits_2_with_a_message(files, tmp_path, capsys, argv, message):
    qrels, run = files
    bad = tmp_path / "bad"
    bad.write_text("q1 d1 0.5\n")
    argv = [{"QRELS": qrels, "RUN": run, "BAD": str(bad)}.get(a, a) for a in argv]
    assert profile(*argv) == (2, "")
    err = capsys.readouterr().err
    assert err.startswith("torch-rankeval profile: error:") and message in err and len(err.splitlines()) == 1


def test_profile_in_length_buckets_equals_one_padded_batch(files, monkeypatch):
    """The profile reads the run in length buckets (memory follows the documents); forcing every query
    into its own bucket gives the same JSON, worst queries and per-position means included."""
    from torch_rankeval.trec import join

    status, one_batch = profile(*files, "-k", "6", "--format", "json")
    monkeypatch.setattr(join, "PADDING_FACTOR", 0.0)
    status_b, bucketed = profile(*files, "-k", "6", "--format", "json")
    assert status == status_b == 0
    assert json.loads(bucketed) == json.loads(one_batch)
