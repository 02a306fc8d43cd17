"""transformer_np/gpt/decoding.py: the cached step's attention on arrays (attend_one_position) against its formula
(CausalSelfAttention.attend) in both shapes and dtypes, step by step past a prefix, and the cases it hands to the
formula."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor.testing import OP_RTOL, assert_close
from transformer_np.decoding_cache import PreallocatedAttentionCache
from transformer_np.gpt import gpt2_shape, llama_shape
from transformer_np.gpt.decoding import attend_one_position, block_one_position
from transformer_np.gpt.model import Block, CausalSelfAttention

SIZES = dict(n_layer=1, n_head=4, n_embd=32, block_size=16)


def _projections(attn, x):
    return attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)


@pytest.mark.parametrize("shape", [gpt2_shape, llama_shape])  # llama: rotary positions, 2 key/value heads
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_device_equals_the_formula_step_by_step(shape, dtype):
    """A prefix of 5 positions (the formula, both ways), then one position a step: the device's output, and the
    keys and values it leaves in the cache, equal the formula's to the dtype's tolerance."""
    mt.set_default_dtype(dtype)
    try:
        mt.manual_seed(0)
        attn = CausalSelfAttention(shape(11, **SIZES))
    finally:
        mt.set_default_dtype(np.float32)
    attn.eval()
    rng = np.random.default_rng(0)
    ours, plain = PreallocatedAttentionCache(16), PreallocatedAttentionCache(16)
    rtol = OP_RTOL[np.dtype(dtype).name]
    with mt.no_grad():
        for step, length in enumerate([5, 1, 1, 1, 1]):
            x = mt.tensor(rng.standard_normal((2, length, 32)).astype(dtype))
            q, k, v = _projections(attn, x)
            got = attend_one_position(attn, q, k, v, ours)
            want = CausalSelfAttention.attend(attn, q, k, v, plain)
            assert got.dtype == want.dtype == dtype and got.shape == want.shape == (2, length, 32)
            assert_close(got.numpy(), want.numpy(), rtol, f"step {step}")
            assert_close(ours.k.numpy(), plain.k.numpy(), rtol, f"keys after step {step}")
            assert_close(ours.v.numpy(), plain.v.numpy(), rtol, f"values after step {step}")
    assert ours.length == plain.length == 9


def test_what_the_device_does_not_compute_goes_to_the_formula():
    """Grad mode on (a gradient must reach q, k, v), tiled attention, and a cache that concatenates: the formula's
    own result, bit for bit."""
    mt.manual_seed(0)
    config = llama_shape(11, **SIZES)
    rng = np.random.default_rng(1)
    for attn, cache_of, grad in (
        (CausalSelfAttention(config), lambda: PreallocatedAttentionCache(16), True),
        (CausalSelfAttention(config.replace(attention="tiled")), lambda: PreallocatedAttentionCache(16), False),
        (CausalSelfAttention(config), lambda: None, False),
    ):
        x = mt.tensor(rng.standard_normal((1, 1, 32)).astype(np.float32), requires_grad=grad)
        with mt.set_grad_enabled(grad):
            q, k, v = _projections(attn, x)
            got = attend_one_position(attn, q, k, v, cache_of())
            want = CausalSelfAttention.attend(attn, q, k, v, cache_of())
        assert got.requires_grad == grad
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())


@pytest.mark.parametrize("shape", [gpt2_shape, llama_shape])  # LayerNorm, GELU, biases; RMSNorm, SwiGLU, rotary
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_block_device_equals_the_formula_step_by_step(shape, dtype):
    """block_one_position against Block.step: a prefix of 5 positions, then one position a step, each with a cache
    of its own, the outputs equal to the dtype's tolerance (and so the keys and values cached by each)."""
    mt.set_default_dtype(dtype)
    try:
        mt.manual_seed(0)
        block = Block(shape(11, **SIZES))
        with mt.no_grad():  # norms and biases away from their initial ones and zeros
            for p in block.parameters():
                p.add_(mt.tensor(0.1 * np.random.default_rng(p.numel()).standard_normal(p.shape).astype(dtype)))
    finally:
        mt.set_default_dtype(np.float32)
    block.eval()
    rng = np.random.default_rng(0)
    ours, plain = PreallocatedAttentionCache(16), PreallocatedAttentionCache(16)
    with mt.no_grad():
        for step, length in enumerate([5, 1, 1, 1, 1]):
            x = mt.tensor(rng.standard_normal((2, length, 32)).astype(dtype))
            got, want = block_one_position(block, x, ours), Block.step(block, x, plain)
            assert got.dtype == want.dtype == dtype and got.shape == want.shape == (2, length, 32)
            assert_close(got.numpy(), want.numpy(), OP_RTOL[np.dtype(dtype).name], f"step {step}")
    mt.manual_seed(0)
    drawing = Block(shape(11, **SIZES, dropout=0.5))  # train mode, dropout drawing: the formula's own path
    x = mt.tensor(rng.standard_normal((1, 1, 32)).astype(np.float32))
    with mt.no_grad():
        mt.manual_seed(1)
        got = block_one_position(drawing, x, PreallocatedAttentionCache(16))
        mt.manual_seed(1)
        np.testing.assert_array_equal(got.numpy(), Block.step(drawing, x, PreallocatedAttentionCache(16)).numpy())
