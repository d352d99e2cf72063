"""A user's script type-checks under ``mypy --strict``: the package is typed (``py.typed``), its public
names are explicitly exported, and no error (no ``import-untyped``) comes from our signatures."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

USER_SCRIPT = """\
import torch

import torch_rankeval
from torch_rankeval import NDCG, RankingMetrics, trec
from torch_rankeval import functional as F

preds = torch.tensor([[0.9, 0.1, 0.5]])
target = torch.tensor([[1, 0, 1]])
value: torch.Tensor = F.ndcg(preds, target, k=2)
metric = NDCG(k=2)
metric.update(preds, target)
single: torch.Tensor = metric.compute()
many = RankingMetrics(("ndcg@2", "map"))
many.update(preds, target)
means: dict[str, torch.Tensor] = many.compute()
qrels = trec.Qrels.from_dict({"q1": {"d1": 1}})
run = trec.Run.from_dict({"q1": {"d1": 0.5}})
result = trec.evaluate(qrels, run, ["map"])
print(torch_rankeval.__name__, value, single, means, result.summary)
"""


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed (the dev extra has it)")
def test_mypy_strict_on_a_user_script(tmp_path):
    script = tmp_path / "user_script.py"
    script.write_text(USER_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(script),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    text = out.stdout + out.stderr
    assert "import-untyped" not in text
    assert out.returncode == 0, text
    assert "Success: no issues found" in text


#: pyright's "completeness score" of the public API (exported symbols with a known type) reached when
#: it was last raised (1.0 then); new public code keeps it by annotating what it exports
VERIFYTYPES_MIN_SCORE = 0.98


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("pyright") is None, reason="pyright is not installed")
def test_pyright_verifytypes_completeness(tmp_path):
    import json

    # pyright finds the packages through the first `python` on PATH: make that this interpreter (a venv not activated)
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": path}
    out = subprocess.run(
        [sys.executable, "-m", "pyright", "--verifytypes", "torch_rankeval", "--ignoreexternal", "--outputjson"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(out.stdout)["typeCompleteness"]
    assert Path(report["packageRootDirectory"]).resolve() == REPO / "torch_rankeval"  # this checkout, not another
    unknown = [
        s["name"] for s in report["symbols"] if s["isExported"] and not s["isTypeKnown"]
    ]  # what to annotate when the score drops
    assert report["completenessScore"] >= VERIFYTYPES_MIN_SCORE, unknown
