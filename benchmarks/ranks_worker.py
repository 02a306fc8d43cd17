"""One timed data-parallel training run on every rank, under `mpiexec -n N` (benchmarks/ranks.py starts it).

    python -m benchmarks.ranks_worker FRAMEWORK PRESET GLOBAL_BATCH STEPS BUCKET_MB   FRAMEWORK: minitensor | torch

One thread per rank: benchmarks/ranks.py sets the thread variables in the environment mpiexec passes on, and torch
is told too (torch.set_num_threads). Both frameworks train the same float32 model (dropout 0.1,
Adam, clipping 1.0) on the same fixed global batch, each rank its shard, the loss weighted N * n_rank / n_global:
minitensor through mt.nn.parallel.DistributedDataParallel (MPI), torch through torch's DDP (gloo). Each step is
timed between two barriers (the slowest rank's time); rank 0 prints `RANKS_RESULT <json>`: the step times, the
gradient bytes all-reduced per step, the time a blocking all-reduce of that many bytes takes alone, and (minitensor)
the time each step spent waiting for its all-reduces after the backward (what the overlap did not hide).
"""

from __future__ import annotations

import json
import socket
import sys
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI

import minitensor as mt
from minitensor.nn.parallel import DistributedDataParallel
from parity.loss import compute_shard_loss as torch_shard_loss
from parity.report import build_models, synthetic_batch
from transformer_np.config import get_preset
from transformer_np.parallel import compute_shard_loss, count_targets, shard_rows

COMM = MPI.COMM_WORLD
N, RANK = COMM.Get_size(), COMM.Get_rank()


def _median_allreduce_s(nbytes: int, reduce, reps: int = 10) -> float:
    """Median seconds of one blocking all-reduce of `nbytes` of float32 (reduce: the framework's)."""
    times = []
    for _ in range(reps):
        COMM.Barrier()
        t0 = time.perf_counter()
        reduce(nbytes // 4)
        times.append(COMM.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    return float(np.median(times))


def main() -> None:
    framework, preset, batch, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    bucket_mb = float(sys.argv[5])
    torch.set_num_threads(1)
    rows = shard_rows(batch, N, RANK)
    cfg = get_preset(preset).model.replace(dropout=0.1)
    p = get_preset(preset)
    src, tgt = synthetic_batch(np.random.default_rng(0), batch, p.src_len, p.tgt_len, cfg.src_vocab_size,
                               cfg.tgt_vocab_size)  # fmt: skip
    n_global, tokens = count_targets(tgt), int(np.count_nonzero(src) + count_targets(tgt))
    np_model, torch_model = build_models(cfg, "float32", "cpu", 0)
    if framework == "minitensor":
        del torch_model
        model = DistributedDataParallel(np_model, COMM, bucket_cap_mb=bucket_mb)
        opt = mt.optim.Adam(np_model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
        nbytes = model.communication_bytes()

        def step():
            opt.zero_grad()
            compute_shard_loss(model, src[rows], tgt[rows], n_global, N, 0.1)[0].backward()
            mt.nn.utils.clip_grad_norm_(np_model.parameters(), 1.0)
            opt.step()
            t = dict((name, t) for name, t in model.timeline)
            return t["all reduced"] - t["wait"] if "wait" in t else 0.0

        def reduce(n):
            COMM.Allreduce(MPI.IN_PLACE, np.ones(n, dtype=np.float32), op=MPI.SUM)

    else:
        del np_model
        port = None
        if RANK == 0:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        url = f"tcp://127.0.0.1:{COMM.bcast(port, root=0)}"
        dist.init_process_group("gloo", init_method=url, rank=RANK, world_size=N, timeout=timedelta(seconds=120))
        model = torch.nn.parallel.DistributedDataParallel(torch_model, bucket_cap_mb=bucket_mb)
        opt = torch.optim.Adam(torch_model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
        nbytes = sum(q.numel() * q.element_size() for q in torch_model.parameters())

        def step():
            opt.zero_grad(set_to_none=True)
            torch_shard_loss(model, src[rows], tgt[rows], n_global, N, 0.1)[0].backward()
            torch.nn.utils.clip_grad_norm_(torch_model.parameters(), 1.0)
            opt.step()
            return None  # torch's DDP does not expose its wait

        def reduce(n):
            dist.all_reduce(torch.ones(n, dtype=torch.float32))

    times, waits = [], []
    for i in range(steps + 2):  # two warm-up steps
        COMM.Barrier()
        t0 = time.perf_counter()
        wait = step()
        dt = COMM.allreduce(time.perf_counter() - t0, op=MPI.MAX)  # the step ends when its slowest rank does
        if i >= 2:
            times.append(dt)
            if wait is not None:
                waits.append(COMM.allreduce(wait, op=MPI.MAX))
    allreduce_s = _median_allreduce_s(nbytes, reduce) if N > 1 else 0.0
    if framework == "torch":
        dist.destroy_process_group()
    if RANK == 0:
        result = {
            "framework": framework, "ranks": N, "preset": preset, "global_batch": batch, "tokens": tokens,
            "step_s": times, "grad_bytes": int(nbytes), "allreduce_s": allreduce_s,
            "exposed_wait_s": waits or None, "bucket_mb": bucket_mb,
            "buckets": len(model.buckets) if framework == "minitensor" else None,
        }  # fmt: skip
        print("RANKS_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
