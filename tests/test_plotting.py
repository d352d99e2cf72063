"""The figures render headless (Agg) to non-empty PNG/SVG files with labelled axes and the data drawn."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
from matplotlib.image import imread

from torch_rankeval import PositionProfile, RankingMetrics
from torch_rankeval.diagnostics import inversion_report
from torch_rankeval.plotting import plot_before_after, plot_position_profile, plot_query_histogram

SCORES = torch.arange(8, 0, -1).double().expand(4, 8)
INVERTED = torch.tensor(
    [[0, 0, 1, 0, 2, 3, 2, 3], [1, 0, 0, 0, 3, 2, 2, 2], [0, 1, 0, 1, 2, 2, 3, 1], [0, 0, 0, 0, 1, 2, 3, 3]]
)
GOOD = INVERTED.sort(-1, descending=True).values


def _png(path, width, height):
    """Open the PNG, check its pixel size and that something was drawn on it."""
    image = imread(path)
    assert image.shape[:2] == (height, width)
    assert np.unique(image.reshape(-1, image.shape[-1]), axis=0).shape[0] > 20  # more than a blank canvas
    return image


def _profile(target):
    m = PositionProfile(positions=8)
    m.update(SCORES, target)
    return m.compute()


def test_position_profile_png_model_vs_ideal_vs_other_model_with_inversions(tmp_path):
    profile, other = _profile(INVERTED), _profile(GOOD)
    report = inversion_report(profile, ["1-3", "5-8"])
    path = tmp_path / "profile.png"
    fig = plot_position_profile(profile, compare=other, labels=("ranker A", "ranker B"), report=report, path=path)
    _png(path, 640, 400)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "rank position" and ax.get_ylabel() == "mean relevance (grade)"
    assert ax.get_title() == "Quality by position (4 queries)"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "ranker A",
        "ranker B",
        "ideal ranking",
        "5-8 beats 1-3",
    ]
    model_line = ax.get_lines()[0]
    np.testing.assert_allclose(model_line.get_ydata(), profile["relevance"].numpy(), rtol=1e-6)
    np.testing.assert_allclose(model_line.get_xdata(), np.arange(1, 9))


def test_profile_plot_of_gain_into_given_axes_and_of_a_metric():
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.subplots()
    assert plot_position_profile(_profile(GOOD), stat="gain", ideal=False, ax=ax) is fig
    assert ax.get_ylabel() == "mean gain" and len(ax.get_lines()) == 1
    m = PositionProfile(positions=4)
    m.update(SCORES[:, :4], INVERTED[:, :4])
    fig2 = plot_position_profile(m.compute(), stat="dcg_contribution")
    ax2 = fig2.axes[0]
    assert ax2.get_ylabel() == "mean DCG contribution"
    np.testing.assert_allclose(ax2.get_lines()[0].get_ydata(), m.compute()["dcg_contribution"].numpy(), rtol=1e-6)
    with pytest.raises(NotImplementedError, match=r"plotting\.plot_position_profile\(profile\.compute\(\)"):
        m.plot()  # metrics do not import the plotting layer above them
    with pytest.raises(ValueError, match="stat="):
        plot_position_profile(_profile(GOOD), stat="ndcg")


def test_per_query_histogram_png_with_a_second_run(tmp_path):
    g = torch.Generator().manual_seed(2)
    preds = torch.rand(40, 10, generator=g)
    target = torch.randint(0, 3, (40, 10), generator=g)
    runs = []
    for p in (preds, target + 0.1 * preds):  # a random ranker and a near-perfect one
        m = RankingMetrics(("ndcg@5",), keep_per_query=True)
        m.update(p, target)
        runs.append(m.compute_per_query())
    path = tmp_path / "hist.png"
    fig = plot_query_histogram(runs[0], bins=5, compare=runs[1], labels=("random", "good"), path=path)
    _png(path, 640, 400)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "per-query ndcg@5" and ax.get_ylabel() == "queries"
    counts, edges = np.histogram(runs[0]["ndcg@5"].numpy(), bins=5, range=(0, 1))
    values, drawn_edges, _ = ax.patches[0].get_data()
    assert values.tolist() == counts.tolist() and np.allclose(drawn_edges, edges)
    assert (
        ax.patches[1].get_data()[0].tolist()
        == np.histogram(runs[1]["ndcg@5"].numpy(), bins=5, range=(0, 1))[0].tolist()
    )


def test_before_after_per_query_png_matches_queries_by_id(tmp_path):
    before = {"query_id": torch.tensor([1, 2, 3, 4]), "ndcg@10": torch.tensor([0.2, 0.5, 0.9, float("nan")])}
    after = {"query_id": torch.tensor([2, 3, 4, 5]), "ndcg@10": torch.tensor([0.7, 0.6, 0.3, 0.1])}
    path = tmp_path / "compare.png"
    fig = plot_before_after(before, after, labels=("epoch 1", "epoch 2"), title="epochs", path=path)
    _png(path, 1100, 420)
    left, right = fig.axes
    assert left.get_xlabel() == "ndcg@10 (epoch 1)" and left.get_ylabel() == "ndcg@10 (epoch 2)"
    assert right.get_ylabel() == "change in ndcg@10 (epoch 2 - epoch 1)"
    assert left.get_title() == "2 queries: 1 better, 1 worse"  # ids 2 and 3; 4 is NaN before, 1 and 5 unmatched
    np.testing.assert_allclose(left.collections[0].get_offsets(), [[0.5, 0.7], [0.9, 0.6]], rtol=1e-6)
    np.testing.assert_allclose([p.get_height() for p in right.patches], [-0.3, 0.2], rtol=1e-5)
    with pytest.raises(ValueError, match="share no query"):
        plot_before_after(
            {"query_id": torch.tensor([1]), "m": torch.ones(1)}, {"query_id": torch.tensor([2]), "m": torch.ones(1)}
        )


def test_before_after_of_two_profiles_saves_svg(tmp_path):
    path = tmp_path / "epochs.svg"
    fig = plot_before_after(_profile(INVERTED), _profile(GOOD), "relevant_share", path=path)
    text = path.read_text()
    assert "<svg" in text and len(text) > 5000
    left, right = fig.axes
    assert left.get_xlabel() == "rank position" and left.get_ylabel() == "share of relevant documents"
    assert right.get_ylabel() == "change in relevant_share (after - before)"
    delta = _profile(GOOD)["relevant_share"] - _profile(INVERTED)["relevant_share"]
    np.testing.assert_allclose([p.get_height() for p in right.patches], delta.numpy(), atol=1e-6)


def test_missing_matplotlib_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails as if not installed
    with pytest.raises(ImportError, match=r"torch-rankeval\[plot\]"):
        plot_position_profile(_profile(GOOD))


def test_figure_renders_to_an_image_array_as_tensorboard_add_figure_does():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = plot_position_profile(_profile(INVERTED))
    canvas = FigureCanvasAgg(fig)  # what torch.utils.tensorboard's figure_to_image does
    canvas.draw()
    image = np.asarray(canvas.buffer_rgba())
    assert image.shape == (400, 640, 4) and image[..., :3].std() > 0
