"""DCG, ideal DCG and nDCG: one kernel, pluggable gain and discount."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from torch import Tensor

from torch_rankeval.conventions import Convention, resolve_convention
from torch_rankeval.measures.plan import evaluate_family

__all__ = ["dcg", "idcg", "ndcg"]


K = int | Sequence[int] | None


def dcg(
    preds: Tensor,
    target: Tensor,
    k: K = None,
    *,
    mask: Tensor | None = None,
    exclude: Tensor | None = None,
    ignore_index: int | None = None,
    gain: str | Mapping[float, float] | Callable[[Tensor], Tensor] | None = None,
    log_base: float | None = None,
    discount: Callable[[Tensor], Tensor] | None = None,
    ties: str | None = None,
    convention: str | Convention | None = None,
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """Discounted cumulative gain ``sum_{rank <= k} gain(rel) * discount(rank)``.

    Args:
        preds: scores, ``(L,)`` for one list or ``(N, L)`` for a batch; higher ranks first.
        target: grades of the same shape (bool, int or float).
        k: cutoff: ``None`` (whole list), an int, or a sequence of ints (one value per cutoff,
            trailing dimension, from one ranking). ``k`` beyond the list length sums the whole list.
        mask: bool, False marks padding: never ranked, never counted.
        exclude: ``(N, L)`` bool, dense or sparse, True = never ranked, never counted (e.g. items seen
            in training): ``mask=False`` for full-catalogue rows. With ``exclude`` or a torch sparse
            ``target`` (COO / CSR, absent = grade 0) the lists are ranked only as deep as ``k``
            (see "Recommender evaluation over the full catalogue" in the README).
        ignore_index: a grade value in ``target`` that marks padding.
        gain: ``"exp2"`` (``2**rel - 1``, default), ``"linear"``, ``{grade: gain}`` or a callable.
        log_base: base of the discount ``1 / log_b(rank + 1)`` (default 2).
        discount: a callable of the 1-based float rank that replaces the log discount.
        ties: ``"average"`` (default: expected DCG over all orders of tied scores), ``"first"``,
            ``"pessimistic"``, ``"optimistic"``.
        convention: a preset name (``"trec_eval"``, ``"sklearn"``, ...) or a
            :class:`~torch_rankeval.conventions.Convention`; explicit arguments override it.
        reduction: ``"mean"`` over lists, ``"sum"``, or ``"none"`` (per list).
        validate_args: run the checks that read values (NaN/inf scores, negative grades under
            exp2); ``False`` keeps the kernel free of host syncs.

    Edge cases: padding contributes nothing; an all-padding list or a list without positive gains
    has DCG 0; ``k`` beyond the list sums the whole list.

    Example:
        >>> import torch
        >>> from torch_rankeval.functional import dcg
        >>> preds = torch.tensor([0.9, 0.8, 0.1])
        >>> target = torch.tensor([0, 3, 1])          # gains 0, 7, 1 at ranks 1, 2, 3
        >>> round(dcg(preds, target).item(), 4)       # 7/log2(3) + 1/log2(4)
        4.9165
        >>> dcg(preds, target, k=[1, 2], gain="linear")
        tensor([0.0000, 1.8928])
    """
    return evaluate_family(
        "dcg",
        preds,
        target,
        k,
        convention=resolve_convention(convention, gain=gain, log_base=log_base, discount=discount, ties=ties),
        reduction=reduction,
        validate_args=validate_args,
        mask=mask,
        exclude=exclude,
        ignore_index=ignore_index,
    )


def idcg(
    preds: Tensor,
    target: Tensor,
    k: K = None,
    *,
    mask: Tensor | None = None,
    exclude: Tensor | None = None,
    ignore_index: int | None = None,
    ideal_target: Tensor | None = None,
    gain: str | Mapping[float, float] | Callable[[Tensor], Tensor] | None = None,
    log_base: float | None = None,
    discount: Callable[[Tensor], Tensor] | None = None,
    convention: str | Convention | None = None,
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """Ideal DCG: the DCG of the judged documents sorted by decreasing gain.

    Takes the arguments of :func:`dcg`, plus ``ideal_target``: ``(N, M)`` grades of *all* judged
    documents of each query, including those the ranking did not return (trec_eval's IDCG; pad
    with 0 or ``ignore_index``). Without it the ideal is built from the list itself. ``preds``
    only fixes the shape and device; the ideal does not depend on the scores.

    Example:
        >>> import torch
        >>> from torch_rankeval.functional import idcg
        >>> target = torch.tensor([0, 3, 1])
        >>> round(idcg(torch.zeros(3), target).item(), 4)      # 7/log2(2) + 1/log2(3)
        7.6309
        >>> round(idcg(torch.zeros(3), target, ideal_target=torch.tensor([3, 3, 1, 0])).item(), 4)
        11.9165
    """
    return evaluate_family(
        "idcg",
        preds,
        target,
        k,
        convention=resolve_convention(convention, gain=gain, log_base=log_base, discount=discount),
        reduction=reduction,
        validate_args=validate_args,
        mask=mask,
        exclude=exclude,
        ignore_index=ignore_index,
        ideal_target=ideal_target,
    )


def ndcg(
    preds: Tensor,
    target: Tensor,
    k: K = None,
    *,
    mask: Tensor | None = None,
    exclude: Tensor | None = None,
    ignore_index: int | None = None,
    ideal_target: Tensor | None = None,
    gain: str | Mapping[float, float] | Callable[[Tensor], Tensor] | None = None,
    log_base: float | None = None,
    discount: Callable[[Tensor], Tensor] | None = None,
    ties: str | None = None,
    empty_target_action: str | None = None,
    ideal_ranking: str | None = None,
    convention: str | Convention | None = None,
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """Normalised DCG: ``DCG@k / IDCG@k``.

    Takes the arguments of :func:`dcg` and :func:`idcg`, plus ``empty_target_action`` for lists
    whose ideal DCG is 0 (no document with a positive gain): ``"neg"`` (default) scores 0,
    ``"pos"`` 1, ``"skip"`` leaves them out of the mean (NaN in ``reduction="none"``; the mean of
    nothing is NaN with a warning), ``"error"`` raises.

    With ``ties="average"`` (default) the value is the exact expected nDCG over all orders of tied
    scores, as in sklearn and torchmetrics. With ``ideal_target`` the ideal comes from every
    judged document (trec_eval), so unretrieved relevant documents lower the score. With
    ``ideal_ranking="k_relevant"`` the ideal is ``k`` documents of the list's highest gain, however few it has
    (RecTools' ``NDCG(divide_by_achievable=False)``).

    Example:
        >>> import torch
        >>> from torch_rankeval.functional import ndcg
        >>> preds = torch.tensor([[0.9, 0.8, 0.1], [0.2, 0.4, 0.6]])
        >>> target = torch.tensor([[0, 3, 1], [1, 0, 0]])
        >>> ndcg(preds, target, reduction="none")
        tensor([0.6443, 0.5000])
        >>> ndcg(preds, target, k=[1, 3])
        tensor([0.0000, 0.5721])
        >>> ndcg(torch.tensor([0.5, 0.5]), torch.tensor([1, 0]), gain="linear")   # tie: mean of 1 and 0.6309
        tensor(0.8155)
        >>> ndcg(torch.tensor([0.9, 0.8, 0.7]), torch.tensor([1, 0, 0]), k=3, ideal_ranking="k_relevant")  # 1 / (1 + 0.6309 + 0.5)
        tensor(0.4693)
    """
    return evaluate_family(
        "ndcg",
        preds,
        target,
        k,
        convention=resolve_convention(
            convention,
            gain=gain,
            log_base=log_base,
            discount=discount,
            ties=ties,
            empty_target_action=empty_target_action,
            ideal_ranking=ideal_ranking,
        ),
        reduction=reduction,
        validate_args=validate_args,
        mask=mask,
        exclude=exclude,
        ignore_index=ignore_index,
        ideal_target=ideal_target,
    )
