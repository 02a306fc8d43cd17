"""A/B of two source trees of the project: is the engine slower after a change than before it?

    python -m benchmarks.ab --before DIR --after DIR [--rounds 10] [--cases train:copy:1,decode:copy-reverse:1,perop:1]
    python -m benchmarks.ab --before . --after . --env-before MT_FAST_WITHOUT=layer_norm   # one speed device's gain

Each case is timed in a fresh process per side (PYTHONPATH set to that side's tree, its thread count set before
NumPy loads), rounds alternating which side runs first; a round's figure per side is the median of its calls after
a warm-up, and the round's ratio is after / before. The table gives the median ratio over rounds with its
interquartile range: under 1 is faster after. Cases, `kind:config:threads` (perop takes no config):

    train    one training step (benchmarks/workloads.py's `train`: zero_grad, forward, loss, backward, clipping, Adam)
    decode   greedy decoding with the key/value cache (`greedy_cache`)
    hvp      one Hessian-vector product by forward over reverse (`hvp_fwd_rev`)
    perop    the engine's cost per recorded op and per op with its backward (benchmarks/perop.py's chain)

`--env-before` and `--env-after` add environment variables to one side (a speed device turned off by
MT_FAST_WITHOUT, say), so that one tree can be measured against itself. Both trees must have benchmarks/workloads.py
and benchmarks/perop.py as they are here. The environment is the caller's, apart from the thread variables: to
measure as users run OpenBLAS, unset OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for this command.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from benchmarks.env import thread_env
from transformer_np.cliutil import OneLineParser

DEFAULT_CASES = [f"train:{c}:{t}" for c in ("copy", "copy-reverse", "base", "long") for t in (1, 2)]
DEFAULT_CASES += ["decode:copy-reverse:1", "perop:1"]
CALLS = {"train": 10, "decode": 5, "hvp": 5}

# The child: runs in the side's tree (imports resolve there), prints one JSON line of medians in seconds.
CHILD = r"""
import json, statistics, sys, time
kind, config, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind == "perop":
    from benchmarks.perop import child
    print(json.dumps(child("minitensor", 66, (4, 4), calls)))
    sys.exit(0)
from benchmarks.workloads import build_numpy_model, get_config, make_batch, numpy_side
import minitensor
minitensor.reuse_freed_memory()  # as a training process does (docs/decisions/008-reuse-freed-memory.md)
cfg = get_config(config)
side = numpy_side(cfg, build_numpy_model(cfg), make_batch(cfg))
fn = {"train": side.train, "decode": side.greedy_cache, "hvp": side.hvp_fwd_rev}[kind]
fn(); fn()  # warm-up: caches, the allocator, the pool
times = []
for _ in range(calls):
    start = time.perf_counter(); fn(); times.append(time.perf_counter() - start)
print(json.dumps({kind: statistics.median(times)}))
"""


def parse_case(text: str) -> tuple:
    """'train:copy:1' -> ('train', 'copy', 1); 'perop:1' -> ('perop', '', 1)."""
    parts = text.split(":")
    kind = parts[0]
    if kind == "perop" and len(parts) == 2 and parts[1].isdigit():
        return kind, "", int(parts[1])
    if kind in CALLS and len(parts) == 3 and parts[2].isdigit() and parts[1]:
        return kind, parts[1], int(parts[2])
    raise ValueError(
        f"a case is train:CONFIG:THREADS, decode:CONFIG:THREADS, hvp:CONFIG:THREADS or perop:THREADS, got {text!r}"
    )


def run_side(tree: str, case: tuple, calls: int | None = None, extra_env: dict | None = None) -> dict:
    """One process of `tree` timing `case`: its medians, seconds."""
    kind, config, threads = case
    env = {**os.environ, **thread_env(threads), "PYTHONPATH": tree, **(extra_env or {})}
    n = calls or CALLS.get(kind, 30)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, kind, config or "-", str(n)], env=env, cwd=tree, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise RuntimeError(f"{tree}: {kind} {config} failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def figures(medians: dict, kind: str) -> dict:
    """What a case reports: seconds a step or a decode, or of the perop chain (3 * 66 + 1 ops) microseconds per op
    (the bare NumPy calls' time taken off) and the objects a recorded op keeps for the collector to walk."""
    if kind != "perop":
        return {kind: medians[kind]}
    ops = 3 * 66 + 1
    return {
        "recorded_us": (medians["recorded"] - medians["bare_forward"]) / ops * 1e6,
        "fwd_bwd_us": (medians["fwd_bwd"] - medians["bare_fwd_bwd"]) / ops * 1e6,
        "kept_per_op": medians["kept_objects"] / ops,  # objects the collector walks, per recorded op
    }


def quartiles(xs: list) -> tuple:
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return q[0], q[1], q[2]


def compare(before: str, after: str, cases: list, rounds: int, calls: int | None = None, say=print, envs=({}, {})):
    """Per case and figure: (case text, figure, median ratio after/before, q1, q3, median before, median after).
    envs: extra environment variables of the before side and of the after side."""
    rows = []
    for case in cases:
        kind = case[0]
        ratios, b_vals, a_vals = {}, {}, {}
        for r in range(rounds):
            order = [(before, "b", envs[0]), (after, "a", envs[1])]
            order = order if r % 2 == 0 else order[::-1]
            got = {side: figures(run_side(tree, case, calls, env), kind) for tree, side, env in order}
            for name in got["a"]:
                ratios.setdefault(name, []).append(got["a"][name] / got["b"][name])
                b_vals.setdefault(name, []).append(got["b"][name])
                a_vals.setdefault(name, []).append(got["a"][name])
        label = ":".join(str(p) for p in case if p != "")
        for name, rs in ratios.items():
            q1, med, q3 = quartiles(rs)
            rows.append((label, name, med, q1, q3, statistics.median(b_vals[name]), statistics.median(a_vals[name])))
            say(f"{label:24} {name:12} after/before {med:.3f} [{q1:.3f}-{q3:.3f}]")
    return rows


def markdown(rows: list, rounds: int) -> str:
    lines = [
        f"| case | figure | after / before, median [IQR] over {rounds} rounds | before | after |",
        "|---|---|---|---|---|",
    ]
    for label, name, med, q1, q3, b, a in rows:
        unit = " us" if name.endswith("_us") else "" if name == "kept_per_op" else " s"  # kept: a count
        lines.append(f"| {label} | {name} | {med:.3f} [{q1:.3f}-{q3:.3f}] | {b:.4g}{unit} | {a:.4g}{unit} |")
    return "\n".join(lines)


def unknown_devices(names: str) -> list:
    """The names in an MT_FAST_WITHOUT value that no speed device of this tree registers (a typo would otherwise
    measure nothing: the device stays on on both sides)."""
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    if not wanted:
        return []
    from minitensor import fast  # only here: the tool times other processes and need not load the engine itself
    from transformer_np import decoding_cache  # noqa: F401 (registers the decoder's devices)

    return [n for n in wanted if n not in fast.registered()]


def main(argv=None) -> int:
    p = OneLineParser(prog="python -m benchmarks.ab", description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, help="the source tree before the change (a checkout's root)")
    p.add_argument("--after", required=True, help="the source tree after it")
    p.add_argument("--rounds", type=int, default=10, help="alternating rounds per case (default 10)")
    p.add_argument("--cases", default=",".join(DEFAULT_CASES), help="comma-separated cases (default: %(default)s)")
    p.add_argument("--calls", type=int, default=None, help="timed calls per process (default: per kind)")
    p.add_argument("--env-before", action="append", default=[], metavar="KEY=VALUE", help="set in the before side")
    p.add_argument("--env-after", action="append", default=[], metavar="KEY=VALUE", help="set in the after side")
    args = p.parse_args(argv)
    for tree in (args.before, args.after):
        if not os.path.isfile(os.path.join(tree, "benchmarks", "workloads.py")):
            p.error(f"--before/--after: {tree!r} is not a checkout of this project (no benchmarks/workloads.py)")
    if args.rounds < 1:
        p.error(f"--rounds: expected at least 1, got {args.rounds}")
    try:
        cases = [parse_case(c.strip()) for c in args.cases.split(",") if c.strip()]
    except ValueError as e:
        p.error(f"--cases: {e}")
    envs = []
    for flag, pairs in (("--env-before", args.env_before), ("--env-after", args.env_after)):
        bad = [p_ for p_ in pairs if "=" not in p_ or not p_.split("=", 1)[0]]
        if bad:
            p.error(f"{flag}: expected KEY=VALUE, got {bad[0]!r}")
        envs.append(dict(p_.split("=", 1) for p_ in pairs))
        unknown = unknown_devices(envs[-1].get("MT_FAST_WITHOUT", ""))
        if unknown:
            p.error(f"{flag}: MT_FAST_WITHOUT names no registered speed device: {', '.join(unknown)}")
    rows = compare(os.path.abspath(args.before), os.path.abspath(args.after), cases, args.rounds, args.calls, envs=envs)
    print(markdown(rows, args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
