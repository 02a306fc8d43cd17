"""What each part of the benchmark measures, given the worker processes: one function per part.

`time_workload` times one workload on every timed side, alternating processes (the unit of
everything else); `gemm_rate` the machine's float32 GEMM rate per library; `bench_config` every
workload of one config with the same-output and interference checks, the GEMM fractions and the
profiles; `bench_hvp` a Hessian-vector product beside one gradient; `bench_jacobians` jacfwd and jacrev
of a tall and a wide function beside one gradient; `bench_memory` the peak memory
children; `bench_scaling` the training step against sequence length and d_model.
benchmarks/run.py calls them in order; benchmarks/report.py renders what they return.
"""

from __future__ import annotations

import dataclasses
import statistics

from benchmarks import flops, profiling
from benchmarks import workloads as W
from benchmarks.memory import measure
from benchmarks.timing import alternate, ratio_stats, round_medians, summarize

MEASUREMENTS = [
    "forward",
    "greedy_nocache",
    "greedy_cache",
    "beam_cache",
    "fwd_bwd",
    "train",
]  # train last: it moves the weights
# In one process, a PyTorch step slower than alone by this factor (or faster by its inverse) is reported
# as interference; quieter differences are within what a shared machine's noise gives.
INTERFERENCE_FACTOR = 1.10
# One gradient (the unit), then one HVP in each form; benchmarks/workloads.py says what each computes.
HVP_WORKLOADS = ["grad", "hvp", "hvp_functional", "hvp_fwd_rev", "hvp_retained"]
# Per Jacobian shape: one gradient of the function's summed outputs (the unit), then jacfwd and jacrev.
JACOBIAN_WORKLOADS = {kind: [f"jac_{kind}_grad", f"jac_{kind}_fwd", f"jac_{kind}_rev"] for kind in W.JACOBIAN_SHAPES}


def time_workload(timed: dict, spec: dict, workload: str, settings: dict) -> dict:
    """One workload on every timed side that has it, alternating processes; per-round medians, their summary,
    the ratios.

    Each CPU PyTorch side (the twin 'torch', torch.nn.Transformer's 'torch-nn') gets its own ratio in
    `ratio_by_side`; the headline `ratio` / `ratio_spread` is the one against the faster of them (the lower
    median time), named in `torch_fastest`: a ratio is only as good as the PyTorch it is taken against.

    A probe round (after the warm-up calls) sizes the run: as many rounds as the time budget
    allows, between the minimum and `repeats`, and a single call per round when one call alone
    eats a large part of the budget.
    """
    timed = {s: w for s, w in timed.items() if W.has_workload(s, workload, spec["name"])}
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
    by_side = {s: ratio_stats(medians["numpy"], medians[s]) for s in W.TORCH_CPU_SIDES if s in medians}
    fastest = min(by_side, key=lambda s: m[s]["median_ms"])
    return {
        **m,
        "ratio": by_side[fastest]["median"],
        "ratio_spread": by_side[fastest],
        "torch_fastest": fastest,
        "ratio_by_side": by_side,
    }


def gemm_rate(timed: dict, shape, settings: dict) -> dict:
    """GFLOP/s of a float32 (M, K) @ (K, N) in each CPU side's own process, alternating: {side: GFLOP/s}."""
    M, K, N = shape
    calls = max(3, min(50, int(2e9 / max(1, 2 * M * K * N))))  # enough calls for ~2 GFLOP a round
    sides = {s: w for s, w in timed.items() if s in ("numpy", "torch")}
    replies = alternate(
        sides, {"op": "gemm", "shape": list(shape), "calls": calls}, settings["gemm_rounds"], settings["settle_s"]
    )
    rate = {s: 2 * M * K * N / (statistics.median(round_medians(r)) / 1e3) / 1e9 for s, r in replies.items()}
    return {"shape": [M, K, N], **rate}


def gemm_fractions(m: dict, flops: int | None, rate: dict) -> None:
    """Add GFLOP and each side's fraction of its own library's GEMM rate to measurement `m` (in place)."""
    if flops is None:
        return
    m["gflop"] = flops / 1e9
    m["gemm_fraction"] = {s: flops / (m[s]["median_ms"] / 1e3) / 1e9 / rate[s] for s in ("numpy", "torch")}


def interference_summary(check: dict) -> dict:
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


def tokens(cfg, key: str) -> int:
    if key.startswith(("greedy", "beam")):
        return (1 if W.is_gpt(cfg) else cfg.batch_size) * cfg.decode_tokens  # a decoder-only model samples one row
    return cfg.batch_size * (cfg.src_len + cfg.tgt_len)


def per_side(timed: dict, request: dict, settle_s: float) -> dict:
    """One request to each CPU side in turn (phases, profiles): {side: reply}."""
    sides = {s: w for s, w in timed.items() if s in ("numpy", "torch")}
    return {s: r[0] for s, r in alternate(sides, request, 1, settle_s).items()}


def bench_config(name: str, timed: dict, both, settings: dict, log) -> dict:
    """All workloads of one config, both sides, with the same-output and interference checks."""
    cfg = W.get_config(name)
    spec = {"name": name}
    log(f"  {name}: same logits, same tokens, interference check (one process holding both sides) ...")
    check = both.request({"op": "check", "config": spec, "calls": settings["interference_calls"]})
    notes = []
    if not check["parity"]["ok"]:
        notes.append(f"eval logits differ beyond PARITY_RTOL float32: max rel {check['parity']['max_rel']:.2e}")
    if not check.get("parity_nn", {"ok": True})["ok"]:
        notes.append(
            f"torch.nn.Transformer's eval logits differ beyond PARITY_RTOL float32: max rel "
            f"{check['parity_nn']['max_rel']:.2e}"
        )
    inter = interference_summary(check)
    log(
        f"    PyTorch train step in one process: {inter['torch_alone_ms']['median_ms']:.2f} ms alone, "
        f"{inter['torch_after_numpy_ms']['median_ms']:.2f} ms right after a NumPy step (x{inter['factor']:.2f})"
    )
    rate = gemm_rate(timed, flops.dominant_gemm(cfg), settings)
    log(f"    float32 GEMM {rate['shape']}: NumPy {rate['numpy']:.0f} GFLOP/s, PyTorch {rate['torch']:.0f} GFLOP/s")
    res = {
        "description": cfg.description,
        "model": dataclasses.asdict(cfg.model),
        "decode_tokens": cfg.decode_tokens,
        "batch": {
            "batch_size": cfg.batch_size,
            "src_len": cfg.src_len,
            "tgt_len": cfg.tgt_len,
            "tokens_per_step": tokens(cfg, "train"),
        },
        "parity": check["parity"],
        "parity_nn": check.get("parity_nn"),
        "decode_agreement": check.get("decode_agreement"),
        "interference": inter,
        "gemm_rate": rate,
        "measurements": {},
        "notes": notes,
    }
    for key in MEASUREMENTS:
        if key.startswith(("greedy", "beam")) and "decode" in settings["skip"]:
            continue
        if not W.has_workload("numpy", key, name):  # a decoder-only config has no beam search nor uncached decode
            continue
        log(f"  {name}: {key} ...")
        m = time_workload(timed, spec, key, settings)
        m["tokens_per_s"] = {s: tokens(cfg, key) / (m[s]["median_ms"] / 1e3) for s in timed if s in m}
        gemm_fractions(m, flops.workload_flops(cfg, key), rate)
        res["measurements"][key] = m
        nn_ms = f", torch-nn {m['torch-nn']['median_ms']:.2f} ms" if "torch-nn" in m else ""
        log(
            f"    numpy {m['numpy']['median_ms']:.2f} ms, torch {m['torch']['median_ms']:.2f} ms{nn_ms}, "
            f"ratio {m['ratio']:.2f} [{m['ratio_spread']['min']:.2f}-{m['ratio_spread']['max']:.2f}] "
            f"against {m['torch_fastest']}"
        )
    gc_, gn = res["measurements"].get("greedy_cache"), res["measurements"].get("greedy_nocache")
    if gc_ and gn:
        res["cache_speedup"] = {s: gn[s]["median_ms"] / gc_[s]["median_ms"] for s in ("numpy", "torch")}
    if "profile" not in settings["skip"]:
        log(f"  {name}: training-step phases and one profiled step per side ...")
        res["phases"] = per_side(
            timed, {"op": "phases", "config": spec, "rounds": 3 if settings["quick"] else 5}, settings["settle_s"]
        )
        prof = per_side(timed, {"op": "profile", "config": spec, "steps": 1}, settings["settle_s"])
        res["profile_numpy"], res["profile_torch"] = prof["numpy"], prof["torch"]
    return res


def bench_scaling(timed: dict, settings: dict, log) -> dict:
    """Training-step time vs sequence length and vs d_model on the scaling base model."""
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
        gemm_fractions(p, flops.workload_flops(cfg, "train"), rate)
        p["gemm_rate"] = rate
        if "profile" not in settings["skip"]:
            # Three profiled steps: one step's share is too noisy on a shared machine.
            prof = per_side(timed, {"op": "profile", "config": spec, "steps": 3}, settings["settle_s"])
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


def bench_jacobians(timed: dict, settings: dict, log) -> dict:
    """jacfwd and jacrev (func transforms) of a tall and a wide function, each beside one gradient of the same
    function, alternating processes; cost in gradients on each side (theory: jacfwd ~ one pass per input, jacrev
    ~ one per output; torch batches them with vmap, minitensor runs them one by one)."""
    spec = {"name": settings["hvp_configs"][0] if settings["hvp_configs"] else "tiny"}  # the functions ignore it
    out = {}
    for kind, keys in JACOBIAN_WORKLOADS.items():
        res = {}
        for key in keys:
            res[key] = time_workload(timed, spec, key, settings)
            log(
                f"  {key}: numpy {res[key]['numpy']['median_ms']:.2f} ms, torch {res[key]['torch']['median_ms']:.2f} ms"
            )
        sides = [s for s in timed if s in res[keys[0]]]
        res["cost_in_gradients"] = {
            key: {s: res[key][s]["median_ms"] / res[keys[0]][s]["median_ms"] for s in sides} for key in keys[1:]
        }
        res["shape"] = W.JACOBIAN_SHAPES[kind]
        out[kind] = res
    return out


def bench_memory(settings: dict, threads: int, log) -> dict:
    out = {}
    for name in settings["configs"]:
        if W.is_gpt(W.get_config(name)):  # the memory children build encoder-decoder models only
            continue
        log(f"  memory {name} ...")
        m = measure(name, settings["memory_steps"], threads)
        a, b = m["numpy"], m["torch"]
        if "error" not in a and "error" not in b:
            m["ratio_peak"] = a["peak_kib"] / b["peak_kib"]
            m["ratio_delta"] = (a["peak_kib"] - a["baseline_kib"]) / max(1, b["peak_kib"] - b["baseline_kib"])
        out[name] = m
    return out
