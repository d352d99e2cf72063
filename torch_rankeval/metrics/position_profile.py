"""Quality by rank position: the mean relevance, gain, relevant share and DCG contribution at ranks 1..P.

:class:`PositionProfile` is the ranking "CT scan": instead of one number per query it reports what
the model places at each rank, next to what the ideal ranking would place there, so the positions
where the ranking goes wrong are visible (see :mod:`torch_rankeval.diagnostics` for the inversion
report and :mod:`torch_rankeval.plotting` for the figures).

It is a Metric of its own on the library's running-sum base
(:class:`~torch_rankeval.metrics._running.RunningMeanMetric`: float64 sums with one all-reduce per
sync, ``keep_per_query``), whose per-query "values" are per-position statistics of the ranked view
(one sort per update). It reads its input as :class:`~torch_rankeval.RankingMetrics` does (padded
or flat input, global query ids, flat documents pending until ``compute``, the device-resident
discount and gain tables) with the same methods, which it takes from that class: one input
stage for both (``_read_input``: the same checks and messages, the forgotten ``indexes=`` included),
and the same ranking (``prepare``); its per-position statistics are not registry measures, so no
measure plan here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.measures.plan import densified
from torch_rankeval.measures.reduction import empty_policy
from torch_rankeval.metrics._options import check_metric_options
from torch_rankeval.metrics._running import RunningMeanMetric, values_mode
from torch_rankeval.metrics.base import _FLAT_STATES, RankingMetrics, _input_options
from torch_rankeval.ranking.inputs import prepare, valid_mask
from torch_rankeval.ranking.sparse import is_sparse
from torch_rankeval.ranking.view import RankedBatch

__all__ = ["PositionProfile", "PROFILE_STATS"]

#: The per-position statistics, in the order of the states.
PROFILE_STATS = ("relevance", "gain", "relevant_share", "dcg_contribution")
_PRESENT = "present"  # internal: 1 where a query has a document at the position (never "empty")


class PositionProfile(RunningMeanMetric):
    """Mean relevance, gain, relevant share and DCG contribution at each rank position ``1..P``.

    For every rank position ``p`` in ``1..positions`` the metric reports, over all queries seen (all
    updates, all processes):

    - ``relevance``: the mean grade of the document ranked at ``p``;
    - ``gain``: its mean gain (the convention's ``gain``, default ``2**rel - 1``);
    - ``relevant_share``: the share of queries whose document at ``p`` is relevant (binary relevance
      under ``relevance_threshold``);
    - ``dcg_contribution``: the mean of ``gain * discount(p)``, the position's share of DCG;
    - ``count``: the number of queries that have a document at ``p``;

    and, with ``ideal=True``, the same statistics for the ideal ranking (``ideal_relevance``, ...,
    ``ideal_count``: the judged documents sorted by decreasing gain, as in IDCG), so the gap per
    position is visible. ``n_queries`` is the number of queries (lists) seen.

    **Padding and short lists.** Each mean at position ``p`` is taken over the queries that have a
    document at ``p`` (``count[p]`` of them); a shorter list does not pull deeper positions towards 0.
    Positions that no query reaches (``positions`` beyond every list) have ``count`` 0 and NaN means
    (a mean over nothing; no warning). The profile is therefore "what a user sees at slot p", and
    ``(dcg_contribution * count).nansum() / n_queries`` is the mean DCG@P over all queries. The ideal
    ranking is present at ``p`` when the query has at least ``p`` judged documents: the list itself,
    or ``ideal_target`` entries that are not ``ignore_index`` (pad ``ideal_target`` with
    ``ignore_index`` to keep padding out of ``ideal_count``; padding with 0 counts as judged
    non-relevant documents, which leaves IDCG unchanged but lowers the ideal means).

    **Ties.** Under ``ties="average"`` (default) each statistic is its expected value over all orders
    of tied documents (a tie group spreads its mean over its positions); other policies rank
    deterministically.

    Args:
        positions: ``P``, the number of rank positions profiled (positive int, default 10).
        ideal: also profile the ideal ranking (default True).
        gain, log_base, discount, ties, relevance_threshold, convention: the conventions of
            :mod:`torch_rankeval.conventions` (a preset name plus overrides).
        ignore_index: a grade value in ``target`` (and ``ideal_target``) that marks padding.
        input_format: ``"auto"``, ``"padded"`` or ``"flat"``, as in :class:`~torch_rankeval.RankingMetrics`.
        whole_queries: flat input only: each update holds all documents of its queries.
        keep_per_query: keep each query's per-position values for :meth:`compute_per_query` (used
            by :func:`~torch_rankeval.diagnostics.inversion_report` for a paired significance test).
        validate_args: run the checks that read values; with False, ``update`` on padded input has
            no host sync and compiles with ``torch.compile(fullgraph=True)``.
        kwargs: torchmetrics' ``Metric`` options (``process_group``, ``sync_on_compute``, ...); any
            other keyword is a ``TypeError`` naming it (the profile reads no ``denominator``,
            ``graded``, ``adaptive_k`` or ``empty_target_action``, and has no ``compile=True``).

    ``compute()`` returns ``{"relevance": (P,), "gain": (P,), "relevant_share": (P,),
    "dcg_contribution": (P,), "count": (P,) int64, "ideal_relevance": (P,), ..., "ideal_count": (P,),
    "n_queries": () int64}`` (float32 means unless an input is float64). States are two fixed-size
    running sums (float64 sums and int64 counts, ``dist_reduce_fx="sum"``): a distributed sync is a
    single all-reduce of ``2 * 5 * P * (2 if ideal else 1) + 5`` numbers, whatever the data size.

    Example:
        >>> import torch
        >>> from torch_rankeval import PositionProfile
        >>> profile = PositionProfile(positions=4, gain="linear")
        >>> profile.update(torch.tensor([[0.9, 0.8, 0.7], [0.9, 0.8, 0.0]]),   # 2nd list: 2 documents
        ...                torch.tensor([[0, 2, 1], [1, 2, 0]]),
        ...                mask=torch.tensor([[True, True, True], [True, True, False]]))
        >>> out = profile.compute()
        >>> out["relevance"], out["count"]          # position 4: no query reaches it
        (tensor([0.5000, 2.0000, 1.0000,    nan]), tensor([2, 2, 1, 0]))
        >>> out["ideal_relevance"]                  # grades sorted: [2, 1, 0] and [2, 1]
        tensor([2., 1., 0., nan])
        >>> [round(v, 4) for v in out["dcg_contribution"][:3].tolist()]   # gain / log2(p + 1)
        [0.5, 1.2619, 0.5]
    """

    higher_is_better: bool | None = None
    plot_lower_bound: float | None = None
    plot_upper_bound: float | None = None

    convention: Convention
    positions: int
    ideal: bool
    stats: tuple[str, ...]
    blocks: list[str]

    _list_states: ClassVar[dict[str, torch.dtype]] = {**_FLAT_STATES, **RunningMeanMetric._list_states}
    _fixed_dtype_tensors: ClassVar[tuple[str, ...]] = ("_discounts", "_gain_keys", "_gain_values")
    # The input handling of RankingMetrics (see the module docstring); it reads ``input_format``,
    # ``ignore_index``, ``validate_args``, ``whole_queries``, ``convention``, the flat states and the
    # tables, and calls ``_batch``, which each class defines for itself.
    _read_input = RankingMetrics._read_input
    _check_catalogue = RankingMetrics._check_catalogue
    _is_flat = RankingMetrics._is_flat
    _update_flat = RankingMetrics._update_flat
    _add_flat_batch = RankingMetrics._add_flat_batch
    _pending = RankingMetrics._pending
    _discount_table = RankingMetrics._discount_table
    _register_tables = RankingMetrics._register_tables
    _gain = RankingMetrics._gain

    def _conventions(self) -> list[Convention]:
        return [self.convention]

    def __init__(
        self,
        positions: int = 10,
        *,
        ideal: bool = True,
        gain: Any = None,
        log_base: float | None = None,
        discount: Callable[[Tensor], Tensor] | None = None,
        ties: str | None = None,
        relevance_threshold: float | None = None,
        convention: str | Convention | None = None,
        ignore_index: int | None = None,
        input_format: str = "auto",
        whole_queries: bool = False,
        keep_per_query: bool = False,
        validate_args: bool = True,
        **kwargs: Any,
    ) -> None:
        if isinstance(positions, bool) or not isinstance(positions, int) or positions <= 0:
            raise ValueError(
                f"positions must be a positive int (the number of rank positions to profile), got {positions!r}"
            )
        if not isinstance(ideal, bool):
            raise TypeError(f"ideal must be a bool, got {type(ideal).__name__}")
        check_metric_options(self, kwargs)
        super().__init__(**kwargs)
        self.convention = _input_options(
            convention,
            dict(
                gain=gain,
                log_base=log_base,
                discount=discount,
                ties=ties,
                relevance_threshold=relevance_threshold,
            ),
            input_format=input_format,
            ignore_index=ignore_index,
            flags=dict(whole_queries=whole_queries, keep_per_query=keep_per_query, validate_args=validate_args),
        )
        self.ignore_index = ignore_index
        self.input_format = input_format
        self.whole_queries = whole_queries
        self.validate_args = validate_args
        self.positions = positions
        self.ideal = ideal
        self.stats = PROFILE_STATS + (_PRESENT,)
        self.blocks = list(self.stats) + ([f"ideal_{s}" for s in self.stats] if ideal else [])
        # The states' names and configuration fingerprint are those of earlier versions (checkpoints load).
        self._add_running_states(
            [f"{block}@{p}" for block in self.blocks for p in range(1, positions + 1)],
            empty_target_action=self.convention.empty_target_action,
            keep_per_query=keep_per_query,
            config={
                "convention": self.convention,
                "positions": positions,
                "ideal": ideal,
                "input_format": input_format,
                "whole_queries": whole_queries,
                "ignore_index": ignore_index,
            },
        )
        self._register_tables()

    # ------------------------------------------------------------------ update
    def update(
        self,
        preds: Tensor,
        target: Tensor,
        indexes: Tensor | None = None,
        *,
        mask: Tensor | None = None,
        ideal_target: Tensor | None = None,
        exclude: Tensor | None = None,
    ) -> None:
        """Add a batch.

        Args:
            preds: ``(N, L)`` padded lists, or ``(D,)`` flat documents with ``indexes`` (``(L,)`` is
                one list only with ``input_format="padded"`` or a padded-only argument such as ``mask``;
                without them a 1-D ``preds`` and no ``indexes`` is an error, as in
                :class:`~torch_rankeval.RankingMetrics`).
            target: grades, same shape as ``preds``.
            indexes: flat input: ``(D,)`` integer query id of each document (required). Padded
                input: optional ``(N,)`` global query ids, used by ``keep_per_query``.
            mask: padded input: bool, False marks padding.
            ideal_target: padded input: ``(N, M)`` grades of all judged documents of each query, for
                the ideal profile (default: the list's own grades).
            exclude: padded input: ``(N, L)`` bool, dense or sparse: items never ranked, never counted.
                ``target`` may be a torch sparse tensor. The profile reads every position, so both
                are made dense here (``mask=False`` at excluded items): ``N x L`` memory.
        """
        # the input stage of RankingMetrics: the same checks, layouts and messages
        flat, checked = self._read_input(preds, target, indexes, exclude=exclude, mask=mask, ideal_target=ideal_target)
        if flat:
            self._update_flat(preds, target, indexes)
            return
        if not checked and (exclude is not None or is_sparse(target)):  # checked: a dense target, no exclude
            target, mask = densified(preds, target, mask, exclude)
        values, empty = self._batch(preds, target, mask, ideal_target, None, checked=checked)
        self._accumulate(values, empty, indexes)

    def _batch(
        self, preds, target, mask, ideal_target, n_relevant, judged=None, exclude=None, *, checked=False
    ) -> tuple[Tensor, Tensor]:  # noqa: ANN001
        """Per-query per-position statistics (not the registry's measures: the profile's own values);
        ``checked``: the input stage ran ``check_preds_target`` on ``preds``, ``target`` and ``mask``."""
        length = preds.shape[-1] if ideal_target is None else max(preds.shape[-1], ideal_target.shape[-1])
        discounts = self._discount_table(length)  # kept (a grown buffer): read before the values
        with values_mode():  # eagerly in inference mode, as RankingMetrics' values
            rb, single = prepare(
                preds,
                target,
                convention=self.convention,
                mask=mask,
                ignore_index=self.ignore_index,
                ideal_target=ideal_target,
                validate_args=self.validate_args,
                uses_gain=True,
                discounts=discounts,
                gain=self._gain(),
                checked=checked,
            )
            ideal = None
            if ideal_target is not None:
                grades = ideal_target.unsqueeze(0) if single else ideal_target
                judged = valid_mask(grades, None, self.ignore_index)
                judged = torch.ones_like(grades, dtype=torch.bool) if judged is None else judged
                ideal = (torch.where(judged, grades.to(rb.dtype), 0.0), judged)
            return self._values(rb, ideal)

    def _values(self, rb: RankedBatch, ideal: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        """Per-query values ``(N, blocks * P)`` and "absent" flags (True: no document at the position)."""
        expected_gains = rb.expected(rb.gains)
        model = [
            rb.expected(rb.target),
            expected_gains,
            rb.expected(rb.rel),
            expected_gains * rb.discounts[: rb.length],
        ]
        values, empty = self._blocks(model, rb.valid)
        if not self.ideal:
            return values, empty
        # The ideal ranking: the judged documents in decreasing gain (IDCG's order), padding last.
        grades, judged = (rb.target, rb.valid) if ideal is None else ideal
        gains = rb.gains if ideal is None else rb.ideal_gains  # paired with `grades` position by position
        key = torch.where(judged, gains, torch.full((), float("-inf"), dtype=gains.dtype, device=gains.device))
        order = torch.sort(key, dim=-1, descending=True, stable=True).indices
        grades, judged, gains = grades.gather(-1, order), judged.gather(-1, order), gains.gather(-1, order)
        rel = (rb._is_relevant(grades) & judged).to(rb.dtype)
        ideal_values, ideal_empty = self._blocks([grades, gains, rel, gains * rb.discounts[: gains.shape[-1]]], judged)
        return torch.cat([values, ideal_values], dim=1), torch.cat([empty, ideal_empty], dim=1)

    def _blocks(self, stats: list[Tensor], present: Tensor) -> tuple[Tensor, Tensor]:
        """Fit each ``(N, L)`` statistic to ``(N, P)`` and append the presence indicator."""
        present = _fit(present, self.positions)
        values = [_fit(s, self.positions) for s in stats] + [present.to(stats[0].dtype)]
        absent = ~present
        empty = [absent] * len(stats) + [torch.zeros_like(absent)]
        return torch.cat(values, dim=1), torch.cat(empty, dim=1)

    def _policy(self, values: Tensor, empty: Tensor) -> tuple[Tensor, Tensor]:
        """A position without a document is left out of that position's mean (NaN per query)."""
        return empty_policy(values.to(torch.float64), empty, "skip")

    # ------------------------------------------------------------------ results
    def compute(self) -> dict[str, Tensor]:
        """The profile over all queries (all processes, after sync); see the class docstring."""
        sums, _, counts = self._moments()
        sums, counts = sums.view(len(self.blocks), -1), counts.view(len(self.blocks), -1)
        n_queries = counts[self.stats.index(_PRESENT)][0]
        if int(n_queries) == 0:
            warnings.warn(
                "PositionProfile: no query was seen (no update); every value is NaN", UserWarning, stacklevel=2
            )
        means = (sums / counts).to(self.dtype)
        out: dict[str, Tensor] = {}
        for prefix, offset in (("", 0), ("ideal_", len(self.stats)))[: 1 + self.ideal]:
            out.update({prefix + stat: means[offset + i] for i, stat in enumerate(PROFILE_STATS)})
            out[prefix + "count"] = sums[offset + self.stats.index(_PRESENT)].round().to(torch.int64)
        out["n_queries"] = n_queries
        return out

    def compute_per_query(self) -> dict[str, Tensor]:
        """Each query's per-position values (requires ``keep_per_query=True``), synced across processes.

        Returns ``{"query_id": (Q,), "relevance": (Q, P), ..., "ideal_dcg_contribution": (Q, P)}``
        sorted by query id; NaN where a query has no document at a position.

        Example:
            >>> import torch
            >>> from torch_rankeval import PositionProfile
            >>> m = PositionProfile(positions=3, ideal=False, keep_per_query=True)
            >>> m.update(torch.tensor([[0.2, 0.9]]), torch.tensor([[1, 0]]), indexes=torch.tensor([7]))
            >>> m.compute_per_query()["relevance"]
            tensor([[0., 1., nan]])
        """
        flat = super().compute_per_query()
        stacked = {
            block: torch.stack([flat[f"{block}@{i}"] for i in range(1, self.positions + 1)], dim=-1)
            for block in self.blocks
            if not block.endswith(_PRESENT)
        }
        return {"query_id": flat["query_id"]} | stacked

    def plot(self, *args: Any, **kwargs: Any) -> Any:
        """Not here: metrics sit below the plotting layer (which imports them, not the other way round).

        Draw the profile with :func:`torch_rankeval.plotting.plot_position_profile`, which takes
        :meth:`compute`'s output (model vs ideal, an inversion report, a second profile to compare)::

            from torch_rankeval.plotting import plot_position_profile
            figure = plot_position_profile(profile.compute(), stat="dcg_contribution", path="profile.png")

        Raises:
            NotImplementedError: always, naming that function (torchmetrics' generic ``Metric.plot``
                cannot draw a per-position profile).

        Example:
            >>> from torch_rankeval import PositionProfile
            >>> PositionProfile(positions=3).plot()
            Traceback (most recent call last):
            ...
            NotImplementedError: PositionProfile.plot: use torch_rankeval.plotting.plot_position_profile(profile.compute(), ...) (plots live above the metrics)
        """
        raise NotImplementedError(
            "PositionProfile.plot: use torch_rankeval.plotting.plot_position_profile(profile.compute(), ...) "
            "(plots live above the metrics)"
        )


def _fit(x: Tensor, positions: int) -> Tensor:
    """``(N, L)`` -> ``(N, positions)``: cut, or pad with zeros (False) beyond the list."""
    return torch.nn.functional.pad(x[:, :positions], (0, max(positions - x.shape[-1], 0)))
