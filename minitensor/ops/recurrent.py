"""LSTMLayer, GRULayer, RNNLayer: one recurrent layer over a whole sequence, one graph node each, backpropagation
through time by hand. The LSTM's is written out below; the GRU's and the RNN's follow the same pattern (their class
docstrings, docs/backprop.md).

docs/backprop.md ("Recurrent layers") derives the step below. Shapes: T steps, N rows, H hidden units; the gates in
torch's order i, f, g (here u), o.

    inputs   a_x (T, N, 4H) = x W_ih^T + b_ih + b_hh (every step's input projection, one product before),
             h0, c0 (N, H), W_hh (4H, H)
    step     a = a_x[t] + h W_hh^T;  i, f, o = sigmoid, u = tanh of its four column blocks
             c' = f c + i u,  h' = o tanh(c')
    output   (T + 1, N, H): h_1 ... h_T, then c_T (one array: the layer's output is its first T rows, a view)
    backward from the last step to the first, with h-bar = g[t] + the next step's, c-bar from c_T's row:
             o-bar = h-bar tanh(c'),  c-bar += h-bar o (1 - tanh^2 c'),  i-bar = c-bar u,  f-bar = c-bar c,
             u-bar = c-bar i,  c-bar <- c-bar f (to the step before);  a-bar = [i-bar i (1 - i), f-bar f (1 - f),
             u-bar (1 - u^2), o-bar o (1 - o)];  h-bar <- a-bar W_hh
             da_x[t] = a-bar;  dW_hh = sum_t a-bar_t^T h_t (one product over all steps);  dh0, dc0 the last carries
    forward mode: the step differentiated, ȧ = ȧ_x[t] + ḣ W_hh^T + h Ẇ_hh^T, ċ' = ḟ c + f ċ + i̇ u + i u̇,
             ḣ' = ȯ tanh(c') + o (1 - tanh^2 c') ċ'

A composite of per-step primitives would give the same numbers, but each step's slice a_x[t] would have a backward
that writes a gradient of a_x's full size: T of them, quadratic in T. Here every step's gradient is written once.
Under create_graph a backward recomputes its loop on Tensors (the formulas take `xp`), so every order is available.

Speed: the forward loop and the first-order backward are slots (`fast.use.lstm_steps`, `lstm_backward`);
minitensor/fast/recurrent.py fills them with the same loops on arrays allocated once.
"""

from __future__ import annotations

from .. import fast
from ..autograd import Function
from .namespace import ARRAYS


def lstm_steps(xp, a_x, h0, c0, w_hh):
    """The forward loop: (gates (T, N, 4H) activated [i, f, u, o], c (T + 1, N, H) from c0, tanh(c) (T, N, H) of
    c_1 ... c_T, h (T + 1, N, H) from h0)."""
    H = h0.shape[-1]
    w = xp.swapaxes(w_hh, 0, 1)
    gates, cs, tanh_cs, hs = [], [c0], [], [h0]
    for t in range(a_x.shape[0]):
        i, f, u, o = xp.split(a_x[t] + hs[-1] @ w, [H, 2 * H, 3 * H], axis=-1)
        i, f, u, o = xp.sigmoid(i), xp.sigmoid(f), xp.tanh(u), xp.sigmoid(o)
        cs.append(f * cs[-1] + i * u)
        tanh_cs.append(xp.tanh(cs[-1]))
        hs.append(o * tanh_cs[-1])
        gates.append(xp.concatenate([i, f, u, o], axis=-1))
    return xp.stack(gates), xp.stack(cs), xp.stack(tanh_cs), xp.stack(hs)


def lstm_backward(xp, g, w_hh, gates, cs, tanh_cs, hs):
    """(da_x (T, N, 4H), dh0, dc0, dW_hh) for g (T + 1, N, H): the gradients of h_1 ... h_T, then of c_T."""
    T, N, H = tanh_cs.shape
    dh, dc = None, g[T]  # the recurrent carries: h-bar from step t + 1 (none after the last), c-bar
    das = [None] * T
    for t in range(T - 1, -1, -1):
        i, f, u, o = xp.split(gates[t], [H, 2 * H, 3 * H], axis=-1)
        dh = g[t] if dh is None else g[t] + dh
        do = dh * tanh_cs[t]
        dc = dc + dh * o * (1 - tanh_cs[t] * tanh_cs[t])
        di, df, du = dc * u, dc * cs[t], dc * i
        dc = dc * f
        das[t] = xp.concatenate([di * i * (1 - i), df * f * (1 - f), du * (1 - u * u), do * o * (1 - o)], axis=-1)
        dh = das[t] @ w_hh
    da = xp.stack(das)
    dw_hh = xp.swapaxes(da.reshape(T * N, 4 * H), 0, 1) @ hs[:T].reshape(T * N, H)
    return da, dh, dc, dw_hh


fast.formula("lstm_steps", lambda a_x, h0, c0, w_hh: lstm_steps(ARRAYS, a_x, h0, c0, w_hh))
fast.formula("lstm_backward", lambda g, w_hh, *steps: lstm_backward(ARRAYS, g, w_hh, *steps))


class LSTMLayer(Function):
    """(h_1 ... h_T, c_T) = the LSTM's time loop over a_x (T, N, 4H) from (h0, c0) with W_hh (the module docstring);
    backward through time to a_x, h0, c0 and W_hh;  forward mode: the step's tangent carried through time"""

    @staticmethod
    def forward(ctx, a_x, h0, c0, w_hh):
        if a_x.shape[0] == 0:
            raise ValueError("LSTMLayer: expected a sequence of at least one step, got length 0")
        gates, cs, tanh_cs, hs = fast.use.lstm_steps(a_x, h0, c0, w_hh)
        ctx.save_for_backward(a_x, h0, c0, w_hh)
        ctx.save(gates=gates, cs=cs, tanh_cs=tanh_cs, hs=hs)
        return ARRAYS.concatenate([hs[1:], cs[-1:]], axis=0)  # (T + 1, N, H): h_1 ... h_T, c_T

    @staticmethod
    def backward(ctx, g):
        a_x, h0, c0, w_hh = ctx.saved_arrays
        if ctx.create_graph:  # on Tensors: the loop recomputed from the inputs, so that the gradient is differentiable
            return lstm_backward(ctx.xp, g, w_hh, *lstm_steps(ctx.xp, a_x, h0, c0, w_hh))
        return fast.use.lstm_backward(g, w_hh, ctx.gates, ctx.cs, ctx.tanh_cs, ctx.hs)

    @staticmethod
    def jvp(ctx, ta_x, th0, tc0, tw_hh):
        xp = ctx.xp
        a_x, h0, c0, w_hh = ctx.saved_arrays
        gates, cs, tanh_cs, hs = lstm_steps(xp, a_x, h0, c0, w_hh)
        H = h0.shape[-1]
        # a zero tangent where an input has none
        ta_x, dh, dc, tw_hh = (
            xp.zeros_like(x) if t is None else t for t, x in zip((ta_x, th0, tc0, tw_hh), (a_x, h0, c0, w_hh))
        )
        w, tw = xp.swapaxes(w_hh, 0, 1), xp.swapaxes(tw_hh, 0, 1)
        dhs = []
        for t in range(a_x.shape[0]):
            i, f, u, o = xp.split(gates[t], [H, 2 * H, 3 * H], axis=-1)
            di, df, du, do = xp.split(ta_x[t] + dh @ w + hs[t] @ tw, [H, 2 * H, 3 * H], axis=-1)
            di, df, du, do = di * i * (1 - i), df * f * (1 - f), du * (1 - u * u), do * o * (1 - o)
            dc = df * cs[t] + f * dc + di * u + i * du
            dh = do * tanh_cs[t] + o * (1 - tanh_cs[t] * tanh_cs[t]) * dc
            dhs.append(dh)
        return xp.concatenate([xp.stack(dhs), dc.reshape((1,) + dc.shape)], axis=0)


# ----------------------------------------------------------------------------- Elman RNN


def _sequence(a_x, who: str) -> None:
    if a_x.shape[0] == 0:
        raise ValueError(f"{who}: expected a sequence of at least one step, got length 0")


def rnn_steps(xp, a_x, h0, w_hh, relu: bool):
    """The forward loop h' = act(a_x[t] + h W_hh^T): h (T + 1, N, H) from h0."""
    w = xp.swapaxes(w_hh, 0, 1)
    hs = [h0]
    for t in range(a_x.shape[0]):
        a = a_x[t] + hs[-1] @ w
        hs.append(xp.relu(a) if relu else xp.tanh(a))
    return xp.stack(hs)


def rnn_act_grad(xp, h, g, relu: bool):
    """g act'(a), read from h = act(a): g (1 - h^2) for tanh; for relu g where h > 0 (or is NaN), else 0 (selected,
    as ops' Relu: relu'(0) = 0, torch's)."""
    return xp.zero_where(h <= 0, g) if relu else g * (1 - h * h)


def rnn_backward(xp, g, w_hh, hs, relu: bool):
    """(da_x (T, N, H), dh0, dW_hh) for g (T, N, H), the gradients of h_1 ... h_T."""
    T = g.shape[0]
    dh, das = None, [None] * T
    for t in range(T - 1, -1, -1):
        dh = g[t] if dh is None else g[t] + dh
        das[t] = rnn_act_grad(xp, hs[t + 1], dh, relu)
        dh = das[t] @ w_hh
    da = xp.stack(das)
    N, H = hs.shape[1:]
    return da, dh, xp.swapaxes(da.reshape(T * N, H), 0, 1) @ hs[:T].reshape(T * N, H)


class RNNLayer(Function):
    """h_1 ... h_T of h' = act(a_x[t] + h W_hh^T) (tanh, or relu), a_x = x W_ih^T + b_ih + b_hh (T, N, H), from h0;
    backward through time: a-bar = (g[t] + h-bar) act'(a), h-bar <- a-bar W_hh, dW_hh = sum_t a-bar_t^T h_{t-1};
    forward mode: ḣ' = act'(a) (ȧ_x[t] + ḣ W_hh^T + h Ẇ_hh^T)"""

    @staticmethod
    def forward(ctx, a_x, h0, w_hh, relu=False):
        _sequence(a_x, "RNNLayer")
        hs = rnn_steps(ARRAYS, a_x, h0, w_hh, relu)
        ctx.save_for_backward(a_x, h0, w_hh)
        ctx.save(hs=hs)
        ctx.relu = relu
        return hs[1:]

    @staticmethod
    def backward(ctx, g):
        a_x, h0, w_hh = ctx.saved_arrays
        hs = ctx.intermediate(ctx.hs, rnn_steps, a_x, h0, w_hh, ctx.relu)
        return rnn_backward(ctx.xp, g, w_hh, hs, ctx.relu)

    @staticmethod
    def jvp(ctx, ta_x, th0, tw_hh):
        xp = ctx.xp
        a_x, h0, w_hh = ctx.saved_arrays
        hs = rnn_steps(xp, a_x, h0, w_hh, ctx.relu)
        ta_x, dh, tw_hh = (xp.zeros_like(x) if t is None else t for t, x in zip((ta_x, th0, tw_hh), (a_x, h0, w_hh)))
        w, tw = xp.swapaxes(w_hh, 0, 1), xp.swapaxes(tw_hh, 0, 1)
        dhs = []
        for t in range(a_x.shape[0]):
            dh = rnn_act_grad(xp, hs[t + 1], ta_x[t] + dh @ w + hs[t] @ tw, ctx.relu)
            dhs.append(dh)
        return xp.stack(dhs)


# ----------------------------------------------------------------------------- GRU


def gru_steps(xp, a_x, h0, w_hh, b_hh=None):
    """The forward loop h' = n + z (h - n) with a_h = h W_hh^T + b_hh, r, z = sigmoid(a_x[r, z] + a_h[r, z]),
    n = tanh(a_x[n] + r a_h[n]): (gates (T, N, 3H) [r, z, n], a_h[n] (T, N, H), h (T + 1, N, H) from h0)."""
    H = h0.shape[-1]
    w = xp.swapaxes(w_hh, 0, 1)
    gates, h_ns, hs = [], [], [h0]
    for t in range(a_x.shape[0]):
        a_h = hs[-1] @ w if b_hh is None else hs[-1] @ w + b_hh
        xr, xz, xn = xp.split(a_x[t], [H, 2 * H], axis=-1)
        hr, hz, hn = xp.split(a_h, [H, 2 * H], axis=-1)
        r, z = xp.sigmoid(xr + hr), xp.sigmoid(xz + hz)
        n = xp.tanh(xn + r * hn)
        hs.append(n + z * (hs[-1] - n))
        gates.append(xp.concatenate([r, z, n], axis=-1))
        h_ns.append(hn)
    return xp.stack(gates), xp.stack(h_ns), xp.stack(hs)


def gru_backward(xp, g, w_hh, gates, h_ns, hs, with_bias: bool):
    """(da_x (T, N, 3H), dh0, dW_hh, db_hh or None) for g (T, N, H), the gradients of h_1 ... h_T."""
    T, N, H = h_ns.shape
    dh, dxs, dhs = None, [None] * T, [None] * T
    for t in range(T - 1, -1, -1):
        r, z, n = xp.split(gates[t], [H, 2 * H], axis=-1)
        dh = g[t] if dh is None else g[t] + dh
        dn = dh * (1 - z) * (1 - n * n)  # the gradient of n's pre-activation
        dz = dh * (hs[t] - n) * z * (1 - z)
        dr = dn * h_ns[t] * r * (1 - r)
        dxs[t] = xp.concatenate([dr, dz, dn], axis=-1)
        dhs[t] = xp.concatenate([dr, dz, dn * r], axis=-1)  # the gradient of a_h = h W_hh^T + b_hh
        dh = dh * z + dhs[t] @ w_hh
    da_h = xp.stack(dhs).reshape(T * N, 3 * H)
    dw_hh = xp.swapaxes(da_h, 0, 1) @ hs[:T].reshape(T * N, H)
    return xp.stack(dxs), dh, dw_hh, (xp.sum(da_h, axis=0) if with_bias else None)


class GRULayer(Function):
    """h_1 ... h_T of the GRU's step (gru_steps) over a_x = x W_ih^T + b_ih (T, N, 3H) from h0, with W_hh (3H, H) and
    b_hh (3H,) (optional); backward through time (docs/backprop.md, "Recurrent layers"): per step n-bar, z-bar, r-bar,
    da_x[t] = [r-bar, z-bar, n-bar] (pre-activations), the hidden projection's [r-bar, z-bar, n-bar r], h-bar <- h-bar z
    + that W_hh; dW_hh and db_hh summed over the steps in one product and one sum;  forward mode: the step
    differentiated"""

    max_inputs = 4  # a_x, h0, w_hh, b_hh; b_hh optional

    @staticmethod
    def forward(ctx, a_x, h0, w_hh, b_hh=None):
        _sequence(a_x, "GRULayer")
        gates, h_ns, hs = gru_steps(ARRAYS, a_x, h0, w_hh, b_hh)
        ctx.save_for_backward(a_x, h0, w_hh) if b_hh is None else ctx.save_for_backward(a_x, h0, w_hh, b_hh)
        ctx.save(gates=gates, h_ns=h_ns, hs=hs)
        return hs[1:]

    @staticmethod
    def backward(ctx, g):
        a_x, h0, w_hh, *b_hh = ctx.saved_arrays
        b_hh = b_hh[0] if b_hh else None
        steps = ctx.gates, ctx.h_ns, ctx.hs
        if ctx.create_graph:  # on Tensors: the loop recomputed from the inputs, so that the gradient is differentiable
            steps = gru_steps(ctx.xp, a_x, h0, w_hh, b_hh)
        return gru_backward(ctx.xp, g, w_hh, *steps, with_bias=b_hh is not None)

    @staticmethod
    def jvp(ctx, ta_x, th0, tw_hh, tb_hh=None):
        xp = ctx.xp
        a_x, h0, w_hh, *b_hh = ctx.saved_arrays
        gates, h_ns, hs = gru_steps(xp, a_x, h0, w_hh, b_hh[0] if b_hh else None)
        H = h0.shape[-1]
        ta_x, dh, tw_hh = (xp.zeros_like(x) if t is None else t for t, x in zip((ta_x, th0, tw_hh), (a_x, h0, w_hh)))
        w, tw = xp.swapaxes(w_hh, 0, 1), xp.swapaxes(tw_hh, 0, 1)
        dhs = []
        for t in range(a_x.shape[0]):
            r, z, n = xp.split(gates[t], [H, 2 * H], axis=-1)
            ta_h = dh @ w + hs[t] @ tw if tb_hh is None else dh @ w + hs[t] @ tw + tb_hh
            xr, xz, xn = xp.split(ta_x[t], [H, 2 * H], axis=-1)
            hr, hz, hn = xp.split(ta_h, [H, 2 * H], axis=-1)
            dr, dz = r * (1 - r) * (xr + hr), z * (1 - z) * (xz + hz)
            dn = (1 - n * n) * (xn + dr * h_ns[t] + r * hn)
            dh = dn + dz * (hs[t] - n) + z * (dh - dn)
            dhs.append(dh)
        return xp.stack(dhs)
