"""Op microbenchmarks: minitensor against PyTorch eager, one op at a time, forward and forward+backward.

The cases are the op table (benchmarks/op_cases.py): one line per op and size class, one function
written once for both libraries, inputs from the same seeded arrays, a random upstream gradient.
The forward outputs are compared with `error_stats` so a ratio is only reported for ops that
compute the same thing.

Each side times the table in its own worker process (benchmarks/worker.py), whole passes
alternating A B A B. Run alone: `python -m benchmarks.ops [--quick] [--sizes small large] [--threads 2]`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from benchmarks.cli import SETTLE_MAX
from benchmarks.env import WAIT_POLICIES, facts_line
from benchmarks.op_cases import CASES, Index, Mask, selected_cases
from benchmarks.plots import plot_ops
from benchmarks.report import ops_markdown
from benchmarks.timing import alternate, ratio_stats, summarize
from benchmarks.worker import Worker
from minitensor.serialization import atomic_write
from minitensor.testing import OP_RTOL
from transformer_np.cli import OneLineParser
from transformer_np.cliutil import THREADS_MAX, integer, interrupted, interrupts_as_such, number, sigint_deferred


def run_ops(
    workers: dict, checker, cases: list[int], rounds: int, target_ms: float = 5.0, settle_s: float = 0.0
) -> list[dict]:
    """Time op cases on both sides, each in its worker process, alternating whole passes A B A B.

    One pass times every case once (forward and forward+backward, each a loop of calls calibrated
    to ~target_ms); `rounds` passes per side. Ratios are medians of per-pass ratios. `checker`
    (a worker hosting both sides) compares the forward outputs.
    """
    passes = alternate(workers, {"op": "ops", "cases": cases, "target_ms": target_ms}, rounds, settle_s)
    max_rel = checker.request({"op": "ops_check", "cases": cases})
    rows = []
    for i in cases:
        case, k = CASES[i], str(i)
        st = {
            f"{side}_{p}": summarize([r[k][f"{p}_ms"] for r in passes[side]])
            for side in ("numpy", "torch")
            for p in ("fwd", "fb")
        }
        ratios = {
            p: ratio_stats([a[k][f"{p}_ms"] for a in passes["numpy"]], [b[k][f"{p}_ms"] for b in passes["torch"]])
            for p in ("fwd", "fb")
        }
        rows.append(
            {
                "op": case.name,
                "size": case.size,
                "shapes": " ".join(
                    "x".join(map(str, s.shape if isinstance(s, (Index, Mask)) else s)) for s in case.inputs
                ),
                "numpy_fwd_ms": st["numpy_fwd"].median_ms,
                "torch_fwd_ms": st["torch_fwd"].median_ms,
                "numpy_fb_ms": st["numpy_fb"].median_ms,
                "torch_fb_ms": st["torch_fb"].median_ms,
                "ratio_fwd": ratios["fwd"]["median"],
                "ratio_fb": ratios["fb"]["median"],
                "ratio_fb_spread": ratios["fb"],
                "numpy_fb_iqr_ms": st["numpy_fb"].iqr_ms,
                "torch_fb_iqr_ms": st["torch_fb"].iqr_ms,
                "fwd_max_rel": max_rel[k],
                "fwd_ok": bool(max_rel[k] <= OP_RTOL["float32"]),
            }
        )
    return rows


def build_parser() -> argparse.ArgumentParser:
    names = sorted({c.name for c in CASES})
    ap = OneLineParser(
        prog="python -m benchmarks.ops", description="minitensor vs PyTorch per-op timings, each in its own process"
    )
    ap.add_argument("--quick", action="store_true", help="fewer rounds, shorter samples")
    ap.add_argument(
        "--sizes",
        nargs="+",
        default=["small", "large"],
        choices=["small", "large"],
        help="size classes to time (default: small, large)",
    )
    ap.add_argument(
        "--ops",
        nargs="+",
        default=None,
        choices=names,
        metavar="OP",
        help=f"only these op names, from {{{', '.join(names)}}} (default: all)",
    )
    ap.add_argument("--threads", type=integer(1, THREADS_MAX), default=2, help="threads for both sides (default: 2)")
    ap.add_argument(
        "--settle",
        type=number(0.0, SETTLE_MAX),
        default=0.2,
        help="seconds between handing the cores from one side's process to the other's (default: 0.2)",
    )
    ap.add_argument(
        "--wait-policy",
        default="default",
        choices=sorted(WAIT_POLICIES),
        help="idle BLAS/OpenMP workers: spin or sleep (see benchmarks/env.py) (default: default)",
    )
    ap.add_argument("--out", default="benchmarks/results", help="output folder (default: benchmarks/results)")
    return ap


def main(argv: list[str] | None = None) -> None:
    ap = build_parser()
    args = ap.parse_args(argv)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        ap.error(f"--out {args.out!r} is a file, expected a directory")
    try:
        with interrupts_as_such():
            _run(args)
    except KeyboardInterrupt:  # one line, 130; the three files are all written or none replaced
        sys.exit(interrupted("python -m benchmarks.ops"))


def _run(args) -> None:
    workers = {side: Worker(side, args.threads, args.wait_policy) for side in ("numpy", "torch")}
    checker = Worker("both", args.threads, args.wait_policy)
    try:
        facts = checker.request({"op": "facts"})
        print(facts_line(facts))
        rows = run_ops(
            workers,
            checker,
            selected_cases(args.sizes, args.ops),
            rounds=5 if args.quick else 15,
            target_ms=2.0 if args.quick else 5.0,
            settle_s=args.settle,
        )
    except BaseException:  # Ctrl-C or a failure: stop the workers now, not after their current request
        for w in (*workers.values(), checker):
            w.close(kill=True)
        raise
    for w in (*workers.values(), checker):
        w.close()
    table = ops_markdown(rows)
    print(table)
    os.makedirs(args.out, exist_ok=True)
    with sigint_deferred():
        with atomic_write(os.path.join(args.out, "ops.md")) as f:
            f.write(
                f"# Op microbenchmarks\n\n{facts_line(facts)}\n\nEach side in its own process; ratios are "
                f"medians of per-pass ratios.\n\n{table}\n"
            )
        with atomic_write(os.path.join(args.out, "ops.json")) as f:
            json.dump({"machine": facts, "ops": rows}, f, indent=1)
        plot_ops(rows, os.path.join(args.out, "ops.png"))
    print(f"wrote {args.out}/ops.md, ops.json, ops.png")


if __name__ == "__main__":
    main()
