"""Learning-to-rank data as lists: documents grouped by query, padded per batch.

:class:`QueryDataset` keeps the documents of all queries in flat tensors (features ``(D, F)``,
grades ``(D,)``) with query boundaries ``offsets`` ``(Q + 1,)``, so memory is what the documents
need, however uneven the list lengths. Item ``i`` is the ``i``-th query; :func:`collate_queries`
pads a batch of queries into the ``(B, L)`` layout the metrics and the callback take.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset

__all__ = ["QueryDataset", "collate_queries"]


class QueryDataset(Dataset[dict[str, Tensor]]):
    """Documents grouped by query; item ``i`` is query ``i``.

    Args:
        features: ``(D, F)`` float features of all documents, query after query.
        target: ``(D,)`` relevance grades.
        offsets: ``(Q + 1,)`` int64, non-decreasing, ``offsets[0] == 0`` and ``offsets[-1] == D``:
            the documents of query ``i`` are rows ``offsets[i]:offsets[i + 1]``.
        qids: the ``Q`` query ids as written in the source (e.g. LETOR ``qid:`` values); default
            ``"0"``, ``"1"``, ...

    ``dataset[i]`` is ``{"features": (n_i, F), "target": (n_i,), "indexes": i}``, where ``indexes`` is
    the query's position in the data set: a global query id, the same on every process, as the
    metrics want.

    Example:
        >>> import torch
        >>> from torch_rankeval.data import QueryDataset, collate_queries
        >>> data = QueryDataset(torch.arange(10.0).reshape(5, 2), torch.tensor([2.0, 0, 1, 0, 0]), torch.tensor([0, 3, 5]))
        >>> len(data), data.n_features, data.list_lengths.tolist()
        (2, 2, [3, 2])
        >>> batch = collate_queries([data[0], data[1]])
        >>> batch["target"], batch["mask"]
        (tensor([[2., 0., 1.],
                [0., 0., 0.]]), tensor([[ True,  True,  True],
                [ True,  True, False]]))
    """

    qids: list[str]

    def __init__(self, features: Tensor, target: Tensor, offsets: Tensor, qids: Sequence[str] | None = None) -> None:
        for name, t in (("features", features), ("target", target), ("offsets", offsets)):
            if not isinstance(t, Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if features.ndim != 2 or not features.is_floating_point():
            raise ValueError(
                f"features must be a (documents, features) float tensor, got {features.dtype} of shape {tuple(features.shape)}"
            )
        if target.shape != features.shape[:1]:
            raise ValueError(
                f"target must hold one grade per document: shape ({features.shape[0]},), got {tuple(target.shape)}"
            )
        if offsets.ndim != 1 or offsets.dtype != torch.int64 or offsets.numel() == 0:
            raise ValueError("offsets must be a non-empty 1-D int64 tensor of query boundaries (Q + 1 entries)")
        if offsets[0].item() != 0 or offsets[-1].item() != features.shape[0] or bool((offsets.diff() < 0).any()):
            raise ValueError(
                f"offsets must start at 0, end at the number of documents ({features.shape[0]}) and never decrease, "
                f"got {offsets[:3].tolist()}...{offsets[-2:].tolist()}"
            )
        n_queries = offsets.numel() - 1
        if qids is None:
            qids = [str(i) for i in range(n_queries)]
        elif len(qids) != n_queries:
            raise ValueError(f"qids must have one id per query ({n_queries}), got {len(qids)}")
        self.features = features
        self.target = target
        self.offsets = offsets
        self.qids = list(qids)

    def __len__(self) -> int:
        return self.offsets.numel() - 1

    def __getitem__(self, i: int) -> dict[str, Tensor]:
        if not -len(self) <= i < len(self):
            raise IndexError(f"query index {i} out of range for {len(self)} queries")
        i = i % len(self)
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        return {"features": self.features[a:b], "target": self.target[a:b], "indexes": torch.tensor(i)}

    @property
    def n_features(self) -> int:
        """Number of features per document."""
        return self.features.shape[1]

    @property
    def n_docs(self) -> int:
        """Number of documents over all queries."""
        return self.features.shape[0]

    @property
    def list_lengths(self) -> Tensor:
        """``(Q,)`` number of documents of each query."""
        return self.offsets.diff()

    def padded(self) -> dict[str, Tensor]:
        """All queries as one padded batch (the output of :func:`collate_queries` over the data set).

        Example:
            >>> import torch
            >>> from torch_rankeval.data import QueryDataset
            >>> data = QueryDataset(torch.zeros(3, 1), torch.tensor([1.0, 0, 2]), torch.tensor([0, 1, 3]))
            >>> data.padded()["target"]
            tensor([[1., 0.],
                    [0., 2.]])
        """
        lengths = self.list_lengths
        width = int(lengths.max()) if len(self) else 0
        query = torch.repeat_interleave(torch.arange(len(self)), lengths)
        position = torch.arange(self.n_docs) - self.offsets[:-1][query]
        features = self.features.new_zeros(len(self), width, self.n_features)
        target = self.target.new_zeros(len(self), width)
        features[query, position] = self.features
        target[query, position] = self.target
        mask = torch.arange(width) < lengths[:, None]
        return {"features": features, "target": target, "mask": mask, "indexes": torch.arange(len(self))}

    def map_features(self, fn: Callable[[Tensor], Tensor]) -> QueryDataset:
        """A data set with ``fn(features)`` as features (same queries, grades and ids), e.g. to normalise.

        Example:
            >>> import torch
            >>> from torch_rankeval.data import QueryDataset
            >>> data = QueryDataset(torch.tensor([[1.0], [3.0]]), torch.tensor([1.0, 0.0]), torch.tensor([0, 2]))
            >>> data.map_features(lambda x: x - 2).features.flatten().tolist()
            [-1.0, 1.0]
        """
        features = fn(self.features)
        if not isinstance(features, Tensor) or features.shape[0] != self.n_docs:
            raise ValueError("fn must return a tensor with one row per document")
        return QueryDataset(features, self.target, self.offsets, self.qids)


def collate_queries(items: Sequence[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Pad a list of queries (items of :class:`QueryDataset`) into one batch.

    Returns ``{"features": (B, L, F), "target": (B, L), "mask": (B, L) bool, "indexes": (B,)}`` with
    ``L`` the longest list of the batch; padding has features 0, grade 0 and ``mask`` False. These
    are the default input names of :class:`~torch_rankeval.lightning.RankingMetricsCallback`.

    Example:
        >>> import torch
        >>> from torch_rankeval.data import collate_queries
        >>> item = lambda n, i: {"features": torch.ones(n, 4), "target": torch.ones(n), "indexes": torch.tensor(i)}
        >>> batch = collate_queries([item(2, 7), item(3, 9)])
        >>> batch["features"].shape, batch["mask"].sum(1).tolist(), batch["indexes"].tolist()
        (torch.Size([2, 3, 4]), [2, 3], [7, 9])
    """
    if len(items) == 0:
        raise ValueError("collate_queries needs at least one query")
    lengths = torch.tensor([item["target"].shape[0] for item in items])
    mask = torch.arange(int(lengths.max())) < lengths[:, None]
    return {
        "features": pad_sequence([item["features"] for item in items], batch_first=True),
        "target": pad_sequence([item["target"] for item in items], batch_first=True),
        "mask": mask,
        "indexes": torch.stack([torch.as_tensor(item["indexes"]).reshape(()) for item in items]).long(),
    }
