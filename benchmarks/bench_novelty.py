"""Benchmark: beyond-accuracy metrics over a full catalogue against the top-k floor, in one run.

1,000 users x 50,000 items (float32 scores, no ties), 50 seen items per user excluded (sparse COO),
64-dimensional item embeddings. Cases, run in turn in one process (``--repeats`` rounds; the
minimum of each is reported, with its ratio to the floor):

- ``floor``: copy the scores, scatter ``-inf`` at the seen items, ``torch.topk(20)``: what any top-k
  evaluation pays;
- ``diversity`` / ``diversity_unvalidated``: ``IntraListDiversity(50_000, 20, embeddings=...)
  .update(scores, exclude=seen)`` (unvalidated on the CPU: the spilled rows and the largest
  excluded count are read from host memory, as when validated, without the checks);
- ``diversity_sync_free``: unvalidated on the sync-free path that CUDA and ``torch.compile`` take
  (``torch_rankeval.ranking.topk.CPU_HOST_READS = False``): every row gets the pass over its
  scores for the tied group, ``rows x items x 65`` float64 multiply-adds (on CUDA the same as
  ``diversity_unvalidated``);
- ``novelty`` / ``novelty_unvalidated`` / ``novelty_sync_free``: ``Novelty(50_000, 20, popularity).update``;
- ``exposure``: ``ItemExposure(50_000, (10, 20), popularity, tail_ratio=0.2).update``.

    python benchmarks/bench_novelty.py            # CPU
    python benchmarks/bench_novelty.py --quick    # 100 x 5,000: checks the script
    python benchmarks/bench_novelty.py --device cuda
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's torch_rankeval

import torch  # noqa: E402

from torch_rankeval.metrics import IntraListDiversity, ItemExposure, Novelty  # noqa: E402
from torch_rankeval.ranking import topk as topk_module  # noqa: E402

K = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--seen", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.users, args.items, args.repeats = 100, 5000, 2
    dev = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    scores = torch.rand(args.users, args.items, generator=g).to(dev)
    seen_ids = torch.randint(0, args.items, (args.users, args.seen), generator=g).to(dev)
    rows = torch.arange(args.users, device=dev).repeat_interleave(args.seen)
    seen = torch.sparse_coo_tensor(
        torch.stack([rows, seen_ids.reshape(-1)]), torch.ones(rows.numel(), dtype=torch.bool, device=dev),
        (args.users, args.items),
    ).coalesce()  # fmt: skip
    embeddings = torch.randn(args.items, args.dim, generator=g).to(dev)
    popularity = torch.randint(0, 1000, (args.items,), generator=g).double().to(dev)

    def floor() -> None:
        x = scores.clone()
        x.scatter_(1, seen_ids, float("-inf"))
        torch.topk(x, K, dim=1)

    metrics = {
        "diversity": IntraListDiversity(args.items, K, embeddings=embeddings).to(dev),
        "diversity_unvalidated": IntraListDiversity(args.items, K, embeddings=embeddings, validate_args=False).to(dev),
        "diversity_sync_free": IntraListDiversity(args.items, K, embeddings=embeddings, validate_args=False).to(dev),
        "novelty": Novelty(args.items, K, popularity).to(dev),
        "novelty_unvalidated": Novelty(args.items, K, popularity, validate_args=False).to(dev),
        "novelty_sync_free": Novelty(args.items, K, popularity, validate_args=False).to(dev),
        "exposure": ItemExposure(args.items, (10, K), popularity=popularity, tail_ratio=0.2).to(dev),
    }

    def case(name: str, metric):  # noqa: ANN001
        def run() -> None:
            topk_module.CPU_HOST_READS = not name.endswith("_sync_free")
            try:
                metric.update(scores, exclude=seen)
            finally:
                topk_module.CPU_HOST_READS = True

        return run

    cases = {"floor": floor, **{name: case(name, m) for name, m in metrics.items()}}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats + 1):  # the first round warms up
        for name, fn in cases.items():
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - t0)
    best = {name: min(t[1:]) for name, t in times.items()}
    out = {name: {"seconds": round(t, 4), "x_floor": round(t / best["floor"], 2)} for name, t in best.items()}
    print(json.dumps({"users": args.users, "items": args.items, "dim": args.dim, "device": str(dev),
                      "threads": torch.get_num_threads(), "cases": out}, indent=1))  # fmt: skip
    for m in metrics.values():  # the metrics computed something
        assert all(torch.isfinite(v) for v in m.compute().values())


if __name__ == "__main__":
    main()
