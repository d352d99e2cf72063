"""Conventions: gains, rank discounts, tie and empty-query policies, and named presets.

Every ranking metric in this library is one kernel parameterised by these choices. They are plain
data (no tensors), so a metric can be configured once and its tables built on any device.

A *preset* reproduces a peer library exactly (see the conventions table in the README)::

    >>> from torch_rankeval.conventions import PRESETS, resolve_convention
    >>> sorted(PRESETS)
    ['ir_measures', 'lightgbm', 'ranx', 'sklearn', 'torchmetrics', 'torchmetrics_1.7', 'trec_eval']
    >>> resolve_convention("trec_eval").gain
    'linear'
    >>> resolve_convention("trec_eval", gain="exp2").gain   # explicit arguments win over the preset
    'exp2'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Iterator, Mapping, Union

import torch
from torch import Tensor

from torch_rankeval._choices import GAINS, TIES  # torch-free, so the command line's --help can list them

__all__ = [
    "Convention",
    "DEFAULT",
    "PRESETS",
    "presets",
    "resolve_convention",
    "set_measure_rules",
    "GainMap",
    "gain_fn",
    "gain_table",
    "mapped_gain",
    "discount_table",
    "TIES",
    "TORCH_TIES",
    "EMPTY_TARGET_ACTIONS",
    "ALL_SKIPPED",
    "AP_DENOMINATORS",
    "IDEALS",
    "REDUCTIONS",
]

GainSpec = Union[str, Mapping[float, float], Callable[[Tensor], Tensor]]
DiscountSpec = Union[Callable[[Tensor], Tensor], None]

EMPTY_TARGET_ACTIONS = ("neg", "pos", "skip", "error")
#: tie policies that reproduce torchmetrics' ranking: the torch call it makes, on each list's own
#: float32 scores (dense lists only: the top-k view and the command line take :data:`TIES`)
TORCH_TIES = ("torch_topk", "torch_argsort")
ALL_SKIPPED = ("nan", "zero")
AP_DENOMINATORS = ("all_relevant", "retrieved_relevant", "min_k_relevant", "k")
#: nDCG's ideal: the query's achievable ranking, or ``k`` documents of its highest gain (RecTools' default)
IDEALS = ("achievable", "k_relevant")
REDUCTIONS = ("mean", "sum", "none")


class GainMap(Mapping[float, float]):
    """A read-only ``{grade: gain}`` mapping that compares and hashes by value (so conventions that
    hold one can key a dict and pickle). :class:`Convention` stores every gain mapping as one.

    Example:
        >>> GainMap({2: 3, 1: 1}) == {1.0: 1.0, 2.0: 3.0}, hash(GainMap({1: 1})) == hash(GainMap({1.0: 1.0}))
        (True, True)
    """

    __slots__ = ("_items",)

    def __init__(self, mapping: Mapping[float, float]) -> None:
        self._items = tuple(sorted((float(k), float(v)) for k, v in mapping.items()))

    def __getitem__(self, key: float) -> float:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[float]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GainMap):
            return self._items == other._items
        return isinstance(other, Mapping) and dict(self._items) == {float(k): float(v) for k, v in other.items()}

    def __repr__(self) -> str:
        return f"GainMap({dict(self._items)!r})"

    def __reduce__(self) -> tuple[type[GainMap], tuple[dict[float, float]]]:
        return (GainMap, (dict(self._items),))


@dataclass(frozen=True)
class Convention:
    """One complete set of metric conventions.

    Attributes:
        gain: ``"exp2"`` (``2**rel - 1``), ``"linear"`` (``rel``), a mapping ``{grade: gain}`` (grades
            not in the mapping keep their own value as gain, as in trec_eval), or a callable applied
            elementwise to the float grades.
        log_base: base ``b`` of the rank discount ``1 / log_b(rank + 1)``.
        discount: a callable of the float 1-based rank tensor that replaces the log discount.
        ties: ``"average"`` (expected value over all orders of tied scores), ``"first"`` (input
            order), ``"pessimistic"`` (tied documents in increasing grade), ``"optimistic"``;
            ``"torch_topk"`` / ``"torch_argsort"`` rank each list as torchmetrics does, by
            ``torch.topk(min(k, n), sorted=True)`` / ``torch.argsort(descending=True)`` on its own
            ``n`` float32 scores, on their device (whatever order those give tied scores). They
            read each list's length on the host (one call per distinct length), so they do not
            run under ``torch.compile``, and never take the top-k view. AUROC under ``"torch_topk"``
            is torchmetrics' ``retrieval_auroc``: ``torch.topk``'s pick of ``k`` documents, tied
            scores among them counting half a pair.
        torch_topk_k: the ``k`` of ``torch.topk`` under ``ties="torch_topk"`` (``None``: the list's
            length). torch orders tied scores differently for different ``k``, so the measure plan
            sets it to each measure's cutoff (one ranking per cutoff); it means nothing otherwise.
        relevance_threshold: binary metrics count a document as relevant when ``target >=
            threshold``; ``None`` means ``>= 1`` for integer grades and ``> 0`` for float/bool.
        empty_target_action: what a query without relevant documents scores: ``"neg"`` 0,
            ``"pos"`` 1, ``"skip"`` left out of the mean, ``"error"`` raises.
        all_skipped: the mean when ``empty_target_action="skip"`` left out every query: ``"nan"``
            (default, with a warning: a mean over nothing is undefined) or ``"zero"`` (0.0, as
            torchmetrics' retrieval classes return).
        denominator: average precision's denominator (``"all_relevant"``: trec_eval,
            ``"retrieved_relevant"``: torchmetrics, ``"min_k_relevant"``: ``min(k, R)``, ``"k"``: the
            cutoff, as if all ``k`` ranks could hold a relevant document, RecTools' ``divide_by_k``).
        graded: average precision weights each rank by its gain (graded AP) instead of 0/1.
        adaptive_k: precision@k divides by ``min(k, list length)`` instead of ``k``.
        min_k_relevant: precision@k divides by ``min(k, R)`` (``R``: the query's relevant documents;
            RecTools' ``Precision(r_precision=True)``), with ``adaptive_k`` by ``min(k, list length, R)``.
        ideal_ranking: nDCG's ideal DCG: ``"achievable"`` (the query's judged gains in decreasing order) or
            ``"k_relevant"`` (``k`` documents of the query's highest gain, however few it has: RecTools'
            ``NDCG(divide_by_achievable=False)``; the list's length for no cutoff).
        nonpositive_not_relevant: a document scored ``<= 0`` is never relevant (nor gains
            anything), though it keeps its rank and still counts among the query's relevant
            documents (the recall denominator, the "no relevant document" test). torchmetrics >= 1.8
            does this in AP, RR, precision and recall. Default False: scores of any sign count.
        by_measure: settings of single measures that differ from the rest, as
            ``{measure key: {field: value}}`` (stored as sorted tuples, so conventions stay
            hashable); a preset uses it where its peer treats one metric differently (torchmetrics
            averages ties in nDCG only). :meth:`for_measure` applies them; arguments given
            explicitly to :func:`resolve_convention` win over them. ``empty_target_action`` cannot
            differ per measure (the Metric classes apply one policy).

    Example:
        >>> Convention().gain, Convention().ties
        ('exp2', 'average')
        >>> c = Convention(ties="first", by_measure={"ndcg": {"ties": "average"}})
        >>> c.for_measure("ndcg").ties, c.for_measure("map").ties
        ('average', 'first')
    """

    gain: GainSpec = "exp2"
    log_base: float = 2.0
    discount: DiscountSpec = None
    ties: str = "average"
    relevance_threshold: float | None = None
    empty_target_action: str = "neg"
    denominator: str = "all_relevant"
    graded: bool = False
    adaptive_k: bool = False
    nonpositive_not_relevant: bool = False
    # fields added after checkpoints were written: in a metric's fingerprint only when set (metrics/_hooks.py)
    min_k_relevant: bool = field(default=False, metadata={"fingerprint": "when_set"})
    ideal_ranking: str = field(default="achievable", metadata={"fingerprint": "when_set"})
    by_measure: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    # set per measure by the plan under the torchmetrics presets (never a metric's own setting): left out of
    # its fingerprint, as checkpoints of metrics that predate the field must still load (metrics/_hooks.py)
    torch_topk_k: int | None = field(default=None, metadata={"fingerprint": "omit"})
    # what compute reports, not what a metric's states accumulate: left out of its fingerprint (metrics/_hooks.py)
    all_skipped: str = field(default="nan", metadata={"fingerprint": "omit"})

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_measure", _by_measure(self.by_measure))
        if isinstance(self.gain, Mapping) and not isinstance(self.gain, GainMap):
            object.__setattr__(self, "gain", GainMap(self.gain))  # hashable, compared by value
        if isinstance(self.gain, str) and self.gain not in GAINS:
            raise ValueError(f"gain={self.gain!r} is not known: use one of {GAINS}, a mapping or a callable")
        if not isinstance(self.gain, (str, Mapping)) and not callable(self.gain):
            raise TypeError(
                f"gain must be a name, a mapping {{grade: gain}} or a callable, got {type(self.gain).__name__}"
            )
        if isinstance(self.gain, Mapping) and not self.gain:
            raise ValueError("gain mapping is empty: give at least one {grade: gain} pair")
        if isinstance(self.gain, Mapping) and not all(math.isfinite(x) for pair in self.gain.items() for x in pair):
            raise ValueError(f"gain mapping must map finite grades to finite gains, got {dict(self.gain.items())!r}")
        if (
            isinstance(self.log_base, bool)
            or not isinstance(self.log_base, (int, float))
            or not (math.isfinite(self.log_base) and self.log_base > 1)
        ):
            raise ValueError(f"log_base must be a finite number > 1, got {self.log_base!r}")
        if self.discount is not None and not callable(self.discount):
            raise TypeError("discount must be a callable of the 1-based rank tensor, or None")
        _check_choice("ties", self.ties, TIES + TORCH_TIES)
        k = self.torch_topk_k
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ValueError(f"torch_topk_k must be a positive int (torch.topk's k) or None, got {k!r}")
        _check_choice("empty_target_action", self.empty_target_action, EMPTY_TARGET_ACTIONS)
        _check_choice("all_skipped", self.all_skipped, ALL_SKIPPED)
        _check_choice("denominator", self.denominator, AP_DENOMINATORS)
        _check_choice("ideal_ranking", self.ideal_ranking, IDEALS)
        t = self.relevance_threshold
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0):
            raise ValueError(
                f"relevance_threshold must be a finite number > 0 (a document is relevant when "
                f"target >= threshold), got {t!r}"
            )
        for flag in ("graded", "adaptive_k", "nonpositive_not_relevant", "min_k_relevant"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{flag} must be a bool, got {type(getattr(self, flag)).__name__}")
        for key, _ in self.by_measure:
            self.for_measure(key)  # the values are checked like any convention's

    def for_measure(self, key: str) -> Convention:
        """The convention a measure (a registry key such as ``"ndcg"``) is computed under: this one
        with its ``by_measure`` settings, and no ``by_measure`` left (measures computed under equal
        conventions share one ranking)."""
        if not self.by_measure:
            return self
        return replace(self, by_measure=(), **dict(dict(self.by_measure).get(key, ())))


def _by_measure(value: object) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    """``{key: {field: value}}`` (or its tuple form) as sorted, hashable tuples, checked."""
    items = value.items() if isinstance(value, Mapping) else value
    if not isinstance(items, (tuple, list)) and not isinstance(value, Mapping):
        raise TypeError(f"by_measure must be a mapping {{measure key: {{field: value}}}}, got {type(value).__name__}")
    out = []
    for key, fields_ in items:
        pairs = fields_.items() if isinstance(fields_, Mapping) else fields_
        pairs = tuple(sorted((str(f), v) for f, v in pairs))
        for f, _ in pairs:
            if f not in _FIELDS or f in ("by_measure", "empty_target_action", "all_skipped"):
                raise ValueError(
                    f"by_measure[{key!r}] cannot set {f!r}: give convention fields other than empty_target_action and by_measure"
                )
        if pairs:
            out.append((str(key), pairs))
    return tuple(sorted(out))


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name}={value!r} is not valid: use one of {', '.join(map(repr, choices))}")


DEFAULT = Convention()
_FIELDS = tuple(f.name for f in fields(Convention))

# what the two torchmetrics presets share
_TORCHMETRICS: dict[str, Any] = dict(
    gain="linear", ties="first", denominator="retrieved_relevant", empty_target_action="neg", all_skipped="zero"
)

_PRESETS: dict[str, Convention] = {
    # trec_eval: linear gain, IDCG and AP denominators from all judged documents (pass
    # ideal_target / n_relevant), ties by score then docno descending (order tied documents by
    # docno first, then ties="first"), P@k divides by k, rel >= 1 is relevant.
    "trec_eval": Convention(gain="linear", ties="first", denominator="all_relevant", empty_target_action="neg"),
    # torchmetrics.retrieval >= 1.8 (functional and classes), quirks included: linear gain; nDCG
    # (and DCG) average tied scores, every other metric ranks tied scores as torchmetrics' own
    # torch call orders them (torch.topk or torch.argsort on the list's float32 scores: ties
    # "torch_topk" / "torch_argsort"; other measures input order); AP, RR, precision and recall treat a
    # document scored <= 0 as not relevant, though the query's relevant count (recall's
    # denominator, the empty test) still includes it; AP divides by the relevant documents found
    # in the top k; P@k divides by k unless adaptive_k; with empty_target_action="skip" a mean over
    # no query is 0.0.
    # Those per-measure settings are facts of the measures: each registry row holds its own
    # (measures/registry.py, ``Family.preset_rules``), and the registry adds them here (set_measure_rules).
    "torchmetrics": Convention(**_TORCHMETRICS),
    # torchmetrics 1.6 and 1.7: the same, but documents scored <= 0 count as relevant everywhere.
    "torchmetrics_1.7": Convention(**_TORCHMETRICS),
    # sklearn.metrics.ndcg_score: linear gain, ties averaged.
    "sklearn": Convention(gain="linear", ties="average", empty_target_action="neg"),
    # LightGBM's ndcg@k and map@k (rank_metric.hpp, map_metric.hpp): 2^rel - 1 gain, a stable sort
    # (tied scores in input order), AP@k divided by min(k, relevant), and a query without relevant
    # documents scores 1 in both (its quirk). LightGBM has no other ranking metric: the rest follow
    # the same conventions, P@k dividing by min(k, n) as LightGBM clamps k to the list.
    "lightgbm": Convention(
        gain="exp2", ties="first", denominator="min_k_relevant", empty_target_action="pos", adaptive_k=True
    ),
    # ranx and ir_measures: trec_eval's conventions on tensors (linear gain, ties in input order, AP
    # divided by every relevant document). What they do otherwise is on TREC data, where
    # trec.evaluate(convention="ranx" / "ir_measures") reproduces it: their order of tied scores
    # (ranx: numba's quicksort; ir_measures' RR@k and Judged@k: docno ascending), ranx's bpref and
    # hits@k, their query sets (torch_rankeval.trec.peers.TREC_PRESETS). On tensors, give each list in
    # the peer's order: ties="first" keeps it.
    "ranx": Convention(gain="linear", ties="first", denominator="all_relevant", empty_target_action="neg"),
    "ir_measures": Convention(gain="linear", ties="first", denominator="all_relevant", empty_target_action="neg"),
}

#: The presets whose settings differ per measure, until the measure registry has added those settings.
_AWAITING_MEASURE_RULES = {"torchmetrics", "torchmetrics_1.7"}


class _PresetTable(Mapping[str, Convention]):
    """:data:`PRESETS`: the named conventions. A preset whose settings differ per measure (torchmetrics
    ranks each metric with its own torch call) is complete once the measure registry, the one place
    that knows the measures, has added its rows' settings (:func:`set_measure_rules`); every metric,
    function and command imports it first. Asked for before that, such a preset raises rather than
    give numbers of another convention."""

    def __getitem__(self, name: str) -> Convention:
        if name in _AWAITING_MEASURE_RULES:
            raise RuntimeError(
                f"the {name!r} preset's per-measure settings come from the measure registry: import "
                "torch_rankeval.measures (or any metric or function) before using it"
            )
        return _PRESETS[name]

    def __contains__(self, name: object) -> bool:
        return name in _PRESETS

    def __iter__(self) -> Iterator[str]:
        return iter(_PRESETS)

    def __len__(self) -> int:
        return len(_PRESETS)

    def __repr__(self) -> str:
        return f"PRESETS({sorted(_PRESETS)})"


PRESETS: Mapping[str, Convention] = _PresetTable()


def set_measure_rules(preset: str, by_measure: Mapping[str, Mapping[str, Any]]) -> None:
    """Give ``preset`` its per-measure settings ``{measure key: {field: value}}`` (the measure
    registry calls it with its rows' ``preset_rules``; see :attr:`Convention.by_measure`).

    Example:
        >>> set_measure_rules("sklearn", {})   # sklearn's one convention holds for every measure
        >>> PRESETS["sklearn"].by_measure
        ()
    """
    _PRESETS[preset] = replace(_PRESETS[preset], by_measure=by_measure)  # type: ignore[arg-type]
    _AWAITING_MEASURE_RULES.discard(preset)


class _Presets:
    """Attribute access to :data:`PRESETS`: ``presets.trec_eval`` is a :class:`Convention`.

    Example:
        >>> presets.sklearn.ties
        'average'
    """

    def __getattr__(self, name: str) -> Convention:
        try:
            return PRESETS[name]
        except KeyError:
            raise AttributeError(f"no preset {name!r}; known presets: {sorted(PRESETS)}") from None

    def __dir__(self) -> list[str]:
        return sorted(PRESETS)


presets: _Presets = _Presets()


def resolve_convention(convention: str | Convention | None = None, **overrides: object) -> Convention:
    """Build the :class:`Convention` a call uses: a preset (or the defaults) with explicit overrides.

    Arguments whose value is ``None`` are left to the preset, so functions can default every
    convention argument to ``None``.

    Example:
        >>> resolve_convention(None, ties="first").ties
        'first'
        >>> resolve_convention("sklearn").gain
        'linear'
    """
    if convention is None:
        base = DEFAULT
    elif isinstance(convention, Convention):
        base = convention
    elif isinstance(convention, str):
        if convention not in PRESETS:
            raise ValueError(f"convention={convention!r} is not a known preset: use one of {sorted(PRESETS)}")
        base = PRESETS[convention]
    else:
        raise TypeError(f"convention must be a preset name or a Convention, got {type(convention).__name__}")
    unknown = [name for name in overrides if name not in _FIELDS]
    if unknown:
        raise TypeError(f"unknown convention argument(s): {sorted(unknown)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    if not given:
        return base
    values = {name: given.get(name, getattr(base, name)) for name in _FIELDS}
    if "by_measure" not in given:  # an explicit argument wins over the preset's per-measure settings
        values["by_measure"] = tuple(
            (key, tuple((f, v) for f, v in pairs if f not in given)) for key, pairs in base.by_measure
        )
    return Convention(**values)


def gain_fn(gain: GainSpec) -> Callable[[Tensor], Tensor]:
    """The elementwise gain function of a gain spec, applied to float grades.

    Example:
        >>> gain_fn("exp2")(torch.tensor([0.0, 1.0, 3.0]))
        tensor([0., 1., 7.])
        >>> gain_fn({1: 1.0, 2: 3.0})(torch.tensor([0.0, 1.0, 2.0, 4.0]))   # 0 and 4 are not mapped
        tensor([0., 1., 3., 4.])
    """
    if gain == "exp2":
        return lambda t: torch.exp2(t) - 1
    if gain == "linear":
        return lambda t: t
    if isinstance(gain, Mapping):
        keys_list, vals_list = gain_table(gain)
        return lambda t: mapped_gain(
            t,
            torch.tensor(keys_list, dtype=t.dtype, device=t.device),
            torch.tensor(vals_list, dtype=t.dtype, device=t.device),
        )
    if callable(gain):
        return gain
    raise TypeError(f"gain must be 'exp2', 'linear', a mapping or a callable, got {gain!r}")


def gain_table(gain: Mapping[float, float]) -> tuple[list[float], list[float]]:
    """The sorted grades and gains of a ``{grade: gain}`` mapping.

    Example:
        >>> gain_table({2: 3.0, 1: 1.0})
        ([1.0, 2.0], [1.0, 3.0])
    """
    items = sorted((float(k), float(v)) for k, v in gain.items())
    return [k for k, _ in items], [v for _, v in items]


def mapped_gain(t: Tensor, keys: Tensor, values: Tensor) -> Tensor:
    """Look grades up in a sorted ``keys -> values`` table; grades not in it keep their own value.

    Example:
        >>> mapped_gain(torch.tensor([0.0, 2.0, 5.0]), torch.tensor([0.0, 2.0]), torch.tensor([0.5, 9.0]))
        tensor([0.5000, 9.0000, 5.0000])
    """
    keys, values = keys.to(t.dtype), values.to(t.dtype)
    idx = torch.searchsorted(keys, t.contiguous()).clamp(max=keys.shape[0] - 1)
    return torch.where(keys[idx] == t, values[idx], t)


def discount_table(length: int, convention: Convention, *, dtype: torch.dtype, device: torch.device | str) -> Tensor:
    """Discounts of ranks ``1..length``: ``1 / log_b(rank + 1)`` or the convention's callable.

    Example:
        >>> discount_table(3, DEFAULT, dtype=torch.float64, device="cpu")
        tensor([1.0000, 0.6309, 0.5000], dtype=torch.float64)
    """
    ranks = torch.arange(1, length + 1, dtype=dtype, device=device)
    if convention.discount is not None:
        table = convention.discount(ranks)
        if not isinstance(table, Tensor) or table.shape != ranks.shape:
            raise ValueError("discount callable must return a tensor of the same shape as its rank argument")
        # A user callable is checked where it is built (a host sync, skipped inside torch.compile).
        if not torch.compiler.is_compiling() and not bool((torch.isfinite(table) & (table >= 0)).all()):
            raise ValueError("discount callable must return finite, non-negative discounts for ranks 1, 2, ...")
        return table.to(dtype)
    return math.log(convention.log_base) / torch.log1p(ranks)
