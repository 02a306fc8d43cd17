"""Parameter initialisation, in place, PyTorch's names and formulas (`torch.nn.init`).

Every function writes into `tensor._data` with numbers drawn from the one seeded generator
`mt.random.generator(op)`, records no graph, and returns the tensor. The numbers are always drawn on the
host and then copied to the tensor's device, so one seed gives the same weights on every device.
The streams differ from PyTorch's (see minitensor/random.py): equal seeds give equal
*distributions*, not equal numbers; parity checks copy weights instead.

    fan_in  = shape[1] * prod(shape[2:]),   fan_out = shape[0] * prod(shape[2:])
    xavier_uniform_:  U(-a, a),  a = gain * sqrt(6 / (fan_in + fan_out))
    xavier_normal_:   N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))
    kaiming_uniform_: U(-b, b),  b = gain * sqrt(3 / fan),  gain = calculate_gain(nonlinearity, a)
    kaiming_normal_:  N(0, std^2), std = gain / sqrt(fan)
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..devices import array_module
from ..random import generator as _stream
from ..tensor import Tensor

__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "constant_",
    "zeros_",
    "ones_",
    "eye_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "trunc_normal_",
]


def _array(fn: str, tensor) -> np.ndarray:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"init.{fn}: expected a Tensor, got {type(tensor).__name__}")
    return tensor._data


def _float_array(fn: str, tensor) -> np.ndarray:
    a = _array(fn, tensor)
    if a.dtype.kind != "f":
        raise TypeError(f"init.{fn}: expected a floating-point Tensor, got dtype {a.dtype}")
    return a


def _set(tensor, values) -> Tensor:
    """tensor's array = values, in place, recorded as an in-place change (its version is bumped).
    A host array of values is cast to the tensor's dtype on the host, then copied to its device."""
    arr = tensor._data
    if isinstance(values, np.ndarray):
        values = array_module(arr).asarray(values.astype(arr.dtype, copy=False))
    arr[...] = values
    tensor.bump_version()
    return tensor


def _number(fn: str, name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"init.{fn}: {name} must be a real number, got {type(v).__name__}")
    return float(v)


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for a nonlinearity (torch.nn.init.calculate_gain's table)."""
    linear = (
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "sigmoid",
    )
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else _number("calculate_gain", "param", param)
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(
        f"calculate_gain: unsupported nonlinearity {nonlinearity!r}; expected one of "
        f"{list(linear) + ['tanh', 'relu', 'leaky_relu', 'selu']}"
    )


def _calculate_fan_in_and_fan_out(tensor) -> tuple[int, int]:
    shape = tensor.shape
    if len(shape) < 2:
        raise ValueError(
            f"fan in and fan out can not be computed for a tensor with fewer than 2 "
            f"dimensions (got shape {tuple(shape)})"
        )
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    """tensor ~ U(a, b)."""
    arr = _float_array("uniform_", tensor)
    a, b = _number("uniform_", "a", a), _number("uniform_", "b", b)
    if a > b:
        raise ValueError(f"init.uniform_: expected a <= b, got a={a}, b={b}")
    return _set(tensor, _stream("init.uniform_", gen=generator).uniform(a, b, size=arr.shape))


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    """tensor ~ N(mean, std^2)."""
    arr = _float_array("normal_", tensor)
    mean, std = _number("normal_", "mean", mean), _number("normal_", "std", std)
    if std < 0:
        raise ValueError(f"init.normal_: std must be >= 0, got {std}")
    return _set(tensor, _stream("init.normal_", gen=generator).normal(mean, std, size=arr.shape))


def trunc_normal_(tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, generator=None):
    """tensor ~ N(mean, std^2) restricted to [a, b] (redrawing values outside, not clipping)."""
    arr = _float_array("trunc_normal_", tensor)
    if not a < b:
        raise ValueError(f"init.trunc_normal_: expected a < b, got a={a}, b={b}")
    gen = _stream("init.trunc_normal_", gen=generator)
    out = gen.normal(mean, std, size=arr.shape)
    bad = (out < a) | (out > b)
    while bad.any():
        out[bad] = gen.normal(mean, std, size=int(bad.sum()))
        bad = (out < a) | (out > b)
    return _set(tensor, out)


def constant_(tensor, val: float):
    """tensor = val everywhere."""
    _array("constant_", tensor)
    return _set(tensor, val)


def zeros_(tensor):
    """tensor = 0."""
    _array("zeros_", tensor)
    return _set(tensor, 0)


def ones_(tensor):
    """tensor = 1."""
    _array("ones_", tensor)
    return _set(tensor, 1)


def eye_(tensor):
    """tensor = identity (2-D only)."""
    arr = _array("eye_", tensor)
    if arr.ndim != 2:
        raise ValueError(f"init.eye_: only 2-D tensors are supported, got shape {arr.shape}")
    return _set(tensor, np.eye(*arr.shape, dtype=arr.dtype))


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    """Glorot: U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))."""
    _float_array("xavier_uniform_", tensor)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = _number("xavier_uniform_", "gain", gain) * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    """Glorot: N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))."""
    _float_array("xavier_normal_", tensor)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = _number("xavier_normal_", "gain", gain) * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _kaiming_std(fn, tensor, a, mode, nonlinearity) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"init.{fn}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    if fan == 0:
        raise ValueError(f"init.{fn}: cannot initialise a tensor with zero {mode} (shape {tuple(tensor.shape)})")
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None):
    """He: U(-b, b), b = sqrt(3) * gain / sqrt(fan). With a=sqrt(5) (nn.Linear's default) b = 1/sqrt(fan_in)."""
    _float_array("kaiming_uniform_", tensor)
    bound = math.sqrt(3.0) * _kaiming_std("kaiming_uniform_", tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None):
    """He: N(0, std^2), std = gain / sqrt(fan)."""
    _float_array("kaiming_normal_", tensor)
    return normal_(tensor, 0.0, _kaiming_std("kaiming_normal_", tensor, a, mode, nonlinearity), generator)
