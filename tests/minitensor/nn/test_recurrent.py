"""nn.RNN, nn.LSTM, nn.GRU and their cells against torch.nn: the same weights (copied by state_dict key, which must be
torch's names in torch's order, both ways), the same input and initial states, the same random upstream gradients on
every output; outputs, final states, the input's and initial states' gradients and every parameter's gradient
compared in float64 (round-off) and float32 (its precision), with the tolerances of minitensor/testing.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor import nn
from minitensor.testing import OP_RTOL, assert_close

DT = {"float64": (np.float64, torch.float64), "float32": (np.float32, torch.float32)}


def built(kind: str, dtype_name: str, **kw):
    """The same layer in both libraries, ours initialised by our init and loaded into torch's by key."""
    np_dt, t_dt = DT[dtype_name]
    mt.manual_seed(0)
    ours = getattr(nn, kind)(dtype=np_dt, **kw)
    theirs = getattr(torch.nn, kind)(dtype=t_dt, **kw)
    sd = ours.state_dict()
    assert list(sd) == list(theirs.state_dict()), "state_dict keys must be torch's names, in torch's order"
    for k, v in theirs.state_dict().items():
        assert tuple(v.shape) == tuple(np.shape(sd[k])), k
    theirs.load_state_dict({k: torch.tensor(np.array(v)) for k, v in sd.items()})
    return ours, theirs


def as_arrays(out) -> list:
    """The outputs of either library as a flat list of NumPy arrays."""
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in as_arrays(o)]
    return [out.detach().numpy() if isinstance(out, torch.Tensor) else out.detach().numpy()]


def flat(out) -> list:
    return [t for o in out for t in flat(o)] if isinstance(out, (tuple, list)) else [out]


def run_both(ours, theirs, inputs, dtype_name, seed=0):
    """Forward with `inputs` (arrays or tuples of arrays, None for none), backward of a random linear function of
    every output; compare outputs, every input's gradient and every parameter's gradient."""
    rng = np.random.default_rng(seed)
    rtol = OP_RTOL[dtype_name]

    def tensors(lib, a):
        if a is None:
            return None
        if isinstance(a, tuple):
            return tuple(tensors(lib, x) for x in a)
        return mt.tensor(a, requires_grad=True) if lib is mt else torch.tensor(a, requires_grad=True)

    xs_m = [tensors(mt, a) for a in inputs]
    xs_t = [tensors(torch, a) for a in inputs]
    out_m, out_t = ours(*xs_m), theirs(*xs_t)
    for k, (a, b) in enumerate(zip(as_arrays(out_m), as_arrays(out_t), strict=True)):
        assert_close(a, b, rtol, f"output {k}")
    grads = [rng.standard_normal(a.shape).astype(a.dtype) for a in as_arrays(out_t)]
    loss_m = sum((o * mt.tensor(g)).sum() for o, g in zip(flat(out_m), grads))
    loss_t = sum((o * torch.tensor(g)).sum() for o, g in zip(flat(out_t), grads))
    loss_m.backward()
    loss_t.backward()
    for k, (a, b) in enumerate(zip(flat(xs_m), flat(xs_t))):
        if a is not None:
            assert_close(a.grad.numpy(), b.grad.numpy(), rtol, f"gradient of input {k}")
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad.numpy(), theirs_params[name].grad.numpy(), rtol, f"gradient of {name}")


CONFIGS = [
    dict(),
    dict(batch_first=True),
    dict(num_layers=2, dropout=0.0),
    dict(bidirectional=True),
    dict(num_layers=2, bidirectional=True, batch_first=True),
    dict(bias=False),
]


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_layers_equal_torch(kind, config, dtype_name):
    ours, theirs = built(kind, dtype_name, input_size=3, hidden_size=4, **config)
    rng = np.random.default_rng(1)
    dt = DT[dtype_name][0]
    T, N = 5, 2
    x = rng.standard_normal((N, T, 3) if config.get("batch_first") else (T, N, 3)).astype(dt)
    D = 2 if config.get("bidirectional") else 1
    shape = (config.get("num_layers", 1) * D, N, 4)
    h0 = rng.standard_normal(shape).astype(dt)
    run_both(ours, theirs, [x], dtype_name)  # zero initial states
    ours.zero_grad()
    theirs.zero_grad()
    hx = (h0, rng.standard_normal(shape).astype(dt)) if kind == "LSTM" else h0
    run_both(ours, theirs, [x, hx], dtype_name, seed=2)  # given initial states, and their gradients


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_unbatched_and_relu(kind):
    kw = dict(nonlinearity="relu") if kind == "RNN" else {}
    ours, theirs = built(kind, "float64", input_size=3, hidden_size=2, num_layers=2, **kw)
    x = np.random.default_rng(3).standard_normal((4, 3))
    run_both(ours, theirs, [x], "float64")


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_equal_torch(kind, dtype_name):
    ours, theirs = built(kind, dtype_name, input_size=3, hidden_size=4)
    rng = np.random.default_rng(4)
    dt = DT[dtype_name][0]
    x, h = rng.standard_normal((2, 3)).astype(dt), rng.standard_normal((2, 4)).astype(dt)
    hx = (h, rng.standard_normal((2, 4)).astype(dt)) if kind == "LSTMCell" else h
    run_both(ours, theirs, [x, hx], dtype_name)


def test_state_dict_moves_from_torch():
    theirs = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True, dtype=torch.float64)
    ours = nn.LSTM(3, 4, num_layers=2, bidirectional=True, dtype=np.float64)
    ours.load_state_dict({k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(5).standard_normal((6, 2, 3))
    out, (h, c) = ours(mt.tensor(x))
    ref, (h_t, c_t) = theirs(torch.tensor(x))
    assert_close(out.detach().numpy(), ref.detach().numpy(), OP_RTOL["float64"])
    assert_close(c.detach().numpy(), c_t.detach().numpy(), OP_RTOL["float64"])


def test_dropout_between_layers_only_while_training():
    mt.manual_seed(0)
    lstm = nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = mt.randn(5, 2, 3)
    lstm.eval()
    a, b = lstm(x)[0], lstm(x)[0]
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    lstm.train()
    assert not np.array_equal(lstm(x)[0].detach().numpy(), a.detach().numpy())


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: nn.LSTM(3, 4, proj_size=2), "proj_size=2 is not supported"),
        (lambda: nn.RNN(3, 4, nonlinearity="gelu"), "Unknown nonlinearity"),
        (lambda: nn.GRU(3, 4, dropout=1.5), "dropout should be a number in range"),
        (lambda: nn.LSTM(3, 4)(mt.randn(5, 2, 7)), "input.size\\(-1\\) must be equal to input_size"),
        (lambda: nn.GRU(3, 4)(mt.randn(5, 2, 3), mt.randn(2, 2, 4)), "expected h_0 of shape \\(1, 2, 4\\)"),
        (lambda: nn.LSTM(3, 4)(mt.randn(5, 2, 3), mt.randn(1, 2, 4)), "hx must be a tuple"),
        (lambda: nn.RNN(3, 4)([1, 2, 3]), "PackedSequence is not supported"),
        (lambda: nn.LSTM(3, 4)(mt.zeros((0, 2, 3))), "expected sequence length to be larger than 0"),
        (lambda: nn.GRU(3, 4, batch_first=True)(mt.zeros((2, 0, 3))), "sequence length to be larger than 0"),
        (lambda: nn.RNN(3, 4)(mt.zeros((0, 3))), "sequence length to be larger than 0"),
    ],
)
def test_refusals(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def sigmoid(a):
    return 1 / (1 + np.exp(-a))


def test_the_hand_written_step_backwards_of_docs_backprop_equal_the_engine():
    """docs/backprop.md §14 writes the LSTM and GRU steps' backward out by hand: those formulas, in NumPy, give the
    gradients the engine's chain of primitives gives (and torch's cells)."""
    rng = np.random.default_rng(6)
    N, I, H = 3, 2, 4
    x, h, c = rng.standard_normal((N, I)), rng.standard_normal((N, H)), rng.standard_normal((N, H))
    hbar, cbar = rng.standard_normal((N, H)), rng.standard_normal((N, H))  # arriving at h' and c'

    lstm = nn.LSTMCell(I, H, dtype=np.float64)
    W_ih, W_hh = lstm.weight_ih.detach().numpy(), lstm.weight_hh.detach().numpy()
    a = x @ W_ih.T + lstm.bias_ih.detach().numpy() + h @ W_hh.T + lstm.bias_hh.detach().numpy()
    i, f, u, o = sigmoid(a[:, :H]), sigmoid(a[:, H : 2 * H]), np.tanh(a[:, 2 * H : 3 * H]), sigmoid(a[:, 3 * H :])
    c1 = f * c + i * u
    obar = hbar * np.tanh(c1)
    cb = cbar + hbar * o * (1 - np.tanh(c1) ** 2)
    ibar, fbar, ubar, c_prev = cb * u, cb * c, cb * i, cb * f
    abar = np.concatenate([ibar * i * (1 - i), fbar * f * (1 - f), ubar * (1 - u**2), obar * o * (1 - o)], axis=1)
    hand = {"x": abar @ W_ih, "h": abar @ W_hh, "c": c_prev, "weight_ih": abar.T @ x, "weight_hh": abar.T @ h}
    xs = {k: mt.tensor(v, requires_grad=True) for k, v in (("x", x), ("h", h), ("c", c))}
    h1, c1m = lstm(xs["x"], (xs["h"], xs["c"]))
    ((h1 * mt.tensor(hbar)).sum() + (c1m * mt.tensor(cbar)).sum()).backward()
    engine = {**{k: t.grad.numpy() for k, t in xs.items()}, "weight_ih": lstm.weight_ih.grad.numpy()}
    engine["weight_hh"] = lstm.weight_hh.grad.numpy()
    for k in hand:
        assert_close(engine[k], hand[k], OP_RTOL["float64"], f"LSTM {k}")

    gru = nn.GRUCell(I, H, dtype=np.float64)
    W_ih, W_hh, b_ih, b_hh = (p.detach().numpy() for p in (gru.weight_ih, gru.weight_hh, gru.bias_ih, gru.bias_hh))
    ax, ah = x @ W_ih.T + b_ih, h @ W_hh.T + b_hh
    r, z = sigmoid(ax[:, :H] + ah[:, :H]), sigmoid(ax[:, H : 2 * H] + ah[:, H : 2 * H])
    h_n = ah[:, 2 * H :]
    n = np.tanh(ax[:, 2 * H :] + r * h_n)
    nbar, zbar, h_direct = hbar * (1 - z), hbar * (h - n), hbar * z
    an = nbar * (1 - n**2)
    rbar = an * h_n
    ar, az = rbar * r * (1 - r), zbar * z * (1 - z)
    ax_bar = np.concatenate([ar, az, an], axis=1)  # to the input projection
    ah_bar = np.concatenate([ar, az, an * r], axis=1)  # to the hidden projection
    hand = {"x": ax_bar @ W_ih, "h": ah_bar @ W_hh + h_direct, "weight_ih": ax_bar.T @ x, "weight_hh": ah_bar.T @ h}
    xs = {k: mt.tensor(v, requires_grad=True) for k, v in (("x", x), ("h", h))}
    (gru(xs["x"], xs["h"]) * mt.tensor(hbar)).sum().backward()
    engine = {k: t.grad.numpy() for k, t in xs.items()}
    engine.update(weight_ih=gru.weight_ih.grad.numpy(), weight_hh=gru.weight_hh.grad.numpy())
    for k in hand:
        assert_close(engine[k], hand[k], OP_RTOL["float64"], f"GRU {k}")


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_second_derivatives_equal_torch(kind):
    """The layers are composites of primitives that are differentiable again: a gradient's gradient (create_graph)
    equals torch's, for a random upstream gradient and a random direction."""
    ours, theirs = built(kind, "float64", input_size=2, hidden_size=3, num_layers=2, bidirectional=True)
    rng = np.random.default_rng(7)
    x, g = rng.standard_normal((4, 2, 2)), rng.standard_normal((4, 2, 6))
    v = rng.standard_normal((4, 2, 2))
    results = []
    for lib, layer in ((mt, ours), (torch, theirs)):
        xt = lib.tensor(x, requires_grad=True)
        out = layer(xt)[0]
        (gx,) = lib.autograd.grad((out * lib.tensor(g)).sum(), [xt], create_graph=True)
        (ggx,) = lib.autograd.grad((gx * lib.tensor(v)).sum(), [xt])
        results.append(
            [
                gx.detach().numpy() if lib is torch else gx.detach().numpy(),
                ggx.detach().numpy() if lib is mt else ggx.detach().numpy(),
            ]
        )
    for a, b, what in zip(results[0], results[1], ("gradient", "second derivative")):
        assert_close(a, b, OP_RTOL["float64"], what)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_the_graph_and_the_backward_do_not_grow_with_the_length(kind):
    """One node for each layer's time loop: the graph has as many nodes for 32 steps as for 4, and no node of the
    backward writes a gradient of the input projection's size per step (as a composite's per-step slices would: a
    backward quadratic in the length)."""
    from minitensor.core import topological_order

    mt.manual_seed(0)
    layer = getattr(nn, kind)(3, 4, num_layers=2, bidirectional=True, dtype=np.float64)

    def nodes(T):
        out, _ = layer(mt.tensor(np.random.default_rng(T).standard_normal((T, 2, 3))))
        return [type(n).__name__ for n in topological_order(out.grad_fn)]

    short, long = nodes(4), nodes(32)
    assert len(short) == len(long), (len(short), len(long))
    assert sum(name.endswith("LayerBackward") for name in long) == 4  # 2 layers x 2 directions
