"""Benchmark: tensor operations and library Python calls per metric update (deterministic counts).

One update of a metric is run once to warm its caches, then once under ``torch.profiler``; the
count is the number of top-level ``aten::`` operations that launch work. On a GPU each is at least
one kernel launch, so for small batches this count, not the arithmetic, sets an update's speed.

    python benchmarks/bench_ops.py               # the three budget cases, counts only
    python benchmarks/bench_ops.py --histogram   # and which operations they are
    python benchmarks/bench_ops.py --repo PATH   # another checkout (e.g. main, for a before/after)
    python benchmarks/bench_ops.py --cpu-large-path   # the path of CPU batches above 2^13 documents

The budgets count the GPU's path (launches), which CPU batches up to 2^13 documents run too
(``torch_rankeval.ranking.view._GPU_PATH_MAX_CPU``) and which the counter forces for its batch
(2^14 documents). Larger CPU batches sort integer keys, sum gains and relevance apart, rank the
ideal by integer grades and, unvalidated in eager mode, read which lists tie; ``--cpu-large-path``
counts that path on the same batch, the one this batch takes on a CPU (:data:`CPU_PATH`).

The counting rule (:func:`count_ops`):

* top-level: an ``aten::`` operation called from another ``aten::`` operation is part of its
  caller (``aten::sum`` inside ``aten::mean`` is not counted twice);
* not counted: views and aliases (``view``, ``slice``, ``expand``, ``unsqueeze``, ...), empty
  allocations (``empty``, ``empty_like``, ``empty_strided``) and metadata queries
  (:data:`NOT_WORK`): none of them launches a kernel;
* counted when they copy: ``to``, ``_to_copy``, ``contiguous``, ``reshape``, ``flatten``,
  ``type_as`` (:data:`MAYBE_COPY`) are counted exactly when an operation that launches work runs
  inside them (a dtype conversion, a copy of a non-contiguous tensor); a no-op ``to`` is free;
* everything else is counted: arithmetic, reductions, scans, sorts, gathers, ``copy_``, and
  allocations that fill (``zeros``, ``ones``, ``full``, ``arange``, ``scalar_tensor``).

The workload is the issue's: eager, default options, ``validate_args=False``, a 256 x 64 float32
batch whose scores tie (one decimal digit), graded 0-3 targets. Counts do not depend on the
machine's load (times do), which is why tests/test_op_budget.py asserts the budgets with this counter.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

#: Operations that never launch work: views, aliases, empty allocations, metadata.
NOT_WORK = frozenset(
    "aten::" + n
    for n in (
        "view",
        "_unsafe_view",
        "_reshape_alias",
        "view_as",
        "expand",
        "expand_as",
        "select",
        "slice",
        "narrow",
        "unsqueeze",
        "squeeze",
        "unsqueeze_",
        "squeeze_",
        "t",
        "transpose",
        "permute",
        "movedim",
        "diagonal",
        "as_strided",
        "alias",
        "detach",
        "lift_fresh",
        "resolve_conj",
        "resolve_neg",
        "unbind",
        "split",
        "chunk",
        "empty",
        "empty_like",
        "empty_strided",
        "result_type",
        "is_nonzero",
        "size",
        "stride",
        "numel",
        "dim",
        "is_floating_point",
        "_has_compatible_shallow_copy_type",
    )
)
#: Operations that are free when they return their input (or a view of it) and work when they copy.
MAYBE_COPY = frozenset("aten::" + n for n in ("to", "_to_copy", "contiguous", "reshape", "flatten", "type_as"))

#: The issue's budgets: operations per update (validate_args=False, 256 x 64 tied float32 batch).
BUDGETS = {"NDCG(k=10)": 25, "RankingMetrics(ndcg, map, k=10)": 40, "RankingMetrics(5 measures x 3 cutoffs)": 65}
#: library Python function calls of one NDCG(k=10) update
CALL_BUDGET = 40
#: count the path of CPU batches above 2^13 documents (the one this batch takes on a CPU) instead of the GPU's
CPU_PATH = False


@contextmanager
def _path() -> Iterator[None]:
    """The counted path for the batch: the GPU's (forced on a CPU) or, with :data:`CPU_PATH`, the CPU's."""
    import torch_rankeval.ranking.view as view

    saved = view._GPU_PATH_MAX_CPU
    view._GPU_PATH_MAX_CPU = 0 if CPU_PATH else 1 << 62
    try:
        yield
    finally:
        view._GPU_PATH_MAX_CPU = saved


def batch(n: int = 256, length: int = 64, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The workload: scores with one decimal digit (many ties), grades 0-3."""
    g = torch.Generator().manual_seed(seed)
    preds = (torch.rand(n, length, generator=g) * 10).round() / 10
    target = torch.randint(0, 4, (n, length), generator=g)
    return preds, target


def cases() -> dict[str, Callable[[], object]]:
    """The budget cases, each a factory of a fresh metric."""
    from torch_rankeval import NDCG, RankingMetrics

    return {
        "NDCG(k=10)": lambda: NDCG(k=10, validate_args=False),
        "RankingMetrics(ndcg, map, k=10)": lambda: RankingMetrics(("ndcg", "map"), k=10, validate_args=False),
        "RankingMetrics(5 measures x 3 cutoffs)": lambda: RankingMetrics(
            ("ndcg", "map", "mrr", "precision", "recall"), k=(5, 10, 20), validate_args=False
        ),
    }


def _launches(event) -> bool:  # noqa: ANN001
    """Whether an event (a MAYBE_COPY one) runs an operation that launches work inside it."""
    for child in event.cpu_children:
        if child.name.startswith("aten::") and child.name not in NOT_WORK:
            if child.name not in MAYBE_COPY or _launches(child):
                return True
    return False


def count_ops(fn: Callable[[], object]) -> list[str]:
    """The names of the top-level ``aten::`` operations that launch work in one call of ``fn``
    (see the module docstring for the rule)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    ops = []
    for e in prof.events():
        if not e.name.startswith("aten::") or e.name in NOT_WORK:
            continue
        parent = e.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        if parent is not None:
            continue  # inside another aten operation: part of it
        if e.name in MAYBE_COPY and not _launches(e):
            continue
        ops.append(e.name)
    return ops


def update_ops(make: Callable[[], object], preds: torch.Tensor, target: torch.Tensor) -> list[str]:
    """The operations of one warm ``update`` of a fresh metric from ``make``."""
    with _path():
        metric = make()
        metric.update(preds, target)  # warm: caches of constant tables, first-call set-up
        return count_ops(lambda: metric.update(preds, target))


def library_calls(make: Callable[[], object], preds: torch.Tensor, target: torch.Tensor) -> Counter:
    """Calls of the library's own Python functions (``torch_rankeval`` modules) in one warm update."""
    import torch_rankeval

    root = str(Path(torch_rankeval.__file__).resolve().parent)
    with _path():
        metric = make()
        metric.update(preds, target)
    calls: Counter = Counter()

    def tracer(frame, event, arg):  # noqa: ANN001, ANN202
        if event == "call":
            code = frame.f_code
            if str(Path(code.co_filename).resolve()).startswith(root):
                calls[f"{Path(code.co_filename).name}:{code.co_name}"] += 1
        return None

    with _path():
        sys.setprofile(tracer)
        try:
            metric.update(preds, target)
        finally:
            sys.setprofile(None)
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--histogram", action="store_true", help="print which operations each case runs")
    parser.add_argument("--repo", default=None, help="checkout whose torch_rankeval is counted (default: this one)")
    parser.add_argument(
        "--cpu-large-path", action="store_true", help="count the path of CPU batches above 2^13 documents"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(Path(args.repo).resolve() if args.repo else Path(__file__).resolve().parents[1]))
    torch.set_num_threads(1)
    preds, target = batch()
    import torch_rankeval

    if args.cpu_large_path:
        global CPU_PATH
        CPU_PATH = True  # the path this batch (2^14 documents) takes on a CPU
        print("the large CPU path: not budgeted (the budgets count the GPU's path; no launches on a CPU)")

    print(f"torch_rankeval from {Path(torch_rankeval.__file__).parent}, torch {torch.__version__}")
    print(f"{'case':<42}{'ops':>6}{'budget':>8}")
    for name, make in cases().items():
        ops = update_ops(make, preds, target)
        print(f"{name:<42}{len(ops):>6}{BUDGETS[name]:>8}")
        if args.histogram:
            for op, n in Counter(ops).most_common():
                print(f"    {n:>4}  {op}")
    calls = library_calls(cases()["NDCG(k=10)"], preds, target)
    print(f"{'NDCG(k=10) library calls':<42}{sum(calls.values()):>6}{CALL_BUDGET:>8}   ({len(calls)} distinct)")
    if args.histogram:
        for fn, n in calls.most_common():
            print(f"    {n:>4}  {fn}")


if __name__ == "__main__":
    main()
