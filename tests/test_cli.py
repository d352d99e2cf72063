"""The torch-rankeval command line: trec_eval's expected outputs line for line, the other formats,
tables that fit the terminal, and `compare` against the stats functions. Bad inputs, exit codes
and start-up cost: tests/test_cli_failures.py."""

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
from torch_rankeval.cli import EXIT_BAD_INPUT, SUBCOMMANDS, main


def run_cli(*argv) -> tuple[int, str]:
    out = io.StringIO()
    return main([str(a) for a in argv], out), out.getvalue()


def _pending(name: str) -> bool:
    """Whether a printed measure name belongs to a trec_eval measure whose family is not registered yet
    (trec_eval 10.0's rbp, rbp_resid and unj_*: another branch's): its place is reserved, its lines not printed."""
    from torch_rankeval.measures.registry import TREC_NAMES

    inactive = [t.name for t in TREC_NAMES if not t.active]
    return any(name == t or name.startswith(t + "_") for t in inactive)


def _expected_lines(expected_path) -> tuple[list[str], int, set[str]]:
    """The expected file's lines less those of pending measures, the file's number of lines, and
    the names of the pending lines."""
    lines = expected_path.read_text().splitlines()
    names = [line.split("\t")[0].strip() for line in lines]
    kept = [line for line, name in zip(lines, names) if not _pending(name)]
    return kept, len(lines), {name for name in names if _pending(name)}


MEAS_PARAMS = [  # trec_eval's Makefile: the out.test.meas_params command
    "-m",
    "iprec_at_recall..10,.20,.25,.75,.50",
    "-m",
    "P.5,7,3",
    "-m",
    "recall.20,2000",
    "-m",
    "Rprec_mult.5.0,0.2,0.35",
    "-m",
    "utility.2,-1,0,0",
    "-m",
    "11pt_avg..25,.5,.75",
    "-m",
    "ndcg.1=3,2=9,4=4.5",
    "-m",
    "ndcg_cut.10,20,23.4",
    "-m",
    "success.2,5,20",
]


@pytest.mark.parametrize(
    ("expected", "args", "n_lines"),
    [
        ("out.test", ["qrels.test", "results.test"], 30),  # official measures
        ("out.test.a", ["qrels.test", "results.test", "-m", "all_trec"], 99),
        ("out.test.aq", ["qrels.test", "results.test", "-m", "all_trec", "-q"], 387),
        ("out.test.aqc", ["qrels.test", "results.trunc", "-m", "all_trec", "-q", "-c"], 387),
        ("out.test.aqcM", ["qrels.test", "results.trunc", "-m", "all_trec", "-q", "-c", "-M", "100"], 387),
        (
            "out.test.aql",
            ["qrels.rel_level", "results.test", "-m", "all_trec", "-m", "relstring.20", "-q", "-l", "2"],
            387,
        ),
        ("out.test.meas_params", ["qrels.test", "results.test", "-q", *MEAS_PARAMS], 88),
        ("out.comment.test", ["qrels.comment.test", "results.comment.test"], 30),
        # trec_eval 9.0.8 (pytrec_eval's): other recall-level rounding, no rbp/unj, -c adds no per-query lines
        ("out.test.v9.0.8", ["qrels.test", "results.test"], 30),
        ("out.test.a.v9.0.8", ["qrels.test", "results.test", "-m", "all_trec"], 94),
        ("out.test.aq.v9.0.8", ["qrels.test", "results.test", "-m", "all_trec", "-q"], 367),
        ("out.test.aqc.v9.0.8", ["qrels.test", "results.trunc", "-m", "all_trec", "-q", "-c"], 276),
        (
            "out.test.aql.v9.0.8",
            ["qrels.rel_level", "results.test", "-m", "all_trec", "-m", "relstring.20", "-q", "-l", "2"],
            367,
        ),
        ("out.test.meas_params.v9.0.8", ["qrels.test", "results.test", "-q", *MEAS_PARAMS], 88),
    ],
)
def test_trec_format_reproduces_trec_eval_line_for_line(trec_eval_test_dir, expected, args, n_lines):
    """Every line of trec_eval's expected outputs, in order, but those of trec_eval 10.0's rbp,
    rbp_resid and unj_* while their families (another branch's) are not registered."""
    d = trec_eval_test_dir
    paths = [d / a if (d / a).exists() else a for a in args]
    version = ["--trec-eval-version", "9.0.8"] if expected.endswith(".v9.0.8") else []
    status, produced = run_cli("evaluate", *paths, *version, "--format", "trec")
    assert status == 0
    want, total, pending = _expected_lines(d / expected)
    assert produced.splitlines() == want
    assert total == n_lines and pending <= {"rbp", "rbp_resid", "unj_5", "unj_10", "unj_20"}


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
    assert status == EXIT_BAD_INPUT == 2
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bad_measure_and_missing_file(tmp_path, capsys):
    qrels_path, run_path = write_dicts(tmp_path, *random_collection(2))
    assert run_cli("evaluate", qrels_path, run_path, "-m", "ndcg_cutt.10")[0] == 2
    assert "Did you mean 'ndcg_cut'" in capsys.readouterr().err
    assert run_cli("evaluate", qrels_path, tmp_path / "missing.txt")[0] == 2
    assert "missing.txt: cannot open" in capsys.readouterr().err
    assert run_cli("evaluate", qrels_path, run_path, "-l", "0")[0] == 2
    assert "-l/--level must be 1 or more" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert run_cli("evaluate", qrels_path, run_path, "--device", "cuda")[0] == 2
        assert "CUDA is not available" in capsys.readouterr().err


@pytest.mark.slow
def test_module_entry_point_and_console_script(tmp_path):
    """`python -m torch_rankeval` runs the CLI, and pyproject's console script points at it."""
    qrels_path, run_path = write_dicts(tmp_path, *random_collection(3))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(  # noqa: PLW1510 - the status is asserted
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
    bad = subprocess.run(  # noqa: PLW1510 - the status is asserted
        [sys.executable, "-m", "torch_rankeval", "evaluate", str(qrels_path), str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and len(bad.stderr.splitlines()) == 1
    tomllib = pytest.importorskip("tomllib")
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["torch-rankeval"] == "torch_rankeval.cli:main"


def test_stdin_run(tmp_path):
    qrels_path, run_path = write_dicts(tmp_path, *random_collection(4))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(  # noqa: PLW1510 - the status is asserted
        [sys.executable, "-m", "torch_rankeval", "evaluate", str(qrels_path), "-", "-m", "map", "--format", "trec"],
        input=run_path.read_text(),
        capture_output=True,
        text=True,
        env=env,
    )
    expected = trec.evaluate(qrels_path, run_path, ["map"]).summary["map"]
    assert done.stdout.split() == ["map", "all", f"{expected:.4f}"]


def test_subcommands_are_one_table_of_modules():
    """Every subcommand is a module with NAME, HELP, add_arguments and run; the parser is built from the table."""
    assert [m.NAME for m in SUBCOMMANDS] == ["evaluate", "compare", "profile", "measures"]
    assert [m.__name__ for m in SUBCOMMANDS] == [
        f"torch_rankeval.cli.{n}" for n in ("evaluate", "compare", "profile", "measures")
    ]
    for module in SUBCOMMANDS:
        assert isinstance(module.HELP, str) and callable(module.add_arguments) and callable(module.run)
    from torch_rankeval.cli import build_parser

    choices = build_parser()._subparsers._group_actions[0].choices
    assert list(choices) == ["evaluate", "compare", "profile", "measures"]


def test_a_new_subcommand_is_one_entry(monkeypatch, capsys):
    """A module with NAME/HELP/add_arguments/run added to SUBCOMMANDS becomes a subcommand, errors included."""
    import types

    from torch_rankeval import cli

    module = types.ModuleType("hello_subcommand")
    module.NAME, module.HELP = "hello", "say hello"
    module.add_arguments = lambda p: p.add_argument("name")

    def run(args, out):
        if args.name == "nobody":
            raise ValueError("nobody is not a name")
        out.write(f"hello {args.name}\n")
        return 0

    module.run = run
    monkeypatch.setattr(cli, "SUBCOMMANDS", (*cli.SUBCOMMANDS, module))
    assert run_cli("hello", "world") == (0, "hello world\n")
    assert run_cli("hello", "nobody") == (2, "")
    assert capsys.readouterr().err == "torch-rankeval hello: error: nobody is not a name\n"


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
    assert run_cli("compare", qrels_path, *runs[:2], "--test", "t")[0] == 2
    err = capsys.readouterr().err
    assert "--test t needs scipy" in err and len(err.splitlines()) == 1


# ----------------------------------------------------------------------------- tables that fit
def _long_named_runs(tmp_path, n=3):
    qrels, run = random_collection(11, n_queries=12)
    folder = tmp_path / "experiments" / "2024-run-of-a-long-study"
    folder.mkdir(parents=True)
    qrels_path, _ = write_dicts(tmp_path, qrels, run)
    paths = []
    for k in range(n):
        path = folder / f"bm25_plus_cross_encoder_reranker_variant_{k}.txt"
        trec.write_run(path, {q: {d: s * (k + 1) + 0.01 * i for i, (d, s) in enumerate(docs.items())}
                              for q, docs in run.items()}, tag=f"t{k}")  # fmt: skip
        paths.append(path)
    return qrels_path, paths


def test_default_summary_fits_80_columns(tmp_path, monkeypatch):
    """18 official measures, 3 runs with long paths: a row per measure, a column per run (labels, legend)."""
    monkeypatch.setenv("COLUMNS", "80")
    qrels_path, runs = _long_named_runs(tmp_path)
    status, text = run_cli("evaluate", qrels_path, *runs)
    assert status == 0
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80
    assert lines[:3] == [f"{label}: {path.name}" for label, path in zip("abc", runs)] and lines[3] == ""
    assert lines[4].split() == ["measure", "a", "b", "c"]
    table = {line.split()[0]: line.split()[1:] for line in lines[5:]}
    results = [trec.evaluate(qrels_path, r, "official") for r in runs]
    assert list(table) == [o.name for o in results[0].outputs]  # every official measure, in order
    for name, cells in table.items():
        for cell, result in zip(cells, results):
            value = result.printed[name]
            assert cell == (
                value if isinstance(value, str) else str(value) if isinstance(value, int) else f"{value:.4f}"
            )


def test_wide_terminal_and_short_names_keep_a_row_per_run(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "500")  # official: runid and 29 values (bpref, 11 interpolated precisions)
    qrels_path, runs = _long_named_runs(tmp_path)
    short = []
    for k, path in enumerate(runs):
        short.append(path.with_name(f"r{k}.txt"))
        short[-1].write_text(path.read_text())
    status, text = run_cli("evaluate", qrels_path, *short)
    assert status == 0
    header, *rows = text.splitlines()
    assert header.split()[:4] == ["run", "runid", "num_q", "num_ret"] and len(header.split()) == 31
    assert [row.split()[0] for row in rows] == ["r0.txt", "r1.txt", "r2.txt"]  # base names, not paths
    monkeypatch.setenv("COLUMNS", "80")
    _, text = run_cli("evaluate", qrels_path, *short)
    assert text.splitlines()[0].split() == ["measure", "r0.txt", "r1.txt", "r2.txt"]  # no legend needed


def test_per_query_table_wraps_its_measures(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    qrels_path, runs = _long_named_runs(tmp_path, n=2)
    status, text = run_cli("evaluate", qrels_path, *runs, "-q")
    assert status == 0
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80 and lines[:2] == [f"a: {runs[0].name}", f"b: {runs[1].name}"]
    cells: dict[tuple[str, str], dict[str, str]] = {}
    header = None
    for line in lines[3:]:
        if not line:
            header = None
        elif header is None:
            header = line.split()
            assert header[:2] == ["run", "qid"]
        else:
            parts = line.split()
            cells.setdefault((parts[0], parts[1]), {}).update(zip(header[2:], parts[2:]))
    for label, path in zip("ab", runs):
        result = trec.evaluate(qrels_path, path, "official")
        for i, qid in enumerate(result.qids):
            row = cells[(label, qid)]
            assert list(row) == list(result.per_query)  # every measure with per-query values, once
            for name, values in result.per_query.items():
                integer = name.startswith("num_")
                expected = str(round(values[i].item())) if integer else f"{values[i].item():.4f}"
                assert row[name] == expected, (qid, name)


def test_compare_table_fits_80_columns(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    qrels_path, runs = _long_named_runs(tmp_path)
    measures = ["map", "P.5", "P.10", "ndcg_cut.10", "ndcg_cut.20", "recip_rank", "Rprec", "recall.100"]
    argv = [a for m in measures for a in ("-m", m)]
    status, text = run_cli("compare", qrels_path, *runs, *argv, "--resamples", "200")
    assert status == 0
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80
    start = lines.index(f"a: {runs[0].name}")
    assert lines[start : start + 4] == [f"{label}: {path.name}" for label, path in zip("abc", runs)] + [""]
    assert lines[start + 4].split() == ["measure", "a", "b", "c"]
    _, json_text = run_cli("compare", qrels_path, *runs, *argv, "--resamples", "200", "--format", "json")
    data = json.loads(json_text)
    table = {line.split()[0]: line.split()[1:] for line in lines[start + 5 : start + 5 + len(data["measures"])]}
    assert list(table) == data["measures"]
    for name, cells in table.items():
        for run, cell in zip(data["runs"], cells):
            assert cell.split("^")[0] == f"{run['means'][name]:.4f}"
