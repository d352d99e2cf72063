"""Examples that need an optional extra check for it before they compute, and exit naming the extra."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import REPO


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_example_{name}", REPO / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_debiased_click_eval_without_matplotlib_exits_before_computing(monkeypatch):
    example = _load("debiased_click_eval")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError

    def no_work(args):  # noqa: ANN001, ANN202
        raise AssertionError("simulate ran before the matplotlib check")

    monkeypatch.setattr(example, "simulate", no_work)
    with pytest.raises(SystemExit, match=r'needs matplotlib: pip install -e "\.\[plot\]"'):
        example.main(["--queries", "10"])
