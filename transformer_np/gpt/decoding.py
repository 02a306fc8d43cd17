"""The speed device of a GPT's cached generation step: one new position through the whole model, on arrays.

    slot      formula (gpt/model.py)                          device (here)
    gpt_step  GPT.step: embedding, then each block's norms,   step_one_position: for one new position under
              linear layers, heads split, rotated, cached,    no_grad, the same steps on the arrays (a few NumPy
              attended and merged, activation, residuals,     calls a layer), the keys and values written into
              then the final norm and the head: about 35      the preallocated cache (decoding_cache.py), the
              engine ops a block                              weights' arrays kept with the cache

A generation step feeds one token: each of the engine's ops then does a few microseconds of arithmetic and costs
more in bookkeeping (recording nothing under no_grad, yet checking, wrapping and dispatching), so the step spends
most of its time outside NumPy. The device computes the formulas of the ops in the same order: the norms as
ops/layer_norm.py's and ops/rms_norm.py's forward, a linear layer as ops/fused.py's Linear, GELU's tanh form from
the same sigmoid halves as ops/elementwise.py's Gelu, SiLU as x sigmoid(x), the rotation as ops/rotary.py's
forward, the weights as AttentionWeights without a mask (one query sees every key); the same numbers to round-off
(tests/transformer_np/gpt/test_decoding.py). Anything else (several positions, grad mode on, dropout drawing, a
cache that concatenates, tiled attention, a device array, float16, parameters of mixed dtypes) runs the formula.

The parameters' arrays (views: the parameters' own) are read at a cache's first one-position step and kept with
that cache, with what they were read from; each later step checks, in a few microseconds, that every parameter is
still its module's, with the same array and version, and reads them again where one is not (an in-place change, a
new array, a new Parameter assigned): the step always computes with the model as it is, as the formula does.
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
from transformer_np.device import array_of
from transformer_np.gpt.model import GPT, GPTCache

EVIDENCE = "docs/decisions/031-gpt-cached-generation-step.md"
GELU_SCALE = 2 * math.sqrt(2.0 / math.pi)  # tanh(u) = 2 sigmoid(2u) - 1, u = sqrt(2/pi) (a + 0.044715 a^3)
GELU_CUBE = 0.044715

_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # GPTCache -> the _Plan kept with it


class _Plan:
    """The model's parameters as arrays for step_one_position, and what they were read from, so that a step can tell
    whether they are still the model's (current): every (table, name, child module) of the module tree, each
    (table, name, parameter, its version, its array) read, and each (module, setting, value) read (eps, head counts,
    rotary tables). The tables are `module._modules` and `module._parameters`, torch's too: assigning a module or a
    parameter writes there."""

    def __init__(self, model: GPT):
        params = list(model.parameters())
        self.model, self.read, self.settings = model, [], []
        self.children = [(m._modules, name, child) for m in model.modules() for name, child in m._modules.items()]
        self.dtype = model.tok_emb.weight.dtype
        self.usable = all(p.dtype == self.dtype and not p.is_cuda for p in params)
        if not self.usable:  # the formula runs (and says why, where it refuses)
            return
        self.tok = self.array(model.tok_emb, "weight")
        self.pos = self.array(model.pos_emb, "weight") if model.pos_emb is not None else None
        self.blocks = [_Block(self, block) for block in model.blocks]
        self.norm_f = self.norm(model.norm_f)
        self.head = self.array(model.lm_head, "weight").T
        self.dropouts = [m for m in model.modules() if isinstance(m, mt.nn.Dropout)]
        self.attention = [self.setting(block.attn, "attention") for block in model.blocks]

    def setting(self, module, name: str):
        """module.name, a plain attribute, noted as read."""
        value = getattr(module, name)
        self.settings.append((module, name, value))
        return value

    def array(self, module, name: str):
        """The array of module's parameter `name` (None where it has none), noted as read."""
        p = getattr(module, name)
        if p is None:
            return None
        self.read.append((module._parameters, name, p, p._version, array_of(p)))
        return array_of(p)

    def current(self) -> bool:
        """Whether every module is still its parent's, every parameter read still its module's, with the same
        array and no in-place change since, and every setting read the same."""
        return (
            all(table.get(name) is child for table, name, child in self.children)
            and all(
                table.get(name) is p and p._version == version and array_of(p) is arr
                for table, name, p, version, arr in self.read
            )
            and all(getattr(module, name) is value for module, name, value in self.settings)
        )

    def norm(self, norm):
        """("rms" | "layer", eps, weight, bias) of a norm module."""
        if isinstance(norm, mt.nn.RMSNorm):
            return "rms", self.setting(norm, "eps"), self.array(norm, "weight"), None
        return "layer", self.setting(norm, "eps"), self.array(norm, "weight"), self.array(norm, "bias")

    def linear(self, layer):
        """(W^T, bias) of a linear layer: views of its parameters."""
        return self.array(layer, "weight").T, self.array(layer, "bias")


class _Block:
    """One block's parameters as arrays, and the sizes its step needs."""

    def __init__(self, plan: _Plan, block):
        attn, mlp = block.attn, block.mlp
        self.norm1, self.norm2 = plan.norm(block.norm1), plan.norm(block.norm2)
        self.q, self.k, self.v, self.o = (plan.linear(m) for m in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj))
        self.H, self.Hkv, self.Dh = (plan.setting(attn, name) for name in ("n_head", "n_kv_head", "head_dim"))
        self.rotary = None
        if attn.rotary is not None:  # ops/rotary.py's tables: cos and the signed sin, in the model's dtype
            cos, sin = plan.setting(attn.rotary, "cos"), plan.setting(attn.rotary, "sin")
            self.rotary = cos.astype(plan.dtype), signed_sin(sin.astype(plan.dtype))
        self.gelu = plan.setting(mlp, "kind") == "gelu"
        layers = (mlp.fc, mlp.proj) if self.gelu else (mlp.gate, mlp.up, mlp.down)
        self.mlp = [plan.linear(m) for m in layers]


def _plan(model: GPT, cache: GPTCache) -> _Plan:
    """The plan kept with this cache, made anew when the model or any parameter it read has changed."""
    plan = _PLANS.get(cache)
    if plan is None or plan.model is not model or not plan.current():
        plan = _PLANS[cache] = _Plan(model)
    return plan


def _on_arrays(cache: GPTCache, plan: _Plan) -> bool:
    """Whether the step is one the device computes: else the formula runs."""
    return (
        plan.usable
        and plan.dtype in (np.float32, np.float64)
        and not any(d.training and d.p > 0 for d in plan.dropouts)
        and all(isinstance(layer, PreallocatedAttentionCache) for layer in cache.layers)
        and all(kind == "dense" for kind in plan.attention)
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


def _attend(b: _Block, h, layer: PreallocatedAttentionCache, like):
    """The normed input (B, D) -> (B, H Dh): one position's projections, heads split, rotated, appended to the
    cache, attended (every key) and merged."""
    B, H, Hkv, Dh = h.shape[0], b.H, b.Hkv, b.Dh
    q, k, v = _linear(h, b.q), _linear(h, b.k), _linear(h, b.v)
    # one position: (B, H Dh) -> (B, H, 1, Dh) is a reshape (the transpose of one position moves no number)
    q, k, v = q.reshape(B, H, 1, Dh), k.reshape(B, Hkv, 1, Dh), v.reshape(B, Hkv, 1, Dh)
    if b.rotary is not None:  # ops/rotary.py's forward: x cos + swap(x) ssin
        cos, ssin = b.rotary[0][layer.length], b.rotary[1][layer.length]
        q, k = q * cos + swap(q) * ssin, k * cos + swap(k) * ssin
    keys, values = layer.update(like.wrap(k), like.wrap(v))  # (B, Hkv, t_k, Dh): views of the cache's buffers
    keys, values = keys.numpy()[:, :, None], values.numpy()[:, :, None]  # (B, Hkv, 1, t_k, Dh)
    qg = q.reshape(B, Hkv, H // Hkv, 1, Dh)  # the query heads in groups, one per key/value head
    # AttentionWeights.forward without a mask: the scale on q, then softmax over the keys, in place (ops/fused.py's
    # masked_softmax_ spelled out: its row-reduction slots cost more than rows of at most block_size keys)
    w = np.matmul(qg * q.dtype.type(1.0 / math.sqrt(Dh)), np.swapaxes(keys, -1, -2))  # (B, Hkv, G, 1, t_k)
    w -= w.max(axis=-1, keepdims=True)
    np.exp(w, out=w)
    w /= np.add.reduce(w, axis=-1, keepdims=True)
    return np.matmul(w, values).reshape(B, H * Dh)  # (B, Hkv, G, 1, Dh) merged


def _mlp(b: _Block, x):
    """GELU (tanh form: a s, s = sigmoid(2u), the first of ops/elementwise.py's sigmoid halves) or SwiGLU."""
    if b.gelu:
        fc, proj = b.mlp
        a = _linear(x, fc)
        dt = a.dtype.type
        s, _ = sigmoid_pair(dt(GELU_SCALE) * (a + dt(GELU_CUBE) * a * a * a))
        return _linear(a * s, proj)
    gate, up, down = b.mlp
    g = _linear(x, gate)
    return _linear(g * stable_sigmoid(g) * _linear(x, up), down)


def step_one_position(model: GPT, idx, cache=None):
    """GPT.step(model, idx, cache) for one new position: ids (B, 1) -> logits (B, 1, V)."""
    if idx.shape[1] != 1 or not isinstance(cache, GPTCache) or mt.is_grad_enabled() or idx.is_cuda:
        return GPT.step(model, idx, cache)
    plan = _plan(model, cache)
    if not _on_arrays(cache, plan):
        return GPT.step(model, idx, cache)
    x = plan.tok[idx.numpy()[:, 0]]  # (B, D): the embedding's rows
    if plan.pos is not None:
        x = x + plan.pos[cache.length]
    for b, layer in zip(plan.blocks, cache.layers):
        x = x + _linear(_attend(b, _norm(x, b.norm1), layer, idx), b.o)
        x = x + _mlp(b, _norm(x, b.norm2))
    return idx.wrap((_norm(x, plan.norm_f) @ plan.head)[:, None])  # (B, 1, V)


fast.device("gpt_step", step_one_position, evidence=EVIDENCE)
