"""Reciprocal rank of the first relevant document, exact under averaged ties."""

from __future__ import annotations

from typing import Sequence

from torch import Tensor

from torch_rankeval.conventions import Convention, resolve_convention
from torch_rankeval.measures.plan import evaluate_family

__all__ = ["reciprocal_rank"]


def reciprocal_rank(
    preds: Tensor,
    target: Tensor,
    k: int | Sequence[int] | None = None,
    *,
    mask: Tensor | None = None,
    exclude: Tensor | None = None,
    ignore_index: int | None = None,
    ideal_target: Tensor | None = None,
    n_relevant: Tensor | None = None,
    relevance_threshold: float | None = None,
    ties: str | None = None,
    empty_target_action: str | None = None,
    convention: str | Convention | None = None,
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """Reciprocal rank ``1 / rank`` of the first relevant document within the top ``k`` (0 if none);
    its mean over lists is MRR.

    A document is relevant when ``target >= relevance_threshold`` (default ``>= 1`` for integer
    grades, ``> 0`` for float/bool). Unlike torchmetrics, scores of any sign count: a document with a
    negative logit is still retrieved. With ``ties="average"`` (default) the value is the exact
    expected reciprocal rank over all orders of tied scores.

    Edge cases: a query with no relevant document (in the list, in ``ideal_target`` or per
    ``n_relevant``) is scored by ``empty_target_action`` (default ``"neg"``: 0, counted); a query
    whose relevant documents are all below ``k`` scores 0; ``k`` beyond the list is the whole list.

    Example:
        >>> import torch
        >>> from torch_rankeval.functional import reciprocal_rank
        >>> preds = torch.tensor([[-0.5, -1.0, -2.0], [3.0, 2.0, 1.0]])   # raw logits are fine
        >>> target = torch.tensor([[0, 1, 0], [0, 0, 0]])
        >>> reciprocal_rank(preds, target, reduction="none")
        tensor([0.5000, 0.0000])
        >>> reciprocal_rank(torch.tensor([1.0, 1.0, 1.0]), torch.tensor([0, 0, 1]))   # tie: (1 + 1/2 + 1/3) / 3
        tensor(0.6111)
    """
    return evaluate_family(
        "mrr",
        preds,
        target,
        k,
        convention=resolve_convention(
            convention, relevance_threshold=relevance_threshold, ties=ties, empty_target_action=empty_target_action
        ),
        reduction=reduction,
        validate_args=validate_args,
        name="reciprocal_rank",
        mask=mask,
        exclude=exclude,
        ignore_index=ignore_index,
        ideal_target=ideal_target,
        n_relevant=n_relevant,
    )
