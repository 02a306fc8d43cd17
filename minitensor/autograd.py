"""Reverse-mode automatic differentiation: grad mode, the Function base class, the graph walk, gradcheck.

Every primitive is a `Function` subclass (see the ops/ package) with two static methods side by side:

    forward(ctx, *arrays, **kwargs) -> array        # NumPy in, NumPy out; saves on ctx what backward needs
    backward(ctx, g) -> tuple of arrays (or None)   # one gradient per input, the shape of the *output's* broadcast

`Function.apply(*tensors, **kwargs)` runs forward on the tensors' arrays and, when grad mode is on
and some input requires grad, records a `Node` (the output's `grad_fn`). `backward()` sorts the
nodes topologically without recursion, runs each backward in raw NumPy (no Tensor is created while
backpropagating), sums a gradient back to its input's shape in one place (`unbroadcast`), and frees
the saved arrays unless `retain_graph=True`.

In-place safety (PyTorch's version counters): every tensor carries a VersionCounter that each
in-place change bumps (fill_, add_, __setitem__, an optimizer step, ...); a view shares its base's
counter. A node records the versions of the inputs and output it saved (`save_for_backward`), and
its backward refuses to run on an array that changed since: a wrong gradient becomes an error.

Floating-point edges (log 0, x/0, overflow) give IEEE values silently, as in PyTorch: forwards
(Function.apply) and the backward walk (Tensor.backward) run under `ieee_quiet()`, the one place
NumPy's RuntimeWarnings are turned off.

This module knows a tensor only by what the walk uses: `data`, `requires_grad`, `grad_fn`, `shape`,
`dtype`, `version_counter`, `accumulate_grad(g)` and `wrap(array)` (a new Tensor around an array).
tensor.py's Tensor provides them, so the import order is one way: tensor.py -> ops/ -> autograd.py.

Deviation from PyTorch, flagged: after a backward without retain_graph, every node on the path
is freed, also one that saved nothing (`y = x + 1`). PyTorch lets a second loss backpropagate
through such save-nothing nodes; here it raises the "second time" error. The reason: a node here
holds its input Tensors (and so their arrays), and dropping them at once is what returns the
activations' memory even while the caller keeps the loss tensor alive.

A backward never writes into the incoming `g` or a saved array: the same array can flow to
several inputs (x + x), so gradients are combined by creating new arrays, and a leaf receives an
array it owns alone.
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import numpy as np

_grad_enabled = True


def is_grad_enabled() -> bool:
    return _grad_enabled


class _GradMode:
    """Base of no_grad / enable_grad: a context manager that also decorates functions."""
    mode = True

    def __enter__(self):
        global _grad_enabled
        self._prev = _grad_enabled
        _grad_enabled = self.mode
        return self

    def __exit__(self, *exc):
        global _grad_enabled
        _grad_enabled = self._prev
        return False

    def __call__(self, fn: Callable) -> Callable:
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Disable graph recording: `with mt.no_grad(): ...` or `@mt.no_grad()`."""
    mode = False


class enable_grad(_GradMode):
    """Re-enable graph recording inside a no_grad block."""
    mode = True


class set_grad_enabled(_GradMode):
    def __init__(self, mode: bool):
        self.mode = bool(mode)


def ieee_quiet():
    """NumPy's floating-point warnings off: ops return IEEE values (inf, NaN) silently, as PyTorch does."""
    return np.errstate(all="ignore")


class VersionCounter:
    """How many in-place changes a tensor's array has had; a view shares its base's counter."""
    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


# --------------------------------------------------------------------------------------------
# How a primitive is called (the profiler's attachment point)
# --------------------------------------------------------------------------------------------

class OpCalls:
    """How the engine calls a primitive's forward and backward. The profiler installs a subclass
    that times each call (`set_op_calls`); the engine itself never branches on profiling."""

    def forward(self, fn, ctx, arrays, kwargs):
        return fn.forward(ctx, *arrays, **kwargs)

    def backward(self, fn, ctx, g):
        return fn.backward(ctx, g)


_op_calls = OpCalls()


def set_op_calls(calls: OpCalls) -> OpCalls:
    """Install `calls` as the way every forward and backward is run; returns the previous one."""
    global _op_calls
    previous, _op_calls = _op_calls, calls
    return previous


# --------------------------------------------------------------------------------------------
# Function, Context, Node
# --------------------------------------------------------------------------------------------

class Context:
    """Scratch space a forward fills for its backward.

    `needs_input_grad[i]` says whether input i wants a gradient. `save_for_backward(*arrays)` keeps
    input or output arrays that backward reads (as `ctx.saved_arrays`); other values (shapes, dims,
    intermediate arrays the forward made) are plain attributes."""
    needs_input_grad: tuple = ()
    saved_arrays: tuple = ()

    def save_for_backward(self, *arrays) -> None:
        self.saved_arrays = arrays


class Node:
    """One recorded op application: the output tensor's grad_fn."""
    __slots__ = ("fn", "ctx", "inputs", "saved", "hooks", "retained", "__weakref__")

    def __init__(self, fn, ctx, inputs, saved=()):
        self.fn = fn            # the Function subclass
        self.ctx = ctx          # its Context; None once freed
        self.inputs = inputs    # per forward input: the Tensor if it requires grad, else None
        self.saved = saved      # (VersionCounter, version when saved, array) per saved input/output
        self.hooks = None       # the (non-leaf) output tensor's hooks, as array -> array functions
        self.retained = None    # the output tensor when retain_grad() was called on it

    def name(self) -> str:
        return self.fn.__name__

    def __repr__(self):
        return f"<{self.fn.__name__}Backward>"

    def receive(self, g: np.ndarray) -> np.ndarray:
        """The output's gradient, after its hooks; kept on the output tensor if it retains grad."""
        for hook in self.hooks or ():
            g = hook(g)
        if self.retained is not None:
            self.retained.accumulate_grad(g.copy())
        return g

    def backward(self, g: np.ndarray) -> list:
        """The gradient of each input (in that input's shape, None where it needs none) for output gradient g."""
        if self.ctx is None:
            raise RuntimeError(
                f"backward through {self.name()} a second time: its saved arrays were freed by the first "
                f"backward(); pass retain_graph=True to the first backward() to keep them")
        for counter, version, arr in self.saved:
            if counter.value != version:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{arr.dtype} {arr.shape}], saved by {self.name()}Backward, is at version "
                    f"{counter.value}; expected version {version} instead. Change it before the forward "
                    f"that uses it, or give that forward a .clone()")
        grads = _op_calls.backward(self.fn, self.ctx, g)
        return self._per_input(grads if isinstance(grads, (tuple, list)) else (grads,))

    def _per_input(self, grads) -> list:
        """Check a backward's result against the inputs: one gradient per input, each summed back to
        its input's shape (unbroadcast) and of its dtype."""
        if len(grads) != len(self.inputs):
            raise RuntimeError(
                f"function {self.name()}Backward returned {len(grads)} gradients, but {self.name()}.forward "
                f"took {len(self.inputs)} tensor inputs: return one per input (None for no gradient)")
        out = list(grads)
        for i, (t, gi) in enumerate(zip(self.inputs, grads)):
            if t is None or gi is None:
                continue
            if gi.shape != t.data.shape:
                out[i] = gi = unbroadcast(gi, t.data.shape, f"{self.name()}Backward, input {i}")
            if gi.dtype != t.data.dtype:
                raise RuntimeError(f"function {self.name()}Backward returned a {gi.dtype} gradient for input {i}, "
                                   f"a {t.dtype} tensor")
        return out

    def free(self) -> None:
        """Drop the saved arrays and the inputs, so their memory returns now."""
        self.ctx = None
        self.inputs = ()
        self.saved = ()


class Function:
    """Base class of every differentiable primitive. Subclasses define forward and backward."""

    @staticmethod
    def forward(ctx, *arrays, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def backward(ctx, g):  # pragma: no cover - abstract
        raise NotImplementedError

    returns_view = False    # True where forward may return a view of its first input (shares its version)

    @classmethod
    def apply(cls, *tensors, **kwargs):
        arrays = [_array_of(cls, i, t) for i, t in enumerate(tensors)]
        if not arrays:
            raise TypeError(f"{cls.__name__}.apply: expected at least one Tensor argument")
        ctx = Context()
        with ieee_quiet():
            out = _op_calls.forward(cls, ctx, arrays, kwargs)
        result = tensors[0].wrap(out)
        if cls.returns_view and np.may_share_memory(out, arrays[0]):
            result.version_counter = tensors[0].version_counter
        if _grad_enabled:
            needs = tuple(t.requires_grad for t in tensors)
            if any(needs):
                ctx.needs_input_grad = needs
                result.requires_grad = True
                inputs = tuple(t if n else None for t, n in zip(tensors, needs))
                result.grad_fn = Node(cls, ctx, inputs, _saved_versions(ctx.saved_arrays, tensors, result))
        return result


def _array_of(fn, i: int, t) -> np.ndarray:
    """The array of tensor argument i of fn.apply (a clear TypeError for anything else)."""
    if isinstance(t, np.ndarray) or not hasattr(t, "version_counter"):
        hint = "; wrap it in mt.tensor(...)" if isinstance(t, np.ndarray) else ""
        raise TypeError(f"{fn.__name__}.apply: argument {i} must be a Tensor, got {type(t).__name__}{hint} "
                        f"(non-tensor arguments go by keyword)")
    return t.data


def _saved_versions(saved_arrays, tensors, result) -> tuple:
    """(counter, version, array) for each saved array that is an input's or the output's array: what
    Node.backward compares. Arrays the forward made itself are private to the node and need no check."""
    versions = []
    for arr in saved_arrays:
        for t in (*tensors, result):
            if t.data is arr:
                versions.append((t.version_counter, t.version_counter.value, arr))
                break
    return tuple(versions)


# --------------------------------------------------------------------------------------------
# The graph walk
# --------------------------------------------------------------------------------------------

def unbroadcast(g: np.ndarray, shape: tuple, who: str = "backward") -> np.ndarray:
    """Sum a gradient of a broadcast result back to the operand's `shape` (the one place this happens)."""
    if g.shape == shape:
        return g
    extra = g.ndim - len(shape)
    if extra < 0 or any(n != 1 and n != m for n, m in zip(shape, g.shape[extra:])):
        raise RuntimeError(f"{who}: a gradient of shape {g.shape} does not sum back to the input's shape {shape}")
    kept = tuple(i + extra for i, n in enumerate(shape) if n == 1 and g.shape[i + extra] != 1)
    axes = tuple(range(extra)) + kept
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


def topological_order(root: Node) -> list:
    """Nodes reachable from root, each after every node that consumes it (iterative DFS, no recursion)."""
    order, visited = [], set()
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if node in visited:
            continue
        visited.add(node)
        stack.append((node, True))
        for t in node.inputs:
            if t is not None and t.grad_fn is not None and t.grad_fn not in visited:
                stack.append((t.grad_fn, False))
    order.reverse()
    return order


def run_backward(root, gradient: np.ndarray, retain_graph: bool = False) -> None:
    """Backpropagate `gradient` (an array of root's shape) from tensor `root` into every leaf's .grad."""
    if root.grad_fn is None:                                  # a leaf: the gradient goes straight to it
        root.accumulate_grad(gradient.copy())
        return
    grads = {root.grad_fn: gradient}                          # node -> gradient of its output, summed
    leaves = _LeafGrads(gradient)
    for node in topological_order(root.grad_fn):
        g = grads.pop(node, None)
        if g is None:                                         # nothing flows into this node
            continue
        for t, gi in zip(node.inputs, node.backward(node.receive(g))):
            if t is None or gi is None:
                continue
            if t.grad_fn is None:
                leaves.add(t, gi)
            else:
                grads[t.grad_fn] = grads[t.grad_fn] + gi if t.grad_fn in grads else gi
        if not retain_graph:
            node.free()
    leaves.deliver()


class _LeafGrads:
    """Gradients for the leaves, summed over the walk and handed to each leaf once at the end."""

    def __init__(self, caller_gradient: np.ndarray):
        self.sums = {}                                        # id(leaf) -> [leaf, summed gradient]
        self.owned = {id(caller_gradient)}                    # arrays a leaf must not take

    def add(self, leaf, g: np.ndarray) -> None:
        entry = self.sums.get(id(leaf))
        if entry is None:
            self.sums[id(leaf)] = [leaf, g]
        else:
            entry[1] = entry[1] + g

    def deliver(self) -> None:
        for leaf, g in self.sums.values():
            # a leaf keeps its .grad array and may later scale it in place (clip_grad_norm_), so it
            # must own it alone: not a view, not the caller's gradient, not another leaf's array
            if not (g.flags.owndata and g.flags.writeable and g.flags.c_contiguous) or id(g) in self.owned:
                g = np.array(g, order="C")
            self.owned.add(id(g))
            leaf.accumulate_grad(g)


# --------------------------------------------------------------------------------------------
# Finite-difference check
# --------------------------------------------------------------------------------------------

class GradcheckError(AssertionError):
    pass


def gradcheck(fn: Callable, inputs: Sequence, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, seed: int = 0) -> bool:
    """Compare backward with central finite differences, in float64.

    For a random upstream gradient v (fixed seed), the analytical vector-Jacobian product
    v^T J from backward() is compared, element by element of every input requiring grad, with
        (v . f(x + eps e_i) - v . f(x - eps e_i)) / (2 eps).
    Passes when |analytical - numerical| <= atol + rtol * |numerical| everywhere; otherwise raises
    GradcheckError (or returns False) naming the worst element.
    """
    inputs = tuple(inputs)
    diff_inputs = [(i, x) for i, x in enumerate(inputs) if getattr(x, "requires_grad", False)]
    for i, x in diff_inputs:
        if x.dtype != np.float64:
            raise TypeError(f"gradcheck: input {i} is {x.dtype}; finite differences need float64 inputs")
    if not diff_inputs:
        raise ValueError("gradcheck: no input requires grad")

    def outputs():
        out = fn(*inputs)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    rng = np.random.default_rng(seed)
    outs = outputs()
    vs = [rng.standard_normal(o.shape) for o in outs]
    for _, x in diff_inputs:
        x.grad = None
    for o, v in zip(outs, vs):
        if o.requires_grad:
            o.backward(v.astype(o.dtype), retain_graph=True)

    worst = (0.0, None)
    for i, x in diff_inputs:
        analytical = np.zeros_like(x.data) if x.grad is None else x.grad.data
        numerical = _numerical_vjp(outputs, vs, x.data, eps)
        err = np.abs(analytical - numerical) - (atol + rtol * np.abs(numerical))
        k = int(np.argmax(err)) if err.size else 0
        if err.size and err.reshape(-1)[k] > worst[0]:
            idx = tuple(int(j) for j in np.unravel_index(k, x.shape))  # (1, 2), not (np.int64(1), ...)
            worst = (float(err.reshape(-1)[k]), (i, idx, float(analytical[idx]), float(numerical[idx])))
    if worst[1] is None:
        return True
    i, idx, a, n = worst[1]
    msg = (f"gradcheck failed for input {i} at element {idx}: analytical {a!r} vs numerical {n!r} "
           f"(|diff| {abs(a - n):.3e} > atol {atol} + rtol {rtol} * |numerical|)")
    if raise_exception:
        raise GradcheckError(msg)
    return False


def _numerical_vjp(outputs: Callable, vs: list, x: np.ndarray, eps: float) -> np.ndarray:
    """(v . f(x + eps e_j) - v . f(x - eps e_j)) / (2 eps) for every element j of x (perturbed in place)."""
    numerical = np.empty_like(x)
    flat = x.reshape(-1)  # a view: perturbing it perturbs the input
    with no_grad():
        for j in range(flat.size):
            orig = flat[j]
            flat[j] = orig + eps
            fp = sum(float((o.data * v).sum()) for o, v in zip(outputs(), vs))
            flat[j] = orig - eps
            fm = sum(float((o.data * v).sum()) for o, v in zip(outputs(), vs))
            flat[j] = orig
            numerical.reshape(-1)[j] = (fp - fm) / (2 * eps)
    return numerical
