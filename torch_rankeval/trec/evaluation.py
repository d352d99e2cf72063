"""trec_eval's evaluation of a run against its qrels: per-query values and the summary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from torch_rankeval.measures import Measure, compute, parse_measures, summarize
from torch_rankeval.trec.io import PathLike, Qrels, Run, read_qrels, read_run
from torch_rankeval.trec.join import to_tensors

__all__ = ["Output", "Evaluation", "evaluate"]


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
        run: the run's file (or ``"run"``).
        runid: the run's tag.
        qids: the evaluated queries, sorted.
        outputs: the :class:`Output` columns, in the order the measures were given.
        per_query: ``{name: (N,) float64 tensor}`` for every measure with per-query values.
        summary: ``{name: value}``: the mean over queries (``num_*``: the sum, ``num_q``: the
            number of queries, ``runid``: the tag, ``gm_map``: the geometric mean).
        retrieved: ``(N,)`` bool, False for queries the run does not answer (``complete=True``).
    """

    run: str
    runid: str
    qids: list[str]
    outputs: list[Output]
    per_query: dict[str, Tensor]
    summary: dict[str, float | int | str]
    retrieved: Tensor


def _as_measures(measures: Sequence[str | Measure] | str) -> list[Measure]:
    """Names and parsed measures, in the given order (nicknames expand; exact duplicates drop)."""
    if isinstance(measures, str):
        measures = [measures]
    out: list[Measure] = []
    for m in measures:
        for parsed in [m] if isinstance(m, Measure) else parse_measures([m]):
            if not any(parsed == o and parsed.label == o.label for o in out):
                out.append(parsed)
    return out


def evaluate(
    qrels: Qrels | PathLike,
    run: Run | PathLike,
    measures: Sequence[str | Measure] | str = "official",
    *,
    relevance_level: int = 1,
    complete: bool = False,
    device: torch.device | str | None = None,
) -> Evaluation:
    """Evaluate a run against qrels with trec_eval's semantics.

    Ties are broken by docno descending; negative grades count as unjudged; IDCG and the AP,
    recall and R-precision denominators come from every judged document; queries only in the run
    are ignored; ``complete=True`` (``-c``) scores the qrels' queries missing from the run as 0;
    ``relevance_level`` (``-l``) is the minimum grade of a relevant document for binary measures.
    Everything is computed in float64.

    Args:
        qrels: a :class:`Qrels` or a path.
        run: a :class:`Run` or a path.
        measures: names (trec_eval or ir_measures spelling, or nicknames such as ``"official"``)
            or parsed measures.
        relevance_level: trec_eval's ``-l``.
        complete: trec_eval's ``-c``.
        device: where to compute (``"cuda"`` for the GPU); results come back on the CPU.

    Example:
        >>> qrels = Qrels.from_dict({"q1": {"d1": 1, "d2": 2}, "q2": {"d9": 1}})
        >>> run = Run.from_dict({"q1": {"d1": 0.2, "d2": 0.1}}, tag="demo")
        >>> evaluate(qrels, run, ["num_q", "P.2", "recip_rank"]).summary
        {'num_q': 1, 'P_2': 1.0, 'recip_rank': 1.0}
        >>> evaluate(qrels, run, ["num_q", "P.2", "recip_rank"], complete=True).summary
        {'num_q': 2, 'P_2': 0.5, 'recip_rank': 0.5}
        >>> evaluate(qrels, run, ["P@2", "P(rel=2)@2"], relevance_level=2).summary
        {'P@2': 0.5, 'P(rel=2)@2': 0.5}
    """
    if isinstance(relevance_level, bool) or not isinstance(relevance_level, (int, np.integer)) or relevance_level < 1:
        raise ValueError(f"relevance_level must be an int >= 1 (the minimum relevant grade), got {relevance_level!r}")
    qrels = qrels if isinstance(qrels, Qrels) else read_qrels(qrels)
    run = run if isinstance(run, Run) else read_run(run)
    parsed = _as_measures(measures)
    batch = to_tensors(qrels, run, complete=complete)
    if device is not None:
        batch = batch.to(device)
    values = compute(
        parsed,
        batch.preds,
        batch.target,
        mask=batch.mask,
        ideal_target=batch.ideal_target,
        relevance_level=relevance_level,
        validate_args=False,
    )
    outputs: list[Output] = []
    per_query: dict[str, Tensor] = {}
    summary: dict[str, float | int | str] = {}
    for m in parsed:
        outputs.append(Output(m, 0, m.label, m.trec_label))
        if m.family.aggregate == "info":
            summary[m.label] = run.tag
            continue
        v = values[m.label].cpu()
        summary[m.label] = summarize(m, v)
        if m.per_query:
            per_query[m.label] = v
    return Evaluation(run.path or "run", run.tag, batch.qids, outputs, per_query, summary, batch.retrieved.cpu())
