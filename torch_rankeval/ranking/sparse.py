"""Sparse targets: ``(N, L)`` grades as a torch sparse tensor (absent item = grade 0), without a dense copy.

A recommender scores every item of a catalogue of ``L`` items for each of ``N`` users, and only a
handful of items per user are relevant. Storing those grades densely costs ``N x L`` numbers; a torch
sparse tensor (COO or CSR) stores only the ``nnz`` judged entries. This module checks such a target
and turns it into a :class:`SparseTarget`: the entries as flat ``(nnz,)`` tensors sorted by ``(row,
item)``, with the lookups the ranking core needs (grades of ``(row, item)`` pairs, the number of
relevant items per row, the ideal top-``k`` gains per row), none of which builds an ``(N, L)`` tensor.

Conventions:

- **Absent = grade 0.** An item without an entry has grade 0: not relevant and gain 0. Hence a sparse
  target needs a gain with ``gain(0) == 0`` (``"exp2"``, ``"linear"``, most mappings), grades
  ``>= 0`` and a ``relevance_threshold`` above 0 (or None); anything else is refused with a
  ``ValueError`` (use a dense target for those conventions). Explicit zero entries are allowed.
- **Duplicates are an error.** Two entries for the same ``(row, item)`` (an uncoalesced COO tensor, or
  a hand-built CSR tensor) are refused with ``validate_args=True``: ``coalesce()`` would *sum* the two
  grades, which is rarely what a duplicated judgement means. With ``validate_args=False`` nothing
  reads the values; the first entry (in input order) is kept and the later ones do not count.
- **Excluded items** (``exclude=``, :meth:`SparseTarget.excluding`): items never ranked and never
  counted, e.g. the items a user interacted with in training. An excluded item that is also in the
  target does not count either: it is not relevant, it is not in the ideal ranking, and it is not in
  ``n_relevant`` -- exactly as a ``mask=False`` position of a dense target.

Example:
    >>> import torch
    >>> from torch_rankeval.ranking.sparse import sparse_from_ids, sparse_target
    >>> target = sparse_from_ids(torch.tensor([[3, 0, -1], [1, -1, -1]]), num_items=5,
    ...                          grades=torch.tensor([[2, 1, 0], [1, 0, 0]]))
    >>> target.to_dense()
    tensor([[1, 0, 0, 2, 0],
            [0, 1, 0, 0, 0]])
    >>> st = sparse_target(target, (2, 5))
    >>> st.rows, st.items, st.grades
    (tensor([0, 0, 1]), tensor([0, 3, 1]), tensor([1, 2, 1]))
    >>> st.n_relevant()
    tensor([2, 1])
    >>> st.ideal_top_gains(2, gain="linear")
    tensor([[2., 1.],
            [1., 0.]])
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from torch_rankeval.conventions import gain_fn

__all__ = [
    "Check",
    "SparseTarget",
    "check_exclude",
    "is_relevant",
    "is_sparse",
    "resolve_checks",
    "sparse_from_ids",
    "sparse_target",
]

#: A value check resolved later in one host sync: (flag tensor, error message).
Check = tuple[Tensor, str]

_SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr)
GainSpec = Any  # "exp2" | "linear" | Mapping | Callable


def is_sparse(t: Any) -> bool:
    """Whether ``t`` is a torch sparse tensor of a layout this library reads (COO or CSR).

    Example:
        >>> import torch
        >>> is_sparse(torch.eye(2).to_sparse()), is_sparse(torch.eye(2))
        (True, False)
    """
    return isinstance(t, Tensor) and t.layout in _SPARSE_LAYOUTS


def is_relevant(grades: Tensor, threshold: float | None = None) -> Tensor:
    """Binary relevance of grades: ``grades >= threshold`` when a threshold is given, else ``grade >= 1``
    for integer grades, ``grade > 0`` for float grades and the value itself for bool grades (the
    rule of the dense kernels).

    Example:
        >>> import torch
        >>> is_relevant(torch.tensor([0, 1, 2])), is_relevant(torch.tensor([0.0, 0.5]), threshold=1.0)
        (tensor([False,  True,  True]), tensor([False, False]))
    """
    if grades.dtype == torch.bool and threshold is None:
        return grades
    if threshold is not None:
        return grades >= threshold
    return grades > 0 if grades.is_floating_point() else grades >= 1


def resolve_checks(checks: list[Check], extra: Tensor | None = None) -> Tensor | None:
    """Resolve value checks in ONE host sync and raise the first failing one (``ValueError``).

    ``extra`` (a 1-D bool or integer tensor) rides along in the same transfer and comes back on the
    host as int64 (None when not given). Used by the validated entry points; unvalidated calls never get here.

    Example:
        >>> import torch
        >>> resolve_checks([(torch.tensor(False), "fine")], extra=torch.tensor([7, 0]))
        tensor([7, 0])
        >>> resolve_checks([(torch.tensor(True), "target has negative grades")])
        Traceback (most recent call last):
        ...
        ValueError: target has negative grades
    """
    flags = [flag.reshape(1).to(torch.int64) for flag, _ in checks]
    if extra is not None:
        flags.append(extra.reshape(-1).to(torch.int64))
    if not flags:
        return None
    device = flags[0].device
    host = torch.cat([f.to(device) for f in flags]).cpu()
    for i, (_, message) in enumerate(checks):
        if bool(host[i]):
            raise ValueError(message)
    return host[len(checks) :] if extra is not None else None


@dataclasses.dataclass(frozen=True)
class SparseTarget:
    """A sparse ``(N, L)`` target in canonical form: flat entries sorted by ``(row, item)``.

    Build one with :func:`sparse_target` (from a torch sparse tensor) or :meth:`from_dense`. All
    tensors live on the target's device; nothing here has ``N x L`` elements.

    Attributes:
        shape: ``(N, L)``.
        rows: ``(nnz,)`` int64 row (query / user) of each entry, non-decreasing.
        items: ``(nnz,)`` int64 item (column) of each entry, increasing within a row.
        grades: ``(nnz,)`` the grades, in the input's dtype (bool, integer or float).
        keys: ``(nnz,)`` int64 ``rows * L + items``, sorted: the lookup key of :meth:`lookup`.
        crow: ``(N + 1,)`` int64 row pointers: the entries of row ``r`` are ``crow[r]:crow[r + 1]``.
        counted: ``(nnz,)`` bool, False for entries that do not count (excluded items, later
            duplicates when unvalidated); None when every entry counts.

    Example:
        >>> import torch
        >>> st = SparseTarget.from_dense(torch.tensor([[0, 2, 0, 1], [0, 0, 0, 0]]))
        >>> st.crow, st.items, st.grades
        (tensor([0, 2, 2]), tensor([1, 3]), tensor([2, 1]))
        >>> st.lookup(torch.tensor([[0, 1], [3, 3]]))          # grades of items (0,1) / (3,3) per row
        tensor([[0, 2],
                [0, 0]])
    """

    shape: tuple[int, int]
    rows: Tensor
    items: Tensor
    grades: Tensor
    keys: Tensor
    crow: Tensor
    counted: Tensor | None = None

    # ------------------------------------------------------------------ construction
    @staticmethod
    def from_dense(target: Tensor) -> SparseTarget:
        """The non-zero entries of a dense ``(N, L)`` target. Reads the number of entries from the
        device (a host sync): a preparation step, not for a compiled hot path.

        Example:
            >>> import torch
            >>> SparseTarget.from_dense(torch.tensor([[0.0, 0.5]])).grades
            tensor([0.5000])
        """
        if not isinstance(target, Tensor) or target.ndim != 2:
            raise ValueError("SparseTarget.from_dense needs a 2-D (N, L) tensor")
        n, length = target.shape
        rows, items = (target != 0).nonzero(as_tuple=True)
        return _assemble(n, length, rows, items, target[rows, items], counted=None)

    # ------------------------------------------------------------------ views
    @property
    def nnz(self) -> int:
        """Number of stored entries (host metadata, no sync)."""
        return self.keys.shape[0]

    @property
    def device(self) -> torch.device:
        return self.keys.device

    def counted_mask(self) -> Tensor:
        """``(nnz,)`` bool: the entries that count (all True unless excluded / duplicated)."""
        if self.counted is None:
            return torch.ones(self.nnz, dtype=torch.bool, device=self.device)
        return self.counted

    def relevant(self, threshold: float | None = None) -> Tensor:
        """``(nnz,)`` bool: entries that count and are relevant (see :func:`is_relevant`)."""
        rel = is_relevant(self.grades, threshold)
        return rel if self.counted is None else rel & self.counted

    def gains(self, gain: GainSpec = "exp2", dtype: torch.dtype = torch.float32) -> Tensor:
        """``(nnz,)`` gains of the entries in ``dtype``; 0 for entries that do not count."""
        g = _gain_callable(gain)(self.grades.to(dtype))
        return (
            g if self.counted is None else torch.where(self.counted, g, torch.zeros((), dtype=dtype, device=g.device))
        )

    def lookup(self, items: Tensor, rows: Tensor | None = None) -> Tensor:
        """Grades of ``(row, item)`` pairs without densifying: a binary search of ``row * L + item`` in
        :attr:`keys`. ``items`` is ``(N, W)`` (row ``r`` of ``items`` is looked up in row ``r``) or
        any shape with ``rows`` of the same shape. Absent or not counted: 0 (in the grades' dtype).
        Items must lie in ``[0, L)``.

        Example:
            >>> import torch
            >>> st = SparseTarget.from_dense(torch.tensor([[0, 3], [1, 0]]))
            >>> st.lookup(torch.tensor([1, 0, 1]), rows=torch.tensor([0, 1, 1]))
            tensor([3, 1, 0])
        """
        if rows is None:
            if items.ndim != 2 or items.shape[0] != self.shape[0]:
                raise ValueError(
                    f"lookup: items must be (N, W) with N = {self.shape[0]}, or pass rows, got {tuple(items.shape)}"
                )
            rows = torch.arange(self.shape[0], device=items.device).unsqueeze(-1).expand_as(items)
        found, pos = self._find(rows.reshape(-1) * self.shape[1] + items.reshape(-1))
        grades = self.grades.index_select(0, pos) if self.nnz else torch.zeros_like(pos, dtype=self.grades.dtype)
        zero = torch.zeros((), dtype=self.grades.dtype, device=grades.device)
        return torch.where(found, grades, zero).reshape(items.shape)

    def _find(self, keys: Tensor) -> tuple[Tensor, Tensor]:
        """(found, entry position) of flat keys: found only where an entry exists and counts."""
        if self.nnz == 0:
            return torch.zeros_like(keys, dtype=torch.bool), torch.zeros_like(keys)
        pos = torch.searchsorted(self.keys, keys).clamp_(max=self.nnz - 1)
        found = self.keys.index_select(0, pos) == keys
        if self.counted is not None:
            found &= self.counted.index_select(0, pos)
        return found, pos

    def n_relevant(self, threshold: float | None = None) -> Tensor:
        """``(N,)`` int64: relevant entries per row that count (excluded items are not counted)."""
        return self.row_sum(self.relevant(threshold).to(torch.int64))

    def row_sum(self, values: Tensor) -> Tensor:
        """``(N,)`` per-row sums of per-entry ``values`` (``(nnz,)``)."""
        return torch.zeros(self.shape[0], dtype=values.dtype, device=values.device).index_add_(0, self.rows, values)

    def ideal_top_gains(self, k: int, gain: GainSpec = "exp2", dtype: torch.dtype = torch.float32) -> Tensor:
        """``(N, k)`` the ``k`` largest gains of each row in decreasing order, 0-padded: the ideal
        ranking's gains at positions ``1..k`` (IDCG@k, with absent items at gain 0).

        One global sort of the ``nnz`` entries by (row, gain descending); an entry's position in its
        row is its sorted index minus the row's start. No ``(N, L)`` tensor. Needs gains ``>= 0``
        (absent items have gain 0 and would otherwise outrank a negative entry; checked by the
        validated entry points).

        Example:
            >>> import torch
            >>> SparseTarget.from_dense(torch.tensor([[1, 0, 3, 2]])).ideal_top_gains(2)   # 2**g - 1
            tensor([[7., 3.]])
        """
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise ValueError(f"k must be a positive int, got {k!r}")
        n = self.shape[0]
        out = torch.zeros(n * k + 1, dtype=dtype, device=self.device)  # last slot: a sink for entries past k
        if self.nnz == 0:
            return out[:-1].view(n, k)
        g = self.gains(gain, dtype)
        by_gain = torch.sort(g, descending=True, stable=True).indices
        by_row = torch.sort(self.rows.index_select(0, by_gain), stable=True).indices
        order = by_gain.index_select(0, by_row)  # rows non-decreasing, gains decreasing within a row
        rows = self.rows  # the sorted rows equal the canonical rows (same non-decreasing sequence)
        slot = torch.arange(self.nnz, device=self.device) - self.crow.index_select(0, rows)
        index = torch.where(slot < k, rows * k + slot, torch.full_like(slot, n * k))
        out.scatter_(0, index, g.index_select(0, order))
        return out[:-1].view(n, k)

    def excluding(self, exclude: Tensor | SparseTarget | None) -> SparseTarget:
        """The same target with the entries at excluded items marked as not counting.

        ``exclude``: an ``(N, L)`` bool tensor (dense, or sparse with True at excluded items), or a
        canonical :class:`SparseTarget` of bool values (:func:`check_exclude`). None: unchanged.

        Example:
            >>> import torch
            >>> st = SparseTarget.from_dense(torch.tensor([[1, 1, 0]]))
            >>> st.excluding(torch.tensor([[False, True, True]])).n_relevant()
            tensor([1])
        """
        if exclude is None or self.nnz == 0:
            return self
        if isinstance(exclude, SparseTarget):
            excluded = exclude.lookup(self.items, rows=self.rows)
        elif is_sparse(exclude):
            excluded = check_exclude(exclude, self.shape, self.device).lookup(self.items, rows=self.rows)
        else:
            excluded = _at(exclude, self)
        counted = ~excluded if self.counted is None else self.counted & ~excluded
        return dataclasses.replace(self, counted=counted)

    def to_dense(self) -> Tensor:
        """The ``(N, L)`` dense grades (entries that do not count are 0). For tests and small data.

        Example:
            >>> import torch
            >>> SparseTarget.from_dense(torch.tensor([[0, 2]])).to_dense()
            tensor([[0, 2]])
        """
        n, length = self.shape
        out = torch.zeros(n * length, dtype=self.grades.dtype, device=self.device)
        if self.counted is None:
            return out.index_put_((self.keys,), self.grades).view(n, length)
        # Entries that do not count add 0 (with accumulate, a duplicate key never overwrites its first entry).
        grades = torch.where(self.counted, self.grades, torch.zeros_like(self.grades))
        return out.index_put_((self.keys,), grades, accumulate=True).view(n, length)


def _at(x: Tensor, st: SparseTarget) -> Tensor:
    """``x[st.rows, st.items]`` for an ``(N, L)`` tensor: ``index_select`` on the flat keys when ``x``
    is contiguous (much faster than advanced indexing on CPU)."""
    if x.is_contiguous():
        return x.view(-1).index_select(0, st.keys)
    return x[st.rows, st.items]


def _gain_callable(gain: GainSpec) -> Callable[[Tensor], Tensor]:
    return gain_fn(gain) if isinstance(gain, (str, Mapping)) else gain


def _assemble(
    n: int, length: int, rows: Tensor, items: Tensor, grades: Tensor, *, counted: Tensor | None, sort: bool = True
) -> SparseTarget:
    rows, items = rows.to(torch.int64), items.to(torch.int64)
    keys = rows * length + items
    if sort and keys.numel():
        order = torch.sort(keys, stable=True).indices
        keys, rows, items, grades = keys[order], rows[order], items[order], grades[order]
        counted = None if counted is None else counted[order]
    crow = torch.searchsorted(keys, torch.arange(n + 1, device=keys.device, dtype=torch.int64) * length)
    return SparseTarget((n, length), rows, items, grades, keys, crow, counted)


def _check_layout(t: Any, name: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.layout not in _SPARSE_LAYOUTS:
        raise TypeError(
            f"{name} has layout {t.layout}; a sparse {name} must be torch.sparse_coo or torch.sparse_csr "
            f"(convert with {name}.to_sparse_coo() or {name}.to_sparse_csr())"
        )
    if t.ndim != 2 or (t.layout == torch.sparse_coo and (t.sparse_dim() != 2 or t.dense_dim() != 0)):
        raise ValueError(f"{name} must be a 2-D sparse tensor (N, L) with scalar values, got shape {tuple(t.shape)}")


def _entries(t: Tensor) -> tuple[Tensor, Tensor, Tensor, bool]:
    """(rows, items, values, sorted) of a COO or CSR tensor, without a host sync."""
    if t.layout == torch.sparse_coo:
        indices, values = t._indices(), t._values()
        return indices[0], indices[1], values, t.is_coalesced()
    crow, col, values = t.crow_indices(), t.col_indices(), t.values()
    # the row of entry e: the last row pointer <= e (repeat_interleave is far slower on CPU)
    rows = torch.searchsorted(crow, torch.arange(col.shape[0], device=crow.device, dtype=crow.dtype), right=True) - 1
    return rows, col, values, False  # columns of a hand-built CSR tensor need not be sorted


def sparse_target(
    target: Tensor,
    shape: tuple[int, int],
    *,
    name: str = "target",
    device: torch.device | None = None,
    validate_args: bool = True,
    checks: list[Check] | None = None,
    grade_checks: bool = True,
) -> SparseTarget:
    """Check a sparse ``(N, L)`` target and return its canonical :class:`SparseTarget`.

    Args:
        target: a torch sparse tensor, layout ``torch.sparse_coo`` or ``torch.sparse_csr``, shape
            ``(N, L)``, bool / integer / float grades as values (absent = grade 0).
        shape: the expected ``(N, L)`` (that of ``preds``).
        name: the argument name used in error messages.
        device: the expected device (that of ``preds``); None: not checked.
        validate_args: run the checks that read values (negative, NaN or infinite grades, item or
            row indices out of range, duplicate entries); they need a host sync. Structure checks
            (type, layout, 2-D, shape, dtype, device) always run.
        checks: when given, the value checks are appended to it instead of being resolved here, so a
            caller can resolve them together with its own in one sync (:func:`resolve_checks`).
        grade_checks: check the grades' values (finite, ``>= 0``); False leaves them to a caller that
            checks only the entries that count (the top-k view: excluded items may hold any grade).

    Raises:
        TypeError: not a tensor, not COO/CSR, complex values.
        ValueError: not 2-D, wrong shape, other device, bad values (validated).

    Example:
        >>> import torch
        >>> t = torch.sparse_coo_tensor(torch.tensor([[1, 0], [2, 4]]), torch.tensor([1.0, 3.0]), (2, 5))
        >>> st = sparse_target(t, (2, 5))      # uncoalesced input: sorted here
        >>> st.rows, st.items, st.grades
        (tensor([0, 1]), tensor([4, 2]), tensor([3., 1.]))
        >>> sparse_target(t, (2, 6))
        Traceback (most recent call last):
        ...
        ValueError: target must have the shape of preds (2, 6), got (2, 5)
    """
    _check_layout(target, name)
    n, length = shape
    if tuple(target.shape) != (n, length):
        raise ValueError(f"{name} must have the shape of preds {(n, length)}, got {tuple(target.shape)}")
    if device is not None and target.device != torch.device(device):
        raise ValueError(f"{name} is on {target.device} but preds is on {device}: move all inputs to one device")
    if not (target.dtype.is_floating_point or target.dtype == torch.bool or _is_int(target.dtype)):  # not complex
        raise TypeError(f"{name} must hold bool, integer or float grades, got {target.dtype}")
    rows, items, values, is_sorted = _entries(target)
    own: list[Check] = []
    if validate_args and values.numel():
        own.append(
            (
                (rows < 0).any() | (rows >= n).any() | (items < 0).any() | (items >= length).any(),
                f"{name} has entries outside its shape {(n, length)} (row or item index out of range)",
            )
        )
        if grade_checks and values.is_floating_point():
            own.append((~torch.isfinite(values).all(), f"{name} contains NaN or infinite grades; give finite grades"))
        if grade_checks and values.dtype != torch.bool:
            own.append(
                (
                    (values < 0).any(),
                    f"{name} has negative grades; a sparse {name} treats absent items as grade 0, so its grades "
                    "must be >= 0 (use a dense target for negative grades)",
                )
            )
    st = _assemble(n, length, rows, items, values, counted=None, sort=not is_sorted)
    if st.nnz > 1 and not is_sorted:  # a coalesced COO tensor has no duplicates
        duplicate = st.keys[1:] == st.keys[:-1]
        if validate_args:
            own.append(
                (
                    duplicate.any(),
                    f"{name} has duplicate entries for the same (row, item); coalesce() would sum their grades -- "
                    "keep one entry per item (e.g. take the maximum grade before building the tensor)",
                )
            )
        # Unvalidated: the first entry (input order: the sort is stable) counts, the later ones do not.
        st = dataclasses.replace(st, counted=torch.cat([torch.ones(1, dtype=torch.bool, device=st.device), ~duplicate]))
    if checks is not None:
        checks.extend(own)
    elif own:
        resolve_checks(own)
    return st


def check_exclude(
    exclude: Any,
    shape: tuple[int, int],
    device: torch.device | None = None,
    *,
    validate_args: bool = True,
    checks: list[Check] | None = None,
) -> Tensor | SparseTarget:
    """Check ``exclude`` (``(N, L)`` bool, dense or sparse; True = excluded) and return it ready to use:
    the dense tensor as is, a sparse one as a canonical :class:`SparseTarget` of bool values (True
    entries exclude; explicit False entries are allowed and exclude nothing).

    Example:
        >>> import torch
        >>> ex = check_exclude(torch.tensor([[True, False]]).to_sparse(), (1, 2))
        >>> ex.items, ex.grades
        (tensor([0]), tensor([True]))
        >>> check_exclude(torch.tensor([[1, 0]]), (1, 2))
        Traceback (most recent call last):
        ...
        TypeError: exclude must be a bool tensor (True = item excluded: never ranked, never counted), got torch.int64
    """
    if isinstance(exclude, SparseTarget):  # already canonical (e.g. checked once by the caller)
        if tuple(exclude.shape) != tuple(shape) or exclude.grades.dtype != torch.bool:
            raise ValueError(f"exclude must be a bool SparseTarget of shape {tuple(shape)}, got {tuple(exclude.shape)}")
        if device is not None and exclude.device != torch.device(device):
            raise ValueError(f"exclude is on {exclude.device} but preds is on {device}: move all inputs to one device")
        return exclude
    if not isinstance(exclude, Tensor):
        raise TypeError(f"exclude must be a torch.Tensor (bool, (N, L), dense or sparse), got {type(exclude).__name__}")
    if exclude.dtype != torch.bool:
        raise TypeError(
            f"exclude must be a bool tensor (True = item excluded: never ranked, never counted), got {exclude.dtype}"
        )
    if is_sparse(exclude):
        ex = sparse_target(exclude, shape, name="exclude", device=device, validate_args=validate_args, checks=checks)
        # A False entry excludes nothing: fold it into "counted".
        counted = ex.grades if ex.counted is None else ex.counted & ex.grades
        return dataclasses.replace(ex, counted=counted)
    if exclude.layout != torch.strided:
        _check_layout(exclude, "exclude")
    if tuple(exclude.shape) != tuple(shape):
        raise ValueError(f"exclude must have the shape of preds {tuple(shape)}, got {tuple(exclude.shape)}")
    if device is not None and exclude.device != torch.device(device):
        raise ValueError(f"exclude is on {exclude.device} but preds is on {device}: move all inputs to one device")
    return exclude


def _is_int(dtype: torch.dtype) -> bool:
    return dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def sparse_from_ids(
    ids: Tensor,
    num_items: int,
    *,
    grades: Tensor | None = None,
    pad: int = -1,
    layout: torch.layout = torch.sparse_coo,
    validate_args: bool = True,
) -> Tensor:
    """Build a sparse ``(N, num_items)`` target from padded item-id lists, without a dense copy.

    Args:
        ids: ``(N, m)`` integer item ids per row (user); ``pad`` marks unused slots.
        num_items: ``L``, the catalogue size (number of columns).
        grades: optional ``(N, m)`` grades of those items (default: 1, as int64); pad slots are ignored.
        pad: the id of unused slots (default -1).
        layout: ``torch.sparse_coo`` (default; coalesced) or ``torch.sparse_csr``.
        validate_args: check that ids lie in ``[0, num_items)`` and that no row repeats an id
            (one host sync). The number of entries is read from the device in any case (a torch
            sparse tensor stores it on the host), so this is a preparation step, not a hot path.

    Returns a sparse tensor on the device of ``ids``, entries sorted by (row, item). Memory: a few
    ``(N, m)`` tensors, never ``(N, num_items)``.

    Example:
        >>> import torch
        >>> t = sparse_from_ids(torch.tensor([[4, 1], [2, -1]]), num_items=6, layout=torch.sparse_csr)
        >>> t.crow_indices(), t.col_indices(), t.values()
        (tensor([0, 2, 3]), tensor([1, 4, 2]), tensor([1, 1, 1]))
    """
    if (
        not isinstance(ids, Tensor)
        or ids.ndim != 2
        or ids.dtype.is_floating_point
        or ids.dtype == torch.bool
        or ids.dtype.is_complex
    ):
        raise TypeError("ids must be an (N, m) integer tensor of item ids (pad marks unused slots)")
    if isinstance(num_items, bool) or not isinstance(num_items, int) or num_items <= 0:
        raise ValueError(f"num_items must be a positive int (the catalogue size), got {num_items!r}")
    if grades is not None:
        if not isinstance(grades, Tensor) or tuple(grades.shape) != tuple(ids.shape):
            raise ValueError(f"grades must be a tensor of the shape of ids {tuple(ids.shape)}")
        if grades.device != ids.device:
            raise ValueError(f"grades is on {grades.device} but ids is on {ids.device}: move them to one device")
    if layout not in _SPARSE_LAYOUTS:
        raise ValueError(f"layout must be torch.sparse_coo or torch.sparse_csr, got {layout}")
    n = ids.shape[0]
    keep = ids != pad
    rows = torch.arange(n, device=ids.device).unsqueeze(-1).expand_as(ids)[keep]  # host sync: the entry count
    items = ids[keep].to(torch.int64)
    st = _assemble(n, num_items, rows, items, torch.ones_like(items) if grades is None else grades[keep], counted=None)
    rows, items, values, keys = st.rows, st.items, st.grades, st.keys
    if validate_args and items.numel():
        flags = torch.stack([((items < 0) | (items >= num_items)).any(), (keys[1:] == keys[:-1]).any()]).tolist()
        if flags[0]:
            raise ValueError(f"ids holds item ids outside [0, {num_items}) that are not the pad value {pad}")
        if flags[1]:
            raise ValueError("ids repeats an item within a row; give each item once per row (with its grade)")
    size = (n, num_items)
    if layout == torch.sparse_coo:
        return torch.sparse_coo_tensor(
            torch.stack([rows, items]), values, size, is_coalesced=True, check_invariants=False
        )
    with warnings.catch_warnings():  # torch's one-time "CSR support is in beta state" notice
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
        return torch.sparse_csr_tensor(st.crow, items, values, size, check_invariants=False)
