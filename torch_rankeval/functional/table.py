"""The table of metric kernels: one entry per metric, shared by the Metric classes and the
measure-name parser, so that "which metrics exist" is written down once.

Example:
    >>> from torch_rankeval.functional.table import KERNELS, kernel
    >>> sorted(KERNELS)
    ['dcg', 'hit_rate', 'idcg', 'map', 'mrr', 'ndcg', 'precision', 'r_precision', 'recall']
    >>> kernel("AP").name, kernel("success").name
    ('map', 'hit_rate')
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable

from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.functional._ranking import RankedBatch
from torch_rankeval.functional.average_precision import average_precision_values
from torch_rankeval.functional.dcg import dcg_values, idcg_values, ndcg_values
from torch_rankeval.functional.precision_recall import hit_rate_values, precision_values, r_precision_values, recall_values
from torch_rankeval.functional.reciprocal_rank import reciprocal_rank_values

__all__ = ["MetricKernel", "KERNELS", "ALIASES", "kernel"]

Values = Callable[[RankedBatch, tuple, Convention], "tuple[Tensor, Tensor | None]"]


@dataclass(frozen=True)
class MetricKernel:
    """One metric of the table.

    Attributes:
        name: canonical name, used in result keys (``"ndcg@10"``).
        values: ``(ranked_batch, cutoffs, convention) -> (per-query values (N, K), empty flags or None)``;
            ``None`` means the metric has no empty case (DCG, IDCG).
        has_cutoff: whether ``k`` applies (R-precision has none).
        uses_gain: whether the gain convention enters the value (for the exp2 negative-grade check).
    """

    name: str
    values: Values
    has_cutoff: bool = True
    uses_gain: Callable[[Convention], bool] = lambda conv: False  # noqa: E731


def _always(conv: Convention) -> bool:
    return True


KERNELS: dict[str, MetricKernel] = {
    k.name: k
    for k in (
        MetricKernel("dcg", lambda rb, ks, conv: (dcg_values(rb, ks), None), uses_gain=_always),
        MetricKernel("idcg", lambda rb, ks, conv: (idcg_values(rb, ks), None), uses_gain=_always),
        MetricKernel("ndcg", lambda rb, ks, conv: ndcg_values(rb, ks), uses_gain=_always),
        MetricKernel("map", average_precision_values, uses_gain=lambda conv: conv.graded),
        MetricKernel("mrr", lambda rb, ks, conv: reciprocal_rank_values(rb, ks)),
        MetricKernel("precision", lambda rb, ks, conv: precision_values(rb, ks, adaptive_k=conv.adaptive_k)),
        MetricKernel("recall", lambda rb, ks, conv: recall_values(rb, ks)),
        MetricKernel("hit_rate", lambda rb, ks, conv: hit_rate_values(rb, ks)),
        MetricKernel("r_precision", lambda rb, ks, conv: r_precision_values(rb, ks), has_cutoff=False),
    )
}

ALIASES: dict[str, str] = {
    "ap": "map",
    "average_precision": "map",
    "rr": "mrr",
    "reciprocal_rank": "mrr",
    "p": "precision",
    "r": "recall",
    "hr": "hit_rate",
    "hitrate": "hit_rate",
    "success": "hit_rate",
    "rprec": "r_precision",
    "rprecision": "r_precision",
}


def kernel(name: str) -> MetricKernel:
    """Look a metric up by canonical name or alias (case-insensitive); unknown names list close matches.

    Example:
        >>> kernel("nDCG").name
        'ndcg'
    """
    key = name.lower()
    key = ALIASES.get(key, key)
    if key in KERNELS:
        return KERNELS[key]
    choices = sorted(KERNELS) + sorted(ALIASES)
    close = difflib.get_close_matches(key, choices, n=3)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    raise ValueError(f"unknown metric {name!r}{hint} Known metrics: {', '.join(sorted(KERNELS))}")
