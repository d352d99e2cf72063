"""A metric's update computes its per-list values under ``torch.inference_mode()`` (``RankingMetrics._batch``):
no tensor made there may outlive the update as an inference tensor. The states, the tables kept across
calls and what a user gets back stay ordinary tensors, so in-place use, ``load_state_dict``, autograd
(a loss after an update, as in a Lightning loop whose validation runs in inference mode) and the
values themselves are what they were without it."""

from __future__ import annotations

import pytest
import torch

import torch_rankeval.functional as F
import torch_rankeval.ranking.view as view
from tests.oracles import random_batch
from torch_rankeval import losses
from torch_rankeval.metrics import PositionDebiasedNDCG, PositionProfile, RankingMetrics, position_profile
from torch_rankeval.metrics import debiased as debiased_metrics

MEASURES = ("ndcg@3", "ndcg", "map@5", "mrr", "precision@3", "recall@5", "r_precision")


def _kept_tables() -> list[torch.Tensor]:
    """Every tensor the process keeps across calls: the index tables and the discount heads."""
    heads = [t for _, tables in view._DISCOUNT_HEADS.values() for t in tables.values()]
    return [*view._INDEX_CACHE.values(), *heads]


def _state_tensors(metric: torch.nn.Module) -> list[torch.Tensor]:
    """The metric's states (list states' entries too) and its buffers (the discount table)."""
    out = []
    for name in metric._defaults:
        value = getattr(metric, name)
        out += value if isinstance(value, list) else [value]
    return [*out, *metric.buffers(), *([metric._discounts] if hasattr(metric, "_discounts") else [])]


@pytest.fixture
def fresh_tables():
    """Empty process caches, so that this test's updates build every table it reads (restored after)."""
    saved = dict(view._INDEX_CACHE), dict(view._DISCOUNT_HEADS)
    view._INDEX_CACHE.clear()
    view._DISCOUNT_HEADS.clear()
    yield
    view._INDEX_CACHE.clear()
    view._DISCOUNT_HEADS.clear()
    view._INDEX_CACHE.update(saved[0])
    view._DISCOUNT_HEADS.update(saved[1])


def test_the_update_computes_its_values_in_inference_mode(monkeypatch):
    """The plan runs in inference mode inside an eager update, and only there."""
    seen = []
    metric = RankingMetrics(("ndcg@3",))
    run = metric.plan.values

    def values(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        seen.append(torch.is_inference_mode_enabled())
        return run(*args, **kwargs)

    monkeypatch.setattr(metric.plan, "values", values)
    metric.update(torch.rand(2, 4), torch.randint(0, 3, (2, 4)))
    assert seen == [True] and not torch.is_inference_mode_enabled()


@pytest.mark.parametrize("outer", ["plain", "inference_mode"], ids=["plain", "in_inference_mode"])
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"keep_per_query": True, "empty_target_action": "error"},  # rows kept as they come (float64 scores)
        {"window": 2, "keep_per_query": True},
        {"strata": 2},
    ],
    ids=["plain", "rows_error", "window_rows", "strata"],
)
def test_no_inference_tensor_outlives_an_update(fresh_tables, outer, options):
    """After updates outside inference mode, the states and list states are ordinary tensors; in
    either mode (the caller's inference mode makes its own new states inference tensors, as for any
    torchmetrics metric), the discount buffer (grown by a long batch) and every table kept for the
    next caller are ordinary, the values equal the functional API's (which runs outside inference
    mode), and the metric goes on in normal mode: another update, in-place use, a state round trip."""
    preds, target, mask, _ = random_batch(6, 80, seed=3)  # 80 > 64: the metric's discount buffer grows
    preds = (preds * 2).round() / 2  # ties; float64 values: the "error" policy keeps the rows as they are
    target[:, 0] = 1  # every list has a relevant document ("error" refuses empty ones)
    strata = {"strata": torch.tensor([0, 1, 0, 1, 1, 0])} if "strata" in options else {}
    metric = RankingMetrics(MEASURES, **options)
    halves = [{k: v[rows] for k, v in strata.items()} for rows in (slice(0, 3), slice(3, 6))]
    context = torch.inference_mode() if outer == "inference_mode" else torch.enable_grad()
    with context:
        metric.update(preds[:3], target[:3], mask=mask[:3], **halves[0])
    kept = [*_kept_tables(), metric._discounts]
    assert len(kept) > 5 and not [t for t in kept if t.is_inference()]
    metric.update(preds[3:], target[3:], mask=mask[3:], **halves[1])  # normal mode after the caller's
    if outer == "plain":
        assert not [t for t in _state_tensors(metric) if t.is_inference()]
    want = F.evaluate(preds, target, list(MEASURES), mask=mask)
    got = metric.compute()
    for name in MEASURES:
        torch.testing.assert_close(got[name], want[name].to(got[name].dtype), msg=name)
    metric.sums.add_(0)
    metric.load_state_dict(metric.state_dict())
    metric.reset()
    assert not [t for t in _state_tensors(metric) if t.is_inference()]


def test_a_loss_under_autograd_after_an_update_in_inference_mode(fresh_tables):
    """A validation step (in inference mode, as Lightning runs it) builds the kept tables; the next
    training step's loss and a metric of scores that require grad read them under autograd."""
    preds, target, mask, _ = random_batch(4, 12, seed=5)
    preds = (preds * 2).round() / 2  # ties
    scores = preds.float().clone().requires_grad_()
    want_loss = losses.approx_ndcg(scores, target, k=5, mask=mask)
    (want_grad,) = torch.autograd.grad(want_loss, scores)
    view._INDEX_CACHE.clear()
    view._DISCOUNT_HEADS.clear()
    with torch.inference_mode():
        RankingMetrics(("ndcg@5", "map", "mrr")).update(preds.float(), target, mask=mask)
    assert not [t for t in _kept_tables() if t.is_inference()]
    loss = losses.approx_ndcg(scores, target, k=5, mask=mask)
    (grad,) = torch.autograd.grad(loss, scores)
    torch.testing.assert_close(loss, want_loss)
    torch.testing.assert_close(grad, want_grad)
    values = F.evaluate(scores, target, ["ndcg@5", "map", "mrr"], mask=mask)
    assert all(not v.is_inference() for v in values.values())


def _side_cases():
    """The classes with value computations of their own (not ``RankingMetrics._batch``), each with an
    update and the functional values its computed means must equal."""
    preds, target, mask, _ = random_batch(6, 80, seed=7)
    preds = (preds * 2).round() / 2  # ties
    clicks = (target > 0).float()
    prop = torch.linspace(0.9, 0.2, 80, dtype=torch.float64).expand(6, 80)

    def debiased_update(m, rows):  # noqa: ANN001, ANN202
        m.update(preds[rows], clicks[rows], propensities=prop[rows], mask=mask[rows])

    def debiased_want():  # noqa: ANN202
        return F.position_debiased_ndcg(preds, clicks, k=5, propensities=prop, mask=mask)

    def profile_update(m, rows):  # noqa: ANN001, ANN202
        m.update(preds[rows], target[rows], mask=mask[rows])

    def profile_want():  # noqa: ANN202
        profile = PositionProfile(positions=5)
        profile_update(profile, slice(0, 6))  # the same lists in one update
        return profile.compute()

    return {
        "debiased": (lambda **kw: PositionDebiasedNDCG(k=5, **kw), debiased_update, debiased_want),
        "profile": (lambda **kw: PositionProfile(positions=5, **kw), profile_update, profile_want),
    }


@pytest.mark.parametrize("outer", ["plain", "inference_mode"], ids=["plain", "in_inference_mode"])
@pytest.mark.parametrize(
    ("case", "options"),
    [
        ("debiased", {}),
        ("debiased", {"keep_per_query": True}),
        ("debiased", {"window": 2}),
        ("profile", {}),
        ("profile", {"keep_per_query": True}),
    ],
    ids=["debiased", "debiased_rows", "debiased_window", "profile", "profile_rows"],
)
def test_side_classes_compute_in_inference_mode_and_keep_none(fresh_tables, monkeypatch, case, options, outer):
    """PositionDebiasedNDCG and PositionProfile compute their values in inference mode too
    (``_running.values_mode``), only inside the update; what they keep is ordinary after updates in
    normal mode (their states and rows; the kept tables in either mode), their values are those of the
    functional API (a profile: of one update of a fresh metric), and they go on in normal mode."""
    make, update, want = _side_cases()[case]
    seen = []
    module = debiased_metrics if case == "debiased" else position_profile
    name = "position_debiased_values" if case == "debiased" else "prepare"
    run = getattr(module, name)

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        seen.append(torch.is_inference_mode_enabled())
        return run(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    metric = make(**options)
    context = torch.inference_mode() if outer == "inference_mode" else torch.enable_grad()
    with context:
        update(metric, slice(0, 3))
    assert not [t for t in [*_kept_tables(), *metric.buffers()] if t.is_inference()]
    assert _kept_tables()  # the update made tables to keep
    update(metric, slice(3, 6))  # normal mode after the caller's
    assert seen == [True, True] and not torch.is_inference_mode_enabled()
    if outer == "plain":
        assert not [t for t in _state_tensors(metric) if t.is_inference()]
    got, expected = metric.compute(), want()
    if isinstance(got, dict) and isinstance(expected, torch.Tensor):  # debiased, window: both updates in it
        expected = {key: expected.to(value.dtype) for key, value in got.items()}
    expected = expected if isinstance(got, dict) else expected.to(got.dtype)
    torch.testing.assert_close(got, expected)
    metric.sums.add_(0)
    metric.load_state_dict(metric.state_dict())
    metric.reset()
    assert not [t for t in _state_tensors(metric) if t.is_inference()]
