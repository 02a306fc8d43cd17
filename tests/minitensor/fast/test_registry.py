"""The speed-device registry: formulas in their slots, devices in force or not, MT_FAST read from the environment."""

import subprocess
import sys
import types

import pytest

from minitensor import fast
from tests.support import ROOT


def test_a_slot_holds_the_device_with_speed_on_and_the_formula_with_it_off():
    owner = types.SimpleNamespace()

    def plain(x):
        return x + 1

    def quick(x):
        return x + 1

    fast.formula("_test_slot", plain, owner=owner, attr="f")
    try:
        assert owner.f is plain  # no device yet: the formula
        fast.device("_test_slot", quick, evidence="docs/decisions/none.md")
        assert owner.f is (quick if fast.enabled() else plain)
        with fast.speed(False):
            assert owner.f is plain and not fast.enabled()
        with fast.speed(True):
            assert owner.f is quick and fast.enabled()
        assert fast.registered()["_test_slot"].device is quick
    finally:
        fast._entries.pop("_test_slot")


def test_a_device_needs_its_formula_and_its_evidence():
    with pytest.raises(KeyError, match="no formula named '_nothing'"):
        fast.device("_nothing", print, evidence="x")
    fast.formula("_test_evidence", abs)
    try:
        with pytest.raises(ValueError, match="needs the page"):
            fast.device("_test_evidence", abs, evidence="")
    finally:
        fast._entries.pop("_test_evidence")
        delattr(fast.use, "_test_evidence")


def test_set_enabled_takes_a_bool():
    with pytest.raises(TypeError, match="expected True or False, got int"):
        fast.set_enabled(0)


@pytest.mark.parametrize("value, expect", [("0", "False"), ("1", "True")])
def test_mt_fast_in_the_environment(value, expect):
    out = subprocess.run(
        [sys.executable, "-c", "import minitensor as mt; print(mt.fast.enabled())"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"MT_FAST": value, "PATH": ""},
    )
    assert out.stdout.strip() == expect, out.stderr


def test_mt_fast_refuses_another_value():
    out = subprocess.run(
        [sys.executable, "-c", "import minitensor"], capture_output=True, text=True, cwd=ROOT, env={"MT_FAST": "yes"}
    )
    assert out.returncode != 0 and "MT_FAST must be 0" in out.stderr and "'yes'" in out.stderr


def test_mt_fast_without_turns_off_the_devices_named():
    code = (
        "from minitensor import fast\n"
        "fast.formula('_a', abs); fast.device('_a', round, evidence='x')\n"
        "fast.formula('_b', abs); fast.device('_b', round, evidence='x')\n"
        "print(fast.use._a is abs, fast.use._b is round)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env={"MT_FAST_WITHOUT": " _a,"}
    )
    assert out.stdout.split() == ["True", "True"], out.stderr
