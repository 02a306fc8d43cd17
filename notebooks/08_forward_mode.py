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
# # 8. Forward mode: dual numbers, Jacobian-vector products, and finding a NaN
#
# **What you will learn**
# - what forward-mode automatic differentiation is: carry, beside each value x (the *primal*), its *tangent* ẋ, the
#   direction in which x moves (together a *dual number* x + ẋε with ε² = 0), and every op maps its inputs'
#   tangents to its output's by its Jacobian: ẏ = J ẋ;
# - how to derive a JVP by hand, and check it with `mt.autograd.forward_ad.make_dual` and against PyTorch's
#   `torch.func.jvp`;
# - why forward mode costs one pass per *input* direction and reverse mode one pass per *output*: `jacfwd` (the
#   whole Jacobian by forward passes, one column each) against `jacrev` (by backward passes, one row each) on a
#   tall and a wide function;
# - the Hessian-vector product by forward over reverse;
# - how anomaly mode (`mt.autograd.detect_anomaly()`, a debugging switch under which every op records where its
#   forward was called) finds the op, and the line, that made a NaN gradient.
#
# The chapter beside this notebook is docs/forward_mode.md.

# %%
import inspect
import time
import warnings

import numpy as np
import torch
from nbutil import sized, trim_traceback

import minitensor as mt
from minitensor.autograd import forward_ad as fwAD
from minitensor.ops import Exp, MatMul, Sum
from minitensor.testing import OP_RTOL, error_stats

mt.set_default_dtype(mt.float64)  # float64: agreement to round-off is visible
torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(0)

# %% [markdown]
# ## Dual numbers by hand
# A dual number is a + bε with ε² = 0. Multiply two: (a + ȧε)(b + ḃε) = ab + (ȧb + aḃ)ε, the product rule.
# Put a dual number into any function built from such operations and the ε part that comes out is the
# derivative times the ε part that went in: f(x + ẋε) = f(x) + f'(x) ẋ ε. Twenty lines make a working one:


# %%
class Dual:
    """a + b ε with ε² = 0: `a` the value, `b` the tangent."""

    def __init__(self, a, b=0.0):
        self.a, self.b = a, b

    def __add__(self, other):
        other = other if isinstance(other, Dual) else Dual(other)
        return Dual(self.a + other.a, self.b + other.b)

    def __mul__(self, other):
        other = other if isinstance(other, Dual) else Dual(other)
        return Dual(self.a * other.a, self.b * other.a + self.a * other.b)  # the ε² term vanishes

    __radd__, __rmul__ = __add__, __mul__


def dual_exp(x: Dual) -> Dual:
    return Dual(np.exp(x.a), np.exp(x.a) * x.b)  # exp's JVP: ẏ = exp(x) ẋ


x0 = 0.5
y = Dual(x0, 1.0) * dual_exp(Dual(x0, 1.0))  # f(x) = x e^x, tangent 1: the ε part is f'(x)
print("f(0.5) =", y.a, "  f'(0.5) by dual numbers =", y.b, "  by hand, e^x (1 + x) =", np.exp(x0) * (1 + x0))

# %% [markdown]
# ## The same thing in the engine
# `forward_ad.make_dual(primal, tangent)` makes a tensor carry a tangent inside `with forward_ad.dual_level():`;
# every primitive it flows through computes its output's tangent right after its forward; `unpack_dual` reads
# it back. One forward pass gives f(x) and J ẋ.

# %%
x = mt.tensor([x0])
with fwAD.dual_level():
    xd = fwAD.make_dual(x, mt.tensor([1.0]))
    out = xd * xd.exp()
    value, tangent = fwAD.unpack_dual(out)
print("engine: f =", value.numpy(), " f' =", tangent.numpy())

# %% [markdown]
# ## Three ways a primitive states its JVP
# - **element-wise** (`jvp_kind = "elementwise"`): the Jacobian is diagonal, so the JVP is the backward
#   formula applied to the tangent: for Exp, backward is `g * out`, so ẏ = ẋ * out;
# - **linear** (`jvp_kind = "linear"`): the op is linear in its inputs, so its JVP is the op itself applied to
#   the tangents: the tangent of a sum is the sum of the tangent;
# - **written** (`def jvp(ctx, *tangents)`): everything else, one formula, e.g. MatMul's product rule.

# %%
print("Exp:", Exp.jvp_kind, "   Sum:", Sum.jvp_kind)
print(inspect.getsource(MatMul.jvp))

# %% [markdown]
# ## Deriving a JVP by hand, then checking it
# Take y = exp(x W) for a row batch x (B, n) and weights W (n, m), and move both along tangents ẋ, Ẇ.
# The chain rule, one op at a time: u = x W gives u̇ = ẋ W + x Ẇ (MatMul's rule), then y = exp(u) gives
# ẏ = exp(u) ⊙ u̇ (Exp's; ⊙ is the element-by-element product). So, by hand:
#
#     ẏ = exp(x W) ⊙ (ẋ W + x Ẇ)
#
# We check it three ways: the engine's forward mode, PyTorch's `torch.func.jvp`, and finite differences.

# %%
B, n, m = 4, 3, 5
xa, Wa = rng.standard_normal((B, n)), rng.standard_normal((n, m))
xdot, Wdot = rng.standard_normal((B, n)), rng.standard_normal((n, m))  # random tangents, never all ones

by_hand = np.exp(xa @ Wa) * (xdot @ Wa + xa @ Wdot)

with fwAD.dual_level():
    y = fwAD.make_dual(mt.tensor(xa), mt.tensor(xdot)) @ fwAD.make_dual(mt.tensor(Wa), mt.tensor(Wdot))
    engine = fwAD.unpack_dual(y.exp()).tangent.numpy()

_, reference = torch.func.jvp(
    lambda x, W: (x @ W).exp(), (torch.tensor(xa), torch.tensor(Wa)), (torch.tensor(xdot), torch.tensor(Wdot))
)
eps = 1e-6
numerical = (np.exp((xa + eps * xdot) @ (Wa + eps * Wdot)) - np.exp((xa - eps * xdot) @ (Wa - eps * Wdot))) / (2 * eps)
print("engine vs by hand     : max rel", f"{error_stats(engine, by_hand)[1]:.1e}")
print(
    "engine vs torch.func  : max rel",
    f"{error_stats(engine, reference.numpy())[1]:.1e}",
    "(limit",
    OP_RTOL["float64"],
    ")",
)
print("engine vs finite diff.: max rel", f"{error_stats(engine, numerical)[1]:.1e}  (finite differences: ~1e-9)")

# %% [markdown]
# ## One pass per input, or one pass per output
# A forward pass gives J v for one direction v: the whole Jacobian of f: R^n -> R^m takes n passes (one per
# input, `jacfwd`). A backward gives uᵀ J for one output weighting u: the whole Jacobian takes m passes (one
# per output, `jacrev`). So forward mode wins on a tall Jacobian (few inputs, many outputs) and reverse mode
# on a wide one: a loss (m = 1) of a million parameters is reverse mode's case, which is why training uses it.


# %%
def timed(fn, *args, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - start)
    return out, best


n_small, n_big = 4, sized(256, 64)
for label, (n_in, n_out) in (("tall", (n_small, n_big)), ("wide", (n_big, n_small))):
    A = mt.tensor(rng.standard_normal((n_out, n_in)) / np.sqrt(n_in))
    A_torch = torch.tensor(A.numpy())

    def f(v, A=A):
        return (A @ v).exp()

    v = mt.tensor(rng.standard_normal(n_in))
    J_fwd, t_fwd = timed(mt.func.jacfwd(f), v)
    J_rev, t_rev = timed(mt.func.jacrev(f), v)
    J_torch = torch.func.jacrev(lambda v: (A_torch @ v).exp())(torch.tensor(v.numpy()))  # noqa: B023 (called now)
    agree = max(error_stats(J_fwd.numpy(), J_torch.numpy())[1], error_stats(J_rev.numpy(), J_torch.numpy())[1])
    print(
        f"{label}: J is {n_out} x {n_in}; jacfwd {n_in} passes, {t_fwd * 1e3:.2f} ms; jacrev {n_out} passes, "
        f"{t_rev * 1e3:.2f} ms; both against torch.func: max rel {agree:.1e}"
    )

# %% [markdown]
# ## The Hessian-vector product by forward over reverse
# Compute the gradient inside an open dual level: the backward's own ops carry the tangents too, so the
# gradient comes out with a tangent, and that tangent is H v. One forward pass and one backward, both carrying
# tangents: about the same cost as differentiating the gradient again by a second backward (notebook 7), not
# less: docs/forward_mode.md counts nine matrix products for each way, and the benchmarks measure them level.

# %%
Wa = rng.standard_normal((n, m))
vW = rng.standard_normal((n, m))
W = mt.tensor(Wa, requires_grad=True)
with fwAD.dual_level():
    loss = (mt.tensor(xa) @ fwAD.make_dual(W, mt.tensor(vW))).exp().sum()
    (g,) = mt.autograd.grad(loss, [W], create_graph=True)
    hv = fwAD.unpack_dual(g).tangent.detach().numpy()
_, hv_torch = torch.func.jvp(
    torch.func.grad(lambda W: (torch.tensor(xa) @ W).exp().sum()), (torch.tensor(Wa),), (torch.tensor(vW),)
)
print("H v, forward over reverse, vs torch.func.jvp(grad): max rel", f"{error_stats(hv, hv_torch.numpy())[1]:.1e}")

# %% [markdown]
# ## Anomaly mode: which op made the NaN?
# A distance between two embeddings, sqrt(sum((a - b)²)), is fine in the forward pass even when a = b (it is
# 0), but its gradient is not: d sqrt(s)/ds = 1 / (2 sqrt(s)) is infinite at 0, and the square's backward then
# multiplies that infinity by (a - b) = 0, which is NaN. Here one row of `b` is planted equal to `a`.
# Without anomaly mode the NaN just arrives in the gradient:


# %%
def distances(a, b):
    d = a - b
    return ((d * d).sum(-1)).sqrt()  # the line anomaly mode will point at


a = mt.tensor(rng.standard_normal((3, 4)), requires_grad=True)
b = mt.tensor(np.concatenate([rng.standard_normal((2, 4)), a.detach().numpy()[2:]]))  # the planted row: b[2] == a[2]
distances(a, b).sum().backward()
print("gradient rows with NaN:", np.isnan(a.grad.numpy()).any(axis=1))

# %% [markdown]
# With `mt.autograd.detect_anomaly()`, every op records where its forward was called, and the first backward
# that returns a NaN raises, naming itself, which of its outputs, the shape, and the line of its forward call.
# It is the same message PyTorch gives (its node is named `MulBackward0`); anomaly mode changes no value, and
# costs a traceback per op, so it is for debugging only.

# %%
a.grad = None
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # "Anomaly Detection has been enabled", as torch warns
    with mt.autograd.detect_anomaly():
        loss = distances(a, b).sum()
        try:
            loss.backward()
        except RuntimeError as e:
            print(trim_traceback(str(e)))  # only this notebook's frames: a kernel adds about 30 of its own

# %% [markdown]
# The culprit is the line `((d * d).sum(-1)).sqrt()`, where the square root meets a zero. The usual fix is
# sqrt(s + eps) (or to leave out the pairs that coincide); with it the gradient is finite everywhere:

# %%
a.grad = None
((lambda d: ((d * d).sum(-1) + 1e-12).sqrt())(a - b)).sum().backward()
print("NaN left in the gradient:", bool(np.isnan(a.grad.numpy()).any()))
