"""Opt-in compiled updates: ``torch.compile(fullgraph=True)`` of a metric's padded-batch kernel.

The compiled callable is kept outside the metric (keyed by the metric's identity, dropped when the
metric is garbage-collected), so that a metric created with ``compile=True`` still pickles, deep-copies, ``clone()``-s
and moves between devices like any other: its state is unchanged, and the kernel is compiled again
on first use after unpickling. The kernel closes over plain configuration (conventions, cutoffs),
never over the metric.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["compiled_kernel"]

# id(owner) -> compiled kernel. Not a WeakKeyDictionary: its lookups compare keys with ``==``, and a
# torchmetrics Metric's ``==`` builds a new CompositionalMetric (a third of a millisecond per update).
_KERNELS: dict[int, Callable] = {}
BACKEND = "inductor"  # the torch.compile backend (tests use "aot_eager", which builds no C++)


def compiled_kernel(owner: Any, build: Callable[[], Callable]) -> Callable:
    """The compiled kernel of ``owner``, built with ``build()`` and ``torch.compile`` on first use.

    ``fullgraph=True``: the kernel has no graph break and no host sync. Shapes start static and
    become dynamic after the first recompilation (``dynamic=None``), so a stream of batches of
    varying sizes compiles about twice, not once per shape.

    Example:
        >>> import torch
        >>> class Owner: pass
        >>> owner = Owner()
        >>> fn = compiled_kernel(owner, lambda: (lambda x: x.sort(-1).values.cumsum(-1)))
        >>> fn is compiled_kernel(owner, lambda: None)   # built once per owner
        True
    """
    key = id(owner)
    fn = _KERNELS.get(key)
    if fn is None:
        fn = _KERNELS[key] = torch.compile(build(), fullgraph=True, dynamic=None, backend=BACKEND)
        weakref.finalize(owner, _KERNELS.pop, key, None)
    return fn
