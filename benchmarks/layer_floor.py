"""The recurrent layer and the convolution against their NumPy floor, beside PyTorch eager.

    python -m benchmarks.layer_floor [--threads 1] [--rounds 7] [--layers lstm conv2d]

The target: nn.LSTM (2 layers, hidden 256, sequence 64, batch 32) and Conv2d(32, 32, 3, padding=1) on
(64, 32, 28, 28), forward+backward in float32, within 1.1x of the same computation on bare NumPy arrays in the fewest
passes (benchmarks/bare_layers.py): what the engine adds to NumPy's own work. The ratio to PyTorch eager is reported
beside it; PyTorch's kernels are not NumPy's, so no target is set on it.

Each round, in separate processes (benchmarks/worker.py): the engine's and the bare formula's forward and
forward+backward in the numpy worker, PyTorch's in its own, each a loop of calls calibrated to about --target-ms
(benchmarks/ops.py's method). Ratios are per round; the table gives medians [IQR]. The bare forward is checked
against the engine's first (float32 OP_RTOL); its gradients against PyTorch's in tests/benchmarks/test_layer_floor.py.
"""

from __future__ import annotations

import sys
import time

from benchmarks.env import thread_env_from_argv

if __name__ == "__main__":
    # Thread counts must be in the environment before numpy/torch load (benchmarks/env.py loads neither).
    thread_env_from_argv(sys.argv, default=1)

from benchmarks.bare_layers import BARE_LAYERS
from benchmarks.fused_floor import FloorError, refuse_wrong
from benchmarks.op_cases import CASES, selected_cases
from benchmarks.rounds import SETTLE_S, add_flags, cell, report, started
from benchmarks.timing import summarize
from transformer_np.cli import OneLineParser
from transformer_np.cliutil import number

TARGET = 1.1  # the engine's forward+backward at most 1.1x the bare formula's
SIDES = ("numpy", "bare", "torch")  # the engine, the bare formula (both in the numpy worker), PyTorch


def measure(threads: int, rounds: int, names: list, target_ms: float) -> dict:
    cases = selected_cases(["layer"], names)
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
    layers = []
    for i in cases:
        k = str(i)
        layers.append(
            {
                "layer": CASES[i].name,
                "input": "x".join(map(str, CASES[i].inputs[0])),
                "fwd_max_rel_bare": errors[k],
                "rounds": [{s: r[s][k] for s in SIDES} for r in rows],
            }
        )
    return {"threads": threads, "rounds": rounds, "target_ms": target_ms, "target": TARGET, "layers": layers}


def ratios(layer: dict, side: str, over: str, p: str = "fb_ms") -> list[float]:
    """Per-round time of `side` over `over`'s."""
    return [r[side][p] / r[over][p] for r in layer["rounds"]]


def markdown(res: dict) -> str:
    n = res["threads"]
    lines = [
        f"Layers, float32, {n} thread{'s' if n > 1 else ''}: the engine, the same computation on bare NumPy arrays "
        f"(benchmarks/bare_layers.py, the floor) and PyTorch eager, median of {res['rounds']} rounds [IQR], a process "
        "per library.",
        "",
        "| layer | input | pass | floor ms | engine ms | PyTorch ms | engine / floor | engine / PyTorch | "
        f"floor / PyTorch | {res['target']:g}x of the floor |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for layer in res["layers"]:
        for p, label in (("fwd_ms", "forward"), ("fb_ms", "forward+backward")):
            ms = {s: summarize([r[s][p] for r in layer["rounds"]]).median_ms for s in SIDES}
            over_floor = ratios(layer, "numpy", "bare", p)
            verdict = "met" if summarize(over_floor).median_ms <= res["target"] else "missed"
            lines.append(
                f"| {layer['layer']} | {layer['input']} | {label} | {ms['bare']:.1f} | {ms['numpy']:.1f} | "
                f"{ms['torch']:.1f} | {cell(over_floor, 2)} | {cell(ratios(layer, 'numpy', 'torch', p), 2)} | "
                f"{cell(ratios(layer, 'bare', 'torch', p), 2)} | {verdict if p == 'fb_ms' else ''} |"
            )
    lines += ["", f"met: the engine's median forward+backward at most {res['target']:g}x the floor's (per round)."]
    return "\n".join(lines)


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="python -m benchmarks.layer_floor", description=__doc__.split("\n\n")[0])
    add_flags(p, threads=1, rounds=7, rounds_help="rounds, each library once a round", config=False)
    p.add_argument("--layers", nargs="+", choices=sorted(BARE_LAYERS), help="the layers to time (default: both)")
    p.add_argument(
        "--target-ms", type=number(0.1), default=5.0, help="each figure's loop of calls, ms (default: %(default)s)"
    )
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return report(
            "python -m benchmarks.layer_floor",
            lambda: measure(args.threads, args.rounds, args.layers or sorted(BARE_LAYERS), args.target_ms),
            markdown,
            args.json,
        )
    except FloorError as exc:
        print(f"python -m benchmarks.layer_floor: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
