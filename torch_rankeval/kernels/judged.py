"""Judgment coverage: ``Judged@k`` (ir_measures) and trec_eval 10.0's ``unj``.

A document is *judged* when it has a relevance judgment: the ``judged`` flags given to
:func:`~torch_rankeval.functional.evaluate` / ``RankingMetrics.update`` (the TREC evaluation derives
them from the qrels: a document absent from the qrels, or with a negative grade, is unjudged);
without flags every real document is judged.

- ``Judged@k`` = judged documents in the top ``k`` / ``k``;
- ``unj@k`` (trec_eval's ``unj.5,10,20``) = unjudged documents in the top ``k`` / ``k``.

A cutoff beyond the list still divides by ``k`` (trec_eval: "irrelevant, not unjudged documents
fill in the rest"); with ``adaptive_k=True`` (the ``lightgbm`` preset) it divides by ``min(k, n)``
as ir_measures' Judged does. Without a cutoff the whole list: divided by its length. A list of
only padding scores 0. Ties: the expected share over the orders of tied documents (exact: the
share is linear in the ranked flags). Neither measure has an empty case.
"""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import cutoff_sizes, expected_top, safe_div
from torch_rankeval.ranking.view import RankedBatch, RankedView  # noqa: F401 (RankedBatch: the doctests)

__all__ = ["judged_values", "unjudged_values"]


def _share(rb: RankedView, flags: Tensor, ks: tuple[int | None, ...], adaptive_k: bool) -> Tensor:
    den = cutoff_sizes(rb, ks, adaptive_k=adaptive_k, dtype=torch.float64)
    return safe_div(expected_top(rb, flags, ks), den).to(rb.dtype)


def judged_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, *, adaptive_k: bool | None = None
) -> tuple[Tensor, None]:
    """Share of the top ``k`` that is judged, ``(N, K)``: over ``k``, or over ``min(k, retrieved)`` with
    ``adaptive_k`` (the measure's parameter; ``None``: the convention's ``adaptive_k``).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 0]]), None, DEFAULT,
        ...                  judged=torch.tensor([[True, False, True]]))
        >>> judged_values(rb, (2, 3, 5), DEFAULT)[0]
        tensor([[0.5000, 0.6667, 0.4000]])
    """
    return _share(rb, rb.judged, ks, conv.adaptive_k if adaptive_k is None else adaptive_k), None


def unjudged_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, None]:
    """Share of the top ``k`` that is retrieved but unjudged (trec_eval's ``unj``), ``(N, K)``.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 0]]), None, DEFAULT,
        ...                  judged=torch.tensor([[True, False, True]]))
        >>> unjudged_values(rb, (2, 3, 5), DEFAULT)[0]
        tensor([[0.5000, 0.3333, 0.2000]])
    """
    return _share(rb, rb.valid & ~rb.judged, ks, conv.adaptive_k), None
