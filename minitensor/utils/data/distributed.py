"""DistributedSampler, as torch.utils.data.distributed: each rank of a data-parallel run its own shard of indices.

The shards of one epoch partition one order of the indices (padded by repeating its start, or cut with drop_last,
so that every rank has num_samples of them). With shuffle=True every rank draws the same permutation from a
generator of its own seeded with seed + epoch (call set_epoch each epoch for a new order), as torch does; the
permutation is NumPy's, not torch's numbers. num_replicas and rank default to the size of MPI's world and this
process's rank in it (mt.nn.parallel's world); given both, no MPI is needed.
"""

from __future__ import annotations

import math

import numpy as np

from ...nn.parallel.launch import require_mpi
from .sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """Indices rank, rank + num_replicas, ... of the epoch's (padded) order."""

    def __init__(
        self,
        dataset,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ):
        if num_replicas is None or rank is None:
            world = require_mpi().COMM_WORLD
            num_replicas = world.Get_size() if num_replicas is None else num_replicas
            rank = world.Get_rank() if rank is None else rank
        if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be a positive int, got {num_replicas!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.epoch, self.shuffle, self.seed, self.drop_last = 0, shuffle, seed, drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:  # cut the tail so that every rank gets as many samples
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            indices = np.random.default_rng(self.seed + self.epoch).permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order the next iteration takes (with shuffle=True, each epoch's differs)."""
        self.epoch = epoch
