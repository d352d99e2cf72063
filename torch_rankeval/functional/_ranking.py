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
        valid: ``(N, L)`` bool, False for padding (never ranked, never counted).
        convention: the resolved :class:`~torch_rankeval.conventions.Convention`.
        ideal_target: optional ``(N, M)`` grades of *all* judged documents of each query (entries
            that are not judged: 0, or excluded by ``ideal_valid``).
        ideal_valid: optional ``(N, M)`` bool for ``ideal_target``.
        n_relevant: optional ``(N,)`` number of relevant documents of each query.
        discounts: optional precomputed discount table of length ``>= max(L, M)``.
        dtype: float dtype of the computation.
    """

    def __init__(
        self,
        preds: Tensor,
        target: Tensor,
        valid: Tensor,
        convention: Convention,
        *,
        ideal_target: Tensor | None = None,
        ideal_valid: Tensor | None = None,
        n_relevant: Tensor | None = None,
        discounts: Tensor | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.convention = convention
        self.dtype = dtype
        self.n_lists, self.length = preds.shape
        device = preds.device
        self._gain = gain_fn(convention.gain)
        self._threshold_int = not target.is_floating_point() and target.dtype != torch.bool
        target_f = target.to(dtype)

        order = _rank(preds, target_f, valid, convention.ties)
        self.order = order
        self.valid = valid.gather(-1, order)
        self.target = torch.where(self.valid, target_f.gather(-1, order), torch.zeros((), dtype=dtype, device=device))
        self.positions = torch.arange(1, self.length + 1, dtype=dtype, device=device)

        self.averaged = convention.ties == "average"
        if self.averaged:
            key = torch.where(valid, preds, torch.full((), float("nan"), dtype=preds.dtype, device=device)).gather(-1, order)
            new_group = torch.ones_like(self.valid)
            new_group[:, 1:] = key[:, 1:] != key[:, :-1]
            self._group_id = new_group.long().cumsum(-1) - 1
            index = torch.arange(self.length, device=device).expand(self.n_lists, -1)
            self.group_start = torch.where(new_group, index, torch.zeros_like(index)).cummax(-1).values
            self.group_size = self.group_sum(torch.ones_like(self.target))
        else:
            self.group_start = torch.arange(self.length, device=device).expand(self.n_lists, -1)
            self.group_size = torch.ones_like(self.target)

        max_len = self.length if ideal_target is None else max(self.length, ideal_target.shape[-1])
        if discounts is None or discounts.shape[0] < max_len:
            discounts = discount_table(max_len, convention, dtype=dtype, device=device)
        self.discounts = discounts.to(dtype)

        # Relevance (binary) and gains in ranked order.
        self.rel = (self._is_relevant(self.target) & self.valid).to(dtype)
        self.gains = torch.where(self.valid, self._gain(self.target), torch.zeros((), dtype=dtype, device=device))

        # The judged set that defines IDCG and the number of relevant documents.
        if ideal_target is None:
            ideal_t, ideal_v = self.target, self.valid
        else:
            ideal_t = ideal_target.to(dtype)
            ideal_v = torch.ones_like(ideal_t, dtype=torch.bool) if ideal_valid is None else ideal_valid
            ideal_t = torch.where(ideal_v, ideal_t, torch.zeros((), dtype=dtype, device=device))
        self.ideal_gains = torch.where(ideal_v, self._gain(ideal_t), torch.zeros((), dtype=dtype, device=device))
        self.ideal_valid = ideal_v
        if n_relevant is None:
            self.n_relevant = (self._is_relevant(ideal_t) & ideal_v).to(dtype).sum(-1)
        else:
            self.n_relevant = n_relevant.to(dtype)
        self._cache: dict[str, Tensor] = {}

    # ------------------------------------------------------------------ primitives
    def _is_relevant(self, t: Tensor) -> Tensor:
        thr = self.convention.relevance_threshold
        if thr is not None:
            return t >= thr
        return t >= 1 if self._threshold_int else t > 0

    def group_sum(self, x: Tensor) -> Tensor:
        """Sum of ``x`` (ranked order) over the tie group of each position, broadcast back."""
        if not self.averaged:
            return x
        sums = torch.zeros_like(x).scatter_add_(-1, self._group_id, x)
        return sums.gather(-1, self._group_id)

    def expected(self, x: Tensor) -> Tensor:
        """Expected value of ``x`` at each ranked position over the orders of tied documents."""
        return self.group_sum(x) / self.group_size if self.averaged else x

    def before_group(self, x: Tensor) -> Tensor:
        """Sum of ``x`` over all positions before the tie group of each position."""
        exclusive = x.cumsum(-1) - x
        return exclusive.gather(-1, self.group_start) if self.averaged else exclusive

    def cutoff_index(self, ks: tuple[int | None, ...]) -> list[int]:
        """0-based last position inside each cutoff (``None`` = whole list; k beyond L = L)."""
        return [self.length - 1 if k is None else min(k, self.length) - 1 for k in ks]

    def at_cutoffs(self, cumulative: Tensor, ks: tuple[int | None, ...]) -> Tensor:
        """Gather a cumulative ``(N, L)`` tensor at each cutoff -> ``(N, K)``."""
        return cumulative[:, self.cutoff_index(ks)]

    def cached(self, name: str, fn) -> Tensor:  # noqa: ANN001 - tiny memo helper
        if name not in self._cache:
            self._cache[name] = fn()
        return self._cache[name]

    @property
    def n_valid(self) -> Tensor:
        return self.cached("n_valid", lambda: self.valid.to(self.dtype).sum(-1))

    @property
    def expected_rel_cumsum(self) -> Tensor:
        """Expected number of relevant documents in the top ``p`` positions, ``(N, L)``."""
        return self.cached("rel_cumsum", lambda: self.expected(self.rel).cumsum(-1))

    @property
    def ideal_sorted_gains(self) -> Tensor:
        """Judged gains in decreasing order, padding (gain 0) after every real document.

        Padding must not outrank a real document with a negative gain (linear gain on negative
        grades, debiased gains), or the ideal ranking would push that document down."""
        return self.cached("ideal_sorted", self._ideal_sorted)

    def _ideal_sorted(self) -> Tensor:
        lowest = torch.full((), float("-inf"), dtype=self.dtype, device=self.ideal_gains.device)
        ordered = torch.where(self.ideal_valid, self.ideal_gains, lowest).sort(-1, descending=True).values
        n_judged = self.ideal_valid.sum(-1, keepdim=True)
        slots = torch.arange(ordered.shape[-1], device=ordered.device)
        return torch.where(slots < n_judged, ordered, torch.zeros((), dtype=self.dtype, device=ordered.device))

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


def _rank(preds: Tensor, target: Tensor, valid: Tensor, ties: str) -> Tensor:
    """Indices that order each list by descending score, padding last, ties per the policy."""
    nan = torch.full((), float("nan"), dtype=preds.dtype, device=preds.device)
    key = torch.where(valid, -preds, nan)  # ascending sort puts NaN (padding) last
    if ties in ("average", "first"):
        return torch.sort(key, dim=-1, stable=True).indices
    # Pessimistic: tied documents in increasing grade; optimistic: decreasing.
    pre = torch.sort(target, dim=-1, descending=ties == "optimistic", stable=True).indices
    inner = torch.sort(key.gather(-1, pre), dim=-1, stable=True).indices
    return pre.gather(-1, inner)
