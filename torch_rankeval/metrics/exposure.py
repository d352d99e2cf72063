"""Exposure (beyond-accuracy) metrics of top-k recommendation lists: catalogue coverage, Gini, entropy.

:class:`ItemExposure` counts how often each item of the catalogue appears in the top ``k`` of the
lists it sees (one float64 histogram, summed across processes with one all-reduce) and turns that
histogram into the usual concentration measures.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from torch_rankeval._choices import TIES
from torch_rankeval.metrics._hooks import ConfiguredMetric
from torch_rankeval.metrics._options import check_metric_options
from torch_rankeval.metrics._window import DECAY_PREFIX, WINDOW_PREFIX, WindowMixin
from torch_rankeval.ranking.sparse import check_exclude
from torch_rankeval.ranking.topk import DEFAULT_CHUNK_ELEMENTS, boundary_histogram, topk_view

__all__ = ["ItemExposure"]

_TIES = TIES[:2]  # "average" and "first": the policies the exposure histogram supports


class ItemExposure(WindowMixin, ConfiguredMetric):
    """Catalogue coverage, Gini index and entropy of the items recommended in the top ``k``.

    Each ``update(preds, exclude=None)`` ranks every row of ``preds`` (``(N, num_items)`` scores:
    one row per user over the whole catalogue), takes its top ``k`` non-excluded items (one
    ``torch.topk`` per row, no sort) and adds them to a per-item exposure count ``c``. ``compute()``
    returns, with ``n = num_items`` and ``C = sum(c)`` (the number of recommendation slots filled):

    - ``"coverage@k"``: the share of the catalogue recommended at least once, ``#{i: c_i > 0} / n``;
    - ``"gini@k"``: the Gini index of the exposure over ALL items (never-recommended ones included),
      counts sorted ascending ``c_(1) <= ... <= c_(n)``: ``sum_i (2i - n - 1) c_(i) / (n C)``;
      0 when every item is equally exposed, ``1 - 1/n`` when one item takes every slot;
    - ``"entropy@k"``: the Shannon entropy (natural log) of the exposure distribution ``p = c / C``,
      ``-sum_i p_i log p_i``; at most ``log n``;
    - ``"popularity@k"`` (only when a per-item ``popularity`` is given): the mean popularity of the
      recommended items, ``sum_i c_i popularity_i / C``.

    **Ties at the cutoff.** With ``ties="average"`` (default) items whose scores tie across the
    cutoff share the remaining slots: if ``s`` items score strictly above the ``k``-th score and
    ``n_tied`` items (over the whole row) equal it, each tied item gets ``(k - s) / n_tied`` -- its
    expected exposure over all orders of the tied items. The measures are then those of the
    *expected* histogram: a tied item with any share counts as covered. ``ties="first"`` gives the
    slots to the tied items in input (index) order, as a stable sort would.

    **Excluded items and short rows.** ``exclude`` (``(N, num_items)`` bool, dense or sparse torch
    tensor, True = never recommended, e.g. the items the user already interacted with) removes items
    from a row's ranking; a row with fewer than ``k`` non-excluded items contributes all of them (it
    fills fewer slots), a row with none contributes nothing. Coverage, Gini and entropy are always
    over the whole catalogue of ``num_items``.

    **No data.** Before any update (or when no slot was ever filled) every value is NaN and a
    ``UserWarning`` says why. An update with zero rows is a no-op.

    Args:
        num_items: the catalogue size ``n`` (the width of ``preds``).
        k: the list length (cutoff); must be ``<= num_items``.
        popularity: optional ``(num_items,)`` per-item popularity (e.g. training interaction counts),
            finite; adds ``"popularity@k"``.
        ties: ``"average"`` (default) or ``"first"``.
        validate_args: check the inputs' values (NaN / infinite scores at non-excluded items, sparse
            ``exclude`` entries); with False, ``update`` has no host sync (every row then gets one
            extra pass over its scores to find ties at the cutoff).
        chunk_elements: bound on the ``rows x num_items`` of one chunk of that pass.
        window: also report the measures of the histogram of the last ``window`` updates of each
            process (``"window/coverage@k"``, ...): a ring of ``window x num_items`` float64
            histograms (updates only: ``window_unit="queries"`` is refused for a window). Default None.
        half_life: also report the measures of the exponentially decayed histogram
            (``"decay/coverage@k"``, ...): each update's (or, with ``window_unit="queries"``, each
            row's) exposure weighs ``2 ** (-age / half_life)``. An item recommended once keeps a
            (decaying, never zero) weight, so the decayed coverage counts every item ever
            recommended; Gini, entropy and popularity weigh the recent lists more. Default None.
        window_unit: what ``window`` and ``half_life`` count: ``"updates"`` (default) or ``"queries"``
            (rows, for ``half_life`` only).
        kwargs: torchmetrics' ``Metric`` options (``process_group``, ``sync_on_compute``, ...); any
            other keyword is a ``TypeError`` naming it.

    State: ``counts``, ``(num_items,)`` float64, ``dist_reduce_fx="sum"``: a distributed sync is one
    all-reduce of ``num_items`` float64 numbers, whatever the number of users.

    Example:
        >>> import torch
        >>> from torch_rankeval.metrics import ItemExposure
        >>> metric = ItemExposure(num_items=4, k=2, popularity=torch.tensor([10.0, 5.0, 1.0, 0.0]))
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.1, 0.0],      # top 2: items 0, 1
        ...                             [0.7, 0.1, 0.9, 0.0]]))    # top 2: items 2, 0
        >>> metric.counts
        tensor([2., 1., 1., 0.], dtype=torch.float64)
        >>> {name: round(v.item(), 4) for name, v in metric.compute().items()}
        {'coverage@2': 0.75, 'gini@2': 0.375, 'entropy@2': 1.0397, 'popularity@2': 6.5}
        >>> tied = ItemExposure(num_items=4, k=2)
        >>> tied.update(torch.tensor([[0.9, 0.5, 0.5, 0.5]]))    # 1 slot left for 3 tied items
        >>> tied.counts
        tensor([1.0000, 0.3333, 0.3333, 0.3333], dtype=torch.float64)
    """

    is_differentiable = False
    higher_is_better = None
    full_state_update = False
    plot_lower_bound = 0.0

    counts: Tensor

    @property
    def _kept_dtypes(self) -> tuple[str, ...]:  # type: ignore[override]
        """float64 whatever ``.half()`` / ``set_dtype`` do: the histogram(s) and the popularity."""
        return ("counts", "popularity", *self._window_states, *self._window_tables)

    def __init__(
        self,
        num_items: int,
        k: int,
        *,
        popularity: Tensor | None = None,
        ties: str = "average",
        validate_args: bool = True,
        chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        check_metric_options(self, kwargs)
        super().__init__(**kwargs)
        if isinstance(num_items, bool) or not isinstance(num_items, int) or num_items <= 0:
            raise ValueError(f"num_items must be a positive int (the catalogue size), got {num_items!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise ValueError(f"k must be a positive int (the length of the recommendation lists), got {k!r}")
        if k > num_items:
            raise ValueError(
                f"k={k} is larger than the catalogue (num_items={num_items}): a list cannot hold more items"
            )
        if ties not in _TIES:
            raise ValueError(f"ties={ties!r} is not valid for ItemExposure: use 'average' or 'first'")
        if not isinstance(validate_args, bool):
            raise TypeError(f"validate_args must be a bool, got {type(validate_args).__name__}")
        if isinstance(chunk_elements, bool) or not isinstance(chunk_elements, int) or chunk_elements <= 0:
            raise ValueError(f"chunk_elements must be a positive int, got {chunk_elements!r}")
        self.num_items, self.k, self.ties = num_items, k, ties
        self.validate_args, self.chunk_elements = validate_args, chunk_elements
        if popularity is not None:
            if not isinstance(popularity, Tensor) or popularity.shape != (num_items,) or popularity.dtype.is_complex:
                raise ValueError(f"popularity must be a real ({num_items},) tensor, one value per item")
            if popularity.dtype == torch.bool or not bool(torch.isfinite(popularity.double()).all()):
                raise ValueError("popularity must hold finite numbers (e.g. interaction counts per item)")
            popularity = popularity.detach().to(torch.float64)
        self.register_buffer("popularity", popularity, persistent=False)
        self.keys = [f"coverage@{k}", f"gini@{k}", f"entropy@{k}"] + (
            [f"popularity@{k}"] if popularity is not None else []
        )
        self.add_state("counts", torch.zeros(num_items, dtype=torch.float64), dist_reduce_fx="sum")
        recent = self._add_window_states(
            num_items, ("counts",), {"counts": ("counts", 1)}, window=window, half_life=half_life,
            window_unit=window_unit, queries=False,
        )  # fmt: skip
        self._set_config({"num_items": num_items, "k": k, "ties": ties, "popularity": popularity, **recent})

    # ------------------------------------------------------------------ update
    def update(self, preds: Tensor, exclude: Tensor | None = None) -> None:
        """Add the top-``k`` lists of a batch.

        Args:
            preds: ``(N, num_items)`` scores (float16 / bfloat16 / float32 / float64), one row per
                user; ``(num_items,)`` for one user.
            exclude: optional ``(N, num_items)`` bool, dense or sparse (COO / CSR): True = never
                recommended (e.g. already seen).
        """
        if not isinstance(preds, Tensor):
            raise TypeError(f"preds must be a torch.Tensor, got {type(preds).__name__}")
        if preds.ndim == 1:
            preds = preds.unsqueeze(0)
            if exclude is not None and isinstance(exclude, Tensor) and exclude.ndim == 1:
                exclude = exclude.unsqueeze(0)
        if preds.ndim != 2 or preds.shape[-1] != self.num_items:
            raise ValueError(
                f"preds must be (N, num_items) = (N, {self.num_items}): one row of scores per user over the whole "
                f"catalogue, got {tuple(preds.shape)}"
            )
        if preds.device != self.counts.device:
            raise ValueError(
                f"preds is on {preds.device} but the metric is on {self.counts.device}: move the metric with "
                f"metric.to({str(preds.device)!r}) or the inputs to the metric's device"
            )
        n = preds.shape[0]
        if exclude is not None:
            exclude = check_exclude(exclude, (n, self.num_items), preds.device, validate_args=self.validate_args)
        if n == 0:
            return
        view = topk_view(
            preds, self.k, exclude=exclude, ties=self.ties, validate_args=self.validate_args,
            chunk_elements=self.chunk_elements,
        )  # fmt: skip
        zero = torch.zeros((), dtype=torch.float64, device=preds.device)
        weights = view.valid.to(torch.float64)
        counts = self.counts
        rows = None  # the decay weight of each row (half_life per list)
        if self._windowed:  # this batch's histogram alone: the window's entry
            counts = torch.zeros_like(self.counts)
            if self._per_query:
                ages = torch.arange(n - 1, -1, -1, device=preds.device, dtype=torch.float64)
                rows = torch.pow(self._gamma, ages)
        if self.ties == "average":
            # A boundary group that spills past the cutoff: its members inside the view get nothing
            # here; every member of the group (in or out of the view) gets (slots left) / (group size).
            positions = torch.arange(view.k, device=preds.device)
            in_group = view.spilled.unsqueeze(-1) & (positions >= view.boundary_start.unsqueeze(-1))
            weights = torch.where(in_group, zero, weights)
            slots = view.n_valid.clamp(max=view.k) - view.boundary_start
            share = slots.to(torch.float64) / view.boundary_size.clamp(min=1).to(torch.float64)
            counts += boundary_histogram(preds, view, share, exclude, chunk_elements=self.chunk_elements)
            if rows is not None:
                decayed = boundary_histogram(preds, view, share * rows, exclude, chunk_elements=self.chunk_elements)
        counts.index_add_(0, view.items.reshape(-1), weights.reshape(-1))
        if not self._windowed:
            return
        self.counts += counts
        if rows is None:
            self._window_add(counts.reshape(1, 1, -1))
            return
        if self.ties != "average":
            decayed = torch.zeros_like(counts)
        decayed.index_add_(0, view.items.reshape(-1), (weights * rows.unsqueeze(-1)).reshape(-1))
        self._decay_add(decayed.unsqueeze(0), n)

    # ------------------------------------------------------------------ results
    def compute(self) -> dict[str, Tensor]:
        """``{"coverage@k", "gini@k", "entropy@k"[, "popularity@k"]}`` over every update (and process);
        with ``window`` / ``half_life`` also the same measures of the window's histogram
        (``"window/coverage@k"``, ...) and of the decayed one (``"decay/coverage@k"``, ...)."""
        out = self._measures(self.counts, "")
        if self._window is not None:
            out.update(self._measures(self._window_totals()["counts"], WINDOW_PREFIX))
        if self._half_life is not None:
            out.update(self._measures(self._decay_totals()["counts"], DECAY_PREFIX))
        return out

    def _measures(self, c: Tensor, prefix: str) -> dict[str, Tensor]:
        """The measures of the histogram ``c``, under ``prefix + key``."""
        n = self.num_items
        total = c.sum()
        out_dtype = self.dtype if self.dtype.is_floating_point else torch.float32
        if not bool(total > 0):
            where = f" in {prefix.rstrip('/')}" if prefix else ""
            warnings.warn(
                f"ItemExposure: no recommendation slot was filled{where} (no update, or every item excluded); "
                "returning NaN",
                UserWarning,
                stacklevel=3,
            )
            nan = torch.full((), float("nan"), dtype=out_dtype, device=c.device)
            return {prefix + key: nan.clone() for key in self.keys}
        coverage = (c > 0).sum().to(torch.float64) / n
        ascending = torch.sort(c).values
        i = torch.arange(1, n + 1, dtype=torch.float64, device=c.device)
        gini = ((2 * i - n - 1) * ascending).sum() / (n * total)
        p = c / total
        entropy = -torch.where(p > 0, p * torch.log(torch.where(p > 0, p, 1.0)), 0.0).sum()
        values = [coverage, gini, entropy]
        if self.popularity is not None:
            values.append((c * self.popularity).sum() / total)
        return {prefix + key: v.to(out_dtype) for key, v in zip(self.keys, values)}

    # ------------------------------------------------------------------ state handling
    # Configuration, compute groups, foreign state, sync and dtypes: ConfiguredMetric (metrics/_hooks.py).
    def _check_states(self, where: str, states: Mapping[str, Any]) -> None:
        """An incoming histogram must count this catalogue's items (and its window fit this one's)."""
        self._check_window_states(where, states)
        counts = states.get("counts")
        if counts is None:
            return
        if not isinstance(counts, Tensor) or tuple(counts.shape) != (self.num_items,):
            shape = tuple(counts.shape) if isinstance(counts, Tensor) else type(counts).__name__
            raise ValueError(
                f"ItemExposure.{where}: the incoming 'counts' state has shape {shape}, but this metric counts "
                f"{self.num_items} items; it comes from a metric over another catalogue"
            )

    def _upgrade_states(self, states: Mapping[str, Any]) -> dict[str, Any]:
        """A state without window states (from before windows, or without ``window`` /
        ``half_life``): its window starts empty."""
        return self._missing_window_states(states) if "counts" in states else {}

    def _legacy_config(self, state_dict: dict, prefix: str) -> None:
        """Versions before the metadata wrote an ``_exposure_config`` key next to persisted states."""
        theirs = state_dict.pop(prefix + "_exposure_config", None)
        if theirs is None:
            return
        popularity = "" if self.popularity is None else self.popularity.cpu().numpy().tobytes().hex()
        config = f"{self.num_items}|{self.k}|{self.ties}|{popularity}"
        mine = int(hashlib.sha1(config.encode()).hexdigest()[:15], 16)
        if not (isinstance(theirs, Tensor) and theirs.numel() == 1 and int(theirs) == mine):
            raise ValueError(
                "ItemExposure.load_state_dict: the state comes from a metric with a different configuration "
                "(num_items, k, ties or popularity)"
            )
