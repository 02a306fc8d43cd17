"""Speed device for NumPy's quiet error state around every op (core/points.py's `quiet` and `run_quietly`).

Ops return IEEE values (inf, NaN) silently, as PyTorch does: every forward and the backward walk run quietly. The
plain formula is `np.errstate(all="ignore")`. It costs more than the arithmetic of a small op (building the errstate
object, then NumPy's C helper that makes the new state), a sixth of the engine's whole cost per recorded op
(docs/decisions/011-cost-per-op.md).

Speed device, `_QuietState`: the same context variable NumPy's errstate sets (numpy._core._ufunc_config's
`_extobj_contextvar`), set to the quiet state that np.errstate(all="ignore") would make from the current one,
which is made once per current state and then kept. Inside a block that is quiet already (a backward's ops under
create_graph, a decoding loop), nothing is set at all. What NumPy sees is what errstate would give it: the same
error modes, the same buffer size and error callback carried over from the state it started from
(tests/minitensor/fast/test_quiet.py compares the two). NumPy releases without that variable (before 2.0) keep the
plain formula.
"""

from __future__ import annotations

from .. import fast
from ..core import points

try:  # NumPy >= 2.0: errstate is a context variable holding an "extobj" (a capsule)
    from numpy._core._ufunc_config import _extobj_contextvar as _ERRSTATE
    from numpy._core._ufunc_config import _make_extobj
except ImportError:  # pragma: no cover - NumPy 1.x: the plain formula
    _ERRSTATE = None


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
    """Speed device for points.quiet() (module docstring): set NumPy's error state to its quiet version of
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


def run_quietly(fn, *args, **kwargs):
    """Speed device for points.run_quietly, `with quiet(): return fn(*args, **kwargs)`: the same without the
    context-manager object (less than half the time: docs/decisions/011-cost-per-op.md); nothing is set where the
    state is quiet already."""
    token = _set_quiet()
    if token is None:
        return fn(*args, **kwargs)
    try:
        return fn(*args, **kwargs)
    finally:
        _ERRSTATE.reset(token)


fast.formula("quiet", points.quiet, owner=points)
fast.formula("run_quietly", points.run_quietly, owner=points)
if _ERRSTATE is not None:
    fast.device("quiet", _QuietState, evidence="docs/decisions/011-cost-per-op.md")
    fast.device("run_quietly", run_quietly, evidence="docs/decisions/011-cost-per-op.md")
