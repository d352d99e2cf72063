"""The measure-name grammar: every spelling parses everywhere.

- trec_eval: ``name`` or ``name.PARAMS`` in the syntax of each name (:data:`~.registry.TREC_SYNTAXES`,
  one parser each in ``_TREC_PARSERS``): ``P.5,10`` cutoffs, sorted and deduplicated, fractions
  truncated as trec_eval does; ``iprec_at_recall.0.1,0.25`` levels, one measure each;
  ``utility.1,-1,0,0`` values; ``ndcg.0=0,1=1,2=3`` gains; ``rbp.p=0.8`` named values. trec_eval's
  printed names read too (``P_5``, ``ndcg_cut_10``, ``iprec_at_recall_0.10``, ``set_F_0.5``). Output
  names are trec_eval's printed names.
- ir_measures: ``Name(param=value, ...)@k`` (``nDCG@10``, ``P(rel=2)@5``, ``AP``, ``RR@10``).
- the library's names, case-insensitive, with the same ``(params)`` and ``@k``: ``ndcg@10``,
  ``mrr@10``, ``map``, ``hit_rate@5``.
- nicknames (``official``, ``all_trec``, ``set``) expand to several measures (:func:`parse_measures`).

A name without a cutoff takes the API's default cutoffs when the API has some (``k`` of
:class:`~torch_rankeval.RankingMetrics` and the functional API), else its own: trec_eval's
default cutoffs for ``P``, ``recall``, ``ndcg_cut``, ``map_cut`` and ``success``, the whole
ranking for the others. Output names keep the user's spelling (``"mrr@10"`` stays ``"mrr@10"``,
``"RR@10"`` stays ``"RR@10"``); a cutoff that comes from the API's ``k`` is appended as ``@k``.

Example:
    >>> [m.label for m in parse_measures(["ndcg_cut.5,10", "nDCG@10", "mrr", "P(rel=2)@5"])]
    ['ndcg_cut_5', 'ndcg_cut_10', 'nDCG@10', 'mrr', 'P(rel=2)@5']
    >>> [m.label for m in parse_measures(["ndcg", "map"], cutoffs=[5, 10])]
    ['ndcg@5', 'ndcg@10', 'map@5', 'map@10']
    >>> parse_measure("ndcg_cut_10") == parse_measure("nDCG@10") == parse_measure("ndcg@10")
    True
"""

from __future__ import annotations

import ast
import difflib
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from torch_rankeval.measures.registry import (
    FAMILIES,
    TREC_BY_NAME,
    TREC_SYNTAXES,
    Family,
    Measure,
    TrecName,
    literal_params,
)

__all__ = ["NICKNAMES", "check_distinct", "known_names", "parse_measure", "parse_measures"]

_OFFICIAL = tuple("runid num_q num_ret num_rel num_rel_ret map gm_map Rprec bpref recip_rank iprec_at_recall P".split())
#: trec_eval's nicknames (its lists, in its order); names whose family is not registered are skipped.
NICKNAMES: dict[str, tuple[str, ...]] = {
    "official": _OFFICIAL,
    "all_trec": (
        *_OFFICIAL,
        *"relstring recall unj rbp rbp_resid infAP gm_bpref utility 11pt_avg ndcg relative_P Rprec_mult success".split(),
        *"map_cut ndcg_cut ndcg_rel Rndcg binG G set_P set_recall set_relative_P set_map set_F num_nonrel_judged_ret".split(),
    ),
    "set": tuple(
        "runid num_q num_ret num_rel num_rel_ret utility set_P set_recall set_relative_P set_map set_F".split()
    ),
}

_AT_SYNTAX = re.compile(r"^(?P<name>[A-Za-z0-9_]+)(?:\((?P<params>.*)\))?(?:@(?P<cutoff>[^@()]*))?$")
_BY_IR: dict[str, Family] = {f.ir: f for f in FAMILIES.values() if f.ir}
_BY_ALIAS: dict[str, Family] = {a.lower(): f for f in FAMILIES.values() for a in (f.key, *f.aliases)}

Cutoffs = Sequence[int | None] | None

#: ranx's and RecBole's metric names that are not already ours (case-insensitive): ``name ->
#: (family, implied parameters)``. ranx: ``r-precision`` (R-precision), ``ndcg_burges`` (nDCG with
#: the ``2**grade - 1`` gain; ranx's ``ndcg`` is the library's ``ndcg``, whose gain is the
#: convention's: linear in :func:`~torch_rankeval.trec.evaluate`, as ranx), ``f1`` (the harmonic
#: mean of P@k and R@k, ``2 h / (k + R)``); ``hit_rate``, ``precision``, ``recall``, ``mrr``,
#: ``map`` (ranx divides by every relevant document, as trec_eval), ``ndcg`` and ``bpref`` are
#: already the library's names. RecBole: ``Hit@k`` (hit rate); ``MRR``, ``NDCG`` (RecBole's data are
#: binary, where every gain agrees), ``Precision`` and ``Recall`` are the library's names.
PEER_NAMES: dict[str, tuple[str, tuple[tuple[str, Any], ...]]] = {
    name: (f.key, implied) for f in FAMILIES.values() for name, implied in f.peer_names
}  # each row's ``peer_names``

_EXPOSURE = (
    "is an exposure measure of whole-catalogue recommendation, not a per-query ranking measure: "
    "use torch_rankeval.metrics.ItemExposure (coverage@k, gini@k, entropy@k, popularity@k)"
)

#: Peers' names that mean a measure we do not have, with what to use instead.
PEER_REFUSED: dict[str, str] = {
    "hits": (
        "is ranx's count of relevant documents in the top k, which is k * P@k (not a measure here): evaluate it "
        "with trec.evaluate(..., convention='ranx') (torch-rankeval evaluate --convention ranx), or use 'P@k' "
        "and multiply by k"
    ),
    "itemcoverage": _EXPOSURE.replace("(coverage@k", "(coverage@k: RecBole's ItemCoverage"),
    "giniindex": _EXPOSURE.replace("gini@k", "gini@k: RecBole's GiniIndex"),
    "shannonentropy": (
        "is RecBole's entropy of the top-k exposure divided by the number of distinct recommended items, an "
        "exposure measure: use torch_rankeval.metrics.ItemExposure(num_items, k, entropy='recbole') (entropy@k)"
    ),
    "averagepopularity": _EXPOSURE.replace("popularity@k", "popularity@k: RecBole's AveragePopularity"),
    "tailpercentage": (
        "is RecBole's share of long-tail items in the top k, an exposure measure: use "
        "torch_rankeval.metrics.ItemExposure(num_items, k, popularity=counts, tail_ratio=...) (tail_percentage@k)"
    ),
}
_RANX_RBP = re.compile(r"^rbp\.([0-9]+)$")


# Numbers in measure names: ASCII digits only, as C's strtod reads them (no '_' separators, no
# other scripts' digits, which Python's int() and float() would accept).
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NONFINITE = re.compile(r"[+-]?(?:inf|infinity|nan)", re.IGNORECASE)
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _number(part: str) -> float | None:
    """``part`` (blanks around it ignored) as a float when it is a number written in ASCII digits
    (``inf`` and ``nan`` included), else None: ``1_0`` and Arabic-Indic digits are not numbers here."""
    part = part.strip()
    if _DECIMAL.fullmatch(part) or _NONFINITE.fullmatch(part):
        return float(part)
    return None


def _why_not_a_number(part: str) -> str:
    """Why ``part`` is refused: what to write instead."""
    if "_" in part:
        return "'_' separators are not read: write the digits alone"
    if any(c.isdigit() and not c.isascii() for c in part):
        return "write its digits as ASCII 0-9"
    return "it is not a number"


def _cutoff(text: str, part: str, example: str) -> int:
    """A trec_eval cutoff: an integer, or a finite number truncated as trec_eval truncates it."""
    value = _number(part)
    if value is None:
        raise ValueError(
            f"measure {text!r}: cutoff {part!r} is not a number ({_why_not_a_number(part)}); write e.g. {example}"
        )
    if math.isnan(value):
        raise ValueError(f"measure {text!r}: cutoff {part!r} is not a number; write e.g. {example}")
    if not math.isfinite(value):
        raise ValueError(f"measure {text!r}: cutoff {part!r} is not a finite number; write e.g. {example}")
    return int(part.strip()) if _INTEGER.fullmatch(part.strip()) else int(value)  # exact for long integers


def known_names() -> list[str]:
    """Every accepted base name (trec_eval, ir_measures, library aliases, nicknames), sorted."""
    names = set(TREC_BY_NAME) | set(_BY_IR) | set(_BY_ALIAS) | set(NICKNAMES) | set(PEER_NAMES)
    return sorted(names, key=lambda n: (n.lower(), n))


def _unknown(name: str, why: str = "") -> ValueError:
    base = re.split(r"[.(@]", name, maxsplit=1)[0]
    choices = known_names()
    by_lower: dict[str, list[str]] = {}
    for c in choices:
        by_lower.setdefault(c.lower(), []).append(c)
    close = [
        c for low in difflib.get_close_matches(base.lower(), list(by_lower), n=4, cutoff=0.5) for c in by_lower[low]
    ]
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    return ValueError(
        f"unknown measure {name!r}{': ' + why if why else ''}.{hint} List the {len(choices)} known names with "
        "`torch-rankeval measures` (or torch_rankeval.measures.known_names()); each takes a cutoff and parameters "
        "(trec_eval style 'ndcg_cut.10', ir_measures style 'nDCG@10', 'P(rel=2)@5', library style 'ndcg@10')"
    )


def parse_measures(names: str | Iterable[str], *, cutoffs: Cutoffs = None) -> list[Measure]:
    """Parse names (a sequence, or one string) into measures, one per output; nicknames expand.

    Args:
        names: measure names in any spelling (see the module docstring).
        cutoffs: the API's default cutoffs for names written without one: a sequence such as
            ``(5, 10)``, or ``(None,)`` for the whole list (what ``k=None`` means in the functional
            API and the Metric classes); ``None`` gives each name its own default (trec_eval's
            cutoffs for ``P``, ``recall``, ``ndcg_cut``, ``map_cut``, ``success``), as the command
            line does. The nicknames (``official``, ``all_trec``) always mean trec_eval's sets.

    Exact duplicates (same measure and same output name) are dropped; the same measure written
    twice differently is kept under both names and computed once; two different measures under one
    name (``iprec_at_recall.0.1,0.101``: both print ``iprec_at_recall_0.10``) raise a ValueError
    (:func:`check_distinct`).

    Example:
        >>> [m.label for m in parse_measures(["P.5", "P.10", "map", "P_5"])]
        ['P_5', 'P_10', 'map']
        >>> [m.label for m in parse_measures("official")][:4]
        ['runid', 'num_q', 'num_ret', 'num_rel']
        >>> [m.label for m in parse_measures(["recall", "P@3"], cutoffs=(None,))]   # k=None: the whole list
        ['recall', 'P@3']
    """
    if isinstance(names, str):
        names = [names]
    api = None if cutoffs is None else tuple(cutoffs)
    if api == ():
        raise ValueError("cutoffs is an empty sequence: give at least one cutoff, or (None,) for the whole list")
    out: dict[tuple[Measure, str], Measure] = {}  # exact duplicates (same measure, same name) once
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"a measure name must be a str, got {type(name).__name__} ({name!r})")
        nickname = NICKNAMES.get(name.strip())
        expanded = (name,) if nickname is None else tuple(n for n in nickname if n in TREC_BY_NAME)
        for text in expanded:
            for m in _parse(text, None if nickname else api):
                out.setdefault((m, m.label), m)
    measures = list(out.values())
    check_distinct(measures)
    return measures


def check_distinct(measures: Sequence[Measure], names: Sequence[str] | None = None) -> None:
    """Refuse two different measures under one output name (``names``, default each measure's
    label): results are keyed by name, so one of them would be lost. The same measure under one
    name twice is fine (it is one result).

    Raises:
        ValueError: naming the output name and the measures that share it.

    Example:
        >>> check_distinct(parse_measures(["P.5", "P@5"]))
        >>> check_distinct(parse_measures(["iprec_at_recall.0.1,0.101"]))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: 2 different measures are named 'iprec_at_recall_0.10' (IPrec@0.1, IPrec@0.101), ...
    """
    names = [m.label for m in measures] if names is None else list(names)
    first: dict[str, Measure] = {}
    for m, name in zip(measures, names):
        other = first.setdefault(name, m)
        if other != m:
            distinct = list(dict.fromkeys(x for x, n in zip(measures, names) if n == name))
            raise ValueError(
                f"{len(distinct)} different measures are named {name!r} ({', '.join(x.ir_name() for x in distinct)}), "
                "and results are keyed by name: spell them apart (e.g. IPrec@0.1 and IPrec@0.101 instead of levels "
                "that print alike as trec_eval's %3.2f)"
            )


def parse_measure(name: str, *, cutoff: int | None = None) -> Measure:
    """Parse one name that means exactly one measure.

    Example:
        >>> m = parse_measure("P(rel=2)@5")
        >>> m.key, m.cutoff, m.param("rel"), m.label, m.trec_label
        ('precision', 5, 2, 'P(rel=2)@5', 'P(rel=2)@5')
        >>> parse_measure("nDGC@10")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: unknown measure 'nDGC@10'. Did you mean 'nDCG', 'ndcg', ...? ...
    """
    if not isinstance(name, str):
        raise TypeError(f"a measure name must be a str, got {type(name).__name__}")
    if name.strip() in NICKNAMES:
        raise ValueError(f"{name.strip()!r} names several measures: use parse_measures([{name.strip()!r}])")
    measures = _parse(name, None if cutoff is None else (cutoff,))
    if len(measures) != 1:
        labels = ", ".join(m.label for m in measures)
        raise ValueError(f"{name!r} names {len(measures)} measures ({labels}): use parse_measures([{name!r}])")
    return measures[0]


def _parse(name: str, api_cutoffs: tuple[int | None, ...] | None) -> list[Measure]:
    text = name.strip()
    if not text:
        raise ValueError("empty measure name: give e.g. 'ndcg_cut.10', 'nDCG@10' or 'ndcg@10'")
    rbp = _RANX_RBP.match(text)
    if rbp is not None:
        raise ValueError(
            f"measure {text!r} is ranx's rank-biased precision with p=0.{rbp[1]}, which weights each document by "
            f"its raw grade (not reproduced here): the library's RBP is 'RBP(p=0.{rbp[1]})' (ir_measures' spelling; "
            f"'RBP(p=0.{rbp[1]},rel=1)' on binary relevance) or trec_eval's 'rbp.p=0.{rbp[1]}'"
        )
    base, at, rest = text.partition("@")
    head = base.split("(", 1)[0]
    if "-" in head and head.lower() in _BY_ALIAS:  # ndeval's printed names: alpha-nDCG@20, ERR-IA@5, MAP-IA
        spelled = _BY_ALIAS[head.lower()].key + base[len(head) :] + at + rest
        return [m.with_label(text) for m in _parse_at(spelled, api_cutoffs)]
    if base.lower() in PEER_NAMES and "-" in base:  # r-precision: a name our syntax has no '-' for
        return [m.with_label(text) for m in _parse_at(PEER_NAMES[base.lower()][0] + at + rest, api_cutoffs)]
    if "(" not in text and "@" not in text:
        base, dot, params = text.partition(".")
        if base in TREC_BY_NAME:
            return _parse_trec(text, TREC_BY_NAME[base], params if dot else None, api_cutoffs)
        printed = _printed(text)
        if printed is not None:
            return _parse_trec(text, printed[0], printed[1], None)
    return _parse_at(text, api_cutoffs)


def _printed(text: str) -> tuple[TrecName, str] | None:
    """trec_eval's printed form ``name_PARAMS`` (``P_5``, ``ndcg_cut_10``, ``ndcg_1=3,2=9``,
    ``iprec_at_recall_0.10``, ``utility_2,-1,0,0``)."""
    for length in range(len(text) - 2, 0, -1):
        if text[length] != "_":
            continue
        t = TREC_BY_NAME.get(text[:length])
        rest = text[length + 1 :]
        printed = None if t is None else TREC_SYNTAXES[t.syntax].printed
        if printed is not None and printed.match(rest):
            return t, rest  # type: ignore[return-value]
    return None


def _bare(text: str, t: TrecName, api_cutoffs: tuple[int | None, ...] | None) -> list[Measure]:
    """A name without parameters: the API's cutoffs where the family takes a cutoff, else one measure."""
    if api_cutoffs is not None and FAMILIES[t.family].cutoff:
        return [Measure(t.family, k, t.implied, label=text if k is None else f"{text}@{k}") for k in api_cutoffs]
    return [Measure(t.family, params=t.implied, label=t.name)]


def _measure(text: str, key: str, *args: Any, **kwargs: Any) -> Measure:
    """``Measure(key, *args, **kwargs)``, its errors naming the measure as the user wrote it (``text``)."""
    try:
        return Measure(key, *args, **kwargs)
    except ValueError as err:
        raise ValueError(str(err).replace(f"measure {key!r}", f"measure {text!r}")) from None


def _numbers(text: str, t: TrecName, params: str) -> list[float]:
    values = []
    for part in params.split(","):
        value = _number(part)
        if value is None:
            raise ValueError(
                f"measure {text!r}: {part!r} is not a number ({_why_not_a_number(part)}); write e.g. {t.name}.{_example(t)}"
            )
        values.append(value)
    return values


def _example(t: TrecName) -> str:
    if t.defaults:
        return ",".join(_plain(v) for v in t.defaults[:2])
    default = FAMILIES[t.family].param(t.param)
    value = None if default is None else default.default
    if isinstance(value, tuple):
        return ",".join(_plain(v) for v in value)
    return "1" if value is None else _plain(value)


def _plain(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _trec_none(text: str, t: TrecName, params: str, api_cutoffs) -> list[Measure]:
    raise ValueError(f"measure {text!r}: trec_eval's {t.name} takes no parameters")


def _trec_cutoffs(text: str, t: TrecName, params: str | None, api_cutoffs) -> list[Measure]:
    if params is None:
        if api_cutoffs is not None:  # a bare name takes the API's cutoffs, written name@k (or the whole list)
            return _bare(text, t, api_cutoffs)
        return [Measure(t.family, k, t.implied, label=f"{t.name}_{k}") for k in t.defaults]
    cutoffs = set()
    for part in params.split(","):
        k = _cutoff(text, part, f"{t.name}.5,10")  # trec_eval truncates a fractional cutoff
        if k <= 0:
            raise ValueError(f"measure {text!r}: cutoffs must be positive, got {part!r}")
        cutoffs.add(k)
    return [Measure(t.family, k, t.implied, label=f"{t.name}_{k}") for k in sorted(cutoffs)]


def _trec_levels(text: str, t: TrecName, params: str | None, api_cutoffs) -> list[Measure]:
    """One measure per level (sorted, deduplicated), printed ``name_%3.2f`` as trec_eval prints."""
    levels = t.defaults if params is None else sorted(set(_numbers(text, t, params)))
    measures = [_measure(text, t.family, params=((t.param, v),)) for v in levels]
    return [m.with_label(t.render(m), t.render(m)) for m in measures]


def _trec_values(text: str, t: TrecName, params: str, api_cutoffs) -> list[Measure]:
    """One measure whose parameter holds the values (``utility.1,-1,0,0``; one value for a scalar
    parameter, ``set_F.0.5``), printed ``name_PARAMS`` with the parameters as written."""
    values = _numbers(text, t, params)
    param = FAMILIES[t.family].param(t.param)
    if param is not None and param.kind != "numbers":
        if len(values) != 1:
            raise ValueError(f"measure {text!r}: trec_eval's {t.name} takes one value ({param.doc}), got {params!r}")
        value: object = values[0]
    else:
        value = tuple(values)
    printed = f"{t.name}_{params}"
    return [_measure(text, t.family, params=((t.param, value),), label=printed, trec_label=printed)]


def _trec_gains(text: str, t: TrecName, params: str, api_cutoffs) -> list[Measure]:
    gains: dict[float, float] = {}
    for part in params.split(","):
        grade, _, value = part.partition("=")
        v = _number(value)  # None without '='
        if _INTEGER.fullmatch(grade.strip()) is None or v is None:
            cut = f" (for cutoffs use {t.name}_cut.10)" if f"{t.name}_cut" in TREC_BY_NAME else ""
            raise ValueError(
                f"measure {text!r}: gain {part!r} is not 'grade=gain' with an integer grade; write e.g. "
                f"{t.name}.0=0,1=1,2=3{cut}"
            )
        g = float(int(grade))
        if g in gains:
            raise ValueError(f"measure {text!r}: grade {grade.strip()} is given twice; give each grade one gain")
        gains[g] = v
    printed = f"{t.name}_{params}"
    return [Measure(t.family, params=(("gains", gains),), label=printed, trec_label=printed)]


def _trec_pairs(text: str, t: TrecName, params: str, api_cutoffs) -> list[Measure]:
    """Named parameters ``name=value,...`` (trec_eval's ``rbp.p=0.8``), the ones in ``t.pairs``, and
    integer grades mapped to gains (``rbp.p=0.8,2=1``) when ``t.pairs`` holds ``"gains"``."""
    example = f"{t.name}.p=0.8" + (",0=0,1=0.5,2=1" if "gains" in t.pairs else "")
    gains: dict[float, float] = {}
    named: dict[str, float] = {}
    for part in params.split(","):
        key, eq, value = part.partition("=")
        v = _number(value)
        if not eq or v is None:
            raise ValueError(f"measure {text!r}: {part!r} is not 'name=number'; write e.g. {example}")
        if _INTEGER.fullmatch(key):
            if "gains" not in t.pairs:
                raise ValueError(f"measure {text!r}: trec_eval's {t.name} takes no gains; write e.g. {example}")
            if float(int(key)) in gains:
                raise ValueError(f"measure {text!r}: grade {key} is given twice; give each grade one gain")
            gains[float(int(key))] = v
        elif key in t.pairs:
            if key in named:
                raise ValueError(f"measure {text!r}: {key} is given twice; give it once")
            named[key] = v
        else:
            raise ValueError(
                f"measure {text!r}: {key!r} is not one of {[n for n in t.pairs if n != 'gains']} or a grade; write e.g. {example}"
            )
    given = {**dict(t.implied), **named, **({"gains": gains} if gains else {})}
    printed = f"{t.name}_{params}"
    return [_measure(text, t.family, params=tuple(given.items()), label=printed, trec_label=printed)]


#: The parser of each of trec_eval's parameter syntaxes (:data:`~.registry.TREC_SYNTAXES`):
#: ``(text, trec name, parameters after the dot, API cutoffs) -> measures``; ``cutoffs`` and ``levels``
#: read a bare name too (``None``: their defaults), the others' bare name is :func:`_bare`.
_TREC_PARSERS = {
    "none": _trec_none,
    "cutoffs": _trec_cutoffs,
    "levels": _trec_levels,
    "values": _trec_values,
    "gains": _trec_gains,
    "pairs": _trec_pairs,
}


def _parse_trec(
    text: str, t: TrecName, params: str | None, api_cutoffs: tuple[int | None, ...] | None
) -> list[Measure]:
    if params is None and t.syntax not in ("cutoffs", "levels"):
        return _bare(text, t, api_cutoffs)
    return _TREC_PARSERS[t.syntax](text, t, params, api_cutoffs)


def _resolve(name: str) -> tuple[Family | None, tuple]:
    """The family a name means and the parameter values its spelling implies."""
    if name in _BY_IR:
        return _BY_IR[name], _BY_IR[name].ir_defaults
    if name in TREC_BY_NAME:
        t = TREC_BY_NAME[name]
        return FAMILIES[t.family], t.implied
    if name.lower() in _BY_ALIAS:
        return _BY_ALIAS[name.lower()], ()
    if name.lower() in PEER_NAMES:
        key, implied = PEER_NAMES[name.lower()]
        return FAMILIES[key], implied
    return None, ()


#: ir_measures' spellings whose parameter names another family of ours: ``NumRet(rel=1)`` (how
#: ir_measures prints ``NumRelRet``) counts the relevant documents retrieved, ``SetP(relative=True)``
#: (how it prints ``SetRelP``) is the relative set precision. ``(family, parameter) -> {value or
#: None (any value, kept as the new family's parameter): family}``.
_IR_SWITCHES: dict[tuple[str, str], dict[Any, str]] = {
    (f.key, param): dict(targets) for f in FAMILIES.values() for param, targets in f.ir_switches
}  # each row's ``ir_switches``


def _keywords(params_text: str, text: str) -> dict[str, Any]:
    """The ``key=value`` parameters of ``Name(params)@k``: each key once, numbers in ASCII digits
    without ``_`` separators (Python's literals would read ``1_0`` as 10)."""
    try:
        call = ast.parse(f"f({params_text})", mode="eval").body
    except SyntaxError:
        call = None  # literal_params says what is wrong
    if isinstance(call, ast.Call):
        keys = [kw.arg for kw in call.keywords if kw.arg is not None]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ValueError(f"measure {text!r}: parameter {twice[0]} is given twice; give it once")
        source = f"f({params_text})"
        for kw in call.keywords:
            for node in ast.walk(kw.value):
                if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, complex)):
                    written = ast.get_source_segment(source, node) or ""
                    if "_" in written:
                        raise ValueError(
                            f"measure {text!r}: parameter {kw.arg} holds {written!r}: '_' separators are not "
                            "read in measure names; write the digits alone"
                        )
    return literal_params(params_text, text)


def _rank_cutoff(text: str, name: str, cutoff_text: str) -> int:
    """The cutoff ``k`` of ``name@k`` (a positive integer in ASCII digits), or a ValueError naming the fix."""
    if not re.fullmatch(r"[0-9]+", cutoff_text):
        why = _why_not_a_number(cutoff_text) if _number(cutoff_text) is None else "write a whole number in ASCII digits"
        raise ValueError(f"measure {text!r}: cutoff {cutoff_text!r} is not an integer ({why}); write e.g. {name}@10")
    cutoff = int(cutoff_text)
    if cutoff <= 0:
        raise ValueError(f"measure {text!r}: the cutoff must be a positive int, got {cutoff}")
    return cutoff


def _parse_at(text: str, api_cutoffs: tuple[int | None, ...] | None) -> list[Measure]:
    match = _AT_SYNTAX.match(text)
    if not match:
        raise _unknown(text)
    name, params_text, cutoff_text = match["name"], match["params"], match["cutoff"]
    if name.lower() in PEER_REFUSED and _resolve(name)[0] is None:
        raise ValueError(f"measure {text!r} {PEER_REFUSED[name.lower()]}")
    family, implied = _resolve(name)
    if family is None:
        raise _unknown(text)
    params: dict[str, Any] = _keywords(params_text, text) if params_text else {}
    if params.pop("judged_only", False):
        raise ValueError(
            f"measure {text!r}: judged_only=True is not supported here (trec_eval's -J): trec.evaluate reads it "
            "(or takes judged_only=True; -J on the command line); on tensors, mark the unjudged documents False in mask"
        )
    for (key, switch), targets in _IR_SWITCHES.items():
        if family.key == key and switch in params:
            value = params[switch]
            target = targets.get(None) or (targets.get(value) if isinstance(value, bool) else None)
            if target is None:
                raise ValueError(f"measure {text!r}: {switch} must be True or False, got {value!r}")
            if None not in targets:
                del params[switch]
            family, implied = FAMILIES[target], ()
    for key in params:
        if family.param(key) is None:
            accepted = ", ".join(p.name for p in family.params) or "no parameters"
            raise ValueError(f"measure {text!r}: unknown parameter {key!r}; {name} accepts {accepted}")
    if cutoff_text is not None and family.at != "cutoff":  # IPrec@0.1: @ sets a parameter
        value = _number(cutoff_text)
        if value is None or cutoff_text != cutoff_text.strip():
            raise ValueError(
                f"measure {text!r}: {family.at} {cutoff_text!r} is not a number ({_why_not_a_number(cutoff_text)}); "
                f"write e.g. {name}@0.5"
            )
        params[family.at] = value
        cutoffs: tuple[int | None, ...] = (None,)
    elif cutoff_text is not None:
        cutoff = _rank_cutoff(text, name, cutoff_text)
        if not family.cutoff and family.ir_cutoff is not None and name == family.ir:  # SetP@5: the top 5's set
            family, implied = FAMILIES[family.ir_cutoff[0]], (*implied, *family.ir_cutoff[1])
        if not family.cutoff:
            raise ValueError(f"measure {text!r}: {name} takes no cutoff")
        cutoffs = (cutoff,)
    else:
        cutoffs = api_cutoffs if (api_cutoffs is not None and family.cutoff) else (None,)
    measures = [_measure(text, family.key, k, tuple({**dict(implied), **params}.items())) for k in cutoffs]
    # The user's spelling, as written; a cutoff that comes from the API's k is appended as @k.
    return [
        m.with_label(text if cutoff_text is not None or m.cutoff is None else f"{text}@{m.cutoff}") for m in measures
    ]
