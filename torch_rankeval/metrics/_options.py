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

from torch_rankeval._choices import TIES

__all__ = ["METRIC_OPTIONS", "check_catalogue_options", "check_metric_options", "forwarded"]

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


def forwarded(scope: Mapping[str, Any], *drop: str) -> dict[str, Any]:
    """The named arguments of an ``__init__``, from its ``locals()`` taken before any other local is
    bound, to pass on to the parent's: all but ``self``, ``__class__`` (there when the method calls
    ``super()``), ``kwargs`` (passed on as ``**kwargs`` beside) and the names in ``drop``. So a
    subclass keeps its explicit signature without listing every argument a second time.

    Example:
        >>> def init(self, k=None, *, ties=None, clip=None, **kwargs):
        ...     return forwarded(locals(), "clip")
        >>> init(None, 3, ties="first", clip=0.1, sync_on_compute=False)
        {'k': 3, 'ties': 'first'}
    """
    skip = {"self", "__class__", "kwargs", *drop}
    return {name: value for name, value in scope.items() if name not in skip}


#: The tie policies of the full-catalogue metrics: each tied item's expected share of the slots left
#: (``"average"``), or input order (``"first"``).
CATALOGUE_TIES = TIES[:2]


def check_catalogue_options(
    owner: object, num_items: Any, ks: tuple[Any, ...], ties: Any, validate_args: Any, chunk_elements: Any
) -> None:
    """The shared arguments of the full-catalogue metrics (``ItemExposure``, the beyond-accuracy
    metrics): ``num_items`` a positive int, each cutoff of ``ks`` a positive int no larger than the
    catalogue, ``ties`` in :data:`CATALOGUE_TIES`, ``validate_args`` a bool and ``chunk_elements`` a
    positive int; else a clear ``ValueError`` / ``TypeError``.

    Example:
        >>> check_catalogue_options(object(), 10, (5, 20), "average", True, 1024)
        Traceback (most recent call last):
        ...
        ValueError: k=20 is larger than the catalogue (num_items=10): a list cannot hold more items
    """
    if isinstance(num_items, bool) or not isinstance(num_items, int) or num_items <= 0:
        raise ValueError(f"num_items must be a positive int (the catalogue size), got {num_items!r}")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise ValueError(f"k must be a positive int (the length of the recommendation lists), got {k!r}")
        if k > num_items:
            raise ValueError(
                f"k={k} is larger than the catalogue (num_items={num_items}): a list cannot hold more items"
            )
    if ties not in CATALOGUE_TIES:
        raise ValueError(f"ties={ties!r} is not valid for {type(owner).__name__}: use 'average' or 'first'")
    if not isinstance(validate_args, bool):
        raise TypeError(f"validate_args must be a bool, got {type(validate_args).__name__}")
    if isinstance(chunk_elements, bool) or not isinstance(chunk_elements, int) or chunk_elements <= 0:
        raise ValueError(f"chunk_elements must be a positive int, got {chunk_elements!r}")
