"""`python -m benchmarks run`: the whole benchmark, from thread settings to results.md.

At each thread count of `--threads` (a list: `--threads 1,2`), every measurement runs with each
framework in its own worker process (benchmarks/worker.py), the two processes taking turns
A B A B over several rounds (benchmarks/timing.py); the ratio is the median of the per-round
ratios, reported with their spread. Per config: forward, forward+backward, training step and
greedy decoding (without and with the key/value cache), transformer_np against parity's PyTorch
model holding the same weights; beside each time, the fraction of the machine's GEMM rate it
reaches (benchmarks/flops.py counts the matrix-product FLOPs; the rate is measured in the same
run, in each side's own process, on the config's dominant product shape). A third process
holding both sides checks that they compute the same logits and tokens, and measures the
interference that one process would add: PyTorch's training step alone and right after a NumPy
step. Then one Hessian-vector product beside one gradient on each side (the HVP configs: two forms, the
double backward and autograd.functional.hvp, and the HVP's cost in gradients on each side), peak
memory per side in fresh subprocesses (benchmarks/memory.py), the scaling series,
the op microbenchmarks (benchmarks/ops.py), the training-step phases and profiles, and the
targets, each met or missed. `--in-process` times both sides in one process instead: kept to
show the difference, labelled as such, never the headline.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time

from transformer_np.cli import OneLineParser
from transformer_np.cliutil import THREADS_MAX, integer, interrupted, number, sigint_deferred

FULL_CONFIGS = ["copy", "copy-reverse", "base", "long"]
QUICK_CONFIGS = ["copy", "copy-reverse"]
MEASUREMENTS = ["forward", "greedy_nocache", "greedy_cache", "fwd_bwd", "train"]  # train last: it moves the weights
# In one process, a PyTorch step slower than alone by this factor (or faster by its inverse) is reported
# as interference; quieter differences are within what a shared machine's noise gives.
INTERFERENCE_FACTOR = 1.10
SKIPPABLE = ["memory", "scaling", "ops", "profile", "decode", "hvp"]
HVP_CONFIGS = ["copy-reverse", "base"]
# One gradient (the unit), then one HVP in each form; benchmarks/workloads.py says what each computes.
HVP_WORKLOADS = ["grad", "hvp", "hvp_functional"]
SETTLE_MAX = 60.0  # seconds; a pause longer than this between two rounds is a typo, not a setting
BUDGET_MAX = 3600.0  # seconds per workload and config


def _thread_list(text: str) -> list[int]:
    """'1,2' -> [1, 2]: positive, distinct thread counts."""
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected thread counts like 2 or 1,2, got {text!r}") from None
    if not counts or min(counts) < 1 or max(counts) > THREADS_MAX or len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(
            f"expected distinct thread counts in [1, {THREADS_MAX}] like 1,2, got {text!r}"
        )
    return counts


def build_parser() -> argparse.ArgumentParser:
    from benchmarks.env import WAIT_POLICIES
    from benchmarks.workloads import CONFIGS

    names = sorted(CONFIGS)
    ap = OneLineParser(
        prog="python -m benchmarks",
        description="transformer_np (NumPy) vs PyTorch benchmarks, each framework timed in its own process",
    )
    sub = ap.add_subparsers(dest="command", required=True, metavar="{run}")
    r = sub.add_parser(
        "run",
        help="run the benchmarks and write results.md / results.json / PNGs",
        description="Time transformer_np against PyTorch, each in its own process, A B A B.",
    )
    r.add_argument(
        "--quick",
        action="store_true",
        help="copy and copy-reverse only, fewer rounds, short scaling series (about 3 min at 2 threads)",
    )
    r.add_argument(
        "--configs",
        nargs="+",
        default=None,
        choices=names,
        metavar="CONFIG",
        help=f"configs to time, from {{{', '.join(names)}}} ('tiny' is a smoke-test model) "
        f"(default: {' '.join(FULL_CONFIGS)}; with --quick: {' '.join(QUICK_CONFIGS)})",
    )
    r.add_argument(
        "--threads",
        type=_thread_list,
        default="2",
        metavar="N[,N...]",
        help="thread counts for both sides (BLAS, OpenMP, torch); a list such as 1,2 runs everything "
        "at each and gives the report a section per count (default: 2)",
    )
    r.add_argument(
        "--in-process",
        action="store_true",
        help="time both frameworks in one process instead of one process each (labelled in the report: "
        "PyTorch's times can be inflated by NumPy's spinning BLAS threads)",
    )
    r.add_argument(
        "--settle",
        type=number(0.0, SETTLE_MAX),
        default=0.2,
        help="seconds to pause before handing the cores to the other side's process, so that the idle "
        f"BLAS/OpenMP threads of the last one stop spinning, at most {SETTLE_MAX:g} (default: 0.2)",
    )
    r.add_argument(
        "--device",
        default="auto",
        choices=["cpu", "cuda", "auto"],
        help="cuda/auto: add PyTorch CUDA rows when a GPU is present; the NumPy side is CPU only (default: auto)",
    )
    r.add_argument(
        "--wait-policy",
        default="default",
        choices=sorted(WAIT_POLICIES),
        help="idle BLAS/OpenMP workers: library default (spin) or sleep at once (for a shared, loaded "
        "machine) (default: default)",
    )
    r.add_argument("--out", default="benchmarks/results", help="folder for the report (default: benchmarks/results)")
    r.add_argument(
        "--repeats", type=integer(1), default=None, help="most rounds per workload (default: 15; with --quick: 5)"
    )
    r.add_argument(
        "--calls",
        type=integer(1),
        default=None,
        help="timed calls per round; the round's figure is their median (default: 3; with --quick: 2; "
        "1 for a workload whose round would eat much of the budget)",
    )
    r.add_argument(
        "--budget",
        type=number(0.0, BUDGET_MAX, low_open=True),
        default=None,
        help=f"seconds per workload and config that bound the rounds, at most {BUDGET_MAX:g} "
        "(default: 25; with --quick: 4)",
    )
    r.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=SKIPPABLE,
        metavar="PART",
        help=f"parts to leave out, from {{{', '.join(SKIPPABLE)}}} (default: none)",
    )
    r.add_argument(
        "--scaling-base",
        default="long",
        choices=names,
        metavar="CONFIG",
        help="config whose model the scaling series varies (default: long)",
    )
    r.add_argument(
        "--scaling-lengths",
        type=integer(1),
        nargs="+",
        default=None,
        metavar="L",
        help="sequence lengths S = T of the length series (default: 32 64 128 256 512; with --quick: 32 64 128)",
    )
    r.add_argument(
        "--scaling-dims",
        type=integer(1),
        nargs="+",
        default=None,
        metavar="D",
        help="d_model values of the width series (default: 64 128 256 512; with --quick: 64 128 256)",
    )
    r.add_argument(
        "--scaling-dims-len",
        type=integer(1),
        default=None,
        help="sequence length of the d_model series (default: 128; with --quick: 32)",
    )
    r.add_argument(
        "--memory-steps",
        type=integer(1),
        default=None,
        help="training steps per peak-memory child (default: 3; with --quick: 2)",
    )
    r.add_argument(
        "--ops-sizes",
        nargs="+",
        default=["small", "large"],
        choices=["small", "large"],
        help="op microbenchmark size classes (default: small, large)",
    )
    r.add_argument(
        "--hvp-configs",
        nargs="+",
        default=None,
        choices=names,
        metavar="CONFIG",
        help=f"configs whose Hessian-vector product is timed beside one gradient "
        f"(default: those of {' '.join(HVP_CONFIGS)} among --configs; with --quick: not base)",
    )
    return ap


def resolve_settings(args) -> dict:
    q = args.quick
    return {
        "configs": args.configs or (QUICK_CONFIGS if q else FULL_CONFIGS),
        "threads": args.threads,
        "in_process": args.in_process,
        "settle_s": 0.0 if args.in_process else args.settle,
        "repeats": args.repeats or (5 if q else 15),
        "min_repeats": 3 if q else 5,
        "calls": args.calls or (2 if q else 3),
        "warmup": 1 if q else 2,
        "budget_s": args.budget or (4.0 if q else 25.0),
        "interference_calls": 3 if q else 7,
        "gemm_rounds": 3 if q else 5,
        "gemm_reference_n": 512 if q else 1024,
        "scaling_base": args.scaling_base,
        "scaling_lengths": args.scaling_lengths or ([32, 64, 128] if q else [32, 64, 128, 256, 512]),
        "scaling_dims": args.scaling_dims or ([64, 128, 256] if q else [64, 128, 256, 512]),
        "scaling_dims_len": args.scaling_dims_len or (32 if q else 128),
        "memory_steps": args.memory_steps or (2 if q else 3),
        "ops_sizes": args.ops_sizes,
        "hvp_configs": args.hvp_configs
        or [c for c in HVP_CONFIGS if c in (args.configs or FULL_CONFIGS) and not (q and c == "base")],
        "ops_repeats": 3 if q else 11,
        "ops_target_ms": 2.0 if q else 5.0,
        "wait_policy": args.wait_policy,
        "device": args.device,
        "skip": list(args.skip),
        "quick": q,
    }


# ------------------------------------------------------------------------------------- workers
def start_workers(threads: int, settings: dict):
    """({side: Worker} for the timed sides, the Worker hosting both sides for the checks)."""
    from benchmarks.worker import Worker

    both = Worker("both", threads, settings["wait_policy"])
    if settings["in_process"]:
        return {"numpy": both, "torch": both}, both
    return {
        "numpy": Worker("numpy", threads, settings["wait_policy"]),
        "torch": Worker("torch", threads, settings["wait_policy"]),
    }, both


def close_workers(timed: dict, both, kill: bool = False) -> None:
    for w in {id(w): w for w in [*timed.values(), both]}.values():
        w.close(kill=kill)


# -------------------------------------------------------------------------------------- timing
def time_workload(timed: dict, spec: dict, workload: str, settings: dict) -> dict:
    """One workload on every timed side, alternating processes; per-round medians, their summary, the ratio.

    A probe round (after the warm-up calls) sizes the run: as many rounds as the time budget
    allows, between the minimum and `repeats`, and a single call per round when one call alone
    eats a large part of the budget.
    """
    from benchmarks.timing import alternate, ratio_stats, round_medians, summarize

    req = {"op": "time", "config": spec, "workload": workload}
    probe = alternate(timed, {**req, "calls": 1, "warmup": settings["warmup"]}, 1, settings["settle_s"])
    call_s = sum(r[0]["samples_ms"][0] for r in probe.values()) / 1e3 + settings["settle_s"] * len(timed)
    budget = settings["budget_s"]
    calls = settings["calls"] if call_s * settings["calls"] * settings["min_repeats"] <= budget else 1
    floor = 3 if call_s * calls > budget / 3 else settings["min_repeats"]
    rounds = int(max(floor, min(settings["repeats"], budget // (call_s * calls))))
    replies = alternate(timed, {**req, "calls": calls, "warmup": 0}, rounds, settings["settle_s"])
    medians = {side: round_medians(r) for side, r in replies.items()}
    m = {
        side: {
            **summarize(med).to_dict(),
            "calls_per_round": calls,
            "all_samples_ms": [x for r in replies[side] for x in r["samples_ms"]],
        }
        for side, med in medians.items()
    }
    spread = ratio_stats(medians["numpy"], medians["torch"])
    return {**m, "ratio": spread["median"], "ratio_spread": spread}


def gemm_rate(timed: dict, shape, settings: dict) -> dict:
    """GFLOP/s of a float32 (M, K) @ (K, N) in each CPU side's own process, alternating: {side: GFLOP/s}."""
    from benchmarks.timing import alternate, round_medians

    M, K, N = shape
    calls = max(3, min(50, int(2e9 / max(1, 2 * M * K * N))))  # enough calls for ~2 GFLOP a round
    sides = {s: w for s, w in timed.items() if s in ("numpy", "torch")}
    replies = alternate(
        sides, {"op": "gemm", "shape": list(shape), "calls": calls}, settings["gemm_rounds"], settings["settle_s"]
    )
    rate = {s: 2 * M * K * N / (statistics.median(round_medians(r)) / 1e3) / 1e9 for s, r in replies.items()}
    return {"shape": [M, K, N], **rate}


def _gemm_fractions(m: dict, flops: int | None, rate: dict) -> None:
    """Add GFLOP and each side's fraction of its own library's GEMM rate to measurement `m` (in place)."""
    if flops is None:
        return
    m["gflop"] = flops / 1e9
    m["gemm_fraction"] = {s: flops / (m[s]["median_ms"] / 1e3) / 1e9 / rate[s] for s in ("numpy", "torch")}


def interference_summary(check: dict) -> dict:
    from benchmarks.timing import summarize

    it = check["interference"]
    alone, after = summarize(it["torch_alone_ms"]), summarize(it["torch_after_numpy_ms"])
    factor = after.median_ms / alone.median_ms
    return {
        "torch_alone_ms": alone.to_dict(),
        "torch_after_numpy_ms": after.to_dict(),
        "factor": factor,
        "differs": bool(factor >= INTERFERENCE_FACTOR or factor <= 1 / INTERFERENCE_FACTOR),
        "threshold": INTERFERENCE_FACTOR,
    }


def _tokens(cfg, key: str) -> int:
    if key.startswith("greedy"):
        return cfg.batch_size * cfg.decode_tokens
    return cfg.batch_size * (cfg.src_len + cfg.tgt_len)


def _per_side(timed: dict, request: dict, settle_s: float) -> dict:
    """One request to each CPU side in turn (phases, profiles): {side: reply}."""
    from benchmarks.timing import alternate

    sides = {s: w for s, w in timed.items() if s in ("numpy", "torch")}
    return {s: r[0] for s, r in alternate(sides, request, 1, settle_s).items()}


def bench_config(name: str, timed: dict, both, settings: dict, log) -> dict:
    """All workloads of one config, both sides, with the same-output and interference checks."""
    from benchmarks import flops
    from benchmarks import workloads as W

    cfg = W.get_config(name)
    spec = {"name": name}
    log(f"  {name}: same logits, same tokens, interference check (one process holding both sides) ...")
    check = both.request({"op": "check", "config": spec, "calls": settings["interference_calls"]})
    notes = []
    if not check["parity"]["ok"]:
        notes.append(f"eval logits differ beyond PARITY_RTOL float32: max rel {check['parity']['max_rel']:.2e}")
    inter = interference_summary(check)
    log(
        f"    PyTorch train step in one process: {inter['torch_alone_ms']['median_ms']:.2f} ms alone, "
        f"{inter['torch_after_numpy_ms']['median_ms']:.2f} ms right after a NumPy step (x{inter['factor']:.2f})"
    )
    rate = gemm_rate(timed, flops.dominant_gemm(cfg), settings)
    log(f"    float32 GEMM {rate['shape']}: NumPy {rate['numpy']:.0f} GFLOP/s, PyTorch {rate['torch']:.0f} GFLOP/s")
    res = {
        "description": cfg.description,
        "model": cfg.model.to_dict(),
        "decode_tokens": cfg.decode_tokens,
        "batch": {
            "batch_size": cfg.batch_size,
            "src_len": cfg.src_len,
            "tgt_len": cfg.tgt_len,
            "tokens_per_step": _tokens(cfg, "train"),
        },
        "parity": check["parity"],
        "decode_agreement": check.get("decode_agreement"),
        "interference": inter,
        "gemm_rate": rate,
        "measurements": {},
        "notes": notes,
    }
    for key in MEASUREMENTS:
        if key.startswith("greedy") and "decode" in settings["skip"]:
            continue
        log(f"  {name}: {key} ...")
        m = time_workload(timed, spec, key, settings)
        m["tokens_per_s"] = {s: _tokens(cfg, key) / (m[s]["median_ms"] / 1e3) for s in timed}
        _gemm_fractions(m, flops.workload_flops(cfg, key), rate)
        res["measurements"][key] = m
        log(
            f"    numpy {m['numpy']['median_ms']:.2f} ms, torch {m['torch']['median_ms']:.2f} ms, "
            f"ratio {m['ratio']:.2f} [{m['ratio_spread']['min']:.2f}-{m['ratio_spread']['max']:.2f}]"
        )
    gc_, gn = res["measurements"].get("greedy_cache"), res["measurements"].get("greedy_nocache")
    if gc_ and gn:
        res["cache_speedup"] = {s: gn[s]["median_ms"] / gc_[s]["median_ms"] for s in ("numpy", "torch")}
    if "profile" not in settings["skip"]:
        log(f"  {name}: training-step phases and one profiled step per side ...")
        res["phases"] = _per_side(
            timed, {"op": "phases", "config": spec, "rounds": 3 if settings["quick"] else 5}, settings["settle_s"]
        )
        prof = _per_side(timed, {"op": "profile", "config": spec, "steps": 1}, settings["settle_s"])
        res["profile_numpy"], res["profile_torch"] = prof["numpy"], prof["torch"]
    return res


def bench_scaling(timed: dict, settings: dict, log) -> dict:
    """Training-step time vs sequence length and vs d_model on the scaling base model."""
    from benchmarks import flops, profiling
    from benchmarks import workloads as W

    base = settings["scaling_base"]
    out = {"base": base, "seq_len": [], "d_model": []}
    points = [("seq_len", L, {"name": base, "seq_len": L}) for L in settings["scaling_lengths"]]
    points += [
        ("d_model", D, {"name": base, "seq_len": settings["scaling_dims_len"], "d_model": D})
        for D in settings["scaling_dims"]
    ]
    for key, x, spec in points:
        log(f"  scaling {key}={x} ...")
        cfg = W.config_from_spec(spec)
        p = {
            key: x,
            **time_workload(timed, spec, "train", settings),
            "batch_size": cfg.batch_size,
            "seq_len_used": cfg.src_len,
            "d_model_used": cfg.model.d_model,
        }
        rate = gemm_rate(timed, flops.dominant_gemm(cfg), settings)
        _gemm_fractions(p, flops.workload_flops(cfg, "train"), rate)
        p["gemm_rate"] = rate
        if "profile" not in settings["skip"]:
            # Three profiled steps: one step's share is too noisy on a shared machine.
            prof = _per_side(timed, {"op": "profile", "config": spec, "steps": 3}, settings["settle_s"])
            p["attention_share_numpy"] = profiling.attention_share(prof["numpy"], "numpy")
            p["attention_share_torch"] = profiling.attention_share(prof["torch"], "torch")
        out[key].append(p)
    return out


def bench_hvp(timed: dict, both, settings: dict, log) -> dict:
    """Per HVP config: the two sides' H v compared (one process holding both), then one gradient and one HVP in
    each form, alternating processes as every workload; the HVP's cost in gradients on each side (median HVP
    time / median gradient time; theory: a small constant, 2 to 4)."""
    out = {}
    for name in settings["hvp_configs"]:
        spec = {"name": name}
        res = {"parity": both.request({"op": "hvp_check", "config": spec})}
        log(f"  hvp {name}: H v of the two sides, max rel {res['parity']['max_rel']:.2e}")
        for key in HVP_WORKLOADS:
            log(f"  hvp {name}: {key} ...")
            res[key] = time_workload(timed, spec, key, settings)
            log(
                f"    numpy {res[key]['numpy']['median_ms']:.2f} ms, torch {res[key]['torch']['median_ms']:.2f} ms, "
                f"ratio {res[key]['ratio']:.2f}"
            )
        sides = [s for s in timed if s in res["grad"]]
        res["cost_in_gradients"] = {
            key: {s: res[key][s]["median_ms"] / res["grad"][s]["median_ms"] for s in sides} for key in HVP_WORKLOADS[1:]
        }
        out[name] = res
    return out


def bench_memory(settings: dict, threads: int, log) -> dict:
    from benchmarks.memory import measure

    out = {}
    for name in settings["configs"]:
        log(f"  memory {name} ...")
        m = measure(name, settings["memory_steps"], threads)
        a, b = m["numpy"], m["torch"]
        if "error" not in a and "error" not in b:
            m["ratio_peak"] = a["peak_kib"] / b["peak_kib"]
            m["ratio_delta"] = (a["peak_kib"] - a["baseline_kib"]) / max(1, b["peak_kib"] - b["baseline_kib"])
        out[name] = m
    return out


# ------------------------------------------------------------------------------------- targets
def _target(desc, value, limit, ok_when_le=True, why=""):
    if value is None:
        return {"target": desc, "value": None, "limit": limit, "met": None, "why": why}
    met = value <= limit if ok_when_le else value >= limit
    if ok_when_le:
        margin = (
            f"{100 * (limit - value) / limit:.0f}% under the limit"
            if met
            else f"{100 * (value - limit) / limit:.0f}% over the limit ({value / limit:.2f}x)"
        )
    else:
        margin = (
            f"{100 * (value - limit) / limit:.0f}% above the floor"
            if met
            else f"{100 * (limit - value) / limit:.0f}% short of the floor"
        )
    return {"target": desc, "value": value, "limit": limit, "met": bool(met), "margin": margin}


def evaluate_targets(section: dict) -> list[dict]:
    """The targets of the project's speed work at this thread count: ratios from separate processes."""
    cfgs, mem = section.get("configs", {}), section.get("memory", {})

    def meas(name, key):
        return cfgs.get(name, {}).get("measurements", {}).get(key, {})

    t = []
    for name in FULL_CONFIGS:
        t.append(
            _target(
                f"training step on {name}, NumPy/PyTorch <= 0.8",
                meas(name, "train").get("ratio"),
                0.8,
                why=f"{name} not run",
            )
        )
    for name in FULL_CONFIGS:
        t.append(
            _target(
                f"peak memory on {name}, NumPy/PyTorch <= 0.8",
                mem.get(name, {}).get("ratio_peak"),
                0.8,
                why=f"{name} memory not run",
            )
        )
    for name in FULL_CONFIGS:
        t.append(
            _target(
                f"cached greedy decoding on {name}, NumPy/PyTorch <= 0.8",
                meas(name, "greedy_cache").get("ratio"),
                0.8,
                why=f"{name} decoding not run",
            )
        )
    t.append(
        _target(
            "base training step, NumPy's fraction of the GEMM rate >= 0.9",
            meas("base", "train").get("gemm_fraction", {}).get("numpy"),
            0.9,
            ok_when_le=False,
            why="base not run",
        )
    )
    t.append(
        _target(
            "cached greedy speed-up over uncached, 64 tokens on copy-reverse (NumPy) >= 3",
            cfgs.get("copy-reverse", {}).get("cache_speedup", {}).get("numpy"),
            3.0,
            ok_when_le=False,
            why="copy-reverse decoding not run",
        )
    )
    return t


# ---------------------------------------------------------------------------------------- main
def run_threads(threads: int, settings: dict, log) -> dict:
    """Everything at one thread count: a section of the report."""
    from benchmarks.ops import run_ops, selected_cases
    from benchmarks.worker import Worker

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
        if "memory" not in settings["skip"]:
            log("memory (fresh subprocess per side)")
            section["memory"] = bench_memory(settings, threads, log)
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
    except BaseException:  # Ctrl-C or a failure: stop the workers now, not after their current request
        close_workers(timed, both, kill=True)
        raise
    close_workers(timed, both)
    section["targets"] = evaluate_targets(section)
    return section


def run(args) -> dict:
    """Every thread count in turn; returns the results dict it also writes."""
    from benchmarks import report

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
    results["elapsed_s"] = time.perf_counter() - t_start
    results["load_average_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    os.makedirs(args.out, exist_ok=True)  # only now: an interrupted run leaves no empty folder either
    with sigint_deferred():  # results.md, results.json and the PNGs: all of this run's, never a mix
        text = report.write_outputs(results, args.out)
    print(text)
    print(f"\nwrote {args.out}/results.md, results.json, *.png")
    return results


def main(argv: list[str] | None = None) -> None:
    ap = build_parser()
    args = ap.parse_args(argv)
    if os.path.exists(args.out) and not os.path.isdir(args.out):  # found now, not after the run
        ap.error(f"--out {args.out!r} is a file, expected a directory")
    from benchmarks.worker import WorkerError

    try:
        run(args)
    except KeyboardInterrupt:  # as `python -m transformer_np train`: one line, 130, no output file touched
        sys.exit(interrupted("python -m benchmarks run"))
    except WorkerError as exc:  # a worker failed: its message in one line, not a traceback
        print(f"python -m benchmarks: {exc}", file=sys.stderr)
        sys.exit(1)
