"""The engine's extended paths: Function.apply and Node.backward while a feature is on, and higher order.

The core (minitensor/core/) runs the plain forward and backward. While a feature is on (features.py counts them)
its one-line hand-over sends each call here, where every feature takes its turn around the same core steps
(`record`, `Node.check_versions`, `Node.per_input`):

    devices        a mixed-device call refused (or a 0-d CPU tensor moved), as torch refuses it (devices.py)
    profiler       forwards and backwards run through the installed `OpCalls`, which time them (profiler.py)
    anomaly mode   the forward's traceback kept on the node; a backward's error or NaN names it (anomaly_mode.py)
    forward mode   the output's tangent by the op's JVP rule (tangents.py)
    saved hooks    what a node keeps handed to the pack hooks, and unpacked for its backward (saved.py)

Higher order: a backward under create_graph runs on Tensors (`tensor_context`), so its own operations are recorded
and the gradients it returns are differentiable (docs/higher_order.md). In forward over reverse, where nothing
records that backward, an op's `backward_jvp` (a speed device, fast/) may give the gradients and their tangents
on arrays in one call (`backward_with_tangents`).
"""

from __future__ import annotations

import threading

from ..core import Context, Edge, is_tensor_like, points
from ..core.function import OUTPUT, arrays_of, record
from ..core.grad_mode import state as grad_mode
from ..features import switch
from .anomaly_mode import anomaly, check_gradients, forward_trace, note_forward_call
from .saved import HOOK_STACKS, pack_node, unpack_node
from .tangents import copy_context, dual_state, propagate, set_tangent, tangent_of


class OpCalls:
    """How the engine calls a primitive's forward and backward. The profiler installs a subclass that times each
    call (`set_op_calls`), per thread as torch's autograd profiler."""

    def forward(self, fn, ctx, arrays, kwargs):
        return fn.forward(ctx, *arrays, **kwargs)

    def backward(self, fn, ctx, g):
        return fn.backward(ctx, g)


PLAIN_CALLS = OpCalls()
_installed_calls: dict = {}  # thread id -> OpCalls, for the threads that installed calls of their own


def op_calls_here() -> OpCalls:
    """How this thread calls primitives: its own installed calls (a profile), else the plain ones."""
    return _installed_calls.get(threading.get_ident(), PLAIN_CALLS) if _installed_calls else PLAIN_CALLS


def set_op_calls(calls: OpCalls) -> OpCalls:
    """Install `calls` as the way this thread's forwards and backwards are run; returns the previous one."""
    tid = threading.get_ident()
    previous = _installed_calls.get(tid, PLAIN_CALLS)
    if type(calls) is OpCalls:  # the plain way: nothing to list
        _installed_calls.pop(tid, None)
    else:
        _installed_calls[tid] = calls
    switch("profiler", bool(_installed_calls))
    return previous


def apply(cls, tensors: tuple, kwargs: dict):
    """Function.apply while a feature is on: the core's steps, with each feature's own around them."""
    arrays = arrays_of(cls, tensors)
    if points.devices is not None and len(arrays) > 1:  # torch's mixed-device error
        tensors = points.devices.same_device(tensors, arrays, cls)
    ctx = Context()
    out = points.run_quietly(op_calls_here().forward, cls, ctx, arrays, kwargs)
    result = record(cls, ctx, tensors, arrays, out)
    if anomaly.enabled and result.grad_fn is not None:  # where this forward was called, for an error in its backward
        ctx.forward_trace = forward_trace()
    if dual_state.level is not None and not dual_state.in_rule:  # forward mode: the output's tangent
        with points.quiet():  # the rule's own primitives then find the state quiet
            propagate(cls, ctx, tensors, result, kwargs, points.tensors)
    # Deviation from PyTorch, flagged: the nodes a forward-mode rule records keep their own arrays, unseen by the
    # hooks: they belong to the tangent, which a checkpoint's recompute does not rebuild
    if HOOK_STACKS and result.grad_fn is not None and not dual_state.in_rule:
        pack_node(result.grad_fn, result)
    return result


def backward(node, g, create_graph: bool) -> list:
    """Node.backward while a feature is on, or on Tensors (create_graph)."""
    ctx, saved = (node.ctx, node.saved) if node.packed is None else unpack_node(node)
    node.check_versions(saved)
    trace = getattr(ctx, "forward_trace", None) if anomaly.enabled else None
    try:
        if create_graph:
            if node.fn.backward_jvp is not None and dual_state.level is not None and not dual_state.in_rule:
                if not (grad_mode.enabled or _installed_calls or anomaly.enabled):  # nothing records this backward
                    return backward_with_tangents(node, g, ctx)
            ctx = tensor_context(node, ctx, saved)
        grads = op_calls_here().backward(node.fn, ctx, g)
        out = per_input(node, grads if isinstance(grads, (tuple, list)) else (grads,), create_graph)
    except Exception as error:
        if anomaly.enabled:  # the error names the forward call that recorded this node
            note_forward_call(error, node.name(), trace)
        raise
    if anomaly.enabled and anomaly.check_nan:
        check_gradients(node.name(), out, node.inputs, trace)
    return out


def per_input(node, grads, create_graph: bool) -> list:
    """The core's check of a backward's result, with what higher order and devices add to it."""
    if create_graph:
        for i, (t, gi) in enumerate(zip(node.inputs, grads)):
            if t is not None and gi is not None and not is_tensor_like(gi):
                raise RuntimeError(
                    f"function {node.name()} returned a NumPy array for input {i} under create_graph=True: "
                    f"its backward cannot be differentiated again. Write it with operators and ctx.xp on "
                    f"ctx.saved_arrays (see docs/higher_order.md)"
                )
    out = node.per_input(grads, points.tensors if create_graph else None)
    if points.devices is not None:  # a gradient on another device: a 0-d one is moved, any other refused
        for i, (t, gi) in enumerate(zip(node.inputs, out)):
            if t is not None and gi is not None:
                out[i] = points.devices.gradient_to(gi, t.device, f"function {node.name()}", i)
    return out


def backward_with_tangents(node, g, ctx: Context) -> list:
    """The backward in forward over reverse where nothing records it: the op's backward_jvp (a speed device, fast/)
    gives the gradients and their tangents on arrays in one call, where the plain path runs backward on Tensors
    and each of its primitives carries a tangent by its own rule (tests/minitensor/fast/ checks the two equal)."""
    saved_tangents = getattr(ctx, "saved_tangents", None) or (None,) * len(ctx.saved_arrays)
    arrays = [None if t is None else t._data for t in (tangent_of(g), *saved_tangents)]
    grads, tangents = node.fn.backward_jvp(ctx, g._data, *arrays)
    out = []
    for gi, ti in zip(grads, tangents):
        t = None if gi is None else g.wrap(gi)
        if t is not None and ti is not None:
            set_tangent(t, g.wrap(ti))
        out.append(t)
    return per_input(node, out, True)


def tensor_context(node, plain: Context, node_saved: tuple) -> Context:
    """A copy of ctx for a backward on Tensors: the Tensor namespace, and each saved input or output as its Tensor
    (the output rebuilt around this node, a non-leaf input around its Edge's producer, so that gradients flow
    through them). plain, node_saved: ctx and node.saved, as unpacked by saved-tensor hooks."""
    ctx = copy_context(plain)
    ctx.xp, ctx.create_graph = points.tensors, True
    like = next(t for t in node.inputs if t is not None)
    sources = {id(arr): (counter, src) for counter, _, arr, src in node_saved}
    saved = []
    # in an open forward-mode level, the rebuilt Tensors carry their arrays' tangents (forward over reverse)
    tangents = getattr(plain, "saved_tangents", None) if dual_state.level is not None else None
    for k, arr in enumerate(plain.saved_arrays):
        counter, src = sources.get(id(arr), (None, None))
        if src is None:  # an array the forward made: private to this node
            saved.append(arr)
            continue
        ref = node.inputs[src] if src != OUTPUT else None
        if ref is not None and not isinstance(ref, Edge):  # a leaf: the Tensor itself
            saved.append(ref)
            continue
        t = like.wrap(arr)  # the output, a non-leaf input, or an input outside the graph
        t.version_counter = counter
        if src == OUTPUT:
            t.requires_grad, t.grad_fn = True, node
        elif ref is not None:
            t.requires_grad, t.grad_fn = True, ref.grad_fn
        if tangents is not None:
            set_tangent(t, tangents[k])
        saved.append(t)
    ctx.saved_arrays = tuple(saved)
    return ctx


points.apply, points.backward = apply, backward
