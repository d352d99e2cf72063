"""Lightning integration: a callback that logs ranking metrics each evaluation epoch, exact under DDP.

This is the only module of the package that imports Lightning (``pip install "torch-rankeval[lightning]"``).

:class:`RankingMetricsCallback` reads what ``validation_step`` / ``test_step`` return, feeds one
:class:`~torch_rankeval.RankingMetrics` per stage (and per evaluation dataloader) kept on the
module's device, and at the end of each epoch logs ``val/ndcg@10``, ``val/map@10``, ... through
``pl_module.log_dict``: every Lightning logger, the progress bar, ``ModelCheckpoint(monitor=...)``
and ``EarlyStopping`` see them. The values are synced by the metric (one all-reduce of sums), so they
are identical on every process and exact when each query is evaluated by exactly one process — use
:class:`~torch_rankeval.sampler.UnpaddedDistributedSampler` in the evaluation dataloaders; the
callback warns when Lightning's default padding sampler would count queries twice.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, Union

from torch import Tensor
from torch.utils.data import DataLoader
from torchmetrics import Metric

if TYPE_CHECKING:  # one declared type for checkers (the package or the standalone one at run time)
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.utilities import rank_zero_warn
else:
    try:
        import lightning.pytorch as pl
        from lightning.pytorch.callbacks import Callback
        from lightning.pytorch.utilities import rank_zero_warn
    except ImportError:  # pragma: no cover - the standalone package
        try:
            import pytorch_lightning as pl
            from pytorch_lightning.callbacks import Callback
            from pytorch_lightning.utilities import rank_zero_warn
        except ImportError as _err:
            raise ModuleNotFoundError(
                "torch_rankeval.lightning needs Lightning: pip install 'torch-rankeval[lightning]'"
            ) from _err

from torch_rankeval.metrics import RankingMetrics
from torch_rankeval.metrics._hooks import set_metric_options
from torch_rankeval.metrics._options import METRIC_OPTIONS
from torch_rankeval.metrics._window import DECAY_PREFIX, WINDOW_PREFIX
from torch_rankeval.sampler import sharding_problem

__all__ = ["RankingMetricsCallback"]

STAGES = ("validate", "test")
#: ``"train"``: windowed values on training batches, every ``log_every_n_steps`` (off by default).
ALL_STAGES = (*STAGES, "train")
_HOOK_STAGE = {"validate": "validation", "test": "test", "train": "training"}
_DEFAULT_PREFIX = {"validate": "val/", "test": "test/", "train": "train/"}
_TRAIN_RESETS = ("epoch", "never")
_SHARDING_ACTIONS = ("warn", "error", "ignore")
_INPUTS = ("preds", "target", "mask", "indexes", "ideal_target", "n_relevant", "exclude")
_NO_UPDATE_WARNING = r"The ``compute`` method of metric .* was called before the ``update`` method"
#: How an epoch's values go to ``log_dict``: already synced by the metric, so ``sync_dist=False``.
_EPOCH_LOG: dict[str, Any] = dict(
    logger=None, on_step=False, on_epoch=True, sync_dist=False, add_dataloader_idx=False, batch_size=1
)
MetricFactory = Callable[[], Metric]
DEFAULT_METRICS = ("ndcg", "map")
DEFAULT_K = (5, 10)


class RankingMetricsCallback(Callback):
    """Log ranking metrics (nDCG@k, MAP@k, MRR, ...) at the end of every validation and test epoch.

    Args:
        metrics: what to compute: metric names as in :class:`~torch_rankeval.RankingMetrics`
            (``"ndcg"``, ``"map"``, ``"mrr"``, ``"precision"``, ``"recall"``, ``"hit_rate"``,
            ``"r_precision"``, ...; ``"ndcg@3"`` fixes the cutoff of one entry) computed under the
            default conventions; or a configured :class:`~torch_rankeval.RankingMetrics` (any
            conventions and options: ``RankingMetrics(("ndcg", "map"), k=10, convention="trec_eval",
            ignore_index=-1)``, or a single-metric class such as ``NDCG(k=10)``); or a zero-argument
            factory returning one (``lambda: RankingMetrics(...)``). Each stage and each evaluation
            dataloader gets a fresh metric of its own: the factory's result, or ``metric.clone()``
            (a deep copy, reset) of a configured metric, which the callback itself never updates. In
            a LightningCLI config, a configured metric is ``metrics: {class_path:
            torch_rankeval.RankingMetrics, init_args: {metrics: [ndcg, map], k: 10, convention:
            trec_eval}}``.
        k: cutoffs of the metric names without ``@``: None (whole list), an int or a sequence of
            ints. A configured metric has its own cutoffs: giving ``k`` with one is a ``ValueError``.
        stages: which loops to measure: ``"validate"`` (validation inside ``fit`` and
            ``trainer.validate``) and/or ``"test"`` (``trainer.test``), and ``"train"`` (off by
            default): the training batches, whose recent values are logged every
            ``Trainer(log_every_n_steps=...)`` steps (see ``train_window``).
        prefix: name prefix per stage, default ``{"validate": "val/", "test": "test/", "train":
            "train/"}``: keys are
            ``prefix + metric`` (``"val/ndcg@10"``), plus ``"/dataloader_idx_<i>"`` when a stage
            has several dataloaders (as Lightning names them).
        preds_key, target_key, mask_key, indexes_key, ideal_target_key, n_relevant_key, exclude_key: where the
            inputs of :meth:`RankingMetrics.update` are found. Each is looked up in what the step
            returned (a dict), then in the batch (if it is a dict), so a step may return only the
            scores: ``{"preds": scores}``, or the scores tensor itself. ``preds`` and ``target`` are
            required; the others are optional (None: never read). Defaults: ``"preds"``,
            ``"target"``, ``"mask"``, ``"indexes"``, ``"ideal_target"``, ``"n_relevant"`` — the
            batch keys of :func:`torch_rankeval.data.collate_queries` — and ``"exclude"``. A
            recommender's step returns the full-catalogue scores, a sparse target and
            ``exclude`` (the items seen in training): they pass through unchanged (top-k path).
        extra_metrics: more metrics to feed the same inputs each epoch, ``{name: factory}`` where
            ``factory()`` returns a torchmetrics ``Metric`` (e.g. ``lambda: NDCG(k=10,
            convention="trec_eval")``, or ``lambda: ItemExposure(num_items, k=20)``, whose ``update``
            takes no target). Its ``update`` gets the inputs its signature accepts; its
            ``compute()`` result is logged as ``prefix + name`` (a scalar) or ``prefix + name + "/" +
            key`` (a dict of scalars); non-scalar results land in :attr:`results` and
            :meth:`log_results`, which a subclass can override (to draw a figure, say).
        prog_bar: show the values in the progress bar (default True).
        position_profile: also profile ranking quality at positions ``1..P`` each epoch (a
            :class:`~torch_rankeval.PositionProfile` with the metric's conventions, ``ignore_index``,
            ``input_format`` and ``validate_args``): logs
            ``prefix + "profile/<stat>@<p>"`` (model and ``ideal_``), the relevance-inversion
            scalars ``prefix + "inversion@1-3_vs_5-8"`` (lower band's mean relevance minus the upper
            band's: positive = inverted) for ``profile_bands`` (default: 4 equal bands), and, to
            loggers whose ``experiment`` has ``add_figure`` (TensorBoard), the profile figure
            ``prefix + "position_profile"`` (needs matplotlib, the ``plot`` extra).
        profile_bands: the position bands compared by the inversion report, e.g. ``["1-3", "5-8"]``.
        profile_figure: send the profile figure to loggers that take figures (default True).
        on_inexact_sharding: ``"warn"`` (default), ``"error"`` or ``"ignore"`` when, with several
            processes, an evaluation dataloader would score some samples twice, drop some, or let
            every process evaluate everything (see :func:`torch_rankeval.sampler.sharding_problem`).
            A setup that would hang (a process without any sample) raises a ``ValueError`` whatever
            this says.
        train_window, train_half_life, train_window_unit: the recent values logged on training
            batches (stage ``"train"``): the metric's ``window`` (default 100 updates),
            ``half_life`` (default None) and ``window_unit``, for a metric built from names; a
            configured metric (or factory) brings its own and must have a ``window`` or
            ``half_life``. What ``training_step`` returns is read as for the other stages (a dict
            with ``"loss"`` and the scores, say; target and mask may come from the batch). Logged
            with ``on_step=True``: ``train/window/ndcg@10`` (and ``train/decay/...``), computed (one
            all-reduce under DDP) only on the steps Lightning logs.
        train_reset: when the training metric starts again: ``"epoch"`` (default, at the start of
            every training epoch) or ``"never"`` (one window over the whole fit; it is saved in the
            callback's checkpoint state and restored on resume: on global rank 0 only, under
            several processes, the others start empty, as each process's window is its own).

    Each epoch starts from empty metrics (reset at the start and after the end of every epoch).
    During the sanity check of ``fit`` the metrics are updated and computed, so that a wrong step
    output or a sync problem fails before training starts, but nothing is logged: Lightning
    discards what is logged during the sanity check. The metrics live on the callback, not on the
    LightningModule, so the module's ``state_dict`` is unchanged; the callback's own checkpoint state
    is its configuration (checked on resume) and the last results.

    Under DDP each process updates the metrics with its own batches and ``compute`` adds the
    processes' sums with one all-reduce, so the logged values are identical on every process and
    are logged with ``sync_dist=False`` (Lightning's hint to set ``sync_dist=True`` is silenced for
    these keys: a second, averaging sync would only add rounding). They are exact when every query
    is evaluated by exactly one process: give the evaluation dataloaders an
    :class:`~torch_rankeval.sampler.UnpaddedDistributedSampler`.

    Example:
        >>> import lightning.pytorch as pl, torch
        >>> from torch.utils.data import DataLoader
        >>> from torch_rankeval.data import collate_queries, synthetic_ltr
        >>> from torch_rankeval.lightning import RankingMetricsCallback
        >>> class Constant(pl.LightningModule):      # scores every document 0: a random ranker
        ...     def validation_step(self, batch, batch_idx):
        ...         return {"preds": torch.zeros_like(batch["target"])}   # target and mask: from the batch
        >>> loader = DataLoader(synthetic_ltr(20, seed=3), batch_size=8, collate_fn=collate_queries)
        >>> callback = RankingMetricsCallback(metrics=("ndcg", "mrr"), k=10)
        >>> trainer = pl.Trainer(accelerator="cpu", callbacks=[callback], logger=False, enable_progress_bar=False,
        ...                      enable_model_summary=False)
        >>> _ = trainer.validate(Constant(), loader, verbose=False)
        >>> {key: round(value.item(), 4) for key, value in trainer.callback_metrics.items()}
        {'val/ndcg@10': 0.3815, 'val/mrr@10': 0.6727}

        Other conventions come with a configured metric (cloned for each stage and dataloader):

        >>> from torch_rankeval import RankingMetrics
        >>> callback = RankingMetricsCallback(RankingMetrics(("ndcg@10", "map"), convention="trec_eval"))
        >>> callback.metric_keys, callback.build_metrics().convention.gain
        (['ndcg@10', 'map'], 'linear')
    """

    stages: tuple[str, ...]
    prefix: dict[str, str]
    input_keys: dict[str, Optional[str]]
    on_inexact_sharding: str
    prog_bar: bool
    extra_metrics: dict[str, MetricFactory]
    position_profile: Optional[int]
    profile_bands: Optional[list[Any]]
    profile_figure: bool

    def __init__(
        self,
        metrics: Union[str, Sequence[str], RankingMetrics, Callable[[], RankingMetrics]] = DEFAULT_METRICS,
        k: Union[int, Sequence[int], None] = DEFAULT_K,
        stages: Union[str, Sequence[str]] = STAGES,
        *,
        prefix: Optional[Mapping[str, str]] = None,
        preds_key: str = "preds",
        target_key: str = "target",
        mask_key: Optional[str] = "mask",
        indexes_key: Optional[str] = "indexes",
        ideal_target_key: Optional[str] = "ideal_target",
        n_relevant_key: Optional[str] = "n_relevant",
        exclude_key: Optional[str] = "exclude",
        extra_metrics: Optional[Mapping[str, MetricFactory]] = None,
        prog_bar: bool = True,
        on_inexact_sharding: str = "warn",
        position_profile: Optional[int] = None,
        profile_bands: Optional[Sequence[Any]] = None,
        profile_figure: bool = True,
        train_window: Optional[int] = 100,
        train_half_life: Optional[float] = None,
        train_window_unit: str = "updates",
        train_reset: str = "epoch",
    ) -> None:
        super().__init__()
        stages = (stages,) if isinstance(stages, str) else tuple(stages)
        bad = [s for s in stages if s not in ALL_STAGES]
        if bad or not stages:
            raise ValueError(f"stages must be a non-empty subset of {ALL_STAGES}, got {stages!r}")
        self.stages = stages
        self.prefix = {**_DEFAULT_PREFIX, **dict(prefix or {})}
        for stage, p in self.prefix.items():
            if stage not in ALL_STAGES or not isinstance(p, str):
                raise ValueError(f"prefix must map stages {ALL_STAGES} to strings, got {dict(prefix or {})!r}")
        if train_reset not in _TRAIN_RESETS:
            raise ValueError(f"train_reset must be one of {_TRAIN_RESETS}, got {train_reset!r}")
        self.train_reset = train_reset
        self._train_window = {"window": train_window, "half_life": train_half_life, "window_unit": train_window_unit}
        given = (preds_key, target_key, mask_key, indexes_key, ideal_target_key, n_relevant_key, exclude_key)
        keys = dict(zip(_INPUTS, given))
        for name, key in keys.items():
            required = name in ("preds", "target")
            if not (isinstance(key, str) and key) and not (key is None and not required):
                raise ValueError(f"{name}_key must be a non-empty string{'' if required else ' or None'}, got {key!r}")
        self.input_keys = keys
        if on_inexact_sharding not in _SHARDING_ACTIONS:
            raise ValueError(f"on_inexact_sharding must be one of {_SHARDING_ACTIONS}, got {on_inexact_sharding!r}")
        self.on_inexact_sharding = on_inexact_sharding
        self.prog_bar = bool(prog_bar)
        self.extra_metrics = dict(extra_metrics or {})
        for name, factory in self.extra_metrics.items():
            if not isinstance(name, str) or not name or not callable(factory):
                raise TypeError(
                    f"extra_metrics must map names to callables that return a Metric, got {name!r}: {factory!r}"
                )
        if position_profile is not None and (
            isinstance(position_profile, bool) or not isinstance(position_profile, int) or position_profile <= 0
        ):
            raise ValueError(
                f"position_profile must be None or a positive int (positions to profile), got {position_profile!r}"
            )
        self.position_profile = position_profile
        self.profile_bands = None if profile_bands is None else list(profile_bands)
        self.profile_figure = bool(profile_figure)
        if isinstance(metrics, RankingMetrics) or (callable(metrics) and not isinstance(metrics, str)):
            if (tuple(k) if isinstance(k, (list, tuple)) else k) != DEFAULT_K:  # a config file gives lists
                raise ValueError(
                    f"k={k!r} sets the cutoffs of metric names; a configured RankingMetrics has its own: give them "
                    "to it (RankingMetrics(..., k=...)) and leave k out"
                )
            self._names: Optional[tuple[Any, Any]] = None
            self._metric = metrics
        else:
            self._names = (metrics, k)
            self._metric = None
        template = self._template = self.build_metrics()  # fails now, not at the first epoch end, on a bad argument
        if position_profile is not None:
            self.extra_metrics[_PROFILE] = self._build_profile
            self._build_profile()
        self._train_metric: Optional[RankingMetrics] = self.build_train_metrics() if "train" in stages else None
        self._train_state: Optional[dict[str, Any]] = None  # restored from a checkpoint, loaded when built
        self.metric_keys: list[str] = list(template.keys)
        self._convention = template.convention
        self._slots: dict[str, list[dict[str, Metric]]] = {stage: [] for stage in STAGES}
        self._checked: set[tuple[str, int]] = set()
        self.results: dict[str, dict[str, Tensor]] = {}
        """The last epoch's values per stage (``{"validate": {"val/ndcg@10": tensor, ...}}``), including
        non-scalar results of ``extra_metrics``; not updated during the sanity check."""

    # ------------------------------------------------------------------ construction
    def build_metrics(self, **overrides: Any) -> RankingMetrics:
        """A new, empty :class:`~torch_rankeval.RankingMetrics` configured as this callback's: built
        from the metric names, the factory's result or a clone of the configured metric.

        ``overrides``: with metric names, any argument of ``RankingMetrics``; with a configured
        metric or a factory, torchmetrics' ``Metric`` options only (e.g. ``sync_on_compute=False``
        for a value computed in each process alone).
        """
        if self._names is not None:
            return RankingMetrics(*self._names, **overrides)
        if isinstance(self._metric, RankingMetrics):
            metric = self._metric.clone()
            metric.reset()
        else:
            metric = self._metric()
            if not isinstance(metric, RankingMetrics):
                raise TypeError(
                    f"RankingMetricsCallback: the metrics factory must return a RankingMetrics, got {type(metric).__name__}"
                    " (other metrics go to extra_metrics={name: factory})"
                )
        unknown = sorted(set(overrides) - set(METRIC_OPTIONS))
        if unknown:
            raise TypeError(
                f"RankingMetricsCallback.build_metrics: {unknown} cannot override a configured RankingMetrics; only "
                f"torchmetrics' Metric options ({', '.join(METRIC_OPTIONS)}) can. Configure the metric itself."
            )
        set_metric_options(metric, overrides)
        return metric

    def build_train_metrics(self) -> RankingMetrics:
        """A new, empty metric for the training batches (stage ``"train"``): built from the metric
        names with ``train_window`` / ``train_half_life`` / ``train_window_unit``, or the configured
        metric's clone or factory's result, which must have a ``window`` or a ``half_life``."""
        if self._names is not None:
            return RankingMetrics(*self._names, **self._train_window)
        metric = self.build_metrics()
        if metric.window is None and metric.half_life is None:
            raise ValueError(
                "RankingMetricsCallback: stage 'train' logs the recent values of the training batches, but the configured "
                "metric has no window: create it with window= (or half_life=), e.g. RankingMetrics(..., window=100)"
            )
        return metric

    def _build_profile(self) -> Metric:
        from torch_rankeval.metrics.position_profile import PositionProfile

        template = self._template
        return PositionProfile(
            self.position_profile,
            convention=template.convention,
            ignore_index=template.ignore_index,
            input_format=template.input_format,
            validate_args=template.validate_args,
        )

    def _new_slot(self, device: Any) -> dict[str, Metric]:
        slot: dict[str, Metric] = {"": self.build_metrics().to(device)}
        for name, factory in self.extra_metrics.items():
            metric = factory()
            if not isinstance(metric, Metric):
                raise TypeError(
                    f"extra_metrics[{name!r}]() must return a torchmetrics Metric, got {type(metric).__name__}"
                )
            slot[name] = metric.to(device)
        return slot

    @property
    def state_key(self) -> str:
        # Identity = where it logs (two callbacks with the same prefixes would log the same keys).
        # Metrics and conventions are not part of it, so that a checkpoint written with others is
        # still matched and load_state_dict can warn about the difference.
        return self._generate_state_key(stages=self.stages, prefix=tuple(sorted(self.prefix.items())))

    def _config(self) -> dict[str, Any]:
        def describe(value: Any) -> Any:
            if callable(value) and not isinstance(value, type):
                return getattr(value, "__qualname__", type(value).__qualname__)
            if isinstance(value, Mapping):
                return sorted((str(k), describe(v)) for k, v in value.items())
            return value

        convention = {f.name: describe(getattr(self._convention, f.name)) for f in dataclasses.fields(self._convention)}
        return {
            "metrics": list(self.metric_keys),
            "convention": convention,
            "extra_metrics": sorted(self.extra_metrics),
        }

    # ------------------------------------------------------------------ Lightning hooks
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        # Lightning suggests sync_dist=True for every tensor logged at epoch level under DDP. Our
        # values are already synced (and identical on every process): silence that hint for our
        # keys only, in this process (setup runs in every DDP worker).
        prefixes = "|".join(re.escape(p) for s, p in self.prefix.items() if s in self.stages)
        names = [r"(?:window/|decay/)?" + re.escape(k) for k in self.metric_keys] + [
            re.escape(n) + r"(?:/[^']*)?" for n in self.extra_metrics
        ]
        if self.position_profile is not None:
            names.append(r"inversion@[^']*")
        key = rf"(?:{prefixes})(?:{'|'.join(names)})(?:/dataloader_idx_\d+)?"
        warnings.filterwarnings(
            "ignore", message=rf"It is recommended to use `self\.log\('{key}', \.\.\., sync_dist=True\)`"
        )

    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._epoch_start("validate", trainer, pl_module)

    def on_test_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._epoch_start("test", trainer, pl_module)

    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._update("validate", pl_module, outputs, batch, dataloader_idx)

    def on_test_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._update("test", pl_module, outputs, batch, dataloader_idx)

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._epoch_end("validate", trainer, pl_module)

    def on_test_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._epoch_end("test", trainer, pl_module)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        metric = self._train_metric
        if metric is None:
            return
        metric.to(pl_module.device)
        if self.train_reset == "epoch":
            metric.reset()
        if self._train_state is not None:  # a resumed fit: this process's window as saved (rank 0's)
            if trainer.global_rank == 0 and self.train_reset == "never":
                metric._check_states("load_state_dict", self._train_state)
                for name, value in self._train_state.items():
                    setattr(metric, name, value.to(getattr(metric, name).device))
            self._train_state = None

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        metric = self._train_metric
        if metric is None:
            return
        if isinstance(outputs, Mapping):  # the loss is not a metric input
            outputs = {k: v for k, v in outputs.items() if k != "loss"}
        elif isinstance(outputs, Tensor):  # the loss alone: the scores must come from the batch
            outputs = {}
        inputs = self._inputs("train", outputs, batch, metric.sums.device)
        preds, target = inputs.pop("preds"), inputs.pop("target")
        _feed(metric, preds, target, inputs)
        if not _should_log(trainer):
            return
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_NO_UPDATE_WARNING)
            values = metric.compute()
        prefix = self.prefix["train"]
        recent = {
            prefix + key: value
            for key, value in values.items()
            if key.startswith((WINDOW_PREFIX, DECAY_PREFIX)) and isinstance(value, Tensor) and value.numel() == 1
        }
        if recent:
            pl_module.log_dict(recent, prog_bar=self.prog_bar, **{**_EPOCH_LOG, "on_step": True, "on_epoch": False})

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        for slots in self._slots.values():
            for slot in slots:
                for metric in slot.values():
                    metric.reset()

    def state_dict(self) -> dict[str, Any]:
        """The configuration (checked when a checkpoint is loaded) and the last results."""
        results = {stage: {k: v.detach().cpu() for k, v in values.items()} for stage, values in self.results.items()}
        state: dict[str, Any] = {"config": self._config(), "results": results}
        if self._train_metric is not None and self.train_reset == "never":
            metric = self._train_metric
            state["train_metric"] = {
                name: getattr(metric, name).detach().cpu()
                for name in metric._window_states + ("sums", "squares", "counts")
            }
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the last results; warn when the checkpoint was written with other metrics or conventions."""
        saved = state_dict.get("config")
        if saved is not None and saved != self._config():
            rank_zero_warn(
                f"RankingMetricsCallback: the checkpoint was written with {saved}, this callback computes "
                f"{self._config()}. Values logged before and after resuming are not comparable, and a "
                "ModelCheckpoint/EarlyStopping monitoring them compares different quantities.",
                category=UserWarning,
            )
        self.results = {stage: dict(values) for stage, values in state_dict.get("results", {}).items()}
        self._train_state = state_dict.get("train_metric")

    # ------------------------------------------------------------------ epoch logic
    def _epoch_start(self, stage: str, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if stage not in self.stages:
            return
        n_loaders = len(trainer.num_val_batches if stage == "validate" else trainer.num_test_batches)
        slots = self._slots[stage]
        del slots[max(n_loaders, 1) :]  # this loop's loaders only: not the slots of an earlier fit's loaders
        while len(slots) < max(n_loaders, 1):
            slots.append(self._new_slot(pl_module.device))
        for slot in slots:
            for metric in slot.values():
                metric.to(pl_module.device)
                metric.reset()
        self._check_sharding(stage, trainer)

    def _check_sharding(self, stage: str, trainer: pl.Trainer) -> None:
        if trainer.world_size <= 1:
            return
        loaders = trainer.val_dataloaders if stage == "validate" else trainer.test_dataloaders
        if isinstance(loaders, DataLoader) or loaders is None:
            loaders = [loaders]
        elif isinstance(loaders, Mapping):
            loaders = list(loaders.values())
        for i, loader in enumerate(loaders):
            if loader is None or (stage, id(loader)) in self._checked:
                continue
            self._checked.add((stage, id(loader)))
            problem = sharding_problem(loader, trainer.world_size)
            if problem is None or (self.on_inexact_sharding == "ignore" and not problem.fatal):
                continue
            which = (
                f"{_HOOK_STAGE[stage]} dataloader {i}" if len(loaders) > 1 else f"the {_HOOK_STAGE[stage]} dataloader"
            )
            if problem.fatal:  # the sampler repeats nothing already: too few samples for the processes
                advice = (
                    "Its sampler is not the problem: evaluate on at most as many processes as samples (e.g. a "
                    "separate Trainer(devices=...) for validation/test), or give the data set one sample per process"
                )
            else:
                advice = (
                    "Give it a non-repeating sampler: "
                    "DataLoader(dataset, sampler=torch_rankeval.sampler.UnpaddedDistributedSampler(dataset), ...) "
                    "(Lightning keeps it; the training dataloader still gets Lightning's own sampler)"
                )
            message = f"RankingMetricsCallback: {which}: {problem}. {advice}."
            if self.on_inexact_sharding == "error" or problem.fatal:
                raise ValueError(message)
            rank_zero_warn(message, category=UserWarning)

    def _update(self, stage: str, pl_module: pl.LightningModule, outputs: Any, batch: Any, dataloader_idx: int) -> None:
        if stage not in self.stages:
            return
        slots = self._slots[stage]
        while len(slots) <= dataloader_idx:  # a loader Lightning did not announce; keep it consistent anyway
            slots.append(self._new_slot(pl_module.device))
        slot = slots[dataloader_idx]
        inputs = self._inputs(stage, outputs, batch, slot[""].sums.device)
        preds, target = inputs.pop("preds"), inputs.pop("target")
        for metric in slot.values():
            _feed(metric, preds, target, inputs)

    def _inputs(self, stage: str, outputs: Any, batch: Any, device: Any) -> dict[str, Tensor]:
        """The metric inputs of one batch: from the step's output, else from the batch."""
        step = f"{_HOOK_STAGE[stage]}_step"
        sources: list[Mapping] = []
        if isinstance(outputs, Tensor):
            sources.append({self.input_keys["preds"]: outputs})
        elif isinstance(outputs, Mapping):
            sources.append(outputs)
        elif outputs is not None:
            raise TypeError(
                f"RankingMetricsCallback: {step} returned a {type(outputs).__name__}; return a dict such as "
                f"{{'{self.input_keys['preds']}': scores, '{self.input_keys['target']}': grades, "
                f"'{self.input_keys['mask'] or 'mask'}': mask}} (or the scores tensor, with the grades in the batch)"
            )
        if isinstance(batch, Mapping):
            sources.append(batch)
        found: dict[str, Tensor] = {}
        for name, key in self.input_keys.items():
            if key is None:
                continue
            for source in sources:
                if key in source and source[key] is not None:
                    value = source[key]
                    found[name] = value.detach() if isinstance(value, Tensor) else value
                    break
            else:
                if name in ("preds", "target"):
                    where = "the dict it returned" if isinstance(outputs, Mapping) else "its output"
                    raise KeyError(
                        f"RankingMetricsCallback: no {key!r} in {where} or in the batch. {step} must return the scores "
                        f"and grades, e.g. {{'{self.input_keys['preds']}': scores, '{self.input_keys['target']}': "
                        f"grades}}, or name them with {name}_key=..."
                    )
        return {name: v.to(device, non_blocking=True) if isinstance(v, Tensor) else v for name, v in found.items()}

    def _epoch_end(self, stage: str, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if stage not in self.stages:
            return
        slots = self._slots[stage]
        prefix = self.prefix[stage]
        results: dict[str, Tensor] = {}
        for i, slot in enumerate(slots):
            suffix = f"/dataloader_idx_{i}" if len(slots) > 1 else ""
            for name, metric in slot.items():
                with warnings.catch_warnings():
                    # a process without batches of this loader is fine: the sync adds the others
                    warnings.filterwarnings("ignore", message=_NO_UPDATE_WARNING)
                    value = metric.compute()
                metric.reset()
                if not name and not isinstance(value, Mapping):  # a single-metric class: its keys
                    value = dict(zip(metric.keys, value.reshape(-1).unbind()))
                if isinstance(value, Mapping):
                    head = f"{prefix}{name}/" if name else prefix
                    results.update({f"{head}{key}{suffix}": v for key, v in value.items()})
                else:
                    results[f"{prefix}{name}{suffix}"] = value
        if trainer.sanity_checking:
            return
        self.results[stage] = results
        self.log_results(trainer, pl_module, stage, results)

    def log_results(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str, results: dict[str, Tensor]
    ) -> None:
        """Log one epoch's results (override to log non-scalar results of ``extra_metrics`` elsewhere).

        The default logs every scalar with ``pl_module.log_dict`` (on epoch, ``sync_dist=False``:
        the values are already synced) and skips the rest.
        """
        scalars = {
            key: value.reshape(()) if value.is_floating_point() else value.reshape(()).float()  # counts too
            for key, value in results.items()
            if isinstance(value, Tensor) and value.numel() == 1
        }
        if scalars:
            pl_module.log_dict(scalars, prog_bar=self.prog_bar, **_EPOCH_LOG)
        if self.position_profile is not None:
            self._log_profile(trainer, pl_module, stage, results)

    def _log_profile(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str, results: dict[str, Tensor]
    ) -> None:
        """Profile scalars and inversion scalars for every logger; the figure for loggers that take one."""
        from torch_rankeval.diagnostics import inversion_report, profile_scalars

        prefix = self.prefix[stage]
        head = f"{prefix}{_PROFILE}/"
        profiles: dict[str, dict[str, Tensor]] = {}
        for key, value in results.items():
            if key.startswith(head):
                stat, _, loader = key[len(head) :].partition("/")
                profiles.setdefault(f"/{loader}" if loader else "", {})[stat] = value
        for suffix, profile in profiles.items():
            report = inversion_report(profile, self.profile_bands)
            scalars = {
                (key if key.startswith(head) else prefix + key) + suffix: value
                for key, value in profile_scalars(profile, report, prefix=head).items()
            }
            pl_module.log_dict(scalars, prog_bar=False, **_EPOCH_LOG)
            if self.profile_figure and trainer.is_global_zero:
                self._log_profile_figure(trainer, f"{prefix}position_profile{suffix}", profile, report)

    def _log_profile_figure(self, trainer: pl.Trainer, tag: str, profile: dict[str, Tensor], report: Any) -> None:
        takers = [lg.experiment for lg in trainer.loggers if hasattr(getattr(lg, "experiment", None), "add_figure")]
        if not takers:
            return
        try:
            from torch_rankeval.plotting import plot_position_profile

            figure = plot_position_profile(profile, report=report)
        except ImportError as err:  # matplotlib missing: scalars are logged, the figure is not
            warnings.warn(
                f"RankingMetricsCallback: no position-profile figure ({err}); set profile_figure=False to silence",
                UserWarning,
                stacklevel=2,
            )
            self.profile_figure = False
            return
        for experiment in takers:
            experiment.add_figure(tag, figure, global_step=trainer.current_epoch)


_PROFILE = "profile"


def _should_log(trainer: pl.Trainer) -> bool:
    """Whether Lightning sends this training step's logs to the loggers (``log_every_n_steps``)."""
    connector = getattr(trainer, "_logger_connector", None)
    flag = getattr(connector, "should_update_logs", None)
    if isinstance(flag, bool):
        return flag or bool(getattr(trainer, "fast_dev_run", False))
    every = trainer.log_every_n_steps
    return bool(every) and (trainer.global_step % every == 0)


def _feed(metric: Metric, preds: Tensor, target: Tensor, inputs: dict[str, Any]) -> None:
    """``metric.update`` with the keyword inputs it accepts (all of them if it takes ``**kwargs``); a
    metric of the scores alone (no ``target`` parameter, e.g. ``ItemExposure``) gets no target."""
    params = inspect.signature(metric.update).parameters
    if not any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values()):
        inputs = {k: v for k, v in inputs.items() if k in params}
    if "target" in params:
        metric.update(preds, target, **inputs)
    else:
        metric.update(preds, **inputs)
