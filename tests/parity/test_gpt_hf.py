"""Hugging Face checkpoints in transformer_np.gpt (hf.py), both ways, against transformers itself: small random
GPT2LMHeadModel and LlamaForCausalLM built from a config (no download, HF_HUB_OFFLINE=1), saved, loaded here; logits,
every gradient of a loss and one AdamW step compared in float64 and float32 (PARITY_RTOL); our save_pretrained loaded
by transformers; each layout (tied head absent, base model without prefix, attn.bias buffers, Conv1D transposed,
rope_theta in either place) and each refusal. Skipped without transformers (the `hf` extra)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import PARITY_RTOL, assert_close
from parity.gpt.report import key_bias_of
from parity.report import adam_step_bound, drift_limit
from parity.results import structurally_zero_grad
from transformer_np.gpt import GPT
from transformer_np.gpt.hf import CheckpointError, hf_to_ours

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

V, T = 50, 10


def gpt2(tied=True, **kw):
    cfg = transformers.GPT2Config(
        vocab_size=V,
        n_positions=16,
        n_embd=16,
        n_layer=2,
        n_head=4,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        tie_word_embeddings=tied,
        **kw,
    )
    return transformers.GPT2LMHeadModel(cfg)


def llama(tied=False, **kw):
    cfg = transformers.LlamaConfig(
        vocab_size=V,
        hidden_size=16,
        intermediate_size=24,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=16,
        tie_word_embeddings=tied,
        rope_parameters={"rope_type": "default", "rope_theta": 500.0},
        **kw,
    )
    return transformers.LlamaForCausalLM(cfg)


def float64_rotary(self, x, position_ids):
    """transformers' LlamaRotaryEmbedding.forward with the angles in float64 instead of float32 (hf.py's flagged
    deviation): the float64 comparison then measures the model, not the rotary tables' float32 rounding."""
    dim = self.inv_freq.shape[0] * 2
    theta = self.config.rope_parameters["rope_theta"]
    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    freqs = position_ids[..., None].double() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def float64_rms_norm(self, hidden_states):
    """transformers' LlamaRMSNorm.forward computed in the input's dtype: transformers computes it in float32 whatever
    the model's dtype (meant for half precision), which a float64 model then carries as float32 round-off."""
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


@pytest.fixture
def hf_in_float64(monkeypatch):
    """transformers' Llama with its float32 rotary angles and RMSNorm computed in the model's dtype instead (the
    float64 comparisons measure the model, not those two roundings); float32 comparisons run transformers as it is."""
    llama_module = transformers.models.llama.modeling_llama
    monkeypatch.setattr(llama_module.LlamaRotaryEmbedding, "forward", float64_rotary)
    monkeypatch.setattr(llama_module.LlamaRMSNorm, "forward", float64_rms_norm)


def saved(hf_model, path, dtype: str):
    torch.manual_seed(0)
    hf_model.to(getattr(torch, dtype)).save_pretrained(path)
    return hf_model


def grads_as_ours(hf_model, config, kind):
    """HF's gradients under our parameter names (the same mapping the weights take)."""
    grads = {k: p.grad.detach().numpy() for k, p in hf_model.named_parameters() if p.grad is not None}
    return hf_to_ours(grads, config, kind)


CASES = {
    "gpt2_tied": (lambda: gpt2(), "gpt2"),
    "gpt2_untied": (lambda: gpt2(tied=False), "gpt2"),
    "llama_gqa_untied": (lambda: llama(), "llama"),
    "llama_tied_bias": (lambda: llama(tied=True, attention_bias=True, mlp_bias=True), "llama"),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_logits_every_gradient_and_an_adamw_step_equal_hugging_face(tmp_path, name, dtype, request):
    if dtype == "float64":
        request.getfixturevalue("hf_in_float64")
    make, kind = CASES[name]
    hf = saved(make(), tmp_path, dtype)
    ours = GPT.from_pretrained(str(tmp_path))
    assert all(p.dtype == np.dtype(dtype) for p in ours.parameters())
    idx = np.random.default_rng(1).integers(0, V, (2, T))
    target = np.random.default_rng(2).integers(0, V, (2, T))
    tol = PARITY_RTOL[dtype]
    opt = mt.optim.AdamW(ours.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1)
    opt_hf = torch.optim.AdamW(hf.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1)
    logits = ours(idx)
    ref = hf(torch.as_tensor(idx)).logits
    assert_close(logits.detach().numpy(), ref.detach().numpy(), tol, what=f"{name} logits")
    loss = mt.nn.functional.cross_entropy(logits.reshape(-1, V), target.reshape(-1))
    loss_hf = torch.nn.functional.cross_entropy(ref.reshape(-1, V), torch.as_tensor(target).reshape(-1))
    loss.backward()
    loss_hf.backward()
    theirs = grads_as_ours(hf, ours.config, kind)
    assert set(theirs) == {k for k, _ in ours.named_parameters()}
    for k, p in ours.named_parameters():
        assert_close(p.grad.numpy(), theirs[k], tol, what=f"{name} d loss / d {k}")
    init = {k: p.detach().numpy().copy() for k, p in ours.named_parameters()}
    opt.step()
    opt_hf.step()
    after = hf_to_ours({k: p.detach().numpy() for k, p in hf.named_parameters()}, ours.config, kind)
    key_bias, eps = key_bias_of(ours.config), float(np.finfo(np.dtype(dtype)).eps)
    for k, p in ours.named_parameters():
        if structurally_zero_grad(k, key_bias):
            # its gradient is round-off around an exact 0, which Adam's normalized step turns into up to lr either way
            # on each side: each must stay within the parity report's drift limit of where it began (parity/report.py)
            g = max(float(np.abs(p.grad.numpy()).max()), float(np.abs(theirs[k]).max()))
            decay = 1e-2 * 0.1 * float(np.abs(init[k]).max())  # AdamW's weight decay, the same on both sides
            limit = drift_limit(init[k], adam_step_bound([1e-2], [g], (0.9, 0.99), 1e-8), 1, eps) + decay
            for side, value in (("ours", p.detach().numpy()), ("hugging face", after[k])):
                assert np.abs(value - init[k]).max() <= limit, f"{name} {k} ({side}) drifted beyond {limit:.3g}"
            continue
        assert_close(p.detach().numpy(), after[k], tol, what=f"{name} {k} after one AdamW step")


@pytest.mark.parametrize("name", sorted(CASES))
def test_save_pretrained_is_loaded_by_transformers(tmp_path, name, hf_in_float64):
    make, _ = CASES[name]
    saved(make(), tmp_path / "hf", "float64")
    ours = GPT.from_pretrained(str(tmp_path / "hf"))
    ours.save_pretrained(str(tmp_path / "ours"))
    files = sorted(os.listdir(tmp_path / "ours"))
    assert files == ["config.json", "model.safetensors"]
    tensors = safetensors_numpy.load_file(str(tmp_path / "ours" / "model.safetensors"))
    assert ("lm_head.weight" in tensors) == (not ours.config.tie_weights)  # a tied head is not saved
    auto = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "ours"), dtype=torch.float64)
    idx = np.random.default_rng(3).integers(0, V, (2, T))
    assert_close(
        ours(idx).detach().numpy(),
        auto(torch.as_tensor(idx)).logits.detach().numpy(),
        PARITY_RTOL["float64"],
        what=f"{name} ours saved, loaded by transformers",
    )


def test_a_base_gpt2_model_without_prefix_and_with_mask_buffers_loads(tmp_path):
    hf = gpt2().to(torch.float64)
    hf.transformer.save_pretrained(tmp_path)  # GPT2Model: no `transformer.` prefix, no head
    tensors = safetensors_numpy.load_file(str(tmp_path / "model.safetensors"))
    assert not any(k.startswith("transformer.") for k in tensors)
    tensors["h.0.attn.bias"] = np.tril(np.ones((1, 1, 16, 16), dtype=bool))  # the buffers older checkpoints carry
    tensors["h.1.attn.masked_bias"] = np.array(-1e4)
    safetensors_numpy.save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    ours = GPT.from_pretrained(str(tmp_path))
    idx = np.random.default_rng(4).integers(0, V, (1, T))
    assert_close(
        ours(idx).detach().numpy(),
        hf(torch.as_tensor(idx)).logits.detach().numpy(),
        PARITY_RTOL["float64"],
        what="base GPT-2 logits",
    )


def test_rope_theta_is_read_from_older_configs(tmp_path):
    saved(llama(), tmp_path, "float64")
    config = json.loads((tmp_path / "config.json").read_text())
    theta = config.pop("rope_parameters")["rope_theta"]
    config["rope_theta"] = theta
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert GPT.from_pretrained(str(tmp_path)).config.rope_theta == 500.0


def _edit(path, change):
    config = json.loads((path / "config.json").read_text())
    change(config)
    (path / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c.update(model_type="bert", architectures=["BertModel"]), "a checkpoint of architecture 'bert'"),
        (lambda c: c.update(activation_function="relu"), "unsupported config field activation_function='relu'"),
        (lambda c: c.update(n_layer=3), r"missing \['transformer.h.2.attn.c_attn.bias'"),
        (lambda c: c.update(n_embd=32), "tensors do not fit the config"),
        (lambda c: c.update(scale_attn_by_inverse_layer_idx=True), "unsupported config field scale_attn_by_inverse"),
    ],
)
def test_bad_checkpoints_are_refused_with_one_clear_error(tmp_path, change, message):
    saved(gpt2(), tmp_path, "float32")
    _edit(tmp_path, change)
    with pytest.raises(CheckpointError, match=message):
        GPT.from_pretrained(str(tmp_path))


def test_llama_refusals(tmp_path):
    saved(llama(), tmp_path, "float32")
    _edit(tmp_path, lambda c: c.update(rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0}))
    with pytest.raises(CheckpointError, match="unsupported config field rope_parameters.rope_type='yarn'"):
        GPT.from_pretrained(str(tmp_path))
    _edit(tmp_path, lambda c: c.update(rope_parameters={"rope_type": "default", "rope_theta": 1e4}))
    _edit(tmp_path, lambda c: c.update(attention_dropout=0.1))
    with pytest.raises(CheckpointError, match=r"unsupported config field attention_dropout=0.1; supported: \[0.0\]"):
        GPT.from_pretrained(str(tmp_path))
    _edit(tmp_path, lambda c: c.update(attention_dropout=0.0, hidden_act="gelu"))
    with pytest.raises(CheckpointError, match="unsupported config field hidden_act='gelu'"):
        GPT.from_pretrained(str(tmp_path))
    _edit(tmp_path, lambda c: c.update(hidden_act="silu", head_dim=8))
    with pytest.raises(CheckpointError, match="unsupported config field head_dim=8"):
        GPT.from_pretrained(str(tmp_path))


def test_a_damaged_or_missing_file_is_refused_and_nothing_is_overwritten(tmp_path):
    saved(gpt2(), tmp_path, "float32")
    weights = tmp_path / "model.safetensors"
    damaged = weights.read_bytes()[:-100]
    weights.write_bytes(damaged)
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        GPT.from_pretrained(str(tmp_path))
    assert weights.read_bytes() == damaged
    tensors = {"transformer.wte.weight": np.zeros((V, 16), np.float32)}
    safetensors_numpy.save_file(tensors, str(weights))
    with pytest.raises(CheckpointError, match="missing .*transformer.wpe.weight"):
        GPT.from_pretrained(str(tmp_path))
    os.remove(weights)
    with pytest.raises(CheckpointError, match="missing model.safetensors"):
        GPT.from_pretrained(str(tmp_path))


def test_a_model_of_neither_layout_is_not_saved(tmp_path):
    from transformer_np.gpt import gpt2_shape

    model = GPT(gpt2_shape(V, n_layer=1, n_embd=16, positions="rope"))
    with pytest.raises(CheckpointError, match="neither GPT-2's layout nor Llama's"):
        model.save_pretrained(str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_a_float32_checkpoint_loads_in_its_dtype_or_cast_when_asked(tmp_path):
    hf = saved(gpt2(), tmp_path, "float32")
    theirs = hf_to_ours(
        {k: p.detach().numpy() for k, p in hf.named_parameters()}, GPT.from_pretrained(str(tmp_path)).config, "gpt2"
    )
    for dtype in (None, "float64"):
        model = GPT.from_pretrained(str(tmp_path), dtype=dtype)
        for k, p in model.named_parameters():
            assert p.dtype == np.dtype(dtype or "float32")
            np.testing.assert_array_equal(p.detach().numpy(), theirs[k].astype(p.dtype), err_msg=k)
