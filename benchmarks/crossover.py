"""Where jacfwd starts to beat jacrev: the Jacobian of f(x) = exp(A x), n inputs, m outputs, by both transforms.

    python -m benchmarks.crossover [--quick] [--inputs 16] [--rounds 5]

jacfwd costs one forward pass with tangents per input (n), jacrev one backward per output (m) after one
forward, so jacfwd wins on a tall Jacobian (m > n) and jacrev on a wide one; where they cross depends on
the price of a pass of each kind. Both transforms are timed for m from n/8 to 16 n, minitensor (mt.func) and
PyTorch (torch.func) each in its own process, 1 thread, float64, alternating rounds (minitensor, torch,
minitensor, ...); each figure is the median over the rounds of a round's best of 3 calls. The table gives
t(jacfwd) / t(jacrev) per m (below 1: forward mode is the cheaper) and the crossover for each framework.
docs/forward_mode.md quotes a run. Deviation, flagged: torch.func batches jacfwd's columns and jacrev's rows
with vmap (one pass in all); mt.func runs them one by one, so torch's crossover is not a pass count.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from .env import set_thread_env

# 1 thread for NumPy's BLAS and torch, set before either loads (the children inherit it)
set_thread_env(1)

import numpy as np  # noqa: E402  (after the thread variables)

from transformer_np.cli import OneLineParser  # noqa: E402  (it loads numpy: after them too)


def child(framework: str, n: int, ms: list) -> dict:
    """One process, one framework: {m: [t_jacfwd, t_jacrev]} (best of 3 calls each)."""
    if framework == "minitensor":
        import minitensor as lib  # the child loads only the framework it times

        jacfwd, jacrev, tensor = lib.func.jacfwd, lib.func.jacrev, lib.tensor
    else:
        import torch as lib  # as above: this child times torch only

        lib.set_num_threads(1)
        jacfwd, jacrev, tensor = lib.func.jacfwd, lib.func.jacrev, lib.tensor
    rng = np.random.default_rng(0)
    x = tensor(rng.standard_normal(n))
    out = {}
    for m in ms:
        A = tensor(rng.standard_normal((m, n)) / np.sqrt(n))

        def f(x, A=A):
            return (A @ x).exp()

        times = []
        for transform in (jacfwd, jacrev):
            jac = transform(f)
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                jac(x)
                best = min(best, time.perf_counter() - start)
            times.append(best)
        out[m] = times
    return out


def crossover(ms: list, ratios: list) -> str:
    """The smallest m from which jacfwd stays the cheaper (ratio < 1 there and at every larger m)."""
    since = None
    for m, r in zip(reversed(ms), reversed(ratios)):
        if r >= 1:
            break
        since = m
    return "jacfwd never the cheaper in this range" if since is None else f"jacfwd the cheaper from m = {since} on"


def main(argv=None) -> int:
    p = OneLineParser(prog="python -m benchmarks.crossover", description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", type=int, default=16, help="n, the number of inputs (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per framework (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="2 rounds and fewer sizes (default: off)")
    p.add_argument("--child", choices=("minitensor", "torch"), default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.inputs < 1 or args.rounds < 1:
        p.error(f"--inputs and --rounds must be >= 1, got {args.inputs} and {args.rounds}")
    n = args.inputs
    ms = sorted({max(1, n // 8), n // 4, n // 2, n, 2 * n, 4 * n, 16 * n} - {0})
    if args.quick:
        ms = sorted({max(1, n // 4), n, 4 * n})
    if args.child:
        print(json.dumps(child(args.child, n, ms)))
        return 0
    rounds = 2 if args.quick else args.rounds
    samples = {"minitensor": [], "torch": []}
    for _ in range(rounds):
        for framework in samples:
            cmd = [sys.executable, "-m", "benchmarks.crossover", "--child", framework, "--inputs", str(n)]
            cmd += ["--quick"] if args.quick else []
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            samples[framework].append({int(k): v for k, v in json.loads(done.stdout).items()})
    print(f"jacfwd / jacrev time for f(x) = exp(A x), n = {n} inputs, float64, 1 thread, median of {rounds} rounds")
    print(f"{'m outputs':>10}  {'minitensor':>22}  {'torch':>22}")
    summary = {}
    for framework, runs in samples.items():
        fwd = [float(np.median([r[m][0] for r in runs])) for m in ms]
        rev = [float(np.median([r[m][1] for r in runs])) for m in ms]
        summary[framework] = (fwd, rev, [a / b for a, b in zip(fwd, rev)])
    for k, m in enumerate(ms):
        cells = [
            f"{summary[f][2][k]:6.2f} ({summary[f][0][k] * 1e3:6.2f}/{summary[f][1][k] * 1e3:6.2f} ms)" for f in summary
        ]
        print(f"{m:>10}  {cells[0]:>22}  {cells[1]:>22}")
    for framework in summary:
        print(f"{framework}: {crossover(ms, summary[framework][2])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
