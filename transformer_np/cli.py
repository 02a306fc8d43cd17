"""The command line: `python -m transformer_np {train, decode, plot, experiment, demo}`.

    train       train a task's preset (every ModelConfig/TrainConfig field is a flag), --resume to continue
    decode      greedy or beam decoding of one input with a trained checkpoint
    plot        every figure of plots.py for a checkpoint and a sample input
    experiment  heads | layers | positional | beam | residual | curvature | all (experiments.py)
    demo        train the copy-reverse preset (3+3 layers, d_model 128; ~2-4 min on 2 cores), report, decode, plot

Every user error (a bad flag value, a missing or damaged checkpoint or history, an output that
would overwrite a run) is one line on stderr and exit status 2, before anything is printed or written.
Ctrl-C during training finishes the step, saves a checkpoint and exits with status 130.
A run whose loss or gradient norm becomes NaN or infinite stops at that step before its update,
keeps its last finite checkpoint, says so in one line and exits with status 3 (EXIT_DIVERGED), unless
`train --allow-nonfinite`. Exit statuses: 0 done, 1 an unexpected crash (a bug: Python's traceback),
2 refused before any work, 3 diverged, 130 interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import time

import numpy as np

from minitensor.allocator import reuse_freed_memory
from minitensor.serialization import atomic_write

from .config import ACTIVATIONS, POSITIONALS, PRESETS, SCHEDULES, ModelConfig, TrainConfig
from .data import TASKS

# A diverged run is neither a user error refused before any work (2) nor a crash (1, a traceback):
# steps ran and the run directory holds what they left, so scripts can tell it apart.
EXIT_DIVERGED = 3


class OneLineParser(argparse.ArgumentParser):
    """argparse with a one-line error: "PROG: error: MESSAGE" on stderr and exit status 2, no usage block.

    The three command lines (transformer_np, parity, benchmarks) all parse with it."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(str(message).split())}\n")


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """'(default: X)' after each flag's help, except for switches and None defaults (the help says what then)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


# One help line per config field; the flag is the field's name with dashes.
MODEL_HELP = {
    "src_vocab_size": "source vocabulary size, specials included (set from the task)",
    "tgt_vocab_size": "target vocabulary size, specials included (set from the task)",
    "d_model": "width D of every residual stream",
    "num_heads": "attention heads H (D must be divisible by H)",
    "num_encoder_layers": "encoder layers",
    "num_decoder_layers": "decoder layers",
    "d_ff": "hidden width of the position-wise feed-forward net",
    "dropout": "dropout rate in [0, 1) for embeddings, attention weights and sublayers",
    "max_len": "longest sequence the positional encoding covers",
    "norm_first": "pre-norm (LayerNorm before each sublayer) instead of the paper's post-norm",
    "final_norm": "a LayerNorm after the last encoder and decoder layer",
    "activation": "feed-forward activation",
    "positional": "positional encoding: the paper's sinusoids or a learned table",
    "tie_embeddings": "share the target embedding with the output projection",
}
TRAIN_HELP = {
    "steps": "optimizer steps (with --resume: the total to reach)",
    "batch_size": "sequences per batch",
    "lr": "learning rate; with --schedule warmup, the multiplier of d_model^-0.5 * min(n^-0.5, n * warmup^-1.5)",
    "schedule": "learning-rate schedule: the paper's warmup then inverse square root, StepLR, or constant",
    "warmup_steps": "warmup length of --schedule warmup",
    "step_size": "StepLR period in optimizer steps (--schedule step)",
    "gamma": "StepLR factor (--schedule step)",
    "betas": "Adam's beta1 and beta2",
    "eps": "Adam's epsilon",
    "weight_decay": "Adam's L2 weight decay",
    "label_smoothing": "label smoothing in [0, 1) of the cross-entropy",
    "clip_grad_norm": "clip the global gradient norm to this value (0: no clipping)",
    "train_size": "training examples generated",
    "eval_size": "held-out examples (the toy corpus evaluates on its training set)",
    "seed": "seed of the data, the initialisation and dropout",
    "eval_every": "held-out evaluation every this many steps (0: only at the end)",
    "checkpoint_every": "checkpoint every this many steps (0: only at the end and on Ctrl-C)",
}
TRAIN_GROUPS = {
    "optimisation": (
        "steps",
        "batch_size",
        "lr",
        "schedule",
        "warmup_steps",
        "step_size",
        "gamma",
        "betas",
        "eps",
        "weight_decay",
        "label_smoothing",
        "clip_grad_norm",
    ),
    "data": ("train_size", "eval_size", "seed"),
    "run": ("eval_every", "checkpoint_every"),
}
CHOICES = {"activation": ACTIVATIONS, "positional": POSITIONALS, "schedule": SCHEDULES}
_BOOL_FIELDS = {"norm_first", "final_norm", "tie_embeddings"}
_PRESET = PRESETS["copy-reverse"]  # the preset whose values --help shows


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _add_field_flag(group, f: dataclasses.Field, help_text: str, preset_value) -> None:
    """A flag for config field `f`, default None (= the task preset's, or the checkpoint's with --resume)."""
    shown = " ".join(map(str, preset_value)) if isinstance(preset_value, tuple) else preset_value
    help_text = f"{help_text} (default: the task preset's; copy-reverse: {shown})"
    name, kw = _flag(f.name), dict(dest=f.name, default=None, help=help_text)
    if f.name in _BOOL_FIELDS:
        group.add_argument(name, action=argparse.BooleanOptionalAction, **kw)
    elif f.name == "betas":
        group.add_argument(name, type=float, nargs=2, metavar=("B1", "B2"), **kw)
    elif f.name in CHOICES:
        group.add_argument(name, choices=CHOICES[f.name], **kw)
    else:
        group.add_argument(name, type=type(preset_value), metavar=f.name.upper(), **kw)


def _add_train_flags(p: argparse.ArgumentParser) -> None:
    """`train`'s flags in four groups (model, optimisation, data, run); one flag per config field."""
    g = p.add_argument_group("model (ModelConfig)")
    for f in dataclasses.fields(ModelConfig):
        _add_field_flag(g, f, MODEL_HELP[f.name], getattr(_PRESET.model, f.name))
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    groups = {name: p.add_argument_group(f"{name} (TrainConfig)") for name in TRAIN_GROUPS}
    groups["data"].add_argument(
        "--task",
        choices=sorted(TASKS),
        default=None,
        help="the task to learn (default: copy-reverse, or the checkpoint's with --resume). A task is the "
        "data; it trains with the model and recipe of its preset (reverse, sort and addition with "
        "copy-reverse's), which is why `python -m parity --config` lists presets (base, long: sizes "
        "with no task of their own) rather than tasks",
    )
    for name, field_names in TRAIN_GROUPS.items():
        for field_name in field_names:
            _add_field_flag(
                groups[name], fields[field_name], TRAIN_HELP[field_name], getattr(_PRESET.train, field_name)
            )
    run = groups["run"]
    run.add_argument("--out", required=True, help="run directory (checkpoint.npz, history.json)")
    how = run.add_mutually_exclusive_group()
    how.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in OUT (flags override its "
        "configuration; only --steps, --eval-every and --checkpoint-every may change)",
    )
    how.add_argument("--overwrite", action="store_true", help="replace the run already in OUT")
    run.add_argument(
        "--allow-nonfinite",
        action="store_true",
        help="train on when a loss or gradient norm is NaN or infinite (by default the run stops there "
        f"with exit status {EXIT_DIVERGED}, before that step's update, keeping its last finite checkpoint), "
        "and resume from a checkpoint holding such values",
    )
    run.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress (by default a bar on a terminal, else a line every tenth of the steps or minute)",
    )


def _overrides(args, cls) -> dict:
    out = {}
    for f in dataclasses.fields(cls):
        v = getattr(args, f.name, None)
        if v is not None and f.name != "task":
            out[f.name] = tuple(v) if f.name == "betas" else v
    return out


def _subcommand(sub, name: str, run, help_text: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help_text, description=help_text, formatter_class=_HelpFormatter)
    p.set_defaults(run=run, parser=p)
    return p


def build_parser() -> argparse.ArgumentParser:
    from .experiments import EXPERIMENTS

    parser = OneLineParser(
        prog="python -m transformer_np",
        formatter_class=_HelpFormatter,
        description="The 'Attention Is All You Need' Transformer in NumPy on minitensor.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _subcommand(sub, "train", cmd_train, "train a task; every ModelConfig/TrainConfig field is a flag")
    _add_train_flags(p)

    p = _subcommand(sub, "decode", cmd_decode, "decode one input with a trained checkpoint")
    p.add_argument("--checkpoint", required=True, help="a run directory or its checkpoint.npz")
    p.add_argument("--input", required=True, help='source text, e.g. "3 4 5" (copy-reverse) or "i like tea"')
    p.add_argument("--beam", type=int, default=0, help="beam size (0 or 1: greedy)")
    p.add_argument("--n-best", type=int, default=1, help="with --beam: how many hypotheses to print")
    p.add_argument("--length-penalty", type=float, default=0.6, help="with --beam: GNMT length penalty alpha")
    p.add_argument(
        "--max-len",
        type=int,
        default=None,
        help="most tokens to generate (default: the task's longest target + 10, at most the model's)",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="recompute every prefix instead of using the key/value cache (greedy and beam; same tokens, slower)",
    )

    p = _subcommand(sub, "plot", cmd_plot, "write every figure for a checkpoint and a sample input")
    p.add_argument("--checkpoint", required=True, help="a run directory or its checkpoint.npz")
    p.add_argument("--out", required=True, help="directory for the PNG files")
    p.add_argument("--input", default=None, help="sample source text (default: the first held-out example)")

    names = ", ".join(EXPERIMENTS)
    p = _subcommand(sub, "experiment", cmd_experiment, f"small studies: {names} (or all)")
    p.add_argument("name", choices=[*EXPERIMENTS, "all"], help="the experiment, or all of them")
    p.add_argument("--out", required=True, help="directory for NAME.md, NAME.json and NAME.png")
    p.add_argument("--steps", type=int, default=None, help="training steps per model (default: the experiment's)")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier result of the same experiment")
    p.add_argument("--tiny", action="store_true", help="curvature only: a tiny model and 4 steps, in seconds (CI)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = _subcommand(sub, "demo", cmd_demo, "train the copy-reverse preset (~2-4 min), evaluate, decode, plot")
    p.add_argument("--out", default="runs/demo", help="run directory")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: the demo's recipe, 2000)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--overwrite", action="store_true", help="replace the run already in OUT (train afresh)")
    how.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted demo in OUT; a finished one is not trained again, only reported",
    )
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress (by default a bar on a terminal, else a line every tenth of the steps or minute)",
    )
    return parser


# ----------------------------------------------------------------------------------------------
# Commands. Each checks everything it can before printing or writing anything; a ValueError,
# TypeError or OSError it raises is a user error (main turns it into parser.error).
# ----------------------------------------------------------------------------------------------
def _train_configs(args) -> tuple[ModelConfig, TrainConfig]:
    """The configs `train` will run: the task preset's (or the checkpoint's with --resume), then the flags."""
    from .training import default_configs, resume_configs

    if args.resume:
        model_cfg, train_cfg = resume_configs(args.out)
        if args.task is not None and args.task != train_cfg.task:
            raise ValueError(
                f"--resume: the checkpoint in {args.out!r} trained task {train_cfg.task!r}, not {args.task!r}"
            )
    else:
        model_cfg, train_cfg = default_configs(args.task or "copy-reverse")
    model_cfg = model_cfg.replace(**_overrides(args, ModelConfig))
    train_cfg = train_cfg.replace(**_overrides(args, TrainConfig))
    return model_cfg, train_cfg


def _resume_command(command: str, out: str) -> str:
    return f"python -m transformer_np {command} --out {shlex.quote(out)} --resume"


def done_line(res) -> str:
    """'done: N steps in T s' for a run in one go; for a resumed run, this call's steps and time and the whole run's."""
    if res.start_step == 0 and res.runs == 1:
        return f"done: {res.step} steps in {res.wall_time:.1f} s"
    return (
        f"done: {res.step} steps (steps {res.start_step + 1}-{res.step} in this run, {res.wall_time:.1f} s; "
        f"{res.total_wall_time:.1f} s over {res.runs} runs)"
    )


def cmd_train(args) -> int:
    from .training import CHECKPOINT_NAME, train

    model_cfg, train_cfg = _train_configs(args)

    def announce():
        print(f"task {train_cfg.task}: {json.dumps(model_cfg.to_dict())}")
        print(f"recipe: {json.dumps(train_cfg.to_dict())}")

    res = train(
        model_cfg,
        train_cfg,
        args.out,
        resume=args.resume,
        progress=not args.no_progress,
        overwrite=args.overwrite,
        on_start=announce,
        allow_nonfinite=args.allow_nonfinite,
        resume_hint=_resume_command("train", args.out),
    )
    if res.nothing_to_do:
        print(
            f"nothing to do: the run in {args.out!r} is already at step {res.step} (--steps {train_cfg.steps}); "
            "its files are unchanged"
        )
        return 0
    m = res.metrics
    print(
        f"{done_line(res)}; held-out ({m['num_examples']} examples): "
        f"loss {m['loss']:.4f}, token accuracy {m['token_acc']:.4f}, exact match {m['exact_acc']:.4f}"
    )
    print(f"checkpoint: {os.path.join(args.out, CHECKPOINT_NAME)}")
    return 0


def decode_text(
    ckpt,
    text: str,
    beam: int = 0,
    n_best: int = 1,
    length_penalty: float = 0.6,
    max_len: int | None = None,
    use_cache: bool = True,
) -> list[tuple[str, float | None]]:
    """Decode `text` with a loaded Checkpoint: [(output text, score or None for greedy)], best first."""
    import minitensor as mt

    from .decode import beam_search, greedy_decode

    task, model = ckpt.task, ckpt.model
    src_ids = task.encode_source(text)
    if len(src_ids) > ckpt.model_cfg.max_len:
        raise ValueError(
            f"decode: the input has {len(src_ids)} tokens, the model's max_len is {ckpt.model_cfg.max_len}"
        )
    if max_len is None:
        max_len = min(task.max_tgt_len + 10, ckpt.model_cfg.max_len)
    src = mt.tensor(np.asarray([src_ids], dtype=np.int64))
    if beam > 1:
        hyps = beam_search(
            model,
            src,
            beam_size=beam,
            max_len=max_len,
            length_penalty=length_penalty,
            n_best=n_best,
            use_cache=use_cache,
        )[0]  # the only source sentence
        return [(task.decode_target(ids), score) for ids, score in hyps]
    out = greedy_decode(model, src, max_len=max_len, use_cache=use_cache)
    return [(task.decode_target(out[0]), None)]


def _check_decode_flags(args) -> None:
    if args.beam < 0 or args.n_best < 1:
        raise ValueError(f"--beam must be >= 0 and --n-best >= 1, got {args.beam} and {args.n_best}")
    if args.beam <= 1 and args.n_best > 1:
        raise ValueError("--n-best > 1 needs --beam > 1")
    if args.beam > 1 and args.n_best > args.beam:
        raise ValueError(f"--n-best ({args.n_best}) cannot exceed --beam ({args.beam})")
    if args.max_len is not None and args.max_len < 1:
        raise ValueError(f"--max-len must be >= 1, got {args.max_len}")
    if not args.length_penalty >= 0 or args.length_penalty == float("inf"):
        raise ValueError(f"--length-penalty must be a finite number >= 0, got {args.length_penalty}")


def cmd_decode(args) -> int:
    from .training import load_checkpoint

    _check_decode_flags(args)
    ckpt = load_checkpoint(args.checkpoint)
    if args.max_len is not None and args.max_len > ckpt.model_cfg.max_len:
        raise ValueError(f"--max-len {args.max_len} exceeds the model's max_len {ckpt.model_cfg.max_len}")
    results = decode_text(
        ckpt, args.input, args.beam, args.n_best, args.length_penalty, args.max_len, not args.no_cache
    )
    print(f"input:  {args.input}")
    for i, (text, score) in enumerate(results):
        label = "greedy" if score is None else f"beam {i + 1} (score {score:.4f})"
        print(f"{label}: {text}")
    return 0


def _check_out_is_a_directory(out: str) -> None:
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"--out {out!r} is a file, expected a directory")


def write_all_plots(ckpt, out_dir: str, text: str | None = None, run_dir: str | None = None) -> list[str]:
    """Every figure for a checkpoint: PE, causal mask, attention maps on a sample input, training curves."""
    import minitensor as mt

    from . import plots
    from .data import BOS_ID, EOS_ID
    from .masks import causal_mask
    from .model import sinusoidal_table
    from .training import greedy_outputs, load_history, schedule_curve

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
    _check_out_is_a_directory(out_dir)
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


def cmd_plot(args) -> int:
    from .training import load_checkpoint

    _check_out_is_a_directory(args.out)
    ckpt = load_checkpoint(args.checkpoint)
    paths = write_all_plots(ckpt, args.out, args.input, args.checkpoint if os.path.isdir(args.checkpoint) else None)
    for p in paths:
        print(p)
    return 0


def cmd_experiment(args) -> int:
    from .experiments import EXPERIMENTS, check_experiment, run_experiment

    names = list(EXPERIMENTS) if args.name == "all" else [args.name]
    _check_out_is_a_directory(args.out)
    for name in names:  # every refusal before the first experiment runs
        check_experiment(name, args.out, args.steps, args.overwrite, args.tiny)
    for name in names:
        res = run_experiment(
            name, args.out, steps=args.steps, progress=not args.no_progress, overwrite=args.overwrite, tiny=args.tiny
        )
        print(res["markdown"])
        print(f"wrote {', '.join(res['files'])}")
    return 0


# The demo's recipe: the copy-reverse preset (3+3 layers, d_model 128, 8 heads, d_ff 512) trained
# as in the acceptance test (tests/test_training_slow.py): StepLR from 1e-3 halved every 400 steps,
# fresh training data, no dropout or label smoothing. About 2.5 minutes on 2 quiet cores.
DEMO_MODEL = dict(dropout=0.0)
DEMO_TRAIN = dict(
    steps=2000,
    batch_size=32,
    schedule="step",
    lr=1e-3,
    step_size=400,
    gamma=0.5,
    train_size=50000,
    eval_size=200,
    eval_every=500,
    checkpoint_every=500,
    label_smoothing=0.0,
)


def cmd_demo(args) -> int:
    from .training import default_configs, load_checkpoint, train

    model_cfg, train_cfg = default_configs("copy-reverse")
    model_cfg = model_cfg.replace(**DEMO_MODEL)
    train_cfg = train_cfg.replace(**DEMO_TRAIN)
    if args.steps is not None:
        train_cfg = train_cfg.replace(steps=args.steps)
    t0 = time.perf_counter()

    def announce():
        print(
            f"demo: training copy-reverse (target = input + reversed input) for {train_cfg.steps} steps; "
            f"model {json.dumps(model_cfg.to_dict())}"
        )

    res = train(
        model_cfg,
        train_cfg,
        args.out,
        resume=args.resume,
        progress=not args.no_progress,
        overwrite=args.overwrite,
        on_start=announce,
        resume_hint=_resume_command("demo", args.out),
    )
    m = res.metrics
    if res.nothing_to_do:
        print(f"demo: the run in {args.out!r} is already trained ({res.step} steps); reporting it again")
    spent = f"{res.total_wall_time:.0f} s of training" + (f" over {res.runs} runs" if res.runs > 1 else "")
    print(
        f"\nheld-out ({m['num_examples']} sequences never seen in training): exact match {m['exact_acc']:.1%}, "
        f"token accuracy {m['token_acc']:.1%}, loss {m['loss']:.4f}  [{spent}]"
    )
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


def main(argv=None) -> int:
    """Run one command; a user error exits with status 2 and one line on stderr (SystemExit), a diverged
    run with EXIT_DIVERGED (3) and one line, Ctrl-C with 130."""
    args = build_parser().parse_args(argv)
    from .training import NonFiniteError

    reuse_freed_memory()  # every command trains or runs a model: freed arrays are reused step to step

    try:
        return args.run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except NonFiniteError as e:
        # train has --allow-nonfinite; the demo's and experiments' recipes are fixed and should not diverge
        go_on = "--allow-nonfinite" if args.command == "train" else None
        print(f"{args.parser.prog}: error: {e.message(go_on)}", file=sys.stderr)
        return EXIT_DIVERGED
    except (ValueError, TypeError, OSError) as e:
        args.parser.error(str(e))
