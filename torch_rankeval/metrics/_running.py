"""The running-mean machinery shared by every streaming metric of the library.

:class:`RunningMeanMetric` keeps one running sum and one count per reported value, applies the
empty-list policy, computes the means, keeps optional per-query rows, and syncs all sums across
processes with ONE all-reduce. Subclasses only turn a batch into per-list values ``(N, V)`` with an
"empty" flag and hand them to :meth:`RunningMeanMetric._accumulate`.

States. ``sums`` (float64) and ``counts`` (int64), one entry per reported value, both with
``dist_reduce_fx="sum"``: memory does not grow with the number of lists, and a sync is a single
all-reduce of ``2 x values`` numbers (plus the local sizes of the list states, so that every rank
learns whether any rank holds rows to gather). ``keep_per_query=True`` also keeps one row of
values and a global id per list (list states, gathered at sync).

Recent values. ``window=`` / ``half_life=`` (:class:`~torch_rankeval.metrics._window.WindowMixin`)
add a ring buffer of the last N updates' (or lists') sums, sums of squares and counts and / or
their exponentially decayed sums, synced in the same all-reduce; ``compute`` reports them as
``"window/<key>"`` / ``"decay/<key>"`` beside the lifetime keys.

Reduction. The empty-list policy, the per-value summaries (mean, sum, geometric mean) and the mean
over no counted list are the library's one reduction
(:class:`~torch_rankeval.measures.reduction.Reduction`): each batch adds its
:meth:`~torch_rankeval.measures.reduction.Reduction.sums` to the states, ``compute`` takes its
:meth:`~torch_rankeval.measures.reduction.Reduction.means` of the synced sums.

Configuration, compute groups, foreign state, sync and dtypes: :class:`~torch_rankeval.metrics._hooks.ConfiguredMetric`
(the one module that overrides torchmetrics' private hooks).

Generated query ids (``keep_per_query=True`` without ``indexes``) are ``rank + world_size *
position``, the position counting this process's lists; after ``load_state_dict`` the count goes on
from the rows loaded, so a resumed metric never repeats an id of the run it resumes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch
import torch.distributed as dist
from torch import Tensor
from torchmetrics.utilities.data import dim_zero_cat

from torch_rankeval.measures.reduction import Reduction, counted_squares, counted_sums
from torch_rankeval.metrics._hooks import ConfiguredMetric, _size
from torch_rankeval.metrics._strata import STRATUM_STATES, StrataMixin, check_strata_options
from torch_rankeval.metrics._window import DECAY_PREFIX, WINDOW_PREFIX, WindowMixin
from torch_rankeval.ranking.view import device_constant

__all__ = ["RunningMeanMetric"]

_SUM_STATES = ("sums", "counts", "squares")
#: The running means' window entries (one per update, or per list) and decayed sums: the weighted sums
#: of the values, of their squares, the weights (counted lists) and the squared weights (stderr).
_WINDOW_CHANNELS = ("sums", "squares", "counts")
_DECAY_SUMS = {"sums": ("sums", 1), "squares": ("squares", 1), "counts": ("counts", 1), "weights_sq": ("counts", 2)}


class RunningMeanMetric(WindowMixin, StrataMixin, ConfiguredMetric):
    """Base class: running float64 sums and int64 counts per value, an empty-list policy, one all-reduce.

    A subclass calls :meth:`_add_running_states` in its ``__init__`` with the names of the values it
    reports, and :meth:`_accumulate` in ``update`` with per-list values ``(N, V)`` and their
    "empty" flags (lists that have no defined value, e.g. no relevant document, no click).
    :meth:`_means` gives the mean of each value over the counted lists of all updates and, after
    sync, all processes. Class attributes a subclass may set:

    * ``_list_states``: ``{name: dtype}`` of extra list states (``dist_reduce_fx="cat"``, gathered
      with that fixed dtype at sync); per-query storage adds ``query_values`` and ``query_ids``.
    * ``_fixed_dtype_tensors``: names of buffers whose dtype survives ``set_dtype`` (tables).
    * ``_policy``: the empty-list policy, ``(values, empty) -> (values, counted mask)``
      (default: the reduction's, from ``empty_target_action``).
    * ``_empty_reason``: what an empty list lacks, for the ``empty_target_action="error"`` message.
    * ``_nothing_counted_hint``: advice appended to the NaN warning of :meth:`_means`.

    Example:
        >>> import torch
        >>> from torch_rankeval.metrics._running import RunningMeanMetric
        >>> class MeanClicks(RunningMeanMetric):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self._add_running_states(["clicks"], empty_target_action="skip")
        ...     def update(self, clicks):                     # (N, L): one list per row
        ...         per_list = clicks.sum(-1, keepdim=True).double()
        ...         self._accumulate(per_list, per_list == 0, None)   # lists without a click are skipped
        ...     def compute(self):
        ...         return self._means()[0]
        >>> metric = MeanClicks()
        >>> metric.update(torch.tensor([[1, 0, 1], [0, 0, 0]]))
        >>> metric.update(torch.tensor([[0, 1, 0]]))
        >>> metric.compute(), metric.sums, metric.counts
        (tensor(1.5000), tensor([3.], dtype=torch.float64), tensor([2]))
    """

    is_differentiable: bool | None = False
    higher_is_better: bool | None = True
    full_state_update: bool | None = False

    keys: list[str]
    empty_target_action: str
    keep_per_query: bool

    _list_states: ClassVar[dict[str, torch.dtype]] = {"query_values": torch.float64, "query_ids": torch.int64}
    _fixed_dtype_tensors: ClassVar[tuple[str, ...]] = ()
    _empty_reason: ClassVar[str] = "have no relevant document"
    _nothing_counted_hint: ClassVar[str] = ""

    def _add_running_states(
        self,
        keys: Sequence[str],
        *,
        empty_target_action: str,
        keep_per_query: bool = False,
        config: Any = (),
        aggregates: Sequence[str] = (),
        all_skipped: str = "nan",
        strata: int | None = None,
        stratum_weights: Sequence[float] | Tensor | None = None,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
    ) -> None:
        """Register ``sums`` / ``counts`` for the values ``keys``, the list states, the reduction
        (the empty-list policy ``empty_target_action``, the ``aggregates`` of the values, default all
        means, and ``all_skipped``) and the configuration: the class, ``keys``, the options and
        ``config`` (everything else that changes the accumulated values: conventions, tables, input
        handling; a mapping ``{name: value}``, so that errors can name what differs). ``strata`` and
        ``stratum_weights``: the per-stratum states of :mod:`torch_rankeval.metrics._strata`;
        ``window``, ``half_life``, ``window_unit``: the recent values (:mod:`~torch_rankeval.metrics._window`)."""
        strata, weights = check_strata_options(strata, stratum_weights)
        if not isinstance(keep_per_query, bool):
            raise TypeError(f"keep_per_query must be a bool, got {type(keep_per_query).__name__}")
        self._reduction = Reduction(
            tuple(aggregates),
            action=empty_target_action,
            all_skipped=all_skipped,
            reason=self._empty_reason,
            hint=self._nothing_counted_hint,
        )
        self.keys = list(keys)
        self.empty_target_action = empty_target_action
        self.keep_per_query = keep_per_query
        self._local_lists = 0  # lists this process has seen: source of generated global query ids
        n_values = len(self.keys)
        self.add_state("sums", torch.zeros(n_values, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("counts", torch.zeros(n_values, dtype=torch.int64), dist_reduce_fx="sum")
        # the sums of squares of the standard errors: synced in the same one all-reduce as sums/counts
        self.add_state("squares", torch.zeros(n_values, dtype=torch.float64), dist_reduce_fx="sum")
        strata_config = self._init_strata(strata, weights)
        for name in self._list_states:
            self.add_state(name, [], dist_reduce_fx="cat")
        recent = self._add_window_states(
            n_values, _WINDOW_CHANNELS, _DECAY_SUMS, window=window, half_life=half_life, window_unit=window_unit
        )
        self._set_config(
            {
                "values": self.keys,
                "empty_target_action": empty_target_action,
                "keep_per_query": keep_per_query,
                **(dict(config) if isinstance(config, Mapping) else {"config": config}),
                **strata_config,
                **recent,
            }
        )

    @property
    def _kept_dtypes(self) -> tuple[str, ...]:  # type: ignore[override]
        """float64 sums, int64 counts and the tables of ``_fixed_dtype_tensors`` keep their dtype."""
        return (
            _SUM_STATES + STRATUM_STATES + tuple(self._fixed_dtype_tensors) + self._window_states + self._window_tables
        )

    def _row_shape(self, name: str) -> tuple[int, ...]:
        return (len(self.keys),) if name == "query_values" else ()

    # ------------------------------------------------------------------ foreign state
    def _check_states(self, where: str, states: Mapping[str, Any]) -> None:
        """The incoming states must fit this metric: one running sum and count per reported value
        (catches foreign state_dicts that carry no configuration, e.g. from older versions)."""
        n = len(self.keys)
        for name in ("sums", "counts", "query_values", "squares"):  # squares last: older states lack them
            value = states.get(name)
            tensors = value if isinstance(value, (list, tuple)) else [value] if isinstance(value, Tensor) else []
            for t in tensors:
                if not isinstance(t, Tensor):
                    continue
                width = t.shape[-1] if t.ndim else None
                if name in _SUM_STATES and t.shape != (n,) or name == "query_values" and t.numel() and width != n:
                    raise ValueError(
                        f"{type(self).__name__}.{where}: the state's {name!r} has shape {tuple(t.shape)} but this "
                        f"metric reports {n} value(s) {self.keys}: the state comes from a differently configured "
                        "metric (other metrics or cutoffs). Load or merge only the states of a metric created with "
                        "the same metrics, cutoffs, conventions and options."
                    )
        self._check_stratum_states(where, states)
        self._check_window_states(where, states)

    def _after_load(self) -> None:
        """Generated ids go on after the rows loaded (each row took at most one generated id)."""
        self._local_lists = max(self._local_lists, _size(self.query_ids))

    def _upgrade_states(self, states: Mapping[str, Any]) -> dict[str, Any]:
        """A state from before standard errors (``sums`` without ``squares``) loads and merges: its
        means are exact, its standard errors unknown, so its ``squares`` are NaN
        (``compute(stderr=True)`` reports NaN until ``reset``). A state without window states
        (from before windows, or without ``window``/``half_life``): its window starts empty."""
        if "sums" not in states:
            return {}
        upgraded = self._missing_window_states(states)
        if "squares" not in states:
            upgraded["squares"] = torch.full_like(self.squares, float("nan"))
        return upgraded

    def _check_device(self, preds: Tensor) -> None:
        if isinstance(preds, Tensor) and preds.device != self.sums.device:
            raise ValueError(
                f"preds is on {preds.device} but the metric is on {self.sums.device}: move the metric with "
                f"metric.to({str(preds.device)!r}) or the inputs to the metric's device"
            )

    def _generate_ids(self, n: int, device: torch.device) -> Tensor:
        """Global ids for lists without one: ``rank + world_size * local_position``."""
        rank, world = (
            (dist.get_rank(), dist.get_world_size()) if dist.is_available() and dist.is_initialized() else (0, 1)
        )
        local = torch.arange(self._local_lists, self._local_lists + n, device=device, dtype=torch.int64)
        self._local_lists += n
        return rank + world * local

    # ------------------------------------------------------------------ reduction
    def _policy(self, values: Tensor, empty: Tensor) -> tuple[Tensor, Tensor | None]:
        """The empty-list policy of the metric's reduction: (float64 values, NaN where skipped;
        counted mask)."""
        action = self._reduction.action
        if action in ("neg", "pos") and values.dtype != torch.float64:
            # the score of an empty list as a (1,) float64 tensor: the one `where` also casts to float64
            fills = self.__dict__.setdefault("_empty_fills", {})  # device -> that tensor (no call once kept)
            fill = fills.get(values.device)
            if fill is None:
                fill = fills[values.device] = device_constant((float(action == "pos"),), torch.float64, values.device)
            return torch.where(empty, fill, values), None
        return self._reduction.policy(values.to(torch.float64), empty)

    def _sums(self, values: Tensor, empty: Tensor) -> tuple[Tensor, Tensor, Tensor | None, Tensor, Tensor, Tensor]:
        """A batch under the metric's reduction: (values after the policy, those values transformed
        for the summary, the counted mask or None, and the sums, the sums of squares and the counts it
        adds to the running states)."""
        policed, counted = self._policy(values, empty)
        transformed = self._reduction.transform(policed) if "gmean" in self._reduction.aggregates else policed
        if counted is None:  # every list counts: a plain column sum, a dot product per column, a constant count
            total = transformed.sum(0)
            squares = torch.linalg.vecdot(transformed, transformed, dim=0)
            count = torch.full_like(self.counts, transformed.shape[0]) if self._windowed else transformed.shape[0]
            return policed, transformed, counted, total, squares, count
        total, count = counted_sums(transformed, counted)
        return policed, transformed, counted, total, counted_squares(transformed, counted), count

    def _accumulate(self, values: Tensor, empty: Tensor, ids: Tensor | None, strata: Tensor | None = None) -> None:
        """Add per-list values ``(N, V)`` (``empty`` flags them) to the running sums (and the window),
        and to the stratum states with the ``(N,)`` ``strata`` of a metric created with ``strata=``."""
        policed, transformed, counted, total, squares, count = self._sums(values, empty)
        rows = None
        if self._per_query:  # one window entry per list
            kept = transformed if counted is None else torch.where(counted, transformed, 0.0)
            ones = torch.ones_like(kept) if counted is None else counted.to(torch.float64)
            rows = torch.stack((kept, kept.square(), ones), dim=1)
        self._add_moments(total, squares, count, values.shape[0], rows)
        if strata is not None:
            self._add_strata(policed, strata)
        if self.keep_per_query:
            if ids is None:
                ids = self._generate_ids(policed.shape[0], policed.device)
            self.query_values.append(_ordinary(policed))
            self.query_ids.append(ids.reshape(-1).to(torch.int64))

    def _add_moments(
        self, total: Tensor, squares: Tensor, count: Tensor | int, lists: int, rows: Tensor | None = None
    ) -> None:
        """Add a batch of ``lists`` lists, its sums, sums of squares and counts (a tensor, or one count
        for every value), to the running states (the two float64 states in one operation) and its
        entry (or, per list, its ``rows``) to the window and the decayed sums (a batch of no list
        takes no slot)."""
        if not isinstance(count, Tensor):  # one count for every value: a constant, kept per batch size and device
            key = (count, self.counts.device)
            constants = self.__dict__.setdefault("_count_constants", {})  # (batch size, device) -> counts
            const = constants.get(key)
            if const is None:
                if len(constants) > 64:
                    constants.clear()
                const = constants[key] = device_constant(
                    (count,) * self.counts.shape[0], self.counts.dtype, self.counts.device
                )
            count = const
        torch._foreach_add_([self.sums, self.squares, self.counts], [total, squares, count])  # one operation
        if self._windowed and lists:
            if rows is None:
                rows = torch.stack((total, squares, count.to(torch.float64))).unsqueeze(0)
            self._window_add(rows)

    def _pending(self) -> tuple[Tensor, Tensor, Tensor] | None:
        """Values not yet in the sums, computed at ``compute`` time: ``(values, empty, ids)`` or None."""
        return None

    # ------------------------------------------------------------------ results
    def _moments(self) -> tuple[Tensor, Tensor, Tensor]:
        """The running sums, sums of squares and counts plus the values computed at ``compute`` time
        (``_pending``)."""
        pending = self._pending()
        if pending is None:
            return self.sums.clone(), self.squares.clone(), self.counts.clone()
        *_, total, square, count = self._sums(pending[0], pending[1])
        return self.sums + total, self.squares + square, self.counts + count

    def _means(self, stderr: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Each value's summary (its mean, by default) over the counted lists, in ``self.dtype``;
        NaN (and a warning) where no list was counted, or 0.0 with ``all_skipped="zero"``. With
        ``stderr``: ``(summaries, standard errors)``, the errors of
        :meth:`~torch_rankeval.measures.reduction.Reduction.stderr` (NaN under 2 counted lists)."""
        if not isinstance(stderr, bool):
            raise TypeError(f"stderr must be a bool, got {type(stderr).__name__}")
        sums, squares, counts = self._moments()
        means = self._reduction.means(sums, counts, keys=self.keys, owner=type(self).__name__, stacklevel=3).to(
            self.dtype
        )
        if not stderr:
            return means
        return means, self._reduction.stderr(sums, squares, counts).to(self.dtype)

    def _with_stderr(self, stderr: bool) -> dict[str, Tensor]:
        """``{key: summary}`` and, with ``stderr``, ``{key + "/stderr": its standard error}`` beside
        each key (what ``compute(stderr=...)`` of the dict-returning metrics returns)."""
        if not isinstance(stderr, bool):
            raise TypeError(f"stderr must be a bool, got {type(stderr).__name__}")
        means, errors = self._means(stderr=True) if stderr else (self._means(), None)
        return _keyed(self.keys, means, errors) | self._recent_values(stderr) | self._stratum_results(stderr)

    def _recent_values(self, stderr: bool) -> dict[str, Tensor]:
        """The window's ``{"window/<key>": mean[, "window/<key>/stderr": error]}`` (the lists of the
        last ``window`` updates or lists: :meth:`Reduction.stderr`, ``scipy.stats.sem`` of them) and
        the decayed ``{"decay/<key>": weighted mean[, ".../stderr"]}`` (the weighted mean
        ``sum(w x) / sum(w)``, its error :meth:`Reduction.weighted_stderr`); empty without them."""
        out: dict[str, Tensor] = {}
        owner = type(self).__name__
        if self._window is not None:
            t = self._window_totals()
            keys = [WINDOW_PREFIX + key for key in self.keys]
            means = self._reduction.means(t["sums"], t["counts"], keys=keys, owner=owner, stacklevel=4)
            errors = self._reduction.stderr(t["sums"], t["squares"], t["counts"]) if stderr else None
            out.update(_keyed(keys, means.to(self.dtype), None if errors is None else errors.to(self.dtype)))
        if self._half_life is not None:
            d = self._decay_totals()
            keys = [DECAY_PREFIX + key for key in self.keys]
            means = self._reduction.means(d["sums"], d["counts"], keys=keys, owner=owner, stacklevel=4)
            errors = (
                self._reduction.weighted_stderr(d["sums"], d["squares"], d["counts"], d["weights_sq"])
                if stderr
                else None
            )
            out.update(_keyed(keys, means.to(self.dtype), None if errors is None else errors.to(self.dtype)))
        return out

    def compute_per_query(self) -> dict[str, Tensor]:
        """Per-query values (requires ``keep_per_query=True``), synced across processes.

        Returns ``{"query_id": (Q,), key: (Q,) ...}`` sorted by query id; skipped queries hold NaN.
        Values computed at ``compute`` time (flat input pending grouping) are included. A metric
        created with ``strata=`` adds ``"stratum": (Q,)``, each query's stratum.

        Example:
            >>> import torch
            >>> from torch_rankeval import RankingMetrics
            >>> m = RankingMetrics(("mrr",), keep_per_query=True)
            >>> m.update(torch.tensor([0.9, 0.1, 0.5]), torch.tensor([0, 1, 1]), indexes=torch.tensor([4, 4, 2]))
            >>> m.compute_per_query()
            {'query_id': tensor([2, 4]), 'mrr': tensor([1.0000, 0.5000])}
        """
        if not self.keep_per_query:
            raise ValueError("compute_per_query needs keep_per_query=True when the metric is created")
        with self._synced():
            values, ids, order = self._kept_rows()
            strata = self._kept_strata()
        out = {"query_id": ids, **{key: values[:, i] for i, key in enumerate(self.keys)}}
        return out if strata is None else {**out, "stratum": strata[order]}

    def _kept_rows(self) -> tuple[Tensor, Tensor, Tensor]:
        """The kept per-query rows and the values computed at ``compute`` time, sorted by query id:
        ``(values (Q, V) in self.dtype, ids (Q,), the sorting order)``; call it inside ``_synced``."""
        values = [dim_zero_cat(self.query_values)] if _size(self.query_values) else []
        ids = [dim_zero_cat(self.query_ids)] if _size(self.query_ids) else []
        pending = self._pending()
        if pending is not None:
            values.append(self._policy(pending[0], pending[1])[0])
            ids.append(pending[2])
        if not values:
            empty = torch.zeros(0, dtype=torch.int64, device=self.sums.device)
            return torch.zeros(0, len(self.keys), dtype=self.dtype, device=self.sums.device), empty, empty
        ids_t = torch.cat(ids)
        order = torch.argsort(ids_t, stable=True)
        return torch.cat(values)[order].to(self.dtype), ids_t[order], order


def _keyed(keys: list[str], means: Tensor, errors: Tensor | None) -> dict[str, Tensor]:
    out = {}
    for i, key in enumerate(keys):
        out[key] = means[i]
        if errors is not None:
            out[key + "/stderr"] = errors[i]
    return out


def values_mode() -> contextlib.AbstractContextManager:
    """The context a metric's update computes its per-list values in: ``torch.inference_mode()``
    eagerly (no autograd dispatch or version counters in any operation), a null context under
    ``torch.compile``. What it makes reaches the states only through :meth:`RunningMeanMetric._accumulate`
    (ordinary operations, a kept row copied by :func:`_ordinary`); the tables kept across calls are
    built outside it (:func:`~torch_rankeval.ranking.view.keep_outside`). ``RankingMetrics._batch``
    writes the same expression inline (one library call fewer in the budgeted ``NDCG`` update).

    Example:
        >>> with values_mode():
        ...     torch.is_inference_mode_enabled()
        True
    """
    return contextlib.nullcontext() if torch.compiler.is_compiling() else torch.inference_mode()


def _ordinary(t: Tensor) -> Tensor:
    """``t``, or a copy where it is an inference tensor that the update's kernels made
    (``RankingMetrics._batch``: a row the empty-list policy kept as it came) and the caller is not in
    inference mode itself: a list state keeps ordinary tensors, as the caller's own mode makes them.

    Example:
        >>> with torch.inference_mode():
        ...     row = torch.ones(2)
        >>> _ordinary(row).is_inference(), _ordinary(torch.ones(2)).is_inference()
        (False, False)
    """
    if torch.compiler.is_compiling() or not t.is_inference() or torch.is_inference_mode_enabled():
        return t
    return t.clone()
