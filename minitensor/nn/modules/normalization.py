"""`LayerNorm` and `RMSNorm`: normalisation over the last dims with a learned scale (torch.nn.modules.normalization)."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .utils import check_positive_int, default_float_dtype

__all__ = ["LayerNorm", "RMSNorm"]


class LayerNorm(Module):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last len(normalized_shape) dims (biased var).

    weight starts at ones, bias at zeros.
    """

    def __init__(
        self,
        normalized_shape,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        dtype=None,
        device=None,
    ):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral) and not isinstance(normalized_shape, bool):
            normalized_shape = (normalized_shape,)
        if not isinstance(normalized_shape, (tuple, list)) or len(normalized_shape) == 0:
            raise TypeError(
                f"LayerNorm: normalized_shape must be an int or a non-empty tuple of ints, got {normalized_shape!r}"
            )
        self.normalized_shape = tuple(check_positive_int("LayerNorm", "normalized_shape", n) for n in normalized_shape)
        if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not eps > 0:
            raise ValueError(f"LayerNorm: eps must be a positive number, got {eps!r}")
        self.eps = float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        dt = default_float_dtype(dtype, "LayerNorm")
        if self.elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, dtype=dt))
            if bias:
                self.bias = Parameter(np.zeros(self.normalized_shape, dtype=dt))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if device is not None:
            self.to(device)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class RMSNorm(Module):
    """y = x / sqrt(mean(x^2) + eps) * weight over the last len(normalized_shape) dims (torch.nn.RMSNorm); weight
    starts at ones; eps=None takes the input dtype's machine epsilon, as torch's."""

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral) and not isinstance(normalized_shape, bool):
            normalized_shape = (normalized_shape,)
        if not isinstance(normalized_shape, (tuple, list)) or len(normalized_shape) == 0:
            raise TypeError(
                f"RMSNorm: normalized_shape must be an int or a non-empty tuple of ints, got {normalized_shape!r}"
            )
        self.normalized_shape = tuple(check_positive_int("RMSNorm", "normalized_shape", n) for n in normalized_shape)
        if eps is not None and (isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not math.isfinite(eps)):
            raise ValueError(f"RMSNorm: eps must be a finite number or None, got {eps!r}")  # any, as torch's
        self.eps = None if eps is None else float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        if self.elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, dtype=default_float_dtype(dtype, "RMSNorm")))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
