"""``self.log`` / ``self.log_dict`` with the metric classes in a LightningModule, as docs/guide/lightning.md says:
a MetricCollection of one-metric classes logged as it stands, a RankingMetrics' computed dict at epoch end.
The oracle is the functional API on the whole validation set with the final weights (tests/lightning_helpers)."""

from __future__ import annotations

import pytest

pl = pytest.importorskip("lightning.pytorch")
from torchmetrics import MetricCollection  # noqa: E402

from tests.lightning_helpers import LinearRanker, dataset, expected, loader  # noqa: E402
from torch_rankeval import MAP, NDCG, RankingMetrics  # noqa: E402


class LoggingRanker(LinearRanker):
    def __init__(self) -> None:
        super().__init__(lr=0.5)
        self.collection = MetricCollection({"ndcg@5": NDCG(k=5), "map@10": MAP(k=10)}, prefix="col/")
        self.all = RankingMetrics(("ndcg@5", "map@10"))

    def validation_step(self, batch, batch_idx, dataloader_idx=0):  # noqa: ANN001
        preds = self(batch["features"])
        self.collection.update(preds, batch["target"], mask=batch["mask"])
        self.log_dict(self.collection)
        self.all.update(preds, batch["target"], mask=batch["mask"])

    def on_validation_epoch_end(self) -> None:
        self.log_dict({f"all/{k}": v for k, v in self.all.compute().items()})
        self.all.reset()


def test_fit_logs_a_collection_and_a_computed_dict(tmp_path):
    train, val = dataset(16, seed=3), dataset(11, seed=2)
    model = LoggingRanker()
    trainer = pl.Trainer(
        accelerator="cpu",
        max_epochs=2,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(model, loader(train, 4, exact=False), loader(val, 3, exact=True))
    truth = expected(model, val)  # the final weights: the last validation epoch
    logged = trainer.callback_metrics
    assert sorted(logged) == ["all/map@10", "all/ndcg@5", "col/map@10", "col/ndcg@5"]
    for key in ("ndcg@5", "map@10"):
        assert logged[f"all/{key}"].item() == pytest.approx(truth[key], abs=1e-6)
        assert logged[f"col/{key}"].item() == pytest.approx(truth[key], abs=1e-6)


def test_log_dict_of_a_ranking_metrics_object_is_refused_by_lightning():
    """Documented: Lightning's log_dict takes a dict or a MetricCollection, not a dict-valued metric."""
    model = LoggingRanker()
    with pytest.raises(AttributeError, match="items"):
        model.log_dict(model.all)
