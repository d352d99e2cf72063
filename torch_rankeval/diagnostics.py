"""Diagnostics: where in the ranking quality is lost, and which queries lose it.

- :func:`inversion_report`: rank-position bands (e.g. 1-3 vs 5-8) where a lower band holds more
  relevant documents than a higher one, with the effect size and, from per-query data, a paired
  significance test.
- :func:`per_query_breakdown`: the distribution of a per-query metric (quantiles, histogram) and the
  worst queries by id.
- :func:`profile_scalars`: a :class:`~torch_rankeval.PositionProfile` result (plus the reports) as a
  flat ``{name: float}`` dict for any logger.
- :func:`profile_from_tensors`: the whole "CT scan" of one evaluation run from padded tensors (used
  by the ``torch-rankeval profile`` command).

Everything here runs once per evaluation on small summaries (``(P,)`` or ``(Q, P)`` tensors), on
the host; nothing is on a training hot path.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from torch_rankeval._choices import INVERSION_STATS
from torch_rankeval.metrics.base import RankingMetrics
from torch_rankeval.metrics.position_profile import PROFILE_STATS, PositionProfile

__all__ = [
    "Band",
    "BandComparison",
    "InversionReport",
    "QueryBreakdown",
    "ProfileSummary",
    "parse_band",
    "default_bands",
    "inversion_report",
    "per_query_breakdown",
    "profile_scalars",
    "profile_from_tensors",
]

Band = tuple[int, int]  # (first, last) rank positions, 1-based, inclusive
DEFAULT_QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


# ---------------------------------------------------------------------------------------- bands
def parse_band(band: Any) -> Band:
    """A band of rank positions as ``(first, last)``, 1-based and inclusive.

    Accepts ``"1-3"``, ``"5"``, ``(1, 3)`` or ``5``.

    Example:
        >>> parse_band("5-8"), parse_band(2), parse_band((1, 3))
        ((5, 8), (2, 2), (1, 3))
    """
    if isinstance(band, str):
        parts = band.strip().split("-")
        try:
            first, last = (int(parts[0]), int(parts[-1])) if len(parts) in (1, 2) else (None, None)
        except ValueError:
            first = last = None
        if first is None:
            raise ValueError(f"band {band!r} is not valid: write 'first-last' (e.g. '1-3') or one position (e.g. '5')")
    elif isinstance(band, int) and not isinstance(band, bool):
        first = last = band
    elif (
        isinstance(band, Sequence)
        and len(band) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in band)
    ):
        first, last = band
    else:
        raise TypeError(f"band must be 'first-last', an int position or a (first, last) pair of ints, got {band!r}")
    if not 1 <= first <= last:
        raise ValueError(f"band {band!r} is not valid: positions are 1-based and first <= last")
    return (first, last)


def _band_name(band: Band) -> str:
    return str(band[0]) if band[0] == band[1] else f"{band[0]}-{band[1]}"


def default_bands(positions: int, n_bands: int = 4) -> list[Band]:
    """Split positions ``1..positions`` into ``min(n_bands, positions)`` consecutive bands of nearly
    equal size (the first bands take the remainder).

    Example:
        >>> default_bands(10), default_bands(3)
        ([(1, 3), (4, 6), (7, 8), (9, 10)], [(1, 1), (2, 2), (3, 3)])
    """
    if isinstance(positions, bool) or not isinstance(positions, int) or positions <= 0:
        raise ValueError(f"positions must be a positive int, got {positions!r}")
    n = min(n_bands, positions)
    size, extra = divmod(positions, n)
    ends = [i * size + min(i, extra) for i in range(n + 1)]  # the first `extra` bands are one longer
    return [(ends[i] + 1, ends[i + 1]) for i in range(n)]


# ---------------------------------------------------------------------------------------- inversions
@dataclass(frozen=True)
class BandComparison:
    """One comparison of a higher-ranked band with a lower-ranked one.

    Attributes:
        upper, lower: the bands ``(first, last)``; ``upper`` is ranked above ``lower``.
        stat: the compared statistic (``"relevance"``, ``"gain"`` or ``"relevant_share"``).
        upper_mean, lower_mean: the mean of ``stat`` over the documents ranked in each band (pooled
            over queries and positions; NaN when no query has a document there).
        effect: ``lower_mean - upper_mean`` in the statistic's units; positive = inversion.
        inverted: ``effect > min_effect`` (False when the effect is NaN).
        n_upper, n_lower: the number of (query, position) documents in each band.
        n_paired: per-query data only: the queries with documents in both bands.
        standardized: per-query data only: Cohen's ``d_z`` of the per-query differences
            ``mean(lower band) - mean(upper band)`` (``inf`` when all differences are equal and
            positive); None with fewer than 2 paired queries.
        p_value: per-query data only: one-sided paired t-test (H1: the lower band is better); 0 when
            all differences are equal and positive, 1 when they are all equal and not positive; None
            with fewer than 2 paired queries or ``test=False``.
    """

    upper: Band
    lower: Band
    stat: str
    upper_mean: float
    lower_mean: float
    effect: float
    inverted: bool
    n_upper: int
    n_lower: int
    n_paired: int | None = None
    standardized: float | None = None
    p_value: float | None = None

    @property
    def name(self) -> str:
        """The scalar's name: ``inversion@1-3_vs_5-8``."""
        return f"inversion@{_band_name(self.upper)}_vs_{_band_name(self.lower)}"

    def significant(self, alpha: float = 0.05) -> bool:
        """An inversion whose paired test rejects "the lower band is not better" at level ``alpha``."""
        return self.inverted and self.p_value is not None and self.p_value < alpha


@dataclass(frozen=True)
class InversionReport:
    """Every band comparison of :func:`inversion_report`; ``inversions`` keeps the inverted ones."""

    stat: str
    comparisons: tuple[BandComparison, ...]
    min_effect: float = 0.0

    @property
    def inversions(self) -> tuple[BandComparison, ...]:
        return tuple(c for c in self.comparisons if c.inverted)

    def scalars(self, prefix: str = "") -> dict[str, float]:
        """``{prefix + "inversion@1-3_vs_5-8": effect}`` for every comparison (positive = inverted)."""
        return {prefix + c.name: c.effect for c in self.comparisons}

    def __str__(self) -> str:
        lines = [f"relevance inversions ({self.stat}: mean over the documents in each band; effect = lower - upper)"]
        for c in self.comparisons:
            extra = "" if c.p_value is None else f"  d_z={c.standardized:.3f}  p={c.p_value:.4g}  n={c.n_paired}"
            lines.append(
                f"  {_band_name(c.upper):>7} vs {_band_name(c.lower):<7} {c.upper_mean:8.4f} {c.lower_mean:8.4f} "
                f"effect={c.effect:+.4f}{extra}  {'INVERTED' if c.inverted else 'ok'}"
            )
        return "\n".join(lines)


def inversion_report(
    data: Mapping[str, Tensor],
    bands: Sequence[Any] | None = None,
    *,
    stat: str = "relevance",
    min_effect: float = 0.0,
    test: bool = True,
) -> InversionReport:
    """Find rank-position bands where a lower band holds more relevant documents than a higher one.

    Args:
        data: a :class:`~torch_rankeval.PositionProfile` result: ``compute()`` (``(P,)`` means and
            ``count``) gives effect sizes; ``compute_per_query()`` (``(Q, P)`` values, NaN where a
            query has no document) also gives a paired significance test over queries.
        bands: the bands to compare (``"1-3"``, ``(5, 8)``, ``4``); every pair in which one band
            ends above the other's start is compared. Default: :func:`default_bands` of ``P``.
        stat: ``"relevance"`` (mean grade, default), ``"gain"`` or ``"relevant_share"``.
        min_effect: a comparison is ``inverted`` when ``effect > min_effect`` (default 0: any excess).
        test: with per-query data, run the paired t-test (needs scipy).

    A band's mean is the mean of ``stat`` over the documents ranked in it, pooled over queries and
    positions (positions no query reaches add nothing; a band no query reaches has a NaN mean and
    is never inverted). A perfect ranking has no inversion: every band's documents are at least as
    relevant as every lower band's.

    Example:
        >>> import torch
        >>> from torch_rankeval import PositionProfile
        >>> from torch_rankeval.diagnostics import inversion_report
        >>> profile = PositionProfile(positions=8)
        >>> scores = torch.arange(8, 0, -1).float().expand(2, 8)      # ranked as given
        >>> profile.update(scores, torch.tensor([[0, 0, 1, 0, 2, 3, 2, 3], [1, 0, 0, 0, 3, 2, 2, 2]]))
        >>> report = inversion_report(profile.compute(), ["1-3", "5-8"])
        >>> [(c.name, round(c.effect, 4), c.inverted) for c in report.comparisons]
        [('inversion@1-3_vs_5-8', 2.0417, True)]
    """
    if stat not in INVERSION_STATS:
        raise ValueError(f"stat={stat!r} is not valid: use one of {INVERSION_STATS}")
    if not isinstance(data, Mapping) or stat not in data:
        raise ValueError(
            f"data must be a PositionProfile result (compute() or compute_per_query()) holding {stat!r}; "
            f"got {type(data).__name__} with keys {sorted(data) if isinstance(data, Mapping) else '-'}"
        )
    if isinstance(min_effect, bool) or not isinstance(min_effect, (int, float)) or not math.isfinite(min_effect):
        raise ValueError(f"min_effect must be a finite number, got {min_effect!r}")
    values = data[stat].detach().to("cpu", torch.float64)
    per_query = values.ndim == 2
    if values.ndim not in (1, 2):
        raise ValueError(
            f"data[{stat!r}] must be (P,) from compute() or (Q, P) from compute_per_query(), got {tuple(values.shape)}"
        )
    positions = values.shape[-1]
    if per_query:
        weights = (~values.isnan()).to(torch.float64)
    else:
        if "count" not in data:
            raise ValueError("data from PositionProfile.compute() must hold 'count' (queries per position)")
        weights = data["count"].detach().to("cpu", torch.float64)
    band_list = default_bands(positions) if bands is None else sorted({parse_band(b) for b in bands})
    for b in band_list:
        if b[1] > positions:
            raise ValueError(
                f"band {_band_name(b)} goes beyond the {positions} profiled positions: profile more positions"
            )
    pairs = [(u, low) for u in band_list for low in band_list if u[1] < low[0]]
    if not pairs:
        raise ValueError(f"bands {[_band_name(b) for b in band_list]} hold no pair with one band above the other")

    comparisons = []
    for upper, lower in pairs:
        (mu, nu), (ml, nl) = _pooled(values, weights, upper), _pooled(values, weights, lower)
        effect = ml - mu
        extra: dict[str, Any] = _paired(values, upper, lower, test) if per_query else {}
        comparisons.append(
            BandComparison(upper, lower, stat, mu, ml, effect, bool(effect > min_effect), nu, nl, **extra)
        )
    return InversionReport(stat=stat, comparisons=tuple(comparisons), min_effect=float(min_effect))


def _pooled(values: Tensor, weights: Tensor, band: Band) -> tuple[float, int]:
    """Mean over the documents in a band, and how many there are."""
    v, w = values[..., band[0] - 1 : band[1]], weights[..., band[0] - 1 : band[1]]
    total = torch.where(w > 0, v * w, torch.zeros_like(v)).sum()
    n = w.sum()
    return (float(total / n) if n > 0 else float("nan")), int(n)


def _paired(values: Tensor, upper: Band, lower: Band, test: bool) -> dict[str, Any]:
    """Per-query band means, their differences, Cohen's d_z and a one-sided paired t-test."""
    up = values[:, upper[0] - 1 : upper[1]].nanmean(-1)
    low = values[:, lower[0] - 1 : lower[1]].nanmean(-1)
    both = ~(up.isnan() | low.isnan())
    diff = (low - up)[both]
    n = int(diff.numel())
    if n < 2:
        return {"n_paired": n}
    mean, sd = float(diff.mean()), float(diff.std())
    if float(diff.max() - diff.min()) == 0.0:  # every difference equal: the t statistic is +-inf or 0/0
        standardized = math.copysign(math.inf, mean) if mean != 0 else 0.0
        p_value = 0.0 if mean > 0 else 1.0
    else:
        standardized = mean / sd
        p_value = _ttest_greater(diff) if test else None
    return {"n_paired": n, "standardized": standardized, "p_value": p_value if test else None}


def _ttest_greater(diff: Tensor) -> float:
    try:
        from scipy import stats
    except ImportError as err:  # pragma: no cover - scipy is in the test environment
        raise ImportError(
            "inversion_report's significance test needs scipy: pip install scipy (or torch-rankeval[cli]), "
            "or pass test=False for effect sizes only"
        ) from err
    return float(stats.ttest_1samp(diff.numpy(), 0.0, alternative="greater").pvalue)


# ---------------------------------------------------------------------------------------- per query
@dataclass(frozen=True)
class QueryBreakdown:
    """The distribution of one per-query metric.

    Attributes:
        key: the metric (e.g. ``"ndcg@10"``).
        n_queries: queries with a value; ``n_skipped``: queries whose value is NaN (skipped by
            ``empty_target_action="skip"``), left out of everything below.
        mean: the mean value; ``quantiles``: ``{q: value}`` (linear interpolation, as numpy).
        counts, edges: the histogram (``len(edges) == len(counts) + 1``; bins are half-open
            ``[a, b)`` except the last, as numpy).
        worst: ``((query_id, value), ...)`` lowest values first, ties by query id.
    """

    key: str
    n_queries: int
    n_skipped: int
    mean: float
    quantiles: dict[float, float]
    counts: tuple[int, ...]
    edges: tuple[float, ...]
    worst: tuple[tuple[int, float], ...] = field(default=())

    def scalars(self, prefix: str = "") -> dict[str, float]:
        """``{prefix + "ndcg@10/mean": ..., prefix + "ndcg@10/q10": ...}``.

        Example:
            >>> import torch
            >>> b = per_query_breakdown({"query_id": torch.tensor([1, 2]), "mrr": torch.tensor([0.5, 1.0])}, quantiles=(0.5,))
            >>> b.scalars("val/")
            {'val/mrr/mean': 0.75, 'val/mrr/q50': 0.75}
        """
        head = f"{prefix}{self.key}/"
        return {head + "mean": self.mean} | {f"{head}q{q * 100:g}": v for q, v in self.quantiles.items()}

    def __str__(self) -> str:
        qs = "  ".join(f"q{q * 100:g}={v:.4f}" for q, v in self.quantiles.items())
        lines = [f"{self.key} over {self.n_queries} queries ({self.n_skipped} skipped): mean={self.mean:.4f}  {qs}"]
        peak = max(self.counts) if self.counts else 0
        for i, c in enumerate(self.counts):
            bar = "#" * (round(30 * c / peak) if peak else 0)
            lines.append(
                f"  [{self.edges[i]:.3f}, {self.edges[i + 1]:.3f}{']' if i == len(self.counts) - 1 else ')'} {c:6d} {bar}"
            )
        return "\n".join(lines)


def per_query_breakdown(
    per_query: Mapping[str, Tensor],
    key: str | None = None,
    *,
    bins: int = 10,
    range: tuple[float, float] | None = None,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    worst: int = 10,
) -> QueryBreakdown:
    """The distribution of one per-query metric and its worst queries.

    Args:
        per_query: ``RankingMetrics(..., keep_per_query=True).compute_per_query()``:
            ``{"query_id": (Q,), key: (Q,), ...}``.
        key: which metric; may be omitted when ``per_query`` holds one.
        bins: number of histogram bins.
        range: histogram range; default ``(0, 1)`` when every value lies in it (nDCG, AP, ...),
            else ``(min, max)``.
        quantiles: probabilities in ``[0, 1]``.
        worst: how many of the lowest-scoring queries to list.

    NaN values (queries skipped by ``empty_target_action="skip"``) are counted in ``n_skipped`` and
    left out. With no value at all, ``mean`` and the quantiles are NaN (with a ``UserWarning``), the
    histogram is empty and ``worst`` is ``()``.

    Example:
        >>> import torch
        >>> from torch_rankeval import RankingMetrics
        >>> from torch_rankeval.diagnostics import per_query_breakdown
        >>> m = RankingMetrics(("ndcg@3",), keep_per_query=True)
        >>> m.update(torch.tensor([[0.9, 0.5, 0.1], [0.9, 0.5, 0.1], [0.1, 0.5, 0.9]]),
        ...          torch.tensor([[1, 0, 0], [0, 1, 0], [1, 0, 0]]), indexes=torch.tensor([11, 12, 13]))
        >>> b = per_query_breakdown(m.compute_per_query(), bins=2, quantiles=(0.5,), worst=2)
        >>> b.counts, b.quantiles, b.worst
        ((0, 3), {0.5: 0.6309297680854797}, ((13, 0.5), (12, 0.6309297680854797)))
    """
    if not isinstance(per_query, Mapping) or "query_id" not in per_query:
        raise ValueError("per_query must be the dict of compute_per_query() (keep_per_query=True), with 'query_id'")
    keys = [k for k in per_query if k != "query_id"]
    if key is None:
        if len(keys) != 1:
            raise ValueError(f"per_query holds {keys}: pass key= to choose one")
        key = keys[0]
    if key not in per_query:
        raise ValueError(f"key {key!r} is not in per_query; it holds {keys}")
    values = per_query[key].detach().to("cpu", torch.float64)
    ids = per_query["query_id"].detach().to("cpu", torch.int64)
    if values.ndim != 1 or ids.shape != values.shape:
        raise ValueError(f"per_query[{key!r}] must be (Q,) like query_id {tuple(ids.shape)}, got {tuple(values.shape)}")
    if isinstance(bins, bool) or not isinstance(bins, int) or bins <= 0:
        raise ValueError(f"bins must be a positive int, got {bins!r}")
    if isinstance(worst, bool) or not isinstance(worst, int) or worst < 0:
        raise ValueError(f"worst must be a non-negative int, got {worst!r}")
    qs = [float(q) for q in quantiles]
    if any(not 0.0 <= q <= 1.0 for q in qs):
        raise ValueError(f"quantiles must lie in [0, 1], got {list(quantiles)}")

    kept = ~values.isnan()
    v, i = values[kept], ids[kept]
    n, skipped = int(v.numel()), int((~kept).sum())
    if n == 0:
        warnings.warn(
            f"per_query_breakdown: no query has a value for {key!r}; the statistics are NaN", UserWarning, stacklevel=2
        )
        return QueryBreakdown(key, 0, skipped, float("nan"), {q: float("nan") for q in qs}, (), ())
    lo, hi = (float(range[0]), float(range[1])) if range is not None else _default_range(v)
    if not lo < hi:
        raise ValueError(f"range must be (low, high) with low < high, got {range!r}")
    hist, edges = torch.histogram(v, bins=bins, range=(lo, hi))
    q_values = torch.quantile(v, torch.tensor(qs, dtype=torch.float64)).tolist() if qs else []
    order = torch.argsort(v, stable=True)[:worst]  # ids arrive sorted, so ties keep id order
    return QueryBreakdown(
        key=key,
        n_queries=n,
        n_skipped=skipped,
        mean=float(v.mean()),
        quantiles=dict(zip(qs, q_values)),
        counts=tuple(int(c) for c in hist.tolist()),
        edges=tuple(edges.tolist()),
        worst=tuple((int(i[j]), float(v[j])) for j in order.tolist()),
    )


def _default_range(v: Tensor) -> tuple[float, float]:
    lo, hi = float(v.min()), float(v.max())
    if lo >= 0.0 and hi <= 1.0:
        return 0.0, 1.0
    if lo == hi:
        return lo - 0.5, hi + 0.5
    return lo, hi


# ---------------------------------------------------------------------------------------- logging
def profile_scalars(
    profile: Mapping[str, Tensor],
    report: InversionReport | None = None,
    *,
    prefix: str = "profile/",
    stats: Sequence[str] = PROFILE_STATS,
    ideal: bool = True,
    breakdown: QueryBreakdown | None = None,
) -> dict[str, float]:
    """A position profile (and its reports) as a flat ``{name: float}`` dict for any logger.

    Names: ``"{prefix}{stat}@{p}"`` and ``"{prefix}ideal_{stat}@{p}"`` for the chosen ``stats`` and
    positions ``1..P``; the report's ``"inversion@1-3_vs_5-8"`` (``lower - upper`` mean, positive =
    inverted); the breakdown's ``"ndcg@10/mean"``, ``"ndcg@10/q10"``, .... Positions that no query
    reaches (NaN means) are left out, so a logger never receives a NaN from here.

    Example:
        >>> import torch
        >>> from torch_rankeval import PositionProfile
        >>> from torch_rankeval.diagnostics import profile_scalars
        >>> m = PositionProfile(positions=2, gain="linear")
        >>> m.update(torch.tensor([[0.9, 0.1]]), torch.tensor([[0, 1]]))
        >>> profile_scalars(m.compute(), stats=("relevance",))
        {'profile/relevance@1': 0.0, 'profile/relevance@2': 1.0, 'profile/ideal_relevance@1': 1.0, 'profile/ideal_relevance@2': 0.0}
    """
    unknown = [s for s in stats if s not in PROFILE_STATS]
    if unknown:
        raise ValueError(f"unknown stats {unknown}: use names from {PROFILE_STATS}")
    missing = [s for s in stats if s not in profile]
    if missing:
        raise ValueError(f"profile lacks {missing}: pass PositionProfile.compute()'s result")
    names = [*stats, *(f"ideal_{s}" for s in stats if ideal and f"ideal_{s}" in profile)]
    out = {
        f"{prefix}{name}@{p + 1}": v
        for name in names
        for p, v in enumerate(profile[name].detach().to("cpu", torch.float64).tolist())
        if not math.isnan(v)
    }
    for extra in (report, breakdown):
        if extra is not None:
            out.update({k: v for k, v in extra.scalars().items() if not math.isnan(v)})
    return out


# ---------------------------------------------------------------------------------------- one run
#: The fields of a :class:`BandComparison` that :meth:`ProfileSummary.to_dict` writes as they are.
_COMPARISON_FIELDS = ("stat", "upper_mean", "lower_mean", "effect", "inverted", "n_paired", "standardized", "p_value")


@dataclass(frozen=True)
class ProfileSummary:
    """The "CT scan" of one run (see :func:`profile_from_tensors`).

    Attributes:
        profile: ``PositionProfile.compute()``; ``per_query``: its ``compute_per_query()`` rows.
        report: the :class:`InversionReport` over the per-query rows.
        query_values: ``{"query_id": (Q,), "ndcg@P": (Q,)}``; ``breakdown``: its :class:`QueryBreakdown`.
    """

    profile: dict[str, Tensor]
    per_query: dict[str, Tensor]
    report: InversionReport
    query_values: dict[str, Tensor]
    breakdown: QueryBreakdown

    def scalars(self, prefix: str = "") -> dict[str, float]:
        """Every scalar of the summary (see :func:`profile_scalars`), each name prefixed."""
        flat = profile_scalars(self.profile, self.report, breakdown=self.breakdown)
        return {prefix + k: v for k, v in flat.items()}

    def to_text(self, query_names: Sequence[str] | None = None) -> str:
        """A plain-text table of the profile, the inversions and the per-query breakdown."""
        p = self.profile
        has_ideal = "ideal_relevance" in p
        header = "pos count rel ideal_rel gain ideal_gain rel_share ideal_share dcg ideal_dcg".split()
        header = [h for h in header if has_ideal or not h.startswith("ideal_")]
        columns = [c for stat in PROFILE_STATS for c in (stat, f"ideal_{stat}")[: 1 + has_ideal]]
        lines = ["  ".join(f"{h:>11}" for h in header)]
        for i in range(p["relevance"].shape[0]):
            row = [f"{i + 1:>11}", f"{int(p['count'][i]):>11}"] + [f"{float(p[c][i]):>11.4f}" for c in columns]
            lines.append("  ".join(row))
        lines += ["", str(self.report), "", str(self.breakdown)]
        if self.breakdown.worst:
            lines.append("  worst queries:")
            for qid, value in self.breakdown.worst:
                name = query_names[qid] if query_names is not None else str(qid)
                lines.append(f"    {name:<20} {value:.4f}")
        return "\n".join(lines)

    def to_dict(self, query_names: Sequence[str] | None = None) -> dict[str, Any]:
        """JSON-ready plain data (lists and floats; NaN stays NaN)."""
        name = (lambda q: query_names[q]) if query_names is not None else (lambda q: q)
        return {
            "profile": {k: v.tolist() for k, v in self.profile.items()},
            "inversions": [
                {"name": c.name, "upper": list(c.upper), "lower": list(c.lower)}
                | {f: getattr(c, f) for f in _COMPARISON_FIELDS}
                for c in self.report.comparisons
            ],
            "per_query": {f: getattr(self.breakdown, f) for f in ("key", "n_queries", "n_skipped", "mean")}
            | {
                "quantiles": {str(q): v for q, v in self.breakdown.quantiles.items()},
                "histogram": {"counts": list(self.breakdown.counts), "edges": list(self.breakdown.edges)},
                "worst": [[name(q), v] for q, v in self.breakdown.worst],
            },
        }


def profile_from_tensors(
    preds: Tensor,
    target: Tensor,
    *,
    mask: Tensor | None = None,
    ideal_target: Tensor | None = None,
    query_ids: Tensor | None = None,
    positions: int = 10,
    bands: Sequence[Any] | None = None,
    stat: str = "relevance",
    worst: int = 10,
    test: bool = True,
    convention: Any = None,
    ignore_index: int | None = None,
    **conventions: Any,
) -> ProfileSummary:
    """The whole diagnosis of one run from padded tensors: profile, inversions, per-query nDCG@P.

    Args:
        preds, target, mask, ideal_target: as :meth:`PositionProfile.update` (padded ``(N, L)``).
        query_ids: ``(N,)`` integer ids reported for the worst queries (default ``0..N-1``).
        positions: ``P``; the breakdown is of nDCG@P.
        bands, stat, test: passed to :func:`inversion_report` (over per-query rows, so with a
            paired t-test).
        worst: how many worst queries to list.
        convention, ignore_index, conventions: the conventions (``gain``, ``ties``, ``log_base``,
            ``relevance_threshold``, ``empty_target_action``, ...), shared by the profile and nDCG.

    Example:
        >>> import torch
        >>> from torch_rankeval.diagnostics import profile_from_tensors
        >>> s = profile_from_tensors(torch.tensor([[3.0, 2.0, 1.0]]), torch.tensor([[0, 1, 2]]), positions=3, test=False)
        >>> [round(v, 4) for v in s.profile["relevance"].tolist()], round(s.breakdown.mean, 4)
        ([0.0, 1.0, 2.0], 0.5869)
    """
    n = preds.shape[0] if preds.ndim == 2 else 1
    ids = torch.arange(n, device=preds.device) if query_ids is None else query_ids
    return profile_from_batches(
        [(preds, target, mask, ideal_target, ids)],
        positions=positions,
        bands=bands,
        stat=stat,
        worst=worst,
        test=test,
        convention=convention,
        ignore_index=ignore_index,
        **conventions,
    )


def profile_from_batches(
    batches: Iterable[tuple[Tensor, Tensor, Tensor | None, Tensor | None, Tensor]],
    *,
    positions: int = 10,
    bands: Sequence[Any] | None = None,
    stat: str = "relevance",
    worst: int = 10,
    test: bool = True,
    convention: Any = None,
    ignore_index: int | None = None,
    **conventions: Any,
) -> ProfileSummary:
    """:func:`profile_from_tensors` over several padded batches of one run (e.g. the length buckets
    of :func:`torch_rankeval.trec.to_batches`, so that memory follows the documents): each batch is
    ``(preds, target, mask, ideal_target, query_ids)`` with globally unique ``query_ids``.

    Example:
        >>> import torch
        >>> from torch_rankeval.diagnostics import profile_from_batches
        >>> batches = [(torch.tensor([[3.0, 2.0, 1.0]]), torch.tensor([[0, 1, 2]]), None, None, torch.tensor([0])),
        ...            (torch.tensor([[1.0]]), torch.tensor([[1]]), None, None, torch.tensor([1]))]
        >>> s = profile_from_batches(batches, positions=3, test=False)
        >>> [round(v, 4) for v in s.profile["relevance"].tolist()], s.profile["count"].tolist()
        ([0.5, 1.0, 2.0], [2, 1, 1])
    """
    profile_conv = {
        k: conventions[k] for k in ("gain", "log_base", "discount", "ties", "relevance_threshold") if k in conventions
    }
    unknown = set(conventions) - set(profile_conv) - {"empty_target_action"}
    if unknown:
        raise TypeError(f"unknown convention argument(s) {sorted(unknown)}")
    metric = PositionProfile(
        positions, keep_per_query=True, convention=convention, ignore_index=ignore_index, **profile_conv
    )
    ndcg_conv = {k: v for k, v in conventions.items() if k != "relevance_threshold"}  # nDCG reads grades, not it
    ndcg = RankingMetrics(
        (f"ndcg@{positions}",), keep_per_query=True, convention=convention, ignore_index=ignore_index, **ndcg_conv
    )
    for preds, target, mask, ideal_target, ids in batches:
        metric.update(preds, target, ids, mask=mask, ideal_target=ideal_target)
        ndcg.update(preds, target, ids, mask=mask, ideal_target=ideal_target)
    per_query, query_values = metric.compute_per_query(), ndcg.compute_per_query()
    return ProfileSummary(
        profile=metric.compute(),
        per_query=per_query,
        report=inversion_report(per_query, bands, stat=stat, test=test),
        query_values=query_values,
        breakdown=per_query_breakdown(query_values, worst=worst),
    )
