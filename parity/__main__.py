"""The command line: `python -m parity {report, summary}`.

    report    transformer_np against the PyTorch reference, module by module: forward outputs,
              attention weights, loss, every gradient, parameters after N optimizer steps.
              Prints the table, writes JSON and Markdown to --out, exits 1 when a check fails.
    summary   the same checks, one line per group (embeddings, encoder, decoder, logits, loss,
              grads, after-steps), for a trained checkpoint (--checkpoint runs/demo) or a preset.

Bad input (unknown config, unsupported dtype, --device cuda without a GPU, a checkpoint that is
not one, mismatched state dicts) prints one line naming what was expected and exits 2.
"""
from __future__ import annotations

import argparse
import sys


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", default="float64", help="float64 (default) or float32")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available; default)")
    p.add_argument("--steps", type=int, default=3, help="optimizer steps checked after the first backward (default 3)")
    p.add_argument("--batch-size", type=int, default=None, help="batch size (default: the preset's reference batch)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trajectory", default="auto",
                   help="free (each side trains on its own gradients), lockstep (transformer_np takes torch's "
                        "gradients after they are compared, each step) or auto (default: free in float64, "
                        "lockstep in float32; see parity/report.py run_report)")
    p.add_argument("--out", default=None, help="directory for the JSON and Markdown reports")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m parity", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("report", help="layer-by-layer parity of transformer_np against PyTorch")
    p.add_argument("--config", default="copy-reverse", help="a preset name from transformer_np.config.PRESETS")
    p.add_argument("--norm-first", action="store_true", help="pre-norm layers (default: post-norm, the paper's)")
    p.add_argument("--final-norm", action="store_true", help="a LayerNorm after each stack")
    p.add_argument("--activation", default=None, help="relu or gelu (default: the preset's)")
    p.add_argument("--dropout", type=float, default=None,
                   help="dropout rate (default: the preset's); > 0 is checked with identical masks on both sides")
    p.add_argument("--positional", default=None, help="sinusoidal or learned (default: the preset's)")
    p.add_argument("--tie-embeddings", action="store_true")
    p.add_argument("--failures-only", action="store_true", help="print only the failing rows and the summary")
    _common(p)
    p.set_defaults(out="runs/parity")

    p = sub.add_parser("summary", help="worst error per module group, for a checkpoint or a preset")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="a transformer_np run directory or checkpoint file (e.g. runs/demo)")
    src.add_argument("--config", help="a preset name from transformer_np.config.PRESETS")
    _common(p)
    return parser


def cmd_report(args) -> int:
    from .report import run_report
    report = run_report(args.config, args.dtype, args.device, steps=args.steps,
                        norm_first=True if args.norm_first else None, activation=args.activation,
                        dropout=args.dropout, final_norm=True if args.final_norm else None,
                        positional=args.positional, tie_embeddings=True if args.tie_embeddings else None,
                        batch_size=args.batch_size, seed=args.seed, trajectory=args.trajectory)
    m = report.meta
    print(f"parity report: {m['config']} {m['dtype']} on {m['device']}, {m['batch']}, {m['steps']} steps "
          f"({m['trajectory']}), "
          f"dropout {m['model']['dropout']}, norm_first={m['model']['norm_first']}, "
          f"activation={m['model']['activation']}")
    print(report.table(only_failures=args.failures_only))
    print()
    print(report.summary_table())
    if m.get("relu_branches_aligned"):
        print(f"note: {m['relu_branches_aligned']} ReLU input(s) within round-off of 0 took different branches; "
              f"torch's were aligned to transformer_np's (see parity/report.py, ReluBranchAligner)")
    if args.out:
        jpath, mpath = report.write(args.out)
        print(f"wrote {jpath} and {mpath}")
    failed = report.failures()
    print(f"{'PASS' if report.passed else 'FAIL'}: {len(report.rows) - len(failed)}/{len(report.rows)} checks within tolerance")
    return 0 if report.passed else 1


def cmd_summary(args) -> int:
    from .report import run_summary
    report, source = run_summary(checkpoint=args.checkpoint, config=args.config, dtype=args.dtype,
                                 device=args.device, steps=args.steps, batch_size=args.batch_size, seed=args.seed,
                                 trajectory=args.trajectory)
    m = report.meta
    print(f"parity summary: {source}, {m['dtype']} on {m['device']}, {m['batch']}, {m['steps']} steps ({m['trajectory']})")
    print(report.summary_table())
    if args.out:
        jpath, mpath = report.write(args.out)
        print(f"wrote {jpath} and {mpath}")
    print(f"{'PASS' if report.passed else 'FAIL'}: transformer_np matches PyTorch "
          f"{'in every' if report.passed else 'NOT in every'} check ({len(report.rows)} checks)")
    return 0 if report.passed else 1


def main(argv=None) -> int:
    from .report import DeviceError
    args = build_parser().parse_args(argv)
    try:
        return {"report": cmd_report, "summary": cmd_summary}[args.command](args)
    except (ValueError, TypeError, DeviceError, FileNotFoundError) as e:
        print(f"python -m parity {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
