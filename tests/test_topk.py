"""Top-k selection with exact tie statistics (functional/_topk.py) against brute force: a stable full
sort of every row written out in plain Python, on a dense target, compared field by field; plus
hand-computed examples and the ranks of target entries."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from tests.sync_guard import PATHS, select_path
from torch_rankeval.ranking import inputs as _inputs
from torch_rankeval.ranking import topk as _topk
from torch_rankeval.ranking.sparse import SparseTarget
from torch_rankeval.ranking.topk import topk_view

pytestmark = pytest.mark.filterwarnings("ignore:Sparse (CSR tensor support is in beta|invariant checks are implicitly)")

GAINS = {"exp2": lambda g: 2.0**g - 1.0, "linear": lambda g: float(g)}


def _relevant(g, threshold):
    return g >= threshold if threshold is not None else g >= 1


# ---------------------------------------------------------------------------------------- oracle
def oracle_row(scores, grades, excluded, width, ties, gain, threshold):
    """Everything a stable full sort of one row gives for its first ``width`` positions."""
    valid = [j for j in range(len(scores)) if not excluded[j]]
    if ties == "pessimistic":

        def key(j):
            return (-scores[j], grades[j], j)
    elif ties == "optimistic":

        def key(j):
            return (-scores[j], -grades[j], j)
    else:

        def key(j):
            return (-scores[j], j)

    ranked = sorted(valid, key=key)
    rel = {j: float(_relevant(grades[j], threshold)) for j in valid}
    gn = {j: GAINS[gain](grades[j]) for j in valid}
    out = {"n_valid": len(valid), "ranked": ranked, "positions": []}
    for p in range(min(width, len(valid))):
        j = ranked[p]
        if ties == "average":
            group = [i for i in valid if scores[i] == scores[j]]
            before = [i for i in valid if scores[i] > scores[j]]
        else:
            group, before = [j], ranked[:p]
        out["positions"].append(
            {
                "score": scores[j],
                "group": group,
                "start": len(before),
                "size": len(group),
                "rel": sum(rel[i] for i in group),
                "gain": sum(gn[i] for i in group),
                "gain_sq": sum(gn[i] ** 2 for i in group),
                "rel_before": sum(rel[i] for i in before),
                "gain_before": sum(gn[i] for i in before),
            }
        )
    if valid:
        last = ranked[min(width, len(valid)) - 1]
        out["v"] = scores[last]
        out["s"] = sum(scores[i] > scores[last] for i in valid)
        out["n"] = sum(scores[i] == scores[last] for i in valid)
    else:
        out["s"] = out["n"] = 0
    out["n_relevant"] = sum(rel.values())
    ideal = sorted(gn.values(), reverse=True)[:width]
    out["ideal"] = ideal + [0.0] * (width - len(ideal))
    return out


def check_view(view, scores, grades, excluded, k, ties, gain, threshold, with_target=True):
    n, length = scores.shape
    width = min(k, length)
    assert view.k == width and view.items.shape == (n, width)
    s_rows, g_rows, e_rows = scores.double().tolist(), grades.tolist(), excluded.tolist()
    fields = [
        "n_valid",
        "valid",
        "boundary_start",
        "boundary_size",
        "boundary_value",
        "spilled",
        "items",
        "scores",
        "group_start",
        "group_size",
    ]
    if with_target:
        fields += [
            "grades",
            "rel",
            "gains",
            "group_relevant",
            "group_gain",
            "group_gain_sq",
            "relevant_before",
            "gain_before",
            "n_relevant",
            "ideal_gains",
        ]
    got = {
        f: getattr(view, f).double().tolist() if getattr(view, f).is_floating_point() else getattr(view, f).tolist()
        for f in fields
    }
    for r in range(n):
        o = oracle_row(s_rows[r], g_rows[r], e_rows[r], width, ties, gain, threshold)
        nv = o["n_valid"]
        assert got["n_valid"][r] == nv
        assert got["valid"][r] == [p < nv for p in range(width)]
        assert got["boundary_start"][r] == o["s"] and got["boundary_size"][r] == o["n"], r
        if nv:
            assert got["boundary_value"][r] == o["v"]
            assert got["spilled"][r] == (o["n"] > width - o["s"])
        items = got["items"][r]
        used = items[: min(width, nv)]
        assert len(set(used)) == len(used), "an item ranked twice"
        for p, want in enumerate(o["positions"]):
            j = items[p]
            assert not e_rows[r][j], "an excluded item was ranked"
            assert s_rows[r][j] == want["score"] and got["scores"][r][p] == want["score"], (r, p)
            if ties != "average":
                assert j == o["ranked"][p], (r, p, items, o["ranked"])
            else:
                assert j in want["group"]
            assert got["group_start"][r][p] == want["start"], (r, p)
            assert got["group_size"][r][p] == want["size"], (r, p)
            if with_target:
                assert got["grades"][r][p] == g_rows[r][j]
                for field, key in (
                    ("group_relevant", "rel"),
                    ("group_gain", "gain"),
                    ("group_gain_sq", "gain_sq"),
                    ("relevant_before", "rel_before"),
                    ("gain_before", "gain_before"),
                ):
                    assert got[field][r][p] == pytest.approx(want[key], abs=1e-5), (field, r, p)
        # under "average", a group that ends inside the view is there in full
        if ties == "average":
            for want in o["positions"]:
                if want["start"] + want["size"] <= min(width, nv):
                    shown = {items[p] for p in range(want["start"], want["start"] + want["size"])}
                    assert shown == set(want["group"])
        for p in range(min(width, nv), width):
            assert got["group_size"][r][p] == 0 and got["scores"][r][p] == -math.inf
            if with_target:
                assert got["grades"][r][p] == 0 and got["rel"][r][p] == 0 and got["gains"][r][p] == 0
        if with_target:
            assert got["n_relevant"][r] == o["n_relevant"]
            assert got["ideal_gains"][r] == pytest.approx(o["ideal"], abs=1e-5)


def random_case(seed, n=6, length=9, tie_levels=3, dtype=torch.float32, density=0.35, p_exclude=0.25):
    g = torch.Generator().manual_seed(seed)
    scores = (
        torch.randint(0, tie_levels, (n, length), generator=g).to(dtype)
        if tie_levels
        else torch.rand(n, length, generator=g).to(dtype)
    )
    grades = torch.where(torch.rand(n, length, generator=g) < density, torch.randint(1, 4, (n, length), generator=g), 0)
    excluded = torch.rand(n, length, generator=g) < p_exclude
    if n > 2:
        excluded[1] = True  # a row with every item excluded
        grades[2] = 0  # a row without relevant items
    if n > 3:
        scores[3] = scores[3, 0]  # all scores equal
        excluded[3, :2] = False
    if n > 4:
        excluded[4] = False  # nothing excluded
    grades[excluded & (torch.rand(n, length, generator=g) < 0.5)] = 2  # excluded items also in the target
    return scores, grades, excluded


def _target(grades, kind):
    return {
        "dense": grades,
        "coo": grades.to_sparse_coo(),
        "csr": grades.to_sparse_csr(),
        "canonical": SparseTarget.from_dense(grades),
    }[kind]


def _exclude(excluded, kind):
    return {"none": None, "dense": excluded, "sparse": excluded.to_sparse_coo()}[kind]


# ------------------------------------------------------------------------ random cases against brute force
@pytest.mark.parametrize("ties", ["average", "first", "pessimistic", "optimistic"])
@pytest.mark.parametrize("target_kind", ["dense", "sparse"])
@pytest.mark.parametrize("exclude_kind", ["none", "dense", "sparse"])
@pytest.mark.parametrize("validate_args", PATHS)
def test_view_equals_a_stable_full_sort(ties, target_kind, exclude_kind, validate_args, monkeypatch):
    validate_args = select_path(validate_args, monkeypatch)
    for seed, length in itertools.product(range(2), (1, 4, 9)):
        scores, grades, excluded = random_case(100 * seed + length, length=length)
        if exclude_kind == "none":
            excluded = torch.zeros_like(excluded)
        for k in sorted({1, 2, max(1, length - 1), length, length + 2}):
            for gain, threshold in [(("exp2", None), ("linear", 2))[(seed + k) % 2]]:
                kind = target_kind if target_kind == "dense" else ("coo", "csr", "canonical")[(seed + k) % 3]
                view = topk_view(
                    scores,
                    k,
                    target=_target(grades, kind),
                    exclude=_exclude(excluded, exclude_kind),
                    ties=ties,
                    gain=gain,
                    relevance_threshold=threshold,
                    validate_args=validate_args,
                    chunk_elements=length * 2,
                )
                check_view(view, scores, grades, excluded, k, ties, gain, threshold)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("ties", ["average", "first"])
def test_score_dtypes_and_continuous_scores(dtype, ties):
    for tie_levels in (0, 2, 5):
        scores, grades, excluded = random_case(7 + tie_levels, n=8, length=15, tie_levels=tie_levels, dtype=dtype)
        for k in (1, 5, 15):
            view = topk_view(scores, k, target=grades.to_sparse(), exclude=excluded.to_sparse(), ties=ties)
            check_view(view, scores, grades, excluded, k, ties, "exp2", None)
            assert view.scores.dtype == dtype
            assert view.group_gain.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)


def test_selection_without_target():
    scores, grades, excluded = random_case(3, n=7, length=11)
    for ties, k in itertools.product(("average", "first", "pessimistic"), (1, 4, 11)):
        view = topk_view(scores, k, exclude=excluded, ties=ties, validate_args=False)
        assert view.grades is None and view.group_relevant is None and view.ideal_gains is None
        # pessimistic without grades: every grade is 0, so it is "first"
        check_view(view, scores, torch.zeros_like(grades), excluded, k, ties, "exp2", None, with_target=False)


def test_large_ties_and_small_chunks_validated_and_not():
    g = torch.Generator().manual_seed(11)
    scores = torch.randint(0, 2, (20, 50), generator=g).float()
    grades = torch.where(torch.rand(20, 50, generator=g) < 0.2, 1, 0)
    excluded = torch.rand(20, 50, generator=g) < 0.1
    for validate_args, ties in itertools.product((True, False), ("average", "first", "optimistic")):
        view = topk_view(
            scores,
            10,
            target=grades.to_sparse_csr(),
            exclude=excluded.to_sparse(),
            ties=ties,
            validate_args=validate_args,
            chunk_elements=1,
        )
        check_view(view, scores, grades, excluded, 10, ties, "exp2", None)


def test_long_rows_few_exclusions_take_the_raw_topk_path(monkeypatch):
    # validated, and the excluded count per row (<= 6) is small next to L = 80: the view takes the top
    # W + 1 + 6 raw scores and drops the excluded ones (no copy of the scores); it must equal a full sort
    g = torch.Generator().manual_seed(12)
    scores = torch.randint(0, 6, (9, 80), generator=g).float()
    grades = torch.where(torch.rand(9, 80, generator=g) < 0.1, torch.randint(1, 3, (9, 80), generator=g), 0)
    excluded = torch.zeros(9, 80, dtype=torch.bool)
    for r in range(9):
        excluded[r, torch.randperm(80, generator=g)[: r % 7]] = True
    excluded[0, scores[0] == scores[0].max()] = True  # the best items excluded
    calls = []
    real = _topk._top_skipping
    monkeypatch.setattr(_topk, "_top_skipping", lambda *a: calls.append(1) or real(*a))
    for ties, k, kind in itertools.product(("average", "first", "pessimistic"), (1, 5, 12), ("dense", "sparse")):
        exclude = excluded if kind == "dense" else excluded.to_sparse()
        view = topk_view(scores, k, target=grades.to_sparse(), exclude=exclude, ties=ties)
        check_view(view, scores, grades, excluded, k, ties, "exp2", None)
        # unvalidated with a trusted bound: the same path, no host sync
        bound = int(excluded.sum(-1).max())
        view = topk_view(
            scores,
            k,
            target=grades.to_sparse(),
            exclude=exclude,
            ties=ties,
            validate_args=False,
            max_excluded_per_row=bound,
        )
        check_view(view, scores, grades, excluded, k, ties, "exp2", None)
    assert len(calls) == 24  # k = 1 and 5; with k = 12 the window would pass L // 4: the copying path


# ---------------------------------------------------------------------------------------- hand-computed examples
def test_hand_example_average_ties_across_the_cutoff():
    # scores: item 0 = 0.9; items 1, 2, 3 = 0.5 (tied); item 4 = 0.1. Cutoff 2.
    # The boundary group {1, 2, 3} starts at position 1 (one item above), has 3 items, of which
    # item 1 (grade 1) and item 3 (grade 2) are relevant: relevant count 2, exp2 gain sum 1 + 3 = 4,
    # squared gains 1 + 9 = 10. Before it: item 0 (grade 0): nothing relevant.
    scores = torch.tensor([[0.9, 0.5, 0.5, 0.5, 0.1]])
    target = torch.tensor([[0, 1, 0, 2, 3]])
    v = topk_view(scores, 2, target=target.to_sparse())
    assert v.items[0, 0].item() == 0 and v.items[0, 1].item() in (1, 2, 3)
    assert v.boundary_start.tolist() == [1] and v.boundary_size.tolist() == [3] and v.spilled.tolist() == [True]
    assert v.group_start.tolist() == [[0, 1]] and v.group_size.tolist() == [[1, 3]]
    assert v.group_relevant.tolist() == [[0.0, 2.0]] and v.group_gain.tolist() == [[0.0, 4.0]]
    assert v.group_gain_sq.tolist() == [[0.0, 10.0]]
    assert v.relevant_before.tolist() == [[0.0, 0.0]]
    # item 4 (grade 3, gain 7) is relevant but ranked last: n_relevant 3, ideal gains 7, 3
    assert v.n_relevant.tolist() == [3.0] and v.ideal_gains.tolist() == [[7.0, 3.0]]


def test_hand_example_first_and_pessimistic():
    scores = torch.tensor([[0.5, 0.9, 0.5, 0.5, 0.5]])
    target = torch.tensor([[2, 0, 0, 1, 0]])
    # first: 1, then the tied items in input order 0, 2, 3, 4
    assert topk_view(scores, 3, target=target, ties="first").items.tolist() == [[1, 0, 2]]
    # pessimistic: among the tied items, lowest grade first (2, 4 have grade 0), then 3 (1), then 0 (2)
    assert topk_view(scores, 4, target=target, ties="pessimistic").items.tolist() == [[1, 2, 4, 3]]
    assert topk_view(scores, 3, target=target, ties="optimistic").items.tolist() == [[1, 0, 3]]
    # the same with item 0 excluded: it is never ranked, its grade never counts
    ex = torch.tensor([[True, False, False, False, False]])
    v = topk_view(scores, 3, target=target.to_sparse(), exclude=ex, ties="first")
    assert v.items.tolist() == [[1, 2, 3]] and v.n_relevant.tolist() == [1.0] and v.n_valid.tolist() == [4]
    assert v.ideal_gains.tolist() == [[1.0, 0.0, 0.0]]


def test_hand_example_row_shorter_than_k():
    # 3 items, one excluded: 2 valid positions of a 3-wide view
    scores = torch.tensor([[0.2, 0.4, 0.3]])
    v = topk_view(scores, 5, target=torch.tensor([[1, 0, 1]]), exclude=torch.tensor([[False, False, True]]))
    assert v.k == 3 and v.items[0, :2].tolist() == [1, 0] and v.valid.tolist() == [[True, True, False]]
    assert v.rel.tolist() == [[0.0, 1.0, 0.0]] and v.n_relevant.tolist() == [1.0]
    assert v.boundary_value.tolist() == [pytest.approx(0.2)] and v.boundary_size.tolist() == [1]


# ---------------------------------------------------------------------------------------- errors
def test_errors_name_the_argument():
    scores = torch.rand(2, 4)
    with pytest.raises(ValueError, match="k must be a positive int"):
        topk_view(scores, 0)
    with pytest.raises(ValueError, match="ties='random' is not valid"):
        topk_view(scores, 2, ties="random")
    with pytest.raises(TypeError, match="preds must be a floating tensor"):
        topk_view(torch.ones(2, 4, dtype=torch.int64), 2)
    with pytest.raises(ValueError, match=r"preds must be \(N, L\)"):
        topk_view(torch.rand(4), 2)
    with pytest.raises(ValueError, match=r"target must have the shape of preds \(2, 4\)"):
        topk_view(scores, 2, target=torch.ones(2, 5).to_sparse())
    with pytest.raises(ValueError, match=r"target must have the shape of preds \(2, 4\)"):
        topk_view(scores, 2, target=torch.ones(2, 5))
    with pytest.raises(ValueError, match="target has negative grades"):
        topk_view(scores, 2, target=torch.tensor([[0, -1, 0, 0], [0, 0, 0, 0]]).to_sparse())
    with pytest.raises(ValueError, match="target has negative grades"):
        topk_view(scores, 2, target=torch.tensor([[0, -1, 0, 0], [0, 0, 0, 0]]))
    with pytest.raises(ValueError, match="NaN or infinite grades"):
        topk_view(scores, 2, target=torch.tensor([[0, float("nan"), 0, 0], [0, 0, 0, 0]]).to_sparse())
    with pytest.raises(ValueError, match="makes grade 0 relevant"):
        topk_view(scores, 2, target=torch.ones(2, 4).to_sparse(), relevance_threshold=0)
    with pytest.raises(ValueError, match="gain must map grade 0 to 0"):
        topk_view(scores, 2, target=torch.ones(2, 4).to_sparse(), gain=lambda t: t + 1)
    bad = scores.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN or infinite scores at unmasked positions"):
        topk_view(bad, 2)
    # excluded items may hold any score
    ex = torch.zeros(2, 4, dtype=torch.bool)
    ex[1, 2] = True
    for exclude in (ex, ex.to_sparse()):
        assert topk_view(bad, 2, exclude=exclude).n_valid.tolist() == [4, 3]
    with pytest.raises(ValueError, match="NaN or infinite scores"):
        topk_view(bad, 2, exclude=torch.zeros(2, 4, dtype=torch.bool).to_sparse())
    with pytest.raises(ValueError, match="max_excluded_per_row=0 but a row of exclude has 1 excluded items"):
        topk_view(bad, 2, exclude=ex, max_excluded_per_row=0)


def test_exclude_type_error_message():
    with pytest.raises(TypeError, match="exclude must be a bool tensor"):
        topk_view(torch.rand(1, 3), 1, exclude=torch.zeros(1, 3))


# ---------------------------------------------------------------------------------------- no host sync
def test_unvalidated_view_compiles_with_fullgraph():
    """validate_args=False: no host sync and no data-dependent shape (dense inputs; fullgraph=True
    fails on either), and the compiled view equals the eager one."""
    torch._dynamo.reset()
    scores, grades, excluded = random_case(21, n=6, length=12)

    def fn(p, t, e):
        v = topk_view(p, 4, target=t, exclude=e, validate_args=False, chunk_elements=30)
        return v.items, v.group_size, v.group_relevant, v.group_gain, v.relevant_before, v.n_relevant, v.ideal_gains

    compiled = torch.compile(fn, fullgraph=True, backend="inductor")
    got, want = compiled(scores, grades, excluded), fn(scores, grades, excluded)
    for g, w in zip(got[1:], want[1:]):
        torch.testing.assert_close(g, w)
    # items inside a tie group may differ between the two runs; the view is checked against brute force
    view = topk_view(scores, 4, target=grades, exclude=excluded, validate_args=False)
    check_view(view, scores, grades, excluded, 4, "average", "exp2", None)


def test_unvalidated_cpu_eager_reads_only_the_spilled_rows(monkeypatch):
    """On the CPU in eager mode an unvalidated view reads the spilled rows from host memory (no
    device sync there), as the validated view does; with the host reads off (CUDA's path, and what
    HostSyncGuard selects) every row gets the row pass. Same statistics either way."""
    scores = torch.tensor([[0.9, 0.5, 0.5, 0.5, 0.1], [0.9, 0.8, 0.7, 0.6, 0.5], [0.2, 0.2, 0.2, 0.2, 0.2]])
    grades = torch.tensor([[0, 1, 0, 2, 1], [1, 0, 0, 1, 0], [0, 0, 3, 0, 1]])
    excluded = torch.tensor([[False, False, True, False, False], [False] * 5, [True, False, False, False, False]])
    fields = ("items", "boundary_size", "group_size", "group_relevant", "group_gain", "n_relevant", "ideal_gains")
    views = {}
    for path in (True, False, "sync-free"):
        with monkeypatch.context() as m:
            views[path] = topk_view(
                scores, 2, target=grades, exclude=excluded, validate_args=select_path(path, m), ties="first"
            )
    # rows 0 (0.5 three times, one excluded: two left for one slot) and 2 (four 0.2 for two slots) spill
    assert views[True].pass_rows.tolist() == views[False].pass_rows.tolist() == [0, 2]
    assert views["sync-free"].pass_rows is None
    for name in fields:
        want = getattr(views[True], name)
        for path in (False, "sync-free"):
            torch.testing.assert_close(getattr(views[path], name), want, msg=f"{name} ({path})")
    assert views[False].boundary_size.tolist() == [2, 1, 4]  # whole groups over the rows
    avg = topk_view(scores, 2, exclude=excluded, validate_args=False)
    assert avg.boundary_size.tolist() == [2, 1, 4] and avg.pass_rows.tolist() == [0, 2]


def test_host_sync_guard_selects_the_sync_free_path():
    from tests.sync_guard import HostSyncGuard

    scores = torch.tensor([[0.5, 0.5, 0.5, 0.1]])
    assert _inputs.CPU_HOST_READS
    with HostSyncGuard():
        assert not _inputs.CPU_HOST_READS
        view = topk_view(scores, 2, exclude=torch.tensor([[False, True, False, False]]), validate_args=False)
    assert _inputs.CPU_HOST_READS and view.pass_rows is None and view.boundary_size.tolist() == [2]
