"""nn.LSTM and a 2-d convolution on bare NumPy arrays, forward and backward, in the fewest passes we found.

The floor of benchmarks/layer_floor.py: the same computation as the engine's layer with nothing between the formula
and NumPy (no Tensor, no graph, no checks), every per-step intermediate written into arrays allocated once, the
matrix products as few and as large as the maths allows. Whatever an engine adds to this is its own cost.

LSTM (torch's gate order i, f, g, o; docs/backprop.md, "Recurrent layers"), per layer: every step's input
projection in one product (T N, in) x (in, 4H); per step one (N, H) x (H, 4H) product, the gates, c' = f c + i u,
h' = o tanh(c'). Backward per step: the gates' gradients into one (T, N, 4H) array, one (N, 4H) x (4H, H) product to
the previous step; then the weights' and the input's gradients in three products over all steps at once.
The sigmoids are computed as 0.5 tanh(0.5 a) + 0.5 so that one tanh covers all four gates (a column scale before
and after), and each gate's derivative as (1 - y)(y + beta), beta 0 for a sigmoid (y (1 - y)) and 1 for the tanh
(1 - y^2): four whole-row passes per step where gate-by-gate would be twelve calls.

Convolution (stride 1, dilation 1, one group; docs/backprop.md, "Convolution"): im2col by one strided copy per
kernel position into a (C, K, N, L) array, so that the forward is one product (O, C K) x (C K, N L) writing
(O, N L), and the input's gradient one product back into the same layout and col2im by one add per kernel position.
The values equal PyTorch's to float32 precision (tests/benchmarks/test_layer_floor.py).
"""

from __future__ import annotations

import numpy as np

# ----------------------------------------------------------------------------- LSTM


def _gate_columns(H: int, dtype):
    """Per gate column (i, f, g, o): the scale around the one tanh (0.5 for the sigmoids, 1 for g), the shift after
    it (0.5 for the sigmoids, 0 for g), and beta of the derivative (1 - y)(y + beta)."""
    scale = np.full(4 * H, 0.5, dtype)
    scale[2 * H : 3 * H] = 1
    shift = np.where(scale == 1, 0, 0.5).astype(dtype)
    beta = np.where(scale == 1, 1, 0).astype(dtype)
    return scale, shift, beta


def lstm(x, *weights):
    """x (T, N, in) through layers of (w_ih, w_hh, b_ih, b_hh), zero initial states: the last layer's h (T, N, H)."""
    saved = []
    for k in range(0, len(weights), 4):
        w_ih, w_hh, b_ih, b_hh = weights[k : k + 4]
        T, N, _ = x.shape
        H = w_hh.shape[1]
        scale, shift, _ = _gate_columns(H, x.dtype)
        gates = (x.reshape(T * N, -1) @ w_ih.T).reshape(T, N, 4 * H)  # the input projections of every step
        gates += b_ih + b_hh
        hs, cs = np.zeros((T + 1, N, H), x.dtype), np.zeros((T + 1, N, H), x.dtype)  # [0] the initial states
        tanh_c = np.empty((T, N, H), x.dtype)
        w_hh_t, rec, ig = w_hh.T, np.empty((N, 4 * H), x.dtype), np.empty((N, H), x.dtype)
        for t in range(T):
            a = gates[t]  # (N, 4H), activated in place
            a += np.matmul(hs[t], w_hh_t, out=rec)
            a *= scale
            np.tanh(a, out=a)
            a *= scale
            a += shift
            i, f, u, o = a[:, :H], a[:, H : 2 * H], a[:, 2 * H : 3 * H], a[:, 3 * H :]
            np.multiply(f, cs[t], out=cs[t + 1])
            cs[t + 1] += np.multiply(i, u, out=ig)
            np.tanh(cs[t + 1], out=tanh_c[t])
            np.multiply(o, tanh_c[t], out=hs[t + 1])
        saved.append((x, w_ih, w_hh, gates, hs, cs, tanh_c))
        x = hs[1:]
    return x, saved


def lstm_grad(saved, g):
    """The gradients of x and of every layer's (w_ih, w_hh, b_ih, b_hh), for the upstream gradient g of the output."""
    grads = []
    for x, w_ih, w_hh, gates, hs, cs, tanh_c in reversed(saved):
        T, N, H = tanh_c.shape
        _, _, beta = _gate_columns(H, g.dtype)
        da_all = np.empty((T, N, 4 * H), g.dtype)
        dh, dc = np.zeros((N, H), g.dtype), np.zeros((N, H), g.dtype)
        tmp, d1, d2 = np.empty((N, H), g.dtype), np.empty((N, 4 * H), g.dtype), np.empty((N, 4 * H), g.dtype)
        for t in range(T - 1, -1, -1):
            a, da = gates[t], da_all[t]
            i, f, u, o = a[:, :H], a[:, H : 2 * H], a[:, 2 * H : 3 * H], a[:, 3 * H :]
            dh += g[t]
            np.multiply(dh, tanh_c[t], out=da[:, 3 * H :])  # o-bar
            np.multiply(tanh_c[t], tanh_c[t], out=tmp)  # c-bar += h-bar o (1 - tanh^2 c')
            np.subtract(1, tmp, out=tmp)
            tmp *= o
            tmp *= dh
            dc += tmp
            np.multiply(dc, u, out=da[:, :H])  # i-bar
            np.multiply(dc, cs[t], out=da[:, H : 2 * H])  # f-bar
            np.multiply(dc, i, out=da[:, 2 * H : 3 * H])  # u-bar
            dc *= f  # to the state before
            np.subtract(1, a, out=d1)  # each gate's derivative, (1 - y)(y + beta)
            np.add(a, beta, out=d2)
            d1 *= d2
            da *= d1
            np.matmul(da, w_hh, out=dh)
        da2 = da_all.reshape(T * N, 4 * H)
        dw_hh = da2.T @ hs[:-1].reshape(T * N, H)
        dw_ih = da2.T @ x.reshape(T * N, -1)
        db = np.einsum("rn->n", da2)
        grads[:0] = [dw_ih, dw_hh, db, db.copy()]
        g = (da2 @ w_ih).reshape(x.shape)
    return (g, *grads)


# ----------------------------------------------------------------------------- convolution


def conv2d(x, w, b):
    """y = conv2d(x, w, b, padding=1) for a 3 x 3 (any odd square) kernel, stride 1."""
    N, C, Hh, W = x.shape
    O, _, k, _ = w.shape
    p = k // 2
    xp = np.zeros((C, N, Hh + 2 * p, W + 2 * p), x.dtype)
    xp[:, :, p : p + Hh, p : p + W] = x.transpose(1, 0, 2, 3)
    cols = np.empty((C, k, k, N, Hh, W), x.dtype)  # (C K, N L): the product's right operand as it is
    for r in range(k):
        for s in range(k):
            cols[:, r, s] = xp[:, :, r : r + Hh, s : s + W]
    y = w.reshape(O, -1) @ cols.reshape(C * k * k, -1)  # (O, N L)
    y += b[:, None]
    return y.reshape(O, N, Hh, W).transpose(1, 0, 2, 3), (x, w, cols)


def conv2d_grad(saved, g):
    """dw = g cols^T, db = sum g, dcols = w^T g, dx = col2im(dcols) (one add per kernel position)."""
    x, w, cols = saved
    N, C, Hh, W = x.shape
    O, _, k, _ = w.shape
    p = k // 2
    g2 = np.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(O, -1)  # (O, N L)
    dw = (g2 @ cols.reshape(C * k * k, -1).T).reshape(w.shape)
    db = np.einsum("on->o", g2)
    dcols = (w.reshape(O, -1).T @ g2).reshape(C, k, k, N, Hh, W)
    dxp = np.zeros((C, N, Hh + 2 * p, W + 2 * p), x.dtype)
    for r in range(k):
        for s in range(k):
            dxp[:, :, r : r + Hh, s : s + W] += dcols[:, r, s]
    return dxp[:, :, p : p + Hh, p : p + W].transpose(1, 0, 2, 3).copy(), dw, db


# op-table name -> (forward(*inputs) -> (output, saved), backward(saved, g) -> a gradient per input)
BARE_LAYERS = {"lstm": (lstm, lstm_grad), "conv2d": (conv2d, conv2d_grad)}
