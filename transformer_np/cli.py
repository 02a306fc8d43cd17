"""The command line: `python -m transformer_np {train, decode, plot, experiment, demo}`.

    train       train a task's preset (every ModelConfig/TrainConfig field is a flag), --resume to continue
    decode      greedy or beam decoding of one input with a trained checkpoint
    plot        every figure of plots.py for a checkpoint and a sample input
    experiment  heads | layers | positional | beam | residual (experiments.py)
    demo        train seed 003's copy-reverse model (~2-4 min on 2 cores), report, decode, plot

Errors (unknown task, missing checkpoint, bad flag values) print one line to stderr and exit
with status 2; Ctrl-C during training saves a checkpoint and exits with status 130.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import numpy as np

from .config import ModelConfig, TrainConfig

_BOOL_FIELDS = {"norm_first", "final_norm", "tie_embeddings"}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _add_config_flags(p: argparse.ArgumentParser) -> None:
    """One flag per ModelConfig / TrainConfig field, default None (= the preset's or checkpoint's value)."""
    g = p.add_argument_group("model (ModelConfig; default: the task preset's)")
    for f in dataclasses.fields(ModelConfig):
        if f.name in _BOOL_FIELDS:
            g.add_argument(_flag(f.name), dest=f.name, action=argparse.BooleanOptionalAction, default=None)
        else:
            g.add_argument(_flag(f.name), dest=f.name, type=type(f.default) if f.default is not dataclasses.MISSING
                           else int, default=None, metavar=f.name.upper())
    g = p.add_argument_group("training (TrainConfig; default: the task preset's)")
    for f in dataclasses.fields(TrainConfig):
        if f.name == "task":
            continue
        if f.name == "betas":
            g.add_argument("--betas", type=float, nargs=2, default=None, metavar=("B1", "B2"))
        else:
            g.add_argument(_flag(f.name), dest=f.name, type=type(f.default), default=None, metavar=f.name.upper())


def _overrides(args, cls) -> dict:
    out = {}
    for f in dataclasses.fields(cls):
        v = getattr(args, f.name, None)
        if v is not None and f.name != "task":
            out[f.name] = tuple(v) if f.name == "betas" else v
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m transformer_np",
                                     description="The 'Attention Is All You Need' Transformer in NumPy on minitensor.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="train a task; every ModelConfig/TrainConfig field is a flag")
    p.add_argument("--task", default=None, help="copy, copy-reverse, reverse, sort, addition, toy-translation "
                                                "(default copy-reverse, or the checkpoint's with --resume)")
    p.add_argument("--out", required=True, help="run directory (checkpoint.npz, history.json)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.npz (flags override its "
                                                        "configuration; only steps/eval_every/checkpoint_every may change)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_config_flags(p)

    p = sub.add_parser("decode", help="decode one input with a trained checkpoint")
    p.add_argument("--checkpoint", required=True, help="a run directory or its checkpoint.npz")
    p.add_argument("--input", required=True, help='source text, e.g. "3 4 5" (copy-reverse) or "i like tea"')
    p.add_argument("--beam", type=int, default=0, help="beam size (0 or 1: greedy)")
    p.add_argument("--n-best", type=int, default=1, help="with --beam: how many hypotheses to print")
    p.add_argument("--length-penalty", type=float, default=0.6, help="with --beam: GNMT length penalty alpha")
    p.add_argument("--max-len", type=int, default=None, help="most tokens to generate (default: task's longest + 10)")
    p.add_argument("--no-cache", action="store_true", help="greedy without the key/value cache")

    p = sub.add_parser("plot", help="write every figure for a checkpoint and a sample input")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--out", required=True, help="directory for the PNG files")
    p.add_argument("--input", default=None, help="sample source text (default: the first held-out example)")

    p = sub.add_parser("experiment", help="the seeds' exercises: heads, layers, positional, beam, residual")
    p.add_argument("name", help="heads | layers | positional | beam | residual | all")
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=None, help="training steps per model (default: the experiment's)")
    p.add_argument("--no-progress", action="store_true")

    p = sub.add_parser("demo", help="train seed 003's copy-reverse model (~2-4 min), evaluate, decode, plot")
    p.add_argument("--out", default="runs/demo")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: the demo's recipe)")
    p.add_argument("--no-progress", action="store_true")
    return parser


# ----------------------------------------------------------------------------------------------
# Commands
# ----------------------------------------------------------------------------------------------
def cmd_train(args) -> int:
    import minitensor as mt
    from .train import CHECKPOINT_NAME, _train_cfg_from_dict, default_configs, train
    if args.resume:
        ckpt = os.path.join(args.out, CHECKPOINT_NAME)
        if not os.path.isfile(ckpt):
            raise FileNotFoundError(f"--resume: no checkpoint at {ckpt!r}")
        state = mt.load(ckpt)
        model_cfg = ModelConfig(**state["model_config"])
        train_cfg = _train_cfg_from_dict(state["train_config"])
        if args.task is not None and args.task != train_cfg.task:
            raise ValueError(f"--resume: the checkpoint in {args.out!r} trained task {train_cfg.task!r}, "
                             f"not {args.task!r}")
    else:
        model_cfg, train_cfg = default_configs(args.task or "copy-reverse")
    model_cfg = model_cfg.replace(**_overrides(args, ModelConfig))
    train_cfg = train_cfg.replace(**_overrides(args, TrainConfig))
    print(f"task {train_cfg.task}: {json.dumps(model_cfg.to_dict())}")
    print(f"recipe: {json.dumps(train_cfg.to_dict())}")
    res = train(model_cfg, train_cfg, args.out, resume=args.resume, progress=not args.no_progress)
    m = res.metrics
    print(f"done: {res.step} steps in {res.wall_time:.1f} s; held-out ({m['num_examples']} examples): "
          f"loss {m['loss']:.4f}, token accuracy {m['token_acc']:.4f}, exact match {m['exact_acc']:.4f}")
    print(f"checkpoint: {os.path.join(args.out, CHECKPOINT_NAME)}")
    return 0


def decode_text(ckpt, text: str, beam: int = 0, n_best: int = 1, length_penalty: float = 0.6,
                max_len: int | None = None, use_cache: bool = True) -> list[tuple[str, float | None]]:
    """Decode `text` with a loaded Checkpoint: [(output text, score or None for greedy)]."""
    import minitensor as mt
    from .data import BOS_ID, EOS_ID, PAD_ID
    from .decode import beam_search, greedy_decode
    task, model = ckpt.task, ckpt.model
    src_ids = task.encode_source(text)
    if not src_ids:
        raise ValueError("decode: the input is empty")
    if len(src_ids) > ckpt.model_cfg.max_len:
        raise ValueError(f"decode: the input has {len(src_ids)} tokens, the model's max_len is {ckpt.model_cfg.max_len}")
    if max_len is None:
        max_len = min(task.max_tgt_len + 10, ckpt.model_cfg.max_len)
    src = mt.tensor(np.asarray([src_ids], dtype=np.int64))
    model.eval()
    with mt.no_grad():
        if beam and beam > 1:
            hyps = beam_search(model, src, beam_size=beam, max_len=max_len, length_penalty=length_penalty,
                               n_best=n_best)
            return [(task.decode_target(ids), float(score)) for ids, score in _beam_results(hyps)]
        out = greedy_decode(model, src, max_len=max_len, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID,
                            use_cache=use_cache)
    out = out.numpy() if hasattr(out, "numpy") else np.asarray(out)
    return [(task.decode_target(out[0]), None)]


def _beam_results(hyps) -> list[tuple[list[int], float]]:
    """Normalise beam_search's answer for one source to [(ids, score)], best first."""
    if isinstance(hyps, tuple) and len(hyps) == 2 and not isinstance(hyps[0], (tuple, list)):
        hyps = [hyps]
    if isinstance(hyps, list) and hyps and isinstance(hyps[0], list) and hyps[0] and \
            isinstance(hyps[0][0], tuple):
        hyps = hyps[0]                          # a batch of one
    out = []
    for h in hyps:
        ids, score = h[0], h[1]
        ids = ids.numpy() if hasattr(ids, "numpy") else np.asarray(ids)
        out.append((ids.reshape(-1).tolist(), float(score)))
    return out


def cmd_decode(args) -> int:
    from .train import load_checkpoint
    if args.beam < 0 or args.n_best < 1:
        raise ValueError(f"decode: --beam must be >= 0 and --n-best >= 1, got {args.beam} and {args.n_best}")
    if args.beam <= 1 and args.n_best > 1:
        raise ValueError("decode: --n-best > 1 needs --beam > 1")
    if args.beam > 1 and args.n_best > args.beam:
        raise ValueError(f"decode: --n-best ({args.n_best}) cannot exceed --beam ({args.beam})")
    ckpt = load_checkpoint(args.checkpoint)
    results = decode_text(ckpt, args.input, args.beam, args.n_best, args.length_penalty, args.max_len,
                          not args.no_cache)
    print(f"input:  {args.input}")
    for i, (text, score) in enumerate(results):
        label = "greedy" if score is None else f"beam {i + 1} (score {score:.4f})"
        print(f"{label}: {text}")
    return 0


def write_all_plots(ckpt, out_dir: str, text: str | None = None, run_dir: str | None = None) -> list[str]:
    """Every figure for a checkpoint: PE, causal mask, attention maps on a sample input, training curves."""
    import minitensor as mt
    from . import plots
    from .data import BOS_ID, EOS_ID, PAD_ID
    from .masks import causal_mask
    from .model import sinusoidal_table
    from .train import greedy_outputs, load_history, schedule_curve
    os.makedirs(out_dir, exist_ok=True)
    task, model, cfg = ckpt.task, ckpt.model, ckpt.model_cfg
    paths = []
    pe = sinusoidal_table(min(cfg.max_len, 100), cfg.d_model)
    paths.append(plots.plot_positional_encoding(pe, os.path.join(out_dir, "positional_encoding.png")))
    paths.append(plots.plot_positional_curves(pe, os.path.join(out_dir, "positional_curves.png")))

    if text is None:
        # held-out pairs are drawn first, so this is the run's first held-out example
        src_ids = task.splits(1, 1, ckpt.train_cfg.seed)[1][0][0]
    else:
        src_ids = task.encode_source(text)
    out_ids = greedy_outputs(model, [src_ids], min(task.max_tgt_len + 10, cfg.max_len))[0]
    tgt_in = [BOS_ID] + out_ids                                                   # decoder input
    tgt_next = out_ids + [EOS_ID]                                                 # what each row predicts
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
    with open(os.path.join(out_dir, "sample.txt"), "w") as f:
        f.write(sample + "\n")
    next_labels = [task.tgt_vocab.itos[i] for i in tgt_next]
    # Layers and heads are numbered from 1 in the figures; files keep the 0-based index of the parameter names.
    kinds = {"encoder": ("encoder self-attention", "encoder layer", src_labels, src_labels, "source key",
                         "source query", None),
             "decoder_self": ("decoder self-attention", "decoder layer", tgt_labels, tgt_labels, "target key",
                              "target query", next_labels),
             "decoder_cross": ("decoder cross-attention", "decoder layer", src_labels, tgt_labels, "source key",
                               "target query", next_labels)}
    for kind, (name, layer_name, xl, yl, xlab, ylab, predicts) in kinds.items():
        layers = maps[kind]
        last = len(layers) - 1
        paths.append(plots.plot_attention(layers[0][0], os.path.join(out_dir, f"attn_{kind}_layer0_head0.png"), xl, yl,
                                          f"{name}, {layer_name} 1 of {last + 1}, head 1", xlab, ylab, predicts))
        heads_png = os.path.join(out_dir, f"attn_{kind}_layer{last}_heads.png")
        paths.append(plots.plot_attention_heads(layers[last], heads_png, xl, yl,
                                                f"{name}, {layer_name} {last + 1} of {last + 1} (the last), every head",
                                                xlab, ylab, predicts))
        paths.append(plots.plot_attention_layers(layers, os.path.join(out_dir, f"attn_{kind}_layers.png"), xl, yl,
                                                 f"{name}, mean over heads, every layer", xlab, ylab, layer_name,
                                                 predicts))

    steps = max(ckpt.train_cfg.steps, 1)
    lrs = schedule_curve(cfg, ckpt.train_cfg, steps)
    paths.append(plots.plot_lr(np.arange(1, steps + 1), lrs, os.path.join(out_dir, "lr_schedule.png"),
                               f"Learning-rate schedule ({ckpt.train_cfg.schedule})"))
    run_dir = run_dir or os.path.dirname(ckpt.path)
    try:
        hist = load_history(run_dir)
    except FileNotFoundError:
        hist = None
    if hist and hist["step"]:
        ev = [e for e in hist.get("eval", [])]
        paths.append(plots.plot_loss(hist["step"], hist["loss"], os.path.join(out_dir, "loss.png"),
                                     [e["step"] for e in ev], [e["loss"] for e in ev],
                                     f"Training loss ({task.name})"))
        paths.append(plots.plot_grad_norms(hist["step"], hist["layer_grad_norms"],
                                           os.path.join(out_dir, "grad_norms.png")))
    return paths


def cmd_plot(args) -> int:
    from .train import load_checkpoint
    ckpt = load_checkpoint(args.checkpoint)
    paths = write_all_plots(ckpt, args.out, args.input,
                            args.checkpoint if os.path.isdir(args.checkpoint) else None)
    for p in paths:
        print(p)
    return 0


def cmd_experiment(args) -> int:
    from .experiments import EXPERIMENTS, run_experiment
    names = sorted(EXPERIMENTS) if args.name == "all" else [args.name]
    for name in names:
        out = os.path.join(args.out, name) if args.name == "all" else args.out
        res = run_experiment(name, out, steps=args.steps, progress=not args.no_progress)
        print(res["markdown"])
        print(f"wrote {', '.join(res['files'])}")
    return 0


# The demo's recipe: seed 003's copy-reverse model (D 128, 8 heads, 3+3 layers, d_ff 512) with the
# recipe of the acceptance test (tests/test_training_slow.py): StepLR from 1e-3 halved every 400
# steps, fresh training data, no dropout or label smoothing. About 2.5 minutes on 2 quiet cores.
DEMO_MODEL = dict(dropout=0.0)
DEMO_TRAIN = dict(steps=2000, batch_size=32, schedule="step", lr=1e-3, step_size=400, gamma=0.5,
                  train_size=50000, eval_size=200, eval_every=500, checkpoint_every=500, label_smoothing=0.0)


def cmd_demo(args) -> int:
    from .train import default_configs, load_checkpoint, train
    model_cfg, train_cfg = default_configs("copy-reverse")
    model_cfg = model_cfg.replace(**DEMO_MODEL)
    train_cfg = train_cfg.replace(**DEMO_TRAIN)
    if args.steps is not None:
        train_cfg = train_cfg.replace(steps=args.steps)
    t0 = time.perf_counter()
    print(f"demo: training copy-reverse (target = input + reversed input) for {train_cfg.steps} steps; "
          f"model {json.dumps(model_cfg.to_dict())}")
    res = train(model_cfg, train_cfg, args.out, progress=not args.no_progress)
    m = res.metrics
    print(f"\nheld-out ({m['num_examples']} sequences never seen in training): exact match {m['exact_acc']:.1%}, "
          f"token accuracy {m['token_acc']:.1%}, loss {m['loss']:.4f}  [{res.wall_time:.0f} s of training]")
    ckpt = load_checkpoint(args.out)
    print("\nexamples (greedy / beam 4):")
    for text in ("3 4 5", "15 0 7 7 2", "1 2 3 4 5 6 7 8 9 10"):
        greedy = decode_text(ckpt, text)[0][0]
        beam = decode_text(ckpt, text, beam=4)[0][0]
        expect = " ".join(text.split() + text.split()[::-1])
        mark = "ok" if greedy == expect else "WRONG"
        print(f"  {text:<22} -> greedy: {greedy}  [{mark}]\n  {'':<22}    beam 4: {beam}")
    plot_dir = os.path.join(args.out, "plots")
    paths = write_all_plots(ckpt, plot_dir, "3 4 5 6 7 8", args.out)
    print(f"\n{len(paths)} plots in {plot_dir}; total {time.perf_counter() - t0:.0f} s")
    return 0


COMMANDS = {"train": cmd_train, "decode": cmd_decode, "plot": cmd_plot, "experiment": cmd_experiment,
            "demo": cmd_demo}


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, FileNotFoundError, IndexError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
