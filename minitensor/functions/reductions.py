"""The torch.* reductions: sum, mean, var, std, max/min (values and indices), amax/amin, argmax/argmin,
logsumexp, all/any, norm, the row-wise softmax and log_softmax, and the scans cumsum and cumprod."""

from __future__ import annotations

import builtins
import math
import numbers

import numpy as np

from .. import ops
from ..arguments import (
    ValuesIndices,
    check_tensor,
    float_input,
    normalize_dim,
    normalize_dims,
    require_floating,
    var_correction,
)
from ..autograd import is_tensor_like
from ..devices import array_module
from ..dtypes import int64
from ..ops.reductions import refuse_empty_reduction, result_array
from .elementwise import maximum, minimum

__all__ = [
    "all",
    "amax",
    "amin",
    "any",
    "argmax",
    "argmin",
    "cumprod",
    "cumsum",
    "log_softmax",
    "logsumexp",
    "max",
    "mean",
    "min",
    "norm",
    "softmax",
    "std",
    "sum",
    "var",
]


def max_min(t, dim, keepdim: bool, mode: str):
    if is_tensor_like(dim):  # torch.max(a, b)
        return maximum(t, dim) if mode == "max" else minimum(t, dim)
    d = None if dim is None else normalize_dim(dim, t.ndim, mode)
    refuse_empty_reduction(t.shape, d, mode)
    if dim is None:
        return ops.MaxMin.apply(t, dim=None, keepdim=False, mode=mode)
    if t.ndim == 0:  # the one element is its own max, at index 0 (keepdim keeps no dim either)
        zero = array_module(t._data).zeros((), dtype=int64)
        return ValuesIndices(ops.MaxMin.apply(t, dim=None, keepdim=False, mode=mode), t.wrap(zero))
    values = ops.MaxMin.apply(t, dim=d, keepdim=keepdim, mode=mode)
    idx = (np.argmax if mode == "max" else np.argmin)(t._data, axis=d)
    if keepdim:
        idx = np.expand_dims(idx, d)
    return ValuesIndices(values, t.wrap(idx.astype(int64)))


def arg_reduce(fn, t, dim, keepdim: bool):
    d = None if dim is None else normalize_dim(dim, t.ndim, fn.__name__)
    refuse_empty_reduction(t.shape, d, fn.__name__)
    if dim is None:
        return t.wrap(result_array(fn(t._data)).astype(int64, copy=False))
    if t.ndim == 0:
        return t.wrap(array_module(t._data).zeros((), dtype=int64))
    out = fn(t._data, axis=d)
    return t.wrap(result_array(np.expand_dims(out, d) if keepdim else out).astype(int64, copy=False))


def reduce(op: str, fn, t, dim, keepdim: bool, **kwargs):
    """The reduction primitive `fn` over the normalised dim (None = all dims)."""
    return fn.apply(t, dim=normalize_dims(dim, t.ndim, op), keepdim=keepdim, **kwargs)


def all_any(fn, t, dim, keepdim: bool):
    return t.wrap(result_array(fn(t._data, axis=normalize_dims(dim, t.ndim, fn.__name__), keepdims=keepdim)))


def sum(t, dim=None, keepdim=False):
    return t.sum(dim, keepdim)


def mean(t, dim=None, keepdim=False):
    return t.mean(dim, keepdim)


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """sum((x - mean)^2) / max(0, n - correction) over dim; torch's three forms: var(x, dim, unbiased, keepdim),
    var(x, dim=None, *, correction=1, keepdim=False) and var(x, unbiased) (unbiased: correction 1, else 0)."""
    dim, correction = var_correction("var", dim, unbiased, keepdim, correction)
    return reduce("var", ops.Var, require_floating(input, "var"), dim, keepdim, correction=correction)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """sqrt(var(input, ...)): the same three forms as var."""
    dim, correction = var_correction("std", dim, unbiased, keepdim, correction)
    return reduce("std", ops.Std, require_floating(input, "std"), dim, keepdim, correction=correction)


def max(t, dim=None, keepdim=False):
    return t.max(dim, keepdim)


def min(t, dim=None, keepdim=False):
    return t.min(dim, keepdim)


def logsumexp(t, dim, keepdim=False):
    return t.logsumexp(dim, keepdim)


def argmax(t, dim=None, keepdim=False):
    return t.argmax(dim, keepdim)


def argmin(t, dim=None, keepdim=False):
    return t.argmin(dim, keepdim)


def amax(t, dim=(), keepdim: bool = False):
    """Largest value over dim (all dims when dim is () or None); the gradient is shared evenly between ties."""
    return reduce("amax", ops.AMaxMin, t, dim, keepdim, mode="max")


def amin(t, dim=(), keepdim: bool = False):
    """Smallest value over dim (all dims when dim is () or None); the gradient is shared evenly between ties."""
    return reduce("amin", ops.AMaxMin, t, dim, keepdim, mode="min")


def _softmax_dim(t, dim, op: str):
    """normalize_dim, but None for a 0-d tensor: its one element is the whole row. (NumPy takes axis 0 of a 0-d
    array, CuPy refuses it: found by the op table on an H200.)"""
    d = normalize_dim(dim, t.ndim, op)
    return d if t.ndim else None


def softmax(t, dim: int, dtype=None):
    """e^x / sum e^x along dim (one fused node); `dtype` converts the input first, as in PyTorch."""
    t = float_input(t, dtype, "softmax")
    return ops.Softmax.apply(t, dim=_softmax_dim(t, dim, "softmax"))


def log_softmax(t, dim: int, dtype=None):
    """x - log sum e^x along dim (one fused node)."""
    t = float_input(t, dtype, "log_softmax")
    return ops.LogSoftmax.apply(t, dim=_softmax_dim(t, dim, "log_softmax"))


def all(t, dim=None, keepdim=False):
    return t.all(dim, keepdim)


def any(t, dim=None, keepdim=False):
    return t.any(dim, keepdim)


def norm(input, p="fro", dim=None, keepdim: builtins.bool = False, dtype=None):
    """The vector p-norm over dim (all elements when None): p = 2 or 'fro' (sqrt of the sum of squares,
    gradient 0 at the origin as in PyTorch), 1 (sum of |x|), inf (max |x|), -inf (min |x|), 0 (the count of
    nonzeros) or any other number ((sum |x|^p)^(1/p)); p = 'nuc' the nuclear norm (the sum of singular values)
    of the matrices over the dim pair (a 2-D input when dim is None)."""
    t = float_input(check_tensor(input, "norm", "input"), dtype, "norm")
    if isinstance(p, str) and p == "nuc":
        dims = normalize_dims(tuple(range(t.ndim)) if dim is None else dim, t.ndim, "norm")
        if dims is None or len(dims) != 2:
            raise ValueError(f"norm: p='nuc' takes the matrices over a pair of dims, got dim {dim} of {t.shape}")
        rest = [d for d in range(t.ndim) if d not in dims]
        out = ops.SVDVals.apply(t.permute(*rest, *dims)).sum(-1)  # the matrices over (d0, d1), as torch's
        return out.reshape([1 if d in dims else t.shape[d] for d in range(t.ndim)]) if keepdim else out
    dims = normalize_dims(dim, t.ndim, "norm")
    if isinstance(p, str) and p == "fro" or p == 2:
        return ops.Norm.apply(t, dim=dims, keepdim=keepdim)
    if p == 1:
        return t.abs().sum(dims, keepdim)
    if p in (math.inf, -math.inf):
        return ops.NormInf.apply(t, dim=dims, keepdim=keepdim, mode="max" if p > 0 else "min")
    if isinstance(p, numbers.Real) and not isinstance(p, builtins.bool) and math.isfinite(p):
        return ops.PNorm.apply(t, p=float(p), dim=dims, keepdim=keepdim)
    raise ValueError(f"norm: p must be a number, 'fro' or 'nuc', got {p!r}")


def _scan(fn, op: str, input, dim: int, dtype):
    """cumsum or cumprod along dim, of input cast to dtype first when one is given (torch's rule)."""
    t = check_tensor(input, op, "input")
    d = normalize_dim(dim, t.ndim, op)
    if dtype is not None:
        t = t.to(dtype)
    if t.ndim == 0:
        return fn.apply(t.reshape(1), dim=0).reshape(())
    return fn.apply(t, dim=d)


def cumsum(input, dim: int, *, dtype=None):
    """out[i] = input[0] + ... + input[i] along dim; an integer or bool input gives int64, as torch's."""
    return _scan(ops.CumSum, "cumsum", input, dim, dtype)


def cumprod(input, dim: int, *, dtype=None):
    """out[i] = input[0] * ... * input[i] along dim; differentiable with zeros in the line, as torch's."""
    return _scan(ops.CumProd, "cumprod", input, dim, dtype)
