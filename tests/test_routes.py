"""Every route over the same hostile inputs: the same value, or the same error.

A batch reaches the measures by one of several routes: the dense ranked view (``mask=``), the
top-k view of the catalogue route (``exclude=``, dense or sparse; a sparse target), dense rows of
4,096 items or more (the top-k view on their own), flat input with query ``indexes``, and the
compiled update (``compile=True``, the real inductor backend). Each case below is one batch with
one hostile feature -- NaN / infinite scores inside and outside ``exclude``, an exp2 gain that
overflows, non-finite or negative (linear) grades, a gain callable that returns NaN, rows without a
relevant item, rows with every item excluded, cutoffs beyond the number of items left -- and every
route must give what the definition gives, to 1e-6, or raise the same error with the same message.

The oracle is the definition of exclusion: an excluded item is absent. The reference value of a
case is computed on the *compacted* batch, each row holding only its non-excluded items (padded
with ``mask=False`` to a common width), through the dense view, whose values the oracle suites
(pytrec_eval, sklearn, torchmetrics, brute force over tie orders) pin down; the routes under test
see the full rows, the excluded items holding whatever score / grade the case puts there.
"""

from __future__ import annotations

import typing
import zlib

import pytest
import torch

import torch_rankeval.functional as F
import torch_rankeval.measures.plan as plan_module
from torch_rankeval.metrics import ItemExposure, RankingMetrics

ALL = ("ndcg@3", "ndcg", "map", "mrr", "precision@3", "recall@3", "r_precision")
BINARY = ("map", "mrr", "precision@3", "recall@3", "r_precision")  # no gain: grades only say "relevant"
N, L = 5, 12
LONG = 4096  # rows at least this long take the top-k view on their own (measures/plan.py LONG_ROW)

SCORES_MSG = "preds contains NaN or infinite scores at unmasked positions"
GRADES_MSG = "target contains NaN or infinite grades at unmasked positions"
OVERFLOW_MSG = r"target has grades >= (128|1024), whose gain 2\*\*rel - 1 overflows float(32|64)"
GAINS_MSG = r"the gains are not finite \(or their sum per list overflows the float range\)"
SPARSE_NEGATIVE_MSG = "a sparse target treats absent items as grade 0"
SPARSE_ZERO_GAIN_MSG = "so the gain must map grade 0 to 0"


def _nan_gain(g: torch.Tensor) -> torch.Tensor:
    """A gain callable that maps grade 3 to NaN (and 0 to 0, as a sparse target needs)."""
    return torch.where(g == 3, torch.full_like(g, float("nan")), g)


def _base(seed: int, *, float_target: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    preds = torch.rand(N, L, generator=g)
    preds[:, ::4] = preds[:, 1::4]  # ties: every fourth score repeats its neighbour's
    target = torch.randint(0, 4, (N, L), generator=g)
    target[:, ::3] = 0
    exclude = torch.rand(N, L, generator=g) < 0.3
    target = target.float() if float_target else target
    return preds, target, exclude


def _case(name: str):  # noqa: ANN202
    """(preds, target, exclude, conventions, expected error or None) of one hostile case."""
    preds, target, ex = _base(zlib.crc32(name.encode()) % 1000)  # a stable seed (hash() varies with PYTHONHASHSEED)
    kw: dict = {}
    error = None
    if name == "nonfinite_scores_in_exclude":
        ex[:, :3] = True
        preds[0, 0], preds[1, 1], preds[2, 2], preds[3, 0] = float("nan"), float("inf"), float("-inf"), float("nan")
    elif name == "nan_score_outside_exclude":
        ex[1, 5] = False
        preds[1, 5] = float("nan")
        error = (SCORES_MSG, SCORES_MSG)
    elif name == "exp2_overflow":
        ex[2, 4] = False
        target[2, 4] = 1100  # beyond float64 too: flat input keeps its scores in float64
        error = (OVERFLOW_MSG, None)  # binary measures read no gain: no overflow to report
    elif name == "exp2_overflow_in_exclude":
        ex[2, 4] = True
        target[2, 4] = 1100
    elif name == "nonfinite_linear_grades":
        preds, target, ex = _base(7, float_target=True)
        ex[3, 2] = False
        target[3, 2] = float("inf")
        kw = {"gain": "linear"}
        error = (GRADES_MSG, GRADES_MSG)
    elif name == "nonfinite_linear_grades_in_exclude":
        preds, target, ex = _base(8, float_target=True)
        ex[3, 2], ex[0, 1] = True, True
        target[3, 2], target[0, 1] = float("inf"), float("nan")
        kw = {"gain": "linear"}
    elif name == "gain_callable_nan":
        ex[4, 6] = False
        target[4, 6] = 3
        kw = {"gain": _nan_gain}
        error = (GAINS_MSG, None)
    elif name == "negative_linear_grades":
        target = target - 1  # grades -1..2: negative gains under gain="linear"
        kw = {"gain": "linear"}
    elif name == "negative_linear_grades_on_top":
        # the non-zero grades at each row's best-scored items: the view stops there, while the ideal
        # ranking puts the negative grades last, far past it
        target = torch.zeros_like(target)
        order = torch.where(ex, -1.0, preds).argsort(-1, descending=True)
        target.scatter_(1, order[:, :4], torch.tensor([[-1, 2, -2, 1]]).expand(N, 4))
        kw = {"gain": "linear"}
    elif name == "gain_nonzero_at_zero":
        # relevant items on top (a shallow view), but grade 0 has a gain: every position counts
        target = torch.zeros_like(target)
        order = torch.where(ex, -1.0, preds).argsort(-1, descending=True)
        target.scatter_(1, order[:, :3], torch.tensor([[1, 3, 2]]).expand(N, 3))
        kw = {"gain": {0: 0.5, 1: 1.0, 2: 3.0, 3: 7.0}}
    elif name == "empty_rows":
        target[1] = 0
        target[3] = torch.where(ex[3], target[3], torch.zeros_like(target[3]))  # relevant items only excluded
    elif name == "all_excluded_rows":
        ex[0] = True
        ex[4] = True
        preds[4, 3] = float("nan")
    elif name == "k_beyond_valid_items":
        ex[:] = True
        ex[0, [2, 5]] = False
        ex[1, 7] = False
        ex[2, [0, 1, 4, 8]] = False
        ex[3, :] = False
    else:
        raise KeyError(name)
    return preds, target, ex, kw, error


CASES = (
    "nonfinite_scores_in_exclude",
    "nan_score_outside_exclude",
    "exp2_overflow",
    "exp2_overflow_in_exclude",
    "nonfinite_linear_grades",
    "nonfinite_linear_grades_in_exclude",
    "gain_callable_nan",
    "negative_linear_grades",
    "negative_linear_grades_on_top",
    "gain_nonzero_at_zero",
    "empty_rows",
    "all_excluded_rows",
    "k_beyond_valid_items",
)


def _compacted(preds, target, ex):  # noqa: ANN001, ANN202
    """Each row's non-excluded items moved to the front, the rest padding (mask=False, score 0, grade 0)."""
    width = max(1, int((~ex).sum(-1).max()))
    p = torch.zeros(preds.shape[0], width, dtype=preds.dtype)
    t = torch.zeros(preds.shape[0], width, dtype=target.dtype)
    m = torch.zeros(preds.shape[0], width, dtype=torch.bool)
    for r in range(preds.shape[0]):
        keep = (~ex[r]).nonzero().squeeze(-1)
        p[r, : len(keep)], t[r, : len(keep)], m[r, : len(keep)] = preds[r, keep], target[r, keep], True
    return p, t, m


def _reference(measures, preds, target, ex, kw):  # noqa: ANN001, ANN202
    p, t, m = _compacted(preds, target, ex)
    return {k: v.double() for k, v in F.evaluate(p, t, list(measures), mask=m, reduction="none", **kw).items()}


# ------------------------------------------------------------------------------------------ routes
def _functional(preds, target, ex, measures, kw, validate, how):  # noqa: ANN001, ANN202
    args: dict = {"reduction": "none", "validate_args": validate, **kw}
    if how == "mask":
        args["mask"] = ~ex
    elif how == "exclude":
        args["exclude"] = ex
    elif how == "sparse_exclude":
        args["exclude"] = ex.to_sparse()
    elif how == "sparse_target":
        target, args["exclude"] = target.to_sparse(), ex
    elif how == "sparse_target_sparse_exclude":
        target, args["exclude"] = target.to_sparse(), ex.to_sparse_csr()
    elif how in ("exclude_chunked", "sparse_target_chunked"):
        # whole lists on the catalogue route in row chunks (of 2 rows here)
        if how == "sparse_target_chunked":
            target = target.to_sparse()
        args["exclude"] = ex.to_sparse() if how == "sparse_target_chunked" else ex
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(plan_module, "WHOLE_LIST_CHUNK", 2 * preds.shape[-1])
            out = F.evaluate(preds, target, list(measures), **args)
        return {k: v.double() for k, v in out.items()}
    elif how in ("long_mask", "long_exclude"):
        # LONG padding items per row, any score, grade 0: mask=False (or excluded)
        pad = torch.linspace(-5.0, 5.0, LONG).expand(preds.shape[0], LONG)
        preds = torch.cat([preds, pad], 1)
        target = torch.cat([target, torch.zeros(target.shape[0], LONG, dtype=target.dtype)], 1)
        keep = torch.cat([~ex, torch.zeros(ex.shape[0], LONG, dtype=torch.bool)], 1)
        args["mask" if how == "long_mask" else "exclude"] = keep if how == "long_mask" else ~keep
    else:
        raise KeyError(how)
    out = F.evaluate(preds, target, list(measures), **args)
    return {k: v.double() for k, v in out.items()}


def _metric_means(metric, measures):  # noqa: ANN001, ANN202
    values = metric.compute()
    return {m: values[m].double() for m in measures}


def _flat(preds, target, ex, measures, kw, validate):  # noqa: ANN001, ANN202
    """input_format="flat": one entry per (query, item), excluded items marked with ignore_index."""
    metric = RankingMetrics(list(measures), input_format="flat", ignore_index=-100, validate_args=validate, **kw)
    rows = torch.arange(preds.shape[0]).unsqueeze(-1).expand_as(preds)
    flat_target = torch.where(ex, torch.full_like(target, -100), target)
    metric.update(preds.reshape(-1), flat_target.reshape(-1), indexes=rows.reshape(-1))
    return _metric_means(metric, measures)


def _metric(preds, target, ex, measures, kw, validate, *, compile: bool, sparse: bool = False):  # noqa: ANN001, ANN202
    metric = RankingMetrics(list(measures), validate_args=validate, compile=compile, **kw)
    if compile:
        metric.update(preds, target, mask=~ex)
    else:
        metric.update(preds, target.to_sparse() if sparse else target, exclude=ex.to_sparse() if sparse else ex)
    return _metric_means(metric, measures)


FUNCTIONAL_ROUTES = (
    "mask",
    "exclude",
    "sparse_exclude",
    "sparse_target",
    "sparse_target_sparse_exclude",
    "exclude_chunked",
    "sparse_target_chunked",
    "long_mask",
    "long_exclude",
)


def _expect(measures, error, route):  # noqa: ANN001, ANN202
    if error is None:
        return None
    gain_error, binary_error = error
    return binary_error if set(measures) <= set(BINARY) else gain_error


def _check(got: dict, want: dict, where: str) -> None:
    for name, value in want.items():
        assert torch.allclose(got[name], value, atol=1e-6, rtol=0, equal_nan=True), (where, name, got[name], value)


def _run(route, preds, target, ex, measures, kw, validate):  # noqa: ANN001, ANN202
    if route in FUNCTIONAL_ROUTES:
        return _functional(preds, target, ex, measures, kw, validate, route), False
    if route == "flat":
        return _flat(preds, target, ex, measures, kw, validate), True
    if route == "metric_exclude":
        return _metric(preds, target, ex, measures, kw, validate, compile=False), True
    if route == "metric_sparse":
        return _metric(preds, target, ex, measures, kw, validate, compile=False, sparse=True), True
    raise KeyError(route)


ROUTES = (*FUNCTIONAL_ROUTES, "flat", "metric_exclude", "metric_sparse")


def _sparse_limit(route: str, case: str, measures) -> bool:  # noqa: ANN001
    """A documented limit of a sparse target: absent items are grade 0, with gain 0, and would outrank
    negative gains (or a gain nonzero at grade 0)."""
    sparse_route = "sparse_target" in route or route == "metric_sparse"
    uses_gain = not set(measures) <= set(BINARY)
    return sparse_route and uses_gain and (case.startswith("negative_linear_grades") or case == "gain_nonzero_at_zero")


def _route_grid():  # noqa: ANN202
    """route x case x measures x validate, without the 92 combinations that can prove nothing (they were
    skipped items): unvalidated input with a value error (undefined values), unvalidated input past a
    sparse target's limit (refused when validated, undefined otherwise), and a query without documents
    in flat input (it is absent there, not empty)."""
    for route in ROUTES:
        for case in CASES:
            error = _case(case)[-1]
            for measures, measures_id in ((ALL, "all"), (BINARY, "binary")):
                for validate in (True, False):
                    if not validate and (
                        _expect(measures, error, route) is not None or _sparse_limit(route, case, measures)
                    ):
                        continue
                    if route == "flat" and case in ("all_excluded_rows", "k_beyond_valid_items"):
                        continue
                    ids = (route, case, measures_id, "validated" if validate else "unvalidated")
                    yield pytest.param(route, case, measures, validate, id="-".join(ids))


@pytest.mark.parametrize(("route", "case", "measures", "validate"), list(_route_grid()))
def test_every_route_gives_the_definition_or_the_same_error(route, case, measures, validate):
    preds, target, ex, kw, error = _case(case)
    message = _expect(measures, error, route)
    if _sparse_limit(route, case, measures):  # validated (the grid leaves the unvalidated ones out)
        negative = case.startswith("negative_linear_grades")
        with pytest.raises(ValueError, match=SPARSE_NEGATIVE_MSG if negative else SPARSE_ZERO_GAIN_MSG):
            _run(route, preds, target, ex, measures, kw, validate)
        return
    if message is not None:  # validated (idem)
        with pytest.raises(ValueError, match=message):
            _run(route, preds, target, ex, measures, kw, validate)
        return
    want = _reference(measures, preds, target, ex, kw)
    got, reduced = _run(route, preds, target, ex, measures, kw, validate)
    if reduced:
        want = {k: v.mean() for k, v in want.items()}
    _check(got, want, f"{route}/{case}")


# ------------------------------------------------------------------------------------------ CPU path
HEAD = ("ndcg@3", "map@3", "mrr@3", "precision@3", "recall@3", "hit_rate@3")  # cutoff measures: the head only


def _head_grid():  # noqa: ANN202
    """route x case x validate for the cutoff measures, left out as in :func:`_route_grid`."""
    for route in ROUTES:
        for case in CASES:
            error = _case(case)[-1]
            for validate in (True, False):
                if not validate and (_expect(HEAD, error, route) is not None or _sparse_limit(route, case, HEAD)):
                    continue
                if route == "flat" and case in ("all_excluded_rows", "k_beyond_valid_items"):
                    continue
                yield pytest.param(
                    route, case, validate, id="-".join((route, case, "validated" if validate else "unvalidated"))
                )


@pytest.mark.parametrize(("route", "case", "validate"), list(_head_grid()))
def test_every_route_on_the_cpu_path_gives_the_definition_or_the_same_error(
    route: str, case: str, validate: bool, ranked_batches: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same hostile inputs on the CPU path that large CPU batches take (``_GPU_PATH_MAX_CPU``
    forced to 0: integer sort keys, tie sums apart, and, with every measure a cutoff measure, only the
    head of each row ranked with ``torch.topk``); the reference is the compacted batch on the GPU's path."""
    from torch_rankeval.ranking import view

    preds, target, ex, kw, error = _case(case)
    message = _expect(HEAD, error, route)
    want = None if message or _sparse_limit(route, case, HEAD) else _reference(HEAD, preds, target, ex, kw)
    monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    ranked_batches.clear()  # the reference's rankings
    if want is None:
        negative = case.startswith("negative_linear_grades")
        expected = message or (SPARSE_NEGATIVE_MSG if negative else SPARSE_ZERO_GAIN_MSG)
        with pytest.raises(ValueError, match=expected):
            _run(route, preds, target, ex, HEAD, kw, validate)
        return
    got, reduced = _run(route, preds, target, ex, HEAD, kw, validate)
    if reduced:
        want = {k: v.mean() for k, v in want.items()}
    _check(got, want, f"cpu path {route}/{case}")
    if route == "mask":  # the dense route: each row's head only (3 positions of 12)
        assert ranked_batches and all(rb.truncated and rb.length == 3 for rb in ranked_batches)


# ------------------------------------------------------------------------------------------ compiled
_COMPILED: dict = {}


def _compiled_metric(measures, kw, validate):  # noqa: ANN001, ANN202
    """One compiled metric per configuration, reset between cases (inductor compiles once per shape)."""
    key = (measures, tuple(sorted((k, repr(v)) for k, v in kw.items())), validate)
    metric = _COMPILED.get(key)
    if metric is None:
        metric = _COMPILED[key] = RankingMetrics(list(measures), validate_args=validate, compile=True, **kw)
    metric.reset()
    return metric


@pytest.mark.parametrize("measures", [ALL, BINARY], ids=["all", "binary"])
@pytest.mark.parametrize(
    "case",
    [
        "nonfinite_scores_in_exclude",
        "nan_score_outside_exclude",
        "exp2_overflow",
        "exp2_overflow_in_exclude",
        "empty_rows",
        "all_excluded_rows",
        "k_beyond_valid_items",
    ],
)
def test_compiled_route_with_inductor(case, measures):
    from torch_rankeval.metrics import _compiled

    assert _compiled.BACKEND == "inductor"  # the real backend, as every compiled test runs
    preds, target, ex, kw, error = _case(case)
    message = _expect(measures, error, "compiled")
    metric = _compiled_metric(measures, kw, True)
    if message is not None:
        with pytest.raises(ValueError, match=message):
            metric.update(preds, target, mask=~ex)
        return
    metric.update(preds, target, mask=~ex)
    want = {k: v.mean() for k, v in _reference(measures, preds, target, ex, kw).items()}
    _check(_metric_means(metric, measures), want, f"compiled/{case}")


@pytest.mark.parametrize("validate", [True, False], ids=["validated", "unvalidated"])
def test_compiled_head_ranking_with_inductor(
    validate: bool, ranked_batches: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled update (inductor) on the CPU path where only each row's head is ranked
    (``torch.topk`` of the scores, the tie group at the head's end summed over the row) gives the
    eager update's values on tied rows, padding included."""
    from torch_rankeval.metrics import _compiled
    from torch_rankeval.ranking import view

    assert _compiled.BACKEND == "inductor"
    preds, target, ex = _base(11)
    preds = (preds * 4).round() / 4  # four score levels: tie groups cross every cutoff
    want = {k: v.mean() for k, v in _reference(HEAD, preds, target, ex, {}).items()}  # the GPU's path
    monkeypatch.setattr(view, "_GPU_PATH_MAX_CPU", 0)
    ranked_batches.clear()  # the reference's rankings
    eager = RankingMetrics(list(HEAD), validate_args=validate)
    eager.update(preds, target, mask=~ex)
    assert ranked_batches and all(rb.truncated and rb.length == 3 for rb in ranked_batches)  # the head path ran
    compiled = RankingMetrics(list(HEAD), validate_args=validate, compile=True)
    compiled.update(preds, target, mask=~ex)
    _check(_metric_means(compiled, HEAD), _metric_means(eager, HEAD), "compiled head")
    _check(_metric_means(compiled, HEAD), want, "compiled head vs the sorted row")


# ------------------------------------------------------------------------------------------ exposure
@pytest.mark.parametrize("ties", ["average", "first"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense_exclude", "sparse_exclude"])
@pytest.mark.parametrize("validate", [True, False])
def test_item_exposure_ignores_nonfinite_scores_at_excluded_items(ties, sparse, validate):
    """Brute force: each row's top 3 among its non-excluded items (distinct scores), counted by hand."""
    g = torch.Generator().manual_seed(3)
    preds = torch.rand(6, 20, generator=g)
    ex = torch.rand(6, 20, generator=g) < 0.3
    ex[:, :2] = True
    preds[:, 0] = float("nan")
    preds[:, 1] = float("inf")
    preds[2, 5], ex[2, 5] = float("-inf"), True
    counts = [0.0] * 20
    for r in range(6):
        kept = sorted((-preds[r, i].item(), i) for i in range(20) if not ex[r, i])
        for _, i in kept[:3]:
            counts[i] += 1
    metric = ItemExposure(num_items=20, k=3, ties=ties, validate_args=validate)
    metric.update(preds, ex.to_sparse() if sparse else ex)
    assert metric.counts.tolist() == counts
    values = metric.compute()
    assert values["coverage@3"].item() == pytest.approx(sum(c > 0 for c in counts) / 20)


# ------------------------------------------------------------------------------------------ the contract
def _protocol_members(proto) -> list[str]:  # noqa: ANN001
    return sorted(
        name
        for klass in proto.__mro__
        if klass not in (object, typing.Protocol, typing.Generic)
        for name in (*vars(klass), *getattr(klass, "__annotations__", {}))
        if not name.startswith("_")
    )


def _views():  # noqa: ANN202
    """A dense ranked batch and top-k views of the same batch (ties across the cutoff, padding)."""
    from torch_rankeval.conventions import DEFAULT
    from torch_rankeval.ranking.catalogue import catalogue_batch
    from torch_rankeval.ranking.view import RankedBatch

    preds = torch.tensor([[0.9, 0.5, 0.5, 0.5, 0.1, 0.3], [0.2, 0.7, 0.7, 0.1, 0.7, 0.4]])
    target = torch.tensor([[0, 1, 0, 2, 1, 0], [1, 0, 2, 0, 1, 1]])
    exclude = torch.tensor([[False, False, False, False, False, True], [False, False, False, False, False, False]])
    dense = RankedBatch(preds, target, ~exclude, DEFAULT)
    cut = catalogue_batch(preds, target, DEFAULT, cutoffs=(2,), whole_list=False, exclude=exclude)
    whole = catalogue_batch(preds, target.to_sparse(), DEFAULT, cutoffs=(None,), whole_list=True, exclude=exclude)
    return preds, target, exclude, {"dense": dense, "topk_truncated": cut, "topk_whole": whole}


def _exercise(rb, target, exclude):  # noqa: ANN001, ANN202
    """Read every member of the RankedView and TieStatistics protocols; returns the values read."""
    from torch_rankeval.ranking.view import RankedView, TieStatistics

    gains_doc = torch.where(exclude, 0.0, 2.0 ** target.float() - 1)
    ks = (1, None)
    calls = {
        "head": lambda: [rb.head(name, 2) for name in ("rel", "gains", "valid", "target", "judged")],
        "ranked": lambda: rb.ranked(target),
        "discount_head": lambda: rb.discount_head(2),
        "inverse_ranks": lambda: rb.inverse_ranks(2),
        "ranks": lambda: rb.ranks(2, torch.float64),
        "groups": lambda: rb.groups(2),
        "expected": lambda: rb.expected(rb.gains, doc=gains_doc),
        "cutoff_index": lambda: rb.cutoff_index(ks),
        "span": lambda: rb.span(ks),
        "cumulative": lambda: rb.cumulative(rb.gains, ks),
        "cumulative_per_rank": lambda: rb.cumulative_per_rank(rb.gains, ks),
        "expected_in_top": lambda: rb.expected_in_top("rel", ks),
        "expected_relevant": lambda: rb.expected_relevant(ks),
        "discounted_top": lambda: rb.discounted_top("gains", ks),
        "discounted_prefix": lambda: rb.discounted_prefix(rb.ideal_top((2,)), [0, 1]),
        "ideal_top": lambda: (rb.ideal_top((None,)), rb.ideal_top((1,))),
        "ideal_discounted": lambda: rb.ideal_discounted(ks),
        "constant": lambda: rb.constant([1, 2]),
        "cached": lambda: rb.cached("probe", lambda: torch.zeros(1)),
    }
    out = {}
    for name in _protocol_members(RankedView):
        member = getattr(rb, name)  # properties are read here
        out[name] = calls[name]() if name in calls else member
        assert not callable(member) or name in calls, f"{name}: add it to the calls of this test"
    for width in (1, 2, rb.length):
        g = rb.groups(width)
        assert isinstance(g, TieStatistics)
        for name in _protocol_members(TieStatistics):
            if name == "mean":
                out[f"g{width}.mean"] = (g.mean("rel"), g.mean("gains"))
            elif name == "at":
                out[f"g{width}.at"] = g.at("size", [0, width - 1])
            elif name == "sums":
                head = rb.head("gains", width)
                out[f"g{width}.sums"] = g.sums(head, gains_doc, dtype=torch.float64)
            else:
                out[f"g{width}.{name}"] = getattr(g, name)
    return out


def test_dense_and_topk_views_implement_the_whole_contract():
    from torch_rankeval.ranking.catalogue import TopKRankedBatch
    from torch_rankeval.ranking.view import RankedBatch, RankedView

    preds, target, exclude, views = _views()
    assert isinstance(views["topk_truncated"], TopKRankedBatch) and views["topk_truncated"].truncated
    assert isinstance(views["dense"], RankedBatch) and not isinstance(views["dense"], TopKRankedBatch)
    seen = {}
    for name, rb in views.items():
        assert isinstance(rb, RankedView), name
        seen[name] = _exercise(rb, target, exclude)
    # the views agree where they overlap: whole-group sums over the first two positions (the group
    # of position 2 goes on past the truncated view), expected gains, cutoff statistics
    dense, cut = seen["dense"], seen["topk_truncated"]
    for key in (
        "g2.sums",
        "g2.size",
        "g2.rel",
        "g2.rel_count",
        "g2.gain",
        "g2.first_hazard",
        "g2.slot_share",
        "g2.mean",
    ):
        a, b = dense[key], cut[key]
        for x, y in zip(a, b) if isinstance(a, tuple) else [(a, b)]:
            assert torch.allclose(x.double(), y.double()), key
    assert torch.allclose(dense["expected"][:, :2], cut["expected"][:, :2])
    assert torch.allclose(dense["expected_in_top"][:, :1], cut["expected_in_top"][:, :1])
    assert torch.allclose(dense["discounted_top"][:, :1], cut["discounted_top"][:, :1])
    assert torch.allclose(dense["ideal_discounted"][:, :1], cut["ideal_discounted"][:, :1])
    for rb in views.values():  # x_p / p summed to each cutoff: the same as dividing first, then summing
        x = rb.gains
        expected = rb.cumulative(x / rb.ranks(x.shape[-1]), (1, None))
        assert torch.allclose(rb.cumulative_per_rank(x, (1, None)), expected)
    assert torch.equal(dense["n_relevant"], cut["n_relevant"]) and torch.equal(dense["n_valid"], cut["n_valid"])


def test_topk_view_without_doc_names_the_fix():
    _, _, _, views = _views()
    with pytest.raises(ValueError, match="needs the per-document values"):
        views["topk_truncated"].expected(views["topk_truncated"].gains)
    with pytest.raises(ValueError, match="needs the per-document values"):
        views["dense"].groups(2).sums(views["dense"].head("gains", 2), None, dtype=torch.float64)


def test_kernels_are_typed_against_the_protocol():
    import importlib
    import inspect
    import pkgutil

    import torch_rankeval.kernels as kernels

    typed = 0
    for info in pkgutil.iter_modules(kernels.__path__):
        module = importlib.import_module(f"torch_rankeval.kernels.{info.name}")
        for name, fn in vars(module).items():
            if not inspect.isfunction(fn) or fn.__module__ != module.__name__:
                continue
            params = inspect.signature(fn).parameters
            if "rb" in params:
                assert params["rb"].annotation == "RankedView", f"{module.__name__}.{name}"
                typed += 1
    assert typed >= 20
