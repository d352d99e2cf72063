"""torch_rankeval.losses against peers' own expected values (TF-Ranking, allRank, pytorchltr; each
test names its source file and test, and the convention that reproduces the peer), against brute
force (|change of nDCG@k| by swapping and re-measuring with F.ndcg), against -F.ndcg in the
zero-temperature limit, plus gradcheck, chunking, flat input, weights, empty lists and bad input."""

from __future__ import annotations

import itertools
import math
from math import exp, log, log2

import pytest
import torch

from torch_rankeval import functional as F
from torch_rankeval import losses as L

f64 = torch.float64


def ln(x: float) -> float:
    return math.log(x)


def logloss(x: float) -> float:  # TF-Ranking's pairwise logistic loss of a score difference
    return math.log(1.0 + math.exp(-x))


def _softmax(values: list[float]) -> list[float]:
    total = sum(math.exp(v) for v in values)
    return [math.exp(v) / total for v in values]


def t(x, dtype=f64) -> torch.Tensor:  # noqa: ANN001
    return torch.tensor(x, dtype=dtype)


# ------------------------------------------------------------------------------------------ TF-Ranking
# tensorflow/ranking, tensorflow_ranking/python/losses_impl_test.py
RAGGED_SCORES = [[1.0, 3.0, 2.0], [1.0, 3.0, 0.0]]  # the ragged [[1, 3, 2], [1, 3]] padded with ignore_index
RAGGED_LABELS = [[0.0, 0.0, 1.0], [0.0, 2.0, -1.0]]


@pytest.mark.parametrize(
    ("loss", "kwargs", "expected"),
    [
        # TF's ListMLE orders by label (its gain is monotone): any gain reproduces it
        (L.listmle, {}, [3.534534, 0.126928]),
        # TF's SoftmaxLoss normalises the labels themselves: gain="linear"
        (L.softmax, {"gain": "linear"}, [1.407606, 0.126928]),
        # TF's NeuralSortNDCGLoss: NeuralSort without Sinkhorn, gain 2^l - 1, temperature 1
        (L.neural_ndcg, {"sinkhorn_iters": 0}, [-0.761571, -0.956006]),
        # TF's ApproxNDCGLoss: temperature 1, gain 2^l - 1, no cutoff
        (L.approx_ndcg, {}, [-0.63093, -0.922917]),
    ],
)
def test_tf_ranking_compute_per_list_with_ragged_tensors(loss, kwargs, expected):
    """LossesImplTest.test_compute_per_list_with_ragged_tensors: the per-list losses (TF's
    per-item weights become list weights there, which it returns apart; the losses are unweighted)."""
    out = loss(t(RAGGED_SCORES), t(RAGGED_LABELS), ignore_index=-1, reduction="none", **kwargs)
    torch.testing.assert_close(out, t(expected), atol=1e-6, rtol=0)


def test_tf_ranking_pairwise_logistic_per_list_with_ragged_tensors():
    """Same test, PairwiseLogisticLoss: [0.813262, 0.126928] with pair weights [8, 1]. TF weights a pair
    by the more relevant document's weight (ours too) and divides each list by its pair-weight sum;
    ours is the sum over pairs, so ours / [8, 1] reproduces it."""
    weights = t([[2.0, 3.0, 4.0], [1.0, 1.0, 1.0]])
    out = L.ranknet(t(RAGGED_SCORES), t(RAGGED_LABELS), ignore_index=-1, weights=weights, reduction="none")
    torch.testing.assert_close(out / t([8.0, 1.0]), t([0.813262, 0.126928]), atol=1e-6, rtol=0)


def test_tf_ranking_pairwise_logistic_loss_should_handle_mask():
    """PairwiseLogisticLossTest.test_pairwise_logistic_loss_should_handle_mask: MEAN pools the batch's
    pairs, i.e. our sum over pairs divided by the number of pairs (3)."""
    scores, labels = t([[1.0, 3.0, 2.0], [1.0, 2.0, 3.0]]), t([[1.0, 0.0, 0.0], [0.0, 0.0, 2.0]])
    mask = torch.tensor([[True, False, True], [True, True, True]])
    expected = (logloss(1.0 - 2.0) + logloss(3.0 - 1.0) + logloss(3.0 - 2.0)) / 3.0
    assert L.ranknet(scores, labels, mask=mask, reduction="sum").item() / 3 == pytest.approx(expected, abs=1e-9)


def test_tf_ranking_pairwise_logistic_loss_should_handle_per_example_weights():
    """PairwiseLogisticLossTest.test_pairwise_logistic_loss_should_handle_per_example_weights: the pair
    weight is the more relevant document's; MEAN divides by the pair-weight sum (2 + 2 + 1 + 1)."""
    scores, labels = t([[1.0, 3.0, 2.0], [1.0, 2.0, 3.0]]), t([[0.0, 0.0, 1.0], [0.0, 0.0, 2.0]])
    weights = t([[1.0, 1.0, 2.0], [1.0, 1.0, 1.0]])
    expected = ((2.0 * logloss(3.0 - 2.0) + 2.0 * logloss(1.0 - 2.0)) + (logloss(3.0 - 1.0) + logloss(3.0 - 2.0))) / 6.0
    out = L.ranknet(scores, labels, weights=weights, reduction="sum").item() / 6.0
    assert out == pytest.approx(expected, abs=1e-9)


SOFTMAX_SCORES = [[1.0, 3.0, 2.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
SOFTMAX_LABELS = [[0.0, 0.0, 1.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]


def test_tf_ranking_softmax_loss():
    """SoftmaxLossTest.test_softmax_loss: SUM_BY_NONZERO_WEIGHTS weights each list by its label sum and
    divides by the lists with a relevant document: weights=label sums, gain="linear", our mean (skip)."""
    labels = t(SOFTMAX_LABELS)
    out = L.softmax(t(SOFTMAX_SCORES), labels, gain="linear", weights=labels.sum(1))
    expected = -(math.log(_softmax(SOFTMAX_SCORES[0])[2]) + math.log(_softmax(SOFTMAX_SCORES[1])[2]) * 2.0) / 2.0
    assert out.item() == pytest.approx(expected, abs=1e-6)


def test_tf_ranking_softmax_loss_should_handle_per_list_weights():
    """SoftmaxLossTest.test_softmax_loss_should_handle_per_list_weights: list weights [2, 1, 1] times the
    label sums."""
    labels = t(SOFTMAX_LABELS)
    out = L.softmax(t(SOFTMAX_SCORES), labels, gain="linear", weights=labels.sum(1) * t([2.0, 1.0, 1.0]))
    expected = -(math.log(_softmax(SOFTMAX_SCORES[0])[2]) * 2.0 + math.log(_softmax(SOFTMAX_SCORES[1])[2]) * 2.0) / 2.0
    assert out.item() == pytest.approx(expected, abs=1e-6)


def test_tf_ranking_softmax_loss_should_handle_mask():
    """SoftmaxLossTest.test_softmax_loss_should_handle_mask."""
    out = L.softmax(t([[1.0, 2.0, 3.0]]), t([[0.0, 1.0, 1.0]]), mask=torch.tensor([[True, False, True]]))
    assert out.item() == pytest.approx(-math.log(_softmax([1, 3])[1]), abs=1e-6)


def test_tf_ranking_list_mle_loss():
    """ListMLELossTest.test_list_mle_loss: per-list sums, SUM_BY_NONZERO_WEIGHTS = our mean; with list
    weights [2, 1]."""
    scores, labels = t([[0.0, ln(3), ln(2)], [0.0, ln(2), ln(3)]]), t([[0.0, 2.0, 1.0], [1.0, 0.0, 2.0]])
    first = ln(3.0 / (3 + 2 + 1)) + ln(2.0 / (2 + 1)) + ln(1.0 / 1)
    second = ln(3.0 / (3 + 2 + 1)) + ln(1.0 / (1 + 2)) + ln(2.0 / 2)
    assert L.listmle(scores, labels).item() == pytest.approx(-(first + second) / 2, abs=1e-6)
    weighted = L.listmle(scores, labels, weights=t([[2.0], [1.0]])).item()
    assert weighted == pytest.approx(-(2 * first + 1 * second) / 2, abs=1e-6)


def test_tf_ranking_list_mle_loss_lambda_weight():
    """ListMLELossTest.test_list_mle_loss_lambda_weight: ListMLELambdaWeight(rank_discount_fn=2^(3 - r) - 1)
    weighs the term at rank r (1-based, by label) by 3, 1, 0: our per-item weights on the documents
    at those ranks."""
    scores, labels = t([[0.0, ln(3), ln(2)], [0.0, ln(2), ln(3)]]), t([[0.0, 2.0, 1.0], [1.0, 0.0, 2.0]])
    by_rank = {0: 3.0, 1: 1.0, 2: 0.0}
    order = labels.argsort(dim=1, descending=True)
    weights = torch.empty_like(labels)
    for row in range(2):
        for rank, doc in enumerate(order[row].tolist()):
            weights[row, doc] = by_rank[rank]
    expected = (
        -(
            (3 * ln(3.0 / (3 + 2 + 1)) + 1 * ln(2.0 / (2 + 1)) + 0 * ln(1.0 / 1))
            + (3 * ln(3.0 / (3 + 2 + 1)) + 1 * ln(1.0 / (1 + 2)) + 0 * ln(2.0 / 2))
        )
        / 2
    )
    assert L.listmle(scores, labels, weights=weights).item() == pytest.approx(expected, abs=1e-6)


def test_tf_ranking_list_mle_loss_should_handle_mask():
    """ListMLELossTest.test_list_mle_loss_should_handle_mask."""
    out = L.listmle(t([[0.0, ln(2), ln(3)]]), t([[0.0, 0.0, 1.0]]), mask=torch.tensor([[True, False, True]]))
    assert out.item() == pytest.approx(-(ln(3.0 / (3 + 1)) + ln(1.0 / 1)), abs=1e-6)


def test_tf_ranking_approx_ndcg_loss():
    """ApproxNDCGLossTest.test_approx_ndcg_loss: temperature 0.1, reduction SUM (our "sum"), the label -1
    is padding (ignore_index=-1), unweighted and with list weights [2, 1, 1]."""
    scores = t([[1.4, -2.8, -0.4], [0.0, 1.8, 10.2], [1.0, 1.2, -3.2]])
    labels = t([[0.0, 2.0, 1.0], [1.0, 0.0, -1.0], [0.0, 0.0, 0.0]])
    first = (1 / (3 / ln(2) + 1 / ln(3))) * (3 / ln(4) + 1 / ln(3))
    second = ln(2) * (1 / ln(3))
    common = dict(temperature=0.1, ignore_index=-1, reduction="sum")
    assert L.approx_ndcg(scores, labels, **common).item() == pytest.approx(-(first + second), abs=1e-5)
    weighted = L.approx_ndcg(scores, labels, weights=t([[2.0], [1.0], [1.0]]), **common).item()
    assert weighted == pytest.approx(-(2 * first + second), abs=1e-5)


def test_tf_ranking_approx_ndcg_loss_should_handle_mask():
    """ApproxNDCGLossTest.test_approx_ndcg_loss_should_handle_mask (temperature 1)."""
    out = L.approx_ndcg(t([[1.0, 3.0, 2.0]]), t([[0.0, 0.0, 1.0]]), mask=torch.tensor([[True, False, True]]))
    approxrank = 1.0 + 1.0 / (1.0 + math.exp(-(1.0 - 2.0)))
    assert out.item() == pytest.approx(-(1.0 / math.log(1.0 + approxrank)) * math.log(2.0), abs=1e-6)


def test_tf_ranking_neural_sort_should_handle_mask():
    """UtilsTest.test_neural_sort_should_handle_mask: NeuralSort's matrix on the real documents (TF
    parks the masked documents in the last rows; ours leaves those rows 0)."""
    from torch_rankeval.losses import _neural_sort

    scores = t([[3.0, 1.0, -1.0, 1000.0, 5.0, 2.0]])
    valid = torch.tensor([[True, True, True, False, False, True]])
    expected = t(
        [
            [0.72140, 0.01321, 0.00000, 0.26539],
            [0.21183, 0.21183, 0.00053, 0.57581],
            [0.01204, 0.65723, 0.08895, 0.24178],
            [0.00004, 0.11849, 0.87557, 0.0059],
        ]
    )
    p = _neural_sort(scores, valid, 1.0, 0)[0]
    torch.testing.assert_close(p[:4][:, valid[0]], expected, atol=1e-4, rtol=0)
    assert p[4:].abs().sum() == 0 and p[:, ~valid[0]].abs().sum() == 0


def test_tf_ranking_dcg_lambda_weight_smooth_fraction():
    """DCGLambdaWeightTest.test_smooth_fraction: DCGLambdaWeight(smooth_fraction=1.0) is |change of DCG|
    of the swap with linear gain and discount 1/r (TF's defaults), not normalised: ours times IDCG@k
    (2.5 for the whole list; 2 with topn=1)."""
    preds, labels = t([3.0, 2.0, 1.0]), t([2.0, 1.0, 0.0])  # ranks [1, 2, 3]
    conv = dict(gain="linear", discount=lambda r: 1.0 / r)
    whole = L.lambda_weights(preds, labels, **conv) * 2.5
    torch.testing.assert_close(
        whole, t([[0.0, 1.0 / 2.0, 2.0 * 2.0 / 3.0], [1.0 / 2.0, 0.0, 1.0 / 6.0], [2.0 * 2.0 / 3.0, 1.0 / 6.0, 0.0]])
    )
    top1 = L.lambda_weights(preds, labels, k=1, **conv) * 2.0
    torch.testing.assert_close(top1, t([[0.0, 1.0, 2.0], [1.0, 0.0, 0.0], [2.0, 0.0, 0.0]]))


def test_tf_ranking_dcg_lambda_weight_normalized():
    """DCGLambdaWeightTest.test_normalized: labels [1, 2] at ranks [1, 2], max DCG 2.5, weight 1/2/2.5."""
    w = L.lambda_weights(t([2.0, 1.0]), t([1.0, 2.0]), gain="linear", discount=lambda r: 1.0 / r)
    torch.testing.assert_close(w, t([[0.0, 1.0 / 2.0 / 2.5], [1.0 / 2.0 / 2.5, 0.0]]))


# ------------------------------------------------------------------------------------------ allRank
# allegro/allRank, tests/losses/ (PADDED_Y_VALUE = -1: our ignore_index=-1)
def test_allrank_listmle_ignores_padded_value():
    """tests/losses/test_listmle.py::test_listmle_ignores_padded_value."""
    out = L.listmle(torch.tensor([[0.5, 0.3, 0.5]]), torch.tensor([[1.0, 0.0, -1.0]]), ignore_index=-1)
    assert out.item() == pytest.approx(0.5981389284133911, abs=1e-6)


def _bce(logits: list[float], weights: list[float] | None = None) -> float:
    """BCEWithLogitsLoss against target 1, mean over the pairs: allRank's rankNet reference."""
    weights = weights or [1.0] * len(logits)
    return sum(w * math.log(1 + math.exp(-x)) for x, w in zip(logits, weights)) / len(logits)


@pytest.mark.parametrize(
    ("preds", "target", "expected"),
    [
        ([0.5, 0.2], [1.0, 0.0], _bce([0.3])),  # test_ranknet_onepair
        ([0.2, 0.5], [1.0, 0.0], _bce([-0.3])),  # test_ranknet_onepair_minus
        ([0.5, 0.2, 0.1], [1.0, 0.0, 0.0], _bce([0.3, 0.4])),  # test_ranknet_two_pairs
        ([0.2, 0.5], [0.0, 1.0], _bce([0.3])),  # test_ranknet_pair_reversed
        ([0.2, 0.5], [0.0, 2.0], _bce([0.3])),  # test_ranknet_pair_multirelevancy
        ([0.5, 0.2, 0.66], [1.0, 0.0, -1.0], _bce([0.3])),  # test_ranknet_onepair_masked
    ],
)
def test_allrank_ranknet(preds, target, expected):
    """tests/losses/test_ranknet.py: allRank's rankNet averages over the batch's pairs: ours (a sum per
    list) divided by the number of pairs."""
    target_t = t([target])
    pairs = sum(1 for a, b in itertools.permutations(target, 2) if a > b >= 0)
    out = L.ranknet(t([preds]), target_t, ignore_index=-1, reduction="sum").item() / pairs
    assert out == pytest.approx(expected, abs=1e-9)


ALLRANK_PREDS = [0.5, 0.2, 0.1, 0.4, 1.0, -1.0, 0.63]
ALLRANK_TRUE = [1.0, 2.0, 2.0, 4.0, 1.0, 4.0, 3.0]


@pytest.mark.parametrize(
    ("preds", "target", "k", "temperature"),
    [
        ([0.5, 0.2], [1.0, 0.0], None, 1e-4),  # neuralNDCG_simple
        (ALLRANK_PREDS, ALLRANK_TRUE, None, 1e-4),  # neuralNDCG_longer
        ([0.5, -1e30], [1.0, 0.0], None, 1e-4),  # neuralNDCG_stable_for_very_small_prediction
        (ALLRANK_PREDS + [1.0, 0.5, 0.3], ALLRANK_TRUE + [-1.0] * 3, None, 1e-3),  # neuralNDCG_ignores_padded_value
        (ALLRANK_PREDS, ALLRANK_TRUE, 3, 1e-4),  # neuralNDCG_at_3
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, f64])
def test_allrank_neuralndcg(preds, target, k, temperature, dtype):
    """tests/losses/test_neuralndcg.py (deterministic cases): neuralNDCG (Sinkhorn, powered
    relevancies = our default exp2 gain) at a small temperature equals minus allRank's ndcg, which is
    our F.ndcg (2^rel - 1, log2 discount)."""
    p, y = t([preds], dtype), t([target], dtype)
    out = L.neural_ndcg(p, y, k, temperature=temperature, ignore_index=-1)
    expected = F.ndcg(p, y, k=k, ignore_index=-1)
    assert math.isfinite(out.item())
    assert out.item() == pytest.approx(-expected.item(), abs=1e-5)


def _allrank_lambda_loss(y_pred, y_true, weighing_scheme, k=None, sigma=1.0, mu=10.0):  # noqa: ANN001, ANN202
    """allRank's lambdaLoss (allrank/models/losses/lambdaLoss.py), written from its published
    formula: pairs in predicted order, weights from the named scheme, log2, reduction "sum"."""
    eps, n = 1e-10, y_pred.shape[1]
    y_pred_sorted, indices_pred = y_pred.sort(descending=True, dim=-1)
    y_true_sorted, _ = y_true.sort(descending=True, dim=-1)
    true_sorted_by_preds = torch.gather(y_true, dim=1, index=indices_pred)
    true_diffs = true_sorted_by_preds[:, :, None] - true_sorted_by_preds[:, None, :]
    pairs_mask = torch.isfinite(true_diffs)
    if weighing_scheme != "ndcgLoss1":
        pairs_mask = pairs_mask & (true_diffs > 0)
    k = k or n
    at_k = torch.zeros((n, n), dtype=torch.bool)
    at_k[:k, :k] = True
    pos = torch.arange(1, n + 1, dtype=y_pred.dtype)
    D = torch.log2(1.0 + pos)[None, :]
    max_dcg = torch.sum(((torch.pow(2, y_true_sorted) - 1) / D)[:, :k], dim=-1).clamp(min=eps)
    G = (torch.pow(2, true_sorted_by_preds) - 1) / max_dcg[:, None]
    lambdarank = torch.abs(1.0 / D[:, :, None] - 1.0 / D[:, None, :]) * torch.abs(G[:, :, None] - G[:, None, :])
    delta_idxs = torch.abs(torch.arange(1, n + 1)[:, None] - torch.arange(1, n + 1)[None, :])
    inv = torch.cat([1.0 / D, torch.zeros((1, 1), dtype=D.dtype)], dim=1)  # 1/D at delta 0 is unused
    deltas = torch.abs(inv[:, (delta_idxs - 1).clamp(min=0)] - inv[:, delta_idxs])
    deltas.diagonal(dim1=-2, dim2=-1).zero_()
    loss2 = deltas * torch.abs(G[:, :, None] - G[:, None, :])
    weights = {
        "lambdaRank": lambdarank,
        "ndcgLoss2": loss2,
        "ndcgLoss2PP": mu * loss2 + lambdarank,
        "ndcgLoss1": (G / D)[:, :, None],
    }[weighing_scheme]
    diffs = (y_pred_sorted[:, :, None] - y_pred_sorted[:, None, :]).clamp(min=-1e8, max=1e8)
    probas = (torch.sigmoid(sigma * diffs).clamp(min=eps) ** weights).clamp(min=eps)
    return -torch.sum(torch.log2(probas)[pairs_mask & at_k])


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ("lambdarank", "lambdaRank"),
        ("ndcg_loss2", "ndcgLoss2"),
        ("ndcg_loss2pp", "ndcgLoss2PP"),
        ("ndcg_loss1", "ndcgLoss1"),
    ],
)
def test_lambda_loss_equals_allranks_formula(ours, theirs):
    """allRank has no expected values for lambdaLoss: its published formula (above, ours is independent
    code) on random untied graded lists, k=None (allRank's k keeps pairs with both members in the top
    k, ours pairs with one: they agree without a cutoff), reduction "sum"."""
    g = torch.Generator().manual_seed(0)
    preds = torch.randn(6, 9, generator=g, dtype=f64)
    target = torch.randint(0, 5, (6, 9), generator=g).to(f64)
    expected = _allrank_lambda_loss(preds, target, theirs)
    out = L.lambda_loss(preds, target, weighting=ours, reduction="sum")
    assert out.item() == pytest.approx(expected.item(), rel=1e-9)


# ------------------------------------------------------------------------------------------ pytorchltr
# rjagerman/pytorchltr, tests/loss/test_pairwise_lambda.py
def test_pytorchltr_lambda_losses_batch_ndcg1():
    """test_lambda_losses_batch, LambdaNDCGLoss1 (n = [3, 2]: the second list's third slot is padding)."""
    scores = torch.tensor([[0.5, 2.0, 1.0], [0.9, -1.2, 0.0]])
    relevance = torch.tensor([[2, 0, 1], [0, 1, 0]])
    mask = torch.arange(3) < torch.tensor([[3], [2]])
    out = L.lambda_loss(scores, relevance, weighting="ndcg_loss1", mask=mask, reduction="none")
    torch.testing.assert_close(out, torch.tensor([2.629549503326416, 2.647582530975342]))


@pytest.mark.parametrize(
    ("scores", "n", "sorting"),
    [
        ([0.0, 0.0, 10.0, 20.0, 10.0], 5, [3, 4, 2, 0, 1]),  # test_lambda_ndcg1_perfect
        ([4.0, 4.0, 2.0, 0.0, 2.0], 5, [1, 0, 2, 4, 3]),  # test_lambda_ndcg1_worst
        ([0.0, 1.0, 1.5, -2.0, 0.0], 4, [2, 1, 0, 3, 4]),  # test_lambda_ndcg1_mid
    ],
)
def test_pytorchltr_lambda_ndcg1(scores, n, sorting):
    """test_lambda_ndcg1_perfect / _worst / _mid: pytorchltr's loop, transcribed. Its sortings order
    tied scores differently from ours, but tied documents there share a grade, so the loss is the same."""
    ys = [0, 0, 1, 2, 1]
    discounts = [log2(2.0 + i) for i in range(5)]
    ideal = sorted(ys[:n], reverse=True)
    max_dcg = sum((2**y - 1.0) / log2(2.0 + i) for i, y in enumerate(ideal))
    gains = [(2 ** float(y) - 1.0) / max_dcg for y in ys]
    expected = 0.0
    for i in range(n):
        for j in range(n):
            si, sj = sorting[i], sorting[j]
            inner = (1.0 / (1.0 + exp(-1.0 * (scores[si] - scores[sj])))) ** (gains[si] / discounts[i])
            expected -= log2(inner)
    mask = torch.arange(5) < n
    out = L.lambda_loss(t(scores), torch.tensor(ys), weighting="ndcg_loss1", mask=mask)
    assert out.item() == pytest.approx(expected, abs=1e-9)


def test_pytorchltr_lambda_ndcg2_takes_delta_one_rank_lower():
    """test_lambda_losses_batch, LambdaNDCGLoss2, second list ([0.9, -1.2], grades [0, 1]): 0.4184933
    = |1/log2(3) - 1/log2(4)| * log2(1 + e^2.1), one pair at ranks 1 and 2. Wang et al.'s delta (and
    allRank's) is |1/log2(2) - 1/log2(3)| for ranks one apart: ours, 0.4184933 * 0.3691 / 0.1309."""
    out = L.lambda_loss(t([0.9, -1.2]), torch.tensor([0, 1]), weighting="ndcg_loss2")
    theirs = 0.4184933304786682
    assert theirs == pytest.approx((1 / log2(3) - 1 / log2(4)) * log2(1 + exp(2.1)), abs=1e-6)
    assert out.item() == pytest.approx(theirs * (1 - 1 / log2(3)) / (1 / log2(3) - 1 / log2(4)), abs=1e-6)


# ------------------------------------------------------------------------------------------ brute force
def _random_lists(seed: int, n: int = 5, length: int = 7):  # noqa: ANN202
    g = torch.Generator().manual_seed(seed)
    preds = torch.randn(n, length, generator=g, dtype=f64)
    target = torch.randint(0, 4, (n, length), generator=g)
    mask = torch.rand(n, length, generator=g) < 0.85
    return preds, target, mask


@pytest.mark.parametrize("k", [None, 1, 3, 10])
@pytest.mark.parametrize("convention", [{}, {"gain": "linear"}, {"convention": "trec_eval", "log_base": 10.0}])
def test_lambda_weights_equal_brute_force_swaps(k, convention):
    """|change of nDCG@k| of every swap, measured by F.ndcg (ties="first") on the swapped scores."""
    for seed in range(3):
        preds, target, mask = _random_lists(seed)
        w = L.lambda_weights(preds, target, k, mask=mask, **convention)
        expected = torch.zeros_like(w)
        base = F.ndcg(preds, target, k=k, mask=mask, ties="first", reduction="none", **convention)
        for i, j in itertools.combinations(range(preds.shape[1]), 2):
            swapped = preds.clone()
            swapped[:, [i, j]] = preds[:, [j, i]]
            delta = (F.ndcg(swapped, target, k=k, mask=mask, ties="first", reduction="none", **convention) - base).abs()
            both = mask[:, i] & mask[:, j]
            expected[:, i, j] = expected[:, j, i] = torch.where(both, delta, torch.zeros_like(delta))
        torch.testing.assert_close(w, expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("loss", [L.approx_ndcg, L.neural_ndcg])
@pytest.mark.parametrize("k", [None, 2, 5])
@pytest.mark.parametrize("convention", [{}, {"gain": "linear", "log_base": 3.0}])
def test_smooth_ndcg_tends_to_minus_the_metric(loss, k, convention):
    """At a small temperature, approx_ndcg and neural_ndcg equal -F.ndcg of the same convention (random
    continuous scores: untied)."""
    preds, target, mask = _random_lists(4, n=8, length=9)
    target[:, 0] = 2  # every list has a relevant document
    mask[:, 0] = True
    out = loss(preds, target, k, temperature=1e-4, mask=mask, reduction="none", **convention)
    expected = -F.ndcg(preds, target, k=k, mask=mask, reduction="none", **convention)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=0)


def test_discount_at_fractional_ranks_is_the_table_at_integer_ranks():
    from torch_rankeval.conventions import discount_table, resolve_convention
    from torch_rankeval.losses import _discount_at

    for conv in (resolve_convention(None), resolve_convention(None, log_base=10.0)):
        ranks = torch.arange(1, 8, dtype=f64)
        torch.testing.assert_close(_discount_at(ranks, conv), discount_table(7, conv, dtype=f64, device="cpu"))


# ------------------------------------------------------------------------------------------ gradients
ALL = [
    (L.softmax, {}),
    (L.listnet, {}),
    (L.listmle, {}),
    (L.ranknet, {"k": 3}),
    (L.lambda_loss, {"k": 3}),
    (L.lambda_loss, {"weighting": "lambdarank"}),
    (L.lambda_loss, {"weighting": "ndcg_loss1", "k": 2}),
    (L.lambda_loss, {"weighting": "ndcg_loss2"}),
    (L.approx_ndcg, {"k": 3, "temperature": 0.5}),
    (L.neural_ndcg, {"k": 3, "temperature": 0.5, "sinkhorn_iters": 5}),
]


@pytest.mark.parametrize(("loss", "kwargs"), ALL)
def test_gradcheck_float64(loss, kwargs):
    preds, target, mask = _random_lists(7, n=3, length=5)
    preds.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda p: loss(p, target, mask=mask, **kwargs), (preds,))


@pytest.mark.parametrize(("loss", "kwargs"), ALL)
def test_chunks_give_the_same_values_and_gradients(loss, kwargs, monkeypatch):
    """The pairwise and sorting losses run in chunks of lists (recomputed in backward): same numbers."""
    preds, target, mask = _random_lists(8, n=6, length=6)
    preds.requires_grad_(True)
    whole = loss(preds, target, mask=mask, **kwargs)
    (g_whole,) = torch.autograd.grad(whole, preds)
    monkeypatch.setattr(L, "CHUNK_ELEMENTS", 40)  # one or two lists per chunk
    chunked = loss(preds, target, mask=mask, **kwargs)
    (g_chunked,) = torch.autograd.grad(chunked, preds)
    torch.testing.assert_close(chunked, whole)
    torch.testing.assert_close(g_chunked, g_whole)


@pytest.mark.parametrize(("loss", "kwargs"), ALL)
def test_losses_prefer_the_ideal_order_and_ignore_padding(loss, kwargs):
    if kwargs.get("weighting") == "ndcg_loss1":  # @k its weights vanish when no relevant document is in the top k
        kwargs = {"weighting": "ndcg_loss1"}
    target = torch.tensor([[3, 2, 0, 1, 0, 0]])
    mask = torch.tensor([[True, True, True, True, True, False]])
    good = t([[5.0, 4.0, 1.0, 2.0, 0.5, 9.0]])
    moved = good.clone()
    moved[0, 5] = -7.0
    assert loss(good, target, mask=mask, **kwargs) < loss(-good, target, mask=mask, **kwargs)
    torch.testing.assert_close(loss(good, target, mask=mask, **kwargs), loss(moved, target, mask=mask, **kwargs))


# ------------------------------------------------------------------------------------------ inputs
@pytest.mark.parametrize(("loss", "kwargs"), ALL)
def test_flat_input_with_indexes_equals_padded(loss, kwargs):
    target = torch.tensor([[2, 0, 1, 0], [0, 1, 3, 0]])
    preds = t([[0.3, 0.1, 0.7, 0.2], [0.5, 0.9, 0.4, 0.0]])
    mask = torch.tensor([[True, True, True, False], [True, True, True, True]])
    padded = loss(preds, target, mask=mask, reduction="none", **kwargs)
    indexes = torch.tensor([[7, 7, 7, 7], [3, 3, 3, 3]])[mask]
    flat = loss(preds[mask], target[mask], indexes=indexes, reduction="none", **kwargs)
    torch.testing.assert_close(flat, padded.flip(0))  # queries come out by id: 3, then 7


def test_one_list_and_the_reductions():
    preds, target = t([[0.3, 0.1, 0.7], [0.5, 0.9, 0.4]]), torch.tensor([[2, 0, 1], [0, 1, 0]])
    per_list = L.lambda_loss(preds, target, reduction="none")
    assert L.lambda_loss(preds[1], target[1]).item() == pytest.approx(per_list[1].item())
    assert L.lambda_loss(preds, target, reduction="sum").item() == pytest.approx(per_list.sum().item())
    assert L.lambda_loss(preds, target).item() == pytest.approx(per_list.mean().item())


def test_empty_lists_skip_neg_error():
    preds, target = t([[0.3, 0.1], [0.5, 0.9]]), torch.tensor([[1, 0], [0, 0]])
    one = L.softmax(preds[:1], target[:1])
    assert L.softmax(preds, target).item() == pytest.approx(one.item())  # skip: left out of the mean
    assert L.softmax(preds, target, empty_target_action="neg").item() == pytest.approx(one.item() / 2)
    assert L.softmax(preds, target, reduction="none")[1].item() == 0.0
    with pytest.raises(ValueError, match="positive gain"):
        L.softmax(preds, target, empty_target_action="error")
    nothing = L.lambda_loss(preds[1:], target[1:])  # a mean over no list: 0, not NaN
    assert nothing.item() == 0.0


def test_ips_weights_multiply_the_gains():
    """weights=1/propensity on clicks with gain="linear" is the loss on the debiased gains of
    F.ips_gains (what the debiased metric measures), for every gain-based loss."""
    clicks = torch.tensor([[1, 0, 1, 0, 0], [0, 1, 0, 0, 1]])
    rho = t([[1.0, 0.5, 1 / 3, 0.25, 0.2], [1.0, 0.5, 1 / 3, 0.25, 0.2]])
    preds = t([[0.1, 0.4, 0.9, 0.2, 0.3], [0.8, 0.1, 0.3, 0.5, 0.2]])
    gains = F.ips_gains(clicks, rho, clip=0.3)
    weights = 1.0 / rho.clamp_min(0.3)
    for loss in (L.softmax, L.lambda_loss, L.approx_ndcg, L.neural_ndcg):
        via_weights = loss(preds, clicks, gain="linear", weights=weights, reduction="none")
        via_gains = loss(preds, gains.to(f64), gain="linear", reduction="none")
        torch.testing.assert_close(via_weights, via_gains)
    # and the debiased nDCG is what approx_ndcg tends to
    out = L.approx_ndcg(preds, clicks, gain="linear", weights=weights, temperature=1e-4, reduction="none")
    expected = F.position_debiased_ndcg(preds, clicks, propensities=rho, clip=0.3, reduction="none")
    torch.testing.assert_close(out, -expected.to(f64), atol=1e-6, rtol=0)


def test_per_list_weights_multiply_each_list():
    preds, target = t([[0.3, 0.1, 0.7], [0.5, 0.9, 0.4]]), torch.tensor([[2, 0, 1], [0, 1, 0]])
    per_list = L.ranknet(preds, target, reduction="none")
    weighted = L.ranknet(preds, target, weights=t([2.0, 0.5]), reduction="none")
    torch.testing.assert_close(weighted, per_list * t([2.0, 0.5]))


def test_generator_breaks_ties_at_random_and_reproducibly():
    preds, target = t([[0.5, 0.2, 0.9, 0.1]]), torch.tensor([[1, 1, 1, 0]])
    first = L.listmle(preds, target)  # tied grades in input order
    by_order = L.listmle(preds[:, [0, 1, 2, 3]], target)
    assert first.item() == pytest.approx(by_order.item())
    draws = {round(L.listmle(preds, target, generator=torch.Generator().manual_seed(s)).item(), 9) for s in range(20)}
    assert len(draws) > 1  # different tie orders
    again = L.listmle(preds, target, generator=torch.Generator().manual_seed(3))
    assert again.item() == pytest.approx(L.listmle(preds, target, generator=torch.Generator().manual_seed(3)).item())


def test_modules_wrap_the_functions():
    preds, target = t([[0.3, 0.1, 0.7]]), torch.tensor([[2, 0, 1]])
    module = L.LambdaLoss(k=2, weighting="lambdarank")
    assert module(preds, target).item() == pytest.approx(L.lambda_loss(preds, target, 2, weighting="lambdarank").item())
    assert "weighting='lambdarank'" in repr(module)
    for cls, fn in [
        (L.SoftmaxLoss, L.softmax),
        (L.ListNetLoss, L.listnet),
        (L.ListMLELoss, L.listmle),
        (L.RankNetLoss, L.ranknet),
        (L.ApproxNDCGLoss, L.approx_ndcg),
        (L.NeuralNDCGLoss, L.neural_ndcg),
    ]:
        assert cls()(preds, target, reduction="none").tolist() == fn(preds, target, reduction="none").tolist()


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: L.softmax([0.1], torch.tensor([1])), TypeError, "preds"),
        (lambda: L.softmax(torch.tensor([1, 2]), torch.tensor([1, 0])), TypeError, "preds"),
        (lambda: L.softmax(torch.zeros(3), torch.zeros(2)), ValueError, "same shape"),
        (lambda: L.softmax(torch.tensor([0.1, float("nan")]), torch.tensor([1, 0])), ValueError, "NaN"),
        (lambda: L.softmax(torch.zeros(2), torch.tensor([1, 0]), reduction="avg"), ValueError, "reduction"),
        (lambda: L.softmax(torch.zeros(2), torch.tensor([1, 0]), empty_target_action="pos"), ValueError, "empty"),
        (lambda: L.softmax(torch.zeros(2), torch.tensor([1, 0]), weights=torch.ones(3)), ValueError, "weights"),
        (
            lambda: L.softmax(torch.zeros(2), torch.tensor([1, 0]), weights=torch.tensor([1.0, -1.0])),
            ValueError,
            "weights",
        ),
        (lambda: L.softmax(torch.zeros(2), torch.tensor([1, 0]), weights=torch.tensor([1, 1])), TypeError, "weights"),
        (lambda: L.lambda_loss(torch.zeros(2), torch.tensor([1, 0]), k=0), TypeError, "k must"),
        (lambda: L.lambda_loss(torch.zeros(2), torch.tensor([1, 0]), k=[1, 2]), TypeError, "k must"),
        (lambda: L.lambda_loss(torch.zeros(2), torch.tensor([1, 0]), weighting="lambdamart"), ValueError, "weighting"),
        (lambda: L.lambda_loss(torch.zeros(2), torch.tensor([1, 0]), sigma=0.0), ValueError, "sigma"),
        (lambda: L.approx_ndcg(torch.zeros(2), torch.tensor([1, 0]), temperature=0), ValueError, "temperature"),
        (lambda: L.neural_ndcg(torch.zeros(2), torch.tensor([1, 0]), sinkhorn_iters=-1), ValueError, "sinkhorn_iters"),
        (lambda: L.softmax(torch.zeros(2), torch.tensor([1, 0]), gain="exp3"), ValueError, "gain"),
        (lambda: L.softmax(torch.zeros(2), torch.tensor([1, 0]), convention="tf"), ValueError, "convention"),
        (
            lambda: L.softmax(
                torch.zeros(2), torch.tensor([1, 0]), indexes=torch.tensor([0, 0]), mask=torch.ones(2, dtype=torch.bool)
            ),
            ValueError,
            "mask",
        ),
        (
            lambda: L.softmax(torch.zeros(2), torch.tensor([1, 0]), indexes=torch.tensor([0.0, 0.0])),
            TypeError,
            "indexes",
        ),
        (
            lambda: L.lambda_weights(torch.zeros(1, 2), torch.tensor([[1, 0]]), weights=torch.ones(1)),
            ValueError,
            "per-item",
        ),
    ],
)
def test_bad_input_names_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ------------------------------------------------------------------------------------------ rax
# google/rax, rax/_src/losses_test.py (scores [0, 3, 1, 2], labels [0, 0, 1, 1], reduce_fn=jnp.sum)
def _rax_log_softmax(scores: list[float], i: int) -> float:
    return math.log(math.exp(scores[i]) / sum(math.exp(s) for s in scores))


def test_rax_computes_loss_value():
    """LossesTest.test_computes_loss_value: softmax_loss (rax does not normalise the labels: ours times
    the label sum, gain="linear"), listmle_loss (tied labels in input order, as ours without a
    generator), pairwise_logistic_loss (a sum over pairs, as ours)."""
    s, y = [0.0, 3.0, 1.0, 2.0], [0.0, 0.0, 1.0, 1.0]
    scores, labels = t(s), t(y)
    softmax = L.softmax(scores, labels, gain="linear").item() * 2.0
    assert softmax == pytest.approx(-(_rax_log_softmax(s, 2) + _rax_log_softmax(s, 3)), rel=1e-9)
    listmle = -sum(
        [
            log(exp(1.0) / (exp(1.0) + exp(2.0) + exp(0.0) + exp(3.0))),
            log(exp(2.0) / (exp(2.0) + exp(0.0) + exp(3.0))),
            log(exp(0.0) / (exp(0.0) + exp(3.0))),
            log(exp(3.0) / (exp(3.0))),
        ]
    )
    assert L.listmle(scores, labels).item() == pytest.approx(listmle, rel=1e-9)
    pairwise = logloss(1.0 - 0.0) + logloss(1.0 - 3.0) + logloss(2.0 - 3.0) + logloss(2.0 - 0.0)
    assert L.ranknet(scores, labels).item() == pytest.approx(pairwise, rel=1e-9)


def test_rax_computes_weighted_loss_value():
    """LossesTest.test_computes_weighted_loss_value: per-item weights [1, 1, 2, 1]; rax's
    pairwise_logistic_loss weighs a pair by the more relevant item (5.320569, as ours); its
    softmax_loss multiplies the labels by the weights (ours normalised by sum(w * label) = 3)."""
    s, y, w = [0.0, 3.0, 2.0, 1.0], [0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 2.0, 1.0]
    assert L.ranknet(t(s), t(y), weights=t(w)).item() == pytest.approx(5.320569, abs=1e-6)
    softmax = L.softmax(t(s), t(y), gain="linear", weights=t(w)).item() * 3.0
    assert softmax == pytest.approx(-(2.0 * _rax_log_softmax(s, 2) + _rax_log_softmax(s, 3)), rel=1e-9)


def test_rax_computes_loss_for_zero_labels():
    """LossesTest.test_computes_loss_for_zero_labels: softmax and pairwise losses are 0 without a
    relevant item (ours: the empty list, 0 under every reduction); rax's listmle still scores the
    input order, ours skips the list (the metrics' empty-list policy)."""
    scores, labels = t([0.0, 3.0, 1.0, 2.0]), t([0.0, 0.0, 0.0, 0.0])
    for loss in (L.softmax, L.ranknet, L.lambda_loss, L.listmle):
        assert loss(scores, labels, reduction="sum").item() == 0.0


def test_rax_computes_loss_value_with_vmap():
    """LossesTest.test_computes_loss_value_with_vmap, second list: scores [3, 1, 4, 2], labels [2, 0, 1, 0]."""
    s, y = [3.0, 1.0, 4.0, 2.0], [2.0, 0.0, 1.0, 0.0]
    listmle = -sum(
        [
            log(exp(3.0) / (exp(3.0) + exp(4.0) + exp(1.0) + exp(2.0))),
            log(exp(4.0) / (exp(4.0) + exp(1.0) + exp(2.0))),
            log(exp(1.0) / (exp(1.0) + exp(2.0))),
            log(exp(2.0) / (exp(2.0))),
        ]
    )
    assert L.listmle(t(s), t(y)).item() == pytest.approx(listmle, rel=1e-9)
    pairwise = logloss(3.0 - 1.0) + logloss(3.0 - 4.0) + logloss(3.0 - 2.0) + logloss(4.0 - 1.0) + logloss(4.0 - 2.0)
    assert L.ranknet(t(s), t(y)).item() == pytest.approx(pairwise, rel=1e-9)
    softmax = -(2.0 * _rax_log_softmax(s, 0) + _rax_log_softmax(s, 2))
    assert L.softmax(t(s), t(y), gain="linear").item() * 3.0 == pytest.approx(softmax, rel=1e-9)


@pytest.mark.parametrize("k", [None, 1, 3])
def test_lambdarank_loss_is_the_lambda_weights_times_the_pair_losses(k):
    """lambda_loss(weighting="lambdarank") = sum over pairs with G_i > G_j of lambda_weights * log2(1 + e^-(s_i - s_j))."""
    preds, target, mask = _random_lists(11, n=4, length=8)
    w = L.lambda_weights(preds, target, k, mask=mask)
    gains = torch.exp2(target.to(f64)) - 1
    above = (gains[:, :, None] > gains[:, None, :]) & mask[:, :, None] & mask[:, None, :]
    pair = torch.log2(1 + torch.exp(-(preds[:, :, None] - preds[:, None, :])))
    expected = (w * pair * above).sum((1, 2))
    out = L.lambda_loss(preds, target, k, mask=mask, weighting="lambdarank", reduction="none")
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("k", [1, 2, 5])
def test_ranknet_at_k_counts_the_pairs_with_a_member_in_the_top_k(k):
    preds, target, mask = _random_lists(12, n=4, length=8)
    ranks = preds.masked_fill(~mask, float("-inf")).argsort(1, descending=True).argsort(1) + 1
    top = (ranks[:, :, None] <= k) | (ranks[:, None, :] <= k)
    above = (target[:, :, None] > target[:, None, :]) & mask[:, :, None] & mask[:, None, :]
    pair = torch.log1p(torch.exp(-(preds[:, :, None] - preds[:, None, :])))
    expected = (pair * above * top).sum((1, 2))
    torch.testing.assert_close(L.ranknet(preds, target, k, mask=mask, reduction="none"), expected)


def test_lambda_weights_rank_tied_scores_in_input_order_or_at_random():
    """Tied scores are ranked in input order (the metric's ties="first"): the weights are those of
    untied scores giving that order (checked against brute force above); or in a random order from
    generator= (reproducible with a seed)."""
    preds, target = t([[0.5, 0.5, 0.5, 0.1]]), torch.tensor([[0, 1, 2, 0]])
    untied = t([[4.0, 3.0, 2.0, 1.0]])  # the input order of the tied documents
    torch.testing.assert_close(L.lambda_weights(preds, target), L.lambda_weights(untied, target))
    draws = {
        tuple(L.lambda_weights(preds, target, generator=torch.Generator().manual_seed(s))[0, 0].tolist())
        for s in range(12)
    }
    assert len(draws) > 1
    again = [L.lambda_weights(preds, target, generator=torch.Generator().manual_seed(5)) for _ in range(2)]
    torch.testing.assert_close(again[0], again[1])
