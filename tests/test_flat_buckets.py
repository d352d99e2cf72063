"""Flat (``indexes``) input with skewed query lengths: values equal a per-query computation and
an independent oracle, and what is padded follows the number of documents, not queries x longest."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torch_rankeval import NDCG, RankingMetrics
from torch_rankeval.ranking.flat import group_by_query, group_by_query_buckets

METRICS = ("ndcg", "ndcg@5", "map", "mrr", "precision@3", "recall@10", "r_precision", "hit_rate@2")


def skewed(seed: int, big: int = 3000, singles: int = 3000):
    """One query of ``big`` documents, ``singles`` one-document queries and a few short ones, ids
    shuffled, integer scores (many ties), grades 0-3."""
    g = torch.Generator().manual_seed(seed)
    lengths = [big] + [1] * singles + torch.randint(2, 9, (40,), generator=g).tolist()
    ids = torch.randperm(len(lengths), generator=g) * 7 - 50  # arbitrary (negative too) global ids
    indexes = torch.repeat_interleave(ids, torch.tensor(lengths))
    perm = torch.randperm(indexes.numel(), generator=g)
    indexes = indexes[perm]
    preds = torch.randint(0, 20, indexes.shape, generator=g).to(torch.float32)
    target = torch.randint(0, 4, indexes.shape, generator=g)
    return preds, target, indexes


@pytest.fixture
def prepared_shapes(monkeypatch):
    """Shapes of every padded batch that RankingMetrics evaluates (the allocation that used to blow up)."""
    shapes = []
    original = RankingMetrics._batch

    def spy(self, preds, *args, **kwargs):
        shapes.append(tuple(preds.shape))
        return original(self, preds, *args, **kwargs)

    monkeypatch.setattr(RankingMetrics, "_batch", spy)
    return shapes


def test_skewed_flat_input_pads_to_the_documents_not_the_longest_list(prepared_shapes):
    """The issue's reproducer, scaled: one long query plus thousands of one-document queries used to
    be padded to (queries x longest) = 9e6 entries (+3.8 GB at 8,000); now at most 2 per document."""
    preds, target, indexes = skewed(0)
    n_docs, n_queries = indexes.numel(), int(indexes.unique().numel())
    metric = RankingMetrics(METRICS)
    metric.update(preds, target, indexes=indexes)
    metric.compute()
    padded = sum(rows * width for rows, width in prepared_shapes)
    assert n_queries * 3000 > 9_000_000  # what one padded batch would hold
    assert padded <= 2 * n_docs, prepared_shapes
    assert max(rows for rows, _ in prepared_shapes) >= 3000 and max(w for _, w in prepared_shapes) == 3000


@pytest.mark.parametrize("ties", ["average", "first"])
@pytest.mark.parametrize("whole_queries", [False, True])
def test_skewed_flat_input_equals_a_per_query_computation(ties, whole_queries):
    preds, target, indexes = skewed(1, big=600, singles=500)
    metric = RankingMetrics(METRICS, ties=ties, keep_per_query=True, whole_queries=whole_queries)
    metric.update(preds, target, indexes=indexes)
    per_query = metric.compute_per_query()
    means = metric.compute()
    ids = per_query["query_id"]
    assert torch.equal(ids, indexes.unique())
    computed: dict = {}  # the 500 one-document queries repeat a few (score, grade) lists: each computed once
    for i, q in enumerate(ids.tolist()):
        docs = indexes == q  # input order inside the query, as flat input keeps it
        lists = (tuple(preds[docs].tolist()), tuple(target[docs].tolist()))
        if lists not in computed:
            single = RankingMetrics(METRICS, ties=ties, keep_per_query=True)
            # flat input is kept in float64 until compute (whole_queries: reduced at once, in the input's dtype)
            single.update(
                preds[docs].unsqueeze(0).to(preds.dtype if whole_queries else torch.float64),
                target[docs].unsqueeze(0),
            )
            computed[lists] = single.compute_per_query()
        expected = computed[lists]
        for key in means:
            assert per_query[key][i].item() == pytest.approx(expected[key][0].item(), rel=1e-6, abs=1e-7), (key, q)
    for key, value in means.items():
        torch.testing.assert_close(value, per_query[key].double().mean().float(), rtol=1e-6, atol=1e-7)


def test_skewed_flat_ndcg_matches_sklearn():
    """An independent oracle: sklearn's ndcg_score (linear gain, tie-averaged) per query."""
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    preds, target, indexes = skewed(2, big=2000, singles=300)
    metric = NDCG(gain="linear", keep_per_query=True)
    metric.update(preds, target, indexes=indexes)
    got = metric.compute_per_query()
    for i, q in enumerate(got["query_id"].tolist()):
        docs = indexes == q
        if docs.sum() < 2:  # sklearn needs two documents; a one-document list scores 1 or 0 (empty)
            assert got["ndcg"][i].item() == float(target[docs].item() > 0)
            continue
        want = sklearn_metrics.ndcg_score(target[docs].numpy()[None], preds[docs].numpy()[None])
        assert got["ndcg"][i].item() == pytest.approx(want, rel=1e-5), q


@pytest.mark.parametrize("seed", range(5))
def test_buckets_hold_every_document_once_within_twice_the_documents(seed):
    rng = np.random.default_rng(seed)
    lengths = np.concatenate([rng.integers(1, 5, 300), rng.integers(1, 3000, 3), [1] * 50])
    indexes = torch.from_numpy(np.repeat(rng.permutation(len(lengths)) * 3, lengths))
    values = torch.arange(indexes.numel(), dtype=torch.float64)
    ids, buckets = group_by_query_buckets(indexes, values)
    ref_ids, ref_mask, (ref_values,) = group_by_query(indexes, values)
    assert torch.equal(ids, ref_ids)
    rows = torch.cat([r for r, _, _ in buckets])
    assert torch.equal(rows.sort().values, torch.arange(len(ids)))  # every query exactly once
    assert sum(m.numel() for _, m, _ in buckets) <= 2 * indexes.numel()
    for r, mask, (v,) in buckets:
        width = mask.shape[1]
        assert torch.equal(mask, ref_mask[r, :width]) and not ref_mask[r, width:].any()
        assert torch.equal(v, ref_values[r, :width])  # same documents, same order inside each query


def test_uniform_lengths_keep_one_padded_batch():
    indexes = torch.arange(40).repeat_interleave(25)
    values = torch.rand(1000, dtype=torch.float64)
    _, buckets = group_by_query_buckets(indexes, values)
    ref = group_by_query(indexes, values)
    assert len(buckets) == 1
    rows, mask, (v,) = buckets[0]
    assert torch.equal(rows, torch.arange(40)) and torch.equal(mask, ref[1]) and torch.equal(v, ref[2][0])


def test_bucket_check_errors_are_those_of_group_by_query():
    with pytest.raises(TypeError, match="integer tensor"):
        group_by_query_buckets(torch.tensor([0.5]), torch.tensor([1.0]))
    with pytest.raises(ValueError, match="has shape"):
        group_by_query_buckets(torch.tensor([0, 1]), torch.tensor([1.0]))
