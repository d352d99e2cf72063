"""Full-catalogue evaluation through every API: sparse targets and ``exclude=`` take the top-k path
and give what the dense path gives on the same data (the dense path is itself proven against
trec_eval, sklearn and torchmetrics elsewhere), for every measure of the top-k table, every cutoff
(None and beyond the catalogue too), every tie policy, with ties across the cutoff, excluded items
(relevant ones among them), users without targets and rows shorter than k."""

from __future__ import annotations

import contextlib
import math

import pytest
import torch

import torch_rankeval.measures.plan as plan_module
from tests.sync_guard import HostSyncGuard
from torch_rankeval import NDCG, ItemExposure, PositionProfile, RankingMetrics
from torch_rankeval import functional as F
from torch_rankeval.ranking.sparse import sparse_from_ids

MEASURES = [
    "ndcg@5",
    "ndcg@50",
    "ndcg",
    "dcg@5",
    "idcg@5",
    "map@5",
    "map",
    "mrr@3",
    "mrr",
    "precision@5",
    "precision",
    "recall@5",
    "recall@40",
    "hit_rate@1",
    "hit_rate@5",
    "r_precision",
    "ndcg@1000",
]


def _data(seed: int, n: int = 12, length: int = 40, levels: int = 4, exclude_share: float = 0.25):
    g = torch.Generator().manual_seed(seed)
    preds = torch.randint(0, levels, (n, length), generator=g).float()  # few levels: tie groups cross every cutoff
    target = (torch.rand(n, length, generator=g) < 0.12).long() * torch.randint(1, 4, (n, length), generator=g)
    target[0] = 0  # a user without targets
    exclude = torch.rand(n, length, generator=g) < exclude_share
    exclude[1, :-3] = True  # a row with 3 rankable items: shorter than every k
    exclude[2] |= target[2] > 0  # every target of a row excluded: it has no relevant item left
    return preds, target, exclude


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.allclose(a.double(), b.double(), atol=1e-6, rtol=1e-6, equal_nan=True))


def _routes(monkeypatch) -> list[str]:
    seen: list[str] = []
    original = plan_module.MeasurePlan._route

    def spy(self, *args):  # noqa: ANN001, ANN202
        route = original(self, *args)
        seen.append("topk" if route == "topk" else "dense")  # "head": the dense route, rows ranked to their head
        return route

    monkeypatch.setattr(plan_module.MeasurePlan, "_route", spy)
    return seen


@pytest.mark.parametrize("ties", ["average", "first", "pessimistic", "optimistic"])
@pytest.mark.parametrize("validate_args", [True, False])
def test_sparse_and_exclude_equal_the_dense_path(ties, validate_args, monkeypatch):
    routes = _routes(monkeypatch)
    for seed in range(3):
        preds, target, exclude = _data(seed)
        dense = F.evaluate(preds, target, MEASURES, mask=~exclude, ties=ties, reduction="none")
        for tgt, ex in [
            (target.to_sparse(), exclude),
            (target.to_sparse_csr(), exclude.to_sparse()),
            (target, exclude.to_sparse_csr()),
        ]:
            got = F.evaluate(preds, tgt, MEASURES, exclude=ex, ties=ties, reduction="none", validate_args=validate_args)
            for name in MEASURES:
                assert _close(got[name], dense[name]), (seed, name, got[name], dense[name])
    assert set(routes) == {"dense", "topk"}  # the comparisons really ran the top-k path


@pytest.mark.parametrize(
    "settings",
    [
        {"convention": "trec_eval"},
        {"convention": "lightgbm"},
        {"gain": "linear"},
        {"gain": {1: 1.0, 2: 5.0, 3: 9.0}},
        {"denominator": "retrieved_relevant"},
        {"denominator": "min_k_relevant"},
        {"adaptive_k": True},
        {"relevance_threshold": 2},
        {"empty_target_action": "skip"},
        {"empty_target_action": "pos"},
        {"log_base": 10.0},
    ],
)
def test_conventions_equal_the_dense_path(settings):
    preds, target, exclude = _data(7)
    dense = F.evaluate(preds, target, MEASURES, mask=~exclude, reduction="none", **settings)
    got = F.evaluate(preds, target.to_sparse(), MEASURES, exclude=exclude, reduction="none", **settings)
    for name in MEASURES:
        assert _close(got[name], dense[name]), (settings, name)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_score_dtypes(dtype):
    preds, target, exclude = _data(3)
    preds = (preds + torch.randn(preds.shape, generator=torch.Generator().manual_seed(0)) * 0.01).to(dtype)
    dense = F.evaluate(preds, target, MEASURES, mask=~exclude, reduction="none")
    got = F.evaluate(preds, target.to_sparse(), MEASURES, exclude=exclude, reduction="none")
    for name in MEASURES:
        assert _close(got[name], dense[name]), name


def test_hand_example():
    # 6 items; item 1 seen in training (excluded) although it is a target; items 3 and 4 are targets.
    preds = torch.tensor([[0.9, 0.8, 0.5, 0.5, 0.1, 0.0]])
    target = sparse_from_ids(torch.tensor([[1, 3, 4]]), num_items=6)
    exclude = sparse_from_ids(torch.tensor([[1]]), num_items=6).bool()
    out = F.evaluate(preds, target, ["recall@3", "precision@3", "mrr", "map", "ndcg@3"], exclude=exclude)
    # ranking without item 1: 0 (0.9), {2, 3} tied at 0.5, 4, 5. Relevant: 3 and 4 (item 1 does not count).
    # top 3 = item 0 + the tie group {2, 3}: one relevant item expected -> recall 1/2, precision 1/3
    assert out["recall@3"].item() == pytest.approx(0.5)
    assert out["precision@3"].item() == pytest.approx(1 / 3)
    # item 3 at rank 2 or 3 with probability 1/2 each: RR = (1/2 + 1/3) / 2
    assert out["mrr"].item() == pytest.approx((1 / 2 + 1 / 3) / 2)
    # AP = (P at item 3 + P at item 4) / 2: item 3 at rank 2 (1/2) or 3 (1/3); item 4 at rank 4 (2/4)
    assert out["map"].item() == pytest.approx(((1 / 2 + 1 / 3) / 2 + 2 / 4) / 2)
    idcg = 1 + 1 / math.log2(3)
    assert out["ndcg@3"].item() == pytest.approx(0.5 * (1 / math.log2(3) + 1 / math.log2(4)) / idcg)


def test_measures_outside_the_top_k_table_densify_with_the_same_values(monkeypatch):
    routes = _routes(monkeypatch)
    preds, target, exclude = _data(5)
    names = ["bpref", "err@5", "ndcg@5", "P(rel=2)@5"]
    dense = F.evaluate(preds, target, names, mask=~exclude, reduction="none")
    got = F.evaluate(preds, target.to_sparse(), names, exclude=exclude, reduction="none")
    for name in names:
        assert _close(got[name], dense[name]), name
    assert routes[-1] == "dense"


def test_long_dense_rows_take_the_top_k_path_with_the_same_values(monkeypatch):
    routes = _routes(monkeypatch)
    g = torch.Generator().manual_seed(11)
    preds = torch.randint(0, 200, (6, plan_module.LONG_ROW), generator=g).float()
    target = (torch.rand(preds.shape, generator=g) < 0.01).long()
    names = ["ndcg@10", "map@10", "recall@20", "mrr@10"]
    fast = F.evaluate(preds, target, names, reduction="none")
    assert routes[-1] == "topk"
    monkeypatch.setattr(plan_module, "LONG_ROW", 10**9)
    slow = F.evaluate(preds, target, names, reduction="none")
    assert routes[-1] == "dense"
    for name in names:
        assert _close(fast[name], slow[name]), name


def test_metric_classes_and_the_one_metric_classes(monkeypatch):
    preds, target, exclude = _data(9, n=20)
    names = ("ndcg@10", "recall@10", "map@10", "map", "mrr", "r_precision")
    sparse, dense = RankingMetrics(names), RankingMetrics(names)
    sparse.update(preds[:10], target[:10].to_sparse(), exclude=exclude[:10].to_sparse())
    sparse.update(preds[10:], target[10:].to_sparse_csr(), exclude=exclude[10:])
    dense.update(preds, target, mask=~exclude)
    a, b = sparse.compute(), dense.compute()
    for name in names:
        assert _close(a[name], b[name]), name
    one, ref = NDCG(k=10), NDCG(k=10)
    one.update(preds, target.to_sparse(), exclude=exclude)
    ref.update(preds, target, mask=~exclude)
    assert _close(one.compute(), ref.compute())
    compiled = RankingMetrics(names, compile=True)  # a catalogue batch runs eagerly
    compiled.update(preds, target.to_sparse(), exclude=exclude)
    assert all(_close(compiled.compute()[name], b[name]) for name in names)
    profile, ref_profile = PositionProfile(positions=5), PositionProfile(positions=5)
    profile.update(preds, target.to_sparse(), exclude=exclude)
    ref_profile.update(preds, target, mask=~exclude)
    for key, value in ref_profile.compute().items():
        assert _close(profile.compute()[key], value), key


def test_empty_batches_are_no_ops():
    m = RankingMetrics(("ndcg@5", "map"))
    m.update(
        torch.zeros(0, 30),
        torch.zeros(0, 30, dtype=torch.long).to_sparse(),
        exclude=torch.zeros(0, 30, dtype=torch.bool),
    )
    preds, target, exclude = _data(1)
    m.update(preds, target.to_sparse(), exclude=exclude)
    ref = RankingMetrics(("ndcg@5", "map"))
    ref.update(preds, target, mask=~exclude)
    assert all(_close(m.compute()[k], ref.compute()[k]) for k in ("ndcg@5", "map"))


def test_no_host_sync_without_validation():
    preds, target, exclude = _data(4)
    m = RankingMetrics(("ndcg@5", "recall@10", "map@10", "mrr@10"), validate_args=False)
    sparse_target, sparse_exclude = target.to_sparse(), exclude.to_sparse()
    with HostSyncGuard():
        m.update(preds, sparse_target, exclude=exclude)
        m.update(preds, target, exclude=sparse_exclude)
    ref = RankingMetrics(("ndcg@5", "recall@10", "map@10", "mrr@10"))
    ref.update(preds, target, mask=~exclude)
    ref.update(preds, target, mask=~exclude)
    assert all(_close(m.compute()[k], ref.compute()[k]) for k in ref.keys)


def test_bad_input_is_refused_clearly():
    preds, target, exclude = _data(2)
    with pytest.raises(ValueError, match="shape"):
        F.evaluate(preds, target[:, :-1].to_sparse(), ["ndcg@5"])
    negative = target.clone()
    negative[3, 3] = -1
    with pytest.raises(ValueError, match="negative|>= 0"):
        F.evaluate(preds, negative.to_sparse(), ["ndcg@5"], exclude=exclude)
    with pytest.raises(ValueError, match="device"):
        F.evaluate(preds, target.to_sparse(), ["ndcg@5"], exclude=exclude.to("meta"))
    with pytest.raises(TypeError, match="exclude must be a bool"):
        F.evaluate(preds, target.to_sparse(), ["ndcg@5"], exclude=exclude.long())
    with pytest.raises(ValueError, match=r"\(N, L\)"):
        RankingMetrics(("ndcg@5",)).update(preds[0], target[0].to_sparse(), exclude=exclude[0])
    with pytest.raises(ValueError, match="exclude must have the shape"):
        F.evaluate(preds, target, ["ndcg@5"], exclude=exclude[:, :-1])
    nan = preds.clone()
    nan[4, 0] = float("nan")
    nan_excluded = nan.clone()
    with pytest.raises(ValueError, match="NaN"):
        F.evaluate(nan, target.to_sparse(), ["ndcg@5"], exclude=exclude & False)
    allowed = exclude.clone()
    allowed[4, 0] = True  # a NaN score at an excluded item is never read
    F.evaluate(nan_excluded, target.to_sparse(), ["ndcg@5"], exclude=allowed)
    with pytest.raises(ValueError, match="larger than the catalogue"):
        ItemExposure(num_items=10, k=11)


def test_k_beyond_the_catalogue_is_the_whole_list():
    preds, target, exclude = _data(6)
    got = F.evaluate(preds, target.to_sparse(), ["ndcg@1000", "recall@1000"], exclude=exclude)
    ref = F.evaluate(preds, target.to_sparse(), ["ndcg", "recall"], exclude=exclude)
    assert _close(got["ndcg@1000"], ref["ndcg"]) and _close(got["recall@1000"], ref["recall"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_equals_cpu_without_host_sync():
    preds, target, exclude = _data(8)
    want = F.evaluate(preds, target, MEASURES, mask=~exclude, reduction="none")
    got = F.evaluate(preds.cuda(), target.to_sparse().cuda(), MEASURES, exclude=exclude.cuda(), reduction="none")
    for name in MEASURES:
        assert _close(got[name].cpu(), want[name]), name
    m = RankingMetrics(("ndcg@5", "recall@10", "map@10"), validate_args=False).cuda()
    p, t, ex = preds.cuda(), target.to_sparse().cuda(), exclude.cuda().to_sparse()
    m.update(p, t, exclude=ex)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        m.update(p, t, exclude=ex)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    ref = RankingMetrics(("ndcg@5", "recall@10", "map@10"))
    ref.update(preds, target, mask=~exclude)
    ref.update(preds, target, mask=~exclude)
    assert all(_close(m.compute()[k].cpu(), ref.compute()[k]) for k in ref.keys)


@pytest.mark.parametrize(
    "name", ["ndcg", "dcg", "idcg", "average_precision", "reciprocal_rank", "precision", "recall", "hit_rate"]
)
def test_one_metric_functions_take_sparse_targets_and_exclude(name):
    preds, target, exclude = _data(12)
    fn = getattr(F, name)
    for k in (5, [1, 10], None):
        want = fn(preds, target, k=k, mask=~exclude, reduction="none")
        got = fn(preds, target.to_sparse(), k=k, exclude=exclude.to_sparse(), reduction="none")
        assert _close(got, want), (name, k)
    assert _close(
        F.r_precision(preds, target.to_sparse(), exclude=exclude), F.r_precision(preds, target, mask=~exclude)
    )


def test_one_list_with_exclude():
    preds, target = torch.tensor([0.9, 0.8, 0.7, 0.1]), torch.tensor([0, 1, 0, 1])
    exclude = torch.tensor([True, False, False, False])
    got = F.evaluate(preds, target, ["ndcg@2", "map"], exclude=exclude)
    # item 0 excluded: ranking 1 (relevant), 2, 3 (relevant): AP = (1 + 2/3) / 2, nDCG@2 = 1 / IDCG@2
    assert got["map"].item() == pytest.approx((1 + 2 / 3) / 2)
    assert got["ndcg@2"].item() == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_exclude_keeps_negative_linear_grades_in_the_whole_list_ideal_ranking():
    """Hand-computed: the non-excluded items rank 0, 1, 3, 2 (gains 2, -1, 0, 0); the ideal ranking
    puts the negative grade last, at position 4: IDCG = 2 - 1/log2(5), not 2 (issue 18 item 3)."""
    preds = torch.tensor([[0.9, 0.8, 0.1, 0.2, 0.3]])
    target = torch.tensor([[2, -1, 0, 0, 0]])
    exclude = torch.tensor([[False, False, False, False, True]])
    expected = (2 - 1 / math.log2(3)) / (2 - 1 / math.log2(5))
    for ex in (exclude, exclude.to_sparse()):
        assert F.ndcg(preds, target, gain="linear", exclude=ex).item() == pytest.approx(expected, abs=1e-6)
    assert F.ndcg(preds, target, gain="linear", mask=~exclude).item() == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("validate", [True, False])
def test_whole_list_measures_in_row_chunks_equal_the_dense_path(monkeypatch, validate):
    """Whole-list measures on the catalogue route run in row chunks (issue 18 item 11); unvalidated,
    with no host sync. The dense path (mask=~exclude) is the reference."""
    monkeypatch.setattr(plan_module, "WHOLE_LIST_CHUNK", 3 * 40)  # 3 rows per chunk of the 12
    preds, target, exclude = _data(5)
    names = ("ndcg", "map", "mrr", "r_precision", "ndcg@5")
    m = RankingMetrics(names, validate_args=validate)
    sparse_target, sparse_exclude = target.to_sparse(), exclude.to_sparse()
    with HostSyncGuard() if not validate else contextlib.nullcontext():
        m.update(preds, sparse_target, exclude=exclude)
        m.update(preds, target, exclude=sparse_exclude)
    ref = RankingMetrics(names)
    ref.update(preds, target, mask=~exclude)
    ref.update(preds, target, mask=~exclude)
    assert all(_close(m.compute()[k], ref.compute()[k]) for k in ref.keys)


@pytest.mark.parametrize("ties", ["average", "first"])
def test_a_large_whole_list_batch_runs_in_parts_with_sparse_inputs_kept_sparse(monkeypatch, ties):
    """Issue 27 item 6: whole lists of a batch over ``WHOLE_LIST_SMALL`` scores (lowered here) run in
    chunks of at most 1/``WHOLE_LIST_PARTS`` of the batch (the view and its statistics take some 36
    times a chunk's scores); a sparse target / exclude stays sparse per chunk where its row pointers
    can be read (validated, or on the CPU in eager mode), dense per chunk otherwise. The dense path
    (mask=~exclude) is the reference, validated or not, with or without host reads."""
    from torch_rankeval.ranking import catalogue
    from torch_rankeval.ranking.sparse import SparseTarget

    monkeypatch.setattr(catalogue, "WHOLE_LIST_SMALL", 100)
    preds, target, exclude = _data(7, n=70)
    assert catalogue.whole_list_rows(70, 40) == 3  # ceil(70 / 32)
    names = ["ndcg", "map", "mrr", "r_precision"]
    ref = F.evaluate(preds, target, names, mask=~exclude, reduction="none", ties=ties)
    for validate, guard in ((True, False), (False, False), (False, True)):
        with HostSyncGuard() if guard else contextlib.nullcontext():
            got = F.evaluate(preds, target.to_sparse(), names, exclude=exclude.to_sparse(), reduction="none",
                             ties=ties, validate_args=validate)  # fmt: skip
            chunks = list(catalogue.row_chunks(preds, target.to_sparse(), exclude, validate_args=validate))
        assert len(chunks) == 24 and {type(t) for _, t, _, _ in chunks} == ({torch.Tensor} if guard else {SparseTarget})
        assert all(_close(got[k], ref[k]) for k in names), (validate, guard)


def test_unvalidated_whole_list_with_a_gain_mapping_has_no_host_sync():
    preds, target, exclude = _data(6)
    gain = {0: 0.5, 1: 1.0, 2: 3.0, 3: 7.0}  # grade 0 has a gain: the whole row counts
    m = RankingMetrics(("ndcg", "map"), gain=gain, validate_args=False)
    with HostSyncGuard():
        m.update(preds, target, exclude=exclude.to_sparse())
    ref = RankingMetrics(("ndcg", "map"), gain=gain)
    ref.update(preds, target, mask=~exclude)
    assert all(_close(m.compute()[k], ref.compute()[k]) for k in ref.keys)
    validated = RankingMetrics(("ndcg", "map"), gain=gain)
    validated.update(preds, target, exclude=exclude)
    assert all(_close(validated.compute()[k], ref.compute()[k]) for k in ref.keys)
