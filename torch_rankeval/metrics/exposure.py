"""Exposure (beyond-accuracy) metrics of top-k recommendation lists: catalogue coverage, Gini, entropy.

:class:`ItemExposure` counts how often each item of the catalogue appears in the top ``k`` of the
lists it sees (one float64 histogram, summed across processes with one all-reduce) and turns that
histogram into the usual concentration measures.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.distributed import gather_all_tensors

from torch_rankeval._choices import TIES
from torch_rankeval.metrics._running import own_states
from torch_rankeval.ranking.sparse import check_exclude
from torch_rankeval.ranking.topk import DEFAULT_CHUNK_ELEMENTS, boundary_histogram, topk_view

__all__ = ["ItemExposure"]

_TIES = TIES[:2]  # "average" and "first": the policies the exposure histogram supports


class ItemExposure(Metric):
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
        kwargs: passed to :class:`torchmetrics.Metric`.

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

    def __init__(
        self,
        num_items: int,
        k: int,
        *,
        popularity: Tensor | None = None,
        ties: str = "average",
        validate_args: bool = True,
        chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
        **kwargs: Any,
    ) -> None:
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
        config = f"{num_items}|{k}|{ties}|" + ("" if popularity is None else popularity.cpu().numpy().tobytes().hex())
        self._fingerprint = hashlib.sha1(config.encode()).hexdigest()[:16]
        self.add_state("counts", torch.zeros(num_items, dtype=torch.float64), dist_reduce_fx="sum")

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
        if self.ties == "average":
            # A boundary group that spills past the cutoff: its members inside the view get nothing
            # here; every member of the group (in or out of the view) gets (slots left) / (group size).
            positions = torch.arange(view.k, device=preds.device)
            in_group = view.spilled.unsqueeze(-1) & (positions >= view.boundary_start.unsqueeze(-1))
            weights = torch.where(in_group, zero, weights)
            slots = view.n_valid.clamp(max=view.k) - view.boundary_start
            share = slots.to(torch.float64) / view.boundary_size.clamp(min=1).to(torch.float64)
            self.counts += boundary_histogram(preds, view, share, exclude, chunk_elements=self.chunk_elements)
        self.counts.index_add_(0, view.items.reshape(-1), weights.reshape(-1))

    # ------------------------------------------------------------------ results
    def compute(self) -> dict[str, Tensor]:
        """``{"coverage@k", "gini@k", "entropy@k"[, "popularity@k"]}`` over every update (and process)."""
        c = self.counts
        n = self.num_items
        total = c.sum()
        out_dtype = self.dtype if self.dtype.is_floating_point else torch.float32
        if not bool(total > 0):
            warnings.warn(
                "ItemExposure: no recommendation slot was filled (no update, or every item excluded); returning NaN",
                UserWarning,
                stacklevel=2,
            )
            nan = torch.full((), float("nan"), dtype=out_dtype, device=c.device)
            return {key: nan.clone() for key in self.keys}
        coverage = (c > 0).sum().to(torch.float64) / n
        ascending = torch.sort(c).values
        i = torch.arange(1, n + 1, dtype=torch.float64, device=c.device)
        gini = ((2 * i - n - 1) * ascending).sum() / (n * total)
        p = c / total
        entropy = -torch.where(p > 0, p * torch.log(torch.where(p > 0, p, 1.0)), 0.0).sum()
        values = [coverage, gini, entropy]
        if self.popularity is not None:
            values.append((c * self.popularity).sum() / total)
        return {key: v.to(out_dtype) for key, v in zip(self.keys, values)}

    # ------------------------------------------------------------------ state handling
    def _config(self) -> Tensor:
        """The configuration fingerprint as a 1-element int64 tensor (stored next to persisted states)."""
        return torch.tensor([int(self._fingerprint[:15], 16)], dtype=torch.int64)

    def merge_state(self, incoming_state: dict[str, Any] | Metric) -> None:
        """As torchmetrics' ``merge_state``; refuses the state of a differently configured metric
        (catalogue size, ``k``, ``ties``, ``popularity``) and a histogram of another length."""
        if isinstance(incoming_state, ItemExposure) and incoming_state._fingerprint != self._fingerprint:
            raise ValueError(
                "ItemExposure.merge_state: the incoming metric has a different configuration (num_items, k, ties or "
                "popularity); merge only states of identically configured metrics"
            )
        # torchmetrics' merge_state (>= 1.6) in two lines, so that older torchmetrics have it too
        if isinstance(incoming_state, Metric):
            if not isinstance(incoming_state, ItemExposure):
                raise ValueError(f"merge_state takes an ItemExposure or its state, got {type(incoming_state).__name__}")
            incoming_state = incoming_state.metric_state
        self._reduce_states(dict(incoming_state))

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled metrics get states of their own: ``torch.multiprocessing`` (``ddp_spawn``)
        pickles CPU tensors into shared memory, and ``update`` adds in place."""
        super().__setstate__(state)
        own_states(self)

    def _reduce_states(self, incoming_state: dict[str, Any]) -> None:
        self._check_counts(incoming_state.get("counts"), "merge_state")
        super()._reduce_states(incoming_state)

    def _check_counts(self, counts: Any, where: str) -> None:
        if counts is None:
            return
        if not isinstance(counts, Tensor) or tuple(counts.shape) != (self.num_items,):
            shape = tuple(counts.shape) if isinstance(counts, Tensor) else type(counts).__name__
            raise ValueError(
                f"ItemExposure.{where}: the incoming 'counts' state has shape {shape}, but this metric counts "
                f"{self.num_items} items; it comes from a metric over another catalogue"
            )

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any, **kwargs: Any) -> None:
        self._check_counts(state_dict.get(prefix + "counts"), "load_state_dict")
        key = prefix + "_exposure_config"
        if key in state_dict:
            theirs = state_dict.pop(key)
            if not (isinstance(theirs, Tensor) and theirs.numel() == 1 and int(theirs) == int(self._config())):
                raise ValueError(
                    "ItemExposure.load_state_dict: the state comes from a metric with a different configuration "
                    "(num_items, k, ties or popularity)"
                )
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def state_dict(
        self, destination: dict[str, Any] | None = None, prefix: str = "", keep_vars: bool = False
    ) -> dict[str, Any]:
        """As torchmetrics' ``state_dict``; when the states are persisted (``persistent(True)``), an
        ``_exposure_config`` entry records what they count, so that ``load_state_dict`` refuses a
        state of a differently configured metric."""
        destination = super().state_dict(destination=destination, prefix=prefix, keep_vars=keep_vars)
        if prefix + "counts" in destination:
            destination[prefix + "_exposure_config"] = self._config()
        return destination

    def _apply(self, fn: Callable, *args: Any, **kwargs: Any) -> Metric:
        """Follow device moves, but keep the counts (and the popularity) in float64 whatever
        ``.half()`` / ``set_dtype`` do to floating states and buffers."""
        counts, popularity = self.counts, self.popularity
        this = super()._apply(fn, *args, **kwargs)
        device = this.counts.device
        this.counts = counts.to(device)
        this._defaults["counts"] = this._defaults["counts"].to(device=device, dtype=torch.float64)
        if popularity is not None:
            this.popularity = popularity.to(device)
        return this

    def _sync_dist(self, dist_sync_fn: Callable = gather_all_tensors, process_group: Any | None = None) -> None:
        """One all-reduce of the histogram (torchmetrics' default gathers every process's copy)."""
        if dist_sync_fn is not gather_all_tensors:  # a custom gather (e.g. XLA): torchmetrics' generic path
            return super()._sync_dist(dist_sync_fn, process_group)
        counts = self.counts.clone()
        dist.all_reduce(counts, op=dist.ReduceOp.SUM, group=process_group or self.process_group)
        self.counts = counts
        return None
