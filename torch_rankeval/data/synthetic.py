"""A seeded synthetic learning-to-rank data set, generated on the fly (no download).

The generative model, for a "world" fixed by ``world_seed`` (shared by train/validation/test splits)
and a split drawn with ``seed``:

1. **Teacher.** ``t(x) = (std(u.x) + std(v.tanh(W x)^2)) / sqrt(2)``, where ``std`` standardises
   over N(0, I) features and ``W`` ``(16, F)``, ``u`` ``(F,)``, ``v`` ``(16,)`` have N(0, 4/F),
   N(0, 1/F), N(0, 1/16) entries: a linear part any scorer learns, and a non-linear part of equal
   variance (even in ``x``, so no linear scorer can use it) that needs a hidden layer.
2. **Queries.** Query ``q`` has ``n_q ~ Uniform{min_docs..max_docs}`` documents and a difficulty
   shift ``delta_q ~ N(0, query_shift^2)`` (some queries have many relevant documents, some none).
3. **Documents.** Features ``x ~ N(0, I_F)``; latent relevance
   ``z = t(x) + delta_q + noise * eps``, ``eps ~ N(0, 1)``.
4. **Grades.** ``grade = #{j : z > tau_j}`` for thresholds ``tau_1 < ... < tau_4`` set at the
   quantiles of ``z`` (over the world's reference sample) so that grades 0..4 occur in the
   proportions ``grade_shares`` (default 50/25/15/7/3 %, close to MSLR-WEB10K's).

The best possible scorer is ``t`` itself; ``noise`` sets how far below nDCG 1 it stays. A random
ranker's nDCG is what the metrics give to constant scores (exact expectation over random orders
with ``ties="average"``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from torch_rankeval.data.dataset import QueryDataset

__all__ = ["synthetic_ltr"]

_HIDDEN = 16
_REFERENCE = 20_000


def _world(n_features: int, world_seed: int, query_shift: float, noise: float, grade_shares: Sequence[float]):  # noqa: ANN202
    g = torch.Generator().manual_seed(world_seed)
    w = torch.randn(_HIDDEN, n_features, generator=g, dtype=torch.float64) * (2.0 / n_features**0.5)
    u = torch.randn(n_features, generator=g, dtype=torch.float64) / n_features**0.5
    v = torch.randn(_HIDDEN, generator=g, dtype=torch.float64) / _HIDDEN**0.5

    x = torch.randn(_REFERENCE, n_features, generator=g, dtype=torch.float64)
    linear, curved = x @ u, torch.tanh(x @ w.T).square() @ v
    scales = (linear.mean(), linear.std(), curved.mean(), curved.std())

    def teacher(x: torch.Tensor) -> torch.Tensor:
        lin, cur = x @ u, torch.tanh(x @ w.T).square() @ v
        return ((lin - scales[0]) / scales[1] + (cur - scales[2]) / scales[3]) / 2**0.5

    z = teacher(x) + query_shift * torch.randn(_REFERENCE, generator=g, dtype=torch.float64)
    z = z + noise * torch.randn(_REFERENCE, generator=g, dtype=torch.float64)
    cumulative = torch.tensor(list(grade_shares), dtype=torch.float64).cumsum(0)[:-1]
    thresholds = torch.quantile(z, cumulative)
    return teacher, thresholds


def synthetic_ltr(
    n_queries: int,
    *,
    n_features: int = 32,
    min_docs: int = 10,
    max_docs: int = 40,
    noise: float = 0.5,
    query_shift: float = 0.5,
    grade_shares: Sequence[float] = (0.50, 0.25, 0.15, 0.07, 0.03),
    seed: int = 0,
    world_seed: int = 0,
) -> QueryDataset:
    """Draw ``n_queries`` queries of the synthetic LTR world (see the module docstring for the model).

    Args:
        n_queries: number of queries.
        n_features: features per document.
        min_docs, max_docs: each query has a uniform number of documents in ``[min_docs, max_docs]``.
        noise: standard deviation of the label noise (the teacher's score has variance 1).
        query_shift: standard deviation of the per-query difficulty shift.
        grade_shares: proportions of grades 0, 1, ... (sum 1; at least two grades).
        seed: seed of this split (use different seeds for train/validation/test).
        world_seed: seed of the teacher and the grade thresholds; the same for all splits.

    Returns:
        A :class:`~torch_rankeval.data.QueryDataset` with ``float32`` features and grades; query ids
        ``"<seed>-<i>"``. Deterministic given the arguments.

    Example:
        >>> from torch_rankeval.data import synthetic_ltr
        >>> data = synthetic_ltr(200, seed=1)
        >>> len(data), data.n_features, 10 <= data.list_lengths.min().item() <= data.list_lengths.max().item() <= 40
        (200, 32, True)
        >>> round((data.target == 0).float().mean().item(), 1)  # about half the documents are not relevant
        0.5
    """
    for name, value, lowest in (("n_queries", n_queries, 0), ("n_features", n_features, 1), ("min_docs", min_docs, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
            raise ValueError(f"{name} must be an int >= {lowest}, got {value!r}")
    if isinstance(max_docs, bool) or not isinstance(max_docs, int) or max_docs < min_docs:
        raise ValueError(f"max_docs must be an int >= min_docs={min_docs}, got {max_docs!r}")
    if not noise >= 0 or not query_shift >= 0:
        raise ValueError(f"noise and query_shift must be >= 0, got {noise!r} and {query_shift!r}")
    shares = [float(s) for s in grade_shares]
    if len(shares) < 2 or any(not s > 0 for s in shares) or abs(sum(shares) - 1) > 1e-6:
        raise ValueError(f"grade_shares must be at least two positive proportions summing to 1, got {grade_shares!r}")

    teacher, thresholds = _world(n_features, world_seed, query_shift, noise, shares)
    g = torch.Generator().manual_seed(10_007 * (seed + 1) + world_seed)
    lengths = torch.randint(min_docs, max_docs + 1, (n_queries,), generator=g)
    n_docs = int(lengths.sum())
    x = torch.randn(n_docs, n_features, generator=g, dtype=torch.float64)
    shift = torch.repeat_interleave(query_shift * torch.randn(n_queries, generator=g, dtype=torch.float64), lengths)
    z = teacher(x) + shift + noise * torch.randn(n_docs, generator=g, dtype=torch.float64)
    grades = torch.bucketize(z, thresholds).to(torch.float32)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    return QueryDataset(x.to(torch.float32), grades, offsets, [f"{seed}-{i}" for i in range(n_queries)])
