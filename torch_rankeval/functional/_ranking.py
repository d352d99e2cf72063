"""The ranking core: rank a padded batch once, then every metric is a reduction over that view.

Tie handling is built into the view. With ``ties="average"`` the documents that share a score form a
*tie group*; every metric is the exact expected value over all orders of the documents inside each
group (McSherry & Najork, ECIR 2008). For metrics that are linear in the ranked relevance (DCG,
precision, recall) this means "replace each position's value by its group mean". AP, RR and
hit-rate need the group's size, its relevant count and the relevant count before it; the kernels
below use closed forms (hypergeometric where a cutoff splits a group). Other tie policies give
groups of size one, for which the same formulas reduce to the plain deterministic metric.

Nothing here loops over queries, moves data to the host or creates data-dependent shapes.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention, discount_table, gain_fn

__all__ = ["RankedBatch", "log_comb", "prefix_sums", "take_columns", "tie_split_values"]


def take_columns(x: Tensor, idx: list[int]) -> Tensor:
    """``x[:, idx]`` for a static list of column indices (``index_select``: list indexing is far
    slower on CPU)."""
    if len(idx) == 1:
        return x[:, idx[0] : idx[0] + 1]
    return x.index_select(-1, torch.tensor(idx, device=x.device))


def prefix_sums(x: Tensor, idx: list[int]) -> Tensor:
    """``x[:, : i + 1].sum(-1)`` for each column index ``i`` of ``idx``, ``(N, K)``: a plain sum for
    one cutoff, one cumulative sum for several."""
    if len(idx) == 1:
        return x[:, : idx[0] + 1].sum(-1, keepdim=True)
    return take_columns(x[:, : max(idx) + 1].cumsum(-1), idx)


def log_comb(a: Tensor, b: Tensor) -> Tensor:
    """``log(C(a, b))`` for float tensors with ``0 <= b <= a`` (other entries are meaningless)."""
    return torch.lgamma(a + 1) - torch.lgamma(b + 1) - torch.lgamma(a - b + 1)


class RankedBatch:
    """A padded batch ``(N, L)`` ranked once, with the per-query facts every metric needs.

    Args:
        preds: ``(N, L)`` floating scores; higher ranks first.
        target: ``(N, L)`` grades (bool, int or float).
        valid: ``(N, L)`` bool, False for padding (never ranked, never counted); None: no padding.
        convention: the resolved :class:`~torch_rankeval.conventions.Convention`.
        ideal_target: optional ``(N, M)`` grades of *all* judged documents of each query (entries
            that are not judged: 0, or excluded by ``ideal_valid``).
        ideal_valid: optional ``(N, M)`` bool for ``ideal_target``.
        n_relevant: optional ``(N,)`` number of relevant documents of each query.
        judged: optional ``(N, L)`` bool, False for documents without a relevance judgment: they
            are never relevant and gain nothing, and measures of judged coverage (bpref, Judged@k)
            read them as ``rb.judged``; None: every real document is judged.
        discounts: optional precomputed discount table of length ``>= max(L, M)``.
        gain: optional gain function that replaces ``gain_fn(convention.gain)`` (e.g. one that
            reads a device-resident table).
        dtype: float dtype of the computation.
    """

    def __init__(
        self,
        preds: Tensor,
        target: Tensor,
        valid: Tensor | None,
        convention: Convention,
        *,
        ideal_target: Tensor | None = None,
        ideal_valid: Tensor | None = None,
        n_relevant: Tensor | None = None,
        judged: Tensor | None = None,
        discounts: Tensor | None = None,
        gain: Callable[[Tensor], Tensor] | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self._cache: dict[str, Tensor] = {}
        self.convention = convention
        self.dtype = dtype
        self.n_lists, self.length = preds.shape
        self.device = preds.device
        self._gain = gain_fn(convention.gain) if gain is None else gain
        self._threshold_int = not target.is_floating_point() and target.dtype != torch.bool
        self._has_padding = valid is not None
        self.averaged = convention.ties == "average"
        self._inputs = dict(
            preds=preds, target=target, valid=valid, ideal_target=ideal_target, ideal_valid=ideal_valid,
            n_relevant=n_relevant, judged=judged, discounts=discounts, gain=gain, dtype=dtype,
        )
        self.tied_rows: Tensor | None = None  # set by split_ties(): rows to redo with tie averaging
        self.order, self._sorted_key = _rank(preds, target, valid, convention.ties)
        target = target.gather(-1, self.order).to(dtype)
        self.target = torch.where(self.valid, target, self._zero) if self._has_padding else target
        self._judged = None if judged is None else judged.gather(-1, self.order) & self.valid
        self.positions = torch.arange(1, self.length + 1, dtype=dtype, device=self.device)

        max_len = self.length if ideal_target is None else max(self.length, ideal_target.shape[-1])
        if discounts is None or discounts.shape[0] < max_len:
            discounts = discount_table(max_len, convention, dtype=dtype, device=self.device)
        self.discounts = discounts.to(dtype)
        self._ideal_target, self._ideal_valid, self._n_relevant = ideal_target, ideal_valid, n_relevant

    def tied(self) -> Tensor:
        """Per list: whether two real documents share a score, ``(N,)`` bool (no host sync; NaN
        padding never equals anything)."""
        key = self._sorted_key
        return (key[:, 1:] == key[:, :-1]).any(-1)

    def split_ties(self, tied: Tensor | None) -> None:
        """Switch to the deterministic path, remembering the lists that hold ties (``tied``: ``(N,)``
        bool, None: no list has ties); :func:`tie_split_values` recomputes those with tie averaging.
        Exact: in a list without ties every tie group is one document, and averaging over tie orders
        changes nothing. Reads the tied row indices from the device (a host sync), so only validated
        calls use it."""
        self.averaged = False
        self._cache.clear()
        rows = None if tied is None else tied.nonzero().squeeze(-1)
        self.tied_rows = rows if rows is not None and rows.numel() else None

    def subset(self, rows: Tensor) -> "RankedBatch":
        """The same batch restricted to ``rows`` (ranked again, with the convention's tie policy)."""
        i = self._inputs
        pick = lambda t: None if t is None else t[rows]  # noqa: E731
        return RankedBatch(
            i["preds"][rows], i["target"][rows], pick(i["valid"]), self.convention, ideal_target=pick(i["ideal_target"]),
            ideal_valid=pick(i["ideal_valid"]), n_relevant=pick(i["n_relevant"]), judged=pick(i["judged"]),
            discounts=i["discounts"],
            gain=i["gain"], dtype=i["dtype"],
        )

    # ------------------------------------------------------------------ lazily derived views
    @property
    def _zero(self) -> Tensor:
        return torch.zeros((), dtype=self.dtype, device=self.device)

    @property
    def valid(self) -> Tensor:
        """``(N, L)`` bool in ranked order: real documents first, padding (NaN key) last."""
        if not self._has_padding:
            return self.cached("valid", lambda: torch.ones(self.n_lists, self.length, dtype=torch.bool, device=self.device))
        return self.cached("valid", lambda: ~torch.isnan(self._sorted_key))

    @property
    def judged(self) -> Tensor:
        """``(N, L)`` bool in ranked order: real documents with a relevance judgment."""
        return self.valid if self._judged is None else self._judged

    @property
    def rel(self) -> Tensor:
        """Binary relevance in ranked order (padding and unjudged documents are 0)."""

        def make() -> Tensor:
            rel = self._is_relevant(self.target)
            return (rel if self._judged is None else rel & self._judged).to(self.dtype)

        return self.cached("rel", make)

    @property
    def gains(self) -> Tensor:
        """Gains in ranked order, 0 for padding and unjudged documents."""

        def make() -> Tensor:
            g = self._gain(self.target)
            keep = self._judged if self._judged is not None else (self.valid if self._has_padding else None)
            return g if keep is None else torch.where(keep, g, self._zero)

        return self.cached("gains", make)

    @property
    def _group_id(self) -> Tensor:
        """Tie-group index of each ranked position (0, 1, ... within each list)."""

        def make() -> Tensor:
            key = self._sorted_key
            new_group = torch.ones(self.n_lists, self.length, dtype=torch.bool, device=self.device)
            new_group[:, 1:] = key[:, 1:] != key[:, :-1]  # NaN != NaN: padding never joins a group
            return new_group.cumsum(-1) - 1

        return self.cached("group_id", make)

    @property
    def group_start(self) -> Tensor:
        """0-based position of the first document of each position's tie group, ``(N, L)`` int64."""

        def make() -> Tensor:
            index = torch.arange(self.length, device=self.device).expand(self.n_lists, -1)
            if not self.averaged:
                return index
            gid = self._group_id
            first = torch.full_like(gid, self.length).scatter_reduce_(-1, gid, index, "amin")
            return first.gather(-1, gid)

        return self.cached("group_start", make)

    @property
    def group_size(self) -> Tensor:
        return self.cached("group_size", lambda: self.group_sum(torch.ones_like(self.target)))

    @property
    def ideal_gains(self) -> Tensor:
        """Gains of the judged set that defines the ideal ranking (not sorted), ``(N, M)``."""

        def make() -> Tensor:
            if self._ideal_target is None:
                return self.gains
            t = self._ideal_target.to(self.dtype)
            g = self._gain(t)
            return g if self._ideal_valid is None else torch.where(self._ideal_valid, g, self._zero)

        return self.cached("ideal_gains", make)

    @property
    def n_relevant(self) -> Tensor:
        """Number of relevant documents of each query, ``(N,)``: given, or counted in the judged set."""

        def make() -> Tensor:
            if self._n_relevant is not None:
                return self._n_relevant.to(self.dtype)
            if self._ideal_target is None:
                return self.rel.sum(-1)
            rel = self._is_relevant(self._ideal_target)
            if self._ideal_valid is not None:
                rel = rel & self._ideal_valid
            return rel.to(self.dtype).sum(-1)

        return self.cached("n_relevant", make)

    # ------------------------------------------------------------------ primitives
    def _is_relevant(self, t: Tensor) -> Tensor:
        thr = self.convention.relevance_threshold
        if thr is not None:
            return t >= thr
        return t >= 1 if self._threshold_int else t > 0

    def group_sum(self, x: Tensor, upto: int | None = None) -> Tensor:
        """Sum of ``x`` (ranked order) over the tie group of each position, broadcast back to the
        first ``upto`` positions (default: all)."""
        if not self.averaged:
            return x if upto is None else x[:, :upto]
        gid = self._group_id
        sums = torch.zeros_like(x).scatter_add_(-1, gid, x)
        return sums.gather(-1, gid if upto is None else gid[:, :upto])

    def expected(self, x: Tensor, upto: int | None = None) -> Tensor:
        """Expected value of ``x`` at each of the first ``upto`` ranked positions over the orders of
        tied documents (a tie group may extend beyond ``upto``)."""
        if not self.averaged:
            return x if upto is None else x[:, :upto]
        size = self.group_size if upto is None else self.group_size[:, :upto]
        return self.group_sum(x, upto) / size

    def before_group(self, x: Tensor) -> Tensor:
        """Sum of ``x`` over all positions before the tie group of each position."""
        exclusive = x.cumsum(-1) - x
        return exclusive.gather(-1, self.group_start) if self.averaged else exclusive

    @property
    def _ideal_valid_mask(self) -> Tensor | None:
        if self._ideal_target is None:
            return self.valid if self._has_padding else None
        return self._ideal_valid

    def ideal_top(self, ks: tuple[int | None, ...]) -> Tensor:
        """Judged gains in decreasing order, truncated to the largest finite cutoff when possible.

        Padding comes after every real document: it must not outrank a real document with a
        negative gain (linear gain on negative grades, debiased gains); its slots hold 0."""
        m = self.ideal_gains.shape[-1]
        top = m if None in ks else min(max(ks), m)

        def make() -> Tensor:
            gains, valid = self.ideal_gains, self._ideal_valid_mask
            if valid is not None:
                gains = torch.where(valid, gains, torch.full((), float("-inf"), dtype=self.dtype, device=self.device))
            best = gains.sort(-1, descending=True).values if top == m else gains.topk(top, dim=-1).values
            if valid is None:
                return best
            slots = torch.arange(top, device=self.device)
            return torch.where(slots < valid.sum(-1, keepdim=True), best, self._zero)

        return self.cached(f"ideal_top{top}", make)

    def cutoff_index(self, ks: tuple[int | None, ...]) -> list[int]:
        """0-based last position inside each cutoff (``None`` = whole list; k beyond L = L)."""
        return [self.length - 1 if k is None else min(k, self.length) - 1 for k in ks]

    def span(self, ks: tuple[int | None, ...]) -> int:
        """How many leading positions the cutoffs need."""
        return max(self.cutoff_index(ks)) + 1

    def cumulative(self, x: Tensor, ks: tuple[int | None, ...]) -> Tensor:
        """``sum(x[:, :k])`` for each cutoff, ``(N, K)``; ``x`` may hold only the first ``span(ks)``
        positions. A plain sum when every cutoff covers the whole list."""
        idx = self.cutoff_index(ks)
        if all(i == x.shape[-1] - 1 for i in idx):
            return x.sum(-1, keepdim=True).expand(-1, len(idx))
        return prefix_sums(x, idx)

    def cached(self, name: str, fn) -> Tensor:  # noqa: ANN001 - tiny memo helper
        if name not in self._cache:
            self._cache[name] = fn()
        return self._cache[name]

    @property
    def n_valid(self) -> Tensor:
        return self.cached("n_valid", lambda: self.valid.to(self.dtype).sum(-1))

    # ------------------------------------------------------------------ group-level view
    # Every cumulative metric is a sum over whole tie groups above the cutoff plus a share of the
    # group the cutoff ends in. Working on per-group tables (one scatter per quantity) avoids
    # broadcasting group statistics back to every position.
    def group_table(self, x: Tensor, width: int) -> Tensor:
        """Per-group sums of ``x`` for the first ``width`` tie groups, ``(N, width)``."""
        if not self.averaged:
            return x[:, :width]
        if width >= self.length:
            return torch.zeros_like(x).scatter_add_(-1, self._group_id, x)
        inside, index = self._clamped_group_id(width)
        src = torch.where(inside, x, torch.zeros((), dtype=x.dtype, device=x.device))
        return torch.zeros(self.n_lists, width, dtype=x.dtype, device=x.device).scatter_add_(-1, index, src)

    def _clamped_group_id(self, width: int) -> tuple[Tensor, Tensor]:
        def make() -> tuple[Tensor, Tensor]:
            gid = self._group_id
            return gid < width, gid.clamp(max=width - 1)

        return self.cached(f"clamped_gid{width}", make)

    def group_sizes(self, width: int) -> Tensor:
        """Sizes ``n`` of the first ``width`` tie groups (0 for unused slots), ``(N, width)``."""
        if not self.averaged:
            return self.cached(f"sizes{width}", lambda: torch.ones(self.n_lists, width, dtype=self.dtype, device=self.device))
        return self.cached(f"sizes{width}", lambda: self.group_table(torch.ones_like(self.target), width))

    def group_starts(self, width: int) -> Tensor:
        """0-based start position ``s`` of each of the first ``width`` tie groups (float), ``(N, width)``."""

        def make() -> Tensor:
            if not self.averaged:
                return torch.arange(width, dtype=self.dtype, device=self.device).expand(self.n_lists, -1)
            n = self.group_sizes(width)
            return n.cumsum(-1) - n

        return self.cached(f"starts{width}", make)

    def cutoff_groups(self, ks: tuple[int | None, ...]) -> tuple[Tensor, Tensor]:
        """The tie group each cutoff ends in (``(N, K)`` int64 ids) and the cutoff positions ``(K,)``
        as 1-based counts ``idx + 1``."""
        idx = self.cutoff_index(ks)
        ends = torch.tensor([i + 1 for i in idx], dtype=self.dtype, device=self.device)
        if not self.averaged:
            return torch.tensor(idx, device=self.device).expand(self.n_lists, -1), ends
        return take_columns(self._group_id, idx), ends

    def table_lookup(self, table: Tensor, index: Tensor) -> Tensor:
        """``table[index]`` for a 1-D table (``index_select`` is much faster than advanced indexing on CPU)."""
        return table.index_select(0, index.reshape(-1).long()).reshape(index.shape)

    def positional_table(self, name: str, width: int) -> Tensor:
        """Per-group sums of a per-position quantity (``"reciprocal"``: ``1/p``; ``"discount"``),
        ``(N, width)``. Summed term by term, so no precision is lost to differences of prefix sums."""
        values = 1.0 / self.positions if name == "reciprocal" else self.discounts[: self.length]
        if not self.averaged:
            return values[:width].expand(self.n_lists, -1)
        return self.cached(f"{name}{width}", lambda: self.group_table(values.expand(self.n_lists, -1), width))

    def prefix_difference(self, name: str, hi: Tensor, lo: Tensor) -> Tensor:
        """``sum_{lo < p <= hi}`` of ``1/p`` (``"reciprocal"``) or of the discount, computed from a
        float64 prefix table (small index tensors only)."""
        def make() -> Tensor:
            values = 1.0 / self.positions.double() if name == "reciprocal" else self.discounts[: self.length].double()
            return torch.cat([torch.zeros(1, dtype=torch.float64, device=self.device), values.cumsum(0)])

        table = self.cached(f"prefix_{name}", make)
        return (self.table_lookup(table, hi) - self.table_lookup(table, lo)).to(self.dtype)

    def expected_sum(self, x: Tensor, ks: tuple[int | None, ...], *, discounted: bool = False) -> Tensor:
        """``E[sum_{p <= k} x_p (* discount(p))]`` over the orders of tied documents, ``(N, K)``."""
        idx = self.cutoff_index(ks)
        if not discounted and all(i == self.length - 1 for i in idx):
            return x.sum(-1, keepdim=True).expand(-1, len(idx))
        width = max(idx) + 1
        if not self.averaged:
            part = x[:, :width] * self.discounts[:width] if discounted else x[:, :width]
            return prefix_sums(part, idx)
        total, n, s = self.group_table(x, width), self.group_sizes(width), self.group_starts(width)
        mean = total / n.clamp(min=1)
        full = mean * self.positional_table("discount", width) if discounted else total
        before = full.cumsum(-1) - full
        b, ends = self.cutoff_groups(ks)
        sb = s.gather(-1, b)
        share = self.prefix_difference("discount", ends.expand_as(sb), sb) if discounted else ends - sb
        return before.gather(-1, b) + mean.gather(-1, b) * share

    def expected_relevant(self, ks: tuple[int | None, ...]) -> Tensor:
        """Expected number of relevant documents in the top ``k``, ``(N, K)``."""
        return self.expected_sum(self.rel, ks)

    def boundary(self, ks: tuple[int | None, ...]) -> dict[str, Tensor]:
        """The tie group that each cutoff ends in: start ``s``, size ``n``, relevant ``r``,
        relevant before it ``c``, the number ``m`` of its slots inside the cutoff, and its id ``b``,
        ``(N, K)``."""
        width = self.span(ks)
        b, ends = self.cutoff_groups(ks)
        r_table = self.group_table(self.rel, width)
        s = self.group_starts(width).gather(-1, b)
        return {
            "s": s,
            "n": self.group_sizes(width).gather(-1, b),
            "r": r_table.gather(-1, b),
            "c": (r_table.cumsum(-1) - r_table).gather(-1, b),
            "m": ends - s,
            "b": b,
        }


def tie_split_values(rb: RankedBatch, fn: Callable[[RankedBatch], tuple[Tensor, Tensor | None]]) -> tuple[Tensor, Tensor | None]:
    """``fn(rb)`` -> (values, empty flags); lists marked by :meth:`RankedBatch.split_ties` are
    recomputed with tie averaging on a sub-batch and written back."""
    values, empty = fn(rb)
    if rb.tied_rows is None:
        return values, empty
    sub_values, sub_empty = fn(rb.subset(rb.tied_rows))
    values = values.index_put((rb.tied_rows,), sub_values)
    if empty is not None:
        empty = empty.expand_as(values).index_put((rb.tied_rows,), sub_empty.expand_as(sub_values))
    return values, empty


def _rank(preds: Tensor, target: Tensor, valid: Tensor | None, ties: str) -> tuple[Tensor, Tensor]:
    """Order each list by descending score, padding last, ties per the policy (``"first"`` and the
    grade tie-breaks use stable sorts: among equal keys the earlier input comes first).

    Returns the permutation and the sort key in ranked order: equal keys mean tied scores, NaN
    marks padding. Without padding the key is the score itself, sorted descending; with padding it
    is ``-score`` with NaN at the padding, sorted ascending (NaN sorts last).
    """
    if valid is None:
        key, descending = preds, True
    else:
        key, descending = torch.where(valid, -preds, torch.full((), float("nan"), dtype=preds.dtype, device=preds.device)), False
    if ties in ("average", "first"):
        # Averaged values do not depend on the order inside a tie group, so the (about twice as
        # fast) unstable sort serves them; "first" needs the input order among equal scores.
        sorted_key, order = torch.sort(key, dim=-1, descending=descending, stable=ties == "first")
        return order, sorted_key
    # Pessimistic: tied documents in increasing grade; optimistic: decreasing.
    grades = target.to(torch.float32) if target.dtype == torch.bool else target
    pre = torch.sort(grades, dim=-1, descending=ties == "optimistic", stable=True).indices
    sorted_key, inner = torch.sort(key.gather(-1, pre), dim=-1, descending=descending, stable=True)
    return pre.gather(-1, inner), sorted_key
