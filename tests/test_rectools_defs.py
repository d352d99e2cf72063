"""RecTools' ranking-accuracy definitions (MobileTeleSystems/RecTools, ``rectools/metrics/ranking.py`` and
``classification.py``): MAP with ``divide_by_k=True`` (AP's ``denominator="k"``), NDCG with
``divide_by_achievable=False`` (``ideal_ranking="k_relevant"``), ``Precision(r_precision=True)``
(``min_k_relevant=True``), ``F1Beta`` (the ``beta`` of ``f1`` / ``fbeta``) and the catalogue
confusion-matrix ``Accuracy`` and ``MCC`` (``catalogue_accuracy`` / ``mcc`` with ``catalog_size``).

RecTools is not installed here: its expected values are transcribed from its test files (file, class and
test named at each), and sklearn's classification scores over the catalogue and every order of tied
documents are the independent oracles of the rest.

A RecTools case is a ``reco`` table (user, item, rank) and an ``interactions`` table (user, item): the
users are those with interactions (a recommended user without any is not scored), an item is relevant when
the user interacted with it, and its rank is its position. Ranks may skip positions (a user's only item at
rank 9): the skipped positions hold items the user did not interact with, so the lists below fill them with
non-relevant documents; ``n_relevant`` (or ``ideal_target``) counts the interactions the list missed.
"""

from __future__ import annotations

import io
import itertools
import json
import math

import pytest
import torch

from torch_rankeval import MAP, NDCG, Precision, RankingMetrics, trec
from torch_rankeval import functional as F
from torch_rankeval.cli import main
from torch_rankeval.conventions import Convention
from torch_rankeval.trec.io import write_qrels, write_run


def _lists(reco: list[tuple[int, int, int]], interactions: list[tuple[int, int]], width: int):
    """RecTools' tables as a padded batch, one row per user with interactions (in increasing user id):
    scores falling with the position, 1 where the item at that rank is one the user interacted with, the
    number of distinct interactions, and a judged set of that many relevant documents (the ideal)."""
    users = sorted({u for u, _ in interactions})
    liked = {u: {i for v, i in interactions if v == u} for u in users}
    target = torch.zeros(len(users), width, dtype=torch.long)
    for u, item, rank in reco:
        if u in liked and item in liked[u] and rank <= width:
            target[users.index(u), rank - 1] = 1
    preds = torch.arange(width, 0, -1, dtype=torch.float64).expand(len(users), -1).clone()
    n_relevant = torch.tensor([len(liked[u]) for u in users])
    most = int(n_relevant.max())
    ideal = (torch.arange(most) < n_relevant.unsqueeze(-1)).long()  # each user's interactions, all relevant
    return preds, target, n_relevant, ideal


def _table(users, items, ranks=None):  # noqa: ANN001, ANN202
    return list(zip(users, items, ranks)) if ranks is not None else list(zip(users, items))


# ------------------------------------------------------------------ MAP(divide_by_k=True): denominator="k"
#: RecTools tests/metrics/test_ranking.py, TestMAP.test_calc: its reco and interactions tables and
#: (k, divide_by_k, expected AP of users 1..8).
MAP_RECO = _table(
    [1, 1, 2, 3, 3, 3, 3, 3, 4, 5, 5, 5, 7, 8, 9],
    [1, 3, 1, 1, 2, 3, 4, 5, 1, 1, 2, 3, 1, 2, 1],
    [9, 1, 3, 1, 3, 5, 7, 9, 1, 1, 2, 3, 2, 1, 1],
)
MAP_INTERACTIONS = _table(
    [1, 1, 2, 3, 3, 3, 3, 3, 3, 4, 5, 5, 5, 6, 7, 8], [1, 2, 1, 1, 2, 3, 4, 5, 6, 1, 1, 2, 3, 1, 1, 1]
)
MAP_CASES = [
    (1, False, [0, 0, 1 / 6, 1, 1 / 3, 0, 0, 0]),
    (3, False, [0, 1 / 3, 1 / 6 * (1 / 1 + 2 / 3), 1, 1, 0, 1 * (1 / 2), 0]),
    (1, True, [0, 0, 1, 1, 1, 0, 0, 0]),
    (3, True, [0, 1 / 9, 1 / 3 * (1 / 1 + 2 / 3), 1 / 3, 1, 0, 1 / 3 * (1 / 2), 0]),
]


@pytest.mark.parametrize("k,divide_by_k,expected", MAP_CASES)
def test_map_divide_by_k_is_the_denominator_k(k, divide_by_k, expected):
    preds, target, n_relevant, _ = _lists(MAP_RECO, MAP_INTERACTIONS, 9)
    denominator = "k" if divide_by_k else "all_relevant"
    got = F.average_precision(preds, target, k=k, n_relevant=n_relevant, denominator=denominator, reduction="none")
    torch.testing.assert_close(got, torch.tensor(expected, dtype=got.dtype))
    by_name = F.evaluate(preds, target, [f"AP(denominator={denominator!r})@{k}"], n_relevant=n_relevant)
    assert by_name[f"AP(denominator={denominator!r})@{k}"].item() == pytest.approx(sum(expected) / len(expected))


def test_map_docstring_example_of_rectools():
    """RecTools rectools/metrics/ranking.py, the MAP docstring: MAP(k=1 / 3, divide_by_k=True)."""
    reco = _table(
        [1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4], [7, 8, 1, 2, 1, 2, 3, 4, 1, 2, 3], [1, 2, 1, 2, 1, 2, 3, 4, 1, 2, 3]
    )
    interactions = _table([1, 1, 2, 3, 3, 3, 4, 4, 4], [1, 2, 1, 1, 3, 4, 1, 2, 3])
    preds, target, n_relevant, _ = _lists(reco, interactions, 4)
    got = F.evaluate(preds, target, ["map@1", "map@3"], n_relevant=n_relevant, denominator="k", reduction="none")
    torch.testing.assert_close(got["map@1"], torch.tensor([0.0, 1.0, 1.0, 1.0], dtype=torch.float64))
    torch.testing.assert_close(got["map@3"], torch.tensor([0.0, 1 / 3, 5 / 9, 1.0], dtype=torch.float64))


# ------------------------------------------------------------ NDCG(divide_by_achievable=False): ideal_ranking
_IDCG3 = 1 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
#: RecTools tests/metrics/test_ranking.py, TestNDCG.test_calc: (k, divide_by_achievable, expected nDCG of
#: users 1..5); user 6 is recommended but has no interactions, so RecTools does not score it.
NDCG_RECO = _table(
    [1, 2, 3, 3, 3, 4, 5, 5, 5, 5, 6], [1, 2, 1, 2, 3, 1, 1, 2, 3, 5, 1], [9, 1, 1, 2, 3, 1, 3, 7, 9, 1, 1]
)
NDCG_INTERACTIONS = _table([1, 2, 3, 3, 3, 4, 5], [1, 1, 1, 2, 3, 1, 1])
NDCG_CASES = [
    (1, False, [0, 0, 1, 1, 0]),
    (3, False, [0, 0, 1, 1 / _IDCG3, 0.5 / _IDCG3]),
    (1, True, [0, 0, 1, 1, 0]),
    (3, True, [0, 0, 1, 1, (1 / math.log2(4)) / (1 / math.log2(2))]),
]


@pytest.mark.parametrize("k,divide_by_achievable,expected", NDCG_CASES)
def test_ndcg_divide_by_achievable_false_is_the_ideal_of_k_relevant_documents(k, divide_by_achievable, expected):
    preds, target, _, ideal = _lists(NDCG_RECO, NDCG_INTERACTIONS, 9)
    ideal_ranking = "achievable" if divide_by_achievable else "k_relevant"
    got = F.ndcg(preds, target, k=k, ideal_target=ideal, ideal_ranking=ideal_ranking, reduction="none")
    torch.testing.assert_close(got, torch.tensor(expected, dtype=got.dtype))
    name = f"nDCG(ideal_ranking={ideal_ranking!r})@{k}"
    by_name = F.evaluate(preds, target, [name], ideal_target=ideal)[name]
    assert by_name.item() == pytest.approx(sum(expected) / len(expected))


def test_ndcg_docstring_example_of_rectools():
    """RecTools rectools/metrics/ranking.py, the NDCG docstring: NDCG(k=1), NDCG(k=3) (divide_by_achievable=False)."""
    reco = _table(
        [1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4], [7, 8, 1, 2, 1, 2, 3, 4, 1, 2, 3], [1, 2, 1, 2, 1, 2, 3, 4, 1, 2, 3]
    )
    interactions = _table([1, 1, 2, 3, 3, 3, 4, 4, 4], [1, 2, 1, 1, 3, 4, 1, 2, 3])
    preds, target, _, ideal = _lists(reco, interactions, 4)
    got = F.evaluate(
        preds, target, ["ndcg@1", "ndcg@3"], ideal_target=ideal, ideal_ranking="k_relevant", reduction="none"
    )
    torch.testing.assert_close(got["ndcg@1"], torch.tensor([0.0, 1.0, 1.0, 1.0], dtype=torch.float64))
    torch.testing.assert_close(
        got["ndcg@3"], torch.tensor([0.0, 0.46927873, 0.70391809, 1.0], dtype=torch.float64), atol=1e-8, rtol=0
    )


def test_k_relevant_ideal_reaches_past_the_list_and_uses_the_highest_gain():
    """Hand-computed: the ideal of k=4 over a 2-document list holds 4 ranks; graded, its gain is the largest."""
    preds, target = torch.tensor([[0.9, 0.5]]), torch.tensor([[2, 1]])
    disc = [1 / math.log2(r + 1) for r in range(1, 5)]
    got = F.evaluate(preds, target, ["ndcg@1", "ndcg@4", "ndcg"], gain="linear", ideal_ranking="k_relevant")
    dcg = 2 * disc[0] + disc[1]
    want = [1.0, dcg / (2 * sum(disc)), dcg / (2 * sum(disc[:2]))]  # no cutoff: the list's 2 ranks (here 1.0)
    assert [v.item() for v in got.values()] == pytest.approx(want)


# ------------------------------------------- the classification metrics: P(r_precision), F1Beta, Accuracy, MCC
#: RecTools tests/metrics/test_classification.py: RECO, INTERACTIONS and CATALOG (10 items) of the module,
#: k=2; users 1, 3, 4, 5 (user 2 is recommended but has no interactions; user 5 has no recommendations).
CLS_RECO = _table([1, 1, 1, 2, 2, 3, 4], [1, 2, 3, 1, 2, 1, 1], [1, 2, 3, 1, 2, 1, 1])
CLS_INTERACTIONS = _table([1, 1, 1, 3, 4, 5], [4, 2, 3, 1, 2, 2])
CATALOG = 10


def _classification_batch():  # noqa: ANN202
    """The lists with their real lengths (user 3 one item, user 5 none): RecTools counts ``fp = k - tp``
    however short the list is, which ``adaptive_k=False`` (the default) does too."""
    preds, target, n_relevant, _ = _lists(CLS_RECO, CLS_INTERACTIONS, 3)
    lengths = torch.tensor([3, 1, 1, 0])  # users 1, 3, 4, 5
    mask = torch.arange(3) < lengths.unsqueeze(-1)
    return preds, target, n_relevant, mask


def test_precision_r_precision_is_min_k_relevant():
    """TestPrecision.test_calc: Precision(k=2) [0.5, 0.5, 0, 0] and Precision(k=2, r_precision=True) [0.5, 1, 0, 0]."""
    preds, target, n_relevant, mask = _classification_batch()
    plain = F.precision(preds, target, k=2, mask=mask, n_relevant=n_relevant, reduction="none")
    r_prec = F.precision(preds, target, k=2, mask=mask, n_relevant=n_relevant, min_k_relevant=True, reduction="none")
    torch.testing.assert_close(plain, torch.tensor([0.5, 0.5, 0.0, 0.0], dtype=plain.dtype))
    torch.testing.assert_close(r_prec, torch.tensor([0.5, 1.0, 0.0, 0.0], dtype=r_prec.dtype))
    by_name = F.evaluate(preds, target, ["P(min_k_relevant=True)@2"], mask=mask, n_relevant=n_relevant)
    assert by_name["P(min_k_relevant=True)@2"].item() == pytest.approx(0.375)


def test_fbeta_of_rectools():
    """TestF1Beta.test_calc: F1Beta(k=2, beta=2 ** (1 / 2)) gives [0.375, 0.75, 0, 0]."""
    preds, target, n_relevant, mask = _classification_batch()
    beta = 2 ** (1 / 2)
    for name in (f"fbeta(beta={beta!r})@2", f"f1(beta={beta!r})@2", f"F1Beta(beta={beta!r})@2"):
        got = F.evaluate(preds, target, [name], mask=mask, n_relevant=n_relevant, reduction="none")[name]
        torch.testing.assert_close(got, torch.tensor([0.375, 0.75, 0.0, 0.0], dtype=got.dtype), msg=name)
    assert F.evaluate(preds, target, ["fbeta@2"], mask=mask, n_relevant=n_relevant).keys() == {"fbeta@2"}


def test_catalogue_accuracy_and_mcc_of_rectools():
    """TestAccuracy.test_calc: Accuracy(k=2) [0.7, 0.9, 0.7, 0.7]; TestMCC.test_calc: MCC(k=2)
    [1 / sqrt(21), 2 / 3, -1 / 6, -1 / 6] (tp = [1, 1, 0, 0], tn = [6, 8, 7, 7], fp = [1, 1, 2, 2], fn = [2, 0, 1, 1])."""
    preds, target, n_relevant, mask = _classification_batch()
    names = [f"catalogue_accuracy(catalog_size={CATALOG})@2", f"mcc(catalog_size={CATALOG})@2"]
    got = F.evaluate(preds, target, names, mask=mask, n_relevant=n_relevant, reduction="none")
    torch.testing.assert_close(got[names[0]], torch.tensor([0.7, 0.9, 0.7, 0.7], dtype=torch.float64))
    torch.testing.assert_close(
        got[names[1]], torch.tensor([1 / 21 ** (1 / 2), 2 / 3, -1 / 6, -1 / 6], dtype=torch.float64)
    )


def _catalogue_vectors(target_row: list[int], n_relevant: int, k: int, catalog: int):
    """One query as sklearn's binary classification over the catalogue: the list's documents first (the top
    k predicted relevant), then the relevant documents the list missed, then the rest of the catalogue."""
    n = len(target_row)
    y_true = list(target_row) + [1] * (n_relevant - sum(target_row))
    y_true += [0] * (catalog - len(y_true))
    y_pred = [1] * min(k, n) + [0] * (catalog - min(k, n))
    return y_true, y_pred


def test_against_sklearn_over_the_catalogue():
    """sklearn's accuracy_score, matthews_corrcoef and fbeta_score of each query's catalogue vectors (lists of
    at least k documents, so that the top k are k predictions)."""
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    g = torch.Generator().manual_seed(5)
    n, length, catalog, k = 24, 6, 15, 4
    preds = torch.rand(n, length, generator=g, dtype=torch.float64)
    target = (torch.rand(n, length, generator=g) < 0.4).long()
    target[:2] = 0  # no relevant document in the list (query 0) or anywhere (query 1: the empty case)
    n_relevant = target.sum(-1) + torch.randint(0, 4, (n,), generator=g)
    n_relevant[0], n_relevant[1] = 2, 0
    order = preds.argsort(-1, descending=True)
    ranked = target.gather(-1, order)
    names = [
        f"catalogue_accuracy(catalog_size={catalog})@{k}",
        f"mcc(catalog_size={catalog})@{k}",
        f"fbeta(beta=0.5)@{k}",
    ]
    got = F.evaluate(preds, target, names, n_relevant=n_relevant, reduction="none", empty_target_action="skip")
    for q in range(n):
        if int(n_relevant[q]) == 0:
            assert all(torch.isnan(got[name][q]) for name in names)
            continue
        y_true, y_pred = _catalogue_vectors(ranked[q].tolist(), int(n_relevant[q]), k, catalog)
        assert got[names[0]][q].item() == pytest.approx(sklearn_metrics.accuracy_score(y_true, y_pred))
        assert got[names[1]][q].item() == pytest.approx(sklearn_metrics.matthews_corrcoef(y_true, y_pred))
        want = sklearn_metrics.fbeta_score(y_true, y_pred, beta=0.5, zero_division=0)
        assert got[names[2]][q].item() == pytest.approx(want)


# ------------------------------------------------------------------ ties: the mean over every order
@pytest.mark.parametrize(
    "names,options",
    [
        (["map@2", "map@4", "map"], {"denominator": "k"}),
        (["map@2", "map"], {"denominator": "k", "graded": True}),
        (["ndcg@2", "ndcg@5", "ndcg"], {"ideal_ranking": "k_relevant"}),
        (["p@2", "p@4", "p"], {"min_k_relevant": True}),
        (["fbeta(beta=2)@2", "fbeta(beta=0.5)@4"], {}),
        (["catalogue_accuracy(catalog_size=9)@3", "mcc(catalog_size=9)@2", "mcc(catalog_size=9)@6"], {}),
    ],
)
def test_averaged_ties_are_the_mean_over_every_order_of_the_tied_documents(names, options):
    g = torch.Generator().manual_seed(11)
    orders = torch.tensor(list(itertools.permutations(range(6))))  # every input order: ties="first" ranks by it
    for _ in range(3):
        preds = torch.randint(0, 3, (6,), generator=g).double()
        target = torch.randint(0, 3, (6,), generator=g)
        target[0] = 1  # at least one relevant document
        n_rel = (target >= 1).sum() + 1  # one relevant document the list missed
        each = F.evaluate(
            preds[orders], target[orders], names, ties="first", reduction="none",
            n_relevant=n_rel.expand(len(orders)), **options,
        )  # fmt: skip
        averaged = F.evaluate(preds, target, names, n_relevant=n_rel, **options)
        for name in names:
            torch.testing.assert_close(averaged[name], each[name].mean(), msg=name)


# ------------------------------------------------------------------ duplicates
def test_duplicate_interactions_are_one_relevant_document_here():
    """RecTools counts an interaction repeated in its table once per repetition (TP, liked, DCG, AP's running
    hit count): tests/metrics/test_ranking.py, TestMAP.test_when_duplicates_in_interactions expects AP@3 of
    3.5 / 3 (above 1) for a user with item 1 twice. A ranking holds one grade per document, so here the
    repeated item is one relevant document: the deduplicated tables. Its user without duplicates (user 2,
    1.0), and TestMRR.test_when_duplicates_in_interactions ([1, 0]: RR reads the first hit only) agree."""
    reco = _table([1, 1, 1, 2, 2, 2], [1, 2, 3, 1, 2, 3], [1, 2, 3, 1, 2, 3])
    interactions = _table([1, 1, 1, 2, 2, 2], [1, 2, 1, 1, 2, 3])
    preds, target, n_relevant, _ = _lists(reco, interactions, 3)
    got = F.evaluate(preds, target, ["map@3"], n_relevant=n_relevant, reduction="none")["map@3"]
    assert got[1].item() == 1.0  # RecTools: 3 / 3
    assert got[0].item() == 1.0 != 3.5 / 3  # deduplicated: items 1 and 2 at ranks 1 and 2
    mrr_reco = _table([1, 1, 1, 2, 2, 2], [1, 2, 3, 1, 2, 3], [1, 2, 3, 4, 5, 6])
    preds, target, n_relevant, _ = _lists(mrr_reco, interactions, 6)
    rr = F.evaluate(preds, target, ["mrr@3"], n_relevant=n_relevant, reduction="none")["mrr@3"]
    torch.testing.assert_close(rr, torch.tensor([1.0, 0.0], dtype=rr.dtype))


# ------------------------------------------------------------------ errors
def test_missing_or_wrong_catalogue_size_is_a_clear_error():
    preds, target = torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 1]])
    with pytest.raises(ValueError, match=r"needs catalog_size .* mcc\(catalog_size=1000\)@10"):
        F.evaluate(preds, target, ["mcc@2"])
    with pytest.raises(ValueError, match="needs catalog_size"):
        RankingMetrics(("catalogue_accuracy@2",))
    with pytest.raises(ValueError, match="catalog_size must be a positive integer"):
        F.evaluate(preds, target, ["mcc(catalog_size=0)@2"])
    with pytest.raises(ValueError, match="catalog_size=2 is smaller than a query's list"):
        F.evaluate(preds, target, ["mcc(catalog_size=2)@2"])
    with pytest.raises(ValueError, match="the cutoff 5 is larger than catalog_size=4"):
        F.evaluate(preds, target, ["catalogue_accuracy(catalog_size=4)@5"])
    with pytest.raises(ValueError, match="ideal_ranking='k' is not valid"):
        F.ndcg(preds, target, ideal_ranking="k")
    with pytest.raises(ValueError, match="denominator='K' is not valid"):
        F.average_precision(preds, target, denominator="K")
    with pytest.raises(TypeError, match="min_k_relevant must be a bool"):
        Convention(min_k_relevant=1)
    with pytest.raises(TypeError, match="does not read min_k_relevant="):
        RankingMetrics(("ndcg@2",), min_k_relevant=True)


# ------------------------------------------------------------------ every surface by name
def test_every_surface_takes_them_by_name(tmp_path):
    preds, target, n_relevant, mask = _classification_batch()
    names = [
        "mcc(catalog_size=10)@2",
        "catalogue_accuracy(catalog_size=10)@2",
        "fbeta(beta=2)@2",
        "P(min_k_relevant=True)@2",
        "AP(denominator='k')@2",
        "nDCG(ideal_ranking='k_relevant')@2",
    ]
    direct = F.evaluate(preds, target, names, mask=mask, n_relevant=n_relevant, reduction="none")
    metric = RankingMetrics(names)
    metric.update(preds, target, mask=mask, n_relevant=n_relevant)
    out = metric.compute()
    for name in names:
        torch.testing.assert_close(out[name], direct[name].mean().float(), msg=name)
    # the options as classes' arguments
    for cls, kwargs, name in [
        (MAP, {"denominator": "k"}, "AP(denominator='k')@2"),
        (NDCG, {"ideal_ranking": "k_relevant"}, "nDCG(ideal_ranking='k_relevant')@2"),
        (Precision, {"min_k_relevant": True}, "P(min_k_relevant=True)@2"),
    ]:
        single = cls(k=2, **kwargs)
        single.update(preds, target, mask=mask, n_relevant=n_relevant)
        torch.testing.assert_close(single.compute(), direct[name].mean().float(), msg=name)
    many = RankingMetrics(("map@2", "ndcg@2", "p@2"), denominator="k", ideal_ranking="k_relevant", min_k_relevant=True)
    many.update(preds, target, mask=mask, n_relevant=n_relevant)
    got = many.compute()
    for key, name in [("map@2", names[4]), ("ndcg@2", names[5]), ("p@2", names[3])]:
        torch.testing.assert_close(got[key], direct[name].mean().float(), msg=key)
    # TREC files: users 1, 3, 4, 5 of the classification case (user 5 retrieves nothing: -c scores it)
    qrels = {"u1": {"i4": 1, "i2": 1, "i3": 1}, "u3": {"i1": 1}, "u4": {"i2": 1}, "u5": {"i2": 1}}
    run = {"u1": {"i1": 3.0, "i2": 2.0, "i3": 1.0}, "u3": {"i1": 3.0}, "u4": {"i1": 3.0}}
    write_qrels(tmp_path / "qrels", qrels)
    write_run(tmp_path / "run", run)
    evaluation = trec.evaluate(tmp_path / "qrels", tmp_path / "run", names, complete=True)
    for name in names:
        assert evaluation.summary[name] == pytest.approx(direct[name].mean().item()), name
    assert evaluation.per_query["mcc(catalog_size=10)@2"].tolist() == pytest.approx(
        [1 / 21**0.5, 2 / 3, -1 / 6, -1 / 6]
    )
    text = io.StringIO()
    argv = ["evaluate", str(tmp_path / "qrels"), str(tmp_path / "run"), "-c", "--format", "json"]
    for name in names:
        argv += ["-m", name]
    assert main(argv, text) == 0
    summary = json.loads(text.getvalue())["runs"][0]["summary"]
    assert summary == pytest.approx({name: direct[name].mean().item() for name in names})


def test_the_command_line_names_the_missing_catalogue_size(tmp_path, capsys):
    write_qrels(tmp_path / "qrels", {"q1": {"d1": 1}})
    write_run(tmp_path / "run", {"q1": {"d1": 0.5, "d2": 0.4}})
    assert main(["evaluate", str(tmp_path / "qrels"), str(tmp_path / "run"), "-m", "mcc@2"], io.StringIO()) == 2
    assert "needs catalog_size" in capsys.readouterr().err


# ------------------------------------------------------------------ routes
def test_the_top_k_route_gives_the_dense_values():
    """Long rows and a sparse target take the top-k view (measures/plan.py ``_route``); a measure the view
    does not serve (NCRR) in the same call sends the batch down the dense route: the values agree."""
    g = torch.Generator().manual_seed(2)
    n, length = 3, 4096
    preds = torch.randint(0, 200, (n, length), generator=g).double()  # many ties
    target = torch.randint(0, 3, (n, length), generator=g) * (torch.rand(n, length, generator=g) < 0.01)
    names = [
        "mcc(catalog_size=5000)@10",
        "catalogue_accuracy(catalog_size=5000)@20",
        "fbeta(beta=2)@10",
        "P(min_k_relevant=True)@20",
        "AP(denominator='k')@10",
        "nDCG(ideal_ranking='k_relevant')@20",
    ]
    topk = F.evaluate(preds, target, names, reduction="none")
    dense = F.evaluate(preds, target, [*names, "ncrr@2"], reduction="none")
    sparse = F.evaluate(preds, target.to_sparse(), names, reduction="none")
    for name in names:
        torch.testing.assert_close(topk[name], dense[name], msg=name)
        torch.testing.assert_close(sparse[name], dense[name], msg=name)


# ------------------------------------------------------------------ checkpoints and combined options
def test_a_new_option_at_its_default_keeps_the_fingerprint_and_set_it_refuses_foreign_state():
    """``min_k_relevant`` and ``ideal_ranking`` enter a metric's configuration only when set
    (metrics/_hooks.py ``"when_set"``): a checkpoint written before they existed still loads, and one of a
    metric that sets them does not load into one that does not."""
    from torch_rankeval.conventions import DEFAULT
    from torch_rankeval.metrics._hooks import _describe

    assert "ideal_ranking" not in _describe(DEFAULT) and "min_k_relevant" not in _describe(DEFAULT)
    assert "ideal_ranking='k_relevant'" in _describe(Convention(ideal_ranking="k_relevant"))
    set_, plain = NDCG(k=2, ideal_ranking="k_relevant"), NDCG(k=2)
    set_.update(torch.tensor([[0.9, 0.5]]), torch.tensor([[0, 1]]))
    with pytest.raises(ValueError, match="ideal_ranking"):
        plain.load_state_dict(set_.state_dict())
    NDCG(k=2).load_state_dict(plain.state_dict())


def test_min_k_relevant_with_adaptive_k_divides_by_the_least_of_k_the_list_and_the_relevant():
    preds, target = torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 1]])
    n_relevant = torch.tensor([4])  # two relevant documents the list missed
    got = F.evaluate(
        preds, target, ["p@2", "p@5"], n_relevant=n_relevant, min_k_relevant=True, adaptive_k=True, reduction="none"
    )
    assert got["p@2"].item() == pytest.approx(1 / 2)  # min(2, 3, 4)
    assert got["p@5"].item() == pytest.approx(2 / 3)  # min(5, 3, 4)
    only = F.evaluate(preds, target, ["p@5"], n_relevant=n_relevant, min_k_relevant=True)["p@5"]
    assert only.item() == pytest.approx(2 / 4)  # min(5, 4)


def test_streaming_and_flat_input_give_the_one_shot_values():
    """Two updates, and flat input with query indexes, give the mean of the per-query values of one call."""
    g = torch.Generator().manual_seed(4)
    preds = torch.randint(0, 4, (6, 5), generator=g).float()
    target = torch.randint(0, 2, (6, 5), generator=g)
    names = ["mcc(catalog_size=20)@3", "AP(denominator='k')@3", "nDCG(ideal_ranking='k_relevant')@3", "fbeta(beta=3)@2"]
    whole = F.evaluate(preds, target, names)
    metric = RankingMetrics(names)
    metric.update(preds[:4], target[:4])
    metric.update(preds[4:], target[4:])
    flat = RankingMetrics(names)
    flat.update(preds.reshape(-1), target.reshape(-1), indexes=torch.arange(6).repeat_interleave(5))
    for out in (metric.compute(), flat.compute()):
        for name in names:
            torch.testing.assert_close(out[name], whole[name], msg=name)
