"""The lean core's shared intermediates (issue 26) give the values of the plain paths.

- One prefix sum of the ranked (gain, relevance) pair serves every kernel of a plan that reads both
  (``Family.tie_sums``): the measures computed together equal each measure computed alone (its own
  prefix sum), and the tie-averaged values equal the mean over every order of the tied documents.
- A large batch on CPU sums its tie groups from the head and one pass for the group that crosses the
  width read, each statistic alone; a small one from the row's prefix sums (of the pair): the same values.
- AP's numerator and RR's sum divide by the ranks inside one product with a constant matrix
  (``cumulative_per_rank``): the values of dividing first, then summing.
- A CPU batch larger than ``_GPU_PATH_MAX_CPU`` sorts integer keys of its scores (``_int_key``): the
  order of the floats (checked pair by pair), the ties of the floats (``0.0`` ties ``-0.0``), and the
  values of the brute force over tie orders (small batches forced onto that path).
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

import torch_rankeval.functional as F
from torch_rankeval import RankingMetrics
from torch_rankeval.conventions import DEFAULT, Convention
from torch_rankeval.ranking import view
from torch_rankeval.ranking.view import _GPU_PATH_MAX_CPU, _ROW_PREFIX_MAX_CPU, RankedBatch, _int_key

MEASURES = ("ndcg", "map", "precision", "recall", "mrr", "hit_rate", "dcg")


def _names(measures: tuple[str, ...], ks: tuple[int, ...]) -> list[str]:
    return [f"{m}@{k}" for m in measures for k in ks] + ["r_precision"] * ("r_precision" in measures)


def _tied_batch(n: int, length: int, seed: int, *, pad: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    g = torch.Generator().manual_seed(seed)
    preds = (torch.rand(n, length, generator=g) * 4).round() / 4  # five score levels: many ties
    target = torch.randint(0, 4, (n, length), generator=g)
    target[:, ::3] = 0
    mask = (torch.rand(n, length, generator=g) > 0.2) if pad else None
    return preds, target, mask


@pytest.mark.parametrize("pad", [False, True])
@pytest.mark.parametrize("validate", [False, True])
def test_measures_together_equal_each_alone(pad: bool, validate: bool) -> None:
    preds, target, mask = _tied_batch(64, 12, seed=3, pad=pad)
    names = [*_names(MEASURES, (1, 3, 5, 12)), "r_precision"]  # 12: the whole list
    together = F.evaluate(preds, target, names, mask=mask, reduction="none", validate_args=validate)
    assert list(together) == names
    for name in names:
        alone = F.evaluate(preds, target, name, mask=mask, reduction="none", validate_args=validate)
        torch.testing.assert_close(together[name], alone[name], rtol=1e-6, atol=1e-7, msg=name)


def _brute_force(preds: torch.Tensor, target: torch.Tensor, measure: str, k: int | None) -> float:
    """The mean over every order of the tied documents of one list, each order scored without ties."""
    groups: dict[float, list[int]] = {}
    for i, s in enumerate(preds.tolist()):
        groups.setdefault(s, []).append(i)
    blocks = [groups[s] for s in sorted(groups, reverse=True)]
    values = []
    for order in itertools.product(*[itertools.permutations(b) for b in blocks]):
        flat = [j for b in order for j in b]
        ranked_scores = torch.arange(len(flat), 0, -1, dtype=torch.float64)  # no ties: this order
        scores = torch.empty(len(flat), dtype=torch.float64)
        scores[flat] = ranked_scores
        name = measure if k is None else f"{measure}@{k}"
        value = F.evaluate(scores.unsqueeze(0), target.unsqueeze(0), name, ties="first")
        values.append(float(next(iter(value.values()))))
    return sum(values) / len(values)


@pytest.fixture(params=["gpu_path", "cpu_large_path"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test on the GPU's path (the default for small CPU batches) and on the path of a large CPU
    batch (integer sort keys, separate tie sums), forced for small batches."""
    if request.param == "cpu_large_path":
        monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    return request.param


def test_pair_sums_give_the_expected_value_over_tie_orders(path: str) -> None:
    preds = torch.tensor([[0.9, 0.5, 0.5, 0.5, 0.2, 0.2, 0.1], [0.3, 0.3, 0.3, 0.3, 0.3, 0.8, 0.1]])
    target = torch.tensor([[0, 2, 0, 1, 1, 0, 3], [1, 0, 2, 0, 0, 0, 1]])
    got = F.evaluate(preds, target, _names(("ndcg", "map", "mrr", "precision", "recall"), (2, 4, 7)), reduction="none")
    for row in range(2):
        for key, value in got.items():
            name, _, cut = key.partition("@")
            want = _brute_force(preds[row], target[row], name, int(cut) if cut else None)
            assert float(value[row]) == pytest.approx(want, abs=2e-6), (row, key)


@pytest.mark.parametrize(
    "ms",
    [
        ("map", "r_precision", "ndcg@10", "ndcg", "mrr", "map@10", "precision@10"),
        ("ndcg@10", "map@10", "precision@10", "mrr@5"),  # cutoffs only: the group crossing the head is summed apart
    ],
    ids=["whole_and_cutoffs", "cutoffs_only"],
)
@pytest.mark.parametrize("validate", [False, True])
def test_large_batch_values_equal_small_batches(validate: bool, ms: tuple[str, ...]) -> None:
    """Whole-list MAP and R-precision of a large CPU batch (integer sort keys, separate tie sums, head
    sums) equal the same lists in small batches (the GPU's path: float sort, the pair's row prefix
    sums), with and without validation."""
    preds, target, mask = _tied_batch(2500, 64, seed=9, pad=True)
    assert preds.numel() > _ROW_PREFIX_MAX_CPU >= _GPU_PATH_MAX_CPU >= preds[:125].numel()
    big = RankingMetrics(ms, validate_args=validate)
    small = RankingMetrics(ms, validate_args=validate)
    big.update(preds, target, mask=mask)
    for lo in range(0, 2500, 125):
        small.update(preds[lo : lo + 125], target[lo : lo + 125], mask=mask[lo : lo + 125])
    a, b = big.compute(), small.compute()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-6, atol=1e-7, msg=key)


def test_cumulative_per_rank_equals_dividing_first() -> None:
    rb = RankedBatch(torch.tensor([[0.9, 0.5, 0.1, 0.3]]), torch.tensor([[1, 1, 0, 2]]), None, DEFAULT)
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    # hand-computed: k=1: 1; k=3: 1 + 2/2 + 3/3 = 3; whole list: 3 + 4/4 = 4
    assert rb.cumulative_per_rank(x, (1, 3, None)).tolist() == [[1.0, 3.0, 4.0]]


def _huge_gain(g: torch.Tensor) -> torch.Tensor:
    return g * 2e38  # grade 2: 4e38, beyond float32


def test_validation_screens_name_each_problem() -> None:
    """The cheaper screens of the validated path (one pass for both grade bounds, ``x * 0`` for
    finiteness) report the same problems, in the same order, as before."""
    preds = torch.tensor([[0.9, 0.5, 0.1], [0.3, 0.2, 0.1]])
    with pytest.raises(ValueError, match="negative grades"):
        F.ndcg(preds, torch.tensor([[0, -1, 2], [1, 0, 0]]))
    with pytest.raises(ValueError, match="grades >= 128"):
        F.ndcg(preds, torch.tensor([[0, 130, 2], [1, 0, 0]]))
    nan = float("nan")
    with pytest.raises(ValueError, match="NaN or infinite grades"):  # checked before the negative grade
        F.ndcg(preds, torch.tensor([[0.0, -1.0, nan], [1.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="NaN or infinite scores"):
        F.ndcg(torch.tensor([[0.9, float("-inf"), 0.1], [0.3, 0.2, 0.1]]), torch.tensor([[0, 1, 2], [1, 0, 0]]))
    with pytest.raises(ValueError, match="gains are not finite"):  # a gain callable whose sum overflows float32
        F.ndcg(preds, torch.tensor([[0, 1, 2], [1, 0, 0]]), gain=_huge_gain)
    assert float(F.ndcg(preds, torch.tensor([[0, 1, 2], [1, 0, 0]]))) > 0  # and good input passes


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_int_keys_order_and_tie_like_the_floats(dtype: torch.dtype) -> None:
    """Pair by pair, the integer keys compare as the floats do (Python's float comparison is the
    oracle): negative, zero of either sign, subnormal, huge and infinite scores."""
    tiny = torch.finfo(dtype).tiny / 4  # subnormal (0 in formats without them)
    values = [float("-inf"), -3e4, -2.5, -1.0, -tiny, -0.0, 0.0, tiny, 1e-3, 1.0, 2.5, 6e4, float("inf")]
    x = torch.tensor(values, dtype=torch.float64).to(dtype)
    key = _int_key(x).tolist()
    floats = x.tolist()
    for i, j in itertools.product(range(len(floats)), repeat=2):
        assert (key[i] < key[j]) == (floats[i] < floats[j]), (floats[i], floats[j])
        assert (key[i] == key[j]) == (floats[i] == floats[j]), (floats[i], floats[j])


def test_cpu_large_path_ties_signed_zeros_and_negative_scores(path: str) -> None:
    """Tied documents with scores ``0.0`` and ``-0.0`` and negative tied scores average as one group
    (brute force over the orders of the tied documents), on both paths, padded or not."""
    preds = torch.tensor([[0.0, -0.0, 0.5, -1.5, -1.5, -0.0], [-2.0, -2.0, -2.0, 3.0, -0.0, 0.0]])
    target = torch.tensor([[1, 0, 0, 2, 0, 1], [0, 1, 2, 0, 1, 0]])
    names = _names(("ndcg", "map", "mrr", "precision"), (1, 3, 6))
    got = F.evaluate(preds, target, names, reduction="none")
    mask = torch.ones_like(target, dtype=torch.bool)
    padded = F.evaluate(
        torch.cat([preds, torch.zeros(2, 2)], 1),
        torch.cat([target, torch.ones(2, 2, dtype=target.dtype)], 1),
        names,
        mask=torch.cat([mask, torch.zeros(2, 2, dtype=torch.bool)], 1),
        reduction="none",
    )
    for row in range(2):
        for key, value in got.items():
            name, _, cut = key.partition("@")
            want = _brute_force(preds[row], target[row], name, int(cut))
            assert float(value[row]) == pytest.approx(want, abs=2e-6), (row, key)
            assert float(padded[key][row]) == pytest.approx(want, abs=2e-6), (row, key, "padded")


@pytest.mark.parametrize("pad", [False, True])
def test_cpu_large_path_first_keeps_input_order_among_ties(pad: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ties="first"`` on integer keys: descending score, the earlier document first among equal
    scores (Python's stable ``sorted`` is the oracle), padding last."""
    monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    preds, target, mask = _tied_batch(40, 30, seed=5, pad=pad)
    preds = torch.where(torch.rand(preds.shape, generator=torch.Generator().manual_seed(1)) < 0.3, -preds, preds)
    rb = RankedBatch(preds, target, mask, Convention(ties="first"))
    assert not rb._sorted_key.is_floating_point()  # the integer path ran
    for row in range(preds.shape[0]):
        real = [i for i in range(preds.shape[1]) if mask is None or bool(mask[row, i])]
        want = sorted(real, key=lambda i: -float(preds[row, i]))  # stable: input order among ties
        assert rb.order[row, : len(real)].tolist() == want, row


# -- the large CPU path (integer sort keys, separate tie sums) against the oracles, small batches forced onto it
@pytest.mark.parametrize("seed", [0, 1])
def test_cpu_large_path_matches_pytrec_eval(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytrec_eval (trec_eval's C code) on padded random batches with exact ties and judged documents
    outside the list (tests/test_functional_trec_eval.py's check, run on the large CPU path)."""
    pytest.importorskip("pytrec_eval")
    from tests.test_functional_trec_eval import test_random_batches_match_pytrec_eval

    monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    test_random_batches_match_pytrec_eval(seed, 6)


def test_cpu_large_path_matches_trec_eval_collection(trec_eval_test_dir, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """trec_eval's own test collection and expected output (results with exact ties), on the large CPU path."""
    from tests.test_functional_trec_eval import test_trec_eval_collection_per_query

    monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    test_trec_eval_collection_per_query(trec_eval_test_dir)


def test_cpu_large_path_padding_anywhere_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The padding property (hypothesis, tests/test_properties.py) on the large CPU path: the padding's
    integer key sorts last and ties nothing."""
    from tests.test_properties import test_padding_anywhere_changes_nothing

    monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    test_padding_anywhere_changes_nothing()


def _dcg(grades: list[float], gain: str, k: int | None) -> float:
    """DCG of grades in ranked order, written out (log2 discount, the exp2 or linear gain)."""
    top = grades if k is None else grades[:k]
    return sum((2.0**g - 1 if gain == "exp2" else g) / math.log2(i + 2) for i, g in enumerate(top))


@pytest.mark.parametrize("gain", ["exp2", "linear"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
@pytest.mark.parametrize("ideal", [False, True])
@pytest.mark.parametrize("validate", [False, True])
def test_cpu_large_path_ideal_and_head_from_the_grades(
    gain: str, dtype: torch.dtype, ideal: bool, validate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the large CPU path, integer grades under the exp2 or linear gain rank the ideal by the grades
    themselves and read the head's gains at its positions (no row of gains): nDCG equals the formula
    written out over Python's sorted grades, with padding, with an ``ideal_target`` (its own padding),
    and with negative grades under the linear gain (the padding still ranks after them)."""
    monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    g = torch.Generator().manual_seed(4)
    n, length, m = 40, 9, 12
    low = -3 if gain == "linear" and dtype != torch.uint8 else 0
    pad = 255 if dtype == torch.uint8 else -99  # ignore_index: padding of the ideal_target
    preds = torch.rand(n, length, generator=g, dtype=torch.float64)  # distinct scores: one order
    target = torch.randint(low, 5, (n, length), generator=g).to(dtype)
    mask = torch.rand(n, length, generator=g) > 0.25
    mask[0] = False  # a list of padding only
    kw: dict = {"mask": mask}
    if ideal:  # the list's judged documents, others judged outside it, and padding
        extra = torch.randint(low, 5, (n, m - length), generator=g)
        extra[:, -1] = pad
        kw.update(
            ideal_target=torch.cat([torch.where(mask, target.long(), pad), extra], dim=1).to(dtype), ignore_index=pad
        )
    rb = RankedBatch(preds, target, mask, Convention(gain=gain))
    assert rb._gains_of_grades  # the route under test
    got = {k: F.ndcg(preds, target, k, gain=gain, reduction="none", validate_args=validate, **kw) for k in (3, None)}
    for row in range(n):
        real = [i for i in range(length) if mask[row, i]]
        ranked = [float(target[row, i]) for i in sorted(real, key=lambda i: -float(preds[row, i]))]
        pool = kw["ideal_target"][row].tolist() if ideal else target[row, real].tolist()
        best = sorted((float(v) for v in pool if v != pad), reverse=True)
        for k, values in got.items():
            idcg = _dcg(best, gain, k)
            want = _dcg(ranked, gain, k) / idcg if idcg > 0 else 0.0
            assert float(values[row]) == pytest.approx(want, abs=1e-12), (row, k)


@pytest.mark.parametrize("low", [0, 1, -2])
@pytest.mark.parametrize("cutoffs", [(5,), (1, 5, 20, None)])
@pytest.mark.parametrize("pad", [False, True])
def test_cpu_large_path_ideal_dcg_from_the_grade_histogram(
    low: int, cutoffs: tuple, pad: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ideal DCG read from the grades' histogram (``RankedBatch.ideal_discounted``: each level's gain
    step times the discounts of the positions its documents fill) equals the formula written out over
    Python's sorted grades: one cutoff and several (past the row's length, and the whole list), grades
    from 0, from 1 (the lowest level's own gain counts at every position) and negative (linear gain),
    with padding whose grades are anything, and lists of padding only or of one grade only."""
    monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    used: list = []
    steps = RankedBatch._level_steps

    def spy(self: RankedBatch):  # noqa: ANN202
        used.append(True)
        return steps(self)

    monkeypatch.setattr(RankedBatch, "_level_steps", spy)
    gain = "linear" if low < 0 else "exp2"
    g = torch.Generator().manual_seed(11)
    n, length = 25, 12
    preds = torch.randint(0, 4, (n, length), generator=g).float()  # heavy ties: the DCG side averages
    target = torch.randint(low, 5, (n, length), generator=g)
    target[1] = low + 1  # a list of one grade
    mask = torch.rand(n, length, generator=g) > 0.3 if pad else torch.ones(n, length, dtype=torch.bool)
    if pad:
        mask[0] = False  # a list of padding only
        target = torch.where(mask, target, torch.randint(-50, 60, (n, length), generator=g))
    names = [f"ndcg@{k}" if k else "ndcg" for k in cutoffs]
    kw: dict = {"mask": mask} if pad else {}
    got = F.evaluate(preds.double(), target, names, gain=gain, reduction="none", **kw)
    assert used  # the route under test
    for row in range(n):
        real = [i for i in range(length) if mask[row, i]]
        best = sorted((float(target[row, i]) for i in real), reverse=True)
        for k, name in zip(cutoffs, names):
            idcg = _dcg(best, gain, k)
            # the expected DCG over the orders of tied scores: each position's expected gain is its group's mean
            by_score: dict = {}
            for i in real:
                by_score.setdefault(float(preds[row, i]), []).append(float(target[row, i]))
            gains = []
            for score in sorted(by_score, reverse=True):
                group = [(2.0**v - 1 if gain == "exp2" else v) for v in by_score[score]]
                gains += [sum(group) / len(group)] * len(group)
            top = gains if k is None else gains[:k]
            dcg = sum(x / math.log2(i + 2) for i, x in enumerate(top))
            want = dcg / idcg if idcg > 0 else 0.0
            assert float(got[name][row]) == pytest.approx(want, abs=1e-12), (row, name)


def _ap(ranked_rel: list[bool], n_rel: int, k: int | None) -> float:
    """Average precision of a ranked list of relevance flags, written out (trec_eval: over every relevant)."""
    hits, total = 0, 0.0
    for i, rel in enumerate(ranked_rel if k is None else ranked_rel[:k]):
        if rel:
            hits += 1
            total += hits / (i + 1)
    return total / n_rel if n_rel else 0.0


@pytest.mark.parametrize("spread", ["narrow", "negative", "wide"])
@pytest.mark.parametrize("threshold", [None, 0.5, 2, 3.5])
@pytest.mark.parametrize("pad", [False, True])
@pytest.mark.parametrize("validate", [False, True])
def test_cpu_large_path_grade_histogram_ideal_and_relevant_counts(
    spread: str, threshold: float | None, pad: bool, validate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large CPU batch in eager mode ranks its ideal and counts its relevant documents from one
    histogram of its grades (``RankedBatch._level_counts``, the range read from memory): nDCG and AP,
    whole-list and at a cutoff, equal the formulas written out over Python's sorted grades, for grades
    from 0, with negative grades, and with a range wider than the row (no histogram: ``torch.topk``),
    with and without padding (whose grades, anything, count nowhere), under relevance thresholds."""
    monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    made: list = []
    level_counts = RankedBatch._level_counts

    def spy(self: RankedBatch):  # noqa: ANN202
        made.append(level_counts(self))
        return made[-1]

    monkeypatch.setattr(RankedBatch, "_level_counts", spy)
    g = torch.Generator().manual_seed(7)
    n, length = 30, 8
    low, high = {"narrow": (0, 4), "negative": (-2, 3), "wide": (0, 40)}[spread]
    preds = torch.rand(n, length, generator=g, dtype=torch.float64)  # distinct scores: one order
    target = torch.randint(low, high + 1, (n, length), generator=g)
    target[1] = low  # a list of the lowest grade only
    mask = torch.rand(n, length, generator=g) > 0.3 if pad else torch.ones(n, length, dtype=torch.bool)
    if pad:
        mask[0] = False  # a list of padding only
        target = torch.where(mask, target, torch.randint(-50, 60, (n, length), generator=g))  # any grade
    names = ["ndcg@3", "ndcg", "map@3", "map"]
    kw: dict = {"mask": mask} if pad else {}
    got = F.evaluate(
        preds,
        target,
        names,
        gain="linear",
        relevance_threshold=threshold,
        reduction="none",
        validate_args=validate,
        **kw,
    )
    assert made and all((m is not None) == (spread != "wide") for m in made)  # the route under test
    thr = 1 if threshold is None else threshold
    for row in range(n):
        real = [i for i in range(length) if mask[row, i]]
        ranked = [float(target[row, i]) for i in sorted(real, key=lambda i: -float(preds[row, i]))]
        best = sorted(ranked, reverse=True)
        n_rel = sum(v >= thr for v in ranked)
        for k in (3, None):
            idcg = _dcg(best, "linear", k)
            ndcg = _dcg(ranked, "linear", k) / idcg if idcg > 0 else 0.0
            suffix = "" if k is None else f"@{k}"
            assert float(got["ndcg" + suffix][row]) == pytest.approx(ndcg, abs=1e-12), (row, k)
            want = _ap([v >= thr for v in ranked], n_rel, k)
            assert float(got["map" + suffix][row]) == pytest.approx(want, abs=1e-12), (row, k, n_rel)


GRADE_CASES = {  # grades planted into a batch of grades 0-3: the error expected, or None (values checked)
    "negative": ([(0, 2, -1)], "has negative grades"),
    "overflow": ([(3, 5, 128)], r"has grades >= 128"),
    "padding": ([(0, 1, -7), (4, 6, 300)], None),  # padding slots: any grade, no error
    "near_limit": ([(r, 3, 121) for r in range(6)], None),  # 8 x 2**121 < 2**128: sums not checked
    "wide_but_finite": ([(2, c, 125) for c in range(4)], None),  # checked: 4 x 2**125 is finite
    "sums_overflow": ([(2, c, 127) for c in range(8)], "the gains are not finite"),  # 8 x 2**127 is not
}


@pytest.mark.parametrize("case", list(GRADE_CASES))
@pytest.mark.parametrize("validate", [True, False])
def test_cpu_large_path_validation_reads_the_grade_range_once(
    case: str, validate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validated, a large CPU batch in eager mode reads its integer grades' range once
    (``RankedBatch.grade_range``): the exp2 gain's checks (negative grades, grades >= 128 in float32)
    and its ideal's histogram share it, and the sums of the gains are checked only where the row's
    length times the largest gain nears the float range. Errors as on every route; values equal the
    formulas written out over Python's sorted grades (padding's grades count nowhere)."""
    monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    reads = []
    aminmax = torch.aminmax
    monkeypatch.setattr(torch, "aminmax", lambda *a, **kw: reads.append(1) or aminmax(*a, **kw))
    g = torch.Generator().manual_seed(3)
    n, length = 6, 8
    preds = torch.rand(n, length, generator=g)  # distinct scores: one order
    target = torch.randint(0, 4, (n, length), generator=g)
    mask = torch.ones(n, length, dtype=torch.bool)
    if case == "padding":
        mask[0, 1] = mask[4, 6] = False
    planted, error = GRADE_CASES[case]
    for r, c, v in planted:
        target[r, c] = v
    names = ["ndcg@3", "ndcg", "map"]
    if error is not None:
        if not validate:
            return  # unvalidated: undefined, as docs/guide/edge-cases.md says
        with pytest.raises(ValueError, match=error):
            F.evaluate(preds, target, names, gain="exp2")
        return
    kw = {"mask": mask} if case == "padding" else {}
    got = F.evaluate(preds, target, names, gain="exp2", reduction="none", validate_args=validate, **kw)
    assert len(reads) == 1  # one range, read once: by the checks and the histogram alike
    for row in range(n):
        real = [i for i in range(length) if mask[row, i]]
        ranked = [float(target[row, i]) for i in sorted(real, key=lambda i: -float(preds[row, i]))]
        best = sorted(ranked, reverse=True)
        for k in (3, None):
            want = _dcg(ranked, "exp2", k) / _dcg(best, "exp2", k)
            assert float(got["ndcg" if k is None else "ndcg@3"][row]) == pytest.approx(want, rel=1e-5), (row, k)
        want = _ap([v >= 1 for v in ranked], sum(v >= 1 for v in ranked), None)
        assert float(got["map"][row]) == pytest.approx(want, abs=1e-6), row


# -- the head ranking (RankedBatch(head=)): a plan of cutoff measures that the top-k route serves ranks, on
# the large CPU path, only the positions its deepest cutoff reads (torch.topk of the scores)
HEAD_MEASURES = ("ndcg", "map", "mrr", "precision", "recall", "hit_rate")


def _brute_force_all(preds: torch.Tensor, target: torch.Tensor, names: list[str]) -> dict[str, float]:
    """Every measure of ``names`` averaged over every order of the tied documents of one list (each
    order scored without ties, ``ties="first"``)."""
    groups: dict[float, list[int]] = {}
    for i, s in enumerate(preds.tolist()):
        groups.setdefault(s, []).append(i)  # 0.0 and -0.0 are one key
    blocks = [groups[s] for s in sorted(groups, reverse=True)]
    sums = dict.fromkeys(names, 0.0)
    count = 0
    for order in itertools.product(*[itertools.permutations(b) for b in blocks]):
        flat = [j for b in order for j in b]
        scores = torch.empty(len(flat), dtype=torch.float64)
        scores[flat] = torch.arange(len(flat), 0, -1, dtype=torch.float64)
        values = F.evaluate(scores.unsqueeze(0), target.unsqueeze(0), names, ties="first")
        for name in names:
            sums[name] += float(values[name])
        count += 1
    return {name: total / count for name, total in sums.items()}


@pytest.mark.parametrize(
    "names",
    [
        _names(HEAD_MEASURES, (1, 2, 4)),
        _names(HEAD_MEASURES, (1,)),
        ["ndcg@2", "map@2", "precision@2", "hit_rate@3", "recall@4"],
    ],
    ids=["head4", "head1", "head4_read_to_2_3_4"],
)
@pytest.mark.parametrize("pad", [False, True])
@pytest.mark.parametrize("validate", [False, True])
def test_head_ranking_gives_the_expected_value_over_tie_orders(
    names: list[str], pad: bool, validate: bool, ranked_batches: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tie groups that cross every cutoff (the deepest one included: its group is summed over the row's
    documents of its score; a head of one position too), ``0.0`` tying ``-0.0``, negative scores, a list of one tie group but
    for two documents, and padding whose scores equal a real group's: the brute force over tie orders. Measures
    that read the head to different depths (nDCG and AP to 2 of a head of 4: their tie groups cross a width
    inside the head) too."""
    monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    seen = ranked_batches
    preds = torch.tensor(
        [
            [0.9, 0.5, 0.5, 0.5, 0.2, 0.2, 0.1, 0.5],
            [0.0, -0.0, 0.3, -1.5, -1.5, 0.0, 0.3, -2.0],
            [0.4, 0.4, 0.4, 0.9, 0.4, 0.1, 0.1, 0.4],
        ]
    )
    target = torch.tensor([[0, 2, 0, 1, 1, 0, 3, 1], [1, 0, 2, 0, 1, 2, 0, 1], [0, 1, 0, 0, 2, 0, 0, 1]])
    ks = [int(name.partition("@")[2]) for name in names]
    kw: dict = {"reduction": "none", "validate_args": validate}
    p, t = preds, target
    if pad:  # padding scored like the tied groups, with relevant grades: it must join none of them
        p = torch.cat([preds, torch.tensor([[0.5, 0.5], [0.0, 0.3], [0.4, 0.4]])], 1)
        t = torch.cat([target, torch.full((3, 2), 3)], 1)
        kw["mask"] = torch.cat([torch.ones(3, 8, dtype=torch.bool), torch.zeros(3, 2, dtype=torch.bool)], 1)
    got = F.evaluate(p, t, names, **kw)
    assert seen and all(rb.truncated and rb.length == max(ks) and rb.row_length == p.shape[1] for rb in seen)
    for row in range(3):
        want = _brute_force_all(preds[row], target[row], names)
        for name in names:
            assert float(got[name][row]) == pytest.approx(want[name], abs=2e-6), (row, name)


def test_head_ranking_hand_computed_ndcg(ranked_batches: list, monkeypatch: pytest.MonkeyPatch) -> None:
    """nDCG@2 of scores (0.9, 0.5, 0.5, 0.5, 0.1), grades (0, 1, 0, 0, 2), written out: rank 1 gains 0;
    rank 2 holds one of the three documents tied at 0.5, one of them relevant, so its expected gain is
    (2^1 - 1) / 3, discounted by 1 / log2(3); the ideal is 3 + 1 / log2(3)."""
    monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    seen = ranked_batches
    preds = torch.tensor([[0.9, 0.5, 0.5, 0.5, 0.1]])
    target = torch.tensor([[0, 1, 0, 0, 2]])
    got = F.evaluate(preds, target, ["ndcg@2"], reduction="none")["ndcg@2"]
    want = (1 / 3 / math.log2(3)) / (3 + 1 / math.log2(3))
    assert float(got[0]) == pytest.approx(want, abs=1e-7)
    assert seen[0].truncated and tuple(seen[0].order.shape) == (1, 2)


@pytest.mark.parametrize("scores", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("validate", [False, True])
@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"convention": "trec_eval"},
        {"denominator": "retrieved_relevant"},
        {"gain": "linear", "log_base": 3},
        {"ignore_index": -1},
        {"ideal_ranking": "k_relevant", "denominator": "min_k_relevant"},
        {"adaptive_k": True, "min_k_relevant": True},
    ],
)
def test_head_ranking_equals_the_sorted_row(
    scores: str, validate: bool, settings: dict, ranked_batches: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random batches with few or many ties (lists tied only past the head too), padding and empty
    lists: the head ranking's values equal the whole row's sort (the GPU's path, itself checked against
    the brute force and pytrec_eval above) under each convention."""
    seen = ranked_batches
    names = _names((*HEAD_MEASURES, "dcg"), (1, 3, 10))
    for seed, levels in enumerate((3, 20, 100_000)):
        g = torch.Generator().manual_seed(seed)
        preds = (torch.randint(0, levels, (60, 25), generator=g) / levels).to(getattr(torch, scores))
        target = torch.randint(-1 if "ignore_index" in settings else 0, 4, (60, 25), generator=g)
        mask = torch.rand(60, 25, generator=g) > 0.3
        mask[0], mask[1, 4:] = False, False  # an empty list, a list shorter than the head
        kw = {"mask": mask, "reduction": "none", "validate_args": validate, **settings}
        monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 1 << 62)
        want = F.evaluate(preds, target, names, **kw)
        monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
        seen.clear()
        got = F.evaluate(preds, target, names, **kw)
        averaged = seen[0].convention.ties == "average"  # the other tie policies order ties: a stable sort
        assert seen[0].truncated is averaged and seen[0].length == (10 if averaged else 25)
        for name in names:
            torch.testing.assert_close(got[name], want[name], rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize(
    ("names", "settings", "head"),
    [
        (["ndcg@10", "map@5"], {}, 10),
        (["ndcg@10", "map"], {}, None),  # a whole-list measure: the row is sorted
        (["ndcg@10", "r_precision"], {}, None),
        (["ndcg@10"], {"ties": "first"}, None),  # ties in input order: a stable sort
        (["ndcg@40"], {}, None),  # the cutoff reads the whole list
        (["err@10"], {}, None),  # a family the top-k route does not serve
        # inputs beyond the scores and grades (the top-k route's rule, MeasurePlan._route): the row is sorted
        (["ndcg@10"], {"judged": True}, None),
        (["ndcg@10"], {"n_relevant": True}, None),
        (["ndcg@10"], {"ideal_target": True}, None),
        (["ndcg@10", "map@5"], {"convention": "trec_eval"}, None),  # trec_eval orders ties: a sort
        (["ndcg@10", "map@5"], {"gain": "linear"}, 10),
    ],
)
def test_head_ranking_only_where_every_measure_reads_the_head(
    names: list[str], settings: dict, head: int | None, ranked_batches: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    seen = ranked_batches
    preds, target, _ = _tied_batch(8, 30, seed=2, pad=False)
    given = {
        "judged": torch.ones_like(preds, dtype=torch.bool),
        "n_relevant": (target > 0).sum(-1),
        "ideal_target": target,
    }
    F.evaluate(preds, target, names, **{k: given.get(k, v) if v is True else v for k, v in settings.items()})
    assert seen[0].truncated is (head is not None)
    assert seen[0].length == (30 if head is None else head)


@pytest.mark.parametrize(
    ("convention", "low"),
    [({}, 0), ({"gain": "linear", "relevance_threshold": 2}, -2)],  # exp2; linear, negative grades, threshold 2
    ids=["exp2", "linear_threshold_2"],
)
@pytest.mark.parametrize("validate", [False, True])
def test_cpu_large_path_head_pairs_equal_the_mean_over_tie_orders(
    convention: dict, low: int, validate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nDCG@k and AP@k read together on the large CPU path sum the head's gains and relevant counts
    as (gain, relevant) pairs looked up from the grades' levels, the tie group crossing the cutoff from
    its histogram (TieGroups._head_pair): each list equals the mean over every order of its tied
    documents, each order scored on its real documents alone (ties="first"), with padding between
    them whose grades (3) would gain and be relevant if they were read."""
    monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    made = []
    head_pair = view.TieGroups._head_pair

    def spy(self):  # noqa: ANN001, ANN202
        out = head_pair(self)
        made.append(out is not None)
        return out

    monkeypatch.setattr(view.TieGroups, "_head_pair", spy)
    g = torch.Generator().manual_seed(21)
    n, length, k = 6, 10, 3
    preds = torch.tensor([0.2, 0.5, 0.7, 0.9])[torch.randint(0, 4, (n, length), generator=g)]
    target = torch.randint(low, 4, (n, length), generator=g)
    mask = torch.rand(n, length, generator=g) > 0.25
    mask[:, 0] = False  # padding before every list's documents
    target = torch.where(mask, target, 3)
    names = [f"ndcg@{k}", f"map@{k}"]
    got = F.evaluate(preds, target, names, mask=mask, reduction="none", validate_args=validate, **convention)
    assert made and all(made)  # the pairs' path ran
    for row in range(n):
        p, t = preds[row][mask[row]], target[row][mask[row]]
        groups: dict[float, list[int]] = {}
        for i, s in enumerate(p.tolist()):
            groups.setdefault(s, []).append(i)
        blocks = [groups[s] for s in sorted(groups, reverse=True)]
        orders = [[j for b in o for j in b] for o in itertools.product(*[itertools.permutations(b) for b in blocks])]
        scores = torch.empty(len(orders), p.numel(), dtype=torch.float64)
        for r, flat in enumerate(orders):  # each order as distinct scores
            scores[r, flat] = torch.arange(p.numel(), 0, -1, dtype=torch.float64)
        each = F.evaluate(scores, t.expand(len(orders), -1), names, reduction="none", ties="first", **convention)
        for name in names:
            assert float(got[name][row]) == pytest.approx(float(each[name].mean()), abs=2e-6), (row, name)


@pytest.mark.parametrize(
    ("planted", "error"),
    [
        (float("nan"), True),
        (float("inf"), True),
        (float("-inf"), True),
        (3e38, False),  # finite, but the float32 sum of the row overflows: the exact re-check clears it
    ],
)
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("pad", [False, True])
def test_cpu_large_path_screens_the_scores_from_memory(
    planted: float, error: bool, ties: bool, pad: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validated, a large CPU batch in eager mode screens its scores from memory (without padding: one
    sum read as a number), its check flags read one by one (no copy into one tensor): a NaN or infinite
    score of a real document is the input stage's error, as on every route, one in a padding slot is
    not read; finite scores whose sum overflows pass, their values those of the batch on the GPU's path."""
    g = torch.Generator().manual_seed(8)
    preds = torch.rand(40, 9, generator=g)
    preds = (preds * 4).round() / 4 if ties else preds
    target = torch.randint(0, 4, (40, 9), generator=g)
    mask = torch.rand(40, 9, generator=g) > 0.2 if pad else None
    preds[5, 3] = preds[6, 0] = planted
    if mask is not None:
        mask[5, 3] = mask[6, 0] = True
        mask[7, 2] = False
        preds[7, 2] = float("nan")  # padding: never read
    names = ["ndcg@3", "map@3"]
    small = F.evaluate(preds, target, names, mask=mask, reduction="none") if not error else None
    monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    if error:
        with pytest.raises(ValueError, match="preds contains NaN or infinite scores"):
            F.evaluate(preds, target, names, mask=mask, reduction="none")
        return
    big = F.evaluate(preds, target, names, mask=mask, reduction="none")
    for name in names:
        torch.testing.assert_close(big[name], small[name], rtol=1e-6, atol=1e-7, msg=name)
