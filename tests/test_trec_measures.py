"""trec_eval's whole measure set (bpref, infAP, iprec_at_recall, 11pt_avg, Rprec_mult, utility, binG,
G, ndcg_rel, Rndcg, relative_P, set_*, num_nonrel_judged_ret, yaap, relstring) against pytrec_eval on
random collections, trec_eval's C loops written out, brute-force enumeration of tie orders and
hand-computed examples; the same values in every API. (trec_eval's own expected outputs, line for
line: tests/test_cli.py.)"""

from __future__ import annotations

import itertools
import math
import random

import pytest
import torch

from tests.trec_fixtures import random_collection
from torch_rankeval import RankingMetrics, trec
from torch_rankeval import functional as F
from torch_rankeval import measures as M

pytrec_eval = pytest.importorskip("pytrec_eval")

# Every measure pytrec_eval (trec_eval 9.0.8) has, at trec_eval's default parameters, and some others.
PYTREC_MEASURES = {
    "num_q",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "map",
    "gm_map",
    "Rprec",
    "bpref",
    "recip_rank",
    "iprec_at_recall",
    "P",
    "recall",
    "infAP",
    "gm_bpref",
    "Rprec_mult",
    "utility",
    "11pt_avg",
    "binG",
    "G",
    "ndcg",
    "ndcg_rel",
    "Rndcg",
    "ndcg_cut",
    "map_cut",
    "relative_P",
    "success",
    "set_P",
    "set_relative_P",
    "set_recall",
    "set_map",
    "set_F",
    "num_nonrel_judged_ret",
}
# Parameters as trec_eval writes them. pytrec_eval names 11pt_avg and set_F without them, and cannot
# take utility's coefficients (it rejects every one) nor gains for G, ndcg_rel and Rndcg:
# test_utility_coefficients and test_gain_parameters_relabel_the_qrels check those.
PARAMETERS = [
    "iprec_at_recall.0.05,0.33,0.5,0.75",
    "Rprec_mult.0.35,0.5,3",
    "11pt_avg.0.25,0.5,0.75",
    "set_F.0.5",
    "relative_P.1,3,7,40",
]


def _pytrec(qrels, run, measures, level=1):
    return pytrec_eval.RelevanceEvaluator(qrels, set(measures), relevance_level=level).evaluate(run)


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize(("seed", "tie_levels"), [(0, 6), (1, 3), (2, 2), (3, 6), (4, 3)])
def test_every_measure_matches_pytrec_eval_per_query_and_summary(seed, tie_levels, level):
    """Ties, unjudged (absent) and pooled-unjudged (negative grade) documents, unretrieved relevant
    ones, queries only in the run: every per-query value and summary of trec_eval 9.0.8, at the
    default parameters (all_trec) and others (one pytrec_eval evaluator per parameterised measure:
    it names utility, 11pt_avg and set_F without their parameters)."""
    qrels, run = random_collection(seed, tie_levels=tie_levels)
    q, r = trec.Qrels.from_dict(qrels), trec.Run.from_dict(run)
    compared = set()
    for names, theirs in [("all_trec", PYTREC_MEASURES), *((spec, {spec}) for spec in PARAMETERS)]:
        expected = _pytrec(qrels, run, theirs, level)
        result = trec.evaluate(q, r, [names], relevance_level=level, trec_eval_version="9.0.8")
        assert result.qids == sorted(expected, key=lambda s: s.encode())
        first = next(iter(expected.values()))
        for o in result.outputs:
            if o.name == "runid":
                continue
            key = o.trec_name if o.trec_name in first else o.measure.trec_spelling().name
            if o.name in result.per_query:
                for i, qid in enumerate(result.qids):
                    assert result.per_query[o.name][i].item() == pytest.approx(expected[qid][key], abs=1e-12), (
                        o.trec_name,
                        qid,
                    )
            values = [v[key] for v in expected.values()]
            if o.trec_name == "num_q":
                assert result.summary[o.name] == len(values)
            elif o.measure.integer:
                assert result.summary[o.name] == sum(values)
            else:  # the mean, or exp(mean(log)) for gm_map and gm_bpref (pytrec_eval gives the logs per query)
                agg = pytrec_eval.compute_aggregated_measure(key, values)
                assert result.summary[o.name] == pytest.approx(agg, rel=1e-12, abs=1e-15), o.trec_name
            compared.add((o.measure.key, o.measure.params != ()))
    assert {key for key, _ in compared} >= {
        "bpref",
        "gm_bpref",
        "infap",
        "iprec_at_recall",
        "11pt_avg",
        "rprec_mult",
        "utility",
        "bing",
        "g",
        "ndcg_rel",
        "rndcg",
        "relative_precision",
        "set_precision",
        "set_relative_precision",
        "set_recall",
        "set_ap",
        "set_f",
        "num_nonrel_judged_ret",
    }
    assert {key for key, given in compared if given} >= {"11pt_avg", "set_f"}


def test_utility_coefficients():
    """utility = a r + b (n - r) + c (R - r) + d (0 - n - R + r), from pytrec_eval's counts (n retrieved,
    R relevant, r relevant retrieved); 0 for a query that -c adds."""
    qrels, run = random_collection(9)
    counts = _pytrec(qrels, run, {"num_ret", "num_rel", "num_rel_ret"})
    q, r = trec.Qrels.from_dict(qrels), trec.Run.from_dict(run)
    for a, b, c, d in [(2, -1, -0.5, 0.25), (1, -1, 0, 0), (0.5, 0, 3, -1)]:
        spec = f"utility.{a},{b},{c},{d}"
        result = trec.evaluate(q, r, [spec])
        for i, qid in enumerate(result.qids):
            n, big_r, rel = (counts[qid][k] for k in ("num_ret", "num_rel", "num_rel_ret"))
            want = a * rel + b * (n - rel) + c * (big_r - rel) + d * (0 + rel - n - big_r)
            assert result.per_query[f"utility_{a},{b},{c},{d}"][i].item() == pytest.approx(want, abs=1e-12)
    added = trec.evaluate(q, r, ["utility.1,-1,-1,0"], complete=True)
    missing = [i for i, ok in enumerate(added.retrieved.tolist()) if not ok]
    assert missing and (added.per_query["utility_1,-1,-1,0"][missing] == 0).all()


@pytest.mark.parametrize("seed", [5, 6])
def test_gain_parameters_relabel_the_qrels(seed):
    """G, ndcg_rel, Rndcg and ndcg with integer gains equal pytrec_eval's defaults (gain = grade) on
    qrels whose grades are replaced by those gains (pytrec_eval takes no gains for the first three)."""
    gains = {0: 0, 1: 3, 2: 9, 3: 3, 4: 4}
    qrels, run = random_collection(seed, tie_levels=3)
    relabelled = {q: {d: gains.get(g, g) for d, g in docs.items()} for q, docs in qrels.items()}
    expected = _pytrec(relabelled, run, {"G", "ndcg_rel", "Rndcg", "ndcg"})
    spec = ",".join(f"{g}={v}" for g, v in gains.items())
    names = [f"{base}.{spec}" for base in ("G", "ndcg_rel", "Rndcg", "ndcg")]
    result = trec.evaluate(trec.Qrels.from_dict(qrels), trec.Run.from_dict(run), names)
    for o in result.outputs:
        base = o.measure.trec_spelling().name
        for i, qid in enumerate(result.qids):
            assert result.per_query[o.name][i].item() == pytest.approx(expected[qid][base], abs=1e-12), (base, qid)


def _iprec_loop(rels: list[int], num_rel: int, levels, rounding: str, level: int = 1) -> list[float]:
    """trec_eval's te_calc_iprec_at_recall, written out loop for loop (10.0: lround; 9.x: +0.9, truncated)."""
    cut = [
        math.floor(x * num_rel + 0.5) if rounding == "lround" else int(x * num_rel + 0.9) for x in levels
    ]  # x * R >= 0 here: lround is floor(x + 0.5) away from exact halves of doubles
    values = [0.0] * len(levels)
    num_ret, rel_ret = len(rels), sum(r >= level for r in rels)
    current = len(levels) - 1
    while current >= 0 and cut[current] > rel_ret:
        current -= 1
    best = rel_ret / num_ret if num_ret else 0.0
    so_far = rel_ret
    i = num_ret
    while i > 0 and so_far > 0:
        best = max(best, so_far / i)
        if rels[i - 1] >= level:
            while current >= 0 and so_far == cut[current]:
                values[current] = best
                current -= 1
            so_far -= 1
        i -= 1
    while current >= 0:
        values[current] = best
        current -= 1
    return values


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_interpolated_precision_of_both_trec_eval_versions(seed):
    """trec_eval 10.0 rounds recall levels to documents with lround, 9.x with +0.9 truncated: the
    written-out loop agrees with pytrec_eval (9.0.8) under the old rounding, and with us under both."""
    qrels, run = random_collection(seed + 20, max_docs=40)
    levels = (0.0, 0.1, 0.15, 0.25, 0.3, 0.5, 0.7, 0.75, 0.9, 1.0)
    spec = "iprec_at_recall." + ",".join(map(str, levels))
    expected = _pytrec(qrels, run, {spec})
    q, r = trec.Qrels.from_dict(qrels), trec.Run.from_dict(run)
    new, old = (trec.evaluate(q, r, [spec], trec_eval_version=v) for v in ("10.0", "9.0.8"))
    batch = trec.to_tensors(q, r)
    differ = 0
    for i, qid in enumerate(new.qids):
        n = int(batch.mask[i].sum())
        rels = batch.target[i, :n].tolist()
        num_rel = sum(g >= 1 for g in qrels[qid].values())
        loop_old = _iprec_loop(rels, num_rel, levels, "v9")
        loop_new = _iprec_loop(rels, num_rel, levels, "lround")
        for j, x in enumerate(levels):
            name = f"iprec_at_recall_{x:3.2f}"
            assert loop_old[j] == pytest.approx(expected[qid][name], abs=1e-12)
            assert old.per_query[name][i].item() == loop_old[j]
            assert new.per_query[name][i].item() == loop_new[j]
            differ += loop_old[j] != loop_new[j]
    assert differ > 0  # the versions do differ on these collections


def _bpref_written_out(ranked, judged_nonrel_total, num_rel):
    """bpref of one ranking of grades (None: unjudged), trec_eval's loop."""
    nonrel, total = 0, 0.0
    for g in ranked:
        if g is None:
            continue
        if g < 1:
            nonrel += 1
        else:
            total += 1.0 - min(nonrel, num_rel) / min(judged_nonrel_total, num_rel) if nonrel else 1.0
    return total / num_rel


def test_bpref_tie_average_by_hand():
    """Scores 0.9 | 0.5 0.5 0.5 | 0.1, grades 0 | 1 0 0 | 1: R = 2, N = 3, min(N, R) = 2. The relevant
    document in the tie has 1 + U judged non-relevant documents above it, U uniform on 0..2:
    E[min(1 + U, 2)] = (1 + 2 + 2) / 3, term 1 - 5/6 = 1/6; the last one has 3 above: term 0."""
    preds = torch.tensor([[0.9, 0.5, 0.5, 0.5, 0.1]], dtype=torch.float64)
    target = torch.tensor([[0, 1, 0, 0, 1]])
    got = F.evaluate(preds, target, ["bpref"], reduction="none")["bpref"]
    assert got.tolist() == [pytest.approx((1 / 6 + 0) / 2, abs=1e-15)]
    orders = [[0, *p, 1] for p in itertools.permutations([1, 0, 0])]
    assert got.item() == pytest.approx(sum(_bpref_written_out(o, 3, 2) for o in orders) / len(orders), abs=1e-15)
    # ties="first": input order, the relevant document second
    first = F.evaluate(preds, target, ["bpref"], ties="first", reduction="none")["bpref"]
    assert first.item() == pytest.approx(_bpref_written_out([0, 1, 0, 0, 1], 3, 2), abs=1e-15)


# Lists with ties: scores, grades (-2: pooled but unjudged), judged flags, and extra judged grades
# that the ranking did not return (the ideal / judged set beyond the list).
TIED_LISTS = [
    ([0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [1, 0, 2, 0, 1, 0], [1, 1, 1, 1, 1, 1], [0, 3]),
    ([0.9, 0.5, 0.5, 0.5, 0.1, 0.1, 0.0], [0, 1, 0, 3, 1, 0, 2], [1, 1, 0, 1, 1, 1, 1], [1, 0, 0]),
    ([0.3, 0.3, 0.7, 0.7, 0.7, 0.2, 0.2], [2, 0, 0, 1, -2, 0, 1], [1, 1, 1, 1, 0, 1, 1], []),
    ([1.0, 1.0, 1.0, 0.0, 0.0, 0.0], [0, 0, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1], [0, 0, 0, 0]),
    ([0.2, 0.2, 0.2, 0.2, 0.1, 0.1, 0.1], [0, 4, 0, 2, 0, 1, 0], [1, 0, 1, 1, 1, 1, 0], [2, 2]),
]
AVERAGEABLE = [
    "bpref",
    "bpref(rel=2)",
    "gm_bpref",
    "binG",
    "binG(rel=2)",
    "Rndcg",
    "Rndcg.1=3,2=9,3=3",
    "Rprec_mult.0.2,0.5,1,1.6,3",
    "relative_P.1,2,3,4,9",
    "set_P",
    "set_relative_P",
    "set_recall",
    "set_map",
    "set_F.0.5",
    "utility.2,-1,-0.5,0.25",
    "num_nonrel_judged_ret",
]


@pytest.mark.parametrize("validate_args", [True, False])
@pytest.mark.parametrize(("preds", "target", "judged", "extra"), TIED_LISTS)
@pytest.mark.parametrize("gain", ["linear", "exp2"])
def test_average_ties_equal_mean_over_all_tie_orders(preds, target, judged, extra, gain, validate_args):
    """ties="average" is the exact mean over every order of the list (stable sort, ties="first"): the
    closed forms of bpref, binG, Rndcg, Rprec_mult and relative_P, and the set measures' invariance."""
    n = len(preds)
    ideal = torch.tensor([[g if j else -1 for g, j in zip(target, judged)] + extra])
    names = [m.label for m in M.parse_measures(AVERAGEABLE)]
    kw = {"gain": gain, "ideal_target": ideal, "ignore_index": -1}  # -1: the ideal's padding
    got = F.evaluate(
        torch.tensor([preds], dtype=torch.float64),
        torch.tensor([target]),
        names,
        judged=torch.tensor([judged]).bool(),
        ties="average",
        validate_args=validate_args,
        reduction="none",
        **kw,
    )
    perms = torch.tensor(list(itertools.permutations(range(n))))
    p, t, j = (
        torch.tensor(preds, dtype=torch.float64)[perms],
        torch.tensor(target)[perms],
        torch.tensor(judged).bool()[perms],
    )
    every = F.evaluate(
        p, t, names, judged=j, ties="first", reduction="none", **{**kw, "ideal_target": ideal.expand(len(perms), -1)}
    )
    for name in names:
        torch.testing.assert_close(got[name], every[name].mean(0, keepdim=True), atol=1e-12, rtol=0, msg=name)


@pytest.mark.parametrize("name", ["infAP", "IPrec@0.1", "iprec_at_recall.0.5", "11pt_avg", "G", "ndcg_rel", "yaap"])
def test_measures_without_a_tie_average_refuse_averaged_ties(name):
    with pytest.raises(ValueError, match=r"ties='first'.*convention='trec_eval'") as info:
        RankingMetrics([name])  # the library's default ties="average"
    assert repr(M.parse_measures([name])[0].label) in str(info.value)
    preds, target = torch.tensor([[0.5, 0.5, 0.1]]), torch.tensor([[1, 0, 1]])
    with pytest.raises(ValueError, match="no exact value averaged"):
        F.evaluate(preds, target, [name])
    for ties in ("first", "pessimistic", "optimistic"):
        assert all(torch.isfinite(v).all() for v in F.evaluate(preds, target, [name], ties=ties).values())
    assert F.evaluate(preds, target, [name], convention="trec_eval")


def _collection_with_unjudged(seed: int):
    """A padded batch (no tied scores) with judged flags: documents absent from the qrels and pooled
    but unjudged ones (grade -2), plus judged documents the ranking did not return; and the same as
    pytrec_eval dicts."""
    from tests.oracles import random_batch

    preds, target, mask, ideal = random_batch(40, 15, seed=seed, extra_judged=4)
    g = torch.Generator().manual_seed(seed)
    kind = torch.randint(0, 6, target.shape, generator=g)  # 0: absent from the qrels, 1: pooled, unjudged
    judged = kind >= 2
    target = torch.where(kind == 1, -2, target)
    length = preds.shape[1]
    ideal[:, :length] = torch.where(mask & judged, target, -1)
    qrels, run = {}, {}
    for i in range(preds.shape[0]):
        q = f"q{i}"
        run[q] = {f"d{j}": float(preds[i, j]) for j in range(length) if mask[i, j]}
        qrels[q] = {f"d{j}": int(target[i, j]) for j in range(length) if mask[i, j] and kind[i, j] >= 1}
        qrels[q].update({f"x{j}": int(ideal[i, j]) for j in range(length, ideal.shape[1])})
    return preds, target, mask, ideal, judged, qrels, run


def test_every_api_gives_the_command_lines_values():
    """RankingMetrics, the functional API and the callback (convention='trec_eval', judged flags) give
    the values of the TREC evaluation (the command line) for every measure of all_trec."""
    from torch_rankeval.lightning import RankingMetricsCallback

    preds, target, mask, ideal, judged, qrels, run = _collection_with_unjudged(3)
    names = [m.label for m in M.parse_measures(["all_trec", *PARAMETERS]) if m.family.kernel is not None]
    cli = trec.evaluate(trec.Qrels.from_dict(qrels), trec.Run.from_dict(run), names)
    inputs = {"mask": mask, "ideal_target": ideal, "judged": judged}
    metric = RankingMetrics(names, convention="trec_eval", ignore_index=-1)  # -1: the ideal's padding
    metric.update(preds[:25], target[:25], **{k: v[:25] for k, v in inputs.items()})
    metric.update(preds[25:], target[25:], **{k: v[25:] for k, v in inputs.items()})
    streamed = metric.compute()
    per_query = F.evaluate(preds, target, names, convention="trec_eval", reduction="none", ignore_index=-1, **inputs)
    callback = RankingMetricsCallback(RankingMetrics(names, convention="trec_eval", ignore_index=-1)).build_metrics()
    callback.update(preds, target, **inputs)
    logged = callback.compute()
    assert cli.qids == [f"q{i}" for i in sorted(range(40), key=lambda i: f"q{i}")]
    order = [int(q[1:]) for q in cli.qids]
    for name in names:
        want = cli.summary[name]
        assert streamed[name].item() == pytest.approx(want, rel=1e-6, abs=1e-9), name  # float32 running sums
        assert logged[name].item() == pytest.approx(want, rel=1e-6, abs=1e-9), name
        if name in cli.per_query:
            torch.testing.assert_close(per_query[name][order], cli.per_query[name], atol=1e-12, rtol=0, msg=name)
    expected = _pytrec(qrels, run, {"bpref", "infAP", "num_nonrel_judged_ret"})
    for i, qid in enumerate(cli.qids):  # pooled-unjudged documents count in infAP, not in bpref
        assert cli.per_query["infAP"][i].item() == pytest.approx(expected[qid]["infAP"], abs=1e-12)
        assert cli.per_query["bpref"][i].item() == pytest.approx(expected[qid]["bpref"], abs=1e-12)


@pytest.mark.parametrize("max_docs", [1, 3, 10])
def test_max_docs_is_a_run_cut_to_its_first_documents(max_docs):
    """trec_eval's -M: the run cut to each query's first documents in trec_eval's order (score
    descending, docno descending), evaluated by pytrec_eval."""
    qrels, run = random_collection(7)
    cut = {
        q: dict(
            sorted(sorted(docs.items(), key=lambda kv: kv[0].encode(), reverse=True), key=lambda kv: -kv[1])[:max_docs]
        )
        for q, docs in run.items()
    }
    expected = _pytrec(qrels, cut, {"num_ret", "map", "bpref", "set_F", "Rprec_mult", "infAP"})
    result = trec.evaluate(
        trec.Qrels.from_dict(qrels),
        trec.Run.from_dict(run),
        ["num_ret", "map", "bpref", "set_F", "Rprec_mult", "infAP"],
        max_docs=max_docs,
    )
    for name, values in result.per_query.items():
        for i, qid in enumerate(result.qids):
            assert values[i].item() == pytest.approx(expected[qid][name], abs=1e-12), (name, qid)


def test_relstring_and_its_parameter():
    qrels = trec.Qrels.from_dict({"q1": {"a": 1, "b": -1, "c": 12, "e": 0}, "q2": {"a": 3}})
    run = trec.Run.from_dict({"q1": {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0, "e": 0.5}, "q2": {"z": 1.0}})
    result = trec.evaluate(qrels, run, ["relstring", "map"])
    assert result.text == {"relstring": ["1.>-0", "-"]}  # 12 > 9, -1 in the qrels: pooled, d: absent
    assert "relstring" not in result.summary and [o.name for o in result.outputs] == ["map"]
    lines = trec.evaluate(qrels, run, ["relstring.3", "map"]).trec_lines(per_query=True)
    assert f"{'relstring_3':<22}\tq1\t'1.>'" in lines and not any("relstring" in x and "\tall\t" in x for x in lines)
    with_c = trec.evaluate(qrels, trec.Run.from_dict({"q1": {"a": 1.0}}), ["relstring"], complete=True)
    assert with_c.text["relstring"] == ["1", ""]  # trec_eval 10.0 prints '' for a query that -c adds
    old = trec.evaluate(
        qrels, trec.Run.from_dict({"q1": {"a": 1.0}}), ["relstring"], complete=True, trec_eval_version="9.0.8"
    )
    assert old.trec_lines(per_query=True) == ["relstring             \tq1\t'1'"]  # 9.0.8: no line for it


def test_trec_measures_follow_trec_eval_options():
    def labels(names, **kw):
        return [m.label for m in trec.trec_measures(names, **kw)]

    assert labels(["P", "P.7"]) == ["P_7"]  # a parameterised name replaces the defaults, as in trec_eval
    assert labels(["all_trec", "relstring.20"]).count("relstring_20") == 1 and "relstring" not in labels(
        ["all_trec", "relstring.20"]
    )
    assert "P_5" in labels(["official", "ndcg_cut.10"]) and labels(["P@7", "P"])[0] == "P@7"
    assert [
        m.param("rounding")
        for m in trec.trec_measures(["iprec_at_recall.0.5", "11pt_avg", "map"], trec_eval_version="9.0.8")
    ] == [
        "v9",
        "v9",
        None,
    ]
    with pytest.raises(ValueError, match="trec_eval_version must be one of"):
        trec.trec_measures(["map"], trec_eval_version="8")
    q, r = trec.Qrels.from_dict({"q1": {"a": 1}}), trec.Run.from_dict({"q1": {"a": 1.0}})
    with pytest.raises(ValueError, match="max_docs must be None or an int >= 1"):
        trec.evaluate(q, r, ["map"], max_docs=0)


@pytest.mark.parametrize(
    ("name", "key", "labels", "trec_names", "ir_names"),
    [
        ("bpref", "bpref", ["bpref"], ["bpref"], ["Bpref"]),
        ("Bpref(rel=2)", "bpref", ["Bpref(rel=2)"], ["Bpref(rel=2)"], ["Bpref(rel=2)"]),
        ("infAP", "infap", ["infAP"], ["infAP"], ["infAP"]),
        (
            "iprec_at_recall.0.1,.25",
            "iprec_at_recall",
            ["iprec_at_recall_0.10", "iprec_at_recall_0.25"],
            ["iprec_at_recall_0.10", "iprec_at_recall_0.25"],
            ["IPrec@0.1", "IPrec@0.25"],
        ),
        ("IPrec@0.5", "iprec_at_recall", ["IPrec@0.5"], ["iprec_at_recall_0.50"], ["IPrec@0.5"]),
        ("iprec_at_recall_0.20", "iprec_at_recall", ["iprec_at_recall_0.20"], ["iprec_at_recall_0.20"], ["IPrec@0.2"]),
        (
            "Rprec_mult.2,0.5",
            "rprec_mult",
            ["Rprec_mult_0.50", "Rprec_mult_2.00"],
            ["Rprec_mult_0.50", "Rprec_mult_2.00"],
            ["rprec_mult@0.5", "rprec_mult@2"],
        ),
        (
            "11pt_avg..25,.5,.75",
            "11pt_avg",
            ["11pt_avg_.25,.5,.75"],
            ["11pt_avg_.25,.5,.75"],
            ["11pt_avg(levels=(0.25,0.5,0.75))"],
        ),
        (
            "11pt_avg.0,.1,.2,.3,.4,.5,.6,.7,.8,.9,1",
            "11pt_avg",
            ["11pt_avg_0,.1,.2,.3,.4,.5,.6,.7,.8,.9,1"],
            ["11pt_avg_0,.1,.2,.3,.4,.5,.6,.7,.8,.9,1"],
            ["11pt_avg"],
        ),  # the defaults: one measure with 11pt_avg
        (
            "utility.2,-1,0,0",
            "utility",
            ["utility_2,-1,0,0"],
            ["utility_2,-1,0,0"],
            ["utility(coefficients=(2,-1,0,0))"],
        ),
        (
            "utility_2,-1,0,0",
            "utility",
            ["utility_2,-1,0,0"],
            ["utility_2,-1,0,0"],
            ["utility(coefficients=(2,-1,0,0))"],
        ),
        ("set_F.0.5", "set_f", ["set_F_0.5"], ["set_F_0.5"], ["SetF(beta=0.5)"]),
        ("SetF(beta=0.5)", "set_f", ["SetF(beta=0.5)"], ["set_F_0.5"], ["SetF(beta=0.5)"]),
        ("set_F.1", "set_f", ["set_F_1"], ["set_F_1"], ["SetF"]),
        ("relative_P.5", "relative_precision", ["relative_P_5"], ["relative_P_5"], ["relative_precision@5"]),
        ("relative_p@5", "relative_precision", ["relative_p@5"], ["relative_P_5"], ["relative_precision@5"]),
        ("G.1=3,2=9", "g", ["G_1=3,2=9"], ["G_1=3,2=9"], ["g(gains={1:3,2:9})"]),
        ("Rndcg", "rndcg", ["Rndcg"], ["Rndcg"], ["rndcg"]),
        ("SetAP", "set_ap", ["SetAP"], ["set_map"], ["SetAP"]),
        ("SetRelP", "set_relative_precision", ["SetRelP"], ["set_relative_P"], ["SetRelP"]),
        ("relstring.20", "relstring", ["relstring_20"], ["relstring_20"], ["relstring(length=20)"]),
        ("ideal_dcg", "idcg", ["ideal_dcg"], ["ideal_dcg"], ["idcg"]),
        (
            "num_nonrel_judged_ret",
            "num_nonrel_judged_ret",
            ["num_nonrel_judged_ret"],
            ["num_nonrel_judged_ret"],
            ["num_nonrel_judged_ret"],
        ),
    ],
)
def test_trec_eval_parameter_syntax_reads_and_prints(name, key, labels, trec_names, ir_names):
    ms = M.parse_measures([name])
    assert [m.key for m in ms] == [key] * len(labels)
    assert [m.label for m in ms] == labels
    assert [m.trec_label for m in ms] == trec_names
    assert [m.ir_name() for m in ms] == ir_names
    for m in ms:  # every printed name reads back as the same measure
        assert M.parse_measure(m.trec_label) == m


def test_spellings_of_new_measures_are_one_value():
    assert (
        M.parse_measure("set_F")
        == M.parse_measure("set_F.1")
        == M.parse_measure("SetF")
        == M.parse_measure("set_f(beta=1)")
    )
    assert (
        M.parse_measure("IPrec@0.1")
        == M.parse_measure("iprec_at_recall.0.1")
        == M.parse_measure("iprec_at_recall_0.10")
    )
    assert M.parse_measure("11pt_avg") == M.parse_measure("11pt_avg.0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1")
    assert M.parse_measure("utility") == M.parse_measure("utility.1,-1,0,0")
    assert M.parse_measure("IPrec(rounding='v9')@0.1") != M.parse_measure("IPrec@0.1")
    assert (
        M.parse_measure("IPrec(rounding='v9')@0.1").trec_label == "iprec_at_recall_0.10"
    )  # a version, not a measure name
    order = [
        m.trec_label for m in M.trec_order(M.parse_measures(["set_F", "G", "bpref", "IPrec@0.5", "IPrec@0.2", "P.5"]))
    ]
    assert order == ["bpref", "iprec_at_recall_0.20", "iprec_at_recall_0.50", "P_5", "G", "set_F"]


def test_ir_names_agree_with_ir_measures_parser():
    ir_measures = pytest.importorskip("ir_measures")
    for name in [
        "Bpref",
        "Bpref(rel=2)",
        "infAP",
        "IPrec@0.1",
        "IPrec(rel=2)@0.5",
        "SetP",
        "SetR",
        "SetF(beta=0.5)",
        "SetAP",
    ]:
        theirs = ir_measures.parse_measure(name)
        ours = M.parse_measure(name)
        assert ours.ir_name() == str(theirs) or ours.ir_name() == name, name
        for param, value in theirs.params.items():
            if value not in (None, False):  # judged_only=False, relative=False: defaults we do not spell
                assert ours.param(param) == value, (name, param)


def test_ir_measures_values_through_its_pytrec_eval_provider():
    """Bpref, infAP, IPrec and SetF as ir_measures computes them (trec_eval 9.0.8 inside)."""
    ir_measures = pytest.importorskip("ir_measures")
    qrels, run = random_collection(31)
    names = ["Bpref", "Bpref(rel=2)", "infAP", "IPrec@0.25", "SetF(beta=0.5)", "SetP", "SetR"]
    parsed = [ir_measures.parse_measure(n) for n in names]
    theirs: dict[str, dict[str, float]] = {}
    for metric in ir_measures.pytrec_eval.iter_calc(parsed, qrels, run):
        theirs.setdefault(str(metric.measure), {})[metric.query_id] = metric.value
    result = trec.evaluate(trec.Qrels.from_dict(qrels), trec.Run.from_dict(run), names, trec_eval_version="9.0.8")
    for name, m in zip(names, parsed):
        for i, qid in enumerate(result.qids):
            if qid in theirs[str(m)]:
                assert result.per_query[name][i].item() == pytest.approx(theirs[str(m)][qid], abs=1e-12), (name, qid)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("utility.1,2", "coefficients must be 4 finite numbers"),
        ("set_F.1,2", "trec_eval's set_F takes one value"),
        ("iprec_at_recall.x", "'x' is not a number"),
        ("IPrec", "needs its recall"),
        ("IPrec@x", "recall 'x' is not a number"),
        ("relstring.0", "length must be a positive integer"),
        ("relstring.2.5", "length must be a positive integer"),
        ("bpref@5", "takes no cutoff"),
        ("bpref.5", "takes no parameters"),
        ("G.x=1", "is not 'grade=gain'"),
        ("IPrec(rounding='v8')@0.1", "rounding must be one of"),
        ("Rprec_mult.-1", "multiple must be a number >= 0"),
    ],
)
def test_bad_parameters_explain_themselves(name, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        M.parse_measures([name])


def test_gm_bpref_summary_is_the_floored_geometric_mean():
    values = torch.tensor([0.5, 0.0, 0.25], dtype=torch.float64)
    want = math.exp((math.log(0.5) + math.log(1e-5) + math.log(0.25)) / 3)
    assert M.summarize(M.parse_measure("gm_bpref"), values) == pytest.approx(want, rel=1e-15)
    assert M.summarize(M.parse_measure("num_nonrel_judged_ret"), torch.tensor([3.0, 4.0])) == 7


def test_pooled_unjudged_documents_only_change_infap():
    """A document with a negative grade is in the pool but unjudged: infAP counts it above later
    relevant documents (a better estimate than an absent document), bpref and the rest do not."""
    rng = random.Random(0)
    for _ in range(20):
        grades = [rng.choice([0, 1, 2]) for _ in range(8)]
        pos = rng.randrange(1, 7)
        preds = torch.arange(8, 0, -1, dtype=torch.float64).unsqueeze(0)
        absent = torch.tensor([[-1 if j == pos else g for j, g in enumerate(grades)]])
        pooled = torch.tensor([[-2 if j == pos else g for j, g in enumerate(grades)]])
        names = M.parse_measures(["infAP", "bpref", "map", "num_nonrel_judged_ret", "binG"])
        a, b = M.compute(names, preds, absent), M.compute(names, preds, pooled)
        for name in ("bpref", "map", "num_nonrel_judged_ret", "binG"):
            assert torch.equal(a[name], b[name]), name
        later = any(g >= 1 for g in grades[pos + 1 :])  # a relevant document below the unjudged one
        assert (b["infAP"] > a["infAP"]).item() if later else torch.equal(b["infAP"], a["infAP"])


def _gain_loops(rels: list[int], judged: list[int], gains: dict[int, float]) -> tuple[float, float]:
    """trec_eval's te_calc_ndcg (dcg and ideal_dcg) with setup_gains/get_gain, written out."""
    levels = {g: 0 for g in range(max(judged, default=-1) + 1)}
    for g in judged:
        if g >= 0:
            levels[g] += 1
    table = {g: gains.get(g, float(g)) for g in [*levels, *gains]}
    ideal = sorted(((table[g], n) for g, n in levels.items()), reverse=True)
    ideal_seq = [gain for gain, n in ideal for _ in range(n)]
    dcg = sum(table.get(r, 0.0) / math.log2(i + 2) for i, r in enumerate(rels) if table.get(r, 0.0) != 0)
    idcg = 0.0
    for i, gain in enumerate(ideal_seq):
        if gain <= 0:
            break
        idcg += gain / math.log2(i + 2)
    return dcg, idcg


def test_yaap_dcg_and_ideal_dcg_equal_trec_eval_loops():
    """yaap (pytrec_eval lacks it) and trec_eval 10.0's dcg / ideal_dcg, against trec_eval's loops."""
    qrels, run = random_collection(13, tie_levels=3)
    q, r = trec.Qrels.from_dict(qrels), trec.Run.from_dict(run)
    gains = {1: 3.0, 2: 9.0, 4: 2.0}
    result = trec.evaluate(q, r, ["yaap", "dcg", "ideal_dcg"])
    mapped = trec.evaluate(q, r, ["dcg.1=3,2=9,4=2", "ideal_dcg.1=3,2=9,4=2"])  # one dcg per trec_eval run
    batch = trec.to_tensors(q, r)
    for i, qid in enumerate(result.qids):
        rels = batch.target[i, : int(batch.mask[i].sum())].tolist()
        judged = list(qrels[qid].values())
        num_rel = sum(g >= 1 for g in judged)
        s, so_far = 0.0, 0
        for rank, g in enumerate(rels, 1):
            if g >= 1:
                so_far += 1
                s += so_far / rank
        assert result.per_query["yaap"][i].item() == pytest.approx(math.log((1 + s) / (1 + num_rel - s)), abs=1e-12)
        for suffix, mapping in (("", {}), ("_1=3,2=9,4=2", gains)):
            dcg, idcg = _gain_loops(rels, judged, mapping)
            values = mapped.per_query if suffix else result.per_query
            assert values["dcg" + suffix][i].item() == pytest.approx(dcg, abs=1e-12)
            assert values["ideal_dcg" + suffix][i].item() == pytest.approx(idcg, abs=1e-12)


@pytest.mark.parametrize(("seed", "level"), [(40, 1), (41, 2)])
def test_command_line_prints_pytrec_evals_digits(tmp_path, seed, level):
    """`torch-rankeval evaluate -m all_trec -q --format trec` prints, digit for digit, the values of
    trec_eval 9.0.8 (pytrec_eval) for every query and the summary (relstring: test_cli's files)."""
    import io

    from tests.trec_fixtures import write_dicts
    from torch_rankeval.cli import main

    qrels, run = random_collection(seed, tie_levels=3)
    qrels_path, run_path = write_dicts(tmp_path, qrels, run)
    out = io.StringIO()
    argv = [str(qrels_path), str(run_path), "-m", "all_trec", "-q", "-l", str(level), "--format", "trec"]
    assert main(["evaluate", *argv, "--trec-eval-version", "9.0.8"], out) == 0
    expected = _pytrec(qrels, run, PYTREC_MEASURES, level)
    printed = 0
    for line in out.getvalue().splitlines():
        name, qid, value = (part.strip() for part in line.split("\t"))
        if name in ("runid", "relstring"):
            continue
        if qid == "all":
            values = [v[name] for v in expected.values()]
            want = len(values) if name == "num_q" else pytrec_eval.compute_aggregated_measure(name, values)
        else:
            want = expected[qid][name]
        integer = name.startswith("num_")
        assert value == (str(round(want)) if integer else f"{want:6.4f}"), (name, qid)
        printed += 1
    assert printed == 93 * (len(expected) + 1) - len(expected) * 3  # num_q, gm_map, gm_bpref: summary only


@pytest.mark.parametrize(
    ("qrels_file", "run_file", "level"),
    [
        ("qrels.comment.test", "results.comment.test", 1),
        ("qrels.comment.test", "results.comment.test", 2),
        ("qrels.rel_level", "results.test", 2),
        ("qrels.rel_level", "results.test", 3),
    ],
)
def test_real_collections_match_pytrec_eval(trec_eval_test_dir, qrels_file, run_file, level):
    """The TREC RAG 2024 collection (graded, docnos with '#') and the graded test collection at
    relevance levels trec_eval's expected outputs do not cover: every value of all_trec."""
    q = trec.read_qrels(trec_eval_test_dir / qrels_file)
    r = trec.read_run(trec_eval_test_dir / run_file)
    expected = _pytrec(q.to_dict(), r.to_dict(), PYTREC_MEASURES, level)
    result = trec.evaluate(q, r, "all_trec", relevance_level=level, trec_eval_version="9.0.8")
    compared = 0
    for o in result.outputs:
        for i, qid in enumerate(result.qids if o.name in result.per_query else []):
            assert result.per_query[o.name][i].item() == pytest.approx(expected[qid][o.trec_name], abs=1e-12)
            compared += 1
    assert compared == 90 * len(result.qids) and len(result.qids) == len(expected)
