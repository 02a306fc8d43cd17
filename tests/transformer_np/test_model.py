"""transformer_np/model.py, unit by unit.

Attention, multi-head attention and the encoder/decoder layers are compared with PyTorch
(float64 and float32, random upstream gradients): the attention against torch's composite and
torch.nn.functional.scaled_dot_product_attention, the layers against torch.nn.MultiheadAttention
and torch.nn.TransformerEncoderLayer / TransformerDecoderLayer with our weights copied in.
Full-model parity is parity/'s job; here: semantics, shapes, init, errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import GRADCHECK, OP_RTOL, PARITY_RTOL, assert_close
from transformer_np.config import ModelConfig
from transformer_np.masks import causal_mask, padding_mask
from transformer_np.model import (
    DecoderLayer,
    EncoderLayer,
    LearnedPositionalEmbedding,
    MultiHeadAttention,
    PositionalEncoding,
    PositionwiseFeedForward,
    Transformer,
    scaled_dot_product_attention,
)

TORCH_DTYPE = {"float64": torch.float64, "float32": torch.float32}


def _tiny(**kw) -> Transformer:
    cfg = dict(
        src_vocab_size=11,
        tgt_vocab_size=13,
        d_model=16,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=32,
        dropout=0.0,
        max_len=20,
    )
    cfg.update(kw)
    return Transformer(**cfg)


def _leaf(arr) -> mt.Tensor:
    return mt.tensor(arr, requires_grad=True)


def _tleaf(arr) -> torch.Tensor:
    return torch.tensor(arr, requires_grad=True)


# ----------------------------------------------------------------------------------------------
# scaled_dot_product_attention
# ----------------------------------------------------------------------------------------------
def _attention_mask(rng, B, T, S, fully_masked_row=True):
    keep = rng.random((B, 1, T, S)) > 0.4
    keep[..., 0] = True  # every row sees a key ...
    if fully_masked_row:
        keep[0, 0, 1, :] = False  # ... but query 1 of batch 0 sees nothing
    return keep


def _torch_attention(q, k, v, keep):
    """The same math in torch: masked_fill(lowest) -> softmax -> zero the empty rows."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    keep_t = torch.as_tensor(keep)
    scores = scores.masked_fill(~keep_t, torch.finfo(scores.dtype).min)
    w = torch.softmax(scores, dim=-1) * keep_t.any(-1, keepdim=True)
    return w @ v, w


def test_attention_matches_torch_composite_forward_and_backward(rng, dtype_name):
    B, H, T, S, Dh = 2, 3, 4, 5, 8
    q, k, v = (rng.standard_normal(s).astype(dtype_name) for s in [(B, H, T, Dh), (B, H, S, Dh), (B, H, S, Dh)])
    keep = _attention_mask(rng, B, T, S)
    g_out = rng.standard_normal((B, H, T, Dh)).astype(dtype_name)
    g_w = rng.standard_normal((B, H, T, S)).astype(dtype_name)

    mq, mk, mv = _leaf(q), _leaf(k), _leaf(v)
    out, w = scaled_dot_product_attention(mq, mk, mv, mt.tensor(keep))
    ((out * mt.tensor(g_out)).sum() + (w * mt.tensor(g_w)).sum()).backward()

    tq, tk, tv = _tleaf(q), _tleaf(k), _tleaf(v)
    t_out, t_w = _torch_attention(tq, tk, tv, keep)
    ((t_out * torch.tensor(g_out)).sum() + (t_w * torch.tensor(g_w)).sum()).backward()

    rtol = PARITY_RTOL[dtype_name]
    assert out.dtype == np.dtype(dtype_name) and w.shape == (B, H, T, S)
    assert_close(out.detach().numpy(), t_out.detach().numpy(), rtol, "attention output")
    assert_close(w.detach().numpy(), t_w.detach().numpy(), rtol, "attention weights")
    for name, ours, ref in (("q", mq, tq), ("k", mk, tk), ("v", mv, tv)):
        assert np.isfinite(ours.grad.numpy()).all(), f"grad {name} not finite"
        assert_close(ours.grad.numpy(), ref.grad.numpy(), rtol, f"grad {name}")


def test_attention_gradcheck_with_an_empty_row_and_broadcast_keys(rng):
    # k, v shared by the whole batch (leading dim 1): the engine sums their gradients back
    B, H, T, S, Dh = 2, 2, 3, 4, 3
    q = _leaf(rng.standard_normal((B, H, T, Dh)))
    k = _leaf(rng.standard_normal((1, H, S, Dh)))
    v = _leaf(rng.standard_normal((1, H, S, Dh)))
    keep = _attention_mask(rng, B, T, S)
    assert mt.autograd.gradcheck(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, mt.tensor(keep)), (q, k, v), **GRADCHECK
    )


def test_attention_matches_torch_sdpa_when_every_row_sees_a_key(rng):
    B, H, T, S, Dh = 2, 2, 3, 6, 4
    q, k, v = (rng.standard_normal(s) for s in [(B, H, T, Dh), (B, H, S, Dh), (B, H, S, Dh)])
    keep = _attention_mask(rng, B, T, S, fully_masked_row=False)
    out, _ = scaled_dot_product_attention(mt.tensor(q), mt.tensor(k), mt.tensor(v), mt.tensor(keep))
    ref = torch.nn.functional.scaled_dot_product_attention(
        torch.tensor(q), torch.tensor(k), torch.tensor(v), attn_mask=torch.tensor(keep)
    )  # bool: True = attend
    assert_close(out.detach().numpy(), ref.detach().numpy(), PARITY_RTOL["float64"], "attention vs torch sdpa")


def test_attention_rows_sum_to_one_on_allowed_keys_and_empty_rows_are_zero(rng):
    B, H, T, S, Dh = 2, 2, 4, 5, 4
    q, k, v = (mt.tensor(rng.standard_normal(s)) for s in [(B, H, T, Dh), (B, H, S, Dh), (B, H, S, Dh)])
    keep = _attention_mask(rng, B, T, S)
    out, w = scaled_dot_product_attention(q, k, v, mt.tensor(keep))
    w = w.detach().numpy()
    keep_b = np.broadcast_to(keep, w.shape)
    assert (w[~keep_b] == 0).all(), "a masked key got weight"
    has_key = keep_b.any(-1)
    row_sums = w.sum(-1)
    assert_close(row_sums[has_key], np.ones(int(has_key.sum())), OP_RTOL["float64"], "row sums")
    assert (row_sums[~has_key] == 0).all() and (out.detach().numpy()[0, :, 1] == 0).all()
    # no mask: every row is a distribution over all keys
    _, w_all = scaled_dot_product_attention(q, k, v)
    assert_close(w_all.detach().numpy().sum(-1), np.ones((B, H, T)), OP_RTOL["float64"], "row sums without mask")


def test_fully_padded_query_rows_give_zero_and_finite_gradients(rng):
    B, H, T, S, Dh = 1, 2, 3, 4, 4
    q, k, v = (_leaf(rng.standard_normal(s)) for s in [(B, H, T, Dh), (B, H, S, Dh), (B, H, S, Dh)])
    keep = np.zeros((B, 1, T, S), dtype=bool)  # nothing to attend to at all
    out, w = scaled_dot_product_attention(q, k, v, mt.tensor(keep))
    (out * mt.tensor(rng.standard_normal(out.shape))).sum().backward()
    assert (out.detach().numpy() == 0).all() and (w.detach().numpy() == 0).all()
    for t in (q, k, v):
        assert np.isfinite(t.grad.numpy()).all() and (t.grad.numpy() == 0).all()


def test_attention_mask_errors(rng):
    q = mt.tensor(rng.standard_normal((2, 2, 3, 4)))
    k = mt.tensor(rng.standard_normal((2, 2, 5, 4)))
    with pytest.raises(TypeError, match="bool"):
        scaled_dot_product_attention(q, k, k, mt.tensor(np.ones((2, 1, 1, 5), dtype=np.int64)))
    with pytest.raises(ValueError, match=r"\(2, 1, 1, 4\).*\(2, 2, 3, 5\)"):
        scaled_dot_product_attention(q, k, k, mt.tensor(np.ones((2, 1, 1, 4), dtype=bool)))
    with pytest.raises(ValueError, match=r"expected q .*got \(2, 2, 3, 4\), \(2, 2, 5, 3\)"):
        scaled_dot_product_attention(q, mt.tensor(rng.standard_normal((2, 2, 5, 3))), k)


def test_attention_dropout_float_and_module(rng):
    q, k, v = (mt.tensor(rng.standard_normal((1, 1, 6, 4))) for _ in range(3))
    _, w0 = scaled_dot_product_attention(q, k, v)
    _, w1 = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    kept = w1.detach().numpy() != 0
    assert 0 < kept.sum() < kept.size
    assert_close(w1.detach().numpy()[kept], 2 * w0.detach().numpy()[kept], OP_RTOL["float64"], "kept weights / (1 - p)")
    drop = mt.nn.Dropout(0.5)
    drop.eval()
    _, w2 = scaled_dot_product_attention(q, k, v, dropout=drop)  # eval: identity
    np.testing.assert_array_equal(w2.detach().numpy(), w0.detach().numpy())


# ----------------------------------------------------------------------------------------------
# MultiHeadAttention vs torch.nn.MultiheadAttention
# ----------------------------------------------------------------------------------------------
def _load_mha(t_mha: torch.nn.MultiheadAttention, mha: MultiHeadAttention) -> None:
    with torch.no_grad():
        t_mha.in_proj_weight.copy_(
            torch.tensor(
                np.concatenate(
                    [mha.W_q.weight.detach().numpy(), mha.W_k.weight.detach().numpy(), mha.W_v.weight.detach().numpy()]
                )
            )
        )
        t_mha.in_proj_bias.copy_(
            torch.tensor(
                np.concatenate(
                    [mha.W_q.bias.detach().numpy(), mha.W_k.bias.detach().numpy(), mha.W_v.bias.detach().numpy()]
                )
            )
        )
        t_mha.out_proj.weight.copy_(torch.tensor(mha.W_o.weight.detach().numpy()))
        t_mha.out_proj.bias.copy_(torch.tensor(mha.W_o.bias.detach().numpy()))


def _randomize(module, rng):
    """Non-trivial values everywhere (biases and LayerNorm included), so no gradient hides behind a zero."""
    for name, p in module.named_parameters():
        if p.ndim > 1:
            p.data[...] = 0.3 * rng.standard_normal(p.shape)
        elif "norm" in name and name.endswith("weight"):
            p.data[...] = 1.0 + 0.1 * rng.standard_normal(p.shape)
        else:
            p.data[...] = 0.1 * rng.standard_normal(p.shape)


def test_mha_requires_divisible_heads():
    with pytest.raises(ValueError, match=r"d_model \(10\).*num_heads \(4\)"):
        MultiHeadAttention(10, 4)


def test_mha_matches_torch(rng, dtype_name, float64_default):
    if dtype_name == "float32":
        mt.set_default_dtype(mt.float32)
    B, T, S, D, H = 2, 4, 6, 12, 3
    mha = MultiHeadAttention(D, H)
    _randomize(mha, rng)
    t_mha = torch.nn.MultiheadAttention(D, H, batch_first=True, dtype=TORCH_DTYPE[dtype_name])
    _load_mha(t_mha, mha)
    x = rng.standard_normal((B, T, D)).astype(dtype_name)
    mem = rng.standard_normal((B, S, D)).astype(dtype_name)
    pad = np.array([[True] * S, [True] * 3 + [False] * (S - 3)])
    g = rng.standard_normal((B, T, D)).astype(dtype_name)

    mx, mm = _leaf(x), _leaf(mem)
    mha.store_attention = True
    out = mha(mx, mm, mm, mt.tensor(pad[:, None, None, :]))
    (out * mt.tensor(g)).sum().backward()
    tx, tm = _tleaf(x), _tleaf(mem)
    t_out, t_w = t_mha(tx, tm, tm, key_padding_mask=torch.tensor(~pad), average_attn_weights=False)
    (t_out * torch.tensor(g)).sum().backward()

    rtol = PARITY_RTOL[dtype_name]
    assert_close(out.detach().numpy(), t_out.detach().numpy(), rtol, "MHA output")
    assert mha.attn_weights.shape == (B, H, T, S) and isinstance(mha.attn_weights, np.ndarray)
    assert_close(mha.attn_weights, t_w.detach().numpy(), rtol, "MHA weights")
    assert_close(mx.grad.numpy(), tx.grad.numpy(), rtol, "grad query")
    assert_close(mm.grad.numpy(), tm.grad.numpy(), rtol, "grad key/value")
    w_grad = np.concatenate([mha.W_q.weight.grad.numpy(), mha.W_k.weight.grad.numpy(), mha.W_v.weight.grad.numpy()])
    assert_close(w_grad, t_mha.in_proj_weight.grad.numpy(), rtol, "grad in_proj_weight")
    assert_close(mha.W_o.bias.grad.numpy(), t_mha.out_proj.bias.grad.numpy(), rtol, "grad out_proj.bias")


# ----------------------------------------------------------------------------------------------
# Feed-forward and positions
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feed_forward_formula(rng, activation, float64_default):
    ff = PositionwiseFeedForward(6, 10, activation, dropout=0.0)
    _randomize(ff, rng)
    x = rng.standard_normal((2, 3, 6))
    h = x @ ff.linear1.weight.detach().numpy().T + ff.linear1.bias.detach().numpy()
    if activation == "relu":
        h = np.maximum(h, 0)
    else:
        h = torch.nn.functional.gelu(torch.tensor(h)).detach().numpy()
    expected = h @ ff.linear2.weight.detach().numpy().T + ff.linear2.bias.detach().numpy()
    assert_close(ff(mt.tensor(x)).detach().numpy(), expected, PARITY_RTOL["float64"], "FFN")
    with pytest.raises(ValueError, match="activation"):
        PositionwiseFeedForward(6, 10, "tanh")


def test_positional_encoding_formula_by_direct_loop(float64_default):
    D, max_len = 10, 30
    pe_mod = PositionalEncoding(D, max_len, dropout=0.0)
    pe = pe_mod.pe.detach().numpy()
    assert pe.shape == (max_len, D)
    loop = np.zeros((max_len, D))
    for pos in range(max_len):
        for i in range(D // 2):
            angle = pos / 10000 ** (2 * i / D)
            loop[pos, 2 * i] = math.sin(angle)
            loop[pos, 2 * i + 1] = math.cos(angle)
    assert_close(pe, loop, OP_RTOL["float64"], "sinusoid table")
    x = np.random.default_rng(1).standard_normal((2, 7, D))
    np.testing.assert_array_equal(pe_mod(mt.tensor(x)).detach().numpy(), x + pe[:7])
    np.testing.assert_array_equal(pe_mod(mt.tensor(x), offset=5).detach().numpy(), x + pe[5:12])
    # a buffer, not a parameter, not saved
    assert "pe" in dict(pe_mod.named_buffers()) and not list(pe_mod.parameters())
    assert "pe" not in pe_mod.state_dict()


def test_positional_encodings_reject_sequences_past_max_len():
    x = mt.zeros(1, 9, 4)
    for mod in (PositionalEncoding(4, 8, 0.0), LearnedPositionalEmbedding(4, 8, 0.0)):
        with pytest.raises(ValueError, match="sequence length 9 exceeds max_len 8"):
            mod(x)
        with pytest.raises(ValueError, match="sequence length 9 exceeds max_len 8"):
            mod(mt.zeros(1, 2, 4), offset=7)


# ----------------------------------------------------------------------------------------------
# Encoder and decoder layers vs torch.nn.TransformerEncoderLayer / TransformerDecoderLayer
# ----------------------------------------------------------------------------------------------
def _load_ffn_norms(t_layer, layer, n_norms):
    with torch.no_grad():
        for name in ["linear1", "linear2"]:
            getattr(t_layer, name).weight.copy_(torch.tensor(getattr(layer.feed_forward, name).weight.detach().numpy()))
            getattr(t_layer, name).bias.copy_(torch.tensor(getattr(layer.feed_forward, name).bias.detach().numpy()))
        for i in range(1, n_norms + 1):
            getattr(t_layer, f"norm{i}").weight.copy_(torch.tensor(getattr(layer, f"norm{i}").weight.detach().numpy()))
            getattr(t_layer, f"norm{i}").bias.copy_(torch.tensor(getattr(layer, f"norm{i}").bias.detach().numpy()))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(rng, norm_first, activation, float64_default):
    B, S, D, H, F = 2, 5, 8, 2, 16
    layer = EncoderLayer(D, H, F, dropout=0.0, activation=activation, norm_first=norm_first)
    _randomize(layer, rng)
    t_layer = torch.nn.TransformerEncoderLayer(
        D, H, F, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first, dtype=torch.float64
    )
    _load_mha(t_layer.self_attn, layer.self_attn)
    _load_ffn_norms(t_layer, layer, 2)
    x = rng.standard_normal((B, S, D))
    pad = np.array([[True] * S, [True] * 3 + [False] * (S - 3)])
    g = rng.standard_normal((B, S, D))

    mx = _leaf(x)
    out = layer(mx, mt.tensor(pad[:, None, None, :]))
    (out * mt.tensor(g)).sum().backward()
    tx = _tleaf(x)
    t_out = t_layer(tx, src_key_padding_mask=torch.tensor(~pad))
    (t_out * torch.tensor(g)).sum().backward()

    rtol = PARITY_RTOL["float64"]
    assert_close(out.detach().numpy(), t_out.detach().numpy(), rtol, "encoder layer output")
    assert_close(mx.grad.numpy(), tx.grad.numpy(), rtol, "encoder layer grad x")
    assert_close(
        layer.feed_forward.linear1.weight.grad.numpy(), t_layer.linear1.weight.grad.numpy(), rtol, "grad linear1.weight"
    )
    assert_close(layer.norm1.weight.grad.numpy(), t_layer.norm1.weight.grad.numpy(), rtol, "grad norm1.weight")


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(rng, norm_first, float64_default):
    B, T, S, D, H, F = 2, 4, 5, 8, 2, 16
    layer = DecoderLayer(D, H, F, dropout=0.0, activation="relu", norm_first=norm_first)
    _randomize(layer, rng)
    t_layer = torch.nn.TransformerDecoderLayer(
        D, H, F, dropout=0.0, batch_first=True, norm_first=norm_first, dtype=torch.float64
    )
    _load_mha(t_layer.self_attn, layer.self_attn)
    _load_mha(t_layer.multihead_attn, layer.cross_attn)
    _load_ffn_norms(t_layer, layer, 3)
    x = rng.standard_normal((B, T, D))
    mem = rng.standard_normal((B, S, D))
    pad = np.array([[True] * S, [True] * 2 + [False] * (S - 2)])
    g = rng.standard_normal((B, T, D))

    mx, mm = _leaf(x), _leaf(mem)
    out = layer(mx, mm, mt.tensor(pad[:, None, None, :]), causal_mask(T))
    (out * mt.tensor(g)).sum().backward()
    tx, tm = _tleaf(x), _tleaf(mem)
    t_out = t_layer(
        tx, tm, tgt_mask=torch.tensor(~np.tril(np.ones((T, T), dtype=bool))), memory_key_padding_mask=torch.tensor(~pad)
    )
    (t_out * torch.tensor(g)).sum().backward()

    rtol = PARITY_RTOL["float64"]
    assert_close(out.detach().numpy(), t_out.detach().numpy(), rtol, "decoder layer output")
    assert_close(mx.grad.numpy(), tx.grad.numpy(), rtol, "decoder layer grad x")
    assert_close(mm.grad.numpy(), tm.grad.numpy(), rtol, "decoder layer grad memory")
    assert_close(
        layer.cross_attn.W_o.weight.grad.numpy(),
        t_layer.multihead_attn.out_proj.weight.grad.numpy(),
        rtol,
        "grad cross_attn.W_o.weight",
    )
    assert_close(layer.norm3.bias.grad.numpy(), t_layer.norm3.bias.grad.numpy(), rtol, "grad norm3.bias")


# ----------------------------------------------------------------------------------------------
# The whole model
# ----------------------------------------------------------------------------------------------
def _param_names(final_norm=False, positional="sinusoidal", n_enc=2, n_dec=2):
    attn = [f"{w}.{p}" for w in ("W_q", "W_k", "W_v", "W_o") for p in ("weight", "bias")]
    ffn = [f"feed_forward.linear{i}.{p}" for i in (1, 2) for p in ("weight", "bias")]
    names = {"src_embed.weight", "tgt_embed.weight", "generator.weight", "generator.bias"}
    if positional == "learned":
        names.add("pos_encoding.embedding.weight")
    for i in range(n_enc):
        names |= {f"encoder.layers.{i}.self_attn.{a}" for a in attn}
        names |= {f"encoder.layers.{i}.{f}" for f in ffn}
        names |= {f"encoder.layers.{i}.norm{j}.{p}" for j in (1, 2) for p in ("weight", "bias")}
    for i in range(n_dec):
        names |= {f"decoder.layers.{i}.{m}.{a}" for m in ("self_attn", "cross_attn") for a in attn}
        names |= {f"decoder.layers.{i}.{f}" for f in ffn}
        names |= {f"decoder.layers.{i}.norm{j}.{p}" for j in (1, 2, 3) for p in ("weight", "bias")}
    if final_norm:
        names |= {f"{s}.norm.{p}" for s in ("encoder", "decoder") for p in ("weight", "bias")}
    return names


@pytest.mark.parametrize("final_norm,positional", [(False, "sinusoidal"), (True, "learned")])
def test_parameter_names_follow_the_contract(final_norm, positional):
    model = _tiny(final_norm=final_norm, positional=positional)
    assert set(model.state_dict()) == _param_names(final_norm, positional)
    assert {n for n, _ in model.named_parameters()} == _param_names(final_norm, positional)
    assert model.config == ModelConfig(11, 13, 16, 4, 2, 2, 32, 0.0, 20, False, final_norm, "relu", positional)


def test_base_model_parameter_count():
    # the paper's base model (V = 10000 both sides, untied): 6 + 6 layers at D 512
    D, F, V = 512, 2048, 10000
    attn = 4 * (D * D + D)
    ffn = D * F + F + F * D + D
    expected = 2 * V * D + 6 * (attn + ffn + 2 * 2 * D) + 6 * (2 * attn + ffn + 3 * 2 * D) + V * D + V
    cfg = ModelConfig(src_vocab_size=V, tgt_vocab_size=V)
    model = Transformer.from_config(cfg)
    assert sum(p.numel() for p in model.parameters()) == expected
    assert model.config == cfg


def test_xavier_uniform_init_of_every_matrix():
    model = _tiny()
    for name, p in model.named_parameters():
        if p.ndim > 1:
            fan_out, fan_in = p.shape
            bound = math.sqrt(6.0 / (fan_in + fan_out))
            a = p.detach().numpy()
            assert np.abs(a).max() <= bound, name
            assert np.abs(a).max() > 0.8 * bound, f"{name} does not fill its Xavier range"
            assert abs(a.std() - bound / math.sqrt(3)) < 0.25 * bound / math.sqrt(3), name
        elif name.endswith("norm1.weight"):
            assert (p.detach().numpy() == 1).all()


def test_tied_embeddings_share_one_parameter():
    model = _tiny(src_vocab_size=13, tie_embeddings=True)
    assert model.generator.weight is model.tgt_embed.weight
    untied = _tiny(src_vocab_size=13)
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in untied.parameters()) - 13 * 16


@pytest.mark.parametrize(
    "norm_first,final_norm,positional,activation",
    [(False, False, "sinusoidal", "relu"), (True, True, "learned", "gelu")],
)
def test_forward_shapes_dtype_and_backward(rng, norm_first, final_norm, positional, activation):
    model = _tiny(norm_first=norm_first, final_norm=final_norm, positional=positional, activation=activation)
    src = rng.integers(1, 11, size=(3, 7))
    tgt = rng.integers(1, 13, size=(3, 5))
    src[1, 5:] = 0
    tgt[2, 3:] = 0
    logits = model(src, tgt)
    assert logits.shape == (3, 5, 13) and logits.dtype == mt.float32
    memory = model.encode(src)
    assert memory.shape == (3, 7, 16)
    (logits * mt.tensor(rng.standard_normal(logits.shape).astype(np.float32))).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and np.isfinite(p.grad.numpy()).all(), name


def test_forward_builds_pad_masks_when_none(rng):
    model = _tiny()
    src = rng.integers(1, 11, size=(2, 6))
    tgt = rng.integers(1, 13, size=(2, 5))
    src[0, 4:] = 0
    tgt[1, 3:] = 0
    implicit = model(src, tgt).detach().numpy()
    from transformer_np.masks import target_mask

    explicit = model(src, tgt, padding_mask(src), target_mask(tgt)).detach().numpy()
    np.testing.assert_array_equal(implicit, explicit)
    # under the same mask, changing a padded source token changes nothing; changing a real one does
    src2 = src.copy()
    src2[0, 5] = 7
    np.testing.assert_array_equal(model(src2, tgt, src_mask=padding_mask(src)).detach().numpy(), implicit)
    src2[0, 1] = (src2[0, 1] % 10) + 1
    assert not np.array_equal(model(src2, tgt).detach().numpy()[0], implicit[0])
    # causality: a later target token leaves earlier logits unchanged
    tgt2 = tgt.copy()
    tgt2[0, 4] = (tgt2[0, 4] % 12) + 1
    out2 = model(src, tgt2).detach().numpy()
    np.testing.assert_array_equal(out2[0, :4], implicit[0, :4])


def test_an_all_pad_source_row_stays_finite_forward_and_backward(rng):
    model = _tiny(final_norm=True)
    src = rng.integers(1, 11, size=(2, 5))
    src[1] = 0  # nothing to attend to, in encoder and cross-attention
    tgt = rng.integers(1, 13, size=(2, 4))
    model.store_attention(True)
    logits = model(src, tgt)
    assert np.isfinite(logits.detach().numpy()).all()
    assert (model.attention_maps()["decoder_cross"][0][1] == 0).all()
    (logits * mt.tensor(rng.standard_normal(logits.shape).astype(np.float32))).sum().backward()
    assert all(np.isfinite(p.grad.numpy()).all() for p in model.parameters())
    # the other row is unaffected by its neighbour's padding
    assert_close(
        model(src[:1], tgt[:1]).detach().numpy(), logits.detach().numpy()[:1], PARITY_RTOL["float32"], "row 0 alone"
    )


def test_dropout_is_active_in_train_mode_only(rng):
    model = _tiny(dropout=0.3)
    src = rng.integers(1, 11, size=(2, 6))
    tgt = rng.integers(1, 13, size=(2, 5))
    assert not np.array_equal(model(src, tgt).detach().numpy(), model(src, tgt).detach().numpy())
    model.eval()
    np.testing.assert_array_equal(model(src, tgt).detach().numpy(), model(src, tgt).detach().numpy())


def test_attention_maps(rng):
    model = _tiny()
    src = rng.integers(1, 11, size=(2, 6))
    tgt = rng.integers(1, 13, size=(2, 4))
    maps = model.attention_maps()
    assert maps["encoder"] == [None, None]
    model.store_attention(True)
    model(src, tgt)
    maps = model.attention_maps()
    assert [m.shape for m in maps["encoder"]] == [(2, 4, 6, 6)] * 2
    assert [m.shape for m in maps["decoder_self"]] == [(2, 4, 4, 4)] * 2
    assert [m.shape for m in maps["decoder_cross"]] == [(2, 4, 4, 6)] * 2
    self_w = maps["decoder_self"][0]
    assert (self_w[..., np.triu_indices(4, 1)[0], np.triu_indices(4, 1)[1]] == 0).all()  # causal
    model.store_attention(False)
    assert model.attention_maps()["encoder"] == [None, None]


def test_bad_inputs_raise_clear_errors(rng):
    model = _tiny()
    src = rng.integers(1, 11, size=(2, 6))
    tgt = rng.integers(1, 13, size=(2, 4))
    with pytest.raises(TypeError, match="integer.*float32"):
        model(src.astype(np.float32), tgt)
    with pytest.raises(TypeError, match="list"):
        model(src.tolist(), tgt)
    bad = src.copy()
    bad[1, 2] = 11
    with pytest.raises(ValueError, match=r"token id 11 at \(1, 2\).*size 11"):
        model(bad, tgt)
    bad_tgt = tgt.copy()
    bad_tgt[0, 1] = -1
    with pytest.raises(ValueError, match=r"tgt: token id -1 at \(0, 1\).*size 13"):
        model(src, bad_tgt)
    with pytest.raises(ValueError, match=r"shape \(B, L\).*\(6,\)"):
        model(src[0], tgt)
    with pytest.raises(ValueError, match="non-empty"):
        model(src[:0], tgt[:0])
    with pytest.raises(ValueError, match="sequence length 21 exceeds max_len 20"):
        model(rng.integers(1, 11, size=(2, 21)), tgt)
    with pytest.raises(ValueError, match="tgt.*sequence length 25 exceeds max_len 20"):
        model(src, rng.integers(1, 13, size=(2, 25)))
    with pytest.raises(TypeError, match="src_mask.*bool.*int64"):
        model(src, tgt, src_mask=mt.tensor((src != 0).astype(np.int64)[:, None, None, :]))
    with pytest.raises(ValueError, match=r"src_mask.*\(2, 1, 1, 5\)"):
        model(src, tgt, src_mask=mt.tensor(np.ones((2, 1, 1, 5), dtype=bool)))
    with pytest.raises(ValueError, match=r"tgt_mask.*\(1, 1, 3, 3\)"):
        model(src, tgt, tgt_mask=causal_mask(3))
    with pytest.raises(ValueError, match=r"forward: expected src and tgt with the same batch size, got 2 and 1"):
        model(src, tgt[:1])
    with pytest.raises(ValueError, match=r"decode: expected memory of shape \(2, S, 16\), got NoneType"):
        model.decode(tgt, None)
    with pytest.raises(ValueError, match="positional"):
        _tiny(positional="rotary")
