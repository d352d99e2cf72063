"""Shared by the gloo tests: count the collectives a metric's sync makes."""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Callable, Iterator

import torch.distributed as dist
import torch.multiprocessing as mp


@contextlib.contextmanager
def counting_collectives() -> Iterator[dict[str, int]]:
    """Count ``all_reduce`` / ``all_gather`` calls (and the bytes this process sends) inside the block.

    The metrics call ``torch.distributed.all_reduce`` (and torchmetrics' gather calls
    ``all_gather``) through the module, so patching the module attributes sees every call.
    """
    calls = {"all_reduce": 0, "all_gather": 0, "bytes": 0}
    real_reduce, real_gather = dist.all_reduce, dist.all_gather

    def counting_reduce(tensor, *args, **kwargs):  # noqa: ANN001, ANN202
        calls["all_reduce"] += 1
        calls["bytes"] += tensor.numel() * tensor.element_size()
        return real_reduce(tensor, *args, **kwargs)

    def counting_gather(tensors, tensor, *args, **kwargs):  # noqa: ANN001, ANN202
        calls["all_gather"] += 1
        calls["bytes"] += tensor.numel() * tensor.element_size()
        return real_gather(tensors, tensor, *args, **kwargs)

    dist.all_reduce, dist.all_gather = counting_reduce, counting_gather
    try:
        yield calls
    finally:
        dist.all_reduce, dist.all_gather = real_reduce, real_gather


#: what the fork server imports once (one server per test process), before it forks each test's
#: processes; a run that holds a Lightning DDP test adds Lightning (``tests/conftest.py``)
PRELOAD = [
    "torch",
    "torch.distributed",
    "numpy",
    "torchmetrics",
    "torch_rankeval",
    "pytest",
    "tests.distributed_helpers",
]
#: what the fork server imports too in a run with a test of Lightning's DDP (the ``lightning_ddp`` fixture)
LIGHTNING = ["lightning.pytorch", "tests.lightning_helpers"]


def spawn(fn: Callable[..., None], args: tuple, nprocs: int) -> None:
    """``torch.multiprocessing.spawn(fn, args, nprocs, join=True)`` (``fn(rank, *args)`` in each
    process, a failure re-raised here), its processes forked by a fork server that imported torch,
    torchmetrics and the library once per test process: a fresh interpreter each (never a fork of
    pytest's own process, whose threads a fork would copy), without their imports each time (10-15 s
    a test with two or three processes on two cores). ``tests/test_pickle_and_state.py`` keeps
    ``mp.spawn`` where the spawn itself is under test.

    Example:
        >>> spawn(print, ("rank above",), 1)  # doctest: +SKIP
    """
    preload_fork_server()
    mp.start_processes(fn, args=args, nprocs=nprocs, join=True, start_method="forkserver")


def preload_fork_server() -> None:
    """Name :data:`PRELOAD` as what the fork server imports: read when it starts (the first process a
    test process forks from it, a gloo test's or Lightning's DDP's)."""
    multiprocessing.set_forkserver_preload(PRELOAD)
