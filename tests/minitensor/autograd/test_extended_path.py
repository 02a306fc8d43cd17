"""The core's path against the extended one (minitensor/autograd/extensions.py), which Function.apply takes while a
feature is on.

Every case of the op table (tests/support/op_cases.py) must give bitwise the same outputs through the extended path,
under no_grad, as its recorded forward through the core's path, with the same version-counter sharing for views:
checked in the values family's pass over the table (tests/minitensor/ops/test_op_table.py,
assert_the_extended_path_gives below), whose forward is the reference. Here: the extended path is taken exactly while
a feature is on; anomaly mode and saved-tensor hooks behave under no_grad as with grad mode on. Also the quiet block:
ops in it and out of it are quiet, and it ends with the block.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import minitensor as mt
import minitensor.autograd.forward_ad as fwAD
from minitensor import features
from minitensor.autograd import OpCalls, set_op_calls
from minitensor.autograd.graph import saved_tensors_hooks
from minitensor.core import points
from tests.support.op_cases import MT, as_list, make_inputs


class _FullPath(OpCalls):
    """The plain calls, installed as calls of this thread's own (a feature, as a profile is): apply then takes its
    extended path."""


def _outputs(case, dtype: str, full: bool):
    """The case's outputs under no_grad, through the core path or (full=True) the extended one, and the sharing."""
    xs, _, _ = make_inputs(case, dtype)
    previous = set_op_calls(_FullPath()) if full else None
    try:
        mt.manual_seed(0)  # ops that draw (dropout) draw the same numbers on both paths
        with mt.no_grad():
            outs = as_list(case.fn(MT, *xs, **case.kwargs))
    finally:
        if previous is not None:
            set_op_calls(previous)
    return outs, _shares(xs, outs)


def _shares(xs, outs) -> list:
    """For each output, (which input's version counter it shares (a view), which input it is (an op that returns its
    input itself, as squeeze of a non-1 dim)), each None where none."""
    return [
        (
            next((i for i, x in enumerate(xs) if o.version_counter is x.version_counter), None),
            next((i for i, x in enumerate(xs) if o is x), None),
        )
        for o in outs
    ]


def assert_the_extended_path_gives(case, dtype: str, xs: list, recorded: list) -> None:
    """The property, for tests/minitensor/ops/test_op_table.py's pass over the table: the case's outputs through the
    extended path under no_grad equal, bitwise, those its recorded forward gave through the core's path
    (`recorded`, from the inputs `xs`), and views share version counters alike. Where the no_grad run raises (a case
    that differentiates inside needs grad mode), both paths must raise the same error under no_grad."""
    try:
        fast, fast_shares = _outputs(case, dtype, full=True)
    except Exception as error:
        with pytest.raises(type(error)) as full_error:
            _outputs(case, dtype, full=False)
        assert str(full_error.value) == str(error)
        return
    assert len(fast) == len(recorded)
    for i, (a, b) in enumerate(zip(fast, recorded)):
        assert isinstance(a, mt.Tensor) and isinstance(b, mt.Tensor), f"{case}: output {i}"
        assert a.dtype == b.dtype and a.shape == b.shape, (
            f"{case}: output {i}: {a.dtype} {a.shape} vs {b.dtype} {b.shape}"
        )
        assert np.array_equal(a.detach().numpy(), b.detach().numpy(), equal_nan=a.dtype.kind in "fc"), (
            f"{case}: output {i} differs"
        )
        assert a.grad_fn is None, f"{case}: output {i} recorded under no_grad"
    assert fast_shares == _shares(xs, recorded), (
        f"{case}: views share version counters (or inputs) differently ({fast_shares} vs {_shares(xs, recorded)})"
    )


@pytest.fixture
def extended_calls(monkeypatch):
    """The ops that took the extended path, counted from a state with no feature on (devices attach for good once
    a test has used one, so they are set aside here)."""
    monkeypatch.setattr(features, "_on", set())
    monkeypatch.setattr(points, "features", 0)
    monkeypatch.setattr(points, "devices", None)
    calls = []
    plain = points.apply

    def counted(fn, tensors, kwargs):
        calls.append(fn.__name__)
        return plain(fn, tensors, kwargs)

    monkeypatch.setattr(points, "apply", counted)
    return calls


def test_the_extended_path_is_taken_only_while_a_feature_is_on(extended_calls):
    x = mt.randn(3, 4, requires_grad=True)
    with mt.no_grad():
        y = (x * 2).exp()
    z = (x * 2).exp()
    assert extended_calls == [] and y.grad_fn is None and z.grad_fn is not None
    with mt.no_grad(), mt.profiler.profile() as prof:  # a profile times every op: the extended path
        x.exp()
    assert extended_calls == ["Exp"] and "Exp" in prof.stats
    assert points.features == 0  # the profile ended, and so did the feature


def test_tangents_flow_under_no_grad(extended_calls):
    x, v = mt.randn(3, 4, dtype=mt.float64), mt.randn(3, 4, dtype=mt.float64)
    with mt.no_grad(), fwAD.dual_level():
        y = (fwAD.make_dual(x, v) * 3.0).sin()
        tangent = fwAD.unpack_dual(y).tangent
    assert "Sin" in extended_calls and points.features == 0
    np.testing.assert_allclose(tangent.numpy(), np.cos(3 * x.numpy()) * 3 * v.numpy(), rtol=1e-12)


def test_anomaly_mode_and_saved_tensor_hooks_under_no_grad(extended_calls):
    x = mt.randn(3, 4, requires_grad=True)
    packed = []
    with (
        pytest.warns(UserWarning, match="Anomaly"),
        mt.autograd.detect_anomaly(),
        saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t),
    ):
        with mt.no_grad():
            y = x.exp()
        z = x.exp()  # recorded: its node is handed to the hooks
    assert extended_calls == ["Exp", "Exp"] and y.grad_fn is None and len(packed) == 1
    z.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.exp(x.detach().numpy()))
    assert points.features == 0


def test_a_non_tensor_argument_is_named():
    with mt.no_grad(), pytest.raises(TypeError, match=r"argument 1 must be a Tensor, got ndarray; wrap it"):
        mt.ops.Add.apply(mt.ones(2), np.ones(2))
    with mt.no_grad(), pytest.raises(TypeError, match="at least one Tensor"):
        mt.ops.Add.apply()


def test_ops_in_a_quiet_block_are_quiet_and_the_state_ends_with_it():
    x = mt.tensor([0.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a NumPy RuntimeWarning would fail the test
        with mt.no_grad():
            assert np.isinf((1.0 / x).numpy()[0])  # outside a block: the op's own quiet state
            assert np.geterr()["divide"] == "warn"  # and it ended with the op
            with mt.autograd.ieee_quiet():
                assert np.geterr()["divide"] == "ignore"
                assert np.isinf((1.0 / x).numpy()[0]) and np.isnan(x.log().mul(0.0).numpy()[0])
                with np.errstate(divide="raise"):  # the user's state inside the block: an op is quiet all the same
                    assert np.isinf((1.0 / x).numpy()[0])
                    assert np.geterr()["divide"] == "raise"
    assert np.geterr()["divide"] == "warn"  # NumPy's own state is back
