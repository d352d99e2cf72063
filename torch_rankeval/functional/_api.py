"""``evaluate``: many measures by name from one ranking, through one plan (:class:`torch_rankeval.measures.MeasurePlan`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor

from torch_rankeval.conventions import Convention, resolve_convention
from torch_rankeval.measures import MeasurePlan, parse_measures
from torch_rankeval.ranking.inputs import check_reduction, parse_k

__all__ = ["evaluate"]


def evaluate(
    preds: Tensor,
    target: Tensor,
    metrics: str | Sequence[str],
    k: int | Sequence[int] | None = None,
    *,
    mask: Tensor | None = None,
    ignore_index: int | None = None,
    ideal_target: Tensor | None = None,
    n_relevant: Tensor | None = None,
    judged: Tensor | None = None,
    exclude: Tensor | None = None,
    weights: Tensor | None = None,
    convention: str | Convention | None = None,
    reduction: str = "mean",
    validate_args: bool = True,
    **conventions: Any,
) -> dict[str, Tensor]:
    """Many measures by name (any spelling of :mod:`torch_rankeval.measures`) from one ranking.

    Args:
        preds, target, mask, ignore_index, ideal_target, n_relevant: as in :func:`ndcg` and
            :func:`average_precision`.
        judged: ``(N, L)`` bool, False for documents without a relevance judgment (never relevant,
            no gain; read by the measures of judged coverage such as ``bpref`` and ``Judged@k``).
        exclude: ``(N, L)`` bool, dense or sparse: items never ranked and never counted (e.g. the
            items a user interacted with in training); an excluded item that is also in the target
            does not count, exactly as ``mask=False``. ``target`` may be a torch sparse tensor
            (see "Recommender evaluation over the full catalogue" in the README).
        weights: float, like ``preds``: per-document weights (TF-Ranking's per-example weights), read by
            ``arp`` (each grade times its document's weight) and ``opa`` (each pair weighs its
            higher-graded document's weight); any other measure refuses them (``TypeError``). Finite
            and ``>= 0``; a document of weight 0 keeps its rank (TF-Ranking drops it from the ranking:
            add ``mask=weights > 0`` for its values).
        metrics: names such as ``"ndcg@10"``, ``"nDCG@10"``, ``"ndcg_cut.10"``, ``"P(rel=2)@5"``, ``"map"``.
        k: cutoffs for names written without one (None: each name's own default).
        convention: a preset name or :class:`~torch_rankeval.conventions.Convention`; the keyword
            arguments ``conventions`` (``gain=``, ``ties=``, ...) override it.
        reduction: ``"mean"`` (each measure's summary over lists: the mean, the sum for counts, the
            geometric mean for ``gm_map``), ``"sum"`` or ``"none"`` (per list).

    Returns:
        ``{name as written: value}``: scalars, or ``(N,)`` per list with ``reduction="none"``.

    Example:
        >>> import torch
        >>> from torch_rankeval import functional as F
        >>> preds, target = torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[0, 2, 1]])
        >>> out = F.evaluate(preds, target, ["nDCG@2", "mrr", "P(rel=2)@2"], convention="trec_eval")
        >>> {name: round(v.item(), 4) for name, v in out.items()}
        {'nDCG@2': 0.4796, 'mrr': 0.5, 'P(rel=2)@2': 0.5}
        >>> weights = torch.tensor([[1.0, 0.5, 3.0]])   # ARP: (2 * 2 * 0.5 + 3 * 1 * 3) / (2 * 0.5 + 1 * 3)
        >>> F.evaluate(preds, target, ["arp"], weights=weights)
        {'arp': tensor(2.7500)}
    """
    check_reduction(reduction)
    conv = resolve_convention(convention, **conventions)
    if isinstance(metrics, str):
        metrics = [metrics]
    ks, _ = parse_k(k)
    plan = MeasurePlan(parse_measures(metrics, cutoffs=ks), conv)
    out = plan.evaluate(
        preds,
        target,
        reduction=reduction,
        validate_args=validate_args,
        mask=mask,
        ignore_index=ignore_index,
        ideal_target=ideal_target,
        n_relevant=n_relevant,
        judged=judged,
        exclude=exclude,
        weights=weights,
    )
    return {label: out[..., j] for j, label in enumerate(plan.labels)}
