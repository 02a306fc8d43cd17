"""Rung 6, the model: the encoder-decoder of "Attention Is All You Need", assembled from YOUR rung 5 layers.

Post-norm residual blocks as in the paper, no dropout (the check compares against parity/'s PyTorch twin with
dropout 0). The attribute names are the project's (transformer_np/model.py), so your weights copy into the twin
name for name and the check can compare the two models layer by layer.
Check with `python -m course check 6`; it runs rung 5's layers too, so pass rung 5 first.
"""

from __future__ import annotations

import math

import numpy as np

import minitensor as mt
import minitensor.nn as nn
from transformer_np.masks import PAD_ID, padding_mask, target_mask

from .rung5 import MultiHeadAttention, PositionwiseFeedForward


def sinusoidal_table(max_len: int, d_model: int) -> np.ndarray:
    """PE[pos, 2i] = sin(pos / 10000^(2i / D)), PE[pos, 2i + 1] = cos(pos / 10000^(2i / D)): (max_len, D) float64"""
    # exercise 6.1
    pos = np.arange(max_len)[:, None]  # (max_len, 1)
    rate = np.exp(-math.log(10000.0) * np.arange(0, d_model, 2) / d_model)  # (D / 2,) = 10000^(-2i / D)
    pe = np.zeros((max_len, d_model))
    pe[:, 0::2] = np.sin(pos * rate)
    pe[:, 1::2] = np.cos(pos * rate)
    return pe


class EncoderLayer(nn.Module):
    """x = norm1(x + self_attn(x, x, x)); x = norm2(x + feed_forward(x))"""

    def __init__(self, d_model: int, num_heads: int, d_ff: int):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x, mask=None):
        """x (B, S, D), mask broadcastable to (B, H, S, S) -> (B, S, D)"""
        # exercise 6.2: two residual blocks, each followed by its LayerNorm
        x = self.norm1(x + self.self_attn(x, x, x, mask))
        return self.norm2(x + self.feed_forward(x))


class DecoderLayer(nn.Module):
    """masked self-attention, cross-attention over the encoder's memory, feed-forward: three post-norm blocks"""

    def __init__(self, d_model: int, num_heads: int, d_ff: int):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)

    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        """x (B, T, D), memory (B, S, D); tgt_mask to (B, H, T, T), src_mask to (B, H, T, S) -> (B, T, D)"""
        # exercise 6.3: self-attention under tgt_mask, cross-attention (queries x, keys and values memory) under
        # src_mask, feed-forward; each block x = norm(x + block(x))
        x = self.norm1(x + self.self_attn(x, x, x, tgt_mask))
        x = self.norm2(x + self.cross_attn(x, memory, memory, src_mask))
        return self.norm3(x + self.feed_forward(x))


class Stack(nn.Module):
    """N layers in `self.layers` (the name the project's checkpoints use: encoder.layers.0.self_attn...)."""

    def __init__(self, layers: list):
        super().__init__()
        self.layers = nn.ModuleList(layers)


class Transformer(nn.Module):
    """logits = generator(decoder(embed(tgt), encoder(embed(src)))), embed(x) = E[x] * sqrt(D) + PE[:len(x)]"""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        self.pe = sinusoidal_table(max_len, d_model)  # a constant, not a parameter
        self.encoder = Stack([EncoderLayer(d_model, num_heads, d_ff) for _ in range(num_layers)])
        self.decoder = Stack([DecoderLayer(d_model, num_heads, d_ff) for _ in range(num_layers)])
        self.generator = nn.Linear(d_model, tgt_vocab_size)

    def forward(self, src, tgt):
        """src (B, S), tgt (B, T) token ids (NumPy int arrays; PAD_ID = 0 is padding) -> logits (B, T, V_tgt)"""
        src_mask = padding_mask(src, PAD_ID)  # (B, 1, 1, S): keys that are not padding
        tgt_mask = target_mask(tgt, PAD_ID)  # (B, 1, T, T): causal and not padding
        # exercise 6.4: embed both sides (times sqrt(D), plus the table's first S or T rows, cast to the
        # embeddings' dtype), run the encoder layers, then the decoder layers over the memory, then the generator
        S, T = src.shape[1], tgt.shape[1]
        x = self.src_embed(mt.tensor(src)) * math.sqrt(self.d_model)
        x = x + mt.tensor(self.pe[:S].astype(x.dtype))
        for layer in self.encoder.layers:
            x = layer(x, src_mask)
        memory = x  # (B, S, D)
        y = self.tgt_embed(mt.tensor(tgt)) * math.sqrt(self.d_model)
        y = y + mt.tensor(self.pe[:T].astype(y.dtype))
        for layer in self.decoder.layers:
            y = layer(y, memory, src_mask, tgt_mask)
        return self.generator(y)  # (B, T, V_tgt)
