"""Windows under Lightning (issue 21 item 5, and the checkpoint criteria): the callback logs the window
of the training batches every ``log_every_n_steps`` (reset each epoch, or never), equal to numpy over
the functional per-query nDCG of the last N batches; a window held by a LightningModule (and the
callback's ``train_reset="never"`` window) survives fit -> checkpoint -> resume; a checkpoint of a
metric without a window resumes into a windowed one."""

from __future__ import annotations

import csv

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader

from tests.lightning_helpers import LinearRanker, dataset, single_thread  # noqa: F401
from torch_rankeval import NDCG
from torch_rankeval import functional as F
from torch_rankeval.data import collate_queries
from torch_rankeval.lightning import RankingMetricsCallback

BATCH, QUERIES, EVERY = 4, 24, 2  # 6 training batches per epoch, logged every 2 steps


class Trained(LinearRanker):
    """Returns the loss and the scores (target and mask: from the batch); ``lr=0``: fixed scores."""

    def __init__(self, window_metric: bool = False, window: int | None = 3) -> None:
        super().__init__(lr=0.0, seed=1)
        self.metric = NDCG(k=5, window=window, half_life=2.0 if window else None) if window_metric else None
        if self.metric is not None:
            self.metric.persistent(True)

    def training_step(self, batch, batch_idx):  # noqa: ANN001
        loss = super().training_step(batch, batch_idx) + 0.0 * self.scorer.weight.sum()
        preds = self(batch["features"]).detach()
        if self.metric is not None:
            self.metric.update(preds, batch["target"], mask=batch["mask"])
        return {"loss": loss, "preds": preds}


def _loader():
    return DataLoader(dataset(QUERIES, seed=4), batch_size=BATCH, shuffle=False, collate_fn=collate_queries)


def _trainer(tmp_path, epochs, callbacks, name="run"):
    return pl.Trainer(
        accelerator="cpu",
        max_epochs=epochs,
        callbacks=callbacks,
        logger=CSVLogger(str(tmp_path), name=name, version=0),
        log_every_n_steps=EVERY,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        num_sanity_val_steps=0,
    )


def _logged(tmp_path, name, key):
    with open(tmp_path / name / "version_0" / "metrics.csv") as f:
        return [float(row[key]) for row in csv.DictReader(f) if row.get(key)]


def _batch_values(model):
    """Per-query nDCG@5 of each training batch, from the functional API."""
    out = []
    with torch.no_grad():
        for batch in _loader():
            values = F.ndcg(model(batch["features"]), batch["target"], k=5, mask=batch["mask"], reduction="none")
            out.append(values.double().numpy().reshape(-1))
    return out


@pytest.mark.parametrize("reset", ["epoch", "never"])
def test_the_callback_logs_the_window_of_training_batches_every_n_steps(tmp_path, reset, single_thread):  # noqa: F811
    model = Trained()
    callback = RankingMetricsCallback(("ndcg@5",), k=None, stages=("train",), train_window=3, train_reset=reset)
    _trainer(tmp_path, 2, [callback]).fit(model, _loader())
    got = _logged(tmp_path, "run", "train/window/ndcg@5")
    per_batch = _batch_values(model)
    n = len(per_batch)
    want = []
    for epoch in range(2):
        for b in range(n):
            step = epoch * n + b
            if (step + 1) % EVERY:
                continue
            seen = per_batch[: b + 1] if reset == "epoch" else (per_batch * 2)[: step + 1]
            want.append(np.concatenate(seen[-3:]).mean())
    assert got == pytest.approx(want, rel=1e-5)


def test_the_train_stage_needs_a_window_on_a_configured_metric():
    with pytest.raises(ValueError, match="has no window"):
        RankingMetricsCallback(NDCG(k=5), stages=("train",))
    with pytest.raises(ValueError, match="train_reset"):
        RankingMetricsCallback(stages=("train",), train_reset="sometimes")
    callback = RankingMetricsCallback(NDCG(k=5, half_life=10.0), stages=("validate", "train"))
    assert callback.build_train_metrics().half_life == 10.0


def _states(metric):
    return {name: getattr(metric, name).clone() for name in ("sums", "squares", "counts", *metric._window_states)}


def test_a_module_window_survives_fit_checkpoint_resume(tmp_path, single_thread):  # noqa: F811
    straight = Trained(window_metric=True)
    _trainer(tmp_path, 2, [], name="straight").fit(straight, _loader())
    first = Trained(window_metric=True)
    trainer = _trainer(tmp_path, 1, [], name="first")
    trainer.fit(first, _loader())
    ckpt = tmp_path / "epoch1.ckpt"
    trainer.save_checkpoint(ckpt)
    resumed = Trained(window_metric=True)
    _trainer(tmp_path, 2, [], name="resumed").fit(resumed, _loader(), ckpt_path=str(ckpt))
    want, got = _states(straight.metric), _states(resumed.metric)
    for name in want:
        assert torch.allclose(got[name], want[name]), name
    assert int(got["window_clock"]) == 2 * len(_loader())


def test_an_old_checkpoint_without_a_window_resumes_into_a_windowed_module(tmp_path, single_thread):  # noqa: F811
    old = Trained(window_metric=True, window=None)
    trainer = _trainer(tmp_path, 1, [], name="old")
    trainer.fit(old, _loader())
    ckpt = tmp_path / "old.ckpt"
    trainer.save_checkpoint(ckpt)
    resumed = Trained(window_metric=True)
    _trainer(tmp_path, 2, [], name="new").fit(resumed, _loader(), ckpt_path=str(ckpt))
    per_batch = _batch_values(resumed)
    out = resumed.metric.compute()
    assert out["ndcg@5"].item() == pytest.approx(np.concatenate(per_batch * 2).mean(), rel=1e-5)
    assert out["window/ndcg@5"].item() == pytest.approx(np.concatenate(per_batch[-3:]).mean(), rel=1e-5)


def test_the_callback_window_never_reset_survives_a_resume(tmp_path, single_thread):  # noqa: F811
    def callback():
        return RankingMetricsCallback(("ndcg@5",), k=None, stages=("train",), train_window=3, train_reset="never")

    _trainer(tmp_path, 2, [callback()], name="straight").fit(Trained(), _loader())
    trainer = _trainer(tmp_path, 1, [callback()], name="first")
    trainer.fit(Trained(), _loader())
    ckpt = tmp_path / "cb.ckpt"
    trainer.save_checkpoint(ckpt)
    _trainer(tmp_path, 2, [callback()], name="resumed").fit(Trained(), _loader(), ckpt_path=str(ckpt))
    straight = _logged(tmp_path, "straight", "train/window/ndcg@5")
    resumed = _logged(tmp_path, "resumed", "train/window/ndcg@5")
    assert resumed == pytest.approx(straight[-len(resumed) :], rel=1e-6)
    assert len(resumed) == 3


# ---------------------------------------------------------------------- DDP (2 gloo processes, ddp_spawn)
class _StepRecorder(pl.Callback):
    """Saves, per process, the logged training window after every training batch and the batch's
    per-query nDCG@5 (the functional API on the step's scores)."""

    def __init__(self, out):  # noqa: ANN001
        self.out = out
        self.values: list[tuple[int, int, float]] = []
        self.rows: list = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):  # noqa: ANN001
        value = trainer.callback_metrics.get("train/window/ndcg@5")
        self.values.append((trainer.current_epoch, batch_idx, -1.0 if value is None else value.item()))
        ndcg = F.ndcg(outputs["preds"], batch["target"], k=5, mask=batch["mask"], reduction="none")
        self.rows.append(ndcg.double().numpy())

    def on_train_end(self, trainer, pl_module):  # noqa: ANN001
        torch.save({"values": self.values, "rows": self.rows}, f"{self.out}.{trainer.global_rank}")


@pytest.mark.usefixtures("single_thread")
def test_ddp_train_window_is_the_union_of_each_process_last_batches(tmp_path, monkeypatch, lightning_ddp):
    monkeypatch.delenv("MASTER_PORT", raising=False)
    callback = RankingMetricsCallback(("ndcg@5",), k=None, stages=("train",), train_window=2)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=lightning_ddp,
        max_epochs=2,
        callbacks=[callback, _StepRecorder(tmp_path / "steps")],
        logger=False,
        log_every_n_steps=EVERY,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(Trained(), _loader())
    ranks = [torch.load(tmp_path / f"steps.{r}", weights_only=False) for r in (0, 1)]
    assert ranks[0]["values"] == ranks[1]["values"]  # synced: the same on every process
    n = len(ranks[0]["rows"]) // 2  # batches per epoch on each process
    assert n == QUERIES // 2 // BATCH
    checked = 0
    for t, (epoch, b, value) in enumerate(ranks[0]["values"]):
        if (t + 1) % EVERY:
            continue
        start = epoch * n  # reset each epoch: this epoch's last 2 batches of each process
        want = np.concatenate([x for r in ranks for x in r["rows"][start : t + 1][-2:]]).mean()
        assert value == pytest.approx(want, rel=1e-5), (epoch, b)
        checked += 1
    assert checked == (2 * n) // EVERY
