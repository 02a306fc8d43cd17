"""What tests/minitensor/devices/test_fake_device_training.py runs on every rank under `mpiexec -n 2`:
DistributedDataParallel with its parameters on the fake CUDA device (minitensor/fakecuda.py).

A two-layer MLP (float64, each rank from ANOTHER seed: the broadcast at wrap time goes through the host), three
backwards with rank-dependent random upstream gradients (no loss needed: `out.backward(g)`), small buckets so that
there are several. Rank 0 prints one line `DDP_FAKE <json>`: the gradients' relative error against the mean of the
two ranks' local gradients (gathered over MPI, computed without DDP), the host syncs each backward cost and its bucket
count, and whether every gradient and parameter stayed on the device.

    python tests/support/ddp_fake_device_worker.py   (under mpiexec)
"""

from __future__ import annotations

import json

import numpy as np
from mpi4py import MPI

import minitensor as mt
from minitensor import fakecuda, nn
from minitensor.nn.parallel import DistributedDataParallel
from minitensor.testing import error_stats

COMM = MPI.COMM_WORLD
RANK, N = COMM.Get_rank(), COMM.Get_size()


def to_fake(module: nn.Module) -> nn.Module:
    """The module's parameters moved onto the fake device in place (until Module.to('cuda') is on this branch)."""
    for p in module.parameters():
        p.data = mt.Tensor.wrap(fakecuda.asarray(p._data))
    return module


def mlp(seed: int) -> nn.Module:
    mt.manual_seed(seed)
    return to_fake(nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 3)).double())


def local_grads(model: nn.Module, x: np.ndarray, g: np.ndarray) -> list:
    for p in model.parameters():
        p.grad = None
    model(mt.Tensor.wrap(fakecuda.asarray(x))).backward(mt.Tensor.wrap(fakecuda.asarray(g)))
    return [fakecuda.asnumpy(p.grad._data) for p in model.parameters()]


def main() -> None:
    ref = mlp(1)  # what rank 0 starts from: every rank's replica after the broadcast
    ddp = DistributedDataParallel(mlp(1 + RANK), bucket_cap_mb=256 / 2**20)  # two buckets, a layer each
    start_equal = all(
        np.array_equal(fakecuda.asnumpy(a._data), fakecuda.asnumpy(b._data))
        for a, b in zip(ddp.module.parameters(), ref.parameters())
    )
    rng = np.random.default_rng(10 + RANK)
    worst, syncs, buckets, on_device = 0.0, [], [], True
    for _ in range(3):
        x, g = rng.standard_normal((4, 5)), rng.standard_normal((4, 3))
        expected = [sum(gs) / N for gs in zip(*COMM.allgather(local_grads(ref, x, g)))]
        for p in ddp.parameters():
            p.grad = None
        out = ddp(mt.Tensor.wrap(fakecuda.asarray(x)))
        buckets.append(len(ddp.buckets))  # (rebuilt after the first backward, in the gradients' arrival order)
        with fakecuda.count_syncs() as c:
            out.backward(mt.Tensor.wrap(fakecuda.asarray(g)))
        syncs.append(c.count)
        on_device &= all(type(p.grad._data) is fakecuda.FakeArray for p in ddp.parameters())
        for p, e in zip(ddp.parameters(), expected):
            worst = max(worst, error_stats(fakecuda.asnumpy(p.grad._data), e)[1])
    if RANK == 0:
        result = {"start_equal": start_equal, "grad_max_rel": worst, "syncs": syncs, "buckets": buckets}
        print("DDP_FAKE " + json.dumps({**result, "on_device": bool(on_device), "world_size": N}), flush=True)


if __name__ == "__main__":
    main()
