"""Position-debiased (inverse-propensity) DCG and nDCG of a new ranking, estimated from click logs.

Under the position-based model (PBM) an item logged at position ``p`` is clicked with probability
``rho(p) * gamma``: it must be examined (``rho``) and then found attractive (``gamma``). The gain
``g = c / rho`` is an unbiased estimate of ``gamma`` (Joachims, Swaminathan & Schnabel, WSDM 2017),
so the DCG of the *new* ranking with gains ``g`` is an unbiased estimate of its DCG with linear gain
``gamma``. The ideal DCG of the debiased nDCG is built from the same debiased gains sorted in
decreasing order (TF-Ranking's weighted NDCG).

What the numbers mean, and when to trust them:

1. **What is estimated.** DCG/nDCG with *linear* gain ``gamma = P(click | examined)``. It equals the
   exponential-gain nDCG of graded labels only when ``P(click | examined, label)`` is proportional
   to ``2**label - 1``. Never apply ``2**g - 1`` to IPS gains.
2. **Aggregate clicks per query before normalising** (:func:`aggregate_ips_gains`). nDCG computed
   per impression (session) and then averaged is biased and does not converge; with one click in
   the list the propensity cancels and it equals the naive click nDCG. The debiased DCG needs no
   aggregation: its mean over sessions is unbiased.
3. **Unbiased only if** the PBM holds, the propensities are right (relative propensities
   ``rho(p) / rho(1)`` are enough for nDCG; DCG is then in "clicks at rank 1" units), ``rho > 0``
   for every item that can be relevant, and there is no clipping.
4. **Top-k or stochastic loggers** need policy-aware propensities, the expected examination
   ``E_pi[rho(position)]`` of each item under the logging policy, passed as ``propensities=``.
   Items a deterministic top-k logger never showed have ``rho = 0`` and cannot be recovered.
5. **Variance** grows like ``1 / rho``. ``clip=tau`` raises propensities below ``tau`` to ``tau``
   (weights at most ``1 / tau``, Strehl et al. 2010) at the price of a bias: a clipped item's gain
   is underestimated by the factor ``rho / tau``, which pulls the metric towards the naive one.
   For confidence intervals, bootstrap over queries with ``reduction="none"``.
6. **Trust bias** (clicks on non-relevant top results) is not corrected by IPS; use
   ``affine=(alpha, beta)`` (Vardasbi, Oosterhuis & de Rijke, CIKM 2020): gain
   ``(c - beta) / alpha`` on every displayed item, unbiased for ``P(relevant)``; gains can be
   negative, so nDCG can leave [0, 1].
"""

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
from torch_rankeval.ranking.inputs import check_preds_target, work_dtype
from torch_rankeval.ranking.view import RankedBatch

__all__ = ["NORMALIZE", "position_debiased_values"]


NORMALIZE = ("ideal", "none")


def _work_dtype(*tensors: object) -> torch.dtype:
    return work_dtype(*(t for t in tensors if isinstance(t, Tensor)))


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
    the library's ranking core (linear gain, the ``ties`` policy) and reads DCG / nDCG off at each
    cutoff. No reduction and no empty-list policy are applied.

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
    check_sources(
        preds,
        propensities=propensities,
        logged_positions=logged_positions,
        eta=eta,
        propensity_table=propensity_table,
        affine=affine,
        clip=clip,
    )
    if normalize not in NORMALIZE:
        raise ValueError(
            f"normalize={normalize!r} is not valid: use 'ideal' (nDCG, the ideal from the same debiased gains) or 'none' (DCG)"
        )
    conv = resolve_convention(None, gain="linear", ties=ties)
    sources = dict(
        propensities=propensities, logged_positions=logged_positions, propensity_table=propensity_table, affine=affine
    )
    if preds.ndim == 1:
        preds, clicks, mask = preds.unsqueeze(0), clicks.unsqueeze(0), None if mask is None else mask.unsqueeze(0)
        sources = as_batch(**sources)
    valid = torch.ones_like(clicks, dtype=torch.bool) if mask is None else mask
    dtype = _work_dtype(preds, clicks, propensities, propensity_table, *_affine_tensors(affine))
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
    rb = RankedBatch(preds, gains, valid, conv, dtype=dtype)
    if normalize == "none":
        values, _ = dcg_values(rb, ks, conv)
        return values, torch.zeros_like(values, dtype=torch.bool)
    values, empty = ndcg_values(rb, ks, conv)
    return values, empty.expand_as(values)
