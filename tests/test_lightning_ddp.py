"""RankingMetricsCallback under real DDP (2 gloo processes, ddp_spawn): exact and identical on every
process with our sampler, and provably wrong (with a warning) with Lightning's default sampler.

One spawn only: ``fit`` with two validation dataloaders over the same 9 queries (not divisible by 2),
dataloader 0 with :class:`UnpaddedDistributedSampler`, dataloader 1 plain, so that Lightning injects
its padding ``DistributedSampler``. The learning rate is 0, so the model is the same in every run and
the values must equal ``devices=1`` and the functional API on the whole set.
"""

from __future__ import annotations

import pytest
import torch

pl = pytest.importorskip("lightning.pytorch")

from tests.lightning_helpers import LinearRanker, Recorder, dataset, expected, loader, single_thread  # noqa: E402, F401

pytestmark = pytest.mark.usefixtures("single_thread")
from torch_rankeval.lightning import RankingMetricsCallback  # noqa: E402

N_QUERIES = 9  # odd: 2 processes get 5 and 4 queries (3 and 2 batches of 2); padding repeats query 0


def _fit(tmp_path, devices: int, out=None, strategy="auto") -> Recorder:  # noqa: ANN001
    data = dataset(N_QUERIES, seed=5)
    train = dataset(8, seed=6)
    recorder = Recorder(out)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=devices,
        strategy=strategy,
        max_epochs=1,
        limit_train_batches=2,
        num_sanity_val_steps=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        callbacks=[recorder, RankingMetricsCallback()],  # the recorder first: its "always" filter must not shadow ours
    )
    train_loader = loader(train, 2, exact=False)
    trainer.fit(LinearRanker(lr=0.0), train_loader, [loader(data, 2, exact=True), loader(data, 2, exact=False)])
    return recorder


def test_ddp_validation_is_exact_identical_on_every_rank_and_the_default_sampler_is_not(
    tmp_path, monkeypatch, lightning_ddp
):
    monkeypatch.delenv("MASTER_PORT", raising=False)  # Lightning picks a free port and sets it for the workers
    truth = expected(LinearRanker(lr=0.0), dataset(N_QUERIES, seed=5))

    single = _fit(tmp_path / "one", devices=1)
    (logged_single,) = single.epochs
    for key, value in truth.items():  # one process: both loaders are exact
        for i in (0, 1):
            assert logged_single[f"val/{key}/dataloader_idx_{i}"] == pytest.approx(value, abs=1e-6)

    _fit(tmp_path / "two", devices=2, out=tmp_path / "rank", strategy=lightning_ddp)
    ranks = [torch.load(tmp_path / f"rank.{r}", weights_only=False) for r in (0, 1)]

    # Lightning kept our sampler on loader 0 and injected its own (padding) one on loader 1; the
    # processes ran different numbers of batches on loader 0 (5 and 4 queries).
    assert [r["samplers"] for r in ranks] == [["UnpaddedDistributedSampler", "DistributedSampler"]] * 2
    assert [r["num_batches"] for r in ranks] == [[3, 3], [2, 3]]
    # Nothing was logged during the sanity check.
    assert ranks[0]["logged_during_sanity_check"] == []

    (epoch0,), (epoch1,) = ranks[0]["epochs"], ranks[1]["epochs"]
    assert epoch0 == epoch1  # bit-identical on every process
    for key in truth:
        exact = epoch0[f"val/{key}/dataloader_idx_0"]
        assert exact == logged_single[f"val/{key}/dataloader_idx_0"]  # bit-identical to devices=1
        assert exact == pytest.approx(truth[key], abs=1e-6)  # and to the functional API on the whole set
    # The default sampler scores query 0 twice: a different, wrong number (the fix is load-bearing).
    assert abs(epoch0["val/ndcg@10/dataloader_idx_1"] - truth["ndcg@10"]) > 1e-3

    # The callback said so, once, on rank 0, naming the loader and the fix; no sync_dist hint for our keys.
    ours = [w for w in ranks[0]["warnings"] if w.startswith("RankingMetricsCallback")]
    assert len(ours) == 1
    assert "validation dataloader 1" in ours[0] and "1 sample is evaluated twice" in ours[0]
    assert "UnpaddedDistributedSampler" in ours[0]
    assert not [w for w in ranks[1]["warnings"] if w.startswith("RankingMetricsCallback")]
    assert not [w for r in ranks for w in r["warnings"] if "sync_dist=True" in w and "'val/" in w]
