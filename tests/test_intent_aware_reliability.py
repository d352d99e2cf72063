"""Intent-aware measures, issue 27 items 1, 2 and 5: alpha-DCG reads the convention's discount
(``discount=``, ``log_base=``) as every DCG measure does, against TF-Ranking's own expected values
(``tensorflow_ranking/python/metrics_impl_test.py``, class ``AlphaDCGMetricTest``, transcribed) and
pyndeval; the diversity route refuses a document retrieved twice for one query with the shared check
of every other route; subtopics are numbered per query, so values and memory do not depend on how a
file labels them (pyndeval as the oracle)."""

from __future__ import annotations

import io
import math
import random
from pathlib import Path

import pytest
import torch

from torch_rankeval import RankingMetrics
from torch_rankeval import functional as F

pyndeval = pytest.importorskip("pyndeval")

REPO = Path(__file__).resolve().parents[1]
PLAIN = "alpha_DCG(norm='none')"  # TF-Ranking's AlphaDCGMetric: the plain sum


def log2p1(x: float) -> float:
    """TF-Ranking's test helper: ``log2(1 + x)``."""
    return math.log2(1.0 + x)


# ----------------------------------------------------------------------------- item 1: the discount
def tf_alpha_dcg(scores, labels, k=None, **conventions) -> list[float]:
    """Our plain alpha-DCG of each list (TF-Ranking's ``AlphaDCGMetric(topn=k)``)."""
    name = PLAIN if k is None else f"{PLAIN}@{k}"
    out = F.evaluate(torch.tensor(scores), torch.tensor(labels), name, reduction="none", **conventions)
    return out[name].tolist()


def test_tf_ranking_custom_rank_discount_fn():
    """AlphaDCGMetricTest::test_alphadcg_should_handle_custom_rank_discount_fn: labels
    [[[1,0],[1,1],[0,1],[1,0]]], scores [[1,3,2,4]], rank_discount_fn 1 / (10 + rank)."""
    scores, labels = [[1.0, 3.0, 2.0, 4.0]], [[[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 0.0]]]
    expected = (
        (1.0 * (1.0 - 0.5) ** 0.0) / (10.0 + 1.0)
        + (1.0 * (1.0 - 0.5) ** 0.0) / (10.0 + 2.0)
        + (1.0 * (1.0 - 0.5) ** 1.0) / (10.0 + 2.0)
        + (1.0 * (1.0 - 0.5) ** 1.0) / (10.0 + 3.0)
        + (1.0 * (1.0 - 0.5) ** 2.0) / (10.0 + 4.0)
    )
    assert expected == pytest.approx(0.272228, abs=1e-6)  # the figure

    def discount(rank):
        return 1.0 / (10.0 + rank)

    assert tf_alpha_dcg(scores, labels, discount=discount) == pytest.approx([expected], abs=1e-6)
    # the Metric classes read the same discount (their buffer table), over two updates
    metric = RankingMetrics([PLAIN, "alpha_nDCG@3"], discount=discount)
    metric.update(torch.tensor(scores), torch.tensor(labels))
    metric.update(torch.tensor(scores), torch.tensor(labels))
    assert metric.compute()[PLAIN].item() == pytest.approx(expected, abs=1e-6)
    # without it, the log2 discount (what the issue saw silently: 2.30406)
    assert tf_alpha_dcg(scores, labels) == pytest.approx([1 + 1.5 / log2p1(2) + 0.5 / log2p1(3) + 0.25 / log2p1(4)])


def test_tf_ranking_alpha_dcg_cases_with_the_default_discount():
    """The neighbouring AlphaDCGMetricTest cases (default rank discount 1 / log2(1 + rank)), transcribed."""
    # test_alphadcg_should_be_single_value
    assert tf_alpha_dcg([[1.0, 3.0, 2.0]], [[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]]) == pytest.approx(
        [(1.0 * (1.0 - 0.5) ** 0.0) / log2p1(1.0) + (1.0 * (1.0 - 0.5) ** 0.0) / log2p1(2.0)]
    )
    # test_alphadcg_should_handle_single_subtopic
    assert tf_alpha_dcg([[1.0, 3.0, 2.0]], [[[0.0], [0.0], [1.0]]]) == pytest.approx(
        [(1.0 * (1.0 - 0.5) ** 0.0) / log2p1(2.0)]
    )
    # test_alphadcg_should_handle_multiple_subtopics
    labels = [[[0.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0]]]
    assert tf_alpha_dcg([[1.0, 3.0, 2.0]], labels) == pytest.approx(
        [
            (1.0 * (1.0 - 0.5) ** 0.0) / log2p1(1.0)
            + (1.0 * (1.0 - 0.5) ** 0.0) / log2p1(1.0)
            + (1.0 * (1.0 - 0.5) ** 0.0) / log2p1(1.0)
            + (1.0 * (1.0 - 0.5) ** 1.0) / log2p1(2.0)
            + (1.0 * (1.0 - 0.5) ** 0.0) / log2p1(2.0)
            + (1.0 * (1.0 - 0.5) ** 2.0) / log2p1(3.0)
        ]
    )
    # test_alphadcg_should_be_0_when_no_rel_items
    assert tf_alpha_dcg([[1.0, 3.0, 2.0]], [[[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]]) == [0.0]
    # test_alphadcg_should_be_single_value_per_list
    scores = [[1.0, 3.0, 2.0, 4.0], [4.0, 1.0, 3.0, 2.0]]
    labels = [
        [[0.0, 0.0], [0.0, 0.0], [1.0, 1.0], [1.0, 0.0]],
        [[1.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]],
    ]
    assert tf_alpha_dcg(scores, labels) == pytest.approx(
        [
            (1.0) / log2p1(1.0) + (1.0 * (1.0 - 0.5) ** 0.0) / log2p1(3.0) + (1.0 * (1.0 - 0.5) ** 1.0) / log2p1(3.0),
            (1.0 * (1.0 - 0.5) ** 0.0) / log2p1(1.0)
            + (1.0 * (1.0 - 0.5) ** 1.0) / log2p1(2.0)
            + (1.0 * (1.0 - 0.5) ** 0.0) / log2p1(3.0)
            + (1.0 * (1.0 - 0.5) ** 1.0) / log2p1(4.0)
            + (1.0 * (1.0 - 0.5) ** 2.0) / log2p1(4.0),
        ]
    )
    # test_alphadcg_should_handle_topn
    scores, labels = [[3.0, 2.0, 1.0, 4.0, 5.0]], [[[1.0, 0.0], [0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]]
    assert tf_alpha_dcg(scores, labels, 1) == pytest.approx([(1.0 * (1.0 - 0.5) ** 0.0) / log2p1(1.0)])
    top2 = (1.0 * (1.0 - 0.5) ** 0.0) / log2p1(1.0) + (1.0 * (1.0 - 0.5) ** 0.0) / log2p1(2.0)
    top2 += (1.0 * (1.0 - 0.5) ** 1.0) / log2p1(2.0)
    assert tf_alpha_dcg(scores, labels, 2) == pytest.approx([top2])
    top6 = top2 + (1.0 * (1.0 - 0.5) ** 1.0) / log2p1(3.0) + (1.0 * (1.0 - 0.5) ** 2.0) / log2p1(5.0)
    assert tf_alpha_dcg(scores, labels, 6) == pytest.approx([top6])


def test_tf_ranking_custom_alpha():
    """AlphaDCGMetricTest::test_alphadcg_should_handle_custom_alpha (alpha 0.2 and 0.95)."""
    scores, labels = [[1.0, 3.0, 2.0, 4.0]], [[[1.0, 1.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0]]]
    for alpha in (0.2, 0.95):
        name = f"alpha_DCG(alpha={alpha},norm='none')"
        got = F.evaluate(torch.tensor(scores), torch.tensor(labels), name)[name].item()
        assert got == pytest.approx(
            (1.0 * (1.0 - alpha) ** 0.0) / log2p1(1.0)
            + (1.0 * (1.0 - alpha) ** 0.0) / log2p1(2.0)
            + (1.0 * (1.0 - alpha) ** 1.0) / log2p1(3.0)
            + (1.0 * (1.0 - alpha) ** 1.0) / log2p1(4.0)
            + (1.0 * (1.0 - alpha) ** 2.0) / log2p1(4.0)
        )


def test_log_base_scales_the_plain_sum_and_leaves_ndevals_ratios():
    """``log_base=b``: the discount 1 / log_b(r + 1) is log2(b) times ndeval's 1 / log2(r + 1), so the plain
    sum scales by log2(b) (hand computation) while every ratio (ndeval's alpha-DCG over the ideal ideal,
    alpha-nDCG) keeps pyndeval's value."""
    scores, labels = [[1.0, 3.0, 2.0, 4.0]], [[[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 0.0]]]
    base2 = 1 + 1.5 / log2p1(2) + 0.5 / log2p1(3) + 0.25 / log2p1(4)
    by_hand = 1 / math.log(2, 10) + 1.5 / math.log(3, 10) + 0.5 / math.log(4, 10) + 0.25 / math.log(5, 10)
    assert by_hand == pytest.approx(base2 * math.log2(10))
    assert tf_alpha_dcg(scores, labels, log_base=10) == pytest.approx([by_hand], rel=1e-6)

    rng = random.Random(5)
    qrels, run = [], []
    preds = torch.zeros(6, 12, dtype=torch.float64)
    target = torch.zeros(6, 12, 3, dtype=torch.int64)
    for q in range(6):
        for d, score in enumerate(rng.sample(range(1000), 12)):
            preds[q, d] = score
            run.append((f"q{q}", f"d{d:02d}", float(score)))
            for s in range(3):
                target[q, d, s] = rng.random() < 0.3
                qrels.append((f"q{q}", f"s{s}", f"d{d:02d}", int(target[q, d, s])))
    names = ["alpha-DCG@5", "alpha-DCG@20", "alpha-nDCG@5", "alpha-nDCG@20"]
    expected = pyndeval.ndeval(qrels, run, measures=names)
    ours = [n.replace("-", "_") for n in names]
    for base in (2, 3, 10):
        got = F.evaluate(preds, target, ours, reduction="none", log_base=base)
        for nd, name in zip(names, ours):
            theirs = torch.tensor([expected[f"q{q}"][nd] for q in range(6)], dtype=torch.float64)
            torch.testing.assert_close(got[name].double(), theirs, atol=1e-6, rtol=0, msg=f"{nd}, base {base}")


def test_a_custom_discount_normalises_by_its_own_ideals():
    """alpha-nDCG and ndeval's alpha-DCG with a custom discount: written out by hand. The list above
    (A = 2 subtopics), ranked d4, d2, d3, d1: gains 1, 1.5, 0.5, 0.25. ndeval's greedy ideal ranking: d2
    (2), then d1 or d4 (0.5) and d3 (0.5), then the last (0.25): gains 2, 0.5, 0.5, 0.25. The ideal
    ideal at k reads every rank up to k, past the list (k = 10 on 4 documents)."""
    scores, labels = torch.tensor([[1.0, 3.0, 2.0, 4.0]]), torch.tensor([[[1, 0], [1, 1], [0, 1], [1, 0]]])

    def discount(rank):
        return 1.0 / (10.0 + rank)

    run = [1.0, 1.5, 0.5, 0.25]
    ideal = [2.0, 0.5, 0.5, 0.25]
    w = [1.0 / (10.0 + r) for r in range(1, 11)]
    names = ["alpha_nDCG@3", "alpha_DCG@3", "alpha_DCG@10", "alpha_DCG@1"]
    got = F.evaluate(scores, labels, names, discount=discount)
    assert got["alpha_nDCG@3"].item() == pytest.approx(
        sum(g * x for g, x in zip(run[:3], w)) / sum(g * x for g, x in zip(ideal[:3], w)), abs=1e-6
    )
    for k in (3, 10):
        ideal_ideal = 2 * sum(0.5**r * w[r] for r in range(k))
        assert got[f"alpha_DCG@{k}"].item() == pytest.approx(sum(g * x for g, x in zip(run, w[:k])) / ideal_ideal)
    assert got["alpha_DCG@1"].item() == pytest.approx(1.0 / 11.0)  # ndeval leaves k = 1 undivided


def test_err_ia_and_nrbp_keep_their_own_discounts_as_err_and_rbp_do():
    """``discount=`` is the DCG discount: ERR-IA's 1 / r and NRBP's beta^(r - 1) are those measures'
    definitions, and ERR and RBP do not read it either."""
    scores, labels = torch.tensor([[1.0, 3.0, 2.0, 4.0]]), torch.tensor([[[1, 0], [1, 1], [0, 1], [1, 0]]])
    names = ["ERR_IA@3", "nERR_IA@3", "NRBP", "nNRBP", "P_IA@2", "AP_IA", "StRecall@2"]
    plain = F.evaluate(scores, labels, names)
    custom = F.evaluate(scores, labels, names, discount=lambda r: 1.0 / (10.0 + r), log_base=10)
    assert {k: v.item() for k, v in plain.items()} == {k: v.item() for k, v in custom.items()}
    # ERR-IA@3 by hand: gains 1, 1.5, 0.5 over 1 / r, divided by the ideal ideal 2 (1 + 0.5 / 2 + 0.25 / 3)
    assert plain["ERR_IA@3"].item() == pytest.approx((1 + 1.5 / 2 + 0.5 / 3) / (2 * (1 + 0.25 + 0.25 / 3)))


# ----------------------------------------------------------------------------- item 2: duplicates
def _duplicate_files(tmp_path):
    """The issue's reproducer: document 'a' retrieved twice for query 1."""
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("1 1 a 1\n1 2 b 1\n")
    run.write_text("1 Q0 a 1 3.0 r\n1 Q0 a 2 2.0 r\n1 Q0 b 3 1.0 r\n")
    return qrels, run


@pytest.mark.parametrize("measure", ["alpha-nDCG@2", "P.2"])
def test_cli_refuses_a_document_twice_on_every_route(tmp_path, capsys, measure):
    """The command line's own entry (``main``, what ``python -m torch_rankeval`` calls): status 2 and
    the one-line message naming the lines and the document, for an intent-aware and an ad-hoc measure."""
    from torch_rankeval.cli import EXIT_BAD_INPUT, main

    qrels, run = _duplicate_files(tmp_path)
    out = io.StringIO()
    assert main(["evaluate", str(qrels), str(run), "-m", measure], out) == EXIT_BAD_INPUT == 2
    assert out.getvalue() == ""
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and stderr.startswith("torch-rankeval evaluate: error: ")
    assert "lines 1 and 2: document 'a' appears twice for query '1'" in stderr


def test_trec_evaluate_refuses_a_document_twice_for_intent_aware_measures(tmp_path):
    from torch_rankeval import trec
    from torch_rankeval.trec import TrecFormatError
    from torch_rankeval.trec.diversity import read_subtopic_qrels, subtopic_tensors

    qrels, run = _duplicate_files(tmp_path)
    with pytest.raises(TrecFormatError, match="document 'a' appears twice") as adhoc:
        trec.evaluate(trec.read_qrels(qrels), run, ["P.2"])
    for measures in (["alpha_nDCG@2"], ["ERR_IA@2", "P.2"], ["StRecall@1"]):
        with pytest.raises(TrecFormatError) as aware:
            trec.evaluate(read_subtopic_qrels(qrels), run, measures)
        assert str(aware.value) == str(adhoc.value)  # the one shared check, the one message
    with pytest.raises(TrecFormatError, match="document 'a' appears twice for query '1'"):
        subtopic_tensors(read_subtopic_qrels(qrels), trec.read_run(run))
    # without the repeat, the value the issue printed is the right one for the run a, b
    run.write_text("1 Q0 a 1 3.0 r\n1 Q0 b 3 1.0 r\n")
    assert trec.evaluate(read_subtopic_qrels(qrels), run, ["alpha_nDCG@2"]).summary["alpha_nDCG@2"] == 1.0


# ----------------------------------------------------------------------------- item 5: subtopic numbering
def _collection(seed: int, n: int = 12, subtopics: int = 4):
    """Diversity qrels (pyndeval's tuples) with each query's subtopics numbered 1..S_q, the same judgments
    numbered uniquely across the file (query q: 100 q + 1 ..), and a run with distinct scores."""
    rng = random.Random(seed)
    qrels, unique, run = [], [], []
    for q in range(n):
        used = sorted(rng.sample(range(1, subtopics + 1), rng.randint(1, subtopics)))
        for d in range(15):
            if rng.random() < 0.3:
                continue
            for s in used:
                grade = rng.choice([0, 0, 1, 2])
                qrels.append((f"{q + 1}", s, f"d{d:02d}", grade))
                unique.append((f"{q + 1}", 100 * (q + 1) + s, f"d{d:02d}", grade))
        for d, score in zip(rng.sample(range(20), 12), rng.sample(range(1000), 12)):
            run.append((f"{q + 1}", f"d{d:02d}", float(score)))
    return qrels, unique, run


@pytest.mark.parametrize("seed", [0, 1])
def test_values_do_not_depend_on_how_subtopics_are_numbered(seed):
    from torch_rankeval import trec
    from torch_rankeval.trec.diversity import SubtopicQrels, subtopic_tensors

    qrels, unique, run = _collection(seed)
    names = ["alpha-nDCG@5", "alpha-nDCG@20", "ERR-IA@10", "nERR-IA@10", "NRBP", "nNRBP", "MAP-IA", "P-IA@5"]
    names += ["strec@5", "alpha-DCG@10"]
    expected = pyndeval.ndeval([(q, str(s), d, g) for q, s, d, g in unique], run, measures=names)
    the_run = trec.Run.from_dict({q: {d: s for qq, d, s in run if qq == q} for q in {r[0] for r in run}})
    results = [trec.evaluate(SubtopicQrels.from_rows(rows), the_run, names) for rows in (qrels, unique)]
    per_query, by_file = results
    assert per_query.qids == by_file.qids
    for nd in names:
        theirs = torch.tensor([expected[q][nd] for q in per_query.qids], dtype=torch.float64)
        torch.testing.assert_close(per_query.per_query[nd], by_file.per_query[nd], atol=0, rtol=0, msg=nd)
        torch.testing.assert_close(per_query.per_query[nd], torch.nan_to_num(theirs), atol=1e-6, rtol=0, msg=nd)
    # the prepared target's subtopic axis is the largest number of subtopics of one query, both ways
    widths = {}
    for rows in (qrels, unique):
        _, _, target, _, ideal = subtopic_tensors(SubtopicQrels.from_rows(rows), the_run)
        widths[len(widths)] = (target.shape[-1], ideal.shape[-1])
        torch.testing.assert_close(target, subtopic_tensors(SubtopicQrels.from_rows(qrels), the_run)[2])
    most = max(len({s for qq, s, _, _ in qrels if qq == q}) for q in {r[0] for r in qrels})
    assert widths == {0: (most, most), 1: (most, most)}
    assert len({s for _, s, _, _ in unique}) > 2 * most  # the file's distinct numbers: the old axis


def test_subtopics_are_numbered_in_order_within_each_query():
    """Query 1's subtopics 7 and 3 become columns 1 and 0; query 2's 50: column 0."""
    from torch_rankeval.trec import Run
    from torch_rankeval.trec.diversity import SubtopicQrels, subtopic_tensors

    q = SubtopicQrels.from_rows([("1", 7, "a", 1), ("1", 3, "b", 2), ("2", 50, "a", 1)])
    qids, _, target, _, ideal = subtopic_tensors(q, Run.from_dict({"1": {"a": 1.0, "b": 0.5}, "2": {"a": 1.0}}))
    assert qids == ["1", "2"]
    assert target.tolist() == [[[0, 1], [2, 0]], [[1, 0], [0, 0]]]
    assert ideal.tolist() == [[[0, 1], [2, 0]], [[1, 0], [0, 0]]]


def test_a_sparse_target_numbered_across_the_collection_is_split_per_list():
    """The tensor route's input stage: a sparse subtopic target whose indices are unique across the lists
    (list q: 50 q + j) gives the values of the same judgments numbered per list, and pyndeval's, while
    its dense grades are as wide as the most subtopics of one list."""
    from torch_rankeval.ranking.subtopics import split_subtopics, subtopic_target

    qrels, _, run = _collection(3, n=8)
    queries = sorted({q for q, *_ in qrels}, key=int)
    docs = {q: sorted({d for qq, d, _ in run if qq == q}) for q in queries}
    preds = torch.tensor([[next(s for qq, dd, s in run if qq == q and dd == d) for d in docs[q]] for q in queries])
    rows = [(queries.index(q), s - 1, docs[q].index(d), g) for q, s, d, g in qrels if d in docs[q]]
    judged = {q: sorted({d for qq, _, d, _ in qrels if qq == q}) for q in queries}
    width = max(len(v) for v in judged.values())
    ideal_rows = [(queries.index(q), s - 1, judged[q].index(d), g) for q, s, d, g in qrels]

    def build(spread: int, subtopics: int):
        q, s, i, g = (torch.tensor(x) for x in zip(*rows))
        target = subtopic_target(q, s + spread * q, i, g, shape=(len(queries), 12, subtopics))
        q, s, i, g = (torch.tensor(x) for x in zip(*ideal_rows))
        ideal = subtopic_target(q, s + spread * q, i, g, shape=(len(queries), width, subtopics))
        return target, ideal

    most = max(len({s for qq, s, _, _ in qrels if qq == q}) for q in queries)
    assert most < 4 * len(queries)
    names = ["alpha_nDCG@5", "ERR_IA@10", "nNRBP", "AP_IA", "P_IA@5", "StRecall@5", "alpha_DCG@10"]
    nd = ["alpha-nDCG@5", "ERR-IA@10", "nNRBP", "MAP-IA", "P-IA@5", "strec@5", "alpha-DCG@10"]
    expected = pyndeval.ndeval([(q, str(s), d, g) for q, s, d, g in qrels], run, measures=nd)
    values = []
    for spread, subtopics in ((0, 4), (50, 50 * len(queries))):
        target, ideal = build(spread, subtopics)
        split = split_subtopics(preds, target, ideal)
        assert split.subtopics.shape[-1] == split.ideal_subtopics.shape[-1] == most  # the most of one list
        values.append(F.evaluate(preds, target, names, ideal_target=ideal, ties="first", reduction="none"))
    for name, theirs in zip(names, nd):
        torch.testing.assert_close(values[0][name], values[1][name], atol=0, rtol=0, msg=name)
        want = torch.tensor([expected[q][theirs] for q in queries], dtype=torch.float64)
        torch.testing.assert_close(values[1][name].double(), want, atol=1e-6, rtol=0, msg=name)
