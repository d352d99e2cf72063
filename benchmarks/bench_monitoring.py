"""The cost of standard errors in ``update`` (issue 21): the running sum of squares against an
update without it (the update of the version before standard errors), same run, single thread,
interleaved repeats, the minimum of the repeats.

    PYTHONPATH=. python benchmarks/bench_monitoring.py [--repeats 15]

Prints one line per shape: the two times (ms per update) and their ratio (target: at most 1.1).
Windows (``window=``) are not built yet, so only the standard-error state is measured.
"""

from __future__ import annotations

import argparse
import time

import torch

from torch_rankeval import RankingMetrics
from torch_rankeval.measures.reduction import counted_sums

METRICS = ("ndcg@10", "map", "mrr", "precision@10", "recall@10")
SHAPES = ((256, 64), (10_000, 100))


class _WithoutSquares(RankingMetrics):
    """The update as before standard errors: sums and counts only."""

    def _accumulate(self, values, empty, ids):  # noqa: ANN001, ANN202
        policed, counted = self._policy(values, empty)
        total, count = counted_sums(self._reduction.transform(policed), counted)
        self.sums += total
        self.counts += count


def _time(metric: RankingMetrics, preds: torch.Tensor, target: torch.Tensor, inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        metric.update(preds, target)
    return (time.perf_counter() - start) / inner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    for n, length in SHAPES:
        preds = torch.rand(n, length, generator=g)
        target = torch.randint(0, 3, (n, length), generator=g)
        inner = max(1, 20_000 // n)
        plain = _WithoutSquares(METRICS, validate_args=False)
        stderr = RankingMetrics(METRICS, validate_args=False)
        for m in (plain, stderr):  # warm-up
            _time(m, preds, target, 1)
        best = {"plain": float("inf"), "stderr": float("inf")}
        for _ in range(args.repeats):  # interleaved
            best["plain"] = min(best["plain"], _time(plain, preds, target, inner))
            best["stderr"] = min(best["stderr"], _time(stderr, preds, target, inner))
        print(
            f"{n}x{length}: plain {1e3 * best['plain']:.3f} ms, with standard errors "
            f"{1e3 * best['stderr']:.3f} ms, ratio {best['stderr'] / best['plain']:.3f}"
        )


if __name__ == "__main__":
    main()
