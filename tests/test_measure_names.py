"""Measure names, second round: every name ir_measures prints parses to our equivalent measure (its
own registry is the oracle), ``Judged@k`` in ir_measures' spelling divides as ir_measures' Judged does,
results are keyed by the names as written, two different measures under one name are refused, and
the grammar refuses what it used to read leniently (a parameter given twice, ``_`` separators,
digits of other scripts, non-finite cutoffs)."""

from __future__ import annotations

import io
import json
import math

import pytest
import torch

from torch_rankeval import RankingMetrics, trec
from torch_rankeval import functional as F
from torch_rankeval import measures as M
from torch_rankeval.cli import main

ir_measures = pytest.importorskip("ir_measures")

# ir_measures' measure name -> our family (written by hand from ir_measures' documentation).
OURS = {
    "AP": "map",
    "Bpref": "bpref",
    "BPref": "bpref",
    "ERR": "err",
    "IPrec": "iprec_at_recall",
    "Judged": "judged",
    "MAP": "map",
    "MRR": "mrr",
    "NDCG": "ndcg",
    "NumQ": "num_q",
    "NumRel": "num_rel",
    "NumRelRet": "num_rel_ret",
    "NumRet": "num_ret",
    "P": "precision",
    "Precision": "precision",
    "R": "recall",
    "RBP": "rbp",
    "RPrec": "r_precision",
    "RR": "mrr",
    "Recall": "recall",
    "Rprec": "r_precision",
    "SetAP": "set_ap",
    "SetF": "set_f",
    "SetP": "set_precision",
    "SetR": "set_recall",
    "SetRelP": "set_relative_precision",
    "Success": "hit_rate",
    "infAP": "infap",
    "nDCG": "ndcg",
    "Compat": "compat",
    "Accuracy": "pairwise_accuracy",
    # intent-aware (ndeval's measures)
    "AP_IA": "ap_ia",
    "MAP_IA": "ap_ia",
    "ERR_IA": "err_ia",
    "nERR_IA": "nerr_ia",
    "NRBP": "nrbp",
    "nNRBP": "nnrbp",
    "P_IA": "p_ia",
    "StRecall": "strecall",
    # cwl_eval's C/W/L measures
    "BPM": "bpm",
    "INSQ": "insq",
    "INST": "inst",
    "NERR8": "nerr8",
    "NERR9": "nerr9",
    "NERR10": "nerr10",
    "NERR11": "nerr11",
    "SDCG": "sdcg",
    "alpha_DCG": "alpha_dcg",
    "alpha_nDCG": "alpha_ndcg",
    "α_DCG": "alpha_dcg",
    "α_nDCG": "alpha_ndcg",
}
# What ir_measures has and we do not.
NOT_OURS: set[str] = set()


def _variants(name: str, measure) -> list[str]:
    """ir_measures spellings of one registry entry: bare, with a cutoff, with parameters."""
    supported = measure.SUPPORTED_PARAMS
    base = [name] if "recall" not in supported else [f"{name}@0.25"]
    if name in ("P", "Precision"):  # bare `P` is trec_eval's P (its nine cutoffs): ir_measures' P@k parses
        base = []
    out = list(base)
    if "cutoff" in supported:
        out += [f"{name}@5", f"{name}@1"]
    if "rel" in supported:
        out += [f"{name}(rel=2)" + ("@0.5" if "recall" in supported else "@7" if "cutoff" in supported else "")]
    extra = {
        "p": "p=0.5",
        "beta": "beta=0.25",
        "alpha": "alpha=0.25",
        "dcg": "dcg='exp-log2'",
        "gains": "gains={0:0,1:1,2:5}",
    }
    for param, text in extra.items():
        if param == "dcg" and param in supported and "exp-log2" not in supported[param].choices:
            continue  # SDCG: dcg='log2' only (ir_measures' parser takes any value, its provider does not)
        if param in supported:
            out.append(f"{name}({text})" + ("@10" if "cutoff" in supported else ""))
    return out


def _theirs_family(measure) -> str:
    params = measure.params
    if measure.NAME == "SetP" and params.get("relative"):
        return "set_relative_precision"
    if measure.NAME == "NumRet" and params.get("rel") is not None:
        return "num_rel_ret"
    return OURS[measure.NAME]


def test_every_name_ir_measures_prints_for_a_measure_we_have_parses_to_it():
    registry = ir_measures.measures.registry
    assert set(registry) == set(OURS) | NOT_OURS  # the oracle's registry, all of it
    checked = 0
    for name, measure in sorted(registry.items()):
        printed = str(measure)
        if name in NOT_OURS:
            with pytest.raises(ValueError, match="unknown measure"):
                M.parse_measure(printed)
            continue
        for variant in _variants(name, measure):
            theirs = ir_measures.parse_measure(variant)
            printed = str(theirs)
            ours = M.parse_measure(printed)
            assert ours.key == _theirs_family(theirs), (variant, printed)
            assert ours.label == printed  # the name as written
            given = dict(theirs.params)
            cutoff = given.pop("cutoff", None)
            assert ours.cutoff == cutoff, printed
            if ours.family.at != "cutoff":  # IPrec@0.25: @ sets the recall level, in both
                assert ours.param(ours.family.at) == given.pop(ours.family.at), printed
            given.pop("relative", None)
            for param, value in given.items():
                want = value
                if param == "gains":  # both give an unlisted grade its grade as gain (ir_measures prints
                    mine = dict(ours.param("gains"))  # only the grades that differ)
                    for g in {*map(float, value), *mine}:
                        assert float(value.get(int(g), g)) == mine.get(g, g), (printed, g)
                    continue
                assert ours.param(param) == want, (printed, param)
            for param, info in theirs.SUPPORTED_PARAMS.items():  # the defaults ir_measures' spelling implies
                if param in given or param in ("cutoff", "judged_only", "relative", "rel", "dcg", "gains"):
                    continue
                if param == "p" and name != "Compat":  # RBP: 0.8; NERR10: 0.9
                    assert ours.param("p") == info.default == (0.8 if name == "RBP" else 0.9), printed
                elif param in ("beta", "alpha", "p", "normalize", "T", "min_rel"):
                    # SetF: beta 1; NRBP, alpha-nDCG: ndeval's 0.5; Compat: p 0.95, normalize True; C/W/L: T 1, min_rel 0
                    assert ours.param(param) == info.default, printed
            checked += 1
    assert checked >= 60
    # the two that ir_measures prints under another measure's name
    assert str(ir_measures.NumRelRet) == "NumRet(rel=1)" and str(ir_measures.SetRelP) == "SetP(relative=True)"
    assert M.parse_measure("NumRet(rel=1)") == M.parse_measure("num_rel_ret(rel=1)")
    assert M.parse_measure("SetP(relative=True)") == M.parse_measure("set_relative_P")
    assert M.parse_measure("SetP(relative=False, rel=2)") == M.parse_measure("SetP(rel=2)")
    with pytest.raises(ValueError, match="relative must be True or False"):
        M.parse_measure("SetP(relative='yes')")


def _judged_case():
    """Query q1 retrieves 3 documents (fewer than 5 and 10), 2 of them judged; q2 retrieves 6, 3 judged.
    Distinct scores: ir_measures breaks ties by docno ascending, trec_eval descending."""
    qrels = {"q1": {"a": 1, "b": 0}, "q2": {"d": 1, "e": 0, "f": 2}}
    run = {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"d": 6.0, "x": 5.0, "e": 4.0, "y": 3.0, "f": 2.0, "z": 1.0}}
    return qrels, run


def test_judged_in_ir_measures_spelling_divides_by_the_retrieved_as_ir_measures_does(tmp_path):
    qrels, run = _judged_case()
    names = ["Judged@2", "Judged@5", "Judged@10", "Judged"]
    want = {
        str(m): v
        for m, v in ir_measures.calc_aggregate([ir_measures.parse_measure(n) for n in names], qrels, run).items()
    }
    # by hand: q1 (a, b judged; c not): 2/2, 2/3, 2/3, 2/3; q2 (d, e, f judged): 1/2, 3/5, 3/6, 3/6
    by_hand = {
        "Judged@2": (1 + 1 / 2) / 2,
        "Judged@5": (2 / 3 + 3 / 5) / 2,
        "Judged@10": (2 / 3 + 1 / 2) / 2,
        "Judged": (2 / 3 + 1 / 2) / 2,
    }
    for n in names:
        assert want[n] == pytest.approx(by_hand[n], rel=1e-12), n
    got = trec.evaluate(trec.Qrels.from_dict(qrels), trec.Run.from_dict(run), names).summary
    for n in names:
        assert got[n] == pytest.approx(want[n], rel=1e-12), n
    # the command line: the same
    trec.write_qrels(tmp_path / "qrels", qrels)
    trec.write_run(tmp_path / "run", run)
    out = io.StringIO()
    argv = ["evaluate", str(tmp_path / "qrels"), str(tmp_path / "run"), "--format", "json"]
    assert main([*argv, *[a for n in names for a in ("-m", n)]], out) == 0
    summary = json.loads(out.getvalue())["runs"][0]["summary"]
    for n in names:
        assert summary[n] == pytest.approx(want[n], rel=1e-12), n
    # the functional API and the Metric class (every document of the lists judged unless flagged)
    preds = torch.tensor([[3.0, 2.0, 1.0, 0.0, 0.0, 0.0], [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]])
    target = torch.tensor([[1, 0, 0, 0, 0, 0], [1, 0, 0, 0, 2, 0]])
    mask = torch.tensor([[True] * 3 + [False] * 3, [True] * 6])
    judged = torch.tensor([[True, True, False, False, False, False], [True, False, True, False, True, False]])
    out = F.evaluate(preds, target, names, mask=mask, judged=judged)
    for n in names:
        assert out[n].item() == pytest.approx(want[n], rel=1e-6), n
    # the library's judged@k keeps the convention's denominator: k (trec_eval's "unj" reading)
    assert F.evaluate(preds, target, ["judged@10"], mask=mask, judged=judged)["judged@10"].item() == pytest.approx(
        (2 / 10 + 3 / 10) / 2
    )
    assert M.parse_measure("Judged@10") != M.parse_measure("judged@10")
    assert M.parse_measure("Judged@10") == M.parse_measure("judged(adaptive_k=True)@10")
    metric = RankingMetrics(names)
    metric.update(preds, target, mask=mask, judged=judged)
    for n, v in metric.compute().items():
        assert v.item() == pytest.approx(want[n], rel=1e-6), n


# ----------------------------------------------------------------------------- keys as written
KEYS = ["RBP(p=0.8,rel=1)", "RBP(p=0.8)", "P(rel=2.0)@5", "nDCG(dcg='log2')@3", "SetF(beta=1)", "AP(rel=1)@10"]


def test_keys_are_the_names_as_written_everywhere():
    preds = torch.tensor([[0.9, 0.8, 0.7, 0.1], [0.2, 0.4, 0.6, 0.8]])
    target = torch.tensor([[2, 0, 1, 0], [0, 1, 0, 2]])
    assert list(F.evaluate(preds, target, KEYS, convention="trec_eval")) == KEYS
    metric = RankingMetrics(KEYS, convention="trec_eval")
    metric.update(preds, target)
    assert list(metric.compute()) == KEYS
    assert list(M.compute(M.parse_measures(KEYS), preds.double(), target)) == KEYS
    # a cutoff from the API's k is appended to the name as written
    assert list(F.evaluate(preds, target, ["RBP(p=0.8)@2", "P(rel=2.0)"], k=[1, 3])) == [
        "RBP(p=0.8)@2",
        "P(rel=2.0)@1",
        "P(rel=2.0)@3",
    ]
    # equal measures still compare equal, and are computed once
    assert M.parse_measure("RBP(p=0.8,rel=1)") == M.parse_measure("RBP(rel=1)")
    assert M.parse_measure("P(rel=2.0)@5") == M.parse_measure("P(rel=2)@5")
    out = F.evaluate(preds, target, ["RBP(p=0.8,rel=1)", "RBP(rel=1)"])
    assert out["RBP(p=0.8,rel=1)"].item() == out["RBP(rel=1)"].item()
    plan = M.MeasurePlan(M.parse_measures(["RBP(p=0.8,rel=1)", "RBP(rel=1)"]), metric.convention)
    assert plan._n_unique == 1


# ----------------------------------------------------------------------------- one name, one measure
@pytest.mark.parametrize(
    "names",
    [
        ["iprec_at_recall.0.1,0.101"],  # both print iprec_at_recall_0.10
        ["iprec_at_recall.0.1", "iprec_at_recall.0.104"],
        ["Rprec_mult.0.2,0.201"],
        ["Rprec_mult_0.20", "Rprec_mult.0.2049"],
    ],
)
def test_two_measures_under_one_name_are_refused(names):
    preds, target = torch.tensor([[0.9, 0.8, 0.7, 0.1]]), torch.tensor([[0, 1, 1, 0]])
    with pytest.raises(ValueError, match="different measures are named"):
        F.evaluate(preds, target, names, convention="trec_eval")
    with pytest.raises(ValueError, match="different measures are named"):
        RankingMetrics(names, convention="trec_eval")
    with pytest.raises(ValueError, match="different measures are named"):
        trec.trec_measures(names)


def test_spelled_apart_both_come_back():
    preds, target = torch.tensor([[0.9, 0.8, 0.7, 0.1]]), torch.tensor([[0, 1, 1, 0]])
    out = F.evaluate(preds, target, ["IPrec@0.1", "IPrec@0.101", "iprec_at_recall.0.5"], convention="trec_eval")
    assert list(out) == ["IPrec@0.1", "IPrec@0.101", "iprec_at_recall_0.50"]
    # by hand: ranking 0,1,1,0 -> R = 2; precision 1/2 at recall 1/2, 2/3 at recall 1: interpolated
    # precision at any level <= 1/2 is max(1/2, 2/3) = 2/3
    assert [round(v.item(), 6) for v in out.values()] == [round(2 / 3, 6)] * 3
    # the trec_eval printed names of two measures may coincide in measures.compute(style="trec")
    with pytest.raises(ValueError, match="different measures are named 'iprec_at_recall_0.10'"):
        M.compute(M.parse_measures(["IPrec@0.1", "IPrec@0.101"]), preds.double(), target, style="trec")


# ----------------------------------------------------------------------------- strict grammar
REFUSED = [
    ("P(rel=2,rel=3)@5", "parameter rel is given twice"),
    ("nDCG(dcg='log2', dcg='exp-log2')@5", "parameter dcg is given twice"),
    ("rbp.p=0.5,p=0.6", "p is given twice"),
    ("ndcg.1=3,1=4", "grade 1 is given twice"),
    ("nDCG@1_0", "'_' separators are not read"),
    ("P.1_0", "'_' separators are not read"),
    ("P_1_0", "unknown measure"),
    ("P(rel=1_0)@5", "'_' separators are not read"),
    ("IPrec@0_5", "'_' separators are not read"),
    ("iprec_at_recall.0_5", "'_' separators are not read"),
    ("nDCG@\u0661\u0660", "ASCII"),  # Arabic-Indic 10
    ("P.\u0661\u0660", "ASCII"),
    ("P_\u0661\u0660", "ASCII"),
    ("nDCG@\uff11\uff10", "ASCII"),  # full-width 10
    ("utility.\u0661,-1,0,0", "ASCII"),
    ("ndcg.\u0661=3", "integer grade"),
    ("nDCG@+10", "is not an integer"),
    ("nDCG@ 10", "is not an integer"),
    ("P.inf", "cutoff 'inf' is not a finite number"),
    ("P.1e400", "cutoff '1e400' is not a finite number"),
    ("P.nan", "cutoff 'nan' is not a number"),
]


@pytest.mark.parametrize(("name", "message"), REFUSED, ids=[n for n, _ in REFUSED])
def test_lenient_spellings_are_refused_with_the_fix(name, message):
    with pytest.raises(ValueError, match="measure ") as caught:
        M.parse_measures([name])
    text = str(caught.value)
    assert message in text, text
    assert repr(name) in text  # names the measure


def test_strict_numbers_still_read_every_plain_spelling():
    assert [m.cutoff for m in M.parse_measures(["P.5, 10"])] == [5, 10]
    assert [m.cutoff for m in M.parse_measures(["ndcg_cut.23.4"])] == [23]  # trec_eval truncates
    assert M.parse_measure("P.9223372036854775807").cutoff == 2**63 - 1  # read exactly, not through a float
    assert M.parse_measure("IPrec@.5").param("recall") == 0.5
    assert M.parse_measure("iprec_at_recall.5e-1").param("recall") == 0.5
    assert M.parse_measure("utility.1,-1,0,0.5").param("coefficients") == (1.0, -1.0, 0.0, 0.5)
    assert dict(M.parse_measure("ndcg.-1=0,2=3").param("gains")) == {-1.0: 0.0, 2.0: 3.0}
    assert M.parse_measure("rbp.p=0.5,2=1").param("p") == 0.5
    assert M.parse_measure("P(rel=2.5)@5").param("rel") == 2.5
    assert math.isclose(M.parse_measure("RBP(p=.5)").param("p"), 0.5)


def test_a_relevance_level_beyond_int64_makes_nothing_relevant(tmp_path):
    """``P(rel=1e300)@5``: a valid positive level that no grade reaches, not an OverflowError
    (integer grades compared with a Python int beyond 64 bits)."""
    preds, target = torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[3, 1, 0]])
    names = ["P(rel=1e300)@2", "P(rel=100000000000000000000000)@2", "RR(rel=1e19)", "P(rel=3)@2"]
    out = F.evaluate(preds, target, names, convention="trec_eval")
    assert [v.item() for v in out.values()] == [0.0, 0.0, 0.0, 0.5]  # by hand: only grade 3 reaches rel=3
    trec.write_qrels(tmp_path / "qrels", {"q1": {"a": 3, "b": 1}})
    trec.write_run(tmp_path / "run", {"q1": {"a": 0.9, "b": 0.8, "c": 0.7}})
    text = io.StringIO()
    argv = ["evaluate", str(tmp_path / "qrels"), str(tmp_path / "run"), "-m", "P(rel=1e300)@2", "--format", "json"]
    assert main(argv, text) == 0
    assert json.loads(text.getvalue())["runs"][0]["summary"] == {"P(rel=1e300)@2": 0.0}
