"""What does the position profile cost next to the metrics it sits beside?

Times ``update`` of PositionProfile (P positions, with and without the ideal profile) against
RankingMetrics(("ndcg@P",)) and RankingMetrics(("ndcg@P", "map", "mrr")) on the same padded batch,
in the same run, and prints ratios; also the bytes one distributed sync moves.

    PYTHONPATH=. python benchmarks/position_profile.py [--queries 4096] [--docs 100] [--positions 10] [--device cpu]
"""

from __future__ import annotations

import argparse
import time

import torch

from torch_rankeval import PositionProfile, RankingMetrics


def _time(metric, preds, target, mask, repeat: int) -> float:
    metric.update(preds, target, mask=mask)  # warm-up (tables, allocator)
    best = float("inf")
    for _ in range(repeat):
        if preds.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        metric.update(preds, target, mask=mask)
        if preds.is_cuda:
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=4096)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--positions", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    g = torch.Generator().manual_seed(0)
    preds = torch.rand(args.queries, args.docs, generator=g).to(args.device)
    target = torch.randint(0, 5, (args.queries, args.docs), generator=g).to(args.device)
    mask = (torch.rand(args.queries, args.docs, generator=g) > 0.1).to(args.device)
    p = args.positions
    contenders = {
        f"RankingMetrics(ndcg@{p})": RankingMetrics((f"ndcg@{p}",), validate_args=False),
        f"RankingMetrics(ndcg@{p}, map, mrr)": RankingMetrics((f"ndcg@{p}", "map", "mrr"), validate_args=False),
        f"PositionProfile({p}, ideal=False)": PositionProfile(p, ideal=False, validate_args=False),
        f"PositionProfile({p})": PositionProfile(p, validate_args=False),
    }
    times = {name: _time(m.to(args.device), preds, target, mask, args.repeat) for name, m in contenders.items()}
    base = times[f"RankingMetrics(ndcg@{p})"]
    print(f"update of a {args.queries} x {args.docs} batch on {args.device}, best of {args.repeat}")
    for name, t in times.items():
        m = contenders[name]
        sync_bytes = 8 * (m.sums.numel() + m.counts.numel() + 5)
        print(f"  {name:<36} {t * 1e3:8.2f} ms   x{t / base:5.2f}   sync {sync_bytes} bytes")


if __name__ == "__main__":
    main()
