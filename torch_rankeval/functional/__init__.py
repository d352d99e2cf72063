"""Functional ranking metrics: pure functions on padded tensors, one ranking per call.

Every function takes ``preds`` and ``target`` of shape ``(L,)`` or ``(N, L)``, an optional ``mask``
(False = padding) or ``ignore_index``, a cutoff ``k`` (None, int or sequence of ints) and the
convention arguments of :mod:`torch_rankeval.conventions`.

Example:
    >>> import torch
    >>> from torch_rankeval import functional as F
    >>> preds, target = torch.tensor([0.9, 0.8, 0.7]), torch.tensor([1, 0, 2])
    >>> round(F.ndcg(preds, target, k=3).item(), 4), F.reciprocal_rank(preds, target).item()
    (0.6885, 1.0)
"""

from torch_rankeval.functional._api import evaluate
from torch_rankeval.functional.average_precision import average_precision
from torch_rankeval.functional.dcg import dcg, idcg, ndcg
from torch_rankeval.functional.debiased import (
    aggregate_ips_gains,
    ips_gains,
    position_debiased_dcg,
    position_debiased_ndcg,
)
from torch_rankeval.functional.precision_recall import hit_rate, precision, r_precision, recall
from torch_rankeval.functional.reciprocal_rank import reciprocal_rank
from torch_rankeval.ranking.flat import group_by_query
from torch_rankeval.ranking.sparse import sparse_from_ids, sparse_target
from torch_rankeval.ranking.subtopics import subtopic_target

__all__ = [
    "evaluate",
    "dcg",
    "idcg",
    "ndcg",
    "average_precision",
    "reciprocal_rank",
    "precision",
    "recall",
    "hit_rate",
    "r_precision",
    "group_by_query",
    "sparse_from_ids",
    "sparse_target",
    "subtopic_target",
    "ips_gains",
    "position_debiased_dcg",
    "position_debiased_ndcg",
    "aggregate_ips_gains",
]
