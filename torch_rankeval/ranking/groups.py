"""Tie-group helpers for the kernels beyond the core metrics (trec_eval's other measures, ERR, RBP,
Judged, fall-out, AUROC, OPA, ARP), on top of the ranking core's per-position tie statistics
(:meth:`~torch_rankeval.ranking.view.RankedBatch.groups`).

The kernels read the ranked view through RankedBatch's public attributes (``rel``, ``gains``,
``target``, ``valid``, ``judged``, ``n_relevant``, ``n_valid``, ``cutoff_index``, ...) and the few
helpers here: group bounds, group and before-group sums of any ranked-order quantity (float64 or
integer prefix sums, exact over long rows), expected sums over the top ``k``. No scatter, no host
sync, no data-dependent shape.
"""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.ranking.view import RankedBatch, device_constant

__all__ = [
    "between",
    "bounds",
    "check_deterministic",
    "cutoff_sizes",
    "cut_groups",
    "expected_top",
    "group_sums",
    "harmonic_top",
    "judged_grades",
    "no_relevant",
    "per_relevant",
    "prefix",
    "safe_div",
]


def bounds(rb: RankedBatch) -> tuple[Tensor, Tensor]:
    """0-based start and one-past-end position of each ranked position's tie group, ``(N, L)`` int64.

    Without tie averaging every document is its own group.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.5, 0.5, 0.1]]), torch.tensor([[1, 0, 1, 0]]), None, DEFAULT)
        >>> bounds(rb)
        (tensor([[0, 1, 1, 3]]), tensor([[1, 3, 3, 4]]))
    """

    def make() -> tuple[Tensor, Tensor]:
        g = rb.groups()
        start = g.start.long()
        return start, start + g.size.long()

    return rb.cached("group_bounds_int", make)


def group_sums(rb: RankedBatch, x: Tensor) -> tuple[Tensor, Tensor]:
    """``(inside, above)``, ``(N, L)``: the sum of the ranked-order ``x`` over each position's tie
    group, and over the positions ranked above that group, in ``x``'s dtype (accumulated in float64,
    or int64 for integer ``x``). Without averaged ties, groups of one: ``(x, exclusive prefix sum)``."""
    total, before = rb.groups().sums(x, None, dtype=torch.float64 if x.is_floating_point() else torch.int64)
    return total.to(x.dtype), before.to(x.dtype)


def prefix(x: Tensor) -> Tensor:
    """Exclusive prefix sums ``(N, L + 1)`` in float64: ``out[:, i] = x[:, :i].sum(-1)``."""
    return torch.constant_pad_nd(x.to(torch.float64).cumsum(-1), (1, 0))


def between(cs: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    """``sum(x[lo:hi])`` from exclusive prefix sums ``cs`` of ``x`` (indices broadcast as given)."""
    return cs.gather(-1, hi) - cs.gather(-1, lo)


def cut_groups(rb: RankedBatch, ks: tuple[int, ...]) -> tuple[Tensor, Tensor, Tensor]:
    """``(idx, start, end)``, ``(N, K)`` int64: each cutoff's last 0-based position and the bounds of
    the tie group it ends in (the group a cutoff may split).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.5, 0.5, 0.1]]), torch.tensor([[1, 0, 1, 0]]), None, DEFAULT)
        >>> cut_groups(rb, (2, None))
        (tensor([[1, 3]]), tensor([[1, 3]]), tensor([[3, 4]]))
    """
    start, end = bounds(rb)
    idx = device_constant(tuple(rb.cutoff_index(ks)), torch.int64, rb.device).expand(rb.n_lists, -1)
    return idx, start.gather(-1, idx), end.gather(-1, idx)


def judged_grades(rb: RankedBatch) -> Tensor:
    """The grades of the judged real documents in ranked order, ``(N, L)`` float64: negative grades,
    unjudged documents and padding 0.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[2, -1, 1]]), None, DEFAULT,
        ...                  judged=torch.tensor([[True, True, False]]))
        >>> judged_grades(rb)
        tensor([[2., 0., 0.]], dtype=torch.float64)
    """

    def make() -> Tensor:
        zero = torch.zeros((), dtype=torch.float64, device=rb.device)
        return torch.where(rb.judged & rb.valid, rb.target.to(torch.float64).clamp(min=0), zero)

    return rb.cached("judged_grades", make)


def expected_top(rb: RankedBatch, x: Tensor, ks: tuple[int, ...]) -> Tensor:
    """``E[sum of x over the top k]`` over the orders of tied documents, ``(N, K)`` float64: the
    groups above the cutoff's group in full, plus that group's mean times its slots inside the cutoff."""
    cs = prefix(x)
    idx, s, e = cut_groups(rb, ks)
    inside = (idx + 1 - s).to(torch.float64)
    return cs.gather(-1, s) + inside * between(cs, s, e) / (e - s).to(torch.float64)


def safe_div(num: Tensor, den: Tensor) -> Tensor:
    """``num / den``, 0 where ``den`` is 0."""
    ok = den != 0
    return torch.where(ok, num / torch.where(ok, den, 1.0), 0.0)


def no_relevant(rb: RankedBatch) -> Tensor:
    """The "no relevant document" flags ``(N, 1)``: the empty case of most measures.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> no_relevant(RankedBatch(torch.tensor([[0.9, 0.5], [0.2, 0.1]]), torch.tensor([[0, 1], [0, 0]]), None, DEFAULT))
        tensor([[False],
                [ True]])
    """
    return rb.cached("no_relevant", lambda: (rb.relevant_count <= 0).unsqueeze(-1))


def per_relevant(rb: RankedBatch, total: Tensor) -> Tensor:
    """``total / R`` per query, ``(N,)``, 0 for a query without relevant document."""
    r = rb.n_relevant
    return torch.where(r > 0, total / r.clamp(min=1), torch.zeros_like(total))


def cutoff_sizes(rb: RankedBatch, ks: tuple[int, ...], *, adaptive_k: bool, dtype: torch.dtype | None = None) -> Tensor:
    """The number of positions each cutoff reads, ``(N, K)``: ``k`` (``min(k, n)`` with ``adaptive_k``),
    ``n`` (the query's number of ranked documents) for ``k=None``. The divisor of the shares of the top k.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[0, 1, 0]]), None, DEFAULT)
        >>> cutoff_sizes(rb, (2, 5, None), adaptive_k=False), cutoff_sizes(rb, (2, 5, None), adaptive_k=True)
        (tensor([[2., 5., 3.]]), tensor([[2., 3., 3.]]))
    """
    cut = rb.constant([float("inf") if k is None else float(k) for k in ks], dtype)
    if not adaptive_k and None not in ks:  # the cutoffs themselves: a constant, no work
        return cut.expand(rb.n_lists, -1)
    n_valid = rb.n_valid.unsqueeze(-1) if dtype is None else rb.n_valid.to(dtype).unsqueeze(-1)
    return torch.minimum(cut, n_valid) if adaptive_k else torch.where(torch.isinf(cut), n_valid, cut)


def harmonic_top(rb: RankedBatch, counts: Tensor, ks: tuple[int | None, ...]) -> Tensor:
    """``sum_{r <= n} 1 / r`` with ``n = min(counts, k)`` per query and cutoff, ``(N, K)`` (``k=None``: the
    list length; 0 where ``n`` is 0): the ``1 / rank`` weights of the first ``n`` positions, the ideal of
    NCRR and the normaliser of PWA.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[0, 1, 0]]), None, DEFAULT)
        >>> harmonic_top(rb, torch.tensor([2]), (1, 3, None)), harmonic_top(rb, torch.tensor([0]), (2,))
        (tensor([[1.0000, 1.5000, 1.5000]]), tensor([[0.]]))
    """
    harmonic = rb.inverse_ranks(rb.length).cumsum(-1)
    n = counts.unsqueeze(-1)
    n = torch.minimum(n, rb.constant([rb.length if k is None else k for k in ks], n.dtype)).to(torch.int64)
    return torch.where(n > 0, harmonic[(n - 1).clamp(min=0)], 0.0)


def check_deterministic(rb: RankedBatch, name: str) -> None:
    """Refuse averaged ties for a measure without an exact tie-averaged value (a static check, no sync)."""
    if rb.averaged:
        raise ValueError(
            f"{name} has no exact tie-averaged value; rank with ties='first' (input order), 'pessimistic' or "
            "'optimistic', or use convention='trec_eval'"
        )
