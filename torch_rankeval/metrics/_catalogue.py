"""The input stage of the full-catalogue metrics (``ItemExposure``, ``IntraListDiversity``, ``Novelty``,
``Unexpectedness``, ``Serendipity`` and the RecTools metrics of :mod:`torch_rankeval.metrics.beyond`).

Their ``update`` runs the checks of the ranking metrics' input stage (:mod:`torch_rankeval.ranking.inputs`:
the same messages for the same bad input), then :func:`~torch_rankeval.ranking.catalogue.catalogue_rows`
(``(N, num_items)`` rows on the metric's device, ``exclude`` in canonical form). The options of
:class:`~torch_rankeval.RankingMetrics` a catalogue metric takes are taken with the same meaning, the
others are a ``TypeError`` that says why:

- ``mask=`` (bool, False = padding): a padded item is never ranked, as with ``exclude=True``;
- ``validate_args``: the value checks (NaN / infinite scores at ranked items, sparse ``exclude``
  entries) in one host sync, none with False;
- ``indexes=`` (flat input) is refused: a row's column is the item, and flat input (one entry per
  document with its query id) carries no item identity, so a 1-D ``preds`` is always one user's row
  over the whole catalogue (its width must be ``num_items``, so it cannot be mistaken for flat input:
  the "1-D preds without indexes=" error of the ranking metrics has no ambiguity to resolve here);
- ``ignore_index=``, ``input_format=``, ``whole_queries=`` (at construction) are refused: there are
  no target grades to mark padding with and no flat layout (``mask=`` or ``exclude=`` mark the items
  a row does not rank).

Example:
    >>> import torch
    >>> from torch_rankeval.metrics import ItemExposure
    >>> metric = ItemExposure(num_items=3, k=1)
    >>> metric.update(torch.tensor([[0.9, 0.5, 0.1]]), mask=torch.tensor([[False, True, True]]))
    >>> metric.counts                              # item 0 is padding: item 1 takes the slot
    tensor([0., 1., 0.], dtype=torch.float64)
    >>> metric.update(torch.tensor([0.9, 0.5, 0.1]), indexes=torch.tensor([0, 0, 0]))
    Traceback (most recent call last):
    ...
    TypeError: ItemExposure.update takes no indexes=: its input is one row of scores per user over the whole catalogue ((N, num_items), the column is the item), and flat input carries no item identity; pass the rows ((num_items,) for one user)
    >>> ItemExposure(num_items=3, k=1, ignore_index=-1)
    Traceback (most recent call last):
    ...
    TypeError: ItemExposure does not take ignore_index= (a full-catalogue metric reads one row of scores per user over the catalogue, without grades to mark padding nor a flat layout: mark the items a row does not rank with update(..., exclude=) or mask=)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from torch_rankeval.metrics._options import check_metric_options
from torch_rankeval.ranking.catalogue import catalogue_rows
from torch_rankeval.ranking.inputs import check_mask, check_scores
from torch_rankeval.ranking.sparse import SparseTarget

__all__ = ["REFUSED_INPUT_OPTIONS", "catalogue_input", "check_catalogue_kwargs"]

#: The input options of :class:`~torch_rankeval.RankingMetrics` a full-catalogue metric does not take.
REFUSED_INPUT_OPTIONS = ("ignore_index", "input_format", "whole_queries")


def check_catalogue_kwargs(owner: object, kwargs: Mapping[str, Any]) -> None:
    """The ``**kwargs`` of a full-catalogue metric's ``__init__``: torchmetrics' options only; an input
    option of the ranking metrics it does not take (:data:`REFUSED_INPUT_OPTIONS`) is a ``TypeError``
    saying why, any other unknown keyword one naming it (:func:`~torch_rankeval.metrics._options.check_metric_options`)."""
    refused = [name for name in REFUSED_INPUT_OPTIONS if name in kwargs]
    if refused:
        raise TypeError(
            f"{type(owner).__name__} does not take {', '.join(n + '=' for n in refused)} (a full-catalogue metric "
            "reads one row of scores per user over the catalogue, without grades to mark padding nor a flat "
            "layout: mark the items a row does not rank with update(..., exclude=) or mask=)"
        )
    check_metric_options(owner, kwargs)


def catalogue_input(
    owner: object,
    preds: Any,
    exclude: Any,
    *,
    num_items: int,
    device: torch.device,
    validate_args: bool,
    mask: Any = None,
    indexes: Any = None,
) -> tuple[Tensor, Tensor | SparseTarget | None]:
    """``(preds, exclude)`` of a full-catalogue ``update``: ``preds`` ``(N, num_items)`` and ``exclude``
    (dense bool, a canonical sparse one, or None) with the padding of ``mask`` merged in (False = never
    ranked); the checks of :mod:`torch_rankeval.ranking.inputs` first (the ranking metrics' messages),
    ``indexes`` refused with a ``TypeError``."""
    if indexes is not None:
        raise TypeError(
            f"{type(owner).__name__}.update takes no indexes=: its input is one row of scores per user over the "
            "whole catalogue ((N, num_items), the column is the item), and flat input carries no item identity; "
            "pass the rows ((num_items,) for one user)"
        )
    check_scores(preds)
    if mask is not None:
        check_mask(mask, preds)
    preds, exclude = catalogue_rows(preds, exclude, num_items, device, validate_args=validate_args)
    if mask is None:
        return preds, exclude
    padding = ~mask.reshape(preds.shape)
    if exclude is None:
        return preds, padding
    dense = exclude.to_dense().bool() if isinstance(exclude, SparseTarget) else exclude
    return preds, dense | padding
