"""Function.apply's inference path (_apply_untracked, minitensor/autograd/function.py) against its full path.

Under no_grad, with no forward-mode level open and no profile installed, apply skips everything that only a
recorded node needs. Every case of the op table (tests/support/op_cases.py) must give bitwise the same outputs through
the inference path as its recorded forward, with the same version-counter sharing for views: checked in the values
family's pass over the table (tests/minitensor/ops/test_op_table.py, assert_the_inference_path_gives below), whose
forward is the reference, so that the forward is not computed a second time. Here:
the path must not be taken where something is recorded or a tangent flows; anomaly mode and saved-tensor hooks
must behave as before. Also the quiet block (autograd/quiet.py): ops in it and out of it are quiet, and it ends with
the block.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import minitensor as mt
import minitensor.autograd.forward_ad as fwAD
from minitensor.autograd import OpCalls, set_op_calls
from minitensor.autograd import function as function_module
from minitensor.autograd.graph import saved_tensors_hooks
from tests.support.op_cases import MT, as_list, make_inputs


class _FullPath(OpCalls):
    """The plain calls, installed as calls of this thread's own: apply then takes its full path."""


def _outputs(case, dtype: str, full: bool):
    """The case's outputs under no_grad, through the inference path or (full=True) the full one, and the sharing."""
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


def assert_the_inference_path_gives(case, dtype: str, xs: list, recorded: list) -> None:
    """The property, for tests/minitensor/ops/test_op_table.py's pass over the table: the case's outputs through the
    inference path equal, bitwise, those its recorded forward gave (`recorded`, from the inputs `xs`), and views share
    version counters alike. The forward the values family already ran is the reference, so the full path runs again
    only where the inference path raises (a case that differentiates inside needs grad mode): then both paths must
    raise the same error under no_grad."""
    try:
        fast, fast_shares = _outputs(case, dtype, full=False)
    except Exception as error:
        with pytest.raises(type(error)) as full_error:
            _outputs(case, dtype, full=True)
        assert str(full_error.value) == str(error)
        return
    assert len(fast) == len(recorded)
    for i, (a, b) in enumerate(zip(fast, recorded)):
        assert isinstance(a, mt.Tensor) and isinstance(b, mt.Tensor), f"{case}: output {i}"
        assert a.dtype == b.dtype and a.shape == b.shape, (
            f"{case}: output {i}: {a.dtype} {a.shape} vs {b.dtype} {b.shape}"
        )
        assert np.array_equal(a.numpy(), b.numpy(), equal_nan=a.dtype.kind in "fc"), f"{case}: output {i} differs"
        assert a.grad_fn is None, f"{case}: output {i} recorded under no_grad"
    assert fast_shares == _shares(xs, recorded), (
        f"{case}: views share version counters (or inputs) differently ({fast_shares} vs {_shares(xs, recorded)})"
    )


@pytest.fixture
def untracked_calls(monkeypatch):
    """How many ops took the inference path."""
    calls = []
    plain = function_module._apply_untracked

    def counted(fn, tensors, kwargs):
        calls.append(fn.__name__)
        return plain(fn, tensors, kwargs)

    monkeypatch.setattr(function_module, "_apply_untracked", counted)
    return calls


def test_the_path_is_taken_only_where_nothing_is_recorded(untracked_calls):
    x = mt.randn(3, 4, requires_grad=True)
    with mt.no_grad():
        y = (x * 2).exp()
    assert untracked_calls == ["Mul", "Exp"] and y.grad_fn is None
    untracked_calls.clear()
    z = (x * 2).exp()  # grad mode on: recorded, the full path
    assert untracked_calls == [] and z.grad_fn is not None
    with mt.no_grad(), mt.profiler.profile() as prof:  # a profile times every op: the full path
        x.exp()
    assert untracked_calls == [] and "Exp" in prof.stats


def test_tangents_still_flow_under_no_grad(untracked_calls):
    x, v = mt.randn(3, 4, dtype=mt.float64), mt.randn(3, 4, dtype=mt.float64)
    with mt.no_grad(), fwAD.dual_level():
        y = (fwAD.make_dual(x, v) * 3.0).sin()
        tangent = fwAD.unpack_dual(y).tangent
    # the ops on dual tensors take the full path (it gives their outputs tangents); the primitives of their rules
    # (sin's: cos(x) * ẋ) carry no tangent and record nothing, so they take the inference path
    assert "Sin" not in untracked_calls and "Cos" in untracked_calls
    np.testing.assert_allclose(tangent.numpy(), np.cos(3 * x.numpy()) * 3 * v.numpy(), rtol=1e-12)


def test_anomaly_mode_and_saved_tensor_hooks_under_no_grad(untracked_calls):
    x = mt.randn(3, 4, requires_grad=True)
    packed = []
    with (
        pytest.warns(UserWarning, match="Anomaly"),
        mt.autograd.detect_anomaly(),
        saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t),
    ):
        with mt.no_grad():
            y = x.exp()
        z = x.exp()  # recorded: its node is handed to the hooks, as before
    assert untracked_calls == ["Exp"] and y.grad_fn is None and len(packed) == 1
    z.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.exp(x.numpy()))


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
