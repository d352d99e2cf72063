"""Beyond-accuracy metrics of top-k recommendation lists: intra-list diversity, novelty, unexpectedness
and serendipity, streaming over a full catalogue.

Each class ranks every row of ``preds`` (``(N, num_items)`` scores over the whole catalogue, with
``exclude=``) only as deep as its top ``k`` (:func:`~torch_rankeval.ranking.topk.topk_view`: one
``torch.topk`` per row) and sums per-user values into float64 scalars, summed across processes.
The definitions are Microsoft Recommenders' (``recommenders/evaluation/python_evaluation.py``):

* :class:`IntraListDiversity`: ``1 -`` the mean similarity of the distinct pairs of a list (users
  with fewer than two items have no pairs and are left out), averaged over users;
* :class:`Novelty`: the mean self-information ``-log2 p(i)`` of the recommended items, over every
  recommendation slot;
* :class:`Unexpectedness` / :class:`Serendipity`: per recommended item ``1 -`` its mean similarity
  to the user's history (times its relevance for serendipity), averaged over the list, then over
  the users that have a history.

**Ties at the cutoff** (``ties="average"``, default): the values are expectations over every order
of the items tied at the cutoff. If ``s`` items score strictly above the score of the last slot
and ``n`` non-excluded items (over the whole row) equal it, ``m = k' - s`` of them are drawn
(``k' = min(k, #non-excluded)``): each tied item is in the list with probability ``m / n`` and each
pair of tied items with probability ``m (m - 1) / (n (n - 1))``. Every value here is linear in
those indicators (pairs for diversity), so the expectation is exact: sums over the whole tied
group come from one pass over the rows whose group spills past the view
(:func:`~torch_rankeval.ranking.topk.boundary_sums`; over every row with ``validate_args=False``
on CUDA or under ``torch.compile``, where the spilled rows are not read to the host: see the
"Host syncs" paragraph of :mod:`torch_rankeval.ranking.topk`). ``ties="first"`` takes tied items
in input (index) order.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch
from torch import Tensor

from torch_rankeval.metrics._catalogue import catalogue_input, check_catalogue_kwargs
from torch_rankeval.metrics._hooks import ConfiguredMetric
from torch_rankeval.metrics._options import check_catalogue_options
from torch_rankeval.ranking.sparse import SparseTarget, is_sparse, sparse_target
from torch_rankeval.ranking.topk import DEFAULT_CHUNK_ELEMENTS, TopKView, boundary_sums, topk_view

__all__ = [
    "AvgRecPopularity",
    "IntraListDiversity",
    "MeanInvUserFreq",
    "Novelty",
    "PopularityRankSerendipity",
    "Serendipity",
    "Unexpectedness",
    "hamming_distances",
    "interaction_counts",
]

#: The most distinct category sets a Jaccard similarity tabulates (a ``P x P`` float64 table).
MAX_CATEGORY_SETS = 4096


# ---------------------------------------------------------------------------------------- similarity
def _item_similarity(
    num_items: int,
    embeddings: Tensor | None,
    categories: Tensor | None,
    similarity: Tensor | None,
    distance: Tensor | None = None,
    *,
    takes_distance: bool = False,
) -> tuple[Tensor, Tensor | None, int, str]:
    """``(features, table, classes, kind)`` with ``sim(a, b) = x_a M x_b``:

    - cosine: ``features`` ``(L, d + 1)`` float64, the unit embeddings and a last column of ones
      (it counts items), ``table`` None (``M`` the identity), ``classes`` 0;
    - otherwise ``features`` ``(L,)`` int64, each item's class in ``[0, classes)`` (``x`` its
      one-hot vector, never built), and ``table`` the ``(classes, classes)`` similarity of the
      classes (None: the identity, for category labels);
    - ``distance``: ``kind`` "distance", ``table`` the distances (NaN, the rows of items without
      features, as 0: :func:`_featureless` reads them from the argument)."""
    named = (("embeddings", embeddings), ("categories", categories), ("similarity", similarity), ("distance", distance))
    given = {name: x for name, x in named if x is not None}
    if len(given) != 1:
        last = "similarity= (num_items, num_items)"
        if takes_distance:
            last = "similarity= (num_items, num_items), or distance= (num_items, num_items) pairwise distances"
        raise ValueError(
            "give exactly one item similarity: embeddings= (num_items, d) for cosine, categories= "
            f"(num_items,) labels or (num_items, C) bool sets, or {last}; got {list(given) or 'none'}"
        )
    [(name, x)] = given.items()
    if not isinstance(x, Tensor) or x.layout != torch.strided or x.dtype.is_complex:
        raise TypeError(f"{name} must be a dense real torch.Tensor, got {type(x).__name__}")
    x = x.detach()
    if name == "embeddings":
        if x.ndim != 2 or x.shape[0] != num_items or x.shape[1] == 0 or not x.is_floating_point():
            raise ValueError(
                f"embeddings must be a floating (num_items, d) = ({num_items}, d) tensor, one vector per item, "
                f"got {x.dtype} {tuple(x.shape)}"
            )
        f = x.to(torch.float64)
        if not bool(torch.isfinite(f).all()):
            raise ValueError("embeddings must be finite")
        norm = f.norm(dim=-1, keepdim=True)
        if not bool((norm > 0).all()):
            raise ValueError("embeddings has an all-zero row: the cosine similarity of that item is undefined")
        ones = torch.ones(num_items, 1, dtype=torch.float64, device=f.device)
        return torch.cat([f / norm, ones], -1), None, 0, "cosine"
    if name == "categories":
        if x.ndim == 1:
            if x.shape[0] != num_items or x.dtype == torch.bool or x.is_floating_point():
                raise ValueError(
                    f"categories must be ({num_items},) integer labels (one category per item) or a "
                    f"({num_items}, C) bool tensor of category sets, got {x.dtype} {tuple(x.shape)}"
                )
            if bool((x < 0).any()):
                raise ValueError("categories labels must be >= 0")
            labels = torch.unique(x, return_inverse=True)[1]
            return labels, None, int(labels.max()) + 1, "category"
        if x.ndim != 2 or x.shape[0] != num_items or x.dtype != torch.bool:
            raise ValueError(
                f"categories must be ({num_items},) integer labels or a ({num_items}, C) bool tensor of category "
                f"sets (Jaccard similarity), got {x.dtype} {tuple(x.shape)}"
            )
        sets, pattern = torch.unique(x, dim=0, return_inverse=True)
        if sets.shape[0] > MAX_CATEGORY_SETS:
            raise ValueError(
                f"categories holds {sets.shape[0]} distinct category sets (at most {MAX_CATEGORY_SETS} are "
                "tabulated for the Jaccard similarity): pass embeddings=categories.float() for their cosine"
            )
        s = sets.to(torch.float64)
        inter = s @ s.T
        size = s.sum(-1)
        union = size.unsqueeze(-1) + size.unsqueeze(0) - inter
        table = torch.where(union > 0, inter / union.clamp(min=1), 0.0)
        return pattern, table, sets.shape[0], "jaccard"
    if x.shape != (num_items, num_items):
        raise ValueError(
            f"{name} must be a (num_items, num_items) = ({num_items}, {num_items}) tensor, got {tuple(x.shape)}"
        )
    table = x.to(torch.float64)
    if name == "distance":
        nan = torch.isnan(table)
        table = torch.where(nan, 0.0, table)
        if not bool(torch.isfinite(table).all()) or not torch.equal(table, table.T):
            raise ValueError(
                "distance must be symmetric (distance[a, b] == distance[b, a]) and finite but for the NaN rows and "
                "columns of items without features"
            )
        return torch.arange(num_items, device=x.device), table, num_items, "distance"
    if not bool(torch.isfinite(table).all()) or not torch.equal(table, table.T):
        raise ValueError("similarity must be finite and symmetric (similarity[a, b] == similarity[b, a])")
    return torch.arange(num_items, device=x.device), table, num_items, "table"


def _featureless(distance: Tensor, featureless: str) -> Tensor | None:
    """``(num_items,)`` bool: the items of ``distance`` without features (their row and column NaN),
    None when there is none; a NaN elsewhere, or any under ``featureless="error"``, is a ValueError."""
    nan = torch.isnan(distance.detach())
    if not bool(nan.any()):
        return None
    if featureless != "skip":
        raise ValueError(
            "distance holds NaN (items without features, as RecTools' distance calculators return them): pass "
            "featureless='skip' (RecTools: a pair with such an item is left out, and a list without a pair of "
            "items with features has no value) or give every item a distance"
        )
    unknown = nan.all(-1)
    if not torch.equal(nan, unknown.unsqueeze(-1) | unknown.unsqueeze(0)):
        raise ValueError(
            "distance holds NaN outside whole rows and columns: only an item without features (NaN with every "
            "item, itself included) may have NaN distances"
        )
    return ~unknown


def hamming_distances(features: Tensor, *, chunk_rows: int = 1024) -> Tensor:
    """``(num_items, num_items)`` float64: the number of features on which two items differ (RecTools'
    ``PairwiseHammingDistanceCalculator``), NaN for each pair with an item that lacks a feature value (a
    NaN in its row of ``features``: RecTools' absent feature values or absent rows).

    For :class:`IntraListDiversity` ``(distance=...)``; dense, so for catalogues of a few thousand items.

    Args:
        features: ``(num_items, F)`` feature values (float; NaN = absent).
        chunk_rows: items compared at a time (bounds the ``chunk_rows x num_items x F`` comparison).

    Example:
        >>> import torch
        >>> hamming_distances(torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 1.0], [float("nan"), 0.0]]))
        tensor([[0., 1., 2., nan],
                [1., 0., 1., nan],
                [2., 1., 0., nan],
                [nan, nan, nan, nan]], dtype=torch.float64)
    """
    if not isinstance(features, Tensor) or features.ndim != 2 or features.dtype.is_complex:
        raise TypeError(f"features must be a real (num_items, F) tensor, got {type(features).__name__}")
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows <= 0:
        raise ValueError(f"chunk_rows must be a positive int, got {chunk_rows!r}")
    f = features.detach()
    absent = (
        torch.isnan(f).any(-1) if f.is_floating_point() else torch.zeros(f.shape[0], dtype=torch.bool, device=f.device)
    )
    rows = [(f[a : a + chunk_rows].unsqueeze(1) != f.unsqueeze(0)).sum(-1) for a in range(0, f.shape[0], chunk_rows)]
    out = torch.cat(rows).to(torch.float64) if rows else torch.zeros(0, 0, dtype=torch.float64)
    return torch.where(absent.unsqueeze(-1) | absent.unsqueeze(0), torch.nan, out)


def _lchoose(a: Tensor, b: Tensor) -> Tensor:
    """``log C(a, b)`` (float64; only read where ``0 <= b <= a``)."""
    a, b = a.clamp(min=0), b.clamp(min=0)
    return torch.lgamma(a + 1) - torch.lgamma(b + 1) - torch.lgamma((a - b).clamp(min=0) + 1)


def _times(x: Tensor, table: Tensor | None) -> Tensor:
    return x if table is None else x @ table


def _vector(x: Tensor, features: Tensor) -> Tensor:
    """The similarity part of a sum of item vectors (cosine: without the count column)."""
    return x[:, :-1] if features.is_floating_point() else x


def _count(x: Tensor, features: Tensor) -> Tensor:
    """``(N,)``: the (weighted) number of items in a sum of item vectors."""
    return x[:, -1] if features.is_floating_point() else x.sum(-1)


def _own(x: Tensor, features: Tensor, table: Tensor | None) -> Tensor:
    """``(N,)``: the sum of ``sim(i, i)`` over the items of a sum of item vectors."""
    if features.is_floating_point() or table is None:  # unit vectors / one class each: sim(i, i) = 1
        return _count(x, features)
    return x @ table.diagonal()


def _gathered_sum(features: Tensor, classes: int, items: Tensor, weights: Tensor) -> Tensor:
    """``(N, D)``: ``sum_p weights[r, p] x_{items[r, p]}`` (``items``, ``weights``: ``(N, W)``)."""
    if features.is_floating_point():
        f = features.index_select(0, items.reshape(-1)).view(*items.shape, -1)
        return (f * weights.unsqueeze(-1)).sum(1)
    out = torch.zeros(items.shape[0], classes, dtype=torch.float64, device=items.device)
    return out.scatter_add_(1, features.index_select(0, items.reshape(-1)).view_as(items), weights)


# ---------------------------------------------------------------------------------------- shared base
class _TopKListMetric(ConfiguredMetric):
    """Arguments, input checks and the view shared by the per-user beyond-accuracy metrics."""

    is_differentiable: bool | None = False
    higher_is_better: bool | None = True
    full_state_update: bool | None = False
    plot_lower_bound: float | None = 0.0
    _kept_dtypes: tuple[str, ...] = ("total", "users")
    total: Tensor
    users: Tensor
    num_items: int
    k: int
    ties: str
    validate_args: bool
    chunk_elements: int
    classes: int
    similarity_kind: str
    key: str

    def _setup(self, num_items: int, k: int, ties: str, validate_args: bool, chunk_elements: int) -> None:
        check_catalogue_options(self, num_items, (k,), ties, validate_args, chunk_elements)
        self.num_items, self.k, self.ties = num_items, k, ties
        self.validate_args, self.chunk_elements = validate_args, chunk_elements
        self.add_state("total", torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("users", torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")

    def _setup_similarity(
        self,
        embeddings: Tensor | None,
        categories: Tensor | None,
        similarity: Tensor | None,
        distance: Tensor | None = None,
    ) -> dict[str, Any]:
        """The item similarity of the pairwise metrics (exactly one of ``embeddings``, ``categories``,
        ``similarity``, ``distance``) as the ``features`` / ``table`` buffers; returns the configuration to set."""
        features, table, self.classes, self.similarity_kind = _item_similarity(
            self.num_items,
            embeddings,
            categories,
            similarity,
            distance,
            takes_distance=isinstance(self, IntraListDiversity),
        )
        self.register_buffer("features", features, persistent=False)
        self.register_buffer("table", table, persistent=False)
        self._kept_dtypes = (*self._kept_dtypes, "features", "table")
        return {
            "num_items": self.num_items, "k": self.k, "ties": self.ties, "kind": self.similarity_kind,
            "embeddings": embeddings, "categories": categories, "similarity": similarity,
            **({} if distance is None else {"distance": distance}),
        }  # fmt: skip

    def _preds(self, preds: Any, exclude: Any, mask: Any = None, indexes: Any = None) -> tuple[Tensor, Any]:
        """The shared input stage (:mod:`torch_rankeval.metrics._catalogue`): the ranking metrics' checks,
        ``mask=`` merged into ``exclude``, ``indexes=`` refused."""
        return catalogue_input(
            self, preds, exclude, num_items=self.num_items, device=self.total.device,
            validate_args=self.validate_args, mask=mask, indexes=indexes,
        )  # fmt: skip

    def _user_input(self, x: Any, name: str, preds: Tensor, *, bool_only: bool) -> Tensor | SparseTarget:
        """A dense ``(N, num_items)`` tensor (as is) or a torch sparse one (canonical form)."""
        shape = tuple(preds.shape)
        what = "bool (True = the user interacted with the item)" if bool_only else "real (the item's relevance)"
        if not isinstance(x, Tensor):
            raise TypeError(
                f"{name} must be a {what} (N, num_items) torch tensor, dense or sparse, got {type(x).__name__}"
            )
        if x.ndim == 1 and shape[0] == 1:
            x = x.unsqueeze(0)
        if tuple(x.shape) != shape:
            raise ValueError(f"{name} must be (N, num_items) = {shape}, one row per row of preds, got {tuple(x.shape)}")
        if (bool_only and x.dtype != torch.bool) or x.dtype.is_complex:
            raise TypeError(f"{name} must be a {what} tensor, got {x.dtype}")
        if x.device != preds.device:
            raise ValueError(f"{name} is on {x.device} but preds is on {preds.device}: move all inputs to one device")
        if is_sparse(x):
            return sparse_target(x, shape, name=name, device=preds.device, validate_args=self.validate_args)
        if self.validate_args and not bool_only and not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name} must be finite")
        return x

    def _view(self, preds: Tensor, exclude: Any) -> tuple[TopKView, Tensor, Tensor, Tensor, Tensor, Tensor]:
        """``(view, fixed, group, kk, m, n)``: the positions ranked for sure (``(N, W)`` bool), the view's
        positions of the tied group at the cutoff, ``k' = min(k, n_valid)``, the slots ``m`` left to
        that group and its whole size ``n`` (per row, float64; ``m = n = 0`` under ``ties="first"``)."""
        view = topk_view(
            preds, self.k, exclude=exclude, ties=self.ties, validate_args=self.validate_args,
            chunk_elements=self.chunk_elements,
        )  # fmt: skip
        kk = view.n_valid.clamp(max=view.k)
        positions = torch.arange(view.k, device=preds.device)
        valid = positions < kk.unsqueeze(-1)
        if self.ties == "first":
            zero = torch.zeros_like(kk, dtype=torch.float64)
            return view, valid, torch.zeros_like(valid), kk, zero, zero
        s = torch.minimum(view.boundary_start, kk)
        fixed = positions < s.unsqueeze(-1)
        m = kk - s
        n = torch.where(view.spilled, view.boundary_size, m)
        return view, fixed, valid & ~fixed, kk, m.to(torch.float64), n.to(torch.float64)

    def _sums(
        self, preds: Tensor, view: TopKView, exclude: Any, fixed: Tensor, group: Tensor,
        doc: Tensor | SparseTarget | None = None, doc_view: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:  # fmt: skip
        """``(u, g)`` ``(N, D)``: the sums of ``doc * x_i`` over the fixed positions and over the WHOLE
        tied group at the cutoff (its view positions, or the row pass where it spills)."""
        zero = torch.zeros((), dtype=torch.float64, device=preds.device)
        w = torch.ones((), dtype=torch.float64, device=preds.device) if doc_view is None else doc_view
        u = _gathered_sum(self.features, self.classes, view.items, torch.where(fixed, w, zero))
        g = _gathered_sum(self.features, self.classes, view.items, torch.where(group, w, zero))
        if self.ties == "average":
            spilled = boundary_sums(
                preds, view, self.features, exclude, doc=doc, num_classes=self.classes or None,
                chunk_elements=self.chunk_elements,
            )  # fmt: skip
            g = torch.where(view.spilled.unsqueeze(-1), spilled, g)
        return u, g

    def _add(self, values: Tensor, counted: Tensor) -> None:
        zero = torch.zeros((), dtype=torch.float64, device=values.device)
        self.total += torch.where(counted, values, zero).sum()
        self.users += counted.sum(dtype=torch.float64)

    def _mean(self, key: str, what: str) -> dict[str, Tensor]:
        out_dtype = self.dtype if self.dtype.is_floating_point else torch.float32
        if not bool(self.users > 0):
            warnings.warn(f"{type(self).__name__}: {what}; returning NaN", UserWarning, stacklevel=3)
            return {key: torch.full((), float("nan"), dtype=out_dtype, device=self.total.device)}
        return {key: (self.total / self.users).to(out_dtype)}


# ---------------------------------------------------------------------------------------- diversity
class IntraListDiversity(_TopKListMetric):
    """Intra-list diversity@k: one minus the mean similarity of the pairs of items in each top-``k``
    list, averaged over users (Ziegler et al. 2005; Microsoft Recommenders' ``diversity``).

    Per user with list ``R`` (``k' = min(k, #non-excluded items)`` items, ``k' >= 2``):
    ``ILD(R) = 1 - sum_{a < b in R} sim(a, b) / (k' (k' - 1) / 2)``; ``compute()`` returns
    ``{"diversity@k": mean over users}``. Users with fewer than two items have no pair: they are
    left out of the mean, as in Recommenders (whose pair table has no row for them).

    The similarity (exactly one):

    - ``embeddings``: ``(num_items, d)`` item vectors, cosine similarity (Recommenders'
      ``item_feature_vector``); a zero vector is an error;
    - ``categories``: ``(num_items,)`` integer labels: similarity 1 for the same category, 0 else
      (the diversity is the share of pairs from different categories); or ``(num_items, C)`` bool
      category sets: Jaccard similarity ``|A & B| / |A | B|`` (two items without any category: 0);
      at most :data:`MAX_CATEGORY_SETS` distinct sets;
    - ``similarity``: a user-supplied symmetric ``(num_items, num_items)`` matrix (e.g.
      Recommenders' co-occurrence cosine ``count(a, b) / sqrt(count(a) count(b))``); for catalogues
      of a few thousand items (it is dense);
    - ``distance``: a symmetric ``(num_items, num_items)`` matrix of pairwise distances (RecTools'
      ``IntraListDiversity`` with a distance calculator, e.g. :func:`hamming_distances`): the value
      is then the mean pairwise DISTANCE of the list, ``sum_{a < b} d(a, b) / (k' (k' - 1) / 2)``
      (no ``1 -``); dense, as ``similarity``.

    **RecTools' conventions** (options; the defaults above are Recommenders'):

    - ``one_item="zero"``: a list of one item scores 0 and counts in the mean (RecTools fills the
      users without a pair with 0); default ``"skip"``: left out;
    - ``featureless="skip"`` (with ``distance=``): the NaN rows and columns of ``distance`` mark
      items without features (RecTools' distance calculators return NaN for their pairs); a pair
      with such an item is left out of the list's mean (pandas' mean skips NaN), and a list of two
      or more items without any pair of items with features has no value (RecTools: NaN) and is
      left out of the mean over users. Under ``ties="average"`` the number of such items drawn
      from the tied group is hypergeometric: the metric adds, per list, the expected value over
      the orders where it is defined and counts the list by the probability that it is.
      Default ``"error"``: a NaN in ``distance`` is an error.

    **Ties at the cutoff** (``ties="average"``): the expected ILD over every order of the tied items
    (see :mod:`torch_rankeval.metrics.beyond`); pairs inside the tied group get their expected
    co-occurrence ``m (m - 1) / (n (n - 1))``. ``ties="first"``: input order. ``exclude``: ``(N,
    num_items)`` bool (dense or sparse), True = never recommended.

    Args:
        num_items: the catalogue size (the width of ``preds``).
        k: the list length (cutoff), ``2 <= k <= num_items`` (``1 <= k`` with ``one_item="zero"``).
        embeddings, categories, similarity, distance: the item similarity or distance (exactly one).
        one_item: ``"skip"`` (default: a one-item list is left out) or ``"zero"`` (RecTools: it scores 0).
        featureless: ``"error"`` (default) or ``"skip"`` (RecTools: items with NaN distances have no
            features; see above).
        ties: ``"average"`` (default) or ``"first"``.
        validate_args: check the scores (finite at non-excluded items) and sparse inputs; with False
            ``update`` has no host sync on CUDA nor under ``torch.compile`` (every row then gets the
            pass over its scores for the tied group: ``rows x num_items x d`` multiply-adds); on
            the CPU in eager mode it reads the spilled rows from host memory, as when validated.
        chunk_elements: bound on the ``rows x num_items`` of one chunk of that pass.
        kwargs: torchmetrics' ``Metric`` options.

    States: ``total`` and ``users``, float64 scalars, summed across processes (one all-reduce).
    No data: NaN with a ``UserWarning``.

    Example:
        >>> import torch
        >>> from torch_rankeval.metrics import IntraListDiversity
        >>> genres = torch.tensor([0, 0, 1, 2])                  # items 0, 1: same category
        >>> metric = IntraListDiversity(num_items=4, k=3, categories=genres)
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.7, 0.0],    # items 0, 1, 2: 2 of 3 pairs differ
        ...                             [0.0, 0.9, 0.8, 0.7]]))  # items 1, 2, 3: all pairs differ
        >>> round(metric.compute()["diversity@3"].item(), 4)     # (2/3 + 1) / 2
        0.8333
        >>> rectools = IntraListDiversity(num_items=4, k=2, one_item="zero", featureless="skip",
        ...     distance=hamming_distances(torch.tensor([[0.0, 0], [0, 1], [1, 1], [float("nan"), 0]])))
        >>> rectools.update(torch.tensor([[0.9, 0.8, 0.1, 0.0],     # items 0, 1: 1 feature differs
        ...                               [0.9, 0.0, 0.1, 0.8]]))   # items 0, 3: item 3 has no features
        >>> rectools.update(torch.tensor([[0.9, 0.0, 0.0, 0.0]]), exclude=torch.tensor([[False, True, True, True]]))
        >>> rectools.compute()["diversity@2"].item()               # (1 + 0) / 2: the one-item list scores 0
        0.5
    """

    key: str
    one_item: str
    featureless: str

    def __init__(
        self,
        num_items: int,
        k: int,
        *,
        embeddings: Tensor | None = None,
        categories: Tensor | None = None,
        similarity: Tensor | None = None,
        distance: Tensor | None = None,
        one_item: str = "skip",
        featureless: str = "error",
        ties: str = "average",
        validate_args: bool = True,
        chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
        **kwargs: Any,
    ) -> None:
        check_catalogue_kwargs(self, kwargs)
        super().__init__(**kwargs)
        self._setup(num_items, k, ties, validate_args, chunk_elements)
        if one_item not in ("skip", "zero"):
            raise ValueError(f"one_item={one_item!r} is not valid: use 'skip' (Recommenders) or 'zero' (RecTools)")
        if featureless not in ("error", "skip"):
            raise ValueError(f"featureless={featureless!r} is not valid: use 'error' or 'skip' (RecTools)")
        if featureless != "error" and distance is None:
            raise ValueError("featureless= reads the NaN rows of distance=: give the pairwise distances as distance=")
        if k < 2 and one_item == "skip":
            raise ValueError(
                "k=1: a list of one item has no pair; intra-list diversity needs k >= 2 (or one_item='zero', "
                "RecTools: a one-item list scores 0)"
            )
        self.one_item, self.featureless = one_item, featureless
        known = None if distance is None or not isinstance(distance, Tensor) else _featureless(distance, featureless)
        config = self._setup_similarity(embeddings, categories, similarity, distance)
        self.register_buffer("known", known, persistent=False)
        self.key = f"diversity@{k}"
        if one_item != "skip":
            config["one_item"] = one_item
        if known is not None:
            config["featureless"] = featureless
        self._set_config(config)

    def update(
        self, preds: Tensor, exclude: Tensor | None = None, *, mask: Tensor | None = None, indexes: Any = None
    ) -> None:
        """Add the top-``k`` lists of a batch: ``preds`` ``(N, num_items)`` scores (``(num_items,)`` for
        one user), ``exclude`` optional ``(N, num_items)`` bool, dense or sparse; ``mask`` optional bool,
        False = padding (never ranked, as ``exclude``); ``indexes`` (flat input) is a ``TypeError``."""
        preds, exclude = self._preds(preds, exclude, mask, indexes)
        if preds.shape[0] == 0:
            return
        view, fixed, group, kk, m, n = self._view(preds, exclude)
        f, table = self.features, self.table
        one = torch.ones((), dtype=torch.float64, device=preds.device)
        zero = torch.zeros((), dtype=torch.float64, device=preds.device)
        if self.known is not None:
            self._add_featureless(preds, exclude, view, fixed, group, kk, m, n)
            return
        u, g = self._sums(preds, view, exclude, fixed, group)
        own_u, own_g = _own(u, f, table), _own(g, f, table)
        u, g = _vector(u, f), _vector(g, f)
        ff = ((_times(u, table) * u).sum(-1) - own_u) / 2
        fg = (_times(u, table) * g).sum(-1)
        gg = ((_times(g, table) * g).sum(-1) - own_g) / 2
        p1 = torch.where(n > 0, m / torch.maximum(n, one), 0.0)
        p2 = torch.where(n > 1, m * (m - 1) / torch.maximum(n * (n - 1), one), 0.0)
        expected = ff + p1 * fg + p2 * gg
        kk = kk.to(torch.float64)
        pairs = kk * (kk - 1) / 2
        counted = kk >= 2
        mean = expected / torch.where(counted, pairs, one)
        value = mean if self.similarity_kind == "distance" else 1 - mean
        if self.one_item == "zero":
            value, counted = torch.where(counted, value, zero), kk >= 1
        self._add(value, counted)

    def _add_featureless(
        self,
        preds: Tensor,
        exclude: Any,
        view: TopKView,
        fixed: Tensor,
        group: Tensor,
        kk: Tensor,
        m: Tensor,
        n: Tensor,
    ) -> None:
        """RecTools' mean over the pairs of items with features (``featureless="skip"``): per list, the
        expectation over the ``j`` items with features drawn from the tied group (hypergeometric) of the
        mean over its ``K_j = s_k + j`` such items' pairs, where ``K_j >= 2``; the list counts by the
        probability of that."""
        f, table, known = self.features, self.table, self.known
        nrows = preds.shape[0]
        doc = known.to(torch.float64).expand(nrows, self.num_items)
        at = known.index_select(0, view.items.reshape(-1)).view_as(view.items).to(torch.float64)
        u, g = self._sums(preds, view, exclude, fixed, group, doc=doc, doc_view=at)
        own_u, own_g = _own(u, f, table), _own(g, f, table)
        sk, nk = _count(u, f), _count(g, f)  # items with features: sure, and in the whole tied group
        ff = ((_times(u, table) * u).sum(-1) - own_u) / 2
        fg = (_times(u, table) * g).sum(-1)
        gg = ((_times(g, table) * g).sum(-1) - own_g) / 2
        j = torch.arange(self.k + 1, dtype=torch.float64, device=preds.device)
        nk_, n_, m_ = nk.unsqueeze(-1), n.unsqueeze(-1), m.unsqueeze(-1)
        possible = (j <= nk_) & (j <= m_) & (m_ - j <= n_ - nk_)
        log_p = _lchoose(nk_, j) + _lchoose(n_ - nk_, m_ - j) - _lchoose(n_, m_)
        p = torch.where(possible, torch.exp(log_p), 0.0)
        one = torch.ones((), dtype=torch.float64, device=preds.device)
        zero = torch.zeros((), dtype=torch.float64, device=preds.device)
        s = ff.unsqueeze(-1) + fg.unsqueeze(-1) * torch.where(nk_ > 0, j / torch.maximum(nk_, one), 0.0)
        s = s + gg.unsqueeze(-1) * torch.where(nk_ > 1, j * (j - 1) / torch.maximum(nk_ * (nk_ - 1), one), 0.0)
        known_items = sk.unsqueeze(-1) + j
        pairs = known_items * (known_items - 1) / 2
        defined = possible & (known_items >= 2) & (kk.unsqueeze(-1) >= 2)
        value = (torch.where(defined, p * s / torch.where(defined, pairs, one), zero)).sum(-1)
        weight = torch.where(defined, p, zero).sum(-1)
        if self.one_item == "zero":
            weight = torch.where(kk == 1, one, weight)
        self.total += value.sum()
        self.users += weight.sum()

    def compute(self) -> dict[str, Tensor]:
        """``{"diversity@k": mean ILD over the users with at least two recommended items}``."""
        return self._mean(self.key, "no list with two or more items was seen")


# ---------------------------------------------------------------------------------------- novelty
def _popularity(popularity: Any, num_items: int) -> Tensor:
    """``popularity`` as a ``(num_items,)`` float64 tensor of finite numbers ``>= 0``; else a ValueError."""
    if not isinstance(popularity, Tensor) or popularity.shape != (num_items,) or popularity.dtype.is_complex:
        raise ValueError(
            f"popularity must be a real ({num_items},) tensor, one count (or probability) per item, "
            f"got {type(popularity).__name__} {tuple(getattr(popularity, 'shape', ()))}"
        )
    pop = popularity.detach().to(torch.float64)
    if popularity.dtype == torch.bool or not bool(torch.isfinite(pop).all()):
        raise ValueError("popularity must hold finite numbers (interaction counts or probabilities per item)")
    if bool((pop < 0).any()):
        raise ValueError("popularity must be >= 0 (a count or a probability per item), got a negative value")
    return pop


#: How a per-item value is averaged: over every recommendation slot (Recommenders), or per user first
#: (RecTools: each list's mean, then the mean over users, so lists of unequal length weigh the same).
AVERAGES = ("slots", "users")


class _ItemValueMean(_TopKListMetric):
    """A per-item value (the ``(num_items, 1)`` buffer ``features``) averaged over the top-``k`` lists:
    over every slot (``average="slots"``) or per list, then over the lists with an item (``"users"``)."""

    key: str
    average: str
    _kept_dtypes: tuple[str, ...] = ("total", "users", "features")

    def _setup_values(self, values: Tensor, average: str) -> None:
        if average not in AVERAGES:
            raise ValueError(
                f"average={average!r} is not valid: use 'slots' (the mean over every recommendation slot, "
                "Recommenders) or 'users' (each list's mean, then the mean over users, RecTools)"
            )
        self.average = average
        self.register_buffer("features", values.unsqueeze(-1), persistent=False)  # (num_items, 1)
        self.classes = 0

    def update(
        self, preds: Tensor, exclude: Tensor | None = None, *, mask: Tensor | None = None, indexes: Any = None
    ) -> None:
        """Add the top-``k`` lists of a batch: ``preds`` ``(N, num_items)`` (``(num_items,)`` for one user),
        ``exclude`` optional bool (dense or sparse), ``mask`` optional bool (False = padding, never ranked);
        ``indexes`` (flat input) is a ``TypeError``."""
        preds, exclude = self._preds(preds, exclude, mask, indexes)
        if preds.shape[0] == 0:
            return
        view, fixed, group, kk, m, n = self._view(preds, exclude)
        u, g = self._sums(preds, view, exclude, fixed, group)
        share = torch.where(n > 0, m / n.clamp(min=1), 0.0)
        per_list = u[:, 0] + share * g[:, 0]
        if self.average == "slots":
            self.total += per_list.sum()
            self.users += kk.sum(dtype=torch.float64)
            return
        counted = kk > 0
        self._add(per_list / kk.clamp(min=1).to(torch.float64), counted)


class Novelty(_ItemValueMean):
    """Novelty@k: the mean self-information ``-log2 p(i)`` of the recommended items (Castells, Vargas
    and Wang 2011; Microsoft Recommenders' ``novelty``).

    ``popularity`` ``(num_items,)``: non-negative per-item counts (training interactions, as in
    Recommenders) or a distribution; ``p(i) = popularity_i / sum(popularity)`` (Recommenders'
    ``count / n_records``, the item-choice model). With ``num_users`` (the *surprisal* variant of
    the discovery model, Zhou et al. 2010), ``popularity_i`` is the number of users who know item
    ``i`` and ``p(i) = popularity_i / num_users`` (each ``<= num_users``).

    ``compute()`` returns ``{"novelty@k": sum over every recommendation slot of -log2 p(i) / number
    of slots}``: Recommenders' mean over all (user, item) rows of the recommendations (a user with
    a shorter list weighs less). An item with ``p(i) = 0`` has no self-information: it adds 0 but
    fills its slot, as in Recommenders (whose inner join drops it from the sum but not from the
    count of recommendations).

    **RecTools' conventions** (options): ``average="users"`` takes each list's mean, then the mean
    over the users with a non-empty list (lists of unequal length weigh the same);
    ``cold_items="one_user"`` (with ``num_users``) scores an item nobody knows as if one user knew
    it, ``p(i) = 1 / num_users`` (RecTools' ``fillna(1)``). Together they are RecTools'
    ``MeanInvUserFreq`` (:class:`MeanInvUserFreq`).

    Ties (``ties="average"``): each tied item fills its expected share of the slots left (see
    :mod:`torch_rankeval.metrics.beyond`). ``exclude``: ``(N, num_items)`` bool, True = never
    recommended.

    Args:
        num_items: the catalogue size.
        k: the list length (cutoff).
        popularity: ``(num_items,)`` finite, ``>= 0``, with a positive sum.
        num_users: optional positive int: the surprisal variant ``p(i) = popularity_i / num_users``.
        average: ``"slots"`` (default, Recommenders) or ``"users"`` (RecTools).
        cold_items: ``"zero"`` (default: an item with ``p(i) = 0`` adds 0) or ``"one_user"`` (needs
            ``num_users``; RecTools).
        ties: ``"average"`` (default) or ``"first"``.
        validate_args: check the scores; False: no host sync in ``update`` (see
            :class:`IntraListDiversity`).
        chunk_elements: bound on the ``rows x num_items`` of one chunk of the pass over tied rows.
        kwargs: torchmetrics' ``Metric`` options.

    States: ``total`` (self-information summed over slots, or over users' means) and ``users`` (the
    slots, or the users), float64.

    Example:
        >>> import torch
        >>> from torch_rankeval.metrics import Novelty
        >>> metric = Novelty(num_items=4, k=2, popularity=torch.tensor([4.0, 2.0, 1.0, 1.0]))
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.1, 0.0]]))    # p = 1/2, 1/4: 1 bit, 2 bits
        >>> metric.compute()["novelty@2"].item()
        1.5
    """

    def __init__(
        self,
        num_items: int,
        k: int,
        popularity: Tensor,
        *,
        num_users: int | None = None,
        average: str = "slots",
        cold_items: str = "zero",
        ties: str = "average",
        validate_args: bool = True,
        chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
        **kwargs: Any,
    ) -> None:
        check_catalogue_kwargs(self, kwargs)
        super().__init__(**kwargs)
        self._setup(num_items, k, ties, validate_args, chunk_elements)
        pop = _popularity(popularity, num_items)
        if cold_items not in ("zero", "one_user"):
            raise ValueError(f"cold_items={cold_items!r} is not valid: use 'zero' or 'one_user' (RecTools)")
        if num_users is None:
            if cold_items != "zero":
                raise ValueError("cold_items='one_user' needs num_users= (p(i) = 1 / num_users for a cold item)")
            if not bool(pop.sum() > 0):
                raise ValueError("popularity sums to 0: it is not a distribution (give interaction counts per item)")
            p = pop / pop.sum()
        else:
            if isinstance(num_users, bool) or not isinstance(num_users, int) or num_users <= 0:
                raise ValueError(f"num_users must be a positive int (the number of users), got {num_users!r}")
            if bool((pop > num_users).any()):
                raise ValueError(
                    f"popularity exceeds num_users={num_users}: with num_users it counts the users who know "
                    "each item (p(i) = popularity / num_users <= 1)"
                )
            known = pop if cold_items == "zero" else torch.where(pop > 0, pop, 1.0)
            p = known / num_users
        info = torch.where(p > 0, -torch.log2(torch.where(p > 0, p, 1.0)), 0.0)
        self._setup_values(info, average)
        self.num_users = num_users
        self.cold_items = cold_items
        self.key = self._key(k)
        config = {"num_items": num_items, "k": k, "ties": ties, "popularity": pop, "num_users": num_users}
        if average != "slots":  # only when set: the configurations of earlier versions stay the same
            config["average"] = average
        if cold_items != "zero":
            config["cold_items"] = cold_items
        self._set_config(config)

    @staticmethod
    def _key(k: int) -> str:
        return f"novelty@{k}"

    @property
    def information(self) -> Tensor:
        """``(num_items,)`` float64: each item's self-information ``-log2 p(i)`` (0 where ``p(i) = 0``)."""
        return self.features[:, 0]

    def compute(self) -> dict[str, Tensor]:
        """``{"novelty@k": mean self-information over every recommendation slot (or user)}``."""
        return self._mean(self.key, "no recommendation slot was filled")


class MeanInvUserFreq(Novelty):
    """RecTools' ``MeanInvUserFreq@k``: per user, the mean over the list of ``-log2(users(i) / n_users)``,
    then the mean over the users (:class:`Novelty` with ``num_users``, ``average="users"`` and
    ``cold_items="one_user"``).

    ``users_per_item`` ``(num_items,)``: the number of DISTINCT users who interacted with each item
    before (RecTools: ``groupby(item)[user].nunique()``: a user's repeated interactions count once;
    :func:`interaction_counts` with ``distinct_users=True``); ``num_users``: the distinct users of
    those interactions. An item nobody interacted with counts as known to one user (RecTools'
    ``fillna(1)``). A user whose list is empty (every item excluded) has no value and is left out.

    Args:
        num_items: the catalogue size.
        k: the list length (cutoff).
        users_per_item: ``(num_items,)`` distinct-user counts, each ``<= num_users``.
        num_users: the number of distinct users of the previous interactions.
        ties: ``"average"`` (default) or ``"first"``.
        validate_args: check the scores; False: no host sync in ``update``.
        chunk_elements: bound on the ``rows x num_items`` of one chunk of the pass over tied rows.
        kwargs: torchmetrics' ``Metric`` options.

    Example:
        >>> import torch
        >>> from torch_rankeval.metrics import MeanInvUserFreq
        >>> metric = MeanInvUserFreq(num_items=3, k=2, users_per_item=torch.tensor([3.0, 1.0, 0.0]), num_users=3)
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.0], [0.0, 0.0, 0.9]]), exclude=torch.tensor([[0, 0, 1], [1, 1, 0]]).bool())
        >>> round(metric.compute()["miuf@2"].item(), 4)     # ((0 + log2 3) / 2 + log2 3) / 2
        1.1887
    """

    def __init__(
        self,
        num_items: int,
        k: int,
        users_per_item: Tensor,
        num_users: int,
        *,
        ties: str = "average",
        validate_args: bool = True,
        chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
        **kwargs: Any,
    ) -> None:
        check_catalogue_kwargs(self, kwargs)
        super().__init__(
            num_items, k, users_per_item, num_users=num_users, average="users", cold_items="one_user", ties=ties,
            validate_args=validate_args, chunk_elements=chunk_elements, **kwargs,
        )  # fmt: skip

    @staticmethod
    def _key(k: int) -> str:
        return f"miuf@{k}"


class AvgRecPopularity(_ItemValueMean):
    """RecTools' ``AvgRecPopularity@k`` (ARP): per user, the mean popularity of the recommended items,
    then the mean over the users (lists of unequal length weigh the same; :class:`ItemExposure`'s
    ``"popularity@k"`` is the mean over every slot instead).

    ``popularity`` ``(num_items,)``: the number of previous interactions with each item, EVERY
    interaction counted (RecTools: ``value_counts()`` of the item column, so a user's repeated
    interactions with an item count again; :func:`interaction_counts`); an item without any has
    popularity 0. ``normalize=True`` divides by the total number of interactions
    (``popularity.sum()``): RecTools' ``normalize``. A user whose list is empty (every item
    excluded) is left out.

    Args:
        num_items: the catalogue size.
        k: the list length (cutoff).
        popularity: ``(num_items,)`` finite, ``>= 0`` (interaction counts).
        normalize: divide by the total number of interactions (RecTools' ``normalize``).
        ties: ``"average"`` (default: the expectation over the orders of the tied items) or ``"first"``.
        validate_args: check the scores; False: no host sync in ``update``.
        chunk_elements: bound on the ``rows x num_items`` of one chunk of the pass over tied rows.
        kwargs: torchmetrics' ``Metric`` options.

    States: ``total`` (the users' means, summed) and ``users``, float64, ``dist_reduce_fx="sum"``.

    Example:
        >>> import torch
        >>> from torch_rankeval.metrics import AvgRecPopularity
        >>> metric = AvgRecPopularity(num_items=3, k=3, popularity=torch.tensor([3.0, 2.0, 1.0]))
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.0], [0.7, 0.8, 0.9]]), exclude=torch.tensor([[0, 0, 1], [0, 0, 0]]).bool())
        >>> metric.compute()["avg_rec_popularity@3"].item()               # ((3 + 2) / 2 + (1 + 2 + 3) / 3) / 2
        2.25
    """

    def __init__(
        self,
        num_items: int,
        k: int,
        popularity: Tensor,
        *,
        normalize: bool = False,
        ties: str = "average",
        validate_args: bool = True,
        chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
        **kwargs: Any,
    ) -> None:
        check_catalogue_kwargs(self, kwargs)
        super().__init__(**kwargs)
        self._setup(num_items, k, ties, validate_args, chunk_elements)
        pop = _popularity(popularity, num_items)
        if not isinstance(normalize, bool):
            raise TypeError(f"normalize must be a bool, got {type(normalize).__name__}")
        # no interaction at all: every popularity is 0, normalised or not (RecTools' empty value_counts)
        self._setup_values(pop / pop.sum().clamp(min=1e-300) if normalize else pop, "users")
        self.normalize = normalize
        self.key = f"avg_rec_popularity@{k}"
        self._set_config({"num_items": num_items, "k": k, "ties": ties, "popularity": pop, "normalize": normalize})

    def compute(self) -> dict[str, Tensor]:
        """``{"avg_rec_popularity@k": mean over the users with a non-empty list of their list's mean popularity}``."""
        return self._mean(self.key, "no user with a recommended item was seen")


def interaction_counts(
    users: Tensor, items: Tensor, num_items: int, *, distinct_users: bool = False
) -> tuple[Tensor, int]:
    """Per-item counts of previous interactions, as RecTools counts them, and the number of users.

    ``distinct_users=False``: every interaction counts, repeats included (RecTools' ``value_counts()``
    of the item column: :class:`AvgRecPopularity`, and the popularity ranks of
    :class:`PopularityRankSerendipity`). ``distinct_users=True``: the distinct users of each item
    (``groupby(item)[user].nunique()``: :class:`MeanInvUserFreq`). The second value is the number of
    distinct users (RecTools' ``n_users``). On the host: a one-off preparation step, not an update.

    Args:
        users: ``(E,)`` integer user ids of the interactions.
        items: ``(E,)`` integer item indices in ``[0, num_items)``.
        num_items: the catalogue size.
        distinct_users: count each (user, item) pair once.

    Example:
        >>> import torch
        >>> users, items = torch.tensor([0, 0, 0, 1]), torch.tensor([2, 2, 1, 2])   # user 0 saw item 2 twice
        >>> interaction_counts(users, items, 3)
        (tensor([0., 1., 3.], dtype=torch.float64), 2)
        >>> interaction_counts(users, items, 3, distinct_users=True)
        (tensor([0., 1., 2.], dtype=torch.float64), 2)
    """
    for name, x in (("users", users), ("items", items)):
        if not isinstance(x, Tensor) or x.ndim != 1 or x.is_floating_point() or x.dtype == torch.bool:
            raise TypeError(f"{name} must be a 1-D integer tensor (one entry per interaction), got {x!r:.60}")
    if users.shape != items.shape:
        raise ValueError(
            f"users and items must have one entry per interaction, got {tuple(users.shape)} and {tuple(items.shape)}"
        )
    if isinstance(num_items, bool) or not isinstance(num_items, int) or num_items <= 0:
        raise ValueError(f"num_items must be a positive int (the catalogue size), got {num_items!r}")
    if items.numel() and (bool((items < 0).any()) or bool((items >= num_items).any())):
        raise ValueError(f"items must be item indices in [0, {num_items})")
    users, items = users.long(), items.long()
    if distinct_users:
        pairs = torch.unique(torch.stack([users, items]), dim=1)
        items = pairs[1]
    counts = torch.zeros(num_items, dtype=torch.float64, device=items.device)
    counts.index_add_(0, items, torch.ones(items.shape[0], dtype=torch.float64, device=items.device))
    return counts, int(torch.unique(users).numel())


# ---------------------------------------------------------------------------------------- serendipity
class Unexpectedness(_TopKListMetric):
    """Unexpectedness@k: per recommended item, one minus its mean similarity to the user's history,
    averaged over the list, then over the users with a history (the unexpectedness factor of
    Microsoft Recommenders' ``serendipity``: Zhang et al. 2012, "Auralist").

    Per user ``u`` with history ``H`` (``|H| > 0``) and list ``R`` (``k' > 0`` items):
    ``unexp(u) = (1/k') sum_{i in R} (1 - (1/|H|) sum_{h in H} sim(i, h))``. Users without a
    history or without a recommended item are left out (Recommenders' inner join with the training
    interactions drops them). An item both recommended and in the history counts its similarity to
    itself (1 for cosine), as in Recommenders. The similarity arguments are
    :class:`IntraListDiversity`'s.

    ``update(preds, history, exclude=None)``: ``history`` ``(N, num_items)`` bool, dense or sparse
    (COO / CSR), True = the user interacted with the item (typically the training interactions,
    also passed as ``exclude``).

    Args:
        num_items: the catalogue size.
        k: the list length (cutoff).
        embeddings, categories, similarity: the item similarity (exactly one, as
            :class:`IntraListDiversity`).
        ties: ``"average"`` (default: the expectation over the orders of the tied items) or ``"first"``.
        validate_args: check the scores and sparse inputs; False: no host sync in ``update`` (see
            :class:`IntraListDiversity`).
        chunk_elements: bound on the ``rows x num_items`` of one chunk of the pass over tied rows.
        kwargs: torchmetrics' ``Metric`` options.

    Example:
        >>> import torch
        >>> from torch_rankeval.metrics import Unexpectedness
        >>> genres = torch.tensor([0, 0, 1, 1])
        >>> metric = Unexpectedness(num_items=4, k=2, categories=genres)
        >>> seen = torch.tensor([[True, False, False, False]])             # history: item 0 (genre 0)
        >>> metric.update(torch.tensor([[0.0, 0.9, 0.8, 0.1]]), seen)   # list: item 1 (genre 0), item 2
        >>> metric.compute()["unexpectedness@2"].item()                   # (0 + 1) / 2
        0.5
    """

    _relevance: bool = False

    def __init__(
        self,
        num_items: int,
        k: int,
        *,
        embeddings: Tensor | None = None,
        categories: Tensor | None = None,
        similarity: Tensor | None = None,
        ties: str = "average",
        validate_args: bool = True,
        chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
        **kwargs: Any,
    ) -> None:
        check_catalogue_kwargs(self, kwargs)
        super().__init__(**kwargs)
        self._setup(num_items, k, ties, validate_args, chunk_elements)
        config = self._setup_similarity(embeddings, categories, similarity)
        if self._relevance:
            self.add_state("serendipity", torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")
            self._kept_dtypes = (*self._kept_dtypes, "serendipity")
        self._set_config(config)

    def _history(self, history: Any, preds: Tensor) -> tuple[Tensor, Tensor]:
        """``(v, size)``: per row ``(sum_{h in H} x_h) M`` ``(N, D)`` and ``|H|`` ``(N,)``."""
        h = self._user_input(history, "history", preds, bool_only=True)
        f, n = self.features, preds.shape[0]
        width = f.shape[1] if f.is_floating_point() else self.classes
        total = torch.zeros(n, width, dtype=torch.float64, device=preds.device)
        if isinstance(h, SparseTarget):
            w = (h.counted_mask() & h.grades).to(torch.float64)
            if f.is_floating_point():
                total.index_add_(0, h.rows, f.index_select(0, h.items) * w.unsqueeze(-1))
            else:
                total.index_put_((h.rows, f.index_select(0, h.items)), w, accumulate=True)
        else:  # in row chunks: a float64 copy of at most chunk_elements entries at a time
            step = max(1, self.chunk_elements // self.num_items)
            for a in range(0, n, step):
                dense = h[a : a + step].to(torch.float64)
                if f.is_floating_point():
                    total[a : a + step] = dense @ f
                else:
                    total[a : a + step].index_add_(1, f, dense)
        return _times(_vector(total, f), self.table), _count(total, f)

    def _lists(
        self, preds: Tensor, history: Any, target: Any, exclude: Any, mask: Any = None, indexes: Any = None
    ) -> None:
        preds, exclude = self._preds(preds, exclude, mask, indexes)
        if preds.shape[0] == 0:
            return
        rel = None if target is None else self._user_input(target, "target", preds, bool_only=False)
        v, size = self._history(history, preds)
        view, fixed, group, kk, m, n = self._view(preds, exclude)
        share = torch.where(n > 0, m / n.clamp(min=1), 0.0)
        counted = (kk > 0) & (size > 0)
        safe_size = torch.where(size > 0, size, 1.0)
        safe_kk = torch.where(kk > 0, kk.to(torch.float64), 1.0)
        f = self.features

        def expected(doc: Any, doc_view: Tensor | None) -> Tensor:
            u, g = self._sums(preds, view, exclude, fixed, group, doc=doc, doc_view=doc_view)
            # sum over the list of doc_i * (1 - x_i . v / |H|), each tied item with probability m / n
            s = _count(u, f) - (_vector(u, f) * v).sum(-1) / safe_size
            s = s + share * (_count(g, f) - (_vector(g, f) * v).sum(-1) / safe_size)
            return s / safe_kk

        self._add(expected(None, None), counted)
        if rel is not None:
            at = rel.lookup(view.items) if isinstance(rel, SparseTarget) else rel.gather(1, view.items)
            zero = torch.zeros((), dtype=torch.float64, device=preds.device)
            at = torch.where(view.valid, at.to(torch.float64), zero)
            self.serendipity += torch.where(counted, expected(rel, at), zero).sum()

    def update(
        self,
        preds: Tensor,
        history: Tensor,
        exclude: Tensor | None = None,
        *,
        mask: Tensor | None = None,
        indexes: Any = None,
    ) -> None:
        """Add the top-``k`` lists of a batch: ``preds`` ``(N, num_items)``, ``history`` ``(N,
        num_items)`` bool (dense or sparse), ``exclude`` optional bool, ``mask`` optional bool (False =
        padding, never ranked); ``indexes`` (flat input) is a ``TypeError``."""
        self._lists(preds, history, None, exclude, mask, indexes)

    def compute(self) -> dict[str, Tensor]:
        """``{"unexpectedness@k": mean over the users with a history and a non-empty list}``."""
        return self._mean(f"unexpectedness@{self.k}", "no user with a history and a recommended item was seen")


class Serendipity(Unexpectedness):
    """Serendipity@k (Microsoft Recommenders' ``serendipity``): unexpectedness times relevance, per
    recommended item, averaged over the list, then over the users with a history.

    Per user ``u`` with history ``H`` and list ``R`` (``k'`` items): ``ser(u) = (1/k') sum_{i in R}
    rel(u, i) (1 - (1/|H|) sum_{h in H} sim(i, h))``, ``rel`` read from ``target`` (Recommenders'
    ``col_relevance``: 1 for an item the user turned out to like, 0 else; graded values multiply
    as they are). ``compute()`` returns ``{"serendipity@k", "unexpectedness@k"}`` (the latter is
    :class:`Unexpectedness`). Users without a history or a recommended item are left out; the
    similarity arguments, ties and ``exclude`` are :class:`IntraListDiversity`'s.

    ``update(preds, target, history, exclude=None)``: ``target`` ``(N, num_items)`` relevance (dense
    or sparse, real), ``history`` ``(N, num_items)`` bool (dense or sparse).

    Args:
        num_items: the catalogue size.
        k: the list length (cutoff).
        embeddings, categories, similarity: the item similarity (exactly one).
        ties: ``"average"`` (default) or ``"first"``.
        validate_args: check the scores and inputs; False: no host sync in ``update`` (see
            :class:`IntraListDiversity`).
        chunk_elements: bound on the ``rows x num_items`` of one chunk of the pass over tied rows.
        kwargs: torchmetrics' ``Metric`` options.

    Example:
        >>> import torch
        >>> from torch_rankeval.metrics import Serendipity
        >>> metric = Serendipity(num_items=4, k=2, categories=torch.tensor([0, 0, 1, 1]))
        >>> seen = torch.tensor([[True, False, False, False]])
        >>> liked = torch.tensor([[0, 1, 1, 0]])                      # items 1 and 2 turn out relevant
        >>> metric.update(torch.tensor([[0.0, 0.9, 0.8, 0.1]]), liked, seen)
        >>> {key: v.item() for key, v in metric.compute().items()}    # item 2: new genre and relevant
        {'serendipity@2': 0.5, 'unexpectedness@2': 0.5}
    """

    serendipity: Tensor
    _relevance: bool = True

    def update(  # type: ignore[override]
        self,
        preds: Tensor,
        target: Tensor,
        history: Tensor,
        exclude: Tensor | None = None,
        *,
        mask: Tensor | None = None,
        indexes: Any = None,
    ) -> None:
        """Add the top-``k`` lists of a batch with their relevance ``target`` and ``history`` (``mask``,
        ``indexes``: as :meth:`Unexpectedness.update`)."""
        self._lists(preds, history, target, exclude, mask, indexes)

    def compute(self) -> dict[str, Tensor]:
        """``{"serendipity@k", "unexpectedness@k"}``: means over the users with a history and a list."""
        unexpected = self._mean(f"unexpectedness@{self.k}", "no user with a history and a recommended item was seen")
        value = self.serendipity / self.users if bool(self.users > 0) else torch.tensor(math.nan)
        out = next(iter(unexpected.values()))
        return {f"serendipity@{self.k}": value.to(out.dtype), **unexpected}


def _below_rank(rank: Tensor, a: Tensor, b: Tensor, size: float) -> Tensor:
    """``sum_{r=a}^{b} max(rank - r, 0) / size`` (closed form; broadcast): RecTools' ``max(p(r) - pu, 0)``
    summed over the ranks ``a..b``, ``p(r) - pu = (rank - r) / n``."""
    top = torch.minimum(b, rank - 1)
    return (top - a + 1).clamp(min=0) * (rank - (a + top) / 2) / size


class PopularityRankSerendipity(_TopKListMetric):
    """RecTools' ``Serendipity@k``: relevant items recommended above their popularity rank.

    Per user with list ``R`` (``k'`` items, at ranks ``r = 1..k'``):
    ``ser(u) = (1/k') sum_r max(p(r) - pu(i_r), 0) rel(u, i_r)`` with ``p(r) = (n + 1 - r) / n``,
    ``pu(i) = (n + 1 - popularity_rank(i)) / n`` and ``n = num_items`` (RecTools' ``len(catalog)``);
    ``popularity_rank`` is the dense rank of the item's interaction count, the most popular count
    first (RecTools' ``_get_item_popularity_ranks``: items with equal counts share a rank); an item
    without interactions (popularity 0) is cold: ``pu = 0``. ``rel`` is read from ``target`` (1 for
    an item of the user's test interactions; graded values multiply as they are). ``compute()``
    returns the mean over the users with a non-empty list (RecTools averages over the users of its
    recommendations). Unlike :class:`Serendipity` (Recommenders', an item similarity), it needs no
    item features.

    ``popularity`` counts EVERY previous interaction (RecTools' ``value_counts()``:
    :func:`interaction_counts`). RecTools' left merge of the recommendations with the test
    interactions repeats a recommended item once per duplicate test interaction (each copy one more
    slot of the user's mean); ``target`` here holds one relevance per (user, item): deduplicate the
    test interactions (RecTools' ranking metrics do: ``merge_reco`` drops duplicates).

    Ties (``ties="average"``): a tied item takes each of its group's ranks with equal probability,
    so the value is the expectation over the orders of the tied items (exact: per popularity rank,
    the sum of ``max(p(r) - pu, 0)`` over the group's ranks in closed form).

    Args:
        num_items: the catalogue size ``n``.
        k: the list length (cutoff).
        popularity: ``(num_items,)`` interaction counts (finite, ``>= 0``).
        ties: ``"average"`` (default) or ``"first"``.
        validate_args: check the scores and inputs; False: no host sync in ``update``.
        chunk_elements: bound on the ``rows x num_items`` of one chunk of the pass over tied rows.
        kwargs: torchmetrics' ``Metric`` options.

    States: ``total`` and ``users``, float64, ``dist_reduce_fx="sum"``.

    Example:
        >>> import torch
        >>> from torch_rankeval.metrics import PopularityRankSerendipity
        >>> metric = PopularityRankSerendipity(num_items=4, k=2, popularity=torch.tensor([3.0, 2.0, 0.0, 0.0]))
        >>> liked = torch.tensor([[0, 1, 0, 0]])                 # item 1: popularity rank 2, pu = 3/4
        >>> metric.update(torch.tensor([[0.0, 0.9, 0.8, 0.0]]), liked)   # ranks: item 1, item 2
        >>> metric.compute()["serendipity@2"].item()             # (max(1 - 3/4, 0) * 1 + 0) / 2
        0.125
    """

    def __init__(
        self,
        num_items: int,
        k: int,
        popularity: Tensor,
        *,
        ties: str = "average",
        validate_args: bool = True,
        chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
        **kwargs: Any,
    ) -> None:
        check_catalogue_kwargs(self, kwargs)
        super().__init__(**kwargs)
        self._setup(num_items, k, ties, validate_args, chunk_elements)
        pop = _popularity(popularity, num_items)
        counts = torch.unique(pop[pop > 0])  # ascending: the most popular count last
        ranks = torch.cat([pop.new_tensor([num_items + 1.0]), torch.arange(1, counts.numel() + 1).to(pop)])
        # class 0: cold (rank n + 1: pu = 0); class c >= 1: the c-th most popular count
        classes = torch.where(pop > 0, counts.numel() - torch.searchsorted(counts, pop), 0)
        self.register_buffer("features", classes.long(), persistent=False)
        self.register_buffer("rank_values", ranks.to(torch.float64), persistent=False)
        self._kept_dtypes = (*self._kept_dtypes, "rank_values")
        self.classes = int(ranks.numel())
        self.key = f"serendipity@{k}"
        self._set_config({"num_items": num_items, "k": k, "ties": ties, "popularity": pop})

    @property
    def popularity_rank(self) -> Tensor:
        """``(num_items,)`` float64: each item's popularity rank (``num_items + 1`` for a cold item)."""
        return self.rank_values.index_select(0, self.features)

    def update(
        self,
        preds: Tensor,
        target: Tensor,
        exclude: Tensor | None = None,
        *,
        mask: Tensor | None = None,
        indexes: Any = None,
    ) -> None:
        """Add the top-``k`` lists of a batch: ``preds`` ``(N, num_items)``, ``target`` ``(N, num_items)``
        relevance (dense or sparse), ``exclude`` optional bool, ``mask`` optional bool (False = padding);
        ``indexes`` (flat input) is a ``TypeError``."""
        preds, exclude = self._preds(preds, exclude, mask, indexes)
        if preds.shape[0] == 0:
            return
        rel = self._user_input(target, "target", preds, bool_only=False)
        view, fixed, group, kk, m, n = self._view(preds, exclude)
        zero = torch.zeros((), dtype=torch.float64, device=preds.device)
        at = rel.lookup(view.items) if isinstance(rel, SparseTarget) else rel.gather(1, view.items)
        at = torch.where(view.valid, at.to(torch.float64), zero)
        size = float(self.num_items)
        rank = self.rank_values.index_select(0, self.features.index_select(0, view.items.reshape(-1)))
        rank = rank.view_as(at)
        if self.ties == "average":  # a tie group inside the list: its members share its ranks a..b
            a = view.group_start.to(torch.float64) + 1
            b = a + view.group_size.to(torch.float64) - 1
        else:
            a = b = torch.arange(1, view.k + 1, dtype=torch.float64, device=preds.device).expand_as(at)
        sure = torch.where(fixed, _below_rank(rank, a, b, size) / (b - a + 1) * at, zero).sum(-1)
        _, g = self._sums(preds, view, exclude, fixed, group, doc=rel, doc_view=at)  # (N, classes)
        # the group's m slots are ranks a..b; a member takes each of its n ranks with probability 1/n
        first = fixed.sum(-1, dtype=torch.float64).unsqueeze(-1) + 1
        tied = (g * _below_rank(self.rank_values, first, first + m.unsqueeze(-1) - 1, size)).sum(-1) / n.clamp(min=1)
        counted = kk > 0
        self._add((sure + torch.where(n > 0, tied, zero)) / kk.clamp(min=1).to(torch.float64), counted)

    def compute(self) -> dict[str, Tensor]:
        """``{"serendipity@k": mean over the users with a non-empty list}``."""
        return self._mean(self.key, "no user with a recommended item was seen")
