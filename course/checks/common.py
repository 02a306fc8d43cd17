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
    "diagnose",
    "diagnose_scalar",
    "pointing",
    "WRONG_GRADIENT_DOC",
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
    if hasattr(x, "detach") and hasattr(x, "numpy"):  # a minitensor or torch tensor
        return x.detach().numpy()
    return np.asarray(x)


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


# How close a learner's value must be to a known wrong formula (negated, scaled, transposed, diagonal-only) for
# the diagnosis to name it: loose, since the mistake is found exactly or not at all.
DIAGNOSIS_RTOL = 1e-6


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    """a equals b within DIAGNOSIS_RTOL of b's largest element (both finite, same shape)."""
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= DIAGNOSIS_RTOL * max(1e-300, float(np.abs(b).max()))))


def _factor_text(c: float) -> str:
    """4.0 as '4', 0.25 as '1/4', else the number."""
    for k in range(2, 65):
        if abs(c - k) <= 1e-6 * k:
            return f"{k}"
        if abs(c - 1 / k) <= 1e-6 / k:
            return f"1/{k}"
    return f"{c:.4g}"


# Where a diagnosis points the learner next: a planted fault found in a whole model's backward graph, on the page of
# `python -m parity view` (a wrong formula in one op, and how the module that runs it is singled out).
WRONG_GRADIENT_DOC = "docs/parity-view.md#a-planted-fault"


def pointing(sentence: str) -> str:
    """A diagnosis followed by where to see such a fault found in a whole model ('' stays '')."""
    return f"{sentence} How a wrong formula is found in a whole model: {WRONG_GRADIENT_DOC}" if sentence else ""


def diagnose(got, expected, *, input_shapes=(), known=()) -> str:
    """The likely mistake behind a numeric mismatch of `got` against `expected`, as a sentence; '' when none fits.

    Tried in order: a known wrong formula of the exercise (`known`: (array, sentence) pairs, such as a Jacobian's
    diagonal-only product), exactly negated, a constant factor, the last two axes swapped, a shape that is one of
    the inputs' (`input_shapes`) where the output's is wanted. Finite arrays only (NaN has its own message)."""
    a, b = (np.asarray(as_array(x), dtype=np.float64) for x in (got, expected))
    if a.shape != b.shape:
        if a.ndim >= 2 and a.shape == b.shape[:-2] + b.shape[-1:-3:-1] and _close(np.swapaxes(a, -1, -2), b):
            return f"Yours is the expected transposed (shape {a.shape} for {b.shape}): check which axes you swap."
        for i, s in enumerate(input_shapes):
            if a.shape == tuple(s) and a.shape != b.shape:
                return (
                    f"{a.shape} is input {i}'s shape; the {b.shape} wanted here is the output's (the engine sums it "
                    "back to the input's)."
                )
        return ""
    if not (np.isfinite(a).all() and np.isfinite(b).all()) or not np.abs(b).max(initial=0.0) > 0:
        return ""
    for wrong, sentence in known:
        if _close(a, np.asarray(wrong, dtype=np.float64)):
            return sentence
    if _close(a, -b):
        return "Yours is exactly the expected negated: check the sign."
    c = float((a * b).sum() / (b * b).sum())
    if a.size > 1 and abs(c - 1) > 1e-6 and abs(c) > 1e-12 and _close(a, c * b):  # any two numbers have a ratio
        return (
            f"Yours is {_factor_text(c)} x the expected everywhere: a constant factor is missing or extra (a 1/N, a "
            "mean where a sum is due, a scale?)."
        )
    if a.ndim >= 2 and a.shape[-1] == a.shape[-2] and _close(np.swapaxes(a, -1, -2), b):
        return "Yours is the expected transposed (its last two axes swapped): check which axes you swap."
    return ""


def diagnose_scalar(got: float, expected: float) -> str:
    """diagnose() for two numbers: exactly negated, or a small whole factor."""
    if not (math.isfinite(got) and math.isfinite(expected)) or expected == 0:
        return ""
    if abs(got + expected) <= DIAGNOSIS_RTOL * abs(expected):
        return " Yours is exactly the expected negated: check the sign."
    c = got / expected
    text = _factor_text(c)
    if "." not in text and "e" not in text and c != 1:  # a whole factor or its inverse: likely, not chance
        return f" Yours is {text} x the expected: a constant factor is missing or extra."
    return ""


def compare(where: str, got, expected, rtol: float | None = None, reference: str = "torch", **why) -> None:
    """`got` equals `expected` within rtol (default: OP_RTOL of expected's dtype) in minitensor.testing's measure.

    A failure names the worst element, expected against got, and the errors, then what diagnose() makes of it
    (`why`: its input_shapes and known)."""
    got_a, exp_a = as_array(got), as_array(expected)
    if got_a.shape != exp_a.shape:
        hint = pointing(diagnose(got_a, exp_a, **why))
        raise CheckFailed(
            f"{where}: expected shape {exp_a.shape} (as {reference}), got {got_a.shape}" + (f". {hint}" if hint else "")
        )
    rtol = OP_RTOL[exp_a.dtype.name] if rtol is None else rtol
    max_abs, max_rel = error_stats(got_a, exp_a)
    if max_rel <= rtol:
        return
    a, b = got_a.astype(np.float64), exp_a.astype(np.float64)
    stray = ~np.isfinite(a) & np.isfinite(b)
    if stray.any():
        idx = tuple(int(i) for i in np.argwhere(stray)[0])
        raise CheckFailed(
            f"{where}: a non-finite value: the first, in index order, is at element {idx}: expected "
            f"{float(b[idx])!r} ({reference}), got {float(a[idx])!r} ({int(stray.sum())} of {a.size} elements "
            "non-finite): where did the first NaN or inf appear? (a log or a division of 0, an "
            "exp that overflowed, a 0 * inf?)"
        )
    with np.errstate(invalid="ignore"):
        diff = np.abs(a - b)
    diff = np.where(np.isnan(diff), np.inf, diff)
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), a.shape)) if a.size else ()
    hint = pointing(diagnose(a, b, **why))
    raise CheckFailed(
        f"{where}: at element {idx} expected {float(b[idx])!r} ({reference}), got {float(a[idx])!r}; "
        f"max relative error {max_rel:.2e} > rtol {rtol:.0e} (max abs {max_abs:.2e})" + (f". {hint}" if hint else "")
    )


def finite_differences(where: str, fn, inputs) -> None:
    """minitensor's gradcheck on float64 inputs (random upstream gradient), its failure as the exercise's."""
    try:
        gradcheck(fn, inputs, **GRADCHECK)
    except GradcheckError as e:
        raise CheckFailed(f"{where}: your backward disagrees with finite differences: {e}") from None
