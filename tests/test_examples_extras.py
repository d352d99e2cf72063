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


def test_debiased_click_eval_without_matplotlib_prints_its_table_and_skips_the_figure(monkeypatch, capsys, tmp_path):
    """Issue 27 item 12: the table is the result and needs no matplotlib; only the figure is skipped, with a
    line naming the extra (this replaces the earlier test that expected an exit before any computation)."""
    example = _load("debiased_click_eval")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    out = tmp_path / "plot.png"
    example.main(["--queries", "20", "--sessions", "1", "10", "--output", str(out)])
    printed = capsys.readouterr().out
    assert "new_naive" in printed and "true nDCG@5" in printed  # the table and the truth line
    assert 'figure skipped: matplotlib is not installed (pip install -e ".[plot]"' in printed
    assert not out.exists()


def test_recommender_eval_without_lightning_exits_naming_the_extra(monkeypatch):
    for name in [m for m in sys.modules if m == "lightning" or m.startswith("lightning.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "lightning", None)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", None)
    with pytest.raises(SystemExit, match=r'needs the lightning extra: pip install -e "\.\[lightning\]"'):
        _load("recommender_eval")
