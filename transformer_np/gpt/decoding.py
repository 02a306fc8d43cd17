"""The speed devices of a GPT's cached generation step: one new position's block, and its attention, on arrays.

    slot        formula (gpt/model.py)                          device (here)
    gpt_attend  CausalSelfAttention.attend: the heads split,    attend_one_position: for one new position under
                rotated, appended to the cache, attended and    no_grad, the same steps on the arrays (a few NumPy
                merged, each an op of the engine (about 15 a    calls), the keys and values written into the
                block, most of them reshapes)                   preallocated cache (decoding_cache.py)
    gpt_block   Block.step: norm, attention, residual, norm,    block_one_position: the whole block the same way,
                feed-forward, residual (about 14 ops and        its norms, linear layers and activation on arrays
                modules around the attention)

A generation step feeds one token: each of the engine's ops then does a few microseconds of arithmetic and costs
more in bookkeeping (recording nothing under no_grad, yet checking, wrapping and dispatching), so a block spends
most of its time outside NumPy. The devices compute the formulas of the ops in the same order: the norms as
ops/layer_norm.py's and ops/rms_norm.py's forward, a linear layer as ops/fused.py's Linear, GELU's tanh form from
the same sigmoid halves as ops/elementwise.py's Gelu, SiLU as x sigmoid(x), the rotation as ops/rotary.py's
forward, the weights as AttentionWeights without a mask (one query sees every key); the same numbers to round-off
(tests/transformer_np/gpt/test_decoding.py). Anything else (several positions, grad mode on, dropout drawing, a
cache that concatenates, tiled attention, a device array, float16) runs the formula. Measured:
docs/decisions/031-gpt-cached-generation-step.md.
"""

from __future__ import annotations

import math

import numpy as np

import minitensor as mt
from minitensor import fast
from minitensor.ops.elementwise import sigmoid_pair, stable_sigmoid
from minitensor.ops.rotary import signed_sin, swap
from transformer_np.decoding_cache import PreallocatedAttentionCache
from transformer_np.gpt.model import Block, CausalSelfAttention

EVIDENCE = "docs/decisions/031-gpt-cached-generation-step.md"
GELU_SCALE = 2 * math.sqrt(2.0 / math.pi)  # tanh(u) = 2 sigmoid(2u) - 1, u = sqrt(2/pi) (a + 0.044715 a^3)
GELU_CUBE = 0.044715


def _on_arrays(attn: CausalSelfAttention, x, cache) -> bool:
    """Whether the step is one the devices compute: else the formula runs."""
    drops = attn.attn_dropout.training and attn.attn_dropout.p > 0
    return (
        x.shape[1] == 1
        and isinstance(cache, PreallocatedAttentionCache)
        and not mt.is_grad_enabled()
        and not drops
        and attn.attention == "dense"
        and x.dtype in (np.float32, np.float64)
        and not x.is_cuda
    )


def _array(p):
    return p.detach().numpy()


def _attend(attn: CausalSelfAttention, q, k, v, cache, like):
    """q (B, 1, H Dh), k, v (B, 1, Hkv Dh) arrays -> (B, 1, H Dh): one position's attention (attend_one_position)."""
    B, H, Hkv, Dh = q.shape[0], attn.n_head, attn.n_kv_head, attn.head_dim
    dtype = q.dtype
    # one position: (B, 1, H Dh) -> (B, H, 1, Dh) is a reshape (the transpose of one position moves no number)
    q, k, v = q.reshape(B, H, 1, Dh), k.reshape(B, Hkv, 1, Dh), v.reshape(B, Hkv, 1, Dh)
    if attn.rotary is not None:  # ops/rotary.py's forward: x cos + swap(x) ssin
        cos, sin = attn.rotary.rows(cache.length, 1)
        cos, ssin = cos.astype(dtype), signed_sin(sin.astype(dtype))
        q, k = q * cos + swap(q) * ssin, k * cos + swap(k) * ssin
    keys, values = cache.update(like.wrap(k), like.wrap(v))  # (B, Hkv, t_k, Dh): views of the cache's buffers
    keys, values = keys.numpy()[:, :, None], values.numpy()[:, :, None]  # (B, Hkv, 1, t_k, Dh)
    qg = q.reshape(B, Hkv, H // Hkv, 1, Dh)  # the query heads in groups, one per key/value head
    # AttentionWeights.forward without a mask: the scale on q, then softmax over the keys, in place
    w = np.matmul(qg * dtype.type(1.0 / math.sqrt(Dh)), np.swapaxes(keys, -1, -2))  # (B, Hkv, G, 1, t_k)
    fast.use.attention_softmax(w, None)
    return np.matmul(w, values).reshape(B, 1, H * Dh)  # (B, Hkv, G, 1, Dh) merged


def attend_one_position(attn: CausalSelfAttention, q, k, v, cache=None):
    """CausalSelfAttention.attend(attn, q, k, v, cache) for one new position: q (B, 1, H Dh), k, v (B, 1, Hkv Dh)
    -> (B, 1, H Dh)."""
    if not _on_arrays(attn, q, cache):
        return CausalSelfAttention.attend(attn, q, k, v, cache)
    return q.wrap(_attend(attn, q.numpy(), k.numpy(), v.numpy(), cache, q))


def _linear(layer, x):
    """ops/fused.py's Linear: x @ W^T, then the bias added in place."""
    out = x @ _array(layer.weight).T
    if layer.bias is not None:
        out += _array(layer.bias)
    return out


def _norm(norm, x):
    """LayerNorm (ops/layer_norm.py: the biased variance, rstd NaN where it overflowed) or RMSNorm (ops/rms_norm.py)
    over the last dim, then the weight (and bias)."""
    if isinstance(norm, mt.nn.RMSNorm):
        eps = np.finfo(x.dtype).eps if norm.eps is None else norm.eps
        out = x * (1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))
        return out if norm.weight is None else out * _array(norm.weight)
    xc = x - np.mean(x, axis=-1, keepdims=True)
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    out = xc * np.where(var == np.inf, np.nan, 1.0 / np.sqrt(var + var.dtype.type(norm.eps)))
    if norm.weight is not None:
        out *= _array(norm.weight)
    if norm.bias is not None:
        out += _array(norm.bias)
    return out


def _mlp(mlp, x):
    """GELU (tanh form: a s, s = sigmoid(2u), the first of ops/elementwise.py's sigmoid halves) or SwiGLU."""
    if mlp.kind == "gelu":
        a = _linear(mlp.fc, x)
        dt = a.dtype.type
        s, _ = sigmoid_pair(dt(GELU_SCALE) * (a + dt(GELU_CUBE) * a * a * a))
        return _linear(mlp.proj, a * s)
    gate = _linear(mlp.gate, x)
    return _linear(mlp.down, gate * stable_sigmoid(gate) * _linear(mlp.up, x))


def _quiet(block: Block) -> bool:
    """No dropout of the block draws (eval mode, or p = 0)."""
    drops = (block.attn.attn_dropout, block.attn.resid_dropout, block.mlp.dropout)
    return not any(d.training and d.p > 0 for d in drops)


def block_one_position(block: Block, x, cache=None):
    """Block.step(block, x, cache) for one new position: x (B, 1, D) -> (B, 1, D)."""
    attn = block.attn
    if not (_on_arrays(attn, x, cache) and _quiet(block)):
        return Block.step(block, x, cache)
    a = x.numpy()
    h = _norm(block.norm1, a)
    y = _attend(attn, _linear(attn.q_proj, h), _linear(attn.k_proj, h), _linear(attn.v_proj, h), cache, x)
    a = a + _linear(attn.o_proj, y)
    return x.wrap(a + _mlp(block.mlp, _norm(block.norm2, a)))


fast.device("gpt_attend", attend_one_position, evidence=EVIDENCE)
fast.device("gpt_block", block_one_position, evidence=EVIDENCE)
