"""parity's distributed mode: minitensor's DistributedDataParallel against torch's DDP (gloo), rank by rank.

    mpiexec -n 2 python -m parity ddp [--steps 3] [--batch-size 8] [--seed 0]     (or: python -m parity ddp --nproc 2)

Every rank holds both sides: a transformer_np model wrapped in mt.nn.parallel.DistributedDataParallel (MPI through
mpi4py) and its parity/model.py twin wrapped in torch.nn.parallel.DistributedDataParallel (torch.distributed with
the gloo backend on CPU, rendezvous over TCP on this machine). Each rank builds its weights from its own seed, so
both wrappers' broadcast from rank 0 is exercised. For each step, on every rank's shard of one global batch
(transformer_np/parallel.py: rows r*B/N.., the loss `shard_loss` weighted N * n_rank / n_global on both sides):
the shard's logits, the global loss, every averaged gradient, then every parameter after global-norm clipping and
an Adam step with the warmup schedule (parity/sides.py), in float64. Rank 0 prints the worst error over the ranks.

Key-projection biases have an identically zero gradient (parity/results.py: structurally_zero_grad): both sides
compute round-off there, which no relative measure compares, and Adam turns it into steps of lr size; those rows
are judged 'zero' (their gradients) and left out of the parameters' comparison, as the report does.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

from minitensor.nn.parallel import DistributedDataParallel, require_mpi
from minitensor.serialization import atomic_write
from minitensor.testing import PARITY_RTOL, error_stats
from transformer_np.config import TrainConfig, get_preset
from transformer_np.parallel import compute_shard_loss as np_shard_loss
from transformer_np.parallel import count_targets, shard_rows

from .hooks import to_numpy
from .loss import compute_shard_loss as torch_shard_loss
from .report import build_models, synthetic_batch
from .results import structurally_zero_grad
from .sides import NpSide, TorchSide

DTYPE = "float64"


def _rendezvous(comm) -> str:
    """A free TCP port on this machine, chosen by rank 0 and shared over MPI: torch.distributed's init address."""
    port = None
    if comm.Get_rank() == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    return f"tcp://127.0.0.1:{comm.bcast(port, root=0)}"


def _worst(ours: dict, theirs: dict) -> tuple[float, str]:
    """(largest relative error, its name) over the arrays named in both dicts."""
    errs = {k: float(error_stats(ours[k], theirs[k])[0]) for k in ours}
    name = max(errs, key=errs.get)
    return errs[name], name


def run_ddp_parity(steps: int = 3, batch_size: int = 8, seed: int = 0, config: str = "copy-reverse", comm=None):
    """Run both DDPs on this rank for `steps` steps; returns rank 0's result dict (None on the other ranks)."""
    comm = require_mpi().COMM_WORLD if comm is None else comm
    N, rank = comm.Get_size(), comm.Get_rank()
    shard_rows(batch_size, N, rank)  # a global batch the ranks cannot share is refused before any work
    dist.init_process_group("gloo", init_method=_rendezvous(comm), rank=rank, world_size=N, timeout=timedelta(60))
    try:
        return _run(comm, steps, batch_size, seed, config)
    finally:
        dist.destroy_process_group()


def _run(comm, steps, batch_size, seed, config):
    N, rank = comm.Get_size(), comm.Get_rank()
    cfg = get_preset(config).model.replace(dropout=0.0)
    train = TrainConfig(warmup_steps=4)  # the recipe's Adam, clipping and warmup schedule, warm quickly
    np_model, torch_model = build_models(cfg, DTYPE, "cpu", seed + 1000 * rank)  # each rank its own weights
    np_ddp = DistributedDataParallel(np_model, comm)
    torch_ddp = torch.nn.parallel.DistributedDataParallel(torch_model)
    npside, ptside = NpSide(np_model, cfg, train), TorchSide(torch_model, cfg, train)
    rng = np.random.default_rng(seed)
    rows_per_step, start = [], {k: p.detach().numpy().copy() for k, p in np_model.named_parameters()}
    same_start = _worst({k: v for k, v in start.items()}, _torch_params(torch_model))[0]
    for step in range(1, steps + 1):
        src, tgt = synthetic_batch(rng, batch_size, 12, 12, cfg.src_vocab_size, cfg.tgt_vocab_size)
        rows, n_global = shard_rows(batch_size, N, rank), count_targets(tgt)
        npside.zero_grad()
        ptside.zero_grad()
        np_loss, np_logits, _ = np_shard_loss(np_ddp, src[rows], tgt[rows], n_global, N, train.label_smoothing)
        pt_loss, pt_logits, _ = torch_shard_loss(torch_ddp, src[rows], tgt[rows], n_global, N, train.label_smoothing)
        np_loss.backward()
        pt_loss.backward()
        np_grads = {k: p.grad.numpy() for k, p in np_model.named_parameters()}
        pt_grads = {k: to_numpy(p.grad) for k, p in torch_model.named_parameters()}
        zero = [k for k in np_grads if structurally_zero_grad(k)]
        row = {
            "step": step,
            "tokens_per_rank": comm.allgather(count_targets(tgt[rows])),
            "logits": _worst({"logits": np_logits.detach().numpy()}, {"logits": to_numpy(pt_logits)}),
            "loss": _worst(
                {"loss": np.array(comm.allreduce(np_loss.item()) / N)},
                {"loss": np.array(comm.allreduce(float(pt_loss.detach())) / N)},
            ),  # fmt: skip
            "grads": _worst({k: np_grads[k] for k in np_grads if k not in zero}, pt_grads),
            "zero_grads_max_abs": max(
                float(np.abs(np.concatenate([np_grads[k].ravel(), pt_grads[k].ravel()])).max()) for k in zero
            ),  # fmt: skip
        }
        npside.step()
        ptside.step()
        kept = {k: p.detach().numpy() for k, p in np_model.named_parameters() if not structurally_zero_grad(k)}
        row["params"] = _worst(kept, _torch_params(torch_model))
        row["grads_same_on_every_rank"] = _same_on_every_rank(comm, [np_grads[k] for k in sorted(np_grads)])
        rows_per_step.append(_worst_over_ranks(comm, row))
    result = {"world_size": N, "dtype": DTYPE, "config": config, "batch_size": batch_size, "seed": seed,
              "rtol": PARITY_RTOL[DTYPE], "start_broadcast_max_rel": same_start, "steps": rows_per_step}  # fmt: skip
    return result if rank == 0 else None


def _torch_params(model) -> dict:
    return {k: to_numpy(p.detach()) for k, p in model.named_parameters()}


def _same_on_every_rank(comm, arrays: list) -> bool:
    theirs = comm.allgather([a.tobytes() for a in arrays])
    return all(t == theirs[0] for t in theirs)


def _worst_over_ranks(comm, row: dict) -> dict:
    """The row with each (error, name) pair replaced by the worst over all ranks."""
    rows = comm.gather(row, root=0)
    if rows is None:
        return row
    out = dict(row)
    for key in ("logits", "loss", "grads", "params"):
        err, name = max((r[key] for r in rows), key=lambda e: e[0])
        out[key] = {"max_rel": err, "worst": name}
    out["zero_grads_max_abs"] = max(r["zero_grads_max_abs"] for r in rows)
    out["grads_same_on_every_rank"] = all(r["grads_same_on_every_rank"] for r in rows)
    return out


def passed(result: dict) -> bool:
    rtol = result["rtol"]
    ok = result["start_broadcast_max_rel"] <= rtol
    for row in result["steps"]:
        ok &= all(row[k]["max_rel"] <= rtol for k in ("logits", "loss", "grads", "params"))
        ok &= row["grads_same_on_every_rank"]
    return bool(ok)


def render(result: dict) -> str:
    lines = [
        f"parity ddp: minitensor DistributedDataParallel (MPI) vs torch DDP (gloo), {result['world_size']} ranks, "
        f"{result['dtype']}, preset {result['config']}, global batch {result['batch_size']}, rtol {result['rtol']:.0e}",
        f"weights after both broadcasts from rank 0: max rel {result['start_broadcast_max_rel']:.2e}",
        "step  tokens/rank      logits     loss       grads      params     key-bias grads (exact 0): max |g|",
    ]
    for r in result["steps"]:
        cells = "  ".join(f"{r[k]['max_rel']:.2e}" for k in ("logits", "loss", "grads", "params"))
        lines.append(f"{r['step']:>4}  {str(r['tokens_per_rank']):<15} {cells}   {r['zero_grads_max_abs']:.1e}")
    lines.append("PASS" if passed(result) else "FAIL: an error above rtol, or ranks holding different gradients")
    return "\n".join(lines)


def write(result: dict, out: str) -> str:
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"ddp_{result['world_size']}ranks.json")
    with atomic_write(path) as f:
        json.dump(result, f, indent=1)
    return path
