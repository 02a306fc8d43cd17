"""nn.BatchNorm1d and nn.BatchNorm2d against torch.nn: torch's parameter and buffer names in torch's order, then
several training steps and an evaluation step with the same input, comparing the output, the input's and parameters'
gradients (random upstream gradients) and the running statistics after each step, in float64 (round-off) and float32
(its precision). F.batch_norm's primitive is in the op table (tests/support/op_cases.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import OP_RTOL, assert_close

DT = {"float64": (np.float64, torch.float64), "float32": (np.float32, torch.float32)}
LAYERS = [("BatchNorm1d", (6, 3)), ("BatchNorm1d", (4, 3, 5)), ("BatchNorm2d", (2, 3, 4, 5))]
CONFIGS = [dict(), dict(momentum=None), dict(affine=False, eps=1e-3), dict(track_running_stats=False)]


def _built(kind: str, dtype_name: str, rng, **kw):
    np_dt, t_dt = DT[dtype_name]
    ours, theirs = getattr(mt.nn, kind)(3, dtype=np_dt, **kw), getattr(torch.nn, kind)(3, dtype=t_dt, **kw)
    assert list(ours.state_dict()) == list(theirs.state_dict()), "torch's names, in torch's order"
    if ours.affine:  # weights away from their initial ones and zeros
        w, b = rng.standard_normal(3).astype(np_dt), rng.standard_normal(3).astype(np_dt)
        ours.load_state_dict({**ours.state_dict(), "weight": w, "bias": b})
        theirs.load_state_dict({**theirs.state_dict(), "weight": torch.tensor(w), "bias": torch.tensor(b)})
    return ours, theirs


def _step(ours, theirs, shape, dtype_name, rng) -> None:
    np_dt, _ = DT[dtype_name]
    rtol = OP_RTOL[dtype_name]
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(np_dt)
    xm, xt = mt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ym, yt = ours(xm), theirs(xt)
    assert_close(ym.detach().numpy(), yt.detach().numpy(), rtol, "output")
    g = rng.standard_normal(shape).astype(np_dt)
    (ym * mt.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    assert_close(xm.grad.numpy(), xt.grad.numpy(), rtol, "input's gradient")
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad.numpy(), theirs_params[name].grad.numpy(), rtol, f"gradient of {name}")
        p.grad, theirs_params[name].grad = None, None
    ours_state = ours.state_dict()
    for key, v in theirs.state_dict().items():
        assert np.asarray(ours_state[key]).dtype == v.numpy().dtype, key
        assert_close(np.asarray(ours_state[key]), v.numpy(), rtol, key)


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
@pytest.mark.parametrize("kind, shape", LAYERS, ids=lambda v: v if isinstance(v, str) else "x".join(map(str, v)))
def test_batch_norm_equals_torch(kind, shape, config, dtype_name):
    """Three training steps (the running statistics move; momentum=None averages them), then evaluation."""
    rng = np.random.default_rng(0)
    ours, theirs = _built(kind, dtype_name, rng, **config)
    for _ in range(3):
        _step(ours, theirs, shape, dtype_name, rng)
    ours.eval(), theirs.eval()
    _step(ours, theirs, shape, dtype_name, rng)


def test_state_dict_moves_both_ways_and_keeps_the_counter_an_int():
    theirs = torch.nn.BatchNorm2d(4, dtype=torch.float64)
    theirs(torch.randn(3, 4, 2, 2, dtype=torch.float64))  # running statistics off their initial values
    ours = mt.nn.BatchNorm2d(4, dtype=np.float64)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    assert int(ours.num_batches_tracked.numpy()) == 1 and ours.num_batches_tracked.dtype == np.int64
    back = torch.nn.BatchNorm2d(4, dtype=torch.float64)
    back.load_state_dict({k: torch.tensor(np.asarray(v)) for k, v in ours.state_dict().items()})
    for k, v in theirs.state_dict().items():
        assert torch.equal(back.state_dict()[k], v), k
    ours.double()  # a dtype conversion leaves the integer counter alone, as torch's
    assert ours.num_batches_tracked.dtype == np.int64


@pytest.mark.parametrize(
    "make, x_shape, error, match",
    [
        (lambda: mt.nn.BatchNorm2d(3), (2, 3, 4), ValueError, r"BatchNorm2d: expected 4D input, got 3D input"),
        (lambda: mt.nn.BatchNorm1d(3), (2, 3, 4, 5), ValueError, r"BatchNorm1d: expected 2D or 3D input, got 4D"),
        (lambda: mt.nn.BatchNorm1d(3), (1, 3), ValueError, r"more than 1 value per channel when training"),
        (lambda: mt.nn.BatchNorm1d(4), (2, 3), ValueError, r"running_mean must be a Tensor of shape \(3,\)"),
        (lambda: mt.nn.BatchNorm1d(3, momentum="0.1"), None, TypeError, r"momentum must be a number or None"),
        (lambda: mt.nn.BatchNorm1d(0), None, ValueError, r"num_features must be positive"),
        (lambda: mt.nn.BatchNorm1d(3, eps=0), None, ValueError, r"eps must be a positive number"),
    ],
)
def test_refusals(make, x_shape, error, match):
    with pytest.raises(error, match=match):
        layer = make()
        layer(mt.randn(*x_shape))


def test_functional_needs_running_statistics_in_evaluation():
    with pytest.raises(ValueError, match="running_mean and running_var must be given when not training"):
        mt.nn.functional.batch_norm(mt.randn(4, 3), None, None)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (0, 3, 4)])
def test_an_empty_batch_gives_an_empty_result_as_torchs(shape):
    x, xt = (
        mt.zeros(shape, dtype=mt.float64, requires_grad=True),
        torch.zeros(shape, dtype=torch.float64, requires_grad=True),
    )
    C = shape[1] if len(shape) > 1 else 0
    rm, rv = mt.zeros(C, dtype=mt.float64), mt.ones(C, dtype=mt.float64)
    y = mt.nn.functional.batch_norm(x, rm, rv, training=True)
    yt = torch.nn.functional.batch_norm(
        xt, torch.zeros(C, dtype=torch.float64), torch.ones(C, dtype=torch.float64), training=True
    )
    assert y.shape == tuple(yt.shape)
    y.sum().backward()
    assert x.grad.shape == x.shape and rm.numpy().tolist() == [0.0] * C
