"""The LSTM time loop's speed devices (minitensor/fast/recurrent.py: lstm_steps_in_place, lstm_backward_in_place)
against their formulas (ops/recurrent.py's lstm_steps, lstm_backward), alone and through nn.LSTM, to the dtype's
tolerance: the devices' sigmoid is 0.5 tanh(0.5 a) + 0.5, the formula's 1 / (1 + e^-a), equal to round-off."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor.fast import recurrent as fast_recurrent
from minitensor.ops import recurrent
from minitensor.ops.namespace import ARRAYS
from minitensor.testing import OP_RTOL, assert_close
from tests.support.fast_devices import devices_on, formula_and_device_runs  # noqa: F401 (devices_on: in slots)


def loop_inputs(dtype, T=6, N=3, H=5, spread=1.0, seed=0):
    """a_x (T, N, 4H), h0, c0 (N, H), W_hh (4H, H), an upstream gradient (T + 1, N, H); `spread` scales a_x, so
    that a large one saturates the gates."""
    rng = np.random.default_rng(seed)
    a_x = rng.standard_normal((T, N, 4 * H)) * spread
    h0, c0 = rng.standard_normal((N, H)), rng.standard_normal((N, H))
    w_hh, g = rng.standard_normal((4 * H, H)) / np.sqrt(H), rng.standard_normal((T + 1, N, H))
    return [a.astype(dtype) for a in (a_x, h0, c0, w_hh, g)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("spread, T", [(1.0, 6), (30.0, 6), (1.0, 1)])
def test_the_in_place_loops_equal_the_formulas(dtype, spread, T):
    """The forward's four arrays and the backward's four gradients, called alone: ordinary and saturated gates
    (where the tanh form of the sigmoid meets 0 and 1), and a sequence of one step."""
    a_x, h0, c0, w_hh, g = loop_inputs(dtype, T=T, spread=spread)
    want = recurrent.lstm_steps(ARRAYS, a_x, h0, c0, w_hh)
    got = fast_recurrent.lstm_steps_in_place(a_x, h0, c0, w_hh)
    rtol = OP_RTOL[np.dtype(dtype).name]
    for name, a, b in zip(("gates", "c", "tanh c", "h"), got, want):
        assert a.dtype == b.dtype == dtype and a.shape == b.shape, name
        assert_close(a, b, rtol, name)
    want = recurrent.lstm_backward(ARRAYS, g, w_hh, *want)
    got = fast_recurrent.lstm_backward_in_place(g, w_hh, *got)
    for name, a, b in zip(("da_x", "dh0", "dc0", "dW_hh"), got, want):
        assert a.dtype == b.dtype == dtype and a.shape == b.shape, name
        assert_close(a, b, rtol, name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nn_lstm_on_the_devices_equals_it_on_the_formulas(dtype):
    """A two-layer bidirectional nn.LSTM forward and backward, the devices in their slots against the formulas."""
    mt.manual_seed(0)
    lstm = mt.nn.LSTM(4, 5, num_layers=2, bidirectional=True, dtype=dtype)
    weights = [p.detach().numpy().copy() for p in lstm.parameters()]
    names = [n for n, _ in lstm.named_parameters()]
    x = np.random.default_rng(2).standard_normal((7, 3, 4)).astype(dtype)

    def run(x, *ws):
        return mt.func.functional_call(lstm, dict(zip(names, ws)), (x,))[0]

    plain, quick = formula_and_device_runs(run, [x, *weights])
    for i, (p, q) in enumerate(zip(plain, quick)):
        assert p.dtype == q.dtype == dtype and p.shape == q.shape
        assert_close(q, p, OP_RTOL[np.dtype(dtype).name], f"output and gradients [{i}]")
