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

__all__ = ["RankedBatch", "log_comb"]


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
        self.order, self._sorted_key = _rank(preds, target, valid, convention.ties)
        target = target.gather(-1, self.order).to(dtype)
        self.target = torch.where(self.valid, target, self._zero) if self._has_padding else target
        self.positions = torch.arange(1, self.length + 1, dtype=dtype, device=self.device)

        max_len = self.length if ideal_target is None else max(self.length, ideal_target.shape[-1])
        if discounts is None or discounts.shape[0] < max_len:
            discounts = discount_table(max_len, convention, dtype=dtype, device=self.device)
        self.discounts = discounts.to(dtype)
        self._ideal_target, self._ideal_valid, self._n_relevant = ideal_target, ideal_valid, n_relevant

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
    def rel(self) -> Tensor:
        """Binary relevance in ranked order (padding is 0: its grade was zeroed)."""
        return self.cached("rel", lambda: self._is_relevant(self.target).to(self.dtype))

    @property
    def gains(self) -> Tensor:
        """Gains in ranked order, 0 for padding."""

        def make() -> Tensor:
            g = self._gain(self.target)
            return torch.where(self.valid, g, self._zero) if self._has_padding else g

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
        return x[:, : max(idx) + 1].cumsum(-1)[:, idx]

    def cached(self, name: str, fn) -> Tensor:  # noqa: ANN001 - tiny memo helper
        if name not in self._cache:
            self._cache[name] = fn()
        return self._cache[name]

    @property
    def n_valid(self) -> Tensor:
        return self.cached("n_valid", lambda: self.valid.to(self.dtype).sum(-1))

    def expected_relevant(self, ks: tuple[int | None, ...]) -> Tensor:
        """Expected number of relevant documents in the top ``k``, ``(N, K)``."""
        return self.cumulative(self.expected(self.rel, self.span(ks)), ks)


    def boundary(self, ks: tuple[int | None, ...]) -> dict[str, Tensor]:
        """The tie group that each cutoff ends in: start ``s``, size ``n``, relevant ``r``,
        relevant before it ``c`` and the number ``m`` of its slots inside the cutoff, ``(N, K)``."""
        idx = self.cutoff_index(ks)
        s = self.group_start[:, idx].to(self.dtype)
        n = self.group_size[:, idx]
        r = self.group_sum(self.rel)[:, idx]
        c = self.before_group(self.rel)[:, idx]
        m = torch.tensor(idx, dtype=self.dtype, device=s.device) + 1 - s
        return {"s": s, "n": n, "r": r, "c": c, "m": m}


def _rank(preds: Tensor, target: Tensor, valid: Tensor | None, ties: str) -> tuple[Tensor, Tensor]:
    """Order each list by descending score, padding last, ties per the policy.

    Returns the permutation and the sort key in ranked order (``-score``; NaN for padding).
    """
    key = -preds
    if valid is not None:
        key = torch.where(valid, key, torch.full((), float("nan"), dtype=preds.dtype, device=preds.device))
    if ties in ("average", "first"):
        sorted_key, order = torch.sort(key, dim=-1, stable=True)  # ascending: NaN (padding) last
        return order, sorted_key
    # Pessimistic: tied documents in increasing grade; optimistic: decreasing.
    grades = target.to(torch.float32) if target.dtype == torch.bool else target
    pre = torch.sort(grades, dim=-1, descending=ties == "optimistic", stable=True).indices
    sorted_key, inner = torch.sort(key.gather(-1, pre), dim=-1, stable=True)
    return pre.gather(-1, inner), sorted_key
