"""Accuracy@k and Matthews' correlation coefficient@k from the catalogue's confusion matrix (RecTools'
``Accuracy`` and ``MCC``), exact under averaged ties.

The top ``k`` are the items predicted relevant out of a catalogue of ``C`` items, the query's ``R``
relevant documents the true ones: ``tp`` of them in the top ``k``, ``fp = k - tp``, ``fn = R - tp``,
``tn = C - k - fn``. A ranking does not know ``C``, so the measures take it as the parameter
``catalog_size`` (``mcc(catalog_size=1000)@10``). ``k`` is the cutoff (as RecTools counts it, even past
a shorter list), ``min(k, list length)`` with the convention's ``adaptive_k``, the list's length for no
cutoff. Both values are linear in ``tp``: the expected value over the orders of tied documents is the
value at the expected ``tp``.

Example:
    >>> import torch
    >>> from torch_rankeval.conventions import DEFAULT
    >>> from torch_rankeval.ranking.view import RankedBatch
    >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[0, 1, 1]]), None, DEFAULT)
    >>> # k=2, C=10, R=2: tp=1, fp=1, fn=1, tn=7
    >>> catalogue_accuracy_values(rb, (2,), DEFAULT, catalog_size=10)[0]   # (tp + tn) / C
    tensor([[0.8000]])
    >>> mcc_values(rb, (2,), DEFAULT, catalog_size=10)[0]   # (tp tn - fp fn) / sqrt(2 * 2 * 8 * 8)
    tensor([[0.3750]])
"""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import cutoff_sizes, no_relevant
from torch_rankeval.ranking.view import RankedView

__all__ = ["catalogue_accuracy_values", "catalogue_checks", "mcc_values"]


def _counts(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, catalog_size: int | None
) -> tuple[Tensor, Tensor, Tensor, float]:
    """``tp`` (expected under averaged ties), ``k`` and ``R``, each ``(N, K)``, and ``C``."""
    if catalog_size is None:  # the measure's name requires it (measures/params.py: CATALOG_SIZE)
        raise ValueError("the catalogue's confusion matrix needs catalog_size=, the number of items in the catalogue")
    too_deep = [k for k in ks if k is not None and k > catalog_size]
    if too_deep:
        raise ValueError(
            f"the cutoff {too_deep[0]} is larger than catalog_size={catalog_size}: the top k are items of the catalogue"
        )
    tp = rb.expected_in_top("rel", ks)
    k = cutoff_sizes(rb, ks, adaptive_k=conv.adaptive_k, dtype=tp.dtype)
    r = rb.n_relevant.to(tp.dtype).unsqueeze(-1).expand_as(tp)
    return tp, k, r, float(catalog_size)


def catalogue_checks(rb: RankedView, *, catalog_size: int | None = None) -> list[tuple[Tensor, str]]:
    """Value checks (flag, message): a list longer than the catalogue, or more relevant documents than it holds."""
    if catalog_size is None:
        return []  # the kernel says what is missing
    bad = (rb.n_valid > catalog_size) | (rb.n_relevant > catalog_size)
    message = (
        f"catalog_size={catalog_size} is smaller than a query's list or its number of relevant documents: "
        "give the number of items the lists are drawn from"
    )
    return [(bad.any(), message)]


def catalogue_accuracy_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, *, catalog_size: int | None = None
) -> tuple[Tensor, Tensor]:
    """``(tp + tn) / C = (C - k - R + 2 tp) / C`` per query and cutoff, ``(N, K)``, and the "no
    relevant document" flag ``(N, 1)``."""
    tp, k, r, c = _counts(rb, ks, conv, catalog_size)
    return (c - k - r + 2 * tp) / c, no_relevant(rb)


def mcc_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, *, catalog_size: int | None = None
) -> tuple[Tensor, Tensor]:
    """``(tp tn - fp fn) / sqrt((tp + fp)(tp + fn)(tn + fp)(tn + fn))``, which is
    ``(C tp - k R) / sqrt(k R (C - R)(C - k))``; 0 where the denominator is 0 (as RecTools), ``(N, K)``,
    and the "no relevant document" flag ``(N, 1)``."""
    tp, k, r, c = _counts(rb, ks, conv, catalog_size)
    den = torch.sqrt(k * r * (c - r) * (c - k))
    ok = den > 0
    return torch.where(ok, (c * tp - k * r) / torch.where(ok, den, 1.0), 0.0), no_relevant(rb)
