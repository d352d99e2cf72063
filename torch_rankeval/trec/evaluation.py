"""trec_eval's evaluation of a run against its qrels: per-query values, the summary, and trec_eval's
printed lines."""

from __future__ import annotations

import dataclasses
import math
import os
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from torch_rankeval._choices import TREC_EVAL_VERSIONS as _TREC_EVAL_VERSIONS
from torch_rankeval.conventions import resolve_convention
from torch_rankeval.kernels.interpolated import relevant_counts
from torch_rankeval.measures import NICKNAMES, Measure, compute, parse_measures, summarize
from torch_rankeval.measures.grammar import check_distinct
from torch_rankeval.measures.reduction import sample_stderr
from torch_rankeval.measures.registry import TREC_BY_NAME
from torch_rankeval.trec._tables import csv_text, latex_escape, latex_number, latex_table, require_pandas
from torch_rankeval.trec._text import EmptyTrecFile, table_from_rows
from torch_rankeval.trec.convert import _dict_of_dicts, _is_dataframe, as_measures, as_qrels, as_run
from torch_rankeval.trec.diversity import SubtopicQrels, intent_aware_values, read_subtopic_qrels
from torch_rankeval.trec.io import PathLike, Qrels, Run, read_qrels, read_run
from torch_rankeval.trec.join import TrecBatch, to_batches
from torch_rankeval.trec.peers import CWL_EVAL_DEPTH, TREC_PRESETS, judged_negative, ranked_run

__all__ = [
    "TREC_EVAL_VERSIONS",
    "Evaluation",
    "Output",
    "evaluate",
    "judged_documents",
    "preset_measures",
    "relstrings",
    "trec_measures",
]

#: The trec_eval versions whose output :func:`evaluate` reproduces: ``"10.0"`` (the current one)
#: and ``"9.0.8"`` (the one pytrec_eval and ir_measures compile in). Defined torch-free in
#: :mod:`torch_rankeval._choices` for the command line's ``--help``.
TREC_EVAL_VERSIONS = _TREC_EVAL_VERSIONS


@dataclass(frozen=True)
class Output:
    """One printed measure with its names.

    Attributes:
        measure: the parsed :class:`~torch_rankeval.measures.Measure`.
        index: always 0 (a measure has one cutoff; kept for compatibility).
        name: the name as written (``"nDCG@10"`` or ``"ndcg_cut_10"``).
        trec_name: trec_eval's printed name where trec_eval has the measure, else ``name``.
    """

    measure: Measure
    index: int
    name: str
    trec_name: str


@dataclass
class Evaluation:
    """The measures of one run: per-query values and trec_eval's summary.

    Attributes:
        run: the run's name in every table (``to_csv``, ``to_pandas``, ``to_dict``, ``to_latex``, the
            CLI): its file as given, or its tag for a run built in memory.
        runid: the run's tag.
        qids: the evaluated queries, sorted.
        outputs: the :class:`Output` columns with numbers (and ``runid``), in the order the measures
            were given.
        per_query: ``{name: (N,) float64 tensor}`` for every measure with per-query values.
        summary: ``{name: number}``: the mean over queries (``num_*``: the sum, ``num_q``: the
            number of queries, ``gm_map`` and ``gm_bpref``: the geometric mean).
        retrieved: ``(N,)`` bool, False for queries the run does not answer (``complete=True``).
        texts: the :class:`Output` of measures whose per-query value is a text (``relstring``);
            they have no summary and print in trec_eval's format only.
        text: ``{name: [text per query]}`` for ``texts``.
        version: the trec_eval version reproduced (:data:`TREC_EVAL_VERSIONS`).
        info: ``{name: text}`` for the measures whose value is a text (``runid``: the run tag).
            :attr:`printed` merges it with ``summary`` in the order of ``outputs``.

    The tables: :meth:`to_dict`, :meth:`to_csv`, :meth:`to_latex` (plain Python) and
    :meth:`to_pandas` (needs pandas: ``pip install torch-rankeval[pandas]``).
    """

    run: str
    runid: str
    qids: list[str]
    outputs: list[Output]
    per_query: dict[str, Tensor]
    summary: dict[str, float | int]
    retrieved: Tensor
    texts: list[Output] = field(default_factory=list)
    text: dict[str, list[str]] = field(default_factory=dict)
    version: str = "10.0"
    info: dict[str, str] = field(default_factory=dict)

    @property
    def printed(self) -> dict[str, float | int | str]:
        """The summary as trec_eval prints it: numbers and the text values (``runid``), in the order of ``outputs``.

        Example:
            >>> r = evaluate(Qrels.from_dict({"q1": {"d1": 1}}), Run.from_dict({"q1": {"d1": 0.5}}, tag="x"), ["runid", "map"])
            >>> r.summary, r.info, r.printed
            ({'map': 1.0}, {'runid': 'x'}, {'runid': 'x', 'map': 1.0})
        """
        return {o.name: self.info[o.name] if o.name in self.info else self.summary[o.name] for o in self.outputs}

    def to_dict(self, *, per_query: bool = True) -> dict[str, Any]:
        """Plain Python: ``{"run", "runid", "version", "summary": {name: number}, "per_query": {qid:
        {name: value}}}`` (``per_query`` only with ``per_query=True``; measures without per-query
        values, such as ``num_q``, are in the summary only). Valid JSON (NaN aside).

        Example:
            >>> r = evaluate(Qrels.from_dict({"q1": {"d1": 1}, "q2": {"d2": 1}}), Run.from_dict({"q1": {"d1": 0.5}, "q2": {"d1": 0.5}}), ["P.1", "num_q"])
            >>> r.to_dict()
            {'run': 'run', 'runid': 'run', 'version': '10.0', 'summary': {'P_1': 0.5, 'num_q': 2}, 'per_query': {'q1': {'P_1': 1.0}, 'q2': {'P_1': 0.0}}}
        """
        out: dict[str, Any] = {"run": self.run, "runid": self.runid, "version": self.version}
        out["summary"] = dict(self.summary)
        if per_query:
            values = self._per_query_lists()
            out["per_query"] = {q: {n: v[i] for n, v in values.items()} for i, q in enumerate(self.qids)}
        return out

    def _per_query_lists(self) -> dict[str, list[float | int]]:
        integer = {o.name: o.measure.family.integer for o in self.outputs}
        return {n: [round(x) for x in v.tolist()] if integer.get(n) else v.tolist() for n, v in self.per_query.items()}

    def to_csv(self, path: PathLike | None = None, *, per_query: bool = False) -> str:
        """CSV text with the header ``run,qid,measure,value``: the summary (``qid`` is ``all``), after
        every query's values with ``per_query=True``, as ``torch-rankeval evaluate --format csv``
        writes them; floats as ``repr`` (they read back exactly). Written to ``path`` too when given.

        Example:
            >>> r = evaluate(Qrels.from_dict({"q1": {"d1": 1}}), Run.from_dict({"q1": {"d1": 0.5}}), ["P.1", "num_q"])
            >>> print(r.to_csv(per_query=True), end="")
            run,qid,measure,value
            run,q1,P_1,1.0
            run,all,P_1,1.0
            run,all,num_q,1
        """
        rows: list[list[Any]] = []
        if per_query:
            values = self._per_query_lists()
            for i, q in enumerate(self.qids):
                rows.extend([self.run, q, n, v[i]] for n, v in values.items())
        rows.extend([self.run, "all", n, v] for n, v in self.summary.items())
        return csv_text(["run", "qid", "measure", "value"], rows, path)

    def to_latex(self, *, decimals: int = 4, caption: str | None = None, label: str | None = None) -> str:
        r"""The summary as a LaTeX table (booktabs): one row, the run, and a column per measure.
        For several runs with significance marks, see :meth:`~torch_rankeval.stats.RunComparison.to_latex`.

        Example:
            >>> r = evaluate(Qrels.from_dict({"q1": {"d1": 1}}), Run.from_dict({"q1": {"d1": 0.5}}, tag="bm25"), ["P.1", "num_q"])
            >>> print(r.to_latex(decimals=2))
            \begin{table}
            \centering
            \begin{tabular}{lrr}
            \toprule
            Run & P\_1 & num\_q \\
            \midrule
            bm25 & 1.00 & 1 \\
            \bottomrule
            \end{tabular}
            \end{table}
        """
        cells = [latex_number(v, decimals) for v in self.summary.values()]
        return latex_table(list(self.summary), [[latex_escape(self.run), *cells]], caption, label)

    def to_pandas(self, *, per_query: bool = False) -> Any:
        """A pandas DataFrame: the summary as one row indexed by the run (``per_query=False``), or a
        row per query indexed by ``qid`` with a column per measure that has per-query values.

        Raises:
            ImportError: pandas is not installed (``pip install torch-rankeval[pandas]``).

        Example:
            >>> r = evaluate(Qrels.from_dict({"q1": {"d1": 1}, "q2": {"d2": 1}}), Run.from_dict({"q1": {"d1": 0.5}}), ["P.1"], complete=True)
            >>> r.to_pandas(per_query=True)["P_1"].tolist()  # doctest: +SKIP
            [1.0, 0.0]
        """
        pd = require_pandas()
        if per_query:
            return pd.DataFrame(self._per_query_lists(), index=pd.Index(self.qids, name="qid"))
        return pd.DataFrame([self.summary], index=pd.Index([self.run], name="run"))

    def stderr(self) -> dict[str, float]:
        """The standard error over queries of each summary with per-query values (``scipy.stats.sem``
        of the per-query values; ``num_*`` sums: ``n`` times it; ``gm_*``: ``gm * sem`` of the logs;
        NaN under 2 queries): :func:`~torch_rankeval.measures.reduction.sample_stderr`.

        Example:
            >>> qrels = Qrels.from_dict({"q1": {"d1": 1}, "q2": {"d2": 1}})
            >>> run = Run.from_dict({"q1": {"d1": 0.5}, "q2": {"d1": 0.9, "d2": 0.1}})
            >>> evaluate(qrels, run, ["recip_rank"]).stderr()          # sem([1, 0.5])
            {'recip_rank': 0.25}
        """
        return {
            o.name: sample_stderr(self.per_query[o.name], o.measure.family.aggregate)
            for o in self.outputs
            if o.name in self.per_query
            and o.name in self.summary
            and o.measure.family.aggregate in ("mean", "sum", "gmean")
        }

    def trec_lines(self, *, per_query: bool = False, summary: bool = True) -> list[str]:
        """trec_eval's output lines: ``measure<pad>\\tqid\\tvalue`` (``%-22s\\t%s\\t%6.4f``, counts
        ``%ld``, ``relstring`` ``'%s'``).

        Measures print in trec_eval's order; with ``per_query`` every query's values come first,
        query by query (trec_eval 9.0.8 does not print the queries that ``-c`` adds), then the
        summary (``all``) lines, which ``relstring`` and ``runid``-less measures skip as trec_eval does.

        Example:
            >>> qrels, run = Qrels.from_dict({"q1": {"d1": 1}}), Run.from_dict({"q1": {"d1": 0.5}}, tag="x")
            >>> evaluate(qrels, run, ["map", "num_q", "relstring"]).trec_lines(per_query=True)
            ['map                   \\tq1\\t1.0000', "relstring             \\tq1\\t'1'", 'num_q                 \\tall\\t1', 'map                   \\tall\\t1.0000']
        """
        outputs = sorted([*self.outputs, *self.texts], key=lambda o: o.measure.sort_key())
        printed = self.printed
        lines = []
        if per_query:
            numbers, columns = self._per_query_lists(), []
            for o in outputs:
                if o.name in numbers:
                    columns.append((o, [_fmt(v) for v in numbers[o.name]]))
                elif o.name in self.text:
                    columns.append((o, [f"'{s}'" for s in self.text[o.name]]))
            shown = self.retrieved.tolist() if self.version == "9.0.8" else [True] * len(self.qids)
            for i, qid in enumerate(self.qids):
                if shown[i]:
                    lines.extend(f"{o.trec_name:<22}\t{qid}\t{values[i]}" for o, values in columns)
        if summary:
            lines.extend(f"{o.trec_name:<22}\tall\t{_fmt(printed[o.name])}" for o in outputs if o.name in printed)
        return lines


def judged_documents(batch: TrecBatch) -> TrecBatch:
    """``batch`` with its unjudged documents removed (trec_eval's ``-J``): each row keeps the documents
    with a grade (``target >= 0``) in their order, moved to the front without gaps (form_res_rels.c
    re-ranks the judged documents in their original order); the rest becomes padding.

    Example:
        >>> from torch_rankeval.trec.join import to_tensors
        >>> qrels = Qrels.from_dict({"q1": {"a": 1, "b": -1, "c": 0}})
        >>> batch = judged_documents(to_tensors(qrels, Run.from_dict({"q1": {"a": 3.0, "b": 4.0, "x": 2.0, "c": 1.0}})))
        >>> batch.preds.tolist(), batch.target.tolist(), batch.mask.tolist()
        ([[3.0, 1.0]], [[1, 0]], [[True, True]])
    """
    keep = batch.mask & (batch.target >= 0)
    width = max(int(keep.sum(-1).max()), 1) if keep.numel() else 1
    order = torch.argsort((~keep).to(torch.int8), dim=-1, stable=True)[:, :width]  # judged first, in order
    mask = keep.gather(-1, order)
    return dataclasses.replace(
        batch,
        preds=torch.where(mask, batch.preds.gather(-1, order), 0.0),
        target=torch.where(mask, batch.target.gather(-1, order), -1),
        mask=mask,
    )


#: The measures whose value trec_eval computes as ``num_rel_ret / num_ret`` before anything else
#: (m_iprec_at_recall.c, m_11pt_avg.c): NaN on an empty ranking at a recall level that rounds to 0
#: relevant documents. Only ``-J`` empties a ranking: a query that ``-c`` adds otherwise holds
#: trec_eval's one placeholder document (``bogus_ranking``, trec_eval.c), unjudged, so ``0 / 1``.
_ZERO_BY_ZERO = ("iprec_at_recall", "11pt_avg")


def _no_judged_ranking(
    parsed: list[Measure],
    bucket: dict[str, Tensor],
    ideal_target: Tensor,
    emptied: Tensor,
    relevance_level: int,
    lost: dict[str, int],
) -> dict[str, Tensor]:
    """trec_eval's values on the queries that ``-J`` leaves without documents (``emptied``): interpolated
    precision is ``0 / 0`` (NaN) at a recall level that rounds to 0 relevant documents (the level 0, and
    any level of a query without relevant documents), and so is an ``11pt_avg`` over such a level; the
    other measures score 0 as on any empty ranking. Counts the NaN queries per measure in ``lost``."""
    out = dict(bucket)
    for m in parsed:
        if m.key not in _ZERO_BY_ZERO or m.label not in bucket:
            continue
        levels = (m.param("recall"),) if m.key == "iprec_at_recall" else tuple(m.param("levels"))
        n_relevant = (ideal_target >= (m.param("rel") or relevance_level)).sum(-1)
        zero = (relevant_counts(levels, n_relevant, m.param("rounding") or "lround") == 0).any(-1)
        nan = (zero & emptied).to(bucket[m.label].device)
        if bool(nan.any()):
            out[m.label] = torch.where(nan, torch.nan, bucket[m.label])
            lost[m.label] = lost.get(m.label, 0) + int(nan.sum())
    return out


def _fmt(value: float | str) -> str:
    """A value as trec_eval prints it: ``%6.4f`` (``nan`` padded to 6), counts as integers."""
    return str(value) if isinstance(value, (str, int)) else f"{value:6.4f}"


def trec_measures(measures: Sequence[str | Measure] | str, *, trec_eval_version: str = "10.0") -> list[Measure]:
    """Measure names read as trec_eval reads its ``-m`` options, in the given order: nicknames
    expand to the version's measures, exact duplicates drop, and a trec_eval name given with
    parameters (``relstring.20``, ``P.5,10``) replaces that name's defaults from a nickname or a bare
    name (``-m all_trec -m relstring.20`` prints ``relstring_20`` only, ``-m P -m P.7`` ``P_7`` only).
    Under trec_eval 9.0.8, interpolated precision rounds recall levels as 9.0.8 did. Two different
    measures under one name (``-m iprec_at_recall.0.1 -m iprec_at_recall.0.101``: both print
    ``iprec_at_recall_0.10``) raise a ValueError, as results are keyed by name.

    Example:
        >>> [m.label for m in trec_measures(["official", "P.7"])][-3:]
        ['iprec_at_recall_0.90', 'iprec_at_recall_1.00', 'P_7']
        >>> [m.param("rounding") for m in trec_measures(["11pt_avg"], trec_eval_version="9.0.8")]
        ['v9']
    """
    if trec_eval_version not in TREC_EVAL_VERSIONS:
        raise ValueError(f"trec_eval_version must be one of {list(TREC_EVAL_VERSIONS)}, got {trec_eval_version!r}")
    measures = as_measures(measures, argument="measures")
    if isinstance(measures, str):
        measures = [measures]
    bases = [m.strip().partition(".") for m in measures if isinstance(m, str)]
    with_params = {base for base, dot, _ in bases if dot and base in TREC_BY_NAME}
    out: list[Measure] = []
    for m in measures:
        parsed = [m] if isinstance(m, Measure) else parse_measures([m])
        if isinstance(m, str) and (m.strip() in NICKNAMES or m.strip() in TREC_BY_NAME):
            parsed = [p for p in parsed if getattr(p.trec_spelling(), "name", None) not in with_params]
        if trec_eval_version == "9.0.8" and isinstance(m, str) and m.strip() in NICKNAMES:
            parsed = [p for p in parsed if getattr(p.trec_spelling(), "since", "9.0.8") != "10.0"]
        for p in parsed:
            if (
                trec_eval_version == "9.0.8"
                and p.family.param("rounding") is not None
                and "rounding" not in dict(p.params)
            ):
                p = Measure(p.key, p.cutoff, (*p.params, ("rounding", "v9")), p.label, p.trec_label)
            if not any(p == o and p.label == o.label for o in out):
                out.append(p)
    check_distinct(out)  # two different measures under one name: one result would be lost
    return out


def relstrings(batch: TrecBatch, length: int) -> list[str]:
    """trec_eval's ``relstring``: the grades of each query's first ``length`` retrieved documents
    as text: ``0``-``9``, ``>`` above 9, ``-`` absent from the qrels, ``.`` in the qrels with a
    negative grade (pooled but not judged).

    Example:
        >>> from torch_rankeval.trec.join import to_tensors
        >>> qrels = Qrels.from_dict({"q1": {"a": 1, "b": -1, "c": 12}})
        >>> relstrings(to_tensors(qrels, Run.from_dict({"q1": {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}})), 10)
        ['1.>-']
    """
    target = batch.target[:, :length].cpu().numpy()
    mask = batch.mask[:, :length].cpu().numpy()
    chars = np.where(target > 9, ord(">"), np.where(target >= 0, ord("0") + np.clip(target, 0, 9), ord("<")))
    chars = np.where(target == -1, ord("-"), np.where(target == -2, ord("."), chars))
    return ["".join(map(chr, row[keep])) for row, keep in zip(chars, mask)]


def evaluate(
    qrels: Qrels | PathLike,
    run: Run | PathLike,
    measures: Sequence[str | Measure] | str = "official",
    *,
    relevance_level: int = 1,
    complete: bool = False,
    max_docs: int | None = None,
    trec_eval_version: str = "10.0",
    device: torch.device | str | None = None,
    convention: str | None = None,
    judged_only: bool = False,
) -> Evaluation:
    """Evaluate a run against qrels with trec_eval's semantics (or a peer's: ``convention``).

    Ties are broken by docno descending; negative grades count as unjudged (in the judgment pool,
    for infAP and relstring; documents absent from the qrels are outside it); IDCG and the AP,
    recall and R-precision denominators come from every judged document; queries only in the run
    are ignored; ``complete=True`` (``-c``) scores the qrels' queries missing from the run as 0;
    ``relevance_level`` (``-l``) is the minimum grade of a relevant document for binary measures;
    ``max_docs`` (``-M``) keeps each query's first ``max_docs`` ranked documents; ``judged_only``
    (``-J``) then removes the unjudged ones (absent from the qrels or with a negative grade) and
    ranks the rest without gaps. Everything is computed in float64.

    Intent-aware measures (``alpha_nDCG@20``, ``ERR_IA@20``, ``P_IA@10``, ...) read TREC diversity
    qrels (``topic subtopic docno judgment``): a path is then read as such, or pass a
    :class:`~torch_rankeval.trec.diversity.SubtopicQrels`; ad-hoc measures asked for with them see a
    document's largest subtopic judgment (relevant to any subtopic). See
    :mod:`torch_rankeval.trec.diversity`.

    Args:
        qrels: a :class:`Qrels` or a path.
        run: a :class:`Run` or a path.
        measures: names (trec_eval or ir_measures spelling, or nicknames such as ``"official"``)
            or parsed measures.
        relevance_level: trec_eval's ``-l``.
        complete: trec_eval's ``-c``. ``num_rel``'s summary is then trec_eval's: not the sum of the
            per-query values but the number of judgments graded above 0 in the qrels, whatever
            ``relevance_level`` (m_num_rel.c).
        max_docs: trec_eval's ``-M`` (``None``: every document).
        trec_eval_version: ``"10.0"`` (default) or ``"9.0.8"`` (pytrec_eval's): 9.0.8 rounds
            recall levels to documents as ``level * R + 0.9`` truncated (``iprec_at_recall``,
            ``11pt_avg``), has no ``rbp``, ``rbp_resid``, ``unj`` in its nicknames and does not
            evaluate the queries that ``-c`` adds (no per-query lines; 0 in the means, also where
            ``judged_only`` makes 10.0's ``0 / 0``).
        device: where to compute (``"cuda"`` for the GPU); results come back on the CPU.
        convention: ``None`` or ``"trec_eval"`` (trec_eval's numbers), ``"ranx"`` (``ranx.evaluate``'s:
            its order of tied scores, its ``bpref`` and ``hits@k``, every query of the qrels) or
            ``"ir_measures"`` (``ir_measures.calc_aggregate``'s: the order of tied scores of the provider
            each measure goes to, every query of the qrels, 0 where the run has none, trec_eval
            9.0.8 as pytrec_eval); see :mod:`torch_rankeval.trec.peers` for the rules.
        judged_only: trec_eval's ``-J`` (pytrec_eval's ``judged_docs_only_flag``): every measure on
            each query's judged documents only, the unjudged ones removed from the ranking after
            ``max_docs``; a query left without documents scores as one that retrieves nothing
            (``num_ret`` 0; interpolated precision is trec_eval's ``0 / 0`` there: NaN, with a
            warning). The judgments themselves (``num_rel``, IDCG) do not change. ir_measures'
            spelling, ``P(judged_only=True)@5``, asks it of one measure.

    Example:
        >>> qrels = Qrels.from_dict({"q1": {"d1": 1, "d2": 2}, "q2": {"d9": 1}})
        >>> run = Run.from_dict({"q1": {"d1": 0.2, "d2": 0.1}}, tag="demo")
        >>> evaluate(qrels, run, ["num_q", "P.2", "recip_rank"]).summary
        {'num_q': 1, 'P_2': 1.0, 'recip_rank': 1.0}
        >>> evaluate(qrels, run, ["num_q", "P.2", "recip_rank"], complete=True).summary
        {'num_q': 2, 'P_2': 0.5, 'recip_rank': 0.5}
        >>> evaluate(qrels, run, ["P@2", "P(rel=2)@2"], relevance_level=2).summary
        {'P@2': 0.5, 'P(rel=2)@2': 0.5}
        >>> r = evaluate(qrels, run, ["num_rel"], complete=True, relevance_level=2)   # trec_eval -c -l2
        >>> r.per_query["num_rel"].tolist(), r.summary                                 # the grades above 0
        ([1.0, 0.0], {'num_rel': 3})
        >>> evaluate(qrels, run, ["num_ret", "P.2"], max_docs=1).summary
        {'num_ret': 1, 'P_2': 0.5}

    Judged documents only (``-J``): the unjudged ``d0`` no longer takes rank 1:

        >>> run = Run.from_dict({"q1": {"d0": 0.3, "d1": 0.2, "d2": 0.1}})
        >>> evaluate(qrels, run, ["num_ret", "P.1", "recip_rank"]).summary
        {'num_ret': 3, 'P_1': 0.0, 'recip_rank': 0.5}
        >>> evaluate(qrels, run, ["num_ret", "P.1", "recip_rank"], judged_only=True).summary
        {'num_ret': 2, 'P_1': 1.0, 'recip_rank': 1.0}

    Peers' numbers: ranx and ir_measures order tied scores otherwise than trec_eval (docno descending):

        >>> qrels = Qrels.from_dict({"q1": {"d1": 1, "d2": 0}, "q2": {"d8": 1, "d9": 0}})
        >>> tied = Run.from_dict({"q1": {"d2": 0.5, "d1": 0.5}, "q2": {"d8": 0.3, "d9": 0.3}})
        >>> evaluate(qrels, tied, ["P@1", "RR@1"]).summary                              # d2 first, d9 first
        {'P@1': 0.0, 'RR@1': 0.0}
        >>> evaluate(qrels, tied, ["RR@1"], convention="ir_measures").summary           # d1 first, d8 first
        {'RR@1': 1.0}
        >>> evaluate(qrels, tied, ["precision@1", "hits@2"], convention="ranx").summary # the run's order
        {'precision@1': 0.5, 'hits@2': 1.0}
    """
    settings = dict(  # evaluate's keyword arguments, as the preset and diversity routes pass them on
        relevance_level=relevance_level,
        complete=complete,
        max_docs=max_docs,
        trec_eval_version=trec_eval_version,
        device=device,
        judged_only=judged_only,
    )
    if not isinstance(judged_only, bool):
        raise TypeError(f"judged_only must be a bool (trec_eval's -J), got {judged_only!r}")
    names = as_measures(measures, argument="measures")
    names = [names] if isinstance(names, str) else names
    if any(isinstance(m, str) and _without_judged_only(m) for m in names):
        return _evaluate_judged_only_spelled(qrels, run, names, convention, settings)
    if convention is not None and convention != "trec_eval":
        return _evaluate_preset(qrels, run, measures, convention, settings)
    _check_settings(settings)
    parsed = trec_measures(measures, trec_eval_version=trec_eval_version)
    if isinstance(qrels, SubtopicQrels) or any(m.family.subtopics for m in parsed):
        return _evaluate_diversity(qrels, run, parsed, settings)
    return _evaluate_adhoc(qrels, run, parsed, settings)


def _check_settings(settings: dict[str, Any]) -> None:
    """:func:`evaluate`'s checks of its ``relevance_level`` and ``max_docs``."""
    relevance_level, max_docs = settings["relevance_level"], settings["max_docs"]
    if (
        isinstance(relevance_level, bool)
        or not isinstance(relevance_level, (int, np.integer))
        or not 1 <= relevance_level <= 2**63 - 1
    ):
        raise ValueError(
            "relevance_level must be an int from 1 to 2**63 - 1 (the minimum relevant grade; grades are 64-bit "
            f"integers), got {relevance_level!r}"
        )
    if max_docs is not None and (
        isinstance(max_docs, bool) or not isinstance(max_docs, (int, np.integer)) or max_docs < 1
    ):
        raise ValueError(
            f"max_docs must be None or an int >= 1 (documents kept per query, trec_eval -M), got {max_docs!r}"
        )


def _evaluate_adhoc(
    qrels: object,
    run: object,
    parsed: list[Measure],
    settings: dict[str, Any],
    *,
    skip_empty: bool = False,
    peer: bool = False,
) -> Evaluation:
    """:func:`evaluate` of parsed ad-hoc measures (``settings``: its keyword arguments, checked);
    ``skip_empty``: a query a measure flags empty gets NaN, and the mean leaves it out (a peer that
    reports no value there: ir_measures' ``Accuracy``); ``peer``: for a preset (``convention=``), whose
    summaries do not follow trec_eval's ``-c`` rule for ``num_rel`` (:func:`_complete_num_rel`)."""
    max_docs, device, relevance_level = settings["max_docs"], settings["device"], settings["relevance_level"]
    judged_only = settings.get("judged_only", False)
    qrels = as_qrels(qrels, argument="qrels")
    run = as_run(run, argument="run")
    lengths = {m.label: int(m.param("length")) for m in parsed if m.family.aggregate == "text"}
    # Queries are evaluated in length buckets (memory follows the data, not the longest query)
    # and their values put back in trec_eval's query order.
    joined = to_batches(qrels, run, complete=settings["complete"])
    n = len(joined.qids)
    values: dict[str, Tensor] = {}
    text: dict[str, list[str]] = {name: [""] * n for name in lengths}
    lost: dict[str, int] = {}  # judged_only: queries whose value is trec_eval's 0 / 0, per measure
    for batch in joined:
        rows = batch.rows
        if max_docs is not None and batch.preds.shape[-1] > max_docs:
            keep = slice(0, int(max_docs))
            batch = dataclasses.replace(
                batch, preds=batch.preds[:, keep], target=batch.target[:, keep], mask=batch.mask[:, keep]
            )
        emptied = None
        if judged_only:
            batch = judged_documents(batch)
            emptied = ~batch.mask.any(-1)  # every document unjudged (or none: -c)
            if settings["trec_eval_version"] == "9.0.8":
                # 9.0.8 does not evaluate the queries -c adds (they count 0 in its sums): no 0 / 0 there
                emptied &= batch.retrieved
        for name, length in lengths.items():
            for i, line in zip(rows.tolist(), relstrings(batch, length)):
                text[name][i] = line
        if device is not None:
            batch = batch.to(device)
        bucket = compute(
            parsed,
            batch.preds,
            batch.target,
            mask=batch.mask,
            ideal_target=batch.ideal_target,
            convention=_SKIP_EMPTY if skip_empty else "trec_eval",
            relevance_level=relevance_level,
            validate_args=False,
        )
        if emptied is not None and bool(emptied.any()):
            bucket = _no_judged_ranking(parsed, bucket, batch.ideal_target.cpu(), emptied, relevance_level, lost)
        for name, v in bucket.items():
            v = v.cpu()
            if len(rows) == n:  # one bucket: every query, in order
                values[name] = v
            else:
                values.setdefault(name, v.new_zeros(n))[rows] = v
    for name, count in lost.items():
        warnings.warn(
            f"{name}: {count} queries have no judged retrieved document under judged_only (trec_eval -J); trec_eval "
            "and pytrec_eval divide 0 retrieved documents by 0 there, so these values (and the mean) are NaN",
            RuntimeWarning,
            stacklevel=2,
        )
    outputs, texts, per_query, summary, info = [], [], {}, {}, {}
    for m in parsed:
        out = Output(m, 0, m.label, m.trec_label)
        if m.family.aggregate == "text":
            texts.append(out)
            continue
        outputs.append(out)
        if m.family.aggregate == "info":
            info[m.label] = run.tag
            continue
        v = values[m.label]
        summary[m.label] = summarize(m, v)
        if m.key == "num_rel" and settings["complete"] and not peer:
            summary[m.label] = _complete_num_rel(qrels)
        if m.per_query:
            per_query[m.label] = v
    return Evaluation(
        run.path or run.tag,  # one name per run everywhere: its file, or its tag in memory
        run.tag,
        joined.qids,
        outputs,
        per_query,
        summary,
        joined.retrieved,
        texts,
        text,
        settings["trec_eval_version"],
        info,
    )


def _complete_num_rel(qrels: Qrels) -> int:
    """trec_eval's summary of ``num_rel`` under ``-c`` (m_num_rel.c, ``te_calc_avg_num_rel``, 9.0.8 and 10.0):
    not the sum of the per-query values but a count made again from the qrels, of every judgment graded
    above 0 in every query of the qrels, whatever ``-l`` (or ``rel=``), ``-M`` and ``-J``. Without ``-c``,
    and on each query, ``num_rel`` counts the grades of at least the relevance level.

    Example:
        >>> _complete_num_rel(Qrels.from_dict({"q1": {"d1": 1, "d2": 2, "d3": 0}, "q2": {"d4": 3, "d5": -1}}))
        3
    """
    return int((qrels.relevance > 0).sum())


def _evaluate_diversity(
    qrels: object, run: Run | PathLike, parsed: list[Measure], settings: dict[str, Any]
) -> Evaluation:
    """:func:`evaluate` (``settings``: its keyword arguments) on diversity qrels: the intent-aware measures on
    every judgment (:func:`~torch_rankeval.trec.diversity.intent_aware_values`), the others on the ad-hoc view."""
    if not isinstance(qrels, SubtopicQrels):
        if isinstance(qrels, Qrels) or not isinstance(qrels, (str, os.PathLike)):
            raise TypeError(
                "intent-aware measures need diversity qrels (topic subtopic docno judgment): pass their path or a "
                f"torch_rankeval.trec.diversity.SubtopicQrels, got {type(qrels).__name__}"
            )
        qrels = read_subtopic_qrels(qrels)
    run = as_run(run, argument="run")
    aware = [m for m in parsed if m.family.subtopics]
    rest = [m for m in parsed if not m.family.subtopics]
    if settings["judged_only"] and aware:
        raise ValueError(
            "judged_only (trec_eval's -J) applies to ad-hoc measures; evaluate intent-aware measures without it "
            "(ndeval has no judged-only mode)"
        )
    if settings["relevance_level"] != 1 and aware:
        raise ValueError(
            "relevance_level applies to ad-hoc measures; ndeval's subtopic judgments are binary (> 0 is relevant)"
        )
    adhoc = evaluate(qrels.adhoc(), run, rest, **settings) if rest else None
    qids, per_query_ia, summary_ia = intent_aware_values(
        aware, qrels, run, complete=settings["complete"], max_docs=settings["max_docs"], device=settings["device"]
    )
    if adhoc is not None and adhoc.qids != qids:  # pragma: no cover - both join the same query sets
        raise AssertionError("the ad-hoc and intent-aware evaluations disagree on the queries")
    outputs, per_query, summary, info = [], {}, {}, {}
    for m in parsed:
        if m.family.subtopics:
            outputs.append(Output(m, 0, m.label, m.trec_label))
            per_query[m.label] = per_query_ia[m.label]
            summary[m.label] = summary_ia[m.label]
        elif adhoc is not None:
            outputs.extend(o for o in adhoc.outputs if o.name == m.label)
            for mine, theirs in ((per_query, adhoc.per_query), (summary, adhoc.summary), (info, adhoc.info)):
                if m.label in theirs:
                    mine[m.label] = theirs[m.label]
    retrieved = torch.tensor([q in set(run.qids) for q in qids], dtype=torch.bool)
    return Evaluation(
        run.path or run.tag,  # one name per run everywhere: its file, or its tag in memory
        run.tag,
        qids,
        outputs,
        per_query,
        summary,
        retrieved,
        adhoc.texts if adhoc is not None else [],
        adhoc.text if adhoc is not None else {},
        settings["trec_eval_version"],
        info,
    )


#: trec_eval's conventions with the queries a measure flags empty left out (NaN per query).
_SKIP_EMPTY = resolve_convention("trec_eval", empty_target_action="skip")
_HITS = re.compile(r"^hits(?:@([0-9]+))?$", re.IGNORECASE)
_RANX_LEVEL = re.compile(r"^(.+)-l([0-9]+)$")  # ranx's relevance level: 'precision@5-l2'


def preset_measures(
    measures: Sequence[str | Measure] | str, convention: str | None, *, trec_eval_version: str = "10.0"
) -> list[Measure]:
    """Measure names read as :func:`evaluate` reads them under ``convention``: as :func:`trec_measures`
    does, and under ``"ranx"`` ranx's ``hits@k`` (the relevant documents in the top k, averaged over
    queries: ``P@k`` times ``k``) and ``hits`` (``num_rel_ret``, averaged), which are no measures of ours,
    and ranx's relevance level suffix (``precision@5-l2``: ``P(rel=2)@5``).

    Example:
        >>> [(m.key, m.cutoff, m.label) for m in preset_measures(["hits@5", "mrr"], "ranx")]
        [('precision', 5, 'hits@5'), ('mrr', None, 'mrr')]
        >>> [(m.key, m.params, m.label) for m in preset_measures(["mrr-l2"], "ranx")]
        [('mrr', (('rel', 2),), 'mrr-l2')]
    """
    return _preset_measures(measures, convention or "trec_eval", trec_eval_version)[0]


def _preset_measures(
    measures: Sequence[str | Measure] | str, convention: str, version: str
) -> tuple[list[Measure], dict[str, str]]:
    """:func:`preset_measures`, and ``{label: rule}`` for ranx's hits (``"times_k"``: ``P@k`` times ``k``,
    ``"mean"``: ``num_rel_ret`` averaged); a measure from :func:`preset_measures` keeps its rule."""
    names = as_measures(measures, argument="measures")
    names = [names] if isinstance(names, str) else names
    post: dict[str, str] = {}
    given: list[str | Measure] = []
    for m in names:
        label = m.strip() if isinstance(m, str) else m.label
        level = _RANX_LEVEL.match(label) if convention == "ranx" else None
        base, rel = (level[1], f"(rel={int(level[2])})") if level else (label, "")
        hits = _HITS.match(base) if convention == "ranx" else None
        if hits is not None:
            post[label] = "times_k" if hits[1] is not None else "mean"
            spelled = f"P{rel}@{int(hits[1])}" if hits[1] is not None else f"num_rel_ret{rel}"
        elif level is not None:  # ranx's '-l2': the relevance level, our 'rel' parameter
            name, at, cutoff = base.partition("@")
            spelled = f"{'r_precision' if name.lower() == 'r-precision' else name}{rel}{at}{cutoff}"
        else:
            given.append(m)
            continue
        given.append(m if isinstance(m, Measure) else parse_measures([spelled])[0].with_label(label, label))
    return trec_measures(given, trec_eval_version=version), post


def _evaluate_preset(
    qrels: object, run: object, measures: Sequence[str | Measure] | str, convention: str, settings: dict[str, Any]
) -> Evaluation:
    """:func:`evaluate` under a peer's preset (:data:`~torch_rankeval.trec.peers.TREC_PRESETS`): each group of
    measures that share an order of tied scores evaluated on the run ranked in that order, then the peer's rules."""
    if convention not in TREC_PRESETS:
        raise ValueError(
            f"convention={convention!r} is not a preset of trec.evaluate: use None or 'trec_eval' (trec_eval's "
            f"numbers), 'ranx' or 'ir_measures'"
        )
    preset = TREC_PRESETS[convention]
    settings = dict(settings, trec_eval_version=preset.trec_eval_version or settings["trec_eval_version"])
    parsed, post = _preset_measures(measures, convention, settings["trec_eval_version"])
    if isinstance(qrels, SubtopicQrels) or any(m.family.subtopics for m in parsed):
        raise ValueError(f"convention={convention!r} covers ad-hoc measures; evaluate intent-aware measures without it")
    for m in parsed:
        reason = preset.refused.get(m.key) or preset.refused.get(m.key + "".join(f"({k}={v})" for k, v in m.params))
        if reason:
            raise ValueError(
                f"{m.label!r} under convention={convention!r}: {reason}, which this preset does not reproduce; "
                "evaluate it without convention= (trec_eval's conventions) or with the peer itself"
            )
    # a sorted ranx Run is in ranx's order already (ranx.evaluate does not sort it again)
    ranked = any(c.__module__.split(".")[0] == "ranx" for c in type(run).__mro__) and getattr(run, "sorted", True)
    if preset.empty_scored:
        qrels, run = _maybe_empty(qrels, "qrels"), _maybe_empty(run, "run")
        if not len(qrels) or not set(run.qids) & set(qrels.qids):
            # ir_measures' accuracy provider alone reports no value for an unanswered query (NaN)
            skipped = all(preset.rule(m.key, m.cutoff)[1] == "skip_empty" for m in parsed)
            return _unanswered(parsed, qrels, run, settings["trec_eval_version"], skipped=skipped)
    qrels, run = as_qrels(qrels, argument="qrels"), as_run(run, argument="run")
    if preset.negative_judged:
        qrels = judged_negative(qrels)
    settings = dict(settings, complete=settings["complete"] or preset.complete)
    rules = {m.label: preset.rule(m.key, m.cutoff) for m in parsed}
    parsed = [_as_computed_by(m, rules[m.label][1], convention) for m in parsed]
    if not all(rule == "skip_empty" for _, rule in rules.values()):
        # ir_measures leaves a query out only when one provider computes every measure of the call; with
        # another provider's measures its FallbackEvaluator gives each query of the qrels 0 where it has none
        rules = {label: (order, None if rule == "skip_empty" else rule) for label, (order, rule) in rules.items()}
    groups: dict[tuple[str, bool], list[Measure]] = {}
    for m in parsed:
        order, rule = rules[m.label]
        groups.setdefault((order, rule == "skip_empty"), []).append(m)
    _check_settings(settings)
    results = {
        (order, skip): _evaluate_adhoc(
            qrels,
            run if order == "trec_eval" else ranked_run(run, order, ranked=ranked),
            ms,
            settings,
            skip_empty=skip,
            peer=True,
        )
        for (order, skip), ms in groups.items()
    }
    first = next(iter(results.values()))
    outputs, texts, per_query, summary, info, text = [], [], {}, {}, {}, {}
    for m in parsed:
        order, rule = rules[m.label]
        r = results[order, rule == "skip_empty"]
        outputs.extend(o for o in r.outputs if o.name == m.label)
        texts.extend(o for o in r.texts if o.name == m.label)
        for mine, theirs in ((per_query, r.per_query), (summary, r.summary), (info, r.info), (text, r.text)):
            if m.label in theirs:
                mine[m.label] = theirs[m.label]
        if preset.unanswered_zero and m.key == "num_q":
            summary[m.label] = int(first.retrieved.sum())
        if preset.num_q_per_query and m.key == "num_q":  # 1 for each query the run answers
            per_query[m.label] = first.retrieved.to(torch.float64)
        rule = post.get(m.label) or rules[m.label][1]
        if m.label in per_query and (rule is not None or preset.unanswered_zero):
            v = per_query[m.label]
            if preset.unanswered_zero and rule != "skip_empty":
                v = torch.where(first.retrieved, v, torch.zeros_like(v))
            level = m.param("rel") or settings["relevance_level"]
            per_query[m.label], summary[m.label] = _apply_rule(rule, m, v, qrels, first.qids, level)
    return dataclasses.replace(
        first, outputs=outputs, texts=texts, per_query=per_query, summary=summary, info=info, text=text
    )


def _as_computed_by(m: Measure, rule: str | None, convention: str) -> Measure:
    """The measure a peer computes for ``m`` under ``rule`` (see :class:`~torch_rankeval.trec.peers.TrecPreset`):
    ``"cwl_eval"``: RBP over cwl_eval's depth, refused without ``rel=`` or with a cutoff; else ``m``."""
    if rule != "cwl_eval":
        return m
    if m.param("rel") is None or m.cutoff is not None:
        raise ValueError(
            f"{m.label!r} under convention={convention!r}: ir_measures computes RBP with cwl_eval, on binary "
            "relevance and without a cutoff only: write RBP(rel=1) (any p and rel), or evaluate it without "
            "convention= (trec_eval's graded RBP)"
        )
    if m.param("depth") is not None:
        return m
    return Measure(m.key, m.cutoff, (*m.params, ("depth", CWL_EVAL_DEPTH)), m.label, m.trec_label)


_JUDGED_ONLY = re.compile(r"judged_only\s*=\s*True\b")


def _without_judged_only(name: str) -> str | None:
    """``name`` without ir_measures' ``judged_only=True`` parameter (``P(rel=2,judged_only=True)@5``:
    ``P(rel=2)@5``), or None when it has none.

    Example:
        >>> _without_judged_only("P(judged_only=True)@4"), _without_judged_only("AP(rel=2, judged_only=True)")
        ('P@4', 'AP(rel=2)')
        >>> _without_judged_only("P@4") is None
        True
    """
    if not _JUDGED_ONLY.search(name):
        return None
    out = re.sub(r"\s*,\s*" + _JUDGED_ONLY.pattern, "", name, count=1)
    if out == name:
        out = re.sub(_JUDGED_ONLY.pattern + r"\s*,?\s*", "", name, count=1)
    return re.sub(r"\(\s*\)", "", out)


def _evaluate_judged_only_spelled(
    qrels: object, run: object, names: list[str | Measure], convention: str | None, settings: dict[str, Any]
) -> Evaluation:
    """:func:`evaluate` of measures some of which carry ir_measures' ``judged_only=True``: those on the judged
    documents only (``judged_only=True``), under their names as written, the others as asked; one evaluation."""
    qrels = list(qrels) if isinstance(qrels, Iterator) else qrels  # read twice below
    run = list(run) if isinstance(run, Iterator) else run
    plain: list[str | Measure] = []
    judged: list[Measure] = []
    for m in names:
        stripped = _without_judged_only(m) if isinstance(m, str) else None
        if stripped is None:
            plain.append(m)
        else:
            label = m.strip()  # type: ignore[union-attr]
            judged.append(parse_measures([stripped])[0].with_label(label, label))
    results = [evaluate(qrels, run, judged, convention=convention, **dict(settings, judged_only=True))]
    if plain:
        results.insert(0, evaluate(qrels, run, plain, convention=convention, **settings))
    first = results[0]
    texts, per_query, summary, info, text = [], {}, {}, {}, {}
    for r in results:
        texts.extend(r.texts)
        for mine, theirs in ((per_query, r.per_query), (summary, r.summary), (info, r.info), (text, r.text)):
            mine.update(theirs)
    # outputs in the order of the call: each judged-only measure after the outputs of the names before it
    plain_outputs = results[0].outputs if plain else []
    judged_outputs = {o.name: o for o in results[-1].outputs}
    outputs, taken, before = [], 0, []
    version = first.version
    for m in names:
        if not (isinstance(m, str) and _without_judged_only(m)):
            before.append(m)
            continue
        labels = {x.label for x in _preset_measures(before, convention or "trec_eval", version)[0]} if before else set()
        while taken < len(plain_outputs) and plain_outputs[taken].name in labels:
            outputs.append(plain_outputs[taken])
            taken += 1
        if m.strip() in judged_outputs:
            outputs.append(judged_outputs.pop(m.strip()))
    outputs.extend(plain_outputs[taken:])
    summary = {o.name: summary[o.name] for o in outputs if o.name in summary}
    per_query = {o.name: per_query[o.name] for o in outputs if o.name in per_query}
    return dataclasses.replace(
        first, outputs=outputs, texts=texts, per_query=per_query, summary=summary, info=info, text=text
    )


def _maybe_empty(obj: object, kind: str) -> Qrels | Run:
    """``obj`` as :func:`~torch_rankeval.trec.convert.as_qrels` or ``as_run`` reads it, or an empty
    :class:`Qrels` / :class:`Run` for an input without a row (an empty file, dict, list or DataFrame), which
    they refuse. An iterator of rows is read once, here."""
    if isinstance(obj, (Qrels, Run)):
        return obj
    path = str(obj) if isinstance(obj, (str, os.PathLike)) else None
    if path is not None:
        try:
            return read_qrels(path) if kind == "qrels" else read_run(path)
        except EmptyTrecFile:
            rows = None
    else:
        if isinstance(obj, Iterator):
            obj = list(obj)
        data = _dict_of_dicts(obj)
        if data is not None:
            rows = sum(len(docs) if isinstance(docs, Mapping) else 1 for docs in data.values())
        elif _is_dataframe(obj) or isinstance(obj, Sized):
            rows = len(obj)  # type: ignore[arg-type]
        else:
            rows = 1  # not a form of qrels or run: as_qrels / as_run say so
        if rows:
            return as_qrels(obj, argument=kind) if kind == "qrels" else as_run(obj, argument=kind)
    if kind == "qrels":
        return Qrels(table_from_rows([], [], np.zeros(0, dtype=np.int64)), path)
    name = getattr(obj, "name", None)
    tag = name if isinstance(name, str) and name and path is None and not _is_dataframe(obj) else "run"
    return Run(table_from_rows([], [], np.zeros(0, dtype=np.float64), tag), path)


def _unanswered(parsed: list[Measure], qrels: Qrels, run: Run, version: str, *, skipped: bool = False) -> Evaluation:
    """ir_measures' evaluation of a run that answers no query of the qrels (an empty run, or empty
    qrels): every query of the qrels scores 0 (none answered, so ``num_q`` is 0); without queries, a
    mean is NaN and a count 0. ``skipped``: every measure leaves an unanswered query out (ir_measures'
    ``Accuracy`` asked for alone), so each query has no value (NaN) and each mean is NaN."""
    n = len(qrels.qids)
    outputs, texts, per_query, summary, info, text = [], [], {}, {}, {}, {}
    for m in parsed:
        out = Output(m, 0, m.label, m.trec_label)
        if m.family.aggregate == "text":
            texts.append(out)
            text[m.label] = [""] * n
            continue
        outputs.append(out)
        if m.family.aggregate == "info":
            info[m.label] = run.tag
            continue
        v = torch.full((n,), math.nan if skipped else 0.0, dtype=torch.float64)
        summary[m.label] = 0 if m.key == "num_q" else math.nan if skipped else summarize(m, v)
        if m.per_query:
            per_query[m.label] = v
    retrieved = torch.zeros(n, dtype=torch.bool)
    return Evaluation(
        run.path or run.tag,
        run.tag,
        list(qrels.qids),
        outputs,
        per_query,
        summary,
        retrieved,
        texts,
        text,
        version,
        info,
    )


def _apply_rule(
    rule: str | None, m: Measure, v: Tensor, qrels: Qrels, qids: list[str], level: int
) -> tuple[Tensor, float]:
    """A peer's per-query values and mean of measure ``m`` from trec_eval's values ``v`` (see
    :class:`~torch_rankeval.trec.peers.TrecPreset`)."""
    if rule == "times_k":  # ranx's hits@k: relevant documents in the top k
        v = torch.round(v * m.cutoff)
    elif rule == "skip_empty":  # NaN where the measure has no value: the mean of the others (NaN without any)
        values = v[~torch.isnan(v)].tolist()
        return v, sum(values) / len(values) if values else float("nan")
    elif rule == "nan_no_nonrelevant":  # ranx's bpref: 0 / min(R, N) with N = 0
        index = {q: i for i, q in enumerate(qrels.qids)}
        rows = np.array([index[q] for q in qids], dtype=np.int64)
        nonrelevant, relevant = (
            np.bincount(qrels.qid[keep], minlength=len(qrels.qids))[rows]
            for keep in (qrels.relevance < level, qrels.relevance >= level)
        )
        drop = torch.from_numpy(nonrelevant == 0) & (v > 0)
        v = torch.where(drop, torch.nan, v)
        if bool(drop.any()):
            warnings.warn(
                f"{m.label}: {int(drop.sum())} queries retrieve a relevant document but have no judged non-relevant "
                "one; ranx's bpref divides 0 by 0 there (NaN, so the mean is NaN), trec_eval scores them 1",
                RuntimeWarning,
                stacklevel=4,
            )
        if (relevant == 0).any():
            warnings.warn(
                f"{m.label}: {int((relevant == 0).sum())} queries have no relevant document; ranx's bpref raises "
                "ZeroDivisionError on them inside its parallel loop, which leaves other queries' values 0 "
                "(which ones depends on the number of threads): not reproduced, these queries score 0",
                RuntimeWarning,
                stacklevel=4,
            )
    if rule == "mean" or rule is not None and m.family.aggregate == "mean":
        values = v.tolist()
        return v, sum(values) / len(values) if values else float("nan")
    return v, summarize(m, v)
