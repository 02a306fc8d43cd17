"""Rung 6's checks, with parity/'s machinery: the positional table against parity.model.sinusoidal_table; each
layer against its parity.model twin (weights copied in by name); then the whole model, layer by layer: parity's
Capture hooks record every submodule's output on both sides, a parity Report compares them in the order torch
ran them (parity.results: the report's own rule and tolerance), and the first layer that differs is named,
before the logits and every parameter's gradient (random upstream gradient on the logits)."""

from __future__ import annotations

import numpy as np
import torch

import minitensor as mt
import parity.model as pm
from parity.hooks import Capture, Hooks, is_tensor, to_numpy
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
        constants=((m, torch.tensor(m.detach().numpy())),),
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
        constants=((sm, torch.tensor(sm.detach().numpy())), (tm, torch.tensor(tm.detach().numpy()))),
    )


# What the twin's modules that have no counterpart in the learner's model compute: the learner writes these
# steps inline, in Transformer.forward.
CHECK = "the embedding's scaling or the positions"
INLINE = {
    "pos_encoding": f"the embedded source, src_embed(src) * sqrt(D) + PE[:S]: {CHECK}",
    "pos_encoding#2": f"the embedded target, tgt_embed(tgt) * sqrt(D) + PE[:T]: {CHECK}",
}


class FirstInputs(Hooks):
    """Every named submodule's first positional input at its first call, by path."""

    def __init__(self, model):
        super().__init__()
        self.inputs = {}
        self.register(model, self._hook)

    def _hook(self, name):
        def hook(module, inputs, output):
            if name not in self.inputs and inputs and is_tensor(inputs[0]):
                self.inputs[name] = to_numpy(inputs[0])

        return hook


def _input_already_differs(where, key, agreed, ours_in, twin_in, twin_cap) -> None:
    """When the first module whose output differs got a different input already, the difference was made between
    modules, in the learner's forward: name the twin's module that made that input (or the code that did)."""
    name = key.split("#")[0].split("[")[0]
    mine, theirs = ours_in.inputs.get(name), twin_in.inputs.get(name)
    if mine is None or theirs is None or mine.shape != theirs.shape:
        return
    if np.all(np.abs(mine - theirs) <= RTOL * max(1.0, float(np.abs(theirs).max()))):
        return
    # The outermost module that received this input, and the outermost twin module that made it.
    takers = [k for k, v in twin_in.inputs.items() if v.shape == theirs.shape and np.array_equal(v, theirs)]
    name = min(takers, key=lambda k: k.count("."), default=name)
    mine = ours_in.inputs.get(name, mine)
    makers = [
        k for k, v in twin_cap.outputs.items() if tuple(v.shape) == theirs.shape and np.array_equal(to_numpy(v), theirs)
    ]
    maker = min(makers, key=lambda k: k.count("."), default=None)
    what = INLINE.get(maker, f"the output of the twin's {maker}" if maker else "computed between modules")
    after = f", after {agreed[-1]} (which agrees)" if agreed else ""
    compare(
        f"{where}: the first value that differs is the input of {name}, {what}. Your model computes it in its "
        f"forward{after}; {name}'s input",
        mine,
        theirs,
        RTOL,
        "parity/'s torch twin",
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
    ours_in, twin_in = FirstInputs(ours), FirstInputs(twin)
    try:
        logits = ours(src, tgt)
        t_logits = twin(torch.from_numpy(src), torch.from_numpy(tgt))
    finally:
        for hooks in (ours_cap, twin_cap, ours_in, twin_in):
            hooks.remove()
    if not isinstance(logits, mt.Tensor):
        raise CheckFailed(f"{where}: forward returned {type(logits).__name__}, expected a Tensor of logits")
    expect_array(f"{where}: logits", logits.detach().numpy(), tuple(t_logits.shape), np.float64)
    # Layer by layer, in the order torch ran them: the first that differs is where to look.
    report = Report(meta={"course": "rung 6"})
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
        _input_already_differs(where, key, before, ours_in, twin_in, twin_cap)
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
    Exercise("6.1", "sinusoidal_table", _check_table),
    Exercise("6.2", "EncoderLayer.forward", _check_encoder_layer, needs=("5.2", "5.3")),
    Exercise("6.3", "DecoderLayer.forward", _check_decoder_layer, needs=("5.2", "5.3")),
    Exercise("6.4", "Transformer.forward, layer by layer", _check_model, needs=("6.1", "6.2", "6.3")),
]
