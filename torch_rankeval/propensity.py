"""Position-bias models and estimators of examination propensities, for the debiased metrics.

* :func:`pbm_propensity` — the power-law position-based model ``rho(p) = (1 / p) ** eta``.
* :func:`relative_propensity_from_randomized` — ``rho(k) / rho(1) = CTR(k) / CTR(1)`` from logs in
  which the top n results were shuffled uniformly at random (RandTop-n; Wang et al. 2016/2018).
* :func:`fit_eta` — least-squares power-law exponent of relative propensities.
* :func:`pbm_em` — tabular EM for the position-based model (Chuklin, Markov & de Rijke 2015) on
  logs where the logger moves items between positions.

**A plain click-through-rate ratio on logs that were not randomised is confounded**: the logger
puts relevant items on top, so the CTR falls with the position faster than the examination does
(on Plackett-Luce logs with a true ``eta = 1`` it gives ``eta ~ 1.7``). This module deliberately
offers no such estimator: randomise (RandTop-n), or fit the PBM by EM, which separates position
from item.

Out of scope: intervention harvesting, regression EM with features, the dual learning algorithm,
contextual PBMs. See ULTRA / ULTRA_pytorch and philipphager/ultr-bias-toolkit for those.

Example:
    >>> import torch
    >>> from torch_rankeval.propensity import fit_eta, pbm_propensity
    >>> rho = pbm_propensity(torch.arange(1, 6), eta=1.0)
    >>> rho
    tensor([1.0000, 0.5000, 0.3333, 0.2500, 0.2000])
    >>> round(fit_eta(rho), 6)
    1.0
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from torch_rankeval.ranking.clicks import _INT_DTYPES, _not_positions
from torch_rankeval.ranking.inputs import check_like, work_dtype

__all__ = ["pbm_propensity", "relative_propensity_from_randomized", "fit_eta", "pbm_em"]


def _check_eta(eta: object) -> None:
    if isinstance(eta, bool) or not isinstance(eta, (int, float)):
        raise TypeError(f"eta must be a Python number, got {type(eta).__name__}")
    if not (math.isfinite(eta) and eta >= 0):
        raise ValueError(f"eta must be finite and >= 0, got {eta!r}")


def _check_positive_int(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def _check_tensor(x: object, name: str, *, integer: bool = False) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if integer and x.dtype not in _INT_DTYPES:
        raise TypeError(f"{name} must be an integer tensor, got {x.dtype}")
    if not integer and not (x.is_floating_point() or x.dtype in _INT_DTYPES or x.dtype == torch.bool):  # not complex
        raise TypeError(f"{name} must hold bool, integer or float values, got {x.dtype}")


def pbm_propensity(logged_positions: Tensor, eta: float, *, validate_args: bool = True) -> Tensor:
    """Examination probability of the power-law position-based model, ``(1 / position) ** eta``.

    Args:
        logged_positions: 1-based positions (integer or integral float tensor, any shape).
        eta: exponent >= 0 (0: every position is examined; 1: ``1 / position``).
        validate_args: check that the positions are integers >= 1 (one host sync).

    Returns:
        float32 (float64 for float64 positions), the shape of ``logged_positions``. With
        ``validate_args``, a probability that underflows to 0 in that dtype raises (float32 holds
        ``position ** -eta`` down to about 1e-45: ``eta=100`` fails from position 3 on; pass float64
        positions).

    Example:
        >>> import torch
        >>> pbm_propensity(torch.tensor([1, 2, 4]), eta=2.0)
        tensor([1.0000, 0.2500, 0.0625])
    """
    _check_tensor(logged_positions, "logged_positions")
    _check_eta(eta)
    p = logged_positions
    if validate_args and bool(_not_positions(p).any()):
        raise ValueError("logged_positions are 1-based integers (the top slot is 1); add 1 to 0-based positions")
    rho = p.to(work_dtype(p)) ** (-float(eta))
    if validate_args and bool((rho == 0).any()):
        deepest = int(p.max())
        raise ValueError(
            f"eta={eta} makes (1 / position) ** eta underflow to 0 in {rho.dtype} (position {deepest} gives "
            f"{deepest}**-{eta}); pass float64 logged_positions or use a smaller eta"
        )
    return rho


def _position_index(positions: Tensor, num_positions: int, name: str, validate_args: bool) -> Tensor:
    if validate_args and bool((_not_positions(positions) | (positions > num_positions)).any()):
        raise ValueError(
            f"{name} must be 1-based integer positions in 1..num_positions={num_positions}; add 1 to 0-based "
            "positions, drop deeper rows or raise num_positions"
        )
    return (positions.long() - 1).clamp(0, num_positions - 1)


def relative_propensity_from_randomized(
    clicks: Tensor,
    positions: Tensor,
    num_positions: int,
    *,
    mask: Tensor | None = None,
    validate_args: bool = True,
) -> Tensor:
    """Relative examination propensities ``rho(k) / rho(1) = CTR(k) / CTR(1)`` from RandTop-n logs.

    Valid **only for randomised logs**: the top ``n`` results of each impression shuffled uniformly
    at random, so that relevance is independent of the position and the click-through rate at
    position ``k`` is ``rho(k) * mean(gamma)`` (Wang et al., SIGIR 2016 / WSDM 2018). On ordinary
    logs the same ratio is confounded by the logger putting relevant items on top, and overstates
    the position bias; this function cannot detect that, so do not feed it such logs.

    Args:
        clicks: clicks (0/1 or counts) of each displayed item, any shape.
        positions: 1-based displayed position of each item, same shape.
        num_positions: ``n``, the number of randomised positions.
        mask: bool, False drops a row (padding).
        validate_args: check positions (1..n) and clicks (>= 0), and that every position was shown
            and position 1 was clicked (host syncs).

    Returns:
        ``(num_positions,)``, entry ``k - 1`` for position ``k``; entry 0 is 1. float32 (float64
        for float64 clicks).

    Example:
        >>> import torch
        >>> clicks = torch.tensor([[1, 1, 0], [1, 1, 0], [1, 0, 1], [0, 0, 1]])   # 4 shuffled impressions
        >>> positions = torch.tensor([[1, 2, 3], [3, 1, 2], [1, 3, 2], [2, 3, 1]])
        >>> relative_propensity_from_randomized(clicks, positions, 3)      # CTR 1.0, 0.5, 0.25
        tensor([1.0000, 0.5000, 0.2500])
    """
    _check_tensor(clicks, "clicks")
    _check_tensor(positions, "positions")
    check_like(positions, clicks, "positions", "clicks")
    _check_positive_int(num_positions, "num_positions")
    keep = torch.ones_like(clicks, dtype=torch.bool) if mask is None else mask
    if mask is not None:
        _check_tensor(mask, "mask")
        check_like(mask, clicks, "mask", "clicks")
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor (False = padding), got {mask.dtype}")
    c = torch.where(keep, clicks.to(torch.float64), torch.zeros((), dtype=torch.float64, device=clicks.device))
    if validate_args and bool((keep & ~(torch.isfinite(c) & (c >= 0))).any()):
        raise ValueError("clicks must be finite and >= 0")
    idx = _position_index(
        torch.where(keep, positions, torch.ones_like(positions)), num_positions, "positions", validate_args
    )
    zeros = torch.zeros(num_positions, dtype=torch.float64, device=c.device)
    shown = zeros.clone().index_add_(0, idx.reshape(-1), keep.reshape(-1).to(torch.float64))
    clicked = zeros.clone().index_add_(0, idx.reshape(-1), c.reshape(-1))
    if validate_args:
        if bool((shown == 0).any()):
            missing = (torch.nonzero(shown == 0).reshape(-1) + 1).tolist()
            raise ValueError(
                f"positions {missing} were never shown: collect more randomised impressions or lower num_positions"
            )
        if bool(clicked[0] == 0):
            raise ValueError(
                "position 1 has no clicks, so the ratios CTR(k) / CTR(1) are undefined: collect more randomised impressions"
            )
    ctr = clicked / shown
    return (ctr / ctr[0]).to(work_dtype(clicks))


def fit_eta(relative_propensities: Tensor) -> float:
    """Power-law exponent of relative propensities: least squares through the origin of
    ``log(rho_k / rho_1) = -eta * log(k)``, i.e. ``eta = -sum log(k) log(r_k) / sum log(k)**2``.

    Args:
        relative_propensities: ``(n,)``, entry ``k - 1`` for position ``k`` (entry 0 carries no
            information: ``log 1 = 0``). Every entry for ``k >= 2`` must be positive.

    Returns:
        ``eta`` as a Python float (this reads the tensor).

    Example:
        >>> import torch
        >>> round(fit_eta(torch.tensor([1.0, 0.25, 1 / 9])), 6)    # (1 / k) ** 2
        2.0
    """
    _check_tensor(relative_propensities, "relative_propensities")
    r = relative_propensities.to(torch.float64)
    if r.ndim != 1 or r.shape[0] < 2:
        raise ValueError(f"relative_propensities must be 1-D with at least 2 positions, got shape {tuple(r.shape)}")
    r, logk = r[1:], torch.log(torch.arange(2, r.shape[0] + 1, dtype=torch.float64, device=r.device))
    if bool((~torch.isfinite(r) | (r <= 0)).any()):
        raise ValueError(
            "relative_propensities must be finite and > 0 at positions >= 2 (log is taken); a position without clicks "
            "needs more data, or leave the deeper positions out"
        )
    return float(-(logk * torch.log(r)).sum() / (logk * logk).sum())


def pbm_em(
    item_ids: Tensor,
    positions: Tensor,
    clicks: Tensor,
    impressions: Tensor | None = None,
    *,
    num_items: int,
    num_positions: int,
    iters: int = 200,
    validate_args: bool = True,
) -> tuple[Tensor, Tensor]:
    """Tabular EM for the position-based model ``P(click) = theta[position] * gamma[item]``.

    Each row is one (item, position) cell of the log: ``clicks`` clicks out of ``impressions``
    impressions (``impressions=None``: one impression per row, clicks 0/1). An *item* is a
    (query, document) pair. E-step for the non-clicks: ``P(examined | no click) =
    theta (1 - gamma) / (1 - theta gamma)`` and ``P(relevant | no click) = (1 - theta) gamma /
    (1 - theta gamma)``; M-step: the expected examinations per position and the expected
    relevances per item over their impressions (the updates of PyClick's ``PBM``). Starts from
    ``theta = gamma = 0.5`` and runs a fixed number of iterations; deterministic, vectorised with
    ``index_add_``, no host sync inside the loop.

    Only the ratios ``theta[k] / theta[1]`` are identified, and only when the logger moves items
    between positions (the item-position graph is connected); a deterministic logger that always
    shows an item at the same position cannot separate position from relevance.

    Args:
        item_ids: integer item of each row, in ``0..num_items-1``.
        positions: 1-based position of each row, in ``1..num_positions``.
        clicks: clicks of each row (0 <= clicks <= impressions).
        impressions: impressions of each row, or None for one.
        num_items, num_positions: table sizes.
        iters: EM iterations.
        validate_args: check ids, positions and counts (host syncs before the loop).

    Returns:
        ``(theta_rel, gamma)``: ``theta_rel[k - 1] = theta[k] / theta[1]`` (``(num_positions,)``,
        entry 0 is 1) and ``gamma = theta[1] * attractiveness`` (``(num_items,)``), the click
        probability of each item at position 1, so that ``theta_rel[k - 1] * gamma[i]`` is the
        fitted click probability. Items or positions never shown are NaN. float32 (float64 for
        float64 clicks or impressions).

    Example:
        >>> import torch
        >>> # two items, each shown 100 times at positions 1 and 2; true theta = [1, 0.5], gamma = [0.8, 0.4]
        >>> item = torch.tensor([0, 0, 1, 1]); pos = torch.tensor([1, 2, 1, 2])
        >>> clicks = torch.tensor([80, 40, 40, 20]); shown = torch.full((4,), 100)
        >>> theta, gamma = pbm_em(item, pos, clicks, shown, num_items=2, num_positions=2)
        >>> theta, gamma
        (tensor([1.0000, 0.5000]), tensor([0.8000, 0.4000]))
    """
    _check_tensor(item_ids, "item_ids", integer=True)
    _check_tensor(positions, "positions")
    _check_tensor(clicks, "clicks")
    check_like(positions, item_ids, "positions", "item_ids")
    check_like(clicks, item_ids, "clicks", "item_ids")
    if impressions is not None:
        _check_tensor(impressions, "impressions")
        check_like(impressions, item_ids, "impressions", "item_ids")
    _check_positive_int(num_items, "num_items")
    _check_positive_int(num_positions, "num_positions")
    _check_positive_int(iters, "iters")
    f64 = torch.float64
    device = clicks.device
    c = clicks.reshape(-1).to(f64)
    n = torch.ones_like(c) if impressions is None else impressions.reshape(-1).to(f64)
    items = item_ids.reshape(-1)
    pos = _position_index(positions.reshape(-1), num_positions, "positions", validate_args)
    if validate_args:
        if bool(((items < 0) | (items >= num_items)).any()):
            raise ValueError(f"item_ids must be in 0..num_items-1 = 0..{num_items - 1}")
        if bool((~torch.isfinite(n) | (n < 0) | ~torch.isfinite(c) | (c < 0) | (c > n)).any()):
            raise ValueError("clicks and impressions must be finite with 0 <= clicks <= impressions on every row")
        if bool(torch.where(pos == 0, n, torch.zeros_like(n)).sum() == 0):
            raise ValueError("position 1 has no impressions, so theta[k] / theta[1] is undefined")
    items = items.clamp(0, num_items - 1)

    shown_pos = torch.zeros(num_positions, dtype=f64, device=device).index_add_(0, pos, n)
    shown_item = torch.zeros(num_items, dtype=f64, device=device).index_add_(0, items, n)
    theta = torch.full((num_positions,), 0.5, dtype=f64, device=device)
    gamma = torch.full((num_items,), 0.5, dtype=f64, device=device)
    no_click = n - c
    for _ in range(iters):
        t, g = theta.index_select(0, pos), gamma.index_select(0, items)
        denom = (1 - t * g).clamp(min=1e-12)
        exam = c + no_click * t * (1 - g) / denom
        rel = c + no_click * (1 - t) * g / denom
        theta = torch.zeros_like(theta).index_add_(0, pos, exam) / shown_pos
        gamma = torch.zeros_like(gamma).index_add_(0, items, rel) / shown_item
    out = work_dtype(clicks, impressions)
    return (theta / theta[0]).to(out), (gamma * theta[0]).to(out)
