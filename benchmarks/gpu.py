"""The GPU section: one training step of the base and long configs, minitensor on CuPy beside PyTorch CUDA eager.

    python -m benchmarks gpu [--quick] [--configs base long] [--rounds N] [--calls N] [--out DIR]

and a part of `python -m benchmarks run` (skip it with `--skip gpu`). Without a CUDA GPU, or without CuPy,
it is skipped with one line saying which is missing (docs/gpu.md: `make gpu` installs CuPy where a GPU is).

What is timed: the benchmark's own training step (benchmarks/workloads.py `train`: zero_grad, forward, label-
smoothed loss, backward, clip_grad_norm_(1.0), Adam), float32, dropout 0.1, the same weights and batch on both
sides. minitensor's model is built on the host from the seed and moved with `.to("cuda")`; it gets the host
batch, as in training (the model copies the tokens and masks over each step). Each side lives in its own process
(a child of this module), and the rounds alternate A B A B (benchmarks/timing.py): a round is `calls` steps after
`warmup`, each step closed by a device synchronize so that the time is the kernels', not the launches'; its
figure is their median. The ratio minitensor / torch is the median of the per-round ratios, with quartiles and
extremes. Every figure names the device, the torch and CuPy versions and CUDA runtimes, since the GPU machines
carry their own torch, not the pinned CPU wheel.

`--fake` runs the same harness with minitensor on the fake device (MINITENSOR_FAKE_CUDA=1) and torch on the CPU:
a smoke test of this code on a machine without a GPU (tests/benchmarks/test_harness.py), never a GPU figure.

Child protocol (one JSON request per line on stdin, one JSON answer per line on stdout):
    python -m benchmarks.gpu --child minitensor|torch --config NAME [--fake]
    {"op": "facts"} -> versions and device;  {"op": "time", "calls": n, "warmup": w} -> {"samples_ms": [...]}
    python -m benchmarks.gpu --probe -> one JSON line {"ok": bool, "reason": str}
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import minitensor as mt
from benchmarks import workloads as W
from benchmarks.timing import alternate, ratio_stats, round_medians, summarize
from minitensor import devices
from transformer_np.cli import OneLineParser
from transformer_np.cliutil import integer
from transformer_np.device import array_of

SIDES = ("minitensor", "torch")
GPU_CONFIGS = ("base", "long")
DEFAULTS = {"rounds": 7, "calls": 5, "warmup": 3}
QUICK = {"rounds": 3, "calls": 3, "warmup": 2}
FAKE_NOTE = "the fake device (NumPy) beside torch on the CPU: a smoke test of the harness, not a GPU figure"


# ------------------------------------------------------------------------------------------ the child side
def _minitensor_side(name: str):
    """(the training step, a device synchronize, facts) for minitensor on "cuda" (CuPy, or the fake device)."""
    cfg = W.get_config(name)
    batch = W.make_batch(cfg)
    model = W.build_numpy_model(cfg).to("cuda")  # built on the host from the seed, then moved
    xp = devices.array_module(array_of(next(iter(model.parameters()))))
    # The host batch, as training feeds it: the model copies the tokens and masks over (a few kB a step) and
    # sequence_loss the labels, as parity's loss does on torch's side.
    side = W.numpy_side(cfg, model, batch)
    sync = mt.cuda.synchronize  # waits for CuPy's queue; at once on the fake, which has none
    if xp.__name__ == "cupy":
        props = xp.cuda.runtime.getDeviceProperties(xp.cuda.Device().id)
        device = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        facts = {"cupy": xp.__version__, "cuda_runtime": xp.cuda.runtime.runtimeGetVersion(), "device": device}
    else:  # the fake device: NumPy underneath, every call already finished
        facts = {"cupy": None, "device": "fake CUDA device (NumPy)"}
    facts["minitensor_array_module"] = xp.__name__
    facts["numpy"] = np.__version__
    facts["default_dtype"] = str(mt.get_default_dtype())
    return side.train, sync, facts


def _torch_side(name: str, fake: bool):
    """(the training step, a device synchronize, facts) for PyTorch eager on CUDA (the CPU with --fake)."""
    import torch  # (only in the torch child: the parent and the minitensor child never load it)

    device = "cpu" if fake else "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False  # full float32, as minitensor computes (CuPy does not use TF32)
    torch.backends.cudnn.allow_tf32 = False
    cfg = W.get_config(name)
    model = W.copy_to_torch(W.build_numpy_model(cfg), cfg, device)
    side = W.torch_side(cfg, model, W.make_batch(cfg), device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    facts = {
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "CPU (--fake)",
    }
    return side.train, sync, facts


def time_steps(step, sync, calls: int, warmup: int) -> list[float]:
    """`calls` steps after `warmup`, each closed by a synchronize: ms per step."""
    for _ in range(warmup):
        step()
    sync()
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        step()
        sync()
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples


def child(side: str, config: str, fake: bool) -> int:
    """Serve requests for one side and one config until stdin closes. Library output goes to stderr."""
    out, sys.stdout = sys.stdout, sys.stderr
    try:
        step, sync, facts = _minitensor_side(config) if side == "minitensor" else _torch_side(config, fake)
    except Exception as e:  # the parent shows this line, not a traceback
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), file=out, flush=True)
        return 1
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if req["op"] == "facts":
                reply = facts
            elif req["op"] == "time":
                reply = {"samples_ms": time_steps(step, sync, req["calls"], req["warmup"])}
            else:
                reply = {"error": f"unknown request {req['op']!r}"}
        except Exception as e:
            reply = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(reply), file=out, flush=True)
    return 0


def probe() -> dict:
    """Whether both sides can run on a GPU here, and if not, which is missing (one line for the skip)."""
    try:
        import torch  # (in the probe's own process: the parent never loads torch)
    except ImportError:
        return {"ok": False, "reason": "torch is not installed"}
    if not torch.cuda.is_available():
        return {"ok": False, "reason": "no CUDA GPU (torch.cuda.is_available() is False)"}
    if devices.fake_cuda_enabled():
        return {"ok": False, "reason": "MINITENSOR_FAKE_CUDA=1 makes 'cuda' the fake device: unset it to time CuPy"}
    try:
        import cupy  # the optional gpu extra; only in the probe's process
    except ImportError:
        return {"ok": False, "reason": "CuPy is not installed (make gpu installs the gpu extra)"}
    if cupy.cuda.runtime.getDeviceCount() < 1:
        return {"ok": False, "reason": "CuPy sees no GPU"}
    return {"ok": True, "reason": ""}


# ----------------------------------------------------------------------------------------- the parent side
class Child:
    """The parent's handle on one side's process: `request(dict) -> dict`, `close()` (as benchmarks.worker.Worker)."""

    def __init__(self, side: str, config: str, fake: bool):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        if fake and side == "minitensor":
            env["MINITENSOR_FAKE_CUDA"] = "1"
        self.side = side
        self.log = tempfile.TemporaryFile(mode="w+")
        cmd = [sys.executable, "-m", "benchmarks.gpu", "--child", side, "--config", config] + (
            ["--fake"] if fake else []
        )
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=root, env=env
        )

    def request(self, req: dict) -> dict:
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self.log.seek(0)
            tail = self.log.read().strip().splitlines()[-3:]
            raise RuntimeError(f"GPU benchmark's {self.side} process died: " + " | ".join(tail))
        out = json.loads(line)
        if "error" in out:
            raise RuntimeError(f"GPU benchmark's {self.side} process: {out['error']}")
        return out

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def run_probe() -> dict:
    """probe() in a child process, so that this process imports neither torch nor CuPy."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    r = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu", "--probe"], capture_output=True, text=True, cwd=root, env=env
    )
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"ok": False, "reason": "the GPU probe failed: " + " | ".join(r.stderr.strip().splitlines()[-2:])}


def bench_config(config: str, rounds: int, calls: int, warmup: int, fake: bool, log) -> dict:
    """One config: both sides' processes, their facts, `rounds` alternating rounds, the ratio with spread."""
    children = {}
    try:
        for side in SIDES:
            children[side] = Child(side, config, fake)
        facts = {side: c.request({"op": "facts"}) for side, c in children.items()}
        replies = alternate(children, {"op": "time", "calls": calls, "warmup": warmup}, rounds)
    finally:
        for c in children.values():
            c.close()
    medians = {side: round_medians(replies[side]) for side in SIDES}
    result = {
        "config": config,
        "facts": facts,
        "rounds": rounds,
        "calls": calls,
        "warmup": warmup,
        **{side: summarize(medians[side]).to_dict() for side in SIDES},
        "ratio": ratio_stats(medians["minitensor"], medians["torch"]),
    }
    log(
        f"GPU {config} training step: minitensor {statistics.median(medians['minitensor']):.1f} ms, "
        f"torch {statistics.median(medians['torch']):.1f} ms, ratio {result['ratio']['median']:.2f} "
        f"(min {result['ratio']['min']:.2f}, max {result['ratio']['max']:.2f})"
    )
    return result


def bench_gpu(configs=GPU_CONFIGS, quick: bool = False, fake: bool = False, rounds=None, calls=None, log=print) -> dict:
    """The whole GPU section: {"skipped": reason} without a GPU (logged in one line), else a result per config."""
    if not fake:
        found = run_probe()
        if not found["ok"]:
            log(f"GPU section skipped: {found['reason']}")
            return {"skipped": found["reason"]}
    n = dict(QUICK if quick else DEFAULTS)
    n.update({k: v for k, v in (("rounds", rounds), ("calls", calls)) if v is not None})
    out = {"fake": fake, "note": FAKE_NOTE if fake else "", "configs": {}}
    for config in configs:
        out["configs"][config] = bench_config(config, n["rounds"], n["calls"], n["warmup"], fake, log)
    return out


def markdown(result: dict) -> str:
    """The section for people: one line per config, and the device and versions every figure was taken with."""
    lines = ["## GPU: one training step, minitensor on CuPy beside PyTorch CUDA eager (float32)", ""]
    if "skipped" in result:
        return "\n".join(lines + [f"Skipped: {result['skipped']}.", ""])
    if result.get("fake"):
        lines += [f"**{result['note']}**", ""]
    lines += [
        "| config | minitensor ms/step | torch ms/step | ratio minitensor/torch (median, IQR, min-max) | rounds |",
        "| --- | ---: | ---: | --- | ---: |",
    ]
    for name, r in result["configs"].items():
        q = r["ratio"]
        lines.append(
            f"| {name} | {r['minitensor']['median_ms']:.1f} | {r['torch']['median_ms']:.1f} | "
            f"{q['median']:.2f} ({q['q1']:.2f}-{q['q3']:.2f}, {q['min']:.2f}-{q['max']:.2f}) | {q['rounds']} |"
        )
    for name, r in result["configs"].items():
        m, t = r["facts"]["minitensor"], r["facts"]["torch"]
        lines += [
            "",
            f"{name}: minitensor on {m['device']} (CuPy {m.get('cupy')}, CUDA runtime {m.get('cuda_runtime')}, "
            f"NumPy {m['numpy']}); torch {t['torch']} (CUDA {t['torch_cuda']}) on {t['device']}; "
            f"{r['rounds']} rounds of {r['calls']} steps after {r['warmup']} warm-up steps, A B A B.",
        ]
    return "\n".join(lines) + "\n"


def write(result: dict, out: str) -> str:
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "gpu.md")
    with open(path, "w") as f:
        f.write(markdown(result))
    with open(os.path.join(out, "gpu.json"), "w") as f:
        json.dump(result, f, indent=1)
    return path


def add_parser(sub) -> None:
    """`gpu`: the GPU section alone (benchmarks/cli.py adds it beside run and ranks)."""
    g = sub.add_parser(
        "gpu",
        help="one training step of base and long, minitensor on CuPy beside PyTorch CUDA (skipped without a GPU)",
        description="Time the training step on a CUDA GPU, minitensor (CuPy) against PyTorch eager, float32, "
        "each in its own process, A B A B.",
    )
    g.add_argument("--quick", action="store_true", help="3 rounds of 3 steps (default: 7 rounds of 5 steps)")
    g.add_argument(
        "--configs",
        nargs="+",
        default=list(GPU_CONFIGS),
        choices=sorted(W.CONFIGS),
        metavar="CONFIG",
        help=f"configs to time, from {{{', '.join(sorted(W.CONFIGS))}}} (default: {', '.join(GPU_CONFIGS)})",
    )
    g.add_argument(
        "--rounds", type=integer(1), default=None, help="alternating rounds per config (default: 7; quick: 3)"
    )
    g.add_argument("--calls", type=integer(1), default=None, help="timed steps per round (default: 5; quick: 3)")
    g.add_argument("--fake", action="store_true", help="minitensor on the fake device, torch on the CPU (smoke test)")
    g.add_argument("--out", default="benchmarks/results", help="folder for gpu.md and gpu.json (default: %(default)s)")


def main(args) -> int:
    """`python -m benchmarks gpu`: 0 when measured or skipped (one line), 1 when a side failed."""
    try:
        result = bench_gpu(args.configs, args.quick, args.fake, args.rounds, args.calls)
    except RuntimeError as e:
        print(f"python -m benchmarks gpu: {e}", file=sys.stderr)
        return 1
    if "skipped" not in result:
        print(markdown(result))
        print("wrote " + write(result, args.out))
    return 0


if __name__ == "__main__":
    ap = OneLineParser(prog="python -m benchmarks.gpu", description="a GPU benchmark child (internal)")
    ap.add_argument("--child", choices=SIDES)
    ap.add_argument("--config", default="base")
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--probe", action="store_true")
    a = ap.parse_args()
    if a.probe:
        print(json.dumps(probe()))
        sys.exit(0)
    sys.exit(child(a.child, a.config, a.fake))
