"""Finite-difference checks: gradcheck (first derivatives) and gradgradcheck (second derivatives).

Not named gradcheck.py, as torch's is: the package exports the function `gradcheck`, and a submodule of
the same name would be shadowed by it (`import minitensor.autograd.gradcheck as m` would give the function).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .engine import grad
from .grad_mode import enable_grad, no_grad


class GradcheckError(AssertionError):
    pass


def gradcheck(
    fn: Callable,
    inputs: Sequence,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    seed: int = 0,
) -> bool:
    """Compare backward with central finite differences, in float64.

    For a random upstream gradient v (fixed seed), the analytical vector-Jacobian product
    v^T J from backward() is compared, element by element of every input requiring grad, with
        (v . f(x + eps e_i) - v . f(x - eps e_i)) / (2 eps).
    Passes when |analytical - numerical| <= atol + rtol * |numerical| everywhere; otherwise raises
    GradcheckError (or returns False) naming the worst element.
    """
    inputs = tuple(inputs)
    diff_inputs = [(i, x) for i, x in enumerate(inputs) if getattr(x, "requires_grad", False)]
    for i, x in diff_inputs:
        if x.dtype != np.float64:
            raise TypeError(f"gradcheck: input {i} is {x.dtype}; finite differences need float64 inputs")
    if not diff_inputs:
        raise ValueError("gradcheck: no input requires grad")

    def outputs():
        out = fn(*inputs)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    rng = np.random.default_rng(seed)
    outs = outputs()
    vs = [rng.standard_normal(o.shape) for o in outs]
    for _, x in diff_inputs:
        x.grad = None
    for o, v in zip(outs, vs):
        if o.requires_grad:
            o.backward(v.astype(o.dtype), retain_graph=True)

    worst = (0.0, None)
    for i, x in diff_inputs:
        analytical = np.zeros_like(x.data) if x.grad is None else x.grad.data
        numerical = _numerical_vjp(outputs, vs, x.data, eps)
        err = np.abs(analytical - numerical) - (atol + rtol * np.abs(numerical))
        k = int(np.argmax(err)) if err.size else 0
        if err.size and err.reshape(-1)[k] > worst[0]:
            idx = tuple(int(j) for j in np.unravel_index(k, x.shape))  # (1, 2), not (np.int64(1), ...)
            worst = (float(err.reshape(-1)[k]), (i, idx, float(analytical[idx]), float(numerical[idx])))
    if worst[1] is None:
        return True
    i, idx, a, n = worst[1]
    msg = (
        f"gradcheck failed for input {i} at element {idx}: analytical {a!r} vs numerical {n!r} "
        f"(|diff| {abs(a - n):.3e} > atol {atol} + rtol {rtol} * |numerical|)"
    )
    if raise_exception:
        raise GradcheckError(msg)
    return False


def _numerical_vjp(outputs: Callable, vs: list, x: np.ndarray, eps: float) -> np.ndarray:
    """(v . f(x + eps e_j) - v . f(x - eps e_j)) / (2 eps) for every element j of x (perturbed in place)."""
    numerical = np.empty_like(x)
    flat = x.reshape(-1)  # a view: perturbing it perturbs the input
    with no_grad():
        for j in range(flat.size):
            orig = flat[j]
            flat[j] = orig + eps
            fp = sum(float((o.data * v).sum()) for o, v in zip(outputs(), vs))
            flat[j] = orig - eps
            fm = sum(float((o.data * v).sum()) for o, v in zip(outputs(), vs))
            flat[j] = orig
            numerical.reshape(-1)[j] = (fp - fm) / (2 * eps)
    return numerical


def gradgradcheck(
    fn: Callable,
    inputs: Sequence,
    grad_outputs: Sequence | None = None,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    seed: int = 0,
) -> bool:
    """Check second derivatives with finite differences, as torch.autograd.gradgradcheck.

    The first derivative (x, g) -> grad(fn(x), x, g, create_graph=True) is itself checked by gradcheck:
    its backward (the second-order backward) against central differences of it, with respect to the
    inputs x and to the upstream gradient g. grad_outputs: g, one per output of fn (random float64
    tensors requiring grad by default)."""
    inputs = tuple(inputs)
    outs = fn(*inputs)
    outs = [o for o in (outs if isinstance(outs, (tuple, list)) else [outs]) if o.requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(seed + 1)
        grad_outputs = [o.wrap(rng.standard_normal(o.shape)) for o in outs]
        for g in grad_outputs:
            g.requires_grad = True
    grad_outputs = tuple(grad_outputs)
    if len(grad_outputs) != len(outs):
        raise ValueError(f"gradgradcheck: {len(grad_outputs)} grad_outputs for {len(outs)} outputs that require grad")
    n = len(inputs)

    def first_derivative(*args):
        xs, gs = args[:n], args[n:]
        with enable_grad():
            ys = fn(*xs)
            ys = [y for y in (ys if isinstance(ys, (tuple, list)) else [ys]) if y.requires_grad]
            wrt = [x for x in xs if getattr(x, "requires_grad", False)]
            found = grad(ys, wrt, gs, create_graph=True, allow_unused=True)
        return tuple(x.wrap(np.zeros(x.shape, x.dtype)) if d is None else d for d, x in zip(found, wrt))

    return gradcheck(
        first_derivative,
        inputs + grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        seed=seed,
    )
