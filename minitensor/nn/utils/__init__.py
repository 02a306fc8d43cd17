"""Gradient utilities: clip_grad_norm_, clip_grad_value_, parameters_to_vector, vector_to_parameters;
and rnn.py (pad_sequence), as torch.nn.utils.rnn.

All work on the raw arrays (`p.grad._data`, `p._data`) in place and record no graph.

    clip_grad_norm_:  total = ||(||g_1||, ..., ||g_n||)||_p  (= the p-norm of all gradients joined);
                      if max_norm / (total + 1e-6) < 1, every g_i *= max_norm / (total + 1e-6)
"""

from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from ...autograd import ieee_quiet
from ...devices import array_module, is_array, is_host
from ...dtypes import get_default_dtype
from ...ops.reductions import opmath_dtype
from ...tensor import Tensor
from . import rnn

__all__ = [
    "clip_grad_norm_",
    "clip_grad_value_",
    "parameters_to_vector",
    "rnn",
    "vector_to_parameters",
    "zero_grad_",
]


def _param_list(where: str, parameters) -> list:
    if isinstance(parameters, Tensor):
        return [parameters]
    try:
        params = list(parameters)
    except TypeError:
        raise TypeError(
            f"{where}: expected a Tensor or an iterable of Tensors, got {type(parameters).__name__}"
        ) from None
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"{where}: expected Tensors, got {type(p).__name__}")
    return params


def _sum_of_squares(g: np.ndarray, block: int = 1024) -> float:
    """sum(g * g), dot products over blocks of `block` entries summed in float64.

    A single float32 dot over millions of entries drifts by ~1e-4 relative (enough for the parity
    report to see on the base model); blocking keeps each float32 partial sum short, so the result
    is accurate to ~1e-9, at close to the speed of one BLAS dot and without a temporary array.
    float16 is squared in float32 (PyTorch's vector_norm of float16 accumulates in float32: its squares overflow
    float16 beyond 256); float32 squares stay float32, so beyond ~1e19 the norm is inf, as PyTorch's."""
    x = g.reshape(-1).astype(opmath_dtype(g.dtype), copy=False)
    if x.size <= block:  # one block: a single dot (biases, norms)
        return float(np.dot(x, x))
    n = x.size - x.size % block
    head = x[:n].reshape(-1, block)
    total = float(np.einsum("ij,ij->i", head, head).sum(dtype=np.float64))
    tail = x[n:]
    return total + float(np.dot(tail, tail))


def clip_grad_norm_(
    parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None
):
    """Scale all gradients together so their joint norm is at most max_norm; return the norm before clipping,
    a 0-d tensor as torch's (on the CPU in the gradients' dtype, summed in float64 first).

    torch's formula (clip_coef = max_norm / (total_norm + 1e-6), applied only when < 1). On a device the norm
    stays there, and nothing is read back unless error_if_nonfinite asks (then one host sync per call, never one
    per parameter): see _clip_on_device. foreach (torch's choice of kernel) changes nothing here.
    Parameters whose .grad is None are skipped; with no gradients at all the norm is 0.
    """
    if foreach not in (None, True, False):
        raise ValueError(f"clip_grad_norm_: foreach must be None or a bool, got {foreach!r}")
    params = _param_list("clip_grad_norm_", parameters)
    if isinstance(max_norm, bool) or not isinstance(max_norm, numbers.Real) or max_norm < 0:
        raise ValueError(f"clip_grad_norm_: max_norm must be a non-negative number, got {max_norm!r}")
    norm_type = float(norm_type)
    if not norm_type > 0:
        raise ValueError(f"clip_grad_norm_: norm_type must be positive (or inf), got {norm_type}")
    with_grad = [p for p in params if p.grad is not None]
    grads = [p.grad._data for p in with_grad]
    if not grads:
        return Tensor.wrap(np.zeros((), dtype=get_default_dtype()))
    if not is_host(grads[0]):
        return _clip_on_device(with_grad, float(max_norm), norm_type, error_if_nonfinite)
    if norm_type == math.inf:
        total = max(float(np.max(np.abs(g))) if g.size else 0.0 for g in grads)
    elif norm_type == 2.0:
        # per-array norms, then the norm of those (torch's order)
        with ieee_quiet():  # squares beyond the dtype's range: inf, silently, as PyTorch's norm
            norms = np.array([math.sqrt(_sum_of_squares(g)) for g in grads])
        total = float(np.sqrt(np.dot(norms, norms)))
    else:
        grads = [g.astype(opmath_dtype(g.dtype), copy=False) for g in grads]  # float16 in float32, as PyTorch
        with ieee_quiet():  # powers beyond the dtype's range: inf, silently, as PyTorch's norm
            norms = np.array([np.sum(np.abs(g) ** norm_type) ** (1.0 / norm_type) for g in grads], dtype=np.float64)
            total = float(np.sum(norms**norm_type) ** (1.0 / norm_type))
    if error_if_nonfinite and not math.isfinite(total):
        _refuse_nonfinite(norm_type, total)
    clip_coef = float(max_norm) / (total + 1e-6)
    if clip_coef < 1.0:
        for p in with_grad:
            p.grad._data *= clip_coef
            p.grad.bump_version()
    with ieee_quiet():  # a norm beyond float16's range: inf, as torch's in that dtype
        return Tensor.wrap(np.asarray(total, dtype=functools.reduce(np.promote_types, [g.dtype for g in grads])))


def _refuse_nonfinite(norm_type: float, total: float):
    raise RuntimeError(
        f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
        f"non-finite ({total}); set error_if_nonfinite=False to clip anyway"
    )


def total_norm_on_device(grads: list, norm_type: float = 2.0):
    """The p-norm of all gradient arrays joined, as a 0-d float64 array on their device: no host read.

    The plain formulas of the CPU path above without its speed device (blocked einsum dots):
    each array's squares are summed in float64, so the norm equals the CPU's to round-off (inf and general p:
    the same formulas, bitwise). Also the training step's per-group norms (transformer_np/training/step.py)."""
    xp = array_module(grads[0])
    with ieee_quiet():  # beyond the dtype's range: inf, silently, as PyTorch's norm
        if norm_type == math.inf:
            maxima = [xp.abs(g).max().astype(xp.float64) for g in grads if g.size]
            return xp.stack(maxima).max() if maxima else xp.zeros((), dtype=xp.float64)
        xs = [g.astype(opmath_dtype(g.dtype), copy=False).reshape(-1) for g in grads]  # float16 in float32
        if norm_type == 2.0:
            norms = xp.sqrt(xp.stack([xp.sum(x * x, dtype=xp.float64) for x in xs]))
            return xp.sqrt(xp.dot(norms, norms))
        norms = xp.stack([xp.sum(xp.abs(x) ** norm_type) ** (1.0 / norm_type) for x in xs]).astype(xp.float64)
        return xp.sum(norms**norm_type) ** (1.0 / norm_type)


def _clip_on_device(with_grad: list, max_norm: float, norm_type: float, error_if_nonfinite: bool) -> Tensor:
    """clip_grad_norm_ on a device: the total norm, the check and the clip factor stay there.

    clip_coef = min(max_norm / (total + 1e-6), 1) multiplies every gradient (as torch's foreach path does):
    a factor of exactly 1 leaves a gradient bitwise as it was, so this equals the CPU's `if clip_coef < 1`.
    Deviation from torch, flagged: torch's clamp gives NaN gradients for a NaN norm; here, as on the CPU, the
    factor is then 1 and the gradients stay as they were (the training step's guard reports the NaN)."""
    total = total_norm_on_device([p.grad._data for p in with_grad], norm_type)
    xp = array_module(total)
    if error_if_nonfinite:
        value = float(total)  # the one host read of this call, asked for by error_if_nonfinite
        if not math.isfinite(value):
            _refuse_nonfinite(norm_type, value)
    with ieee_quiet():  # total = inf: the factor is 0; total = NaN: 1 (NaN < 1 is False), as on the CPU
        clip_coef = max_norm / (total + 1e-6)
        clip_coef = xp.where(clip_coef < 1.0, clip_coef, 1.0)
        for p in with_grad:  # (quiet: inf * 0 is NaN silently, as on a GPU)
            p.grad._data *= clip_coef.astype(p.grad.dtype)  # in the gradient's dtype, as the CPU's Python float
            p.grad.bump_version()
    dtype = functools.reduce(xp.promote_types, [p.grad.dtype for p in with_grad])
    with ieee_quiet():  # the norm in the gradients' dtype, as on the CPU (and as torch's)
        return Tensor.wrap(total.astype(dtype))


def zero_grad_(parameters, set_to_none: bool = True) -> None:
    """Drop every parameter's .grad (set_to_none) or fill it with zeros in place.

    Shared by Module.zero_grad and Optimizer.zero_grad (torch has no public function of this name)."""
    for p in parameters:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            p.grad._data[...] = 0
            p.grad.bump_version()


def clip_grad_value_(parameters, clip_value: float) -> None:
    """Clamp every gradient element into [-clip_value, clip_value], in place."""
    params = _param_list("clip_grad_value_", parameters)
    if isinstance(clip_value, bool) or not isinstance(clip_value, numbers.Real) or clip_value < 0:
        raise ValueError(f"clip_grad_value_: clip_value must be a non-negative number, got {clip_value!r}")
    for p in params:
        if p.grad is not None:
            np.clip(p.grad._data, -clip_value, clip_value, out=p.grad._data)
            p.grad.bump_version()


def parameters_to_vector(parameters) -> Tensor:
    """All parameters flattened and joined into one 1-D Tensor (a copy, no graph)."""
    params = _param_list("parameters_to_vector", parameters)
    if not params:
        raise ValueError("parameters_to_vector: got no parameters")
    dtypes = {p._data.dtype for p in params}
    if len(dtypes) != 1:
        raise TypeError(f"parameters_to_vector: parameters have mixed dtypes {sorted(map(str, dtypes))}")
    return Tensor.wrap(np.concatenate([p._data.ravel() for p in params]))


def vector_to_parameters(vec, parameters) -> None:
    """Copy slices of the 1-D `vec` back into the parameters, in order (inverse of parameters_to_vector)."""
    params = _param_list("vector_to_parameters", parameters)
    v = vec._data if isinstance(vec, Tensor) else vec
    if not is_array(v) or v.ndim != 1:
        raise TypeError(
            f"vector_to_parameters: expected a 1-D Tensor, got {type(vec).__name__} "
            f"of shape {getattr(v, 'shape', None)}"
        )
    total = sum(p._data.size for p in params)
    if v.size != total:
        raise ValueError(f"vector_to_parameters: vector has {v.size} elements, the parameters need {total}")
    i = 0
    for p in params:
        n = p._data.size
        if v.dtype != p._data.dtype:
            raise TypeError(
                f"vector_to_parameters: vector dtype {v.dtype} differs from parameter dtype {p._data.dtype}"
            )
        p._data[...] = v[i : i + n].reshape(p._data.shape)
        p.bump_version()
        i += n
