"""Metric attributes of a LightningModule under ``strategy="ddp_spawn"`` (2 gloo CPU processes): the
module, metrics included, is pickled into each process, every metric updates there, syncs once at
``compute`` and gives on every process exactly the single-process value on the whole data set.

The metrics are attributes (a MetricCollection and a debiased metric), not the callback: this is the
pattern that needs metrics to pickle.
"""

from __future__ import annotations

import pytest
import torch
from torchmetrics import MetricCollection

pl = pytest.importorskip("lightning.pytorch")

from tests.lightning_helpers import LinearRanker, dataset, loader, single_thread  # noqa: F401
from torch_rankeval import NDCG, PositionDebiasedDCG, PositionProfile, RankingMetrics

pytestmark = pytest.mark.usefixtures("single_thread")
N_QUERIES = 7


def _metrics() -> tuple[MetricCollection, PositionDebiasedDCG]:
    collection = MetricCollection(
        {
            "ranking": RankingMetrics(("ndcg@5", "map@10", "mrr", "P(rel=2)@3"), gain={0: 0, 1: 1, 2: 3, 3: 7, 4: 15}),
            "ndcg": NDCG(k=[3, 10]),
            "profile": PositionProfile(positions=4, ideal=False),
        }
    )
    return collection, PositionDebiasedDCG(k=5, eta=1.0)


def _update(collection, debiased, preds, target, mask) -> None:
    collection.update(preds, target, mask=mask)
    positions = torch.arange(1, preds.shape[-1] + 1).expand_as(preds)
    debiased.update(preds, (target > 1).float(), logged_positions=positions, mask=mask)


def _results(collection, debiased) -> dict[str, torch.Tensor]:
    out = {}
    for name, value in collection.compute().items():
        if isinstance(value, dict):
            out.update({f"{name}/{k}": v for k, v in value.items()})
        else:
            out[name] = value
    out["debiased"] = debiased.compute()
    return out


class MetricRanker(LinearRanker):
    def __init__(self, out: str) -> None:
        super().__init__(lr=0.0)
        self.out = out
        self.ranking, self.debiased = _metrics()

    def validation_step(self, batch, batch_idx):
        _update(self.ranking, self.debiased, self(batch["features"]), batch["target"], batch["mask"])

    def on_validation_epoch_end(self) -> None:
        torch.save(_results(self.ranking, self.debiased), f"{self.out}.{self.global_rank}")


@pytest.mark.slow
def test_metric_attributes_under_ddp_spawn_equal_the_single_process_values(tmp_path, monkeypatch, lightning_ddp):
    monkeypatch.delenv("MASTER_PORT", raising=False)
    data = dataset(N_QUERIES, seed=11)
    model = MetricRanker(str(tmp_path / "rank"))
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=lightning_ddp,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.validate(model, loader(data, 2, exact=True))  # pickles the module, metrics included

    batch = data.padded()
    with torch.no_grad():
        preds = LinearRanker(lr=0.0)(batch["features"])
    collection, debiased = _metrics()
    _update(collection, debiased, preds, batch["target"], batch["mask"])
    expected = _results(collection, debiased)
    for rank in (0, 1):
        got = torch.load(f"{tmp_path / 'rank'}.{rank}")
        assert got.keys() == expected.keys()
        for key, value in expected.items():
            torch.testing.assert_close(
                got[key], value, equal_nan=True, atol=1e-6, rtol=0, msg=lambda m, key=key: f"{key}: {m}"
            )
