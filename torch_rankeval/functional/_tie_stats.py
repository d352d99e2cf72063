"""The few ranked-view statistics that the kernels of trec_eval's other measures (bpref, binG,
Rprec_mult, relative_P) read beyond RankedBatch's plain views (``rel``, ``gains``, ``target``,
``valid``, ``n_relevant``, ...): tie-group sums and bounds, judged flags, expected relevant counts.
They go through these functions only, so that a change of the ranking core's internals is one
change here.
"""

from __future__ import annotations

from torch import Tensor

from torch_rankeval.functional._ranking import RankedBatch

__all__ = ["expected_relevant", "group_bounds", "group_sums", "judged"]


def group_sums(rb: RankedBatch, x: Tensor) -> tuple[Tensor, Tensor]:
    """``(inside, above)``, ``(N, L)``: the sum of the ranked-order ``x`` over each position's tie group,
    and over the positions ranked above that group. Without averaged ties, groups of one: ``(x,
    exclusive prefix sum)``."""
    if not rb.averaged:
        return x, x.cumsum(-1) - x
    return rb.group_sum(x), rb.before_group(x)


def group_bounds(rb: RankedBatch) -> tuple[Tensor, Tensor]:
    """``(start, size)``, ``(N, L)``: the 0-based first position (working dtype) and the size of each
    position's tie group."""
    return rb.group_start.to(rb.dtype), rb.group_size


def judged(rb: RankedBatch) -> Tensor:
    """``(N, L)`` bool in ranked order: real documents with a relevance judgment."""
    return rb.judged


def expected_relevant(rb: RankedBatch, ks: tuple) -> Tensor:
    """Expected number of relevant documents in the top ``k`` over the tie orders, ``(N, K)``."""
    return rb.expected_relevant(ks)
