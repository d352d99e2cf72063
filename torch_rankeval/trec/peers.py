"""The peers' rules that :func:`~torch_rankeval.trec.evaluate` reproduces under ``convention="ranx"`` or
``convention="ir_measures"``: the order each peer gives tied scores, and the few measures a peer
defines otherwise than trec_eval.

Both peers compute trec_eval's measures, except in these points (read in their sources: ranx 0.3,
``ranx/data_structures/common.py`` and ``ranx/metrics/*.py``; ir_measures 0.3,
``ir_measures/__init__.py``'s provider pipeline and ``providers/{msmarco,judged}_provider.py``):

- **ranx** ranks each query by numba's ``np.argsort`` (an unstable quicksort: insertion sort under 16
  documents, median-of-three partitions above) of the negated scores, taken in the order the run lists
  its documents (``Run(dict)``, ``Run.from_file``, ``Run.from_df``); a ranx ``Run`` passed in is already
  in that order and is kept as it is. ranx evaluates the qrels' queries (``make_comparable``: a query
  the run does not answer scores 0), counts a negative grade as judged non-relevant, and its ``bpref``
  is NaN for a query without judged non-relevant documents that retrieves a relevant one (``0 / 0``:
  trec_eval scores 1 per such document). On a query without relevant documents ranx's bpref raises
  ZeroDivisionError inside its numba parallel loop, which silently leaves the values of other queries 0
  (which ones depends on the number of threads): that is not reproduced (such a query scores 0, with a
  warning). Its ``hits@k`` is the number of relevant documents in the
  top ``k``, averaged over queries (``k`` times ``P@k``; ``hits`` alone: over the whole ranking).
- **ir_measures** sends most measures to pytrec_eval (trec_eval's order: score, then docno
  descending), but ``RR@k`` (a cutoff) to its ``msmarco`` provider and ``Judged@k`` to its ``judged``
  provider, which order tied scores by docno *ascending*, as its ``compat`` provider (``Compat``) does;
  its ``accuracy`` provider (``Accuracy``) keeps tied scores in the run's order and reports no value for
  a query whose top ``k`` lack a relevant or a non-relevant document (nor fills in 0 for one the run
  does not answer) when every measure of the call is an ``Accuracy`` (asked for with another provider's
  measures, its ``FallbackEvaluator`` scores those queries 0); it reports ``NumQ`` per query (1). Every
  other provider scores each query of the qrels
  that the run does not answer ``0`` (``Measure.DEFAULT``, ``providers/base.py``), counts included.
  pytrec_eval is trec_eval 9.0.8 (interpolated precision rounds recall levels as 9.0.8 did).
  Its ``cwl_eval`` provider (BPM, INSQ, INST, SDCG, NERR8-NERR11, and RBP) ranks each query by score with
  Python's stable sort (``RunConverter.as_sorted_namedtuple_iter``): tied scores in the order the run lists
  its documents (a file's lines, a dict's items). Its RBP takes binary relevance (``RBP(rel=1)``; RBP
  without ``rel`` is no measure of ir_measures) and is cwl_eval's: the first 1000 ranks, weights
  normalised over them (``RBP(depth=1000)`` here).
  pytrec_eval is trec_eval 9.0.8 (interpolated precision rounds recall levels as 9.0.8 did). An empty
  run (or one that answers no query of the qrels) scores 0 on every query of the qrels; empty qrels
  give no query, so every mean is NaN and every count 0 (``tests/test_providers.py::test_empty``);
  trec_eval refuses both.

:data:`TREC_PRESETS` holds these facts, one entry per preset; :func:`ranked_run` rewrites a run's
scores so that the join (score descending, then docno descending) ranks each query in a peer's order.

Example:
    >>> from torch_rankeval.trec.io import Run
    >>> run = Run.from_dict({"q1": {"b": 0.5, "a": 0.5, "c": 0.9}})
    >>> ranked_run(run, "docno_ascending").score.tolist()        # c first, then a before b
    [-2.0, -1.0, -0.0]
    >>> ranked_run(run, "ranx").score.tolist()                   # c first, then the run's order: b, a
    [-1.0, -2.0, -0.0]
    >>> ranked_run(run, "run").score.tolist()                    # the same: a stable sort by score
    [-1.0, -2.0, -0.0]
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from torch_rankeval.trec.io import Qrels, Run

__all__ = ["CWL_EVAL_DEPTH", "ORDERS", "TREC_PRESETS", "TrecPreset", "numba_argsort", "ranked_run", "judged_negative"]

#: cwl_eval's depth (``max_n``) that ir_measures passes to it: the ranks its measures read and normalise over.
CWL_EVAL_DEPTH = 1000

#: How a preset orders tied scores: ``"trec_eval"`` (docno descending: the join's own order),
#: ``"docno_ascending"``, ``"ranx"`` (numba's quicksort of the negated scores in the run's order),
#: ``"run"`` (the run's order: a stable sort by score, ir_measures' cwl_eval and accuracy providers).
ORDERS = ("trec_eval", "docno_ascending", "ranx", "run")


@dataclass(frozen=True)
class TrecPreset:
    """One peer's rules on TREC data (see the module).

    Attributes:
        order: the order of tied scores for every measure (:data:`ORDERS`).
        complete: evaluate every query of the qrels (trec_eval's ``-c``).
        unanswered_zero: a query the run does not answer scores 0 in every measure, counts included
            (trec_eval's ``-c`` still counts its relevant documents in ``num_rel``), and ``num_q``
            counts the answered queries only.
        trec_eval_version: the trec_eval version the peer computes with (``None``: the caller's).
        negative_judged: a negative grade is a judged non-relevant document (not an unjudged one).
        empty_scored: an empty run, or one without a query of the qrels, scores 0 on every query of the
            qrels (``num_q`` 0), and empty qrels give no query and a NaN mean (``num_*`` and ``num_q``: 0),
            where trec_eval refuses both (ir_measures' tests/test_providers.py::test_empty).
        by_measure: ``{rule name: (order, rule)}`` for the measures a peer computes otherwise; the
            rule names are matched by :meth:`rule` (``"rr_cutoff"``: ``RR@k`` with a cutoff,
            ``"judged"``, ``"bpref"``), the rules applied by :func:`torch_rankeval.trec.evaluate`:
            ``"nan_no_nonrelevant"`` (NaN for a query without judged non-relevant documents that
            retrieves a relevant one), ``"cwl_eval"`` (RBP as cwl_eval computes it: binary utility
            ``rel=`` required, no cutoff, the first :data:`CWL_EVAL_DEPTH` ranks normalised over, the
            ``depth`` parameter where not given), ``"skip_empty"`` (NaN where the measure flags the query
            empty, left out of the mean, when every measure of the call has this rule; else none) or ``None``.
    """

    order: str = "trec_eval"
    complete: bool = False
    unanswered_zero: bool = False
    trec_eval_version: str | None = None
    negative_judged: bool = False
    empty_scored: bool = False
    by_measure: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    #: ``num_q`` has a value per query (1 for each query the run answers, ir_measures' ``NumQ``), not
    #: only trec_eval's summary
    num_q_per_query: bool = False
    #: measures the peer computes with a tool whose numbers the preset does not reproduce, refused
    #: rather than answered with another number: ``{key, or key(param=value): reason}``
    refused: dict[str, str] = field(default_factory=dict)

    def rule(self, key: str, cutoff: int | None) -> tuple[str, str | None]:
        """``(order, rule)`` of the measure ``key`` (a registry key) at ``cutoff``.

        Example:
            >>> TREC_PRESETS["ir_measures"].rule("mrr", 10), TREC_PRESETS["ir_measures"].rule("mrr", None)
            (('docno_ascending', None), ('trec_eval', None))
        """
        name = "rr_cutoff" if key == "mrr" and cutoff is not None else key
        return self.by_measure.get(name, (self.order, None))


# ------------------------------------------------------------------------------------------------------
# THE PEERS' PRESETS ON TREC DATA (per-measure tie order and rules): one table, to move with the
# registry's per-preset rows.
TREC_PRESETS: dict[str, TrecPreset] = {
    "trec_eval": TrecPreset(),
    # ranx: its own tie order for every measure, the qrels' queries, negative grades judged non-relevant,
    # bpref NaN without judged non-relevant documents (ranx/metrics/bpref.py: 0 / min(R, 0))
    "ranx": TrecPreset(
        order="ranx",
        complete=True,
        negative_judged=True,
        by_measure={"bpref": ("ranx", "nan_no_nonrelevant")},
        refused={"rbp": "ranx's RBP weights each document by its raw grade"},
    ),
    # ir_measures: pytrec_eval's (trec_eval's) order, except its msmarco (RR@k) and judged (Judged@k)
    # providers: score, then docno ascending; every query of the qrels, 0 where the run has none
    "ir_measures": TrecPreset(
        complete=True,
        unanswered_zero=True,
        empty_scored=True,
        trec_eval_version="9.0.8",  # pytrec_eval's (interpolated precision rounds recall levels as 9.0.8)
        by_measure={
            "rr_cutoff": ("docno_ascending", None),
            "judged": ("docno_ascending", None),
            # its cwl_eval provider: tied scores in the run's order; RBP(rel=...) over cwl_eval's depth
            **{key: ("run", None) for key in ("bpm", "insq", "inst", "sdcg", "nerr8", "nerr9", "nerr10", "nerr11")},
            "rbp": ("run", "cwl_eval"),
            # its compat provider: score, then docno ascending; its accuracy provider: a stable sort by
            # score (the run's order), and no value for a query without a (relevant, non-relevant) pair
            "compat": ("docno_ascending", None),
            "pairwise_accuracy": ("run", "skip_empty"),
        },
        num_q_per_query=True,
        refused={
            "err": "ir_measures computes ERR@k with the gdeval script (its own order of tied scores)",
            "ndcg(dcg=exp-log2)": "ir_measures computes nDCG(dcg='exp-log2') with the gdeval script (its own "
            "order of tied scores)",
        },
    ),
}
# ------------------------------------------------------------------------------------------------------

_SMALL_QUICKSORT = 15  # numba/misc/quicksort.py: partitions below 16 elements are insertion-sorted


def numba_argsort(keys: list[float]) -> list[int]:
    """The permutation numba's ``np.argsort(keys)`` (``kind="quicksort"``, numba/misc/quicksort.py)
    returns, written out in Python: equal keys end up in the order numba's quicksort leaves them.

    Example:
        >>> numba_argsort([2.0, 1.0, 2.0])                    # under 16 keys: an insertion sort, stable
        [1, 0, 2]
        >>> numba_argsort([0.0] * 20)[:6]                     # 20 equal keys: partitions move them
        [18, 17, 16, 15, 14, 13]
    """
    a, r = keys, list(range(len(keys)))
    if len(a) < 2:
        return r
    stack = [(0, len(a) - 1)]
    while stack:
        low, high = stack.pop()
        while high - low >= _SMALL_QUICKSORT:
            i = _partition(a, r, low, high)
            if high - i > i - low:  # push the larger side, go on with the smaller
                if high > i:
                    stack.append((i + 1, high))
                high = i - 1
            else:
                if i > low:
                    stack.append((low, i - 1))
                low = i + 1
        for i in range(low + 1, high + 1):  # insertion sort of r[low:high + 1]
            k, j = r[i], i
            v = a[k]
            while j > low and v < a[r[j - 1]]:
                r[j] = r[j - 1]
                j -= 1
            r[j] = k
    return r


def _partition(a: list[float], r: list[int], low: int, high: int) -> int:
    """numba's partition of ``r[low:high + 1]`` around the median of three; the pivot's index."""
    mid = (low + high) >> 1
    if a[r[mid]] < a[r[low]]:
        r[low], r[mid] = r[mid], r[low]
    if a[r[high]] < a[r[mid]]:
        r[high], r[mid] = r[mid], r[high]
    if a[r[mid]] < a[r[low]]:
        r[low], r[mid] = r[mid], r[low]
    pivot = a[r[mid]]
    r[high], r[mid] = r[mid], r[high]
    i, j = low, high - 1
    while True:
        while i < high and a[r[i]] < pivot:
            i += 1
        while j >= low and pivot < a[r[j]]:
            j -= 1
        if i >= j:
            break
        r[i], r[j] = r[j], r[i]
        i += 1
        j -= 1
    r[i], r[high] = r[high], r[i]
    return i


def ranked_run(run: Run, order: str, *, ranked: bool = False) -> Run:
    """A copy of ``run`` whose scores are ``-position`` in ``order`` (:data:`ORDERS`) within each
    query, so that trec_eval's ranking (score descending) gives that order; ``ranked=True`` says the
    run's rows are already in ranx's order (a ranx ``Run``): ``"ranx"`` then keeps them.

    Example:
        >>> run = Run.from_dict({"q1": {"b": 0.5, "a": 0.5}})
        >>> ranked_run(run, "trec_eval").score.tolist(), ranked_run(run, "docno_ascending").score.tolist()
        ([-0.0, -1.0], [-1.0, -0.0])
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    n = len(run)
    q, score = run.qid, run.score
    if order == "run":
        idx = np.lexsort((-score, q))  # a stable sort: tied scores in the run's order
    elif order == "ranx":
        idx = np.lexsort((q,)) if ranked else _ranx_fixup(np.lexsort((-score, q)), q, score)  # stable sorts
    else:
        docno = np.unique(np.array(run.docnos()), return_inverse=True)[1].reshape(-1)  # docno ranks
        idx = np.lexsort((docno if order == "docno_ascending" else -docno, -score, q))
    starts = np.flatnonzero(np.r_[True, q[idx][1:] != q[idx][:-1]])
    position = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    out = copy.copy(run)
    out.score = np.empty(n, dtype=np.float64)
    out.score[idx] = -position.astype(np.float64)
    return out


def _ranx_fixup(idx: np.ndarray, q: np.ndarray, score: np.ndarray) -> np.ndarray:
    """``idx`` (a stable sort by query, then score descending) with each query of 16 or more
    documents and tied scores put in numba's quicksort order (shorter lists: numba's insertion sort
    is stable, as ``idx``)."""
    qs = q[idx]
    starts = np.flatnonzero(np.r_[True, qs[1:] != qs[:-1]])
    ends = np.r_[starts[1:], len(idx)]
    sorted_scores = score[idx]
    for a, b in zip(starts.tolist(), ends.tolist()):
        if b - a <= _SMALL_QUICKSORT or not (sorted_scores[a + 1 : b] == sorted_scores[a : b - 1]).any():
            continue
        rows = np.sort(idx[a:b])  # the query's rows in the run's order
        idx[a:b] = rows[numba_argsort((-score[rows]).tolist())]  # pure Python: 200,000 tied rows in 0.4 s
    return idx


def judged_negative(qrels: Qrels) -> Qrels:
    """A copy of ``qrels`` whose negative grades are 0: judged non-relevant (ranx), not unjudged (trec_eval).

    Example:
        >>> sorted(judged_negative(Qrels.from_dict({"q1": {"a": -1, "b": 2}})).relevance.tolist())
        [0, 2]
    """
    out = copy.copy(qrels)
    out.relevance = np.maximum(qrels.relevance, 0)
    return out
