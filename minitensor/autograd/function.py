"""Function, Context, Node and Edge: how a primitive runs its forward and records its backward.

Every primitive is a `Function` subclass (see the ops/ package) with two static methods side by side:

    forward(ctx, *arrays, **kwargs) -> array        # NumPy in, NumPy out; saves on ctx what backward needs
    backward(ctx, g) -> tuple of gradients (or None)  # one per input, the shape of the *output's* broadcast

`Function.apply(*tensors, **kwargs)` runs forward on the tensors' arrays and, when grad mode is on
and some input requires grad, records a `Node` (the output's `grad_fn`). Under no_grad, with no forward-mode
level open (or inside a forward-mode rule) and no profile installed, nothing can be recorded, and apply takes its
inference path (`_apply_untracked`): the forward and the result, nothing else. The walk (engine.py) runs
each node's backward, and the node sums a gradient back to its input's shape in one place
(`unbroadcast`, called by `Node._per_input`). How the engine calls a forward or a backward is
`OpCalls`, the profiler's attachment point (`set_op_calls`).

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
(Function.apply) and the backward walk (backward, grad) run under `ieee_quiet()` (quiet.py), the one place
NumPy's RuntimeWarnings are turned off.

This module knows a tensor only by what the walk uses: `data`, `requires_grad`, `grad_fn`, `shape`,
`dtype`, `version_counter`, `no_grad_view`, `accumulate_grad(g)`, `apply_hooks(g)` and `wrap(array)` (a new Tensor
around an array).
tensor.py's Tensor provides them, so the import order is one way: tensor.py -> ops/ -> autograd/.
`is_tensor_like(x)` is that test, the one every module asks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from ..devices import CPU, device_of, is_array, same_device, to_device
from .anomaly_mode import anomaly as _anomaly  # and `_anomaly.enabled`: whether anomaly mode is on
from .anomaly_mode import check_gradients, forward_trace, note_forward_call
from .grad_mode import state as _grad_mode  # the hot path reads `_grad_mode.enabled`: one attribute, per op
from .quiet import ieee_quiet, run_quietly
from .saved import HOOK_STACKS, pack_node, unpack_node
from .tangents import dual_state as _dual  # and `_dual.level`: whether forward mode is on (tangents.py)
from .tangents import propagate, set_tangent, tangent_of


class VersionCounter:
    """How many in-place changes a tensor's array has had; a view shares its base's counter."""

    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


def is_tensor_like(x) -> bool:
    """Whether x is a Tensor, known by what the engine uses (its version counter): the one such test."""
    return hasattr(x, "version_counter")


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
    input or output arrays that backward reads (as `ctx.saved_arrays`); `save(name=array)` keeps an
    array the forward made (a mask, row statistics), read back as `ctx.name`. Every array a backward
    reads is kept by one of the two: they are what saved-tensor hooks and the listing see (saved.py).
    Other values (shapes, dims, Python numbers) are plain attributes.

    `xp` is the namespace a backward formula calls (ops/namespace.py): NumPy on arrays for a
    first-order backward, recorded primitives on Tensors under create_graph=True. Then the walk also
    hands the backward `saved_arrays` as the input and output Tensors themselves (`create_graph` is
    True), so the graph of the backward reaches them."""

    needs_input_grad: tuple = ()
    saved_arrays: tuple = ()
    saved_names: tuple = ()  # the names given to save(), in order
    xp = None  # ARRAYS, installed by ops/__init__.py (register_namespaces)
    create_graph = False

    def save_for_backward(self, *arrays) -> None:
        self.saved_arrays = arrays

    def save(self, **arrays) -> None:
        """Keep arrays the forward made for the backward, each read back as ctx.<name> (a tuple of arrays
        counts each array in it). Not torch's API: torch's C++ nodes keep such buffers as saved variables."""
        self.__dict__.update(arrays)
        self.saved_names += tuple(n for n in arrays if n not in self.saved_names)

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

    __slots__ = ("ctx", "inputs", "saved", "hooks", "retained", "packed", "__weakref__")
    fn = None  # the Function subclass: a class attribute of each Function's node class (node_class_of)

    def __init__(self, ctx, inputs, saved=()):
        self.ctx = ctx  # its Context; None once freed
        self.inputs = inputs  # per forward input: a leaf Tensor, an Edge to a non-leaf, or None (no grad)
        self.saved = saved  # (VersionCounter, version when saved, array, input index or _OUTPUT)
        self.hooks = None  # the (non-leaf) output tensor's hooks, as array -> array functions
        # a weak reference to the output tensor when retain_grad() was called on it: a strong one would
        # make a cycle (the tensor holds its grad_fn), which only the gc breaks, keeping the graph alive
        self.retained = None
        self.packed = None  # saved.Packed when saved-tensor hooks packed the saved arrays (saved.py)

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
            t.accumulate_grad(g if is_tensor_like(g) else g.copy())
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
        ctx, saved = (self.ctx, self.saved) if self.packed is None else unpack_node(self)
        for counter, version, arr, _ in saved:
            if counter.value != version:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{arr.dtype} {arr.shape}], saved by {self.name()}, is at version "
                    f"{counter.value}; expected version {version} instead. Change it before the forward "
                    f"that uses it, or give that forward a .clone()"
                )
        if _anomaly.enabled:  # anomaly mode (anomaly_mode.py): a NaN or an error names the forward's call
            return self._backward_checked(g, ctx, saved, create_graph)
        if create_graph:
            if self.fn.backward_jvp is not None and _dual.level is not None and not _dual.in_rule:
                if not (_grad_mode.enabled or _installed_calls):  # forward over reverse, nothing recorded
                    return self._backward_with_tangents(g, ctx)
            ctx = self._tensor_context(ctx, saved)
        grads = _op_calls_here().backward(self.fn, ctx, g) if _installed_calls else self.fn.backward(ctx, g)
        return self._per_input(grads if isinstance(grads, (tuple, list)) else (grads,), create_graph)

    def _backward_with_tangents(self, g, ctx: Context) -> list:
        """Speed device of the backward in forward over reverse, where nothing records it (tangent_grad): the op's
        backward_jvp gives the gradients and their tangents on arrays in one call. The plain path runs backward on
        Tensors, and each of its primitives carries a tangent by its own rule; both are the product rule applied
        to the backward's formula (tests/minitensor/autograd/test_forward_ad_fused.py checks the two equal)."""
        saved_tangents = getattr(ctx, "saved_tangents", None) or (None,) * len(ctx.saved_arrays)
        arrays = [None if t is None else t.data for t in (tangent_of(g), *saved_tangents)]
        grads, tangents = self.fn.backward_jvp(ctx, g.data, *arrays)
        out = []
        for gi, ti in zip(grads, tangents):
            t = None if gi is None else g.wrap(gi)
            if t is not None and ti is not None:
                set_tangent(t, g.wrap(ti))
            out.append(t)
        return self._per_input(out, True)

    def _backward_checked(self, g, ctx, saved, create_graph: bool) -> list:
        """backward under anomaly mode: the same gradients, checked for NaN, and any error raised on the way
        given the traceback of the forward call that recorded this node."""
        trace = getattr(ctx, "forward_trace", None)
        try:
            if create_graph:
                ctx = self._tensor_context(ctx, saved)
            grads = (_op_calls_here() if _installed_calls else _PLAIN_CALLS).backward(self.fn, ctx, g)
            out = self._per_input(grads if isinstance(grads, (tuple, list)) else (grads,), create_graph)
        except Exception as error:
            note_forward_call(error, self.name(), trace)
            raise
        if _anomaly.check_nan:
            check_gradients(self.name(), out, self.inputs, trace)
        return out

    def _tensor_context(self, plain: Context | None = None, node_saved: tuple | None = None) -> Context:
        """A copy of ctx for a backward on Tensors: the Tensor namespace, and each saved input or output
        as its Tensor (an output rebuilt around this node, a non-leaf input around its Edge's producer,
        so that gradients flow through them). plain, node_saved: ctx and self.saved as unpacked by hooks."""
        plain = self.ctx if plain is None else plain
        ctx = object.__new__(type(plain))  # copy.copy(plain), without its generic protocol: once per node
        ctx.__dict__.update(plain.__dict__)
        ctx.xp, ctx.create_graph = _TENSORS, True
        like = next(t for t in self.inputs if t is not None)
        sources = {
            id(arr): (counter, src) for counter, _, arr, src in (self.saved if node_saved is None else node_saved)
        }
        saved = []
        # in an open forward-mode level, the rebuilt Tensors carry their arrays' tangents (forward over reverse)
        tangents = getattr(plain, "saved_tangents", None) if _dual.level is not None else None
        for k, arr in enumerate(plain.saved_arrays):
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
            if tangents is not None:
                set_tangent(t, tangents[k])
            saved.append(t)
        ctx.saved_arrays = tuple(saved)
        return ctx

    def _per_input(self, grads, create_graph: bool = False) -> list:
        """Check a backward's result against the inputs: one gradient per input, each summed back to
        its input's shape (unbroadcast) and of its dtype."""
        if len(grads) > len(self.inputs) and all(g is None for g in grads[len(self.inputs) :]):
            grads = grads[: len(self.inputs)]  # the slots of optional inputs that were not given
        if len(grads) != len(self.inputs):
            raise RuntimeError(
                f"function {self.name()} returned {len(grads)} gradients, but {self.fn.__name__}.forward "
                f"took {len(self.inputs)} tensor inputs: return one per input (None for no gradient)"
            )
        out = list(grads)
        for i, (t, gi) in enumerate(zip(self.inputs, grads)):
            if t is None or gi is None:
                continue
            if create_graph and not is_tensor_like(gi):
                raise RuntimeError(
                    f"function {self.name()} returned a NumPy array for input {i} under create_graph=True: "
                    f"its backward cannot be differentiated again. Write it with operators and ctx.xp on "
                    f"ctx.saved_arrays (see docs/higher_order.md)"
                )
            if gi.shape != t.shape:
                out[i] = gi = unbroadcast(
                    gi, t.shape, f"{self.name()}, input {i}", _TENSORS if create_graph else Context.xp
                )
            # (`is` first: the same dtype is mostly the same object, and comparing two dtypes costs a call)
            if gi.dtype is not t.dtype and gi.dtype != t.dtype:
                raise RuntimeError(
                    f"function {self.name()} returned a {gi.dtype} gradient for input {i}, a {t.dtype} tensor"
                )
            arr = gi.data if create_graph else gi
            if (type(arr) is not np.ndarray or t.device is not CPU) and device_of(arr) != t.device:
                out[i] = self._moved_0d(gi, arr, t.device, i)
        return out

    def _moved_0d(self, gi, arr, device, i: int):
        """A backward's gradient on another device than its input: a 0-d one is moved there, as torch's engine
        moves it (validate_outputs); any other is refused, naming both devices."""
        if arr.ndim != 0:
            raise RuntimeError(
                f"function {self.name()} returned an invalid gradient at index {i} - expected device {device} but "
                f"got {device_of(arr)}"
            )
        return gi.to(device) if is_tensor_like(gi) else to_device(arr, device)

    def free(self) -> None:
        """Drop the saved arrays, so their memory returns now. The inputs stay (leaves and Edges, no
        arrays), as in PyTorch: the graph's shape tells a later grad() whether its path goes through this
        node, whose backward then raises the "second time" error instead of reading as "not used"."""
        self.ctx = None
        self.saved = ()
        self.packed = None


class Edge:
    """What a node keeps of a non-leaf input: the node that produced it, its shape, dtype and device (and the
    tensor class's `wrap`, for a backward on Tensors), not its array.

    Keeping the input Tensor would keep every activation alive until the backward reaches its consumer,
    whether or not the consumer's backward reads it (a ReLU's input, a dropout's input): what a backward
    reads, its forward saves (save_for_backward), as in PyTorch. A leaf input is kept as itself: the walk
    hands it its gradient."""

    __slots__ = ("grad_fn", "shape", "dtype", "device", "wrap")

    def __init__(self, t):
        self.grad_fn, self.shape, self.dtype, self.wrap = t.grad_fn, t.data.shape, t.data.dtype, t.wrap
        self.device = t.device

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

    # Forward mode (tangents.py): a written rule jvp(ctx, *tangents) -> the output's tangent, run on Tensors as
    # a backward under create_graph is; or, instead, the kind that gives the rule: "elementwise" (the VJP
    # formula applied to the tangent) or "linear" (the op applied to the tangents).
    jvp = None
    jvp_kind = None
    # Optional speed device of forward over reverse: backward_jvp(ctx, g, ġ, *saved tangents) -> (gradients, their
    # tangents), all arrays (None for no tangent): the backward and its JVP in one call (Node._backward_with_tangents)
    backward_jvp = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # the class of this op's nodes, made once here, not per op: TanhBackward for Tanh
        cls._node_class = type(f"{cls.__name__}Backward", (Node,), {"__slots__": (), "fn": cls})

    # An op whose last tensor inputs are optional (Linear's bias) names how many it can take: needs_input_grad
    # then has a flag for each (False for one not given), and backward may return a gradient slot for each
    # (None for one not given), so no formula pads for the inputs left out. None: exactly those given.
    max_inputs = None

    @classmethod
    def apply(cls, *tensors, **kwargs):
        if not (_grad_mode.enabled or _installed_calls) and (_dual.level is None or _dual.in_rule):
            # no_grad, no tangents (no level, or inside a forward-mode rule, whose own primitives carry none), no
            # profile: nothing to record
            return _apply_untracked(cls, tensors, kwargs)
        arrays = _arrays_of(cls, tensors)
        tensors = same_device(tensors, arrays, cls) if len(arrays) > 1 else tensors  # torch's mixed-device error
        ctx = Context()
        calls = _op_calls_here() if _installed_calls else _PLAIN_CALLS
        out = run_quietly(calls.forward, cls, ctx, arrays, kwargs)
        result = tensors[0].wrap(out)
        if cls.returns_view and np.may_share_memory(out, arrays[0]):
            share_base(result, tensors[0], _grad_mode.enabled)
        if _grad_mode.enabled:
            needs = tuple([t.requires_grad for t in tensors])  # (a list comprehension: faster than a generator)
            if True in needs:
                if cls.max_inputs is not None and len(needs) < cls.max_inputs:  # optional inputs left out
                    needs += (False,) * (cls.max_inputs - len(needs))
                ctx.needs_input_grad = needs
                result.requires_grad = True
                inputs = tuple([(t if t.grad_fn is None else Edge(t)) if n else None for t, n in zip(tensors, needs)])
                result.grad_fn = cls._node_class(ctx, inputs, _saved_versions(ctx.saved_arrays, tensors, result))
                if _anomaly.enabled:  # where this forward was called, for an error in its backward
                    ctx.forward_trace = forward_trace()
        if _dual.level is not None and not _dual.in_rule:  # forward mode: the output's tangent, by the op's JVP
            with ieee_quiet():  # quietly: the rule's own primitives then find the state quiet and leave it
                propagate(cls, ctx, tensors, result, kwargs, _TENSORS)
        # saved-tensor hooks are on in some thread: hand them what the node keeps (after the JVP rule, which reads
        # it). Deviation from PyTorch, flagged: the nodes a forward-mode rule records keep their own arrays, unseen
        # by the hooks: they belong to the tangent, which a checkpoint's recompute does not rebuild (the tangents a
        # forward over reverse needs stay on the first run's contexts, ctx.saved_tangents)
        if HOOK_STACKS and result.grad_fn is not None and not _dual.in_rule:
            pack_node(result.grad_fn, result)
        return result


class InferenceContext(Context):
    """The Context of a forward whose node is never built (_apply_untracked): what it saves for a backward is
    dropped. Attributes it sets (ctx.dim, ctx.keep, ...) stay readable, since a forward may read them back."""

    def save_for_backward(self, *arrays) -> None:
        pass

    def save(self, **arrays) -> None:
        self.__dict__.update(arrays)


def _apply_untracked(fn, tensors: tuple, kwargs: dict):
    """fn.apply's inference path: under no_grad, with no forward-mode level open (or inside a forward-mode rule run
    unrecorded: forward over reverse) and no profile installed.

    No node is recorded, so nothing else apply does applies: no needs_input_grad, no Edge, no versions to keep,
    no saved-tensor hooks (they see what a node keeps), no anomaly trace (it names a node's forward), no JVP (no
    level is open, or the op is part of a rule). What is left is the forward on the arrays and the result around
    its array, as in apply; a view keeps its input's version counter. tests/minitensor/autograd/test_inference_path.py
    checks every primitive equal through both paths."""
    arrays = _arrays_of(fn, tensors)
    tensors = same_device(tensors, arrays, fn) if len(arrays) > 1 else tensors  # torch's mixed-device error
    out = run_quietly(_forward_untracked, fn, arrays, kwargs)
    result = tensors[0].wrap(out)
    if fn.returns_view and np.may_share_memory(out, arrays[0]):
        share_base(result, tensors[0], False)
    return result


def share_base(view, base, grad_enabled: bool) -> None:
    """A view shares its base's version counter (a change through either is a change of both). Made under no_grad
    from a tensor that requires grad, or from such a view, it is marked: an in-place change of it with grad mode on
    is then refused, as PyTorch refuses it (tensor.py)."""
    view.version_counter = base.version_counter
    if base.no_grad_view or (base.requires_grad and not grad_enabled):
        view.no_grad_view = True


def _forward_untracked(fn, arrays, kwargs):
    return fn.forward(InferenceContext(), *arrays, **kwargs)


def _arrays_of(fn, tensors: tuple) -> list:
    """The arrays of fn.apply's tensor arguments (a clear TypeError for anything else, or for none)."""
    try:  # one pass for the common case; the test only raises for a non-Tensor (a Tensor's counter is never None)
        arrays = [t.data for t in tensors if t.version_counter is not None]
    except AttributeError:  # an ndarray (it has .data, but no version counter), a number, ...
        arrays = [_array_of(fn, i, t) for i, t in enumerate(tensors)]  # raises, naming the argument
    if not arrays:
        raise TypeError(f"{fn.__name__}.apply: expected at least one Tensor argument")
    return arrays


def _array_of(fn, i: int, t) -> np.ndarray:
    """The array of tensor argument i of fn.apply (a clear TypeError for anything else)."""
    if isinstance(t, np.ndarray) or not hasattr(t, "version_counter"):  # is_tensor_like, inlined: per op argument
        hint = "; wrap it in mt.tensor(...)" if is_array(t) else ""  # a host or device array
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
        for src, t in enumerate(tensors):  # noqa: B007 (src and t are read after the loop)
            if t.data is arr:
                break
        else:  # not an input's array: the output's, or one the forward made
            if result.data is not arr:
                continue
            src, t = _OUTPUT, result
        versions.append((t.version_counter, t.version_counter.value, arr, src))
    return tuple(versions)


# --------------------------------------------------------------------------------------------
# Summing a gradient back to its input's shape (Node._per_input, the one caller)
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
