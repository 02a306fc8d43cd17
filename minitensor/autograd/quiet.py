"""NumPy's floating-point warnings off around an op: ieee_quiet(), and its speed device.

Ops return IEEE values (inf, NaN) silently, as PyTorch does: every forward (Function.apply) and the backward walk
run inside `ieee_quiet()`. The plain formula is `np.errstate(all="ignore")`. It costs more than the arithmetic of a
small op (building the errstate object, then NumPy's C helper that makes the new state), and a sixth of the
engine's whole cost per recorded op (docs/decisions/011-cost-per-op.md).

Speed device, `_QuietState`: the same context variable NumPy's errstate sets (numpy._core._ufunc_config's
`_extobj_contextvar`), set to the quiet state that np.errstate(all="ignore") would make from the current one,
which is made once per current state and then kept. Inside a block that is quiet already (a backward's ops under
create_graph, a decoding loop), nothing is set at all: Function.apply asks `is_quiet()` first. What NumPy sees is
what errstate would give it: the same error modes, the same buffer size and error callback carried over from the
state it started from (tests/minitensor/test_speed_devices.py compares the two). NumPy releases without that
variable (before 2.0) take the plain formula.
"""

from __future__ import annotations

import numpy as np

try:  # NumPy >= 2.0: errstate is a context variable holding an "extobj" (a capsule)
    from numpy._core._ufunc_config import _extobj_contextvar as _ERRSTATE
    from numpy._core._ufunc_config import _make_extobj
except ImportError:  # pragma: no cover - NumPy 1.x: the plain formula
    _ERRSTATE = None


def errstate_formula():
    """The plain formula: NumPy's floating-point warnings off for the block."""
    return np.errstate(all="ignore")


# current state -> its quiet version, and each quiet state -> itself (so that a quiet state is found quiet).
# Capsules hash by identity; the dict holds them, so an id is never reused while it is a key. A handful of states
# occur in a process (the default, one per user errstate around a model); past _MAX_STATES the dict starts over.
_quiet_of: dict = {}
_MAX_STATES = 64


def _quiet_version(current):
    """The state np.errstate(all="ignore") would set from `current`, the state in force (made on first sight, then
    kept): NumPy's helper builds it on the state in force, keeping its buffer size and callback."""
    if len(_quiet_of) >= _MAX_STATES:
        _quiet_of.clear()
    quiet = _make_extobj(all="ignore")
    _quiet_of[current] = quiet
    _quiet_of[quiet] = quiet
    return quiet


def _set_quiet():
    """Set the quiet version of the state in force: the token that resets it, or None where it was quiet already."""
    current = _ERRSTATE.get()
    quiet = _quiet_of.get(current) or _quiet_version(current)
    return None if quiet is current else _ERRSTATE.set(quiet)


class _QuietState:
    """Speed device for errstate_formula() (module docstring): set NumPy's error state to its quiet version of
    the current one, or nothing when the current one is quiet already; the state before comes back at exit."""

    __slots__ = ("token",)

    def __enter__(self):
        self.token = _set_quiet()
        return self

    def __exit__(self, *exc):
        if self.token is not None:
            _ERRSTATE.reset(self.token)
        return False


def is_quiet() -> bool:
    """Whether NumPy's error state in force is a quiet one (inside an ieee_quiet() block): then an op need not set
    it again (Function.apply asks before each forward; the plain formula would always set it)."""
    if _ERRSTATE is None:  # pragma: no cover - NumPy 1.x
        return False
    current = _ERRSTATE.get()
    return _quiet_of.get(current) is current


def run_quietly(fn, *args):
    """fn(*args) under ieee_quiet(), as `with ieee_quiet(): return fn(*args)` reads: what Function.apply runs each
    forward in. The same device without the context-manager object (less than half the time of is_quiet() and
    the block: docs/decisions/011-cost-per-op.md): nothing is set where the state is quiet already."""
    if _ERRSTATE is None:  # pragma: no cover - NumPy 1.x: the plain formula
        with errstate_formula():
            return fn(*args)
    token = _set_quiet()
    if token is None:
        return fn(*args)
    try:
        return fn(*args)
    finally:
        _ERRSTATE.reset(token)


def ieee_quiet():
    """NumPy's floating-point warnings off: ops return IEEE values (inf, NaN) silently, as PyTorch does."""
    return _QuietState() if _ERRSTATE is not None else errstate_formula()
