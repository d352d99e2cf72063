"""``trec.evaluate(..., convention="ranx" / "ir_measures")`` against ranx and ir_measures themselves, run live
on random runs with tied scores (scores rounded to 0.1, seeded; not chosen to agree), on every input form
(files, DataFrames, dicts, the peers' objects) and on the command line."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from torch_rankeval import trec
from torch_rankeval.cli import main
from torch_rankeval.trec.peers import numba_argsort

try:
    import ranx
except ImportError:  # pragma: no cover - ranx is in the dev extra
    ranx = None
ir_measures = pytest.importorskip("ir_measures")
pd = pytest.importorskip("pandas")

#: every measure docs/migration/ranx.md lists, with ranx's names, plus its hits and f1
RANX_MEASURES = [
    "ndcg@10", "ndcg", "ndcg_burges@10", "dcg@10", "map@100", "map", "mrr", "mrr@10", "precision@5",
    "precision@50", "recall@10", "recall@100", "hit_rate@10", "r-precision", "bpref", "f1@5", "hits@5", "hits",
]  # fmt: skip
#: every measure docs/migration/ir-measures.md lists that an installed provider computes (ERR and
#: nDCG(dcg='exp-log2') go to gdeval, a perl script: not covered; RBP(rel=...) and the C/W/L measures go to cwl_eval:
#: tests/test_cwl.py), and more
IR_MEASURES = [
    "nDCG@10", "nDCG", "P@5", "P(rel=2)@5", "R@100", "AP", "AP@100", "RR", "RR@10", "RR(rel=2)@5", "Judged@10",
    "Judged", "Rprec", "Bpref", "Success@10", "NumRelRet", "NumRet", "NumRel", "NumQ", "infAP", "SetF", "SetP",
    "IPrec@0.2", "P@1000", "AP(rel=2)",
]  # fmt: skip


needs_ranx = pytest.mark.skipif(ranx is None, reason="ranx is not installed (pip install torch-rankeval[dev])")


def _data(seed: int, *, negative: bool, empty: bool = True) -> tuple[dict, dict]:
    """50 judged queries (grades 0..3, some -1 with ``negative``, a few without relevant or without non-relevant
    documents), a run of
    45 of them with 1-60 documents each and scores rounded to 0.1 (ties everywhere), plus 3 unjudged queries."""
    rng = np.random.default_rng(seed)
    docs = np.array([f"d{i}" for i in range(80)])
    qrels, run = {}, {}
    for q in range(50):
        judged = rng.choice(docs, int(rng.integers(3, 30)), replace=False)
        top = 1 if q % 10 == 0 and empty else 4  # every tenth query: no relevant document
        low = 1 if q % 10 == 5 else -1 if negative else 0  # q5, q15, ...: no judged non-relevant document
        grades = rng.integers(low, top, len(judged))
        qrels[f"q{q}"] = {str(d): int(g) for d, g in zip(judged, grades)}
    for q in [*range(45), 60, 61, 62]:
        retrieved = rng.choice(docs, int(rng.integers(1, 61)), replace=False)
        run[f"q{q}"] = {str(d): float(np.round(rng.random(), 1)) for d in retrieved}
    return qrels, run


def _frame(data: dict, value: str) -> pd.DataFrame:
    rows = [(q, d, v) for q, docs in data.items() for d, v in docs.items()]
    return pd.DataFrame(rows, columns=["query_id", "doc_id", value])


def _write(path, data: dict, kind: str) -> str:
    with open(path, "w") as f:
        for q, docs in data.items():
            for i, (d, v) in enumerate(docs.items()):
                f.write(f"{q} 0 {d} {v}\n" if kind == "qrels" else f"{q} Q0 {d} {i + 1} {v!r} tag\n")
    return str(path)


def _ranx(qrels: dict, run) -> tuple[dict[str, np.ndarray], list[str]]:
    """ranx's per-query values; a dict is read as ``ranx.Run`` reads it, with an empty ranking for the queries
    it does not answer (ranx evaluates equal query sets)."""
    if isinstance(run, dict):
        run = ranx.Run({q: run.get(q, {}) for q in qrels}, name="r")
    r = run
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = ranx.evaluate(ranx.Qrels(qrels), r, RANX_MEASURES, return_mean=False)
    return {m: np.asarray(out[m], dtype=np.float64) for m in RANX_MEASURES}, r.get_query_ids()


def _ranx_inputs(form: str, qrels: dict, run: dict, tmp_path) -> tuple[object, object, object]:
    """(qrels, run) in ``form`` for us, and the run ranx evaluates. A ranx Run is evaluated in its own
    order: make_comparable sorts it a second time, and ranx.evaluate sees that order."""
    comparable = ranx.Run(run).make_comparable(ranx.Qrels(qrels))
    ours = {
        "ranx": (ranx.Qrels(qrels), comparable),
        "dict": (qrels, run),
        # ranx's columns, in ranx's order (to_dataframe of a sorted Run): Run.from_df reads it as a dict in row order
        "frame": (ranx.Qrels(qrels).to_dataframe(), ranx.Run(run).to_dataframe()),
        "file": (_write(tmp_path / "q", qrels, "qrels"), _write(tmp_path / "r", run, "run")),
    }[form]
    if form == "frame":
        return (*ours, ranx.utils.dataframe_to_dict(ours[1], "q_id", "doc_id", "score"))
    return (*ours, comparable if form == "ranx" else run)


def _assert_ranx(ours, theirs: dict, qids: list[str], measures: list[str]) -> None:
    assert ours.qids == sorted(qids)
    order = [ours.qids.index(q) for q in qids]
    for m in measures:
        mine = ours.per_query[m].numpy()[order]
        np.testing.assert_allclose(mine, theirs[m], rtol=0, atol=1e-12, equal_nan=True, err_msg=m)
        assert math.isclose(ours.summary[m], float(np.mean(theirs[m])), abs_tol=1e-12) or (
            math.isnan(ours.summary[m]) and math.isnan(float(np.mean(theirs[m])))
        ), m


@needs_ranx
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("form", ["ranx", "dict", "frame", "file"])
def test_ranx_preset_equals_ranx(seed: int, form: str, tmp_path) -> None:
    """Every measure but bpref on qrels with queries without relevant documents; bpref (and the rest again)
    where every query has one: there ranx's bpref fails (see test_ranx_bpref_without_relevant_is_not_reproduced)."""
    for empty in (True, False):
        qrels, run = _data(seed, negative=True, empty=empty)
        q, r, theirs_run = _ranx_inputs(form, qrels, run, tmp_path)
        theirs, qids = _ranx(qrels, theirs_run)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ours = trec.evaluate(q, r, RANX_MEASURES, convention="ranx")
        assert any("ranx's bpref divides 0 by 0" in str(w.message) for w in caught)  # q5, q15, ...: NaN
        _assert_ranx(ours, theirs, qids, [m for m in RANX_MEASURES if m != "bpref" or not empty])


@needs_ranx
def test_ranx_relevance_level_suffix() -> None:
    """ranx's '-l2' suffix (its relevance level) on every measure that has one here."""
    qrels, run = _data(4, negative=True, empty=False)
    names = ["precision@5-l2", "mrr-l2", "mrr@10-l2", "map@100-l2", "recall@10-l2", "hit_rate@10-l2",
             "r-precision-l2", "bpref-l2", "hits@5-l2", "hits-l2", "f1@5-l2"]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = ranx.evaluate(ranx.Qrels(qrels), ranx.Run({q: run.get(q, {}) for q in qrels}), names, return_mean=False)
        ours = trec.evaluate(qrels, run, names, convention="ranx")
    _assert_ranx(ours, {m: np.asarray(out[m], dtype=np.float64) for m in names}, sorted(qrels), names)


@needs_ranx
def test_ranx_bpref_without_relevant_is_not_reproduced() -> None:
    """ranx's bpref divides by R = 0 inside its numba parallel loop: the ZeroDivisionError is lost and the
    values of the queries of that thread's chunk are left 0 (which ones depends on the number of threads, so
    ranx's numbers are not asserted on such data). The preset scores the empty query 0 and the others as ranx
    scores them without it, and warns."""
    qrels = {f"q{i}": {"x": 1, "y": 0} for i in range(3)}
    run = {q: {"x": 2.0, "y": 1.0} for q in [*qrels, "q9"]}
    theirs, _ = _ranx(qrels, run)  # without the empty query: ranx's bpref is defined
    with pytest.warns(RuntimeWarning, match="ZeroDivisionError"):
        ours = trec.evaluate(qrels | {"q9": {"x": 0}}, run, ["bpref"], convention="ranx")
    assert ours.per_query["bpref"].tolist() == [*theirs["bpref"].tolist(), 0.0] == [1.0, 1.0, 1.0, 0.0]


@needs_ranx
def test_ranx_numbers_differ_by_default_and_bpref_is_ranx_s() -> None:
    """The preset is not the default under another name: on tied data most means differ; ranx's bpref differs
    from trec_eval's on untied data too (negative grades judged non-relevant, 0 / 0 without judged
    non-relevant documents), and the preset gives ranx's."""
    qrels, run = _data(5, negative=True, empty=False)
    theirs, _ = _ranx(qrels, run)
    names = [m for m in RANX_MEASURES if not m.startswith("hits")]
    default = trec.evaluate(qrels, run, names, complete=True)
    differ = {m for m in names if not math.isclose(default.summary[m], float(np.nanmean(theirs[m])), abs_tol=1e-9)}
    assert {"ndcg@10", "mrr", "map", "bpref", "r-precision", "precision@5"} <= differ
    untied = {q: {d: float(i) for i, d in enumerate(docs)} for q, docs in run.items()}
    theirs, qids = _ranx(qrels, untied)
    with pytest.warns(RuntimeWarning, match="divides 0 by 0"):
        ours = trec.evaluate(qrels, untied, ["bpref"], convention="ranx")
    _assert_ranx(ours, theirs, qids, ["bpref"])
    trec_eval = trec.evaluate(qrels, untied, ["bpref"], complete=True).per_query["bpref"].numpy()
    answered = ~np.isnan(ours.per_query["bpref"].numpy())
    assert not np.allclose(trec_eval[answered], ours.per_query["bpref"].numpy()[answered], atol=1e-3)


def test_numba_argsort_is_numba_s() -> None:
    """The quicksort written out gives numba's own permutation, ties included (lists of 1-199 keys)."""
    numba = pytest.importorskip("numba")
    jitted = numba.njit(lambda a: np.argsort(a))
    rng = np.random.default_rng(0)
    for _ in range(300):
        keys = -np.round(rng.random(int(rng.integers(1, 200))) * int(rng.integers(1, 10)))
        assert numba_argsort(keys.tolist()) == jitted(keys).tolist()


def _ir(qrels: dict, run: dict) -> tuple[dict, dict]:
    measures = [ir_measures.parse_measure(m) for m in IR_MEASURES]
    agg = {str(m): v for m, v in ir_measures.calc_aggregate(measures, qrels, run).items()}
    per_query = {(x.query_id, str(x.measure)): x.value for x in ir_measures.iter_calc(measures, qrels, run)}
    return agg, per_query


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("form", ["dict", "frame", "rows", "file", "objects"])
def test_ir_measures_preset_equals_ir_measures(seed: int, form: str, tmp_path) -> None:
    qrels, run = _data(seed, negative=False)
    agg, per_query = _ir(qrels, run)
    inputs = {
        "dict": (qrels, run),
        "frame": (_frame(qrels, "relevance"), _frame(run, "score")),
        "rows": (
            [ir_measures.Qrel(q, d, g) for q, docs in qrels.items() for d, g in docs.items()],
            [ir_measures.ScoredDoc(q, d, s) for q, docs in run.items() for d, s in docs.items()],
        ),
        "file": (_write(tmp_path / "q", qrels, "qrels"), _write(tmp_path / "r", run, "run")),
        "objects": (qrels, run),
    }[form]
    measures = [ir_measures.parse_measure(m) for m in IR_MEASURES] if form == "objects" else IR_MEASURES
    ours = trec.evaluate(*inputs, measures, convention="ir_measures")
    assert ours.qids == sorted(qrels)
    for m in IR_MEASURES:
        theirs = str(ir_measures.parse_measure(m))  # NumRelRet is NumRet(rel=1)
        name = theirs if form == "objects" else m
        assert math.isclose(ours.summary[name], agg[theirs], rel_tol=1e-12, abs_tol=1e-12), (m, ours.summary[name])
        if name in ours.per_query:  # NumQ: a summary only
            mine = ours.per_query[name].tolist()
            assert all(math.isclose(mine[i], per_query[q, theirs], abs_tol=1e-12) for i, q in enumerate(ours.qids)), m


def test_ir_measures_rr_and_judged_differ_by_default() -> None:
    """RR@10 and Judged@10 go to ir_measures' own providers (docno ascending among ties): the default
    (trec_eval's order) differs from ir_measures on tied runs, the preset does not."""
    seen = set()
    for seed in range(6):
        qrels, run = _data(seed, negative=False)
        agg, _ = _ir(qrels, run)
        default = trec.evaluate(qrels, run, ["RR@10", "Judged@10"], complete=True).summary
        preset = trec.evaluate(qrels, run, ["RR@10", "Judged@10"], convention="ir_measures").summary
        for m in ("RR@10", "Judged@10"):
            assert math.isclose(preset[m], agg[m], abs_tol=1e-12)
            if not math.isclose(default[m], agg[m], abs_tol=1e-9):
                seen.add(m)
    assert seen == {"RR@10", "Judged@10"}


def test_bad_convention() -> None:
    with pytest.raises(ValueError, match="'ranx' or 'ir_measures'"):
        trec.evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["map"], convention="torchmetrics")
    with pytest.raises(ValueError, match="ranx's count"):
        trec.evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["hits@5"])  # ranx's name: under convention="ranx" only


@pytest.mark.parametrize("convention", ["ranx", "ir_measures"])
def test_cli_convention(convention: str, tmp_path, capsys) -> None:
    qrels, run = _data(3, negative=False)
    q, r = _write(tmp_path / "q", qrels, "qrels"), _write(tmp_path / "r", run, "run")
    names = ["mrr@10", "hits@5", "bpref"] if convention == "ranx" else ["RR@10", "Judged@10", "nDCG@10"]
    args = [a for n in names for a in ("-m", n)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["evaluate", q, r, *args, "--convention", convention, "--format", "json"]) == 0
        expected = trec.evaluate(q, r, names, convention=convention).summary
    import json

    printed = json.loads(capsys.readouterr().out)["runs"][0]["summary"]
    assert printed.keys() == expected.keys()
    for m in names:
        assert (
            math.isclose(printed[m], expected[m], abs_tol=1e-12)
            if not math.isnan(expected[m])
            else printed[m] is None or printed[m] != printed[m]
        )


def test_presets_on_tensors_are_trec_eval_s() -> None:
    """On tensors the two presets are trec_eval's conventions (ties in input order): the peer's order is
    given by the list, as trec.evaluate gives it after ranking the run as the peer does."""
    import torch

    from torch_rankeval import functional as F
    from torch_rankeval.conventions import PRESETS, presets

    assert PRESETS["ranx"] == PRESETS["ir_measures"] == PRESETS["trec_eval"] == presets.ranx
    preds, target = torch.tensor([[0.5, 0.5, 0.2]]), torch.tensor([[0, 2, 1]])
    assert F.ndcg(preds, target, k=2, convention="ranx").item() == pytest.approx(
        (2 / math.log2(3)) / (2 + 1 / math.log2(3))  # input order: the grade-0 document first
    )


@pytest.mark.parametrize(
    "convention, name, tool",
    [
        ("ir_measures", "ERR@10", "gdeval"),
        ("ir_measures", "nDCG(dcg='exp-log2')@10", "gdeval"),
        ("ir_measures", "RBP(p=0.5)", "cwl_eval, on binary relevance"),  # RBP(rel=...): tests/test_cwl.py
        ("ranx", "RBP(p=0.5)", "raw grade"),
    ],
)
def test_presets_refuse_the_measures_they_do_not_reproduce(convention, name, tool):
    """ir_measures routes ERR@k and nDCG(dcg='exp-log2') to its gdeval provider (its own tie order), computes RBP
    with cwl_eval on binary relevance only (``RBP(rel=...)``, which the preset reproduces, tests/test_cwl.py; graded
    RBP is no ir_measures measure), and ranx's RBP weights by raw grade: the presets do not reproduce those, so an
    error naming the measure, never another number."""
    from torch_rankeval import trec

    qrels = {"q1": {"a": 1, "b": 0, "c": 2}}
    run = {"q1": {"a": 0.5, "b": 0.5, "c": 0.1}}
    with pytest.raises(ValueError, match=tool):
        trec.evaluate(qrels, run, [name], convention=convention)
    assert trec.evaluate(qrels, run, [name]).summary  # without the preset: trec_eval's conventions
