"""The command line: `python -m transformer_np {train, decode, plot, experiment, demo, gpt}`.

    train       train a task's preset (every ModelConfig/TrainConfig field is a flag), --resume to continue
    decode      greedy or beam decoding of one input with a trained checkpoint
    plot        every figure of plots.py for a checkpoint and a sample input (figures.py)
    experiment  heads | layers | positional | beam | residual | curvature | memory | all (experiments.py)
    demo        train the copy-reverse preset (3+3 layers, d_model 128), report, decode, plot (its time:
                docs/decisions/028-demo-and-experiment-lengths.md)
    gpt         train | sample: the decoder-only models (transformer_np/gpt/cli.py)

Every user error (a bad flag value, a missing or damaged checkpoint or history, an output that
would overwrite a run) is one line on stderr and exit status 2, before anything is printed or written.
Ctrl-C during training finishes the step, saves a checkpoint and exits with status 130.
A run whose loss or gradient norm becomes NaN or infinite stops at that step before its update,
keeps its last finite checkpoint, says so in one line and exits with status 3 (EXIT_DIVERGED), unless
`train --allow-nonfinite`. Exit statuses: 0 done, 1 an unexpected crash (a bug: Python's traceback),
2 refused before any work, 3 diverged, 130 interrupted.

This file is the parser and `main`; what each command does is in commands.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from minitensor.allocator import reuse_freed_memory

from .cliutil import OneLineParser, integer, interrupts_as_such
from .commands import cmd_decode, cmd_demo, cmd_experiment, cmd_plot, cmd_train
from .config import ACTIVATIONS, ATTENTIONS, POSITIONALS, PRESETS, SCHEDULES, ModelConfig, TrainConfig
from .data import TASKS
from .gpt.cli import add_gpt_command
from .training import NonFiniteError

__all__ = ["EXIT_DIVERGED", "OneLineParser", "build_parser", "main"]

# A diverged run is neither a user error refused before any work (2) nor a crash (1, a traceback):
# steps ran and the run directory holds what they left, so scripts can tell it apart.
EXIT_DIVERGED = 3


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
    "attention": "attention: dense weights (kept for plots, O(T^2) memory) or FlashAttention-2 tiles (O(T) memory); "
    "a resume cannot switch it",
    "activation_checkpointing": "recompute each encoder/decoder layer in the backward instead of keeping its "
    "activations (less memory, the same numbers; a resume may switch it)",
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
CHOICES = {"activation": ACTIVATIONS, "positional": POSITIONALS, "schedule": SCHEDULES, "attention": ATTENTIONS}
_BOOL_FIELDS = {"norm_first", "final_norm", "tie_embeddings", "activation_checkpointing"}
_PRESET = PRESETS["copy-reverse"]  # the preset whose values --help shows


DEVICE_HELP = (
    "where the model runs: cuda needs CuPy and a GPU (pip install -e '.[gpu]'), or MINITENSOR_FAKE_CUDA=1 for the "
    "fake device; the data stays on the host and checkpoints are host .npz either way"
)


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
        "configuration; only --steps, --eval-every, --checkpoint-every and --activation-checkpointing may change)",
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
    run.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help=DEVICE_HELP)
    run.add_argument(
        "--nproc",
        type=integer(1),
        default=1,
        help="data-parallel training on N MPI ranks of this machine: relaunches this command under the mpiexec "
        "of the distributed extra (same as `mpiexec -n N python -m transformer_np train ...`); "
        "N must divide --batch-size (docs/distributed.md)",
    )


def _subcommand(sub, name: str, run, help_text: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help_text, description=help_text, formatter_class=_HelpFormatter)
    p.set_defaults(run=run, parser=p)
    return p


def build_parser() -> argparse.ArgumentParser:
    # matplotlib loads on use, not on `import transformer_np.cli`: parity's and the benchmarks' command lines
    # import OneLineParser from here (start-up time; transformer_np.cliutil is its home)
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
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help=DEVICE_HELP)
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
    p.add_argument("--tiny", action="store_true", help="curvature and memory only: a tiny model, in seconds (CI)")
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
    add_gpt_command(sub, _HelpFormatter)  # gpt train | sample: the decoder-only models (transformer_np/gpt/cli.py)
    return parser


def main(argv=None) -> int:
    """Run one command; a user error exits with status 2 and one line on stderr (SystemExit), a diverged
    run with EXIT_DIVERGED (3) and one line, Ctrl-C with 130."""
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # train --nproc relaunches itself under mpiexec
    reuse_freed_memory()  # every command trains or runs a model: freed arrays are reused step to step

    try:
        with interrupts_as_such():
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
