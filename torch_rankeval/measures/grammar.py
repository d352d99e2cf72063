"""The measure-name grammar: every spelling parses everywhere.

- trec_eval: ``name`` or ``name.PARAMS`` (``P.5,10``: cutoffs, sorted and deduplicated, fractions
  truncated as trec_eval does; ``ndcg.0=0,1=1,2=3``: gains), and trec_eval's printed names
  (``P_5``, ``ndcg_cut_10``). Output names are trec_eval's printed names.
- ir_measures: ``Name(param=value, ...)@k`` (``nDCG@10``, ``P(rel=2)@5``, ``AP``, ``RR@10``).
- the library's names, case-insensitive, with the same ``(params)`` and ``@k``: ``ndcg@10``,
  ``mrr@10``, ``map``, ``hit_rate@5``.
- nicknames (``official``, ``all_trec``) expand to several measures (:func:`parse_measures`).

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

import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from torch_rankeval.measures.registry import (
    FAMILIES,
    TREC_BY_NAME,
    Family,
    Measure,
    TrecName,
    literal_params,
)

__all__ = ["parse_measure", "parse_measures", "NICKNAMES", "known_names"]

#: trec_eval's nicknames, restricted to the measures of the registry.
NICKNAMES: dict[str, tuple[str, ...]] = {
    "official": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "recip_rank", "P"),
    "all_trec": (
        "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "recip_rank", "P",
        "recall", "ndcg", "ndcg_cut", "map_cut", "success", "rbp", "rbp_resid", "unj",
    ),
}

# What may follow ``name_`` in trec_eval's printed names, per parameter syntax.
_PRINTED_PARAMS = {
    "cutoffs": re.compile(r"^\d+(,\d+)*$"),
    "gains": re.compile(r"^-?\d+=[-+.\deE]+(,-?\d+=[-+.\deE]+)*$"),
    "pairs": re.compile(r"^[-\w]+=[-+.\deE]+(,[-\w]+=[-+.\deE]+)*$"),
}
_AT_SYNTAX = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\((?P<params>.*)\))?(?:@(?P<cutoff>[^@()]*))?$")
_BY_IR: dict[str, Family] = {f.ir: f for f in FAMILIES.values() if f.ir}
_BY_ALIAS: dict[str, Family] = {}
for _family in FAMILIES.values():
    for _alias in (_family.key, *_family.aliases):
        _BY_ALIAS[_alias.lower()] = _family

Cutoffs = Sequence[int | None] | None


def known_names() -> list[str]:
    """Every accepted base name (trec_eval, ir_measures, library aliases, nicknames), sorted."""
    names = set(TREC_BY_NAME) | set(_BY_IR) | set(_BY_ALIAS) | set(NICKNAMES)
    return sorted(names, key=lambda n: (n.lower(), n))


def _unknown(name: str, why: str = "") -> ValueError:
    base = re.split(r"[.(@]", name, maxsplit=1)[0]
    choices = known_names()
    by_lower: dict[str, list[str]] = {}
    for c in choices:
        by_lower.setdefault(c.lower(), []).append(c)
    close = [c for low in difflib.get_close_matches(base.lower(), list(by_lower), n=4, cutoff=0.5) for c in by_lower[low]]
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    return ValueError(
        f"unknown measure {name!r}{': ' + why if why else ''}.{hint} Known names: {', '.join(choices)} "
        "(trec_eval style 'ndcg_cut.10', ir_measures style 'nDCG@10', 'P(rel=2)@5', library style 'ndcg@10')"
    )


def _api_cutoffs(cutoffs: Cutoffs) -> tuple[int | None, ...] | None:
    if cutoffs is None:
        return None
    out = tuple(cutoffs)
    return None if out in ((), (None,)) else out


def parse_measures(names: str | Iterable[str], *, cutoffs: Cutoffs = None) -> list[Measure]:
    """Parse names (a sequence, or one string) into measures, one per output; nicknames expand.

    Args:
        names: measure names in any spelling (see the module docstring).
        cutoffs: the API's default cutoffs for names written without one (``None``: each name's
            own default).

    Exact duplicates (same measure and same output name) are dropped; the same measure written
    twice differently is kept under both names and computed once.

    Example:
        >>> [m.label for m in parse_measures(["P.5", "P.10", "map", "P_5"])]
        ['P_5', 'P_10', 'map']
        >>> [m.label for m in parse_measures("official")][:4]
        ['runid', 'num_q', 'num_ret', 'num_rel']
    """
    if isinstance(names, str):
        names = [names]
    out: list[Measure] = []
    seen: set[tuple[Measure, str]] = set()
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"a measure name must be a str, got {type(name).__name__} ({name!r})")
        expanded = NICKNAMES.get(name.strip(), (name,))
        for text in expanded:
            for m in _parse(text, _api_cutoffs(cutoffs)):
                if (m, m.label) not in seen:
                    seen.add((m, m.label))
                    out.append(m)
    return out


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
    if "(" not in text and "@" not in text:
        base, dot, params = text.partition(".")
        if base in TREC_BY_NAME:
            return _parse_trec(text, TREC_BY_NAME[base], params if dot else None, api_cutoffs)
        printed = _printed(text)
        if printed is not None:
            return _parse_trec(text, printed[0], printed[1], None)
    return _parse_at(text, api_cutoffs)


def _printed(text: str) -> tuple[TrecName, str] | None:
    """trec_eval's printed form ``name_PARAMS`` (``P_5``, ``ndcg_cut_10``, ``ndcg_1=3,2=9``)."""
    for length in range(len(text) - 2, 0, -1):
        if text[length] != "_":
            continue
        t = TREC_BY_NAME.get(text[:length])
        rest = text[length + 1 :]
        if t is not None and t.syntax in _PRINTED_PARAMS and _PRINTED_PARAMS[t.syntax].match(rest):
            return t, rest
    return None


def _parse_trec(text: str, t: TrecName, params: str | None, api_cutoffs: tuple[int | None, ...] | None) -> list[Measure]:
    family = FAMILIES[t.family]
    implied = t.defaults
    if t.syntax == "cutoffs":
        if params is None:
            if api_cutoffs is not None:  # a bare name takes the API's cutoffs, written name@k
                return [Measure(t.family, k, implied, label=text if k is None else f"{text}@{k}") for k in api_cutoffs]
            return [Measure(t.family, k, implied, label=f"{t.name}_{k}") for k in t.cutoffs]
        cutoffs = set()
        for part in params.split(","):
            try:
                k = int(float(part))  # trec_eval truncates a fractional cutoff
            except ValueError:
                raise ValueError(f"measure {text!r}: cutoff {part!r} is not a number; write e.g. {t.name}.5,10") from None
            if k <= 0:
                raise ValueError(f"measure {text!r}: cutoffs must be positive, got {part!r}")
            cutoffs.add(k)
        return [Measure(t.family, k, implied, label=f"{t.name}_{k}") for k in sorted(cutoffs)]
    if params is None:
        if api_cutoffs is not None and family.cutoff:
            return [Measure(t.family, k, implied, label=text if k is None else f"{text}@{k}") for k in api_cutoffs]
        return [Measure(t.family, params=implied, label=t.name)]
    if t.syntax in ("gains", "pairs"):
        gains: dict[float, float] = {}
        named: dict[str, float] = {}
        for part in params.split(","):
            key, eq, value = part.partition("=")
            try:
                v = float(value)
            except ValueError:
                v = None
            if not eq or v is None:
                hint = f" (for cutoffs use {t.name}_cut.10)" if t.syntax == "gains" else ""
                raise ValueError(f"measure {text!r}: {part!r} is not 'grade=gain'; write e.g. {_example(t)}{hint}")
            if re.fullmatch(r"[-+]?\d+", key):
                if t.syntax == "pairs" and "gains" not in t.pairs:
                    raise ValueError(f"measure {text!r}: trec_eval's {t.name} takes no gains; write e.g. {_example(t)}")
                gains[float(int(key))] = v
            elif t.syntax == "pairs" and key in t.pairs:
                named[key] = v
            else:
                raise ValueError(
                    f"measure {text!r}: {key!r} is not {'an integer grade' if t.syntax == 'gains' else 'one of ' + repr(t.pairs)}"
                    f"; write e.g. {_example(t)}" + (f" (for cutoffs use {t.name}_cut.10)" if t.syntax == "gains" else "")
                )
        given = {**dict(implied), **named, **({"gains": gains} if gains else {})}
        printed = f"{t.name}_{params}"
        try:
            return [Measure(t.family, params=tuple(given.items()), label=printed, trec_label=printed)]
        except ValueError as err:
            raise ValueError(str(err).replace(f"measure {t.family!r}", f"measure {text!r}")) from None
    raise ValueError(f"measure {text!r}: trec_eval's {t.name} takes no parameters")


def _example(t: TrecName) -> str:
    if t.syntax == "gains":
        return f"{t.name}.0=0,1=1,2=3"
    return f"{t.name}.p=0.8" + (",0=0,1=0.5,2=1" if "gains" in t.pairs else "")


def _resolve(name: str) -> tuple[Family | None, tuple]:
    """The family a name means and the parameter values its spelling implies."""
    if name in _BY_IR:
        return _BY_IR[name], _BY_IR[name].ir_defaults
    if name in TREC_BY_NAME:
        t = TREC_BY_NAME[name]
        return FAMILIES[t.family], t.defaults
    return _BY_ALIAS.get(name.lower()), ()


def _parse_at(text: str, api_cutoffs: tuple[int | None, ...] | None) -> list[Measure]:
    match = _AT_SYNTAX.match(text)
    if not match:
        raise _unknown(text)
    name, params_text, cutoff_text = match["name"], match["params"], match["cutoff"]
    family, implied = _resolve(name)
    if family is None:
        raise _unknown(text)
    params: dict[str, Any] = literal_params(params_text, text) if params_text else {}
    if params.pop("judged_only", False):
        raise ValueError(f"measure {text!r}: judged_only=True is not supported (trec_eval's -J); drop the parameter")
    for key in params:
        if family.param(key) is None:
            accepted = ", ".join(p.name for p in family.params) or "no parameters"
            raise ValueError(f"measure {text!r}: unknown parameter {key!r}; {name} accepts {accepted}")
    if cutoff_text is not None:
        try:
            cutoff = int(cutoff_text)
        except ValueError:
            raise ValueError(f"measure {text!r}: cutoff {cutoff_text!r} is not an integer") from None
        if cutoff <= 0:
            raise ValueError(f"measure {text!r}: the cutoff must be a positive int, got {cutoff}")
        if not family.cutoff:
            raise ValueError(f"measure {text!r}: {name} takes no cutoff")
        cutoffs: tuple[int | None, ...] = (cutoff,)
    else:
        cutoffs = api_cutoffs if (api_cutoffs is not None and family.cutoff) else (None,)
    try:
        measures = [Measure(family.key, k, tuple({**dict(implied), **params}.items())) for k in cutoffs]
    except ValueError as err:
        raise ValueError(str(err).replace(f"measure {family.key!r}", f"measure {text!r}")) from None
    # The user's spelling of the name; parameters in canonical form; the cutoff as @k.
    return [
        m.with_label(m._render(name, implied) if params_text is not None else name + ("" if m.cutoff is None else f"@{m.cutoff}"))
        for m in measures
    ]
