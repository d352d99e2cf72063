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

from typing import Sequence

import torch
from torch import Tensor

from torch_rankeval.conventions import EMPTY_TARGET_ACTIONS
from torch_rankeval.kernels.debiased import _affine_tensors, position_debiased_values
from torch_rankeval.measures.reduction import Reduction
from torch_rankeval.ranking.clicks import (
    check_clicks,
    check_sources,
    debiased_gains,
    gain_problems,
    raise_first,
    value_problems,
)
from torch_rankeval.ranking.inputs import check_reduction, parse_k, work_dtype

__all__ = ["ips_gains", "position_debiased_ndcg", "position_debiased_dcg", "aggregate_ips_gains"]


K = int | Sequence[int] | None


def ips_gains(
    clicks: Tensor,
    propensities: Tensor | None = None,
    *,
    logged_positions: Tensor | None = None,
    eta: float | None = None,
    propensity_table: Tensor | None = None,
    affine: tuple[Tensor, Tensor] | None = None,
    clip: float | None = None,
    mask: Tensor | None = None,
    validate_args: bool = True,
) -> Tensor:
    """Debiased gains ``g = c / max(rho, clip)``: 0 where ``c == 0`` and at padding.

    ``g`` is an unbiased estimate of ``gamma = P(click | examined)`` under the position-based model
    when the propensities are right and ``clip`` is None. Give exactly one propensity source:

    Args:
        clicks: ``(L,)`` or ``(N, L)``; 0/1 clicks, click counts or click rates (>= 0; bool ok).
        propensities: per item, the probability that the item was examined in the logged impression
            (in [0, 1]; for top-k or stochastic loggers, the expectation under the logging policy).
            0 is allowed for items that were not clicked (they contribute 0).
        logged_positions: 1-based positions of the items in the logged ranking, with ``eta``
            (``rho = position ** -eta``) or ``propensity_table`` (``rho = table[position - 1]``).
        eta: power-law exponent of the position-based model (>= 0; 0 = naive clicks). No default.
        propensity_table: 1-D examination probability of each logged position.
        affine: ``(alpha, beta)``, the trust-bias (affine) correction ``g = (c - beta) / alpha`` on
            every real item, instead of propensities: tables indexed by ``logged_positions`` if
            given, else per-item tensors. ``clip`` then bounds ``alpha`` from below.
        clip: ``tau`` in (0, 1]: ``rho <- max(rho, tau)``, so weights are at most ``1 / tau``.
            Biased: a clipped item's gain is scaled by ``rho / tau``.
        mask: bool, False marks padding (gain 0).
        validate_args: run the checks that read values (one host sync).

    Returns:
        Gains of the shape of ``clicks``, float32 (float64 when an input is float64).

    Example:
        >>> import torch
        >>> from torch_rankeval.functional import ips_gains
        >>> ips_gains(torch.tensor([1, 0, 1, 0]), logged_positions=torch.tensor([1, 2, 3, 4]), eta=1.0)
        tensor([1., 0., 3., 0.])
        >>> ips_gains(torch.tensor([1, 0, 1, 0]), torch.tensor([1.0, 0.5, 1 / 3, 0.25]), clip=0.5)
        tensor([1., 0., 2., 0.])
    """
    check_clicks(clicks, mask)
    sources = dict(
        propensities=propensities, logged_positions=logged_positions, propensity_table=propensity_table, affine=affine
    )
    check_sources(clicks, like_name="clicks", eta=eta, clip=clip, **sources)
    valid = torch.ones_like(clicks, dtype=torch.bool) if mask is None else mask
    dtype = work_dtype(clicks, propensities, propensity_table, *_affine_tensors(affine))
    gains = debiased_gains(clicks, valid, dtype=dtype, eta=eta, clip=clip, **sources)
    if validate_args:
        raise_first(value_problems(clicks, valid, **sources) + gain_problems(gains, valid, eta=eta, clip=clip))
    return gains


#: The messages of the debiased reduction: what a skipped list lacks, and the advice when none counts.
NO_CLICK = "have no click (ideal DCG <= 0)"
NO_CLICK_HINT = "; aggregate clicks per query (aggregate_ips_gains) or use empty_target_action='neg'"


def position_debiased_ndcg(
    preds: Tensor,
    clicks: Tensor,
    k: K = None,
    *,
    propensities: Tensor | None = None,
    logged_positions: Tensor | None = None,
    eta: float | None = None,
    propensity_table: Tensor | None = None,
    affine: tuple[Tensor, Tensor] | None = None,
    clip: float | None = None,
    normalize: str = "ideal",
    mask: Tensor | None = None,
    ties: str | None = None,
    empty_target_action: str = "skip",
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """Position-debiased nDCG of a new ranking from logged clicks: ``DCG@k(g) / IDCG@k(g)``.

    ``g = c / max(rho, clip)`` are the debiased gains (:func:`ips_gains`), ``DCG@k(g)`` ranks them
    by ``preds`` (the ranker under evaluation) and ``IDCG@k(g)`` sorts the same gains in decreasing
    order, so the value lies in [0, 1] (without ``affine``). It is a ratio estimator: consistent
    when ``clicks`` are aggregated per query over many sessions, **biased when computed per
    session** (with a single click the propensity cancels and it equals the naive click nDCG).
    Aggregate first with :func:`aggregate_ips_gains`, or report :func:`position_debiased_dcg`.
    Only relative propensities ``rho(p) / rho(1)`` matter (the value is scale-invariant).

    Estimates nDCG with linear gain ``gamma = P(click | examined)``; when it is unbiased in the limit
    (model, propensities, clipping, top-k loggers, trust bias): :mod:`torch_rankeval.functional.debiased`.

    Args:
        preds: scores of the ranker under evaluation, ``(L,)`` or ``(N, L)``; NaN rejected, +-inf ok.
        clicks: 0/1 clicks, counts or rates (>= 0; bool ok), same shape.
        k: cutoff: ``None`` (whole list), an int, or a sequence of ints (trailing dimension);
            ``k`` beyond the list is the whole list.
        propensities, logged_positions, eta, propensity_table, affine, clip: the propensity source
            and its clipping, as in :func:`ips_gains`: exactly one source is required, there is no
            default ``eta`` (``eta=0`` gives the naive click nDCG), inverse-propensity *weights*
            (> 1) are rejected, and with ``affine`` gains can be negative, so nDCG can leave [0, 1].
        normalize: ``"ideal"`` (nDCG) or ``"none"`` (the debiased DCG, as
            :func:`position_debiased_dcg`).
        mask: bool, False marks padding: never ranked, gain 0.
        ties: tie policy for equal ``preds`` (library-wide; default ``"average"``, the expected
            value over all orders of tied items, as torchmetrics and sklearn).
        empty_target_action: lists whose ideal DCG is 0 (no click, or all padding): ``"skip"``
            (default: leave them out of the mean, NaN with ``reduction="none"``; most sessions
            have no clicks), ``"neg"`` (score 0, torchmetrics' choice), ``"pos"`` (1), ``"error"``.
        reduction: ``"mean"`` over lists that are not skipped, ``"sum"``, or ``"none"``.
        validate_args: run the checks that read values (NaN scores, clicks < 0, positions that are
            not 1-based or beyond the table, propensities outside [0, 1] or 0 on a clicked item)
            and warn when every list is skipped; ``False`` keeps the function free of host syncs
            (it then compiles with ``torch.compile(fullgraph=True)``) and the all-skipped mean is
            a silent NaN.

    Returns:
        float32 (float64 when an input is float64): a scalar, ``(K,)`` for a sequence of cutoffs,
        or per list with ``reduction="none"``. When every list is skipped the mean is NaN (with a
        ``UserWarning``).

    Example:
        >>> import torch
        >>> from torch_rankeval.functional import position_debiased_ndcg
        >>> preds = torch.tensor([0.1, 0.4, 0.9, 0.2])          # the new ranker's scores
        >>> clicks = torch.tensor([1, 0, 1, 0])                 # clicks in the logged impression
        >>> positions = torch.tensor([1, 2, 3, 4])              # where the logger showed each item
        >>> position_debiased_ndcg(preds, clicks, logged_positions=positions, eta=1.0)
        tensor(0.9448)
        >>> position_debiased_ndcg(preds, clicks, [2, 4], logged_positions=positions, eta=0.0)  # naive clicks
        tensor([0.6131, 0.8772])
    """
    ks, keep_k = parse_k(k)
    check_reduction(reduction)
    if empty_target_action not in EMPTY_TARGET_ACTIONS:
        raise ValueError(
            f"empty_target_action={empty_target_action!r} is not valid: use one of {', '.join(map(repr, EMPTY_TARGET_ACTIONS))} "
            "(what a list without clicks scores)"
        )
    values, empty = position_debiased_values(
        preds,
        clicks,
        ks,
        propensities=propensities,
        logged_positions=logged_positions,
        eta=eta,
        propensity_table=propensity_table,
        affine=affine,
        clip=clip,
        mask=mask,
        normalize=normalize,
        ties=ties,
        validate_args=validate_args,
    )
    name = "position_debiased_ndcg" if normalize == "ideal" else "position_debiased_dcg"
    action = empty_target_action if normalize == "ideal" else "neg"
    out = Reduction(action=action, reason=NO_CLICK, hint=NO_CLICK_HINT).reduce(
        values, empty, reduction=reduction, validate_args=validate_args, name=name, stacklevel=2
    )
    if reduction == "none" and preds.ndim == 1:
        out = out[0]
    return out if keep_k else out.squeeze(-1)


def position_debiased_dcg(
    preds: Tensor,
    clicks: Tensor,
    k: K = None,
    *,
    propensities: Tensor | None = None,
    logged_positions: Tensor | None = None,
    eta: float | None = None,
    propensity_table: Tensor | None = None,
    affine: tuple[Tensor, Tensor] | None = None,
    clip: float | None = None,
    mask: Tensor | None = None,
    ties: str | None = None,
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """Position-debiased DCG of a new ranking from logged clicks: ``sum_{rank <= k} g / log2(rank + 1)``.

    With ``g = c / rho`` (:func:`ips_gains`) this is an **unbiased** estimate of the DCG@k with
    linear gain ``gamma = P(click | examined)`` of the ranking given by ``preds``, for any ranking,
    session by session: the mean over sessions converges to the truth without aggregating clicks
    (unlike the nDCG). With relative propensities ``rho(p) / rho(1)`` the unit is "clicks if shown
    at rank 1". The conditions (model, propensities, clipping, top-k loggers, variance, trust bias)
    are those of :mod:`torch_rankeval.functional.debiased`.

    Takes the arguments of :func:`position_debiased_ndcg` except ``normalize`` and
    ``empty_target_action``: a list without clicks (or all padding) has DCG 0 and counts in the
    mean.

    Example:
        >>> import torch
        >>> from torch_rankeval.functional import position_debiased_dcg
        >>> preds = torch.tensor([[0.1, 0.4, 0.9, 0.2], [0.3, 0.2, 0.1, 0.0]])
        >>> clicks = torch.tensor([[1, 0, 1, 0], [0, 0, 0, 0]])
        >>> rho = torch.tensor([[1.0, 0.5, 1 / 3, 0.25], [1.0, 0.5, 1 / 3, 0.25]])
        >>> position_debiased_dcg(preds, clicks, propensities=rho, reduction="none")   # 3 * 1 + 1 / log2(5)
        tensor([3.4307, 0.0000])
        >>> position_debiased_dcg(preds, clicks, 2, propensities=rho)                   # mean of 3 and 0
        tensor(1.5000)
    """
    return position_debiased_ndcg(
        preds,
        clicks,
        k,
        propensities=propensities,
        logged_positions=logged_positions,
        eta=eta,
        propensity_table=propensity_table,
        affine=affine,
        clip=clip,
        mask=mask,
        ties=ties,
        reduction=reduction,
        validate_args=validate_args,
        normalize="none",
    )


def aggregate_ips_gains(
    query_ids: Tensor,
    doc_ids: Tensor,
    clicks: Tensor,
    propensities: Tensor | None = None,
    *,
    logged_positions: Tensor | None = None,
    eta: float | None = None,
    propensity_table: Tensor | None = None,
    clip: float | None = None,
    num_sessions: int | Tensor | None = None,
    mask: Tensor | None = None,
    validate_args: bool = True,
) -> tuple[Tensor, Tensor, Tensor]:
    """Sum the debiased gains of a click log per (query, document): ``g_qd = sum_s c / max(rho, clip)``.

    Normalise **after** this step: the debiased nDCG of per-query aggregated gains is consistent,
    the average of per-session nDCGs is not. Each row of the log is one displayed item in one
    session (any shape; all arguments share it; ``mask=False`` drops padding rows). The
    propensity source is one of ``propensities`` / ``logged_positions`` + ``eta`` /
    ``logged_positions`` + ``propensity_table``, as in :func:`ips_gains`.

    The aggregated gains are already debiased: evaluate them with
    ``position_debiased_ndcg(preds, gains, propensities=torch.ones_like(gains))``. Pairs with no
    click have gain 0 (fill the padded ``(Q, D)`` tensor with zeros).

    This is a preprocessing step: it returns data-dependent shapes (``torch.unique``), so it does
    not compile with ``fullgraph=True``.

    Args:
        query_ids, doc_ids: integer ids of each row's query and document.
        clicks: 0/1 clicks (or counts) of each row.
        num_sessions: ``None`` (plain sums), an int (divide every sum by it), or an integer tensor
            of the rows' shape holding the number of sessions of each row's query (divide by
            ``N_q``). Optional for nDCG (scale-invariant); needed for a per-session DCG.
        validate_args: run the value checks of :func:`ips_gains` (and that ``num_sessions`` is
            positive and the same on every row of a query).

    Returns:
        ``(query_ids, doc_ids, gains)`` of the distinct pairs, sorted by query then document.

    Example:
        >>> import torch
        >>> from torch_rankeval.functional import aggregate_ips_gains
        >>> q = torch.tensor([7, 7, 7, 7])                      # two sessions of query 7
        >>> d = torch.tensor([1, 2, 2, 1])
        >>> clicks = torch.tensor([1, 1, 0, 0])
        >>> pos = torch.tensor([1, 2, 1, 2])                    # the logger swapped the two documents
        >>> aggregate_ips_gains(q, d, clicks, logged_positions=pos, eta=1.0, num_sessions=2)
        (tensor([7, 7]), tensor([1, 2]), tensor([0.5000, 1.0000]))
    """
    for t, name in ((query_ids, "query_ids"), (doc_ids, "doc_ids")):
        if not isinstance(t, Tensor) or t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
            raise TypeError(f"{name} must be an integer tensor, got {getattr(t, 'dtype', type(t).__name__)}")
        if isinstance(clicks, Tensor) and t.shape != clicks.shape:
            raise ValueError(f"{name} must have the shape of clicks {tuple(clicks.shape)}, got {tuple(t.shape)}")
        if isinstance(clicks, Tensor) and t.device != clicks.device:
            raise ValueError(f"{name} is on {t.device} but clicks is on {clicks.device}: move all inputs to one device")
    gains = ips_gains(
        clicks,
        propensities,
        logged_positions=logged_positions,
        eta=eta,
        propensity_table=propensity_table,
        clip=clip,
        mask=mask,
        validate_args=validate_args,
    )
    keep = (torch.ones_like(clicks, dtype=torch.bool) if mask is None else mask).reshape(-1)
    q, d, g = query_ids.reshape(-1)[keep], doc_ids.reshape(-1)[keep], gains.reshape(-1)[keep]
    pairs, inverse = torch.unique(torch.stack([q, d], dim=1), dim=0, return_inverse=True)
    total = torch.zeros(pairs.shape[0], dtype=g.dtype, device=g.device).index_add_(0, inverse, g)
    if num_sessions is None:
        return pairs[:, 0], pairs[:, 1], total
    if isinstance(num_sessions, bool) or not isinstance(num_sessions, (int, Tensor)):
        raise TypeError(
            f"num_sessions must be None, a positive int, or an integer tensor per row, got {type(num_sessions).__name__}"
        )
    if isinstance(num_sessions, int):
        if num_sessions <= 0:
            raise ValueError(f"num_sessions must be a positive number of sessions, got {num_sessions}")
        return pairs[:, 0], pairs[:, 1], total / num_sessions
    if num_sessions.shape != clicks.shape:
        raise ValueError(
            f"num_sessions must be an int or have the shape of clicks {tuple(clicks.shape)}, got {tuple(num_sessions.shape)}"
        )
    n = num_sessions.reshape(-1)[keep].to(g.dtype)
    if validate_args:
        queries, per_query = torch.unique(q, return_inverse=True)
        lo = n.new_full(queries.shape, float("inf")).scatter_reduce(0, per_query, n, "amin")
        hi = n.new_full(queries.shape, float("-inf")).scatter_reduce(0, per_query, n, "amax")
        if bool((n <= 0).any()) or bool((lo != hi).any()):
            raise ValueError(
                "num_sessions must be positive and the same on every row of a query (the number of sessions of that query)"
            )
    per_pair = torch.zeros_like(total).scatter_(0, inverse, n)
    return pairs[:, 0], pairs[:, 1], total / per_pair
