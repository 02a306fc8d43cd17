"""The command line: `python -m parity {report, summary, gradcheck, ddp, compare, view}`.

    report    transformer_np against the PyTorch reference, module by module: forward outputs,
              attention weights, loss, every gradient, a Hessian-vector product, forward mode (J v and
              H v by forward over reverse, against torch's forward AD), parameters after N optimizer steps.
              With --model gpt2 or llama, the decoder-only GPT against its twin parity.gpt instead: every
              submodule's output, every gradient, N AdamW steps of its training recipe, cached generation
              (parity/gpt/report.py). Prints the table, writes JSON and Markdown to --out, exits 1 when a
              check fails.
    summary   the same checks, one line per group (embeddings, encoder, decoder, logits, loss,
              grads, hvp, forward-mode, after-steps), for a trained checkpoint (--checkpoint runs/demo) or a preset.
    gradcheck the whole Transformer's backward and forward mode against finite differences in float64,
              every parameter at once in one random direction; on a failure, names the first primitive
              whose rule disagrees (parity/gradcheck.py). Exits 1 when it fails.
    ddp       minitensor's DistributedDataParallel against torch's DDP (gloo) on N ranks, float64: each
              rank's logits, the loss, the averaged gradients, the parameters after each Adam step
              (`mpiexec -n 2 python -m parity ddp`, or `python -m parity ddp --nproc 2`; parity/ddp.py).
    compare   any PyTorch model file against itself run on minitensor (minitensor.compat), module by module:
              every submodule's output, every gradient, the weights after N optimizer steps, the first module
              that differs named (`python -m parity compare model.py:GPT --kwargs '{...}' --input-shape 2,16
              --input-dtype long`; parity/compare.py). Exits 1 when a row exceeds its tolerance, or when the model
              runs on torch and not on minitensor (one line naming what failed).
    view      one self-contained web page of a step's backward graph, each module output's and parameter's
              gradient against the twin (or finite differences), the first module where they part, for a preset
              (--config), a run (--checkpoint), a GPT shape (--model) or any model file compare builds (--file
              FILE.py:CLASS with compare's --kwargs, --input-shape, ...; parity/view/, docs/parity-view.md).

Bad input (unknown config, unsupported dtype, --device cuda without a GPU, a checkpoint that is
not one, mismatched state dicts, a number out of range or not finite; for compare and view --file a file without
the class, arguments that do not build it, an input the model refuses on torch, parameter names that differ between
the two runs, malformed --kwargs or --input-shape) prints one line naming what was expected and exits 2. Ctrl-C
prints one line and exits 130; the report files are written whole or not at all.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap

from minitensor.compat import NotInMinitensor
from minitensor.nn.parallel import mpiexec_command, require_mpi
from transformer_np.cli import OneLineParser
from transformer_np.cliutil import SEED_MAX, integer, interrupted, interrupts_as_such, number
from transformer_np.config import PRESETS
from transformer_np.parallel import launched_world_size, shard_rows

from . import compare, compare_options, ddp, gradcheck, render
from .gpt.report import MODELS, GptReportConfig, run_gpt_report
from .placement import AGAINST, NP_DEVICES, DeviceError
from .report import DEVICES, DTYPES, TRAJECTORIES, ReportConfig, run_report, run_summary
from .view import cli as view_cli

# The report's options that shape the encoder-decoder only: refused beside --model (a GPT has its own shape).
ENCODER_DECODER_ONLY = (
    "config",
    "norm_first",
    "final_norm",
    "activation",
    "dropout",
    "attention",
    "positional",
    "tie_embeddings",
    "activation_checkpointing",
)


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help, wrapped without breaking a word at its hyphen (a preset name stays whole)."""

    def _split_lines(self, text, width):
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def _common(p: argparse.ArgumentParser, out_default: str | None) -> None:
    p.add_argument(
        "--dtype",
        default="float64",
        choices=sorted(DTYPES),
        help="floating-point type of both sides (default: %(default)s)",
    )
    p.add_argument(
        "--device",
        default="auto",
        choices=DEVICES,
        help="where the PyTorch reference runs; auto = cuda when available (default: %(default)s)",
    )
    p.add_argument(
        "--steps",
        type=integer(0),
        default=3,
        help="optimizer steps checked after the first backward (default: %(default)s)",
    )
    p.add_argument(
        "--batch-size",
        type=integer(1),
        default=None,
        help="sentences per batch (default: the preset's reference batch; 16 for a checkpoint)",
    )
    p.add_argument(
        "--seed",
        type=integer(0, SEED_MAX),
        default=0,
        help="seed of the weights, batches and dropout masks, 0 to 2**64-1 (default: %(default)s)",
    )
    p.add_argument(
        "--trajectory",
        default="auto",
        choices=TRAJECTORIES,
        help="free: each side trains on its own gradients; lockstep: transformer_np takes torch's "
        "gradients after they are compared, each step; auto: free in float64, lockstep in "
        "float32 (default: %(default)s)",
    )
    p.add_argument(
        "--out",
        default=out_default,
        help="directory for the JSON and Markdown reports (default: "
        + ("%(default)s)" if out_default else "none written)"),
    )


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m parity", description=__doc__.split("\n\n")[0], formatter_class=_HelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{report,summary,gradcheck,ddp,compare,view}")
    presets = sorted(PRESETS)

    p = sub.add_parser(
        "report",
        formatter_class=_HelpFormatter,
        help="layer-by-layer parity of transformer_np against PyTorch",
        description="Every submodule's output, attention weights, the loss, every gradient and the "
        "parameters after N optimizer steps, transformer_np against PyTorch.",
    )
    p.add_argument(
        "--model",
        default=None,
        choices=MODELS,
        help="check the decoder-only GPT in this shape at nanoGPT's baby size against its twin parity.gpt, "
        "instead of the encoder-decoder; the encoder-decoder's shape options are then refused (default: none)",
    )
    p.add_argument(
        "--config",
        default=None,
        choices=presets,
        help="the preset (model sizes, from transformer_np/config.py) whose model is checked; presets, not "
        "train --task's tasks: reverse, sort and addition train with copy-reverse's (default: copy-reverse)",
    )
    p.add_argument("--norm-first", action="store_true", help="pre-norm layers (default: the preset's placement)")
    p.add_argument("--final-norm", action="store_true", help="a LayerNorm after each stack (default: the preset's)")
    p.add_argument(
        "--activation", default=None, choices=("relu", "gelu"), help="feed-forward activation (default: the preset's)"
    )
    p.add_argument(
        "--dropout",
        type=number(0.0, 1.0, high_open=True),
        default=None,
        help="dropout rate; > 0 is checked with identical masks on both sides (default: the preset's)",
    )
    p.add_argument(
        "--attention",
        default=None,
        choices=("dense", "tiled"),
        help="attention: dense weights or torch's / minitensor's SDPA (tiled); tiled skips the attention-weight rows, "
        "the Hessian-vector product and the attention dropout (default: the preset's, dense)",
    )
    p.add_argument(
        "--positional",
        default=None,
        choices=("sinusoidal", "learned"),
        help="positional encoding (default: the preset's)",
    )
    p.add_argument(
        "--tie-embeddings",
        action="store_true",
        help="share the target embedding with the output projection (default: the preset's)",
    )
    p.add_argument(
        "--activation-checkpointing",
        action="store_true",
        help="recompute each encoder/decoder layer in the backward (mt.utils.checkpoint beside "
        "torch.utils.checkpoint; default: off)",
    )
    p.add_argument(
        "--failures-only", action="store_true", help="print only the failing rows (or 'no failures') and the summary"
    )
    p.add_argument(
        "--np-device",
        default="cpu",
        choices=NP_DEVICES,
        help="where transformer_np runs: cuda is CuPy on a GPU, or the fake device with MINITENSOR_FAKE_CUDA=1 "
        "(docs/gpu.md) (default: %(default)s)",
    )
    p.add_argument(
        "--against",
        default="torch",
        choices=AGAINST,
        help="the reference: torch (on --device), or np-cpu: transformer_np itself on the CPU, to check "
        "--np-device cuda against the same engine (default: %(default)s)",
    )
    _common(p, "runs/parity")

    p = sub.add_parser(
        "summary",
        formatter_class=_HelpFormatter,
        help="worst error per module group, for a checkpoint or a preset",
        description="The report's checks, one line per group of the model, for a trained "
        "transformer_np checkpoint or a preset's fresh model.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="a transformer_np run directory or checkpoint file (e.g. runs/demo)")
    src.add_argument(
        "--config", choices=presets, help="a preset (model sizes, not a train --task) whose fresh model is checked"
    )
    _common(p, None)

    p = sub.add_parser(
        "ddp",
        formatter_class=_HelpFormatter,
        help="minitensor's DistributedDataParallel against torch's DDP (gloo), rank by rank",
        description="Run under mpiexec (or with --nproc): on every rank, the shard's logits, the global loss, "
        "the averaged gradients and the parameters after each Adam step, minitensor's DDP against torch's, float64.",
    )
    p.add_argument("--config", default="copy-reverse", choices=presets, help="the preset (default: %(default)s)")
    p.add_argument("--steps", type=integer(1), default=3, help="optimizer steps (default: %(default)s)")
    p.add_argument("--batch-size", type=integer(1), default=8, help="the global batch (default: %(default)s)")
    p.add_argument("--seed", type=integer(0, SEED_MAX), default=0, help="seed (default: %(default)s)")
    p.add_argument(
        "--nproc",
        type=integer(1),
        default=1,
        help="launch N ranks under mpiexec; 1: run as started (default: %(default)s)",
    )
    p.add_argument("--out", default=None, help="directory for ddp_<N>ranks.json (default: none written)")

    p = sub.add_parser(
        "gradcheck",
        formatter_class=_HelpFormatter,
        help="the whole model's backward and forward mode against finite differences (float64)",
        description="The training loss's derivative along one random direction of all parameters at once, by "
        "reverse mode, by forward mode and by finite differences, in float64 (gradcheck's fast mode on the "
        "whole Transformer); on a failure, the first primitive whose rule disagrees is named.",
    )
    p.add_argument("--config", default="copy-reverse", choices=presets, help="the preset (default: %(default)s)")
    p.add_argument(
        "--mode",
        default="both",
        choices=("both", *gradcheck.MODES),
        help="which derivative to check: reverse (backward), forward (forward mode) or both (default: %(default)s)",
    )
    p.add_argument(
        "--batch-size",
        type=integer(1),
        default=None,
        help="sentences per batch (default: the preset's reference batch)",
    )
    p.add_argument(
        "--seed",
        type=integer(0, SEED_MAX),
        default=0,
        help="seed of the weights, the batch and the direction, 0 to 2**64-1 (default: %(default)s)",
    )

    p = sub.add_parser(
        "compare",
        formatter_class=_HelpFormatter,
        help="any PyTorch model file against itself run on minitensor, module by module",
        description="Load FILE.py twice (with torch, and with torch mapped to minitensor), build CLASS in both from "
        "--kwargs, copy torch's weights into minitensor's by name, and compare every submodule's output, every "
        "gradient and the weights after N optimizer steps (parity/compare.py).",
    )
    p.add_argument("target", metavar="FILE.py:CLASS", type=compare_options.TARGET, help="the model's file and class")
    compare_options.add_model_options(p, shape_required=True)
    p.add_argument(
        "--dtype",
        default="float64",
        choices=sorted(DTYPES),
        help="floating-point type of both sides (default: %(default)s)",
    )
    p.add_argument("--steps", type=integer(0), default=3, help="optimizer steps after the first backward (default: 3)")
    p.add_argument("--optimizer", default="adamw", choices=compare.OPTIMIZERS, help="(default: %(default)s)")
    p.add_argument(
        "--trajectory",
        default="lockstep",
        choices=compare.TRAJECTORIES,
        help="lockstep: minitensor takes torch's gradients after each step's are compared; free: each side steps on "
        "its own (identically zero gradients then drift apart by up to lr; parity/compare.py) (default: %(default)s)",
    )
    p.add_argument("--seed", type=integer(0, SEED_MAX), default=0, help="seed of weights and inputs (default: 0)")
    view_cli.add_parser(sub, presets, _HelpFormatter)
    return parser


def cmd_compare(args) -> int:
    cc = compare_options.compare_config(
        args,
        args.target,
        dtype=args.dtype,
        steps=args.steps,
        optimizer=args.optimizer,
        seed=args.seed,
        trajectory=args.trajectory,
    )
    try:
        report = compare.run_compare(cc)
    except (NotInMinitensor, compare.MinitensorFailed) as e:  # torch ran it, minitensor did not: a failed comparison
        print(f"python -m parity compare: FAIL: {e}", file=sys.stderr)
        return 1
    print(compare.text(report))
    return 0 if report.passed else 1


def cmd_gradcheck(args) -> int:
    loss_of, params, what = gradcheck.transformer_loss(args.config, seed=args.seed, batch_size=args.batch_size)
    modes = gradcheck.MODES if args.mode == "both" else (args.mode,)
    try:
        result = gradcheck.check_model(loss_of, params, seed=args.seed, modes=modes)
    except NotImplementedError as e:  # a primitive without a forward-mode rule: the check cannot run
        print(f"python -m parity gradcheck: cannot check: {e}", file=sys.stderr)
        return 1
    print(gradcheck.render(result, what, args.seed))
    return 0 if result.passed else 1


def _report_config(args) -> ReportConfig:
    return ReportConfig(
        args.config or "copy-reverse",
        args.dtype,
        args.device,
        args.steps,
        args.trajectory,
        args.seed,
        args.batch_size,
        norm_first=True if args.norm_first else None,
        activation=args.activation,
        attention=args.attention,
        dropout=args.dropout,
        final_norm=True if args.final_norm else None,
        positional=args.positional,
        tie_embeddings=True if args.tie_embeddings else None,
        activation_checkpointing=True if args.activation_checkpointing else None,
        np_device=args.np_device,
        against=args.against,
    )


def _gpt_report_config(args) -> GptReportConfig:
    given = [name for name in ENCODER_DECODER_ONLY if getattr(args, name) not in (None, False)]
    if args.np_device != "cpu" or args.against != "torch":
        given += ["np_device" if args.np_device != "cpu" else "against"]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise ValueError(f"{flag} shapes the encoder-decoder; --model {args.model} takes none of its shape options")
    return GptReportConfig(args.model, args.dtype, args.device, args.steps, args.trajectory, args.seed, args.batch_size)


def cmd_report(args) -> int:
    if args.model is not None:
        report = run_gpt_report(_gpt_report_config(args))
    else:
        report = run_report(_report_config(args))
    print(render.text(report, failures_only=args.failures_only))
    if args.out:
        print("\n".join("wrote " + path for path in render.write(report, args.out)))
    return 0 if report.passed else 1


def cmd_summary(args) -> int:
    report, source = run_summary(
        checkpoint=args.checkpoint,
        config=args.config,
        dtype=args.dtype,
        device=args.device,
        steps=args.steps,
        batch_size=args.batch_size,
        seed=args.seed,
        trajectory=args.trajectory,
    )
    print(f"parity summary: {source}")
    print("\n".join(render.header(report)[1:]))
    print()
    print(render.summary_table(report))
    print()
    print(render.verdict(report))
    if args.out:
        print("\n".join("wrote " + path for path in render.write(report, args.out)))
    return 0 if report.passed else 1


def cmd_ddp(args, argv: list) -> int:
    if args.nproc > 1 and launched_world_size() == 1:  # relaunch this command on N ranks
        shard_rows(args.batch_size, args.nproc, 0)
        require_mpi()
        rest = [a for i, a in enumerate(argv) if a != "--nproc" and (i == 0 or argv[i - 1] != "--nproc")]
        return subprocess.call(mpiexec_command(args.nproc, ["-m", "parity", *rest]))
    try:
        result = ddp.run_ddp_parity(args.steps, args.batch_size, args.seed, args.config)
    except ModuleNotFoundError as e:  # the distributed extra is missing
        raise ValueError(str(e)) from None
    if result is None:  # not rank 0
        return 0
    print(ddp.render(result))
    if args.out:
        print("wrote " + ddp.write(result, args.out))
    return 0 if ddp.passed(result) else 1


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        with interrupts_as_such():
            if args.command == "ddp":
                return cmd_ddp(args, argv)
            commands = {
                "report": cmd_report,
                "summary": cmd_summary,
                "gradcheck": cmd_gradcheck,
                "compare": cmd_compare,
                "view": view_cli.run,
            }
            return commands[args.command](args)
    except KeyboardInterrupt:  # as `python -m transformer_np train`: one line, 130; no report was written
        return interrupted(f"python -m parity {args.command}")
    except (ValueError, TypeError, DeviceError, FileNotFoundError) as e:
        print(f"python -m parity {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
