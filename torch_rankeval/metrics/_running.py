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

Compute groups. :class:`torchmetrics.MetricCollection` merges metrics whose states are equal after
the first update into one "compute group" that shares the states from then on. That is right for
torchmetrics' sufficient statistics but wrong for running means of *different* metrics (``ndcg``
and ``map`` both hold ``sums=[0], counts=[N]`` after a batch without relevant documents). Every
metric therefore carries an empty, never persisted state whose name is a fingerprint of what it
accumulates (``_config_<hash>``): metrics with different configurations never share states,
identical ones still may.

Foreign state. ``load_state_dict`` and ``merge_state`` refuse states of a differently configured
metric (other metrics, cutoffs, conventions or options) with a ``ValueError`` that names both
configurations. Two checks, neither of which adds a key to the state_dict (old checkpoints load, and
new ones load into older versions of the library):

* the configuration travels in the state_dict's *metadata* (``state_dict._metadata[prefix]
  ["torch_rankeval_config"]``, next to the ``version`` PyTorch keeps there; it survives
  ``torch.save`` / ``torch.load`` and Lightning checkpoints) and in the ``_config_<hash>`` key of
  ``metric_state``; where present it must equal this metric's;
* always, the states' shapes must fit this metric: one running sum and count per reported value.

A state_dict without the metadata (written by an older version, or rebuilt as a plain ``dict``)
is checked by shape only: it cannot tell ``ndcg@5`` from ``ndcg@10``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Callable, ClassVar

import torch
import torch.distributed as dist
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat
from torchmetrics.utilities.distributed import gather_all_tensors

from torch_rankeval.conventions import EMPTY_TARGET_ACTIONS
from torch_rankeval.ranking.inputs import counted_sums, empty_policy

__all__ = ["RunningMeanMetric"]

_SUM_STATES = ("sums", "counts")
#: The state_dict metadata entry that carries a metric's configuration (see the module docstring).
CONFIG_METADATA = "torch_rankeval_config"
#: Configurations seen in this process, by fingerprint: names a foreign configuration in errors when
#: only its fingerprint arrives (a ``metric_state`` dict).
_KNOWN_CONFIGS: dict[str, dict[str, str]] = {}


class RunningMeanMetric(Metric):
    """Base class: running float64 sums and int64 counts per value, an empty-list policy, one all-reduce.

    A subclass calls :meth:`_add_running_states` in its ``__init__`` with the names of the values it
    reports, and :meth:`_accumulate` in ``update`` with per-list values ``(N, V)`` and their
    "empty" flags (lists that have no defined value, e.g. no relevant document, no click).
    :meth:`_means` gives the mean of each value over the counted lists of all updates and, after
    sync, all processes. Class attributes a subclass may set:

    * ``_list_states``: ``{name: dtype}`` of extra list states (``dist_reduce_fx="cat"``, gathered
      with that fixed dtype at sync); per-query storage adds ``query_values`` and ``query_ids``.
    * ``_fixed_dtype_tensors``: names of buffers whose dtype survives ``set_dtype`` (tables).
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

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    _list_states: ClassVar[dict[str, torch.dtype]] = {"query_values": torch.float64, "query_ids": torch.int64}
    _fixed_dtype_tensors: ClassVar[tuple[str, ...]] = ()
    _empty_reason: ClassVar[str] = "have no relevant document"
    _nothing_counted_hint: ClassVar[str] = ""

    def _add_running_states(
        self, keys: Sequence[str], *, empty_target_action: str, keep_per_query: bool = False, config: Any = ()
    ) -> None:
        """Register ``sums`` / ``counts`` for the values ``keys``, the list states, and the empty
        fingerprint state of the class, ``keys``, the options and ``config`` (everything else that
        changes the accumulated values: conventions, tables, input handling; a mapping
        ``{name: value}``, so that errors can name what differs)."""
        if empty_target_action not in EMPTY_TARGET_ACTIONS:
            raise ValueError(
                f"empty_target_action={empty_target_action!r} is not valid: use one of "
                f"{', '.join(map(repr, EMPTY_TARGET_ACTIONS))}"
            )
        if not isinstance(keep_per_query, bool):
            raise TypeError(f"keep_per_query must be a bool, got {type(keep_per_query).__name__}")
        self.keys = list(keys)
        self.empty_target_action = empty_target_action
        self.keep_per_query = keep_per_query
        self._local_lists = 0  # lists this process has seen: source of generated global query ids
        n_values = len(self.keys)
        self.add_state("sums", torch.zeros(n_values, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("counts", torch.zeros(n_values, dtype=torch.int64), dist_reduce_fx="sum")
        for name in self._list_states:
            self.add_state(name, [], dist_reduce_fx="cat")
        previous = getattr(self, "_config_state", None)
        if previous is not None:  # registered again (a subclass replacing its parent's values): one fingerprint
            for registry in (self._defaults, self._reductions, self._persistent):
                registry.pop(previous, None)
            delattr(self, previous)
        fields = {
            "class": type(self).__qualname__,
            "values": self.keys,
            "empty_target_action": empty_target_action,
            "keep_per_query": keep_per_query,
            **(dict(config) if isinstance(config, Mapping) else {"config": config}),
        }
        self._config_fields = {name: _describe(value) for name, value in fields.items()}
        digest = hashlib.sha1(repr(sorted(self._config_fields.items())).encode()).hexdigest()[:16]
        _KNOWN_CONFIGS[digest] = self._config_fields
        self._config_state = f"_config_{digest}"
        self.add_state(self._config_state, torch.zeros(0), dist_reduce_fx="sum", persistent=False)
        if not getattr(self, "_config_hook", False):
            self._register_state_dict_hook(_save_config)
            self._config_hook = True

    # ------------------------------------------------------------------ foreign state
    @property
    def _config_digest(self) -> str:
        return self._config_state[len("_config_") :]

    def _config_metadata(self) -> dict[str, Any]:
        """What the state_dict metadata carries: the fingerprint and the readable fields."""
        return {"fingerprint": self._config_digest, "fields": dict(self._config_fields)}

    def _refuse_foreign(self, where: str, incoming: Mapping[str, Any] | None, digest: str | None = None) -> None:
        """Raise when ``incoming`` (a configuration as in :meth:`_config_metadata`) or the fingerprint
        ``digest`` differs from this metric's; the message names both configurations."""
        if incoming is not None and isinstance(incoming, Mapping):
            digest = incoming.get("fingerprint", digest)
        if digest is None or digest == self._config_digest:
            return
        fields = incoming.get("fields") if isinstance(incoming, Mapping) else None
        fields = fields if isinstance(fields, Mapping) else _KNOWN_CONFIGS.get(digest)
        mine = self._config_fields
        if fields is None:
            lines = [
                f"  state from:  an unknown configuration (fingerprint {digest})",
                f"  this metric: {_render_config(mine)}",
            ]
        else:
            lines = [
                f"  state from:  {_unquote(fields.get('class'))} {fields.get('values')}",
                f"  this metric: {_unquote(mine['class'])} {mine['values']}",
            ]
            for name in dict.fromkeys([*mine, *fields]):
                if name not in ("class", "values") and mine.get(name) != fields.get(name):
                    lines.append(
                        f"  {name}: {_shorten(fields.get(name))} (state) vs {_shorten(mine.get(name))} (this metric)"
                    )
        raise ValueError(
            f"{type(self).__name__}.{where}: the state comes from a differently configured metric, whose values would be "
            "reported under this metric's names:\n" + "\n".join(lines) + "\nLoad or merge only the states of a metric "
            "created with the same metrics, cutoffs, conventions and options."
        )

    def _check_shapes(self, where: str, states: Mapping[str, Any]) -> None:
        """The incoming states must fit this metric: one running sum and count per reported value
        (catches foreign state_dicts that carry no configuration, e.g. from older versions)."""
        n = len(self.keys)
        for name in (*_SUM_STATES, "query_values"):
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

    def _load_from_state_dict(
        self,
        state_dict: dict,
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        """torchmetrics' loading, after refusing the states of a differently configured metric."""
        states = {name: state_dict[prefix + name] for name in self._defaults if prefix + name in state_dict}
        if states:
            self._refuse_foreign("load_state_dict", (local_metadata or {}).get(CONFIG_METADATA))
            self._check_shapes("load_state_dict", states)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    def merge_state(self, incoming_state: dict[str, Any] | Metric) -> None:
        """Add the state of another metric of the same configuration (a metric, its
        ``metric_state`` or a ``state_dict``) to this one, as torchmetrics' ``merge_state`` (>= 1.6;
        implemented here so that older torchmetrics have it too), after refusing the states of a
        differently configured metric (``ValueError`` naming both configurations).

        Example:
            >>> import torch
            >>> from torch_rankeval import NDCG
            >>> a, b = NDCG(k=2), NDCG(k=2)
            >>> a.update(torch.tensor([[0.9, 0.1]]), torch.tensor([[1, 0]]))
            >>> b.update(torch.tensor([[0.9, 0.1]]), torch.tensor([[0, 1]]))
            >>> a.merge_state(b)
            >>> a.compute()
            tensor(0.8155)
        """
        if self.dist_sync_on_step:
            raise RuntimeError("merge_state is not supported with dist_sync_on_step=True")
        if isinstance(incoming_state, Metric):
            if not isinstance(incoming_state, type(self)):
                raise ValueError(
                    f"merge_state takes a {type(self).__name__}, its metric_state or a state_dict, got {type(incoming_state).__name__}"
                )
            self._refuse_foreign("merge_state", incoming_state._config_metadata())
            incoming_state = incoming_state.metric_state
        elif isinstance(incoming_state, Mapping):
            metadata = getattr(incoming_state, "_metadata", None) or {}
            self._refuse_foreign("merge_state", (metadata.get("") or {}).get(CONFIG_METADATA))
            for key in incoming_state:
                if isinstance(key, str) and key.startswith("_config_"):
                    self._refuse_foreign("merge_state", None, key[len("_config_") :])
            self._check_shapes("merge_state", incoming_state)
        else:
            raise ValueError(
                f"merge_state takes a metric, its metric_state or a state_dict, got {type(incoming_state).__name__}"
            )
        self._reduce_states(dict(incoming_state))

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickling (``pickle``, ``copy.deepcopy``, ``torch.load``, Lightning's ``ddp_spawn``): the
        states get storage of their own. ``torch.multiprocessing`` pickles CPU tensors into shared
        memory, so without the copy the processes of ``ddp_spawn`` would add into one ``sums``
        tensor (``update`` adds in place) and every process would count every other's lists."""
        super().__setstate__(state)
        own_states(self)

    def persistent(self, mode: bool = False) -> None:
        """As torchmetrics' ``persistent``; the empty fingerprint state never enters the state_dict,
        so state_dicts keep their keys and load across library versions."""
        super().persistent(mode)
        self._persistent[self._config_state] = False

    def _reduce_states(self, incoming_state: dict[str, Any]) -> None:
        """``merge_state`` / ``forward``: an incoming state without the fingerprint (e.g. a
        state_dict) is taken as is; one from a differently configured metric is refused."""
        for key in incoming_state:
            if key.startswith("_config_"):
                self._refuse_foreign("merge_state", None, key[len("_config_") :])
        super()._reduce_states({self._config_state: getattr(self, self._config_state), **incoming_state})

    def _apply(self, fn: Callable, *args: Any, **kwargs: Any) -> Metric:
        """Follow device moves, but keep the sums in float64, counts in int64 and the tables named in
        ``_fixed_dtype_tensors`` in their own dtype whatever ``.half()`` / ``set_dtype`` do to
        floating states and buffers."""
        saved = {name: getattr(self, name) for name in _SUM_STATES}
        tables = {name: getattr(self, name, None) for name in self._fixed_dtype_tensors}
        this = super()._apply(fn, *args, **kwargs)
        for name, old in saved.items():
            device = getattr(this, name).device
            setattr(this, name, old.to(device))
            this._defaults[name] = this._defaults[name].to(device=device, dtype=old.dtype)
        for name, old in tables.items():
            new = getattr(this, name, None)
            if old is not None and new is not None and new.dtype != old.dtype:
                setattr(this, name, old.to(new.device))
        return this

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
        """Apply the empty-list policy: (values with NaN where skipped, counted mask)."""
        action = self.empty_target_action
        if action == "error" and bool(empty.any()):
            raise ValueError(
                f"{int(empty.any(-1).sum())} list(s) {self._empty_reason} and empty_target_action='error'; "
                "use 'neg', 'pos' or 'skip' to score them"
            )
        return empty_policy(values.to(torch.float64), empty, action)

    def _transform(self, values: Tensor) -> Tensor:
        """Per-list values as they enter the running sums (e.g. logarithms for a geometric mean)."""
        return values

    def _finish(self, sums: Tensor, counts: Tensor) -> Tensor:
        """The reported values from the (synced) sums and counts: the means by default."""
        return sums / counts

    def _accumulate(self, values: Tensor, empty: Tensor, ids: Tensor | None) -> None:
        """Add per-list values ``(N, V)`` (``empty`` flags them) to the running sums."""
        values, counted = self._policy(values, empty)
        total, count = counted_sums(self._transform(values), counted)
        self.sums += total
        self.counts += count
        if self.keep_per_query:
            if ids is None:
                ids = self._generate_ids(values.shape[0], values.device)
            self.query_values.append(values)
            self.query_ids.append(ids.to(torch.int64))

    def _pending(self) -> tuple[Tensor, Tensor, Tensor] | None:
        """Values not yet in the sums, computed at ``compute`` time: ``(values, empty, ids)`` or None."""
        return None

    # ------------------------------------------------------------------ results
    def _totals(self) -> tuple[Tensor, Tensor]:
        """The running sums and counts plus the values computed at ``compute`` time (``_pending``)."""
        sums, counts = self.sums.clone(), self.counts.clone()
        pending = self._pending()
        if pending is not None:
            values, counted = self._policy(pending[0], pending[1])
            total, count = counted_sums(self._transform(values), counted)
            sums += total
            counts += count
        return sums, counts

    def _means(self) -> Tensor:
        """The mean of each value over the counted lists, in ``self.dtype``; NaN (and a warning)
        where no list was counted."""
        sums, counts = self._totals()
        if bool((counts == 0).any()):
            missing = [key for key, c in zip(self.keys, counts.tolist()) if c == 0]
            warnings.warn(
                f"{type(self).__name__}: no query was counted for {missing} (no update, or every query skipped "
                f"by empty_target_action='skip'); returning NaN{self._nothing_counted_hint}",
                UserWarning,
                stacklevel=3,
            )
        return self._finish(sums, counts).to(self.dtype)

    def compute_per_query(self) -> dict[str, Tensor]:
        """Per-query values (requires ``keep_per_query=True``), synced across processes.

        Returns ``{"query_id": (Q,), key: (Q,) ...}`` sorted by query id; skipped queries hold NaN.
        Values computed at ``compute`` time (flat input pending grouping) are included.

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
        with self.sync_context(should_sync=self._to_sync, should_unsync=self._should_unsync):
            values = [dim_zero_cat(self.query_values)] if _non_empty(self.query_values) else []
            ids = [dim_zero_cat(self.query_ids)] if _non_empty(self.query_ids) else []
            pending = self._pending()
            if pending is not None:
                values.append(self._policy(pending[0], pending[1])[0])
                ids.append(pending[2])
        if not values:
            empty = torch.zeros(0, device=self.sums.device)
            return {"query_id": empty.long(), **{key: empty.to(self.dtype) for key in self.keys}}
        values_t, ids_t = torch.cat(values), torch.cat(ids)
        order = torch.argsort(ids_t, stable=True)
        values_t, ids_t = values_t[order].to(self.dtype), ids_t[order]
        return {"query_id": ids_t, **{key: values_t[:, i] for i, key in enumerate(self.keys)}}

    # ------------------------------------------------------------------ distributed
    def _sync_dist(self, dist_sync_fn: Callable = gather_all_tensors, process_group: Any | None = None) -> None:
        """One all-reduce for all running sums; list states are gathered with fixed dtypes."""
        if dist_sync_fn is not gather_all_tensors:  # a custom gather (e.g. XLA): torchmetrics' generic path
            return super()._sync_dist(dist_sync_fn, process_group)
        group = process_group or self.process_group
        # The local sizes of the list states ride along, so every rank learns whether any rank holds
        # rows, and a metric without rows anywhere needs exactly one collective.
        sizes = [float(_size(getattr(self, name))) for name in self._list_states]
        device = self.sums.device
        packed = torch.cat(
            [self.sums, self.counts.to(torch.float64), torch.tensor(sizes, dtype=torch.float64, device=device)]
        )
        dist.all_reduce(packed, op=dist.ReduceOp.SUM, group=group)
        n = self.sums.shape[0]
        self.sums, self.counts = packed[:n], packed[n : 2 * n].round().to(torch.int64)
        for (name, dtype), total in zip(self._list_states.items(), packed[2 * n :].tolist()):
            if total == 0:
                continue
            state = getattr(self, name)
            if _size(state) == 0:
                width = (len(self.keys),) if name == "query_values" else ()
                local = torch.zeros((0, *width), dtype=dtype, device=device)
            else:
                local = dim_zero_cat(state) if isinstance(state, list) else state
            setattr(self, name, torch.cat(dist_sync_fn(local.to(dtype), group=group)))
        return None


def own_states(metric: Metric) -> None:
    """Give every state of ``metric`` storage of its own (after unpickling: see
    :meth:`RunningMeanMetric.__setstate__`; any metric that updates its states in place needs it)."""
    for name in metric._defaults:
        value = getattr(metric, name)
        if isinstance(value, Tensor):
            setattr(metric, name, value.clone())
        elif isinstance(value, list):
            setattr(metric, name, [v.clone() if isinstance(v, Tensor) else v for v in value])


def _save_config(module: RunningMeanMetric, state_dict: dict, prefix: str, local_metadata: dict) -> None:
    """state_dict hook: the configuration rides in the metadata, never as a key (module-level: picklable)."""
    local_metadata[CONFIG_METADATA] = module._config_metadata()


def _unquote(value: Any) -> str:
    return str(value).strip("'")


def _shorten(value: Any, width: int = 300) -> str:
    text = str(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _render_config(fields: Mapping[str, str]) -> str:
    """A one-line description of a configuration for error messages (long values shortened)."""
    return ", ".join(f"{name}={_shorten(value)}" for name, value in fields.items())


def _describe(x: Any) -> str:
    """A deterministic description of a configuration (the same in every process and session):
    callables by qualified name, mappings sorted, tensors by value."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return f"{type(x).__name__}({','.join(f'{f.name}={_describe(getattr(x, f.name))}' for f in dataclasses.fields(x))})"
    if isinstance(x, Mapping):
        return "{" + ",".join(sorted(f"{_describe(k)}:{_describe(v)}" for k, v in x.items())) + "}"
    if isinstance(x, (list, tuple)):
        return "[" + ",".join(_describe(v) for v in x) + "]"
    if isinstance(x, Tensor):
        return f"tensor({x.dtype},{tuple(x.shape)},{x.detach().cpu().double().reshape(-1).tolist()})"
    if callable(x) and not isinstance(x, type):
        return f"{getattr(x, '__module__', '')}.{getattr(x, '__qualname__', type(x).__qualname__)}"
    return repr(x)


def _size(state: list | Tensor) -> int:
    if isinstance(state, list):
        return sum(t.shape[0] for t in state)
    return state.shape[0]


def _non_empty(state: list | Tensor) -> bool:
    return _size(state) > 0
