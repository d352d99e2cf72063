"""examples/unbiased_ltr.py: from simulated position-biased clicks, the EM propensities are close to the
true ones, the IPS-weighted LambdaLoss ranker beats the raw-click ranker on the true nDCG, and the
debiased nDCG measured from held-out clicks tracks the true one and orders the two rankers the same way."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from tests.conftest import REPO


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("unbiased_ltr", REPO / "examples" / "unbiased_ltr.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["unbiased_ltr"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["unbiased_ltr"]


def test_ips_ranker_beats_the_raw_click_ranker_on_true_ndcg(example, capsys):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = example.main(
            ["--train-queries", "300", "--test-queries", "150", "--epochs", "6", "--test-sessions", "500"]
        )
    finally:
        torch.set_num_threads(threads)
    printed = capsys.readouterr().out
    assert "raw: debiased" in printed and "logging ranker" in printed
    theta = out["theta"]
    torch.testing.assert_close(theta[:4], torch.tensor([1.0, 1 / 2, 1 / 3, 1 / 4]), atol=0.04, rtol=0)
    (raw_debiased, raw_true), (ips_debiased, ips_true) = out["history"]["raw clicks"][-1], out["history"]["IPS"][-1]
    assert ips_true > raw_true + 0.02
    assert ips_true > out["logger_true"] + 0.2
    assert ips_debiased > raw_debiased  # the debiased metric orders the rankers as the truth does
    for debiased, true in out["history"]["IPS"]:
        assert abs(debiased - true) < 0.05  # and tracks the true nDCG epoch by epoch
