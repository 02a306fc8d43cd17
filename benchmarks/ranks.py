"""`python -m benchmarks ranks`: data-parallel throughput over 1, 2, 4 ranks, minitensor's DDP beside torch's DDP.

For each rank count N, and each framework in alternating rounds (A B A B), one launch of
`mpiexec -n N python -m benchmarks.ranks_worker ...` (benchmarks/ranks_worker.py) trains the same float32 model
on the same global batch, one thread per rank; every framework runs in processes of its own. Reported:
  * global tokens per second (median over the rounds' step medians, with the spread min-max);
  * the gradient bytes all-reduced per step, and the time one blocking all-reduce of them takes alone;
  * minitensor only: the time a step waits for its all-reduces after the backward (`exposed`), and how much of
    the all-reduce the overlap hid, 1 - exposed / alone, with the default 25 MB bucket and with 1 MB buckets;
  * a projection to a cluster from the measured bytes (ring all-reduce: each rank sends and receives
    2 (N-1)/N of the gradient bytes, in 2 (N-1) latency-bound rounds).
What a 2-core machine can and cannot show is written into the report (`LIMITS`).
"""

from __future__ import annotations

import json
import os
import statistics
import sys

from minitensor.nn.parallel import run_ranks
from minitensor.serialization import atomic_write

FRAMEWORKS = ("minitensor", "torch")
LIMITS = (
    "On this machine (2 cores, shared), ranks beyond 2 share cores: 4 ranks time-slice 2 cores, so their "
    "throughput shows the cost of oversubscription, not scaling. The all-reduce runs through shared memory "
    "between processes of one machine, far faster than a network, and MPICH advances a non-blocking all-reduce "
    "only inside MPI calls (no progress thread by default), so what the overlap can hide here is small and "
    "noisy. What it can show: that N ranks do the same work as one (equal step results, docs/distributed.md), "
    "the bytes each step must move, and the bookkeeping cost of the wrapper. What it cannot: speed-up with "
    "more ranks, or network-bound behaviour; the projection below estimates that from the measured bytes."
)
# A projection's assumed network: 100 Gb/s links (12.5 GB/s) and 5 us per message, a common cluster interconnect
PROJECT_BANDWIDTH = 12.5e9
PROJECT_LATENCY = 5e-6
PROJECT_RANKS = (8, 64)


def _launch(framework: str, n: int, preset: str, batch: int, steps: int, bucket_mb: float) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), env.get("PYTHONPATH", "")) if p)
    argv = ["-m", "benchmarks.ranks_worker", framework, preset, str(batch), str(steps), str(bucket_mb)]
    done = run_ranks(n, argv, timeout=600, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RANKS_RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{framework} on {n} ranks failed (exit {done.returncode}): {done.stderr[-800:]}")
    return json.loads(lines[0].removeprefix("RANKS_RESULT "))


def ring_allreduce_s(nbytes: int, n: int, bandwidth: float = PROJECT_BANDWIDTH, latency: float = PROJECT_LATENCY):
    """Ring all-reduce time: 2 (N-1) steps, each sending 1/N of the bytes: 2 (N-1)/N * bytes / bandwidth + latency."""
    return 2 * (n - 1) / n * nbytes / bandwidth + 2 * (n - 1) * latency


def run(ranks: list[int], preset: str, batch: int, steps: int, rounds: int, log=print) -> dict:
    rows = []
    for n in ranks:
        for bucket_mb in (25.0, 1.0) if n > 1 else (25.0,):
            runs = {f: [] for f in FRAMEWORKS}
            for r in range(rounds):
                for f in FRAMEWORKS if r % 2 == 0 else FRAMEWORKS[::-1]:  # A B, then B A
                    log(f"ranks {n}, bucket {bucket_mb:g} MB, round {r + 1}/{rounds}: {f}")
                    runs[f].append(_launch(f, n, preset, batch, steps, bucket_mb))
            for f, results in runs.items():
                rows.append(_summarise(f, n, bucket_mb, results))
    return {"preset": preset, "global_batch": batch, "steps": steps, "rounds": rounds, "rows": rows}


def _summarise(framework: str, n: int, bucket_mb: float, results: list) -> dict:
    medians = [statistics.median(r["step_s"]) for r in results]
    first = results[0]
    row = {
        "framework": framework, "ranks": n, "bucket_mb": bucket_mb, "buckets": first.get("buckets"),
        "tokens_per_s": first["tokens"] / statistics.median(medians),
        "tokens_per_s_range": [first["tokens"] / max(medians), first["tokens"] / min(medians)],
        "step_ms": 1e3 * statistics.median(medians), "grad_bytes": first["grad_bytes"],
        "allreduce_ms": 1e3 * statistics.median(r["allreduce_s"] for r in results),
    }  # fmt: skip
    if first["exposed_wait_s"] and n > 1:
        row["exposed_ms"] = 1e3 * statistics.median(w for r in results for w in r["exposed_wait_s"])
        row["hidden"] = max(0.0, 1 - row["exposed_ms"] / row["allreduce_ms"]) if row["allreduce_ms"] > 0 else None
    return row


def markdown(res: dict, command: str) -> str:
    out = [
        "## Ranks: data-parallel throughput (1 thread per rank)",
        "",
        f"`{command}`: preset {res['preset']}, float32, dropout 0.1, global batch {res['global_batch']}, "
        f"{res['steps']} timed steps per launch, {res['rounds']} alternating rounds per framework.",
        "",
        "| framework | ranks | bucket | tokens/s (spread) | step ms | grad MB/step | all-reduce alone ms | "
        "exposed wait ms | hidden |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["rows"]:
        lo, hi = r["tokens_per_s_range"]
        buckets = f"{r['bucket_mb']:g} MB" + (f" ({r['buckets']})" if r["buckets"] else "")
        exposed = f"{r['exposed_ms']:.1f}" if "exposed_ms" in r else "-"
        hidden = f"{100 * r['hidden']:.0f}%" if r.get("hidden") is not None else "-"
        out.append(
            f"| {r['framework']} | {r['ranks']} | {buckets} | {r['tokens_per_s']:.0f} ({lo:.0f}-{hi:.0f}) | "
            f"{r['step_ms']:.1f} | {r['grad_bytes'] / 1e6:.2f} | {r['allreduce_ms']:.2f} | {exposed} | {hidden} |"
        )
    out += ["", LIMITS, "", _projection(res)]
    return "\n".join(out)


def _projection(res: dict) -> str:
    one = next((r for r in res["rows"] if r["framework"] == "minitensor" and r["ranks"] == 1), None)
    if one is None:
        return ""
    nbytes, compute = one["grad_bytes"], one["step_ms"] / 1e3
    lines = [
        f"Projection to a cluster (ring all-reduce over {PROJECT_BANDWIDTH * 8 / 1e9:.0f} Gb/s links, "
        f"{PROJECT_LATENCY * 1e6:.0f} us per message; {nbytes / 1e6:.2f} MB of float32 gradient per step, 4 bytes "
        "per parameter; the global batch kept, so each rank's compute is the 1-rank step over N):",
        "",
        "| ranks | compute s/step | all-reduce s/step | efficiency without overlap | with full overlap |",
        "|---|---|---|---|---|",
    ]
    for n in PROJECT_RANKS:
        c, a = compute / n, ring_allreduce_s(nbytes, n)
        lines.append(f"| {n} | {c:.4f} | {a:.4f} | {c / (c + a):.0%} | {min(1.0, c / max(c, a)):.0%} |")
    return "\n".join(lines)


def main(args) -> int:
    ranks = args.ranks or ([1, 2] if args.quick else [1, 2, 4])
    steps, rounds = (2, 1) if args.quick else (args.steps, args.rounds)
    res = run(ranks, args.preset, args.batch_size, steps, rounds, log=lambda m: print(m, file=sys.stderr))
    command = "python -m benchmarks " + " ".join(sys.argv[1:])
    text = markdown(res, command)
    os.makedirs(args.out, exist_ok=True)
    with atomic_write(os.path.join(args.out, "ranks.json")) as f:
        json.dump({**res, "command": command}, f, indent=1)
    with atomic_write(os.path.join(args.out, "ranks.md")) as f:
        f.write(text + "\n")
    print(text)
    return 0
