"""``plot()`` in every metric class, as torchmetrics defines it: ``plot(val=None, ax=None)``, a value or a
sequence of values (dicts for the multi-value classes), returns ``(fig, ax)``; a clear error without matplotlib.

The oracle is torchmetrics itself: its ``RetrievalNormalizedDCG.plot`` on the same values draws the same
curves; and hand-computed values written out below."""

from __future__ import annotations

import sys

import pytest
import torch

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from torchmetrics.retrieval import RetrievalNormalizedDCG  # noqa: E402

from torch_rankeval import NDCG, PositionDebiasedNDCG, RankingMetrics  # noqa: E402
from torch_rankeval.metrics import MAP, MRR, ItemExposure, Precision  # noqa: E402

PREDS = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.8, 0.3]])
TARGET = torch.tensor([[1, 0, 1], [1, 0, 0]])


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _ydata(ax):
    return [line.get_ydata().tolist() for line in ax.get_lines() if len(line.get_ydata())]


def test_single_value_default_is_compute():
    m = MRR()
    m.update(PREDS, TARGET)  # reciprocal ranks: 1 and 1/3 -> 2/3
    fig, ax = m.plot()
    assert fig is ax.figure and ax.get_ylabel() == "MRR"
    assert _ydata(ax)[0] == pytest.approx([2 / 3])


def test_sequence_of_values_equals_torchmetrics_plot():
    ours, theirs, values, tm_values = NDCG(k=3, gain="linear"), RetrievalNormalizedDCG(top_k=3), [], []
    for step in range(3):
        preds = PREDS + 0.1 * step * torch.tensor([[0.0, 9.0, 0.0], [0.0, 0.0, 0.0]])
        values.append(ours(preds, TARGET))
        idx = torch.tensor([0, 0, 0, 1, 1, 1])
        tm_values.append(theirs(preds.reshape(-1), TARGET.reshape(-1), indexes=idx))
    _, ax = ours.plot(values)
    _, tm_ax = theirs.plot(tm_values)
    assert _ydata(ax)[0] == pytest.approx(_ydata(tm_ax)[0], abs=1e-6)
    assert ax.get_xlabel() == "Step" and len(ax.get_xticks()) == 3


def test_dict_values_and_sequence_of_dicts_one_curve_per_key():
    m = RankingMetrics(("ndcg@2", "p@1"))
    values = [m(PREDS, TARGET), m(PREDS.flip(-1), TARGET)]
    fig, ax = m.plot(values)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["ndcg@2", "p@1"]
    # p@1: step 1 tops are 0.9 (rel) and 0.8 (not) -> 0.5; step 2 (flipped) tops 0.5 (rel) and 0.3 (not) -> 0.5
    assert _ydata(ax)[1] == pytest.approx([0.5, 0.5])
    fig, ax = m.plot()  # one dict: a point per key
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["ndcg@2", "p@1"]


@pytest.mark.parametrize(
    "make, update",
    [
        (lambda: MAP(), lambda m: m.update(PREDS, TARGET)),
        (lambda: Precision(k=2), lambda m: m.update(PREDS, TARGET)),
        (
            lambda: PositionDebiasedNDCG(k=2, eta=1.0),
            lambda m: m.update(PREDS, TARGET, logged_positions=torch.tensor([[1, 2, 3], [1, 2, 3]])),
        ),
        (lambda: ItemExposure(num_items=3, k=1), lambda m: m.update(PREDS)),
    ],
)
def test_every_class_plots_into_given_axes(make, update):
    m = make()
    update(m)
    fig, ax = plt.subplots()
    out_fig, out_ax = m.plot(ax=ax)
    assert out_fig is None and out_ax is ax  # torchmetrics: no new figure when ax is given
    label = {"Precision": "Precision@2"}.get(type(m).__name__, type(m).__name__)  # a one-measure class adds its cutoff
    assert ax.get_ylabel() == label and _ydata(ax)


def test_item_exposure_hand_values():
    m = ItemExposure(num_items=3, k=1)
    m.update(PREDS)  # top-1 items: 0 and 1 -> coverage 2/3
    _, ax = m.plot()
    assert _ydata(ax)[0] == pytest.approx([2 / 3])


def test_without_matplotlib_names_the_extra(monkeypatch):
    m = NDCG(k=2)
    m.update(PREDS, TARGET)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r'pip install "torch-rankeval\[plot\]"'):
        m.plot()
