"""Conv1d and Conv2d, as torch.nn.modules.conv: weight (out_channels, in_channels / groups, *kernel_size), bias
(out_channels,), torch's names, shapes and initialisation, so that state_dicts move between the two unchanged.

padding_mode: 'zeros' (torch's default) pads inside the convolution's primitive; 'reflect', 'replicate' and
'circular' pad the input first (nn/spatial.py's pad_by_mode, a gather) and convolve it unpadded, as torch does.
"""

from __future__ import annotations

import math

import numpy as np

from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..spatial import PADDING_MODES, pad_by_mode, per_dim
from .module import Module
from .utils import check_positive_int, default_float_dtype

__all__ = ["Conv1d", "Conv2d"]


class _ConvNd(Module):
    """The convolution over n spatial dims: y = W * x + b (a cross-correlation, as torch's)."""

    n = 0  # the number of spatial dims
    op = ""  # F's function name

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ):
        super().__init__()
        name = type(self).__name__
        self.in_channels = check_positive_int(name, "in_channels", in_channels)
        self.out_channels = check_positive_int(name, "out_channels", out_channels)
        self.groups = check_positive_int(name, "groups", groups)
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels and out_channels must be divisible by groups={groups}")
        if padding_mode not in PADDING_MODES:
            raise ValueError(
                f"{name}: padding_mode must be one of {PADDING_MODES}, but got padding_mode={padding_mode!r}"
            )
        self.padding_mode = padding_mode
        self.kernel_size = per_dim(name, "kernel_size", kernel_size, self.n, 1)
        self.stride = per_dim(name, "stride", stride, self.n, 1)
        self.dilation = per_dim(name, "dilation", dilation, self.n, 1)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: invalid padding string {padding!r}, should be one of ('valid', 'same')")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = per_dim(name, "padding", padding, self.n, 0)
        dt = default_float_dtype(dtype, name)
        self.weight = Parameter(np.empty((out_channels, in_channels // groups, *self.kernel_size), dtype=dt))
        if bias:
            self.bias = Parameter(np.empty((out_channels,), dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        if device is not None:  # drawn on the host, then copied: the same weights on every device
            self.to(device)

    def reset_parameters(self) -> None:
        """torch's: W ~ kaiming_uniform_(a=sqrt(5)), b ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
            bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        conv = getattr(F, self.op)
        if self.padding_mode == "zeros" or self.padding == "valid":
            return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        if self.padding == "same":  # an odd total puts the extra entry after, as torch
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            pads = tuple((t // 2, t - t // 2) for t in totals)
        else:
            pads = tuple((p, p) for p in self.padding)
        unbatched = input.ndim == self.n + 1
        x = pad_by_mode(type(self).__name__, input.unsqueeze(0) if unbatched else input, pads, self.padding_mode)
        out = conv(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return out.squeeze(0) if unbatched else out

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self.n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self.n:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + (", bias=False" if self.bias is None else "")


class Conv1d(_ConvNd):
    """Input (N, C_in, L) or (C_in, L) -> (N, C_out, L_out)."""

    n, op = 1, "conv1d"


class Conv2d(_ConvNd):
    """Input (N, C_in, H, W) or (C_in, H, W) -> (N, C_out, H_out, W_out)."""

    n, op = 2, "conv2d"
