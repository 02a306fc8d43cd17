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
# # 9. The memory of backprop: what the graph keeps, recomputing instead of keeping, attention in O(T)
#
# **What you will learn**
# - where a training step's memory goes: every node of the graph keeps some arrays for its backward, and
#   `mt.autograd.graph.saved_tensors(loss)` lists them node by node, with shapes, dtypes and bytes;
# - activation checkpointing: keep only each layer's input and run the layer again in the backward
#   (`mt.utils.checkpoint`, the model's `activation_checkpointing=True`): less memory, the same gradients, bitwise;
# - tiled attention (FlashAttention-2): `F.scaled_dot_product_attention` computes softmax(Q K^T) V block by block
#   with an online softmax and keeps one number per query row instead of the (T, T) weights, so attention's memory
#   grows like T, not T^2; checked against PyTorch's own SDPA;
# - the trade-off measured: saved bytes, peak memory and time for dense/tiled x plain/checkpointed as T grows.

# %%
import tempfile
import tracemalloc

import numpy as np
import torch
from nbutil import TINY, show, sized

import minitensor as mt
import minitensor.nn.functional as F
from minitensor.testing import error_stats
from transformer_np.experiments.memory import measure_step, memory_model
from transformer_np.experiments.registry import run_experiment

# %% [markdown]
# ## What one node keeps
# A primitive's forward saves what its backward will read. `tanh` keeps its output (dL/dx = g (1 - y^2));
# a matmul keeps both inputs (dA = g B^T, dB = A^T g). The listing walks the graph from the loss.

# %%
x = mt.randn(64, 32, requires_grad=True)
w = mt.randn(32, 16, requires_grad=True)
loss = (x @ w).tanh().sum()
print(mt.autograd.graph.saved_tensors(loss))

# %% [markdown]
# ## A Transformer's training step, node by node
# The long preset's model at batch 1 on a sequence of T tokens. With dense attention each attention block keeps
# its (B, H, T, T) weights, twice (the softmax's output, which the product with V also reads) plus the dropout
# mask: that is the O(T^2) part. The table groups the listing by node kind.

# %%
T = sized(256, 32)
dense = measure_step(memory_model(T, "dense", False, tiny=TINY), T)
listing = dense["listing"]
for name, nbytes in sorted(listing.by_node().items(), key=lambda kv: -kv[1])[:8]:
    print(f"{name:<36} {mt.autograd.graph.format_bytes(nbytes):>12}")
print(
    f"\nheld: {mt.autograd.graph.format_bytes(listing.held_bytes)}; traced peak of forward + backward: "
    f"{dense['peak_mib']:.1f} MiB"
)

# %% [markdown]
# ## Recompute instead of keeping: activation checkpointing
# `mt.utils.checkpoint.checkpoint(fn, x)` runs `fn` without keeping its inside, and runs it again during the
# backward (with the random state replayed, so dropout draws the same mask). The gradients are bitwise those of
# the plain run; the price is one more forward of each checkpointed layer.

# %%
layer = mt.nn.Sequential(mt.nn.Linear(32, 128), mt.nn.ReLU(), mt.nn.Dropout(0.1), mt.nn.Linear(128, 32))
x = mt.randn(64, 32, requires_grad=True)
grads = []
for use_checkpoint in (False, True):
    mt.manual_seed(0)
    out = mt.utils.checkpoint.checkpoint(layer, x, use_reentrant=False) if use_checkpoint else layer(x)
    print(
        "checkpointed" if use_checkpoint else "plain       ",
        "keeps",
        mt.autograd.graph.format_bytes(mt.autograd.graph.saved_tensors(out).held_bytes),
    )
    out.sum().backward()
    grads.append(x.grad.numpy().copy())
    x.grad = None
print("gradients bitwise equal:", np.array_equal(*grads))

# %% [markdown]
# ## Attention in O(T) memory
# FlashAttention-2 walks blocks of queries against blocks of keys. Per query row it keeps a running maximum m and
# a running sum l of exp(s - m); when a new block raises the maximum, the old sum and the output so far are
# rescaled by exp(m_old - m_new). At the end out = acc / l, and the forward keeps only out and the row
# log-sum-exp L = m + log l. The backward recomputes each block's probabilities as exp(S - L), and the softmax's
# row term is rowsum(dO * O) (derivation: docs/backprop.md, section 11). First, the same numbers as PyTorch:

# %%
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((2, 4, 300, 16)) for _ in range(3))
keep = np.ones((2, 1, 1, 300), bool)
keep[1, ..., 250:] = False  # key padding in the second sequence
g = rng.standard_normal((2, 4, 300, 16))
ours = [mt.tensor(a, requires_grad=True) for a in (q, k, v)]
theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
out = F.scaled_dot_product_attention(*ours, attn_mask=keep)
ref = torch.nn.functional.scaled_dot_product_attention(*theirs, attn_mask=torch.tensor(keep))
out.backward(mt.tensor(g))
ref.backward(torch.tensor(g))
print("output  max rel error:", f"{error_stats(out.detach().numpy(), ref.detach().numpy())[1]:.1e}")
for name, a, b in zip("qkv", ours, theirs):
    print(f"grad {name}  max rel error:", f"{error_stats(a.grad.numpy(), b.grad.numpy())[1]:.1e}")

# %% [markdown]
# Then the memory: a forward and backward at T = 2048 (one head, float64) under tracemalloc, tiled against the
# dense weights. One (T, T) score matrix is 32 MiB.

# %%
T_big = sized(2048, 512)
qb, kb, vb = (mt.tensor(rng.standard_normal((1, 1, T_big, 32)), requires_grad=True) for _ in range(3))
gb = mt.tensor(rng.standard_normal((1, 1, T_big, 32)))


def traced_peak_mib(fn) -> float:
    tracemalloc.start()
    floor = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1] - floor
    tracemalloc.stop()
    return peak / 2**20


causal = np.tril(np.ones((T_big, T_big), bool))
tiled_peak = traced_peak_mib(lambda: F.scaled_dot_product_attention(qb, kb, vb, is_causal=True).backward(gb))
dense_peak = traced_peak_mib(lambda: (F.attention_weights(qb, kb, causal) @ vb).backward(gb))
print(
    f"T = {T_big}: tiled peak {tiled_peak:.1f} MiB, dense peak {dense_peak:.1f} MiB, "
    f"one score matrix {T_big * T_big * 8 / 2**20:.0f} MiB"
)

# %% [markdown]
# ## The trade-off, measured
# The `memory` experiment (`python -m transformer_np experiment memory`) builds one training step four ways at
# growing T: what the graph keeps, the traced peak, and the step's time. Dense attention's memory grows like T^2;
# tiled attention's like T; checkpointing removes most of what the layers keep and costs a second forward.

# %%
result = run_experiment("memory", tempfile.mkdtemp(), progress=False, tiny=TINY)
print(result["markdown"])
show(result["files"][-1])
