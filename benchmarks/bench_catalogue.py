"""Benchmark: full-catalogue recommender evaluation (nDCG / Recall / MAP@20 with excluded items).

A model scores every item of a 50,000-item catalogue for each of 1,000 users; 50 items per user were
seen in training (excluded: never ranked, never counted) and 10 held-out items per user are the
targets. Every case runs in its own subprocess on the same seeded data, so its peak memory is its own.

    python benchmarks/bench_catalogue.py                     # CPU, all cases
    python benchmarks/bench_catalogue.py --device cuda       # the torch cases on the GPU
    python benchmarks/bench_catalogue.py --quick             # 100 users x 5,000 items: checks the script
    python benchmarks/bench_catalogue.py --interleave 8      # fast cases in one process, in turn: min times

Cases (time = median, or with ``--stat min`` the minimum, of ``--repeats`` runs; torchmetrics and the
dense path (both one run: they take minutes) are the whole computation of all three metrics):

- ``floor``: copy the scores, scatter ``-inf`` at the seen items, ``torch.topk(20)`` -- what any
  top-k evaluation has to pay.
- ``dense``: today's path, ``F.ndcg`` / ``F.recall`` / ``F.average_precision`` with ``k=20`` on a dense
  ``(users, items)`` target and ``mask=~seen``: three full sorts of every row.
- ``torchmetrics``: ``RetrievalNormalizedDCG`` / ``RetrievalRecall`` / ``RetrievalMAP`` with
  ``top_k=20`` on a ``--tm-users`` subset (flat input, seen items dropped), time scaled to all users.
- ``topk_select``: our top-k selection primitive alone (``ranking.topk.topk_view`` without a
  target): one ``topk`` per row, exact tie statistics.
- ``topk_view``: the primitive with the sparse target (grades, tie-group relevance, n_relevant,
  ideal gains): everything the top-k core needs; ``topk_view_unvalidated``: the same with
  ``validate_args=False`` (no host sync: a copy of the scores to apply ``exclude``, and one more pass
  over the scores to find ties at the cutoff); ``topk_view_unvalidated_bound``: the same given
  ``max_excluded_per_row=50`` (known from the ``(users, 50)`` seen-id lists): no copy.
- ``view_reductions``: ``topk_view`` plus plain nDCG / Recall / AP@20 reductions over it (valid here
  because the scores have no ties); a sanity check that the view carries the metrics (its values
  are compared with the dense path), NOT the library's top-k core.
- ``ours``: the library as a user calls it: ``RankingMetrics(("ndcg@20", "recall@20", "map@20"))``,
  ``update(scores, sparse_target, exclude=seen)`` and ``compute()`` (validated: the value checks and
  the spilled-rows read are its host syncs); ``ours_unvalidated``: the same with
  ``validate_args=False`` (no host sync: one copy of the scores to apply ``exclude`` and a row pass).
- ``ours_whole_list``: ``RankingMetrics(("ndcg", "map", "mrr"))`` without a cutoff, the same sparse
  target and ``exclude`` (validated: the view goes as deep as each row's lowest-scored relevant
  item); ``exposure``: ``ItemExposure(50_000, 20).update``.

Peak memory: the process's peak resident memory during the case minus its resident memory before
(the data already allocated), via ``/proc/self/clear_refs`` (Linux); on CUDA, the peak allocated
memory over the data. Reported in MiB and as a multiple of the scores tensor.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's torch_rankeval, not an installed one
K = 20
CASES = (
    "floor", "dense", "torchmetrics", "topk_select", "topk_view", "topk_view_unvalidated",
    "topk_view_unvalidated_bound", "view_reductions", "ours", "ours_unvalidated", "ours_whole_list", "exposure",
)  # fmt: skip


# ---------------------------------------------------------------------------------------- data
def make_data(users: int, items: int, relevant: int, seen: int, device: str, seed: int = 0):
    """Scores (float32, no ties), the relevant and the seen item ids ``(users, m)`` (disjoint)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(users, items, generator=g)
    # distinct random items per user (one permutation per user: setup only)
    ids = torch.stack([torch.randperm(items, generator=g)[: relevant + seen] for _ in range(users)])
    return scores.to(device), ids[:, :relevant].to(device), ids[:, relevant:].to(device)


def sparse_inputs(rel_ids, seen_ids, items):
    import torch

    from torch_rankeval.ranking.sparse import sparse_from_ids

    target = sparse_from_ids(rel_ids, items)
    exclude = sparse_from_ids(seen_ids, items, grades=torch.ones_like(seen_ids, dtype=torch.bool))
    return target, exclude


def dense_inputs(rel_ids, seen_ids, items):
    import torch

    users = rel_ids.shape[0]
    target = torch.zeros(users, items, device=rel_ids.device).scatter_(1, rel_ids, 1.0)
    seen = torch.zeros(users, items, dtype=torch.bool, device=rel_ids.device).scatter_(1, seen_ids, True)
    return target, seen


# ---------------------------------------------------------------------------------------- memory
class PeakMemory:
    """Peak memory of a block over what was resident before it (MiB)."""

    def __init__(self, device: str) -> None:
        self.device = device

    def __enter__(self) -> PeakMemory:  # noqa: PYI034
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
        else:
            with open("/proc/self/clear_refs", "w") as f:  # resets VmHWM to the current RSS
                f.write("5")
            self.base = _status("VmRSS")
        return self

    def __exit__(self, *exc) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            self.peak_mib = (torch.cuda.max_memory_allocated() - self.base) / 2**20
        else:
            self.peak_mib = (_status("VmHWM") - self.base) / 2**20


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


# ---------------------------------------------------------------------------------------- cases
def build_case(name: str, scores, rel_ids, seen_ids, args):
    """Returns (run, values) where run() does the timed work and values(out) -> {metric: mean}."""
    import torch

    items = scores.shape[1]
    if name == "floor":

        def run():
            s = scores.clone()
            s.scatter_(1, seen_ids, float("-inf"))
            return torch.topk(s, K, dim=-1)

        return run, None

    if name == "dense":
        from torch_rankeval import functional as F

        target, seen = dense_inputs(rel_ids, seen_ids, items)
        mask = ~seen
        del seen

        def run():
            return {
                "ndcg@20": F.ndcg(scores, target, k=K, mask=mask),
                "recall@20": F.recall(scores, target, k=K, mask=mask),
                "map@20": F.average_precision(scores, target, k=K, mask=mask),
            }

        return run, lambda out: {key: v.item() for key, v in out.items()}

    if name == "torchmetrics":
        from torchmetrics.retrieval import RetrievalMAP, RetrievalNormalizedDCG, RetrievalRecall

        n = min(args.tm_users, scores.shape[0])
        target, seen = dense_inputs(rel_ids[:n], seen_ids[:n], items)
        keep = ~seen
        flat_preds = scores[:n][keep]
        flat_target = target[keep].long()
        indexes = torch.arange(n, device=scores.device).unsqueeze(-1).expand(n, items)[keep]
        del target, seen, keep

        def run():
            out = {}
            for key, cls in (
                ("ndcg@20", RetrievalNormalizedDCG),
                ("recall@20", RetrievalRecall),
                ("map@20", RetrievalMAP),
            ):
                metric = cls(top_k=K).to(scores.device)
                metric.update(flat_preds, flat_target, indexes=indexes)
                out[key] = metric.compute()
            return out

        return run, lambda out: {key: v.item() for key, v in out.items()}

    if name in ("topk_select", "topk_view", "topk_view_unvalidated", "topk_view_unvalidated_bound", "view_reductions"):
        from torch_rankeval.ranking.topk import topk_view

        target, exclude = sparse_inputs(rel_ids, seen_ids, items)
        with_target = name != "topk_select"
        validate = not name.startswith("topk_view_unvalidated")
        bound = seen_ids.shape[1] if name == "topk_view_unvalidated_bound" else None

        def run():
            view = topk_view(
                scores, K, target=target if with_target else None, exclude=exclude, validate_args=validate,
                max_excluded_per_row=bound,
            )  # fmt: skip
            if name != "view_reductions":
                return view
            return _plain_reductions(view)

        return run, (
            lambda out: {key: v.mean().item() for key, v in out.items()}
        ) if name == "view_reductions" else None

    if name in ("ours", "ours_unvalidated"):
        from torch_rankeval import RankingMetrics

        target, exclude = sparse_inputs(rel_ids, seen_ids, items)
        metric = RankingMetrics(("ndcg@20", "recall@20", "map@20"), validate_args=name == "ours").to(scores.device)

        def run():
            metric.reset()
            metric.update(scores, target, exclude=exclude)
            return metric.compute()

        return run, lambda out: {key: v.item() for key, v in out.items()}

    if name == "ours_whole_list":
        from torch_rankeval import RankingMetrics

        target, exclude = sparse_inputs(rel_ids, seen_ids, items)
        metric = RankingMetrics(("ndcg", "map", "mrr")).to(scores.device)

        def run():
            metric.reset()
            metric.update(scores, target, exclude=exclude)
            return metric.compute()

        return run, lambda out: {key: v.item() for key, v in out.items()}

    if name == "exposure":
        from torch_rankeval.metrics import ItemExposure

        _, exclude = sparse_inputs(rel_ids, seen_ids, items)
        metric = ItemExposure(items, K).to(scores.device)

        def run():
            metric.reset()
            metric.update(scores, exclude=exclude)
            return metric.compute()

        return run, None
    raise ValueError(name)


def _plain_reductions(view):
    """nDCG / Recall / AP@20 from a view of tie-free scores (exp2 gain, log2 discount, AP over all relevant)."""
    import torch

    positions = torch.arange(1, view.k + 1, device=view.gains.device, dtype=view.gains.dtype)
    discount = 1.0 / torch.log2(positions + 1)
    idcg = (view.ideal_gains * discount).sum(-1)
    ndcg = torch.where(idcg > 0, (view.gains * discount).sum(-1) / idcg.clamp(min=1e-30), 0.0)
    n_rel = view.n_relevant
    hits = view.rel.sum(-1)
    recall = torch.where(n_rel > 0, hits / n_rel.clamp(min=1), 0.0)
    precision_at = view.rel.cumsum(-1) / positions
    ap = torch.where(n_rel > 0, (precision_at * view.rel).sum(-1) / n_rel.clamp(min=1), 0.0)
    return {"ndcg@20": ndcg, "recall@20": recall, "map@20": ap}


def run_case(args) -> dict:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="Sparse")
    scores, rel_ids, seen_ids = make_data(args.users, args.items, args.relevant, args.seen, args.device)
    run, values = build_case(args.case, scores, rel_ids, seen_ids, args)
    out = run()  # warm-up (allocator, lazy imports, numba-free)
    del out
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    repeats = 1 if args.case in ("torchmetrics", "dense") else args.repeats  # the slow peers: one run
    times, peaks = [], []
    for _ in range(repeats):
        sync()
        with PeakMemory(args.device) as mem:
            t0 = time.perf_counter()
            out = run()
            sync()
            times.append(time.perf_counter() - t0)
        peaks.append(mem.peak_mib)
        result_values = values(out) if values else None
        del out
    seconds = min(times) if args.stat == "min" else statistics.median(times)
    users_timed = min(args.tm_users, args.users) if args.case == "torchmetrics" else args.users
    scores_mib = scores.numel() * scores.element_size() / 2**20
    return {
        "case": args.case,
        "seconds": seconds * args.users / users_timed,
        "seconds_measured": seconds,
        "stat": args.stat,
        "times": times,
        "users_timed": users_timed,
        "peak_extra_mib": max(peaks),
        "peak_extra_x_scores": max(peaks) / (scores_mib * users_timed / args.users),
        "values": result_values,
    }


def interleaved(args) -> dict:
    """The fast cases in ONE process, called in turn ``--interleave`` times; the minimum time of each.
    On a shared machine whose load drifts during a run this compares the cases under the same
    conditions (memory is not measured here: use the per-process mode)."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="Sparse")
    scores, rel_ids, seen_ids = make_data(args.users, args.items, args.relevant, args.seen, args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    names = [c for c in args.cases.split(",") if c in FAST]
    runs = {name: build_case(name, scores, rel_ids, seen_ids, args)[0] for name in names}
    best = dict.fromkeys(names, float("inf"))
    for _ in range(args.interleave):
        for name, run in runs.items():
            sync()
            t0 = time.perf_counter()
            run()
            sync()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


FAST = ("floor", "topk_select", "topk_view", "topk_view_unvalidated", "topk_view_unvalidated_bound", "view_reductions", "ours", "ours_unvalidated",
        "exposure")  # fmt: skip


# ---------------------------------------------------------------------------------------- parent
def child(args, case: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, __file__, "--case", case, "--users", str(args.users), "--items", str(args.items),
           "--relevant", str(args.relevant), "--seen", str(args.seen), "--device", args.device,
           "--repeats", str(args.repeats), "--tm-users", str(args.tm_users), "--stat", args.stat]  # fmt: skip
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return {
            "case": case,
            "error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}",
        }
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--relevant", type=int, default=10)
    parser.add_argument("--seen", type=int, default=50)
    parser.add_argument("--tm-users", type=int, default=200, help="users in the torchmetrics subset (time scaled up)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--stat", default="median", choices=["median", "min"], help="min is steadier on a shared, loaded machine"
    )
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--quick", action="store_true", help="100 users x 5,000 items, 2 repeats")
    parser.add_argument("--json", default=str(REPO / "benchmarks" / "results" / "bench_catalogue.json"))
    parser.add_argument(
        "--interleave", type=int, default=0, help="run the fast cases in one process, in turn, this many rounds"
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.users, args.items, args.repeats, args.tm_users = 100, 5_000, 2, 50
    if args.case:
        print(json.dumps(run_case(args)))
        return
    if args.interleave:
        best = interleaved(args)
        for name, seconds in best.items():
            ratio = f"{seconds / best['floor']:6.2f}x floor" if "floor" in best else ""
            print(f"{name:<28} {seconds:8.3f} s (min of {args.interleave})   {ratio}")
        return

    import torch

    report = {
        "machine": {
            "platform": platform.platform(), "cpus": os.cpu_count(), "torch": torch.__version__,
            "threads": args.threads or torch.get_num_threads(), "device": args.device,
            "load_average_before": os.getloadavg(),
        },
        "workload": {"users": args.users, "items": args.items, "relevant": args.relevant, "seen": args.seen, "k": K},
        "cases": {},
    }  # fmt: skip
    for case in args.cases.split(","):
        result = child(args, case)
        report["cases"][case] = result
        print(_line(result, report["cases"].get("floor"), report["cases"].get("dense")), flush=True)
    report["machine"]["load_average_after"] = os.getloadavg()
    _check_values(report["cases"])
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2))
    print(
        f"load average before/after: {report['machine']['load_average_before']} / "
        f"{report['machine']['load_average_after']}"
    )
    print(f"written to {args.json}")


def _line(r: dict, floor: dict | None, dense: dict | None) -> str:
    if "error" in r:
        return f"{r['case']:<24} ERROR {r['error']}"
    if "status" in r:
        return f"{r['case']:<24} {r['status']}"
    text = f"{r['case']:<24} {r['seconds']:9.3f} s"
    if floor and "seconds" in floor:
        text += f"   {r['seconds'] / floor['seconds']:6.2f}x floor"
    if dense and "seconds" in dense and r is not dense:
        text += f"   {dense['seconds'] / r['seconds']:7.1f}x faster than dense"
    text += f"   peak +{r['peak_extra_mib']:.0f} MiB ({r['peak_extra_x_scores']:.2f}x scores)"
    if r["users_timed"] != 1000 and r["case"] == "torchmetrics":
        text += f"   [{r['users_timed']} users, scaled]"
    return text


def _check_values(cases: dict) -> None:
    dense = cases.get("dense", {}).get("values")
    for name in ("view_reductions", "ours", "ours_unvalidated"):
        got = cases.get(name, {}).get("values")
        if dense and got:
            worst = max(abs(got[k] - dense[k]) for k in dense)
            print(f"{name} vs dense path: max |difference| of the means = {worst:.2e}")
            assert worst < 1e-5, (got, dense)


if __name__ == "__main__":
    main()
