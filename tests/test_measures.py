"""Measure names: the parser against trec_eval's and ir_measures' spellings, and the computed values
against pytrec_eval and ir_measures."""

from __future__ import annotations

import pytest
import torch

from tests.trec_fixtures import random_collection
from torch_rankeval import measures as M
from torch_rankeval import trec

pytrec_eval = pytest.importorskip("pytrec_eval")


@pytest.mark.parametrize(
    ("name", "key", "cutoffs", "labels", "trec_names", "ir_names"),
    [
        ("ndcg", "ndcg", [None], ["ndcg"], ["ndcg"], ["nDCG"]),
        ("ndcg_cut.10", "ndcg", [10], ["ndcg_cut_10"], ["ndcg_cut_10"], ["nDCG@10"]),
        (
            "ndcg_cut.10,5",
            "ndcg",
            [5, 10],
            ["ndcg_cut_5", "ndcg_cut_10"],
            ["ndcg_cut_5", "ndcg_cut_10"],
            ["nDCG@5", "nDCG@10"],
        ),
        ("map", "map", [None], ["map"], ["map"], ["AP"]),
        ("map_cut.10", "map", [10], ["map_cut_10"], ["map_cut_10"], ["AP@10"]),
        ("P.5", "precision", [5], ["P_5"], ["P_5"], ["P@5"]),
        ("recall.10", "recall", [10], ["recall_10"], ["recall_10"], ["R@10"]),
        ("recip_rank", "mrr", [None], ["recip_rank"], ["recip_rank"], ["RR"]),
        ("Rprec", "r_precision", [None], ["Rprec"], ["Rprec"], ["Rprec"]),
        ("success.10", "hit_rate", [10], ["success_10"], ["success_10"], ["Success@10"]),
        ("P_5", "precision", [5], ["P_5"], ["P_5"], ["P@5"]),
        ("ndcg_cut_20", "ndcg", [20], ["ndcg_cut_20"], ["ndcg_cut_20"], ["nDCG@20"]),
        ("nDCG@10", "ndcg", [10], ["nDCG@10"], ["ndcg_cut_10"], ["nDCG@10"]),
        ("nDCG", "ndcg", [None], ["nDCG"], ["ndcg"], ["nDCG"]),
        ("AP", "map", [None], ["AP"], ["map"], ["AP"]),
        ("AP@100", "map", [100], ["AP@100"], ["map_cut_100"], ["AP@100"]),
        ("P@5", "precision", [5], ["P@5"], ["P_5"], ["P@5"]),
        ("R@10", "recall", [10], ["R@10"], ["recall_10"], ["R@10"]),
        ("RR", "mrr", [None], ["RR"], ["recip_rank"], ["RR"]),
        ("RR@10", "mrr", [10], ["RR@10"], ["RR@10"], ["RR@10"]),
        ("mrr@10", "mrr", [10], ["mrr@10"], ["RR@10"], ["RR@10"]),
        ("ndcg@10", "ndcg", [10], ["ndcg@10"], ["ndcg_cut_10"], ["nDCG@10"]),
        ("NDCG@10", "ndcg", [10], ["NDCG@10"], ["ndcg_cut_10"], ["nDCG@10"]),
        ("hit_rate@5", "hit_rate", [5], ["hit_rate@5"], ["success_5"], ["Success@5"]),
        ("P(rel=2)@5", "precision", [5], ["P(rel=2)@5"], ["P(rel=2)@5"], ["P(rel=2)@5"]),
        ("P(rel=2.0)@5", "precision", [5], ["P(rel=2.0)@5"], ["P(rel=2)@5"], ["P(rel=2)@5"]),  # keys as written
        (
            "nDCG(gains={0:0,1:1,2:3})@10",
            "ndcg",
            [10],
            ["nDCG(gains={0:0,1:1,2:3})@10"],
            ["nDCG(gains={0:0,1:1,2:3})@10"],
            ["nDCG(gains={0:0,1:1,2:3})@10"],
        ),
        (
            "nDCG(dcg='exp-log2')@10",
            "ndcg",
            [10],
            ["nDCG(dcg='exp-log2')@10"],
            ["nDCG(dcg='exp-log2')@10"],
            ["nDCG(dcg='exp-log2')@10"],
        ),
        ("ndcg.0=0,1=1,2=3", "ndcg", [None], ["ndcg_0=0,1=1,2=3"], ["ndcg_0=0,1=1,2=3"], ["nDCG(gains={0:0,1:1,2:3})"]),
        ("num_rel_ret", "num_rel_ret", [None], ["num_rel_ret"], ["num_rel_ret"], ["NumRelRet"]),
        ("NumRet", "num_ret", [None], ["NumRet"], ["num_ret"], ["NumRet"]),
    ],
)
def test_names_parse_to_measures_and_output_names(name, key, cutoffs, labels, trec_names, ir_names):
    ms = M.parse_measures([name])
    assert [m.key for m in ms] == [key] * len(cutoffs)
    assert [m.cutoff for m in ms] == cutoffs
    assert [m.label for m in ms] == labels
    assert [m.trec_label for m in ms] == trec_names
    assert [m.ir_name() for m in ms] == ir_names


def test_spellings_of_one_measure_are_one_value():
    """Equality and hashing by value: every spelling of nDCG@10 is the same measure (no caches)."""
    import pickle

    spellings = ["ndcg@10", "nDCG@10", "ndcg_cut.10", "ndcg_cut_10", "NDCG@10"]
    measures = [M.parse_measure(n) for n in spellings]
    assert len(set(measures)) == 1 and all(m == measures[0] for m in measures)
    assert M.parse_measure("P(rel=2)@5") != M.parse_measure("P@5")
    assert M.parse_measure("nDCG(gains={1:1,2:3})@5") == M.parse_measure("nDCG(gains={2:3,1:1.0})@5")
    for m in measures + [M.parse_measure("nDCG(gains={1:1,2:3})@5")]:
        again = pickle.loads(pickle.dumps(m))
        assert again == m and again.label == m.label and hash(again) == hash(m)
    from torch_rankeval.conventions import DEFAULT

    plan = M.MeasurePlan(M.parse_measures(["nDCG@10", "ndcg_cut.10", "map"]), DEFAULT)
    assert pickle.loads(pickle.dumps(plan)).labels == ["nDCG@10", "ndcg_cut_10", "map"]


def test_registry_rows_have_kernels_names_and_the_readme_table():
    """One table: every family names its kernel and oracle, and the docs page of trec_eval's measures prints
    the registry's table."""
    from pathlib import Path

    for family in M.FAMILIES.values():
        if family.aggregate in ("info", "text"):  # runid, relstring: the TREC evaluation reports them
            assert family.kernel is None
            continue
        assert callable(family.kernel) and family.kernel.__name__ != "<lambda>", family.key
        assert family.oracle, family.key
    page = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "trec-eval-measures.md").read_text()
    assert M.markdown_table() in page
    # what each measure reads, its class, function and route: the measures page prints the rows' table
    page = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "measures.md").read_text()
    assert M.api_table() in page
    assert all(f"| `{f.key}` |" in M.api_table() for f in M.FAMILIES.values() if f.kernel is not None)


def test_ir_names_agree_with_ir_measures_parser():
    ir_measures = pytest.importorskip("ir_measures")
    for name in [
        "nDCG@10",
        "AP",
        "AP@100",
        "P@5",
        "R@10",
        "RR",
        "RR@10",
        "Rprec",
        "P(rel=2)@5",
        "Success@10",
        "nDCG(gains={0:0,1:1,2:3})@10",
        "R(rel=3)@20",
    ]:
        theirs = ir_measures.parse_measure(name).params
        ours = M.parse_measure(name)
        assert ours.cutoff == theirs.get("cutoff"), name
        assert ours.param("rel") == theirs.get("rel"), name
        if "gains" in theirs:
            assert dict(ours.param("gains")) == {float(k): float(v) for k, v in theirs["gains"].items()}


def test_trec_eval_default_cutoffs_and_parameter_rules():
    assert [m.cutoff for m in M.parse_measures("P")] == [5, 10, 15, 20, 30, 100, 200, 500, 1000]
    assert [m.cutoff for m in M.parse_measures("success")] == [1, 5, 10]
    assert [m.cutoff for m in M.parse_measures("ndcg_cut.10,20,23.4")] == [10, 20, 23]  # trec_eval truncates
    assert [m.label for m in M.parse_measures("P.5,7,3,5")] == ["P_3", "P_5", "P_7"]
    assert [m.label for m in M.parse_measures("ndcg.1=3,2=9,4=4.5")] == ["ndcg_1=3,2=9,4=4.5"]
    # A bare name takes the API's cutoffs where it gives some.
    assert [m.label for m in M.parse_measures(["P", "ndcg", "map", "Rprec"], cutoffs=[3, 7])] == [
        "P@3",
        "P@7",
        "ndcg@3",
        "ndcg@7",
        "map@3",
        "map@7",
        "Rprec",
    ]


def test_bare_names_take_the_apis_cutoffs_none_is_the_whole_list():
    """k=None in the functional API and the classes means the whole list, even for names that are also
    trec_eval's (``recall``, ``P``); only the command line's "own default" gives trec_eval's cutoffs."""
    from torch_rankeval import Precision, RankingMetrics, Recall

    assert Recall().keys == ["recall"] and Precision().keys == ["precision"] and Recall(k=5).keys == ["recall@5"]
    assert [m.cutoff for m in M.parse_measures(["recall", "P", "success"], cutoffs=(None,))] == [None, None, None]
    assert RankingMetrics(["recall"]).keys == ["recall"]
    # nicknames are trec_eval's sets in every API; their run tag (and relstring) is left out where there
    # is no run file; interpolated precision has no tie average: ties="first" (or convention="trec_eval")
    keys = RankingMetrics(["official"], ties="first").keys
    assert keys[:11] == [
        "num_q",
        "num_ret",
        "num_rel",
        "num_rel_ret",
        "map",
        "gm_map",
        "Rprec",
        "bpref",
        "recip_rank",
        "iprec_at_recall_0.00",
        "iprec_at_recall_0.10",
    ]
    assert "relstring" not in RankingMetrics(["all_trec"], convention="trec_eval").keys
    with pytest.raises(ValueError, match="iprec_at_recall_0.00'.*ties='first'"):
        RankingMetrics(["official"])
    with pytest.raises(ValueError, match="describes a run file"):
        RankingMetrics(["runid"])
    with pytest.raises(ValueError, match="is a text per query"):
        RankingMetrics(["relstring"])


def test_nicknames_and_merging():
    official = [m.trec_label for m in M.parse_measures("official")]
    assert official[:6] == ["runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map"]
    merged = M.parse_measures(["P.5", "map", "P.10", "map", "P@5", "P_5"])
    assert [m.label for m in merged] == ["P_5", "map", "P_10", "P@5"]
    assert [m.label for m in M.trec_order(M.parse_measures(["success.1", "ndcg", "recip_rank", "num_q"]))] == [
        "num_q",
        "recip_rank",
        "ndcg",
        "success_1",
    ]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("ndgc_cut.10", "Did you mean 'ndcg_cut'"),
        ("ndcg_cutt.10", "Did you mean 'ndcg_cut'"),
        ("mAPP", "Did you mean 'map'"),
        ("P.x", "cutoff 'x' is not a number"),
        ("P.0", "cutoffs must be positive"),
        ("P@0", "cutoff must be a positive int"),
        ("map.5", "takes no parameters"),
        ("ndcg.10", "for cutoffs use ndcg_cut.10"),
        ("nDCG(rel=2)@10", "unknown parameter 'rel'"),
        ("P(foo=1)@5", "unknown parameter"),
        ("P(rel=0)@5", "rel must be a positive number"),
        ("AP(judged_only=True)", "judged_only=True is not supported"),
        ("Rprec@5", "takes no cutoff"),
        ("nDCG(dcg='log10')@5", "dcg must be one of"),
        ("official", "names several measures"),
        ("P.5,10", "names 2 measures"),
        ("", "empty measure name"),
    ],
)
def test_bad_names_explain_themselves(name, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        M.parse_measure(name)


def test_measures_ranked_once_per_convention(monkeypatch):
    """Measures that share a convention share one ranking (one sort of the batch)."""
    import torch_rankeval.measures.plan as module

    calls = []
    original = module.prepare
    monkeypatch.setattr(module, "prepare", lambda *a, **k: calls.append(k["convention"]) or original(*a, **k))
    preds = torch.rand(4, 6, dtype=torch.float64)
    target = torch.randint(-1, 3, (4, 6))
    M.compute(M.parse_measures(["ndcg_cut.5", "map", "P.5", "recall.5", "recip_rank", "num_rel"]), preds, target)
    assert len(calls) == 1
    M.compute(M.parse_measures(["P.5", "P(rel=2)@5", "nDCG(dcg='exp-log2')@5"]), preds, target)
    assert len(calls) == 4


def test_every_spelling_works_in_every_api_with_the_same_value(tmp_path):
    """The issue's list of names: RankingMetrics, the functional API, the callback's metrics and the
    command line (through trec.evaluate) give the same value per name on the same data."""
    from tests.oracles import random_batch, to_pytrec
    from torch_rankeval import RankingMetrics
    from torch_rankeval import functional as F
    from torch_rankeval.lightning import RankingMetricsCallback

    names = ["ndcg@10", "nDCG@10", "ndcg_cut.10", "ndcg_cut_10", "P(rel=2)@5", "RR@10", "mrr@10", "map", "AP@100"]
    preds, target, mask, ideal = random_batch(30, 12, seed=5, extra_judged=3)
    metric = RankingMetrics(names, convention="trec_eval")
    metric.update(preds, target, mask=mask, ideal_target=ideal)
    streamed = metric.compute()
    functional = F.evaluate(preds, target, names, mask=mask, ideal_target=ideal, convention="trec_eval")
    callback = RankingMetricsCallback(RankingMetrics(names, convention="trec_eval")).build_metrics()
    callback.update(preds, target, mask=mask, ideal_target=ideal)
    logged = callback.compute()
    qrels, run = to_pytrec(preds, target, mask, ideal)
    cli = trec.evaluate(trec.Qrels.from_dict(qrels), trec.Run.from_dict(run), names).summary
    assert (
        list(streamed)
        == list(functional)
        == list(logged)
        == [
            "ndcg@10",
            "nDCG@10",
            "ndcg_cut_10",
            "P(rel=2)@5",
            "RR@10",
            "mrr@10",
            "map",
            "AP@100",
        ]
    )
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "map", "recip_rank"})
    res = evaluator.evaluate(run)
    want_ndcg = sum(v["ndcg_cut_10"] for v in res.values()) / len(res)
    want_map = sum(v["map"] for v in res.values()) / len(res)
    for name in streamed:
        assert streamed[name].item() == pytest.approx(cli[name], abs=1e-6), name
        assert functional[name].item() == pytest.approx(cli[name], abs=1e-6), name
        assert logged[name].item() == pytest.approx(cli[name], abs=1e-6), name
    for name in ("ndcg@10", "nDCG@10", "ndcg_cut_10"):
        assert cli[name] == pytest.approx(want_ndcg, abs=1e-12)
    assert cli["map"] == pytest.approx(want_map, abs=1e-12) and cli["AP@100"] == pytest.approx(want_map, abs=1e-12)


def test_geometric_mean_and_counts_in_the_streaming_metric():
    """gm_map and num_rel summarise as trec_eval does in RankingMetrics too (not as plain means)."""
    from tests.oracles import random_batch, to_pytrec
    from torch_rankeval import RankingMetrics

    preds, target, mask, ideal = random_batch(25, 10, seed=8, extra_judged=2)
    metric = RankingMetrics(["gm_map", "num_rel", "num_ret", "map"], convention="trec_eval")
    metric.update(preds[:10], target[:10], mask=mask[:10], ideal_target=ideal[:10])
    metric.update(preds[10:], target[10:], mask=mask[10:], ideal_target=ideal[10:])
    got = metric.compute()
    qrels, run = to_pytrec(preds, target, mask, ideal)
    res = pytrec_eval.RelevanceEvaluator(qrels, {"map", "num_rel", "num_ret"}).evaluate(run)
    aps = [res[f"q{i}"]["map"] for i in range(25)]
    gm = pytrec_eval.compute_aggregated_measure("gm_map", [torch.log(torch.tensor(max(a, 1e-5))).item() for a in aps])
    assert got["gm_map"].item() == pytest.approx(gm, rel=1e-5)
    assert got["num_rel"].item() == sum(res[f"q{i}"]["num_rel"] for i in range(25))
    assert got["num_ret"].item() == int(mask.sum())
    assert got["map"].item() == pytest.approx(sum(aps) / 25, abs=1e-6)


def _ir_measures_values(qrels, run, names):
    ir_measures = pytest.importorskip("ir_measures")
    parsed = [ir_measures.parse_measure(n) for n in names]
    out: dict[str, dict[str, float]] = {}
    # ir_measures' default pipeline may hand a measure to a provider with other tie rules
    # (msmarco, ranx) depending on set order; its pytrec_eval provider follows trec_eval.
    for metric in ir_measures.pytrec_eval.iter_calc(parsed, qrels, run):
        out.setdefault(str(metric.measure), {})[metric.query_id] = metric.value
    return {name: out[str(m)] for name, m in zip(names, parsed)}


def test_ir_names_match_ir_measures_values():
    """P(rel=2)@5, R(rel=3)@10, nDCG with a gain mapping and AP(rel=2) against ir_measures (pytrec_eval inside)."""
    qrels, run = random_collection(11)
    # ir_measures' gain mapping covers the grades it lists; give every grade a gain.
    names = ["P(rel=2)@5", "R(rel=3)@10", "nDCG(gains={0:0,1:1,2:3,3:7,4:15})@10", "AP(rel=2)", "nDCG@5"]
    expected = _ir_measures_values(qrels, run, names)
    result = trec.evaluate(trec.Qrels.from_dict(qrels), trec.Run.from_dict(run), names)
    for name in names:
        for i, qid in enumerate(result.qids):
            if qid in expected[name]:
                assert result.per_query[name][i].item() == pytest.approx(expected[name][qid], abs=1e-9), (name, qid)


def test_reciprocal_rank_at_k_against_pytrec_eval():
    """RR@k (no trec_eval name) is recip_rank when the first relevant document ranks within k, else 0."""
    qrels, run = random_collection(14)
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run)
    result = trec.evaluate(trec.Qrels.from_dict(qrels), trec.Run.from_dict(run), ["RR@1", "RR@3", "RR@10"])
    for k in (1, 3, 10):
        for i, qid in enumerate(result.qids):
            full = rr[qid]["recip_rank"]
            want = full if full > 0 and 1 / full <= k + 1e-9 else 0.0
            assert result.per_query[f"RR@{k}"][i].item() == pytest.approx(want, abs=1e-12)


def test_gain_mapping_equals_exp2_gain_for_those_grades():
    qrels, run = random_collection(12)
    q, r = trec.Qrels.from_dict(qrels), trec.Run.from_dict(run)
    a = trec.evaluate(q, r, ["nDCG(gains={1:1,2:3,3:7,4:15})@10"]).per_query
    b = trec.evaluate(q, r, ["nDCG(dcg='exp-log2')@10"]).per_query
    torch.testing.assert_close(next(iter(a.values())), next(iter(b.values())), rtol=0, atol=1e-12)


def test_unjudged_documents_have_zero_gain_even_when_grade_zero_gains():
    """Gains map judged grades; documents absent from the qrels (or judged negative) gain nothing."""
    preds = torch.tensor([[3.0, 2.0, 1.0]], dtype=torch.float64)
    target = torch.tensor([[-1, 0, 1]])
    ideal = torch.tensor([[0, 1, -1]])
    out = M.compute(M.parse_measures(["nDCG(gains={0:1,1:2})@3"]), preds, target, ideal_target=ideal)
    dcg = 1 / torch.log2(torch.tensor(3.0, dtype=torch.float64)) + 2 / 2.0  # ranks 2 and 3
    idcg = 2 + 1 / torch.log2(torch.tensor(3.0, dtype=torch.float64))
    assert out["nDCG(gains={0:1,1:2})@3"].item() == pytest.approx((dcg / idcg).item(), abs=1e-15)


def test_summaries():
    assert (
        M.summarize(M.parse_measure("map"), torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)) == (0.1 + 0.2 + 0.3) / 3
    )
    assert M.summarize(M.parse_measure("num_rel"), torch.tensor([2.0, 5.0])) == 7
    gm = M.summarize(M.parse_measure("gm_map"), torch.tensor([0.5, 0.0], dtype=torch.float64))
    assert gm == pytest.approx(
        pytrec_eval.compute_aggregated_measure("gm_map", [-0.6931471805599453, -11.512925464970229])
    )


#: One non-default value of each convention option a class or function may take (``OPTIONS``).
_OPTION_VALUES = dict(
    gain="linear",
    log_base=10.0,
    discount=lambda r: 1.0 / r,
    ties="first",
    relevance_threshold=2.0,
    empty_target_action="pos",
    denominator="retrieved_relevant",
    graded=True,
    adaptive_k=True,
    min_k_relevant=True,
    ideal_ranking="k_relevant",
)
#: Declared options whose effect the probe below cannot show, and why.
_READ_BUT_INVISIBLE = {
    ("ndcg", "log_base"): "a change of base scales DCG and ideal DCG alike: nDCG is the same (still read: DCG@k)",
    ("ndcg_rel", "log_base"): "as nDCG: a ratio of two DCGs",
    ("rndcg", "log_base"): "as nDCG: a ratio of two DCGs",
    (
        "alpha_dcg",
        "log_base",
    ): "ndeval's alpha-DCG is over its ideal-ideal value: a ratio, as nDCG (still read: discount=)",
    ("alpha_ndcg", "log_base"): "as nDCG: a ratio of two alpha-DCGs",
}


def test_each_row_reads_exactly_the_options_that_change_its_values():
    """A row's ``reads`` decides what its class and function accept (tests/test_signatures.py): an option it
    leaves out must never change its values, and one it lists must (on a batch with tied scores, graded
    grades, padding, lists shorter than the cutoff, queries without relevant (or without non-relevant)
    documents, judged flags and a
    relevant count beyond the list), so that no class refuses an option that matters."""
    from torch_rankeval import functional as F
    from torch_rankeval.measures.registry import OPTIONS

    assert set(_OPTION_VALUES) == set(OPTIONS)
    g = torch.Generator().manual_seed(0)
    n, length, subtopics = 32, 10, 3
    preds = torch.randint(0, 4, (n, length), generator=g).double()
    target = torch.randint(0, 4, (n, length), generator=g) * (torch.rand(n, length, generator=g) < 0.5)
    target[::7] = 0
    target[3] = 3  # every document relevant: fall-out's empty case
    mask = torch.ones(n, length, dtype=torch.bool)
    mask[::5, 2:] = False
    mask[1::6, 6:] = False
    sub = (torch.rand(n, length, subtopics, generator=g) < 0.3).long() * torch.randint(1, 3, (n, length, subtopics))
    sub[::7] = 0
    judged = torch.rand(n, length, generator=g) < 0.8
    judged[3] = True
    at = {"recall": 0.5, "multiple": 1.5}
    wrong = []
    for key, family in M.FAMILIES.items():
        if family.kernel is None:
            continue
        required = ",".join(f"{p.name}={p.example!r}" for p in family.params if p.required)  # catalog_size
        head = f"{key}({required})" if required else key
        name = f"{head}@{at[family.at]}" if family.at != "cutoff" else f"{head}@3" if family.cutoff else head
        base = {} if family.ties_average else {"ties": "first"}  # no exact tie-averaged value: a fixed order
        inputs = {"mask": mask} if family.subtopics else {"mask": mask, "judged": judged}

        def run(**options):  # noqa: ANN003, ANN202
            t = sub if family.subtopics else target
            out = F.evaluate(preds, t, [name], reduction="none", **inputs, **{**base, **options})[name]
            return out.double()

        plain = run()
        for option, value in _OPTION_VALUES.items():
            if option == "ties" and not family.ties_average:
                value = "pessimistic"
            changed = not torch.allclose(plain, run(**{option: value}), equal_nan=True)
            if option == "gain" and family.uses_gain == "graded":  # graded AP reads the gain
                changed = changed or not torch.allclose(run(graded=True), run(graded=True, gain=value), equal_nan=True)
            if option == "denominator" and not family.subtopics:  # shows with relevant documents not in the list
                n_rel = (target >= 1).sum(-1) + 1
                changed = changed or not torch.allclose(
                    run(n_relevant=n_rel), run(n_relevant=n_rel, denominator=value), equal_nan=True
                )
            declared = option in family.reads
            if changed and not declared:
                wrong.append(f"{key}: {option}= changes its values but its row does not read it")
            if declared and not changed and (key, option) not in _READ_BUT_INVISIBLE:
                wrong.append(f"{key}: its row reads {option}= but the probe sees no change")
    assert not wrong, "; ".join(wrong)
