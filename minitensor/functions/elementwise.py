"""The torch.* elementwise functions: arithmetic with PyTorch's promotion (add, sub, mul, div, pow), the
unary maps, clamp, maximum/minimum, where, masked_fill; comparisons and logic, which make no graph."""

from __future__ import annotations

import builtins
import numbers

import numpy as np

from .. import ops
from ..arguments import alpha_times, binary, check_fill_value, floating, operand, operands, shapes_broadcast
from ..autograd import ieee_quiet, is_tensor_like
from ..devices import array_module
from ..dtypes import bool_, get_default_dtype, result_type
from ..ops.reductions import result_array

__all__ = [
    "abs",
    "add",
    "allclose",
    "clamp",
    "cos",
    "div",
    "equal",
    "erf",
    "exp",
    "floor_divide",
    "is_tensor",
    "log",
    "masked_fill",
    "maximum",
    "minimum",
    "mul",
    "neg",
    "numel",
    "pow",
    "relu",
    "remainder",
    "rsqrt",
    "sigmoid",
    "sin",
    "sqrt",
    "sub",
    "tanh",
    "where",
]


def true_div(a, b):
    dt = result_type(a, b)
    if dt.kind != "f":
        dt = get_default_dtype()  # true division of integers gives floats, as in PyTorch
    return binary(ops.Div, a, b, dt)


def compare(fn, a, b):
    x = a._data if is_tensor_like(a) else a
    y = b._data if is_tensor_like(b) else b
    try:
        with np.errstate(over="ignore"):  # a number beyond float16's range compares as inf there, as in torch
            return (a if is_tensor_like(a) else b).wrap(result_array(fn(x, y)))
    except ValueError as e:
        raise ValueError(f"comparison {fn.__name__}: shapes {np.shape(x)} and {np.shape(y)} do not broadcast") from e


def logical(fn, sym: str, a, b):
    like = a if is_tensor_like(a) else b
    xp = array_module(like._data)  # a Python bool or int operand joins the tensor's device
    x = a._data if is_tensor_like(a) else xp.asarray(a)
    y = b._data if is_tensor_like(b) else xp.asarray(b)
    if x.dtype != bool_ or y.dtype != bool_:
        if x.dtype.kind in "iu" and y.dtype.kind in "iu":
            op = {"&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor}[sym]
            return like.wrap(result_array(op(x, y)))
        raise TypeError(f"operator {sym}: expected bool (or integer) tensors, got {x.dtype} and {y.dtype}")
    try:
        return like.wrap(result_array(fn(x, y)))
    except ValueError as e:
        raise ValueError(f"operator {sym}: shapes {x.shape} and {y.shape} do not broadcast") from e


def invert(a):
    if a.dtype == bool_:
        return a.wrap(np.logical_not(a._data))
    if a.dtype.kind in "iu":
        return a.wrap(np.invert(a._data))
    raise TypeError(f"operator ~: expected a bool or integer tensor, got {a.dtype}")


def add(a, b, *, alpha=1):
    """a + alpha * b"""
    return binary(ops.Add, a, alpha_times(b, alpha, a, "add"))


def sub(a, b, *, alpha=1):
    """a - alpha * b"""
    return binary(ops.Sub, a, alpha_times(b, alpha, a, "sub"))


def mul(a, b):
    return binary(ops.Mul, a, b)


def div(a, b, *, rounding_mode=None):
    """a / b; rounding_mode 'trunc' rounds the quotient toward zero, 'floor' down (Python's //), both in the
    operands' promoted dtype (integers stay integers) and with the gradient 0, as in PyTorch."""
    if rounding_mode is None:
        return true_div(a, b)
    if rounding_mode not in ("trunc", "floor"):
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    x, y = operands(a, b)
    if x.dtype.kind in "iub" and not np.all(y._data):
        raise ZeroDivisionError(f"div: integer division by zero (rounding_mode={rounding_mode!r})")
    return binary(ops.DivRounded, x, y, rounding_mode=rounding_mode)


def floor_divide(a, b):
    """a // b: the quotient rounded down (Python's and torch's floor rule), gradient 0; div(a, b, 'floor')."""
    return div(a, b, rounding_mode="floor")


def remainder(a, b):
    """a % b = a - floor(a / b) * b, with the sign of b (Python's and torch's rule, not C's fmod);
    da = g, db = -g * floor(a / b). Integer division by zero raises, as torch's."""
    x, y = operands(a, b)
    if x.dtype.kind in "iub" and not np.all(y._data):
        raise ZeroDivisionError("remainder: integer division by zero")
    return binary(ops.Remainder, x, y)


def rsqrt(a):
    """1 / sqrt(a)."""
    return 1.0 / sqrt(a)


def neg(a):
    return ops.Neg.apply(a)


def exp(a):
    return a.exp()


def log(a):
    return a.log()


def sqrt(a):
    return a.sqrt()


def abs(a):
    return a.abs()


def sin(a):
    return a.sin()


def cos(a):
    return a.cos()


def tanh(a):
    return a.tanh()


def erf(a):
    return a.erf()


def sigmoid(a):
    return a.sigmoid()


def relu(a):
    return a.relu()


def pow(a, b):
    """a ** b for tensors and Python numbers (either side)."""
    if is_tensor_like(a) and not is_tensor_like(b):
        if not isinstance(b, numbers.Real):
            raise TypeError(f"pow: exponent must be a number or tensor, got {type(b).__name__}")
        if a.dtype.kind != "f" and isinstance(b, numbers.Integral) and b < 0:
            raise ValueError(
                f"pow: integer tensor ({a.dtype}) to a negative integer power {b} is not allowed, as in PyTorch"
            )
        a = floating(a) if isinstance(b, float) else a
        return ops.PowScalar.apply(a, exponent=b)
    if not is_tensor_like(a):
        dt = result_type(a, b)
        return ops.RPowScalar.apply(operand(b, dt, b), base=a)
    return binary(ops.Pow, a, b)


def clamp(a, min=None, max=None):
    """min(max(a, min), max); each bound a number or a tensor that broadcasts with a. Tensor bounds are
    differentiated as in PyTorch: a bound gets the gradient where it is active (ops.Clamp)."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    bounds = [b for b in (min, max) if b is not None]
    for b in bounds:
        if not (is_tensor_like(b) or isinstance(b, numbers.Real)):
            raise TypeError(f"clamp: min and max must be numbers or tensors, got {type(b).__name__}")
    dt = result_type(a, *bounds)  # as in PyTorch: a float bound promotes an integer input
    like = next((v for v in (a, *bounds) if is_tensor_like(v)), None)
    if like is None:
        raise TypeError(f"clamp: input must be a Tensor, got {type(a).__name__}")
    for b in bounds:  # a number bound beyond the dtype's range is refused, as torch refuses it
        if not is_tensor_like(b):
            check_fill_value(b, dt, "clamp")
    x, *bs = (operand(v, dt, like) for v in (a, *bounds))
    shapes = [t.shape for t in (x, *bs)]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"clamp: shapes input {x.shape}, min/max {[t.shape for t in bs]} do not broadcast") from None
    all_numbers = not builtins.any(is_tensor_like(b) for b in bounds)  # PyTorch's clamp.Scalar: its own JVP
    return ops.Clamp.apply(x, *bs, has_min=min is not None, has_max=max is not None, number_bounds=all_numbers)


def maximum(a, b):
    return binary(ops.Maximum, a, b)


def minimum(a, b):
    return binary(ops.Minimum, a, b)


def where(condition, input, other):
    """condition ? input : other, broadcasting all three; condition must be bool."""
    like = next((v for v in (input, other, condition) if is_tensor_like(v)), None)
    if like is None:
        raise TypeError("where: expected a Tensor among condition, input and other")
    cond = condition._data if is_tensor_like(condition) else array_module(like._data).asarray(condition)
    if cond.dtype != bool_:
        raise TypeError(f"where: condition must be a bool tensor, got {cond.dtype}")
    dt = result_type(input, other)
    a, b = operand(input, dt, like), operand(other, dt, like)
    try:
        np.broadcast_shapes(cond.shape, a.shape, b.shape)
    except ValueError:
        raise ValueError(
            f"where: shapes condition {cond.shape}, input {a.shape}, other {b.shape} do not broadcast"
        ) from None
    return ops.Where.apply(a, b, cond=cond)


def masked_fill(input, mask, value):
    """input with `value` wherever the bool `mask` is True; mask and input broadcast together (as in PyTorch,
    a larger mask gives a larger result; the in-place masked_fill_ cannot grow its tensor and refuses).
    `value` is a number or a 0-d tensor, which gets the gradient summed over the masked positions."""
    xp = array_module(input._data)  # a host mask (a NumPy array, a list) joins the input's device
    m = mask._data if is_tensor_like(mask) else xp.asarray(mask)
    if m.dtype != bool_:
        raise TypeError(f"masked_fill: mask must be a bool tensor, got {m.dtype}")
    if not shapes_broadcast(m.shape, input.shape):
        raise ValueError(f"masked_fill: mask of shape {m.shape} and input of shape {input.shape} do not broadcast")
    if is_tensor_like(value):
        if value.ndim != 0:
            raise ValueError(
                f"masked_fill: value must be a number or a 0-d tensor, got a tensor of shape {value.shape}"
            )
        if value.dtype.kind == "f" and input.dtype.kind == "f":
            value = operand(value, input.dtype, value)  # a differentiable cast: value's gradient in its own dtype
        else:
            value = input.wrap(value._data.astype(input.dtype))
    elif isinstance(value, numbers.Number):
        check_fill_value(value, input.dtype, "masked_fill")
        with ieee_quiet():  # -inf or NaN into an integer tensor: NumPy's value, no warning
            value = input.wrap(xp.asarray(value).astype(input.dtype))
    else:
        raise TypeError(f"masked_fill: value must be a number or a 0-d tensor, got {type(value).__name__}")
    return ops.MaskedFill.apply(input, value, mask=m)


def equal(a, b) -> builtins.bool:
    return a.shape == b.shape and builtins.bool(np.array_equal(a._data, b._data))


def allclose(a, b, rtol=1e-5, atol=1e-8) -> builtins.bool:
    return builtins.bool(np.allclose(a._data, b._data, rtol=rtol, atol=atol))


def numel(t) -> int:
    return t.numel()


def is_tensor(x) -> builtins.bool:
    return is_tensor_like(x)
