"""Rung 5, layers: scaled dot-product attention with masks, multi-head attention and the feed-forward block,
built from the engine's own ops (minitensor's matmul, masked_fill, softmax, Linear...).

YOUR FILE: fill every `raise NotImplementedError("exercise N.M")`; the checks import it as it is on disk.

Shapes: B batch, H heads, T_q queries, T_k keys, D model width, Dh = D / H head width.
The attribute names (W_q, W_k, W_v, W_o, linear1, linear2) are the project's, so the check can copy your
weights into parity/'s PyTorch twin name for name. Check with `python -m course check 5`.
"""

from __future__ import annotations

import math

import minitensor.nn as nn
import minitensor.nn.functional as F


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(Dh)) v over the keys a query may see -> (output (..., T_q, Dv), weights (..., T_q, T_k)).

    mask: a bool Tensor broadcastable to (..., T_q, T_k), True where the query may attend to the key (every
    query row keeps at least one key here). A masked key must get exactly zero weight.
    """
    # exercise 5.1: scores, the mask (BEFORE the softmax: a score of -inf has weight e^-inf = 0), softmax, @ v
    raise NotImplementedError("exercise 5.1")


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_H) W_o, head_i = Attention(Q W_q^i, K W_k^i, V W_v^i)"""

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"MultiHeadAttention: d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None):
        """query (B, T_q, D), key and value (B, T_k, D), mask broadcastable to (B, H, T_q, T_k) -> (B, T_q, D)"""
        # exercise 5.2: project, split into heads (B, T, D) -> (B, H, T, Dh), attend (your 5.1), merge the heads
        # back (B, H, T_q, Dh) -> (B, T_q, D), project with W_o
        raise NotImplementedError("exercise 5.2")


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = linear2(relu(linear1(x))): D -> d_ff -> D, at every position alike"""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        # exercise 5.3: linear1, ReLU, linear2
        raise NotImplementedError("exercise 5.3")
