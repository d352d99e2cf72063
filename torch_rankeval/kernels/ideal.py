"""nDCG's ideal DCG of ``k`` documents of the query's highest gain (RecTools' ``NDCG`` with
``divide_by_achievable=False``): the convention's ``ideal_ranking="k_relevant"``.

Example:
    >>> import torch
    >>> from torch_rankeval.conventions import DEFAULT
    >>> from torch_rankeval.ranking.view import RankedBatch
    >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[0, 1, 0]]), None, DEFAULT)
    >>> k_relevant_idcg(rb, (1, 3, None), DEFAULT)   # 1; 1 + 1/log2(3) + 1/2 (k=3 and the list's length)
    tensor([[1.0000, 2.1309, 2.1309]])
"""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention, discount_table
from torch_rankeval.ranking.view import RankedView

__all__ = ["k_relevant_idcg"]


def k_relevant_idcg(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> Tensor:
    """``g_max * sum_{p <= k} discount_p`` per query and cutoff, ``(N, K)``: ``g_max`` the largest judged
    gain of the query (0 if none is positive), ``k`` the cutoff (ranks past the list count too), the
    list's number of documents for no cutoff."""
    top = rb.ideal_top(ks)[..., :1].clamp(min=0)
    need = max([rb.length, *(k for k in ks if k is not None)])
    table = rb.discounts
    if table.ndim != 1 or table.shape[0] < need:  # ranks past the list: the convention's discounts
        table = discount_table(need, conv, dtype=rb.dtype, device=rb.device)
    head = table[:need].to(rb.dtype)
    cum = torch.cat([head.new_zeros(1), head.cumsum(0)])  # cum[i]: ranks 1..i
    sizes = [rb.length if k is None else k for k in ks]
    ideal = cum[rb.constant(sizes, torch.int64)].unsqueeze(0).expand(rb.n_lists, -1)
    if None in ks:  # no cutoff: the list's own length
        whole = cum[rb.n_valid.to(torch.int64).clamp(max=need)].unsqueeze(-1)
        none = rb.constant([k is None for k in ks], torch.bool)
        ideal = torch.where(none, whole, ideal)
    return top * ideal
