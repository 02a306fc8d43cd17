"""Rung 1, the chain rule on scalars: a value-and-gradient engine of a few dozen lines (micrograd-sized).

YOUR FILE: fill every `raise NotImplementedError("exercise N.M")`; the checks import it as it is on disk.

A `Value` holds one number (`data`), its gradient (`grad`, dL/d this value once `backward` ran) and how it was
made: `_prev`, the Values it came from, and `_backward`, the closure that sends `out.grad` to them.
Exercises 1.1-1.5 write the closures, 1.6 the walk. Check them with `python -m course check 1`.
"""

from __future__ import annotations

import math


class Value:
    def __init__(self, data, _prev=(), _op=""):
        self.data = float(data)
        self.grad = 0.0
        self._backward = lambda: None  # a leaf sends nothing further back
        self._prev = tuple(_prev)
        self._op = _op

    def __repr__(self):
        return f"Value(data={self.data}, grad={self.grad})"

    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data + other.data, (self, other), "+")

        def _backward():
            # exercise 1.1: d(a + b)/da = 1, d(a + b)/db = 1.
            raise NotImplementedError("exercise 1.1")

        out._backward = _backward
        return out

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data * other.data, (self, other), "*")

        def _backward():
            # exercise 1.2: d(a b)/da = b, d(a b)/db = a
            raise NotImplementedError("exercise 1.2")

        out._backward = _backward
        return out

    def __pow__(self, k):
        if not isinstance(k, (int, float)):
            raise TypeError(f"Value ** k: k must be a number, got {type(k).__name__}")
        out = Value(self.data**k, (self,), f"**{k}")

        def _backward():
            # exercise 1.3: d(a^k)/da = k a^(k-1)
            raise NotImplementedError("exercise 1.3")

        out._backward = _backward
        return out

    def tanh(self):
        t = math.tanh(self.data)
        out = Value(t, (self,), "tanh")

        def _backward():
            # exercise 1.4: d tanh(a)/da = 1 - tanh(a)^2
            raise NotImplementedError("exercise 1.4")

        out._backward = _backward
        return out

    def exp(self):
        e = math.exp(self.data)
        out = Value(e, (self,), "exp")

        def _backward():
            # exercise 1.5: d e^a/da = e^a
            raise NotImplementedError("exercise 1.5")

        out._backward = _backward
        return out

    def backward(self):
        """exercise 1.6: dL/dL = 1, then every node's _backward, each after every node that uses it (reverse
        topological order), so that a node's grad is complete before it is sent further back."""
        raise NotImplementedError("exercise 1.6")

    # Given: the rest of arithmetic, built from the ops above.
    def __neg__(self):
        return self * -1

    def __radd__(self, other):
        return self + other

    def __sub__(self, other):
        return self + (-other)

    def __rsub__(self, other):
        return other + (-self)

    def __rmul__(self, other):
        return self * other

    def __truediv__(self, other):
        return self * other**-1
