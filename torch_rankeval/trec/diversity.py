"""TREC diversity qrels (``topic subtopic docno judgment``) and the intent-aware evaluation of a run.

The diversity tasks of TREC's Web track judge each document once per subtopic of a query; ndeval
reads those qrels and computes the intent-aware measures (alpha-nDCG, ERR-IA, NRBP, P-IA, MAP-IA,
subtopic recall: :mod:`torch_rankeval.kernels.intent_aware`). :func:`read_subtopic_qrels` reads such
a file (vectorised, like :func:`~torch_rankeval.trec.read_qrels`) and :func:`evaluate` (or
:func:`torch_rankeval.trec.evaluate`, which hands :class:`SubtopicQrels` here) computes measures on it:

- intent-aware measures see every judgment; judgments are binary (``> 0``: relevant), as ndeval's;
- ad-hoc measures (``map``, ``ndcg_cut.10``, ...) see one grade per document, its largest subtopic
  grade: a document relevant to any subtopic is relevant (ndeval's own ad-hoc MAP). trec_eval itself
  reads the second field as the unused "iteration" and stops with ``trec_eval.form_res_rels:
  duplicate docs`` as soon as a document is judged for two subtopics, so this view is the one
  definition there is for such a file;
- the run is ranked as trec_eval ranks it (score descending, ties by docno descending), which is
  ndeval's ``-traditional`` order (ndeval's default reads the rank column instead), and ndeval's
  greedy ideal ranking breaks its ties toward the larger docno, as here;
- the queries evaluated are those of both files (``complete=True``: every query of the qrels, a
  query the run misses scoring 0), and the summary is their mean, as ndeval's ``amean``.

The join (:func:`subtopic_tensors`) is the ad-hoc join of every other route (the same checks: a
document retrieved twice for one query is refused), with each query's subtopics numbered from 0, so
that memory follows the subtopics of one query however the file numbers them; the measures run on
the tensors as everywhere else.

Example:
    >>> import os, tempfile
    >>> from torch_rankeval import trec
    >>> folder = tempfile.mkdtemp()
    >>> qrels_path, run_path = os.path.join(folder, "qrels"), os.path.join(folder, "run")
    >>> with open(qrels_path, "w") as f:
    ...     _ = f.write("1 1 d1 1\\n1 2 d1 0\\n1 2 d2 1\\n1 1 d3 1\\n")
    >>> trec.write_run(run_path, {"1": {"d1": 0.9, "d2": 0.5, "d3": 0.7}}, tag="demo")
    >>> result = trec.evaluate(read_subtopic_qrels(qrels_path), run_path, ["alpha_nDCG@2", "StRecall@1", "P.2"])
    >>> {k: round(v, 4) for k, v in result.summary.items()}
    {'alpha_nDCG@2': 0.8066, 'StRecall@1': 0.5, 'P_2': 1.0}
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from torch_rankeval.conventions import resolve_convention
from torch_rankeval.measures import Measure, MeasurePlan, summarize
from torch_rankeval.trec._text import Strings, TrecFormatError, decode, read_table, table_from_rows
from torch_rankeval.trec.io import PathLike, Qrels, Run, _sorted_qids, _two_lines
from torch_rankeval.trec.join import to_tensors

__all__ = ["SubtopicQrels", "intent_aware_values", "read_subtopic_qrels", "subtopic_tensors"]


class SubtopicQrels:
    """Diversity judgments: for each query, the judgment of documents per subtopic.

    Attributes:
        qids: distinct query ids, sorted as trec_eval sorts them (byte order).
        qid: ``(n,)`` int64 index into ``qids`` of each judgment.
        docno: the docnos (:class:`~torch_rankeval.trec._text.Strings`).
        subtopic: ``(n,)`` int64 subtopic numbers (as written).
        judgment: ``(n,)`` int64 judgments (``>= 0``; relevant when ``> 0`` at the default level).
        line: ``(n,)`` int64 line numbers (0 when built from rows).
        path: the file read, or ``None``.

    Example:
        >>> q = SubtopicQrels.from_rows([("1", 1, "d1", 1), ("1", 2, "d1", 0), ("2", 1, "d7", 1)])
        >>> q.qids, q.adhoc().to_dict()
        (['1', '2'], {'1': {'d1': 1}, '2': {'d7': 1}})
    """

    path: str | None
    qids: list[str]
    qid: np.ndarray
    docno: Strings
    subtopic: np.ndarray
    judgment: np.ndarray
    line: np.ndarray

    def __init__(
        self,
        qid_names: list[bytes],
        qid: np.ndarray,
        docno: Strings,
        subtopic: np.ndarray,
        judgment: np.ndarray,
        line: np.ndarray,
        path: str | None = None,
    ) -> None:
        self.path = path
        self.qids, rank = _sorted_qids(qid_names)
        self.qid = rank[qid]
        self.docno, self.subtopic, self.judgment, self.line = docno, subtopic, judgment, line
        bad = np.flatnonzero(judgment < 0)
        if len(bad):
            raise TrecFormatError(
                f"{path or '<rows>'}, line {int(line[bad[0]])}: judgment {int(judgment[bad[0]])} is negative; diversity "
                "qrels hold judgments >= 0 (ndeval reads natural numbers)"
            )
        bad = np.flatnonzero(subtopic < 0)
        if len(bad):
            raise TrecFormatError(f"{path or '<rows>'}, line {int(line[bad[0]])}: subtopic numbers are >= 0")
        self._docs = [decode(d) for d in docno.tolist()]
        seen: dict[tuple[int, int, str], int] = {}
        for i, key in enumerate(zip(self.qid.tolist(), subtopic.tolist(), self._docs)):
            j = seen.setdefault(key, i)
            if j != i:
                where = _two_lines(path, (int(line[j]), int(line[i])))
                raise TrecFormatError(
                    f"{where}: duplicate judgment of document {key[2]!r} for query {self.qids[key[0]]!r}, "
                    f"subtopic {key[1]}"
                )

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[str, int, str, int]]) -> SubtopicQrels:
        """Judgments from ``(qid, subtopic, docno, judgment)`` rows (pyndeval's qrels tuples, with integer subtopics)."""
        if not rows:
            raise TrecFormatError("diversity qrels hold no judgment")
        qs, ss, ds, gs = zip(*rows)
        table = table_from_rows([str(q) for q in qs], [str(d) for d in ds], np.array(gs, dtype=np.int64))
        return cls(table.qid_names, table.qid, table.docno, np.array(ss, dtype=np.int64), table.value, table.line)

    def __len__(self) -> int:
        return len(self.qid)

    def adhoc(self) -> Qrels:
        """The ad-hoc view: one grade per (query, document), its largest subtopic judgment (a document
        relevant to any subtopic is relevant)."""
        best: dict[tuple[str, str], int] = {}
        for q, d, g in zip(self.qid.tolist(), self._docs, self.judgment.tolist()):
            key = (self.qids[q], d)
            best[key] = max(best.get(key, g), g)
        qs, ds = zip(*best) if best else ((), ())
        return Qrels(table_from_rows(list(qs), list(ds), np.array(list(best.values()), dtype=np.int64)), self.path)


def read_subtopic_qrels(path: PathLike, *, progress: bool | None = None) -> SubtopicQrels:
    """Read TREC diversity qrels (``topic subtopic docno judgment``), plain or gzip; ``"-"`` reads stdin.

    Raises:
        TrecFormatError: unreadable or empty file, a line without four fields, a subtopic or judgment
            that is not an integer >= 0, or a (query, subtopic, document) judged twice.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "qrels")
        >>> with open(path, "w") as f:
        ...     _ = f.write("7 1 d1 1\\n7 2 d1 0\\n")
        >>> q = read_subtopic_qrels(path)
        >>> q.subtopic.tolist(), q.judgment.tolist()
        ([1, 2], [1, 0])
    """
    grades = read_table(path, "qrels", progress=progress)
    try:
        subtopics = read_table(path, "subtopics", progress=False)
    except TrecFormatError as err:
        raise TrecFormatError(str(err).replace("relevance", "subtopic").replace("grade", "number")) from None
    return SubtopicQrels(
        grades.qid_names, grades.qid, grades.docno, subtopics.value, grades.value, grades.line, str(path)
    )


def _subtopic_columns(qid: np.ndarray, subtopic: np.ndarray) -> tuple[np.ndarray, int]:
    """Each judgment's subtopic column: the rank of its subtopic number among the distinct numbers of its
    query (``0 .. S_q - 1``, in increasing order of the numbers), and the subtopic axis ``max_q S_q``:
    memory follows the subtopics of a query, not how the file labels them."""
    pairs, inverse = np.unique(np.stack([qid, subtopic], axis=1), axis=0, return_inverse=True)
    first = np.searchsorted(pairs[:, 0], pairs[:, 0], side="left")  # pairs are sorted by query, then number
    column = np.arange(len(pairs)) - first
    return column[inverse.reshape(-1)], int(column.max()) + 1 if len(column) else 1


def subtopic_tensors(
    qrels: SubtopicQrels, run: Run, *, complete: bool = False, max_docs: int | None = None
) -> tuple[list[str], torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The join of a run with diversity qrels: ``(qids, preds (N, L), target (N, L, S), mask (N, L),
    ideal_target (N, M, S))``, float64 scores in trec_eval's ranking order (score descending, ties by
    docno descending: a stable sort keeps it), the judgments of each retrieved document (0 when
    unjudged) and those of every judged document in docno order (ndeval's ideal ranking breaks its
    ties toward the larger docno: the later column).

    The run goes through the ad-hoc join (:func:`~torch_rankeval.trec.join.to_tensors`), the one every
    route takes: the same queries, the same order, and the same checks (a document retrieved twice for
    one query is refused). Each query's subtopics are numbered ``0 .. S_q - 1`` in increasing order of
    their numbers, and ``S`` is the largest ``S_q``: the same tensors (and memory) whether the file
    numbers the subtopics of each query from 1 or uniquely across the file.

    Raises:
        TrecFormatError: a document appears twice for one query in the run, or the run has no query in
            common with the qrels.

    Example:
        >>> q = SubtopicQrels.from_rows([("1", 1, "d1", 1), ("1", 2, "d2", 1), ("2", 30, "d1", 1)])
        >>> qids, preds, target, mask, ideal = subtopic_tensors(q, Run.from_dict({"1": {"d2": 0.1, "d9": 0.5}}))
        >>> qids, preds.tolist(), target.tolist(), ideal.tolist()
        (['1'], [[0.5, 0.1]], [[[0, 0], [0, 1]]], [[[1, 0], [0, 1]]])
    """
    # one judged row per (query, document), whose "grade" is its row of subtopic judgments
    column, width = _subtopic_columns(qrels.qid, qrels.subtopic)
    pair_of: dict[tuple[int, str], int] = {}
    pair = np.array([pair_of.setdefault(key, len(pair_of)) for key in zip(qrels.qid.tolist(), qrels._docs)])
    grades = np.zeros((len(pair_of), width), dtype=np.int64)
    grades[pair, column] = qrels.judgment
    qs, ds = zip(*pair_of) if pair_of else ((), ())
    rows = Qrels(table_from_rows([qrels.qids[q] for q in qs], list(ds), np.arange(len(pair_of))), qrels.path)
    batch = to_tensors(rows, run, complete=complete)
    preds, mask, which = batch.preds, batch.mask, batch.target
    if max_docs is not None and preds.shape[-1] > max_docs:
        preds, mask, which = preds[:, :max_docs], mask[:, :max_docs], which[:, :max_docs]
    # the judged documents of a query come in docno descending order (padding -1 after them): reversed, ascending
    judged = batch.ideal_target
    count = (judged >= 0).sum(-1, keepdim=True)
    slot = torch.arange(judged.shape[-1]).expand_as(judged)
    judged = torch.where(slot < count, judged.gather(-1, (count - 1 - slot).clamp(min=0)), -1)
    table = torch.from_numpy(grades)

    def lookup(index: torch.Tensor) -> torch.Tensor:
        return torch.where((index >= 0).unsqueeze(-1), table[index.clamp(min=0)], 0)

    return batch.qids, preds, lookup(which), mask, lookup(judged)


def intent_aware_values(
    measures: Sequence[Measure],
    qrels: SubtopicQrels,
    run: Run,
    *,
    complete: bool = False,
    max_docs: int | None = None,
    device: torch.device | str | None = None,
) -> tuple[list[str], dict[str, torch.Tensor], dict[str, float | int]]:
    """Per-query values and summaries of intent-aware ``measures``: ``(qids, {label: (N,) float64},
    {label: mean})`` (ndeval's per-topic lines and its ``amean``).

    Example:
        >>> from torch_rankeval.measures import parse_measures
        >>> q = SubtopicQrels.from_rows([("1", 1, "d1", 1), ("1", 2, "d2", 1)])
        >>> qids, values, summary = intent_aware_values(parse_measures(["StRecall@1"]), q, Run.from_dict({"1": {"d2": 1.0}}))
        >>> qids, summary
        (['1'], {'StRecall@1': 0.5})
    """
    qids, preds, target, mask, ideal = subtopic_tensors(qrels, run, complete=complete, max_docs=max_docs)
    if device is not None:
        preds, target, mask, ideal = (t.to(device) for t in (preds, target, mask, ideal))
    plan = MeasurePlan(list(measures), resolve_convention("trec_eval"))
    values, _, _ = plan.values(preds, target, mask=mask, ideal_target=ideal, validate_args=False)
    per_query = {label: values[:, j].cpu().to(torch.float64) for j, label in enumerate(plan.labels)}
    summary = {m.label: summarize(m, per_query[m.label]) for m in measures}
    return qids, per_query, summary
