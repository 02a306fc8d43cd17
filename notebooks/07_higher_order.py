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
# # 7. Higher-order gradients: the Hessian-vector product and the curvature of the loss
#
# **What you will learn**
# - how backpropagation differentiates itself: with `create_graph=True` the backward pass is recorded as a graph
#   of ordinary ops, so a gradient can be differentiated again (tanh by hand, then checked);
# - the Hessian-vector product H v = d/dtheta <grad L, v>: two backward passes, never the Hessian itself, and
#   `mt.autograd.functional` (`vjp`, `jvp`, `jacobian`, `hessian`, `hvp`, `vhp`), named as in PyTorch;
# - how all of it is checked against PyTorch: a small network's whole Hessian, then the whole Transformer's H v;
# - a small curvature study: the top eigenvalue of the loss Hessian (power iteration on H v) over a training
#   run, post-norm against pre-norm, beside the learning rate and the gradient norm.
#
# Next: build it yourself, from one scalar to the whole Transformer: `python -m course list` (course/README.md).

# %%
import json
import os
import tempfile

import numpy as np
import torch
from nbutil import TINY, show, sized

import minitensor as mt
from minitensor.testing import OP_RTOL, PARITY_RTOL, error_stats

mt.set_default_dtype(mt.float64)  # float64 for the checks: agreement to round-off is visible
torch.set_default_dtype(torch.float64)

# %% [markdown]
# ## Differentiating a backward pass: tanh
# For y = tanh(x) the backward formula is dL/dx = g * (1 - y^2), with g the incoming gradient. Written in
# ordinary ops, that formula is itself a little graph: multiply, square, subtract. When `create_graph=True`, the
# engine runs those ops on Tensors and records them, so the gradient has a `grad_fn` and can be differentiated.
# Differentiating dy/dx = 1 - y^2 once more, by hand: d2y/dx2 = -2 y (1 - y^2).

# %%
x = mt.tensor([-1.0, 0.0, 0.5, 2.0], requires_grad=True)
y = x.tanh()
(dy,) = mt.autograd.grad(y.sum(), [x], create_graph=True)  # the gradient, recorded as a graph
print("dy/dx         ", dy.detach().numpy(), " grad_fn:", dy.grad_fn)
(d2y,) = mt.autograd.grad(dy.sum(), [x])  # differentiate the gradient
t = np.tanh(x.detach().numpy())
print("d2y/dx2       ", d2y.numpy())
print("-2y(1 - y^2)  ", -2 * t * (1 - t**2))

tx = torch.tensor(x.detach().numpy(), requires_grad=True)
(tdy,) = torch.autograd.grad(tx.tanh().sum(), [tx], create_graph=True)
(td2y,) = torch.autograd.grad(tdy.sum(), [tx])
print("PyTorch d2y/dx2", td2y.numpy(), " max rel error:", f"{error_stats(d2y.numpy(), td2y.numpy())[1]:.1e}")

# %% [markdown]
# The same holds for every op of the engine, the fused ones included (softmax, layer norm, cross-entropy):
# each backward is written once, and under `create_graph=True` the same lines record a graph.
#
# ## The Hessian-vector product
# The Hessian H of a loss L(theta) has one row and one column per parameter: for the copy-reverse model that is
# about two million squared, far too many to store. Its product with a vector v is cheap:
# H v = d/dtheta <grad L(theta), v>. Record the gradient (`create_graph=True`), take its dot product with v, and
# backpropagate that scalar. Here on f(x) = sum(x^3), whose Hessian is diag(6 x):

# %%
rng = np.random.default_rng(0)
x = mt.tensor(rng.standard_normal(5), requires_grad=True)
v = mt.tensor(rng.standard_normal(5))
(g,) = mt.autograd.grad((x**3).sum(), [x], create_graph=True)
(hv,) = mt.autograd.grad((g * v).sum(), [x])
print("H v by double backward:", hv.numpy())
print("6 x v by hand:         ", 6 * x.detach().numpy() * v.numpy())

# %% [markdown]
# `mt.autograd.functional` wraps this in PyTorch's functions: `hvp(f, inputs, v)` and `vhp` return
# `(f(inputs), the product)`, `hessian(f, inputs)` the whole matrix, one backward per entry of the gradient.
# (`hvp` computes H v by the "double-vjp trick" exactly as PyTorch does, one backward more than `vhp`;
# for a twice continuously differentiable f the Hessian is symmetric and both give the same numbers.)
#
# ## Checked against PyTorch: a small network's whole Hessian
# A two-layer network with LayerNorm, its loss as a function of all five parameter tensors; the Hessian is a
# 5 x 5 table of blocks, block [i][j] of shape inputs[i].shape + inputs[j].shape.

# %%
import torch.nn.functional as tF

import minitensor.nn.functional as mF

shapes = [(4, 5), (5,), (5,), (5,), (5, 2)]
arrays = [rng.standard_normal(s) for s in shapes]
arrays[2] += 1.0  # the LayerNorm gain, near 1 as initialised
x_in, target = rng.standard_normal((3, 4)), rng.standard_normal((3, 2))


def mlp_loss(lib, F):
    def loss(w1, b1, gamma, beta, w2):
        h = F.layer_norm(lib.tensor(x_in) @ w1 + b1, (5,), gamma, beta).tanh()
        return ((h @ w2 - lib.tensor(target)) ** 2).mean()

    return loss


ours = mt.autograd.functional.hessian(mlp_loss(mt, mF), tuple(mt.tensor(a) for a in arrays))
ref = torch.autograd.functional.hessian(mlp_loss(torch, tF), tuple(torch.tensor(a) for a in arrays))
worst = max(error_stats(ours[i][j].detach().numpy(), ref[i][j].numpy())[1] for i in range(5) for j in range(5))
print(
    f"25 Hessian blocks, {sum(o.numel() for row in ours for o in row)} entries; worst max rel error {worst:.1e} "
    f"(op tolerance in float64: {OP_RTOL['float64']:g})"
)

# %% [markdown]
# ## Checked against PyTorch: the whole Transformer's H v
# The parity report (`python -m parity report`) has a row group `hvp`: the HVP of the training loss of the whole
# model, in a random direction, transformer_np against the PyTorch twin with the same weights. Here is the same
# computation by hand, with the report's own helper (`transformer_np.hessian.hessian_vector_products`, which the
# curvature experiment below uses too), on a small model (float64).

# %%
from parity.hooks import to_numpy
from parity.loss import compute_loss as torch_loss
from parity.report import build_models, synthetic_batch
from transformer_np.config import get_preset
from transformer_np.hessian import hessian_vector_products
from transformer_np.loss import compute_loss as np_loss

cfg = get_preset("copy").model.replace(
    dropout=0.0,
    d_model=sized(64, 16),
    num_heads=4,
    d_ff=sized(128, 32),
    num_encoder_layers=sized(2, 1),
    num_decoder_layers=sized(2, 1),
)
np_model, pt_model = build_models(cfg, "float64", "cpu", seed=0)
src, tgt = synthetic_batch(np.random.default_rng(1), 4, 8, 8, cfg.src_vocab_size, cfg.tgt_vocab_size)
direction = [rng.standard_normal(tuple(p.shape)) for p in np_model.parameters()]
_, np_hvp = hessian_vector_products(mt.autograd.grad, np_loss(np_model, src, tgt, 0.1)[0], list(np_model.parameters()))
_, pt_hvp = hessian_vector_products(
    torch.autograd.grad, torch_loss(pt_model, src, tgt, 0.1)[0], list(pt_model.parameters())
)
ours = np_hvp([mt.tensor(d) for d in direction])
ref = pt_hvp([torch.tensor(d) for d in direction])
ours, ref = (np.concatenate([to_numpy(h).reshape(-1) for h in hs]) for hs in (ours, ref))
v_flat = np.concatenate([d.reshape(-1) for d in direction])
print(
    f"H v over {ours.size:,} parameters: max rel error {error_stats(ours, ref, scale_free=True)[1]:.1e} "
    f"(the report's limit: {PARITY_RTOL['float64']:g})"
)
print(
    f"curvature along v: v . H v / |v|^2 = {ours @ v_flat / (v_flat @ v_flat):.4g} (PyTorch: "
    f"{ref @ v_flat / (v_flat @ v_flat):.4g})"
)

# %% [markdown]
# ## A small curvature study
# How sharp is the loss where training goes? The top eigenvalue of the Hessian (its largest curvature) is found
# by power iteration: v <- H v / |H v|, each step one HVP, the Rayleigh quotient v . H v converging to the
# eigenvalue of largest magnitude. That one can be negative (a direction of negative curvature, common away from
# a minimum); then a second power iteration on H - neg I, whose eigenvalues are all >= 0, finds the top one (the
# table shows the negative one as `neg eig`). `python -m transformer_np experiment curvature` does this on the
# copy-reverse preset (3+3 layers, d_model 128) during training, for post-norm and pre-norm, at evenly spaced
# steps. Its table shows the iterations used and the residual |H v - lambda v| / |lambda| (how close v is to an
# eigenvector), next to the learning rate and the gradient norm. Here a shorter run: 200 steps (under the
# notebooks' tiny switch, 4 steps of a tiny model).

# %%
from transformer_np.experiments import run_experiment

mt.set_default_dtype(mt.float32)  # training runs in the engine's default dtype
out = tempfile.mkdtemp(prefix="curvature_")
res = run_experiment("curvature", out, steps=sized(200, None), progress=False, tiny=TINY)
print(res["markdown"])
show(os.path.join(out, "curvature.png"))

# %% [markdown]
# Reading the figure: the top-left panel is the sharpness of each run at the measured steps; top right, the
# learning rate both runs share (the paper's warmup: a linear rise, then a decay as 1/sqrt(step)); bottom left,
# each training batch's gradient norm before clipping; bottom right, how the power iteration converged at the
# last measurement. The numbers below compare the two placements at the last measured step.

# %%
with open(os.path.join(out, "curvature.json")) as f:
    data = json.load(f)
last = data["rows"][-1]
for label in ("post-norm", "pre-norm"):
    first = data["rows"][0][f"{label} top eig"]
    print(
        f"{label:9s}: top eigenvalue {first:10.4g} at step 0 -> {last[f'{label} top eig']:10.4g} at step "
        f"{last['step']} ({last[f'{label} iters']} iterations, residual {last[f'{label} residual']:.2g}); "
        f"gradient norm {last[f'{label} grad norm']:.3g}"
    )
print(f"learning rate at step {last['step']}: {last['lr']:.3g}")

# %% [markdown]
# The full study (`python -m transformer_np experiment curvature --out runs/curvature`, about ten minutes on two
# cores) runs 1000 steps; `python -m parity.curvature --out DIR` runs the same study and repeats every
# measurement on the PyTorch twin (a `torch eig` column), from the same start vector, as a check of the whole
# chain: the model, the double backward, the power iteration.
