"""Speed device of forward over reverse for ops/fused.py's Linear: its backward with the tangents of its gradients,
on arrays in one call (Linear.backward_jvp), where the engine would otherwise run the backward on Tensors and
record each product's tangent (docs/decisions/006-hvp-cost.md; tests/minitensor/fast/test_linear.py checks the two
equal).
"""

from __future__ import annotations

from .. import fast
from ..autograd import tangent_sum
from ..ops.fused import Linear


def linear_backward_jvp(ctx, g, tg, tx, tw):
    """Linear's backward with the tangents of its gradients, on arrays (without it the engine runs the backward on
    Tensors): the product rule on each formula,
    ġx = ġ W + g Ẇ, ġW = ġ^T x + g^T ẋ, ġb = sum ġ (ġ, ẋ, Ẇ: None for none)."""
    x, weight = ctx.saved_arrays
    need_x, need_w, need_b = ctx.needs_input_grad
    g2, x2 = g.reshape(-1, g.shape[-1]), x.reshape(-1, x.shape[-1])
    tg2 = None if tg is None else tg.reshape(g2.shape)
    tx2 = None if tx is None else tx.reshape(x2.shape)
    tgx = tgw = tgb = None
    if need_x:
        tgx = tangent_sum(tg2 @ weight if tg2 is not None else None, g2 @ tw if tw is not None else None)
        tgx = None if tgx is None else tgx.reshape(x.shape)
    if need_w:
        tgw = tangent_sum(tg2.T @ x2 if tg2 is not None else None, g2.T @ tx2 if tx2 is not None else None)
    if need_b and tg2 is not None:
        tgb = ctx.xp.sum(tg2, axis=0)
    return Linear.backward(ctx, g), (tgx, tgw, tgb)


fast.device("linear_backward_jvp", linear_backward_jvp, evidence="docs/decisions/006-hvp-cost.md")
