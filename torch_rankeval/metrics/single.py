"""One class per metric: thin specialisations of :class:`~torch_rankeval.RankingMetrics`.

Each takes the cutoff ``k`` (None, an int, or a sequence of ints) and the conventions that matter
for it; ``compute`` returns a scalar, or one value per cutoff when ``k`` is a sequence. Every class
accepts padded ``(N, L)`` input or flat torchmetrics-style input with ``indexes`` (see
:class:`~torch_rankeval.RankingMetrics` for inputs, states, distributed semantics and edge cases).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor

from torch_rankeval.metrics.base import RankingMetrics

__all__ = ["DCG", "IDCG", "NDCG", "MAP", "MRR", "Precision", "Recall", "HitRate", "RPrecision", "FallOut", "AUROC"]


class _SingleMetric(RankingMetrics):
    """A :class:`RankingMetrics` with one metric whose ``compute`` returns a tensor."""

    _metric: str = ""

    def __init__(self, k: int | Sequence[int] | None = None, **kwargs: Any) -> None:
        self._sequence_k = isinstance(k, Sequence)
        super().__init__(metrics=(self._metric,), k=k, **kwargs)

    def compute(self) -> Tensor:  # type: ignore[override]
        means = self._means()
        return means if self._sequence_k else means[0]


class DCG(_SingleMetric):
    """Mean discounted cumulative gain ``sum_{rank <= k} gain(rel) / log_b(rank + 1)``.

    Conventions: ``gain`` (default ``"exp2"``), ``log_base`` or ``discount``, ``ties`` (default
    ``"average"``), ``convention`` (a preset). DCG has no empty case: a list without gains scores 0.

    Example:
        >>> import torch
        >>> from torch_rankeval import DCG
        >>> metric = DCG(k=2, gain="linear")
        >>> metric.update(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[1, 2, 3]]))
        >>> metric.compute()
        tensor(2.2619)
    """

    _metric = "dcg"


class IDCG(_SingleMetric):
    """Mean ideal DCG: the DCG of each query's judged documents in decreasing gain.

    Pass ``ideal_target`` to ``update`` to include judged documents the ranking did not return.

    Example:
        >>> import torch
        >>> from torch_rankeval import IDCG
        >>> metric = IDCG(gain="linear")
        >>> metric.update(torch.tensor([[0.9, 0.5]]), torch.tensor([[0, 1]]))
        >>> metric.compute()
        tensor(1.)
    """

    _metric = "idcg"


class NDCG(_SingleMetric):
    """Mean normalised DCG, ``DCG@k / IDCG@k``.

    Conventions: ``gain`` (default ``"exp2"``), ``log_base``/``discount``, ``ties`` (default
    ``"average"``: exact expectation over tie orders), ``empty_target_action`` for queries whose
    ideal DCG is 0 (default ``"neg"``: 0, counted), ``convention``. Drop-in for torchmetrics'
    ``RetrievalNormalizedDCG(top_k=10)``: ``NDCG(k=10, convention="torchmetrics")`` with the same
    ``update(preds, target, indexes=...)``.

    Example:
        >>> import torch
        >>> from torch_rankeval import NDCG
        >>> metric = NDCG(k=[1, 3])
        >>> metric.update(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[0, 2, 1]]))
        >>> metric.compute()
        tensor([0.0000, 0.6590])
    """

    _metric = "ndcg"


class MAP(_SingleMetric):
    """Mean average precision (AP@k averaged over queries).

    Conventions: ``denominator`` (``"all_relevant"``: trec_eval, default; ``"retrieved_relevant"``:
    torchmetrics; ``"min_k_relevant"``), ``graded`` (gain-weighted AP), ``relevance_threshold``,
    ``ties``, ``empty_target_action``, ``convention``. With ``n_relevant`` or ``ideal_target`` in
    ``update``, relevant documents the ranking missed count as misses.

    Example:
        >>> import torch
        >>> from torch_rankeval import MAP
        >>> metric = MAP()
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 1]]))
        >>> metric.compute()
        tensor(0.8333)
    """

    _metric = "map"


class MRR(_SingleMetric):
    """Mean reciprocal rank of the first relevant document (within the top ``k``).

    Scores of any sign count as retrieved (raw logits work). Conventions: ``relevance_threshold``,
    ``ties``, ``empty_target_action``, ``convention``.

    Example:
        >>> import torch
        >>> from torch_rankeval import MRR
        >>> metric = MRR()
        >>> metric.update(torch.tensor([[-0.1, -0.5, -0.9]]), torch.tensor([[0, 0, 1]]))
        >>> metric.compute()
        tensor(0.3333)
    """

    _metric = "mrr"


class Precision(_SingleMetric):
    """Mean precision@k; ``k`` beyond the list divides by ``k`` unless ``adaptive_k=True``.

    Example:
        >>> import torch
        >>> from torch_rankeval import Precision
        >>> metric = Precision(k=2)
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 1]]))
        >>> metric.compute()
        tensor(0.5000)
    """

    _metric = "precision"


class Recall(_SingleMetric):
    """Mean recall@k over all relevant documents of each query (``n_relevant``/``ideal_target`` or the list).

    Example:
        >>> import torch
        >>> from torch_rankeval import Recall
        >>> metric = Recall(k=2)
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 1]]))
        >>> metric.compute()
        tensor(0.5000)
    """

    _metric = "recall"


class HitRate(_SingleMetric):
    """Share of queries with a relevant document in the top ``k`` (trec_eval ``success.k``).

    Example:
        >>> import torch
        >>> from torch_rankeval import HitRate
        >>> metric = HitRate(k=[1, 3])
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[0, 0, 1]]))
        >>> metric.compute()
        tensor([0., 1.])
    """

    _metric = "hit_rate"


class RPrecision(_SingleMetric):
    """Mean R-precision: precision at rank R, the number of relevant documents of the query.

    Example:
        >>> import torch
        >>> from torch_rankeval import RPrecision
        >>> metric = RPrecision()
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.7, 0.6]]), torch.tensor([[1, 0, 1, 0]]))
        >>> metric.compute()
        tensor(0.5000)
    """

    _metric = "r_precision"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(k=None, **kwargs)


class FallOut(_SingleMetric):
    """Mean fall-out@k: the share of each list's non-relevant documents that the top ``k`` hold.

    Drop-in for torchmetrics' ``RetrievalFallOut(top_k=k)``: a list without non-relevant document
    scores ``empty_target_action`` (default ``"pos"``: 1, as torchmetrics). Ties (default
    ``"average"``): the expected value over the orders of tied documents.

    Example:
        >>> import torch
        >>> from torch_rankeval import FallOut
        >>> metric = FallOut(k=2)
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.7, 0.6]]), torch.tensor([[1, 0, 1, 0]]))
        >>> metric.compute()
        tensor(0.5000)
    """

    _metric = "fall_out"

    def __init__(
        self, k: int | Sequence[int] | None = None, *, empty_target_action: str = "pos", **kwargs: Any
    ) -> None:
        super().__init__(k, empty_target_action=empty_target_action, **kwargs)


class AUROC(_SingleMetric):
    """Mean retrieval AUROC of each list's top ``k`` (torchmetrics' ``RetrievalAUROC(top_k=k, max_fpr=...)``).

    Tied scores count half a correctly ordered pair (the trapezoidal ROC); a top ``k`` without a
    relevant or a non-relevant document scores 0; a list without relevant document is empty
    (``empty_target_action``, default ``"neg"``: 0). ``max_fpr``: the McClish-standardised partial
    AUC over false-positive rates ``[0, max_fpr]``.

    Example:
        >>> import torch
        >>> from torch_rankeval import AUROC
        >>> metric = AUROC()
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.8, 0.6]]), torch.tensor([[1, 0, 1, 0]]))
        >>> metric.compute()                      # pairs: right, tied (1/2), right, right
        tensor(0.8750)
    """

    _metric = "auroc"

    def __init__(self, k: int | Sequence[int] | None = None, *, max_fpr: float | None = None, **kwargs: Any) -> None:
        if max_fpr is not None:
            self._metric = f"auroc(max_fpr={max_fpr!r})"
        super().__init__(k, **kwargs)
