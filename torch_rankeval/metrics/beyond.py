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

from torch_rankeval.metrics._hooks import ConfiguredMetric
from torch_rankeval.metrics._options import check_catalogue_options, check_metric_options
from torch_rankeval.ranking.catalogue import catalogue_rows
from torch_rankeval.ranking.sparse import SparseTarget, is_sparse, sparse_target
from torch_rankeval.ranking.topk import DEFAULT_CHUNK_ELEMENTS, TopKView, boundary_sums, topk_view

__all__ = ["IntraListDiversity", "Novelty", "Serendipity", "Unexpectedness"]

#: The most distinct category sets a Jaccard similarity tabulates (a ``P x P`` float64 table).
MAX_CATEGORY_SETS = 4096


# ---------------------------------------------------------------------------------------- similarity
def _item_similarity(
    num_items: int, embeddings: Tensor | None, categories: Tensor | None, similarity: Tensor | None
) -> tuple[Tensor, Tensor | None, int, str]:
    """``(features, table, classes, kind)`` with ``sim(a, b) = x_a M x_b``:

    - cosine: ``features`` ``(L, d + 1)`` float64, the unit embeddings and a last column of ones
      (it counts items), ``table`` None (``M`` the identity), ``classes`` 0;
    - otherwise ``features`` ``(L,)`` int64, each item's class in ``[0, classes)`` (``x`` its
      one-hot vector, never built), and ``table`` the ``(classes, classes)`` similarity of the
      classes (None: the identity, for category labels)."""
    given = {name: x for name, x in (("embeddings", embeddings), ("categories", categories), ("similarity", similarity))
             if x is not None}  # fmt: skip
    if len(given) != 1:
        raise ValueError(
            "give exactly one item similarity: embeddings= (num_items, d) for cosine, categories= "
            "(num_items,) labels or (num_items, C) bool sets, or similarity= (num_items, num_items); "
            f"got {list(given) or 'none'}"
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
            f"similarity must be a (num_items, num_items) = ({num_items}, {num_items}) tensor, got {tuple(x.shape)}"
        )
    table = x.to(torch.float64)
    if not bool(torch.isfinite(table).all()) or not torch.equal(table, table.T):
        raise ValueError("similarity must be finite and symmetric (similarity[a, b] == similarity[b, a])")
    return torch.arange(num_items, device=x.device), table, num_items, "table"


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
        self, embeddings: Tensor | None, categories: Tensor | None, similarity: Tensor | None
    ) -> dict[str, Any]:
        """The item similarity of the pairwise metrics (exactly one of ``embeddings``, ``categories``,
        ``similarity``) as the ``features`` / ``table`` buffers; returns the configuration to set."""
        features, table, self.classes, self.similarity_kind = _item_similarity(
            self.num_items, embeddings, categories, similarity
        )
        self.register_buffer("features", features, persistent=False)
        self.register_buffer("table", table, persistent=False)
        self._kept_dtypes = (*self._kept_dtypes, "features", "table")
        return {
            "num_items": self.num_items, "k": self.k, "ties": self.ties, "kind": self.similarity_kind,
            "embeddings": embeddings, "categories": categories, "similarity": similarity,
        }  # fmt: skip

    def _preds(self, preds: Any, exclude: Any) -> tuple[Tensor, Any]:
        return catalogue_rows(preds, exclude, self.num_items, self.total.device, validate_args=self.validate_args)

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
      of a few thousand items (it is dense).

    **Ties at the cutoff** (``ties="average"``): the expected ILD over every order of the tied items
    (see :mod:`torch_rankeval.metrics.beyond`); pairs inside the tied group get their expected
    co-occurrence ``m (m - 1) / (n (n - 1))``. ``ties="first"``: input order. ``exclude``: ``(N,
    num_items)`` bool (dense or sparse), True = never recommended.

    Args:
        num_items: the catalogue size (the width of ``preds``).
        k: the list length (cutoff), ``2 <= k <= num_items``.
        embeddings, categories, similarity: the item similarity (exactly one).
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
    """

    key: str

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
        check_metric_options(self, kwargs)
        super().__init__(**kwargs)
        self._setup(num_items, k, ties, validate_args, chunk_elements)
        if k < 2:
            raise ValueError("k=1: a list of one item has no pair; intra-list diversity needs k >= 2")
        config = self._setup_similarity(embeddings, categories, similarity)
        self.key = f"diversity@{k}"
        self._set_config(config)

    def update(self, preds: Tensor, exclude: Tensor | None = None) -> None:
        """Add the top-``k`` lists of a batch: ``preds`` ``(N, num_items)`` scores (``(num_items,)`` for
        one user), ``exclude`` optional ``(N, num_items)`` bool, dense or sparse."""
        preds, exclude = self._preds(preds, exclude)
        if preds.shape[0] == 0:
            return
        view, fixed, group, kk, m, n = self._view(preds, exclude)
        u, g = self._sums(preds, view, exclude, fixed, group)
        f, table = self.features, self.table
        own_u, own_g = _own(u, f, table), _own(g, f, table)
        u, g = _vector(u, f), _vector(g, f)
        ff = ((_times(u, table) * u).sum(-1) - own_u) / 2
        fg = (_times(u, table) * g).sum(-1)
        gg = ((_times(g, table) * g).sum(-1) - own_g) / 2
        one = torch.ones((), dtype=torch.float64, device=preds.device)
        p1 = torch.where(n > 0, m / torch.maximum(n, one), 0.0)
        p2 = torch.where(n > 1, m * (m - 1) / torch.maximum(n * (n - 1), one), 0.0)
        expected = ff + p1 * fg + p2 * gg
        kk = kk.to(torch.float64)
        pairs = kk * (kk - 1) / 2
        counted = kk >= 2
        self._add(1 - expected / torch.where(counted, pairs, one), counted)

    def compute(self) -> dict[str, Tensor]:
        """``{"diversity@k": mean ILD over the users with at least two recommended items}``."""
        return self._mean(self.key, "no list with two or more items was seen")


# ---------------------------------------------------------------------------------------- novelty
class Novelty(_TopKListMetric):
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

    Ties (``ties="average"``): each tied item fills its expected share of the slots left (see
    :mod:`torch_rankeval.metrics.beyond`). ``exclude``: ``(N, num_items)`` bool, True = never
    recommended.

    Args:
        num_items: the catalogue size.
        k: the list length (cutoff).
        popularity: ``(num_items,)`` finite, ``>= 0``, with a positive sum.
        num_users: optional positive int: the surprisal variant ``p(i) = popularity_i / num_users``.
        ties: ``"average"`` (default) or ``"first"``.
        validate_args: check the scores; False: no host sync in ``update`` (see
            :class:`IntraListDiversity`).
        chunk_elements: bound on the ``rows x num_items`` of one chunk of the pass over tied rows.
        kwargs: torchmetrics' ``Metric`` options.

    States: ``total`` (self-information summed over slots) and ``users`` (the slots), float64.

    Example:
        >>> import torch
        >>> from torch_rankeval.metrics import Novelty
        >>> metric = Novelty(num_items=4, k=2, popularity=torch.tensor([4.0, 2.0, 1.0, 1.0]))
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.1, 0.0]]))    # p = 1/2, 1/4: 1 bit, 2 bits
        >>> metric.compute()["novelty@2"].item()
        1.5
    """

    key: str
    total: Tensor
    users: Tensor
    _kept_dtypes: tuple[str, ...] = ("total", "users", "features")

    def __init__(
        self,
        num_items: int,
        k: int,
        popularity: Tensor,
        *,
        num_users: int | None = None,
        ties: str = "average",
        validate_args: bool = True,
        chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
        **kwargs: Any,
    ) -> None:
        check_metric_options(self, kwargs)
        super().__init__(**kwargs)
        self._setup(num_items, k, ties, validate_args, chunk_elements)
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
        if num_users is None:
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
            p = pop / num_users
        info = torch.where(p > 0, -torch.log2(torch.where(p > 0, p, 1.0)), 0.0)
        self.register_buffer("features", info.unsqueeze(-1), persistent=False)  # (num_items, 1)
        self.classes = 0
        self.num_users = num_users
        self.key = f"novelty@{k}"
        self._set_config({"num_items": num_items, "k": k, "ties": ties, "popularity": pop, "num_users": num_users})

    @property
    def information(self) -> Tensor:
        """``(num_items,)`` float64: each item's self-information ``-log2 p(i)`` (0 where ``p(i) = 0``)."""
        return self.features[:, 0]

    def update(self, preds: Tensor, exclude: Tensor | None = None) -> None:
        """Add the top-``k`` lists of a batch: ``preds`` ``(N, num_items)``, ``exclude`` optional bool."""
        preds, exclude = self._preds(preds, exclude)
        if preds.shape[0] == 0:
            return
        view, fixed, group, kk, m, n = self._view(preds, exclude)
        u, g = self._sums(preds, view, exclude, fixed, group)
        share = torch.where(n > 0, m / n.clamp(min=1), 0.0)
        self.total += (u[:, 0] + share * g[:, 0]).sum()
        self.users += kk.sum(dtype=torch.float64)

    def compute(self) -> dict[str, Tensor]:
        """``{"novelty@k": mean self-information over every recommendation slot}``."""
        return self._mean(self.key, "no recommendation slot was filled")


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
        check_metric_options(self, kwargs)
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

    def _lists(self, preds: Tensor, history: Any, target: Any, exclude: Any) -> None:
        preds, exclude = self._preds(preds, exclude)
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

    def update(self, preds: Tensor, history: Tensor, exclude: Tensor | None = None) -> None:
        """Add the top-``k`` lists of a batch: ``preds`` ``(N, num_items)``, ``history`` ``(N,
        num_items)`` bool (dense or sparse), ``exclude`` optional bool."""
        self._lists(preds, history, None, exclude)

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
        self, preds: Tensor, target: Tensor, history: Tensor, exclude: Tensor | None = None
    ) -> None:
        """Add the top-``k`` lists of a batch with their relevance ``target`` and ``history``."""
        self._lists(preds, history, target, exclude)

    def compute(self) -> dict[str, Tensor]:
        """``{"serendipity@k", "unexpectedness@k"}``: means over the users with a history and a list."""
        unexpected = self._mean(f"unexpectedness@{self.k}", "no user with a history and a recommended item was seen")
        value = self.serendipity / self.users if bool(self.users > 0) else torch.tensor(math.nan)
        out = next(iter(unexpected.values()))
        return {f"serendipity@{self.k}": value.to(out.dtype), **unexpected}
