"""Measure parameters: :class:`Param`, a declared, typed parameter of a measure family, and the
parameters that several families of the registry (:mod:`.registry`) share (``REL``: the relevance
threshold of ``P(rel=2)@5``; ``GAINS``: a grade-to-gain map; ...).

Example:
    >>> REL.name, REL.convention
    ('rel', 'relevance_threshold')
    >>> GAINS.render(GAINS.coerce({0: 0, 1: 1, 2: 3}, "nDCG"))
    '{0:0,1:1,2:3}'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from torch_rankeval.conventions import AP_DENOMINATORS, IDEALS, GainMap
from torch_rankeval.kernels.interpolated import RECALL_LEVELS, ROUNDINGS
from torch_rankeval.kernels.set_measures import UTILITY_COEFFICIENTS

__all__ = [
    "Param",
    "number_text",
    "REL",
    "GAINS",
    "DCG",
    "ROUNDING",
    "RECALL",
    "MULTIPLE",
    "LEVELS",
    "COEFFICIENTS",
    "BETA",
    "LENGTH",
    "PERSISTENCE",
    "RBP_REL",
    "RBP_GAINS",
    "TAIL",
    "MAX_GRADE",
    "ADAPTIVE_K",
    "MAX_FPR",
    "ALPHA",
    "NRBP_BETA",
    "ALPHA_NORM",
    "DENOMINATOR",
    "IDEAL",
    "MIN_K_RELEVANT",
    "CATALOG_SIZE",
    "CWL_T",
    "MIN_REL",
    "MAX_REL",
    "CWL_DEPTH",
    "SDCG_DCG",
    "RBP_DEPTH",
    "COMPAT_P",
    "COMPAT_NORMALIZE",
    "BPREF_TREC",
]


#: The numeric kinds: what the error says a value must be, and the test of an int or float value.
_NUMERIC: dict[str, tuple[str, Callable[[float], bool]]] = {
    "positive": ("a positive number", lambda v: math.isfinite(v) and v > 0),
    "nonnegative": ("a number >= 0", lambda v: math.isfinite(v) and v >= 0),
    "number": ("a finite number", math.isfinite),
    "count": ("a positive integer", lambda v: math.isfinite(v) and float(v).is_integer() and v >= 1),
    "probability": ("a number in (0, 1)", lambda v: 0 < v < 1),
    "unit": ("a number in [0, 1]", lambda v: 0 <= v <= 1),
    "fraction": ("a number in (0, 1]", lambda v: 0 < v <= 1),
}


@dataclass(frozen=True)
class Param:
    """A declared, typed parameter of a measure family.

    Attributes:
        name: the name in ir_measures' syntax (``P(rel=2)@5``).
        kind: ``"positive"`` (a number > 0), ``"nonnegative"`` (a number >= 0), ``"number"`` (any
            finite number), ``"count"`` (an integer >= 1), ``"numbers"`` (a sequence of finite
            numbers, ``size`` of them when set), ``"gains"`` (a mapping ``{grade: gain}``),
            ``"choice"`` (one of ``choices``), ``"probability"`` (a number in (0, 1)),
            ``"fraction"`` (a number in (0, 1]), ``"unit"`` (a number in [0, 1]).
        doc: what it means.
        default: the value when not given (``None``: the API's convention decides). A given value
            equal to the default is dropped, so ``set_F`` and ``set_F.1`` are one measure.
        choices: the accepted values of a ``"choice"``.
        convention: the :class:`~torch_rankeval.conventions.Convention` field the parameter sets;
            ``None``: the value is passed to the kernel as a keyword argument.
        size: the required length of a ``"numbers"`` value.
        trec: whether trec_eval's printed name shows the parameter (``False`` for ``rounding``,
            which tells trec_eval versions apart, not measures).
        required: whether a measure's name must give it (there is no default: the catalogue size of
            ``mcc(catalog_size=1000)@10``); a name without it is a ``ValueError`` that shows ``example``.
        example: a value for the error message and the docs of a required parameter.

    Example:
        >>> Param("rel", "positive", "minimum relevant grade").coerce(2, "P(rel=2)@5")
        2
        >>> Param("coefficients", "numbers", "", size=4).coerce([2, -1, 0, 0.5], "utility")
        (2.0, -1.0, 0.0, 0.5)
    """

    name: str
    kind: str
    doc: str
    default: Any = None
    choices: tuple[Any, ...] = ()
    convention: str | None = None
    size: int | None = None
    trec: bool = True
    required: bool = False
    example: Any = None

    def coerce(self, value: Any, where: str) -> Any:
        """Check ``value`` and return it in a hashable, canonical form; errors name ``where``."""
        if self.kind in _NUMERIC:
            rule, test = _NUMERIC[self.kind]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not test(value):
                raise ValueError(f"measure {where!r}: {self.name} must be {rule} ({self.doc}), got {value!r}")
            # the shares are floats; a number beyond int64 too, which tensors compare with
            if self.kind in ("probability", "unit", "fraction") or (self.kind != "count" and abs(value) >= 2**63):
                return float(value)
            return int(value) if float(value).is_integer() else float(value)
        if self.kind == "numbers":
            if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
                raise ValueError(
                    f"measure {where!r}: {self.name} must be a sequence of numbers ({self.doc}), got {value!r}"
                )
            values = tuple(value)
            bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)]
            if bad or not values or (self.size is not None and len(values) != self.size):
                size = f"{self.size} " if self.size is not None else ""
                raise ValueError(
                    f"measure {where!r}: {self.name} must be {size}finite numbers ({self.doc}), got {value!r}"
                )
            return tuple(float(v) for v in values)
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
                raise ValueError(
                    f"measure {where!r}: gains must map integer grades to numbers, got {value!r}"
                ) from None
            if not all(math.isfinite(v) for v in pairs.values()):
                raise ValueError(f"measure {where!r}: gains must be finite numbers, got {value!r}")
            return GainMap(pairs)
        raise AssertionError(f"unknown parameter kind {self.kind!r}")  # pragma: no cover - table error

    def render(self, value: Any) -> str:
        """The value in ir_measures' syntax.

        Example:
            >>> Param("gains", "gains", "").render(GainMap({0: 0, 1: 1, 2: 3}))
            '{0:0,1:1,2:3}'
            >>> Param("levels", "numbers", "").render((0.25, 0.5))
            '(0.25,0.5)'
        """
        if self.kind == "gains":
            return "{" + ",".join(f"{number_text(g)}:{number_text(v)}" for g, v in value.items()) + "}"
        if self.kind == "numbers":
            return "(" + ",".join(number_text(v) for v in value) + ("," if len(value) == 1 else "") + ")"
        if isinstance(value, (str, bool)):
            return repr(value)
        return number_text(value)


def number_text(x: float) -> str:
    """A number as written: integers without a decimal point.

    Example:
        >>> number_text(2.0), number_text(0.25)
        ('2', '0.25')
    """
    return str(int(x)) if float(x).is_integer() else repr(float(x))


REL = Param("rel", "positive", "the minimum grade of a relevant document", convention="relevance_threshold")
GAINS = Param("gains", "gains", "gain of each grade; grades not listed keep their grade as gain", convention="gain")
DCG = Param(
    "dcg", "choice", "'log2': linear gain, 'exp-log2': 2**grade - 1", choices=("log2", "exp-log2"), convention="gain"
)
ROUNDING = Param(
    "rounding",
    "choice",
    "how a recall level becomes a number of relevant documents: 'lround' (trec_eval 10.0), "
    "'v9' (trec_eval 9.x and pytrec_eval: level * R + 0.9, truncated)",
    default="lround",
    choices=ROUNDINGS,
    trec=False,
)
RECALL = Param("recall", "nonnegative", "the recall level: a share of the relevant documents")
MULTIPLE = Param("multiple", "nonnegative", "the rank as a multiple of R, the number of relevant documents")
LEVELS = Param("levels", "numbers", "the recall levels averaged", default=RECALL_LEVELS)
COEFFICIENTS = Param(
    "coefficients",
    "numbers",
    "(a, b, c, d): a per relevant retrieved, b per non-relevant retrieved, c per relevant "
    "not retrieved, d per non-relevant not retrieved",
    default=UTILITY_COEFFICIENTS,
    size=4,
)
BETA = Param("beta", "nonnegative", "the weight of recall against precision", default=1)
LENGTH = Param("length", "count", "the number of ranks shown", default=10)
PERSISTENCE = Param("p", "probability", "persistence: the chance to read on after each document", default=0.9)
RBP_REL = Param("rel", "positive", "binary utility: 1 for grades >= rel (default: graded, as trec_eval)")
RBP_GAINS = Param("gains", "gains", "utility of each grade before trec_eval's rescaling to [0, 1]")
TAIL = Param(
    "tail",
    "choice",
    "'always': add p**n, the weight past the ranking (Moffat & Zobel); 'if_unjudged': only when "
    "the ranking holds an unjudged document (trec_eval 10.0)",
    default="always",
    choices=("always", "if_unjudged"),
)
MAX_GRADE = Param("max_grade", "count", "the top grade: stopping probability (2**grade - 1) / 2**max_grade", default=4)
ADAPTIVE_K = Param(
    "adaptive_k",
    "choice",
    "divide by min(k, retrieved) instead of k (ir_measures' Judged; default: the convention's adaptive_k)",
    choices=(True, False),
)
MAX_FPR = Param("max_fpr", "fraction", "standardised partial AUC over false-positive rates [0, max_fpr]")
ALPHA = Param(
    "alpha",
    "unit",
    "redundancy intolerance: a subtopic's gain shrinks by (1 - alpha) for each document above that covers it",
    default=0.5,
)
NRBP_BETA = Param("beta", "unit", "patience: the chance to read on after each document (NRBP)", default=0.5)
ALPHA_NORM = Param(
    "norm",
    "choice",
    "'ideal_ideal': ndeval's alpha-DCG, divided by A sum (1 - alpha)^(r-1) / log2(r + 1) (each rank covering every "
    "subtopic once more) for k >= 2; 'none': the plain sum (TF-Ranking's AlphaDCG)",
    default="ideal_ideal",
    choices=("ideal_ideal", "none"),
)
# convention options a measure's name can set (so trec.evaluate and the command line reach them by name)
DENOMINATOR = Param(
    "denominator",
    "choice",
    "AP's denominator: 'all_relevant' (trec_eval), 'retrieved_relevant' (torchmetrics), 'min_k_relevant' "
    "(min(k, R)), 'k' (RecTools' divide_by_k); default: the convention's",
    choices=AP_DENOMINATORS,
    convention="denominator",
)
IDEAL = Param(
    "ideal_ranking",
    "choice",
    "nDCG's ideal: 'achievable' (the judged gains in decreasing order) or 'k_relevant' (k documents of the "
    "highest gain: RecTools' divide_by_achievable=False); default: the convention's",
    choices=IDEALS,
    convention="ideal_ranking",
)
MIN_K_RELEVANT = Param(
    "min_k_relevant",
    "choice",
    "divide by min(k, relevant documents) instead of k (RecTools' r_precision=True); default: the convention's",
    choices=(True, False),
    convention="min_k_relevant",
)
CATALOG_SIZE = Param(
    "catalog_size",
    "count",
    "the number of items in the catalogue the lists are drawn from",
    required=True,
    example=1000,
)

# cwl_eval's C/W/L measures (kernels/cwl.py), in ir_measures' names and defaults
CWL_T = Param("T", "positive", "the total gain the user wants, gains being in [0, 1]", default=1)
MIN_REL = Param("min_rel", "number", "the grade of gain 0 and lower grades too", default=0)
MAX_REL = Param(
    "max_rel",
    "number",
    "the grade of gain 1 and higher grades too; ir_measures requires it",
    default=1,
)
CWL_DEPTH = Param("depth", "count", "cwl_eval's max_n: the ranks read and normalised over", default=1000)
SDCG_DCG = Param("dcg", "choice", "cwl_eval's discount: 'log2' only", default="log2", choices=("log2",))
RBP_DEPTH = Param(
    "depth",
    "count",
    "cwl_eval's RBP: the first depth ranks, weights normalised over them (ir_measures' RBP(rel=...): 1000); "
    "default: the whole ranking, as trec_eval",
)
COMPAT_P = Param("p", "unit", "RBO's persistence: the weight of depth d is p**(d - 1)", default=0.95)
COMPAT_NORMALIZE = Param(
    "normalize",
    "choice",
    "divide by the ideal ranking's own RBO (False: RBO against the ideal ranking as it is)",
    default=True,
    choices=(True, False),
)
BPREF_TREC = Param(
    "trec",
    "choice",
    "True: trec_eval's 1 - min(n, R) / min(N, R) per retrieved relevant document; False: 1 - min(n, R) / R "
    "(TF-Ranking's use_trec_version=False)",
    default=True,
    choices=(True, False),
)
