"""erf, the error function, for the exact GELU (ops/elementwise.py's Erf and Gelu): NumPy has none.

Array helpers only (no primitive lives here): float64 takes math.erf element by element (exact, slow), float32
a Chebyshev fit evaluated in float32.
"""

from __future__ import annotations

import math

import numpy as np

# erf for the exact GELU. NumPy has no erf: float64 uses math.erf element by element (exact, slow);
# float32 uses the Chebyshev fit of erfc from Numerical Recipes (fractional error < 1.2e-7 everywhere,
# about two float32 ulps), evaluated in float32.
_math_erf = np.frompyfunc(math.erf, 1, 1)
_ERFC_COEFFS = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function of a float array, in its dtype."""
    if x.ndim == 0:  # as 1 element: NumPy turns 0-d intermediates into scalars, which take no out=
        return erf(x.reshape(1)).reshape(())
    if x.dtype == np.float64:
        return _math_erf(x).astype(np.float64)
    return _erf_float32_fit(x)


def _erf_float32_fit(x: np.ndarray) -> np.ndarray:
    """erf(x) = 1 - erfc(|x|) (sign restored), erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2).
    Evaluated in place in x's dtype: one temporary per intermediate, not per Horner step."""
    z = np.abs(x)
    t = z * x.dtype.type(0.5)
    t += 1
    np.reciprocal(t, out=t)
    poly = np.full_like(t, _ERFC_COEFFS[-1])
    for c in reversed(_ERFC_COEFFS[:-1]):
        poly *= t
        poly += x.dtype.type(c)
    z *= z
    np.subtract(poly, z, out=poly)
    np.exp(poly, out=poly)
    poly *= t  # erfc(|x|)
    return np.where(x >= 0, 1 - poly, poly - 1)
