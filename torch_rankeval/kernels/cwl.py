"""The C/W/L user-model measures of cwl_eval (Azzopardi, Thomas & Moffat, SIGIR 2019), as ir_measures
computes them: BPM, INSQ, INST, SDCG and the four NERR variants.

A C/W/L measure is the expected rate of gain of a user who reads the ranking top down and, after the
document at rank ``i``, reads on with probability ``C_i`` (its *continuation*). The chance of reading rank
``i`` is ``P_i = C_1 ... C_(i-1)`` (``P_1 = 1``) and the measure is the weighted mean of the gains,

``EU = sum_i P_i g_i / sum_i P_i``,

over the ranks ``1 .. D`` of cwl_eval's depth ``D`` (``max_n``, 1000 in ir_measures): the ranking is cut
at ``D`` documents and a shorter one is padded with gain 0 up to ``D`` (the normaliser ``sum_i P_i`` runs
to ``D`` whatever the list's length, as in cwl_eval).

The gain of a judged document of grade ``y`` is ``(clip(max(y, 0), min_rel, max_rel) - min_rel) /
(max_rel - min_rel)``, in [0, 1] (ir_measures' ``IrmQrelHandler``); an unjudged document and padding
gain 0. With ``r`` the 1-based rank, ``G_i`` the gain summed over ranks ``1 .. i`` and ``k`` the cutoff:

- ``INSQ(T)``: ``C_i = ((r + 2T - 1) / (r + 2T))**2`` (Moffat, Scholer & Thomas, ADCS 2012);
- ``INST(T)``: ``C_i = ((r + T + T_i - 1) / (r + T + T_i))**2`` with ``T_i = T - G_i`` (Moffat et al., ADCS 2015);
- ``BPM(T)@k``: ``C_i = 1`` while ``G_i < T`` and ``r < k``, then 0 (the static Bejeweled Player Model of
  Zhang et al., SIGIR 2017, with cost 1 per document: the mean gain of the first ``min(k, s)`` documents,
  ``s`` the rank where the gain reaches ``T``);
- ``SDCG@k``: ``C_i = log(r + 1) / log(r + 2)`` for ``r < k``, then 0: DCG@k with linear gain over the DCG
  of ``k`` documents of gain 1 (scaled DCG);
- ``NERR8@k``: ``C_i = 1 - g_i`` for ``r < k``, then 0; ``NERR9@k``: ``C_i = r / (r + 1) * (1 - g_i)`` for
  ``r < k``; ``NERR10(p)``: ``C_i = p (1 - g_i)``; ``NERR11(T)``: INSQ's ``C_i`` times ``(1 - g_i)``
  (Azzopardi, Mackenzie & Moffat, ICTIR 2021, equations 8 to 11);

``k=None`` sets no cutoff: the depth bounds the user. No measure has an empty case: a ranking without
gain scores 0 (cwl_eval's value). (cwl_eval's RBP, ``C_i = p``, is the library's RBP with ``depth``:
:mod:`torch_rankeval.kernels.rbp`.) Ties: INSQ and SDCG weigh each rank by a fixed ``P_i``, so their
expectation over the orders of tied documents replaces each gain by its tie group's mean (exact); the
others' continuations depend on the gains above, and they rank tied documents in one order.

Every rank is computed: the tensors are ``(N, D)`` float64 (cwl_eval's own arithmetic, in numpy float64).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import between, bounds, prefix
from torch_rankeval.ranking.view import RankedBatch, RankedView  # noqa: F401 (RankedBatch: the doctests)

__all__ = [
    "DEPTH",
    "bpm_values",
    "cwl_gains",
    "expected_utility",
    "insq_values",
    "inst_values",
    "nerr8_values",
    "nerr9_values",
    "nerr10_values",
    "nerr11_values",
    "sdcg_values",
]

#: cwl_eval's default depth (``max_n``), which ir_measures passes to it.
DEPTH = 1000

_F64 = torch.float64


def cwl_gains(
    rb: RankedView, *, min_rel: float = 0, max_rel: float = 1, depth: int = DEPTH, averaged: bool = False
) -> Tensor:
    """Each rank's gain in [0, 1] over the first ``depth`` ranks, ``(N, depth)`` float64 (see the module
    docstring); ``averaged``: each gain replaced by its tie group's mean (under averaged ties).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[3, -1, 1]]), None, DEFAULT)
        >>> cwl_gains(rb, min_rel=0, max_rel=2, depth=4)
        tensor([[1.0000, 0.0000, 0.5000, 0.0000]], dtype=torch.float64)
    """
    if not max_rel > min_rel:
        raise ValueError(
            f"max_rel must be greater than min_rel (the grades mapped to gain 1 and 0), got {max_rel} <= {min_rel}"
        )
    grades = rb.target.to(_F64).clamp(min=0).clamp(min=float(min_rel), max=float(max_rel))
    g = (grades - float(min_rel)) / (float(max_rel) - float(min_rel))
    g = torch.where(rb.judged & rb.valid, g, torch.zeros((), dtype=_F64, device=rb.device))
    if averaged and rb.averaged:
        start, end = bounds(rb)
        g = between(prefix(g), start, end) / (end - start).to(_F64)
    if rb.length >= depth:
        return g[:, :depth]
    return torch.constant_pad_nd(g, (0, depth - rb.length))


def _ranks(rb: RankedView, depth: int) -> Tensor:
    """The 1-based ranks ``1 .. depth``, ``(depth,)`` float64."""
    return torch.arange(1, depth + 1, dtype=_F64, device=rb.device)


def expected_utility(g: Tensor, c: Tensor) -> Tensor:
    """cwl_eval's expected utility ``sum_i P_i g_i / sum_i P_i`` with ``P_i = C_1 ... C_(i-1)``, ``(N,)``.

    Example:
        >>> expected_utility(torch.tensor([[1.0, 0.0, 1.0]]), torch.tensor([[0.5, 0.5, 0.5]]))   # (1 + 0.25) / 1.75
        tensor([0.7143])
    """
    reach = torch.constant_pad_nd(torch.cumprod(c[..., :-1], -1), (1, 0), 1.0)
    return (reach * g).sum(-1) / reach.sum(-1)


def _insq_continuation(rb: RankedView, T: float, depth: int) -> Tensor:
    r = _ranks(rb, depth)
    return ((r + 2.0 * T - 1.0) / (r + 2.0 * T)) ** 2


def _before_cutoff(rb: RankedView, k: int | None, depth: int) -> Tensor:
    """``r < k`` over the ranks ``1 .. depth``, ``(depth,)`` float64 (all ones for ``k=None``)."""
    r = _ranks(rb, depth)
    return (r < (math.inf if k is None else float(k))).to(_F64)


def _columns(rb: RankedView, values: list[Tensor]) -> Tensor:
    return torch.stack(values, -1).to(rb.dtype)


def insq_values(
    rb: RankedView,
    ks: tuple[int | None, ...],
    conv: Convention,
    *,
    T: float = 1.0,
    min_rel: float = 0,
    max_rel: float = 1,
    depth: int = DEPTH,
) -> tuple[Tensor, None]:
    """INSQ (cwl_eval's ``INSQCWLMetric``), ``(N, K)`` (one value, no cutoff).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8]]), torch.tensor([[1, 0]]), None, DEFAULT)
        >>> insq_values(rb, (None,), DEFAULT, T=1.0, depth=2)[0]   # P = (1, (2/3)**2): 1 / (1 + 4/9)
        tensor([[0.6923]])
    """
    g = cwl_gains(rb, min_rel=min_rel, max_rel=max_rel, depth=depth, averaged=True)
    eu = expected_utility(g, _insq_continuation(rb, T, depth).expand_as(g))
    return _columns(rb, [eu] * len(ks)), None


def inst_values(
    rb: RankedView,
    ks: tuple[int | None, ...],
    conv: Convention,
    *,
    T: float = 1.0,
    min_rel: float = 0,
    max_rel: float = 1,
    depth: int = DEPTH,
) -> tuple[Tensor, None]:
    """INST (cwl_eval's ``INSTCWLMetric``), ``(N, K)`` (one value, no cutoff).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8]]), torch.tensor([[1, 0]]), None, DEFAULT)
        >>> inst_values(rb, (None,), DEFAULT, T=1.0, depth=2)[0]   # C_1 = ((1 + 1 + 0 - 1) / (1 + 1 + 0))**2 = 1/4
        tensor([[0.8000]])
    """
    g = cwl_gains(rb, min_rel=min_rel, max_rel=max_rel, depth=depth)
    r = _ranks(rb, depth)
    base = r + 2.0 * T - torch.cumsum(g, -1)  # r + T + T_i
    eu = expected_utility(g, ((base - 1.0) / base) ** 2)
    return _columns(rb, [eu] * len(ks)), None


def nerr10_values(
    rb: RankedView,
    ks: tuple[int | None, ...],
    conv: Convention,
    *,
    p: float = 0.9,
    min_rel: float = 0,
    max_rel: float = 1,
    depth: int = DEPTH,
) -> tuple[Tensor, None]:
    """NERR, equation 10 (cwl_eval's ``NERReq10CWLMetric``): ``C_i = p (1 - g_i)``, ``(N, K)``.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8]]), torch.tensor([[0, 1]]), None, DEFAULT)
        >>> nerr10_values(rb, (None,), DEFAULT, p=0.5, depth=2)[0]   # P = (1, 0.5): 0.5 / 1.5
        tensor([[0.3333]])
    """
    g = cwl_gains(rb, min_rel=min_rel, max_rel=max_rel, depth=depth)
    eu = expected_utility(g, p * (1.0 - g))
    return _columns(rb, [eu] * len(ks)), None


def nerr11_values(
    rb: RankedView,
    ks: tuple[int | None, ...],
    conv: Convention,
    *,
    T: float = 1.0,
    min_rel: float = 0,
    max_rel: float = 1,
    depth: int = DEPTH,
) -> tuple[Tensor, None]:
    """NERR, equation 11 (cwl_eval's ``NERReq11CWLMetric``): INSQ's continuation times ``1 - g_i``, ``(N, K)``.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8]]), torch.tensor([[0, 1]]), None, DEFAULT)
        >>> nerr11_values(rb, (None,), DEFAULT, T=1.0, depth=2)[0]   # P = (1, 4/9): (4/9) / (13/9)
        tensor([[0.3077]])
    """
    g = cwl_gains(rb, min_rel=min_rel, max_rel=max_rel, depth=depth)
    eu = expected_utility(g, _insq_continuation(rb, T, depth) * (1.0 - g))
    return _columns(rb, [eu] * len(ks)), None


def bpm_values(
    rb: RankedView,
    ks: tuple[int | None, ...],
    conv: Convention,
    *,
    T: float = 1.0,
    min_rel: float = 0,
    max_rel: float = 1,
    depth: int = DEPTH,
) -> tuple[Tensor, None]:
    """The static Bejeweled Player Model (cwl_eval's ``BPMCWLMetric(T, K=k)``) at each cutoff, ``(N, K)``.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[0, 1, 1]]), None, DEFAULT)
        >>> bpm_values(rb, (1, 3, None), DEFAULT, T=1.0, depth=3)[0]   # reads 1, 2 (gain reaches T), 2 documents
        tensor([[0.0000, 0.5000, 0.5000]])
    """
    g = cwl_gains(rb, min_rel=min_rel, max_rel=max_rel, depth=depth)
    wanting = (torch.cumsum(g, -1) < T).to(_F64)
    return _columns(rb, [expected_utility(g, wanting * _before_cutoff(rb, k, depth)) for k in ks]), None


def sdcg_values(
    rb: RankedView,
    ks: tuple[int | None, ...],
    conv: Convention,
    *,
    dcg: str = "log2",
    min_rel: float = 0,
    max_rel: float = 1,
    depth: int = DEPTH,
) -> tuple[Tensor, None]:
    """Scaled DCG (cwl_eval's ``NDCGCWLMetric(k)``) at each cutoff, ``(N, K)``: DCG@k with linear gain
    over ``sum_(r <= k) 1 / log2(r + 1)``.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8]]), torch.tensor([[0, 1]]), None, DEFAULT)
        >>> sdcg_values(rb, (2,), DEFAULT)[0]   # (1 / log2(3)) / (1 + 1 / log2(3))
        tensor([[0.3869]])
    """
    if dcg != "log2":
        raise ValueError(f"dcg must be 'log2' (cwl_eval's discount), got {dcg!r}")
    g = cwl_gains(rb, min_rel=min_rel, max_rel=max_rel, depth=depth, averaged=True)
    r = _ranks(rb, depth)
    step = torch.log(r + 1.0) / torch.log(r + 2.0)
    return _columns(rb, [expected_utility(g, (step * _before_cutoff(rb, k, depth)).expand_as(g)) for k in ks]), None


def nerr8_values(
    rb: RankedView,
    ks: tuple[int | None, ...],
    conv: Convention,
    *,
    min_rel: float = 0,
    max_rel: float = 1,
    depth: int = DEPTH,
) -> tuple[Tensor, None]:
    """NERR, equation 8 (cwl_eval's ``NERReq8CWLMetric(k)``): ``C_i = 1 - g_i`` before the cutoff, ``(N, K)``.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8]]), torch.tensor([[0, 1]]), None, DEFAULT)
        >>> nerr8_values(rb, (1, 2), DEFAULT)[0]   # @2: P = (1, 1), one of two documents relevant
        tensor([[0.0000, 0.5000]])
    """
    g = cwl_gains(rb, min_rel=min_rel, max_rel=max_rel, depth=depth)
    return _columns(rb, [expected_utility(g, (1.0 - g) * _before_cutoff(rb, k, depth)) for k in ks]), None


def nerr9_values(
    rb: RankedView,
    ks: tuple[int | None, ...],
    conv: Convention,
    *,
    min_rel: float = 0,
    max_rel: float = 1,
    depth: int = DEPTH,
) -> tuple[Tensor, None]:
    """NERR, equation 9 (cwl_eval's ``NERReq9CWLMetric(k)``): ``C_i = r / (r + 1) (1 - g_i)`` before the
    cutoff, ``(N, K)``.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8]]), torch.tensor([[0, 1]]), None, DEFAULT)
        >>> nerr9_values(rb, (2,), DEFAULT)[0]   # P = (1, 1/2): (1/2) / (3/2)
        tensor([[0.3333]])
    """
    g = cwl_gains(rb, min_rel=min_rel, max_rel=max_rel, depth=depth)
    r = _ranks(rb, depth)
    step = r / (r + 1.0) * (1.0 - g)
    return _columns(rb, [expected_utility(g, step * _before_cutoff(rb, k, depth)) for k in ks]), None
