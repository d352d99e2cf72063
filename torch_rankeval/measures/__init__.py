"""Measures by name: one registry and one grammar for every API.

The registry (:mod:`.registry`) lists every measure once: its kernel, its typed parameters, its
names. The grammar (:mod:`.grammar`) reads every spelling — trec_eval's (``ndcg_cut.10``,
``P.5,10``, ``P_5``), ir_measures' (``nDCG@10``, ``P(rel=2)@5``, ``RR@10``) and the library's
(``ndcg@10``, ``mrr@10``, ``map``) — into :class:`Measure` objects that compare by value. The plan
(:mod:`.plan`) is the one evaluation loop that the functional API, the Metric classes
(``RankingMetrics(metrics=...)``), the Lightning callback and the command line all use.

    >>> from torch_rankeval.measures import parse_measure, parse_measures
    >>> m = parse_measure("ndcg_cut.10")
    >>> m.key, m.cutoff, m.label, m.ir_name()
    ('ndcg', 10, 'ndcg_cut_10', 'nDCG@10')
    >>> parse_measure("nDCG@10") == m, parse_measure("nDCG@10").trec_label
    (True, 'ndcg_cut_10')
    >>> [x.label for x in parse_measures(["mrr@10", "RR@10", "P(rel=2)@5"])]
    ['mrr@10', 'RR@10', 'P(rel=2)@5']
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention, resolve_convention
from torch_rankeval.measures.grammar import NICKNAMES, check_distinct, known_names, parse_measure, parse_measures
from torch_rankeval.measures.params import Param
from torch_rankeval.measures.plan import MeasurePlan
from torch_rankeval.measures.registry import (
    FAMILIES,
    MIN_GEO_MEAN,
    OPTIONS,
    TREC_CUTOFFS,
    TREC_NAMES,
    TREC_SYNTAXES,
    Family,
    Measure,
    TrecName,
)

__all__ = [
    "Family",
    "Param",
    "TrecName",
    "Measure",
    "MeasurePlan",
    "FAMILIES",
    "TREC_NAMES",
    "TREC_CUTOFFS",
    "NICKNAMES",
    "MIN_GEO_MEAN",
    "known_names",
    "parse_measure",
    "parse_measures",
    "compute",
    "summarize",
    "trec_order",
    "markdown_table",
    "api_table",
]


def trec_order(measures: Sequence[Measure]) -> list[Measure]:
    """The measures in trec_eval's output order (its table order, then the cutoff; stable otherwise).

    Example:
        >>> [m.label for m in trec_order(parse_measures(["ndcg_cut.10", "map", "P.5"]))]
        ['map', 'P_5', 'ndcg_cut_10']
    """
    return sorted(measures, key=Measure.sort_key)


def compute(
    measures: Sequence[Measure],
    preds: Tensor,
    target: Tensor,
    *,
    mask: Tensor | None = None,
    ideal_target: Tensor | None = None,
    judged: Tensor | None = None,
    convention: str | Convention | None = "trec_eval",
    relevance_level: float | None = None,
    style: str | None = None,
    validate_args: bool = True,
    max_elements: int = 1 << 24,
) -> dict[str, Tensor]:
    """Per-query values of every measure on TREC-style tensors (negative grades are unjudged),
    ranking the batch once per distinct convention.

    Args:
        measures: parsed measures (:func:`parse_measures`).
        preds: ``(N, L)`` scores.
        target: ``(N, L)`` integer grades; negative grades are unjudged (gain 0, never relevant):
            ``-2`` in the judgment pool but not judged (trec_eval's RELVALUE_UNJUDGED, which infAP
            counts), any other negative grade absent from the qrels (``-1``, RELVALUE_NONPOOL).
        mask: ``(N, L)`` bool, False = padding.
        ideal_target: ``(N, M)`` grades of every judged document of each query (trec_eval's IDCG
            and relevant counts); negative entries are padding/unjudged.
        judged: ``(N, L)`` bool, True where the document has a relevance judgment (default: where
            ``target >= 0``).
        convention: the base convention (default ``"trec_eval"``: linear gain, ties in input
            order); each measure adds its own settings.
        relevance_level: the run-wide minimum relevant grade (trec_eval's ``-l``, default 1).
        style: output names: ``None`` (each measure's label), ``"trec"`` or ``"ir"``.
        validate_args: run the core's value checks (NaN scores).
        max_elements: queries are processed in slices of at most this many ``(query, document)``
            entries to bound memory; results do not depend on it.

    Returns:
        ``{output name: (N,) tensor}`` in the order of ``measures`` (``runid``, which describes the
        run rather than a query, is skipped). Values are float64 when ``preds`` is float64.

    Example:
        >>> import torch
        >>> preds = torch.tensor([[0.9, 0.8, 0.7], [0.1, 0.9, 0.5]], dtype=torch.float64)
        >>> target = torch.tensor([[0, 1, 2], [1, 0, -1]])        # -1: unjudged
        >>> out = compute(parse_measures(["ndcg_cut.3", "P(rel=2)@3", "num_rel"]), preds, target)
        >>> {k: v.tolist() for k, v in out.items()}  # doctest: +ELLIPSIS
        {'ndcg_cut_3': [0.6199..., 0.5], 'P(rel=2)@3': [0.3333..., 0.0], 'num_rel': [2.0, 1.0]}
    """
    if preds.ndim != 2:
        raise ValueError(f"preds must be a padded batch (N, L), got shape {tuple(preds.shape)}")
    active = [m for m in measures if m.family.kernel is not None]
    names = [_name(m, style) for m in active]
    check_distinct(active, names)  # results are keyed by name: two measures under one would lose one
    if not active:
        return {}
    base = resolve_convention(convention, relevance_threshold=relevance_level)
    plan = MeasurePlan(active, base, negative_unjudged=True)
    n, length = preds.shape
    width = max(length, 1 if ideal_target is None else ideal_target.shape[-1])
    step = max(1, max_elements // width)
    pieces: list[Tensor] = []
    for start in range(0, n, step):
        sl = slice(start, start + step)
        values, empty, _ = plan.values(
            preds[sl],
            target[sl],
            mask=None if mask is None else mask[sl],
            ideal_target=None if ideal_target is None else ideal_target[sl],
            judged=(target[sl] >= 0) if judged is None else judged[sl],
            validate_args=validate_args,
        )
        pieces.append(plan.reduce(values, empty, action=base.empty_target_action, reduction="none"))
    values = torch.cat(pieces) if pieces else preds.new_zeros(0, len(active))
    return {name: values[:, j] for j, name in enumerate(names)}


def _name(m: Measure, style: str | None) -> str:
    if style not in (None, "trec", "ir"):
        raise ValueError(f"style must be None, 'trec' or 'ir', got {style!r}")
    return m.label if style is None else m.trec_label if style == "trec" else m.ir_name()


def summarize(measure: Measure, values: Tensor) -> float | int:
    """trec_eval's summary ("all") of one measure's per-query values.

    The mean is a sequential float64 sum in query order divided by the number of queries, as
    trec_eval computes it, so the printed digits agree; counts are summed; a geometric mean
    (``gm_map``) is ``exp(mean(log(max(v, 1e-5))))``.

    Example:
        >>> import torch
        >>> summarize(parse_measure("map"), torch.tensor([0.5, 0.25]))
        0.375
        >>> summarize(parse_measure("num_ret"), torch.tensor([3.0, 4.0]))
        7
        >>> round(summarize(parse_measure("gm_map"), torch.tensor([0.5, 0.0])), 6)   # sqrt(0.5 * 1e-5)
        0.002236
    """
    import numpy as np

    agg = measure.family.aggregate
    v = values.detach().to("cpu", torch.float64).numpy()
    if agg == "sum":
        return int(round(float(v.sum())))
    if len(v) == 0:
        return float("nan")
    if agg == "gmean":
        logs = np.log(np.maximum(v, MIN_GEO_MEAN))
        return float(math.exp(float(np.cumsum(logs)[-1]) / len(v)))
    if agg == "mean":
        return float(np.cumsum(v)[-1]) / len(v)
    raise ValueError(f"{measure.label} has no per-query values to summarise")


def markdown_table() -> str:
    """The README's table of every measure: its names in each spelling (trec_eval's with its parameter
    syntax), what ``@`` sets, its parameters with their defaults, and its oracle.

    Example:
        >>> print(markdown_table().splitlines()[2])  # doctest: +ELLIPSIS
        | `num_q` | number of queries evaluated | `num_q` | `NumQ` | ...
    """
    trec: dict[str, list[str]] = {}
    for t in TREC_NAMES:
        if not t.active:
            continue
        placeholder = t.param.upper() if t.syntax == "values" else TREC_SYNTAXES[t.syntax].placeholder
        trec.setdefault(t.family, []).append(f"`{t.name}`" + (f".{placeholder}" if placeholder else ""))
    lines = [
        "| measure (key) | what | trec_eval | ir_measures | other names | @ | parameters | oracle in the tests |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in FAMILIES.values():
        if f.key == "runid":
            continue
        params = ", ".join(f"`{p.name}` ({p.doc}{_default(p)})" for p in f.params) or "-"
        aliases = ", ".join([*(f"`{a}`" for a in f.aliases), *(f"`{n}` (peer)" for n, _ in f.peer_names)]) or "-"
        at = "@k" if f.cutoff else f"@{f.at}" if f.at != "cutoff" else "-"
        lines.append(
            f"| `{f.key}` | {f.summary} | {', '.join(trec.get(f.key, [])) or '-'} | "
            f"{'`' + f.ir + '`' if f.ir else '-'} | {aliases} | {at} | {params} | {f.oracle} |"
        )
    return "\n".join(lines)


def api_table() -> str:
    """The docs' table of what each measure takes and where it runs, from its registry row: the
    convention options it reads (what its class and function accept; any other is a ``TypeError``),
    its metric class and public function, whether the top-k route serves it, and its tie rule under
    the torchmetrics presets. Every measure is also a name of ``RankingMetrics``, ``F.evaluate``,
    ``trec.evaluate`` and the command line.

    Example:
        >>> print(api_table().splitlines()[2])
        | `num_q` | - | - | - | - | - |
    """
    lines = [
        "| measure (key) | convention options it reads | class | function | top-k route | ties under torchmetrics |",
        "|---|---|---|---|---|---|",
    ]
    for f in FAMILIES.values():
        if f.kernel is None:
            continue
        reads = ", ".join(f"`{o}`" for o in OPTIONS if o in f.reads) or "-"
        route = ("yes" + (f" (not with {', '.join(f.topk_not_when)})" if f.topk_not_when else "")) if f.topk else "-"
        ties = f.preset_ties.get("torchmetrics")
        lines.append(
            f"| `{f.key}` | {reads} | {f'`{f.metric_class}`' if f.metric_class else '-'} | "
            f"{f'`F.{f.function}`' if f.function else '-'} | {route} | {f'`{ties}`' if ties else '-'} |"
        )
    return "\n".join(lines)


def _default(p: Param) -> str:
    if p.default is None:
        return ""
    values = p.default if isinstance(p.default, tuple) else (p.default,)
    return "; default " + ",".join(str(int(x)) if isinstance(x, float) and x.is_integer() else str(x) for x in values)
