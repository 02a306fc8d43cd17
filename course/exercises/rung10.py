"""Rung 10, a decoder-only model (GPT): the causal mask, rotary positions, a GPT assembled from them and YOUR rung 5
attention, and sampling the next token.

This rung runs on the project's engine (minitensor), as rungs 5 to 9 do: your model is made of minitensor's
Modules, and the check compares it with the project's own GPT (transformer_np.gpt) in float64, your weights copied
into it name for name: the logits and every parameter's gradient.

Positions: rotary (RoPE), not learned. A learned table is one more nn.Embedding, added as rung 6 added its
sinusoids; the rotation is the new idea: it turns each query and key by an angle proportional to its position, so
that q . k depends on the two positions only through their difference. The layout is rotate-half (Llama's and
Hugging Face's): the pairs are (x[i], x[i + Dh/2]), not neighbours.

YOUR FILE: fill every `raise NotImplementedError("exercise N.M")`; the checks import it as it is on disk.

Shapes: B batch, H heads, T positions, D model width, Dh = D / H head width, V vocabulary.
The attribute names are the project's (transformer_np/gpt/model.py), so that your weights copy into its GPT.
Check with `python -m course check 10`; exercise 10.3 runs your rung 5 attention (exercise 5.1), so pass it first.
"""

from __future__ import annotations

import numpy as np

import minitensor as mt
import minitensor.nn as nn
from transformer_np.gpt.config import GPTConfig
from transformer_np.gpt.model import MLP, rope_tables

from .rung5 import scaled_dot_product_attention


def causal_mask(t: int) -> np.ndarray:
    """(t, t) bool, True where query i may attend to key j: itself and the positions before it (j <= i)."""
    # exercise 10.1: one NumPy call does it (np.tril). The mask is a constant: no gradient flows through it.
    raise NotImplementedError("exercise 10.1")


def rotate_half(x):
    """cat(-x2, x1) over the last dim's halves x1 = x[..., :Dh/2], x2 = x[..., Dh/2:]: each pair (x1[i], x2[i])
    turned by +90 degrees."""
    # exercise 10.2: slices of the Tensor and mt.cat(..., dim=-1), so that the gradient flows through them
    raise NotImplementedError("exercise 10.2")


def apply_rope(x, cos, sin):
    """x (..., T, Dh) rotated pair by pair: x * cos + rotate_half(x) * sin. cos, sin: (T, Dh) arrays, the angle
    of pair i repeated in both halves (transformer_np.gpt.model.rope_tables)."""
    # exercise 10.2
    raise NotImplementedError("exercise 10.2")


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position i sees positions 0..i, queries and keys rotated by position."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        D, H = config.n_embd, config.n_head
        self.n_head, self.head_dim, self.rope_theta = H, D // H, config.rope_theta
        self.q_proj = nn.Linear(D, D, bias=config.bias)
        self.k_proj = nn.Linear(D, D, bias=config.bias)
        self.v_proj = nn.Linear(D, D, bias=config.bias)
        self.o_proj = nn.Linear(D, D, bias=config.bias)

    def forward(self, x):
        """x (B, T, D) -> (B, T, D)"""
        # exercise 10.3: project and split into heads (B, H, T, Dh); rotate q and k (your 10.2, the tables from
        # rope_tables(Dh, np.arange(T), self.rope_theta)); attend (your 5.1) with your causal mask (your 10.1, as
        # mt.tensor(...)); merge the heads back to (B, T, D); o_proj
        raise NotImplementedError("exercise 10.3")


class Block(nn.Module):
    """The pre-norm residual block: x + attn(norm1 x), then x + mlp(norm2 x)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.norm1 = nn.LayerNorm(config.n_embd, eps=config.norm_eps, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.norm2 = nn.LayerNorm(config.n_embd, eps=config.norm_eps, bias=config.bias)
        self.mlp = MLP(config)  # given: rung 5's feed-forward block with GELU, proj(gelu(fc x))

    def forward(self, x):
        # exercise 10.3: the two residual branches, each reading its norm's output
        raise NotImplementedError("exercise 10.3")


class GPT(nn.Module):
    """logits = lm_head(norm_f(blocks(tok_emb[idx]))): (B, T) token ids -> (B, T, V). No position table: the
    positions enter through the rotation of the queries and keys."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.norm_f = nn.LayerNorm(config.n_embd, eps=config.norm_eps, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # tied, as GPT-2: the head reads with the embedding's matrix

    def forward(self, idx):
        # exercise 10.3: embed the ids (an int array or Tensor), the blocks in order, norm_f, lm_head
        raise NotImplementedError("exercise 10.3")


def next_token_probs(logits: np.ndarray, temperature: float = 1.0, top_k: int | None = None) -> np.ndarray:
    """(B, V) float64 probabilities of the next token from its logits (B, V): softmax(logits / temperature) over the
    top_k largest logits of each row (every logit equal to the k-th largest kept too), 0 elsewhere."""
    # exercise 10.4: in NumPy (sampling is not differentiated). The temperature divides the logits, then the
    # filter (np.sort; -inf where a logit is below the k-th largest), then a softmax that subtracts the row's max
    raise NotImplementedError("exercise 10.4")


def draw(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(B,) int64: one token per row of probs (B, V), drawn with one uniform number per row, u = rng.random((B, 1)):
    the first token whose cumulative probability exceeds u."""
    # exercise 10.4: np.cumsum; one rng.random((B, 1)) for all the rows, scaled by each row's total (round-off
    # leaves it near 1, not at it), so that the same seed draws the same tokens as the project's sampler
    raise NotImplementedError("exercise 10.4")
