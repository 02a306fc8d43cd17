"""The affine layer `Linear` (y = x W^T + b) and the pass-through `Identity`, as in torch.nn.modules.linear."""

from __future__ import annotations

import math

import numpy as np

from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .utils import check_positive_int, default_float_dtype

__all__ = ["Identity", "Linear"]


class Identity(Module):
    """y = x (arguments are accepted and ignored, as in torch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x W^T + b, W of shape (out_features, in_features) as in torch.

    Init like torch: W, b ~ U(-1/sqrt(in_features), 1/sqrt(in_features)) (kaiming_uniform_ with a=sqrt(5)).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=None, device=None):
        super().__init__()
        self.in_features = check_positive_int("Linear", "in_features", in_features)
        self.out_features = check_positive_int("Linear", "out_features", out_features)
        dt = default_float_dtype(dtype, "Linear")
        self.weight = Parameter(np.empty((out_features, in_features), dtype=dt))  # (out, in)
        if bias:
            self.bias = Parameter(np.empty((out_features,), dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        if device is not None:  # drawn on the host, then copied: the same weights on every device
            self.to(device)

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features)
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        if input.shape[-1:] != (self.in_features,):
            raise ValueError(
                f"Linear(in_features={self.in_features}): expected input of shape (..., "
                f"{self.in_features}), got {tuple(input.shape)}"
            )
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
