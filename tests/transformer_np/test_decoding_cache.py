"""transformer_np/decoding_cache.py: cached decoding's speed devices against their plain formulas.

Each device rearranges (a write into a preallocated array instead of a concatenation, one reshape instead of a
reshape and a transpose), so decoding gives the same numbers bitwise with every device on, with each one off, and
with speed off (MT_FAST=0).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import minitensor as mt
from minitensor import fast
from tests.support import ROOT
from transformer_np import decoding_cache
from transformer_np.data import BOS_ID, EOS_ID, PAD_ID
from transformer_np.decode import beam_search, greedy_decode
from transformer_np.model import KVCache, MultiHeadAttention, Transformer

DEVICES = ("kv_cache", "split_heads", "merge_heads")
V = 12


def _model(eos_bias=0.0) -> Transformer:
    model = Transformer(V, V, d_model=16, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=32, max_len=24)
    model.generator.bias.data[EOS_ID] += eos_bias  # rows stop at different steps
    return model


def _src(rng, B=4, S=7):
    src = rng.integers(4, V, size=(B, S))
    src[1, 5:] = PAD_ID
    src[B - 1, 3:] = PAD_ID
    return src


@pytest.fixture
def devices_without(monkeypatch):
    """devices_without(names): speed on with the devices named off (MT_FAST_WITHOUT's rule), put back after."""

    def install(names):
        monkeypatch.setattr(fast, "_WITHOUT", frozenset(names))
        fast.set_enabled(True)

    before = fast.enabled()
    yield install
    monkeypatch.undo()
    fast.set_enabled(before)


def test_the_slots_hold_the_devices_with_speed_on_and_the_formulas_with_it_off():
    entries = fast.registered()
    assert all(entries[name].evidence == "docs/decisions/010-cached-decoding.md" for name in DEVICES)
    with fast.speed(True):
        assert fast.use.kv_cache is decoding_cache.preallocated_cache
        assert MultiHeadAttention.split_heads is decoding_cache.split_heads_one_position
        assert MultiHeadAttention.merge_heads is decoding_cache.merge_heads_one_position
    with fast.speed(False):
        assert fast.use.kv_cache is decoding_cache.concatenating_cache
        assert MultiHeadAttention.split_heads is entries["split_heads"].formula
        assert MultiHeadAttention.merge_heads is entries["merge_heads"].formula
        assert type(fast.use.kv_cache(_model(), 8)) is KVCache


def test_mt_fast_0_decodes_on_the_formulas():
    code = (
        "from minitensor import fast\n"
        "from transformer_np import decoding_cache as d\n"
        "from transformer_np.model import MultiHeadAttention as M\n"
        "print(fast.use.kv_cache is d.concatenating_cache, M.split_heads is fast.registered()['split_heads'].formula,"
        " M.merge_heads is fast.registered()['merge_heads'].formula)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env={"MT_FAST": "0", "PATH": ""}
    )
    assert out.stdout.split() == ["True", "True", "True"], out.stderr


@pytest.mark.parametrize("T", [1, 3])
def test_one_position_heads_are_the_plain_split_and_merge(T):
    """The one-position reshapes against the formulas' reshape + transpose: the same tensor bitwise (and the formula
    itself for more than one position)."""
    attn = _model().decoder.layers[0].self_attn
    B, H, Dh = 3, attn.num_heads, attn.d_head
    x = mt.randn(B, T, H * Dh)
    formula = fast.registered()
    plain = formula["split_heads"].formula(attn, x)
    heads = decoding_cache.split_heads_one_position(attn, x)
    assert heads.shape == plain.shape == (B, H, T, Dh)
    np.testing.assert_array_equal(heads.numpy(), plain.numpy())
    merged = decoding_cache.merge_heads_one_position(attn, heads)
    np.testing.assert_array_equal(merged.numpy(), formula["merge_heads"].formula(attn, plain).numpy())
    np.testing.assert_array_equal(merged.numpy(), x.numpy())


def test_preallocated_cache_equals_concatenation():
    """The self-attention buffers under no_grad (PreallocatedAttentionCache._write) hold what mt.cat builds with grad
    mode on: the same logits bitwise, step by step, growing past the capacity given and after a beam reorder."""
    model = _model()
    model.eval()
    rng = np.random.default_rng(0)
    src = _src(rng)
    tgt = np.concatenate([np.full((4, 1), BOS_ID), rng.integers(3, V, size=(4, 6))], axis=1)
    tgt = np.concatenate([tgt, tgt[[0, 1]]])  # rows 4, 5 fed from step 6 on, after the reorder to 6 rows
    memory = model.encode(src).detach()
    caches = {"buffer": decoding_cache.preallocated_cache(model, 3), "cat": model.init_cache()}
    for t in range(tgt.shape[1]):
        logits = {}
        for how, cache in caches.items():
            with mt.set_grad_enabled(how == "cat"):
                step = tgt[: memory.shape[0], t : t + 1]  # 4 rows, 6 after the last reorder
                logits[how] = model.decode(step, memory, cache=cache).detach().numpy()
            if t == 3:
                cache.reorder(np.array([1, 1, 0, 3]), static=True)  # grad mode on here: the buffers are dropped
            if t == 4:
                with mt.no_grad():
                    cache.reorder(np.array([3, 2, 1, 0]), static=True)  # under no_grad: rows back into the buffers
            if t == 5:
                with mt.no_grad():
                    cache.reorder(np.array([0, 1, 2, 3, 3, 0]), static=True)  # a larger batch: new buffers
        np.testing.assert_array_equal(logits["buffer"], logits["cat"])
        if t == 3:
            memory = mt.from_numpy(memory.numpy()[[1, 1, 0, 3]])
        if t == 4:
            memory = mt.from_numpy(memory.numpy()[[3, 2, 1, 0]])
        if t == 5:
            memory = mt.from_numpy(memory.numpy()[[0, 1, 2, 3, 3, 0]])
    layer = caches["buffer"].layers[0]["self_attn"]
    assert layer.k_buffer is not None and layer.k_buffer.shape[2] >= tgt.shape[1]
    assert isinstance(caches["cat"].layers[0]["self_attn"], decoding_cache.AttentionCache)
    assert not hasattr(caches["cat"].layers[0]["self_attn"], "k_buffer")


def _cached_logits(model, src, tgt):
    """Each step's logits of a cached decode under no_grad, with a beam reorder midway, the cache from the slot."""
    with mt.no_grad():
        memory = model.encode(src)
        cache = fast.use.kv_cache(model, tgt.shape[1])
        out = []
        for t in range(tgt.shape[1]):
            out.append(model.decode(tgt[:, t : t + 1], memory, cache=cache).numpy().copy())
            if t == 2:
                cache.reorder(np.array([3, 2, 1, 0]))
                tgt = tgt[[3, 2, 1, 0]]
    return out


@pytest.mark.parametrize("off", [DEVICES, ("kv_cache",), ("split_heads", "merge_heads"), ("merge_heads",)])
def test_decoding_is_bitwise_the_same_with_each_device_off(rng, devices_without, off):
    model = _model(eos_bias=2.0)
    model.eval()
    src = _src(rng)
    tgt = np.concatenate([np.full((4, 1), BOS_ID), rng.integers(3, V, size=(4, 7))], axis=1)
    devices_without(())
    on = _cached_logits(model, src, tgt), greedy_decode(model, src, max_len=12), beam_search(model, src, 3, 10)
    devices_without(off)
    assert (MultiHeadAttention.split_heads is decoding_cache.split_heads_one_position) == ("split_heads" not in off)
    without = _cached_logits(model, src, tgt), greedy_decode(model, src, max_len=12), beam_search(model, src, 3, 10)
    for a, b in zip(on[0], without[0], strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(on[1], without[1])
    for hyps_on, hyps_off in zip(on[2], without[2], strict=True):
        assert [s for _, s in hyps_on] == [s for _, s in hyps_off]
        for (a, _), (b, _) in zip(hyps_on, hyps_off, strict=True):
            np.testing.assert_array_equal(a, b)
