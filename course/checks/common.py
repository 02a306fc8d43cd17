"""What every rung's checks share: the comparison against a reference, finite differences, and the checks of a
returned value's kind, shape and dtype, each failing with a message that names the exercise and the element.

Tolerances are the project's (minitensor/testing.py), never the course's own.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np

import minitensor as mt
from minitensor.autograd import GradcheckError, gradcheck
from minitensor.testing import GRADCHECK, OP_RTOL, error_stats

from ..runner import CheckFailed

__all__ = [
    "CheckFailed",
    "OP_RTOL",
    "as_array",
    "case",
    "compare",
    "expect_array",
    "finite_differences",
    "rng",
    "scalar_differs",
]


@contextmanager
def case(where: str):
    """An error the learner's code raises inside says which case the check was running (a note on the error)."""
    try:
        yield
    except CheckFailed:
        raise
    except Exception as e:
        if hasattr(e, "add_note"):  # Python 3.11+
            e.add_note(f"(while checking {where})")
        raise


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def as_array(x) -> np.ndarray:
    """A minitensor Tensor, a torch tensor or an array as a NumPy array."""
    if hasattr(x, "detach") and hasattr(x, "numpy"):  # torch
        return x.detach().numpy()
    return np.asarray(x.data if isinstance(x, mt.Tensor) else x)


def expect_array(where: str, got, shape: tuple, dtype) -> np.ndarray:
    """`got` must be an array or Tensor of `shape` and `dtype`: else CheckFailed naming what came."""
    if got is None:
        raise CheckFailed(
            f"{where}: returned None; expected an array of shape {tuple(shape)} and dtype {np.dtype(dtype)}"
        )
    if not isinstance(got, (np.ndarray, mt.Tensor, np.generic, float)):
        raise CheckFailed(f"{where}: returned a {type(got).__name__}; expected an array of shape {tuple(shape)}")
    arr = as_array(got)
    if arr.shape != tuple(shape):
        raise CheckFailed(f"{where}: expected shape {tuple(shape)}, got {arr.shape}")
    if arr.dtype != np.dtype(dtype):
        raise CheckFailed(f"{where}: expected dtype {np.dtype(dtype)}, got {arr.dtype}")
    return arr


def scalar_differs(got, want: float, tol: float) -> bool:
    """Whether `got` is not the number `want` within tol * max(1, |want|). Written so that NaN differs: a NaN or
    inf where `want` is finite differs from it, a non-finite `want` is matched only by the same value, and
    anything that is not a real number differs."""
    try:
        got = float(got)
    except (TypeError, ValueError):
        return True
    if not math.isfinite(want):
        return not (got == want or (math.isnan(got) and math.isnan(want)))
    return not (math.isfinite(got) and abs(got - want) <= tol * max(1.0, abs(want)))


def compare(where: str, got, expected, rtol: float | None = None, reference: str = "torch") -> None:
    """`got` equals `expected` within rtol (default: OP_RTOL of expected's dtype) in minitensor.testing's measure.

    A failure names the worst element, expected against got, and the errors."""
    got_a, exp_a = as_array(got), as_array(expected)
    if got_a.shape != exp_a.shape:
        raise CheckFailed(f"{where}: expected shape {exp_a.shape} (as {reference}), got {got_a.shape}")
    rtol = OP_RTOL[exp_a.dtype.name] if rtol is None else rtol
    max_abs, max_rel = error_stats(got_a, exp_a)
    if max_rel <= rtol:
        return
    a, b = got_a.astype(np.float64), exp_a.astype(np.float64)
    stray = ~np.isfinite(a) & np.isfinite(b)
    if stray.any():
        idx = tuple(int(i) for i in np.argwhere(stray)[0])
        raise CheckFailed(
            f"{where}: a non-finite value: at element {idx} expected {float(b[idx])!r} ({reference}), got "
            f"{float(a[idx])!r} ({int(stray.sum())} of {a.size} elements non-finite): where did the first NaN or inf "
            "appear?"
        )
    with np.errstate(invalid="ignore"):
        diff = np.abs(a - b)
    diff = np.where(np.isnan(diff), np.inf, diff)
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), a.shape)) if a.size else ()
    raise CheckFailed(
        f"{where}: at element {idx} expected {float(b[idx])!r} ({reference}), got {float(a[idx])!r}; "
        f"max relative error {max_rel:.2e} > rtol {rtol:.0e} (max abs {max_abs:.2e})"
    )


def finite_differences(where: str, fn, inputs) -> None:
    """minitensor's gradcheck on float64 inputs (random upstream gradient), its failure as the exercise's."""
    try:
        gradcheck(fn, inputs, **GRADCHECK)
    except GradcheckError as e:
        raise CheckFailed(f"{where}: your backward disagrees with finite differences: {e}") from None
