"""Ranking losses on the metrics' own conventions: train on what you measure.

Every loss takes the inputs of the metrics (padded ``(preds, target)`` with ``mask=`` /
``ignore_index=``, or flat documents with ``indexes=``), the same convention arguments (``gain``,
``log_base`` / ``discount``, ``k``, ``convention=`` presets), the same empty-list test (a list
without a document of positive gain, whose ideal DCG is 0) and the same reductions. Gains come from
:func:`~torch_rankeval.conventions.gain_fn`, discounts from
:func:`~torch_rankeval.conventions.discount_table`, ideal DCGs from
:func:`torch_rankeval.functional.idcg`: the nDCG a loss optimises is the nDCG the metrics report.

Losses (all minimised; each is a pure function with a thin :class:`torch.nn.Module` wrapper):

==================  ===========================================================  ================
function            per list                                                     under IPS
==================  ===========================================================  ================
:func:`softmax`     ``-sum_i (G_i / sum G) log softmax(s)_i``                    consistent
:func:`listnet`     ``-sum_i w_i softmax(g)_i log softmax(s)_i``                 neither
:func:`listmle`     Plackett-Luce likelihood of the order by gain                weighted terms
:func:`ranknet`     ``sum_{g_i > g_j} w_i log(1 + exp(-sigma (s_i - s_j)))``     unbiased
:func:`lambda_loss` ``-sum_{G_i > G_j} W_ij log2 sigmoid(sigma (s_i - s_j))``    consistent
:func:`approx_ndcg` ``-nDCG@k`` at smooth ranks (Qin et al. 2010)                consistent
:func:`neural_ndcg` ``-nDCG@k`` under a NeuralSort permutation (Pobrotyn 2021)   consistent
==================  ===========================================================  ================

``G = w * gain(target)``: per-item ``weights`` multiply the gains (so inverse-propensity weights
on clicks give the debiased gains of :func:`torch_rankeval.functional.ips_gains`). "Unbiased":
the loss is linear in the gains, so its expectation over clicks equals the loss on the true
relevances. "Consistent": the loss divides by a sum of the same noisy gains (the ideal DCG), a
ratio estimator that converges once clicks are aggregated per query but is biased per impression
(see the debiasing guide).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

import torch
from torch import Tensor, nn
from torch.nn import functional as tnf
from torch.utils.checkpoint import checkpoint

from torch_rankeval.conventions import Convention, _check_choice, discount_table, gain_fn, resolve_convention
from torch_rankeval.functional import idcg
from torch_rankeval.ranking.flat import group_by_query
from torch_rankeval.ranking.inputs import check_preds_target, check_reduction, check_values, valid_mask

__all__ = [
    "softmax",
    "listnet",
    "listmle",
    "ranknet",
    "lambda_loss",
    "lambda_weights",
    "approx_ndcg",
    "neural_ndcg",
    "WEIGHTINGS",
    "SoftmaxLoss",
    "ListNetLoss",
    "ListMLELoss",
    "RankNetLoss",
    "LambdaLoss",
    "ApproxNDCGLoss",
    "NeuralNDCGLoss",
]

WEIGHTINGS = ("ndcg_loss2pp", "lambdarank", "ndcg_loss1", "ndcg_loss2")
EMPTY_ACTIONS = ("skip", "neg", "error")
#: the pairwise and sorting losses build ``(lists, k, L)`` blocks in chunks of lists of at most this
#: many elements, each recomputed in the backward pass (activation checkpointing), so their memory
#: stays bounded whatever the batch
CHUNK_ELEMENTS = 1 << 20

GainArg = str | Mapping[float, float] | Callable[[Tensor], Tensor] | None


# ------------------------------------------------------------------------------------------ inputs
@dataclass
class _Batch:
    preds: Tensor  # (N, L) working dtype, differentiable
    target: Tensor  # (N, L) float grades (0 at padding)
    valid: Tensor  # (N, L) bool
    gains: Tensor  # (N, L) gain(target), 0 at padding (no weights)
    item_w: Tensor  # (N, L) per-item weights (1 without), 0 at padding
    list_w: Tensor | None  # (N,) per-list weights
    conv: Convention
    k: int | None
    single: bool


def _prepare(
    preds: Any,
    target: Any,
    *,
    k: Any = None,
    mask: Any = None,
    ignore_index: Any = None,
    indexes: Any = None,
    weights: Any = None,
    gain: GainArg = None,
    log_base: float | None = None,
    discount: Callable[[Tensor], Tensor] | None = None,
    convention: str | Convention | None = None,
    reduction: str = "mean",
    empty_target_action: str = "skip",
    validate_args: bool = True,
) -> _Batch:
    """Check the arguments, group flat input by query, and compute the gains: one batch of lists."""
    conv = resolve_convention(convention, gain=gain, log_base=log_base, discount=discount)
    check_reduction(reduction)
    _check_choice("empty_target_action", empty_target_action, EMPTY_ACTIONS)
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise TypeError(f"k must be None or one positive int (losses take a single cutoff), got {k!r}")
    if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, float))):
        raise TypeError(f"ignore_index must be an int (or float) grade value marking padding, got {ignore_index!r}")
    if weights is not None and (not isinstance(weights, Tensor) or not weights.is_floating_point()):
        raise TypeError(f"weights must be a floating tensor (per item or per list), got {type(weights).__name__}")
    if indexes is not None:
        if not isinstance(indexes, Tensor):
            raise TypeError(f"indexes must be an integer tensor of query ids, got {type(indexes).__name__}")
        if mask is not None:
            raise ValueError("mask= is for padded (N, L) input: with indexes= every document is real (drop mask)")
        check_preds_target(preds, target)
        if preds.ndim != 1:
            raise ValueError(f"with indexes=, preds must be flat (D,), got shape {tuple(preds.shape)}")
        if weights is not None and weights.shape != preds.shape:
            raise ValueError(
                f"with indexes=, weights must be per document, shape {tuple(preds.shape)}, got {tuple(weights.shape)}"
            )
        flat: tuple[Tensor, ...] = (preds, target) if weights is None else (preds, target, weights)
        _, mask, grouped = group_by_query(indexes, *flat)
        preds, target = grouped[0], grouped[1]
        weights = grouped[2] if weights is not None else None
    check_preds_target(preds, target, mask)
    if validate_args:
        check_values(preds, target, convention=conv, mask=mask, ignore_index=ignore_index, uses_gain=True)
    single = preds.ndim == 1
    if single:
        preds, target = preds.unsqueeze(0), target.unsqueeze(0)
        mask = None if mask is None else mask.unsqueeze(0)
    valid = valid_mask(target, mask, ignore_index)
    valid = torch.ones_like(target, dtype=torch.bool) if valid is None else valid
    dtype = torch.float64 if preds.dtype == torch.float64 else torch.float32
    preds = preds.to(dtype)
    grades = torch.where(valid, target.to(dtype), torch.zeros((), dtype=dtype, device=preds.device))
    gains = torch.where(valid, gain_fn(conv.gain)(grades), torch.zeros((), dtype=dtype, device=preds.device))
    item_w, list_w = _weights(weights, preds, single, validate_args)
    return _Batch(preds, grades, valid, gains, item_w * valid, list_w, conv, k, single)


def _weights(weights: Tensor | None, preds: Tensor, single: bool, validate_args: bool) -> tuple[Tensor, Tensor | None]:
    """Per-item weights ``(N, L)`` (ones without) and per-list weights ``(N,)`` or None."""
    ones = torch.ones_like(preds)
    if weights is None:
        return ones, None
    if weights.device != preds.device:
        raise ValueError(
            f"weights is on {weights.device} but preds is on {preds.device}: move all inputs to one device"
        )
    n, length = preds.shape
    w = weights.to(preds.dtype)
    if validate_args and not bool((torch.isfinite(w) & (w >= 0)).all()):
        raise ValueError("weights must be finite and >= 0 (inverse-propensity weights are 1 / propensity)")
    if w.shape == ((length,) if single else (n, length)):
        return ones * w.reshape(n, length), None
    if w.shape in (((), (1,)) if single else ((n,), (n, 1))):
        return ones, w.reshape(n)
    want = f"({length},) per item or () per list" if single else f"({n}, {length}) per item or ({n},) per list"
    raise ValueError(f"weights must have shape {want}, got {tuple(weights.shape)}")


def _ideal(batch: _Batch, gains: Tensor) -> Tensor:
    """Ideal DCG@k of each list's (weighted) gains, from the metrics' own :func:`idcg`."""
    linear = replace(batch.conv, gain="linear", by_measure=())
    return idcg(
        torch.zeros_like(gains),
        gains.detach(),
        batch.k,
        mask=batch.valid,
        convention=linear,
        reduction="none",
        validate_args=False,
    ).to(gains.dtype)


def _reduce(per_list: Tensor, empty: Tensor, batch: _Batch, reduction: str, action: str) -> Tensor:
    """The empty-list policy, the per-list weights and the reduction."""
    if action == "error" and bool(empty.any()):
        raise ValueError(
            "a list has no document with a positive gain (nothing to rank), and empty_target_action='error'"
        )
    per_list = torch.where(empty, torch.zeros_like(per_list), per_list)
    if batch.list_w is not None:
        per_list = per_list * batch.list_w
    if reduction == "none":
        return per_list[0] if batch.single else per_list
    if reduction == "sum":
        return per_list.sum()
    count = (~empty).sum() if action == "skip" else torch.tensor(empty.numel(), device=empty.device)
    return per_list.sum() / count.clamp_min(1).to(per_list.dtype)


def _check_positive(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def _sort_desc(values: Tensor, valid: Tensor, generator: torch.Generator | None) -> Tensor:
    """The order of each row by decreasing value, padding last; ties in input order, or in a random
    order drawn from ``generator``."""
    key = values.detach().masked_fill(~valid, float("-inf"))
    if generator is None:
        return torch.sort(key, dim=1, descending=True, stable=True).indices
    perm = torch.rand(key.shape, generator=generator, device=generator.device).to(key.device).argsort(dim=1)
    inner = torch.sort(key.gather(1, perm), dim=1, descending=True, stable=True).indices
    return perm.gather(1, inner)


def _discount_at(ranks: Tensor, conv: Convention) -> Tensor:
    """The convention's discount at (possibly fractional) 1-based ranks: its callable, or the log
    discount of :func:`~torch_rankeval.conventions.discount_table`."""
    if conv.discount is not None:
        return conv.discount(ranks)
    return math.log(conv.log_base) / torch.log1p(ranks)


def _chunked(fn: Callable[..., Tensor], tensors: tuple[Tensor, ...], per_list: int) -> Tensor:
    """``fn`` over chunks of lists of at most :data:`CHUNK_ELEMENTS` pair elements, each recomputed
    in the backward pass when gradients flow; returns the concatenated per-list values."""
    n = tensors[0].shape[0]
    size = max(1, CHUNK_ELEMENTS // max(per_list, 1))
    if n <= size:
        return fn(*tensors)
    grads = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    out = []
    for start in range(0, n, size):
        part = tuple(t[start : start + size] for t in tensors)
        out.append(checkpoint(fn, *part, use_reentrant=False) if grads else fn(*part))
    return torch.cat(out)


# ------------------------------------------------------------------------------------------ listwise


def softmax(
    preds: Tensor,
    target: Tensor,
    *,
    mask: Tensor | None = None,
    ignore_index: int | None = None,
    indexes: Tensor | None = None,
    weights: Tensor | None = None,
    gain: GainArg = None,
    convention: str | Convention | None = None,
    empty_target_action: str = "skip",
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """Listwise softmax cross-entropy: ``-sum_i (G_i / sum_j G_j) log softmax(preds)_i``.

    ``G = weights * gain(target)`` (Cao et al. 2007's top-one cross-entropy, TF-Ranking's
    ``SoftmaxLoss``). Normalising by the list's gain sum makes it scale-free: under IPS weights it
    is consistent, not unbiased. Ties: smooth in the scores, nothing to break.

    Args:
        preds: scores, ``(L,)`` or ``(N, L)``; higher ranks first.
        target: grades of the same shape.
        mask: bool, False marks padding (never ranked, never counted).
        ignore_index: a grade value in ``target`` that marks padding.
        indexes: ``(D,)`` query id of each document, for flat ``(D,)`` preds and target (grouped
            with :func:`~torch_rankeval.ranking.flat.group_by_query`; ``reduction="none"`` then
            returns one value per query, in increasing id).
        weights: per item (the shape of ``preds``) or per list (``(N,)``, ``(N, 1)``; ``()`` for
            one list), finite and ``>= 0``; see the module docstring for what each loss does with them.
        gain, convention: the gain (``"exp2"`` default, ``"linear"``, ``{grade: gain}``, callable)
            and a preset or :class:`~torch_rankeval.conventions.Convention`, as in the metrics.
        empty_target_action: a list without a document of positive gain (ideal DCG 0) carries no
            signal: ``"skip"`` (default) leaves it out of the mean (it contributes 0; a mean over no
            list is 0), ``"neg"`` counts it as 0, ``"error"`` raises.
        reduction: ``"mean"`` over lists, ``"sum"``, or ``"none"`` (per list); per-list weights
            multiply each list's value first.
        validate_args: check the values (NaN/inf scores, negative grades, weights); one host sync.

    Example:
        >>> import torch
        >>> from torch_rankeval import losses
        >>> preds, target = torch.tensor([[1.0, 3.0, 2.0]]), torch.tensor([[0, 0, 1]])
        >>> round(losses.softmax(preds, target).item(), 6)   # -log softmax(preds)[2]
        1.407606
    """
    b = _prepare(
        preds,
        target,
        mask=mask,
        ignore_index=ignore_index,
        indexes=indexes,
        weights=weights,
        gain=gain,
        convention=convention,
        reduction=reduction,
        empty_target_action=empty_target_action,
        validate_args=validate_args,
    )
    g = b.gains * b.item_w
    total = g.sum(1)
    log_p = torch.log_softmax(b.preds.masked_fill(~b.valid, float("-inf")), dim=1).masked_fill(~b.valid, 0.0)
    per_list = -(g * log_p).sum(1) / total.clamp_min(torch.finfo(g.dtype).tiny)
    return _reduce(per_list, total <= 0, b, reduction, empty_target_action)


def listnet(
    preds: Tensor,
    target: Tensor,
    *,
    mask: Tensor | None = None,
    ignore_index: int | None = None,
    indexes: Tensor | None = None,
    weights: Tensor | None = None,
    gain: GainArg = None,
    convention: str | Convention | None = None,
    empty_target_action: str = "skip",
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """ListNet (Cao et al. 2007): cross-entropy between the top-one distributions of the gains and
    of the scores, ``-sum_i w_i softmax(gain(target))_i log softmax(preds)_i``.

    allRank's ``listNet`` is ``gain="linear"`` (the softmax of the raw labels). Per-item weights
    multiply each item's term (not the gains, whose softmax is not linear: neither unbiased nor
    consistent under IPS; use :func:`softmax` or :func:`lambda_loss` for clicks). Ties: smooth.

    Args:
        preds: scores, ``(L,)`` or ``(N, L)``.
        target: grades of the same shape.
        mask: bool, False marks padding (never ranked, never counted).
        ignore_index: a grade value in ``target`` that marks padding.
        indexes: ``(D,)`` query id of each document, for flat ``(D,)`` preds and target (grouped
            with :func:`~torch_rankeval.ranking.flat.group_by_query`; ``reduction="none"`` then
            returns one value per query, in increasing id).
        weights: per item (the shape of ``preds``) or per list (``(N,)``, ``(N, 1)``; ``()`` for
            one list), finite and ``>= 0``; see the module docstring for what each loss does with them.
        gain, convention: the gain (``"exp2"`` default, ``"linear"``, ``{grade: gain}``, callable)
            and a preset or :class:`~torch_rankeval.conventions.Convention`, as in the metrics.
        empty_target_action: a list without a document of positive gain (ideal DCG 0) carries no
            signal: ``"skip"`` (default) leaves it out of the mean (it contributes 0; a mean over no
            list is 0), ``"neg"`` counts it as 0, ``"error"`` raises.
        reduction: ``"mean"`` over lists, ``"sum"``, or ``"none"`` (per list); per-list weights
            multiply each list's value first.
        validate_args: check the values (NaN/inf scores, negative grades, weights); one host sync.

    Example:
        >>> import torch
        >>> from torch_rankeval import losses
        >>> round(losses.listnet(torch.tensor([2.0, 1.0]), torch.tensor([1, 0]), gain="linear").item(), 4)
        0.5822
    """
    b = _prepare(
        preds,
        target,
        mask=mask,
        ignore_index=ignore_index,
        indexes=indexes,
        weights=weights,
        gain=gain,
        convention=convention,
        reduction=reduction,
        empty_target_action=empty_target_action,
        validate_args=validate_args,
    )
    p_true = torch.softmax(b.gains.masked_fill(~b.valid, float("-inf")), dim=1)
    log_p = torch.log_softmax(b.preds.masked_fill(~b.valid, float("-inf")), dim=1).masked_fill(~b.valid, 0.0)
    per_list = -(b.item_w * p_true * log_p).sum(1)
    return _reduce(per_list, b.gains.sum(1) <= 0, b, reduction, empty_target_action)


def listmle(
    preds: Tensor,
    target: Tensor,
    *,
    mask: Tensor | None = None,
    ignore_index: int | None = None,
    indexes: Tensor | None = None,
    weights: Tensor | None = None,
    gain: GainArg = None,
    convention: str | Convention | None = None,
    generator: torch.Generator | None = None,
    empty_target_action: str = "skip",
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """ListMLE (Xia et al. 2008): minus the Plackett-Luce log-likelihood of the order by gain,
    ``sum_r w_(r) [logsumexp_{r' >= r} s_(r') - s_(r)]`` over the documents sorted by decreasing gain.

    Ties in ``target``: the likelihood needs one order. Tied documents keep their input order, or a
    random order drawn from ``generator`` (as TF-Ranking and allRank shuffle them; pass a seeded
    generator to make it reproducible). Ties in ``preds``: smooth. Per-item weights multiply the
    term of each document (TF-Ranking's ``ListMLELambdaWeight`` is ``weights=`` by rank).

    Args:
        preds: scores, ``(L,)`` or ``(N, L)``.
        target: grades of the same shape.
        generator: breaks ties among equal grades at random (default: input order).
        mask: bool, False marks padding (never ranked, never counted).
        ignore_index: a grade value in ``target`` that marks padding.
        indexes: ``(D,)`` query id of each document, for flat ``(D,)`` preds and target (grouped
            with :func:`~torch_rankeval.ranking.flat.group_by_query`; ``reduction="none"`` then
            returns one value per query, in increasing id).
        weights: per item (the shape of ``preds``) or per list (``(N,)``, ``(N, 1)``; ``()`` for
            one list), finite and ``>= 0``; see the module docstring for what each loss does with them.
        gain, convention: the gain (``"exp2"`` default, ``"linear"``, ``{grade: gain}``, callable)
            and a preset or :class:`~torch_rankeval.conventions.Convention`, as in the metrics.
        empty_target_action: a list without a document of positive gain (ideal DCG 0) carries no
            signal: ``"skip"`` (default) leaves it out of the mean (it contributes 0; a mean over no
            list is 0), ``"neg"`` counts it as 0, ``"error"`` raises.
        reduction: ``"mean"`` over lists, ``"sum"``, or ``"none"`` (per list); per-list weights
            multiply each list's value first.
        validate_args: check the values (NaN/inf scores, negative grades, weights); one host sync.

    Example:
        >>> import math, torch
        >>> from torch_rankeval import losses
        >>> preds = torch.tensor([0.0, math.log(3), math.log(2)])
        >>> round(losses.listmle(preds, torch.tensor([0, 2, 1])).item(), 6)   # -(log 3/6 + log 2/3 + log 1)
        1.098612
    """
    b = _prepare(
        preds,
        target,
        mask=mask,
        ignore_index=ignore_index,
        indexes=indexes,
        weights=weights,
        gain=gain,
        convention=convention,
        reduction=reduction,
        empty_target_action=empty_target_action,
        validate_args=validate_args,
    )
    order = _sort_desc(b.gains, b.valid, generator)
    s = b.preds.gather(1, order)
    valid = b.valid.gather(1, order)
    w = b.item_w.gather(1, order)
    s_masked = s.masked_fill(~valid, float("-inf"))
    tail = torch.logcumsumexp(s_masked.flip(1), dim=1).flip(1)  # logsumexp over ranks r' >= r
    terms = torch.where(valid, tail - s, torch.zeros_like(s))
    per_list = (w * terms).sum(1)
    return _reduce(per_list, b.gains.sum(1) <= 0, b, reduction, empty_target_action)


# ------------------------------------------------------------------------------------------ pairwise
def _pair_losses(
    s: Tensor,
    g: Tensor,
    w: Tensor,
    valid: Tensor,
    disc: Tensor,
    ideal: Tensor,
    *,
    k: int,
    sigma: float,
    scheme: str,
    mu: float,
) -> Tensor:
    """Per-list pairwise loss of lists sorted by decreasing score (``disc``: the full discount of
    ranks ``1..L+1``). Rows: the first ``k`` ranks; columns: all ranks; each unordered pair with a
    member in the top ``k`` once, both orientations."""
    length = s.shape[1]
    top = slice(0, k)
    rows = torch.arange(k, device=s.device)[:, None]
    cols = torch.arange(length, device=s.device)[None, :]
    once = (cols >= k) | (cols > rows)  # (k, L): each unordered pair with a member in the top k once
    pair_ok = once & valid[:, top, None] & valid[:, None, :]
    diff = s[:, top, None] - s[:, None, :]  # s_a - s_b
    ga, gb = g[:, top, None], g[:, None, :]
    if scheme == "ranknet":  # per-item weight of the more relevant document, natural log
        wa, wb = w[:, top, None], w[:, None, :]
        forward = torch.where(ga > gb, wa, torch.zeros_like(wa))
        backward = torch.where(gb > ga, wb, torch.zeros_like(wb))
        loss = forward * tnf.softplus(-sigma * diff) + backward * tnf.softplus(sigma * diff)
        return (loss * pair_ok).sum((1, 2))
    with torch.no_grad():
        norm = (1.0 / ideal.clamp_min(torch.finfo(g.dtype).tiny))[:, None, None]
        ranks = torch.arange(length, device=s.device)
        cut = torch.where(ranks < k, disc[:length], torch.zeros_like(disc[:length]))
        da, db = cut[top][None, :, None], cut[None, None, :]
        gap = (ga - gb).abs() * norm
        if scheme == "ndcg_loss1":  # allRank's ndcgLoss1_scheme: G_i D_i for every pair (i, j)
            forward, backward = (ga * da * norm).expand_as(diff), (gb * db * norm).expand_as(diff)
        else:
            if scheme == "lambdarank":
                weight = gap * (da - db).abs()
            else:
                m = (rows - cols).abs().clamp_min(1)
                delta = (disc[m - 1] - disc[m]).abs()[None]
                weight = gap * delta if scheme == "ndcg_loss2" else mu * gap * delta + gap * (da - db).abs()
            forward = torch.where(ga > gb, weight, torch.zeros_like(weight))
            backward = torch.where(gb > ga, weight, torch.zeros_like(weight))
    loss = forward * tnf.softplus(-sigma * diff) + backward * tnf.softplus(sigma * diff)
    per_list = (loss * pair_ok).sum((1, 2)) / math.log(2.0)
    if scheme == "ndcg_loss1":  # the diagonal pairs (i, i): W_ii log2(2), a constant (allRank, pytorchltr)
        per_list = per_list + (g[:, top] * cut[top] * valid[:, top]).sum(1) * norm[:, 0, 0]
    return per_list


def _pairwise(
    b: _Batch, g: Tensor, scheme: str, sigma: float, generator: torch.Generator | None, mu: float = 0.0
) -> Tensor:
    """Sort each list by score, then the chunked pair losses of :func:`_pair_losses`."""
    order = _sort_desc(b.preds, b.valid, generator)
    s, gs, ws, valid = (t.gather(1, order) for t in (b.preds, g, b.item_w, b.valid))
    length = s.shape[1]
    k = length if b.k is None else min(b.k, length)
    disc = discount_table(length + 1, b.conv, dtype=s.dtype, device=s.device)
    ideal = _ideal(b, g) if scheme != "ranknet" else torch.ones(s.shape[0], dtype=s.dtype, device=s.device)

    def fn(s: Tensor, gs: Tensor, ws: Tensor, valid: Tensor, ideal: Tensor) -> Tensor:
        return _pair_losses(s, gs, ws, valid, disc, ideal, k=k, sigma=sigma, scheme=scheme, mu=mu)

    return _chunked(fn, (s, gs, ws, valid, ideal), k * length)


def ranknet(
    preds: Tensor,
    target: Tensor,
    k: int | None = None,
    *,
    sigma: float = 1.0,
    mask: Tensor | None = None,
    ignore_index: int | None = None,
    indexes: Tensor | None = None,
    weights: Tensor | None = None,
    gain: GainArg = None,
    convention: str | Convention | None = None,
    empty_target_action: str = "skip",
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """RankNet (Burges et al. 2005): the pairwise logistic loss ``log(1 + exp(-sigma (s_i - s_j)))``
    summed over the pairs with ``gain_i > gain_j`` (each weighted by the per-item weight of the
    more relevant document, as TF-Ranking does), per list.

    A sum over pairs, linear in the weights: unbiased under IPS weights on clicked documents.
    TF-Ranking's ``PairwiseLogisticLoss`` divides each list by its pair-weight sum (its
    ``compute_per_list``), allRank's ``rankNet`` averages over the batch's pairs. With ``k``, only
    pairs with a member in the top ``k`` by score (ties in input order) count. Ties in ``preds``:
    a tied pair costs ``log 2`` with gradient ``sigma / 2``, no tie-break needed.
    Memory: ``O(lists x k x L)``, computed in chunks (see :data:`CHUNK_ELEMENTS`).

    Args:
        preds: scores, ``(L,)`` or ``(N, L)``.
        target: grades of the same shape.
        k: only pairs with a member in the top ``k`` by score (default: all pairs).
        sigma: score scale.
        mask: bool, False marks padding (never ranked, never counted).
        ignore_index: a grade value in ``target`` that marks padding.
        indexes: ``(D,)`` query id of each document, for flat ``(D,)`` preds and target (grouped
            with :func:`~torch_rankeval.ranking.flat.group_by_query`; ``reduction="none"`` then
            returns one value per query, in increasing id).
        weights: per item (the shape of ``preds``) or per list (``(N,)``, ``(N, 1)``; ``()`` for
            one list), finite and ``>= 0``; see the module docstring for what each loss does with them.
        gain, convention: the gain (``"exp2"`` default, ``"linear"``, ``{grade: gain}``, callable)
            and a preset or :class:`~torch_rankeval.conventions.Convention`, as in the metrics.
        empty_target_action: a list without a document of positive gain (ideal DCG 0) carries no
            signal: ``"skip"`` (default) leaves it out of the mean (it contributes 0; a mean over no
            list is 0), ``"neg"`` counts it as 0, ``"error"`` raises.
        reduction: ``"mean"`` over lists, ``"sum"``, or ``"none"`` (per list); per-list weights
            multiply each list's value first.
        validate_args: check the values (NaN/inf scores, negative grades, weights); one host sync.

    Example:
        >>> import torch
        >>> from torch_rankeval import losses
        >>> round(losses.ranknet(torch.tensor([1.0, 3.0, 2.0]), torch.tensor([0, 0, 1])).item(), 6)
        1.626523
    """
    _check_positive(sigma, "sigma")
    b = _prepare(
        preds,
        target,
        k=k,
        mask=mask,
        ignore_index=ignore_index,
        indexes=indexes,
        weights=weights,
        gain=gain,
        convention=convention,
        reduction=reduction,
        empty_target_action=empty_target_action,
        validate_args=validate_args,
    )
    per_list = _pairwise(b, b.gains, "ranknet", sigma, None)
    return _reduce(per_list, b.gains.sum(1) <= 0, b, reduction, empty_target_action)


def lambda_weights(
    preds: Tensor,
    target: Tensor,
    k: int | None = None,
    *,
    mask: Tensor | None = None,
    ignore_index: int | None = None,
    weights: Tensor | None = None,
    gain: GainArg = None,
    log_base: float | None = None,
    discount: Callable[[Tensor], Tensor] | None = None,
    convention: str | Convention | None = None,
    generator: torch.Generator | None = None,
    validate_args: bool = True,
) -> Tensor:
    """``|change of nDCG@k|`` when documents ``i`` and ``j`` swap places in the ranking by ``preds``.

    ``W[n, i, j] = |G_i - G_j| |d_k(r_i) - d_k(r_j)| / IDCG@k``, indexed by the documents' input
    positions, with the metric's gain ``G = weights * gain(target)``, its discount ``d_k`` (0 beyond
    ``k``) and its ideal DCG: on untied scores exactly ``|nDCG@k(swapped scores) - nDCG@k|`` of
    :func:`torch_rankeval.functional.ndcg`. Zero on the diagonal, at padding and
    for lists without a positive gain. No gradient (it is a weight).

    Ties in ``preds``: the swap exchanges ranks; tied documents are ranked in input order (the
    metric's ``ties="first"``), or in a random order drawn from ``generator``. Memory: ``(N, L, L)``.

    Args:
        preds: scores, ``(L,)`` or ``(N, L)``.
        target: grades of the same shape.
        k: the cutoff of nDCG@k (default: the whole list).
        mask, ignore_index, weights (per item), gain, log_base, discount, convention: as in the metrics.
        generator: breaks ties in ``preds`` at random.
        validate_args: check the values.

    Returns:
        ``(N, L, L)`` (``(L, L)`` for one list), the dtype of the working precision.

    Example:
        >>> import torch
        >>> from torch_rankeval import losses
        >>> w = losses.lambda_weights(torch.tensor([3.0, 2.0, 1.0]), torch.tensor([0, 1, 0]), gain="linear")
        >>> round(w[0, 1].item(), 4)    # swap ranks 1 and 2: nDCG goes from 0.6309 to 1
        0.3691
    """
    b = _prepare(
        preds,
        target,
        k=k,
        mask=mask,
        ignore_index=ignore_index,
        weights=weights,
        gain=gain,
        log_base=log_base,
        discount=discount,
        convention=convention,
        validate_args=validate_args,
    )
    if b.list_w is not None:
        raise ValueError("lambda_weights takes per-item weights only (the shape of preds)")
    with torch.no_grad():
        g = b.gains * b.item_w
        length = g.shape[1]
        order = _sort_desc(b.preds, b.valid, generator)
        ranks = torch.empty_like(order).scatter_(1, order, torch.arange(length, device=order.device).expand_as(order))
        disc = discount_table(length, b.conv, dtype=g.dtype, device=g.device)
        cut = length if k is None else min(k, length)
        d = torch.where((ranks < cut) & b.valid, disc[ranks], torch.zeros_like(g))
        ideal = _ideal(b, g)
        out = (g[:, :, None] - g[:, None, :]).abs() * (d[:, :, None] - d[:, None, :]).abs()
        out = out / ideal.clamp_min(torch.finfo(g.dtype).tiny)[:, None, None]
        keep = (ideal > 0)[:, None, None] & b.valid[:, :, None] & b.valid[:, None, :]
        out = torch.where(keep, out, torch.zeros_like(out))
    return out[0] if b.single else out


def lambda_loss(
    preds: Tensor,
    target: Tensor,
    k: int | None = None,
    *,
    weighting: str = "ndcg_loss2pp",
    mu: float = 10.0,
    sigma: float = 1.0,
    mask: Tensor | None = None,
    ignore_index: int | None = None,
    indexes: Tensor | None = None,
    weights: Tensor | None = None,
    gain: GainArg = None,
    log_base: float | None = None,
    discount: Callable[[Tensor], Tensor] | None = None,
    convention: str | Convention | None = None,
    generator: torch.Generator | None = None,
    empty_target_action: str = "skip",
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """The LambdaLoss family (Wang et al. 2018): ``-sum_{G_i > G_j} W_ij log2 sigmoid(sigma (s_i - s_j))``.

    ``G = weights * gain(target)``, ``r`` the ranks by ``preds``, ``d`` the convention's discount,
    ``IDCG@k`` the metric's ideal DCG; the pair weights ``W_ij`` (constants: no gradient) are

    * ``"lambdarank"``: ``|G_i - G_j| |d_k(r_i) - d_k(r_j)| / IDCG@k`` = :func:`lambda_weights`,
      the exact ``|change of nDCG@k|`` of the swap (Burges 2010's LambdaRank);
    * ``"ndcg_loss2"``: ``|G_i - G_j| |d(|r_i - r_j|) - d(|r_i - r_j| + 1)| / IDCG@k``;
    * ``"ndcg_loss2pp"`` (default): ``mu * ndcg_loss2 + lambdarank`` (NDCG-Loss2++);
    * ``"ndcg_loss1"``: ``G_i d_k(r_i) / IDCG@k`` on every pair ``(i, j)``, ``(i, i)`` included (a
      constant ``nDCG@k`` of the current ranking, no gradient; as allRank and pytorchltr count it).
      Its weights follow the current top ``k``: with ``k``, a ranking without a relevant document in
      the top ``k`` costs 0 (prefer ``"ndcg_loss2pp"`` with a cutoff).

    These are allRank's ``lambdaLoss`` schemes (log base 2, ``reduction="sum"`` is its sum), with
    one difference: allRank's ``k`` keeps pairs with *both* members in the top ``k``, ours pairs
    with *a* member in the top ``k`` (every pair whose swap changes nDCG@k). pytorchltr's
    ``LambdaNDCGLoss1`` is ``"ndcg_loss1"``; its ``LambdaNDCGLoss2`` takes ``delta`` one rank further
    down (``d(m + 1) - d(m + 2)``) than the paper and allRank.

    Under IPS weights the loss is consistent, not unbiased (it divides by the ideal DCG of the
    debiased gains). Ties in ``preds``: ranks of tied documents follow input order, or a random order
    drawn from ``generator``; a tied pair costs ``W log2(2)``. Memory: ``O(lists x k x L)`` (the pairs
    with a member in the top ``k``), computed in chunks that are recomputed in the backward pass.

    Args:
        preds: scores, ``(L,)`` or ``(N, L)``.
        target: grades of the same shape.
        k: the cutoff of nDCG@k (default: the whole list).
        weighting: one of :data:`WEIGHTINGS`.
        mu: NDCG-Loss2++'s weight of the NDCG-Loss2 term.
        sigma: score scale.
        log_base, discount: the discount, as in the metrics.
        generator: breaks ties in ``preds`` at random (default: input order).
        mask: bool, False marks padding (never ranked, never counted).
        ignore_index: a grade value in ``target`` that marks padding.
        indexes: ``(D,)`` query id of each document, for flat ``(D,)`` preds and target (grouped
            with :func:`~torch_rankeval.ranking.flat.group_by_query`; ``reduction="none"`` then
            returns one value per query, in increasing id).
        weights: per item (the shape of ``preds``) or per list (``(N,)``, ``(N, 1)``; ``()`` for
            one list), finite and ``>= 0``; see the module docstring for what each loss does with them.
        gain, convention: the gain (``"exp2"`` default, ``"linear"``, ``{grade: gain}``, callable)
            and a preset or :class:`~torch_rankeval.conventions.Convention`, as in the metrics.
        empty_target_action: a list without a document of positive gain (ideal DCG 0) carries no
            signal: ``"skip"`` (default) leaves it out of the mean (it contributes 0; a mean over no
            list is 0), ``"neg"`` counts it as 0, ``"error"`` raises.
        reduction: ``"mean"`` over lists, ``"sum"``, or ``"none"`` (per list); per-list weights
            multiply each list's value first.
        validate_args: check the values (NaN/inf scores, negative grades, weights); one host sync.

    Example:
        >>> import torch
        >>> from torch_rankeval import losses
        >>> preds, target = torch.tensor([[0.3, 0.9, 0.1]]), torch.tensor([[2, 0, 1]])
        >>> good = losses.lambda_loss(torch.tensor([[0.9, 0.1, 0.3]]), target, weighting="lambdarank")
        >>> bool(good < losses.lambda_loss(preds, target, weighting="lambdarank"))
        True
    """
    _check_choice("weighting", weighting, WEIGHTINGS)
    _check_positive(sigma, "sigma")
    if weighting == "ndcg_loss2pp":
        _check_positive(mu, "mu")
    b = _prepare(
        preds,
        target,
        k=k,
        mask=mask,
        ignore_index=ignore_index,
        indexes=indexes,
        weights=weights,
        gain=gain,
        log_base=log_base,
        discount=discount,
        convention=convention,
        reduction=reduction,
        empty_target_action=empty_target_action,
        validate_args=validate_args,
    )
    g = b.gains * b.item_w
    per_list = _pairwise(b, g, weighting, sigma, generator, float(mu))
    return _reduce(per_list, g.sum(1) <= 0, b, reduction, empty_target_action)


# ------------------------------------------------------------------------------------------ smooth nDCG
def approx_ndcg(
    preds: Tensor,
    target: Tensor,
    k: int | None = None,
    *,
    temperature: float = 1.0,
    mask: Tensor | None = None,
    ignore_index: int | None = None,
    indexes: Tensor | None = None,
    weights: Tensor | None = None,
    gain: GainArg = None,
    log_base: float | None = None,
    discount: Callable[[Tensor], Tensor] | None = None,
    convention: str | Convention | None = None,
    empty_target_action: str = "skip",
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """ApproxNDCG (Qin et al. 2010): minus nDCG@k at the smooth ranks
    ``pi_i = 1 + sum_{j != i} sigmoid((s_j - s_i) / temperature)``.

    ``-sum_i G_i d(pi_i) c_k(pi_i) / IDCG@k`` with the metric's gain ``G = weights * gain(target)``,
    discount ``d`` (the convention's, at fractional ranks), ideal DCG, and a smooth cutoff
    ``c_k(pi) = sigmoid((k + 1/2 - pi) / temperature)`` (1 without ``k``). As ``temperature -> 0`` it
    tends to ``-F.ndcg`` of the same convention on untied lists. TF-Ranking's ``ApproxNDCGLoss``
    (``temperature=1`` there too) is ``k=None``. Ties in ``preds``: tied documents share a smooth
    rank (half a place each way), close to the metric's averaged ties. Memory: ``O(lists x L^2)``,
    in chunks recomputed in the backward pass.

    Args:
        preds: scores, ``(L,)`` or ``(N, L)``.
        target: grades of the same shape.
        k: the cutoff (default: the whole list).
        temperature: smoothness of the ranks (> 0).
        log_base, discount: the discount, as in the metrics.
        mask: bool, False marks padding (never ranked, never counted).
        ignore_index: a grade value in ``target`` that marks padding.
        indexes: ``(D,)`` query id of each document, for flat ``(D,)`` preds and target (grouped
            with :func:`~torch_rankeval.ranking.flat.group_by_query`; ``reduction="none"`` then
            returns one value per query, in increasing id).
        weights: per item (the shape of ``preds``) or per list (``(N,)``, ``(N, 1)``; ``()`` for
            one list), finite and ``>= 0``; see the module docstring for what each loss does with them.
        gain, convention: the gain (``"exp2"`` default, ``"linear"``, ``{grade: gain}``, callable)
            and a preset or :class:`~torch_rankeval.conventions.Convention`, as in the metrics.
        empty_target_action: a list without a document of positive gain (ideal DCG 0) carries no
            signal: ``"skip"`` (default) leaves it out of the mean (it contributes 0; a mean over no
            list is 0), ``"neg"`` counts it as 0, ``"error"`` raises.
        reduction: ``"mean"`` over lists, ``"sum"``, or ``"none"`` (per list); per-list weights
            multiply each list's value first.
        validate_args: check the values (NaN/inf scores, negative grades, weights); one host sync.

    Example:
        >>> import torch
        >>> from torch_rankeval import losses, functional as F
        >>> preds, target = torch.tensor([0.2, 0.9, 0.5]), torch.tensor([1, 0, 2])
        >>> round(losses.approx_ndcg(preds, target, temperature=1e-3).item(), 4), round(-F.ndcg(preds, target).item(), 4)
        (-0.659, -0.659)
    """
    _check_positive(temperature, "temperature")
    b = _prepare(
        preds,
        target,
        k=k,
        mask=mask,
        ignore_index=ignore_index,
        indexes=indexes,
        weights=weights,
        gain=gain,
        log_base=log_base,
        discount=discount,
        convention=convention,
        reduction=reduction,
        empty_target_action=empty_target_action,
        validate_args=validate_args,
    )
    g = b.gains * b.item_w
    ideal = _ideal(b, g)
    conv, k_cut, t = b.conv, b.k, float(temperature)

    def fn(s: Tensor, g: Tensor, valid: Tensor) -> Tensor:
        pairs = torch.sigmoid((s[:, None, :] - s[:, :, None]) / t)  # [n, i, j] = sigmoid((s_j - s_i) / t)
        pairs = pairs * (valid[:, None, :] & valid[:, :, None])
        ranks = 1.0 + pairs.sum(2) - 0.5 * valid  # the j = i term is sigmoid(0) = 1/2
        gains = g * _discount_at(ranks, conv)
        if k_cut is not None:
            gains = gains * torch.sigmoid((k_cut + 0.5 - ranks) / t)
        return (gains * valid).sum(1)

    dcg = _chunked(fn, (b.preds, g, b.valid), b.preds.shape[1] ** 2)
    per_list = -dcg / ideal.clamp_min(torch.finfo(g.dtype).tiny)
    return _reduce(per_list, ideal <= 0, b, reduction, empty_target_action)


def _neural_sort(s: Tensor, valid: Tensor, temperature: float, iters: int) -> Tensor:
    """NeuralSort's relaxed permutation ``P[n, r, i]`` (Grover et al. 2019) of each list's valid
    documents (rows beyond the list and columns at padding are 0), then ``iters`` Sinkhorn steps."""
    n_valid = valid.sum(1, keepdim=True).to(s.dtype)  # (N, 1)
    s0 = s.masked_fill(~valid, 0.0)
    a1 = ((s0[:, :, None] - s0[:, None, :]).abs() * valid[:, None, :]).sum(2)  # (N, L): sum_j |s_i - s_j|
    r = torch.arange(1, s.shape[1] + 1, device=s.device, dtype=s.dtype)
    scaling = (n_valid + 1 - 2 * r)[:, :, None]  # (N, L, 1)
    logits = (scaling * s0[:, None, :] - a1[:, None, :]) / temperature
    logits = logits.masked_fill(~valid[:, None, :], float("-inf"))
    rows = (r[None, :] <= n_valid)[:, :, None]  # (N, L, 1)
    p = torch.softmax(logits, dim=2).nan_to_num(0.0) * rows
    for _ in range(iters):  # padding's columns and the rows beyond the list sum to 0: left as they are
        col = p.sum(1, keepdim=True)
        p = p / torch.where(col > 0, col, torch.ones_like(col))
        row = p.sum(2, keepdim=True)
        p = p / torch.where(row > 0, row, torch.ones_like(row))
    return p


def neural_ndcg(
    preds: Tensor,
    target: Tensor,
    k: int | None = None,
    *,
    temperature: float = 1.0,
    sinkhorn_iters: int = 50,
    mask: Tensor | None = None,
    ignore_index: int | None = None,
    indexes: Tensor | None = None,
    weights: Tensor | None = None,
    gain: GainArg = None,
    log_base: float | None = None,
    discount: Callable[[Tensor], Tensor] | None = None,
    convention: str | Convention | None = None,
    empty_target_action: str = "skip",
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """NeuralNDCG (Pobrotyn & Bialobrzeski 2021): minus nDCG@k of the gains sorted by NeuralSort's
    relaxed permutation ``P`` (Grover et al. 2019): ``-sum_{r <= k} d(r) (P G)_r / IDCG@k``.

    ``P[r, i] = softmax_i(((n + 1 - 2r) s_i - sum_j |s_i - s_j|) / temperature)`` over each list's
    ``n`` real documents, made doubly stochastic by ``sinkhorn_iters`` Sinkhorn steps (allRank's
    ``neuralNDCG`` runs up to 50; ``sinkhorn_iters=0`` is TF-Ranking's ``NeuralSortNDCGLoss``). The
    gain, discount and ideal DCG are the metric's. As ``temperature -> 0``, ``P`` tends to the
    sorting permutation and the loss to ``-F.ndcg`` on untied lists. Ties in ``preds``: tied documents
    share their rows of ``P`` equally (the metric's averaged ties, in the limit). Memory:
    ``O(lists x L^2)``, in chunks recomputed in the backward pass.

    Args:
        preds: scores, ``(L,)`` or ``(N, L)``.
        target: grades of the same shape.
        k: the cutoff (default: the whole list).
        temperature: NeuralSort's temperature (> 0).
        sinkhorn_iters: Sinkhorn normalisation steps (0: NeuralSort's row-stochastic ``P``).
        log_base, discount: the discount, as in the metrics.
        mask: bool, False marks padding (never ranked, never counted).
        ignore_index: a grade value in ``target`` that marks padding.
        indexes: ``(D,)`` query id of each document, for flat ``(D,)`` preds and target (grouped
            with :func:`~torch_rankeval.ranking.flat.group_by_query`; ``reduction="none"`` then
            returns one value per query, in increasing id).
        weights: per item (the shape of ``preds``) or per list (``(N,)``, ``(N, 1)``; ``()`` for
            one list), finite and ``>= 0``; see the module docstring for what each loss does with them.
        gain, convention: the gain (``"exp2"`` default, ``"linear"``, ``{grade: gain}``, callable)
            and a preset or :class:`~torch_rankeval.conventions.Convention`, as in the metrics.
        empty_target_action: a list without a document of positive gain (ideal DCG 0) carries no
            signal: ``"skip"`` (default) leaves it out of the mean (it contributes 0; a mean over no
            list is 0), ``"neg"`` counts it as 0, ``"error"`` raises.
        reduction: ``"mean"`` over lists, ``"sum"``, or ``"none"`` (per list); per-list weights
            multiply each list's value first.
        validate_args: check the values (NaN/inf scores, negative grades, weights); one host sync.

    Example:
        >>> import torch
        >>> from torch_rankeval import losses, functional as F
        >>> preds, target = torch.tensor([0.2, 0.9, 0.5]), torch.tensor([1, 0, 2])
        >>> round(losses.neural_ndcg(preds, target, temperature=1e-3).item(), 4), round(-F.ndcg(preds, target).item(), 4)
        (-0.659, -0.659)
    """
    _check_positive(temperature, "temperature")
    if isinstance(sinkhorn_iters, bool) or not isinstance(sinkhorn_iters, int) or sinkhorn_iters < 0:
        raise ValueError(f"sinkhorn_iters must be an int >= 0, got {sinkhorn_iters!r}")
    b = _prepare(
        preds,
        target,
        k=k,
        mask=mask,
        ignore_index=ignore_index,
        indexes=indexes,
        weights=weights,
        gain=gain,
        log_base=log_base,
        discount=discount,
        convention=convention,
        reduction=reduction,
        empty_target_action=empty_target_action,
        validate_args=validate_args,
    )
    g = b.gains * b.item_w
    ideal = _ideal(b, g)
    length = g.shape[1]
    disc = discount_table(length, b.conv, dtype=g.dtype, device=g.device)
    if b.k is not None:
        disc = torch.where(torch.arange(length, device=g.device) < b.k, disc, torch.zeros_like(disc))
    t, iters = float(temperature), sinkhorn_iters

    def fn(s: Tensor, g: Tensor, valid: Tensor) -> Tensor:
        p = _neural_sort(s, valid, t, iters)
        return ((p @ g.unsqueeze(2)).squeeze(2) * disc).sum(1)

    dcg = _chunked(fn, (b.preds, g, b.valid), length * length)
    per_list = -dcg / ideal.clamp_min(torch.finfo(g.dtype).tiny)
    return _reduce(per_list, ideal <= 0, b, reduction, empty_target_action)


# ------------------------------------------------------------------------------------------ modules
class _RankingLoss(nn.Module):
    """A loss function with its keyword arguments fixed; ``forward(preds, target, **more)``."""

    _fn: Callable[..., Tensor]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self.kwargs = kwargs

    def forward(self, preds: Tensor, target: Tensor, **kwargs: Any) -> Tensor:
        return type(self)._fn(preds, target, **{**self.kwargs, **kwargs})

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())


class SoftmaxLoss(_RankingLoss):
    """:func:`softmax` as a module: the keyword arguments are fixed at construction, ``forward``
    takes ``(preds, target)`` and per-batch keywords (``mask=``, ``weights=``, ...).

    Example:
        >>> import torch
        >>> from torch_rankeval.losses import SoftmaxLoss
        >>> round(SoftmaxLoss(gain="linear")(torch.tensor([1.0, 3.0, 2.0]), torch.tensor([0, 0, 1])).item(), 6)
        1.407606
    """

    _fn = staticmethod(softmax)


class ListNetLoss(_RankingLoss):
    """:func:`listnet` as a module (keywords fixed at construction).

    Example:
        >>> import torch
        >>> from torch_rankeval.losses import ListNetLoss
        >>> round(ListNetLoss(gain="linear")(torch.tensor([2.0, 1.0]), torch.tensor([1, 0])).item(), 4)
        0.5822
    """

    _fn = staticmethod(listnet)


class ListMLELoss(_RankingLoss):
    """:func:`listmle` as a module (keywords fixed at construction).

    Example:
        >>> import torch
        >>> from torch_rankeval.losses import ListMLELoss
        >>> round(ListMLELoss()(torch.tensor([0.0, 0.0]), torch.tensor([1, 0])).item(), 4)   # log 2
        0.6931
    """

    _fn = staticmethod(listmle)


class RankNetLoss(_RankingLoss):
    """:func:`ranknet` as a module (keywords fixed at construction).

    Example:
        >>> import torch
        >>> from torch_rankeval.losses import RankNetLoss
        >>> round(RankNetLoss(sigma=1.0)(torch.tensor([0.0, 0.0]), torch.tensor([1, 0])).item(), 4)   # log 2
        0.6931
    """

    _fn = staticmethod(ranknet)


class LambdaLoss(_RankingLoss):
    """:func:`lambda_loss` as a module (keywords fixed at construction, e.g. ``k=10, weighting=...``).

    Example:
        >>> import torch
        >>> from torch_rankeval.losses import LambdaLoss
        >>> loss = LambdaLoss(k=10, weighting="lambdarank")
        >>> round(loss(torch.tensor([0.0, 0.0]), torch.tensor([1, 0])).item(), 4)   # |dnDCG| log2(2) = 1 - 1/log2(3)
        0.3691
    """

    _fn = staticmethod(lambda_loss)


class ApproxNDCGLoss(_RankingLoss):
    """:func:`approx_ndcg` as a module (keywords fixed at construction).

    Example:
        >>> import torch
        >>> from torch_rankeval.losses import ApproxNDCGLoss
        >>> round(ApproxNDCGLoss(temperature=0.01)(torch.tensor([2.0, 1.0]), torch.tensor([1, 0])).item(), 4)
        -1.0
    """

    _fn = staticmethod(approx_ndcg)


class NeuralNDCGLoss(_RankingLoss):
    """:func:`neural_ndcg` as a module (keywords fixed at construction).

    Example:
        >>> import torch
        >>> from torch_rankeval.losses import NeuralNDCGLoss
        >>> round(NeuralNDCGLoss(temperature=0.01)(torch.tensor([2.0, 1.0]), torch.tensor([1, 0])).item(), 4)
        -1.0
    """

    _fn = staticmethod(neural_ndcg)
