"""examples/train_ltr.py (the README's main job) trains a ranker well above a random one and logs the
metric keys, on the synthetic default and on LETOR files; its two configs stay in sync."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import pytest
import torch
import yaml

pl = pytest.importorskip("lightning.pytorch")

from tests.conftest import REPO  # noqa: E402
from tests.lightning_helpers import single_thread  # noqa: E402, F401
from torch_rankeval import functional as F  # noqa: E402
from torch_rankeval.data import synthetic_ltr, write_letor  # noqa: E402

KEYS = ["val/ndcg@5", "val/ndcg@10", "val/map@5", "val/map@10"]
CONFIG = str(REPO / "configs" / "train_ltr.yaml")


pytestmark = pytest.mark.usefixtures("single_thread")  # one thread, as the script itself uses


@pytest.fixture(autouse=True)
def _argv(monkeypatch):  # noqa: ANN001
    monkeypatch.setattr(sys, "argv", ["train_ltr.py"])  # LightningCLI takes args=..., not pytest's argv


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("train_ltr", REPO / "examples" / "train_ltr.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_ltr"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["train_ltr"]


def _args(tmp_path, *extra: str) -> list[str]:
    return [
        "--config",
        CONFIG,
        "--trainer.accelerator=cpu",
        f"--trainer.default_root_dir={tmp_path}",
        f"--trainer.logger.init_args.save_dir={tmp_path}",
        *extra,
    ]


def _metrics_csv(trainer) -> list[dict[str, str]]:  # noqa: ANN001
    with open(f"{trainer.logger.log_dir}/metrics.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("loss", ["softmax", "lambdarank"])
def test_trains_well_above_a_random_ranker_and_logs_the_keys(example, tmp_path, capsys, loss):
    cli = example.main(
        [
            "fit",
            *_args(
                tmp_path, "--trainer.max_epochs=2", "--data.synthetic_queries=[600, 101, 11]", f"--model.loss={loss}"
            ),
        ]
    )
    trainer, model = cli.trainer, cli.model
    logged = {k: v.item() for k, v in trainer.callback_metrics.items()}
    assert set(KEYS) <= set(logged)

    # The printed random baseline is the exact expectation over random orders: check it by sampling.
    val = cli.datamodule.val_dataset.padded()
    g = torch.Generator().manual_seed(0)
    sampled = torch.stack(
        [
            F.ndcg(torch.rand(val["target"].shape, generator=g), val["target"], k=10, mask=val["mask"])
            for _ in range(300)
        ]
    ).mean()
    random_ndcg = model.random_baseline["val/ndcg@10"]
    assert random_ndcg == pytest.approx(sampled.item(), abs=0.01)

    # Trained: far above random, and equal to the functional API with the final model.
    assert logged["val/ndcg@10"] > random_ndcg + 0.25
    with torch.no_grad():
        preds = model(val["features"])
    assert logged["val/ndcg@10"] == pytest.approx(F.ndcg(preds, val["target"], k=10, mask=val["mask"]).item(), abs=1e-6)

    out = capsys.readouterr().out
    assert f"val/ndcg@10: random {random_ndcg:.4f} -> trained {logged['val/ndcg@10']:.4f}" in out
    rows = _metrics_csv(trainer)
    per_epoch = [float(r["val/ndcg@10"]) for r in rows if r.get("val/ndcg@10")]
    assert len(per_epoch) == 2 and per_epoch[-1] == pytest.approx(logged["val/ndcg@10"], abs=1e-6)
    assert [float(r["random/ndcg@10"]) for r in rows if r.get("random/ndcg@10")] == pytest.approx([random_ndcg])
    assert trainer.checkpoint_callback.best_model_score.item() == pytest.approx(max(per_epoch), abs=1e-6)


@pytest.mark.slow
def test_reads_letor_files_and_tests_the_best_checkpoint(example, tmp_path):
    paths = {}
    for i, (split, n) in enumerate({"train": 300, "val": 61, "test": 41}.items()):
        paths[split] = tmp_path / f"{split}.txt.gz"
        write_letor(paths[split], synthetic_ltr(n, n_features=12, seed=i))
    files = [
        f"--data.train_path={paths['train']}",
        f"--data.val_path={paths['val']}",
        f"--data.test_path={paths['test']}",
    ]
    cli = example.main(["fit", *_args(tmp_path, "--trainer.max_epochs=2", *files)])
    assert cli.model.hparams.n_features == 12  # read from the training file, linked to the model
    best = cli.trainer.checkpoint_callback.best_model_path
    tested = example.main(["test", *_args(tmp_path, *files), f"--ckpt_path={best}"])
    logged = {k: v.item() for k, v in tested.trainer.callback_metrics.items()}
    assert sorted(logged) == sorted(k.replace("val/", "test/") for k in KEYS)
    assert logged["test/ndcg@10"] > 0.6  # random is about 0.35 on this data


def test_letor_data_needs_a_validation_file(example, tmp_path):
    with pytest.raises(ValueError, match="give val_path too"):
        example.LTRData(train_path=str(tmp_path / "train.txt"))


def test_the_two_configs_differ_only_in_where_they_run(example):
    one = yaml.safe_load(Path(CONFIG).read_text())
    two = yaml.safe_load((REPO / "configs" / "train_ltr_ddp.yaml").read_text())
    assert (one["trainer"].pop("accelerator"), one["trainer"].pop("devices")) == ("auto", 1)
    assert [two["trainer"].pop(k) for k in ("accelerator", "devices", "strategy")] == ["cpu", 2, "ddp"]
    assert two["trainer"]["logger"]["init_args"].pop("name") == "train_ltr_ddp"
    one["trainer"]["logger"]["init_args"].pop("name")
    assert one == two
    cli = example.RankerCLI(
        example.NeuralRanker,
        example.LTRData,
        run=False,
        args=["--config", str(REPO / "configs" / "train_ltr_ddp.yaml"), "--data.synthetic_queries=[10, 5, 5]"],
    )
    assert cli.trainer.num_devices == 2 and type(cli.trainer.strategy).__name__ == "DDPStrategy"


def test_losses_prefer_the_right_order(example):
    """Both losses are lower for the ideal ranking than for its reverse, and ignore padding."""
    module = example
    target = torch.tensor([[3.0, 2.0, 0.0, 1.0, 0.0]])
    mask = torch.tensor([[True, True, True, True, False]])
    good = torch.tensor([[4.0, 3.0, 1.0, 2.0, 9.0]])  # the padded slot's score must not matter
    bad = -good
    for loss in (module.softmax_loss, module.lambdarank_loss):
        assert loss(good, target, mask) < loss(bad, target, mask)
        padded_moved = good.clone()
        padded_moved[0, 4] = -5.0
        assert loss(good, target, mask) == pytest.approx(loss(padded_moved, target, mask).item())
    # softmax loss by hand: gains 7, 3, 0, 1 (sum 11) against log_softmax of the scores
    log_p = torch.log_softmax(good[0, :4], 0)
    assert module.softmax_loss(good, target, mask).item() == pytest.approx(
        -(7 * log_p[0] + 3 * log_p[1] + log_p[3]).item() / 11
    )


def test_the_callback_takes_a_configured_metric_from_the_config(example, tmp_path):
    """A LightningCLI config gives RankingMetricsCallback any conventions through a configured
    RankingMetrics (class_path / init_args) instead of convention arguments of its own."""
    from torch_rankeval.conventions import PRESETS
    from torch_rankeval.lightning import RankingMetricsCallback

    config = yaml.safe_load(Path(CONFIG).read_text())
    (entry,) = [c for c in config["trainer"]["callbacks"] if c["class_path"].endswith("RankingMetricsCallback")]
    entry["init_args"] = {
        "metrics": {
            "class_path": "torch_rankeval.RankingMetrics",
            "init_args": {"metrics": ["ndcg", "map"], "k": [5, 10], "convention": "trec_eval", "ignore_index": -1},
        }
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    cli = example.RankerCLI(
        example.NeuralRanker,
        example.LTRData,
        run=False,
        args=[
            "--config",
            str(path),
            "--trainer.accelerator=cpu",
            f"--trainer.default_root_dir={tmp_path}",
            f"--trainer.logger.init_args.save_dir={tmp_path}",
            "--data.synthetic_queries=[10, 5, 5]",
        ],
    )
    (callback,) = [cb for cb in cli.trainer.callbacks if isinstance(cb, RankingMetricsCallback)]
    metric = callback.build_metrics(sync_on_compute=False)
    assert metric.keys == ["ndcg@5", "ndcg@10", "map@5", "map@10"]
    assert metric.convention == PRESETS["trec_eval"] and metric.ignore_index == -1
    assert callback.metric_keys == metric.keys
