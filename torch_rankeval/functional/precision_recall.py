"""Precision@k, recall@k, hit rate@k and R-precision: counts of relevant documents in the top k."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention, resolve_convention
from torch_rankeval.functional._api import evaluate_family
from torch_rankeval.functional._ranking import RankedBatch, take_columns

__all__ = [
    "precision",
    "recall",
    "hit_rate",
    "r_precision",
    "precision_values",
    "recall_values",
    "hit_rate_values",
    "r_precision_values",
]


def _empty(rb: RankedBatch) -> Tensor:
    return (rb.n_relevant <= 0).unsqueeze(-1)


def _safe_div(num: Tensor, den: Tensor) -> Tensor:
    positive = den > 0
    return torch.where(positive, num / torch.where(positive, den, torch.ones_like(den)), torch.zeros_like(num))


def precision_values(rb: RankedBatch, ks: tuple, *, adaptive_k: bool) -> tuple[Tensor, Tensor]:
    """Expected relevant documents in the top k divided by k (or by ``min(k, list length)``)."""
    found = rb.expected_in_top("rel", ks)
    n_valid = rb.n_valid.unsqueeze(-1)
    cut = rb.constant([float("inf") if k is None else float(k) for k in ks])
    den = torch.minimum(cut, n_valid) if adaptive_k else torch.where(torch.isinf(cut), n_valid, cut)
    return _safe_div(found, den), _empty(rb)


def recall_values(rb: RankedBatch, ks: tuple) -> tuple[Tensor, Tensor]:
    """Expected relevant documents in the top k divided by all relevant documents of the query."""
    return _safe_div(rb.expected_in_top("rel", ks), rb.n_relevant.unsqueeze(-1)), _empty(rb)


def hit_rate_values(rb: RankedBatch, ks: tuple) -> tuple[Tensor, Tensor]:
    """Probability that the top k hold a relevant document.

    If nothing relevant ranks above the tie group the cutoff ends in and the cutoff takes ``m`` of
    its ``n`` slots, ``r`` of its documents relevant, a miss has probability
    ``C(n - r, m) / C(n, m) = prod_{j <= m} (1 - r / (n - j + 1))``: a running product over the
    group's slots in float64 (:attr:`TieGroups.no_relevant_yet`), exact at any group size.
    """
    idx = rb.cutoff_index(ks)
    g = rb.groups(rb.span(ks))
    if not rb.averaged:
        return (g.at("rel_before", idx) + g.at("rel", idx) > 0).to(rb.dtype), _empty(rb)
    return (1 - take_columns(g.no_relevant_yet, idx)).to(rb.dtype), _empty(rb)


def r_precision_values(rb: RankedBatch, ks: tuple) -> tuple[Tensor, Tensor]:
    """Precision at rank R, the number of relevant documents of the query (cutoffs are ignored)."""
    r_total = rb.n_relevant
    idx = (r_total.clamp(min=1, max=rb.length) - 1).long().unsqueeze(-1)  # a cutoff per list
    g = rb.groups(rb.length)
    s, n, r, c = (t.gather(-1, idx) for t in (g.start, g.size, g.rel, g.rel_before))
    found = c + (idx + 1 - s) * r / n
    return _safe_div(found, r_total.unsqueeze(-1)).expand(-1, len(ks)), _empty(rb)


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
    relevance_threshold: float | None = None,
    ties: str | None = None,
    empty_target_action: str | None = None,
    convention: str | Convention | None = None,
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """Precision@k: the fraction of the top ``k`` that is relevant.

    ``k`` beyond the list divides by ``k`` (trec_eval, default) or, with ``adaptive_k=True``, by the
    number of real documents in the list; ``k=None`` divides by the list length. Under
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
    """
    conv = resolve_convention(
        convention,
        adaptive_k=adaptive_k,
        relevance_threshold=relevance_threshold,
        ties=ties,
        empty_target_action=empty_target_action,
    )
    return evaluate_family(
        "precision",
        preds,
        target,
        k,
        convention=conv,
        mask=mask,
        exclude=exclude,
        ignore_index=ignore_index,
        ideal_target=ideal_target,
        n_relevant=n_relevant,
        reduction=reduction,
        validate_args=validate_args,
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
    conv = resolve_convention(
        convention, relevance_threshold=relevance_threshold, ties=ties, empty_target_action=empty_target_action
    )
    return evaluate_family(
        "recall",
        preds,
        target,
        k,
        convention=conv,
        mask=mask,
        exclude=exclude,
        ignore_index=ignore_index,
        ideal_target=ideal_target,
        n_relevant=n_relevant,
        reduction=reduction,
        validate_args=validate_args,
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
    conv = resolve_convention(
        convention, relevance_threshold=relevance_threshold, ties=ties, empty_target_action=empty_target_action
    )
    return evaluate_family(
        "hit_rate",
        preds,
        target,
        k,
        convention=conv,
        mask=mask,
        exclude=exclude,
        ignore_index=ignore_index,
        ideal_target=ideal_target,
        n_relevant=n_relevant,
        reduction=reduction,
        validate_args=validate_args,
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
    conv = resolve_convention(
        convention, relevance_threshold=relevance_threshold, ties=ties, empty_target_action=empty_target_action
    )
    return evaluate_family(
        "r_precision",
        preds,
        target,
        None,
        convention=conv,
        mask=mask,
        exclude=exclude,
        ignore_index=ignore_index,
        ideal_target=ideal_target,
        n_relevant=n_relevant,
        reduction=reduction,
        validate_args=validate_args,
    )
