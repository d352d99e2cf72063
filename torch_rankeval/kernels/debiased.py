"""The position-debiased DCG/nDCG kernel: DCG and nDCG of a new ranking with IPS gains from clicks
(what the estimate means and when to trust it: :mod:`torch_rankeval.functional.debiased`)."""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import resolve_convention
from torch_rankeval.kernels.dcg import dcg_values, ndcg_values
from torch_rankeval.ranking.clicks import (
    as_batch,
    check_sources,
    debiased_gains,
    gain_problems,
    raise_first,
    value_problems,
)
from torch_rankeval.ranking.inputs import check_preds_target, prepare, work_dtype

__all__ = ["NORMALIZE", "position_debiased_values"]


NORMALIZE = ("ideal", "none")


def _affine_tensors(affine: object) -> tuple:
    return tuple(affine) if isinstance(affine, (tuple, list)) else ()


def position_debiased_values(
    preds: Tensor,
    clicks: Tensor,
    ks: tuple[int, ...],
    *,
    propensities: Tensor | None = None,
    logged_positions: Tensor | None = None,
    eta: float | None = None,
    propensity_table: Tensor | None = None,
    affine: tuple[Tensor, Tensor] | None = None,
    clip: float | None = None,
    mask: Tensor | None = None,
    normalize: str = "ideal",
    ties: str | None = None,
    validate_args: bool = True,
) -> tuple[Tensor, Tensor]:
    """Per-list debiased DCG (``normalize="none"``) or nDCG (``"ideal"``) at each cutoff.

    The building block of :func:`position_debiased_dcg`, :func:`position_debiased_ndcg` and of
    the Metric classes: checks the inputs, computes the debiased gains, ranks the batch once with
    the library's input stage (:func:`~torch_rankeval.ranking.inputs.prepare`: linear gain, the
    ``ties`` policy, the gains as grades) and reads DCG / nDCG off at each cutoff. No reduction and
    no empty-list policy are applied.

    Args:
        ks: cutoffs as returned by :func:`~torch_rankeval.ranking.inputs.parse_k`
            (a tuple of ints, ``None`` for the whole list).
        Other arguments as in :func:`position_debiased_ndcg`.

    Returns:
        ``(values, empty)``, both ``(N, K)`` (a 1-D input is one list, ``N = 1``). ``empty`` marks
        lists whose ideal DCG is <= 0 (no click; with ``affine``, no positive gain) for
        ``normalize="ideal"``; their value is meaningless and must be replaced by the empty-list
        policy. With ``normalize="none"`` nothing is empty: a list without clicks has DCG 0.

    Example:
        >>> import torch
        >>> values, empty = position_debiased_values(
        ...     torch.tensor([[0.1, 0.4, 0.9, 0.2], [0.3, 0.2, 0.1, 0.0]]), torch.tensor([[1, 0, 1, 0], [0, 0, 0, 0]]),
        ...     (2, None), logged_positions=torch.tensor([[1, 2, 3, 4], [1, 2, 3, 4]]), eta=1.0)
        >>> values[0], empty[1]
        (tensor([0.8262, 0.9448]), tensor([True, True]))
    """
    check_preds_target(preds, clicks, mask, target_name="clicks")
    sources = dict(
        propensities=propensities, logged_positions=logged_positions, propensity_table=propensity_table, affine=affine
    )
    check_sources(preds, eta=eta, clip=clip, **sources)
    if normalize not in NORMALIZE:
        raise ValueError(
            f"normalize={normalize!r} is not valid: use 'ideal' (nDCG, the ideal from the same debiased gains) or 'none' (DCG)"
        )
    conv = resolve_convention(None, gain="linear", ties=ties)
    if preds.ndim == 1:
        preds, clicks, mask = preds.unsqueeze(0), clicks.unsqueeze(0), None if mask is None else mask.unsqueeze(0)
        sources = as_batch(**sources)
    valid = torch.ones_like(clicks, dtype=torch.bool) if mask is None else mask
    dtype = work_dtype(preds, clicks, propensities, propensity_table, *_affine_tensors(affine))
    gains = debiased_gains(clicks, valid, dtype=dtype, eta=eta, clip=clip, **sources)
    if validate_args:
        preds_nan = (valid & torch.isnan(preds)).any()
        raise_first(
            [
                (
                    preds_nan,
                    "preds contains NaN scores at unmasked positions; fix the model output or mark those "
                    "items as padding with mask=False (+-inf scores are allowed)",
                )
            ]
            + value_problems(clicks, valid, **sources)
            + gain_problems(gains, valid, eta=eta, clip=clip)
        )
    if preds.shape[-1] == 0:  # lists without items: DCG 0, and no ideal (as fully masked lists)
        values = torch.zeros(preds.shape[0], len(ks), dtype=dtype, device=preds.device)
        return values, torch.full_like(values, normalize == "ideal", dtype=torch.bool)
    # the library's input stage ranks the batch (its checks of values are the ones above: +-inf scores rank)
    rb, _ = prepare(preds, gains, convention=conv, mask=mask, validate_args=False)
    if normalize == "none":
        values, _ = dcg_values(rb, ks, conv)
        return values, torch.zeros_like(values, dtype=torch.bool)
    values, empty = ndcg_values(rb, ks, conv)
    return values, empty.expand_as(values)
