"""mt.utils.data, as torch.utils.data: datasets, samplers, the default collate and the DataLoader.

    dataset.py      Dataset, IterableDataset, TensorDataset, Subset, ConcatDataset, random_split
    sampler.py      Sampler, SequentialSampler, RandomSampler, SubsetRandomSampler, BatchSampler
    distributed.py  DistributedSampler: one shard of the indices per rank of mt.nn.parallel's MPI world
    collate.py      default_collate (a batch of samples -> a sample of batches) and default_convert
    dataloader.py   DataLoader, get_worker_info

Deviation from PyTorch, flagged: the DataLoader loads every batch in the main process; num_workers > 0 is accepted
and changes nothing but the work's schedule (dataloader.py says what is refused). Shuffles draw from minitensor's
generator (mt.manual_seed makes them reproducible), so the orders are not torch's numbers for the same seed.
"""

from .collate import default_collate, default_convert
from .dataloader import DataLoader, get_worker_info
from .dataset import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from .distributed import DistributedSampler
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler

__all__ = [
    "BatchSampler",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DistributedSampler",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "random_split",
]
