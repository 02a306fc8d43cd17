"""DataLoader, as torch.utils.data.DataLoader: a dataset, a sampler and a collate function, iterated in batches.

    for x, y in DataLoader(TensorDataset(X, Y), batch_size=32, shuffle=True, drop_last=True): ...

The arguments mean what torch's mean, and are checked as torch checks them (the same errors). Deviation from
PyTorch, flagged: every batch is loaded in the main process. num_workers > 0 is accepted (programs written for
torch pass it) and gives the same batches in the same order as num_workers=0, as torch's loader does; what only a
worker process could honour is refused rather than ignored: persistent_workers=True, worker_init_fn and
multiprocessing_context. pin_memory, timeout and prefetch_factor (with num_workers > 0) are accepted: they change
when and where a batch is made, not what it holds. get_worker_info() is None, as in torch's main process.
"""

from __future__ import annotations

from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler, check_count, rng_of

__all__ = ["DataLoader", "get_worker_info"]


def get_worker_info():
    """None: the loading runs in the main process (torch returns None there too)."""
    return None


class DataLoader:
    """Iterates `dataset` in batches (see the module docstring for what num_workers does here)."""

    def __init__(
        self,
        dataset,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler=None,
        batch_sampler=None,
        num_workers: int = 0,
        collate_fn=None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator=None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ):
        _check_workers(
            num_workers, timeout, prefetch_factor, persistent_workers, worker_init_fn, multiprocessing_context
        )
        self.dataset, self.num_workers, self.generator = dataset, num_workers, generator
        self.pin_memory, self.timeout, self.prefetch_factor = pin_memory, timeout, prefetch_factor
        self.persistent_workers, self.pin_memory_device, self.in_order = persistent_workers, pin_memory_device, in_order
        if generator is not None:
            rng_of(generator, "DataLoader")
        iterable = isinstance(dataset, IterableDataset)
        if iterable:  # the dataset gives the order: nothing may choose one (torch's checks)
            for name, value in (("shuffle", shuffle), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(
                        f"DataLoader with IterableDataset: expected unspecified {name} option, but got {name}={value}"
                    )
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
                )
            batch_size, drop_last = None, False
        elif batch_size is None:
            if drop_last:
                raise ValueError(
                    "batch_size=None option disables auto-batching and is mutually exclusive with drop_last"
                )
        else:
            batch_size = check_count("DataLoader", "batch_size", batch_size)
        if sampler is None and not iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last = batch_size, drop_last
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self._iterable = iterable
        self.collate_fn = (
            collate_fn
            if collate_fn is not None
            else (default_collate if self._auto_collation or (iterable and batch_size is not None) else default_convert)
        )

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    def __iter__(self):
        if self._iterable:
            return self._iterate_stream()
        if self._auto_collation:
            return (self.collate_fn([self.dataset[i] for i in batch]) for batch in self.batch_sampler)
        return (self.collate_fn(self.dataset[i]) for i in self.sampler)

    def _iterate_stream(self):
        """An IterableDataset in its own order: batches of batch_size (the last shorter unless drop_last)."""
        if self.batch_size is None:
            yield from (self.collate_fn(sample) for sample in self.dataset)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if self._iterable:  # torch's estimate, from the dataset's length
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler) if self._auto_collation else len(self.sampler)


def _check_workers(num_workers, timeout, prefetch_factor, persistent_workers, worker_init_fn, context) -> None:
    """torch's checks of the worker arguments, and the refusals of what only a worker process could do."""
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise ValueError(
            "num_workers option should be non-negative; use num_workers=0 to disable multiprocessing "
            f"(got num_workers={num_workers!r})"
        )
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError(
            "prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 to enable "
            "multiprocessing, otherwise set prefetch_factor to None."
        )
    if persistent_workers:
        if num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        raise ValueError(
            f"DataLoader: persistent_workers=True is not supported: minitensor loads every batch in the main "
            f"process (num_workers={num_workers} is accepted, but there are no worker processes to keep alive)"
        )
    if worker_init_fn is not None:
        raise ValueError(
            "DataLoader: worker_init_fn is not supported: minitensor loads every batch in the main process, so there "
            "is no worker process to initialise"
        )
    if context is not None:
        raise ValueError(
            f"DataLoader: multiprocessing_context={context!r} is not supported: minitensor loads every batch in the "
            "main process"
        )
