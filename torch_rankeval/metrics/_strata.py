"""Strata and post-stratification for the running-mean metrics.

A metric created with ``strata=S`` takes an integer stratum ``0 <= h < S`` per list in ``update``
(``update(..., strata=...)``: a query-frequency bucket, a traffic segment, ...) and keeps, beside
its running sums, per-stratum running sums, sums of squares and counts: three ``(S, V)`` states
(float64, float64, int64; ``dist_reduce_fx="sum"``), so the state is O(strata x values) and a sync
stays ONE all-reduce (they are packed with the other summed states). ``compute`` then adds the
post-stratified mean over the stratum weights ``W_h`` (population shares) and each stratum's mean:
:meth:`~torch_rankeval.measures.reduction.Reduction.poststratified` is the formula.

:class:`StrataMixin` holds the constructor and update checks and the results; the running-mean
base (:class:`~torch_rankeval.metrics._running.RunningMeanMetric`) calls it from
``_add_running_states``, ``_accumulate`` and ``_with_stderr``.

Output keys (beside the plain ``"<key>"``, which stays the mean over all counted lists):

* ``"<key>/poststratified"``: ``sum_h W_h * mean_h``;
* ``"<key>/stratum/<h>"``: the mean of stratum ``h`` (NaN when it counted no list);
* with ``stderr=True`` each of them also gets its ``"/stderr"``:
  ``"<key>/poststratified/stderr"`` is ``sqrt(sum_h W_h**2 * s_h**2 / n_h)``;
* :meth:`StrataMixin.compute_per_stratum` gives the table: counts, weights, means, errors.

Example:
    >>> import torch
    >>> from torch_rankeval import RankingMetrics
    >>> metric = RankingMetrics(("mrr",), strata=2, stratum_weights=[0.5, 0.5])
    >>> metric.update(torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.3, 0.6]]), torch.tensor([[1, 0], [1, 0], [1, 1]]),
    ...               strata=torch.tensor([0, 0, 1]))
    >>> {key: round(value.item(), 4) for key, value in metric.compute().items()}
    {'mrr': 0.8333, 'mrr/poststratified': 0.875, 'mrr/stratum/0': 0.75, 'mrr/stratum/1': 1.0}
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor

from torch_rankeval.measures.reduction import Reduction

__all__ = ["StrataMixin", "STRATUM_STATES", "check_strata_options"]

#: The per-stratum states: running sums, sums of squares (float64) and counts (int64), ``(S, V)``.
STRATUM_STATES = ("stratum_sums", "stratum_squares", "stratum_counts")
#: How far the stratum weights may sum from 1.
_WEIGHT_TOLERANCE = 1e-6


def check_strata_options(strata: Any, stratum_weights: Any) -> tuple[int | None, Tensor | None]:
    """Check the constructor's ``strata`` (the number of strata) and ``stratum_weights`` (their
    population shares); returns ``(strata, float64 weights or None)``.

    Example:
        >>> check_strata_options(2, [0.25, 0.75])
        (2, tensor([0.2500, 0.7500], dtype=torch.float64))
        >>> check_strata_options(2, [0.5, 0.6])
        Traceback (most recent call last):
        ...
        ValueError: stratum_weights must sum to 1 (they are population shares), got a sum of 1.1: divide them by their sum
    """
    if strata is None:
        if stratum_weights is not None:
            raise ValueError(
                "stratum_weights needs strata=: create the metric with strata=S (the number of strata) and "
                "stratum_weights of length S"
            )
        return None, None
    if isinstance(strata, bool) or not isinstance(strata, int):
        raise TypeError(f"strata must be None or an int, the number of strata, got {strata!r}")
    if strata < 1:
        raise ValueError(f"strata must be at least 1 (the number of strata), got {strata}")
    if stratum_weights is None:
        return strata, None
    if isinstance(stratum_weights, Tensor):
        weights = stratum_weights.detach().to(device="cpu", dtype=torch.float64).reshape(-1)
        shape = tuple(stratum_weights.shape)
    elif isinstance(stratum_weights, Sequence) and not isinstance(stratum_weights, str):
        if not all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in stratum_weights):
            raise TypeError(f"stratum_weights must be numbers (population shares), got {list(stratum_weights)!r}")
        weights = torch.tensor([float(w) for w in stratum_weights], dtype=torch.float64)
        shape = (len(stratum_weights),)
    else:
        raise TypeError(
            "stratum_weights must be None (the observed shares), a sequence of floats or a 1-D tensor, got "
            f"{type(stratum_weights).__name__}"
        )
    if shape != (strata,):
        raise ValueError(f"stratum_weights must hold one weight per stratum: shape ({strata},), got {shape}")
    if not bool(torch.isfinite(weights).all()):
        raise ValueError(f"stratum_weights must be finite, got {weights.tolist()}")
    if bool((weights < 0).any()):
        raise ValueError(f"stratum_weights must be >= 0 (population shares), got {weights.tolist()}")
    total = float(weights.sum())
    if not math.isclose(total, 1.0, rel_tol=0.0, abs_tol=_WEIGHT_TOLERANCE):
        raise ValueError(
            f"stratum_weights must sum to 1 (they are population shares), got a sum of {total:.6g}: divide them "
            "by their sum"
        )
    return strata, weights


def check_integer_tensor(name: str, value: Any, like: Tensor, holds: str, integer: str) -> None:
    """``value`` (the argument ``name``) must be an integer tensor on ``like``'s device (``holds`` and
    ``integer`` say what it holds in the messages)."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of {holds}, got {type(value).__name__}")
    if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor {integer}, got {value.dtype}; use .long()")
    if value.device != like.device:
        raise ValueError(f"{name} is on {value.device} but preds is on {like.device}: move all inputs to one device")


class StrataMixin:
    """Per-stratum running states and the post-stratified results of a running-mean metric."""

    strata: int | None = None  # until _init_strata: no strata
    stratum_weights: Tensor | None = None
    stratum_sums: Tensor
    stratum_squares: Tensor
    stratum_counts: Tensor
    keys: list[str]
    keep_per_query: bool
    _reduction: Reduction
    _list_states: ClassVar[dict[str, torch.dtype]]

    # ------------------------------------------------------------------ construction
    def _init_strata(self, strata: int | None, weights: Tensor | None) -> dict[str, Any]:
        """Register the ``(S, V)`` states (after ``sums``/``counts``); returns the configuration
        fields they add (none without strata: metrics without strata keep their fingerprint)."""
        self.strata, self.stratum_weights = strata, weights
        if strata is None:
            return {}
        shape = (strata, len(self.keys))
        for name, dtype in zip(STRATUM_STATES, (torch.float64, torch.float64, torch.int64)):
            self.add_state(name, torch.zeros(shape, dtype=dtype), dist_reduce_fx="sum")  # type: ignore[attr-defined]
        if self.keep_per_query:  # each kept row's stratum: one more list state, of this metric only
            self._list_states = {**self._list_states, "query_strata": torch.int64}  # type: ignore[misc]
        # the weights change what compute reports, not what the states hold: not in the fingerprint
        return {"strata": strata}

    def _check_stratum_states(self, where: str, states: Mapping[str, Any]) -> None:
        """Incoming stratum states must be ``(S, V)`` (a state_dict without the configuration
        metadata, from a metric with other strata, is caught here)."""
        shape = None if self.strata is None else (self.strata, len(self.keys))
        for name in STRATUM_STATES:
            value = states.get(name)
            if isinstance(value, Tensor) and tuple(value.shape) != shape:
                raise ValueError(
                    f"{type(self).__name__}.{where}: the state's {name!r} has shape {tuple(value.shape)} but this "
                    f"metric keeps {'no strata' if shape is None else shape}: the state comes from a metric created with "
                    "other strata=. Load or merge only the states of a metric created with the same strata."
                )

    # ------------------------------------------------------------------ update
    def _check_update_strata(self, strata: Tensor | None, n: int, like: Tensor, *, validate: bool) -> Tensor | None:
        """The ``(n,)`` int64 strata of an update's ``n`` lists; ``validate`` reads their range (one
        host sync), which is otherwise left to ``index_add_`` (an error on CPU)."""
        name = type(self).__name__
        if self.strata is None:
            if strata is not None:
                raise ValueError(
                    f"strata= was passed to update, but this {name} was created without strata: create it with "
                    "strata=S (the number of strata) and, optionally, stratum_weights (their population shares)"
                )
            return None
        if strata is None:
            raise ValueError(
                f"this {name} was created with strata={self.strata}: pass strata= (one integer stratum per list) to "
                "every update, so that the plain and the post-stratified means count the same lists"
            )
        check_integer_tensor("strata", strata, like, "integer strata", "(one stratum per list)")
        if strata.numel() != n or strata.ndim > 1:
            raise ValueError(f"strata holds one stratum per list: shape ({n},), got {tuple(strata.shape)}")
        strata = strata.reshape(-1).long()
        if validate and strata.numel():
            low, high = int(strata.min()), int(strata.max())
            if low < 0 or high >= self.strata:
                raise ValueError(
                    f"strata must lie in [0, {self.strata}) (the metric was created with strata={self.strata}), got "
                    f"values in [{low}, {high}]"
                )
        return strata

    def _add_strata(self, policed: Tensor, strata: Tensor) -> None:
        """Add a batch's values after the empty-list policy (NaN: not counted) to the stratum states
        with ``index_add_`` (no host sync)."""
        counted = ~torch.isnan(policed)
        values = torch.where(counted, self._reduction.transform(policed), 0.0)
        self.stratum_sums.index_add_(0, strata, values)
        self.stratum_squares.index_add_(0, strata, values.square())
        self.stratum_counts.index_add_(0, strata, counted.long())
        if self.keep_per_query:
            self.query_strata.append(strata)  # type: ignore[attr-defined]

    def _kept_strata(self) -> Tensor | None:
        """The strata of the kept per-query rows (in the order of the rows), or None without them."""
        if self.strata is None or not self.keep_per_query:
            return None
        rows = self.query_strata  # type: ignore[attr-defined]
        if isinstance(rows, list):
            return torch.cat(rows) if rows else torch.zeros(0, dtype=torch.int64, device=self.stratum_sums.device)
        return rows

    # ------------------------------------------------------------------ results
    def _stratum_results(self, stderr: bool) -> dict[str, Tensor]:
        """``{"<key>/poststratified": ..., "<key>/stratum/<h>": ...}`` (and their ``/stderr``), key by key."""
        if self.strata is None:
            return {}
        reduction = self._reduction
        sums, squares, counts = self.stratum_sums, self.stratum_squares, self.stratum_counts
        weights = self.stratum_weights
        self._warn_missing_strata(counts)
        dtype = self.dtype  # type: ignore[attr-defined]
        overall, overall_se = (t.to(dtype) for t in reduction.poststratified(sums, squares, counts, weights))
        with warnings.catch_warnings():  # an empty stratum is NaN; _warn_missing_strata said what matters
            warnings.simplefilter("ignore")
            means = reduction.finish(sums, counts).to(dtype)
        errors = reduction.stderr(sums, squares, counts).to(dtype) if stderr else None
        out: dict[str, Tensor] = {}
        for i, key in enumerate(self.keys):
            out[f"{key}/poststratified"] = overall[i]
            if stderr:
                out[f"{key}/poststratified/stderr"] = overall_se[i]
            for h in range(self.strata):
                out[f"{key}/stratum/{h}"] = means[h, i]
                if errors is not None:
                    out[f"{key}/stratum/{h}/stderr"] = errors[h, i]
        return out

    def _warn_missing_strata(self, counts: Tensor) -> None:
        """Warn when a stratum of weight > 0 counted no list: the post-stratified mean is NaN."""
        weights = self.stratum_weights
        if weights is None:
            return  # observed shares: a stratum without lists has weight 0
        missing = ((counts == 0) & (weights.to(counts.device).reshape(-1, 1) > 0)).any(-1)
        if bool(missing.any()):
            strata = torch.nonzero(missing).reshape(-1).tolist()
            warnings.warn(
                f"{type(self).__name__}: strata {strata} have a weight > 0 but no counted list, so the "
                "post-stratified means (and errors) are NaN: feed lists of every stratum, or merge sparse strata",
                UserWarning,
                stacklevel=4,
            )

    def compute_per_stratum(self) -> dict[str, Tensor]:
        """Per-stratum results (the metric needs ``strata=`` when created), synced across processes.

        Returns ``{"stratum": (S,), key: (S,) means, key + "/stderr": (S,) standard errors,
        key + "/count": (S,) counted lists (int64), key + "/weight": (S,) the weights the
        post-stratified mean uses}`` for every key: a stratum without a counted list has a NaN
        mean, one with a single list a NaN error (``ddof=1``). The weights are the
        ``stratum_weights`` given, or the observed shares ``n_h / n`` without them.

        Example:
            >>> import torch
            >>> from torch_rankeval import MRR
            >>> metric = MRR(strata=3)
            >>> metric.update(torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.3, 0.6]]), torch.tensor([[1, 0], [1, 0], [1, 1]]),
            ...               strata=torch.tensor([0, 0, 2]))
            >>> table = metric.compute_per_stratum()
            >>> table["mrr"], table["mrr/count"], table["mrr/weight"]
            (tensor([0.7500,    nan, 1.0000]), tensor([2, 0, 1]), tensor([0.6667, 0.0000, 0.3333]))
        """
        if self.strata is None:
            raise ValueError(
                f"compute_per_stratum needs strata=S when the {type(self).__name__} is created (and strata= in update)"
            )
        with self._synced():  # type: ignore[attr-defined]
            sums, squares, counts = (getattr(self, name).clone() for name in STRATUM_STATES)
        reduction, dtype = self._reduction, self.dtype  # type: ignore[attr-defined]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            means = reduction.finish(sums, counts).to(dtype)
        errors = reduction.stderr(sums, squares, counts).to(dtype)
        if self.stratum_weights is None:
            weights = (counts.double() / counts.sum(0).double()).nan_to_num(0.0).to(dtype)
        else:
            weights = self.stratum_weights.to(device=sums.device, dtype=dtype).reshape(-1, 1).expand_as(means)
        out = {"stratum": torch.arange(self.strata, device=sums.device)}
        for i, key in enumerate(self.keys):
            out[key] = means[:, i]
            out[key + "/stderr"] = errors[:, i]
            out[key + "/count"] = counts[:, i]
            out[key + "/weight"] = weights[:, i]
        return out
