"""cwl_eval's C/W/L user-model measures as ir_measures exposes them (``kernels/cwl.py``, one registry row each):
BPM, INSQ, INST, SDCG and NERR8-NERR11. ir_measures' expected values transcribed from its test file, ir_measures
and cwl_eval run live on seeded runs with graded qrels and tied scores, tie orders enumerated, and every surface
that takes a measure by name."""

from __future__ import annotations

import io
import itertools
import logging
import math

import numpy as np
import pytest
import torch

from torch_rankeval import RankingMetrics, trec
from torch_rankeval import functional as F
from torch_rankeval.cli import main
from torch_rankeval.measures import parse_measure
from torch_rankeval.trec.io import Qrels, Run, write_qrels, write_run

#: terrierteam/ir_measures, test/cwl.qrels: (query, document, grade).
CWL_QRELS = {
    "T1": {"D1": 1, "D2": 0, "D3": 1, "D4": 1, "D7": 1, "D8": 0, "D9": 1, "D10": 0},
    "T2": {"D1": 1, "D2": 1, "D5": 1, "D6": 0, "D7": 1, "D8": 1, "D9": 1, "D10": 0},
    "T3": {"D4": 0, "D5": 0, "D6": 1, "D7": 1, "D8": 1, "D9": 0, "D10": 1},
}
#: terrierteam/ir_measures, test/cwl.run: every query ranks D1..D10 with the scores 4.3 4.2 4.1 3.9 ... 3.3.
CWL_SCORES = [4.3, 4.2, 4.1, 3.9, 3.8, 3.7, 3.6, 3.5, 3.4, 3.3]
CWL_RUN = {q: {f"D{i + 1}": s for i, s in enumerate(CWL_SCORES)} for q in ("T1", "T2", "T3")}

#: terrierteam/ir_measures, test/test_cwl_eval.py, TestCwlEval.test_measures ("based on a manual execution of
#: cwl-eval"): the C/W/L measures' expected values for T1, T2, T3 (33 values; compared there with delta=0.0001).
IR_MEASURES_EXPECTED = {
    "BPM(T=1.0, max_rel=1)@20": (1.0000, 1.0000, 0.1667),
    "BPM(T=2.0, max_rel=1)@10": (0.6667, 1.0000, 0.2857),
    "INSQ(T=1.0, max_rel=1)": (0.5872, 0.6629, 0.0880),
    "INSQ(T=2.0, max_rel=1)": (0.4513, 0.5068, 0.1292),
    "INST(T=1.0, max_rel=1)": (0.7934, 0.9226, 0.0888),
    "INST(T=2.0, max_rel=1)": (0.5994, 0.6924, 0.1397),
    "SDCG(max_rel=1)@10": (0.5645, 0.6531, 0.2848),
    "NERR8(max_rel=1)@10": (1.0000, 1.0000, 0.1667),
    "NERR9(max_rel=1)@10": (1.0000, 1.0000, 0.0680),
    "NERR10(p=0.8, max_rel=1)": (1.0000, 1.0000, 0.0888),
    "NERR11(T=2.0, max_rel=1)": (1.0000, 1.0000, 0.0691),
}


def test_ir_measures_expected_values():
    """All 33 values of ir_measures' test_cwl_eval.py, through trec.evaluate with its ir_measures preset."""
    names = list(IR_MEASURES_EXPECTED)
    evaluation = trec.evaluate(CWL_QRELS, CWL_RUN, names, convention="ir_measures")
    assert evaluation.qids == ["T1", "T2", "T3"]
    for name, expected in IR_MEASURES_EXPECTED.items():
        assert evaluation.per_query[name].tolist() == pytest.approx(expected, abs=1e-4), name


def test_ir_measures_expected_values_on_tensors():
    """The same on tensors: the run's order is its ranking (no ties), grades in input order, unjudged documents
    marked with ``judged``."""
    docs = [f"D{i + 1}" for i in range(10)]
    preds = torch.tensor([CWL_SCORES] * 3, dtype=torch.float64)
    target = torch.tensor([[CWL_QRELS[q].get(d, 0) for d in docs] for q in ("T1", "T2", "T3")])
    judged = torch.tensor([[d in CWL_QRELS[q] for d in docs] for q in ("T1", "T2", "T3")])
    values = F.evaluate(preds, target, list(IR_MEASURES_EXPECTED), judged=judged, ties="first", reduction="none")
    for name, expected in IR_MEASURES_EXPECTED.items():
        assert values[name].tolist() == pytest.approx(expected, abs=1e-4), name


def _eu(g: list[float], c: list[float]) -> float:
    """cwl_eval's expected utility: ``sum_i P_i g_i / sum_i P_i`` with ``P_i = C_1 ... C_(i-1)``."""
    reach = [math.prod(c[:i]) for i in range(len(g))]
    return sum(p * x for p, x in zip(reach, g)) / sum(reach)


def test_the_formulas_written_out():
    """Hand-computed values on one ranking of grades (2, 0, 1), padded to depth 4: gains (1, 0, 1/2, 0) with
    max_rel=2, (2/3, 0, 1/3, 0) with max_rel=3, (1, 0, 0, 0) with min_rel=1."""
    preds, target = torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[2, 0, 1]])
    g, g3, g1 = [1.0, 0.0, 0.5, 0.0], [2 / 3, 0.0, 1 / 3, 0.0], [1.0, 0.0, 0.0, 0.0]
    ranks = range(1, 5)
    cum = list(itertools.accumulate(g))
    insq = [((r + 2 * 2 - 1) / (r + 2 * 2)) ** 2 for r in ranks]  # T = 2
    expected = {
        "INSQ(T=2,max_rel=2,depth=4)": _eu(g, insq),
        "INST(max_rel=2,depth=4)": _eu(g, [((r + 2 - cum[r - 1] - 1) / (r + 2 - cum[r - 1])) ** 2 for r in ranks]),
        "BPM(T=1.5,max_rel=2,depth=4)@10": (1 + 0 + 0.5) / 3,  # the gain reaches 1.5 at rank 3
        "BPM(T=1.5,max_rel=2,depth=4)@2": (1 + 0) / 2,  # two documents
        "SDCG(max_rel=2,depth=4)@2": (1 + 0) / (1 + 1 / math.log2(3)),
        "SDCG(max_rel=3,depth=4)@3": (2 / 3 + 0 + 1 / 3 / 2) / (1 + 1 / math.log2(3) + 1 / 2),
        "NERR8(max_rel=3,depth=4)@3": _eu(g3, [1 - g3[0], 1 - g3[1], 0, 0]),
        "NERR9(min_rel=1,max_rel=2,depth=4)@3": _eu(g1, [1 / 2 * (1 - g1[0]), 2 / 3 * (1 - g1[1]), 0, 0]),
        "NERR10(p=0.5,max_rel=3,depth=4)": _eu(g3, [0.5 * (1 - x) for x in g3]),
        "NERR11(T=2,max_rel=3,depth=4)": _eu(g3, [c * (1 - x) for c, x in zip(insq, g3)]),
    }
    assert expected["NERR10(p=0.5,max_rel=3,depth=4)"] == pytest.approx(
        (2 / 3 + 0.5 / 3 * 0.5 * 1 / 3) / (1 + 0.5 / 3 + 0.5 / 3 * 0.5 + 0.5 / 3 * 0.5 * 0.5 * 2 / 3)
    )  # P = (1, 1/6, 1/12, 1/36)
    values = F.evaluate(preds, target, list(expected), ties="first")
    for name, want in expected.items():
        assert values[name].item() == pytest.approx(want, rel=1e-6), name


# ----------------------------------------------------------------------------- live against ir_measures
ir_measures = pytest.importorskip("ir_measures")
pytest.importorskip("cwl")

#: The C/W/L measures in ir_measures' spelling (its T is a float: T=2.0, not T=2), with graded gains.
LIVE = [
    "BPM(T=1.0,max_rel=3)@10", "BPM(T=2.0,max_rel=3)@5", "BPM(T=0.5,min_rel=1,max_rel=2)@20",
    "INSQ(T=2.0,max_rel=3)", "INSQ(T=1.0,max_rel=1)", "INST(T=1.0,max_rel=2)", "INST(T=2.0,min_rel=1,max_rel=3)",
    "SDCG(max_rel=3)@10", "SDCG(max_rel=1)@3", "NERR8(max_rel=3)@10", "NERR9(max_rel=2)@5",
    "NERR10(p=0.8,max_rel=3)", "NERR10(max_rel=2)", "NERR11(T=2.0,max_rel=3)", "NERR11(max_rel=1)",
]  # fmt: skip


def _live_data(seed: int) -> tuple[dict, dict]:
    """30 judged queries (grades -1..3, every seventh without a relevant document), a run of 25 of them with
    1-40 documents, some unjudged, scores rounded to 0.1 (ties everywhere) and listed in a shuffled order, one
    query of 1,100 documents (past cwl_eval's depth of 1000), plus 2 unjudged queries."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(60)]
    qrels, run = {}, {}
    for q in range(30):
        judged = rng.choice(docs, int(rng.integers(3, 30)), replace=False)
        top = 1 if q % 7 == 0 else 4
        qrels[f"q{q}"] = {str(d): int(g) for d, g in zip(judged, rng.integers(-1, top, len(judged)))}
    for q in [*range(25), 40, 41]:
        retrieved = rng.choice(docs, int(rng.integers(1, 41)), replace=False)
        run[f"q{q}"] = {str(d): float(np.round(rng.random(), 1)) for d in retrieved}
    long = [f"x{i}" for i in range(1100)]
    qrels["q1"].update({d: int(g) for d, g in zip(long[::7], rng.integers(0, 4, len(long[::7])))})
    run["q1"] = {d: float(np.round(rng.random(), 2)) for d in long}
    return qrels, run


def _ir_measures(names: list[str], qrels: dict, run: dict) -> dict[str, dict[str, float]]:
    logging.getLogger("ir_measures.cwl_eval").disabled = True  # its notes on the grades outside [min_rel, max_rel]
    out: dict[str, dict[str, float]] = {}
    for name in names:
        m = ir_measures.parse_measure(name)
        out[name] = {r.query_id: float(r.value) for r in ir_measures.cwl_eval.iter_calc([m], qrels, run)}
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_trec_evaluate_under_the_ir_measures_preset_matches_ir_measures_live(seed):
    """Per query and mean, on tied scores: ir_measures' cwl_eval provider ranks tied scores in the run's order (a
    stable sort by score), which the preset reproduces; the qrels' queries the run does not answer score 0."""
    qrels, run = _live_data(seed)
    theirs = _ir_measures(LIVE, qrels, run)
    ours = trec.evaluate(qrels, run, LIVE, convention="ir_measures")
    assert sorted(ours.qids) == sorted(qrels)
    worst = 0.0
    for name in LIVE:
        mine = dict(zip(ours.qids, ours.per_query[name].tolist()))
        assert set(theirs[name]) == set(mine), name
        for q, v in theirs[name].items():
            assert mine[q] == pytest.approx(v, abs=1e-12), (name, q)
            worst = max(worst, abs(mine[q] - v))
        assert ours.summary[name] == pytest.approx(np.mean(list(theirs[name].values())), abs=1e-12), name
    assert worst < 1e-12
    # the preset's order matters: trec_eval's (docno descending) gives other numbers on these ties
    plain = trec.evaluate(qrels, run, ["INSQ(T=2.0,max_rel=3)"], complete=True)
    assert plain.summary["INSQ(T=2.0,max_rel=3)"] != pytest.approx(ours.summary["INSQ(T=2.0,max_rel=3)"], abs=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
def test_rbp_under_the_ir_measures_preset_matches_ir_measures_live(seed):
    """ir_measures computes RBP(rel=...) with cwl_eval: binary utility, the run's order of tied scores, the first
    1000 ranks with weights normalised over them (visible at p=0.999, and on the query of 1,100 documents); the
    preset answers it as RBP(depth=1000). trec_eval's RBP (no preset) differs on the same data."""
    qrels, run = _live_data(seed)
    names = ["RBP(rel=1)", "RBP(rel=2,p=0.5)", "RBP(p=0.99,rel=1)", "RBP(p=0.999,rel=3)"]
    theirs = _ir_measures(names, qrels, run)
    ours = trec.evaluate(qrels, run, names, convention="ir_measures")
    for name in names:
        mine = dict(zip(ours.qids, ours.per_query[name].tolist()))
        assert set(theirs[name]) == set(mine), name
        for q, v in theirs[name].items():
            assert mine[q] == pytest.approx(v, abs=1e-12), (name, q)
        assert ours.summary[name] == pytest.approx(np.mean(list(theirs[name].values())), abs=1e-12), name
    plain = trec.evaluate(qrels, run, ["RBP(p=0.999,rel=3)"], complete=True).summary["RBP(p=0.999,rel=3)"]
    assert plain != pytest.approx(ours.summary["RBP(p=0.999,rel=3)"], abs=1e-4)
    explicit = trec.evaluate(qrels, run, ["RBP(p=0.999,rel=3,depth=1000)"], convention="ir_measures")
    assert explicit.summary["RBP(p=0.999,rel=3,depth=1000)"] == ours.summary["RBP(p=0.999,rel=3)"]
    for refused in ["RBP(p=0.5)", "RBP(rel=1)@10"]:
        with pytest.raises(ValueError, match="binary relevance and without a cutoff"):
            trec.evaluate(qrels, run, [refused], convention="ir_measures")


def test_rbp_depth_written_out():
    """RBP(depth=D): the first D ranks, ``(1 - p) / (1 - p**D) * sum_{i <= D} u_i p^(i-1)``."""
    preds, target = torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 1]])
    values = F.evaluate(preds, target, ["RBP(p=0.5,depth=2)", "RBP(p=0.5,depth=3)", "RBP(p=0.5)"])
    assert values["RBP(p=0.5,depth=2)"].item() == pytest.approx(0.5 / 0.75)
    assert values["RBP(p=0.5,depth=3)"].item() == pytest.approx(0.5 * 1.25 / 0.875)
    assert values["RBP(p=0.5)"].item() == pytest.approx(0.5 * 1.25)


def test_the_preset_on_files_and_on_the_command_line_matches_ir_measures(tmp_path):
    """A run file in its own line order (not sorted by docno), read by ir_measures and by the command line."""
    qrels, run = _live_data(5)
    write_qrels(tmp_path / "qrels", qrels)
    with open(tmp_path / "run", "w") as f:
        for q, docs in run.items():
            for i, (d, s) in enumerate(docs.items()):
                f.write(f"{q} Q0 {d} {i + 1} {s!r} tag\n")
    names = ["NERR9(max_rel=3)@10", "INST(T=2.0,max_rel=3)", "RBP(p=0.99,rel=2)"]
    file_qrels = list(ir_measures.read_trec_qrels(str(tmp_path / "qrels")))
    file_run = list(ir_measures.read_trec_run(str(tmp_path / "run")))
    theirs = _ir_measures(names, file_qrels, file_run)
    for name in names:
        out = io.StringIO()
        argv = [
            "evaluate",
            str(tmp_path / "qrels"),
            str(tmp_path / "run"),
            "-m",
            name,
            "--convention",
            "ir_measures",
            "-q",
        ]
        assert main(argv, out) == 0
        rows = [line.split() for line in out.getvalue().splitlines()[1:]]
        mean = np.mean(list(theirs[name].values()))
        assert float(rows[-1][-1]) == pytest.approx(mean, abs=1e-4), name
        per_query = {r[1]: float(r[-1]) for r in rows[:-1]}
        assert per_query == pytest.approx(theirs[name], abs=1e-4), name


# ----------------------------------------------------------------------------- ties
def test_insq_and_sdcg_averaged_ties_are_the_mean_over_every_order_of_the_tied_documents():
    """INSQ and SDCG weigh each rank by a fixed chance to reach it: their tie average is exact."""
    g = torch.Generator().manual_seed(11)
    names = ["INSQ(max_rel=3,depth=8)", "SDCG(max_rel=2,depth=8)@3", "sdcg(depth=8)"]
    for _ in range(4):
        preds = torch.randint(0, 3, (6,), generator=g).double()
        target = torch.randint(0, 4, (6,), generator=g)
        orders = torch.tensor(list(itertools.permutations(range(6))))  # ties="first" ranks by the input order
        each = F.evaluate(preds[orders], target[orders], names, ties="first", reduction="none")
        averaged = F.evaluate(preds, target, names)
        for name in names:
            torch.testing.assert_close(averaged[name], each[name].mean(), msg=name)


@pytest.mark.parametrize("name", ["BPM@10", "INST", "NERR8@10", "NERR9@5", "NERR10", "NERR11"])
def test_the_gain_dependent_measures_refuse_averaged_ties(name):
    preds, target = torch.tensor([[0.5, 0.5, 0.1]]), torch.tensor([[1, 0, 1]])
    with pytest.raises(ValueError, match="ties='first'"):
        F.evaluate(preds, target, [name])
    pessimistic = F.evaluate(preds, target, [name], ties="pessimistic")[name]
    optimistic = F.evaluate(preds, target, [name], ties="optimistic")[name]
    assert pessimistic < optimistic  # the relevant tied document first or last


# ----------------------------------------------------------------------------- names, parameters, errors
def test_names_and_parameters():
    m = parse_measure("BPM(T=2,max_rel=3)@10")
    assert (m.key, m.cutoff, m.param("T"), m.param("max_rel"), m.param("min_rel"), m.param("depth")) == (
        "bpm",
        10,
        2,
        3,
        0,
        1000,
    )
    assert parse_measure("INSQ(T=2.0)") == parse_measure("insq(T=2)") and parse_measure("INSQ(T=1)") == parse_measure(
        "INSQ"
    )
    assert parse_measure("NERR10(p=0.9)") == parse_measure("nerr10")  # ir_measures' default p
    assert parse_measure("SDCG(dcg='log2')@10") == parse_measure("sdcg@10")
    assert parse_measure("NERR8@10").ir_name() == "NERR8@10"
    with pytest.raises(ValueError, match="takes no cutoff"):
        parse_measure("INSQ@10")
    with pytest.raises(ValueError, match="T must be a positive number"):
        parse_measure("INST(T=0)")
    with pytest.raises(ValueError, match="dcg must be one of"):
        parse_measure("SDCG(dcg='exp-log2')@10")
    preds, target = torch.tensor([[0.9, 0.1]]), torch.tensor([[1, 0]])
    with pytest.raises(ValueError, match="max_rel must be greater than min_rel"):
        F.evaluate(preds, target, ["INSQ(min_rel=2,max_rel=2)"])


def test_the_depth_cuts_and_normalises():
    """cwl_eval reads max_n ranks: a relevant document past the depth is not read, and the normaliser runs to the
    depth however short the list."""
    preds = torch.arange(5, 0, -1).double().unsqueeze(0)
    target = torch.tensor([[0, 0, 0, 0, 1]])
    values = F.evaluate(preds, target, ["NERR10(p=0.5,depth=4)", "NERR10(p=0.5,depth=5)"], ties="first")
    assert values["NERR10(p=0.5,depth=4)"].item() == 0
    assert values["NERR10(p=0.5,depth=5)"].item() == pytest.approx(0.5**4 / sum(0.5**i for i in range(5)))
    short = F.evaluate(preds[:, :1], torch.tensor([[1]]), ["INSQ(depth=1)", "INSQ(depth=3)"])
    reach = [1, (2 / 3) ** 2, (2 / 3 * 3 / 4) ** 2]  # T=1: C_r = ((r + 1) / (r + 2))**2
    assert short["INSQ(depth=1)"].item() == 1
    assert short["INSQ(depth=3)"].item() == pytest.approx(1 / sum(reach))


# ----------------------------------------------------------------------------- every surface
def test_every_surface_takes_them_by_name(tmp_path):
    """F.evaluate, RankingMetrics (streamed in two batches), trec.evaluate and the command line, from the rows."""
    names = ["BPM(T=2,max_rel=1)@10", "INSQ(T=2,max_rel=1)", "INST(T=2,max_rel=1)", "SDCG(max_rel=1)@10"]
    names += ["NERR8(max_rel=1)@10", "NERR9(max_rel=1)@10", "NERR10(p=0.8,max_rel=1)", "NERR11(T=2,max_rel=1)"]
    docs = [f"D{i + 1}" for i in range(10)]
    preds = torch.tensor([CWL_SCORES] * 3)
    target = torch.tensor([[CWL_QRELS[q].get(d, 0) for d in docs] for q in ("T1", "T2", "T3")])
    direct = F.evaluate(preds, target, names, ties="first", reduction="none")
    expected = {name.replace(" ", ""): v for name, v in IR_MEASURES_EXPECTED.items()}
    expected = {k.replace("T=1.0", "T=1").replace("T=2.0", "T=2"): v for k, v in expected.items()}
    for name in names:
        assert direct[name].tolist() == pytest.approx(expected[name], abs=1e-4), name
    metric = RankingMetrics(tuple(names), ties="first")
    metric.update(preds[:2], target[:2])
    metric.update(preds[2:], target[2:])
    streamed = metric.compute()
    for name in names:
        assert streamed[name].item() == pytest.approx(sum(expected[name]) / 3, abs=1e-4), name
    write_qrels(tmp_path / "qrels", CWL_QRELS)
    write_run(tmp_path / "run", CWL_RUN)
    evaluation = trec.evaluate(tmp_path / "qrels", tmp_path / "run", names)
    for name in names:
        assert evaluation.per_query[name].tolist() == pytest.approx(expected[name], abs=1e-4), name
    out = io.StringIO()
    assert main(["evaluate", str(tmp_path / "qrels"), str(tmp_path / "run"), "-m", names[1], "-q"], out) == 0
    assert [line.split()[-1] for line in out.getvalue().splitlines()[1:]] == [
        f"{v:.4f}" for v in [*expected[names[1]], sum(expected[names[1]]) / 3]
    ]


def test_qrels_and_run_objects_under_the_preset():
    """The library's Qrels and Run objects give the dicts' numbers."""
    qrels, run = Qrels.from_dict(CWL_QRELS), Run.from_dict(CWL_RUN)
    evaluation = trec.evaluate(qrels, run, ["INST(T=2.0, max_rel=1)"], convention="ir_measures")
    assert evaluation.per_query["INST(T=2.0, max_rel=1)"].tolist() == pytest.approx((0.5994, 0.6924, 0.1397), abs=1e-4)


def test_updates_without_validation_make_no_host_sync():
    """Every C/W/L measure, and RBP(depth=...), in one unvalidated update: no value read, no data-dependent shape."""
    from tests.sync_guard import HostSyncGuard

    names = ["BPM(T=2,max_rel=3)@10", "INSQ(T=2,max_rel=3)", "INST(max_rel=3)", "SDCG(max_rel=3)@5", "sdcg"]
    names += ["NERR8(max_rel=3)@10", "NERR9(max_rel=3)@3", "NERR10(p=0.8,max_rel=3)", "NERR11(T=2,max_rel=3)"]
    names += ["RBP(rel=1,depth=1000)"]
    g = torch.Generator().manual_seed(2)
    preds = torch.randint(0, 5, (8, 30), generator=g).float()
    target = torch.randint(-1, 4, (8, 30), generator=g)
    mask = torch.rand(8, 30, generator=g) > 0.2
    metric = RankingMetrics(tuple(names), ties="first", validate_args=False)
    metric.update(preds, target, mask=mask)  # first update outside: tables are grown on the host once
    with HostSyncGuard():
        metric.update(preds, target, mask=mask)
        metric.update(preds.double(), target, mask=mask)
