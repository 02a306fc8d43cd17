"""Rung 1's checks: each op's closure alone (1.1-1.5), then the walk alone (1.6), against torch in float64 and
against finite differences of the learner's own forward.

An op's closure is called directly (out.grad set to a random number, the inputs' grads to a known start), so an
op is judged before the walk exists; the walk is judged on a graph whose closures the check writes itself, so a
slip in an op does not show up as a slip in the walk.
"""

from __future__ import annotations

import math

import torch

from ..runner import Exercise
from .common import CheckFailed, diagnose_scalar, pointing, rng, scalar_differs

EPS = 1e-6  # central differences on float64 scalars: error about EPS^2 * f''' + 1e-16 / EPS
FD_TOL = 1e-6
TORCH_TOL = 1e-12


def _op_check(ex: str, name: str, build, torch_fn, points, needs_twice=False):
    """For each point: out = build(*values); out.grad = g; out._backward(); the inputs' grads against torch and
    against finite differences of build's forward. `needs_twice`: the same Value fed in every slot too."""

    def check(mod):
        V = mod.Value
        r = rng(1)
        for xs in points:
            g = float(r.standard_normal())
            for twice in (False, True) if needs_twice else (False,):
                vals = [V(xs[0])] * len(xs) if twice else [V(x) for x in xs]
                start = [0.25 * (i + 1) for i in range(len(vals))]  # grads already there: a closure must add to them
                for v, s in zip(vals, start):
                    v.grad = s
                if twice:
                    vals[0].grad = start[0]
                out = build(*vals)
                if not isinstance(out, V):
                    raise CheckFailed(f"{name}: expected a Value, got {type(out).__name__}")
                ts = (
                    [torch.tensor(float(v.data), dtype=torch.float64, requires_grad=True) for v in vals[:1]]
                    if twice
                    else [torch.tensor(float(x), dtype=torch.float64, requires_grad=True) for x in xs]
                )
                t_out = torch_fn(*(ts * len(xs) if twice else ts))
                if scalar_differs(out.data, t_out.item(), TORCH_TOL):
                    raise CheckFailed(f"{name} forward at {xs}: expected {t_out.item()!r}, got {out.data!r}")
                out.grad = g
                out._backward()
                expected = torch.autograd.grad(t_out, ts, torch.tensor(g, dtype=torch.float64))
                for i, t_grad in enumerate(expected):
                    before = start[0] if twice else start[i]
                    now = vals[i].grad
                    if not isinstance(now, (int, float)):
                        raise CheckFailed(
                            f"{name}: after your closure, input {i}'s .grad is {now!r}; expected a number"
                        )
                    got, want = now - before, t_grad.item()
                    if scalar_differs(got, want, TORCH_TOL):
                        what = f"{name}(v, v), the same Value v in both places" if twice else f"{name} at {xs}"
                        hint = ""
                        if twice and abs(got - want / 2) < 1e-9 * max(1.0, abs(want)):
                            hint = " v is used twice, so it gets two shares: add to .grad (+=), do not overwrite it."
                        elif abs(now - want) < 1e-9 * max(1.0, abs(want)):
                            hint = " .grad held a share from another use of the Value: add to it (+=), not overwrite."
                        else:
                            hint = pointing(diagnose_scalar(got, want))
                        raise CheckFailed(
                            f"{what}, out.grad = {g:.4f}: input {i}'s .grad went from {before} to {now!r}, a change of "
                            f"{got!r}; expected a change of {want!r} (torch).{hint}"
                        )
                if not twice:  # finite differences of the learner's own forward: d out/d x_i times g
                    for i in range(len(xs)):
                        hi = [x + (EPS if j == i else 0.0) for j, x in enumerate(xs)]
                        lo = [x - (EPS if j == i else 0.0) for j, x in enumerate(xs)]
                        num = g * (build(*map(V, hi)).data - build(*map(V, lo)).data) / (2 * EPS)
                        got = vals[i].grad - start[i]
                        if scalar_differs(got, num, FD_TOL):
                            raise CheckFailed(
                                f"{name} at {xs}, out.grad = {g:.4f}: finite differences of your forward give "
                                f"{num!r} for input {i}; your closure added {got!r}"
                            )

    return Exercise(ex, name, check)


def _graph(V, a, b):
    """L = tanh(a b + a) * (a b) + b, built node by node with the check's own closures: a diamond (a and c = a b
    used twice), so a walk in the wrong order, or one that visits a node twice, gives wrong grads."""

    def node(data, prev, rule):
        out = V(data, prev)

        def _backward():
            for p, local in zip(prev, rule()):
                p.grad += local * out.grad

        out._backward = _backward
        return out

    c = node(a.data * b.data, (a, b), lambda: (b.data, a.data))
    d = node(c.data + a.data, (c, a), lambda: (1.0, 1.0))
    e = node(math.tanh(d.data), (d,), lambda: (1 - math.tanh(d.data) ** 2,))
    f = node(e.data * c.data, (e, c), lambda: (c.data, e.data))
    return node(f.data + b.data, (f, b), lambda: (1.0, 1.0))


def _check_backward(mod):
    V = mod.Value
    for xa, xb in ((0.7, -1.3), (-0.4, 0.9)):
        a, b = V(xa), V(xb)
        L = _graph(V, a, b)
        L.backward()
        if scalar_differs(L.grad, 1.0, 0.0):
            raise CheckFailed(f"the root's grad must start at dL/dL = 1, got {L.grad!r}")
        ta, tb = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (xa, xb))
        c = ta * tb
        (torch.tanh(c + ta) * c + tb).backward()
        for name, v, t in (("a", a, ta), ("b", b, tb)):
            if scalar_differs(v.grad, t.grad.item(), TORCH_TOL):
                raise CheckFailed(
                    f"on L = tanh(a*b + a) * (a*b) + b at a={xa}, b={xb}: expected "
                    f"dL/d{name} = {t.grad.item()!r} (torch), got {v.grad!r}: every node's _backward must run once, "
                    f"after every node that uses it (reverse topological order)"
                )
    # A chain 5,000 deep: a recursive walk dies at Python's recursion limit (1,000 frames); an explicit stack does not.
    x = V(0.5)
    y = x
    for _ in range(5000):
        prev = y
        y = V(prev.data, (prev,))

        def _backward(p=prev, out=y):
            p.grad += out.grad

        y._backward = _backward
    try:
        y.backward()
    except RecursionError:
        raise CheckFailed(
            "on a chain 5,000 nodes deep: RecursionError. A recursive graph walk stops at "
            "Python's recursion limit; walk with an explicit stack (a list you push to and pop from)"
        ) from None
    if scalar_differs(x.grad, 1.0, 0.0):
        raise CheckFailed(f"on a chain of identities 5,000 deep: expected x.grad = 1.0, got {x.grad!r}")


POINTS2 = [(0.7, -1.3), (-2.0, 0.4)]
POINTS1 = [(0.7,), (-1.6,)]
EXERCISES = [
    _op_check("1.1", "__add__", lambda a, b: a + b, lambda a, b: a + b, POINTS2, needs_twice=True),
    _op_check("1.2", "__mul__", lambda a, b: a * b, lambda a, b: a * b, POINTS2, needs_twice=True),
    _op_check("1.3", "__pow__", lambda a: a**3, lambda a: a**3, POINTS1),
    _op_check("1.4", "tanh", lambda a: a.tanh(), torch.tanh, POINTS1),
    _op_check("1.5", "exp", lambda a: a.exp(), torch.exp, POINTS1),
    Exercise("1.6", "backward", _check_backward),
]
