"""The one evaluation loop: measures -> prepared inputs -> one ranking per convention -> kernel
values -> empty-query policy -> reduction.

A :class:`MeasurePlan` is built once per configuration (a metric's ``__init__``, a functional call,
a CLI run): it groups the measures by the convention they are computed under and, inside a group,
by kernel, so that every cutoff of a kernel comes from one call and every measure of a convention
from one ranking. :meth:`MeasurePlan.values` runs it on a batch; the functional API reduces the
result (:meth:`MeasurePlan.reduce`), the Metric classes add it to their running sums, and the TREC
evaluation keeps the per-query values.

Example:
    >>> import torch
    >>> from torch_rankeval.conventions import DEFAULT
    >>> from torch_rankeval.measures import parse_measures
    >>> plan = MeasurePlan(parse_measures(["ndcg@3", "mrr", "precision(rel=2)@2"]), DEFAULT)
    >>> values, empty, _ = plan.values(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[0, 2, 1]]))
    >>> plan.labels, [round(v, 4) for v in values[0].tolist()]
    (['ndcg@3', 'mrr', 'precision(rel=2)@2'], [0.659, 0.5, 0.5])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.measures.reduction import Reduction
from torch_rankeval.measures.registry import FAMILIES, Family, Measure
from torch_rankeval.ranking.catalogue import (
    WHOLE_LIST_CHUNK,
    catalogue_batch,
    check_catalogue,
    row_chunks,
    whole_list_rows,
)
from torch_rankeval.ranking.inputs import check_preds_target, check_reduction, parse_k, prepare
from torch_rankeval.ranking.sparse import SparseTarget, check_exclude, is_sparse, sparse_target
from torch_rankeval.ranking.subtopics import NEEDS_SUBTOPICS, is_subtopic_target, split_subtopics
from torch_rankeval.ranking.view import RankedBatch, _to_device, device_constant

__all__ = ["MeasurePlan", "densified", "evaluate_family"]


@dataclass(frozen=True)
class _Call:
    """One kernel call: a family with its kernel parameters, the cutoffs, and the plan columns they fill."""

    family: Family
    kernel_params: tuple
    cutoffs: tuple
    columns: tuple[int, ...]


@dataclass(frozen=True)
class _Group:
    """The measures computed under one convention: one ranking, its kernel calls and what they read
    (fixed when the plan is built, so an update only looks them up)."""

    conv: Convention
    calls: tuple[_Call, ...]
    #: a kernel reads gains under ``conv`` (the gain checks run, the gains are built)
    uses_gain: bool
    #: ``conv``'s gain is the plan's: the caller's device-resident gain table applies
    base_gain: bool
    #: every call's cutoffs and whether a call reads the whole list (the top-k view's depth)
    cutoffs: tuple
    whole: bool
    #: the plan columns the calls fill, in the order of their values
    columns: tuple[int, ...]
    #: the calls read both the gain and the relevance sums of the tie groups (``Family.tie_sums``)
    pair_sums: bool = False
    #: the top-k route serves every call (``Family.topk_serves`` under ``conv``; TREC's negative
    #: grades, unjudged documents, are not on it): :meth:`MeasurePlan.topk_ready` and ``head`` read it
    topk: bool = False
    #: ``topk`` and every call a cutoff measure: the deepest cutoff, the ranked positions they read
    #: (``RankedBatch(head=)``); None: a call reads more
    head: int | None = None


@dataclass
class _Batch:
    """One batch's inputs (:meth:`MeasurePlan.values`' arguments) as the routes read them; a subtopic
    target is split into its ad-hoc view (``target``, ``ideal_target``) and its subtopic grades."""

    preds: Tensor
    target: Any
    mask: Tensor | None
    ideal_target: Tensor | None
    n_relevant: Tensor | None
    judged: Tensor | None
    ignore_index: int | float | None
    validate_args: bool
    discounts: Tensor | None
    gain: Callable[[Tensor], Tensor] | None
    exclude: Any
    subtopics: Tensor | None = None
    ideal_subtopics: Tensor | None = None
    #: the subtopic grades' value checks, resolved in the ranking stage's one host sync
    subtopic_checks: list | None = None
    #: per-document weights (the measures whose row reads them; dense route only)
    weights: Tensor | None = None


@dataclass
class _DenseRoute:
    """The dense route: :func:`~torch_rankeval.ranking.inputs.prepare` checks the batch and ranks it
    once per convention, every call of the group reads that ranking; a validated batch whose ties sit
    in a few lists ranks the others with the plain formulas and redoes those lists with tie statistics."""

    batch: _Batch
    #: the batch gives nothing beyond scores, grades and padding (``MeasurePlan._route``'s ``"head"``):
    #: a group whose calls read only a head (``_Group.head``) ranks only it
    heads: bool = False

    def run(self, group: _Group) -> tuple[Tensor, Tensor, bool]:
        """``(values (N, C), empty (N, C), single)`` of the group's calls."""
        b = self.batch
        tensors = (
            b.preds, b.target, b.mask, b.ideal_target, b.n_relevant, b.judged, b.subtopics, b.ideal_subtopics, b.weights
        )  # fmt: skip
        rb, single = self._rank(group, tensors, b.validate_args, split=True)
        if b.validate_args:
            _family_checks(rb, group.calls)
        values, empty = _run_calls(rb, group.calls, group.conv)
        if rb.split_rows:
            # the few lists with a tie, again with tie statistics (the rest took the plain formulas)
            idx = _to_device(torch.tensor(rb.split_rows, dtype=torch.int64), values.device)
            tied, _ = self._rank(
                group, [None if x is None else x.index_select(0, idx) for x in tensors], False, split=False
            )
            redo, redo_empty = _run_calls(tied, group.calls, group.conv)
            values = values.index_copy(0, idx, redo.to(values.dtype))
            empty = empty.index_copy(0, idx, redo_empty.expand_as(redo))
        return values, empty, single

    def _rank(self, group: _Group, tensors: Sequence, validate: bool, *, split: bool) -> tuple[RankedBatch, bool]:
        """``prepare`` of ``(preds, target, mask, ideal_target, n_relevant, judged, subtopics,
        ideal_subtopics, weights)`` under the group's convention; ``split``: its ``split_ties``."""
        preds, target, mask, ideal_target, n_relevant, judged, subtopics, ideal_subtopics, weights = tensors
        b = self.batch
        rb, single = prepare(
            preds,
            target,
            convention=group.conv,
            mask=mask,
            ignore_index=b.ignore_index,
            ideal_target=ideal_target,
            n_relevant=n_relevant,
            judged=judged,
            validate_args=validate,
            uses_gain=group.uses_gain,
            discounts=b.discounts,
            gain=b.gain if group.base_gain else None,
            split_ties=split,
            subtopics=subtopics,
            ideal_subtopics=ideal_subtopics,
            extra_checks=b.subtopic_checks if validate else None,
            weights=weights,
            checked=True,  # by MeasurePlan.values, once for every convention
            head=group.head if self.heads else None,  # only the positions the calls read are ranked
        )
        rb.pair_sums = group.pair_sums  # the group's kernels read both sums: one prefix sum serves them
        return rb, single


@dataclass
class _TopkRoute:
    """The top-k route (:func:`~torch_rankeval.ranking.catalogue.catalogue_batch`): each convention's
    top-k view of the batch (a sparse target, ``exclude=``, long rows); whole-list measures of a large
    batch go in row chunks, so that the views' memory follows a chunk, not the batch."""

    batch: _Batch
    #: ``exclude`` with the padding (``mask=False``, ``ignore_index``) folded in
    keep: Any
    chunked: bool

    @classmethod
    def of(cls, plan: MeasurePlan, b: _Batch) -> _TopkRoute:
        n, length = b.preds.shape
        chunked = plan._deepest is None and whole_list_rows(n, length, WHOLE_LIST_CHUNK) < n
        return cls(b, _excluded(b.preds, b.target, b.mask, b.ignore_index, b.exclude), chunked)

    def run(self, group: _Group) -> tuple[Tensor, Tensor, bool]:
        """``(values (N, C), empty (N, C), False)`` of the group's calls."""
        b = self.batch
        view = dict(
            cutoffs=group.cutoffs,
            whole_list=group.whole,
            gain=b.gain if group.base_gain else None,
            discounts=b.discounts,
            uses_gain=group.uses_gain,
        )
        if not self.chunked:
            rb = catalogue_batch(
                b.preds, b.target, group.conv, exclude=self.keep, validate_args=b.validate_args, **view
            )
            values, empty = _run_calls(rb, group.calls, group.conv)
            return values, empty, False
        if b.validate_args:  # the checks over the whole batch, in one host sync
            check_catalogue(
                b.preds, b.target, group.conv, exclude=self.keep, gain=view["gain"], uses_gain=group.uses_gain
            )
        parts = []
        for p, t, e, depth in row_chunks(
            b.preds, b.target, self.keep, validate_args=b.validate_args, chunk_elements=WHOLE_LIST_CHUNK
        ):
            rb = catalogue_batch(p, t, group.conv, exclude=e, validate_args=False, depth=depth, **view)
            parts.append(_run_calls(rb, group.calls, group.conv))
        return torch.cat([v for v, _ in parts]), torch.cat([e for _, e in parts]), False


class MeasurePlan:
    """Measures compiled for one base convention.

    Args:
        measures: parsed measures (:func:`~torch_rankeval.measures.parse_measures`); each becomes
            one output column named by its ``label``. Equal measures are computed once.
        convention: the base convention; each measure adds its own settings
            (:meth:`~torch_rankeval.measures.Measure.convention`).
        negative_unjudged: TREC data: negative grades mark unjudged documents (gain 0, never relevant).

    Attributes:
        labels: the output names, one per column.
        measures: the measure of each column.
        aggregates: per column, ``"mean"``, ``"sum"`` or ``"gmean"``.

    Raises:
        ValueError: a measure that describes a run file (``runid``) rather than a ranking, no measure, or
            intent-aware and ad-hoc measures together (they read different targets).
    """

    measures: list[Measure]
    labels: list[str]
    aggregates: list[str]
    convention: Convention
    uses_gain: bool
    cutoffs: list[int]
    conventions: list[Convention]

    def __init__(self, measures: Sequence[Measure], convention: Convention, *, negative_unjudged: bool = False) -> None:
        measures = list(measures)
        if not measures:
            raise ValueError("no measure to compute: give at least one name such as 'ndcg@10'")
        for m in measures:
            if m.family.kernel is None:
                what = "describes a run file, not a ranking" if m.family.aggregate == "info" else "is a text per query"
                raise ValueError(f"{m.label!r} {what}; only the TREC evaluation reports it")
        self.measures = measures
        self.labels = [m.label for m in measures]
        self.aggregates = [m.family.aggregate for m in measures]
        self.convention = convention
        unique = {m: j for j, m in enumerate(dict.fromkeys(measures))}
        self._columns = [unique[m] for m in measures]  # output column -> unique measure
        self._identity = self._columns == list(range(len(measures)))
        self._groups = _groups(unique, convention, negative_unjudged)
        self._n_unique = len(unique)
        #: one ranking whose kernels fill the columns in order: its values are the plan's as they are
        self._direct = (
            len(self._groups) == 1 and self._identity and self._groups[0].columns == tuple(range(self._n_unique))
        )
        self.uses_gain = any(g.uses_gain for g in self._groups)
        self.cutoffs = sorted({m.cutoff for m in unique if m.cutoff is not None})
        self.conventions = [g.conv for g in self._groups]
        # how deep the measures read a list: the largest cutoff, None when one reads the whole list
        cutoffs = [c for g in self._groups for c in g.cutoffs]
        whole = None in cutoffs or any(g.whole for g in self._groups)
        self._deepest = None if whole else max(cutoffs)
        #: whether the measures are intent-aware (they read a subtopic target; ad-hoc ones never do)
        self.subtopics: bool = any(m.family.subtopics for m in measures)
        if self.subtopics and not all(m.family.subtopics for m in measures):
            raise ValueError(
                "intent-aware measures (" + ", ".join(self._labels_of(True)) + ") read subtopic judgments and "
                "ad-hoc measures (" + ", ".join(self._labels_of(False)) + ") read one grade per document: "
                "evaluate them in two calls (the ad-hoc grade of a subtopic target is target.amax(-1), "
                "relevant to any subtopic)"
            )

    def __repr__(self) -> str:
        return f"MeasurePlan({self.labels})"

    # ------------------------------------------------------------------ values
    def values(
        self,
        preds: Tensor,
        target: Tensor,
        *,
        mask: Tensor | None = None,
        ignore_index: int | float | None = None,
        ideal_target: Tensor | None = None,
        n_relevant: Tensor | None = None,
        judged: Tensor | None = None,
        validate_args: bool = True,
        discounts: Tensor | None = None,
        gain: Callable[[Tensor], Tensor] | None = None,
        exclude: Tensor | None = None,
        weights: Tensor | None = None,
        checked: bool = False,
    ) -> tuple[Tensor, Tensor, bool]:
        """Per-query values ``(N, C)`` of every column, their "empty" flags ``(N, C)`` (a query
        without relevant documents, for the measures that have that case) and whether the input
        was a single 1-D list.

        ``discounts`` and ``gain`` are optional device-resident tables of the base convention (the
        Metric classes keep them as buffers); measures with their own gain build theirs.

        ``target`` may be a torch sparse ``(N, L)`` tensor (COO / CSR; absent = grade 0) and
        ``exclude`` an ``(N, L)`` bool tensor, dense or sparse (items never ranked, never counted).
        Those, and dense batches of long rows whose measures all have small cutoffs, take the top-k
        path (:func:`~torch_rankeval.ranking.catalogue.catalogue_batch`) when every measure
        supports it; otherwise the target is made dense and ``exclude`` joins ``mask``.

        ``weights``: per-document weights like ``preds``, for the measures whose row reads them
        (:attr:`~torch_rankeval.measures.registry.Family.item_weights`); with any other measure a
        ``TypeError``. They take the dense route.

        ``checked``: the caller's input stage ran
        :func:`~torch_rankeval.ranking.inputs.check_preds_target` on ``preds``, ``target`` and ``mask``
        (a metric's ``update``): a dense target without a subtopic axis, whose checks the dense route
        does not repeat. Otherwise the dense route checks its inputs here, once for all the plan's
        conventions."""
        if weights is not None:
            self.check_weights_read()
        b = _Batch(
            preds, target, mask, ideal_target, n_relevant, judged, ignore_index, validate_args, discounts, gain, exclude,
            weights=weights,
        )  # fmt: skip
        # a checked target has no subtopic axis: only an intent-aware plan looks (to refuse it)
        if (self.subtopics or not checked) and self._check_subtopics(preds, target):
            if ignore_index is not None:
                raise TypeError(self.no_ignore_index())
            split = split_subtopics(preds, target, ideal_target)
            b.target, b.subtopics, b.ideal_target, b.ideal_subtopics = split[:4]
            if validate_args:
                b.subtopic_checks = split.checks()  # resolved in the ranking stage's one host sync
        catalogue = exclude is not None or (not checked and _is_sparse(b.target))
        reading = self._route(b, catalogue)
        if reading == "topk":
            route: _DenseRoute | _TopkRoute = _TopkRoute.of(self, b)
        else:
            if catalogue:
                b.target, b.mask = densified(preds, b.target, mask, exclude)
            if not (checked and b.target is target and b.mask is mask):
                check_preds_target(preds, b.target, b.mask)  # once, for every convention's ranking
            route = _DenseRoute(b, heads=reading == "head")
        if self._direct:
            return route.run(self._groups[0])
        return self._assemble([route.run(group) for group in self._groups])

    def _assemble(self, parts: list[tuple[Tensor, Tensor, bool]]) -> tuple[Tensor, Tensor, bool]:
        """The groups' values and empty flags in the plan's columns (a repeated measure computed once)."""
        out: list[Tensor | None] = [None] * self._n_unique
        empties: list[Tensor | None] = [None] * self._n_unique
        for group, (values, empty, _) in zip(self._groups, parts):
            for j, col in enumerate(group.columns):
                out[col], empties[col] = values[:, j], empty[:, j]
        values = torch.stack(out, dim=1)  # type: ignore[arg-type]
        empty = torch.stack(empties, dim=1)  # type: ignore[arg-type]
        if not self._identity:
            index = device_constant(tuple(self._columns), torch.int64, values.device)
            values, empty = values.index_select(1, index), empty.index_select(1, index)
        return values, empty, parts[-1][2]

    # ------------------------------------------------------------------ routing
    def _check_subtopics(self, preds: object, target: object) -> bool:
        """Whether ``target`` carries a subtopic axis; refuses a subtopic target with an ad-hoc measure
        and an intent-aware measure without subtopic judgments."""
        subtopic = is_subtopic_target(preds, target)
        if subtopic and not self.subtopics:
            raise ValueError(
                f"target {tuple(target.shape)} has a subtopic axis (one more dimension than preds "  # type: ignore[union-attr]
                f"{tuple(preds.shape)}), which only intent-aware measures read, but {', '.join(self.labels)} are "  # type: ignore[union-attr]
                "ad-hoc measures: pass target.amax(-1) (a document relevant to any subtopic is relevant), or ask "
                "for an intent-aware measure (alpha_nDCG@20, ERR_IA@20, P_IA@10, StRecall@10, ...)"
            )
        if self.subtopics and not subtopic:
            if not _is_sparse(target):
                check_preds_target(preds, target)  # a malformed input: the input stage's own message
            raise ValueError(f"{', '.join(self.labels)}: {NEEDS_SUBTOPICS}")
        return subtopic

    def check_weights_read(self) -> None:
        """Refuse ``weights=`` unless every measure of the plan reads per-document weights.

        Example:
            >>> from torch_rankeval.conventions import DEFAULT
            >>> MeasurePlan([Measure("arp"), Measure("opa")], DEFAULT).check_weights_read()
            >>> MeasurePlan([Measure("arp"), Measure("mrr")], DEFAULT).check_weights_read()
            Traceback (most recent call last):
            ...
            TypeError: weights= (per-document weights) is read only by opa, arp, not by mrr: evaluate those in a call without weights=
        """
        ignored = [m.label for m in self.measures if not m.family.item_weights]
        if ignored:
            readers = ", ".join(k for k, f in FAMILIES.items() if f.item_weights)
            raise TypeError(
                f"weights= (per-document weights) is read only by {readers}, not by {', '.join(ignored)}: "
                "evaluate those in a call without weights="
            )

    def no_ignore_index(self) -> str:
        """Why an intent-aware plan takes no ``ignore_index`` (the message of its ``TypeError``)."""
        return (
            f"ignore_index= does not apply to the subtopic target of intent-aware measures ({', '.join(self.labels)}: "
            "one grade per subtopic, no padding value): mark padding with mask= (False = padding) and documents "
            "without judgments with judged="
        )

    def _labels_of(self, subtopics: bool) -> list[str]:
        return [m.label for m in self.measures if m.family.subtopics == subtopics]

    def topk_ready(self) -> bool:
        """Whether every measure of the plan runs on a top-k view (its registry row's ``topk``, under its convention)."""
        return all(g.topk for g in self._groups)

    def _route(self, b: _Batch, catalogue: bool) -> str:
        """How a batch is read. A top-k reading needs the plan's measures served by the top-k route
        (``_Group.topk``) and no input beyond the scores, grades and padding: no ``ideal_target``,
        ``n_relevant``, ``judged``, subtopic grades or ``weights``. With such inputs: ``"topk"``, the
        top-k route, for a sparse target or ``exclude`` (``catalogue``) and long dense rows whose
        measures all have small cutoffs; else ``"head"``, the dense route, where a group whose calls read
        only a head ranks only that head (``_Group.head``). With other inputs: ``"dense"``."""
        if not (b.ideal_target is None and b.n_relevant is None and b.judged is None):
            return "dense"
        if not (b.subtopics is None and b.weights is None):
            return "dense"
        preds = b.preds
        if not isinstance(preds, Tensor) or preds.ndim != 2:
            return "head"  # its checks name the problem; one (L,) list: exclude joins mask
        long_rows = not (
            torch.compiler.is_compiling()
            or preds.shape[-1] < LONG_ROW
            or self._deepest is None
            or self._deepest * 8 > preds.shape[-1]
            or any(conv.gain != "exp2" for conv in self.conventions)
        )
        return "topk" if (catalogue or long_rows) and self.topk_ready() else "head"

    # ------------------------------------------------------------------ reduction
    def evaluate(
        self,
        preds: Tensor,
        target: Tensor,
        *,
        reduction: str = "mean",
        validate_args: bool = True,
        name: str = "",
        **inputs: Tensor | int | float | None,
    ) -> Tensor:
        """:meth:`values`, then :meth:`reduce` under the plan's convention: ``(C,)``, or per list with
        ``reduction="none"`` ``(N, C)`` (``(C,)`` for a single 1-D list). ``inputs`` are
        :meth:`values`' keyword arguments (``mask``, ``ignore_index``, ``exclude``, ...).

        Example:
            >>> import torch
            >>> from torch_rankeval.conventions import DEFAULT
            >>> plan = MeasurePlan([Measure("mrr"), Measure("precision", 2)], DEFAULT)
            >>> plan.evaluate(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[0, 2, 1]]))
            tensor([0.5000, 0.5000])
        """
        values, empty, single = self.values(preds, target, validate_args=validate_args, **inputs)
        out = self.reduce(
            values,
            empty,
            action=self.convention.empty_target_action,
            reduction=reduction,
            validate_args=validate_args,
            name=name or ", ".join(self.labels),
        )
        return out[0] if reduction == "none" and single else out

    def reduction(self, action: str | None = None, *, reason: str | None = None, hint: str = "") -> Reduction:
        """The plan's :class:`~torch_rankeval.measures.reduction.Reduction`: its columns' aggregates,
        the empty-query policy ``action`` (default: the convention's), the convention's mean over
        no counted query; ``reason`` and ``hint`` word the messages."""
        return Reduction(
            tuple(self.aggregates),
            action=self.convention.empty_target_action if action is None else action,
            all_skipped=self.convention.all_skipped,
            **({} if reason is None else {"reason": reason}),
            hint=hint,
        )

    def transform(self, values: Tensor) -> Tensor:
        """Per-query values as they are summed: ``log(max(v, 1e-5))`` for geometric means (trec_eval's floor)."""
        return self.reduction().transform(values)

    def finish(self, sums: Tensor, counts: Tensor) -> Tensor:
        """Summaries from column sums and counts: mean, sum, or geometric mean."""
        return self.reduction().finish(sums, counts)

    def reduce(
        self, values: Tensor, empty: Tensor, *, action: str, reduction: str, validate_args: bool = True, name: str = ""
    ) -> Tensor:
        """Apply the empty-query policy and the reduction (``"mean"``, ``"sum"``, ``"none"``) to
        ``(N, C)`` values; returns ``(C,)`` (or ``(N, C)`` for ``"none"``), in the values' dtype
        (:meth:`Reduction.reduce`)."""
        return self.reduction(action).reduce(
            values,
            empty,
            reduction=reduction,
            validate_args=validate_args,
            name=name or ", ".join(self.labels),
            stacklevel=3,
        )


#: Rows at least this long take the top-k path on their own (dense target, measures with cutoffs <= L / 8).
LONG_ROW = 4096


def _is_sparse(target: object) -> bool:
    return isinstance(target, SparseTarget) or is_sparse(target)


def densified(preds: Tensor, target: Any, mask: Tensor | None, exclude: Any) -> tuple[Tensor, Tensor | None]:
    """The dense path's inputs: a sparse target made dense, ``exclude`` folded into ``mask``
    (``N x L`` memory: for measures outside the top-k table and per-position diagnostics).

    Example:
        >>> import torch
        >>> target, mask = densified(torch.zeros(1, 3), torch.tensor([[0, 2, 0]]).to_sparse(),
        ...                          None, torch.tensor([[True, False, False]]))
        >>> target, mask
        (tensor([[0, 2, 0]]), tensor([[False,  True,  True]]))
    """
    if _is_sparse(target):
        if preds.ndim != 2:
            raise ValueError(f"a sparse target needs (N, L) preds, got preds of shape {tuple(preds.shape)}")
        if not isinstance(target, SparseTarget):
            target = sparse_target(target, tuple(preds.shape), device=preds.device)
        target = target.to_dense()
    if exclude is not None:
        if preds.ndim == 1 and isinstance(exclude, Tensor) and not is_sparse(exclude) and exclude.ndim == 1:
            exclude = exclude.unsqueeze(0)  # one list: (L,) like preds
        ex = _dense_exclude(exclude, tuple(preds.shape) if preds.ndim == 2 else (1, preds.shape[0]), preds.device)
        ex = ex.reshape(preds.shape)
        mask = ~ex if mask is None else mask & ~ex
    return target, mask


def _excluded(preds: Tensor, target, mask: Tensor | None, ignore_index, exclude):  # noqa: ANN001, ANN202
    """``exclude`` for the top-k path: padding (``mask=False``, ``ignore_index``) is excluded too."""
    if mask is None and (ignore_index is None or _is_sparse(target)):
        return exclude
    if mask is not None and (not isinstance(mask, Tensor) or mask.dtype != torch.bool or mask.shape != preds.shape):
        raise TypeError(f"mask must be a bool tensor of the shape of preds {tuple(preds.shape)} (True = real item)")
    pad = None if mask is None else ~mask
    if ignore_index is not None and not _is_sparse(target):
        pad = (target == ignore_index) if pad is None else pad | (target == ignore_index)
    if exclude is None:
        return pad
    return _dense_exclude(exclude, tuple(preds.shape), preds.device) | pad


def _dense_exclude(exclude, shape: tuple[int, int], device: torch.device) -> Tensor:  # noqa: ANN001
    """``exclude`` checked and as a dense ``(N, L)`` bool tensor."""
    ex = check_exclude(exclude, shape, device)
    return ex.to_dense() if isinstance(ex, SparseTarget) else ex


def _family_checks(rb: RankedBatch, calls: Sequence[_Call]) -> None:
    """The value checks some families declare (e.g. ERR's grade range), resolved in one host sync."""
    checks = [
        c for call in calls if call.family.check is not None for c in call.family.check(rb, **dict(call.kernel_params))
    ]
    if not checks:
        return
    flags = torch.stack([flag.reshape(()) for flag, _ in checks]).tolist()
    for flag, (_, message) in zip(flags, checks):
        if flag:
            raise ValueError(message)


def _run_calls(rb: RankedBatch, calls: Sequence[_Call], conv: Convention) -> tuple[Tensor, Tensor]:
    values, empties = [], []
    for call in calls:
        v, e = call.family.kernel(rb, call.cutoffs, conv, **dict(call.kernel_params))  # type: ignore[misc]
        values.append(v)
        empties.append(torch.zeros_like(v, dtype=torch.bool) if e is None else e.expand_as(v))
    if len(values) == 1:
        return values[0], empties[0]
    return torch.cat(values, dim=1), torch.cat(empties, dim=1)


def _groups(unique: dict[Measure, int], convention: Convention, negative_unjudged: bool) -> list[_Group]:
    """The plan's measures (each with its column) grouped by the convention they run under and, inside
    a group, by kernel and kernel parameters: every cutoff of a kernel is one call."""
    groups: dict[Convention, dict[tuple, list[tuple[Measure, int]]]] = {}
    for m, j in unique.items():
        conv = m.convention(convention, negative_unjudged=negative_unjudged)
        if conv.ties == "torch_topk" and conv.torch_topk_k is None:
            # torch.topk orders ties by its k: one ranking per cutoff, unless the convention fixes
            # that k (torchmetrics' curves: one torch.topk(max_k) serves every cutoff)
            conv = replace(conv, torch_topk_k=m.cutoff)
        if conv.ties == "average" and not m.family.ties_average:
            raise ValueError(
                f"{m.label!r}: {m.family.summary} has no exact value averaged over the orders of tied scores "
                "(ties='average'); pass ties='first' (tied documents in input order), 'pessimistic' or "
                "'optimistic', or convention='trec_eval'"
            )
        at = m.family.at  # a parameter that the kernel takes in place of cutoffs (IPrec@0.1) groups like one
        kernel_params = tuple(sorted((n, v) for n, v in m.kernel_params().items() if n != at))
        groups.setdefault(conv, {}).setdefault((m.key, kernel_params), []).append((m, j))
    out = []
    for conv, by_kernel in groups.items():
        calls = tuple(
            _Call(members[0][0].family, kparams, tuple(m.at_value for m, _ in members), tuple(j for _, j in members))
            for (_, kparams), members in by_kernel.items()
        )
        topk = not negative_unjudged and all(call.family.topk_serves(conv) for call in calls)
        out.append(
            _Group(
                conv,
                calls,
                uses_gain=any(c.family.needs_gain(conv) for c in calls),
                base_gain=conv.gain == convention.gain,
                cutoffs=tuple(c for call in calls for c in call.cutoffs),
                whole=any(call.family.whole_list for call in calls),
                columns=tuple(col for call in calls for col in call.columns),
                pair_sums={"gain", "rel"} <= {s for call in calls for s in call.family.tie_sums},
                topk=topk,
                head=_head(calls) if topk else None,
            )
        )
    return out


def _head(calls: tuple[_Call, ...]) -> int | None:
    """The ranked positions read by a group's calls that the top-k route serves (``_Group.topk``: each
    kernel reads the head and the row's counts only) when every call is a cutoff measure: the deepest
    cutoff. None when a call reads the whole list."""
    cutoffs = [k for call in calls for k in call.cutoffs]
    if not cutoffs or any(call.family.whole_list for call in calls):
        return None
    return max(cutoffs) if all(isinstance(k, int) and k > 0 for k in cutoffs) else None


def evaluate_family(
    key: str,
    preds: Tensor,
    target: Tensor,
    k: object,
    *,
    convention: Convention,
    reduction: str = "mean",
    validate_args: bool = True,
    name: str = "",
    **inputs: Tensor | int | float | None,
) -> Tensor:
    """One family of the registry (:data:`~torch_rankeval.measures.registry.FAMILIES`) at the
    cutoffs ``k`` (None, an int or a sequence), through one plan: ``(K,)`` for a sequence of cutoffs,
    else a scalar; per list with ``reduction="none"``. The public one-measure functions
    (:func:`torch_rankeval.functional.ndcg`, ...) are this call.

    Example:
        >>> import torch
        >>> from torch_rankeval.conventions import DEFAULT
        >>> evaluate_family("ndcg", torch.tensor([0.9, 0.8]), torch.tensor([0, 1]), [1, 2], convention=DEFAULT)
        tensor([0.0000, 0.6309])
    """
    ks, keep_k = parse_k(k)
    check_reduction(reduction)
    plan = MeasurePlan([Measure(key, c) for c in ks], convention)
    out = plan.evaluate(preds, target, reduction=reduction, validate_args=validate_args, name=name or key, **inputs)
    return out if keep_k else out.squeeze(-1)
