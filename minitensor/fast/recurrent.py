"""Speed devices of ops/recurrent.py's LSTM time loop: the forward (`lstm_steps`) and its first-order backward
(`lstm_backward`) on arrays allocated once, each step writing into its row of them.

The formulas build each step's gates, states and gradients as new small arrays, split and join the four gate blocks,
and stack the steps at the end: about 25 NumPy calls a step and a copy of every per-step result. The devices compute
the same steps with one call per whole-row pass: the step's pre-activation is written straight into its row of the
gates array (the input projection copied by the add that the step needs anyway), the three sigmoids and the tanh of a
row are one tanh between a column scale and a shift (sigmoid(a) = 0.5 tanh(0.5 a) + 0.5), each gate's derivative is
(1 - y)(y + beta) (beta 0 for a sigmoid, 1 for the tanh) over the whole row, and the states and the gradients go
into their rows in place. The same numbers to round-off, measured against the formulas in
tests/minitensor/fast/test_recurrent.py; the gain: docs/decisions/032-lstm-time-loop.md.
"""

from __future__ import annotations

import numpy as np

from .. import fast
from ..devices import is_host
from ..ops import recurrent
from ..ops.namespace import ARRAYS


def _gate_columns(H: int, dtype):
    """Per gate column (i, f, u, o): the scale around the one tanh (0.5 for the sigmoids, 1 for u), the shift after
    it (0.5 for the sigmoids, 0 for u), and beta of the derivative (1 - y)(y + beta)."""
    scale = np.full(4 * H, 0.5, dtype)
    scale[2 * H : 3 * H] = 1
    shift = np.where(scale == 1, 0, 0.5).astype(dtype)
    beta = np.where(scale == 1, 1, 0).astype(dtype)
    return scale, shift, beta


def lstm_steps_in_place(a_x, h0, c0, w_hh):
    """recurrent.lstm_steps(ARRAYS, ...) on host arrays, into (gates, c, tanh(c), h) allocated once."""
    if not is_host(a_x):
        return recurrent.lstm_steps(ARRAYS, a_x, h0, c0, w_hh)
    T, N, H = a_x.shape[0], h0.shape[0], h0.shape[-1]
    scale, shift, _ = _gate_columns(H, a_x.dtype)
    gates = np.empty(a_x.shape, a_x.dtype)
    cs, hs = np.empty((T + 1, N, H), a_x.dtype), np.empty((T + 1, N, H), a_x.dtype)
    tanh_cs = np.empty((T, N, H), a_x.dtype)
    cs[0], hs[0] = c0, h0
    w, rec, iu = w_hh.T, np.empty((N, 4 * H), a_x.dtype), np.empty((N, H), a_x.dtype)
    for t in range(T):
        a = np.add(a_x[t], np.matmul(hs[t], w, out=rec), out=gates[t])
        a *= scale
        np.tanh(a, out=a)
        a *= scale
        a += shift
        i, f, u, o = a[:, :H], a[:, H : 2 * H], a[:, 2 * H : 3 * H], a[:, 3 * H :]
        np.multiply(f, cs[t], out=cs[t + 1])
        cs[t + 1] += np.multiply(i, u, out=iu)
        np.tanh(cs[t + 1], out=tanh_cs[t])
        np.multiply(o, tanh_cs[t], out=hs[t + 1])
    return gates, cs, tanh_cs, hs


def lstm_backward_in_place(g, w_hh, gates, cs, tanh_cs, hs):
    """recurrent.lstm_backward(ARRAYS, ...) on host arrays: every step's gate gradient into its row of one array."""
    if not is_host(g):
        return recurrent.lstm_backward(ARRAYS, g, w_hh, gates, cs, tanh_cs, hs)
    T, N, H = tanh_cs.shape
    _, _, beta = _gate_columns(H, g.dtype)
    da_all = np.empty((T, N, 4 * H), g.dtype)
    dh, dc = np.zeros((N, H), g.dtype), g[T].copy()
    tmp, d1, d2 = np.empty((N, H), g.dtype), np.empty((N, 4 * H), g.dtype), np.empty((N, 4 * H), g.dtype)
    for t in range(T - 1, -1, -1):
        a, da = gates[t], da_all[t]
        i, f, u, o = a[:, :H], a[:, H : 2 * H], a[:, 2 * H : 3 * H], a[:, 3 * H :]
        dh += g[t]
        np.multiply(dh, tanh_cs[t], out=da[:, 3 * H :])  # o-bar
        np.multiply(tanh_cs[t], tanh_cs[t], out=tmp)  # c-bar += h-bar o (1 - tanh^2 c')
        np.subtract(1, tmp, out=tmp)
        tmp *= o
        tmp *= dh
        dc += tmp
        np.multiply(dc, u, out=da[:, :H])  # i-bar
        np.multiply(dc, cs[t], out=da[:, H : 2 * H])  # f-bar
        np.multiply(dc, i, out=da[:, 2 * H : 3 * H])  # u-bar
        dc *= f  # to the step before
        np.subtract(1, a, out=d1)  # each gate's derivative, (1 - y)(y + beta)
        np.add(a, beta, out=d2)
        d1 *= d2
        da *= d1
        np.matmul(da, w_hh, out=dh)
    dw_hh = da_all.reshape(T * N, 4 * H).T @ hs[:T].reshape(T * N, H)
    return da_all, dh, dc, dw_hh


fast.device("lstm_steps", lstm_steps_in_place, evidence="docs/decisions/032-lstm-time-loop.md")
fast.device("lstm_backward", lstm_backward_in_place, evidence="docs/decisions/032-lstm-time-loop.md")
