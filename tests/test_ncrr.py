"""NCRR, the normalised cumulative reciprocal rank (one kernel, ``kernels/ncrr.py``, and one registry row):
Cornac's expected values, tie orders enumerated, and every surface that takes a measure by name."""

from __future__ import annotations

import io
import itertools

import pytest
import torch

from torch_rankeval import RankingMetrics, trec
from torch_rankeval import functional as F
from torch_rankeval import measures as M
from torch_rankeval.cli import main
from torch_rankeval.trec.io import write_qrels, write_run

#: PreferredAI/cornac, tests/cornac/metrics/test_ranking.py, TestRanking.test_ncrr: (k, gt_pos, pd_rank,
#: expected). ``gt_pos``: the relevant items (some never ranked), ``pd_rank``: the ranked items; NCRR() is k=-1.
CORNAC = [
    (None, [0], [0], 1.0),
    (None, [0, 2], [0, 2, 1], 1.0),
    (None, [0, 2], [1, 2, 0], (1 / 3 + 1 / 2) / (1 + 1 / 2)),
    (2, [2], [1, 2, 0], 0.5),
    (2, [2], [4, 1, 2], 0.0),
    (2, [0, 1, 2], [5, 1, 6], 1.0 / 3.0),
    (3, [0, 1], [5, 1, 6, 8], 1.0 / 3.0),
]


def _lists(gt: list[int], ranked: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Cornac's case as one list: scores falling in rank order, the grade of each ranked item, and the
    number of relevant items (ranked or not)."""
    preds = torch.arange(len(ranked), 0, -1, dtype=torch.float64)
    target = torch.tensor([int(item in gt) for item in ranked])
    return preds, target, torch.tensor(len(gt))


def test_cornac_expected_values():
    for k, gt, ranked, expected in CORNAC:
        preds, target, n_relevant = _lists(gt, ranked)
        name = "ncrr" if k is None else f"NCRR@{k}"
        value = F.evaluate(preds, target, [name], n_relevant=n_relevant)[name]
        assert value.item() == pytest.approx(expected, abs=1e-12), (k, gt, ranked)


def test_averaged_ties_are_the_mean_over_every_order_of_the_tied_documents():
    g = torch.Generator().manual_seed(3)
    for _ in range(4):
        preds = torch.randint(0, 3, (6,), generator=g).double()
        target = torch.randint(0, 3, (6,), generator=g)
        orders = torch.tensor(list(itertools.permutations(range(6))))  # every input order: ties="first" ranks by it
        names = ["ncrr", "ncrr@2", "ncrr(rel=2)@4"]
        each = F.evaluate(preds[orders], target[orders], names, ties="first", reduction="none")
        averaged = F.evaluate(preds, target, names)
        for name in names:
            torch.testing.assert_close(averaged[name], each[name].mean(), msg=name)


def test_every_surface_takes_it_by_name(tmp_path):
    """F.evaluate, RankingMetrics, trec.evaluate, the command line and the docs' tables: from the row alone."""
    cases = [c for c in CORNAC if c[0] == 2]
    qrels = {f"q{i}": {f"d{item}": 1 for item in gt} for i, (_, gt, _, _) in enumerate(cases)}
    run = {f"q{i}": {f"d{item}": float(len(r) - j) for j, item in enumerate(r)} for i, (_, _, r, _) in enumerate(cases)}
    write_qrels(tmp_path / "qrels", qrels)
    write_run(tmp_path / "run", run)
    want = [expected for _, _, _, expected in cases]
    evaluation = trec.evaluate(tmp_path / "qrels", tmp_path / "run", ["ncrr@2"])
    assert evaluation.per_query["ncrr@2"].tolist() == pytest.approx(want)
    out = io.StringIO()
    assert main(["evaluate", str(tmp_path / "qrels"), str(tmp_path / "run"), "-m", "ncrr@2", "-q"], out) == 0
    assert [line.split()[-1] for line in out.getvalue().splitlines()[1:]] == [
        f"{v:.4f}" for v in [*want, sum(want) / 3]
    ]
    metric = RankingMetrics(("ncrr@2", "mrr@2"))
    preds, target = torch.tensor([[0.9, 0.8, 0.7], [0.3, 0.2, 0.1]]), torch.tensor([[0, 1, 1], [1, 0, 0]])
    metric.update(preds, target)
    direct = F.evaluate(preds, target, ["ncrr@2"])["ncrr@2"]
    torch.testing.assert_close(metric.compute()["ncrr@2"], direct.float())
    assert direct.item() == pytest.approx((1 / 2 / (1 + 1 / 2) + 1) / 2)  # (1/2) / H(2) and 1 / H(1)
    with pytest.raises(TypeError, match=r"does not read gain="):  # its row reads the binary measures' options
        RankingMetrics(("ncrr@2",), gain="linear")
    assert "| `ncrr` |" in M.api_table() and "| `ncrr` |" in M.markdown_table()
