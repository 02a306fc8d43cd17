# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 10. Data parallelism: N ranks that equal one process
#
# **What you will learn**
# - why averaging the ranks' gradients gives exactly the full-batch gradient, and what each rank's loss must be
#   for that to hold (the token weighting N * n_rank / n_global);
# - the weighting pitfall: averaging the shards' plain means is silently wrong, and an equality test catches it;
# - why a shard of PAD-only targets must contribute 0, not NaN;
# - buckets and overlap: how `mt.nn.parallel.DistributedDataParallel` starts all-reducing while the backward
#   still runs, and the timeline of one step on two real MPI ranks.
#
# The chapter beside it: docs/distributed.md.

# %%
import importlib.util
import json
import os
import sys
import tempfile

import matplotlib.pyplot as plt
import numpy as np
from nbutil import show

import minitensor as mt
from minitensor.testing import PARITY_RTOL, assert_close, error_stats
from transformer_np.loss import compute_loss, shard_loss
from transformer_np.model import Transformer
from transformer_np.parallel import compute_shard_loss, count_targets, shard_rows

mt.set_default_dtype(mt.float64)  # float64: agreement to round-off is visible


def tiny_model(seed=0):
    mt.manual_seed(seed)
    return Transformer(11, 11, 16, 2, 1, 1, 32, 0.0, 32)


def grads(model):
    return {n: p.grad.numpy().copy() for n, p in model.named_parameters()}


# A global batch of 4 sentences; targets of different lengths, so the two halves hold different token counts.
rng = np.random.default_rng(7)
src = rng.integers(3, 11, size=(4, 7))
tgt = rng.integers(3, 11, size=(4, 8))
tgt[:, 0] = 1  # <bos>
for i, n in enumerate([8, 3, 6, 2]):
    tgt[i, n:] = 0  # PAD
N = 2
shards = [shard_rows(4, N, r) for r in range(N)]
print("non-PAD targets per shard:", [count_targets(tgt[s]) for s in shards], "global:", count_targets(tgt))

# %% [markdown]
# ## 1. The all-reduced gradient is the full-batch gradient
#
# The loss is the mean over the n non-PAD target tokens of the global batch. Split into N shards with n_r tokens,
# `grad L = (1/N) sum_r grad L_r` exactly when rank r's loss is `L_r = (N / n) * (sum of its token losses)`, its
# shard mean times N * n_r / n. DDP computes the (1/N) sum_r part, as torch's DDP does, and the loss does the rest.
#
# Here one process plays both ranks: it backpropagates each shard's L_r into its own copy of the model, then
# averages the copies' gradients, which is what the all-reduce does.

# %%
full = tiny_model()
compute_loss(full, src, tgt)[0].backward()
g_full = grads(full)

n_global = count_targets(tgt)
per_rank = []
for s in shards:
    replica = tiny_model()  # every rank starts from the same weights (DDP broadcasts rank 0's)
    compute_shard_loss(replica, src[s], tgt[s], n_global, N)[0].backward()
    per_rank.append(grads(replica))
g_dp = {k: sum(g[k] for g in per_rank) / N for k in g_full}
print("weighted shards, averaged: max relative error", max(error_stats(g_dp[k], g_full[k])[0] for k in g_full))

# %% [markdown]
# ## 2. The weighting pitfall, caught by the equality test
#
# The tempting version is that every rank takes its own mean and DDP averages them. That is the mean of the shard
# means, and it equals the global mean only when every shard has as many tokens as the others. With padding they
# rarely do. The same equality check that passed above now fails, which is the point of keeping it in the tests
# (tests/minitensor/nn/test_distributed.py plants exactly this bug).

# %%
planted = []
for s in shards:
    replica = tiny_model()
    compute_loss(replica, src[s], tgt[s])[0].backward()  # the bug: the shard's plain mean, no N * n_r / n
    planted.append(grads(replica))
g_bug = {k: sum(g[k] for g in planted) / N for k in g_full}
try:
    for k in g_full:
        assert_close(g_bug[k], g_full[k], PARITY_RTOL["float64"], what=k)
    print("not caught?!")
except AssertionError as e:
    print("caught:", str(e)[:160], "...")

# %% [markdown]
# A shard whose targets are all PAD (a short last batch, or a rank handed only padding) must contribute zero. Its
# plain mean is 0/0 = NaN, and one NaN gradient spreads to every rank through the all-reduce. `shard_loss` sums
# first, then scales, so it gives 0:

# %%
logits = mt.randn(1, 3, 11)
all_pad = np.zeros((1, 3), dtype=np.int64)
plain = mt.nn.functional.cross_entropy(logits.reshape(-1, 11), mt.tensor(all_pad.reshape(-1)), ignore_index=0)
print("plain mean:", plain.item())
print("shard_loss:", shard_loss(logits, all_pad, n_global=15, world_size=2).item())

# %% [markdown]
# ## 3. Buckets and overlap, on two real MPI ranks
#
# DDP groups the parameters into buckets, roughly in the order the backward produces their gradients. Each
# parameter has a post-accumulate-grad hook, which the graph walk fires as soon as that gradient is complete.
# When a bucket is full, its all-reduce starts (non-blocking `Iallreduce`) while the backward goes on with the
# earlier layers. At the end the step waits only for what has not finished.
#
# The cell below writes a small script, runs it under `mpiexec -n 2` (the mpiexec of the `distributed` extra), and
# draws the timeline each rank recorded: forward, backward, each bucket's start, the wait, the optimizer step.

# %%
RANK_SCRIPT = r"""
import json, time
import numpy as np
from mpi4py import MPI
import minitensor as mt
from minitensor.nn.parallel import DistributedDataParallel
from transformer_np.model import Transformer
from transformer_np.parallel import compute_shard_loss, count_targets, shard_rows

comm = MPI.COMM_WORLD
mt.manual_seed(comm.rank)  # each rank its own init: the wrap broadcasts rank 0's weights
model = DistributedDataParallel(Transformer(11, 11, 64, 4, 2, 2, 128, 0.1, 32), bucket_cap_mb=0.05)
opt = mt.optim.Adam(model.parameters(), lr=1e-3)
rng = np.random.default_rng(0)
src, tgt = rng.integers(3, 11, (16, 20)), rng.integers(3, 11, (16, 21))
tgt[:, 0] = 1
rows, n = shard_rows(16, comm.size, comm.rank), count_targets(tgt)
for step in range(3):  # the last step is drawn
    comm.Barrier()
    ev = [("forward", time.perf_counter())]
    loss = compute_shard_loss(model, src[rows], tgt[rows], n, comm.size)[0]
    ev.append(("backward", time.perf_counter()))
    loss.backward()
    ev += model.timeline
    ev.append(("optimizer", time.perf_counter()))
    mt.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad()
    ev.append(("end", time.perf_counter()))
everyone = comm.gather(ev, root=0)
if comm.rank == 0:
    print("TIMELINE " + json.dumps({"buckets": len(model.buckets), "ranks": everyone}))
"""

timeline = None
if importlib.util.find_spec("mpi4py") is None:
    print("mpi4py is not installed (pip install -e '.[distributed]'): the two-rank run is skipped")
else:
    from minitensor.nn.parallel import run_ranks

    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "one_step.py")
        with open(script, "w") as f:
            f.write(RANK_SCRIPT)
        root = os.path.dirname(os.path.dirname(os.path.abspath(mt.__file__)))
        env = {**os.environ, "PYTHONPATH": root, "OMP_NUM_THREADS": "1"}
        done = run_ranks(2, [script], timeout=240, env=env)
    line = next((x for x in done.stdout.splitlines() if x.startswith("TIMELINE ")), None)
    if line is None:
        print(done.stderr[-2000:], file=sys.stderr)
        raise RuntimeError("the two-rank run failed")
    timeline = json.loads(line.removeprefix("TIMELINE "))
    print(f"{timeline['buckets']} buckets; events of rank 0:", [name for name, _ in timeline["ranks"][0]])

# %%
if timeline is not None:
    t0 = min(ev[0][1] for ev in timeline["ranks"])
    fig, ax = plt.subplots(figsize=(10, 2.6))
    colors = {"forward": "#8fb3d9", "backward": "#f2b880", "wait": "#d9534f", "optimizer": "#9ccc9c"}
    for r, ev in enumerate(timeline["ranks"]):
        t = {name: (at - t0) * 1e3 for name, at in ev}
        wait = t.get("wait", t["optimizer"])
        spans = [
            ("forward", t["forward"], t["backward"]),
            ("backward", t["backward"], wait),
            ("wait", wait, t["optimizer"]),
            ("optimizer", t["optimizer"], t["end"]),
        ]
        for name, a, b in spans:
            ax.broken_barh([(a, b - a)], (r - 0.35, 0.7), color=colors[name], label=name if r == 0 else None)
        for name, at in ev:
            if name.startswith("bucket"):
                ax.plot([(at - t0) * 1e3] * 2, [r - 0.35, r + 0.35], color="k", lw=0.8)
    ax.set_yticks(range(len(timeline["ranks"])), [f"rank {r}" for r in range(len(timeline["ranks"]))])
    ax.set_xlabel("ms since the step's start (black ticks: a bucket's all-reduce starts)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=4, fontsize=8)
    ax.set_title("one training step per rank: the all-reduces start during the backward")
    show(fig, "10_step_timeline.png")
    plt.close(fig)

# %% [markdown]
# Two things to read in the picture. The black ticks sit inside the backward: the first buckets leave while the
# encoder's gradients are still being computed (from the second step on, the buckets follow the order the first
# backward delivered its gradients, as torch's DDP rebuilds them). The red wait is what the overlap did not hide,
# and it includes waiting for the slower rank: an all-reduce ends only when every rank has joined it. On one machine
# with 2 cores and MPICH, which advances a non-blocking all-reduce only inside MPI calls, the wait is still
# there. On a cluster the all-reduce has a network to cross. `python -m benchmarks ranks` measures both and
# projects the ring all-reduce cost, `2 (N-1)/N * bytes / bandwidth + 2 (N-1) * latency`, to more ranks.
#
# **Try it:** set `bucket_cap_mb=25` in the script (one bucket: nothing can start before the backward ends) and
# compare the two timelines.
