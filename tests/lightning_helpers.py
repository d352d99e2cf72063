"""Tiny Lightning pieces shared by the callback tests (importable by ddp_spawn workers)."""

from __future__ import annotations

import warnings
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader

from torch_rankeval import functional as F
from torch_rankeval.data import QueryDataset, collate_queries, synthetic_ltr
from torch_rankeval.sampler import UnpaddedDistributedSampler

N_FEATURES = 6


def quiet_trainer(tmp_path: Path, callbacks: list, **kw) -> pl.Trainer:  # noqa: ANN401
    """A one-CPU Trainer with no logger, checkpoint, progress bar, model summary or sanity steps
    (``kw`` overrides any of these)."""
    options = dict(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        num_sanity_val_steps=0,
    )
    return pl.Trainer(callbacks=callbacks, **{**options, **kw})


def dataset(n_queries: int, seed: int) -> QueryDataset:
    return synthetic_ltr(n_queries, n_features=N_FEATURES, min_docs=3, max_docs=12, seed=seed)


class LinearRanker(pl.LightningModule):
    """A linear scorer with seeded weights; ``lr=0`` keeps them fixed through ``fit``."""

    def __init__(self, lr: float = 0.0, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.scorer = torch.nn.Linear(N_FEATURES, 1)
        with torch.no_grad():
            self.scorer.weight.copy_(torch.randn(1, N_FEATURES, generator=g))
            self.scorer.bias.zero_()
        self.lr = lr

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.scorer(features).squeeze(-1)

    def training_step(self, batch, batch_idx):  # noqa: ANN001
        scores = self(batch["features"]).masked_fill(~batch["mask"], float("-inf"))
        gains = (2 ** batch["target"] - 1) * batch["mask"]
        log_p = torch.log_softmax(scores, dim=1).masked_fill(~batch["mask"], 0.0)
        return -(gains / gains.sum(1, keepdim=True).clamp_min(1e-9) * log_p).sum(1).mean()

    def validation_step(self, batch, batch_idx, dataloader_idx=0):  # noqa: ANN001
        return {"preds": self(batch["features"]), "target": batch["target"], "mask": batch["mask"]}

    def test_step(self, batch, batch_idx):  # noqa: ANN001
        return self(batch["features"])  # target and mask come from the batch

    def configure_optimizers(self):  # noqa: ANN201
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def loader(data: QueryDataset, batch_size: int, *, exact: bool) -> DataLoader:
    """An evaluation loader: with our sampler (exact), or a plain one (Lightning injects its padding sampler)."""
    sampler = UnpaddedDistributedSampler(data) if exact else None
    return DataLoader(data, batch_size=batch_size, sampler=sampler, collate_fn=collate_queries)


def expected(model: torch.nn.Module, data: QueryDataset, **convention) -> dict[str, float]:
    """The functional API on the whole data set: the values the callback must log."""
    batch = data.padded()
    with torch.no_grad():
        preds = model(batch["features"])
    kw = {"mask": batch["mask"], **convention}
    ndcg = F.ndcg(preds, batch["target"], k=[5, 10], **kw)
    ap = F.average_precision(preds, batch["target"], k=[5, 10], **kw)
    return {"ndcg@5": ndcg[0].item(), "ndcg@10": ndcg[1].item(), "map@5": ap[0].item(), "map@10": ap[1].item()}


class Recorder(pl.Callback):
    """Saves, per process, what was logged after each evaluation epoch (not the sanity check), the
    samplers and batch counts Lightning used, and the warnings raised."""

    def __init__(self, out: Path | None = None) -> None:
        self.out = out
        self.epochs: list[dict[str, float]] = []
        self.info: dict = {}

    def setup(self, trainer, pl_module, stage):  # noqa: ANN001
        self._catcher = warnings.catch_warnings(record=True)
        self.caught = self._catcher.__enter__()
        warnings.simplefilter("always")

    def on_sanity_check_end(self, trainer, pl_module):  # noqa: ANN001
        self.info["logged_during_sanity_check"] = sorted(trainer.callback_metrics)

    def _record(self, trainer):  # noqa: ANN001
        self.epochs.append({k: v.item() for k, v in trainer.callback_metrics.items() if "/" in k})
        loaders = trainer.val_dataloaders if not trainer.testing else trainer.test_dataloaders
        loaders = loaders if isinstance(loaders, list) else [loaders]
        self.info["samplers"] = [type(dl.sampler).__name__ for dl in loaders]
        self.info["num_batches"] = list(trainer.num_val_batches if not trainer.testing else trainer.num_test_batches)

    def on_validation_end(self, trainer, pl_module):  # noqa: ANN001
        if not trainer.sanity_checking:
            self._record(trainer)

    def on_test_end(self, trainer, pl_module):  # noqa: ANN001
        self._record(trainer)

    def teardown(self, trainer, pl_module, stage):  # noqa: ANN001
        self._catcher.__exit__(None, None, None)
        self.info["warnings"] = [str(w.message) for w in self.caught]
        if self.out is not None:
            torch.save({"epochs": self.epochs, **self.info}, f"{self.out}.{trainer.global_rank}")


@pytest.fixture
def single_thread():
    """Tiny models train fastest on one intra-op thread (two threads fight over a 2-core CI box)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
