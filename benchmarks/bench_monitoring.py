"""The cost of monitoring in ``update`` (issue 21): standard errors (the running sum of squares),
a window of the last 100 updates with standard errors (``window=100``), a window of the last 100
lists (``window_unit="queries"``) and exponential decay (``half_life=``), each against an update
without any of them (the update of the version before standard errors); same run, single thread,
interleaved repeats (the order rotated each repeat), the minimum of the repeats, in CPU time of the
one thread (``--wall``: wall-clock).

    PYTHONPATH=. python benchmarks/bench_monitoring.py [--repeats 60] [--wall]

Prints one line per shape: the plain time (ms per update) and each variant's time and ratio to it
(target for ``window=100`` with standard errors: at most 1.1).
"""

from __future__ import annotations

import argparse
import time

import torch

from torch_rankeval import RankingMetrics
from torch_rankeval.measures.reduction import counted_sums

METRICS = ("ndcg@10", "map", "mrr", "precision@10", "recall@10")
SHAPES = ((256, 64), (10_000, 100))
WALL = False


class _WithoutSquares(RankingMetrics):
    """The update as before standard errors: sums and counts only."""

    def _accumulate(self, values, empty, ids):  # noqa: ANN001, ANN202
        policed, counted = self._policy(values, empty)
        total, count = counted_sums(self._reduction.transform(policed), counted)
        self.sums += total
        self.counts += count


def _time(metric: RankingMetrics, preds: torch.Tensor, target: torch.Tensor, inner: int) -> float:
    """Seconds per update, in CPU time of this (one) thread: other processes on a shared machine
    do not inflate it (``--wall``: wall-clock time)."""
    clock = time.perf_counter if WALL else time.thread_time
    start = clock()
    for _ in range(inner):
        metric.update(preds, target)
    return (clock() - start) / inner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--wall", action="store_true", help="wall-clock time instead of this thread's CPU time")
    args = parser.parse_args()
    global WALL
    WALL = args.wall
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    for n, length in SHAPES:
        preds = torch.rand(n, length, generator=g)
        target = torch.randint(0, 3, (n, length), generator=g)
        inner = max(1, 2_000 // n)  # short timed blocks: the minimum dodges a busy machine's pauses
        variants = {
            "plain": _WithoutSquares(METRICS, validate_args=False),
            "stderr": RankingMetrics(METRICS, validate_args=False),
            "window=100": RankingMetrics(METRICS, validate_args=False, window=100),
            "window=100 queries": RankingMetrics(METRICS, validate_args=False, window=100, window_unit="queries"),
            "half_life=50": RankingMetrics(METRICS, validate_args=False, half_life=50.0),
            "half_life=50 queries": RankingMetrics(METRICS, validate_args=False, half_life=50.0, window_unit="queries"),
        }
        for m in variants.values():  # warm-up
            _time(m, preds, target, 1)
        best = dict.fromkeys(variants, float("inf"))
        names = list(variants)
        for r in range(args.repeats):  # interleaved, the order rotated every repeat
            for name in names[r % len(names) :] + names[: r % len(names)]:
                best[name] = min(best[name], _time(variants[name], preds, target, inner))
        plain = best["plain"]
        parts = [f"{name} {1e3 * t:.3f} ms ({t / plain:.3f}x)" for name, t in best.items() if name != "plain"]
        print(f"{n}x{length}: plain {1e3 * plain:.3f} ms; " + "; ".join(parts))


if __name__ == "__main__":
    main()
