"""transformer_np.gpt against its PyTorch twin parity.gpt: the same weights give the same logits and every gradient
(float64 to round-off, float32 to minitensor.testing's PARITY_RTOL), for the GPT-2 shape, the Llama shape
(rotary, RMSNorm, SwiGLU, grouped-query, untied), their mixes, the tiled attention and activation checkpointing;
one AdamW step equal; the key/value cache equal to recomputation on both sides; greedy tokens equal."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import PARITY_RTOL, assert_close
from parity.convert import np_to_torch, state_arrays
from parity.gpt import generate as pt_generate
from parity.gpt.model import GPT as TorchGPT
from transformer_np.gpt import GPT, gpt2_shape, llama_shape
from transformer_np.gpt import generate as np_generate

V = 23
SMALL = dict(n_layer=2, n_head=4, n_embd=16, block_size=12)
CONFIGS = {
    "gpt2": gpt2_shape(V, **SMALL),
    "llama": llama_shape(V, **SMALL),  # n_kv_head=2 under 4 query heads, untied
    "llama_mqa_tied": llama_shape(V, **SMALL, n_kv_head=1, tie_weights=True),
    "gpt2_rope_rms_untied": gpt2_shape(V, **SMALL, positions="rope", norm="rms", tie_weights=False),
    "llama_tiled": llama_shape(V, **SMALL, attention="tiled"),
    "gpt2_checkpointed": gpt2_shape(V, **SMALL, activation_checkpointing=True),
    "llama_swiglu_bias": llama_shape(V, **SMALL, bias=True, d_ff=24),
}


def build(cfg, dtype: str, seed: int = 0):
    """(ours, twin) with equal weights: minitensor initialises under the dtype, torch copies by name."""
    previous = mt.get_default_dtype()
    mt.set_default_dtype(np.dtype(dtype))
    try:
        mt.manual_seed(seed)
        ours = GPT(cfg)
    finally:
        mt.set_default_dtype(previous)
    twin = TorchGPT(cfg).to(getattr(torch, dtype))
    np_to_torch(ours, twin)
    return ours, twin


def tokens(cfg, B=3, T=None, seed=1):
    return np.random.default_rng(seed).integers(0, cfg.vocab_size, (B, T or cfg.block_size))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_logits_and_every_gradient_equal_the_twin(name, dtype):
    cfg = CONFIGS[name]
    ours, twin = build(cfg, dtype)
    idx = tokens(cfg)
    logits, ref = ours(idx), twin(torch.as_tensor(idx))
    assert logits.shape == (3, cfg.block_size, V)
    assert_close(logits.detach().numpy(), ref.detach().numpy(), PARITY_RTOL[dtype], what=f"{name} logits")
    g = np.random.default_rng(2).standard_normal(logits.shape).astype(dtype) + 0.5  # never all ones
    logits.backward(mt.tensor(g))
    ref.backward(torch.as_tensor(g))
    ours_params, twin_params = dict(ours.named_parameters()), dict(twin.named_parameters())
    assert set(ours_params) == set(twin_params)
    for key, p in ours_params.items():
        assert_close(p.grad.numpy(), twin_params[key].grad.numpy(), PARITY_RTOL[dtype], what=f"{name} d/d{key}")


def test_weights_copy_by_name_and_tied_heads_share_one_matrix():
    ours, twin = build(CONFIGS["gpt2"], "float64")
    assert ours.lm_head.weight is ours.tok_emb.weight and twin.lm_head.weight is twin.tok_emb.weight
    assert set(state_arrays(ours)) == set(state_arrays(twin))
    untied, _ = build(CONFIGS["llama"], "float64")
    assert untied.lm_head.weight is not untied.tok_emb.weight and untied.pos_emb is None


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_one_adamw_step_equals_the_twin(name):
    cfg = CONFIGS[name]
    ours, twin = build(cfg, "float64")
    idx, target = tokens(cfg), tokens(cfg, seed=5)
    opt = mt.optim.AdamW(ours.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1)
    opt_t = torch.optim.AdamW(twin.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1)
    for _ in range(2):
        loss = mt.nn.functional.cross_entropy(ours(idx).reshape(-1, V), target.reshape(-1))
        loss_t = torch.nn.functional.cross_entropy(
            twin(torch.as_tensor(idx)).reshape(-1, V), torch.as_tensor(target).reshape(-1)
        )
        assert_close(loss.detach().numpy(), loss_t.detach().numpy(), PARITY_RTOL["float64"], what=f"{name} loss")
        opt.zero_grad()
        opt_t.zero_grad()
        loss.backward()
        loss_t.backward()
        opt.step()
        opt_t.step()
    theirs = state_arrays(twin)
    for key, arr in state_arrays(ours).items():
        assert_close(arr, theirs[key], PARITY_RTOL["float64"], what=f"{name} {key} after two AdamW steps")


@pytest.mark.parametrize("name", ["gpt2", "llama", "llama_tiled"])
def test_the_cache_equals_recomputation_on_both_sides(name):
    cfg = CONFIGS[name]
    ours, twin = build(cfg, "float64")
    ours.eval()
    idx = tokens(cfg, B=2, T=9)
    full = ours(idx).detach().numpy()
    cache, cache_t, steps, steps_t = ours.init_cache(), twin.init_cache(), [], []
    with mt.no_grad(), torch.no_grad():
        for a, b in ((0, 4), (4, 5), (5, 6), (6, 9)):  # a prefill, single steps, then a chunk
            steps.append(ours(idx[:, a:b], cache=cache).detach().numpy())
            steps_t.append(twin(torch.as_tensor(idx[:, a:b]), cache=cache_t).detach().numpy())
    assert_close(np.concatenate(steps, axis=1), full, PARITY_RTOL["float64"], what=f"{name} cached logits")
    assert_close(np.concatenate(steps_t, axis=1), full, PARITY_RTOL["float64"], what=f"{name} twin's cached logits")


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_greedy_tokens_equal_the_twin_beyond_the_context(name):
    cfg = CONFIGS[name]
    ours, twin = build(cfg, "float64")
    prompt = tokens(cfg, B=2, T=5)
    n = 2 * cfg.block_size  # past the context: the window slides
    out = np_generate.generate(ours, prompt, n, greedy=True)
    out_t = pt_generate.generate(twin, prompt, n, greedy=True)
    assert out.shape == (2, 5 + n)
    np.testing.assert_array_equal(out, out_t)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_a_hessian_vector_product_equals_the_twin(name):
    """Second order through the whole model (dense attention, RMSNorm, rotary, SwiGLU, GELU): (d^2 L / dp^2) v with
    L = <logits, g>, by differentiating the gradient's dot with a random direction v, in both libraries."""
    cfg = CONFIGS[name]
    ours, twin = build(cfg, "float64")
    idx = tokens(cfg, B=2, T=7)
    rng = np.random.default_rng(4)
    g = rng.standard_normal((2, 7, V)) + 0.5
    params, twin_params = (
        list(ours.parameters()),
        [dict(twin.named_parameters())[k] for k, _ in ours.named_parameters()],
    )
    v = [rng.standard_normal(p.shape) for p in params]
    grads = mt.autograd.grad((ours(idx) * mt.tensor(g)).sum(), params, create_graph=True)
    hv = mt.autograd.grad(sum((d * mt.tensor(w)).sum() for d, w in zip(grads, v)), params)
    grads_t = torch.autograd.grad(
        (twin(torch.as_tensor(idx)) * torch.as_tensor(g)).sum(), twin_params, create_graph=True
    )
    hv_t = torch.autograd.grad(sum((d * torch.as_tensor(w)).sum() for d, w in zip(grads_t, v)), twin_params)
    for (key, _), a, b in zip(ours.named_parameters(), hv, hv_t):
        assert_close(a.detach().numpy(), b.detach().numpy(), PARITY_RTOL["float64"], what=f"{name} H v for {key}")
