"""The torch.nn.Transformer-based model (parity/nn_transformer.py) holding transformer_np's weights
(parity/convert.py, np_to_nn_transformer) computes what parity's twin computes.

Compared on a padded batch (some source and target positions PAD, so the masks matter): the loss and
the logits in float32 to PARITY_RTOL (eval mode, grad enabled: nn.Transformer's reference path; and
under no_grad, where its fused inference path runs), and in float64 every gradient, the twin's renamed
to nn.Transformer's keys by the same mapping, under post-norm, pre-norm with final norms, GELU, learned
positions and tied embeddings.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from minitensor.testing import PARITY_RTOL, assert_close
from parity.convert import nn_transformer_arrays, np_to_nn_transformer, state_arrays
from parity.loss import sequence_loss
from parity.masks import padding_mask, target_mask
from parity.nn_transformer import NNTransformer
from parity.report import build_models
from transformer_np.config import get_preset
from transformer_np.data import PAD_ID

VARIANTS = {
    "post-norm": {},
    "pre-norm, final norms": {"norm_first": True, "final_norm": True},
    "gelu, learned, tied": {"activation": "gelu", "positional": "learned", "tie_embeddings": True},
}


def _config(**kw):
    return get_preset("copy").model.replace(num_encoder_layers=2, num_decoder_layers=2, max_len=32, **kw)


def _batch(cfg, B=4, S=7, T=6, seed=0):
    """src (B, S), tgt_in (B, T), labels (B, T) with PAD tails; row 0 unpadded, every row starts with a token."""
    rng = np.random.default_rng(seed)
    src = rng.integers(4, cfg.src_vocab_size, (B, S))
    tgt = rng.integers(4, cfg.tgt_vocab_size, (B, T + 1))
    for b in range(1, B):
        src[b, rng.integers(S // 2, S) :] = PAD_ID
        tgt[b, rng.integers(T // 2, T) :] = PAD_ID
    return torch.from_numpy(src), torch.from_numpy(tgt[:, :-1].copy()), tgt[:, 1:].copy()


def _models(cfg, dtype):
    np_model, twin = build_models(cfg, dtype, "cpu", seed=3)
    with torch.no_grad():  # non-trivial norms, so a swapped norm shows
        for name, p in twin.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    previous = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        nn_model = NNTransformer.from_config(cfg)
    finally:
        torch.set_default_dtype(previous)
    np_to_nn_transformer(twin, nn_model)
    assert np_model.config == cfg  # the twin holds transformer_np's weights (build_models)
    return twin, nn_model


@pytest.mark.parametrize("variant", VARIANTS)
def test_loss_and_logits_equal_the_twins_in_float32(variant):
    cfg = _config(**VARIANTS[variant])
    twin, nn_model = _models(cfg, "float32")
    src, tgt, labels = _batch(cfg)
    twin.eval()
    nn_model.eval()
    ref = twin(src, tgt, padding_mask(src, PAD_ID), target_mask(tgt, PAD_ID))
    out = nn_model(src, tgt)
    assert_close(out.detach().numpy(), ref.detach().numpy(), PARITY_RTOL["float32"], "logits")
    loss_ref, loss = sequence_loss(ref, labels, 0.1), sequence_loss(out, labels, 0.1)
    assert_close(loss.detach().numpy(), loss_ref.detach().numpy(), PARITY_RTOL["float32"], "loss")
    with torch.no_grad():  # nn.Transformer's fused inference path
        assert_close(nn_model(src, tgt).numpy(), ref.detach().numpy(), PARITY_RTOL["float32"], "no_grad logits")


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_gradient_equals_the_twins_in_float64(variant):
    cfg = _config(**VARIANTS[variant])
    twin, nn_model = _models(cfg, "float64")
    src, tgt, labels = _batch(cfg, seed=1)
    twin.eval()
    nn_model.eval()
    g = torch.from_numpy(np.random.default_rng(2).standard_normal((*tgt.shape, cfg.tgt_vocab_size)))
    ref = twin(src, tgt, padding_mask(src, PAD_ID), target_mask(tgt, PAD_ID))
    out = nn_model(src, tgt)
    (ref * g).sum().backward()  # a random upstream gradient, not the loss's all-equal one
    (out * g).sum().backward()
    twin_grads = {k: p.grad.numpy() for k, p in twin.named_parameters()}
    if cfg.tie_embeddings:
        twin_grads["generator.weight"] = twin_grads["tgt_embed.weight"]
    expected = nn_transformer_arrays(twin_grads, cfg)
    got = {k: p.grad.numpy() for k, p in nn_model.named_parameters()}
    assert set(got) <= set(expected)
    D = cfg.d_model
    for name, grad in got.items():
        if name.endswith("in_proj_bias"):
            # The key bias's gradient is 0 in exact arithmetic (softmax is shift-invariant per query): round-off
            # on both sides, bounded in tests/transformer_np/test_torch_import.py; the query and value parts are
            # compared.
            keep = np.r_[0:D, 2 * D : 3 * D]
            assert_close(grad[keep], expected[name][keep], PARITY_RTOL["float64"], f"grad {name}")
        else:
            assert_close(grad, expected[name], PARITY_RTOL["float64"], f"grad {name}")


def test_the_mapping_is_checked_key_for_key():
    cfg = _config()
    np_model, _ = build_models(cfg, "float32", "cpu", seed=0)
    nn_model = NNTransformer.from_config(cfg)
    np_to_nn_transformer(np_model, nn_model)  # from transformer_np itself, not only the twin
    ours = state_arrays(np_model)
    theirs = state_arrays(nn_model)
    np.testing.assert_array_equal(
        theirs["transformer.decoder.layers.1.multihead_attn.in_proj_weight"],
        np.concatenate([ours[f"decoder.layers.1.cross_attn.W_{x}.weight"] for x in "qkv"]),
    )
    with pytest.raises(ValueError, match="configs differ"):
        np_to_nn_transformer(np_model, NNTransformer.from_config(cfg.replace(d_ff=128)))
