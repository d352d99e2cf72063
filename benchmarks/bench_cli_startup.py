"""Start-up time of the command line: ``torch-rankeval --help`` / ``--version`` wall time, in fresh processes.

    PYTHONPATH=. python benchmarks/bench_cli_startup.py [--repeat 7] [--tree PATH]

Each command runs ``--repeat`` times in a new Python process (``python -m torch_rankeval ...``,
what the console script does); the table gives the median wall time, the start of a bare Python
(``python -c pass``) and ``import torch`` in the same run for scale, and which heavy modules each
command imported. ``--tree`` measures another source tree instead of this one (e.g. a checkout of
an older commit, ``git archive <commit> | tar -x -C /tmp/old``), for a before/after comparison.
Peers that answer ``--help`` from the same environment (ir_measures) are timed when installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEAVY = ("torch", "torchmetrics", "scipy", "numpy", "matplotlib")
REPORT = """
import json, runpy, sys
sys.argv = [sys.argv[0], *json.loads(sys.argv[1])]
try:
    runpy.run_module(MODULE, run_name="__main__", alter_sys=True)
except SystemExit:
    pass
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))), file=sys.stderr)
"""


def _time(argv: list[str], env: dict[str, str], cwd: str, repeat: int) -> tuple[float, int]:
    """Median wall time and the exit status (the last run's)."""
    times, status = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        status = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False).returncode
        times.append(time.perf_counter() - start)
    return statistics.median(times), status


def _heavy(module: str, args: list[str], env: dict[str, str], cwd: str) -> list[str]:
    code = REPORT.replace("MODULE", repr(module)).replace("HEAVY", repr(HEAVY))
    argv = [sys.executable, "-c", code, json.dumps(args)]
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    return json.loads(done.stderr.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7, help="runs per command (median; default 7)")
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]), help="source tree to measure")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": args.tree}  # and cwd: `python -m` puts the working folder first
    python = sys.executable
    rows = [("python -c pass (Python start-up)", [python, "-c", "pass"], None)]
    rows.append(("python -c 'import torch'", [python, "-c", "import torch"], None))
    for cli_args in (["--help"], ["--version"], ["evaluate", "--help"], ["compare", "--help"], ["profile", "--help"]):
        rows.append((f"torch-rankeval {' '.join(cli_args)}", [python, "-m", "torch_rankeval", *cli_args], cli_args))
    rows.append(("python -c 'import torch_rankeval'", [python, "-c", "import torch_rankeval"], None))
    if importlib.util.find_spec("ir_measures") is not None:
        rows.append(("peer: python -m ir_measures --help", [python, "-m", "ir_measures", "--help"], None))

    print(f"tree {args.tree}; Python {sys.version.split()[0]}; median of {args.repeat}; load {os.getloadavg()[0]:.1f}")
    print("| command | wall (s) | heavy modules imported |")
    print("|---|---|---|")
    for name, argv, cli_args in rows:
        seconds, status = _time(argv, env, args.tree, args.repeat)
        heavy = "" if cli_args is None else ", ".join(_heavy("torch_rankeval", cli_args, env, args.tree)) or "none"
        failed = f" (exit status {status})" if status else ""
        print(f"| `{name}`{failed} | {seconds:.3f} | {heavy} |", flush=True)


if __name__ == "__main__":
    main()
