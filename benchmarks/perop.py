"""The engine's own cost per op: a chain of small ops, timed through the engine and as the bare NumPy calls.

    python -m benchmarks.perop [--quick] [--threads 1] [--rounds 5] [--steps 66] [--shape 4 4]

On a (4, 4) float32 array the arithmetic costs next to nothing, so what the engine adds shows: the chain
x <- exp(c * x + d), `steps` times (three primitives a step: mul, add, exp), then a sum, is timed
  - as the bare NumPy calls (forward), and those plus the backward's NumPy calls written out (forward+backward);
  - through minitensor: under no_grad (the inference path), with the graph recorded, and recorded + backward;
  - through PyTorch eager the same three ways, as a reference (torch.no_grad, recorded, recorded + backward).
The cost per op is (framework time - bare NumPy time of the same calls) / ops, ops = 3 * steps + 1. Each framework
runs in its own process with the bare NumPy chain timed in that same process; rounds alternate minitensor, torch,
minitensor, ...; a round's figure is the median of `calls` calls, and the table gives the median over rounds with
the interquartile range. benchmarks/targets.py checks minitensor's recorded costs against the 10 us target
(docs/decisions/011-cost-per-op.md).
`python -m benchmarks run` reports the same section at each thread count.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time

from benchmarks.env import set_torch_threads, thread_env_from_argv

if __name__ == "__main__":
    # Thread counts must be in the environment before numpy/torch load (benchmarks/env.py loads neither).
    thread_env_from_argv(sys.argv, default=1)

import numpy as np  # after the thread variables

from transformer_np.cli import OneLineParser  # it loads numpy: after them too

MODES = ["untracked", "recorded", "fwd_bwd"]  # no_grad forward, forward recording a graph, forward + backward
LABELS = {"untracked": "forward, no_grad", "recorded": "forward, graph recorded", "fwd_bwd": "forward + backward"}
TARGET_US = 10.0  # the target: at most 10 us per recorded op


def bare_chain(x, c, d, steps: int):
    """The forward as bare NumPy calls: (the values each step's backward reads, the sum)."""
    outs = []
    for _ in range(steps):
        x = np.exp(x * c + d)
        outs.append(x)
    return outs, x.sum()


def bare_fwd_bwd(x, c, d, steps: int):
    """bare_chain, then its backward as bare NumPy calls: d sum / dx, through exp (g * out), add (g), mul (g * c)."""
    outs, _ = bare_chain(x, c, d, steps)
    g = np.ones_like(x)  # d sum / d out
    for out in reversed(outs):
        g = g * out  # exp
        g = g * c  # mul (the add passes g through)
    return g


def child(framework: str, steps: int, shape: tuple, calls: int, threads: int = 1) -> dict:
    """One process, one framework: the median time of `calls` calls of each chain, seconds ({name: s})."""
    rng = np.random.default_rng(0)
    # x <- exp(c x + d) with c in [0.9, 1), d = -1.05 settles near 0.8, where its derivative c x is about 0.75:
    # values stay finite and gradients (0.75^66, 1e-8) normal floats (denormals would time the FPU's slow path)
    a = rng.uniform(0.0, 0.5, shape).astype(np.float32)
    c_arr = rng.uniform(0.9, 1.0, shape).astype(np.float32)
    d_arr = np.full(shape, -1.05, dtype=np.float32)
    if framework == "minitensor":
        import minitensor as lib  # the child loads only the framework it times

        no_grad = lib.no_grad
    else:
        import torch as lib  # as above: this child times torch only

        set_torch_threads(threads)
        no_grad = lib.no_grad
    c, d = lib.tensor(c_arr), lib.tensor(d_arr)

    def chain(x):
        for _ in range(steps):
            x = (x * c + d).exp()
        return x.sum()

    x_plain, x_grad = lib.tensor(a), lib.tensor(a, requires_grad=True)

    def untracked():
        with no_grad():
            chain(x_plain)

    def recorded():
        chain(x_grad)

    def fwd_bwd():
        x_grad.grad = None
        chain(x_grad).backward()

    runs = {
        "bare_forward": lambda: bare_chain(a, c_arr, d_arr, steps),
        "bare_fwd_bwd": lambda: bare_fwd_bwd(a, c_arr, d_arr, steps),
        "untracked": untracked,
        "recorded": recorded,
        "fwd_bwd": fwd_bwd,
    }
    for fn in runs.values():  # warm-up
        fn()
    times = {name: [] for name in runs}
    # The collector is paused while timing, as timeit pauses it: a young-generation collection starts when a count
    # of allocations crosses a threshold, so whether a chain pays one depends on where the count stood when it
    # began, not on what its ops cost (docs/decisions/030-the-core-and-its-speed-devices.md). What the collector
    # has to walk is counted instead: the objects a recorded op keeps alive.
    gc.collect()
    gc.disable()
    try:
        for _ in range(calls):  # interleaved, so drifts of the machine reach every chain alike
            for name, fn in runs.items():
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    finally:
        gc.enable()
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    medians["kept_objects"] = _kept_objects(chain, x_grad)
    return medians


def _kept_objects(chain, x) -> int:
    """How many objects the collector tracks while a recorded chain's graph is alive, beyond those before it."""
    gc.collect()
    before = len(gc.get_objects())
    loss = chain(x)
    kept = len(gc.get_objects()) - before
    del loss
    return kept


def per_op_us(sample: dict, mode: str, ops: int) -> float:
    """What the framework adds per op in one child's sample, microseconds."""
    bare = sample["bare_fwd_bwd"] if mode == "fwd_bwd" else sample["bare_forward"]
    return (sample[mode] - bare) / ops * 1e6


def _quartiles(xs: list) -> tuple:
    xs = sorted(xs)
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def measure(threads: int = 1, rounds: int = 5, steps: int = 66, shape: tuple = (4, 4), calls: int = 30) -> dict:
    """Alternating child processes; per framework and mode: the cost per op (median over rounds, IQR), us."""
    ops = 3 * steps + 1
    samples = {"minitensor": [], "torch": []}
    for _ in range(rounds):
        for framework in samples:
            cmd = [sys.executable, "-m", "benchmarks.perop", "--child", framework, "--threads", str(threads)]
            cmd += ["--steps", str(steps), "--calls", str(calls), "--shape", *map(str, shape)]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            samples[framework].append(json.loads(done.stdout))
    out = {"threads": threads, "ops": ops, "shape": list(shape), "rounds": rounds, "calls": calls, "frameworks": {}}
    for framework, runs in samples.items():
        rows = {}
        for mode in MODES:
            costs = [per_op_us(s, mode, ops) for s in runs]
            q1, q3 = _quartiles(costs)
            rows[mode] = {"median_us": statistics.median(costs), "q1_us": q1, "q3_us": q3, "rounds_us": costs}
        bare = [s["bare_forward"] / ops * 1e6 for s in runs]
        rows["bare_numpy_us"] = statistics.median(bare)
        rows["kept_objects_per_op"] = statistics.median(s["kept_objects"] for s in runs) / ops
        out["frameworks"][framework] = rows
    return out


def markdown(res: dict) -> str:
    """The section's table: per mode, each framework's cost per op (median over rounds, IQR)."""
    shape, bare = "x".join(map(str, res["shape"])), res["frameworks"]["minitensor"]["bare_numpy_us"]
    lines = [
        f"A chain of {res['ops']} ops (mul, add, exp; then a sum) on a ({shape}) float32 array; per op, what the "
        f"framework adds to the bare NumPy calls (their own cost: {bare:.2f} us an op), median of {res['rounds']} "
        "rounds [IQR]. PyTorch eager is a reference, not a target.",
        "",
        "| per op | minitensor | PyTorch |",
        "|---|---|---|",
    ]
    for mode in MODES:
        cells = []
        for framework in ("minitensor", "torch"):
            r = res["frameworks"][framework][mode]
            cells.append(f"{r['median_us']:.2f} us [{r['q1_us']:.2f}-{r['q3_us']:.2f}]")
        lines.append(f"| {LABELS[mode]} | {cells[0]} | {cells[1]} |")
    kept = res["frameworks"]["minitensor"]["kept_objects_per_op"]
    lines += ["", f"Timed with the garbage collector paused; a recorded op keeps {kept:.1f} objects for it to walk."]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = OneLineParser(prog="python -m benchmarks.perop", description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1, help="threads for BLAS and torch (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per framework (default: %(default)s)")
    p.add_argument("--steps", type=int, default=66, help="chain steps, 3 ops each (default: %(default)s)")
    p.add_argument("--calls", type=int, default=30, help="calls per chain in a round (default: %(default)s)")
    p.add_argument("--shape", type=int, nargs="+", default=[4, 4], help="the array's shape (default: 4 4)")
    p.add_argument("--quick", action="store_true", help="2 rounds of 10 calls (default: off)")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    p.add_argument("--child", choices=("minitensor", "torch"), default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if min(args.threads, args.rounds, args.steps, args.calls, *args.shape) < 1:
        p.error("--threads, --rounds, --steps, --calls and --shape must be >= 1")
    if args.child:
        print(json.dumps(child(args.child, args.steps, tuple(args.shape), args.calls, args.threads)))
        return 0
    rounds, calls = (2, 10) if args.quick else (args.rounds, args.calls)
    res = measure(args.threads, rounds, args.steps, tuple(args.shape), calls)
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        print(f"The engine's cost per op, {args.threads} thread{'s' if args.threads > 1 else ''}")
        print(markdown(res))
        recorded = res["frameworks"]["minitensor"]["recorded"]["median_us"]
        print(f"target: recorded op <= {TARGET_US:g} us: {'met' if recorded <= TARGET_US else 'missed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
