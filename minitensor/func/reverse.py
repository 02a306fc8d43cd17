"""The reverse-mode transforms of mt.func: vjp, grad, grad_and_value, jacrev (torch.func's, same returns).

Each runs the function once on its differentiated arguments made fresh leaves (`reverse_call`), then
pulls cotangents back through the recorded graph (`pullback`): one backward for vjp and grad, one per
output element for jacrev (deviation, flagged: torch.func.jacrev batches those rows with vmap; here
they are computed one by one, with the same values; `chunk_size` is accepted and changes nothing). The
function runs once, so its random draws are one draw, as in torch; a draw inside jacrev's backward rows is
refused, as torch's vmap refuses it.

Composition. An inner transform must hand its outer one something it can differentiate:
  - inside a reverse transform (grad of grad), or on inputs that require grad, the backward is recorded
    (create_graph), so the gradient has a graph of its own;
  - inside a forward transform (jacfwd of jacrev: hessian), the backward runs on Tensors without being
    recorded (autograd.tangent_grad): its primitives carry tangents, and the tangent of the gradient is
    H v, forward over reverse;
  - otherwise the backward runs on arrays and the results are plain tensors.
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np

from ..autograd import enable_grad, forward_ad, is_grad_enabled, tangent_grad
from ..autograd import grad as autograd_grad  # this module defines its own grad, the transform
from ..autograd.tangents import dual_state, rules_unrecorded
from ..functions.shape import stack
from ..random import randomness_refused
from .trees import check_scalar, float_leaves, normalize_argnums, split_aux, tensor_leaves, tree_flatten, tree_unflatten

__all__ = ["grad_and_value", "grad", "jacrev", "stack_jacobian", "vjp"]


class TransformState:
    """How many reverse transforms are running their function: an inner one then records its backward."""

    reverse_depth = 0


transform_state = TransformState()


def differentiable_leaf(x):
    """x as a tensor to differentiate with respect to: a new node over x where x is in a graph (an outer
    transform's, or the caller's), else a fresh leaf; either way carrying x's tangent if it has one."""
    if x.requires_grad:
        return x.view_as(x)  # recorded, and Reshape's linear rule carries the tangent
    tangent = forward_ad.unpack_dual(x).tangent
    leaf = x.detach().requires_grad_(True)
    return leaf if tangent is None else forward_ad.make_dual(leaf, tangent)


class ReverseCall:
    """One run of the function on fresh leaves: what pullback needs to send cotangents back."""

    def __init__(self, func, args, kwargs, argnums, has_aux: bool, who: str):
        self.who = who
        self.nums, self.is_tuple = normalize_argnums(argnums, len(args), who)
        trees = [float_leaves(args[a], who, f"argument {a} (argnums)") for a in self.nums]
        self.record = is_grad_enabled() and (
            transform_state.reverse_depth > 0 or any(x.requires_grad for leaves, _ in trees for x in leaves)
        )
        new_args = list(args)
        self.leaves, self.specs = [], []  # per differentiated argument: its new leaves, its structure
        with enable_grad():
            for a, (leaves, spec) in zip(self.nums, trees):
                new = [differentiable_leaf(x) for x in leaves]
                new_args[a] = tree_unflatten(new, spec)
                self.leaves.append(new)
                self.specs.append(spec)
            transform_state.reverse_depth += 1
            try:
                # inside a forward transform, unrecorded (forward over reverse: jvp(grad(f))): the pullback is then
                # tangent_grad, which reads the forward's tangents but records nothing, so a reverse graph of those
                # tangents would never be walked (autograd.functional.hvp does the same). Deviation, flagged: the
                # tangent of the value or aux (jvp(grad_and_value(f))) then has no graph to a tensor of the
                # closure that requires grad; torch's has one
                unrecorded = not self.record and dual_state.level is not None
                with rules_unrecorded() if unrecorded else nullcontext():
                    out = func(*new_args, **kwargs)
            finally:
                transform_state.reverse_depth -= 1
        self.output, self.aux = split_aux(out, has_aux, who)

    def pullback(self, outputs: list, cotangents: list, retain_graph: bool, create_graph: bool | None = None) -> list:
        """Per differentiated argument, its gradients (a list over its leaves): sum_i cotangent_i . d out_i / d x.
        The backward is recorded where an outer transform or the caller differentiates it (self.record), unless
        create_graph=False says not to (vjp_fn's argument, as torch.func's)."""
        xs = [x for leaves in self.leaves for x in leaves]
        kept = [(o, c) for o, c in zip(outputs, cotangents) if o.requires_grad and c is not None]
        if not kept:
            found = [None] * len(xs)
        else:
            outs, cots = [o for o, _ in kept], [c for _, c in kept]
            if self.record and create_graph is not False:
                found = autograd_grad(outs, xs, cots, retain_graph=True, create_graph=True, allow_unused=True)
            elif dual_state.level is not None:  # inside a forward transform: tangents flow through the backward
                found = tangent_grad(outs, xs, cots, retain_graph=retain_graph, allow_unused=True)
            else:
                found = autograd_grad(outs, xs, cots, retain_graph=retain_graph, allow_unused=True)
        found = [x.wrap(np.zeros_like(x._data)) if g is None else g for g, x in zip(found, xs)]  # on x's device
        out, start = [], 0
        for leaves in self.leaves:
            out.append(found[start : start + len(leaves)])
            start += len(leaves)
        return out

    def finish(self, t):
        """A value handed back to the caller: detached, unless an outer transform differentiates it."""
        if self.record or dual_state.level is not None:
            return t
        return t.detach() if hasattr(t, "detach") else t

    def arrange(self, per_argnum: list):
        """Per-argnum lists of leaves as the caller gave the arguments: a tuple over argnums if argnums was one."""
        trees = tuple(tree_unflatten(leaves, spec) for leaves, spec in zip(per_argnum, self.specs))
        return trees if self.is_tuple else trees[0]

    def aux_out(self):
        if self.aux is None:
            return None
        leaves, spec = tree_flatten(self.aux)
        return tree_unflatten([self.finish(x) for x in leaves], spec)


def grad_and_value(func, argnums=0, has_aux: bool = False, *, _who: str = "grad_and_value"):
    """A function returning (gradient, value) of a scalar func; with has_aux, (gradient, (value, aux)).
    The gradient is with respect to the argument(s) argnums, shaped as they are (a tuple for a tuple).
    (_who: the name errors give, grad's own when grad calls it.)"""

    def wrapper(*args, **kwargs):
        call = ReverseCall(func, args, kwargs, argnums, has_aux, f"{_who}(f)(*args)")
        check_scalar(call.output, call.who)
        ones = call.output.wrap(np.ones_like(call.output._data, shape=()))  # the seed, on the output's device
        grads = call.pullback([call.output], [ones], retain_graph=False)
        result = call.arrange([[call.finish(g) for g in gs] for gs in grads])
        value = call.finish(call.output)
        return (result, (value, call.aux_out())) if has_aux else (result, value)

    return wrapper


def grad(func, argnums=0, has_aux: bool = False):
    """A function returning the gradient of a scalar func with respect to argnums (with has_aux: (gradient, aux))."""
    inner = grad_and_value(func, argnums, has_aux, _who="grad")

    def wrapper(*args, **kwargs):
        g, value = inner(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapper


def vjp(func, *primals, has_aux: bool = False):
    """(func(*primals), vjp_fn) (with has_aux: (output, vjp_fn, aux)); vjp_fn(cotangents), cotangents shaped
    as the output, returns a tuple with the vector-Jacobian product for every primal, shaped as it.

    vjp_fn(cotangents, retain_graph=True, create_graph=None), as torch.func's: retain_graph=False frees the graph,
    so that a second call raises; the products are differentiable where the primals require grad (or an outer
    transform differentiates them) and grad mode is on, unless create_graph=False. (Where they are, the recorded
    backward keeps the graph whatever retain_graph says, as the outer differentiation reads it.)"""
    call = ReverseCall(func, primals, {}, tuple(range(len(primals))), has_aux, "vjp(f, *primals)")
    out_leaves, out_spec = tensor_leaves(call.output, call.who, "the output")

    def vjp_fn(cotangents, retain_graph: bool = True, create_graph: bool | None = None):
        for name, flag in (("retain_graph", retain_graph), ("create_graph", create_graph)):
            if not (isinstance(flag, bool) or (flag is None and name == "create_graph")):
                raise TypeError(f"vjp_fn: expected {name} to be a bool, got {flag!r}")
        cots, spec = tensor_leaves(cotangents, "vjp_fn(cotangents)", "the cotangent")
        if spec != out_spec:
            raise RuntimeError(
                f"vjp_fn(cotangents): expected cotangents with the output's structure, {_describe(call.output)}, "
                f"got {_describe(cotangents)}"
            )
        for k, (c, o) in enumerate(zip(cots, out_leaves)):
            if tuple(c.shape) != tuple(o.shape) or c.dtype != o.dtype:
                raise RuntimeError(
                    f"vjp_fn(cotangents): expected cotangent {k} of shape {tuple(o.shape)} and dtype {o.dtype} "
                    f"(the output's), got shape {tuple(c.shape)} and dtype {c.dtype}"
                )
            if c.device != o.device:
                raise RuntimeError(
                    f"vjp_fn(cotangents): invalid gradient at index {k} - expected device {o.device} (the output's) "
                    f"but got {c.device}; move it with .to({str(o.device)!r})"
                )
        grads = call.pullback(out_leaves, cots, retain_graph=retain_graph, create_graph=create_graph)
        return tuple(tree_unflatten([call.finish(g) for g in gs], spec) for gs, spec in zip(grads, call.specs))

    output = tree_unflatten([call.finish(o) for o in out_leaves], out_spec)
    return (output, vjp_fn, call.aux_out()) if has_aux else (output, vjp_fn)


def jacrev(func, argnums=0, *, has_aux: bool = False, chunk_size=None):
    """A function returning the Jacobian of func with respect to argnums by reverse mode, one backward per
    output element: entry for output o and input x has shape o.shape + x.shape (with has_aux: (jacobian, aux))."""
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"jacrev: expected chunk_size to be None or a positive int, got {chunk_size!r}")

    def wrapper(*args, **kwargs):
        call = ReverseCall(func, args, kwargs, argnums, has_aux, "jacrev(f)(*args)")
        out_leaves, out_spec = tensor_leaves(call.output, call.who, "the output")
        per_output = []
        for o in out_leaves:
            rows = [[[] for _ in leaves] for leaves in call.leaves]  # [argnum][leaf]: d o_flat[k] / d x, per k
            for k in range(o.numel()):
                onehot = np.zeros_like(o._data, shape=(o.numel(),))  # on o's device
                onehot[k] = 1
                cot = o.wrap(onehot.reshape(o.shape))
                # the function ran once, but the backward runs once per row: a draw there (a custom Function's
                # backward) would differ from row to row, so it is refused, as torch's vmap over the rows refuses it
                with randomness_refused("jacrev", JACREV_DRAW):
                    grads = call.pullback([o], [cot], retain_graph=True)
                for a, gs in enumerate(grads):
                    for j, g in enumerate(gs):
                        rows[a][j].append(g)
            jac = [
                [stack_jacobian(r, o, x, dim=0) for r, x in zip(ra, leaves)] for ra, leaves in zip(rows, call.leaves)
            ]
            per_output.append(call.arrange([[call.finish(j) for j in ja] for ja in jac]))
        result = tree_unflatten(per_output, out_spec)
        return (result, call.aux_out()) if has_aux else result

    return wrapper


JACREV_DRAW = (
    "in its backward, which jacrev runs once per output element, each run drawing its own numbers; jacrev takes no "
    "randomness flag (torch.func.jacrev refuses it too, in vmap's randomness error mode): draw the random numbers "
    "in the forward instead"
)


def stack_jacobian(parts: list, out, x, dim: int):
    """Rows (dim 0: each d out[k] / d x) or columns (dim -1: each d out / d x[j]) as one Tensor of shape
    out.shape + x.shape; zeros where there are none (an empty output or input)."""
    shape = tuple(out.shape) + tuple(x.shape)
    if not parts:
        return x.wrap(np.zeros_like(x._data, shape=shape))  # on x's device
    return stack(parts, dim=dim).reshape(*shape)


def _describe(tree) -> str:
    leaves, spec = tree_flatten(tree)
    return "a Tensor" if spec is None else f"a {type(tree).__name__} of {len(leaves)} tensors"
