"""Reverse-mode automatic differentiation: the Function base class, the graph walk, grad(), gradcheck
and gradgradcheck. Grad mode (per thread) lives in grad_mode.py; no_grad & co. are re-exported here.

Every primitive is a `Function` subclass (see the ops/ package) with two static methods side by side:

    forward(ctx, *arrays, **kwargs) -> array        # NumPy in, NumPy out; saves on ctx what backward needs
    backward(ctx, g) -> tuple of gradients (or None)  # one per input, the shape of the *output's* broadcast

`Function.apply(*tensors, **kwargs)` runs forward on the tensors' arrays and, when grad mode is on
and some input requires grad, records a `Node` (the output's `grad_fn`). `backward()` and `grad()`
sort the nodes topologically without recursion, run each backward, sum a gradient back to its
input's shape in one place (`unbroadcast`), and free the saved arrays unless `retain_graph=True`.

Higher order (docs/higher_order.md). A backward is written once, with operators and `ctx.xp`, so it
runs on two kinds of values. A first-order walk hands it arrays and the NumPy namespace: no Tensor is
created while backpropagating. With create_graph=True the walk hands it Tensors (g, and the saved
inputs and output themselves, the output rebuilt around its node) and the Tensor namespace, with grad
mode on: the backward's own operations are recorded, and the gradients it returns are differentiable.

In-place safety (PyTorch's version counters): every tensor carries a VersionCounter that each
in-place change bumps (fill_, add_, __setitem__, an optimizer step, ...); a view shares its base's
counter. A node records the versions of the inputs and output it saved (`save_for_backward`), and
its backward refuses to run on an array that changed since: a wrong gradient becomes an error.

Floating-point edges (log 0, x/0, overflow) give IEEE values silently, as in PyTorch: forwards
(Function.apply) and the backward walk (backward, grad) run under `ieee_quiet()`, the one place
NumPy's RuntimeWarnings are turned off.

This module knows a tensor only by what the walk uses: `data`, `requires_grad`, `grad_fn`, `shape`,
`dtype`, `version_counter`, `accumulate_grad(g)`, `apply_hooks(g)` and `wrap(array)` (a new Tensor around an array).
tensor.py's Tensor provides them, so the import order is one way: tensor.py -> ops/ -> autograd.py.

Deviation from PyTorch, flagged: after a backward without retain_graph, every node on the path
is freed, also one that saved nothing (`y = x + 1`). PyTorch lets a second loss backpropagate
through such save-nothing nodes; here it raises the "second time" error. The reason: one rule
(a node that ran is spent) that needs no per-op knowledge of what was saved. A freed node keeps its
inputs (leaves and Edges, no arrays), as PyTorch keeps the graph's shape: grad() then knows that a
path to its inputs goes through a freed node and raises, rather than reporting the input "not used"
(or None), which would read d2/dx2 exp(x) as 0.

A backward never writes into the incoming `g` or a saved array: the same array can flow to
several inputs (x + x), so gradients are combined by creating new arrays, and a leaf receives an
array it owns alone.
"""

from __future__ import annotations

import copy
import sys
import threading
from collections.abc import Callable, Sequence

import numpy as np

from .grad_mode import _state as _grad_mode
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401 (mt.autograd.no_grad, ...)


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
    that times each call (`set_op_calls`); the engine only asks whether this thread installed calls."""

    def forward(self, fn, ctx, arrays, kwargs):
        return fn.forward(ctx, *arrays, **kwargs)

    def backward(self, fn, ctx, g):
        return fn.backward(ctx, g)


_PLAIN_CALLS = OpCalls()
# Per thread, as grad mode: a profile records the ops of the thread that opened it (as torch's
# autograd profiler, which is thread-local), and two threads profiling at once each put back their own
# previous calls. Only threads that installed calls of their own are listed, so while nothing is being
# profiled an op pays for one test of an empty dict (_op_calls_here), not a thread-local lookup.
_installed_calls: dict = {}  # thread id -> OpCalls


def _op_calls_here() -> OpCalls:
    """How this thread calls primitives: its own installed calls (a profile), else the plain ones."""
    return _installed_calls.get(threading.get_ident(), _PLAIN_CALLS)


def set_op_calls(calls: OpCalls) -> OpCalls:
    """Install `calls` as the way this thread's forwards and backwards are run; returns the previous one."""
    tid = threading.get_ident()
    previous = _installed_calls.get(tid, _PLAIN_CALLS)
    if type(calls) is OpCalls:  # the plain way: nothing to list
        _installed_calls.pop(tid, None)
    else:
        _installed_calls[tid] = calls
    return previous


# --------------------------------------------------------------------------------------------
# Function, Context, Node
# --------------------------------------------------------------------------------------------


class Context:
    """Scratch space a forward fills for its backward.

    `needs_input_grad[i]` says whether input i wants a gradient. `save_for_backward(*arrays)` keeps
    input or output arrays that backward reads (as `ctx.saved_arrays`); other values (shapes, dims,
    intermediate arrays the forward made) are plain attributes.

    `xp` is the namespace a backward formula calls (ops/namespace.py): NumPy on arrays for a
    first-order backward, recorded primitives on Tensors under create_graph=True. Then the walk also
    hands the backward `saved_arrays` as the input and output Tensors themselves (`create_graph` is
    True), so the graph of the backward reaches them."""

    needs_input_grad: tuple = ()
    saved_arrays: tuple = ()
    xp = None  # ARRAYS, installed by ops/__init__.py (register_namespaces)
    create_graph = False

    def save_for_backward(self, *arrays) -> None:
        self.saved_arrays = arrays

    def intermediate(self, stored, helper: Callable, *args):
        """A value the forward computed for backward (xhat, softmax probabilities, ...): `stored` as is
        in a first-order backward; under create_graph recomputed as `helper(ctx.xp, *args)` from the
        saved Tensors (the same helper the forward called), so that it is differentiable too."""
        return helper(self.xp, *args) if self.create_graph else stored


_TENSORS = None  # the Tensor namespace, installed by ops/__init__.py


def register_namespaces(arrays, tensors) -> None:
    """Install the two namespaces of ops/namespace.py (ops/ imports this module, not the reverse)."""
    global _TENSORS
    Context.xp, _TENSORS = arrays, tensors


_OUTPUT = -1  # Node.saved: the source of a saved array that is the op's output


class Node:
    """One recorded op application: the output tensor's grad_fn.

    Each Function has its own subclass, made once with the Function and named after it as PyTorch names
    its nodes: `type(y.grad_fn).__name__`, `repr` and `name()` all say "TanhBackward" (PyTorch's
    "TanhBackward0" numbers the overloads of an op's derivative formula; an op here has one formula)."""

    __slots__ = ("ctx", "inputs", "saved", "hooks", "retained", "__weakref__")
    fn = None  # the Function subclass: a class attribute of each Function's node class (node_class_of)

    def __init__(self, ctx, inputs, saved=()):
        self.ctx = ctx  # its Context; None once freed
        self.inputs = inputs  # per forward input: a leaf Tensor, an Edge to a non-leaf, or None (no grad)
        self.saved = saved  # (VersionCounter, version when saved, array, input index or _OUTPUT)
        self.hooks = None  # the (non-leaf) output tensor's hooks, as array -> array functions
        # a weak reference to the output tensor when retain_grad() was called on it: a strong one would
        # make a cycle (the tensor holds its grad_fn), which only the gc breaks, keeping the graph alive
        self.retained = None

    def name(self) -> str:
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__}>"

    def receive(self, g):
        """The output's gradient, after its hooks; kept on the output tensor if it retains grad (by
        backward() and by grad() alike, as in PyTorch)."""
        for hook in self.hooks or ():
            g = hook(g)
        t = self.retained() if self.retained is not None else None
        if t is not None:
            t.accumulate_grad(g if _is_tensor(g) else g.copy())
        return g

    def backward(self, g, create_graph: bool = False) -> list:
        """The gradient of each input (in that input's shape, None where it needs none) for output gradient g.
        create_graph: g is a Tensor, and the backward runs on Tensors, recorded as a graph of its own."""
        if self.ctx is None:
            raise RuntimeError(
                f"backward through {self.name()} a second time: its saved arrays were freed by the first "
                f"backward(); pass retain_graph=True (or create_graph=True) to the first backward() or grad() "
                f"to keep them"
            )
        for counter, version, arr, _ in self.saved:
            if counter.value != version:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{arr.dtype} {arr.shape}], saved by {self.name()}, is at version "
                    f"{counter.value}; expected version {version} instead. Change it before the forward "
                    f"that uses it, or give that forward a .clone()"
                )
        ctx = self._tensor_context() if create_graph else self.ctx
        grads = (_op_calls_here() if _installed_calls else _PLAIN_CALLS).backward(self.fn, ctx, g)
        return self._per_input(grads if isinstance(grads, (tuple, list)) else (grads,), create_graph)

    def _tensor_context(self) -> Context:
        """A copy of ctx for a backward on Tensors: the Tensor namespace, and each saved input or output
        as its Tensor (an output rebuilt around this node, a non-leaf input around its Edge's producer,
        so that gradients flow through them)."""
        ctx = copy.copy(self.ctx)
        ctx.xp, ctx.create_graph = _TENSORS, True
        like = next(t for t in self.inputs if t is not None)
        sources = {id(arr): (counter, src) for counter, _, arr, src in self.saved}
        saved = []
        for arr in self.ctx.saved_arrays:
            counter, src = sources.get(id(arr), (None, None))
            if src is None:  # an array the forward made: private to this node
                saved.append(arr)
                continue
            ref = self.inputs[src] if src != _OUTPUT else None
            if ref is not None and not isinstance(ref, Edge):  # a leaf: the Tensor itself
                saved.append(ref)
                continue
            t = like.wrap(arr)  # the output, a non-leaf input, or an input outside the graph
            t.version_counter = counter
            if src == _OUTPUT:
                t.requires_grad, t.grad_fn = True, self
            elif ref is not None:
                t.requires_grad, t.grad_fn = True, ref.grad_fn
            saved.append(t)
        ctx.saved_arrays = tuple(saved)
        return ctx

    def _per_input(self, grads, create_graph: bool = False) -> list:
        """Check a backward's result against the inputs: one gradient per input, each summed back to
        its input's shape (unbroadcast) and of its dtype."""
        if len(grads) != len(self.inputs):
            raise RuntimeError(
                f"function {self.name()} returned {len(grads)} gradients, but {self.fn.__name__}.forward "
                f"took {len(self.inputs)} tensor inputs: return one per input (None for no gradient)"
            )
        out = list(grads)
        for i, (t, gi) in enumerate(zip(self.inputs, grads)):
            if t is None or gi is None:
                continue
            if create_graph and not _is_tensor(gi):
                raise RuntimeError(
                    f"function {self.name()} returned a NumPy array for input {i} under create_graph=True: "
                    f"its backward cannot be differentiated again. Write it with operators and ctx.xp on "
                    f"ctx.saved_arrays (see docs/higher_order.md)"
                )
            if gi.shape != t.shape:
                out[i] = gi = unbroadcast(
                    gi, t.shape, f"{self.name()}, input {i}", _TENSORS if create_graph else Context.xp
                )
            if gi.dtype != t.dtype:
                raise RuntimeError(
                    f"function {self.name()} returned a {gi.dtype} gradient for input {i}, a {t.dtype} tensor"
                )
        return out

    def free(self) -> None:
        """Drop the saved arrays, so their memory returns now. The inputs stay (leaves and Edges, no
        arrays), as in PyTorch: the graph's shape tells a later grad() whether its path goes through this
        node, whose backward then raises the "second time" error instead of reading as "not used"."""
        self.ctx = None
        self.saved = ()


class Edge:
    """What a node keeps of a non-leaf input: the node that produced it, its shape and dtype (and the
    tensor class's `wrap`, for a backward on Tensors), not its array.

    Keeping the input Tensor would keep every activation alive until the backward reaches its consumer,
    whether or not the consumer's backward reads it (a ReLU's input, a dropout's input): what a backward
    reads, its forward saves (save_for_backward), as in PyTorch. A leaf input is kept as itself: the walk
    hands it its gradient."""

    __slots__ = ("grad_fn", "shape", "dtype", "wrap")

    def __init__(self, t):
        self.grad_fn, self.shape, self.dtype, self.wrap = t.grad_fn, t.data.shape, t.data.dtype, t.wrap

    def __repr__(self):
        return f"<Edge from {self.grad_fn.name()} {self.shape} {self.dtype}>"


class Function:
    """Base class of every differentiable primitive. Subclasses define forward and backward."""

    @staticmethod
    def forward(ctx, *arrays, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def backward(ctx, g):  # pragma: no cover - abstract
        raise NotImplementedError

    returns_view = False  # True where forward may return a view of its first input (shares its version)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # the class of this op's nodes, made once here, not per op: TanhBackward for Tanh
        cls._node_class = type(f"{cls.__name__}Backward", (Node,), {"__slots__": (), "fn": cls})

    @classmethod
    def apply(cls, *tensors, **kwargs):
        arrays = [_array_of(cls, i, t) for i, t in enumerate(tensors)]
        if not arrays:
            raise TypeError(f"{cls.__name__}.apply: expected at least one Tensor argument")
        ctx = Context()
        with ieee_quiet():
            out = (_op_calls_here() if _installed_calls else _PLAIN_CALLS).forward(cls, ctx, arrays, kwargs)
        result = tensors[0].wrap(out)
        if cls.returns_view and np.may_share_memory(out, arrays[0]):
            result.version_counter = tensors[0].version_counter
        if _grad_mode.enabled:
            needs = tuple(t.requires_grad for t in tensors)
            if any(needs):
                ctx.needs_input_grad = needs
                result.requires_grad = True
                inputs = tuple((t if t.grad_fn is None else Edge(t)) if n else None for t, n in zip(tensors, needs))
                result.grad_fn = cls._node_class(ctx, inputs, _saved_versions(ctx.saved_arrays, tensors, result))
        return result


def _array_of(fn, i: int, t) -> np.ndarray:
    """The array of tensor argument i of fn.apply (a clear TypeError for anything else)."""
    if isinstance(t, np.ndarray) or not hasattr(t, "version_counter"):
        hint = "; wrap it in mt.tensor(...)" if isinstance(t, np.ndarray) else ""
        raise TypeError(
            f"{fn.__name__}.apply: argument {i} must be a Tensor, got {type(t).__name__}{hint} "
            f"(non-tensor arguments go by keyword)"
        )
    return t.data


def _saved_versions(saved_arrays, tensors, result) -> tuple:
    """(counter, version, array, source) for each saved array that is an input's (source: its index) or the
    output's array (_OUTPUT): what Node.backward compares, and what it hands a backward as Tensors under
    create_graph. Arrays the forward made itself are private to the node and need no check."""
    versions = []
    for arr in saved_arrays:
        for src, t in (*enumerate(tensors), (_OUTPUT, result)):
            if t.data is arr:
                versions.append((t.version_counter, t.version_counter.value, arr, src))
                break
    return tuple(versions)


# --------------------------------------------------------------------------------------------
# The graph walk
# --------------------------------------------------------------------------------------------


def unbroadcast(g, shape: tuple, who: str = "backward", xp=None):
    """Sum a gradient of a broadcast result back to the operand's `shape` (the one place this happens)."""
    if g.shape == shape:
        return g
    extra = g.ndim - len(shape)
    if extra < 0 or any(n != 1 and n != m for n, m in zip(shape, g.shape[extra:])):
        raise RuntimeError(f"{who}: a gradient of shape {g.shape} does not sum back to the input's shape {shape}")
    kept = tuple(i + extra for i, n in enumerate(shape) if n == 1 and g.shape[i + extra] != 1)
    axes = tuple(range(extra)) + kept
    if axes:
        g = (xp or Context.xp).sum(g, axis=axes, keepdims=True)
    return g.reshape(shape)


def topological_order(roots) -> list:
    """Nodes reachable from the root node(s), each after every node that consumes it (iterative DFS)."""
    order, visited = [], set()
    for root in roots if isinstance(roots, (list, tuple)) else [roots]:
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


def run_backward(roots, gradients, retain_graph: bool = False, create_graph: bool = False, inputs=None):
    """Backpropagate `gradients` (one per root tensor, of its shape) through the graph.

    inputs=None: every leaf's .grad accumulates its gradient (Tensor.backward). Otherwise only the nodes
    that lead to `inputs` run, and their gradients are returned instead (grad()): a list with None for
    an input that the roots do not reach. create_graph: gradients are Tensors and each node's backward
    runs on Tensors (Node.backward), so the result is differentiable again."""
    roots, gradients = list(roots), list(gradients)
    sink = _LeafGrads(gradients) if inputs is None else _InputGrads(inputs)
    grads = {}  # node -> gradient of its output, summed
    for root, g in zip(roots, gradients):
        if root.grad_fn is None:  # a leaf: the gradient goes straight to it
            sink.add(root, g if _is_tensor(g) else g.copy())
        else:
            grads[root.grad_fn] = grads[root.grad_fn] + g if root.grad_fn in grads else g
    order = topological_order([r.grad_fn for r in roots if r.grad_fn is not None])
    needed = None if inputs is None else sink.nodes_to_run(order)
    for node in order:
        g = grads.pop(node, None)
        if g is None:  # nothing flows into this node
            continue
        if needed is not None and node not in needed and node not in sink.nodes:
            continue  # grad(): off the path to the inputs, so its hooks do not run either (as in PyTorch)
        g = node.receive(g)
        if needed is not None:
            sink.capture(node, g)
            if node not in needed:  # nothing upstream of this node is asked for
                continue
        for t, gi in zip(node.inputs, node.backward(g, create_graph)):
            if t is None or gi is None:
                continue
            if t.grad_fn is None:
                sink.add(t, gi)
            else:
                grads[t.grad_fn] = grads[t.grad_fn] + gi if t.grad_fn in grads else gi
        if not retain_graph:
            node.free()
    return sink.deliver()


class _LeafGrads:
    """Gradients for the leaves, summed over the walk and handed to each leaf once at the end."""

    def __init__(self, caller_gradients: list):
        self.sums = {}  # id(leaf) -> [leaf, summed gradient]
        self.owned = {id(_array(g)) for g in caller_gradients}  # arrays a leaf must not take

    def add(self, leaf, g) -> None:
        entry = self.sums.get(id(leaf))
        if entry is None:
            self.sums[id(leaf)] = [leaf, g]
        else:
            entry[1] = entry[1] + g

    def deliver(self) -> None:
        for leaf, g in self.sums.values():
            # a leaf keeps its .grad array and may later scale it in place (clip_grad_norm_), so it
            # must own it alone: not a view, not the caller's gradient, not another leaf's array
            a = _array(g)
            if not (a.flags.owndata and a.flags.writeable and a.flags.c_contiguous) or id(a) in self.owned:
                g = g.clone() if _is_tensor(g) else np.array(g, order="C")
            self.owned.add(id(_array(g)))
            leaf.accumulate_grad(g)


def _array(g) -> np.ndarray:
    """The array of a gradient: itself, or a Tensor's under create_graph."""
    return g.data if _is_tensor(g) else g


def _is_tensor(x) -> bool:
    return hasattr(x, "version_counter")


class _InputGrads:
    """What grad() collects: the summed gradient of each requested input, leaf or not."""

    def __init__(self, inputs):
        self.inputs = inputs
        self.leaves = {id(t) for t in inputs if t.grad_fn is None}
        self.nodes = {t.grad_fn for t in inputs if t.grad_fn is not None}
        self.found = {}  # id(leaf) or node -> gradient
        self.reached, self.reached_leaves = set(), set()  # nodes and leaves the walk reaches

    def nodes_to_run(self, order: list) -> set:
        """The nodes whose backward leads to a requested input (producers first, so one pass)."""
        run = set()
        for node in reversed(order):
            if any(
                t is not None
                and (id(t) in self.leaves if t.grad_fn is None else t.grad_fn in self.nodes or t.grad_fn in run)
                for t in node.inputs
            ):
                run.add(node)
        self.reached = run | (self.nodes & set(order))
        self.reached_leaves = {id(t) for node in run for t in node.inputs if t is not None} & self.leaves
        return run

    def capture(self, node, g) -> None:
        if node in self.nodes:
            self.found[node] = g

    def add(self, leaf, g) -> None:
        if id(leaf) in self.leaves:
            key = id(leaf)
            self.found[key] = self.found[key] + g if key in self.found else g
            self.reached_leaves.add(key)

    def deliver(self) -> list:
        """Per input: its gradient, zeros where the graph reaches it but nothing flowed, None if unreached."""
        out = []
        for t in self.inputs:
            key = id(t) if t.grad_fn is None else t.grad_fn
            g = self.found.get(key)
            if g is not None and t.grad_fn is None:  # a leaf's hooks, on its summed gradient (a non-leaf's
                g = t.apply_hooks(g)  # ran in Node.receive before capture), as PyTorch applies them
            if g is None and key in (self.reached_leaves if t.grad_fn is None else self.reached):
                g = np.zeros(t.shape, dtype=t.dtype)
            out.append(g)
        return out


# --------------------------------------------------------------------------------------------
# The entry points: Tensor.backward and grad
# --------------------------------------------------------------------------------------------


def _as_tuple(x, what: str) -> tuple:
    xs = tuple(x) if isinstance(x, (tuple, list)) else (x,)
    for i, t in enumerate(xs):
        if not hasattr(t, "version_counter"):
            raise TypeError(f"{what} {i} must be a Tensor, got {type(t).__name__}")
    return xs


def root_gradient(output, gradient, create_graph: bool, who: str):
    """The gradient a backward starts from for `output`: ones for a one-element output, else `gradient`
    checked against the output's shape and dtype. An array, or a Tensor under create_graph."""
    if gradient is None:
        if output.data.size != 1:
            raise RuntimeError(
                f"{who}: grad can be implicitly created only for scalar outputs; this output has "
                f"shape {output.shape}: pass a gradient of that shape (grad_outputs= / gradient=)"
            )
        g = np.ones(output.shape, dtype=output.dtype)
    else:
        g = gradient.data if hasattr(gradient, "version_counter") else np.asarray(gradient)
        if g.shape != output.shape:
            raise RuntimeError(f"{who}: the gradient has shape {g.shape}, expected the output's shape {output.shape}")
        if g.dtype != output.dtype:
            raise TypeError(f"{who}: the gradient has dtype {g.dtype}, expected the output's dtype {output.dtype}")
        if create_graph and hasattr(gradient, "version_counter"):
            return gradient  # keeps its graph: the result depends on it
    return output.wrap(g) if create_graph else g


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False) -> None:
    """torch.autograd.backward: accumulate the gradients of `tensors` (one or a sequence), weighted by
    `grad_tensors` (None: ones, for one-element tensors), into every leaf's .grad. Tensor.backward calls it."""
    tensors = _as_tuple(tensors, "tensor")
    grad_tensors = (None,) * len(tensors) if grad_tensors is None else _grads_per_output(grad_tensors, tensors)
    for t in tensors:
        if not t.requires_grad:
            raise RuntimeError(
                "backward(): this tensor does not require grad and has no grad_fn "
                "(was it computed under no_grad, or from tensors without requires_grad=True?)"
            )
    gs = [root_gradient(t, g, create_graph, "backward()") for t, g in zip(tensors, grad_tensors)]
    retain = create_graph if retain_graph is None else retain_graph
    with set_grad_enabled(create_graph), ieee_quiet():  # IEEE values at the edges, no NumPy warnings
        run_backward(tensors, gs, retain_graph=retain, create_graph=create_graph)


def _grads_per_output(grads, outputs: tuple) -> tuple:
    grads = tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)
    if len(grads) != len(outputs):
        raise ValueError(f"{len(grads)} gradients given for {len(outputs)} outputs: one per output (None for ones)")
    return grads


def grad(
    outputs, inputs, grad_outputs=None, retain_graph=None, create_graph: bool = False, allow_unused: bool = False
) -> tuple:
    """The gradients of `outputs` with respect to `inputs`, as torch.autograd.grad: sum over outputs of
    grad_outputs[i] . d outputs[i] / d input, one Tensor per input (leaf or not); .grad is left alone.

    grad_outputs: one gradient per output (None: ones, for a one-element output). retain_graph defaults
    to create_graph. create_graph=True records the backward, so the result can be differentiated again.
    allow_unused=True returns None for an input the outputs do not depend on; otherwise that is an error."""
    outputs, inputs = _as_tuple(outputs, "output"), _as_tuple(inputs, "input")
    grad_outputs = (None,) * len(outputs) if grad_outputs is None else _grads_per_output(grad_outputs, outputs)
    for i, o in enumerate(outputs):
        if not o.requires_grad:
            raise RuntimeError(f"grad: output {i} does not require grad and has no grad_fn")
    for i, t in enumerate(inputs):
        if not t.requires_grad:
            raise RuntimeError(f"grad: input {i} (shape {t.shape}) does not require grad, so it has no gradient")
    gs = [root_gradient(o, g, create_graph, f"grad: output {i}") for i, (o, g) in enumerate(zip(outputs, grad_outputs))]
    retain = create_graph if retain_graph is None else retain_graph
    with set_grad_enabled(create_graph), ieee_quiet():
        found = run_backward(outputs, gs, retain_graph=retain, create_graph=create_graph, inputs=inputs)
    result, taken = [], {id(g) for g in gs}  # arrays a result must not share
    for i, (t, g) in enumerate(zip(inputs, found)):
        if g is None and not allow_unused:
            raise RuntimeError(
                f"grad: input {i} (shape {t.shape}) was not used to compute the outputs; "
                f"pass allow_unused=True to get None for it"
            )
        if g is not None and not _is_tensor(g):  # the caller may write into it: an array of its own
            g = np.asarray(g)
            if not (g.flags.writeable and g.flags.owndata) or id(g) in taken:
                g = g.copy()
            taken.add(id(g))
            g = t.wrap(g)
        result.append(g)
    return tuple(result)


# --------------------------------------------------------------------------------------------
# Finite-difference check
# --------------------------------------------------------------------------------------------


class GradcheckError(AssertionError):
    pass


def gradcheck(
    fn: Callable,
    inputs: Sequence,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    seed: int = 0,
) -> bool:
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
    msg = (
        f"gradcheck failed for input {i} at element {idx}: analytical {a!r} vs numerical {n!r} "
        f"(|diff| {abs(a - n):.3e} > atol {atol} + rtol {rtol} * |numerical|)"
    )
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


def gradgradcheck(
    fn: Callable,
    inputs: Sequence,
    grad_outputs: Sequence | None = None,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    seed: int = 0,
) -> bool:
    """Check second derivatives with finite differences, as torch.autograd.gradgradcheck.

    The first derivative (x, g) -> grad(fn(x), x, g, create_graph=True) is itself checked by gradcheck:
    its backward (the second-order backward) against central differences of it, with respect to the
    inputs x and to the upstream gradient g. grad_outputs: g, one per output of fn (random float64
    tensors requiring grad by default)."""
    inputs = tuple(inputs)
    outs = fn(*inputs)
    outs = [o for o in (outs if isinstance(outs, (tuple, list)) else [outs]) if o.requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(seed + 1)
        grad_outputs = [o.wrap(rng.standard_normal(o.shape)) for o in outs]
        for g in grad_outputs:
            g.requires_grad = True
    grad_outputs = tuple(grad_outputs)
    if len(grad_outputs) != len(outs):
        raise ValueError(f"gradgradcheck: {len(grad_outputs)} grad_outputs for {len(outs)} outputs that require grad")
    n = len(inputs)

    def first_derivative(*args):
        xs, gs = args[:n], args[n:]
        with enable_grad():
            ys = fn(*xs)
            ys = [y for y in (ys if isinstance(ys, (tuple, list)) else [ys]) if y.requires_grad]
            wrt = [x for x in xs if getattr(x, "requires_grad", False)]
            found = grad(ys, wrt, gs, create_graph=True, allow_unused=True)
        return tuple(x.wrap(np.zeros(x.shape, x.dtype)) if d is None else d for d, x in zip(found, wrt))

    return gradcheck(
        first_derivative,
        inputs + grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        seed=seed,
    )


# mt.autograd.functional, as torch.autograd.functional: imported last because it builds on grad() above
# (noqa: E402 for that reason). Registering it under the dotted name also makes the torch spelling
# `from minitensor.autograd.functional import hvp` work, although autograd is a module, not a package.
from . import autograd_functional as functional  # noqa: E402

sys.modules[__name__ + ".functional"] = functional
