"""A CPU stand-in for ``torch.cuda.set_sync_debug_mode("error")``: catch every operation that would
make the host wait for the device (read a value, or allocate a result whose shape depends on
values), so that "no host sync" can be tested without a GPU.

Two layers, because some syncs never reach the dispatcher on CPU (``tolist`` reads memory
directly) and some never show as a Python method (a boolean mask index runs ``nonzero`` inside
``aten::index``):

* a :class:`~torch.overrides.TorchFunctionMode` sees the Python-level calls (``item``, ``tolist``,
  ``__bool__``, ``__int__``, ``__float__``, ``__index__``, ``cpu``, ``numpy``, ``nonzero``, ...);
* a :class:`~torch.utils._python_dispatch.TorchDispatchMode` sees the aten operators that sync on
  CUDA (``_local_scalar_dense``, ``nonzero``, ``masked_select``, ``unique``, ``index`` with a boolean
  mask, ``repeat_interleave`` without ``output_size``, copies to another device).

Inside the guard, torch_rankeval takes the path it takes on CUDA: the guard sets
``torch_rankeval.ranking.inputs.CPU_HOST_READS`` to False (restored on exit), which turns off the
reads of host memory that unvalidated CPU eager calls make (no device sync on the CPU, but a sync on
CUDA): a top-k view's spilled rows instead of a pass over every row, a large dense batch's tie flags
instead of the whole row's tie statistics.
"""

from __future__ import annotations

import traceback
from typing import Self

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from torch_rankeval.ranking import inputs as _inputs

aten = torch.ops.aten

SYNC_METHODS = {
    "item",
    "tolist",
    "__bool__",
    "__int__",
    "__float__",
    "__index__",
    "__complex__",
    "cpu",
    "numpy",
    "nonzero",
    "argwhere",
    "masked_select",
    "unique",
    "unique_consecutive",
    "equal",
    "allclose",
    "is_nonzero",
}
SYNC_OPS = {
    aten._local_scalar_dense.default,
    aten.nonzero.default,
    aten.argwhere.default,
    aten.masked_select.default,
    aten.equal.default,
    aten.is_nonzero.default,
    aten._unique2.default,
    aten.unique_consecutive.default,
    aten.unique_dim.default,
    aten.nonzero_static.default,
}


class HostSyncError(AssertionError):
    """An operation that needs a host sync ran inside :class:`HostSyncGuard`."""


def _where() -> str:
    frames = [f for f in traceback.extract_stack() if "torch_rankeval" in f.filename]
    return " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}" for f in frames[::-1][:3]) or "?"


class _Functions(TorchFunctionMode):
    def __init__(self, guard: HostSyncGuard) -> None:
        super().__init__()
        self.guard = guard

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name not in SYNC_METHODS or self.guard.inside:
            return func(*args, **(kwargs or {}))
        self.guard.record(f"{name}() at {_where()}")
        self.guard.inside = True  # the operators this call runs are the same sync
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.guard.inside = False


class _Operators(TorchDispatchMode):
    def __init__(self, guard: HostSyncGuard) -> None:
        super().__init__()
        self.guard = guard

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.guard.inside:
            pass
        elif func in SYNC_OPS:
            self.guard.record(f"{func} at {_where()}")
        elif func is aten.index.Tensor and any(
            isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in (args[1] or [])
        ):
            self.guard.record(f"boolean mask index at {_where()}")
        elif (
            func in (aten.repeat_interleave.Tensor, aten.repeat_interleave.self_Tensor)
            and kwargs.get("output_size") is None
        ):
            self.guard.record(f"{func} without output_size at {_where()}")
        elif func in (aten._to_copy.default, aten.copy_.default):
            devices = {t.device for t in args if isinstance(t, torch.Tensor)}
            if "device" in kwargs and kwargs["device"] is not None:
                devices.add(torch.device(kwargs["device"]))
            if len(devices) > 1:
                self.guard.record(f"copy across devices {devices} at {_where()}")
        return func(*args, **kwargs)


class HostSyncGuard:
    """Context manager that records (``raise_on_sync=False``) or refuses (default) host syncs.

    Example:
        >>> import torch
        >>> with HostSyncGuard(raise_on_sync=False) as guard:
        ...     _ = torch.ones(3).sum()          # stays on the device
        ...     _ = torch.ones(3).sum().item()   # reads a value: a sync
        >>> guard.syncs
        ['item() at ?']
    """

    def __init__(self, *, raise_on_sync: bool = True) -> None:
        self.raise_on_sync = raise_on_sync
        self.syncs: list[str] = []
        self.inside = False
        self._modes = (_Functions(self), _Operators(self))
        self._host_reads: list[bool] = []

    def record(self, what: str) -> None:
        self.syncs.append(what)
        if self.raise_on_sync:
            raise HostSyncError(f"host sync: {what}")

    def __enter__(self) -> Self:
        self._host_reads.append(_inputs.CPU_HOST_READS)
        _inputs.CPU_HOST_READS = False  # the CUDA path: no reads of host memory in unvalidated calls
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)
        _inputs.CPU_HOST_READS = self._host_reads.pop()


#: The three paths of a top-k view, for tests parametrised over them: validated, unvalidated on the
#: CPU (which reads the spilled rows from host memory) and unvalidated sync-free (CUDA's path).
PATHS = [True, False, "sync-free"]


def select_path(path: bool | str, monkeypatch) -> bool:  # noqa: ANN001
    """The ``validate_args`` of one of :data:`PATHS`; ``"sync-free"`` also turns off, for this test
    (through pytest's ``monkeypatch``), the host reads of unvalidated CPU calls."""
    if path == "sync-free":
        monkeypatch.setattr(_inputs, "CPU_HOST_READS", False)
        return False
    return bool(path)
