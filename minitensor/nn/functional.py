"""mt.nn.functional: PyTorch's functional API, with fused ops whose backward passes are derived by hand.

Fused (one graph node each, backward in raw NumPy): linear, softmax, log_softmax, layer_norm,
cross_entropy, nll_loss, embedding, dropout. Each is tested equal to the composite of primitives it
replaces (tests/test_fused.py). docs/backprop.md derives every formula below step by step.

Notation: x the input, y = out the forward result, g = dL/dy the incoming gradient; sums run over
the reduced axis; `*` is elementwise.

softmax      y_i = e^{x_i - m} / sum_j e^{x_j - m}            dx = y * (g - sum_j g_j y_j)
log_softmax  y_i = x_i - m - log sum_j e^{x_j - m}           dx = g - e^y * sum_j g_j
layer_norm   xhat = (x - mu) * rstd, rstd = (var + eps)^-1/2, y = xhat * w + b
             dxhat = g * w;  dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
             dw = sum over rows of g * xhat;  db = sum over rows of g
cross_entropy with label smoothing e over C classes, target t, weightless:
             q = (1 - e) onehot(t) + e / C;   loss_n = -sum_c q_c log p_c
             dlogits_n = (softmax(logits_n) - q) * g_n       (rows with t = ignore_index get 0)
             reduction='mean' divides by the number of non-ignored rows.

All -inf rows: softmax and log_softmax of a row whose entries are all -inf return NaN, exactly as
PyTorch does (0/0). Attention never feeds such a row: transformer_np zeroes fully masked query rows
itself. A row that is -inf only in some entries is fine: those entries get probability 0 and
gradient 0.
"""
from __future__ import annotations

import numpy as np

from ..autograd import Function
from .. import ops
from .. import random as _random
from ..tensor import Tensor, _operand, result_type, _one_dim


def _axis(dim, ndim: int, op: str) -> int:
    return _one_dim(dim, ndim, op)


# ----------------------------------------------------------------------------- linear

class Linear(Function):
    """y = x @ W^T + b, x (..., in), W (out, in);  dx = g @ W, dW = g^T x (rows flattened), db = sum g"""
    @staticmethod
    def forward(ctx, x, weight, bias=None):
        x2 = x.reshape(-1, x.shape[-1])                    # (N, in), a view for contiguous x
        out = x2 @ weight.T                                # (N, out): BLAS reads W^T without copying
        if bias is not None:
            out += bias                                    # in place on a fresh array
        ctx.x2, ctx.weight, ctx.lead = x2, weight, x.shape[:-1]
        return out.reshape(x.shape[:-1] + (weight.shape[0],))

    @staticmethod
    def backward(ctx, g):
        needs = ctx.needs_input_grad
        g2 = g.reshape(-1, g.shape[-1])                    # (N, out)
        gx = (g2 @ ctx.weight).reshape(ctx.lead + (ctx.weight.shape[1],)) if needs[0] else None
        gw = g2.T @ ctx.x2 if needs[1] else None
        gb = g2.sum(axis=0) if len(needs) > 2 and needs[2] else None
        return gx, gw, gb


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x W^T + b (one fused node)."""
    if input.shape[-1:] != weight.shape[1:] or weight.ndim != 2:
        raise ValueError(f"linear: input of shape {input.shape} does not match weight of shape {weight.shape} "
                         f"(expected input (..., {weight.shape[-1] if weight.ndim else '?'}))")
    if bias is not None and bias.shape != weight.shape[:1]:
        raise ValueError(f"linear: bias of shape {bias.shape}, expected ({weight.shape[0]},)")
    dt = input.dtype
    if weight.dtype != dt or (bias is not None and bias.dtype != dt):
        raise TypeError(f"linear: input dtype {dt} differs from weight dtype {weight.dtype}"
                        f"{'' if bias is None else ' / bias dtype ' + str(bias.dtype)}; convert one explicitly")
    if bias is None:
        return Linear.apply(input, weight)
    return Linear.apply(input, weight, bias)


# ----------------------------------------------------------------------------- activations

def relu(input: Tensor, inplace: bool = False) -> Tensor:
    return ops.Relu.apply(input)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x) (approximate='none', exact erf) or its tanh approximation (approximate='tanh')."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if input.dtype.kind != "f":
        raise TypeError(f"gelu: expected a floating tensor, got {input.dtype}")
    return ops.Gelu.apply(input, approximate=approximate)


def sigmoid(input: Tensor) -> Tensor:
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    return input.tanh()


# ----------------------------------------------------------------------------- softmax family

class Softmax(Function):
    """y = e^{x - max} / sum e^{x - max};  dx = y * (g - sum(g * y))"""
    @staticmethod
    def forward(ctx, x, dim):
        m = x.max(axis=dim, keepdims=True)
        with np.errstate(invalid="ignore"):                # an all -inf row gives NaN, as in PyTorch
            e = np.exp(x - m)
            e /= e.sum(axis=dim, keepdims=True)
        ctx.out, ctx.dim = e, dim
        return e

    @staticmethod
    def backward(ctx, g):
        y = ctx.out
        gy = g * y
        gy -= y * gy.sum(axis=ctx.dim, keepdims=True)
        return (gy,)


class LogSoftmax(Function):
    """y = x - max - log sum e^{x - max};  dx = g - e^y * sum(g)"""
    @staticmethod
    def forward(ctx, x, dim):
        m = x.max(axis=dim, keepdims=True)
        with np.errstate(invalid="ignore"):
            shifted = x - m
            out = shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
        ctx.out, ctx.dim = out, dim
        return out

    @staticmethod
    def backward(ctx, g):
        return (g - np.exp(ctx.out) * g.sum(axis=ctx.dim, keepdims=True),)


def _float_input(input: Tensor, dtype, op: str) -> Tensor:
    if dtype is not None:
        input = input.to(dtype)
    if input.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating tensor, got {input.dtype}")
    return input


def softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    input = _float_input(input, dtype, "softmax")
    return Softmax.apply(input, dim=_axis(dim, input.ndim, "softmax"))


def log_softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    input = _float_input(input, dtype, "log_softmax")
    return LogSoftmax.apply(input, dim=_axis(dim, input.ndim, "log_softmax"))


# ----------------------------------------------------------------------------- layer norm

class LayerNorm(Function):
    """y = (x - mean) / sqrt(var + eps) * w + b over the last k dims (biased variance);
    dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * w"""
    @staticmethod
    def forward(ctx, x, weight=None, bias=None, k=1, eps=1e-5):
        axes = tuple(range(x.ndim - k, x.ndim))
        mu = x.mean(axis=axes, keepdims=True)
        xc = x - mu
        var = (xc * xc).mean(axis=axes, keepdims=True)
        rstd = 1.0 / np.sqrt(var + x.dtype.type(eps))
        xhat = xc * rstd
        ctx.xhat, ctx.rstd, ctx.weight, ctx.axes = xhat, rstd, weight, axes
        if weight is None:
            return xhat
        out = xhat * weight
        if bias is not None:
            out += bias
        return out

    @staticmethod
    def backward(ctx, g):
        xhat, rstd, w, axes = ctx.xhat, ctx.rstd, ctx.weight, ctx.axes
        needs = ctx.needs_input_grad
        rows = tuple(range(g.ndim - len(axes)))
        gw = (g * xhat).sum(axis=rows) if len(needs) > 1 and needs[1] else None
        gb = g.sum(axis=rows) if len(needs) > 2 and needs[2] else None
        gx = None
        if needs[0]:
            dxhat = g * w if w is not None else g
            mean_d = dxhat.mean(axis=axes, keepdims=True)
            mean_dx = (dxhat * xhat).mean(axis=axes, keepdims=True)
            gx = dxhat - mean_d
            gx -= xhat * mean_dx
            gx *= rstd
        return gx, gw, gb


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing `normalized_shape` dims, then scale by weight and shift by bias."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if input.shape[input.ndim - len(shape):] != shape or len(shape) > input.ndim:
        raise ValueError(f"layer_norm: input of shape {input.shape} does not end with normalized_shape {shape}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and p.shape != shape:
            raise ValueError(f"layer_norm: {name} of shape {p.shape}, expected {shape}")
        if p is not None and p.dtype != input.dtype:
            raise TypeError(f"layer_norm: {name} dtype {p.dtype} differs from input dtype {input.dtype}")
    if input.dtype.kind != "f":
        raise TypeError(f"layer_norm: expected a floating input, got {input.dtype}")
    if weight is None and bias is not None:
        raise ValueError("layer_norm: bias without weight is not supported")
    tensors = (input,) + tuple(p for p in (weight, bias) if p is not None)
    return LayerNorm.apply(*tensors, k=len(shape), eps=eps)


# ----------------------------------------------------------------------------- losses

def _check_target(input_shape: tuple, target: Tensor, op: str) -> np.ndarray:
    t = target.data if isinstance(target, Tensor) else np.asarray(target)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{op}: target must hold integer class indices, got dtype {t.dtype}")
    expected = input_shape[:1] + input_shape[2:] if len(input_shape) > 1 else ()
    if t.shape != expected:
        raise ValueError(f"{op}: input of shape {input_shape} expects a target of shape {expected}, got {t.shape}")
    return t


def _rows(x: np.ndarray) -> np.ndarray:
    """(N, C, d1, ...) or (C,) -> (rows, C) with the class axis last."""
    if x.ndim == 1:
        return x[None, :]
    if x.ndim == 2:
        return x
    return np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])


def _unrows(g2: np.ndarray, shape: tuple) -> np.ndarray:
    if len(shape) <= 2:
        return g2.reshape(shape)
    moved = shape[:1] + shape[2:] + shape[1:2]
    return np.moveaxis(g2.reshape(moved), -1, 1)


def _valid_targets(target: np.ndarray, C: int, ignore_index: int, op: str):
    """Flatten targets; return (targets with ignored rows set to class 0, mask of non-ignored rows)."""
    t = target.reshape(-1)
    valid = t != ignore_index
    tv = np.where(valid, t, 0)
    if ((tv < 0) | (tv >= C)).any():
        bad = t[valid & ((t < 0) | (t >= C))][0]
        raise IndexError(f"{op}: target {bad} is out of range for {C} classes (ignore_index={ignore_index})")
    return tv, valid


def _reduce(losses: np.ndarray, valid: np.ndarray, reduction: str, target_shape: tuple):
    """Apply `reduction` to per-row losses; returns (loss, per-row scale of dL/dloss_row)."""
    dt = losses.dtype.type
    if reduction == "none":
        return losses.reshape(target_shape), None
    if reduction == "sum":
        return np.asarray(losses.sum()), dt(1)
    count = valid.sum()
    with np.errstate(invalid="ignore", divide="ignore"):   # every row ignored: 0/0 = NaN, as in PyTorch
        return np.asarray(losses.sum() / dt(count)), dt(1) / dt(count) if count else dt(np.nan)


class CrossEntropy(Function):
    """loss_n = -sum_c q_nc log softmax(x_n)_c with q = (1 - e) onehot(t_n) + e / C;
    dx_n = (softmax(x_n) - q_n) * dL/dloss_n"""
    @staticmethod
    def forward(ctx, x, target, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        x2 = _rows(x)                                             # (R, C)
        C = x2.shape[1]
        tv, valid = _valid_targets(target, C, ignore_index, "cross_entropy")
        m = x2.max(axis=1, keepdims=True)
        shifted = x2 - m
        lse = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        logp = shifted - lse                                      # (R, C)
        dt = x.dtype.type
        e = dt(label_smoothing)
        nll = -np.take_along_axis(logp, tv[:, None], axis=1)[:, 0]
        losses = (1 - e) * nll - e / C * logp.sum(axis=1) if label_smoothing else nll
        losses = np.where(valid, losses, dt(0))
        out, scale = _reduce(losses, valid, reduction, target.shape)
        ctx.logp, ctx.tv, ctx.valid, ctx.e, ctx.scale, ctx.shape, ctx.reduction = logp, tv, valid, e, scale, x.shape, reduction
        return out

    @staticmethod
    def backward(ctx, g):
        logp, tv, valid, e = ctx.logp, ctx.tv, ctx.valid, ctx.e
        R, C = logp.shape
        grad = np.exp(logp)                                       # softmax, (R, C)
        if e:
            grad -= e / C
        grad[np.arange(R), tv] -= 1 - e
        per_row = g.reshape(-1) if ctx.reduction == "none" else g * ctx.scale
        grad *= np.where(valid, per_row, 0).astype(grad.dtype, copy=False)[:, None]
        return _unrows(grad, ctx.shape), None


def cross_entropy(input: Tensor, target, weight=None, ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """torch.nn.functional.cross_entropy for class-index targets (one fused node)."""
    if weight is not None:
        raise NotImplementedError("cross_entropy: per-class weight is not supported")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    if input.dtype.kind != "f":
        raise TypeError(f"cross_entropy: input must be floating (logits), got {input.dtype}")
    t = _check_target(input.shape, target, "cross_entropy")
    return CrossEntropy.apply(input, Tensor._wrap(t), ignore_index=ignore_index, reduction=reduction,
                              label_smoothing=float(label_smoothing))


class NLLLoss(Function):
    """loss_n = -x[n, t_n];  dx[n, t_n] = -dL/dloss_n, 0 elsewhere"""
    @staticmethod
    def forward(ctx, x, target, ignore_index=-100, reduction="mean"):
        x2 = _rows(x)
        C = x2.shape[1]
        tv, valid = _valid_targets(target, C, ignore_index, "nll_loss")
        losses = np.where(valid, -x2[np.arange(x2.shape[0]), tv], x.dtype.type(0))
        out, scale = _reduce(losses, valid, reduction, target.shape)
        ctx.tv, ctx.valid, ctx.scale, ctx.shape, ctx.rows, ctx.reduction = tv, valid, scale, x.shape, x2.shape, reduction
        return out

    @staticmethod
    def backward(ctx, g):
        grad = np.zeros(ctx.rows, dtype=g.dtype)
        per_row = g.reshape(-1) if ctx.reduction == "none" else np.broadcast_to(g * ctx.scale, ctx.tv.shape)
        grad[np.arange(ctx.rows[0]), ctx.tv] = -np.where(ctx.valid, per_row, 0)
        return _unrows(grad, ctx.shape), None


def nll_loss(input: Tensor, target, weight=None, ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    if weight is not None:
        raise NotImplementedError("nll_loss: per-class weight is not supported")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"nll_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    t = _check_target(input.shape, target, "nll_loss")
    return NLLLoss.apply(input, Tensor._wrap(t), ignore_index=ignore_index, reduction=reduction)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    d = input - target
    sq = d * d
    return sq.mean() if reduction == "mean" else (sq.sum() if reduction == "sum" else sq)


# ----------------------------------------------------------------------------- embedding and dropout

class Embedding(Function):
    """y = W[ids];  dW = scatter-add of g into the rows ids (repeated ids accumulate), padding row 0"""
    @staticmethod
    def forward(ctx, weight, ids, padding_idx=None):
        ctx.ids, ctx.num, ctx.padding_idx = ids, weight.shape[0], padding_idx
        return weight[ids]

    @staticmethod
    def backward(ctx, g):
        D = g.shape[-1]
        flat = ctx.ids.reshape(-1)
        grad = np.zeros((ctx.num, D), dtype=g.dtype)
        np.add.at(grad, flat, g.reshape(-1, D))
        if ctx.padding_idx is not None:
            grad[ctx.padding_idx] = 0
        return grad, None


def embedding(input, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Rows of `weight` looked up by integer ids; no gradient reaches row padding_idx."""
    ids = input.data if isinstance(input, Tensor) else np.asarray(input)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"embedding: ids must be an integer tensor, got dtype {ids.dtype}")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape {weight.shape}")
    n = weight.shape[0]
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        bad = ids[(ids < 0) | (ids >= n)].reshape(-1)[0]
        raise IndexError(f"embedding: id {bad} is out of range for an embedding of {n} rows (ids shape {ids.shape})")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += n
    return Embedding.apply(weight, Tensor._wrap(ids), padding_idx=padding_idx)


class Dropout(Function):
    """y = x * m, m = keep / (1 - p);  dx = g * m"""
    @staticmethod
    def forward(ctx, x, scaled_mask):
        ctx.m = scaled_mask
        return x * scaled_mask

    @staticmethod
    def backward(ctx, g):
        return (g * ctx.m,)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, mask=None) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p) (identity when not training).

    Extension, flagged: `mask`, a boolean keep-mask of input's shape, replaces the random draw so that
    the parity checks can drive minitensor and PyTorch with identical masks."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return input
    if mask is None:
        keep = _random.generator().random(input.shape, dtype=np.float32 if input.dtype == np.float32 else np.float64) >= p
    else:
        keep = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
        if keep.shape != input.shape or keep.dtype != np.bool_:
            raise ValueError(f"dropout: mask must be a bool array of the input's shape {input.shape}, "
                             f"got {keep.dtype} {keep.shape}")
    dt = input.dtype.type
    scale = dt(0) if p == 1.0 else dt(1.0 / (1.0 - p))
    return Dropout.apply(input, Tensor._wrap(keep * scale))
