"""The speed device of a GPT's cached generation step: one new position through the whole model, on arrays.

    slot      formula (gpt/model.py)                          device (here)
    gpt_step  GPT.step: embedding, then each block's norms,   step_one_position: for one new position under
              linear layers, heads split, rotated, cached,    no_grad, the same steps on the arrays (a few NumPy
              attended and merged, activation, residuals,     calls a layer), the keys and values written into
              then the final norm and the head: about 35      the preallocated cache (decoding_cache.py), the
              engine ops a block                              weights read once per cache

A generation step feeds one token: each of the engine's ops then does a few microseconds of arithmetic and costs
more in bookkeeping (recording nothing under no_grad, yet checking, wrapping and dispatching), so the step spends
most of its time outside NumPy. The device computes the formulas of the ops in the same order: the norms as
ops/layer_norm.py's and ops/rms_norm.py's forward, a linear layer as ops/fused.py's Linear (the query, key and
value projections as one product of their weights side by side, as SwiGLU's gate and up), GELU's tanh form from
the same sigmoid halves as ops/elementwise.py's Gelu, SiLU as x sigmoid(x), the rotation as ops/rotary.py's
forward, the weights as AttentionWeights without a mask (one query sees every key); the same numbers to round-off
(tests/transformer_np/gpt/test_decoding.py). Anything else (several positions, grad mode on, dropout drawing, a
cache that concatenates, tiled attention, a device array, float16, parameters of mixed dtypes) runs the formula.

The parameters are read as arrays at a cache's first one-position step and kept with that cache (a generation
makes a new one, and so does each slide of its window): an in-place change of a parameter shows (the arrays are
its own), a parameter given a new array while a cache is being filled does not; start a new cache after that.
Measured: docs/decisions/031-gpt-cached-generation-step.md.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

import minitensor as mt
from minitensor import fast
from minitensor.ops.elementwise import sigmoid_pair, stable_sigmoid
from minitensor.ops.rotary import signed_sin, swap
from transformer_np.decoding_cache import PreallocatedAttentionCache
from transformer_np.gpt.model import GPT, GPTCache

EVIDENCE = "docs/decisions/031-gpt-cached-generation-step.md"
GELU_SCALE = 2 * math.sqrt(2.0 / math.pi)  # tanh(u) = 2 sigmoid(2u) - 1, u = sqrt(2/pi) (a + 0.044715 a^3)
GELU_CUBE = 0.044715

_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # GPTCache -> (model, its arrays)


def _array(p):
    return None if p is None else p.detach().numpy()


def _norm_arrays(norm):
    """("rms" | "layer", eps, weight, bias) of a norm module."""
    if isinstance(norm, mt.nn.RMSNorm):
        return "rms", norm.eps, _array(norm.weight), None
    return "layer", norm.eps, _array(norm.weight), _array(norm.bias)


def _side_by_side(layers):
    """The linear layers' weights transposed and side by side (D, sum of outputs), their biases likewise (or None):
    one product for layers that read the same input."""
    weight = np.concatenate([_array(layer.weight).T for layer in layers], axis=1)
    biases = [_array(layer.bias) for layer in layers]
    return weight, None if biases[0] is None else np.concatenate(biases)


class _Block:
    """One block's parameters as arrays, and the sizes its step needs."""

    def __init__(self, block, dtype):
        attn, mlp = block.attn, block.mlp
        self.norm1, self.norm2 = _norm_arrays(block.norm1), _norm_arrays(block.norm2)
        self.qkv = _side_by_side([attn.q_proj, attn.k_proj, attn.v_proj])
        self.o = _array(attn.o_proj.weight).T, _array(attn.o_proj.bias)
        self.H, self.Hkv, self.Dh = attn.n_head, attn.n_kv_head, attn.head_dim
        self.rotary = None
        if attn.rotary is not None:  # ops/rotary.py's tables: cos and the signed sin, in the model's dtype
            self.rotary = attn.rotary.cos.astype(dtype), signed_sin(attn.rotary.sin.astype(dtype))
        self.gelu = mlp.kind == "gelu"
        if self.gelu:
            self.ff_in, self.ff_out = _side_by_side([mlp.fc]), (_array(mlp.proj.weight).T, _array(mlp.proj.bias))
        else:  # SwiGLU: gate and up side by side
            self.ff_in, self.ff_out = _side_by_side([mlp.gate, mlp.up]), (_array(mlp.down.weight).T, None)


class _Plan:
    """The model's parameters as arrays, read once for a cache (step_one_position)."""

    def __init__(self, model: GPT):
        params = list(model.parameters())
        self.dtype = model.tok_emb.weight.dtype
        self.usable = all(p.dtype == self.dtype and not p.is_cuda for p in params)
        if not self.usable:  # the formula runs (and says why, where it refuses)
            return
        self.tok = _array(model.tok_emb.weight)
        self.pos = _array(model.pos_emb.weight) if model.pos_emb is not None else None
        self.blocks = [_Block(block, self.dtype) for block in model.blocks]
        self.norm_f = _norm_arrays(model.norm_f)
        self.head = _array(model.lm_head.weight).T
        self.dropouts = [m for m in model.modules() if isinstance(m, mt.nn.Dropout)]


def _plan(model: GPT, cache: GPTCache) -> _Plan:
    held = _PLANS.get(cache)
    if held is None or held[0] is not model:
        held = _PLANS[cache] = (model, _Plan(model))
    return held[1]


def _on_arrays(model: GPT, idx, cache, plan: _Plan) -> bool:
    """Whether the step is one the device computes: else the formula runs."""
    return (
        plan.usable
        and plan.dtype in (np.float32, np.float64)
        and not any(d.training and d.p > 0 for d in plan.dropouts)
        and all(isinstance(layer, PreallocatedAttentionCache) for layer in cache.layers)
        and all(block.attn.attention == "dense" for block in model.blocks)
    )


def _linear(x, weight_bias):
    """ops/fused.py's Linear on a transposed weight: x @ W^T, then the bias added in place."""
    weight, bias = weight_bias
    out = x @ weight
    if bias is not None:
        out += bias
    return out


def _norm(x, norm):
    """LayerNorm (ops/layer_norm.py: the biased variance, rstd NaN where it overflowed) or RMSNorm (ops/rms_norm.py)
    over the last dim (a mean is the sum over the width, then divided: np.mean's own steps), then weight and bias."""
    kind, eps, weight, bias = norm
    n = x.shape[-1]
    if kind == "rms":
        eps = np.finfo(x.dtype).eps if eps is None else eps
        out = x * (1.0 / np.sqrt(np.add.reduce(x * x, axis=-1, keepdims=True) / n + eps))
        return out if weight is None else out * weight
    xc = x - np.add.reduce(x, axis=-1, keepdims=True) / n
    var = np.add.reduce(xc * xc, axis=-1, keepdims=True) / n
    out = xc * np.where(var == np.inf, np.nan, 1.0 / np.sqrt(var + var.dtype.type(eps)))
    if weight is not None:
        out *= weight
    if bias is not None:
        out += bias
    return out


def _attend(b: _Block, qkv, layer: PreallocatedAttentionCache, like):
    """The projections side by side (B, (H + 2 Hkv) Dh) -> (B, H Dh): one position's heads split, rotated, appended
    to the cache, attended (every key) and merged."""
    B, H, Hkv, Dh = qkv.shape[0], b.H, b.Hkv, b.Dh
    q, k, v = np.split(qkv, [H * Dh, (H + Hkv) * Dh], axis=1)
    # one position: (B, H Dh) -> (B, H, 1, Dh) is a reshape (the transpose of one position moves no number)
    q, k, v = q.reshape(B, H, 1, Dh), k.reshape(B, Hkv, 1, Dh), v.reshape(B, Hkv, 1, Dh)
    if b.rotary is not None:  # ops/rotary.py's forward: x cos + swap(x) ssin
        cos, ssin = b.rotary[0][layer.length], b.rotary[1][layer.length]
        q, k = q * cos + swap(q) * ssin, k * cos + swap(k) * ssin
    keys, values = layer.update(like.wrap(k), like.wrap(v))  # (B, Hkv, t_k, Dh): views of the cache's buffers
    keys, values = keys.numpy()[:, :, None], values.numpy()[:, :, None]  # (B, Hkv, 1, t_k, Dh)
    qg = q.reshape(B, Hkv, H // Hkv, 1, Dh)  # the query heads in groups, one per key/value head
    # AttentionWeights.forward without a mask: the scale on q, then softmax over the keys, in place
    w = np.matmul(qg * q.dtype.type(1.0 / math.sqrt(Dh)), np.swapaxes(keys, -1, -2))  # (B, Hkv, G, 1, t_k)
    w -= w.max(axis=-1, keepdims=True)
    np.exp(w, out=w)
    w /= np.add.reduce(w, axis=-1, keepdims=True)
    return np.matmul(w, values).reshape(B, H * Dh)  # (B, Hkv, G, 1, Dh) merged


def _mlp(b: _Block, x):
    """GELU (tanh form: a s, s = sigmoid(2u), the first of ops/elementwise.py's sigmoid halves) or SwiGLU."""
    a = _linear(x, b.ff_in)
    if b.gelu:
        dt = a.dtype.type
        s, _ = sigmoid_pair(dt(GELU_SCALE) * (a + dt(GELU_CUBE) * a * a * a))
        return _linear(a * s, b.ff_out)
    gate, up = np.split(a, 2, axis=1)
    return _linear(gate * stable_sigmoid(gate) * up, b.ff_out)


def step_one_position(model: GPT, idx, cache=None):
    """GPT.step(model, idx, cache) for one new position: ids (B, 1) -> logits (B, 1, V)."""
    if idx.shape[1] != 1 or not isinstance(cache, GPTCache) or mt.is_grad_enabled() or idx.is_cuda:
        return GPT.step(model, idx, cache)
    plan = _plan(model, cache)
    if not _on_arrays(model, idx, cache, plan):
        return GPT.step(model, idx, cache)
    x = plan.tok[idx.numpy()[:, 0]]  # (B, D): the embedding's rows
    if plan.pos is not None:
        x = x + plan.pos[cache.length]
    for b, layer in zip(plan.blocks, cache.layers):
        h = _norm(x, b.norm1)
        x = x + _linear(_attend(b, _linear(h, b.qkv), layer, idx), b.o)
        x = x + _mlp(b, _norm(x, b.norm2))
    return idx.wrap((_norm(x, plan.norm_f) @ plan.head)[:, None])  # (B, 1, V)


fast.device("gpt_step", step_one_position, evidence=EVIDENCE)
