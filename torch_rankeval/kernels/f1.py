"""F1@k: the harmonic mean of precision@k and recall@k, per query (ranx's ``f1``), and F-beta@k
(RecTools' ``F1Beta``): recall weighted ``beta`` times as much as precision."""

from __future__ import annotations

from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import cutoff_sizes, no_relevant, safe_div
from torch_rankeval.ranking.view import RankedBatch, RankedView  # noqa: F401 (RankedBatch: the doctest)

__all__ = ["f1_values"]


def f1_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, *, beta: float = 1
) -> tuple[Tensor, Tensor]:
    """``(1 + b^2) P R / (b^2 P + R)`` with ``P = h / k``, ``R = h / R_q`` and ``b = beta``, which is
    ``(1 + b^2) h / (k + b^2 R_q)`` (``2 h / (k + R_q)`` for F1; ``h``: relevant documents in the top
    k, ``R_q``: the query's relevant documents; 0 when ``h = 0``). Linear in ``h``, so the expected
    value over the orders of tied documents is exact (``ties="average"``). ``k`` is ``min(k, list
    length)`` with the convention's ``adaptive_k``, the list length for no cutoff.

    Example:
        >>> import torch
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[1, 0, 1]]), None, DEFAULT)
        >>> f1_values(rb, (1, 2, None), DEFAULT)[0]  # P@1=1, R@1=1/2: F1=2/3; F1@2=2/4; F1@3=4/5
        tensor([[0.6667, 0.5000, 0.8000]])
        >>> f1_values(rb, (1,), DEFAULT, beta=2)[0]  # 5 * 1 / (1 + 4 * 2)
        tensor([[0.5556]])
    """
    found = rb.expected_in_top("rel", ks)
    size = cutoff_sizes(rb, ks, adaptive_k=conv.adaptive_k, dtype=found.dtype)
    b2 = float(beta) ** 2
    return safe_div((1 + b2) * found, size + b2 * rb.n_relevant.to(found.dtype).unsqueeze(-1)), no_relevant(rb)
