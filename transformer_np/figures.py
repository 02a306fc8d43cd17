"""Every figure of a trained checkpoint, written into a folder: what `plot` and `demo` draw.

`write_all_plots(ckpt, out_dir, text, run_dir)`: the positional encoding, the causal mask, the attention
maps of every kind (encoder, decoder self, decoder cross) on a sample input decoded greedily, the
learning-rate schedule, and the training curves of the run's history.json when there is one; the
figures themselves are drawn by plots.py.
"""

from __future__ import annotations

import os

import numpy as np

import minitensor as mt
from minitensor.serialization import atomic_write

from . import plots
from .cliutil import check_out_is_a_directory
from .data import BOS_ID, EOS_ID
from .masks import causal_mask
from .model import sinusoidal_table
from .training import greedy_outputs, load_history, schedule_curve


def write_all_plots(ckpt, out_dir: str, text: str | None = None, run_dir: str | None = None) -> list[str]:
    """Every figure for a checkpoint: PE, causal mask, attention maps on a sample input, training curves."""
    task, model, cfg = ckpt.task, ckpt.model, ckpt.model_cfg
    run_dir = run_dir or os.path.dirname(ckpt.path)
    try:  # read (and checked) before any figure is written: a damaged history costs nothing
        hist = load_history(run_dir)
    except FileNotFoundError:
        hist = None
    if text is None:
        # held-out pairs are drawn first, so this is the run's first held-out example
        src_ids = task.splits(1, 1, ckpt.train_cfg.seed)[1][0][0]
    else:
        src_ids = task.encode_source(text)
    if len(src_ids) > cfg.max_len:
        raise ValueError(f"plot: the input has {len(src_ids)} tokens, the model's max_len is {cfg.max_len}")
    check_out_is_a_directory(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    pe = sinusoidal_table(min(cfg.max_len, 100), cfg.d_model)
    paths.append(plots.plot_positional_encoding(pe, os.path.join(out_dir, "positional_encoding.png")))
    paths.append(plots.plot_positional_curves(pe, os.path.join(out_dir, "positional_curves.png")))

    out_ids = greedy_outputs(model, [src_ids], min(task.max_tgt_len + 10, cfg.max_len))[0]
    tgt_in = [BOS_ID] + out_ids  # decoder input
    tgt_next = out_ids + [EOS_ID]  # what each row predicts
    src_labels = [task.src_vocab.itos[i] for i in src_ids]
    tgt_labels = [task.tgt_vocab.itos[i] for i in tgt_in]
    paths.append(plots.plot_causal_mask(causal_mask(len(tgt_in)).numpy(), os.path.join(out_dir, "causal_mask.png")))

    model.store_attention(True)
    try:
        with mt.no_grad():
            model(mt.tensor(np.asarray([src_ids], np.int64)), mt.tensor(np.asarray([tgt_in], np.int64)))
        maps = {k: [w[0] for w in v] for k, v in model.attention_maps().items()}  # (H, Tq, Tk) per layer
    finally:
        model.store_attention(False)
    sample = f"input: {' '.join(src_labels)}  ->  output: {task.decode_target(tgt_next)}"
    with atomic_write(os.path.join(out_dir, "sample.txt")) as f:
        f.write(sample + "\n")
    next_labels = [task.tgt_vocab.itos[i] for i in tgt_next]
    # Layers and heads are numbered from 1 in the figures; files keep the 0-based index of the parameter names.
    kinds = {
        "encoder": (
            "encoder self-attention",
            "encoder layer",
            src_labels,
            src_labels,
            "source key",
            "source query",
            None,
        ),
        "decoder_self": (
            "decoder self-attention",
            "decoder layer",
            tgt_labels,
            tgt_labels,
            "target key",
            "target query",
            next_labels,
        ),
        "decoder_cross": (
            "decoder cross-attention",
            "decoder layer",
            src_labels,
            tgt_labels,
            "source key",
            "target query",
            next_labels,
        ),
    }
    for kind, (name, layer_name, xl, yl, xlab, ylab, predicts) in kinds.items():
        layers = maps[kind]
        last = len(layers) - 1
        paths.append(
            plots.plot_attention(
                layers[0][0],
                os.path.join(out_dir, f"attn_{kind}_layer0_head0.png"),
                xl,
                yl,
                f"{name}, {layer_name} 1 of {last + 1}, head 1",
                xlab,
                ylab,
                predicts,
            )
        )
        heads_png = os.path.join(out_dir, f"attn_{kind}_layer{last}_heads.png")
        paths.append(
            plots.plot_attention_heads(
                layers[last],
                heads_png,
                xl,
                yl,
                f"{name}, {layer_name} {last + 1} of {last + 1} (the last), every head",
                xlab,
                ylab,
                predicts,
            )
        )
        paths.append(
            plots.plot_attention_layers(
                layers,
                os.path.join(out_dir, f"attn_{kind}_layers.png"),
                xl,
                yl,
                f"{name}, mean over heads, every layer",
                xlab,
                ylab,
                layer_name,
                predicts,
            )
        )

    steps = max(ckpt.train_cfg.steps, 1)
    lrs = schedule_curve(cfg, ckpt.train_cfg, steps)
    paths.append(
        plots.plot_lr(
            np.arange(1, steps + 1),
            lrs,
            os.path.join(out_dir, "lr_schedule.png"),
            f"Learning-rate schedule ({ckpt.train_cfg.schedule})",
        )
    )
    if hist and hist["step"]:
        ev = hist.get("eval", [])
        paths.append(
            plots.plot_loss(
                hist["step"],
                hist["loss"],
                os.path.join(out_dir, "loss.png"),
                [e["step"] for e in ev],
                [e["loss"] for e in ev],
                f"Training loss ({task.name})",
            )
        )
        paths.append(
            plots.plot_grad_norms(hist["step"], hist["layer_grad_norms"], os.path.join(out_dir, "grad_norms.png"))
        )
    return paths
