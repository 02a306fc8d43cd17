"""`Parameter`: the Tensor that a Module registers as learnable, as torch.nn.parameter has it."""

from __future__ import annotations

import numpy as np

from ..devices import is_array
from ..dtypes import get_default_dtype
from ..tensor import Tensor

__all__ = ["Parameter"]


class Parameter(Tensor):
    """A Tensor that a Module registers as a learnable parameter (requires_grad=True by default).

    Shares the given array (or the given Tensor's array), as torch.nn.Parameter does."""

    __slots__ = ()

    def __init__(self, data=None, requires_grad: bool = True):
        if data is None:
            data = np.empty((0,), dtype=np.dtype(get_default_dtype()))
        if isinstance(data, Tensor):
            data = data._data
        if not is_array(data):  # a NumPy array, or a device array (CuPy's, the fake's)
            raise TypeError(f"Parameter: expected a Tensor or an array, got {type(data).__name__}")
        if requires_grad and data.dtype.kind != "f":
            raise TypeError(f"Parameter: only floating-point arrays can require gradients, got dtype {data.dtype}")
        super().__init__(data, requires_grad=requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()
