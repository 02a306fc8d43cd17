"""Anomaly mode (minitensor/autograd/anomaly_mode.py) against torch.autograd.detect_anomaly: a planted NaN is
found and named with the file and line of its forward call, in a backward and in a forward-mode rule; an
error in a backward carries that traceback; results are unchanged with it on; the switch is global."""

from __future__ import annotations

import inspect
import threading
import warnings

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.autograd import forward_ad as fwAD

HERE = __file__.removesuffix("c")  # this file: the traceback must point here


@pytest.fixture(autouse=True)
def anomaly_off():
    """Each test starts and ends with anomaly mode off (it is global: a failing test must not leak it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # detect_anomaly's "has been enabled" warning, as torch's
        yield
    mt.autograd.set_detect_anomaly(False)
    torch.autograd.set_detect_anomaly(False)


def _line_of(fn, text: str) -> int:
    """The line number in this file of the first line of `fn` that contains `text`."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _sqrt_at_zero(x):
    y = x.sqrt()  # the planted NaN: d sqrt(x)/dx = inf at 0, times a zero upstream gradient
    return (y * 0).sum()


def test_planted_nan_in_a_backward_names_op_output_shape_and_forward_line():
    x = mt.zeros(2, 3, dtype=mt.float64, requires_grad=True)
    with mt.autograd.detect_anomaly():
        loss = _sqrt_at_zero(x)
        with pytest.raises(RuntimeError) as info:
            loss.backward()
    msg = str(info.value)
    assert "Function 'SqrtBackward' returned nan values in its 0th output" in msg  # torch's words
    assert "shape (2, 3)" in msg and "float64" in msg and "6 of 6 elements NaN" in msg
    line = _line_of(_sqrt_at_zero, "y = x.sqrt()")
    assert f'File "{HERE}", line {line}, in _sqrt_at_zero' in msg
    assert "y = x.sqrt()" in msg  # the source line, as Python prints a traceback
    # the innermost frame shown is the caller's, not the engine's (Tensor.sqrt, Function.apply are trimmed)
    assert msg.rstrip().endswith(
        "y = x.sqrt()  # the planted NaN: d sqrt(x)/dx = inf at 0, times a zero upstream gradient"
    )

    # torch finds the same op, the same way
    xt = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    with torch.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="Function 'SqrtBackward0' returned nan values in its 0th output"):
            _sqrt_at_zero(xt).backward()


def test_without_anomaly_mode_the_nan_flows_as_in_torch():
    x = mt.zeros(3, dtype=mt.float64, requires_grad=True)
    _sqrt_at_zero(x).backward()
    xt = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    _sqrt_at_zero(xt).backward()
    assert np.isnan(x.grad.numpy()).all() and torch.isnan(xt.grad).all()


class NanGrad(mt.autograd.Function):
    """y = 2a + b, whose backward is planted wrong: NaN in the gradient for b (its 1th output)."""

    @staticmethod
    def forward(ctx, a, b):
        return 2 * a + b

    @staticmethod
    def backward(ctx, g):
        bad = g * 1.0
        bad[..., 0] = np.nan
        return 2 * g, bad


def _model_layer(a, b):
    return NanGrad.apply(a, b).tanh()


def test_custom_function_nan_names_which_output_through_nested_calls(rng):
    a = mt.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    b = mt.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    with mt.autograd.detect_anomaly():
        y = _model_layer(a, b) * mt.tensor(rng.standard_normal((4, 5)))  # a random upstream gradient
        with pytest.raises(RuntimeError) as info:
            y.sum().backward()
    msg = str(info.value)
    assert "Function 'NanGradBackward' returned nan values in its 1th output" in msg
    assert "the gradient for input 1 of 2, shape (4, 5)" in msg and "4 of 20 elements NaN" in msg
    # the whole call chain, outermost first: this test, then the helper that called the op
    test_line = _line_of(test_custom_function_nan_names_which_output_through_nested_calls, "y = _model_layer")
    op_line = _line_of(_model_layer, "NanGrad.apply")
    assert msg.index(f"line {test_line}, in test_custom") < msg.index(f"line {op_line}, in _model_layer")


def test_check_nan_false_records_but_does_not_raise(rng):
    a, b = (mt.tensor(rng.standard_normal(3), requires_grad=True) for _ in range(2))
    with mt.autograd.detect_anomaly(check_nan=False):
        assert mt.is_anomaly_enabled() and not mt.is_anomaly_check_nan_enabled()
        NanGrad.apply(a, b).sum().backward()
    assert np.isnan(b.grad.numpy()[0])
    assert mt.is_anomaly_check_nan_enabled()  # back to its default, as torch's


class Broken(mt.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 3

    @staticmethod
    def backward(ctx, g):
        raise ValueError("planted failure")


def test_an_error_in_a_backward_carries_the_forward_traceback(rng):
    a = mt.tensor(rng.standard_normal(3), requires_grad=True)
    with mt.autograd.detect_anomaly():
        y = Broken.apply(a)  # the forward call named in the note
        with pytest.raises(ValueError, match="planted failure") as info:
            y.sum().backward()
    note = "\n".join(info.value.__notes__)
    assert "Error detected in BrokenBackward. Traceback of forward call that caused the error:" in note
    line = _line_of(test_an_error_in_a_backward_carries_the_forward_traceback, "y = Broken.apply(a)")
    assert f'File "{HERE}", line {line}' in note


def test_a_node_recorded_while_off_says_so(rng):
    x = mt.zeros(3, dtype=mt.float64, requires_grad=True)
    loss = _sqrt_at_zero(x)  # recorded while off: no traceback kept
    with mt.autograd.detect_anomaly(), pytest.raises(RuntimeError, match="no forward traceback was recorded"):
        loss.backward()


def test_nan_under_create_graph_is_found_too():
    x = mt.zeros(3, dtype=mt.float64, requires_grad=True)
    with mt.autograd.detect_anomaly():
        loss = _sqrt_at_zero(x)
        with pytest.raises(RuntimeError, match="SqrtBackward' returned nan values in its 0th output"):
            mt.autograd.grad(loss, x, create_graph=True)


class NanTangent(mt.autograd.Function):
    """y = a², whose forward-mode rule is planted wrong: a NaN in the tangent."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        return 2 * a * g

    @staticmethod
    def jvp(ctx, ta):
        (a,) = ctx.saved_arrays
        return 2 * a * ta / (a - a)  # 0/0 where the tangent is 0, ±inf elsewhere: NaN where ta is 0


def test_planted_nan_in_a_forward_mode_rule_names_op_and_forward_line(rng):
    a = mt.tensor(rng.standard_normal(4))
    tangent = mt.tensor(np.array([1.0, 0.0, 2.0, 0.0]))
    with fwAD.dual_level():
        dual = fwAD.make_dual(a, tangent)
        plain = fwAD.unpack_dual(NanTangent.apply(dual)).tangent  # off: the NaN tangent comes out, unchecked
        assert np.isnan(plain.numpy()).sum() == 2
        with mt.autograd.detect_anomaly(), pytest.raises(RuntimeError) as info:
            NanTangent.apply(dual)  # the forward call that is blamed
    msg = str(info.value)
    assert "Function 'NanTangent' returned nan values in its forward-mode output" in msg
    assert "shape (4,)" in msg and "2 of 4 elements NaN" in msg
    line = _line_of(test_planted_nan_in_a_forward_mode_rule_names_op_and_forward_line, "NanTangent.apply(dual)  #")
    assert f'File "{HERE}", line {line}' in msg


def _tiny_step(rng_seed: int):
    """Loss, gradients and the forward-mode tangent of a small network: what anomaly mode must not change."""
    rng = np.random.default_rng(rng_seed)
    w1 = mt.tensor(rng.standard_normal((6, 8)), requires_grad=True)
    w2 = mt.tensor(rng.standard_normal((8, 3)), requires_grad=True)
    x = mt.tensor(rng.standard_normal((5, 6)))
    loss = mt.nn.functional.cross_entropy((x @ w1).tanh() @ w2, mt.tensor(np.array([0, 2, 1, 1, 0])))
    loss.backward()
    with fwAD.dual_level():
        v = mt.tensor(rng.standard_normal((6, 8)))
        tangent = fwAD.unpack_dual((x @ fwAD.make_dual(w1.detach(), v)).exp().sum()).tangent
    return loss.item(), w1.grad.numpy(), w2.grad.numpy(), tangent.item()


def test_results_are_unchanged_with_anomaly_mode_on():
    off = _tiny_step(3)
    with mt.autograd.detect_anomaly():
        on = _tiny_step(3)
    for a, b in zip(off, on):
        np.testing.assert_array_equal(a, b)  # bit for bit: anomaly mode only reads


def test_the_switch_is_global_as_torchs():
    seen = {}

    def worker():
        seen["mt"], seen["torch"] = mt.is_anomaly_enabled(), torch.is_anomaly_enabled()
        x = mt.zeros(2, dtype=mt.float64, requires_grad=True)
        seen["loss"] = _sqrt_at_zero(x)  # recorded in this thread, with its traceback

    with mt.autograd.detect_anomaly(), torch.autograd.detect_anomaly():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert seen["mt"] is True and seen["torch"] is True  # torch's is global: ours too
        with pytest.raises(RuntimeError, match=r"line \d+, in _sqrt_at_zero"):
            seen["loss"].backward()  # a node recorded in another thread still names its forward
    assert not mt.is_anomaly_enabled()


def test_set_detect_anomaly_as_a_call_a_context_and_a_decorator():
    mt.autograd.set_detect_anomaly(True)
    assert mt.is_anomaly_enabled() and mt.autograd.is_anomaly_enabled()
    with mt.autograd.set_detect_anomaly(False):
        assert not mt.is_anomaly_enabled()
    assert mt.is_anomaly_enabled()  # the context restores the mode before it
    mt.autograd.set_detect_anomaly(False)

    @mt.autograd.detect_anomaly()
    def inside():
        return mt.is_anomaly_enabled()

    assert inside() and not mt.is_anomaly_enabled()
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):  # torch warns the same
        with mt.autograd.detect_anomaly():
            pass


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError, match="mode must be a bool .* got int"):
        mt.autograd.set_detect_anomaly(1)
    with pytest.raises(TypeError, match="check_nan must be a bool .* got str"):
        mt.autograd.detect_anomaly(check_nan="yes")
    assert not mt.is_anomaly_enabled()


def test_names_match_torch():
    for name in ("detect_anomaly", "set_detect_anomaly"):
        ours = inspect.signature(getattr(mt.autograd, name))
        theirs = inspect.signature(getattr(torch.autograd, name))
        assert list(ours.parameters) == list(theirs.parameters), name
