"""The command line reads pipes as files (a FIFO, ``/dev/stdin``, process substitution, gzip on
standard input), refuses out-of-range numbers as bad input (exit 2, one line), and ends quietly with
status 141 (128 + SIGPIPE, what a shell reports for coreutils killed by SIGPIPE) when its reader
leaves."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading

import pytest

from tests.conftest import REPO
from torch_rankeval.cli import EXIT_BAD_INPUT, main

QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\nq2 0 d4 1\nq3 0 d5 1\n"
RUN = "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.4 t\nq2 Q0 d3 1 0.9 t\nq2 Q0 d4 2 0.1 t\nq3 Q0 d6 1 0.3 t\n"
# By hand (trec_eval's semantics): q1 ranks d1 (rel) then d2: AP 1; q2 ranks d3, d4, both relevant: AP 1;
# q3 retrieves no relevant document: AP 0. MAP = 2/3; P_2 = (1/2 + 1 + 0) / 3 = 1/2.
WANT = {"map": 2 / 3, "P_2": 0.5}
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _summary(text: str) -> dict[str, float]:
    return json.loads(text)["runs"][0]["summary"]


def _check(summary: dict) -> None:
    assert summary.keys() == WANT.keys()
    for name, value in WANT.items():
        assert summary[name] == pytest.approx(value, rel=1e-12), name


@pytest.fixture
def qrels(tmp_path):
    path = tmp_path / "qrels"
    path.write_text(QRELS)
    return path


def _fifo(tmp_path, name: str, content: bytes) -> tuple[str, threading.Thread]:
    """A named pipe and the thread that writes ``content`` into it (in small pieces) once it is opened."""
    path = str(tmp_path / name)
    os.mkfifo(path)

    def write() -> None:
        with open(path, "wb") as f:
            for i in range(0, len(content), 7):  # a writer that trickles: reads come back short
                f.write(content[i : i + 7])
                f.flush()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return path, thread


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need a POSIX system")
@pytest.mark.parametrize("compressed", [False, True], ids=["text", "gzip"])
@pytest.mark.parametrize("which", ["run", "qrels"])
def test_a_named_pipe_reads_as_its_file(qrels, tmp_path, compressed, which):
    data = (RUN if which == "run" else QRELS).encode()
    fifo, writer = _fifo(tmp_path, f"{which}.pipe", gzip.compress(data) if compressed else data)
    run = tmp_path / "run"
    run.write_text(RUN)
    files = [fifo, str(run)] if which == "qrels" else [str(qrels), fifo]
    out = io.StringIO()
    assert main(["evaluate", *files, "-m", "map", "-m", "P.2", "--format", "json"], out) == 0
    writer.join(timeout=10)
    _check(_summary(out.getvalue()))


def test_dev_stdin_and_gzip_on_standard_input(qrels, tmp_path):
    """``/dev/stdin`` (a pipe here), and ``-`` holding gzip bytes: the same numbers as the plain file."""
    for path, data in (
        ("/dev/stdin", RUN.encode()),
        ("-", gzip.compress(RUN.encode())),
        ("/dev/stdin", gzip.compress(RUN.encode())),
    ):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "torch_rankeval",
                "evaluate",
                str(qrels),
                path,
                "-m",
                "map",
                "-m",
                "P.2",
                "--format",
                "json",
            ],
            input=data,
            capture_output=True,
            env=ENV,
            cwd=tmp_path,
            check=False,
        )
        assert done.returncode == 0 and done.stderr == b"", (path, done.stderr)
        _check(_summary(done.stdout.decode()))


@pytest.mark.skipif(shutil.which("bash") is None, reason="process substitution needs bash")
def test_process_substitution_of_a_gzip_stream(qrels, tmp_path):
    (tmp_path / "run.gz").write_bytes(gzip.compress(RUN.encode()))
    command = f'"{sys.executable}" -m torch_rankeval evaluate qrels <(cat run.gz) -m map -m P.2 --format json'
    done = subprocess.run(["bash", "-c", command], capture_output=True, env=ENV, cwd=tmp_path, check=False)
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    _check(_summary(done.stdout.decode()))


def test_a_reader_that_leaves_gets_sigpipes_status_quietly(qrels, tmp_path):
    """Standard output is a pipe nobody reads (``| head -0``): status 141, nothing on stderr."""
    (tmp_path / "run").write_text(RUN)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has left before the first write
    try:
        done = subprocess.run(
            [sys.executable, "-m", "torch_rankeval", "evaluate", "qrels", "run", "-q"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=ENV,
            cwd=tmp_path,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 128 + signal.SIGPIPE == 141
    assert done.stderr == b""


def test_a_reader_that_leaves_in_process(qrels, tmp_path, capsys):
    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    (tmp_path / "run").write_text(RUN)
    assert main(["evaluate", str(qrels), str(tmp_path / "run")], Closed()) == 141
    assert capsys.readouterr().err == ""


OUT_OF_RANGE = [
    (["-m", "P.inf"], "measure 'P.inf': cutoff 'inf' is not a finite number"),
    (["-m", "P.1e400"], "measure 'P.1e400': cutoff '1e400' is not a finite number"),
    (["-m", "P.-inf"], "cutoff '-inf' is not a finite number"),
    (["-m", "ndcg_cut.5,inf"], "cutoff 'inf' is not a finite number"),
    (["-m", "success.nan"], "cutoff 'nan' is not a number"),
    (["-l", "99999999999999999999"], "-l/--level must be at most"),
    (["-l", str(2**63)], "-l/--level must be at most"),
]


@pytest.mark.parametrize(("extra", "message"), OUT_OF_RANGE, ids=[" ".join(a) for a, _ in OUT_OF_RANGE])
def test_out_of_range_numbers_are_bad_input(qrels, tmp_path, capsys, extra, message):
    (tmp_path / "run").write_text(RUN)
    out = io.StringIO()
    assert main(["evaluate", str(qrels), str(tmp_path / "run"), *extra], out) == EXIT_BAD_INPUT
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("torch-rankeval evaluate: error: ") and message in line, line
    assert out.getvalue() == ""


def test_the_largest_level_is_read(qrels, tmp_path):
    """``-l 2**63 - 1``: nothing is relevant, every binary measure is 0 (the bound is int64's, not a guess)."""
    (tmp_path / "run").write_text(RUN)
    out = io.StringIO()
    argv = ["evaluate", str(qrels), str(tmp_path / "run"), "-m", "P.2", "-l", str(2**63 - 1), "--format", "json"]
    assert main(argv, out) == 0
    assert _summary(out.getvalue()) == {"P_2": 0.0}
