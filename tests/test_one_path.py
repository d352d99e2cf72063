"""One tie-exact path (issue 12) and exact ties at any group size (issue 13, item 2).

* Tie-heavy batches (every score equal, two tie groups across the cutoffs, bfloat16 logits) on the
  fast path (``validate_args=False``, functional and ``RankingMetrics.update``) equal the mean over
  every order of the tied documents, enumerated by brute force.
* ``update`` with ``validate_args=False`` makes no host sync (a CPU shim that refuses every sync;
  ``torch.cuda.set_sync_debug_mode("error")`` too when CUDA is there); with ``validate_args=True``
  it makes exactly one.
* Huge tie groups (10^4 to 10^6 documents) match exact big-integer / ``math.fsum`` values to 1e-6
  relative, in float32 outputs.
* ``compile=True`` gives the eager values.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from tests.sync_guard import HostSyncError, HostSyncGuard
from tests.test_ties import METRICS
from torch_rankeval import RankingMetrics
from torch_rankeval import functional as F

ALL = ("ndcg", "dcg", "map", "mrr", "precision", "recall", "hit_rate", "r_precision")


def permutation_mean(fn, preds: list[float], target: list[int], k, **kw) -> torch.Tensor:
    """Mean of ``fn`` over every order of the documents, ranked with a stable sort (``ties="first"``):
    each order of tied documents is equally likely, which is what ``ties="average"`` promises."""
    perms = torch.tensor(list(itertools.permutations(range(len(preds)))))
    p = torch.tensor(preds, dtype=torch.float64)[perms]
    t = torch.tensor(target)[perms]
    return fn(p, t, k, ties="first", reduction="none", **kw).mean(0)


TIE_HEAVY = {
    "every score equal": ([0.3] * 7, [1, 0, 2, 0, 0, 3, 1]),
    "every score equal, one relevant": ([0.0] * 7, [0, 0, 0, 0, 0, 1, 0]),
    "every score equal, none relevant": ([1.0] * 6, [0, 0, 0, 0, 0, 0]),
    "two groups across the cutoffs": ([0.9, 0.9, 0.9, 0.2, 0.2, 0.2, 0.2], [0, 2, 0, 1, 0, 0, 1]),
    "groups of one, two, three, one": ([3.0, 2.0, 2.0, 1.0, 1.0, 1.0, 0.0], [0, 1, 0, 0, 1, 1, 0]),
}


def bf16_logits(seed: int, n: int = 7) -> tuple[list[float], list[int]]:
    """Logits rounded to bfloat16 (8 significant bits): ties appear as they do in a bf16 model."""
    g = torch.Generator().manual_seed(seed)
    logits = (4 + torch.randn(n, generator=g) * 0.08).to(torch.bfloat16)  # spacing 1/64 below 4, 1/32 above
    return logits.double().tolist(), torch.randint(0, 3, (n,), generator=g).tolist()


CASES = {**TIE_HEAVY, **{f"bf16 logits {s}": bf16_logits(s) for s in (0, 1, 3)}}


def test_bf16_cases_do_tie():
    for name, (preds, _) in CASES.items():
        if name.startswith("bf16"):
            assert len(set(preds)) < len(preds), name


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("name", sorted(METRICS))
def test_fast_path_equals_the_mean_over_every_tie_order(name, case):
    preds, target = CASES[case]
    fn = METRICS[name]
    for k in (None, 1, 2, 3, 5, 10):
        want = permutation_mean(fn, preds, target, k)
        got = fn(
            torch.tensor(preds, dtype=torch.float64), torch.tensor(target), k, validate_args=False, reduction="none"
        )
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0, msg=f"{name} {case} k={k}")


@pytest.mark.parametrize("validate_args", [False, True])
def test_metric_update_on_a_tie_heavy_batch_equals_brute_force(validate_args):
    """RankingMetrics over a batch that mixes every case (padded to one length, bfloat16 scores)."""
    cases = list(CASES.values())
    length = max(len(p) for p, _ in cases)
    preds = torch.zeros(len(cases), length, dtype=torch.bfloat16)
    target = torch.zeros(len(cases), length, dtype=torch.long)
    mask = torch.zeros(len(cases), length, dtype=torch.bool)
    for i, (p, t) in enumerate(cases):
        preds[i, : len(p)] = torch.tensor(p, dtype=torch.bfloat16)  # exact: every case holds bf16 values
        target[i, : len(t)] = torch.tensor(t)
        mask[i, : len(p)] = True
    ks = (1, 3, 5)
    metric = RankingMetrics(ALL, k=ks, validate_args=validate_args)
    metric.update(preds, target, mask=mask)
    got = metric.compute()
    kernels = {
        "ndcg": F.ndcg,
        "dcg": F.dcg,
        "map": F.average_precision,
        "mrr": F.reciprocal_rank,
        "precision": F.precision,
        "recall": F.recall,
        "hit_rate": F.hit_rate,
    }
    for name, fn in kernels.items():
        per_case = torch.stack([permutation_mean(fn, p, t, list(ks)) for p, t in cases])
        torch.testing.assert_close(got_values(got, name, ks), per_case.mean(0).float(), atol=1e-6, rtol=0, msg=name)
    r_prec = torch.stack(
        [permutation_mean(lambda p, t, k, **kw: F.r_precision(p, t, **kw), p, t, None) for p, t in cases]
    )
    torch.testing.assert_close(got["r_precision"], r_prec.mean().float(), atol=1e-6, rtol=0)


def test_validated_tie_free_batch_takes_the_deterministic_formulas_with_the_same_values():
    """A validated batch without ties (read in the checks' own sync) skips the tie statistics; its
    values equal the general path's (validate_args=False) and the deterministic policy's."""
    g = torch.Generator().manual_seed(11)
    preds = torch.rand(64, 30, generator=g, dtype=torch.float64)
    target = torch.randint(0, 4, (64, 30), generator=g)
    mask = torch.rand(64, 30, generator=g) > 0.2
    from torch_rankeval.conventions import DEFAULT
    from torch_rankeval.ranking.inputs import prepare

    rb, _ = prepare(preds, target, convention=DEFAULT, mask=mask)
    assert not rb.averaged  # the shortcut was taken
    rb, _ = prepare(preds.round(decimals=1), target, convention=DEFAULT, mask=mask)
    assert rb.averaged  # a batch with ties keeps the general path
    out = {}
    for name, kw in {"validated": {}, "general": {"validate_args": False}, "first": {"ties": "first"}}.items():
        m = RankingMetrics(ALL, k=(1, 5, 40), **kw)
        m.update(preds, target, mask=mask)
        out[name] = m.compute()
    for key in out["general"]:
        torch.testing.assert_close(out["validated"][key], out["general"][key], atol=1e-12, rtol=0, msg=key)
        torch.testing.assert_close(out["first"][key], out["general"][key], atol=1e-12, rtol=0, msg=key)


@pytest.mark.parametrize(
    "settings", [{}, {"convention": "trec_eval", "ties": "average"}, {"denominator": "retrieved_relevant"}]
)
@pytest.mark.parametrize("route", ["validated", "unvalidated_large_cpu"])
def test_batch_with_a_few_tied_lists_redoes_only_them_with_the_same_values(route, settings, monkeypatch):
    """A validated batch where at most one list in eight holds a tie takes the plain formulas for the
    batch and recomputes the tied lists with tie statistics (they are read in the checks' one sync); so
    does an unvalidated CPU batch past ``_GPU_PATH_MAX_CPU`` in eager mode (read from memory: no device
    sync there; forced here for a small batch). Per-list values equal the general path's (tie
    statistics for every list: unvalidated without host reads, the path of CUDA) and the brute-force
    tie average."""
    import torch_rankeval.measures.plan as plan_module
    from torch_rankeval.ranking import view

    if route == "unvalidated_large_cpu":
        monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    g = torch.Generator().manual_seed(12)
    preds = torch.rand(64, 7, generator=g, dtype=torch.float64)
    target = torch.randint(0, 3, (64, 7), generator=g)
    mask = torch.rand(64, 7, generator=g) > 0.1
    tied = [3, 17, 40]
    for row, (p, t) in zip(
        tied, [CASES["two groups across the cutoffs"], CASES["every score equal"], CASES["bf16 logits 1"]]
    ):
        preds[row], target[row], mask[row] = torch.tensor(p, dtype=torch.float64), torch.tensor(t), True
    calls = []
    original = plan_module.prepare

    def spy(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        out = original(*args, **kw)
        calls.append((args[0].shape[0], out[0].split_rows))
        return out

    monkeypatch.setattr(plan_module, "prepare", spy)
    names = [*ALL, "ndcg@3", "map@2", "mrr@2", "precision@3", "hit_rate@2"]
    validate = route == "validated"
    fast = F.evaluate(preds, target, names, mask=mask, reduction="none", validate_args=validate, **settings)
    assert calls == [(64, tied), (3, None)]  # the batch, then the three tied lists
    with HostSyncGuard():
        general = F.evaluate(preds, target, names, mask=mask, reduction="none", validate_args=False, **settings)
    assert calls[2:] == [(64, None)]  # one pass, tie statistics for every list
    for name in names:
        torch.testing.assert_close(fast[name], general[name], atol=1e-12, rtol=0, msg=name)
    if not settings:
        for row in tied:
            p, t = preds[row].tolist(), target[row].tolist()
            torch.testing.assert_close(
                fast["map"][row], permutation_mean(F.average_precision, p, t, None), atol=1e-12, rtol=0
            )
            torch.testing.assert_close(fast["ndcg@3"][row], permutation_mean(F.ndcg, p, t, 3), atol=1e-12, rtol=0)


def got_values(out: dict, name: str, ks: tuple) -> torch.Tensor:
    return torch.stack([out[f"{name}@{k}"] for k in ks])


# ------------------------------------------------------------------------------------ host syncs
def batch(seed: int, n: int = 16, length: int = 12):
    g = torch.Generator().manual_seed(seed)
    preds = (torch.rand(n, length, generator=g) * 4).round() / 4  # ties
    target = torch.randint(0, 4, (n, length), generator=g)
    mask = torch.rand(n, length, generator=g) > 0.2
    ideal = torch.cat([target * mask, torch.randint(0, 4, (n, 3), generator=g)], dim=1)
    n_rel = (ideal >= 1).sum(-1)
    return preds, target, mask, ideal, n_rel


@pytest.mark.parametrize("ties", ["average", "first", "pessimistic"])
def test_update_without_validation_makes_no_host_sync(ties):
    preds, target, mask, ideal, n_rel = batch(0)
    configs = [
        {"metrics": ALL, "k": (1, 5, 20)},
        {"metrics": ("ndcg@3", "map", "mrr@5"), "gain": {0: 0.0, 1: 1.0, 2: 3.0, 3: 9.0}},
        {"metrics": ("map",), "k": (3, 8), "denominator": "retrieved_relevant"},
        {"metrics": ("map", "ndcg"), "k": 4, "graded": True, "denominator": "min_k_relevant"},
    ]
    for config in configs:
        metric = RankingMetrics(**config, ties=ties, validate_args=False)
        metric.update(preds, target, mask=mask)  # first update outside: tables are grown on the host once
        with HostSyncGuard():
            metric.update(preds, target, mask=mask)
            metric.update(preds.double(), target, mask=mask, ideal_target=ideal)
            metric.update(preds.bfloat16(), target, n_relevant=n_rel)
            metric.update(preds[:, :5], target[:, :5] > 0)


def test_functional_kernels_without_validation_make_no_host_sync():
    preds, target, mask, ideal, n_rel = batch(1)
    with HostSyncGuard():
        F.ndcg(preds, target, [1, 3, 30], mask=mask, ideal_target=ideal, validate_args=False)
        F.average_precision(preds, target, 4, mask=mask, denominator="retrieved_relevant", validate_args=False)
        F.reciprocal_rank(preds, target, mask=mask, n_relevant=n_rel, validate_args=False)
        F.hit_rate(preds, target, [2, 6], validate_args=False)
        F.r_precision(preds, target, mask=mask, validate_args=False)


def test_validated_update_makes_exactly_one_host_sync():
    preds, target, mask, _, n_rel = batch(2)
    metric = RankingMetrics(ALL, k=(1, 5))
    metric.update(preds, target, mask=mask)
    with HostSyncGuard(raise_on_sync=False) as guard:
        metric.update(preds, target, mask=mask, n_relevant=n_rel + 1)
    assert len(guard.syncs) == 1, guard.syncs
    # the shim does catch a sync in the update path
    with pytest.raises(HostSyncError, match="tolist"), HostSyncGuard():
        metric.update(preds, target, mask=mask)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (torch.cuda.set_sync_debug_mode)")
def test_update_without_validation_makes_no_host_sync_on_cuda():
    preds, target, mask, ideal, n_rel = (t.cuda() for t in batch(3))
    metric = RankingMetrics(ALL, k=(1, 5, 20), validate_args=False).cuda()
    metric.update(preds, target, mask=mask)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        metric.update(preds, target, mask=mask)
        metric.update(preds, target, mask=mask, ideal_target=ideal, n_relevant=n_rel)
    finally:
        torch.cuda.set_sync_debug_mode("default")


# ------------------------------------------------------------------------------------ precision
def exact_hit_rate(n: int, r: int, k: int) -> float:
    """1 - C(n - r, k) / C(n, k): the probability that k random slots of n hold one of r relevant."""
    from fractions import Fraction

    return float(1 - Fraction(math.comb(n - r, k), math.comb(n, k)))


def exact_reciprocal_rank(n: int, r: int) -> float:
    """E[1 / rank of the first relevant] when all n documents tie: sum_j C(n - j, r - 1) / C(n, r) / j.
    Big integers for small r; otherwise Python's double-precision lgamma (another method than the
    kernel's running product), summed until the terms vanish."""
    if r <= 10:
        total = math.comb(n, r)
        return math.fsum(math.comb(n - j, r - 1) / total / j for j in range(1, n - r + 2))
    log_total = math.lgamma(n + 1) - math.lgamma(r + 1) - math.lgamma(n - r + 1)
    terms = []
    for j in range(1, n - r + 2):
        p = math.exp(math.lgamma(n - j + 1) - math.lgamma(r) - math.lgamma(n - j - r + 2) - log_total)
        terms.append(p / j)
        if p < 1e-30:
            break
    return math.fsum(terms)


@pytest.mark.parametrize("n,r", [(10_000, 1), (10_000, 7), (10**6, 3)])
def test_huge_tie_groups_are_exact_in_float32(n, r):
    target = torch.zeros(n, dtype=torch.long)
    target[torch.linspace(0, n - 1, r).long()] = 1
    preds = torch.zeros(n)  # float32: float32 outputs
    rr = F.reciprocal_rank(preds, target)
    assert rr.dtype == torch.float32
    assert rr.item() == pytest.approx(exact_reciprocal_rank(n, r), rel=1e-6)
    for k in (1, 100, 5000):
        hit = F.hit_rate(preds, target, k, validate_args=False)
        assert hit.item() == pytest.approx(exact_hit_rate(n, r, k), rel=1e-6), k
        # P@k, R@k and AP: the expected relevant share r / n at every position
        assert F.precision(preds, target, k).item() == pytest.approx(r / n, rel=1e-6)
        assert F.recall(preds, target, k).item() == pytest.approx(k / n, rel=1e-6)
    # E[AP] over random orders: (1/n) (H_n + (r - 1) / (n - 1) (n - H_n))
    h = math.fsum(1 / p for p in range(1, n + 1))
    want_ap = (h + (r - 1) / max(n - 1, 1) * (n - h)) / n
    assert F.average_precision(preds, target).item() == pytest.approx(want_ap, rel=1e-6)


def test_issue_13_reproducers():
    """F.reciprocal_rank(torch.zeros(10**6), grades) returned 1.29; hit@100 over 10,000 tied
    documents was 8% off, and 0 at 10^6 (float32 lgamma)."""
    g = torch.Generator().manual_seed(0)
    for n in (10_000, 10**6):
        grades = (torch.rand(n, generator=g) < 0.001).long()
        r = int(grades.sum())
        assert F.reciprocal_rank(torch.zeros(n), grades).item() == pytest.approx(exact_reciprocal_rank(n, r), rel=1e-6)
        assert F.hit_rate(torch.zeros(n), grades, k=100).item() == pytest.approx(exact_hit_rate(n, r, 100), rel=1e-6)


def test_dcg_of_a_huge_tie_with_float_grades_is_exact():
    """Float gains summed over a million tied documents: expected DCG@k = mean gain x sum of the
    first k discounts (float64 sums inside, no cancellation between prefix sums)."""
    n = 10**6
    g = torch.Generator().manual_seed(1)
    grades = torch.rand(n, generator=g) * 3  # float32, no two equal sums to rely on
    preds = torch.full((n,), 0.5)
    gains = [2.0**v - 1 for v in grades.double().tolist()]
    mean_gain = math.fsum(gains) / n
    for k in (1, 10, 1000):
        want = mean_gain * math.fsum(1 / math.log2(p + 1) for p in range(1, k + 1))
        assert F.dcg(preds, grades, k).item() == pytest.approx(want, rel=1e-6), k


def test_retrieved_relevant_ap_on_a_big_tie_straddling_the_cutoff():
    """The hypergeometric law at n = 2000 documents (lgamma in float32 had no digits left):
    E[AP@k] with the retrieved-relevant denominator, against exact Fractions."""
    from fractions import Fraction

    n, r, k = 2000, 5, 10
    target = torch.zeros(n, dtype=torch.long)
    target[:r] = 1
    got = F.average_precision(torch.zeros(n), target, k, denominator="retrieved_relevant").item()
    # E[AP@k] = sum_x P(X = x) E[sum_{relevant p <= k} prec@p / x | X = x]; given x relevant in k
    # uniform slots, E[sum prec@p] = sum_j P(slot j relevant) (1 + (j - 1)(x - 1)/(k - 1)) / j.
    want = Fraction(0)
    for x in range(1, min(r, k) + 1):
        pmf = Fraction(math.comb(r, x) * math.comb(n - r, k - x), math.comb(n, k))
        numerator = sum(Fraction(x, k) * (1 + Fraction((j - 1) * (x - 1), k - 1)) / j for j in range(1, k + 1))
        want += pmf * numerator / x
    assert got == pytest.approx(float(want), rel=1e-6)


# ------------------------------------------------------------------------------------ compile=True
@pytest.mark.slow
def test_compiled_update_equals_eager():
    """fullgraph=True through the whole padded update, on inductor (the default backend). dynamo's
    recompilations (``TORCH_LOGS=recompiles``): the second update, without ``mask``, recompiles for
    ``mask=None`` (shapes still static); the third, whose list length changed again, recompiles with
    dynamic shapes (a symbolic ``min(L, k)`` inside the kernels)."""
    from torch_rankeval.metrics import _compiled

    assert _compiled.BACKEND == "inductor"
    torch._dynamo.reset()
    preds, target, mask, _ideal, _n_rel = batch(4)
    kw = {"metrics": ("ndcg", "map", "mrr", "hit_rate"), "k": (2, 5)}
    eager, compiled = RankingMetrics(**kw), RankingMetrics(**kw, compile=True)
    for m in (eager, compiled):
        m.update(preds, target, mask=mask)
        m.update(preds[:9, :7], target[:9, :7])  # no mask: a recompilation
        m.update(preds[:5, :10], target[:5, :10])  # another shape again: the dynamic recompilation
    # with the standard errors: the sums of squares the kernel returns (empty_target_action="neg"; test_monitoring
    # checks the eager ones against scipy, and the compiled ones under "skip")
    got, want = compiled.compute(stderr=True), eager.compute(stderr=True)
    assert list(got) == list(want) and len(want) == 16
    for key in want:
        torch.testing.assert_close(got[key], want[key], msg=key)
    with pytest.raises(ValueError, match="NaN"):  # validate_args=True still checks, eagerly
        compiled.update(torch.full((2, 3), float("nan")), torch.ones(2, 3, dtype=torch.long))
    # per-query rows and empty_target_action="skip" (values leave the compiled kernel)
    kw = {"metrics": ("ndcg", "map"), "k": 3, "keep_per_query": True, "empty_target_action": "skip"}
    eager_rows, compiled_rows = RankingMetrics(**kw), RankingMetrics(**kw, compile=True, validate_args=False)
    for m in (eager_rows, compiled_rows):
        m.update(preds, target, mask=mask)
    for key, want in eager_rows.compute_per_query().items():
        torch.testing.assert_close(compiled_rows.compute_per_query()[key], want, equal_nan=True, msg=key)
    clone = compiled.clone()  # the compiled kernel is not part of the state: it deep-copies
    assert clone.compile and torch.equal(clone.sums, compiled.sums)
    clone.update(preds, target, mask=mask)
