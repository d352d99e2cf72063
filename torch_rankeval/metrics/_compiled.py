"""Opt-in compiled updates: ``torch.compile(fullgraph=True)`` of a metric's padded-batch kernel.

The compiled callable is kept outside the metric (keyed by the metric's identity, dropped when the
metric is garbage-collected), so that a metric created with ``compile=True`` still pickles, deep-copies, ``clone()``-s
and moves between devices like any other: its state is unchanged, and the kernel is compiled again
on first use after unpickling. The kernel closes over plain configuration (conventions, cutoffs),
never over the metric.
"""

from __future__ import annotations

import itertools
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["compiled_kernel"]

# id(owner) -> compiled kernel. Not a WeakKeyDictionary: its lookups compare keys with ``==``, and a
# torchmetrics Metric's ``==`` builds a new CompositionalMetric (a third of a millisecond per update).
_KERNELS: dict[int, Callable] = {}
BACKEND = "inductor"  # the torch.compile backend
_SERIAL = itertools.count()


def compiled_kernel(owner: Any, build: Callable[[], Callable]) -> Callable:
    """The compiled kernel of ``owner``, built with ``build()`` and ``torch.compile`` on first use.

    ``fullgraph=True``: the kernel has no graph break and no host sync. Shapes start static and
    become dynamic after the first recompilation (``dynamic=None``), so a stream of batches of
    varying sizes compiles about twice, not once per shape.

    Each owner's kernel runs on a code object of its own (a copy of ``build()``'s, renamed). Dynamo
    keeps its caches and its "automatic dynamic" record per code object (and name): with one shared
    code object, a second metric with another cutoff would fail the first one's guards and be
    recompiled with the cutoff as a *symbolic* int (it "changed"), which inductor cannot lower
    (``LoweringException: Cannot convert symbols to int``), and every metric of a process would
    count towards one recompile limit. Per owner, the configuration (cutoffs, conventions) stays
    static Python constants and only the batch shape may become dynamic.

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
        fn = _KERNELS[key] = torch.compile(_own_code(build()), fullgraph=True, dynamic=None, backend=BACKEND)
        weakref.finalize(owner, _KERNELS.pop, key, None)
    return fn


def _own_code(fn: Callable) -> Callable:
    """``fn`` on a fresh, uniquely named copy of its code object (same closure, globals, defaults).

    Example:
        >>> def kernel(x): return x + 1
        >>> copy = _own_code(kernel)
        >>> copy(1), copy.__code__ is kernel.__code__, copy.__name__.startswith("kernel_")
        (2, False, True)
    """
    if not isinstance(fn, types.FunctionType):
        return fn
    name = f"{fn.__code__.co_name}_{next(_SERIAL)}"
    names = {"co_name": name, **({"co_qualname": name} if hasattr(fn.__code__, "co_qualname") else {})}  # 3.11+
    code = fn.__code__.replace(**names)
    copy = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy
