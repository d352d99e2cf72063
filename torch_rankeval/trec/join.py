"""The join of a run with its qrels: padded tensors in trec_eval's ranking order.

:func:`to_tensors` joins a run with its qrels into padded tensors in trec_eval's ranking order
(score descending, ties by docno descending, so that the ranking core's stable sort,
``ties="first"``, keeps it) together with the grades of every judged document (trec_eval's IDCG
and relevant counts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from torch_rankeval.functional.bpref import POOLED_UNJUDGED
from torch_rankeval.trec._join_kernels import docno_keys, padded_join, ranking_order, same_docno
from torch_rankeval.trec._text import TrecFormatError, decode
from torch_rankeval.trec.io import Qrels, Run, _two_lines

__all__ = ["TrecBatch", "to_tensors"]


@dataclass
class TrecBatch:
    """A run joined with its qrels as padded tensors, ready for the ranking core.

    Attributes:
        qids: the evaluated queries (rows), sorted as trec_eval sorts them.
        preds: ``(N, L)`` float64 scores; each row holds a query's documents in trec_eval's ranking
            order (score descending, ties by docno descending). It may share memory with the
            run's ``score`` array.
        target: ``(N, L)`` int64 grades; ``-1``: absent from the qrels (trec_eval's
            RELVALUE_NONPOOL) or padding; ``-2``: a negative grade in the qrels, in the judgment
            pool but not judged (trec_eval's RELVALUE_UNJUDGED). Both are unjudged.
        mask: ``(N, L)`` bool, False = padding.
        ideal_target: ``(N, M)`` int64 grades of every judged document of each query, ``-1``
            for padding and negative grades.
        retrieved: ``(N,)`` bool, False for queries of the qrels that the run does not answer
            (only with ``complete=True``).
        runid: the run's tag.
    """

    qids: list[str]
    preds: Tensor
    target: Tensor
    mask: Tensor
    ideal_target: Tensor
    retrieved: Tensor
    runid: str

    def to(self, device: torch.device | str) -> TrecBatch:
        """The same batch on another device."""
        move = {k: getattr(self, k).to(device) for k in ("preds", "target", "mask", "ideal_target", "retrieved")}
        return TrecBatch(qids=self.qids, runid=self.runid, **move)


class _Layout:
    """Where a query-grouped sequence of values goes in an ``(n, width)`` matrix: the values of
    each group fill its row from the left, in their order.

    Args:
        group_rows: the matrix row of each group.
        starts: where each group starts in the sequence.
        m: the sequence's length.
        n: the number of matrix rows (rows without a group stay padding).
    """

    def __init__(self, group_rows: np.ndarray, starts: np.ndarray, m: int, n: int) -> None:
        lengths = np.diff(starts, append=m)
        self.n, self.width = n, max(int(lengths.max()) if len(lengths) else 0, 1)
        # The common case, every query with the same number of documents and in order: a reshape.
        self.identity = n * self.width == m and np.array_equal(group_rows, np.arange(n))
        if not self.identity:
            self.flat = np.repeat(group_rows * self.width - starts, lengths) + np.arange(m)

    def scatter(self, values: np.ndarray, fill, dtype) -> np.ndarray:
        if self.identity:
            return np.asarray(values, dtype=dtype).reshape(self.n, self.width)
        out = np.full(self.n * self.width, fill, dtype=dtype)
        out[self.flat] = values
        return out.reshape(self.n, self.width)

    def mask(self) -> np.ndarray:
        if self.identity:
            return np.ones((self.n, self.width), dtype=bool)
        return self.scatter(True, False, np.bool_)

    def source(self) -> np.ndarray:
        """The sequence index of each matrix position (-1 for padding)."""
        return self.scatter(np.arange(self.n * self.width if self.identity else len(self.flat)), -1, np.int64)


def _group_starts(rows: np.ndarray) -> np.ndarray:
    return (
        np.concatenate([np.zeros(1, dtype=np.int64), np.flatnonzero(rows[1:] != rows[:-1]) + 1]) if len(rows) else rows
    )


def _run_grades(relevance: np.ndarray) -> np.ndarray:
    """The grades of retrieved documents found in the qrels: a negative grade becomes ``POOLED_UNJUDGED``
    (-2: in the judgment pool but not judged, trec_eval's RELVALUE_UNJUDGED); documents absent from
    the qrels stay -1 (RELVALUE_NONPOOL). infAP and relstring tell the two apart."""
    return np.where(relevance < 0, POOLED_UNJUDGED, relevance)


def to_tensors(qrels: Qrels, run: Run, *, complete: bool = False) -> TrecBatch:
    """Join a run with its qrels into padded tensors in trec_eval's order (see :class:`TrecBatch`).

    Each row holds a query's documents ranked as trec_eval ranks them (score descending, ties by
    docno descending), so the ranking core's stable sort (``ties="first"``) keeps that order.
    Queries of the run that the qrels do not judge are ignored; ``complete=True`` (trec_eval's
    ``-c``) adds the qrels' queries that the run does not answer, as empty rows that score 0.

    Raises:
        TrecFormatError: a document appears twice for one query in the run, or the run has no
            query in common with the qrels.

    Example:
        >>> qrels = Qrels.from_dict({"q1": {"a": 1, "b": 2, "z": 1}, "q2": {"a": 1}})
        >>> run = Run.from_dict({"q1": {"a": 0.5, "b": 0.5, "c": 0.9}, "q3": {"a": 1.0}})
        >>> batch = to_tensors(qrels, run, complete=True)
        >>> batch.qids, batch.preds.tolist(), batch.target.tolist()
        (['q1', 'q2'], [[0.9, 0.5, 0.5], [0.0, 0.0, 0.0]], [[-1, 2, 1], [-1, -1, -1]])
        >>> batch.ideal_target.tolist(), batch.retrieved.tolist()
        ([[1, 2, 1], [1, -1, -1]], [True, False])
    """
    judged_index = {q: i for i, q in enumerate(qrels.qids)}
    run_to_qrels = np.array([judged_index.get(q, -1) for q in run.qids], dtype=np.int64)
    run_q = run_to_qrels[run.qid]
    keep = np.flatnonzero(run_q >= 0)
    if not len(keep):
        raise TrecFormatError(
            f"{run.path or 'the run'} has no query in common with {qrels.path or 'the qrels'} "
            f"(run queries such as {', '.join(map(repr, run.qids[:3]))}; judged queries such as "
            f"{', '.join(map(repr, qrels.qids[:3]))})"
        )
    q = run_q[keep]
    docno = run.docno[keep] if len(keep) < len(run) else run.docno
    score = run.score[keep] if len(keep) < len(run) else run.score

    order, starts = ranking_order(q, score, docno)
    group_qid = q[starts] if order.full is None else q[order.full[starts]]  # ties stay inside a query
    answered = np.zeros(len(qrels.qids), dtype=bool)
    answered[group_qid] = True
    evaluated = np.ones(len(qrels.qids), dtype=bool) if complete else answered
    eval_index = np.cumsum(evaluated) - 1
    n = int(evaluated.sum())

    # Each query's retrieved documents in ranking order, and its judged documents, as padded rows.
    layout = _Layout(eval_index[group_qid], starts, len(q), n)
    judged_rows = np.flatnonzero(evaluated[qrels.qid])
    judged_qid = qrels.qid[judged_rows]
    judged_starts = _group_starts(judged_qid)
    ideal_layout = _Layout(eval_index[judged_qid[judged_starts]], judged_starts, len(judged_rows), n)
    run_docno = order.apply(docno)
    run_keys, qrels_keys, exact = docno_keys(run_docno, qrels.docno[judged_rows])
    valid = layout.mask()
    qrels_source = ideal_layout.source()
    run_source = None

    def run_rows(flat: np.ndarray) -> np.ndarray:
        """Row of ``run_docno`` at flat positions of the run matrix."""
        nonlocal run_source
        if run_source is None:
            run_source = layout.source()
        return run_source.flat[flat]

    def confirm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return same_docno(run_docno[run_rows(a)], qrels.docno[judged_rows[qrels_source.flat[b]]])

    def confirm_run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return same_docno(run_docno[run_rows(a)], run_docno[run_rows(b)])

    duplicate, run_flat, qrels_flat = padded_join(
        layout.scatter(run_keys, 0, np.int64),
        valid,
        ideal_layout.scatter(qrels_keys, 0, np.int64),
        qrels_source >= 0,
        None if exact else confirm,
        None if exact else confirm_run,
    )
    if duplicate is not None:
        first, second = run_rows(np.array(duplicate))
        a, b = keep[order.index()[[first, second]]]
        where = _two_lines(run.path, (int(run.line[a]), int(run.line[b])))
        docno_text = decode(run.docno[a].tobytes().rstrip(b"\0"))
        raise TrecFormatError(f"{where}: document {docno_text!r} appears twice for query {run.qids[run.qid[a]]!r}")

    preds = torch.from_numpy(layout.scatter(order.apply(score, tie_invariant=True), 0.0, np.float64))
    mask = torch.from_numpy(valid)
    target = np.full(n * layout.width, -1, dtype=np.int64)
    target[run_flat] = _run_grades(qrels.relevance[judged_rows[qrels_source.flat[qrels_flat]]])
    target = torch.from_numpy(target.reshape(n, layout.width))
    ideal = torch.from_numpy(ideal_layout.scatter(np.maximum(qrels.relevance[judged_rows], -1), -1, np.int64))
    qids = [name for name, e in zip(qrels.qids, evaluated) if e]
    return TrecBatch(qids, preds, target, mask, ideal, torch.from_numpy(answered[evaluated]), run.tag)


