"""Reverse-mode automatic differentiation: grad mode, the Function base class, the graph walk, gradcheck.

Every primitive is a `Function` subclass (see ops.py and nn/functional.py) with two static
methods side by side:

    forward(ctx, *arrays, **kwargs) -> array        # NumPy in, NumPy out; saves on ctx what backward needs
    backward(ctx, g) -> tuple of arrays (or None)   # one gradient per input, the shape of the *output's* broadcast

`Function.apply(*tensors, **kwargs)` runs forward on the tensors' arrays and, when grad mode is on
and some input requires grad, records a `Node` (the output's `grad_fn`). `backward()` sorts the
nodes topologically without recursion, runs each backward in raw NumPy (no Tensor is created while
backpropagating), sums a gradient back to its input's shape in one place (`unbroadcast`), and frees
the saved arrays unless `retain_graph=True`.

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
import time
from typing import Callable, Sequence

import numpy as np

_grad_enabled = True
_PROFILE = None          # set by minitensor.profiler.profile while recording
_Tensor = None           # the Tensor class, bound by tensor.py (avoids an import cycle)


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
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
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

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper


class Context:
    """Scratch space a forward fills for its backward. `needs_input_grad[i]` says whether input i wants a gradient."""
    needs_input_grad: tuple = ()


class Node:
    """One recorded op application: the output tensor's grad_fn."""
    __slots__ = ("fn", "ctx", "inputs", "hooks", "retained", "__weakref__")

    def __init__(self, fn, ctx, inputs):
        self.fn = fn            # the Function subclass
        self.ctx = ctx          # its Context; None once freed
        self.inputs = inputs    # per forward input: the Tensor if it requires grad, else None
        self.hooks = None       # hooks registered on the (non-leaf) output tensor
        self.retained = None    # the output tensor when retain_grad() was called on it

    def name(self) -> str:
        return self.fn.__name__

    def __repr__(self):
        return f"<{self.fn.__name__}Backward>"


class Function:
    """Base class of every differentiable primitive. Subclasses define forward and backward."""

    @staticmethod
    def forward(ctx, *arrays, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def backward(ctx, g):  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def apply(cls, *tensors, **kwargs):
        ctx = Context()
        prof = _PROFILE
        if prof is None:
            out = cls.forward(ctx, *[t.data for t in tensors], **kwargs)
        else:
            t0 = time.perf_counter()
            out = cls.forward(ctx, *[t.data for t in tensors], **kwargs)
            prof.record(cls.__name__, "forward", time.perf_counter() - t0)
        result = _Tensor._wrap(out)
        if _grad_enabled:
            needs = tuple(t.requires_grad for t in tensors)
            if any(needs):
                ctx.needs_input_grad = needs
                result.requires_grad = True
                result._node = Node(cls, ctx, tuple(t if n else None for t, n in zip(tensors, needs)))
        return result


def unbroadcast(g: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum a gradient of a broadcast result back to the operand's `shape` (the one place this happens)."""
    if g.shape == shape:
        return g
    extra = g.ndim - len(shape)
    if extra < 0:
        raise RuntimeError(f"internal: gradient of shape {g.shape} cannot reduce to operand shape {shape}")
    axes = tuple(range(extra)) + tuple(i + extra for i, n in enumerate(shape) if n == 1 and g.shape[i + extra] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


def _topological_order(root_node: Node) -> list:
    """Nodes reachable from root, each after every node that consumes it (iterative DFS, no recursion)."""
    order, visited = [], set()
    stack = [(root_node, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        visited.add(id(node))
        stack.append((node, True))
        for t in node.inputs:
            if t is not None and t._node is not None and id(t._node) not in visited:
                stack.append((t._node, False))
    order.reverse()
    return order


def _call_hooks(hooks, g: np.ndarray) -> np.ndarray:
    for hook in hooks:
        r = hook(_Tensor._wrap(g))
        if r is not None:
            r = r.data if isinstance(r, _Tensor) else np.asarray(r)
            if r.shape != g.shape:
                raise ValueError(f"hook {hook!r} returned a gradient of shape {r.shape}, expected {g.shape}")
            g = r
    return g


def run_backward(root, gradient: np.ndarray, retain_graph: bool = False) -> None:
    """Backpropagate `gradient` (an array of root's shape) from tensor `root` into every leaf's .grad."""
    if root._node is None:  # a leaf: the gradient goes straight to it
        _accumulate_leaf(root, gradient.copy())
        return
    grads = {id(root._node): gradient}
    leaf_grads = {}                          # id(leaf) -> [leaf, summed gradient]
    owned = {id(gradient)}                   # arrays a leaf must not take: the caller's gradient, any handed out
    prof = _PROFILE
    for node in _topological_order(root._node):
        g = grads.pop(id(node), None)
        if g is None:
            continue
        if node.hooks:
            g = _call_hooks(node.hooks, g)
        if node.retained is not None:
            t = node.retained
            t.grad = _Tensor._wrap(g.copy()) if t.grad is None else _Tensor._wrap(t.grad.data + g)
        ctx = node.ctx
        if ctx is None:
            raise RuntimeError(
                f"backward through {node.fn.__name__} a second time: its saved arrays were freed by the first "
                f"backward(); pass retain_graph=True to the first backward() to keep them")
        if prof is None:
            in_grads = node.fn.backward(ctx, g)
        else:
            t0 = time.perf_counter()
            in_grads = node.fn.backward(ctx, g)
            prof.record(node.fn.__name__, "backward", time.perf_counter() - t0)
        for t, gi in zip(node.inputs, in_grads):
            if t is None or gi is None:
                continue
            if gi.shape != t.shape:
                gi = unbroadcast(gi, t.shape)
            if t._node is not None:
                key = id(t._node)
                prev = grads.get(key)
                grads[key] = gi if prev is None else prev + gi
            else:
                entry = leaf_grads.get(id(t))
                if entry is None:
                    leaf_grads[id(t)] = [t, gi]
                else:
                    entry[1] = entry[1] + gi
        if not retain_graph:
            node.ctx = None
            node.inputs = ()
    for t, g in leaf_grads.values():
        if not (g.flags.owndata and g.flags.writeable and g.flags.c_contiguous) or id(g) in owned:
            g = np.array(g, order="C")
        owned.add(id(g))
        _accumulate_leaf(t, g)


def _accumulate_leaf(t, g: np.ndarray) -> None:
    if t._hooks:
        g = _call_hooks(t._hooks, g)
    if g.dtype != t.data.dtype:
        raise RuntimeError(f"internal: gradient dtype {g.dtype} differs from leaf dtype {t.data.dtype}")
    if t.grad is None:
        t.grad = _Tensor._wrap(g)
    else:
        t.grad.data = t.grad.data + g


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
    for i, x in enumerate(inputs):
        if isinstance(x, _Tensor) and x.requires_grad and x.dtype != np.float64:
            raise TypeError(f"gradcheck: input {i} is {x.dtype}; finite differences need float64 inputs")
    diff_inputs = [(i, x) for i, x in enumerate(inputs) if isinstance(x, _Tensor) and x.requires_grad]
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
    total = sum((o * _Tensor._wrap(v)).sum() for o, v in zip(outs, vs) if o.requires_grad)
    if isinstance(total, _Tensor):
        total.backward()

    worst = (0.0, None)
    for i, x in diff_inputs:
        analytical = np.zeros_like(x.data) if x.grad is None else x.grad.data
        numerical = np.empty_like(x.data)
        flat = x.data.reshape(-1)  # a view: perturbing it perturbs the input
        with no_grad():
            for j in range(flat.size):
                orig = flat[j]
                flat[j] = orig + eps
                fp = sum(float((o.data * v).sum()) for o, v in zip(outputs(), vs))
                flat[j] = orig - eps
                fm = sum(float((o.data * v).sum()) for o, v in zip(outputs(), vs))
                flat[j] = orig
                numerical.reshape(-1)[j] = (fp - fm) / (2 * eps)
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
