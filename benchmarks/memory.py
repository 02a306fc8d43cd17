"""Peak memory of N training steps, each side in a fresh subprocess.

A process's peak resident set (getrusage ru_maxrss) only grows, so each measurement needs its own
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

if __name__ == "__main__":
    # Thread counts must be in the environment before numpy/torch load.
    from benchmarks.env import thread_env_from_argv
    thread_env_from_argv(sys.argv)

import argparse
import resource


def _maxrss_kib() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r // 1024 if sys.platform == "darwin" else r


def child(side: str, config: str, steps: int, threads: int) -> dict:
    """Runs in the child: import, record the floor, build, train `steps` steps, record the peak."""
    if side == "numpy":
        import numpy  # noqa: F401
        import minitensor  # noqa: F401
        import transformer_np.model  # noqa: F401
    elif side == "torch":
        import torch
        import parity.model  # noqa: F401
        from benchmarks.env import set_torch_threads
        set_torch_threads(threads)
    else:
        raise ValueError(f"benchmarks.memory: side must be 'numpy' or 'torch', got {side!r}")
    baseline = _maxrss_kib()
    from benchmarks import workloads as W
    cfg = W.get_config(config)
    batch = W.make_batch(cfg)
    if side == "numpy":
        model = W.build_numpy_model(cfg)
        s = W.numpy_side(cfg, model, batch)
    else:
        import torch
        from parity.model import Transformer as TorchTransformer
        torch.manual_seed(0)
        model = TorchTransformer.from_config(cfg.model)
        s = W.torch_side(cfg, model, batch)
    for _ in range(steps):
        s.train()
    return {"side": side, "config": config, "steps": steps, "baseline_kib": baseline, "peak_kib": _maxrss_kib()}


def measure(side: str, config: str, steps: int, threads: int, timeout: float = 900.0) -> dict:
    """Run one child and return its JSON (plus 'error' when it failed)."""
    cmd = [sys.executable, "-m", "benchmarks.memory", "--side", side, "--config", config,
           "--steps", str(steps), "--threads", str(threads)]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=root, env=env)
    except subprocess.TimeoutExpired:
        return {"side": side, "config": config, "error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"side": side, "config": config, "error": proc.stderr.strip().splitlines()[-1:] or [f"rc {proc.returncode}"]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__.splitlines()[0])
    ap.add_argument("--side", required=True, choices=["numpy", "torch"])
    ap.add_argument("--config", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    print(json.dumps(child(args.side, args.config, args.steps, args.threads)))


if __name__ == "__main__":
    main()
