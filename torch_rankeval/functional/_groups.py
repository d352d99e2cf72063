"""Tie-group bounds and prefix sums for the kernels beyond trec_eval's core (ERR, RBP, Judged,
fall-out, AUROC, OPA, ARP).

These kernels read the ranked view through a few :class:`~torch_rankeval.functional._ranking.RankedBatch`
attributes (``target``, ``valid``, ``rel``, ``judged``, ``n_valid``, ``averaged``, ``cutoff_index``,
``span``, ``cumulative``, ``cached``) and derive the tie groups here, from the sorted score keys
(equal keys are tied, NaN marks padding, which never joins a group): a group's start is a running
maximum of group-start positions and its end a reversed running minimum. Group sums are differences
of float64 prefix sums at those bounds. No scatter, no host sync, no data-dependent shape.
"""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.functional._ranking import RankedBatch

__all__ = ["between", "bounds", "expected_top", "prefix", "safe_div"]


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
        n, length = rb.n_lists, rb.length
        pos = torch.arange(length, device=rb.device).expand(n, length)
        if not rb.averaged:
            return pos, pos + 1
        key = rb._sorted_key  # the one private attribute read: equal keys are tied, NaN is padding
        new = torch.ones(n, length, dtype=torch.bool, device=rb.device)
        new[:, 1:] = key[:, 1:] != key[:, :-1]  # NaN != NaN: a padding slot is a group of one
        start = torch.where(new, pos, torch.zeros_like(pos)).cummax(-1).values
        nxt = torch.where(new, pos, torch.full_like(pos, length))
        following = torch.cat([nxt[:, 1:], torch.full_like(nxt[:, :1], length)], dim=-1)
        end = following.flip(-1).cummin(-1).values.flip(-1)
        return start, end

    return rb.cached("beyond_bounds", make)


def prefix(x: Tensor) -> Tensor:
    """Exclusive prefix sums ``(N, L + 1)`` in float64: ``out[:, i] = x[:, :i].sum(-1)``."""
    c = x.to(torch.float64).cumsum(-1)
    return torch.cat([torch.zeros_like(c[:, :1]), c], dim=-1)


def between(cs: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    """``sum(x[lo:hi])`` from exclusive prefix sums ``cs`` of ``x`` (indices broadcast as given)."""
    return cs.gather(-1, hi) - cs.gather(-1, lo)


def expected_top(rb: RankedBatch, x: Tensor, ks: tuple) -> Tensor:
    """``E[sum of x over the top k]`` over the orders of tied documents, ``(N, K)`` float64: the
    groups above the cutoff's group in full, plus that group's mean times its slots inside the cutoff."""
    start, end = bounds(rb)
    cs = prefix(x)
    idx = torch.tensor(rb.cutoff_index(ks), device=rb.device).expand(rb.n_lists, -1)
    s, e = start.gather(-1, idx), end.gather(-1, idx)
    inside = (idx + 1 - s).to(torch.float64)
    return cs.gather(-1, s) + inside * between(cs, s, e) / (e - s).to(torch.float64)


def safe_div(num: Tensor, den: Tensor) -> Tensor:
    """``num / den``, 0 where ``den`` is 0."""
    ok = den != 0
    return torch.where(ok, num / torch.where(ok, den, torch.ones_like(den)), torch.zeros_like(num))
