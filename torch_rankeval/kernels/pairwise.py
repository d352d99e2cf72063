"""Measures of pairs and positions: torchmetrics' fall-out and retrieval AUROC, TF-Ranking's ordered
pair accuracy (OPA) and average relevance position (ARP).

- **Fall-out@k** (torchmetrics ``RetrievalFallOut``): non-relevant documents in the top ``k`` / all
  non-relevant documents of the list. Empty: a list without non-relevant document (torchmetrics'
  class scores it 1 by default, ``empty_target_action="pos"``).
- **AUROC@k** (torchmetrics ``RetrievalAUROC(top_k=k, max_fpr=...)``): the area under the ROC curve of
  the top ``k`` documents, tied scores counting half (the trapezoidal ROC); 0 when the top ``k``
  lack a relevant or a non-relevant document. With ``max_fpr`` the McClish-standardised partial
  area over false-positive rates ``[0, max_fpr]``. Empty: a list without relevant document.
- **OPA** (TF-Ranking ``OPAMetric``): among the pairs of judged documents with different grades, the
  share that the scores order correctly. Empty: no such pair. With per-document weights
  (``rb.item_weights``, TF-Ranking's per-example weights) each pair weighs the weight of its
  higher-graded document.
- **ARP** (TF-Ranking ``ARPMetric``): ``sum(rank * grade) / sum(grade)`` over judged documents (lower
  is better; negative grades weigh 0). Empty: no positive grade. With per-document weights, each
  grade is multiplied by its document's weight.

Unjudged documents count as non-relevant in fall-out and AUROC (as in precision and recall); OPA
and ARP leave them out (their grade is unknown), while they keep their ranks.

**Ties** (``ties="average"``): the exact expected value over the orders of tied documents. For AUROC
and OPA a tied pair then counts 1/2 — which is also torchmetrics' and sklearn's AUROC convention;
TF-Ranking's OPA counts a tied pair as wrong (``ties="pessimistic"`` reproduces it). AUROC@k averages
over which tied documents the cutoff keeps (hypergeometric in the group it splits). With
``max_fpr``, the ROC runs straight through a tie group (torchmetrics' interpolation), averaged the
same way over the documents a cutoff keeps. Under ``ties="torch_topk"`` AUROC is torchmetrics'
``retrieval_auroc`` instead: the ``k`` documents ``torch.topk`` keeps (the view's first ``k``
positions), tied pairs among them 1/2, no expectation over the group the cutoff splits, and
``binary_auroc``'s sigmoid when a kept score lies outside [0, 1]. ARP replaces each rank by its
group's mean rank; TF-Ranking shuffles ties at random, so ``ties="average"`` is the expectation of
its value.

Costs: fall-out and ARP are one prefix sum; AUROC adds ``O(W)`` per cutoff for the group a cutoff
splits; OPA counts pairs without forming them: a bottom-up merge sort of each list's grades in
ranked order (``log2 L`` rounds of one sort and one ``searchsorted``), ``O(L log^2 L)`` time and
``O(L)`` memory per list.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import between, bounds, expected_top, judged_grades, prefix, safe_div
from torch_rankeval.ranking.view import RankedBatch, RankedView, log_comb  # noqa: F401 (RankedBatch: the doctests)

__all__ = ["arp_values", "auroc_values", "fall_out_values", "opa_values"]


def _nonrel(rb: RankedView) -> Tensor:
    return rb.valid & (rb.rel == 0)


def fall_out_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Fall-out at each cutoff, ``(N, K)``, and the empty flags (no non-relevant document).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7, 0.6]]), torch.tensor([[0, 1, 0, 1]]), None, DEFAULT)
        >>> fall_out_values(rb, (1, 3), DEFAULT)[0]
        tensor([[0.5000, 1.0000]])
    """
    nonrel = _nonrel(rb)
    total = nonrel.sum(-1, keepdim=True).to(torch.float64)
    return safe_div(expected_top(rb, nonrel, ks), total).to(rb.dtype), total == 0


def arp_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Average relevance position, ``(N, K)`` (cutoffs are ignored), and the empty flags.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[0, 2, 1]]), None, DEFAULT)
        >>> arp_values(rb, (None,), DEFAULT)[0]            # (2 * 2 + 3 * 1) / 3
        tensor([[2.3333]])
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[0, 2, 1]]), None, DEFAULT,
        ...                  item_weights=torch.tensor([[1.0, 0.5, 3.0]]))
        >>> arp_values(rb, (None,), DEFAULT)[0]            # (2 * 2 * 0.5 + 3 * 1 * 3) / (2 * 0.5 + 1 * 3)
        tensor([[2.7500]])
    """
    start, end = bounds(rb)
    w = judged_grades(rb)
    if rb.item_weights is not None:
        w = w * rb.ranked(rb.item_weights).to(torch.float64)
    mean_rank = (start + end + 1).to(torch.float64) / 2  # mean of ranks start+1 .. end
    total = w.sum(-1, keepdim=True)
    value = safe_div((w * mean_rank).sum(-1, keepdim=True), total)
    return value.to(rb.dtype).expand(-1, len(ks)), total == 0


# ----------------------------------------------------------------------------- AUROC
def auroc_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, *, max_fpr: float | None = None
) -> tuple[Tensor, Tensor]:
    """Retrieval AUROC of the top ``k`` at each cutoff, ``(N, K)``, and the empty flags (no relevant document).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7, 0.6]]), torch.tensor([[1, 0, 1, 0]]), None, DEFAULT)
        >>> auroc_values(rb, (None, 3), DEFAULT)[0]        # 3 of 4 pairs in order; in the top 3, 1 of 2
        tensor([[0.7500, 0.5000]])
    """
    if conv.ties == "torch_topk":
        return _torchmetrics_auroc(rb, ks, max_fpr)
    f64 = torch.float64
    start, end = bounds(rb)
    valid = rb.valid
    rel = rb.rel.to(f64)
    non = _nonrel(rb).to(f64)
    cs_r, cs_u = prefix(rel), prefix(non)
    r_before = cs_r.gather(-1, start)
    r_group = between(cs_r, start, end)
    # ROC area in counts: each non-relevant document earns the relevant ones above its group, half its group's.
    cs_credit = prefix(non * (r_before + r_group / 2))
    empty = rb.rel.sum(-1, keepdim=True) == 0
    values = []
    for i in rb.cutoff_index(ks):
        s, e = start[:, i : i + 1], end[:, i : i + 1]
        n = (e - s).to(f64)
        r = between(cs_r, s, e)
        m = torch.where(valid[:, i : i + 1], (i + 1 - s).to(f64), torch.zeros_like(n))  # padding adds no document
        r0, u0, c0 = cs_r.gather(-1, s), cs_u.gather(-1, s), cs_credit.gather(-1, s)
        if i == rb.length - 1:  # the whole list: the last group is kept whole (or is padding)
            hh = torch.where(m > 0, r, torch.zeros_like(r))
            lh, prob = m - hh, torch.ones_like(r)
        else:
            h = torch.arange(i + 2, dtype=f64, device=rb.device)  # relevant documents the cutoff keeps of the group
            ok = (h <= r) & (h <= m) & (m - h <= n - r)
            hh, lh = torch.where(ok, h, 0.0), torch.where(ok, m - h, 0.0)
            log_p = log_comb(torch.where(ok, r, hh), hh) + log_comb(torch.where(ok, n - r, lh), lh) - log_comb(n, m)
            prob = torch.where(ok, torch.exp(log_p), 0.0)
        R, U = r0 + hh, u0 + lh
        if max_fpr is None or max_fpr >= 1:
            area = c0 + lh * r0 + hh * lh / 2
        else:
            area = _partial_area(max_fpr * U, r0, u0, c0, hh, lh, s, cs_r, cs_u, cs_credit, start, end, i)
        auc = safe_div(area, R * U)
        if max_fpr is not None and max_fpr < 1:
            lo = 0.5 * max_fpr**2
            auc = 0.5 * (1 + (auc - lo) / (max_fpr - lo))
        auc = torch.where((R > 0) & (U > 0), auc, torch.zeros_like(auc))
        values.append((prob * auc).sum(-1))
    return torch.stack(values, dim=-1).to(rb.dtype), empty


def _score_runs(x: Tensor) -> tuple[Tensor, Tensor]:
    """Start and one-past-end position of each position's run of equal values of ``x`` ``(N, L)``
    (NaN, the padding, equals nothing): the tie groups of a row ranked by score, whatever its order
    inside a tie."""
    n, length = x.shape
    pos = torch.arange(length, device=x.device).expand(n, length)
    new = torch.constant_pad_nd(x[:, 1:] != x[:, :-1], (1, 0), True)
    start = torch.where(new, pos, torch.zeros_like(pos)).cummax(-1).values
    following = torch.constant_pad_nd(torch.where(new, pos, torch.full_like(pos, length))[:, 1:], (0, 1), length)
    return start, following.flip(-1).cummin(-1).values.flip(-1)


def _torchmetrics_auroc(rb: RankedView, ks: tuple[int | None, ...], max_fpr: float | None) -> tuple[Tensor, Tensor]:
    """torchmetrics' ``retrieval_auroc`` (``ties="torch_topk"``): the documents ``torch.topk`` keeps,
    which are the first ``k`` positions of the view's ranking, then ``binary_auroc`` over them: tied
    scores among the kept documents count half a pair (a tie the cutoff splits counts only its kept
    part, no expectation), on the float32 scores, passed through a sigmoid when a kept score lies
    outside [0, 1] (as ``binary_auroc`` does; this can tie scores that differ, e.g. large logits)."""
    f64 = torch.float64
    valid = rb.valid
    x = rb.ranked_scores.to(torch.float32)
    outside = (valid & ((x < 0) | (x > 1))).to(torch.int32).cumsum(-1) > 0  # a kept score outside [0, 1]
    rel = rb.rel.to(f64)
    non = _nonrel(rb).to(f64)
    cs_r, cs_u = prefix(rel), prefix(non)
    empty = rb.rel.sum(-1, keepdim=True) == 0
    squashed = torch.sigmoid(x)
    values = []
    for i in rb.cutoff_index(ks):
        start, end = _score_runs(torch.where(outside[:, i : i + 1], squashed, x))
        r_before = cs_r.gather(-1, start)
        cs_credit = prefix(non * (r_before + between(cs_r, start, end) / 2))
        s = start[:, i : i + 1]
        cut = torch.full_like(s, i + 1)
        r0, u0, c0 = cs_r.gather(-1, s), cs_u.gather(-1, s), cs_credit.gather(-1, s)
        h, lh = between(cs_r, s, cut), between(cs_u, s, cut)  # the kept part of the cut group
        R, U = r0 + h, u0 + lh
        if max_fpr is None or max_fpr >= 1:
            area = c0 + lh * r0 + h * lh / 2
            auc = safe_div(area, R * U)
        else:
            area = _partial_area(max_fpr * U, r0, u0, c0, h, lh, s, cs_r, cs_u, cs_credit, start, end, i)
            lo = 0.5 * max_fpr**2
            auc = 0.5 * (1 + (safe_div(area, R * U) - lo) / (max_fpr - lo))
        values.append(torch.where((R > 0) & (U > 0), auc, torch.zeros_like(auc)).squeeze(-1))
    return torch.stack(values, dim=-1).to(rb.dtype), empty


def _partial_area(x, r0, u0, c0, h, nonrel, s, cs_r, cs_u, cs_credit, start, end, i):
    """Area (in counts) under the ROC of the top set up to ``x`` false positives: the groups above the
    cut group, then the ``h`` relevant and ``nonrel`` non-relevant documents the cut keeps as one tied group."""
    # Within the groups above the cut: the first group whose end reaches x non-relevant documents.
    ends_u = cs_u.gather(-1, end)  # (N, L) non-relevant count at the end of each position's group
    ends_u = torch.where(torch.arange(ends_u.shape[-1], device=x.device) < s, ends_u, torch.full_like(ends_u, math.inf))
    pos = torch.searchsorted(ends_u.contiguous(), x.contiguous()).clamp(max=ends_u.shape[-1] - 1)
    gs, ge = start.gather(-1, pos), end.gather(-1, pos)
    base_u, base_r = cs_u.gather(-1, gs), cs_r.gather(-1, gs)
    du, dr = between(cs_u, gs, ge), between(cs_r, gs, ge)
    d = (x - base_u).clamp(min=0)
    inside = cs_credit.gather(-1, gs) + d * (base_r + safe_div(dr * d, 2 * du))
    d_cut = (x - u0).clamp(min=0)
    in_cut = c0 + d_cut * (r0 + safe_div(h * d_cut, 2 * nonrel))
    return torch.where(x <= u0, inside, in_cut)


# ----------------------------------------------------------------------------- OPA
def _count_inversions(seq: Tensor, weights: Tensor | None = None) -> Tensor:
    """Pairs ``p < q`` with ``seq[p] > seq[q]`` per row, ``(N,)`` float64; ``+inf`` entries must come
    last (they take part in no pair). Bottom-up merge sort: per round, each right run's values are
    located in the sorted left run. With ``weights`` (float64, like ``seq``) each pair counts
    ``weights[p]``: the weights travel with the values through the sorts, and a right value finds the
    weight of the left values above it from the left run's cumulative weights."""
    n, length = seq.shape
    size = 1 << max(0, (length - 1).bit_length())
    vals = torch.cat([seq, seq.new_full((n, size - length), math.inf)], dim=-1) if size > length else seq
    if weights is not None and size > length:
        weights = torch.cat([weights, weights.new_zeros(n, size - length)], dim=-1)
    total = torch.zeros(n, dtype=torch.float64, device=seq.device)
    width = 1
    while width < size:
        runs = vals.view(n, size // (2 * width), 2, width)
        left, right = runs[:, :, 0].contiguous(), runs[:, :, 1].contiguous()
        not_above = torch.searchsorted(left, right, right=True)  # left values <= each right value
        if weights is None:
            total = total + (width - not_above).to(torch.float64).sum((-1, -2))
            vals = torch.sort(vals.view(n, size // (2 * width), 2 * width), dim=-1).values.view(n, size)
        else:
            cum = torch.constant_pad_nd(weights.view(n, size // (2 * width), 2, width)[:, :, 0].cumsum(-1), (1, 0))
            above = cum[..., -1:] - cum.gather(-1, not_above)  # the left run's weight above each right value
            total = total + above.sum((-1, -2))
            vals, order = torch.sort(vals.view(n, size // (2 * width), 2 * width), dim=-1)
            vals = vals.view(n, size)
            weights = weights.view(n, size // (2 * width), 2 * width).gather(-1, order).view(n, size)
        width *= 2
    return total


def opa_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Ordered pair accuracy, ``(N, K)`` (cutoffs are ignored), and the empty flags (no pair with different grades).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.8]]), torch.tensor([[2, 0, 1]]), None, DEFAULT)
        >>> opa_values(rb, (None,), DEFAULT)[0]            # (2,0), (2,1) right; (1,0) tied: 1/2
        tensor([[0.8333]])
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.8]]), torch.tensor([[2, 0, 1]]), None, DEFAULT,
        ...                  item_weights=torch.tensor([[1.0, 5.0, 4.0]]))
        >>> opa_values(rb, (None,), DEFAULT)[0]            # pairs weigh 1, 1, 4 (their higher grade's): (1 + 1 + 4/2) / 6
        tensor([[0.6667]])
    """
    f64 = torch.float64
    keep = rb.judged & rb.valid
    inf = torch.full((), math.inf, dtype=f64, device=rb.device)
    grades = torch.where(keep, rb.target.to(f64), inf)
    weights = None  # each pair weighs the weight of its higher-graded document
    if rb.item_weights is not None:
        weights = torch.where(keep, rb.ranked(rb.item_weights).to(f64), 0.0)
    tied_pairs = torch.zeros(rb.n_lists, dtype=f64, device=rb.device)
    if rb.averaged:
        # Inside each tie group, put the documents in increasing grade (left-out documents last):
        # then a pair inside a group is never counted as ordered, and it earns 1/2 below.
        start, _ = bounds(rb)
        by_grade = torch.sort(grades, dim=-1, stable=True).indices
        by_group = torch.sort(start.gather(-1, by_grade), dim=-1, stable=True).indices
        order = by_grade.gather(-1, by_group)
        grades = grades.gather(-1, order)
        weights = None if weights is None else weights.gather(-1, order)
        # lower-graded documents of one's own group = first slot of one's grade in the group - group start
        pos = torch.arange(rb.length, device=rb.device).expand(rb.n_lists, -1)
        new_run = torch.constant_pad_nd(grades[:, 1:] != grades[:, :-1], (1, 0), True) | (start == pos)
        run_start = torch.where(new_run, pos, torch.zeros_like(pos)).cummax(-1).values
        lower = (run_start - start).to(f64)
        lower = lower if weights is None else lower * weights
        tied_pairs = torch.where(torch.isfinite(grades), lower, torch.zeros_like(lower)).sum(-1)
    # Pairs with different grades: each document with the judged documents graded below it.
    ordered = torch.sort(grades, dim=-1).values
    below = torch.searchsorted(ordered, grades.contiguous()).to(f64)
    below = below if weights is None else below * weights
    pairs = torch.where(torch.isfinite(grades), below, torch.zeros_like(below)).sum(-1)
    # Move the left-out documents to the end (they take part in no pair), keeping the ranked order.
    compact = torch.sort((~torch.isfinite(grades)).to(torch.uint8), dim=-1, stable=True).indices
    compact_weights = None if weights is None else weights.gather(-1, compact)
    correct = _count_inversions(grades.gather(-1, compact), compact_weights) + tied_pairs / 2
    value = safe_div(correct, pairs).unsqueeze(-1)
    return value.to(rb.dtype).expand(-1, len(ks)), (pairs == 0).unsqueeze(-1)
