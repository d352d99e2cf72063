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

from torch_rankeval.conventions import PRESETS, Convention
from torch_rankeval.metrics.base import RankingMetrics

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
