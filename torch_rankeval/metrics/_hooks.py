"""The library's only overrides of private torchmetrics (and ``nn.Module``) hooks, and the one
foreign-state mechanism of every metric class.

:class:`ConfiguredMetric` is the base of every Metric of the library (the running-mean metrics of
:mod:`._running` and :class:`~torch_rankeval.metrics.ItemExposure`). It overrides, here and
nowhere else (``tests/test_hooks.py`` fails when torchmetrics changes one of them):

* ``Metric._load_from_state_dict`` and ``Metric._reduce_states`` (``merge_state``, ``forward``):
  refuse the state of a differently configured metric; states that do not simply add up (a
  window's ring buffer) are combined by the subclass's ``_combine_states``;
* ``Metric._sync_dist``: ONE all-reduce for every summed state (plus the list states' sizes), then
  one gather per list state that holds rows on some rank, with a fixed dtype;
* ``Metric._apply``: the states and buffers named in ``_kept_dtypes`` keep their dtype under
  ``.half()`` / ``set_dtype`` (float64 sums, int64 counts, float64 tables);
* ``nn.Module._register_state_dict_hook``: the configuration rides in the state_dict's metadata;
* the private flags ``_to_sync`` / ``_should_unsync`` (``_synced``: a ``compute``-like sync) and
  the state registries ``_defaults`` / ``_reductions`` / ``_persistent``;
* ``Metric._wrap_compute``: the cached result of ``compute`` is kept per argument
  (``compute()`` and ``compute(stderr=True)`` cache apart);
* and the public ``merge_state`` (torchmetrics >= 1.6; implemented here so older versions have it),
  ``persistent`` and ``__setstate__``.

Configuration. A subclass calls :meth:`ConfiguredMetric._set_config` with a mapping of everything
that changes what its states accumulate. Three things follow:

* Compute groups. :class:`torchmetrics.MetricCollection` merges metrics whose states are equal
  after the first update into one "compute group" that shares the states from then on: right for
  torchmetrics' sufficient statistics, wrong for running means of *different* metrics (``ndcg`` and
  ``map`` both hold ``sums=[0], counts=[N]`` after a batch without relevant documents) or for two
  ``ItemExposure`` whose histograms happen to be equal. Every metric therefore carries an empty,
  never persisted state whose name is a fingerprint of its configuration (``_config_<hash>``):
  metrics with different configurations never share states, identical ones still may.
* Foreign state. ``load_state_dict`` and ``merge_state`` refuse the states of a differently
  configured metric with a ``ValueError`` that names both configurations. The configuration travels
  in the state_dict's *metadata* (``state_dict._metadata[prefix]["torch_rankeval_config"]``, next to
  the ``version`` PyTorch keeps there; it survives ``torch.save`` and Lightning checkpoints) and as
  the ``_config_<hash>`` key of ``metric_state``; no key is added to the state_dict (old checkpoints
  load, new ones load into older versions). ``load_state_dict`` checks it also when the states are
  not persistent and nothing would be loaded (``strict=False`` too: torch does not tell a module's
  hook): a checkpoint of another configuration is refused either way. To load the rest of such a
  checkpoint, delete the metric's entry ``state_dict._metadata[prefix]`` first.
* Shapes. :meth:`ConfiguredMetric._check_states` (a subclass's own check) sees every incoming state:
  a state_dict without the metadata (an older version, a plain ``dict``) is checked by shape only.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Union

import torch
import torch.distributed as dist
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat, dim_zero_sum
from torchmetrics.utilities.distributed import gather_all_tensors

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["ConfiguredMetric", "set_metric_options", "CONFIG_METADATA", "PlotValue"]

#: What ``plot`` draws: one result of ``compute`` or a sequence of them (one per step).
PlotValue = Union[Tensor, Mapping[str, Tensor], Sequence[Tensor], Sequence[Mapping[str, Tensor]]]

#: The state_dict metadata entry that carries a metric's configuration.
CONFIG_METADATA = "torch_rankeval_config"
#: Configurations seen in this process, by fingerprint: names a foreign configuration in errors when
#: only its fingerprint arrives (a ``metric_state`` dict).
_KNOWN_CONFIGS: dict[str, dict[str, str]] = {}
#: Tensors with more elements are described by a digest of their values (a catalogue's popularity).
_DESCRIBED_ELEMENTS = 256


class ConfiguredMetric(Metric):
    """A torchmetrics ``Metric`` that knows its configuration: refuses foreign state, never shares a
    compute group with a differently configured metric, syncs its summed states in one all-reduce.

    Class attributes a subclass may set:

    * ``_list_states``: ``{name: dtype}`` of its list states (``dist_reduce_fx="cat"``), gathered
      with that fixed dtype at sync;
    * ``_kept_dtypes``: names of states and buffers whose dtype survives ``.half()`` / ``set_dtype``.

    Example:
        >>> import torch
        >>> class Total(ConfiguredMetric):
        ...     def __init__(self, scale: float):
        ...         super().__init__()
        ...         self.scale = scale
        ...         self.add_state("total", torch.zeros(1, dtype=torch.float64), dist_reduce_fx="sum")
        ...         self._set_config({"scale": scale})
        ...     def update(self, x):
        ...         self.total += self.scale * x.sum()
        ...     def compute(self):
        ...         return self.total
        >>> a, b = Total(2.0), Total(3.0)
        >>> b.update(torch.ones(2))
        >>> a.merge_state(b)
        Traceback (most recent call last):
        ...
        ValueError: Total.merge_state: the state comes from a differently configured metric ...
    """

    _list_states: ClassVar[dict[str, torch.dtype]] = {}
    _kept_dtypes: ClassVar[tuple[str, ...]] = ()

    # ------------------------------------------------------------------ configuration
    def _set_config(self, fields: Mapping[str, Any]) -> None:
        """Record the configuration ``fields`` (``{name: value}``; ``"class"`` and ``"values"`` are
        added when missing) and register its empty fingerprint state (again: replacing the previous
        one, e.g. a subclass re-registering its parent's states)."""
        fields = {"class": type(self).__qualname__, "values": getattr(self, "keys", None), **dict(fields)}
        self._config_fields = {name: _describe(value) for name, value in fields.items()}
        digest = hashlib.sha1(repr(sorted(self._config_fields.items())).encode()).hexdigest()[:16]
        _KNOWN_CONFIGS[digest] = self._config_fields
        previous = getattr(self, "_config_state", None)
        if previous is not None:
            for registry in (self._defaults, self._reductions, self._persistent):
                registry.pop(previous, None)
            delattr(self, previous)
        self._config_state = f"_config_{digest}"
        self.add_state(self._config_state, torch.zeros(0), dist_reduce_fx="sum", persistent=False)
        if not getattr(self, "_config_hook", False):
            self._register_state_dict_hook(_save_config)
            self._config_hook = True

    @property
    def _config_digest(self) -> str:
        return self._config_state[len("_config_") :]

    def _config_metadata(self) -> dict[str, Any]:
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
                "  this metric: " + ", ".join(f"{name}={_shorten(value)}" for name, value in mine.items()),
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
            f"{type(self).__name__}.{where}: the state comes from a differently configured metric (a different "
            "configuration), whose values would be reported under this metric's names:\n" + "\n".join(lines) + "\n"
            "Load or merge only the states of a metric created with the same metrics, cutoffs, conventions and options."
        )

    def _check_states(self, where: str, states: Mapping[str, Any]) -> None:
        """The subclass's check that incoming states fit this metric (shapes); raises ValueError."""

    def _legacy_config(self, state_dict: dict, prefix: str) -> None:
        """Pop and check configuration keys that older versions wrote into the state_dict."""

    def _after_load(self) -> None:
        """Called after states were loaded from a state_dict."""

    def _upgrade_states(self, states: Mapping[str, Any]) -> dict[str, Any]:
        """States to add to an incoming state (a state_dict loaded, a state merged) that an older
        version did not write: ``{name: value}`` (none by default)."""
        return {}

    # ------------------------------------------------------------------ merge / load
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
                    f"merge_state takes a {type(self).__name__}, its metric_state or a state_dict, got "
                    f"{type(incoming_state).__name__}"
                )
            self._refuse_foreign("merge_state", incoming_state._config_metadata())
            incoming_state = incoming_state.metric_state
        elif isinstance(incoming_state, Mapping):
            metadata = getattr(incoming_state, "_metadata", None) or {}
            self._refuse_foreign("merge_state", (metadata.get("") or {}).get(CONFIG_METADATA))
        else:
            raise ValueError(
                f"merge_state takes a metric, its metric_state or a state_dict, got {type(incoming_state).__name__}"
            )
        self._merging = True
        try:
            self._reduce_states(dict(incoming_state))
        finally:
            self._merging = False

    def _combine_states(self, incoming_state: Mapping[str, Any], *, merging: bool) -> dict[str, Any]:
        """States that do not simply add up (a window's ring buffer): ``{name: combined value}`` of
        this metric's state and ``incoming_state`` (checked and upgraded), set after torchmetrics'
        reduction. ``merging``: ``merge_state``; otherwise ``forward``, where this metric holds the
        batch and ``incoming_state`` the data before it. None by default."""
        return {}

    def _reduce_states(self, incoming_state: dict[str, Any]) -> None:
        """torchmetrics' hook of ``merge_state`` and ``forward``: refuse a foreign fingerprint and
        states that do not fit (an incoming state without the fingerprint, e.g. a state_dict, is
        taken by shape), then torchmetrics' reduction (and :meth:`_combine_states`)."""
        for key in incoming_state:
            if isinstance(key, str) and key.startswith("_config_"):
                self._refuse_foreign("merge_state", None, key[len("_config_") :])
        self._check_states("merge_state", incoming_state)
        incoming_state = {**incoming_state, **self._upgrade_states(incoming_state)}
        combined = self._combine_states(incoming_state, merging=getattr(self, "_merging", False))
        super()._reduce_states({self._config_state: getattr(self, self._config_state), **incoming_state})
        for name, value in combined.items():
            setattr(self, name, value)

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
        """torchmetrics' loading, after refusing the state_dict of a differently configured metric
        (from its metadata, also when it holds no state)."""
        self._legacy_config(state_dict, prefix)
        states = {name: state_dict[prefix + name] for name in self._defaults if prefix + name in state_dict}
        # torch calls this hook with strict=True whatever load_state_dict was given: always checked
        self._refuse_foreign("load_state_dict", (local_metadata or {}).get(CONFIG_METADATA))
        if states:
            self._check_states("load_state_dict", states)
            for name, value in self._upgrade_states(states).items():
                state_dict[prefix + name] = value
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )
        if states:
            self._after_load()

    def _wrap_compute(self, compute: Callable) -> Callable:
        """torchmetrics' wrapper (sync, cache), its cache kept per argument: a ``compute(stderr=True)``
        after a ``compute()`` computes again rather than returning the cached result without errors."""
        wrapped = super()._wrap_compute(compute)

        @functools.wraps(compute)
        def keyed(*args: Any, **kwargs: Any) -> Any:
            key = (args, tuple(sorted(kwargs.items())))
            if getattr(self, "_computed_key", key) != key:
                self._computed = None
            self._computed_key = key
            return wrapped(*args, **kwargs)

        return keyed

    def persistent(self, mode: bool = False) -> None:
        """As torchmetrics' ``persistent``; the empty fingerprint state never enters the state_dict,
        so state_dicts keep their keys and load across library versions."""
        super().persistent(mode)
        self._persistent[self._config_state] = False

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickling (``pickle``, ``copy.deepcopy``, ``torch.load``, Lightning's ``ddp_spawn``): the
        states get storage of their own. ``torch.multiprocessing`` pickles CPU tensors into shared
        memory, so without the copy the processes of ``ddp_spawn`` would add into one state tensor
        (``update`` adds in place) and every process would count every other's data."""
        super().__setstate__(state)
        for name in self._defaults:
            value = getattr(self, name)
            if isinstance(value, Tensor):
                setattr(self, name, value.clone())
            elif isinstance(value, list):
                setattr(self, name, [v.clone() if isinstance(v, Tensor) else v for v in value])

    # ------------------------------------------------------------------ dtypes and devices
    def _apply(self, fn: Callable, *args: Any, **kwargs: Any) -> Metric:
        """Follow device moves, but keep the states and buffers of ``_kept_dtypes`` in their dtype
        whatever ``.half()`` / ``set_dtype`` do to floating states and buffers."""
        kept = {name: getattr(self, name, None) for name in self._kept_dtypes}
        this = super()._apply(fn, *args, **kwargs)
        for name, old in kept.items():
            new = getattr(this, name, None)
            if not isinstance(old, Tensor) or not isinstance(new, Tensor):
                continue
            if new.dtype != old.dtype:
                setattr(this, name, old.to(new.device))
            if name in this._defaults:
                this._defaults[name] = this._defaults[name].to(device=new.device, dtype=old.dtype)
        return this

    # ------------------------------------------------------------------ distributed
    def _synced(self) -> Any:
        """A context in which the states are synced as for ``compute`` (torchmetrics' private
        ``_to_sync`` / ``_should_unsync`` flags: ``sync_on_compute``, and no unsync inside ``forward``)."""
        return self.sync_context(should_sync=self._to_sync, should_unsync=self._should_unsync)

    def _sync_dist(self, dist_sync_fn: Callable = gather_all_tensors, process_group: Any | None = None) -> None:
        """One all-reduce for every summed state, plus the local sizes of the list states (so every
        rank learns whether any rank holds rows, and a metric without rows anywhere needs exactly one
        collective); then one gather per list state that holds rows, with its fixed dtype."""
        summed = [name for name, fx in self._reductions.items() if fx is dim_zero_sum]
        lists = [name for name, fx in self._reductions.items() if fx is dim_zero_cat]
        if (
            dist_sync_fn is not gather_all_tensors  # a custom gather (e.g. XLA): torchmetrics' generic path
            or len(summed) + len(lists) != len(self._reductions)
            or any(name not in self._list_states for name in lists)
            or not all(isinstance(getattr(self, name), Tensor) for name in summed)
        ):
            return super()._sync_dist(dist_sync_fn, process_group)
        group = process_group or self.process_group
        tensors = [getattr(self, name) for name in summed]
        device = tensors[0].device if tensors else self.device
        sizes = torch.tensor([float(_size(getattr(self, name))) for name in lists], dtype=torch.float64, device=device)
        packed = torch.cat([t.reshape(-1).to(torch.float64) for t in tensors] + [sizes])
        dist.all_reduce(packed, op=dist.ReduceOp.SUM, group=group)
        offset = 0
        for name, t in zip(summed, tensors):
            part = packed[offset : offset + t.numel()].reshape(t.shape)
            setattr(self, name, part if t.dtype == torch.float64 else part.round().to(t.dtype))
            offset += t.numel()
        for name, total in zip(lists, packed[offset:].tolist()):
            if total == 0:
                continue
            dtype, state = self._list_states[name], getattr(self, name)
            if _size(state) == 0:
                local = torch.zeros((0, *self._row_shape(name)), dtype=dtype, device=device)
            else:
                local = dim_zero_cat(state) if isinstance(state, list) else state
            setattr(self, name, torch.cat(dist_sync_fn(local.to(dtype), group=group)))
        return None

    def _row_shape(self, name: str) -> tuple[int, ...]:
        """The shape of one row of the list state ``name`` (an empty local part at sync)."""
        return ()

    # ------------------------------------------------------------------ plot (torchmetrics' convention)
    def _plot_name(self) -> str:
        """The y-axis label of :meth:`plot` (the class name; the one-measure classes add their cutoffs)."""
        return type(self).__name__

    def plot(self, val: PlotValue | None = None, ax: Axes | None = None) -> tuple[Figure, Axes]:
        """Plot one result, or a sequence of results (one per step), as torchmetrics' ``Metric.plot``.

        Needs matplotlib (``pip install "torch-rankeval[plot]"``) and draws with torchmetrics' own
        ``plot_single_or_multi_val``, exactly as torchmetrics' retrieval metrics do.

        Args:
            val: a result of :meth:`compute` (a scalar tensor, or a ``{key: scalar}`` dict for a
                metric with several values) or a sequence of them (drawn as curves over the steps).
                ``None`` (the default) plots :meth:`compute` now.
            ax: a matplotlib ``Axes`` to draw into; ``None`` opens a new figure.

        Returns:
            ``(fig, ax)``: the figure (``None`` when ``ax`` was given, as in torchmetrics) and the axes.

        Raises:
            ModuleNotFoundError: without matplotlib, naming the ``plot`` extra.

        Example:
            >>> import torch
            >>> from torch_rankeval import NDCG
            >>> metric = NDCG(k=2)
            >>> values = []
            >>> for _ in range(3):
            ...     values.append(metric(torch.tensor([[0.9, 0.1, 0.5]]), torch.tensor([[1, 0, 1]])))
            >>> fig, ax = metric.plot(values)        # one curve over the 3 steps
            >>> ax.get_ylabel(), ax.get_lines()[0].get_ydata().tolist()
            ('NDCG@2', [1.0, 1.0, 1.0])
        """
        try:
            import matplotlib  # noqa: F401
        except ImportError as err:
            raise ModuleNotFoundError(
                f"{type(self).__name__}.plot needs matplotlib, an optional dependency: "
                'pip install "torch-rankeval[plot]"'
            ) from err
        from torchmetrics.utilities.plot import plot_single_or_multi_val

        value = self.compute() if val is None else val
        if isinstance(value, Mapping):
            value = dict(value)
        elif isinstance(value, Sequence) and not isinstance(value, Tensor):
            value = [dict(v) if isinstance(v, Mapping) else v for v in value]
        fig, axes = plot_single_or_multi_val(
            value,  # type: ignore[arg-type]
            ax=ax,
            higher_is_better=self.higher_is_better,
            name=self._plot_name(),
            lower_bound=self.plot_lower_bound,
            upper_bound=self.plot_upper_bound,
            legend_name=self.plot_legend_name,
        )
        return fig, axes  # type: ignore[return-value]


def _save_config(module: ConfiguredMetric, state_dict: dict, prefix: str, local_metadata: dict) -> None:
    """state_dict hook: the configuration rides in the metadata, never as a key (module-level: picklable)."""
    local_metadata[CONFIG_METADATA] = module._config_metadata()


def _size(state: list | Tensor) -> int:
    return sum(t.shape[0] for t in state) if isinstance(state, list) else state.shape[0]


def _unquote(value: Any) -> str:
    return str(value).strip("'")


def _shorten(value: Any, width: int = 300) -> str:
    text = str(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _describe(x: Any) -> str:
    """A deterministic description of a configuration (the same in every process and session):
    callables by qualified name, mappings sorted, small tensors by value, large ones by a digest of
    their values; a dataclass field marked ``metadata={"fingerprint": "omit"}`` (it changes what
    ``compute`` reports, not what the states accumulate) is left out, one marked ``"when_set"`` (added
    after checkpoints were written) is left out at its default."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        parts = [
            f"{f.name}={_describe(getattr(x, f.name))}"
            for f in dataclasses.fields(x)
            if f.metadata.get("fingerprint") != "omit"
            and not (f.metadata.get("fingerprint") == "when_set" and getattr(x, f.name) == f.default)
        ]
        return f"{type(x).__name__}({','.join(parts)})"
    if isinstance(x, Mapping):
        return "{" + ",".join(sorted(f"{_describe(k)}:{_describe(v)}" for k, v in x.items())) + "}"
    if isinstance(x, (list, tuple)):
        return "[" + ",".join(_describe(v) for v in x) + "]"
    if isinstance(x, Tensor):
        values = x.detach().cpu().double().reshape(-1)
        if values.numel() > _DESCRIBED_ELEMENTS:
            digest = hashlib.sha1(values.numpy().tobytes()).hexdigest()[:16]
            return f"tensor({x.dtype},{tuple(x.shape)},sha1={digest})"
        return f"tensor({x.dtype},{tuple(x.shape)},{values.tolist()})"
    if callable(x) and not isinstance(x, type):
        return f"{getattr(x, '__module__', '')}.{getattr(x, '__qualname__', type(x).__qualname__)}"
    return repr(x)


def set_metric_options(metric: Metric, options: Mapping[str, Any]) -> None:
    """Set torchmetrics' ``Metric`` options (``sync_on_compute``, ``compute_on_cpu``, ...) on a built
    metric: torchmetrics copies ``sync_on_compute`` into its private ``_to_sync`` in ``__init__`` and
    reads that, so it is set there too.

    Example:
        >>> from torch_rankeval.metrics import NDCG
        >>> metric = NDCG(k=2)
        >>> set_metric_options(metric, {"sync_on_compute": False})
        >>> metric.sync_on_compute, metric._to_sync
        (False, False)
    """
    for name, value in options.items():
        setattr(metric, name, value)
    if "sync_on_compute" in options:
        metric._to_sync = bool(options["sync_on_compute"])
