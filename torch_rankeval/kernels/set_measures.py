"""Measures of the retrieved set as a whole (trec_eval's ``set_P``, ``set_relative_P``,
``set_recall``, ``set_map``, ``set_F`` and ``utility``): functions of the numbers retrieved
(``n``), relevant (``R``) and relevant retrieved (``r``) only, so ties never change them.

They take no cutoff. A query with no retrieved document (``-c`` adds them) scores 0 on every one
of them.
"""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import no_relevant, safe_div
from torch_rankeval.ranking.view import RankedView

__all__ = [
    "UTILITY_COEFFICIENTS",
    "set_ap_values",
    "set_f_values",
    "set_precision_values",
    "set_recall_values",
    "set_relative_precision_values",
    "utility_values",
]

#: trec_eval's default utility coefficients: +1 per relevant retrieved, -1 per non-relevant retrieved.
UTILITY_COEFFICIENTS = (1.0, -1.0, 0.0, 0.0)


def _counts(rb: RankedView) -> tuple[Tensor, Tensor, Tensor]:
    return rb.n_valid, rb.n_relevant, rb.rel.sum(-1)


def _out(rb: RankedView, values: Tensor, ks: tuple[int | None, ...]) -> tuple[Tensor, Tensor]:
    return values.unsqueeze(-1).expand(-1, len(ks)), no_relevant(rb)


def set_precision_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """``r / n``: precision of the whole retrieved set (trec_eval's ``set_P``), ``(N, K)``; 0 when
    nothing is retrieved.

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> compute(parse_measures(["set_P"]), torch.tensor([[3.0, 2.0, 1.0]]).double(), torch.tensor([[1, 0, 1]]))
        {'set_P': tensor([0.6667], dtype=torch.float64)}
    """
    n, _, r = _counts(rb)
    return _out(rb, safe_div(r, n), ks)


def set_relative_precision_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention
) -> tuple[Tensor, Tensor]:
    """``r / min(n, R)`` (trec_eval's ``set_relative_P``), ``(N, K)``; 0 when ``n`` or ``R`` is 0.

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds, ideal = torch.tensor([[3.0, 2.0]]).double(), torch.tensor([[1, 0, 1, 1]])
        >>> compute(parse_measures(["set_relative_P"]), preds, torch.tensor([[1, 0]]), ideal_target=ideal)
        {'set_relative_P': tensor([0.5000], dtype=torch.float64)}
    """
    n, big_r, r = _counts(rb)
    return _out(rb, safe_div(r, torch.minimum(n, big_r)), ks)


def set_recall_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """``r / R`` (trec_eval's ``set_recall``), ``(N, K)``; 0 without relevant documents.

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds, ideal = torch.tensor([[3.0, 2.0]]).double(), torch.tensor([[1, 0, 1, 1]])
        >>> compute(parse_measures(["set_recall"]), preds, torch.tensor([[1, 0]]), ideal_target=ideal)
        {'set_recall': tensor([0.3333], dtype=torch.float64)}
    """
    _, big_r, r = _counts(rb)
    return _out(rb, safe_div(r, big_r), ks)


def set_ap_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """``r^2 / (n R)``: set precision times set recall (trec_eval's ``set_map``), ``(N, K)``.

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds, ideal = torch.tensor([[3.0, 2.0]]).double(), torch.tensor([[1, 0, 1, 1]])
        >>> compute(parse_measures(["set_map"]), preds, torch.tensor([[1, 0]]), ideal_target=ideal)   # 1 / (2 * 3)
        {'set_map': tensor([0.1667], dtype=torch.float64)}
    """
    n, big_r, r = _counts(rb)
    return _out(rb, safe_div(r * r, n * big_r), ks)


def set_f_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, *, beta: float = 1.0
) -> tuple[Tensor, Tensor]:
    """``(beta + 1) P R / (beta P + R)`` of set precision ``P`` and set recall ``R`` (trec_eval's
    ``set_F``; ``beta`` weighs recall against precision), ``(N, K)``; 0 when nothing relevant is
    retrieved.

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds, ideal = torch.tensor([[3.0, 2.0]]).double(), torch.tensor([[1, 0, 1, 1]])
        >>> compute(parse_measures(["set_F", "set_F.0.5"]), preds, torch.tensor([[1, 0]]), ideal_target=ideal)
        {'set_F': tensor([0.4000], dtype=torch.float64), 'set_F_0.5': tensor([0.4286], dtype=torch.float64)}
    """
    n, big_r, r = _counts(rb)
    ok = r > 0

    def ratio(num: Tensor, den: Tensor) -> Tensor:  # 0 when nothing relevant is retrieved
        return torch.where(ok, num / torch.where(ok, den, torch.ones_like(den)), torch.zeros_like(num))

    p, rec = ratio(r, n), ratio(r, big_r)
    values = ratio((beta + 1.0) * p * rec, beta * p + rec)
    return _out(rb, values, ks)


def utility_values(
    rb: RankedView,
    ks: tuple[int | None, ...],
    conv: Convention,
    *,
    coefficients: tuple[float, ...] = UTILITY_COEFFICIENTS,
) -> tuple[Tensor, None]:
    """trec_eval's ``utility``: ``a r + b (n - r) + c (R - r) + d (N - n - R + r)`` with coefficients
    ``(a, b, c, d)`` and trec_eval's default collection size ``N = 0``, ``(N, K)``. A query with no
    retrieved document scores 0 (trec_eval resets it). Not flagged empty: a utility is defined
    without relevant documents.

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds, ideal = torch.tensor([[3.0, 2.0]]).double(), torch.tensor([[1, 0, 1, 1]])
        >>> names = ["utility", "utility.2,-1,0,0", "utility.2,-1,-0.5,0"]     # r = 1, n = 2, R = 3
        >>> compute(parse_measures(names), preds, torch.tensor([[1, 0]]), ideal_target=ideal)
        {'utility': tensor([0.], dtype=torch.float64), 'utility_2,-1,0,0': tensor([1.], dtype=torch.float64), 'utility_2,-1,-0.5,0': tensor([0.], dtype=torch.float64)}
    """
    a, b, c, d = coefficients
    n, big_r, r = _counts(rb)
    # trec_eval's expression, left to right.
    values = a * r + b * (n - r) + c * (big_r - r) + d * (r - n - big_r)
    values = torch.where(n > 0, values, torch.zeros_like(values))
    return values.unsqueeze(-1).expand(-1, len(ks)), None
