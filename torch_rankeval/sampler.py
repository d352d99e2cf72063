"""Exact distributed evaluation: shard a data set over processes without repeating or dropping samples.

``torch.utils.data.DistributedSampler`` gives every process the same number of samples: with
``drop_last=False`` (the default, and what Lightning injects) it pads the shards by **repeating**
samples from the start of the data set, with ``drop_last=True`` it **drops** the tail. Both are fine
for training and wrong for evaluation: with 5 queries on 2 processes one query is scored twice and
the mean is not the mean over the data set. :class:`UnpaddedDistributedSampler` gives every sample
to exactly one process (shards differ in size by at most one), which our metrics allow because
their states are sums: each process adds what it saw, one all-reduce adds the processes.

:func:`sharding_problem` inspects a ``DataLoader`` (or sampler) and says, in words, whether it would
double-count, drop or duplicate samples on ``world_size`` processes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sized
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, RandomSampler, Sampler, SequentialSampler

__all__ = ["UnpaddedDistributedSampler", "ShardingProblem", "sharding_problem"]


class ShardingProblem(str):
    """What :func:`sharding_problem` found, in words; ``fatal`` when Lightning would hang on it."""

    fatal: bool = False

    def __new__(cls, text: str, fatal: bool = False) -> ShardingProblem:
        self = super().__new__(cls, text)
        self.fatal = fatal
        return self


def _world() -> tuple[int, int]:
    """(world size, rank) of the default process group, or (1, 0) outside ``torch.distributed``."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


class UnpaddedDistributedSampler(DistributedSampler[int]):
    """Every sample on exactly one process, no padding: for exact evaluation under ``torch.distributed``.

    Process ``rank`` of ``num_replicas`` gets samples ``rank, rank + num_replicas, ...`` of the data
    set (after a seeded shuffle when ``shuffle=True``); shard sizes differ by at most one, so the
    processes may run different numbers of batches. That is safe for evaluation with our metrics
    (sum states, one all-reduce at ``compute``) but not for training, where DDP synchronises every
    step: keep the padding sampler there.

    It subclasses ``DistributedSampler`` so that Lightning keeps it as it is (Lightning only injects
    its own padding sampler into loaders whose sampler is not a ``DistributedSampler``): put it in
    ``val_dataloader``/``test_dataloader`` and leave ``Trainer(use_distributed_sampler=True)``, which
    still shards the training loader.

    Args:
        dataset: a sized map-style data set (one item per query, for ranking).
        num_replicas: number of processes. Default: the world size of the default process group,
            read when the sampler is iterated, so a loader built before the process group exists
            (for instance handed to ``Trainer.fit`` before ``ddp_spawn`` starts the workers) still
            shards correctly; 1 outside ``torch.distributed``.
        rank: this process's rank, default read the same way (0 outside ``torch.distributed``).
        shuffle: shuffle (the same permutation on every process, seeded by ``seed + epoch``) before
            sharding. Evaluation needs no shuffle; default False.
        seed: seed of the shuffle.

    A process whose shard is empty (fewer samples than processes) iterates nothing; see
    :func:`sharding_problem` for why Lightning cannot run such a process.

    Example:
        >>> from torch_rankeval.sampler import UnpaddedDistributedSampler
        >>> data = list(range(5))
        >>> [list(UnpaddedDistributedSampler(data, num_replicas=2, rank=r)) for r in (0, 1)]
        [[0, 2, 4], [1, 3]]
        >>> from torch.utils.data import DistributedSampler      # pads by repeating sample 0
        >>> [list(DistributedSampler(data, num_replicas=2, rank=r, shuffle=False)) for r in (0, 1)]
        [[0, 2, 4], [1, 3, 0]]
    """

    seed: int
    epoch: int

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = False,
        seed: int = 0,
    ) -> None:
        # DistributedSampler.__init__ is not called on purpose: it fixes num_replicas and rank at
        # construction, and raises outside torch.distributed.
        if not isinstance(dataset, Sized):
            raise TypeError(f"dataset must be a sized map-style data set (with __len__), got {type(dataset).__name__}")
        if num_replicas is not None and (
            isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas < 1
        ):
            raise ValueError(f"num_replicas must be a positive int or None, got {num_replicas!r}")
        if rank is not None:
            if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
                raise ValueError(f"rank must be a non-negative int or None, got {rank!r}")
            if num_replicas is not None and rank >= num_replicas:
                raise ValueError(f"rank must be in [0, num_replicas - 1] = [0, {num_replicas - 1}], got {rank}")
        if not isinstance(shuffle, bool):
            raise TypeError(f"shuffle must be a bool, got {type(shuffle).__name__}")
        self.dataset = dataset
        self._num_replicas = num_replicas
        self._rank = rank
        self.shuffle = shuffle
        self.seed = int(seed)
        self.epoch = 0
        self.drop_last = False

    @property
    def num_replicas(self) -> int:  # type: ignore[override]
        """Number of processes: the one given, else the current world size."""
        return self._num_replicas if self._num_replicas is not None else _world()[0]

    @property
    def rank(self) -> int:  # type: ignore[override]
        """This process's rank: the one given, else the current rank."""
        rank = self._rank if self._rank is not None else _world()[1]
        if rank >= self.num_replicas:
            raise ValueError(f"rank {rank} is not below num_replicas={self.num_replicas}; pass both or neither")
        return rank

    @property
    def total_size(self) -> int:  # type: ignore[override]
        """Samples over all processes: the data set's length (nothing repeated, nothing dropped)."""
        return len(self.dataset)

    @property
    def num_samples(self) -> int:  # type: ignore[override]
        """Samples of this process: ``ceil((len(dataset) - rank) / num_replicas)``."""
        return len(range(self.rank, self.total_size, self.num_replicas))

    def __iter__(self) -> Iterator[int]:
        n = self.total_size
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed + self.epoch)
            indices = torch.randperm(n, generator=g).tolist()
        else:
            indices = range(n)
        return iter(indices[self.rank : n : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch that seeds the shuffle (called by Lightning each epoch)."""
        self.epoch = int(epoch)


def _samplers(loader: Any) -> list[Any]:
    """The index samplers a loader draws from (its ``sampler``, and a batch sampler's ``sampler``)."""
    if not isinstance(loader, DataLoader):
        return [loader]
    inner = getattr(loader.batch_sampler, "sampler", None)
    outer = loader.sampler if loader.sampler is not inner else None
    return [s for s in (inner, outer) if s is not None]


def sharding_problem(loader: DataLoader[Any] | Sampler[Any], world_size: int) -> ShardingProblem | None:
    """Why evaluating ``loader`` on ``world_size`` processes would not score each sample exactly once.

    Returns None when every sample goes to exactly one process (an :class:`UnpaddedDistributedSampler`,
    Lightning's ``UnrepeatedDistributedSampler``, a ``DistributedSampler`` over a data set whose
    length divides evenly, a single process), or when it cannot tell (an ``IterableDataset``, a
    custom sampler: those must shard themselves). Otherwise a :class:`ShardingProblem`, a sentence
    naming the problem:

    - a ``DistributedSampler`` that pads (repeats ``total_size - len(dataset)`` samples, which are
      then scored twice) or drops samples (``drop_last=True``);
    - a ``DistributedSampler`` built for a different number of processes;
    - a sequential or random sampler: every process evaluates the whole data set;
    - a process whose shard is empty: Lightning skips the evaluation loop on a process without
      batches, so the other processes would wait for it forever in the metric's all-reduce
      (``fatal=True``).

    Example:
        >>> from torch.utils.data import DataLoader, DistributedSampler
        >>> from torch_rankeval.sampler import UnpaddedDistributedSampler, sharding_problem
        >>> data = list(range(5))
        >>> print(sharding_problem(DataLoader(data, sampler=DistributedSampler(data, 2, 0)), 2))
        DistributedSampler pads 5 samples to 6 over 2 processes: 1 sample is evaluated twice, so the metrics are not the mean over the data set
        >>> sharding_problem(DataLoader(data, sampler=UnpaddedDistributedSampler(data, 2, 0)), 2) is None
        True
    """
    if world_size <= 1:
        return None
    if isinstance(loader, DataLoader) and isinstance(loader.dataset, IterableDataset):
        return None
    for sampler in _samplers(loader):
        if isinstance(sampler, DistributedSampler):
            name = type(sampler).__name__
            dataset = getattr(sampler, "dataset", None)
            if not isinstance(dataset, Sized):
                return None
            n, total, replicas = len(dataset), int(sampler.total_size), int(sampler.num_replicas)
            if replicas != world_size:
                return ShardingProblem(f"{name} shards over {replicas} process(es) but {world_size} are running")
            if total > n:
                extra = total - n
                return ShardingProblem(
                    f"{name} pads {n} samples to {total} over {replicas} processes: {extra} sample"
                    f"{' is' if extra == 1 else 's are'} evaluated twice, so the metrics are not the mean over the data set"
                )
            if total < n:
                return ShardingProblem(
                    f"{name} (drop_last=True) drops {n - total} of {n} samples over {replicas} processes, so the metrics "
                    "leave them out"
                )
            if n < replicas:
                return ShardingProblem(
                    f"{name} shards {n} sample(s) over {replicas} processes: process(es) {n}..{replicas - 1} get none, "
                    "Lightning skips their evaluation loop, and the others would wait for them forever in the metric sync",
                    fatal=True,
                )
            return None
        if isinstance(sampler, (SequentialSampler, RandomSampler)):
            n = len(sampler.data_source) if isinstance(sampler.data_source, Sized) else math.nan
            return ShardingProblem(
                f"the loader's {type(sampler).__name__} is not distributed: each of the {world_size} processes evaluates all "
                f"{n} samples (every query is counted {world_size} times, per-query results are duplicated, and documents "
                "of flat input are merged with their copies)"
            )
    return None
