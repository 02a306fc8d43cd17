"""fast/quiet.py: NumPy's quiet error state set directly, against its formula np.errstate(all="ignore")."""

import numpy as np
import pytest

import minitensor as mt
from minitensor import fast
from minitensor.core import points
from minitensor.fast import quiet

quiet_formula = fast.registered()["quiet"].formula


def test_the_formulas_are_the_points_own():
    with fast.speed(False):
        assert points.quiet is quiet_formula and points.run_quietly is fast.registered()["run_quietly"].formula
    with fast.speed(True):
        assert points.quiet is quiet._QuietState and points.run_quietly is quiet.run_quietly


def test_run_quietly_runs_the_function_quietly_both_ways():
    for speed in (True, False):
        with fast.speed(speed), np.errstate(all="raise"):
            out = points.run_quietly(np.divide, np.ones(2), np.zeros(2), dtype=np.float64)
            assert np.isinf(out).all() and np.geterr()["divide"] == "raise"


def _errstate_seen() -> tuple:
    """What NumPy's error state says inside a block: the modes, the buffer size, the callback."""
    return np.geterr(), np.getbufsize(), np.geterrcall()


@pytest.mark.parametrize(
    "outer",
    [
        {},
        dict(all="raise"),
        dict(divide="warn", over="raise", under="ignore", invalid="call", call=print),
    ],
)
def test_ieee_quiet_sets_the_state_np_errstate_sets(outer):
    """The speed device against its plain formula np.errstate(all="ignore") (core/points.py), from several states
    in force (a user's errstate around the model, a custom buffer size), nested and not; both restore the state."""
    quiet_formula()  # (a warm-up: the formula itself must not touch the device's table)
    before = _errstate_seen()
    with np.errstate(**outer):
        old_size = np.setbufsize(16384)
        try:
            outside = _errstate_seen()
            with quiet_formula():
                plain = _errstate_seen()
            assert not quiet.is_quiet()
            with quiet._QuietState():
                device = _errstate_seen()
                assert quiet.is_quiet()
                with quiet._QuietState():  # already quiet: nothing is set
                    assert _errstate_seen() == device
                with np.errstate(divide="raise"):  # a state set inside: not quiet, and made quiet again
                    assert not quiet.is_quiet()
                    with quiet._QuietState():
                        assert _errstate_seen() == device
                assert _errstate_seen() == device
            assert _errstate_seen() == outside
        finally:
            np.setbufsize(old_size)
    assert device == plain and plain[0] == {k: "ignore" for k in plain[0]} and plain[1] == 16384
    assert _errstate_seen() == before


def test_ieee_quiet_restores_the_state_when_an_op_raises():
    before = np.geterr()
    with pytest.raises(ValueError), quiet._QuietState():
        raise ValueError("inside an op")
    assert np.geterr() == before


def test_ieee_quiet_is_per_thread():
    """NumPy's error state follows the thread (a context variable): an op in a thread under np.errstate(all="raise") is
    quiet all the same, and neither thread's state leaks into the other's."""
    import threading

    seen = {}

    def worker():
        with np.errstate(all="raise"):
            seen["result"] = (1.0 / mt.tensor([0.0])).numpy()[0]
            seen["after"] = np.geterr()["divide"]

    before = np.geterr()
    with quiet._QuietState():
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert np.geterr()["divide"] == "ignore"
    assert np.isinf(seen["result"]) and seen["after"] == "raise" and np.geterr() == before
