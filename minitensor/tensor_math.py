"""The Tensor's math methods, one line each: operators, elementwise maps, reductions, shape, indexing.

Each calls a primitive of ops/ or a torch.* function of functions/, which validates first. A mixin the
Tensor (tensor.py) inherits, as tinygrad's tensor takes its math from mixins: written against the
Tensor's state (`_data`, `wrap`, `dtype`, `shape`), so this file sits below tensor.py.
"""

from __future__ import annotations

import numpy as np

from . import ops
from .arguments import binary, floating, normalize_index, require_floating, size_args, squeezed, unsqueezed
from .functions.elementwise import (
    add,
    clamp,
    compare,
    div,
    floor_divide,
    invert,
    logical,
    masked_fill,
    maximum,
    minimum,
    pow,
    remainder,
    sub,
    true_div,
)
from .functions.indexing import argsort, gather, index_fill, index_select, nonzero, scatter, scatter_add, sort, topk
from .functions.linalg import bmm, matmul, mm
from .functions.reductions import (
    all_any,
    amax,
    amin,
    arg_reduce,
    cumprod,
    cumsum,
    log_softmax,
    max_min,
    norm,
    reduce,
    softmax,
    std,
    var,
)
from .functions.sampling import bernoulli, multinomial
from .functions.shape import (
    chunk,
    expand,
    flatten,
    flip,
    narrow,
    permute,
    repeat,
    repeat_interleave,
    reshape_to,
    roll,
    split,
    transpose,
    tril,
    triu,
    unflatten,
)


class TensorMath:
    """The math methods of Tensor."""

    __slots__ = ()

    # ------------------------------------------------------------------ arithmetic
    def __add__(self, other):
        return binary(ops.Add, self, other)

    def __radd__(self, other):
        return binary(ops.Add, other, self)

    def __sub__(self, other):
        return binary(ops.Sub, self, other)

    def __rsub__(self, other):
        return binary(ops.Sub, other, self)

    def __mul__(self, other):
        return binary(ops.Mul, self, other)

    def __rmul__(self, other):
        return binary(ops.Mul, other, self)

    def __truediv__(self, other):
        return true_div(self, other)

    def __rtruediv__(self, other):
        return true_div(other, self)

    def __floordiv__(self, other):
        return floor_divide(self, other)

    def __rfloordiv__(self, other):
        return floor_divide(other, self)

    def __mod__(self, other):
        return remainder(self, other)

    def __rmod__(self, other):
        return remainder(other, self)

    def floor_divide(self, other):
        return floor_divide(self, other)

    def remainder(self, other):
        return remainder(self, other)

    def __pow__(self, other):
        return pow(self, other)

    def __rpow__(self, other):
        return pow(other, self)

    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(other, self)

    def __neg__(self):
        return ops.Neg.apply(self)

    def __pos__(self):
        return self

    def add(self, other, *, alpha=1):
        return add(self, other, alpha=alpha)

    def sub(self, other, *, alpha=1):
        return sub(self, other, alpha=alpha)

    def mul(self, other):
        return self * other

    def div(self, other, *, rounding_mode=None):
        return div(self, other, rounding_mode=rounding_mode)

    def pow(self, exponent):
        return pow(self, exponent)

    def matmul(self, other):
        return matmul(self, other)

    def neg(self):
        return ops.Neg.apply(self)

    # ------------------------------------------------------------------ comparisons and logic (no grad)
    def __eq__(self, other):
        return compare(np.equal, self, other)

    def __ne__(self, other):
        return compare(np.not_equal, self, other)

    def __lt__(self, other):
        return compare(np.less, self, other)

    def __le__(self, other):
        return compare(np.less_equal, self, other)

    def __gt__(self, other):
        return compare(np.greater, self, other)

    def __ge__(self, other):
        return compare(np.greater_equal, self, other)

    def eq(self, other):
        return self == other

    def ne(self, other):
        return self != other

    def lt(self, other):
        return self < other

    def le(self, other):
        return self <= other

    def gt(self, other):
        return self > other

    def ge(self, other):
        return self >= other

    def __and__(self, other):
        return logical(np.logical_and, "&", self, other)

    def __rand__(self, other):
        return logical(np.logical_and, "&", other, self)

    def __or__(self, other):
        return logical(np.logical_or, "|", self, other)

    def __ror__(self, other):
        return logical(np.logical_or, "|", other, self)

    def __xor__(self, other):
        return logical(np.logical_xor, "^", self, other)

    def __invert__(self):
        return invert(self)

    def logical_not(self):
        return self.wrap(np.logical_not(self._data))

    def all(self, dim=None, keepdim=False):
        return all_any(np.all, self, dim, keepdim)

    def any(self, dim=None, keepdim=False):
        return all_any(np.any, self, dim, keepdim)

    def isnan(self):
        return self.wrap(np.isnan(self._data))

    def isfinite(self):
        return self.wrap(np.isfinite(self._data))

    # ------------------------------------------------------------------ elementwise
    def exp(self):
        return ops.Exp.apply(floating(self))

    def log(self):
        return ops.Log.apply(floating(self))

    def sqrt(self):
        return ops.Sqrt.apply(floating(self))

    def rsqrt(self):
        return 1.0 / self.sqrt()

    def abs(self):
        return ops.Abs.apply(self)

    def sin(self):
        return ops.Sin.apply(floating(self))

    def cos(self):
        return ops.Cos.apply(floating(self))

    def tanh(self):
        return ops.Tanh.apply(floating(self))

    def erf(self):
        return ops.Erf.apply(floating(self))

    def sigmoid(self):
        return ops.Sigmoid.apply(floating(self))

    def relu(self):
        return ops.Relu.apply(self)

    def square(self):
        return ops.PowScalar.apply(self, exponent=2)

    def clamp(self, min=None, max=None):
        return clamp(self, min, max)

    def clip(self, min=None, max=None):
        return clamp(self, min, max)

    def maximum(self, other):
        return maximum(self, other)

    def minimum(self, other):
        return minimum(self, other)

    def masked_fill(self, mask, value):
        return masked_fill(self, mask, value)

    def softmax(self, dim, dtype=None):
        return softmax(self, dim, dtype)

    def log_softmax(self, dim, dtype=None):
        return log_softmax(self, dim, dtype)

    # ------------------------------------------------------------------ reductions
    def sum(self, dim=None, keepdim=False):
        return reduce("sum", ops.Sum, self, dim, keepdim)

    def mean(self, dim=None, keepdim=False):
        return reduce("mean", ops.Mean, require_floating(self, "mean"), dim, keepdim)

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return var(self, dim, unbiased, keepdim, correction=correction)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return std(self, dim, unbiased, keepdim, correction=correction)

    def max(self, dim=None, keepdim=False):
        return max_min(self, dim, keepdim, "max")

    def min(self, dim=None, keepdim=False):
        return max_min(self, dim, keepdim, "min")

    def amax(self, dim=(), keepdim=False):
        return amax(self, dim, keepdim)

    def amin(self, dim=(), keepdim=False):
        return amin(self, dim, keepdim)

    def logsumexp(self, dim, keepdim=False):
        return reduce("logsumexp", ops.LogSumExp, floating(self), dim, keepdim)

    def argmax(self, dim=None, keepdim=False):
        return arg_reduce(np.argmax, self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return arg_reduce(np.argmin, self, dim, keepdim)

    # ------------------------------------------------------------------ shape
    def reshape(self, *shape):
        return reshape_to(self, size_args(shape, "reshape"))

    def view(self, *shape):
        return reshape_to(self, size_args(shape, "view"))

    def view_as(self, other):
        return reshape_to(self, other.shape)

    def reshape_as(self, other):
        return reshape_to(self, other.shape)

    def flatten(self, start_dim=0, end_dim=-1):
        return flatten(self, start_dim, end_dim)

    def unflatten(self, dim, sizes):
        return unflatten(self, dim, sizes)

    def transpose(self, dim0, dim1):
        return transpose(self, dim0, dim1)

    def t(self):
        return self.T

    def permute(self, *dims):
        return permute(self, size_args(dims, "permute"))

    def unsqueeze(self, dim):
        return reshape_to(self, unsqueezed(self.shape, dim))

    def squeeze(self, dim=None):
        return reshape_to(self, squeezed(self.shape, dim))

    def expand(self, *sizes):
        return expand(self, size_args(sizes, "expand"))

    def expand_as(self, other):
        return expand(self, other.shape)

    def repeat(self, *sizes):
        return repeat(self, size_args(sizes, "repeat"))

    def split(self, split_size_or_sections, dim=0):
        return split(self, split_size_or_sections, dim)

    def chunk(self, chunks, dim=0):
        return chunk(self, chunks, dim)

    def tril(self, diagonal=0):
        return tril(self, diagonal)

    def triu(self, diagonal=0):
        return triu(self, diagonal)

    def __getitem__(self, index):
        try:  # normalize_index too: a device index out of range is NumPy's IndexError, named as on the CPU
            index, advanced = normalize_index(index, self._data)
            return ops.GetItem.apply(self, index=index, advanced=advanced)
        except IndexError as e:
            raise IndexError(f"__getitem__ on a tensor of shape {self.shape}: {e}") from None

    def mm(self, mat2):
        return mm(self, mat2)

    def bmm(self, mat2):
        return bmm(self, mat2)

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        return norm(self, p, dim, keepdim, dtype)

    def gather(self, dim, index):
        return gather(self, dim, index)

    def index_select(self, dim, index):
        return index_select(self, dim, index)

    def sort(self, dim=-1, descending=False, stable=False):
        return sort(self, dim, descending, stable)

    def argsort(self, dim=-1, descending=False, stable=False):
        return argsort(self, dim, descending, stable)

    def topk(self, k, dim=-1, largest=True, sorted=True):
        return topk(self, k, dim, largest, sorted)

    def multinomial(self, num_samples, replacement=False, *, generator=None):
        return multinomial(self, num_samples, replacement, generator=generator)

    def bernoulli(self, p=None, *, generator=None):
        return bernoulli(self, p, generator=generator)

    def roll(self, shifts, dims=None):
        return roll(self, shifts, dims)

    def narrow(self, dim, start, length):
        return narrow(self, dim, start, length)

    def flip(self, *args, dims=None):
        if dims is None and not args:
            raise TypeError("flip: missing the dims to reverse, e.g. x.flip(0) or x.flip((0, 1))")
        if dims is None:  # x.flip(0, 1) or x.flip((0, 1)), as torch's
            dims = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
        return flip(self, dims)

    def repeat_interleave(self, repeats, dim=None, *, output_size=None):
        return repeat_interleave(self, repeats, dim, output_size=output_size)

    def cumsum(self, dim, *, dtype=None):
        return cumsum(self, dim, dtype=dtype)

    def cumprod(self, dim, *, dtype=None):
        return cumprod(self, dim, dtype=dtype)

    def nonzero(self, *, as_tuple=False):
        return nonzero(self, as_tuple=as_tuple)

    def scatter(self, dim, index, src=None, *, value=None, reduce=None):
        return scatter(self, dim, index, src, value=value, reduce=reduce)

    def scatter_add(self, dim, index, src):
        return scatter_add(self, dim, index, src)

    def index_fill(self, dim, index, value):
        return index_fill(self, dim, index, value)
