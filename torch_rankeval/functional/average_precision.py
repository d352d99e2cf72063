"""Average precision (binary and graded), exact under averaged ties."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from torch import Tensor

from torch_rankeval.conventions import Convention, resolve_convention
from torch_rankeval.measures.plan import evaluate_family

__all__ = ["average_precision"]


def average_precision(
    preds: Tensor,
    target: Tensor,
    k: int | Sequence[int] | None = None,
    *,
    mask: Tensor | None = None,
    exclude: Tensor | None = None,
    ignore_index: int | None = None,
    ideal_target: Tensor | None = None,
    n_relevant: Tensor | None = None,
    denominator: str | None = None,
    graded: bool | None = None,
    gain: str | Mapping[float, float] | Callable[[Tensor], Tensor] | None = None,
    relevance_threshold: float | None = None,
    ties: str | None = None,
    empty_target_action: str | None = None,
    convention: str | Convention | None = None,
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """Average precision (AP@k; its mean over lists is MAP).

    Binary AP is ``sum over relevant ranks p <= k of precision@p``, divided by ``denominator``:

    - ``"all_relevant"`` (default, trec_eval): all relevant documents of the query (``n_relevant``,
      else counted in ``ideal_target``, else in the list); unretrieved ones count as misses.
    - ``"retrieved_relevant"`` (torchmetrics): relevant documents found in the top ``k``.
    - ``"min_k_relevant"``: ``min(k, R)``, so a perfect top-k scores 1.
    - ``"k"``: the cutoff (the list's length for ``k=None``), as if every rank of the top ``k`` could
      hold a relevant document (RecTools' ``MAP(divide_by_k=True)``).

    A document is relevant when ``target >= relevance_threshold`` (default: ``>= 1`` for integer
    grades, ``> 0`` for float or bool).

    ``graded=True`` gives the gain-weighted AP: at each rank ``p`` the weight ``w_p = gain_p / G``
    (``G`` the largest judged gain of the query, so ``w`` is in ``[0, 1]``) multiplies the
    cumulative relevance-weighted precision ``sum_{q <= p} w_q / p``; the sum is divided by the
    total relevance (``sum w`` over the judged documents, over the top ``min(k, R)`` ideal ones,
    or over the retrieved top ``k``, or ``k`` times the largest, per ``denominator``). With binary
    grades it equals binary AP.

    ``ties="average"`` (default) gives the exact expected AP over all orders of tied scores,
    including a tie that straddles ``k`` (hypergeometric expectation). The one combination without
    a closed form, ``graded=True`` with ``"retrieved_relevant"`` and a finite ``k`` inside the list
    under averaged ties, raises ``ValueError``.

    Edge cases: a list with no relevant document is scored by ``empty_target_action`` (default
    ``"neg"``: 0, counted); relevant documents outside the top ``k`` or outside the list add
    nothing to the numerator; padding is never ranked.

    Example:
        >>> import torch
        >>> from torch_rankeval.functional import average_precision
        >>> preds = torch.tensor([0.9, 0.8, 0.7, 0.6])
        >>> target = torch.tensor([1, 0, 1, 0])
        >>> round(average_precision(preds, target).item(), 4)            # (1/1 + 2/3) / 2
        0.8333
        >>> round(average_precision(preds, target, n_relevant=torch.tensor(3)).item(), 4)   # one relevant doc never retrieved
        0.5556
        >>> average_precision(preds, target, k=[1, 2], denominator="retrieved_relevant")
        tensor([1., 1.])
    """
    return evaluate_family(
        "map",
        preds,
        target,
        k,
        convention=resolve_convention(
            convention,
            denominator=denominator,
            graded=graded,
            gain=gain,
            relevance_threshold=relevance_threshold,
            ties=ties,
            empty_target_action=empty_target_action,
        ),
        reduction=reduction,
        validate_args=validate_args,
        name="average_precision",
        mask=mask,
        exclude=exclude,
        ignore_index=ignore_index,
        ideal_target=ideal_target,
        n_relevant=n_relevant,
    )
