"""Peers' qrels, runs and measures in: one conversion that every entry point calls.

:func:`as_qrels` and :func:`as_run` take, besides :class:`~torch_rankeval.trec.io.Qrels` /
:class:`~torch_rankeval.trec.io.Run` and file paths:

- a pandas DataFrame with ir_measures' columns (``query_id``, ``doc_id``, ``relevance`` for qrels;
  ``query_id``, ``doc_id``, ``score`` for runs), trec_eval's names (``qid``, ``docno``, ``rel`` /
  ``score``) or ranx's (``q_id``, ``doc_id``, ``score``: its ``to_dataframe``); other columns
  (``iteration``, ``rank``, ``run_id``...) are ignored;
- a dict of dicts ``{qid: {docno: grade or score}}`` (pytrec_eval's form);
- a ranx ``Qrels`` / ``Run`` (anything with a ``to_dict()`` that returns that dict of dicts; a
  ranx run's ``name`` becomes the run tag);
- an iterable of ir_measures' namedtuples (``ir_measures.Qrel(query_id, doc_id, relevance)``,
  ``ir_measures.ScoredDoc(query_id, doc_id, score)``), or of any rows with those attributes.

TREC semantics are kept: ids are text (integer ids become their decimal text), grades are integers
(a float column holding whole numbers is read as integers, anything else is refused), scores are
finite floats; a document judged twice for one query is refused as :func:`read_qrels` refuses it,
and a document twice in one query of a run as :func:`~torch_rankeval.trec.join.to_tensors` refuses
it for a run file; rows keep their order, and the ranking is trec_eval's (score descending, then
docno descending). :func:`as_measures` takes names, parsed measures and ir_measures' measure
objects (``str(measure)`` is the name the grammar parses).

Example:
    >>> from collections import namedtuple
    >>> Qrel = namedtuple("Qrel", "query_id doc_id relevance")  # a stand-in for ir_measures.Qrel
    >>> rows = [Qrel("q1", "d1", 2), Qrel("q1", "d2", 0)]
    >>> as_qrels({"q1": {"d1": 2, "d2": 0}}).to_dict() == as_qrels(rows).to_dict()
    True
    >>> as_run({"q1": {"d1": 0.5, "d2": 0.5}}, tag="bm25").tag
    'bm25'
    >>> as_qrels(3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: qrels must be a Qrels, a path, a pandas DataFrame ..., got int
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from torch_rankeval.measures import Measure
from torch_rankeval.trec._text import table_from_rows
from torch_rankeval.trec.io import Qrels, Run, read_qrels, read_run

__all__ = ["QRELS_COLUMNS", "RUN_COLUMNS", "as_measures", "as_qrels", "as_run"]

#: Accepted DataFrame column names, ``(query, document, value)``: ir_measures' first, then trec_eval's, then
#: ranx's (``Qrels.to_dataframe``, ``Run.to_dataframe``: ``q_id``, ``doc_id``, ``score``).
QRELS_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("query_id", "doc_id", "relevance"),
    ("qid", "docno", "rel"),
    ("q_id", "doc_id", "score"),
)
RUN_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("query_id", "doc_id", "score"),
    ("qid", "docno", "score"),
    ("q_id", "doc_id", "score"),
)

_FORMS = (
    "a {cls}, a path, a pandas DataFrame (columns {cols}), a dict of dicts {{qid: {{docno: {value}}}}}, "
    "a ranx {cls} or an iterable of ir_measures {row} namedtuples"
)


def _forms(kind: str) -> str:
    if kind == "qrels":
        return _FORMS.format(
            cls="Qrels", cols=" or ".join("/".join(c) for c in QRELS_COLUMNS), value="grade", row="Qrel"
        )
    return _FORMS.format(cls="Run", cols=" or ".join("/".join(c) for c in RUN_COLUMNS), value="score", row="ScoredDoc")


def _is_dataframe(obj: object) -> bool:
    return any(c.__name__ == "DataFrame" and c.__module__.startswith("pandas") for c in type(obj).__mro__)


def _ids(values: Any, what: str, argument: str) -> list[str]:
    """Query ids or docnos as text: str as they are, integers as decimal text; anything else refused."""
    array = np.asarray(values)
    if array.dtype.kind in "iu":
        return [str(v) for v in array.tolist()]
    out = array.tolist()
    for v in out:
        if isinstance(v, bool) or not isinstance(v, (str, int, np.integer)):
            raise TypeError(f"{argument}: every {what} must be a str (or an int), got {type(v).__name__} {v!r}")
    return [v if isinstance(v, str) else str(v) for v in out]


def _grades(values: Any, argument: str) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind in "iu":
        return array.astype(np.int64)
    if array.dtype.kind == "f" and np.isfinite(array).all() and (array == np.round(array)).all():
        return array.astype(np.int64)  # a whole-number float column (a merge's NaN-capable dtype)
    if array.dtype.kind == "O":
        bad = next((v for v in array.tolist() if isinstance(v, bool) or not isinstance(v, (int, np.integer))), None)
        if bad is None:
            return array.astype(np.int64)
        raise TypeError(
            f"{argument}: relevance grades must be integers (TREC grades), got {type(bad).__name__} {bad!r}"
        )
    raise TypeError(f"{argument}: relevance grades must be integers (TREC grades), got dtype {array.dtype}")


def _scores(values: Any, argument: str) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind not in "iuf" and array.dtype.kind != "O":
        raise TypeError(f"{argument}: scores must be numbers, got dtype {array.dtype}")
    try:
        scores = array.astype(np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{argument}: scores must be numbers") from None
    if not np.isfinite(scores).all():
        raise ValueError(f"{argument}: scores must be finite numbers (NaN or infinity found)")
    return scores


def _columns(frame: Any, choices: tuple[tuple[str, str, str], ...], argument: str) -> tuple[str, str, str]:
    names = [str(c) for c in frame.columns]
    for choice in choices:
        if all(c in names for c in choice):
            return choice
    wanted = " or ".join("/".join(c) for c in choices)
    raise ValueError(f"{argument}: a DataFrame needs the columns {wanted}; it has {names}")


def _from_rows(obj: Iterable[Any], kind: str, argument: str) -> tuple[list, list, list]:
    value = "relevance" if kind == "qrels" else "score"
    qs, ds, vs = [], [], []
    for row in obj:
        try:
            qs.append(row.query_id)
            ds.append(row.doc_id)
            vs.append(getattr(row, value))
        except AttributeError:
            raise TypeError(
                f"{argument} must be {_forms(kind)}; an iterable's rows need the attributes query_id, doc_id and "
                f"{value} (ir_measures.{'Qrel' if kind == 'qrels' else 'ScoredDoc'}), got {type(row).__name__} {row!r}"
            ) from None
    if not qs:
        raise ValueError(f"{argument} holds no row")
    return qs, ds, vs


def _table(obj: Any, kind: str, argument: str, tag: str | None):
    """The :class:`Table` of a DataFrame or of an iterable of rows, or None for other objects."""
    if _is_dataframe(obj):
        q, d, v = _columns(obj, QRELS_COLUMNS if kind == "qrels" else RUN_COLUMNS, argument)
        if len(obj) == 0:
            raise ValueError(f"{argument}: the DataFrame has no row")
        qs, ds, vs = obj[q].to_numpy(), obj[d].to_numpy(), obj[v].to_numpy()
    elif isinstance(obj, Iterable) and not isinstance(obj, (str, bytes, Mapping)):
        qs, ds, vs = _from_rows(obj, kind, argument)
    else:
        return None
    values = _grades(vs, argument) if kind == "qrels" else _scores(vs, argument)
    return table_from_rows(_ids(qs, "query id", argument), _ids(ds, "docno", argument), values, tag)


def _dict_of_dicts(obj: Any) -> Mapping | None:
    """``obj`` as ``{qid: {docno: value}}``: a mapping, or a ranx object's ``to_dict()``."""
    if isinstance(obj, Mapping):
        return obj
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict) and not _is_dataframe(obj):
        data = to_dict()
        if isinstance(data, Mapping):
            return data
    return None


def _keys(data: Mapping, argument: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for q, docs in data.items():
        if not isinstance(docs, Mapping):
            raise TypeError(f"{argument}[{q!r}] must be a dict docno -> value, got {type(docs).__name__}")
        (qid,) = _ids([q], "query id", argument) if not isinstance(q, str) else (q,)
        if qid in out:
            raise ValueError(f"{argument}: query ids {qid!r} and {q!r} are the same id as text; merge them")
        row: dict[str, Any] = {}
        for d, v in docs.items():
            docno = d if isinstance(d, str) else _ids([d], "docno", argument)[0]
            if docno in row:
                raise ValueError(f"{argument}[{q!r}]: docnos {docno!r} and {d!r} are the same docno as text")
            row[docno] = v
        out[qid] = row
    return out


def as_qrels(qrels: object, *, argument: str = "qrels") -> Qrels:
    """``qrels`` as a :class:`Qrels` (see the module's forms); ``argument`` names it in errors.

    Raises:
        TypeError: not one of the accepted forms, a grade that is not an integer, an id that is
            not text.
        ValueError: a DataFrame without the columns, no row.
        TrecFormatError: a document judged twice for one query.

    Example:
        >>> as_qrels({"q1": {"d1": 1, 7: 0}}).to_dict()
        {'q1': {'d1': 1, '7': 0}}
    """
    if isinstance(qrels, Qrels):
        return qrels
    if isinstance(qrels, (str, os.PathLike)):
        return read_qrels(qrels)
    data = _dict_of_dicts(qrels)
    if data is not None:
        return Qrels.from_dict(_keys(data, argument))
    table = _table(qrels, "qrels", argument, None)
    if table is None:
        raise TypeError(f"{argument} must be {_forms('qrels')}, got {type(qrels).__name__}")
    return Qrels(table)


def as_run(run: object, *, argument: str = "run", tag: str | None = None) -> Run:
    """``run`` as a :class:`Run` (see the module's forms); ``tag`` is the run tag (default: a
    :class:`Run`'s or a file's own, a ranx run's ``name``, else ``"run"``).

    Raises:
        TypeError: not one of the accepted forms, a score that is not a number, an id that is not text.
        ValueError: a DataFrame without the columns, no row, a NaN or infinite score.

    Example:
        >>> import ir_measures
        >>> docs = [ir_measures.ScoredDoc("q1", "d1", 0.5), ir_measures.ScoredDoc("q1", "d2", 1.5)]
        >>> r = as_run(docs, tag="bm25")
        >>> r.tag, r.to_dict()
        ('bm25', {'q1': {'d1': 0.5, 'd2': 1.5}})
    """
    if isinstance(run, Run):
        return run
    if isinstance(run, (str, os.PathLike)):
        return read_run(run)
    if tag is None:
        name = getattr(run, "name", None)
        tag = name if isinstance(name, str) and name and not _is_dataframe(run) else "run"
    data = _dict_of_dicts(run)
    if data is not None:
        return Run.from_dict(_keys(data, argument), tag=tag)
    table = _table(run, "run", argument, tag)
    if table is None:
        raise TypeError(f"{argument} must be {_forms('run')}, got {type(run).__name__}")
    return Run(table)


def _is_ir_measure(obj: object) -> bool:
    return any(c.__module__.split(".")[0] == "ir_measures" for c in type(obj).__mro__)


def as_measures(measures: object, *, argument: str = "measures") -> list[str | Measure] | str:
    """Measure names, parsed measures and ir_measures' measure objects as names and measures: an
    ir_measures object becomes ``str(measure)`` (``nDCG@10``, ``P(rel=2)@5``), which the grammar
    parses. A single name or object stands for a list of one (a single name is returned as is).

    Raises:
        TypeError: an element that is none of these.

    Example:
        >>> import ir_measures
        >>> as_measures([ir_measures.nDCG @ 10, ir_measures.P(rel=2) @ 5, "map"])
        ['nDCG@10', 'P(rel=2)@5', 'map']
    """
    if isinstance(measures, str):
        return measures
    if isinstance(measures, Measure) or _is_ir_measure(measures) or not isinstance(measures, Iterable):
        measures = [measures]
    out: list[str | Measure] = []
    for m in measures:  # type: ignore[union-attr]
        if isinstance(m, (str, Measure)):
            out.append(m)
        elif _is_ir_measure(m):
            out.append(str(m))
        else:
            raise TypeError(
                f"{argument}: each measure must be a name ('ndcg_cut.10', 'nDCG@10'), a parsed Measure or an "
                f"ir_measures measure object (ir_measures.nDCG@10), got {type(m).__name__} {m!r}"
            )
    return out
