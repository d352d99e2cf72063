"""Streaming position-debiased (inverse-propensity) DCG and nDCG for click logs.

:class:`PositionDebiasedNDCG` and :class:`PositionDebiasedDCG` are torchmetrics Metrics over
:func:`~torch_rankeval.functional.debiased.position_debiased_values` (the functional per-list
values; nothing is re-implemented here) with the library's running-mean states
(:class:`~torch_rankeval.metrics._running.RunningMeanMetric`): float64 ``sums`` and int64
``counts`` per cutoff, ``dist_reduce_fx="sum"``, one all-reduce per sync.

The static part of the propensity source (``eta``, a ``propensity_table`` or ``affine`` tables)
is fixed when the metric is created; the per-item part (``logged_positions``, or per-item
``propensities``) comes with each ``update``. Tables are non-persistent buffers that follow
``.to(device)`` and keep their dtype under ``set_dtype``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal, overload

import torch
from torch import Tensor

from torch_rankeval.conventions import resolve_convention
from torch_rankeval.kernels.debiased import NORMALIZE, position_debiased_values
from torch_rankeval.metrics._options import check_metric_options
from torch_rankeval.metrics._running import RunningMeanMetric, values_mode
from torch_rankeval.metrics.base import check_list_ids
from torch_rankeval.ranking.clicks import check_sources, raise_first, value_problems
from torch_rankeval.ranking.inputs import parse_k

__all__ = ["PositionDebiasedNDCG", "PositionDebiasedDCG"]

_STATIC = ("eta", "propensity_table", "affine")


class PositionDebiasedNDCG(RunningMeanMetric):
    """Mean position-debiased nDCG of a new ranking from logged clicks, as a streaming Metric.

    Each list (one logged impression, or one query's clicks aggregated over sessions) gets the
    debiased gains ``g = c / max(rho, clip)`` and the value ``DCG@k(g) / IDCG@k(g)``, where the
    DCG ranks ``g`` by ``preds`` (the ranker under evaluation) and the ideal sorts the same gains;
    ``compute`` returns the mean over the lists that were not skipped. The values are exactly those
    of :func:`~torch_rankeval.functional.position_debiased_ndcg` on all updates together.

    **Aggregate clicks per query before normalising.** nDCG computed per session and averaged is
    biased and does not converge (with one click per list the propensity cancels and it equals
    the naive click nDCG). Feed each update the per-query sums of ``c / rho``
    (:func:`~torch_rankeval.functional.aggregate_ips_gains`) as ``clicks`` with
    ``propensities=torch.ones_like(gains)``, or stream sessions into :class:`PositionDebiasedDCG`,
    whose mean over sessions is unbiased. What is estimated: nDCG with *linear* gain
    ``gamma = P(click | examined)``; unbiased in the limit only if the position-based model holds,
    the propensities are right (relative ``rho(p) / rho(1)`` suffice), ``rho > 0`` wherever gamma can
    be > 0, and ``clip`` is None. Top-k or stochastic loggers need policy-aware propensities
    ``E_pi[rho(position)]`` passed per item. See :mod:`torch_rankeval.functional.debiased`.

    Args:
        k: cutoff: None (whole list), an int, or a sequence of ints (``compute`` then returns
            ``(K,)``); ``k`` beyond the list is the whole list.
        clip: ``tau`` in (0, 1]: ``rho <- max(rho, tau)`` (weights at most ``1 / tau``; biased
            towards the naive metric). Default None.
        eta: position-based model ``rho = logged_position ** -eta`` (>= 0; 0 = naive clicks);
            ``update`` then takes ``logged_positions``.
        propensity_table: 1-D examination probability of each logged position (entry ``p - 1``
            for position ``p``); ``update`` then takes ``logged_positions``.
        affine: ``(alpha, beta)`` tables per logged position for the trust-bias correction
            ``(c - beta) / alpha`` (Vardasbi et al. 2020); ``update`` then takes
            ``logged_positions``. Per-item ``affine`` tensors can instead be passed to ``update``.
            At most one of ``eta``, ``propensity_table`` and ``affine``; with none of them,
            ``update`` takes per-item ``propensities`` (or per-item ``affine``).
        normalize: ``"ideal"`` (nDCG, default) or ``"none"`` (the debiased DCG).
        empty_target_action: lists whose ideal DCG is <= 0 (no click, all padding): ``"skip"``
            (default; most sessions have no click), ``"neg"`` (0), ``"pos"`` (1), ``"error"``.
        ties: tie policy for equal ``preds`` (library-wide; default ``"average"``).
        keep_per_query: also keep each list's values for :meth:`compute_per_query` (e.g. to
            bootstrap confidence intervals over queries).
        strata, stratum_weights: None (default) or the number of strata ``S`` (``update`` then takes
            ``strata=``, an integer ``0 <= h < S`` per list) and their population shares, as in
            :class:`~torch_rankeval.RankingMetrics`; :meth:`compute_per_stratum` gives the table.
        validate_args: run the checks that read values (one host sync per ``update``); False
            makes ``update`` free of host syncs (it compiles with ``torch.compile(fullgraph=True)``).
        window, half_life, window_unit: also report the lists of the last ``window`` updates (or
            lists) as ``"window/<key>"`` and exponentially decayed means as ``"decay/<key>"``, as in
            :class:`~torch_rankeval.RankingMetrics`; ``compute`` then returns a dict.
        kwargs: torchmetrics' ``Metric`` options (``process_group``, ``sync_on_compute``, ...); any
            other keyword is a ``TypeError`` naming it.

    ``compute`` returns a scalar, or ``(K,)`` for a sequence ``k`` (float32 unless ``set_dtype``).
    With no list counted (nothing updated, or every list skipped) it is NaN with a ``UserWarning``.

    Example:
        >>> import torch
        >>> from torch_rankeval import PositionDebiasedNDCG
        >>> metric = PositionDebiasedNDCG(k=[2, 4], eta=1.0)          # rho = 1 / logged position
        >>> metric.update(torch.tensor([[0.1, 0.4, 0.9, 0.2]]), torch.tensor([[1, 0, 1, 0]]),
        ...               logged_positions=torch.tensor([[1, 2, 3, 4]]))
        >>> metric.update(torch.tensor([[0.3, 0.2, 0.1, 0.0]]), torch.tensor([[0, 0, 0, 0]]),
        ...               logged_positions=torch.tensor([[1, 2, 3, 4]]))      # no click: skipped
        >>> metric.compute()
        tensor([0.8262, 0.9448])
    """

    _empty_reason: ClassVar[str] = "have no click (ideal DCG <= 0)"
    _nothing_counted_hint: ClassVar[str] = (
        "; lists without clicks are skipped: aggregate clicks per query (aggregate_ips_gains) or use "
        "empty_target_action='neg'"
    )
    _fixed_dtype_tensors: ClassVar[tuple[str, ...]] = ("_propensity_table", "_affine_alpha", "_affine_beta")
    _name: ClassVar[str] = "position_debiased_ndcg"

    ties: str
    normalize: str
    clip: float | None
    eta: float | None
    validate_args: bool

    def __init__(
        self,
        k: int | Sequence[int] | None = None,
        *,
        clip: float | None = None,
        eta: float | None = None,
        propensity_table: Tensor | None = None,
        affine: tuple[Tensor, Tensor] | None = None,
        normalize: str = "ideal",
        empty_target_action: str = "skip",
        ties: str | None = None,
        keep_per_query: bool = False,
        strata: int | None = None,
        stratum_weights: Sequence[float] | Tensor | None = None,
        validate_args: bool = True,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        check_metric_options(self, kwargs)
        super().__init__(**kwargs)
        self._ks, self._sequence_k = parse_k(k)
        if normalize not in NORMALIZE:
            raise ValueError(
                f"normalize={normalize!r} is not valid: use 'ideal' (nDCG, the ideal from the same debiased gains) "
                "or 'none' (DCG)"
            )
        self.ties = resolve_convention(None, gain="linear", ties=ties).ties
        if not isinstance(validate_args, bool):
            raise TypeError(f"validate_args must be a bool, got {type(validate_args).__name__}")
        self._static = _check_static_source(clip=clip, eta=eta, propensity_table=propensity_table, affine=affine)
        self.normalize = normalize
        self.clip = None if clip is None else float(clip)
        self.eta = None if eta is None else float(eta)
        self.validate_args = validate_args
        # Device-resident tables: non-persistent buffers that follow .to(device), in their own dtype.
        table = None if propensity_table is None else propensity_table.detach().to(self.device).clone()
        alpha, beta = (None, None) if affine is None else (t.detach().to(self.device).clone() for t in affine)
        for name, value in (("_propensity_table", table), ("_affine_alpha", alpha), ("_affine_beta", beta)):
            self.register_buffer(name, value, persistent=False)  # None: no table
        prefix = self._name if normalize == "ideal" else "position_debiased_dcg"
        self._add_running_states(
            [prefix if c is None else f"{prefix}@{c}" for c in self._ks],
            empty_target_action=empty_target_action,
            keep_per_query=keep_per_query,
            strata=strata,
            stratum_weights=stratum_weights,
            window=window,
            half_life=half_life,
            window_unit=window_unit,
            config={
                "clip": self.clip,
                "eta": self.eta,
                "propensity_table": table,
                "affine_alpha": alpha,
                "affine_beta": beta,
                "ties": self.ties,
            },
        )

    def _static_affine(self) -> tuple[Tensor, Tensor] | None:
        return None if self._affine_alpha is None else (self._affine_alpha, self._affine_beta)

    def _check_update_source(self, propensities: object, logged_positions: object, affine: object) -> None:
        """The per-item source must complete the static one given when the metric was created."""
        name = type(self).__name__
        if self._static is not None:
            if logged_positions is None or propensities is not None or affine is not None:
                raise ValueError(
                    f"this {name} was created with {self._static}=, so update takes logged_positions= (the 1-based "
                    "position of each item in the logged ranking) and no propensities= or affine=; for per-item "
                    f"propensities create the metric without {self._static}="
                )
        elif logged_positions is not None:
            raise ValueError(
                f"logged_positions= needs a position model: create the {name} with eta= (rho = position ** -eta), "
                "propensity_table= or affine=(alpha, beta) tables, or pass per-item propensities= instead"
            )
        elif propensities is None and affine is None:
            raise ValueError(
                "pass per-item propensities= (examination probabilities in the logged impression; all ones for "
                f"already debiased, aggregated gains), or create the {name} with eta= or propensity_table= and pass "
                "logged_positions="
            )

    def update(
        self,
        preds: Tensor,
        clicks: Tensor,
        *,
        propensities: Tensor | None = None,
        logged_positions: Tensor | None = None,
        affine: tuple[Tensor, Tensor] | None = None,
        mask: Tensor | None = None,
        indexes: Tensor | None = None,
        strata: Tensor | None = None,
    ) -> None:
        """Add a batch of lists.

        Args:
            preds: ``(N, L)`` scores of the ranker under evaluation (or ``(L,)``: one list).
            clicks: 0/1 clicks, counts or rates in the logged impression, same shape.
            propensities: per-item examination probabilities (metrics created without
                ``eta``/``propensity_table``/``affine``).
            logged_positions: 1-based logged positions (metrics created with ``eta``,
                ``propensity_table`` or ``affine`` tables).
            affine: per-item ``(alpha, beta)`` trust-bias correction instead of ``propensities``.
            mask: bool, False marks padding (never ranked, gain 0).
            indexes: optional ``(N,)`` global integer ids of the lists, for ``keep_per_query``
                (default: generated, ``rank + world_size * local_position``).
            strata: metrics created with ``strata=S`` (and only those): ``(N,)`` integer stratum
                ``0 <= h < S`` of each list (range checked with ``validate_args``).
        """
        self._check_device(preds)
        self._check_update_source(propensities, logged_positions, affine)
        with values_mode():  # eagerly in inference mode, as RankingMetrics' values
            values, empty = position_debiased_values(
                preds,
                clicks,
                self._ks,
                propensities=propensities,
                logged_positions=logged_positions,
                eta=self.eta,
                propensity_table=self._propensity_table,
                affine=self._static_affine() if affine is None else affine,
                clip=self.clip,
                mask=mask,
                normalize=self.normalize,
                ties=self.ties,
                validate_args=self.validate_args,
            )
        if indexes is not None:
            check_list_ids(indexes, preds)  # the list ids of RankingMetrics' padded input, with its messages
            indexes = indexes.reshape(-1).long()
        ids = indexes
        strata = self._check_update_strata(strata, values.shape[0], preds, validate=self.validate_args)
        self._accumulate(values, empty, ids, strata)

    @overload
    def compute(self, stderr: Literal[False] = False) -> Tensor: ...

    @overload
    def compute(self, stderr: Literal[True]) -> dict[str, Tensor]: ...

    def compute(self, stderr: bool = False) -> Tensor | dict[str, Tensor]:
        """Mean over the counted lists of all updates (and processes): a scalar, or ``(K,)``. With
        ``stderr``: ``{key: mean, "<key>/stderr": its standard error over the counted lists}``
        (``scipy.stats.sem`` of the per-list values; NaN under 2 lists). Created with ``window``,
        ``half_life`` or ``strata``: always a dict, the means with ``"window/<key>"`` /
        ``"decay/<key>"`` and ``"<key>/poststratified"`` / ``"<key>/stratum/<h>"`` beside (with
        their errors under ``stderr``).

        Example:
            >>> import torch
            >>> from torch_rankeval import PositionDebiasedNDCG
            >>> metric = PositionDebiasedNDCG(k=2)
            >>> metric.update(torch.tensor([[0.9, 0.1], [0.2, 0.8]]), torch.tensor([[1, 0], [1, 0]]),
            ...                propensities=torch.tensor([[1.0, 0.5], [1.0, 0.5]]))
            >>> sorted(metric.compute(stderr=True))
            ['position_debiased_ndcg@2', 'position_debiased_ndcg@2/stderr']
        """
        if stderr is not False or self._windowed or self.strata is not None:
            return self._with_stderr(stderr)
        means = self._means()
        return means if self._sequence_k else means[0]


class PositionDebiasedDCG(PositionDebiasedNDCG):
    """Mean position-debiased DCG ``sum_{rank <= k} g / log2(rank + 1)`` with ``g = c / max(rho, clip)``.

    An **unbiased** estimate, session by session, of the DCG@k with linear gain
    ``gamma = P(click | examined)`` of the ranking given by ``preds``: stream single sessions in,
    no aggregation needed (unlike the nDCG). Unbiased only if the position-based model holds, the
    propensities are right (relative propensities give "clicks at rank 1" units), ``rho > 0``
    wherever gamma can be > 0, and ``clip`` is None; the variance grows like ``1 / rho``. A list
    without clicks has DCG 0 and counts in the mean. Takes the arguments of
    :class:`PositionDebiasedNDCG` except ``normalize`` and ``empty_target_action``.

    Args:
        k: cutoff: None (whole list), an int, or a sequence of ints (``compute`` then returns ``(K,)``).
        clip, eta, propensity_table, affine: the propensity model, as in :class:`PositionDebiasedNDCG`
            (at most one of ``eta``, ``propensity_table`` and ``affine``; none: per-item
            ``propensities`` in ``update``).
        ties: tie policy for equal ``preds`` (default ``"average"``).
        keep_per_query: also keep each list's values for :meth:`compute_per_query`.
        strata, stratum_weights: strata of the lists and their population shares, as in
            :class:`PositionDebiasedNDCG`.
        validate_args: run the checks that read values (one host sync per ``update``).
        window, half_life, window_unit: the recent values, as in :class:`PositionDebiasedNDCG`.
        kwargs: torchmetrics' ``Metric`` options (``process_group``, ``sync_on_compute``, ...); any
            other keyword is a ``TypeError`` naming it.

    Example:
        >>> import torch
        >>> from torch_rankeval import PositionDebiasedDCG
        >>> metric = PositionDebiasedDCG(k=4, propensity_table=torch.tensor([1.0, 0.5, 1 / 3, 0.25]))
        >>> metric.update(torch.tensor([[0.1, 0.4, 0.9, 0.2], [0.3, 0.2, 0.1, 0.0]]),
        ...               torch.tensor([[1, 0, 1, 0], [0, 0, 0, 0]]),
        ...               logged_positions=torch.tensor([[1, 2, 3, 4], [1, 2, 3, 4]]))
        >>> metric.compute()                                          # (3 + 1 / log2(5) + 0) / 2
        tensor(1.7153)
    """

    _name: ClassVar[str] = "position_debiased_dcg"

    def __init__(
        self,
        k: int | Sequence[int] | None = None,
        *,
        clip: float | None = None,
        eta: float | None = None,
        propensity_table: Tensor | None = None,
        affine: tuple[Tensor, Tensor] | None = None,
        ties: str | None = None,
        keep_per_query: bool = False,
        strata: int | None = None,
        stratum_weights: Sequence[float] | Tensor | None = None,
        validate_args: bool = True,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        check_metric_options(self, kwargs)  # before the parent's, which takes empty_target_action (DCG reads none)
        super().__init__(
            k,
            clip=clip,
            eta=eta,
            propensity_table=propensity_table,
            affine=affine,
            normalize="none",
            empty_target_action="neg",
            ties=ties,
            keep_per_query=keep_per_query,
            strata=strata,
            stratum_weights=stratum_weights,
            validate_args=validate_args,
            window=window,
            half_life=half_life,
            window_unit=window_unit,
            **kwargs,
        )


def _check_static_source(*, clip: object, eta: object, propensity_table: object, affine: object) -> str | None:
    """Constructor checks of the static propensity source, with the functional's own checks and
    messages (types, ranges, table values: read once, here); returns its name (None: per-item)."""
    given = [name for name, v in zip(_STATIC, (eta, propensity_table, affine)) if v is not None]
    if len(given) > 1:
        raise ValueError(
            f"give at most one of eta=, propensity_table= and affine= (got {', '.join(given)}): each is a complete "
            "model of the examination probability at a logged position"
        )
    first = (
        propensity_table
        if propensity_table is not None
        else (affine[0] if isinstance(affine, (tuple, list)) and affine else None)
    )
    device = first.device if isinstance(first, Tensor) else torch.device("cpu")
    like = torch.zeros(1, device=device)
    positions = torch.ones(1, dtype=torch.int64, device=device) if given else None
    check_sources(
        like,
        like_name="propensity_table" if propensity_table is not None else "affine alpha",
        propensities=None if given else like,
        logged_positions=positions,
        eta=eta,
        propensity_table=propensity_table,
        affine=affine,
        clip=clip,
    )
    if given:
        raise_first(
            value_problems(
                like,
                torch.ones(1, dtype=torch.bool, device=device),
                propensities=None,
                logged_positions=positions,
                propensity_table=propensity_table,
                affine=affine,
            )
        )
    return given[0] if given else None
