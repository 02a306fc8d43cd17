"""Rung 5, layers: scaled dot-product attention with masks, multi-head attention and the feed-forward block,
built from the engine's own ops (minitensor's matmul, masked_fill, softmax, Linear...).

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
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    return weights @ v, weights


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
        B, T_q, _ = query.shape
        T_k = key.shape[1]
        H, Dh = self.num_heads, self.d_head
        q = self.W_q(query).reshape(B, T_q, H, Dh).transpose(1, 2)  # (B, H, T_q, Dh)
        k = self.W_k(key).reshape(B, T_k, H, Dh).transpose(1, 2)  # (B, H, T_k, Dh)
        v = self.W_v(value).reshape(B, T_k, H, Dh).transpose(1, 2)
        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T_q, Dh)
        return self.W_o(out.transpose(1, 2).reshape(B, T_q, self.d_model))  # (B, T_q, D)


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = linear2(relu(linear1(x))): D -> d_ff -> D, at every position alike"""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        # exercise 5.3: linear1, ReLU, linear2
        return self.linear2(F.relu(self.linear1(x)))
