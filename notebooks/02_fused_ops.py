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
# # 2. The fused ops: softmax, layer norm, cross-entropy with label smoothing
#
# **What you will learn**
# - why the engine computes softmax, layer norm and cross-entropy as single "fused" ops with a hand-derived
#   backward, instead of chaining exp, sum, divide... (fewer nodes, less memory, better numerics);
# - the three backward formulas, derived in a few lines each;
# - how each fused op is checked: equal to the same function written with small ops (the "composite"),
#   equal to PyTorch, and equal to finite differences.
#
# The full derivations are in `docs/backprop.md`. Runs in a few seconds. Next: `03_attention.py`.

# %%
import numpy as np
import torch

import minitensor as mt
import minitensor.nn.functional as F

mt.manual_seed(0)
rng = np.random.default_rng(0)


def grads_of(fn, arrays, g):
    """Run fn on fresh float64 leaves made from `arrays`, backpropagate the upstream gradient g; return (out, grads)."""
    leaves = [mt.tensor(a, dtype=mt.float64, requires_grad=True) for a in arrays]
    out = fn(*leaves)
    (out * mt.tensor(g)).sum().backward()
    return out.detach().numpy(), [t.grad.numpy() for t in leaves]


def torch_grads_of(fn, arrays, g):
    leaves = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*leaves)
    (out * torch.tensor(g)).sum().backward()
    return out.detach().numpy(), [t.grad.numpy() for t in leaves]


def report(name, results):
    """results: {label: (out, grads)}; every entry is compared with the first."""
    (ref_label, (ref_out, ref_grads)), *others = results.items()
    for label, (out, grads) in others:
        worst = max(np.abs(a - b).max() for a, b in zip([out] + grads, [ref_out] + ref_grads))
        print(f"{name}: {label:<30} vs {ref_label}: max |difference| {worst:.1e}")
        assert worst < 1e-10, f"{name}: {label} disagrees with {ref_label}"


# %% [markdown]
# ## Softmax
# `y_i = exp(x_i) / sum_j exp(x_j)` along the last axis. Its Jacobian is `dy_i/dx_k = y_i (delta_ik - y_k)`, so for
# an upstream gradient `g`:
#
#     dx_k = sum_i g_i y_i (delta_ik - y_k) = y_k (g_k - sum_i g_i y_i)
#
# One line, no V x V Jacobian ever built. We write it in NumPy and compare it with the fused op's backward, the
# composite (exp / sum, differentiated op by op by the engine) and PyTorch.

# %%
x = rng.standard_normal((4, 6))
g = rng.standard_normal((4, 6))

y = np.exp(x - x.max(-1, keepdims=True))
y /= y.sum(-1, keepdims=True)
by_hand = y * (g - (g * y).sum(-1, keepdims=True))


def softmax_composite(t):
    e = (t - t.amax(dim=-1, keepdim=True).detach()).exp()  # subtracting the max changes nothing but overflow
    return e / e.sum(dim=-1, keepdim=True)


report(
    "softmax",
    {
        "by hand (NumPy)": (y, [by_hand]),
        "F.softmax (fused)": grads_of(lambda t: F.softmax(t, dim=-1), [x], g),
        "composite exp/sum": grads_of(softmax_composite, [x], g),
        "PyTorch": torch_grads_of(lambda t: torch.softmax(t, dim=-1), [x], g),
    },
)
print(
    "gradcheck:",
    mt.autograd.gradcheck(lambda t: F.softmax(t, dim=-1), [mt.tensor(x, dtype=mt.float64, requires_grad=True)]),
)

# %% [markdown]
# ## Layer norm
# Over the last axis of width D: `mu = mean(x)`, `sigma = sqrt(var(x) + eps)` (biased variance, as PyTorch),
# `xhat = (x - mu) / sigma`, `y = xhat * w + b`. With `gx = g * w` (the gradient reaching xhat), the three paths
# from x to xhat (directly, through mu, through sigma) sum to
#
#     dx = (gx - mean(gx) - xhat * mean(gx * xhat)) / sigma
#     dw = sum over rows of g * xhat,    db = sum over rows of g

# %%
D, eps = 8, 1e-5
x = rng.standard_normal((5, D)) * 3 + 1
w, b = rng.standard_normal(D), rng.standard_normal(D)
g = rng.standard_normal((5, D))

mu = x.mean(-1, keepdims=True)
sigma = np.sqrt(x.var(-1, keepdims=True) + eps)
xhat = (x - mu) / sigma
gx = g * w
dx = (gx - gx.mean(-1, keepdims=True) - xhat * (gx * xhat).mean(-1, keepdims=True)) / sigma
by_hand = (xhat * w + b, [dx, (g * xhat).sum(0), g.sum(0)])


def layer_norm_composite(t, w, b):
    mu = t.mean(dim=-1, keepdim=True)
    var = ((t - mu) ** 2).mean(dim=-1, keepdim=True)
    return (t - mu) / (var + eps).sqrt() * w + b


report(
    "layer norm",
    {
        "by hand (NumPy)": by_hand,
        "F.layer_norm (fused)": grads_of(lambda t, w, b: F.layer_norm(t, (D,), w, b, eps), [x, w, b], g),
        "composite mean/var/sqrt": grads_of(layer_norm_composite, [x, w, b], g),
        "PyTorch": torch_grads_of(lambda t, w, b: torch.nn.functional.layer_norm(t, (D,), w, b, eps), [x, w, b], g),
    },
)
leaves = [mt.tensor(a, dtype=mt.float64, requires_grad=True) for a in (x, w, b)]
print("gradcheck:", mt.autograd.gradcheck(lambda t, w, b: F.layer_norm(t, (D,), w, b, eps), leaves))

# %% [markdown]
# ## Cross-entropy with label smoothing
# For N rows of logits over V classes and targets `t`, label smoothing eps spreads eps of the target's
# probability mass uniformly: `q = (1 - eps) * onehot(t) + eps / V`. With `p = softmax(logits)`:
#
#     L = mean over rows of  - sum_j q_j log p_j        dlogits = (p - q) / N
#
# The gradient is the predicted distribution minus the smoothed target, divided by N for the mean. The fused op
# never forms `log p` for the whole row twice, and stays finite for any logits (log-sum-exp with the max
# subtracted).

# %%
N, V, smoothing = 6, 5, 0.1
logits = rng.standard_normal((N, V)) * 2
target = rng.integers(0, V, N)

p = np.exp(logits - logits.max(-1, keepdims=True))
p /= p.sum(-1, keepdims=True)
q = (1 - smoothing) * np.eye(V)[target] + smoothing / V
loss_by_hand = -(q * np.log(p)).sum(-1).mean()
dlogits_by_hand = (p - q) / N


def ce_composite(z):
    return -(mt.tensor(q) * F.log_softmax(z, dim=-1)).sum(dim=-1).mean()


g_scalar = np.array(1.0)  # the loss is a scalar: its upstream gradient is 1
report(
    "cross-entropy",
    {
        "by hand (NumPy)": (np.array(loss_by_hand), [dlogits_by_hand]),
        "F.cross_entropy (fused)": grads_of(
            lambda z: F.cross_entropy(z, mt.tensor(target), label_smoothing=smoothing), [logits], g_scalar
        ),
        "composite log_softmax": grads_of(ce_composite, [logits], g_scalar),
        "PyTorch": torch_grads_of(
            lambda z: torch.nn.functional.cross_entropy(z, torch.tensor(target), label_smoothing=smoothing),
            [logits],
            g_scalar,
        ),
    },
)
print(
    f"loss {loss_by_hand:.6f}; the smallest it can be with smoothing {smoothing} is the entropy of q: "
    f"{-(q[0] * np.log(q[0])).sum():.6f} (a trained model's loss stops there, not at 0)"
)

# %% [markdown]
# ## Your turn: softmax's backward
# Softmax's Jacobian is dy_i/dx_j = y_i (delta_ij - y_j): a diagonal term and off-diagonal terms -y_i y_j, because
# every output shares the denominator. Multiplied by the upstream gradient g, it folds into one line in terms of
# the output: dx = y * (g - sum_j g_j y_j) over `dim`. Write `backward` in the next cell (the course's exercise
# 4.1); the cell after runs the course's check (your backward alone, then PyTorch in float64 and float32, then
# finite differences) and prints its verdict. Keeping only the diagonal, g * y * (1 - y), is the classic slip: the
# check says so.


# %%
class Softmax(mt.Function):
    """y = softmax(x) over `dim`"""

    @staticmethod
    def forward(ctx, x, dim=-1):
        e = np.exp(x - x.max(axis=dim, keepdims=True))
        y = e / e.sum(axis=dim, keepdims=True)
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_arrays
        raise NotImplementedError("exercise 4.1")  # your turn: return (dx,), a 1-tuple


# %%
from course.notebook import check_here

check_here("4.1", Softmax=Softmax)

# %% [markdown]
# **Recap.** Each fused op's backward is one short formula in terms of its output (`y`, `xhat`, `p`). Four
# independent computations of each gradient agree to float64 round-off (the differences printed above). The test suite
# runs the same comparisons for every op, in float32 and float64, with random upstream gradients
# (`tests/minitensor/ops/test_fused.py`). Your turn: `python -m course check 4` has you write softmax's, layer norm's
# and cross-entropy's backward yourself, checked the same way (course/README.md).
