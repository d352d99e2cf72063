"""Debiased gains from clicks: the propensity source, its checks, and ``c / max(rho, clip)``.

Shared by the position-debiased metrics and by :func:`aggregate_ips_gains`. Exactly one source of
examination probabilities is accepted:

* ``propensities`` — per item, the probability that the item was examined in the logged impression
  (for a stochastic or top-k logger: the policy-aware expectation ``E_pi[rho(position)]``);
* ``logged_positions`` + ``eta`` — position-based model ``rho = position ** -eta``;
* ``logged_positions`` + ``propensity_table`` — ``rho = propensity_table[position - 1]``;
* ``affine=(alpha, beta)`` — trust-bias correction (Vardasbi et al., 2020): gain
  ``(c - beta) / alpha``; ``alpha`` and ``beta`` are tables indexed by ``logged_positions`` when
  those are given, else per-item tensors.

The checks that only look at types, shapes and Python numbers always run. The checks that read
tensor values are returned as ``(flag, message)`` pairs, so the caller can resolve all of them with
one host sync (only with ``validate_args=True``).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch
from torch import Tensor

from torch_rankeval.ranking.inputs import _same_device, check_like

__all__ = [
    "check_sources",
    "check_clicks",
    "as_batch",
    "value_problems",
    "gain_problems",
    "debiased_gains",
    "raise_first",
    "TOLERANCE",
]

# Propensities a rounding error above 1 are accepted (a float32 1/3 * 3 is not exactly 1).
TOLERANCE = 1e-6

_INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _per_item(x: object, name: str, like: Tensor, like_name: str, *, positions: bool = False) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of the shape of {like_name}, got {type(x).__name__}")
    if positions:
        if not (x.is_floating_point() or x.dtype in _INT_DTYPES):
            raise TypeError(f"{name} must hold integer (or integral float) 1-based positions, got {x.dtype}")
    elif not x.is_floating_point():
        raise TypeError(f"{name} must be a floating tensor of probabilities, got {x.dtype}; call .float()")
    check_like(x, like, name, like_name)


def _table(x: object, name: str, like: Tensor, like_name: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a 1-D torch.Tensor indexed by logged position - 1, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating tensor, got {x.dtype}; call .float()")
    if x.ndim != 1 or x.shape[0] == 0:
        raise ValueError(
            f"{name} must be a non-empty 1-D tensor (entry p - 1 is for logged position p), got shape {tuple(x.shape)}"
        )
    _same_device(like, x, name, like_name)


def _not_positions(p: Tensor) -> Tensor:
    """True where ``p`` is not a 1-based integer position (below 1; a NaN, infinite or fractional float)."""
    bad = p < 1
    return bad | ~torch.isfinite(p) | (p != torch.floor(p)) if p.is_floating_point() else bad


def check_clicks(clicks: object, mask: object) -> None:
    """Type and shape checks of ``clicks`` and ``mask`` when there is no ``preds`` (any shape)."""
    if not isinstance(clicks, Tensor):
        raise TypeError(f"clicks must be a torch.Tensor, got {type(clicks).__name__}")
    if not (clicks.is_floating_point() or clicks.dtype == torch.bool or clicks.dtype in _INT_DTYPES):  # not complex
        raise TypeError(f"clicks must hold bool, integer or float clicks (counts, rates), got {clicks.dtype}")
    if mask is not None:
        if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
            raise TypeError("mask must be a bool tensor (True = real item, False = padding)")
        check_like(mask, clicks, "mask", "clicks")


def as_batch(
    *,
    propensities: Tensor | None,
    logged_positions: Tensor | None,
    propensity_table: Tensor | None,
    affine: Sequence[Tensor] | None,
) -> dict[str, Any]:
    """The per-item sources of one list ``(L,)`` as a batch of one ``(1, L)``; tables unchanged."""
    one = lambda t: None if t is None else t.unsqueeze(0)  # noqa: E731
    if affine is not None and logged_positions is None:
        affine = tuple(one(t) for t in affine)
    return dict(
        propensities=one(propensities),
        logged_positions=one(logged_positions),
        propensity_table=propensity_table,
        affine=affine,
    )


def check_sources(
    like: Tensor,
    *,
    like_name: str = "preds",
    propensities: Tensor | None,
    logged_positions: Tensor | None,
    eta: float | None,
    propensity_table: Tensor | None,
    affine: Sequence[Tensor] | None,
    clip: float | None,
) -> None:
    """Type, shape and exclusivity checks of the propensity source (no host sync)."""
    if clip is not None and not (_is_number(clip) and 0 < clip <= 1):
        raise ValueError(
            f"clip must be a number in (0, 1] (propensities below it are raised to it, so weights are at most 1/clip; "
            f"clip=1 gives the naive click metric), or None for no clipping; got {clip!r}"
        )
    if affine is not None:
        if propensities is not None or eta is not None or propensity_table is not None:
            raise ValueError(
                "affine=(alpha, beta) replaces the propensities (alpha already contains the examination probability): "
                "do not pass propensities=, eta= or propensity_table= with it"
            )
        if not isinstance(affine, (tuple, list)) or len(affine) != 2:
            raise TypeError("affine must be a pair (alpha, beta) of tensors")
        alpha, beta = affine
        for t, name in ((alpha, "affine alpha"), (beta, "affine beta")):
            if logged_positions is not None:
                _table(t, name, like, like_name)
            else:
                _per_item(t, name, like, like_name)
        if logged_positions is not None:
            _per_item(logged_positions, "logged_positions", like, like_name, positions=True)
            if alpha.shape != beta.shape:
                raise ValueError(
                    f"affine alpha and beta must have the same length, got {alpha.shape[0]} and {beta.shape[0]}"
                )
        return
    if (propensities is None) == (logged_positions is None):
        raise ValueError(
            "pass exactly one of propensities= (per-item examination probabilities) or logged_positions= "
            "(1-based positions in the logged ranking, with eta= or propensity_table=)"
        )
    if propensities is not None:
        if eta is not None or propensity_table is not None:
            raise ValueError("eta= and propensity_table= go with logged_positions=; with propensities= drop them")
        _per_item(propensities, "propensities", like, like_name)
        return
    _per_item(logged_positions, "logged_positions", like, like_name, positions=True)
    if (eta is None) == (propensity_table is None):
        raise ValueError(
            "logged_positions needs exactly one of eta= (position-based model rho = position ** -eta) or "
            "propensity_table= (rho = table[position - 1]); there is no default eta"
        )
    if eta is not None:
        if not _is_number(eta):
            raise TypeError(f"eta must be a Python number, got {type(eta).__name__}")
        if not (math.isfinite(eta) and eta >= 0):
            raise ValueError(f"eta must be finite and >= 0 (eta=0 gives the naive click metric), got {eta!r}")
    else:
        _table(propensity_table, "propensity_table", like, like_name)


def value_problems(
    clicks: Tensor,
    valid: Tensor,
    *,
    propensities: Tensor | None,
    logged_positions: Tensor | None,
    propensity_table: Tensor | None,
    affine: Sequence[Tensor] | None,
) -> list[tuple[Tensor, str]]:
    """The data-dependent checks as ``(flag, message)`` pairs, in the order they are reported."""
    c = clicks if clicks.is_floating_point() else clicks.to(torch.float32)
    problems = [
        (
            (valid & ~(torch.isfinite(c) & (c >= 0))).any(),
            "clicks must be finite and >= 0 at unmasked positions (0/1 clicks, click counts or click rates); "
            "mask padding with mask=False",
        ),
    ]
    clicked = valid & (c > 0)
    if affine is not None:
        problems.append(
            (
                (valid & (c > 1)).any(),
                "clicks must be 0/1 clicks or click-through rates in [0, 1] with affine=(alpha, beta): "
                "the affine correction (c - beta) / alpha is per impression; divide counts by impressions",
            )
        )
    if logged_positions is not None:
        problems += _position_problems(logged_positions, valid, propensity_table, affine)
    if propensity_table is not None:
        problems += _probability_problems(
            propensity_table, torch.ones_like(propensity_table, dtype=torch.bool), "propensity_table"
        )
        idx = _table_index(logged_positions, valid, propensity_table.shape[0])
        problems.append(
            (
                (clicked & (_lookup(propensity_table, idx) == 0)).any(),
                "propensity_table is 0 at the logged position of a clicked item: a click implies the item "
                "was examined, so the table (or the click log) is wrong",
            )
        )
    if propensities is not None:
        problems += _probability_problems(propensities, valid, "propensities")
        problems.append(
            (
                (clicked & (propensities == 0)).any(),
                "propensities is 0 for a clicked item: a click implies the item was examined, so the "
                "propensity model (or the click log) is wrong",
            )
        )
    if affine is not None:
        problems += _affine_problems(affine, valid, logged_positions)
    return problems


def _position_problems(
    p: Tensor, valid: Tensor, propensity_table: Tensor | None, affine: Sequence[Tensor] | None
) -> list[tuple[Tensor, str]]:
    """:func:`value_problems` of the logged positions ``p``: 1-based integers within the tables they index."""
    problems = [
        (
            (valid & _not_positions(p)).any(),
            "logged_positions are 1-based integers (the top slot is 1) at unmasked positions; "
            "add 1 to 0-based positions and mask padding with mask=False",
        )
    ]
    tables = [(propensity_table, "propensity_table")] if propensity_table is not None else []
    if affine is not None:
        tables = [(affine[0], "affine alpha")]
    for table, name in tables:
        problems.append(
            (
                (valid & (p > table.shape[0])).any(),
                f"logged_positions go beyond {name} (length {table.shape[0]}); extend the table to "
                "the deepest logged position (it is not extrapolated)",
            )
        )
    return problems


def _affine_problems(
    affine: Sequence[Tensor], valid: Tensor, logged_positions: Tensor | None
) -> list[tuple[Tensor, str]]:
    """:func:`value_problems` of the affine click model's ``(alpha, beta)``: probabilities that fit one."""
    alpha, beta = affine
    where = torch.ones_like(alpha, dtype=torch.bool) if logged_positions is not None else valid
    return [
        (
            (where & ~(torch.isfinite(alpha) & (alpha > 0) & (alpha <= 1 + TOLERANCE))).any(),
            "affine alpha must be in (0, 1]: alpha = P(click | relevant) - P(click | not relevant) at that position",
        ),
        (
            (where & ~(torch.isfinite(beta) & (beta >= 0) & (beta < 1))).any(),
            "affine beta must be in [0, 1): beta = P(click | not relevant) at that position",
        ),
        (
            (where & (alpha + beta > 1 + TOLERANCE)).any(),
            "affine alpha + beta must be <= 1: it is P(click | relevant) at that position",
        ),
    ]


def gain_problems(gains: Tensor, valid: Tensor, *, eta: float | None, clip: float | None) -> list[tuple[Tensor, str]]:
    """The debiased gains (and their sum per list) must be finite: a propensity that underflows to 0
    in the working dtype (``eta=100`` at logged position 30 in float32) or is tiny would otherwise
    give ``inf`` gains and a NaN metric. Reported after :func:`value_problems`, whose messages are
    more specific."""
    zero = torch.zeros((), dtype=gains.dtype, device=gains.device)
    total = torch.where(valid, gains, zero).sum(-1) if gains.ndim else gains
    dtype = str(gains.dtype).replace("torch.", "")
    if clip is not None:
        cause = f"a click count is too large for {dtype}; pass float64 clicks"
    else:
        underflow = (
            f"eta={eta} makes rho = position ** -eta underflow at deep logged positions, or " if eta is not None else ""
        )
        cause = (
            f"{underflow}a propensity is too small or a click count too large for {dtype}; bound the weights with "
            "clip=, pass float64 clicks / positions / propensities, or check the propensity model"
        )
    return [((~torch.isfinite(total)).any(), f"the debiased gains c / rho are not finite: {cause}")]


def _probability_problems(x: Tensor, where: Tensor, name: str) -> list[tuple[Tensor, str]]:
    return [
        (
            (where & ~(torch.isfinite(x) & (x >= 0))).any(),
            f"{name} must be finite probabilities in [0, 1] (NaN, inf or negative values found)",
        ),
        (
            (where & (x > 1 + TOLERANCE)).any(),
            f"{name} must be probabilities in [0, 1], found values > 1; if you have inverse-propensity weights, "
            "pass 1/weights",
        ),
    ]


def raise_first(problems: list[tuple[Tensor, str]]) -> None:
    """Resolve all flags with one host sync and raise the first problem found."""
    if not problems:
        return
    device = problems[0][0].device
    flags = torch.stack([f.to(device) for f, _ in problems]).tolist()
    for flag, (_, message) in zip(flags, problems):
        if flag:
            raise ValueError(message)


def _lookup(table: Tensor, index: Tensor) -> Tensor:
    """``table[index]`` for a 1-D table (index_select: far faster than advanced indexing on CPU)."""
    return table.index_select(0, index.reshape(-1)).reshape(index.shape)


def _table_index(positions: Tensor, valid: Tensor, length: int) -> Tensor:
    """0-based table index of each position; padding and out-of-range positions are clamped into
    the table (their values are masked out, or rejected by the checks)."""
    idx = positions.long() - 1 if not positions.is_floating_point() else positions.nan_to_num(1.0).long() - 1
    return torch.where(valid, idx, torch.zeros_like(idx)).clamp(0, length - 1)


def debiased_gains(
    clicks: Tensor,
    valid: Tensor,
    *,
    dtype: torch.dtype,
    propensities: Tensor | None = None,
    logged_positions: Tensor | None = None,
    eta: float | None = None,
    propensity_table: Tensor | None = None,
    affine: Sequence[Tensor] | None = None,
    clip: float | None = None,
) -> Tensor:
    """``c / max(rho, clip)`` (0 where ``c == 0`` or padding), or ``(c - beta) / max(alpha, clip)``
    with ``affine`` (every real item, so gains can be negative). Pure tensor code, no host sync."""
    c = clicks.to(dtype)
    zero = torch.zeros((), dtype=dtype, device=c.device)
    if affine is not None:
        alpha, beta = affine
        if logged_positions is not None:
            idx = _table_index(logged_positions, valid, alpha.shape[0])
            alpha, beta = _lookup(alpha, idx), _lookup(beta, idx)
        alpha, beta = alpha.to(dtype), beta.to(dtype)
        if clip is not None:
            alpha = alpha.clamp(min=clip)
        one = torch.ones((), dtype=dtype, device=c.device)
        return torch.where(valid, (c - beta) / torch.where(valid, alpha, one), zero)
    if propensities is not None:
        rho = propensities.to(dtype)
    elif eta is not None:
        p = torch.where(valid, logged_positions.to(dtype), torch.ones((), dtype=dtype, device=c.device))
        rho = p ** (-float(eta))
    else:
        rho = _lookup(propensity_table.to(dtype), _table_index(logged_positions, valid, propensity_table.shape[0]))
    if clip is not None:
        rho = rho.clamp(min=clip)
    # A click on an item with rho = 0 gives inf (never a silent finite number); validate_args rejects it.
    return torch.where(valid & (c != 0), c / rho, zero)
