"""Gradients and tangents that the user gives the engine, checked against what they stand for before any work:
`y.backward(g)`, `mt.autograd.grad(outputs, inputs, grad_outputs)`, the func and functional transforms' cotangents
and tangents, `make_dual`, what a tensor hook returns, what a custom Function's backward returns, and `.grad =`.

Each must have its output's (or primal's) shape, dtype and device. A wrong one is refused in torch's words
("Mismatch in shape: grad_output[0] has a shape of ...", "invalid gradient at index 0 - expected device ... but
got ...") naming both sides, and nothing is accumulated or freed by the refused call. As in torch's engine, a
0-d gradient on another device is moved to the output's. Deviation from PyTorch, flagged: torch casts a root
gradient of another floating dtype silently; here it is refused (no implicit cast).

"cuda" is the strict fake device (minitensor/fakecuda.py): without these checks a gradient from the other
device fails deep inside it, or (a leaf, a hook) lands silently on the wrong device.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import minitensor as mt
import minitensor.autograd.forward_ad as fwAD
from minitensor import devices, fakecuda
from minitensor.testing import OP_RTOL, assert_close


@pytest.fixture(autouse=True)
def fake():
    previous = devices.use_fake_cuda(True)
    yield
    devices.use_fake_cuda(previous)


DIRECTIONS = [("cuda", "cpu"), ("cpu", "cuda")]  # (where the output lives, where the given gradient lives)


def leaf(device, shape=(3,), seed=0) -> mt.Tensor:
    rng = np.random.default_rng(seed)
    return mt.tensor(rng.standard_normal(shape), device=device, requires_grad=True)


def upstream(device, shape=(3,), seed=1, dtype=np.float64) -> mt.Tensor:
    return mt.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype), device=device)


def device_message(expected, got, index: int = 0) -> str:
    return re.escape(f"invalid gradient at index {index} - expected device {full(expected)} but got {full(got)}")


def full(device: str) -> str:
    """A device's full name, as the engine prints it: "cuda" is cuda:0."""
    return "cuda:0" if device == "cuda" else device


# ----------------------------------------------------------------------------- the root gradient
ROOT_CALLS = {
    "backward": lambda x, y, g: y.backward(g),
    "backward_array": lambda x, y, g: y.backward(g._data),
    "autograd.backward": lambda x, y, g: mt.autograd.backward([y], [g]),
    "grad": lambda x, y, g: mt.autograd.grad(y, x, g),
    "grad_create_graph": lambda x, y, g: mt.autograd.grad(y, x, g, create_graph=True),
    "leaf_root": lambda x, y, g: x.backward(g),
}


@pytest.mark.parametrize("call", sorted(ROOT_CALLS))
@pytest.mark.parametrize("out_dev, g_dev", DIRECTIONS)
def test_a_root_gradient_on_another_device_is_refused_before_any_work(call, out_dev, g_dev):
    x = leaf(out_dev)
    y = x * 2
    with pytest.raises(
        RuntimeError,
        match=device_message(out_dev, g_dev),
    ):
        ROOT_CALLS[call](x, y, upstream(g_dev))
    assert x.grad is None
    y.backward(upstream(out_dev))  # the graph was not freed by the refused call
    assert x.grad.device == x.device


def test_the_second_root_gradient_is_named_by_its_index():
    x = leaf("cuda")
    with pytest.raises(RuntimeError, match=device_message("cuda:0", "cpu", index=1)):
        mt.autograd.grad([x * 2, x * 3], x, [upstream("cuda"), upstream("cpu")])


def test_shape_mismatch_in_torchs_words():
    """The same call in torch and here: the same sentence (torch prints torch.Size([2]) where we print (2,))."""
    ours, theirs = leaf("cpu"), torch.tensor(leaf("cpu").detach().numpy(), requires_grad=True)
    for gshape in [(2,), (1, 3), ()]:
        with pytest.raises(RuntimeError) as t_err:
            (theirs * 2).backward(torch.ones(gshape, dtype=torch.float64))
        with pytest.raises(RuntimeError) as m_err:
            (ours * 2).backward(mt.ones(*gshape, dtype=mt.float64))
        expected = str(t_err.value).replace("torch.Size([", "(").replace("])", ",)").replace("(,)", "()").rstrip(".")
        expected = expected.replace("(1, 3,)", "(1, 3)")
        assert expected in str(m_err.value), (str(t_err.value), str(m_err.value))
    with pytest.raises(RuntimeError, match=re.escape("grad_output[1] has a shape of (4,) and output[1] has a shape")):
        mt.autograd.grad([ours * 2, ours * 3], ours, [mt.ones(3, dtype=mt.float64), mt.ones(4, dtype=mt.float64)])
    assert ours.grad is None


@pytest.mark.parametrize("call", ["backward", "grad"])
def test_a_root_gradient_of_another_dtype_is_refused(call):
    x = leaf("cuda")
    with pytest.raises(TypeError, match=r"grad_output\[0\] has dtype float32 and output\[0\] has dtype float64"):
        ROOT_CALLS[call](x, x * 2, upstream("cuda", dtype=np.float32))
    assert x.grad is None


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("out_dev, g_dev", DIRECTIONS)
def test_a_0d_root_gradient_moves_to_the_outputs_device_as_in_torch(out_dev, g_dev, create_graph):
    """torch's engine moves a 0-d gradient onto the output's device (validate_outputs); the values are torch's."""
    x = leaf(out_dev)
    y = (x * x).sum()
    scale = mt.tensor(0.37, dtype=mt.float64, device=g_dev)
    (gx,) = mt.autograd.grad(y, x, scale, create_graph=create_graph)
    assert gx.device == x.device
    tx = torch.tensor(devices.to_host(x._data), requires_grad=True)
    (ref,) = torch.autograd.grad((tx * tx).sum(), tx, torch.tensor(0.37, dtype=torch.float64))
    assert_close(devices.to_host(gx._data), ref.numpy(), OP_RTOL["float64"])


# ----------------------------------------------------------------------------- transforms' cotangents and tangents
TRANSFORMS = {
    "func.vjp": lambda x, v: mt.func.vjp(lambda t: t * 2, x)[1](v),
    "func.jvp": lambda x, v: mt.func.jvp(lambda t: t * 2, (x,), (v,)),
    "functional.vjp": lambda x, v: mt.autograd.functional.vjp(lambda t: t * 2, x, v),
    "functional.jvp": lambda x, v: mt.autograd.functional.jvp(lambda t: t * 2, x, v),
    "functional.vhp": lambda x, v: mt.autograd.functional.vhp(lambda t: (t**3).sum(), x, v),
    "functional.hvp": lambda x, v: mt.autograd.functional.hvp(lambda t: (t**3).sum(), x, v),
    "make_dual": lambda x, v: _make_dual(x, v),
}


def _make_dual(x, v):
    with fwAD.dual_level():
        return fwAD.make_dual(x, v)


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
@pytest.mark.parametrize("out_dev, g_dev", DIRECTIONS)
def test_a_transforms_vector_on_another_device_is_refused_naming_both(name, out_dev, g_dev):
    x = leaf(out_dev).detach()
    with pytest.raises(RuntimeError) as err:
        TRANSFORMS[name](x, upstream(g_dev))
    text = str(err.value)
    assert full(out_dev) in text and full(g_dev) in text, text
    assert "Expected all tensors" not in text and "fakecuda" not in text, text  # named at the door, not inside


# ----------------------------------------------------------------------------- hooks and custom Functions
HOOK_RESULTS = {
    "float32": lambda g: g.float(),
    "other_device": lambda g: g.to("cpu" if g.device.type == "cuda" else "cuda"),
    "host_array_on_device": lambda g: np.ones(g.shape),
}


@pytest.mark.parametrize("kind", sorted(HOOK_RESULTS))
@pytest.mark.parametrize("on_leaf", [True, False])
@pytest.mark.parametrize("device", ["cuda", "cpu"], ids=["on_device", "on_cpu"])
def test_a_hook_that_changes_the_gradients_dtype_or_device_is_refused(kind, on_leaf, device):
    """torch: "hook '<lambda>' has changed the type of value" for a dtype or device change, on a leaf or not."""
    x = leaf(device)
    h = x if on_leaf else x * 1
    h.register_hook(HOOK_RESULTS[kind])
    if kind == "host_array_on_device" and device == "cpu":  # a host array for a host gradient is a fine result
        (h * 2).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.ones(3))  # the hook replaced it
        return
    with pytest.raises(RuntimeError, match="has changed the type of value"):
        (h * 2).sum().backward()
    assert x.grad is None
    tx = torch.tensor(devices.to_host(x._data), requires_grad=True)
    th = tx if on_leaf else tx * 1
    th.register_hook(lambda g: g.float())
    with pytest.raises(RuntimeError, match="has changed the type of value"):
        (th * 2).sum().backward()


def _function_returning(bad):
    class Returns(mt.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return bad(g)

    return Returns


@pytest.mark.parametrize("on_leaf", [True, False])
@pytest.mark.parametrize("device", ["cuda", "cpu"], ids=["on_device", "on_cpu"])
def test_a_custom_functions_gradient_on_another_device_is_refused(on_leaf, device):
    other = "cpu" if device == "cuda" else "cuda"
    x = leaf(device)
    h = x if on_leaf else x * 1
    op = _function_returning(lambda g: devices.to_device(g, other))
    with pytest.raises(
        RuntimeError, match=r"ReturnsBackward returned an invalid gradient at index 0 - expected device"
    ):
        op.apply(h).sum().backward()
    assert x.grad is None


@pytest.mark.parametrize("device", ["cuda", "cpu"], ids=["on_device", "on_cpu"])
def test_a_custom_functions_0d_gradient_on_another_device_is_moved(device):
    other = "cpu" if device == "cuda" else "cuda"
    x = mt.tensor(1.5, dtype=mt.float64, device=device, requires_grad=True)
    op = _function_returning(lambda g: devices.to_device(g * 2, other))
    op.apply(x).backward()
    assert x.grad.device == x.device and float(x.grad) == 2.0


# ----------------------------------------------------------------------------- .grad assignment
@pytest.mark.parametrize("device", ["cuda", "cpu"], ids=["on_device", "on_cpu"])
def test_assigning_a_grad_of_another_device_shape_or_dtype_is_refused(device):
    other = "cpu" if device == "cuda" else "cuda"
    x = leaf(device)
    for bad, words in [
        (upstream(other), "is on device"),
        (upstream(device, shape=(2,)), "has shape"),
        (upstream(device, dtype=np.float32), "has dtype"),
    ]:
        with pytest.raises(RuntimeError, match="assigned grad " + words):
            x.grad = bad
        assert x.grad is None
    x.grad = upstream(device)
    assert type(x.grad._data) is (fakecuda.FakeArray if device == "cuda" else np.ndarray)
