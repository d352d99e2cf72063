"""Propensity helpers: hand examples, recovery of a known eta from simulated logs (shared/debias.md
section 7), an independent loop implementation of the PBM EM updates, and input validation."""

from __future__ import annotations

import math

import pytest
import torch

from torch_rankeval.propensity import fit_eta, pbm_em, pbm_propensity, relative_propensity_from_randomized


def test_pbm_propensity_is_a_power_law():
    pos = torch.tensor([1, 2, 3, 10])
    assert pbm_propensity(pos, 1.0).tolist() == pytest.approx([1, 1 / 2, 1 / 3, 1 / 10])
    assert pbm_propensity(pos, 0.0).tolist() == [1.0, 1.0, 1.0, 1.0]
    assert pbm_propensity(pos.double(), 0.5).dtype == torch.float64
    assert pbm_propensity(pos.double(), 0.5).tolist() == pytest.approx(
        [1 / math.sqrt(p) for p in (1, 2, 3, 10)], abs=1e-15
    )


def test_fit_eta_recovers_exact_power_laws():
    k = torch.arange(1, 11, dtype=torch.float64)
    for eta in (0.0, 0.5, 1.0, 1.7):
        assert fit_eta(k**-eta) == pytest.approx(eta, abs=1e-12)
    # least squares through the origin on log r = -eta log k, written out for two positions
    r = torch.tensor([1.0, 0.4, 0.3])
    want = -(math.log(2) * math.log(0.4) + math.log(3) * math.log(0.3)) / (math.log(2) ** 2 + math.log(3) ** 2)
    assert fit_eta(r) == pytest.approx(want, rel=1e-6)


def test_randomized_ctr_ratio_by_hand():
    # 3 positions; position 1 shown 3 times with 3 clicks, position 2: 3 shown, 1 click; position 3: 3 shown, 0 clicks
    clicks = torch.tensor([[1, 0, 0], [0, 1, 0], [1, 0, 1]])
    positions = torch.tensor([[1, 2, 3], [3, 1, 2], [2, 3, 1]])
    assert relative_propensity_from_randomized(clicks, positions, 3).tolist() == pytest.approx([1.0, 1 / 3, 0.0])
    # masked rows do not count as impressions
    mask = torch.tensor([[True, True, True], [True, True, True], [True, True, False]])
    # position 1 now: 2 shown, 2 clicks; position 2: 3 shown, 1 click
    assert relative_propensity_from_randomized(clicks, positions, 3, mask=mask).tolist() == pytest.approx(
        [1.0, 1 / 3, 0.0]
    )
    mask2 = torch.tensor([[True, False, True], [True, True, True], [True, True, True]])
    # position 2 now: 2 shown, 1 click -> CTR 0.5
    assert relative_propensity_from_randomized(clicks, positions, 3, mask=mask2).tolist() == pytest.approx(
        [1.0, 0.5, 0.0]
    )


def test_randtop_n_logs_recover_eta():
    """RandTop-10: 200 queries x 500 sessions, the top 10 shuffled uniformly; true rho(k) = 1/k."""
    g = torch.Generator().manual_seed(0)
    gamma = (torch.rand(200, 1, 10, generator=g) < 0.3).float() * 0.8 + 0.1
    positions = torch.rand(200, 500, 10, generator=g).argsort(-1) + 1  # a uniform permutation per session
    clicks = torch.bernoulli(gamma / positions, generator=g)
    ratio = relative_propensity_from_randomized(clicks, positions, 10)
    truth = 1 / torch.arange(1.0, 11)
    assert (ratio - truth).abs().max().item() < 0.03
    assert abs(fit_eta(ratio) - 1.0) < 0.03


def _plackett_luce_logs(seed: int = 0, n_queries: int = 300, sessions: int = 300, n: int = 10, eta: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 5, (n_queries, 1, n), generator=g).double()
    gamma = (2**labels - 1) / 15
    score = labels + torch.randn(n_queries, 1, n, generator=g, dtype=torch.float64)
    gumbel = -torch.log(-torch.log(torch.rand(n_queries, sessions, n, generator=g, dtype=torch.float64)))
    positions = (score + gumbel).argsort(-1, descending=True).argsort(-1) + 1  # Plackett-Luce sample per session
    clicks = torch.bernoulli(positions.double() ** -eta * gamma, generator=g)
    return positions, clicks


def _cells(positions: torch.Tensor, clicks: torch.Tensor):
    """(item, position) cells of the log: item = query * n + document."""
    n_queries, _, n = positions.shape
    item = (torch.arange(n_queries).view(-1, 1, 1) * n + torch.arange(n).view(1, 1, -1)).expand_as(positions)
    cell = (item * n + positions - 1).reshape(-1)
    shown = torch.bincount(cell, minlength=n_queries * n * n).double()
    clicked = torch.bincount(cell, weights=clicks.reshape(-1).double(), minlength=n_queries * n * n)
    rows = torch.nonzero(shown > 0).reshape(-1)
    return rows // n, rows % n + 1, clicked[rows], shown[rows], n_queries * n, n


def test_pbm_em_recovers_eta_from_plackett_luce_logs():
    positions, clicks = _plackett_luce_logs()
    items, pos, clicked, shown, n_items, n = _cells(positions, clicks)
    theta, gamma = pbm_em(items, pos, clicked, shown, num_items=n_items, num_positions=n)
    truth = 1 / torch.arange(1.0, n + 1, dtype=torch.float64)
    assert theta[0].item() == 1.0
    assert (theta - truth).abs().max().item() < 0.03
    assert abs(fit_eta(theta) - 1.0) < 0.03
    # the fitted click probabilities theta * gamma match the observed CTR per cell on average
    fitted = theta[pos - 1] * gamma[items]
    assert ((fitted * shown).sum() / clicked.sum()).item() == pytest.approx(1.0, abs=0.01)


def test_naive_ctr_ratio_on_logs_that_were_not_randomised_is_confounded():
    """Why the library offers no plain CTR-ratio estimator: on the same Plackett-Luce logs, where
    EM recovers eta = 1, CTR(k) / CTR(1) overstates the position bias (the logger puts relevant
    items on top)."""
    positions, clicks = _plackett_luce_logs()
    confounded = relative_propensity_from_randomized(clicks, positions, 10)  # misuse on purpose
    assert fit_eta(confounded) > 1.3


def _em_by_loops(items, pos, clicks, shown, num_items, num_positions, iters):
    """The PBM EM updates written out with Python loops over rows (independent of the vectorised code)."""
    theta, gamma = [0.5] * num_positions, [0.5] * num_items
    rows = list(zip(items.tolist(), pos.tolist(), clicks.tolist(), shown.tolist()))
    for _ in range(iters):
        exam_sum, exam_n = [0.0] * num_positions, [0.0] * num_positions
        rel_sum, rel_n = [0.0] * num_items, [0.0] * num_items
        for i, p, c, n in rows:
            t, g = theta[p - 1], gamma[i]
            none = n - c
            exam_sum[p - 1] += c + none * t * (1 - g) / (1 - t * g)
            exam_n[p - 1] += n
            rel_sum[i] += c + none * (1 - t) * g / (1 - t * g)
            rel_n[i] += n
        theta = [s / m for s, m in zip(exam_sum, exam_n)]
        gamma = [s / m for s, m in zip(rel_sum, rel_n)]
    return [t / theta[0] for t in theta], [g * theta[0] for g in gamma]


def test_pbm_em_matches_the_updates_written_out():
    g = torch.Generator().manual_seed(1)
    items = torch.randint(0, 6, (40,), generator=g)
    pos = torch.randint(1, 5, (40,), generator=g)
    shown = torch.randint(1, 30, (40,), generator=g)
    clicks = (shown.double() * torch.rand(40, generator=g, dtype=torch.float64) * 0.6).floor().long()
    theta, gamma = pbm_em(items, pos, clicks, shown, num_items=6, num_positions=4, iters=25)
    want_theta, want_gamma = _em_by_loops(items, pos, clicks, shown, 6, 4, 25)
    assert theta.tolist() == pytest.approx(want_theta, abs=1e-6)
    assert gamma.tolist() == pytest.approx(want_gamma, abs=1e-6)


def test_pbm_em_one_impression_per_row_and_unshown_entries():
    # impressions=None: each row is one impression with a 0/1 click
    items = torch.tensor([0, 0, 1, 1, 0, 1])
    pos = torch.tensor([1, 2, 1, 2, 1, 2])
    clicks = torch.tensor([1, 0, 1, 1, 1, 0])
    theta, gamma = pbm_em(items, pos, clicks, num_items=3, num_positions=3, iters=50, validate_args=True)
    agg_theta, agg_gamma = pbm_em(
        torch.tensor([0, 0, 1, 1]),
        torch.tensor([1, 2, 1, 2]),
        torch.tensor([2, 0, 1, 1]),
        torch.tensor([2, 1, 1, 2]),
        num_items=3,
        num_positions=3,
        iters=50,
    )
    torch.testing.assert_close(theta, agg_theta, equal_nan=True)
    torch.testing.assert_close(gamma, agg_gamma, equal_nan=True)
    assert math.isnan(theta[2].item()) and math.isnan(gamma[2].item())  # never shown: not identified


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda: pbm_propensity(torch.tensor([0, 1]), 1.0), ValueError, "1-based"),
        (lambda: pbm_propensity(torch.tensor([1.5, 2.0]), 1.0), ValueError, "1-based"),
        (lambda: pbm_propensity(torch.tensor([1, 2]), -0.5), ValueError, "eta must be finite and >= 0"),
        (lambda: pbm_propensity(torch.tensor([1, 2]), float("nan")), ValueError, "eta must be finite"),
        (lambda: pbm_propensity([1, 2], 1.0), TypeError, "logged_positions must be a torch.Tensor"),
        (lambda: fit_eta(torch.tensor([1.0, 0.5, 0.0])), ValueError, "must be finite and > 0"),
        (lambda: fit_eta(torch.tensor([1.0])), ValueError, "at least 2 positions"),
        (lambda: fit_eta(torch.tensor([[1.0, 0.5]])), ValueError, "1-D"),
        (
            lambda: relative_propensity_from_randomized(torch.tensor([1, 0]), torch.tensor([1, 3]), 3),
            ValueError,
            r"positions \[2\] were never shown",
        ),
        (
            lambda: relative_propensity_from_randomized(torch.tensor([0, 1]), torch.tensor([1, 2]), 2),
            ValueError,
            "position 1 has no clicks",
        ),
        (
            lambda: relative_propensity_from_randomized(torch.tensor([1, 1]), torch.tensor([1, 4]), 3),
            ValueError,
            "1..num_positions=3",
        ),
        (
            lambda: relative_propensity_from_randomized(torch.tensor([1, 1]), torch.tensor([0, 1]), 3),
            ValueError,
            "1-based",
        ),
        (
            lambda: relative_propensity_from_randomized(torch.tensor([1, -1]), torch.tensor([1, 2]), 2),
            ValueError,
            "clicks must be finite",
        ),
        (
            lambda: relative_propensity_from_randomized(torch.tensor([1, 1]), torch.tensor([1, 2, 3]), 3),
            ValueError,
            "positions must have the shape",
        ),
        (
            lambda: relative_propensity_from_randomized(torch.tensor([1, 1]), torch.tensor([1, 2]), 0),
            ValueError,
            "num_positions must be a positive int",
        ),
        (
            lambda: pbm_em(
                torch.tensor([0, 5]), torch.tensor([1, 2]), torch.tensor([1, 0]), num_items=2, num_positions=2
            ),
            ValueError,
            "item_ids must be in",
        ),
        (
            lambda: pbm_em(
                torch.tensor([0, 1]), torch.tensor([1, 3]), torch.tensor([1, 0]), num_items=2, num_positions=2
            ),
            ValueError,
            "1..num_positions=2",
        ),
        (
            lambda: pbm_em(
                torch.tensor([0, 1]),
                torch.tensor([1, 2]),
                torch.tensor([3, 0]),
                torch.tensor([2, 2]),
                num_items=2,
                num_positions=2,
            ),
            ValueError,
            "0 <= clicks <= impressions",
        ),
        (
            lambda: pbm_em(
                torch.tensor([0, 1]), torch.tensor([2, 2]), torch.tensor([1, 0]), num_items=2, num_positions=2
            ),
            ValueError,
            "position 1 has no impressions",
        ),
        (
            lambda: pbm_em(
                torch.tensor([0, 1]), torch.tensor([1, 2]), torch.tensor([1, 0]), num_items=2, num_positions=2, iters=0
            ),
            ValueError,
            "iters must be",
        ),
        (
            lambda: pbm_em(
                torch.tensor([0.0, 1.0]), torch.tensor([1, 2]), torch.tensor([1, 0]), num_items=2, num_positions=2
            ),
            TypeError,
            "item_ids must be an integer",
        ),
    ],
)
def test_bad_input_raises_a_clear_error(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
