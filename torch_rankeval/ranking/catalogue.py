"""The top-k ranked view as a :class:`~torch_rankeval.ranking.view.RankedBatch`: the kernels of the
measure table run on it unchanged, so a full catalogue is ranked only as deep as the measures read.

:class:`TopKRankedBatch` wraps a :class:`~torch_rankeval.ranking.topk.TopKView` (``torch.topk`` of the
first ``W`` positions plus exact whole-group tie statistics, the per-row relevant count and the ideal
top gains) and answers the ranked-view contract of the ranking core for the first ``W`` positions.
:func:`catalogue_batch` builds one from scores, a dense or sparse target and ``exclude``:

* **measures with a cutoff** need ``W = max(k)`` positions (``min(k, L)``);
* **measures without one** (full AP, nDCG, RR, R-precision, ``P``/``R`` over the whole list) need every
  position down to the last item with a non-zero grade, with its whole tie group. A validated call
  reads that depth in one host sync (per row: the items scored at or above the row's lowest-scored
  non-zero entry, one comparison pass over the scores in row chunks, no sort); an unvalidated call
  cannot read it and ranks the whole row (``W = L``: the cost of a sort, no sync).

Past the last non-zero item every position holds grade 0 and gain 0, so values computed on such a
view equal the full ranking's (a gain with ``gain(0) != 0`` ranks the whole row; negative gains,
which the ideal ranking puts last, come from each row's lowest gains, :attr:`TopKView.ideal_bottom`).
Whole lists of a large batch run in row chunks of at most 1/:data:`WHOLE_LIST_PARTS` of the batch
(:func:`row_chunks`, :func:`whole_list_rows`): the view of a whole list is as wide as the row, and it
takes some 36 times the scores it is built from, so the peak stays near the batch's scores (a full
sort costs 3 times them); a sparse target or ``exclude`` stays sparse in each chunk.
A measure's registry row says whether its kernel reads only these quantities (``Family.topk``); the
plan (:class:`~torch_rankeval.measures.MeasurePlan`) routes to this view when every requested
measure's row says so, and densifies otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch import Tensor

from torch_rankeval.conventions import TORCH_TIES, Convention, discount_table, gain_fn
from torch_rankeval.ranking.inputs import reads_host, work_dtype
from torch_rankeval.ranking.sparse import SparseTarget, check_exclude, is_sparse, sparse_target
from torch_rankeval.ranking.topk import (
    DEFAULT_CHUNK_ELEMENTS,
    TopKView,
    _chunks,
    _excluded_rows,
    _scatter_rows,
    topk_view,
)
from torch_rankeval.ranking.view import _NEEDS_DOC, RankedBatch, TieGroups, _row_count

__all__ = [
    "WHOLE_LIST_CHUNK",
    "WHOLE_LIST_PARTS",
    "WHOLE_LIST_SMALL",
    "TopKRankedBatch",
    "catalogue_batch",
    "catalogue_rows",
    "check_catalogue",
    "row_chunks",
    "topk_convention",
    "whole_list_rows",
]


def topk_convention(conv: Convention) -> bool:
    """Whether the top-k view can rank under ``conv`` (a measure's registry row says whether its kernel
    reads only the view's quantities: ``Family.topk``).

    torchmetrics' "scores <= 0 are not relevant" quirk re-grades documents by score, and the torch tie
    policies sort each whole list as torchmetrics does: both take the dense path.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT, Convention
        >>> topk_convention(DEFAULT), topk_convention(Convention(ties="torch_argsort"))
        (True, False)
    """
    return not conv.nonpositive_not_relevant and conv.ties not in TORCH_TIES


class _ViewGroups(TieGroups):
    """The view's whole-group statistics, read as :class:`TieGroups` of its first ``width`` positions
    (each converted to the kernels' dtype when first read: a whole-list view is as wide as the row)."""

    _row_bounds = False  # the view's statistics, not the bounds of a ranked row

    def __init__(self, rb: TopKRankedBatch, width: int) -> None:
        super().__init__(rb, width)
        v, f, f64 = rb._view, rb.dtype, torch.float64
        one = torch.ones((), dtype=v.group_size.dtype, device=rb.device)
        self._lazy: dict[str, Callable[[], Tensor]] = {
            "start": lambda: v.group_start[:, :width].to(f),
            # positions past n_valid are padding: groups of one document that is not relevant
            "size": lambda: torch.where(v.valid[:, :width], v.group_size[:, :width], one).to(f),
            "rel": lambda: v.group_relevant[:, :width].to(f),
            "rel_before": lambda: v.relevant_before[:, :width].to(f),
            "rel_count": lambda: self.rel,
            "rel_count_before": lambda: self.rel_before,
            "gain": lambda: v.group_gain[:, :width].to(f64),
            "gain_before": lambda: v.gain_before[:, :width].to(f64),
            "gain_sq": lambda: v.group_gain_sq[:, :width].to(f64),
        }

    def _get(self, name: str, make: Callable[[], dict[str, Tensor]]) -> Tensor:
        lazy = self._lazy.pop(name, None)
        if lazy is not None:
            self._cache[name] = lazy()
        return super()._get(name, make)

    def sums(self, head: Tensor, doc: Tensor | None, *, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """(group sum, sum ranked above the group) of ``head`` ``(N, width)``, as
        :meth:`TieGroups.sums`: from the view's positions for the groups that end inside ``width``;
        the group that goes on past ``width`` (only one per row can) sums ``doc`` ``(N, L)`` over the
        row's non-excluded items with its score (a pass over the scores in row chunks)."""
        rb = self.rb
        inclusive = head.cumsum(-1, dtype=dtype)
        if not rb.averaged:
            x = head.to(dtype)
            return x, inclusive - x
        start, size = self.start.long(), self.size.long()
        padded = torch.constant_pad_nd(inclusive, (1, 0))
        before = padded.gather(-1, start)
        total = padded.gather(-1, (start + size).clamp(max=self.width)) - before
        if self.width < rb.row_length:
            if doc is None:
                raise ValueError(_NEEDS_DOC)
            full = rb._tied_sum(rb._view.scores[:, self.width - 1], doc, dtype)
            total = torch.where(start + size > self.width, full.unsqueeze(-1), total)
        return total, before


class TopKRankedBatch(RankedBatch):
    """A :class:`~torch_rankeval.ranking.topk.TopKView` as a ranked batch of length ``W`` (its width).

    ``length`` is ``W``: cutoffs ``k <= W`` read the view; a cutoff of None reads all ``W`` positions,
    which equals the whole ranking when the view reaches the last non-zero grade
    (:func:`catalogue_batch`). ``n_valid`` is the true number of ranked (non-excluded) items of each row.

    Example:
        >>> import torch
        >>> from torch_rankeval.conventions import DEFAULT
        >>> from torch_rankeval.kernels.dcg import ndcg_values
        >>> scores = torch.tensor([[0.9, 0.5, 0.5, 0.5, 0.1]])
        >>> view = topk_view(scores, 2, target=torch.tensor([[0, 1, 0, 0, 2]]), dtype=torch.float64)
        >>> rb = TopKRankedBatch(view, DEFAULT, length=5)
        >>> values, _ = ndcg_values(rb, (2,), DEFAULT)
        >>> round(values.item(), 4)                    # position 2: one of three tied items, one relevant
        0.0579
    """

    n_lists: int
    length: int
    device: torch.device
    averaged: bool
    truncated: bool
    #: the length of the rows the view was taken from
    row_length: int

    def __init__(
        self,
        view: TopKView,
        convention: Convention,
        *,
        length: int,
        dtype: torch.dtype = torch.float32,
        discounts: Tensor | None = None,
        scores: Tensor | None = None,
        exclude: Any = None,
    ) -> None:
        if view.rel is None:
            raise ValueError("the view has no target statistics: build it with topk_view(..., target=...)")
        self._view = view
        self._cache: dict[str, Tensor] = {}
        self._groups: dict[int, TieGroups] = {}
        self.convention = convention
        self.dtype = dtype
        self.n_lists, self.length = view.items.shape
        self.device = view.items.device
        self.averaged = convention.ties == "average"
        self.truncated = self.length < length
        self.row_length = length
        self._scores, self._exclude = scores, exclude  # the view's inputs (no copy), for whole-group sums
        self._has_padding = True
        self._threshold_int = False
        self._ideal_target = self._ideal_valid = self._n_relevant = None
        # a whole-list ideal ranking with negative gains reads discounts down to the row's last position
        self._tail = view.ideal_bottom is not None and self.truncated
        need = length if self._tail else self.length
        if discounts is None or discounts.shape[0] < need:
            discounts = discount_table(need, convention, dtype=dtype, device=self.device)
        self._discounts_in = discounts

    def _doc(self, name: str) -> Tensor | None:
        raise NotImplementedError(
            "a top-k view has no per-document (input order) tensors of its own: pass them (doc=) where a "
            "statistic needs one"
        )

    def ranked(self, x: Tensor, width: int | None = None) -> Tensor:
        """A per-document tensor ``(N, L)`` at the view's first ``width`` positions (default all ``W``;
        positions past a row's ``n_valid`` hold an arbitrary item)."""
        items = self._view.items if width is None or width >= self.length else self._view.items[:, :width]
        return x.gather(-1, items)

    def _tied_sum(self, value: Tensor, doc: Tensor, dtype: torch.dtype) -> Tensor:
        """``(N,)``: the sum of ``doc`` ``(N, L)`` over each row's non-excluded items scored ``value``."""
        if self._scores is None:
            raise ValueError(
                "this TopKRankedBatch was built without its scores: pass scores= (and exclude=) to sum over "
                "the tie group that goes on past the view"
            )
        preds = self._scores
        n, length = preds.shape
        ex = self._exclude
        if ex is not None:
            ex = check_exclude(ex, (n, length), preds.device, validate_args=False)
        out = []
        for chunk, span in _chunks(None, n, length, DEFAULT_CHUNK_ELEMENTS, preds.device):
            same = preds[span] == value[span].unsqueeze(-1)
            if ex is not None:
                same &= ~(ex[span] if isinstance(ex, Tensor) else _excluded_rows(ex, chunk, n, length))
            d = doc[span]
            out.append(_row_count(same & d, dtype) if d.dtype == torch.bool else (d * same).sum(-1, dtype=dtype))
        return torch.cat(out) if out else torch.zeros(0, dtype=dtype, device=preds.device)

    def _make_head(self, name: str, width: int) -> Tensor:
        v = self._view
        if name in ("valid", "judged"):
            return v.valid[:, :width]
        if name == "relmask":
            return v.rel[:, :width] > 0
        if name == "rel":
            return v.rel[:, :width].to(self.dtype)
        if name == "gains":
            return v.gains[:, :width].to(self.dtype)
        if name == "target":
            return torch.where(v.valid[:, :width], v.grades[:, :width].to(self.dtype), self._zero)
        raise ValueError(f"unknown per-position quantity {name!r}")

    def groups(self, width: int | None = None) -> TieGroups:
        width = self.length if width is None else min(width, self.length)
        g = self._groups.get(width)
        if g is None:
            g = self._groups[width] = _ViewGroups(self, width)
        return g

    @property
    def n_relevant(self) -> Tensor:
        return self.cached("n_relevant", lambda: self._view.n_relevant.to(self.dtype))

    @property
    def n_relevant_in_list(self) -> Tensor:
        return self.n_relevant

    @property
    def n_valid(self) -> Tensor:
        return self.cached("n_valid", lambda: self._view.n_valid.to(self.dtype))

    @property
    def ranked_scores(self) -> Tensor:
        """The view's scores ``(N, W)``, NaN where a position holds no ranked item."""
        v = self._view
        return torch.where(v.valid, v.scores, torch.full((), float("nan"), dtype=v.scores.dtype, device=self.device))

    @property
    def ideal_gains(self) -> Tensor:
        """The row's ``W`` largest gains in decreasing order (the rest of the row holds none larger)."""
        return self.cached("ideal_gains", lambda: self._view.ideal_gains.to(self.dtype))

    def ideal_top(self, ks: tuple[int | None, ...]) -> Tensor:
        """The ideal ranking's gains at positions ``1..min(max(k), W)``; with a cutoff of None and
        negative gains possible (:attr:`TopKView.ideal_bottom`), ``(N, 2W)``: the top ``W`` gains,
        then the row's lowest gains that the ideal ranking puts past position ``W`` (at its last
        positions, ``n_valid - j`` for the ``j``-th lowest, 0 elsewhere), whose discounts
        :meth:`discount_head` gives per row for widths beyond ``W``."""
        top = self.length if None in ks else min(max(ks), self.length)
        head = self.ideal_gains[:, :top]
        if None not in ks or not self._tail:
            return head
        return self.cached("ideal_with_tail", lambda: torch.cat([head, self._ideal_tail()[0]], -1))

    def discount_head(self, width: int) -> Tensor:
        """Discounts of ranks ``1..width``, ``(width,)``; beyond the view's ``W`` (only the whole-list
        ideal ranking of :meth:`ideal_top` reads that far) ``(N, width)``: the per-row discounts of
        the ideal positions of the row's lowest gains."""
        if width <= self.length or not self._tail:
            return super().discount_head(width)
        head = super().discount_head(self.length).expand(self.n_lists, -1)
        return torch.cat([head, self._ideal_tail()[1][:, : width - self.length]], -1)

    def _ideal_tail(self) -> tuple[Tensor, Tensor]:
        """(gains, discounts), ``(N, W)``: the ``j``-th lowest gain of a row and the discount of its
        ideal position ``n_valid - j`` where that lies past ``W`` (gain 0 elsewhere)."""

        def make() -> Tensor:
            width = self.length
            pos = self._view.n_valid.unsqueeze(-1) - torch.arange(width, device=self.device)  # 1-based
            past = pos > width
            gains = torch.where(past, self._view.ideal_bottom.to(self.dtype), self._zero)
            table = self._discounts_in.to(self.dtype)
            index = (pos - 1).clamp(min=0, max=table.shape[0] - 1)
            discounts = torch.where(past, table.index_select(0, index.reshape(-1)).view_as(index), self._zero)
            return torch.stack([gains, discounts])

        both = self.cached("ideal_tail", make)
        return both[0], both[1]


def catalogue_batch(
    preds: Tensor,
    target: Any,
    convention: Convention,
    *,
    cutoffs: tuple[int | None, ...],
    whole_list: bool,
    exclude: Any = None,
    gain: Any = None,
    discounts: Tensor | None = None,
    validate_args: bool = True,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
    uses_gain: bool = True,
    depth: int | None = None,
) -> TopKRankedBatch:
    """Rank ``preds`` ``(N, L)`` only as deep as ``cutoffs`` (and, with ``whole_list``, down to the last
    non-zero grade) and return the view as a ranked batch.

    ``target``: dense ``(N, L)`` grades, a torch sparse COO / CSR tensor or a
    :class:`~torch_rankeval.ranking.sparse.SparseTarget`; ``exclude``: ``(N, L)`` bool, dense or
    sparse (never ranked, never counted). ``gain``: a callable replacing the convention's gain.
    ``uses_gain``: whether a measure reads gains (the gain checks of ``validate_args`` run only then,
    as on the dense path). With ``whole_list``, a dense target and a gain other than ``"exp2"``
    (gains may be negative) the view also keeps each row's lowest gains: the end of the ideal
    ranking, past the view, where negative gains go. ``depth``: the whole-list depth when the caller
    knows it (:func:`row_chunks`; no host sync here then).

    Example:
        >>> import torch
        >>> from torch_rankeval.conventions import DEFAULT
        >>> scores = torch.tensor([[0.1, 0.9, 0.4, 0.8]])
        >>> target = torch.tensor([[1, 0, 0, 1]]).to_sparse()
        >>> rb = catalogue_batch(scores, target, DEFAULT, cutoffs=(None,), whole_list=True,
        ...                      exclude=torch.tensor([[False, True, False, False]]))
        >>> rb.length, rb.n_valid, rb.head("rel")      # item 1 excluded; the view reaches item 0
        (3, tensor([3.]), tensor([[1., 0., 1.]]))
    """
    length = preds.shape[1]
    dtype = work_dtype(preds, target.grades if isinstance(target, SparseTarget) else target)
    finite = [min(k, length) for k in cutoffs if k is not None]
    width = max(finite, default=1)
    whole = whole_list or len(finite) < len(cutoffs)
    if whole:
        width = max(width, _whole_list_width(preds, target, exclude, convention, validate_args, chunk_elements, depth))
    width = max(1, min(width, length))
    view = topk_view(
        preds,
        width,
        target=target,
        exclude=exclude,
        ties=convention.ties,
        gain=convention.gain if gain is None else gain,
        relevance_threshold=convention.relevance_threshold,
        dtype=dtype,
        validate_args=validate_args,
        chunk_elements=chunk_elements,
        uses_gain=uses_gain,
        ideal_bottom=whole and width < length and uses_gain and not _sparse(target) and convention.gain != "exp2",
    )
    return TopKRankedBatch(
        view, convention, length=length, dtype=dtype, discounts=discounts, scores=preds, exclude=exclude
    )


def _whole_list_width(
    preds: Tensor,
    target: Any,
    exclude: Any,
    convention: Convention,
    validate_args: bool,
    chunk_elements: int,
    depth: int | None,
) -> int:
    """How deep whole-list measures rank: every position down to the row's lowest-scored non-zero
    grade (``depth``, or read in one host sync when validated), rounded up to a 64th of the row so
    that the per-width tables the kernels keep (discounts, ranks) stay few however the depths vary;
    the whole row when the depth cannot be read without a sync, or when grade 0 has a gain."""
    n, length = preds.shape
    if depth is None and not validate_args:
        return length  # the depth is data: without a host sync, rank the whole row
    if not _sparse(target) and not _zero_at_zero(convention.gain):
        return length  # grade 0 has a gain: every position counts, down to the row's last
    if depth is None and n:
        depth = int(_depth(preds, target, exclude, chunk_elements).max())  # the one extra sync
    grain = -(-length // 64)
    return -(-(depth or 0) // grain) * grain


#: Whole-list measures on the catalogue route run in row chunks of at most this many scores
#: (:func:`row_chunks`, :func:`whole_list_rows`).
WHOLE_LIST_CHUNK = DEFAULT_CHUNK_ELEMENTS // 2
#: ... and of at most this fraction of the batch: the view of a whole list is as wide as the row, and
#: its statistics and the kernels' temporaries take some 36 times the chunk's scores.
WHOLE_LIST_PARTS = 32
#: A batch of at most this many scores (1 MiB of float32) is not split.
WHOLE_LIST_SMALL = 1 << 18


def catalogue_rows(
    preds: Any, exclude: Any, num_items: int, device: torch.device, *, validate_args: bool
) -> tuple[Tensor, Any]:
    """The input stage of a full-catalogue metric's ``update`` (``ItemExposure``, the beyond-accuracy
    metrics): ``preds`` as ``(N, num_items)`` scores (one user's ``(num_items,)`` row becomes one
    row, and a 1-D ``exclude`` with it) on the metric's ``device``, and ``exclude`` in the canonical
    form of :func:`~torch_rankeval.ranking.sparse.check_exclude` (None stays None); else a clear
    ``TypeError`` / ``ValueError``.

    Example:
        >>> import torch
        >>> preds, exclude = catalogue_rows(torch.tensor([0.2, 0.9, 0.5]), torch.tensor([False, True, False]), 3,
        ...                                 torch.device("cpu"), validate_args=True)
        >>> preds.shape, exclude.shape
        (torch.Size([1, 3]), torch.Size([1, 3]))
        >>> catalogue_rows(torch.zeros(2, 4), None, 3, torch.device("cpu"), validate_args=True)
        Traceback (most recent call last):
        ...
        ValueError: preds must be (N, num_items) = (N, 3): one row of scores per user over the whole catalogue, got (2, 4)
    """
    if not isinstance(preds, Tensor):
        raise TypeError(f"preds must be a torch.Tensor, got {type(preds).__name__}")
    if preds.ndim == 1:
        preds = preds.unsqueeze(0)
        if isinstance(exclude, Tensor) and exclude.ndim == 1:
            exclude = exclude.unsqueeze(0)
    if preds.ndim != 2 or preds.shape[-1] != num_items:
        raise ValueError(
            f"preds must be (N, num_items) = (N, {num_items}): one row of scores per user over the whole "
            f"catalogue, got {tuple(preds.shape)}"
        )
    if preds.device != device:
        raise ValueError(
            f"preds is on {preds.device} but the metric is on {device}: move the metric with "
            f"metric.to({str(preds.device)!r}) or the inputs to the metric's device"
        )
    if exclude is not None:
        exclude = check_exclude(exclude, tuple(preds.shape), preds.device, validate_args=validate_args)
    return preds, exclude


def check_catalogue(
    preds: Tensor, target: Any, convention: Convention, *, exclude: Any = None, gain: Any = None, uses_gain: bool = True
) -> None:
    """The value checks of :func:`catalogue_batch` with ``validate_args=True`` on their own, over the
    whole batch (a one-position view: the checks' one host sync and little else), for a caller that
    then evaluates row chunks unvalidated (:func:`row_chunks`).

    Example:
        >>> import torch
        >>> from torch_rankeval.conventions import DEFAULT
        >>> check_catalogue(torch.tensor([[0.5, float("nan")]]), torch.tensor([[1, 0]]), DEFAULT,
        ...                 exclude=torch.tensor([[False, True]]))      # NaN at an excluded item: fine
    """
    topk_view(
        preds,
        1,
        target=target,
        exclude=exclude,
        ties=convention.ties,
        gain=convention.gain if gain is None else gain,
        relevance_threshold=convention.relevance_threshold,
        validate_args=True,
        uses_gain=uses_gain,
    )


def row_chunks(
    preds: Tensor, target: Any, exclude: Any, *, validate_args: bool, chunk_elements: int = WHOLE_LIST_CHUNK
) -> Iterator[tuple[Tensor, Any, Any, int | None]]:
    """The batch in row chunks of :func:`whole_list_rows` rows (at most ``chunk_elements`` scores),
    each as ``(scores, target rows, exclude rows or None, whole-list depth or None)`` for
    :func:`catalogue_batch`. Validated, the depth of every row is read in one host sync first
    (unvalidated: None, the whole row). A sparse target or ``exclude`` stays sparse (its entries of
    the chunk, found from its row pointers read with that sync, or on the CPU in eager mode from host
    memory); where no read is allowed (unvalidated on CUDA, compiling) it is made dense one chunk at
    a time.

    Example:
        >>> import torch
        >>> scores, target = torch.tensor([[0.9, 0.1], [0.2, 0.8]]), torch.tensor([[0, 1], [0, 1]]).to_sparse()
        >>> [(t.to_dense().tolist(), d) for _, t, _, d in row_chunks(scores, target, None, validate_args=True,
        ...                                                         chunk_elements=2)]
        [([[0, 1]], 2), ([[0, 1]], 1)]
    """
    n, length = preds.shape
    st = sparse_target(target, (n, length), device=preds.device, validate_args=False) if _sparse(target) else None
    ex = None if exclude is None else check_exclude(exclude, (n, length), preds.device, validate_args=False)
    depths = _depth(preds, target, exclude, chunk_elements).tolist() if validate_args else None  # the host sync
    pointers = validate_args or reads_host(preds)  # the row pointers of the sparse inputs: read with that sync
    crow = {id(x): x.crow.tolist() for x in (st, ex) if isinstance(x, SparseTarget) and pointers}
    size = whole_list_rows(n, length, chunk_elements)
    for chunk, span in _chunks(None, n, length, size * length, preds.device):
        if st is None:
            grades = target[span]
        elif crow:
            grades = _sparse_rows(st, span, crow[id(st)])
        else:
            grades = _dense_rows(st, chunk, n, length)
        if ex is None or isinstance(ex, Tensor):
            skip = None if ex is None else ex[span]
        else:
            skip = _sparse_rows(ex, span, crow[id(ex)]) if crow else _excluded_rows(ex, chunk, n, length)
        depth = None if depths is None else max(depths[span], default=0)
        yield preds[span], grades, skip, depth


def whole_list_rows(n: int, length: int, chunk_elements: int = WHOLE_LIST_CHUNK) -> int:
    """Rows per chunk of a batch of whole-list measures on the catalogue route (:func:`row_chunks`;
    ``n`` when one chunk holds the batch). A whole-list view is as wide as the row, and the view, its
    tie statistics and the kernels' temporaries take some 36 times the scores they are built from,
    so a chunk holds at most 1/:data:`WHOLE_LIST_PARTS` of the batch: at the peak about the batch's
    scores again, within the cost of a full sort (3 times). At most ``chunk_elements`` scores (at least one
    row); a batch of at most :data:`WHOLE_LIST_SMALL` scores is not cut in parts (a small absolute cost).

    Example:
        >>> whole_list_rows(200, 50_000), whole_list_rows(10_000, 50_000), whole_list_rows(256, 64)
        (7, 41, 256)
    """
    rows = max(1, chunk_elements // length)
    if n * length > WHOLE_LIST_SMALL:
        rows = min(rows, -(-n // WHOLE_LIST_PARTS))
    return max(1, min(rows, n))


def _sparse_rows(st: SparseTarget, span: slice, crow: list[int]) -> SparseTarget:
    """The rows ``span`` of a canonical sparse target (its entries ``crow[a]:crow[b]``, views but the
    shifted rows and keys), ``crow`` its row pointers read on the host."""
    a, b = span.start, span.stop
    lo, hi = crow[a], crow[b]
    length = st.shape[1]
    return SparseTarget(
        (b - a, length),
        st.rows[lo:hi] - a,
        st.items[lo:hi],
        st.grades[lo:hi],
        st.keys[lo:hi] - a * length,
        st.crow[a : b + 1] - lo,
        None if st.counted is None else st.counted[lo:hi],
    )


def _dense_rows(st: SparseTarget, chunk: Tensor, n: int, length: int) -> Tensor:
    """The rows ``chunk`` of a sparse target as a dense ``(R, L)`` tensor of its dtype (no host sync)."""
    dtype = torch.uint8 if st.grades.dtype == torch.bool else st.grades.dtype
    grades = torch.zeros(chunk.shape[0], length, dtype=dtype, device=chunk.device)
    _scatter_rows(grades, chunk, n, st, st.grades.to(dtype), st.counted_mask())
    return grades.bool() if st.grades.dtype == torch.bool else grades


def _zero_at_zero(gain: Any) -> bool:
    """Whether the gain of grade 0 is 0 (then a whole list needs the view only down to its last
    non-zero grade). Read on the host from the convention's gain: a name, a mapping or a callable
    (evaluated on a CPU zero; one that fails there counts as non-zero: the whole row is ranked)."""
    if isinstance(gain, str):
        return True
    if isinstance(gain, Mapping):  # unmapped grades have gain 0
        return all(float(v) == 0.0 for k, v in gain.items() if k == 0)
    try:
        return float(gain_fn(gain)(torch.zeros(1, dtype=torch.float64))[0]) == 0.0
    except Exception:  # noqa: BLE001 -- e.g. a callable bound to another device
        return False


def _sparse(target: Any) -> bool:
    return isinstance(target, SparseTarget) or is_sparse(target)


def _depth(preds: Tensor, target: Any, exclude: Any, chunk_elements: int) -> Tensor:
    """``(N,)`` int64: per row, the non-excluded items scored at or above the row's lowest-scored item
    with a non-zero grade (0 for a row without one): how deep the ranking must go to hold every
    non-zero grade with its whole tie group. One comparison pass over the scores in row chunks; an
    excluded item never counts, whatever its score or grade (NaN included)."""
    n, length = preds.shape
    inf = torch.full((), float("inf"), dtype=preds.dtype, device=preds.device)
    ex = None if exclude is None else check_exclude(exclude, (n, length), preds.device, validate_args=False)
    if _sparse(target):
        st = target  # its value checks are the view's (topk_view), resolved in the view's one sync
        if not isinstance(st, SparseTarget):
            st = sparse_target(target, (n, length), device=preds.device, validate_args=False)
        st = st.excluding(ex)
        keep = st.counted_mask() & (st.grades != 0)
        scores = torch.where(keep, preds.reshape(-1).index_select(0, st.keys), inf)
        lowest = torch.full((n,), float("inf"), dtype=preds.dtype, device=preds.device)
        lowest = lowest.scatter_reduce(0, st.rows, scores, "amin")
        dense = None
    else:
        lowest, dense = None, target
    counts = []
    for chunk, span in _chunks(None, n, length, chunk_elements, preds.device):
        p = preds[span]
        skip = None if ex is None else ex[span] if isinstance(ex, Tensor) else _excluded_rows(ex, chunk, n, length)
        if dense is None:
            low = lowest[span]
        else:
            keep = dense[span] != 0
            if skip is not None:
                keep &= ~skip
            low = torch.where(keep, p, inf).amin(-1)
        above = p >= low.unsqueeze(-1)
        if skip is not None:
            above &= ~skip
        counts.append(above.sum(-1))
    return torch.cat(counts) if counts else torch.zeros(0, dtype=torch.int64, device=preds.device)
