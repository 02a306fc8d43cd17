"""Samplers, as torch.utils.data.sampler: what order a DataLoader visits a dataset's indices in, and in what batches.

Random orders draw from minitensor's generator (mt.manual_seed makes them reproducible) or from the one passed as
`generator=`, an mt.Generator (torch's spelling) or a NumPy Generator; see `rng_of`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sized

import numpy as np

from ...random import Generator
from ...random import generator as _global_generator

__all__ = ["BatchSampler", "RandomSampler", "Sampler", "SequentialSampler", "SubsetRandomSampler", "rng_of"]


def rng_of(generator, who: str) -> np.random.Generator:
    """The generator a random order draws from: minitensor's own (generator=None), an mt.Generator's stream, or a
    NumPy Generator given."""
    if generator is None or isinstance(generator, Generator):
        return _global_generator(who, generator)
    if isinstance(generator, np.random.Generator):
        return generator
    raise TypeError(
        f"{who}: generator must be None, a minitensor.Generator or a numpy.random.Generator, "
        f"got {type(generator).__name__}"
    )


def check_count(who: str, name: str, value, allow_zero: bool = False) -> int:
    """value as an int > 0 (>= 0 with allow_zero), or a ValueError naming it (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < (0 if allow_zero else 1):
        bound = "a non-negative" if allow_zero else "a positive"
        raise ValueError(f"{who}: {name} should be {bound} integer value, but got {name}={value!r}")
    return int(value)


class Sampler:
    """Base class: an iterable of dataset indices (or of batches of them, for a batch sampler)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self) -> Iterator:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source: Sized):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of the indices (replacement=False), repeated whole for num_samples > len, as torch; or
    num_samples indices drawn uniformly with replacement. Each iteration draws a new order."""

    def __init__(self, data_source: Sized, replacement: bool = False, num_samples: int | None = None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement!r}")
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = num_samples
        check_count("RandomSampler", "num_samples", self.num_samples)
        rng_of(generator, "RandomSampler")  # a wrong generator is refused here, not at the first iteration

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, rng = len(self.data_source), rng_of(self.generator, "RandomSampler")
        if self.replacement:
            yield from (int(i) for i in rng.integers(0, n, size=self.num_samples))
            return
        for _ in range(self.num_samples // n):
            yield from (int(i) for i in rng.permutation(n))
        yield from (int(i) for i in rng.permutation(n)[: self.num_samples % n])

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a random order drawn anew at each iteration."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator
        rng_of(generator, "SubsetRandomSampler")

    def __iter__(self):
        for i in rng_of(self.generator, "SubsetRandomSampler").permutation(len(self.indices)):
            yield self.indices[int(i)]

    def __len__(self):
        return len(self.indices)


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of batch_size; the last, shorter one is dropped if drop_last."""

    def __init__(self, sampler: Iterable, batch_size: int, drop_last: bool):
        check_count("BatchSampler", "batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, int(batch_size), drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
