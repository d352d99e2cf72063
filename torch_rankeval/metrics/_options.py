"""torchmetrics' own ``Metric`` options, and the checks that name an unknown or unread keyword argument.

Every metric class of the library lists its own arguments in its signature and passes only
torchmetrics' options (``process_group``, ``sync_on_compute``, ...) on through ``**kwargs``. An
unknown keyword is a ``TypeError`` naming it (with a close match when there is one), as for any
Python call, not torchmetrics' ``ValueError("Unexpected keyword arguments")``.

A convention argument that the class's measures do not read is a ``TypeError`` too (their
registry rows say what each reads).

Example:
    >>> from torch_rankeval import MRR, NDCG
    >>> MRR(gain="linear")
    Traceback (most recent call last):
    ...
    TypeError: MRR does not read gain= (its measures mrr read ties=, relevance_threshold=, empty_target_action=; a preset, convention=, sets every convention)
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
from torch_rankeval.measures.registry import OPTIONS, Measure

__all__ = ["METRIC_OPTIONS", "check_catalogue_options", "check_metric_options", "check_read_options"]

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
    ignored = [name for name in unknown if name in OPTIONS]
    if ignored:  # a convention option that the class's measures do not read
        reads = [p.name for p in own if p.name in OPTIONS]
        raise TypeError(
            f"{cls.__name__} does not read {', '.join(n + '=' for n in ignored)} (it reads "
            f"{', '.join(n + '=' for n in reads) or 'no convention option'})"
        )
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


def check_read_options(owner: object, measures: list[Measure], given: Mapping[str, Any]) -> None:
    """Raise a ``TypeError`` naming each convention option of ``given`` (set: not None) that none of
    ``measures`` reads (their registry rows' ``reads``): a metric of many measures accepts the union of
    what they read.

    Example:
        >>> from torch_rankeval.measures import parse_measures
        >>> check_read_options(object(), parse_measures(["ndcg@10", "mrr"]), {"gain": "linear", "graded": None})
        >>> check_read_options(object(), parse_measures(["mrr", "recall@5"]), {"gain": "linear"})
        Traceback (most recent call last):
        ...
        TypeError: object does not read gain= (its measures mrr, recall@5 read ties=, relevance_threshold=, empty_target_action=; a preset, convention=, sets every convention)
    """
    reads = {name for m in measures for name in m.family.reads}
    ignored = [name for name, value in given.items() if value is not None and name not in reads]
    if ignored:
        what = ", ".join(n + "=" for n in OPTIONS if n in reads) or "no convention option"
        raise TypeError(
            f"{type(owner).__name__} does not read {', '.join(n + '=' for n in ignored)} (its measures "
            f"{', '.join(m.label for m in measures)} read {what}; a preset, convention=, sets every convention)"
        )


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
