"""torchmetrics' retrieval classes, same signatures and same numbers, on the streaming core.

Replace ``from torchmetrics.retrieval import RetrievalMAP`` by
``from torch_rankeval.compat.torchmetrics import RetrievalMAP``: the constructor takes the same
arguments (``top_k``, ``empty_target_action``, ``ignore_index``, ``aggregation``, ``adaptive_k``,
``max_fpr`` and torchmetrics' ``Metric`` kwargs), ``update(preds, target, indexes)`` the same flat
tensors, and ``compute()`` returns the same scalar tensor, torchmetrics' quirks included: each
class is a :class:`~torch_rankeval.RankingMetrics` with the preset of the installed torchmetrics
(:data:`PRESET`: ``"torchmetrics"`` for >= 1.8, ``"torchmetrics_1.7"`` for 1.3.2-1.7; >= 1.8: linear gain, tied scores ranked by torchmetrics' own
``torch.topk`` / ``torch.argsort`` calls and averaged in nDCG, documents scored ``<= 0`` never
relevant in AP, RR, precision and recall, AP divided by the relevant documents retrieved) on flat
input (documents of one query may arrive in several updates, as in torchmetrics).

Documents are kept until ``compute`` (a query may span updates), as in torchmetrics, and grouped
there by torchmetrics' own ``torch.sort`` of the ids; ``compute`` ranks every query of one length
in one batched call and reduces ``aggregation="mean"`` to float64 sums (no per-query values kept;
the other aggregations keep them, ``keep_per_query=True``). Under ``torch.distributed`` the
documents are gathered, as in torchmetrics. What differs, on purpose: NaN or infinite scores raise a ``ValueError`` (torchmetrics ranks them);
``indexes`` may be any integer dtype (torchmetrics wants int64); ``top_k=0`` is refused in every class
(torchmetrics' ``RetrievalMAP`` / ``RetrievalMRR`` let it through and rank the whole list) and so is
``max_fpr`` outside (0, 1] (torchmetrics' check lets it through to ``compute``). Not reproduced: fractional
targets in (0, 1) (torchmetrics' documented input is binary; it sums them in P and R) and negative
grades in nDCG.

Functional code switches the same way: ``retrieval_normalized_dcg``, ``retrieval_average_precision``, ...
``retrieval_precision_recall_curve`` take torchmetrics' functional arguments (one query's ``preds`` and
``target``) and return its numbers (each is the class above on one query).
:class:`RetrievalPrecisionRecallCurve` and :class:`RetrievalRecallAtFixedPrecision` keep the documents
as torchmetrics does and rank each query with torchmetrics' own ``torch.topk`` call.

Example:
    >>> import torch
    >>> # from torchmetrics.retrieval import RetrievalMAP
    >>> from torch_rankeval.compat.torchmetrics import RetrievalMAP
    >>> metric = RetrievalMAP(top_k=2)
    >>> metric.update(torch.tensor([0.9, 0.2, 0.5, 0.3]), torch.tensor([0, 1, 1, 1]), torch.tensor([0, 0, 1, 1]))
    >>> metric.compute()
    tensor(0.7500)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, ClassVar, Literal, Union

import torch
import torchmetrics
from packaging.version import Version
from torch import Tensor

from torch_rankeval.conventions import PRESETS, Convention, resolve_convention
from torch_rankeval.measures import Measure, MeasurePlan
from torch_rankeval.metrics.base import RankingMetrics
from torch_rankeval.ranking.flat import group_by_query_buckets

__all__ = [
    "RetrievalNormalizedDCG",
    "RetrievalMAP",
    "RetrievalMRR",
    "RetrievalPrecision",
    "RetrievalRecall",
    "RetrievalHitRate",
    "RetrievalRPrecision",
    "RetrievalFallOut",
    "RetrievalAUROC",
    "RetrievalPrecisionRecallCurve",
    "RetrievalRecallAtFixedPrecision",
    "retrieval_normalized_dcg",
    "retrieval_average_precision",
    "retrieval_reciprocal_rank",
    "retrieval_precision",
    "retrieval_recall",
    "retrieval_hit_rate",
    "retrieval_r_precision",
    "retrieval_fall_out",
    "retrieval_auroc",
    "retrieval_precision_recall_curve",
    "PRESET",
]

Aggregation = Union[Literal["mean", "median", "min", "max"], Callable]
_EMPTY_ACTIONS = ("error", "skip", "neg", "pos")
_AGGREGATIONS = ("mean", "median", "min", "max")


#: The preset of the installed torchmetrics: ``"torchmetrics"`` (>= 1.8) or ``"torchmetrics_1.7"``
#: (1.3.2-1.7, which counted documents scored <= 0 as relevant), so the classes give the numbers of
#: the torchmetrics they replace.
PRESET = "torchmetrics" if Version(torchmetrics.__version__) >= Version("1.8") else "torchmetrics_1.7"


class _Retrieval(RankingMetrics):
    """torchmetrics' ``RetrievalMetric`` on :class:`RankingMetrics`: one measure, flat input, a scalar.

    Example:
        >>> RetrievalRecall(top_k=3).keys, RetrievalRPrecision().keys
        (['recall@3'], ['r_precision'])
    """

    _measure: ClassVar[str] = ""
    _convention: ClassVar[str | Convention] = PRESET
    _binary_target: ClassVar[bool] = True  # torchmetrics refuses targets outside [0, 1] (all but nDCG)
    plot_lower_bound: ClassVar[float] = 0.0
    plot_upper_bound: ClassVar[float] = 1.0

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        top_k: int | None = None,
        aggregation: Aggregation = "mean",
        **kwargs: Any,
    ) -> None:
        # torchmetrics' signature (most classes inherit it); RetrievalAUROC passes its ``measure`` (``max_fpr``)
        # and RetrievalPrecision its ``adaptive_k`` among the kwargs
        measure, adaptive_k = kwargs.pop("measure", None), kwargs.pop("adaptive_k", None)
        if empty_target_action not in _EMPTY_ACTIONS:
            raise ValueError(
                f"Argument `empty_target_action` received a wrong value `{empty_target_action}`: use one of "
                f"{', '.join(map(repr, _EMPTY_ACTIONS))}"
            )
        if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, int)):
            raise ValueError(f"Argument `ignore_index` must be an integer or None, got {ignore_index!r}")
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0):
            raise ValueError(f"`top_k` has to be a positive integer or None, got {top_k!r}")
        if not (isinstance(aggregation, str) and aggregation in _AGGREGATIONS or callable(aggregation)):
            raise ValueError(
                "Argument `aggregation` must be one of `mean`, `median`, `min`, `max` or a custom callable function "
                f"which takes a tensor of values, but got {aggregation!r}."
            )
        super().__init__(
            metrics=(measure or self._measure,),
            k=top_k,
            convention=self._convention,
            empty_target_action=empty_target_action,
            adaptive_k=adaptive_k,
            ignore_index=ignore_index,
            input_format="flat",
            keep_per_query=aggregation != "mean",  # only the other aggregations need per-query values
            **kwargs,
        )
        self.top_k = top_k
        self.aggregation = aggregation

    def update(self, preds: Tensor, target: Tensor, indexes: Tensor) -> None:  # type: ignore[override]
        """Add documents: ``preds``, ``target`` and ``indexes`` (the query id of each document) of one shape,
        flattened as torchmetrics does; documents of a query may arrive in several updates.

        Example:
            >>> m = RetrievalMRR()
            >>> m.update(torch.tensor([[0.2, 0.7]]), torch.tensor([[1, 0]]), torch.tensor([[5, 5]]))
            >>> m.compute()
            tensor(0.5000)
        """
        _check_documents(preds, target, indexes)
        if not (target.dtype in (torch.bool, torch.int32, torch.int64) or target.is_floating_point()):
            raise ValueError(f"`target` must be a tensor of booleans, integers or floats, got {target.dtype}")
        preds, target, indexes = preds.reshape(-1), target.reshape(-1), indexes.reshape(-1)
        if self.ignore_index is not None:
            keep = target != self.ignore_index
            preds, target, indexes = preds[keep], target[keep], indexes[keep]
        if preds.numel() == 0:
            raise ValueError("`indexes`, `preds` and `target` must be non-empty (after dropping `ignore_index`)")
        if self._binary_target and self.validate_args and bool((target.max() > 1) | (target.min() < 0)):
            raise ValueError(f"`target` must contain `binary` values (0 or 1) for {type(self).__name__}")
        # torchmetrics ranks float32 scores and reads integer targets as int64
        target = target if target.is_floating_point() else target.long()
        super().update(preds.to(torch.float32), target, indexes)

    def compute(self) -> Tensor:  # type: ignore[override]
        """The aggregated value over the counted queries; 0.0 when none was counted (as torchmetrics).

        Example:
            >>> m = RetrievalHitRate(empty_target_action="skip")
            >>> m.update(torch.tensor([0.2, 0.7]), torch.tensor([0, 0]), torch.tensor([0, 0]))
            >>> m.compute()                         # every query skipped: 0, as torchmetrics
            tensor(0.)
        """
        if self.aggregation == "mean":
            sums, _, counts = self._moments()
            return torch.where(counts > 0, sums / counts.clamp(min=1), 0.0)[0].to(self.dtype)
        per_query = self._kept_rows()[0][:, 0]  # in query-id order, synced (compute syncs)
        values = per_query[~torch.isnan(per_query)]  # NaN: skipped
        if values.numel() == 0:
            return torch.zeros((), dtype=self.dtype, device=values.device)
        if callable(self.aggregation):  # torchmetrics' _retrieval_aggregate: a callable gets dim=None
            return self.aggregation(values, dim=None)
        return getattr(values, self.aggregation)()  # Tensor.mean, .median, .min or .max (``__init__`` checks the name)


class RetrievalNormalizedDCG(_Retrieval):
    """nDCG@k as torchmetrics' ``RetrievalNormalizedDCG``: linear gain, tied scores averaged, graded targets.

    A query whose targets sum to 0 is empty (``empty_target_action``, default ``"neg"``: 0).

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import RetrievalNormalizedDCG  # replaces torchmetrics.retrieval's
        >>> metric = RetrievalNormalizedDCG(top_k=2)
        >>> metric.update(torch.tensor([0.9, 0.5, 0.5, 0.8]), torch.tensor([0, 2, 1, 1]), torch.tensor([0, 0, 0, 1]))
        >>> metric.compute()
        tensor(0.6799)
    """

    _measure = "ndcg"
    _binary_target = False


class RetrievalMAP(_Retrieval):
    """Mean average precision@k as torchmetrics' ``RetrievalMAP``: AP divided by the relevant documents
    retrieved in the top k, documents scored ``<= 0`` not relevant, tied scores in ``torch.topk``'s order.

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import RetrievalMAP  # replaces torchmetrics.retrieval's
        >>> metric = RetrievalMAP(aggregation="median")
        >>> metric.update(torch.tensor([0.9, 0.2, 0.5, -0.3]), torch.tensor([0, 1, 1, 1]), torch.tensor([0, 0, 1, 1]))
        >>> metric.compute()                      # the score -0.3 does not retrieve its document
        tensor(0.5000)
    """

    _measure = "map"


class RetrievalMRR(_Retrieval):
    """Mean reciprocal rank@k as torchmetrics' ``RetrievalMRR`` (documents scored ``<= 0`` not relevant).

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import RetrievalMRR  # replaces torchmetrics.retrieval's
        >>> metric = RetrievalMRR(top_k=1)
        >>> metric.update(torch.tensor([0.9, 0.2, 0.5, 0.3]), torch.tensor([0, 1, 1, 0]), torch.tensor([0, 0, 1, 1]))
        >>> metric.compute()
        tensor(0.5000)
    """

    _measure = "mrr"


class RetrievalPrecision(_Retrieval):
    """Mean precision@k as torchmetrics' ``RetrievalPrecision``: divided by ``top_k`` even beyond the list
    unless ``adaptive_k=True``; documents scored ``<= 0`` not relevant.

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import RetrievalPrecision  # replaces torchmetrics.retrieval's
        >>> preds, target, indexes = torch.tensor([0.9, 0.2, 0.5]), torch.tensor([1, 1, 1]), torch.tensor([0, 0, 1])
        >>> a, b = RetrievalPrecision(top_k=4), RetrievalPrecision(top_k=4, adaptive_k=True)
        >>> a.update(preds, target, indexes); b.update(preds, target, indexes)
        >>> a.compute(), b.compute()
        (tensor(0.3750), tensor(1.))
    """

    _measure = "precision"

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        top_k: int | None = None,
        adaptive_k: bool = False,
        aggregation: Aggregation = "mean",
        **kwargs: Any,
    ) -> None:
        if not isinstance(adaptive_k, bool):
            raise ValueError(f"`adaptive_k` has to be a boolean, got {adaptive_k!r}")
        super().__init__(empty_target_action, ignore_index, top_k, aggregation, adaptive_k=adaptive_k, **kwargs)
        self.adaptive_k = adaptive_k


class RetrievalRecall(_Retrieval):
    """Mean recall@k as torchmetrics' ``RetrievalRecall``: a document scored ``<= 0`` is not retrieved but
    counts among the query's relevant documents.

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import RetrievalRecall  # replaces torchmetrics.retrieval's
        >>> metric = RetrievalRecall(top_k=2)
        >>> metric.update(torch.tensor([0.9, 0.2, -0.5]), torch.tensor([1, 1, 1]), torch.tensor([0, 0, 0]))
        >>> metric.compute()
        tensor(0.6667)
    """

    _measure = "recall"


class RetrievalHitRate(_Retrieval):
    """Share of queries with a relevant document in the top k, as torchmetrics' ``RetrievalHitRate``.

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import RetrievalHitRate  # replaces torchmetrics.retrieval's
        >>> metric = RetrievalHitRate(top_k=1)
        >>> metric.update(torch.tensor([0.9, 0.2, 0.5, 0.3]), torch.tensor([0, 1, 1, 0]), torch.tensor([0, 0, 1, 1]))
        >>> metric.compute()
        tensor(0.5000)
    """

    _measure = "hit_rate"


class RetrievalRPrecision(_Retrieval):
    """Mean R-precision as torchmetrics' ``RetrievalRPrecision`` (precision at rank R, the relevant count).

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import RetrievalRPrecision  # replaces torchmetrics.retrieval's
        >>> metric = RetrievalRPrecision()
        >>> metric.update(torch.tensor([0.9, 0.8, 0.7, 0.6]), torch.tensor([1, 0, 1, 0]), torch.tensor([0, 0, 0, 0]))
        >>> metric.compute()
        tensor(0.5000)
    """

    _measure = "r_precision"

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        aggregation: Aggregation = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(empty_target_action, ignore_index, None, aggregation, **kwargs)


class RetrievalFallOut(_Retrieval):
    """Mean fall-out@k as torchmetrics' ``RetrievalFallOut``: the share of a query's non-relevant documents
    in its top k. A query without NON-relevant document is empty (default ``"pos"``: 1). Lower is better.

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import RetrievalFallOut  # replaces torchmetrics.retrieval's
        >>> metric = RetrievalFallOut(top_k=2)
        >>> metric.update(torch.tensor([0.9, 0.8, 0.7, 0.6]), torch.tensor([1, 0, 1, 0]), torch.tensor([0, 0, 0, 0]))
        >>> metric.compute()
        tensor(0.5000)
    """

    _measure = "fall_out"
    higher_is_better: bool | None = False

    def __init__(
        self,
        empty_target_action: str = "pos",
        ignore_index: int | None = None,
        top_k: int | None = None,
        aggregation: Aggregation = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(empty_target_action, ignore_index, top_k, aggregation, **kwargs)


class RetrievalAUROC(_Retrieval):
    """Mean AUROC of each query's top k as torchmetrics' ``RetrievalAUROC`` (``max_fpr``: McClish's
    standardised partial AUC). The top k is the ``k`` documents that torchmetrics' ``torch.topk``
    call keeps (a tie group that straddles the cutoff keeps torch's pick of it, on the scores'
    device); tied scores among them count half a pair, and a kept score outside [0, 1] passes them
    all through a sigmoid first (``binary_auroc``'s rule, which can tie large float32 logits); a top k
    without a relevant or a non-relevant document scores 0; a query without relevant document is empty.

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import RetrievalAUROC  # replaces torchmetrics.retrieval's
        >>> metric = RetrievalAUROC()
        >>> metric.update(torch.tensor([0.9, 0.8, 0.8, 0.6]), torch.tensor([1, 0, 1, 0]), torch.tensor([0, 0, 0, 0]))
        >>> metric.compute()
        tensor(0.8750)
    """

    _measure = "auroc"
    # torchmetrics' retrieval_auroc: torch.topk's pick of k documents, tied scores among them half a pair
    _convention = replace(
        PRESETS[PRESET], by_measure={**dict(PRESETS[PRESET].by_measure), "auroc": {"ties": "torch_topk"}}
    )

    def __init__(
        self,
        empty_target_action: Literal["error", "skip", "neg", "pos"] = "neg",
        ignore_index: int | None = None,
        top_k: int | None = None,
        max_fpr: float | None = None,
        aggregation: Aggregation = "mean",
        **kwargs: Any,
    ) -> None:
        if max_fpr is not None and (
            isinstance(max_fpr, bool) or not isinstance(max_fpr, (int, float)) or not 0 < max_fpr <= 1
        ):
            raise ValueError(f"Arguments `max_fpr` should be a float in range (0, 1], but got: {max_fpr!r}")
        measure = "auroc" if max_fpr is None else f"auroc(max_fpr={float(max_fpr)!r})"
        super().__init__(empty_target_action, ignore_index, top_k, aggregation, measure=measure, **kwargs)
        self.max_fpr = max_fpr


class RetrievalPrecisionRecallCurve(torchmetrics.Metric):
    """Precision and recall at every cutoff ``1..max_k``, averaged over queries, as torchmetrics'
    ``RetrievalPrecisionRecallCurve``: same signature, same three tensors ``(precision, recall, top_k)``.

    Each query's top ``max_k`` is torchmetrics' own ``torch.topk`` pick on its float32 scores (tied
    scores in that call's order; no score threshold, unlike ``RetrievalPrecision``), its documents
    grouped by torchmetrics' ``torch.sort`` of the ids; queries of one length are ranked in one 2-D
    call (the order a 1-D call gives, see :mod:`torch_rankeval.ranking.view`); the values are the
    library's precision@k and recall@k of that one ranking, through its measure plan. ``max_k=None`` is
    the longest query; ``adaptive_k`` stops a shorter query's cutoffs at its length. A query without
    a relevant document follows ``empty_target_action`` (``"neg"``: zeros, ``"pos"``: ones,
    ``"skip"``, ``"error"``). Documents are kept until ``compute`` (all-gathered across processes),
    as in torchmetrics.

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import RetrievalPrecisionRecallCurve
        >>> metric = RetrievalPrecisionRecallCurve(max_k=2)
        >>> metric.update(torch.tensor([0.9, 0.2, 0.5, 0.3]), torch.tensor([0, 1, 1, 1]), torch.tensor([0, 0, 1, 1]))
        >>> precision, recall, top_k = metric.compute()
        >>> precision, recall, top_k
        (tensor([0.5000, 0.7500]), tensor([0.2500, 1.0000]), tensor([1, 2]))
    """

    is_differentiable: bool = False
    higher_is_better: bool = True
    full_state_update: bool = False

    def __init__(
        self,
        max_k: int | None = None,
        adaptive_k: bool = False,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        aggregation: Aggregation = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if empty_target_action not in _EMPTY_ACTIONS:
            raise ValueError(
                f"Argument `empty_target_action` received a wrong value `{empty_target_action}`: use one of "
                f"{', '.join(map(repr, _EMPTY_ACTIONS))}"
            )
        if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, int)):
            raise ValueError(f"Argument `ignore_index` must be an integer or None, got {ignore_index!r}")
        if max_k is not None and (isinstance(max_k, bool) or not isinstance(max_k, int) or max_k <= 0):
            raise ValueError(f"`max_k` has to be a positive integer or None, got {max_k!r}")
        if not isinstance(adaptive_k, bool):
            raise ValueError(f"`adaptive_k` has to be a boolean, got {adaptive_k!r}")
        if not (isinstance(aggregation, str) and aggregation in _AGGREGATIONS or callable(aggregation)):
            raise ValueError(
                "Argument `aggregation` must be one of `mean`, `median`, `min`, `max` or a custom callable function "
                f"which takes a tensor of values, but got {aggregation!r}."
            )
        self.max_k, self.adaptive_k, self.aggregation = max_k, adaptive_k, aggregation
        self.empty_target_action, self.ignore_index = empty_target_action, ignore_index
        for name in ("indexes", "preds", "target"):
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def update(self, preds: Tensor, target: Tensor, indexes: Tensor) -> None:
        """Add documents: ``preds``, ``target`` (binary) and ``indexes`` (the query id of each document)
        of one shape, flattened as torchmetrics does.

        Example:
            >>> m = RetrievalPrecisionRecallCurve()
            >>> m.update(torch.tensor([[0.2, 0.7]]), torch.tensor([[1, 0]]), torch.tensor([[5, 5]]))
            >>> m.compute()[1]
            tensor([0., 1.])
        """
        preds, target, indexes = _flat_documents(preds, target, indexes, self.ignore_index, type(self).__name__)
        self.indexes.append(indexes)
        self.preds.append(preds)
        self.target.append(target)

    def compute(self) -> tuple[Tensor, Tensor, Tensor]:  # type: ignore[override]
        """``(precision, recall, top_k)``, each of ``max_k`` entries (``top_k`` = ``1..max_k``).

        Example:
            >>> m = RetrievalPrecisionRecallCurve(max_k=3, adaptive_k=True)
            >>> m.update(torch.tensor([0.2, 0.7]), torch.tensor([1, 0]), torch.tensor([0, 0]))
            >>> m.compute()[0]                       # the 3rd cutoff divides by the list's 2 documents
            tensor([0.0000, 0.5000, 0.5000])
        """
        cat = torchmetrics.utilities.dim_zero_cat
        indexes, order = torch.sort(cat(self.indexes))  # torchmetrics' own call: its order inside a query
        preds, target = cat(self.preds)[order], cat(self.target)[order]
        sizes = torch.unique_consecutive(indexes, return_counts=True)[1]
        max_k = self.max_k if self.max_k is not None else int(sizes.max())
        device = preds.device
        *curves, empty = _curves(preds, target, indexes, max_k, self.adaptive_k)  # (Q, max_k) precision, recall
        if self.empty_target_action == "error" and bool(empty.any()):
            raise ValueError("`compute` method was provided with a query with no positive target.")
        fill = 1.0 if self.empty_target_action == "pos" else 0.0
        precision, recall = (torch.where(empty[:, None], fill, c) for c in curves)
        if self.empty_target_action == "skip":
            precision, recall = precision[~empty], recall[~empty]
        top_k = torch.arange(1, max_k + 1, device=device)
        if precision.shape[0] == 0:
            return torch.zeros(max_k, device=device), torch.zeros(max_k, device=device), top_k
        return _aggregate(precision, self.aggregation), _aggregate(recall, self.aggregation), top_k


class RetrievalRecallAtFixedPrecision(RetrievalPrecisionRecallCurve):
    """The highest mean recall@k over the cutoffs ``k <= max_k`` whose mean precision@k is at least
    ``min_precision``, and that ``k``, as torchmetrics' ``RetrievalRecallAtFixedPrecision`` (same
    signature, same pair of tensors): the curve of :class:`RetrievalPrecisionRecallCurve`; among
    cutoffs of equal recall the largest ``k``; no cutoff reaching ``min_precision`` (or a best recall
    of 0) gives ``(0, max_k)``.

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import RetrievalRecallAtFixedPrecision
        >>> metric = RetrievalRecallAtFixedPrecision(min_precision=0.6, max_k=3)
        >>> metric.update(torch.tensor([0.9, 0.2, 0.5, 0.3]), torch.tensor([1, 1, 0, 1]), torch.tensor([0, 0, 1, 1]))
        >>> metric.compute()
        (tensor(1.), tensor(2))
    """

    def __init__(
        self,
        min_precision: float = 0.0,
        max_k: int | None = None,
        adaptive_k: bool = False,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            max_k=max_k, adaptive_k=adaptive_k, empty_target_action=empty_target_action, ignore_index=ignore_index,
            **kwargs,
        )  # fmt: skip
        if not (isinstance(min_precision, float) and 0.0 <= min_precision <= 1.0):
            raise ValueError(f"`min_precision` has to be a float in [0, 1] (as torchmetrics), got {min_precision!r}")
        self.min_precision = min_precision

    def compute(self) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        """``(recall, k)``: the best mean recall at a cutoff of mean precision ``>= min_precision``, and that cutoff.

        Example:
            >>> m = RetrievalRecallAtFixedPrecision(min_precision=1.0)
            >>> m.update(torch.tensor([0.2, 0.7]), torch.tensor([1, 0]), torch.tensor([0, 0]))
            >>> m.compute()                          # no cutoff is that precise: (0, max_k)
            (tensor(0.), tensor(2))
        """
        precision, recall, top_k = super().compute()
        return _recall_at_fixed_precision(precision, recall, top_k, self.min_precision)


# ------------------------------------------------------------------------------------------ functional
def retrieval_normalized_dcg(preds: Tensor, target: Tensor, top_k: int | None = None) -> Tensor:
    """nDCG@k of one query, as ``torchmetrics.functional.retrieval.retrieval_normalized_dcg`` (same
    signature and number: linear gain, tied scores averaged; a target summing to 0 gives 0).

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import retrieval_normalized_dcg
        >>> retrieval_normalized_dcg(torch.tensor([0.1, 0.2, 0.3, 4.0, 70.0]), torch.tensor([10, 0, 0, 1, 5]))
        tensor(0.6957)
    """
    return _one_query(RetrievalNormalizedDCG, preds, target, top_k=top_k)


def retrieval_average_precision(preds: Tensor, target: Tensor, top_k: int | None = None) -> Tensor:
    """Average precision@k of one query, as torchmetrics' ``retrieval_average_precision`` (divided by the
    relevant documents retrieved; a document scored ``<= 0`` not relevant; ties in ``torch.topk``'s order).

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import retrieval_average_precision
        >>> retrieval_average_precision(torch.tensor([0.2, 0.3, 0.5]), torch.tensor([True, False, True]))
        tensor(0.8333)
    """
    return _one_query(RetrievalMAP, preds, target, top_k=top_k)


def retrieval_reciprocal_rank(preds: Tensor, target: Tensor, top_k: int | None = None) -> Tensor:
    """Reciprocal rank@k of one query, as torchmetrics' ``retrieval_reciprocal_rank``.

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import retrieval_reciprocal_rank
        >>> retrieval_reciprocal_rank(torch.tensor([0.2, 0.3, 0.5]), torch.tensor([False, True, False]))
        tensor(0.5000)
    """
    return _one_query(RetrievalMRR, preds, target, top_k=top_k)


def retrieval_precision(preds: Tensor, target: Tensor, top_k: int | None = None, adaptive_k: bool = False) -> Tensor:
    """Precision@k of one query, as torchmetrics' ``retrieval_precision`` (divided by ``top_k`` unless
    ``adaptive_k``).

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import retrieval_precision
        >>> retrieval_precision(torch.tensor([0.2, 0.3, 0.5]), torch.tensor([True, False, True]), top_k=2)
        tensor(0.5000)
    """
    return _one_query(RetrievalPrecision, preds, target, top_k=top_k, adaptive_k=adaptive_k)


def retrieval_recall(preds: Tensor, target: Tensor, top_k: int | None = None) -> Tensor:
    """Recall@k of one query, as torchmetrics' ``retrieval_recall``.

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import retrieval_recall
        >>> retrieval_recall(torch.tensor([0.2, 0.3, 0.5]), torch.tensor([True, False, True]), top_k=2)
        tensor(0.5000)
    """
    return _one_query(RetrievalRecall, preds, target, top_k=top_k)


def retrieval_hit_rate(preds: Tensor, target: Tensor, top_k: int | None = None) -> Tensor:
    """Hit rate@k (1 if a relevant document is in the top k) of one query, as torchmetrics' ``retrieval_hit_rate``.

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import retrieval_hit_rate
        >>> retrieval_hit_rate(torch.tensor([0.2, 0.3, 0.5]), torch.tensor([True, False, True]), top_k=1)
        tensor(1.)
    """
    return _one_query(RetrievalHitRate, preds, target, top_k=top_k)


def retrieval_r_precision(preds: Tensor, target: Tensor) -> Tensor:
    """R-precision of one query, as torchmetrics' ``retrieval_r_precision``.

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import retrieval_r_precision
        >>> retrieval_r_precision(torch.tensor([0.2, 0.3, 0.5]), torch.tensor([True, False, True]))
        tensor(0.5000)
    """
    return _one_query(RetrievalRPrecision, preds, target)


def retrieval_fall_out(preds: Tensor, target: Tensor, top_k: int | None = None) -> Tensor:
    """Fall-out@k of one query (the share of its non-relevant documents in the top k), as torchmetrics'
    ``retrieval_fall_out``: 0 for a query without non-relevant document (the class's default gives 1).

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import retrieval_fall_out
        >>> retrieval_fall_out(torch.tensor([0.2, 0.3, 0.5]), torch.tensor([True, False, True]), top_k=2)
        tensor(1.)
    """
    return _one_query(RetrievalFallOut, preds, target, top_k=top_k, empty_target_action="neg")


def retrieval_auroc(preds: Tensor, target: Tensor, top_k: int | None = None, max_fpr: float | None = None) -> Tensor:
    """AUROC of one query's top k, as torchmetrics' ``retrieval_auroc`` (see :class:`RetrievalAUROC`).

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import retrieval_auroc
        >>> retrieval_auroc(torch.tensor([0.2, 0.3, 0.5]), torch.tensor([True, False, True]))
        tensor(0.5000)
    """
    return _one_query(RetrievalAUROC, preds, target, top_k=top_k, max_fpr=max_fpr)


def retrieval_precision_recall_curve(
    preds: Tensor, target: Tensor, max_k: int | None = None, adaptive_k: bool = False
) -> tuple[Tensor, Tensor, Tensor]:
    """``(precision, recall, top_k)`` of one query at the cutoffs ``1..max_k`` (``None``: its length),
    as torchmetrics' ``retrieval_precision_recall_curve`` (see :class:`RetrievalPrecisionRecallCurve`).

    Example:
        >>> import torch
        >>> from torch_rankeval.compat.torchmetrics import retrieval_precision_recall_curve
        >>> retrieval_precision_recall_curve(torch.tensor([0.2, 0.3, 0.5]), torch.tensor([True, False, True]), max_k=2)
        (tensor([1.0000, 0.5000]), tensor([0.5000, 0.5000]), tensor([1, 2]))
    """
    name = "retrieval_precision_recall_curve"
    preds, target = _one_list(preds, target, name)
    preds, target, _ = _flat_documents(preds, target, torch.zeros_like(target, dtype=torch.long), None, name)
    if max_k is not None and (isinstance(max_k, bool) or not isinstance(max_k, int) or max_k <= 0):
        raise ValueError(f"`max_k` has to be a positive integer or None, got {max_k!r}")
    if not isinstance(adaptive_k, bool):
        raise ValueError(f"`adaptive_k` has to be a boolean, got {adaptive_k!r}")
    n = preds.shape[0]
    max_k = n if max_k is None else max_k
    top_k = torch.arange(1, max_k + 1, device=preds.device).clamp(max=n if adaptive_k else max_k)
    precision, recall, _ = _curves(preds, target, torch.zeros_like(target), max_k, adaptive_k)
    return precision[0], recall[0], top_k


# ------------------------------------------------------------------------------------------ helpers
def _one_list(preds: Tensor, target: Tensor, name: str) -> tuple[Tensor, Tensor]:
    """torchmetrics' functional checks of one query's documents: tensors of one shape, non-empty, non-scalar."""
    for arg, value in (("preds", preds), ("target", target)):
        if not isinstance(value, Tensor):
            raise TypeError(f"{name}: {arg} must be a torch.Tensor, got {type(value).__name__}")
    if preds.shape != target.shape:
        raise ValueError(
            f"`preds` and `target` must be of the same shape, got {tuple(preds.shape)} and {tuple(target.shape)}"
        )
    if preds.ndim == 0 or preds.numel() == 0:
        raise ValueError("`preds` and `target` must be non-empty and non-scalar tensors")
    return preds, target


def _one_query(cls: type[_Retrieval], preds: Tensor, target: Tensor, **options: Any) -> Tensor:
    """A torchmetrics functional retrieval metric: the compat class on one query (the same numbers)."""
    _one_list(preds, target, cls.__name__)  # torchmetrics' functional checks: same shape, non-empty, non-scalar
    metric = cls(**options).to(preds.device)
    metric.update(preds, target, torch.zeros(preds.shape, dtype=torch.long, device=preds.device))
    return metric.compute()


def _check_documents(preds: Tensor, target: Tensor, indexes: Tensor | None) -> None:
    """torchmetrics' checks of a retrieval update's flat input, shared by every compat class: ``indexes``
    given, three tensors of one shape, float scores."""
    if indexes is None:
        raise ValueError("Argument `indexes` cannot be None: pass the integer query id of every document")
    for name, value in (("preds", preds), ("target", target), ("indexes", indexes)):
        if not isinstance(value, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if not (indexes.shape == preds.shape == target.shape):
        raise ValueError(
            "`indexes`, `preds` and `target` must be of the same shape, got "
            f"{tuple(indexes.shape)}, {tuple(preds.shape)} and {tuple(target.shape)}"
        )
    if not preds.is_floating_point():
        raise ValueError(f"`preds` must be a tensor of floats, got {preds.dtype}")


def _flat_documents(
    preds: Tensor, target: Tensor, indexes: Tensor, ignore_index: int | None, name: str
) -> tuple[Tensor, Tensor, Tensor]:
    """torchmetrics' checks of a curve's input: float scores, binary target (long), long ids, flattened."""
    _check_documents(preds, target, indexes)
    if indexes.is_floating_point() or indexes.dtype == torch.bool or indexes.is_complex():
        raise ValueError(f"`indexes` must be a tensor of integers, got {indexes.dtype}")
    preds, target, indexes = preds.reshape(-1).float(), target.reshape(-1), indexes.reshape(-1).long()
    if ignore_index is not None:
        keep = target != ignore_index
        preds, target, indexes = preds[keep], target[keep], indexes[keep]
    if preds.numel() == 0:
        raise ValueError("`indexes`, `preds` and `target` must be non-empty (after dropping `ignore_index`)")
    if not bool(torch.isfinite(preds).all()):
        raise ValueError(f"{name}: preds must be finite (NaN or infinite scores cannot be ranked)")
    if bool((target.max() > 1) | (target.min() < 0)):
        raise ValueError(f"`target` must contain `binary` values (0 or 1) for {name}")
    return preds, target.long(), indexes


def _curves(
    preds: Tensor, target: Tensor, indexes: Tensor, max_k: int, adaptive_k: bool
) -> tuple[Tensor, Tensor, Tensor]:
    """``(Q, max_k)`` precision and recall at ``1..max_k`` of the queries of the flat documents (grouped
    by ``indexes``, sorted; each query's documents in their order here) and ``(Q,)`` whether a query has
    no relevant document, through the library's plan: precision@k and recall@k of one ranking, each
    query's top ``min(max_k, n)`` by ``torch.topk`` on its own scores (``ties="torch_topk"`` with
    ``torch.topk``'s k fixed at ``max_k``: rows of one length in one 2-D call, see
    :mod:`torch_rankeval.ranking.view`), no score threshold, ``adaptive_k`` as the convention's."""
    conv = replace(resolve_convention(None, ties="torch_topk", adaptive_k=adaptive_k), torch_topk_k=max_k)
    cutoffs = range(1, max_k + 1)
    plan = MeasurePlan([Measure("precision", k) for k in cutoffs] + [Measure("recall", k) for k in cutoffs], conv)
    _, buckets = group_by_query_buckets(indexes, preds, target)
    parts = [(rows, *plan.values(p, t, mask=mask, validate_args=False)[:2]) for rows, mask, (p, t) in buckets]
    back = torch.argsort(torch.cat([rows for rows, _, _ in parts]))  # the buckets' queries in query-id order
    values = torch.cat([v for _, v, _ in parts]).index_select(0, back)
    empty = torch.cat([e for _, _, e in parts]).index_select(0, back)
    return values[:, :max_k], values[:, max_k:], empty[:, max_k]  # recall's flag: no relevant document


def _aggregate(values: Tensor, aggregation: Aggregation) -> Tensor:
    """torchmetrics' ``_retrieval_aggregate`` over the queries (``dim=0``)."""
    if callable(aggregation):
        return aggregation(values, dim=0)
    if aggregation == "mean":
        return values.mean(dim=0)
    return getattr(values, aggregation)(dim=0).values  # median, min or max


def _recall_at_fixed_precision(
    precision: Tensor, recall: Tensor, top_k: Tensor, min_precision: float
) -> tuple[Tensor, Tensor]:
    """The largest recall among the cutoffs of precision ``>= min_precision`` and, among equal recalls,
    the largest cutoff; ``(0, len(top_k))`` when there is none or that recall is 0 (torchmetrics' rule)."""
    ok = precision >= min_precision
    if not bool(ok.any()):
        return torch.zeros((), device=recall.device, dtype=recall.dtype), torch.tensor(len(top_k))
    best = recall[ok].max()
    if best == 0:
        return best, torch.tensor(len(top_k), device=top_k.device, dtype=top_k.dtype)
    return best, top_k[ok & (recall == best)].max()
