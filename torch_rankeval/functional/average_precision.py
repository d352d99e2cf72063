"""Average precision (binary and graded), exact under averaged ties."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention, resolve_convention
from torch_rankeval.functional._api import evaluate_family
from torch_rankeval.functional._ranking import RankedBatch, log_comb, prefix_sums

__all__ = ["average_precision", "average_precision_values"]


def _group_terms(rb: RankedBatch, w: Tensor, width: int, *, binary: bool) -> dict[str, Tensor]:
    """Per tie group (first ``width`` groups): the expected sum of ``w_p * (sum_{q <= p} w_q) / p`` over
    the group's positions, and what is needed for a partial group at a cutoff.

    For the ``j``-th slot ``p = s + j`` of a group of size ``n`` whose weights sum to ``S1`` (squares
    ``S2``) after ``C`` weight ranked above it, a uniformly random order gives
    ``E[term_p] = (A + B (j - 1)) / p`` with ``A = (S1 C + S2) / n`` and
    ``B = (S1^2 - S2) / (n (n - 1))``. Summed over slots ``1..m`` this is
    ``A h + B (m - (s + 1) h)`` with ``h = sum_{j <= m} 1/(s + j)``. With binary
    weights and no ties it is the classic ``rel_p * (relevant up to p) / p``.
    """
    s1 = rb.group_table(w, width)
    s2 = s1 if binary else rb.group_table(w * w, width)  # w*w == w for 0/1 weights
    n, s = rb.group_sizes(width), rb.group_starts(width)
    c = s1.cumsum(-1) - s1
    a = (s1 * c + s2) / n.clamp(min=1)
    b = (s1 * s1 - s2) / (n * (n - 1)).clamp(min=1)
    h = rb.positional_table("reciprocal", width)  # sum of 1/p over the group's positions
    total = a * h + b * (n - (s + 1) * h)
    return {"a": a, "b": b, "s": s, "total": total, "before": total.cumsum(-1) - total}


def _numerator(rb: RankedBatch, w: Tensor, ks: tuple, *, binary: bool) -> Tensor:
    """Expected AP numerator at each cutoff, ``(N, K)``."""
    idx = rb.cutoff_index(ks)
    if not rb.averaged and all(i == rb.length - 1 for i in idx):
        return ((w * w.cumsum(-1)) @ (1.0 / rb.positions)).unsqueeze(-1).expand(-1, len(ks))
    width = max(idx) + 1
    g = _group_terms(rb, w, width, binary=binary)
    if all(i == rb.length - 1 for i in idx):
        return g["total"].sum(-1, keepdim=True).expand(-1, len(ks))
    grp, ends = rb.cutoff_groups(ks)
    sb = g["s"].gather(-1, grp)
    h = rb.prefix_difference("reciprocal", ends.expand_as(sb), sb)
    m = ends - sb
    partial = g["a"].gather(-1, grp) * h + g["b"].gather(-1, grp) * (m - (sb + 1) * h)
    return g["before"].gather(-1, grp) + partial


def _retrieved_denominator_expectation(rb: RankedBatch, w: Tensor, ks: tuple) -> Tensor:
    """Exact ``E[numerator / relevant retrieved]`` for binary AP when a tie group straddles a cutoff.

    Groups entirely above the cutoff contribute a numerator ``A`` independent of the straddling
    group. Of that group's ``n`` documents (``r`` relevant) ``m`` fall inside the cutoff, so the
    number ``X`` of relevant ones inside is hypergeometric; given ``X = x`` the ``x`` relevant
    documents sit uniformly in the ``m`` slots, which gives ``E[B | x]`` in closed form with
    harmonic sums. The result is ``sum_x P(X = x) (A + E[B | x]) / (c + x)``.
    """
    b = rb.boundary(ks)
    s, n, r, c, m = b["s"], b["n"], b["r"], b["c"], b["m"]
    g = _group_terms(rb, w, rb.span(ks), binary=True)
    a = g["before"].gather(-1, b["b"])
    h1 = rb.prefix_difference("reciprocal", s + m, s)
    h2 = m - (s + 1) * h1
    x = torch.arange(rb.length + 1, dtype=rb.dtype, device=w.device)
    s, n, r, c, m, a, h1, h2 = (t.unsqueeze(-1) for t in (s, n, r, c, m, a, h1, h2))
    feasible = (x <= r) & (x <= m) & (m - x <= n - r)
    zero = torch.zeros((), dtype=rb.dtype, device=w.device)
    xs, ms = torch.where(feasible, x, zero), torch.where(feasible, m - x, zero)
    log_pmf = log_comb(r, xs) + log_comb(n - r, ms) - log_comb(n, m)
    pmf = torch.where(feasible, torch.exp(log_pmf), zero)
    expected_b = x / m * ((c + 1) * h1 + (x - 1) / (m - 1).clamp(min=1) * h2)
    found = c + x
    ratio = torch.where(found > 0, (a + expected_b) / found.clamp(min=1), zero)
    return (pmf * ratio).sum(-1)


def average_precision_values(rb: RankedBatch, ks: tuple, conv: Convention) -> tuple[Tensor, Tensor]:
    """Per-query AP at each cutoff and the "no relevant document" flag, ``(N, K)`` / ``(N, 1)``."""
    check_graded_cutoffs(conv, [k for k in ks if k is not None], rb.length)
    denominator, graded = conv.denominator, conv.graded
    w = rb.gains if graded else rb.rel
    if not graded and denominator == "retrieved_relevant" and rb.averaged:
        return _retrieved_denominator_expectation(rb, w, ks), (rb.n_relevant <= 0).unsqueeze(-1)
    numerator = _numerator(rb, w, ks, binary=not graded)
    if graded:
        ideal = rb.ideal_gains
        top = ideal.amax(-1, keepdim=True)  # the largest judged gain normalises weights to [0, 1]
        empty = top <= 0
        if denominator == "all_relevant":
            den = ideal.clamp(min=0).sum(-1, keepdim=True)
        elif denominator == "min_k_relevant":
            best = rb.ideal_top(ks).clamp(min=0)
            m = best.shape[-1]
            den = prefix_sums(best, [m - 1 if k is None else min(k, m) - 1 for k in ks])
        else:
            den = rb.expected_sum(w, ks)
        den = den * top
    else:
        r_total = rb.n_relevant.unsqueeze(-1)
        empty = r_total <= 0
        if denominator == "all_relevant":
            den = r_total
        elif denominator == "min_k_relevant":
            cut = torch.tensor([float("inf") if k is None else float(k) for k in ks], dtype=rb.dtype, device=w.device)
            den = torch.minimum(r_total, cut)
        else:
            den = rb.expected_sum(rb.rel, ks)
    # den == 0 means no relevant weight anywhere counted, where the numerator is 0 too: 0 / 1
    return numerator / torch.where(den > 0, den, 1.0), empty


def average_precision(
    preds: Tensor,
    target: Tensor,
    k: int | Sequence[int] | None = None,
    *,
    mask: Tensor | None = None,
    ignore_index: int | None = None,
    ideal_target: Tensor | None = None,
    n_relevant: Tensor | None = None,
    denominator: str | None = None,
    graded: bool | None = None,
    gain: str | Mapping | Callable | None = None,
    relevance_threshold: float | None = None,
    ties: str | None = None,
    empty_target_action: str | None = None,
    convention: str | Convention | None = None,
    reduction: str = "mean",
    validate_args: bool = True,
) -> Tensor:
    """Average precision (AP@k; its mean over lists is MAP).

    Binary AP is ``sum over relevant ranks p <= k of precision@p``, divided by ``denominator``:

    - ``"all_relevant"`` (default, trec_eval): all relevant documents of the query (``n_relevant``,
      else counted in ``ideal_target``, else in the list); unretrieved ones count as misses.
    - ``"retrieved_relevant"`` (torchmetrics): relevant documents found in the top ``k``.
    - ``"min_k_relevant"``: ``min(k, R)``, so a perfect top-k scores 1.

    A document is relevant when ``target >= relevance_threshold`` (default: ``>= 1`` for integer
    grades, ``> 0`` for float or bool).

    ``graded=True`` gives the gain-weighted AP: at each rank ``p`` the weight ``w_p = gain_p / G``
    (``G`` the largest judged gain of the query, so ``w`` is in ``[0, 1]``) multiplies the
    cumulative relevance-weighted precision ``sum_{q <= p} w_q / p``; the sum is divided by the
    total relevance (``sum w`` over the judged documents, over the top ``min(k, R)`` ideal ones,
    or over the retrieved top ``k``, per ``denominator``). With binary grades it equals binary AP.

    ``ties="average"`` (default) gives the exact expected AP over all orders of tied scores,
    including a tie that straddles ``k`` (hypergeometric expectation). The one combination without
    a closed form, ``graded=True`` with ``"retrieved_relevant"`` and a finite ``k`` inside the list
    under averaged ties, raises ``ValueError``.

    Edge cases: a list with no relevant document is scored by ``empty_target_action`` (default
    ``"neg"``: 0, counted); relevant documents outside the top ``k`` or outside the list add
    nothing to the numerator; padding is never ranked.

    Example:
        >>> import torch
        >>> from torch_rankeval.functional import average_precision
        >>> preds = torch.tensor([0.9, 0.8, 0.7, 0.6])
        >>> target = torch.tensor([1, 0, 1, 0])
        >>> round(average_precision(preds, target).item(), 4)            # (1/1 + 2/3) / 2
        0.8333
        >>> round(average_precision(preds, target, n_relevant=torch.tensor(3)).item(), 4)   # one relevant doc never retrieved
        0.5556
        >>> average_precision(preds, target, k=[1, 2], denominator="retrieved_relevant")
        tensor([1., 1.])
    """
    conv = resolve_convention(
        convention, denominator=denominator, graded=graded, gain=gain, relevance_threshold=relevance_threshold,
        ties=ties, empty_target_action=empty_target_action,
    )
    return evaluate_family(
        "map", preds, target, k, convention=conv, mask=mask, ignore_index=ignore_index, ideal_target=ideal_target,
        n_relevant=n_relevant, reduction=reduction, validate_args=validate_args, name="average_precision",
    )


def check_graded_cutoffs(conv: Convention, k: object, length: int) -> None:
    """Reject the one AP variant without an exact tie-averaged value (a static check, no sync)."""
    if conv.graded and conv.denominator == "retrieved_relevant" and conv.ties == "average" and k is not None:
        ks = k if isinstance(k, Sequence) else [k]
        if any(isinstance(v, int) and v < length for v in ks):
            raise ValueError(
                "average_precision(graded=True, denominator='retrieved_relevant') has no exact tie-averaged value "
                "at a cutoff inside the list; use ties='first'/'pessimistic'/'optimistic' or another denominator"
            )
