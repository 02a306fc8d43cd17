"""The two namespaces a backward formula is written against: `ctx.xp`.

Every backward of ops/ is written once, with operators (`g * out`, `g @ w`, `a.reshape(...)`) that
np.ndarray and Tensor both support, and with `xp.<name>(...)` for the rest. The graph walk hands a
backward one of two namespaces with the same function names:

    ARRAYS   NumPy on raw arrays. First-order backward (no graph), the training fast path; also what
             a forward sees, so helpers shared by a forward and its backward take `xp` too. On a device
             array NumPy's functions dispatch to the array's own library (CuPy, the fake device); what
             makes a new array takes the module from an array at hand (devices.array_module).
    TENSORS  the same functions as recorded primitives (Function.apply) on Tensors. With
             create_graph=True the walk passes the saved inputs and outputs as Tensors and this
             namespace, so the backward itself becomes a graph that can be differentiated again.

A function that makes a non-differentiable value (a sign, a mask) returns a constant Tensor, and `constant`
makes an array the forward saved (a count, a mask) one beside g.
"""

from __future__ import annotations

import numpy as np

from .. import fast
from ..core import is_tensor_like as _is_tensor
from ..devices import array_module
from .elementwise import (
    Cast,
    Cos,
    Erf,
    Exp,
    Log,
    LogSigmoid,
    Relu,
    Sigmoid,
    Sin,
    Sqrt,
    Tanh,
    erf,
    log_sigmoid,
    stable_sigmoid,
)
from .fused import LogSoftmax, log_softmax
from .indexing import GetItem, IndexPut, index_put
from .reductions import Mean, Sum
from .rowwise import mean_, sum_
from .scan import CumProd, CumSum, cumprod, cumsum
from .selection import Where
from .shape import Cat, Expand, Permute, Reshape, Stack, Transpose, Tril, Triu


def _axes(axis, ndim: int):
    """NumPy's axis (None, int or tuple, negatives allowed) as the primitives take it: None or a tuple >= 0
    (None for a 0-d array, whose axis 0 is the whole array)."""
    if axis is None or ndim == 0:
        return None
    return tuple(int(d) % max(ndim, 1) for d in ((axis,) if np.isscalar(axis) else axis))


def _constant(like, value):
    """`value` (a number or float array) as a Tensor outside the graph, in the dtype and on the device of the
    Tensor `like`."""
    return like.wrap(array_module(like._data).asarray(value, dtype=like.dtype))


# The one-input functions a backward calls as `xp.<name>(a)`: on arrays a NumPy function, on Tensors the
# primitive that computes it. One line here gives both namespaces the entry (install_elementwise, below).
ELEMENTWISE = {
    "exp": (np.exp, Exp),
    "log": (np.log, Log),
    "sqrt": (np.sqrt, Sqrt),
    "tanh": (np.tanh, Tanh),
    "relu": (lambda a: np.maximum(a.dtype.type(0), a), Relu),  # Relu's forward: relu(-0.0) = -0.0, as torch
    "sigmoid": (stable_sigmoid, Sigmoid),
    "log_sigmoid": (log_sigmoid, LogSigmoid),
    "erf": (erf, Erf),
    "sin": (np.sin, Sin),
    "cos": (np.cos, Cos),
}


def sign(a):
    """-1, 0 or 1 by the sign of a, and 0 at NaN (PyTorch's sign; NumPy's gives NaN there)."""
    s = np.sign(a)
    return np.where(np.isnan(s), 0, s).astype(s.dtype, copy=False) if s.dtype.kind == "f" else s


def zero_where(drop, g):
    """np.where(drop, 0, g): g with zeros where `drop`, selected (an inf or NaN in g becomes 0 there, not NaN).
    The formula; fast/selection.py has its device (a product by the mask)."""
    return np.where(drop, 0, g).astype(g.dtype, copy=False)


fast.formula("zero_where", zero_where)


def unstack(a, axis=0):
    """np.unstack (NumPy 2.1) written out: the slices of `a` along axis, as views. CuPy has no unstack."""
    lead = (slice(None),) * (axis % a.ndim)
    return tuple(a[lead + (i,)] for i in range(a.shape[axis]))


class ArrayOps:
    """NumPy, under the names the backward formulas use (and the ELEMENTWISE functions, installed below)."""

    sign = staticmethod(sign)
    zeros_like = staticmethod(np.zeros_like)
    where, swapaxes, transpose = staticmethod(np.where), staticmethod(np.swapaxes), staticmethod(np.transpose)
    moveaxis, broadcast_to = staticmethod(np.moveaxis), staticmethod(np.broadcast_to)
    tril, triu, sum, mean = staticmethod(np.tril), staticmethod(np.triu), staticmethod(sum_), staticmethod(mean_)
    split, unstack = staticmethod(np.split), staticmethod(unstack)
    stack, concatenate = staticmethod(np.stack), staticmethod(np.concatenate)
    log_softmax, index_put = staticmethod(log_softmax), staticmethod(index_put)
    cumsum, cumprod = staticmethod(cumsum), staticmethod(cumprod)

    @staticmethod
    def zero_where(drop, g):
        return fast.use.zero_where(drop, g)

    @staticmethod
    def astype(a, dtype):
        return a.astype(dtype)

    @staticmethod
    def eye_like(n, like):
        """The n x n identity in the dtype and on the device of the array `like`."""
        return array_module(like).eye(n, dtype=like.dtype)

    @staticmethod
    def constant(arr, like):
        """An array the forward made (a count, a mask) beside g: on arrays the array itself."""
        return arr


class TensorOps:
    """The same functions as recorded primitives on Tensors (the backward of a backward; ELEMENTWISE too)."""

    @staticmethod
    def sign(a):
        return a.wrap(sign(a._data))  # piecewise constant: its derivative is 0

    @staticmethod
    def zero_where(drop, g):
        return TensorOps.where(drop, 0, g)

    @staticmethod
    def zeros_like(a):
        return a.wrap(np.zeros_like(a._data))  # np.zeros_like keeps the array's module (its device)

    @staticmethod
    def eye_like(n, like):
        return _constant(like, ArrayOps.eye_like(n, like._data))

    @staticmethod
    def constant(arr, like):
        """The array as a Tensor outside the graph, beside the Tensor `like` (on its device, as the array is)."""
        return like.wrap(arr)

    @staticmethod
    def where(cond, a, b):
        like = a if _is_tensor(a) else b
        cond = cond._data if _is_tensor(cond) else cond
        a, b = (x if _is_tensor(x) else _constant(like, x) for x in (a, b))
        return Where.apply(a, b, cond=cond)

    @staticmethod
    def swapaxes(a, d0, d1):
        return Transpose.apply(a, dim0=d0 % a.ndim, dim1=d1 % a.ndim)

    @staticmethod
    def transpose(a, axes):
        return Permute.apply(a, dims=tuple(axes))

    @staticmethod
    def moveaxis(a, source, destination):
        order = [d for d in range(a.ndim) if d != source % a.ndim]
        order.insert(destination % a.ndim, source % a.ndim)
        return Permute.apply(a, dims=tuple(order))

    @staticmethod
    def broadcast_to(a, shape):
        shape = tuple(shape)
        if a.shape == shape:
            return a
        lead = len(shape) - a.ndim
        if lead:
            a = Reshape.apply(a, shape=(1,) * lead + a.shape)
        return Expand.apply(a, shape=shape)

    @staticmethod
    def sum(a, axis=None, keepdims=False):
        return Sum.apply(a, dim=_axes(axis, a.ndim), keepdim=keepdims)

    @staticmethod
    def mean(a, axis=None, keepdims=False):
        return Mean.apply(a, dim=_axes(axis, a.ndim), keepdim=keepdims)

    @staticmethod
    def tril(a, k=0):
        return Tril.apply(a, diagonal=k)

    @staticmethod
    def triu(a, k=0):
        return Triu.apply(a, diagonal=k)

    @staticmethod
    def astype(a, dtype):
        return a if a.dtype == dtype else Cast.apply(a, dtype=dtype)

    @staticmethod
    def split(a, bounds, axis):
        """np.split at `bounds` along axis, as basic-slice views of a."""
        edges = [0, *bounds, a.shape[axis]]
        lead = (slice(None),) * (axis % a.ndim)
        return [GetItem.apply(a, index=lead + (slice(s, e),), advanced=False) for s, e in zip(edges, edges[1:])]

    @staticmethod
    def unstack(a, axis=0):
        lead = (slice(None),) * (axis % a.ndim)
        return tuple(GetItem.apply(a, index=lead + (i,), advanced=False) for i in range(a.shape[axis]))

    @staticmethod
    def stack(arrays, axis=0):
        return Stack.apply(*arrays, dim=axis % (arrays[0].ndim + 1))

    @staticmethod
    def concatenate(arrays, axis=0):
        return Cat.apply(*arrays, dim=axis % arrays[0].ndim)

    @staticmethod
    def log_softmax(a, axis):
        return LogSoftmax.apply(a, dim=axis % a.ndim)

    @staticmethod
    def index_put(shape, index, values, advanced):
        return IndexPut.apply(values, shape=tuple(shape), index=index, advanced=advanced)

    @staticmethod
    def cumsum(a, axis, reverse=False):
        return CumSum.apply(a, dim=axis % a.ndim, reverse=reverse)

    @staticmethod
    def cumprod(a, axis):
        return CumProd.apply(a, dim=axis % a.ndim)


def install_elementwise(arrays: type, tensors: type) -> None:
    """Each ELEMENTWISE entry as a function of both namespaces: xp.exp is np.exp on arrays, Exp.apply on Tensors."""
    for name, (on_arrays, primitive) in ELEMENTWISE.items():
        setattr(arrays, name, staticmethod(on_arrays))
        setattr(tensors, name, staticmethod(primitive.apply))


install_elementwise(ArrayOps, TensorOps)
ARRAYS = ArrayOps()
TENSORS = TensorOps()
