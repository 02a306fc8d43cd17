"""The least a Hessian-vector product can cost, in gradients, given how much of a gradient is matrix products.

    python -m benchmarks.hvp_floor [--config base] [--threads 1] [--rounds 3] [--calls 2]

An H v is measured in gradients: its time over one gradient's time on the same side. Both cheap forms, forward
over reverse (torch.func.jvp of torch.func.grad, mt.func likewise, and mt.autograd.functional.hvp) and double
backward, compute the gradient itself on the way (the primal forward and backward) and, for every matrix product
of the gradient, two more of the same size: a product's tangent is A' B + A B' (v is dense, so every operand has a
tangent), three products of the gradient's become nine. torch.utils.flop_counter counts exactly 3x the gradient's
product FLOPs for both forms (tests/benchmarks/test_hvp_floor.py). So with P the time of the gradient's products and G
the gradient's,

    H v  >=  G + 2 P,   in gradients:  1 + 2 P / G,

whatever else is made faster: the rest of the H v (the elementwise work on primal and tangent) is at least the
gradient's own rest, G - P, and its products, of the gradient's shapes, run at the rate the gradient's run at. P is
taken at the fastest reading there is (below), so the bound is if anything low. The bound is larger the more of a
gradient is products, that is, the faster the rest of the engine is. Where minitensor's bound exceeds PyTorch's
cheapest measured H v, the target "no more gradients than PyTorch's cheapest" is out of reach on that config, though
the H v may take less time than PyTorch's.

Each round, in separate processes (benchmarks/worker.py), one after the other, each side: one gradient, the
gradient's products replayed alone (flops.step_products: a gradient has the training step's products), the H v
forms; for NumPy also the best rate on the dominant product shape. P is the lower of the replay and the products'
FLOPs at that best rate, so that the bound does not rest on the replay's own overheads (as benchmarks/budget.py).
Each round's figures are its own; the table gives medians over rounds [IQR]. float32 and eval mode, as the
benchmarks' HVP section.
"""

from __future__ import annotations

import statistics
import sys
import time

from benchmarks.env import thread_env_from_argv

if __name__ == "__main__":
    # Thread counts must be in the environment before numpy/torch load (benchmarks/env.py loads neither).
    thread_env_from_argv(sys.argv, default=1)

from benchmarks import flops
from benchmarks import workloads as W
from benchmarks.rounds import SETTLE_S, add_flags, cell, median_ms, report, started
from benchmarks.timing import summarize
from transformer_np.cli import OneLineParser
from transformer_np.cliutil import integer

FORMS = {  # side -> the H v workloads timed (benchmarks/workloads.py); torch's functional.hvp is its double-vjp
    "numpy": ("hvp_fwd_rev", "hvp_functional", "hvp"),  # trick at 5x the products, never its cheapest: left out
    "torch": ("hvp_fwd_rev", "hvp"),
}
FORM_NAMES = {
    "hvp_fwd_rev": "func.jvp(func.grad)",
    "hvp_functional": "autograd.functional.hvp",
    "hvp": "double backward",
}
PRODUCT_MULTIPLE = 3  # an H v's products over its gradient's (counted by torch's FlopCounterMode: the test)


def one_round(workers: dict, spec: dict, calls: int, shape: list) -> dict:
    """One round's figures in ms, per side: the gradient, its products replayed, each H v form; NumPy's best GEMM."""
    out = {}
    for side, w in workers.items():
        time.sleep(SETTLE_S)
        timed = {"op": "time", "side": side, "config": spec, "calls": calls, "warmup": 0}
        row = {"grad": median_ms(w, dict(timed, workload="grad"))}
        row["products"] = median_ms(w, {"op": "products", "side": side, "config": spec, "calls": calls})
        for form in FORMS[side]:
            row[form] = median_ms(w, dict(timed, workload=form))
        if side == "numpy":
            gemm = w.request({"op": "gemm", "side": side, "shape": shape, "calls": 5})["samples_ms"]
            row["gemm_ms"] = min(gemm)  # the best call: the BLAS's rate, not the machine's worst moment
        out[side] = row
    return out


def derive(row: dict, grad_gflop: float, gemm_gflop: float) -> dict:
    """A side's round with its bound: P (the lower reading of the products), P / G, 1 + 2 P / G, each form and the
    cheapest in gradients."""
    r = dict(row)
    p = r["products"]
    if "gemm_ms" in r:
        r["products_at_rate"] = grad_gflop / (gemm_gflop / r["gemm_ms"])  # ms: the FLOPs at the best rate
        p = min(p, r["products_at_rate"])
    r["p"], r["share"] = p, p / r["grad"]
    r["bound"] = 1 + (PRODUCT_MULTIPLE - 1) * r["share"]
    costs = {form: r[form] / r["grad"] for form in FORM_NAMES if form in r}
    r["costs"], r["cheapest"] = costs, min(costs.values())
    return r


def measure(config: str, threads: int, rounds: int, calls: int) -> dict:
    cfg = W.get_config(config)
    spec = {"name": config}
    shape = list(flops.dominant_gemm(cfg))
    grad_gflop = flops.workload_flops(cfg, "train") / 1e9  # a gradient has the training step's products
    gemm_gflop = 2 * shape[0] * shape[1] * shape[2] / 1e9
    with started(FORMS, threads) as workers:
        for side, w in workers.items():  # build the models and make each side's direction before the first round
            for workload in ("grad", *FORMS[side]):
                w.request({"op": "time", "side": side, "config": spec, "workload": workload, "calls": 1})
        rows = [one_round(workers, spec, calls, shape) for _ in range(rounds)]
    rows = [{side: derive(r[side], grad_gflop, gemm_gflop) for side in r} for r in rows]
    return {
        "config": config,
        "threads": threads,
        "rounds": rounds,
        "calls": calls,
        "grad_gflop": grad_gflop,
        "gemm_shape": shape,
        "rows": rows,
    }


def _pair(rows: list, get, digits: int = 1) -> str:
    cells = []
    for side in FORMS:
        values = [get(r[side]) for r in rows]
        cells.append("—" if None in values else cell(values, digits))
    return " | ".join(cells)


def _cost(form: str):
    """How to read one side's cost of `form` in gradients (None where the side has no such form)."""
    return lambda s: s["costs"].get(form)


ROWS = [  # (label, how to read one side's round, digits)
    ("one gradient G, ms", lambda s: s["grad"], 1),
    ("the gradient's products replayed, ms", lambda s: s["products"], 1),
    ("the gradient's products at the best GEMM rate, ms", lambda s: s.get("products_at_rate"), 1),
    ("P / G: the products' share of a gradient", lambda s: s["share"], 2),
    ("bound: 1 + 2 P / G gradients", lambda s: s["bound"], 2),
    *((f"H v by {name}, gradients", _cost(form), 2) for form, name in FORM_NAMES.items()),
    ("the cheapest H v, gradients", lambda s: s["cheapest"], 2),
]


def markdown(res: dict) -> str:
    rows = res["rows"]
    lines = [
        f"The least an H v can cost, {res['config']}, {res['threads']} thread{'s' if res['threads'] > 1 else ''}, "
        f"float32: {res['grad_gflop']:.1f} GFLOP of products a gradient, {PRODUCT_MULTIPLE}x that an H v; median "
        f"of {res['rounds']} rounds of {res['calls']} calls [IQR], a process per side.",
        "",
        "| what | minitensor | PyTorch |",
        "|---|---|---|",
    ]
    lines += [f"| {label} | {_pair(rows, get, digits)} |" for label, get, digits in ROWS]
    ours_bound = [r["numpy"]["bound"] for r in rows]
    theirs = [r["torch"]["cheapest"] for r in rows]
    ours = [r["numpy"]["cheapest"] for r in rows]
    time_ratio = [
        r["numpy"]["cheapest"] * r["numpy"]["grad"] / (r["torch"]["cheapest"] * r["torch"]["grad"]) for r in rows
    ]
    lines += [
        "",
        f"minitensor's cheapest H v over PyTorch's cheapest, in time: {cell(time_ratio, 2)}",
    ]
    bound, cheapest, torch_cheapest = (statistics.median(v) for v in (ours_bound, ours, theirs))
    where = res["config"]
    if summarize([b - t for b, t in zip(ours_bound, theirs)]).q1_ms > 0:
        verdict = (
            f"out of reach on {where}: minitensor's bound ({bound:.2f} gradients) exceeds PyTorch's cheapest H v "
            f"({torch_cheapest:.2f}) in three rounds of four"
        )
    elif cheapest <= torch_cheapest:
        verdict = f"met on {where}: {cheapest:.2f} gradients against {torch_cheapest:.2f}"
    else:
        verdict = (
            f"within reach on {where}: the bound ({bound:.2f}) is under PyTorch's cheapest ({torch_cheapest:.2f}), "
            f"minitensor's cheapest {cheapest:.2f}"
        )
    lines.append(verdict)
    return "\n".join(lines)


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="python -m benchmarks.hvp_floor", description=__doc__.split("\n\n")[0])
    add_flags(p, threads=1, rounds=3, rounds_help="rounds, each side once a round")
    p.add_argument("--calls", type=integer(1), default=2, help="calls timed per figure (default: %(default)s)")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    compute = lambda: measure(args.config, args.threads, args.rounds, args.calls)
    return report("python -m benchmarks.hvp_floor", compute, markdown, args.json)


if __name__ == "__main__":
    sys.exit(main())
