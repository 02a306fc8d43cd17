"""The rotary position embedding (RoPE, Su et al. 2021) as one primitive, in the rotate-half layout of Hugging Face's
Llama: the head's width is split in two halves (x1, x2), and the pair (x1[i], x2[i]) is rotated by the angle
pos * theta^(-2i / Dh).

    y = x * cos + rotate_half(x) * sin,   rotate_half(x) = cat(-x2, x1)

cos and sin are tables the caller builds from the positions (constants: no gradient flows into them), with each
half's angles repeated, so that they have x's last dim. rotate_half is a signed permutation: `swap` (the two
halves exchanged, a reshape and a reversed slice: no index array, on any device) times `sign` (-1 on the first
half). The op is linear in x, and its Jacobian is a block-diagonal rotation R, so the VJP is the inverse rotation,
R^T g = g * cos + rotate_half^T(g * sin), with rotate_half^T(u) = swap(u * sign) (the swap is its own inverse);
docs/backprop.md ("Rotary position embedding"). The forward folds the sign into the sine table once:
y = x * cos + swap(x) * ssin, ssin = sign * sin.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Function
from ..devices import array_module


def swap(a):
    """a with the two halves of its last dim exchanged, (x1, x2) -> (x2, x1), on arrays or Tensors alike."""
    shape = tuple(a.shape)
    return a.reshape(shape[:-1] + (2, shape[-1] // 2))[..., ::-1, :].reshape(shape)


def signed_sin(sin):
    """sin with its first half negated: rotate_half's sign folded into the table (on sin's device)."""
    half = sin.shape[-1] // 2
    sign = np.ones(sin.shape[-1], dtype=sin.dtype)
    sign[:half] = -1
    return sin * array_module(sin).asarray(sign)


class RotaryEmbedding(Function):
    """y = x * cos + rotate_half(x) * sin;  dx = g * cos + rotate_half^T(g * sin), the inverse rotation."""

    jvp_kind = "linear"  # ẏ = the same rotation applied to ẋ

    @staticmethod
    def forward(ctx, x, cos=None, sin=None):
        ssin = signed_sin(sin).astype(x.dtype, copy=False)
        cos = cos.astype(x.dtype, copy=False)
        ctx.save(cos=cos, ssin=ssin)
        return x * cos + swap(x) * ssin

    @staticmethod
    def backward(ctx, g):
        # rotate_half^T(g * sin) = swap(g * sin * sign) = swap(g * ssin)
        return (g * ctx.cos + swap(g * ctx.ssin),)
