"""What anomaly mode costs: a training step with it off and on, and, given another checkout, before and after.

    python -m benchmarks.anomaly [--rounds 7] [--steps 20] [--config copy-reverse] [--baseline PATH]

Each figure is one child process running `--steps` training steps of the benchmarks' NumPy side (Adam,
clipping; benchmarks/workloads.py) at 1 thread after 3 warm-up steps, and reporting their median. The
children alternate, off, on, (baseline), then the reverse order in the next round, so that a drift of the
machine's load falls on every kind alike; the table gives the median over the rounds and, per round, the
ratios on/off and off/baseline with their spread (IQR). --baseline names the root of another checkout
(the code before anomaly mode), timed with anomaly mode absent: whether "off" costs anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .env import set_thread_env

# 1 thread for NumPy's BLAS, set before it loads (the children inherit it)
set_thread_env(1)

import numpy as np  # noqa: E402  (after the thread variables)

from transformer_np.cli import OneLineParser  # noqa: E402  (it loads numpy: after them too)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The child, as source: it must also run in a baseline checkout that has no benchmarks/anomaly.py.
CHILD = """
import json, sys, time, warnings
import numpy as np
import minitensor as mt
from benchmarks.workloads import build_numpy_model, get_config, make_batch, numpy_side
config, steps, on = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "on"
cfg = get_config(config)
side = numpy_side(cfg, build_numpy_model(cfg, 0), make_batch(cfg, 0))
if on:
    warnings.simplefilter("ignore")
    mt.autograd.set_detect_anomaly(True)
for _ in range(3):
    side.train()
times = []
for _ in range(steps):
    start = time.perf_counter()
    side.train()
    times.append(time.perf_counter() - start)
print(json.dumps(float(np.median(times))))
"""


def child_time(root: str, config: str, steps: int, mode: str) -> float:
    env = {**os.environ, "PYTHONPATH": root}
    cmd = [sys.executable, "-c", CHILD, config, str(steps), mode]
    return json.loads(subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True, text=True).stdout)


def spread(values: list) -> str:
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    return f"{med:.3f} (IQR {q1:.3f}-{q3:.3f})"


def main(argv=None) -> int:
    p = OneLineParser(prog="python -m benchmarks.anomaly", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7, help="alternating rounds (default: %(default)s)")
    p.add_argument("--steps", type=int, default=20, help="timed training steps per child (default: %(default)s)")
    p.add_argument("--config", default="copy-reverse", help="a benchmarks config (default: %(default)s)")
    p.add_argument("--baseline", default=None, help="root of a checkout before anomaly mode (default: none)")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.steps < 1:
        p.error(f"--rounds and --steps must be >= 1, got {args.rounds} and {args.steps}")
    if args.baseline is not None and not os.path.isdir(os.path.join(args.baseline, "minitensor")):
        p.error(f"--baseline: expected the root of a checkout (with minitensor/), got {args.baseline!r}")
    kinds = [("off", ROOT, "off"), ("on", ROOT, "on")]
    if args.baseline:
        kinds.append(("baseline", os.path.abspath(args.baseline), "off"))
    rounds = []
    for r in range(args.rounds):
        order = kinds if r % 2 == 0 else kinds[::-1]
        rounds.append({name: child_time(root, args.config, args.steps, mode) for name, root, mode in order})
    print(f"{args.config} training step, 1 thread, {args.rounds} rounds of {args.steps} steps, median per child")
    for name, _, _ in kinds:
        print(f"  {name:<9} {np.median([r[name] for r in rounds]) * 1e3:8.2f} ms")
    print(f"  on / off per round:       {spread([r['on'] / r['off'] for r in rounds])}")
    if args.baseline:
        print(f"  off / baseline per round: {spread([r['off'] / r['baseline'] for r in rounds])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
