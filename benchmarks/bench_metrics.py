"""Benchmark: nDCG@10 + MAP through RankingMetrics against torchmetrics, ranx, pytrec_eval, sklearn.

Every case runs in its own subprocess on identical seeded data (graded 0-4, continuous scores), so
peak memory is that case's alone. Times are medians and minima over repeats; ratios are taken within
the run.

    python benchmarks/bench_metrics.py                   # all workloads, CPU
    python benchmarks/bench_metrics.py --device cuda     # our metric on the GPU (peers stay on CPU)
    python benchmarks/bench_metrics.py --quick           # small sizes, to check the script works
    python benchmarks/bench_metrics.py --sort-ratio      # update time / one torch.sort, every path

``--map-k 10`` measures MAP@10 in place of whole-list MAP (the lean-core issue's nDCG@10 + MAP@10):
ours, ranx (``average_precision(k=10)``) and pytrec_eval (``map_cut.10``) divide by every relevant
document of the list (trec_eval's definition); torchmetrics' ``RetrievalMAP(top_k=10)`` divides by
the relevant documents found in the top 10, so its MAP@10 differs from the others' by definition.

Workloads: ``10k`` (10,000 queries x 100 docs), ``100k`` (100,000 x 100), ``loop`` (a validation loop:
200 batches of 256 x 64, updated per batch, computed at the end), ``stream`` (padded streaming
memory at 10k, 100k and 1M queries). Results are printed as a table and written as JSON.

``--sort-ratio`` measures "one speed for every path": the median time of one
``RankingMetrics(("ndcg", "map"), k=10).update`` divided by the median time of one ``torch.sort``
of the same scores (same process, measured interleaved, so the ratio survives machine load), on
256 x 64, 1,000 x 100 and 10,000 x 100 batches, with and without tied scores, both settings of
``validate_args``, float32 and bfloat16 scores (and ``compile=True`` with ``--compiled``). It prints
the ratio of the medians and the ratio of the minima (the minimum of interleaved repeats: on a shared
machine the steadier of the two). ``--ratio-runs N`` runs each size in N child processes and prints
each figure's median over them (:func:`median_of_runs`: one process's minimum can sit 10-20% high
for its whole run).
``--repo PATH`` measures another checkout of the package (e.g. the main branch, for a before/after).
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
METRICS = ("ndcg@10", "map")
#: MAP's cutoff (``--map-k``): None, whole-list MAP
MAP_K: int | None = None


def set_map_k(k: int | None) -> None:
    """MAP@k in place of whole-list MAP for every case (``--map-k``)."""
    global METRICS, MAP_K
    MAP_K = k
    METRICS = ("ndcg@10", "map" if k is None else f"map@{k}")


# ---------------------------------------------------------------------------------------- data
def make_batches(n_queries: int, length: int, batch: int, seed: int = 0):
    """Seeded padded batches ``(preds float32, target int64)``; graded 0-4, continuous scores."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out = []
    for start in range(0, n_queries, batch):
        n = min(batch, n_queries - start)
        out.append((torch.rand(n, length, generator=g), torch.randint(0, 5, (n, length), generator=g)))
    return out


def workload(name: str, quick: bool) -> dict:
    scale = 10 if quick else 1
    return {
        "10k": {"queries": 10_000 // scale, "length": 100, "batch": 10_000 // scale},
        "100k": {"queries": 100_000 // scale, "length": 100, "batch": 10_000 // scale},
        "loop": {"queries": 200 * 256 // scale, "length": 64, "batch": 256},
    }[name]


# ---------------------------------------------------------------------------------------- cases
def case_ours(batches, device: str, flat: bool = False):
    import torch

    from torch_rankeval import RankingMetrics

    metric = RankingMetrics(METRICS, gain="linear").to(device)
    offset = 0

    def run():
        nonlocal offset
        metric.reset()
        offset = 0
        for preds, target in batches:
            if flat:
                n, length = preds.shape
                ids = (torch.arange(n, device=device) + offset).repeat_interleave(length)
                metric.update(preds.reshape(-1), target.reshape(-1), indexes=ids)
                offset += n
            else:
                metric.update(preds, target)
        out = metric.compute()
        if device == "cuda":
            torch.cuda.synchronize()
        return {k: float(v) for k, v in out.items()}

    batches = [(p.to(device), t.to(device)) for p, t in batches]
    return run


def case_torchmetrics(batches):
    import torch
    from torchmetrics.retrieval import RetrievalMAP, RetrievalNormalizedDCG

    ndcg, ap = RetrievalNormalizedDCG(top_k=10), RetrievalMAP(top_k=MAP_K)

    def run():
        ndcg.reset()
        ap.reset()
        offset = 0
        for preds, target in batches:
            n, length = preds.shape
            ids = (torch.arange(n) + offset).repeat_interleave(length)
            offset += n
            ndcg.update(preds.reshape(-1), target.reshape(-1), indexes=ids)
            ap.update(preds.reshape(-1), target.reshape(-1) > 0, indexes=ids)
        return {"ndcg@10": float(ndcg.compute()), METRICS[1]: float(ap.compute())}

    return run


def _ranx_arrays(batches):
    """ranx's numpy entry point: qrels (Q, L, 2) [doc, grade] by grade desc, run (Q, L, 2) [doc, score] by score desc."""
    import numpy as np

    preds = np.concatenate([p.numpy() for p, _ in batches]).astype(np.float64)
    target = np.concatenate([t.numpy() for _, t in batches]).astype(np.float64)
    ids = np.broadcast_to(np.arange(preds.shape[1], dtype=np.float64), preds.shape)
    o = np.argsort(-preds, axis=1, kind="stable")
    run = np.stack([np.take_along_axis(ids, o, 1), np.take_along_axis(preds, o, 1)], -1)
    oq = np.argsort(-target, axis=1, kind="stable")
    qrels = np.stack([np.take_along_axis(ids, oq, 1), np.take_along_axis(target, oq, 1)], -1)
    return np.ascontiguousarray(qrels), np.ascontiguousarray(run)


def case_ranx(batches, end_to_end: bool):
    from ranx.metrics import average_precision, ndcg

    t0 = time.perf_counter()
    warm_q, warm_r = _ranx_arrays([(p[:8], t[:8]) for p, t in batches[:1]])
    ndcg(warm_q, warm_r, k=10)
    average_precision(warm_q, warm_r, k=MAP_K or 0)
    jit_s = time.perf_counter() - t0
    prepared = None if end_to_end else _ranx_arrays(batches)

    def run():
        qrels, run_ = _ranx_arrays(batches) if end_to_end else prepared
        # ranx.metrics.ndcg is the Jarvelin (linear gain) formulation, like trec_eval and our gain="linear"
        ap = average_precision(qrels, run_, k=MAP_K or 0)  # ranx's k=0: the whole list
        return {"ndcg@10": float(ndcg(qrels, run_, k=10).mean()), METRICS[1]: float(ap.mean())}

    return run, jit_s


def case_pytrec(batches):
    import pytrec_eval

    def run():
        qrels, runs = {}, {}
        q = 0
        for preds, target in batches:
            for p_row, t_row in zip(preds.tolist(), target.tolist()):
                qid = str(q)
                q += 1
                runs[qid] = {str(j): s for j, s in enumerate(p_row)}
                qrels[qid] = {str(j): g for j, g in enumerate(t_row)}
        ap = "map" if MAP_K is None else f"map_cut.{MAP_K}"
        res = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", ap}).evaluate(runs)
        ap = ap.replace(".", "_")
        n = len(qrels)  # queries without relevant documents score 0, as ours
        return {
            "ndcg@10": sum(v["ndcg_cut_10"] for v in res.values()) / n,
            METRICS[1]: sum(v[ap] for v in res.values()) / n,
        }

    return run


def case_sklearn(batches):
    import numpy as np
    from sklearn.metrics import ndcg_score

    def run():
        preds = np.concatenate([p.numpy() for p, _ in batches])
        target = np.concatenate([t.numpy() for _, t in batches])
        return {"ndcg@10": float(ndcg_score(target, preds, k=10))}

    return run


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def set_threads(n: int | None) -> None:
    if n:
        import torch

        torch.set_num_threads(n)
        try:
            import numba

            numba.set_num_threads(n)
        except ImportError:
            pass


def run_case(args) -> dict:
    """Child process: build data, measure one case, print JSON."""
    import torch

    set_threads(args.threads)
    torch.manual_seed(0)
    w = workload(args.workload, args.quick)
    batches = make_batches(w["queries"], w["length"], w["batch"])
    base_rss = peak_rss_mb()
    extra = {}
    if args.case == "ours":
        fn = case_ours(batches, args.device)
    elif args.case == "ours_flat":
        fn = case_ours(batches, args.device, flat=True)
    elif args.case == "torchmetrics":
        fn = case_torchmetrics(batches)
    elif args.case in ("ranx_kernel", "ranx_e2e"):
        fn, extra["jit_s"] = case_ranx(batches, end_to_end=args.case == "ranx_e2e")
    elif args.case == "pytrec_eval":
        fn = case_pytrec(batches)
    elif args.case == "sklearn":
        fn = case_sklearn(batches)
    else:
        raise SystemExit(f"unknown case {args.case}")
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times, values = [], None
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        values = fn()
        times.append(time.perf_counter() - t0)
    out = {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "times": times,
        "values": values,
        "peak_rss_delta_mb": peak_rss_mb() - base_rss,
        **extra,
    }
    if args.device == "cuda" and args.case.startswith("ours"):
        out["cuda_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def stream_memory(args) -> dict:
    """Child process: peak RSS of the padded streaming path over n_queries generated batch by batch."""
    import torch

    from torch_rankeval import RankingMetrics

    set_threads(args.threads)
    metric = RankingMetrics(METRICS, gain="linear").to(args.device)
    g = torch.Generator().manual_seed(0)
    batch = 10_000
    preds = torch.rand(batch, 100, generator=g)
    target = torch.randint(0, 5, (batch, 100), generator=g)
    metric.update(preds.to(args.device), target.to(args.device))  # warm the allocator before the baseline
    metric.reset()
    base = peak_rss_mb()
    t0 = time.perf_counter()
    for _ in range(args.stream_queries // batch):
        preds = torch.rand(batch, 100, generator=g)
        target = torch.randint(0, 5, (batch, 100), generator=g)
        metric.update(preds.to(args.device), target.to(args.device))
    metric.compute()
    state_bytes = sum(t.numel() * t.element_size() for t in (metric.sums, metric.counts))
    return {
        "queries": args.stream_queries,
        "seconds": time.perf_counter() - t0,
        "peak_rss_delta_mb": peak_rss_mb() - base,
        "state_bytes": state_bytes,
    }


# ---------------------------------------------------------------------------------------- sort ratio
RATIO_SIZES = "256x64,1000x100,10000x100"
RATIO_METRICS = ("ndcg", "map")  # with k=10: nDCG@10 and AP@10, the measurement


def ratio_inputs(n: int, length: int, ties: bool, dtype_name: str, seed: int = 0):
    """Scores without ties (a random permutation of 0..L-1 per row: distinct and exact in bfloat16)
    or with heavy ties (10 score levels); grades 0-4."""
    import torch

    g = torch.Generator().manual_seed(seed)
    if ties:
        preds = torch.randint(0, 10, (n, length), generator=g).float()
    else:
        preds = torch.rand(n, length, generator=g).argsort(-1).float()
    target = torch.randint(0, 5, (n, length), generator=g)
    return preds.to(getattr(torch, dtype_name)), target


def sort_ratio_case(args) -> dict:
    """Child process: every path at one batch size, interleaved with the reference sort."""
    import torch

    from torch_rankeval import RankingMetrics

    set_threads(args.threads)
    n, length = (int(v) for v in args.ratio_size.split("x"))
    configs = [("validate", {"validate_args": True}), ("no_validate", {"validate_args": False})]
    if args.compiled:
        configs.append(("compiled", {"validate_args": False, "compile": True}))
    inputs = {
        (ties, dtype): tuple(t.to(args.device) for t in ratio_inputs(n, length, ties, dtype))
        for ties in (False, True)
        for dtype in ("float32", "bfloat16")
    }
    metrics = {name: RankingMetrics(RATIO_METRICS, k=10, **kw).to(args.device) for name, kw in configs}
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)

    def timed(fn) -> float:
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - t0

    for _ in range(3):  # warm-up (and compilation)
        for preds, target in inputs.values():
            torch.sort(preds, dim=-1, descending=True)
            for m in metrics.values():
                m.update(preds, target)
    repeats = args.ratio_repeats or max(7, min(300, int(3e6 // (n * length))))
    times: dict = {}
    for _ in range(repeats):
        for key, (preds, target) in inputs.items():
            times.setdefault((*key, "sort"), []).append(timed(lambda p=preds: torch.sort(p, dim=-1, descending=True)))
            for name, m in metrics.items():
                times.setdefault((*key, name), []).append(timed(lambda m=m, p=preds, t=target: m.update(p, t)))
    values = {name: {k: round(float(v), 6) for k, v in m.compute().items()} for name, m in metrics.items()}
    out = []
    for ties, dtype in inputs:
        sort_s = statistics.median(times[(ties, dtype, "sort")])
        sort_min = min(times[(ties, dtype, "sort")])
        for name, _ in configs:
            upd = statistics.median(times[(ties, dtype, name)])
            upd_min = min(times[(ties, dtype, name)])
            out.append(
                {
                    "ties": ties,
                    "dtype": dtype,
                    "config": name,
                    "update_ms": upd * 1e3,
                    "sort_ms": sort_s * 1e3,
                    "ratio": upd / sort_s,
                    "update_min_ms": upd_min * 1e3,
                    "sort_min_ms": sort_min * 1e3,
                    "ratio_min": upd_min / sort_min,
                }
            )
    return {"size": args.ratio_size, "repeats": repeats, "rows": out, "values": values}


def median_of_runs(runs: list[dict]) -> dict:
    """One size's ``sort_ratio_case`` results over several child processes: each figure of each row
    (times, ratios) the median over the runs, the runs kept. A process's minimum can sit high for the
    whole run (where its tensors and the metric landed in memory: on this shared machine a path's
    minimum moves 10-20% from one process to the next while the code stays the same), so the median of
    the processes' minima is the steadier figure."""
    if len(runs) == 1 or any("error" in r for r in runs):
        return runs[0]
    rows = []
    for i, row in enumerate(runs[0]["rows"]):
        merged = dict(row)
        for key, value in row.items():
            if isinstance(value, float):
                merged[key] = statistics.median(r["rows"][i][key] for r in runs)
        rows.append(merged)
    return {**runs[0], "rows": rows, "runs": runs}


def print_sort_ratio(results: list[dict], machine: dict) -> None:
    print(f"machine: {machine}")
    n_runs = max(len(r.get("runs", [r])) for r in results)
    if n_runs > 1:
        print(f"each figure: the median over {n_runs} child processes of that process's figure")
    configs = []
    for r in results:
        for row in r.get("rows", []):
            if row["config"] not in configs:
                configs.append(row["config"])
    head = " | ".join(f"{'ties' if t else 'no ties'}, {c}" for t in (False, True) for c in configs)
    for dtype, stat in (("float32", ""), ("float32", "_min"), ("bfloat16", ""), ("bfloat16", "_min")):
        what = "minimum" if stat else "median"
        print(f"\nupdate / torch.sort, {dtype} scores ({what} update ms / {what} sort ms)")
        print(f"| batch | {head} |")
        print("|---" * (1 + 2 * len(configs)) + "|")
        for r in results:
            if "error" in r:
                print(f"| {r.get('size')} | error: {r['error']} |")
                continue
            cells = []
            for t in (False, True):
                for c in configs:
                    row = next(x for x in r["rows"] if x["ties"] == t and x["dtype"] == dtype and x["config"] == c)
                    cells.append(
                        f"{row[f'ratio{stat}']:.2f}x ({row[f'update{stat}_ms']:.2f}/{row[f'sort{stat}_ms']:.2f})"
                    )
            print(f"| {r['size']} | " + " | ".join(cells) + " |")


# ---------------------------------------------------------------------------------------- parent
def child(*extra: str, threads: int | None = None, repo: str | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo or REPO), os.environ.get("PYTHONPATH", "")])}
    thread_args = ["--threads", str(threads)] if threads else []
    thread_args += ["--map-k", str(MAP_K)] if MAP_K is not None else []
    proc = subprocess.run([sys.executable, __file__, *extra, *thread_args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def sync_bytes(n_docs: int) -> dict:
    """Bytes each process contributes to one distributed sync of nDCG@10 + MAP."""
    ours = 8 * (2 * len(METRICS) + 5)  # one all-reduce: float64 sums, counts, 5 list sizes
    # torchmetrics: each Retrieval metric all-gathers preds (float32), target (int64) and indexes (int64)
    theirs = 2 * n_docs * (4 + 8 + 8)
    return {"ours": ours, "torchmetrics": theirs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--workloads", default="10k,100k,loop")
    parser.add_argument("--cases", default="ours,ours_flat,torchmetrics,ranx_kernel,ranx_e2e,pytrec_eval,sklearn")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--slow-repeats", type=int, default=1, help="repeats for torchmetrics and pytrec_eval")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch and numba threads per case (default: all cores)"
    )
    parser.add_argument(
        "--stream", default="10000,100000,1000000", help="query counts for the streaming memory check ('' to skip)"
    )
    parser.add_argument("--json", default=None, help="where to write the JSON results (default: benchmarks/results/)")
    parser.add_argument("--sort-ratio", action="store_true", help="the update / torch.sort table instead of the peers")
    parser.add_argument("--sizes", default=RATIO_SIZES, help="--sort-ratio batch sizes, NxL comma-separated")
    parser.add_argument(
        "--ratio-repeats", type=int, default=None, help="--sort-ratio repeats (default: by size, 7-300)"
    )
    parser.add_argument(
        "--ratio-runs",
        type=int,
        default=1,
        help="--sort-ratio: child processes per size; the table shows each figure's median over them",
    )
    parser.add_argument("--compiled", action="store_true", help="--sort-ratio: also RankingMetrics(compile=True)")
    parser.add_argument("--map-k", type=int, default=None, help="MAP@K in place of whole-list MAP (peers' cases)")
    parser.add_argument("--repo", default=None, help="checkout whose torch_rankeval is measured (default: this one)")
    # child mode
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    parser.add_argument("--stream-queries", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ratio-size", help=argparse.SUPPRESS)
    args = parser.parse_args()
    set_map_k(args.map_k)

    if args.case:
        print(json.dumps(run_case(args)))
        return
    if args.ratio_size:
        print(json.dumps(sort_ratio_case(args)))
        return
    if args.stream_queries:
        print(json.dumps(stream_memory(args)))
        return

    import torch

    machine = {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "threads": args.threads or torch.get_num_threads(),
        "device": args.device,
        "repo": str(args.repo or REPO),
        "load_average_before": os.getloadavg(),
    }
    if args.sort_ratio:
        extra = [
            "--device",
            args.device,
            *(["--compiled"] if args.compiled else []),
            *(["--ratio-repeats", str(args.ratio_repeats)] if args.ratio_repeats else []),
        ]
        results = []
        for size in args.sizes.split(","):
            runs = []
            for _ in range(max(args.ratio_runs, 1)):
                runs.append(child("--ratio-size", size, *extra, threads=args.threads, repo=args.repo))
                print(f"[{size}] {runs[-1]}", file=sys.stderr)
            results.append(median_of_runs(runs))
        machine["load_average_after"] = os.getloadavg()
        path = Path(args.json or REPO / "benchmarks" / "results" / "sort_ratio.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"machine": machine, "results": results}, indent=2))
        print_sort_ratio(results, machine)
        return

    report = {
        "machine": machine,
        "workloads": {},
    }
    slow = {"torchmetrics", "pytrec_eval"}
    for wname in args.workloads.split(","):
        w = workload(wname, args.quick)
        results = {}
        for case in args.cases.split(","):
            repeats = args.slow_repeats if case in slow else args.repeats
            extra = ["--device", args.device] if case.startswith("ours") else []
            results[case] = child(
                "--case",
                case,
                "--workload",
                wname,
                "--repeats",
                str(repeats),
                *extra,
                *(["--quick"] if args.quick else []),
                threads=args.threads,
                repo=args.repo,
            )
            print(f"[{wname}] {case}: {results[case]}", file=sys.stderr)
        report["workloads"][wname] = {
            "size": w,
            "results": results,
            "sync_bytes": sync_bytes(w["queries"] * w["length"]),
        }
    if args.stream:
        report["stream"] = [
            child("--stream-queries", n, "--device", args.device, threads=args.threads, repo=args.repo)
            for n in args.stream.split(",")
        ]
    report["machine"]["load_average_after"] = os.getloadavg()
    path = Path(args.json or REPO / "benchmarks" / "results" / "bench_metrics.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    print_report(report)


def print_report(report: dict) -> None:
    print(f"machine: {report['machine']}")
    for wname, w in report["workloads"].items():
        res = w["results"]
        ours = res.get("ours", {}).get("median_s")
        ours_min = res.get("ours", {}).get("min_s")
        reference = res.get("pytrec_eval", {}).get("values") or {}
        print(
            f"\n## {wname}: {w['size']['queries']} queries x {w['size']['length']} docs (batches of {w['size']['batch']})"
        )
        print(
            f"{'case':<14}{'median s':>10}{'ours faster by':>16}{'min s':>10}{'by min':>8}{'peak MB':>10}"
            "   values (pytrec_eval diff)"
        )
        for case, r in res.items():
            if "error" in r:
                print(f"{case:<14}  error: {r['error']}")
                continue
            ratio = r["median_s"] / ours if ours else float("nan")
            low = r["min_s"]
            ratio_min = low / ours_min if ours_min else float("nan")
            diffs = ", ".join(
                f"{k}={v:.6f}" + (f" ({v - reference[k]:+.1e})" if k in reference else "")
                for k, v in r["values"].items()
            )
            jit = f"  [JIT warm-up {r['jit_s']:.1f}s excluded]" if "jit_s" in r else ""
            print(
                f"{case:<14}{r['median_s']:>10.4f}{ratio:>15.1f}x{low:>10.4f}{ratio_min:>7.1f}x"
                f"{r['peak_rss_delta_mb']:>10.0f}   {diffs}{jit}"
            )
        sb = w["sync_bytes"]
        print(f"bytes per process per sync: ours {sb['ours']} B, torchmetrics {sb['torchmetrics'] / 2**20:.1f} MiB")
    for s in report.get("stream", []):
        print(
            f"streaming {s.get('queries')} queries: peak RSS +{s.get('peak_rss_delta_mb', float('nan')):.0f} MB, state {s.get('state_bytes')} B, {s.get('seconds', float('nan')):.1f}s"
        )


if __name__ == "__main__":
    main()
