"""Rung 2, the engine on tensors: a Node that holds an array, the walk that sends gradients back through a graph
of them, and the unbroadcasting that gives every input a gradient of its own shape.

A `Node` holds a NumPy array (`data`), its gradient (`grad`: None until a gradient reaches it, then an array of
data's shape), the Nodes it came from (`parents`) and `backward_fn`: given g = dL/d(this node), an array of this
node's shape, it returns one gradient per parent. A broadcasting op (add, mul) returns them in ITS OWN shape,
as NumPy broadcast them; the walk sums each back to its parent's shape with `sum_to`, in this one place, so that
no op has to. The ops at the bottom are given: they only build Nodes.

Exercises: 2.1 sum_to, 2.2 Node.accumulate, 2.3 Node.backward (the walk). Check them with
`python -m course check 2`. Rungs 3 and 4 run your ops through this engine as well as through minitensor's.
"""

from __future__ import annotations

import numpy as np


def sum_to(g: np.ndarray, shape: tuple) -> np.ndarray:
    """g summed back to `shape`, a shape that broadcasts to g.shape: over the leading axes that broadcasting
    added, and over every axis where `shape` has size 1 and g does not (kept, as size 1)."""
    # exercise 2.1: first sum away the extra leading axes, then sum (keepdims) over the stretched size-1 axes
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead else g
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=stretched, keepdims=True) if stretched else g


class Node:
    """An array in a graph: data, grad, parents, backward_fn (g -> one gradient per parent)."""

    def __init__(self, data, parents=(), backward_fn=None, op: str = ""):
        self.data = np.asarray(data, dtype=np.float64)
        self.grad = None
        self.parents = tuple(parents)
        self.backward_fn = backward_fn  # None for a leaf: nothing further back
        self.op = op

    def __repr__(self):
        return f"Node({self.op or 'leaf'}, shape={self.data.shape})"

    def accumulate(self, g: np.ndarray) -> None:
        """Add the share g (an array of data's shape) to self.grad: the first share starts it, later ones add."""
        # exercise 2.2: a node used twice gets two shares, both counted. Never keep g itself: the same array may
        # arrive again (add(a, a) sends its g to both parents), and an in-place += would change it there too.
        self.grad = g.copy() if self.grad is None else self.grad + g

    def backward(self, g=None) -> None:
        """Send dL/d(self) back through the graph. self's gradient is g (ones for a single-element node when g is
        None); each node's backward_fn runs once, after every node that uses it has sent it its share (reverse
        topological order), and each parent accumulates its share summed back to its own shape. Iterative: a
        chain of 10,000 nodes must not hit Python's recursion limit."""
        # exercise 2.3: order the nodes (a depth-first search with an explicit stack, each node placed after all
        # its parents), then walk that order backwards
        if g is None:
            if self.data.size != 1:
                raise ValueError(f"backward: g is needed for a node of shape {self.data.shape} (not one element)")
            g = np.ones_like(self.data)
        order, seen, stack = [], {id(self)}, [(self, iter(self.parents))]
        while stack:
            node, parents = stack[-1]
            parent = next(parents, None)
            if parent is None:
                order.append(node)  # all its parents are placed: the node goes after them
                stack.pop()
            elif id(parent) not in seen:
                seen.add(id(parent))
                stack.append((parent, iter(parent.parents)))
        self.accumulate(np.asarray(g, dtype=np.float64))
        for node in reversed(order):  # every user of a node comes before it
            if node.backward_fn is None or node.grad is None:
                continue
            for parent, share in zip(node.parents, node.backward_fn(node.grad)):
                parent.accumulate(sum_to(np.asarray(share, dtype=np.float64), parent.data.shape))


# Given: the ops, each a forward and the backward_fn beside it, returning gradients in the output's shape.
def add(a: Node, b: Node) -> Node:
    return Node(a.data + b.data, (a, b), lambda g: (g, g), "+")


def mul(a: Node, b: Node) -> Node:
    return Node(a.data * b.data, (a, b), lambda g: (g * b.data, g * a.data), "*")


def matmul(a: Node, b: Node) -> Node:
    """a (..., M, K) @ b (..., K, N); the batch axes broadcast, and sum_to sums them back"""
    return Node(a.data @ b.data, (a, b), lambda g: (g @ np.swapaxes(b.data, -1, -2), np.swapaxes(a.data, -1, -2) @ g))


def tanh(a: Node) -> Node:
    t = np.tanh(a.data)
    return Node(t, (a,), lambda g: (g * (1 - t * t),), "tanh")


def total(a: Node) -> Node:
    """the sum of every element (a 0-d node)"""
    return Node(a.data.sum(), (a,), lambda g: (np.broadcast_to(g, a.data.shape),), "sum")


class Context:
    """What a minitensor.Function's forward saves for its backward, for `apply` below."""

    def save_for_backward(self, *arrays):
        self.saved_arrays = arrays


def apply(Fn, *inputs: Node, **kwargs) -> Node:
    """Run a minitensor.Function-style op (forward(ctx, *arrays, **kwargs), backward(ctx, g)) on Nodes: the rung 3
    and 4 checks run your ops through your engine with this."""
    ctx = Context()
    ctx.needs_input_grad = (True,) * len(inputs)
    out = Fn.forward(ctx, *[x.data for x in inputs], **kwargs)
    return Node(out, inputs, lambda g: Fn.backward(ctx, g), Fn.__name__)
