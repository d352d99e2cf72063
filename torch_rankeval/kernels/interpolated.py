"""Precision read at points that depend on each query: interpolated precision at recall levels
(``iprec_at_recall``), its average (``11pt_avg``), precision at multiples of R (``Rprec_mult``),
relative precision (``relative_P``) and yaap, as trec_eval defines them.

For ``iprec_at_recall`` and ``Rprec_mult`` the kernels' "cutoffs" are the recall levels and the
multiples of R (their families' ``@`` parameter).

Interpolated precision and yaap are not linear in the ranking and have no practical exact
tie-averaged form: the registry refuses ``ties="average"`` for them. Precision at multiples of R
and relative precision are linear, so they average ties exactly.
"""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import check_deterministic, cutoff_sizes, group_sums, no_relevant
from torch_rankeval.ranking.view import RankedView, device_constant

__all__ = [
    "RECALL_LEVELS",
    "ROUNDINGS",
    "R_MULTIPLES",
    "eleven_point_values",
    "iprec_at_recall_values",
    "relative_precision_values",
    "relevant_counts",
    "rprec_mult_values",
    "yaap_values",
]

#: trec_eval's default recall levels of ``iprec_at_recall`` and ``11pt_avg``.
RECALL_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
#: trec_eval's default multiples of R of ``Rprec_mult``.
R_MULTIPLES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
#: How a recall level becomes a number of relevant documents: ``"lround"`` (trec_eval 10.0:
#: ``lround(level * R)``, halves away from zero) or ``"v9"`` (trec_eval 9.x and pytrec_eval:
#: ``(long)(level * R + 0.9)``).
ROUNDINGS = ("lround", "v9")


def relevant_counts(levels: tuple[float, ...], n_relevant: Tensor, rounding: str = "lround") -> Tensor:
    """Recall levels as numbers of relevant documents, ``(N, K)`` float64, computed in float64 as
    trec_eval computes them (see :data:`ROUNDINGS`).

    Example:
        >>> relevant_counts((0.1, 0.25, 0.5), torch.tensor([5.0, 12.0]))
        tensor([[1., 1., 3.],
                [1., 3., 6.]], dtype=torch.float64)
        >>> relevant_counts((0.1, 0.25, 0.5), torch.tensor([5.0, 12.0]), "v9")
        tensor([[1., 2., 3.],
                [2., 3., 6.]], dtype=torch.float64)
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {list(ROUNDINGS)}, got {rounding!r}")
    x = device_constant(tuple(levels), torch.float64, n_relevant.device) * n_relevant.to(torch.float64).unsqueeze(-1)
    if rounding == "v9":
        return torch.trunc(x + 0.9)
    whole = torch.trunc(x)  # lround: halves away from zero; x - trunc(x) is exact
    frac = x - whole
    return whole + torch.where(frac >= 0.5, 1.0, torch.where(frac <= -0.5, -1.0, 0.0)).to(x.dtype)


def _interpolated(rb: RankedView, levels: tuple[float, ...], rounding: str) -> Tensor:
    """Interpolated precision at each recall level, ``(N, K)``, trec_eval's loop vectorised: the
    maximum precision at or below the rank of the ``c``-th relevant document, ``c = round(level * R)``
    (the whole ranking for ``c = 0``), or 0 when fewer than ``c`` relevant documents are retrieved."""
    check_deterministic(rb, "interpolated precision (iprec_at_recall, 11pt_avg)")

    def make() -> tuple[Tensor, Tensor]:
        cum = rb.rel.cumsum(-1)
        precision = torch.where(rb.valid, cum / rb.positions, torch.zeros_like(cum))
        best_below = precision.flip(-1).cummax(-1).values.flip(-1)  # max over ranks >= i
        return cum, best_below

    cum, best_below = rb.cached("iprec_best_below", make)
    found = cum[:, -1:]
    c = relevant_counts(levels, rb.n_relevant, rounding).to(cum.dtype)
    rank = torch.searchsorted(cum.contiguous(), c.clamp(min=1).contiguous()).clamp(max=rb.length - 1)
    values = best_below.gather(-1, rank)
    return torch.where((c <= found) & (found > 0), values, torch.zeros_like(values))


def iprec_at_recall_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, *, rounding: str = "lround"
) -> tuple[Tensor, Tensor]:
    """Interpolated precision at the recall levels ``ks`` (trec_eval's ``iprec_at_recall``), ``(N, K)``.

    ``max(P@i for i >= rank of the c-th relevant document)`` with ``c = round(level * R)``
    (``rounding``: :data:`ROUNDINGS`); ``c = 0`` takes the whole ranking; 0 when fewer than ``c``
    relevant documents are retrieved or none is. Raises ValueError under averaged ties.

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds = torch.tensor([[5.0, 4.0, 3.0, 2.0, 1.0]], dtype=torch.float64)
        >>> out = compute(parse_measures(["iprec_at_recall.0,0.5,1"]), preds, torch.tensor([[0, 1, 0, 1, 0]]))
        >>> [round(v.item(), 4) for v in out.values()]     # P@2 = 0.5 is the best; P@4 = 0.5
        [0.5, 0.5, 0.5]
    """
    return _interpolated(rb, tuple(ks), rounding), no_relevant(rb)


def eleven_point_values(
    rb: RankedView,
    ks: tuple[int | None, ...],
    conv: Convention,
    *,
    levels: tuple[float, ...] = RECALL_LEVELS,
    rounding: str = "lround",
) -> tuple[Tensor, Tensor]:
    """The mean of interpolated precision over ``levels`` (trec_eval's ``11pt_avg``), ``(N, K)``;
    summed from the last level to the first, as trec_eval sums. Raises ValueError under averaged ties.

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds = torch.tensor([[5.0, 4.0, 3.0, 2.0, 1.0]], dtype=torch.float64)
        >>> compute(parse_measures(["11pt_avg"]), preds, torch.tensor([[0, 1, 0, 1, 0]]))["11pt_avg"].tolist()
        [0.5]
    """
    values = _interpolated(rb, tuple(levels), rounding)
    total = values[:, -1]
    for j in range(values.shape[-1] - 2, -1, -1):
        total = total + values[:, j]
    return (total / len(levels)).unsqueeze(-1).expand(-1, len(ks)), no_relevant(rb)


def rprec_mult_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Precision at ``c = (long)(multiple * R + 0.9)`` documents for each multiple in ``ks``
    (trec_eval's ``Rprec_mult``), ``(N, K)``; rank ``c`` beyond the ranking counts as not relevant
    (divides by ``c``). Exact under averaged ties (the expected number of relevant documents in
    the top ``c``).

    Edge cases: ``c = 0`` (no relevant document): 0.

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds = torch.tensor([[5.0, 4.0, 3.0, 2.0, 1.0]], dtype=torch.float64)
        >>> out = compute(parse_measures(["Rprec_mult.0.5,1,4"]), preds, torch.tensor([[0, 1, 0, 1, 0]]))
        >>> out                                              # R = 2: P@1, P@2, P@8
        {'Rprec_mult_0.50': tensor([0.], dtype=torch.float64), 'Rprec_mult_1.00': tensor([0.5000], dtype=torch.float64), 'Rprec_mult_4.00': tensor([0.2500], dtype=torch.float64)}
    """
    c = relevant_counts(tuple(ks), rb.n_relevant, "v9").to(rb.dtype)
    end = c.clamp(min=1, max=rb.length)
    index = end.long() - 1
    rel = rb.rel
    if rb.averaged:
        g = rb.groups()
        inside, above = group_sums(rb, rel)
        share = inside.gather(-1, index) / g.size.gather(-1, index)
        found = above.gather(-1, index) + (end - g.start.gather(-1, index)) * share
    else:
        found = rel.cumsum(-1).gather(-1, index)
    values = torch.where(c >= 1, found / c.clamp(min=1), torch.zeros_like(found))
    return values, no_relevant(rb)


def relative_precision_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Relative precision (trec_eval's ``relative_P``): relevant documents in the top ``k`` divided
    by ``min(k, R)``, the most a ranking could find, ``(N, K)``; ``k=None`` is the whole ranking
    (``min(number retrieved, R)``, trec_eval's ``set_relative_P``). Exact under averaged ties.

    Edge cases: no relevant document: 0 (flagged empty); ``k`` beyond the ranking counts the
    ranking's relevant documents.

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds = torch.tensor([[5.0, 4.0, 3.0, 2.0, 1.0]], dtype=torch.float64)
        >>> compute(parse_measures(["relative_P.1,2,5"]), preds, torch.tensor([[0, 1, 0, 1, 0]]))["relative_P_5"].tolist()
        [1.0]
    """
    found = rb.expected_relevant(ks)
    den = torch.minimum(cutoff_sizes(rb, ks, adaptive_k=False), rb.n_relevant.unsqueeze(-1))
    values = torch.where(den > 0, found / den.clamp(min=1), torch.zeros_like(found))
    return values, no_relevant(rb)


def yaap_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Yet Another AP (Robertson, ECIR 2012; trec_eval's ``yaap``): ``log((1 + S) / (1 + R - S))``
    with ``S`` the sum of the precisions at the retrieved relevant documents, ``(N, K)``. Raises
    ValueError under averaged ties.

    Edge cases: no relevant document: ``log(1) = 0`` (flagged empty).

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds = torch.tensor([[2.0, 1.0]], dtype=torch.float64)
        >>> round(compute(parse_measures(["yaap"]), preds, torch.tensor([[1, 0]]))["yaap"].item(), 6)   # log(2/1)
        0.693147
    """
    check_deterministic(rb, "yaap_values")
    rel = rb.rel
    s = (rel * rel.cumsum(-1) / rb.positions).sum(-1, keepdim=True)
    r = rb.n_relevant.unsqueeze(-1)
    return torch.log((1.0 + s) / (1.0 + r - s)).expand(-1, len(ks)), no_relevant(rb)
