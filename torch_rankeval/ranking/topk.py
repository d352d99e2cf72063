"""Top-k selection with exact tie statistics, without sorting a row.

When every requested metric has a cutoff, only the top ``W = max(k)`` items of each row matter, plus
a few per-row facts (the number of relevant items, the ideal gains). :func:`topk_view` finds them with
one ``torch.topk`` per row instead of a full sort and returns a :class:`TopKView`: the first ``W``
ranked positions with their tie-group statistics, exact under every tie policy. Metrics without a
cutoff read a view deep enough to hold every item with a non-zero grade
(:func:`~torch_rankeval.ranking.catalogue.catalogue_batch`).

**Ties.** Under ``ties="average"`` a metric is the expected value over all orders of tied items, which
needs, per position, the size and the relevant count / gain sum of its WHOLE tie group. Groups that
end inside the top ``W`` are complete in the ``topk`` output; the group of the ``W``-th score ``v``
(the *boundary group*) may extend past ``W``: its start ``s`` (items strictly above ``v``) is read from
the top ``W``, its size ``n`` is a count over the whole row, and its relevant count / gain sums come
from the target's entries scored ``v`` (sparse target) or from a masked pass over the row (dense
target). Which of its members sit inside the top ``W`` is arbitrary -- the statistics do not depend
on it. ``ties="first"`` (input order among ties: what a stable full sort gives) takes the boundary
group's first members by item index; ``"pessimistic"`` / ``"optimistic"`` order tied items by
increasing / decreasing grade, then index, and fully sort the rows whose boundary group extends past
``W``.

**Host syncs and the row pass.** ``topk`` takes ``W + 1`` items; a row's boundary group extends past
``W`` (*spills*) only when the ``(W + 1)``-th score equals ``v``. With ``validate_args=True`` there are
two small host syncs: the value checks (with the largest excluded count per row), then the indices
of the spilled rows; only those rows get the row pass (none with continuous scores). With
``validate_args=False`` on CUDA (any device but the CPU) and under ``torch.compile`` there is no host
sync and no data-dependent shape, so every row gets the row pass (one more read of the scores, in
row chunks): same values. On the CPU in eager mode the data already is in host memory, so reading
it waits for no device: there an unvalidated call reads the largest excluded count and the indices
of the spilled rows as the validated call does (two reads of ``(N,)`` vectors; no value check) and
costs what it costs, instead of the pass over every row (a cliff of 2-4x for the beyond-accuracy
metrics). ``tests/sync_guard.py``'s ``HostSyncGuard`` (the CPU stand-in for CUDA's sync check)
switches this off, so that the sync-free path is the one tested on the CPU.

**Memory.** With ``exclude`` and a known largest excluded count ``E`` per row (read by the validation
sync or, unvalidated, on the CPU in eager mode; or given as ``max_excluded_per_row``) such that
``W + 1 + E <= L / 4`` (e.g. 50 seen items out of 50,000): no copy of the scores at all --
``topk(W + 1 + E)`` of the raw scores, then the excluded items are dropped. Otherwise, with
``exclude``: one ``(N, L)`` copy of the scores with ``-inf`` at excluded items (the only full-size
temporary; none without ``exclude``). Beyond that: ``(N, W)`` outputs, the score check's reduction,
and the row pass, which works on row chunks of at most ``chunk_elements`` items after the copy is
freed (a bool mask of the chunk, for ``ties="first"`` an int32 key, for a dense target its chunk's
gains; the chunk's scores are a view, not a copy, when all rows are read). A dense target adds
chunk-sized temporaries for its per-row counts and ideal gains; a sparse target adds only ``(nnz,)``
tensors. ``"pessimistic"`` / ``"optimistic"`` fully sort the spilled rows (every row when the row
pass reads every row): the documented fallback, an int64 ``(R, L)`` permutation per chunk.

**Excluded items** are never ranked and never counted: they rank after every other item and the
positions ``>= n_valid`` (``n_valid`` = ``L`` minus the excluded count) are marked invalid. An
excluded item that is also in the target is not relevant and not in the ideal ranking.

Scores must be finite at non-excluded items (checked with ``validate_args=True``, as in the dense
path; unvalidated NaN / infinite scores give undefined results). Excluded items may hold any score
and any grade, NaN and infinities included: they are written over (``-inf``), never added to.
The value checks are the dense path's (:func:`~torch_rankeval.ranking.inputs.grade_checks`), with
the same messages, over the items that count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from torch_rankeval._choices import TIES
from torch_rankeval.ranking.inputs import GAINS_NOT_FINITE, SCORES_NOT_FINITE, grade_checks, reads_host, work_dtype
from torch_rankeval.ranking.sparse import (
    Check,
    GainSpec,
    SparseTarget,
    _at,
    _gain_callable,
    _is_int,
    check_exclude,
    is_relevant,
    is_sparse,
    resolve_checks,
    sparse_target,
)

__all__ = ["DEFAULT_CHUNK_ELEMENTS", "TopKView", "boundary_histogram", "boundary_sums", "topk_view"]

#: Default bound on the elements of one row chunk (``R x L``) of the row passes.
DEFAULT_CHUNK_ELEMENTS = 1 << 22

Exclude = Tensor | SparseTarget | None


@dataclasses.dataclass
class TopKView:
    """The first ``W`` ranked positions of each row, with exact tie-group statistics.

    Per position ``(N, W)``, ``W = min(k, L)``; positions are 0-based. Under ``ties="average"`` the
    order of items *inside* a tie group is arbitrary (the group statistics are what a metric uses);
    under the other policies the order is the policy's, and every group has size 1.

    Attributes:
        k: ``W``, the view's width.
        ties: the tie policy used.
        items: ``(N, W)`` int64 item index at each position (meaningless where not ``valid``).
        scores: ``(N, W)`` the items' scores (``-inf`` where not valid).
        valid: ``(N, W)`` bool, ``position < n_valid``: the position holds a ranked item.
        n_valid: ``(N,)`` int64, the number of ranked (non-excluded) items of each row.
        boundary_value: ``(N,)`` ``v``, the score at the last valid position of the view (position
            ``min(W, n_valid) - 1``; ``-inf`` for a row without valid items).
        boundary_start: ``(N,)`` int64 ``s``, the number of items scored strictly above ``v``.
        boundary_size: ``(N,)`` int64 ``n``, the number of items scored ``v`` in the whole row (0 for a
            row without valid items); ``n > W - s`` when the group extends past the view.
        spilled: ``(N,)`` bool, the boundary group extends past the view (``n > W - s``).
        group_start: ``(N, W)`` int64, 0-based start of the position's tie group (the position itself
            unless ``ties="average"``; the position itself where not valid).
        group_size: ``(N, W)`` int64, size of the WHOLE group (may extend past ``W``; 1 unless
            ``ties="average"``; 0 where not valid).

    With a target (else None):
        grades: ``(N, W)`` the item's grade (target dtype; 0 where not valid / absent / excluded).
        rel: ``(N, W)`` float, 1 for a relevant item.
        gains: ``(N, W)`` float, the item's gain (0 where not valid).
        group_relevant, group_gain, group_gain_sq: ``(N, W)`` float, relevant count, gain sum and
            squared-gain sum of the WHOLE tie group of the position (own values unless ``"average"``).
        relevant_before, gain_before: ``(N, W)`` float, relevant count and gain sum of the items
            ranked before the position's group (all of them are inside the view).
        n_relevant: ``(N,)`` float, relevant non-excluded items of the row (the whole row).
        ideal_gains: ``(N, W)`` float, the row's ``W`` largest gains in decreasing order over its
            non-excluded items (0-padded): IDCG@k for ``k <= W``.

    Example:
        >>> import torch
        >>> scores = torch.tensor([[0.9, 0.5, 0.5, 0.5, 0.1]])
        >>> target = torch.tensor([[0, 1, 0, 0, 2]])
        >>> view = topk_view(scores, 2, target=target, gain="linear")
        >>> view.boundary_start, view.boundary_size      # 1 item above 0.5, 3 items tied at 0.5
        (tensor([1]), tensor([3]))
        >>> view.group_size, view.group_relevant         # position 2 is in the 3-item group, 1 relevant
        (tensor([[1, 3]]), tensor([[0., 1.]]))
        >>> view.n_relevant, view.ideal_gains
        (tensor([2.]), tensor([[2., 1.]]))
    """

    k: int
    ties: str
    items: Tensor
    scores: Tensor
    valid: Tensor
    n_valid: Tensor
    boundary_value: Tensor
    boundary_start: Tensor
    boundary_size: Tensor
    spilled: Tensor
    group_start: Tensor
    group_size: Tensor
    grades: Tensor | None = None
    rel: Tensor | None = None
    gains: Tensor | None = None
    group_relevant: Tensor | None = None
    group_gain: Tensor | None = None
    group_gain_sq: Tensor | None = None
    relevant_before: Tensor | None = None
    gain_before: Tensor | None = None
    n_relevant: Tensor | None = None
    ideal_gains: Tensor | None = None
    #: rows that got the row pass (None: all rows, i.e. unvalidated off the CPU or compiling); internal, for
    #: consumers such as ItemExposure
    pass_rows: Tensor | None = None
    #: ``(N, W)`` the row's ``W`` lowest gains over its non-excluded items, ascending (0 past ``n_valid``):
    #: the end of the whole-list ideal ranking when gains may be negative; None unless asked for
    ideal_bottom: Tensor | None = None


# ---------------------------------------------------------------------------------------- inputs
def _check_scores(scores: Any) -> None:
    if not isinstance(scores, Tensor):
        raise TypeError(f"preds must be a torch.Tensor, got {type(scores).__name__}")
    if scores.layout != torch.strided:
        raise TypeError(f"preds must be a dense tensor (every item scored), got layout {scores.layout}")
    if not scores.is_floating_point():
        raise TypeError(
            f"preds must be a floating tensor (float16/bfloat16/float32/float64), got {scores.dtype}; "
            "call preds.float()"
        )
    if scores.ndim != 2:
        raise ValueError(f"preds must be (N, L): one row of scores per list, got {scores.ndim} dimensions")
    if scores.shape[-1] == 0:
        raise ValueError("preds has an empty item dimension: each row needs at least one item")


def _resolve_target(
    target: Any, shape: tuple[int, int], device: torch.device, ex: Exclude, validate_args: bool, checks: list[Check]
) -> tuple[SparseTarget | None, Tensor | None]:
    """(sparse canonical target with exclusion, dense target): one of them, or both None."""
    if target is None:
        return None, None
    if is_sparse(target):
        st = sparse_target(target, shape, device=device, validate_args=validate_args, checks=checks, grade_checks=False)
        return st.excluding(ex), None
    if not isinstance(target, SparseTarget):
        if not isinstance(target, Tensor):
            raise TypeError(f"target must be a torch.Tensor (dense or sparse), got {type(target).__name__}")
        if target.layout != torch.strided:
            raise TypeError(f"target has layout {target.layout}; give a dense tensor or a sparse COO / CSR tensor")
        if not (target.is_floating_point() or target.dtype == torch.bool or _is_int(target.dtype)):  # not complex
            raise TypeError(f"target must hold bool, integer or float grades, got {target.dtype}")
    if tuple(target.shape) != tuple(shape):
        raise ValueError(f"target must have the shape of preds {tuple(shape)}, got {tuple(target.shape)}")
    if target.device != device:
        raise ValueError(f"target is on {target.device} but preds is on {device}: move all inputs to one device")
    if isinstance(target, SparseTarget):
        return target.excluding(ex), None
    return None, target


# ---------------------------------------------------------------------------------------- exclusion
def _neg_inf(dtype: torch.dtype, device: torch.device) -> Tensor:
    return torch.full((), float("-inf"), dtype=dtype, device=device)


def _excluded_count(ex: Exclude, n: int, device: torch.device) -> Tensor:
    """``(N,)`` int64 number of excluded items per row."""
    if ex is None:
        return torch.zeros(n, dtype=torch.int64, device=device)
    if isinstance(ex, SparseTarget):
        return ex.row_sum(ex.counted_mask().to(torch.int64))
    # in row chunks: on CUDA a bool sum materialises an int64 copy of its input (8 bytes per item)
    rows = max(1, DEFAULT_CHUNK_ELEMENTS // max(ex.shape[-1], 1))
    if ex.shape[0] <= rows:
        return ex.sum(-1, dtype=torch.int64)
    return torch.cat([part.sum(-1, dtype=torch.int64) for part in ex.split(rows)])


def _apply_exclude(scores: Tensor, ex: Exclude) -> Tensor:
    """The scores with ``-inf`` at excluded items, whatever they held (NaN and +inf included): one
    ``(N, L)`` copy (none without ``exclude``)."""
    if ex is None:
        return scores
    if not isinstance(ex, SparseTarget):
        return scores.masked_fill(ex, float("-inf"))
    n, length = scores.shape
    # Written, not added (-inf + NaN or + inf is NaN): every entry that counts writes -inf to its item,
    # the others to a sink slot past the end, so duplicate keys all write the same value.
    flat = torch.empty(n * length + 1, dtype=scores.dtype, device=scores.device)
    flat[:-1].view(n, length).copy_(scores)
    if ex.nnz:
        sink = torch.full((), n * length, dtype=ex.keys.dtype, device=scores.device)
        flat.index_put_((torch.where(ex.counted_mask(), ex.keys, sink),), _neg_inf(scores.dtype, scores.device))
    return flat[:-1].view(n, length)


def _scatter_rows(out: Tensor, rows: Tensor, n: int, st: SparseTarget, values: Tensor, mask: Tensor) -> Tensor:
    """Add per-entry ``values`` (where ``mask``) into ``out`` (``(R, L)``, the rows ``rows`` of an
    ``(N, L)`` matrix, ``rows`` distinct)."""
    if st.nnz == 0:
        return out
    length = out.shape[1]
    where_row = torch.full((n,), -1, dtype=torch.int64, device=out.device)
    where_row[rows] = torch.arange(rows.shape[0], device=out.device)
    chunk_row = where_row.index_select(0, st.rows)
    inside = mask & (chunk_row >= 0)
    flat = torch.where(inside, chunk_row * length + st.items, torch.zeros_like(chunk_row))
    zero = torch.zeros((), dtype=out.dtype, device=out.device)
    out.view(-1).index_put_((flat,), torch.where(inside, values, zero), accumulate=True)
    return out


def _key_rows(scores: Tensor, ex: Exclude, rows: Tensor) -> Tensor:
    """The rows ``rows`` (distinct) of the scores with ``-inf`` at excluded items, ``(R, L)`` (a copy)."""
    block = scores.index_select(0, rows)
    if ex is None:
        return block
    return block.masked_fill_(_excluded_rows(ex, rows, scores.shape[0], scores.shape[1]), float("-inf"))


def _chunks(rows: Tensor | None, n: int, length: int, chunk_elements: int, device: torch.device):
    """Row chunks of at most ``chunk_elements // L`` rows, as (row indices, slice): all rows (``rows``
    None; the slice makes each chunk a view) or the given ``rows`` (slice None)."""
    size = max(1, chunk_elements // length)
    if rows is None:
        for a in range(0, n, size):
            b = min(a + size, n)
            yield torch.arange(a, b, device=device), slice(a, b)
    else:
        for a in range(0, rows.shape[0], size):
            yield rows[a : a + size], None


def _boundary_mask(preds: Tensor, ex: Exclude, v: Tensor, on: Tensor, chunk: Tensor, span: slice | None) -> Tensor:
    """``(R, L)`` bool for one chunk: the items scored ``v`` of their row (none in a row where ``on`` is
    False: NaN equals nothing), less those of a dense ``exclude`` (a sparse one is the caller's)."""
    block = preds[span] if span is not None else preds.index_select(0, chunk)
    eq = block == torch.where(on.index_select(0, chunk), v.index_select(0, chunk), torch.nan).unsqueeze(-1)
    if ex is not None and not isinstance(ex, SparseTarget):
        eq &= ~(ex[span] if span is not None else ex.index_select(0, chunk))
    return eq


def _any_unexcluded(bad: Tensor, ex: Exclude) -> Tensor:
    """Whether ``bad`` (``(N, L)`` bool) holds at a non-excluded item (scalar bool tensor)."""
    if ex is None:
        return bad.any()
    if not isinstance(ex, SparseTarget):
        return (bad & ~ex).any()
    hits = _at(bad, ex) & ex.counted_mask()
    return bad.sum() > hits.sum()


# ---------------------------------------------------------------------------------------- top-k view
def topk_view(
    preds: Tensor,
    k: int,
    *,
    target: Tensor | SparseTarget | None = None,
    exclude: Tensor | None = None,
    ties: str = "average",
    gain: GainSpec = "exp2",
    relevance_threshold: float | None = None,
    dtype: torch.dtype | None = None,
    validate_args: bool = True,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
    max_excluded_per_row: int | None = None,
    uses_gain: bool = True,
    ideal_bottom: bool = False,
) -> TopKView:
    """Rank only the top ``min(k, L)`` items of each row, with exact tie-group statistics.

    Args:
        preds: ``(N, L)`` scores (float16 / bfloat16 / float32 / float64); higher ranks first.
        k: the largest cutoff ``W``; ``k > L`` gives a view of width ``L``.
        target: optional grades: a dense ``(N, L)`` tensor, a torch sparse COO / CSR ``(N, L)``
            tensor (absent = grade 0; see :mod:`torch_rankeval.ranking.sparse`) or a
            :class:`~torch_rankeval.ranking.sparse.SparseTarget`. None: selection only.
        exclude: optional ``(N, L)`` bool, dense or sparse, True = never ranked, never counted.
        ties: ``"average"`` (default), ``"first"``, ``"pessimistic"`` or ``"optimistic"`` (see the
            module docstring).
        gain: ``"exp2"`` (default), ``"linear"``, a ``{grade: gain}`` mapping or a callable.
        relevance_threshold: grades ``>=`` this are relevant (default: ``> 0`` / ``>= 1`` for ints).
        dtype: float dtype of the statistics (default float32, float64 when an input is float64).
        validate_args: run the value checks (non-finite scores at non-excluded items, bad sparse
            entries, negative / NaN grades, conventions a sparse target cannot honour) in one host
            sync that also finds the rows whose boundary group spills past ``W``. False: no host
            sync (every row gets the row pass), except on the CPU in eager mode, where reading host
            memory is no device sync: there the spilled rows are read as when validated.
        chunk_elements: bound on ``rows x L`` of one chunk of the row pass.
        max_excluded_per_row: a bound on the excluded items of any row (e.g. ``m`` of the ``(N, m)`` id
            lists ``exclude`` was built from). Validated calls read the true maximum anyway (and raise
            if the bound is wrong); unvalidated calls trust it, and with it skip the copy of the
            scores (see "Memory" in the module docstring).
        uses_gain: whether the caller reads gains: the gain checks (negative or overflowing exp2
            grades, non-finite gains, a sparse target's gains ``>= 0``) run only then, as on the dense
            path (:func:`~torch_rankeval.ranking.inputs.grade_checks`).
        ideal_bottom: also keep each row's ``W`` lowest gains (:attr:`TopKView.ideal_bottom`): the tail
            of a whole-list ideal ranking when gains may be negative (a dense target, linear gain).

    Returns:
        A :class:`TopKView`, built in four stages: check (:func:`_check_inputs`, then the value
        checks' one host sync, :func:`_value_checks`), select (:func:`_select`: one ``topk`` per
        row), row pass (:func:`_row_pass`: the boundary groups that spill past ``W``) and assemble
        (:func:`_assemble`, :func:`_add_target_stats`).

    Raises:
        TypeError / ValueError: bad types, shapes, devices, ``ties``, ``k``; bad values (validated).

    Example:
        >>> import torch
        >>> scores = torch.tensor([[0.2, 0.9, 0.2, 0.2, 0.7]])
        >>> topk_view(scores, 3, ties="first").items      # ties in input order: item 0, then 2
        tensor([[1, 4, 0]])
        >>> exclude = torch.tensor([[False, True, False, False, False]])
        >>> v = topk_view(scores, 3, exclude=exclude, ties="first")
        >>> v.items, v.n_valid, v.boundary_size          # item 1 is never ranked
        (tensor([[4, 0, 2]]), tensor([4]), tensor([3]))
    """
    # ---- check: the inputs (no sync), then their values in one host sync (validated)
    inp = _check_inputs(
        preds, k, target, exclude, ties, gain, relevance_threshold, dtype, validate_args, chunk_elements
    )
    _check_bound(max_excluded_per_row)
    n_excluded = _excluded_count(inp.ex, preds.shape[0], preds.device)
    n_valid = preds.shape[1] - n_excluded
    # the target's per-row facts (relevant count, ideal top gains, gain sums for the checks): before the sync
    stats = None
    if inp.has_target:
        sums = validate_args and uses_gain
        stats = _row_target_stats(inp, n_valid, chunk_elements, gain_sums=sums, bottom=ideal_bottom)
    if validate_args:
        most_excluded = _value_checks(inp, n_excluded, stats, uses_gain, max_excluded_per_row)
    elif max_excluded_per_row is not None:
        most_excluded = max_excluded_per_row
    else:  # CPU eager: a read of host memory, not a device sync
        read = reads_host(preds) and inp.ex is not None
        most_excluded = (int(n_excluded.max()) if preds.shape[0] else 0) if read else None
    # ---- select: the top W + 1 items of each row
    sel = _select(inp, n_valid, most_excluded, host_reads=validate_args or reads_host(preds))
    # ---- row pass: the boundary groups that spill past the view
    items = sel.idx[:, : inp.width]
    if ties != "average":  # the order inside the view under the deterministic policies
        items = _order_view(sel.vals, sel.idx, inp.st, inp.dense, ties)[:, : inp.width]
    row_stats = _row_pass(inp, sel, items, chunk_elements)
    # ---- assemble: the view, its tie groups and the target's statistics
    view, groups = _assemble(inp, sel, items, row_stats)
    if inp.has_target:
        _add_target_stats(view, inp, sel, groups, row_stats, stats)
    return view


@dataclasses.dataclass(frozen=True)
class _Inputs:
    """The check stage's result: the checked inputs of one :func:`topk_view` call."""

    preds: Tensor
    #: canonical ``exclude`` (dense bool tensor or bool :class:`SparseTarget`) or None
    ex: Exclude
    #: the target: sparse (its excluded entries marked as not counting) or dense, or neither
    st: SparseTarget | None
    dense: Tensor | None
    width: int
    ties: str
    dtype: torch.dtype
    gain: GainSpec
    gain_f: Callable[[Tensor], Tensor]
    threshold: float | None
    #: the checks of the inputs' values so far (resolved in the one host sync when validated)
    checks: list[Check]

    @property
    def has_target(self) -> bool:
        return self.st is not None or self.dense is not None


def _check_inputs(
    preds: Tensor,
    k: int,
    target: Any,
    exclude: Any,
    ties: str,
    gain: GainSpec,
    relevance_threshold: float | None,
    dtype: torch.dtype | None,
    validate_args: bool,
    chunk_elements: int,
) -> _Inputs:
    """Check stage: types, shapes, devices and options (no host sync), and the inputs in canonical form."""
    _check_scores(preds)
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise ValueError(f"k must be a positive int (the largest cutoff), got {k!r}")
    if ties not in TIES:
        raise ValueError(f"ties={ties!r} is not valid: use one of {', '.join(map(repr, TIES))}")
    if isinstance(chunk_elements, bool) or not isinstance(chunk_elements, int) or chunk_elements <= 0:
        raise ValueError(f"chunk_elements must be a positive int, got {chunk_elements!r}")
    if relevance_threshold is not None and not isinstance(relevance_threshold, (int, float)):
        raise TypeError(f"relevance_threshold must be a number or None, got {relevance_threshold!r}")
    n, length = preds.shape
    device = preds.device
    checks: list[Check] = []
    ex = (
        None
        if exclude is None
        else check_exclude(exclude, (n, length), device, validate_args=validate_args, checks=checks)
    )
    st, dense = _resolve_target(target, (n, length), device, ex, validate_args, checks)
    dtype = dtype or work_dtype(preds, dense, None if st is None else st.grades)
    gain_f = _gain_callable(gain)
    if st is not None and relevance_threshold is not None and relevance_threshold <= 0:
        raise ValueError(
            f"relevance_threshold={relevance_threshold} makes grade 0 relevant, but a sparse target treats every "
            "absent item as grade 0; use a threshold above 0 or a dense target"
        )
    return _Inputs(preds, ex, st, dense, min(k, length), ties, dtype, gain, gain_f, relevance_threshold, checks)


def _check_bound(max_excluded_per_row: Any) -> None:
    if max_excluded_per_row is not None and (
        isinstance(max_excluded_per_row, bool) or not isinstance(max_excluded_per_row, int) or max_excluded_per_row < 0
    ):
        raise ValueError(f"max_excluded_per_row must be a non-negative int or None, got {max_excluded_per_row!r}")


def _value_checks(inp: _Inputs, n_excluded: Tensor, stats: tuple | None, uses_gain: bool, bound: int | None) -> int:
    """Check stage, validated: every value check in ONE host sync, which also reads (and returns) the
    largest excluded count of a row. The score screen comes first, so that the checks raise in the
    dense path's order; it is one reduction, non-finite whenever a score is (or the sum overflows:
    re-checked exactly)."""
    preds, ex, checks = inp.preds, inp.ex, inp.checks
    if inp.has_target:
        sums = stats[2]
        checks += _target_checks(inp.st, inp.dense, ex, inp.gain, inp.gain_f, inp.dtype, preds.device, uses_gain, sums)
    screen = ~torch.isfinite(preds.sum(dtype=torch.float64 if preds.dtype == torch.float64 else torch.float32))
    most = n_excluded.max() if preds.shape[0] else n_excluded.new_zeros(())
    flags = [screen, *(flag for flag, _ in checks), most]
    host = resolve_checks([], extra=torch.cat([f.reshape(1).to(preds.device, torch.int64) for f in flags]))
    if bool(host[0]) and bool(_any_unexcluded(~torch.isfinite(preds), ex)):
        raise ValueError(SCORES_NOT_FINITE)
    for flag, (_, message) in zip(host[1:].tolist(), checks):
        if flag:
            raise ValueError(message)
    most_excluded = int(host[-1])
    if bound is not None and most_excluded > bound:
        raise ValueError(f"max_excluded_per_row={bound} but a row of exclude has {most_excluded} excluded items")
    return most_excluded


@dataclasses.dataclass(frozen=True)
class _Selection:
    """The select stage's result: the top ``W + 1`` non-excluded items of each row and the boundary group."""

    vals: Tensor  # (N, W + 1) the scores, descending (excluded slots -inf, last)
    idx: Tensor  # (N, W + 1) their items
    positions: Tensor  # (W,) 0..W-1
    valid: Tensor  # (N, W) the position holds a ranked item
    n_valid: Tensor  # (N,) ranked items per row
    has: Tensor  # (N,) the row has a ranked item
    last: Tensor  # (N,) the last valid position of the view
    v: Tensor  # (N,) the boundary value: the score at `last`
    start: Tensor  # (N,) items of the view scored strictly above v
    size: Tensor  # (N,) items of the view scored v (the row pass counts the whole row where it spills)
    spilled: Tensor  # (N,) the boundary group goes on past the view
    pass_rows: Tensor | None  # the spilled rows, where they could be read (None: every row)

    @property
    def top(self) -> Tensor:
        return self.vals[:, : self.positions.shape[0]]


def _select(inp: _Inputs, n_valid: Tensor, most_excluded: int | None, host_reads: bool) -> _Selection:
    """Select stage: one ``topk`` of ``W + 1`` per row, and the boundary group's facts inside the view.
    With a known bound on the excluded items that is small against the row, the excluded items are
    taken along from the raw scores and dropped (no copy of the scores at all); otherwise the one
    ``(N, L)`` temporary: the scores with -inf at excluded items. Validated (or on the CPU in eager
    mode), the rows whose boundary group spills are read (a second, small sync)."""
    preds, ex, width = inp.preds, inp.ex, inp.width
    n, length = preds.shape
    device = preds.device
    top_n = min(width + 1, length)
    if ex is not None and most_excluded is not None and top_n + most_excluded <= max(length // 4, top_n):
        vals, idx = _top_skipping(preds, ex, top_n + most_excluded, top_n)
    else:
        key = _apply_exclude(preds, ex)
        vals, idx = torch.topk(key, top_n, dim=-1)
        del key
    positions = torch.arange(width, device=device)
    valid = positions < n_valid.unsqueeze(-1)
    has = n_valid > 0
    last = (n_valid.clamp(max=width) - 1).clamp(min=0)
    v = vals.gather(1, last.unsqueeze(-1)).squeeze(-1)
    top = vals[:, :width]
    start = ((top > v.unsqueeze(-1)) & valid).sum(-1)
    size = ((top == v.unsqueeze(-1)) & valid).sum(-1)
    if top_n > width:
        spilled = has & (n_valid > width) & (vals[:, width] == v)
    else:
        spilled = torch.zeros(n, dtype=torch.bool, device=device)
    pass_rows = spilled.nonzero().squeeze(-1) if host_reads else None
    return _Selection(vals, idx, positions, valid, n_valid, has, last, v, start, size, spilled, pass_rows)


def _assemble(
    inp: _Inputs, sel: _Selection, items: Tensor, row_stats: tuple | None
) -> tuple[TopKView, tuple[Tensor, Tensor] | None]:
    """Assemble stage: the view of the selection, with each position's tie group (under ``"average"``
    its start and WHOLE size, the row pass's for the boundary group). Returns the view and, under
    ``"average"``, (group id per position, in the boundary group) for the target statistics."""
    preds, width, valid, has = inp.preds, inp.width, sel.valid, sel.has
    n = preds.shape[0]
    size = sel.size
    if row_stats is not None:
        rows, n_full, _, replaced = row_stats
        size = size.index_copy(0, rows, n_full)
        if replaced is not None:
            items = items.index_copy(0, rows, replaced)
    # "average": the topk's own items and values; otherwise the scores of the ordered items
    averaged = inp.ties == "average"
    scores = torch.where(valid, sel.top if averaged else preds.gather(1, items), _neg_inf(preds.dtype, preds.device))
    size = torch.where(has, size, torch.zeros_like(size))
    view = TopKView(
        k=width,
        ties=inp.ties,
        items=items,
        scores=scores,
        valid=valid,
        n_valid=sel.n_valid,
        boundary_value=sel.v,
        boundary_start=torch.where(has, sel.start, torch.zeros_like(sel.start)),
        boundary_size=size,
        spilled=sel.spilled,
        group_start=sel.positions.expand(n, -1),
        group_size=valid.to(torch.int64),
        pass_rows=sel.pass_rows,
    )
    if not averaged:
        return view, None
    gid = _group_ids(sel.top, valid)
    in_boundary = (gid == gid.gather(1, sel.last.unsqueeze(-1))) & valid & has.unsqueeze(-1)
    sizes = _group_table(gid, valid.to(torch.int64))
    view.group_start = torch.where(valid, (sizes.cumsum(-1) - sizes).gather(1, gid), view.group_start)
    view.group_size = torch.where(in_boundary, size.unsqueeze(-1), sizes.gather(1, gid) * valid)
    return view, (gid, in_boundary)


def _add_target_stats(
    view: TopKView, inp: _Inputs, sel: _Selection, groups: tuple | None, row_stats: tuple | None, stats: tuple
) -> None:
    """Assemble stage, with a target: the grades, relevance and gains at each position, their tie
    groups' sums (the boundary group's from the sparse entries scored ``v``, or from the row pass
    for a dense target) and the row's facts (relevant count, ideal gains)."""
    st, valid, dtype = inp.st, sel.valid, inp.dtype
    device = valid.device
    grades = st.lookup(view.items) if st is not None else inp.dense.gather(1, view.items)
    grades = torch.where(valid, grades, torch.zeros((), dtype=grades.dtype, device=device))
    rel = (is_relevant(grades, inp.threshold) & valid).to(dtype)
    gains = torch.where(valid, inp.gain_f(grades.to(dtype)), torch.zeros((), dtype=dtype, device=device))
    view.grades, view.rel, view.gains = grades, rel, gains
    if groups is None:
        view.group_relevant, view.group_gain, view.group_gain_sq = rel, gains, gains * gains
        view.relevant_before, view.gain_before = rel.cumsum(-1) - rel, gains.cumsum(-1) - gains
    else:
        gid, in_boundary = groups
        tables = [_group_table(gid, x) for x in (rel, gains, gains * gains)]
        boundary = None
        if st is not None:
            boundary = _boundary_sums(inp.preds, st, sel.v, sel.has, inp.gain_f, dtype, inp.threshold)
        out = []
        for i, table in enumerate(tables):
            if boundary is not None:
                b = boundary[i]
            else:  # dense target: the view's sums, replaced by the row pass where it ran
                b = table.gather(1, gid.gather(1, sel.last.unsqueeze(-1))).squeeze(-1)
                if row_stats is not None:
                    b = b.index_copy(0, row_stats[0], row_stats[2][i])
            out.append(torch.where(in_boundary, b.unsqueeze(-1), table.gather(1, gid)))
        view.group_relevant, view.group_gain, view.group_gain_sq = out
        view.relevant_before = (tables[0].cumsum(-1) - tables[0]).gather(1, gid)
        view.gain_before = (tables[1].cumsum(-1) - tables[1]).gather(1, gid)
    view.n_relevant, view.ideal_gains, _, view.ideal_bottom = stats


def _top_skipping(preds: Tensor, ex: Tensor | SparseTarget, width: int, keep: int) -> tuple[Tensor, Tensor]:
    """The ``keep`` best non-excluded items of each row from ``topk(width)`` of the raw scores, where
    ``width - keep`` bounds the excluded items of any row; excluded slots go last (as ``-inf``)."""
    vals, idx = torch.topk(preds, width, dim=-1)
    excluded = ex.lookup(idx) if isinstance(ex, SparseTarget) else ex.gather(1, idx)
    vals = vals.masked_fill(excluded, float("-inf"))
    order = torch.sort(excluded.to(torch.uint8), dim=-1, stable=True).indices[:, :keep]  # keeps the score order
    return vals.gather(1, order), idx.gather(1, order)


def _target_checks(
    st: SparseTarget | None,
    dense: Tensor | None,
    ex: Exclude,
    gain: Any,
    gain_f,  # noqa: ANN001
    dtype: torch.dtype,
    device: torch.device,
    uses_gain: bool,
    gain_sums: Tensor | None,
) -> list[Check]:
    """The dense path's grade checks (:func:`~torch_rankeval.ranking.inputs.grade_checks`, same
    messages) over the items that count, then what a sparse target adds: gains ``>= 0`` and
    ``gain(0) == 0`` (absent items are grade 0). The gain checks only when a measure reads gains."""
    exp2 = uses_gain and isinstance(gain, str) and gain == "exp2"
    wide = dtype == torch.float64
    if dense is not None:
        checks = grade_checks(dense, lambda bad: _any_unexcluded(bad, ex), name="target", exp2=exp2, wide=wide)
    else:
        counted = st.counted_mask()
        checks = grade_checks(st.grades, lambda bad: (bad & counted).any(), name="target", exp2=exp2, wide=wide)
    if not uses_gain:
        return checks
    if st is not None:
        zero = gain_f(torch.zeros(1, dtype=dtype, device=device))
        checks += [
            (
                (zero != 0).any(),
                "a sparse target treats absent items as grade 0, so the gain must map grade 0 to 0; "
                "use a gain with gain(0) == 0 or a dense target",
            ),
            (
                (st.gains(gain_f, dtype) < 0).any(),
                "the gains of a sparse target's grades must be >= 0: a sparse target treats absent items as "
                "grade 0 (gain 0), which would outrank them in the ideal ranking; use a dense target",
            ),
        ]
    if gain_sums is not None:
        checks.append((~torch.isfinite(gain_sums).all(), GAINS_NOT_FINITE))
    return checks


def _order_view(vals: Tensor, idx: Tensor, st: SparseTarget | None, dense: Tensor | None, ties: str) -> Tensor:
    """The view's items ordered by (score desc, [grade asc / desc,] index asc): stable sorts of ``(N, W + 1)``."""
    order = torch.sort(idx, dim=-1, stable=True).indices
    idx, vals = idx.gather(1, order), vals.gather(1, order)
    if ties in ("pessimistic", "optimistic") and (st is not None or dense is not None):
        grades = (st.lookup(idx) if st is not None else dense.gather(1, idx)).to(torch.float64)
        order = torch.sort(grades, dim=-1, descending=ties == "optimistic", stable=True).indices
        idx, vals = idx.gather(1, order), vals.gather(1, order)
    order = torch.sort(vals, dim=-1, descending=True, stable=True).indices
    return idx.gather(1, order)


def _row_pass(
    inp: _Inputs, sel: _Selection, ordered: Tensor, chunk_elements: int
) -> tuple[Tensor, Tensor, list[Tensor] | None, Tensor | None] | None:
    """Row-pass stage: the full-row work for the rows whose boundary group may spill past the view
    (``sel.pass_rows``; None: all rows): the group size over the row, a dense target's group sums,
    and the boundary members under the deterministic policies (``ordered``: the view's items in the
    policy's order). Returns (rows, sizes, dense sums, replaced items) or None.

    The comparison runs on the raw scores (a view of each row chunk, no copy); excluded items that
    tie with ``v`` are masked out (dense ``exclude``) or subtracted from the counts entry by entry
    (sparse; NaN / infinite scores there never equal ``v``). A dense target's group sums mask a
    sparse ``exclude`` per chunk instead: an excluded item may hold any grade, NaN included."""
    preds, ex, ties, rows = inp.preds, inp.ex, inp.ties, sel.pass_rows
    n, length = preds.shape
    if rows is not None and rows.numel() == 0:
        return None
    averaged_dense = inp.dense is not None and ties == "average"
    # Sparse exclude: the excluded items scored v, per row (entry work, once).
    ex_eq = None
    if isinstance(ex, SparseTarget) and ex.nnz:
        ex_eq = (
            ex.counted_mask() & (_at(preds, ex) == sel.v.index_select(0, ex.rows)) & sel.has.index_select(0, ex.rows)
        )
        ex_eq_count = ex.row_sum(ex_eq.to(torch.int64))
    done, sizes, replaced = [], [], []
    sums: list[list[Tensor]] = [[], [], []]
    for chunk, span in _chunks(rows, n, length, chunk_elements, preds.device):
        eq = _boundary_mask(preds, ex, sel.v, sel.has, chunk, span)
        count = eq.sum(-1, dtype=torch.int32).to(torch.int64)
        if ex_eq is not None:
            count -= ex_eq_count.index_select(0, chunk)
        sizes.append(count)
        if averaged_dense:
            members = eq if ex_eq is None else eq & ~_excluded_rows(ex, chunk, n, length)
            for out, chunk_sum in zip(sums, _dense_group_sums(inp, members, chunk, span)):
                out.append(chunk_sum)
        if ties == "first":
            start, order = sel.start.index_select(0, chunk), ordered.index_select(0, chunk)
            replaced.append(_first_members(eq, chunk, ex, start, order, inp.width))
        elif ties in ("pessimistic", "optimistic"):
            block = _key_rows(preds, ex, chunk)
            replaced.append(_sorted_rows(block, chunk, inp.dense, inp.st, ties, inp.width, inp.dtype))
        done.append(chunk)
        del eq
    if not done:
        return None
    cat = torch.cat
    dense_sums = [cat(s) for s in sums] if sums[0] else None
    return cat(done), cat(sizes), dense_sums, (cat(replaced) if replaced else None)


def _dense_group_sums(inp: _Inputs, members: Tensor, chunk: Tensor, span: slice | None) -> tuple[Tensor, ...]:
    """Relevant count, gain sum and squared-gain sum of each chunk row's boundary group (``members``,
    ``(R, L)`` bool) under a dense target."""
    dense, dtype = inp.dense, inp.dtype
    grades = dense[span] if span is not None else dense.index_select(0, chunk)
    g = torch.where(members, inp.gain_f(grades.to(dtype)), torch.zeros((), dtype=dtype, device=members.device))
    n_rel = (is_relevant(grades, inp.threshold) & members).sum(-1, dtype=torch.int32).to(dtype)
    return n_rel, g.sum(-1), (g * g).sum(-1)


def _first_members(eq: Tensor, chunk: Tensor, ex: Exclude, start: Tensor, ordered: Tensor, width: int) -> Tensor:
    """``ties="first"``: the items strictly above the boundary (``ordered``: the view's items in (score
    desc, index asc) order, whose first ``s`` are exactly those) and then the boundary group's
    members by increasing index (an int32 key ``L - index`` on the group, one ``topk``), ``(R, W)``."""
    length = eq.shape[1]
    key_dtype = torch.int32 if length < 2**31 - 1 else torch.int64
    reverse = torch.arange(length, 0, -1, device=eq.device, dtype=key_dtype)  # L - index: larger = earlier
    key = torch.where(eq, reverse, torch.zeros((), dtype=key_dtype, device=eq.device))
    if isinstance(ex, SparseTarget):  # excluded items sink below every candidate (eq was taken on the raw scores)
        below = torch.full((ex.nnz,), -length - 1, dtype=key_dtype, device=eq.device)
        _scatter_rows(key, chunk, ex.shape[0], ex, below, ex.counted_mask())
    members = torch.topk(key, width, dim=-1).indices
    p = torch.arange(width, device=eq.device).expand_as(members)
    from_group = members.gather(1, (p - start.unsqueeze(-1)).clamp(min=0))
    return torch.where(p < start.unsqueeze(-1), ordered, from_group)


def boundary_histogram(
    preds: Tensor,
    view: TopKView,
    weights: Tensor,
    exclude: Exclude = None,
    *,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> Tensor:
    """``(L,)`` float64: ``sum_r weights[r] * [item i is in row r's boundary tie group]`` over the rows
    whose boundary group spills past the view (rows that do not spill add nothing: their whole
    group is in the view). ``exclude`` must be the one the view was built with (dense, sparse, or
    the canonical form). Works in row chunks (a bool mask and a float64 copy of it per chunk); only
    the spilled rows are read when the view knows them (:attr:`TopKView.pass_rows`: validated, or
    unvalidated on the CPU in eager mode), else every row. Used by ``ItemExposure`` to spread a tie
    group's remaining slots over all its members.

    Example:
        >>> import torch
        >>> scores = torch.tensor([[0.9, 0.5, 0.5, 0.5]])
        >>> view = topk_view(scores, 2)               # one slot left for 3 tied items
        >>> boundary_histogram(scores, view, torch.tensor([1 / 3], dtype=torch.float64))
        tensor([0.0000, 0.3333, 0.3333, 0.3333], dtype=torch.float64)
    """
    n, length = preds.shape
    device = preds.device
    ex = None if exclude is None else check_exclude(exclude, (n, length), device, validate_args=False)
    hist = torch.zeros(length, dtype=torch.float64, device=device)
    rows = view.pass_rows
    if rows is not None and rows.numel() == 0:
        return hist
    has = view.n_valid > 0
    v = view.boundary_value
    w = torch.where(view.spilled & has, weights.to(torch.float64), torch.zeros((), dtype=torch.float64, device=device))
    for chunk, span in _chunks(rows, n, length, chunk_elements, device):
        eq = _boundary_mask(preds, ex, v, has, chunk, span)
        hist += w.index_select(0, chunk) @ eq.to(torch.float64)
        del eq
    if isinstance(ex, SparseTarget) and ex.nnz:  # excluded items tied with v: take their share back
        tied = ex.counted_mask() & (_at(preds, ex) == v.index_select(0, ex.rows)) & has.index_select(0, ex.rows)
        # w is 0 outside the spilled rows, all of which were read
        share = torch.where(tied, w.index_select(0, ex.rows), torch.zeros((), dtype=torch.float64, device=device))
        hist.index_add_(0, ex.items, -share)
    return hist


def boundary_sums(
    preds: Tensor,
    view: TopKView,
    features: Tensor,
    exclude: Exclude = None,
    *,
    doc: Tensor | SparseTarget | None = None,
    num_classes: int | None = None,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> Tensor:
    """``(N, D)`` float64: per row ``r`` whose boundary group spills past the view, the sum over the
    members ``i`` of that WHOLE group (non-excluded items scored ``view.boundary_value[r]``) of
    ``doc[r, i] * features[i]``; 0 for the other rows (their whole group is in the view).

    ``features``: ``(L, D)`` per-item vectors (e.g. item embeddings), or ``(L,)`` integer classes in
    ``[0, num_classes)`` (then ``D = num_classes`` and the sums are per-class histograms: the
    one-hot vectors are never built); ``doc``: optional per-(row, item) weights, a dense ``(N, L)``
    tensor or a :class:`SparseTarget` (then only its entries are read, no pass over the scores);
    ``exclude`` and the rows read as in :func:`boundary_histogram` (its chunks, times ``features``).
    Used by the beyond-accuracy metrics (``IntraListDiversity``, ``Novelty``, ``Serendipity``) to
    take the expectation over the orders of the items tied at the cutoff.

    Example:
        >>> import torch
        >>> scores = torch.tensor([[0.9, 0.5, 0.5, 0.5]])
        >>> view = topk_view(scores, 2)               # items 1, 2, 3 tie for the last slot
        >>> boundary_sums(scores, view, torch.tensor([[1.0], [2.0], [4.0], [8.0]]))
        tensor([[14.]], dtype=torch.float64)
        >>> boundary_sums(scores, view, torch.tensor([0, 1, 1, 0]), num_classes=2)   # classes of the tied items
        tensor([[1., 2.]], dtype=torch.float64)
    """
    n, length = preds.shape
    device = preds.device
    if not features.is_floating_point() and num_classes is None:
        raise ValueError("boundary_sums: integer features are classes: pass num_classes=")
    table = _FeatureSums(features, num_classes, n, device)
    ex = None if exclude is None else check_exclude(exclude, (n, length), device, validate_args=False)
    zero = torch.zeros((), dtype=torch.float64, device=device)
    on = view.spilled & (view.n_valid > 0)
    v = view.boundary_value
    if isinstance(doc, SparseTarget):
        st = doc.excluding(ex)
        tied = st.counted_mask() & on.index_select(0, st.rows) & (_at(preds, st) == v.index_select(0, st.rows))
        return table.add_entries(st.rows, st.items, torch.where(tied, st.grades.to(torch.float64), zero))
    rows = view.pass_rows
    if rows is not None and rows.numel() == 0:
        return table.out
    for chunk, span in _chunks(rows, n, length, chunk_elements, device):
        eq = _boundary_mask(preds, ex, v, on, chunk, span)
        if doc is None:
            w = eq.to(torch.float64)
        else:
            d = doc[span] if span is not None else doc.index_select(0, chunk)
            w = torch.where(eq, d.to(torch.float64), zero)
        table.set_rows(chunk, w)
        del eq, w
    if isinstance(ex, SparseTarget) and ex.nnz:  # excluded items tied with v: take them back out
        tied = ex.counted_mask() & on.index_select(0, ex.rows) & (_at(preds, ex) == v.index_select(0, ex.rows))
        w = torch.where(tied, torch.ones((), dtype=torch.float64, device=device), zero)
        if doc is not None:
            w = w * _at(doc, ex).to(torch.float64)
        table.add_entries(ex.rows, ex.items, -w)
    return table.out


class _FeatureSums:
    """The ``(N, D)`` float64 sums of :func:`boundary_sums`: per-item vectors ``(L, D)``, or integer
    classes ``(L,)`` summed as per-class histograms (``D = num_classes``, no one-hot vectors)."""

    def __init__(self, features: Tensor, num_classes: int | None, n: int, device: torch.device) -> None:
        if features.is_floating_point():
            self.classes, self.features = None, features.to(torch.float64)
            self.width = self.features.shape[-1]
        else:
            self.classes, self.features, self.width = features.long(), None, num_classes
        self.out = torch.zeros(n, self.width, dtype=torch.float64, device=device)

    def add_entries(self, rows: Tensor, items: Tensor, w: Tensor) -> Tensor:
        """Add ``w[e] * features[items[e]]`` to row ``rows[e]`` for each entry ``e``."""
        if self.classes is None:
            return self.out.index_add_(0, rows, self.features.index_select(0, items) * w.unsqueeze(-1))
        return self.out.index_put_((rows, self.classes.index_select(0, items)), w, accumulate=True)

    def set_rows(self, chunk: Tensor, w: Tensor) -> None:
        """Rows ``chunk`` of the sums: ``w @ features`` for the per-item weights ``w`` ``(R, L)``."""
        if self.classes is None:
            self.out.index_copy_(0, chunk, w @ self.features)
        else:
            hist = torch.zeros(w.shape[0], self.width, dtype=torch.float64, device=w.device)
            self.out.index_copy_(0, chunk, hist.index_add_(1, self.classes, w))


def _sorted_rows(
    block: Tensor, chunk: Tensor, dense: Tensor | None, st: SparseTarget | None, ties: str, width: int, dtype
) -> Tensor:
    """Full stable sort of rows by (score desc, grade asc / desc, index asc): the documented fallback of
    ``"pessimistic"`` / ``"optimistic"`` for rows whose boundary group spills past the view."""
    if dense is not None:
        grades = dense.index_select(0, chunk).to(dtype)
    else:
        grades = torch.zeros(block.shape, dtype=dtype, device=block.device)
        if st is not None:
            _scatter_rows(grades, chunk, st.shape[0], st, st.grades.to(dtype), st.counted_mask())
    pre = torch.sort(grades, dim=-1, descending=ties == "optimistic", stable=True).indices
    inner = torch.sort(block.gather(1, pre), dim=-1, descending=True, stable=True).indices[:, :width]
    return pre.gather(1, inner)


def _group_ids(top: Tensor, valid: Tensor) -> Tensor:
    """Tie-group index of each view position (a new group where the score changes; invalid
    positions are groups of their own)."""
    new = torch.ones_like(valid)
    new[:, 1:] = top[:, 1:] != top[:, :-1]
    return (new | ~valid).cumsum(-1) - 1


def _group_table(gid: Tensor, x: Tensor) -> Tensor:
    return torch.zeros_like(x).scatter_add_(1, gid, x)


def _boundary_sums(preds, st: SparseTarget, v, has, gain_f, dtype, threshold) -> list[Tensor]:
    """Relevant count, gain sum and squared-gain sum of each row's entries scored ``v`` (the whole
    boundary group's, from the sparse entries: ``(nnz,)`` work)."""
    n = preds.shape[0]
    if st.nnz == 0:
        z = torch.zeros(n, dtype=dtype, device=preds.device)
        return [z, z, z]
    eq = st.counted_mask() & (_at(preds, st) == v.index_select(0, st.rows)) & has.index_select(0, st.rows)
    g = torch.where(eq, st.gains(gain_f, dtype), torch.zeros((), dtype=dtype, device=preds.device))
    return [st.row_sum((st.relevant(threshold) & eq).to(dtype)), st.row_sum(g), st.row_sum(g * g)]


def _row_target_stats(
    inp: _Inputs, n_valid: Tensor, chunk_elements: int, *, gain_sums: bool, bottom: bool
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """(n_relevant, ideal top-W gains, gain sum per row or None, lowest W gains per row or None):
    the sums when ``gain_sums`` (for the check that gains are finite), the lowest gains (ascending,
    0 past ``n_valid``) when ``bottom``."""
    st, dense, ex, width, gain_f, dtype, threshold = (
        inp.st, inp.dense, inp.ex, inp.width, inp.gain_f, inp.dtype, inp.threshold
    )  # fmt: skip
    if st is not None:
        sums = st.row_sum(st.gains(gain_f, dtype)) if gain_sums else None
        return st.n_relevant(threshold).to(dtype), st.ideal_top_gains(width, gain_f, dtype), sums, None
    n, length = dense.shape
    counts, ideals, totals, lows = [], [], [], []
    slots = torch.arange(width, device=dense.device)
    zero = torch.zeros((), dtype=dtype, device=dense.device)
    for chunk, _ in _chunks(None, n, length, chunk_elements, dense.device):
        grades = dense.index_select(0, chunk)
        rel = is_relevant(grades, threshold)
        g = gain_f(grades.to(dtype))
        inside = slots < n_valid.index_select(0, chunk).unsqueeze(-1)
        mask = None if ex is None else _excluded_rows(ex, chunk, n, length)

        def without(fill: float) -> Tensor:  # the gains with `fill` at the excluded items
            return g if mask is None else g.masked_fill(mask, fill)

        if mask is not None:
            rel = rel & ~mask
        if gain_sums:
            totals.append(without(0).sum(-1))
        if bottom:
            lows.append(torch.where(inside, torch.topk(without(float("inf")), width, largest=False).values, zero))
        g = without(float("-inf"))
        counts.append(rel.sum(-1).to(dtype))
        ideals.append(torch.where(inside, torch.topk(g, width, dim=-1).values, zero))
    if not counts:
        empty = torch.zeros(0, width, dtype=dtype, device=dense.device)
        return empty[:, 0], empty, (empty[:, 0] if gain_sums else None), (empty if bottom else None)
    cat = torch.cat
    return cat(counts), cat(ideals), (cat(totals) if gain_sums else None), (cat(lows) if bottom else None)


def _excluded_rows(ex: Exclude, rows: Tensor, n: int, length: int) -> Tensor:
    """``(R, L)`` bool: the excluded items of the rows ``rows``."""
    if not isinstance(ex, SparseTarget):
        return ex.index_select(0, rows)
    mask = torch.zeros(rows.shape[0], length, dtype=torch.uint8, device=rows.device)
    ones = torch.ones(ex.nnz, dtype=torch.uint8, device=rows.device)
    return _scatter_rows(mask, rows, n, ex, ones, ex.counted_mask()) > 0
