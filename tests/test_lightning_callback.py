"""RankingMetricsCallback in one process: exact values for validate/test/fit, reset per epoch, sanity
check, checkpoint/resume, extra metrics, input lookup, sharding checks, error messages."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler

pl = pytest.importorskip("lightning.pytorch")

from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402

from tests.lightning_helpers import (  # noqa: E402, F401
    LinearRanker,
    Recorder,
    dataset,
    expected,
    loader,
    quiet_trainer,
    single_thread,
)

pytestmark = pytest.mark.usefixtures("single_thread")
from torch_rankeval import NDCG, RankingMetrics  # noqa: E402
from torch_rankeval import functional as F  # noqa: E402
from torch_rankeval.data import collate_queries  # noqa: E402
from torch_rankeval.lightning import RankingMetricsCallback  # noqa: E402
from torch_rankeval.sampler import UnpaddedDistributedSampler  # noqa: E402

KEYS = ["ndcg@5", "ndcg@10", "map@5", "map@10"]


def test_validate_and_test_log_the_functional_values_under_the_stage_prefixes(tmp_path):
    data, model = dataset(13, seed=1), LinearRanker()
    callback = RankingMetricsCallback()
    trainer = quiet_trainer(tmp_path, [callback])
    (val,) = trainer.validate(model, loader(data, 4, exact=True), verbose=False)
    truth = expected(model, data)
    assert sorted(val) == sorted(f"val/{k}" for k in KEYS)
    for key in KEYS:
        assert val[f"val/{key}"] == pytest.approx(truth[key], abs=1e-6)
    assert set(trainer.progress_bar_metrics) == set(val)  # shown in the progress bar

    # test_step returns only the scores: target and mask come from the batch
    (test,) = trainer.test(model, loader(data, 5, exact=False), verbose=False)
    assert sorted(test) == sorted(f"test/{k}" for k in KEYS)
    for key in KEYS:
        assert test[f"test/{key}"] == pytest.approx(truth[key], abs=1e-6)
    assert set(callback.results) == {"validate", "test"}
    assert callback.results["test"]["test/ndcg@10"].item() == test["test/ndcg@10"]


def test_fit_logs_each_epoch_from_scratch_and_ignores_the_sanity_check(tmp_path):
    """Each epoch's values are those of that epoch's weights on the whole set: no leftovers from the
    sanity check (which sees only 1 batch) or from the previous epoch."""
    val, train = dataset(11, seed=2), dataset(16, seed=3)
    weights = []

    class Snapshot(pl.Callback):
        def on_validation_epoch_end(self, trainer, pl_module):  # noqa: ANN001
            if not trainer.sanity_checking:
                weights.append(copy.deepcopy(pl_module.state_dict()))

    recorder, callback = Recorder(), RankingMetricsCallback()
    trainer = quiet_trainer(tmp_path, [recorder, callback, Snapshot()], max_epochs=3, num_sanity_val_steps=1)
    model = LinearRanker(lr=0.5)
    state_keys = sorted(model.state_dict())
    trainer.fit(model, loader(train, 4, exact=False), loader(val, 3, exact=True))

    assert len(recorder.epochs) == 3 and len(weights) == 3
    assert recorder.info["logged_during_sanity_check"] == []
    values = []
    for logged, state in zip(recorder.epochs, weights):
        snapshot = LinearRanker()
        snapshot.load_state_dict(state)
        truth = expected(snapshot, val)
        for key in KEYS:
            assert logged[f"val/{key}"] == pytest.approx(truth[key], abs=1e-6)
        values.append(logged["val/ndcg@10"])
    assert len(set(values)) > 1  # training moved the weights: the test compares different numbers
    assert sorted(model.state_dict()) == state_keys  # the metrics are not part of the module


def test_checkpoint_resume_gives_the_uninterrupted_values_and_keeps_monitoring(tmp_path):
    val, train = dataset(11, seed=2), dataset(16, seed=3)

    def run(max_epochs, directory, ckpt_path=None, **callback_kw):  # noqa: ANN001, ANN202
        recorder, callback = Recorder(), RankingMetricsCallback(**callback_kw)
        checkpoint = ModelCheckpoint(dirpath=directory, monitor="val/ndcg@10", mode="max", save_last=True)
        trainer = quiet_trainer(
            tmp_path, [recorder, callback, checkpoint], max_epochs=max_epochs, enable_checkpointing=True
        )
        model = LinearRanker(lr=0.5)
        trainer.fit(model, loader(train, 4, exact=False), loader(val, 3, exact=True), ckpt_path=ckpt_path)
        return recorder, callback, checkpoint, model

    straight, _, straight_ckpt, _ = run(3, tmp_path / "straight")
    first, _, first_ckpt, _ = run(1, tmp_path / "resumed")
    assert first.epochs == straight.epochs[:1]

    saved = torch.load(first_ckpt.last_model_path, weights_only=False)
    assert not any("sums" in key or "counts" in key for key in saved["state_dict"])  # module state untouched
    (state,) = [v for k, v in saved["callbacks"].items() if k.startswith("RankingMetricsCallback")]
    assert state["config"]["metrics"] == KEYS
    assert state["results"]["validate"]["val/ndcg@10"].item() == straight.epochs[0]["val/ndcg@10"]

    resumed, callback, checkpoint, model = run(3, tmp_path / "resumed", ckpt_path=first_ckpt.last_model_path)
    assert resumed.epochs == straight.epochs[1:]  # bit-identical to the uninterrupted run
    truth = expected(model, val)
    assert resumed.epochs[-1]["val/ndcg@10"] == pytest.approx(truth["ndcg@10"], abs=1e-6)
    best = max(e["val/ndcg@10"] for e in straight.epochs)
    assert checkpoint.best_model_score.item() == straight_ckpt.best_model_score.item() == best
    assert not [w for w in resumed.info["warnings"] if "not comparable" in w]

    # Resuming with other conventions under the same names warns: the monitored numbers change meaning.
    linear = RankingMetrics(("ndcg", "map"), k=(5, 10), gain="linear")
    changed, *_ = run(4, tmp_path / "resumed", ckpt_path=checkpoint.last_model_path, metrics=linear)
    (warning,) = [w for w in changed.info["warnings"] if "not comparable" in w]
    assert "'gain': 'exp2'" in warning and "'gain': 'linear'" in warning


def test_extra_metrics_are_fed_and_logged_and_non_scalars_reach_the_hook(tmp_path):
    data, model = dataset(9, seed=4), LinearRanker()
    seen = {}

    class Subclass(RankingMetricsCallback):
        def log_results(self, trainer, pl_module, stage, results):  # noqa: ANN001
            seen.update(results)
            super().log_results(trainer, pl_module, stage, results)

    callback = Subclass(
        metrics=("mrr",),
        k=None,
        extra_metrics={
            "trec_ndcg@10": lambda: NDCG(k=10, convention="trec_eval"),
            "ndcg_curve": lambda: NDCG(k=[1, 2, 3]),
            "lin": lambda: RankingMetrics(("ndcg@3",), gain="linear"),
        },
    )
    (val,) = quiet_trainer(tmp_path, [callback]).validate(model, loader(data, 4, exact=True), verbose=False)
    batch = data.padded()
    preds = model(batch["features"]).detach()
    target, mask = batch["target"], batch["mask"]
    assert sorted(val) == ["val/lin/ndcg@3", "val/mrr", "val/trec_ndcg@10"]
    assert val["val/mrr"] == pytest.approx(F.reciprocal_rank(preds, target, mask=mask).item(), abs=1e-6)
    assert val["val/trec_ndcg@10"] == pytest.approx(
        F.ndcg(preds, target, k=10, mask=mask, convention="trec_eval").item(), abs=1e-6
    )
    assert val["val/lin/ndcg@3"] == pytest.approx(F.ndcg(preds, target, k=3, mask=mask, gain="linear").item(), abs=1e-6)
    curve = seen["val/ndcg_curve"]  # a (3,) tensor: not logged, handed to the hook and kept in results
    assert curve.shape == (3,)
    assert torch.allclose(curve, F.ndcg(preds, target, k=[1, 2, 3], mask=mask), atol=1e-6)
    assert torch.equal(callback.results["validate"]["val/ndcg_curve"], curve)


def test_inputs_named_by_keys_and_clear_errors_for_wrong_step_outputs(tmp_path):
    data = dataset(6, seed=5)

    class Renamed(LinearRanker):
        def validation_step(self, batch, batch_idx):  # noqa: ANN001
            return {"scores": self(batch["features"]), "labels": batch["target"], "valid": batch["mask"]}

    callback = RankingMetricsCallback(
        k=5, preds_key="scores", target_key="labels", mask_key="valid", prefix={"validate": "dev_"}
    )
    model = Renamed()
    (val,) = quiet_trainer(tmp_path, [callback]).validate(model, loader(data, 4, exact=True), verbose=False)
    assert val["dev_ndcg@5"] == pytest.approx(expected(model, data)["ndcg@5"], abs=1e-6)

    class NoTarget(LinearRanker):
        def validation_step(self, batch, batch_idx):  # noqa: ANN001
            return {"preds": self(batch["features"])}

    plain = DataLoader([{"features": torch.randn(3, 6)}] * 2, batch_size=2)  # a batch without grades
    with pytest.raises(KeyError, match="no 'target' in the dict it returned or in the batch"):
        quiet_trainer(tmp_path, [RankingMetricsCallback()]).validate(NoTarget(), plain, verbose=False)

    class ReturnsList(LinearRanker):
        def validation_step(self, batch, batch_idx):  # noqa: ANN001
            return [self(batch["features"])]

    with pytest.raises(TypeError, match="validation_step returned a list; return a dict"):
        quiet_trainer(tmp_path, [RankingMetricsCallback()]).validate(
            ReturnsList(), loader(data, 4, exact=True), verbose=False
        )


def test_stages_limit_what_is_measured(tmp_path):
    data, model = dataset(6, seed=5), LinearRanker()
    trainer = quiet_trainer(tmp_path, [RankingMetricsCallback(stages="test", k=10)])
    assert trainer.validate(model, loader(data, 4, exact=True), verbose=False) == [{}]
    (test,) = trainer.test(model, loader(data, 4, exact=True), verbose=False)
    assert list(test) == ["test/ndcg@10", "test/map@10"]


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"stages": ("fit",)}, ValueError, "stages must be a non-empty subset"),
        ({"prefix": {"predict": "p/"}}, ValueError, "prefix must map stages"),
        ({"target_key": None}, ValueError, "target_key must be a non-empty string"),
        ({"on_inexact_sharding": "maybe"}, ValueError, "on_inexact_sharding must be one of"),
        ({"metrics": ("ndgc",)}, ValueError, "ndcg"),  # close-match hint from the metric table
        ({"metrics": lambda: RankingMetrics(ties="random")}, ValueError, "ties='random' is not valid"),
        ({"ties": "first"}, TypeError, "unexpected keyword argument 'ties'"),  # conventions go to the metric
        ({"metrics": RankingMetrics(k=3), "k": 10}, ValueError, "a configured RankingMetrics has its own"),
        ({"metrics": lambda: NDCG(k=3).sums}, TypeError, "the metrics factory must return a RankingMetrics"),
        ({"extra_metrics": {"x": 3}}, TypeError, "extra_metrics must map names to callables"),
    ],
)
def test_bad_arguments_fail_at_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        RankingMetricsCallback(**kwargs)


def _stub_trainer(loaders, world_size=2):  # noqa: ANN001, ANN202
    return SimpleNamespace(world_size=world_size, val_dataloaders=loaders, test_dataloaders=loaders)


def test_sharding_check_warns_raises_or_ignores():
    data = list(range(5))
    padded = DataLoader(data, sampler=DistributedSampler(data, num_replicas=2, rank=0, shuffle=False))
    exact = DataLoader(data, sampler=UnpaddedDistributedSampler(data, num_replicas=2, rank=0))

    with pytest.warns(UserWarning, match=r"the validation dataloader: DistributedSampler pads 5 samples to 6"):
        RankingMetricsCallback()._check_sharding("validate", _stub_trainer(padded))
    with pytest.raises(ValueError, match="test dataloader 1: DistributedSampler pads"):
        RankingMetricsCallback(on_inexact_sharding="error")._check_sharding("test", _stub_trainer([exact, padded]))
    RankingMetricsCallback(on_inexact_sharding="ignore")._check_sharding("validate", _stub_trainer(padded))
    RankingMetricsCallback()._check_sharding("validate", _stub_trainer(exact))  # nothing to say
    RankingMetricsCallback()._check_sharding("validate", _stub_trainer(padded, world_size=1))

    # fewer queries than processes would hang Lightning: an error even in "warn" mode
    tiny = DataLoader([0], sampler=UnpaddedDistributedSampler([0], num_replicas=2, rank=0))
    for mode in ("warn", "ignore"):
        with pytest.raises(ValueError, match="would wait for them forever") as caught:
            RankingMetricsCallback(on_inexact_sharding=mode)._check_sharding("validate", _stub_trainer(tiny))
        # the loader already has the non-repeating sampler: the advice is fewer processes, not that sampler
        assert "evaluate on at most as many processes as samples" in str(caught.value)
        assert "sampler=torch_rankeval.sampler.UnpaddedDistributedSampler" not in str(caught.value)
    with pytest.raises(ValueError, match="DistributedSampler pads") as caught:  # a padding sampler: advise ours
        RankingMetricsCallback(on_inexact_sharding="error")._check_sharding("validate", _stub_trainer(padded))
    assert "sampler=torch_rankeval.sampler.UnpaddedDistributedSampler(dataset)" in str(caught.value)


def test_plain_torchmetrics_usage_matches_the_callback(tmp_path):
    """The other way: a metric object as a module attribute, logged with self.log."""
    data = dataset(10, seed=6)

    class WithAttribute(LinearRanker):
        def __init__(self) -> None:
            super().__init__()
            self.val_ndcg = NDCG(k=10)

        def validation_step(self, batch, batch_idx):  # noqa: ANN001
            self.val_ndcg.update(self(batch["features"]), batch["target"], mask=batch["mask"])
            self.log("plain/ndcg@10", self.val_ndcg)
            return {"preds": self(batch["features"])}

    model = WithAttribute()
    (val,) = quiet_trainer(tmp_path, [RankingMetricsCallback(k=10)]).validate(
        model, loader(data, 3, exact=True), verbose=False
    )
    assert val["plain/ndcg@10"] == pytest.approx(val["val/ndcg@10"], abs=1e-7)
    assert val["val/ndcg@10"] == pytest.approx(expected(model, data)["ndcg@10"], abs=1e-6)


def test_collate_batches_feed_the_callback_with_global_query_ids(tmp_path):
    data, model = dataset(7, seed=7), LinearRanker()
    callback = RankingMetricsCallback(metrics=RankingMetrics(("ndcg@10",), keep_per_query=True))
    quiet_trainer(tmp_path, [callback]).validate(
        model, DataLoader(data, batch_size=3, shuffle=False, collate_fn=collate_queries), verbose=False
    )
    assert callback.results["validate"]["val/ndcg@10"].item() == pytest.approx(
        expected(model, data)["ndcg@10"], abs=1e-6
    )


class _FigureLogger(pl.loggers.Logger):
    """A logger whose experiment takes figures, as TensorBoard's SummaryWriter does."""

    def __init__(self) -> None:
        super().__init__()
        self.figures: list = []
        self.metrics: dict = {}

    @property
    def name(self) -> str:
        return "figures"

    @property
    def version(self) -> int:
        return 0

    @property
    def experiment(self):  # noqa: ANN201
        return SimpleNamespace(
            add_figure=lambda tag, figure, global_step: self.figures.append((tag, figure, global_step))
        )

    def log_hyperparams(self, params, *args, **kwargs) -> None:  # noqa: ANN001
        pass

    def log_metrics(self, metrics, step=None) -> None:  # noqa: ANN001
        self.metrics.update(metrics)


def test_position_profile_scalars_inversions_and_figure_are_logged(tmp_path):
    pytest.importorskip("matplotlib")
    data, model = dataset(17, seed=8), LinearRanker()
    logger = _FigureLogger()
    callback = RankingMetricsCallback(metrics=("ndcg@5",), position_profile=6, profile_bands=["1-2", "4-6"])
    quiet_trainer(tmp_path, [callback], logger=logger).validate(model, loader(data, 5, exact=True), verbose=False)

    # Independent computation: grades in the model's order (continuous scores: no ties).
    batch = data.padded()
    with torch.no_grad():
        scores = model(batch["features"]).masked_fill(~batch["mask"], float("-inf"))
    order = scores.argsort(dim=1, descending=True)
    grades = batch["target"].gather(1, order).double()
    present = batch["mask"].gather(1, order)
    for p in range(6):
        at_p = grades[present[:, p], p]
        assert logger.metrics[f"val/profile/relevance@{p + 1}"] == pytest.approx(at_p.mean().item(), abs=1e-6)
    upper = grades[:, 0:2][present[:, 0:2]].mean().item()
    lower = grades[:, 3:6][present[:, 3:6]].mean().item()
    assert logger.metrics["val/inversion@1-2_vs_4-6"] == pytest.approx(lower - upper, abs=1e-6)
    assert "val/ndcg@5" in logger.metrics
    ((tag, figure, step),) = logger.figures
    assert tag == "val/position_profile" and step == 0
    assert any(ax.get_xlabel() for ax in figure.axes) and any(ax.get_ylabel() for ax in figure.axes)


def test_position_profile_must_be_a_positive_int():
    with pytest.raises(ValueError, match="position_profile must be"):
        RankingMetricsCallback(position_profile=0)


def test_full_catalogue_step_passes_a_sparse_target_and_exclude_through(tmp_path):
    from torch_rankeval import ItemExposure

    users, items = 12, 40
    g = torch.Generator().manual_seed(21)
    scores = torch.randn(users, items, generator=g)
    target = (torch.rand(users, items, generator=g) < 0.1).long()
    seen = torch.rand(users, items, generator=g) < 0.2

    class Catalogue(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(()))

        def validation_step(self, batch, batch_idx):  # noqa: ANN001
            rows = batch["user"]
            return {
                "preds": scores[rows] * self.scale,
                "target": target[rows].to_sparse(),
                "exclude": seen[rows].to_sparse(),
            }

    callback = RankingMetricsCallback(
        metrics=("ndcg@5", "recall@5", "map"), k=None, extra_metrics={"exposure": lambda: ItemExposure(items, 5)}
    )
    loader_ = DataLoader([{"user": torch.tensor(u)} for u in range(users)], batch_size=5)
    (val,) = quiet_trainer(tmp_path, [callback]).validate(Catalogue(), loader_, verbose=False)
    want = F.evaluate(scores, target, ["ndcg@5", "recall@5", "map"], mask=~seen)
    for name, value in want.items():
        assert val[f"val/{name}"] == pytest.approx(value.item(), abs=1e-6)
    reference = ItemExposure(items, 5)
    reference.update(scores, exclude=seen)
    for name, value in reference.compute().items():
        assert val[f"val/exposure/{name}"] == pytest.approx(value.item(), abs=1e-6)


def test_a_configured_metric_is_cloned_fresh_for_each_stage_and_dataloader(tmp_path):
    data, other, model = dataset(9, seed=9), dataset(7, seed=10), LinearRanker()
    template = RankingMetrics(("ndcg@3", "map", "mrr@5"), convention="trec_eval", ignore_index=-1)
    callback = RankingMetricsCallback(template)
    trainer = quiet_trainer(tmp_path, [callback])
    loaders = [loader(data, 4, exact=True), loader(other, 3, exact=True)]
    logged = trainer.validate(model, loaders, verbose=False)
    (test,) = trainer.test(model, loaders[0], verbose=False)
    for values, d, suffix in ((logged[0], data, "/dataloader_idx_0"), (logged[1], other, "/dataloader_idx_1")):
        batch = d.padded()
        preds = model(batch["features"]).detach()
        want = F.evaluate(
            preds, batch["target"], ["ndcg@3", "map", "mrr@5"], mask=batch["mask"], convention="trec_eval"
        )
        for key, value in want.items():
            assert values[f"val/{key}{suffix}"] == pytest.approx(value.item(), abs=1e-6)
            if suffix.endswith("0"):
                assert test[f"test/{key}"] == pytest.approx(value.item(), abs=1e-6)
    # every slot is its own copy with the template's configuration; the template is never updated
    slots = [slot[""] for stage in ("validate", "test") for slot in callback._slots[stage]]
    assert len(slots) == 3 and len({id(m) for m in slots}) == 3
    assert all(m is not template for m in slots)
    assert all(m._config_state == template._config_state for m in slots)
    assert template._update_count == 0 and not template.sums.any()
    assert callback.build_metrics() is not template


def test_a_factory_is_called_once_per_stage_and_dataloader(tmp_path):
    data, model = dataset(8, seed=11), LinearRanker()
    calls = []

    def factory() -> RankingMetrics:
        calls.append(1)
        return RankingMetrics(("ndcg",), k=4, gain="linear")

    callback = RankingMetricsCallback(factory)
    assert len(calls) == 1  # built once at construction, so that a bad configuration fails there
    trainer = quiet_trainer(tmp_path, [callback])
    (val,) = trainer.validate(model, loader(data, 3, exact=True), verbose=False)
    trainer.test(model, loader(data, 3, exact=True), verbose=False)
    assert len(calls) == 3
    batch = data.padded()
    want = F.ndcg(model(batch["features"]).detach(), batch["target"], k=4, mask=batch["mask"], gain="linear")
    assert val["val/ndcg@4"] == pytest.approx(want.item(), abs=1e-6)


def test_a_single_metric_class_logs_under_its_keys(tmp_path):
    data, model = dataset(8, seed=12), LinearRanker()
    (val,) = quiet_trainer(tmp_path, [RankingMetricsCallback(NDCG(k=[2, 5]))]).validate(
        model, loader(data, 3, exact=True), verbose=False
    )
    batch = data.padded()
    want = F.ndcg(model(batch["features"]).detach(), batch["target"], k=[2, 5], mask=batch["mask"])
    assert sorted(val) == ["val/ndcg@2", "val/ndcg@5"]
    assert [val["val/ndcg@2"], val["val/ndcg@5"]] == pytest.approx(want.tolist(), abs=1e-6)


def test_build_metrics_of_a_configured_metric_takes_torchmetrics_options_only():
    """sync_on_compute=False really stops the sync (this fails if torchmetrics stops reading _to_sync)."""
    callback = RankingMetricsCallback(RankingMetrics(("mrr", "ndcg@2"), gain="linear"))  # nDCG reads the gain
    metric = callback.build_metrics(sync_on_compute=False)
    assert metric.sync_on_compute is False and metric.convention.gain == "linear"

    def no_sync(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("synced")

    metric.distributed_available_fn = lambda: True  # pretend to run under torch.distributed
    metric.dist_sync_fn = no_sync
    metric.update(torch.tensor([[0.9, 0.1]]), torch.tensor([[0, 1]]))
    assert metric.compute()["mrr"].item() == 0.5
    synced = callback.build_metrics()
    synced.distributed_available_fn = lambda: True
    synced.dist_sync_fn = no_sync
    synced.update(torch.tensor([[0.9, 0.1]]), torch.tensor([[0, 1]]))
    with pytest.raises(AssertionError, match="synced"):
        synced.compute()
    with pytest.raises(TypeError, match=r"\['ties'\] cannot override a configured RankingMetrics"):
        callback.build_metrics(ties="first")
