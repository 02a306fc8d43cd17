"""The rotary position embedding (RoPE, Su et al. 2021) as one primitive, in the rotate-half layout of Hugging Face's
Llama: the head's width is split in two halves (x1, x2), and the pair (x1[i], x2[i]) is rotated by the angle
pos * theta^(-2i / Dh).

    y = x * cos + rotate_half(x) * sin,   rotate_half(x) = cat(-x2, x1)

cos and sin are tables the caller builds from the positions (constants: no gradient flows into them), with each
half's angles repeated, so that they have x's last dim. rotate_half is a signed permutation: a gather by
`swap` (the two halves exchanged) times `sign` (-1 on the first half). The op is linear in x, and its Jacobian is a
block-diagonal rotation R, so the VJP is the inverse rotation, R^T g = g * cos + rotate_half^T(g * sin), with
rotate_half^T(u) = (u * sign)[..., swap] (the swap is its own inverse). docs/backprop.md ("Rotary embedding").
The forward folds the sign into the sine table once: y = x * cos + x[..., swap] * ssin, ssin = sign * sin.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Function


def half_swap(d: int) -> np.ndarray:
    """The index that exchanges the two halves of a last dim of width d: [d/2 .. d-1, 0 .. d/2-1]."""
    return np.concatenate([np.arange(d // 2, d), np.arange(d // 2)])


def signed_sin(sin) -> np.ndarray:
    """sin with its first half negated: rotate_half's sign folded into the table."""
    half = sin.shape[-1] // 2
    return np.concatenate([-sin[..., :half], sin[..., half:]], axis=-1)


class RotaryEmbedding(Function):
    """y = x * cos + rotate_half(x) * sin;  dx = g * cos + rotate_half^T(g * sin), the inverse rotation."""

    jvp_kind = "linear"  # ẏ = the same rotation applied to ẋ

    @staticmethod
    def forward(ctx, x, cos=None, sin=None):
        swap, ssin = half_swap(x.shape[-1]), signed_sin(sin).astype(x.dtype, copy=False)
        cos = cos.astype(x.dtype, copy=False)
        ctx.save(cos=cos, ssin=ssin)
        ctx.swap = swap
        return x * cos + x[..., swap] * ssin

    @staticmethod
    def backward(ctx, g):
        # rotate_half^T(g * sin) = (g * sin * sign)[..., swap] = (g * ssin)[..., swap]
        return (g * ctx.cos + (g * ctx.ssin)[..., ctx.swap],)
