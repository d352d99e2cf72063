"""End-to-end evaluation of a large TREC run from files on disk: torch_rankeval vs pytrec_eval,
ranx and ir_measures.

Each tool reads the same qrels and run files and computes the same five measures (nDCG@10, AP,
RR, P@10, R@100) averaged over queries; the timed span is "files on disk -> means in memory"
(parsing included). Every tool runs in its own fresh process, so that memory and caches do not
leak between them. ranx's numba functions are compiled on a tiny input before timing (a one-off
cost). `cli` is the whole `python -m torch_rankeval evaluate ... --format trec` command,
interpreter start and imports included.

    python benchmarks/bench_evaluate_cli.py                      # 100k queries x 100 documents
    python benchmarks/bench_evaluate_cli.py --queries 10000 --repeat 3 --tools cli,ours,pytrec_eval

The data (written once to --data-dir and reused): query ids like 1048585, MS MARCO-like numeric
docnos, scores with six decimals (some ties), ten judged documents per query (grades 0-3, half of
them retrieved). Results print as a markdown table with each tool's time as a multiple of the
command line's ("x cli"; the median of --repeat rounds, the tools taking turns in each round).
`cli` is measured as a whole process (interpreter start and imports included; it sets glibc's
allocator to reuse freed memory, see `torch_rankeval.cli.reuse_freed_memory`); `ours` is the
library called in-process with the default allocator. CPU is the worker's process time, all its
threads included.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOOLS = ("cli", "ours", "pytrec_eval", "ranx", "ir_measures")
OURS = ["ndcg_cut.10", "map", "recip_rank", "P.10", "recall.100"]
KEYS = ["ndcg@10", "map", "rr", "p@10", "r@100"]


def generate(data_dir: Path, queries: int, docs: int, seed: int = 0) -> tuple[Path, Path]:
    """Write (once) a qrels and a run file; returns their paths."""
    import numpy as np

    data_dir.mkdir(parents=True, exist_ok=True)
    qrels_path = data_dir / f"qrels_{queries}x{docs}_s{seed}.txt"
    run_path = data_dir / f"run_{queries}x{docs}_s{seed}.txt"
    if qrels_path.exists() and run_path.exists():
        return qrels_path, run_path
    rng = np.random.default_rng(seed)
    n_docs = 8_841_823
    stride = n_docs // docs
    qids = 1_000_000 + np.arange(queries)
    base = rng.integers(0, n_docs, queries)
    # distinct documents per query: one per stride-wide slot
    docnos = (base[:, None] + np.arange(docs)[None, :] * stride + rng.integers(0, stride, (queries, docs))) % n_docs
    scores = np.round(np.sort(rng.normal(10, 3, (queries, docs)), axis=1)[:, ::-1], 6)
    tmp_run, tmp_qrels = run_path.with_suffix(".tmp"), qrels_path.with_suffix(".tmp")
    with open(tmp_run, "w") as f:
        for i in range(queries):
            q = qids[i]
            f.write(
                "".join(
                    f"{q} Q0 {d} {r} {s:.6f} bench\n"
                    for r, (d, s) in enumerate(zip(docnos[i].tolist(), scores[i].tolist()), 1)
                )
            )
    with open(tmp_qrels, "w") as f:
        for i in range(queries):
            judged = {
                int(d): int(g) for d, g in zip(docnos[i, rng.choice(docs, 5, replace=False)], rng.integers(0, 4, 5))
            }
            for d, g in zip(rng.integers(0, n_docs, 5).tolist(), rng.integers(0, 4, 5).tolist()):
                judged.setdefault(d, g)
            f.write("".join(f"{qids[i]} 0 {d} {g}\n" for d, g in judged.items()))
    os.replace(tmp_run, run_path)
    os.replace(tmp_qrels, qrels_path)
    return qrels_path, run_path


# ----------------------------------------------------------------------------- workers (one per process)
def _ours(qrels: str, run: str, device: str) -> dict:
    from torch_rankeval import trec

    start, cpu = time.perf_counter(), time.process_time()
    q = trec.read_qrels(qrels)
    r = trec.read_run(run)
    parsed = time.perf_counter()
    result = trec.evaluate(q, r, OURS, device=device)
    done = time.perf_counter()
    means = dict(zip(KEYS, (result.summary[n] for n in ["ndcg_cut_10", "map", "recip_rank", "P_10", "recall_100"])))
    return {
        "seconds": done - start,
        "cpu": time.process_time() - cpu,
        "parse": parsed - start,
        "evaluate": done - parsed,
        "means": means,
    }


def _pytrec_eval(qrels: str, run: str, device: str) -> dict:
    import pytrec_eval

    start, cpu = time.perf_counter(), time.process_time()
    with open(qrels) as f:
        q = pytrec_eval.parse_qrel(f)
    with open(run) as f:
        r = pytrec_eval.parse_run(f)
    parsed = time.perf_counter()
    names = ["ndcg_cut_10", "map", "recip_rank", "P_10", "recall_100"]
    per_query = pytrec_eval.RelevanceEvaluator(q, {"ndcg_cut.10", "map", "recip_rank", "P.10", "recall.100"}).evaluate(
        r
    )
    means = {k: statistics.fmean(v[n] for v in per_query.values()) for k, n in zip(KEYS, names)}
    done = time.perf_counter()
    return {
        "seconds": done - start,
        "cpu": time.process_time() - cpu,
        "parse": parsed - start,
        "evaluate": done - parsed,
        "means": means,
    }


def _ranx(qrels: str, run: str, device: str) -> dict:
    from ranx import Qrels, Run, evaluate

    metrics = ["ndcg@10", "map", "mrr", "precision@10", "recall@100"]
    evaluate(Qrels.from_dict({"q": {"d": 1}}), Run.from_dict({"q": {"d": 1.0, "e": 0.5}}), metrics)  # numba warm-up
    start, cpu = time.perf_counter(), time.process_time()
    q = Qrels.from_file(qrels, kind="trec")
    r = Run.from_file(run, kind="trec")
    parsed = time.perf_counter()
    scores = evaluate(q, r, metrics)
    done = time.perf_counter()
    return {
        "seconds": done - start,
        "cpu": time.process_time() - cpu,
        "parse": parsed - start,
        "evaluate": done - parsed,
        "means": dict(zip(KEYS, (float(scores[m]) for m in metrics))),
    }


def _ir_measures(qrels: str, run: str, device: str) -> dict:
    import ir_measures
    from ir_measures import AP, RR, P, R, nDCG

    measures = [nDCG @ 10, AP, RR, P @ 10, R @ 100]
    start, cpu = time.perf_counter(), time.process_time()
    q = list(ir_measures.read_trec_qrels(qrels))
    r = list(ir_measures.read_trec_run(run))
    parsed = time.perf_counter()
    agg = ir_measures.calc_aggregate(measures, q, r)
    done = time.perf_counter()
    return {
        "seconds": done - start,
        "cpu": time.process_time() - cpu,
        "parse": parsed - start,
        "evaluate": done - parsed,
        "means": dict(zip(KEYS, (float(agg[m]) for m in measures))),
    }


WORKERS = {"ours": _ours, "pytrec_eval": _pytrec_eval, "ranx": _ranx, "ir_measures": _ir_measures}


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# glibc's allocator settings that the command line applies to itself (cli.reuse_freed_memory);
# --malloc-env gives them to every tool's process, to see what they do for the peers.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(256 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}


def _run_tool(tool: str, qrels: Path, run: Path, device: str, malloc_env: bool = False) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    if malloc_env:
        env.update(MALLOC_ENV)
    if tool == "cli":
        start = time.perf_counter()
        cmd = [
            sys.executable,
            "-m",
            "torch_rankeval",
            "evaluate",
            str(qrels),
            str(run),
            "--format",
            "trec",
            "--device",
            device,
        ]
        cmd += [a for m in OURS for a in ("-m", m)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        seconds = time.perf_counter() - start
        if done.returncode:
            raise RuntimeError(done.stderr)
        values = {line.split()[0]: float(line.split()[2]) for line in done.stdout.splitlines()}
        means = dict(zip(KEYS, (values[n] for n in ["ndcg_cut_10", "map", "recip_rank", "P_10", "recall_100"])))
        return {
            "seconds": seconds,
            "cpu": float("nan"),
            "parse": float("nan"),
            "evaluate": float("nan"),
            "means": means,
            "peak_rss_mb": float("nan"),
        }
    done = subprocess.run(
        [sys.executable, __file__, "--worker", tool, "--qrels", str(qrels), "--run", str(run), "--device", device],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode:
        raise RuntimeError(f"{tool} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument(
        "--data-dir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "torch_rankeval_bench"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per tool; the table shows the median")
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated subset of {','.join(TOOLS)}")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--malloc-env", action="store_true", help="run every tool with glibc's allocator settings of the CLI"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--qrels", help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        out = WORKERS[args.worker](args.qrels, args.run, args.device)
        out["peak_rss_mb"] = _peak_rss_mb()
        print(json.dumps(out))
        return

    tools = [t for t in args.tools.split(",") if t]
    unknown = set(tools) - set(TOOLS)
    if unknown:
        parser.error(f"unknown tools {sorted(unknown)}; choose from {TOOLS}")
    qrels, run = generate(args.data_dir, args.queries, args.docs)
    lines = sum(1 for _ in open(run, "rb"))
    print(
        f"# {args.queries} queries x {args.docs} documents: {lines:,} run lines "
        f"({run.stat().st_size / 2**20:.0f} MiB), "
        f"{sum(1 for _ in open(qrels, 'rb')):,} qrels lines",
        flush=True,
    )
    import torch

    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"torch {torch.__version__}, device {args.device}; median of {args.repeat}",
        flush=True,
    )
    # Round robin (every tool once per repeat) so that a change of machine load hits all tools alike.
    runs: dict[str, list[dict]] = {tool: [] for tool in tools}
    for _ in range(args.repeat):
        for tool in tools:
            runs[tool].append(_run_tool(tool, qrels, run, args.device, args.malloc_env))
            print(f"  {tool}: {runs[tool][-1]['seconds']:.2f} s", file=sys.stderr, flush=True)
    results = {tool: sorted(r, key=lambda x: x["seconds"])[len(r) // 2] for tool, r in runs.items()}
    base = results.get("cli", results.get("ours", next(iter(results.values()))))
    print(
        "\n| tool | total (s) | x cli | CPU (s) | parse (s) | evaluate (s) | peak RSS (MiB) | "
        + " | ".join(KEYS)
        + " |"
    )
    print("|---" * (7 + len(KEYS)) + "|")
    for tool, r in results.items():
        means = " | ".join(f"{r['means'][k]:.4f}" for k in KEYS)
        print(
            f"| {tool} | {r['seconds']:.2f} | {r['seconds'] / base['seconds']:.2f} | {r['cpu']:.2f} | "
            f"{r['parse']:.2f} | "
            f"{r['evaluate']:.2f} | {r['peak_rss_mb']:.0f} | {means} |"
        )


if __name__ == "__main__":
    main()
