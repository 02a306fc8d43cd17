"""The speed device of a GPT's cached generation step: one new position's attention on arrays.

    slot        formula (gpt/model.py)                          device (here)
    gpt_attend  CausalSelfAttention.attend: the heads split,    attend_one_position: for one new position under
                rotated, appended to the cache, attended and    no_grad, the same steps on the arrays (a few NumPy
                merged, each an op of the engine (about 15 a    calls), the keys and values written into the
                block, most of them reshapes)                   preallocated cache (decoding_cache.py)

A generation step feeds one token: each of the engine's ops then does a few microseconds of arithmetic and costs
more in bookkeeping (recording nothing under no_grad, yet checking, wrapping and dispatching), so a block's
attention spends most of its time outside NumPy. The device computes the same formulas in the same order: the
rotation as ops/rotary.py's forward, the weights as ops/fused.py's AttentionWeights without a mask (one query sees
every key), the product with the values as the matmul op; the same numbers to round-off
(tests/transformer_np/test_gpt.py). Anything else (several positions, grad mode on, dropout drawing, a cache that
concatenates, tiled attention, a device array, float16) runs the formula. Measured:
docs/decisions/031-gpt-cached-generation-step.md.
"""

from __future__ import annotations

import math

import numpy as np

import minitensor as mt
from minitensor import fast
from minitensor.ops.rotary import signed_sin, swap
from transformer_np.decoding_cache import PreallocatedAttentionCache
from transformer_np.gpt.model import CausalSelfAttention

EVIDENCE = "docs/decisions/031-gpt-cached-generation-step.md"


def _on_arrays(attn: CausalSelfAttention, q, cache) -> bool:
    """Whether the step is one the device computes: else the formula runs."""
    drops = attn.attn_dropout.training and attn.attn_dropout.p > 0
    return (
        q.shape[1] == 1
        and isinstance(cache, PreallocatedAttentionCache)
        and not mt.is_grad_enabled()
        and not drops
        and attn.attention == "dense"
        and q.dtype in (np.float32, np.float64)
        and not q.is_cuda
    )


def attend_one_position(attn: CausalSelfAttention, q, k, v, cache=None):
    """CausalSelfAttention.attend(attn, q, k, v, cache) for one new position: q (B, 1, H Dh), k, v (B, 1, Hkv Dh)
    -> (B, 1, H Dh)."""
    if not _on_arrays(attn, q, cache):
        return CausalSelfAttention.attend(attn, q, k, v, cache)
    B, H, Hkv, Dh = q.shape[0], attn.n_head, attn.n_kv_head, attn.head_dim
    dtype = q.dtype
    # one position: (B, 1, H Dh) -> (B, H, 1, Dh) is a reshape (the transpose of one position moves no number)
    qa, ka, va = q.numpy().reshape(B, H, 1, Dh), k.numpy().reshape(B, Hkv, 1, Dh), v.numpy().reshape(B, Hkv, 1, Dh)
    if attn.rotary is not None:  # ops/rotary.py's forward: x cos + swap(x) ssin
        cos, sin = attn.rotary.rows(cache.length, 1)
        cos, ssin = cos.astype(dtype), signed_sin(sin.astype(dtype))
        qa, ka = qa * cos + swap(qa) * ssin, ka * cos + swap(ka) * ssin
    keys, values = cache.update(q.wrap(ka), q.wrap(va))  # (B, Hkv, t_k, Dh): views of the cache's buffers
    keys, values = keys.numpy()[:, :, None], values.numpy()[:, :, None]  # (B, Hkv, 1, t_k, Dh)
    qg = qa.reshape(B, Hkv, H // Hkv, 1, Dh)  # the query heads in groups, one per key/value head
    # AttentionWeights.forward without a mask: the scale on q, then softmax over the keys, in place
    w = np.matmul(qg * dtype.type(1.0 / math.sqrt(Dh)), np.swapaxes(keys, -1, -2))  # (B, Hkv, G, 1, t_k)
    fast.use.attention_softmax(w, None)
    y = np.matmul(w, values)  # (B, Hkv, G, 1, Dh)
    return q.wrap(y.reshape(B, 1, H * Dh))


fast.device("gpt_attend", attend_one_position, evidence=EVIDENCE)
