"""The one reduction of per-query values: the empty-query policy, the summary of each column
(mean, sum or geometric mean) and what a mean over no counted query is.

Every API reduces through :class:`Reduction`: the functional API and ``measures.compute`` (through
:meth:`~torch_rankeval.measures.MeasurePlan.reduce`), the debiased functions, and every Metric
class (its running sums are :meth:`Reduction.sums` of each batch, its ``compute`` is
:meth:`Reduction.means` of the synced sums).

Example:
    >>> import torch
    >>> r = Reduction(("mean", "sum"), action="skip")
    >>> values = torch.tensor([[0.5, 2.0], [0.7, 3.0]])
    >>> empty = torch.tensor([[False, False], [True, False]])    # list 2 has no relevant document
    >>> r.reduce(values, empty, reduction="mean")                 # the mean of 0.5; the sum of 2 and 3
    tensor([0.5000, 5.0000])
    >>> total, count = r.sums(values, empty)                      # what a Metric adds to its states
    >>> total, count
    (tensor([0.5000, 5.0000], dtype=torch.float64), tensor([1, 2]))
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from torch_rankeval.conventions import ALL_SKIPPED, EMPTY_TARGET_ACTIONS, _check_choice
from torch_rankeval.measures.registry import MIN_GEO_MEAN
from torch_rankeval.ranking.view import device_constant

__all__ = ["Reduction", "empty_policy", "counted_sums", "counted_squares", "sample_stderr"]

_AGGREGATES = ("mean", "sum", "gmean")  # how a column is summarised over queries
#: What an empty list lacks, by default (the error and warning messages).
NO_RELEVANT = "have no relevant document"


def empty_policy(values: Tensor, empty: Tensor, action: str) -> tuple[Tensor, Tensor | None]:
    """Score lists flagged ``empty`` per ``action`` (``"neg"``: 0, ``"pos"``: 1, ``"skip"``: NaN and
    not counted; ``"error"`` is raised by :meth:`Reduction.policy`). Returns (values, counted mask),
    the mask None when every list counts. No host sync.

    Example:
        >>> empty_policy(torch.tensor([[0.5], [0.7]]), torch.tensor([[False], [True]]), "skip")
        (tensor([[0.5000],
                [   nan]]), tensor([[ True],
                [False]]))
        >>> empty_policy(torch.tensor([[0.5], [0.7]]), torch.tensor([[False], [True]]), "pos")
        (tensor([[0.5000],
                [1.0000]]), None)
    """
    if action == "skip":
        return torch.where(empty, float("nan"), values), ~empty
    if action in ("neg", "pos"):
        values = torch.where(empty, 1.0 if action == "pos" else 0.0, values)
    return values, None


def counted_sums(values: Tensor, counted: Tensor | None) -> tuple[Tensor, Tensor]:
    """Column sums of the counted values (float64) and how many lists each counts (int64).

    Example:
        >>> counted_sums(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([[True, False], [True, True]]))
        (tensor([4., 4.], dtype=torch.float64), tensor([2, 1]))
    """
    if counted is None:
        count = torch.full(values.shape[1:], values.shape[0], dtype=torch.int64, device=values.device)
        return values.sum(0, dtype=torch.float64), count
    return torch.where(counted, values, 0.0).sum(0, dtype=torch.float64), counted.sum(0)


def counted_squares(values: Tensor, counted: Tensor | None) -> Tensor:
    """Column sums of the squares of the counted values (float64): with :func:`counted_sums`, what
    a standard error over queries needs.

    Example:
        >>> counted_squares(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([[True, False], [True, True]]))
        tensor([10., 16.], dtype=torch.float64)
    """
    squares = values.to(torch.float64).square()
    return (squares if counted is None else torch.where(counted, squares, 0.0)).sum(0)


def sample_stderr(values: Tensor, aggregate: str = "mean") -> float:
    """The standard error over queries of the summary of the per-query ``values`` (1-D; NaN entries,
    i.e. skipped queries, left out), as :meth:`Reduction.stderr` defines it (``scipy.stats.sem`` for a
    mean); NaN with fewer than 2 values. Computed in two passes (exact for any values).

    Example:
        >>> round(sample_stderr(torch.tensor([0.2, 0.4, 0.9, float("nan")])), 6)   # scipy.stats.sem([0.2, 0.4, 0.9])
        0.208167
    """
    if aggregate not in _AGGREGATES:
        raise ValueError(f"aggregate must be one of {_AGGREGATES}, got {aggregate!r}")
    v = values.detach().to(torch.float64).reshape(-1)
    v = v[~torch.isnan(v)]
    if aggregate == "gmean":
        v = torch.log(v.clamp(min=MIN_GEO_MEAN))
    n = v.numel()
    if n < 2:
        return float("nan")
    mean = v.mean()
    se = torch.sqrt(((v - mean).square().sum() / (n - 1)) / n)
    return float(Reduction((aggregate,))._scaled(se, mean, torch.tensor(float(n), dtype=torch.float64)))


@dataclass(frozen=True)
class Reduction:
    """The empty-query policy and the summary of ``(N, C)`` per-query values.

    Args:
        aggregates: per column, ``"mean"``, ``"sum"`` (counts such as ``num_rel``) or ``"gmean"``
            (``gm_map``: ``exp(mean(log(max(v, 1e-5))))``); empty: every column a mean.
        action: the empty-query policy (``empty_target_action``): ``"neg"`` scores an empty query 0,
            ``"pos"`` 1, ``"skip"`` leaves it out of the mean (NaN per query), ``"error"`` raises.
        all_skipped: the mean of a column whose every query was skipped: ``"nan"`` (default, with a
            warning) or ``"zero"`` (torchmetrics' retrieval classes return 0.0).
        reason: what an empty query lacks, for the messages (``"have no click (ideal DCG <= 0)"``).
        hint: advice appended to the warning when no query was counted.

    Example:
        >>> import torch
        >>> r = Reduction(("gmean",), action="neg")
        >>> r.reduce(torch.tensor([[0.5], [0.0]]), torch.zeros(2, 1, dtype=torch.bool), reduction="mean")
        tensor([0.0022])
    """

    aggregates: tuple[str, ...] = ()
    action: str = "neg"
    all_skipped: str = "nan"
    reason: str = NO_RELEVANT
    hint: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "aggregates", tuple(self.aggregates))
        _check_choice("empty_target_action", self.action, EMPTY_TARGET_ACTIONS)
        if self.all_skipped not in ALL_SKIPPED:
            raise ValueError(f"all_skipped={self.all_skipped!r} is not valid: use one of {ALL_SKIPPED}")
        bad = [a for a in self.aggregates if a not in _AGGREGATES]
        if bad:
            raise ValueError(f"aggregates must be among {_AGGREGATES}, got {bad}")

    # ------------------------------------------------------------------ per query
    def policy(self, values: Tensor, empty: Tensor, *, name: str = "") -> tuple[Tensor, Tensor | None]:
        """The empty-query policy: (values with NaN where skipped, counted mask or None).
        ``"error"`` reads ``empty`` (one host sync) and raises when a query is empty."""
        if self.action == "error":
            if bool(empty.any()):
                raise ValueError(
                    f"{name + ': ' if name else ''}{int(empty.any(-1).sum())} list(s) {self.reason} and "
                    "empty_target_action='error'; use 'neg' (score 0), 'pos' (score 1) or 'skip' (leave them out)"
                )
            return values, None
        return empty_policy(values, empty, self.action)

    def transform(self, values: Tensor) -> Tensor:
        """Per-query values as they are summed: ``log(max(v, 1e-5))`` in geometric-mean columns."""
        if "gmean" not in self.aggregates:
            return values
        return torch.where(self._columns("gmean", values.device), torch.log(values.clamp(min=MIN_GEO_MEAN)), values)

    def _columns(self, aggregate: str, device: torch.device) -> Tensor:
        """``(C,)`` bool: the columns summarised by ``aggregate``."""
        return device_constant(tuple(a == aggregate for a in self.aggregates), torch.bool, device)

    def sums(self, values: Tensor, empty: Tensor, *, name: str = "") -> tuple[Tensor, Tensor]:
        """The policy, then the float64 column sums of the transformed values and the int64 counts
        (what a Metric adds to its running states; no host sync unless ``action="error"``)."""
        values, counted = self.policy(values.to(torch.float64), empty, name=name)
        return counted_sums(self.transform(values), counted)

    def moments(self, values: Tensor, empty: Tensor, *, name: str = "") -> tuple[Tensor, Tensor, Tensor]:
        """:meth:`sums` plus the float64 column sums of the squares of the transformed values
        (what a Metric with standard errors adds to its running states).

        Example:
            >>> Reduction(action="skip").moments(torch.tensor([[0.5], [0.7], [0.1]]), torch.tensor([[False], [True], [False]]))
            (tensor([0.6000], dtype=torch.float64), tensor([0.2600], dtype=torch.float64), tensor([2]))
        """
        values, counted = self.policy(values.to(torch.float64), empty, name=name)
        values = self.transform(values)
        total, count = counted_sums(values, counted)
        return total, counted_squares(values, counted), count

    # ------------------------------------------------------------------ summaries
    def stderr(self, sums: Tensor, squares: Tensor, counts: Tensor) -> Tensor:
        """The standard error over queries of each column's summary, from the running sums, sums of
        squares and counts: for a mean the sample standard error ``sqrt(var / n)`` with the
        ``ddof=1`` variance (``scipy.stats.sem``); for a sum (``num_rel``: the total over the
        ``n`` queries) ``n`` times that; for a geometric mean (``gm_map``) the delta method
        ``gm * sem(log(max(v, 1e-5)))``. NaN where fewer than 2 queries were counted (and where the
        squares are NaN: a state that did not keep them).

        Example:
            >>> r = Reduction(("mean", "sum"))
            >>> values = torch.tensor([[0.2, 1.0], [0.4, 2.0], [0.9, 6.0]])
            >>> r.stderr(*r.moments(values, torch.zeros(3, 2, dtype=torch.bool)))   # sem: 0.2082, 1.5275
            tensor([0.2082, 4.5826], dtype=torch.float64)
        """
        n = counts.to(sums.dtype)
        mean = sums / n
        var = ((squares - sums * mean) / (n - 1)).clamp(min=0.0)
        return self._scaled(torch.where(n >= 2, torch.sqrt(var / n), float("nan")), mean, n)

    def poststratified(
        self, sums: Tensor, squares: Tensor, counts: Tensor, weights: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """The post-stratified summary of each column and its standard error, from per-stratum
        running sums, sums of squares and counts ``(S, C)`` and the stratum weights ``(S,)`` (the
        population shares ``W_h``, summing to 1) or None (the observed shares ``n_h / n`` of each
        column).

        On the (transformed) values: ``mean_ps = sum_h W_h * ybar_h`` and
        ``SE = sqrt(sum_h W_h**2 * s_h**2 / n_h)``, ``s_h`` the ``ddof=1`` standard deviation of
        stratum ``h``. A stratum of weight 0 adds nothing (whatever its count); a stratum of weight
        > 0 with ``n_h = 0`` makes the mean and its error NaN (its mean is unknown), with
        ``n_h = 1`` the error NaN (its variance is unknown). Then as :meth:`stderr`: a sum column
        (``num_rel``) reports ``n * mean_ps`` and ``n * SE`` (``n`` the counted queries of all
        strata), a geometric mean ``exp(mean_ps)`` and ``exp(mean_ps) * SE`` (the delta method).

        Example:
            >>> r = Reduction()
            >>> # stratum 0 holds the values [0.5, 0.5], stratum 1 [1.5, 2.0, 2.5] (s_1**2 = 0.25)
            >>> sums, squares, counts = torch.tensor([[1.0], [6.0]]), torch.tensor([[0.5], [12.5]]), torch.tensor([[2], [3]])
            >>> r.poststratified(sums, squares, counts, torch.tensor([0.5, 0.5]))   # 0.5 * 0.5 + 0.5 * 2; sqrt(0.25 * 0.25 / 3)
            (tensor([1.2500], dtype=torch.float64), tensor([0.1443], dtype=torch.float64))
        """
        sums = sums.to(torch.float64)
        n = counts.to(torch.float64)
        total = n.sum(0)
        w = n / total if weights is None else weights.to(device=sums.device, dtype=torch.float64).reshape(-1, 1)
        w = w.expand_as(n)
        mean_h = sums / n
        var_h = ((squares - sums * mean_h) / (n - 1)).clamp(min=0.0)
        used = w > 0
        mean_terms = torch.where(used, torch.where(n > 0, w * mean_h, float("nan")), 0.0)
        var_terms = torch.where(used, torch.where(n >= 2, w.square() * var_h / n, float("nan")), 0.0)
        mean = torch.where(total > 0, mean_terms.sum(0), float("nan"))  # no counted query: NaN, as a mean
        se = torch.where(total > 0, torch.sqrt(var_terms.sum(0)), float("nan"))
        return self._summaries(mean * total, mean), self._scaled(se, mean, total)

    def weighted_stderr(self, sums: Tensor, squares: Tensor, weights: Tensor, weights_sq: Tensor) -> Tensor:
        """The standard error of each column's weighted summary from the weighted sums
        ``S = sum(w x)``, ``Q = sum(w x^2)``, ``W = sum(w)`` and ``W2 = sum(w^2)`` (the exponentially
        decayed sums of a metric with ``half_life``; ``x`` the transformed per-query values).

        With the weighted mean ``m = S / W``, the reliability-weights variance
        ``var = (Q - S m) / (W - W2 / W)`` and Kish's effective sample size ``n_eff = W^2 / W2``, the
        error of a mean is ``sqrt(var / n_eff)``; for equal weights exactly ``scipy.stats.sem``.
        Sums and geometric means are scaled as in :meth:`stderr` (``W`` times the error for a
        sum). NaN where fewer than 2 queries have weight (``W - W2 / W`` vanishes).

        Example:
            >>> r = Reduction()
            >>> w, x = torch.tensor([0.25, 0.5, 1.0], dtype=torch.float64), torch.tensor([[0.2], [0.4], [0.9]])
            >>> r.weighted_stderr(w @ x.double(), w @ x.double() ** 2, w.sum().reshape(1), (w**2).sum().reshape(1))
            tensor([0.2487], dtype=torch.float64)
        """
        mean = sums / weights
        denom = weights - weights_sq / weights
        var = ((squares - sums * mean) / denom).clamp(min=0.0)
        se = torch.where(denom > 1e-9 * weights, torch.sqrt(var * weights_sq) / weights, float("nan"))
        return self._scaled(se, mean, weights)

    def _scaled(self, se: Tensor, mean: Tensor, n: Tensor) -> Tensor:
        """The standard error of each column's summary (the last axis) from the standard error ``se`` of
        the mean of its (transformed) values: a sum's is ``n * se``, a geometric mean's ``exp(mean) * se``
        (the delta method on the mean of the logs), a mean's ``se``."""
        if all(a == "mean" for a in self.aggregates):
            return se
        scaled = torch.where(self._columns("gmean", se.device), se * torch.exp(mean), se)
        return torch.where(self._columns("sum", se.device), se * n, scaled)

    def _summaries(self, sums: Tensor, means: Tensor) -> Tensor:
        """Each column's summary (the last axis) from its sum and mean: the mean, the sum or the geometric mean."""
        if all(a == "mean" for a in self.aggregates):
            return means
        summaries = torch.where(self._columns("gmean", means.device), torch.exp(means), means)
        return torch.where(self._columns("sum", means.device), sums, summaries)

    def finish(self, sums: Tensor, counts: Tensor) -> Tensor:
        """Summaries from column sums and counts: the mean, the sum or the geometric mean of each
        column; a mean over no counted query is NaN, or 0 with ``all_skipped="zero"`` and
        ``action="skip"``."""
        counts = counts.to(sums.dtype) if isinstance(counts, Tensor) else torch.as_tensor(counts, dtype=sums.dtype)
        out = self._summaries(sums, sums / counts)
        if self.all_skipped == "zero" and self.action == "skip":
            out = torch.where(counts == 0, torch.zeros((), dtype=out.dtype, device=out.device), out)
        return out

    def _nothing_counted(self) -> str:
        if self.all_skipped == "zero" and self.action == "skip":
            return "0.0 (all_skipped='zero', as torchmetrics)"
        return "NaN"

    def reduce(
        self,
        values: Tensor,
        empty: Tensor,
        *,
        reduction: str,
        validate_args: bool = True,
        name: str = "",
        stacklevel: int = 2,
    ) -> Tensor:
        """The policy and the reduction (``"mean"``, ``"sum"``, ``"none"``) of ``(N, C)`` values:
        ``(C,)``, or ``(N, C)`` for ``"none"``, in the values' dtype. A mean over 0 lists is NaN
        (a warning: the shape says so without a host sync); with ``validate_args`` a mean whose
        every list was skipped warns too."""
        out_dtype = values.dtype
        values, counted = self.policy(values, empty, name=name)
        if reduction == "none":
            return values
        total, count = counted_sums(self.transform(values), counted)
        if reduction == "sum":
            return total.to(out_dtype)
        problem = ""
        if values.shape[0] == 0:  # a static shape: no host sync
            problem = f"no list to average (the batch holds 0 lists); the mean is {self._nothing_counted()}"
        elif validate_args and self.action == "skip" and bool((count == 0).any()):
            problem = (
                f"every list was skipped (they {self.reason}), so the mean is {self._nothing_counted()}{self.hint}"
            )
        if problem:
            warnings.warn(f"{name}: {problem}" if name else problem, UserWarning, stacklevel=stacklevel + 1)
        return self.finish(total, count).to(out_dtype)

    def means(
        self, sums: Tensor, counts: Tensor, *, keys: Sequence[str], owner: str = "", stacklevel: int = 2
    ) -> Tensor:
        """A Metric's ``compute``: :meth:`finish` of the (synced) running sums, with a warning
        naming the ``keys`` whose columns counted no query (no update, or every query skipped)."""
        if bool((counts == 0).any()):
            missing = [key for key, c in zip(keys, counts.tolist()) if c == 0]
            warnings.warn(
                f"{owner}: no query was counted for {missing} (no update, or every query skipped by "
                f"empty_target_action='skip'); returning {self._nothing_counted()}{self.hint}",
                UserWarning,
                stacklevel=stacklevel + 1,
            )
        return self.finish(sums, counts)
