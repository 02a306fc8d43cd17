"""Linear's speed device of forward over reverse (minitensor/fast/linear.py: Linear.backward_jvp) against its formula
(None: the engine runs Linear's backward on Tensors), to the dtype's tolerance."""

from __future__ import annotations

import pytest

import minitensor as mt
from minitensor import fast
from minitensor.fast import linear as fast_linear
from minitensor.ops import fused
from tests.support.fast_devices import check_backward_jvp, devices_on  # noqa: F401 (devices_on: devices in slots)

LINEAR_CASES = {  # name -> (input shapes, the loss's function of the op's inputs)
    "linear": ([(2, 3, 4), (5, 4)], lambda x, w: mt.nn.functional.linear(x, w)),
    "linear_bias": ([(2, 3, 4), (5, 4), (5,)], lambda x, w, b: mt.nn.functional.linear(x, w, b)),
    "linear_odd": ([(3, 5, 7), (9, 7), (9,)], lambda x, w, b: mt.nn.functional.linear(x.transpose(0, 1), w, b)),
}


@pytest.mark.parametrize("dtype_name", ["float64", "float32", "float16"])
@pytest.mark.parametrize("name", sorted(LINEAR_CASES))
def test_backward_jvp_equals_the_backward_on_tensors_in_forward_over_reverse(rng, monkeypatch, dtype_name, name):
    shapes, fn = LINEAR_CASES[name]
    check_backward_jvp(rng, monkeypatch, fused.Linear, fast_linear.linear_backward_jvp, shapes, fn, dtype_name)


def test_backward_jvp_is_none_with_speed_off():
    """Its formula is None: with speed off the engine runs Linear's backward on Tensors."""
    assert fused.Linear.backward_jvp is fast_linear.linear_backward_jvp
    with fast.speed(False):
        assert fused.Linear.backward_jvp is None
