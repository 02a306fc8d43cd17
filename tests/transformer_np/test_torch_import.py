"""torch.nn.Transformer's weights imported into transformer_np (and parity), checked in float64.

What is compared: nn.Transformer has no embeddings, positional encoding or output projection,
so both sides get the same embedded inputs x_src (B, S, D) and x_tgt (B, T, D) and we compare
the encoder stack's output (memory, after the final norm) and the decoder stack's output (after
its final norm), then the gradients of both inputs and of every weight under a random upstream
gradient. Masks: padding of some source and target keys, causal on the target; on the torch
side as key-padding masks plus a boolean causal attn_mask (True = blocked), on ours as one
boolean "True = may attend" mask each. nn.Transformer runs with grad enabled, which keeps it
on its reference ("slow") path: the fused inference fast path and nested tensors are not used.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import PARITY_RTOL, assert_close, sum_roundoff_limit
from parity import convert
from parity.hooks import KeyProjectionGrads
from parity.model import MultiHeadAttention as TorchMHA
from parity.model import Transformer as TorchTransformer
from parity.results import key_projection, structurally_zero_grad, worst_against

RTOL = PARITY_RTOL["float64"]


def _check_grads(ours: dict, grads_ref: dict, keys: KeyProjectionGrads) -> None:
    """Every weight's gradient; the key bias's is exactly 0 in exact arithmetic (parity.results.structurally_zero_grad),
    so both sides must be within the round-off of summing the key projection's gradient rows."""
    for name, g in grads_ref.items():
        if structurally_zero_grad(name):
            limit = sum_roundoff_limit(keys.rows(key_projection(name)), "float64")
            value, lim = worst_against((ours[name], g), limit)
            assert value <= lim, f"grad {name}: should be 0 up to round-off, got {value:.2e} > {lim:.2e}"
        else:
            assert_close(ours[name], g, RTOL, f"grad {name}")


D, H, FF, B, S, T = 32, 4, 64, 3, 7, 6


def _nn_transformer(norm_first, activation="relu"):
    torch.manual_seed(0)
    ref = torch.nn.Transformer(
        D, H, 2, 2, FF, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first
    ).double()
    with torch.no_grad():  # non-trivial norms and biases, so a swapped one shows
        for _name, p in ref.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    return ref


def _inputs(rng):
    x_src = rng.standard_normal((B, S, D))
    x_tgt = rng.standard_normal((B, T, D))
    src_keep = np.ones((B, S), dtype=bool)
    src_keep[1, 4:] = False
    src_keep[2, 2:] = False
    tgt_keep = np.ones((B, T), dtype=bool)
    tgt_keep[0, 3:] = False
    return x_src, x_tgt, src_keep, tgt_keep


def _run_reference(ref, x_src, x_tgt, src_keep, tgt_keep, upstream):
    xs = torch.tensor(x_src, requires_grad=True)
    xt = torch.tensor(x_tgt, requires_grad=True)
    causal_blocked = ~torch.ones(T, T, dtype=torch.bool).tril()
    memory = ref.encoder(xs, src_key_padding_mask=torch.tensor(~src_keep))
    out = ref.decoder(
        xt,
        memory,
        tgt_mask=causal_blocked,
        tgt_key_padding_mask=torch.tensor(~tgt_keep),
        memory_key_padding_mask=torch.tensor(~src_keep),
    )
    (out * torch.tensor(upstream)).sum().backward()
    grads = copy.deepcopy(ref)
    with torch.no_grad():
        for (_, g), (_, p) in zip(grads.named_parameters(), ref.named_parameters()):
            g.copy_(p.grad)
    return (
        memory.detach().numpy(),
        out.detach().numpy(),
        xs.grad.numpy(),
        xt.grad.numpy(),
        convert.torch_transformer_arrays(grads),
    )


def _our_masks(src_keep, tgt_keep):
    src_mask = src_keep[:, None, None, :]  # (B, 1, 1, S)
    tgt_mask = tgt_keep[:, None, None, :] & np.tri(T, dtype=bool)[None, None]  # (B, 1, T, T)
    return src_mask, tgt_mask


# The two sides in one spelling: (tensor from array, array of tensor, tensor maker for masks).
FRAMEWORKS = {
    "transformer_np": (lambda a: mt.tensor(a, requires_grad=True), lambda t: t.detach().numpy(), mt.tensor),
    "parity": (lambda a: torch.tensor(a, requires_grad=True), lambda t: t.detach().numpy(), torch.tensor),
}


def _our_transformer(side, norm_first, activation):
    if side == "transformer_np":
        from transformer_np.model import Transformer

        return Transformer(
            10, 10, D, H, 2, 2, FF, dropout=0.0, norm_first=norm_first, final_norm=True, activation=activation
        )
    return TorchTransformer(
        10, 10, D, H, 2, 2, FF, dropout=0.0, norm_first=norm_first, final_norm=True, activation=activation
    ).double()


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("side", ["transformer_np", "parity"])
def test_stacks_equal_nn_transformer(side, norm_first, activation, rng, float64_default):
    ref = _nn_transformer(norm_first, activation)
    model = _our_transformer(side, norm_first, activation)
    convert.from_torch_transformer(ref, model)
    x_src, x_tgt, src_keep, tgt_keep = _inputs(rng)
    upstream = rng.standard_normal((B, T, D))
    mem_ref, out_ref, gxs_ref, gxt_ref, grads_ref = _run_reference(ref, x_src, x_tgt, src_keep, tgt_keep, upstream)

    leaf, array, const = FRAMEWORKS[side]
    src_mask, tgt_mask = _our_masks(src_keep, tgt_keep)
    xs, xt = leaf(x_src), leaf(x_tgt)
    keys = KeyProjectionGrads(model)
    memory = model.encoder(xs, const(src_mask))
    out = model.decoder(xt, memory, const(src_mask), const(tgt_mask))
    assert_close(array(memory), mem_ref, RTOL, "encoder memory")
    assert_close(array(out), out_ref, RTOL, "decoder output")
    (out * const(upstream)).sum().backward()
    assert_close(array(xs.grad), gxs_ref, RTOL, "grad x_src")
    assert_close(array(xt.grad), gxt_ref, RTOL, "grad x_tgt")
    _check_grads({k: array(p.grad) for k, p in model.named_parameters() if p.grad is not None}, grads_ref, keys)


def test_mask_to_torch_drives_nn_transformer_like_key_padding(rng):
    """Our general (B, H, T_q, T_k) masks, converted, give nn.Transformer the same result as its key-padding masks."""
    ref = _nn_transformer(False)
    x_src, x_tgt, src_keep, tgt_keep = _inputs(rng)
    src_mask, tgt_mask = _our_masks(src_keep, tgt_keep)
    xs, xt = torch.tensor(x_src), torch.tensor(x_tgt)
    a = ref(
        xs,
        xt,
        src_mask=convert.mask_to_torch(src_mask, H, B, S, S),
        tgt_mask=convert.mask_to_torch(tgt_mask, H, B, T, T),
        memory_mask=convert.mask_to_torch(src_mask, H, B, T, S),
    )
    b = ref(
        xs,
        xt,
        tgt_mask=~torch.ones(T, T, dtype=torch.bool).tril(),
        src_key_padding_mask=torch.tensor(~src_keep),
        tgt_key_padding_mask=torch.tensor(~tgt_keep),
        memory_key_padding_mask=torch.tensor(~src_keep),
    )
    assert_close(a.detach().numpy(), b.detach().numpy(), RTOL, "converted masks")


@pytest.mark.parametrize("side", ["transformer_np", "parity"])
def test_multihead_attention_alone(side, rng, float64_default):
    """nn.MultiheadAttention's packed in_proj splits into W_q, W_k, W_v: output and per-head weights equal."""
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(D, H, batch_first=True).double()
    with torch.no_grad():
        ref.in_proj_bias.normal_()
        ref.out_proj.bias.normal_()
    q, kv = rng.standard_normal((B, T, D)), rng.standard_normal((B, S, D))
    key_keep = np.ones((B, S), dtype=bool)
    key_keep[0, 5:] = False
    upstream = rng.standard_normal((B, T, D))
    tq, tkv = torch.tensor(q, requires_grad=True), torch.tensor(kv, requires_grad=True)
    out_ref, w_ref = ref(
        tq, tkv, tkv, key_padding_mask=torch.tensor(~key_keep), need_weights=True, average_attn_weights=False
    )
    (out_ref * torch.tensor(upstream)).sum().backward()
    arrays = convert.from_torch_multihead_attention(ref)
    mask = key_keep[:, None, None, :]
    if side == "transformer_np":
        from transformer_np.model import MultiHeadAttention

        mha = MultiHeadAttention(D, H, dropout=0.0)
        convert.load_arrays(mha, arrays)
        mha.store_attention = True
        xq, xkv = mt.tensor(q, requires_grad=True), mt.tensor(kv, requires_grad=True)
        out = mha(xq, xkv, xkv, mt.tensor(mask))
        (out * mt.tensor(upstream)).sum().backward()
        out, gq, gkv = out.detach().numpy(), xq.grad.numpy(), xkv.grad.numpy()
    else:
        mha = TorchMHA(D, H, dropout=0.0).double()
        convert.load_arrays(mha, arrays)
        mha.store_attention = True
        xq, xkv = torch.tensor(q, requires_grad=True), torch.tensor(kv, requires_grad=True)
        out = mha(xq, xkv, xkv, torch.tensor(mask))
        (out * torch.tensor(upstream)).sum().backward()
        out, gq, gkv = out.detach().numpy(), xq.grad.numpy(), xkv.grad.numpy()
    assert_close(out, out_ref.detach().numpy(), RTOL, "attention output")
    assert_close(mha.attn_weights, w_ref.detach().numpy(), RTOL, "attention weights (B, H, T, S)")
    assert_close(gq, tq.grad.numpy(), RTOL, "grad query")
    assert_close(gkv, tkv.grad.numpy(), RTOL, "grad key/value")


def test_import_rejects_a_mismatched_model():
    ref = _nn_transformer(False)
    wrong = TorchTransformer(10, 10, D, H, 2, 2, FF, dropout=0.0, norm_first=True, final_norm=True).double()
    with pytest.raises(ValueError, match="norm_first"):
        convert.from_torch_transformer(ref, wrong)
    no_final = TorchTransformer(10, 10, D, H, 2, 2, FF, dropout=0.0, final_norm=False).double()
    with pytest.raises(ValueError, match="final_norm"):
        convert.from_torch_transformer(ref, no_final)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_single_layers_import(norm_first, rng, float64_default):
    """nn.TransformerEncoderLayer / DecoderLayer alone -> transformer_np's EncoderLayer / DecoderLayer."""
    from transformer_np.model import DecoderLayer, EncoderLayer

    torch.manual_seed(1)
    enc_ref = torch.nn.TransformerEncoderLayer(
        D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first, activation="gelu"
    ).double()
    dec_ref = torch.nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first).double()
    enc = EncoderLayer(D, H, FF, dropout=0.0, activation="gelu", norm_first=norm_first)
    dec = DecoderLayer(D, H, FF, dropout=0.0, activation="relu", norm_first=norm_first)
    convert.load_arrays(enc, convert.from_torch_encoder_layer(enc_ref))
    convert.load_arrays(dec, convert.from_torch_decoder_layer(dec_ref))
    x_src, x_tgt, src_keep, tgt_keep = _inputs(rng)
    src_mask, tgt_mask = _our_masks(src_keep, tgt_keep)
    with torch.no_grad():
        mem_ref = enc_ref(torch.tensor(x_src), src_key_padding_mask=torch.tensor(~src_keep))
        out_ref = dec_ref(
            torch.tensor(x_tgt),
            mem_ref,
            tgt_mask=~torch.ones(T, T, dtype=torch.bool).tril(),
            tgt_key_padding_mask=torch.tensor(~tgt_keep),
            memory_key_padding_mask=torch.tensor(~src_keep),
        )
    with mt.no_grad():
        mem = enc(mt.tensor(x_src), mt.tensor(src_mask))
        out = dec(mt.tensor(x_tgt), mt.tensor(mem_ref.numpy()), mt.tensor(src_mask), mt.tensor(tgt_mask))
    assert_close(mem.detach().numpy(), mem_ref.numpy(), RTOL, "encoder layer")
    assert_close(out.detach().numpy(), out_ref.numpy(), RTOL, "decoder layer")
