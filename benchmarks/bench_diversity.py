"""alpha-nDCG@20 (ndeval's definition) on subtopic judgments: torch_rankeval against pyndeval (ndeval.c
4.5 compiled as a Python extension), end to end.

    PYTHONPATH=. python benchmarks/bench_diversity.py [--queries 10000] [--docs 100] [--subtopics 10] [--repeats 3]

Seeded data: every query has ``--docs`` retrieved documents, all judged for ``--subtopics`` subtopics
(each (document, subtopic) relevant with probability 0.1), distinct float scores. pyndeval's input is
its own: the qrels and the run as Python tuples (built once, outside the timing; its evaluator is
built inside, as ``pyndeval.ndeval`` does); ours is ``F.evaluate`` on the ``(N, L)`` scores and the
``(N, L, S)`` dense subtopic grades (``ties="first"``, ``validate_args=True``: its checks included).
One thread; the minimum of ``--repeats`` interleaved repeats (ours, then pyndeval, and again). The
per-query values are checked to agree first.
"""

from __future__ import annotations

import argparse
import time

import torch

from torch_rankeval import functional as F


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--subtopics", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import pyndeval

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    n, length, s = args.queries, args.docs, args.subtopics
    target = (torch.rand(n, length, s, generator=g) < 0.1).to(torch.int64)
    preds = torch.rand(n, length, generator=g, dtype=torch.float64)
    docnos = [f"d{d:04d}" for d in range(length)]
    subtopics = [str(j) for j in range(s)]
    qrels = [
        (f"q{q}", subtopics[j], docnos[d], int(v))
        for q, row in enumerate(target.tolist())
        for d, grades in enumerate(row)
        for j, v in enumerate(grades)
    ]
    run = [(f"q{q}", docnos[d], score) for q, row in enumerate(preds.tolist()) for d, score in enumerate(row)]

    def ours() -> torch.Tensor:
        return F.evaluate(preds, target, "alpha_nDCG@20", ties="first", reduction="none")["alpha_nDCG@20"]

    def theirs() -> dict:
        return pyndeval.ndeval(qrels, run, measures=["alpha-nDCG@20"])

    ref = theirs()
    expected = torch.tensor([ref[f"q{q}"]["alpha-nDCG@20"] for q in range(n)], dtype=torch.float64)
    torch.testing.assert_close(ours().double(), expected, atol=1e-6, rtol=1e-6)

    times: dict[str, list[float]] = {"torch_rankeval": [], "pyndeval": []}
    for _ in range(args.repeats):
        for name, fn in (("torch_rankeval", ours), ("pyndeval", theirs)):
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    best = {k: min(v) for k, v in times.items()}
    print(f"alpha-nDCG@20, {n} queries x {length} documents x {s} subtopics, 1 thread, min of {args.repeats}")
    print("| tool | seconds |\n|---|---|")
    for name, t in best.items():
        print(f"| {name} | {t:.3f} |")
    print(f"ratio pyndeval / torch_rankeval: {best['pyndeval'] / best['torch_rankeval']:.1f}x")


if __name__ == "__main__":
    main()
