"""A fake CUDA device for CI: NumPy arrays behind a wall that is stricter than CuPy's.

The engine runs on CuPy the way it runs on NumPy: every formula goes through the input array's own
library. What breaks on a GPU is the code that quietly makes a host array (`np.asarray(result)`, an
`np.ones` seed) or asks whether something is an `np.ndarray`. A machine without a GPU cannot see
those mistakes, so this module plays the device: `FakeArray` holds a NumPy array and refuses

- implicit conversion to NumPy (`np.asarray(fake)` raises, as CuPy's does);
- NumPy operands: `fake + host_array` raises, even where CuPy would copy a 0-d host array over;
- `isinstance(fake, np.ndarray)`: it is not one, so a check written for NumPy fails loudly;
- NumPy scalars as results: a reduction gives a 0-d FakeArray, as CuPy gives a 0-d device array;
- an axis on a 0-d array in a reduction: NumPy lets `x.max(axis=0)` through on a 0-d array, CuPy raises
  AxisError (the H200 run of the op table found softmax of a 0-d tensor that way).

Every read of a value to the host (`float(x)`, `bool(x)`, `x.item()`, `x.get()`, `asnumpy`, printing)
counts as one host sync (`syncs()`), so a test can pin how often a training step waits on the device.

The module itself stands in for `cupy`: `fakecuda.zeros`, `fakecuda.asarray`, `fakecuda.asnumpy`,
`fakecuda.ndarray`, and every other NumPy function by name, each returning FakeArrays. NumPy's own
functions and ufuncs also accept FakeArrays (through `__array_function__` and `__array_ufunc__`, as
they accept CuPy arrays), so `np.exp(fake)` is a FakeArray. It has no `random`: the engine draws on
the host and copies over, so that one seed gives the same numbers on every device.
"""

from __future__ import annotations

import builtins
import threading

import numpy as np

__all__ = ["FakeArray", "asarray", "asnumpy", "ndarray", "syncs", "reset_syncs", "count_syncs", "Device"]


class _Syncs(threading.local):
    count = 0


_SYNCS = _Syncs()


def syncs() -> int:
    """The host syncs counted so far on this thread."""
    return _SYNCS.count


def reset_syncs() -> None:
    _SYNCS.count = 0


class count_syncs:
    """`with count_syncs() as c: ...` then `c.count`: the host syncs inside the block."""

    def __enter__(self):
        self.start = _SYNCS.count
        self.count = 0
        return self

    def __exit__(self, *exc):
        self.count = _SYNCS.count - self.start
        return False


def _sync() -> None:
    _SYNCS.count += 1


class Device:
    """cupy.cuda.Device's face: `.id`. The fake has one device, id 0."""

    def __init__(self, id: int = 0):
        self.id = id

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(("fakecuda", self.id))

    def __repr__(self):
        return f"<fakecuda Device {self.id}>"


DEVICE = Device(0)


def _refuse_host(what: str):
    raise TypeError(
        f"fakecuda: {what} is a NumPy array, but the other operands live on the (fake) CUDA device; "
        "move it with xp.asarray(...) first (CuPy refuses NumPy operands too)"
    )


def _unwrap(obj, where: str = "an operand"):
    """The NumPy array inside a FakeArray; a host array anywhere in `obj` is refused."""
    if type(obj) is FakeArray:
        return obj._a
    if isinstance(obj, np.ndarray):
        _refuse_host(where)
    if type(obj) in (tuple, list):
        return type(obj)(_unwrap(o, where) for o in obj)
    if type(obj) is dict:
        return {k: _unwrap(v, where) for k, v in obj.items()}
    return obj


def _wrap(obj):
    """NumPy results as device values: arrays and NumPy scalars become FakeArrays (a 0-d one for a scalar)."""
    if isinstance(obj, np.ndarray):
        return FakeArray(obj)
    if isinstance(obj, np.generic):
        return FakeArray(np.asarray(obj))
    if type(obj) in (tuple, list):
        return type(obj)(_wrap(o) for o in obj)
    if isinstance(obj, tuple):  # a named tuple: np.linalg.svd's SVDResult (CuPy's svd gives a plain tuple)
        return type(obj)(*(_wrap(o) for o in obj))
    return obj


# Reductions that take axis=: NumPy accepts axis 0 or -1 on a 0-d array, CuPy normalizes the axis against ndim 0
# and raises. The fake raises as CuPy does.
_REDUCTIONS = frozenset(
    "sum prod max min amax amin mean std var any all argmax argmin cumsum cumprod nansum nanmax nanmin "
    "count_nonzero ptp average median logsumexp".split()
)


def _check_axis(name: str, a, args, kwargs) -> None:
    """CuPy's AxisError for a reduction over an axis of a 0-d array (`a` the NumPy array inside the fake)."""
    if name not in _REDUCTIONS or getattr(a, "ndim", None) != 0:
        return
    axis = kwargs.get("axis", args[0] if args else None)
    if axis is None or axis == ():
        return
    raise getattr(np, "exceptions", np).AxisError(  # (np.AxisError before NumPy 1.25)
        f"fakecuda: {name} over axis {axis} of a 0-d array: CuPy refuses any axis on a 0-d array (NumPy allows 0 "
        "and -1); reduce with axis=None"
    )


def _binary(ufunc, reflected: bool = False):
    def method(self, other):
        if not isinstance(
            other, (FakeArray, builtins.int, builtins.float, builtins.complex, builtins.bool, np.generic)
        ):
            if isinstance(other, np.ndarray):
                _refuse_host("the other operand")
            return NotImplemented  # a Tensor, say: let its reflected method answer
        a, b = (other, self) if reflected else (self, other)
        return ufunc(a, b)

    return method


def _inplace(ufunc):
    def method(self, other):
        if isinstance(other, np.ndarray):
            _refuse_host("the other operand")
        if not isinstance(
            other, (FakeArray, builtins.int, builtins.float, builtins.complex, builtins.bool, np.generic)
        ):
            return NotImplemented
        ufunc(self, other, out=self)
        return self

    return method


# What a ufunc may meet: device arrays, numbers, index tuples (ufunc.at); a host array among them is refused
# by _unwrap with a message, anything else (a Tensor) gets NotImplemented.
_DEVICE_OPERANDS = (
    # FakeArray is added below, once defined
    type(None),
    builtins.int,
    builtins.float,
    builtins.complex,
    builtins.bool,
    np.generic,
    np.ndarray,
    tuple,
    list,
    slice,
)

# The host reads: each is one sync. The rest of ndarray's methods are forwarded and their results wrapped.
_HOST_METHODS = {"item", "tolist", "tobytes", "tofile", "dump", "dumps"}
_REFUSED = {"ctypes", "view"}
_HIDDEN = {"__array_interface__", "__array_struct__"}  # absent, so np.asarray reaches __array__ and its message


class FakeArray:
    """A NumPy array posing as a device array (see the module docstring). Not an np.ndarray."""

    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 100  # below Tensor's 1000, so Tensor's reflected operators win

    def __init__(self, a: np.ndarray):
        self._a = a

    # --- the wall
    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "fakecuda: implicit conversion to a NumPy array is not allowed (as in CuPy); "
            "use .get() or asnumpy(...) to copy to the host explicitly"
        )

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if any(not isinstance(o, _DEVICE_OPERANDS) for o in (*inputs, *kwargs.get("out", ()))):
            return NotImplemented  # a Tensor, say: its own operators answer
        if method in ("reduce", "accumulate") and type(inputs[0]) is FakeArray:
            _check_axis("sum", inputs[0]._a, inputs[1:], kwargs)  # any ufunc's reduce: checked as sum's
        out = getattr(ufunc, method)(
            *_unwrap(inputs, f"an operand of np.{ufunc.__name__}"), **_unwrap(kwargs, "out= or where=")
        )
        if "out" in kwargs and method != "at":
            outs = kwargs["out"]
            return outs[0] if len(outs) == 1 else outs
        return _wrap(out)

    def __array_function__(self, func, types, args, kwargs):
        if not all(issubclass(t, (FakeArray, np.ndarray)) for t in types):
            return NotImplemented
        if args and type(args[0]) is FakeArray:
            _check_axis(func.__name__, args[0]._a, args[1:], kwargs)
        return _wrap(
            func(*_unwrap(args, f"an argument of np.{func.__name__}"), **_unwrap(kwargs, "a keyword argument"))
        )

    def get(self, stream=None, order="C", out=None) -> np.ndarray:
        """The host copy (cupy.ndarray.get): one sync."""
        _sync()
        return self._a.copy(order=order)

    # --- what an array is
    @property
    def shape(self):
        return self._a.shape

    @shape.setter
    def shape(self, value):
        self._a.shape = value

    @property
    def dtype(self):
        return self._a.dtype

    @property
    def ndim(self):
        return self._a.ndim

    @property
    def size(self):
        return self._a.size

    @property
    def nbytes(self):
        return self._a.nbytes

    @property
    def itemsize(self):
        return self._a.itemsize

    @property
    def strides(self):
        return self._a.strides

    @property
    def flags(self):
        return self._a.flags

    @property
    def device(self) -> Device:
        return DEVICE

    @property
    def T(self):
        return FakeArray(self._a.T)

    @property
    def mT(self):
        return FakeArray(np.swapaxes(self._a, -1, -2))

    @property
    def real(self):
        return FakeArray(self._a.real)

    @property
    def imag(self):
        return FakeArray(self._a.imag)

    @property
    def base(self):
        return None if self._a.base is None else FakeArray(self._a.base)

    def __getattr__(self, name):
        if name in _HIDDEN:
            raise AttributeError(name)
        if name in _REFUSED:
            raise TypeError(f"fakecuda: .{name} exposes host memory; a device array has none")
        value = getattr(self._a, name)
        if name in _HOST_METHODS:

            def host_read(*args, **kwargs):
                _sync()
                return value(*args, **kwargs)

            return host_read
        if callable(value):

            def forwarded(*args, **kwargs):
                _check_axis(name, self._a, args, kwargs)
                return _wrap(
                    value(*_unwrap(args, f"an argument of .{name}"), **_unwrap(kwargs, f"an argument of .{name}"))
                )

            return forwarded
        return _wrap(value)

    # --- indexing: a FakeArray index is a device index; a host index array is refused
    def __getitem__(self, key):
        return _wrap(self._a[_unwrap(key, "an index")])

    def __setitem__(self, key, value):
        self._a[_unwrap(key, "an index")] = _unwrap(value, "the value written")

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (FakeArray(np.asarray(row)) for row in self._a)

    # --- host reads
    def __bool__(self):
        _sync()
        return builtins.bool(self._a)

    def __float__(self):
        _sync()
        return builtins.float(self._a)

    def __int__(self):
        _sync()
        return builtins.int(self._a)

    def __index__(self):
        _sync()
        return self._a.__index__()

    def __complex__(self):
        _sync()
        return builtins.complex(self._a)

    def __repr__(self):
        _sync()
        return "fakecuda." + repr(self._a)

    def __str__(self):
        _sync()
        return str(self._a)

    def __format__(self, spec):
        _sync()
        return format(self._a, spec)

    # --- copies and pickling stay on the device
    def __copy__(self):
        return FakeArray(self._a.copy())

    def __deepcopy__(self, memo):
        return FakeArray(self._a.copy())

    def __reduce__(self):
        return (FakeArray, (self._a,))

    __hash__ = None

    # --- arithmetic through the ufuncs
    __add__, __radd__, __iadd__ = _binary(np.add), _binary(np.add, True), _inplace(np.add)
    __sub__, __rsub__, __isub__ = _binary(np.subtract), _binary(np.subtract, True), _inplace(np.subtract)
    __mul__, __rmul__, __imul__ = _binary(np.multiply), _binary(np.multiply, True), _inplace(np.multiply)
    __truediv__, __rtruediv__, __itruediv__ = (
        _binary(np.true_divide),
        _binary(np.true_divide, True),
        _inplace(np.true_divide),
    )
    __floordiv__, __rfloordiv__, __ifloordiv__ = (
        _binary(np.floor_divide),
        _binary(np.floor_divide, True),
        _inplace(np.floor_divide),
    )
    __mod__, __rmod__, __imod__ = _binary(np.remainder), _binary(np.remainder, True), _inplace(np.remainder)
    __pow__, __rpow__, __ipow__ = _binary(np.power), _binary(np.power, True), _inplace(np.power)
    __matmul__, __rmatmul__ = _binary(np.matmul), _binary(np.matmul, True)
    __and__, __rand__, __iand__ = _binary(np.bitwise_and), _binary(np.bitwise_and, True), _inplace(np.bitwise_and)
    __or__, __ror__, __ior__ = _binary(np.bitwise_or), _binary(np.bitwise_or, True), _inplace(np.bitwise_or)
    __xor__, __rxor__, __ixor__ = _binary(np.bitwise_xor), _binary(np.bitwise_xor, True), _inplace(np.bitwise_xor)
    __lshift__, __rlshift__ = _binary(np.left_shift), _binary(np.left_shift, True)
    __rshift__, __rrshift__ = _binary(np.right_shift), _binary(np.right_shift, True)
    __lt__, __le__, __gt__, __ge__ = (
        _binary(np.less),
        _binary(np.less_equal),
        _binary(np.greater),
        _binary(np.greater_equal),
    )
    __eq__, __ne__ = _binary(np.equal), _binary(np.not_equal)

    def __neg__(self):
        return np.negative(self)

    def __pos__(self):
        return np.positive(self)

    def __abs__(self):
        return np.absolute(self)

    def __invert__(self):
        return np.invert(self)


_DEVICE_OPERANDS = (FakeArray, *_DEVICE_OPERANDS)
ndarray = FakeArray


def asarray(obj, dtype=None, order=None) -> FakeArray:
    """Onto the device: a host array, a list or a number is copied over (a transfer, not a sync);
    a FakeArray is returned as it is, or cast."""
    if type(obj) is FakeArray:
        return obj if dtype is None or obj.dtype == np.dtype(dtype) else FakeArray(obj._a.astype(dtype))
    return FakeArray(np.array(_unwrap(obj) if type(obj) in (tuple, list) else obj, dtype=dtype, order=order or "K"))


array = asarray


def asnumpy(a, stream=None, order="C", out=None) -> np.ndarray:
    """cupy.asnumpy: the host copy of a device array (one sync); a host value passes through."""
    if type(a) is FakeArray:
        return a.get(order=order)
    return np.asarray(a, order=order)


def get_array_module(*args):
    return __import__(__name__, fromlist=["_"]) if any(type(a) is FakeArray for a in args) else np


def _device_function(func):
    """A NumPy function as the device library's: device operands only, device results."""

    def device_function(*args, **kwargs):
        return _wrap(func(*_unwrap(args, f"an argument of {func.__name__}"), **_unwrap(kwargs, "a keyword argument")))

    device_function.__name__ = func.__name__
    device_function.__doc__ = f"fakecuda.{func.__name__}: NumPy's, on device arrays."
    return device_function


def __getattr__(name: str):
    """fakecuda.<name>: NumPy's ufuncs as they are (they dispatch on FakeArrays), its dtypes and constants
    as they are, and every other function wrapped to take and give device arrays. No `random`: draws
    are made on the host (minitensor/random.py) and copied over."""
    if name == "random" or name.startswith("__"):
        raise AttributeError(f"module 'fakecuda' has no attribute {name!r}")
    value = getattr(np, name)
    if isinstance(value, np.ufunc) or isinstance(value, type) or not callable(value):
        return value
    return _device_function(value)
