"""Argument handling for the Tensor's methods and the torch.* functions: operands promoted as PyTorch
does, dims and sizes normalised, indices checked, Python data turned into arrays with PyTorch's dtype
inference, and the validators the functions share.

This file sits below tensor.py, as ops/ and autograd/ do: it knows a Tensor by what it has (its
`version_counter`: autograd.is_tensor_like) and makes new ones with the `wrap` of a tensor at hand.
"""

from __future__ import annotations

import builtins
import collections
import numbers
import operator

import numpy as np

from . import devices
from .autograd import is_tensor_like
from .dtypes import SUPPORTED, get_default_dtype, int64, result_type


def operand(x, dtype: np.dtype, like):
    """x (a tensor or a Python number) as a tensor of `dtype`; a number is wrapped by `like`, a tensor."""
    if is_tensor_like(x):
        return x if x._data.dtype == dtype else x.to(dtype)
    return like.wrap(number_like(x, dtype, like._data))


def number_like(x, dtype, arr):
    """A Python number as a 0-d array of `dtype` beside `arr`, on its device (a transfer, not a sync). Other
    data stays a host array: beside a device tensor, Function.apply then refuses it, as torch refuses a CPU
    tensor operand, or moves it if it is 0-d. A number beyond a float dtype's range becomes inf there, quietly,
    as torch converts it (70000.0 beside a float16 tensor)."""
    with np.errstate(over="ignore"):
        if type(arr) is np.ndarray or not isinstance(x, (builtins.int, builtins.float, builtins.bool, np.generic)):
            if devices.is_array(x) and not devices.is_host(x):  # a device array (a backward's 0-d scale): stays there
                return x.astype(dtype, copy=False)
            return np.asarray(x, dtype=dtype)
        return devices.array_module(arr).asarray(x, dtype=dtype)


# The binary ops whose Python number PyTorch keeps at the op's computation precision beside a float16 tensor
# (its CPU mul and div take the number as a float32 scalar): x / 100000.0 is 1e-05, not x / inf = 0. Every
# other op converts the number to float16 first, as torch does (x + 70000.0 is inf there too).
_OPMATH_NUMBER_OPS = ("Mul", "Div")


def _half_beside_number(fn, a, b, dtype):
    """The float16 tensor among a and b when the other is a Python number and fn keeps that number at float32."""
    if fn.__name__ not in _OPMATH_NUMBER_OPS or (dtype is not None and dtype != np.float16):
        return None
    for t, other in ((a, b), (b, a)):
        if is_tensor_like(t) and t._data.dtype == np.float16 and isinstance(other, (builtins.int, builtins.float)):
            return t
    return None


def binary(fn, a, b, dtype=None, **kwargs):
    """fn.apply on a and b (tensors or Python numbers) promoted as PyTorch does, or to `dtype`;
    operands that do not broadcast give an error naming the op and both shapes."""
    half = _half_beside_number(fn, a, b, dtype)
    if half is not None:  # computed at float32 beside the number, rounded to float16 once (torch's opmath)
        wide = half.to(np.float32)
        x, y = (wide, b) if a is half else (a, wide)
        return binary(fn, x, y, None if dtype is None else np.dtype(np.float32), **kwargs).to(np.float16)
    x, y = operands(a, b, dtype)
    try:
        return fn.apply(x, y, **kwargs)
    except ValueError:
        if shapes_broadcast(x.shape, y.shape):  # some other error: NumPy's message says it
            raise
        raise ValueError(f"{fn.__name__.lower()}: shapes {x.shape} and {y.shape} do not broadcast") from None


def operands(a, b, dtype=None) -> tuple:
    """(a, b) as tensors of one dtype: PyTorch's promotion of the two, or `dtype`. One of them is a tensor."""
    # hasattr(., "version_counter") is is_tensor_like, inlined on the path every `x + y` takes
    a_tensor, b_tensor = hasattr(a, "version_counter"), hasattr(b, "version_counter")
    if dtype is None:
        # fast paths: same-dtype tensors, and a float tensor with a Python number (which never promotes it)
        if a_tensor:
            if b_tensor:
                if a._data.dtype == b._data.dtype:
                    return a, b
            elif type(b) in (float, int) and a._data.dtype.kind == "f":
                return a, a.wrap(number_like(b, a._data.dtype, a._data))
        elif b_tensor and type(a) in (float, int) and b._data.dtype.kind == "f":
            return b.wrap(number_like(a, b._data.dtype, b._data)), b
    if not (a_tensor or b_tensor):
        raise TypeError(f"expected a Tensor operand, got {type(a).__name__} and {type(b).__name__}")
    if dtype is None:
        dtype = result_type(a, b)
    like = a if a_tensor else b
    return operand(a, dtype, like), operand(b, dtype, like)


def shapes_broadcast(a: tuple, b: tuple) -> builtins.bool:
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


def broadcasts_to(shape: tuple, target: tuple) -> builtins.bool:
    """Whether an operand of `shape` broadcasts to exactly `target` (as an in-place operand must)."""
    return shapes_broadcast(shape, target) and np.broadcast_shapes(shape, target) == tuple(target)


def scaled(other, alpha):
    return other if alpha == 1 else other * alpha


def normalize_dims(dim, ndim: int, op: str):
    """Normalise a dim argument (None, int or tuple) to None or a tuple of non-negative ints.

    None means every dim, and so do () (as in PyTorch: `dim=()` reduces everything) and any dim of a 0-d
    tensor (whose only "dim", 0 or -1, is the whole tensor)."""
    if dim is None:
        return None
    try:
        dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    except TypeError:  # a float or other non-iterable
        raise TypeError(f"{op}: dim must be an int or tuple of ints, got {dim!r}") from None
    out = []
    for d in dims:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool):
            raise TypeError(f"{op}: dim must be an int or tuple of ints, got {dim!r}")
        if not -builtins.max(ndim, 1) <= d < builtins.max(ndim, 1):
            raise IndexError(f"{op}: dim {d} out of range for a tensor of {ndim} dimensions")
        out.append(int(d) % builtins.max(ndim, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: dim {dim!r} repeats a dimension")
    return tuple(out) if out and ndim else None


def normalize_dim(dim, ndim: int, op: str) -> int:
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int, got {dim!r}")
    if not -builtins.max(ndim, 1) <= dim < builtins.max(ndim, 1):
        raise IndexError(f"{op}: dim {dim} out of range for a tensor of {ndim} dimensions")
    return int(dim) % builtins.max(ndim, 1)


def size_args(shape, op: str) -> tuple:
    """Sizes given as f(2, 3) or f((2, 3)), as a tuple of ints (a float size is a TypeError, as in PyTorch)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    try:
        return tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"{op}: sizes must be integers, got {shape!r}") from None


ValuesIndices = collections.namedtuple("ValuesIndices", ["values", "indices"])


def as_array(data, dtype=None) -> np.ndarray:
    """Python data or an array to an ndarray (a device array as it is), with PyTorch's inference of dtype."""
    if isinstance(data, np.ndarray) or devices.is_array(data):
        arr = data
    elif isinstance(data, (np.generic,)):
        arr = np.asarray(data)
    else:
        if isinstance(data, (list, tuple)) and builtins.any(is_tensor_like(x) for x in flatten_list(data)):
            data = tensors_to_lists(data)
        try:
            arr = np.asarray(data)
        except ValueError as e:  # ragged nested lists
            raise ValueError(f"tensor: cannot make a tensor from ragged nested sequences: {e}") from None
        check_int_range(arr, int64 if dtype is None else np.dtype(dtype))
        if arr.dtype.kind == "f" and dtype is None:
            arr = arr.astype(get_default_dtype())
        elif arr.dtype.kind in "iu" and dtype is None:
            arr = arr.astype(int64)
    if arr.dtype.kind in "OUSVcM":
        raise TypeError(f"cannot make a tensor from data of dtype {arr.dtype}: expected numbers or booleans")
    if arr.dtype not in SUPPORTED and dtype is None:
        raise TypeError(f"unsupported dtype {arr.dtype}; supported: {sorted(str(d) for d in SUPPORTED)}")
    return arr


def check_int_range(arr: np.ndarray, dtype: np.dtype) -> None:
    """Python integers that the integer dtype cannot hold raise OverflowError (NumPy would wrap them,
    or infer uint64 / object for ints past int64)."""
    if dtype.kind not in "iu" or (arr.dtype.kind not in "iuO") or arr.size == 0:
        return
    if arr.dtype.kind == "O":
        if not builtins.all(isinstance(v, numbers.Integral) for v in arr.reshape(-1)):
            return
        lo, hi = builtins.min(int(v) for v in arr.reshape(-1)), builtins.max(int(v) for v in arr.reshape(-1))
    else:
        lo, hi = int(arr.min()), int(arr.max())
    info = np.iinfo(dtype)
    if lo < info.min or hi > info.max:
        bad = lo if lo < info.min else hi
        raise OverflowError(f"tensor: value {bad} does not fit in {dtype} (range {info.min} to {info.max})")


def check_fill_value(value, dtype: np.dtype, op: str) -> None:
    """A Python number written into a tensor (fill_, masked_fill, t[i] = v) must fit its dtype, as in PyTorch:
    NumPy would turn a finite 1e9 into float16's inf, or wrap 1000 in an int8, silently. inf and NaN stay
    allowed in a floating tensor: they are values it holds. Deviation from PyTorch: torch's t[i] = 7e4 on a
    float16 tensor stores inf, and its uint8 fill_(-1) stores 255; here both are refused like masked_fill's and
    fill_'s overflow."""
    if not isinstance(value, numbers.Real) or isinstance(value, builtins.bool):
        return
    if dtype.kind == "f" and np.isfinite(value) and builtins.abs(float(value)) > float(np.finfo(dtype).max):
        raise RuntimeError(f"{op}: value {value!r} cannot be converted to {dtype} without overflow")
    if dtype.kind in "iu" and isinstance(value, numbers.Integral):
        info = np.iinfo(dtype)
        if not info.min <= int(value) <= info.max:
            raise RuntimeError(f"{op}: value {value!r} cannot be converted to {dtype} without overflow")


def flatten_list(x):
    for item in x:
        if isinstance(item, (list, tuple)):
            yield from flatten_list(item)
        else:
            yield item


def tensors_to_lists(x):
    if is_tensor_like(x):
        return x._data
    if isinstance(x, (list, tuple)):
        return [tensors_to_lists(i) for i in x]
    return x


def floating(t):
    """Integer inputs of elementwise float ops (exp, log, tanh, ...) are promoted to the default float dtype,
    as in PyTorch."""
    return t if t.dtype.kind == "f" else t.to(get_default_dtype())


def require_floating(t, op: str):
    """Reductions that average (mean, var) refuse integer inputs, as PyTorch does, rather than guess a dtype."""
    if t.dtype.kind != "f":
        raise TypeError(
            f"{op}(): expected a floating-point tensor, got dtype {t.dtype}; convert it first, e.g. .float()"
        )
    return t


def to_arguments(args: tuple, dtype, device, non_blocking, copy):
    """Tensor.to's positional arguments, in torch's three forms: (dtype, non_blocking, copy), (device, dtype,
    non_blocking, copy) and (other, non_blocking, copy); and minitensor's (dtype, device)."""
    args = list(args)
    if is_tensor_like(args[0]):  # x.to(other): its dtype and device
        other = args.pop(0)
        dtype, device = other.dtype, other.device
    elif isinstance(args[0], str) and args[0].partition(":")[0] in ("cpu", "cuda", "mps"):  # x.to(device, ...)
        device = args.pop(0)
        dtype = args.pop(0) if args and not isinstance(args[0], builtins.bool) else dtype
    elif not isinstance(args[0], builtins.bool):  # x.to(dtype, ...)
        dtype = args.pop(0)
        device = args.pop(0) if args and not isinstance(args[0], builtins.bool) else device
    if len(args) > 2:
        raise TypeError(f"to: too many positional arguments after the dtype or device: {tuple(args)}")
    return (dtype, device, *args, *(non_blocking, copy)[len(args) :])  # non_blocking, copy given positionally


def unsqueezed(shape: tuple, dim: int) -> tuple:
    n = len(shape) + 1
    if not -n <= dim < n:
        raise IndexError(f"unsqueeze: dim {dim} out of range for a result of {n} dimensions")
    dim %= n
    return shape[:dim] + (1,) + shape[dim:]


def squeezed(shape: tuple, dim) -> tuple:
    if dim is None:
        return tuple(s for s in shape if s != 1)
    dims = normalize_dims(dim, len(shape), "squeeze") or ()
    return tuple(s for i, s in enumerate(shape) if not (i in dims and s == 1))


def normalize_index(index, data=None):
    """Tensor indices to arrays, checking dtypes; returns (index, uses_advanced_indexing).

    Every index array, of any device, is an advanced index: its repeated entries accumulate in the backward
    (a device array taken for a basic index would overwrite them, a silently wrong gradient). `data` is the
    indexed array: a host index array meeting a device `data` is copied over (torch lets a CPU index tensor
    index a CUDA tensor), a device index into a host array is refused (torch's message), and a device integer
    index is checked against its axis at the cost of one host sync (check_device_bounds: CuPy wraps an
    out-of-range index where NumPy raises)."""
    items = index if isinstance(index, tuple) else (index,)
    out, advanced = [], False
    for it in items:
        if is_tensor_like(it):
            it = it._data
        elif isinstance(it, list):
            it = np.asarray(it)
            if it.dtype.kind == "f":
                raise IndexError("tensors used as indices must be integer or bool, got a list of floats")
        if isinstance(it, np.ndarray) or devices.is_array(it):
            if it.dtype.kind not in "iub":
                raise IndexError(f"tensors used as indices must be integer or bool, got {it.dtype}")
            advanced = True
            if data is not None and type(it) is not type(data):
                it = index_beside(it, data)
        elif isinstance(it, (float, np.floating)):
            raise IndexError(f"index {it!r} is a float; indices must be integers, slices, None, ... or tensors")
        out.append(it)
    if advanced and data is not None and not devices.is_host(data):
        check_device_bounds(out, data.shape)
    return (tuple(out) if isinstance(index, tuple) else out[0]), advanced


def index_beside(idx, data):
    """An index array on the device of the array it indexes: a host index is copied to the device; a device
    index into a host array is refused, as in torch."""
    where, target = devices.device_of(idx), devices.device_of(data)
    if where == target:
        return idx
    if where != devices.CPU:
        raise IndexError(
            f"indices should be either on cpu or on the same device as the indexed tensor ({target}), "
            f"got indices on {where}"
        )
    return devices.to_device(idx, target)


def check_device_bounds(items, shape: tuple) -> None:
    """NumPy's IndexError for a device integer index out of its axis's range (one host sync per index array;
    the first bad entry, read back only on the error path, is named as NumPy names it)."""
    consumed = builtins.sum(
        (it.ndim if it.dtype.kind == "b" else 1) if hasattr(it, "dtype") else 1
        for it in items
        if it is not None and it is not Ellipsis and not isinstance(it, builtins.bool)
    )
    axis = 0
    for it in items:
        if it is None or isinstance(it, builtins.bool):
            continue
        if it is Ellipsis:
            axis += len(shape) - consumed
            continue
        if hasattr(it, "dtype") and it.dtype.kind == "b":
            axis += it.ndim
            continue
        if hasattr(it, "dtype") and not devices.is_host(it) and axis < len(shape):
            n = shape[axis]
            bad = (it < -n) | (it >= n)
            if bad.any():  # the one host sync
                first = devices.to_host(it)[devices.to_host(bad)][0]
                raise IndexError(f"index {first} is out of bounds for axis {axis} with size {n}")
        axis += 1


def alpha_times(b, alpha, a, op: str):
    """alpha * b for add/sub's `alpha` (a Python number, as in PyTorch; a float alpha with integer operands refused)."""
    if alpha == 1 and not isinstance(alpha, float):
        return b
    if not isinstance(alpha, numbers.Number) or isinstance(alpha, complex):
        raise TypeError(f"{op}: alpha must be a number, got {type(alpha).__name__}")
    if isinstance(alpha, float) and result_type(a, b).kind != "f":
        raise TypeError(f"{op}: for integer operands, alpha must not be a float, got alpha={alpha!r}")
    return b * alpha


def var_correction(op: str, dim, unbiased, keepdim, correction):
    """(dim, correction) from torch's overloads of var/std: a bool where dim goes is `unbiased` (var(x, False));
    `unbiased` is a bool and `correction` a number (a float allowed), never both given."""
    if isinstance(dim, (builtins.bool, np.bool_)):
        if unbiased is not None or keepdim:
            raise TypeError(
                f"{op}(): {op}(input, unbiased) takes no dim or keepdim; use {op}(input, dim, unbiased, keepdim)"
            )
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError(
            f"{op}(): give unbiased or correction, not both (got unbiased={unbiased!r}, correction={correction!r})"
        )
    if unbiased is not None:
        if not isinstance(unbiased, (builtins.bool, np.bool_)):
            raise TypeError(f"{op}(): unbiased must be a bool, got {type(unbiased).__name__} {unbiased!r}")
        return dim, int(unbiased)
    if correction is None:
        return dim, 1
    if not isinstance(correction, numbers.Real):
        raise TypeError(f"{op}(): correction must be a number, got {type(correction).__name__} {correction!r}")
    return dim, correction


def float_input(t, dtype, op: str):
    if dtype is not None:
        t = t.to(dtype)
    if t.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating tensor, got {t.dtype}")
    return t


def check_tensor(x, op: str, name: str):
    if not is_tensor_like(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def index_array(index, op: str) -> np.ndarray:
    idx = index._data if is_tensor_like(index) else None
    if idx is None or idx.dtype.kind not in "iu":
        what = type(index).__name__ if idx is None else f"a tensor of dtype {idx.dtype}"
        raise TypeError(f"{op}: index must be an integer tensor, got {what}")
    return idx
