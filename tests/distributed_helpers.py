"""Shared by the gloo tests: count the collectives a metric's sync makes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch.distributed as dist


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
