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
# # 1. The engine from zero: a tensor, a graph, backward
#
# **What you will learn**
# - what a `minitensor` tensor is (a NumPy array plus three things: `requires_grad`, `grad`, the op that made it);
# - how every operation records a node in a graph, and how `backward()` walks that graph in reverse;
# - how to draw the graph (`mt.viz.to_dot`, `mt.viz.render`);
# - how to derive one op's gradient by hand, then check it three ways: against the engine's `backward`,
#   against finite differences (`mt.autograd.gradcheck`) and against PyTorch.
#
# Runs in a few seconds. Next: `02_fused_ops.py`.

# %%
import shutil

import numpy as np
from nbutil import figure_path, show

import minitensor as mt

_ = mt.manual_seed(0)  # (it returns the generator, not needed here)

# %% [markdown]
# ## A tensor
# `mt.tensor` wraps a NumPy array. With `requires_grad=True` the engine remembers every operation done on it.

# %%
x = mt.tensor([[1.0, -2.0, 3.0]], requires_grad=True)  # (1, 3)
print(x)
print("its array, x.detach().numpy(), is a plain NumPy array:", type(x.detach().numpy()).__name__, x.dtype)
print("is a leaf (made by us, not by an op):", x.is_leaf, "| grad so far:", x.grad)

# %% [markdown]
# ## A graph
# Each operation returns a new tensor that points at the node (`grad_fn`) which made it; the node points at its inputs.
# A node's class names its op: `TanhBackward` for `tanh`, as PyTorch's `TanhBackward0`.
# Here is a one-neuron layer: `y = tanh(x @ W + b)`, and a scalar loss `L = sum(y * g)` with a random `g`.
#
# Why the random `g`? A loss `sum(y)` sends an all-ones gradient into `y`, and an all-ones gradient hides mistakes
# such as a swapped axis. A random `g` is what every check in this project uses.

# %%
W = mt.randn(3, 2, requires_grad=True)  # (3, 2)
b = mt.zeros(2, requires_grad=True)  # (2,)
h = x @ W + b  # (1, 2)
y = h.tanh()  # (1, 2)
g = mt.randn(1, 2)  # the upstream gradient dL/dy, fixed and random
L = (y * g).sum()  # a scalar
print("L =", L.item())
print("L was made by", type(L.grad_fn).__name__, "| y by", type(y.grad_fn).__name__)

# %% [markdown]
# ## The graph drawn
# `mt.viz.to_dot` gives the graph as Graphviz text: one box per op, one per leaf that needs a gradient. Passing
# `params` names the leaves. Arrows go the way of the forward pass; `backward` walks them the other way.
# `g` does not appear: it does not require a gradient, so the engine never records it.

# %%
leaves = {"x": x, "W": W, "b": b}
dot_text = mt.viz.to_dot(L, params=leaves, name="L")
print(dot_text)

# %% [markdown]
# With Graphviz installed (`dot` on the PATH), `mt.viz.render` writes the picture; without it, `mt.viz.draw` draws
# the same boxes with matplotlib.

# %%
if shutil.which("dot"):
    show(mt.viz.render(L, figure_path("01_graph.png"), format="png", params=leaves))
else:
    print("Graphviz 'dot' not found: the same graph drawn with matplotlib (mt.viz.draw)")
    show(mt.viz.draw(L, params=leaves, name="L", values=False), "01_graph.png")

# %% [markdown]
# ## backward
# `L.backward()` starts from dL/dL = 1 and sends the gradient back through every node, summing where paths join.
# Afterwards every leaf's `.grad` holds dL/d(leaf). The graph is freed (pass `retain_graph=True` to keep it).

# %%
h.retain_grad()  # h and y are not leaves: keep their gradients too, to draw them below
y.retain_grad()
L.backward(retain_graph=True)  # retain_graph: the graph stays, to be drawn again
print("dL/dx =", x.grad.numpy())
print("dL/dW =\n", W.grad.numpy())
print("dL/db =", b.grad.numpy())

# %% [markdown]
# ## The graph with values and gradients
# The same graph after `backward`: every box of a leaf, or of a tensor we named (`h`, `y`), now shows its value
# (`data`) and its gradient (`grad`, dL/d that tensor). Read it from the top down as backward does: dL/dy is `g`,
# dL/dh is dL/dy * (1 - y^2), and dL/db is dL/dh (b was added once).

# %%
named = {**leaves, "h": h, "y": y}
show(mt.viz.draw(L, params=named, name="L", values=True), "01_graph_values.png")

# %% [markdown]
# ## One op's gradient, derived by hand: tanh and the matrix product
# Write `h = x W + b`, `y = tanh(h)`, `L = sum(g * y)`. The chain rule, one step at a time:
#
# - dL/dy = g
# - dL/dh = g * (1 - y^2), because d tanh(h)/dh = 1 - tanh(h)^2 (element by element)
# - dL/dW = x^T (dL/dh), dL/dx = (dL/dh) W^T, and dL/db = dL/dh summed over the batch rows
#
# Now compute those formulas with plain NumPy and compare with what `backward` produced.

# %%
y_np, g_np, x_np, W_np = (t.detach().numpy() for t in (y, g, x, W))
dh = g_np * (1 - y_np**2)  # (1, 2)
by_hand = {"x": dh @ W_np.T, "W": x_np.T @ dh, "b": dh.sum(axis=0)}
for name, tensor in leaves.items():
    err = np.abs(by_hand[name] - tensor.grad.numpy()).max()
    print(f"d L / d {name}: by hand vs backward, max |difference| = {err:.1e}")
    assert err < 1e-6

# %% [markdown]
# ## Checked against finite differences: `mt.autograd.gradcheck`
# A derivative is a limit: (f(x + eps) - f(x - eps)) / (2 eps) approaches f'(x). `gradcheck` nudges every input
# element by eps = 1e-6 in float64, and compares that numerical slope with the one `backward` computes (for a random
# upstream gradient). It raises naming the worst element when they disagree; it returns True when they agree.

# %%
x64, W64, b64 = (t.detach().double().requires_grad_() for t in (x, W, b))
ok = mt.autograd.gradcheck(lambda x, W, b: (x @ W + b).tanh(), [x64, W64, b64])
print("gradcheck of tanh(x @ W + b):", "passed" if ok else "FAILED")

# %% [markdown]
# What does a wrong gradient look like? Here is a deliberately broken tanh whose backward forgets the square
# (it uses 1 - y instead of 1 - y^2). `mt.Function` is how every primitive of the engine is written:
# `forward` computes on arrays, `backward` turns the incoming gradient `g` into the gradient of each input.


# %%
class BrokenTanh(mt.Function):
    """out = tanh a;  da = g * (1 - out)   <- wrong on purpose: the right rule is g * (1 - out^2)"""

    @staticmethod
    def forward(ctx, a):  # a: a NumPy array; ctx: where forward leaves what backward needs
        ctx.out = np.tanh(a)
        return ctx.out

    @staticmethod
    def backward(ctx, g):  # one gradient per input, as a tuple
        return (g * (1 - ctx.out),)


try:
    mt.autograd.gradcheck(BrokenTanh.apply, [mt.randn(4, dtype=mt.float64, requires_grad=True)])
except mt.autograd.GradcheckError as e:
    print("gradcheck caught it:", e)

# %% [markdown]
# ## Checked against PyTorch
# The same computation in PyTorch, from the same numbers, in float64: the gradients agree to round-off.

# %%
import torch

xt, Wt, bt = (torch.tensor(t.detach().numpy(), dtype=torch.float64, requires_grad=True) for t in (x, W, b))
(torch.tanh(xt @ Wt + bt) * torch.tensor(g.numpy(), dtype=torch.float64)).sum().backward()
for name, ours, theirs in (("x", x, xt), ("W", W, Wt), ("b", b, bt)):
    err = np.abs(ours.grad.numpy() - theirs.grad.numpy()).max()
    print(f"d L / d {name}: minitensor (float32) vs PyTorch (float64), max |difference| = {err:.1e}")
    assert err < 1e-5  # our tensors are float32: agreement to float32 precision

# %% [markdown]
# ## Your turn: `sum_to`, the unbroadcasting
# `b` has shape (2,) but `h = x W + b` has shape (1, 2): NumPy broadcast `b` over the rows, so dL/db is dL/dh
# summed over the rows it was copied to (the `.sum(axis=0)` above). An engine does this in one place for every
# op: `sum_to(g, shape)` sums a gradient `g` back to the shape of the input that broadcast to it, over the leading
# axes that broadcasting added and over every axis where the input had size 1 (kept, as size 1). Write it in the
# next cell (it is the course's exercise 2.1); the cell after runs the course's check on it and prints its verdict.


# %%
def sum_to(g, shape):
    """g (an array) summed back to `shape`, a shape that broadcasts to g.shape"""
    raise NotImplementedError("exercise 2.1")  # your turn: replace this line


# %%
from course.notebook import check_here

check_here("2.1", sum_to=sum_to)

# %% [markdown]
# **Recap.** A tensor records the op that made it; `backward` applies each op's hand-written gradient rule in
# reverse order; three independent checks (hand derivation, finite differences, PyTorch) agree. Every primitive of
# the engine sits in the package `minitensor/ops/` (`elementwise.py` holds `Tanh`; `matmul.py`, `reductions.py`,
# `fused.py`, ... the others) with its forward and backward side by side, written like `BrokenTanh` above, minus the
# bug, and with one difference: what backward reads is kept with `ctx.save_for_backward(out)` and read back as
# `ctx.saved_arrays`, not as a plain attribute such as `ctx.out`. That way the engine knows which arrays a node
# saved: it refuses to run a backward whose saved input was changed in place since (a version counter: every
# tensor counts its in-place changes, and a node remembers the count it saved), and under
# `create_graph=True` it hands the backward those inputs as Tensors, so the gradient can be differentiated again
# (notebook 07). Your turn: `python -m course check 1` (course/README.md) has you write such an engine on scalars,
# then `check 2` on arrays: the walk with its accumulation, and `sum_to`, the unbroadcasting.
