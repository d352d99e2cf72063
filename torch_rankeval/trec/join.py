"""The join of a run with its qrels: padded tensors in trec_eval's ranking order.

:func:`to_tensors` pads every query to the longest (see :class:`TrecBatch`, :mod:`torch_rankeval.trec`);
:func:`to_batches` gives the same rows in length buckets, each padded only to its own longest query, so
that memory follows the number of documents however skewed the query lengths are (one query of a
million documents among thousands of ten).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from torch_rankeval.kernels.bpref import POOLED_UNJUDGED
from torch_rankeval.trec._join_kernels import docno_keys, padded_join, ranking_order, same_docno
from torch_rankeval.trec._text import TrecFormatError, decode
from torch_rankeval.trec.io import Qrels, Run, _two_lines

__all__ = ["PADDING_FACTOR", "TrecBatch", "TrecBatches", "to_batches", "to_tensors"]

PADDING_FACTOR = 2.0
"""One padded batch is built when it holds at most this many times the entries of the data
(retrieved plus judged documents, plus one per query); otherwise queries go to length buckets."""


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
        rows: ``(N,)`` int64 position of each row among all evaluated queries (trec_eval's order);
            ``arange(N)`` for :func:`to_tensors`, a bucket's queries for :func:`to_batches`.
    """

    qids: list[str]
    preds: Tensor
    target: Tensor
    mask: Tensor
    ideal_target: Tensor
    retrieved: Tensor
    runid: str
    rows: Tensor | None = None

    def to(self, device: torch.device | str) -> TrecBatch:
        """The same batch on another device (``rows`` stays on the CPU)."""
        move = {k: getattr(self, k).to(device) for k in ("preds", "target", "mask", "ideal_target", "retrieved")}
        return TrecBatch(qids=self.qids, runid=self.runid, rows=self.rows, **move)


@dataclass
class TrecBatches:
    """A run joined with its qrels as length buckets of padded tensors (see :func:`to_batches`).

    Attributes:
        qids: every evaluated query, sorted as trec_eval sorts them.
        retrieved: ``(N,)`` bool, False for queries the run does not answer (``complete=True``).
        runid: the run's tag.
        batches: the buckets (:class:`TrecBatch`, each with its ``rows`` among ``qids``), built
            one at a time as they are iterated; together they hold every query once.
    """

    qids: list[str]
    retrieved: Tensor
    runid: str
    batches: Iterator[TrecBatch]

    def __iter__(self) -> Iterator[TrecBatch]:
        return iter(self.batches)


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


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] .. starts[i] + lengths[i] - 1``, one range after the other."""
    total = int(lengths.sum())
    return np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(total)


def _log2_ceil(x: np.ndarray) -> np.ndarray:
    """``ceil(log2(max(x, 1)))`` of non-negative integers (exact below 2**53)."""
    return np.frexp(np.maximum(x, 1).astype(np.float64) - 1)[1]


class _Join:
    """The work shared by every bucket: the run in trec_eval's ranking order, each evaluated
    query's range of run rows and of judged rows, and docno keys. All of it is O(lines)."""

    def __init__(self, qrels: Qrels, run: Run, complete: bool) -> None:
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
        whole = len(keep) == len(run)
        q = run_q if whole else run_q[keep]
        docno = run.docno if whole else run.docno.take(keep)
        score = run.score if whole else run.score[keep]

        order, starts = ranking_order(q, score, docno)
        group_qid = q[starts] if order.full is None else q[order.full[starts]]  # ties stay inside a query
        answered = np.zeros(len(qrels.qids), dtype=bool)
        answered[group_qid] = True
        evaluated = np.ones(len(qrels.qids), dtype=bool) if complete else answered
        eval_index = np.cumsum(evaluated) - 1
        n = int(evaluated.sum())

        self.qrels, self.run, self.keep, self.order = qrels, run, keep, order
        self.n, self.m = n, len(q)
        self.qids = [name for name, e in zip(qrels.qids, evaluated) if e]
        self.retrieved = answered[evaluated]
        self.group_rows, self.group_starts = eval_index[group_qid], starts
        self.run_len = np.zeros(n, dtype=np.int64)
        self.run_start = np.zeros(n, dtype=np.int64)
        self.run_len[self.group_rows] = np.diff(starts, append=len(q))
        self.run_start[self.group_rows] = starts
        self.score = order.apply(score, tie_invariant=True)
        self.docno = order.apply(docno)
        # Judged rows of the evaluated queries (qrels rows are sorted by query: one range each).
        self.judged_rows = np.flatnonzero(evaluated[qrels.qid])
        self.judged_docno = qrels.docno if len(self.judged_rows) == len(qrels) else qrels.docno.take(self.judged_rows)
        self.judged_len = np.bincount(eval_index[qrels.qid[self.judged_rows]], minlength=n).astype(np.int64)
        self.judged_start = np.cumsum(self.judged_len) - self.judged_len
        self.run_keys, self.qrels_keys, self.exact = docno_keys(self.docno, self.judged_docno)

    def release(self) -> None:
        """Drop the work arrays (no batch can be built afterwards)."""
        self.score = self.docno = self.judged_docno = self.run_keys = self.qrels_keys = None  # type: ignore[assignment]
        self.keep = self.order = None  # type: ignore[assignment]

    def buckets(self, factor: float | None) -> list[np.ndarray]:
        """The evaluated queries in buckets (each sorted): all of them when one padded batch holds
        at most ``factor`` times the data's entries (``None``: always), else geometric buckets of
        (retrieved, judged) lengths, each padded to at most twice its entries."""
        a, b, n = self.run_len, self.judged_len, self.n
        padded = n * (max(int(a.max()), 1) + max(int(b.max()), 1))
        if factor is None or padded <= factor * (int(a.sum()) + int(b.sum()) + 2 * n):
            return [np.arange(n)]
        key = _log2_ceil(a) * 64 + _log2_ceil(b)
        order = np.argsort(key, kind="stable")
        cuts = np.flatnonzero(np.diff(key[order])) + 1
        return np.split(order, cuts)

    def batch(self, rows: np.ndarray) -> TrecBatch:
        """The padded tensors of the evaluated queries ``rows`` (sorted)."""
        k = len(rows)
        everything = k == self.n
        # Run rows of these queries (in ranking order) and their layout; for all queries, the
        # ranked run as it is.
        if everything:
            pos = None
            layout = _Layout(self.group_rows, self.group_starts, self.m, k)
        else:
            lengths = self.run_len[rows]
            pos = _ranges(self.run_start[rows], lengths)
            layout = _Layout(np.arange(k), np.cumsum(lengths) - lengths, len(pos), k)
        jlen = self.judged_len[rows]
        jpos = None if everything else _ranges(self.judged_start[rows], jlen)
        ideal_layout = _Layout(np.arange(k), np.cumsum(jlen) - jlen, int(jlen.sum()), k)

        def pick(x: np.ndarray, p: np.ndarray | None) -> np.ndarray:
            return x if p is None else x[p]

        valid = layout.mask()
        qrels_source = ideal_layout.source()
        run_source = None

        def run_rows(flat: np.ndarray) -> np.ndarray:
            """Row of the ranked run at flat positions of the run matrix."""
            nonlocal run_source
            if run_source is None:
                run_source = layout.source()
            local = run_source.flat[flat]
            return local if pos is None else pos[local]

        def judged(flat: np.ndarray) -> np.ndarray:
            """Row of the judged docnos at flat positions of the qrels matrix."""
            local = qrels_source.flat[flat]
            return local if jpos is None else jpos[local]

        def confirm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return same_docno(self.docno, run_rows(a), self.judged_docno, judged(b))

        def confirm_run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return same_docno(self.docno, run_rows(a), self.docno, run_rows(b))

        duplicate, run_flat, qrels_flat = padded_join(
            layout.scatter(pick(self.run_keys, pos), 0, np.int64),
            valid,
            ideal_layout.scatter(pick(self.qrels_keys, jpos), 0, np.int64),
            qrels_source >= 0,
            None if self.exact else confirm,
            None if self.exact else confirm_run,
        )
        if duplicate is not None:
            first, second = run_rows(np.array(duplicate))
            a, b = self.keep[self.order.index()[[first, second]]]
            run = self.run
            where = _two_lines(run.path, (int(run.line[a]), int(run.line[b])))
            docno_text = decode(run.docno.item(a))
            raise TrecFormatError(f"{where}: document {docno_text!r} appears twice for query {run.qids[run.qid[a]]!r}")

        relevance = self.qrels.relevance[self.judged_rows]
        preds = torch.from_numpy(layout.scatter(pick(self.score, pos), 0.0, np.float64))
        target = np.full(k * layout.width, -1, dtype=np.int64)
        # Retrieved documents in the qrels with a negative grade become POOLED_UNJUDGED (-2: in the judgment
        # pool but not judged, trec_eval's RELVALUE_UNJUDGED); documents absent from the qrels stay -1
        # (RELVALUE_NONPOOL). infAP and relstring tell the two apart.
        grades = relevance[judged(qrels_flat)]
        target[run_flat] = np.where(grades < 0, POOLED_UNJUDGED, grades)
        ideal = ideal_layout.scatter(np.maximum(pick(relevance, jpos), -1), -1, np.int64)
        return TrecBatch(
            [self.qids[i] for i in rows.tolist()] if not everything else list(self.qids),
            preds,
            torch.from_numpy(target.reshape(k, layout.width)),
            torch.from_numpy(valid),
            torch.from_numpy(ideal),
            torch.from_numpy(self.retrieved[rows]),
            self.run.tag,
            torch.from_numpy(np.asarray(rows, dtype=np.int64)),
        )


def to_tensors(qrels: Qrels, run: Run, *, complete: bool = False) -> TrecBatch:
    """Join a run with its qrels into padded tensors in trec_eval's order (see :class:`TrecBatch`).

    Each row holds a query's documents ranked as trec_eval ranks them (score descending, ties by
    docno descending), so the ranking core's stable sort (``ties="first"``) keeps that order.
    Queries of the run that the qrels do not judge are ignored; ``complete=True`` (trec_eval's
    ``-c``) adds the qrels' queries that the run does not answer, as empty rows that score 0.

    Every row is padded to the longest query (``N x L``): for runs whose query lengths differ
    wildly, :func:`to_batches` gives the same rows in buckets whose memory follows the data.

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
    join = _Join(qrels, run, complete)
    batch = join.batch(np.arange(join.n))
    join.release()
    return batch


def to_batches(qrels: Qrels, run: Run, *, complete: bool = False) -> TrecBatches:
    """Join a run with its qrels into length buckets of padded tensors (see :class:`TrecBatches`).

    The rows are those of :func:`to_tensors` (the same order inside each query, the same grades
    and ideal), but when padding every query to the longest would more than double the data
    (:data:`PADDING_FACTOR`), queries are grouped by the sizes of their retrieved and judged lists
    (powers of two), and each bucket is padded only to its own longest: memory stays within about
    twice the number of documents, however skewed the lengths. Each bucket's ``rows`` say where
    its queries sit among ``qids``. Buckets are built as they are iterated.

    Raises:
        TrecFormatError: the run has no query in common with the qrels (at once), or a document
            appears twice for one query (when its bucket is built).

    Example:
        >>> qrels = Qrels.from_dict({"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}})
        >>> run = Run.from_dict({"q1": {f"d{i}": float(i) for i in range(64)}, "q2": {"b": 1.0}, "q3": {"c": 0.5}})
        >>> joined = to_batches(qrels, run)
        >>> joined.qids
        ['q1', 'q2', 'q3']
        >>> [(b.rows.tolist(), tuple(b.preds.shape)) for b in joined]
        [([1, 2], (2, 1)), ([0], (1, 64))]
    """
    join = _Join(qrels, run, complete)
    batches = _iterate(join, join.buckets(PADDING_FACTOR))
    return TrecBatches(join.qids, torch.from_numpy(join.retrieved), run.tag, batches)


def _iterate(join: _Join, buckets: list[np.ndarray]) -> Iterator[TrecBatch]:
    """The buckets' batches; the join's O(lines) work arrays are released before the last one is
    handed out, so that they do not sit in memory while it is evaluated."""
    for i, rows in enumerate(buckets):
        batch = join.batch(rows)
        if i == len(buckets) - 1:
            join.release()
        yield batch
