"""Intent-aware (diversity) measures exactly as TREC's ``ndeval`` computes them (version 4.5).

Every document is judged per subtopic, and subtopic relevance is binary
(:mod:`~torch_rankeval.ranking.subtopics`). ``A`` is the number of the query's subtopics that at least
one judged document is relevant to; a query with ``A = 0`` scores 0 on every measure (its "empty"
flag is set, so the convention's empty-query policy applies; ndeval itself prints NaN for nNRBP
there, ``0 / 0``). With ``c_j(r)`` the number of documents above rank ``r`` relevant to subtopic ``j``,
the *novelty gain* of the document at rank ``r`` (1-based) is ``g(r) = sum_j rel_j(r) (1 - alpha)^c_j(r)``.

- ``alpha-DCG@k = sum_{r<=k} g(r) d(r)``, divided by the "ideal ideal" ``A sum_{r<=k}
  (1 - alpha)^(r-1) d(r)`` (each rank covering every subtopic once more) for ``k >= 2``;
  ndeval does not divide at ``k = 1``, and neither do we.
  ``alpha_DCG(norm='none')`` is the plain sum (TF-Ranking's ``AlphaDCGMetric``). ``d(r)`` is the
  convention's DCG discount, as for every DCG measure: ndeval's ``1 / log2(r + 1)`` by default,
  ``1 / log_b(r + 1)`` with ``log_base``, or the ``discount`` callable (TF-Ranking's ``rank_discount_fn``).
- ``alpha-nDCG@k``: the undivided sum over the same sum for the ideal ranking, built greedily as
  ndeval builds it: at each rank the judged document of largest gain given the ranks above (ties to
  the larger docno in ndeval; here to the later column of ``ideal_target``, or of the list).
- ``ERR-IA@k``, ``nERR-IA@k``: the same with ERR's discount ``1 / r`` (ERR-IA and NRBP keep their own
  discounts whatever the convention's, as ERR and RBP do).
- ``NRBP = (1 - (1 - alpha) beta) / A sum_r g(r) beta^(r-1)`` over the whole list; ``nNRBP``: over
  the ideal ranking's sum (the whole greedy ranking).
- ``P-IA@k = sum_{r<=k} sum_j rel_j(r) / (k A)`` (a cutoff beyond the list still divides by ``k``;
  ``min(k, list length)`` with the convention's ``adaptive_k``, as TF-Ranking).
- ``MAP-IA``: the mean over the ``A`` subtopics of each subtopic's average precision, whose
  denominator is the number of judged documents relevant to it.
- ``StRecall@k`` (ndeval's ``strec``): the share of the ``A`` subtopics that the top ``k`` covers.

Defaults ``alpha = beta = 0.5`` (ndeval's). Unjudged documents and padding gain nothing.

**Ties** (``ties="average"``): every measure is the exact expected value over the orders of tied
documents. P-IA is linear in the per-position counts; a subtopic is uncovered at the cutoff with the
hypergeometric probability ``C(n - r_j, t) / C(n, t)`` that none of the ``r_j`` documents of the
cutoff's tie group relevant to it lands in the group's ``t`` slots above the cutoff; MAP-IA is, per
subtopic, AP, whose slot ``i`` of a group of ``n`` holding ``r_j`` relevant documents below ``c_j``
expects ``r_j / n (c_j + 1 + (i - 1)(r_j - 1)/(n - 1)) / rank``. The other six are linear in the
novelty gains (their normalisers do not depend on the order), and the expected gain of slot ``i`` is
``sum_j r_j / n (1 - alpha)^c_j E[(1 - alpha)^X]`` with ``X`` hypergeometric (``i - 1`` draws from
the group's other ``n - 1`` documents, ``r_j - 1`` of them relevant): a finite series, ``O(W^2 S)``
per list for the ``W`` ranks read (cheap at a cutoff of 20; for NRBP, which reads the whole list,
quadratic in the list length on long lists with ties: use ``ties="first"`` there). A validated batch
without ties takes the plain formulas.
"""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention, discount_table
from torch_rankeval.ranking.groups import cutoff_sizes
from torch_rankeval.ranking.inputs import reads_host
from torch_rankeval.ranking.subtopics import document_subtopics, ideal_subtopics, ranked_subtopics
from torch_rankeval.ranking.view import RankedBatch, RankedView, log_comb  # noqa: F401 (RankedBatch: the doctests)

__all__ = [
    "ALPHA_DEFAULT",
    "BETA_DEFAULT",
    "GREEDY_BLOCK",
    "alpha_dcg_values",
    "alpha_ndcg_values",
    "ap_ia_values",
    "err_ia_values",
    "greedy_ideal_gains",
    "nerr_ia_values",
    "nnrbp_values",
    "nrbp_values",
    "precision_ia_values",
    "subtopic_recall_values",
]

#: ndeval's defaults: redundancy intolerance alpha and NRBP's patience beta.
ALPHA_DEFAULT = 0.5
BETA_DEFAULT = 0.5

_F64 = torch.float64
#: (document, subtopic) entries per block of the greedy ideal ranking (2 MiB of float32 scores)
GREEDY_BLOCK = 1 << 19


def _novelty_gains(rel: Tensor, alpha: float) -> Tensor:
    """``g(r) = sum_j rel_j(r) (1 - alpha)^c_j(r)`` for ranked ``rel`` ``(N, W, S)`` float64 -> ``(N, W)``
    (the powers from a table of ``(1 - alpha)^c``, ``c < W``)."""
    width = rel.shape[1]
    powers = torch.pow(1.0 - alpha, torch.arange(width, dtype=_F64, device=rel.device))
    before = (rel.cumsum(1) - rel).long()
    return (rel * powers[before]).sum(-1)


def _padded(x: Tensor, depth: int) -> Tensor:
    """``x`` ``(N, W)`` with zero columns up to ``depth``."""
    return torch.nn.functional.pad(x, (0, depth - x.shape[-1])) if x.shape[-1] < depth else x[:, :depth]


def _n_subtopics(rb: RankedView) -> Tensor:
    """``A``: subtopics that at least one judged document is relevant to, ``(N,)`` float64."""
    return rb.cached("ia_subtopics", lambda: ideal_subtopics(rb).any(1).sum(-1).to(_F64))


def _exact_in_float32(alpha: float, steps: int, n_sub: int) -> bool:
    """Whether every greedy score ``sum_j (1 - alpha)^c_j`` (``c_j < steps``, ``n_sub`` terms) is exact
    in float32, so that its comparisons (ties included) are those of ndeval's doubles: alpha 0 or 1
    (integer scores), or 1/2 when ``2**-(steps - 1)`` and the number of terms fit 24 bits."""
    if alpha in (0.0, 1.0):
        return n_sub < 2**24
    return alpha == 0.5 and (steps - 1) + n_sub.bit_length() <= 24


def greedy_ideal_gains(rel: Tensor, steps: int, alpha: float = ALPHA_DEFAULT) -> Tensor:
    """Novelty gains ``(N, steps)`` float64 of ndeval's greedy ideal ranking of ``rel`` ``(N, M, S)``
    (bool, the judged documents' subtopic relevance): at each rank the document of largest gain
    given the ranks above, ties to the later column (ndeval: the larger docno). One step per rank,
    vectorised over queries (``steps`` is static: no host sync); ranks past ``M`` gain 0.

    A step scores every document (``S`` fused multiply-adds over ``(N, M)``), takes the first maximum
    of the columns in reverse order and clears the chosen document's row (its score is then 0, and a
    document of score 0 adds nothing wherever it is placed). Scores are float32 where they are exact
    (alpha 1/2 to depth ~20, alpha 0 or 1), else float64, summed over subtopics in ndeval's order
    (adding 0 for a subtopic the document misses changes nothing): every comparison, ties included,
    is the one ndeval's doubles make. Lists go in blocks of about
    :data:`GREEDY_BLOCK` (document, subtopic) entries, whose scores stay in cache over the steps.

    Example:
        >>> rel = torch.tensor([[[1, 0], [1, 0], [0, 1]]], dtype=torch.bool)
        >>> greedy_ideal_gains(rel, 4)          # one subtopic each, then the repeat at 1 - alpha
        tensor([[1.0000, 1.0000, 0.5000, 0.0000]], dtype=torch.float64)
    """
    n, m, s = rel.shape
    rows = max(1, GREEDY_BLOCK // max(m * s, 1))
    if n > rows:  # blocks of lists whose scores stay in cache over the steps (a loop over blocks, not queries)
        return torch.cat([greedy_ideal_gains(rel[i : i + rows], steps, alpha) for i in range(0, n, rows)])
    steps_here = min(steps, m)
    dtype = torch.float32 if _exact_in_float32(alpha, steps_here, s) else _F64
    # (N, S, M), columns reversed: argmax's first maximum is the last column among equal scores
    left = rel.flip(1).transpose(1, 2).to(dtype).contiguous()
    gain = torch.ones(n, s, 1, dtype=dtype, device=rel.device)
    score = torch.empty(n, m, dtype=dtype, device=rel.device)
    keep = 1.0 - alpha
    out = []
    for _ in range(steps_here):
        torch.mul(left[:, 0, :], gain[:, 0], out=score)
        for j in range(1, s):
            score.addcmul_(left[:, j, :], gain[:, j])
        where = score.max(-1, keepdim=True).indices  # (N, 1): the first maximum, as argmax
        chosen = left.gather(2, where.unsqueeze(1).expand(-1, s, 1))  # (N, S, 1): its subtopics
        out.append((chosen * gain).sum(1, dtype=_F64))
        gain = torch.where(chosen > 0, gain * keep, gain)
        left.scatter_(2, where.unsqueeze(1).expand(-1, s, 1), 0.0)
    gains = torch.cat(out, dim=-1) if out else torch.zeros(n, 0, dtype=_F64, device=rel.device)
    return _padded(gains, steps)


def _ideal(rb: RankedView, steps: int, alpha: float) -> Tensor:
    return rb.cached(f"ia_ideal_{steps}_{alpha!r}", lambda: greedy_ideal_gains(ideal_subtopics(rb), steps, alpha))


def _run_gains(rb: RankedView, depth: int, alpha: float) -> Tensor:
    """Novelty gains of the ranking ``(N, depth)`` float64 (0 past the list)."""

    def make() -> Tensor:
        width = min(depth, rb.length)
        if rb.averaged:
            return _padded(_expected_novelty_gains(rb, width, alpha), depth)
        return _padded(_novelty_gains(ranked_subtopics(rb, width), alpha), depth)

    return rb.cached(f"ia_run_{depth}_{alpha!r}", make)


def _expected_novelty_gains(rb: RankedView, width: int, alpha: float) -> Tensor:
    """``E[g(r)]`` over the orders of tied documents for the first ``width`` ranks, ``(N, width)``
    float64. Rank ``r`` is slot ``i`` of a tie group of ``n`` documents, ``t_j`` of them relevant to
    subtopic ``j`` and ``b_j`` relevant ones above the group: the slot holds one with chance
    ``t_j / n``, and then ``X``, those among the ``i - 1`` slots above it, is hypergeometric (``i - 1``
    draws from the other ``n - 1`` documents, ``t_j - 1`` of them relevant), so
    ``E[g(r)] = sum_j t_j / n (1 - alpha)^b_j E[(1 - alpha)^X]``, the last a finite sum over ``X < width``
    of positive terms (the hypergeometric probabilities by their ratio recurrence)."""
    rel = ranked_subtopics(rb, rb.length)
    g = rb.groups(rb.length)
    start, end = g.start[:, :width].long(), g.end[:, :width].long()
    before, total = _group_sums(rel, start, end)  # (N, W, S)
    n = (end - start).to(_F64).unsqueeze(-1)
    draws = g.offset[:, :width].to(_F64).unsqueeze(-1).expand_as(total)  # i - 1
    pop, hits = (n - 1).expand_as(total), (total - 1).clamp(min=0)
    keep = 1.0 - alpha
    # E[keep^X] = sum_k P(X = k) keep^k from the smallest possible k up: the first probability from
    # lgamma, the next ones by the ratio P(k + 1) / P(k) = (K - k)(D - k) / ((k + 1)(N - K - D + k + 1));
    # every term is positive (no cancellation) and vanishes past min(K, D)
    k = (draws - (pop - hits)).clamp(min=0)
    log_first = log_comb(hits, k) + log_comb(pop - hits, draws - k) - log_comb(pop, draws)
    term = torch.exp(log_first) * torch.pow(keep, k)
    series = term.clone()
    # every term past min(K, D) is 0: on the CPU in eager mode the series stops at the batch's largest
    # number of nonzero terms, read from memory (no device to wait for; a tie group's size at most);
    # elsewhere it runs to the static bound
    steps = int((torch.minimum(hits, draws) - k).max()) if reads_host(term) and term.numel() else width - 1
    for _ in range(min(steps, width - 1)):
        ratio = (hits - k).clamp(min=0) * (draws - k).clamp(min=0) / ((k + 1) * (pop - hits - draws + k + 1))
        term = term * ratio * keep
        series = series + term
        k = k + 1
    expected = total / n * torch.pow(keep, before) * series
    return expected.sum(-1)


def _finish(rb: RankedView, values: Tensor, a: Tensor) -> tuple[Tensor, Tensor]:
    empty = (a <= 0).unsqueeze(-1).expand_as(values)
    return torch.where(empty, torch.zeros((), dtype=_F64, device=values.device), values).to(rb.dtype), empty


def _ideal_ideal(a: Tensor, weights: Tensor, alpha: float, idx: Tensor) -> Tensor:
    """``A sum_{r<=k} (1 - alpha)^(r-1) w(r)`` at each cutoff index ``idx`` ``(N, K)``; 1 at ``k = 1``
    (ndeval leaves its first rank undivided)."""
    one = torch.ones((), dtype=_F64, device=weights.device)
    ranks = torch.arange(weights.shape[0], dtype=_F64, device=weights.device)
    table = (torch.pow(1.0 - alpha, ranks) * weights).cumsum(0)
    norm = a.unsqueeze(-1) * table[idx]
    return torch.where((idx == 0) | (norm <= 0), one, norm)


def _dcg_discounts(rb: RankedView, conv: Convention, depth: int) -> Tensor:
    """The convention's DCG discounts of ranks ``1..depth``, float64: ``1 / log_b(r + 1)`` (``log_base``),
    or the ``discount`` callable's table, the one every DCG measure reads (:meth:`RankedView.discount_head`).
    ``depth`` may pass the list (ndeval's ideal ideal reads every rank up to the cutoff): the table is then
    built to that depth."""
    if conv.discount is None:  # exact in float64 at any depth, without a table
        return discount_table(depth, conv, dtype=_F64, device=rb.device)
    head = rb.discount_head(depth)
    if head.shape[0] < depth:
        return discount_table(depth, conv, dtype=_F64, device=rb.device)
    return head.to(_F64)


def _discounted(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, alpha: float, kind: str, normalise: str
) -> tuple[Tensor, Tensor]:
    depth = max(rb.length if k is None else k for k in ks)  # may exceed the list
    # 0-based index of each cutoff's last rank per query, (N, K): k - 1, or the list's last real document
    # for k=None (so that padding never changes a value)
    last = (rb.n_valid.to(torch.int64) - 1).clamp(min=0).unsqueeze(-1)
    fixed = rb.constant([0 if k is None else k - 1 for k in ks], torch.int64)
    idx = torch.where(rb.constant([k is None for k in ks], torch.bool), last, fixed)
    ranks = torch.arange(1, depth + 1, dtype=_F64, device=rb.device)
    # alpha-DCG: the convention's discount (ndeval's 1 / log2(r + 1) by default); ERR-IA: ERR's 1 / r
    weights = _dcg_discounts(rb, conv, depth) if kind == "dcg" else 1.0 / ranks
    raw = (_run_gains(rb, depth, alpha) * weights).cumsum(-1).gather(-1, idx)
    a = _n_subtopics(rb)
    if normalise == "none":
        return _finish(rb, raw, a)
    if normalise == "ideal_ideal":
        return _finish(rb, raw / _ideal_ideal(a, weights, alpha, idx), a)
    ideal = (_ideal(rb, depth, alpha) * weights).cumsum(-1).gather(-1, idx)
    return _finish(rb, torch.where(raw > 0, raw / torch.where(ideal > 0, ideal, 1.0), 0.0), a)


def alpha_dcg_values(
    rb: RankedView,
    ks: tuple[int | None, ...],
    conv: Convention,
    *,
    alpha: float = ALPHA_DEFAULT,
    norm: str = "ideal_ideal",
) -> tuple[Tensor, Tensor]:
    """ndeval's alpha-DCG@k (divided by the "ideal ideal" gain for ``k >= 2``), ``(N, K)``; with
    ``norm="none"`` the plain sum ``sum_{r<=k} g(r) d(r)`` (TF-Ranking's ``AlphaDCGMetric``), ``d`` the
    convention's discount (``1 / log2(r + 1)`` by default).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> sub = torch.tensor([[[1, 1], [1, 0], [0, 0]]])      # 3 documents, 2 subtopics
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), sub.amax(-1), None, DEFAULT, subtopics=sub)
        >>> alpha_dcg_values(rb, (1, 2), DEFAULT)[0]  # g = 2, 0.5: (2 + 0.5/log2 3) / (2 (1 + 0.5/log2 3))
        tensor([[2.0000, 0.8801]])
        >>> alpha_dcg_values(rb, (2,), DEFAULT, norm="none")[0]  # 2 + 0.5 / log2(3)
        tensor([[2.3155]])
        >>> from torch_rankeval.conventions import Convention
        >>> flat = Convention(discount=lambda rank: 1 / rank)
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), sub.amax(-1), None, flat, subtopics=sub)
        >>> alpha_dcg_values(rb, (2,), flat, norm="none")[0]    # 2 + 0.5 / 2
        tensor([[2.2500]])
    """
    return _discounted(rb, ks, conv, alpha, "dcg", norm)


def alpha_ndcg_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, *, alpha: float = ALPHA_DEFAULT
) -> tuple[Tensor, Tensor]:
    """alpha-nDCG@k over ndeval's greedy ideal ranking, ``(N, K)``.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> sub = torch.tensor([[[1, 0], [1, 0], [0, 1]]])
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), sub.amax(-1), None, DEFAULT, subtopics=sub)
        >>> alpha_ndcg_values(rb, (2,), DEFAULT)[0]             # (1 + 0.5/log2 3) / (1 + 1/log2 3)
        tensor([[0.8066]])
    """
    return _discounted(rb, ks, conv, alpha, "dcg", "ideal")


def err_ia_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, *, alpha: float = ALPHA_DEFAULT
) -> tuple[Tensor, Tensor]:
    """ndeval's ERR-IA@k (divided by the "ideal ideal" for ``k >= 2``), ``(N, K)``.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> sub = torch.tensor([[[0, 0], [1, 1]]])
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8]]), sub.amax(-1), None, DEFAULT, subtopics=sub)
        >>> err_ia_values(rb, (2,), DEFAULT)[0]                  # (2 / 2) / (2 + 2 * 0.5 / 2)
        tensor([[0.4000]])
    """
    return _discounted(rb, ks, conv, alpha, "err", "ideal_ideal")


def nerr_ia_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, *, alpha: float = ALPHA_DEFAULT
) -> tuple[Tensor, Tensor]:
    """nERR-IA@k over ndeval's greedy ideal ranking, ``(N, K)``.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> sub = torch.tensor([[[0, 0], [1, 1]]])
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8]]), sub.amax(-1), None, DEFAULT, subtopics=sub)
        >>> nerr_ia_values(rb, (2,), DEFAULT)[0]                 # (2 / 2) / 2
        tensor([[0.5000]])
    """
    return _discounted(rb, ks, conv, alpha, "err", "ideal")


def _rbp_sum(gains: Tensor, beta: float) -> Tensor:
    decay = torch.pow(beta, torch.arange(gains.shape[-1], dtype=_F64, device=gains.device))
    return (gains * decay).sum(-1, keepdim=True)


def nrbp_values(
    rb: RankedView,
    ks: tuple[int | None, ...],
    conv: Convention,
    *,
    alpha: float = ALPHA_DEFAULT,
    beta: float = BETA_DEFAULT,
) -> tuple[Tensor, Tensor]:
    """ndeval's NRBP over the whole list, ``(N, 1)``.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> sub = torch.tensor([[[0, 0], [1, 1]]])
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8]]), sub.amax(-1), None, DEFAULT, subtopics=sub)
        >>> nrbp_values(rb, (None,), DEFAULT)[0]                 # 2 * 0.5 * (1 - 0.25) / 2
        tensor([[0.3750]])
    """
    a = _n_subtopics(rb)
    raw = _rbp_sum(_run_gains(rb, rb.length, alpha), beta)
    scale = (1.0 - (1.0 - alpha) * beta) / torch.where(a > 0, a, 1.0)
    return _finish(rb, raw * scale.unsqueeze(-1), a)


def nnrbp_values(
    rb: RankedView,
    ks: tuple[int | None, ...],
    conv: Convention,
    *,
    alpha: float = ALPHA_DEFAULT,
    beta: float = BETA_DEFAULT,
) -> tuple[Tensor, Tensor]:
    """NRBP over that of ndeval's greedy ideal ranking of every judged document, ``(N, 1)``.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> sub = torch.tensor([[[0, 0], [1, 1]]])
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8]]), sub.amax(-1), None, DEFAULT, subtopics=sub)
        >>> nnrbp_values(rb, (None,), DEFAULT)[0]
        tensor([[0.5000]])
    """
    a = _n_subtopics(rb)
    raw = _rbp_sum(_run_gains(rb, rb.length, alpha), beta)
    m = ideal_subtopics(rb).shape[1]
    ideal = _rbp_sum(_ideal(rb, m, alpha), beta)
    return _finish(rb, raw / torch.where(ideal > 0, ideal, 1.0), a)


def precision_ia_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """P-IA@k: relevant (document, subtopic) pairs in the top ``k`` over ``k A``, ``(N, K)``;
    the exact expectation under averaged ties. ``k=None``: the list's length; the convention's
    ``adaptive_k`` divides by ``min(k, list length)`` (TF-Ranking's ``PrecisionIAMetric``).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> sub = torch.tensor([[[0, 0], [1, 1], [1, 0]]])
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.5, 0.5]]), sub.amax(-1), None, DEFAULT, subtopics=sub)
        >>> precision_ia_values(rb, (2, 3), DEFAULT)[0]           # tie: 1.5 expected pairs at rank 2
        tensor([[0.3750, 0.5000]])
    """
    a = _n_subtopics(rb)
    doc = rb.cached("ia_doc_count", lambda: document_subtopics(rb).sum(-1, dtype=_F64))  # per document, input order
    width = rb.span(ks)
    idx = rb.cutoff_index(ks)
    head = rb.ranked(doc, width)
    if rb.averaged:
        g = rb.groups(width)
        total, before = g.sums(head, doc, dtype=_F64)
        inside = rb.constant([i + 1 for i in idx], _F64) - g.at("start", idx).to(_F64)
        count = before[:, idx] + inside * total[:, idx] / g.at("size", idx).to(_F64)
    else:
        count = head.cumsum(-1)[:, idx]
    depth = cutoff_sizes(rb, ks, adaptive_k=conv.adaptive_k, dtype=_F64)
    return _finish(rb, count / (depth * torch.where(a > 0, a, 1.0).unsqueeze(-1)), a)


def subtopic_recall_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Subtopic recall@k (ndeval's strec): the share of the ``A`` subtopics covered by the top ``k``,
    ``(N, K)``; the exact expectation under averaged ties.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> sub = torch.tensor([[[1, 0], [1, 0], [0, 1]]])
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.5, 0.5]]), sub.amax(-1), None, DEFAULT, subtopics=sub)
        >>> subtopic_recall_values(rb, (1, 2, 3), DEFAULT)[0]     # rank 2: subtopic 2 with chance 1/2
        tensor([[0.5000, 0.7500, 1.0000]])
    """
    a = _n_subtopics(rb)
    idx = rb.cutoff_index(ks)
    if not rb.averaged:
        rel = ranked_subtopics(rb, rb.span(ks))
        covered = (rel.cumsum(1)[:, idx] > 0).to(_F64).sum(-1)
    else:
        rel = ranked_subtopics(rb, rb.length)
        g = rb.groups(rb.length)
        s, e = g.at("start", idx).long(), g.at("end", idx).long()  # (N, K)
        before, total = _group_sums(rel, s, e)
        n = (e - s).to(_F64).unsqueeze(-1)
        inside = rb.constant([i + 1 for i in idx], _F64) - s.to(_F64)  # (N, K)
        t = inside.unsqueeze(-1).expand_as(total)
        fits = n - total >= t
        miss = torch.exp(log_comb(torch.where(fits, n - total, t), t) - log_comb(n.expand_as(total), t))
        miss = torch.where(fits, miss, 0.0)
        covered = torch.where(before > 0, 1.0, 1.0 - miss).sum(-1)
    return _finish(rb, covered / torch.where(a > 0, a, 1.0).unsqueeze(-1), a)


def _group_sums(rel: Tensor, start: Tensor, end: Tensor) -> tuple[Tensor, Tensor]:
    """Per subtopic, the relevant documents ranked above a tie group and inside it, ``(N, K, S)``
    each, for groups given by their bounds ``start``, ``end`` ``(N, K)`` (over the whole ranked list)."""
    prefix = torch.nn.functional.pad(rel.cumsum(1), (0, 0, 1, 0))  # (N, L + 1, S)
    n_sub = rel.shape[-1]
    before = prefix.gather(1, start.unsqueeze(-1).expand(-1, -1, n_sub))
    return before, prefix.gather(1, end.unsqueeze(-1).expand(-1, -1, n_sub)) - before


def ap_ia_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """MAP-IA (ndeval): the mean over the ``A`` subtopics of each one's average precision over the
    whole list (denominator: the judged documents relevant to the subtopic), ``(N, 1)``; the exact
    expectation under averaged ties (per subtopic, AP's closed form).

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> sub = torch.tensor([[[0, 1], [1, 1], [0, 0]]])
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7]]), sub.amax(-1), None, DEFAULT, subtopics=sub)
        >>> ap_ia_values(rb, (None,), DEFAULT)[0]                # (1/2 + (1 + 1) / 2) / 2
        tensor([[0.7500]])
    """
    a = _n_subtopics(rb)
    rel = ranked_subtopics(rb, rb.length)
    ranks = torch.arange(1, rb.length + 1, dtype=_F64, device=rb.device).unsqueeze(-1)
    if rb.averaged:
        # E[rel_j(slot) (c_j + 1 + X) / p]: the slot holds one of the group's r_j relevant documents
        # with chance r_j / n, and then X, those among the i - 1 slots above it, has mean
        # (i - 1)(r_j - 1)/(n - 1) (a hypergeometric draw from the other n - 1 documents)
        g = rb.groups(rb.length)
        before, total = _group_sums(rel, g.start.long(), g.end.long())
        n = g.size.to(_F64).unsqueeze(-1)
        above = g.offset.to(_F64).unsqueeze(-1)  # i - 1
        mean_above = above * (total - 1) / torch.where(n > 1, n - 1, 1.0)
        per_subtopic = (total / n * (before + 1 + mean_above) / ranks).sum(1)  # (N, S)
    else:
        per_subtopic = (rel * rel.cumsum(1) / ranks).sum(1)  # (N, S)
    n_rel = ideal_subtopics(rb).sum(1, dtype=_F64)  # (N, S)
    ap = torch.where(n_rel > 0, per_subtopic / torch.where(n_rel > 0, n_rel, 1.0), 0.0).sum(-1, keepdim=True)
    return _finish(rb, ap / torch.where(a > 0, a, 1.0).unsqueeze(-1), a)
