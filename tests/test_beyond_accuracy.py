"""IntraListDiversity, Novelty, Unexpectedness, Serendipity against plain numpy transcriptions of
Microsoft Recommenders' formulas (recommenders/evaluation/python_evaluation.py: _get_pairwise_items,
_get_cooccurrence_similarity, _get_intralist_similarity / user_diversity / diversity,
historical_item_novelty / novelty, user_item_serendipity / user_serendipity / serendipity), written
here; ties at the cutoff against brute-force enumeration of the orders of tied items; bad input;
the Metric contract; gloo 3-process sync (uneven and empty ranks) == one process."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest
import torch
import torch.distributed as dist

from tests.distributed_helpers import counting_collectives, spawn
from tests.sync_guard import PATHS, select_path
from torch_rankeval.metrics import IntraListDiversity, Novelty, Serendipity, Unexpectedness

pytestmark = pytest.mark.filterwarnings("ignore:Sparse (CSR tensor support is in beta|invariant checks are implicitly)")

L = 12


# ---------------------------------------------------------------------------------------- numpy oracles
# Recommendations as a list of (user, item) rows and an item-pair similarity lookup sim[(i1, i2)],
# i1 <= i2, missing pairs 0 -- the shape of Recommenders' data frames.
def ms_pairwise(reco):
    """_get_pairwise_items: per user every (i1, i2) with i1 <= i2 (self pairs included)."""
    out = []
    for u in sorted({u for u, _ in reco}):
        items = [i for uu, i in reco if uu == u]
        out += [(u, a, b) for a in items for b in items if a <= b]
    return out


def ms_cooccurrence_similarity(train):
    """_get_cooccurrence_similarity: count(i1, i2) / sqrt(count(i1) count(i2)) over users."""
    pairs = ms_pairwise(train)
    pair_count, item_count = {}, {}
    for _, a, b in pairs:
        pair_count[(a, b)] = pair_count.get((a, b), 0) + 1
    for _, i in train:
        item_count[i] = item_count.get(i, 0) + 1
    return {(a, b): c / (item_count[a] ** 0.5 * item_count[b] ** 0.5) for (a, b), c in pair_count.items()}


def ms_feature_similarity(features):
    """_get_item_feature_similarity: the cosine of item feature vectors."""
    f = np.asarray(features, dtype=np.float64)
    return {
        (a, b): float(f[a].dot(f[b])) / float(np.linalg.norm(f[a], 2) * np.linalg.norm(f[b], 2))
        for a in range(len(f))
        for b in range(a, len(f))
    }


def ms_diversity(reco, sim):
    """_get_intralist_similarity + user_diversity + diversity."""
    per_user = {}
    for u, a, b in ms_pairwise(reco):
        if a != b:  # the self pairs are dropped
            per_user.setdefault(u, []).append(sim.get((a, b), 0.0))
    return np.mean([1 - np.mean(v) for v in per_user.values()])


def ms_novelty(train, reco):
    """historical_item_novelty + novelty: an item absent from train is dropped by the inner merge, but
    its row still counts in n_recommendations."""
    counts = {}
    for _, i in train:
        counts[i] = counts.get(i, 0) + 1
    novelty = {i: -np.log2(c / len(train)) for i, c in counts.items()}
    return sum(novelty[i] for _, i in reco if i in novelty) / len(reco)


def ms_serendipity(train, reco, sim, relevance=None):
    """user_item_serendipity + user_serendipity + serendipity (relevance None: 1, the unexpectedness)."""
    users = sorted({u for u, _ in reco} & {u for u, _ in train})
    per_user = []
    for u in users:
        history = [i for uu, i in train if uu == u]
        values = []
        for uu, i in reco:
            if uu != u:
                continue
            avg = np.mean([sim.get((min(i, h), max(i, h)), 0.0) for h in history])
            values.append((1 - avg) * (1.0 if relevance is None else relevance[(u, i)]))
        per_user.append(np.mean(values))
    return np.mean(per_user)


def top_lists(scores, excluded, k):
    """(user, item) rows of the top-k lists (distinct scores), skipping excluded items."""
    reco = []
    for u, (row, ex) in enumerate(zip(np.asarray(scores, dtype=np.float64), np.asarray(excluded, dtype=bool))):
        allowed = np.flatnonzero(~ex)
        reco += [(u, int(i)) for i in allowed[np.argsort(-row[allowed], kind="stable")][:k]]
    return reco


def _data(n=20, seed=0, p_exclude=0.25):
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(n, L, generator=g, dtype=torch.float64)
    excluded = torch.rand(n, L, generator=g) < p_exclude
    excluded[0, :-1] = True  # one recommendable item: no pair
    excluded[1] = True  # none
    history = (torch.rand(n, L, generator=g) < 0.3) & ~excluded  # the training interactions
    history[2] = False  # a user without history
    history[:, 0] |= torch.arange(n) % 3 == 0  # item 0 popular
    target = (torch.rand(n, L, generator=g) < 0.4).double() * torch.randint(1, 3, (n, L), generator=g)
    embeddings = torch.randn(L, 4, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 3, (L,), generator=g)
    sets = torch.rand(L, 4, generator=g) < 0.5
    sets[3] = False  # an item without category
    return scores, excluded, history, target, embeddings, labels, sets


def _train(history):
    return [(u, int(i)) for u, i in history.nonzero().tolist()]


def _similarities(history, embeddings, labels, sets):
    """(metric kwargs, Recommenders-style pair lookup) for each similarity kind."""
    s, n = sets.numpy(), labels.shape[0]
    jaccard = {}
    for a in range(n):
        for b in range(a, n):
            union = np.sum(s[a] | s[b])
            jaccard[(a, b)] = np.sum(s[a] & s[b]) / union if union else 0.0
    co = ms_cooccurrence_similarity(_train(history))
    matrix = torch.zeros(n, n, dtype=torch.float64)
    for (a, b), v in co.items():
        matrix[a, b] = matrix[b, a] = v
    same = {(a, b): float(labels[a] == labels[b]) for a in range(n) for b in range(a, n)}
    return {
        "cosine": ({"embeddings": embeddings}, ms_feature_similarity(embeddings.numpy())),
        "category": ({"categories": labels}, same),
        "jaccard": ({"categories": sets}, jaccard),
        "cooccurrence": ({"similarity": matrix}, co),
    }


KINDS = ["cosine", "category", "jaccard", "cooccurrence"]


def _ex(excluded, kind):
    return {"none": None, "dense": excluded, "sparse": excluded.to_sparse_csr()}[kind]


# ---------------------------------------------------------------------------------------- against Recommenders
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("exclude_kind", ["dense", "sparse"])
@pytest.mark.parametrize("validate_args", PATHS)
def test_diversity_equals_recommenders(kind, exclude_kind, validate_args, monkeypatch):
    validate_args = select_path(validate_args, monkeypatch)
    scores, excluded, history, _, embeddings, labels, sets = _data()
    kwargs, sim = _similarities(history, embeddings, labels, sets)[kind]
    for k in (2, 4, L):
        metric = IntraListDiversity(L, k, validate_args=validate_args, chunk_elements=3 * L, **kwargs)
        for a, b in ((0, 7), (7, 20)):
            metric.update(scores[a:b], _ex(excluded[a:b], exclude_kind))
        want = ms_diversity(top_lists(scores, excluded, k), sim)
        assert metric.compute()[f"diversity@{k}"].item() == pytest.approx(want, rel=1e-6, abs=1e-7), k


@pytest.mark.parametrize("exclude_kind", ["none", "dense", "sparse"])
@pytest.mark.parametrize("validate_args", PATHS)
def test_novelty_equals_recommenders(exclude_kind, validate_args, monkeypatch):
    validate_args = select_path(validate_args, monkeypatch)
    scores, excluded, history, *_ = _data(seed=1)
    history[:, 5] = False  # an item without training interactions: p = 0, adds 0, its slot counts
    scores[:, 5] += 1.0
    excluded[:, 5] = False
    if exclude_kind == "none":
        excluded = torch.zeros_like(excluded)
    popularity = history.sum(0)
    for k in (1, 3, L):
        metric = Novelty(L, k, popularity, validate_args=validate_args)
        metric.update(scores[:9], _ex(excluded[:9], exclude_kind))
        metric.update(scores[9:], _ex(excluded[9:], exclude_kind))
        want = ms_novelty(_train(history), top_lists(scores, excluded, k))
        assert metric.compute()[f"novelty@{k}"].item() == pytest.approx(want, rel=1e-6, abs=1e-7), k
    # a distribution gives the same numbers as the counts
    m1, m2 = Novelty(L, 3, popularity), Novelty(L, 3, popularity / popularity.sum())
    m1.update(scores)
    m2.update(scores)
    assert m1.compute()["novelty@3"].item() == pytest.approx(m2.compute()["novelty@3"].item(), rel=1e-6, abs=1e-7)


def test_novelty_surprisal_variant_hand_computed():
    # 8 users; item 0 known to 4 of them, item 1 to 1, item 2 to 2: -log2(4/8) = 1, -log2(1/8) = 3, -log2(2/8) = 2
    metric = Novelty(4, 2, torch.tensor([4.0, 1.0, 2.0, 8.0]), num_users=8)
    metric.update(torch.tensor([[0.9, 0.8, 0.0, 0.1], [0.0, 0.1, 0.9, 0.8]]))  # (0, 1) and (2, 3)
    assert metric.compute()["novelty@2"].item() == pytest.approx((1 + 3 + 2 + 0) / 4)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("validate_args", PATHS)
def test_serendipity_equals_recommenders(kind, sparse, validate_args, monkeypatch):
    validate_args = select_path(validate_args, monkeypatch)
    scores, excluded, history, target, embeddings, labels, sets = _data(seed=2)
    excluded &= ~history  # some history items may still be recommended (their self similarity counts)
    excluded |= history & (torch.arange(L) % 2 == 0)
    kwargs, sim = _similarities(history, embeddings, labels, sets)[kind]
    relevance = {(u, i): float(target[u, i]) for u in range(target.shape[0]) for i in range(L)}
    for k in (1, 3, L):
        s = Serendipity(L, k, validate_args=validate_args, **kwargs)
        un = Unexpectedness(L, k, validate_args=validate_args, **kwargs)
        for a, b in ((0, 11), (11, 20)):
            t, h, e = target[a:b], history[a:b], excluded[a:b]
            if sparse:
                t, h, e = t.to_sparse(), h.to_sparse_csr(), e.to_sparse()
            s.update(scores[a:b], t, h, exclude=e)
            un.update(scores[a:b], h, exclude=e)
        reco = top_lists(scores, excluded, k)
        train = _train(history)
        got = s.compute()
        assert got[f"serendipity@{k}"].item() == pytest.approx(
            ms_serendipity(train, reco, sim, relevance), rel=1e-6, abs=1e-7
        )
        assert got[f"unexpectedness@{k}"].item() == pytest.approx(ms_serendipity(train, reco, sim), rel=1e-6, abs=1e-7)
        assert un.compute()[f"unexpectedness@{k}"].item() == pytest.approx(got[f"unexpectedness@{k}"].item())


# ---------------------------------------------------------------------------------------- ties
def _tied_lists(row, ex, k):
    """Every top-k list a random order of the tied items can give, equally likely: the items above
    the cutoff's score plus each subset of the right size of the items tied with it."""
    allowed = [j for j in range(len(row)) if not ex[j]]
    if not allowed:
        return []
    ranked = sorted(allowed, key=lambda j: -row[j])
    v = row[ranked[min(k, len(ranked)) - 1]]
    above = [j for j in allowed if row[j] > v]
    group = [j for j in allowed if row[j] == v]
    return [above + list(c) for c in itertools.combinations(group, min(k, len(ranked)) - len(above))]


@pytest.mark.parametrize("validate_args", PATHS)
@pytest.mark.parametrize("exclude_kind", ["dense", "sparse"])
def test_wide_catalogue_few_excluded_with_ties_against_enumeration(validate_args, exclude_kind, monkeypatch):
    """300 items, at most 8 excluded per user, ties spilling past k = 5: the validated and the
    CPU unvalidated view take topk(k + 1 + E) of the raw scores without a copy of them (checked:
    the copy raises), the sync-free one the copy; all equal the mean over the possible lists."""
    from torch_rankeval.ranking import topk as topk_module

    path = validate_args
    validate_args = select_path(validate_args, monkeypatch)
    g = torch.Generator().manual_seed(21)
    n, items, k = 10, 300, 5
    scores = (torch.rand(n, items, generator=g) * 60).round()  # ~5 items per score level
    scores[0] = 0.0
    scores[0, :12] = 2.0  # 12 items tied at the top
    scores[1] = 1.0
    scores[1, :3] = 9.0  # 3 above, every other item tied for the last 2 slots
    excluded = torch.zeros(n, items, dtype=torch.bool)
    excluded.scatter_(1, torch.randint(0, items, (n, 8), generator=g), True)
    embeddings = torch.randn(items, 3, generator=g, dtype=torch.float64)
    popularity = torch.randint(0, 9, (items,), generator=g).double()
    if path != "sync-free":

        def no_copy(*args):
            raise AssertionError("the scores were copied")

        monkeypatch.setattr(topk_module, "_apply_exclude", no_copy)
    ex = excluded if exclude_kind == "dense" else excluded.to_sparse()
    div = IntraListDiversity(items, k, embeddings=embeddings, validate_args=validate_args, chunk_elements=900)
    nov = Novelty(items, k, popularity, validate_args=validate_args, chunk_elements=900)
    div.update(scores, ex)
    nov.update(scores, ex)
    unit = embeddings / embeddings.norm(dim=-1, keepdim=True)
    cos = (unit @ unit.T).numpy()
    pop = popularity.numpy()
    info = -np.log2(np.where(pop > 0, pop / pop.sum(), 1.0))  # 0 bits where p = 0
    ild, novelty, slots = [], 0.0, 0
    for row, exr in zip(scores.tolist(), excluded.tolist()):
        lists = _tied_lists(row, exr, k)
        ild.append(np.mean([1 - np.mean([cos[a, b] for a, b in itertools.combinations(c, 2)]) for c in lists]))
        novelty += np.mean([info[c].sum() for c in lists])
        slots += len(lists[0])
    assert div.compute()[f"diversity@{k}"].item() == pytest.approx(np.mean(ild), rel=1e-6, abs=1e-7)
    assert nov.compute()[f"novelty@{k}"].item() == pytest.approx(novelty / slots, rel=1e-6, abs=1e-7)


def _orders(row, ex):
    """Every ranking of the non-excluded items consistent with the scores (all orders of tied items)."""
    allowed = [j for j in range(len(row)) if not ex[j]]
    levels = sorted({row[j] for j in allowed}, reverse=True)
    groups = [[j for j in allowed if row[j] == lvl] for lvl in levels]
    return [[j for g in order for j in g] for order in itertools.product(*[itertools.permutations(g) for g in groups])]


def _enumerated(scores, excluded, k, value):
    """The mean over users (users with value None left out) of the mean of value(user, top-k) over orders."""
    per_user = []
    for u, (row, ex) in enumerate(zip(scores.tolist(), excluded.tolist())):
        vals = [value(u, order[:k]) for order in _orders(row, ex)]
        if vals and vals[0] is not None:
            per_user.append(np.mean(vals))
    return np.mean(per_user)


def _tied_data(seed=3, n=8, items=7):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 3, (n, items), generator=g).double()
    scores[0] = 1.0  # every score tied
    excluded = torch.rand(n, items, generator=g) < 0.2
    history = torch.rand(n, items, generator=g) < 0.4
    target = torch.randint(0, 3, (n, items), generator=g).double()
    return scores, excluded, history, target


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("validate_args", PATHS)
@pytest.mark.parametrize("exclude_kind", ["dense", "sparse"])
def test_diversity_ties_against_enumeration(kind, validate_args, exclude_kind, monkeypatch):
    validate_args = select_path(validate_args, monkeypatch)
    scores, excluded, history, _ = _tied_data()
    items = scores.shape[1]
    _, _, _, _, embeddings, labels, sets = _data(seed=4)
    kwargs, sim = _similarities(history, embeddings[:items], labels[:items], sets[:items])[kind]

    def ild(u, top):
        pairs = [sim.get((min(a, b), max(a, b)), 0.0) for a, b in itertools.combinations(top, 2)]
        return 1 - np.mean(pairs) if pairs else None

    for k in (1, 2, 3, 5, 7):
        if k == 1:
            with pytest.raises(ValueError, match="intra-list diversity needs k >= 2"):
                IntraListDiversity(items, k, **kwargs)
            continue
        metric = IntraListDiversity(items, k, validate_args=validate_args, chunk_elements=10, **kwargs)
        metric.update(scores, _ex(excluded, exclude_kind))
        want = _enumerated(scores, excluded, k, ild)
        assert metric.compute()[f"diversity@{k}"].item() == pytest.approx(want, rel=1e-6, abs=1e-7), k


@pytest.mark.parametrize("validate_args", PATHS)
@pytest.mark.parametrize("exclude_kind", ["dense", "sparse"])
def test_novelty_and_serendipity_ties_against_enumeration(validate_args, exclude_kind, monkeypatch):
    validate_args = select_path(validate_args, monkeypatch)
    scores, excluded, history, target = _tied_data(seed=5)
    items = scores.shape[1]
    popularity = torch.tensor([5.0, 1.0, 0.0, 2.0, 9.0, 3.0, 1.0])
    info = [-np.log2(p / popularity.sum().item()) if p else 0.0 for p in popularity.tolist()]
    labels = torch.tensor([0, 1, 0, 2, 1, 1, 0])
    ex = _ex(excluded, exclude_kind)
    for k in (1, 2, 4, 7):
        nov = Novelty(items, k, popularity, validate_args=validate_args, chunk_elements=10)
        nov.update(scores, ex)
        # novelty is a mean over slots: the slots of a user do not depend on the order
        sums, slots = 0.0, 0
        for row, exr in zip(scores.tolist(), excluded.tolist()):
            orders = _orders(row, exr)
            sums += np.mean([sum(info[i] for i in o[:k]) for o in orders]) if orders else 0.0
            slots += min(k, sum(not e for e in exr))
        assert nov.compute()[f"novelty@{k}"].item() == pytest.approx(sums / slots, rel=1e-6, abs=1e-7)

        ser = Serendipity(items, k, categories=labels, validate_args=validate_args, chunk_elements=10)
        ser.update(scores, target.to_sparse() if exclude_kind == "sparse" else target, history, exclude=ex)

        def serendipity(u, top, rel=True):
            hist = history[u].nonzero().flatten().tolist()
            if not hist or not top:
                return None
            return np.mean([
                (1 - np.mean([float(labels[i] == labels[h]) for h in hist])) * (target[u, i].item() if rel else 1.0)
                for i in top
            ])  # fmt: skip

        got = ser.compute()
        assert got[f"serendipity@{k}"].item() == pytest.approx(
            _enumerated(scores, excluded, k, serendipity), rel=1e-6, abs=1e-7
        )
        want = _enumerated(scores, excluded, k, lambda u, top: serendipity(u, top, rel=False))
        assert got[f"unexpectedness@{k}"].item() == pytest.approx(want, rel=1e-6, abs=1e-7)


def test_ties_first_takes_input_order():
    labels = torch.tensor([0, 0, 1, 1, 2])
    scores = torch.tensor([[0.9, 0.5, 0.5, 0.5, 0.1]])
    first = IntraListDiversity(5, 2, categories=labels, ties="first")
    first.update(scores)  # items 0, 1: same category
    assert first.compute()["diversity@2"].item() == 0.0
    average = IntraListDiversity(5, 2, categories=labels)
    average.update(scores)  # item 0 with 1, 2 or 3: 2 of 3 differ
    assert average.compute()["diversity@2"].item() == pytest.approx(2 / 3)


# ---------------------------------------------------------------------------------------- bad input
def test_bad_input_names_the_argument():
    e = torch.randn(5, 3)
    with pytest.raises(ValueError, match=r"embeddings must be a floating \(num_items, d\) = \(5, d\)"):
        IntraListDiversity(5, 2, embeddings=torch.randn(4, 3))
    with pytest.raises(ValueError, match="embeddings has an all-zero row"):
        IntraListDiversity(5, 2, embeddings=torch.cat([e[:4], torch.zeros(1, 3)]))
    with pytest.raises(ValueError, match="exactly one item similarity"):
        IntraListDiversity(5, 2)
    with pytest.raises(ValueError, match="exactly one item similarity"):
        IntraListDiversity(5, 2, embeddings=e, categories=torch.arange(5))
    with pytest.raises(ValueError, match=r"categories must be \(5,\) integer labels"):
        IntraListDiversity(5, 2, categories=torch.rand(5))
    with pytest.raises(ValueError, match="categories labels must be >= 0"):
        IntraListDiversity(5, 2, categories=torch.tensor([0, 1, -1, 0, 0]))
    with pytest.raises(ValueError, match="similarity must be finite and symmetric"):
        IntraListDiversity(5, 2, similarity=torch.rand(5, 5) + torch.eye(5))
    with pytest.raises(ValueError, match=r"similarity must be a \(num_items, num_items\)"):
        IntraListDiversity(5, 2, similarity=torch.eye(4))
    with pytest.raises(ValueError, match="k=6 is larger than the catalogue"):
        IntraListDiversity(5, 6, embeddings=e)
    with pytest.raises(ValueError, match="ties='random' is not valid"):
        Novelty(5, 2, torch.ones(5), ties="random")
    with pytest.raises(ValueError, match=r"popularity must be a real \(5,\) tensor"):
        Novelty(5, 2, torch.ones(4))
    with pytest.raises(ValueError, match="popularity must be >= 0"):
        Novelty(5, 2, torch.tensor([1.0, -1.0, 0, 0, 0]))
    with pytest.raises(ValueError, match="not a distribution"):
        Novelty(5, 2, torch.zeros(5))
    with pytest.raises(ValueError, match="popularity must hold finite numbers"):
        Novelty(5, 2, torch.tensor([1.0, float("inf"), 0, 0, 0]))
    with pytest.raises(ValueError, match="popularity exceeds num_users=3"):
        Novelty(5, 2, torch.tensor([1.0, 4.0, 0, 0, 0]), num_users=3)
    s = Serendipity(5, 2, embeddings=e)
    preds, hist = torch.rand(2, 5), torch.zeros(2, 5, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"history must be \(N, num_items\) = \(2, 5\)"):
        s.update(preds, torch.zeros(2, 5), torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="history must be a bool"):
        s.update(preds, torch.zeros(2, 5), torch.zeros(2, 5))
    with pytest.raises(ValueError, match=r"target must be \(N, num_items\) = \(2, 5\)"):
        s.update(preds, torch.zeros(3, 5), hist)
    with pytest.raises(ValueError, match="target must be finite"):
        s.update(preds, torch.full((2, 5), float("nan")), hist)
    with pytest.raises(ValueError, match=r"preds must be \(N, num_items\) = \(N, 5\)"):
        s.update(torch.rand(2, 4), torch.zeros(2, 5), hist)
    with pytest.raises(ValueError, match="NaN or infinite scores"):
        Novelty(5, 2, torch.ones(5)).update(torch.tensor([[0.1, float("nan"), 0.2, 0.3, 0.4]]))
    with pytest.raises(TypeError, match="unexpected keyword argument 'embedding'"):
        IntraListDiversity(5, 2, embedding=e)


# ---------------------------------------------------------------------------------------- metric contract
def test_empty_update_pickle_merge_and_foreign_state():
    scores, excluded, history, target, embeddings, *_ = _data(seed=6)
    whole = Serendipity(L, 3, embeddings=embeddings)
    whole.update(scores, target, history, exclude=excluded)
    a, b = Serendipity(L, 3, embeddings=embeddings), Serendipity(L, 3, embeddings=embeddings)
    a.update(scores[:0], target[:0], history[:0])  # an empty update is a no-op
    assert a.users.item() == 0
    a.update(scores[:5], target[:5], history[:5], exclude=excluded[:5])
    b.update(scores[5:], target[5:], history[5:], exclude=excluded[5:])
    c = pickle.loads(pickle.dumps(a))
    c.merge_state(b)
    for key, value in whole.compute().items():
        assert c.compute()[key].item() == pytest.approx(value.item(), rel=1e-6, abs=1e-7)
    with pytest.raises(ValueError, match="different configuration"):
        Serendipity(L, 4, embeddings=embeddings).merge_state(b)
    with pytest.raises(ValueError, match="different configuration"):
        Serendipity(L, 3, embeddings=embeddings + 1).merge_state(b)
    with pytest.warns(UserWarning, match="no recommendation slot"):
        assert torch.isnan(Novelty(L, 2, torch.ones(L)).compute()["novelty@2"])
    one_item = IntraListDiversity(L, 2, embeddings=embeddings)
    one_item.update(scores[:1], excluded[:1])  # one recommendable item: no pair, not counted
    with pytest.warns(UserWarning, match="no list with two or more items"):
        assert torch.isnan(one_item.compute()["diversity@2"])
    m = IntraListDiversity(L, 3, embeddings=embeddings)
    m.half()
    assert m.total.dtype == torch.float64 and m.features.dtype == torch.float64


# ---------------------------------------------------------------------------------------- distributed
def _metrics(embeddings, popularity):
    return {
        "ild": IntraListDiversity(L, 4, embeddings=embeddings),
        "nov": Novelty(L, 4, popularity),
        "ser": Serendipity(L, 4, embeddings=embeddings),
    }


def _feed(metrics, scores, excluded, history, target, a, b, sparse):
    e = excluded[a:b].to_sparse() if sparse else excluded[a:b]
    metrics["ild"].update(scores[a:b], e)
    metrics["nov"].update(scores[a:b], e)
    metrics["ser"].update(scores[a:b], target[a:b], history[a:b], exclude=e)


def _dist_worker(rank, world, rdv, out):
    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=world)
    scores, excluded, history, target, embeddings, *_ = _data(n=30, seed=9)
    scores = (scores * 4).round()  # ties at the cutoff
    metrics = _metrics(embeddings, history.sum(0) + 1)
    shards = [(0, 17), (17, 18), (18, 30)]  # rank 2 of 3 gets nothing: shards 0 and 2 go to rank 0
    for i, (a, b) in enumerate(shards):
        if i % 2 == rank:
            _feed(metrics, scores, excluded, history, target, a, b, sparse=bool(rank))
    with counting_collectives() as calls:
        result = {key: v.item() for m in metrics.values() for key, v in m.compute().items()}
    torch.save({"result": result, "calls": calls}, f"{out}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


def test_gloo_three_processes_uneven_and_empty_equal_one_process(tmp_path):
    out = tmp_path / "result"
    spawn(_dist_worker, (3, str(tmp_path / "rdv"), str(out)), 3)
    scores, excluded, history, target, embeddings, *_ = _data(n=30, seed=9)
    metrics = _metrics(embeddings, history.sum(0) + 1)
    _feed(metrics, (scores * 4).round(), excluded, history, target, 0, 30, sparse=False)
    want = {key: v.item() for m in metrics.values() for key, v in m.compute().items()}
    for rank in range(3):
        res = torch.load(f"{out}.{rank}")
        assert set(res["result"]) == set(want)
        for key, value in want.items():
            assert res["result"][key] == pytest.approx(value, rel=1e-6, abs=1e-7), (rank, key)
        assert res["calls"]["all_reduce"] == 3 and res["calls"]["all_gather"] == 0  # one per metric


# ---------------------------------------------------------------------------------------- host syncs
@pytest.mark.parametrize("kind", KINDS)
def test_no_host_sync_without_validation(kind):
    from tests.sync_guard import HostSyncError, HostSyncGuard
    from torch_rankeval.metrics import ItemExposure

    scores, excluded, history, target, embeddings, labels, sets = _data(seed=11)
    scores = (scores * 3).round()  # spilled tie groups
    kwargs, _ = _similarities(history, embeddings, labels, sets)[kind]
    fast = [
        IntraListDiversity(L, 4, validate_args=False, **kwargs),
        Novelty(L, 4, history.sum(0) + 1, validate_args=False),
        Serendipity(L, 4, validate_args=False, **kwargs),
        ItemExposure(L, (2, 4), popularity=history.sum(0).double(), tail_ratio=0.3, validate_args=False),
    ]
    slow = [
        IntraListDiversity(L, 4, **kwargs),
        Novelty(L, 4, history.sum(0) + 1),
        Serendipity(L, 4, **kwargs),
        ItemExposure(L, (2, 4), popularity=history.sum(0).double(), tail_ratio=0.3),
    ]

    sparse = (excluded.to_sparse(), history.to_sparse(), target.to_sparse())

    def feed(metrics, inputs):
        e, h, t = inputs
        for m in metrics:
            if isinstance(m, Serendipity):
                m.update(scores, t, h, exclude=e)
            else:
                m.update(scores, e)

    with HostSyncGuard():
        feed(fast, (excluded, history, target))
        feed(fast, sparse)
    with pytest.raises(HostSyncError), HostSyncGuard():  # the guard sees the validated checks
        feed([IntraListDiversity(L, 4, **kwargs)], sparse)
    feed(slow, (excluded, history, target))
    feed(slow, sparse)
    for a, b in zip(fast, slow):
        for key, value in b.compute().items():
            assert a.compute()[key].item() == pytest.approx(value.item(), rel=1e-6, abs=1e-7), key


def test_exposure_gives_recommenders_catalog_and_distributional_coverage():
    """catalog_coverage = distinct recommended / distinct trained items; distributional_coverage =
    -sum p log2 p of the recommendations (Recommenders): from ItemExposure's coverage@k and entropy@k."""
    from torch_rankeval.metrics import ItemExposure

    scores, excluded, history, *_ = _data(seed=12)
    train = _train(history)
    for k in (1, 3, L):
        reco = top_lists(scores, excluded, k)
        catalog = len({i for _, i in reco}) / len({i for _, i in train})
        counts = np.bincount([i for _, i in reco], minlength=L)
        p = counts[counts > 0] / len(reco)
        distributional = -np.sum(p * np.log2(p))
        m = ItemExposure(L, k)
        m.update(scores, excluded)
        got = m.compute()
        trained = len({i for _, i in train})
        assert got[f"coverage@{k}"].item() * L / trained == pytest.approx(catalog, rel=1e-6)
        assert got[f"entropy@{k}"].item() / np.log(2) == pytest.approx(distributional, rel=1e-6)
