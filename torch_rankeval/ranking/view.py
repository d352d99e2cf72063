"""The ranking core: rank a padded batch once; every metric is a reduction over that *ranked view*.

**Tie handling.** With ``ties="average"`` the documents that share a score form a *tie group*, and
every metric is the exact expected value over all orders of the documents inside each group
(McSherry & Najork, ECIR 2008). Under a uniformly random order the expected value at every slot
of a group is the group mean, so DCG@k, P@k and R@k are sums over the first ``k`` positions of
``group sum / group size`` (times the discount); AP's expected per-slot term is
``(A + B (j - 1)) / p`` with ``A``, ``B`` built from the group's sums (see
:mod:`~torch_rankeval.functional.average_precision`); RR and hit rate multiply per-slot ratios of
the group's size and relevant count; R-precision and AP's retrieved-relevant denominator read the
group the cutoff ends in. Other tie policies give groups of size one, for which the same formulas
reduce to the deterministic metric.

**One path.** The group statistics of the first ``W`` positions come from the sorted keys: each position's
group start and end over the whole row by two binary searches of the row's sorted keys for the
head's keys (:meth:`RankedBatch.tie_bounds`, ``torch.searchsorted``, ``(N, W)`` queries), group and
before-group sums by gathering prefix sums of the head at those bounds (the one group that goes on
past the head is summed over the row's documents that share its key), and cutoff sums of discounted
gains as the head's group means times a constant matrix (:meth:`RankedBatch.discounted_top`). Only
the sort and a few elementwise passes read the whole row. There is no scatter, no
per-group table, no data-dependent branch, shape or host sync: a batch with ties costs what a batch without ties costs, and the path
compiles with ``torch.compile(fullgraph=True)``. (A caller that reads only a head of each row, every
measure a cutoff measure the top-k route serves, may pass ``head=``: a large CPU batch with averaged
ties then ranks only that head with ``torch.topk``, as a truncated view: ``RankedBatch(head=)``.)
(A validated call, which syncs once for its value
checks anyway, also reads in that sync which lists hold a tie; a batch without one uses groups of
one document, the same values for less work (:meth:`RankedBatch.assume_no_ties`), and so does a
batch where few lists tie, whose tied lists the caller recomputes (:attr:`RankedBatch.split_rows`).)
Relevance is counted in integers and gains are summed in float64, so differences of prefix sums are exact (no cancellation over long rows);
combinatorial terms (RR, hit rate, the hypergeometric law of AP's retrieved-relevant denominator)
are evaluated in float64 as products of ratios or with ``lgamma``, exact to ~1e-12 relative at any
group size, and only the final values are cast to the working dtype.

**The ranked-view contract** (what every kernel may read, written out as the :class:`RankedView`
and :class:`TieStatistics` protocols; the top-k view of a catalogue,
:class:`~torch_rankeval.ranking.catalogue.TopKRankedBatch`, implements all of it too):

* per position, for the first ``W`` ranked positions (``W`` = :meth:`RankedBatch.span` of the
  cutoffs: the largest cutoff, or the whole list when a metric has no cutoff):
  :meth:`RankedBatch.head` ``"rel"`` (binary relevance), ``"gains"``, ``"valid"``, ``"target"``;
* per position, the statistics of its WHOLE tie group, which may extend beyond ``W``
  (:meth:`RankedBatch.groups` -> :class:`TieGroups`): start ``s``, end ``e`` and size ``n``;
  relevant count ``r`` and relevant count before the group ``c``; gain sum, squared-gain sum and
  gain before the group. The only group that can cross position ``W`` is the one holding position
  ``W - 1``; a full sort reads its sums from the whole ranked row, a top-k view from the documents
  whose score equals its score;
* per query: :attr:`RankedBatch.n_relevant`, :attr:`RankedBatch.n_valid` and the ideal's top gains
  (:meth:`RankedBatch.ideal_top`).

Kernels take a :class:`RankedView`: ``*_values(rb, ks, ...) -> (values (N, K), empty flags or None)``.
Nothing here loops over queries, moves data to the host or creates data-dependent shapes.
"""

from __future__ import annotations

import itertools
import math
import weakref
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention, discount_table, gain_fn

__all__ = [
    "RankedBatch",
    "RankedView",
    "TieGroups",
    "TieStatistics",
    "device_constant",
    "divide_into",
    "log_comb",
    "prefix_sums",
    "relevant",
    "take_columns",
]

_INDEX_CACHE: dict[tuple, Tensor] = {}
_DISCOUNT_HEADS: dict[int, tuple[weakref.ref, dict]] = {}  # id(table) -> (table, {(width, dtype): head})


def _cached(key: tuple, build: Callable[[], Tensor]) -> Tensor:
    """``build()``, kept per ``key`` in this process (built afresh under ``torch.compile``)."""
    if torch.compiler.is_compiling():
        return build()
    t = _INDEX_CACHE.get(key)
    if t is None:
        if len(_INDEX_CACHE) > 4096:
            _INDEX_CACHE.clear()
        t = _INDEX_CACHE[key] = keep_outside(build)
    return t


def keep_outside(build: Callable[[], Tensor]) -> Tensor:
    """``build()`` outside ``torch.inference_mode`` (an ordinary tensor), for a table kept across calls:
    a metric's update runs its kernels in inference mode (``RankingMetrics._batch``), and an
    inference tensor kept there would refuse autograd and in-place use by the next caller (a loss
    under autograd, an update outside inference mode).

    Example:
        >>> with torch.inference_mode():
        ...     kept = keep_outside(lambda: torch.arange(3))
        >>> kept.is_inference()
        False
    """
    with torch.inference_mode(False):
        return build()


def _to_device(t: Tensor, device: torch.device) -> Tensor:
    """A small host-built tensor on ``device`` without a host sync: through pinned memory and a
    non-blocking copy on CUDA (a plain copy from pageable memory synchronises the stream)."""
    device = torch.device(device)
    if device.type != "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


def device_constant(values: tuple[float, ...], dtype: torch.dtype, device: torch.device) -> Tensor:
    """A small constant tensor (cutoffs, column picks, gain tables) on ``device``, built once per
    process, dtype and device and copied without a host sync; a plain tensor under ``torch.compile``.

    Example:
        >>> device_constant((1, 5, 10), torch.int64, torch.device("cpu"))
        tensor([ 1,  5, 10])
    """
    if torch.compiler.is_compiling():
        return torch.tensor(values, dtype=dtype, device=device)
    values = tuple(values)
    return _cached((values, dtype, str(device)), lambda: _to_device(torch.tensor(values, dtype=dtype), device))


_TABLES: dict[str, Callable[[int, torch.dtype, torch.device], Tensor]] = {
    "arange": lambda n, dtype, device: torch.arange(n, dtype=dtype, device=device),
    "countdown": lambda n, dtype, device: torch.arange(n, 0, -1, dtype=dtype, device=device),
    # max(x - 1, 1) for x = 0..n-1: the other documents of a tie group of x (at least 1, a divisor)
    "others_in_group": lambda n, dtype, device: (torch.arange(n, dtype=dtype, device=device) - 1).clamp(min=1),
    "ranks": lambda n, dtype, device: torch.arange(1, n + 1, dtype=dtype, device=device),
    "inverse_ranks": lambda n, dtype, device: (
        1.0 / torch.arange(1, n + 1, dtype=torch.float64, device=device).to(dtype)
    ),
}


def _table(kind: str, n: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """Cached per-position tables of length ``n``: ``"arange"`` (0..n-1), ``"ranks"`` (1..n),
    ``"inverse_ranks"`` (1/1..1/n), ``"countdown"`` (n..1), ``"others_in_group"`` (``max(x - 1, 1)``)."""
    return _cached((kind, n, dtype, str(device)), lambda: _TABLES[kind](n, dtype, device))


def take_columns(x: Tensor, idx: list[int]) -> Tensor:
    """``x[:, idx]`` for a static list of column indices: a slice when the columns are contiguous,
    else ``index_select`` (list indexing is far slower on CPU)."""
    if len(idx) == 1:
        return x[:, idx[0] : idx[0] + 1]
    if all(b == a + 1 for a, b in itertools.pairwise(idx)):
        return x[:, idx[0] : idx[-1] + 1]
    if torch.compiler.is_compiling():
        return x[:, list(idx)]
    return x.index_select(-1, device_constant(tuple(idx), torch.int64, x.device))


def prefix_sums(x: Tensor, idx: list[int], dtype: torch.dtype | None = None) -> Tensor:
    """``x[:, : i + 1].sum(-1)`` for each column index ``i`` of ``idx``, ``(N, K)``, accumulated in
    ``dtype`` (default ``x``'s): a plain sum for one cutoff; for several, floating ``x`` times a constant
    0/1 matrix (one product), else a cumulative sum and a column pick.

    Example:
        >>> prefix_sums(torch.tensor([[1.0, 2.0, 3.0]]), [0, 2]), prefix_sums(torch.tensor([[1, 2, 3]]), [0, 2])
        (tensor([[1., 6.]]), tensor([[1, 6]]))
    """
    if len(idx) == 1:
        return x[:, : idx[0] + 1].sum(-1, keepdim=True, dtype=dtype)
    width = max(idx) + 1
    if x.is_floating_point() and (dtype is None or dtype == x.dtype):
        key = ("inside_cutoffs", width, tuple(idx), x.dtype, str(x.device))
        return x[:, :width] @ _cached(
            key, lambda: _cutoff_matrix(torch.ones(width, dtype=x.dtype, device=x.device), idx)
        )
    return take_columns(x[:, :width].cumsum(-1, dtype=dtype), idx)


def divide_into(num: Tensor, den: Tensor, dtype: torch.dtype) -> Tensor:
    """``num / den`` rounded to ``dtype`` once, in the division's own store (one operation, not a
    division and a cast; a plain division and cast under ``torch.compile`` or with gradients, where
    ``out=`` does not serve).

    Example:
        >>> divide_into(torch.tensor([1.0, 2.0], dtype=torch.float64), torch.tensor([3, 4]), torch.float32)
        tensor([0.3333, 0.5000])
    """
    if torch.compiler.is_compiling() or (torch.is_grad_enabled() and (num.requires_grad or den.requires_grad)):
        return (num / den).to(dtype)
    # an empty ``out`` takes the broadcast shape itself (no Python shape arithmetic, no resize warning)
    return torch.div(num, den, out=torch.empty(0, dtype=dtype, device=num.device))


def log_comb(a: Tensor, b: Tensor) -> Tensor:
    """``log(C(a, b))`` for float tensors with ``0 <= b <= a`` (other entries are meaningless); call it
    on float64 tensors: in float32, ``lgamma`` of a large count has no digits left for the difference."""
    return torch.lgamma(a + 1) - torch.lgamma(b + 1) - torch.lgamma(a - b + 1)


@runtime_checkable
class TieStatistics(Protocol):
    """What a kernel reads from :meth:`RankedView.groups`: the statistics of the WHOLE tie group of each
    of the first ``width`` ranked positions, ``(N, width)`` each (:class:`TieGroups` documents them)."""

    width: int

    @property
    def start(self) -> Tensor: ...
    @property
    def size(self) -> Tensor: ...
    @property
    def end(self) -> Tensor: ...
    @property
    def offset(self) -> Tensor: ...
    @property
    def slot_share(self) -> Tensor: ...
    @property
    def rel(self) -> Tensor: ...
    @property
    def rel_before(self) -> Tensor: ...
    @property
    def rel_count(self) -> Tensor: ...
    @property
    def rel_count_before(self) -> Tensor: ...
    @property
    def gain(self) -> Tensor: ...
    @property
    def gain_before(self) -> Tensor: ...
    @property
    def gain_sq(self) -> Tensor: ...
    @property
    def first_hazard(self) -> Tensor: ...
    @property
    def no_relevant_yet(self) -> Tensor: ...
    def mean(self, name: str) -> Tensor: ...
    def at(self, name: str, idx: list[int]) -> Tensor: ...
    def sums(self, head: Tensor, doc: Tensor | None, *, dtype: torch.dtype) -> tuple[Tensor, Tensor]: ...


@runtime_checkable
class RankedView(Protocol):
    """The ranked-view contract: everything a kernel may read from a ranked batch (see the module
    docstring). The dense :class:`RankedBatch` (a full sort) and the top-k
    :class:`~torch_rankeval.ranking.catalogue.TopKRankedBatch` (the first ``W`` positions of a
    catalogue) both implement all of it; kernels are typed against it, not against either class. It
    lists what the kernels and their helpers (:mod:`~torch_rankeval.ranking.groups`,
    :mod:`~torch_rankeval.ranking.subtopics`) read; what only the input stage and the plan read
    (``split_rows``, ``n_relevant_in_list``, ``ideal_target``) belongs to the classes, not to the contract.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.2, 0.9]]), torch.tensor([[1, 0]]), None, DEFAULT)
        >>> isinstance(rb, RankedView)
        True
    """

    convention: Convention
    dtype: torch.dtype
    device: torch.device
    n_lists: int
    length: int
    averaged: bool
    truncated: bool
    item_weights: Tensor | None

    # per query
    @property
    def n_relevant(self) -> Tensor: ...
    @property
    def n_valid(self) -> Tensor: ...
    @property
    def ideal_gains(self) -> Tensor: ...
    @property
    def ideal_valid(self) -> Tensor | None: ...
    def ideal_top(self, ks: tuple[int | None, ...]) -> Tensor: ...

    # per position, in ranked order
    @property
    def valid(self) -> Tensor: ...
    @property
    def rel(self) -> Tensor: ...
    @property
    def gains(self) -> Tensor: ...
    @property
    def judged(self) -> Tensor: ...
    @property
    def target(self) -> Tensor: ...
    @property
    def positions(self) -> Tensor: ...
    @property
    def discounts(self) -> Tensor: ...
    @property
    def ranked_scores(self) -> Tensor: ...
    def head(self, name: str, width: int | None = None) -> Tensor: ...
    def ranked(self, x: Tensor, width: int | None = None) -> Tensor: ...
    def discount_head(self, width: int) -> Tensor: ...
    def inverse_ranks(self, width: int) -> Tensor: ...
    def ranks(self, width: int, dtype: torch.dtype | None = None) -> Tensor: ...

    # tie groups and cutoffs
    def groups(self, width: int | None = None) -> TieStatistics: ...
    def expected(self, x: Tensor, upto: int | None = None, doc: Tensor | None = None) -> Tensor: ...
    def cutoff_index(self, ks: tuple[int | None, ...]) -> list[int]: ...
    def span(self, ks: tuple[int | None, ...]) -> int: ...
    def cumulative(self, x: Tensor, ks: tuple[int | None, ...], *, dtype: torch.dtype | None = None) -> Tensor: ...
    def cumulative_per_rank(self, x: Tensor, ks: tuple[int | None, ...]) -> Tensor: ...
    @property
    def relevant_count(self) -> Tensor: ...
    def expected_in_top(self, name: str, ks: tuple[int | None, ...]) -> Tensor: ...
    def expected_relevant(self, ks: tuple[int | None, ...]) -> Tensor: ...
    def discounted_top(self, name: str, ks: tuple[int | None, ...]) -> Tensor: ...
    def discounted_prefix(self, x: Tensor, idx: list[int]) -> Tensor: ...
    def ideal_discounted(self, ks: tuple[int | None, ...]) -> Tensor: ...

    # helpers
    def constant(self, values: list[float] | list[int], dtype: torch.dtype | None = None) -> Tensor: ...
    def cached(self, name: str, fn: Callable[[], Tensor]) -> Tensor: ...


#: on CPU, the largest batch (lists x documents) whose tie-group sums come from whole-row prefix sums
_ROW_PREFIX_MAX_CPU = 1 << 17
#: on CPU, the largest batch (lists x documents) that runs the GPU's path, which the operation budgets
#: count (launches on a GPU; ``benchmarks/bench_ops.py`` forces it for a batch of any size) and the suite's
#: small batches test. Larger CPU batches (past 256 x 32) make choices of their own (and, unvalidated in
#: eager mode, read their tie flags from memory: ``ranking.inputs.prepare``); at 256 x 64 they cut an
#: nDCG@10 + AP@10 update by 10-30% (2^15 documents was the bound before: benchmarks/README.md):
#: - the gain and relevance sums are two prefix sums, not one of the ranked pair (the pair saves
#:   operations but moves more memory: 15-25% slower on CPU from 1,000 x 100 on, 2% at 256 x 64);
#: - the sort reads integer keys (:func:`_int_key`: 25-30% faster than a float sort on CPU, for three
#:   elementwise operations more; a head's ``torch.topk`` reads the floats: as fast, without the three);
#: - with integer grades under the exp2 or linear gain (which order as their grades do), the ideal's
#:   top and the head's gains come from the grades (``RankedBatch._gains_of_grades``), read at their
#:   positions: no row-sized gains unless a statistic of the whole row needs them.
_GPU_PATH_MAX_CPU = 1 << 13
#: on the large CPU path with its grades' histogram, the most head positions (lists x width) whose tie groups'
#: gains and relevant counts are summed as one float64 pair (``TieGroups._head_pair``: twelve operations fewer,
#: twice the bytes per operation): 4-8% faster at 256 x 64 and 1,000 x 100 (nDCG@10 + AP@10), 2% slower at
#: 3,000 x 64 and 4-8% at 10,000 x 100, where the operations' bytes outweigh their number
_HEAD_PAIR_MAX_CPU = 1 << 14

_NEEDS_DOC = (
    "the tie group that crosses the last position read goes on past it: its sum needs the per-document "
    "values (doc=, (N, L) in input order)"
)


class TieGroups:
    """Per-position statistics of the whole tie group of each of the first ``width`` ranked
    positions, ``(N, width)`` each (see the module docstring for the contract). Each statistic is
    computed when first read.

    Attributes (in the batch's working dtype unless said otherwise):
        start: 0-based position ``s`` of the group's first document.
        size: ``n``, the number of documents in the group (all of them, also beyond ``width``).
        end: ``s + n``.
        offset: ``j - 1``, the group's positions above this one.
        slot_share: ``(j - 1) / max(n - 1, 1)``, ``j`` the 1-based slot of the position inside its group.
        rel: relevant documents in the group, ``r``.
        rel_before: relevant documents ranked above the group, ``c``.
        rel_count, rel_count_before: ``rel`` and ``rel_before`` as exact counts in the working dtype or in
            float64, whichever the batch holds (float64 when one prefix sum serves gains and relevance).
        gain, gain_before, gain_sq: the group's gain sum, the gain ranked above it and the group's
            sum of squared gains (float64).
        first_hazard: float64, for the first group holding a relevant document (``c = 0``, ``r > 0``)
            the probability ``r / (n - j + 1)`` that slot ``j`` holds the first relevant document of
            the group given that the slots before it do not; 0 elsewhere (RR, hit rate).
    """

    #: whether the int group bounds come from the batch's ranked row (:meth:`RankedBatch.tie_bounds`); a
    #: top-k view's groups read their statistics from the view instead
    _row_bounds: bool = True

    def __init__(self, rb: RankedBatch, width: int) -> None:
        # A weak reference: the batch holds its TieGroups, and a cycle would keep every batch's
        # tensors alive until the cyclic garbage collector runs (memory growing over updates).
        self._rb = weakref.ref(rb)
        self.width: int = width
        self._cache: dict[str, Tensor] = {}
        # int64 starts and ends of the groups of the first ``width`` positions, over the whole row (a group
        # that goes on past ``width`` has its true end): every statistic of averaged ties reads them
        self._start_i: Tensor | None = None
        self._end_i: Tensor | None = None
        if self._row_bounds and rb.averaged:
            self._start_i, self._end_i = rb.tie_bounds(width)
        self._boundary: tuple[Tensor, Tensor] | None = None
        self._crossing_hit: tuple[Tensor, Tensor, Tensor] | None = None

    @property
    def rb(self) -> RankedBatch:  # noqa: D102
        rb = self._rb()
        if rb is None:
            raise RuntimeError("the RankedBatch of these TieGroups no longer exists")
        return rb

    def _get(self, name: str, make: Callable[[], dict[str, Tensor]]) -> Tensor:
        """Statistic ``name``: cached; else sliced from a wider TieGroups of the batch that holds it
        already (whole-group statistics do not depend on the width); else computed here."""
        if name not in self._cache:
            groups = (self._rb() or self.rb)._groups
            wider = None
            if len(groups) > 1:
                for w, g in groups.items():
                    if w > self.width and name in g._cache:
                        wider = g._cache[name]
                        break
            if wider is not None:
                self._cache[name] = wider[:, : self.width]
            else:
                self._cache.update(make())
        return self._cache[name]

    def _crossing(self, inside_values: Tensor, full_row: Tensor) -> Tensor:
        """``inside_values`` with the group crossing ``width`` replaced by its full-row value."""
        if self._boundary is None:
            return inside_values
        return torch.where(self._boundary[0], full_row, inside_values)

    # -- bounds
    @property
    def start(self) -> Tensor:
        def make() -> dict[str, Tensor]:
            rb = self._rb() or self.rb
            if not rb.averaged:
                return {"start": rb.positions[: self.width].expand(rb.n_lists, -1) - 1}
            return {"start": self._start_i.to(rb.dtype)}

        return self._get("start", make)

    @property
    def size(self) -> Tensor:
        def make() -> dict[str, Tensor]:
            rb = self._rb() or self.rb
            if not rb.averaged:
                return {"size": torch.ones(rb.n_lists, self.width, dtype=rb.dtype, device=rb.device)}
            return {"size": self._size_i.to(rb.dtype)}

        return self._get("size", make)

    @property
    def _size_i(self) -> Tensor:
        """The group sizes as int64 (averaged ties only): the divisor of the group means."""
        hit = self._cache.get("size_i")
        if hit is None:
            hit = self._cache["size_i"] = self._end_i - self._start_i
        return hit

    @property
    def end(self) -> Tensor:
        """``s + n``: one past the group's last position (may exceed ``width``)."""
        return self._get("end", lambda: {"end": self.start + self.size})

    @property
    def offset(self) -> Tensor:
        """``j - 1``: how many positions of the group come before this one."""

        def make() -> dict[str, Tensor]:
            rb = self._rb() or self.rb
            return {"offset": _table("arange", self.width, rb.dtype, rb.device) - self.start}

        return self._get("offset", make)

    @property
    def slot_share(self) -> Tensor:
        """``(j - 1) / max(n - 1, 1)``: the share of the group's other documents ranked above this slot
        (0 in a group of one), in the working dtype."""

        def make() -> dict[str, Tensor]:
            rb = self._rb() or self.rb
            if self._end_i is None:  # no int bounds: from the float statistics
                return {"slot_share": self.offset / (self.size - 1).clamp(min=1)}
            # max(n - 1, 1) looked up in a table of every group size (one operation, not a subtraction and a
            # clamp), in float32 at least: the int offset divided by it promotes to that dtype
            dtype = rb.dtype if rb.dtype in (torch.float32, torch.float64) else torch.float32
            divisor = _table("others_in_group", rb.row_length + 1, dtype, rb.device).take(self._size_i)
            arange = _table("arange", self.width, torch.int64, rb.device)
            if torch.compiler.is_compiling():
                offset = arange - self._start_i
            else:  # the int offset stored in the divisor's dtype (exact below 2^24): half an int64 row
                offset = torch.sub(arange, self._start_i, out=torch.empty(0, dtype=dtype, device=rb.device))
            return {"slot_share": (offset / divisor).to(rb.dtype)}

        return self._get("slot_share", make)

    # -- sums
    def sums(
        self, head: Tensor, doc: Tensor | None, *, dtype: torch.dtype, full: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """(group sum, sum ranked above the group) of a per-position quantity ``head`` ``(N, width)``
        in ranked order whose per-document values (input order, ``(N, L)``) are ``doc``, accumulated
        in ``dtype``. ``doc`` is read only for a group that crosses ``width``; its sum is taken in
        ``doc``'s own dtype, a bool one in int32 (a sum of terms, no cancellation). ``full``: that
        group's sum ``(N, 1)``, known already (then ``doc`` is not read)."""
        rb = self._rb() or self.rb
        if not rb.averaged:
            x = head.to(dtype)
            return x, head.cumsum(-1, dtype=dtype) - x
        padded = torch.constant_pad_nd(head.cumsum(-1, dtype=dtype), (1, 0))  # [:, q]: the first q positions
        before = padded.gather(-1, self._start_i)
        if head.shape[-1] >= rb.length and not rb.truncated:
            return padded.gather(-1, self._end_i) - before, before
        # Only the group of the head's last position may go on past the head: its sum is that of the
        # row's documents (input order) whose key equals its key (no cumulative sum over the whole row).
        crossing, end_inside, same = self._crossing_group()
        if full is None:
            if doc is None:
                raise ValueError(_NEEDS_DOC)
            # summed in the documents' own dtype when it is exact enough (a cast of the whole row costs more
            # than the sum), a bool one in int32; ``where`` promotes it to ``dtype``
            if doc.dtype == torch.bool:
                full = _row_count(same & doc, torch.int32, keepdim=True)
            else:
                acc = None if doc.dtype in (torch.float32, torch.float64) else dtype
                full = (doc * same).sum(-1, keepdim=True, dtype=acc)
        return torch.where(crossing, full, padded.gather(-1, end_inside) - before), before

    def _crossing_group(self) -> tuple[Tensor, Tensor, Tensor]:
        """(positions in the group that goes on past the head ``(N, width)``, group ends capped at
        ``width``, the row's documents (input order, ``(N, L)``) in the head's last group)."""
        if self._crossing_hit is None:
            rb, width = self._rb() or self.rb, self.width
            if rb._doc_key is not None:
                same = rb._doc_key == rb._sorted_key[:, width - 1 : width]  # NaN (padding) equals nothing
            else:  # integer keys or a head (head=): the scores, whose ties are the keys' ties
                same = rb._same_score(width)
            inside = rb._cache.get(f"tie_ends_inside_{width}")  # a head's ends before they go past it
            if inside is None:
                inside = self._end_i.clamp(max=width)
            self._crossing_hit = (self._end_i > width, inside, same)
        return self._crossing_hit

    @property
    def rel(self) -> Tensor:
        return self._get("rel", self._rel_working)

    @property
    def rel_before(self) -> Tensor:
        return self._get("rel_before", self._rel_working)

    def _rel_working(self) -> dict[str, Tensor]:
        dtype = (self._rb() or self.rb).dtype
        return {"rel": self.rel_count.to(dtype), "rel_before": self.rel_count_before.to(dtype)}

    @property
    def rel_count(self) -> Tensor:
        """``rel`` as exact counts in the working dtype or in float64, whichever the batch holds (no cast):
        for kernels that go on in float64 or end in a comparison."""
        return self._get("rel_count", self._make_rel)

    @property
    def rel_count_before(self) -> Tensor:
        """``rel_before`` as :attr:`rel_count` holds it."""
        return self._get("rel_count_before", self._make_rel)

    def _make_rel(self) -> dict[str, Tensor]:
        rb = self._rb() or self.rb
        # exact counts: float32 holds every integer up to 2**24, float64 up to 2**53
        dtype = rb.dtype if rb.length < 2**24 else torch.float64
        sums = self._row_sums("relmask", dtype) or self._head_pair()  # in ``dtype``, or float64 with the gains
        if sums is not None:
            return sums
        total, before = self._head_sums("relmask", dtype)
        total, before = total.to(rb.dtype), before.to(rb.dtype)
        return {"rel": total, "rel_before": before, "rel_count": total, "rel_count_before": before}

    @property
    def gain(self) -> Tensor:
        return self._get("gain", self._make_gain)

    @property
    def gain_before(self) -> Tensor:
        return self._get("gain_before", self._make_gain)

    def _make_gain(self) -> dict[str, Tensor]:
        # float64 prefix sums: their differences do not cancel over long rows
        sums = self._row_sums("gains", torch.float64) or self._head_pair()
        if sums is not None:
            return sums
        total, before = self._head_sums("gains", torch.float64)
        return {"gain": total, "gain_before": before}

    def _row_sums(self, name: str, dtype: torch.dtype) -> dict[str, Tensor] | None:
        """``{"gain", "gain_before"}`` (``name="gains"``) or ``{"rel_count", "rel_count_before"}``
        (``"relmask"``), from the prefix sums of the WHOLE ranked row accumulated in ``dtype``; both
        pairs, in float64, from one prefix sum of the ranked pair (:meth:`RankedBatch._row_prefix_pair`)
        when the plan has said its kernels read both (``rb.pair_sums``; on CPU up to ``_GPU_PATH_MAX_CPU``). None
        where :meth:`sums` serves: no averaged ties, a top-k view's own ``sums``, and a large batch on CPU
        read to a short width (there the head's prefix sums and one pass for the group that crosses
        ``width`` read less memory; the row's prefix sums save operations: launches on a GPU, overhead on
        small batches)."""
        rb = self._rb() or self.rb
        if not rb.averaged or rb.truncated or type(self).sums is not TieGroups.sums:
            return None
        cpu, size = rb.device.type == "cpu", rb.n_lists * rb.length
        if cpu and size > _ROW_PREFIX_MAX_CPU and self.width < rb.length:
            return None
        if rb.pair_sums and not rb._cpu_path:  # see _GPU_PATH_MAX_CPU
            padded = rb._row_prefix_pair()
            before = padded.gather(-1, self._start_i.expand(2, -1, -1))
            total = padded.gather(-1, self._end_i.expand(2, -1, -1)) - before
            return {"gain": total[0], "gain_before": before[0], "rel_count": total[1], "rel_count_before": before[1]}
        padded = rb._row_prefix(name, dtype)
        before = padded.gather(-1, self._start_i)
        total = padded.gather(-1, self._end_i) - before
        return (
            {"gain": total, "gain_before": before}
            if name == "gains"
            else {"rel_count": total, "rel_count_before": before}
        )

    def _head_sums(self, name: str, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """:meth:`sums` of ``name`` (``"gains"``, ``"relmask"``): over the first ``width`` positions, and
        where a group may go on past them, over the row's documents of that group: their gains or
        relevance, or (a large CPU batch with its grades' histogram) a histogram of their grades
        (:meth:`RankedBatch._crossing_total`: no pass of the row's gains or relevance)."""
        rb = self._rb() or self.rb
        if rb.averaged and not rb.truncated and self.width >= rb.length:
            return self.sums(rb.head(name), None, dtype=dtype)
        full = rb._crossing_total(name, self.width, self._crossing_group()[2]) if rb.averaged else None
        doc = None if full is not None else rb._doc(name if name != "relmask" else "rel")
        return self.sums(rb.head(name, self.width), doc, dtype=dtype, full=full)

    def _head_pair(self) -> dict[str, Tensor] | None:
        """Both of :meth:`_head_sums`' pairs in float64 (``gain``, ``gain_before``, ``rel_count``,
        ``rel_count_before``) from one prefix sum of the head's (gain, relevant) pairs, looked up from its
        grades' levels in one table (:meth:`RankedBatch._level_pairs`), the group that crosses ``width``
        from one product of its histogram with that table: where the plan's kernels read both
        (``rb.pair_sums``) and the batch has its grades' histogram (a large CPU batch,
        :meth:`RankedBatch._crossing_total`), up to ``_HEAD_PAIR_MAX_CPU`` head positions; twelve operations
        fewer than the two apart. None elsewhere."""
        rb = self._rb() or self.rb
        if not (rb.pair_sums and rb.averaged) or (not rb.truncated and self.width >= rb.length):
            return None
        if rb.n_lists * self.width > _HEAD_PAIR_MAX_CPU:
            return None
        table = rb._level_pairs()
        if table is None:
            return None
        crossing, end_inside, same = self._crossing_group()
        # padding reads as grade 0 in the levels: no gain under exp2 or linear (the gains this path takes)
        # and never relevant (a relevance threshold is > 0), so the pairs need no mask
        pairs = table[:, rb._head_levels(self.width)]  # (2, N, width): gains, relevant
        padded = torch.constant_pad_nd(pairs.cumsum(-1), (1, 0))  # [..., q]: the first q positions
        before = padded.gather(-1, self._start_i.expand(2, -1, -1))
        inside = padded.gather(-1, end_inside.expand(2, -1, -1)) - before
        full = table @ rb._crossing_levels(self.width, same).to(torch.float64).T  # (2, N)
        total = torch.where(crossing, full.unsqueeze(-1), inside)
        return {
            "gain": total[0],
            "gain_before": before[0],
            "rel_count": total[1],
            "rel_count_before": before[1],
            "pair_total": total,  # both group means in one division (:meth:`_group_mean`)
        }

    @property
    def gain_sq(self) -> Tensor:
        def make() -> dict[str, Tensor]:
            rb = self._rb() or self.rb
            g = rb.head("gains", self.width).to(torch.float64)
            doc = rb._doc("gains").to(torch.float64)
            return {"gain_sq": self.sums(g * g, doc * doc, dtype=torch.float64)[0]}

        return self._get("gain_sq", make)

    @property
    def first_hazard(self) -> Tensor:
        def make() -> dict[str, Tensor]:
            # r / (n - j + 1) in the first group with a relevant document (c = 0), 0 elsewhere (r = 0 there
            # gives 0 too); n - j + 1 >= 1 is an exact integer in the working dtype
            first = torch.where(self.rel_count_before == 0, self.rel_count, 0.0)
            if self._end_i is not None:  # n - j + 1 from the int bounds minus a float64 table: an exact float64
                # divisor, so the division promotes ``first`` to float64 itself (no cast of its own)
                return {
                    "first_hazard": first
                    / (self._end_i - _table("arange", self.width, torch.float64, self._end_i.device))
                }
            return {"first_hazard": first.to(torch.float64) / (self.size - self.offset).to(torch.float64)}

        return self._get("first_hazard", make)

    @property
    def no_relevant_yet(self) -> Tensor:
        """float64 probability that no relevant document is ranked at or above each position."""
        return self._get("no_relevant_yet", lambda: {"no_relevant_yet": (1 - self.first_hazard).cumprod(-1)})

    def mean(self, name: str) -> Tensor:
        """Expected value of ``"rel"`` or ``"gains"`` at each position over the tie orders (its
        group mean), in the working dtype; kept like every statistic (do not modify it in place)."""
        key = f"mean_{name}"
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        rb = self._rb() or self.rb
        if not rb.averaged:
            return rb.head(name, self.width)
        if len(rb._groups) > 1:  # a wider group may hold it already
            return self._get(key, lambda: self._group_mean(name, rb))
        self._cache.update(self._group_mean(name, rb))
        return self._cache[key]

    def _group_mean(self, name: str, rb: RankedBatch) -> dict[str, Tensor]:
        """``{"mean_<name>": total / size}``; both means in one division where the group sums were made
        as a pair (:meth:`_head_pair`: the kernels read both)."""
        size = self._cache.get("size")  # the float sizes when read already, else the int ones (no cast)
        if size is None:
            if self._end_i is None:
                size = self.size
            else:
                size = self._cache.get("size_i")
                if size is None:
                    size = self._cache["size_i"] = self._end_i - self._start_i
        total = self.rel_count if name == "rel" else self.gain  # the sums first: a pair of them makes "pair_total"
        pair = self._cache.get("pair_total")  # made with the sums (:meth:`_head_pair`) or not at all
        if pair is not None:
            means = divide_into(pair, size, rb.dtype)
            return {"mean_gains": means[0], "mean_rel": means[1]}
        return {f"mean_{name}": divide_into(total, size, rb.dtype)}

    def at(self, name: str, idx: list[int]) -> Tensor:
        """Statistic ``name`` at the static positions ``idx``, ``(N, K)``."""
        return take_columns(getattr(self, name), idx)


class RankedBatch:
    """A padded batch ``(N, L)`` ranked once by a full sort, with the per-query facts every metric needs.

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
        subtopics: optional ``(N, L, S)`` subtopic grades in input order (the intent-aware measures
            read them, :mod:`~torch_rankeval.ranking.subtopics`); ``target`` is then their ad-hoc view.
        ideal_subtopics: optional ``(N, M, S)`` subtopic grades of every judged document.
        item_weights: optional ``(N, L)`` float weights of the documents in input order (0 at padding),
            for the kernels that weigh documents (``rb.ranked(rb.item_weights)``); None: not given.
        head: optional ``W``: the caller reads only the first ``W`` ranked positions (every measure a
            cutoff measure that the top-k route serves, ``k <= W``). A CPU batch above
            ``_GPU_PATH_MAX_CPU`` with averaged ties then ranks only them, with ``torch.topk`` of its
            scores instead of a sort of the row: ``length`` becomes ``W`` and ``truncated`` True, as
            for a top-k view, ``row_length`` stays ``L``; the tie group at position ``W`` is summed over the
            row's documents that share its score. Elsewhere (a GPU, whose budgets count one path; other
            tie policies, which order ties) the whole row is sorted and ``head`` is ignored.

    Per-document inputs beyond these (e.g. a ``judged`` flag) are put in ranked order with
    :meth:`ranked`.

    Example:
        >>> import torch
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.2, 0.9, 0.2, 0.1]]), torch.tensor([[1, 0, 0, 1]]), None, DEFAULT)
        >>> rb.head("rel", 4)                            # relevance in ranked order
        tensor([[0., 1., 0., 1.]])
        >>> g = rb.groups(4)                             # positions 2 and 3 tie at 0.2
        >>> g.start, g.size, g.rel, g.rel_before
        (tensor([[0., 1., 1., 3.]]), tensor([[1., 2., 2., 1.]]), tensor([[0., 1., 1., 1.]]), tensor([[0., 0., 0., 1.]]))
        >>> g.mean("rel")                                # expected relevance per position
        tensor([[0.0000, 0.5000, 0.5000, 1.0000]])
    """

    #: whether the list goes on past ``length`` (a top-k view of a longer row): no cutoff reads the whole list
    truncated: bool = False
    #: the plan's kernels read both the gain and the relevance sums of the tie groups: one prefix sum of the
    #: ranked pair serves both (:meth:`TieGroups._row_sums`)
    pair_sums: bool = False
    #: lists ranked with the plain formulas although they hold a tie (``prepare(split_ties=True)``): the
    #: caller recomputes them with tie statistics; None when every list's values are exact
    split_rows: list[int] | None = None
    #: subtopic grades ``(N, L, S)`` in input order (intent-aware measures), None for ad-hoc targets
    subtopics: Tensor | None = None
    #: subtopic grades ``(N, M, S)`` of every judged document (``ideal_target`` with a subtopic axis)
    ideal_subtopics: Tensor | None = None
    #: per-document weights ``(N, L)`` in input order (``weights=``), None when not given
    item_weights: Tensor | None = None
    #: the caller may read values of this batch from memory (a CPU batch in eager mode:
    #: :func:`~torch_rankeval.ranking.inputs.reads_host`, set by ``prepare``): :meth:`_level_counts` may
    #: read the grades' range
    host_reads: bool = False
    _levels: tuple[Tensor, int] | None = None  # :meth:`_level_counts`, once made
    _levels_read: bool = False  # :meth:`_level_counts` ran
    _range: tuple[int, int] | None = None  # :meth:`grade_range`, once read
    _range_read: bool = False
    _range_grades: Tensor | None = None  # the grades it read (the padding's as 0), until the histogram takes them
    _level_index: Tensor | None = None  # the histogram's index (grade - low), kept under averaged ties

    convention: Convention
    dtype: torch.dtype
    n_lists: int
    length: int
    device: torch.device
    averaged: bool
    #: ``(N, L)`` int64: the input position of the document at each ranked position
    order: Tensor
    #: the documents of each list (padding slots included); ``length`` when the whole row is ranked
    row_length: int

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
        subtopics: Tensor | None = None,
        ideal_subtopics: Tensor | None = None,
        item_weights: Tensor | None = None,
        head: int | None = None,
    ) -> None:
        self._cache: dict[str, Tensor] = {}
        if subtopics is not None:
            self.subtopics, self.ideal_subtopics = subtopics, ideal_subtopics
        if item_weights is not None:
            self.item_weights = item_weights
        self._groups: dict[int, TieGroups] = {}
        self.convention = convention
        self.dtype = dtype
        self.n_lists, self.length = n_lists, length = preds.shape
        self.row_length = length
        self.device: torch.device = preds.device
        self._gain_given = gain  # the gain function is made on first use (exp2 of integer grades needs none)
        self._threshold_int = not target.is_floating_point() and target.dtype != torch.bool
        self._exp2_of_int = gain is None and convention.gain == "exp2" and self._threshold_int
        self._has_padding = valid is not None
        self.averaged: bool = convention.ties == "average"
        self._target_in, self._valid_in, self._judged_in = target, valid, judged
        # a CPU batch larger than _GPU_PATH_MAX_CPU takes that path's choices (listed there): its tie sums
        # apart (TieGroups._row_sums), its sort through _int_key, its ideal top and head gains from the
        # grades (written out: a call more per update would pass the call budget)
        self._cpu_path = preds.device.type == "cpu" and preds.numel() > _GPU_PATH_MAX_CPU
        self._int_sort = self._cpu_path and preds.dtype in _INT_OF
        # the ideal's top and head's gains from the grades: integer grades, a gain keeping their order, all judged
        ordered_gain = gain is None and convention.gain in ("exp2", "linear")
        ideal_int = ideal_target is None or not (ideal_target.is_floating_point() or ideal_target.dtype == torch.bool)
        self._gains_of_grades = self._cpu_path and ordered_gain and self._threshold_int and judged is None and ideal_int
        head = head if head is not None and self._int_sort and self.averaged and 0 < head < length else None  # head=
        self.order, self._sorted_key, self._doc_key = _rank(
            preds, target, valid, convention.ties, convention.torch_topk_k, self._int_sort, head
        )
        if head is not None:
            self.length, self.truncated = head, True
        self._preds_in = preds
        # integer keys (see _rank): the padding's key is the largest integer, not NaN
        self._int_keys = not self._sorted_key.is_floating_point()

        max_len = self.length if ideal_target is None else max(self.length, ideal_target.shape[-1])
        if discounts is None or discounts.shape[0] < max_len:
            discounts = discount_table(max_len, convention, dtype=dtype, device=self.device)
        self._discounts_in = discounts
        self._ideal_target, self._ideal_valid, self._n_relevant = ideal_target, ideal_valid, n_relevant

    def any_tie(self) -> Tensor:
        """Whether two real documents of a list share a score, over the batch: a 0-d bool tensor (no
        host sync; NaN padding never equals anything)."""
        return self.tied_lists().any()

    def tied_lists(self) -> Tensor:
        """``(N,)`` bool: whether two real documents of each list share a score (no host sync)."""
        key = self._sorted_key
        if key.shape[-1] < 2:  # lists of one document or none: no tie; a head of one (head=1): the row says
            if self.truncated:
                return (self._last_group_size() > 1).squeeze(-1)
            return torch.zeros(key.shape[0], dtype=torch.bool, device=key.device)
        same = key[:, 1:] == key[:, :-1]
        if self._int_keys and self._has_padding:  # the padding's integer keys are all equal
            same &= key[:, 1:] != torch.iinfo(key.dtype).max
        if self.truncated:  # a head of the row (head=): its last document may share its score past the head
            same = torch.cat((same, self._last_group_size() > 1), -1)  # one reduction for both
        # the row maximum of its bytes: any(-1) is three times slower on CPU, a sum casts the row first
        return same.view(torch.uint8).amax(-1).view(torch.bool)

    def _last_group_size(self) -> Tensor:
        """``(N, 1)``: the row's real documents scored as the head's last one (``head=``), as bytes in rows
        shorter than 256 (no cast of the byte sum), else int32."""
        hit = self._cache.get("last_group_size")
        if hit is None:
            dtype = torch.uint8 if self.row_length < 256 else torch.int32
            hit = self._cache["last_group_size"] = _row_count(self._same_score(self.length), dtype, keepdim=True)
        return hit

    def _same_score(self, width: int) -> Tensor:
        """``(N, L)`` bool in input order: the row's real documents scored as the document at ranked
        position ``width`` (1-based), itself included (integer keys: the scores' ties are the keys')."""
        hit = self._cache.get(f"same_score_{width}")
        if hit is None:
            if self._int_keys or self._has_padding:
                last = self._preds_in.gather(-1, self.order[:, width - 1 : width])
            else:  # float keys without padding are the scores themselves, in ranked order: no gather
                last = self._sorted_key[:, width - 1 : width]
            hit = self._preds_in == last
            if self._has_padding:  # a padding slot is a group of its own (it never crosses the width)
                hit &= self._valid_in
            self._cache[f"same_score_{width}"] = hit
        return hit

    def tie_bounds(self, width: int | None = None) -> tuple[Tensor, Tensor]:
        """``(start, end)``, ``(N, width)`` int64 (default the whole row): for each of the first
        ``width`` ranked positions the first position of its tie group and one past its last, over
        the WHOLE row (a group may go on past ``width``), from binary searches of the row's sorted
        keys for the head's keys only (no scan, no flip; the cost grows with ``width``, not with the
        row). Each padding slot is a group of its own.

        Example:
            >>> from torch_rankeval.conventions import DEFAULT
            >>> rb = RankedBatch(torch.tensor([[0.2, 0.9, 0.2, 0.1]]), torch.tensor([[1, 0, 0, 1]]), None, DEFAULT)
            >>> rb.tie_bounds()
            (tensor([[0, 1, 1, 3]]), tensor([[1, 3, 3, 4]]))
            >>> rb.tie_bounds(2)   # the group at position 1 ends past the head
            (tensor([[0, 1]]), tensor([[1, 3]]))
        """
        width = self.length if width is None else min(width, self.length)
        hit = self._cache.get(f"tie_bounds_{width}")
        if hit is not None:
            return hit
        key = self._sorted_key
        ascending = self._cache.get("ascending_key")  # kept for a second width (a cutoff and the whole list)
        if ascending is None:
            if not self._has_padding:
                ascending = -key  # the scores sorted in descending order
            elif self._int_keys:
                ascending = key  # -scores ascending, padding last as the largest integer
            else:  # -scores ascending, NaN (padding) last: searched as +inf
                ascending = torch.nan_to_num(key, nan=float("inf"), posinf=float("inf"))
            self._cache["ascending_key"] = ascending
        query = ascending if width == self.length else ascending[:, :width].contiguous()
        start = torch.searchsorted(ascending, query, side="left")
        end = torch.searchsorted(ascending, query, side="right")
        if self._has_padding:
            # a real key of +inf (a score of -inf) stops at the last real document; padding: groups of one
            valid = self.head("valid", width)
            pos = _table("arange", width, torch.int64, self.device)
            start = torch.where(valid, start, pos)
            end = torch.where(valid, torch.minimum(end, self.head("valid").sum(-1, keepdim=True)), pos + 1)
        if self.truncated:  # a head of the row (head=): its last group ends where the row's documents of its score do
            if width == self.length:  # the ends capped at the head: at the width (TieGroups._crossing_group)
                self._cache[f"tie_ends_inside_{width}"] = end
            last = query == ascending[:, -1:]
            if self._has_padding:
                last &= self.head("valid", width)
            end = torch.where(last, start + self._last_group_size(), end)
        self._cache[f"tie_bounds_{width}"] = start, end
        return start, end

    def assume_no_ties(self) -> None:
        """Use groups of one document (the deterministic formulas): exact for a batch without ties,
        which the caller has checked (:meth:`any_tie`, read in a sync it makes anyway)."""
        if self._groups:
            raise RuntimeError("assume_no_ties() must come before any tie statistics are computed")
        self.averaged = False

    # ------------------------------------------------------------------ per-document inputs
    @property
    def _zero(self) -> Tensor:
        return torch.zeros((), dtype=self.dtype, device=self.device)

    @property
    def _gain(self) -> Callable[[Tensor], Tensor]:
        """The gain function: the caller's (``gain=``), else the convention's."""
        return gain_fn(self.convention.gain) if self._gain_given is None else self._gain_given

    def _doc(self, name: str) -> Tensor | None:
        """Per-document (input order, ``(N, L)``) ``"rel"`` (bool), ``"gains"`` (0 at padding and for
        unjudged documents) or ``"counted"`` (real and judged; None when every document is)."""
        key = f"doc_{name}"
        if key in self._cache:
            return self._cache[key]
        counted = self._cache.get("doc_counted")
        if counted is None and "doc_counted" not in self._cache:
            valid, judged = self._valid_in, self._judged_in
            counted = judged if valid is None else valid if judged is None else valid & judged
            self._cache["doc_counted"] = counted
        if name == "counted":
            return counted
        if name == "rel":
            out = self._is_relevant(self._target_in)
            out = out if counted is None else out & counted
        else:
            target = self._target_in
            if self._exp2_of_int and torch.get_default_dtype() == self.dtype:
                out = torch.exp2(target) - 1  # exp2 of integer grades is in the default float dtype: no cast
            else:
                out = self._gain(target.to(self.dtype))
            out = out if counted is None else torch.where(counted, out, self._zero)
        self._cache[key] = out
        return out

    def ranked(self, x: Tensor, width: int | None = None) -> Tensor:
        """A per-document tensor ``(N, L)`` in ranked order, its first ``width`` positions (default all)."""
        order = self.order if width is None or width >= self.length else self.order[:, :width]
        return x.gather(-1, order)

    def head(self, name: str, width: int | None = None) -> Tensor:
        """The first ``width`` ranked positions (default all) of ``"rel"`` (binary relevance, working
        dtype), ``"gains"`` (0 at padding), ``"valid"`` (bool) or ``"target"`` (grades, working
        dtype, 0 at padding)."""
        width = self.length if width is None else min(width, self.length)
        for w in (self.length, width):  # reuse the full-length copy when there is one
            hit = self._cache.get(f"head_{name}_{w}")
            if hit is not None:
                return hit if w == width else hit[:, :width]
        hit = self._cache[f"head_{name}_{width}"] = self._make_head(name, width)
        return hit

    def _make_head(self, name: str, width: int) -> Tensor:
        if name == "valid":
            if not self._has_padding:
                return torch.ones(self.n_lists, width, dtype=torch.bool, device=self.device)
            head = self._sorted_key[:, :width]
            return head != torch.iinfo(head.dtype).max if self._int_keys else ~torch.isnan(head)
        if name == "judged":
            counted = self._doc("counted")
            return self.head("valid", width) if counted is None else self.ranked(counted, width)
        if name in ("relmask", "gains"):  # the gather of :meth:`ranked`, written out (the hot path)
            doc = "rel" if name == "relmask" else "gains"
            if (
                self._gains_of_grades
                and (not self.averaged or self._level_counts() is not None)
                and f"doc_{doc}" not in self._cache
            ):
                # no tie sums to read the row's gains or relevance (or their crossing group reads a histogram
                # of its grades instead, :meth:`_crossing_total`): the head's from its grades, gathered once for both
                levels = self._level_index is not None  # averaged ties: the levels of the histogram's index
                grades = self._head_levels(width) if levels else self._cache.get(f"head_grades_{width}")
                if grades is None:
                    order = self.order if width >= self.length else self.order[:, :width]
                    grades = self._cache[f"head_grades_{width}"] = self._target_in.gather(-1, order)
                if levels:
                    out = grades >= self._first_relevant_level() if doc == "rel" else self._level_gains().take(grades)
                else:
                    out = self._is_relevant(grades) if doc == "rel" else self._gain(grades.to(self.dtype))
                if not self._has_padding:
                    return out
                valid = self.head("valid", width)
                return out & valid if doc == "rel" else torch.where(valid, out, self._zero)
            order = self.order if width >= self.length else self.order[:, :width]
            return self._doc(doc).gather(-1, order)
        if name == "rel":
            return self.head("relmask", width).to(self.dtype)
        if name == "target":
            t = self.ranked(self._target_in, width).to(self.dtype)
            return torch.where(self.head("valid", width), t, self._zero) if self._has_padding else t
        raise ValueError(f"unknown per-position quantity {name!r}")

    # The full-length ranked views (kept for callers that read whole lists).
    @property
    def valid(self) -> Tensor:
        """``(N, L)`` bool in ranked order: real documents first, padding (NaN key) last."""
        return self.head("valid")

    @property
    def rel(self) -> Tensor:
        """Binary relevance in ranked order (padding and unjudged documents are 0), ``(N, L)``."""
        return self.head("rel")

    @property
    def gains(self) -> Tensor:
        """Gains in ranked order, 0 for padding and unjudged documents, ``(N, L)``."""
        return self.head("gains")

    @property
    def judged(self) -> Tensor:
        """``(N, L)`` bool in ranked order: real documents with a relevance judgment."""
        return self.head("judged")

    @property
    def target(self) -> Tensor:
        """Grades in ranked order (working dtype), 0 for padding, ``(N, L)``."""
        return self.head("target")

    @property
    def positions(self) -> Tensor:
        """1-based ranks ``1..L`` in the working dtype."""
        return _table("ranks", self.length, self.dtype, self.device)

    @property
    def ranked_scores(self) -> Tensor:
        """The scores in ranked order, ``(N, L)`` in the scores' dtype, NaN at padding. Every tie policy
        ranks by score, so tied documents are adjacent (as groups, whatever :attr:`averaged` says)."""
        if self._int_keys:
            scores = self._preds_in.gather(-1, self.order)
            return torch.where(self.head("valid"), scores, float("nan")) if self._has_padding else scores
        key = self._sorted_key
        return -key if self._has_padding else key

    @property
    def discounts(self) -> Tensor:
        """Discounts of ranks ``1..max(L, M)`` in the working dtype."""
        return self.cached("discounts", lambda: self._discounts_in.to(self.dtype))

    def ranks(self, width: int, dtype: torch.dtype | None = None) -> Tensor:
        """The ranks ``1..width`` in ``dtype`` (default: the working dtype), a table kept per process."""
        return _table("ranks", width, dtype or self.dtype, self.device)

    def inverse_ranks(self, width: int) -> Tensor:
        """``1 / rank`` for ranks ``1..width`` in the working dtype."""
        return _table("inverse_ranks", width, self.dtype, self.device)

    def discount_head(self, width: int) -> Tensor:
        """Discounts of ranks ``1..width`` in the working dtype (converted once per table, width and
        dtype: a metric's table is reused over updates)."""
        table = self._discounts_in
        if torch.compiler.is_compiling() or table.requires_grad:
            return table[:width].to(self.dtype)
        entry = _DISCOUNT_HEADS.get(id(table))
        if entry is None or entry[0]() is not table:
            if len(_DISCOUNT_HEADS) > 256:
                _DISCOUNT_HEADS.clear()
            entry = _DISCOUNT_HEADS[id(table)] = (weakref.ref(table), {})
        heads = entry[1]
        head = heads.get((width, self.dtype))
        if head is None:
            head = heads[(width, self.dtype)] = keep_outside(lambda: table[:width].to(self.dtype))
        return head

    # ------------------------------------------------------------------ tie groups
    def groups(self, width: int | None = None) -> TieGroups:
        """Tie-group statistics of the first ``width`` positions (default: all), one
        :class:`TieGroups` per width; a statistic a wider one already holds is sliced from it."""
        width = self.length if width is None else min(width, self.length)
        g = self._groups.get(width)
        if g is None:
            g = self._groups[width] = TieGroups(self, width)
        return g

    def expected(self, x: Tensor, upto: int | None = None, doc: Tensor | None = None) -> Tensor:
        """Expected value of a ranked-order ``x`` ``(N, L)`` at each of the first ``upto`` positions
        over the orders of tied documents (the mean of its tie group). ``doc``: the same quantity per
        document in input order, read only where a tie group goes on past the view (a truncated
        top-k view)."""
        upto = self.length if upto is None else min(upto, self.length)
        if not self.averaged:
            return x[:, :upto]
        g = self.groups(self.length)
        total, _ = g.sums(x, doc, dtype=torch.float64 if x.is_floating_point() else torch.int64)
        return (total[:, :upto] / g.size[:, :upto]).to(self.dtype)

    # ------------------------------------------------------------------ per-query facts
    @property
    def n_relevant(self) -> Tensor:
        """Number of relevant documents of each query, ``(N,)``: given, or counted in the judged set."""

        def make() -> Tensor:
            if self._n_relevant is not None:
                return self._n_relevant.to(self.dtype)
            if self._ideal_target is None:
                return self.n_relevant_in_list
            rel = self._is_relevant(self._ideal_target)
            if self._ideal_valid is not None:
                rel = rel & self._ideal_valid
            return _row_count(rel, self.dtype)

        return self.cached("n_relevant", make)

    @property
    def n_relevant_in_list(self) -> Tensor:
        """Number of relevant documents in each list (retrieved), ``(N,)``."""

        def make() -> Tensor:
            prefix = self._cache.get(f"row_prefix_relmask_{self.dtype}")  # the tie statistics' prefix sums
            if prefix is not None:
                return prefix[:, -1]
            if self._levels is not None:  # the grades' histogram (:meth:`_level_counts`): those >= the threshold
                at_most, first = self._levels[0], self._first_relevant_level()
                n_real = at_most[:, -1]
                below = min(first, at_most.shape[-1]) - 1  # the last level under the threshold
                return (n_real if below < 0 else n_real - at_most[:, below]).to(self.dtype)
            # AP's running counts (kernels/ap.py), when they cover the row
            counts = None if self.truncated else self._cache.get(f"rel_counts_{self.length}")
            return _row_count(self._doc("rel"), self.dtype) if counts is None else counts[:, -1].to(self.dtype)

        return self.cached("n_rel_list", make)

    @property
    def relevant_count(self) -> Tensor:
        """:attr:`n_relevant` as exact counts in the working dtype or in float64, whichever the batch
        holds (no cast): for a comparison or a quotient rounded to the working dtype."""
        if self._n_relevant is None and self._ideal_target is None and "n_rel_list" not in self._cache:
            prefix = self._cache.get("row_prefix_relmask_float64")  # the pair's prefix sums
            if prefix is not None:
                return prefix[:, -1]
        return self.n_relevant

    def _row_prefix_pair(self) -> Tensor:
        """``(2, N, L + 1)`` float64 exclusive prefix sums of the ranked gains and relevance (see
        :meth:`_row_prefix`): one gather and one cumulative sum for both."""
        hit = self._cache.get("row_prefix_pair")
        if hit is None:
            pair = torch.stack((self._doc("gains"), self._doc("rel")))  # the relevance promoted to the gains' dtype
            ranked = pair.gather(-1, self.order.expand(2, -1, -1))
            if torch.compiler.is_compiling():
                hit = torch.constant_pad_nd(ranked.cumsum(-1, dtype=torch.float64), (1, 0))
            else:
                hit = torch.empty(2, self.n_lists, self.length + 1, dtype=torch.float64, device=self.device)
                hit.narrow(2, 0, 1).zero_()
                torch.cumsum(ranked, -1, dtype=torch.float64, out=hit.narrow(2, 1, self.length))
            self._cache["row_prefix_pair"] = hit
            self._cache["row_prefix_gains_float64"], self._cache["row_prefix_relmask_float64"] = hit[0], hit[1]
            self._cache.setdefault(f"head_gains_{self.length}", ranked[0])
        return hit

    def _row_prefix(self, name: str, dtype: torch.dtype) -> Tensor:
        """``(N, L + 1)`` exclusive prefix sums of the ranked row of ``name`` accumulated in ``dtype``:
        ``[:, q]`` sums the first ``q`` positions."""
        key = f"row_prefix_{name}_{dtype}"
        hit = self._cache.get(key)
        if hit is None:
            x = self._cache.get(f"head_{name}_{self.length}")
            if x is None:  # the gather of :meth:`head` written out (the hot path)
                x = self._doc("rel" if name == "relmask" else name).gather(-1, self.order)
                self._cache[f"head_{name}_{self.length}"] = x
            if torch.compiler.is_compiling():
                hit = torch.constant_pad_nd(x.cumsum(-1, dtype=dtype), (1, 0))
            else:  # into a fresh buffer whose first column is zeroed: no padded copy of the whole row
                hit = torch.empty(self.n_lists, self.length + 1, dtype=dtype, device=self.device)
                hit.narrow(1, 0, 1).zero_()
                torch.cumsum(x, -1, dtype=dtype, out=hit.narrow(1, 1, self.length))
            self._cache[key] = hit
        return hit

    @property
    def n_valid(self) -> Tensor:
        """Number of real (non-padding) documents of each list, ``(N,)``."""

        def make() -> Tensor:
            if self._valid_in is None:
                return torch.full((self.n_lists,), float(self.row_length), dtype=self.dtype, device=self.device)
            return _row_count(self._valid_in, self.dtype)

        return self.cached("n_valid", make)

    @property
    def ideal_gains(self) -> Tensor:
        """Gains of the judged set that defines the ideal ranking (not sorted), ``(N, M)``."""
        if self._ideal_target is None:
            return self._doc("gains")
        hit = self._cache.get("ideal_gains")
        if hit is None:
            g = self._gain(self._ideal_target.to(self.dtype))
            hit = g if self._ideal_valid is None else torch.where(self._ideal_valid, g, self._zero)
            self._cache["ideal_gains"] = hit
        return hit

    @property
    def ideal_target(self) -> Tensor | None:
        """The judged set's grades ``(N, M)`` when given (``ideal_target=``), else None (the list's own)."""
        return self._ideal_target

    @property
    def ideal_valid(self) -> Tensor | None:
        """``(N, M)`` bool, the real entries of :attr:`ideal_target`; None when every entry is (or none given)."""
        return self._ideal_valid

    def ideal_top(self, ks: tuple[int | None, ...]) -> Tensor:
        """Judged gains in decreasing order, truncated to the largest finite cutoff when possible.

        Padding comes after every real document: it must not outrank a real document with a
        negative gain (linear gain on negative grades, debiased gains); its slots hold 0."""
        own = self._ideal_target is None
        m = self.row_length if own else self._ideal_target.shape[-1]
        top = m if None in ks else min(max(ks), m)
        key = f"ideal_top{top}"
        if key in self._cache:
            return self._cache[key]
        valid = self._valid_in if own else self._ideal_valid
        levels = self._level_counts() if own and self._gains_of_grades else None
        if levels is not None:  # the i-th best grade: lo + the levels m with at most n - i grades <= lo + m
            at_most, low = levels  # (m = hi - lo never counts: all n grades are <= hi)
            need = at_most[:, -1:] - _table("ranks", top, torch.int64, self.device)
            best = self._level_gains().take(torch.searchsorted(at_most, need, right=True))  # padding: zeroed below
        elif self._gains_of_grades:  # see _GPU_PATH_MAX_CPU: the grades' order is the gains'
            grades = self._target_in if own else self._ideal_target
            if valid is not None:
                grades = torch.where(valid, grades, torch.iinfo(grades.dtype).min)
            best = grades.sort(-1, descending=True).values if top == m else grades.topk(top, dim=-1).values
            best = self._gain(best.to(self.dtype))  # the padding's slots are zeroed below
        else:
            gains = self._doc("gains") if own else self.ideal_gains
            if valid is not None:
                gains = torch.where(valid, gains, torch.full((), float("-inf"), dtype=self.dtype, device=self.device))
            if self._int_sort and gains.dtype in _INT_OF:  # see _int_sort: positions from the integer keys
                ints = _int_key(gains)
                at = ints.sort(-1, descending=True).indices if top == m else ints.topk(top, dim=-1).indices
                best = gains.gather(-1, at)
            else:
                best = gains.sort(-1, descending=True).values if top == m else gains.topk(top, dim=-1).values
        if valid is not None:
            slots = torch.arange(top, device=self.device)
            n_real = valid.sum(-1, keepdim=True) if levels is None else levels[0][:, -1:]
            best = torch.where(slots < n_real, best, self._zero)
        self._cache[key] = best
        return best

    def ideal_discounted(self, ks: tuple[int | None, ...]) -> Tensor:
        """The ideal DCG at each cutoff, ``(N, K)``: :meth:`discounted_prefix` of :meth:`ideal_top`.

        Where the batch has its grades' histogram (:meth:`_level_counts`: a large CPU batch, integer
        grades under the exp2 or linear gain, all judged), from the histogram alone: with ``c_m`` the
        documents graded at least level ``m`` and ``D(j)`` the sum of the first ``j`` discounts,
        ``IDCG@k = sum_m (gain_m - gain_{m-1}) D(min(c_m, k))`` (the best grades fill the first
        positions: level ``m``'s gain step counts at each of the first ``c_m``): one subtraction, one
        lookup in a constant ``(L + 1, K)`` table and one product, where the ideal's top takes a
        binary search, a lookup and a product of its own. The same value up to the float rounding
        of the sum's order.

        Example:
            >>> from torch_rankeval.conventions import DEFAULT
            >>> rb = RankedBatch(torch.rand(1, 4), torch.tensor([[0, 2, 1, 2]]), None, DEFAULT)
            >>> rb.ideal_discounted((1, 2, None))          # 3, 3 + 3 / log2(3), + 1 / 2
            tensor([[3.0000, 4.8928, 5.3928]])
            >>> rb._cpu_path = rb._gains_of_grades = rb.host_reads = True    # as on a batch past 2^13 documents
            >>> rb.ideal_discounted((1, 2, None))          # from the histogram of the grades
            tensor([[3.0000, 4.8928, 5.3928]])
        """
        levels = None
        if type(self).ideal_top is RankedBatch.ideal_top and self._gains_of_grades and self._ideal_target is None:
            levels = self._level_counts()
        if levels is None:
            ideal = self.ideal_top(ks)
            m = ideal.shape[-1]
            idx = []
            for k in ks:  # a loop, not a comprehension: no call of its own (an update's hot path)
                idx.append(m - 1 if k is None else min(k, m) - 1)
            return self.discounted_prefix(ideal, idx)
        at_most, low = levels
        n = self.row_length
        cuts = []
        for k in ks:
            cuts.append(n if k is None else min(k, n))
        table = self._discount_tables(("ideal_levels", tuple(cuts), n), lambda d: _prefix_table(d, cuts, n))
        above = at_most[:, -1:] - at_most  # (N, levels): [:, m] the documents graded above level m (c_{m+1})
        steps = self._level_steps()  # (levels, 1)
        # one cutoff: the (L + 1, 1) table read as a vector, (N, levels) @ (levels, 1); several: (N, levels, K)
        out = table.take(above) @ steps if len(cuts) == 1 else steps[:, 0] @ table[above]
        if low:  # the lowest level's own gain, at each of the list's first c_0 = n real documents
            out = out + self._level_gains()[0] * table[at_most[:, -1]]
        return out

    def _level_steps(self) -> Tensor:
        """``(levels, 1)``: the gain step from each level of :meth:`_level_counts` to the next
        (``gain_{m+1} - gain_m``), 0 past the last, in the working dtype (:meth:`ideal_discounted`)."""
        hit = self._cache.get("level_steps")
        if hit is None:

            def build() -> Tensor:
                gains = self._level_gains()
                return torch.constant_pad_nd(gains[1:] - gains[:-1], (0, 1)).unsqueeze(-1)

            hit = self._cache["level_steps"] = _cached(("level_steps", *self._level_key()), build)
        return hit

    def grade_range(self) -> tuple[int, int] | None:
        """``(low, high)``, the smallest and largest grade of the batch's real documents (the padding's
        read as 0), read from memory once per batch: where :attr:`host_reads` (a CPU batch in eager
        mode) and the grades are integers, every document judged and no ``ideal_target`` (the judged
        grades are the list's). Read by :meth:`_level_counts` and by ``validate_args=True`` (the
        exp2 gain's grade bounds, and whether the gain sums can overflow). None elsewhere.

        Example:
            >>> from torch_rankeval.conventions import DEFAULT
            >>> valid = torch.tensor([[True, True, False], [True, True, True]])
            >>> rb = RankedBatch(torch.rand(2, 3), torch.tensor([[0, 3, -100], [2, 1, 0]]), valid, DEFAULT)
            >>> rb.host_reads = True                        # as prepare() sets it on a CPU batch in eager mode
            >>> rb.grade_range()                            # the padding's -100 reads as 0
            (0, 3)
        """
        if not self._range_read:
            self._range_read = True  # once per batch, made or not
            if self.host_reads and self._threshold_int and self._judged_in is None and self._ideal_target is None:
                grades, valid = self._target_in, self._valid_in
                if valid is not None:  # the padding's grades (anything) take 0: inside the range, counted nowhere
                    grades = torch.where(valid, grades, 0)
                low, high = torch.aminmax(grades)  # host memory: no device to wait for
                self._range, self._range_grades = (int(low), int(high)), grades
        return self._range

    def _level_counts(self) -> tuple[Tensor, int] | None:
        """A CPU batch in eager mode (:attr:`host_reads`) with integer grades, all judged: its grades'
        range ``lo .. hi``, read from memory, and ``(at_most (N, hi - lo + 1) int64, lo)``, ``at_most[:, m]``
        the list's real documents graded at most ``lo + m`` (its last column: the real documents): one
        histogram of the grades (a scatter-add) instead of a ``torch.topk`` of each row (3-4 times its
        cost at 10,000 x 100), read by :meth:`ideal_discounted`, :meth:`ideal_top` and
        :attr:`n_relevant_in_list`. The padding's grades read as 0 (a level more at most, counted
        nowhere). None elsewhere, and where the range is wider than the row (its histogram would
        outgrow the batch).

        Example:
            >>> from torch_rankeval.conventions import DEFAULT
            >>> rb = RankedBatch(torch.rand(2, 5), torch.tensor([[0, 3, 1, 1, 0], [2, 2, 0, 1, 3]]), None, DEFAULT)
            >>> rb._cpu_path = rb._gains_of_grades = rb.host_reads = True    # as on a batch past 2^13 documents
            >>> rb._level_counts()                                           # grades 0..3
            (tensor([[2, 4, 4, 5],
                    [1, 2, 4, 5]]), 0)
            >>> rb.ideal_top((3,))                                           # the top 3 grades' exp2 gains
            tensor([[7., 1., 1.],
                    [7., 3., 3.]])
        """
        if self._levels_read or not (self.host_reads and self._gains_of_grades and self._ideal_target is None):
            return self._levels
        self._levels_read = True  # once per batch, made or not
        low, high = self.grade_range()  # type: ignore[misc]  # read: the conditions above include its own
        grades, valid, self._range_grades = self._range_grades, self._valid_in, None
        if grades is None or high - low >= self.row_length:
            return None
        index = grades if grades.dtype == torch.int64 else grades.long()
        index = index - low if low else index
        if self.averaged:  # the tie group crossing a cutoff: its own histogram (:meth:`_crossing_total`)
            self._level_index = index
        small = self.row_length < 256  # byte counts: the padding flags are the scatter's source as they are
        dtype = torch.uint8 if small else torch.int32
        count = torch.zeros(self.n_lists, high - low + 1, dtype=dtype, device=self.device)
        if valid is None:
            ones = device_constant((1,), dtype, self.device).expand(index.shape)
        else:
            ones = valid.view(torch.uint8) if small else valid.to(torch.int32)
        self._levels = count.scatter_add_(1, index, ones).cumsum(-1), low  # int64: the ideal DCG's lookup index
        return self._levels

    def _level_gains(self) -> Tensor:
        """The gains of the levels of :meth:`_level_counts` (grades ``lo .. hi``) in the working dtype, made once."""
        hit = self._cache.get("level_gains")
        if hit is None:
            at_most, low = self._levels  # type: ignore[misc]  # made: its callers read it

            def build() -> Tensor:
                grades = _table("arange", at_most.shape[-1], self.dtype, self.device)
                return self._gain(grades + low if low else grades)

            hit = self._cache["level_gains"] = _cached(("level_gains", *self._level_key()), build)
        return hit

    def _level_key(self) -> tuple:
        """What the levels' tables (:meth:`_level_gains`, :meth:`_level_pairs`) depend on: the gain (the
        histogram is made for the named ``"exp2"`` and ``"linear"`` only, ``_gains_of_grades``), the grade
        range and the first relevant level. Kept per key, the same in every batch of that grade range (no
        operations per batch); made once per batch."""
        hit = self._cache.get("level_key")
        if hit is None:
            at_most, low = self._levels  # type: ignore[misc]
            first = self._first_relevant_level()
            hit = (self.convention.gain, low, at_most.shape[-1], first, self.dtype, str(self.device))
            self._cache["level_key"] = hit
        return hit

    def _first_relevant_level(self) -> int:
        """The first level of :meth:`_level_counts` whose grade is relevant (may lie past the last level):
        for integer grades ``t >= thr`` exactly when ``t >= ceil(thr)``."""
        thr = self.convention.relevance_threshold
        return max((1 if thr is None else math.ceil(thr)) - self._levels[1], 0)  # type: ignore[index]

    def _crossing_total(self, name: str, width: int, same: Tensor) -> Tensor | None:
        """``(N, 1)``: over the row's documents in ``same`` (``(N, L)`` bool, input order: the tie group
        of ranked position ``width``, which may go on past it), their gain sum (``name="gains"``, in
        the working dtype, as the row's gains were summed) or relevant count (``"relmask"``, int32),
        from one histogram of their grades (a scatter-add into the levels of :meth:`_level_counts`,
        whose index it reuses) instead of the row's gains or relevance (two to four row-sized
        operations each). None where that histogram is not made (:meth:`_level_counts`).

        Example:
            >>> from torch_rankeval.conventions import DEFAULT
            >>> rb = RankedBatch(torch.tensor([[0.9, 0.5, 0.5, 0.5]]), torch.tensor([[0, 3, 1, 0]]), None, DEFAULT)
            >>> rb._cpu_path = rb._gains_of_grades = rb.host_reads = True    # as on a batch past 2^13 documents
            >>> same = torch.tensor([[False, True, True, True]])            # the group at ranked position 2
            >>> rb._crossing_total("gains", 2, same), rb._crossing_total("relmask", 2, same)
            (tensor([[8.]]), tensor([[2]], dtype=torch.int32))
        """
        if self._level_counts() is None or self._level_index is None:
            return None
        count = self._crossing_levels(width, same)
        if name == "gains":  # in the working dtype, as the row's gains were summed
            return (count.to(self.dtype) @ self._level_gains()).unsqueeze(-1)
        return count[:, self._first_relevant_level() :].sum(-1, keepdim=True, dtype=torch.int32)

    def _crossing_levels(self, width: int, same: Tensor) -> Tensor:
        """``(N, levels)``: the histogram of the grades of the row's documents in ``same`` (the tie group
        of ranked position ``width``) over the levels of :meth:`_level_counts` (made: the caller checked)."""
        key = f"crossing_levels_{width}"
        count = self._cache.get(key)
        if count is None:
            levels = self._levels[0].shape[-1]  # type: ignore[index]
            small = self.row_length < 256  # byte counts, as the row's histogram
            src = same.view(torch.uint8) if small else same.to(torch.int32)
            zeros = torch.zeros(self.n_lists, levels, dtype=src.dtype, device=self.device)
            count = self._cache[key] = zeros.scatter_add_(1, self._level_index, src)  # type: ignore[arg-type]
        return count

    def _level_pairs(self) -> Tensor | None:
        """``(2, levels)`` float64: each level's gain (:meth:`_level_gains`, made in the working dtype) and
        whether it is relevant, where the batch has its grades' histogram (:meth:`_crossing_total`); else None."""
        if self._level_counts() is None or self._level_index is None:
            return None
        hit = self._cache.get("level_pairs")
        if hit is None:

            def build() -> Tensor:
                gains = self._level_gains()
                relevant = _table("arange", gains.shape[0], torch.float64, self.device) >= self._first_relevant_level()
                return torch.stack((gains.to(torch.float64), relevant.to(torch.float64)))

            hit = self._cache["level_pairs"] = _cached(("level_pairs", *self._level_key()), build)
        return hit

    def _head_levels(self, width: int) -> Tensor:
        """``(N, width)`` int64: the levels (:meth:`_level_counts`) of the first ``width`` ranked documents' grades."""
        key = f"head_levels_{width}"
        hit = self._cache.get(key)
        if hit is None:
            order = self.order if width >= self.length else self.order[:, :width]
            hit = self._cache[key] = self._level_index.gather(-1, order)  # type: ignore[union-attr]
        return hit

    # ------------------------------------------------------------------ cutoffs
    def _is_relevant(self, t: Tensor) -> Tensor:
        """Binary relevance of grades ``t`` (the ranked target's, the judged set's): the default
        threshold follows the dtype of the ranked target."""
        thr = self.convention.relevance_threshold
        if thr is not None:
            return t >= thr
        return t >= 1 if self._threshold_int else t > 0

    def cutoff_index(self, ks: tuple[int | None, ...]) -> list[int]:
        """0-based last position inside each cutoff (``None`` = whole list; k beyond L = L)."""
        idx = []
        for k in ks:  # a loop, not a comprehension: no call of its own (an update's hot path)
            idx.append(self.length - 1 if k is None else min(k, self.length) - 1)
        return idx

    def span(self, ks: tuple[int | None, ...]) -> int:
        """How many leading positions the cutoffs need."""
        return max(self.cutoff_index(ks)) + 1

    def cumulative(self, x: Tensor, ks: tuple[int | None, ...], *, dtype: torch.dtype | None = None) -> Tensor:
        """``sum(x[:, :k])`` for each cutoff, ``(N, K)``; ``x`` may hold only the first ``span(ks)``
        positions. A plain sum when every cutoff covers the whole of ``x``; accumulated in ``dtype``
        (default: ``x``'s)."""
        idx = self.cutoff_index(ks)
        if all(i == x.shape[-1] - 1 for i in idx):
            return x.sum(-1, keepdim=True, dtype=dtype).expand(-1, len(idx))
        return prefix_sums(x, idx, None if dtype == x.dtype else dtype)

    def cumulative_per_rank(self, x: Tensor, ks: tuple[int | None, ...]) -> Tensor:
        """``sum_{p <= k} x_p / p`` for each cutoff, ``(N, K)`` in ``x``'s dtype, for ``x`` holding the first
        ``span(ks)`` positions (or more): one product with a constant matrix of inverse ranks.

        Example:
            >>> from torch_rankeval.conventions import DEFAULT
            >>> rb = RankedBatch(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[1, 1, 0]]), None, DEFAULT)
            >>> rb.cumulative_per_rank(torch.tensor([[1.0, 2.0, 3.0]]), (1, None))   # 1 and 1 + 2/2 + 3/3
            tensor([[1., 3.]])
        """
        idx = self.cutoff_index(ks)
        width = max(idx) + 1
        key = ("per_rank_cutoffs", width, tuple(idx), x.dtype, str(x.device))

        def build() -> Tensor:
            return _cutoff_matrix(_table("inverse_ranks", width, torch.float64, x.device), idx).to(x.dtype)

        return (x if x.shape[-1] == width else x[:, :width]) @ _cached(key, build)

    def expected_in_top(self, name: str, ks: tuple[int | None, ...]) -> Tensor:
        """Expected number of relevant documents (``"rel"``) or expected gain (``"gains"``) in the top
        ``k`` over the tie orders, ``(N, K)``: what ranks above the tie group the cutoff ends in, plus
        that group's share for its slots inside the cutoff."""
        idx = self.cutoff_index(ks)

        def make() -> Tensor:
            g = self.groups(self.span(ks))
            total, before = ("rel_count", "rel_count_before") if name == "rel" else ("gain", "gain_before")
            if not self.averaged:
                return (g.at(before, idx) + g.at(total, idx)).to(self.dtype)
            if g.width > max(64, 8 * len(idx)):  # a long head: the cutoffs' columns first
                inside = self.constant([i + 1 for i in idx]) - g.at("start", idx)
                return (g.at(before, idx) + inside * g.at(total, idx) / g.at("size", idx)).to(self.dtype)
            # a short head: at every position, then the cutoffs' columns (fewer operations): what ranks
            # above the group plus the group's mean times its slots up to the position
            start = g._start_i  # the int bounds where there are (no cast)
            inside = _table("ranks", g.width, torch.int64, self.device) - start if start is not None else None
            if inside is None:
                inside = self.ranks(g.width) - g.start
            mean = g.mean(name) if name == "rel" else g.gain / g.size
            return take_columns(getattr(g, before) + inside * mean, idx).to(self.dtype)

        return self.cached(f"expected_in_top_{name}_{idx}", make)

    def expected_relevant(self, ks: tuple[int | None, ...]) -> Tensor:
        """Expected number of relevant documents in the top ``k``, ``(N, K)``."""
        return self.expected_in_top("rel", ks)

    def discounted_top(self, name: str, ks: tuple[int | None, ...]) -> Tensor:
        """Expected ``sum_{p < k} discount_p x_p`` over the orders of tied documents for each cutoff,
        ``(N, K)``, ``x`` the ranked ``"gains"`` (DCG@k) or ``"rel"``.

        The head's values (with averaged ties: each position's group mean, the group read over the whole
        row) times a constant ``(W, K)`` matrix of the discounts inside each cutoff: ``(N, W)`` work, not
        ``(N, L)`` (a per-document form over the whole row costs more than the sort on CPU).

        Example:
            >>> from torch_rankeval.conventions import DEFAULT
            >>> rb = RankedBatch(torch.tensor([[0.9, 0.5, 0.5]]), torch.tensor([[0, 1, 0]]), None, DEFAULT)
            >>> rb.discounted_top("gains", (1, 2, None))   # the relevant document is at rank 2 or 3
            tensor([[0.0000, 0.3155, 0.5655]])
        """
        idx = []
        for k in ks:  # :meth:`cutoff_index` written out (no call of its own: an update's hot path)
            idx.append(self.length - 1 if k is None else min(k, self.length) - 1)
        width = max(idx) + 1
        x = self.groups(width).mean(name) if self.averaged else self.head(name, width)
        matrix = self._discount_tables(("matrix", tuple(idx), width), lambda d: _cutoff_matrix(d[:width], idx))
        self._cache[f"cutoff_discounts_{idx}_{width}"] = matrix  # for the ideal's prefix (discounted_prefix)
        return x @ matrix

    def discounted_prefix(self, x: Tensor, idx: list[int]) -> Tensor:
        """``sum_{p <= i} discount_p x_p`` for each column index ``i`` of ``idx``, ``(N, K)``, for ``x``
        ``(N, m)`` in ranked order (an ideal ranking's gains): one product with a constant matrix."""
        m = x.shape[-1]
        if m > self.length and type(self).discount_head is not RankedBatch.discount_head:
            head = self.discount_head(m)
            if head.ndim != 1:  # per-row discounts (a top-k view's ideal tail)
                return prefix_sums(x * head, idx)
        matrix = self._cache.get(f"cutoff_discounts_{idx}_{m}")  # the DCG's own, when it reads as far
        if matrix is None:
            matrix = self._discount_tables(("matrix", tuple(idx), m), lambda d: _cutoff_matrix(d[:m], idx))
        return x @ matrix

    def _discount_tables(self, key: tuple, build: Callable[[Tensor], Tensor]) -> Tensor:
        """A constant table built from the discount table by ``build`` (given it in float64), in the
        working dtype, kept per discount table (a metric's buffer is reused over updates)."""
        table = self._discounts_in
        dtype = self.dtype if key[0] in ("matrix", "ideal_levels") else torch.float64
        key = (*key, self.dtype, self.length)
        if torch.compiler.is_compiling() or table.requires_grad:
            return build(table.to(torch.float64)).to(dtype)
        entry = _DISCOUNT_HEADS.get(id(table))
        if entry is None or entry[0]() is not table:
            if len(_DISCOUNT_HEADS) > 256:
                _DISCOUNT_HEADS.clear()
            entry = _DISCOUNT_HEADS[id(table)] = (weakref.ref(table), {})
        out = entry[1].get(key)
        if out is None:
            out = entry[1][key] = keep_outside(lambda: build(table.to(torch.float64)).to(dtype))
        return out

    def constant(self, values: list[float] | list[int], dtype: torch.dtype | None = None) -> Tensor:
        """A small constant tensor (cutoffs, cutoff positions) on the batch's device, built once per
        process and device rather than per call."""
        return device_constant(tuple(values), dtype or self.dtype, self.device)

    def cached(self, name: str, fn: Callable[[], Tensor]) -> Tensor:
        if name not in self._cache:
            self._cache[name] = fn()
        return self._cache[name]


def _cutoff_matrix(discounts: Tensor, idx: list[int]) -> Tensor:
    """``(W, K)``: ``M[p, j] = discounts[p]`` for the positions ``p <= idx[j]``, 0 past them."""
    width = discounts.shape[0]
    inside = torch.arange(width, device=discounts.device).unsqueeze(-1) <= torch.tensor(idx, device=discounts.device)
    return discounts.unsqueeze(-1) * inside


def _prefix_table(discounts: Tensor, cuts: list[int], n: int) -> Tensor:
    """``(n + 1, K)``: ``T[c, j]``, the sum of the first ``min(c, cuts[j])`` discounts (``cuts[j] <= n``;
    the table holds at least ``max(cuts)`` discounts)."""
    prefix = torch.constant_pad_nd(discounts[: max(cuts)].cumsum(0), (1, 0))
    counts = torch.arange(n + 1, device=discounts.device).unsqueeze(-1)
    return prefix[torch.minimum(counts, torch.tensor(cuts, device=discounts.device))]


def relevant(t: Tensor, convention: Convention) -> Tensor:
    """Binary relevance of grades: ``t >= relevance_threshold``, by default ``t >= 1`` for integer
    grades and ``t > 0`` for float or bool ones.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> relevant(torch.tensor([0, 1, 2]), DEFAULT), relevant(torch.tensor([0.0, 0.5]), DEFAULT)
        (tensor([False,  True,  True]), tensor([False,  True]))
    """
    thr = convention.relevance_threshold
    if thr is not None:
        return t >= thr
    return t >= 1 if not t.is_floating_point() and t.dtype != torch.bool else t > 0


def _row_count(mask: Tensor, dtype: torch.dtype, *, keepdim: bool = False) -> Tensor:
    """The True entries of each row of a bool ``mask`` (last dimension), counted in ``dtype``: the row
    summed as bytes (a bool row's sum casts the row to int64 first, or to ``dtype``; bytes are read once).
    A large CPU batch (past ``_GPU_PATH_MAX_CPU``) with rows shorter than 256 sums them in bytes too (no
    count can wrap; half the time of an int32 sum), then casts the ``(N,)`` counts.

    Example:
        >>> _row_count(torch.tensor([[True, False, True], [False, False, False]]), torch.int32).tolist()
        [2, 0]
    """
    if mask.shape[-1] < 256 and mask.numel() > _GPU_PATH_MAX_CPU and mask.device.type == "cpu":
        counts = mask.view(torch.uint8).sum(-1, keepdim=keepdim, dtype=torch.uint8)
        return counts if dtype == torch.uint8 else counts.to(dtype)
    return mask.view(torch.uint8).sum(-1, keepdim=keepdim, dtype=dtype)


_INT_OF = {
    torch.float32: torch.int32,
    torch.float64: torch.int64,
    torch.bfloat16: torch.int16,
    torch.float16: torch.int16,
}


def _int_key(x: Tensor) -> Tensor:
    """Integers in the order of the floats ``x`` (same width): the bits of a non-negative float
    already are; a negative one's magnitude is negated. ``0.0`` and ``-0.0`` share the key 0; a
    positive NaN is above ``+inf``.

    Example:
        >>> _int_key(torch.tensor([-2.0, -0.0, 0.0, 1.5, float("inf")])).argsort().tolist()
        [0, 1, 2, 3, 4]
        >>> _int_key(torch.tensor([-0.0, 0.0])).tolist()
        [0, 0]
    """
    bits = x.view(_INT_OF[x.dtype])
    key = torch.iinfo(bits.dtype).min - bits  # the negated magnitude (read where the sign bit is set)
    return torch.where(bits < 0, key, bits, out=key)  # in place: one row-sized temporary less


def _rank(
    preds: Tensor,
    target: Tensor,
    valid: Tensor | None,
    ties: str,
    topk_k: int | None = None,
    int_keys: bool = False,
    head: int | None = None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Order each list by descending score, padding last, ties per the policy (``"first"`` and the
    grade tie-breaks use stable sorts: among equal keys the earlier input comes first; the torch
    policies call torchmetrics' own torch function, see :func:`_torch_order`).

    Returns the permutation, the sort key in ranked order and the key of each document in input
    order: equal keys mean tied scores, NaN marks padding. Without padding the key is the score
    itself, sorted descending; with padding it is ``-score`` with NaN at the padding, sorted
    ascending (NaN sorts last). With ``int_keys`` (see ``RankedBatch._int_sort``), ``"average"`` and
    ``"first"`` sort the integer keys of those floats instead (:func:`_int_key`; the padding's key is
    then the dtype's largest integer): the same order, the same ties; the input-order key is then not
    kept past the sort (None). ``head`` (``"average"`` only): rank only the first ``head`` positions,
    with ``torch.topk`` of the float keys above (as fast as of their integer keys, and without the three
    row-sized operations that make those; see ``RankedBatch(head=)``); the input-order key is None.
    """
    descending = valid is None
    if head is not None:  # the float scores themselves: torch.topk reads them as fast as their integer keys
        key = preds if valid is None else torch.where(valid, -preds, float("nan"))  # NaN: padding, last
        sorted_key, order = torch.topk(key, head, dim=-1, largest=descending)
        return order, sorted_key, None
    if int_keys and ties in ("average", "first"):
        # the scores' bits, made monotone, are the key (_int_key); padding: the largest integer, sorted last
        key = _int_key(preds if valid is None else -preds)
        if valid is not None:
            key = torch.where(valid, key, torch.iinfo(key.dtype).max)
        sorted_key, order = torch.sort(key, dim=-1, descending=descending, stable=ties == "first")
        return order, sorted_key, None  # RankedBatch compares the scores themselves where it needs this key
    key = preds
    if valid is not None:
        key = torch.where(valid, -preds, torch.full((), float("nan"), dtype=preds.dtype, device=preds.device))
    if ties in ("average", "first"):
        # Averaged values do not depend on the order inside a tie group, so the (faster) unstable
        # sort serves them; "first" needs the input order among equal scores.
        sorted_key, order = torch.sort(key, dim=-1, descending=descending, stable=ties == "first")
        return order, sorted_key, key
    if ties in ("torch_topk", "torch_argsort"):
        order = _torch_order(preds, valid, ties, topk_k)
        return order, key.gather(-1, order), key
    # Pessimistic: tied documents in increasing grade; optimistic: decreasing.
    grades = target.to(torch.float32) if target.dtype == torch.bool else target
    pre = torch.sort(grades, dim=-1, descending=ties == "optimistic", stable=True).indices
    sorted_key, inner = torch.sort(key.gather(-1, pre), dim=-1, descending=descending, stable=True)
    return pre.gather(-1, inner), sorted_key, key


def _torch_order(preds: Tensor, valid: Tensor | None, ties: str, topk_k: int | None) -> Tensor:
    """torchmetrics' order (``ties="torch_topk"`` / ``"torch_argsort"``): the permutation that
    ``torch.topk(min(k, n), sorted=True)`` (then the rest by score) or ``torch.argsort(descending=True)``
    gives on each list's own float32 scores, its ``n`` real documents in input order, on the
    scores' device, as torchmetrics calls them per query.

    Among tied scores these orders depend on the length of the tensor sorted (on CPU, ``torch.sort``
    is an insertion sort up to 16 elements and an introsort or SIMD sort beyond; ``topk`` a partial
    sort or ``nth_element`` by ``k``), so padding a list changes them: a padded row cannot be
    sorted as it is. Rows of equal length are sorted together in one 2-D call (each row of a
    2-D ``topk`` / ``argsort`` is ordered as the same 1-D call orders it, checked for lengths 1-200
    in tests/test_ties.py), one call per distinct length: with padding this reads the lengths on
    the host (a sync, a loop over lengths, not queries), which only these two policies do.
    """
    n_lists, length = preds.shape
    device = preds.device
    x = preds.to(torch.float32)  # torchmetrics casts scores to float32 before ranking
    if valid is None:
        return _torch_rows(x, ties, topk_k)
    if torch.compiler.is_compiling():
        raise NotImplementedError(
            f"ties={ties!r} (torchmetrics' tie order) on padded lists reads their lengths on the host and cannot "
            "run under torch.compile: pass lists without padding (no mask), or compile=False"
        )
    compact = torch.sort((~valid).to(torch.uint8), dim=-1, stable=True).indices  # real documents first
    x = x.gather(-1, compact)
    lengths = valid.sum(-1)
    out = torch.arange(length, device=device).expand(n_lists, length).clone()  # padding keeps its place
    for n in torch.unique(lengths).tolist():  # host sync: torch policies only (see above)
        if n == 0:
            continue
        rows = (lengths == n).nonzero().squeeze(1)
        out[rows, :n] = _torch_rows(x.index_select(0, rows)[:, :n].contiguous(), ties, topk_k)
    return compact.gather(-1, out)


def _torch_rows(x: Tensor, ties: str, topk_k: int | None) -> Tensor:
    """The torch order of each row of ``x`` (rows of one length ``n``, no padding) as a full permutation."""
    n = x.shape[-1]
    if ties == "torch_argsort":
        return torch.argsort(x, dim=-1, descending=True)
    m = n if topk_k is None else min(topk_k, n)
    head = x.topk(m, dim=-1, sorted=True).indices
    if m == n:
        return head
    # beyond torch's top m (no measure reads it): the rest by descending score, ties in input order
    by_score = torch.sort(x, dim=-1, descending=True, stable=True).indices
    chosen = torch.zeros_like(x, dtype=torch.bool).scatter_(-1, head, True).gather(-1, by_score)
    rest = by_score.gather(-1, torch.sort(chosen.to(torch.uint8), dim=-1, stable=True).indices[:, : n - m])
    return torch.cat([head, rest], dim=-1)
