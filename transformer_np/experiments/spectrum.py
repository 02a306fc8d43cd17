"""The top eigenvalue of a symmetric operator given as v -> H v (lists of arrays, one per parameter).

    power_iteration    the eigenvalue of largest magnitude, with its vector and convergence history
    top_eigenvalue     the largest (most positive) one: a second, shifted power iteration when needed

The curvature experiment (curvature.py) runs them on the loss Hessian's H v (transformer_np/hessian.py).
"""

from __future__ import annotations

import numpy as np

POWER_TOL = 1e-3  # stop when the eigenvalue estimate changes by less than this, relatively


def dot(a: list, b: list) -> float:
    """The inner product of two lists of arrays, as of two flat vectors."""
    return float(sum(np.vdot(x, y) for x, y in zip(a, b)))


def power_iteration(hvp, v0: list, iterations: int, tol: float = POWER_TOL) -> dict:
    """The eigenvalue of largest magnitude of a symmetric H given as v -> H v (lists of arrays).

    Each iteration: v unit, lambda = v . H v (the Rayleigh quotient), residual = ||H v - lambda v|| / |lambda|
    (0 for an exact eigenvector), then v <- H v / ||H v||. Stops when lambda changes by less than tol
    relatively, or after `iterations`. Returns the estimate, its last unit vector (to warm-start the
    next measurement), the number of iterations and the per-iteration history.
    """
    norm = np.sqrt(dot(v0, v0))
    v = [x / norm for x in v0]
    history, lam = [], None
    for _ in range(iterations):
        hv = hvp(v)
        new = dot(v, hv)
        error = [h - new * x for h, x in zip(hv, v)]  # H v - lambda v
        residual = float(np.sqrt(dot(error, error))) / max(abs(new), 1e-300)
        history.append({"eigenvalue": new, "residual": residual})
        converged = lam is not None and abs(new - lam) <= tol * abs(new)
        lam = new
        if converged:
            break
        hv_norm = np.sqrt(dot(hv, hv))
        v = [h / hv_norm for h in hv]
    return {
        "eigenvalue": lam,
        "vector": v,
        "iterations": len(history),
        "residual": history[-1]["residual"],
        "history": history,
    }


def top_eigenvalue(hvp, v0: list, iterations: int, tol: float = POWER_TOL, counts: tuple | None = None) -> dict:
    """The largest (most positive) eigenvalue of a symmetric H given as v -> H v: the sharpness.

    Power iteration finds the eigenvalue of largest magnitude. When that one is negative (negative
    curvature dominates), a second power iteration on H - s I, s that negative eigenvalue, finds
    lambda_max - s, the largest eigenvalue of a matrix whose spectrum [0, lambda_max - s] is
    non-negative; lambda_max follows. `counts` forces the iterations of each phase (a reference run
    repeating another one). Returns power_iteration's dict for lambda_max (residual ||Hv - lambda v|| /
    |lambda|), with `negative` (the dominant negative eigenvalue, or None) and `phases` (iterations each).
    """
    first = power_iteration(hvp, v0, counts[0] if counts else iterations, 0.0 if counts else tol)
    if first["eigenvalue"] >= 0:
        return {**first, "negative": None, "phases": (first["iterations"],)}
    shift = first["eigenvalue"]
    shifted_hvp = lambda v: [h - shift * x for h, x in zip(hvp(v), v)]
    top = power_iteration(shifted_hvp, v0, counts[1] if counts else iterations, 0.0 if counts else tol)
    lam = top["eigenvalue"] + shift
    # the residual of (H - sI) v = mu v is the residual of H v = (mu + s) v: rescale it to |lambda|
    return {
        **top,
        "eigenvalue": lam,
        "residual": top["residual"] * abs(top["eigenvalue"]) / max(abs(lam), 1e-300),
        "iterations": first["iterations"] + top["iterations"],
        "negative": shift,
        "phases": (first["iterations"], top["iterations"]),
    }
