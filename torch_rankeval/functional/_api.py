"""The common path of every public functional metric: resolve, check, rank once, reduce."""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.functional._inputs import check_reduction, finalize, parse_k, prepare
from torch_rankeval.functional._ranking import RankedBatch, tie_split_values

__all__ = ["evaluate"]

ValuesFn = Callable[[RankedBatch, tuple], "tuple[Tensor, Tensor | None]"]


def evaluate(
    name: str,
    values_fn: ValuesFn,
    preds: Tensor,
    target: Tensor,
    k: object,
    *,
    convention: Convention,
    mask: Tensor | None = None,
    ignore_index: int | None = None,
    ideal_target: Tensor | None = None,
    n_relevant: Tensor | None = None,
    reduction: str = "mean",
    validate_args: bool = True,
    uses_gain: bool = False,
) -> Tensor:
    """Run ``values_fn(ranked_batch, cutoffs) -> (values, empty)`` and apply policy and reduction.

    ``empty`` is ``None`` for metrics that have no empty case (DCG, IDCG): those are never
    replaced or skipped.
    """
    ks, keep_k = parse_k(k)
    check_reduction(reduction)
    rb, single = prepare(
        preds, target, convention=convention, mask=mask, ignore_index=ignore_index, ideal_target=ideal_target,
        n_relevant=n_relevant, validate_args=validate_args, uses_gain=uses_gain,
    )
    values, empty = tie_split_values(rb, lambda batch: values_fn(batch, ks))
    if empty is None:
        empty, action = torch.zeros_like(values, dtype=torch.bool), "neg"
    else:
        action = convention.empty_target_action
        empty = empty.expand_as(values)
    return finalize(
        values, empty, action=action, reduction=reduction, validate_args=validate_args, single=single, keep_k=keep_k, name=name
    )
