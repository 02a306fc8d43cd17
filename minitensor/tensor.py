"""The Tensor: a NumPy array plus the bookkeeping reverse-mode autograd needs.

This file holds the Tensor's state, its Python protocol, its autograd methods (backward, hooks, grad),
its in-place writers and its dtype conversions. The math methods come from the TensorMath mixin
(tensor_math.py), which calls ops/ and the torch.* functions (functions/); the device methods from
devices.py. The array itself is the private `_data` inside the engine and `.numpy()` outside it; `.data` is
torch's: a Tensor sharing the array, outside the graph (see `data` for the one difference, its version counter).

In-place methods (fill_, add_, __setitem__, ...) are not recorded in the graph. With grad mode on they
refuse a leaf that requires grad (as PyTorch does), a tensor in the graph (PyTorch records that change;
here it would go undifferentiated) and a view made under no_grad of a tensor that requires grad (as
PyTorch does); under no_grad they change any of them, as PyTorch does. Every one bumps the tensor's
version counter (shared with its views): a graph that saved the old values then raises at backward
instead of returning a wrong gradient (core/function.py).

Dtypes and promotion live in dtypes.py, the factories (tensor, zeros, randn, ...) in creation.py.
Mixed-dtype operands are promoted as PyTorch does (dtypes.result_type); a float operand that must
widen goes through a differentiable Cast, so a float32 input still gets a float32 gradient.
"""

from __future__ import annotations

import builtins
from functools import partial

import numpy as np

from . import devices, ops
from .arguments import (
    as_array,
    broadcasts_to,
    check_fill_value,
    normalize_dim,
    normalize_index,
    scaled,
    size_args,
    to_arguments,
)
from .autograd import ieee_quiet, leaf_delivery
from .autograd.tangents import dual_state, tangent_of
from .core import HookHandle, VersionCounter, is_grad_enabled, is_tensor_like, no_grad
from .core import Tensor as CoreTensor
from .core.tensor import wrap as core_wrap
from .devices import DeviceMethods
from .dtypes import TENSOR_TYPES, bool_, float16, float32, float64, int8, int16, int32, int64, uint8
from .functions.elementwise import clamp, div
from .functions.indexing import index_fill, scatter, scatter_add
from .functions.sampling import bernoulli_probability, draw_bernoulli
from .layout import in_memory_format, preserve_format
from .random import generator as _stream
from .tensor_math import TensorMath


class Tensor(CoreTensor, TensorMath, DeviceMethods):
    """A NumPy array that can record the operations applied to it and backpropagate through them."""

    __slots__ = ()
    __array_priority__ = 1000  # so ndarray + Tensor calls Tensor.__radd__

    def __init__(self, data, requires_grad: bool = False, dtype=None):
        arr = data._data if isinstance(data, Tensor) else as_array(data, dtype)
        if dtype is not None and arr.dtype != np.dtype(dtype):
            arr = arr.astype(dtype)
        self._data = arr
        self._grad = self.grad_fn = self._hooks = self._post_hooks = self.dual_tangent = None
        self.version_counter = VersionCounter()
        self.no_grad_view = False
        self.requires_grad = False
        if requires_grad:
            self.requires_grad_(True)

    @property
    def _version(self) -> int:
        """The number of in-place changes so far (torch's Tensor._version)."""
        return self.version_counter.value

    def bump_version(self) -> None:
        """Record an in-place change made to the array directly (optimizers, nn.init, clip_grad_norm_), so that a
        graph which saved this tensor refuses to backpropagate with the changed values."""
        self.version_counter.value += 1

    @property
    def data(self) -> Tensor:
        """torch's .data: a Tensor sharing this tensor's array, not requiring grad, with no grad_fn.

        Deviation from PyTorch, flagged: it shares this tensor's version counter too (torch's .data has its own), so
        an in-place write through it (`p._data.add_(...)`) makes a graph that saved this tensor raise at backward,
        where torch would return a wrong gradient silently. Outside a live graph such a write works as in torch."""
        t = Tensor.wrap(self._data)
        t.version_counter = self.version_counter
        return t

    @data.setter
    def data(self, value) -> None:
        """`t.data = other`: t now shares other's array, whatever its shape or dtype, as torch allows (t keeps its
        grad, hooks and version; a graph that saved t keeps the array it saved, so its gradient stays right)."""
        if not isinstance(value, Tensor):
            kind = type(value).__qualname__
            kind = kind if type(value).__module__ == "builtins" else f"{type(value).__module__}.{kind}"
            raise TypeError(f"Variable data has to be a tensor, but got {kind}")
        if self.requires_grad and value.dtype.kind not in "fc":
            raise RuntimeError(
                f"data set to a tensor that requires gradients must be floating point or complex dtype, "
                f"got {value.dtype}"
            )
        self._data = value._data

    # ------------------------------------------------------------------ attributes
    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def T(self) -> Tensor:
        if self.ndim > 2:
            raise ValueError(f"T: expected a tensor of at most 2 dimensions, got shape {self.shape}; use permute")
        return self if self.ndim < 2 else self.transpose(0, 1)

    @property
    def mT(self) -> Tensor:
        return self.transpose(-2, -1)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[normalize_dim(dim, self.ndim, "size")]

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return self._data.size

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def numpy(self) -> np.ndarray:
        """The array itself (no copy: writing it changes the tensor), as torch's; one that requires grad is
        refused, as torch refuses it, since a write there would bypass autograd's checks."""
        if self.requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if not devices.is_host(self._data):
            raise TypeError(self._not_on_host())
        return self._data

    def _not_on_host(self) -> str:
        return (
            f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor to "
            f"host memory first."
        )

    def tolist(self):
        return self._data.tolist()

    def item(self):
        if self._data.size != 1:
            raise ValueError(
                f"item(): only a tensor with one element can be converted to a Python number, "
                f"got shape {self.shape} ({self._data.size} elements)"
            )
        return self._data.reshape(()).item()

    def __array__(self, dtype=None, copy=None):
        # Deviation from PyTorch, flagged: np.asarray(t) reads a tensor that requires grad too (torch refuses it as
        # numpy() does), so that NumPy's functions and np.testing take parameters and outputs as they are
        if not devices.is_host(self._data):  # np.asarray(cuda_tensor): refused as torch refuses it
            raise TypeError(self._not_on_host())
        return self._data if dtype is None else self._data.astype(dtype)

    def __repr__(self) -> str:
        host = devices.to_host(self._data)  # one host sync for a device tensor
        body = np.array2string(host, separator=", ", precision=4, prefix="tensor(")
        extra = "" if devices.is_host(self._data) else f", device='{self.device}'"
        extra += "" if self.dtype in (float32, int64, bool_) else f", dtype={self.dtype}"
        if self.grad_fn is not None:
            extra += f", grad_fn=<{self.grad_fn.name()}>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    def __hash__(self):
        return id(self)

    def __bool__(self):
        if self._data.size != 1:
            raise ValueError(
                f"the truth value of a tensor with {self._data.size} elements is ambiguous; use .any() or .all()"
            )
        return bool(self._data.reshape(()))

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.kind not in "iu" or self._data.size != 1:
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
        t = Tensor.wrap(self._data)
        t.version_counter = self.version_counter
        return t

    def register_post_accumulate_grad_hook(self, hook):
        """hook(tensor) -> None, called on a leaf right after backward has added its gradient into .grad
        (the walk calls it as soon as that gradient is complete: how DistributedDataParallel starts an
        all-reduce while the rest of the backward runs). `remove()` on the returned handle unregisters it."""
        if not self.requires_grad:
            raise RuntimeError("register_post_accumulate_grad_hook() on a tensor that does not require grad")
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        handle = _PostHookHandle(self, "_post_hooks", hook, Tensor)
        self._post_hooks = (self._post_hooks or []) + [handle.hook]
        leaf_delivery.hook_added()  # the walk now hands over each leaf's gradient as soon as it is complete
        return handle

    # ------------------------------------------------------------------ in place, outside autograd
    # Each in-place method checks here first (with grad mode on: not a leaf that requires grad, not a tensor in the
    # graph, ...), then bumps the version counter, so that a graph which saved the old values raises at backward.
    def _check_inplace(self, op: str, *operands) -> None:
        if is_grad_enabled():
            self._check_inplace_in_grad_mode(op, operands)
        # Deviation from PyTorch, flagged: PyTorch's forward mode follows in-place ops; here they write the array
        # outside every rule, so a dual tensor (or operand) would keep a stale tangent: refused instead.
        if dual_state.level is not None and builtins.any(
            isinstance(o, Tensor) and tangent_of(o) is not None for o in (self, *operands)
        ):
            raise RuntimeError(
                f"{op}: in-place change of a dual tensor (one with a forward-mode tangent); forward mode does not "
                f"follow in-place writes here: use the out-of-place form"
            )

    def _check_inplace_in_grad_mode(self, op: str, operands: tuple) -> None:
        """The in-place changes refused with grad mode on; under no_grad each of them is allowed, as in PyTorch."""
        if self.grad_fn is not None:
            # Deviation from PyTorch, flagged: PyTorch records an in-place op on a non-leaf in the graph (and refuses
            # one on a view of a leaf); here in-place ops write the array outside the graph, so it is refused
            raise RuntimeError(
                f"{op}: in-place change of a tensor in the graph (a non-leaf, made by {self.grad_fn.name()}) with "
                f"grad mode on: minitensor does not record in-place ops, so the change would not be differentiated. "
                f"Use the out-of-place form (y = h.mul(2), mt.where, masked_fill, ...) to differentiate it; a "
                f"change the gradient must not see goes inside mt.no_grad()"
            )
        if self.requires_grad:
            raise RuntimeError(
                f"{op}: in-place change of a leaf tensor that requires grad (PyTorch refuses it too); wrap it in "
                f"mt.no_grad() to change its values outside the graph, as an optimizer step does"
            )
        if self.no_grad_view:
            raise RuntimeError(
                f"{op}: in-place change, with grad mode on, of a view made under no_grad of a tensor that requires "
                f"grad (PyTorch forbids it too: it is ambiguous); make the change inside mt.no_grad() as well"
            )
        # Deviation from PyTorch, flagged: PyTorch differentiates an in-place op with respect to a tensor
        # operand (x[i] = v, x.copy_(v), x.add_(v) send v a gradient); these writes go to the array outside the
        # graph, so an operand that requires grad is refused rather than silently taken as a constant.
        if builtins.any(isinstance(o, Tensor) and o.requires_grad for o in operands):
            raise RuntimeError(
                f"{op}: an operand requires grad, and minitensor's in-place ops do not differentiate it; use the "
                f"out-of-place form (mt.where, masked_fill, +, ...), or pass operand.detach() to use it as a constant"
            )

    def _write(self, op: str, index, value) -> Tensor:
        """self._data[index] = value, broadcast; errors name the op and both shapes."""
        self._check_inplace(op, value)
        check_fill_value(value, self.dtype, op)
        value = self._beside(value, op)
        try:
            with ieee_quiet():
                self._data[index] = value
        except (ValueError, TypeError) as e:
            raise ValueError(
                f"{op}: cannot write a value of shape {value.shape if hasattr(value, 'shape') else np.shape(value)} "
                f"into a {self.dtype} tensor of "
                f"shape {self.shape} at {index!r}: {e}"
            ) from None
        self.version_counter.value += 1
        return self

    def _update(self, op: str, ufunc, other) -> Tensor:
        """self = ufunc(self, other) in place: the result keeps this tensor's shape and dtype."""
        self._check_inplace(op, other)
        o = self._beside(other, op)
        try:
            with ieee_quiet():
                ufunc(self._data, o, out=self._data, casting="same_kind")
        except (ValueError, TypeError):
            shape, dtype = (o.shape, o.dtype) if hasattr(o, "dtype") else (np.shape(o), np.asarray(o).dtype)
            raise ValueError(
                f"{op}: an operand of shape {shape} and dtype {dtype} cannot "
                f"update a {self.dtype} tensor of shape {self.shape} in place"
            ) from None
        self.version_counter.value += 1
        return self

    def _beside(self, value, op: str):
        """A value an in-place op writes into this tensor, as an array on this tensor's device (a number as it
        is): plain data (lists, NumPy arrays) is copied over, and so is a 0-d CPU tensor, as torch lets a CPU
        scalar meet CUDA tensors; a tensor on another device is torch's mixed-device error."""
        if isinstance(value, Tensor):
            if type(value._data) is type(self._data) or value.device == self.device:
                return value._data
            if value.device == devices.CPU and value.ndim == 0:
                return devices.to_device(value._data, self.device)
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, {self.device} "
                f"and {value.device}! ({op}: move the operand with .to({str(self.device)!r}))"
            )
        if type(self._data) is np.ndarray or isinstance(value, (builtins.int, builtins.float, builtins.bool)):
            return value
        return devices.to_device(value if devices.is_array(value) else np.asarray(value), self.device)

    def zero_(self) -> Tensor:
        return self._write("zero_", Ellipsis, 0)

    def fill_(self, value) -> Tensor:
        if isinstance(value, Tensor) and value.ndim == 0 and type(value._data) is not type(self._data):
            value = value.item()  # a 0-d value from another device: read as a number (one sync), as torch's fill_
        return self._write("fill_", Ellipsis, value)

    def add_(self, other, alpha=1) -> Tensor:
        self._check_inplace("add_", other)  # before other * alpha, which would record a graph
        return self._update("add_", np.add, scaled(other, alpha))

    def sub_(self, other, alpha=1) -> Tensor:
        self._check_inplace("sub_", other)
        return self._update("sub_", np.subtract, scaled(other, alpha))

    def mul_(self, other) -> Tensor:
        return self._update("mul_", np.multiply, other)

    def div_(self, other, *, rounding_mode=None) -> Tensor:
        if rounding_mode is None:
            return self._update("div_", np.true_divide, other)
        self._check_inplace("div_", other)
        with no_grad():
            return self._write("div_", Ellipsis, div(self, other, rounding_mode=rounding_mode))

    def copy_(self, src) -> Tensor:
        """self = src, cast and broadcast; src may live on another device (copied over, as torch's copy_)."""
        self._check_inplace("copy_", src)
        arr = src._data if isinstance(src, Tensor) else src if devices.is_array(src) else np.asarray(src)
        arr = devices.to_device(arr, self.device)
        if not np.can_cast(arr.dtype, self.dtype, casting="same_kind"):
            raise ValueError(f"copy_: cannot copy {arr.dtype} {arr.shape} into {self.dtype} {self.shape}")
        return self._write("copy_", Ellipsis, arr)

    def masked_fill_(self, mask, value) -> Tensor:
        self._check_inplace("masked_fill_", value)
        m = self._beside(mask if isinstance(mask, Tensor) else np.asarray(mask), "masked_fill_")
        if m.dtype != bool_:
            raise TypeError(f"masked_fill_: mask must be a bool tensor, got {m.dtype}")
        if not broadcasts_to(m.shape, self.shape):
            raise ValueError(
                f"masked_fill_: mask of shape {m.shape} does not broadcast to the tensor's shape {self.shape}"
            )
        return self._write("masked_fill_", np.broadcast_to(m, self.shape), value)

    def scatter_(self, dim, index, src=None, *, value=None, reduce=None) -> Tensor:
        self._check_inplace("scatter_", src, value)
        with no_grad():  # the out-of-place scatter, its checks and rules, written back
            return self._write("scatter_", Ellipsis, scatter(self, dim, index, src, value=value, reduce=reduce))

    def scatter_add_(self, dim, index, src) -> Tensor:
        self._check_inplace("scatter_add_", src)
        with no_grad():
            return self._write("scatter_add_", Ellipsis, scatter_add(self, dim, index, src))

    def index_fill_(self, dim, index, value) -> Tensor:
        self._check_inplace("index_fill_", value)
        with no_grad():
            return self._write("index_fill_", Ellipsis, index_fill(self, dim, index, value))

    def clamp_(self, min=None, max=None) -> Tensor:
        if min is None and max is None:
            raise ValueError("clamp_: at least one of min and max must be given")
        self._check_inplace("clamp_", min, max)
        with no_grad():  # the out-of-place clamp, its NaN and tie rules, written back
            return self._write("clamp_", Ellipsis, clamp(self, min, max))

    def uniform_(self, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:
        # drawn on the host from the one stream (random.py), then copied: the same numbers on every device. Checked
        # first, so that a refused change draws nothing
        self._check_inplace("uniform_")
        return self._write("uniform_", Ellipsis, _stream("uniform_", generator).uniform(a, b, self.shape))

    def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
        self._check_inplace("normal_")
        return self._write("normal_", Ellipsis, _stream("normal_", generator).normal(mean, std, self.shape))

    def bernoulli_(self, p=0.5, *, generator=None) -> Tensor:
        """Each entry 1 with probability p (a number, or a tensor of probabilities broadcasting to self), else 0."""
        self._check_inplace("bernoulli_")
        probs = bernoulli_probability("bernoulli_", p)
        return self._write(
            "bernoulli_", Ellipsis, draw_bernoulli("bernoulli_", probs, self.shape, self.dtype, devices.CPU, generator)
        )

    def __setitem__(self, index, value) -> None:
        try:  # an index out of range, on any device: NumPy's IndexError, naming the op and the shape
            self._write("__setitem__", normalize_index(index, self._data)[0], value)
        except IndexError as e:
            raise IndexError(f"__setitem__ on a tensor of shape {self.shape}: {e}") from None

    # ------------------------------------------------------------------ dtype and device
    def to(self, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=preserve_format):
        """This tensor in `dtype` and on `device`, in torch's three forms: to(dtype, non_blocking, copy),
        to(device, dtype, non_blocking, copy) and to(other, non_blocking, copy). Differentiable between float dtypes
        and between devices (ops.ToDevice); a tensor already so is returned as it is, unless copy=True. non_blocking
        changes nothing (every copy completes before the call returns); memory_format: see layout.py."""
        if len(args) == 1 and isinstance(args[0], str) and args[0].partition(":")[0] in ("cpu", "cuda", "mps"):
            device = args[0]  # x.to(device): every mask and dropout keep calls it, so it comes first
        elif len(args) == 1 and isinstance(args[0], builtins.int) and not isinstance(args[0], builtins.bool):
            device = args[0]  # x.to(0): a CUDA index, as torch reads it
        elif len(args) == 1 and not is_tensor_like(args[0]):  # x.to(dtype)
            dtype = args[0]
        elif args:
            dtype, device, non_blocking, copy = to_arguments(args, dtype, device, non_blocking, copy)
        if device == "cpu" and dtype is None and type(self._data) is np.ndarray and memory_format is preserve_format:
            return ops.Clone.apply(self) if copy else self  # the common x.to("cpu") of a CPU tensor, first
        if device is not None:
            device = devices.resolve(device, "to")
        out = self
        if dtype is not None and np.dtype(dtype) != self.dtype:
            dtype = np.dtype(dtype)
            if dtype.kind == "f" and self.dtype.kind == "f":
                out = ops.Cast.apply(self, dtype=dtype)
            else:
                with ieee_quiet():  # NaN or inf to an integer dtype: NumPy's value, no warning
                    out = Tensor.wrap(self._data.astype(dtype))
        if device is not None and out.device != device:
            out = ops.ToDevice.apply(out, device=device)
        if memory_format is not preserve_format:
            out = in_memory_format(out, memory_format, "to")
        return ops.Clone.apply(out) if copy and out is self else out

    def float(self, memory_format=preserve_format) -> Tensor:
        return self.to(dtype=float32, memory_format=memory_format)

    def double(self, memory_format=preserve_format) -> Tensor:
        return self.to(dtype=float64, memory_format=memory_format)

    def long(self, memory_format=preserve_format) -> Tensor:
        return self.to(dtype=int64, memory_format=memory_format)

    def int(self, memory_format=preserve_format) -> Tensor:
        return self.to(dtype=int32, memory_format=memory_format)

    def bool(self, memory_format=preserve_format) -> Tensor:
        return self.to(dtype=bool_, memory_format=memory_format)

    def half(self, memory_format=preserve_format) -> Tensor:
        return self.to(dtype=float16, memory_format=memory_format)

    def short(self, memory_format=preserve_format) -> Tensor:
        return self.to(dtype=int16, memory_format=memory_format)

    def char(self, memory_format=preserve_format) -> Tensor:
        return self.to(dtype=int8, memory_format=memory_format)

    def byte(self, memory_format=preserve_format) -> Tensor:
        return self.to(dtype=uint8, memory_format=memory_format)

    def type(self, dtype=None, non_blocking=False):
        """Without dtype, the legacy type name ('torch.FloatTensor'); with one (a dtype or such a name), this
        tensor in it, as torch's."""
        if dtype is None:
            prefix = "torch." if self.device == devices.CPU else "torch.cuda."
            return prefix + TENSOR_TYPES[self.dtype]
        if isinstance(dtype, str):
            names = {f"torch.{name}": dt for dt, name in TENSOR_TYPES.items()}
            if dtype not in names:
                raise ValueError(f"type: unknown tensor type {dtype!r}; expected one of {sorted(names)}")
            dtype = names[dtype]
        return self.to(dtype=getattr(dtype, "dtype", dtype))

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)

    def is_floating_point(self) -> bool:
        return self.dtype.kind == "f"

    def clone(self) -> Tensor:
        return ops.Clone.apply(self)

    def contiguous(self) -> Tensor:
        return self if self._data.flags.c_contiguous else ops.Clone.apply(self)

    def new_tensor(self, data, dtype=None, requires_grad=False) -> Tensor:
        """A copy of `data` in this tensor's dtype (or `dtype`) on this tensor's device, as torch's new_tensor."""
        data = data._data if isinstance(data, Tensor) else data
        data = devices.to_host(data) if devices.is_array(data) else data
        arr = np.array(data, dtype=self.dtype if dtype is None else np.dtype(dtype))
        return Tensor(devices.to_device(arr, self.device), requires_grad=requires_grad)

    def new_full(self, size, fill_value, dtype=None, requires_grad=False) -> Tensor:
        return self.new_tensor(np.full(size_args((size,), "new_full"), fill_value), dtype, requires_grad)

    def new_zeros(self, *size, dtype=None, requires_grad=False) -> Tensor:
        return self.new_full(size_args(size, "new_zeros"), 0, dtype, requires_grad)

    def new_ones(self, *size, dtype=None, requires_grad=False) -> Tensor:
        return self.new_full(size_args(size, "new_ones"), 1, dtype, requires_grad)

    def new_empty(self, *size, dtype=None, requires_grad=False) -> Tensor:
        return self.new_full(size_args(size, "new_empty"), 0, dtype, requires_grad)  # zeros: never garbage


# Ops build their results as this class, whatever their inputs' class (a Parameter's product is a plain Tensor)
Tensor.wrap = staticmethod(partial(core_wrap, Tensor))


class _PostHookHandle(HookHandle):
    """A registered post-accumulate-grad hook; removing it may end the walk's early delivery of leaf gradients."""

    def remove(self) -> None:
        if self.hook in (self._holder._post_hooks or ()):
            leaf_delivery.hook_removed()
        super().remove()


# ---------------------------------------------------------------------- helpers behind the methods
