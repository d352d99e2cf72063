"""PositionProfile: hand-computed profiles (padding, positions beyond the lists, ties, the ideal),
brute-force enumeration of tie orders, sklearn's DCG, flat input, per-query rows, compile, errors."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from sklearn.metrics import dcg_score

from tests.oracles import random_batch
from torch_rankeval import PositionProfile
from torch_rankeval.metrics.position_profile import PROFILE_STATS

NAN = float("nan")
D = [1 / math.log2(p + 1) for p in range(1, 6)]  # discounts of ranks 1..5

# Query A: a tie between grades 2 and 0 at ranks 2-3; query B: 2 documents + padding; query C: all padding.
PREDS = torch.tensor([[0.9, 0.5, 0.5, 0.1], [0.2, 0.8, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
TARGET = torch.tensor([[1, 2, 0, 3], [0, 2, 9, 9], [0, 0, 0, 0]])
MASK = torch.tensor([[True, True, True, True], [True, True, False, False], [False, False, False, False]])


def _close(actual: torch.Tensor, expected: list[float]) -> None:
    torch.testing.assert_close(
        actual.double(), torch.tensor(expected, dtype=torch.float64), equal_nan=True, atol=1e-6, rtol=0
    )


def test_hand_computed_profile_with_padding_ties_and_positions_beyond_the_lists():
    m = PositionProfile(positions=5)  # exp2 gain, averaged ties
    m.update(PREDS, TARGET, mask=MASK)
    out = m.compute()
    # A ranked: 1, {2, 0} tied, 3   -> expected grades 1, 1, 1, 3; B ranked: 2, 0; C: nothing.
    assert out["n_queries"].item() == 3
    assert out["count"].tolist() == [2, 2, 1, 1, 0]
    _close(out["relevance"], [(1 + 2) / 2, (1 + 0) / 2, 1, 3, NAN])
    # exp2 gains: A 1, 1.5, 1.5, 7 (the tie spreads (3 + 0) / 2); B 3, 0
    _close(out["gain"], [(1 + 3) / 2, (1.5 + 0) / 2, 1.5, 7, NAN])
    _close(out["relevant_share"], [1, (0.5 + 0) / 2, 0.5, 1, NAN])
    _close(out["dcg_contribution"], [2 * D[0], 0.75 * D[1], 1.5 * D[2], 7 * D[3], NAN])
    # the ideal from the lists themselves: A 3, 2, 1, 0; B 2, 0
    assert out["ideal_count"].tolist() == [2, 2, 1, 1, 0]
    _close(out["ideal_relevance"], [2.5, 1, 1, 0, NAN])
    _close(out["ideal_gain"], [(7 + 3) / 2, (3 + 0) / 2, 1, 0, NAN])
    _close(out["ideal_relevant_share"], [1, 0.5, 1, 0, NAN])
    _close(out["ideal_dcg_contribution"], [5 * D[0], 1.5 * D[1], 1 * D[2], 0, NAN])


def test_first_tie_policy_and_linear_gain_keep_the_input_order():
    m = PositionProfile(positions=4, ties="first", gain="linear", ideal=False)
    m.update(PREDS, TARGET, mask=MASK)
    out = m.compute()
    assert "ideal_relevance" not in out
    _close(out["relevance"], [1.5, (2 + 0) / 2, 0, 3])  # A: 1, 2, 0, 3 as given
    _close(out["gain"], [1.5, 1, 0, 3])
    _close(out["dcg_contribution"], [1.5 * D[0], 1 * D[1], 0, 3 * D[3]])


def test_ideal_profile_from_ideal_target_counts_only_judged_entries():
    # A has a judged grade-2 document the ranking missed; C was not retrieved at all but has one judged doc.
    ideal = torch.tensor([[3, 2, 1, 0, 2, -1], [2, 0, -1, -1, -1, -1], [1, -1, -1, -1, -1, -1]])
    m = PositionProfile(positions=5, gain="linear", ignore_index=-1)
    m.update(PREDS, TARGET, mask=MASK, ideal_target=ideal)
    out = m.compute()
    # ideal orders: A 3, 2, 2, 1, 0; B 2, 0; C 1
    assert out["ideal_count"].tolist() == [3, 2, 1, 1, 1]
    _close(out["ideal_relevance"], [(3 + 2 + 1) / 3, (2 + 0) / 2, 2, 1, 0])
    _close(out["ideal_relevant_share"], [1, 0.5, 1, 1, 0])
    _close(out["ideal_dcg_contribution"], [2 * D[0], 1 * D[1], 2 * D[2], 1 * D[3], 0])
    _close(out["relevance"], [1.5, 0.5, 1, 3, NAN])  # the model side is unchanged


def test_expected_values_equal_brute_force_enumeration_of_tie_orders():
    g = torch.Generator().manual_seed(3)
    preds = torch.randint(0, 3, (6, 5), generator=g).double()  # heavy ties
    target = torch.randint(0, 4, (6, 5), generator=g)
    mask = torch.rand(6, 5, generator=g) > 0.2
    m = PositionProfile(positions=6, relevance_threshold=2)
    m.update(preds, target, mask=mask)
    out = m.compute()
    sums = {s: [0.0] * 6 for s in PROFILE_STATS}
    counts = [0] * 6
    for i in range(6):
        docs = [(float(preds[i, j]), int(target[i, j])) for j in range(5) if mask[i, j]]
        levels = sorted({s for s, _ in docs}, reverse=True)
        groups = [[grade for s, grade in docs if s == level] for level in levels]
        # every order of the documents that the scores allow: each tie group permuted independently
        orders = [
            [x for part in combo for x in part]
            for combo in itertools.product(*[list(itertools.permutations(gr)) for gr in groups])
        ]
        for p in range(len(docs)):
            grades = [o[p] for o in orders]
            counts[p] += 1
            sums["relevance"][p] += sum(grades) / len(grades)
            sums["gain"][p] += sum(2**x - 1 for x in grades) / len(grades)
            sums["relevant_share"][p] += sum(x >= 2 for x in grades) / len(grades)
            sums["dcg_contribution"][p] += sum((2**x - 1) / math.log2(p + 2) for x in grades) / len(grades)
    assert out["count"].tolist() == counts
    for s in PROFILE_STATS:
        _close(out[s], [sums[s][p] / counts[p] if counts[p] else NAN for p in range(6)])


def test_dcg_contributions_sum_to_sklearn_dcg_and_ideal_dcg():
    g = torch.Generator().manual_seed(5)
    preds = (torch.rand(20, 12, generator=g) * 4).round()  # ties, averaged as sklearn does
    target = torch.randint(0, 5, (20, 12), generator=g)
    for positions in (5, 12, 15):
        m = PositionProfile(positions=positions, gain="linear")
        m.update(preds, target)
        out = m.compute()
        n = out["n_queries"].item()
        dcg = (out["dcg_contribution"].double() * out["count"]).nansum().item() / n
        idcg = (out["ideal_dcg_contribution"].double() * out["ideal_count"]).nansum().item() / n
        assert dcg == pytest.approx(dcg_score(target.numpy(), preds.numpy(), k=positions), abs=1e-5)
        assert idcg == pytest.approx(dcg_score(target.numpy(), target.numpy(), k=positions), abs=1e-5)


def test_streaming_flat_and_padded_inputs_agree():
    preds, target, mask, _ = random_batch(30, 8, seed=4)
    whole = PositionProfile(positions=10)
    whole.update(preds, target, mask=mask)
    streamed = PositionProfile(positions=10)
    for a, b in ((0, 7), (7, 19), (19, 30)):
        streamed.update(preds[a:b], target[a:b], mask=mask[a:b])
    rows, cols = mask.nonzero(as_tuple=True)
    flat = PositionProfile(positions=10)
    half = rows.numel() // 2  # documents of one query arrive in two updates
    for part in (slice(0, half), slice(half, None)):
        flat.update(preds[rows[part], cols[part]], target[rows[part], cols[part]], indexes=rows[part] * 7 + 3)
    expected = whole.compute()
    for other in (streamed.compute(), flat.compute()):
        for key, value in expected.items():
            torch.testing.assert_close(other[key], value, equal_nan=True, atol=1e-6, rtol=0)


def test_per_query_rows_are_nan_where_absent_and_average_to_the_profile():
    m = PositionProfile(positions=5, keep_per_query=True)
    m.update(PREDS, TARGET, mask=MASK, indexes=torch.tensor([30, 10, 20]))
    rows = m.compute_per_query()
    assert rows["query_id"].tolist() == [10, 20, 30]
    _close(rows["relevance"][0], [2, 0, NAN, NAN, NAN])  # query B
    assert rows["relevance"][1].isnan().all()  # query C: all padding
    _close(rows["relevance"][2], [1, 1, 1, 3, NAN])  # query A, tie averaged
    _close(rows["ideal_relevance"][2], [3, 2, 1, 0, NAN])
    out = m.compute()
    for s in PROFILE_STATS:
        _close(rows[s].nanmean(0)[:4], out[s][:4].tolist())


@pytest.mark.filterwarnings("ignore:The ``compute`` method")  # torchmetrics' own notice
def test_no_update_warns_and_returns_nan():
    with pytest.warns(UserWarning, match="no query"):
        out = PositionProfile(positions=3).compute()
    assert out["relevance"].isnan().all() and out["n_queries"].item() == 0 and out["count"].tolist() == [0, 0, 0]


def test_forward_returns_the_batch_profile_and_accumulates():
    m = PositionProfile(positions=2, gain="linear", ideal=False)
    first = m(torch.tensor([[0.9, 0.1]]), torch.tensor([[0, 1]]))
    m(torch.tensor([[0.9, 0.1]]), torch.tensor([[2, 1]]))
    _close(first["relevance"], [0, 1])
    _close(m.compute()["relevance"], [1, 1])


def test_update_compiles_fullgraph_without_validation():
    torch._dynamo.reset()
    preds, target, mask, ideal = random_batch(16, 12, seed=9, extra_judged=3)
    preds = preds.float()
    metric = PositionProfile(positions=15, validate_args=False)
    compiled = torch.compile(metric.update, fullgraph=True, backend="inductor")
    compiled(preds, target, mask=mask, ideal_target=ideal)
    reference = PositionProfile(positions=15)
    reference.update(preds, target, mask=mask, ideal_target=ideal)
    for key, value in reference.compute().items():
        torch.testing.assert_close(metric.compute()[key], value, equal_nan=True)


@pytest.mark.parametrize(
    "make, call, exc, match",
    [
        (lambda: PositionProfile(positions=0), None, ValueError, "positions must be a positive int"),
        (lambda: PositionProfile(positions=2.5), None, ValueError, "positions must be a positive int"),
        (lambda: PositionProfile(ideal="yes"), None, TypeError, "ideal must be a bool"),
        (
            PositionProfile,
            lambda m: m.update(torch.tensor([[0.1, float("nan")]]), torch.tensor([[1, 0]])),
            ValueError,
            "NaN",
        ),
        (
            PositionProfile,
            lambda m: m.update(torch.rand(2, 3), torch.tensor([[1, -2, 0], [0, 0, 0]])),
            ValueError,
            "negative grades",
        ),
        (
            PositionProfile,
            lambda m: m.update(torch.rand(2, 3), torch.zeros(2, 3), ideal_target=torch.zeros(3, 4)),
            ValueError,
            "ideal_target must have shape",
        ),
        (
            PositionProfile,
            lambda m: m.update(torch.rand(2, 3), torch.zeros(2, 3), n_relevant=torch.ones(2)),
            TypeError,
            "n_relevant",
        ),
        (PositionProfile, lambda m: m.compute_per_query(), ValueError, "keep_per_query=True"),
    ],
)
def test_bad_input_names_the_argument(make, call, exc, match):
    with pytest.raises(exc, match=match):
        m = make()
        call(m)
