"""Rung 5's checks, with parity/'s machinery: the positional table against parity.model.sinusoidal_table; each
layer against its parity.model twin (weights copied in by name); then the whole model, layer by layer: parity's
Capture hooks record every submodule's output on both sides, a parity Report compares them in the order torch
ran them (parity.results: the report's own rule and tolerance), and the first layer that differs is named,
before the logits and every parameter's gradient (random upstream gradient on the logits)."""

from __future__ import annotations

import numpy as np
import torch

import minitensor as mt
import parity.model as pm
from parity.hooks import Capture, to_numpy
from parity.report import synthetic_batch
from parity.results import Report, group_of
from transformer_np.masks import padding_mask, target_mask

from ..runner import Exercise
from .common import CheckFailed, compare, expect_array, rng
from .modules import RTOL, compare_module, copy_into_twin, float64

B, S, T, D, H, F, N, V_SRC, V_TGT, MAX_LEN = 2, 6, 5, 8, 2, 16, 2, 11, 13, 32


def _check_table(mod):
    for max_len, d in ((MAX_LEN, D), (7, 6)):
        got = mod.sinusoidal_table(max_len, d)
        want = pm.sinusoidal_table(max_len, d)
        expect_array(f"sinusoidal_table({max_len}, {d})", got, want.shape, np.float64)
        compare(f"sinusoidal_table({max_len}, {d})", got, want, RTOL, "parity.model.sinusoidal_table")


def _tokens():
    src, tgt = synthetic_batch(rng(8), B, S, T, V_SRC, V_TGT)
    return src, tgt[:, :-1]  # the decoder's input: <bos> tokens..., padded


def _masks(src, tgt):
    return padding_mask(src), target_mask(tgt)


def _check_encoder_layer(mod):
    src, _ = _tokens()
    m = padding_mask(src)
    with float64():
        mt.manual_seed(0)
        ours, twin = mod.EncoderLayer(D, H, F), pm.EncoderLayer(D, H, F, dropout=0.0)
    compare_module(
        f"EncoderLayer({D}, {H}, {F}) with a padding mask",
        ours,
        twin,
        [rng(9).standard_normal((B, S, D))],
        constants=((m, torch.tensor(m.data)),),
    )


def _check_decoder_layer(mod):
    src, tgt = _tokens()
    sm, tm = _masks(src, tgt)
    with float64():
        mt.manual_seed(0)
        ours, twin = mod.DecoderLayer(D, H, F), pm.DecoderLayer(D, H, F, dropout=0.0)
    r = rng(10)
    compare_module(
        f"DecoderLayer({D}, {H}, {F}) with padding and causal masks",
        ours,
        twin,
        [r.standard_normal((B, T, D)), r.standard_normal((B, S, D))],
        constants=((sm, torch.tensor(sm.data)), (tm, torch.tensor(tm.data))),
    )


def _check_model(mod):
    with float64():
        mt.manual_seed(0)
        ours = mod.Transformer(V_SRC, V_TGT, D, H, N, F, MAX_LEN)
        twin = pm.Transformer(V_SRC, V_TGT, D, H, N, N, F, dropout=0.0, max_len=MAX_LEN)
    where = f"Transformer({V_SRC}, {V_TGT}, d_model={D}, heads={H}, layers={N}, d_ff={F})"
    copy_into_twin(where, ours, twin)
    src, tgt = _tokens()
    ours_cap, twin_cap = Capture(ours), Capture(twin)
    try:
        logits = ours(src, tgt)
        t_logits = twin(torch.from_numpy(src), torch.from_numpy(tgt))
    finally:
        ours_cap.remove()
        twin_cap.remove()
    if not isinstance(logits, mt.Tensor):
        raise CheckFailed(f"{where}: forward returned {type(logits).__name__}, expected a Tensor of logits")
    expect_array(f"{where}: logits", logits.data, tuple(t_logits.shape), np.float64)
    # Layer by layer, in the order torch ran them: the first that differs is where to look.
    report = Report(meta={"course": "rung 5"})
    for key, t in twin_cap.outputs.items():
        if key in ours_cap.outputs:
            report.check_close(group_of(key), "forward", key, to_numpy(ours_cap.outputs[key]), to_numpy(t), RTOL)
    checked = [r.name for r in report.rows]
    if not any(k.startswith("encoder.layers.") for k in checked) or not any(
        k.startswith("decoder.layers.") for k in checked
    ):
        raise CheckFailed(
            f"{where}: your model's encoder.layers and decoder.layers did not run (outputs compared: {checked})"
        )
    bad = report.failures()
    if bad:
        key = bad[0].name
        before = [r.name for r in report.rows[: report.rows.index(bad[0])] if r.ok]
        agreed = f" (the last output that agreed, just before it: {before[-1]})" if before else ""
        compare(
            f"{where}: the first layer that differs is {key}{agreed}; its output",
            to_numpy(ours_cap.outputs[key]),
            to_numpy(twin_cap.outputs[key]),
            RTOL,
            "parity/'s torch twin",
        )
    compare(f"{where}: logits", logits, t_logits, RTOL, "parity/'s torch twin")
    G = rng(11).standard_normal(tuple(t_logits.shape))
    logits.backward(mt.tensor(G))
    t_logits.backward(torch.tensor(G))
    theirs = dict(twin.named_parameters())
    for name, p in ours.named_parameters():
        if p.grad is None:
            raise CheckFailed(f"{where}: no gradient reached parameter {name}")
        compare(f"{where}: gradient of {name}", p.grad, theirs[name].grad, RTOL, "parity/'s torch twin")


EXERCISES = [
    Exercise("5.1", "sinusoidal_table", _check_table),
    Exercise("5.2", "EncoderLayer.forward", _check_encoder_layer),
    Exercise("5.3", "DecoderLayer.forward", _check_decoder_layer),
    Exercise("5.4", "Transformer.forward, layer by layer", _check_model),
]
