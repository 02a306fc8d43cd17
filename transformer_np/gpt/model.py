"""The decoder-only Transformer (GPT-2 and Llama shapes) on minitensor, bottom-up as nanoGPT's model.py.

    RotaryEmbedding      the angle tables of RoPE; the rotation itself is one primitive (F.rotary_embedding)
    CausalSelfAttention  H query heads over n_kv_head key/value heads (grouped-query when fewer), causal, optional
                         key/value cache; dense (fused attention weights) or tiled (FlashAttention-2) attention
    MLP                  GELU (tanh form): proj(gelu(fc x));  SwiGLU: down(silu(gate x) * up x)
    Block                pre-norm residual blocks: x + attn(norm1 x), then x + mlp(norm2 x)
    GPT                  token embedding (+ learned positions), blocks, final norm, output head (tied or not)
    GPTCache             the keys and values of the positions fed so far, per block (incremental decoding)

parity/gpt/model.py is the same file in PyTorch, class for class and attribute for attribute. Parameter names
(GPTConfig's switches decide which exist):

    tok_emb.weight                          (V, D)
    pos_emb.weight                          (block_size, D)        positions='learned'
    blocks.i.norm1.weight / .bias           (D,)                   bias only for norm='layer' with bias=True
    blocks.i.attn.q_proj.weight / .bias     (H Dh, D)              biases only with bias=True, everywhere
    blocks.i.attn.k_proj, v_proj            (Hkv Dh, D)
    blocks.i.attn.o_proj                    (D, H Dh)
    blocks.i.norm2                          (D,)
    blocks.i.mlp.fc, mlp.proj               (d_ff, D), (D, d_ff)   mlp='gelu'
    blocks.i.mlp.gate, mlp.up, mlp.down     (d_ff, D) twice, (D, d_ff)   mlp='swiglu'
    norm_f                                  (D,)
    lm_head.weight                          (V, D)                 the very tok_emb.weight when tie_weights

Token ids are integer arrays or Tensors (B, T); the model returns the logits (B, T, V). On a device
(`model.to("cuda")`), host ids are copied onto it at the model's boundary, and so are the masks and angle tables.
"""

from __future__ import annotations

import math

import numpy as np

import minitensor as mt
import minitensor.nn as nn
import minitensor.nn.functional as F
from minitensor import fast
from minitensor.nn import Dropout
from minitensor.utils.checkpoint import checkpoint, noop_context_fn
from transformer_np import decoding_cache  # noqa: F401 (registers the self-attention cache's speed device)
from transformer_np.device import array_of, device_of, on_device
from transformer_np.gpt.config import GPTConfig
from transformer_np.gpt.hf import CheckpointError, read_checkpoint, write_checkpoint
from transformer_np.model import AttentionCache, check_tokens


def causal_keep(t_q: int, t_k: int) -> np.ndarray:
    """(t_q, t_k) bool, True where query i (position t_k - t_q + i) may see key j: j <= t_k - t_q + i. The queries are
    the last t_q positions of the t_k keys (bottom-right aligned), which is what a cached step needs."""
    return np.arange(t_k)[None, :] <= np.arange(t_k - t_q, t_k)[:, None]


def rope_tables(head_dim: int, positions: np.ndarray, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin), each (T, Dh) float64: angle pos * theta^(-2i / Dh) for pair i, each half's angles repeated
    (Hugging Face's rotate-half layout)."""
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)  # (Dh/2,)
    angles = positions.astype(np.float64)[:, None] * inv_freq[None, :]  # (T, Dh/2)
    angles = np.concatenate([angles, angles], axis=-1)  # (T, Dh)
    return np.cos(angles), np.sin(angles)


class RotaryEmbedding(nn.Module):
    """Rotates queries or keys (B, H, T, Dh) by their positions offset .. offset + T - 1 (RoPE, rotate-half).

    The angle tables of positions 0 .. max_positions - 1 (the model's context) are made once: each call, a cached
    generation step above all, reads its rows (the same numbers: each entry is computed alone). Positions past them
    are computed when asked."""

    def __init__(self, head_dim: int, theta: float = 10000.0, max_positions: int = 0):
        super().__init__()
        self.head_dim, self.theta = head_dim, theta
        self.cos, self.sin = rope_tables(head_dim, np.arange(max_positions), theta)  # (max_positions, Dh) each

    def rows(self, offset: int, length: int) -> tuple[np.ndarray, np.ndarray]:
        """(cos, sin), each (length, Dh) float64, of positions offset .. offset + length - 1."""
        stop = offset + length
        if stop <= len(self.cos):
            return self.cos[offset:stop], self.sin[offset:stop]
        return rope_tables(self.head_dim, np.arange(offset, stop), self.theta)

    def forward(self, x, offset: int = 0):
        cos, sin = self.rows(offset, x.shape[-2])
        return F.rotary_embedding(x, cos.astype(x.dtype), sin.astype(x.dtype))  # (B, H, T, Dh)


class CausalSelfAttention(nn.Module):
    """softmax(q k^T / sqrt(Dh), causal) v for H query heads; query head h reads key/value head h // (H / Hkv).

    Grouped-query attention without copying keys: the queries are viewed as (B, Hkv, H / Hkv, T, Dh) and the keys
    and values as (B, Hkv, 1, T, Dh), and the attention broadcasts over the group (the gradient of a key is summed
    over the heads that read it by the engine's unbroadcast). n_kv_head = n_head is plain multi-head attention."""

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
        self.attn_dropout = Dropout(config.dropout)
        self.resid_dropout = Dropout(config.dropout)
        self.attention = config.attention

    def forward(self, x, cache: AttentionCache | None = None):
        """x (B, T, D) -> (B, T, D). cache: this block's keys and values so far, extended by the T new ones."""
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)  # (B, T, H Dh), (B, T, Hkv Dh) twice
        y = self.attend(q, k, v, cache)  # (B, T, H Dh)
        return self.resid_dropout(self.o_proj(y))  # (B, T, D)

    def attend(self, q, k, v, cache: AttentionCache | None = None):
        """The heads of q (B, T, H Dh) and k, v (B, T, Hkv Dh) split, rotated, appended to the cache, attended
        (causal), merged: (B, T, H Dh)."""
        B, T, _ = q.shape
        H, Hkv, Dh = self.n_head, self.n_kv_head, self.head_dim
        offset = 0 if cache is None or cache.k is None else cache.k.shape[2]
        q = q.reshape(B, T, H, Dh).transpose(1, 2)  # (B, H, T, Dh)
        k = k.reshape(B, T, Hkv, Dh).transpose(1, 2)  # (B, Hkv, T, Dh)
        v = v.reshape(B, T, Hkv, Dh).transpose(1, 2)
        if self.rotary is not None:
            q, k = self.rotary(q, offset), self.rotary(k, offset)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, Hkv, offset + T, Dh)
        t_k = k.shape[2]
        q = q.reshape(B, Hkv, H // Hkv, T, Dh)  # the query heads in groups, one per key/value head
        k, v = k.unsqueeze(2), v.unsqueeze(2)  # (B, Hkv, 1, t_k, Dh): broadcast over the group
        # the mask on the queries' device; none for one new query, which sees every key (a cached step)
        keep = None if T == 1 else array_of(on_device(causal_keep(T, t_k), array_of(q)))
        if self.attention == "tiled":
            p = self.attn_dropout.p if self.attn_dropout.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p)
        else:
            weights = F.attention_weights(q, k, keep, scale=1.0 / math.sqrt(Dh))  # (B, Hkv, G, T, t_k)
            y = self.attn_dropout(weights) @ v  # (B, Hkv, H / Hkv, T, Dh)
        return y.reshape(B, H, T, Dh).transpose(1, 2).reshape(B, T, H * Dh)


class MLP(nn.Module):
    """GELU: proj(gelu_tanh(fc x)) (GPT-2);  SwiGLU: down(silu(gate x) * up x) (Llama); then dropout."""

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
        self.dropout = Dropout(config.dropout)

    def forward(self, x):
        if self.kind == "gelu":
            return self.dropout(self.proj(F.gelu(self.fc(x), approximate="tanh")))  # (B, T, D)
        return self.dropout(self.down(F.silu(self.gate(x)) * self.up(x)))


def make_norm(config: GPTConfig) -> nn.Module:
    """LayerNorm (with a bias when config.bias) or RMSNorm, over the model width."""
    if config.norm == "rms":
        return nn.RMSNorm(config.n_embd, eps=config.norm_eps)
    return nn.LayerNorm(config.n_embd, eps=config.norm_eps, bias=config.bias)


class Block(nn.Module):
    """x + attn(norm1 x), then x + mlp(norm2 x): the pre-norm residual block of GPT-2 and Llama."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.norm1 = make_norm(config)
        self.attn = CausalSelfAttention(config)
        self.norm2 = make_norm(config)
        self.mlp = MLP(config)

    def forward(self, x, cache: AttentionCache | None = None):
        """x (B, T, D) -> (B, T, D)."""
        x = x + self.attn(self.norm1(x), cache)
        return x + self.mlp(self.norm2(x))


class GPTCache:
    """Per block, the keys and values (B, Hkv, t, Dh) of the positions fed so far (transformer_np.model's
    AttentionCache, which concatenates; its speed device preallocates under no_grad: decoding_cache.py), and
    `length`, how many positions that is."""

    def __init__(self, n_layer: int, capacity: int = 0):
        self.layers = [fast.use.self_attention_cache(capacity) for _ in range(n_layer)]

    @property
    def length(self) -> int:
        k = self.layers[0].k
        return 0 if k is None else k.shape[2]


class GPT(nn.Module):
    """logits = lm_head(norm_f(blocks(drop(tok_emb[idx] + pos_emb[positions])))), (B, T) ids -> (B, T, V)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"GPT: expected a GPTConfig, got {type(config).__name__}")
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd)
        self.pos_emb = nn.Embedding(config.block_size, config.n_embd) if config.positions == "learned" else None
        self.drop = Dropout(config.dropout)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.norm_f = make_norm(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_weights:
            self.lm_head.weight = self.tok_emb.weight
        self.activation_checkpointing = config.activation_checkpointing
        self.checkpoint_context_fn = noop_context_fn
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2's initialisation (nanoGPT): N(0, 0.02) for every matrix, zero biases, norms at one, and the
        projections into the residual stream (o_proj, proj, down) at 0.02 / sqrt(2 n_layer)."""
        for name, p in self.named_parameters():
            if p.ndim == 1:
                (nn.init.zeros_ if name.endswith(".bias") else nn.init.ones_)(p)
            elif name.endswith(("o_proj.weight", "mlp.proj.weight", "mlp.down.weight")):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * self.config.n_layer))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    @classmethod
    def from_pretrained(cls, path: str, dtype=None) -> GPT:
        """The model of a Hugging Face save_pretrained folder (GPT2LMHeadModel, GPT2Model or LlamaForCausalLM; see
        hf.py), in the checkpoint's dtype, or cast to `dtype` when given."""
        config, arrays = read_checkpoint(path)
        dtype = np.dtype(dtype) if dtype is not None else next(iter(arrays.values())).dtype
        previous = mt.get_default_dtype()
        mt.set_default_dtype(dtype)
        try:
            model = cls(config)
        finally:
            mt.set_default_dtype(previous)
        params = dict(model.named_parameters())
        wrong = sorted(f"{k}: {a.shape} vs {params[k].shape}" for k, a in arrays.items() if a.shape != params[k].shape)
        if set(arrays) != set(params) or wrong:
            raise CheckpointError(f"{path}: tensors do not fit the config: {sorted(set(params) ^ set(arrays))} {wrong}")
        for k, a in arrays.items():
            with mt.no_grad():
                params[k].copy_(a.astype(dtype, copy=False))  # an explicit cast only where `dtype` was asked
        return model

    def save_pretrained(self, path: str) -> None:
        """config.json and model.safetensors as Hugging Face's save_pretrained writes them (hf.py), so that
        GPT2LMHeadModel or LlamaForCausalLM.from_pretrained(path) loads this model."""
        write_checkpoint(path, self.config, {k: p.detach().numpy() for k, p in self.named_parameters()})

    def init_cache(self, capacity: int = 0) -> GPTCache:
        """An empty cache for incremental decoding; capacity: positions to preallocate (at most block_size)."""
        return GPTCache(self.config.n_layer, capacity)

    def forward(self, idx, cache: GPTCache | None = None):
        """idx (B, T) token ids -> logits (B, T, V). With a cache, idx are the positions after those it holds."""
        offset = cache.length if cache is not None else 0
        idx = check_tokens(idx, self.config.vocab_size, self.config.block_size, "GPT", offset=offset)
        idx = on_device(idx, device_of(self), "GPT")  # checked where they are, then moved to the model's device
        return fast.use.gpt_step(self, idx, cache)  # one cached position's device: gpt/decoding.py

    def step(self, idx, cache: GPTCache | None = None):
        """The model's formula on checked ids (B, T), on its device: logits (B, T, V)."""
        offset = cache.length if cache is not None else 0
        T = idx.shape[1]
        x = self.tok_emb(idx)  # (B, T, D)
        if self.pos_emb is not None:
            x = x + self.pos_emb.weight[offset : offset + T]
        x = self.drop(x)
        for i, block in enumerate(self.blocks):
            layer_cache = cache.layers[i] if cache is not None else None
            if self.activation_checkpointing and mt.is_grad_enabled() and cache is None:
                x = checkpoint(block, x, use_reentrant=False, context_fn=self.checkpoint_context_fn)
            else:
                x = block(x, layer_cache)
        return self.lm_head(self.norm_f(x))  # (B, T, V)


fast.formula("gpt_step", GPT.step)
