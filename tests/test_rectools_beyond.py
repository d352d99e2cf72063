"""RecTools' beyond-accuracy definitions (issue 28) and the shared input stage of the full-catalogue
metrics (issue 26, item 3).

Expected values are transcribed from RecTools' own tests (MobileTeleSystems/RecTools, ``tests/metrics/``),
each test naming its file and test; RecTools is not installed here. RecTools' tables
(``reco``: user, item, rank; ``interactions``: user, item) become full-catalogue rows: the recommended
items of a user score by rank and every other item is excluded, so each list holds exactly RecTools'
items (lists of unequal length included). Tie-averaged values are checked against the mean over
every order of the tied items of the definitions written out below (``_arp``, ``_miuf``, ``_ild``,
``_serendipity``: RecTools' formulas, per user).
"""

from __future__ import annotations

import itertools
import math
import pickle

import pytest
import torch
import torch.distributed as dist

from tests.distributed_helpers import spawn
from torch_rankeval import RankingMetrics
from torch_rankeval.metrics import (
    AvgRecPopularity,
    IntraListDiversity,
    ItemExposure,
    MeanInvUserFreq,
    Novelty,
    PopularityRankSerendipity,
    Serendipity,
    Unexpectedness,
)
from torch_rankeval.metrics.beyond import hamming_distances, interaction_counts

ITEM = {"i1": 0, "i2": 1, "i3": 2, "i4": 3}
LOG3 = math.log2(3)


def _rows(reco: list[tuple[str, str, int]], num_items: int = 4) -> tuple[list[str], torch.Tensor, torch.Tensor]:
    """RecTools' reco table -> (users, scores (N, num_items), exclude): rank r scores num_items + 1 - r."""
    users = list(dict.fromkeys(u for u, _, _ in reco))
    preds = torch.zeros(len(users), num_items, dtype=torch.float64)
    exclude = torch.ones(len(users), num_items, dtype=torch.bool)
    for user, item, rank in reco:
        preds[users.index(user), ITEM[item]] = num_items + 1 - rank
        exclude[users.index(user), ITEM[item]] = False
    return users, preds, exclude


def _counts(interactions: list[tuple[str, str]], *, distinct_users: bool = False) -> tuple[torch.Tensor, int]:
    users = sorted({u for u, _ in interactions})
    u = torch.tensor([users.index(x) for x, _ in interactions], dtype=torch.long)
    i = torch.tensor([ITEM[x] for _, x in interactions], dtype=torch.long)
    return interaction_counts(u, i, 4, distinct_users=distinct_users)


def _per_user(make, preds, exclude, *extra) -> list[float]:
    """Each row through a fresh metric: the per-user values RecTools' ``calc_per_user`` returns."""
    out = []
    for r in range(preds.shape[0]):
        metric = make()
        metric.update(preds[r : r + 1], *(x[r : r + 1] for x in extra), exclude=exclude[r : r + 1])
        out.append(next(iter(metric.compute().values())).item() if metric.users > 0 else math.nan)
    return out


def _mean(make, preds, exclude, *extra) -> float:
    metric = make()
    metric.update(preds, *extra, exclude=exclude)
    return next(iter(metric.compute().values())).item()


def _approx(values: list[float], want: list[float]) -> None:
    assert len(values) == len(want)
    for v, w in zip(values, want):
        assert (math.isnan(v) and math.isnan(w)) or v == pytest.approx(w, rel=1e-6, abs=1e-9), (values, want)


# ---------------------------------------------------------------------------------------- AvgRecPopularity
ARP_INTERACTIONS = [("u1", "i1"), ("u1", "i2"), ("u2", "i1"), ("u2", "i3"), ("u3", "i1"), ("u3", "i2")]
ARP_RECO = [("u1", "i1", 1), ("u1", "i2", 2), ("u2", "i3", 1), ("u2", "i1", 2), ("u2", "i2", 3), ("u3", "i3", 1),
            ("u3", "i2", 2)]  # fmt: skip


@pytest.mark.parametrize(
    ("k", "normalize", "expected"),
    [
        (1, False, [3.0, 1.0, 1.0]),
        (3, False, [2.5, 2.0, 1.5]),
        (1, True, [0.5, 1 / 6, 1 / 6]),
        (3, True, [5 / 12, 1 / 3, 0.25]),
    ],
)
def test_avg_rec_popularity_rectools_correct_arp_values(k, normalize, expected):
    """tests/metrics/test_popularity.py::TestAvgRecPopularity::test_correct_arp_values"""
    popularity, _ = _counts(ARP_INTERACTIONS)
    _, preds, exclude = _rows(ARP_RECO)

    def make():
        return AvgRecPopularity(4, k, popularity, normalize=normalize)

    _approx(_per_user(make, preds, exclude), expected)
    assert _mean(make, preds, exclude) == pytest.approx(sum(expected) / 3)


def test_avg_rec_popularity_rectools_when_no_interactions():
    """tests/metrics/test_popularity.py::TestAvgRecPopularity::test_when_no_interactions (k=2: 0 for every user)"""
    _, preds, exclude = _rows(ARP_RECO)
    for normalize in (False, True):
        assert _mean(lambda: AvgRecPopularity(4, 2, torch.zeros(4), normalize=normalize), preds, exclude) == 0.0


@pytest.mark.parametrize(("k", "expected"), [(1, [3.0, 1.0, 1.0]), (3, [2.5, 4 / 3, 1.5])])
def test_avg_rec_popularity_rectools_when_new_item_in_reco(k, expected):
    """tests/metrics/test_popularity.py::TestAvgRecPopularity::test_when_new_item_in_reco (i4: no interaction)"""
    popularity, _ = _counts(ARP_INTERACTIONS)
    reco = [("u1", "i1", 1), ("u1", "i2", 2), ("u2", "i3", 1), ("u2", "i1", 2), ("u2", "i4", 3), ("u3", "i3", 1),
            ("u3", "i2", 2)]  # fmt: skip
    _, preds, exclude = _rows(reco)
    _approx(_per_user(lambda: AvgRecPopularity(4, k, popularity), preds, exclude), expected)


def test_avg_rec_popularity_counts_every_duplicate_interaction():
    """RecTools' ``value_counts()`` counts a repeated interaction again: u1 saw i1 three times, so i1's
    popularity is 4 (written out: (4 + 1) / 2 for u1's list i1, i2)."""
    interactions = [("u1", "i1"), ("u1", "i1"), ("u1", "i1"), ("u2", "i1"), ("u2", "i2")]
    counts, users = _counts(interactions)
    assert counts.tolist() == [4.0, 1.0, 0.0, 0.0] and users == 2
    _, preds, exclude = _rows([("u1", "i1", 1), ("u1", "i2", 2)])
    assert _mean(lambda: AvgRecPopularity(4, 2, counts), preds, exclude) == 2.5
    assert _mean(lambda: AvgRecPopularity(4, 2, counts, normalize=True), preds, exclude) == pytest.approx(0.5)
    distinct, _ = _counts(interactions, distinct_users=True)  # MeanInvUserFreq's count: users, not interactions
    assert distinct.tolist() == [2.0, 1.0, 0.0, 0.0]


def test_arp_differs_from_item_exposure_slot_mean_on_unequal_lists():
    """ItemExposure's popularity@k weighs every slot, AvgRecPopularity every user: (3 + 2) / 2 and 1 -> 1.75
    per user, but (3 + 2 + 1) / 3 = 2 per slot."""
    popularity = torch.tensor([3.0, 2.0, 1.0, 0.0])
    _, preds, exclude = _rows([("u1", "i1", 1), ("u1", "i2", 2), ("u2", "i3", 1)])
    assert _mean(lambda: AvgRecPopularity(4, 2, popularity), preds, exclude) == 1.75
    exposure = ItemExposure(4, 2, popularity=popularity)
    exposure.update(preds, exclude)
    assert exposure.compute()["popularity@2"].item() == 2.0


# ---------------------------------------------------------------------------------------- MeanInvUserFreq
@pytest.mark.parametrize(("k", "expected"), [(1, [LOG3, LOG3, 0.0]), (2, [LOG3, LOG3, LOG3 / 2])])
def test_mean_inv_user_freq_rectools_correct_miuf_values(k, expected):
    """tests/metrics/test_novelty.py::TestMeanInvUserFreq::test_correct_miuf_values (i3: cold, one user)"""
    interactions = [("u1", "i1"), ("u1", "i2"), ("u2", "i1"), ("u3", "i1")]
    users_per_item, num_users = _counts(interactions, distinct_users=True)
    _, preds, exclude = _rows([("u1", "i3", 1), ("u2", "i2", 1), ("u2", "i3", 2), ("u3", "i1", 1), ("u3", "i2", 2)])

    def make():
        return MeanInvUserFreq(4, k, users_per_item, num_users)

    _approx(_per_user(make, preds, exclude), expected)
    assert _mean(make, preds, exclude) == pytest.approx(sum(expected) / 3)
    # the same as Novelty with RecTools' options spelt out
    novelty = Novelty(4, k, users_per_item, num_users=num_users, average="users", cold_items="one_user")
    novelty.update(preds, exclude)
    assert novelty.compute()[f"novelty@{k}"].item() == pytest.approx(sum(expected) / 3)


def test_mean_inv_user_freq_rectools_docstring_example():
    """rectools/metrics/novelty.py, MeanInvUserFreq's docstring: k=1 -> [1.585, 1.585, 0], k=3 -> [.., .., 0.792]"""
    global ITEM
    interactions = [("1", "1"), ("1", "2"), ("2", "1"), ("3", "1")]
    saved, ITEM = ITEM, {"1": 0, "2": 1, "3": 2, "4": 3}
    try:
        users_per_item, num_users = _counts(interactions, distinct_users=True)
        _, preds, exclude = _rows([("1", "3", 1), ("2", "2", 1), ("2", "3", 2), ("3", "1", 1), ("3", "2", 2)])
    finally:
        ITEM = saved
    got1 = _per_user(lambda: MeanInvUserFreq(4, 1, users_per_item, num_users), preds, exclude)
    got3 = _per_user(lambda: MeanInvUserFreq(4, 3, users_per_item, num_users), preds, exclude)
    _approx(got1, [1.5849625007211563, 1.5849625007211563, 0.0])
    _approx(got3, [1.5849625007211563, 1.5849625007211563, 0.7924812503605781])


def test_mean_inv_user_freq_checks():
    with pytest.raises(ValueError, match="popularity exceeds num_users=2"):
        MeanInvUserFreq(4, 2, torch.tensor([3.0, 0, 0, 0]), 2)
    with pytest.raises(ValueError, match="cold_items='one_user' needs num_users="):
        Novelty(4, 2, torch.ones(4), cold_items="one_user")
    with pytest.raises(ValueError, match="average='user' is not valid"):
        Novelty(4, 2, torch.ones(4), average="user")


# ---------------------------------------------------------------------------------------- IntraListDiversity
ILD_FEATURES = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 1.0], [math.nan, math.nan]])  # i4: no features


def _rectools_ild(num_items: int, k: int, distance: torch.Tensor, **kwargs) -> IntraListDiversity:
    return IntraListDiversity(num_items, k, distance=distance, one_item="zero", featureless="skip", **kwargs)


@pytest.mark.parametrize(
    ("k", "expected"), [(1, [0.0, 0.0, 0.0]), (2, [1.0, math.nan, 0.0]), (3, [4 / 3, math.nan, 0.0])]
)
def test_intra_list_diversity_rectools_correct_ild_values(k, expected):
    """tests/metrics/test_diversity.py::TestIntraListDiversity::test_correct_ild_values (Hamming distance;
    i4 has no features: u2's only pair has no distance, u2 is NaN and left out of the mean)"""
    distance = hamming_distances(ILD_FEATURES)
    _, preds, exclude = _rows([("u1", "i1", 1), ("u1", "i2", 2), ("u1", "i3", 3), ("u2", "i1", 1), ("u2", "i4", 2),
                               ("u3", "i1", 1)])  # fmt: skip
    values = _per_user(lambda: _rectools_ild(4, k, distance), preds, exclude)
    _approx(values, expected)
    known = [v for v in expected if not math.isnan(v)]
    assert _mean(lambda: _rectools_ild(4, k, distance), preds, exclude) == pytest.approx(sum(known) / len(known))


@pytest.mark.parametrize(("k", "expected"), [(1, [0.0, 0.0]), (2, [1.0, 0.0]), (3, [4 / 3, 0.0])])
def test_intra_list_diversity_rectools_docstring_example(k, expected):
    """rectools/metrics/diversity.py, IntraListDiversity's docstring (items 1..4, item 4 = item 1's features)"""
    distance = hamming_distances(torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]))
    _, preds, exclude = _rows([("1", "i1", 1), ("1", "i2", 2), ("1", "i3", 3), ("2", "i1", 1), ("2", "i4", 2)])
    _approx(_per_user(lambda: _rectools_ild(4, k, distance), preds, exclude), expected)


def test_intra_list_diversity_skips_the_pairs_of_featureless_items_as_pandas_mean_does():
    """A list i1, i2, i4 (i4 without features): RecTools' groupby mean skips the NaN pairs -> d(i1, i2) = 1."""
    distance = hamming_distances(ILD_FEATURES)
    _, preds, exclude = _rows([("u1", "i1", 1), ("u1", "i2", 2), ("u1", "i4", 3)])
    assert _mean(lambda: _rectools_ild(4, 3, distance), preds, exclude) == 1.0


def test_intra_list_diversity_defaults_stay_recommenders():
    """Defaults: a one-item list is left out; a NaN distance is an error naming the option; distance= is
    the mean distance (1 - similarity gives the similarity route's value)."""
    _, preds, exclude = _rows([("u1", "i1", 1), ("u1", "i2", 2), ("u1", "i3", 3), ("u3", "i1", 1)])
    distance = hamming_distances(ILD_FEATURES[:3].repeat(2, 1)[:4])  # i4 = i1's features: no NaN
    plain = IntraListDiversity(4, 3, distance=distance)
    plain.update(preds, exclude)
    assert plain.users.item() == 1 and plain.compute()["diversity@3"].item() == pytest.approx(4 / 3)
    similarity = IntraListDiversity(4, 3, similarity=1 - distance)
    similarity.update(preds, exclude)
    assert similarity.compute()["diversity@3"].item() == pytest.approx(4 / 3)
    with pytest.raises(ValueError, match="distance holds NaN .*featureless='skip'"):
        IntraListDiversity(4, 3, distance=hamming_distances(ILD_FEATURES))
    with pytest.raises(ValueError, match="featureless= reads the NaN rows of distance="):
        IntraListDiversity(4, 3, categories=torch.tensor([0, 1, 1, 0]), featureless="skip")
    with pytest.raises(ValueError, match="k=1: a list of one item has no pair"):
        IntraListDiversity(4, 1, categories=torch.tensor([0, 1, 1, 0]))
    with pytest.raises(ValueError, match="NaN outside whole rows and columns"):
        bad = torch.zeros(4, 4)
        bad[0, 1] = bad[1, 0] = math.nan
        IntraListDiversity(4, 2, distance=bad, featureless="skip")


# ---------------------------------------------------------------------------------------- Serendipity
SER_TRAIN = [("u1", "i1"), ("u1", "i2"), ("u2", "i1"), ("u2", "i2"), ("u3", "i1")]
SER_TEST = [("u1", "i1"), ("u1", "i2"), ("u2", "i2"), ("u2", "i3"), ("u3", "i2"), ("u4", "i2")]
SER_RECO = [("u1", "i1", 1), ("u1", "i2", 2), ("u2", "i2", 1), ("u2", "i3", 2), ("u3", "i3", 1), ("u4", "i2", 1),
            ("u4", "i3", 2)]  # fmt: skip


def _target(users: list[str], test: list[tuple[str, str]]) -> torch.Tensor:
    target = torch.zeros(len(users), 4)
    for user, item in test:
        if user in users:
            target[users.index(user), ITEM[item]] = 1
    return target


@pytest.mark.parametrize(("k", "expected"), [(1, [0.0, 0.25, 0.0, 0.25]), (2, [0.0, 0.5, 0.0, 0.125])])
def test_popularity_rank_serendipity_rectools_correct_serendipity_values(k, expected):
    """tests/metrics/test_serendipity.py::TestSerendipityCalculator::test_correct_serendipity_values
    (catalog i1..i4; the same numbers are the docstring example of rectools/metrics/serendipity.py)"""
    popularity, _ = _counts(SER_TRAIN)
    users, preds, exclude = _rows(SER_RECO)
    target = _target(users, SER_TEST)

    def make():
        return PopularityRankSerendipity(4, k, popularity)

    _approx(_per_user(make, preds, exclude, target), expected)
    assert _mean(make, preds, exclude, target) == pytest.approx(sum(expected) / 4)
    sparse = make()
    sparse.update(preds, target.to_sparse(), exclude=exclude.to_sparse())
    assert sparse.compute()[f"serendipity@{k}"].item() == pytest.approx(sum(expected) / 4)


def test_popularity_ranks_are_dense_ranks_of_the_counts():
    """RecTools' _get_item_popularity_ranks: the most popular count first, equal counts share a rank; no
    interaction: cold (rank n + 1, pu = 0)."""
    metric = PopularityRankSerendipity(5, 2, torch.tensor([2.0, 7.0, 2.0, 0.0, 5.0]))
    assert metric.popularity_rank.tolist() == [3.0, 1.0, 3.0, 6.0, 2.0]


# ---------------------------------------------------------------------------------------- ties: enumeration
def _orders(scores: list[float], allowed: list[int]) -> list[list[int]]:
    """Every ranking of the allowed items consistent with the scores (tied items in every order)."""
    out = []
    for perm in itertools.permutations(allowed):
        if all(scores[a] >= scores[b] for a, b in zip(perm, perm[1:])):
            out.append(list(perm))
    return out


def _arp(lst, pop):
    return sum(pop[i] for i in lst) / len(lst)


def _miuf(lst, upi, n_users):
    return sum(-math.log2(max(upi[i], 1) / n_users) for i in lst) / len(lst)


def _ser(lst, rel, rank, n):
    return sum(max((n + 1 - r) / n - (n + 1 - rank[i]) / n, 0) * rel[i] for r, i in enumerate(lst, 1)) / len(lst)


def _ild(lst, dist):
    """RecTools: 0 for one item; the mean over the pairs with a distance; None (NaN) without one."""
    if len(lst) < 2:
        return 0.0
    pairs = [dist[a][b] for a, b in itertools.combinations(lst, 2) if not math.isnan(dist[a][b])]
    return sum(pairs) / len(pairs) if pairs else None


def _tied_data(seed: int, n: int = 6, items: int = 7):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 3, (n, items), generator=g).double()
    exclude = torch.rand(n, items, generator=g) < 0.2
    exclude[0] = False
    exclude[1, 1:] = True  # one item only
    return scores, exclude


@pytest.mark.parametrize(("validate_args", "sparse"), [(True, False), (False, False), (True, True)])
def test_tie_averaged_values_against_enumeration(validate_args, sparse):
    k, items = 3, 7
    scores, exclude = _tied_data(seed=3)
    pop = torch.tensor([5.0, 0.0, 2.0, 2.0, 7.0, 1.0, 0.0])
    rel = (torch.rand(scores.shape, generator=torch.Generator().manual_seed(4)) < 0.5).double()
    dist = hamming_distances(torch.tensor([[0.0, 1], [1, 1], [math.nan, 0], [0, 0], [1, 0], [2, 1], [2, 2]]))
    ser = PopularityRankSerendipity(items, k, pop)
    metrics = {
        "arp": (
            lambda: AvgRecPopularity(items, k, pop, validate_args=validate_args),
            lambda lst, r: _arp(lst, pop.tolist()),
        ),
        "miuf": (
            lambda: MeanInvUserFreq(items, k, pop.clamp(max=5), 5, validate_args=validate_args),
            lambda lst, r: _miuf(lst, pop.clamp(max=5).tolist(), 5),
        ),
        "ser": (
            lambda: PopularityRankSerendipity(items, k, pop, validate_args=validate_args),
            lambda lst, r: _ser(lst, rel[r].tolist(), ser.popularity_rank.tolist(), items),
        ),
        "ild": (
            lambda: _rectools_ild(items, k, dist, validate_args=validate_args),
            lambda lst, r: _ild(lst, dist.tolist()),
        ),
    }
    for name, (make, oracle) in metrics.items():
        totals, counts = 0.0, 0.0
        for r in range(scores.shape[0]):
            allowed = [i for i in range(items) if not exclude[r, i]]
            values = [oracle(order[:k], r) for order in _orders(scores[r].tolist(), allowed)]
            defined = [v for v in values if v is not None]
            metric = make()
            args = (rel[r : r + 1],) if name == "ser" else ()
            skip = exclude[r : r + 1].to_sparse() if sparse else exclude[r : r + 1]
            metric.update(scores[r : r + 1], *(a.to_sparse() if sparse else a for a in args), exclude=skip)
            # the expected value over the orders where it is defined, counted by their share
            assert metric.users.item() == pytest.approx(len(defined) / len(values)), (name, r)
            assert metric.total.item() == pytest.approx(sum(defined) / len(values), abs=1e-12), (name, r)
            totals, counts = totals + metric.total.item(), counts + metric.users.item()
        batch = make()  # the whole batch in one update: the same sums
        args = (rel.to_sparse() if sparse else rel,) if name == "ser" else ()
        batch.update(scores, *args, exclude=exclude.to_sparse() if sparse else exclude)
        assert (batch.total.item(), batch.users.item()) == pytest.approx((totals, counts), abs=1e-12), name


# ---------------------------------------------------------------------------------------- the shared input stage
def _catalogue_metrics(num_items: int) -> dict[str, tuple]:
    cats = torch.arange(num_items) % 2
    pop = torch.arange(1.0, num_items + 1)
    return {
        "ItemExposure": (lambda: ItemExposure(num_items, 1), ()),
        "IntraListDiversity": (lambda: IntraListDiversity(num_items, 2, categories=cats), ()),
        "Novelty": (lambda: Novelty(num_items, 1, pop), ()),
        "AvgRecPopularity": (lambda: AvgRecPopularity(num_items, 1, pop), ()),
        "MeanInvUserFreq": (lambda: MeanInvUserFreq(num_items, 1, pop, num_items), ()),
        "Unexpectedness": (lambda: Unexpectedness(num_items, 1, categories=cats), ("history",)),
        "Serendipity": (lambda: Serendipity(num_items, 1, categories=cats), ("target", "history")),
        "PopularityRankSerendipity": (lambda: PopularityRankSerendipity(num_items, 1, pop), ("target",)),
    }


def _extra(names, shape):
    made = {"history": torch.ones(shape, dtype=torch.bool), "target": torch.ones(shape)}
    return [made[n] for n in names]


def _error(call) -> tuple[type, str]:
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    return info.type, str(info.value)


P3 = torch.tensor([[0.1, 0.2, 0.3]])
BAD_INPUTS = {
    "preds not a tensor": ([[0.1, 0.2, 0.3]], {}),
    "integer preds": (torch.tensor([[1, 2, 3]]), {}),
    "NaN preds": (torch.tensor([[0.1, math.nan, 0.3]]), {}),
    "integer mask": (P3, {"mask": torch.tensor([[1, 1, 0]])}),
    "mask of another shape": (P3, {"mask": torch.tensor([[True, False]])}),
    "mask not a tensor": (P3, {"mask": [[True, True, False]]}),
    "integer exclude": (P3, {"exclude": torch.tensor([[1, 0, 0]])}),
    "exclude of another shape": (P3, {"exclude": torch.tensor([[True, False]])}),
    "exclude not a tensor": (P3, {"exclude": [[True, False, False]]}),
    "float sparse exclude": (P3, {"exclude": torch.tensor([[1.0, 0.0, 0.0]]).to_sparse()}),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_catalogue_metrics_give_the_ranking_metrics_errors_for_the_same_bad_input(case):
    preds, options = BAD_INPUTS[case]
    want = _error(lambda: RankingMetrics(("ndcg",)).update(preds, torch.tensor([[1, 0, 0]]), **options))
    for name, (make, extra) in _catalogue_metrics(3).items():
        got = _error(lambda: make().update(preds, *_extra(extra, (1, 3)), **options))
        assert got == want, (name, got, want)


def test_catalogue_metrics_refuse_flat_input_and_padding_grades_with_a_type_error():
    for name, (make, extra) in _catalogue_metrics(3).items():
        with pytest.raises(TypeError, match=rf"{name}\.update takes no indexes=: .*no item identity"):
            make().update(torch.rand(3), *_extra(extra, (1, 3)), indexes=torch.zeros(3, dtype=torch.long))
    with pytest.raises(TypeError, match=r"ItemExposure does not take ignore_index= \(a full-catalogue metric"):
        ItemExposure(3, 1, ignore_index=-1)
    with pytest.raises(TypeError, match=r"Novelty does not take input_format=, whole_queries="):
        Novelty(3, 1, torch.ones(3), input_format="flat", whole_queries=True)
    with pytest.raises(TypeError, match=r"PopularityRankSerendipity\(\) got an unexpected keyword argument 'gains'"):
        PopularityRankSerendipity(3, 1, torch.ones(3), gains="linear")
    with pytest.raises(TypeError, match=r"AvgRecPopularity does not read gain="):
        AvgRecPopularity(3, 1, torch.ones(3), gain="linear")


def test_mask_is_padding_as_for_the_ranking_metrics():
    """mask=False items are never ranked (exclude=True gives the same values), a NaN score there is fine, and
    with validate_args=False no value check runs (as RankingMetrics)."""
    g = torch.Generator().manual_seed(0)
    preds = torch.rand(5, 6, generator=g)
    mask = torch.rand(5, 6, generator=g) > 0.3
    exclude = torch.rand(5, 6, generator=g) > 0.8
    both = exclude | ~mask
    for name, (make, extra) in _catalogue_metrics(6).items():
        a, b, c = make(), make(), make()
        a.update(preds, *_extra(extra, (5, 6)), exclude=exclude, mask=mask)
        b.update(preds, *_extra(extra, (5, 6)), exclude=both)
        c.update(preds, *_extra(extra, (5, 6)), exclude=exclude.to_sparse(), mask=mask)
        for key, value in b.compute().items():
            assert a.compute()[key].item() == pytest.approx(value.item(), nan_ok=True), (name, key)
            assert c.compute()[key].item() == pytest.approx(value.item(), nan_ok=True), (name, key)
        nan = torch.where(mask, preds, math.nan)
        d = make()
        d.update(nan, *_extra(extra, (5, 6)), exclude=exclude, mask=mask)
        for key, value in b.compute().items():
            assert d.compute()[key].item() == pytest.approx(value.item(), nan_ok=True), (name, key)


# ---------------------------------------------------------------------------------------- metric contract
def _new_metrics(validate_args: bool = True) -> dict:
    items, v = 7, validate_args
    pop = torch.tensor([5.0, 0.0, 2.0, 2.0, 7.0, 1.0, 0.0])
    distance = hamming_distances(torch.tensor([[0.0, 1], [1, 1], [math.nan, 0], [0, 0], [1, 0], [2, 1], [2, 2]]))
    return {
        "arp": AvgRecPopularity(items, 3, pop, validate_args=v),
        "miuf": MeanInvUserFreq(items, 3, pop.clamp(max=5), 5, validate_args=v),
        "ild": _rectools_ild(items, 3, distance, validate_args=v),
        "ser": PopularityRankSerendipity(items, 3, pop, validate_args=v),
    }


def _feed_new(metrics, scores, exclude, rel):
    for key, m in metrics.items():
        if key == "ser":
            m.update(scores, rel, exclude=exclude)
        else:
            m.update(scores, exclude=exclude)


def test_new_metrics_empty_update_pickle_merge_and_sum_states():
    scores, exclude = _tied_data(seed=5, n=8)
    rel = (torch.rand(scores.shape, generator=torch.Generator().manual_seed(6)) < 0.5).double()
    whole, a, b = _new_metrics(), _new_metrics(), _new_metrics()
    _feed_new(whole, scores, exclude, rel)
    _feed_new(a, scores[:0], exclude[:0], rel[:0])  # an empty update is a no-op
    assert all(m.users.item() == 0 and m.total.item() == 0 for m in a.values())
    _feed_new(a, scores[:3], exclude[:3], rel[:3])
    _feed_new(b, scores[3:], exclude[3:], rel[3:])
    for key in whole:
        assert {f.__name__ for f in whole[key]._reductions.values()} == {"dim_zero_sum"}  # summed across processes
        c = pickle.loads(pickle.dumps(a[key]))
        c.merge_state(b[key])
        for name, value in whole[key].compute().items():
            assert c.compute()[name].item() == pytest.approx(value.item(), rel=1e-9), (key, name)
    with pytest.raises(ValueError, match="different configuration"):
        AvgRecPopularity(7, 3, torch.ones(7), normalize=True).merge_state(AvgRecPopularity(7, 3, torch.ones(7)))


def _gloo_worker(rank, world, rdv, out):
    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=world)
    scores, exclude = _tied_data(seed=7, n=9)
    rel = (torch.rand(scores.shape, generator=torch.Generator().manual_seed(8)) < 0.5).double()
    metrics = _new_metrics()
    a, b = (0, 7) if rank == 0 else (7, 9)  # uneven shards
    _feed_new(metrics, scores[a:b], exclude[a:b], rel[a:b])
    torch.save({k: v.item() for m in metrics.values() for k, v in m.compute().items()}, f"{out}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


def test_new_metrics_sync_under_two_gloo_processes(tmp_path):
    out = tmp_path / "result"
    spawn(_gloo_worker, (2, str(tmp_path / "rdv"), str(out)), 2)
    scores, exclude = _tied_data(seed=7, n=9)
    rel = (torch.rand(scores.shape, generator=torch.Generator().manual_seed(8)) < 0.5).double()
    metrics = _new_metrics()
    _feed_new(metrics, scores, exclude, rel)
    want = {k: v.item() for m in metrics.values() for k, v in m.compute().items()}
    for rank in range(2):
        got = torch.load(f"{out}.{rank}")
        assert set(got) == set(want)
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=1e-9), (rank, key)


def test_new_metrics_have_no_host_sync_without_validation():
    from tests.sync_guard import HostSyncGuard

    scores, exclude = _tied_data(seed=9, n=8)
    rel = (torch.rand(scores.shape, generator=torch.Generator().manual_seed(10)) < 0.5).double()
    slow = _new_metrics()
    fast = _new_metrics(validate_args=False)
    with HostSyncGuard():
        _feed_new(fast, scores, exclude, rel)
        _feed_new(fast, scores, exclude.to_sparse(), rel.to_sparse())
    _feed_new(slow, scores, exclude, rel)
    _feed_new(slow, scores, exclude.to_sparse(), rel.to_sparse())
    for key in slow:
        for name, value in slow[key].compute().items():
            assert fast[key].compute()[name].item() == pytest.approx(value.item(), rel=1e-9), (key, name)


@pytest.mark.parametrize("name", ["arp", "ild", "ser"])
def test_new_metrics_update_compiles_fullgraph(name):
    """Unvalidated updates trace with fullgraph=True (no host sync, no data-dependent shape) and equal the
    validated eager metric, tie groups spilling past the cutoff."""
    torch._dynamo.reset()
    scores, exclude = _tied_data(seed=12, n=6)
    rel = (torch.rand(scores.shape, generator=torch.Generator().manual_seed(13)) < 0.5).double()
    compiled, eager = _new_metrics(validate_args=False)[name], _new_metrics()[name]
    args = (scores, rel, exclude) if name == "ser" else (scores, exclude)
    torch.compile(compiled.update, fullgraph=True, backend="inductor")(*args)
    eager.update(*args)
    for key, value in eager.compute().items():
        torch.testing.assert_close(compiled.compute()[key], value, msg=key)
