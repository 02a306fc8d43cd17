"""mt.utils.data against torch.utils.data: the same batches for the same orders (sequential samplers, collate over
arrays, numbers, tuples, dicts), the same lengths and splits, reproducible shuffles, the DistributedSampler's shards,
pad_sequence, and the same refusals (plus the arguments only a worker process could honour)."""

import importlib.util
import json
import os
from collections import namedtuple

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import minitensor as mt
import minitensor.utils.data as mud
from minitensor.nn.parallel import run_ranks
from minitensor.nn.utils.rnn import pad_sequence
from tests.support import ROOT, runs_ranks

Pair = namedtuple("Pair", "x y")


class Samples:
    """A map-style dataset of one sample structure per index (both libraries index it the same way)."""

    def __init__(self, make, n=7):
        self.make, self.n = make, n

    def __getitem__(self, i):
        return self.make(i)

    def __len__(self):
        return self.n


def as_numpy(batch):
    """A batch of either library as nested lists/dicts of NumPy arrays (types kept for non-tensor leaves)."""
    if isinstance(batch, (torch.Tensor, mt.Tensor)):
        arr = batch.detach().numpy() if isinstance(batch, torch.Tensor) else batch.numpy()
        return ("tensor", str(arr.dtype), arr.tolist())
    if isinstance(batch, dict):
        return {k: as_numpy(v) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return (type(batch).__name__, [as_numpy(v) for v in batch])
    if isinstance(batch, (list, tuple)):
        return (type(batch).__name__, [as_numpy(v) for v in batch])
    return batch


SAMPLES = {
    "array": lambda i: np.arange(6.0).reshape(2, 3) * i,
    "float32_array": lambda i: np.full((3,), i, dtype=np.float32),
    "int": lambda i: i,
    "float": lambda i: i / 3,
    "bool": lambda i: i % 2 == 0,
    "numpy_scalar": lambda i: np.float32(i) / 2,
    "str": lambda i: f"s{i}",
    "numpy_str": lambda i: np.str_(f"s{i}"),
    "tuple": lambda i: (np.arange(2) + i, i, f"w{i}"),
    "list": lambda i: [i, float(i)],
    "dict": lambda i: {"x": np.ones(2) * i, "label": i, "meta": {"id": i}},
    "namedtuple": lambda i: Pair(np.arange(3.0) + i, i),
}


@pytest.mark.parametrize("kind", sorted(SAMPLES))
@pytest.mark.parametrize("drop_last", [False, True])
def test_default_collate_batches_as_torch(kind, drop_last):
    data = Samples(SAMPLES[kind])
    ours = [as_numpy(b) for b in mud.DataLoader(data, batch_size=3, drop_last=drop_last)]
    ref = [as_numpy(b) for b in tud.DataLoader(data, batch_size=3, drop_last=drop_last)]
    assert ours == ref
    assert len(mud.DataLoader(data, batch_size=3, drop_last=drop_last)) == len(ours)


def test_tensor_dataset_and_collate_of_tensors():
    x, y = np.random.default_rng(0).standard_normal((10, 3)), np.arange(10)
    ours = list(mud.DataLoader(mud.TensorDataset(mt.tensor(x), mt.tensor(y)), batch_size=4))
    ref = list(tud.DataLoader(tud.TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=4))
    assert [as_numpy(b) for b in ours] == [as_numpy(b) for b in ref]
    with pytest.raises(ValueError, match="Size mismatch"):
        mud.TensorDataset(mt.zeros(3), mt.zeros(4))


def test_no_auto_batching_converts_each_sample():
    data = Samples(SAMPLES["tuple"], n=3)
    assert [as_numpy(b) for b in mud.DataLoader(data, batch_size=None)] == [
        as_numpy(b) for b in tud.DataLoader(data, batch_size=None)
    ]


def test_collate_fn_sampler_and_batch_sampler():
    data = Samples(lambda i: i, n=10)
    order = [3, 1, 4, 1, 5, 9, 2, 6]
    assert list(mud.DataLoader(data, batch_size=3, sampler=order, collate_fn=list)) == [[3, 1, 4], [1, 5, 9], [2, 6]]
    batches = [[0, 2], [7], [9, 8, 1]]
    ours = [b.tolist() for b in mud.DataLoader(data, batch_sampler=batches)]
    assert ours == [b.tolist() for b in tud.DataLoader(data, batch_sampler=batches)]
    seq = mud.SequentialSampler(data)
    assert list(mud.BatchSampler(seq, 4, False)) == list(tud.BatchSampler(tud.SequentialSampler(data), 4, False))
    assert list(mud.BatchSampler(seq, 4, True)) == list(tud.BatchSampler(tud.SequentialSampler(data), 4, True))
    assert len(mud.BatchSampler(seq, 4, True)) == 2 and len(mud.BatchSampler(seq, 4, False)) == 3


def test_shuffle_is_a_permutation_reproducible_under_manual_seed():
    data = Samples(lambda i: i, n=23)

    def epoch():
        return [b.tolist() for b in mud.DataLoader(data, batch_size=5, shuffle=True)]

    mt.manual_seed(3)
    first, second = epoch(), epoch()
    mt.manual_seed(3)
    assert epoch() == first  # the seed fixes the order
    assert first != second  # each epoch draws a new one
    assert sorted(sum(first, [])) == list(range(23)) and [len(b) for b in first] == [5, 5, 5, 5, 3]
    gen = np.random.default_rng(5)
    with_generator = [b.tolist() for b in mud.DataLoader(data, batch_size=5, shuffle=True, generator=gen)]
    assert sorted(sum(with_generator, [])) == list(range(23))


def test_random_sampler_replacement_and_num_samples():
    mt.manual_seed(0)
    drawn = list(mud.RandomSampler(range(4), num_samples=10))
    assert len(drawn) == 10 and sorted(drawn[:8]) == [0, 0, 1, 1, 2, 2, 3, 3]  # two whole permutations first
    assert len(list(mud.RandomSampler(range(4), replacement=True, num_samples=50))) == 50
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        mud.RandomSampler(range(4), num_samples=0)


@pytest.mark.parametrize("lengths", [[3, 7], [0.5, 0.5], [0.3, 0.3, 0.4], [0.33, 0.33, 0.34], [0.1, 0.9], [1.0]])
def test_random_split_lengths_as_torch(lengths):
    data = list(range(10))
    ours = mud.random_split(data, lengths)
    ref = tud.random_split(data, lengths)
    assert [len(s) for s in ours] == [len(s) for s in ref]
    assert sorted(i for s in ours for i in s) == data


def test_random_split_refusals_as_torch():
    for bad, match in (([3, 3], "Sum of input lengths"), ([1.5, -0.5], "Fraction at index 0")):
        with pytest.raises(ValueError, match=match):
            mud.random_split(list(range(10)), bad)
        with pytest.raises(ValueError, match=match):
            tud.random_split(list(range(10)), bad)


def test_subset_concat_and_iterable():
    data = list(range(10))
    assert list(mud.Subset(data, [4, 2, 8])) == [4, 2, 8]
    both = mud.ConcatDataset([Samples(lambda i: i, 3), Samples(lambda i: 10 + i, 2)])
    assert [both[i] for i in range(len(both))] == [0, 1, 2, 10, 11] and both[-1] == 11

    class Stream(mud.IterableDataset):
        def __iter__(self):
            return iter(range(7))

        def __len__(self):
            return 7

    assert [b.tolist() for b in mud.DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(mud.DataLoader(Stream(), batch_size=3, drop_last=True)) == 2
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        mud.DataLoader(Stream(), shuffle=True)


@pytest.mark.parametrize("n, replicas, drop_last", [(10, 3, False), (10, 3, True), (2, 5, False), (12, 4, True)])
def test_distributed_sampler_shards_as_torch(n, replicas, drop_last):
    data = list(range(n))
    for rank in range(replicas):
        ours = mud.DistributedSampler(data, replicas, rank, shuffle=False, drop_last=drop_last)
        ref = tud.DistributedSampler(data, replicas, rank, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(ref) and len(ours) == len(ref)
    shards = [list(mud.DistributedSampler(data, replicas, r, seed=7, drop_last=drop_last)) for r in range(replicas)]
    again = [list(mud.DistributedSampler(data, replicas, r, seed=7, drop_last=drop_last)) for r in range(replicas)]
    assert shards == again  # every rank draws the same permutation: the shards are disjoint parts of it
    if drop_last:
        assert len({i for s in shards for i in s}) == sum(map(len, shards))
    else:
        assert {i for s in shards for i in s} == set(data)
    with pytest.raises(ValueError, match="Invalid rank"):
        mud.DistributedSampler(data, replicas, replicas)


# each rank's world and shard of an 11-sample dataset, taken from MPI's world (no num_replicas, no rank), gathered
# on rank 0, which prints them on one line (two ranks printing at once can interleave their lines)
SHARD_OF_THIS_RANK = """
import json
from mpi4py import MPI
from minitensor.utils.data import DistributedSampler
s = DistributedSampler(list(range(11)), seed=3)
shards = MPI.COMM_WORLD.gather([s.rank, s.num_replicas, list(s)], root=0)
if shards is not None:
    print("SHARDS " + json.dumps(shards), flush=True)
"""


@runs_ranks
@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None, reason="needs the distributed extra (mpi4py)")
def test_distributed_sampler_takes_the_mpi_world():
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    done = run_ranks(2, ["-c", SHARD_OF_THIS_RANK], timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    (shards,) = [json.loads(line[7:]) for line in done.stdout.splitlines() if line.startswith("SHARDS ")]
    assert [(r, n) for r, n, _ in shards] == [(0, 2), (1, 2)]
    for rank, n, shard in shards:
        assert shard == list(mud.DistributedSampler(list(range(11)), n, rank, seed=3))


def test_distributed_sampler_set_epoch_changes_the_order():
    sampler = mud.DistributedSampler(list(range(50)), num_replicas=2, rank=0)
    first = list(sampler)
    sampler.set_epoch(1)
    assert list(sampler) != first
    sampler.set_epoch(0)
    assert list(sampler) == first


def test_num_workers_load_in_the_main_process():
    data = Samples(SAMPLES["dict"])
    ours = [as_numpy(b) for b in mud.DataLoader(data, batch_size=2, num_workers=4, prefetch_factor=2, pin_memory=True)]
    assert ours == [as_numpy(b) for b in tud.DataLoader(data, batch_size=2)]
    assert mud.get_worker_info() is None


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_workers=-1), "num_workers option should be non-negative"),
        (dict(prefetch_factor=2), "prefetch_factor option could only be specified"),
        (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
        (dict(sampler=[0, 1], shuffle=True), "sampler option is mutually exclusive with shuffle"),
        (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive"),
        (dict(batch_size=None, drop_last=True), "batch_size=None option disables auto-batching"),
    ],
)
def test_refusals_as_torch(kwargs, match):
    data = list(range(4))
    with pytest.raises(ValueError, match=match):
        mud.DataLoader(data, **kwargs)
    with pytest.raises(ValueError, match=match):
        tud.DataLoader(data, **kwargs)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(num_workers=2, persistent_workers=True), "persistent_workers=True"),
        (dict(num_workers=2, worker_init_fn=print), "worker_init_fn"),
        (dict(num_workers=2, multiprocessing_context="spawn"), "multiprocessing_context"),
        (dict(batch_size=0), "batch_size"),
        (dict(generator=42), "generator"),
    ],
)
def test_what_no_worker_process_can_honour_is_refused(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        mud.DataLoader(list(range(4)), **kwargs)


def test_collate_refuses_what_no_tensor_holds():
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        mud.default_collate([object(), object()])
    with pytest.raises(RuntimeError, match="equal size"):
        mud.default_collate([[1, 2], [3]])


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence_values_and_gradients_as_torch(batch_first, side):
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((n, 3)) for n in (4, 1, 3)]
    ours = [mt.tensor(a, requires_grad=True) for a in arrays]
    ref = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = pad_sequence(ours, batch_first=batch_first, padding_value=-2.5, padding_side=side)
    out_t = torch.nn.utils.rnn.pad_sequence(ref, batch_first=batch_first, padding_value=-2.5, padding_side=side)
    np.testing.assert_array_equal(out.detach().numpy(), out_t.detach().numpy())
    g = rng.standard_normal(out.shape)
    out.backward(mt.tensor(g))
    out_t.backward(torch.tensor(g))
    for a, b in zip(ours, ref):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
    ints = pad_sequence([mt.tensor([1, 2, 3]), mt.tensor([4])], padding_value=0)
    assert ints.dtype == mt.int64 and ints.tolist() == [[1, 4], [2, 0], [3, 0]]
    with pytest.raises(RuntimeError, match="empty list"):
        pad_sequence([])


def test_an_mt_generator_drives_the_random_orders_as_torchs_does():
    """torch programs pass generator=torch.Generator().manual_seed(s): the same seed, the same order here (not
    torch's numbers: the streams differ), and the global stream untouched."""
    data = list(range(20))
    state = mt.random.get_rng_state()
    orders = []
    for _ in range(2):
        g = mt.Generator().manual_seed(42)
        split = [list(s) for s in mud.random_split(data, [15, 5], generator=g)]
        loader = [b.tolist() for b in mud.DataLoader(data, batch_size=6, shuffle=True, generator=g)]
        sampler = list(mud.RandomSampler(data, generator=g))
        orders.append((split, loader, sampler))
    assert orders[0] == orders[1] and mt.random.get_rng_state() == state
    assert sorted(sum(orders[0][1], [])) == data and sorted(orders[0][2]) == data
    torch_split = tud.random_split(data, [15, 5], generator=torch.Generator().manual_seed(42))
    assert [len(s) for s in torch_split] == [len(s) for s in orders[0][0]]
