"""LayerNorm's speed devices (minitensor/fast/layer_norm.py) against its formulas (ops/layer_norm.py): the forward
and backward in place bit for bit; xhat and rstd with their tangents, unrecorded, and the backward with its tangents
on arrays (forward over reverse), to the dtype's tolerance."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor import fast
from minitensor.fast import layer_norm as fast_layer_norm
from minitensor.ops import layer_norm
from minitensor.ops.namespace import ARRAYS
from tests.support.fast_devices import assert_bitwise, check_backward_jvp, devices_on, some  # noqa: F401


def _np(t) -> np.ndarray:
    return t.detach().numpy().copy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape, k",
    [((32, 22, 128), 1), ((16, 25, 512), 1), ((3, 5, 4, 6), 2), ((7, 1), 1), ((9, 2), 1), ((129, 37, 211), 1)],
)
def test_layer_norm_in_place_is_bitwise_the_formula(monkeypatch, dtype, shape, k):
    """LayerNorm's in-place devices (layer_norm_in_place, layer_norm_grads_in_place) against its plain formulas
    (layer_norm, layer_norm_grads in the slots): output, dx, dw, db bit for bit, with a random upstream gradient, a
    constant row (variance 0) and every subset of the gradients asked for; rows of one number (7, 1) take np.sum for
    dw, db; rows of two (9, 2) take the short form of dx (normalization_vjp); odd sizes past 1M entries."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    x[0, ...] = 2.5  # a constant slice: rows of variance 0
    w, b = (rng.standard_normal(shape[-k:]).astype(dtype) for _ in range(2))
    g = rng.standard_normal(shape).astype(dtype)
    engaged = []
    for name in ("layer_norm", "layer_norm_grads"):
        real = getattr(fast.use, name)
        monkeypatch.setattr(fast.use, name, lambda *a, real=real, name=name: engaged.append(name) or real(*a))

    def run(needs):
        xt, wt, bt = (mt.tensor(a, requires_grad=r) for a, r in zip((x, w, b), needs))
        y = mt.nn.functional.layer_norm(xt, shape[-k:], wt, bt)
        y.backward(mt.tensor(g))
        return [y._data] + [t.grad._data for t in (xt, wt, bt) if t.grad is not None]

    for needs in [(True, True, True), (True, False, True), (True, True, False), (False, True, True)]:
        quick = run(needs)
        assert engaged == ["layer_norm", "layer_norm_grads"]
        engaged.clear()
        with monkeypatch.context() as m:
            m.setattr(fast.use, "layer_norm", layer_norm.layer_norm)
            m.setattr(fast.use, "layer_norm_grads", layer_norm.layer_norm_grads)
            plain = run(needs)
        assert_bitwise(quick, plain, f"y and the gradients of {needs}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_in_place_forward_on_a_strided_input_and_without_bias(dtype):
    """The device called alone: a non-contiguous x (bitwise), and the cases it hands to the formula (no bias, no
    weight, float16)."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((33, 2 * 515)) * 2).astype(dtype)[:, ::2]
    w, b = (rng.standard_normal(515).astype(dtype) for _ in range(2))
    axes = (1,)
    for args in [(x, w, b), (x, w, None), (x, None, None), (x.astype(np.float16), w, b)]:
        got = fast_layer_norm.layer_norm_in_place(ARRAYS, *args, axes, 1e-5)
        assert_bitwise(list(got), list(layer_norm.layer_norm(ARRAYS, *args, axes, 1e-5)), str(len(args)))


LAYER_NORM_CASES = {  # name -> (input shapes, the loss's function of the op's inputs)
    "layer_norm": ([(2, 3, 6)], lambda x: mt.nn.functional.layer_norm(x, (6,))),
    "layer_norm_affine": ([(2, 3, 6), (6,), (6,)], lambda x, w, b: mt.nn.functional.layer_norm(x, (6,), w, b)),
    "layer_norm_last2": (
        [(2, 3, 6), (3, 6), (3, 6)],
        lambda x, w, b: mt.nn.functional.layer_norm(x, (3, 6), w, b),
    ),
    "layer_norm_pairs": ([(5, 2), (2,), (2,)], lambda x, w, b: mt.nn.functional.layer_norm(x, (2,), w, b)),
}


@pytest.mark.parametrize("dtype_name", ["float64", "float32", "float16"])
@pytest.mark.parametrize("name", sorted(LAYER_NORM_CASES))
def test_backward_jvp_equals_the_backward_on_tensors_in_forward_over_reverse(rng, monkeypatch, dtype_name, name):
    shapes, fn = LAYER_NORM_CASES[name]
    rule = fast_layer_norm.layer_norm_backward_jvp
    check_backward_jvp(rng, monkeypatch, layer_norm.LayerNorm, rule, shapes, fn, dtype_name)


def test_backward_jvp_is_none_with_speed_off():
    """Its formula is None: with speed off the engine runs LayerNorm's backward on Tensors."""
    assert layer_norm.LayerNorm.backward_jvp is fast_layer_norm.layer_norm_backward_jvp
    with fast.speed(False):
        assert layer_norm.LayerNorm.backward_jvp is None
