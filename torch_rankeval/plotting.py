"""Figures for the diagnostics: quality by position, per-query histograms, before/after comparisons.

matplotlib is an optional dependency (``pip install "torch-rankeval[plot]"``), imported only when a
function here runs. Figures are built with :class:`matplotlib.figure.Figure` directly, never through
``pyplot``: no global figure registry, nothing to close, and they render headless on any backend.
Every function returns the ``Figure`` (show it in a notebook with ``display(fig)``, log it with
TensorBoard's ``add_figure``) and saves it when given ``path`` (the suffix picks the format: ``.png``,
``.svg``, ``.pdf``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from torch_rankeval.diagnostics import InversionReport, per_query_breakdown
from torch_rankeval.metrics.position_profile import PROFILE_STATS

__all__ = ["plot_position_profile", "plot_query_histogram", "plot_before_after", "STAT_LABELS"]

#: Axis labels of the profile statistics.
STAT_LABELS = {
    "relevance": "mean relevance (grade)",
    "gain": "mean gain",
    "relevant_share": "share of relevant documents",
    "dcg_contribution": "mean DCG contribution",
}
_IDEAL_STYLE = {"linestyle": "--", "color": "0.35"}


def _new_figure(figsize: tuple[float, float], ncols: int = 1) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError(
            'torch_rankeval.plotting needs matplotlib, an optional dependency: pip install "torch-rankeval[plot]"'
        ) from err
    fig = Figure(figsize=figsize, layout="constrained")
    fig.subplots(1, ncols)
    return fig


def _target(ax: Any) -> tuple[Any, Any]:
    if ax is None:
        ax = _new_figure((6.4, 4.0)).axes[0]
    return ax.figure, ax


def _finish(fig: Any, path: str | os.PathLike[str] | None) -> Any:
    if path is not None:
        fig.savefig(path, dpi=100)
    return fig


def _series(profile: Mapping[str, Tensor], key: str) -> list[float]:
    if key not in profile:
        raise ValueError(
            f"the profile lacks {key!r}: pass PositionProfile.compute()'s result (ideal=True for the ideal)"
        )
    return profile[key].detach().to("cpu", torch.float64).tolist()


def _check_stat(stat: str) -> None:
    if stat not in PROFILE_STATS:
        raise ValueError(f"stat={stat!r} is not valid: use one of {PROFILE_STATS}")


def plot_position_profile(
    profile: Mapping[str, Tensor],
    *,
    stat: str = "relevance",
    ideal: bool = True,
    compare: Mapping[str, Tensor] | None = None,
    labels: Sequence[str] = ("model", "other model"),
    report: InversionReport | None = None,
    title: str | None = None,
    ax: Any = None,
    path: str | os.PathLike[str] | None = None,
) -> Any:
    """Quality by rank position: the model's profile, the ideal ranking's, optionally a second model's.

    Args:
        profile: :meth:`PositionProfile.compute() <torch_rankeval.PositionProfile.compute>`'s result.
        stat: ``"relevance"`` (default), ``"gain"``, ``"relevant_share"`` or ``"dcg_contribution"``.
        ideal: draw the ideal ranking's profile (dashed) when the profile has it.
        compare: a second model's profile on the same positions.
        labels: legend names of ``profile`` and ``compare``.
        report: an :func:`~torch_rankeval.diagnostics.inversion_report`; its inverted lower bands are
            shaded.
        title: the axes title (default: the number of queries).
        ax: draw into these matplotlib axes instead of a new figure.
        path: save the figure there (format from the suffix).

    Positions that no query reaches (NaN) are gaps in the lines.

    Example:
        >>> import torch
        >>> from torch_rankeval import PositionProfile
        >>> from torch_rankeval.plotting import plot_position_profile
        >>> m = PositionProfile(positions=3)
        >>> m.update(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[0, 1, 2]]))
        >>> fig = plot_position_profile(m.compute())
        >>> ax = fig.axes[0]
        >>> ax.get_xlabel(), ax.get_ylabel(), [t.get_text() for t in ax.get_legend().get_texts()]
        ('rank position', 'mean relevance (grade)', ['model', 'ideal ranking'])
    """
    _check_stat(stat)
    fig, ax = _target(ax)
    values = _series(profile, stat)
    x = list(range(1, len(values) + 1))
    ax.plot(x, values, marker="o", label=labels[0])
    if compare is not None:
        other = _series(compare, stat)
        if len(other) != len(values):
            raise ValueError(
                f"compare profiles {len(other)} positions, profile {len(values)}: profile the same positions"
            )
        ax.plot(x, other, marker="s", label=labels[1] if len(labels) > 1 else "other model")
    if ideal and f"ideal_{stat}" in profile:
        ax.plot(x, _series(profile, f"ideal_{stat}"), marker=".", label="ideal ranking", **_IDEAL_STYLE)
    if report is not None:
        beaten: dict[tuple, list[str]] = {}
        for c in report.inversions:
            beaten.setdefault(c.lower, []).append(f"{c.upper[0]}-{c.upper[1]}")
        for lower, uppers in beaten.items():
            ax.axvspan(
                lower[0] - 0.5,
                lower[1] + 0.5,
                color="tab:red",
                alpha=0.12,
                label=f"{lower[0]}-{lower[1]} beats {', '.join(uppers)}",
            )
    ax.set_xlabel("rank position")
    ax.set_ylabel(STAT_LABELS[stat])
    ax.set_xticks(x if len(x) <= 20 else x[:: max(1, len(x) // 10)])
    if title is None and "n_queries" in profile:
        title = f"Quality by position ({int(profile['n_queries'])} queries)"
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return _finish(fig, path)


def plot_query_histogram(
    per_query: Mapping[str, Tensor],
    key: str | None = None,
    *,
    bins: int = 10,
    range: tuple[float, float] | None = None,
    compare: Mapping[str, Tensor] | None = None,
    labels: Sequence[str] = ("model", "other model"),
    title: str | None = None,
    ax: Any = None,
    path: str | os.PathLike[str] | None = None,
) -> Any:
    """Histogram of a per-query metric (e.g. nDCG@10), with its mean; optionally a second run's.

    Args:
        per_query: ``RankingMetrics(..., keep_per_query=True).compute_per_query()``.
        key: the metric (may be omitted when ``per_query`` holds one).
        bins, range: as :func:`~torch_rankeval.diagnostics.per_query_breakdown` (both runs share the
            bins).
        compare: a second run's ``compute_per_query()``, drawn as an outline.
        labels, title, ax, path: as :func:`plot_position_profile`.

    Example:
        >>> import torch
        >>> from torch_rankeval import RankingMetrics
        >>> from torch_rankeval.plotting import plot_query_histogram
        >>> m = RankingMetrics(("ndcg@3",), keep_per_query=True)
        >>> m.update(torch.tensor([[0.9, 0.5, 0.1], [0.1, 0.5, 0.9]]), torch.tensor([[1, 0, 0], [1, 0, 0]]))
        >>> ax = plot_query_histogram(m.compute_per_query()).axes[0]
        >>> ax.get_xlabel(), ax.get_ylabel()
        ('per-query ndcg@3', 'queries')
    """
    fig, ax = _target(ax)
    first = per_query_breakdown(per_query, key, bins=bins, range=range, quantiles=(), worst=0)
    ax.stairs(first.counts, first.edges, fill=True, alpha=0.5, label=f"{labels[0]} (mean {first.mean:.3f})")
    ax.axvline(first.mean, color="C0", linewidth=1.5)
    if compare is not None:
        lo, hi = first.edges[0], first.edges[-1]
        second = per_query_breakdown(compare, first.key, bins=bins, range=(lo, hi), quantiles=(), worst=0)
        name = labels[1] if len(labels) > 1 else "other model"
        ax.stairs(second.counts, second.edges, color="C1", linewidth=2, label=f"{name} (mean {second.mean:.3f})")
        ax.axvline(second.mean, color="C1", linewidth=1.5, linestyle="--")
    ax.set_xlabel(f"per-query {first.key}")
    ax.set_ylabel("queries")
    ax.set_title(title if title is not None else f"{first.key} over {first.n_queries} queries")
    ax.legend()
    return _finish(fig, path)


def plot_before_after(
    before: Mapping[str, Tensor],
    after: Mapping[str, Tensor],
    key: str | None = None,
    *,
    labels: Sequence[str] = ("before", "after"),
    title: str | None = None,
    path: str | os.PathLike[str] | None = None,
) -> Any:
    """Compare two runs or two epochs.

    With two per-query results (``compute_per_query()``, matched by query id): a scatter of each
    query's value before vs after (points above the diagonal improved) and the per-query changes,
    sorted. With two position profiles (``PositionProfile.compute()``): the statistic ``key``
    (default ``"relevance"``) per position before and after, and the change per position.

    Args:
        before, after: two ``compute_per_query()`` results, or two ``PositionProfile.compute()`` results.
        key: the per-query metric, or the profile statistic.
        labels: names of the two runs.
        title: the figure title.
        path: save the figure there.

    Queries present in only one run, or NaN in either, are left out of the per-query panels.

    Example:
        >>> import torch
        >>> from torch_rankeval.plotting import plot_before_after
        >>> ids = torch.tensor([1, 2, 3])
        >>> fig = plot_before_after({"query_id": ids, "ndcg@10": torch.tensor([0.2, 0.5, 0.9])},
        ...                         {"query_id": ids, "ndcg@10": torch.tensor([0.4, 0.5, 0.7])})
        >>> [(a.get_xlabel(), a.get_ylabel()) for a in fig.axes]
        [('ndcg@10 (before)', 'ndcg@10 (after)'), ('queries, sorted by change', 'change in ndcg@10 (after - before)')]
    """
    if len(labels) != 2:
        raise ValueError(f"labels must name the two runs, got {labels!r}")
    fig = _new_figure((11.0, 4.2), ncols=2)
    left, right = fig.axes
    if "count" in before and "count" in after:  # two position profiles
        key = key or "relevance"
        _check_stat(key)
        a, b = _series(before, key), _series(after, key)
        if len(a) != len(b):
            raise ValueError(f"the profiles have {len(a)} and {len(b)} positions: profile the same positions")
        x = list(range(1, len(a) + 1))
        left.plot(x, a, marker="o", label=labels[0])
        left.plot(x, b, marker="s", label=labels[1])
        left.set_xlabel("rank position")
        left.set_ylabel(STAT_LABELS[key])
        left.legend()
        delta = [v1 - v0 for v0, v1 in zip(a, b)]
        right.bar(x, delta, color=["tab:green" if d >= 0 else "tab:red" for d in delta])
        right.set_xlabel("rank position")
        for axis in (left, right):
            axis.set_xticks(x if len(x) <= 20 else x[:: max(1, len(x) // 10)])
    else:
        key, xs, ys = _paired_values(before, after, key)
        left.scatter(xs, ys, s=14, alpha=0.7)
        lo, hi = min(xs + ys + [0.0]), max(xs + ys + [1.0])
        left.plot([lo, hi], [lo, hi], **_IDEAL_STYLE, linewidth=1)
        left.set_xlabel(f"{key} ({labels[0]})")
        left.set_ylabel(f"{key} ({labels[1]})")
        delta = sorted(y - x for x, y in zip(xs, ys))
        better, worse = sum(d > 0 for d in delta), sum(d < 0 for d in delta)
        left.set_title(f"{len(delta)} queries: {better} better, {worse} worse")
        right.bar(range(len(delta)), delta, width=1.0, color=["tab:green" if d >= 0 else "tab:red" for d in delta])
        right.set_xlabel("queries, sorted by change")
    right.axhline(0.0, color="0.3", linewidth=0.8)
    right.set_ylabel(f"change in {key} ({labels[1]} - {labels[0]})")
    for axis in (left, right):
        axis.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    return _finish(fig, path)


def _paired_values(
    before: Mapping[str, Tensor], after: Mapping[str, Tensor], key: str | None
) -> tuple[str, list[float], list[float]]:
    for name, d in (("before", before), ("after", after)):
        if not isinstance(d, Mapping) or "query_id" not in d:
            raise ValueError(
                f"{name} must be a compute_per_query() result (with 'query_id') or a PositionProfile.compute() result"
            )
    if key is None:
        keys = [k for k in before if k != "query_id"]
        if len(keys) != 1:
            raise ValueError(f"before holds {keys}: pass key= to choose one")
        key = keys[0]
    for name, d in (("before", before), ("after", after)):
        if key not in d:
            raise ValueError(f"{name} has no {key!r}; it holds {[k for k in d if k != 'query_id']}")
    a = dict(zip(before["query_id"].tolist(), before[key].detach().to("cpu", torch.float64).tolist()))
    b = dict(zip(after["query_id"].tolist(), after[key].detach().to("cpu", torch.float64).tolist()))
    common = [q for q in sorted(a) if q in b and a[q] == a[q] and b[q] == b[q]]  # x == x: not NaN
    if not common:
        raise ValueError("before and after share no query id with a value in both: compare runs on the same queries")
    return key, [a[q] for q in common], [b[q] for q in common]
