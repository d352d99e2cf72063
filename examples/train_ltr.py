"""Train a small neural ranker with Lightning and watch nDCG@k / MAP rise, epoch by epoch.

Run (from the repository root)::

    python examples/train_ltr.py fit --config configs/train_ltr.yaml           # 1 process
    python examples/train_ltr.py fit --config configs/train_ltr_ddp.yaml       # 2 CPU processes (DDP)
    python examples/train_ltr.py fit --config configs/train_ltr.yaml --model.loss lambdarank
    python examples/train_ltr.py fit --config configs/train_ltr.yaml \\
        --data.train_path MSLR-WEB10K/Fold1/train.txt --data.val_path MSLR-WEB10K/Fold1/vali.txt \\
        --data.test_path MSLR-WEB10K/Fold1/test.txt --data.log_features true
    python examples/train_ltr.py test --config configs/train_ltr.yaml --ckpt_path <a checkpoint>   # test/ndcg@10 ...

The default data is the embedded synthetic LTR set (:func:`torch_rankeval.data.synthetic_ltr`, a
documented generative model, nothing to download); ``--data.train_path`` & co. read LETOR/SVMlight
files instead (MSLR-WEB10K/30K, Yahoo! LTR, istella). The scorer is an MLP over each document's
features, trained with the library's listwise softmax loss or LambdaRank (``torch_rankeval.losses``,
on the metrics' own gain, discount and ideal DCG). ``RankingMetricsCallback`` (configured in
the YAML file) logs ``val/ndcg@5``, ``val/ndcg@10``, ``val/map@5``, ``val/map@10`` each epoch to the
progress bar, the CSV logger and ``ModelCheckpoint``; the validation loader uses
``UnpaddedDistributedSampler``, so the numbers are exact with any number of processes. Before training
the script prints what a random ranker scores on the validation set, and at the end how far the
trained model got.
"""

from __future__ import annotations

import os
from typing import Literal, Optional

import lightning.pytorch as pl
import torch
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.utilities import rank_zero_only
from torch import Tensor, nn
from torch.utils.data import DataLoader

from torch_rankeval import losses
from torch_rankeval.data import QueryDataset, collate_queries, read_letor, synthetic_ltr
from torch_rankeval.lightning import RankingMetricsCallback
from torch_rankeval.sampler import UnpaddedDistributedSampler


# ---------------------------------------------------------------------------------------- losses
# The library's losses (torch_rankeval.losses), on the conventions of the metrics the callback logs:
# the same 2^grade - 1 gain, log2 discount and ideal DCG, so the loss optimises what val/ndcg@k measures.
def softmax_loss(scores: Tensor, target: Tensor, mask: Tensor) -> Tensor:
    """Listwise softmax cross-entropy against the gains ``2^grade - 1`` normalised over the list
    (queries without a relevant document carry no signal and are left out)."""
    return losses.softmax(scores, target, mask=mask, validate_args=False)


def lambdarank_loss(scores: Tensor, target: Tensor, mask: Tensor, sigma: float = 1.0) -> Tensor:
    """LambdaRank: the pairwise logistic loss of every pair with different grades, weighted by the
    |change of nDCG| that swapping the two documents would cause in the current ranking."""
    return losses.lambda_loss(scores, target, mask=mask, weighting="lambdarank", sigma=sigma, validate_args=False)


LOSSES = {"softmax": softmax_loss, "lambdarank": lambdarank_loss}


# ---------------------------------------------------------------------------------------- model
class NeuralRanker(pl.LightningModule):
    """An MLP that scores each document from its features; documents are ranked by score.

    Args:
        n_features: features per document (linked from the data module).
        hidden: widths of the hidden layers.
        dropout: dropout after each hidden layer (training only).
        loss: ``"softmax"`` (listwise softmax cross-entropy) or ``"lambdarank"``.
        lr: Adam learning rate.
        weight_decay: Adam weight decay.
        sigma: LambdaRank's score scale.
    """

    def __init__(
        self,
        n_features: int,
        hidden: list[int] = [64, 64],  # noqa: B006 - jsonargparse shows the default in --help
        dropout: float = 0.0,
        loss: Literal["softmax", "lambdarank"] = "softmax",
        lr: float = 3e-3,
        weight_decay: float = 0.0,
        sigma: float = 1.0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        layers: list[nn.Module] = []
        width = n_features
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU(), nn.Dropout(dropout)]
            width = size
        layers.append(nn.Linear(width, 1))
        self.scorer = nn.Sequential(*layers)
        self.random_baseline: dict[str, float] = {}

    def forward(self, features: Tensor) -> Tensor:
        return self.scorer(features).squeeze(-1)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        scores = self(batch["features"])
        if self.hparams.loss == "lambdarank":
            loss = lambdarank_loss(scores, batch["target"], batch["mask"], self.hparams.sigma)
        else:
            loss = softmax_loss(scores, batch["target"], batch["mask"])
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["target"].shape[0])
        return loss

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> dict[str, Tensor]:
        # RankingMetricsCallback reads these (and, had we left them out, target/mask from the batch)
        return {"preds": self(batch["features"]), "target": batch["target"], "mask": batch["mask"]}

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> dict[str, Tensor]:
        return {"preds": self(batch["features"]), "target": batch["target"], "mask": batch["mask"]}

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)

    # -- the random-ranker baseline, and where training got
    def _metrics_callback(self) -> Optional[RankingMetricsCallback]:
        return next((cb for cb in self.trainer.callbacks if isinstance(cb, RankingMetricsCallback)), None)

    def on_fit_start(self) -> None:
        callback, data = self._metrics_callback(), self.trainer.datamodule
        if callback is None or data is None or data.val_dataset is None:
            return
        # Constant scores + ties="average" = the exact expected score of a uniformly random order.
        metric = callback.build_metrics(sync_on_compute=False)
        batch = data.val_dataset.padded()
        metric.update(torch.zeros_like(batch["target"]), batch["target"], mask=batch["mask"])
        prefix = callback.prefix["validate"]
        self.random_baseline = {f"{prefix}{k}": v.item() for k, v in metric.compute().items()}
        _print("random ranker on the validation set: " + _format(self.random_baseline))
        if self.logger is not None:
            self.logger.log_metrics(
                {k.replace(prefix, "random/", 1): v for k, v in self.random_baseline.items()}, step=0
            )

    def on_fit_end(self) -> None:
        callback = self._metrics_callback()
        if callback is None or "validate" not in callback.results or not self.random_baseline:
            return
        trained = {k: v.item() for k, v in callback.results["validate"].items() if k in self.random_baseline}
        _print(f"after {self.current_epoch} epochs:                " + _format(trained))
        lines = [f"  {k}: random {self.random_baseline[k]:.4f} -> trained {v:.4f}" for k, v in trained.items()]
        _print("\n".join(lines))


def _format(values: dict[str, float]) -> str:
    return "  ".join(f"{k}={v:.4f}" for k, v in values.items())


@rank_zero_only
def _print(text: str) -> None:
    print(text, flush=True)


# ---------------------------------------------------------------------------------------- data
class LTRData(pl.LightningDataModule):
    """Queries for training and evaluation: the synthetic set by default, or LETOR/SVMlight files.

    Args:
        train_path, val_path, test_path: LETOR/SVMlight files (``.gz``/``.bz2``/``.xz`` fine). Without
            ``train_path`` the synthetic set is used.
        n_features: features per document for the files (default: the largest index in the training file).
        synthetic_queries: numbers of train / validation / test queries of the synthetic set.
        synthetic_features: features per document of the synthetic set.
        synthetic_docs: fewest and most documents per query of the synthetic set.
        seed: seed of the synthetic splits (the generative "world" is fixed).
        log_features: map features through ``sign(x) log(1 + |x|)`` first (advised for MSLR's
            heavy-tailed counts).
        standardize: centre and scale each feature with the training set's mean and deviation.
        batch_size: training queries per batch.
        eval_batch_size: evaluation queries per batch.
        num_workers: DataLoader workers.
    """

    def __init__(
        self,
        train_path: Optional[str] = None,
        val_path: Optional[str] = None,
        test_path: Optional[str] = None,
        n_features: Optional[int] = None,
        synthetic_queries: tuple[int, int, int] = (4000, 501, 501),
        synthetic_features: int = 32,
        synthetic_docs: tuple[int, int] = (10, 40),
        seed: int = 0,
        log_features: bool = False,
        standardize: bool = True,
        batch_size: int = 32,
        eval_batch_size: int = 128,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        if train_path is None and (val_path is not None or test_path is not None):
            raise ValueError("give train_path too: validation/test files need the training file's feature statistics")
        if train_path is not None and val_path is None:
            raise ValueError("give val_path too: the example reports (and checkpoints on) validation nDCG")
        self.paths = {"train": train_path, "val": val_path, "test": test_path}
        self._n_features = n_features
        self.synthetic = dict(
            queries=tuple(synthetic_queries), n_features=synthetic_features, docs=tuple(synthetic_docs), seed=seed
        )
        self.log_features, self.standardize = log_features, standardize
        self.batch_size, self.eval_batch_size, self.num_workers = batch_size, eval_batch_size, num_workers
        self.train_dataset: Optional[QueryDataset] = None
        self.val_dataset: Optional[QueryDataset] = None
        self.test_dataset: Optional[QueryDataset] = None

    @property
    def n_features(self) -> int:
        """Features per document (reads the training file if it has to)."""
        if self.paths["train"] is None:
            return self.synthetic["n_features"]
        if self._n_features is None:
            self._load()
            self._n_features = self.train_dataset.n_features
        return self._n_features

    def _load(self) -> None:
        if self.train_dataset is not None:
            return
        if self.paths["train"] is None:
            s = self.synthetic
            low, high = s["docs"]
            splits = [
                synthetic_ltr(n, n_features=s["n_features"], min_docs=low, max_docs=high, seed=s["seed"] + i)
                for i, n in enumerate(s["queries"])
            ]
        else:
            splits = [
                None if path is None else read_letor(path, n_features=self._n_features) for path in self.paths.values()
            ]
        train = splits[0]
        transform = _signed_log if self.log_features else (lambda x: x)
        if self.standardize:
            base = transform(train.features)
            mean, std = base.mean(0), base.std(0).clamp_min(1e-6)
            scaled = transform
            transform = lambda x: (scaled(x) - mean) / std  # noqa: E731
        self.train_dataset, self.val_dataset, self.test_dataset = [
            None if split is None else split.map_features(transform) for split in splits
        ]

    def setup(self, stage: str) -> None:
        self._load()

    def train_dataloader(self) -> DataLoader:
        return DataLoader(
            self.train_dataset,
            batch_size=self.batch_size,
            shuffle=True,
            collate_fn=collate_queries,
            num_workers=self.num_workers,
        )

    def _eval_loader(self, data: Optional[QueryDataset]) -> list:
        if data is None:
            return []
        # Every query on exactly one process (Lightning keeps this sampler): exact metrics under DDP.
        return DataLoader(
            data,
            batch_size=self.eval_batch_size,
            sampler=UnpaddedDistributedSampler(data),
            collate_fn=collate_queries,
            num_workers=self.num_workers,
        )

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader(self.val_dataset)

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader(self.test_dataset)


def _signed_log(x: Tensor) -> Tensor:
    return torch.sign(x) * torch.log1p(x.abs())


# ---------------------------------------------------------------------------------------- CLI
class RankerCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:  # noqa: ANN001
        parser.link_arguments("data.n_features", "model.n_features", apply_on="instantiate")


def main(args: Optional[list[str]] = None) -> RankerCLI:
    """Parse ``args`` (default: the command line) and run the chosen subcommand (``fit``, ``validate``, ...)."""
    return RankerCLI(NeuralRanker, LTRData, args=args, save_config_kwargs={"overwrite": True})


if __name__ == "__main__":
    # The model is tiny: one intra-op thread per process is much faster than several fighting over
    # the cores (Lightning does the same for each DDP process). OMP_NUM_THREADS overrides it.
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    main()
