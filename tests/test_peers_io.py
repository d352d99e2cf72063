"""Peers' objects in, tables out (issue 19 item 4): DataFrames, dicts of dicts, ranx-like objects,
ir_measures' namedtuples and measure objects give what the same data read from TREC files gives;
Evaluation and RunComparison tables; ranx's and RecBole's measure names.

Oracles: the same data as TREC files (written by hand here, not by our writer), ir_measures'
own evaluation, sklearn's f1_score, brute force over tie orders and hand-computed values."""

from __future__ import annotations

import builtins
import csv
import io
import itertools
import math
import random

import pytest
import torch

ir_measures = pytest.importorskip("ir_measures")

from torch_rankeval import functional as F
from torch_rankeval import trec
from torch_rankeval.measures import parse_measure
from torch_rankeval.stats import compare_runs
from torch_rankeval.trec import TrecFormatError
from torch_rankeval.trec.convert import as_measures, as_qrels, as_run

MEASURES = ["map", "ndcg_cut.10", "P.5", "recip_rank", "bpref", "num_rel_ret", "Rprec", "recall.10", "f1@5"]


def _data(seed: int = 0):
    """Qrels with grades -1..3 and runs with many tied scores; q9 is judged only, q8 only retrieved."""
    rng = random.Random(seed)
    qrels, run = {}, {}
    for q in range(8):
        docs = [f"d{j}" for j in range(14)]
        qrels[f"q{q}"] = {d: rng.choice([-1, 0, 0, 1, 2, 3]) for d in rng.sample(docs, 9)}
        run[f"q{q}"] = {d: float(rng.choice([0.5, 1.0, 1.0, 2.0, -3.25])) for d in rng.sample(docs, 11)}
    qrels["q9"] = {"d1": 1}
    run["q8"] = {"d1": 1.0, "d2": 1.0}
    return qrels, run


def _files(tmp_path, qrels, run, tag="sys"):
    qpath, rpath = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qpath.write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items()))
    rpath.write_text(
        "".join(f"{q} Q0 {d} {i} {s!r} {tag}\n" for q, docs in run.items() for i, (d, s) in enumerate(docs.items()))
    )
    return qpath, rpath


def _same(a: trec.Evaluation, b: trec.Evaluation) -> None:
    assert a.qids == b.qids and a.summary == b.summary and list(a.per_query) == list(b.per_query)
    for name in a.per_query:
        assert torch.equal(a.per_query[name], b.per_query[name]), name


class RanxLike:
    """What ranx's Qrels and Run expose: to_dict() (a dict of dicts) and name."""

    def __init__(self, data, name=None):
        self._data, self.name = data, name

    def to_dict(self):
        return {q: dict(docs) for q, docs in self._data.items()}


@pytest.mark.parametrize("complete", [False, True])
def test_dicts_ranx_and_namedtuples_equal_files(tmp_path, complete):
    qrels, run = _data()
    qpath, rpath = _files(tmp_path, qrels, run)
    want = trec.evaluate(qpath, rpath, MEASURES, complete=complete)
    qrows = [ir_measures.Qrel(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    rrows = [ir_measures.ScoredDoc(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    random.Random(1).shuffle(rrows)  # row order does not matter: score, then docno decide the ranking
    for q_in, r_in in [
        (qrels, run),
        (RanxLike(qrels), RanxLike(run, "sys")),
        (qrows, rrows),
        (iter(qrows), (r for r in rrows)),
        (qrels, rrows),
    ]:
        _same(trec.evaluate(q_in, r_in, MEASURES, complete=complete), want)
    assert trec.evaluate(RanxLike(qrels), RanxLike(run, "bm25"), ["runid"]).info == {"runid": "bm25"}


def test_dataframes_equal_files(tmp_path):
    pd = pytest.importorskip("pandas")
    qrels, run = _data(3)
    qpath, rpath = _files(tmp_path, qrels, run)
    want = trec.evaluate(qpath, rpath, MEASURES)
    qdf = pd.DataFrame(
        [(q, d, g) for q, docs in qrels.items() for d, g in docs.items()], columns=["query_id", "doc_id", "relevance"]
    )
    rdf = pd.DataFrame(
        [(q, d, s) for q, docs in run.items() for d, s in docs.items()], columns=["query_id", "doc_id", "score"]
    )
    _same(trec.evaluate(qdf, rdf.sample(frac=1, random_state=0), MEASURES), want)
    trec_style_q = qdf.rename(columns={"query_id": "qid", "doc_id": "docno", "relevance": "rel"}).assign(iteration="0")
    trec_style_r = rdf.rename(columns={"query_id": "qid", "doc_id": "docno"}).assign(rank=0)
    _same(trec.evaluate(trec_style_q, trec_style_r, MEASURES), want)
    # integer ids are their decimal text, as in a file; a whole-number float grade column is read as integers
    ints_q = pd.DataFrame({"query_id": [1, 1, 2], "doc_id": [10, 11, 10], "relevance": [1.0, 0.0, 2.0]})
    ints_r = pd.DataFrame({"query_id": [1, 1, 2], "doc_id": [11, 10, 10], "score": [2, 1, 1]})
    (tmp_path / "q2").write_text("1 0 10 1\n1 0 11 0\n2 0 10 2\n")
    (tmp_path / "r2").write_text("1 Q0 11 1 2 t\n1 Q0 10 2 1 t\n2 Q0 10 1 1 t\n")
    _same(trec.evaluate(ints_q, ints_r, MEASURES), trec.evaluate(tmp_path / "q2", tmp_path / "r2", MEASURES))


def test_duplicates_are_refused_as_the_file_readers_refuse_them(tmp_path):
    (tmp_path / "q").write_text("q1 0 d1 1\nq1 0 d1 0\n")
    with pytest.raises(TrecFormatError, match="duplicate judgment of document 'd1' for query 'q1'"):
        trec.read_qrels(tmp_path / "q")
    with pytest.raises(TrecFormatError, match="duplicate judgment of document 'd1' for query 'q1'"):
        as_qrels([ir_measures.Qrel("q1", "d1", 1), ir_measures.Qrel("q1", "d1", 0)])
    (tmp_path / "r").write_text("q1 Q0 d1 1 1.0 t\nq1 Q0 d1 2 0.5 t\n")
    rows = [ir_measures.ScoredDoc("q1", "d1", 1.0), ir_measures.ScoredDoc("q1", "d1", 0.5)]
    with pytest.raises(TrecFormatError) as from_file:
        trec.evaluate({"q1": {"d1": 1}}, tmp_path / "r", ["map"])
    with pytest.raises(TrecFormatError) as from_rows:
        trec.evaluate({"q1": {"d1": 1}}, rows, ["map"])
    assert str(from_file.value).endswith("document 'd1' appears twice for query 'q1'")
    assert str(from_rows.value).endswith("document 'd1' appears twice for query 'q1'")
    with pytest.raises(ValueError, match="same id as text"):
        as_qrels({1: {"d1": 1}, "1": {"d2": 1}})


def test_wrong_types_and_columns_name_the_argument():
    with pytest.raises(TypeError, match=r"^qrels must be a Qrels, a path, a pandas DataFrame .*got int"):
        trec.evaluate(3, {"q1": {"d1": 1.0}}, ["map"])
    with pytest.raises(TypeError, match=r"^run must be a Run, a path, .*ScoredDoc.*got float"):
        trec.evaluate({"q1": {"d1": 1}}, 2.5, ["map"])
    with pytest.raises(TypeError, match="need the attributes query_id, doc_id and score"):
        as_run([("q1", "d1", 1.0)])
    with pytest.raises(TypeError, match="relevance grades must be integers"):
        as_qrels([ir_measures.Qrel("q1", "d1", 1.5)])
    with pytest.raises(TypeError, match="must be a str"):
        as_run([ir_measures.ScoredDoc(("q", 1), "d1", 1.0)])
    with pytest.raises(ValueError, match="finite"):
        as_run([ir_measures.ScoredDoc("q1", "d1", math.nan)])
    with pytest.raises(TypeError, match=r"measures: each measure must be a name .*got int"):
        trec.evaluate({"q1": {"d1": 1}}, {"q1": {"d1": 1.0}}, ["map", 3])


def test_dataframe_columns_and_dtypes_are_checked():
    pd = pytest.importorskip("pandas")
    with pytest.raises(
        ValueError, match=r"qrels: a DataFrame needs the columns query_id/doc_id/relevance or qid/docno/rel"
    ):
        as_qrels(pd.DataFrame({"q": ["a"], "d": ["b"], "r": [1]}))
    with pytest.raises(ValueError, match=r"run: a DataFrame needs the columns query_id/doc_id/score"):
        as_run(pd.DataFrame({"query_id": ["a"], "doc_id": ["b"], "relevance": [1]}))
    with pytest.raises(TypeError, match="relevance grades must be integers"):
        as_qrels(pd.DataFrame({"query_id": ["a"], "doc_id": ["b"], "relevance": [0.5]}))


def test_ir_measures_measure_objects_and_their_values():
    qrels, run = _data(5)
    objects = [ir_measures.nDCG @ 10, ir_measures.P(rel=2) @ 5, ir_measures.AP, ir_measures.RR, ir_measures.R @ 10]
    assert as_measures(objects) == ["nDCG@10", "P(rel=2)@5", "AP", "RR", "R@10"]
    # ir_measures averages over every judged query (a query the run misses scores 0): trec_eval's -c
    ours = trec.evaluate(qrels, run, objects, trec_eval_version="9.0.8", complete=True).summary
    theirs = ir_measures.calc_aggregate(objects, qrels, run)
    assert set(ours) == {str(m) for m in objects}
    for m in objects:
        assert ours[str(m)] == pytest.approx(theirs[m], abs=1e-12), m
    assert trec.evaluate(qrels, run, ir_measures.nDCG @ 5).summary == trec.evaluate(qrels, run, ["nDCG@5"]).summary


def test_evaluation_tables(tmp_path):
    qrels, run = _data(2)
    r = trec.evaluate(qrels, run, ["runid", "map", "P.5", "num_q", "num_rel_ret"])
    assert r.summary.keys() == {"map", "P_5", "num_q", "num_rel_ret"}
    assert all(isinstance(v, (int, float)) and not isinstance(v, str) for v in r.summary.values())
    assert r.info == {"runid": "run"} and list(r.printed) == ["runid", "map", "P_5", "num_q", "num_rel_ret"]
    d = r.to_dict()
    assert d["summary"] == r.summary and list(d["per_query"]) == r.qids
    for i, q in enumerate(r.qids):
        assert d["per_query"][q]["map"] == r.per_query["map"][i].item()
    assert d["per_query"]["q0"]["num_rel_ret"] == round(r.per_query["num_rel_ret"][0].item())
    text = r.to_csv(tmp_path / "out.csv", per_query=True)
    assert (tmp_path / "out.csv").read_text() == text
    rows = list(csv.DictReader(io.StringIO(text)))
    summary = {row["measure"]: row["value"] for row in rows if row["qid"] == "all"}
    assert {k: float(v) for k, v in summary.items()} == r.summary
    per_query = [row for row in rows if row["qid"] != "all"]
    assert [float(x["value"]) for x in per_query if x["measure"] == "map"] == r.per_query["map"].tolist()
    latex = r.to_latex(decimals=3, caption="A & B", label="tab:x")
    assert r"\caption{A \& B}" in latex and r"\label{tab:x}" in latex
    assert r"Run & map & P\_5 & num\_q & num\_rel\_ret \\" in latex
    assert f"run & {r.summary['map']:.3f} & {r.summary['P_5']:.3f} & {r.summary['num_q']} &" in latex


def test_to_pandas_with_pandas():
    pd = pytest.importorskip("pandas")
    qrels, run = _data(2)
    r = trec.evaluate(qrels, run, ["map", "P.5"])
    frame = r.to_pandas(per_query=True)
    assert frame.index.tolist() == r.qids and frame["map"].tolist() == r.per_query["map"].tolist()
    assert r.to_pandas().loc["run", "P_5"] == r.summary["P_5"]
    c = compare_runs({"a": run, "b": {q: {d: -s for d, s in docs.items()} for q, docs in run.items()}}, qrels=qrels)
    assert isinstance(c.to_pandas(), pd.DataFrame) and len(c.to_pandas()) == 2
    assert c.to_pandas("means").loc["b", "map"] == c.means[1, 1].item()


def test_without_pandas_to_pandas_says_how_to_install(monkeypatch):
    real = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("No module named 'pandas'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    qrels, run = _data(2)
    r = trec.evaluate(qrels, run, ["map"])
    with pytest.raises(ImportError, match=r"pip install torch-rankeval\[pandas\]"):
        r.to_pandas()
    c = compare_runs({"a": run, "b": {q: {d: -s for d, s in docs.items()} for q, docs in run.items()}}, qrels=qrels)
    with pytest.raises(ImportError, match=r"pip install torch-rankeval\[pandas\]"):
        c.to_pandas()
    assert r.to_csv() and r.to_latex() and r.to_dict() and c.to_csv() and c.to_latex() and c.to_dict()


def test_compare_runs_with_qrels_and_its_latex_table():
    qrels = {f"q{i}": {"d1": 1, "d2": 1, "d3": 0, "d4": 0} for i in range(10)}
    best = {q: {"d1": 4.0, "d2": 3.0, "d3": 2.0, "d4": 1.0} for q in qrels}  # P@2 = 1 everywhere
    mid = {q: {"d1": 4.0, "d3": 3.0, "d2": 2.0, "d4": 1.0} for q in qrels}  # P@2 = 0.5
    worst = {q: {"d3": 4.0, "d4": 3.0, "d1": 2.0, "d2": 1.0} for q in qrels}  # P@2 = 0
    c = compare_runs(
        {
            "best": best,
            "mid": RanxLike(mid, "x"),
            "worst": [ir_measures.ScoredDoc(q, d, s) for q, docs in worst.items() for d, s in docs.items()],
        },
        qrels=[ir_measures.Qrel(q, d, g) for q, docs in qrels.items() for d, g in docs.items()],
        measures=[ir_measures.P @ 2, "map"],
        n_resamples=2000,
    )
    assert c.runs == ("best", "mid", "worst") and c.measures == ("P@2", "map") and c.n_queries == 10
    assert c.means[:, 0].tolist() == [1.0, 0.5, 0.0]
    assert c.beats(0, 0) == [1, 2] and c.beats(1, 0) == [2] and c.beats(2, 0) == []
    latex = c.to_latex(decimals=2).splitlines()
    rows = [line for line in latex if line.startswith("(")]
    assert rows[0].startswith(r"(a) best & \textbf{1.00}$^{bc}$ & \textbf{")
    assert rows[1].startswith(r"(b) mid & 0.50$^{c}$ & ")
    assert rows[2].startswith(r"(c) worst & 0.00 & ")
    assert "paired randomization test (2000 resamples), Holm correction over the 3 pairs of runs" in latex[-2]
    # the same numbers as evaluating and comparing the per-query values (what the command line does)
    evaluations = {
        n: trec.evaluate(qrels, r, ["P@2", "map"], complete=True)
        for n, r in [("best", best), ("mid", mid), ("worst", worst)]
    }
    direct = compare_runs(evaluations, n_resamples=2000)
    assert torch.equal(direct.means, c.means) and torch.equal(direct.pvalue_adjusted, c.pvalue_adjusted)
    d = c.to_dict()
    assert d["means"]["mid"]["P@2"] == 0.5 and d["correction"] == "holm" and len(d["comparisons"]) == 6
    parsed = list(csv.DictReader(io.StringIO(c.to_csv())))
    assert [(p["measure"], p["run_a"], p["run_b"]) for p in parsed][:3] == [
        ("P@2", "best", "mid"),
        ("P@2", "best", "worst"),
        ("P@2", "mid", "worst"),
    ]
    assert [p["significant"] for p in parsed[:3]] == ["True", "True", "True"]
    assert float(parsed[0]["difference"]) == c.difference[0, 0].item()


def test_latex_bold_ties_and_markers_follow_significance():
    base = torch.tensor([0.25, 0.5, 0.125, 0.5, 0.375, 0.625, 0.25, 0.5])  # binary fractions: exact means
    scores = torch.stack([base, base.clone(), base + 0.125 * (torch.arange(8) % 2 * 2 - 1)])  # z: +-1/8, same mean
    c = compare_runs(scores, runs=["x_1", "y", "z"], measures=["ndcg_cut_10"], correction="bonferroni")
    rows = [line for line in c.to_latex().splitlines() if line.startswith("(")]
    assert [row.split(" & ")[1] for row in rows] == [r"\textbf{0.3906} \\"] * 3  # a three-way tie: all bold
    assert not c.significant.any() and all("$^{" not in row for row in rows)
    assert r"Run & ndcg\_cut\_10 \\" in c.to_latex() and "Bonferroni correction" in c.to_latex()


# ----------------------------------------------------------------------------- peers' names
def test_f1_against_sklearn_per_query(tmp_path):
    f1_score = pytest.importorskip("sklearn.metrics").f1_score
    qrels, run = _data(7)
    qrels = {q: docs for q, docs in qrels.items() if q in run}
    for k in (1, 3, 5, 11):
        r = trec.evaluate(qrels, run, [f"f1@{k}"])
        for i, q in enumerate(r.qids):
            ranked = sorted(run[q], key=lambda d: (-run[q][d], [-b for b in d.encode()]))
            docs = sorted(set(run[q]) | set(qrels[q]))
            truth = [int(qrels[q].get(d, 0) >= 1) for d in docs]
            top = set(ranked[:k])
            want = f1_score(truth, [int(d in top) for d in docs], zero_division=0.0)
            assert r.per_query[f"f1@{k}"][i].item() == pytest.approx(want, abs=1e-12), (q, k)


def test_f1_hand_examples_and_tie_average():
    preds, target = torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[1, 0, 1]])
    out = F.evaluate(preds, target, ["f1@1", "f1@2", "f1@5", "f1"], reduction="none")
    # P@1=1, R@1=1/2 -> 2/3; P@2=1/2, R@2=1/2 -> 1/2; k=5 beyond the list: P=2/5, R=1 -> 4/7 (ranx divides by k);
    # no cutoff: the whole list, P=2/3, R=1 -> 4/5
    assert [out[n].item() for n in ("f1@1", "f1@2", "f1@5", "f1")] == pytest.approx(
        [2 / 3, 1 / 2, 4 / 7, 4 / 5], abs=1e-6
    )
    # ties="average": the mean over every order of the tied documents, by brute force
    preds = torch.tensor([[1.0, 1.0, 1.0, 0.5, 0.5]], dtype=torch.float64)
    target = torch.tensor([[1, 0, 1, 1, 0]])
    for k in (1, 2, 3, 4):
        values = []
        for order in itertools.permutations(range(3)):
            for tail in itertools.permutations(range(3, 5)):
                ranking = [*order, *tail]
                h = sum(int(target[0, j]) for j in ranking[:k])
                values.append(2 * h / (k + 3))
        got = F.evaluate(preds, target, [f"f1@{k}"], ties="average")[f"f1@{k}"].item()
        assert got == pytest.approx(sum(values) / len(values), abs=1e-12), k


def test_ranx_and_recbole_names_parse_to_their_definitions():
    preds = torch.tensor([[0.9, 0.8, 0.7, 0.6]], dtype=torch.float64)
    target = torch.tensor([[0, 2, 0, 1]])
    out = F.evaluate(
        preds,
        target,
        ["ndcg_burges@4", "r-precision", "Hit@1", "Hit@2", "NDCG@2", "Recall@2", "MRR@4"],
        convention="trec_eval",
        reduction="none",
    )
    # ndcg_burges: gain 2**g - 1: DCG = 3/log2(3) + 1/log2(5); IDCG = 3 + 1/log2(3)
    dcg, idcg = 3 / math.log2(3) + 1 / math.log2(5), 3 + 1 / math.log2(3)
    assert out["ndcg_burges@4"].item() == pytest.approx(dcg / idcg, abs=1e-12)
    assert out["r-precision"].item() == 0.5  # R = 2 relevant, one in the top 2
    assert out["Hit@1"].item() == 0.0 and out["Hit@2"].item() == 1.0
    assert out["Recall@2"].item() == 0.5 and out["MRR@4"].item() == 0.5
    # RecBole's NDCG on its binary data: the library's ndcg (any gain agrees on binary grades)
    binary = (target > 0).long()
    assert F.evaluate(preds, binary, ["NDCG@2"], convention="trec_eval")["NDCG@2"].item() == pytest.approx(
        (1 / math.log2(3)) / 1 / (1 + 1 / math.log2(3)), abs=1e-12
    )
    assert parse_measure("ndcg_burges@10").params == (("dcg", "exp-log2"),)


@pytest.mark.parametrize(
    "name, advice",
    [
        ("hits@10", "k \\* P@k"),
        ("rbp.95", "RBP\\(p=0.95,rel=1\\)"),
        ("ItemCoverage@10", "ItemExposure"),
        ("GiniIndex@10", "ItemExposure"),
        ("ShannonEntropy@10", "ItemExposure"),
        ("AveragePopularity@10", "ItemExposure"),
        ("TailPercentage@10", "ItemExposure"),
    ],
)
def test_peer_names_without_our_measure_are_refused_with_advice(name, advice):
    with pytest.raises(ValueError, match=advice):
        parse_measure(name)


def test_recbole_map_is_the_min_k_relevant_denominator():
    # RecBole's MAP@k: sum over the top k of P@i at the relevant ranks, divided by min(k, R).
    # Ranking [rel, non, rel, rel], R = 3, k = 2: P@1 = 1 -> RecBole 1 / min(2, 3) = 1/2; trec_eval 1/3.
    preds, target = torch.tensor([[0.9, 0.8, 0.7, 0.6]]), torch.tensor([[1, 0, 1, 1]])
    assert F.evaluate(preds, target, ["MAP@2"], denominator="min_k_relevant")["MAP@2"].item() == 0.5
    assert F.evaluate(preds, target, ["MAP@2"], convention="trec_eval")["MAP@2"].item() == pytest.approx(1 / 3)
