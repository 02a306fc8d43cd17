"""What tests/minitensor/nn/test_distributed.py runs on every rank under `mpiexec -n 2`: DistributedDataParallel against
one process.

Each scenario builds a small float64 Transformer (every rank from ANOTHER seed, so the broadcast at wrap time is
needed), runs data-parallel on its shard of one global batch with uneven non-PAD token counts, and compares with one
process doing the same work on the whole batch (rank 0's seed). Rank 0 prints one line `DDP_RESULTS <json>` with the
measured figures; the test file asserts on them (a worker that dies prints nothing, and the test fails).

    python tests/support/ddp_worker.py [--planted-bug]   (under mpiexec)

--planted-bug: each rank takes the plain mean over its own tokens (no N * n_rank / n_global weighting); the
equality figures must then exceed the tolerance, which the test checks.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from mpi4py import MPI

import minitensor as mt
from minitensor.nn.parallel import DistributedDataParallel
from minitensor.testing import error_stats
from transformer_np.loss import compute_loss
from transformer_np.model import Transformer
from transformer_np.parallel import compute_shard_loss, count_targets, shard_rows

COMM = MPI.COMM_WORLD
RANK, N = COMM.Get_rank(), COMM.Get_size()
PLANTED = "--planted-bug" in sys.argv


def model(seed: int, dropout: float = 0.0) -> Transformer:
    mt.manual_seed(seed)
    return Transformer(11, 11, 16, 2, 1, 1, 32, dropout, 32).double()


def batch(tgt_lengths) -> tuple[np.ndarray, np.ndarray]:
    """A global batch: src (B, 7), tgt (B, 8) right-padded with PAD=0; tgt row i holds tgt_lengths[i] tokens."""
    rng = np.random.default_rng(7)
    B = len(tgt_lengths)
    src = rng.integers(3, 11, size=(B, 7))
    src[1, 5:] = 0
    tgt = rng.integers(3, 11, size=(B, 8))
    tgt[:, 0] = 1  # <bos>
    for i, n in enumerate(tgt_lengths):
        tgt[i, n:] = 0
    return src, tgt


def local_loss(m, src, tgt, n_global: int):
    """This rank's loss on its shard: the weighted sum (the rule), or with --planted-bug the shard's plain mean."""
    if PLANTED:
        loss, _, _ = compute_loss(m, src, tgt)
        return loss
    return compute_shard_loss(m, src, tgt, n_global, N)[0]


def grads(m) -> list:
    return [p.grad.numpy().copy() for p in m.parameters()]


def max_rel(ours: list, ref: list) -> float:
    return max(float(error_stats(a, b)[0]) for a, b in zip(ours, ref))


def same_on_every_rank(arrays: list) -> bool:
    theirs = COMM.allgather([a.tobytes() for a in arrays])
    return all(t == theirs[0] for t in theirs)


def scenario_equal(tgt_lengths, steps: int = 3) -> dict:
    """Gradients after one backward, then parameters after `steps` Adam steps with global-norm clipping."""
    src, tgt = batch(tgt_lengths)
    rows = shard_rows(len(src), N, RANK)
    n_global = count_targets(tgt)
    ddp = DistributedDataParallel(model(100 + RANK), bucket_cap_mb=0.001)
    ref = model(100)
    opt, opt_ref = mt.optim.Adam(ddp.parameters(), lr=1e-2), mt.optim.Adam(ref.parameters(), lr=1e-2)
    out = {"tokens_per_rank": COMM.allgather(count_targets(tgt[rows])), "n_global": n_global}
    for step in range(steps):
        opt.zero_grad()
        loss = local_loss(ddp, src[rows], tgt[rows], n_global)
        loss.backward()
        opt_ref.zero_grad()
        compute_loss(ref, src, tgt)[0].backward()
        if step == 0:
            out["grad_max_rel"] = max_rel(grads(ddp), grads(ref))
            out["grads_same_on_every_rank"] = same_on_every_rank(grads(ddp))
            out["loss_finite"] = bool(np.isfinite(loss.item()))
        out.setdefault("clip_norms", []).append(float(mt.nn.utils.clip_grad_norm_(ddp.parameters(), 0.5)))
        mt.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
        opt.step()
        opt_ref.step()
    params, params_ref = [p.detach().numpy() for p in ddp.parameters()], [p.detach().numpy() for p in ref.parameters()]
    out["param_max_rel"] = max_rel(params, params_ref)
    out["params_same_on_every_rank"] = same_on_every_rank(params)
    return out


def scenario_overlap() -> dict:
    """One bucket per parameter against one bucket for all: the gradients must be bitwise equal; and the first
    buckets must start while the backward still has the encoder to go (a hook on the encoder's output records it)."""
    src, tgt = batch([8, 3, 6, 2])
    rows, n_global = shard_rows(len(src), N, RANK), count_targets(tgt)
    results = {}
    for name, cap in (("per_parameter", 1e-9), ("one_bucket", 1e3)):
        ddp = DistributedDataParallel(model(100), bucket_cap_mb=cap)
        seen = []

        def on_encoder_output(mod, args, out, ddp=ddp, seen=seen) -> None:  # its gradient arrives mid-backward
            out.register_hook(lambda g: seen.append(ddp.next_bucket))

        ddp.module.encoder.register_forward_hook(on_encoder_output)
        compute_shard_loss(ddp, src[rows], tgt[rows], n_global, N)[0].backward()
        # compared by identity: `==` between two Parameters is elementwise (a tensor, whose truth value is an error)
        in_buckets, arrived = [p for b in ddp.buckets for p in b.params], [ddp.params[i] for i in ddp.arrival]
        rebuilt = ddp.rebuilt and len(in_buckets) == len(arrived) and all(a is b for a, b in zip(in_buckets, arrived))
        results[name] = (grads(ddp), len(ddp.buckets), seen[0], rebuilt)
    (g1, n1, early1, rebuilt), (g2, n2, _, _) = results["per_parameter"], results["one_bucket"]
    return {
        "bitwise_equal": all(np.array_equal(a, b) for a, b in zip(g1, g2)),
        "buckets": [n1, n2],
        "buckets_started_before_encoder_backward": early1,
        "rebuilt_in_arrival_order": rebuilt,
    }


def scenario_no_sync() -> dict:
    """Two micro-batches, the first under no_sync: equal to one process on both micro-batches together."""
    src, tgt = batch([8, 3, 6, 2, 5, 7, 2, 4])
    micro = [(src[:4], tgt[:4]), (src[4:], tgt[4:])]
    n_global = count_targets(tgt)  # the mean runs over every token of both micro-batches
    ddp = DistributedDataParallel(model(100 + RANK))
    with ddp.no_sync():
        s, t = micro[0]
        rows = shard_rows(len(s), N, RANK)
        local_loss(ddp, s[rows], t[rows], n_global).backward()
    unsynced_differ = not same_on_every_rank(grads(ddp))
    s, t = micro[1]
    rows = shard_rows(len(s), N, RANK)
    local_loss(ddp, s[rows], t[rows], n_global).backward()
    ref = model(100)
    compute_loss(ref, src, tgt)[0].backward()
    return {"grad_max_rel": max_rel(grads(ddp), grads(ref)), "unsynced_grads_differ": unsynced_differ}


def scenario_all_pad() -> dict:
    """Rank 1's shard has PAD-only targets: its loss is 0 (not NaN) and the result is still the full batch's."""
    out = scenario_equal([8, 3, 1, 1], steps=1)
    return {k: out[k] for k in ("grad_max_rel", "loss_finite", "tokens_per_rank")}


def scenario_refusals() -> dict:
    errors = {}
    for name, fn in (
        ("indivisible", lambda: shard_rows(5, 2, RANK)),
        ("too_few_rows", lambda: shard_rows(1, 2, RANK)),
    ):
        try:
            fn()
        except ValueError as e:
            errors[name] = str(e)
    try:  # a rank built from another config
        DistributedDataParallel(Transformer(11, 11, 16 if RANK == 0 else 8, 2, 1, 1, 32, 0.0, 32))
    except RuntimeError as e:
        errors["different_models"] = str(e)
    return errors


def main() -> None:
    if PLANTED:
        results = {"uneven": scenario_equal([8, 3, 6, 2]), "no_sync": scenario_no_sync()}
    else:
        results = {
            "uneven": scenario_equal([8, 3, 6, 2]),
            "even": scenario_equal([8, 8, 8, 8]),
            "all_pad": scenario_all_pad(),
            "overlap": scenario_overlap(),
            "no_sync": scenario_no_sync(),
            "refusals": scenario_refusals(),
        }
    if RANK == 0:
        print("DDP_RESULTS " + json.dumps({"world_size": N, "planted": PLANTED, **results}), flush=True)


if __name__ == "__main__":
    main()
