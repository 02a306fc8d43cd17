"""Cached decoding's speed devices: the keys and values in preallocated arrays, a one-position step's heads in one
reshape. Each is registered against its plain formula (minitensor.fast), which runs instead with speed off
(`MT_FAST=0`); measured in docs/decisions/010-cached-decoding.md.

    slot          formula (transformer_np/model.py)                device (here)
    kv_cache      model.init_cache(): AttentionCache concatenates  PreallocatedKVCache: each step written into
                  the whole prefix with each step's keys/values     arrays sized for the decode, no concatenation
    split_heads   MultiHeadAttention.split_heads: reshape, then    one reshape when T = 1 (the transpose of one
                  transpose to (B, H, T, Dh)                        position moves no number)
    merge_heads   MultiHeadAttention.merge_heads: transpose, then  one reshape when T = 1
                  reshape to (B, T, D)

decode.py takes its cache from the slot (`fast.use.kv_cache(model, max_len)`); the two reshapes are
MultiHeadAttention's own methods, put in place on the class. Both ways give the same numbers bitwise: the devices
rearrange, they do not compute (tests/transformer_np/test_decoding_cache.py).
"""

from __future__ import annotations

import numpy as np

import minitensor as mt
from minitensor import fast
from transformer_np.device import array_of, on_device
from transformer_np.model import AttentionCache, KVCache, MultiHeadAttention

EVIDENCE = "docs/decisions/010-cached-decoding.md"


# ----------------------------------------------------------------------------------------------
# The keys and values in preallocated arrays
# ----------------------------------------------------------------------------------------------
def concatenating_cache(model, capacity: int) -> KVCache:
    """The formula: the model's own KVCache, whose self-attention concatenates each step's keys and values to the
    prefix (capacity, the positions the decode will feed at most, is a size it does not need)."""
    return model.init_cache()


class PreallocatedAttentionCache(AttentionCache):
    """A self-attention AttentionCache whose keys and values, under no_grad, live in arrays preallocated to
    `capacity` positions (grown by doubling when a longer prefix comes); `k`, `v` are Tensors around views of their
    first t positions: the very numbers a concatenation would hold. One write per step replaces a concatenation
    that copies the whole prefix each step (O(t) per step, O(L^2) per sentence). The buffers are plain arrays,
    written outside the graph as an optimizer writes weights: nothing records under no_grad, and with grad mode on
    the append is the formula's differentiable `mt.cat` (the buffers then dropped). So the k, v of an earlier step
    are views too, which a later reorder rewrites: read them in their own step.
    """

    def __init__(self, capacity: int = 0):
        super().__init__(static=False)
        self.capacity = capacity  # positions to preallocate (0: just what the first update needs)
        self.length = 0  # positions held
        self.k_buffer = None  # (B, H, size, Dh) array under no_grad; when set, k wraps k_buffer[:, :, :length]
        self.v_buffer = None

    def update(self, k, v):
        """Append k, v (B, H, t_new, Dh); return all keys/values so far."""
        if mt.is_grad_enabled() or (self.k is None and self.capacity <= k.shape[2]):
            k, v = super().update(k, v)  # the formula: mt.cat (or the first keys themselves)
            self.k_buffer = self.v_buffer = None  # k, v are no views of them now
        else:
            k, v = self._write(k, v)  # under no_grad, into the buffers (the first positions too)
            self.k, self.v = k, v
        self.length = k.shape[2]
        return k, v

    def _write(self, k, v):
        """Append k, v (B, H, t_new, Dh) in the preallocated buffers: the keys/values so far, around views."""
        start, stop = self.length, self.length + k.shape[2]
        if self.k_buffer is None or self.k_buffer.shape[0] != k.shape[0] or stop > self.k_buffer.shape[2]:
            size = max(stop, self.capacity, 2 * start)
            shape = (k.shape[0], k.shape[1], size, k.shape[3])
            # zeros_like: the array's own module (a device array stays one), shape (B, H, size, Dh)
            k_buffer, v_buffer = np.zeros_like(array_of(k), shape=shape), np.zeros_like(array_of(v), shape=shape)
            if start:
                k_buffer[:, :, :start] = array_of(self.k)
                v_buffer[:, :, :start] = array_of(self.v)
            self.k_buffer, self.v_buffer = k_buffer, v_buffer
        self.k_buffer[:, :, start:stop] = array_of(k)
        self.v_buffer[:, :, start:stop] = array_of(v)
        return k.wrap(self.k_buffer[:, :, :stop]), v.wrap(self.v_buffer[:, :, :stop])  # (B, H, t + t_new, Dh)

    def index_select(self, index: np.ndarray) -> None:
        """Keep rows `index` of the batch dimension (beam search reorders hypotheses this way)."""
        if self.k is None:
            return
        if self.k_buffer is not None and not mt.is_grad_enabled() and len(index) <= self.k_buffer.shape[0]:
            # the selected rows (gathered first: a copy) into the buffers' first len(index) rows
            n, t, rows = (
                len(index),
                self.length,
                array_of(on_device(index, self.k_buffer, "AttentionCache.index_select")),
            )
            self.k_buffer[:n, :, :t] = self.k_buffer[rows, :, :t]
            self.v_buffer[:n, :, :t] = self.v_buffer[rows, :, :t]
            self.k_buffer, self.v_buffer = self.k_buffer[:n], self.v_buffer[:n]
            self.k, self.v = self.k.wrap(self.k_buffer[:, :, :t]), self.v.wrap(self.v_buffer[:, :, :t])
            return
        super().index_select(index)  # the formula
        self.k_buffer = self.v_buffer = None  # k, v are no views of them now


def concatenating_attention_cache(capacity: int) -> AttentionCache:
    """The formula of one self-attention's cache: it concatenates (capacity is a size it does not need)."""
    return AttentionCache(static=False)


fast.formula("self_attention_cache", concatenating_attention_cache)
fast.device("self_attention_cache", PreallocatedAttentionCache, evidence="docs/decisions/010-cached-decoding.md")


class PreallocatedKVCache(KVCache):
    """The model's KVCache with each layer's self-attention in PreallocatedAttentionCache (the cross-attention
    keys/values are set once: nothing to append)."""

    def __init__(self, num_layers: int, capacity: int = 0):
        super().__init__(num_layers)
        for layer in self.layers:
            layer["self_attn"] = PreallocatedAttentionCache(capacity)


def preallocated_cache(model, capacity: int) -> PreallocatedKVCache:
    """The device: a KVCache whose self-attention keys/values are written into arrays of `capacity` positions."""
    return PreallocatedKVCache(len(model.decoder.layers), capacity)


# ----------------------------------------------------------------------------------------------
# A one-position step's heads in one reshape
# ----------------------------------------------------------------------------------------------
_split_heads = MultiHeadAttention.__dict__["split_heads"]  # the formulas, as model.py defines them
_merge_heads = MultiHeadAttention.__dict__["merge_heads"]


def split_heads_one_position(self, x):
    """MultiHeadAttention.split_heads, with one position (a cached decoding step) as one reshape: the transpose of
    a (B, 1, H, Dh) tensor moves no number, so one op gives the same tensor instead of two."""
    B, T, _ = x.shape
    if T != 1:
        return _split_heads(self, x)
    return x.reshape(B, self.num_heads, 1, self.d_head)  # (B, H, 1, Dh)


def merge_heads_one_position(self, x):
    """MultiHeadAttention.merge_heads, with one position as one reshape (as split_heads_one_position)."""
    B, _, T, _ = x.shape
    if T != 1:
        return _merge_heads(self, x)
    return x.reshape(B, 1, self.d_model)  # (B, 1, D)


fast.formula("kv_cache", concatenating_cache)
fast.device("kv_cache", preallocated_cache, evidence=EVIDENCE)
fast.formula("split_heads", _split_heads, owner=MultiHeadAttention, attr="split_heads")
fast.device("split_heads", split_heads_one_position, evidence=EVIDENCE)
fast.formula("merge_heads", _merge_heads, owner=MultiHeadAttention, attr="merge_heads")
fast.device("merge_heads", merge_heads_one_position, evidence=EVIDENCE)
