"""Issue 27 (third reliability round), items 3, 4, 10, 11, 12: each against an independent oracle."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from torch_rankeval.metrics import ItemExposure


# ---------------------------------------------------------------------------------------- 3: RecBole's tail
def _scores_of(item_matrix, num_items):
    """Scores whose top-k lists are the rows of ``item_matrix``, in order (the other items score 0)."""
    scores = torch.zeros(len(item_matrix), num_items, dtype=torch.float64)
    for r, row in enumerate(item_matrix):
        for j, item in enumerate(row):
            scores[r, item] = len(row) - j
    return scores


def test_tail_percentage_equals_recbole_test_tailpercentage():
    """RecBole tests/metrics/test_topk_metrics.py::TestTopKMetrics::test_tailpercentage: its fixture
    (item_matrix, num_items=8, item_count with item 1 counted 0 times; tail_ratio unset, so 0.1) and its
    expected per-user, per-position values [[0,0,0],[0,0,0],[0,0,0],[1/1,1/2,1/3],[0,0,0]], averaged over
    the five users at each position k as RecBole's topk_result does."""
    item_matrix = [[5, 7, 3], [4, 5, 2], [2, 3, 5], [1, 4, 6], [5, 3, 7]]
    item_count = {1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 6: 5}
    expected = np.array([[0, 0, 0], [0, 0, 0], [0, 0, 0], [1 / 1, 1 / 2, 1 / 3], [0, 0, 0]]).mean(axis=0)
    metric = ItemExposure(8, (1, 2, 3), popularity=item_count, tail_ratio=0.1)
    assert metric.tail.tolist() == [False, True, False, False, False, False, False, False]  # item 1, count 0
    metric.update(_scores_of(item_matrix, 8))
    got = metric.compute()
    for k in (1, 2, 3):
        assert got[f"tail_percentage@{k}"].item() == pytest.approx(expected[k - 1], rel=1e-6)
    # RecBole's test_averagepopularity on the same fixture (item_count.get(item, 0)), at k = 3
    assert got["popularity@3"].item() == pytest.approx(np.mean([6 / 3, 8 / 3, 7 / 3, 8 / 3, 6 / 3]), rel=1e-6)


@pytest.mark.parametrize("tail_ratio", [0.1, 0.3, 0.5, 1.0, 2, 3.5])
def test_tail_of_a_counter_with_zero_counts_equals_recbole_get_tail(tail_ratio):
    """A counter holding zero counts (random, many ties of popularity) against a transcription of
    RecBole's TailPercentage.get_tail (recbole/evaluator/metrics.py), key for key."""
    from tests.test_exposure_recbole import rb_tail_items

    g = torch.Generator().manual_seed(3)
    counts = torch.randint(0, 4, (30,), generator=g)
    keys = torch.randperm(30, generator=g)[:22].tolist()
    counter = Counter({np.int64(i): np.int64(counts[i]) for i in keys})  # RecBole's Counter has numpy keys
    metric = ItemExposure(30, 5, popularity=counter, tail_ratio=tail_ratio)
    want = sorted(int(i) for i in rb_tail_items(dict(counter), tail_ratio))
    assert torch.nonzero(metric.tail).flatten().tolist() == want
    assert any(counts[i] == 0 for i in want)  # the fixture does put zero-count items in the tail


def test_counter_popularity_bad_keys():
    with pytest.raises(ValueError, match=r"item indices in \[0, 4\)"):
        ItemExposure(4, 2, popularity={7: 1.0})
    with pytest.raises(ValueError, match="finite numbers"):
        ItemExposure(4, 2, popularity={1: "a"})


# ---------------------------------------------------------------------------------------- 4: Lightning slots
def test_validate_after_a_fit_with_two_loaders_logs_one_loader_without_suffix(tmp_path):
    """fit with two validation loaders, then validate (and fit again) with one: each loop logs the keys
    of its own loaders, exactly, and the values of its own data."""
    from tests.lightning_helpers import LinearRanker, dataset, loader, quiet_trainer
    from torch_rankeval import functional as F
    from torch_rankeval.lightning import RankingMetricsCallback

    train, val, other, model = dataset(8, seed=1), dataset(9, seed=2), dataset(7, seed=3), LinearRanker()
    callback = RankingMetricsCallback(("ndcg", "map"), k=10)
    trainer = quiet_trainer(tmp_path, [callback], max_epochs=1)
    trainer.fit(model, loader(train, 4, exact=False), [loader(val, 3, exact=True), loader(other, 3, exact=True)])
    two = {f"val/{m}@10/dataloader_idx_{i}" for m in ("ndcg", "map") for i in (0, 1)}
    assert {k for k in trainer.callback_metrics if k.startswith("val/")} == two
    (logged,) = trainer.validate(model, loader(val, 3, exact=True), verbose=False)
    assert set(logged) == {"val/ndcg@10", "val/map@10"}
    assert set(callback.results["validate"]) == {"val/ndcg@10", "val/map@10"}
    batch = val.padded()
    with torch.no_grad():
        want = F.ndcg(model(batch["features"]), batch["target"], k=10, mask=batch["mask"]).item()
    assert logged["val/ndcg@10"] == pytest.approx(want, abs=1e-6)
    assert len(callback._slots["validate"]) == 1
    # and back: two loaders again get two slots, fresh
    logged = trainer.validate(model, [loader(other, 3, exact=True), loader(val, 3, exact=True)], verbose=False)
    assert set(logged[0]) | set(logged[1]) == two
    assert logged[1]["val/ndcg@10/dataloader_idx_1"] == pytest.approx(want, abs=1e-6)


# ---------------------------------------------------------------------------------------- 10: 1-D without indexes
@pytest.mark.parametrize("validate_args", [True, False])
def test_flat_input_without_indexes_is_an_error_naming_indexes(validate_args):
    """A torchmetrics user's flat (D,) input without indexes= is refused (not one giant query), with or
    without validation; the documented spellings of one list give the number of the (1, L) batch, which
    is torchmetrics' own nDCG of that list."""
    from torchmetrics.functional.retrieval import retrieval_normalized_dcg

    from tests.sync_guard import HostSyncGuard
    from torch_rankeval import NDCG, RankingMetrics

    preds = torch.tensor([0.9, 0.2, 0.5, 0.5, 0.1])
    target = torch.tensor([0, 1, 1, 0, 2])
    for make in (
        lambda: NDCG(k=3, convention="torchmetrics", validate_args=validate_args),
        lambda: RankingMetrics(("ndcg@3", "map")),
    ):
        with pytest.raises(ValueError, match=r"without indexes=.*\(1, L\) batch.*indexes=torch.zeros_like\(preds"):
            make().update(preds, target)
    with HostSyncGuard():  # the refusal reads shapes only: no host sync
        with pytest.raises(ValueError, match="indexes="):
            NDCG(k=3, validate_args=False).update(preds, target)
    want = retrieval_normalized_dcg(preds, target, top_k=3).item()
    spellings = (
        (NDCG(k=3, convention="torchmetrics", validate_args=validate_args), (preds[None], target[None]), {}),
        (
            NDCG(k=3, convention="torchmetrics", validate_args=validate_args),
            (preds, target),
            {"indexes": torch.zeros_like(preds, dtype=torch.long)},
        ),
        (NDCG(k=3, convention="torchmetrics", validate_args=validate_args, input_format="padded"), (preds, target), {}),
        (
            NDCG(k=3, convention="torchmetrics", validate_args=validate_args),
            (preds, target),
            {"mask": torch.ones(5, dtype=torch.bool)},
        ),
    )
    for metric, args, kw in spellings:
        metric.update(*args, **kw)
        assert metric.compute().item() == pytest.approx(want, abs=1e-6)


# ---------------------------------------------------------------------------------------- 11: compat functional
FUNCTIONAL = [
    ("retrieval_normalized_dcg", {"top_k": None}, True),
    ("retrieval_normalized_dcg", {"top_k": 3}, True),
    ("retrieval_average_precision", {"top_k": None}, False),
    ("retrieval_average_precision", {"top_k": 4}, False),
    ("retrieval_reciprocal_rank", {"top_k": None}, False),
    ("retrieval_reciprocal_rank", {"top_k": 2}, False),
    ("retrieval_precision", {"top_k": 3}, False),
    ("retrieval_precision", {"top_k": 20, "adaptive_k": True}, False),
    ("retrieval_precision", {"top_k": 20}, False),
    ("retrieval_recall", {"top_k": None}, False),
    ("retrieval_recall", {"top_k": 3}, False),
    ("retrieval_hit_rate", {"top_k": 2}, False),
    ("retrieval_r_precision", {}, False),
    ("retrieval_fall_out", {"top_k": None}, False),
    ("retrieval_fall_out", {"top_k": 3}, False),
    ("retrieval_auroc", {"top_k": None}, False),
    ("retrieval_auroc", {"top_k": 5, "max_fpr": 0.5}, False),
]


def _tied_lists(seed, n_lists=60, graded=False):
    """Random lists of 1-14 documents, scores rounded to 0.1 in [-0.3, 1] (ties, some <= 0), some lists
    without a relevant or without a non-relevant document."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(n_lists):
        n = int(torch.randint(1, 15, (), generator=g))
        preds = (torch.rand(n, generator=g) * 1.3 - 0.3).mul(10).round().div(10)
        target = torch.randint(0, 4 if graded else 2, (n,), generator=g)
        yield preds, target


@pytest.mark.parametrize(("name", "kw", "graded"), FUNCTIONAL)
def test_functional_counterparts_equal_torchmetrics_functional(name, kw, graded):
    import torchmetrics.functional.retrieval as tmf

    from torch_rankeval.compat import torchmetrics as compat

    ours, theirs = getattr(compat, name), getattr(tmf, name)
    for seed in range(3):
        for preds, target in _tied_lists(seed, graded=graded):
            want = theirs(preds, target, **kw)
            got = ours(preds, target, **kw)
            assert got.shape == want.shape == ()
            assert got.item() == pytest.approx(want.item(), abs=1e-6), (preds.tolist(), target.tolist())
    # torchmetrics' own reading of a 2-D input: one query, flattened
    preds, target = torch.tensor([[0.5, 0.5], [0.2, 0.9]]), torch.tensor([[1, 0], [0, 1]])
    assert ours(preds, target, **kw).item() == pytest.approx(theirs(preds, target, **kw).item(), abs=1e-6)


@pytest.mark.parametrize("kw", [{}, {"max_k": 4}, {"max_k": 20, "adaptive_k": True}, {"max_k": 20}])
def test_functional_precision_recall_curve_equals_torchmetrics(kw):
    from torchmetrics.functional.retrieval import retrieval_precision_recall_curve as theirs

    from torch_rankeval.compat.torchmetrics import retrieval_precision_recall_curve as ours

    for preds, target in _tied_lists(7):
        for got, want in zip(ours(preds, target, **kw), theirs(preds, target, **kw)):
            torch.testing.assert_close(got, want.to(got.dtype), atol=1e-6, rtol=0)


def _flat_batches(seed, n_queries=40):
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, 13, (n_queries,), generator=g)
    ids = torch.repeat_interleave(torch.randperm(1000, generator=g)[:n_queries], sizes)
    perm = torch.randperm(len(ids), generator=g)  # documents of a query scattered over the batches
    preds = (torch.rand(len(ids), generator=g) * 1.2 - 0.2).mul(10).round().div(10)[perm]
    target = (torch.rand(len(ids), generator=g) < 0.35).long()[perm]
    return preds, target, ids[perm]


@pytest.mark.parametrize(
    "kw",
    [
        {"min_precision": 0.0},
        {"min_precision": 0.3},
        {"min_precision": 0.5, "max_k": 5},
        {"min_precision": 0.4, "max_k": 30, "adaptive_k": True},
        {"min_precision": 0.2, "empty_target_action": "skip"},
        {"min_precision": 0.6, "empty_target_action": "pos"},
        {"min_precision": 0.3, "ignore_index": -1},
        {"min_precision": 0.99},
    ],
)
def test_recall_at_fixed_precision_equals_torchmetrics(kw):
    from torchmetrics.retrieval import RetrievalPrecisionRecallCurve as TMCurve
    from torchmetrics.retrieval import RetrievalRecallAtFixedPrecision as TMRecall

    from torch_rankeval.compat.torchmetrics import RetrievalPrecisionRecallCurve, RetrievalRecallAtFixedPrecision

    for seed in range(4):
        preds, target, ids = _flat_batches(seed)
        if "ignore_index" in kw:
            target = torch.where(
                torch.rand(len(target), generator=torch.Generator().manual_seed(seed)) < 0.1, -1, target
            )
        curve_kw = {k: v for k, v in kw.items() if k != "min_precision"}
        pairs = (
            (RetrievalRecallAtFixedPrecision(**kw), TMRecall(**kw)),
            (RetrievalPrecisionRecallCurve(**curve_kw), TMCurve(**curve_kw)),
        )
        for ours, theirs in pairs:
            for part in torch.tensor_split(torch.arange(len(ids)), 3):
                ours.update(preds[part], target[part], ids[part])
                theirs.update(preds[part], target[part], ids[part])
            for got, want in zip(ours.compute(), theirs.compute()):
                assert got.shape == want.shape
                torch.testing.assert_close(got, want.to(got.dtype), atol=1e-6, rtol=0)


def test_curve_classes_refuse_what_torchmetrics_refuses():
    from torch_rankeval.compat.torchmetrics import RetrievalPrecisionRecallCurve, RetrievalRecallAtFixedPrecision

    with pytest.raises(ValueError, match="min_precision"):
        RetrievalRecallAtFixedPrecision(min_precision=1)  # torchmetrics wants a float
    with pytest.raises(ValueError, match="max_k"):
        RetrievalPrecisionRecallCurve(max_k=0)
    with pytest.raises(ValueError, match="binary"):
        RetrievalPrecisionRecallCurve().update(torch.rand(3), torch.tensor([0, 2, 1]), torch.zeros(3, dtype=torch.long))
    m = RetrievalPrecisionRecallCurve(empty_target_action="error")
    m.update(torch.rand(3), torch.zeros(3, dtype=torch.long), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="no positive target"):
        m.compute()


def test_compat_all_lists_every_public_name():
    from torch_rankeval.compat import torchmetrics as compat

    public = {n for n in vars(compat) if n.startswith(("Retrieval", "retrieval_"))}
    assert public <= set(compat.__all__)


# ---------------------------------------------------------------------------------------- 12: plot bounds and label
def test_ndcg_plot_spans_zero_to_one_and_names_the_cutoff():
    """torchmetrics' plot_single_or_multi_val with bounds (0, 1) sets the y-limits to the bounds -/+ 10%;
    without them one value gets matplotlib's +-0.03 around itself (the issue's report)."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from torch_rankeval import DCG, NDCG

    metric = NDCG(k=10)
    metric.update(torch.tensor([[0.9, 0.1, 0.5]]), torch.tensor([[1, 0, 1]]))
    _, ax = metric.plot()
    assert ax.get_ylabel() == "NDCG@10"
    assert ax.get_ylim() == pytest.approx((-0.1, 1.1))
    _, ax = NDCG(k=[5, 10]).plot([torch.tensor([0.5, 0.6]), torch.tensor([0.7, 0.8])])
    assert ax.get_ylabel() == "NDCG@5,10"
    dcg = DCG()  # unbounded above: no upper bound drawn, whole-list label
    dcg.update(torch.tensor([[0.9, 0.1, 0.5]]), torch.tensor([[3, 0, 1]]))
    _, ax = dcg.plot()
    assert ax.get_ylabel() == "DCG" and ax.get_ylim()[1] < 10
    plt.close("all")


# ---------------------------------------------------------------------------------------- 12: CLI measures listing
def test_unknown_measure_points_to_the_listing_command_which_lists_every_name(capsys):
    from torch_rankeval.cli import main
    from torch_rankeval.measures import known_names

    with pytest.raises(ValueError) as err:
        from torch_rankeval.measures import parse_measure

        parse_measure("nDGC@10")
    message = str(err.value)
    assert "`torch-rankeval measures`" in message and "Did you mean 'nDCG'" in message
    assert "alpha_nDCG" not in message and len(message) < 400  # no longer every name on one line
    assert main(["measures"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed == known_names() and len(listed) > 100
    assert main(["measures", "RBP"]) == 0
    assert capsys.readouterr().out.split() == [n for n in known_names() if "rbp" in n.lower()]
    assert main(["measures", "zzz"]) == 2
    assert "no measure name contains 'zzz'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------- 12: reference defaults
def test_reference_shows_the_effective_defaults_of_convention_parameters():
    """The docs_ext griffe hook: the Default column of gain / ties / empty_target_action reads the
    effective default (conventions.DEFAULT), not the bare None of the signature."""
    griffe = pytest.importorskip("griffe")
    from docs_ext.griffe_docstrings import ProjectDocstrings, effective_defaults
    from tests.conftest import REPO
    from torch_rankeval.conventions import DEFAULT

    assert effective_defaults()["empty_target_action"] == f"None → {DEFAULT.empty_target_action!r}"
    pkg = griffe.load(
        "torch_rankeval", search_paths=[str(REPO)], docstring_parser="google",
        docstring_options={"warn_unknown_params": False}, extensions=griffe.load_extensions(ProjectDocstrings()),
    )  # fmt: skip
    for path in ("metrics.base.RankingMetrics", "metrics.single.NDCG"):
        (params,) = [s.value for s in pkg[path].docstring.parsed if s.kind.value == "parameters"]
        shown = {p.name: str(p.value) for p in params}
        assert shown["gain"] == "None → 'exp2'" and shown["ties"] == "None → 'average'"
        assert shown["empty_target_action"] == "None → 'neg'" and shown["k"] == "None"  # k's None is its default


# ---------------------------------------------------------------------------------------- 12: one name per run
def test_a_run_has_one_name_in_every_table(tmp_path):
    """A run read from a file is named by that file in to_csv, to_dict, to_pandas, to_latex and compare_runs;
    a run built in memory by its tag, in all of them too."""
    from torch_rankeval.stats import compare_runs
    from torch_rankeval.trec import Qrels, Run, evaluate

    qrels = Qrels.from_dict({"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 1}})
    path = tmp_path / "bm25.run"
    path.write_text("q1 Q0 d1 1 2.0 mytag\nq1 Q0 d2 2 1.0 mytag\nq2 Q0 d3 1 1.0 mytag\n")
    other = tmp_path / "dense.run"
    other.write_text("q1 Q0 d2 1 2.0 mytag\nq1 Q0 d1 2 1.0 mytag\nq2 Q0 d3 1 1.0 mytag\n")
    for run, name in ((str(path), str(path)), (Run.from_dict({"q1": {"d1": 1.0}}, tag="bm25"), "bm25")):
        result = evaluate(qrels, run, ["P.1"])
        assert result.run == name and result.to_dict()["run"] == name
        assert result.to_csv().splitlines()[1].split(",")[0] == name
        assert result.to_latex().splitlines()[6].startswith(name.replace("_", r"\_") + " & ")
        pd = pytest.importorskip("pandas")
        assert isinstance(result.to_pandas(), pd.DataFrame) and result.to_pandas().index.tolist() == [name]
    comparison = compare_runs(qrels=qrels, scores=[str(path), str(other)], measures=["P.1"])
    assert list(comparison.runs) == [str(path), str(other)]  # not the tag "mytag" they share
