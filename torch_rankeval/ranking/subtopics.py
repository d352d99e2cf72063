"""Subtopic judgments: a target with a subtopic axis, ``(N, L, S)`` grades, for the intent-aware measures.

TREC's diversity tasks judge each document once per *subtopic* (intent) of a query; the qrels line
is ``topic subtopic docno judgment``. Here such judgments are a target with one more axis than
``preds``: ``(N, L, S)`` for ``(N, L)`` scores (``(L, S)`` for one ``(L,)`` list), dense or a torch
sparse COO tensor (an absent entry is grade 0). :func:`subtopic_target` builds the sparse form from
``(query, subtopic, item, grade)`` lists.

Conventions (those of TREC's ``ndeval``):

- a document is relevant to a subtopic when its grade there is relevant (``>= 1`` for integer grades,
  ``> 0`` for float ones, or ``>= relevance_threshold``): subtopic relevance is binary;
- a subtopic that no judged document is relevant to does not exist for the query (it does not count
  in the number of subtopics ``A`` that normalises P-IA, MAP-IA, subtopic recall, ...), so ``S`` may
  be any size that holds every query's subtopics, padded with all-zero subtopics;
- the ranking, padding (``mask``), ``exclude=`` and unjudged documents (``judged=``) are those of the
  ad-hoc view: the grade of a document for the whole query is its largest subtopic grade (relevant to
  any subtopic, as ndeval counts it for ad-hoc MAP).

Example:
    >>> import torch
    >>> t = subtopic_target(torch.tensor([0, 0, 1]), torch.tensor([0, 1, 0]), torch.tensor([2, 2, 0]),
    ...                     shape=(2, 3, 2))
    >>> t.to_dense()[0]
    tensor([[0, 0],
            [0, 0],
            [1, 1]])
    >>> split_subtopics(torch.zeros(2, 3), t).target
    tensor([[0, 0, 1],
            [1, 0, 0]])

A sparse target's subtopic indices are labels: each list's subtopics are numbered from 0 when it is
split, so memory follows the subtopics of one list (here 1), not the largest index (40):

    >>> t = subtopic_target(torch.tensor([0, 1]), torch.tensor([7, 40]), torch.tensor([0, 1]), shape=(2, 2, 41))
    >>> split_subtopics(torch.zeros(2, 2), t).subtopics.shape
    torch.Size([2, 2, 1])
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from torch_rankeval.ranking.view import RankedView, relevant

__all__ = [
    "NEEDS_SUBTOPICS",
    "document_subtopics",
    "ideal_subtopics",
    "is_subtopic_target",
    "ranked_subtopics",
    "split_subtopics",
    "SubtopicSplit",
    "subtopic_target",
]


def is_subtopic_target(preds: object, target: object) -> bool:
    """Whether ``target`` carries a subtopic axis: one more dimension than ``preds``.

    Example:
        >>> is_subtopic_target(torch.zeros(2, 3), torch.zeros(2, 3, 4)), is_subtopic_target(torch.zeros(3), torch.zeros(3))
        (True, False)
    """
    return isinstance(preds, Tensor) and isinstance(target, Tensor) and target.ndim == preds.ndim + 1


def subtopic_target(
    query: Tensor,
    subtopic: Tensor,
    item: Tensor,
    grade: Tensor | None = None,
    *,
    shape: tuple[int, int, int],
    validate_args: bool = True,
) -> Tensor:
    """A sparse ``(N, L, S)`` subtopic target (torch COO, coalesced) from judgment lists.

    Args:
        query, subtopic, item: ``(J,)`` integer indices of each judgment: the list (row of
            ``preds``), the subtopic and the document's position in its list.
        grade: ``(J,)`` grades (default: 1 for each judgment, int64).
        shape: ``(N, L, S)``: the number of lists, the list length (that of ``preds``) and of subtopics.
        validate_args: check that indices are in range and that no ``(query, item, subtopic)`` is
            judged twice (one host sync; coalescing would add the two grades).

    Example:
        >>> t = subtopic_target(torch.tensor([0, 0]), torch.tensor([1, 0]), torch.tensor([1, 1]),
        ...                     torch.tensor([1, 2]), shape=(1, 2, 2))
        >>> t.to_dense()
        tensor([[[0, 0],
                 [2, 1]]])
    """
    for name, x in (("query", query), ("subtopic", subtopic), ("item", item)):
        if not isinstance(x, Tensor) or x.ndim != 1 or x.is_floating_point() or x.dtype == torch.bool:
            raise TypeError(f"{name} must be a 1-D integer tensor of indices, one per judgment")
    if not (query.shape == subtopic.shape == item.shape):
        raise ValueError(
            f"query, subtopic and item must have one entry per judgment, got {query.shape[0]}, {subtopic.shape[0]}, "
            f"{item.shape[0]}"
        )
    if len(shape) != 3 or any(not isinstance(s, int) or s < 0 for s in shape):
        raise ValueError(f"shape must be (N, L, S), three non-negative ints, got {shape!r}")
    if grade is None:
        grade = torch.ones(query.shape[0], dtype=torch.int64, device=query.device)
    if not isinstance(grade, Tensor) or grade.shape != query.shape:
        raise ValueError("grade must be a tensor with one grade per judgment (the shape of query)")
    index = torch.stack([query.long(), item.long(), subtopic.long()])
    if validate_args and index.shape[1]:
        limits = torch.tensor([shape[0], shape[1], shape[2]], device=index.device).unsqueeze(1)
        key = (index[0] * max(shape[1], 1) + index[1]) * max(shape[2], 1) + index[2]
        srt = key.sort().values
        flags = torch.stack(
            [((index < 0) | (index >= limits)).any(), (srt[1:] == srt[:-1]).any(), (grade < 0).any()]
        ).tolist()
        if flags[0]:
            raise ValueError(f"a query, item or subtopic index is out of range for shape {tuple(shape)}")
        if flags[1]:
            raise ValueError("a (query, item, subtopic) is judged twice: give each judgment once")
        if flags[2]:
            raise ValueError("grade holds negative grades: subtopic judgments are grades >= 0")
    return torch.sparse_coo_tensor(index, grade, size=tuple(shape), check_invariants=False).coalesce()


def _per_list_subtopics(target: Tensor, ideal_target: Tensor | None, one_list: bool) -> tuple[Tensor, Tensor | None]:
    """Sparse COO subtopic targets with each list's subtopics numbered ``0 .. S_q - 1`` (in the order of
    their indices, over ``target`` and ``ideal_target`` together) and a subtopic axis of the largest
    ``S_q``: a sparse target's subtopic indices are labels (a file's subtopic numbers, unique across
    the file or not), and the dense grades then take the memory of one list's subtopics, not that of
    every label. The width is read on the host (one sync: the dense grades' shape depends on it).
    Unchanged when no list would lose a column."""
    parts = [t.coalesce() for t in (target, ideal_target) if t is not None]
    n_sub = target.shape[-1]
    lists = [torch.zeros_like(t.indices()[0]) if one_list else t.indices()[0] for t in parts]
    keys = torch.cat([q * n_sub + t.indices()[-1] for q, t in zip(lists, parts)])
    if keys.numel() == 0:
        return target, ideal_target
    labels, inverse = torch.unique(keys, return_inverse=True)  # sorted: by list, then subtopic index
    owner = torch.div(labels, n_sub, rounding_mode="floor")
    column = torch.arange(labels.numel(), device=labels.device) - torch.searchsorted(owner, owner)
    width = int(column.max()) + 1
    if width >= n_sub:
        return target, ideal_target
    out, start = [], 0
    for t in parts:
        index = t.indices().clone()
        index[-1] = column[inverse[start : start + index.shape[1]]]
        start += index.shape[1]
        shape = (*t.shape[:-1], width)
        # the numbering keeps the order of each list's subtopics: the indices stay sorted and distinct
        out.append(torch.sparse_coo_tensor(index, t.values(), size=shape, check_invariants=False, is_coalesced=True))
    return out[0], out[1] if ideal_target is not None else None


def _split(t: Tensor, name: str, one_list: bool) -> tuple[Tensor, Tensor, Tensor | None]:
    """(a document's grade for the whole query: its largest subtopic grade, the dense subtopic grades
    ``(N, L, S)``, its smallest subtopic grade or None for bool grades), the grades in one pass."""
    if t.layout == torch.sparse_coo:
        t = t.to_dense()
    elif t.layout != torch.strided:
        raise TypeError(f"a subtopic {name} must be dense or torch sparse COO, got layout {t.layout}")
    if t.dtype == torch.bool:
        high, low = t.any(-1), None
    else:
        low, high = torch.aminmax(t, dim=-1)
    sub = t.unsqueeze(0) if one_list else t
    if sub.shape[1] == 0:  # lists without documents: one padding slot, as the ranking stage makes them
        sub = sub.new_zeros(sub.shape[0], 1, sub.shape[2])
    return high, sub, low


class SubtopicSplit(NamedTuple):
    """A checked subtopic target, split (:func:`split_subtopics`).

    Attributes:
        target: the ad-hoc grades ``(N, L)`` (``(L,)`` for one list): a document's largest subtopic
            grade; they drive the ranking stage (padding, ties by grade, unjudged documents).
        subtopics: the subtopic grades, dense ``(N, L, S)`` (``(1, L, S)`` for one list).
        ideal_target, ideal_subtopics: the same for ``ideal_target`` (None when not given).
        lowest, ideal_lowest: each document's smallest subtopic grade (None for bool grades), for
            :meth:`checks`.

    Example:
        >>> split = split_subtopics(torch.zeros(1, 2), torch.tensor([[[0, 3], [1, 0]]]))
        >>> split.target, split.lowest
        (tensor([[3, 1]]), tensor([[0, 0]]))
    """

    target: Tensor
    subtopics: Tensor
    ideal_target: Tensor | None
    ideal_subtopics: Tensor | None
    lowest: Tensor | None
    ideal_lowest: Tensor | None

    def checks(self) -> list[tuple[Tensor, str]]:
        """Value checks (flag, message), resolved by the caller in one host sync: negative and
        non-finite subtopic grades (read from each document's smallest and largest grade).

        Example:
            >>> [bool(f) for f, _ in split_subtopics(torch.zeros(1, 1), torch.tensor([[[0, -1]]])).checks()]
            [True]
        """
        out = []
        for name, low, high in (
            ("target", self.lowest, self.target),
            ("ideal_target", self.ideal_lowest, self.ideal_target),
        ):
            if low is None or high is None:
                continue
            bad = low < 0
            if low.is_floating_point():
                bad = bad | ~torch.isfinite(low) | ~torch.isfinite(high)
            out.append(
                (
                    bad.any(),
                    f"{name} has negative (or non-finite) subtopic grades: subtopic judgments are grades >= 0 "
                    "(ndeval reads natural numbers); mark unjudged documents with judged= or mask=, or clamp the "
                    "grades at 0",
                )
            )
        return out


def split_subtopics(preds: Tensor, target: Tensor, ideal_target: Tensor | None = None) -> SubtopicSplit:
    """Check a subtopic target and split it (:class:`SubtopicSplit`): the ad-hoc grades for the ranking
    stage and the dense subtopic grades. ``ideal_target``, when given, must carry the same subtopic
    axis, ``(N, M, S)``: the judgments of every judged document of each query.

    A sparse COO target (with a sparse ``ideal_target`` or none) has its subtopics numbered per list,
    ``0 .. S_q - 1`` in the order of their indices, and dense grades ``S = max S_q`` wide: indices
    unique across a collection cost the memory of one list's subtopics, not of all (one host sync
    reads that width). The values are those of the original numbering.

    Raises:
        ValueError: a subtopic axis of the wrong size (target vs preds, ideal_target vs target), an
            empty subtopic axis, or an ad-hoc ``ideal_target`` with a subtopic target.

    Example:
        >>> split = split_subtopics(torch.zeros(3), torch.tensor([[0, 1], [0, 0], [2, 0]]))
        >>> split.target, split.subtopics.shape
        (tensor([1, 0, 2]), torch.Size([1, 3, 2]))
    """
    if target.is_complex():
        raise TypeError(f"target must hold bool, integer or float grades, got {target.dtype}")
    if tuple(target.shape[:-1]) != tuple(preds.shape):
        raise ValueError(
            f"a subtopic target must have the shape of preds plus a subtopic axis, {tuple(preds.shape)} + (S,), "
            f"got {tuple(target.shape)}"
        )
    if target.shape[-1] == 0:
        raise ValueError("the subtopic axis of target is empty (S = 0): give at least one subtopic")
    if ideal_target is not None:
        if not isinstance(ideal_target, Tensor):
            raise TypeError(f"ideal_target must be a torch.Tensor, got {type(ideal_target).__name__}")
        if ideal_target.ndim != target.ndim or ideal_target.shape[-1] != target.shape[-1]:
            raise ValueError(
                f"with a subtopic target {tuple(target.shape)}, ideal_target must carry the same subtopic axis: "
                f"{'(M, S)' if preds.ndim == 1 else '(N, M, S)'} with S = {target.shape[-1]}, got "
                f"{tuple(ideal_target.shape)}"
            )
        if ideal_target.is_complex():
            raise TypeError(f"ideal_target must hold bool, integer or float grades, got {ideal_target.dtype}")
    if target.layout == torch.sparse_coo and (ideal_target is None or ideal_target.layout == torch.sparse_coo):
        target, ideal_target = _per_list_subtopics(target, ideal_target, preds.ndim == 1)
    adhoc, sub, low = _split(target, "target", preds.ndim == 1)
    ideal_adhoc = ideal_sub = ideal_low = None
    if ideal_target is not None:
        ideal_adhoc, ideal_sub, ideal_low = _split(ideal_target, "ideal_target", preds.ndim == 1)
    return SubtopicSplit(adhoc, sub, ideal_adhoc, ideal_sub, low, ideal_low)


NEEDS_SUBTOPICS = (
    "an intent-aware measure needs subtopic judgments: pass a target with a subtopic axis, (N, L, S) for "
    "(N, L) preds (dense, or torch sparse COO: torch_rankeval.ranking.subtopics.subtopic_target)"
)


def ranked_subtopics(rb: RankedView, width: int) -> Tensor:
    """Binary subtopic relevance of the first ``width`` ranked positions, ``(N, width, S)`` float64
    (0 at padding and for unjudged documents).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> from torch_rankeval.ranking.view import RankedBatch
        >>> sub = torch.tensor([[[0, 1], [1, 1]]])
        >>> rb = RankedBatch(torch.tensor([[0.1, 0.9]]), sub.amax(-1), None, DEFAULT, subtopics=sub)
        >>> ranked_subtopics(rb, 2)
        tensor([[[1., 1.],
                 [0., 1.]]], dtype=torch.float64)
    """
    rel = _relevant_subtopics(rb)
    order = rb.order[:, :width] if width < rb.length else rb.order
    ranked = rel.gather(1, order.unsqueeze(-1).expand(-1, -1, rel.shape[-1]))
    return (ranked & rb.head("judged", width).unsqueeze(-1)).to(torch.float64)


def document_subtopics(rb: RankedView) -> Tensor:
    """Binary subtopic relevance of each document in input order, ``(N, L, S)`` bool (False at padding
    and for unjudged documents).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> from torch_rankeval.ranking.view import RankedBatch
        >>> sub = torch.tensor([[[0, 2], [1, 0]]])
        >>> rb = RankedBatch(torch.tensor([[0.1, 0.9]]), sub.amax(-1), torch.tensor([[True, False]]), DEFAULT, subtopics=sub)
        >>> document_subtopics(rb)                      # the second document is padding
        tensor([[[False,  True],
                 [False, False]]])
    """
    rel = _relevant_subtopics(rb)
    counted = rb._doc("counted")  # type: ignore[attr-defined]
    return rel if counted is None else rel & counted.unsqueeze(-1)


def _relevant_subtopics(rb: RankedView) -> Tensor:
    """``(N, L, S)`` bool: the subtopic grades that are relevant (computed once per batch)."""
    sub = getattr(rb, "subtopics", None)
    if sub is None:
        raise ValueError(NEEDS_SUBTOPICS)
    return rb.cached("subtopic_rel", lambda: relevant(sub, rb.convention))


def ideal_subtopics(rb: RankedView) -> Tensor:
    """Binary subtopic relevance of every judged document of each query, ``(N, M, S)`` bool: those of
    ``ideal_target`` when given (entries that are padding: False), else the list's own documents.
    The column order matters only for ties of the greedy ideal ranking (ndeval: the larger docno
    first, here the later column).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> from torch_rankeval.ranking.view import RankedBatch
        >>> sub, judged = torch.tensor([[[0, 1]]]), torch.tensor([[[0, 1], [1, 0], [0, 0]]])
        >>> rb = RankedBatch(torch.tensor([[0.5]]), sub.amax(-1), None, DEFAULT, subtopics=sub,
        ...                  ideal_target=judged.amax(-1), ideal_subtopics=judged)
        >>> ideal_subtopics(rb).sum(1)                   # relevant judged documents per subtopic
        tensor([[1, 1]])
    """
    ideal = getattr(rb, "ideal_subtopics", None)
    if ideal is None:
        return document_subtopics(rb)
    rel = relevant(ideal, rb.convention)
    valid = rb.ideal_valid
    return rel if valid is None else rel & valid.unsqueeze(-1)
