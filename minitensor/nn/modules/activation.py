"""Activations as modules (ReLU, GELU, SiLU, Tanh, Sigmoid, Softmax, LogSoftmax), each calling its nn.functional op."""

from __future__ import annotations

from .. import functional as F
from .attention import MultiheadAttention  # noqa: F401 - torch.nn.modules.activation holds it too
from .module import Module

__all__ = ["GELU", "LogSoftmax", "ReLU", "SiLU", "Sigmoid", "Softmax", "Tanh"]


class ReLU(Module):
    """y = max(x, 0)."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        F.refuse_inplace("ReLU", inplace)

    def forward(self, input):
        return F.relu(input)


class GELU(Module):
    """y = x * Phi(x) ('none'), or the tanh approximation ('tanh')."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """y = x * sigmoid(x) (the swish)."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        F.refuse_inplace("SiLU", inplace)

    def forward(self, input):
        return F.silu(input)


class Tanh(Module):
    """y = tanh(x)."""

    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    """y = 1 / (1 + e^-x)."""

    def forward(self, input):
        return F.sigmoid(input)


class _AlongDim(Module):
    """A softmax-like layer over one dim, which must be given (PyTorch's implicit choice is deprecated)."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def _dim(self) -> int:
        if self.dim is None:
            raise ValueError(
                f"{type(self).__name__}: dim is None; construct it with the dim to normalise over, "
                f"e.g. nn.{type(self).__name__}(dim=-1)"
            )
        return self.dim

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(_AlongDim):
    """y = e^x / sum e^x along dim."""

    def forward(self, input):
        return F.softmax(input, dim=self._dim())


class LogSoftmax(_AlongDim):
    """y = x - log sum e^x along dim."""

    def forward(self, input):
        return F.log_softmax(input, dim=self._dim())
