"""Helpers of the speed-device tests (tests/minitensor/fast/): each device run against its plain formula."""

from __future__ import annotations

import pytest

from minitensor import fast


@pytest.fixture(autouse=True)
def devices_on():
    """Every device in its slot, whatever MT_FAST says in the environment (a test runs a device against its formula,
    and turns the formulas on itself where it needs them)."""
    with fast.speed(True):
        yield


def formula(name: str):
    """The plain formula registered under `name`."""
    return fast.registered()[name].formula


def device(name: str):
    """The speed device registered under `name`."""
    return fast.registered()[name].device


def outputs_and_grads(fn, inputs, g_seed: int = 1) -> list:
    """fn(*Tensors of inputs), then its backward with a random upstream gradient: [output, grad of each input], as
    copied arrays."""
    import numpy as np

    import minitensor as mt

    ts = [mt.tensor(a, requires_grad=True) for a in inputs]
    y = fn(*ts)
    y.backward(mt.tensor(np.random.default_rng(g_seed).standard_normal(y.shape).astype(y.dtype)))
    return [y._data.copy()] + [t.grad._data.copy() for t in ts]


def formula_and_device_runs(fn, inputs) -> tuple:
    """outputs_and_grads with the plain formulas in every slot, then with the devices."""
    with fast.speed(False):
        plain = outputs_and_grads(fn, inputs)
    with fast.speed(True):
        quick = outputs_and_grads(fn, inputs)
    return plain, quick


def assert_bitwise(got: list, want: list, what: str = "") -> None:
    """Each array of got equal to want's bit for bit: values, dtype and the sign of zeros."""
    import numpy as np

    assert len(got) == len(want), what
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype, f"{what} [{i}]: {a.dtype} against {b.dtype}"
        np.testing.assert_array_equal(a, b, err_msg=f"{what} [{i}]")
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b), err_msg=f"{what} [{i}] signs")


def some(rng, shape, scale=1.0):
    return rng.standard_normal(shape) * scale


def tangent_subsets(n: int) -> list[tuple[bool, ...]]:
    """Which of n inputs carry a tangent: all of them, and each alone."""
    return [(True,) * n] + [tuple(i == j for j in range(n)) for i in range(n)] if n > 1 else [(True,)]


def check_backward_jvp(rng, monkeypatch, op, rule, shapes, fn, dtype_name: str) -> None:
    """Where nothing records the backward (tangent_grad), op.backward_jvp = rule (the speed device) gives the
    gradients and their tangents on arrays in one call; without it (its formula: None) the engine runs op's backward
    on Tensors, each primitive with its own tangent. For every subset of inputs with a tangent the two agree to the
    dtype's tolerance (fn: the loss's function of the op's inputs, of the given shapes)."""
    import numpy as np

    import minitensor as mt
    from minitensor.autograd import forward_ad as fw
    from minitensor.testing import OP_RTOL, assert_close

    def _np(t):
        return t.detach().numpy().copy()

    dtype = np.dtype(dtype_name)
    arrays = [(some(rng, shape) + (1.0 if i else 0.0)).astype(dtype) for i, shape in enumerate(shapes)]
    c = mt.tensor(some(rng, fn(*(mt.tensor(a) for a in arrays)).shape).astype(dtype))
    calls = []
    monkeypatch.setattr(op, "backward_jvp", lambda *a: calls.append(1) or rule(*a))

    def grads_and_tangents(flags):
        with fw.dual_level():
            leaves = [mt.tensor(a, requires_grad=True) for a in arrays]
            duals = [
                fw.make_dual(t, mt.tensor(some(rng, t.shape).astype(dtype))) if f else t for t, f in zip(leaves, flags)
            ]
            loss = (fn(*duals).tanh() * c).sum()
            grads = mt.autograd.tangent_grad(loss, duals)
            return [g.numpy() for g in grads], [fw.unpack_dual(g).tangent for g in grads]

    for flags in tangent_subsets(len(arrays)):
        seed = rng.bit_generator.state
        by_rule = grads_and_tangents(flags)
        assert calls, f"the backward did not take {op.__name__}.backward_jvp"
        calls.clear()
        rng.bit_generator.state = seed  # the same tangents for the plain path
        with monkeypatch.context() as plain:
            plain.setattr(op, "backward_jvp", None)
            on_tensors = grads_and_tangents(flags)
        assert not calls
        for i, (a, b) in enumerate(zip(by_rule[0], on_tensors[0])):
            assert a.dtype == b.dtype == dtype
            assert_close(a, b, OP_RTOL[dtype_name], f"gradient of input {i}, tangents on {flags}")
        for i, (a, b) in enumerate(zip(by_rule[1], on_tensors[1])):
            assert (a is None) == (b is None), f"tangent of the gradient of input {i}, tangents on {flags}"
            if a is not None:
                assert _np(a).dtype == dtype
                assert_close(_np(a), _np(b), OP_RTOL[dtype_name], f"tangent of the gradient of input {i} ({flags})")
