"""The fused ops' floor in NumPy: the same op on bare arrays in the fewest passes, beside PyTorch and the engine.

    python -m benchmarks.fused_floor [--threads 1] [--rounds 5] [--ops gelu layer_norm ...]

The target: GELU, layer norm, softmax, log_softmax and cross-entropy at most 1.5x PyTorch's
forward+backward, on the op table's large shapes (benchmarks/op_cases.py). benchmarks/bare_ops.py writes each on bare
NumPy arrays in the fewest whole-array passes found, with nothing of the engine between the formula and NumPy. Its
time over PyTorch's is a floor for the engine's ratio; at N threads the floor is that over N, as if every NumPy pass
were split over the threads without cost (NumPy's own passes run on one). Where the floor exceeds the target in three
rounds of four, no NumPy formula of as many passes meets it (measured: docs/decisions/003-fused-ops-numpy-floor.md).

Each round, in separate processes (benchmarks/worker.py): the engine's and the bare formula's forward and
forward+backward in the numpy worker, PyTorch's in its own, each a loop of calls calibrated to about --target-ms
(benchmarks/ops.py's method). Ratios are per round; the table gives medians [IQR]. The bare forward is checked
against the engine's first (float32 OP_RTOL); its gradients against PyTorch's in tests/benchmarks/test_fused_floor.py.
"""

from __future__ import annotations

import sys
import time

from benchmarks.env import thread_env_from_argv

if __name__ == "__main__":
    # Thread counts must be in the environment before numpy/torch load (benchmarks/env.py loads neither).
    thread_env_from_argv(sys.argv, default=1)

from benchmarks.bare_ops import BARE
from benchmarks.op_cases import CASES, selected_cases
from benchmarks.rounds import SETTLE_S, add_flags, cell, report, started
from benchmarks.timing import summarize
from minitensor.testing import OP_RTOL
from transformer_np.cli import OneLineParser
from transformer_np.cliutil import number

TARGET = 1.5  # these ops' forward+backward at most 1.5x PyTorch's
SIDES = ("numpy", "bare", "torch")  # the engine, the bare formula (both in the numpy worker), PyTorch


class FloorError(RuntimeError):
    pass


def refuse_wrong(errors: dict) -> None:
    """Raise FloorError naming each case whose bare forward differs from the engine's ({case: max rel error}) by
    more than float32's OP_RTOL: a floor must compute the op, so such a formula is never timed."""
    bad = {CASES[int(i)].name: e for i, e in errors.items() if not e <= OP_RTOL["float32"]}
    if bad:
        worst = ", ".join(f"{name} (max rel {e:.1e})" for name, e in bad.items())
        raise FloorError(
            f"the bare formula differs from the engine's forward, expected at most {OP_RTOL['float32']:g}: {worst}"
        )


def measure(threads: int, rounds: int, names: list, target_ms: float) -> dict:
    cases = selected_cases(["large"], names)
    with started(("numpy", "torch"), threads) as workers:
        errors = workers["numpy"].request({"op": "ops_check", "cases": cases, "sides": ["bare", "numpy"]})
        refuse_wrong(errors)
        rows = []
        for _ in range(rounds):
            row = {}
            for side in SIDES:
                worker = workers["torch" if side == "torch" else "numpy"]
                if side != "bare":
                    time.sleep(SETTLE_S)
                row[side] = worker.request({"op": "ops", "side": side, "cases": cases, "target_ms": target_ms})
            rows.append(row)
    ops = []
    for i in cases:
        k = str(i)
        per_round = [{s: r[s][k] for s in SIDES} for r in rows]
        ops.append(
            {
                "op": CASES[i].name,
                "shapes": " ".join("x".join(map(str, s)) for s in CASES[i].inputs if isinstance(s, tuple)),
                "fwd_max_rel_bare": errors[k],
                "rounds": per_round,
            }
        )
    return {"threads": threads, "rounds": rounds, "target_ms": target_ms, "target": TARGET, "ops": ops}


def ratios(op: dict, side: str, threads: int = 1, p: str = "fb_ms") -> list[float]:
    """Per-round time of `side` over PyTorch's (divided by `threads`: the floor's ideal split)."""
    return [r[side][p] / r["torch"][p] / threads for r in op["rounds"]]


def markdown(res: dict) -> str:
    n = res["threads"]
    lines = [
        f"Fused ops, forward+backward, float32, {n} thread{'s' if n > 1 else ''}: the engine and the same op on bare "
        f"NumPy arrays (benchmarks/bare_ops.py) over PyTorch, median of {res['rounds']} rounds [IQR], a process per "
        "library.",
        "",
        f"| op | shape | PyTorch us | engine / PyTorch | bare / PyTorch | floor at {n} thread{'s' if n > 1 else ''} | "
        f"{res['target']:g}x |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for op in res["ops"]:
        floor = ratios(op, "bare", n)
        torch_us = summarize([r["torch"]["fb_ms"] * 1e3 for r in op["rounds"]]).median_ms
        verdict = "out of reach" if summarize(floor).q1_ms > res["target"] else "within the floor"
        lines.append(
            f"| {op['op']} | {op['shapes']} | {torch_us:.0f} | {cell(ratios(op, 'numpy'), 2)} | "
            f"{cell(ratios(op, 'bare'), 2)} | {cell(floor, 2)} | {verdict} |"
        )
    lines += [
        "",
        f"floor = bare / PyTorch / {n} (every NumPy pass split over the threads at no cost); out of reach: the floor "
        f"exceeds {res['target']:g} in three rounds of four (its lower quartile).",
    ]
    return "\n".join(lines)


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="python -m benchmarks.fused_floor", description=__doc__.split("\n\n")[0])
    add_flags(p, threads=1, rounds=5, rounds_help="rounds, each library once a round", config=False)
    p.add_argument(
        "--ops",
        nargs="+",
        choices=sorted(BARE),
        help="the fused ops to time (default: all five)",
    )
    p.add_argument(
        "--target-ms", type=number(0.1), default=5.0, help="each figure's loop of calls, ms (default: %(default)s)"
    )
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return report(
            "python -m benchmarks.fused_floor",
            lambda: measure(args.threads, args.rounds, args.ops or sorted(BARE), args.target_ms),
            markdown,
            args.json,
        )
    except FloorError as exc:
        print(f"python -m benchmarks.fused_floor: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
