"""torch_rankeval.compat.torchmetrics against torchmetrics' own Retrieval* classes (the oracle), on the same
flat inputs, unreordered: several updates that split queries, shuffled and non-contiguous query ids, tied
scores (drawn from a few values, lists both shorter and longer than torch's 16-element insertion sort),
scores <= 0, queries without relevant documents and without non-relevant ones, ignore_index, every
empty_target_action and aggregation, top_k in {None, 1, 3, 10}, adaptive_k and max_fpr."""

from __future__ import annotations

import copy
import io
import pickle
import warnings

import pytest
import torch
import torchmetrics
from packaging.version import Version
from torch.testing import assert_close

import torch_rankeval
from torch_rankeval import compat

tm = pytest.importorskip("torchmetrics")
tmr = pytest.importorskip("torchmetrics.retrieval")
ours = compat.torchmetrics

NAMES = (
    "RetrievalNormalizedDCG",
    "RetrievalMAP",
    "RetrievalMRR",
    "RetrievalPrecision",
    "RetrievalRecall",
    "RetrievalHitRate",
    "RetrievalRPrecision",
    "RetrievalFallOut",
    "RetrievalAUROC",
)
TOP_K = (None, 1, 3, 10)
ACTIONS = ("neg", "pos", "skip", "error")
IGNORE = -100
#: a few score values, half of them <= 0: many ties and many non-positive scores
LEVELS = torch.tensor([-1.5, -0.25, 0.0, 0.3, 0.3001, 0.7, 2.0])


def _weighted(values: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """A callable aggregation that depends on the order of the queries (torchmetrics: by query id)."""
    return (values * torch.arange(1, values.numel() + 1, dtype=values.dtype)).sum() / values.numel() ** 2


AGGREGATIONS = ("mean", "median", "min", "max", _weighted)


def flat_case(seed: int, *, n_queries: int = 14, max_len: int = 40, graded: bool = False, ignore: bool = False):
    """Flat preds, target, indexes split into updates; every kind of query in each case."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, max_len + 1, (n_queries,), generator=g)
    lengths[0], lengths[1] = 1, 20  # a one-document list and one beyond torch's insertion sort
    ids = torch.randperm(1000, generator=g)[:n_queries]  # non-contiguous, unordered ids
    indexes = torch.repeat_interleave(ids, lengths)
    # the share of relevant documents per query: 0 (no relevant), 1 (no non-relevant), or mixed
    share = torch.tensor([0.0, 1.0, 0.2, 0.5, 0.8])[torch.randint(0, 5, (n_queries,), generator=g)]
    share[2], share[3], share[4] = 0.0, 1.0, 0.5
    target = (torch.rand(indexes.shape[0], generator=g) < share.repeat_interleave(lengths)).long()
    if graded:
        target = target * torch.randint(1, 4, target.shape, generator=g)
    preds = LEVELS[torch.randint(0, LEVELS.numel(), target.shape, generator=g)]
    if ignore:
        dropped = torch.rand(target.shape, generator=g) < 0.15
        target = torch.where(dropped, torch.full_like(target, IGNORE), target)
    perm = torch.randperm(indexes.shape[0], generator=g)  # shuffled documents: queries split over updates
    preds, target, indexes = preds[perm], target[perm], indexes[perm]
    cuts = sorted(torch.randint(1, indexes.shape[0], (2,), generator=g).tolist())
    bounds = [0, *cuts, indexes.shape[0]]
    return [(preds[a:b], target[a:b], indexes[a:b]) for a, b in zip(bounds, bounds[1:]) if b > a]


def _kwargs(name: str, top_k, **extra):
    kwargs = dict(extra)
    if name != "RetrievalRPrecision":
        kwargs["top_k"] = top_k
    return kwargs


def _both(name: str, batches, **kwargs):
    """(ours, torchmetrics') compute() on the same batches, or the exception each raised."""
    out = []
    for module in (ours, tmr):
        metric = getattr(module, name)(**kwargs)
        try:
            for batch in batches:
                metric.update(*batch)
            out.append(metric.compute())
        except ValueError as error:
            out.append(error)
    return out


def _assert_same(got, want, context):
    if isinstance(want, Exception):
        assert isinstance(got, ValueError), (context, got, want)
        return
    assert not isinstance(got, Exception), (context, got)
    assert got.shape == want.shape == (), context
    assert_close(got, want, atol=2e-6, rtol=1e-5, check_dtype=True, msg=lambda m: f"{context}: {m}")


@pytest.mark.parametrize(
    ("name", "top_k", "action"),
    [(n, k, a) for n in NAMES for k in TOP_K for a in ACTIONS if n != "RetrievalRPrecision" or k is None],
)
def test_equals_torchmetrics_on_tied_flat_updates(name, top_k, action):
    for seed in range(3):
        batches = flat_case(seed, graded=name == "RetrievalNormalizedDCG")
        got, want = _both(name, batches, **_kwargs(name, top_k, empty_target_action=action))
        _assert_same(got, want, (name, top_k, action, seed))
        if action == "error":
            assert isinstance(want, ValueError)  # every case holds an empty query: both raise


@pytest.mark.parametrize(
    ("name", "top_k"),
    [(n, k) for n in NAMES for k in (None, 3) if n != "RetrievalRPrecision" or k is None],
)
@pytest.mark.parametrize("aggregation", AGGREGATIONS, ids=lambda a: a if isinstance(a, str) else "callable")
@pytest.mark.parametrize("action", ("neg", "skip"))
def test_every_aggregation_equals_torchmetrics(name, top_k, aggregation, action):
    for seed in range(2):
        batches = flat_case(100 + seed, graded=name == "RetrievalNormalizedDCG")
        got, want = _both(name, batches, **_kwargs(name, top_k, aggregation=aggregation, empty_target_action=action))
        _assert_same(got, want, (name, top_k, aggregation, action, seed))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("top_k", (None, 3))
def test_ignore_index_drops_those_rows_as_torchmetrics(name, top_k):
    for seed in range(3):
        batches = flat_case(200 + seed, graded=name == "RetrievalNormalizedDCG", ignore=True)
        got, want = _both(name, batches, **_kwargs(name, top_k, ignore_index=IGNORE))
        _assert_same(got, want, (name, top_k, seed))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("top_k", TOP_K)
def test_error_action_computes_when_no_query_is_empty(name, top_k):
    g = torch.Generator().manual_seed(7)
    ids = torch.arange(6).repeat_interleave(8)
    target = torch.tensor([1, 0] * 24)  # every query has relevant and non-relevant documents
    preds = LEVELS[torch.randint(0, LEVELS.numel(), (48,), generator=g)]
    perm = torch.randperm(48, generator=g)
    batches = [
        (preds[perm][:30], target[perm][:30], ids[perm][:30]),
        (preds[perm][30:], target[perm][30:], ids[perm][30:]),
    ]
    got, want = _both(name, batches, **_kwargs(name, top_k, empty_target_action="error"))
    assert not isinstance(want, Exception)
    _assert_same(got, want, (name, top_k))


@pytest.mark.parametrize("top_k", TOP_K)
@pytest.mark.parametrize("adaptive_k", (False, True))
def test_precision_adaptive_k(top_k, adaptive_k):
    for seed in range(3):
        batches = flat_case(300 + seed, max_len=12)  # many lists shorter than top_k=10
        got, want = _both("RetrievalPrecision", batches, top_k=top_k, adaptive_k=adaptive_k)
        _assert_same(got, want, (top_k, adaptive_k, seed))


@pytest.mark.parametrize("max_fpr", (0.1, 0.3, 0.5, 1.0))
@pytest.mark.parametrize("aggregation", ("mean", "max"))
def test_auroc_max_fpr_on_tied_scores(max_fpr, aggregation):
    for seed in range(3):
        batches = flat_case(400 + seed)
        got, want = _both("RetrievalAUROC", batches, max_fpr=max_fpr, aggregation=aggregation)
        _assert_same(got, want, (max_fpr, aggregation, seed))


@pytest.mark.parametrize("top_k", (2, 3, 10))
@pytest.mark.parametrize("max_fpr", (None, 0.5))
def test_auroc_top_k_without_a_tie_at_the_cutoff(top_k, max_fpr):
    """AUROC@k equals torchmetrics wherever no tie group straddles the cutoff (ties inside the top k
    included): scores from a few levels, each query's top ``k`` scores strictly above the rest."""
    g = torch.Generator().manual_seed(11)
    rows = []
    for q in range(20):
        n = int(torch.randint(top_k + 1, 30, (1,), generator=g))
        head = torch.tensor([3.0, 2.0, 2.0, 1.5, 1.5, 1.5, 1.0, 1.0, 0.9, 0.8])[:top_k]
        tail = torch.tensor([0.5, 0.5, -1.0, 0.0])[torch.randint(0, 4, (n - top_k,), generator=g)]
        preds = torch.cat([head, tail])
        target = (torch.rand(n, generator=g) < 0.4).long()
        perm = torch.randperm(n, generator=g)
        rows.append((preds[perm], target[perm], torch.full((n,), q)))
    batches = [tuple(torch.cat(x) for x in zip(*rows[:12])), tuple(torch.cat(x) for x in zip(*rows[12:]))]
    got, want = _both("RetrievalAUROC", batches, top_k=top_k, max_fpr=max_fpr)
    _assert_same(got, want, (top_k, max_fpr))


def test_auroc_tie_straddling_the_cutoff_keeps_torch_topks_pick():
    """The case written out: scores [0.9, 0.5, 0.5], targets [1, 1, 0], top_k=2. torch.topk (CPU) keeps
    documents 0 and 1, both relevant: AUROC 0 by torchmetrics' rule (a top k of one class scores 0),
    not the expectation over the tied pair's two orders (1/2 * 0 + 1/2 * 1)."""
    preds = torch.tensor([0.9, 0.5, 0.5])
    assert preds.topk(2, sorted=True).indices.tolist() == [0, 1]  # torch's pick on CPU
    batch = (preds, torch.tensor([1, 1, 0]), torch.tensor([0, 0, 0]))
    got, want = _both("RetrievalAUROC", [batch], top_k=2)
    assert want.item() == 0.0
    _assert_same(got, want, "straddling tie")
    # the other order of the same documents: torch.topk keeps the non-relevant one of the tie
    batch = (torch.tensor([0.5, 0.5, 0.9]), torch.tensor([0, 1, 1]), torch.tensor([0, 0, 0]))
    got, want = _both("RetrievalAUROC", [batch], top_k=2)
    _assert_same(got, want, "straddling tie, reversed")


def _heavy_ties(seed: int, *, levels: torch.Tensor, n_queries: int = 30, max_len: int = 45):
    """Flat updates of queries scored from very few values (every cutoff splits a tie group)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, max_len + 1, (n_queries,), generator=g)
    lengths[:4] = torch.tensor([1, 2, 17, 33])  # around torch's 16-element insertion sort
    indexes = torch.repeat_interleave(torch.randperm(500, generator=g)[:n_queries], lengths)
    share = torch.rand(n_queries, generator=g).repeat_interleave(lengths)
    target = (torch.rand(indexes.shape[0], generator=g) < share).long()
    preds = levels[torch.randint(0, levels.numel(), target.shape, generator=g)]
    perm = torch.randperm(indexes.shape[0], generator=g)
    preds, target, indexes = preds[perm], target[perm], indexes[perm]
    cuts = sorted(torch.randint(1, indexes.shape[0], (3,), generator=g).tolist())
    bounds = [0, *cuts, indexes.shape[0]]
    return [(preds[a:b], target[a:b], indexes[a:b]) for a, b in zip(bounds, bounds[1:]) if b > a]


@pytest.mark.parametrize("top_k", (None, 2, 3, 5, 10, 20))
@pytest.mark.parametrize("max_fpr", (None, 0.2, 0.5))
@pytest.mark.parametrize(
    "levels",
    [
        torch.tensor([0.5]),  # one score: every list one tie group
        torch.tensor([0.2, 0.5, 0.5001]),  # within [0, 1]: binary_auroc ranks the scores as they are
        torch.tensor([-1.0, 0.0, 0.7, 3.0]),  # some outside [0, 1]: binary_auroc's sigmoid, no new tie
        torch.tensor([0.3, 17.0, 17.5, 40.0]),  # large logits: the sigmoid ties 17, 17.5 and 40 in float32
    ],
    ids=("one_value", "unit", "sigmoid", "sigmoid_ties"),
)
def test_auroc_top_k_on_heavy_ties_equals_torchmetrics(top_k, max_fpr, levels):
    for seed in range(4):
        batches = _heavy_ties(1000 + seed, levels=levels)
        aggregation = ("mean", "min")[seed % 2]  # the running sums, and the kept per-query values
        got, want = _both("RetrievalAUROC", batches, top_k=top_k, max_fpr=max_fpr, aggregation=aggregation)
        _assert_same(got, want, (top_k, max_fpr, aggregation, seed))


def test_auroc_under_torch_topk_ties_is_torchmetrics_retrieval_auroc():
    """``ties="torch_topk"`` (padded rows, any lengths) scores AUROC@k as ``retrieval_auroc`` of each row."""
    from torchmetrics.functional.retrieval import retrieval_auroc

    from torch_rankeval import functional as F

    g = torch.Generator().manual_seed(3)
    preds = torch.tensor([0.1, 0.4, 0.4, 0.9, 25.0, 30.0])[torch.randint(0, 6, (60, 24), generator=g)]
    target = torch.rand(60, 24, generator=g) < 0.4
    mask = torch.arange(24) < torch.randint(1, 25, (60, 1), generator=g)
    for k in (1, 2, 4, 9, None):
        at = "" if k is None else f"@{k}"
        names = [f"auroc{at}", f"auroc(max_fpr=0.3){at}"]
        got = F.evaluate(preds, target, names, mask=mask, reduction="none", convention=ours.PRESET, ties="torch_topk")
        for i in range(60):
            p, t = preds[i][mask[i]], target[i][mask[i]]
            want = retrieval_auroc(p, t, top_k=k).item()
            assert got[names[0]][i].item() == pytest.approx(want, abs=1e-6), (k, i)
            want = retrieval_auroc(p, t, top_k=k, max_fpr=0.3).item()
            assert got[names[1]][i].item() == pytest.approx(want, abs=1e-6), (k, i)


def test_scores_tied_only_in_float32_tie_as_in_torchmetrics():
    preds = torch.tensor([0.5, 0.5 + 1e-12, 0.2, 0.5 - 1e-12], dtype=torch.float64)
    target, indexes = torch.tensor([0, 1, 0, 1]), torch.zeros(4, dtype=torch.long)
    for name in NAMES:
        got, want = _both(name, [(preds, target, indexes)], **_kwargs(name, 2 if name != "RetrievalAUROC" else None))
        _assert_same(got, want, name)


def test_every_query_skipped_returns_zero_without_warning():
    batch = (torch.tensor([0.3, 0.2]), torch.tensor([0, 0]), torch.tensor([4, 4]))
    for name in NAMES:
        for aggregation in AGGREGATIONS:
            kwargs = {"empty_target_action": "skip", "aggregation": aggregation}
            if name == "RetrievalFallOut":  # its empty queries are those without a NON-relevant document
                batch = (batch[0], torch.tensor([1, 1]), batch[2])
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                got, want = _both(name, [batch], **kwargs)
            assert want.item() == 0.0
            _assert_same(got, want, (name, aggregation))


def test_signatures_are_torchmetrics():
    import inspect

    for name in NAMES:
        mine = inspect.signature(getattr(ours, name).__init__).parameters
        theirs = inspect.signature(getattr(tmr, name).__init__).parameters
        assert list(mine) == list(theirs), name
        assert [p.default for p in mine.values()] == [p.default for p in theirs.values()], name


def test_classes_run_on_the_streaming_core_with_the_measure_names():
    assert isinstance(ours.RetrievalMAP(), torch_rankeval.RankingMetrics)
    assert ours.RetrievalNormalizedDCG(top_k=10).keys == ["ndcg@10"]
    assert ours.RetrievalMAP().keys == ["map"]
    assert ours.RetrievalFallOut(top_k=5).keys == ["fall_out@5"]
    assert ours.RetrievalAUROC(top_k=3, max_fpr=0.5).keys == ["auroc(max_fpr=0.5)@3"]
    assert ours.RetrievalRPrecision().keys == ["r_precision"]
    # the installed torchmetrics' preset: "torchmetrics" from 1.8 on, "torchmetrics_1.7" before
    expected = "torchmetrics" if Version(torchmetrics.__version__) >= Version("1.8") else "torchmetrics_1.7"
    assert ours.PRESET == expected
    assert ours.RetrievalMAP().convention == torch_rankeval.PRESETS[expected]
    assert not ours.RetrievalMAP().keep_per_query and ours.RetrievalMAP(aggregation="median").keep_per_query


def test_bad_arguments_raise_as_torchmetrics():
    for name in NAMES:
        for module in (ours, tmr):
            cls = getattr(module, name)
            with pytest.raises(ValueError, match="empty_target_action"):
                cls(empty_target_action="zero")
            with pytest.raises(ValueError, match="ignore_index"):
                cls(ignore_index=0.5)
            with pytest.raises(ValueError, match="aggregation"):
                cls(aggregation="sum")
            # torchmetrics' RetrievalMAP / RetrievalMRR let top_k=0 through (their check is `not int and <= 0`)
            # and then rank the whole list: we refuse it in every class (top_k=None is the whole list)
            if name != "RetrievalRPrecision" and (module is ours or name not in ("RetrievalMAP", "RetrievalMRR")):
                with pytest.raises(ValueError, match="top_k"):
                    cls(top_k=0)
            metric = cls()
            with pytest.raises(ValueError, match="indexes"):
                metric.update(torch.tensor([0.5]), torch.tensor([1]), None)
            with pytest.raises(ValueError, match="same shape"):
                metric.update(torch.tensor([0.5, 0.2]), torch.tensor([1]), torch.tensor([0]))
            with pytest.raises(ValueError, match="float"):
                metric.update(torch.tensor([1]), torch.tensor([1]), torch.tensor([0]))
            if name != "RetrievalNormalizedDCG":
                with pytest.raises(ValueError, match="binary"):
                    metric.update(torch.tensor([0.5]), torch.tensor([2]), torch.tensor([0]))
    for module in (ours, tmr):
        with pytest.raises(ValueError, match="adaptive_k"):
            module.RetrievalPrecision(adaptive_k=1)
    # torchmetrics' own max_fpr check is inverted (`not float and 0 < max_fpr <= 1`): 1.5 passes its constructor
    with pytest.raises(ValueError, match="max_fpr"):
        ours.RetrievalAUROC(max_fpr=1.5)


@pytest.mark.parametrize("name", ["NDCG", "MAP", "MRR", "Precision", "Recall", "HitRate", "FallOut", "AUROC"])
def test_native_classes_answer_top_k_with_k_and_the_compat_module(name):
    with pytest.raises(TypeError, match=r"k=.*not top_k=.*torch_rankeval\.compat\.torchmetrics"):
        getattr(torch_rankeval, name)(top_k=10)
    with pytest.raises(TypeError, match=r"k=.*torch_rankeval\.compat\.torchmetrics"):
        torch_rankeval.RankingMetrics(("ndcg",), top_k=10)


def _filled(name="RetrievalMAP", **kwargs):
    metric = getattr(ours, name)(top_k=3, **kwargs)
    for batch in flat_case(500):
        metric.update(*batch)
    return metric


@pytest.mark.parametrize("aggregation", ("mean", "median"))
def test_pickle_deepcopy_reset_and_state_dict(aggregation):
    metric = _filled(aggregation=aggregation)
    value = metric.compute()
    for clone in (pickle.loads(pickle.dumps(metric)), copy.deepcopy(metric)):
        assert_close(clone.compute(), value)
    metric.persistent(True)
    buffer = io.BytesIO()
    torch.save(metric.state_dict(), buffer)
    buffer.seek(0)
    restored = ours.RetrievalMAP(top_k=3, aggregation=aggregation)
    restored.persistent(True)
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    assert_close(restored.compute(), value)
    metric.reset()
    with pytest.warns(UserWarning, match="before the ``update``"):  # torchmetrics' own warning
        assert metric.compute().item() == 0.0  # nothing left: 0, as torchmetrics' RetrievalMAP after reset
    for batch in flat_case(500):
        metric.update(*batch)
    assert_close(metric.compute(), value)


def test_forward_returns_the_batch_value_and_accumulates():
    batches = flat_case(600)
    mine, theirs = ours.RetrievalMRR(top_k=3), tmr.RetrievalMRR(top_k=3)
    for batch in batches:
        assert_close(mine(*batch), theirs(*batch), atol=2e-6, rtol=1e-5)
    assert_close(mine.compute(), theirs.compute(), atol=2e-6, rtol=1e-5)


def test_metric_collection_of_two_compat_classes():
    from torchmetrics import MetricCollection

    mine = MetricCollection({"ndcg": ours.RetrievalNormalizedDCG(top_k=10), "map": ours.RetrievalMAP(top_k=10)})
    theirs = MetricCollection({"ndcg": tmr.RetrievalNormalizedDCG(top_k=10), "map": tmr.RetrievalMAP(top_k=10)})
    for batch in flat_case(700):
        mine.update(*batch)
        theirs.update(*batch)
    got, want = mine.compute(), theirs.compute()
    assert set(got) == {"ndcg", "map"}
    for key in want:
        assert_close(got[key], want[key], atol=2e-6, rtol=1e-5)
    assert not torch.equal(got["ndcg"], got["map"])  # two metrics, not one merged compute group


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", (torch.bool, torch.int32, torch.float32))
def test_target_dtypes_and_2d_inputs_as_torchmetrics(name, dtype):
    """bool, int32 and float 0/1 targets, and (1, D) inputs (flattened, as torchmetrics does)."""
    top_k = 3
    batches = [(p, t.to(dtype), i) for p, t, i in flat_case(900)]
    if name == "RetrievalRPrecision" and dtype.is_floating_point:
        # torchmetrics' retrieval_r_precision slices by a float sum: TypeError; ours takes float targets
        with pytest.raises(TypeError):
            _both(name, batches)
        assert ours.RetrievalRPrecision().forward(*batches[0]).shape == ()
    else:
        got, want = _both(name, batches, **_kwargs(name, top_k))
        _assert_same(got, want, (name, dtype))
    rows = [(p.reshape(1, -1), t.to(dtype).reshape(1, -1), i.reshape(1, -1)) for p, t, i in flat_case(901)]
    if not (name == "RetrievalRPrecision" and dtype.is_floating_point):
        got, want = _both(name, rows, **_kwargs(name, top_k))
        _assert_same(got, want, (name, dtype, "2-D"))
