"""Sparse targets (torch_rankeval.ranking.sparse): validation, the padded-id builder, and the
lookups (grades, n_relevant, ideal top gains, exclusion), each against a dense computation."""

from __future__ import annotations

import pytest
import torch

from torch_rankeval.ranking.sparse import (
    SparseTarget,
    check_exclude,
    is_relevant,
    sparse_from_ids,
    sparse_target,
)

pytestmark = pytest.mark.filterwarnings("ignore:Sparse (CSR tensor support is in beta|invariant checks are implicitly)")


def _random_dense(n, length, density, seed, max_grade=3, dtype=torch.int64):
    g = torch.Generator().manual_seed(seed)
    grades = torch.randint(1, max_grade + 1, (n, length), generator=g)
    keep = torch.rand(n, length, generator=g) < density
    return torch.where(keep, grades, 0).to(dtype)


def _layouts(dense):
    return {
        "coo": dense.to_sparse_coo(),
        "csr": dense.to_sparse_csr(),
        "coo_uncoalesced": torch.sparse_coo_tensor(  # entries in reverse order, not flagged coalesced
            dense.to_sparse_coo().indices().flip(-1), dense.to_sparse_coo().values().flip(-1), dense.shape
        ),
    }


# ---------------------------------------------------------------------------------------- canonical form
@pytest.mark.parametrize("layout", ["coo", "csr", "coo_uncoalesced"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.bool])
def test_canonical_form_roundtrips_and_lookups_match_dense(layout, dtype):
    dense = _random_dense(7, 13, 0.3, seed=1).to(dtype)
    st = sparse_target(_layouts(dense)[layout], (7, 13))
    assert torch.equal(st.to_dense(), dense)
    # entries sorted by (row, item), row pointers consistent
    assert torch.all(st.keys[1:] > st.keys[:-1])
    assert torch.equal(st.crow, torch.cat([torch.zeros(1, dtype=torch.int64), (dense != 0).sum(-1).cumsum(0)]))
    # lookup of every (row, item) pair equals the dense tensor
    items = torch.arange(13).expand(7, -1)
    assert torch.equal(st.lookup(items), dense)
    rows = torch.tensor([0, 3, 6, 6])
    cols = torch.tensor([12, 0, 5, 6])
    assert torch.equal(st.lookup(cols, rows=rows), dense[rows, cols])


def test_n_relevant_and_ideal_top_gains_against_dense_sorts():
    dense = _random_dense(20, 30, 0.2, seed=2, max_grade=4)
    dense[3] = 0  # an empty row
    st = sparse_target(dense.to_sparse_csr(), (20, 30))
    assert torch.equal(st.n_relevant(), (dense >= 1).sum(-1))
    assert torch.equal(st.n_relevant(threshold=3), (dense >= 3).sum(-1))
    for k in (1, 4, 30):
        for gain, fn in (("exp2", lambda t: 2.0**t - 1), ("linear", lambda t: t), ({1: 0.5, 2: 3.0}, None)):
            got = st.ideal_top_gains(k, gain=gain, dtype=torch.float64)
            if fn is None:
                table = torch.tensor([0.0, 0.5, 3.0, 3.0, 4.0], dtype=torch.float64)  # unmapped grades keep their value
                g = table[dense]
            else:
                g = fn(dense.double())
            want = g.sort(-1, descending=True).values[:, :k]
            assert torch.equal(got, want), (k, gain)


def test_hand_example_ideal_and_lookup():
    # row 0: items 1 (grade 2) and 4 (grade 1); row 1: nothing; row 2: item 0 (grade 3)
    t = torch.sparse_coo_tensor(torch.tensor([[0, 0, 2], [4, 1, 0]]), torch.tensor([1, 2, 3]), (3, 5))
    st = sparse_target(t, (3, 5))
    assert st.rows.tolist() == [0, 0, 2] and st.items.tolist() == [1, 4, 0] and st.crow.tolist() == [0, 2, 2, 3]
    # exp2 gains: 3, 1 / none / 7
    assert st.ideal_top_gains(3).tolist() == [[3.0, 1.0, 0.0], [0.0, 0.0, 0.0], [7.0, 0.0, 0.0]]
    assert st.lookup(torch.tensor([[4, 0], [1, 1], [0, 4]])).tolist() == [[1, 0], [0, 0], [3, 0]]


@pytest.mark.parametrize("exclude_kind", ["dense", "sparse"])
def test_excluded_entries_do_not_count(exclude_kind):
    dense = _random_dense(10, 12, 0.4, seed=3)
    g = torch.Generator().manual_seed(4)
    ex = torch.rand(10, 12, generator=g) < 0.3
    exclude = ex if exclude_kind == "dense" else ex.to_sparse_coo()
    st = sparse_target(dense.to_sparse_coo(), (10, 12)).excluding(exclude)
    kept = torch.where(ex, 0, dense)
    assert torch.equal(st.to_dense(), kept)
    assert torch.equal(st.n_relevant(), (kept >= 1).sum(-1))
    assert torch.equal(st.ideal_top_gains(5, "linear"), kept.float().sort(-1, descending=True).values[:, :5])
    assert torch.equal(st.lookup(torch.arange(12).expand(10, -1)), kept)


def test_sparse_exclude_with_explicit_false_entries_excludes_nothing_there():
    ex = torch.sparse_coo_tensor(torch.tensor([[0, 0], [1, 2]]), torch.tensor([True, False]), (1, 4))
    st = SparseTarget.from_dense(torch.tensor([[0, 1, 1, 0]])).excluding(ex)
    assert st.n_relevant().tolist() == [1] and st.to_dense().tolist() == [[0, 0, 1, 0]]
    canon = check_exclude(ex, (1, 4))
    assert canon.counted.tolist() == [True, False]


def test_from_dense_and_is_relevant_rules():
    st = SparseTarget.from_dense(torch.tensor([[0.0, 0.5, 2.0]]))
    assert st.items.tolist() == [1, 2] and st.n_relevant().tolist() == [2]  # float grades: > 0
    assert st.n_relevant(threshold=1.0).tolist() == [1]
    assert is_relevant(torch.tensor([0, 1, 2])).tolist() == [False, True, True]
    assert is_relevant(torch.tensor([True, False])).tolist() == [True, False]


# ---------------------------------------------------------------------------------------- validation
def test_structure_errors_name_the_argument():
    good = torch.tensor([[0, 1, 0]]).to_sparse()
    with pytest.raises(ValueError, match=r"target must have the shape of preds \(2, 3\), got \(1, 3\)"):
        sparse_target(good, (2, 3))
    with pytest.raises(TypeError, match="torch.sparse_coo or torch.sparse_csr"):
        sparse_target(torch.tensor([[0, 1, 0]]).to_sparse_csc(), (1, 3))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        sparse_target([[0, 1]], (1, 2))
    with pytest.raises(ValueError, match="2-D sparse tensor"):
        sparse_target(torch.tensor([0, 1, 0]).to_sparse(), (1, 3))
    with pytest.raises(ValueError, match="2-D sparse tensor"):  # hybrid COO: dense values per entry
        sparse_target(torch.ones(2, 3, 2).to_sparse(2), (2, 3))
    with pytest.raises(TypeError, match="bool, integer or float grades"):
        sparse_target(torch.tensor([[0, 1j]]).to_sparse(), (1, 2))
    with pytest.raises(ValueError, match="ideal_target|exclude is on|target is on"):
        sparse_target(good, (1, 3), device=torch.device("meta"))


def test_value_errors_negative_nan_duplicates_out_of_range():
    with pytest.raises(ValueError, match="target has negative grades"):
        sparse_target(torch.tensor([[0, -1, 2]]).to_sparse(), (1, 3))
    with pytest.raises(ValueError, match="NaN or infinite grades"):
        sparse_target(torch.tensor([[0.0, float("nan")]]).to_sparse(), (1, 2))
    dup = torch.sparse_coo_tensor(torch.tensor([[0, 0], [1, 1]]), torch.tensor([1, 2]), (1, 3))
    with pytest.raises(ValueError, match="duplicate entries"):
        sparse_target(dup, (1, 3))
    dup_csr = torch.sparse_csr_tensor(torch.tensor([0, 2]), torch.tensor([2, 2]), torch.tensor([1, 1]), (1, 3))
    with pytest.raises(ValueError, match="duplicate entries"):
        sparse_target(dup_csr, (1, 3))
    outside = torch.sparse_coo_tensor(torch.tensor([[0], [7]]), torch.tensor([1]), (1, 3))
    with pytest.raises(ValueError, match="outside its shape"):
        sparse_target(outside, (1, 3))
    # unvalidated: no error; the first duplicate (input order) counts, the later one does not
    st = sparse_target(dup, (1, 3), validate_args=False)
    assert st.to_dense().tolist() == [[0, 1, 0]] and st.lookup(torch.tensor([[1]])).tolist() == [[1]]


def test_unsorted_csr_columns_are_sorted():
    t = torch.sparse_csr_tensor(torch.tensor([0, 3]), torch.tensor([4, 0, 2]), torch.tensor([1, 2, 3]), (1, 5))
    st = sparse_target(t, (1, 5))
    assert st.items.tolist() == [0, 2, 4] and st.grades.tolist() == [2, 3, 1]


def test_exclude_checks():
    with pytest.raises(TypeError, match="exclude must be a bool tensor"):
        check_exclude(torch.zeros(1, 3), (1, 3))
    with pytest.raises(ValueError, match=r"exclude must have the shape of preds \(1, 3\)"):
        check_exclude(torch.zeros(2, 3, dtype=torch.bool), (1, 3))
    with pytest.raises(ValueError, match="exclude is on"):
        check_exclude(torch.zeros(1, 3, dtype=torch.bool), (1, 3), torch.device("meta"))
    with pytest.raises(ValueError, match="exclude must have the shape"):
        check_exclude(torch.zeros(2, 3, dtype=torch.bool).to_sparse(), (1, 3))


# ---------------------------------------------------------------------------------------- builder
@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr])
def test_sparse_from_ids_matches_a_dense_scatter(layout):
    g = torch.Generator().manual_seed(5)
    n, m, num_items = 9, 6, 40
    ids = torch.stack([torch.randperm(num_items, generator=g)[:m] for _ in range(n)])
    ids[torch.rand(n, m, generator=g) < 0.3] = -1
    ids[2] = -1  # a row without items
    grades = torch.randint(1, 4, (n, m), generator=g)
    t = sparse_from_ids(ids, num_items, grades=grades, layout=layout)
    assert t.layout == layout and tuple(t.shape) == (n, num_items)
    want = torch.zeros(n, num_items, dtype=torch.int64)
    for r in range(n):
        for j in range(m):
            if ids[r, j] >= 0:
                want[r, ids[r, j]] = grades[r, j]
    assert torch.equal(t.to_dense(), want)
    if layout == torch.sparse_coo:
        assert t.is_coalesced()
    # without grades: ones
    ones = sparse_from_ids(ids, num_items, layout=layout).to_dense()
    assert torch.equal(ones, (want > 0).long())
    # it is a valid target
    assert torch.equal(sparse_target(t, (n, num_items)).to_dense(), want)


def test_sparse_from_ids_errors():
    with pytest.raises(ValueError, match=r"outside \[0, 5\)"):
        sparse_from_ids(torch.tensor([[1, 7]]), 5)
    with pytest.raises(ValueError, match="repeats an item"):
        sparse_from_ids(torch.tensor([[1, 1]]), 5)
    with pytest.raises(TypeError, match="integer tensor"):
        sparse_from_ids(torch.tensor([[1.0]]), 5)
    with pytest.raises(ValueError, match="num_items must be a positive int"):
        sparse_from_ids(torch.tensor([[1]]), 0)
    with pytest.raises(ValueError, match="grades must be a tensor of the shape of ids"):
        sparse_from_ids(torch.tensor([[1]]), 5, grades=torch.tensor([1, 2]))
    # a custom pad value
    t = sparse_from_ids(torch.tensor([[3, 99]]), 5, pad=99)
    assert t.to_dense().tolist() == [[0, 0, 0, 1, 0]]
