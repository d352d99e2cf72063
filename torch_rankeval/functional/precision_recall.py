"""Precision@k, recall@k, hit rate@k and R-precision: counts of relevant documents in the top k."""

from __future__ import annotations

from typing import Sequence

from torch import Tensor

from torch_rankeval.conventions import Convention, resolve_convention
from torch_rankeval.measures.plan import evaluate_family

__all__ = ["precision", "recall", "hit_rate", "r_precision"]


def precision(
    preds: Tensor,
    target: Tensor,
    k: int | Sequence[int] | None = None,
    *,
    mask: Tensor | None = None,
    exclude: Tensor | None = None,
    ignore_index: int | None = None,
    ideal_target: Tensor | None = None,
    n_relevant: Tensor | None = None,
    adaptive_k: bool | None = None,
    min_k_relevant: bool | None = None,
    relevance_threshold: float | None = None,
    ties: str | None = None,
    empty_target_action: str | None = None,
    convention: str | Convention | None = None,
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """Precision@k: the fraction of the top ``k`` that is relevant.

    ``k`` beyond the list divides by ``k`` (trec_eval, default) or, with ``adaptive_k=True``, by the
    number of real documents in the list; ``k=None`` divides by the list length. With
    ``min_k_relevant=True`` it divides by at most the query's relevant documents, ``min(k, R)``
    (RecTools' ``Precision(r_precision=True)``). Under
    ``ties="average"`` (default) a tie that straddles ``k`` contributes its expected relevant count.

    A document is relevant when ``target >= relevance_threshold`` (default ``>= 1`` for integer
    grades, ``> 0`` for float/bool). A query with no relevant document (in the list, in
    ``ideal_target`` or per ``n_relevant``) is scored by ``empty_target_action`` (default ``"neg"``: 0).

    Example:
        >>> import torch
        >>> from torch_rankeval.functional import precision
        >>> preds, target = torch.tensor([0.9, 0.8, 0.7]), torch.tensor([1, 0, 1])
        >>> precision(preds, target, k=[1, 2, 5])
        tensor([1.0000, 0.5000, 0.4000])
        >>> precision(preds, target, k=5, adaptive_k=True)
        tensor(0.6667)
        >>> precision(preds, target, k=5, min_k_relevant=True)   # 2 found / min(5, 2 relevant)
        tensor(1.)
    """
    return evaluate_family(
        "precision",
        preds,
        target,
        k,
        convention=resolve_convention(
            convention,
            adaptive_k=adaptive_k,
            min_k_relevant=min_k_relevant,
            relevance_threshold=relevance_threshold,
            ties=ties,
            empty_target_action=empty_target_action,
        ),
        reduction=reduction,
        validate_args=validate_args,
        mask=mask,
        exclude=exclude,
        ignore_index=ignore_index,
        ideal_target=ideal_target,
        n_relevant=n_relevant,
    )


def recall(
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
    """Recall@k: the fraction of the query's relevant documents found in the top ``k``.

    The denominator counts every relevant document of the query: ``n_relevant`` if given, else
    those in ``ideal_target``, else those in the list. A document is relevant when
    ``target >= relevance_threshold`` (default ``>= 1`` for integer grades, ``> 0`` for float/bool).
    A query with no relevant document is scored by ``empty_target_action`` (default ``"neg"``: 0).
    Under averaged ties (default) a tie straddling ``k`` contributes its expected relevant count.

    Example:
        >>> import torch
        >>> from torch_rankeval.functional import recall
        >>> preds, target = torch.tensor([0.9, 0.8, 0.7]), torch.tensor([1, 0, 1])
        >>> recall(preds, target, k=[1, 3])
        tensor([0.5000, 1.0000])
        >>> recall(preds, target, k=3, n_relevant=torch.tensor(4))    # two relevant docs were never retrieved
        tensor(0.5000)
    """
    return evaluate_family(
        "recall",
        preds,
        target,
        k,
        convention=resolve_convention(
            convention, relevance_threshold=relevance_threshold, ties=ties, empty_target_action=empty_target_action
        ),
        reduction=reduction,
        validate_args=validate_args,
        mask=mask,
        exclude=exclude,
        ignore_index=ignore_index,
        ideal_target=ideal_target,
        n_relevant=n_relevant,
    )


def hit_rate(
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
    """Hit rate@k (trec_eval's ``success.k``): 1 if the top ``k`` hold a relevant document, else 0.

    Under ``ties="average"`` (default) it is the exact probability of a hit over the orders of tied
    scores. A document is relevant when ``target >= relevance_threshold`` (default ``>= 1`` for
    integer grades, ``> 0`` for float/bool). A query with no relevant document is scored by
    ``empty_target_action`` (default ``"neg"``: 0).

    Example:
        >>> import torch
        >>> from torch_rankeval.functional import hit_rate
        >>> preds, target = torch.tensor([0.9, 0.8, 0.7]), torch.tensor([0, 0, 1])
        >>> hit_rate(preds, target, k=[1, 2, 3])
        tensor([0., 0., 1.])
        >>> hit_rate(torch.tensor([0.5, 0.5, 0.5, 0.1]), torch.tensor([0, 1, 0, 0]), k=2)   # 1 - C(2,2)/C(3,2)
        tensor(0.6667)
    """
    return evaluate_family(
        "hit_rate",
        preds,
        target,
        k,
        convention=resolve_convention(
            convention, relevance_threshold=relevance_threshold, ties=ties, empty_target_action=empty_target_action
        ),
        reduction=reduction,
        validate_args=validate_args,
        mask=mask,
        exclude=exclude,
        ignore_index=ignore_index,
        ideal_target=ideal_target,
        n_relevant=n_relevant,
    )


def r_precision(
    preds: Tensor,
    target: Tensor,
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
    """R-precision: precision at rank ``R``, the number of relevant documents of the query.

    ``R`` is ``n_relevant`` if given, else the relevant count of ``ideal_target``, else of the list.
    When ``R`` exceeds the list, the found relevant documents are divided by ``R`` (trec_eval's
    ``Rprec``). A document is relevant when ``target >= relevance_threshold`` (default ``>= 1`` for
    integer grades, ``> 0`` for float/bool). A query with ``R = 0`` is scored by
    ``empty_target_action`` (default ``"neg"``: 0). Averaged ties (default) give the expected value.

    Example:
        >>> import torch
        >>> from torch_rankeval.functional import r_precision
        >>> preds, target = torch.tensor([0.9, 0.8, 0.7, 0.6]), torch.tensor([1, 0, 1, 0])
        >>> r_precision(preds, target)           # R = 2, one relevant in the top 2
        tensor(0.5000)
    """
    return evaluate_family(
        "r_precision",
        preds,
        target,
        None,
        convention=resolve_convention(
            convention, relevance_threshold=relevance_threshold, ties=ties, empty_target_action=empty_target_action
        ),
        reduction=reduction,
        validate_args=validate_args,
        mask=mask,
        exclude=exclude,
        ignore_index=ignore_index,
        ideal_target=ideal_target,
        n_relevant=n_relevant,
    )
