"""The torch-rankeval command line: trec_eval's expected outputs line for line, the other formats,
bad inputs (a message, never a traceback) and `compare` against the stats functions."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest
import torch

from tests.conftest import REPO
from tests.trec_fixtures import random_collection, write_dicts
from torch_rankeval import stats, trec
from torch_rankeval.cli import COMMANDS, main


def run_cli(*argv) -> tuple[int, str]:
    out = io.StringIO()
    return main([str(a) for a in argv], out), out.getvalue()


def _supported_lines(expected_path, produced: str) -> list[str]:
    """The expected file's lines for the measures we print (trec_eval prints more measures)."""
    names = {line.split("\t")[0].strip() for line in produced.splitlines()}
    return [line for line in expected_path.read_text().splitlines() if line.split("\t")[0].strip() in names]


@pytest.mark.parametrize(
    ("expected", "args", "n_lines"),
    [
        ("out.test", ["qrels.test", "results.test"], 18),  # official measures
        ("out.test.a", ["qrels.test", "results.test", "-m", "all_trec"], 54),  # incl. rbp, rbp_resid, unj_5/10/20
        ("out.test.aq", ["qrels.test", "results.test", "-m", "all_trec", "-q"], 207),
        ("out.test.aqc", ["qrels.test", "results.trunc", "-m", "all_trec", "-q", "-c"], 207),
        ("out.test.aql", ["qrels.rel_level", "results.test", "-m", "all_trec", "-q", "-l", "2"], 207),
        (
            "out.test.meas_params",
            [
                "qrels.test",
                "results.test",
                "-q",
                "-m",
                "P.5,7,3",
                "-m",
                "recall.20,2000",
                "-m",
                "ndcg.1=3,2=9,4=4.5",
                "-m",
                "ndcg_cut.10,20,23.4",
                "-m",
                "success.2,5,20",
            ],
            48,
        ),
        ("out.comment.test", ["qrels.comment.test", "results.comment.test"], 18),
    ],
)
def test_trec_format_reproduces_trec_eval_line_for_line(trec_eval_test_dir, expected, args, n_lines):
    d = trec_eval_test_dir
    paths = [d / a if (d / a).exists() else a for a in args]
    status, produced = run_cli("evaluate", *paths, "--format", "trec")
    assert status == 0
    assert produced.splitlines() == _supported_lines(d / expected, produced)
    assert len(produced.splitlines()) == n_lines


def test_formats_agree(tmp_path):
    qrels_path, run_path = write_dicts(tmp_path, *random_collection(0))
    args = ["evaluate", qrels_path, run_path, "-m", "map", "-m", "nDCG@10", "-m", "num_rel", "-q"]
    status, text = run_cli(*args, "--format", "json")
    assert status == 0
    data = json.loads(text)
    result = trec.evaluate(qrels_path, run_path, ["map", "nDCG@10", "num_rel"])
    run = data["runs"][0]
    assert data["measures"] == ["map", "nDCG@10", "num_rel"] and run["num_q"] == len(result.qids)
    assert run["summary"] == result.summary
    assert run["per_query"][result.qids[0]]["nDCG@10"] == result.per_query["nDCG@10"][0].item()

    _, text = run_cli(*args, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {r["measure"] for r in rows} == {"map", "nDCG@10", "num_rel"}
    by_key = {(r["qid"], r["measure"]): r["value"] for r in rows}
    assert float(by_key[("all", "map")]) == result.summary["map"]
    assert float(by_key[(result.qids[1], "map")]) == result.per_query["map"][1].item()

    _, text = run_cli(*args[:-1])  # table, summary only
    header, row = text.splitlines()
    assert header.split() == ["run", "map", "nDCG@10", "num_rel"]
    assert row.split()[1:] == [
        f"{result.summary['map']:.4f}",
        f"{result.summary['nDCG@10']:.4f}",
        str(result.summary["num_rel"]),
    ]

    _, text = run_cli(*args, "--format", "trec")
    assert text.splitlines()[0].startswith("num_rel               \t")  # trec_eval's order, not ours
    assert any(line.startswith("ndcg_cut_10           \tall\t") for line in text.splitlines())


def test_several_runs_in_one_call(tmp_path):
    qrels, run = random_collection(1)
    qrels_path, run_path = write_dicts(tmp_path, qrels, run, tag="first")
    other = tmp_path / "other.txt"
    trec.write_run(other, {q: {d: -s for d, s in docs.items()} for q, docs in run.items()}, tag="second")
    _, text = run_cli("evaluate", qrels_path, run_path, other, "-m", "runid", "-m", "map", "--format", "trec")
    lines = text.splitlines()
    assert [line.split("\t")[2] for line in lines if line.startswith("runid")] == ["first", "second"]
    _, table = run_cli("evaluate", qrels_path, run_path, other, "-m", "map")
    assert len(table.splitlines()) == 3


@pytest.mark.parametrize(
    ("qrels_text", "run_text", "message"),
    [
        ("q1 0 d1 1\n", "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2\n", "run.txt, line 2: expected at least 6 fields"),
        ("q1 0 d1 1\n", "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 x0.4 t\n", "run.txt, line 2: score 'x0.4' is not a number"),
        ("q1 0 d1 1\n", "q1 Q0 d1 1 0.5 t\nq1 Q0 d1 2 0.4 t\n", "run.txt, lines 1 and 2: document 'd1' appears twice"),
        ("", "q1 Q0 d1 1 0.5 t\n", "qrels.txt: no qrels lines"),
        ("q1 0 d1 1\n", "", "run.txt: no run lines"),
        ("q1 0 d1 1\n", "q7 Q0 d1 1 0.5 t\n", "has no query in common with"),
        ("q1 0 d1 one\n", "q1 Q0 d1 1 0.5 t\n", "qrels.txt, line 1: relevance 'one' is not an integer grade"),
    ],
)
def test_bad_files_exit_with_a_message(tmp_path, capsys, qrels_text, run_text, message):
    (tmp_path / "qrels.txt").write_text(qrels_text)
    (tmp_path / "run.txt").write_text(run_text)
    status, _ = run_cli("evaluate", tmp_path / "qrels.txt", tmp_path / "run.txt")
    err = capsys.readouterr().err
    assert status == 1
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bad_measure_and_missing_file(tmp_path, capsys):
    qrels_path, run_path = write_dicts(tmp_path, *random_collection(2))
    assert run_cli("evaluate", qrels_path, run_path, "-m", "ndcg_cutt.10")[0] == 1
    assert "Did you mean 'ndcg_cut'" in capsys.readouterr().err
    assert run_cli("evaluate", qrels_path, tmp_path / "missing.txt")[0] == 1
    assert "missing.txt: cannot open" in capsys.readouterr().err
    assert run_cli("evaluate", qrels_path, run_path, "-l", "0")[0] == 1
    assert "-l/--level must be 1 or more" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert run_cli("evaluate", qrels_path, run_path, "--device", "cuda")[0] == 1
        assert "CUDA is not available" in capsys.readouterr().err


def test_module_entry_point_and_console_script(tmp_path):
    """`python -m torch_rankeval` runs the CLI, and pyproject's console script points at it."""
    qrels_path, run_path = write_dicts(tmp_path, *random_collection(3))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch_rankeval",
            "evaluate",
            str(qrels_path),
            str(run_path),
            "-m",
            "P.5",
            "--format",
            "trec",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0 and done.stdout.startswith("P_5")
    bad = subprocess.run(
        [sys.executable, "-m", "torch_rankeval", "evaluate", str(qrels_path), str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    tomllib = pytest.importorskip("tomllib")
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["torch-rankeval"] == "torch_rankeval.cli:main"


def test_stdin_run(tmp_path):
    qrels_path, run_path = write_dicts(tmp_path, *random_collection(4))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "torch_rankeval", "evaluate", str(qrels_path), "-", "-m", "map", "--format", "trec"],
        input=run_path.read_text(),
        capture_output=True,
        text=True,
        env=env,
    )
    expected = trec.evaluate(qrels_path, run_path, ["map"]).summary["map"]
    assert done.stdout.split() == ["map", "all", f"{expected:.4f}"]


def test_commands_are_a_table():
    assert [c.name for c in COMMANDS] == ["evaluate", "compare"]


def test_subcommand_modules_plug_in(monkeypatch, capsys):
    """A module with add_parser(subparsers) that sets func becomes a subcommand (e.g. profile)."""
    import types

    from torch_rankeval import cli

    module = types.ModuleType("fake_subcommand")

    def add_parser(sub):
        p = sub.add_parser("hello", help="say hello")
        p.add_argument("name")
        p.set_defaults(func=lambda args: print(f"hello {args.name}") or 3)
        return p

    module.add_parser = add_parser
    monkeypatch.setitem(sys.modules, "fake_subcommand", module)
    monkeypatch.setattr(cli, "SUBCOMMAND_MODULES", ["fake_subcommand", "module_that_is_not_installed"])
    assert main(["hello", "world"]) == 3
    assert capsys.readouterr().out == "hello world\n"


# ----------------------------------------------------------------------------- compare
def _three_runs(tmp_path):
    qrels, run = random_collection(8, n_queries=60, tie_levels=40)
    qrels_path, a = write_dicts(tmp_path, qrels, run, tag="a")
    rng = torch.Generator().manual_seed(0)
    better = {}
    for q, docs in run.items():  # b: nudge judged relevant documents up
        better[q] = {
            d: s + (20 if qrels.get(q, {}).get(d, 0) >= 1 else 0) + 0.01 * torch.rand(1, generator=rng).item()
            for d, s in docs.items()
        }
    b, c = tmp_path / "b.txt", tmp_path / "c.txt"
    trec.write_run(b, better, tag="b")
    trec.write_run(c, run, tag="c")  # identical to a
    return qrels_path, [a, b, c]


def test_compare_json_matches_stats_on_per_query_values(tmp_path):
    qrels_path, runs = _three_runs(tmp_path)
    status, text = run_cli(
        "compare", qrels_path, *runs, "-m", "map", "-m", "P@5", "--format", "json", "--resamples", "2000"
    )
    assert status == 0
    data = json.loads(text)
    evals = [trec.evaluate(qrels_path, r, ["map", "P@5"], complete=True) for r in runs]
    answered = evals[0].retrieved | evals[1].retrieved | evals[2].retrieved
    assert data["queries"] == int(answered.sum())
    for cmp in data["comparisons"]:
        i, j = "abc".index(cmp["label_a"]), "abc".index(cmp["label_b"])
        x, y = evals[j].per_query[cmp["measure"]][answered], evals[i].per_query[cmp["measure"]][answered]
        assert cmp["mean_a"] == pytest.approx(y.mean().item()) and cmp["difference"] == pytest.approx(
            (x - y).mean().item()
        )
        assert cmp["t_pvalue"] == pytest.approx(stats.paired_t_test(x, y).pvalue.item())
        assert cmp["randomization_pvalue"] == pytest.approx(
            stats.randomization_test(x, y, n_resamples=2000).pvalue.item()
        )
        low, high = stats.bootstrap_ci(x, y, n_resamples=2000)
        assert (cmp["ci_low"], cmp["ci_high"]) == pytest.approx((low.item(), high.item()))
    by_pair = {(c["measure"], c["label_a"], c["label_b"]): c for c in data["comparisons"]}
    for m in ("map", "P@5"):
        raw = torch.tensor(
            [by_pair[(m, a, b)]["randomization_pvalue"] for a, b in (("a", "b"), ("a", "c"), ("b", "c"))]
        )
        adj = [by_pair[(m, a, b)]["pvalue_adjusted"] for a, b in (("a", "b"), ("a", "c"), ("b", "c"))]
        assert adj == pytest.approx(stats.holm(raw).tolist())
        assert by_pair[(m, "a", "b")]["significant"] and by_pair[(m, "a", "b")]["winner"].endswith("b.txt")
        identical = by_pair[(m, "a", "c")]
        assert identical["difference"] == 0 and identical["t_pvalue"] == 1 and not identical["significant"]


def test_compare_table_marks_wins(tmp_path):
    qrels_path, runs = _three_runs(tmp_path)
    status, text = run_cli(
        "compare", qrels_path, *runs, "-m", "map", "--correction", "bonferroni", "--resamples", "1000"
    )
    assert status == 0
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line[:1] in "abc" and len(line.split()) == 3}
    assert rows["b"][2].endswith("^ac") and "^" not in rows["a"][2] and "^" not in rows["c"][2]
    assert "bonferroni correction" in text


def test_compare_without_scipy_skips_the_t_test(tmp_path, monkeypatch, capsys):
    qrels_path, runs = _three_runs(tmp_path)
    monkeypatch.setitem(sys.modules, "scipy", None)  # import scipy -> ImportError
    status, text = run_cli("compare", qrels_path, *runs[:2], "-m", "map", "--format", "json", "--resamples", "500")
    assert status == 0
    assert json.loads(text)["comparisons"][0]["t_pvalue"] is None
    assert "t-test is skipped" in capsys.readouterr().err
    assert run_cli("compare", qrels_path, *runs[:2], "--test", "t")[0] == 1
    assert "needs scipy" in capsys.readouterr().err
