"""The command line under hostile input: every failure is one line on stderr and one exit status (2 for
bad input or usage, 1 for anything else), never a traceback; and a cheap start: ``--help`` and
``--version`` import neither torch, torchmetrics nor scipy."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from torch_rankeval import cli
from torch_rankeval.cli import EXIT_BAD_INPUT, EXIT_BROKEN_PIPE, EXIT_FAILURE, main

QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\nq2 0 d4 1\nq3 0 d5 1\n"
RUN = "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.4 t\nq2 Q0 d3 1 0.9 t\nq2 Q0 d4 2 0.1 t\nq3 Q0 d6 1 0.3 t\n"


@pytest.fixture
def files(tmp_path):
    """Named inputs, good and hostile."""
    paths = {name: tmp_path / name for name in ("qrels", "run", "other")}
    paths["qrels"].write_text(QRELS)
    paths["run"].write_text(RUN)
    paths["other"].write_text(RUN.replace("0.5", "0.05"))
    hostile = {
        "empty": b"",
        "blank": b"   \n\n# only a comment\n",
        "junk": bytes(range(256)) * 8,  # binary: NUL bytes, invalid UTF-8
        "truncated.gz": gzip.compress(RUN.encode())[:20],
        "nan_run": b"q1 Q0 d1 1 nan t\nq1 Q0 d2 2 0.4 t\n",
        "inf_run": b"q1 Q0 d1 1 inf t\nq1 Q0 d2 2 -inf t\n",
        "short_run": b"q1 Q0 d1 1\n",
        "foreign_run": b"q9 Q0 d1 1 0.5 t\n",
        "twice_run": b"q1 Q0 d1 1 0.5 t\nq1 Q0 d1 2 0.4 t\n",
        "bad_grade": b"q1 0 d1 high\n",
        "huge_grade": b"q1 0 d1 99999999999999999999999\n",
    }
    for name, content in hostile.items():
        (tmp_path / name).write_bytes(content)
        paths[name] = tmp_path / name
    (tmp_path / "folder").mkdir()
    paths["folder"] = tmp_path / "folder"
    paths["missing"] = tmp_path / "missing"
    return paths


def run_cli(argv, files) -> tuple[int, str]:
    out = io.StringIO()
    argv = [str(files.get(a, a)) if isinstance(a, str) else str(a) for a in argv]
    return main(argv, out), out.getvalue()


def _one_error_line(err: str, command: str | None) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    prefix = f"torch-rankeval {command}: error: " if command else "torch-rankeval: error: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0]


HOSTILE = [
    # (argv, expected message); QRELS/RUN and the names above are replaced by files
    (["evaluate", "empty", "run"], "empty: no qrels lines"),
    (["evaluate", "qrels", "empty"], "empty: no run lines"),
    (["evaluate", "blank", "run"], "blank: no qrels lines"),
    (["evaluate", "folder", "run"], "folder: cannot open"),
    (["evaluate", "qrels", "folder"], "folder: cannot open"),
    (["evaluate", "qrels", "missing"], "missing: cannot open"),
    (["evaluate", "qrels", "junk"], "junk, line 2: expected at least 6 fields"),  # line 1: NUL to TAB
    (["evaluate", "junk", "run"], "junk, line 2: expected 4 fields"),
    (["evaluate", "qrels", "truncated.gz"], "truncated.gz: cannot read"),
    (["evaluate", "qrels", "nan_run"], "nan_run, line 1: score 'nan' is not a finite number"),
    (["evaluate", "qrels", "inf_run"], "inf_run, line 1: score 'inf' is not a finite number"),
    (["evaluate", "qrels", "short_run"], "short_run, line 1: expected at least 6 fields"),
    (["evaluate", "qrels", "foreign_run"], "has no query in common with"),
    (["evaluate", "qrels", "twice_run"], "document 'd1' appears twice"),
    (["evaluate", "bad_grade", "run"], "relevance 'high' is not an integer grade"),
    (["evaluate", "huge_grade", "run"], "is not an integer grade"),
    (["evaluate", "qrels", "run", "-l", "0"], "-l/--level must be 1 or more"),
    (["evaluate", "qrels", "run", "-l", "-3"], "-l/--level must be 1 or more"),
    (["evaluate", "qrels", "run", "-m", "bogus"], "unknown measure 'bogus'"),
    (["evaluate", "qrels", "run", "-m", "P.0"], "cutoff"),
    (["evaluate", "qrels", "run", "-m", ""], "empty measure name"),
    (["evaluate", "qrels", "run", "-n"], "-n/--no-summary applies to --format trec only"),
    (["evaluate", "qrels", "run", "--device", "meta"], "--device meta holds no data"),
    (["evaluate", "qrels", "run", "--device", "warp9"], "--device 'warp9' is not a device"),
    (["evaluate", "qrels", "run", "--device", "mps:7"], "MPS is not available on this machine"),
    (["compare", "qrels", "run"], "compare needs at least two runs"),
    (["compare", "qrels", "nan_run", "run"], "score 'nan' is not a finite number"),
    (["compare", "qrels", "run", "other", "--alpha", "2"], "--alpha must be in (0, 1)"),
    (["compare", "qrels", "run", "other", "--alpha", "nan"], "--alpha must be in (0, 1)"),
    (["compare", "qrels", "run", "other", "--confidence", "1"], "--confidence must be in (0, 1)"),
    (["compare", "qrels", "run", "other", "--resamples", "0"], "--resamples must be 1 or more"),
    (["compare", "qrels", "run", "other", "--seed", str(2**70)], "seed must be an int between"),
    (["compare", "qrels", "run", "other", "-m", "runid"], "no measure with per-query values"),
    (["compare", "qrels", "foreign_run", "foreign_run"], "has no query in common with"),
    (["profile", "empty", "run"], "empty: no qrels lines"),
    (["profile", "qrels", "junk"], "junk, line 2: expected at least 6 fields"),
    (["profile", "qrels", "inf_run"], "score 'inf' is not a finite number"),
    (["profile", "qrels", "run", "-k", "0"], "-k/--positions must be 1 or more"),
    (["profile", "qrels", "run", "--worst", "-1"], "--worst must be 0 or more"),
    (["profile", "qrels", "run", "--bands", "3-1"], "first <= last"),
    (["profile", "qrels", "run", "--plot", "missing/profile.png"], "the folder"),
    (["profile", "qrels", "run", "--plot", "profile.unknown"], "unknown image format 'unknown'"),
    (["profile", "qrels", "run", "--hist", "folder"], "is a folder"),
    # usage errors (argparse): the same status, one line
    (["evaluate", "qrels", "run", "-l", "x"], "argument -l/--level: invalid int value: 'x'"),
    (["evaluate", "qrels", "run", "--format", "xml"], "argument --format: invalid choice: 'xml'"),
    (["evaluate"], "the following arguments are required: QRELS, RUN"),
    (["profile", "qrels", "run", "-k", "ten"], "argument -k/--positions: invalid int value: 'ten'"),
    (["profile", "qrels", "run", "--convention", "pyterrier"], "argument --convention: invalid choice: 'pyterrier'"),
    (["compare", "qrels", "run", "other", "--test", "wilcoxon"], "argument --test: invalid choice"),
    ([], "the following arguments are required: COMMAND"),
    (["evaluatee"], "invalid choice: 'evaluatee'"),
    (["evaluate", "qrels", "run", "--no-such-option"], "unrecognized arguments: --no-such-option"),
]


@pytest.mark.parametrize(("argv", "message"), HOSTILE, ids=[" ".join(a) or "nothing" for a, _ in HOSTILE])
def test_hostile_input_is_one_line_and_status_2(files, tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)  # relative output paths land in the test's folder
    status, out = run_cli(argv, files)
    err = capsys.readouterr().err
    assert status == EXIT_BAD_INPUT == 2
    assert out == ""
    usage = not argv or argv[0] not in {"evaluate", "compare", "profile"} or "unrecognized" in message
    line = _one_error_line(err, None if usage else argv[0])
    assert message in line
    assert not list(tmp_path.glob("profile.*"))  # a failed command writes no figure


def test_unreadable_file(files, capsys):
    os.chmod(files["run"], 0)
    try:
        if os.access(files["run"], os.R_OK):
            pytest.skip("running as root: permissions do not stop reading")
        status, _ = run_cli(["evaluate", "qrels", "run"], files)
    finally:
        os.chmod(files["run"], 0o644)
    assert status == 2 and "cannot open" in _one_error_line(capsys.readouterr().err, "evaluate")


def test_unexpected_errors_are_one_line_status_1_and_can_show_the_traceback(files, capsys, monkeypatch):
    def broken(args, out):
        raise RuntimeError("kernel exploded\nsecond line")

    monkeypatch.setattr(cli.evaluate, "run", broken)
    monkeypatch.delenv("TORCH_RANKEVAL_TRACEBACK", raising=False)
    assert run_cli(["evaluate", "qrels", "run"], files) == (EXIT_FAILURE, "")
    line = capsys.readouterr().err.splitlines()
    expected = (
        "torch-rankeval evaluate: internal error: RuntimeError: kernel exploded second line "
        "(set TORCH_RANKEVAL_TRACEBACK=1 for the traceback, and please report it)"
    )
    assert line == [expected]
    monkeypatch.setenv("TORCH_RANKEVAL_TRACEBACK", "1")
    with pytest.raises(RuntimeError, match="kernel exploded"):
        run_cli(["evaluate", "qrels", "run"], files)


def test_out_of_memory_is_one_line_status_1(files, capsys, monkeypatch):
    def hungry(args, out):
        raise MemoryError

    monkeypatch.setattr(cli.compare, "run", hungry)
    assert run_cli(["compare", "qrels", "run", "other"], files) == (EXIT_FAILURE, "")
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("torch-rankeval compare: error: out of memory")


def test_notes_are_said_after_success_only(files, capsys):
    """A note (a run that misses queries) follows a success; a failure is its error line alone."""
    status, text = run_cli(["compare", "qrels", "run", "short_run", "-m", "map"], files)
    assert status == 2 and _one_error_line(capsys.readouterr().err, "compare")
    files["partial"] = files["run"].with_name("partial")
    files["partial"].write_text("\n".join(RUN.splitlines()[:4]) + "\n")  # no q3
    status, text = run_cli(["compare", "qrels", "run", "partial", "-m", "map", "--format", "json"], files)
    assert status == 0 and json.loads(text)["queries"] == 3
    assert capsys.readouterr().err.splitlines() == [
        f"torch-rankeval: note: {files['partial']} does not answer 1 of the compared queries; they score 0"
    ]


def test_a_reader_that_leaves_ends_the_command_quietly(files, capsys):
    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    assert main(["evaluate", str(files["qrels"]), str(files["run"])], Closed()) == EXIT_BROKEN_PIPE == 141
    assert capsys.readouterr().err == ""


def test_help_and_version_exit_0(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == "torch-rankeval 0.1.0\n"
    for argv in (["--help"], ["evaluate", "--help"], ["compare", "--help"], ["profile", "--help"]):
        assert main(argv) == 0
        assert capsys.readouterr().out.startswith(f"usage: torch-rankeval {' '.join(argv[:-1])}".rstrip())


# ----------------------------------------------------------------------------- memory of compare
def test_compare_streams_its_resamples(files, monkeypatch, capsys):
    """With room for only a few resampled means, compare streams them and prints the same numbers."""
    from torch_rankeval import stats

    argv = ["compare", "qrels", "run", "other", "-m", "map", "-m", "P.1", "--format", "json", "--resamples", "3001"]
    status, kept = run_cli(argv, files)
    assert status == 0
    streamed_columns = []
    original = stats._order_statistics

    def spy(slices, n, ranks, columns):
        streamed_columns.append(columns)
        return original(slices, n, ranks, columns)

    monkeypatch.setattr(stats, "_KEEP", 64)
    monkeypatch.setattr(stats, "_BINS", 8)
    monkeypatch.setattr(stats, "_order_statistics", spy)
    status, streamed = run_cli(argv, files)
    assert status == 0 and json.loads(streamed) == json.loads(kept)
    assert streamed_columns == [2]  # the streamed path ran: map and P.1 of the one pair


# ----------------------------------------------------------------------------- start-up cost
HEAVY = ("torch", "torchmetrics", "scipy", "numpy", "matplotlib", "lightning")
PROBE = """
import json, runpy, sys
sys.argv = ["torch-rankeval", *json.loads(sys.argv[1])]
try:
    runpy.run_module("torch_rankeval", run_name="__main__", alter_sys=True)
    code = None
except SystemExit as exc:
    code = exc.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
""".replace("HEAVY", repr(HEAVY))


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["--version"], ["evaluate", "--help"], ["compare", "--help"], ["profile", "--help"], ["nope"]],
    ids=lambda a: " ".join(a),
)
def test_help_and_version_import_no_torch(argv):
    """A functional check of the lean start (the timing is benchmarks/bench_cli_startup.py's)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv)],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
    )
    report = json.loads(done.stderr.splitlines()[-1])
    assert report["heavy"] == [], report
    assert report["code"] == (2 if argv == ["nope"] else 0)
    if argv == ["--version"]:
        assert done.stdout == "torch-rankeval 0.1.0\n"
    elif argv[-1] == "--help":
        assert done.stdout.startswith("usage: torch-rankeval") and "--help" in done.stdout


LAZY = """
import sys, torch_rankeval
assert not {"torch", "torchmetrics", "scipy"} & set(sys.modules), "import torch_rankeval imported torch"
names = dir(torch_rankeval)
assert set(torch_rankeval.__all__) <= set(names) and {"trec", "stats", "metrics"} <= set(names)
assert not {"torch"} & set(sys.modules), "dir() imported torch"
from torch_rankeval import RankingMetrics, NDCG, functional
from torch_rankeval.metrics import single, base
assert NDCG is torch_rankeval.NDCG is single.NDCG and RankingMetrics is base.RankingMetrics
assert functional is torch_rankeval.functional and functional.__name__ == "torch_rankeval.functional"
assert torch_rankeval.PRESETS["trec_eval"].gain == "linear" and torch_rankeval.presets.sklearn.ties == "average"
assert torch_rankeval.trec.evaluate.__module__ == "torch_rankeval.trec.evaluation"
for name in torch_rankeval.__all__:
    getattr(torch_rankeval, name)
namespace = {}
exec("from torch_rankeval import *", namespace)
assert set(torch_rankeval.__all__) <= set(namespace)
try:
    torch_rankeval.NDGC
except AttributeError as exc:
    assert str(exc) == "module 'torch_rankeval' has no attribute 'NDGC'", exc
else:
    raise AssertionError("no AttributeError")
print("ok")
"""


def test_package_exports_are_lazy_and_complete():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", LAZY], check=False, capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr


def test_torch_free_choices_equal_the_library_constants():
    from torch_rankeval import _choices, conventions, diagnostics

    assert _choices.TIES is conventions.TIES
    assert _choices.GAINS is conventions.GAINS
    assert _choices.PRESET_NAMES == tuple(sorted(conventions.PRESETS))
    assert _choices.INVERSION_STATS is diagnostics.INVERSION_STATS
