"""`python -m benchmarks run`: the whole benchmark, from thread settings to results.md, in order.

At each thread count of `--threads` (a list: `--threads 1,2`) this starts a worker process per framework
(benchmarks/worker.py; PyTorch twice: parity's twin and torch.nn.Transformer) and one holding every side for
the checks, then runs each part in turn: the GEMM
reference rate, every config (benchmarks/measure.py: forward, forward+backward, training step, greedy and beam
decoding, alternating processes A B A B), the Hessian-vector products and jacfwd/jacrev,
peak memory (benchmarks/memory.py),
attention's memory and time (benchmarks/attention.py), the scaling series, the op microbenchmarks
(benchmarks/ops.py), the engine's cost per op
(benchmarks/perop.py) and the targets (benchmarks/targets.py); then it writes the report (benchmarks/report.py).
The flags and their defaults are in benchmarks/cli.py. `--in-process` times both sides in one process instead:
kept to show the difference, labelled as such, never the headline.
"""

from __future__ import annotations

import datetime
import os
import sys
import time

from benchmarks import gpt_recipe, gpu, perop, ranks, report, results_page
from benchmarks.attention import bench_attention
from benchmarks.cli import build_parser, resolve_settings
from benchmarks.measure import bench_config, bench_hvp, bench_jacobians, bench_memory, bench_scaling, gemm_rate
from benchmarks.op_cases import selected_cases
from benchmarks.ops import run_ops
from benchmarks.targets import evaluate_targets
from benchmarks.worker import Worker, WorkerError
from transformer_np.cliutil import interrupted, interrupts_as_such, sigint_deferred
from transformer_np.parallel import shard_rows


# ------------------------------------------------------------------------------------- workers
def start_workers(threads: int, settings: dict):
    """({side: Worker} for the timed sides, the Worker hosting both sides for the checks)."""
    both = Worker("both", threads, settings["wait_policy"])
    # PyTorch twice: parity's twin, and torch.nn.Transformer unless --skip nn (benchmarks/nn_side.py)
    torch_sides = ["torch"] if "nn" in settings["skip"] else ["torch", "torch-nn"]
    if settings["in_process"]:
        return {"numpy": both, **{s: both for s in torch_sides}}, both
    return {
        "numpy": Worker("numpy", threads, settings["wait_policy"]),
        **{s: Worker(s, threads, settings["wait_policy"]) for s in torch_sides},
    }, both


def close_workers(timed: dict, both, kill: bool = False) -> None:
    for w in {id(w): w for w in [*timed.values(), both]}.values():
        w.close(kill=kill)


# ---------------------------------------------------------------------------------------- main
def run_threads(threads: int, settings: dict, log) -> dict:
    """Everything at one thread count: a section of the report."""
    timed, both = start_workers(threads, settings)
    try:
        facts = both.request({"op": "facts"})
        section = {"threads": threads, "machine": facts, "configs": {}, "notes": []}
        load = facts.get("load_average")
        if load and load[0] > facts["usable_cores"]:
            section["notes"].append(
                f"load average {load[0]:.1f} exceeds the {facts['usable_cores']} usable cores: other processes "
                "compete for the CPUs and every time here is inflated (multi-threaded ops most)"
            )
            log("WARNING: " + section["notes"][-1])
        if settings["device"] != "cpu" and facts.get("cuda_available"):
            if settings["in_process"]:
                section["notes"].append("CUDA rows are timed only with a process per side (no --in-process)")
            else:
                timed["torch-cuda"] = Worker("torch-cuda", threads, settings["wait_policy"])
        elif settings["device"] == "cuda":
            section["notes"].append("no CUDA device (torch.cuda.is_available() is False): CUDA rows skipped")
        n = settings["gemm_reference_n"]
        section["gemm_reference"] = gemm_rate(timed, (n, n, n), settings)
        g = section["gemm_reference"]
        log(f"float32 GEMM {n}^3: NumPy/OpenBLAS {g['numpy']:.0f} GFLOP/s, PyTorch {g['torch']:.0f} GFLOP/s")
        for name in settings["configs"]:
            log(f"config {name}")
            section["configs"][name] = bench_config(name, timed, both, settings, log)
        if "hvp" not in settings["skip"]:
            log("Hessian-vector products")
            section["hvp"] = bench_hvp(timed, both, settings, log)
            log("jacfwd and jacrev")
            section["jacobians"] = bench_jacobians(timed, settings, log)
        if "memory" not in settings["skip"]:
            log("memory (fresh subprocess per side)")
            section["memory"] = bench_memory(settings, threads, log)
        if "attention" not in settings["skip"]:
            log("attention memory/time: {dense, tiled} x {plain, checkpointed} (fresh subprocess per point)")
            section["attention"] = bench_attention(
                settings["attention_lengths"],
                settings["attention_steps"],
                threads,
                settings["attention_memory_gib"],
                log,
            )
        if "scaling" not in settings["skip"]:
            log("scaling series")
            section["scaling"] = bench_scaling(timed, settings, log)
        if "ops" not in settings["skip"]:
            log("op microbenchmarks")
            cpu = {s: w for s, w in timed.items() if s in ("numpy", "torch")}
            section["ops"] = run_ops(
                cpu,
                both,
                selected_cases(settings["ops_sizes"]),
                settings["ops_repeats"],
                settings["ops_target_ms"],
                settings["settle_s"],
            )
        if "perop" not in settings["skip"]:
            log("the engine's cost per op (benchmarks/perop.py: a child process per framework)")
            rounds, calls = (2, 10) if settings["quick"] else (5, 30)
            section["perop"] = perop.measure(threads, rounds, calls=calls)
    except BaseException:  # Ctrl-C or a failure: stop the workers now, not after their current request
        close_workers(timed, both, kill=True)
        raise
    close_workers(timed, both)
    section["targets"] = evaluate_targets(section)
    return section


def run(args) -> dict:
    """Every thread count in turn; returns the results dict it also writes."""
    t_start = time.perf_counter()
    settings = resolve_settings(args)

    def log(msg):
        print(f"[{time.perf_counter() - t_start:6.1f} s] {msg}", flush=True)

    results = {
        "command": "python -m benchmarks " + " ".join(sys.argv[1:]),
        "started_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "method": "in-process" if settings["in_process"] else "separate processes",
        "settings": settings,
        "threads": {},
    }
    for threads in settings["threads"]:
        log(
            f"=== {threads} thread{'s' if threads > 1 else ''} "
            f"({'both sides in one process' if settings['in_process'] else 'one process per side'}) ==="
        )
        results["threads"][str(threads)] = run_threads(threads, settings, log)
    if "gpu" in settings["skip"]:
        pass
    elif settings["device"] == "cpu":
        log("GPU section skipped: --device cpu")
    else:  # minitensor on CuPy beside torch CUDA (benchmarks/gpu.py); one line when there is no GPU
        results["gpu"] = gpu.bench_gpu(quick=settings["quick"], log=log)
    results["elapsed_s"] = time.perf_counter() - t_start
    results["load_average_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    os.makedirs(args.out, exist_ok=True)  # only now: an interrupted run leaves no empty folder either
    with sigint_deferred():  # results.md, results.json and the PNGs: all of this run's, never a mix
        text = report.write_outputs(results, args.out)
    print(text)
    print(f"\nwrote {args.out}/results.md, results.json, *.png")
    print(f"the committed headline page: python -m benchmarks results --in {args.out}/results.json")
    if "configs" in results.get("gpu", {}):
        print("wrote " + gpu.write(results["gpu"], args.out))
    return results


def main(argv: list[str] | None = None) -> None:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.command == "gpu":  # the GPU section alone: benchmarks/gpu.py
        sys.exit(gpu.main(args))
    if args.command == "gpt-recipe":  # the baby GPT recipe, both sides: benchmarks/gpt_recipe.py
        sys.exit(gpt_recipe.main(args))
    if args.command == "results":  # the committed headline page from a results.json: benchmarks/results_page.py
        sys.exit(results_page.main(args))
    if args.command == "ranks":  # data parallelism over MPI: benchmarks/ranks.py
        for n in args.ranks or [1, 2, 4]:
            try:
                shard_rows(args.batch_size, n, 0)
            except ValueError as e:
                ap.error(str(e))
        sys.exit(ranks.main(args))
    if os.path.exists(args.out) and not os.path.isdir(args.out):  # found now, not after the run
        ap.error(f"--out {args.out!r} is a file, expected a directory")
    try:
        with interrupts_as_such():
            run(args)
    except KeyboardInterrupt:  # as `python -m transformer_np train`: one line, 130, no output file touched
        sys.exit(interrupted("python -m benchmarks run"))
    except WorkerError as exc:  # a worker failed: its message in one line, not a traceback
        print(f"python -m benchmarks: {exc}", file=sys.stderr)
        sys.exit(1)
