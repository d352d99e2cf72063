"""torchmetrics' own ``Metric`` options, and the check that names an unknown keyword argument.

Every metric class of the library lists its own arguments in its signature and passes only
torchmetrics' options (``process_group``, ``sync_on_compute``, ...) on through ``**kwargs``. An
unknown keyword is a ``TypeError`` naming it (with a close match when there is one), as for any
Python call, not torchmetrics' ``ValueError("Unexpected keyword arguments")``.

Example:
    >>> from torch_rankeval import NDCG
    >>> NDCG(k=10, gains="linear")
    Traceback (most recent call last):
    ...
    TypeError: NDCG() got an unexpected keyword argument 'gains' (did you mean 'gain'?); see help(NDCG) for its arguments (torchmetrics' Metric options: compute_on_cpu, dist_sync_on_step, process_group, dist_sync_fn, distributed_available_fn, sync_on_compute, compute_with_cache)
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping
from typing import Any

__all__ = ["METRIC_OPTIONS", "check_metric_options"]

#: The keyword arguments ``torchmetrics.Metric.__init__`` takes (``tests/test_signatures.py`` checks
#: that torchmetrics still accepts each of them).
METRIC_OPTIONS = (
    "compute_on_cpu",
    "dist_sync_on_step",
    "process_group",
    "dist_sync_fn",
    "distributed_available_fn",
    "sync_on_compute",
    "compute_with_cache",
)


def check_metric_options(owner: object, options: Mapping[str, Any]) -> None:
    """Raise a ``TypeError`` naming every keyword of ``options`` that is not a torchmetrics option.

    Example:
        >>> class Owner: pass
        >>> check_metric_options(Owner(), {"sync_on_compute": False})   # fine
        >>> check_metric_options(Owner(), {"colour": 1, "tie": 2})
        Traceback (most recent call last):
        ...
        TypeError: Owner() got unexpected keyword arguments 'colour', 'tie'; see help(Owner) for its arguments (torchmetrics' Metric options: compute_on_cpu, dist_sync_on_step, process_group, dist_sync_fn, distributed_available_fn, sync_on_compute, compute_with_cache)
    """
    unknown = [name for name in options if name not in METRIC_OPTIONS]
    if not unknown:
        return
    cls = type(owner)
    try:
        own = [p for p in inspect.signature(cls).parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD]
    except (TypeError, ValueError):  # pragma: no cover - a class without a signature
        own = []
    names = [p.name for p in own] + list(METRIC_OPTIONS)
    if len(unknown) == 1:
        close = difflib.get_close_matches(unknown[0], names, n=1)
        what = f"an unexpected keyword argument {unknown[0]!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
    else:
        what = "unexpected keyword arguments " + ", ".join(map(repr, unknown))
    raise TypeError(
        f"{cls.__name__}() got {what}; see help({cls.__name__}) for its arguments "
        f"(torchmetrics' Metric options: {', '.join(METRIC_OPTIONS)})"
    )
