"""Speed device of ops/matmul.py's `rhs_grad`: the gradient of a weight shared by a batch, as one GEMM.

When the right operand is one (K, N) matrix and the left one is batched (a weight applied to (B, T, K)
activations), the formula makes a (B, K, N) gradient for every batch and the graph walk sums it back to (K, N).
Folding the batch into the rows, a^T @ g is one (K, B*T) @ (B*T, N) product: the sum over the batch becomes part of
the GEMM, and the (B, K, N) temporary is never made. The same numbers to round-off (the sums run in BLAS's order;
tests/minitensor/fast/test_matmul.py).
"""

from __future__ import annotations

import numpy as np

from .. import fast
from ..ops import matmul


def rhs_grad_folded(xp, a, g, b_ndim: int):
    """matmul.rhs_grad(xp, a, g, b_ndim), as one GEMM over the folded batch when b is one matrix and a batched."""
    if not (b_ndim == 2 and a.ndim > 2):
        return matmul.rhs_grad(xp, a, g, b_ndim)
    rows = int(np.prod(a.shape[:-1]))  # counted, not inferred (-1): K or N may be 0
    return a.reshape(rows, a.shape[-1]).T @ g.reshape(rows, g.shape[-1])


fast.device("matmul_rhs_grad", rhs_grad_folded, evidence="docs/decisions/030-the-core-and-its-speed-devices.md")
