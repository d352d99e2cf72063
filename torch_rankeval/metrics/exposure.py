"""Exposure (beyond-accuracy) metrics of top-k recommendation lists: catalogue coverage, Gini, entropy.

:class:`ItemExposure` counts how often each item of the catalogue appears in the top ``k`` of the
lists it sees (one float64 histogram, summed across processes with one all-reduce) and turns that
histogram into the usual concentration measures.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any

import torch
from torch import Tensor

from torch_rankeval.metrics._catalogue import catalogue_input, check_catalogue_kwargs
from torch_rankeval.metrics._hooks import ConfiguredMetric
from torch_rankeval.metrics._options import check_catalogue_options
from torch_rankeval.metrics._window import DECAY_PREFIX, WINDOW_PREFIX, WindowMixin
from torch_rankeval.ranking.topk import DEFAULT_CHUNK_ELEMENTS, boundary_histogram, boundary_sums, topk_view

__all__ = ["ItemExposure"]


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
      recommended items, ``sum_i c_i popularity_i / C``;
    - ``"tail_percentage@k"`` (only with ``tail_ratio``): RecBole's ``TailPercentage``, the share of
      each user's list that is long-tail, averaged over the users with a non-empty list.

    **Several cutoffs.** ``k=(10, 20)`` ranks each row once, as deep as ``max(k)``, and keeps one
    histogram per cutoff (``counts`` is then ``(len(k), num_items)``); the keys come cutoff by cutoff.

    **Long tail** (``tail_ratio``, needs ``popularity``; RecBole's ``tail_ratio``, same name and
    meaning so that a RecBole configuration carries over): the tail ``T`` is taken among the items
    of RecBole's counter ``count_items``. Given as a ``{item: count}`` mapping (RecBole's
    ``count_items`` itself), the counter is its keys, an explicit count of 0 included (an item
    nobody interacted with is then the first tail item, as in RecBole's own test fixture); given as
    a ``(num_items,)`` tensor, it is the items with ``popularity > 0`` (RecBole builds its counter
    from the training interactions, so an item without any is not in it, and so not in the tail).
    A ratio in ``(0, 1]`` puts the ``max(1, int(ratio * #counter))`` least popular of them in ``T``
    (ties of popularity broken by item index); a number ``> 1`` puts those with
    ``popularity <= tail_ratio``.

    **Entropy.** ``entropy="natural"`` (default) is the Shannon entropy above; ``entropy="recbole"``
    is RecBole's ``ShannonEntropy``, that entropy divided by the number of distinct recommended
    items ``#{i: c_i > 0}`` (named after RecBole because it is not the usual normalisation by
    ``log n``).

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
        k: the list length (cutoff), or a tuple of them; each must be ``<= num_items``.
        popularity: optional ``(num_items,)`` per-item popularity (e.g. training interaction counts),
            finite; or a ``{item index: count}`` mapping (RecBole's ``count_items``; absent items
            count 0 and are not in the tail's counter); adds ``"popularity@k"``.
        tail_ratio: optional long-tail definition (RecBole's ``tail_ratio``): a ratio in ``(0, 1]`` or
            a popularity threshold ``> 1``; needs ``popularity``; adds ``"tail_percentage@k"``.
        entropy: ``"natural"`` (default) or ``"recbole"`` (divided by the distinct recommended items).
        ties: ``"average"`` (default) or ``"first"``.
        validate_args: check the inputs' values (NaN / infinite scores at non-excluded items, sparse
            ``exclude`` entries); with False, ``update`` has no host sync on CUDA nor under
            ``torch.compile`` (every row then gets one extra pass over its scores to find ties at
            the cutoff); on the CPU in eager mode it reads the spilled rows from host memory, as
            when validated.
        chunk_elements: bound on the ``rows x num_items`` of one chunk of that pass.
        window: also report the measures of the histogram of the last ``window`` updates of each
            process (``"window/coverage@k"``, ...): a ring of ``window x num_items`` float64
            histograms per cutoff (updates only: ``window_unit="queries"`` is refused for a window). Default None.
        half_life: also report the measures of the exponentially decayed histogram
            (``"decay/coverage@k"``, ...): each update's (or, with ``window_unit="queries"``, each
            row's) exposure weighs ``2 ** (-age / half_life)``. An item recommended once keeps a
            (decaying, never zero) weight, so the decayed coverage counts every item ever
            recommended; Gini, entropy and popularity weigh the recent lists more. Default None.
        window_unit: what ``window`` and ``half_life`` count: ``"updates"`` (default) or ``"queries"``
            (rows, for ``half_life`` only). ``tail_ratio`` is not windowed: with ``window`` or ``half_life``
            it is refused.
        kwargs: torchmetrics' ``Metric`` options (``process_group``, ``sync_on_compute``, ...); any
            other keyword is a ``TypeError`` naming it.

    State: ``counts``, ``(num_items,)`` float64 (``(len(k), num_items)`` for a tuple ``k``),
    ``dist_reduce_fx="sum"``: a distributed sync is one all-reduce of ``num_items`` float64 numbers
    per cutoff, whatever the number of users (with ``tail_ratio``: two more per cutoff).

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
        >>> both = ItemExposure(4, k=(1, 2), popularity=torch.tensor([10.0, 5.0, 1.0, 1.0]), tail_ratio=0.5)
        >>> both.update(torch.tensor([[0.9, 0.8, 0.1, 0.0], [0.7, 0.1, 0.9, 0.0]]))   # tail: items 2, 3
        >>> {name: round(v.item(), 4) for name, v in both.compute().items() if name.startswith("tail")}
        {'tail_percentage@1': 0.5, 'tail_percentage@2': 0.25}
        >>> counter = ItemExposure(4, k=1, popularity={0: 10, 1: 0, 2: 3}, tail_ratio=0.4)   # tail: item 1
        >>> counter.update(torch.tensor([[0.1, 0.9, 0.0, 0.0], [0.9, 0.1, 0.0, 0.0]]))
        >>> counter.compute()["tail_percentage@1"].item()
        0.5
    """

    is_differentiable: bool | None = False
    higher_is_better: bool | None = None
    full_state_update: bool | None = False
    plot_lower_bound: float | None = 0.0

    num_items: int
    k: int
    ties: str
    validate_args: bool
    chunk_elements: int
    keys: list[str]
    counts: Tensor

    @property
    def _kept_dtypes(self) -> tuple[str, ...]:  # type: ignore[override]
        """float64 whatever ``.half()`` / ``set_dtype`` do: the histogram(s), the popularity, the tail sums."""
        return ("counts", "popularity", "tail_sum", "tail_users", *self._window_states, *self._window_tables)

    def __init__(
        self,
        num_items: int,
        k: int | tuple[int, ...],
        *,
        popularity: Tensor | Mapping[int, float] | None = None,
        tail_ratio: float | None = None,
        entropy: str = "natural",
        ties: str = "average",
        validate_args: bool = True,
        chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        check_catalogue_kwargs(self, kwargs)
        super().__init__(**kwargs)
        ks = tuple(k) if isinstance(k, (tuple, list)) else (k,)
        if not ks:
            raise ValueError("k must be a positive int or a non-empty tuple of them, got ()")
        check_catalogue_options(self, num_items, ks, ties, validate_args, chunk_elements)
        if len(set(ks)) != len(ks):
            raise ValueError(f"k={k!r} repeats a cutoff")
        if entropy not in ("natural", "recbole"):
            raise ValueError(f"entropy={entropy!r} is not valid: use 'natural' or 'recbole' (RecBole's ShannonEntropy)")
        self.num_items, self.k, self.ties, self.entropy = num_items, k, ties, entropy
        self.cutoffs = ks
        self.validate_args, self.chunk_elements = validate_args, chunk_elements
        counted = None  # the items of RecBole's counter, when given as a mapping
        if isinstance(popularity, Mapping):
            popularity, counted = _from_counter(popularity, num_items)
        if popularity is not None:
            if not isinstance(popularity, Tensor) or popularity.shape != (num_items,) or popularity.dtype.is_complex:
                raise ValueError(f"popularity must be a real ({num_items},) tensor, one value per item")
            if popularity.dtype == torch.bool or not bool(torch.isfinite(popularity.double()).all()):
                raise ValueError("popularity must hold finite numbers (e.g. interaction counts per item)")
            popularity = popularity.detach().to(torch.float64)
        self.register_buffer("popularity", popularity, persistent=False)
        self.tail_ratio = tail_ratio
        self.register_buffer(
            "tail", None if tail_ratio is None else _tail(popularity, tail_ratio, counted), persistent=False
        )
        self.keys = [
            key
            for c in ks
            for key in (
                f"coverage@{c}", f"gini@{c}", f"entropy@{c}",
                *([f"popularity@{c}"] if popularity is not None else []),
                *([f"tail_percentage@{c}"] if tail_ratio is not None else []),
            )
        ]  # fmt: skip
        shape = (num_items,) if isinstance(k, int) else (len(ks), num_items)
        self.add_state("counts", torch.zeros(shape, dtype=torch.float64), dist_reduce_fx="sum")
        if tail_ratio is not None and (window is not None or half_life is not None):
            raise ValueError(
                "ItemExposure: tail_ratio= is not windowed: drop window=/half_life=, or measure the tail "
                "percentage with a second ItemExposure without them"
            )
        recent = self._add_window_states(
            len(ks) * num_items, ("counts",), {"counts": ("counts", 1)}, window=window, half_life=half_life,
            window_unit=window_unit, queries=False,
        )  # fmt: skip
        if tail_ratio is not None:
            self.add_state("tail_sum", torch.zeros(len(ks), dtype=torch.float64), dist_reduce_fx="sum")
            self.add_state("tail_users", torch.zeros(len(ks), dtype=torch.float64), dist_reduce_fx="sum")
        config: dict[str, Any] = {"num_items": num_items, "k": k, "ties": ties, "popularity": popularity}
        if tail_ratio is not None:  # only when set: the configurations of earlier versions stay the same
            config["tail_ratio"] = tail_ratio
        if counted is not None:
            config["counted"] = counted
        if entropy != "natural":
            config["entropy"] = entropy
        self._set_config({**config, **recent})

    # ------------------------------------------------------------------ update
    def update(
        self, preds: Tensor, exclude: Tensor | None = None, *, mask: Tensor | None = None, indexes: Any = None
    ) -> None:
        """Add the top-``k`` lists of a batch (the input stage of :mod:`torch_rankeval.metrics._catalogue`:
        the ranking metrics' checks and messages).

        Args:
            preds: ``(N, num_items)`` scores (float16 / bfloat16 / float32 / float64), one row per
                user; ``(num_items,)`` for one user.
            exclude: optional ``(N, num_items)`` bool, dense or sparse (COO / CSR): True = never
                recommended (e.g. already seen).
            mask: optional ``(N, num_items)`` bool, as for the ranking metrics: False = padding (never
                recommended, as ``exclude=True``).
            indexes: not taken (flat input has no item identity): a ``TypeError``.
        """
        preds, exclude = catalogue_input(
            self, preds, exclude, num_items=self.num_items, device=self.counts.device,
            validate_args=self.validate_args, mask=mask, indexes=indexes,
        )  # fmt: skip
        n = preds.shape[0]
        if n == 0:
            return
        view = topk_view(
            preds, max(self.cutoffs), exclude=exclude, ties=self.ties, validate_args=self.validate_args,
            chunk_elements=self.chunk_elements,
        )  # fmt: skip
        device = preds.device
        zero = torch.zeros((), dtype=torch.float64, device=device)
        counts = self.counts.view(len(self.cutoffs), self.num_items)
        rows = decayed = None  # the decay weight of each row (half_life per list) and their histogram
        if self._windowed:  # this batch's histogram alone: the window's entry
            counts = torch.zeros_like(counts)
            if self._per_query:
                ages = torch.arange(n - 1, -1, -1, device=device, dtype=torch.float64)
                rows = torch.pow(self._gamma, ages)
                decayed = torch.zeros_like(counts)
        positions = torch.arange(view.k, device=device)
        tail_col = None if self.tail is None else self.tail.to(torch.float64).unsqueeze(-1)
        tail_group = None
        for j, cutoff in enumerate(self.cutoffs):
            kk = view.n_valid.clamp(max=cutoff)
            valid = positions < kk.unsqueeze(-1)
            weights = valid.to(torch.float64)
            share = spill = None
            if self.ties == "average":
                # the tie group of the last slot: [s, s + size); its members share the kk - s slots left
                last = (kk - 1).clamp(min=0).unsqueeze(-1)
                s = view.group_start.gather(-1, last).squeeze(-1)
                size = view.group_size.gather(-1, last).squeeze(-1)
                share = torch.where(kk > 0, (kk - s).to(torch.float64) / size.clamp(min=1).to(torch.float64), zero)
                in_group = (positions >= s.unsqueeze(-1)) & (positions < (s + size).unsqueeze(-1))
                # a group that spills past the view is the boundary group: all its members get the
                # share from the pass over the row, none from the view
                spill = view.spilled & (s == view.boundary_start) & (kk > 0)
                weights = torch.where(in_group, torch.where(spill.unsqueeze(-1), zero, share.unsqueeze(-1)), weights)
                weights = torch.where(positions < s.unsqueeze(-1), 1.0, weights)
                weights = torch.where(positions < view.n_valid.unsqueeze(-1), weights, zero)
                spread = torch.where(spill, share, zero)
                counts[j] += boundary_histogram(preds, view, spread, exclude, chunk_elements=self.chunk_elements)
                if decayed is not None and rows is not None:
                    decayed[j] += boundary_histogram(
                        preds, view, spread * rows, exclude, chunk_elements=self.chunk_elements
                    )
            counts[j].index_add_(0, view.items.reshape(-1), weights.reshape(-1))
            if decayed is not None and rows is not None:
                decayed[j].index_add_(0, view.items.reshape(-1), (weights * rows.unsqueeze(-1)).reshape(-1))
            if tail_col is not None:
                in_tail = (weights * tail_col.index_select(0, view.items.reshape(-1)).view_as(weights)).sum(-1)
                if spill is not None:
                    if tail_group is None:  # the tail items of each spilled boundary group (one pass)
                        tail_group = boundary_sums(preds, view, tail_col, exclude, chunk_elements=self.chunk_elements)
                    in_tail = in_tail + torch.where(spill, share * tail_group[:, 0], zero)
                listed = kk > 0
                self.tail_sum[j] += torch.where(listed, in_tail / kk.clamp(min=1).to(torch.float64), zero).sum()
                self.tail_users[j] += listed.sum(dtype=torch.float64)
        if not self._windowed:
            return
        self.counts += counts.view_as(self.counts)
        if decayed is None:
            self._window_add(counts.reshape(1, 1, -1))
        else:
            self._decay_add(decayed.reshape(1, -1), n)

    # ------------------------------------------------------------------ results
    def compute(self) -> dict[str, Tensor]:
        """Per cutoff ``{"coverage@k", "gini@k", "entropy@k"[, "popularity@k"][, "tail_percentage@k"]}``
        over every update (and process); with ``window`` / ``half_life`` also the same measures of the
        window's histogram (``"window/coverage@k"``, ...) and of the decayed one (``"decay/coverage@k"``, ...)."""
        out = self._measures(self.counts, "")
        if self._window is not None:
            out.update(self._measures(self._window_totals()["counts"], WINDOW_PREFIX))
        if self._half_life is not None:
            out.update(self._measures(self._decay_totals()["counts"], DECAY_PREFIX))
        return out

    def _measures(self, histogram: Tensor, prefix: str) -> dict[str, Tensor]:
        """The measures of the histogram(s) ``histogram`` (one per cutoff), under ``prefix + key``."""
        out_dtype = self.dtype if self.dtype.is_floating_point else torch.float32
        counts = histogram.reshape(len(self.cutoffs), self.num_items)
        if not bool(counts.sum() > 0):
            where = f" in {prefix.rstrip('/')}" if prefix else ""
            warnings.warn(
                f"ItemExposure: no recommendation slot was filled{where} (no update, or every item excluded); "
                "returning NaN",
                UserWarning,
                stacklevel=3,
            )
            nan = torch.full((), float("nan"), dtype=out_dtype, device=counts.device)
            return {prefix + key: nan.clone() for key in self.keys}
        n = self.num_items
        i = torch.arange(1, n + 1, dtype=torch.float64, device=counts.device)
        values = []
        for j, c in enumerate(counts):
            total = c.sum()
            covered = (c > 0).sum().to(torch.float64)
            gini = ((2 * i - n - 1) * torch.sort(c).values).sum() / (n * total)
            p = c / total
            entropy = -torch.where(p > 0, p * torch.log(torch.where(p > 0, p, 1.0)), 0.0).sum()
            if self.entropy == "recbole":
                entropy = entropy / covered
            values += [covered / n, gini, entropy]
            if self.popularity is not None:
                values.append((c * self.popularity).sum() / total)
            if self.tail is not None:
                values.append(self.tail_sum[j] / self.tail_users[j])
        return {prefix + key: v.to(out_dtype) for key, v in zip(self.keys, values)}

    # ------------------------------------------------------------------ state handling
    # Configuration, compute groups, foreign state, sync and dtypes: ConfiguredMetric (metrics/_hooks.py).
    def _check_states(self, where: str, states: Mapping[str, Any]) -> None:
        """An incoming histogram must count this catalogue's items (and its window fit this one's)."""
        self._check_window_states(where, states)
        counts = states.get("counts")
        if counts is None:
            return
        if not isinstance(counts, Tensor) or tuple(counts.shape) != tuple(self.counts.shape):
            shape = tuple(counts.shape) if isinstance(counts, Tensor) else type(counts).__name__
            raise ValueError(
                f"ItemExposure.{where}: the incoming 'counts' state has shape {shape}, but this metric counts "
                f"{self.num_items} items ({tuple(self.counts.shape)}); it comes from a metric over another catalogue "
                "or with other cutoffs"
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
        if not isinstance(self.k, int) or self.tail is not None or self.entropy != "natural":
            raise ValueError(
                "ItemExposure.load_state_dict: the state comes from a metric with a different configuration "
                "(an earlier version, one int k, no tail_ratio)"
            )
        popularity = "" if self.popularity is None else self.popularity.cpu().numpy().tobytes().hex()
        config = f"{self.num_items}|{self.k}|{self.ties}|{popularity}"
        mine = int(hashlib.sha1(config.encode()).hexdigest()[:15], 16)
        if not (isinstance(theirs, Tensor) and theirs.numel() == 1 and int(theirs) == mine):
            raise ValueError(
                "ItemExposure.load_state_dict: the state comes from a metric with a different configuration "
                "(num_items, k, ties or popularity)"
            )


def _from_counter(counter: Mapping[Any, Any], num_items: int) -> tuple[Tensor, Tensor]:
    """RecBole's ``count_items`` mapping -> the ``(num_items,)`` float64 popularity (0 where absent) and the
    bool mask of its keys."""
    items = list(counter)  # numpy integers too: RecBole's Counter of a numpy array has them as keys
    if not all(isinstance(i, Integral) and not isinstance(i, bool) and 0 <= i < num_items for i in items):
        raise ValueError(f"popularity as a mapping needs item indices in [0, {num_items}) as keys, got {items!r}")
    values = list(counter.values())
    if not all(isinstance(v, Real) and not isinstance(v, bool) for v in values):
        raise ValueError("popularity must hold finite numbers (e.g. interaction counts per item)")
    items, values = [int(i) for i in items], [float(v) for v in values]
    index = torch.tensor(items, dtype=torch.long)
    popularity = torch.zeros(num_items, dtype=torch.float64).index_put_(
        (index,), torch.tensor(values, dtype=torch.float64)
    )
    return popularity, torch.zeros(num_items, dtype=torch.bool).index_fill_(0, index, True)


def _tail(popularity: Tensor | None, tail_ratio: Any, counted: Tensor | None = None) -> Tensor:
    """``(num_items,)`` bool: RecBole's long-tail items (``TailPercentage.get_tail``) among the items
    of its counter (``counted``; by default those with ``popularity > 0``): the ``max(1, int(ratio * count))``
    least popular (ties by item index) for a ratio in ``(0, 1]``, those with ``popularity <= tail_ratio``
    for a number ``> 1``."""
    if popularity is None:
        raise ValueError("tail_ratio needs popularity= (the training interaction count of each item)")
    if isinstance(tail_ratio, bool) or not isinstance(tail_ratio, (int, float)) or not tail_ratio > 0:
        raise ValueError(
            f"tail_ratio must be a ratio in (0, 1] or a popularity threshold > 1 (RecBole's tail_ratio), got {tail_ratio!r}"
        )
    known = popularity > 0 if counted is None else counted
    if not bool(known.any()):
        raise ValueError("tail_ratio: no item has popularity > 0, so there is no long tail to take")
    if tail_ratio > 1:
        return known & (popularity <= tail_ratio)
    cut = max(int(int(known.sum()) * tail_ratio), 1)
    # sort by (popularity, index): a stable sort of the known items' popularity
    order = torch.sort(torch.where(known, popularity, torch.inf), stable=True).indices[:cut]
    return torch.zeros_like(known).index_fill_(0, order, True)
