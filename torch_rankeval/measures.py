"""Measures by name: trec_eval (``ndcg_cut.10``, ``P.5``) and ir_measures (``nDCG@10``, ``P(rel=2)@5``).

One table, :data:`FAMILIES`, says which measures exist, which kernel of
:data:`torch_rankeval.functional.table.KERNELS` computes each, how trec_eval and ir_measures spell
it, which cutoffs trec_eval uses by default and how per-query values are summarised. The parser
turns a name into a :class:`Measure` (family, cutoffs, convention overrides); :func:`compute`
ranks a padded batch once per distinct convention and evaluates every requested measure on it.

    >>> from torch_rankeval.measures import parse_measure
    >>> m = parse_measure("ndcg_cut.5,10")
    >>> m.kernel.name, m.cutoffs, m.names()
    ('ndcg', (5, 10), ['ndcg_cut_5', 'ndcg_cut_10'])
    >>> parse_measure("nDCG@10").names(), parse_measure("nDCG@10").names("trec")
    (['nDCG@10'], ['ndcg_cut_10'])
    >>> parse_measure("P(rel=2)@5").relevance_threshold
    2
"""

from __future__ import annotations

import ast
import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention, gain_fn, resolve_convention
from torch_rankeval.functional._inputs import finalize, prepare
from torch_rankeval.functional._ranking import RankedBatch
from torch_rankeval.functional.table import KERNELS, MetricKernel

__all__ = [
    "Family",
    "FAMILIES",
    "NICKNAMES",
    "COUNT_KERNELS",
    "Measure",
    "parse_measure",
    "parse_measures",
    "compute",
    "summarize",
    "trec_order",
]

# trec_eval's default cutoffs for P, recall, ndcg_cut, map_cut and success.
_TREC_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
# trec_eval's gm_map floors each AP at this value before taking logs.
MIN_GEO_MEAN = 1e-5


def _num_ret(rb: RankedBatch, ks: tuple, conv: Convention) -> tuple[Tensor, None]:
    return rb.n_valid.unsqueeze(-1).expand(-1, len(ks)), None


def _num_rel(rb: RankedBatch, ks: tuple, conv: Convention) -> tuple[Tensor, None]:
    return rb.n_relevant.unsqueeze(-1).expand(-1, len(ks)), None


def _num_rel_ret(rb: RankedBatch, ks: tuple, conv: Convention) -> tuple[Tensor, None]:
    return rb.rel.sum(-1, keepdim=True).expand(-1, len(ks)), None


# trec_eval's counting measures, read off the same ranked view as the metric kernels.
COUNT_KERNELS: dict[str, MetricKernel] = {
    k.name: k
    for k in (
        MetricKernel("num_ret", _num_ret, has_cutoff=False),
        MetricKernel("num_rel", _num_rel, has_cutoff=False),
        MetricKernel("num_rel_ret", _num_rel_ret, has_cutoff=False),
    )
}


@dataclass(frozen=True)
class Family:
    """One row of the measure table.

    Attributes:
        key: trec_eval's name when it has one (``"ndcg_cut"``), else an ir_measures-style key.
        kernel: the :data:`~torch_rankeval.functional.table.KERNELS` (or :data:`COUNT_KERNELS`)
            entry that computes it; ``None`` for ``runid`` and ``num_q``, which describe the run.
        trec: trec_eval's name, or ``None``.
        ir: ir_measures' name without a cutoff (``"nDCG"`` for ``ndcg``), or ``None``.
        ir_cut: ir_measures' name with a cutoff (``"nDCG"`` for ``ndcg_cut``), or ``None``.
        trec_cutoffs: trec_eval's default cutoffs (``()``: the measure takes no cutoff).
        aggregate: how per-query values combine into the summary: ``"mean"``, ``"sum"``,
            ``"gmean"`` (trec_eval's ``gm_map``), ``"count"`` (``num_q``) or ``"info"`` (``runid``).
        gains: whether the measure accepts a gain mapping (nDCG).
        rel: whether the measure accepts a relevance level (binary measures).
    """

    key: str
    kernel: str | None
    trec: str | None
    ir: str | None = None
    ir_cut: str | None = None
    trec_cutoffs: tuple[int, ...] = ()
    aggregate: str = "mean"
    gains: bool = False
    rel: bool = True

    @property
    def integer(self) -> bool:
        return self.aggregate in ("sum", "count")


# In trec_eval's own order: its output lists measures in this order whatever the command line says.
FAMILIES: tuple[Family, ...] = (
    Family("runid", None, "runid", aggregate="info", rel=False),
    Family("num_q", None, "num_q", ir="NumQ", aggregate="count", rel=False),
    Family("num_ret", "num_ret", "num_ret", ir="NumRet", aggregate="sum", rel=False),
    Family("num_rel", "num_rel", "num_rel", ir="NumRel", aggregate="sum"),
    Family("num_rel_ret", "num_rel_ret", "num_rel_ret", ir="NumRelRet", aggregate="sum"),
    Family("map", "map", "map", ir="AP"),
    Family("gm_map", "map", "gm_map", aggregate="gmean"),
    Family("Rprec", "r_precision", "Rprec", ir="Rprec"),
    Family("recip_rank", "mrr", "recip_rank", ir="RR", ir_cut="RR"),
    Family("P", "precision", "P", ir_cut="P", trec_cutoffs=_TREC_CUTOFFS),
    Family("recall", "recall", "recall", ir="R", ir_cut="R", trec_cutoffs=_TREC_CUTOFFS),
    Family("ndcg", "ndcg", "ndcg", ir="nDCG", gains=True, rel=False),
    Family("ndcg_cut", "ndcg", "ndcg_cut", ir_cut="nDCG", trec_cutoffs=_TREC_CUTOFFS, gains=True, rel=False),
    Family("map_cut", "map", "map_cut", ir_cut="AP", trec_cutoffs=_TREC_CUTOFFS),
    Family("success", "hit_rate", "success", ir="Success", ir_cut="Success", trec_cutoffs=(1, 5, 10)),
)

_BY_TREC = {f.trec: f for f in FAMILIES if f.trec}
_BY_IR = {f.ir: f for f in FAMILIES if f.ir}
_BY_IR_CUT = {f.ir_cut: f for f in FAMILIES if f.ir_cut}
_ORDER = {f.key: i for i, f in enumerate(FAMILIES)}

# trec_eval's nicknames, restricted to the measures this table supports.
NICKNAMES: dict[str, tuple[str, ...]] = {
    "official": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "recip_rank", "P"),
    "all_trec": (
        "runid",
        "num_q",
        "num_ret",
        "num_rel",
        "num_rel_ret",
        "map",
        "gm_map",
        "Rprec",
        "recip_rank",
        "P",
        "recall",
        "ndcg",
        "success",
        "map_cut",
        "ndcg_cut",
    ),
}

# ir_measures' spelling: Name(param=value, ...)@cutoff
_IR_SYNTAX = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\((?P<params>.*)\))?(?:@(?P<cutoff>[^@()]+))?$")
# trec_eval's printed names used as input: P_5, ndcg_cut_10
_TREC_PRINTED = re.compile(r"^(?P<name>[A-Za-z_]+?)_(?P<cutoff>\d+)$")


@dataclass(frozen=True)
class Measure:
    """A measure parsed from its name: a row of :data:`FAMILIES`, cutoffs and convention overrides.

    Attributes:
        family: the :class:`Family`.
        cutoffs: one or more cutoffs (``None`` = the whole ranking); one output per cutoff.
        relevance_threshold: a per-measure relevance level (``P(rel=2)@5``) that overrides the
            run-wide level (trec_eval's ``-l``); ``None`` uses the run-wide level.
        gains: a ``{grade: gain}`` mapping for nDCG (grades not listed keep their grade as gain,
            as in trec_eval), as sorted pairs; ``None`` is linear gain.
        gain: ``"linear"`` (trec_eval, ir_measures' ``dcg='log2'``) or ``"exp2"``
            (ir_measures' ``dcg='exp-log2'``).
        style: ``"trec"`` or ``"ir"``: how the name was written, and how outputs are named.
        params: trec_eval's parameter string as written (``"1=3,2=9"``), kept for its output name.

    Example:
        >>> m = parse_measure("P.10,5")
        >>> m.cutoffs, m.names()
        ((5, 10), ['P_5', 'P_10'])
    """

    family: Family
    cutoffs: tuple[int | None, ...] = (None,)
    relevance_threshold: float | None = None
    gains: tuple[tuple[float, float], ...] | None = None
    gain: str = "linear"
    style: str = "trec"
    params: str = field(default="", compare=False)

    @property
    def kernel(self) -> MetricKernel | None:
        """The kernel that computes the measure (``None`` for ``runid``/``num_q``)."""
        name = self.family.kernel
        if name is None:
            return None
        return COUNT_KERNELS[name] if name in COUNT_KERNELS else KERNELS[name]

    @property
    def per_query(self) -> bool:
        """Whether trec_eval prints a value per query (not for ``runid``, ``num_q``, ``gm_map``)."""
        return self.family.aggregate in ("mean", "sum")

    def names(self, style: str | None = None) -> list[str]:
        """Output names, one per cutoff: as written (``style=None``), ``"trec"`` (trec_eval's
        printed names where trec_eval has the measure) or ``"ir"`` (ir_measures' names).

        Example:
            >>> parse_measure("ndcg_cut.10").names("ir"), parse_measure("RR@10").names("trec")
            (['nDCG@10'], ['RR@10'])
        """
        style = style or self.style
        if style == "trec":
            trec = self._trec_names()
            if trec is not None:
                return trec
        return [self._ir_name(k) for k in self.cutoffs]

    def _trec_names(self) -> list[str] | None:
        f = self.family
        if f.trec is None or self.relevance_threshold is not None or self.gain != "linear":
            return None
        if f.trec_cutoffs:
            if any(k is None for k in self.cutoffs) or self.gains is not None:
                return None
            return [f"{f.trec}_{k}" for k in self.cutoffs]
        if self.cutoffs != (None,):
            return None
        if self.gains is not None:  # trec_eval's ndcg takes gains as parameters
            params = self.params or ",".join(f"{_num(g)}={_num(v)}" for g, v in self.gains)
            return [f"{f.trec}_{params}"]
        return [f.trec]

    def _ir_name(self, k: int | None) -> str:
        f = self.family
        name = f.ir_cut if k is not None else f.ir
        if name is None:  # no ir_measures spelling (gm_map, runid, P without cutoff): key + cutoff
            name = f.ir or f.ir_cut or f.key
        params = []
        if self.relevance_threshold is not None:
            params.append(f"rel={_num(self.relevance_threshold)}")
        if self.gain != "linear":
            params.append("dcg='exp-log2'")
        if self.gains is not None:
            params.append("gains={" + ",".join(f"{_num(g)}:{_num(v)}" for g, v in self.gains) + "}")
        text = name + (f"({','.join(params)})" if params else "")
        return text + (f"@{k}" if k is not None else "")

    def convention(
        self, base: str | Convention | None = "trec_eval", relevance_level: float | None = None
    ) -> Convention:
        """The :class:`~torch_rankeval.conventions.Convention` this measure is computed under.

        ``base`` is the preset (trec_eval by default); the measure's own relevance level wins over
        ``relevance_level`` (trec_eval's ``-l``). Negative grades mark unjudged documents: they
        have gain 0 and are never relevant.

        Example:
            >>> c = parse_measure("P(rel=2)@5").convention(relevance_level=1)
            >>> c.relevance_threshold, c.ties
            (2, 'first')
        """
        # Families without a relevance level (nDCG) ignore the threshold; keeping the run-wide one lets
        # them share a ranking with the binary measures.
        threshold = self.relevance_threshold if self.relevance_threshold is not None else relevance_level
        return resolve_convention(base, gain=_unjudged_zero_gain(self.gain, self.gains), relevance_threshold=threshold)

    def sort_key(self) -> tuple:
        """trec_eval's output order: table order of the family."""
        return (_ORDER[self.family.key],)


def _num(x: float) -> str:
    """A number as written: integers without a decimal point."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


_GAIN_CACHE: dict[tuple, object] = {}


def _unjudged_zero_gain(gain: str, gains: tuple[tuple[float, float], ...] | None):
    """A gain callable that gives unjudged documents (negative grades) gain 0.

    Cached per spec so that measures sharing a convention share one ranking.
    """
    key = (gain, gains)
    if key not in _GAIN_CACHE:
        inner = gain_fn(dict(gains)) if gains is not None else gain_fn(gain)

        def zero_unjudged(t: Tensor) -> Tensor:
            return torch.where(t < 0, torch.zeros((), dtype=t.dtype, device=t.device), inner(t))

        zero_unjudged.__qualname__ = f"gain[{gain}{'' if gains is None else ', ' + str(dict(gains))}]"
        _GAIN_CACHE[key] = zero_unjudged
    return _GAIN_CACHE[key]


def _known_names() -> list[str]:
    names = set(_BY_TREC) | set(_BY_IR) | set(_BY_IR_CUT) | set(NICKNAMES)
    return sorted(names)


def _unknown(name: str, why: str = "") -> ValueError:
    choices = _known_names()
    base = re.split(r"[.(@]", name, maxsplit=1)[0]
    close = difflib.get_close_matches(base, choices, n=4, cutoff=0.5)
    lower = [c for c in choices if c.lower() == base.lower() and c not in close]
    close = lower + close
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    return ValueError(
        f"unknown measure {name!r}{': ' + why if why else ''}.{hint} Known names: {', '.join(choices)} "
        "(trec_eval style 'ndcg_cut.10', ir_measures style 'nDCG@10', 'P(rel=2)@5')"
    )


def parse_measure(name: str) -> Measure:
    """Parse one measure name (trec_eval or ir_measures spelling) into a :class:`Measure`.

    trec_eval: ``name`` or ``name.params`` with comma-separated cutoffs (``P.5,10``; sorted and
    deduplicated as trec_eval does; a fractional cutoff is truncated) or, for ``ndcg``, gains
    (``ndcg.0=0,1=1,2=3``). trec_eval's printed names (``P_5``, ``ndcg_cut_10``) are accepted too.
    ir_measures: ``Name(param=value, ...)@k`` with ``rel`` (binary measures), ``gains`` and ``dcg``
    (nDCG). Nicknames (``official``, ``all_trec``) expand to several measures: use
    :func:`parse_measures`.

    Raises:
        ValueError: unknown name (the message lists close matches), bad cutoff or parameter.

    Example:
        >>> parse_measure("map_cut.100").names(), parse_measure("AP@100").names("trec")
        (['map_cut_100'], ['map_cut_100'])
        >>> parse_measure("nDCG(gains={0:0,1:1,2:3})@10").gains
        ((0.0, 0.0), (1.0, 1.0), (2.0, 3.0))
        >>> parse_measure("nDGC@10")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: unknown measure 'nDGC@10'. Did you mean 'nDCG'? ...
    """
    if not isinstance(name, str):
        raise TypeError(f"a measure name must be a str, got {type(name).__name__}")
    text = name.strip()
    if not text:
        raise ValueError("empty measure name: give e.g. 'ndcg_cut.10' or 'nDCG@10'")
    if text in NICKNAMES:
        raise ValueError(f"{text!r} names several measures: use parse_measures([{text!r}])")
    base, dot, params = text.partition(".")
    if base in _BY_TREC and "(" not in text and "@" not in text:
        return _parse_trec(text, _BY_TREC[base], params if dot else None)
    printed = _TREC_PRINTED.match(text)
    if printed and printed["name"] in _BY_TREC and _BY_TREC[printed["name"]].trec_cutoffs:
        return _parse_trec(text, _BY_TREC[printed["name"]], printed["cutoff"])
    return _parse_ir(text)


def _parse_trec(text: str, family: Family, params: str | None) -> Measure:
    if family.trec_cutoffs:
        if params is None:
            return Measure(family, family.trec_cutoffs)
        cutoffs = []
        for part in params.split(","):
            try:
                k = int(float(part))
            except ValueError:
                raise ValueError(
                    f"measure {text!r}: cutoff {part!r} is not a number; write e.g. {family.trec}.5,10"
                ) from None
            if k <= 0:
                raise ValueError(f"measure {text!r}: cutoffs must be positive, got {part!r}")
            cutoffs.append(k)
        return Measure(family, tuple(sorted(set(cutoffs))), params=params)
    if params is None:
        return Measure(family)
    if family.gains:
        gains = {}
        for part in params.split(","):
            grade, eq, value = part.partition("=")
            try:
                gains[float(int(grade))] = float(value)
            except ValueError:
                raise ValueError(
                    f"measure {text!r}: gain {part!r} is not 'grade=gain' with an integer grade; write e.g. "
                    "ndcg.0=0,1=1,2=3 (for cutoffs use ndcg_cut.10)"
                ) from None
            if not eq or not math.isfinite(gains[float(int(grade))]):
                raise ValueError(f"measure {text!r}: gain {part!r} is not 'grade=gain' with a finite gain")
        return Measure(family, gains=tuple(sorted(gains.items())), params=params)
    raise ValueError(f"measure {text!r}: trec_eval's {family.trec} takes no parameters")


def _parse_ir(text: str) -> Measure:
    match = _IR_SYNTAX.match(text)
    if not match:
        raise _unknown(text)
    name, params_text, cutoff_text = match["name"], match["params"], match["cutoff"]
    cutoff: int | None = None
    if cutoff_text is not None:
        try:
            cutoff = int(cutoff_text)
        except ValueError:
            raise ValueError(f"measure {text!r}: cutoff {cutoff_text!r} is not an integer") from None
        if cutoff <= 0:
            raise ValueError(f"measure {text!r}: the cutoff must be positive, got {cutoff}")
        family = _BY_IR_CUT.get(name)
        if family is None:
            if name in _BY_IR:
                raise ValueError(f"measure {text!r}: {name} takes no cutoff")
            raise _unknown(text)
    else:
        family = _BY_IR.get(name)
        if family is None:
            raise _unknown(text)
    params = _ir_params(text, params_text)
    rel = params.pop("rel", None)
    gains = params.pop("gains", None)
    dcg = params.pop("dcg", "log2")
    judged_only = params.pop("judged_only", False)
    if params:
        raise ValueError(f"measure {text!r}: unknown parameter(s) {sorted(params)}; {name} accepts {_accepted(family)}")
    if judged_only:
        raise ValueError(f"measure {text!r}: judged_only=True is not supported (trec_eval's -J); drop the parameter")
    if rel is not None:
        if not family.rel:
            raise ValueError(f"measure {text!r}: {name} takes no rel parameter; it accepts {_accepted(family)}")
        if isinstance(rel, bool) or not isinstance(rel, (int, float)) or not rel > 0:
            raise ValueError(
                f"measure {text!r}: rel must be a positive number (the minimum relevant grade), got {rel!r}"
            )
    gain_pairs = None
    if gains is not None:
        if not family.gains:
            raise ValueError(f"measure {text!r}: {name} takes no gains parameter; it accepts {_accepted(family)}")
        if not isinstance(gains, Mapping) or not gains:
            raise ValueError(f"measure {text!r}: gains must be a non-empty mapping {{grade: gain}}")
        try:
            gain_pairs = tuple(sorted((float(int(g)), float(v)) for g, v in gains.items()))
        except (TypeError, ValueError):
            raise ValueError(f"measure {text!r}: gains must map integer grades to numbers, got {gains!r}") from None
    if dcg not in ("log2", "exp-log2") or (dcg != "log2" and not family.gains):
        raise ValueError(
            f"measure {text!r}: dcg must be 'log2' (linear gain) or 'exp-log2' (2^rel - 1) on nDCG, got {dcg!r}"
        )
    return Measure(
        family,
        (cutoff,),
        relevance_threshold=rel,
        gains=gain_pairs,
        gain="exp2" if dcg == "exp-log2" else "linear",
        style="ir",
    )


def _accepted(family: Family) -> str:
    accepted = (["rel"] if family.rel else []) + (["gains", "dcg"] if family.gains else [])
    return ", ".join(accepted) if accepted else "no parameters"


def _ir_params(text: str, params_text: str | None) -> dict:
    if not params_text:
        return {}
    try:
        call = ast.parse(f"f({params_text})", mode="eval").body
    except SyntaxError:
        raise ValueError(f"measure {text!r}: parameters must read like Name(key=value, ...)@k") from None
    if not isinstance(call, ast.Call) or call.args:
        raise ValueError(f"measure {text!r}: parameters must be keyword arguments, e.g. P(rel=2)@5")
    out = {}
    for kw in call.keywords:
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:
            raise ValueError(f"measure {text!r}: parameter {kw.arg} must be a literal value") from None
    return out


def parse_measures(names: str | Iterable[str]) -> list[Measure]:
    """Parse several names (a sequence, or one comma-free string); nicknames expand.

    ``official`` and ``all_trec`` expand to the supported part of trec_eval's sets. Measures of the
    same trec_eval family written as separate names merge their cutoffs (``-m P.5 -m P.10`` is
    ``P.5,10``); exact duplicates are dropped.

    Example:
        >>> [m.names() for m in parse_measures(["P.5", "P.10", "map"])]
        [['P_5', 'P_10'], ['map']]
        >>> [m.family.key for m in parse_measures("official")][:4]
        ['runid', 'num_q', 'num_ret', 'num_rel']
    """
    if isinstance(names, str):
        names = [names]
    out: list[Measure] = []
    for name in names:
        expanded = [parse_measure(n) for n in NICKNAMES[name]] if name in NICKNAMES else [parse_measure(name)]
        for m in expanded:
            _merge(out, m)
    return out


def _merge(out: list[Measure], m: Measure) -> None:
    for i, other in enumerate(out):
        if other == m:
            return
        same_kind = (
            other.family == m.family
            and other.style == m.style == "trec"
            and other.family.trec_cutoffs
            and (other.relevance_threshold, other.gains, other.gain) == (m.relevance_threshold, m.gains, m.gain)
        )
        if same_kind:
            cutoffs = tuple(sorted(set(other.cutoffs) | set(m.cutoffs)))
            out[i] = Measure(other.family, cutoffs, other.relevance_threshold, other.gains, other.gain, other.style)
            return
    out.append(m)


def trec_order(measures: Sequence[Measure]) -> list[Measure]:
    """The measures in trec_eval's output order (its table order; stable otherwise).

    Example:
        >>> [m.names()[0] for m in trec_order(parse_measures(["ndcg_cut.10", "map", "P.5"]))]
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
    convention: str | Convention | None = "trec_eval",
    relevance_level: float | None = None,
    style: str | None = None,
    validate_args: bool = True,
    max_elements: int = 1 << 24,
) -> dict[str, Tensor]:
    """Per-query values of every measure, ranking the batch once per distinct convention.

    Args:
        measures: parsed measures (:func:`parse_measures`).
        preds: ``(N, L)`` scores.
        target: ``(N, L)`` integer grades; negative grades are unjudged (gain 0, never relevant).
        mask: ``(N, L)`` bool, False = padding.
        ideal_target: ``(N, M)`` grades of every judged document of each query (trec_eval's IDCG
            and relevant counts); negative entries are padding/unjudged.
        convention: the base convention (default ``"trec_eval"``: linear gain, ties in input
            order); each measure adds its overrides.
        relevance_level: the run-wide minimum relevant grade (trec_eval's ``-l``, default 1).
        style: output names (``None``: as written; ``"trec"``; ``"ir"``).
        validate_args: run the core's value checks (NaN scores).
        max_elements: queries are processed in slices of at most this many ``(query, document)``
            entries to bound memory; results do not depend on it.

    Returns:
        ``{output name: (N,) tensor}`` in the order of ``measures`` (``runid`` and ``num_q``,
        which describe the run rather than a query, are skipped). Values are float64 when
        ``preds`` is float64.

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
    active = [m for m in measures if m.kernel is not None]
    groups: dict[Convention, list[Measure]] = {}
    for m in active:
        groups.setdefault(m.convention(convention, relevance_level), []).append(m)
    n, length = preds.shape
    width = max(length, 1 if ideal_target is None else ideal_target.shape[-1])
    step = max(1, max_elements // width)
    pieces: dict[str, list[Tensor]] = {name: [] for m in active for name in m.names(style)}
    for start in range(0, n, step):
        sl = slice(start, start + step)
        for conv, members in groups.items():
            rb, _ = prepare(
                preds[sl],
                target[sl],
                convention=conv,
                mask=None if mask is None else mask[sl],
                ideal_target=None if ideal_target is None else ideal_target[sl],
                validate_args=validate_args,
            )
            for m in members:
                values, empty = m.kernel.values(rb, tuple(m.cutoffs), conv)
                if empty is None:
                    empty, action = torch.zeros_like(values, dtype=torch.bool), "neg"
                else:
                    empty, action = empty.expand_as(values), conv.empty_target_action
                values = finalize(
                    values,
                    empty,
                    action=action,
                    reduction="none",
                    validate_args=False,
                    single=False,
                    keep_k=True,
                    name=m.names(style)[0],
                )
                for j, name in enumerate(m.names(style)):
                    pieces[name].append(values[:, j])
    return {name: torch.cat(parts) if parts else preds.new_zeros(0) for name, parts in pieces.items()}


def summarize(measure: Measure, values: Tensor) -> float | int:
    """trec_eval's summary ("all") of one output's per-query values.

    The mean is a sequential float64 sum in query order divided by the number of queries, as
    trec_eval computes it, so the printed digits agree; counts are summed; ``gm_map`` is
    ``exp(mean(log(max(AP, 1e-5))))``.

    Example:
        >>> import torch
        >>> summarize(parse_measure("map"), torch.tensor([0.5, 0.25]))
        0.375
        >>> summarize(parse_measure("num_ret"), torch.tensor([3.0, 4.0]))
        7
        >>> round(summarize(parse_measure("gm_map"), torch.tensor([0.5, 0.0])), 6)   # sqrt(0.5 * 1e-5)
        0.002236
    """
    agg = measure.family.aggregate
    v = values.detach().to("cpu", torch.float64).numpy()
    if agg == "sum":
        return int(round(float(v.sum())))
    if len(v) == 0:
        return float("nan")
    if agg == "gmean":
        import numpy as np

        logs = np.log(np.maximum(v, MIN_GEO_MEAN))
        return float(math.exp(float(np.cumsum(logs)[-1]) / len(v)))
    if agg == "mean":
        import numpy as np

        return float(np.cumsum(v)[-1]) / len(v)
    raise ValueError(f"{measure.family.key} has no per-query values to summarise")
