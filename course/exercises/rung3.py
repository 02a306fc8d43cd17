"""Rung 3, tensor ops: the backward of Mul, Exp, Sum, Tanh and MatMul, written as the engine's own primitives are.

YOUR FILE: fill every `raise NotImplementedError("exercise N.M")`; the checks import it as it is on disk.

Each op is a `minitensor.Function`: `forward(ctx, *arrays)` computes on NumPy arrays and saves on `ctx` what
the backward needs (`ctx.save_for_backward(...)`, read back as `ctx.saved_arrays`, or plain attributes);
`backward(ctx, g)` gets g = dL/d(output), an array of the output's shape, and returns a tuple of one gradient
per input: `(g * b, g * a)` for two inputs, `(g * out,)` for one (a 1-tuple: mind the comma).

Broadcasting: return each gradient in the OUTPUT's shape; the engine sums it back to the input's shape in one
place (your rung 2 `sum_to`, minitensor's own unbroadcast), as PyTorch's engine does. Use ops with `Mul.apply(x, y)`.
Check with `python -m course check 3` (gradcheck in float64, PyTorch in float32 and float64).
"""

from __future__ import annotations

import numpy as np

import minitensor as mt


class Mul(mt.Function):
    """out = a * b (broadcasting)"""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        # exercise 3.1: da = g * b, db = g * a
        raise NotImplementedError("exercise 3.1")


class Exp(mt.Function):
    """out = e^a"""

    @staticmethod
    def forward(ctx, a):
        out = np.exp(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        # exercise 3.2: da = g * e^a, and e^a is the output
        raise NotImplementedError("exercise 3.2")


class Sum(mt.Function):
    """out = a summed over `dim` (an int, a tuple of ints, or None for all), kept as size-1 axes if keepdim"""

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        ctx.shape, ctx.dim, ctx.keepdim = a.shape, dim, keepdim
        return np.sum(a, axis=dim, keepdims=keepdim)

    @staticmethod
    def backward(ctx, g):
        # exercise 3.3: every input element contributed once to its sum, so da = g copied back over the summed
        # axes; without keepdim, those axes must first be put back (as size 1) so that g broadcasts.
        raise NotImplementedError("exercise 3.3")


class Tanh(mt.Function):
    """out = tanh a"""

    @staticmethod
    def forward(ctx, a):
        out = np.tanh(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        # exercise 3.4: da = g * (1 - tanh(a)^2), and tanh(a) is the output
        raise NotImplementedError("exercise 3.4")


class MatMul(mt.Function):
    """out = a @ b for a (..., M, K) and b (..., K, N), the leading (batch) axes broadcasting"""

    @staticmethod
    def forward(ctx, a, b):
        if a.ndim < 2 or b.ndim < 2:
            raise ValueError(f"MatMul: expected a and b with 2 or more dims, got shapes {a.shape} and {b.shape}")
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        # exercise 3.5: da = g b^T, db = a^T g, transposing the last two axes (the batch axes are summed back to
        # each input's shape by the engine)
        raise NotImplementedError("exercise 3.5")
