"""Fused primitives with backward passes derived by hand: one graph node each where the composite of
primitives would record several and keep their temporaries.

docs/backprop.md derives every formula below step by step; tests/test_fused.py checks each fused op
equal to the composite it replaces.

Notation: x the input, y = out the forward result, g = dL/dy the incoming gradient; sums run over
the reduced axis; `*` is elementwise.

linear       y = x W^T + b                                   dx = g W, dW = g^T x, db = sum over rows of g
softmax      y_i = e^{x_i - m} / sum_j e^{x_j - m}            dx = y * (g - sum_j g_j y_j)
log_softmax  y_i = x_i - m - log sum_j e^{x_j - m}           dx = g - e^y * sum_j g_j
layer_norm   xhat = (x - mu) * rstd, rstd = (var + eps)^-1/2, y = xhat * w + b
             dxhat = g * w;  dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
             dw = sum over rows of g * xhat;  db = sum over rows of g
cross_entropy with label smoothing e over C classes, per-class weight w (1 if none), p = softmax(logits):
             q_n = (1 - e) onehot(t_n) + e / C (class index t_n)  or  (1 - e) P_n + e / C (class probabilities P_n)
             loss_n = -sum_c w_c q_nc log p_nc;   s_n = sum_c w_c q_nc   (1 for an index target without weight)
             dlogits_n = (s_n p_n - w * q_n) * g_n                 (rows with t_n = ignore_index get 0)
             probabilities only: dP_n = -(1 - e) w * log p_n * g_n,  dw = -sum_n q_n * log p_n * g_n
             reduction='mean' divides by sum of w_{t_n} over non-ignored rows (index), by the row count (probabilities).
nll_loss     loss_n = -w_{t_n} x_{n, t_n};  dx_{n, t_n} = -w_{t_n} g_n   (mean: divided by sum of w_{t_n} as above)
bce_with_logits, elementwise, target t, pos_weight w (1 if none), s = sigmoid(x):
             loss = -(w t log s + (1 - t) log(1 - s)),  log s = log sigmoid(x), log(1 - s) = log sigmoid(-x)
             dx = ((w t + 1 - t) s - w t) * g   (w = 1: (s - t) * g)
             dt = -(w log sigmoid(x) - log sigmoid(-x)) * g   (w = 1: -x * g);   dw = -t log sigmoid(x) * g
attention    w = softmax(q k^T * scale) over the keys that a mask keeps; a row that keeps none is 0
             dS = w * (g - sum_k g * w);  dq = dS k * scale,  dk = dS^T q * scale

float16: softmax, log_softmax and layer_norm compute in float32 and round their results (outputs and
gradients) to float16 once, as PyTorch's CPU kernels do (reductions.opmath_dtype); float32 and float64 compute
in their own dtype.

All -inf rows: softmax and log_softmax of a row whose entries are all -inf return NaN, exactly as
PyTorch does (0/0). AttentionWeights never produces such a row: a fully masked query row gets
zero weights. A row that is -inf only in some entries is fine: those entries get probability 0
and gradient 0.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Function
from ..pool import update_pool
from .elementwise import log_sigmoid
from .reductions import in_opmath, opmath_dtype, to_dtype
from .rowwise import is_last, last_max, last_sum, sum_

# ----------------------------------------------------------------------------- optional inputs


# ----------------------------------------------------------------------------- linear


class Linear(Function):
    """y = x @ W^T + b, x (..., in), W (out, in);  dx = g @ W, dW = g^T x (rows flattened), db = sum g"""

    max_inputs = 3  # x, weight, bias; bias optional

    @staticmethod
    def forward(ctx, x, weight, bias=None):
        x2 = x.reshape(-1, x.shape[-1])  # (N, in), a view for contiguous x
        out = x2 @ weight.T  # (N, out): BLAS reads W^T without copying
        if bias is not None:
            out += bias  # in place on a fresh array
        ctx.save_for_backward(x, weight)
        return out.reshape(x.shape[:-1] + (weight.shape[0],))

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_arrays
        need_x, need_w, need_b = ctx.needs_input_grad
        g2 = g.reshape(-1, g.shape[-1])  # (N, out)
        gx = (g2 @ weight).reshape(x.shape) if need_x else None
        gw = g2.T @ x.reshape(-1, x.shape[-1]) if need_w else None
        gb = ctx.xp.sum(g2, axis=0) if need_b else None
        return gx, gw, gb


# ----------------------------------------------------------------------------- softmax family


class Softmax(Function):
    """y = e^{x - max} / sum e^{x - max};  dx = y * (g - sum(g * y))"""

    @staticmethod
    def forward(ctx, x, dim):
        z = x.astype(opmath_dtype(x.dtype), copy=False)  # float16 in float32 (see the module docstring)
        e = np.exp(z - _max(z, dim))  # an all -inf row gives NaN, as in PyTorch
        e /= sum_(e, dim, keepdims=True)
        e = e.astype(x.dtype, copy=False)
        ctx.save_for_backward(e)
        ctx.dim = dim
        return e

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_arrays
        dtype, y, g = y.dtype, in_opmath(ctx.xp, y), in_opmath(ctx.xp, g)  # float16 in float32 (module docstring)
        dx = softmax_grad(ctx.xp, g, y, ctx.dim)
        return (to_dtype(ctx.xp, dx, dtype),)  # float16: rounded once


class LogSoftmax(Function):
    """y = x - max - log sum e^{x - max};  dx = g - e^y * sum(g)"""

    @staticmethod
    def forward(ctx, x, dim):
        out = log_softmax(x, dim)
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_arrays
        dtype, y, g = y.dtype, in_opmath(ctx.xp, y), in_opmath(ctx.xp, g)  # float16 in float32 (module docstring)
        dx = g - ctx.xp.exp(y) * ctx.xp.sum(g, axis=ctx.dim, keepdims=True)
        return (to_dtype(ctx.xp, dx, dtype),)  # float16: rounded once


def softmax_grad(xp, g, y, dim: int = -1):
    """dx = y * (g - sum(g * y)) along dim, as g y - y sum(g y): the gradient of x for the gradient g of
    y = softmax(x). The one spelling of this formula: Softmax, the attention weights and their blocked path
    call it. (Expanded, its second derivative under create_graph follows PyTorch's to round-off.)"""
    gy = g * y
    return gy - y * xp.sum(gy, axis=dim, keepdims=True)


def _max(x: np.ndarray, dim: int) -> np.ndarray:
    """x.max(axis=dim, keepdims=True) (0-size dims fine); over the last axis rowwise.last_max, a speed device."""
    return last_max(x) if is_last(dim, x.ndim) else x.max(axis=dim, keepdims=True, initial=-np.inf)


def log_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    """x - max - log sum e^{x - max} along dim, on arrays (LogSoftmax's and CrossEntropy's forward);
    float16 in float32, rounded once."""
    z = x.astype(opmath_dtype(x.dtype), copy=False)
    shifted = z - _max(z, dim)
    return (shifted - np.log(sum_(np.exp(shifted), dim, keepdims=True))).astype(x.dtype, copy=False)


# ----------------------------------------------------------------------------- layer norm


class LayerNorm(Function):
    """y = (x - mean) / sqrt(var + eps) * w + b over the last k dims (biased variance);
    dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * w
    Deviation from PyTorch: where dxhat holds an inf (an infinite weight or g), dx is +-inf or NaN by this
    order of sums; PyTorch's kernel (another order) gives NaN for the whole row. Non-finite either way."""

    max_inputs = 3  # x, weight, bias; the affine ones optional

    @staticmethod
    def forward(ctx, x, weight=None, bias=None, k=1, eps=1e-5):
        axes, dtype = tuple(range(x.ndim - k, x.ndim)), x.dtype
        ctx.save_for_backward(x, *(() if weight is None else (weight,)))
        # float16: statistics, output and gradients in float32, each rounded to float16 once (PyTorch's kernel);
        # in float16 itself the squares of activations of a few hundred overflow and the row becomes NaN
        x, weight, bias = (to_dtype(ctx.xp, t, opmath_dtype(dtype)) for t in (x, weight, bias))
        xhat, mean, rstd = _normalized(ctx.xp, x, axes, eps)
        # The row statistics are kept, not xhat: xhat is rebuilt in the backward, so a layer norm holds one
        # activation-sized array (its input) until then instead of two (as PyTorch keeps mean and rstd).
        ctx.save(mean=mean, rstd=rstd)
        ctx.axes, ctx.eps = axes, eps
        if weight is None:
            return to_dtype(ctx.xp, xhat, dtype)
        out = xhat * weight if bias is None else xhat * weight + bias
        return to_dtype(ctx.xp, out, dtype)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, w = (ctx.saved_arrays + (None,))[:2]
        dtype = x.dtype
        x, w, g = (None if t is None else in_opmath(xp, t) for t in (x, w, g))
        return tuple(to_dtype(xp, t, dtype) for t in LayerNorm._grads(ctx, x, w, g))

    @staticmethod
    def _grads(ctx, x, w, g):
        """(dx, dw, db) in x's dtype (float32 for a float16 layer norm), None where not needed."""
        xp, axes = ctx.xp, ctx.axes
        mean, rstd = ctx.intermediate((ctx.mean, ctx.rstd), _row_stats, x, axes, ctx.eps)
        xhat = (x - mean) * rstd  # the forward's xhat, bit for bit
        need_x, need_w, need_b = ctx.needs_input_grad
        rows = tuple(range(g.ndim - len(axes)))
        gw = xp.sum(g * xhat, axis=rows) if need_w else None
        gb = xp.sum(g, axis=rows) if need_b else None
        gx = None
        if need_x:
            dxhat = g * w if w is not None else g
            gx = rstd * (dxhat - _mean(xp, dxhat, axes) - xhat * _mean(xp, dxhat * xhat, axes))
        return gx, gw, gb


def _normalized(xp, x, axes: tuple, eps: float):
    """(xhat, mean, rstd): xhat = (x - mean) * rstd, rstd = (var + eps)^-1/2 over axes (biased variance)."""
    mean = xp.mean(x, axis=axes, keepdims=True)
    xc = x - mean
    var = xp.mean(xc * xc, axis=axes, keepdims=True)
    # a variance that overflows (finite |x| beyond ~1e154) would make rstd 0 and the output the bias: NaN instead,
    # as PyTorch gives
    rstd = xp.where(var == np.inf, np.nan, 1.0 / xp.sqrt(var + x.dtype.type(eps)))
    return xc * rstd, mean, rstd


def _mean(xp, a, axes: tuple):
    """The mean of a over the normalized axes, kept as size-1 dims (broadcasts against a)."""
    return xp.mean(a, axis=axes, keepdims=True)


def _row_stats(xp, x, axes: tuple, eps: float):
    """(mean, rstd) of _normalized: what LayerNorm's backward rebuilds xhat from."""
    return _normalized(xp, x, axes, eps)[1:]


# ----------------------------------------------------------------------------- losses


def _rows(xp, x):
    """(N, C, d1, ...) or (C,) -> (rows, C) with the class axis last."""
    if x.ndim == 1:
        return x.reshape((1,) + x.shape)
    if x.ndim == 2:
        return x
    return xp.moveaxis(x, 1, -1).reshape(-1, x.shape[1])


def _unrows(xp, g2, shape: tuple):
    """The inverse of _rows: (rows, C) back to the input's layout."""
    if len(shape) <= 2:
        return g2.reshape(shape)
    moved = shape[:1] + shape[2:] + shape[1:2]
    return xp.moveaxis(g2.reshape(moved), -1, 1)


def _row_log_softmax(xp, x):
    """log softmax over the classes of each row of x, (rows, C) (CrossEntropy's forward and backward)."""
    return xp.log_softmax(_rows(xp, x), 1)


def _valid_targets(target: np.ndarray, C: int, ignore_index: int, op: str):
    """Flatten targets; return (targets with ignored rows set to class 0, mask of non-ignored rows)."""
    t = target.reshape(-1)
    valid = t != ignore_index
    tv = np.where(valid, t, 0)
    if ((tv < 0) | (tv >= C)).any():
        bad = t[valid & ((t < 0) | (t >= C))][0]
        raise IndexError(f"{op}: target {bad} is out of range for {C} classes (ignore_index={ignore_index})")
    return tv, valid


def _row_weights(weight, tv: np.ndarray, valid: np.ndarray):
    """(w_{t_n}, the mean's denominator): w_{t_n} is None without weight; the denominator is the number of
    non-ignored rows, or the sum of their w_{t_n} (PyTorch's weighted mean)."""
    if weight is None:
        return None, valid.sum()
    w_t = weight[tv]
    return w_t, np.where(valid, w_t, 0).sum()


def _reduce(losses: np.ndarray, reduction: str, out_shape: tuple, denominator):
    """Apply `reduction` to per-row losses; returns (loss, per-row scale of dL/dloss_row).
    'mean' divides the sum by `denominator` (0 gives 0/0 = NaN, as in PyTorch)."""
    dt = losses.dtype.type
    if reduction == "none":
        return losses.reshape(out_shape), None
    if reduction == "sum":
        return np.asarray(losses.sum()), dt(1)
    denominator = dt(denominator)
    return np.asarray(losses.sum() / denominator), dt(1) / denominator


def _per_row_grad(g: np.ndarray, reduction: str, scale) -> np.ndarray:
    """dL/dloss_row for each row: g itself (reduction 'none') or g times the reduction's scale."""
    return g.reshape(-1) if reduction == "none" else g * scale


def _class_dim_removed(shape: tuple) -> tuple:
    """The shape of an unreduced loss: (N, C, d1, ...) -> (N, d1, ...), (C,) -> ()."""
    return shape[:1] + shape[2:] if len(shape) > 1 else ()


class CrossEntropy(Function):
    """Class-index targets t_n, label smoothing e, per-class weight w (a constant; 1 if not given):
    loss_n = -sum_c w_c q_nc log softmax(x_n)_c with q_n = (1 - e) onehot(t_n) + e / C
           = -(1 - e) w_{t_n} log p_{n, t_n} - e / C sum_c w_c log p_nc
    dx_n = (s_n p_n - w * q_n) * dL/dloss_n,  s_n = sum_c w_c q_nc = (1 - e) w_{t_n} + e / C sum_c w_c
    (no weight: s_n = 1 and dx_n = (p_n - q_n) * dL/dloss_n). 'mean' divides by sum of w_{t_n} over kept rows.
    Deviation from PyTorch, kept on purpose: an infinite dL/dloss_n gives +-inf (the limit, by the sign of
    p - q); PyTorch's composite backward (nll_loss, then log_softmax) computes inf - inf there: NaN."""

    max_inputs = 3  # x, target, weight; weight optional

    @staticmethod
    def forward(ctx, x, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        C = x.shape[0 if x.ndim == 1 else 1]
        tv, valid = _valid_targets(target, C, ignore_index, "cross_entropy")
        logp = _row_log_softmax(ctx.xp, x)  # (R, C)
        e = x.dtype.type(label_smoothing)
        nll = -np.take_along_axis(logp, tv[:, None], axis=1)[:, 0]  # -log p_{n, t_n}
        w_t, denominator = _row_weights(weight, tv, valid)
        if weight is None:
            losses = (1 - e) * nll - e / C * logp.sum(axis=1) if label_smoothing else nll
        else:
            losses = (1 - e) * w_t * nll - e / C * (logp @ weight) if label_smoothing else w_t * nll
            ctx.save(s=((1 - e) * w_t + e / C * weight.sum()).reshape(-1, 1))  # s_n = sum_c w_c q_nc, (R, 1)
        losses = np.where(valid, losses, x.dtype.type(0))
        out, scale = _reduce(losses, reduction, target.shape, denominator)
        ctx.save(logp=logp, tv=tv, valid=valid)
        ctx.e, ctx.scale, ctx.reduction = e, scale, reduction
        ctx.save_for_backward(x, *(() if weight is None else (weight,)))  # weight: its version is checked, as torch
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, w = (ctx.saved_arrays + (None,))[:2]
        if ctx.create_graph and w is not None:  # a constant, as torch's: no gradient reaches the weight
            w = w.detach()
        logp = ctx.intermediate(ctx.logp, _row_log_softmax, x)
        R, C = logp.shape
        q = _index_q(ctx.tv, C, ctx.e, x.dtype)  # (R, C)
        g_rows = xp.where(ctx.valid, _per_row_grad(g, ctx.reduction, ctx.scale), 0).reshape(R, 1)  # ignored: 0
        # p = exp(logp), the softmax, written inline: NumPy then computes p - q in p's buffer, not in a third array
        dx = (xp.exp(logp) - q) * g_rows if w is None else (ctx.s * xp.exp(logp) - w * q) * g_rows
        return _unrows(xp, dx, x.shape), None, None  # target, weight: no gradient


def _index_q(tv: np.ndarray, C: int, e, dtype) -> np.ndarray:
    """q = (1 - e) onehot(t_n) + e / C, (R, C): the target distribution of class-index targets tv."""
    dtype = np.dtype(dtype)
    return np.where(np.arange(C) == tv[:, None], dtype.type(1 - e + e / C), dtype.type(e / C))


def _soft_q(xp, target, weight, e, C: int):
    """(q, w * q) of class-probability targets, (R, C): q = (1 - e) P + e / C; w * q = q without weight."""
    q = _rows(xp, target)
    if e:
        q = q * (1 - e) + e / C
    return q, (q if weight is None else q * weight)


class CrossEntropyProbs(Function):
    """Class-probability targets P (the input's shape), label smoothing e, per-class weight w (1 if not given):
    loss_n = -sum_c w_c q_nc log p_nc with q_n = (1 - e) P_n + e / C, p_n = softmax(x_n)
    dx_n = (s_n p_n - w * q_n) * dL/dloss_n,  s_n = sum_c w_c q_nc (not assumed 1: PyTorch takes any P)
    dP_n = -(1 - e) w * log p_n * dL/dloss_n,  dw = -sum_n q_n * log p_n * dL/dloss_n
    'mean' divides by the number of rows R, not by the weights (PyTorch's rule for probabilities).
    Deviation from PyTorch, kept on purpose: a class with w_c q_nc = 0 and p_nc = 0 (a logit of -inf) adds 0,
    its limit (0 log 0 = 0, as torch.xlogy); PyTorch's composite computes 0 * -inf there: NaN."""

    max_inputs = 3  # x, target, weight; weight optional

    @staticmethod
    def forward(ctx, x, target, weight=None, reduction="mean", label_smoothing=0.0):
        C = x.shape[0 if x.ndim == 1 else 1]
        e = x.dtype.type(label_smoothing)
        logp = _row_log_softmax(ctx.xp, x)  # (R, C)
        q, wq = _soft_q(ctx.xp, target, weight, e, C)
        losses = -_times_log(ctx.xp, wq, logp).sum(axis=1)  # (R,)
        out, scale = _reduce(losses, reduction, _class_dim_removed(x.shape), logp.shape[0])
        ctx.save(logp=logp, q=q, wq=wq)
        ctx.e, ctx.scale, ctx.reduction = e, scale, reduction
        ctx.save_for_backward(x, target, *(() if weight is None else (weight,)))
        return out

    @staticmethod
    def backward(ctx, g):
        xp, e = ctx.xp, ctx.e
        x, target, weight = (ctx.saved_arrays + (None,))[:3]
        need_x, need_t, need_w = ctx.needs_input_grad
        logp = ctx.intermediate(ctx.logp, _row_log_softmax, x)  # (R, C)
        R, C = logp.shape
        q, wq = ctx.intermediate((ctx.q, ctx.wq), _soft_q, target, weight, e, C)
        per_row = _per_row_grad(g, ctx.reduction, ctx.scale).reshape(-1, 1)  # (R, 1), or (1, 1) if reduced
        gx = gt = gw = None
        if need_x:
            p, s = xp.exp(logp), xp.sum(wq, axis=1, keepdims=True)  # s_n = sum_c w_c q_nc, (R, 1)
            gx = _unrows(xp, (s * p - wq) * per_row, x.shape)
        if need_t:  # d(w q)/dP = (1 - e) w; a class of weight 0 has no say, even where log p = -inf
            dq = (-logp if weight is None else -_times_log(xp, weight, logp)) * per_row
            gt = _unrows(xp, dq * (1 - e) if e else dq, target.shape)
        if need_w:  # 0 log 0 = 0 here too, as in the forward
            gw = xp.sum(-_times_log(xp, q, logp) * per_row, axis=0)
        return gx, gt, gw


class NLLLoss(Function):
    """loss_n = -w_{t_n} x[n, t_n] (w = 1 if not given);  dx[n, t_n] = -w_{t_n} dL/dloss_n, 0 elsewhere.
    'mean' divides by sum of w_{t_n} over the rows whose target is not ignore_index."""

    max_inputs = 3  # x, target, weight; weight optional

    @staticmethod
    def forward(ctx, x, target, weight=None, ignore_index=-100, reduction="mean"):
        x2 = _rows(ctx.xp, x)
        tv, valid = _valid_targets(target, x2.shape[1], ignore_index, "nll_loss")
        w_t, denominator = _row_weights(weight, tv, valid)
        picked = -x2[np.arange(x2.shape[0]), tv]
        losses = np.where(valid, picked if w_t is None else w_t * picked, x.dtype.type(0))
        out, scale = _reduce(losses, reduction, target.shape, denominator)
        ctx.save(tv=tv, valid=valid, w_t=w_t)
        ctx.scale, ctx.reduction = scale, reduction
        ctx.shape, ctx.rows = x.shape, x2.shape
        ctx.save_for_backward(*(() if weight is None else (weight,)))  # read through w_t; saved for its version
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        per_row = xp.broadcast_to(_per_row_grad(g, ctx.reduction, ctx.scale), ctx.tv.shape)
        if ctx.w_t is not None:
            per_row = per_row * ctx.w_t
        grad = xp.index_put(ctx.rows, (np.arange(ctx.rows[0]), ctx.tv), -xp.where(ctx.valid, per_row, 0), True)
        return _unrows(xp, grad, ctx.shape), None, None  # target, weight: no gradient


class BCEWithLogits(Function):
    """loss = -(w t log sigmoid(x) + (1 - t) log sigmoid(-x)), elementwise, w = pos_weight (1 if not given);
    dx = ((w t + 1 - t) sigmoid(x) - w t) * g,  dt = -(w log sigmoid(x) - log sigmoid(-x)) * g,
    dw = -t log sigmoid(x) * g   (w broadcasts over the last dim; the walk sums dw back to its shape)

    Unreduced and unweighted: F.binary_cross_entropy_with_logits multiplies by `weight` and reduces after it.
    Deviation from PyTorch, kept on purpose: at an infinite logit the loss is its limit, +inf at -inf with a
    target > 0, 0 at -inf with a target of 0 and at +inf with a target of 1 (a term whose coefficient is 0 is 0,
    as in torch.xlogy); PyTorch's formula (1 - t) x - log sigmoid(x) gives NaN there (-inf + inf, 0 * inf).
    dx is finite there, and an infinite g gives +-inf, not the NaN of a composite (inf - inf)."""

    max_inputs = 3  # x, target, pos_weight; pos_weight optional

    @staticmethod
    def forward(ctx, x, target, pos_weight=None):
        ctx.save_for_backward(x, target, *(() if pos_weight is None else (pos_weight,)))
        w_t = target if pos_weight is None else pos_weight * target
        loss = -(_times_log(ctx.xp, w_t, log_sigmoid(x)) + _times_log(ctx.xp, 1 - target, log_sigmoid(-x)))
        return loss + 0.0  # a zero loss is +0.0, as PyTorch's (the negation of +0 + +0 is -0.0)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, t, w = (ctx.saved_arrays + (None,))[:3]
        need_x, need_t, need_w = ctx.needs_input_grad
        gx = gt = gw = None
        if need_x:
            s = xp.sigmoid(x)
            gx = (s - t) * g if w is None else ((w * t + 1 - t) * s - w * t) * g
        # log sigmoid(x) - log sigmoid(-x) = x, exactly: without pos_weight the target's gradient needs no log
        log_p = xp.log_sigmoid(x) if need_w or (need_t and w is not None) else None
        if need_t:
            gt = -x * g if w is None else -(_times_log(xp, w, log_p) - xp.log_sigmoid(-x)) * g
        if need_w:
            gw = -_times_log(xp, t, log_p) * g
        return gx, gt, gw


def _times_log(xp, c, log_s):
    """c * log_s, and 0 where c == 0 and log_s == -inf (0 log 0 = 0, as torch.xlogy): a term that a target of
    0 or 1 switches off stays off at an infinite logit, instead of 0 * -inf = NaN."""
    return xp.where((c == 0) & (log_s == -np.inf), 0, c * log_s)


# ----------------------------------------------------------------------------- dropout


class Dropout(Function):
    """y = x * m, m = keep * scale (scale = 1 / (1 - p));  dx = g * m

    The mask is kept as the boolean `keep` (a byte an entry, a quarter of a float32 mask; measured:
    benchmarks/README.md), and both passes multiply by it and then by scale, without a float mask.
    x * keep * scale equals x * (keep * scale) bitwise: keep * scale is exactly scale or 0."""

    @staticmethod
    def forward(ctx, x, keep, scale):
        ctx.save(keep=keep)
        ctx.scale = scale
        out = np.multiply(x, keep, dtype=x.dtype)
        out *= scale
        return out

    @staticmethod
    def backward(ctx, g):
        return g * ctx.keep * ctx.scale, None  # in the forward's order: bitwise g * (keep * scale)


# ----------------------------------------------------------------------------- attention


class AttentionWeights(Function):
    """w = softmax(q k^T * scale) over the keys where `keep` is True; a row with no such key is all 0.
    dS = w * (g - sum_k g * w);  dq = dS k * scale,  dk = dS^T q * scale

    q (..., T_q, Dh), k (..., T_k, Dh), keep: bool, broadcastable to (..., T_q, T_k), or None.
    Fusing keeps the (B, H, T_q, T_k) scores in one buffer that is masked, exponentiated and
    normalised in place: for long sequences the composite's extra full-size temporaries
    (masked_fill -> softmax -> multiply, as parity/model.py writes it in PyTorch) cost more than the
    arithmetic. Excluded keys get the dtype's lowest finite value, not -inf, so an empty row stays
    finite (uniform) until it is zeroed; its gradient is then 0 (w = 0 there), never NaN.
    The derivation is in docs/backprop.md ("Masked attention weights").
    """

    @staticmethod
    def forward(ctx, q, k, keep=None, scale=1.0):
        ctx.save_for_backward(q, k)  # and w, below
        dtype = q.dtype
        q, k = (t.astype(opmath_dtype(dtype), copy=False) for t in (q, k))  # float16 in float32, rounded once
        sc = q.dtype.type(scale)
        # Scaling q (T_q * Dh numbers) is cheaper than scaling the scores (T_q * T_k), as torch's MHA does.
        w = np.matmul(q * sc, np.swapaxes(k, -1, -2))  # (B, H, T_q, T_k)
        keep_full = None if keep is None else np.broadcast_to(keep, w.shape)  # a view: no copy
        in_score_blocks(_masked_softmax_, w, keep_full)
        if keep is not None:
            row_has_key = keep.any(axis=-1, keepdims=True)  # (.., T_q, 1)
            if not row_has_key.all():
                w *= row_has_key  # empty rows: uniform -> 0
        w = w.astype(dtype, copy=False)
        ctx.save_for_backward(*ctx.saved_arrays, w)
        ctx.scale = sc
        return w

    @staticmethod
    def backward(ctx, g):
        xp, dtype = ctx.xp, ctx.saved_arrays[0].dtype
        q, k, w, g = (in_opmath(xp, t) for t in ctx.saved_arrays + (g,))
        need_q, need_k = ctx.needs_input_grad
        # dS = w * (g - sum_k g * w): the formula on Tensors, its blocked speed device on arrays
        ds = softmax_grad(xp, g, w) if ctx.create_graph else softmax_grad_in_blocks(xp, g, w)
        dq = (ds @ k) * ctx.scale if need_q else None  # (B, H, T_q, Dh)
        dk = (xp.swapaxes(ds, -1, -2) @ q) * ctx.scale if need_k else None  # (B, H, T_k, Dh)
        return to_dtype(xp, dq, dtype), to_dtype(xp, dk, dtype)


def _masked_softmax_(w, keep):
    """softmax over the last axis of the scores w, in place; keys where `keep` (w's shape) is False get the
    dtype's lowest value first, so they end with weight 0 (AttentionWeights.forward, one block at a time)."""
    if keep is not None:
        np.copyto(w, np.finfo(w.dtype).min, where=~keep)
    w -= last_max(w)
    np.exp(w, out=w)
    w /= last_sum(w)


def softmax_grad_in_blocks(xp, g, w):
    """softmax_grad(xp, g, w) over the last axis, on arrays, one block of score_blocks at a time: the speed device
    of AttentionWeights.backward (bitwise the same numbers: a row's sum is its own, tests/test_speed_devices.py)."""
    g, w = np.broadcast_arrays(g, w)  # views
    if len(score_blocks(w)) == 1:
        return softmax_grad(xp, g, w)

    def block(ds, g, w):
        ds[...] = softmax_grad(xp, g, w)

    ds = np.empty(w.shape, dtype=w.dtype)
    in_score_blocks(block, ds, g, w)
    return ds


def in_score_blocks(fn, scores, *others):
    """fn(scores[block], *(a[block] for a in others)) for every block of score_blocks(scores) (a None in others
    passes through as None). Blocks hold whole rows and share nothing, so they run on the shared thread pool
    (minitensor/pool.py) when there are several and they are large. Each block's numbers are the same
    whichever thread runs it. Measured: benchmarks/README.md."""

    def run(block):
        fn(scores[block], *(None if a is None else a[block] for a in others))

    update_pool.run(run, score_blocks(scores), size=lambda block: scores[block].size)


SCORE_BLOCK_NUMEL = 1 << 18  # 1 MiB of float32 scores: a block and its temporaries stay in the L2 cache


def score_blocks(w):
    """Speed device of attention's softmax and its backward: index tuples that split the scores w (..., T_q, T_k)
    along the leading axes into blocks of about SCORE_BLOCK_NUMEL entries (whole rows only).

    Each of the five or six passes of a softmax (mask, max, subtract, exp, sum, divide) then reads a block that
    is still in the cache instead of the whole (B, H, T_q, T_k) array from memory: on the long config (32 MiB
    of scores per attention) that is most of attention's elementwise time. Row by row the arithmetic is
    unchanged, so the result is bitwise the one of whole-array passes. Small scores come as one block."""
    if w.size <= SCORE_BLOCK_NUMEL or w.ndim < 2:
        return [...]
    row = w.shape[-1]
    rows_per_block = max(1, SCORE_BLOCK_NUMEL // row)
    lead = w.shape[:-2]
    blocks = []
    for idx in np.ndindex(*lead):
        for start in range(0, w.shape[-2], rows_per_block):
            blocks.append(idx + (slice(start, start + rows_per_block),))
    return blocks
