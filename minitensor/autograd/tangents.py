"""Forward mode inside the engine: the open dual level, a tensor's tangent, and how an op's output gets one.

Forward-mode AD carries, beside a tensor's value x, a tangent ẋ: the directional derivative of x along
one chosen direction of the inputs (a dual number x + ẋε with ε² = 0). Each primitive maps its inputs'
tangents to its output's by its Jacobian-vector product, ẏ = J ẋ, computed right after its forward
(Function.apply calls `propagate`). One pass gives J v for one direction v: forward mode costs a pass per
input direction, reverse mode a pass per output.

A primitive states its JVP in one of three ways (STYLE.md; PyTorch's derivatives.yaml does the same):

    jvp_kind = "elementwise"  its Jacobian is diagonal, so the JVP is the VJP's formula applied to the
                              tangent: ẏ = Σ_i backward_i(ẋ_i) (Exp, Tanh, Mul, Where, ...)
    jvp_kind = "linear"       the op is linear in its tensor inputs, so the JVP is the op itself applied
                              to the tangents: ẏ = f(ẋ_1, ẋ_2, ...) (Add, Reshape, Sum, GetItem, ...)
    jvp(ctx, *tangents)       a written rule, for the rest (MatMul: ȧ @ b + a @ ḃ; Softmax; LayerNorm)

A rule runs as a backward under create_graph does (Node._tensor_context): on Tensors, with the Tensor
namespace as `ctx.xp` and the saved inputs and output as the Tensors themselves. So a tangent is a
Tensor made of recorded primitives: reverse mode can differentiate it (reverse over forward), and a
backward on Tensors inside an open level carries tangents through its own primitives (forward over
reverse, the cheap Hessian-vector product). Inputs without a tangent get None (a zero tangent). Where nothing
records that backward, an op may instead give it with its gradients' tangents on arrays in one call
(`backward_jvp`, a speed device: Linear, LayerNorm; backward_with_tangents in extensions.py).

The level is global, as torch.autograd.forward_ad's is, and one at a time (torch's Python API does not
nest levels either). A tangent is kept with the level it belongs to, so closing the level makes every
tangent vanish at once, without visiting the tensors that hold one.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from ..core.engine import as_tuple, grad_walk, grads_per_output
from ..core.grad_mode import state as grad_mode  # `grad_mode.enabled`, this thread's switch
from ..features import switch
from .anomaly_mode import anomaly, check_tangent


class DualLevel:
    """An open forward-mode level: its identity marks the tangents that belong to it."""

    __slots__ = ()


class DualState:
    """The open level (None when forward mode is off), whether a rule is running (its own primitives then carry no
    tangent: a tangent of a tangent is not asked for), and whether rules are recorded for reverse mode when grad
    mode is on (rules_unrecorded turns that off). An open level turns on the engine's extended paths (features.py)."""

    in_rule = False
    record_rules = True
    _level = None

    @property
    def level(self):
        return self._level

    @level.setter
    def level(self, value) -> None:
        self._level = value
        switch("forward mode", value is not None)


dual_state = DualState()


def tangent_of(t):
    """t's tangent at the open level, or None (no level open, none attached, or one from a closed level)."""
    entry = t.dual_tangent
    return entry[1] if entry is not None and entry[0] is dual_state.level else None


def set_tangent(t, tangent) -> None:
    """Attach `tangent` (a Tensor, or None for none) to t at the open level."""
    t.dual_tangent = None if tangent is None else (dual_state.level, tangent)


@contextmanager
def outside_rules():
    """Run primitives without forward mode: inside a rule, and where a tangent must not propagate."""
    before, dual_state.in_rule = dual_state.in_rule, True
    try:
        yield
    finally:
        dual_state.in_rule = before


@contextmanager
def rules_unrecorded():
    """Inside the block, rules run with grad mode off: their tangents get no reverse-mode graph. For forward
    over reverse without create_graph, where no reverse pass will differentiate a tangent: the primal forward
    is still recorded (its backward is the reverse part), the rules' own operations need not be."""
    before, dual_state.record_rules = dual_state.record_rules, False
    try:
        yield
    finally:
        dual_state.record_rules = before


def propagate(fn, ctx, tensors, result, kwargs, tensor_namespace) -> None:
    """Give `result` (fn's output) its tangent from its inputs' tangents by fn's JVP; nothing if none has one."""
    tangents = [tangent_of(t) for t in tensors]
    if all(t is None for t in tangents) or result.dtype.kind not in "fc":
        return  # no direction to follow, or an integer/bool output, which has no tangent (as in PyTorch)
    # each saved array's Tensor: an input or the output (None for an array the forward made), found once for the
    # rule's context and for the tangents a forward over reverse gives the rebuilt saved tensors
    owners = [next((t for t in (*tensors, result) if t._data is arr), None) for arr in ctx.saved_arrays]
    rule_ctx = rule_context(ctx, owners, result, tensor_namespace)
    # the rule runs outside rules (its primitives carry no tangent), recorded or not (record_rules), as
    # outside_rules() and set_grad_enabled() would run it: the two switches set directly, per op (the caller,
    # Function.apply, runs it quietly: a rule's own scalar arithmetic, Var's 2 / (n - correction) with
    # n = correction, gives inf, as PyTorch, not a warning)
    before_rule, before_grad = dual_state.in_rule, grad_mode.enabled
    dual_state.in_rule, grad_mode.enabled = True, dual_state.record_rules and before_grad
    try:
        out = run_rule(fn, rule_ctx, tensors, result, tangents, kwargs)
    finally:
        dual_state.in_rule, grad_mode.enabled = before_rule, before_grad
    if out is None:
        return
    if out.dtype != result.dtype:
        raise RuntimeError(
            f"forward-mode rule of {fn.__name__} returned a {out.dtype} tangent for a {result.dtype} output"
        )
    if out.shape != result.shape:
        if not broadcasts_to(out.shape, result.shape):
            raise RuntimeError(
                f"forward-mode rule of {fn.__name__} returned a tangent of shape {out.shape} for an output of "
                f"shape {result.shape}"
            )
        with outside_rules():
            out = tensor_namespace.broadcast_to(out, result.shape)
    if anomaly.enabled and anomaly.check_nan:  # anomaly mode: a NaN tangent names this op and its forward call
        check_tangent(fn.__name__, out)
    set_tangent(result, out)
    # a backward on Tensors inside this level (forward over reverse) rebuilds the saved inputs and output
    # as new Tensors (Node._tensor_context): it gives them these tangents
    ctx.saved_tangents = tuple(None if owner is None else tangent_of(owner) for owner in owners)


def broadcasts_to(shape: tuple, target: tuple) -> bool:
    """Whether an array of `shape` broadcasts to exactly `target`. (arguments.broadcasts_to answers the same for
    operands, but arguments.py imports autograd/, so this module cannot import it.)"""
    try:
        return np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


def copy_context(ctx):
    """copy.copy(ctx) without its generic protocol (made once per op of a rule, once per node of a backward on
    Tensors): its two slots and its attribute dict."""
    new = object.__new__(type(ctx))
    new.needs_input_grad, new.saved_arrays = ctx.needs_input_grad, ctx.saved_arrays
    new.__dict__.update(ctx.__dict__)
    return new


def rule_context(ctx, owners, result, tensor_namespace):
    """A copy of the forward's ctx for a rule on Tensors: each saved input or output array as its Tensor (owners,
    per saved array), an array the forward made as a constant Tensor (as Node._tensor_context does for a backward)."""
    rule_ctx = copy_context(ctx)
    rule_ctx.xp, rule_ctx.create_graph = tensor_namespace, True
    rule_ctx.saved_arrays = tuple(
        owner if owner is not None else result.wrap(arr) for owner, arr in zip(owners, ctx.saved_arrays)
    )
    return rule_ctx


def run_rule(fn, ctx, tensors, result, tangents, kwargs):
    """The output tangent by fn's written rule, or by its declared kind (elementwise or linear)."""
    if fn.jvp is not None:
        return fn.jvp(ctx, *tangents)
    if fn.jvp_kind == "linear":  # the op applied to the tangents, a zero tangent for an input without one
        # a missing tangent is zeros on its input's device (zeros_like keeps the array's library)
        filled = [t if t is not None else x.wrap(np.zeros_like(x._data)) for x, t in zip(tensors, tangents)]
        return fn.apply(*filled, **kwargs)
    if fn.jvp_kind == "elementwise":  # a diagonal Jacobian: the VJP formula, one input at a time
        out = None
        for i, t in enumerate(tangents):
            if t is None:
                continue
            ctx.needs_input_grad = tuple(j == i for j in range(max(len(tangents), fn.max_inputs or 0)))
            grads = fn.backward(ctx, ctx.xp.broadcast_to(t, result.shape))
            gi = (grads if isinstance(grads, (tuple, list)) else (grads,))[i]
            if gi is not None:
                out = gi if out is None else out + gi
        return out
    raise NotImplementedError(
        f"forward-mode AD through {fn.__name__}: it defines no jvp(ctx, *tangents) rule and declares no "
        f"jvp_kind ('elementwise' or 'linear'); define one to use it under forward_ad.dual_level()"
    )


def tangent_sum(*terms):
    """The sum of a rule's terms that exist (None for an input without a tangent): ȧ @ b + a @ ḃ."""
    present = [t for t in terms if t is not None]
    if not present:
        return None
    out = present[0]
    for t in present[1:]:
        out = out + t
    return out


def tangent_grad(outputs, inputs, grad_outputs=None, retain_graph: bool = False, allow_unused: bool = False) -> tuple:
    """grad() whose walk runs on Tensors, as under create_graph, but records nothing (grad mode off).

    For forward over reverse: inside an open forward-mode level the backward's primitives carry tangents (tangents
    flow under no_grad, as in PyTorch), so the tangent of the returned gradient of a scalar f is H v, where v is the
    inputs' tangent. Where no second reverse pass reads the gradient's graph, recording it is wasted work: this walk
    skips it. Outside a level it returns what grad() returns, as Tensors."""
    outputs, inputs = as_tuple(outputs, "output"), as_tuple(inputs, "input")
    grad_outputs = (None,) * len(outputs) if grad_outputs is None else grads_per_output(grad_outputs, outputs)
    return grad_walk(outputs, inputs, grad_outputs, retain_graph, True, allow_unused, record=False)
