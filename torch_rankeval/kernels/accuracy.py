"""ir_measures' pairwise ``Accuracy``: the share of (relevant, non-relevant) pairs of the top ``k``
in which the relevant document ranks first.

``1 - sum_rel (non-relevant above it) / (relevant * non-relevant)`` over the documents of the top
``k`` (every retrieved document without ``k``); unjudged documents count as non-relevant. That is the
area under the ROC curve of the top ``k`` (:func:`~torch_rankeval.kernels.pairwise.auroc_values`),
whose tie averaging it shares (a tied pair counts 1/2; a tie group the cutoff splits is averaged over
the documents it keeps; an order whose top ``k`` lack a relevant or a non-relevant document counts 0).
Empty: the top ``k`` hold no relevant document (ir_measures reports no value for the query) or no
non-relevant one (ir_measures divides by zero there), in every order of the tied documents.
"""

from __future__ import annotations

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.kernels.pairwise import auroc_values
from torch_rankeval.ranking.view import RankedBatch, RankedView  # noqa: F401 (RankedBatch: the doctests)

__all__ = ["accuracy_values"]


def accuracy_values(rb: RankedView, ks: tuple[int | None, ...], conv: Convention) -> tuple[Tensor, Tensor]:
    """Pairwise accuracy of the top ``k`` at each cutoff, ``(N, K)``, and the empty flags ``(N, K)``:
    no relevant or no non-relevant document in the top ``k``.

    Example:
        >>> from torch_rankeval.conventions import DEFAULT
        >>> rb = RankedBatch(torch.tensor([[0.9, 0.8, 0.7, 0.6]]), torch.tensor([[0, 1, 0, 1]]), None, DEFAULT)
        >>> accuracy_values(rb, (None, 2, 1), DEFAULT)    # 1 - (1 + 2) / (2 * 2); 1 - 1 / (1 * 1); no relevant
        (tensor([[0.2500, 0.0000, 0.0000]]), tensor([[False, False,  True]]))
    """
    values, _ = auroc_values(rb, ks, conv)
    relevant = rb.expected_in_top("rel", ks)
    kept = torch.minimum(rb.n_valid.unsqueeze(-1), rb.constant([rb.length if k is None else k for k in ks]))
    return values, (relevant <= 0) | (relevant >= kept.to(relevant.dtype))
