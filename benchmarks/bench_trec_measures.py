"""trec_eval's whole measure set (``-m official`` and ``-m all_trec``): torch_rankeval against
pytrec_eval (trec_eval 9.0.8's C code) on the same collection, and each measure family's own cost.

Both tools get their input already in memory (torch_rankeval: ``Qrels``/``Run`` read from the
files; pytrec_eval: its dicts parsed from the files), so the timed span is the evaluation alone:
torch_rankeval's join, ranking and measures, pytrec_eval's ``RelevanceEvaluator(...).evaluate``.
Each tool runs in a fresh process per round; the table shows the median of ``--repeat`` rounds and
each time as a multiple of torch_rankeval's. The summaries of both tools are compared (ours in
trec_eval 9.0.8 mode, the version pytrec_eval compiles in) and must agree to 1e-9.

``--families`` also times each family alone on the joined batch (``measures.compute``, float64,
``validate_args=False``), next to ``map``, to show that no kernel falls off a cliff.

    python benchmarks/bench_trec_measures.py                              # 20k queries x 100 documents
    python benchmarks/bench_trec_measures.py --queries 5000 --repeat 3 --families

The data are bench_evaluate_cli.py's (written once to --data-dir and reused).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's torch_rankeval
from torch_rankeval.measures.grammar import NICKNAMES  # noqa: E402 (torch-free)

SETS = ("official", "all_trec")
# pytrec_eval's names for the trec_eval 9.0.8 sets (pytrec_eval takes no nicknames): trec_eval's lists
# without what pytrec_eval does not compute (the run's tag, text per query, and 10.0's unj / rbp).
NOT_IN_PYTREC = {"runid", "relstring", "unj", "rbp", "rbp_resid"}
PYTREC = {name: set(NICKNAMES[name]) - NOT_IN_PYTREC for name in SETS}
FAMILIES = [
    "map",
    "bpref",
    "infAP",
    "iprec_at_recall",
    "11pt_avg",
    "Rprec_mult",
    "utility",
    "binG",
    "G",
    "ndcg_rel",
    "Rndcg",
    "relative_P",
    "set_P",
    "set_F",
    "num_nonrel_judged_ret",
    "yaap",
]


def _ours(qrels: str, run: str, names: str) -> dict:
    from torch_rankeval import trec

    q, r = trec.read_qrels(qrels), trec.read_run(run)
    start = time.perf_counter()
    result = trec.evaluate(q, r, names, trec_eval_version="9.0.8")
    seconds = time.perf_counter() - start
    summary = {o.trec_name: result.summary[o.name] for o in result.outputs if o.name != "runid"}
    return {"seconds": seconds, "summary": summary}


def _pytrec_eval(qrels: str, run: str, names: str) -> dict:
    import pytrec_eval

    with open(qrels) as f:
        q = pytrec_eval.parse_qrel(f)
    with open(run) as f:
        r = pytrec_eval.parse_run(f)
    start = time.perf_counter()
    per_query = pytrec_eval.RelevanceEvaluator(q, PYTREC[names]).evaluate(r)
    seconds = time.perf_counter() - start
    first = next(iter(per_query.values()))
    summary = {
        name: pytrec_eval.compute_aggregated_measure(name, [v[name] for v in per_query.values()]) for name in first
    }
    summary["num_q"] = len(per_query)
    return {"seconds": seconds, "summary": summary}


def _families(qrels: str, run: str, repeat: int) -> dict:
    from torch_rankeval import measures, trec

    batch = trec.to_tensors(trec.read_qrels(qrels), trec.read_run(run))
    out = {}
    for name in FAMILIES:
        parsed = measures.parse_measures([name])
        times = []
        for _ in range(repeat + 1):
            start = time.perf_counter()
            measures.compute(
                parsed, batch.preds, batch.target, mask=batch.mask, ideal_target=batch.ideal_target, validate_args=False
            )
            times.append(time.perf_counter() - start)
        out[f"{name} ({len(parsed)})"] = statistics.median(times[1:])  # the first call warms caches
    return out


def _worker(tool: str, qrels: str, run: str, names: str, repeat: int, threads: int) -> dict:
    if threads:
        import torch

        torch.set_num_threads(threads)
    if tool == "families":
        return _families(qrels, run, repeat)
    return {"ours": _ours, "pytrec_eval": _pytrec_eval}[tool](qrels, run, names)


def _run(tool: str, qrels: Path, run: Path, names: str, repeat: int = 1, threads: int = 0) -> dict:
    env_path = str(REPO)
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            tool,
            "--qrels",
            str(qrels),
            "--run",
            str(run),
            "--names",
            names,
            "--repeat",
            str(repeat),
            "--threads",
            str(threads),
        ],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"{tool} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--families", action="store_true", help="also time each measure family alone")
    parser.add_argument("--threads", type=int, default=0, help="torch's intra-op threads (0: torch's default)")
    parser.add_argument("--data-dir", default=str(REPO / "benchmarks" / ".data"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--qrels", help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--names", default="all_trec", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.worker, args.qrels, args.run, args.names, args.repeat, args.threads)))
        return

    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_evaluate_cli import generate

    qrels, run = generate(Path(args.data_dir), args.queries, args.docs)
    print(
        f"{args.queries} queries x {args.docs} documents; {platform.processor() or platform.machine()}, "
        f"python {platform.python_version()}; torch threads: {args.threads or 'default'}; median of {args.repeat}\n"
    )
    print("| measures | torch_rankeval (s) | pytrec_eval (s) | pytrec_eval / ours | summaries agree |")
    print("|---|---|---|---|---|")
    for names in SETS:
        times: dict[str, list[float]] = {"ours": [], "pytrec_eval": []}
        results = {}
        for _ in range(args.repeat):
            for tool, spent in times.items():
                results[tool] = _run(tool, qrels, run, names, threads=args.threads)
                spent.append(results[tool]["seconds"])
        ours, theirs = results["ours"]["summary"], results["pytrec_eval"]["summary"]
        agree = all(abs(ours[k] - theirs[k]) <= 1e-9 * max(1.0, abs(theirs[k])) for k in theirs)
        agree = agree and set(ours) == set(theirs)
        t_ours, t_theirs = statistics.median(times["ours"]), statistics.median(times["pytrec_eval"])
        print(f"| {names} ({len(ours)} values) | {t_ours:.2f} | {t_theirs:.2f} | {t_theirs / t_ours:.1f}x | {agree} |")
    if args.families:
        seconds = _run("families", qrels, run, "", args.repeat, args.threads)
        base = seconds["map (1)"]
        print("\n| family (values) | seconds | x map |")
        print("|---|---|---|")
        for name, s in seconds.items():
            print(f"| {name} | {s:.3f} | {s / base:.1f} |")


if __name__ == "__main__":
    main()
