"""The Tensor: a NumPy array plus the bookkeeping reverse-mode autograd needs, and the torch.* functions.

Each method is one line that calls a primitive of the ops/ package (or a composite of them), or a
torch-named function below that validates its arguments first. Deviation from PyTorch, flagged:
`.data` is the raw `np.ndarray` (in PyTorch it is a Tensor), so optimizers and initialisers write
NumPy directly; such writers call `bump_version()`, and `.data` itself stays the unchecked escape hatch.

In-place methods (fill_, add_, __setitem__, ...) refuse a tensor that requires grad outside no_grad
and bump the tensor's version counter (shared with its views): a graph that saved the old values
then raises at backward instead of returning a wrong gradient (autograd/function.py).

Dtypes and promotion live in dtypes.py, the factories (tensor, zeros, randn, ...) in creation.py.
Mixed-dtype operands are promoted as PyTorch does (dtypes.result_type); a float operand that must
widen goes through a differentiable Cast, so a float32 input still gets a float32 gradient.
"""

from __future__ import annotations

import builtins
import collections
import math
import numbers
import operator
import weakref
from collections.abc import Sequence

import numpy as np

from . import autograd, ops
from .autograd import VersionCounter, ieee_quiet, is_grad_enabled, no_grad
from .dtypes import SUPPORTED, bool_, float32, float64, get_default_dtype, int32, int64, result_type
from .random import generator


def _operand(x, dtype: np.dtype) -> Tensor:
    if isinstance(x, Tensor):
        return x if x.data.dtype == dtype else x.to(dtype)
    return Tensor.wrap(np.asarray(x, dtype=dtype))


def _binary(fn, a, b, dtype=None, **kwargs) -> Tensor:
    """fn.apply on a and b (tensors or Python numbers) promoted as PyTorch does, or to `dtype`;
    operands that do not broadcast give an error naming the op and both shapes."""
    x, y = _operands(a, b, dtype)
    try:
        return fn.apply(x, y, **kwargs)
    except ValueError:
        if _shapes_broadcast(x.shape, y.shape):  # some other error: NumPy's message says it
            raise
        raise ValueError(f"{fn.__name__.lower()}: shapes {x.shape} and {y.shape} do not broadcast") from None


def _operands(a, b, dtype=None) -> tuple:
    if dtype is None:
        # fast paths: same-dtype tensors, and a float tensor with a Python number (which never promotes it)
        if isinstance(a, Tensor):
            if isinstance(b, Tensor):
                if a.data.dtype == b.data.dtype:
                    return a, b
            elif type(b) in (float, int) and a.data.dtype.kind == "f":
                return a, Tensor.wrap(np.asarray(b, a.data.dtype))
        elif isinstance(b, Tensor) and type(a) in (float, int) and b.data.dtype.kind == "f":
            return Tensor.wrap(np.asarray(a, b.data.dtype)), b
        dtype = result_type(a, b)
    return _operand(a, dtype), _operand(b, dtype)


def _shapes_broadcast(a: tuple, b: tuple) -> builtins.bool:
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


def _broadcasts_to(shape: tuple, target: tuple) -> builtins.bool:
    """Whether an operand of `shape` broadcasts to exactly `target` (as an in-place operand must)."""
    return _shapes_broadcast(shape, target) and np.broadcast_shapes(shape, target) == tuple(target)


def _scaled(other, alpha):
    return other if alpha == 1 else other * alpha


def _dims(dim, ndim: int, op: str):
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


def _one_dim(dim, ndim: int, op: str) -> int:
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


_ValuesIndices = collections.namedtuple("ValuesIndices", ["values", "indices"])


class Tensor:
    """A NumPy array that can record the operations applied to it and backpropagate through them."""

    __slots__ = ("data", "requires_grad", "_grad", "grad_fn", "version_counter", "_hooks", "__weakref__")
    __array_priority__ = 1000  # so ndarray + Tensor calls Tensor.__radd__

    def __init__(self, data, requires_grad: bool = False, dtype=None):
        arr = data.data if isinstance(data, Tensor) else as_array(data, dtype)
        if dtype is not None and arr.dtype != np.dtype(dtype):
            arr = arr.astype(dtype)
        self.data = arr
        self._grad = None
        self.grad_fn = None  # the autograd Node that produced this tensor; None for a leaf
        self.version_counter = VersionCounter()  # bumped by every in-place change (shared with views)
        self._hooks = None  # a leaf's gradient hooks (a non-leaf's live on its grad_fn)
        self.requires_grad = False
        if requires_grad:
            self.requires_grad_(True)

    @staticmethod
    def wrap(arr: np.ndarray) -> Tensor:
        """A new Tensor around `arr`, no checks, no copy: how ops build their results."""
        t = object.__new__(Tensor)
        t.data = arr
        t.requires_grad = False
        t._grad = None
        t.grad_fn = None
        t.version_counter = VersionCounter()
        t._hooks = None
        return t

    @property
    def grad(self):
        """The gradient accumulated by backward(); assigning one of another shape or dtype is an error."""
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad must be a Tensor or None, got {type(value).__name__}")
            if value.shape != self.shape:
                raise RuntimeError(f"assigned grad has shape {value.shape}, but the tensor has shape {self.shape}")
            if value.dtype != self.dtype:
                raise RuntimeError(f"assigned grad has dtype {value.dtype}, but the tensor has dtype {self.dtype}")
        self._grad = value

    @property
    def _version(self) -> int:
        """The number of in-place changes so far (torch's Tensor._version)."""
        return self.version_counter.value

    def bump_version(self) -> None:
        """Record an in-place change made through .data (optimizers, nn.init, clip_grad_norm_), so that a
        graph which saved this tensor refuses to backpropagate with the changed values."""
        self.version_counter.value += 1

    # ------------------------------------------------------------------ attributes
    @property
    def shape(self) -> tuple:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def T(self) -> Tensor:
        if self.ndim > 2:
            raise ValueError(f"T: expected a tensor of at most 2 dimensions, got shape {self.shape}; use permute")
        return self if self.ndim < 2 else self.transpose(0, 1)

    @property
    def mT(self) -> Tensor:
        return self.transpose(-2, -1)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[_one_dim(dim, self.ndim, "size")]

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return self.data.size

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def numpy(self) -> np.ndarray:
        return self.data

    def tolist(self):
        return self.data.tolist()

    def item(self):
        if self.data.size != 1:
            raise ValueError(
                f"item(): only a tensor with one element can be converted to a Python number, "
                f"got shape {self.shape} ({self.data.size} elements)"
            )
        return self.data.reshape(()).item()

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self) -> str:
        body = np.array2string(self.data, separator=", ", precision=4, prefix="tensor(")
        extra = "" if self.dtype in (float32, int64, bool_) else f", dtype={self.dtype}"
        if self.grad_fn is not None:
            extra += f", grad_fn=<{self.grad_fn.name()}>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    def __hash__(self):
        return id(self)

    def __bool__(self):
        if self.data.size != 1:
            raise ValueError(
                f"the truth value of a tensor with {self.data.size} elements is ambiguous; use .any() or .all()"
            )
        return bool(self.data.reshape(()))

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.kind not in "iu" or self.data.size != 1:
            raise TypeError(
                f"only an integer tensor with one element can be used as an index, got {self.dtype} {self.shape}"
            )
        return int(self.item())

    # ------------------------------------------------------------------ autograd
    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if requires_grad and self.dtype.kind != "f":
            raise TypeError(f"only floating-point tensors can require gradients, got dtype {self.dtype}")
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError("requires_grad_(False) on a non-leaf tensor: use .detach() instead")
        self.requires_grad = bool(requires_grad)
        return self

    def detach(self) -> Tensor:
        """A new leaf sharing this tensor's array (and its version counter), outside the graph."""
        t = Tensor.wrap(self.data)
        t.version_counter = self.version_counter
        return t

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) . gradient into every leaf's .grad. create_graph=True records the
        backward too, so .grad can be differentiated again; retain_graph defaults to create_graph."""
        autograd.backward(self, gradient, retain_graph, create_graph)

    def accumulate_grad(self, g) -> None:
        """Add gradient g (an array of this tensor's shape owned by the caller, or a Tensor under
        create_graph) into .grad, after the hooks."""
        g = self.apply_hooks(g)
        if g.dtype != self.data.dtype:
            raise RuntimeError(f"internal: gradient dtype {g.dtype} differs from the tensor's dtype {self.data.dtype}")
        if isinstance(g, Tensor):  # create_graph: .grad keeps the gradient's graph
            self._grad = g if self._grad is None else self._grad + g
        elif self._grad is None:
            self._grad = Tensor.wrap(g)
        else:
            self._grad.data = self._grad.data + g

    def apply_hooks(self, g):
        """A leaf's gradient g after its hooks, each of which may replace it: what accumulate_grad adds
        and what autograd.grad returns for this leaf (a non-leaf's hooks run on its grad_fn instead)."""
        for hook in self._hooks or ():
            g = hook(g)
        return g

    def retain_grad(self) -> None:
        """Keep .grad on this non-leaf tensor after backward."""
        if not self.requires_grad:
            raise RuntimeError("retain_grad() on a tensor that does not require grad")
        if self.grad_fn is not None:
            self.grad_fn.retained = weakref.ref(self)  # weak: the node must not keep its output alive

    def register_hook(self, hook):
        """hook(grad) -> None or a replacement gradient, called when this tensor's gradient is computed."""
        if not self.requires_grad:
            raise RuntimeError("register_hook() on a tensor that does not require grad")
        holder, attr = (self.grad_fn, "hooks") if self.grad_fn is not None else (self, "_hooks")
        handle = _HookHandle(holder, attr, hook)
        setattr(holder, attr, (getattr(holder, attr) or []) + [handle.on_array])
        return handle

    # ------------------------------------------------------------------ in place, outside autograd
    # Each in-place method refuses a tensor that requires grad (outside no_grad) or a graph output,
    # and bumps the version counter, so that a graph which saved the old values raises at backward.
    def _check_inplace(self, op: str, *operands) -> None:
        if self.grad_fn is not None or (self.requires_grad and is_grad_enabled()):
            raise RuntimeError(f"{op}: in-place change of a tensor that requires grad; wrap it in mt.no_grad()")
        # Deviation from PyTorch, flagged: PyTorch differentiates an in-place op with respect to a tensor
        # operand (x[i] = v, x.copy_(v), x.add_(v) send v a gradient); these writes go to .data outside the
        # graph, so an operand that requires grad is refused rather than silently taken as a constant.
        if is_grad_enabled() and builtins.any(isinstance(o, Tensor) and o.requires_grad for o in operands):
            raise RuntimeError(
                f"{op}: an operand requires grad, and minitensor's in-place ops do not differentiate it; use the "
                f"out-of-place form (mt.where, masked_fill, +, ...), or pass operand.detach() to use it as a constant"
            )

    def _write(self, op: str, index, value) -> Tensor:
        """self.data[index] = value, broadcast; errors name the op and both shapes."""
        self._check_inplace(op, value)
        value = value.data if isinstance(value, Tensor) else value
        try:
            with ieee_quiet():
                self.data[index] = value
        except (ValueError, TypeError) as e:
            raise ValueError(
                f"{op}: cannot write a value of shape {np.shape(value)} into a {self.dtype} tensor of "
                f"shape {self.shape} at {index!r}: {e}"
            ) from None
        self.version_counter.value += 1
        return self

    def _update(self, op: str, ufunc, other) -> Tensor:
        """self = ufunc(self, other) in place: the result keeps this tensor's shape and dtype."""
        self._check_inplace(op, other)
        o = other.data if isinstance(other, Tensor) else other
        try:
            with ieee_quiet():
                ufunc(self.data, o, out=self.data, casting="same_kind")
        except (ValueError, TypeError):
            raise ValueError(
                f"{op}: an operand of shape {np.shape(o)} and dtype {np.asarray(o).dtype} cannot "
                f"update a {self.dtype} tensor of shape {self.shape} in place"
            ) from None
        self.version_counter.value += 1
        return self

    def zero_(self) -> Tensor:
        return self._write("zero_", Ellipsis, 0)

    def fill_(self, value) -> Tensor:
        return self._write("fill_", Ellipsis, value)

    def add_(self, other, alpha=1) -> Tensor:
        self._check_inplace("add_", other)  # before other * alpha, which would record a graph
        return self._update("add_", np.add, _scaled(other, alpha))

    def sub_(self, other, alpha=1) -> Tensor:
        self._check_inplace("sub_", other)
        return self._update("sub_", np.subtract, _scaled(other, alpha))

    def mul_(self, other) -> Tensor:
        return self._update("mul_", np.multiply, other)

    def div_(self, other, *, rounding_mode=None) -> Tensor:
        if rounding_mode is None:
            return self._update("div_", np.true_divide, other)
        self._check_inplace("div_", other)
        with no_grad():
            return self._write("div_", Ellipsis, div(self, other, rounding_mode=rounding_mode))

    def copy_(self, src) -> Tensor:
        self._check_inplace("copy_", src)
        arr = src.data if isinstance(src, Tensor) else np.asarray(src)
        if not np.can_cast(arr.dtype, self.dtype, casting="same_kind"):
            raise ValueError(f"copy_: cannot copy {arr.dtype} {arr.shape} into {self.dtype} {self.shape}")
        return self._write("copy_", Ellipsis, arr)

    def masked_fill_(self, mask, value) -> Tensor:
        self._check_inplace("masked_fill_", value)
        m = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
        if m.dtype != bool_:
            raise TypeError(f"masked_fill_: mask must be a bool tensor, got {m.dtype}")
        if not _broadcasts_to(m.shape, self.shape):
            raise ValueError(
                f"masked_fill_: mask of shape {m.shape} does not broadcast to the tensor's shape {self.shape}"
            )
        return self._write("masked_fill_", np.broadcast_to(m, self.shape), value)

    def clamp_(self, min=None, max=None) -> Tensor:
        if min is None and max is None:
            raise ValueError("clamp_: at least one of min and max must be given")
        self._check_inplace("clamp_", min, max)
        with no_grad():  # the out-of-place clamp, its NaN and tie rules, written back
            return self._write("clamp_", Ellipsis, clamp(self, min, max))

    def uniform_(self, a: float = 0.0, b: float = 1.0) -> Tensor:
        return self._write("uniform_", Ellipsis, generator().uniform(a, b, self.shape))

    def normal_(self, mean: float = 0.0, std: float = 1.0) -> Tensor:
        return self._write("normal_", Ellipsis, generator().normal(mean, std, self.shape))

    def __setitem__(self, index, value) -> None:
        self._write("__setitem__", _normalize_index(index)[0], value)

    # ------------------------------------------------------------------ dtype
    def to(self, dtype=None, device=None) -> Tensor:
        """This tensor in `dtype` (differentiable between float dtypes); the only device is 'cpu'."""
        if isinstance(dtype, str) and dtype.partition(":")[0] in ("cpu", "cuda", "mps"):  # x.to(device)
            dtype, device = None, dtype
        if device not in (None, "cpu"):
            raise ValueError(f"to: minitensor runs on the CPU only, got device {device!r}")
        if dtype is None or np.dtype(dtype) == self.dtype:
            return self
        dtype = np.dtype(dtype)
        if dtype.kind == "f" and self.dtype.kind == "f":
            return ops.Cast.apply(self, dtype=dtype)
        with ieee_quiet():  # NaN or inf to an integer dtype: NumPy's value, no warning
            return Tensor.wrap(self.data.astype(dtype))

    def float(self) -> Tensor:
        return self.to(float32)

    def double(self) -> Tensor:
        return self.to(float64)

    def long(self) -> Tensor:
        return self.to(int64)

    def int(self) -> Tensor:
        return self.to(int32)

    def bool(self) -> Tensor:
        return self.to(bool_)

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)

    def is_floating_point(self) -> bool:
        return self.dtype.kind == "f"

    def clone(self) -> Tensor:
        return ops.Clone.apply(self)

    def contiguous(self) -> Tensor:
        return self if self.data.flags.c_contiguous else ops.Clone.apply(self)

    # ------------------------------------------------------------------ arithmetic
    def __add__(self, other):
        return _binary(ops.Add, self, other)

    def __radd__(self, other):
        return _binary(ops.Add, other, self)

    def __sub__(self, other):
        return _binary(ops.Sub, self, other)

    def __rsub__(self, other):
        return _binary(ops.Sub, other, self)

    def __mul__(self, other):
        return _binary(ops.Mul, self, other)

    def __rmul__(self, other):
        return _binary(ops.Mul, other, self)

    def __truediv__(self, other):
        return _div(self, other)

    def __rtruediv__(self, other):
        return _div(other, self)

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
        return _compare(np.equal, self, other)

    def __ne__(self, other):
        return _compare(np.not_equal, self, other)

    def __lt__(self, other):
        return _compare(np.less, self, other)

    def __le__(self, other):
        return _compare(np.less_equal, self, other)

    def __gt__(self, other):
        return _compare(np.greater, self, other)

    def __ge__(self, other):
        return _compare(np.greater_equal, self, other)

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
        return _logical(np.logical_and, "&", self, other)

    def __rand__(self, other):
        return _logical(np.logical_and, "&", other, self)

    def __or__(self, other):
        return _logical(np.logical_or, "|", self, other)

    def __ror__(self, other):
        return _logical(np.logical_or, "|", other, self)

    def __xor__(self, other):
        return _logical(np.logical_xor, "^", self, other)

    def __invert__(self):
        return _invert(self)

    def logical_not(self):
        return Tensor.wrap(np.logical_not(self.data))

    def all(self, dim=None, keepdim=False):
        return _all_any(np.all, self, dim, keepdim)

    def any(self, dim=None, keepdim=False):
        return _all_any(np.any, self, dim, keepdim)

    def isnan(self):
        return Tensor.wrap(np.isnan(self.data))

    def isfinite(self):
        return Tensor.wrap(np.isfinite(self.data))

    # ------------------------------------------------------------------ elementwise
    def exp(self):
        return ops.Exp.apply(_floating(self))

    def log(self):
        return ops.Log.apply(_floating(self))

    def sqrt(self):
        return ops.Sqrt.apply(_floating(self))

    def rsqrt(self):
        return 1.0 / self.sqrt()

    def abs(self):
        return ops.Abs.apply(self)

    def tanh(self):
        return ops.Tanh.apply(_floating(self))

    def erf(self):
        return ops.Erf.apply(_floating(self))

    def sigmoid(self):
        return ops.Sigmoid.apply(_floating(self))

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
        return _reduce("sum", ops.Sum, self, dim, keepdim)

    def mean(self, dim=None, keepdim=False):
        return _reduce("mean", ops.Mean, _require_floating(self, "mean"), dim, keepdim)

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return var(self, dim, unbiased, keepdim, correction=correction)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return std(self, dim, unbiased, keepdim, correction=correction)

    def max(self, dim=None, keepdim=False):
        return _max_min(self, dim, keepdim, "max")

    def min(self, dim=None, keepdim=False):
        return _max_min(self, dim, keepdim, "min")

    def amax(self, dim=(), keepdim=False):
        return amax(self, dim, keepdim)

    def amin(self, dim=(), keepdim=False):
        return amin(self, dim, keepdim)

    def logsumexp(self, dim, keepdim=False):
        return _reduce("logsumexp", ops.LogSumExp, _floating(self), dim, keepdim)

    def argmax(self, dim=None, keepdim=False):
        return _arg(np.argmax, self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return _arg(np.argmin, self, dim, keepdim)

    # ------------------------------------------------------------------ shape
    def reshape(self, *shape):
        return _reshape(self, size_args(shape, "reshape"))

    def view(self, *shape):
        return _reshape(self, size_args(shape, "view"))

    def view_as(self, other):
        return _reshape(self, other.shape)

    def reshape_as(self, other):
        return _reshape(self, other.shape)

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
        return _reshape(self, _unsqueezed(self.shape, dim))

    def squeeze(self, dim=None):
        return _reshape(self, _squeezed(self.shape, dim))

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
        index, advanced = _normalize_index(index)
        try:
            return ops.GetItem.apply(self, index=index, advanced=advanced)
        except IndexError as e:
            raise IndexError(f"__getitem__ on a tensor of shape {self.shape}: {e}") from None

    # ------------------------------------------------------------------ names a PyTorch user reaches for
    # Each calls a torch-named function of the last section of this file, which validates first.
    @property
    def device(self) -> device:
        return CPU

    @property
    def is_cuda(self) -> bool:
        return False

    def cpu(self) -> Tensor:
        return self

    def cuda(self, device=None, non_blocking=False) -> Tensor:
        raise RuntimeError(
            "cuda(): minitensor runs on the CPU only (mt.cuda.is_available() is False); "
            "keep the tensor where it is, or use .to('cpu')"
        )

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

    def new_tensor(self, data, dtype=None, requires_grad=False) -> Tensor:
        """A copy of `data` in this tensor's dtype (or `dtype`), as torch's new_tensor."""
        data = data.data if isinstance(data, Tensor) else data
        return Tensor(
            np.array(data, dtype=self.dtype if dtype is None else np.dtype(dtype)), requires_grad=requires_grad
        )

    def new_full(self, size, fill_value, dtype=None, requires_grad=False) -> Tensor:
        return self.new_tensor(np.full(size_args((size,), "new_full"), fill_value), dtype, requires_grad)

    def new_zeros(self, *size, dtype=None, requires_grad=False) -> Tensor:
        return self.new_full(size_args(size, "new_zeros"), 0, dtype, requires_grad)

    def new_ones(self, *size, dtype=None, requires_grad=False) -> Tensor:
        return self.new_full(size_args(size, "new_ones"), 1, dtype, requires_grad)

    def new_empty(self, *size, dtype=None, requires_grad=False) -> Tensor:
        return self.new_full(size_args(size, "new_empty"), 0, dtype, requires_grad)  # zeros: never garbage


class _HookHandle:
    """A registered tensor hook: `on_array` is what the graph walk calls (array in, array out);
    `remove()` unregisters it."""

    def __init__(self, holder, attr: str, hook):
        self._holder, self._attr, self.hook = holder, attr, hook

    def on_array(self, g):
        """The hook on gradient g: an array (returns an array) or, under create_graph, a Tensor (returns one)."""
        r = self.hook(g if isinstance(g, Tensor) else Tensor.wrap(g))
        if r is None:
            return g
        if isinstance(g, Tensor):
            r = r if isinstance(r, Tensor) else Tensor.wrap(np.asarray(r, dtype=g.dtype))
        else:
            r = r.data if isinstance(r, Tensor) else np.asarray(r)
        if r.shape != g.shape:
            raise ValueError(f"hook {self.hook!r} returned a gradient of shape {r.shape}, expected {g.shape}")
        return r

    def remove(self) -> None:
        hooks = getattr(self._holder, self._attr) or []
        setattr(self._holder, self._attr, [h for h in hooks if h != self.on_array] or None)


# ---------------------------------------------------------------------- helpers behind the methods


def as_array(data, dtype=None) -> np.ndarray:
    """Python data or an array to an ndarray, with PyTorch's inference of dtype."""
    if isinstance(data, np.ndarray):
        arr = data
    elif isinstance(data, (np.generic,)):
        arr = np.asarray(data)
    else:
        if isinstance(data, (list, tuple)) and builtins.any(isinstance(x, Tensor) for x in _flatten_list(data)):
            data = _tensors_to_lists(data)
        try:
            arr = np.asarray(data)
        except ValueError as e:  # ragged nested lists
            raise ValueError(f"tensor: cannot make a tensor from ragged nested sequences: {e}") from None
        _check_int_range(arr, int64 if dtype is None else np.dtype(dtype))
        if arr.dtype.kind == "f" and dtype is None:
            arr = arr.astype(get_default_dtype())
        elif arr.dtype.kind in "iu" and dtype is None:
            arr = arr.astype(int64)
    if arr.dtype.kind in "OUSVcM":
        raise TypeError(f"cannot make a tensor from data of dtype {arr.dtype}: expected numbers or booleans")
    if arr.dtype not in SUPPORTED and dtype is None:
        raise TypeError(f"unsupported dtype {arr.dtype}; supported: {sorted(str(d) for d in SUPPORTED)}")
    return arr


def _check_int_range(arr: np.ndarray, dtype: np.dtype) -> None:
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


def _flatten_list(x):
    for item in x:
        if isinstance(item, (list, tuple)):
            yield from _flatten_list(item)
        else:
            yield item


def _tensors_to_lists(x):
    if isinstance(x, Tensor):
        return x.data
    if isinstance(x, (list, tuple)):
        return [_tensors_to_lists(i) for i in x]
    return x


def _floating(t: Tensor) -> Tensor:
    """Integer inputs of elementwise float ops (exp, log, tanh, ...) are promoted to the default float dtype,
    as in PyTorch."""
    return t if t.dtype.kind == "f" else t.to(get_default_dtype())


def _require_floating(t: Tensor, op: str) -> Tensor:
    """Reductions that average (mean, var) refuse integer inputs, as PyTorch does, rather than guess a dtype."""
    if t.dtype.kind != "f":
        raise TypeError(
            f"{op}(): expected a floating-point tensor, got dtype {t.dtype}; convert it first, e.g. .float()"
        )
    return t


def _div(a, b) -> Tensor:
    dt = result_type(a, b)
    if dt.kind != "f":
        dt = get_default_dtype()  # true division of integers gives floats, as in PyTorch
    return _binary(ops.Div, a, b, dt)


def _compare(fn, a, b) -> Tensor:
    x = a.data if isinstance(a, Tensor) else a
    y = b.data if isinstance(b, Tensor) else b
    try:
        return Tensor.wrap(np.asarray(fn(x, y)))
    except ValueError as e:
        raise ValueError(f"comparison {fn.__name__}: shapes {np.shape(x)} and {np.shape(y)} do not broadcast") from e


def _logical(fn, sym: str, a, b) -> Tensor:
    x = a.data if isinstance(a, Tensor) else np.asarray(a)
    y = b.data if isinstance(b, Tensor) else np.asarray(b)
    if x.dtype != bool_ or y.dtype != bool_:
        if x.dtype.kind in "iu" and y.dtype.kind in "iu":
            op = {"&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor}[sym]
            return Tensor.wrap(np.asarray(op(x, y)))
        raise TypeError(f"operator {sym}: expected bool (or integer) tensors, got {x.dtype} and {y.dtype}")
    try:
        return Tensor.wrap(np.asarray(fn(x, y)))
    except ValueError as e:
        raise ValueError(f"operator {sym}: shapes {x.shape} and {y.shape} do not broadcast") from e


def _invert(a: Tensor) -> Tensor:
    if a.dtype == bool_:
        return Tensor.wrap(np.logical_not(a.data))
    if a.dtype.kind in "iu":
        return Tensor.wrap(np.invert(a.data))
    raise TypeError(f"operator ~: expected a bool or integer tensor, got {a.dtype}")


def _refuse_empty_reduction(t: Tensor, d, op: str) -> None:
    """max/min/argmax over nothing has no value: refuse an empty tensor reduced whole (d None) or over a zero-size
    dim d (as PyTorch; over another dim of an empty tensor the result is empty, and fine)."""
    if t.data.size == 0 and (d is None or t.ndim == 0 or t.shape[d] == 0):
        where = "" if d is None else f" over its dim {d} of size 0"
        raise ValueError(f"{op}(): cannot reduce an empty tensor of shape {t.shape}{where}")


def _max_min(t: Tensor, dim, keepdim: bool, mode: str):
    if isinstance(dim, Tensor):  # torch.max(a, b)
        return maximum(t, dim) if mode == "max" else minimum(t, dim)
    d = None if dim is None else _one_dim(dim, t.ndim, mode)
    _refuse_empty_reduction(t, d, mode)
    if dim is None:
        return ops.MaxMin.apply(t, dim=None, keepdim=False, mode=mode)
    if t.ndim == 0:  # the one element is its own max, at index 0 (keepdim keeps no dim either)
        return _ValuesIndices(ops.MaxMin.apply(t, dim=None, keepdim=False, mode=mode), Tensor.wrap(np.array(0)))
    values = ops.MaxMin.apply(t, dim=d, keepdim=keepdim, mode=mode)
    idx = (np.argmax if mode == "max" else np.argmin)(t.data, axis=d)
    if keepdim:
        idx = np.expand_dims(idx, d)
    return _ValuesIndices(values, Tensor.wrap(idx.astype(int64)))


def _arg(fn, t: Tensor, dim, keepdim: bool) -> Tensor:
    d = None if dim is None else _one_dim(dim, t.ndim, fn.__name__)
    _refuse_empty_reduction(t, d, fn.__name__)
    if dim is None:
        return Tensor.wrap(np.asarray(fn(t.data), dtype=int64))
    if t.ndim == 0:
        return Tensor.wrap(np.array(0, dtype=int64))
    out = fn(t.data, axis=d)
    return Tensor.wrap(np.asarray(np.expand_dims(out, d) if keepdim else out, dtype=int64))


def _reduce(op: str, fn, t: Tensor, dim, keepdim: bool, **kwargs) -> Tensor:
    """The reduction primitive `fn` over the normalised dim (None = all dims)."""
    return fn.apply(t, dim=_dims(dim, t.ndim, op), keepdim=keepdim, **kwargs)


def _all_any(fn, t: Tensor, dim, keepdim: bool) -> Tensor:
    return Tensor.wrap(np.asarray(fn(t.data, axis=_dims(dim, t.ndim, fn.__name__), keepdims=keepdim)))


def _reshape(t: Tensor, shape: tuple) -> Tensor:
    if shape == t.shape:
        return t
    known = math.prod(s for s in shape if s != -1)
    if shape.count(-1) > 1 or builtins.any(s < -1 for s in shape):
        ok = False
    elif -1 in shape:
        ok = known != 0 and t.data.size % known == 0
    else:
        ok = known == t.data.size
    if not ok:
        raise ValueError(
            f"reshape: shape {tuple(shape)} is invalid for a tensor of shape {t.shape} ({t.data.size} elements)"
        )
    return ops.Reshape.apply(t, shape=shape)


def _unsqueezed(shape: tuple, dim: int) -> tuple:
    n = len(shape) + 1
    if not -n <= dim < n:
        raise IndexError(f"unsqueeze: dim {dim} out of range for a result of {n} dimensions")
    dim %= n
    return shape[:dim] + (1,) + shape[dim:]


def _squeezed(shape: tuple, dim) -> tuple:
    if dim is None:
        return tuple(s for s in shape if s != 1)
    dims = _dims(dim, len(shape), "squeeze") or ()
    return tuple(s for i, s in enumerate(shape) if not (i in dims and s == 1))


def _normalize_index(index):
    """Tensor indices to arrays, checking dtypes; returns (index, uses_advanced_indexing)."""
    items = index if isinstance(index, tuple) else (index,)
    out, advanced = [], False
    for it in items:
        if isinstance(it, Tensor):
            it = it.data
        elif isinstance(it, list):
            it = np.asarray(it)
            if it.dtype.kind == "f":
                raise IndexError("__getitem__: tensors used as indices must be integer or bool, got float list")
        if isinstance(it, np.ndarray):
            if it.dtype.kind not in "iub":
                raise IndexError(f"__getitem__: tensors used as indices must be integer or bool, got {it.dtype}")
            advanced = True
        elif isinstance(it, (float, np.floating)):
            raise IndexError(
                f"__getitem__: index {it!r} is a float; indices must be integers, slices, None, ... or tensors"
            )
        out.append(it)
    return (tuple(out) if isinstance(index, tuple) else out[0]), advanced


# ---------------------------------------------------------------------- functions (torch.* names)


def _alpha_times(b, alpha, a, op: str):
    """alpha * b for add/sub's `alpha` (a Python number, as in PyTorch; a float alpha with integer operands refused)."""
    if alpha == 1 and not isinstance(alpha, float):
        return b
    if not isinstance(alpha, numbers.Number) or isinstance(alpha, complex):
        raise TypeError(f"{op}: alpha must be a number, got {type(alpha).__name__}")
    if isinstance(alpha, float) and result_type(a, b).kind != "f":
        raise TypeError(f"{op}: for integer operands, alpha must not be a float, got alpha={alpha!r}")
    return b * alpha


def add(a, b, *, alpha=1):
    """a + alpha * b"""
    return _binary(ops.Add, a, _alpha_times(b, alpha, a, "add"))


def sub(a, b, *, alpha=1):
    """a - alpha * b"""
    return _binary(ops.Sub, a, _alpha_times(b, alpha, a, "sub"))


def mul(a, b):
    return _binary(ops.Mul, a, b)


def div(a, b, *, rounding_mode=None):
    """a / b; rounding_mode 'trunc' rounds the quotient toward zero, 'floor' down (Python's //), both in the
    operands' promoted dtype (integers stay integers) and with the gradient 0, as in PyTorch."""
    if rounding_mode is None:
        return _div(a, b)
    if rounding_mode not in ("trunc", "floor"):
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    x, y = _operands(a, b)
    if x.dtype.kind in "iub" and not np.all(y.data):
        raise ZeroDivisionError(f"div: integer division by zero (rounding_mode={rounding_mode!r})")
    return _binary(ops.DivRounded, x, y, rounding_mode=rounding_mode)


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


def tanh(a):
    return a.tanh()


def erf(a):
    return a.erf()


def sigmoid(a):
    return a.sigmoid()


def relu(a):
    return a.relu()


def pow(a, b) -> Tensor:
    """a ** b for tensors and Python numbers (either side)."""
    if isinstance(a, Tensor) and not isinstance(b, Tensor):
        if not isinstance(b, numbers.Real):
            raise TypeError(f"pow: exponent must be a number or tensor, got {type(b).__name__}")
        if a.dtype.kind != "f" and isinstance(b, numbers.Integral) and b < 0:
            raise ValueError(
                f"pow: integer tensor ({a.dtype}) to a negative integer power {b} is not allowed, as in PyTorch"
            )
        a = _floating(a) if isinstance(b, float) else a
        return ops.PowScalar.apply(a, exponent=b)
    if not isinstance(a, Tensor):
        dt = result_type(a, b)
        return ops.RPowScalar.apply(_operand(b, dt), base=a)
    return _binary(ops.Pow, a, b)


def matmul(a, b) -> Tensor:
    """torch.matmul: batched with broadcasting; 1-D operands are promoted and the added dim removed."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"matmul: expected two tensors, got {type(a).__name__} and {type(b).__name__}")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: both arguments need at least 1 dimension, got shapes {a.shape} and {b.shape}")
    ka = a.shape[-1]
    kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if ka != kb:
        raise ValueError(
            f"matmul: shapes {a.shape} and {b.shape} are not aligned: "
            f"{ka} (last dim of the first) != {kb} "
            f"(the second's {'only' if b.ndim == 1 else 'second-to-last'} dim)"
        )
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: batch dimensions of {a.shape} and {b.shape} do not broadcast") from None
    if a.dtype != b.dtype:
        dt = result_type(a, b)
        a, b = _operand(a, dt), _operand(b, dt)
    return ops.MatMul.apply(a, b)


def clamp(a: Tensor, min=None, max=None) -> Tensor:
    """min(max(a, min), max); each bound a number or a tensor that broadcasts with a. Tensor bounds are
    differentiated as in PyTorch: a bound gets the gradient where it is active (ops.Clamp)."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    bounds = [b for b in (min, max) if b is not None]
    for b in bounds:
        if not isinstance(b, (Tensor, numbers.Real)):
            raise TypeError(f"clamp: min and max must be numbers or tensors, got {type(b).__name__}")
    dt = result_type(a, *bounds)  # as in PyTorch: a float bound promotes an integer input
    x, *bs = (_operand(v, dt) for v in (a, *bounds))
    shapes = [t.shape for t in (x, *bs)]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"clamp: shapes input {x.shape}, min/max {[t.shape for t in bs]} do not broadcast") from None
    return ops.Clamp.apply(x, *bs, has_min=min is not None, has_max=max is not None)


def maximum(a, b) -> Tensor:
    return _binary(ops.Maximum, a, b)


def minimum(a, b) -> Tensor:
    return _binary(ops.Minimum, a, b)


def where(condition, input, other) -> Tensor:
    """condition ? input : other, broadcasting all three; condition must be bool."""
    cond = condition.data if isinstance(condition, Tensor) else np.asarray(condition)
    if cond.dtype != bool_:
        raise TypeError(f"where: condition must be a bool tensor, got {cond.dtype}")
    dt = result_type(input, other)
    a, b = _operand(input, dt), _operand(other, dt)
    try:
        np.broadcast_shapes(cond.shape, a.shape, b.shape)
    except ValueError:
        raise ValueError(
            f"where: shapes condition {cond.shape}, input {a.shape}, other {b.shape} do not broadcast"
        ) from None
    return ops.Where.apply(a, b, cond=cond)


def masked_fill(input: Tensor, mask, value) -> Tensor:
    """input with `value` wherever the bool `mask` is True; mask and input broadcast together (as in PyTorch,
    a larger mask gives a larger result; the in-place masked_fill_ cannot grow its tensor and refuses).
    `value` is a number or a 0-d tensor, which gets the gradient summed over the masked positions."""
    m = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype != bool_:
        raise TypeError(f"masked_fill: mask must be a bool tensor, got {m.dtype}")
    if not _shapes_broadcast(m.shape, input.shape):
        raise ValueError(f"masked_fill: mask of shape {m.shape} and input of shape {input.shape} do not broadcast")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ValueError(
                f"masked_fill: value must be a number or a 0-d tensor, got a tensor of shape {value.shape}"
            )
        if value.dtype.kind == "f" and input.dtype.kind == "f":
            value = _operand(value, input.dtype)  # a differentiable cast: value's gradient in its own dtype
        else:
            value = Tensor.wrap(value.data.astype(input.dtype))
    elif isinstance(value, numbers.Number):
        with ieee_quiet():  # -inf or NaN into an integer tensor: NumPy's value, no warning
            value = Tensor.wrap(np.asarray(value).astype(input.dtype))
    else:
        raise TypeError(f"masked_fill: value must be a number or a 0-d tensor, got {type(value).__name__}")
    return ops.MaskedFill.apply(input, value, mask=m)


def flatten(t: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    s = _one_dim(start_dim, t.ndim, "flatten")
    e = _one_dim(end_dim, t.ndim, "flatten")
    if t.ndim == 0:
        return t.reshape(1)
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    return _reshape(t, t.shape[:s] + (int(np.prod(t.shape[s : e + 1])),) + t.shape[e + 1 :])


def permute(t: Tensor, dims) -> Tensor:
    dims = tuple(dims)
    norm = _dims(dims, t.ndim, "permute") if dims else ()
    if len(dims) != t.ndim:
        raise ValueError(f"permute: got {len(dims)} dims {dims} for a tensor of {t.ndim} dimensions")
    return ops.Permute.apply(t, dims=norm)


def expand(t: Tensor, sizes: tuple) -> Tensor:
    if len(sizes) < t.ndim:
        raise ValueError(f"expand: {len(sizes)} sizes {sizes} for a tensor of {t.ndim} dimensions {t.shape}")
    lead = len(sizes) - t.ndim
    shape = tuple(t.shape[i - lead] if (s == -1 and i >= lead) else s for i, s in enumerate(sizes))
    for i in range(t.ndim):
        if t.shape[i] != 1 and t.shape[i] != shape[i + lead]:
            raise ValueError(
                f"expand: the size {t.shape[i]} of dim {i} (shape {t.shape}) cannot expand to "
                f"{shape[i + lead]} (sizes {sizes})"
            )
    return t if shape == t.shape else ops.Expand.apply(t, shape=shape)


def repeat(t: Tensor, sizes: tuple) -> Tensor:
    if len(sizes) < t.ndim:
        raise ValueError(f"repeat: {len(sizes)} repeat counts {sizes} for a tensor of {t.ndim} dimensions")
    return ops.Repeat.apply(t, sizes=sizes)


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty sequence of tensors")
    dt = result_type(*tensors)
    # as in PyTorch (a legacy rule): a 1-D empty tensor is skipped (ops.Cat), whatever the others' shapes
    ref = next((x.shape for x in tensors if x.shape != (0,)), tensors[0].shape)
    d = _one_dim(dim, len(ref), "cat")
    for i, x in enumerate(tensors):
        if x.shape == (0,) and ref != (0,):
            continue
        if x.ndim != len(ref) or x.shape[:d] + x.shape[d + 1 :] != ref[:d] + ref[d + 1 :]:
            raise ValueError(f"cat: tensor {i} has shape {x.shape}, incompatible with {ref} outside dim {d}")
    return ops.Cat.apply(*[_operand(x, dt) for x in tensors], dim=d)


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    for i, x in enumerate(tensors):
        if x.shape != tensors[0].shape:
            raise ValueError(f"stack: tensor {i} has shape {x.shape}, expected {tensors[0].shape} like tensor 0")
    n = tensors[0].ndim + 1
    if not -n <= dim < n:
        raise IndexError(f"stack: dim {dim} out of range for a result of {n} dimensions")
    dt = result_type(*tensors)
    return ops.Stack.apply(*[_operand(x, dt) for x in tensors], dim=dim % n)


def split(t: Tensor, split_size_or_sections, dim: int = 0):
    d = _one_dim(dim, t.ndim, "split")
    n = t.shape[d]
    if isinstance(split_size_or_sections, (int, np.integer)):
        if split_size_or_sections <= 0:
            raise ValueError(f"split: split_size must be positive, got {split_size_or_sections}")
        sizes = [split_size_or_sections] * (n // split_size_or_sections)
        if n % split_size_or_sections:
            sizes.append(n % split_size_or_sections)
    else:
        sizes = list(split_size_or_sections)
        if builtins.sum(sizes) != n:
            raise ValueError(f"split: sections {sizes} sum to {builtins.sum(sizes)}, but dim {d} has size {n}")
    out, start = [], 0
    for s in sizes:
        index = (slice(None),) * d + (slice(start, start + s),)
        out.append(ops.GetItem.apply(t, index=index, advanced=False))
        start += s
    return tuple(out)


def chunk(t: Tensor, chunks: int, dim: int = 0):
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    n = t.shape[_one_dim(dim, t.ndim, "chunk")]
    size = -(-n // chunks)
    return split(t, builtins.max(size, 1), dim)


def tril(t: Tensor, diagonal: int = 0) -> Tensor:
    if t.ndim < 2:
        raise ValueError(f"tril: expected at least 2 dimensions, got shape {t.shape}")
    return ops.Tril.apply(t, diagonal=diagonal)


def triu(t: Tensor, diagonal: int = 0) -> Tensor:
    if t.ndim < 2:
        raise ValueError(f"triu: expected at least 2 dimensions, got shape {t.shape}")
    return ops.Triu.apply(t, diagonal=diagonal)


def sum(t, dim=None, keepdim=False):
    return t.sum(dim, keepdim)


def mean(t, dim=None, keepdim=False):
    return t.mean(dim, keepdim)


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """sum((x - mean)^2) / max(0, n - correction) over dim; torch's three forms: var(x, dim, unbiased, keepdim),
    var(x, dim=None, *, correction=1, keepdim=False) and var(x, unbiased) (unbiased: correction 1, else 0)."""
    dim, correction = _var_correction("var", dim, unbiased, keepdim, correction)
    return _reduce("var", ops.Var, _require_floating(input, "var"), dim, keepdim, correction=correction)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """sqrt(var(input, ...)): the same three forms as var."""
    dim, correction = _var_correction("std", dim, unbiased, keepdim, correction)
    return _reduce("std", ops.Std, _require_floating(input, "std"), dim, keepdim, correction=correction)


def _var_correction(op: str, dim, unbiased, keepdim, correction):
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


def reshape(t, shape):
    return t.reshape(shape)


def transpose(t: Tensor, dim0: int, dim1: int) -> Tensor:
    d0, d1 = _one_dim(dim0, t.ndim, "transpose"), _one_dim(dim1, t.ndim, "transpose")
    return t if t.ndim == 0 else ops.Transpose.apply(t, dim0=d0, dim1=d1)  # a 0-d tensor has nothing to swap


def unflatten(t: Tensor, dim: int, sizes) -> Tensor:
    d = _one_dim(dim, t.ndim, "unflatten")
    return _reshape(t, t.shape[:d] + tuple(sizes) + t.shape[d + 1 :])


def amax(t: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Largest value over dim (all dims when dim is () or None); the gradient is shared evenly between ties."""
    return _reduce("amax", ops.AMaxMin, t, dim, keepdim, mode="max")


def amin(t: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Smallest value over dim (all dims when dim is () or None); the gradient is shared evenly between ties."""
    return _reduce("amin", ops.AMaxMin, t, dim, keepdim, mode="min")


def unsqueeze(t, dim):
    return t.unsqueeze(dim)


def squeeze(t, dim=None):
    return t.squeeze(dim)


def _float_input(t: Tensor, dtype, op: str) -> Tensor:
    if dtype is not None:
        t = t.to(dtype)
    if t.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating tensor, got {t.dtype}")
    return t


def softmax(t: Tensor, dim: int, dtype=None) -> Tensor:
    """e^x / sum e^x along dim (one fused node); `dtype` converts the input first, as in PyTorch."""
    t = _float_input(t, dtype, "softmax")
    return ops.Softmax.apply(t, dim=_one_dim(dim, t.ndim, "softmax"))


def log_softmax(t: Tensor, dim: int, dtype=None) -> Tensor:
    """x - log sum e^x along dim (one fused node)."""
    t = _float_input(t, dtype, "log_softmax")
    return ops.LogSoftmax.apply(t, dim=_one_dim(dim, t.ndim, "log_softmax"))


def all(t, dim=None, keepdim=False):
    return t.all(dim, keepdim)


def any(t, dim=None, keepdim=False):
    return t.any(dim, keepdim)


def equal(a, b) -> builtins.bool:
    return a.shape == b.shape and builtins.bool(np.array_equal(a.data, b.data))


def allclose(a, b, rtol=1e-5, atol=1e-8) -> builtins.bool:
    return builtins.bool(np.allclose(a.data, b.data, rtol=rtol, atol=atol))


def numel(t) -> int:
    return t.numel()


def is_tensor(x) -> builtins.bool:
    return isinstance(x, Tensor)


# ---------------------------------------------------------------------- names a PyTorch user reaches for
# torch.device, torch.cuda, mm, bmm, norm, gather, sort, argsort, topk: composites of the primitives
# above (a gather is an integer-array index, so its gradient is GetItem's scatter-add), except the
# 2-norm, which needs its own node (ops.Norm) for PyTorch's gradient 0 at the origin.


class device(str):
    """torch.device. A str subclass, so `x.to(x.device)`, `x.device == "cpu"` and `str(x.device)` work
    as in PyTorch; `.type` and `.index` as torch.device has them. minitensor's only device is "cpu"."""

    def __new__(cls, type: str = "cpu", index: int | None = None):
        if not isinstance(type, str) or not type.partition(":")[0].isidentifier():
            raise ValueError(f"device: expected a string such as 'cpu' or 'cuda:0', got {type!r}")
        name, _, idx = type.partition(":")
        if idx and not idx.isdigit():
            raise ValueError(f"device: the index in {type!r} must be a non-negative integer")
        if idx and index is not None:
            raise ValueError(f"device: {type!r} already names an index; do not pass index={index} too")
        index = int(idx) if idx else index
        self = super().__new__(cls, name if index is None else f"{name}:{index}")
        self.type, self.index = name, index
        return self

    def __repr__(self) -> str:
        return f"device(type={self.type!r}" + ("" if self.index is None else f", index={self.index}") + ")"


CPU = device("cpu")


class _Cuda:
    """mt.cuda: there is no GPU here, so the usual `"cuda" if torch.cuda.is_available() else "cpu"`
    picks the CPU and the code runs unchanged."""

    @staticmethod
    def is_available() -> builtins.bool:
        return False

    @staticmethod
    def device_count() -> int:
        return 0


cuda = _Cuda()


def _check_tensor(x, op: str, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """Matrix product of two 2-D tensors (no broadcasting: torch.matmul does that)."""
    for name, x in (("input", input), ("mat2", mat2)):
        if _check_tensor(x, "mm", name).ndim != 2:
            raise ValueError(f"mm: {name} must be a 2-D matrix, got shape {x.shape}")
    return matmul(input, mat2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched matrix product of (B, n, m) and (B, m, p) tensors, the same B (no broadcasting)."""
    for name, x in (("input", input), ("mat2", mat2)):
        if _check_tensor(x, "bmm", name).ndim != 3:
            raise ValueError(f"bmm: {name} must be a 3-D batch of matrices (B, n, m), got shape {x.shape}")
    if input.shape[0] != mat2.shape[0]:
        raise ValueError(
            f"bmm: batch sizes differ: input {input.shape} and mat2 {mat2.shape} (bmm does not broadcast; use matmul)"
        )
    return matmul(input, mat2)


def norm(input: Tensor, p="fro", dim=None, keepdim: builtins.bool = False, dtype=None) -> Tensor:
    """The vector p-norm over dim (all elements when None): p = 2 or 'fro' (sqrt of the sum of squares,
    gradient 0 at the origin as in PyTorch), 1 (sum of |x|), inf (max |x|) or -inf (min |x|)."""
    t = _float_input(_check_tensor(input, "norm", "input"), dtype, "norm")
    dims = _dims(dim, t.ndim, "norm")
    if isinstance(p, str) and p == "fro" or p == 2:
        return ops.Norm.apply(t, dim=dims, keepdim=keepdim)
    if p == 1:
        return t.abs().sum(dims, keepdim)
    if p in (math.inf, -math.inf):
        return ops.NormInf.apply(t, dim=dims, keepdim=keepdim, mode="max" if p > 0 else "min")
    raise NotImplementedError(f"norm: p={p!r} is not supported; use p=2 or 'fro', 1, inf or -inf")


def _index_array(index, op: str) -> np.ndarray:
    idx = index.data if isinstance(index, Tensor) else None
    if idx is None or idx.dtype.kind not in "iu":
        what = type(index).__name__ if idx is None else f"a tensor of dtype {idx.dtype}"
        raise TypeError(f"{op}: index must be an integer tensor, got {what}")
    return idx


def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """out[i][j][k] = input[index[i][j][k]][j][k] (dim=0), and so on: values picked along dim.
    Its gradient scatter-adds g back along dim (repeated indices accumulate).
    As in PyTorch, index has input's number of dimensions, a 0-d tensor counting as 1-D, and an empty
    index of any shape gives an empty result of its shape."""
    t = _check_tensor(input, "gather", "input")
    idx = _index_array(index, "gather")
    d = _one_dim(dim, t.ndim, "gather")
    if idx.size == 0:
        return t.reshape(-1)[Tensor.wrap(np.zeros(idx.shape, dtype=int64))]  # picks nothing: gradient 0
    t_shape, idx_shape = t.shape or (1,), idx.shape or (1,)  # a 0-d tensor counts as 1-D
    if len(idx_shape) != len(t_shape):
        raise ValueError(f"gather: index must have as many dimensions as input ({t.ndim}), got shape {idx.shape}")
    if builtins.any(idx_shape[k] > t_shape[k] for k in range(len(t_shape)) if k != d):
        raise ValueError(f"gather: index of shape {idx.shape} is larger than input {t.shape} outside dim {d}")
    if idx.min() < 0 or idx.max() >= t_shape[d]:
        bad = idx[(idx < 0) | (idx >= t_shape[d])].reshape(-1)[0]
        raise IndexError(f"gather: index {bad} is out of range for dim {d} of size {t_shape[d]}")
    # the integer-array index that picks the same entries: idx along dim, positions along the others
    i = idx.reshape(idx_shape)
    full = tuple(i if k == d else np.arange(n).reshape((-1,) + (1,) * (i.ndim - 1 - k)) for k, n in enumerate(i.shape))
    out = ops.GetItem.apply(_reshape(t, t_shape), index=full, advanced=True)
    return _reshape(out, idx.shape)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The slices of input at `index` (a 1-D or 0-d integer tensor) along dim; the gradient scatter-adds g
    back (repeated indices accumulate). As in PyTorch, a 0-d input takes an index of one entry, 0."""
    t = _check_tensor(input, "index_select", "input")
    idx = _index_array(index, "index_select")
    d = _one_dim(dim, t.ndim, "index_select")
    if idx.ndim > 1:
        raise ValueError(f"index_select: index must be a 1-D (or 0-d) tensor, got shape {idx.shape}")
    n = t.shape[d] if t.ndim else 1
    if idx.size and (idx.min() < 0 or idx.max() >= n) or (t.ndim == 0 and idx.size != 1):
        raise IndexError(f"index_select: index {idx.tolist()} is out of range for dim {d} of size {n}")
    if t.ndim == 0:
        return ops.GetItem.apply(t, index=(), advanced=False)
    return ops.GetItem.apply(t, index=(slice(None),) * d + (idx.reshape(-1),), advanced=True)


def _sort_indices(data: np.ndarray, d: int, descending: builtins.bool) -> np.ndarray:
    """Stable argsort along d; descending keeps equal entries in their original order and puts NaN first
    (PyTorch's order), by sorting the reversed line ascending and reading the result backwards."""
    if not descending:
        return np.argsort(data, axis=d, kind="stable")
    n = data.shape[d]
    return n - 1 - np.flip(np.argsort(np.flip(data, axis=d), axis=d, kind="stable"), axis=d)


def sort(input: Tensor, dim: int = -1, descending: builtins.bool = False, stable: builtins.bool = False):
    """(values, indices) sorted along dim; ties keep their order (stable, whatever `stable` says)."""
    t = _check_tensor(input, "sort", "input")
    d = _one_dim(dim, t.ndim, "sort")
    if t.ndim == 0:
        return _ValuesIndices(t.clone(), Tensor.wrap(np.zeros((), dtype=int64)))
    indices = Tensor.wrap(_sort_indices(t.data, d, descending).astype(int64))
    return _ValuesIndices(gather(t, d, indices), indices)


def argsort(input: Tensor, dim: int = -1, descending: builtins.bool = False, stable: builtins.bool = False):
    return sort(input, dim, descending, stable).indices


def topk(input: Tensor, k: int, dim: int = -1, largest: builtins.bool = True, sorted: builtins.bool = True):
    """(values, indices) of the k largest (or smallest) entries along dim, best first (also when
    sorted=False, which PyTorch leaves unspecified)."""
    t = _check_tensor(input, "topk", "input")
    d = _one_dim(dim, t.ndim, "topk")
    size = t.shape[d] if t.ndim else 1
    if not isinstance(k, (int, np.integer)) or isinstance(k, builtins.bool) or not 0 <= k <= size:
        raise ValueError(f"topk: k must be an integer in [0, {size}] (the size of dim {d}), got {k!r}")
    if t.ndim == 0:
        return sort(t)
    order = _sort_indices(t.data, d, descending=largest)
    indices = Tensor.wrap(np.take(order, np.arange(k), axis=d).astype(int64))
    return _ValuesIndices(gather(t, d, indices), indices)


def einsum(equation: str, *operands) -> Tensor:
    """torch.einsum as a composite: a letter repeated within one operand first takes that operand's diagonal
    ('ii->i', 'iij->j'; an integer-array index, so the gradient lands back on the diagonal); '...' stands for
    the dims the letters do not name, aligned from the right across operands; then each operand is laid out
    over all the equation's letters (permuted, with size-1 axes for the letters it lacks), the operands are
    multiplied by broadcasting (a size-1 dim broadcasts, as in PyTorch), and the letters not in the output
    are summed. Exact; the product over every letter is materialised (no contraction order), which suits
    the small shapes one learns with."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum: expected an equation string such as 'ij,jk->ik', got {type(equation).__name__}")
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    subscripts = lhs.split(",")
    if len(subscripts) != len(operands):
        raise ValueError(f"einsum: {equation!r} names {len(subscripts)} operands, got {len(operands)}")
    for k, x in enumerate(operands):
        _check_tensor(x, "einsum", f"operand {k}")
    subscripts, rhs = _einsum_ellipsis(equation, subscripts, rhs if arrow else None, operands)
    used = "".join(subscripts)
    if rhs is None:  # implicit output: the letters used once, alphabetically
        rhs = "".join(sorted(c for c in set(used) if used.count(c) == 1))
    if not (used + rhs).isalpha() and (used + rhs):
        raise ValueError(f"einsum: subscripts must be letters, got {equation!r}")
    if len(set(rhs)) != len(rhs) or not set(rhs) <= set(used):
        raise ValueError(f"einsum: the output {rhs!r} must name distinct letters of the inputs")
    laid_out = []  # (letters, tensor) per operand, each letter once
    sizes: dict = {}  # letter -> its size (> 1 where some operand has it so; 1 broadcasts)
    for k, (sub, x) in enumerate(zip(subscripts, operands)):
        if x.ndim != len(sub):
            raise ValueError(f"einsum: operand {k} has {x.ndim} dimensions but subscripts {sub!r} name {len(sub)}")
        sub, x = _einsum_diagonal(sub, x, k)
        for c, n in zip(sub, x.shape):
            if sizes.setdefault(c, n) != n and 1 not in (sizes[c], n):
                raise ValueError(f"einsum: letter {c!r} is size {sizes[c]} in one operand and {n} in operand {k}")
            sizes[c] = n if sizes[c] == 1 else sizes[c]
        laid_out.append((sub, x))
    order = list(rhs) + sorted(set(used) - set(rhs))  # output letters first, then the summed ones
    product = None
    for sub, x in laid_out:
        own = dict(zip(sub, x.shape))
        dims = sorted(range(len(sub)), key=lambda i: order.index(sub[i]))
        x = x if dims == sorted(dims) else permute(x, dims)
        x = _reshape(x, tuple(own.get(c, 1) for c in order))
        product = x if product is None else product * x
    product = expand(product, tuple(sizes[c] for c in order))  # letters of size 1 in every operand stay 1
    summed = tuple(range(len(rhs), len(order)))
    return product.sum(dim=summed) if summed else product


def _einsum_ellipsis(equation: str, subscripts: list, rhs, operands) -> tuple:
    """'...' replaced by letters the equation does not use: operand k's '...' covers its dims the letters do
    not name, the last of the E letters of the widest '...' (dims aligned from the right, as broadcasting
    aligns them). An implicit output starts with them, as in PyTorch."""
    if "." not in equation:
        return subscripts, rhs
    counts = []
    for k, (sub, x) in enumerate(zip(subscripts, operands)):
        if sub.replace("...", "", 1).count(".") or (rhs is not None and rhs.replace("...", "", 1).count(".")):
            raise ValueError(f"einsum: '.' only as one '...' per operand and output, got {equation!r}")
        n = x.ndim - (len(sub) - 3) if "..." in sub else 0
        if n < 0:
            raise ValueError(f"einsum: operand {k} has {x.ndim} dimensions, fewer than {sub!r} names")
        counts.append(n)
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in equation][
        : builtins.max(counts)
    ]
    subscripts = [sub.replace("...", "".join(free[len(free) - n :])) for sub, n in zip(subscripts, counts)]
    if rhs is None:
        used = "".join(subscripts)
        return subscripts, "".join(free) + "".join(sorted(c for c in set(used) - set(free) if used.count(c) == 1))
    return subscripts, rhs.replace("...", "".join(free))


def _einsum_diagonal(sub: str, x: Tensor, k: int) -> tuple:
    """(sub with each letter once, x's diagonal over the dims of each repeated letter): 'iij' on x gives
    'ij' and y[i, j] = x[i, i, j], as the integer-array index x[ar_i, ar_i, ar_j] with each arange laid
    along its letter's axis of the result."""
    letters = "".join(dict.fromkeys(sub))
    if letters == sub:
        return sub, x
    for c in letters:
        n = {x.shape[i] for i, ci in enumerate(sub) if ci == c}
        if len(n) > 1:
            raise ValueError(f"einsum: letter {c!r} is repeated in operand {k} ({sub!r}) with sizes {sorted(n)}")
    index = tuple(np.arange(x.shape[i]).reshape([-1 if c == ci else 1 for c in letters]) for i, ci in enumerate(sub))
    return letters, ops.GetItem.apply(x, index=index, advanced=True)
