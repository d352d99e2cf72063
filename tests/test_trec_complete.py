"""trec_eval's ``-c`` with ``-l`` and ``-J``: the output of the trec_eval 10.0 and 9.0.8 binaries on a small
seeded collection (tests/data/trec_complete, see its README.md for the commands), line for line.

Two rules the per-query values do not show: under ``-c`` the summary of ``num_rel`` is no sum of the printed
values but a count made again from the qrels, of every judgment graded above 0 in every query of the qrels,
whatever ``-l`` (m_num_rel.c, ``te_calc_avg_num_rel``, the same in 9.0.8 and 10.0); and trec_eval 9.0.8 does
not evaluate the queries ``-c`` adds (they count 0 in its sums), so under ``-J`` they are no 0 / 0 there."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from tests.test_cli import _expected_lines, run_cli
from tests.trec_fixtures import graded_collection
from torch_rankeval import trec
from torch_rankeval.trec import Qrels

DATA = Path(__file__).parent / "data" / "trec_complete"


def test_the_files_are_the_seeded_collection():
    """qrels.txt and run.txt are ``graded_collection(17, n_queries=10, max_docs=10)`` as written by
    ``write_qrels`` / ``write_run`` (tag ``seeded``): q1, q2, q4 and q9 only in the qrels, q7 only in the run."""
    qrels, run = graded_collection(17, n_queries=10, max_docs=10)
    assert trec.read_qrels(DATA / "qrels.txt").to_dict() == qrels
    assert trec.read_run(DATA / "run.txt").to_dict() == run
    assert sorted(set(qrels) - set(run)) == ["q1", "q2", "q4", "q9"] and sorted(set(run) - set(qrels)) == ["q7"]


@pytest.mark.parametrize(
    ("expected", "args"),
    [
        ("out.c.l2", ["-c", "-l", "2", "-m", "all_trec"]),
        ("out.Jc.l2", ["-J", "-c", "-l", "2", "-m", "all_trec"]),
        ("out.qc.l3", ["-q", "-c", "-l", "3", "-m", "num_q", "-m", "num_rel", "-m", "num_rel_ret", "-m", "map"]),
        ("out.c.l2.v9.0.8", ["-c", "-l", "2", "-m", "all_trec"]),
        ("out.Jc.l2.v9.0.8", ["-J", "-c", "-l", "2", "-m", "all_trec"]),
        ("out.qc.l3.v9.0.8", ["-q", "-c", "-l", "3", "-m", "num_q", "-m", "num_rel", "-m", "num_rel_ret", "-m", "map"]),
    ],
)
def test_trec_format_reproduces_the_binaries_with_dash_c(expected, args):
    """Every line of the binaries' output, in order; glibc prints trec_eval's 0 / 0 as ``-nan`` (the sign bit of
    x86's default NaN), which we print as ``nan``: the only text we change in the expected lines."""
    version = ["--trec-eval-version", "9.0.8"] if expected.endswith(".v9.0.8") else []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # -J: the 0 / 0 of the queries left without documents
        status, produced = run_cli(
            "evaluate", DATA / "qrels.txt", DATA / "run.txt", *args, *version, "--format", "trec"
        )
    assert status == 0
    want, _, pending = _expected_lines(DATA / expected)
    assert not pending
    assert produced.splitlines() == [line.replace("-nan", " nan") for line in want]


def test_num_rel_summary_under_complete_counts_the_qrels_grades_above_0():
    """The binaries' num_rel line (13: the judgments graded 1 to 3 of the nine queries of the qrels) under -c at
    every level, while the per-query values count the grades of at least the level; without -c, the sum."""
    qrels, run = DATA / "qrels.txt", DATA / "run.txt"
    graded = Qrels.from_dict(graded_collection(17, n_queries=10, max_docs=10)[0]).relevance
    assert int((graded > 0).sum()) == 13
    for level, per_query_sum in [(1, 13), (2, 7), (3, 2)]:
        r = trec.evaluate(qrels, run, ["num_rel", "NumRel"], complete=True, relevance_level=level)
        assert r.summary == {"num_rel": 13, "NumRel": 13}
        assert int(r.per_query["num_rel"].sum()) == per_query_sum
        old = trec.evaluate(qrels, run, ["num_rel"], complete=True, relevance_level=level, trec_eval_version="9.0.8")
        assert old.summary == {"num_rel": 13}
        # without -c: the sum over the queries of both files (q0, q3, q5, q6, q8)
        plain = trec.evaluate(qrels, run, ["num_rel"], relevance_level=level)
        assert plain.summary["num_rel"] == int(plain.per_query["num_rel"].sum())
    assert trec.evaluate(qrels, run, ["num_rel"], relevance_level=2).summary == {"num_rel": 2}  # q0's d23, q8's d3


def test_peer_presets_keep_their_sum_of_num_rel():
    """The presets keep their peers' aggregation of NumRel, a sum of the per-query values (neither peer has
    trec_eval's -c summary): ranx's over every query of the qrels (13 at grade 1 or more, 7 at 2 or more: not the
    -c count), ir_measures' over the queries the run answers (4, ir_measures run live)."""
    qrels, run = graded_collection(17, n_queries=10, max_docs=10)
    r = trec.evaluate(qrels, run, ["NumRel", "NumRel(rel=2)"], convention="ranx")
    assert r.summary == {"NumRel": 13, "NumRel(rel=2)": 7}
    r = trec.evaluate(qrels, run, ["NumRel"], convention="ir_measures")
    assert r.summary == {"NumRel": 4}
    ir_measures = pytest.importorskip("ir_measures")
    assert ir_measures.calc_aggregate([ir_measures.NumRel], qrels, run) == {ir_measures.NumRel: 4}
