"""F.batch_norm: torch's batch normalisation, per channel (dim 1) over the batch and every spatial dim.

Training: the batch's own statistics normalise (one fused node, ops.BatchNorm), and the running statistics, when
given, move toward them: running = (1 - momentum) * running + momentum * batch, with the batch's variance unbiased
(times n / (n - 1)) there though the normalisation uses the biased one, as torch does. Evaluation: the running
statistics normalise, an affine map with constant coefficients written as a composite (the running statistics get
no gradient, as in torch).

Deviation, flagged: torch's kernel computes x * (w * rstd) + (b - mean * w * rstd); here (x - mean) * rstd * w + b,
so an infinite weight gives +-inf (the limit) where torch's gives inf - inf = NaN, and an x near its mean keeps its
digits. Finite results agree to round-off.
"""

from __future__ import annotations

import numbers

from .. import ops
from ..devices import array_module
from ..ops.reductions import opmath_dtype
from ..tensor import Tensor

__all__ = ["batch_norm"]


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias per channel; the batch's mean and biased var when training
    (updating the running ones given), else running_mean and running_var."""
    op = "batch_norm"
    if not isinstance(input, Tensor) or input.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating Tensor, got {getattr(input, 'dtype', type(input).__name__)}")
    if input.numel() == 0:  # an empty batch, of any dims: an empty result, no statistics moved (as torch)
        return input.clone()
    if input.ndim < 2:
        raise ValueError(f"{op}: expected an input of at least 2 dims (N, C, ...), got shape {input.shape}")
    C = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        if t is not None and (not isinstance(t, Tensor) or t.shape != (C,)):
            raise ValueError(f"{op}: {name} must be a Tensor of shape ({C},) (the channels), got {_shape_of(t)}")
        if t is not None and t.dtype != input.dtype:
            raise TypeError(f"{op}: {name} dtype {t.dtype} differs from input dtype {input.dtype}")
    for name, v in (("momentum", momentum), ("eps", eps)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{op}: {name} must be a number, got {v!r}")
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"{op}: give both running_mean and running_var, or neither")
    view = (C,) + (1,) * (input.ndim - 2)  # weight, bias and statistics broadcast over (N, C, ...)
    if not training:
        if running_mean is None:
            raise ValueError(f"{op}: running_mean and running_var must be given when not training")
        return _by_running_statistics(input, running_mean, running_var, weight, bias, eps, view)
    n = input.numel() // C if C else 0
    if n <= 1:
        raise ValueError(f"{op}: expected more than 1 value per channel when training, got input shape {input.shape}")
    if running_mean is not None:
        _update_running(input._data, running_mean, running_var, float(momentum), n)
    if weight is None and bias is not None:  # the op takes (x, weight, bias) positionally: a constant unit weight
        weight = input.wrap(array_module(input._data).ones((C,), dtype=input.dtype))
    tensors = (input,) + tuple(p.reshape(view) for p in (weight, bias) if p is not None)
    return ops.BatchNorm.apply(*tensors, eps=float(eps))


def _by_running_statistics(input, running_mean, running_var, weight, bias, eps: float, view: tuple) -> Tensor:
    """(x - running_mean) * (running_var + eps)^-1/2 * weight + bias, a composite; float16 computes in float32 and
    rounds once, as torch's kernel does (each float16 step rounding would differ from it by an ulp)."""
    dtype, compute = input.dtype, opmath_dtype(input.dtype)
    xp = array_module(input._data)
    mean = running_mean._data.reshape(view).astype(compute)
    rstd = 1.0 / xp.sqrt(running_var._data.reshape(view).astype(compute) + compute.type(eps))
    x = (input.to(compute) - input.wrap(mean)) * input.wrap(rstd)
    x = x if weight is None else x * weight.reshape(view).to(compute)
    x = x if bias is None else x + bias.reshape(view).to(compute)
    return x.to(dtype)


def _update_running(x, running_mean: Tensor, running_var: Tensor, momentum: float, n: int) -> None:
    """running = (1 - momentum) * running + momentum * batch, in place (the var unbiased), outside any graph."""
    axes = (0, *range(2, x.ndim))
    x = x.astype(opmath_dtype(x.dtype), copy=False)
    mean, var = x.mean(axis=axes), x.var(axis=axes) * (n / (n - 1))
    for t, batch in ((running_mean, mean), (running_var, var)):
        t._data[...] = ((1.0 - momentum) * t._data + momentum * batch).astype(t.dtype, copy=False)
        t.bump_version()


def _shape_of(t) -> str:
    return f"shape {t.shape}" if isinstance(t, Tensor) else type(t).__name__
