"""nn.Conv1d, nn.Conv2d, the pooling modules and nn.Flatten against torch.nn: torch's parameter names and shapes (a
state_dict moves both ways), its initialisation bounds, forward and every gradient for a random upstream gradient in
float64 and float32 (every padding_mode), a small convnet end to end, max pooling's indices, and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor import nn
from minitensor.nn import functional as F
from minitensor.testing import OP_RTOL, assert_close

DT = {"float64": (np.float64, torch.float64), "float32": (np.float32, torch.float32)}


def compare(ours, theirs, x, dtype_name, seed=0):
    """Load ours' weights into theirs by key; forward x; backward a random g; compare out, dx and every dparam."""
    sd = ours.state_dict()
    assert list(sd) == list(theirs.state_dict()), "state_dict keys must be torch's names, in torch's order"
    theirs.load_state_dict({k: torch.tensor(np.array(v)) for k, v in sd.items()})
    rtol = OP_RTOL[dtype_name]
    xm, xt = mt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_m, out_t = ours(xm), theirs(xt)
    assert_close(out_m.detach().numpy(), out_t.detach().numpy(), rtol, "output")
    g = np.random.default_rng(seed).standard_normal(tuple(out_t.shape)).astype(x.dtype)
    out_m.backward(mt.tensor(g))
    out_t.backward(torch.tensor(g))
    assert_close(xm.grad.numpy(), xt.grad.numpy(), rtol, "input gradient")
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad.numpy(), theirs_params[name].grad.numpy(), rtol, f"gradient of {name}")


LAYERS = [
    ("Conv2d", (3, 6, 3), dict(stride=2, padding=1), (2, 3, 9, 8)),
    ("Conv2d", (4, 6, (3, 2)), dict(dilation=(2, 1), groups=2, padding="same", bias=False), (2, 4, 7, 6)),
    ("Conv2d", (4, 4, 3), dict(groups=4, padding="valid"), (4, 6, 5)),  # depthwise, unbatched
    ("Conv1d", (3, 5, 4), dict(stride=2, padding=3, dilation=2), (2, 3, 12)),
    ("Conv2d", (2, 3, 3), dict(padding=2, padding_mode="reflect"), (2, 2, 6, 7)),
    ("Conv2d", (2, 3, 4), dict(padding="same", dilation=(1, 2), padding_mode="replicate"), (2, 2, 6, 7)),
    ("Conv2d", (2, 4, (3, 2)), dict(padding=(1, 3), stride=2, groups=2, padding_mode="circular"), (2, 6, 7)),
    ("Conv1d", (2, 3, 3), dict(padding=3, padding_mode="circular"), (2, 2, 5)),
    ("MaxPool2d", (3,), dict(stride=2, padding=1, ceil_mode=True), (2, 3, 8, 7)),
    ("MaxPool1d", (2,), dict(), (2, 3, 9)),
    ("AvgPool2d", ((2, 3),), dict(stride=1, padding=1, count_include_pad=False), (2, 3, 6, 5)),
    ("AvgPool2d", (3,), dict(ceil_mode=True, divisor_override=4), (2, 3, 8, 7)),
    ("AvgPool1d", (3,), dict(stride=2, padding=1), (2, 3, 9)),
    ("Flatten", (), dict(), (2, 3, 4, 5)),
    ("Flatten", (0, 2), dict(), (2, 3, 4, 5)),
]


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("layer", LAYERS, ids=lambda c: f"{c[0]}{c[1]}{c[2]}")
def test_layers_equal_torch(layer, dtype_name):
    kind, args, kwargs, shape = layer
    np_dt, t_dt = DT[dtype_name]
    params = dict(dtype=np_dt) if kind.startswith("Conv") else {}
    ours = getattr(nn, kind)(*args, **kwargs, **params)
    theirs = getattr(torch.nn, kind)(*args, **kwargs).to(t_dt)
    x = np.random.default_rng(1).standard_normal(shape).astype(np_dt)
    compare(ours, theirs, x, dtype_name)


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
def test_a_small_convnet_equals_torch(dtype_name):
    np_dt, t_dt = DT[dtype_name]

    def net(lib, **dt):
        return lib.nn.Sequential(
            lib.nn.Conv2d(1, 4, 3, padding=1, **dt),
            lib.nn.ReLU(),
            lib.nn.MaxPool2d(2),
            lib.nn.Conv2d(4, 8, 3, **dt),
            lib.nn.Tanh(),
            lib.nn.AvgPool2d(2),
            lib.nn.Flatten(),
            lib.nn.Linear(32, 3, **dt),
        )

    mt.manual_seed(0)
    x = np.random.default_rng(2).standard_normal((5, 1, 12, 12)).astype(np_dt)
    compare(net(mt, dtype=np_dt), net(torch, dtype=t_dt), x, dtype_name)


def test_state_dict_moves_from_torch_and_init_bounds():
    theirs = torch.nn.Conv2d(3, 8, (3, 5), groups=1, dtype=torch.float64)
    ours = nn.Conv2d(3, 8, (3, 5), dtype=np.float64)
    ours.load_state_dict({k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(3).standard_normal((2, 3, 7, 9))
    assert_close(ours(mt.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(), OP_RTOL["float64"])
    bound = 1 / math.sqrt(3 * 3 * 5)  # kaiming_uniform_(a=sqrt(5)) and the bias: both U(-1/sqrt(fan_in), ...)
    fresh = nn.Conv2d(3, 64, (3, 5))
    for p in (fresh.weight.detach().numpy(), fresh.bias.detach().numpy()):
        assert np.abs(p).max() <= bound and np.abs(p).max() > 0.8 * bound


def test_max_pool_indices_and_ties_as_torch():
    x = np.array([[[[1.0, 1.0, 0.0, 2.0], [1.0, -np.inf, 2.0, 2.0], [np.nan, 3.0, np.nan, 5.0], [0, 0, 5.0, 5.0]]]])
    for kwargs in (dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1), dict(kernel_size=2, dilation=2)):
        out, idx = F.max_pool2d(mt.tensor(x), return_indices=True, **kwargs)
        ref, ridx = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kwargs)
        np.testing.assert_array_equal(out.numpy(), ref.numpy())
        np.testing.assert_array_equal(idx.numpy(), ridx.numpy())
    every = np.full((1, 1, 3, 3), -np.inf)  # windows of -inf only: the gradient goes to the first entry inside
    xm, xt = mt.tensor(every, requires_grad=True), torch.tensor(every, requires_grad=True)
    F.max_pool2d(xm, 2, padding=1).sum().backward()
    torch.nn.functional.max_pool2d(xt, 2, padding=1).sum().backward()
    np.testing.assert_array_equal(xm.grad.numpy(), xt.grad.numpy())


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: nn.Conv2d(3, 4, 3, padding_mode="mirror"), "padding_mode must be one of"),
        (lambda: nn.Conv2d(1, 1, 3, padding=3, padding_mode="reflect")(mt.randn(1, 1, 3, 3)), "smaller than the input"),
        (lambda: nn.Conv1d(1, 1, 3, padding=4, padding_mode="circular")(mt.randn(1, 1, 3)), "more than once"),
        (lambda: nn.Conv2d(3, 4, 3, groups=2), "divisible by groups=2"),
        (lambda: nn.Conv2d(3, 4, 3, stride=2, padding="same"), "padding='same' is not supported for strided"),
        (lambda: nn.Conv2d(3, 4, 3)(mt.randn(1, 2, 5, 5)), "to have 3 channels"),
        (lambda: nn.Conv2d(3, 4, 5)(mt.randn(1, 3, 3, 3)), "too small"),
        (lambda: nn.Conv1d(3, 4, 0), "kernel_size must be an int >= 1"),
        (lambda: F.max_pool2d(mt.randn(1, 1, 5, 5), 2, padding=2), "pad should be at most half"),
        (lambda: F.avg_pool2d(mt.randn(1, 1, 5, 5), 2, divisor_override=0), "divisor_override"),
        (lambda: F.conv2d(mt.randn(1, 3, 5, 5).double(), mt.randn(4, 3, 3, 3).float()), "share one dtype"),
        (lambda: F.max_pool2d(mt.tensor(np.zeros((1, 1, 4, 4), dtype=np.int64)), 2), "floating-point input"),
    ],
)
def test_refusals(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


@pytest.mark.parametrize(
    "f, x_shape, w_shape, groups",
    [
        ("conv2d", (0, 3, 6, 6), (4, 3, 3, 3), 1),
        ("conv1d", (0, 4, 6), (6, 2, 3), 2),
        ("conv2d", (2, 4, 6, 6), (6, 2, 3, 3), 2),
    ],
)
def test_an_empty_batch_and_groups_give_torchs_values_and_gradients(f, x_shape, w_shape, groups):
    rng = np.random.default_rng(0)
    xa, wa = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    x, w = mt.tensor(xa, requires_grad=True), mt.tensor(wa, requires_grad=True)
    tx, tw = torch.tensor(xa, requires_grad=True), torch.tensor(wa, requires_grad=True)
    y, ty = getattr(mt.nn.functional, f)(x, w, groups=groups), getattr(torch.nn.functional, f)(tx, tw, groups=groups)
    g = rng.standard_normal(tuple(ty.shape))
    y.backward(mt.tensor(g))
    ty.backward(torch.tensor(g))
    for a, b in ((y, ty), (x.grad, tx.grad), (w.grad, tw.grad)):
        assert a.shape == tuple(b.shape)
        assert_close(a.detach().numpy(), b.detach().numpy(), OP_RTOL["float64"])


def test_a_one_tuple_stands_for_every_spatial_dim_as_in_torch():
    x = np.random.default_rng(1).standard_normal((2, 3, 9, 9))
    got = mt.nn.functional.avg_pool2d(mt.tensor(x), (3, 3), (1, 1), (1,), True, False, 2)
    want = torch.nn.functional.avg_pool2d(torch.tensor(x), (3, 3), (1, 1), (1,), True, False, 2)
    assert_close(got.numpy(), want.numpy(), OP_RTOL["float64"])
