"""transformer_np/gpt/decoding.py: the cached step on arrays (step_one_position) against its formula (GPT.step) in
both shapes and dtypes, step by step past a prefix, and the cases it hands to the formula."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor.testing import OP_RTOL, assert_close
from transformer_np.gpt import gpt2_shape, llama_shape
from transformer_np.gpt.decoding import step_one_position
from transformer_np.gpt.model import GPT

SIZES = dict(n_layer=2, n_head=4, n_embd=32, block_size=16)


def _model(shape, dtype, **changes):
    """A model whose norms and biases are away from their initial ones and zeros, in eval mode."""
    mt.set_default_dtype(dtype)
    try:
        mt.manual_seed(0)
        model = GPT(shape(11, **SIZES, **changes))
        with mt.no_grad():
            for p in model.parameters():
                p.add_(mt.tensor(0.1 * np.random.default_rng(p.numel()).standard_normal(p.shape).astype(dtype)))
    finally:
        mt.set_default_dtype(np.float32)
    return model.eval()


def _ids(rng, length, batch=2):
    return mt.tensor(rng.integers(0, 11, (batch, length)))


@pytest.mark.parametrize("shape", [gpt2_shape, llama_shape])  # LayerNorm, GELU, biases; RMSNorm, SwiGLU, rotary, GQA
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_device_equals_the_formula_step_by_step(shape, dtype):
    """A prefix of 5 positions (the formula, both ways), then one position a step, each side with a cache of its own:
    the logits, and the keys and values each leaves in its cache, equal to the dtype's tolerance."""
    model = _model(shape, dtype)
    rng = np.random.default_rng(0)
    ours, plain = model.init_cache(16), model.init_cache(16)
    rtol = OP_RTOL[np.dtype(dtype).name]
    with mt.no_grad():
        for step, length in enumerate([5, 1, 1, 1, 1]):
            idx = _ids(rng, length)
            got, want = step_one_position(model, idx, ours), GPT.step(model, idx, plain)
            assert got.dtype == want.dtype == dtype and got.shape == want.shape == (2, length, 11)
            assert_close(got.numpy(), want.numpy(), rtol, f"step {step}")
            for i, (a, b) in enumerate(zip(ours.layers, plain.layers)):
                assert_close(a.k.numpy(), b.k.numpy(), rtol, f"block {i}'s keys after step {step}")
                assert_close(a.v.numpy(), b.v.numpy(), rtol, f"block {i}'s values after step {step}")
    assert ours.length == plain.length == 9


def test_the_model_takes_the_device_and_sees_every_change_of_a_parameter_between_steps():
    """model(idx, cache) goes through the slot; between two steps on one cache a parameter changed in place or given a
    new array (`.data =`), a layer replaced by a new one, or a norm's eps changed changes the next step's logits as it
    changes the formula's."""
    model = _model(gpt2_shape, np.float64)
    rtol = OP_RTOL["float64"]

    def changes():
        yield lambda: model.norm_f.weight.mul_(2.0)  # in place (a version bump)
        yield lambda: setattr(model.blocks[1].attn.k_proj.weight, "data", model.blocks[1].attn.k_proj.weight * 3.0)
        yield lambda: setattr(model.blocks[0].mlp, "fc", _new_linear(model.blocks[0].mlp.fc))
        yield lambda: setattr(model, "lm_head", _new_linear(model.lm_head))
        yield lambda: setattr(model.blocks[0].norm2, "eps", 0.5)  # a setting

    with mt.no_grad():
        cache, plain = model.init_cache(16), model.init_cache(16)
        ids = mt.tensor(np.array([[1, 2]]))
        model(ids, cache=cache), GPT.step(model, ids, plain)
        for step, change in enumerate(changes()):
            idx = mt.tensor(np.array([[3 + step]]))
            before = model(idx, cache=cache).numpy().copy()
            assert_close(before, GPT.step(model, idx, plain).numpy(), rtol, f"step {step}")
            change()
            idx = mt.tensor(np.array([[5 + step]]))
            got, want = model(idx, cache=cache).numpy(), GPT.step(model, idx, plain).numpy()
            assert_close(got, want, rtol, f"after change {step}")


def _new_linear(layer):
    """A new Linear of the same shape, its weight the old one's plus noise."""
    out_f, in_f = layer.weight.shape
    new = mt.nn.Linear(in_f, out_f, bias=layer.bias is not None, dtype=layer.weight.dtype)
    with mt.no_grad():
        new.weight.copy_(layer.weight + 0.5 * mt.randn(out_f, in_f, dtype=layer.weight.dtype))
        if layer.bias is not None:
            new.bias.copy_(layer.bias)
    return new


def _prefilled(model, ids):
    cache = model.init_cache(16)
    GPT.step(model, mt.tensor(np.array([ids])), cache)
    return cache


def test_what_the_device_does_not_compute_goes_to_the_formula():
    """Grad mode on, tiled attention, a cache that concatenates (no preallocation), dropout drawing, and mixed
    dtypes: the formula's own result, bit for bit."""
    rng = np.random.default_rng(1)
    plain = _model(llama_shape, np.float32)
    tiled = _model(llama_shape, np.float32, attention="tiled")
    drawing = _model(gpt2_shape, np.float32, dropout=0.5).train()
    mixed = _model(gpt2_shape, np.float32)
    mixed.blocks[1].mlp.fc.weight = mt.nn.Parameter(mixed.blocks[1].mlp.fc.weight.detach().double())
    cases = [(plain, True, plain.init_cache), (tiled, False, tiled.init_cache), (drawing, False, drawing.init_cache)]
    cases += [(plain, False, lambda: _concatenating(plain)), (mixed, False, mixed.init_cache)]
    for model, grad, cache_of in cases:
        prefix, idx = _ids(rng, 3, batch=1), _ids(rng, 1, batch=1)
        results = []
        for fn in (step_one_position, GPT.step):
            cache = cache_of()
            mt.manual_seed(1)
            with mt.set_grad_enabled(grad):
                try:
                    GPT.step(model, prefix, cache)
                    results.append(fn(model, idx, cache).detach().numpy())
                except Exception as e:  # mixed dtypes: the formula's own refusal, on both ways
                    results.append(type(e).__name__ + str(e))
        if isinstance(results[0], str):
            assert results[0] == results[1]
        else:
            np.testing.assert_array_equal(results[0], results[1])


def _concatenating(model):
    from transformer_np.gpt.model import GPTCache
    from transformer_np.model import AttentionCache

    cache = GPTCache(model.config.n_layer)
    cache.layers = [AttentionCache(static=False) for _ in cache.layers]
    return cache
