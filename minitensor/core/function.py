"""Function, Context, Node and Edge: how a primitive runs its forward and records its backward.

Every primitive is a `Function` subclass (ops/) with `forward(ctx, *arrays, **kwargs) -> array` (saving on ctx what
the backward needs) and `backward(ctx, g) -> a gradient per input`. `Function.apply(*tensors)` runs forward on the
arrays and, when grad mode is on and an input requires grad, records a `Node`: the output's `grad_fn`, which keeps
its inputs as leaves or as Edges to the nodes that made them. A node sums each gradient back to its input's shape
(`unbroadcast`), and refuses to run on a saved array that an in-place change altered since (version counters).
One line in `apply` and one in `Node.backward` hand the call over while a feature is on (points.py).
"""

from __future__ import annotations

import numpy as np

from . import points
from .grad_mode import state as grad_mode  # this thread's switch, read on every op


class VersionCounter:
    """How many in-place changes a tensor's array has had; a view shares its base's counter."""

    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


def is_tensor_like(x) -> bool:
    """Whether x is a Tensor, known by what the engine uses (its version counter): the one such test."""
    return hasattr(x, "version_counter")


class Context:
    """Scratch space a forward fills for its backward.

    `needs_input_grad[i]` says whether input i wants a gradient. `save_for_backward(*arrays)` keeps input or output
    arrays (read back as `ctx.saved_arrays`); `save(name=array)` keeps an array the forward made (a mask, row
    statistics), read back as `ctx.name`. `xp` is the namespace a backward formula calls: NumPy's functions on
    arrays, or recorded primitives on Tensors under create_graph (points.py, docs/higher_order.md)."""

    __slots__ = ("needs_input_grad", "saved_arrays", "__dict__")  # most ops keep no dict for the collector
    saved_names: tuple = ()  # the names given to save(), in order
    create_graph = False
    xp = np  # ops/ installs its array namespace here (register_namespaces)

    def __init__(self):
        self.needs_input_grad = self.saved_arrays = ()

    def save_for_backward(self, *arrays) -> None:
        self.saved_arrays = arrays

    def save(self, **arrays) -> None:
        """Keep arrays the forward made, each read back as ctx.<name>. Not torch's API: torch's C++ nodes keep such
        buffers as saved variables."""
        self.__dict__.update(arrays)
        self.saved_names += tuple(n for n in arrays if n not in self.saved_names)

    def intermediate(self, stored, helper, *args):
        """A value the forward computed for backward (xhat, probabilities): `stored` as is, or under create_graph
        recomputed as `helper(ctx.xp, *args)` from the saved Tensors, so that it is differentiable too."""
        return helper(self.xp, *args) if self.create_graph else stored


def register_namespaces(arrays, tensors) -> None:
    """Install ops/namespace.py's two namespaces: what a backward calls on arrays, and on Tensors."""
    Context.xp = points.arrays = arrays
    points.tensors = tensors


OUTPUT = -1  # Node.saved: the source of a saved array that is the op's output


class Node:
    """One recorded op application: the output tensor's grad_fn, named as PyTorch names it ("TanhBackward")."""

    # hooks, retained: the output's gradient hooks and retain_grad(); packed: saved-tensor hooks' state
    __slots__ = ("ctx", "inputs", "saved", "hooks", "retained", "packed", "__weakref__")
    fn = None  # the Function subclass: a class attribute of each Function's node class

    def __init__(self, ctx, inputs, saved=()):
        self.ctx = ctx  # its Context; None once freed
        self.inputs = inputs  # per forward input: a leaf Tensor, an Edge to a non-leaf, or None (no grad)
        self.saved = saved  # (VersionCounter, version when saved, array, input index or OUTPUT)
        self.hooks = None
        self.retained = None  # a weak reference: the tensor holds its grad_fn, a strong one would make a cycle
        self.packed = None

    def name(self) -> str:
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__}>"

    def receive(self, g):
        """The output's gradient after its hooks; kept on the output if it retains grad."""
        for hook in self.hooks or ():
            g = hook(g)
        t = self.retained() if self.retained is not None else None
        if t is not None:
            t.accumulate_grad(g if is_tensor_like(g) else g.copy())
        return g

    def backward(self, g, create_graph: bool = False) -> list:
        """The gradient of each input (in that input's shape, None where it needs none) for output gradient g."""
        if self.ctx is None:
            raise RuntimeError(
                f"backward through {self.name()} a second time: its saved arrays were freed by the first "
                f"backward(); pass retain_graph=True (or create_graph=True) to the first backward() or grad() "
                f"to keep them"
            )
        if points.features or create_graph or self.packed is not None:  # extension point: higher order, the
            return points.backward(self, g, create_graph)  # features and a node packed by saved-tensor hooks
        self.check_versions(self.saved)
        grads = self.fn.backward(self.ctx, g)
        return self.per_input(grads if isinstance(grads, (tuple, list)) else (grads,))

    def check_versions(self, saved) -> None:
        """Refuse to backpropagate through an array that an in-place change altered since the forward saved it."""
        for counter, version, arr, _ in saved:
            if counter.value != version:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{arr.dtype} {arr.shape}], saved by {self.name()}, is at version "
                    f"{counter.value}; expected version {version} instead. Change it before the forward "
                    f"that uses it, or give that forward a .clone()"
                )

    def per_input(self, grads, xp=None) -> list:
        """A backward's result checked against the inputs: one gradient per input, each summed back to its input's
        shape (unbroadcast) and of its dtype."""
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
            if gi.shape != t.shape:
                out[i] = gi = unbroadcast(gi, t.shape, f"{self.name()}, input {i}", xp)
            if gi.dtype is not t.dtype and gi.dtype != t.dtype:  # (`is` first: comparing dtypes costs a call)
                raise RuntimeError(
                    f"function {self.name()} returned a {gi.dtype} gradient for input {i}, a {t.dtype} tensor"
                )
        return out

    def free(self) -> None:
        """Drop the saved arrays, so their memory returns now. The inputs stay (leaves and Edges, no arrays), as in
        PyTorch: a later grad() then knows its path goes through this node and raises the "second time" error."""
        self.ctx = None
        self.saved = ()
        self.packed = None


class Edge:
    """What a node keeps of a non-leaf input: the node that made it, its shape, dtype, device and tensor class (to
    `wrap` an array as one, for a backward on Tensors), not its array: what a backward reads, its forward saves."""

    __slots__ = ("grad_fn", "shape", "dtype", "device", "cls")

    def __init__(self, t):
        self.grad_fn, self.shape, self.dtype, self.cls = t.grad_fn, t._data.shape, t._data.dtype, type(t)
        self.device = t.device

    def wrap(self, arr):
        return self.cls.wrap(arr)

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

    returns_view = False  # True where forward may return a view of its first input (it shares its version)
    max_inputs = None  # how many tensor inputs an op with optional last inputs takes (Linear's bias)
    # forward mode (autograd/tangents.py): a written rule, or the kind that gives it ("elementwise", "linear");
    # backward_jvp: the backward and its tangents in one call, a speed device (fast/)
    jvp = jvp_kind = backward_jvp = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._node_class = type(f"{cls.__name__}Backward", (Node,), {"__slots__": (), "fn": cls})

    @classmethod
    def apply(cls, *tensors, **kwargs):
        """Run forward on the tensors' arrays; record the output's node when grad mode is on and an input
        requires grad."""
        if points.features:  # extension point: a feature is on (points.py), and its path runs the call
            return points.apply(cls, tensors, kwargs)
        arrays = arrays_of(cls, tensors)
        ctx = Context()
        out = points.run_quietly(cls.forward, ctx, *arrays, **kwargs)
        return record(cls, ctx, tensors, arrays, out)


def record(cls, ctx, tensors, arrays, out):
    """The result of `cls` around `out`, with its node when one is recorded."""
    result = tensors[0].wrap(out)
    if cls.returns_view and np.may_share_memory(out, arrays[0]):
        share_base(result, tensors[0])
    if grad_mode.enabled:
        needs = tuple([t.requires_grad for t in tensors])  # (a list comprehension: faster than a generator)
        if True in needs:
            if cls.max_inputs is not None and len(needs) < cls.max_inputs:  # optional inputs left out
                needs += (False,) * (cls.max_inputs - len(needs))
            ctx.needs_input_grad = needs
            result.requires_grad = True
            inputs = tuple([(t if t.grad_fn is None else Edge(t)) if n else None for t, n in zip(tensors, needs)])
            result.grad_fn = cls._node_class(ctx, inputs, saved_versions(ctx.saved_arrays, tensors, result))
    return result


def share_base(view, base) -> None:
    """A view shares its base's version counter. Made under no_grad from a tensor that requires grad, it is marked:
    an in-place change of it with grad mode on is then refused, as PyTorch refuses it."""
    view.version_counter = base.version_counter
    if base.no_grad_view or (base.requires_grad and not grad_mode.enabled):
        view.no_grad_view = True


def arrays_of(fn, tensors: tuple) -> list:
    """The arrays of fn.apply's tensor arguments (a clear TypeError for anything else, or for none)."""
    try:  # one pass for the common case; the test only raises for a non-Tensor
        arrays = [t._data for t in tensors if t.version_counter is not None]
    except AttributeError:
        arrays = [_array_of(fn, i, t) for i, t in enumerate(tensors)]  # raises, naming the argument
    if not arrays:
        raise TypeError(f"{fn.__name__}.apply: expected at least one Tensor argument")
    return arrays


def _array_of(fn, i: int, t):
    if not is_tensor_like(t):
        hint = "; wrap it in mt.tensor(...)" if hasattr(t, "__array_namespace__") or isinstance(t, np.ndarray) else ""
        raise TypeError(
            f"{fn.__name__}.apply: argument {i} must be a Tensor, got {type(t).__name__}{hint} "
            f"(non-tensor arguments go by keyword)"
        )
    return t._data


def saved_versions(saved_arrays, tensors, result) -> tuple:
    """(counter, version, array, source) for each saved array that is an input's (source: its index) or the
    output's (OUTPUT). Arrays the forward made itself are private to the node and need no check."""
    versions = []
    for arr in saved_arrays:
        for src, t in enumerate(tensors):  # noqa: B007 (src and t are read after the loop)
            if t._data is arr:
                break
        else:
            if result._data is not arr:
                continue
            src, t = OUTPUT, result
        versions.append((t.version_counter, t.version_counter.value, arr, src))
    return tuple(versions)


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
        g = (xp or points.arrays).sum(g, axis=axes, keepdims=True)
    return g.reshape(shape)
