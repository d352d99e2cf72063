"""Property tests (hypothesis): permutation and padding invariance, range, monotonicity."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from torch_rankeval import functional as F

BOUNDED = {
    "ndcg": lambda p, t, **kw: F.ndcg(p, t, [1, 3, 50], **kw),
    "ap": lambda p, t, **kw: F.average_precision(p, t, [1, 3, 50], **kw),
    "ap_graded": lambda p, t, **kw: F.average_precision(p, t, [1, 3, 50], graded=True, **kw),
    "ap_retrieved": lambda p, t, **kw: F.average_precision(p, t, [1, 3, 50], denominator="retrieved_relevant", **kw),
    "rr": lambda p, t, **kw: F.reciprocal_rank(p, t, [1, 3, 50], **kw),
    "precision": lambda p, t, **kw: F.precision(p, t, [1, 3, 50], **kw),
    "recall": lambda p, t, **kw: F.recall(p, t, [1, 3, 50], **kw),
    "hit_rate": lambda p, t, **kw: F.hit_rate(p, t, [1, 3, 50], **kw),
    "r_precision": lambda p, t, **kw: F.r_precision(p, t, **kw),
}

# Scores from a small set so that ties are frequent.
lists = st.integers(1, 9).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, -3.0]), min_size=n, max_size=n),
        st.lists(st.integers(0, 4), min_size=n, max_size=n),
        st.randoms(use_true_random=False),
    )
)


@settings(max_examples=60, deadline=None)
@given(lists)
def test_permuting_documents_changes_nothing_and_values_lie_in_unit_interval(data):
    scores, grades, rnd = data
    p, t = torch.tensor(scores, dtype=torch.float64), torch.tensor(grades)
    perm = list(range(len(scores)))
    rnd.shuffle(perm)
    for name, fn in BOUNDED.items():
        a = fn(p, t, reduction="none")
        b = fn(p[perm], t[perm], reduction="none")
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0, msg=name)
        assert bool(((a >= -1e-12) & (a <= 1 + 1e-12)).all()), name


@settings(max_examples=60, deadline=None)
@given(lists, st.integers(1, 4), st.integers(0, 3))
def test_padding_anywhere_changes_nothing(data, n_pad, seed):
    scores, grades, rnd = data
    p, t = torch.tensor(scores, dtype=torch.float64), torch.tensor(grades)
    g = torch.Generator().manual_seed(seed)
    pad_p = torch.rand(n_pad, generator=g, dtype=torch.float64) * 10 - 5
    pad_t = torch.randint(0, 5, (n_pad,), generator=g)
    pp, tt = torch.cat([p, pad_p]), torch.cat([t, pad_t])
    mask = torch.cat([torch.ones(len(scores), dtype=torch.bool), torch.zeros(n_pad, dtype=torch.bool)])
    perm = list(range(len(pp)))
    rnd.shuffle(perm)
    for name, fn in BOUNDED.items():
        torch.testing.assert_close(
            fn(pp[perm], tt[perm], mask=mask[perm], reduction="none"), fn(p, t, reduction="none"), msg=name
        )


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=2, max_size=9), st.data())
def test_moving_a_more_relevant_document_up_never_hurts(grades, data):
    n = len(grades)
    t = torch.tensor(grades)
    p = torch.arange(n, 0, -1, dtype=torch.float64)  # rank i+1 for document i, no ties
    i = data.draw(st.integers(0, n - 2))
    j = data.draw(st.integers(i + 1, n - 1))
    if grades[j] <= grades[i]:
        return
    swapped = p.clone()
    swapped[i], swapped[j] = p[j], p[i]  # document j (more relevant) moves up to rank i+1
    for name in ("ndcg", "ap", "ap_graded", "rr", "precision", "recall", "hit_rate", "r_precision"):
        before = BOUNDED[name](p, t, reduction="none")
        after = BOUNDED[name](swapped, t, reduction="none")
        assert bool((after >= before - 1e-12).all()), name
