"""Peak memory of N training steps, each side in a fresh subprocess.

A process's peak resident set (VmHWM, i.e. ru_maxrss without what Linux carries over from the
forking parent; see `_peak_kib`) only grows, so each measurement needs its own
process: the parent starts `python -m benchmarks.memory --side numpy|torch --config NAME` and the
child prints one JSON line with
    baseline_kib   ru_maxrss right after importing its side's libraries (the bare-import floor)
    peak_kib       ru_maxrss after building the model and running `steps` training steps
The numpy child never imports torch, so its figure is transformer_np's alone. Linux reports
ru_maxrss in KiB (macOS in bytes: converted).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from benchmarks.env import set_torch_threads, thread_env_from_argv

if __name__ == "__main__":
    # Thread counts must be in the environment before numpy/torch load (benchmarks/env.py loads neither).
    thread_env_from_argv(sys.argv)

import argparse
import resource

from benchmarks import workloads as W
from minitensor.allocator import reuse_freed_memory
from transformer_np.cli import OneLineParser
from transformer_np.cliutil import THREADS_MAX, integer


def _maxrss_kib() -> int:
    """ru_maxrss of this process, KiB (inherits the parent's size across fork+exec on Linux)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r // 1024 if sys.platform == "darwin" else r


def _peak_kib() -> int:
    """Peak resident set of this process image, KiB.

    Linux's ru_maxrss survives exec: a child forked from a parent holding torch starts with the
    parent's ru_maxrss whatever it does. VmHWM (/proc/self/status) is the same high-water
    mark but reset at exec, so it measures the child alone; ru_maxrss is the fallback elsewhere.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return _maxrss_kib()


def child(side: str, config: str, steps: int, threads: int) -> dict:
    """Runs in the child: import, record the floor, build, train `steps` steps, record the peak."""
    if side == "numpy":
        import numpy  # noqa: F401  (imported to count its memory in the floor)

        import minitensor  # noqa: F401  (imported to count its memory in the floor)
        import transformer_np.model  # noqa: F401  (imported to count its memory in the floor)
    elif side == "torch":
        import torch

        import parity.model  # noqa: F401  (imported to count its memory in the floor)

        set_torch_threads(threads)
    else:
        raise ValueError(f"benchmarks.memory: side must be 'numpy' or 'torch', got {side!r}")
    baseline = _peak_kib()
    cfg = W.get_config(config)
    batch = W.make_batch(cfg)
    if side == "numpy":
        model = W.build_numpy_model(cfg)
        s = W.numpy_side(cfg, model, batch)
    else:
        import torch

        from parity.model import (
            Transformer as TorchTransformer,
        )  # the torch child only: the numpy one never loads torch

        torch.manual_seed(0)
        model = TorchTransformer.from_config(cfg.model)
        s = W.torch_side(cfg, model, batch)
    for _ in range(steps):
        s.train()
    return {
        "side": side,
        "config": config,
        "steps": steps,
        "baseline_kib": baseline,
        "peak_kib": _peak_kib(),
        "ru_maxrss_kib": _maxrss_kib(),
    }


def measure(config: str, steps: int, threads: int, timeout: float = 900.0) -> dict:
    """Run the numpy and the torch child of one config side by side; {side: JSON or {'error': ...}}.

    Running both at once is harmless here (peak memory, not time, is measured) and halves the wait.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    procs = {}
    for side in ("numpy", "torch"):
        # The environment (thread counts, wait policy) is inherited from the parent.
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.memory",
            "--side",
            side,
            "--config",
            config,
            "--steps",
            str(steps),
            "--threads",
            str(threads),
        ]
        procs[side] = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root, env=env
        )
    out = {}
    for side, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out[side] = {"side": side, "config": config, "error": f"timed out after {timeout:.0f} s"}
            continue
        except BaseException:  # Ctrl-C: no child is left running
            for p in procs.values():
                p.kill()
                p.wait()
            raise
        if proc.returncode != 0:
            last = stderr.strip().splitlines()[-1:] or [f"rc {proc.returncode}"]
            out[side] = {"side": side, "config": config, "error": last[0]}
        else:
            out[side] = json.loads(stdout.strip().splitlines()[-1])
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(prog="python -m benchmarks.memory", description=__doc__.splitlines()[0])
    ap.add_argument("--side", required=True, choices=["numpy", "torch"], help="which framework this child measures")
    ap.add_argument("--config", required=True, choices=sorted(W.CONFIGS), help="benchmark config to train")
    ap.add_argument("--steps", type=integer(1), default=3, help="training steps before the peak is read (default: 3)")
    ap.add_argument(
        "--threads", type=integer(1, THREADS_MAX), default=2, help="threads for BLAS/OpenMP/torch (default: 2)"
    )
    return ap


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    reuse_freed_memory()  # both sides, as the timing workers (benchmarks/worker.py)
    print(json.dumps(child(args.side, args.config, args.steps, args.threads)))


if __name__ == "__main__":
    main()
