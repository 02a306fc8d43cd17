"""The decoder-only Transformer of transformer_np/gpt/model.py in PyTorch, class for class and attribute for
attribute, so that weights copy by name (parity.convert.np_to_torch) and `diff` shows mostly spelling.

Written with torch's own pieces: nn.LayerNorm, nn.RMSNorm, F.gelu(approximate='tanh'), F.silu, and the rotary
embedding as transformers' apply_rotary_pos_emb (x * cos + rotate_half(x) * sin). The attention is the plain
composite softmax(masked_fill(q k^T / sqrt(Dh))) v in both of the engine's modes (dense and tiled compute the same
function). The angle tables come from transformer_np.gpt.model.rope_tables (float64 NumPy), so both sides rotate by
the same numbers.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from transformer_np.gpt.config import GPTConfig
from transformer_np.gpt.model import causal_keep, rope_tables


def rotate_half(x):
    """cat(-x2, x1) over the last dim's halves."""
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim: int, theta: float = 10000.0, max_positions: int = 0):
        super().__init__()
        self.head_dim, self.theta = head_dim, theta
        self.cos, self.sin = rope_tables(head_dim, np.arange(max_positions), theta)

    def rows(self, offset: int, length: int):
        stop = offset + length
        if stop <= len(self.cos):
            return self.cos[offset:stop], self.sin[offset:stop]
        return rope_tables(self.head_dim, np.arange(offset, stop), self.theta)

    def forward(self, x, offset: int = 0):
        cos, sin = self.rows(offset, x.shape[-2])
        cos, sin = (torch.as_tensor(a, dtype=x.dtype, device=x.device) for a in (cos, sin))
        return x * cos + rotate_half(x) * sin  # (B, H, T, Dh)


class KVCache:
    """One block's keys and values so far (B, Hkv, t, Dh), appended by concatenation."""

    def __init__(self):
        self.k = self.v = None
        self.length = 0

    def update(self, k, v):
        if self.k is not None:
            k, v = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)
        self.k, self.v, self.length = k, v, k.shape[2]
        return k, v


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        D, H, Hkv, Dh = config.n_embd, config.n_head, config.kv_heads, config.head_dim
        self.n_head, self.n_kv_head, self.head_dim = H, Hkv, Dh
        self.q_proj = nn.Linear(D, H * Dh, bias=config.bias)
        self.k_proj = nn.Linear(D, Hkv * Dh, bias=config.bias)
        self.v_proj = nn.Linear(D, Hkv * Dh, bias=config.bias)
        self.o_proj = nn.Linear(H * Dh, D, bias=config.bias)
        rope = config.positions == "rope"
        self.rotary = RotaryEmbedding(Dh, config.rope_theta, config.block_size) if rope else None
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x, cache: KVCache | None = None):
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        y = self.attend(q, k, v, cache)
        return self.resid_dropout(self.o_proj(y))

    def attend(self, q, k, v, cache: KVCache | None = None):
        B, T, _ = q.shape
        H, Hkv, Dh = self.n_head, self.n_kv_head, self.head_dim
        offset = cache.length if cache is not None else 0
        q = q.reshape(B, T, H, Dh).transpose(1, 2)  # (B, H, T, Dh)
        k = k.reshape(B, T, Hkv, Dh).transpose(1, 2)  # (B, Hkv, T, Dh)
        v = v.reshape(B, T, Hkv, Dh).transpose(1, 2)
        if self.rotary is not None:
            q, k = self.rotary(q, offset), self.rotary(k, offset)
        if cache is not None:
            k, v = cache.update(k, v)
        t_k = k.shape[2]
        q = q.reshape(B, Hkv, H // Hkv, T, Dh)
        k, v = k.unsqueeze(2), v.unsqueeze(2)  # (B, Hkv, 1, t_k, Dh)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(Dh))
        if T > 1:  # one new query sees every key (a cached step)
            keep = torch.as_tensor(causal_keep(T, t_k), device=q.device)
            scores = scores.masked_fill(~keep, float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # (B, Hkv, G, T, t_k)
        y = self.attn_dropout(weights) @ v
        return y.reshape(B, H, T, Dh).transpose(1, 2).reshape(B, T, H * Dh)


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        D, F_, bias = config.n_embd, config.ff_dim, config.bias
        self.kind = config.mlp
        if self.kind == "gelu":
            self.fc = nn.Linear(D, F_, bias=bias)
            self.proj = nn.Linear(F_, D, bias=bias)
        else:
            self.gate = nn.Linear(D, F_, bias=bias)
            self.up = nn.Linear(D, F_, bias=bias)
            self.down = nn.Linear(F_, D, bias=bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        if self.kind == "gelu":
            return self.dropout(self.proj(F.gelu(self.fc(x), approximate="tanh")))
        return self.dropout(self.down(F.silu(self.gate(x)) * self.up(x)))


def make_norm(config: GPTConfig) -> nn.Module:
    if config.norm == "rms":
        return nn.RMSNorm(config.n_embd, eps=config.norm_eps)
    return nn.LayerNorm(config.n_embd, eps=config.norm_eps, bias=config.bias)


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.norm1 = make_norm(config)
        self.attn = CausalSelfAttention(config)
        self.norm2 = make_norm(config)
        self.mlp = MLP(config)

    def forward(self, x, cache: KVCache | None = None):
        x = x + self.attn(self.norm1(x), cache)
        return x + self.mlp(self.norm2(x))


class GPTCache:
    def __init__(self, n_layer: int):
        self.layers = [KVCache() for _ in range(n_layer)]

    @property
    def length(self) -> int:
        return self.layers[0].length


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd)
        self.pos_emb = nn.Embedding(config.block_size, config.n_embd) if config.positions == "learned" else None
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.norm_f = make_norm(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_weights:
            self.lm_head.weight = self.tok_emb.weight

    def init_cache(self, capacity: int = 0) -> GPTCache:
        return GPTCache(self.config.n_layer)

    def forward(self, idx, cache: GPTCache | None = None):
        offset = cache.length if cache is not None else 0
        idx = torch.as_tensor(idx, device=self.tok_emb.weight.device)
        T = idx.shape[1]
        x = self.tok_emb(idx)
        if self.pos_emb is not None:
            x = x + self.pos_emb.weight[offset : offset + T]
        x = self.drop(x)
        for i, block in enumerate(self.blocks):
            x = block(x, cache.layers[i] if cache is not None else None)
        return self.lm_head(self.norm_f(x))
