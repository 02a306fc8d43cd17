"""The memory/time section: peak memory and step time of a training step at long sequence lengths, for
{dense, tiled} attention x {plain, checkpointed} layers, transformer_np beside torch.

The long config's model (D 128, H 4, 2 + 2 layers) at batch 1 with S = T = each length, max_len raised to fit,
dropout off (torch's flash kernel on CPU and ours draw different dropout masks; the section is about memory).
Every point runs in a fresh child process (`python -m benchmarks.attention --child ...`): a process's peak
resident set only grows. The child imports its side, records the floor, builds the model, then runs a warm-up
step and `steps` timed training steps and reports the median step time and its peak above the floor.

torch's backend is forced on each side, as its CPU SDPA otherwise picks one by itself: the math backend
(which materialises the (T, T) scores) beside dense, the flash kernel beside tiled (torch.nn.attention.sdpa_kernel).
A child may use at most `--memory-gib` of address space beyond its floor (RLIMIT_AS): a point that needs more
is reported as "does not fit", which is the point of the section at the largest lengths.
Checkpointed columns need ModelConfig.activation_checkpointing; where the config has no such field the column says
"n/a". What the section found: docs/decisions/016-tiled-attention-and-checkpointing.md.

    python -m benchmarks.attention [--quick] [--lengths 128 256 ...] [--out benchmarks/results/attention]
    python -m benchmarks run ... (the same section inside the full report; --skip attention leaves it out)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks.env import set_torch_threads, thread_env_from_argv

if __name__ == "__main__":
    # Thread counts must be in the environment before numpy/torch load (benchmarks/env.py loads neither).
    thread_env_from_argv(sys.argv)

import dataclasses
import resource

from benchmarks import workloads as W
from benchmarks.plots import pyplot
from minitensor.allocator import reuse_freed_memory
from minitensor.serialization import atomic_write
from transformer_np.cli import OneLineParser
from transformer_np.cliutil import THREADS_MAX, integer, number

LENGTHS = [128, 256, 512, 1024, 2048, 4096]
QUICK_LENGTHS = [32, 64]
VARIANTS = [("dense", False), ("tiled", False), ("dense", True), ("tiled", True)]  # (attention, checkpointed)
TORCH_BACKEND = {"dense": "MATH", "tiled": "FLASH_ATTENTION"}  # torch.nn.attention.SDPBackend names
MEMORY_GIB = 6.0  # address space a child may use beyond its floor


def variant_name(attention: str, checkpointed: bool) -> str:
    return f"{attention}{' + checkpointing' if checkpointed else ''}"


def point_config(seq_len: int, attention: str, checkpointed: bool) -> W.BenchConfig:
    """The long config's model at batch 1, S = T = seq_len, dropout off; ValueError where the config has no
    activation_checkpointing field (the checkpointing work not merged)."""
    cfg = W.scaled_config(W.get_config("long"), seq_len=seq_len)
    model = cfg.model.replace(attention=attention, dropout=0.0)
    if checkpointed:
        if "activation_checkpointing" not in {f.name for f in dataclasses.fields(model)}:
            raise ValueError("n/a (no ModelConfig.activation_checkpointing on this branch)")
        model = model.replace(activation_checkpointing=True)
    return dataclasses.replace(cfg, model=model, batch_size=1)


# ----------------------------------------------------------------------------------------------- the child
def child(side: str, seq_len: int, attention: str, checkpointed: bool, steps: int, threads: int, gib: float) -> dict:
    """Runs in the child: import, floor, build, limit the address space, warm up, time `steps` steps."""
    if side == "numpy":
        import minitensor  # noqa: F401  (imported to count its memory in the floor)
        import transformer_np.model  # noqa: F401  (imported to count its memory in the floor)
    else:
        import torch  # the torch child only: the numpy one never loads torch

        import parity.model  # noqa: F401  (imported to count its memory in the floor)

        set_torch_threads(threads)
    floor = _status_kib("VmHWM")
    cfg = point_config(seq_len, attention, checkpointed)
    batch = W.make_batch(cfg)
    if side == "numpy":
        s = W.numpy_side(cfg, W.build_numpy_model(cfg), batch)
        backend = None
    else:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # the torch child only

        from parity.model import Transformer as TorchTransformer  # the torch child only

        torch.manual_seed(0)
        # torch's SDPA in every attention (the twin's 'tiled' path), with the backend forced per column
        model = TorchTransformer.from_config(cfg.model.replace(attention="tiled"))
        s = W.torch_side(cfg, model, batch)
        backend = sdpa_kernel(getattr(SDPBackend, TORCH_BACKEND[attention]))
    used = _status_kib("VmSize") * 1024
    resource.setrlimit(resource.RLIMIT_AS, (used + int(gib * 2**30), resource.RLIM_INFINITY))
    times = []
    try:
        if backend is not None:
            backend.__enter__()
        for i in range(steps + 1):
            t0 = time.perf_counter()
            s.train()
            if i:  # the first step warms up
                times.append(time.perf_counter() - t0)
    except (MemoryError, RuntimeError) as exc:  # NumPy's MemoryError, torch's "can't allocate memory"
        if isinstance(exc, RuntimeError) and "alloc" not in str(exc):
            raise
        return {"side": side, "fits": False, "error": f"does not fit in {gib:g} GiB"}
    return {
        "side": side,
        "fits": True,
        "peak_mib": (_status_kib("VmHWM") - floor) / 1024,
        "step_s": statistics.median(times),
        "step_s_all": times,
        "backend": None if backend is None else TORCH_BACKEND[attention],
    }


def _status_kib(key: str) -> int:
    """A KiB field of /proc/self/status: VmHWM (the peak resident set, reset at exec) or VmSize (address space)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise OSError(f"no {key} in /proc/self/status (Linux only)")


# ---------------------------------------------------------------------------------------------- the parent
def measure_point(side, seq_len, attention, checkpointed, steps, threads, gib, timeout) -> dict:
    """One child; its JSON, or {'error': ...}."""
    try:
        point_config(seq_len, attention, checkpointed)
    except ValueError as exc:
        return {"side": side, "fits": None, "error": str(exc)}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "benchmarks.attention", "--child", side, "--lengths", str(seq_len)]
    cmd += ["--attention", attention, "--steps", str(steps), "--threads", str(threads), "--memory-gib", str(gib)]
    cmd += ["--checkpointed"] if checkpointed else []
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"side": side, "fits": None, "error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1:] or [f"rc {proc.returncode}"]
        return {"side": side, "fits": None, "error": last[0]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_attention(lengths, steps: int, threads: int, gib: float, log, timeout: float = 1800.0) -> dict:
    """{'lengths', 'rows': [{seq_len, attention, checkpointed, numpy: {...}, torch: {...}}], settings}."""
    rows = []
    for seq_len in lengths:
        for attention, checkpointed in VARIANTS:
            row = {"seq_len": seq_len, "attention": attention, "checkpointed": checkpointed}
            for side in ("numpy", "torch"):
                row[side] = measure_point(side, seq_len, attention, checkpointed, steps, threads, gib, timeout)
            log(
                f"T={seq_len} {variant_name(attention, checkpointed)}: "
                + "; ".join(_cell(row[s]) for s in ("numpy", "torch"))
            )
            rows.append(row)
    return {"lengths": list(lengths), "steps": steps, "threads": threads, "memory_gib": gib, "rows": rows}


def _cell(r: dict) -> str:
    if r.get("fits"):
        return f"{r['peak_mib']:.0f} MiB, {r['step_s'] * 1e3:.0f} ms"
    return r.get("error", "?")


def _find(section: dict, seq_len: int, attention: str, checkpointed: bool) -> dict | None:
    for r in section["rows"]:
        if (r["seq_len"], r["attention"], r["checkpointed"]) == (seq_len, attention, checkpointed):
            return r
    return None


def _ratio(a: dict | None, b: dict | None, key: str) -> str:
    if a and b and a.get("fits") and b.get("fits"):
        return f"{a[key] / b[key]:.2f}"
    return "-"


def markdown(section: dict) -> str:
    """The table (one row per length and variant) and the ratios the targets name, each beside torch's."""
    md = [
        "### Attention memory and time (long config's model, batch 1, S = T, dropout off)",
        "",
        f"Peak resident memory above the import floor and the median training-step time over {section['steps']} "
        f"steps after one warm-up, {section['threads']} thread(s), each point a fresh process limited to "
        f"{section['memory_gib']:g} GiB of address space beyond its floor. torch: math backend beside dense, "
        "flash kernel beside tiled (sdpa_kernel).",
        "",
        "| T | variant | minitensor peak MiB | minitensor step ms | torch peak MiB | torch step ms |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for r in section["rows"]:
        cells = []
        for side in ("numpy", "torch"):
            x = r[side]
            if x.get("fits"):
                cells += [f"{x['peak_mib']:.0f}", f"{x['step_s'] * 1e3:.0f}"]
            else:
                cells += [x.get("error", "?"), ""]
        md.append(f"| {r['seq_len']} | {variant_name(r['attention'], r['checkpointed'])} | " + " | ".join(cells) + " |")
    md += [
        "",
        "| T | tiled / dense peak (minitensor) | (torch) | checkpointed / plain step, dense (minitensor) | "
        "(torch) | checkpointed / plain step, tiled (minitensor) | (torch) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in section["lengths"]:
        dense, tiled = _find(section, t, "dense", False), _find(section, t, "tiled", False)
        dense_ck, tiled_ck = _find(section, t, "dense", True), _find(section, t, "tiled", True)
        cells = []
        for side in ("numpy", "torch"):
            cells.append(_ratio(tiled and tiled[side], dense and dense[side], "peak_mib"))
        for a, b in ((dense_ck, dense), (tiled_ck, tiled)):
            for side in ("numpy", "torch"):
                cells.append(_ratio(a and a[side], b and b[side], "step_s"))
        md.append(f"| {t} | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} | {cells[4]} | {cells[5]} |")
    md += [
        "",
        "Targets: tiled peak at T = 4096 at most 1/4 of dense; a checkpointed step at most 1.4x the "
        "plain one. '-' where a side did not fit or the column is not available.",
        "",
    ]
    return "\n".join(md)


def plot(section: dict, path: str) -> None:
    """Two panels against T (log-log): peak memory and step time, a line per side and variant."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"numpy": "-", "torch": "--"}
    colors = {v: c for v, c in zip(VARIANTS, ("tab:red", "tab:blue", "tab:orange", "tab:cyan"))}
    for (attention, checkpointed), color in colors.items():
        for side, ls in styles.items():
            pts = [
                (r["seq_len"], r[side])
                for r in section["rows"]
                if (r["attention"], r["checkpointed"]) == (attention, checkpointed)
            ]
            pts = [(t, x) for t, x in pts if x.get("fits")]
            if not pts:
                continue
            label = f"{'minitensor' if side == 'numpy' else 'torch'} {variant_name(attention, checkpointed)}"
            axes[0].plot([t for t, _ in pts], [x["peak_mib"] for _, x in pts], ls, color=color, marker="o", label=label)
            axes[1].plot([t for t, _ in pts], [x["step_s"] for _, x in pts], ls, color=color, marker="o", label=label)
    for ax, ylabel in zip(axes, ("peak memory above the floor (MiB)", "training step (s)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T (= S)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("Training step of the long model at batch 1: dense vs tiled attention, plain vs checkpointed")
    fig.tight_layout()
    with atomic_write(path, "wb", suffix=".png") as f:  # never a half-written PNG
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------------------- command line
def build_parser():
    ap = OneLineParser(prog="python -m benchmarks.attention", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"lengths {QUICK_LENGTHS}, 1 timed step (a smoke test)")
    ap.add_argument(
        "--lengths",
        type=integer(1),
        nargs="+",
        default=None,
        metavar="T",
        help=f"sequence lengths (default: {LENGTHS})",
    )
    ap.add_argument("--steps", type=integer(1), default=None, help="timed steps per point (default: 2; --quick: 1)")
    ap.add_argument("--threads", type=integer(1, THREADS_MAX), default=1, help="threads per side (default: 1)")
    ap.add_argument(
        "--memory-gib",
        type=number(0.0, 1024.0, low_open=True),
        default=MEMORY_GIB,
        help="address space a child may use beyond its floor, GiB (default: %(default)s)",
    )
    ap.add_argument(
        "--out",
        default="benchmarks/results/attention",
        help="folder for attention.md/.json/.png (default: %(default)s)",
    )
    ap.add_argument("--child", choices=["numpy", "torch"], default=None, help="(internal) run one point as this side")
    ap.add_argument("--attention", choices=["dense", "tiled"], default="dense", help="(internal, with --child)")
    ap.add_argument("--checkpointed", action="store_true", help="(internal, with --child)")
    return ap


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    reuse_freed_memory()  # both sides, as the timing workers (benchmarks/worker.py)
    steps = args.steps or (1 if args.quick else 2)
    if args.child:
        print(
            json.dumps(
                child(
                    args.child, args.lengths[0], args.attention, args.checkpointed, steps, args.threads, args.memory_gib
                )
            )
        )
        return
    t0 = time.perf_counter()
    lengths = args.lengths or (QUICK_LENGTHS if args.quick else LENGTHS)
    section = bench_attention(
        lengths,
        steps,
        args.threads,
        args.memory_gib,
        lambda m: print(f"[{time.perf_counter() - t0:6.1f} s] {m}", flush=True),
    )
    section["command"] = "python -m benchmarks.attention " + " ".join(sys.argv[1:] if argv is None else argv)
    os.makedirs(args.out, exist_ok=True)
    text = markdown(section)
    with atomic_write(os.path.join(args.out, "attention.md")) as f:
        f.write(f"Command: `{section['command']}`\n\n" + text)
    with atomic_write(os.path.join(args.out, "attention.json")) as f:
        json.dump(section, f, indent=1)
    plot(section, os.path.join(args.out, "attention.png"))
    print(text)
    print(f"wrote {args.out}/attention.md, attention.json, attention.png")


if __name__ == "__main__":
    main()
