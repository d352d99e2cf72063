"""UnpaddedDistributedSampler gives every sample to exactly one process; sharding_problem names what
torch's and Lightning's samplers would repeat or drop."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, RandomSampler

from torch_rankeval import sampler as sampler_module
from torch_rankeval.sampler import UnpaddedDistributedSampler, sharding_problem


@pytest.mark.parametrize("n", [0, 1, 2, 5, 9, 16])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("shuffle", [False, True])
def test_every_sample_on_exactly_one_process(n, world, shuffle):
    data = list(range(n))
    shards = [
        list(UnpaddedDistributedSampler(data, num_replicas=world, rank=r, shuffle=shuffle, seed=3))
        for r in range(world)
    ]
    assert sorted(i for shard in shards for i in shard) == data
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1
    assert sizes == [len(UnpaddedDistributedSampler(data, num_replicas=world, rank=r)) for r in range(world)]


@pytest.mark.parametrize("world", [2, 3])
def test_same_shards_as_torch_when_nothing_needs_padding(world):
    data = list(range(4 * world))
    for shuffle in (False, True):
        for r in range(world):
            theirs = DistributedSampler(data, num_replicas=world, rank=r, shuffle=shuffle, seed=7)
            ours = UnpaddedDistributedSampler(data, num_replicas=world, rank=r, shuffle=shuffle, seed=7)
            assert list(ours) == list(theirs)
            theirs.set_epoch(2)
            ours.set_epoch(2)
            assert list(ours) == list(theirs)


def test_shuffle_is_the_same_permutation_on_every_process_and_changes_with_the_epoch():
    data = list(range(10))
    a = [UnpaddedDistributedSampler(data, num_replicas=2, rank=r, shuffle=True) for r in (0, 1)]
    first = [list(s) for s in a]
    for s in a:
        s.set_epoch(1)
    second = [list(s) for s in a]
    assert sorted(first[0] + first[1]) == sorted(second[0] + second[1]) == data
    assert first != second


def test_world_size_and_rank_are_read_when_iterated(monkeypatch):
    """A loader built before the process group exists shards correctly once it does."""
    data = list(range(7))
    s = UnpaddedDistributedSampler(data)
    assert (s.num_replicas, s.rank, list(s)) == (1, 0, data)  # outside torch.distributed
    monkeypatch.setattr(sampler_module, "_world", lambda: (3, 2))
    assert (s.num_replicas, s.rank, list(s), len(s)) == (3, 2, [2, 5], 2)
    assert isinstance(s, DistributedSampler)  # so that Lightning leaves it in place


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"num_replicas": 0}, ValueError, "num_replicas must be a positive int"),
        ({"num_replicas": 2, "rank": 2}, ValueError, r"rank must be in \[0, num_replicas - 1\]"),
        ({"rank": -1}, ValueError, "rank must be a non-negative int"),
        ({"shuffle": 1}, TypeError, "shuffle must be a bool"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        UnpaddedDistributedSampler(list(range(3)), **kwargs)


def test_unsized_dataset_is_refused():
    with pytest.raises(TypeError, match="sized map-style data set"):
        UnpaddedDistributedSampler(iter(range(3)))


def test_sharding_problem_names_each_inexact_setup():
    data = list(range(5))

    def dl(sampler):  # noqa: ANN001, ANN202
        return DataLoader(data, sampler=sampler)

    padded = sharding_problem(dl(DistributedSampler(data, num_replicas=2, rank=0)), 2)
    assert padded.startswith("DistributedSampler pads 5 samples to 6 over 2 processes: 1 sample is evaluated twice")
    assert not padded.fatal
    dropped = sharding_problem(dl(DistributedSampler(data, num_replicas=2, rank=0, drop_last=True)), 2)
    assert dropped.startswith("DistributedSampler (drop_last=True) drops 1 of 5 samples")
    three = sharding_problem(dl(DistributedSampler(data, num_replicas=3, rank=0)), 2)
    assert three == "DistributedSampler shards over 3 process(es) but 2 are running"
    everyone = sharding_problem(DataLoader(data), 2)
    assert "SequentialSampler is not distributed: each of the 2 processes evaluates all 5 samples" in everyone
    assert "RandomSampler is not distributed" in sharding_problem(RandomSampler(data), 2)
    empty = sharding_problem(dl(UnpaddedDistributedSampler(data, num_replicas=8, rank=0)), 8)
    assert empty.fatal and "process(es) 5..7 get none" in empty

    assert sharding_problem(dl(UnpaddedDistributedSampler(data, num_replicas=2, rank=1)), 2) is None
    even = list(range(6))
    assert sharding_problem(DataLoader(even, sampler=DistributedSampler(even, num_replicas=2, rank=0)), 2) is None
    assert sharding_problem(DataLoader(data), 1) is None  # one process: nothing to shard

    class Stream(IterableDataset):
        def __iter__(self):  # noqa: ANN204
            return iter(range(3))

    assert sharding_problem(DataLoader(Stream()), 2) is None  # cannot tell: it must shard itself


def test_sharding_problem_knows_lightnings_samplers():
    pytest.importorskip("lightning")
    from lightning.fabric.utilities.distributed import DistributedSamplerWrapper
    from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler

    data = list(range(5))
    assert (
        sharding_problem(DataLoader(data, sampler=UnrepeatedDistributedSampler(data, num_replicas=2, rank=0)), 2)
        is None
    )
    wrapped = DistributedSamplerWrapper(torch.utils.data.SequentialSampler(data), num_replicas=2, rank=0, shuffle=False)
    assert sharding_problem(DataLoader(data, sampler=wrapped), 2).startswith(
        "DistributedSamplerWrapper pads 5 samples to 6"
    )
