"""transformer_np.gpt on its own: the config's refusals, the shapes, dropout, and generation (sampling filters,
the seeded draws, the cache against recomputation, bad input refused before any work). Equality with PyTorch is
tests/parity/test_gpt.py."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from transformer_np.gpt import GPT, GPTConfig, gpt2_shape, llama_shape
from transformer_np.gpt.generate import draw, generate, next_token_probs

SMALL = dict(n_layer=2, n_head=4, n_embd=16, block_size=8)


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(n_embd=18), "n_embd (18) must be divisible by n_head (4)"),
        (dict(n_kv_head=3), "n_head (4) must be a multiple of n_kv_head (3)"),
        (dict(positions="alibi"), "unknown positions 'alibi'"),
        (dict(norm="batch"), "unknown norm 'batch'"),
        (dict(dropout=1.0), "expected dropout in [0, 1)"),
        (dict(rope_theta=float("nan")), "rope_theta"),
        (dict(n_embd=12, n_head=4, positions="rope"), "rotary positions need an even head width, got 3"),
        (dict(bias=1), "bias must be True or False"),
    ],
)
def test_the_config_refuses_bad_fields_naming_them(fields, message):
    with pytest.raises(
        (ValueError, TypeError), match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
    ):
        GPTConfig(vocab_size=10, **{**SMALL, **fields})


def test_the_two_shapes_have_the_parameters_of_their_family():
    gpt2 = dict(GPT(gpt2_shape(10, **SMALL)).named_parameters())
    llama = dict(GPT(llama_shape(10, **SMALL)).named_parameters())
    assert "pos_emb.weight" in gpt2 and "lm_head.weight" not in gpt2  # tied: one matrix, under its first name
    assert "blocks.0.attn.q_proj.bias" in gpt2 and "blocks.0.mlp.fc.weight" in gpt2
    assert "pos_emb.weight" not in llama and "lm_head.weight" in llama
    assert not any(k.endswith(".bias") for k in llama)
    assert llama["blocks.0.attn.k_proj.weight"].shape == (2 * 4, 16)  # two key/value heads of width 4
    assert llama["blocks.0.mlp.gate.weight"].shape == (48, 16)  # 8 D / 3 rounded up to a multiple of 8


def test_input_ids_are_checked_before_any_work():
    model = GPT(gpt2_shape(10, **SMALL))
    with pytest.raises(ValueError, match="token id 10 .* out of range for a vocabulary of size 10"):
        model(np.array([[1, 10]]))
    with pytest.raises(ValueError, match="sequence length 9 exceeds max_len 8"):
        model(np.zeros((1, 9), dtype=np.int64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_rotary_tables_made_once_give_the_numbers_computed_afresh(dtype):
    """RotaryEmbedding reads the rows of its context's tables (made once); the same rotation, bit for bit, as the
    tables of the call's positions made afresh: inside the context, at its end, and past it (computed then)."""
    from transformer_np.gpt.model import RotaryEmbedding, rope_tables

    x = mt.tensor(np.random.default_rng(0).standard_normal((2, 3, 5, 8)).astype(dtype))
    tabled = RotaryEmbedding(8, 500.0, max_positions=16)
    assert tabled.cos.shape == (16, 8)
    for offset in (0, 7, 11, 14, 40):  # 11 + 5 = 16: the table's last rows; then 14 and 40 go past it
        cos, sin = rope_tables(8, np.arange(offset, offset + 5), 500.0)
        want = mt.nn.functional.rotary_embedding(x, cos.astype(dtype), sin.astype(dtype))
        np.testing.assert_array_equal(tabled(x, offset).numpy(), want.numpy())
        np.testing.assert_array_equal(RotaryEmbedding(8, 500.0)(x, offset).numpy(), want.numpy())


def test_dropout_acts_in_training_only():
    model = GPT(gpt2_shape(10, **SMALL, dropout=0.5))
    idx = np.arange(8)[None] % 10
    mt.manual_seed(0)
    a = model(idx).detach().numpy()
    b = model(idx).detach().numpy()
    assert not np.allclose(a, b)
    model.eval()
    np.testing.assert_array_equal(model(idx).detach().numpy(), model(idx).detach().numpy())


@pytest.mark.parametrize("attention", ["dense", "tiled"])
def test_activation_checkpointing_gives_the_same_gradients(attention):
    """With dropout on: the recomputed blocks draw the masks the first pass drew."""
    idx = np.random.default_rng(0).integers(0, 10, (2, 8))
    grads = []
    for flag in (False, True):
        mt.manual_seed(3)
        model = GPT(llama_shape(10, **SMALL, dropout=0.2, attention=attention, activation_checkpointing=flag))
        model(idx).square().sum().backward()
        grads.append({k: p.grad.numpy() for k, p in model.named_parameters()})
    for k in grads[0]:
        np.testing.assert_allclose(grads[1][k], grads[0][k], rtol=1e-12, atol=0, err_msg=k)


def test_filters_keep_what_they_should():
    logits = np.log(np.array([[0.5, 0.2, 0.2, 0.1]]))
    np.testing.assert_allclose(next_token_probs(logits), [[0.5, 0.2, 0.2, 0.1]])
    np.testing.assert_allclose(next_token_probs(logits, top_k=1), [[1, 0, 0, 0]])
    np.testing.assert_allclose(next_token_probs(logits, top_k=2), [[0.5 / 0.9, 0.2 / 0.9, 0.2 / 0.9, 0]])  # a tie kept
    np.testing.assert_allclose(next_token_probs(logits, top_p=0.45), [[1, 0, 0, 0]])
    np.testing.assert_allclose(next_token_probs(logits, top_p=0.6), [[0.5 / 0.7, 0.2 / 0.7, 0, 0]])
    np.testing.assert_allclose(next_token_probs(logits, top_p=1.0), [[0.5, 0.2, 0.2, 0.1]])
    hot = next_token_probs(logits, temperature=0.5)
    np.testing.assert_allclose(hot, [[25, 4, 4, 1]] / np.float64(34))


def test_draw_follows_the_distribution():
    probs = np.tile([[0.1, 0.0, 0.6, 0.3]], (20000, 1))
    counts = np.bincount(draw(probs, np.random.default_rng(0)), minlength=4) / 20000
    np.testing.assert_allclose(counts, [0.1, 0.0, 0.6, 0.3], atol=0.015)
    assert counts[1] == 0


@pytest.mark.parametrize("shape", [gpt2_shape, llama_shape])
def test_sampling_with_the_cache_draws_what_recomputation_draws(shape):
    model = GPT(shape(10, **SMALL))
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    kw = dict(temperature=0.8, top_k=6, top_p=0.9, seed=7)
    cached = generate(model, prompt, 20, **kw)  # past the context of 8: the window slides
    assert cached.shape == (2, 23) and np.array_equal(cached[:, :3], prompt)
    np.testing.assert_array_equal(cached, generate(model, prompt, 20, use_cache=False, **kw))
    np.testing.assert_array_equal(cached, generate(model, prompt, 20, **kw))  # the seed fixes the draws
    assert model.training  # put back in the mode it was in


def test_top_k_one_is_greedy():
    model = GPT(llama_shape(10, **SMALL))
    prompt = np.array([[3, 1]])
    np.testing.assert_array_equal(
        generate(model, prompt, 12, top_k=1, seed=0), generate(model, prompt, 12, greedy=True)
    )


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(temperature=float("nan")), "temperature must be finite and > 0, got nan"),
        (dict(temperature=float("inf")), "temperature must be finite and > 0, got inf"),
        (dict(temperature=0), "temperature must be finite and > 0, got 0"),
        (dict(top_p=0.0), r"top_p must be in \(0, 1\], got 0.0"),
        (dict(top_p=1.5), r"top_p must be in \(0, 1\], got 1.5"),
        (dict(top_k=0), r"top_k must be an int in \[1, 10\]"),
        (dict(max_new_tokens=-1), "max_new_tokens must be an int >= 0"),
    ],
)
def test_generate_refuses_bad_arguments(kw, message):
    model = GPT(gpt2_shape(10, **SMALL))
    kw = {"max_new_tokens": 3, **kw}
    with pytest.raises(ValueError, match=message):
        generate(model, np.array([[1]]), **kw)


def test_a_prompt_outside_the_vocabulary_is_refused():
    model = GPT(gpt2_shape(10, **SMALL))
    with pytest.raises(ValueError, match="generate: prompt: token id 12 .* out of range"):
        generate(model, np.array([[1, 12]]), 3)


@pytest.fixture
def fake_cuda():
    previous = mt.devices.use_fake_cuda(True)
    yield
    mt.devices.use_fake_cuda(previous)


@pytest.mark.parametrize("attention", ["dense", "tiled"])
@pytest.mark.parametrize("shape", [gpt2_shape, llama_shape])
def test_on_a_device_the_model_equals_the_cpu(fake_cuda, shape, attention):
    """model.to('cuda') on the fake device (minitensor/fakecuda.py): host ids, masks and angle tables are moved at
    the boundary, and logits, gradients and greedy tokens equal the CPU's."""
    from minitensor.testing import PARITY_RTOL, assert_close

    mt.manual_seed(0)
    model = GPT(shape(10, **SMALL, attention=attention)).double()
    idx = np.random.default_rng(0).integers(0, 10, (2, 6))
    logits = model(idx)
    logits.square().sum().backward()
    cpu = {k: p.grad.numpy().copy() for k, p in model.named_parameters()}
    tokens = generate(model, idx[:, :2], 10, greedy=True)
    model.zero_grad()
    model.to("cuda")
    on_device = model(idx)
    assert on_device.is_cuda
    assert_close(
        on_device.cpu().detach().numpy(), logits.detach().numpy(), PARITY_RTOL["float64"], what="logits on the device"
    )
    on_device.square().sum().backward()
    for k, p in model.named_parameters():
        assert_close(p.grad.cpu().detach().numpy(), cpu[k], PARITY_RTOL["float64"], what=f"d/d{k} on the device")
    np.testing.assert_array_equal(generate(model, idx[:, :2], 10, greedy=True), tokens)
