"""ties="average" is the exact mean over every order of tied documents, checked by enumerating all
permutations of small lists; and the deterministic tie policies on written-out examples."""

from __future__ import annotations

import itertools

import pytest
import torch

from torch_rankeval import functional as F

# (name, callable(preds, target, k, **kw)) for every metric, with the variants that change the math.
METRICS = {
    "dcg": lambda p, t, k, **kw: F.dcg(p, t, k, **kw),
    "ndcg": lambda p, t, k, **kw: F.ndcg(p, t, k, **kw),
    "ndcg_linear": lambda p, t, k, **kw: F.ndcg(p, t, k, gain="linear", **kw),
    "ap_all": lambda p, t, k, **kw: F.average_precision(p, t, k, **kw),
    "ap_retrieved": lambda p, t, k, **kw: F.average_precision(p, t, k, denominator="retrieved_relevant", **kw),
    "ap_min_k": lambda p, t, k, **kw: F.average_precision(p, t, k, denominator="min_k_relevant", **kw),
    "ap_graded": lambda p, t, k, **kw: F.average_precision(p, t, k, graded=True, **kw),
    "ap_graded_min_k": lambda p, t, k, **kw: F.average_precision(
        p, t, k, graded=True, denominator="min_k_relevant", **kw
    ),
    "rr": lambda p, t, k, **kw: F.reciprocal_rank(p, t, k, **kw),
    "precision": lambda p, t, k, **kw: F.precision(p, t, k, **kw),
    "recall": lambda p, t, k, **kw: F.recall(p, t, k, **kw),
    "hit_rate": lambda p, t, k, **kw: F.hit_rate(p, t, k, **kw),
    "r_precision": lambda p, t, k, **kw: F.r_precision(p, t, **kw),
}

LISTS = [
    ([0.5, 0.5, 0.5, 0.5, 0.5], [1, 0, 2, 0, 1]),  # one big tie
    ([0.9, 0.5, 0.5, 0.5, 0.1, 0.1], [0, 1, 0, 3, 1, 0]),  # a tie straddling k=2..3
    ([0.3, 0.3, 0.7, 0.7, 0.7, 0.2], [2, 0, 0, 1, 1, 0]),
    ([0.1, 0.2, 0.2, 0.3, 0.3, 0.3], [0, 0, 1, 0, 0, 1]),
    ([1.0, 1.0, 1.0, 0.0, 0.0, 0.0], [0, 0, 0, 1, 1, 1]),
]


def brute_force(fn, preds, target, k):
    """Mean over all permutations of the input with a stable sort: every tie order equally likely."""
    n = len(preds)
    perms = torch.tensor(list(itertools.permutations(range(n))))
    p = torch.tensor(preds, dtype=torch.float64)[perms]
    t = torch.tensor(target)[perms]
    return fn(p, t, k, ties="first", reduction="none").mean(0)


@pytest.mark.parametrize("preds,target", LISTS)
@pytest.mark.parametrize("name", sorted(METRICS))
def test_average_ties_equal_mean_over_all_permutations(name, preds, target):
    fn = METRICS[name]
    for k in (None, 1, 2, 3, 4, 8):
        want = brute_force(fn, preds, target, k)
        got = fn(torch.tensor(preds, dtype=torch.float64), torch.tensor(target), k, ties="average")
        torch.testing.assert_close(got, want, atol=1e-10, rtol=0, msg=f"{name} k={k}")


def test_average_ties_batched_with_padding_equals_single_lists():
    preds = torch.tensor([[0.5, 0.5, 0.2, 9.0], [0.1, 0.1, 0.1, 0.1]], dtype=torch.float64)
    target = torch.tensor([[1, 0, 1, 7], [0, 1, 0, 1]])
    mask = torch.tensor([[True, True, True, False], [True] * 4])
    for name, fn in METRICS.items():
        batched = fn(preds, target, [1, 2, 3], mask=mask, reduction="none")
        first = fn(preds[0, :3], target[0, :3], [1, 2, 3], reduction="none")
        second = fn(preds[1], target[1], [1, 2, 3], reduction="none")
        torch.testing.assert_close(batched, torch.stack([first, second]), msg=name)


def test_graded_retrieved_ap_rejects_a_cutoff_inside_the_list_under_averaging():
    with pytest.raises(ValueError, match="no exact tie-averaged value"):
        F.average_precision(torch.rand(5), torch.randint(0, 3, (5,)), 3, graded=True, denominator="retrieved_relevant")
    # the whole list has an exact value, and ties="first" is deterministic
    F.average_precision(torch.rand(5), torch.randint(0, 3, (5,)), graded=True, denominator="retrieved_relevant")
    F.average_precision(
        torch.rand(5), torch.randint(0, 3, (5,)), 3, graded=True, denominator="retrieved_relevant", ties="first"
    )


def test_deterministic_tie_policies_written_out():
    preds = torch.tensor([0.5, 0.5, 0.5])
    target = torch.tensor([0, 1, 0])
    # first: input order, the relevant document is at rank 2
    assert F.reciprocal_rank(preds, target, ties="first").item() == pytest.approx(1 / 2)
    # pessimistic: relevant documents last inside the tie -> rank 3; optimistic -> rank 1
    assert F.reciprocal_rank(preds, target, ties="pessimistic").item() == pytest.approx(1 / 3)
    assert F.reciprocal_rank(preds, target, ties="optimistic").item() == pytest.approx(1.0)
    # average: (1 + 1/2 + 1/3) / 3
    assert F.reciprocal_rank(preds, target).item() == pytest.approx(11 / 18)
    # pessimistic <= average <= optimistic for graded nDCG too
    p, t = torch.tensor([0.2, 0.2, 0.2, 0.9]), torch.tensor([3, 0, 1, 0])
    lo, mid, hi = (F.ndcg(p, t, ties=tie).item() for tie in ("pessimistic", "average", "optimistic"))
    assert lo < mid < hi


def test_ties_do_not_cross_padding():
    """Padding placed between equal scores must not join the tie group."""
    preds = torch.tensor([[0.5, 0.5, 0.5, 0.5]])
    target = torch.tensor([[1, 0, 0, 0]])
    mask = torch.tensor([[True, False, True, False]])
    got = F.reciprocal_rank(preds, target, mask=mask).item()
    assert got == pytest.approx((1 + 1 / 2) / 2)


# ----------------------------------------------------------------------------- torch's own tie orders
def _heavy_ties(g: torch.Generator, n_rows: int, length: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    values = int(torch.randint(1, 5, (1,), generator=g))  # 1 to 4 distinct scores: heavy ties
    return (torch.randint(0, values, (n_rows, length), generator=g).to(dtype) - 1) / 2


def test_torch_orders_equal_rows_of_one_length_in_one_2d_call_as_per_row_1d_calls():
    """What ties="torch_topk" / "torch_argsort" rely on: each row of a 2-D torch.topk / torch.argsort
    (rows of one length) is ordered as the same call on that row alone orders it (the oracle: torch
    itself, per row, as torchmetrics calls it), for lengths 1-200 and heavy ties."""
    g = torch.Generator().manual_seed(0)
    for length in range(1, 201):
        x = _heavy_ties(g, 6, length)
        argsort = torch.argsort(x, dim=-1, descending=True)
        for k in {1, 3, 10, length}:
            m = min(k, length)
            top = x.topk(m, dim=-1, sorted=True).indices
            for i in range(x.shape[0]):
                assert torch.equal(top[i], x[i].topk(m, sorted=True).indices), (length, k)
        for i in range(x.shape[0]):
            assert torch.equal(argsort[i], torch.argsort(x[i], descending=True)), length


@pytest.mark.parametrize("ties", ["torch_topk", "torch_argsort"])
def test_torch_tie_policies_rank_each_list_as_torch_ranks_it_alone(ties):
    """The ranking core's order under the torch policies, on padded batches with scattered padding,
    equals torch's call on each list's own real documents (in input order, as float32); padding last."""
    from torch_rankeval.conventions import Convention
    from torch_rankeval.ranking.view import RankedBatch

    g = torch.Generator().manual_seed(1)
    for length in (1, 2, 3, 4, 16, 17, 40, 64, 200):
        preds = _heavy_ties(g, 30, length, torch.float64)
        valid = torch.rand(30, length, generator=g) < 0.8
        valid[0] = True  # a full row
        valid[1] = False  # an empty row
        target = torch.zeros(30, length, dtype=torch.long)
        for k in (None, 1, 3, 10):
            for mask in (None, valid):
                rb = RankedBatch(preds, target, mask, Convention(ties=ties, torch_topk_k=k))
                for i in range(30):
                    real = torch.arange(length) if mask is None else mask[i].nonzero().squeeze(1)
                    x = preds[i, real].float()
                    n = x.shape[0]
                    if ties == "torch_argsort":
                        want, width = real[torch.argsort(x, descending=True)], n
                    else:
                        width = n if k is None else min(k, n)
                        want = real[x.topk(width, sorted=True).indices]
                    assert torch.equal(rb.order[i, :width], want), (ties, length, k, i)
                    assert set(rb.order[i, :n].tolist()) == set(real.tolist())  # then the rest, then padding


def test_torch_tie_policies_are_checked_names():
    from torch_rankeval.conventions import Convention

    with pytest.raises(ValueError, match="torch_topk_k"):
        Convention(ties="torch_topk", torch_topk_k=0)
    with pytest.raises(ValueError, match="ties="):
        Convention(ties="torch_sort")


def test_torch_tie_policies_on_padded_lists_refuse_torch_compile_by_name():
    from torch_rankeval.conventions import Convention
    from torch_rankeval.ranking.view import RankedBatch

    preds, target = torch.ones(2, 5), torch.zeros(2, 5, dtype=torch.long)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])

    def rank(p, t, m):
        return RankedBatch(p, t, m, Convention(ties="torch_argsort")).order

    with pytest.raises(Exception, match="cannot run under torch.compile"):
        torch.compile(rank, fullgraph=True, backend="inductor")(preds, target, mask)
    # without padding: no host read, and the compiled order is torch's own (every score tied)
    compiled = torch.compile(rank, fullgraph=True, backend="inductor")(preds, target, None)
    torch.testing.assert_close(compiled, rank(preds, target, None))
    assert compiled.shape == (2, 5)
