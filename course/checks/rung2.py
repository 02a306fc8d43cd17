"""Rung 2's checks: sum_to against torch's sum_to_size (2.1), a Node's accumulate alone (2.2), then the walk (2.3)
on graphs whose backward_fns the check writes itself, so that a slip in an op does not show up as a slip in the
walk: a diamond with broadcasting against torch (float64), the order and count of every backward_fn's call, a
root that is not a scalar, and a chain 10,000 deep (no RecursionError, the recursion limit left alone).
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from ..runner import Exercise
from .common import CheckFailed, compare, expect_array, rng

SUM_TO_CASES = [  # (g's shape, the shape to sum back to)
    ((2, 3, 4), (3, 4)),
    ((2, 3, 4), (2, 1, 4)),
    ((2, 3, 4), (1, 3, 1)),
    ((5, 2, 3, 4), (3, 1)),
    ((3, 4), ()),
    ((3, 4), (3, 4)),
    ((2, 1, 4), (1, 1, 4)),
]
DEPTH = 10_000
A, B = (3, 2, 4), (1, 4)  # the diamond's inputs: b broadcasts to a's shape


def _sum_to_hint(g: np.ndarray, shape: tuple, got: np.ndarray) -> str:
    """Which of sum_to's two steps a wrong result left out."""
    lead = g.ndim - len(shape)
    ones = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    if got.shape == g.shape[lead:] and ones:
        axis, size = ones[0], g.shape[lead + ones[0]]
        done = "the leading axes are summed away, but axis" if lead else "axis"
        return (
            f"{done} {axis} is not summed, where the target has size 1 and g has {size} (it was stretched by "
            "broadcasting): sum over it too, with keepdims=True"
        )
    if got.shape == g.shape:
        return "you returned g's shape: nothing was summed"
    if got.ndim > len(shape):
        return (
            f"the {lead} leading axes that broadcasting added must be summed away, not kept as size 1: the result "
            f"has the target's {len(shape)} axes"
        )
    if lead and got.shape == g.shape[:lead] + tuple(shape):
        return f"the size-1 axes are summed, but not the {lead} leading axes that broadcasting added: sum those away"
    if ones and got.shape == tuple(n for i, n in enumerate(shape) if i not in ones):
        return "the stretched size-1 axes were summed without keepdims=True: keep them, as size 1"
    return ""


def _check_sum_to(mod):
    r = rng(20)
    for g_shape, shape in SUM_TO_CASES:
        where = f"sum_to(g of shape {g_shape}, {shape})"
        g = r.standard_normal(g_shape)
        want = torch.tensor(g).sum_to_size(shape).numpy() if shape else np.asarray(g.sum())
        got = mod.sum_to(g.copy(), shape)
        if isinstance(got, np.ndarray) and got.shape != tuple(shape):
            hint = _sum_to_hint(g, shape, got)
            raise CheckFailed(
                f"{where}: expected shape {tuple(shape)}, got {got.shape}" + (f": {hint}" if hint else "")
            )
        got = expect_array(where, got, tuple(shape), np.float64)
        compare(where, got, want, reference="torch's sum_to_size")


def _check_accumulate(mod):
    r = rng(21)
    shape = (2, 3)
    n = mod.Node(np.zeros(shape))
    g1, g2 = r.standard_normal(shape), r.standard_normal(shape)
    keep = g1.copy()
    n.accumulate(g1)
    if n.grad is None:
        raise CheckFailed("after accumulate(g) on a fresh Node, .grad is still None; expected g")
    compare("after one accumulate(g) on a fresh Node, .grad", expect_array(".grad", n.grad, shape, np.float64), keep)
    n.accumulate(g1)  # the same array again: as add(a, a) sends one g to both of its parents
    if not np.array_equal(g1, keep):
        raise CheckFailed(
            "accumulate changed the array it was given: .grad kept g itself, then an in-place += added to it (the "
            "caller's g doubled). Start .grad with a copy, g.copy()"
        )
    if np.allclose(n.grad, keep):
        raise CheckFailed(
            "after accumulate(g) twice, .grad is g, not 2 g: the second share replaced the first. A node used "
            "twice gets two shares: add them"
        )
    compare("after accumulate(g) twice, .grad", n.grad, 2 * keep)
    n.accumulate(g2)
    compare("after accumulate(g), accumulate(g), accumulate(g2), .grad", n.grad, 2 * keep + g2)


class _Graph:
    """Nodes of the learner's class built with the check's own backward_fns, each call of which is logged."""

    def __init__(self, Node):
        self.Node, self.calls, self.users = Node, [], {}

    def node(self, name, data, parents, rule):
        def backward_fn(g):
            self.calls.append(name)
            return rule(g)

        out = self.Node(data, parents, backward_fn, name)
        out.name = name
        for p in parents:
            self.users.setdefault(getattr(p, "name", "?"), []).append(name)
        return out

    def leaf(self, name, data):
        x = self.Node(data)
        x.name = name
        return x


def _diamond(Node, xa, xb):
    """L = sum(tanh(a b + a) * (a b) + b), a (3, 2, 4), b (1, 4) broadcast (a leading axis added, a size-1 axis
    stretched): c = a b is used twice, a twice, b twice."""
    G = _Graph(Node)
    a, b = G.leaf("a", xa), G.leaf("b", xb)
    c = G.node("c = a * b", xa * xb, (a, b), lambda g: (g * xb, g * xa))
    d = G.node("d = c + a", c.data + xa, (c, a), lambda g: (g, g))
    t = np.tanh(d.data)
    e = G.node("e = tanh(d)", t, (d,), lambda g: (g * (1 - t * t),))
    f = G.node("f = e * c", t * c.data, (e, c), lambda g: (g * c.data, g * t))
    s = G.node("s = f + b", f.data + xb, (f, b), lambda g: (g, g))
    return G, (a, b, c), s, G.node("L = sum(s)", s.data.sum(), (s,), lambda g: (np.broadcast_to(g, s.data.shape),))


def _torch_diamond(xa, xb, G=None):
    ta, tb = (torch.tensor(x, requires_grad=True) for x in (xa, xb))
    c = ta * tb
    c.retain_grad()
    s = torch.tanh(c + ta) * c + tb
    (s.sum() if G is None else s).backward(None if G is None else torch.tensor(G))
    return ta.grad.numpy(), tb.grad.numpy(), c.grad.numpy()


def _check_order(G):
    counts = {n: G.calls.count(n) for n in set(G.calls)}
    twice = sorted(n for n, k in counts.items() if k > 1)
    if twice:
        raise CheckFailed(
            f"on L = sum(tanh(a b + a) * (a b) + b): the backward_fn of {twice[0]} ran {counts[twice[0]]} times; "
            "each must run once (a node used twice is still one node: keep a set of the nodes already placed)"
        )
    when = {n: i for i, n in enumerate(G.calls)}
    for node, users in G.users.items():
        for user in users:
            if node in when and user in when and when[node] < when[user]:
                raise CheckFailed(
                    f"on L = sum(tanh(a b + a) * (a b) + b): the backward_fn of {node} ran before that of {user}, "
                    f"which uses it, so {node.split(' ')[0]}'s grad was not complete yet: run every node after every "
                    "node that uses it (reverse topological order, not breadth-first)"
                )


def _check_walk(mod):
    limit = sys.getrecursionlimit()
    try:
        _check_diamond(mod)
        _check_deep(mod, limit)
    finally:
        sys.setrecursionlimit(limit)


def _check_diamond(mod):
    r = rng(22)
    xa, xb = r.standard_normal(A), r.standard_normal(B)
    want_a, want_b, want_c = _torch_diamond(xa, xb)
    G, (a, b, c), _, L = _diamond(mod.Node, xa, xb)
    L.backward()
    where = f"on L = sum(tanh(a b + a) * (a b) + b), a {A}, b {B} broadcast, L.backward()"
    if L.grad is None or np.shape(L.grad) != () or L.grad != 1.0:
        raise CheckFailed(f"{where}: the root's grad must start at dL/dL = 1, got {L.grad!r}")
    _check_order(G)
    for name, x in (("a", a), ("b", b), ("c", c)):
        if x.grad is None:
            raise CheckFailed(f"{where}: no gradient reached {name}")
    # c is used by d and by f: its grad is the sum of two shares.
    t = np.tanh(c.data + xa)
    from_f, from_d = t, c.data * (1 - t * t)
    for share, other in ((from_f, "d"), (from_d, "f")):
        if np.allclose(c.grad, share) and not np.allclose(share, want_c):
            raise CheckFailed(
                f"{where}: c = a * b is used by d and by f, and its grad holds only one share (the one from "
                f"{'f' if other == 'd' else 'd'}): the share from {other} was overwritten. Accumulate each share "
                "(parent.accumulate), never assign"
            )
    for name, x, want in (("a", a, want_a), ("b", b, want_b), ("c = a * b", c, want_c)):
        if np.shape(x.grad) != want.shape and np.shape(x.grad) == A:
            raise CheckFailed(
                f"{where}: {name}.grad has shape {A}, not {name}'s {want.shape}: {name} was broadcast to {A} by the "
                "op that used it, and the walk must sum each share back to its parent's shape (sum_to)"
            )
        expect_array(f"{where}: {name}.grad", x.grad, want.shape, np.float64)
        compare(f"{where}: {name}.grad", x.grad, want)
    # A root that is not a scalar: its gradient is the one given.
    Gup = r.standard_normal(A)
    _, (a, b, _), s, _ = _diamond(mod.Node, xa, xb)
    s.backward(Gup.copy())
    want_a, want_b, _ = _torch_diamond(xa, xb, Gup)
    for name, x, want in (("a", a, want_a), ("b", b, want_b)):
        if x.grad is None:
            raise CheckFailed(f"s.backward(g) with s of shape {A}: no gradient reached {name}")
        compare(f"s = tanh(a b + a) * (a b) + b, s.backward(g) with a random g: {name}.grad", x.grad, want)


def _check_deep(mod, limit: int):
    """A chain x -> x + 1 -> ... DEPTH deep: no RecursionError, and the recursion limit still `limit`."""
    x = mod.Node(np.array([0.5, -1.0]))
    y = x
    for _ in range(DEPTH):
        y = mod.Node(y.data + 1.0, (y,), lambda g: (g,), "+1")
    g = np.array([0.3, -0.7])
    try:
        y.backward(g.copy())
    except RecursionError:
        raise CheckFailed(
            f"on a chain {DEPTH:,} nodes deep: RecursionError. A recursive graph walk stops at Python's recursion "
            "limit (1,000 frames); walk with an explicit stack (a list you push to and pop from)"
        ) from None
    raised = sys.getrecursionlimit()
    if raised > limit:
        raise CheckFailed(
            f"on a chain {DEPTH:,} nodes deep: your walk raised Python's recursion limit from {limit} to {raised}, "
            "which only moves the crash to a deeper graph (or to a crash of the interpreter): walk with an explicit "
            "stack instead"
        )
    if x.grad is None:
        raise CheckFailed(f"on a chain of identities {DEPTH:,} deep: no gradient reached its start")
    compare(f"on a chain of identities {DEPTH:,} deep, backward(g): the start's grad", x.grad, g)


EXERCISES = [
    Exercise("2.1", "sum_to", _check_sum_to),
    Exercise("2.2", "Node.accumulate", _check_accumulate),
    Exercise("2.3", "Node.backward: the walk", _check_walk, needs=("2.1", "2.2")),
]
