"""Position-debiased (IPS) DCG/nDCG: the spec's worked examples (shared/debias.md section 5),
every validation rule (section 4.2), cross-checks against torchmetrics / scikit-learn on the gains
``clicks / rho``, and the click-simulation test (section 6)."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from sklearn.metrics import dcg_score, ndcg_score
from torchmetrics.functional.retrieval import retrieval_normalized_dcg

from torch_rankeval import functional as F
from torch_rankeval.kernels.debiased import position_debiased_values

L1, L2, L3, L4 = 1.0, 1 / math.log2(3), 0.5, 1 / math.log2(5)

# Example 1 of the spec: items listed in logged order, PBM eta = 1.
PREDS = [0.1, 0.4, 0.9, 0.2]
CLICKS = [1, 0, 1, 0]
POS = [1, 2, 3, 4]

DTYPES = [(torch.float64, 1e-9), (torch.float32, 1e-6)]


def t(x, dtype=None):
    return torch.tensor(x, dtype=dtype)


# ----------------------------------------------------------------------------- worked examples
@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_example_1_basic_pbm(dtype, tol):
    p, c, pos = t(PREDS, dtype), t(CLICKS), t(POS)
    kw = dict(logged_positions=pos, eta=1.0)
    # rho = [1, 1/2, 1/3, 1/4] -> g = [1, 0, 3, 0]; new order 2, 1, 3, 0 -> gains by rank [3, 0, 0, 1]
    assert F.ips_gains(c, **kw).tolist() == pytest.approx([1, 0, 3, 0], abs=tol)
    assert F.position_debiased_dcg(p, c, 4, **kw).item() == pytest.approx(3 + L4, abs=tol)
    assert F.position_debiased_dcg(p, c, 4, **kw).item() == pytest.approx(3.430676558073, abs=tol)
    assert F.position_debiased_ndcg(p, c, 4, **kw).item() == pytest.approx((3 + L4) / (3 + L2), abs=tol)
    assert F.position_debiased_ndcg(p, c, 4, **kw).item() == pytest.approx(0.944847956560, abs=tol)
    assert F.position_debiased_dcg(p, c, 2, **kw).item() == pytest.approx(3.0, abs=tol)
    assert F.position_debiased_ndcg(p, c, 2, **kw).item() == pytest.approx(0.826234657129, abs=tol)
    # a sequence of cutoffs from one ranking
    both = F.position_debiased_ndcg(p, c, [2, 4], **kw)
    assert both.dtype == dtype and both.shape == (2,)
    assert both.tolist() == pytest.approx([0.826234657129, 0.944847956560], abs=tol)
    # naive (eta = 0)
    naive = dict(logged_positions=pos, eta=0.0)
    assert F.position_debiased_ndcg(p, c, 4, **naive).item() == pytest.approx(0.877215315338, abs=tol)
    assert F.position_debiased_dcg(p, c, 4, **naive).item() == pytest.approx(1.430676558073, abs=tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_the_three_propensity_sources_agree(dtype, tol):
    p, c, pos = t(PREDS, dtype), t(CLICKS), t(POS)
    want = 0.944847956560
    rho = t([1, 1 / 2, 1 / 3, 1 / 4], dtype)
    table = t([1, 1 / 2, 1 / 3, 1 / 4, 1 / 5], dtype)
    assert F.position_debiased_ndcg(p, c, propensities=rho).item() == pytest.approx(want, abs=tol)
    assert F.position_debiased_ndcg(p, c, logged_positions=pos, propensity_table=table).item() == pytest.approx(
        want, abs=tol
    )
    assert F.position_debiased_ndcg(p, c, logged_positions=pos.to(dtype), eta=1.0).item() == pytest.approx(
        want, abs=tol
    )


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_example_2_clipping(dtype, tol):
    p, c, pos = t(PREDS, dtype), t(CLICKS), t(POS)
    kw = dict(logged_positions=pos, eta=1.0, clip=0.5)  # rho -> [1, .5, .5, .5], g = [1, 0, 2, 0]
    assert F.ips_gains(c, **kw).tolist() == pytest.approx([1, 0, 2, 0], abs=tol)
    assert F.position_debiased_dcg(p, c, 4, **kw).item() == pytest.approx(2.430676558073, abs=tol)
    assert F.position_debiased_ndcg(p, c, 4, **kw).item() == pytest.approx(0.923885008626, abs=tol)
    # clip = 1 is the naive metric
    clip1 = F.position_debiased_ndcg(p, c, logged_positions=pos, eta=1.0, clip=1.0).item()
    assert clip1 == pytest.approx(0.877215315338, abs=tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_example_4_single_click_the_propensity_cancels(dtype, tol):
    p, c, pos = t(PREDS, dtype), t([0, 1, 0, 0]), t(POS)
    ips = F.position_debiased_ndcg(p, c, 4, logged_positions=pos, eta=1.0).item()
    naive = F.position_debiased_ndcg(p, c, 4, logged_positions=pos, eta=0.0).item()
    assert ips == pytest.approx(0.630929753571, abs=tol) and naive == pytest.approx(ips, abs=tol)
    assert F.position_debiased_dcg(p, c, 4, logged_positions=pos, eta=1.0).item() == pytest.approx(
        1.261859507143, abs=tol
    )


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_example_5_batch_no_click_list_and_padding(dtype, tol):
    preds = t([[0.1, 0.4, 0.9, 0.2], [0.3, 0.2, 0.1, 0.0]], dtype)
    clicks = t([[1, 0, 1, 0], [0, 0, 0, 0]])
    pos = t([[1, 2, 3, 4], [1, 2, 3, 1]])
    mask = t([[True, True, True, True], [True, True, True, False]])
    kw = dict(logged_positions=pos, eta=1.0, mask=mask)

    def nd(**extra):
        return F.position_debiased_ndcg(preds, clicks, **kw, **extra)

    assert nd().item() == pytest.approx(0.944847956560, abs=tol)  # default: skip
    assert nd(empty_target_action="skip").item() == pytest.approx(0.944847956560, abs=tol)
    assert nd(empty_target_action="neg").item() == pytest.approx(0.472423978280, abs=tol)
    assert nd(empty_target_action="pos").item() == pytest.approx(0.972423978280, abs=tol)
    assert nd(empty_target_action="neg", reduction="none").tolist() == pytest.approx([0.944847956560, 0.0], abs=tol)
    per_list = nd(reduction="none")  # skip: NaN for the skipped list
    assert per_list[0].item() == pytest.approx(0.944847956560, abs=tol) and math.isnan(per_list[1].item())
    assert nd(empty_target_action="neg", reduction="sum").item() == pytest.approx(0.944847956560, abs=tol)
    with pytest.raises(ValueError, match="no click.*empty_target_action='error'"):
        nd(empty_target_action="error")
    assert F.position_debiased_dcg(preds, clicks, **kw).item() == pytest.approx(1.715338279037, abs=tol)
    assert F.position_debiased_dcg(preds, clicks, **kw, reduction="none").tolist() == pytest.approx(
        [3.430676558073, 0.0], abs=tol
    )


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_example_6_a_padded_item_is_never_ranked(dtype, tol):
    preds = t([[0.1, 0.4, 0.9, 99.0]], dtype)
    clicks = t([[1, 0, 1, 1]])
    mask = t([[True, True, True, False]])
    got = F.position_debiased_ndcg(preds, clicks, 3, logged_positions=t([[1, 2, 3, 4]]), eta=1.0, mask=mask)
    assert got.item() == pytest.approx((3 + L3) / (3 + L2), abs=tol)
    assert got.item() == pytest.approx(0.963940433317, abs=tol)
    # garbage positions / propensities at padding are never read
    got = F.position_debiased_ndcg(preds, clicks, 3, logged_positions=t([[1, 2, 3, 0]]), eta=1.0, mask=mask)
    assert got.item() == pytest.approx(0.963940433317, abs=tol)
    got = F.position_debiased_ndcg(preds, clicks, 3, propensities=t([[1, 0.5, 1 / 3, float("nan")]], dtype), mask=mask)
    assert got.item() == pytest.approx(0.963940433317, abs=tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_example_7_affine_trust_bias_correction(dtype, tol):
    alpha, beta = t([0.8, 0.5, 0.3], dtype), t([0.1, 0.08, 0.05], dtype)
    pos, clicks, preds = t([1, 2, 3]), t([1, 0, 1]), t([0.2, 0.9, 0.5], dtype)
    gains = F.ips_gains(clicks, logged_positions=pos, affine=(alpha, beta))
    assert gains.tolist() == pytest.approx([1.125, -0.16, 3.166666666667], abs=tol)
    got = F.position_debiased_dcg(preds, clicks, 3, logged_positions=pos, affine=(alpha, beta))
    assert got.item() == pytest.approx(1.125 * L3 - 0.16 * L1 + (0.95 / 0.3) * L2, abs=tol)
    assert got.item() == pytest.approx(2.400444219643, abs=tol)
    # per-item alpha / beta (e.g. policy-averaged) instead of tables
    got_items = F.position_debiased_dcg(preds, clicks, 3, affine=(alpha, beta))
    assert got_items.item() == pytest.approx(2.400444219643, abs=tol)
    # sklearn's DCG on the same gains (linear gain, log2 discount)
    want = dcg_score(gains.double().numpy()[None], preds.double().numpy()[None], k=3)
    assert got.item() == pytest.approx(want, abs=tol)
    # nDCG with the ideal from the same (signed) gains: ideal order 3.1667, 1.125, -0.16
    ideal = 0.95 / 0.3 + 1.125 * L2 - 0.16 * L3
    nd = F.position_debiased_ndcg(preds, clicks, 3, logged_positions=pos, affine=(alpha, beta))
    assert nd.item() == pytest.approx(2.400444219643 / ideal, abs=tol)


@pytest.mark.parametrize("dtype,want", [(torch.float64, 0.944847956560), (torch.float32, 0.944847955)])
def test_zero_propensity_on_non_clicked_items_is_allowed(dtype, want):
    rho = t([1, 0, 1 / 3, 0], dtype)
    got = F.position_debiased_ndcg(t(PREDS, torch.float64), t(CLICKS), propensities=rho)
    assert got.item() == pytest.approx(want, abs=1e-9)
    assert F.ips_gains(t(CLICKS), rho).tolist() == pytest.approx([1, 0, 3, 0], abs=1e-6)


def test_counts_and_rates_keep_the_gain_linear():
    p, pos = t(PREDS, torch.float64), t(POS)
    counts = t([10, 0, 4, 0])
    g = F.ips_gains(counts, logged_positions=pos, eta=1.0)
    assert g.tolist() == pytest.approx([10, 0, 12, 0])
    want = (12 + 10 * L4) / (12 + 10 * L2)
    assert F.position_debiased_ndcg(p, counts, logged_positions=pos, eta=1.0).item() == pytest.approx(want, abs=1e-12)
    # rates: the same up to scale, so the same nDCG; the DCG scales
    rates = counts.double() / 20
    assert F.position_debiased_ndcg(p, rates, logged_positions=pos, eta=1.0).item() == pytest.approx(want, abs=1e-12)
    assert F.position_debiased_dcg(p, rates, logged_positions=pos, eta=1.0).item() == pytest.approx((12 + 10 * L4) / 20)
    # bool clicks
    assert F.position_debiased_ndcg(p, t(CLICKS).bool(), logged_positions=pos, eta=1.0).item() == pytest.approx(
        0.944847956560
    )


def test_relative_propensities_leave_the_ndcg_unchanged_and_scale_the_dcg():
    p, c = t(PREDS, torch.float64), t(CLICKS)
    rho = t([0.8, 0.4, 0.8 / 3, 0.2], torch.float64)  # 0.8 * (1/p): absolute propensities
    rel = rho / rho[0]
    assert F.position_debiased_ndcg(p, c, propensities=rho).item() == pytest.approx(
        F.position_debiased_ndcg(p, c, propensities=rel).item()
    )
    assert F.position_debiased_dcg(p, c, propensities=rel).item() == pytest.approx(
        0.8 * F.position_debiased_dcg(p, c, propensities=rho).item()
    )


def test_one_list_and_a_batch_of_one_agree():
    p, c, pos = t(PREDS), t(CLICKS), t(POS)
    one = F.position_debiased_ndcg(p, c, [1, 3], logged_positions=pos, eta=1.0, reduction="none")
    batch = F.position_debiased_ndcg(p[None], c[None], [1, 3], logged_positions=pos[None], eta=1.0, reduction="none")
    assert one.shape == (2,) and batch.shape == (1, 2)
    torch.testing.assert_close(one, batch[0])
    values, empty = position_debiased_values(p, c, (1, 3), logged_positions=pos, eta=1.0)
    assert values.shape == empty.shape == (1, 2)
    torch.testing.assert_close(values[0], one)


def test_per_list_values_feed_a_running_mean():
    """What a Metric class does with the per-list function: sum the kept values, count them."""
    g = torch.Generator().manual_seed(3)
    preds = torch.rand(6, 5, generator=g)
    clicks = (torch.rand(6, 5, generator=g) < 0.25).long()
    pos = torch.rand(6, 5, generator=g).argsort(-1) + 1
    total, count = torch.zeros(2, dtype=torch.float64), torch.zeros(2)
    for rows in (slice(0, 2), slice(2, 6)):  # two "update" calls
        values, empty = position_debiased_values(preds[rows], clicks[rows], (3, 5), logged_positions=pos[rows], eta=1.0)
        total += torch.where(empty, torch.zeros_like(values), values).sum(0)
        count += (~empty).sum(0)
    want = F.position_debiased_ndcg(preds, clicks, [3, 5], logged_positions=pos, eta=1.0)
    torch.testing.assert_close((total / count).float(), want)


# ----------------------------------------------------------------------------- ties
def test_ties_follow_the_library_policy():
    # preds tie items 0 and 1 (gains 1 and 2 with rho = 1, 1/2 -> g = [1, 4]); item 2 last with g = 0
    preds, clicks, rho = t([0.5, 0.5, 0.1]), t([1, 2, 0]), t([1.0, 0.5, 1.0])
    ideal = 4 + 1 * L2
    first = F.position_debiased_ndcg(preds, clicks, propensities=rho, ties="first").item()
    assert first == pytest.approx((1 + 4 * L2) / ideal, abs=1e-6)
    assert F.position_debiased_ndcg(preds, clicks, propensities=rho, ties="optimistic").item() == pytest.approx(1.0)
    assert F.position_debiased_ndcg(preds, clicks, propensities=rho, ties="pessimistic").item() == pytest.approx(
        first, abs=1e-6
    )
    avg = F.position_debiased_ndcg(preds, clicks, propensities=rho).item()  # default: average
    assert avg == pytest.approx((first + 1.0) / 2, abs=1e-6)
    assert avg == pytest.approx(retrieval_normalized_dcg(preds, t([1.0, 4.0, 0.0])).item(), abs=1e-6)


# ----------------------------------------------------------------------------- peers
def _random_log(seed: int, n: int = 40, length: int = 8, tie_levels: int | None = None):
    g = torch.Generator().manual_seed(seed)
    preds = torch.rand(n, length, generator=g, dtype=torch.float64)
    if tie_levels:
        preds = (preds * tie_levels).floor()
    clicks = (torch.rand(n, length, generator=g) < 0.3).long() * torch.randint(1, 4, (n, length), generator=g)
    rho = torch.rand(n, length, generator=g, dtype=torch.float64) * 0.95 + 0.05
    return preds, clicks, rho


@pytest.mark.parametrize("tie_levels", [None, 3], ids=["no-ties", "ties"])
@pytest.mark.parametrize("k", [None, 1, 3, 20])
def test_ndcg_equals_torchmetrics_on_the_gains_clicks_over_rho(tie_levels, k):
    preds, clicks, rho = _random_log(7, tie_levels=tie_levels)
    ours = F.position_debiased_ndcg(preds, clicks, k, propensities=rho, reduction="none", empty_target_action="neg")
    gains = clicks / rho
    for i in range(preds.shape[0]):  # the oracle, one query at a time
        want = retrieval_normalized_dcg(preds[i], gains[i], top_k=k)  # computes in float32
        assert ours[i].item() == pytest.approx(want.item(), abs=1e-6), i
    # sklearn agrees too (lists with a click; sklearn averages ties as well)
    keep = (clicks.sum(1) > 0).numpy()
    sk = ndcg_score(gains.numpy()[keep], preds.numpy()[keep], k=k, ignore_ties=False)
    assert F.position_debiased_ndcg(preds, clicks, k, propensities=rho).item() == pytest.approx(sk, abs=1e-9)


@pytest.mark.parametrize("k", [None, 2, 5])
def test_dcg_equals_sklearn_on_the_gains(k):
    preds, clicks, rho = _random_log(11, tie_levels=4)
    ours = F.position_debiased_dcg(preds, clicks, k, propensities=rho, clip=0.2, reduction="none")
    gains = clicks / rho.clamp(min=0.2)
    for i in range(preds.shape[0]):
        want = dcg_score(gains[i : i + 1].numpy(), preds[i : i + 1].numpy(), k=k, ignore_ties=False)
        assert ours[i].item() == pytest.approx(want, abs=1e-9)


# ----------------------------------------------------------------------------- validation (spec 4.2)
P1, C1, POS1 = t(PREDS), t(CLICKS), t(POS)


@pytest.mark.parametrize(
    "call,match",
    [
        # the spec's error cases
        (
            lambda: F.position_debiased_ndcg(P1, C1, propensities=t([1, 0.5, 0, 0.25])),
            "propensities is 0 for a clicked item",
        ),
        (lambda: F.position_debiased_ndcg(P1, C1, propensities=t([1, 0.5, 3, 0.25])), "pass 1/weights"),
        (
            lambda: F.position_debiased_ndcg(P1, C1, propensities=t([1, float("nan"), 0.3, 0.25])),
            "propensities must be finite",
        ),
        (lambda: F.position_debiased_ndcg(P1, C1, logged_positions=t([0, 1, 2, 3]), eta=1.0), "1-based"),
        (lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, eta=-1.0), "eta must be finite and >= 0"),
        (
            lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, eta=0.5, clip=0.0),
            r"clip must be a number in \(0, 1\]",
        ),
        (
            lambda: F.position_debiased_ndcg(P1, C1, propensities=1 / POS1, logged_positions=POS1, eta=1.0),
            "pass exactly one of",
        ),
        (lambda: F.position_debiased_ndcg(P1, C1), "pass exactly one of"),
        (lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1), "no default eta"),
        (
            lambda: F.position_debiased_ndcg(
                P1, C1, logged_positions=t([1, 2, 11, 3]), propensity_table=1 / torch.arange(1.0, 11)
            ),
            r"beyond propensity_table \(length 10\)",
        ),
        # the rest of the table
        (
            lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, eta=1.0, propensity_table=torch.ones(4)),
            "exactly one of eta",
        ),
        (lambda: F.position_debiased_ndcg(P1, C1, propensities=1 / POS1, eta=1.0), "go with logged_positions"),
        (lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, eta=float("nan")), "eta must be finite"),
        (lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, eta=float("inf")), "eta must be finite"),
        (
            lambda: F.position_debiased_ndcg(P1, C1, logged_positions=t([1.0, 2.5, 3.0, 4.0]), eta=1.0),
            "1-based integers",
        ),
        (
            lambda: F.position_debiased_ndcg(P1, C1, logged_positions=t([1, 2, -3, 4]), propensity_table=torch.ones(4)),
            "1-based",
        ),
        (
            lambda: F.position_debiased_ndcg(P1, C1, propensities=t([1, 0.5, -0.2, 0.25])),
            "propensities must be finite probabilities",
        ),
        (
            lambda: F.position_debiased_ndcg(P1, C1, propensities=t([1, 0.5, float("inf"), 0.25])),
            "propensities must be finite",
        ),
        (
            lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, propensity_table=t([1, 2.0, 0.3, 0.2])),
            "pass 1/weights",
        ),
        (
            lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, propensity_table=t([1, 0.5, 0.0, 0.2])),
            "propensity_table is 0 at the logged position of a clicked item",
        ),
        (
            lambda: F.position_debiased_ndcg(P1, t([1, -1, 0, 0]), logged_positions=POS1, eta=1.0),
            "clicks must be finite and >= 0",
        ),
        (
            lambda: F.position_debiased_ndcg(P1, t([1, float("nan"), 0, 0]), logged_positions=POS1, eta=1.0),
            "clicks must be finite",
        ),
        (
            lambda: F.position_debiased_ndcg(t([0.1, float("nan"), 0.2, 0.3]), C1, logged_positions=POS1, eta=1.0),
            "preds contains NaN",
        ),
        (lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, eta=1.0, clip=1.5), "clip must be"),
        (lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, eta=1.0, clip=-0.1), "clip must be"),
        (lambda: F.position_debiased_ndcg(P1, C1, 0, logged_positions=POS1, eta=1.0), "k must be a positive int"),
        (lambda: F.position_debiased_ndcg(P1, C1, [3, -1], logged_positions=POS1, eta=1.0), "k must be a positive int"),
        (
            lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, eta=1.0, normalize="max"),
            "normalize='max' is not valid",
        ),
        (
            lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, eta=1.0, empty_target_action="zero"),
            "empty_target_action='zero'",
        ),
        (
            lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, eta=1.0, empty_target_action=None),
            "empty_target_action=None",
        ),
        (lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, eta=1.0, reduction="avg"), "reduction='avg'"),
        (lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, eta=1.0, ties="random"), "ties='random'"),
        # shapes
        (lambda: F.position_debiased_ndcg(P1, C1[:3], logged_positions=POS1, eta=1.0), "same shape"),
        (
            lambda: F.position_debiased_ndcg(P1, C1, propensities=t([1.0, 0.5])),
            "propensities must have the shape of preds",
        ),
        (
            lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1[:2], eta=1.0),
            "logged_positions must have the shape",
        ),
        (
            lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, propensity_table=torch.ones(2, 2)),
            "non-empty 1-D",
        ),
        (
            lambda: F.position_debiased_ndcg(
                P1, C1, logged_positions=POS1, eta=1.0, mask=torch.ones(3, dtype=torch.bool)
            ),
            "mask must have the shape",
        ),
        # affine
        (
            lambda: F.position_debiased_dcg(
                P1, C1, logged_positions=POS1, affine=(t([0.8, 0.5, 0.3, 0.2]), t([0.1, 0.1, 0.1]))
            ),
            "same length",
        ),
        (
            lambda: F.position_debiased_dcg(
                P1, C1, logged_positions=POS1, eta=1.0, affine=(torch.ones(4), torch.zeros(4))
            ),
            "replaces the propensities",
        ),
        (
            lambda: F.position_debiased_dcg(
                P1, C1, logged_positions=POS1, affine=(t([0.8, 0.0, 0.3, 0.2]), torch.zeros(4))
            ),
            "alpha must be in",
        ),
        (
            lambda: F.position_debiased_dcg(
                P1, C1, logged_positions=POS1, affine=(torch.full((4,), 0.5), torch.full((4,), -0.1))
            ),
            "beta must be in",
        ),
        (
            lambda: F.position_debiased_dcg(
                P1, C1, logged_positions=POS1, affine=(torch.full((4,), 0.6), torch.full((4,), 0.5))
            ),
            "alpha \\+ beta",
        ),
        (
            lambda: F.position_debiased_dcg(
                P1, C1 * 2, logged_positions=POS1, affine=(torch.full((4,), 0.6), torch.full((4,), 0.1))
            ),
            "rates in \\[0, 1\\]",
        ),
        (
            lambda: F.position_debiased_dcg(
                P1, C1, logged_positions=t([1, 2, 3, 5]), affine=(torch.full((4,), 0.6), torch.full((4,), 0.1))
            ),
            "beyond affine alpha",
        ),
    ],
)
def test_bad_input_raises_a_value_error_naming_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    "call,match",
    [
        (
            lambda: F.position_debiased_ndcg(P1, C1, propensities=[1, 0.5, 0.3, 0.2]),
            "propensities must be a torch.Tensor",
        ),
        (lambda: F.position_debiased_ndcg(P1, C1, propensities=POS1), "propensities must be a floating tensor"),
        (
            lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1.bool(), eta=1.0),
            "logged_positions must hold integer",
        ),
        (
            lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, eta=torch.tensor(1.0)),
            "eta must be a Python number",
        ),
        (lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, eta=True), "eta must be a Python number"),
        (
            lambda: F.position_debiased_ndcg(P1, C1, logged_positions=POS1, propensity_table=[1.0, 0.5]),
            "propensity_table must be a 1-D",
        ),
        (
            lambda: F.position_debiased_ndcg(
                P1, C1, logged_positions=POS1, propensity_table=torch.ones(4, dtype=torch.long)
            ),
            "floating",
        ),
        (lambda: F.position_debiased_ndcg(P1.long(), C1, logged_positions=POS1, eta=1.0), "preds must be a floating"),
        (lambda: F.position_debiased_ndcg(P1, C1, 2.5, logged_positions=POS1, eta=1.0), "k must be None"),
        (lambda: F.position_debiased_dcg(P1, C1, logged_positions=POS1, affine=torch.ones(4)), "affine must be a pair"),
        (lambda: F.ips_gains([1, 0], propensities=t([1.0, 0.5])), "clicks must be a torch.Tensor"),
        (
            lambda: F.aggregate_ips_gains(t([0.0, 1.0]), t([0, 1]), t([1, 0]), t([1.0, 0.5])),
            "query_ids must be an integer",
        ),
    ],
)
def test_bad_types_raise_a_type_error(call, match):
    with pytest.raises(TypeError, match=match):
        call()


def test_infinite_scores_are_allowed():
    preds = t([float("inf"), 0.4, float("-inf"), 0.2], torch.float64)  # ranks: 0, 1, 3, 2
    got = F.position_debiased_ndcg(preds, t(CLICKS), logged_positions=t(POS), eta=1.0).item()
    assert got == pytest.approx((1 + 3 * L4) / (3 + L2))


def test_k_beyond_the_list_is_the_whole_list():
    kw = dict(logged_positions=t(POS), eta=1.0)
    assert F.position_debiased_ndcg(t(PREDS), t(CLICKS), 50, **kw).item() == pytest.approx(
        F.position_debiased_ndcg(t(PREDS), t(CLICKS), **kw).item()
    )


def test_every_list_skipped_is_nan_with_a_warning():
    kw = dict(logged_positions=t([[1, 2], [1, 2]]), eta=1.0)
    preds, clicks = torch.rand(2, 2), torch.zeros(2, 2, dtype=torch.long)
    with pytest.warns(UserWarning, match="every list was skipped"):
        got = F.position_debiased_ndcg(preds, clicks, **kw)
    assert math.isnan(got.item())
    with pytest.warns(UserWarning, match="every list was skipped"):
        got = F.position_debiased_ndcg(preds, clicks, [1, 2], **kw)
    assert got.shape == (2,) and torch.isnan(got).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # validate_args=False: no host sync, so no warning
        assert math.isnan(F.position_debiased_ndcg(preds, clicks, **kw, validate_args=False).item())
        assert F.position_debiased_ndcg(preds, clicks, **kw, empty_target_action="neg").item() == 0.0
        assert F.position_debiased_dcg(preds, clicks, **kw).item() == 0.0  # a legitimate zero for DCG
    # a fully masked list is a list without clicks
    mask = torch.zeros(2, 2, dtype=torch.bool)
    with pytest.warns(UserWarning, match="every list was skipped"):
        F.position_debiased_ndcg(preds, torch.ones(2, 2), **kw, mask=mask)


def test_validate_args_false_skips_the_value_checks():
    # A clicked item with rho = 0 gives an infinite gain: never a silent finite number (NaN or inf:
    # tie-group sums are differences of prefix sums, and inf - inf is NaN).
    got = F.position_debiased_dcg(t(PREDS), t(CLICKS), propensities=t([1.0, 0.5, 0.0, 0.25]), validate_args=False)
    assert not math.isfinite(got.item())
    # Positions beyond the table are clamped into it (documented), without an index error.
    got = F.position_debiased_ndcg(
        t(PREDS),
        t(CLICKS),
        logged_positions=t([1, 2, 9, 4]),
        propensity_table=t([1, 0.5, 1 / 3, 0.25]),
        validate_args=False,
    )
    assert got.item() == pytest.approx((4 + L4) / (4 + L2))


@pytest.mark.parametrize(
    "source,normalize",
    [
        (lambda pos: dict(logged_positions=pos, eta=1.0, clip=0.25), "ideal"),
        (lambda pos: dict(logged_positions=pos, propensity_table=1 / torch.arange(1.0, 17)), "ideal"),
        (lambda pos: dict(propensities=1 / pos.float()), "none"),
        (lambda pos: dict(logged_positions=pos, affine=(torch.full((16,), 0.6), torch.full((16,), 0.05))), "ideal"),
    ],
    ids=["eta-ndcg", "table-ndcg", "propensities-dcg", "affine-ndcg"],
)
def test_fullgraph_compile_matches_eager(source, normalize):
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(0)
    preds = (torch.rand(8, 16, generator=g) * 4).round() / 4  # ties
    clicks = (torch.rand(8, 16, generator=g) < 0.3).float()
    mask = torch.rand(8, 16, generator=g) > 0.2
    pos = torch.rand(8, 16, generator=g).argsort(-1) + 1

    def fn(p, c, m, pos):
        return F.position_debiased_ndcg(p, c, [3, 10], mask=m, normalize=normalize, validate_args=False, **source(pos))

    compiled = torch.compile(fn, fullgraph=True, backend="inductor")
    torch.testing.assert_close(compiled(preds, clicks, mask, pos), fn(preds, clicks, mask, pos), equal_nan=True)


# ----------------------------------------------------------------------------- aggregation
def test_aggregate_ips_gains_sums_per_query_and_document():
    # query 0: two sessions, the logger swaps documents 5 and 6; query 1: one session
    q = t([0, 0, 0, 0, 1, 1])
    d = t([5, 6, 6, 5, 5, 7])
    clicks = t([1, 1, 1, 0, 0, 1])
    pos = t([1, 2, 1, 2, 1, 2])
    qu, du, g = F.aggregate_ips_gains(q, d, clicks, logged_positions=pos, eta=1.0)
    assert qu.tolist() == [0, 0, 1, 1] and du.tolist() == [5, 6, 5, 7]
    assert g.tolist() == pytest.approx([1.0, 2 + 1, 0.0, 2.0])
    _, _, g2 = F.aggregate_ips_gains(q, d, clicks, logged_positions=pos, eta=1.0, num_sessions=2)
    assert g2.tolist() == pytest.approx([0.5, 1.5, 0.0, 1.0])
    sessions = t([2, 2, 2, 2, 1, 1])
    _, _, g3 = F.aggregate_ips_gains(q, d, clicks, logged_positions=pos, eta=1.0, num_sessions=sessions)
    assert g3.tolist() == pytest.approx([0.5, 1.5, 0.0, 2.0])
    _, _, g4 = F.aggregate_ips_gains(q, d, clicks, 1 / pos.double(), clip=0.75)  # rho 1/2 -> 3/4
    assert g4.tolist() == pytest.approx([1.0, 4 / 3 + 1, 0.0, 4 / 3])
    # padding rows are dropped
    mask = t([True, True, True, True, True, False])
    qu, du, g5 = F.aggregate_ips_gains(q, d, clicks, logged_positions=pos, eta=1.0, mask=mask)
    assert du.tolist() == [5, 6, 5] and g5.tolist() == pytest.approx([1.0, 3.0, 0.0])


def test_aggregate_ips_gains_rejects_bad_input():
    q, d, c, pos = t([0, 0]), t([1, 2]), t([1, 0]), t([1, 2])
    with pytest.raises(ValueError, match="the same on every row of a query"):
        F.aggregate_ips_gains(q, d, c, logged_positions=pos, eta=1.0, num_sessions=t([2, 3]))
    with pytest.raises(ValueError, match="num_sessions must be a positive"):
        F.aggregate_ips_gains(q, d, c, logged_positions=pos, eta=1.0, num_sessions=0)
    with pytest.raises(ValueError, match="doc_ids must have the shape of clicks"):
        F.aggregate_ips_gains(q, t([1]), c, logged_positions=pos, eta=1.0)
    with pytest.raises(ValueError, match="pass exactly one of"):
        F.aggregate_ips_gains(q, d, c)
    with pytest.raises(ValueError, match="propensities is 0 for a clicked item"):
        F.aggregate_ips_gains(q, d, c, t([0.0, 1.0]))


def test_aggregated_session_log_equals_the_count_form():
    """A session-level log aggregated with aggregate_ips_gains gives the nDCG of the click counts."""
    g = torch.Generator().manual_seed(5)
    n_q, n_d, n_s = 6, 5, 40
    gamma = torch.rand(n_q, 1, n_d, generator=g, dtype=torch.float64)
    pos = torch.rand(n_q, n_s, n_d, generator=g).argsort(-1) + 1  # randomised logger: positions vary
    clicks = torch.bernoulli(gamma / pos, generator=g).long()
    q = torch.arange(n_q).view(n_q, 1, 1).expand(n_q, n_s, n_d)
    d = torch.arange(n_d).view(1, 1, n_d).expand(n_q, n_s, n_d)
    qu, du, gains = F.aggregate_ips_gains(q, d, clicks, logged_positions=pos, eta=1.0, num_sessions=n_s)
    dense = torch.zeros(n_q, n_d, dtype=gains.dtype).index_put_((qu, du), gains)
    want = (clicks * pos).sum(1) / n_s  # sum over sessions of c / (1/p)
    torch.testing.assert_close(dense, want.to(dense.dtype))
    preds = torch.rand(n_q, n_d, generator=g, dtype=torch.float64)
    got = F.position_debiased_ndcg(preds, dense, 3, propensities=torch.ones_like(dense))
    keep = (want.sum(1) > 0).numpy()
    oracle = ndcg_score(want.numpy()[keep], preds.numpy()[keep], k=3)
    assert got.item() == pytest.approx(oracle, abs=1e-9)


# ----------------------------------------------------------------------------- simulation (spec section 6)
def _simulated_click_counts(seed: int = 0, n_queries: int = 300, n_items: int = 10, sessions: float = 1e5):
    g = torch.Generator().manual_seed(seed)
    rel = (torch.rand(n_queries, n_items, generator=g, dtype=torch.float64) < 0.3).double()
    rel = rel[rel.sum(1) > 0]  # queries without a relevant item are dropped
    logger = rel + torch.randn(rel.shape, generator=g, dtype=torch.float64)
    new = rel + 0.5 * torch.randn(rel.shape, generator=g, dtype=torch.float64)
    positions = logger.argsort(-1, descending=True).argsort(-1) + 1  # deterministic logger, full list shown
    rho = 1.0 / positions.double()  # PBM, eta = 1; noise-free clicks: gamma = rel
    counts = torch.binomial(torch.full_like(rho, sessions), rho * rel, generator=g)
    return rel, logger, new, positions, counts / sessions, g


def test_simulation_aggregated_ips_converges_and_naive_does_not():
    rel, logger, new, positions, ctr, _ = _simulated_click_counts()
    assert rel.shape[0] > 280
    results = {}
    for name, scores in (("new", new), ("logger", logger)):
        # the truth from an independent implementation (scikit-learn) on the true gamma
        true_ndcg = ndcg_score(rel.numpy(), scores.numpy(), k=5)
        true_dcg = dcg_score(rel.numpy(), scores.numpy(), k=5)
        ips = F.position_debiased_ndcg(scores, ctr, 5, logged_positions=positions, eta=1.0).item()
        naive = F.position_debiased_ndcg(scores, ctr, 5, logged_positions=positions, eta=0.0).item()
        ips_dcg = F.position_debiased_dcg(scores, ctr, 5, logged_positions=positions, eta=1.0).item()
        naive_dcg = F.position_debiased_dcg(scores, ctr, 5, logged_positions=positions, eta=0.0).item()
        results[name] = (true_ndcg, ips, naive)
        assert abs(ips - true_ndcg) < 0.005, (name, ips, true_ndcg)
        assert abs(naive - true_ndcg) > 0.05, (name, naive, true_ndcg)
        assert abs(ips_dcg - true_dcg) / true_dcg < 0.005, (name, ips_dcg, true_dcg)
        assert abs(naive_dcg - true_dcg) / true_dcg > 0.30, (name, naive_dcg, true_dcg)
    (t_new, ips_new, naive_new), (t_log, ips_log, naive_log) = results["new"], results["logger"]
    assert t_new > t_log and ips_new > ips_log  # IPS orders the rankers as the truth does
    assert naive_new < naive_log  # naive click nDCG gets the order wrong


def test_simulation_per_session_normalisation_does_not_converge():
    """Normalising each session and averaging is biased (docs, warning 2); aggregating is not."""
    rel, _, new, positions, _, g = _simulated_click_counts(n_queries=100)
    sessions = 200
    rho = 1.0 / positions.double()
    clicks = torch.bernoulli((rho * rel).unsqueeze(1).expand(-1, sessions, -1), generator=g)
    true = ndcg_score(rel.numpy(), new.numpy(), k=5)
    flat = dict(logged_positions=positions.unsqueeze(1).expand_as(clicks).reshape(-1, rel.shape[1]), eta=1.0)
    per_session = F.position_debiased_ndcg(
        new.unsqueeze(1).expand_as(clicks).reshape(-1, rel.shape[1]), clicks.reshape(-1, rel.shape[1]), 5, **flat
    )
    aggregated = F.position_debiased_ndcg(new, clicks.sum(1), 5, logged_positions=positions, eta=1.0)
    assert abs(per_session.item() - true) > 0.1
    assert abs(aggregated.item() - true) < abs(per_session.item() - true) / 3
