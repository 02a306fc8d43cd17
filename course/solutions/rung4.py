"""Rung 4, fused ops: Softmax, LayerNorm and cross-entropy with label smoothing, each one primitive whose
backward is derived for the whole op at once (docs/backprop.md derives the engine's own).

As in rung 3: `forward(ctx, *arrays, **kwargs)` on NumPy arrays, `backward(ctx, g)` returns one gradient per
tensor input. Check with `python -m course check 4`.
"""

from __future__ import annotations

import numpy as np

import minitensor as mt


class Softmax(mt.Function):
    """y = softmax(x) over `dim`: y_i = e^(x_i - max) / sum_j e^(x_j - max)"""

    @staticmethod
    def forward(ctx, x, dim=-1):
        e = np.exp(x - x.max(axis=dim, keepdims=True))  # minus the max: no overflow, same result
        y = e / e.sum(axis=dim, keepdims=True)
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, g):
        # exercise 4.1: the Jacobian is dy_i/dx_j = y_i (delta_ij - y_j), so dx = y * (g - sum_j g_j y_j) over `dim`
        (y,) = ctx.saved_arrays
        return (y * (g - (g * y).sum(axis=ctx.dim, keepdims=True)),)


class LayerNorm(mt.Function):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis (var: biased, as torch)"""

    @staticmethod
    def forward(ctx, x, weight, bias, eps=1e-5):
        mean = x.mean(axis=-1, keepdims=True)
        rstd = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)
        xhat = (x - mean) * rstd
        ctx.xhat, ctx.rstd, ctx.weight = xhat, rstd, weight
        return xhat * weight + bias

    @staticmethod
    def backward(ctx, g):
        # exercise 4.2: with gx = g * weight (the gradient reaching xhat) and means over the last axis:
        #     dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat)),  dweight = g * xhat,  dbias = g
        # (dweight and dbias in the output's shape: the engine sums them over the leading axes)
        xhat, rstd = ctx.xhat, ctx.rstd
        gx = g * ctx.weight
        dx = rstd * (gx - gx.mean(axis=-1, keepdims=True) - xhat * (gx * xhat).mean(axis=-1, keepdims=True))
        return dx, g * xhat, g


class CrossEntropy(mt.Function):
    """loss = mean over the N rows of -sum_c q_c log softmax(logits)_c, q = (1 - s) onehot(target) + s / C

    logits (N, C); target (N,) integer class ids, a keyword (not differentiated); label_smoothing s in [0, 1].
    """

    @staticmethod
    def forward(ctx, logits, target=None, label_smoothing=0.0):
        # exercise 4.3: the loss as a 0-d array. log softmax = x - max - log sum e^(x - max); build q
        N, C = logits.shape
        shifted = logits - logits.max(axis=-1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        q = np.full_like(logits, label_smoothing / C)
        q[np.arange(N), target] += 1.0 - label_smoothing
        ctx.p, ctx.q, ctx.n = np.exp(logp), q, N
        return np.asarray(-(q * logp).sum() / N)

    @staticmethod
    def backward(ctx, g):
        # exercise 4.4: dlogits = g * (softmax(logits) - q) / N
        return (g * (ctx.p - ctx.q) / ctx.n,)
