"""Matrix product: torch.matmul's semantics (batched, broadcasting, 1-D operands) on np.matmul."""

from __future__ import annotations

import numpy as np

from .. import fast
from ..autograd import Function, tangent_sum


class MatMul(Function):
    """out = a @ b;  da = g @ b^T, db = a^T @ g
    (batch dims broadcast and are summed back by the graph walk; a 1-D operand as in torch.matmul)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.matmul(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_arrays
        need_a, need_b = ctx.needs_input_grad
        if a.ndim == 1 and b.ndim == 1:  # a dot product: out = sum a * b
            return (g * b if need_a else None), (g * a if need_b else None)
        a2, b2, g2 = _as_matrices(a, b, g)
        ga = g2 @ ctx.xp.swapaxes(b2, -1, -2) if need_a else None
        gb = fast.use.matmul_rhs_grad(ctx.xp, a2, g2, b2.ndim) if need_b else None
        if a.ndim == 1 and ga is not None:  # drop the row dim _as_matrices added
            ga = ga[..., 0, :]
        if b.ndim == 1 and gb is not None:  # and the column dim
            gb = gb[..., 0]
        return ga, gb

    @staticmethod
    def jvp(ctx, ta, tb):
        """d(a @ b) = ȧ @ b + a @ ḃ (bilinear)"""
        a, b = ctx.saved_arrays
        return tangent_sum(ta @ b if ta is not None else None, a @ tb if tb is not None else None)


def _as_matrices(a, b, g):
    """The operands as torch.matmul reads them: a (K,) as a row (1, K), b (K,) as a column (K, 1),
    and g with the dims that the 1-D operands removed put back."""
    if a.ndim == 1:
        a, g = a.reshape((1,) + a.shape), g.reshape(g.shape[:-1] + (1,) + g.shape[-1:])
    if b.ndim == 1:
        b, g = b.reshape(b.shape + (1,)), g.reshape(g.shape + (1,))
    return a, b, g


def rhs_grad(xp, a, g, b_ndim: int):
    """a^T @ g, the gradient of the right operand (batched; the graph walk sums a broadcast b's batch back)."""
    return xp.swapaxes(a, -1, -2) @ g


fast.formula("matmul_rhs_grad", rhs_grad)
