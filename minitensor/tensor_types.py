"""torch's legacy tensor types: torch.FloatTensor, torch.LongTensor, ... as constructors and isinstance checks.

`mt.LongTensor([1, 2])` is mt.tensor([1, 2], dtype=mt.int64); `mt.FloatTensor(2, 3)` a (2, 3) tensor of that
dtype (zeros where torch's is uninitialised); `isinstance(x, mt.LongTensor)` asks for a CPU tensor of that dtype.
"""

from __future__ import annotations

import numbers

from . import devices
from .creation import tensor, zeros
from .dtypes import TENSOR_TYPES
from .tensor import Tensor


class TensorType(type):
    """The metaclass of the legacy types: calling one makes a tensor of its dtype; isinstance checks the dtype."""

    dtype = None

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and obj.device == devices.CPU

    def __call__(cls, *args):
        if len(args) == 1 and not isinstance(args[0], numbers.Integral):
            data = args[0]
            return tensor(data._data if isinstance(data, Tensor) else data, dtype=cls.dtype)
        if not all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
            raise TypeError(f"{cls.__name__}: expected data (a list, an array) or sizes, got {args!r}")
        return zeros(*args, dtype=cls.dtype) if args else zeros(0, dtype=cls.dtype)


def _make(dtype, name: str) -> type:
    return TensorType(name, (), {"dtype": dtype, "__doc__": f"torch.{name}: tensors of dtype {dtype}."})


_TYPES = {name: _make(dt, name) for dt, name in TENSOR_TYPES.items()}
FloatTensor, DoubleTensor, HalfTensor = _TYPES["FloatTensor"], _TYPES["DoubleTensor"], _TYPES["HalfTensor"]
LongTensor, IntTensor, ShortTensor = _TYPES["LongTensor"], _TYPES["IntTensor"], _TYPES["ShortTensor"]
CharTensor, ByteTensor, BoolTensor = _TYPES["CharTensor"], _TYPES["ByteTensor"], _TYPES["BoolTensor"]
