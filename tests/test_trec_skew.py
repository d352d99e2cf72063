"""TREC runs with skewed query lengths and docno lengths: results equal pytrec_eval (trec_eval's C
code), and memory follows the file, not queries x longest query or lines x longest docno."""

from __future__ import annotations

import gc
import itertools
import random
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.trec_fixtures import random_collection, write_dicts
from torch_rankeval import trec
from torch_rankeval.trec import evaluation, join
from torch_rankeval.trec._join_kernels import _hash, same_docno, sort_by_docno
from torch_rankeval.trec._text import Strings, head_width

pytrec_eval = pytest.importorskip("pytrec_eval")

MEASURES = {"map", "ndcg", "ndcg_cut.10", "P.5", "recall.100", "recip_rank", "Rprec", "map_cut.1000", "num_rel_ret"}


def _pytrec(qrels, run, level=1):
    return pytrec_eval.RelevanceEvaluator(qrels, MEASURES, relevance_level=level).evaluate(run)


def _assert_matches_pytrec(result, expected):
    assert result.qids == sorted(expected, key=lambda q: q.encode())
    compared = 0
    for name, values in result.per_query.items():
        for i, qid in enumerate(result.qids):
            assert values[i].item() == pytest.approx(expected[qid][name], abs=1e-12), (name, qid)
            compared += 1
    assert compared >= len(MEASURES) * len(result.qids)


def skewed_collection(seed: int, big: int = 20_000, small: int = 400):
    """One query with ``big`` documents (ties, docnos of every length, a few very long ones), many
    small queries; qrels judge some retrieved and some unretrieved documents of each."""
    rng = random.Random(seed)
    qrels, run = {}, {}
    for i in range(small + 1):
        q = f"q{i}"
        n = big if i == 0 else rng.randrange(1, 12)
        docs = [f"{rng.choice(['d', 'DOC-', 'clueweb12-0000tw-'])}{i}-{j}" for j in range(n)]
        if i == 0:
            docs[7] = "L" * 3000 + "a"
            docs[8] = "L" * 3000 + "b"  # tied with the one above on a 3000-byte prefix
            docs[9] = "L" * 2999
        run[q] = {d: round(rng.randrange(8) * 0.5, 1) for d in docs}  # eight score levels: many ties
        judged = rng.sample(docs, k=max(1, n // 20)) + [f"unretrieved-{i}-{j}" for j in range(rng.randrange(3))]
        qrels[q] = {d: rng.choice([-1, 0, 1, 2, 3]) for d in judged}
    qrels["q0"].update({"L" * 3000 + "a": 2, "L" * 3000 + "b": 0, "L" * 2999: 1})
    return qrels, run


# ----------------------------------------------------------------------------- skewed query lengths
@pytest.mark.parametrize("complete", [False, True])
def test_skewed_collection_equals_pytrec_eval(complete):
    qrels, run = skewed_collection(0)
    run["not-judged"] = {"x": 1.0}
    qrels["not-retrieved"] = {"y": 1}
    result = trec.evaluate(trec.Qrels.from_dict(qrels), trec.Run.from_dict(run), sorted(MEASURES), complete=complete)
    expected = _pytrec(qrels, run)
    if complete:
        assert len(result.qids) == len(qrels) and result.per_query["map"][result.qids.index("not-retrieved")] == 0
        expected["not-retrieved"] = {m: 0.0 for m in expected["q0"]}
    _assert_matches_pytrec(result, expected)


def test_skewed_run_is_evaluated_in_buckets_that_follow_the_documents(monkeypatch):
    """The padded tensors handed to the measures hold at most twice the (retrieved + judged)
    documents: one padded batch would hold 401 x 20,000 = 8 million entries."""
    qrels, run = skewed_collection(1)
    shapes = []
    original = evaluation.compute

    def spy(measures, preds, target, *, mask, ideal_target, **kwargs):
        shapes.append((tuple(preds.shape), tuple(ideal_target.shape)))
        assert mask.shape == target.shape == preds.shape
        return original(measures, preds, target, mask=mask, ideal_target=ideal_target, **kwargs)

    monkeypatch.setattr(evaluation, "compute", spy)
    trec.evaluate(trec.Qrels.from_dict(qrels), trec.Run.from_dict(run), ["map", "ndcg_cut.10"])
    retrieved = sum(len(d) for d in run.values())
    judged = sum(len(d) for d in qrels.values())
    padded = sum(p[0] * p[1] + i[0] * i[1] for p, i in shapes)
    assert len(shapes) > 1 and padded <= 2 * (retrieved + judged), shapes
    assert max(p[1] for p, _ in shapes) == 20_000


def test_skewed_run_numpy_peak_follows_the_lines(tmp_path):
    """tracemalloc (numpy reports its buffers to it) over reading and evaluating a run of one
    100,000-document query plus 2,000 five-document queries: the old join asked for
    2,001 x 100,000 padded entries (gigabytes); now the peak is a few hundred bytes per line."""
    rng = np.random.default_rng(0)
    lines = [f"big Q0 doc{j} {j} {s:.3f} t\n" for j, s in enumerate(rng.random(100_000).round(3))]
    lines += [f"q{i} Q0 doc{j} {j} {1 - j / 10} t\n" for i in range(2000) for j in range(5)]
    run_path, qrels_path = tmp_path / "run.txt", tmp_path / "qrels.txt"
    run_path.write_text("".join(lines))
    qrels_path.write_text(
        "".join(f"{q} 0 doc{j} {j % 3}\n" for q in ["big"] + [f"q{i}" for i in range(2000)] for j in range(0, 50, 7))
    )
    n_lines = len(lines)
    qrels, run = trec.read_qrels(qrels_path), trec.read_run(run_path)
    peak, result = _numpy_peak(trec.evaluate, qrels, run, ["map", "P.5", "ndcg"])
    assert len(result.qids) == 2001
    assert peak < 400 * n_lines, f"{peak / n_lines:.0f} bytes per line"


def test_forced_buckets_give_pytrec_eval_values_on_random_collections(monkeypatch):
    """Geometric buckets on every collection (PADDING_FACTOR=0): ties, negative grades, queries
    only on one side, docnos of many lengths."""
    monkeypatch.setattr(join, "PADDING_FACTOR", 0.0)
    for seed in range(6):
        qrels, run = random_collection(seed, max_docs=60)
        q, r = trec.Qrels.from_dict(qrels), trec.Run.from_dict(run)
        batches = list(trec.to_batches(q, r))
        assert len(batches) > 1
        for level in (1, 2):
            _assert_matches_pytrec(
                trec.evaluate(q, r, sorted(MEASURES), relevance_level=level), _pytrec(qrels, run, level)
            )


def test_batches_hold_the_rows_of_to_tensors(monkeypatch):
    """Each bucket's rows equal the rows of the single padded batch, cut to the bucket's width."""
    monkeypatch.setattr(join, "PADDING_FACTOR", 0.0)
    qrels, run = random_collection(3, max_docs=80)
    q, r = trec.Qrels.from_dict(qrels), trec.Run.from_dict(run)
    whole = trec.to_tensors(q, r, complete=True)
    batches = trec.to_batches(q, r, complete=True)
    assert batches.qids == whole.qids and batches.retrieved.tolist() == whole.retrieved.tolist()
    seen = []
    for b in batches:
        rows = b.rows
        seen += rows.tolist()
        assert b.qids == [whole.qids[i] for i in rows.tolist()]
        width, m = b.preds.shape[1], b.ideal_target.shape[1]
        assert b.mask.tolist() == whole.mask[rows, :width].tolist() and not whole.mask[rows, width:].any()
        assert b.preds[b.mask].tolist() == whole.preds[rows, :width][b.mask].tolist()
        assert b.target[b.mask].tolist() == whole.target[rows, :width][b.mask].tolist()
        assert b.ideal_target.tolist() == whole.ideal_target[rows, :m].tolist()
        assert (whole.ideal_target[rows, m:] == -1).all()
    assert sorted(seen) == list(range(len(whole.qids)))


def test_duplicate_in_a_bucket_names_its_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(join, "PADDING_FACTOR", 0.0)
    qrels = trec.Qrels.from_dict({"q1": {"d1": 1}, "q2": {"d1": 1}})
    path = tmp_path / "run.txt"
    path.write_text("q1 Q0 d1 1 0.5 t\n" + "".join(f"q2 Q0 e{i} 1 0.5 t\n" for i in range(40)) + "q2 Q0 e7 1 0.1 t\n")
    with pytest.raises(trec.TrecFormatError, match=r"lines 9 and 42: document 'e7' appears twice for query 'q2'"):
        trec.evaluate(qrels, trec.read_run(path), ["map"])


# ----------------------------------------------------------------------------- long docnos and query ids
def _numpy_peak(function, *args) -> tuple[int, object]:
    """Peak of numpy's allocations (numpy reports them to tracemalloc) during ``function(*args)``."""
    gc.collect()
    tracemalloc.start()
    try:
        out = function(*args)
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_one_long_docno_costs_its_own_bytes(tmp_path):
    """The issue's reproducer: one 10,000-character docno in a small run made every line 10,000
    bytes wide (20,000 lines: 200 MB per copy); now the docnos take less than the file, and the
    peaks of parsing a block and of evaluating grow by about the long docno's own bytes.
    (Parsing and evaluating are measured apart: the reader's threads make the peak of a whole
    read depend on timing.)"""
    from torch_rankeval.trec._text import _KINDS, _parse_block

    lines = "".join(f"q{i} Q0 d{j} {j} {1 - j / 100:.3f} t\n" for i in range(500) for j in range(40))
    long = "x" * 10_000
    qrels_path = tmp_path / "qrels.txt"
    qrels_path.write_text(f"q0 0 {long} 3\n" + "".join(f"q{i} 0 d1 1\nq{i} 0 d7 2\n" for i in range(500)))
    qrels = trec.read_qrels(qrels_path)
    parse, evaluate = {}, {}
    for docno in ("warm-up", "short", long):  # the first evaluation builds caches
        text = lines + f"q0 Q0 {docno} 99 0.0 t\n"
        run_path = tmp_path / f"run_{len(docno)}.txt"
        run_path.write_text(text)
        parse[docno], _ = _numpy_peak(_parse_block, _KINDS["run"], text.encode())
        run = trec.read_run(run_path)
        assert run.docno.nbytes < len(text) and run.docno.width == 8
        assert run.docnos()[-1] == docno
        evaluate[docno], result = _numpy_peak(trec.evaluate, qrels, run, sorted(MEASURES))
    assert run.docno.long.tolist() == [len(run) - 1]
    assert parse[long] - parse["short"] < 20 * len(long), parse
    assert evaluate[long] - evaluate["short"] < 20 * len(long), evaluate
    from tests.oracles import read_qrels, read_run

    _assert_matches_pytrec(result, _pytrec(read_qrels(qrels_path), read_run(run_path)))
    assert result.per_query["recall_100"][result.qids.index("q0")].item() == 1.0  # the long docno was found


def test_long_docnos_tied_on_score_and_prefix_rank_as_trec_eval():
    """Ties are broken by docno descending; docnos that share a prefix far longer than the head
    are ordered by their tails (and a prefix ranks below its extensions)."""
    rng = random.Random(5)
    prefix = "P" * 500
    docs = [f"{prefix}{rng.choice(['', 'a', 'b', 'ab', 'ba', 'a' * 30])}{k}" for k in range(30)]
    docs += [prefix, prefix[:-1], "short", "s"] + [f"d{k}" for k in range(300)]
    run = {"q": {d: float(rng.randrange(3)) for d in docs}}
    qrels = {"q": {d: rng.randrange(3) for d in rng.sample(docs, 60)}}
    result = trec.evaluate(trec.Qrels.from_dict(qrels), trec.Run.from_dict(run), sorted(MEASURES))
    _assert_matches_pytrec(result, _pytrec(qrels, run))
    batch = trec.to_tensors(trec.Qrels.from_dict(qrels), trec.Run.from_dict(run))
    ranked = sorted(run["q"].items(), key=lambda kv: kv[0].encode(), reverse=True)
    ranked = sorted(ranked, key=lambda kv: -kv[1])
    assert batch.target[0].tolist() == [max(qrels["q"].get(d, -1), -1) for d, _ in ranked]


def test_long_query_ids_read_back(tmp_path):
    qid = "topic-" + "z" * 5000
    path = tmp_path / "qrels.txt"
    path.write_text("".join(f"q{i} 0 d1 1\n" for i in range(300)) + f"{qid} 0 d1 1\n{qid} 0 d2 0\n{qid}x 0 d1 2\n")
    qrels = trec.read_qrels(path)
    assert qid in qrels.qids and qid + "x" in qrels.qids and len(qrels.qids) == 302
    assert qrels.to_dict()[qid] == {"d2": 0, "d1": 1}


# ----------------------------------------------------------------------------- Strings
names = st.binary(min_size=0, max_size=40).map(lambda b: bytes(c for c in b if c) or b"z")
spiky = st.lists(st.one_of(names, names.map(lambda b: b * 20)), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(spiky, st.integers(1, 6), st.integers(1, 6), st.data())
def test_strings_round_trip_take_rewidth_concat(items, w1, w2, data):
    a = Strings.from_bytes(items, width=8 * w1)
    assert a.tolist() == items and [a.item(i) for i in range(len(items))] == items
    index = np.array(data.draw(st.lists(st.integers(0, len(items) - 1), max_size=50)), dtype=np.int64)
    assert a.take(index).tolist() == [items[i] for i in index]
    b = a.rewidth(8 * w2)
    assert b.width == 8 * w2 and b.tolist() == items
    assert Strings.concat([a.rewidth(8 * w2), b]).tolist() == items + items
    assert np.array_equal(_hash(a), _hash(b))  # the hash is the docno's, not its storage's


@settings(max_examples=60, deadline=None)
@given(spiky, st.integers(1, 4), st.integers(1, 4))
def test_sort_and_equality_on_strings_match_python(items, w1, w2):
    items = items + items[: len(items) // 2]  # some equal strings
    group = np.array([len(s) % 2 for s in items], dtype=np.int64)
    a = Strings.from_bytes(items, width=8 * w1)
    order, same = sort_by_docno([group], a)
    want = sorted(range(len(items)), key=lambda i: items[i], reverse=True)
    want = sorted(want, key=lambda i: group[i])  # stable: group ascending, docno descending
    assert [items[i] for i in order] == [items[i] for i in want]
    pairs = [(group[i], items[i]) == (group[j], items[j]) for i, j in itertools.pairwise(order)]
    assert same.tolist() == pairs
    b = Strings.from_bytes(list(reversed(items)), width=8 * w2)
    rows_a = np.arange(len(items))
    rows_b = np.array([len(items) - 1 - i for i in range(len(items))])
    assert same_docno(a, rows_a, b, rows_b).all()
    shifted = np.roll(rows_b, 1)
    want_eq = [items[i] == items[len(items) - 1 - j] for i, j in zip(rows_a, shifted)]
    assert same_docno(a, rows_a, b, shifted).tolist() == want_eq


def test_head_width_stays_within_twice_the_words():
    lengths = np.array([7] * 10_000 + [10_000])
    assert head_width(lengths) == 8
    assert head_width(np.array([25] * 100)) == 32  # uniform: as wide as every docno, no tail
    rng = np.random.default_rng(0)
    for _ in range(20):
        lengths = rng.integers(0, 200, 50) ** rng.integers(1, 3)
        w = head_width(lengths)
        assert len(lengths) * w <= 2 * 8 * np.maximum((lengths + 7) // 8, 1).sum()


# ----------------------------------------------------------------------------- blocks and files
def test_skewed_file_read_in_small_blocks(tmp_path):
    """Blocks choose their own head width; the file gets one."""
    qrels, run = skewed_collection(2, big=3000, small=50)
    _, run_path = write_dicts(tmp_path, qrels, run)
    from torch_rankeval.trec._text import read_table

    whole = read_table(run_path, "run")
    for block in (100, 5000, 1 << 16):
        part = read_table(run_path, "run", block_bytes=block)
        assert part.docno.width == whole.docno.width and part.docno.tolist() == whole.docno.tolist()
        assert np.array_equal(part.docno.long, whole.docno.long)


@pytest.mark.parametrize("complete", [False, True])
def test_trec_eval_collection_in_forced_buckets_equals_one_batch(trec_eval_test_dir, monkeypatch, complete):
    """trec_eval's own test collection, every measure and relstring, with queries forced into
    length buckets: the same values (to the last bits of a sum) and texts as one padded batch."""
    qrels = trec.read_qrels(trec_eval_test_dir / "qrels.test")
    run = trec.read_run(trec_eval_test_dir / "results.test")
    measures = ["all_trec", "relstring.30"]
    whole = trec.evaluate(qrels, run, measures, complete=complete, max_docs=700)
    monkeypatch.setattr(join, "PADDING_FACTOR", 0.0)
    assert len(list(trec.to_batches(qrels, run, complete=complete))) > 1
    bucketed = trec.evaluate(qrels, run, measures, complete=complete, max_docs=700)
    assert bucketed.qids == whole.qids and bucketed.text == whole.text
    assert bucketed.per_query.keys() == whole.per_query.keys()
    for name, values in whole.per_query.items():
        np.testing.assert_allclose(
            bucketed.per_query[name].numpy(), values.numpy(), rtol=1e-13, atol=1e-15, err_msg=name
        )
    assert bucketed.trec_lines(per_query=True) == whole.trec_lines(per_query=True)
