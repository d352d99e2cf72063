"""Speed of the measures beyond trec_eval (ERR, RBP, Judged, fall-out, AUROC, OPA, ARP) against
nDCG@10 in the same run and against torchmetrics' retrieval fall-out / AUROC.

    PYTHONPATH=. python benchmarks/bench_beyond_trec.py [--queries 2000] [--docs 100] [--threads 2] [--device cpu]

Seeded data: grades 0-4, float32 scores, either continuous (no ties) or rounded to 5 levels (many
ties). Times are medians of 5 runs of ``F.evaluate`` (default ``validate_args=True``: lists without
ties take the plain path) and with ``validate_args=False`` (every list through the tie-exact path).
torchmetrics: ``RetrievalFallOut(top_k=10)`` / ``RetrievalAUROC`` fed the same data flat with
``indexes`` (update + compute, one run). OPA is also timed against the ``L x L`` pair tensor of
TF-Ranking's formula written in torch (the memory it needs is printed).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import torch

from torch_rankeval import functional as F


def _median(fn, runs: int = 5) -> float:
    fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _pairs_opa(preds: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """TF-Ranking's OPA written with the L x L pair tensors (ties count as wrong there; 1/2 here)."""
    higher = target.unsqueeze(2) > target.unsqueeze(1)
    diff = preds.unsqueeze(2) - preds.unsqueeze(1)
    correct = ((diff > 0) & higher).sum((1, 2)) + 0.5 * ((diff == 0) & higher).sum((1, 2))
    return correct / higher.sum((1, 2)).clamp(min=1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    n, length = args.queries, args.docs
    target = torch.randint(0, 5, (n, length), generator=g).to(args.device)
    continuous = torch.rand(n, length, generator=g).to(args.device)
    tied = (continuous * 4).round() / 4
    judged = (torch.rand(n, length, generator=g) > 0.1).to(args.device)
    names = [
        "ndcg@10",
        "ERR@10",
        "ERR@20",
        "RBP",
        "rbp_residual",
        "Judged@10",
        "fall_out@10",
        "auroc",
        "auroc@10",
        "opa",
        "arp",
    ]
    print(f"{n} queries x {length} documents, {args.threads} threads, {args.device}; seconds (ratio to nDCG@10)")
    print("| measure | no ties | ties | ties, validate_args=False |\n|---|---|---|---|")
    base = {}
    for name in names:
        row = []
        for preds, validate in ((continuous, True), (tied, True), (tied, False)):
            t = _median(functools.partial(F.evaluate, preds, target, [name], judged=judged, validate_args=validate))
            key = (preds is tied, validate)
            base.setdefault(key, t)
            row.append(f"{t:.4f} ({t / base[key]:.1f}x)")
        print(f"| {name} | " + " | ".join(row) + " |")

    from torchmetrics.retrieval import RetrievalAUROC, RetrievalFallOut

    flat_idx = torch.arange(n, device=args.device).repeat_interleave(length)
    rel = target >= 1
    for label, ours_name, make in [
        ("fall-out@10", "fall_out@10", lambda: RetrievalFallOut(top_k=10)),
        ("AUROC", "auroc", lambda: RetrievalAUROC()),
    ]:
        for preds, tag in ((continuous, "no ties"), (tied, "ties")):
            metric = make()
            t0 = time.perf_counter()
            metric.update(preds.reshape(-1), rel.reshape(-1), indexes=flat_idx)
            theirs = metric.compute()
            t_tm = time.perf_counter() - t0
            t_ours = _median(functools.partial(F.evaluate, preds, rel, [ours_name]))
            ours = F.evaluate(preds, rel, [ours_name], empty_target_action="pos" if "fall" in label else "neg")[
                ours_name
            ]
            print(
                f"{label} ({tag}): ours {t_ours:.4f} s, torchmetrics {t_tm:.3f} s ({t_tm / t_ours:.0f}x slower); "
                f"values {ours.item():.6f} vs {theirs.item():.6f}"
            )

    for docs in (1000, 3000):
        p = (torch.rand(64, docs, generator=g) * 20).round().to(args.device)
        t = torch.randint(0, 5, (64, docs), generator=g).to(args.device)
        t_ours = _median(functools.partial(F.evaluate, p, t, ["opa"]), runs=3)
        t_pairs = _median(functools.partial(_pairs_opa, p, t), runs=3)
        assert torch.allclose(F.evaluate(p, t, ["opa"], reduction="none")["opa"], _pairs_opa(p, t).float(), atol=1e-5)
        print(
            f"OPA, 64 lists x {docs}: ours {t_ours:.4f} s; L x L pair tensors {t_pairs:.4f} s "
            f"({64 * docs * docs * 3 / 2**20:.0f} MiB of pair tensors)"
        )


if __name__ == "__main__":
    main()
