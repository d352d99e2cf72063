"""The streaming ranking metric: rank each batch once, keep running sums, sync with one all-reduce.

:class:`RankingMetrics` computes any number of metrics and cutoffs from one ranking per update; the
single-metric classes (:class:`~torch_rankeval.NDCG`, :class:`~torch_rankeval.MAP`, ...) are thin
specialisations of it.

States. Padded input is reduced at once into two small states, ``sums`` (float64) and ``counts``
(int64), one entry per reported value, both with ``dist_reduce_fx="sum"``: memory does not grow with
the number of queries and a distributed sync is a single all-reduce of ``2 x values`` numbers (the
running-mean machinery of :class:`~torch_rankeval.metrics._running.RunningMeanMetric`). Flat
(torchmetrics-style) input whose queries may be split across updates is kept as flat tensors and
grouped at ``compute``. ``keep_per_query=True`` also keeps one row of values per query.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Callable, ClassVar

import torch
from torch import Tensor
from torchmetrics.utilities.data import dim_zero_cat

from torch_rankeval.conventions import (
    TORCH_TIES,
    Convention,
    discount_table,
    gain_table,
    mapped_gain,
    resolve_convention,
)
from torch_rankeval.measures import MeasurePlan, parse_measures
from torch_rankeval.metrics._compiled import compiled_kernel
from torch_rankeval.metrics._options import check_metric_options, check_read_options
from torch_rankeval.metrics._running import RunningMeanMetric
from torch_rankeval.metrics._strata import check_integer_tensor
from torch_rankeval.ranking.flat import group_by_query_buckets
from torch_rankeval.ranking.inputs import SCORES_NOT_FINITE, check_preds_target, check_values, parse_k
from torch_rankeval.ranking.sparse import is_sparse
from torch_rankeval.ranking.subtopics import is_subtopic_target
from torch_rankeval.ranking.view import keep_outside

__all__ = ["RankingMetrics", "check_list_ids"]

INPUT_FORMATS = ("auto", "padded", "flat")
_ONE_LIST = (
    "1-D preds without indexes=: pass indexes= (the integer query id of every document, as in torchmetrics: "
    "update(preds, target, indexes=query_ids)); for one list pass a (1, L) batch (preds[None], target[None]), "
    "indexes=torch.zeros_like(preds, dtype=torch.long), or build the metric with input_format='padded'"
)
_FLAT_STATES = {  # name -> dtype, fixed so that every rank gathers the same dtype
    "flat_preds": torch.float64,
    "flat_target": torch.float32,
    "flat_indexes": torch.int64,
}


def _plan(metrics: str | Sequence[str], k: Any, convention: Convention) -> MeasurePlan:
    """The measure plan of ``metrics`` (any spelling of the registry) with default cutoffs ``k``."""
    if isinstance(metrics, str):
        metrics = (metrics,)
    if not isinstance(metrics, Sequence) or len(metrics) == 0:
        raise ValueError("metrics must be a non-empty sequence of metric names such as ('ndcg', 'map@10')")
    for entry in metrics:
        if not isinstance(entry, str):
            raise TypeError(f"metrics entries must be strings such as 'ndcg', 'ndcg@10' or 'nDCG@10', got {entry!r}")
    ks, _ = parse_k(k)
    measures = parse_measures(metrics, cutoffs=ks)
    # a nickname's run tag and relstring: nothing to compute on tensors (asked for by name, they raise)
    given = {m.strip() for m in metrics}
    measures = [m for m in measures if m.family.kernel is not None or m.label in given]
    labels = [m.label for m in measures]
    duplicated = sorted({label for label in labels if labels.count(label) > 1})
    if duplicated:
        raise ValueError(f"metrics {duplicated} name different measures with the same key; spell them apart")
    return MeasurePlan(measures, convention)


def _input_options(
    convention: str | Convention | None,
    overrides: Mapping[str, Any],
    *,
    input_format: str,
    ignore_index: Any,
    flags: Mapping[str, Any],
) -> Convention:
    """The convention of a metric that reads input as :class:`RankingMetrics` does: ``convention``
    with the ``overrides`` its ``__init__`` takes (each passed by name), after the checks of its input
    options: ``input_format``, the bool ``flags`` (name -> value), ``ignore_index``."""
    resolved = resolve_convention(convention, **overrides)
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"input_format={input_format!r} is not valid: use one of {INPUT_FORMATS}")
    for flag, value in flags.items():
        if not isinstance(value, bool):
            raise TypeError(f"{flag} must be a bool, got {type(value).__name__}")
    if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, float))):
        raise TypeError(f"ignore_index must be an int grade value marking padding, got {ignore_index!r}")
    return resolved


class RankingMetrics(RunningMeanMetric):
    """Many ranking metrics at many cutoffs from one ranking per update, as a streaming torchmetrics Metric.

    Args:
        metrics: metric names, each optionally with its own cutoff: ``"ndcg"``, ``"dcg"``, ``"idcg"``,
            ``"map"`` (average precision), ``"mrr"``, ``"precision"``, ``"recall"``, ``"hit_rate"``,
            ``"r_precision"`` (aliases: ``"ap"``, ``"rr"``, ``"p"``, ``"r"``, ``"success"``, ...);
            ``"ndcg@10"`` fixes the cutoff of that entry.
        k: cutoffs for entries without ``@``: None (whole list), an int or a sequence of ints.
        gain, log_base, discount, ties, relevance_threshold, empty_target_action, denominator, graded,
            adaptive_k, min_k_relevant, ideal_ranking, convention: the conventions of :mod:`torch_rankeval.conventions` (a preset
            name such as ``"trec_eval"`` plus overrides), shared by all metrics.
        ignore_index: a grade value in ``target`` that marks padding.
        input_format: ``"auto"`` (2-D input is padded; 1-D input is flat and needs ``indexes``: without
            them, and without a padded-only argument such as ``mask``, it is an error, not one giant
            query; one list is a ``(1, L)`` batch), ``"padded"`` (1-D input is one list) or ``"flat"``
            (then ``indexes`` is required).
        whole_queries: flat input only: every update holds all documents of its queries, so each
            update is grouped and reduced at once and only sums are kept. Default False
            (torchmetrics' semantics: documents of one query may arrive in several updates).
        keep_per_query: also keep each query's values and id for :meth:`compute_per_query`.
        strata: None (default) or the number of strata ``S``: every ``update`` then takes
            ``strata=`` (an integer ``0 <= h < S`` per query: a query-frequency bucket, a traffic
            segment) and ``compute`` adds ``"<key>/poststratified"`` (``sum_h W_h * mean_h``) and
            ``"<key>/stratum/<h>"`` (see "Strata and post-stratification" in the monitoring guide).
        stratum_weights: the population share ``W_h`` of each stratum (``S`` floats >= 0 summing
            to 1); None (default): the observed shares ``n_h / n``, with which the post-stratified
            mean equals the plain mean (its error is then the within-strata error).
        validate_args: run the checks that read values (NaN/inf scores, ...). With False, ``update``
            on padded input has no host sync and compiles with ``torch.compile(fullgraph=True)``.
        compile: run the padded update's ranking and metric kernels through
            ``torch.compile(fullgraph=True)`` (compiled on the first update, again once when the batch
            shape first changes, then with dynamic shapes). Fewer, fused kernels: worth it for many
            small batches, and on the GPU. The checks of ``validate_args=True`` still run eagerly
            first (one host sync). Flat input is not compiled.
        window: also report the values of the last ``window`` updates (or lists, see
            ``window_unit``) of each process, as ``"window/<key>"`` (``"window/<key>/stderr"`` with
            ``compute(stderr=True)``). A ring buffer of ``window x values`` float64 sums, sums of
            squares and counts; no per-query storage, no host sync. Flat input needs
            ``whole_queries=True`` (its values are known at ``update`` only then). Default None.
        half_life: also report exponentially decayed means, ``"decay/<key>"``: each list weighs
            ``2 ** (-age / half_life)``, its age counted in updates (or lists) since it arrived;
            O(values) state. Default None. See :mod:`torch_rankeval.metrics._window` and the
            monitoring guide.
        window_unit: what ``window`` and ``half_life`` count: ``"updates"`` (default) or
            ``"queries"`` (lists, in row order within an update).
        kwargs: torchmetrics' ``Metric`` options (``process_group``, ``sync_on_compute``, ...); any
            other keyword is a ``TypeError`` naming it.

    Query ids must be global. Flat input groups documents by ``indexes`` over all updates and, under
    ``torch.distributed``, over all processes: the same id on two ranks is ONE query (its documents
    may be split across ranks); two different queries that reuse an id are silently merged, as in
    torchmetrics. Give each query a globally unique id (e.g. ``rank + world_size * local_id``). Ids
    this class generates for padded input are global in that way.

    ``compute`` returns a flat dict ``{"ndcg@5": ..., "map@10": ..., "mrr": ...}`` (float32 by default)
    that ``LightningModule.log_dict`` takes as is: the mean over queries under
    ``empty_target_action``. With no query counted (nothing updated, or every query skipped) a value
    is NaN and a ``UserWarning`` says why: a mean over nothing is undefined, and 0 would read as a
    real score.

    Example:
        >>> import torch
        >>> from torch_rankeval import RankingMetrics
        >>> metric = RankingMetrics(metrics=("ndcg", "map", "mrr"), k=(1, 3))
        >>> metric.update(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[0, 2, 1]]))
        >>> metric.update(torch.tensor([[0.2, 0.8, 0.4]]), torch.tensor([[1, 0, 0]]))
        >>> {name: round(v.item(), 4) for name, v in metric.compute().items()}
        {'ndcg@1': 0.0, 'ndcg@3': 0.5795, 'map@1': 0.0, 'map@3': 0.4583, 'mrr@1': 0.0, 'mrr@3': 0.4167}
    """

    _list_states: ClassVar[dict[str, torch.dtype]] = {**_FLAT_STATES, **RunningMeanMetric._list_states}
    _fixed_dtype_tensors: ClassVar[tuple[str, ...]] = ("_discounts", "_gain_keys", "_gain_values")

    convention: Convention
    plan: MeasurePlan
    ignore_index: int | float | None
    input_format: str
    whole_queries: bool
    validate_args: bool
    #: ``compile=True``: ``update`` runs one compiled kernel (the flag shadows ``nn.Module.compile``)
    compile: bool  # type: ignore[assignment]

    def __init__(
        self,
        metrics: str | Sequence[str] = ("ndcg", "map", "mrr"),
        k: int | Sequence[int] | None = None,
        *,
        gain: Any = None,
        log_base: float | None = None,
        discount: Callable[[Tensor], Tensor] | None = None,
        ties: str | None = None,
        relevance_threshold: float | None = None,
        empty_target_action: str | None = None,
        denominator: str | None = None,
        graded: bool | None = None,
        adaptive_k: bool | None = None,
        min_k_relevant: bool | None = None,
        ideal_ranking: str | None = None,
        convention: str | Convention | None = None,
        ignore_index: int | None = None,
        input_format: str = "auto",
        whole_queries: bool = False,
        keep_per_query: bool = False,
        strata: int | None = None,
        stratum_weights: Sequence[float] | Tensor | None = None,
        validate_args: bool = True,
        compile: bool = False,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        if "top_k" in kwargs:  # torchmetrics' spelling
            raise TypeError(
                f"{type(self).__name__} takes the cutoff as k= (e.g. k=10), not top_k=; for torchmetrics' signatures and "
                "numbers use torch_rankeval.compat.torchmetrics (RetrievalNormalizedDCG(top_k=10), RetrievalMAP, ...)"
            )
        check_metric_options(self, kwargs)
        super().__init__(**kwargs)
        overrides = dict(
            gain=gain,
            log_base=log_base,
            discount=discount,
            ties=ties,
            relevance_threshold=relevance_threshold,
            empty_target_action=empty_target_action,
            denominator=denominator,
            graded=graded,
            adaptive_k=adaptive_k,
            min_k_relevant=min_k_relevant,
            ideal_ranking=ideal_ranking,
        )
        self.convention = _input_options(
            convention,
            overrides,
            input_format=input_format,
            ignore_index=ignore_index,
            flags=dict(
                whole_queries=whole_queries,
                keep_per_query=keep_per_query,
                validate_args=validate_args,
                compile=compile,
            ),
        )
        if (window is not None or half_life is not None) and input_format == "flat" and not whole_queries:
            raise ValueError(
                "window= and half_life= need the values at each update: flat input without whole_queries=True is "
                "grouped at compute; pass whole_queries=True (every update holds whole queries) or padded input"
            )
        self.plan = _plan(metrics, k, self.convention)
        check_read_options(self, self.plan.measures, overrides)
        if ignore_index is not None and self.plan.subtopics:
            raise TypeError(self.plan.no_ignore_index())
        self.ignore_index = ignore_index
        self.input_format = input_format
        self.whole_queries = whole_queries
        self.validate_args = validate_args
        self.compile = compile
        self._add_running_states(
            self.plan.labels,
            empty_target_action=self.convention.empty_target_action,
            keep_per_query=keep_per_query,
            aggregates=self.plan.aggregates,
            all_skipped=self.convention.all_skipped,
            strata=strata,
            stratum_weights=stratum_weights,
            window=window,
            half_life=half_life,
            window_unit=window_unit,
            config={
                "convention": self.convention,
                "measures": self.plan.measures,
                "ignore_index": ignore_index,
                "input_format": input_format,
                "whole_queries": whole_queries,
            },
        )
        self._register_tables()

    # ------------------------------------------------------------------ tables
    def _register_tables(self) -> None:
        """Device-resident tables of the convention: non-persistent buffers that follow ``.to(device)``."""
        self.register_buffer(
            "_discounts", discount_table(64, self.convention, dtype=torch.float64, device="cpu"), persistent=False
        )
        if isinstance(self.convention.gain, Mapping):
            keys, values = gain_table(self.convention.gain)
            self.register_buffer("_gain_keys", torch.tensor(keys, dtype=torch.float64), persistent=False)
            self.register_buffer("_gain_values", torch.tensor(values, dtype=torch.float64), persistent=False)
        else:
            self._gain_keys = self._gain_values = None

    def _discount_table(self, length: int) -> Tensor:
        """The discount table, grown (doubling) when a longer list arrives."""
        if length > self._discounts.shape[0]:
            size = 1 << (length - 1).bit_length()
            device = self._discounts.device  # an ordinary tensor, even inside the caller's inference mode
            self._discounts = keep_outside(
                lambda: discount_table(size, self.convention, dtype=torch.float64, device=device)
            )
        return self._discounts

    def _gain(self) -> Callable[[Tensor], Tensor] | None:
        if self._gain_keys is None:
            return None
        keys, values = self._gain_keys, self._gain_values
        return lambda t: mapped_gain(t, keys, values)

    # ------------------------------------------------------------------ update
    def update(
        self,
        preds: Tensor,
        target: Tensor,
        indexes: Tensor | None = None,
        *,
        mask: Tensor | None = None,
        ideal_target: Tensor | None = None,
        n_relevant: Tensor | None = None,
        judged: Tensor | None = None,
        exclude: Tensor | None = None,
        strata: Tensor | None = None,
        weights: Tensor | None = None,
    ) -> None:
        """Add a batch.

        Args:
            preds: ``(N, L)`` padded lists, or ``(D,)`` flat documents with ``indexes`` (``(L,)`` is one
                list only with ``input_format="padded"``).
            target: grades, same shape as ``preds``; or, for the intent-aware measures (``alpha_nDCG@20``,
                ``ERR_IA@20``, ...), subtopic grades ``(N, L, S)`` (dense or sparse COO; see
                :mod:`torch_rankeval.ranking.subtopics`).
            indexes: flat input: ``(D,)`` integer query id of each document (required). Padded
                input: optional ``(N,)`` global query ids, used by ``keep_per_query``.
            mask: padded input: bool, False marks padding.
            ideal_target: padded input: ``(N, M)`` grades of all judged documents of each query
                (``(N, M, S)`` with a subtopic target).
            n_relevant: padded input: ``(N,)`` number of relevant documents of each query.
            judged: padded input: ``(N, L)`` bool, False for documents without a relevance judgment
                (never relevant, no gain; read by ``bpref``, ``Judged@k`` and the like).
            exclude: padded input: ``(N, L)`` bool, dense or sparse, True for items never ranked and
                never counted (seen in training); ``target`` may then be a torch sparse ``(N, L)``
                tensor (absent = grade 0). See "Recommender evaluation over the full catalogue".
            strata: metrics created with ``strata=S`` (and only those): the integer stratum
                ``0 <= h < S`` of each query, ``(N,)`` for padded input; flat input needs
                ``whole_queries=True`` and gives ``(D,)``, the stratum of each document's query
                (the same for all documents of a query). The range is checked with
                ``validate_args`` (one host sync); without, an out-of-range stratum is an error
                of ``index_add_`` on CPU and a device-side assert on CUDA.
            weights: padded input: ``(N, L)`` float per-document weights, read by ``arp`` and ``opa``
                (TF-Ranking's per-example weights; see :func:`~torch_rankeval.functional.evaluate`);
                a metric with any other measure refuses them (``TypeError``).
        """
        flat, checked = self._read_input(
            preds, target, indexes, exclude=exclude, mask=mask, ideal_target=ideal_target, n_relevant=n_relevant,
            weights=weights, judged=judged,
        )  # fmt: skip
        if weights is not None:
            self.plan.check_weights_read()  # eagerly: not from inside a compiled update
        if flat:
            self._update_flat(preds, target, indexes, strata)
        else:
            if strata is not None or self.strata is not None:  # no call for the common metric without strata
                n = 1 if preds.ndim == 1 else preds.shape[0]
                strata = self._check_update_strata(strata, n, preds, validate=self.validate_args)
            if self.compile and exclude is None and checked:  # checked: a dense target without a subtopic axis
                self._compiled_update(preds, target, mask, ideal_target, n_relevant, judged, indexes, strata, weights)
                return
            values, empty = self._batch(
                preds, target, mask, ideal_target, n_relevant, judged, exclude, weights=weights, checked=checked
            )
            self._accumulate(values, empty, indexes, strata)

    def _read_input(
        self, preds: Tensor, target: Tensor, indexes: Tensor | None, *, exclude: Tensor | None, **padded_only: Any
    ) -> tuple[bool, bool]:
        """The input stage of an ``update`` (this class's, and every class that reads input as it does,
        such as :class:`~torch_rankeval.PositionProfile`): the checks of the tensors, the device and the
        layout, then whether the input is flat, and whether ``preds``, ``target`` and ``mask`` passed
        :func:`~torch_rankeval.ranking.inputs.check_preds_target` (a dense target without a subtopic
        axis and no ``exclude``: the plan does not check them again). ``padded_only``: the arguments of
        padded input that the class takes, by name (``mask``, ``ideal_target``, ...); any of them makes
        a 1-D input one padded list, and none may come with flat input. Shapes and None only: no host sync."""
        catalogue = exclude is not None or is_sparse(target)
        subtopic = not catalogue and is_subtopic_target(preds, target)  # only read when not catalogue
        checked = not catalogue and not subtopic
        if catalogue:
            self._check_catalogue(preds, target, padded_only.get("mask"), indexes)
        elif checked:  # a subtopic target (N, L, S) is checked by the plan (ranking.subtopics)
            check_preds_target(preds, target, padded_only.get("mask"))
        if isinstance(preds, Tensor) and preds.device != self.sums.device:
            self._check_device(preds)  # raises
        padded = False  # a padded-only argument given (a loop, not a generator: the update's Python calls)
        for value in padded_only.values():
            padded = padded or value is not None
        if self.input_format == "auto" and preds.ndim == 1 and indexes is None and not padded:
            raise ValueError(_ONE_LIST)  # shapes and None only: no host sync
        # _is_flat reads indexes= and input_format='flat' only (no call otherwise: an update's hot path)
        flat = not catalogue and (indexes is not None or self.input_format == "flat") and self._is_flat(preds, indexes)
        if flat and subtopic:
            raise ValueError(
                "flat input cannot carry a subtopic axis: pass padded (N, L) preds with an (N, L, S) target"
            )
        if flat and padded:
            names = list(padded_only)
            raise ValueError(
                f"{', '.join(names[:-1])} and {names[-1]} apply to padded (N, L) input; flat input takes preds, "
                "target and indexes (use ignore_index to drop documents)"
            )
        return flat, checked

    def _check_catalogue(self, preds: Tensor, target: Tensor, mask: Tensor | None, indexes: Tensor | None) -> None:
        """Inputs of a catalogue update (sparse target or ``exclude``): ``(N, L)`` scores, padded layout."""
        if not isinstance(preds, Tensor) or preds.ndim != 2:
            raise ValueError("a sparse target or exclude= needs (N, L) preds: one row of scores per list (user)")
        if self.input_format == "flat":
            raise ValueError("a sparse target or exclude= needs padded (N, L) input, not input_format='flat'")
        if indexes is not None:
            self._is_flat(preds, indexes)  # checks the (N,) ids
        if not is_sparse(target) and not is_subtopic_target(preds, target):
            check_preds_target(preds, target, mask)

    def _is_flat(self, preds: Tensor, indexes: Tensor | None) -> bool:
        if indexes is not None:
            check_integer_tensor("indexes", indexes, preds, "integer query ids", "of query ids")
        if self.input_format == "flat" or (self.input_format == "auto" and preds.ndim == 1 and indexes is not None):
            if preds.ndim != 1:
                raise ValueError(
                    f"flat input must be 1-D (one entry per document), got preds of shape {tuple(preds.shape)}"
                )
            if indexes is None:
                raise ValueError(
                    "indexes is required for flat input: pass the integer query id of every document, "
                    "update(preds, target, indexes=query_ids)"
                )
            if indexes.shape != preds.shape:
                raise ValueError(
                    f"indexes must have the shape of preds {tuple(preds.shape)} for flat input, got {tuple(indexes.shape)}"
                )
            return True
        if indexes is not None:
            _check_list_shape(indexes, preds)
        return False

    def _batch(
        self, preds, target, mask, ideal_target, n_relevant, judged=None, exclude=None, *, weights=None, checked=False
    ) -> tuple[Tensor, Tensor]:  # noqa: ANN001
        """Per-query values ``(N, V)`` of every reported key and their empty flags (the one evaluation loop);
        ``checked``: the input stage ran ``check_preds_target`` on ``preds``, ``target`` and ``mask``.

        Eagerly, the values are computed under ``torch.inference_mode()``, whose operations skip
        autograd's dispatch and version counters (a tied 256 x 64 ``RankingMetrics`` update: 5-15%
        less time on CPU, most of it per-operation overhead, which a GPU update pays too); under
        ``torch.compile``, as they are. The inference tensors it makes never stay in the metric as they
        are: the running states take them through ordinary operations outside it (a kept row is copied,
        ``_running._ordinary``), and the tables kept across calls are built outside it
        (:func:`~torch_rankeval.ranking.view.keep_outside`), as the grown discount buffer is."""
        length = preds.shape[-1] if ideal_target is None else max(preds.shape[-1], _ideal_length(preds, ideal_target))
        discounts = self._discounts if length <= self._discounts.shape[0] else self._discount_table(length)  # kept
        with contextlib.nullcontext() if torch.compiler.is_compiling() else torch.inference_mode():  # values_mode
            values, empty, _ = self.plan.values(
                preds,
                target,
                mask=mask,
                ignore_index=self.ignore_index,
                ideal_target=ideal_target,
                n_relevant=n_relevant,
                judged=judged,
                validate_args=self.validate_args,
                discounts=discounts,
                gain=None if self._gain_keys is None else self._gain(),
                exclude=exclude,
                weights=weights,
                checked=checked,
            )
        return values, empty

    # ------------------------------------------------------------------ compile=True
    def _compiled_update(
        self,
        preds: Tensor,
        target: Tensor,
        mask: Tensor | None,
        ideal_target: Tensor | None,
        n_relevant: Tensor | None,
        judged: Tensor | None,
        ids: Tensor | None,
        strata: Tensor | None = None,
        weights: Tensor | None = None,
    ) -> None:
        """The padded update through one compiled kernel: the plan's values (validate_args=False),
        the empty-list policy and the per-value sums (the running states get two in-place adds). The
        value checks run eagerly first. Per-query rows and ``empty_target_action="error"`` take the
        values out of the kernel and go through ``_accumulate``."""
        if self.validate_args:
            check_values(
                preds,
                target,
                convention=self.convention,
                mask=mask,
                ignore_index=self.ignore_index,
                ideal_target=ideal_target,
                n_relevant=n_relevant,
                judged=judged,
                uses_gain=self.plan.uses_gain,
                gain=self._gain(),
                weights=weights,
                checked=True,  # by the input stage (_read_input): a dense target, no subtopic axis
            )
        if preds.ndim > 1 and preds.shape[0] == 0:
            # No list: a no-op (as in the eager update, it adds nothing and takes no window slot).
            # Not run through the kernel, which dynamo would recompile for a size-0 batch (a size 0
            # is always specialised): seconds of compiling for nothing, and one of the
            # recompilations the kernel's code object may have. A shape, not a value: no host sync.
            return
        length = preds.shape[-1] if ideal_target is None else max(preds.shape[-1], _ideal_length(preds, ideal_target))
        reduce = (
            not self.keep_per_query and self.empty_target_action != "error" and strata is None and not self._per_query
        )
        plan, ignore_index, reduction = self.plan, self.ignore_index, self._reduction

        def build() -> Callable:
            def kernel(
                preds, target, mask, ideal_target, n_relevant, judged, discounts, gain_keys, gain_values, weights
            ):  # noqa: ANN001, ANN202
                gain = None if gain_keys is None else (lambda t: mapped_gain(t, gain_keys, gain_values))
                values, empty, _ = plan.values(
                    preds,
                    target,
                    mask=mask,
                    ignore_index=ignore_index,
                    ideal_target=ideal_target,
                    n_relevant=n_relevant,
                    judged=judged,
                    validate_args=False,
                    discounts=discounts,
                    gain=gain,
                    weights=weights,
                    checked=True,
                )
                if not reduce:
                    return values, empty
                return reduction.moments(values, empty)  # the metric's one reduction, inside the kernel

            return kernel

        out = compiled_kernel(self, build)(
            preds,
            target,
            mask,
            ideal_target,
            n_relevant,
            judged,
            self._discount_table(length),
            self._gain_keys,
            self._gain_values,
            weights,
        )
        if reduce:
            self._add_moments(out[0], out[1], out[2], preds.shape[0] if preds.ndim > 1 else 1)
            return
        values, empty = out
        self._accumulate(values, empty, ids, strata)

    def _update_flat(self, preds: Tensor, target: Tensor, indexes: Tensor, strata: Tensor | None = None) -> None:
        if self.strata is not None and not self.whole_queries:
            raise ValueError(
                "strata with flat input needs whole_queries=True (every update holds all documents of its queries): "
                "create the metric with whole_queries=True, or pass padded (N, L) input with one stratum per list"
            )
        strata = self._check_update_strata(strata, preds.shape[0], preds, validate=self.validate_args)
        if self.ignore_index is not None:
            keep = target != self.ignore_index
            preds, target, indexes = preds[keep], target[keep], indexes[keep]
            strata = None if strata is None else strata[keep]
        if self.validate_args and preds.numel() and not bool(torch.isfinite(preds).all()):
            raise ValueError(SCORES_NOT_FINITE)
        if self.whole_queries:
            if preds.numel():
                self._add_flat_batch(preds, target, indexes, accumulate=True, strata=strata)
            return
        if self._windowed:
            raise ValueError(
                "window= and half_life= need the values at each update: this flat input is grouped at compute "
                "(documents of a query may come in several updates); create the metric with whole_queries=True "
                "(every update holds whole queries) or pass padded (N, L) input"
            )
        self.flat_preds.append(preds.to(torch.float64))
        self.flat_target.append(target.to(torch.float32))
        self.flat_indexes.append(indexes.to(torch.int64))

    def _conventions(self) -> list[Convention]:
        """The conventions the batch is ranked under (the plan's; one for a position profile)."""
        return self.plan.conventions

    def _add_flat_batch(self, preds: Tensor, target: Tensor, indexes: Tensor, *, accumulate: bool, strata=None):  # noqa: ANN001
        if any(c.ties in TORCH_TIES for c in self._conventions()):
            # torchmetrics groups by an unstable torch.sort of the ids, which reorders the documents of a
            # query, and its torch.topk / argsort order of tied scores depends on that order: group likewise
            perm = torch.sort(indexes).indices
            preds, target, indexes = preds[perm], target[perm], indexes[perm]
            strata = None if strata is None else strata[perm]
        # Queries in length buckets, each padded to its own longest: memory follows the documents.
        ids, buckets = group_by_query_buckets(indexes, preds, target)
        # an update's buckets come from documents its input stage checked: the plan does not check them again
        parts = [(rows, *self._batch(p, t, mask, None, None, checked=accumulate)) for rows, mask, (p, t) in buckets]
        if len(parts) == 1:
            _, values, empty = parts[0]
        else:  # back in query-id order
            back = torch.argsort(torch.cat([r for r, _, _ in parts]))
            values = torch.cat([v for _, v, _ in parts]).index_select(0, back)
            empty = torch.cat([e for _, _, e in parts]).index_select(0, back)
        if accumulate:
            self._accumulate(values, empty, ids, None if strata is None else self._query_strata(ids, indexes, strata))
            return None
        return values, empty, ids

    def _query_strata(self, ids: Tensor, indexes: Tensor, strata: Tensor) -> Tensor:
        """The stratum of each query of ``ids`` (sorted) from its documents' ``strata``; with
        ``validate_args``, every document of a query must give the same stratum."""
        rows = torch.searchsorted(ids, indexes)
        per_query = torch.zeros(ids.shape[0], dtype=torch.int64, device=ids.device)
        per_query.scatter_reduce_(0, rows, strata, reduce="amax", include_self=False)
        if self.validate_args:
            low = torch.zeros_like(per_query).scatter_reduce_(0, rows, strata, reduce="amin", include_self=False)
            if bool((low != per_query).any()):
                raise ValueError(
                    "strata must be the same for every document of a query (flat input gives the stratum of each "
                    "document's query); some query's documents carry different strata"
                )
        return per_query

    # ------------------------------------------------------------------ results
    def _pending(self) -> tuple[Tensor, Tensor, Tensor] | None:
        """Values of the flat documents kept for ``compute`` (grouped now, over all updates/ranks)."""
        if isinstance(self.flat_preds, list) and not self.flat_preds:
            return None
        preds, target, indexes = (dim_zero_cat(s) for s in (self.flat_preds, self.flat_target, self.flat_indexes))
        if preds.numel() == 0:
            return None
        return self._add_flat_batch(preds, target, indexes.long(), accumulate=False)

    def compute(self, stderr: bool = False) -> dict[str, Tensor]:
        """Mean of each metric over all queries (all processes, after sync), as ``{key: scalar}``;
        with ``window`` / ``half_life`` also ``"window/<key>"`` / ``"decay/<key>"``, the means of the
        recent lists (and their errors with ``stderr``).

        Args:
            stderr: also report, beside each key, its standard error over the counted queries under
                ``"<key>/stderr"``: ``sqrt(var / n)`` with the ``ddof=1`` variance, as
                ``scipy.stats.sem`` of the per-query values (skipped queries not counted); NaN
                under 2 counted queries. Sums (``num_rel``): ``n`` times the error of their mean;
                geometric means (``gm_map``): the delta method ``gm * sem(log(max(v, 1e-5)))``.
                From one running sum of squares per value (synced with the sums in one all-reduce).

        Example:
            >>> import torch
            >>> from torch_rankeval import RankingMetrics
            >>> metric = RankingMetrics(("mrr",))
            >>> metric.update(torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.3, 0.6]]), torch.tensor([[1, 0], [1, 0], [1, 1]]))
            >>> {k: round(v.item(), 4) for k, v in metric.compute(stderr=True).items()}   # sem([1, 0.5, 1])
            {'mrr': 0.8333, 'mrr/stderr': 0.1667}
        """
        return self._with_stderr(stderr)


def check_list_ids(indexes: Any, preds: Tensor) -> None:
    """``indexes`` of padded input: an integer tensor of one id per list, ``(N,)`` (``()`` or ``(1,)``
    for one ``(L,)`` list), on the device of ``preds``; the messages of every metric that takes list ids.

    Example:
        >>> check_list_ids(torch.tensor([3, 4, 5]), torch.zeros(2, 4))
        Traceback (most recent call last):
        ...
        ValueError: for padded input indexes holds one id per list (its query id): shape (2,), got (3,)
    """
    check_integer_tensor("indexes", indexes, preds, "integer query ids", "of query ids")
    _check_list_shape(indexes, preds)


def _check_list_shape(indexes: Tensor, preds: Tensor) -> None:
    n = 1 if preds.ndim == 1 else preds.shape[0]
    if indexes.shape not in ((n,), () if preds.ndim == 1 else (n,)):
        raise ValueError(
            f"for padded input indexes holds one id per list (its query id): shape ({n},), got {tuple(indexes.shape)}"
        )


def _ideal_length(preds: Tensor, ideal_target: Tensor) -> int:
    """``M``, the judged documents of ``ideal_target`` (``(N, M)``, or ``(N, M, S)`` with subtopics)."""
    if not isinstance(ideal_target, Tensor) or not isinstance(preds, Tensor) or ideal_target.ndim == 0:
        return 0
    return ideal_target.shape[min(preds.ndim, ideal_target.ndim) - 1]
