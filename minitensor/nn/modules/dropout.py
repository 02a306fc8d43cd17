"""`Dropout`: zero each entry with probability p while training, as in torch.nn.modules.dropout.

Deviation from PyTorch, flagged: Dropout has a `mask_fn` hook (see Dropout) used by the parity checks.
"""

from __future__ import annotations

import numbers

import numpy as np

from ...devices import is_array
from ...tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["Dropout"]


class Dropout(Module):
    """Training: y = x * keep / (1 - p) with keep ~ Bernoulli(1 - p); eval or p == 0: y = x.

    Extension, flagged: `mask_fn`. When set (and training, p > 0), forward calls
    `keep = mask_fn(shape)` for the boolean keep-mask of the input's shape instead of sampling
    one; the parity report uses it to feed both frameworks identical masks.
    """

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p!r}")
        F.refuse_inplace("Dropout", inplace)
        self.p = float(p)
        self.mask_fn = None

    def forward(self, input):
        if not self.training or self.p == 0.0:
            return input
        if self.mask_fn is None:
            return F.dropout(input, self.p, True)
        shape = tuple(input.shape)
        keep = self.mask_fn(shape)
        if isinstance(keep, Tensor):
            keep = keep._data
        if not is_array(keep) or keep.dtype != np.bool_ or keep.shape != shape:  # a host mask is copied over
            got = (
                f"{type(keep).__name__} of dtype {keep.dtype} and shape {keep.shape}"
                if is_array(keep)
                else type(keep).__name__
            )
            raise ValueError(f"Dropout.mask_fn must return a bool array of shape {shape}, got {got}")
        return F.dropout(input, self.p, True, mask=keep)

    def extra_repr(self):
        return f"p={self.p}"
