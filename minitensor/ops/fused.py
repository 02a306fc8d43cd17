"""Fused primitives with backward passes derived by hand: one graph node each where the composite of
primitives would record several and keep their temporaries.

docs/backprop.md derives every formula below step by step; tests/minitensor/ops/test_fused.py checks each fused op
equal to the composite it replaces.

Notation: x the input, y = out the forward result, g = dL/dy the incoming gradient, a dot the tangent
(forward mode: ẋ the direction the input moves in, ẏ how the output moves); sums run over the reduced
axis; `*` is elementwise. Each op's docstring gives its JVP after its VJP; its `jvp` rule (tangents.py) is
that formula over operators and ctx.xp, so reverse mode can differentiate it.

linear       y = x W^T + b                                   dx = g W, dW = g^T x, db = sum over rows of g
softmax      y_i = e^{x_i - m} / sum_j e^{x_j - m}            dx = y * (g - sum_j g_j y_j)
log_softmax  y_i = x_i - m - log sum_j e^{x_j - m}           dx = g - e^y * sum_j g_j
layer_norm   in layer_norm.py
losses       cross_entropy, nll_loss, bce_with_logits: in losses.py
attention    w = softmax(q k^T * scale) over the keys that a mask keeps; a row that keeps none is 0
             dS = w * (g - sum_k g * w);  dq = dS k * scale,  dk = dS^T q * scale

float16: softmax and log_softmax (and layer_norm) compute in float32 and round their results (outputs and
gradients) to float16 once, as PyTorch's CPU kernels do (reductions.opmath_dtype); float32 and float64 compute
in their own dtype.

Speed: the attention weights' softmax and its backward are slots (`fast.use.attention_softmax`,
`attention_softmax_grad`; also Linear.backward_jvp), which minitensor/fast/ fills with faster ways to the same
numbers; `MT_FAST=0` runs the formulas alone (docs/decisions/030-the-core-and-its-speed-devices.md).

All -inf rows: softmax and log_softmax of a row whose entries are all -inf return NaN, exactly as
PyTorch does (0/0). AttentionWeights never produces such a row: a fully masked query row gets
zero weights. A row that is -inf only in some entries is fine: those entries get probability 0
and gradient 0.
"""

from __future__ import annotations

import numpy as np

from .. import fast
from ..autograd import Function, tangent_sum
from ..devices import is_host
from .reductions import in_opmath, opmath_dtype, to_dtype
from .rowwise import is_last, sum_


def beside(like, arr):
    """An array the forward made (a mask, a target distribution; None passes) as an operand beside `like`: itself
    beside an array; a constant Tensor beside a Tensor (a backward on Tensors, a forward-mode rule). The Tensor's
    operators take a host array as a constant but refuse a device array, which is not a number to promote."""
    return like.wrap(arr) if arr is not None and hasattr(like, "version_counter") else arr  # (is_tensor_like)


# ----------------------------------------------------------------------------- linear


class Linear(Function):
    """y = x @ W^T + b, x (..., in), W (out, in);  dx = g @ W, dW = g^T x (rows flattened), db = sum g;
    ẏ = ẋ @ W^T + x @ Ẇ^T + ḃ (bilinear in x and W, not linear: the product rule, then the bias)"""

    max_inputs = 3  # x, weight, bias; bias optional
    backward_jvp = None  # forward over reverse's speed device, when one is in force (fast/linear.py)

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

    @staticmethod
    def jvp(ctx, tx, tw, tb=None):
        x, weight = ctx.saved_arrays
        return tangent_sum(
            Linear.apply(tx, weight) if tx is not None else None,
            Linear.apply(x, tw) if tw is not None else None,
            tb,  # (out,): the engine broadcasts it to the output's shape
        )


fast.formula("linear_backward_jvp", None, owner=Linear, attr="backward_jvp")


# ----------------------------------------------------------------------------- softmax family


class Softmax(Function):
    """y = e^{x - max} / sum e^{x - max};  dx = y * (g - sum(g * y));  ẏ = y * (ẋ - sum(y * ẋ))
    (the Jacobian diag(y) - y y^T is symmetric: the JVP is the VJP's formula with ẋ for g)"""

    @staticmethod
    def forward(ctx, x, dim):
        z = x.astype(opmath_dtype(x.dtype), copy=False)  # float16 in float32 (see the module docstring)
        e = softmax_formula(z, dim).astype(x.dtype, copy=False)
        ctx.save_for_backward(e)
        ctx.dim = dim
        return e

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_arrays
        dtype, y, g = y.dtype, in_opmath(ctx.xp, y), in_opmath(ctx.xp, g)  # float16 in float32 (module docstring)
        dx = softmax_grad(ctx.xp, g, y, ctx.dim)
        return (to_dtype(ctx.xp, dx, dtype),)  # float16: rounded once

    @staticmethod
    def jvp(ctx, tx):
        (y,) = ctx.saved_arrays
        dtype, y, tx = y.dtype, in_opmath(ctx.xp, y), in_opmath(ctx.xp, tx)
        return to_dtype(ctx.xp, softmax_jvp(ctx.xp, tx, y, ctx.dim), dtype)


def softmax_formula(z, dim: int):
    """e^{z - max} / sum e^{z - max} along dim, on arrays (an all -inf row gives NaN, as in PyTorch)."""
    e = np.exp(z - _max(z, dim))
    e /= sum_(e, dim, keepdims=True)
    return e


class LogSoftmax(Function):
    """y = x - max - log sum e^{x - max};  dx = g - e^y * sum(g);  ẏ = ẋ - sum(e^y * ẋ)  (e^y = softmax(x))"""

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
        dx = log_softmax_grad(ctx.xp, g, y, ctx.dim)
        return (to_dtype(ctx.xp, dx, dtype),)  # float16: rounded once

    @staticmethod
    def jvp(ctx, tx):
        (y,) = ctx.saved_arrays
        dtype, y, tx = y.dtype, in_opmath(ctx.xp, y), in_opmath(ctx.xp, tx)
        return to_dtype(ctx.xp, tx - ctx.xp.sum(ctx.xp.exp(y) * tx, axis=ctx.dim, keepdims=True), dtype)


def log_softmax_grad(xp, g, y, dim: int):
    """dx = g - e^y * sum(g) along dim: the gradient of x for the gradient g of y = log_softmax(x)."""
    return g - xp.exp(y) * xp.sum(g, axis=dim, keepdims=True)


def softmax_grad(xp, g, y, dim: int = -1):
    """dx = y * (g - sum(g * y)) along dim, as g y - y sum(g y): the gradient of x for the gradient g of
    y = softmax(x). The one spelling of this formula: Softmax, the attention weights and their blocked path
    call it. (Expanded, its second derivative under create_graph follows PyTorch's to round-off.)"""
    gy = g * y
    return gy - y * xp.sum(gy, axis=dim, keepdims=True)


fast.formula("attention_softmax_grad", softmax_grad)  # AttentionWeights.backward's slot (fast/softmax.py: in blocks)


def softmax_jvp(xp, tx, y, dim: int = -1):
    """ẏ = y * (ẋ - sum(y * ẋ)) along dim: the tangent of y = softmax(x) for the tangent ẋ. The same numbers as
    softmax_grad with ẋ for g (the Jacobian is symmetric), in the factored order that torch's JVP uses: where y
    is nearly one-hot the two orders cancel differently, by more than float32's tolerance. Softmax and the
    attention weights call it."""
    return y * (tx - xp.sum(y * tx, axis=dim, keepdims=True))


def _max(x: np.ndarray, dim: int) -> np.ndarray:
    """x.max(axis=dim, keepdims=True) (0-size dims fine); over the last axis fast.use.row_max."""
    if is_last(dim, x.ndim):
        return fast.use.row_max(x)
    # initial=: a 0-size dim gives -inf, not an error; CuPy's max has no initial= (there a 0-size dim raises)
    return x.max(axis=dim, keepdims=True, initial=-np.inf) if is_host(x) else x.max(axis=dim, keepdims=True)


def log_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    """x - max - log sum e^{x - max} along dim, on arrays (LogSoftmax's and CrossEntropy's forward);
    float16 in float32, rounded once."""
    z = x.astype(opmath_dtype(x.dtype), copy=False)
    return log_softmax_formula(z, dim).astype(x.dtype, copy=False)


def log_softmax_formula(z, dim: int):
    """shifted - log sum e^shifted along dim, shifted = z - max (on arrays)."""
    shifted = z - _max(z, dim)
    return shifted - np.log(sum_(np.exp(shifted), dim, keepdims=True))


# ----------------------------------------------------------------------------- dropout


class Dropout(Function):
    """y = x * m, m = keep * scale (scale = 1 / (1 - p));  dx = g * m;  ẏ = ẋ * m (the same mask)
    (m kept as the boolean keep, multiplied by it then by scale: bitwise x * m; docs/decisions/013-dropout-mask.md)"""

    @staticmethod
    def forward(ctx, x, keep, scale):
        ctx.save(keep=keep)
        ctx.scale = scale
        out = np.multiply(x, keep, dtype=x.dtype)
        out *= scale
        return out

    @staticmethod
    def backward(ctx, g):
        return g * beside(g, ctx.keep) * ctx.scale, None  # in the forward's order: bitwise g * (keep * scale)

    jvp_kind = "elementwise"  # a diagonal Jacobian m: the VJP's formula applied to ẋ


# ----------------------------------------------------------------------------- attention


class AttentionWeights(Function):
    """w = softmax(q k^T * scale) over the keys where `keep` is True (a row with no such key is all 0);
    dS = w * (g - sum_k g * w),  dq = dS k * scale,  dk = dS^T q * scale;  ẇ = w * (Ṡ - sum_k w * Ṡ),
    Ṡ = (q̇ k^T + q k̇^T) * scale  (shapes, the masked value: docs/backprop.md, "Masked attention weights")"""

    @staticmethod
    def forward(ctx, q, k, keep=None, scale=1.0):
        ctx.save_for_backward(q, k)  # and w, below
        dtype = q.dtype
        q, k = (t.astype(opmath_dtype(dtype), copy=False) for t in (q, k))  # float16 in float32, rounded once
        sc = q.dtype.type(scale)
        # Scaling q (T_q * Dh numbers) is cheaper than scaling the scores (T_q * T_k), as torch's MHA does.
        w = np.matmul(q * sc, np.swapaxes(k, -1, -2))  # (B, H, T_q, T_k)
        keep_full = None if keep is None else np.broadcast_to(keep, w.shape)  # a view: no copy
        fast.use.attention_softmax(w, keep_full)
        _zero_empty_rows_(w, keep)
        w = w.astype(dtype, copy=False)
        ctx.save_for_backward(*ctx.saved_arrays, w)
        ctx.scale = sc
        return w

    @staticmethod
    def backward(ctx, g):
        xp, dtype = ctx.xp, ctx.saved_arrays[0].dtype
        q, k, w, g = (in_opmath(xp, t) for t in ctx.saved_arrays + (g,))
        need_q, need_k = ctx.needs_input_grad
        ds = fast.use.attention_softmax_grad(xp, g, w)
        dq = (ds @ k) * ctx.scale if need_q else None  # (B, H, T_q, Dh)
        dk = (xp.swapaxes(ds, -1, -2) @ q) * ctx.scale if need_k else None  # (B, H, T_k, Dh)
        return to_dtype(xp, dq, dtype), to_dtype(xp, dk, dtype)

    @staticmethod
    def jvp(ctx, tq, tk):
        xp, dtype = ctx.xp, ctx.saved_arrays[0].dtype
        q, k, w, tq, tk = (None if t is None else in_opmath(xp, t) for t in ctx.saved_arrays + (tq, tk))
        ds = tangent_sum(
            tq @ xp.swapaxes(k, -1, -2) if tq is not None else None,
            q @ xp.swapaxes(tk, -1, -2) if tk is not None else None,
        )
        return to_dtype(xp, softmax_jvp(xp, ds * ctx.scale, w), dtype)


def _zero_empty_rows_(w, keep) -> None:
    """Set to 0, in place, the rows of the weights w that keep no key (the softmax left them uniform)."""
    if keep is None:
        return
    row_has_key = keep.any(axis=-1, keepdims=True)  # (.., T_q, 1)
    # Multiplying by True is exact, so skipping it when every row has a key is only a saving, taken on the host:
    # on a device, asking .all() would wait for it (a host sync)
    if not is_host(w) or not row_has_key.all():
        w *= row_has_key


def masked_softmax_(w, keep):
    """softmax over the last axis of the scores w, in place; keys where `keep` (w's shape) is False get the
    dtype's lowest value first, so they end with weight 0 (AttentionWeights.forward)."""
    if keep is not None:
        np.copyto(w, np.finfo(w.dtype).min, where=~keep)
    w -= fast.use.row_max(w)
    np.exp(w, out=w)
    w /= fast.use.row_sum(w)


fast.formula("attention_softmax", masked_softmax_)
