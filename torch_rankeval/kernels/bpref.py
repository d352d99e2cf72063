"""Measures of incomplete judgments: bpref (and its geometric mean), infAP and the number of judged
non-relevant documents retrieved, as trec_eval defines them.

Every returned document falls in one of four classes (trec_eval's ``form_res_rels``):

- judged relevant: ``rb.rel`` (judged, grade at or above the relevance threshold);
- judged non-relevant: judged, grade ``>= 0`` and below the threshold;
- in the judgment pool but not judged: grade ``-2`` (trec_eval's ``RELVALUE_UNJUDGED``; the TREC
  join writes it for documents with a negative grade in the qrels);
- not in the pool: every other document (absent from the qrels, written ``-1``, trec_eval's
  ``RELVALUE_NONPOOL``, or marked ``judged=False``).

bpref and the count ignore the last two classes alike; infAP counts the pooled-but-unjudged
documents in its estimate of the precision above each relevant document and skips the others.

These measures take no cutoff (``cutoffs`` is ``(None,)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.ranking.groups import group_sums, no_relevant, per_relevant
from torch_rankeval.ranking.view import RankedView

__all__ = [
    "INFAP_EPSILON",
    "POOLED_UNJUDGED",
    "JudgedNonRelevant",
    "bpref_values",
    "infap_values",
    "num_nonrel_judged_ret_values",
]

#: The grade that marks a document of the judgment pool without a judgment (trec_eval's
#: ``RELVALUE_UNJUDGED``); the TREC join writes it for negative grades in the qrels.
POOLED_UNJUDGED = -2
#: trec_eval's smoothing constant of infAP.
INFAP_EPSILON = 1e-5


@dataclass(frozen=True)
class JudgedNonRelevant:
    """The gain that bpref is ranked under: 1 for a judged non-relevant grade (``0 <= grade <
    threshold``; with ``threshold=None``, grade 0), else 0. Summed over the judged set
    (``rb.ideal_gains``) it counts the query's judged non-relevant documents, retrieved or not
    (bpref's ``min(N, R)`` denominator). Compared by value and picklable, so measures that share
    it share one ranking.

    Example:
        >>> JudgedNonRelevant(2)(torch.tensor([-1.0, 0.0, 1.0, 2.0]))
        tensor([0., 1., 1., 0.])
        >>> JudgedNonRelevant(None)(torch.tensor([-2.0, 0.0, 0.5, 3.0]))
        tensor([0., 1., 0., 0.])
    """

    threshold: float | None = None

    def __call__(self, t: Tensor) -> Tensor:
        nonrel = t == 0 if self.threshold is None else (t >= 0) & (t < self.threshold)
        return nonrel.to(t.dtype)


def _judged_nonrelevant(rb: RankedView) -> Tensor:
    """``(N, L)`` 1.0 where the ranked document is judged non-relevant (judged, grade ``>= 0``, not
    relevant), else 0.0."""
    return rb.cached("judged_nonrelevant", lambda: ((rb.target >= 0) & rb.judged & (rb.rel == 0)).to(rb.dtype))


def bpref_values(
    rb: RankedView, ks: tuple[int | None, ...], conv: Convention, *, trec: bool = True
) -> tuple[Tensor, Tensor]:
    """bpref (Buckley & Voorhees, SIGIR 2004) as trec_eval computes it, ``(N, K)``.

    ``bpref = 1/R * sum over retrieved relevant documents d of (1 - min(n_d, R) / min(N, R))``,
    where ``R`` is the number of relevant documents, ``N`` the number of judged non-relevant
    documents of the query (retrieved or not: counted in ``ideal_target`` when given, else in the
    list) and ``n_d`` the number of judged non-relevant documents ranked above ``d``; documents
    without a judgment (``judged=False`` or a negative grade) do not count. ``trec=False`` divides
    by ``R`` instead of ``min(N, R)`` (the formula most often cited; TF-Ranking's
    ``BPrefMetric(use_trec_version=False)``), which is larger whenever ``N < R``.

    Under averaged ties the value is exact: for a relevant document in a tie group with ``m``
    judged non-relevant documents and ``B`` above the group, the number of them above it is
    uniform on ``B .. B + m``, so its term is ``1 - E[min(B + U, R)] / min(N, R)`` with
    ``E[min(B + U, R)] = (c B + c (c - 1) / 2 + (m + 1 - c) R) / (m + 1)``, ``c = clamp(R - B, 0, m + 1)``.

    Edge cases: no relevant document: 0 (and flagged empty); no judged non-relevant document: 1
    per retrieved relevant document.

    Requires the measure's convention to rank under :class:`JudgedNonRelevant` (the registry's
    ``bpref`` family does), so that ``rb.ideal_gains`` counts the judged non-relevant documents.

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds = torch.tensor([[4.0, 3.0, 2.0, 1.0]], dtype=torch.float64)
        >>> target = torch.tensor([[1, 0, 1, -1]])     # relevant, non-relevant, relevant, unjudged
        >>> compute(parse_measures(["bpref"]), preds, target)["bpref"].tolist()   # (1 + (1 - 1/1)) / 2
        [0.5]
        >>> target = torch.tensor([[0, 1, 1, -1]])     # non-relevant, relevant, relevant, unjudged: N = 1, R = 2
        >>> compute(parse_measures(["bpref", "bpref(trec=False)"]), preds, target)  # (1 - 1/1) * 2 / 2; (1 - 1/2) * 2 / 2
        {'bpref': tensor([0.], dtype=torch.float64), 'bpref(trec=False)': tensor([0.5000], dtype=torch.float64)}
    """
    if not isinstance(conv.gain, JudgedNonRelevant):
        raise TypeError("bpref_values needs the JudgedNonRelevant gain; compute bpref through the measure registry")
    values = rb.cached(f"bpref_values_{trec}", lambda: _bpref(rb, trec))  # bpref and gm_bpref share it
    return values.unsqueeze(-1).expand(-1, len(ks)), no_relevant(rb)


def _bpref(rb: RankedView, trec: bool) -> Tensor:
    rel = rb.rel
    nonrel = _judged_nonrelevant(rb)
    r = rb.n_relevant.unsqueeze(-1)
    denominator = (torch.minimum(rb.ideal_gains.sum(-1, keepdim=True), r) if trec else r).clamp(min=1)
    inside, above = group_sums(rb, nonrel)  # judged non-relevant documents in / above the tie group
    if rb.averaged:
        c = torch.minimum((r - above).clamp(min=0), inside + 1)
        expected = (c * above + c * (c - 1) / 2 + (inside + 1 - c) * r) / (inside + 1)
    else:  # groups of one: min(above, R)
        expected = torch.minimum(above, r)
    total = (rel * (1.0 - expected / denominator)).sum(-1)
    return per_relevant(rb, total)


def infap_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Inferred AP (Yilmaz & Aslam, CIKM 2006) as trec_eval computes it, ``(N, K)``.

    For a relevant document at rank ``p`` with ``a`` relevant, ``n`` judged non-relevant and ``u``
    pooled-but-unjudged documents above it, its precision estimate is ``1`` at rank 1, else
    ``1/p + ((p-1)/p) * ((a + n + u)/(p-1)) * ((a + eps)/(a + n + 2 eps))`` (``eps = 1e-5``);
    infAP is their sum over the retrieved relevant documents divided by ``R``. Documents outside
    the pool count only in ``p``.

    Ties: no closed form for the expected value over tie orders; the registry refuses
    ``ties="average"`` for it.

    Edge cases: no relevant document: 0 (flagged empty).

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds = torch.tensor([[4.0, 3.0, 2.0, 1.0]], dtype=torch.float64)
        >>> target = torch.tensor([[1, -2, 0, 1]])     # rel, pooled but unjudged, non-rel, rel
        >>> # rank 1: 1; rank 4: 1/4 + (3/4) * (3/3) * ((1 + eps) / (2 + 2 eps)) = 0.625
        >>> compute(parse_measures(["infAP"]), preds, target)["infAP"].tolist()   # (1 + 0.625) / 2
        [0.8125]
    """
    rel = rb.rel
    nonrel = _judged_nonrelevant(rb)
    unjudged = (rb.valid & (rb.target == POOLED_UNJUDGED)).to(rb.dtype)
    a = rel.cumsum(-1) - rel
    n = nonrel.cumsum(-1) - nonrel
    u = unjudged.cumsum(-1) - unjudged
    fj = rb.positions - 1  # documents above, of every class
    fj1 = fj + 1.0
    # trec_eval's expression, operation for operation (the first rank is 1 exactly).
    term = 1.0 / fj1 + (fj / fj1) * ((a + n + u) / fj) * ((a + INFAP_EPSILON) / (a + n + 2 * INFAP_EPSILON))
    term = torch.where(fj == 0, torch.ones_like(term), term)
    total = torch.where(rel > 0, term, torch.zeros_like(term)).sum(-1)
    return per_relevant(rb, total).unsqueeze(-1).expand(-1, len(ks)), no_relevant(rb)


def num_nonrel_judged_ret_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, None]:
    """Number of judged non-relevant documents retrieved, ``(N, K)`` (trec_eval's
    ``num_nonrel_judged_ret``: retrieved, minus not pooled, minus pooled but unjudged, minus
    relevant). Independent of ties.

    Example:
        >>> from torch_rankeval.measures import parse_measures, compute
        >>> preds = torch.tensor([[4.0, 3.0, 2.0, 1.0]], dtype=torch.float64)
        >>> compute(parse_measures(["num_nonrel_judged_ret"]), preds, torch.tensor([[1, 0, -2, 0]]))
        {'num_nonrel_judged_ret': tensor([2.], dtype=torch.float64)}
    """
    return _judged_nonrelevant(rb).sum(-1, keepdim=True).expand(-1, len(ks)), None
