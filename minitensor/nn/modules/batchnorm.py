"""`BatchNorm1d` and `BatchNorm2d`: per-channel normalisation by the batch's statistics while training and by running
ones in evaluation (torch.nn.modules.batchnorm), with torch's parameter and buffer names."""

from __future__ import annotations

import numbers

import numpy as np

from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .utils import check_positive_int, default_float_dtype

__all__ = ["BatchNorm1d", "BatchNorm2d"]


class _BatchNorm(Module):
    """y = (x - mean) / sqrt(var + eps) * weight + bias per channel (dim 1).

    Training: the batch's mean and biased variance over every dim but the channels; running_mean and running_var
    move toward the batch's (its variance unbiased) by `momentum`, or, with momentum=None, hold the cumulative
    average of every batch so far (the factor 1 / num_batches_tracked). Evaluation: the running statistics, unless
    track_running_stats=False, where the batch's serve in both modes. weight starts at ones, bias at zeros.
    """

    input_dims: tuple = ()  # the input ranks the layer takes, and how torch's message names them

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        name = type(self).__name__
        self.num_features = check_positive_int(name, "num_features", num_features)
        if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not eps > 0:
            raise ValueError(f"{name}: eps must be a positive number, got {eps!r}")
        if momentum is not None and (isinstance(momentum, bool) or not isinstance(momentum, numbers.Real)):
            raise TypeError(f"{name}: momentum must be a number or None (cumulative average), got {momentum!r}")
        self.eps, self.momentum = float(eps), None if momentum is None else float(momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        dt = default_float_dtype(dtype, name)
        if self.affine:
            self.weight = Parameter(np.ones(num_features, dtype=dt))
            self.bias = Parameter(np.zeros(num_features, dtype=dt))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if self.track_running_stats:
            self.register_buffer("running_mean", Tensor(np.zeros(num_features, dtype=dt)))
            self.register_buffer("running_var", Tensor(np.ones(num_features, dtype=dt)))
            self.register_buffer("num_batches_tracked", Tensor(np.array(0, dtype=np.int64)))
        else:
            for buffer in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(buffer, None)
        if device is not None:
            self.to(device)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            for buffer, value in (("running_mean", 0), ("running_var", 1), ("num_batches_tracked", 0)):
                t = getattr(self, buffer)
                t._data[...] = value
                t.bump_version()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input):
        if not isinstance(input, Tensor) or input.ndim not in self.input_dims:
            got = f"{input.ndim}D input" if isinstance(input, Tensor) else type(input).__name__
            dims = " or ".join(f"{d}D" for d in self.input_dims)
            raise ValueError(f"{type(self).__name__}: expected {dims} input, got {got}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked._data[...] += 1
            self.num_batches_tracked.bump_version()
            if self.momentum is None:  # the cumulative average: batch k enters with weight 1 / k
                factor = 1.0 / int(self.num_batches_tracked._data)
        # evaluation uses the running statistics, unless there are none (track_running_stats=False)
        use_batch = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if track else None,
            self.running_var if track else None,
            self.weight,
            self.bias,
            use_batch,
            factor,
            self.eps,
        )

    def extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) inputs, statistics per channel over N (and L)."""

    input_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) inputs, statistics per channel over N, H and W."""

    input_dims = (4,)
