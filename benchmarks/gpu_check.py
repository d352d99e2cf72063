"""GPU proof: every metric and convention on CUDA equals the CPU, ``update`` makes no host sync,
the state's memory, and speed against torchmetrics and ``torch.sort`` on the same GPU.

One command, under five minutes on one GPU::

    python benchmarks/gpu_check.py                       # CUDA; exits 2 with a message without it
    python benchmarks/gpu_check.py --device cpu --threads 1   # self-check of the script on the CPU
    python benchmarks/gpu_check.py --json out.json       # also write the figures ($OUT/gpu_check.json by default)

Sections (each prints its table; the process exits 1 if a check fails):

1. **equality**: a grid of metrics x conventions (presets, tie policies, gains, AP denominators,
   graded AP, padding, ``ideal_target``, ``n_relevant``, float32 and float64 inputs, bfloat16
   scores), plus position-debiased nDCG and the position profile: the device's values equal the
   CPU's to 1e-6 (absolute and relative).
2. **no host sync**: ``RankingMetrics.update`` with ``validate_args=False`` under
   ``torch.cuda.set_sync_debug_mode("error")`` (on the CPU: a dispatch-mode shim that refuses
   value reads and data-dependent shapes), for every tie policy, padding, ``ideal_target``,
   ``n_relevant`` and mapped gains; and the validated update's single sync is counted.
3. **memory**: the metric state's bytes, and the peak device memory of streaming 10,000 x 100
   batches (the state does not grow with the number of queries).
4. **speed**: ``RankingMetrics(("ndcg@10", "map"))`` against torchmetrics'
   ``RetrievalNormalizedDCG(top_k=10)`` + ``RetrievalMAP`` on the same device, for one 10,000 x 100
   batch and for a validation loop of 200 batches of 256 x 64; and ``update`` divided by one
   ``torch.sort`` of the same batch (the issue-12 table: 256 x 64, 1,000 x 100, 10,000 x 100, ties
   or not, ``validate_args`` True/False, float32/bfloat16 scores).
5. **compile**: ``RankingMetrics(compile=True)`` (inductor) equals eager, makes no host sync, and
   its update time next to eager's and a sort's.
6. **catalogue**: full-catalogue evaluation (sparse targets, ``exclude``) on the device equals the
   CPU's dense path (COO / CSR, ties, float32 / float64 / bfloat16, validated or not) and
   ``ItemExposure`` the CPU's; no host sync unvalidated; 1,000 x 50,000 users x items against the
   top-k floor, the dense path and torchmetrics (a subset, scaled), with peak device memory.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch

ALL = ("ndcg", "dcg", "idcg", "map", "mrr", "precision", "recall", "hit_rate", "r_precision")
FAILURES: list[str] = []


def log(msg: str) -> None:
    print(msg, flush=True)


# ------------------------------------------------------------------------------------ data
def make_batch(n: int, length: int, *, seed: int, ties: bool, pad: bool, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    preds = (
        torch.randint(0, 6, (n, length), generator=g).to(dtype)
        if ties
        else torch.randn(n, length, generator=g, dtype=dtype)
    )
    target = torch.randint(0, 5, (n, length), generator=g)
    target = torch.where(torch.rand(n, length, generator=g) < 0.5, torch.zeros_like(target), target)
    mask = torch.rand(n, length, generator=g) > 0.25 if pad else None
    ideal = torch.cat([target if mask is None else target * mask, torch.randint(0, 5, (n, 4), generator=g)], dim=1)
    n_rel = (ideal >= 1).sum(-1)
    return preds, target, mask, ideal, n_rel


def to(x, device):
    return None if x is None else x.to(device)


# ------------------------------------------------------------------------------------ 1. equality
CONVENTIONS = [
    {},
    {"convention": "trec_eval"},
    {"convention": "torchmetrics"},
    {"convention": "sklearn"},
    {"convention": "lightgbm"},
    {"ties": "first"},
    {"ties": "pessimistic"},
    {"ties": "optimistic"},
    {"gain": "linear", "log_base": 10.0},
    {"gain": {0: 0.0, 1: 0.5, 2: 2.0, 3: 5.0, 4: 9.0}},
    {"denominator": "retrieved_relevant"},
    {"denominator": "min_k_relevant", "adaptive_k": True},
    {"graded": True},
    {"graded": True, "denominator": "min_k_relevant"},
    {"relevance_threshold": 2, "empty_target_action": "pos"},
    {"empty_target_action": "skip"},
]


def equality(device: str) -> list[dict]:
    from torch_rankeval import RankingMetrics
    from torch_rankeval import functional as F

    rows = []
    inputs = {
        "float32, ties, padded": make_batch(64, 40, seed=0, ties=True, pad=True),
        "float64, no ties": make_batch(64, 40, seed=1, ties=False, pad=False, dtype=torch.float64),
        "bfloat16 scores, ties, padded": make_batch(64, 40, seed=2, ties=True, pad=True, dtype=torch.bfloat16),
    }
    extras = {"": {}, "ideal_target": {"ideal": True}, "n_relevant": {"n_rel": True}}
    for (iname, (preds, target, mask, ideal, n_rel)), conv, (ename, extra) in itertools.product(
        inputs.items(), CONVENTIONS, extras.items()
    ):
        ks = (1, 3, 10, 50)
        kwargs = {
            "mask": mask,
            "ideal_target": ideal if extra.get("ideal") else None,
            "n_relevant": n_rel if extra.get("n_rel") else None,
        }
        label = f"{iname} | {conv or 'defaults'} | {ename or '-'}"
        try:
            results = {}
            for dev in ("cpu", device):
                m = RankingMetrics(ALL, k=ks, **conv).to(dev)
                m.update(preds.to(dev), target.to(dev), **{k: to(v, dev) for k, v in kwargs.items()})
                results[dev] = {k: v.detach().double().cpu() for k, v in m.compute().items()}
        except ValueError as err:  # a combination the library refuses (graded retrieved AP at a cutoff)
            rows.append({"case": label, "status": f"refused: {str(err)[:60]}"})
            continue
        worst = max(_err(results["cpu"][k], results[device][k]) for k in results["cpu"])
        ok = worst <= 1e-6
        rows.append({"case": label, "max_rel_err": worst, "status": "ok" if ok else "MISMATCH"})
        if not ok:
            FAILURES.append(f"equality: {label}: {worst:.2e}")
    # the functional kernels with reduction="none" (per query), the debiased metric and the profile
    preds, target, mask, ideal, n_rel = make_batch(128, 30, seed=3, ties=True, pad=True)
    fns = {
        "F.ndcg none": lambda d: F.ndcg(preds.to(d), target.to(d), [1, 5], mask=to(mask, d), reduction="none"),
        "F.average_precision none": lambda d: F.average_precision(
            preds.to(d), target.to(d), 5, mask=to(mask, d), denominator="retrieved_relevant", reduction="none"
        ),
        "F.reciprocal_rank none": lambda d: F.reciprocal_rank(
            preds.to(d), target.to(d), mask=to(mask, d), reduction="none"
        ),
        "F.hit_rate none": lambda d: F.hit_rate(preds.to(d), target.to(d), [2, 8], mask=to(mask, d), reduction="none"),
        "F.position_debiased_ndcg": lambda d: F.position_debiased_ndcg(
            preds.to(d),
            (target > 1).to(d).float(),
            5,
            propensities=(torch.rand(128, 30, generator=torch.Generator().manual_seed(9)) * 0.9 + 0.1).to(d),
            mask=to(mask, d),
            empty_target_action="neg",
        ),
    }
    for name, fn in fns.items():
        worst = _err(fn("cpu").double().cpu(), fn(device).double().cpu())
        rows.append({"case": name, "max_rel_err": worst, "status": "ok" if worst <= 1e-6 else "MISMATCH"})
        if worst > 1e-6:
            FAILURES.append(f"equality: {name}: {worst:.2e}")
    from torch_rankeval import PositionProfile

    prof = {}
    for dev in ("cpu", device):
        m = PositionProfile(positions=12).to(dev)
        m.update(preds.to(dev), target.to(dev), mask=to(mask, dev))
        prof[dev] = {k: v.double().cpu() for k, v in m.compute().items()}
    worst = max(_err(prof["cpu"][k], prof[device][k]) for k in prof["cpu"])
    rows.append({"case": "PositionProfile", "max_rel_err": worst, "status": "ok" if worst <= 1e-6 else "MISMATCH"})
    if worst > 1e-6:
        FAILURES.append(f"equality: PositionProfile: {worst:.2e}")
    return rows


def _err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    both_nan = torch.isnan(a) & torch.isnan(b)
    if bool((torch.isnan(a) ^ torch.isnan(b)).any()):
        return float("inf")
    diff = torch.where(both_nan, 0.0, (a - b).abs() / b.abs().clamp(min=1.0))
    return float(diff.max()) if diff.numel() else 0.0


# ------------------------------------------------------------------------------------ 2. host syncs
class _CpuSyncShim:
    """On the CPU: catch what syncs on CUDA: value reads (``item``, ``tolist``, ``bool(tensor)``, ...,
    seen as Python calls, since ``tolist`` never reaches the dispatcher on the CPU) and the operators
    with data-dependent shapes. ``shim(refuse=True)`` raises on the first one; ``shim.count`` counts."""

    READS = frozenset({"item", "tolist", "__bool__", "__int__", "__float__", "__index__", "cpu", "numpy", "nonzero"})

    def __init__(self) -> None:
        from torch.overrides import TorchFunctionMode
        from torch.utils._python_dispatch import TorchDispatchMode

        aten = torch.ops.aten
        ops = {
            aten._local_scalar_dense.default,
            aten.nonzero.default,
            aten.masked_select.default,
            aten.equal.default,
            aten._unique2.default,
            aten.unique_consecutive.default,
            aten.is_nonzero.default,
        }
        self.count, self.inside, self.refuse = 0, False, True
        shim = self

        class Reads(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                if getattr(func, "__name__", "") not in shim.READS or shim.inside:
                    return func(*args, **(kwargs or {}))
                shim.hit(f"{func.__name__}()")
                shim.inside = True  # the operators it runs are the same sync
                try:
                    return func(*args, **(kwargs or {}))
                finally:
                    shim.inside = False

        class Operators(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if not shim.inside and (
                    func in ops
                    or (
                        func is aten.index.Tensor
                        and any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or []))
                    )
                ):
                    shim.hit(str(func))
                return func(*args, **(kwargs or {}))

        self._modes = (Reads, Operators)

    def hit(self, what: str) -> None:
        self.count += 1
        if self.refuse:
            raise RuntimeError(f"host sync: {what}")

    def __call__(self, refuse: bool = True):
        import contextlib

        self.refuse = refuse
        stack = contextlib.ExitStack()
        for mode in self._modes:
            stack.enter_context(mode())
        return stack


def _without_sync(calls, device: str, shim: _CpuSyncShim | None) -> None:
    """Run ``calls`` with every host sync refused (``RuntimeError``): CUDA's sync debug mode on the
    GPU, the shim on the CPU."""
    if device == "cpu":
        with shim():
            for call in calls:
                call()
        return
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for call in calls:
            call()
    finally:
        torch.cuda.set_sync_debug_mode("default")


def no_sync(device: str) -> list[dict]:
    from torch_rankeval import RankingMetrics

    rows = []
    preds, target, mask, ideal, n_rel = (to(t, device) for t in make_batch(256, 64, seed=4, ties=True, pad=True))
    configs = {f"ties={t}": {"ties": t} for t in ("average", "first", "pessimistic", "optimistic")}
    configs["mapped gain, graded AP"] = {
        "gain": {0: 0.0, 1: 1.0, 2: 3.0, 3: 7.0, 4: 15.0},
        "graded": True,
        "denominator": "min_k_relevant",
    }
    configs["retrieved-relevant AP"] = {"metrics": ("map",), "denominator": "retrieved_relevant"}
    shim = _CpuSyncShim() if device == "cpu" else None
    for name, conf in configs.items():
        metrics = conf.pop("metrics", ALL)
        m = RankingMetrics(metrics, k=(1, 5, 20), validate_args=False, **conf).to(device)
        m.update(preds, target, mask=mask)  # tables grown once, outside
        calls = [
            lambda m=m: m.update(preds, target, mask=mask),
            lambda m=m: m.update(preds, target, mask=mask, ideal_target=ideal, n_relevant=n_rel),
            lambda m=m: m.update(preds.bfloat16(), target),
        ]
        try:
            _without_sync(calls, device, shim)
            rows.append({"case": name, "status": "ok: no host sync"})
        except RuntimeError as err:
            rows.append({"case": name, "status": f"SYNC: {str(err).splitlines()[0][:100]}"})
            FAILURES.append(f"no_sync: {name}: {err}")
            traceback.print_exc()
    # the validated update: exactly one sync (its value checks)
    m = RankingMetrics(ALL, k=(1, 5)).to(device)
    m.update(preds, target, mask=mask)
    if device == "cpu":
        before = shim.count
        with shim(refuse=False):
            m.update(preds, target, mask=mask)
        syncs = shim.count - before
    else:
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("warn")
        import warnings

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m.update(preds, target, mask=mask)
        torch.cuda.set_sync_debug_mode("default")
        syncs = sum("synchroniz" in str(w.message) for w in caught)
    rows.append({"case": "validate_args=True", "status": f"{syncs} host sync(s) (expected 1)"})
    if syncs != 1:
        FAILURES.append(f"no_sync: validated update made {syncs} syncs")
    return rows


# ------------------------------------------------------------------------------------ 3. memory
def memory(device: str) -> dict:
    from torch_rankeval import RankingMetrics

    m = RankingMetrics(("ndcg@10", "map"), gain="linear").to(device)
    state = sum(t.numel() * t.element_size() for t in (m.sums, m.counts))
    g = torch.Generator().manual_seed(5)

    def batch():
        return (
            torch.rand(10_000, 100, generator=g).to(device),
            torch.randint(0, 5, (10_000, 100), generator=g).to(device),
        )

    preds, target = batch()
    m.update(preds, target)
    out = {"state_bytes": state}
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        peaks = []
        for n in range(1, 21):
            m.update(*batch())
            if n in (1, 20):
                torch.cuda.synchronize()
                peaks.append((torch.cuda.max_memory_allocated() - base) / 2**20)
        m.compute()
        out.update(
            {
                "peak_MiB_after_1_batch": peaks[0],
                "peak_MiB_after_20_batches": peaks[1],
                "input_batch_MiB": (preds.numel() * 4 + target.numel() * 8) / 2**20,
            }
        )
        if peaks[1] > peaks[0] * 1.05 + 1:
            FAILURES.append(f"memory: peak grew from {peaks[0]:.1f} to {peaks[1]:.1f} MiB over 20 batches")
    return out


# ------------------------------------------------------------------------------------ 4. speed
def _time(fn, device: str, repeats: int, *, warmup: bool = True) -> float:
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if warmup:
        fn()
    sync()
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def speed(device: str, quick: bool) -> dict:
    from torchmetrics.retrieval import RetrievalMAP, RetrievalNormalizedDCG

    from torch_rankeval import RankingMetrics

    out = {}
    scale = 10 if quick else 1
    workloads = {"10k x 100": [(10_000 // scale, 100)], "loop 200 x (256 x 64)": [(256, 64)] * (200 // scale)}
    for wname, shapes in workloads.items():
        g = torch.Generator().manual_seed(6)
        batches = [
            (torch.rand(n, m, generator=g).to(device), torch.randint(0, 5, (n, m), generator=g).to(device))
            for n, m in shapes
        ]
        row = {}
        for va in (True, False):
            m = RankingMetrics(("ndcg@10", "map"), gain="linear", validate_args=va).to(device)

            def ours(m=m, batches=batches) -> None:
                m.reset()
                for p, t in batches:
                    m.update(p, t)
                m.compute()

            row[f"ours validate_args={va} (s)"] = _time(ours, device, 5)
        ndcg, ap = RetrievalNormalizedDCG(top_k=10).to(device), RetrievalMAP().to(device)

        def theirs(ndcg=ndcg, ap=ap, batches=batches) -> None:
            ndcg.reset()
            ap.reset()
            offset = 0
            for p, t in batches:
                n, length = p.shape
                ids = (torch.arange(n, device=device) + offset).repeat_interleave(length)
                offset += n
                ndcg.update(p.reshape(-1), t.reshape(-1), indexes=ids)
                ap.update(p.reshape(-1), t.reshape(-1) > 0, indexes=ids)
            ndcg.compute()
            ap.compute()

        row["torchmetrics (s)"] = _time(theirs, device, 1, warmup=False)  # seconds per run: no warm-up run
        row["sort of every batch (s)"] = _time(
            lambda batches=batches: [torch.sort(p, dim=-1, descending=True) for p, _ in batches], device, 5
        )
        row["torchmetrics / ours (validated)"] = row["torchmetrics (s)"] / row["ours validate_args=True (s)"]
        out[wname] = row
        log(f"  {wname}: " + ", ".join(f"{k} {v:.4g}" for k, v in row.items()))
    return out


def compiled(device: str) -> dict:
    """``RankingMetrics(compile=True)`` (inductor): equal to eager, no host sync, and its speed."""
    from torch_rankeval import RankingMetrics

    g = torch.Generator().manual_seed(8)
    preds = torch.randint(0, 10, (256, 64), generator=g).float().to(device)
    target = torch.randint(0, 5, (256, 64), generator=g).to(device)
    kw = {"metrics": ("ndcg", "map", "mrr"), "k": 10, "validate_args": False}
    eager, comp = RankingMetrics(**kw).to(device), RankingMetrics(**kw, compile=True).to(device)
    t0 = time.time()
    comp.update(preds, target)
    comp.update(preds[:100, :50], target[:100, :50])  # a second shape: the dynamic recompilation
    compile_s = time.time() - t0
    eager.update(preds, target)
    eager.update(preds[:100, :50], target[:100, :50])
    want, got = eager.compute(), comp.compute()
    worst = max(_err(want[k].cpu(), got[k].cpu()) for k in want)
    if worst > 1e-6:
        FAILURES.append(f"compile: compiled != eager ({worst:.2e})")
    if device == "cuda":
        try:
            _without_sync([lambda: comp.update(preds, target)], device, None)
        except RuntimeError as err:
            FAILURES.append(f"compile: host sync in the compiled update: {err}")
    out = {
        "compile_s": compile_s,
        "max_rel_err": worst,
        "eager_update_ms": _time(lambda: eager.update(preds, target), device, 50) * 1e3,
        "compiled_update_ms": _time(lambda: comp.update(preds, target), device, 50) * 1e3,
        "sort_ms": _time(lambda: torch.sort(preds, dim=-1, descending=True), device, 50) * 1e3,
    }
    return out


def sort_ratio(device: str, quick: bool) -> list[dict]:
    from torch_rankeval import RankingMetrics

    rows = []
    sizes = [(256, 64), (1000, 100), (10_000, 100)]
    for (n, length), ties, dtype, va in itertools.product(
        sizes, (False, True), (torch.float32, torch.bfloat16), (True, False)
    ):
        g = torch.Generator().manual_seed(7)
        preds = (
            torch.randint(0, 10, (n, length), generator=g).float()
            if ties
            else torch.rand(n, length, generator=g).argsort(-1).float()
        )
        preds, target = preds.to(dtype).to(device), torch.randint(0, 5, (n, length), generator=g).to(device)
        m = RankingMetrics(("ndcg", "map"), k=10, validate_args=va).to(device)
        repeats = 10 if quick else 50
        upd = _time(lambda m=m, preds=preds, target=target: m.update(preds, target), device, repeats)
        srt = _time(lambda preds=preds: torch.sort(preds, dim=-1, descending=True), device, repeats)
        rows.append(
            {
                "batch": f"{n}x{length}",
                "ties": ties,
                "dtype": str(dtype).split(".")[-1],
                "validate_args": va,
                "update_ms": upd * 1e3,
                "sort_ms": srt * 1e3,
                "ratio": upd / srt,
            }
        )
    return rows


# ------------------------------------------------------------------------------------ 6. catalogue
CATALOGUE_MEASURES = (
    "ndcg@20",
    "ndcg",
    "map@20",
    "map",
    "mrr",
    "precision@20",
    "recall@20",
    "hit_rate@5",
    "r_precision",
)


def _catalogue_data(n: int, items: int, *, seed: int, ties: bool):
    g = torch.Generator().manual_seed(seed)
    preds = torch.randint(0, 8, (n, items), generator=g).float() if ties else torch.randn(n, items, generator=g)
    target = (torch.rand(n, items, generator=g) < 0.02).long() * torch.randint(1, 4, (n, items), generator=g)
    exclude = torch.rand(n, items, generator=g) < 0.05
    return preds, target, exclude


def catalogue(device: str, quick: bool) -> dict:
    """Full-catalogue evaluation (issue 10) on the device: sparse targets and ``exclude`` equal the CPU
    dense path, make no host sync unvalidated, and the 1,000 x 50,000 benchmark (floor, ours, dense,
    torchmetrics on a subset) with peak device memory."""
    from torch_rankeval import ItemExposure, RankingMetrics
    from torch_rankeval import functional as F

    out: dict = {"equality": [], "no_sync": []}
    for (ties, dtype), va in itertools.product(
        ((True, torch.float32), (False, torch.float32), (True, torch.float64), (True, torch.bfloat16)), (True, False)
    ):
        preds, target, exclude = _catalogue_data(64, 2000, seed=3, ties=ties)
        preds = preds.to(dtype)
        want = F.evaluate(preds, target, CATALOGUE_MEASURES, mask=~exclude, reduction="none")
        for layout in ("coo", "csr"):
            tgt = target.to_sparse() if layout == "coo" else target.to_sparse_csr()
            got = F.evaluate(
                to(preds, device),
                tgt.to(device),
                CATALOGUE_MEASURES,
                exclude=to(exclude, device).to_sparse(),
                reduction="none",
                validate_args=va,
            )
            worst = max(_err(want[k], got[k].cpu()) for k in want)
            case = f"ties={ties} {str(dtype).split('.')[-1]} {layout} validate_args={va}"
            out["equality"].append(
                {"case": case, "max_rel_err": worst, "status": "ok" if worst <= 1e-6 else "MISMATCH"}
            )
            if worst > 1e-6:
                FAILURES.append(f"catalogue equality: {case}: {worst:.2e}")
    preds, target, exclude = _catalogue_data(128, 4000, seed=5, ties=True)
    exposure_cpu, exposure_dev = ItemExposure(4000, 20), ItemExposure(4000, 20).to(device)
    exposure_cpu.update(preds, exclude=exclude)
    exposure_dev.update(to(preds, device), exclude=to(exclude, device))
    a, b = exposure_cpu.compute(), exposure_dev.compute()
    worst = max(_err(a[k], b[k].cpu()) for k in a)
    out["equality"].append(
        {"case": "ItemExposure", "max_rel_err": worst, "status": "ok" if worst <= 1e-6 else "MISMATCH"}
    )
    if worst > 1e-6:
        FAILURES.append(f"catalogue equality: ItemExposure {worst:.2e}")

    # no host sync: validate_args=False, every cutoff finite, sparse target, dense or sparse exclude
    p, t, ex = to(preds, device), target.to_sparse().to(device), to(exclude, device)
    sparse_ex = ex.to_sparse()
    m = RankingMetrics(("ndcg@20", "recall@20", "map@20", "mrr@10"), validate_args=False).to(device)
    e = ItemExposure(4000, 20, validate_args=False).to(device)
    m.update(p, t, exclude=ex)  # tables and constants made once, outside
    e.update(p, exclude=ex)
    calls = {
        "RankingMetrics sparse target, dense exclude": lambda: m.update(p, t, exclude=ex),
        "RankingMetrics sparse target, sparse exclude": lambda: m.update(p, t, exclude=sparse_ex),
        "ItemExposure": lambda: e.update(p, exclude=ex),
    }
    shim = _CpuSyncShim() if device == "cpu" else None
    for name, call in calls.items():
        try:
            _without_sync([call], device, shim)
            out["no_sync"].append({"case": name, "status": "ok: no host sync"})
        except RuntimeError as err:
            out["no_sync"].append({"case": name, "status": f"SYNC: {str(err).splitlines()[0][:120]}"})
            FAILURES.append(f"catalogue no_sync: {name}: {err}")

    # speed and memory: 1,000 users x 50,000 items, 10 targets and 50 seen items per user
    users, items = (100, 5000) if quick else (1000, 50_000)
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(users, items, generator=g).to(device)
    perm = torch.rand(users, items, generator=g).argsort(-1)
    rel_ids, seen_ids = perm[:, :10].to(device), perm[:, 10:60].to(device)
    rows = torch.arange(users, device=device).unsqueeze(-1)
    target = torch.sparse_coo_tensor(
        torch.stack([rows.expand(-1, 10).reshape(-1), rel_ids.reshape(-1)]),
        torch.ones(users * 10, dtype=torch.long, device=device),
        (users, items),
    ).coalesce()
    seen = torch.zeros(users, items, dtype=torch.bool, device=device).scatter_(1, seen_ids, True)
    scores_mib = scores.numel() * scores.element_size() / 2**20

    def floor():
        s = scores.clone()
        s.scatter_(1, seen_ids, float("-inf"))
        return torch.topk(s, 20, dim=-1)

    ours_v = RankingMetrics(("ndcg@20", "recall@20", "map@20")).to(device)
    ours_u = RankingMetrics(("ndcg@20", "recall@20", "map@20"), validate_args=False).to(device)

    def run(metric):
        metric.reset()
        metric.update(scores, target, exclude=seen)
        return metric.compute()

    dense_target = target.to_dense()

    def dense():
        return F.evaluate(scores, dense_target, ("ndcg@20", "recall@20", "map@20"), mask=~seen)

    def peak(fn) -> float:
        if device != "cuda":
            return float("nan")
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20

    speed_rows = {}
    for name, fn, repeats in (
        ("floor", floor, 10),
        ("ours", lambda: run(ours_v), 10),
        ("ours_unvalidated", lambda: run(ours_u), 10),
        ("dense path", dense, 3),
    ):
        seconds = _time(fn, device, repeats)
        extra = peak(fn)
        speed_rows[name] = {"ms": seconds * 1e3, "peak_extra_mib": extra, "peak_x_scores": extra / scores_mib}
    a, b = run(ours_v), dense()
    worst = max(_err(a[k].cpu(), b[k].cpu()) for k in a)
    if worst > 1e-5:
        FAILURES.append(f"catalogue: ours != dense path on the benchmark data ({worst:.2e})")
    from torchmetrics.retrieval import RetrievalMAP, RetrievalNormalizedDCG, RetrievalRecall

    sub = 20 if quick else 100
    keep = ~seen[:sub]
    flat_p, flat_t = scores[:sub][keep], dense_target[:sub][keep]
    idx = torch.arange(sub, device=device).unsqueeze(-1).expand(sub, items)[keep]

    def theirs():
        for cls in (RetrievalNormalizedDCG, RetrievalRecall, RetrievalMAP):
            metric = cls(top_k=20).to(device)
            metric.update(flat_p, flat_t, indexes=idx)
            metric.compute()

    tm = _time(theirs, device, 1) * users / sub
    speed_rows["torchmetrics (scaled)"] = {"ms": tm * 1e3, "users_timed": sub}
    for name, row in speed_rows.items():
        row["x_floor"] = row["ms"] / speed_rows["floor"]["ms"]
    out["speed"] = {"shape": f"{users} x {items}", "max_rel_err_vs_dense": worst, **speed_rows}
    return out


# ------------------------------------------------------------------------------------ main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (a self-check of this script)")
    parser.add_argument("--quick", action="store_true", help="smaller speed workloads")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (the CPU self-check on a busy machine: 1)"
    )
    parser.add_argument(
        "--skip",
        default="",
        help="comma-separated sections to skip: equality,no_sync,memory,speed,sort_ratio,compile,catalogue",
    )
    parser.add_argument(
        "--json", default=None, help="where to write the figures (default: $OUT/gpu_check.json when $OUT is set)"
    )
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "gpu_check: CUDA is not available on this machine (torch "
            f"{torch.__version__}); run it where a GPU is, or use --device cpu to self-check the script",
            file=sys.stderr,
        )
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    t_start = time.time()
    report: dict = {"device": args.device, "torch": torch.__version__, "threads": torch.get_num_threads()}
    if args.device == "cuda":
        report["gpu"] = torch.cuda.get_device_name(0)
    log(f"gpu_check on {report.get('gpu', args.device)}, torch {torch.__version__}")
    skip = set(filter(None, args.skip.split(",")))
    sections = [
        ("equality", lambda: equality(args.device)),
        ("no_sync", lambda: no_sync(args.device)),
        ("memory", lambda: memory(args.device)),
        ("speed", lambda: speed(args.device, args.quick)),
        ("sort_ratio", lambda: sort_ratio(args.device, args.quick)),
        ("compile", lambda: compiled(args.device)),
        ("catalogue", lambda: catalogue(args.device, args.quick)),
    ]
    for name, fn in sections:
        if name in skip:
            continue
        t0 = time.time()
        log(f"\n## {name}")
        try:
            report[name] = fn()
        except Exception as err:  # noqa: BLE001 - report and carry on with the other sections
            traceback.print_exc()
            FAILURES.append(f"{name}: {type(err).__name__}: {err}")
            continue
        _print(name, report[name])
        log(f"({name}: {time.time() - t0:.1f} s)")
    report["failures"] = FAILURES
    report["seconds"] = time.time() - t_start
    path = args.json or (os.path.join(os.environ["OUT"], "gpu_check.json") if os.environ.get("OUT") else None)
    if path:
        Path(path).write_text(json.dumps(report, indent=2, default=str))
        log(f"\nwrote {path}")
    log(f"\n{len(FAILURES)} failure(s) in {report['seconds']:.0f} s" + "".join(f"\n  - {f}" for f in FAILURES))
    return 1 if FAILURES else 0


def _print(name: str, result) -> None:
    if name in ("equality", "no_sync"):
        bad = [
            r for r in result if r["status"] not in ("ok",) and not r["status"].startswith(("ok:", "refused", "1 host"))
        ]
        log(
            f"{len(result)} cases, {len(bad)} not ok; worst error "
            f"{max((r.get('max_rel_err', 0) for r in result), default=0):.2e}"
        )
        for r in result if name == "no_sync" else bad:
            log(f"  {r['case']}: {r['status']}")
    elif name == "catalogue":
        bad = [r for r in result["equality"] if r["status"] != "ok"]
        log(
            f"  equality: {len(result['equality'])} cases, {len(bad)} not ok; worst "
            f"{max(r['max_rel_err'] for r in result['equality']):.2e}"
        )
        for r in result["no_sync"]:
            log(f"  no sync: {r['case']}: {r['status']}")
        log(f"  speed ({result['speed']['shape']}):")
        for k, v in result["speed"].items():
            if isinstance(v, dict):
                log(
                    f"    {k}: "
                    + ", ".join(f"{a} {b:.4g}" if isinstance(b, float) else f"{a} {b}" for a, b in v.items())
                )
    elif name in ("memory", "compile"):
        log("  " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in result.items()))
    elif name == "sort_ratio":
        log(
            "| batch | ties | scores | validate_args | update ms | sort ms | update / sort |\n|---|---|---|---|---|---|---|"
        )
        for r in result:
            log(
                f"| {r['batch']} | {r['ties']} | {r['dtype']} | {r['validate_args']} | {r['update_ms']:.3f} | {r['sort_ms']:.3f} | {r['ratio']:.2f}x |"
            )


if __name__ == "__main__":
    sys.exit(main())
