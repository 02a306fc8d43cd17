"""The Transformer of "Attention Is All You Need" in PyTorch: the reference transformer_np is checked against.

This file mirrors transformer_np/model.py class for class and attribute for attribute, with the
same parameter names and shapes, so weights move between the two by name (parity/convert.py)
and `diff transformer_np/model.py parity/model.py` shows mostly spelling. Only the framework
differs: torch.nn here, minitensor.nn there.

Masks are boolean, True = may attend, broadcastable to (B, H, T_q, T_k) (parity/masks.py). This
is the opposite of torch.nn.MultiheadAttention's convention (True = blocked); convert.py converts.
A query row with nothing to attend to yields zeros (no NaN), forward and gradient.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from transformer_np.config import ModelConfig


class Dropout(nn.Dropout):
    """torch.nn.Dropout with the `mask_fn` hook of minitensor.nn.Dropout.

    Extension (flagged, not in PyTorch): when `mask_fn` is set, the module is training and p > 0,
    forward calls `keep = mask_fn(shape)` for a boolean keep-mask (NumPy array or Tensor of the
    input's shape) instead of sampling, and returns input * keep / (1 - p). The parity report
    feeds both frameworks the same masks this way, so training-mode parity is checked too.
    """

    def __init__(self, p: float = 0.5):
        super().__init__(p)
        self.mask_fn = None

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.mask_fn is not None and self.training and self.p > 0:
            keep = torch.as_tensor(np.asarray(self.mask_fn(tuple(input.shape))), device=input.device)
            if keep.dtype != torch.bool or tuple(keep.shape) != tuple(input.shape):
                raise ValueError(f"Dropout.mask_fn: expected a bool mask of shape {tuple(input.shape)}, "
                                 f"got {keep.dtype} of shape {tuple(keep.shape)}")
            return input * keep / (1.0 - self.p)
        return super().forward(input)


class PositionalEncoding(nn.Module):
    """x + PE[:T], then dropout, with PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(same)."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.1):
        super().__init__()
        self.dropout = Dropout(dropout)
        # Computed in float64 NumPy, like transformer_np, so both sides hold the same table bit for bit.
        position = np.arange(max_len, dtype=np.float64)[:, None]                       # (max_len, 1)
        div_term = np.exp(np.arange(0, d_model, 2, dtype=np.float64) * (-math.log(10000.0) / d_model))
        pe = np.zeros((max_len, d_model), dtype=np.float64)
        pe[:, 0::2] = np.sin(position * div_term)
        pe[:, 1::2] = np.cos(position * div_term[: d_model // 2])
        self.register_buffer("pe", torch.as_tensor(pe, dtype=torch.get_default_dtype()), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.size(1)                                                                   # x: (B, T, D)
        if T > self.pe.size(0):
            raise ValueError(f"PositionalEncoding: sequence length {T} exceeds max_len {self.pe.size(0)}")
        return self.dropout(x + self.pe[:T].to(x.dtype))


class LearnedPositionalEmbedding(nn.Module):
    """x + E[:T] with a learned table E (max_len, D), then dropout (BERT/GPT style; the paper found it on par)."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.1):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.size(1)
        if T > self.embedding.num_embeddings:
            raise ValueError(f"LearnedPositionalEmbedding: sequence length {T} exceeds max_len "
                             f"{self.embedding.num_embeddings}")
        return self.dropout(x + self.embedding.weight[:T])


def scaled_dot_product_attention(q, k, v, mask=None, dropout=None):
    """softmax(q k^T / sqrt(Dh), masked) v, returning (output (B, H, T_q, Dh), weights (B, H, T_q, T_k)).

    Masked scores are set to -inf's stand-in (the dtype's lowest value) before the softmax and the
    weights are multiplied by the mask after it, so a query row with nothing to attend to gets zero
    weights and a zero output (PyTorch's own attention gives NaN there).
    """
    Dh = q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(Dh)                                    # (B, H, T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask
    if dropout is not None:
        weights = dropout(weights)
    return weights @ v, weights


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_H) W_o, head_i = Attention(Q W_q^i, K W_k^i, V W_v^i)."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.1):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"MultiHeadAttention: d_model {d_model} is not divisible by num_heads {num_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.dropout = Dropout(dropout)
        self.store_attention = False
        self.attn_weights = None

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.d_head).transpose(1, 2)               # (B, H, T, Dh)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, _, T, _ = x.shape
        return x.transpose(1, 2).reshape(B, T, self.d_model)                            # (B, T, D)

    def forward(self, query, key, value, mask=None, cache=None):
        q = self.split_heads(self.W_q(query))                                           # (B, H, T_q, Dh)
        k = self.split_heads(self.W_k(key))                                             # (B, H, T_k, Dh)
        v = self.split_heads(self.W_v(value))
        if cache is not None:
            k, v = cache.update(self, k, v)
        out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout)
        if self.store_attention:
            self.attn_weights = weights.detach().cpu().numpy()
        return self.W_o(self.merge_heads(out))                                          # (B, T_q, D)


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2, dropout on the hidden layer."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.1):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"PositionwiseFeedForward: activation must be 'relu' or 'gelu', got {activation!r}")
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.linear1(x)) if self.activation == "relu" else F.gelu(self.linear1(x))  # (B, T, d_ff)
        return self.linear2(self.dropout(h))


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each in a residual block: post-norm LN(x + drop(f(x))) or pre-norm x + drop(f(LN(x)))."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False, activation="relu"):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, activation, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)

    def forward(self, x, mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, mask))
            x = x + self.dropout2(self.feed_forward(self.norm2(x)))
        else:
            x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
            x = self.norm2(x + self.dropout2(self.feed_forward(x)))
        return x


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder memory, feed-forward; residual blocks as in EncoderLayer."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False, activation="relu"):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, activation, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)

    def forward(self, x, memory, src_mask=None, tgt_mask=None, cache=None):
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, tgt_mask, cache))
            h = self.norm2(x)
            x = x + self.dropout2(self.cross_attn(h, memory, memory, src_mask))
            x = x + self.dropout3(self.feed_forward(self.norm3(x)))
        else:
            x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask, cache)))
            x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, src_mask)))
            x = self.norm3(x + self.dropout3(self.feed_forward(x)))
        return x


class Encoder(nn.Module):
    """N encoder layers, then a final LayerNorm when final_norm (pre-norm stacks need it)."""

    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.1, norm_first=False,
                 final_norm=False, activation="relu"):
        super().__init__()
        self.layers = nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first, activation)
                                     for _ in range(num_layers)])
        self.norm = nn.LayerNorm(d_model) if final_norm else None

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x) if self.norm is not None else x                             # (B, S, D)


class Decoder(nn.Module):
    """N decoder layers, then a final LayerNorm when final_norm."""

    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.1, norm_first=False,
                 final_norm=False, activation="relu"):
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer(d_model, num_heads, d_ff, dropout, norm_first, activation)
                                     for _ in range(num_layers)])
        self.norm = nn.LayerNorm(d_model) if final_norm else None

    def forward(self, x, memory, src_mask=None, tgt_mask=None, cache=None):
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask, cache)
        return self.norm(x) if self.norm is not None else x                             # (B, T, D)


class Transformer(nn.Module):
    """Encoder-decoder Transformer: logits = generator(decoder(embed(tgt), encoder(embed(src))))."""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=512, num_heads=8, num_encoder_layers=6,
                 num_decoder_layers=6, d_ff=2048, dropout=0.1, max_len=5000, norm_first=False,
                 final_norm=False, activation="relu", positional="sinusoidal", tie_embeddings=False):
        super().__init__()
        if positional not in ("sinusoidal", "learned"):
            raise ValueError(f"Transformer: positional must be 'sinusoidal' or 'learned', got {positional!r}")
        self.config = ModelConfig(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_encoder_layers,
                                  num_decoder_layers, d_ff, dropout, max_len, norm_first, final_norm,
                                  activation, positional, tie_embeddings)
        self.d_model = d_model
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        if positional == "sinusoidal":
            self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        else:
            self.pos_encoding = LearnedPositionalEmbedding(d_model, max_len, dropout)
        self.encoder = Encoder(num_encoder_layers, d_model, num_heads, d_ff, dropout, norm_first, final_norm, activation)
        self.decoder = Decoder(num_decoder_layers, d_model, num_heads, d_ff, dropout, norm_first, final_norm, activation)
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        self.reset_parameters()
        if tie_embeddings:
            self.generator.weight = self.tgt_embed.weight

    @classmethod
    def from_config(cls, config: ModelConfig) -> "Transformer":
        return cls(**config.to_dict())

    def reset_parameters(self) -> None:
        """Xavier-uniform for every matrix, as in the Annotated Transformer; biases and LayerNorm keep torch's defaults."""
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def store_attention(self, flag: bool = True) -> None:
        for m in self.modules():
            if isinstance(m, MultiHeadAttention):
                m.store_attention = flag
                if not flag:
                    m.attn_weights = None

    def encode(self, src, src_mask=None):
        x = self.pos_encoding(self.src_embed(src) * math.sqrt(self.d_model))            # (B, S, D)
        return self.encoder(x, src_mask)

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None, cache=None):
        x = self.pos_encoding(self.tgt_embed(tgt) * math.sqrt(self.d_model))            # (B, T, D)
        return self.generator(self.decoder(x, memory, src_mask, tgt_mask, cache))       # (B, T, V_tgt)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None):
        return self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)
