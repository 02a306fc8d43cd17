"""The time budget of a training step: what the matrix products and the optimizer leave for everything else.

    python -m benchmarks.budget [--config base] [--threads 2] [--rounds 5] [--target 0.9]

The target is a step at most `target` x PyTorch's. Some work no engine on NumPy can make cheaper: the step's
matrix products, at the rate the BLAS reaches on their shapes, and Adam, a few passes over every parameter (memory
bound). If those two alone take longer than the budget, target x PyTorch's step, the target is out of reach
whatever else is made faster; if not, the rest of the budget is what the graph, layer norm, softmax, dropout,
the loss and clipping may cost together (measured: docs/decisions/009-training-step-budget.md).

Each round, in separate processes (benchmarks/worker.py), one after the other:
  - the NumPy side: a training step of transformer_np with the clock read between its phases (`phases`: forward
    and loss, backward, clip, optimizer), the step's products replayed alone (`products`: flops.step_products,
    each on random float32 operands into an output of its own, OpenBLAS through np.matmul), and the config's
    dominant product shape, for the BLAS's best rate (`gemm`);
  - PyTorch: its whole training step, the benchmark's twin and torch.nn.Transformer, each in its own process,
    and the same products replayed with torch's BLAS, for comparison.
The floor is min(products replayed, step FLOPs / best rate) + optimizer + clip: the lower of the two readings of
the products, so that the bound does not rest on the replay's own overheads. Each round's floor is divided by
that round's faster PyTorch step; the table gives medians over rounds [IQR].
"""

from __future__ import annotations

import statistics
import sys
import time

from benchmarks.env import thread_env_from_argv

if __name__ == "__main__":
    # Thread counts must be in the environment before numpy/torch load (benchmarks/env.py loads neither).
    thread_env_from_argv(sys.argv, default=2)

from benchmarks import flops
from benchmarks import workloads as W
from benchmarks.rounds import SETTLE_S, add_flags, cell, median_ms, report, started
from benchmarks.timing import summarize
from transformer_np.cli import OneLineParser
from transformer_np.cliutil import integer

TORCH_SIDES = ("torch", "torch-nn")  # the benchmark's twin and torch.nn.Transformer of the same configuration


def one_round(workers: dict, spec: dict, steps: int, shape: list) -> dict:
    """One round's figures in ms: the NumPy side's phases, its replayed products and best GEMM rate, and each
    PyTorch side's whole step and replayed products."""
    out = {}
    np_worker = workers["numpy"]
    phases = np_worker.request({"op": "phases", "side": "numpy", "config": spec, "rounds": steps})
    out["phases"] = phases
    out["step"] = sum(phases.values())
    out["products"] = median_ms(np_worker, {"op": "products", "side": "numpy", "config": spec, "calls": steps})
    gemm = np_worker.request({"op": "gemm", "side": "numpy", "shape": shape, "calls": 5})["samples_ms"]
    out["gemm_ms"] = min(gemm)  # the best call: the BLAS's rate, not the machine's worst moment
    for side in TORCH_SIDES:
        time.sleep(SETTLE_S)
        req = {"op": "time", "side": side, "config": spec, "workload": "train", "calls": steps, "warmup": 1}
        out[side] = median_ms(workers[side], req)
    req = {"op": "products", "side": "torch", "config": spec, "calls": steps}
    out["torch_products"] = median_ms(workers["torch"], req)
    time.sleep(SETTLE_S)
    return out


def measure(config: str, threads: int, rounds: int, steps: int, target: float) -> dict:
    cfg = W.get_config(config)
    spec = {"name": config}
    shape = list(flops.dominant_gemm(cfg))
    train_gflop = flops.workload_flops(cfg, "train") / 1e9
    gemm_gflop = 2 * shape[0] * shape[1] * shape[2] / 1e9
    with started(("numpy", *TORCH_SIDES), threads) as workers:
        for side, w in workers.items():  # build the models (and warm each side up) before the first round
            w.request({"op": "time", "side": side, "config": spec, "workload": "train", "calls": 1, "warmup": 1})
        rows = [one_round(workers, spec, steps, shape) for _ in range(rounds)]
    for r in rows:
        r["rate_gflops"] = gemm_gflop / (r["gemm_ms"] / 1e3)
        r["products_at_rate"] = train_gflop / r["rate_gflops"] * 1e3
        r["torch_step"] = min(r[s] for s in TORCH_SIDES)
        r["floor"] = min(r["products"], r["products_at_rate"]) + r["phases"]["optimizer"] + r["phases"]["clip"]
        r["floor_ratio"] = r["floor"] / r["torch_step"]
        r["step_ratio"] = r["step"] / r["torch_step"]
    return {
        "config": config,
        "threads": threads,
        "rounds": rounds,
        "steps": steps,
        "target": target,
        "train_gflop": train_gflop,
        "gemm_shape": shape,
        "rows": rows,
    }


ROWS = [  # (label, how to read a round's figure)
    ("PyTorch step, the benchmark's twin", lambda r: r["torch"]),
    ("PyTorch step, torch.nn.Transformer", lambda r: r["torch-nn"]),
    ("the faster PyTorch step", lambda r: r["torch_step"]),
    ("minitensor step (its phases summed)", lambda r: r["step"]),
    ("  forward and loss", lambda r: r["phases"]["forward+loss"]),
    ("  backward", lambda r: r["phases"]["backward"]),
    ("  clip", lambda r: r["phases"]["clip"]),
    ("  optimizer (Adam)", lambda r: r["phases"]["optimizer"]),
    ("the step's products replayed, NumPy (OpenBLAS)", lambda r: r["products"]),
    ("the step's products at the best GEMM rate", lambda r: r["products_at_rate"]),
    ("the step's products replayed, PyTorch", lambda r: r["torch_products"]),
    ("floor: products + optimizer + clip", lambda r: r["floor"]),
]


def markdown(res: dict) -> str:
    rows, target = res["rows"], res["target"]
    rate = statistics.median(r["rate_gflops"] for r in rows)
    budget = [target * r["torch_step"] for r in rows]
    left = [b - r["floor"] for b, r in zip(budget, rows)]
    lines = [
        f"Training step budget, {res['config']}, {res['threads']} thread{'s' if res['threads'] > 1 else ''}: "
        f"{res['train_gflop']:.1f} GFLOP of products a step; NumPy's best float32 GEMM rate on "
        f"{'x'.join(map(str, res['gemm_shape']))} (M x K x N) {rate:.0f} GFLOP/s; median of {res['rounds']} rounds "
        f"of {res['steps']} steps [IQR], separate processes.",
        "",
        "| what | ms a step |",
        "|---|---|",
    ]
    lines += [f"| {label} | {cell([get(r) for r in rows])} |" for label, get in ROWS]
    lines += [
        f"| budget: {target:g} x the faster PyTorch step | {cell(budget)} |",
        f"| left for everything else (budget - floor) | {cell(left)} |",
        "",
        f"floor / faster PyTorch step: {cell([r['floor_ratio'] for r in rows], 2)}; "
        f"minitensor step / faster PyTorch step: {cell([r['step_ratio'] for r in rows], 2)}",
    ]
    if summarize([r["floor_ratio"] for r in rows]).q1_ms > target:  # the table's lower quartile, as its IQR
        verdict = f"{target:g}x is out of reach: the products and the optimizer alone exceed it in three rounds of four"
    elif statistics.median(left) > 0:
        verdict = f"{target:g}x is within reach: the floor leaves {statistics.median(left):.0f} ms for the rest"
    else:
        verdict = f"{target:g}x is at the floor itself: nothing is left for the rest within the noise"
    lines.append(verdict)
    return "\n".join(lines)


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="python -m benchmarks.budget", description=__doc__.split("\n\n")[0])
    add_flags(p, threads=2, rounds=5, rounds_help="rounds, each side once a round")
    p.add_argument("--steps", type=integer(1), default=3, help="steps timed per request (default: %(default)s)")
    p.add_argument("--target", type=float, default=0.9, help="the ratio to PyTorch's step (default: %(default)s)")
    return p


def main(argv=None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if not args.target > 0:  # NaN too
        p.error(f"--target: expected a ratio > 0, got {args.target}")
    compute = lambda: measure(args.config, args.threads, args.rounds, args.steps, args.target)
    return report("python -m benchmarks.budget", compute, markdown, args.json)


if __name__ == "__main__":
    sys.exit(main())
