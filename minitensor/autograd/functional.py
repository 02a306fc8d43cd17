"""mt.autograd.functional: vjp, jvp, jacobian, hessian, hvp and vhp, as torch.autograd.functional.

Every function takes a Python function `func` and its inputs (a Tensor or a tuple of Tensors) and
returns what PyTorch returns, shaped the same way: a single Tensor where the inputs (or outputs)
were a single Tensor, a tuple where they were a tuple. Reverse mode is `mt.autograd.grad`; forward
mode is the dual level (forward_ad.py); forward over reverse is a gradient taken inside a dual level,
whose tangent is H v (`tangent_grad` walks the backward on Tensors without recording it):

    vjp(f, x, v)   = v^T J                      one backward
    jvp(f, x, v)   = J v                        one forward pass with tangents (forward mode). Deviation,
                                                 flagged: PyTorch uses the double-vjp trick (two backwards);
                                                 the values agree
    hvp(f, x, v)   = H v                        forward over reverse: f and its gradient in a dual level
                                                 along v (PyTorch: the double-vjp trick, three backwards)
    vhp(f, x, v)   = v^T H                      the gradient recorded, then its vjp with v (two backwards,
                                                 as PyTorch)
    jacobian(f, x) = J                           one backward per output element (reverse mode), or one
                                                 forward pass per input element (strategy="forward-mode")
    hessian(f, x)  = the jacobian of the gradient (outer_jacobian_strategy="forward-mode": forward over
                                                 reverse, one tangent pass per input element)

`create_graph=True` keeps the result differentiable (its graph is recorded); otherwise results are
detached. `strict=True` raises where an output is independent of an input (PyTorch would return
zeros there without it), with PyTorch's messages. `vectorize` is accepted and ignored: PyTorch's
vectorize batches the rows of a Jacobian with vmap, which minitensor does not have; the rows are
computed one by one here, with the same values (so strategy="forward-mode" needs no vectorize=True
here, where PyTorch requires it: flagged).

`functional_call(module, parameters, *args)` (PyTorch's torch.func.functional_call, from stateless.py) runs a
module with tensors of your choosing in place of its parameters, so that a model's loss becomes a function
of its parameters: `hvp(lambda *ps: loss(functional_call(model, dict(zip(names, ps)), x)), params, v)`.
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np

from ..core import enable_grad, grad, is_tensor_like, no_grad
from ..creation import ones_like, zeros_like
from ..functions.shape import stack
from ..random import randomness_refused
from . import forward_ad
from .stateless import functional_call
from .tangents import rules_unrecorded, tangent_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp", "functional_call"]


# --------------------------------------------------------------------------------------------
# Argument handling, as in torch.autograd.functional (same checks, same messages)
# --------------------------------------------------------------------------------------------


def _as_tuple(inp, arg_name: str, fn_name: str) -> tuple[bool, tuple]:
    """(was it a tuple, the tuple); TypeError for anything that is not a Tensor."""
    is_tuple = isinstance(inp, (tuple, list))
    items = tuple(inp) if is_tuple else (inp,)
    for i, el in enumerate(items):
        if not is_tensor_like(el):
            what = f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors"
            raise TypeError(
                f"{what} but the value at index {i} has type {type(el).__name__}."
                if is_tuple
                else f"{what} but the given {arg_name} has type {type(el).__name__}."
            )
    return is_tuple, items


def _unpack(res, is_tuple):
    """Undo _as_tuple: a single Tensor where the caller gave one. `is_tuple` may be a pair (jacobian)."""
    if isinstance(is_tuple, tuple):
        if not is_tuple[1]:
            res = tuple(r[0] for r in res)
        if not is_tuple[0]:
            res = res[0]
        return res
    return res if is_tuple else res[0]


def _preprocess(inputs: tuple, create_graph: bool, need_graph: bool) -> tuple:
    """Fresh leaves for the inputs; with create_graph, an input already in a graph stays connected to it."""
    out = []
    for x in inputs:
        if create_graph and x.requires_grad:
            out.append(x.view_as(x))  # a new node over x: higher derivatives reach x's graph
        else:
            out.append(x.detach().requires_grad_(need_graph) if x.is_floating_point() else x.detach())
    return tuple(out)


def _postprocess(res, create_graph: bool):
    """Detach the results unless the caller asked to differentiate them again."""
    if create_graph:
        return res
    if is_tensor_like(res):
        return res.detach()
    return tuple(_postprocess(r, create_graph) for r in res)


def _validate_v(v: tuple, other: tuple, is_other_tuple: bool) -> None:
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if tuple(el_v.shape) != tuple(el_other.shape):
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(
                f"{prepend}v has invalid size: should be {tuple(el_other.shape)} but got {tuple(el_v.shape)}."
            )
        if el_v.device != el_other.device:  # torch's engine words it so; checked here before any work
            raise RuntimeError(
                f"invalid gradient at index {idx} - expected device {el_other.device} but got {el_v.device} "
                f"(v {idx}; move it with .to({str(el_other.device)!r}))"
            )


_STRICT_MESSAGES = {
    "outputs": "Output {i} of the user-provided function does not require gradients. The outputs must be computed "
    "in a differentiable manner from the input when running in strict mode.",
    "grad_inputs": "The gradient with respect to input {i} is independent of the inputs of the user-provided "
    "function. This is not allowed in strict mode.",
    "jacobian": "While computing the hessian, found that the jacobian of the user-provided function with respect to "
    "input {i} is independent of the input. This is not allowed in strict mode. You should ensure that "
    "your function is twice differentiable and that the jacobian depends on the inputs (this would be "
    "violated by a linear function for example).",
    "hessian": "The hessian of the user-provided function with respect to input {i} is independent of the input. "
    "This is not allowed in strict mode. You should ensure that your function is thrice differentiable "
    "and that the hessian depends on the inputs.",
}


def _check_requires_grad(tensors: tuple, kind: str, strict: bool) -> None:
    """In strict mode, every tensor must exist and depend on the inputs (PyTorch's messages)."""
    if not strict:
        return
    for i, t in enumerate(tensors):
        if t is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of input {i}. This is not "
                "allowed in strict mode."
            )
        if not t.requires_grad:
            raise RuntimeError(_STRICT_MESSAGES[kind].format(i=i))


def _grad(
    outputs: tuple, inputs: tuple, grad_outputs=None, create_graph: bool = False, retain_graph: bool | None = None
) -> tuple:
    """mt.autograd.grad over the outputs that require grad (None for every input when none does)."""
    grad_outputs = (None,) * len(outputs) if grad_outputs is None else tuple(grad_outputs)
    kept = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not kept:
        return (None,) * len(inputs)
    return tuple(
        grad(
            [o for o, _ in kept],
            list(inputs),
            [g for _, g in kept],
            create_graph=create_graph,
            retain_graph=retain_graph,
            allow_unused=True,
        )
    )


def _fill_in_zeros(grads: tuple, refs: tuple, strict: bool, create_graph: bool, stage: str) -> tuple:
    """Zeros where a gradient is None (the output does not depend on that input); in strict mode an error."""
    out = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(_STRICT_ZERO[stage].format(i=i))
            g = zeros_like(ref)
        out.append(g)
    return tuple(out)


_STRICT_ZERO = {
    "back": "The output of the user-provided function is independent of input {i}. This is not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the grad_outputs when "
    "using the double backward trick to compute forward mode gradients. This is not allowed in strict "
    "mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. This is not allowed in "
    "strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} in the grad_jacobian"
    ". This is not allowed in strict mode as it prevents from using the double backward trick "
    "to replace forward mode AD.",
}


def _prepare_v(v, refs: tuple, is_refs_tuple: bool, fn_name: str, create_graph: bool, none_message: str) -> tuple:
    """v as a tuple matching `refs` in count and shapes; v=None only where refs is one single-element Tensor."""
    if v is None:
        if len(refs) != 1 or refs[0].numel() != 1:
            raise RuntimeError(none_message)
        return None
    _, v = _as_tuple(v, "v", fn_name)
    v = _preprocess(v, create_graph, need_graph=False)
    _validate_v(v, refs, is_refs_tuple)
    return v


# --------------------------------------------------------------------------------------------
# The functions
# --------------------------------------------------------------------------------------------


def _call(func, inputs, create_graph: bool, strict: bool, fn_name: str) -> tuple:
    """func on fresh leaves of the inputs, under enable_grad: (is_inputs_tuple, inputs, is_outputs_tuple, outputs)."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _preprocess(inputs, create_graph, need_graph=True)
    outputs = func(*inputs)
    is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", fn_name)
    _check_requires_grad(outputs, "outputs", strict)
    return is_inputs_tuple, inputs, is_outputs_tuple, outputs


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T J): the vector-Jacobian product of func at inputs with v (one backward)."""
    with enable_grad():
        is_inputs_tuple, inputs, is_outputs_tuple, outputs = _call(func, inputs, create_graph, strict, "vjp")
        v = _prepare_v(
            v,
            outputs,
            is_outputs_tuple,
            "vjp",
            create_graph,
            "The vector v can only be None if the user-provided function returns a single Tensor with "
            "a single element.",
        )
        grads = _grad(outputs, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grads, inputs, strict, create_graph, "back")
    return (
        _unpack(_postprocess(outputs, create_graph), is_outputs_tuple),
        _unpack(_postprocess(result, create_graph), is_inputs_tuple),
    )


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), J v) by forward mode: one pass of func with the inputs as dual numbers along v.

    Deviation, flagged: torch.autograd.functional.jvp computes J v by the double-vjp trick (two
    backwards through a recorded graph); the values agree, and one forward pass is cheaper. Without
    create_graph, func runs under no_grad: tangents flow there, nothing is recorded."""
    with enable_grad() if create_graph else no_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _preprocess(inputs, create_graph, need_graph=create_graph)
        v = _prepare_v(
            v,
            inputs,
            is_inputs_tuple,
            "jvp",
            create_graph,
            "The vector v can only be None if the input to the user-provided function is a single "
            "Tensor with a single element.",
        )
        v = _ones_if_none(v, inputs)
        with forward_ad.dual_level():
            outputs = func(*_duals(inputs, v))
            is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "jvp")
            unpacked = [forward_ad.unpack_dual(o) for o in outputs]
        outputs = tuple(p for p, _ in unpacked)
        result = []
        for i, (o, (_, t)) in enumerate(zip(outputs, unpacked)):
            if t is None and strict:
                raise RuntimeError(
                    f"Output {i} of the user-provided function is independent of the inputs: it carries no "
                    "tangent. This is not allowed in strict mode."
                )
            result.append(zeros_like(o) if t is None else t)
    return (
        _unpack(_postprocess(outputs, create_graph), is_outputs_tuple),
        _unpack(_postprocess(tuple(result), create_graph), is_outputs_tuple),
    )


def _ones_if_none(v, inputs: tuple) -> tuple:
    """v, or ones for the one single-element input (where torch allows v=None)."""
    return tuple(ones_like(x) for x in inputs) if v is None else v


def _duals(inputs: tuple, v: tuple) -> tuple:
    """The inputs as dual tensors along v (inside an open dual level); one without a tangent (None), or an
    integer one, stays as it is."""
    return tuple(
        forward_ad.make_dual(x, t) if t is not None and x.is_floating_point() else x for x, t in zip(inputs, v)
    )


def jacobian(
    func,
    inputs,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
):
    """The Jacobian of func at inputs: entry [i][j] has shape outputs[i].shape + inputs[j].shape.

    strategy="reverse-mode": one backward per output element; "forward-mode": one forward pass with
    tangents per input element (cheaper for a tall Jacobian: few inputs, many outputs). `vectorize` is
    accepted and has no effect here (see the module docstring).
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError(
            f'Expected strategy to be either "forward-mode" or "reverse-mode", got {strategy!r}. Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more performant. Otherwise, '
            'prefer to use "reverse-mode".'
        )
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                'jacobian: `create_graph=True` and `strategy="forward-mode"` are not supported together '
                '(as in torch): set create_graph=False or strategy="reverse-mode"'
            )
        return _jacobian_forward(func, inputs, strict)
    with enable_grad():
        is_inputs_tuple, inputs, is_outputs_tuple, outputs = _call(func, inputs, create_graph, strict, "jacobian")
        result = []
        for i, out in enumerate(outputs):
            rows = [[] for _ in inputs]  # rows[j]: d out_flat[k] / d inputs[j], per k
            flat = out.reshape(-1)
            for k in range(flat.numel()):
                grads = _grad((flat[k],), inputs, create_graph=create_graph, retain_graph=True)
                for j, (g, _x) in enumerate(zip(grads, inputs)):
                    if g is None and strict:
                        raise RuntimeError(
                            f"Output {i} of the user-provided function is independent of input {j}. "
                            "This is not allowed in strict mode."
                        )
                    rows[j].append(g)
            result.append(tuple(_stack_rows(r, out, x) for r, x in zip(rows, inputs)))
    return _unpack(_postprocess(tuple(result), create_graph), (is_outputs_tuple, is_inputs_tuple))


def _stack_rows(rows: list, out, x):
    """The rows d out[k] / d x (None: zeros) as one Tensor of shape out.shape + x.shape."""
    if not rows:  # an empty output: an empty Jacobian
        return _zeros_beside(x, tuple(out.shape) + tuple(x.shape))
    return stack([zeros_like(x) if g is None else g for g in rows]).reshape(*(tuple(out.shape) + tuple(x.shape)))


def _zeros_beside(x, shape: tuple):
    """A Tensor of zeros of `shape` in x's dtype, on x's device (np.zeros_like keeps the array's library)."""
    return x.wrap(np.zeros_like(x._data, shape=shape))


def _unit_tangents(inputs: tuple):
    """For each input j and element e: the tangents (None for every input but j, a unit vector e for j)."""
    for j, x in enumerate(inputs):
        for e in range(x.numel()):
            unit = _zeros_beside(x, (x.numel(),))
            unit._data[e] = 1
            yield j, tuple(unit.reshape(*x.shape) if k == j else None for k in range(len(inputs)))


def _columns_to_jacobian(columns: list, refs: tuple, inputs: tuple) -> tuple:
    """columns[j]: per input element e of inputs[j], one tangent per ref (d ref / d inputs[j][e]); entry
    [i][j] of the result is d refs[i] / d inputs[j], of shape refs[i].shape + inputs[j].shape."""
    out = []
    for i, r in enumerate(refs):
        shape_i = tuple(r.shape)
        out.append(
            tuple(
                stack([col[i] for col in columns[j]], dim=-1).reshape(*(shape_i + tuple(x.shape)))
                if columns[j]
                else _zeros_beside(x, shape_i + tuple(x.shape))
                for j, x in enumerate(inputs)
            )
        )
    return tuple(out)


FORWARD_MODE_DRAW = (
    "in the function, which the forward-mode strategy runs once per input element, each run drawing its own "
    "numbers (torch refuses it too: its forward-mode strategy runs under vmap); use the reverse-mode strategy (one "
    "run, one draw), or mt.func.jacfwd(f, randomness='same')"
)


def _jacobian_forward(func, inputs, strict: bool):
    """jacobian(strategy="forward-mode"): column e of d out / d x_j is J e, one forward pass per input element."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    inputs = _preprocess(inputs, False, need_graph=False)
    columns = [[] for _ in inputs]
    outputs, is_outputs_tuple = None, False
    # tangents flow under no_grad; nothing here is differentiated again. func runs once per column: a random draw
    # would differ from column to column, so it is refused (as torch's vmapped forward-mode strategy refuses it)
    with no_grad(), randomness_refused("jacobian (strategy='forward-mode')", FORWARD_MODE_DRAW):
        for j, tangents in _unit_tangents(inputs):
            with forward_ad.dual_level():
                outs = func(*_duals(inputs, tangents))
                is_outputs_tuple, outs = _as_tuple(outs, "outputs of the user-provided function", "jacobian")
                unpacked = [forward_ad.unpack_dual(o) for o in outs]
            col = []
            for i, (o, (_, t)) in enumerate(zip(outs, unpacked)):
                if t is None and strict:
                    raise RuntimeError(
                        f"Output {i} of the user-provided function is independent of input {j}. "
                        "This is not allowed in strict mode."
                    )
                col.append(zeros_like(o) if t is None else t)
            columns[j].append(col)
            outputs = outputs or tuple(p for p, _ in unpacked)
        if outputs is None:  # no input element: one plain call gives the outputs' shapes
            is_outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jacobian")
    result = _columns_to_jacobian(columns, outputs, inputs)
    return _unpack(_postprocess(result, False), (is_outputs_tuple, is_inputs_tuple))


def hessian(
    func,
    inputs,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
):
    """The Hessian of a scalar func: the jacobian of its gradient; entry [i][j] has shape inputs[i] + inputs[j].

    outer_jacobian_strategy="reverse-mode" (torch's default): the gradient recorded, then one backward
    through it per input element. "forward-mode": forward over reverse, one pass of func and its gradient
    in a dual level per input element (column e of H is H e), nothing recorded."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                'hessian: `create_graph=True` and `outer_jacobian_strategy="forward-mode"` are not supported '
                'together (as in torch): set create_graph=False or outer_jacobian_strategy="reverse-mode"'
            )
        inputs = _preprocess(inputs, False, need_graph=True)
        columns = [[] for _ in inputs]
        with enable_grad(), randomness_refused("hessian (outer_jacobian_strategy='forward-mode')", FORWARD_MODE_DRAW):
            for j, tangents in _unit_tangents(inputs):
                columns[j].append(_gradient_tangents(func, inputs, tangents, False, strict, "hessian")[1])
        return _unpack(_columns_to_jacobian(columns, inputs, inputs), (is_inputs_tuple, is_inputs_tuple))

    def scalar_func(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict)
        if is_out_tuple:
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
        return out.reshape(())

    def jac_func(*inp):
        jac = jacobian(scalar_func, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    res = jacobian(
        jac_func,
        inputs,
        create_graph=create_graph,
        strict=strict,
        vectorize=vectorize,
        strategy=outer_jacobian_strategy,
    )
    return _unpack(res, (is_inputs_tuple, is_inputs_tuple))


def _scalar_output(func, inputs: tuple, strict: bool, fn_name: str):
    """func(*inputs), which must be one Tensor with one element (torch's checks and messages)."""
    outputs = func(*inputs)
    is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", fn_name)
    _check_requires_grad(outputs, "outputs", strict)
    if is_outputs_tuple:
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should contain a single element")
    return outputs[0]


def _prepare_scalar_call(func, inputs, v, create_graph, strict, fn_name):
    """Shared start of vhp and hvp: (is_inputs_tuple, inputs as fresh leaves, v checked)."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _preprocess(inputs, create_graph, need_graph=True)
    v = _prepare_v(
        v,
        inputs,
        is_inputs_tuple,
        fn_name,
        create_graph,
        "The vector v can only be None if the input to the user-provided function is a single Tensor "
        "with a single element.",
    )
    return is_inputs_tuple, inputs, v


def _gradient_tangents(func, inputs: tuple, v: tuple, create_graph: bool, strict: bool, fn_name: str):
    """Forward over reverse: (f(inputs), H v), f and its gradient computed in a dual level along v (None: no
    tangent for that input). The gradient's tangent is H v. Without create_graph the backward runs on Tensors
    unrecorded (tangent_grad), and so do the forward's rules (rules_unrecorded): only the tangents are wanted,
    not a graph for a second backward."""
    with forward_ad.dual_level(), nullcontext() if create_graph else rules_unrecorded():
        duals = _duals(inputs, v)
        output = _scalar_output(func, duals, strict, fn_name)
        if create_graph:
            jac = _grad((output,), duals, create_graph=True)
        else:
            jac = tangent_grad(output, duals, allow_unused=True) if output.requires_grad else (None,) * len(duals)
        result = []
        for i, g in enumerate(jac):
            if g is None and strict:
                raise RuntimeError(_STRICT_ZERO["back"].format(i=i))
            t = None if g is None else forward_ad.unpack_dual(g).tangent
            if t is None and strict:
                raise RuntimeError(_STRICT_MESSAGES["jacobian"].format(i=i))
            result.append(zeros_like(inputs[i]) if t is None else t)
        output = forward_ad.unpack_dual(output).primal
    return output, tuple(result)


def vhp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T H) for a scalar func: the gradient recorded, then its vjp with v (two backwards)."""
    with enable_grad():
        is_inputs_tuple, inputs, v = _prepare_scalar_call(func, inputs, v, create_graph, strict, "vhp")
        output = _scalar_output(func, inputs, strict, "vhp")
        jac = _grad((output,), inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        grads = _grad(jac, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grads, inputs, strict, create_graph, "double_back")
    return _postprocess(output, create_graph), _unpack(_postprocess(result, create_graph), is_inputs_tuple)


def hvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), H v) for a scalar func, by forward over reverse: the gradient of func taken inside a
    dual level along v has the tangent H v (one forward pass and one backward, both carrying tangents).

    Deviation, flagged: torch.autograd.functional.hvp uses the double-vjp trick on the gradient (three
    backwards: g = grad f recorded, u -> H^T u recorded, then its vjp with v); the values agree."""
    with enable_grad():
        is_inputs_tuple, inputs, v = _prepare_scalar_call(func, inputs, v, create_graph, strict, "hvp")
        output, result = _gradient_tangents(func, inputs, _ones_if_none(v, inputs), create_graph, strict, "hvp")
    return _postprocess(output, create_graph), _unpack(_postprocess(result, create_graph), is_inputs_tuple)
