"""The one place where tolerances live, and the comparison every check uses.

Tests, the parity report and the benchmarks' sanity checks all read these numbers; none
defines its own. Never loosen one to make a check pass: find the cause instead.

Measure: for arrays `a` (ours) and `b` (the reference) we report
    max_abs = max |a - b|
    max_rel = max |a - b| / max(|b|, floor)      with floor = FLOOR[dtype] * max(1, max|b|)
The floor keeps entries that should be zero (a masked attention weight, a gradient that
cancels) from dividing by round-off: near zero the measure becomes an absolute error scaled
by the array's magnitude. A check passes when max_rel <= rtol, i.e. every entry satisfies
    |a - b| <= rtol * max(|b|, FLOOR * max|b|).
An entry computed as a sum with cancellation (a gradient summed over a batch, a layer-norm
gradient) carries the round-off of its largest terms, not of its own small value; the floor
makes the allowed absolute error of such entries rtol * FLOOR * max|b|:
    float64: 1e-10 * 1e-3 = 1e-13 of the array's scale (about 450 ulps),
    float32: 1e-5 * 1e-1 = 1e-6 of the array's scale (about 8 ulps),
    float16: 1e-2 * 1e-1 = 1e-3 of the array's scale (about 1 ulp).
Entries larger than FLOOR * max|b| are held to the full relative tolerance. With max(1, .), an
array whose scale is below 1 is judged on absolute error below FLOOR; `error_stats(...,
scale_free=True)` (the parity report) takes the floor relative to the array's own scale instead.

A quantity that is exactly zero in exact arithmetic, a sum whose terms cancel, has no relative
error to measure: `sum_roundoff_limit` derives its allowed magnitude from the dtype's epsilon and
the size of the sum.
"""

from __future__ import annotations

import numpy as np

# Op-by-op checks against PyTorch (tests/minitensor/ops/test_op_table.py): rtol on the measure above. float16
# (tests/minitensor/ops/test_dtype_edges.py, tests/minitensor/ops/test_fuzz.py): about 10 eps (eps = 9.8e-4). Both
# libraries compute a float16 reduction or fused op in float32 and round once, but PyTorch's float16 backward formulas
# round every intermediate to float16 (up to eps/2 each); a gradient that cancels terms of the row's scale
# (log_softmax's g - e^y sum g) then carries a few eps of that scale: 8.0e-3 measured at worst.
OP_RTOL = {"float64": 1e-10, "float32": 1e-5, "float16": 1e-2}

# Whole-model checks (parity report, torch.nn.Transformer import).
PARITY_RTOL = {"float64": 1e-9, "float32": 1e-4}

# Parameters after N optimizer steps, MLP trained by each optimizer (tests/minitensor/optim/test_optim.py).
TRAINING_ATOL_FLOAT64 = 1e-10

# Finite differences (minitensor.autograd.gradcheck defaults).
GRADCHECK = {"eps": 1e-6, "atol": 1e-5, "rtol": 1e-3}

# One directional derivative g . v (v a unit vector) against its central difference (L(x + hv) - L(x - hv)) / 2h in
# float64, h = GRADCHECK["eps"] (python -m parity view --against finite-differences): |g . v - fd| is allowed
# DIRECTIONAL_FD_RTOL * |g| plus the difference quotient's round-off, fd_roundoff(L). The truncation error is about
# h^2 / 6 times the third derivative along v, 1e-13 of its scale, so 1e-6 of |g| (the largest g . v can be) leaves
# a wide margin for it: on the copy and copy-reverse presets every module output's and parameter's check stays within
# 5% of its limit, while a gradient scaled by 1.001 fails (v random: |g . v| ~ |g| / sqrt(n) for n entries, so such an
# error shows in tensors of up to about 10^6 entries).
DIRECTIONAL_FD_RTOL = 1e-6

# Relative floor of the measure, per dtype (see the module docstring for what it allows).
FLOOR = {"float64": 1e-3, "float32": 1e-1, "float16": 1e-1}


def _name(dtype) -> str:
    return np.dtype(dtype).name


def error_stats(ours, ref, *, scale_free: bool = False) -> tuple[float, float]:
    """(max_abs, max_rel) of `ours` against `ref` with the floor of `ref`'s dtype.

    scale_free=True: floor = FLOOR * max|b| (not FLOOR * max(1, max|b|)), so the measure does not
    change when both arrays are multiplied by a constant (an all-zero reference keeps the floor FLOOR).
    """
    a = np.asarray(ours, dtype=np.float64)
    b = np.asarray(ref, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"shape mismatch: ours {a.shape} vs reference {b.shape}")
    if a.size == 0:
        return 0.0, 0.0
    same_non_finite = np.array_equal(a[~np.isfinite(a)], b[~np.isfinite(b)], equal_nan=True)
    if not (np.isfinite(a) == np.isfinite(b)).all() or not same_non_finite:
        return float("inf"), float("inf")
    fin = np.isfinite(b)
    a, b = a[fin], b[fin]
    if a.size == 0:
        return 0.0, 0.0
    diff = np.abs(a - b)
    dtype = np.asarray(ref).dtype
    scale = float(np.abs(b).max())
    if not scale_free or scale == 0.0:
        scale = max(1.0, scale)
    floor = FLOOR.get(_name(dtype), FLOOR["float32"]) * scale
    rel = diff / np.maximum(np.abs(b), floor)
    return float(diff.max()), float(rel.max())


def assert_close(ours, ref, rtol: float, what: str = "value") -> None:
    """Raise AssertionError naming `what`, the errors and the worst element when max_rel > rtol."""
    max_abs, max_rel = error_stats(ours, ref)
    if not max_rel <= rtol:
        a = np.asarray(ours, dtype=np.float64)
        b = np.asarray(ref, dtype=np.float64)
        with np.errstate(invalid="ignore"):  # inf - inf here must not turn into a RuntimeWarning
            diff = np.abs(a - b)
        # selected, not assigned item by item: the difference of two 0-d arrays is a NumPy scalar
        diff = np.where((a == b) | (np.isnan(a) & np.isnan(b)), 0.0, diff)  # equal infinities, paired NaNs agree
        diff = np.where(np.isnan(diff), np.inf, diff)  # a NaN or inf against anything: worst
        idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), a.shape)) if a.size else ()
        raise AssertionError(
            f"{what}: max relative error {max_rel:.3e} > rtol {rtol:.1e} (max abs {max_abs:.3e}); "
            f"worst at {idx}: ours {a[idx] if a.size else None!r} vs reference {b[idx] if b.size else None!r}"
        )


def sum_roundoff_limit(terms, dtype) -> np.ndarray:
    """Per entry, the round-off of a sum over axis 0 of `terms`: n * eps[dtype] * sum_i |terms_i|.

    Summing n numbers in floating point, in any order, errs by at most (n - 1) * u * sum |x_i|, u = eps / 2
    (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., sec. 4.2); the limit doubles that
    to cover the rounding of the terms themselves. A quantity that is exactly zero in exact arithmetic
    (terms that cancel) is judged |computed| <= this limit.
    """
    t = np.abs(np.asarray(terms, dtype=np.float64))
    return t.shape[0] * float(np.finfo(np.dtype(dtype)).eps) * t.sum(axis=0)


def fd_roundoff(loss: float, h: float = GRADCHECK["eps"]) -> float:
    """The round-off of a float64 central difference quotient of a function of size |loss| with step h: each of the
    two evaluations errs by a few eps * |loss| (its last rounding and the sums before it), divided by 2h; taken as
    8 eps |loss| / 2h."""
    return 8 * float(np.finfo(np.float64).eps) * abs(loss) / (2 * h)


def ulp_distance(ours, ref) -> float:
    """The largest distance between `ours` and `ref`, entry by entry, counted in representable values of ref's dtype
    (units in the last place; float64 for a non-float reference): 0 where they are identical, 1 for neighbours, inf
    where one is finite and the other not. A companion of error_stats that needs no floor: it shows how many roundings
    apart two results are, the same yardstick in every dtype."""
    b = np.asarray(ref)
    dtype = b.dtype if b.dtype in (np.float16, np.float32, np.float64) else np.dtype(np.float64)
    a = np.asarray(ours).astype(dtype)
    b = b.astype(dtype)
    if a.shape != b.shape:
        raise ValueError(f"shape mismatch: ours {a.shape} vs reference {b.shape}")
    if a.size == 0:
        return 0.0
    both_nan = np.isnan(a) & np.isnan(b)
    if ((~np.isfinite(a) | ~np.isfinite(b)) & ~both_nan & (a != b)).any():
        return float("inf")
    keep = ~both_nan
    ints = {2: np.int16, 4: np.int32, 8: np.int64}[dtype.itemsize]
    # The bit patterns of IEEE floats are sign and magnitude: mapped to a line on which neighbours differ by 1
    # (-0.0 and +0.0 both at 0), the count of values between two floats is a difference of integers.
    lowest = np.iinfo(ints).min

    def line(x):  # shifted by 2**63 into unsigned integers, so that no difference overflows
        i = x.view(ints).astype(np.int64)
        return np.where(i < 0, lowest - i, i).view(np.uint64) ^ np.uint64(2**63)

    la, lb = line(a[keep]), line(b[keep])
    return float(np.where(la >= lb, la - lb, lb - la).max(initial=0))
