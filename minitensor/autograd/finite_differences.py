"""Finite-difference checks: gradcheck (first derivatives) and gradgradcheck (second derivatives), as torch's.

Every check compares a derivative the engine computes with central differences of the function itself,
(f(x + eps d) - f(x - eps d)) / (2 eps), in float64, for a direction d of one input:

    backward (check_backward_ad)  v^T J, by a backward with a random upstream gradient v
    forward (check_forward_ad)    J d, by forward mode (the input made a dual tensor along d)
    slow mode                     d runs over every element of every input: the whole Jacobian
    fast_mode                     one random unit direction u per input: the scalar v^T J u for the backward,
                                  the vector J u for forward mode (torch's fast mode); on a failure the slow
                                  comparison on that input names the worst element
    reentrancy (nondet_tol)       the backward is run twice; the two must agree to nondet_tol
    check_undefined_grad          zero upstream gradients give zero (or no) input gradients, and an output
                                  whose gradient is missing is treated as zero (the others' backward alone
                                  equals the backward with a zero gradient for it)
    check_grad_dtypes             a gradient of another dtype than its input is reported as a GradcheckError
                                  (the engine refuses one anyway, with a RuntimeError, where torch's casts it)

A failure raises GradcheckError (or returns False) naming the input, the direction and the worst element.
Not named gradcheck.py, as torch's is: the package exports the function `gradcheck`, and a submodule of
the same name would be shadowed by it (`import minitensor.autograd.gradcheck as m` would give the function).

On a device (CuPy, the fake): the directions and upstream gradients are drawn on the host and copied to the
input's device (`on_device_of`), the function runs there, and every derivative is copied back (`host_float64`)
to be compared on the host. Each copy back is a host sync: fine in a check, which is not on a training path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..core import enable_grad, grad, no_grad
from ..devices import array_module, to_host
from .tangents import DualLevel, dual_state, set_tangent, tangent_of


class GradcheckError(AssertionError):
    pass


def on_device_of(like, arr: np.ndarray):
    """The host array `arr` copied to the device of the array `like` (itself when like is a host array)."""
    return array_module(like).asarray(arr)


def host_float64(arr) -> np.ndarray:
    """arr (a host or device array) as a float64 host array, for the comparisons; from a device, a host sync."""
    return to_host(arr).astype(np.float64)


def gradcheck(
    fn: Callable,
    inputs: Sequence,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    seed: int = 0,
    *,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
) -> bool:
    """Check fn's derivatives at `inputs` (float64 tensors; those requiring grad are differentiated) against
    central differences, as torch.autograd.gradcheck (see the module docstring for each option).
    Passes when |analytical - numerical| <= atol + rtol * |numerical| everywhere."""
    check = _Check(fn, inputs, eps, atol, rtol, seed, nondet_tol, check_grad_dtypes)
    try:
        if check_backward_ad:
            check.backward(fast_mode)
            if check_undefined_grad:
                check.undefined_grad()
        if check_forward_ad:
            check.forward(fast_mode)
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


class _Check:
    """One gradcheck: the function, its inputs, the tolerances, and the numerical derivatives it computes."""

    def __init__(self, fn, inputs, eps, atol, rtol, seed, nondet_tol, check_grad_dtypes):
        self.fn, self.inputs = fn, tuple(inputs)
        self.eps, self.atol, self.rtol, self.seed = eps, atol, rtol, seed
        self.nondet_tol, self.check_grad_dtypes = nondet_tol, check_grad_dtypes
        self.diff = [(i, x) for i, x in enumerate(self.inputs) if getattr(x, "requires_grad", False)]
        for i, x in self.diff:
            if x.dtype != np.float64:
                raise TypeError(f"gradcheck: input {i} is {x.dtype}; finite differences need float64 inputs")
        if not self.diff:
            raise ValueError("gradcheck: no input requires grad")
        self.rng = np.random.default_rng(seed)
        self.outs = self.outputs()
        self.vs = [self.rng.standard_normal(o.shape) for o in self.outs]  # the random upstream gradients
        self.columns = {}  # input index -> its numerical Jacobian columns, one per element (slow mode)

    # ------------------------------------------------------------------ the function and its differences
    def outputs(self, args=None) -> list:
        out = self.fn(*(self.inputs if args is None else args))
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def differentiable(self, outs: list) -> list:
        """The indices of the outputs a gradient can flow from (floating point, in the graph)."""
        return [k for k, o in enumerate(outs) if o.dtype.kind == "f" and o.requires_grad]

    def difference(self, x: np.ndarray, direction: np.ndarray) -> list:
        """Per output, (f(x + eps d) - f(x - eps d)) / (2 eps), x's array perturbed in place and restored."""
        orig, direction = x.copy(), on_device_of(x, direction)
        with no_grad():
            x += self.eps * direction
            plus = [host_float64(o._data) for o in self.outputs()]
            x[...] = orig - self.eps * direction
            minus = [host_float64(o._data) for o in self.outputs()]
            x[...] = orig
        return [(p - m) / (2 * self.eps) for p, m in zip(plus, minus)]

    def numerical_columns(self, i: int, x) -> list:
        """For every element j of input i, the difference along the unit vector e_j (a Jacobian column)."""
        if i not in self.columns:
            cols = []
            for j in range(x._data.size):
                unit = np.zeros(x.shape)
                unit.reshape(-1)[j] = 1.0
                cols.append(self.difference(x._data, unit))
            self.columns[i] = cols
        return self.columns[i]

    def unit_direction(self, x) -> np.ndarray:
        u = self.rng.standard_normal(x.shape)
        return u / max(np.linalg.norm(u), 1e-300)

    # ------------------------------------------------------------------ backward
    def analytical_vjp(self) -> list:
        """v^T J for every differentiable input, by one backward (zeros where the output does not reach it)."""
        outs = self.outputs()
        kept = self.differentiable(outs)
        xs = [x for _, x in self.diff]
        if not kept:
            return [np.zeros(x.shape) for x in xs]
        try:
            found = grad(
                [outs[k] for k in kept],
                xs,
                [outs[k].wrap(on_device_of(outs[k]._data, self.vs[k].astype(outs[k].dtype))) for k in kept],
                allow_unused=True,
            )
        except RuntimeError as e:
            if self.check_grad_dtypes and "gradient for input" in str(e):
                raise GradcheckError(f"gradcheck (check_grad_dtypes): {e}") from e
            raise
        result = []
        for (i, x), g in zip(self.diff, found):
            if g is not None and g.dtype != x.dtype and self.check_grad_dtypes:
                raise GradcheckError(
                    f"gradcheck failed for input {i} (check_grad_dtypes): its gradient is {g.dtype}, expected {x.dtype}"
                )
            result.append(np.zeros(x.shape) if g is None else host_float64(g._data))
        return result

    def backward(self, fast_mode: bool) -> None:
        first = self.analytical_vjp()
        for (i, x), a in zip(self.diff, first):
            if fast_mode:
                self.backward_fast(i, x, a)
            else:
                self.backward_slow(i, x, a, "backward, slow mode")
        second = self.analytical_vjp()  # reentrancy: the same backward again gives the same values
        for (i, x), a, b in zip(self.diff, first, second):
            diff = np.nan_to_num(np.abs(a - b), nan=np.inf)
            if diff.size and diff.max() > self.nondet_tol:
                idx = _index(int(np.argmax(diff)), x.shape)
                raise GradcheckError(
                    f"gradcheck failed for input {i} (backward): the backward is not reentrant: two runs with the "
                    f"same input and the same upstream gradient (random normal, seed {self.seed}) differ at "
                    f"element {idx}: {a[idx]!r} vs {b[idx]!r} (|diff| {diff[idx]:.3e} > nondet_tol {self.nondet_tol})"
                )

    def backward_slow(self, i: int, x, analytical: np.ndarray, mode: str) -> None:
        """Element by element: (v^T J)_j against the difference of v . f along e_j."""
        cols = self.numerical_columns(i, x)
        numerical = np.array([sum(float((c * v).sum()) for c, v in zip(col, self.vs)) for col in cols]).reshape(x.shape)
        self.compare(
            analytical,
            numerical,
            f"gradcheck failed for input {i} ({mode}), upstream gradient v random normal "
            f"(seed {self.seed}), direction e_j for every element j of the input;",
            "analytical v^T J",
            x.shape,
        )

    def backward_fast(self, i: int, x, analytical: np.ndarray) -> None:
        """One direction: v^T J u (the backward's v^T J dotted with u) against the difference of v . f along u."""
        u = self.unit_direction(x)
        a = float((analytical * u).sum())
        n = sum(float((c * v).sum()) for c, v in zip(self.difference(x._data, u), self.vs))
        if not abs(a - n) <= self.atol + self.rtol * abs(n):  # NaN fails too
            try:  # name the worst element: the slow comparison on this input
                self.backward_slow(i, x, analytical, "backward, fast mode, then slow on this input")
            except GradcheckError as e:
                raise GradcheckError(
                    f"gradcheck failed for input {i} (backward, fast mode) along a random unit direction u "
                    f"(seed {self.seed}): v^T J u analytical {a!r} vs numerical {n!r}. {e}"
                ) from None
            raise GradcheckError(
                f"gradcheck failed for input {i} (backward, fast mode) along a random unit direction u (seed "
                f"{self.seed}): v^T J u analytical {a!r} vs numerical {n!r}; the slow check on this input passes"
            )

    def excess(self, analytical, numerical) -> np.ndarray:
        """How far each element is beyond atol + rtol |numerical| (> 0: a failure); NaN counts as infinitely far."""
        err = np.abs(analytical - numerical) - (self.atol + self.rtol * np.abs(numerical))
        return np.nan_to_num(err, nan=np.inf)

    def compare(self, analytical, numerical, where: str, what: str, shape) -> None:
        err = self.excess(analytical, numerical)
        if not err.size or err.max() <= 0:
            return
        idx = _index(int(np.argmax(err)), shape)
        a, n = float(analytical[idx]), float(numerical[idx])
        raise GradcheckError(
            f"{where} worst at element {idx}: {what} {a!r} vs numerical {n!r} "
            f"(|diff| {abs(a - n):.3e} > atol {self.atol} + rtol {self.rtol} * |numerical|)"
        )

    # ------------------------------------------------------------------ undefined (zero or missing) gradients
    def undefined_grad(self) -> None:
        outs = self.outputs()
        kept = self.differentiable(outs)
        xs = [x for _, x in self.diff]
        if not kept:
            return
        zeros = [outs[k].wrap(np.zeros_like(outs[k]._data)) for k in kept]  # (zeros_like: on the output's device)
        found = self.undefined_backward([outs[k] for k in kept], xs, zeros, "every output's gradient is zero")
        for (i, x), g in zip(self.diff, found):
            # zero up to nondet_tol: a backward allowed that much noise may show it on a zero gradient too
            g = None if g is None else host_float64(g._data)
            bad = None if g is None else ~(np.abs(g) <= self.nondet_tol)  # NaN counts as non-zero
            if bad is not None and bad.any():
                idx = _index(int(np.argmax(bad)), x.shape)
                raise GradcheckError(
                    f"gradcheck failed for input {i} (check_undefined_grad): with every output's gradient zero, "
                    f"expected a zero (or no) gradient, got {float(g[idx])!r} at element {idx}"
                )
        if len(kept) < 2:
            return
        for missing in kept:  # one output's gradient missing at a time: as if it were zero
            outs = self.outputs()
            rest = [k for k in kept if k != missing]
            cots = {k: outs[k].wrap(on_device_of(outs[k]._data, self.vs[k].astype(outs[k].dtype))) for k in kept}
            cots[missing] = outs[missing].wrap(np.zeros_like(outs[missing]._data))
            without = self.undefined_backward(
                [outs[k] for k in rest], xs, [cots[k] for k in rest], f"output {missing}'s gradient is missing"
            )
            outs = self.outputs()
            with_zero = self.undefined_backward([outs[k] for k in kept], xs, [cots[k] for k in kept], "")
            for (i, x), a, b in zip(self.diff, without, with_zero):
                a = np.zeros(x.shape) if a is None else host_float64(a._data)
                b = np.zeros(x.shape) if b is None else host_float64(b._data)
                self.compare(
                    a,
                    b,
                    f"gradcheck failed for input {i} (check_undefined_grad): output {missing}'s gradient "
                    f"missing must count as zero;",
                    "the backward without it",
                    x.shape,
                )

    def undefined_backward(self, outs, xs, cots, case: str) -> tuple:
        try:
            return grad(outs, xs, cots, allow_unused=True)
        except RuntimeError as e:
            raise GradcheckError(
                f"gradcheck (check_undefined_grad): expected the backward to run when {case}: {e}"
            ) from e

    # ------------------------------------------------------------------ forward mode
    def forward(self, fast_mode: bool) -> None:
        for i, x in self.diff:
            if fast_mode:
                u = self.unit_direction(x)
                self.compare_columns(
                    [
                        (
                            f"a random unit direction u (seed {self.seed})",
                            self.forward_jvp(i, x, u),
                            self.difference(x._data, u),
                        )
                    ],
                    i,
                    "forward, fast mode",
                )
                continue
            columns = []
            for j, numerical in enumerate(self.numerical_columns(i, x)):
                unit = np.zeros(x.shape)
                unit.reshape(-1)[j] = 1.0
                columns.append(
                    (f"e_j, element {_index(j, x.shape)} of the input", self.forward_jvp(i, x, unit), numerical)
                )
            self.compare_columns(columns, i, "forward, slow mode")

    def forward_jvp(self, i: int, x, direction: np.ndarray) -> list:
        """J d by forward mode: input i carries the tangent d in a dual level; the outputs' tangents (zeros where none).

        The input itself carries the tangent (no make_dual view: forward_ad.py sits above tensor.py, which
        imports this package), so it stays the leaf that a backward inside fn (gradgradcheck) differentiates."""
        if dual_state.level is not None:
            raise RuntimeError("gradcheck(check_forward_ad=True): a forward-mode level is already open; close it first")
        dual_state.level = DualLevel()
        try:
            set_tangent(x, x.wrap(on_device_of(x._data, direction.astype(x.dtype))))
            try:
                outs = self.outputs()
            except RuntimeError as e:
                if self.check_grad_dtypes and "tangent for a" in str(e):
                    raise GradcheckError(
                        f"gradcheck failed for input {i} (check_grad_dtypes, forward mode): {e}"
                    ) from e
                raise
            tangents = [tangent_of(o) for o in outs]
        finally:
            set_tangent(x, None)
            dual_state.level = None
        return [np.zeros(o.shape) if t is None else host_float64(t._data) for o, t in zip(outs, tangents)]

    def compare_columns(self, columns: list, i: int, mode: str) -> None:
        """columns: (direction d, forward-mode J d per output, numerical J d per output); the worst one is named."""
        worst = None
        for direction, analytical, numerical in columns:
            for k, (a, n) in enumerate(zip(analytical, numerical)):
                err = self.excess(a, n)
                if err.size and err.max() > 0 and (worst is None or err.max() > worst[0]):
                    worst = (err.max(), direction, k, a, n)
        if worst is not None:
            _, direction, k, a, n = worst
            self.compare(
                a,
                n,
                f"gradcheck failed for input {i} ({mode}), direction {direction}, output {k}:",
                "forward-mode J d",
                n.shape,
            )


def _index(flat: int, shape) -> tuple:
    return tuple(int(j) for j in np.unravel_index(flat, shape))  # (1, 2), not (np.int64(1), ...)


def gradgradcheck(
    fn: Callable,
    inputs: Sequence,
    grad_outputs: Sequence | None = None,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    seed: int = 0,
    *,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    fast_mode: bool = False,
) -> bool:
    """Check second derivatives with finite differences, as torch.autograd.gradgradcheck.

    The first derivative (x, g) -> grad(fn(x), x, g, create_graph=True) is itself checked by gradcheck,
    with respect to the inputs x and to the upstream gradient g: by its backward (check_rev_over_rev:
    reverse over reverse) and by forward mode through it (check_fwd_over_rev: forward over reverse, the
    tangent of a create_graph backward). grad_outputs: g, one per output of fn (random float64 tensors
    requiring grad by default)."""
    inputs = tuple(inputs)
    outs = fn(*inputs)
    outs = [o for o in (outs if isinstance(outs, (tuple, list)) else [outs]) if o.requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(seed + 1)
        grad_outputs = [o.wrap(on_device_of(o._data, rng.standard_normal(o.shape))) for o in outs]  # on o's device
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
        return tuple(x.wrap(np.zeros_like(x._data)) if d is None else d for d, x in zip(found, wrt))

    return gradcheck(
        first_derivative,
        inputs + grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        seed=seed,
        nondet_tol=nondet_tol,
        check_undefined_grad=check_undefined_grad,
        check_grad_dtypes=check_grad_dtypes,
        check_forward_ad=check_fwd_over_rev,
        check_backward_ad=check_rev_over_rev,
        fast_mode=fast_mode,
    )
