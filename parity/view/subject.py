"""What the viewer shows: a model, its PyTorch twin and one seeded batch, from a preset, a checkpoint, a GPT shape or a
PyTorch model file.

Each `Subject` offers the training loss of its batch on both sides (`np_loss()`, `pt_loss()`), built as the parity
report builds them (parity/report.py, parity/gpt/report.py): minitensor initialises, torch copies by name. A model
file is built as `python -m parity compare` builds it (parity/compare.py): torch initialises, minitensor copies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

import minitensor as mt
from transformer_np.config import get_preset
from transformer_np.data import collate
from transformer_np.gpt.train import Recipe, get_batch
from transformer_np.loss import compute_loss as np_compute_loss
from transformer_np.training import load_checkpoint

from ..compare import CompareConfig, Side, build_pair, make_inputs, on_minitensor, on_torch, upstream_gradients
from ..gpt.report import GptReportConfig, build_gpt_models, key_bias_of
from ..gpt.sides import GptNpSide, GptTorchSide
from ..loss import compute_loss as pt_compute_loss
from ..report import build_models, synthetic_batch
from ..results import KEY_BIAS


@dataclass
class Subject:
    what: str  # in words, for the page's title: "the copy-reverse preset", "checkpoint runs/demo (step 900)"
    np_model: object
    pt_model: object
    np_loss: Callable  # () -> the training loss of the batch, a minitensor scalar
    pt_loss: Callable  # () -> the same on the twin
    key_bias: str | None  # the suffix of the biases whose gradient is identically 0 (parity/results.py), or None
    dropout: bool  # whether the model draws dropout masks (shared with the twin, parity.hooks.SharedDropoutMasks)
    relu: bool  # whether its feed-forward uses ReLU (parity.hooks.ReluBranchAligner in float32)
    batch: str  # the batch's shape, in words
    train_mode: bool = True  # the step in training mode; False: eval mode (dropout off), as parity compare runs


def _encoder_decoder(what, cfg, train, dtype, seed, batch, np_model=None) -> Subject:
    ours, twin = build_models(cfg, dtype, "cpu", seed, np_model)
    src, tgt = batch
    smoothing = train.label_smoothing
    return Subject(
        what,
        ours,
        twin,
        lambda: np_compute_loss(ours, src, tgt, smoothing)[0],
        lambda: pt_compute_loss(twin, src, tgt, smoothing)[0],
        KEY_BIAS,
        cfg.dropout > 0,
        cfg.activation == "relu",
        f"B={src.shape[0]} S={src.shape[1]} T={tgt.shape[1] - 1}",
    )


def from_preset(config: str, dtype: str, seed: int, batch_size: int | None) -> Subject:
    """A preset's fresh model on a seeded synthetic batch (parity.report.synthetic_batch), its reference batch size."""
    preset = get_preset(config)
    cfg = preset.model
    rng = np.random.default_rng(seed)
    batch = synthetic_batch(
        rng, batch_size or preset.batch_size, preset.src_len, preset.tgt_len, cfg.src_vocab_size, cfg.tgt_vocab_size
    )
    return _encoder_decoder(f"the {config} preset", cfg, preset.train, dtype, seed, batch)


def from_checkpoint(path: str, dtype: str, seed: int, batch_size: int | None) -> Subject:
    """A trained transformer_np checkpoint on a batch of its own task's held-out pairs (as `parity summary`)."""
    ck = load_checkpoint(path)
    B = batch_size or 16
    train_pairs, held = ck.task.splits(train_size=B, eval_size=B, seed=seed + 12345)
    batch = collate((held + train_pairs)[:B])
    what = f"checkpoint {ck.path} (step {ck.step}, task {ck.task.name})"
    return _encoder_decoder(what, ck.model_cfg, ck.train_cfg, dtype, seed, batch, np_model=ck.model)


def from_gpt(model: str, dtype: str, seed: int, batch_size: int | None) -> Subject:
    """The decoder-only GPT in this shape at nanoGPT's baby size, on a seeded stream of tokens (as parity report)."""
    cfg = GptReportConfig(model, dtype, "cpu", 0, "auto", seed, batch_size).model_config()
    ours, twin = build_gpt_models(cfg, dtype, "cpu", seed)
    recipe = Recipe(iters=1, warmup_iters=1, lr_decay_iters=2)
    rng = np.random.default_rng(seed)
    T = cfg.block_size
    x, y = get_batch(rng.integers(0, cfg.vocab_size, 8 * T + 1), batch_size or recipe.batch_size, T, rng)
    np_side, pt_side = GptNpSide(ours, recipe), GptTorchSide(twin, recipe)
    return Subject(
        f"the {model} GPT (baby size)",
        ours,
        twin,
        lambda: np_side.loss(x, y),
        lambda: pt_side.loss(x, y),
        key_bias_of(cfg),
        False,
        False,
        f"B={x.shape[0]} T={T}",
    )


def from_file(cc: CompareConfig) -> Subject:
    """A PyTorch model file's class on both sides, in eval mode, on compare's seeded input (parity.compare.make_inputs).

    The loss is compare's objective, the same scalar on both sides: with cc.loss 'model' the model's own loss of
    forward(x, targets); with 'random' the sum over its floating outputs of <output, g>, g compare's seeded random
    upstream gradients, so that the gradients at the outputs are those random arrays and never all ones."""
    ours, theirs = build_pair(cc)
    x, targets = make_inputs(cc, theirs)
    np_side = Side(mt, ours, x, targets, {}, None)
    pt_side = Side(torch, theirs, x, targets, {}, None)
    # one step's forward on torch first: an input the model refuses, or no loss to take, is bad input, found before
    # the page's work; and g is drawn for its outputs that require grad, as compare draws it
    out = on_torch("the forward", pt_side.forward)
    if cc.loss == "random":
        np_side.upstream = pt_side.upstream = upstream_gradients(out, cc.seed)
    on_torch("the objective", lambda: pt_side.objective(out))
    return Subject(
        cc.target,
        ours,
        theirs,
        lambda: on_minitensor("the step", lambda: np_side.objective(np_side.forward())),
        lambda: on_torch("the step", lambda: pt_side.objective(pt_side.forward())),
        None,
        False,
        False,
        f"input {cc.input_dtype} {'x'.join(map(str, cc.input_shape))}, loss {cc.loss}",
        train_mode=False,
    )
