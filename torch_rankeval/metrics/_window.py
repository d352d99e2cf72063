"""Windows and exponential decay: the recent values of a streaming metric, beside its lifetime value.

:class:`WindowMixin` gives a metric two optional views of its most recent data, next to the
lifetime states it already keeps:

* ``window=N``: the last ``N`` updates (``window_unit="updates"``, the default) or the last ``N``
  lists (``window_unit="queries"``) of this process. State: a ring buffer ``window_<channel>`` of
  ``(N, width)`` float64 per channel (one entry per update or per list: the batch's sums, sums of
  squares and counts for the running means, the batch's exposure histogram for ``ItemExposure``),
  written with ``index_copy_`` at the slots ``clock % N`` (the clock a 0-d int64 tensor state: no
  host sync). ``compute`` sums the ring over its slots.
* ``half_life=h``: exponentially decayed sums ``D <- g * D + x`` with ``g = 2 ** (-1 / h)`` per
  update (``window_unit="updates"``: every list of an update weighs the same) or per list
  (``window_unit="queries"``: the ``n`` lists of a batch, in row order, get the weights
  ``g ** (n - 1), ..., g, 1`` and the earlier sums are multiplied by ``g ** n``). State:
  ``decay_<name>`` of ``(width,)`` float64: O(values), whatever the number of updates.

Every state is summed across processes (``dist_reduce_fx="sum"``, in the metric's one all-reduce):
the window of a synced metric is the sum of each process's last ``N`` updates (lists), its decayed
sums weigh each process's data by its age on that process's own clock. ``merge_state`` adds the
other metric's window and decayed sums in the same way (the window slot by slot; later updates
replace this metric's oldest slot first). ``forward`` (which torchmetrics implements as an update
of a fresh state merged into the accumulated one) places the batch after the accumulated data, as
an ``update`` would: ``forward`` and ``update`` give the same window and the same decayed sums.

A state without these states (a checkpoint written before windows, or by the same metric without
``window`` / ``half_life``) still loads and merges: its lifetime values are exact, the window and
the decayed sums start empty. The window's length, the half-life and the unit are part of the
metric's configuration (a checkpoint of another window is refused, naming the difference).

Example:
    >>> import torch
    >>> from torch_rankeval import MRR
    >>> metric = MRR(window=2)                           # the last 2 updates
    >>> for first in (1, 0, 0):                          # reciprocal ranks 1, 1/2, 1/2
    ...     metric.update(torch.tensor([[0.9, 0.1]]), torch.tensor([[first, 1 - first]]))
    >>> {key: round(value.item(), 4) for key, value in metric.compute().items()}
    {'mrr': 0.6667, 'window/mrr': 0.5}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from torch_rankeval.metrics._hooks import _KNOWN_CONFIGS

__all__ = ["WindowMixin", "WINDOW_UNITS", "WINDOW_PREFIX", "DECAY_PREFIX", "check_window_args"]

WINDOW_UNITS = ("updates", "queries")
#: The prefix of the windowed keys of ``compute`` (``"window/ndcg@10"``) and of the decayed ones.
WINDOW_PREFIX = "window/"
DECAY_PREFIX = "decay/"
_FIELDS = ("window", "half_life", "window_unit")  # the configuration fields of a window
_CLOCK = "window_clock"


def check_window_args(owner: object, window: Any, half_life: Any, window_unit: Any, *, queries: bool = True) -> None:
    """``window`` (None or an int >= 1), ``half_life`` (None or a finite number > 0) and
    ``window_unit`` (``"updates"`` or ``"queries"``; ``queries=False``: a window over lists is not
    offered) or a clear ``TypeError`` / ``ValueError``.

    Example:
        >>> check_window_args(object(), 0, None, "updates")
        Traceback (most recent call last):
        ...
        ValueError: window=0 is not valid: give the number of recent updates to report (an int >= 1), or None
    """
    name = type(owner).__name__
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)):
        raise TypeError(f"window must be an int (the number of recent updates or lists) or None, got {window!r}")
    if window is not None and window < 1:
        raise ValueError(
            f"window={window!r} is not valid: give the number of recent {window_unit if window_unit in WINDOW_UNITS else 'updates'}"
            " to report (an int >= 1), or None"
        )
    if half_life is not None and (isinstance(half_life, bool) or not isinstance(half_life, (int, float))):
        raise TypeError(f"half_life must be a number (in updates or lists) or None, got {half_life!r}")
    if half_life is not None and not (math.isfinite(half_life) and half_life > 0):
        raise ValueError(f"half_life={half_life!r} is not valid: give a finite number > 0 (in {window_unit}), or None")
    if window_unit not in WINDOW_UNITS:
        raise ValueError(f"window_unit={window_unit!r} is not valid: use one of {WINDOW_UNITS}")
    if window is not None and window_unit == "queries" and not queries:
        raise ValueError(
            f"{name} keeps a window of updates only (window_unit='updates'): a window over single lists would need "
            "one histogram per list; use half_life= with window_unit='queries' for a recency weighting per list"
        )


class WindowMixin:
    """The window and decay states of a metric (put before ``ConfiguredMetric`` in the bases).

    A subclass calls :meth:`_add_window_states` in ``__init__`` (after its lifetime states) with
    the ``width`` of one entry, its ``channels`` and its decayed sums ``{name: (channel, power)}``
    (``power`` 2: the entry weighed by the square of its weight), then :meth:`_window_add` in
    ``update`` with the batch's entries ``(n, channels, width)`` (``n = 1`` per update, or one row
    per list with ``window_unit="queries"``), and reads :meth:`_window_totals` /
    :meth:`_decay_totals` in ``compute``. Without ``window`` and ``half_life`` nothing is added.

    States (all float64 but the clock, ``dist_reduce_fx="sum"``): ``window_entries``
    ``(window, channels, width)``, the ring; ``decay_sums`` ``(decayed sums, width)``;
    ``window_clock``, a 0-d int64, the updates (or lists) seen. One ``index_copy_`` per update
    writes the ring, one multiply-add decays the sums.
    """

    _window: int | None = None
    _half_life: float | None = None
    _window_unit: str = "updates"
    _window_channels: tuple[str, ...] = ()
    _decay_spec: Mapping[str, tuple[str, int]] = {}
    _window_states: tuple[str, ...] = ()
    #: a window or a decay is kept (``_window_states`` is not empty); entries are single lists
    #: (``window_unit="queries"``) rather than whole updates. Plain attributes, set with the states:
    #: an update reads them without a call.
    _windowed: bool = False
    _per_query: bool = False
    #: non-persistent float64 / int64 tables of the decay (they follow ``.to(device)``, keep their dtype)
    _window_tables: tuple[str, ...] = ()

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickling: a metric pickled before ``_windowed`` and ``_per_query`` were attributes of their
        own gets them from its window states (else it would silently stop filling its window)."""
        super().__setstate__(state)  # type: ignore[misc]
        if "_windowed" not in state:
            self._windowed = bool(self._window_states)
            self._per_query = self._windowed and self._window_unit == "queries"

    # ------------------------------------------------------------------ construction
    def _add_window_states(
        self,
        width: int,
        channels: tuple[str, ...],
        decay: Mapping[str, tuple[str, int]],
        *,
        window: int | None,
        half_life: float | None,
        window_unit: str,
        queries: bool = True,
    ) -> dict[str, Any]:
        """Register the ring buffer (``window``), the decayed sums (``half_life``) and the clock;
        returns the configuration fields to record (none without a window and a half-life)."""
        check_window_args(self, window, half_life, window_unit, queries=queries)
        self._window = window
        self._half_life = None if half_life is None else float(half_life)
        self._window_unit = window_unit
        self._window_channels = tuple(channels)
        self._decay_spec = dict(decay)
        if window is None and half_life is None:
            self._window_states = ()
            self._windowed = self._per_query = False
            return {}
        names = []
        add_state = self.add_state  # type: ignore[attr-defined]
        if window is not None:
            names.append("window_entries")
            add_state(names[-1], torch.zeros(window, len(channels), width, dtype=torch.float64), dist_reduce_fx="sum")
        if half_life is not None:
            names.append("decay_sums")
            add_state(names[-1], torch.zeros(len(self._decay_spec), width, dtype=torch.float64), dist_reduce_fx="sum")
            powers = [power for _, power in self._decay_spec.values()]
            log_g = [-power * math.log(2.0) / self._half_life for power in powers]
            source = [self._window_channels.index(channel) for channel, _ in self._decay_spec.values()]
            register = self.register_buffer  # type: ignore[attr-defined]
            register("_decay_log", torch.tensor(log_g, dtype=torch.float64), persistent=False)
            register("_decay_factor", torch.tensor(log_g, dtype=torch.float64).exp().unsqueeze(-1), persistent=False)
            register("_decay_source", torch.tensor(source, dtype=torch.int64), persistent=False)
            self._window_tables = ("_decay_log", "_decay_factor", "_decay_source")
        # updates (or lists) seen by this process: the next ring slot, and the age of a forward's batch
        add_state(_CLOCK, torch.zeros((), dtype=torch.int64), dist_reduce_fx="sum")
        self._window_states = (*names, _CLOCK)
        self._windowed, self._per_query = True, window_unit == "queries"
        return {"window": window, "half_life": self._half_life, "window_unit": window_unit}

    @property
    def window(self) -> int | None:
        """The window's length (in ``window_unit``), or None."""
        return self._window

    @property
    def half_life(self) -> float | None:
        """The half-life of the decay (in ``window_unit``), or None."""
        return self._half_life

    @property
    def window_unit(self) -> str:
        """What ``window`` and ``half_life`` count: ``"updates"`` or ``"queries"``."""
        return self._window_unit

    @property
    def _gamma(self) -> float:
        return 2.0 ** (-1.0 / self._half_life) if self._half_life is not None else 1.0

    # ------------------------------------------------------------------ update
    def _window_add(self, entries: Tensor) -> None:
        """Add ``(n, channels, width)`` entries, in order (the last one is the newest): write the
        last ``min(n, window)`` into the ring, decay the sums. No host sync (shapes only)."""
        n = entries.shape[0]
        if not self._windowed or n == 0:  # an empty update is a no-op
            return
        clock: Tensor = getattr(self, _CLOCK)
        entries = entries.to(torch.float64)
        if self._window is not None:
            kept = min(n, self._window)
            if n == 1:
                slots = clock.remainder(self._window).reshape(1)
            else:
                slots = (clock + torch.arange(n - kept, n, device=entries.device)).remainder(self._window)
            self.window_entries.index_copy_(0, slots, entries[n - kept :] if kept < n else entries)
        if self._half_life is not None:
            x = entries.index_select(1, self._decay_source)  # (n, decayed sums, width)
            if n == 1:
                self.decay_sums.mul_(self._decay_factor).add_(x[0])
            else:
                ages = torch.arange(n - 1, -1, -1, device=entries.device, dtype=torch.float64)
                weights = torch.exp(ages.unsqueeze(-1) * self._decay_log)  # (n, decayed sums)
                self.decay_sums.mul_(torch.exp(self._decay_log * n).unsqueeze(-1)).add_(
                    torch.einsum("nd,ndw->dw", weights, x)
                )
        clock.add_(n)

    def _decay_add(self, sums: Tensor, n: int) -> None:
        """Add decayed sums ``(decayed sums, width)`` already weighted per list (``g ** (n - 1 - i)``
        for list ``i`` of ``n``, ``window_unit="queries"``) after ageing the earlier sums by ``n``
        lists; advances the clock. For metrics whose entries are not rows of a tensor
        (``ItemExposure``); power-1 sums only."""
        if not self._windowed or n == 0:
            return
        self.decay_sums.mul_(torch.exp(self._decay_log * n).unsqueeze(-1)).add_(sums.to(torch.float64))
        getattr(self, _CLOCK).add_(n)

    # ------------------------------------------------------------------ results
    def _window_totals(self) -> dict[str, Tensor]:
        """``{channel: (width,)}``: the sums over the window's entries (after sync: of every process)."""
        totals = self.window_entries.sum(0)
        return {channel: totals[i] for i, channel in enumerate(self._window_channels)}

    def _decay_totals(self) -> dict[str, Tensor]:
        """``{name: (width,)}``: the decayed sums (after sync: of every process)."""
        return {name: self.decay_sums[i] for i, name in enumerate(self._decay_spec)}

    # ------------------------------------------------------------------ states coming in
    def _missing_window_states(self, states: Mapping[str, Any]) -> dict[str, Tensor]:
        """Empty window states for an incoming state that has none (an older checkpoint, or the
        same metric without a window): its window starts empty."""
        return {name: torch.zeros_like(getattr(self, name)) for name in self._window_states if name not in states}

    def _check_window_states(self, where: str, states: Mapping[str, Any]) -> None:
        for name in self._window_states:
            value = states.get(name)
            mine = getattr(self, name)
            if isinstance(value, Tensor) and value.shape != mine.shape:
                raise ValueError(
                    f"{type(self).__name__}.{where}: the state's {name!r} has shape {tuple(value.shape)} but this "
                    f"metric's is {tuple(mine.shape)}: the state comes from a metric with another window (window= or "
                    "its values). Load or merge only the states of a metric created with the same window."
                )

    def _refuse_foreign(self, where: str, incoming: Mapping[str, Any] | None, digest: str | None = None) -> None:
        """As :meth:`ConfiguredMetric._refuse_foreign`, but the state of the same metric without a
        window (a checkpoint from before windows, too) is welcome: its window starts empty."""
        if self._windowed:
            fields = None
            if isinstance(incoming, Mapping):
                digest = incoming.get("fingerprint", digest)
                fields = incoming.get("fields")
            if not isinstance(fields, Mapping) and digest is not None:
                fields = _KNOWN_CONFIGS.get(digest)
            mine = {k: v for k, v in self._config_fields.items() if k not in _FIELDS}  # type: ignore[attr-defined]
            if isinstance(fields, Mapping) and not any(f in fields for f in _FIELDS) and dict(fields) == mine:
                return
        super()._refuse_foreign(where, incoming, digest)  # type: ignore[misc]

    def _combine_states(self, incoming_state: Mapping[str, Any], *, merging: bool) -> dict[str, Any]:
        """The window states after ``merge_state`` (``merging``: they add up, as a sync adds the
        processes'; this metric's clock is kept) or ``forward`` (this metric holds the batch,
        ``incoming_state`` the data before it: the batch's entries follow the earlier ones in the
        ring, the earlier decayed sums age by the batch's length, the clocks add up)."""
        if not self._windowed:
            return super()._combine_states(incoming_state, merging=merging)  # type: ignore[misc]
        mine = {name: getattr(self, name) for name in self._window_states}
        theirs = {name: incoming_state[name] for name in self._window_states}
        if merging:
            merged = {name: mine[name] + theirs[name] for name in self._window_states if name != _CLOCK}
            merged[_CLOCK] = mine[_CLOCK].clone()
            return merged
        return self._after(theirs, mine)

    def _after(self, older: Mapping[str, Tensor], newer: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The window states of ``older``'s entries followed by ``newer``'s (no host sync)."""
        c_old, c_new = older[_CLOCK], newer[_CLOCK]
        total = c_old + c_new
        out: dict[str, Tensor] = {_CLOCK: total.clone()}
        if self._window is not None:
            w = self._window
            slot = torch.arange(w, device=total.device)
            # the entry now in slot s: the last one u < total with u % w == s (u < 0: none)
            u = slot + w * torch.div(total - 1 - slot, w, rounding_mode="floor")
            from_new = (u >= c_old).reshape(w, 1, 1)
            source = (u - c_old).remainder(w)
            out["window_entries"] = torch.where(
                from_new, newer["window_entries"].index_select(0, source), older["window_entries"]
            )
        if self._half_life is not None:
            age = torch.exp(self._decay_log * c_new.to(torch.float64)).unsqueeze(-1)
            out["decay_sums"] = older["decay_sums"] * age + newer["decay_sums"]
        return out
