"""TF-Ranking's definitions (issue 28): PWA, bpref(trec=False) and per-item weights in ARP and OPA.

Every expected value is transcribed from TF-Ranking's own test file,
``tensorflow_ranking/python/metrics_impl_test.py`` (github.com/tensorflow/ranking, commit 5b1d133),
the test class and method named at each case; TensorFlow does not install here. TF-Ranking's
``metric.compute`` returns per-list values ``[[v], ...]``: they are compared with
``reduction="none"``. Where a case holds tied scores, the tie-averaged value is also checked
against the mean over every order of the tied documents.
"""

from __future__ import annotations

import io
import itertools

import pytest
import torch

from torch_rankeval import RankingMetrics, trec
from torch_rankeval import functional as F
from torch_rankeval import measures as M
from torch_rankeval.cli import main

TFR = "tensorflow_ranking/python/metrics_impl_test.py"


def _values(preds, target, name, **inputs) -> list[float]:
    return F.evaluate(preds, target, [name], reduction="none", **inputs)[name].reshape(-1).tolist()


def _tie_orders(preds: torch.Tensor, target: torch.Tensor, names: list[str], **inputs) -> None:
    """The tie-averaged values of one list equal the mean over every input order under ``ties="first"``."""
    n = preds.shape[-1]
    orders = torch.tensor(list(itertools.permutations(range(n))))
    per_order = {k: v[orders] for k, v in inputs.items()}
    each = F.evaluate(preds[orders], target[orders], names, ties="first", reduction="none", **per_order)
    averaged = F.evaluate(preds, target, names, **inputs)
    for name in names:
        torch.testing.assert_close(averaged[name], each[name].mean(), msg=name)


# ----------------------------------------------------------------------------- PWA
def test_pwa_should_be_single_value():
    """PWAMetricTest.test_pwa_should_be_single_value (topn=5 over lists of 3)."""
    scores = torch.tensor([[1.0, 3.0, 2.0], [4.0, 3.0, 2.0], [8.0, 7.0, 6.0]])
    labels = torch.tensor([[0.0, 1.0, 2.0], [4.0, 3.0, 2.0], [8.0, 7.0, 6.0]])
    h3 = 1 / 1 + 1 / 2 + 1 / 3
    expected = [2.0 / (11.0 / 6.0), (4 / 1 + 3 / 2 + 2 / 3) / h3, (8 / 1 + 7 / 2 + 6 / 3) / h3]
    assert _values(scores, labels, "pwa@5") == pytest.approx(expected)


def test_pwa_should_be_0_when_no_rel_item():
    """PWAMetricTest.test_pwa_should_be_0_when_no_rel_item (topn=None: the whole list)."""
    assert _values(torch.tensor([[1.0, 3.0, 2.0]]), torch.tensor([[0.0, 0.0, 0.0]]), "pwa") == [0.0]


def test_pwa_should_be_0_when_no_rel_item_in_topn():
    """PWAMetricTest.test_pwa_should_be_0_when_no_rel_item_in_topn."""
    assert _values(torch.tensor([[1.0, 3.0, 2.0]]), torch.tensor([[0.0, 0.0, 1.0]]), "PWA@1") == [0.0]


def test_pwa_should_handle_topn():
    """PWAMetricTest.test_pwa_should_handle_topn: topn 1, 2 and 6 (beyond the list: the whole list)."""
    scores = torch.tensor([[3.0, 2.0, 1.0]] * 3)
    labels = torch.tensor([[1.0, 2.0, 0.0], [2.0, 0.0, 1.0], [0.0, 2.0, 1.0]])
    assert _values(scores, labels, "pwa@1") == pytest.approx([1.0, 2.0, 0.0])
    assert _values(scores, labels, "pwa@2") == pytest.approx([2 / (3 / 2), 2 / (3 / 2), 1 / (3 / 2)])
    assert _values(scores, labels, "pwa@6") == pytest.approx([2 / (11 / 6), 7 / 3 / (11 / 6), 4 / 3 / (11 / 6)])


def test_pwa_should_ignore_masked_items():
    """PWAMetricTest.test_pwa_should_ignore_masked_items: a masked item is neither ranked nor weighed."""
    mask = torch.tensor([[True, False, True]])
    got = _values(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[0.0, 1.0, 3.0]]), "pwa", mask=mask)
    assert got == pytest.approx([3.0 / 1.0 / (3.0 / 2.0)])
    # TF-Ranking's other padding, a label of -1, is ignore_index=-1 here
    got = _values(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[0.0, -1.0, 3.0]]), "pwa", ignore_index=-1)
    assert got == pytest.approx([2.0])


def test_pwa_weights_no_input_weights():
    """PWAMetricTest.test_pwa_weights_no_input_weights: without weights every list weighs 1, so
    TF-Ranking's weighted mean over lists is the library's plain mean."""
    scores = torch.tensor([[1.0, 3.0, 2.0], [1.0, 2.0, 3.0]])
    labels = torch.tensor([[1.0, 4.0, 2.0], [0.0, 3.0, 1.0]])
    per_list = torch.tensor(_values(scores, labels, "pwa"))
    list_weights = torch.tensor([1.0, 1.0])  # TF-Ranking's expected output_weights
    mean = F.evaluate(scores, labels, ["pwa"])["pwa"]
    assert mean.item() == pytest.approx(((per_list * list_weights).sum() / list_weights.sum()).item())
    h3 = 1 + 1 / 2 + 1 / 3
    assert per_list.tolist() == pytest.approx([(4 + 2 / 2 + 1 / 3) / h3, (1 + 3 / 2) / h3])  # hand-computed


def test_pwa_weights_should_be_average_weight_of_rel_items():
    """PWAMetricTest.test_pwa_weights_should_be_average_weight_of_rel_items: per-list weights
    ``[[2], [3], [4]]`` leave the per-list values as without weights (they only weigh the mean over
    lists, which ``reduction="none"`` hands to the caller)."""
    scores = torch.tensor([[3.0, 2.0, 1.0]] * 3)
    labels = torch.tensor([[1.0, 2.0, 0.0], [2.0, 0.0, 1.0], [0.0, 2.0, 1.0]])
    expected = [2 / (11 / 6), 7 / 3 / (11 / 6), 4 / 3 / (11 / 6)]
    assert _values(scores, labels, "pwa") == pytest.approx(expected)
    list_weights = torch.tensor([2.0, 3.0, 4.0])
    weighted = (torch.tensor(expected) * list_weights).sum() / list_weights.sum()
    per_list = F.evaluate(scores, labels, ["pwa"], reduction="none")["pwa"]
    assert ((per_list * list_weights).sum() / list_weights.sum()).item() == pytest.approx(weighted.item())


def test_pwa_weights_should_raise_error_if_per_result():
    """PWAMetricTest.test_pwa_weights_should_raise_error_if_per_result: per-item weights are refused."""
    scores = torch.tensor([[3.0, 2.0, 1.0]] * 3)
    labels = torch.tensor([[1.0, 2.0, 0.0], [2.0, 0.0, 1.0], [0.0, 2.0, 1.0]])
    weights = torch.tensor([[2.0, 3.0, 2.0], [3.0, 7.0, 3.0], [8.0, 1.0, 4.0]])
    with pytest.raises(TypeError, match=r"weights= .* not by pwa"):
        F.evaluate(scores, labels, ["pwa"], weights=weights)


def test_pwa_tie_orders():
    g = torch.Generator().manual_seed(5)
    for _ in range(4):
        preds = torch.randint(0, 3, (6,), generator=g).double()
        target = torch.randint(0, 4, (6,), generator=g).double()
        _tie_orders(preds, target, ["pwa", "pwa@2", "pwa@4"])


# ----------------------------------------------------------------------------- bpref(trec=False)
def test_non_trec_bpref_should_be_one_when_only_relevant_items():
    """BPrefMetricTest.test_non_trec_bpref_should_be_one_when_only_relevant_items."""
    assert _values(torch.tensor([[3.0, 2.0, 1.0]]), torch.tensor([[1, 1, 1]]), "bpref(trec=False)") == [1.0]


def test_bpref_divides_with_r_when_use_trec_version_is_false():
    """BPrefMetricTest.test_bpref_divides_with_r_when_use_trec_version_is_false (0.5), beside
    test_trec_bpref_divides_with_min_and_is_0_when_one_irrelevant_first (0 for the default bpref)."""
    preds, target = torch.tensor([[3.0, 2.0, 1.0]]), torch.tensor([[0, 1, 1]])
    assert _values(preds, target, "bpref(trec=False)") == [0.5]
    assert _values(preds, target, "Bpref(trec=False)") == [0.5]  # ir_measures' spelling of the row
    assert _values(preds, target, "bpref") == [0.0]
    assert _values(preds, target, "bpref(trec=True)") == [0.0]


def test_non_trec_bpref_should_handle_topn():
    """BPrefMetricTest.test_non_trec_bpref_should_handle_topn (4 * (1 - 1/6) / 6) and
    test_trec_bpref_should_handle_topn (0.5). TF-Ranking's ``topn=5`` reads the run's top 5 and counts
    R and N over the whole list: here bpref has no cutoff, so the run is its top 5 and the whole list
    of judgments is ``ideal_target`` (the case of trec_eval's bpref_bug file)."""
    scores = torch.tensor([[5.0, 4.0, 3.0, 2.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    labels = torch.tensor([[0, 1, 1, 1, 1, 0, 0, 0, 1, 1]])
    top = (scores[:, :5], labels[:, :5])
    assert _values(*top, "bpref(trec=False)", ideal_target=labels) == pytest.approx([(4 * (1 - 1 / 6)) / 6])
    assert _values(*top, "bpref", ideal_target=labels) == pytest.approx([(4 * (1 - 1 / 4)) / 6])
    # the same run and judgments as TREC files
    qrels = {"q": {f"d{i}": int(g) for i, g in enumerate(labels[0].tolist())}}
    run = {"q": {f"d{i}": float(5 - i) for i in range(5)}}
    evaluation = trec.evaluate(qrels, run, ["bpref(trec=False)", "bpref"])
    assert evaluation.summary["bpref(trec=False)"] == pytest.approx((4 * (1 - 1 / 6)) / 6)
    assert evaluation.summary["bpref"] == pytest.approx(0.5)


def test_non_trec_bpref_ties_and_geometric_mean():
    g = torch.Generator().manual_seed(7)
    for _ in range(4):
        preds = torch.randint(0, 3, (6,), generator=g).double()
        target = torch.randint(0, 3, (6,), generator=g)
        _tie_orders(preds, target, ["bpref(trec=False)", "bpref"])
    preds = torch.tensor([[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]])
    target = torch.tensor([[0, 1, 1], [1, 0, 1]])
    per_list = _values(preds, target, "bpref(trec=False)")
    assert per_list == pytest.approx([0.5, 0.75])
    gm = F.evaluate(preds, target, ["gm_bpref(trec=False)"])["gm_bpref(trec=False)"]
    assert gm.item() == pytest.approx((0.5 * 0.75) ** 0.5)


def test_every_surface_takes_them_by_name(tmp_path):
    preds, target = torch.tensor([[3.0, 2.0, 1.0], [0.3, 0.2, 0.1]]), torch.tensor([[0, 1, 1], [2, 0, 1]])
    names = ("pwa@2", "bpref(trec=False)")
    metric = RankingMetrics(names)
    metric.update(preds, target)
    got = metric.compute()
    direct = F.evaluate(preds, target, list(names))
    for name in names:
        torch.testing.assert_close(got[name], direct[name].float())
    assert direct["pwa@2"].item() == pytest.approx(((0 + 1 / 2) / 1.5 + 2 / 1.5) / 2)
    qrels = {"q1": {"a": 0, "b": 1, "c": 1}, "q2": {"a": 2, "b": 0, "c": 1}}
    run = {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"a": 0.3, "b": 0.2, "c": 0.1}}
    trec.write_qrels(tmp_path / "qrels", qrels)
    trec.write_run(tmp_path / "run", run)
    evaluation = trec.evaluate(tmp_path / "qrels", tmp_path / "run", list(names))
    for name in names:
        assert evaluation.summary[name] == pytest.approx(direct[name].item())
    out = io.StringIO()
    assert main(["evaluate", str(tmp_path / "qrels"), str(tmp_path / "run"), "-m", "pwa@2", "-q"], out) == 0
    assert out.getvalue().splitlines()[-1].split()[-1] == f"{direct['pwa@2'].item():.4f}"
    with pytest.raises(TypeError, match=r"does not read gain="):
        RankingMetrics(("pwa",), gain="linear")
    assert "| `pwa` |" in M.api_table() and "| `pwa` |" in M.markdown_table()


# ----------------------------------------------------------------------------- per-item weights: ARP, OPA
def test_arp_should_weight_items_with_weights_and_labels():
    """ARPMetricTest.test_arp_should_weight_items_with_weights_and_labels."""
    scores = torch.tensor([[1.0, 3.0, 2.0], [1.0, 2.0, 3.0]])
    labels = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 2.0]])
    weights = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    expected = [2.0, 2.0 * (5.0 / (5.0 + 6.0 * 2.0)) + 1.0 * (6.0 * 2.0 / (5.0 + 6.0 * 2.0))]
    assert _values(scores, labels, "arp", weights=weights) == pytest.approx(expected)
    # ARPMetricTest.test_arp_weights_should_be_sum_of_weighted_labels: TF-Ranking weighs the lists by
    # [[3], [5 + 6 * 2]] in its mean over lists; the library's mean is the plain mean of the values
    metric = RankingMetrics(("arp",))
    metric.update(scores, labels, weights=weights)
    assert metric.compute()["arp"].item() == pytest.approx(sum(expected) / 2)
    per_list = F.evaluate(scores, labels, ["arp"], weights=weights, reduction="none")["arp"]
    list_weights = torch.tensor([3.0, 5.0 + 6.0 * 2.0])  # TF-Ranking's expected output_weights
    tf_ranking_mean = (per_list * list_weights).sum() / list_weights.sum()
    assert tf_ranking_mean.item() == pytest.approx((2.0 * 3.0 + 22.0) / 20.0)  # sum(rank * grade * w) / sum(grade * w)


def test_opa_should_weight_pairs_with_weights():
    """OPAMetricTest.test_opa_should_weight_pairs_with_weights: each pair weighs its higher-graded document."""
    scores, labels, weights = (
        torch.tensor([[1.0, 3.0, 2.0]]),
        torch.tensor([[1.0, 0.0, 2.0]]),
        torch.tensor([[3.0, 7.0, 9.0]]),
    )
    assert _values(scores, labels, "opa", weights=weights) == pytest.approx([9.0 / (9.0 + 9.0 + 3.0)])
    metric = RankingMetrics(("opa", "ordered_pair_accuracy"))
    metric.update(scores[0], labels[0], weights=weights[0])  # one (L,) list
    assert metric.compute()["opa"].item() == pytest.approx(9.0 / 21.0)


def _tfr_opa(preds, labels, weights):
    """TF-Ranking's OPAMetric._compute_impl written out with loops (weights > 0: every item valid)."""
    num = den = 0.0
    for i in range(len(preds)):
        for j in range(len(preds)):
            if labels[i] > labels[j]:
                den += weights[i]
                num += weights[i] * (preds[i] > preds[j])
    return num / den if den else 0.0


def _tfr_arp(preds, labels, weights):
    """TF-Ranking's ARPMetric._compute_impl written out (distinct scores: rank = 1 + higher scores)."""
    ranks = [1 + sum(p > q for p in preds) for q in preds]
    total = sum(g * w for g, w in zip(labels, weights))
    return sum(r * g * w for r, g, w in zip(ranks, labels, weights)) / total if total else 0.0


def test_weighted_arp_and_opa_against_tf_rankings_formula_and_tie_orders():
    g = torch.Generator().manual_seed(11)
    for _ in range(6):
        labels = torch.randint(0, 4, (2, 7), generator=g).double()
        weights = torch.rand(2, 7, generator=g, dtype=torch.float64) * 3 + 0.1
        distinct = torch.rand(2, 7, generator=g, dtype=torch.float64)
        tied = torch.randint(0, 3, (2, 7), generator=g).double()
        arp = _values(distinct, labels, "arp", weights=weights)
        opa = _values(distinct, labels, "opa", weights=weights)
        strict = _values(tied, labels, "opa", weights=weights, ties="pessimistic")  # TF-Ranking's strict >
        for i in range(2):
            p, t, w = distinct[i].tolist(), labels[i].tolist(), weights[i].tolist()
            assert arp[i] == pytest.approx(_tfr_arp(p, t, w))
            assert opa[i] == pytest.approx(_tfr_opa(p, t, w))
            assert strict[i] == pytest.approx(_tfr_opa(tied[i].tolist(), t, w))
    for _ in range(3):
        preds = torch.randint(0, 3, (6,), generator=g).double()
        target = torch.randint(0, 3, (6,), generator=g).double()
        weights = torch.rand(6, generator=g, dtype=torch.float64) + 0.5
        _tie_orders(preds, target, ["arp", "opa"], weights=weights)


def test_unit_weights_change_nothing_and_zero_weights_keep_their_rank():
    g = torch.Generator().manual_seed(13)
    preds = torch.randint(0, 4, (3, 8), generator=g).double()
    target = torch.randint(0, 3, (3, 8), generator=g)
    mask = torch.rand(3, 8, generator=g) > 0.2
    for name in ("arp", "opa"):
        plain = F.evaluate(preds, target, [name], mask=mask, reduction="none")[name]
        ones = F.evaluate(
            preds, target, [name], mask=mask, weights=torch.ones(3, 8, dtype=torch.float64), reduction="none"
        )
        torch.testing.assert_close(ones[name], plain)
    # a document of weight 0 adds nothing but keeps its rank; TF-Ranking drops it: mask=weights > 0
    preds, target = torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1.0, 1.0, 1.0]])
    weights = torch.tensor([[0.0, 1.0, 1.0]])
    assert _values(preds, target, "arp", weights=weights) == [2.5]
    assert _values(preds, target, "arp", weights=weights, mask=weights > 0) == [1.5]


def test_weights_are_refused_where_no_measure_reads_them():
    preds, target = torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 2]])
    weights = torch.ones(1, 3)
    with pytest.raises(TypeError, match=r"read only by opa, arp, not by ndcg@2"):
        F.evaluate(preds, target, ["arp", "ndcg@2"], weights=weights)
    metric = RankingMetrics(("opa", "map"))
    with pytest.raises(TypeError, match=r"not by map"):
        metric.update(preds, target, weights=weights)
    with pytest.raises(TypeError, match=r"weights must be a floating tensor"):
        F.evaluate(preds, target, ["arp"], weights=torch.ones(1, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"weights must have the shape of preds"):
        F.evaluate(preds, target, ["arp"], weights=torch.ones(1, 2))
    with pytest.raises(ValueError, match=r"weights must be finite and >= 0"):
        F.evaluate(preds, target, ["arp"], weights=torch.tensor([[1.0, -1.0, 1.0]]))
    with pytest.raises(ValueError, match=r"weights must be finite and >= 0"):
        F.evaluate(preds, target, ["opa"], weights=torch.tensor([[1.0, float("nan"), 1.0]]))
    # padding is never read: NaN weights under mask=False are fine
    mask = torch.tensor([[True, True, False]])
    got = _values(preds, target, "arp", weights=torch.tensor([[1.0, 1.0, float("nan")]]), mask=mask)
    assert got == pytest.approx([1.0])
    with pytest.raises(ValueError, match=r"weights and judged apply to padded"):
        RankingMetrics(("arp",)).update(
            torch.tensor([0.9, 0.1]), torch.tensor([1, 0]), indexes=torch.tensor([0, 0]), weights=torch.ones(2)
        )


def test_weights_through_the_compiled_update():
    """``compile=True`` carries the weights into its kernel (checked eagerly first), on inductor."""
    preds = torch.tensor([[1.0, 3.0, 2.0], [1.0, 2.0, 3.0]])
    target = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 2.0]])
    weights = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    compiled, eager = RankingMetrics(("arp", "opa"), compile=True), RankingMetrics(("arp", "opa"))
    compiled.update(preds, target, weights=weights)
    eager.update(preds, target, weights=weights)
    for name, value in eager.compute().items():
        torch.testing.assert_close(compiled.compute()[name], value)
    with pytest.raises(ValueError, match=r"weights must be finite and >= 0"):
        compiled.update(preds, target, weights=-weights)
    with pytest.raises(TypeError, match=r"not by ndcg"):
        RankingMetrics(("arp", "ndcg"), compile=True).update(preds, target, weights=weights)
