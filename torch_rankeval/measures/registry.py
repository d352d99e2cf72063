"""The measure registry: every measure of the library in one table.

A :class:`Family` is one row: what it measures, the kernel that computes it off the ranked view,
its declared, typed parameters (:class:`Param`), its names (ir_measures' name and the library's
case-insensitive aliases) and how per-query values combine. :data:`TREC_NAMES` says how trec_eval
spells each family (``ndcg`` and ``ndcg_cut`` are one family, with and without a cutoff) and gives
trec_eval's output order. A :class:`Measure` is a family with one cutoff and parameter values; it
compares and hashes by value, so equal settings written differently (``nDCG@10``, ``ndcg_cut.10``)
are one measure, computed once.

Adding a measure is adding a row: a kernel ``(ranked_batch, cutoffs, convention, **params) ->
(values (N, K), empty flags (N, 1 or K) or None)`` and its names.

Example:
    >>> FAMILIES["ndcg"].ir, [p.name for p in FAMILIES["ndcg"].params]
    ('nDCG', ['gains', 'dcg'])
    >>> Measure("ndcg", 10) == Measure("ndcg", 10, label="nDCG@10")
    True
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention, GainMap, gain_fn, resolve_convention
from torch_rankeval.functional._ranking import RankedBatch
from torch_rankeval.functional.average_precision import average_precision_values
from torch_rankeval.functional.dcg import dcg_values, idcg_values, ndcg_values
from torch_rankeval.functional.precision_recall import hit_rate_values, precision_values, r_precision_values, recall_values
from torch_rankeval.functional.reciprocal_rank import reciprocal_rank_values

__all__ = [
    "Param",
    "Family",
    "TrecName",
    "Measure",
    "FAMILIES",
    "TREC_NAMES",
    "TREC_CUTOFFS",
    "MIN_GEO_MEAN",
    "UnjudgedZeroGain",
]

#: trec_eval's default cutoffs of P, recall, ndcg_cut, map_cut (success: 1, 5, 10).
TREC_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
#: trec_eval's floor of each value before the logarithm of a geometric mean (gm_map).
MIN_GEO_MEAN = 1e-5

AGGREGATES = ("mean", "sum", "gmean", "info")


# ----------------------------------------------------------------------------- parameters
@dataclass(frozen=True)
class Param:
    """A declared, typed parameter of a measure family.

    Attributes:
        name: the name in ir_measures' syntax (``P(rel=2)@5``).
        kind: ``"positive"`` (a number > 0), ``"gains"`` (a mapping ``{grade: gain}``),
            ``"choice"`` (one of ``choices``), ``"probability"`` (a number in (0, 1)).
        doc: what it means.
        default: the value when not given (``None``: the API's convention decides).
        choices: the accepted values of a ``"choice"``.
        convention: the :class:`~torch_rankeval.conventions.Convention` field the parameter sets;
            ``None``: the value is passed to the kernel as a keyword argument.

    Example:
        >>> Param("rel", "positive", "minimum relevant grade").coerce(2, "P(rel=2)@5")
        2
    """

    name: str
    kind: str
    doc: str
    default: Any = None
    choices: tuple = ()
    convention: str | None = None

    def coerce(self, value: Any, where: str) -> Any:
        """Check ``value`` and return it in a hashable, canonical form; errors name ``where``."""
        if self.kind == "positive":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
                raise ValueError(f"measure {where!r}: {self.name} must be a positive number ({self.doc}), got {value!r}")
            return int(value) if float(value).is_integer() else float(value)
        if self.kind == "probability":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
                raise ValueError(f"measure {where!r}: {self.name} must be a number in (0, 1) ({self.doc}), got {value!r}")
            return float(value)
        if self.kind == "choice":
            if value not in self.choices:
                raise ValueError(f"measure {where!r}: {self.name} must be one of {list(self.choices)}, got {value!r}")
            return value
        if self.kind == "gains":
            if not isinstance(value, Mapping) or not value:
                raise ValueError(f"measure {where!r}: gains must be a non-empty mapping {{grade: gain}}, got {value!r}")
            try:
                pairs = {float(int(g)): float(v) for g, v in value.items()}
            except (TypeError, ValueError):
                raise ValueError(f"measure {where!r}: gains must map integer grades to numbers, got {value!r}") from None
            if not all(math.isfinite(v) for v in pairs.values()):
                raise ValueError(f"measure {where!r}: gains must be finite numbers, got {value!r}")
            return GainMap(pairs)
        raise AssertionError(f"unknown parameter kind {self.kind!r}")  # pragma: no cover - table error

    def render(self, value: Any) -> str:
        """The value in ir_measures' syntax.

        Example:
            >>> Param("gains", "gains", "").render(GainMap({0: 0, 1: 1, 2: 3}))
            '{0:0,1:1,2:3}'
        """
        if self.kind == "gains":
            return "{" + ",".join(f"{_num(g)}:{_num(v)}" for g, v in value.items()) + "}"
        if isinstance(value, str):
            return repr(value)
        return _num(value)


def _num(x: float) -> str:
    """A number as written: integers without a decimal point."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


_REL = Param("rel", "positive", "the minimum grade of a relevant document", convention="relevance_threshold")
_GAINS = Param("gains", "gains", "gain of each grade; grades not listed keep their grade as gain", convention="gain")
_DCG = Param("dcg", "choice", "'log2': linear gain, 'exp-log2': 2**grade - 1", choices=("log2", "exp-log2"), convention="gain")


# ----------------------------------------------------------------------------- kernels
# Named module-level functions (not lambdas), so that measures, plans and metrics pickle.
Values = tuple[Tensor, "Tensor | None"]


def _dcg(rb: RankedBatch, ks: tuple, conv: Convention) -> Values:
    return dcg_values(rb, ks), None


def _idcg(rb: RankedBatch, ks: tuple, conv: Convention) -> Values:
    return idcg_values(rb, ks), None


def _ndcg(rb: RankedBatch, ks: tuple, conv: Convention) -> Values:
    return ndcg_values(rb, ks)


def _ap(rb: RankedBatch, ks: tuple, conv: Convention) -> Values:
    return average_precision_values(rb, ks, conv)


def _rr(rb: RankedBatch, ks: tuple, conv: Convention) -> Values:
    return reciprocal_rank_values(rb, ks)


def _precision(rb: RankedBatch, ks: tuple, conv: Convention) -> Values:
    return precision_values(rb, ks, adaptive_k=conv.adaptive_k)


def _recall(rb: RankedBatch, ks: tuple, conv: Convention) -> Values:
    return recall_values(rb, ks)


def _hit_rate(rb: RankedBatch, ks: tuple, conv: Convention) -> Values:
    return hit_rate_values(rb, ks)


def _r_precision(rb: RankedBatch, ks: tuple, conv: Convention) -> Values:
    return r_precision_values(rb, ks)


def _num_q(rb: RankedBatch, ks: tuple, conv: Convention) -> Values:
    return torch.ones(rb.n_lists, len(ks), dtype=rb.dtype, device=rb.device), None


def _num_ret(rb: RankedBatch, ks: tuple, conv: Convention) -> Values:
    return rb.n_valid.unsqueeze(-1).expand(-1, len(ks)), None


def _num_rel(rb: RankedBatch, ks: tuple, conv: Convention) -> Values:
    return rb.n_relevant.unsqueeze(-1).expand(-1, len(ks)), None


def _num_rel_ret(rb: RankedBatch, ks: tuple, conv: Convention) -> Values:
    return rb.rel.sum(-1, keepdim=True).expand(-1, len(ks)), None


# ----------------------------------------------------------------------------- families
@dataclass(frozen=True)
class Family:
    """One row of the measure table.

    Attributes:
        key: the canonical name (lowercase, used in the library's keys: ``"ndcg@10"``).
        kernel: ``(ranked_batch, cutoffs, convention, **kernel_params) -> (values (N, K), empty or
            None)``; ``None`` for ``runid``, which describes a run file, not a ranking.
        summary: one line: what it measures.
        ir: ir_measures' name (``"nDCG"``), or None.
        aliases: more accepted names (case-insensitive), e.g. ``("mrr", "rr", "reciprocal_rank")``.
        cutoff: whether the measure takes a cutoff ``@k``.
        params: the declared parameters.
        aggregate: how per-query values combine: ``"mean"``, ``"sum"`` (counts), ``"gmean"``
            (geometric mean with trec_eval's floor), ``"info"`` (``runid``: no values).
        per_query: whether trec_eval prints a value per query.
        uses_gain: ``"always"``, ``"graded"`` (when the convention's ``graded`` is set) or ``"never"``.
        oracle: the independent implementation the tests compare against (for the README table).
    """

    key: str
    kernel: Callable[..., Values] | None
    summary: str
    ir: str | None = None
    aliases: tuple[str, ...] = ()
    cutoff: bool = True
    params: tuple[Param, ...] = ()
    aggregate: str = "mean"
    per_query: bool = True
    uses_gain: str = "never"
    oracle: str = ""

    @property
    def integer(self) -> bool:
        """Whether values are counts (printed without decimals)."""
        return self.aggregate == "sum"

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def needs_gain(self, conv: Convention) -> bool:
        return self.uses_gain == "always" or (self.uses_gain == "graded" and conv.graded)


def _families(*rows: Family) -> dict[str, Family]:
    return {f.key: f for f in rows}


FAMILIES: dict[str, Family] = _families(
    Family("runid", None, "the run's tag", aggregate="info", per_query=False, cutoff=False, oracle="trec_eval"),
    Family("num_q", _num_q, "number of queries evaluated", ir="NumQ", cutoff=False, aggregate="sum",
           per_query=False, oracle="trec_eval"),
    Family("num_ret", _num_ret, "number of documents retrieved", ir="NumRet", cutoff=False, aggregate="sum",
           oracle="pytrec_eval"),
    Family("num_rel", _num_rel, "number of relevant documents (judged, retrieved or not)", ir="NumRel", cutoff=False,
           params=(_REL,), aggregate="sum", oracle="pytrec_eval"),
    Family("num_rel_ret", _num_rel_ret, "number of relevant documents retrieved", ir="NumRelRet", cutoff=False,
           params=(_REL,), aggregate="sum", oracle="pytrec_eval"),
    Family("map", _ap, "average precision (its mean is MAP)", ir="AP", aliases=("ap", "average_precision"),
           params=(_REL,), uses_gain="graded", oracle="pytrec_eval, torchmetrics"),
    Family("gm_map", _ap, "geometric mean of average precision over queries", cutoff=False, params=(_REL,),
           aggregate="gmean", per_query=False, uses_gain="graded", oracle="pytrec_eval"),
    Family("r_precision", _r_precision, "precision at rank R, the number of relevant documents", ir="Rprec",
           aliases=("rprec", "rprecision"), cutoff=False, params=(_REL,), oracle="pytrec_eval, torchmetrics"),
    Family("mrr", _rr, "reciprocal rank of the first relevant document (its mean is MRR)", ir="RR",
           aliases=("rr", "reciprocal_rank", "recip_rank"), params=(_REL,), oracle="pytrec_eval, torchmetrics"),
    Family("precision", _precision, "share of the top k that is relevant", ir="P", aliases=("p",), params=(_REL,),
           oracle="pytrec_eval, torchmetrics"),
    Family("recall", _recall, "share of the relevant documents found in the top k", ir="R", aliases=("r",),
           params=(_REL,), oracle="pytrec_eval, torchmetrics"),
    Family("ndcg", _ndcg, "normalised discounted cumulative gain", ir="nDCG", params=(_GAINS, _DCG),
           uses_gain="always", oracle="pytrec_eval, sklearn, torchmetrics"),
    Family("hit_rate", _hit_rate, "whether the top k hold a relevant document", ir="Success",
           aliases=("hr", "hitrate", "success"), params=(_REL,), oracle="pytrec_eval, torchmetrics"),
    Family("dcg", _dcg, "discounted cumulative gain", params=(_GAINS, _DCG), uses_gain="always",
           oracle="hand-computed, sklearn"),
    Family("idcg", _idcg, "ideal DCG", params=(_GAINS, _DCG), uses_gain="always", oracle="hand-computed"),
)


# ----------------------------------------------------------------------------- trec_eval's names
@dataclass(frozen=True)
class TrecName:
    """How trec_eval spells (part of) a family; the table's order is trec_eval's output order.

    Attributes:
        name: trec_eval's measure name (``"ndcg_cut"``).
        family: the :data:`FAMILIES` key.
        cutoffs: trec_eval's default cutoffs; ``()``: the spelling takes no cutoff.
        syntax: what ``name.PARAMS`` holds: ``"cutoffs"`` (``P.5,10``), ``"gains"``
            (``ndcg.0=0,1=1,2=3``) or ``"none"``.
    """

    name: str
    family: str
    cutoffs: tuple[int, ...] = ()
    syntax: str = "none"


TREC_NAMES: tuple[TrecName, ...] = (
    TrecName("runid", "runid"),
    TrecName("num_q", "num_q"),
    TrecName("num_ret", "num_ret"),
    TrecName("num_rel", "num_rel"),
    TrecName("num_rel_ret", "num_rel_ret"),
    TrecName("map", "map"),
    TrecName("gm_map", "gm_map"),
    TrecName("Rprec", "r_precision"),
    TrecName("recip_rank", "mrr"),
    TrecName("P", "precision", TREC_CUTOFFS, "cutoffs"),
    TrecName("recall", "recall", TREC_CUTOFFS, "cutoffs"),
    TrecName("ndcg", "ndcg", (), "gains"),
    TrecName("ndcg_cut", "ndcg", TREC_CUTOFFS, "cutoffs"),
    TrecName("map_cut", "map", TREC_CUTOFFS, "cutoffs"),
    TrecName("success", "hit_rate", (1, 5, 10), "cutoffs"),
)
TREC_BY_NAME: dict[str, TrecName] = {t.name: t for t in TREC_NAMES}
TREC_ORDER: dict[str, int] = {t.name: i for i, t in enumerate(TREC_NAMES)}


# ----------------------------------------------------------------------------- measures
@dataclass(frozen=True)
class UnjudgedZeroGain:
    """A gain function that gives negative grades (unjudged documents in TREC data) gain 0 and
    applies ``inner`` (``"linear"``, ``"exp2"`` or a :class:`~torch_rankeval.conventions.GainMap`)
    to the others. Compared by value and picklable, so equal settings share one ranking.

    Example:
        >>> UnjudgedZeroGain("linear")(torch.tensor([-1.0, 0.0, 2.0]))
        tensor([0., 0., 2.])
    """

    inner: Any = "linear"

    def __call__(self, t: Tensor) -> Tensor:
        return torch.where(t < 0, torch.zeros((), dtype=t.dtype, device=t.device), gain_fn(self.inner)(t))


@dataclass(frozen=True)
class Measure:
    """One measure: a family, one cutoff and parameter values. Compares and hashes by value.

    Attributes:
        key: the :data:`FAMILIES` key.
        cutoff: ``None`` (the whole ranking) or a positive int.
        params: the given parameters as sorted ``(name, value)`` pairs (defaults left out).
        label: the output name: the user's spelling where they gave one (``"mrr@10"``,
            ``"nDCG@10"``, trec_eval's printed ``"ndcg_cut_10"``), else :meth:`canonical`.
        trec_label: trec_eval's printed name where trec_eval has the measure, else ``label``.

    Example:
        >>> m = Measure("precision", 5, (("rel", 2),))
        >>> m.canonical(), m.ir_name(), m.trec_name()
        ('precision(rel=2)@5', 'P(rel=2)@5', 'P(rel=2)@5')
        >>> Measure("ndcg", 10).trec_name(), Measure("mrr").trec_name()
        ('ndcg_cut_10', 'recip_rank')
    """

    key: str
    cutoff: int | None = None
    params: tuple[tuple[str, Any], ...] = ()
    label: str = field(default="", compare=False)
    trec_label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        family = FAMILIES.get(self.key)
        if family is None:
            raise ValueError(f"unknown measure family {self.key!r}; known: {', '.join(FAMILIES)}")
        if self.cutoff is not None:
            if not family.cutoff:
                raise ValueError(f"measure {self.key!r} takes no cutoff")
            if isinstance(self.cutoff, bool) or not isinstance(self.cutoff, int) or self.cutoff <= 0:
                raise ValueError(f"measure {self.key!r}: the cutoff must be a positive int, got {self.cutoff!r}")
        given = dict(self.params)
        for name in given:
            if family.param(name) is None:
                raise ValueError(f"measure {self.key!r} takes no parameter {name!r}")
        params = tuple(sorted((n, family.param(n).coerce(v, self.key)) for n, v in given.items()))  # type: ignore[union-attr]
        object.__setattr__(self, "params", params)
        if not self.label:
            object.__setattr__(self, "label", self.canonical())
        if not self.trec_label:
            object.__setattr__(self, "trec_label", self.trec_name())

    # ------------------------------------------------------------------ descriptions
    @property
    def family(self) -> Family:
        return FAMILIES[self.key]

    def param(self, name: str) -> Any:
        """The parameter's value (its default when not given)."""
        given = dict(self.params)
        if name in given:
            return given[name]
        p = self.family.param(name)
        return None if p is None else p.default

    def _render(self, name: str) -> str:
        family = self.family
        params = ",".join(f"{n}={family.param(n).render(v)}" for n, v in self.params)  # type: ignore[union-attr]
        return name + (f"({params})" if params else "") + ("" if self.cutoff is None else f"@{self.cutoff}")

    def canonical(self) -> str:
        """The library's spelling: lowercase key, parameters, cutoff (``"precision(rel=2)@5"``)."""
        return self._render(self.key)

    def ir_name(self) -> str:
        """ir_measures' spelling (``"P(rel=2)@5"``); the library key where ir_measures has none."""
        return self._render(self.family.ir or self.key)

    def trec_spelling(self) -> TrecName | None:
        """The trec_eval name that expresses this measure, or None (``RR@10``, ``P(rel=2)@5``)."""
        given = dict(self.params)
        for t in TREC_NAMES:
            if t.family != self.key or (self.cutoff is None) != (not t.cutoffs):
                continue
            if set(given) - ({"gains"} if t.syntax == "gains" else set()):
                continue
            return t
        return None

    def trec_name(self) -> str:
        """trec_eval's printed name (``"ndcg_cut_10"``, ``"ndcg_0=0,1=1"``), or :meth:`ir_name`."""
        t = self.trec_spelling()
        if t is None:
            return self.ir_name()
        if self.cutoff is not None:
            return f"{t.name}_{self.cutoff}"
        gains = self.param("gains")
        if gains is not None:
            return f"{t.name}_" + ",".join(f"{_num(g)}={_num(v)}" for g, v in gains.items())
        return t.name

    def with_label(self, label: str, trec_label: str = "") -> Measure:
        return Measure(self.key, self.cutoff, self.params, label, trec_label)

    # ------------------------------------------------------------------ computing
    @property
    def per_query(self) -> bool:
        """Whether trec_eval prints a value per query (not for ``runid``, ``num_q``, ``gm_map``)."""
        return self.family.per_query

    @property
    def integer(self) -> bool:
        """Whether values are counts (printed without decimals)."""
        return self.family.integer

    def sort_key(self) -> tuple:
        """trec_eval's output order: its table order, then the cutoff."""
        t = self.trec_spelling()
        family_rank = TREC_ORDER[t.name] if t is not None else _FIRST_TREC.get(self.key, len(TREC_NAMES))
        return (family_rank, self.cutoff or 0)

    def convention(self, base: Convention, *, negative_unjudged: bool = False) -> Convention:
        """The convention the measure is computed under: ``base`` with the measure's own settings
        (``rel``: the relevance threshold; ``gains`` / ``dcg``: the gain). ``negative_unjudged``
        (TREC data) gives negative grades gain 0.

        Example:
            >>> from torch_rankeval.conventions import PRESETS
            >>> c = Measure("precision", 5, (("rel", 2),)).convention(PRESETS["trec_eval"])
            >>> c.relevance_threshold, c.ties
            (2, 'first')
        """
        base = base.for_measure(self.key)  # a preset's settings for this measure (torchmetrics: nDCG ties)
        overrides: dict[str, Any] = {}
        rel = self.param("rel")
        if rel is not None:
            overrides["relevance_threshold"] = rel
        gain = base.gain
        if self.param("dcg") is not None:
            gain = "exp2" if self.param("dcg") == "exp-log2" else "linear"
        if self.param("gains") is not None:
            gain = self.param("gains")
        if negative_unjudged:
            gain = UnjudgedZeroGain(gain)
        if gain is not base.gain:
            overrides["gain"] = gain
        return resolve_convention(base, **overrides) if overrides else base

    def kernel_params(self) -> dict[str, Any]:
        """The parameters the kernel takes as keyword arguments (those that set no convention)."""
        family = self.family
        return {n: v for n, v in self.params if family.param(n).convention is None}  # type: ignore[union-attr]


_FIRST_TREC: dict[str, int] = {}
for _i, _t in enumerate(TREC_NAMES):
    _FIRST_TREC.setdefault(_t.family, _i)


def literal_params(text: str, where: str) -> dict[str, Any]:
    """``"rel=2, gains={0:0}"`` -> ``{"rel": 2, "gains": {0: 0}}`` (Python literals only).

    Example:
        >>> literal_params("rel=2, dcg='exp-log2'", "x")
        {'rel': 2, 'dcg': 'exp-log2'}
    """
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except SyntaxError:
        raise ValueError(f"measure {where!r}: parameters must read like Name(key=value, ...)@k") from None
    if not isinstance(call, ast.Call) or call.args or any(kw.arg is None for kw in call.keywords):
        raise ValueError(f"measure {where!r}: parameters must be keyword arguments, e.g. P(rel=2)@5")
    out = {}
    for kw in call.keywords:
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:
            raise ValueError(f"measure {where!r}: parameter {kw.arg} must be a literal value") from None
    return out
