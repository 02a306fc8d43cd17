"""Op microbenchmarks: minitensor against PyTorch eager, one op at a time, forward and forward+backward.

Each case is one line: a name, a size class ('small': a few hundred elements, where per-op
Python overhead dominates; 'large': the shapes the base Transformer feeds the op), its input
shapes, and one function written once for both libraries (same names: `F.linear`, `x.sum(dim)`).
Inputs come from the same seeded NumPy arrays on both sides; backward uses a random upstream
gradient (never all-ones). The forward outputs are compared with `error_stats` so a ratio is
only reported for ops that compute the same thing.

Each side times the table in its own worker process (benchmarks/worker.py), whole passes
alternating A B A B. Run alone: `python -m benchmarks.ops [--quick] [--sizes small large] [--threads 2]`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from minitensor.serialization import atomic_write
from minitensor.testing import OP_RTOL
from transformer_np.cli import OneLineParser
from transformer_np.cliutil import THREADS_MAX, integer, interrupted, number, sigint_deferred

SETTLE_MAX = 60.0  # seconds, as benchmarks/run.py's --settle


@dataclass(frozen=True)
class Index:
    """An int64 input of `shape` with values in [0, high) (no gradient)."""

    shape: tuple
    high: int


@dataclass(frozen=True)
class Mask:
    """A bool input of `shape`, True = keep; row 0 all True (no gradient)."""

    shape: tuple


@dataclass(frozen=True)
class OpCase:
    name: str
    size: str  # 'small' or 'large'
    inputs: tuple  # float shapes (require grad), Index or Mask
    fn: Callable  # fn(L, F, *inputs) with L = minitensor or torch, F = its functional


def _attention(L, F, q, k, v, mask):
    """softmax(q k^T / sqrt(Dh) masked) v: the attention core, as both models write it."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, T)
    scores = scores.masked_fill(~mask, -1e9)
    return F.softmax(scores, dim=-1) @ v  # (B, H, T, Dh)


def _model_attention(L, F, q, k, v, mask):
    """Each model's own scaled_dot_product_attention (transformer_np's is a fused primitive)."""
    if L.__name__ == "torch":
        from parity.model import scaled_dot_product_attention
    else:
        from transformer_np.model import scaled_dot_product_attention
    return scaled_dot_product_attention(q, k, v, mask)[0]


def _heads(x, B, T, H, Dh):
    """(B, T, D) -> (B*H, T, Dh): the split-heads copy every attention layer makes (a real copy on both sides)."""
    return x.reshape(B, T, H, Dh).transpose(1, 2).reshape(B * H, T, Dh)


# Large shapes are the base model's: B 16, T 32, D 512, H 8, Dh 64, d_ff 2048, V 10000.
CASES: list[OpCase] = [
    OpCase("matmul", "small", ((8, 16), (16, 8)), lambda L, F, a, b: a @ b),
    OpCase("matmul", "large", ((16, 8, 32, 64), (16, 8, 64, 32)), lambda L, F, a, b: a @ b),
    OpCase("linear", "small", ((4, 8, 32), (32, 32), (32,)), lambda L, F, x, w, b: F.linear(x, w, b)),
    OpCase("linear", "large", ((16, 32, 512), (2048, 512), (2048,)), lambda L, F, x, w, b: F.linear(x, w, b)),
    OpCase("softmax", "small", ((4, 16),), lambda L, F, x: F.softmax(x, dim=-1)),
    OpCase("softmax", "large", ((16, 8, 32, 32),), lambda L, F, x: F.softmax(x, dim=-1)),
    OpCase("log_softmax", "small", ((4, 16),), lambda L, F, x: F.log_softmax(x, dim=-1)),
    OpCase("log_softmax", "large", ((512, 10000),), lambda L, F, x: F.log_softmax(x, dim=-1)),
    OpCase("layer_norm", "small", ((4, 8, 32), (32,), (32,)), lambda L, F, x, w, b: F.layer_norm(x, (32,), w, b)),
    OpCase("layer_norm", "large", ((16, 32, 512), (512,), (512,)), lambda L, F, x, w, b: F.layer_norm(x, (512,), w, b)),
    OpCase(
        "cross_entropy",
        "small",
        ((16, 20), Index((16,), 20)),
        lambda L, F, x, t: F.cross_entropy(x, t, ignore_index=0, label_smoothing=0.1),
    ),
    OpCase(
        "cross_entropy",
        "large",
        ((512, 10000), Index((512,), 10000)),
        lambda L, F, x, t: F.cross_entropy(x, t, ignore_index=0, label_smoothing=0.1),
    ),
    OpCase("gelu", "small", ((4, 32),), lambda L, F, x: F.gelu(x)),
    OpCase("gelu", "large", ((16, 32, 2048),), lambda L, F, x: F.gelu(x)),
    OpCase("relu", "small", ((4, 32),), lambda L, F, x: F.relu(x)),
    OpCase("relu", "large", ((16, 32, 2048),), lambda L, F, x: F.relu(x)),
    OpCase("add (broadcast)", "small", ((4, 8), (8,)), lambda L, F, a, b: a + b),
    OpCase("add (broadcast)", "large", ((16, 32, 512), (512,)), lambda L, F, a, b: a + b),
    OpCase("sum", "small", ((4, 8),), lambda L, F, x: x.sum(dim=-1)),
    OpCase("sum", "large", ((16, 32, 512),), lambda L, F, x: x.sum(dim=-1)),
    OpCase("transpose/reshape", "small", ((2, 4, 8),), lambda L, F, x: _heads(x, 2, 4, 2, 4)),
    OpCase("transpose/reshape", "large", ((16, 32, 512),), lambda L, F, x: _heads(x, 16, 32, 8, 64)),
    OpCase("getitem (slice)", "small", ((4, 8),), lambda L, F, x: x[:, 1:5]),
    OpCase("getitem (slice)", "large", ((16, 32, 512),), lambda L, F, x: x[:, 1:, :256]),
    OpCase("embedding", "small", (Index((4, 8), 20), (20, 32)), lambda L, F, i, w: F.embedding(i, w)),
    OpCase("embedding", "large", (Index((16, 32), 10000), (10000, 512)), lambda L, F, i, w: F.embedding(i, w)),
    OpCase("attention (composite)", "small", ((2, 2, 4, 8),) * 3 + (Mask((2, 1, 4, 4)),), _attention),
    OpCase("attention (composite)", "large", ((16, 8, 32, 64),) * 3 + (Mask((16, 1, 32, 32)),), _attention),
    OpCase("attention (model's)", "small", ((2, 2, 4, 8),) * 3 + (Mask((2, 1, 4, 4)),), _model_attention),
    OpCase("attention (model's)", "large", ((16, 8, 32, 64),) * 3 + (Mask((16, 1, 32, 32)),), _model_attention),
]


def _arrays(case: OpCase, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for spec in case.inputs:
        if isinstance(spec, Index):
            out.append(rng.integers(0, spec.high, spec.shape).astype(np.int64))
        elif isinstance(spec, Mask):
            m = rng.random(spec.shape) < 0.8
            m[0] = True  # row 0 fully visible so no row is ever empty by chance alone
            out.append(m)
        else:
            out.append(rng.standard_normal(spec).astype(np.float32))
    return out


def _make_runner(lib: str, case: OpCase, arrays: list[np.ndarray], upstream: np.ndarray | None):
    """(forward, forward+backward, forward output as NumPy) closures for one library."""
    if lib == "numpy":
        import minitensor as L
        import minitensor.nn.functional as F

        wrap = L.tensor
    else:
        import torch as L
        import torch.nn.functional as F

        wrap = torch_from_numpy
    leaves = []
    inputs = []
    for spec, arr in zip(case.inputs, arrays):
        if isinstance(spec, (Index, Mask)):
            inputs.append(wrap(arr))
        else:
            t = wrap(arr.copy())
            t.requires_grad_(True)
            leaves.append(t)
            inputs.append(t)
    g = None if upstream is None else wrap(upstream)

    def forward():
        with L.no_grad():
            return case.fn(L, F, *inputs)

    def fwd_bwd():
        for t in leaves:
            t.grad = None  # fresh gradients each call: no accumulation add on either side
        out = case.fn(L, F, *inputs)
        out.backward(g)
        return out

    def value():
        out = forward()
        return np.array(out.detach().numpy() if lib == "torch" else out.numpy())

    return forward, fwd_bwd, value


def torch_from_numpy(a: np.ndarray):
    import torch

    # not np.ascontiguousarray: it turns a 0-d upstream gradient into shape (1,)
    return torch.from_numpy(a if a.flags.c_contiguous else a.copy())


def case_runner(lib: str, index: int):
    """(forward, forward+backward, forward output as NumPy) of CASES[index] for 'numpy' or 'torch'.

    Inputs and the random upstream gradient come from a generator seeded by the case's index, so
    the two sides, each in its own process, draw the very same arrays.
    """
    case = CASES[index]
    rng = np.random.default_rng(1000 + index)
    arrays = _arrays(case, rng)
    out = _make_runner(lib, case, arrays, None)[2]()
    # A random upstream gradient of the output's shape (a 0-d array for scalar losses).
    upstream = np.asarray(rng.standard_normal(out.shape), dtype=np.float32)
    return _make_runner(lib, case, arrays, upstream)


def selected_cases(sizes, names=None) -> list[int]:
    """Indices into CASES of the chosen size classes (and op names, when given)."""
    return [i for i, c in enumerate(CASES) if c.size in sizes and (not names or c.name in names)]


def run_ops(
    workers: dict, checker, cases: list[int], rounds: int, target_ms: float = 5.0, settle_s: float = 0.0
) -> list[dict]:
    """Time op cases on both sides, each in its worker process, alternating whole passes A B A B.

    One pass times every case once (forward and forward+backward, each a loop of calls calibrated
    to ~target_ms); `rounds` passes per side. Ratios are medians of per-pass ratios. `checker`
    (a worker hosting both sides) compares the forward outputs.
    """
    from benchmarks.timing import alternate, ratio_stats, summarize

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


def ops_markdown(rows: list[dict]) -> str:
    """The op table: times in microseconds (medians), ratio = minitensor / PyTorch."""
    lines = [
        "| op | size | shapes | fwd minitensor (us) | fwd torch (us) | fwd ratio | fwd+bwd minitensor (us) "
        "| fwd+bwd torch (us) | fwd+bwd ratio | fwd max rel err |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['op']} | {r['size']} | {r['shapes']} | {r['numpy_fwd_ms'] * 1e3:.1f} | "
            f"{r['torch_fwd_ms'] * 1e3:.1f} | {r['ratio_fwd']:.2f} | {r['numpy_fb_ms'] * 1e3:.1f} | "
            f"{r['torch_fb_ms'] * 1e3:.1f} | {r['ratio_fb']:.2f} | "
            f"{r['fwd_max_rel']:.1e}{'' if r['fwd_ok'] else ' (MISMATCH)'} |"
        )
    return "\n".join(lines)


def plot_ops(rows: list[dict], path: str) -> None:
    """Horizontal bars of the forward+backward ratio per op, log scale, 1.0 marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['op']} ({r['size']})" for r in rows]
    ratios = [r["ratio_fb"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(rows) + 1.2))
    colors = ["tab:red" if x > 1.5 else "tab:orange" if x > 1.0 else "tab:green" for x in ratios]
    ax.barh(range(len(rows)), ratios, color=colors)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    from benchmarks.report import _plain_log_ticks

    _plain_log_ticks(ax.xaxis)
    ax.axvline(1.0, color="k", lw=1)
    ax.set_xlabel("forward+backward time, minitensor / PyTorch (log; < 1 = minitensor faster)")
    ax.set_title("Op microbenchmarks (float32)")
    for y, x in enumerate(ratios):
        ax.text(x, y, f" {x:.2f}", va="center", fontsize=7)
    fig.tight_layout()
    with atomic_write(path, "wb", suffix=".png") as f:  # never a half-written PNG
        fig.savefig(f, dpi=110, format="png")
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    from benchmarks.env import WAIT_POLICIES

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
        _run(args)
    except KeyboardInterrupt:  # one line, 130; the three files are all written or none replaced
        sys.exit(interrupted("python -m benchmarks.ops"))


def _run(args) -> None:
    from benchmarks.env import facts_line
    from benchmarks.worker import Worker

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
