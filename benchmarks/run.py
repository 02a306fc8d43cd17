"""`python -m benchmarks run`: the whole benchmark, from thread settings to results.md.

For each config: forward, forward+backward, training step and greedy decoding (without and with
the key/value cache), transformer_np against parity's PyTorch model holding the same weights,
interleaved A B A B after warm-up (benchmarks/timing.py). Then peak memory per side in fresh
subprocesses (benchmarks/memory.py), the scaling series (step time vs sequence length and vs
d_model, attention share from the profilers), the op microbenchmarks (benchmarks/ops.py), one
profiled training step per config, and the targets of the issue, each met or missed.

This module imports neither numpy nor torch at import time: `main` sets the thread environment
first (benchmarks/env.py) and only then loads them.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

from benchmarks.env import set_thread_env

FULL_CONFIGS = ["copy", "copy-reverse", "base", "long"]
QUICK_CONFIGS = ["copy", "copy-reverse"]
MEASUREMENTS = ["forward", "greedy_nocache", "greedy_cache", "fwd_bwd", "train"]  # train last: it moves the weights


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description="transformer_np (NumPy) vs PyTorch benchmarks")
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the benchmarks and write results.md / results.json / PNGs")
    r.add_argument("--quick", action="store_true", help="small configs, few repeats, short scaling series (< 2 min)")
    r.add_argument("--configs", nargs="+", default=None,
                   help=f"configs to time (default {FULL_CONFIGS}; --quick: {QUICK_CONFIGS}); 'tiny' is a smoke-test model")
    r.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"],
                   help="add PyTorch CUDA rows when a GPU is present (auto/cuda); the NumPy side is CPU only")
    r.add_argument("--threads", type=int, default=2, help="threads for both sides (BLAS, OpenMP, torch)")
    r.add_argument("--wait-policy", default="default", choices=["default", "passive"],
                   help="idle BLAS/OpenMP workers: library default (spin) or sleep at once (for a shared, loaded machine)")
    r.add_argument("--out", default="benchmarks/results")
    r.add_argument("--repeats", type=int, default=None, help="max timed rounds per workload (default 15; quick 5)")
    r.add_argument("--budget", type=float, default=None,
                   help="seconds per workload and config that bound the rounds (default 25; quick 4)")
    r.add_argument("--skip", nargs="*", default=[], choices=["memory", "scaling", "ops", "profile", "decode"],
                   help="parts to leave out")
    r.add_argument("--scaling-base", default=None, help="config whose model the scaling series varies (default long)")
    r.add_argument("--scaling-lengths", type=int, nargs="+", default=None)
    r.add_argument("--scaling-dims", type=int, nargs="+", default=None)
    r.add_argument("--scaling-dims-len", type=int, default=None, help="sequence length of the d_model series")
    r.add_argument("--memory-steps", type=int, default=None, help="training steps per memory child (default 3)")
    r.add_argument("--ops-sizes", nargs="+", default=["small", "large"], choices=["small", "large"])
    return ap


def resolve_settings(args) -> dict:
    q = args.quick
    return {
        "configs": args.configs or (QUICK_CONFIGS if q else FULL_CONFIGS),
        "repeats": args.repeats or (5 if q else 15),
        "min_repeats": 3 if q else 5,
        "warmup": 1 if q else 2,
        "budget_s": args.budget or (4.0 if q else 25.0),
        "scaling_base": args.scaling_base or "long",
        "scaling_lengths": args.scaling_lengths or ([32, 64, 128] if q else [32, 64, 128, 256, 512]),
        "scaling_dims": args.scaling_dims or ([64, 128, 256] if q else [64, 128, 256, 512]),
        "scaling_dims_len": args.scaling_dims_len or (32 if q else 128),
        "memory_steps": args.memory_steps or (2 if q else 3),
        "ops_sizes": args.ops_sizes,
        "ops_repeats": 3 if q else 11,
        "threads": args.threads,
        "wait_policy": args.wait_policy,
        "device": args.device,
        "skip": list(args.skip),
        "quick": q,
    }


# -------------------------------------------------------------------------------------- timing
def _time_cases(cases: dict, settings: dict, sync=None) -> dict:
    """Interleaved timing with the round count bounded by the time budget (one probe call first)."""
    from benchmarks.timing import interleaved
    t0 = time.perf_counter()
    for fn in cases.values():       # probe: also the first warm-up call of each case
        fn()
    if sync:
        sync()
    round_s = max(time.perf_counter() - t0, 1e-6)
    # Fewer rounds for workloads whose one round already eats a third of the budget (slow decoding,
    # a loaded machine), but never fewer than 3: a median needs something to stand between.
    floor = 3 if round_s > settings["budget_s"] / 3 else settings["min_repeats"]
    rounds = int(max(floor, min(settings["repeats"], settings["budget_s"] // round_s)))
    warm = max(0, settings["warmup"] - 1) if round_s < settings["budget_s"] / 4 else 0
    return interleaved(cases, warmup=warm, repeats=rounds, sync=sync)


def gemm_gflops(n: int, repeats: int) -> dict:
    """float32 (n x n) @ (n x n) throughput of each side's BLAS (OpenBLAS via NumPy, MKL via torch)."""
    import numpy as np
    import torch
    from benchmarks.timing import interleaved
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    st = interleaved({"numpy": lambda: a @ b, "torch": lambda: ta @ tb}, warmup=2, repeats=repeats)
    return {"n": n, **{side: 2 * n ** 3 / (v.median_ms / 1e3) / 1e9 for side, v in st.items()}}


def _tokens(cfg, batch, key: str) -> int:
    if key.startswith("greedy"):
        return cfg.batch_size * cfg.decode_tokens
    return batch.tokens


def bench_config(name: str, settings: dict, log) -> dict:
    """All workloads of one config, both sides (plus torch CUDA when asked and present)."""
    import torch
    from benchmarks import profiling, workloads as W
    from minitensor.testing import PARITY_RTOL, error_stats

    cfg = W.get_config(name)
    batch = W.make_batch(cfg)
    np_model = W.build_numpy_model(cfg)
    t_model = W.copy_to_torch(np_model, cfg)
    sides = {"numpy": W.numpy_side(cfg, np_model, batch), "torch": W.torch_side(cfg, t_model, batch)}
    notes = []
    if settings["device"] in ("cuda", "auto"):
        if torch.cuda.is_available():
            sides["torch-cuda"] = W.torch_side(cfg, W.copy_to_torch(np_model, cfg, "cuda"), batch, device="cuda")
        else:
            notes.append("no CUDA device (torch.cuda.is_available() is False): CUDA rows skipped")

    # Sanity first, before any optimizer step moves the weights apart: same weights, same logits.
    # The EOS column is left out: its -1e4 bias would set the error measure's floor (relative to
    # max |logit|) so high that any real disagreement elsewhere would pass unnoticed.
    keep = [v for v in range(cfg.model.tgt_vocab_size) if v != W.EOS]
    _, max_rel = error_stats(sides["numpy"].eval_logits()[..., keep], sides["torch"].eval_logits()[..., keep])
    parity = {"max_rel": max_rel, "ok": bool(max_rel <= PARITY_RTOL["float32"])}
    if not parity["ok"]:
        notes.append(f"eval logits differ beyond PARITY_RTOL float32: max rel {max_rel:.2e}")

    res = {"description": cfg.description, "model": cfg.model.to_dict(), "decode_tokens": cfg.decode_tokens,
           "batch": {"batch_size": cfg.batch_size, "src_len": cfg.src_len, "tgt_len": cfg.tgt_len,
                     "tokens_per_step": batch.tokens}, "parity": parity, "measurements": {}, "notes": notes}
    for key in MEASUREMENTS:
        if key.startswith("greedy") and "decode" in settings["skip"]:
            continue
        cases = {s: getattr(side, key) for s, side in sides.items() if getattr(side, key) is not None}
        if "numpy" not in cases or "torch" not in cases:
            notes.append(f"{key}: no greedy_decode found in transformer_np/decode.py or parity/decode.py; skipped")
            continue
        if key.startswith("greedy") and key == "greedy_nocache":
            agree = _decode_agreement(cases["numpy"](), cases["torch"]())
            res["decode_agreement"] = agree
        log(f"  {name}: {key} ...")
        sync = sides["torch-cuda"].sync if "torch-cuda" in cases else None
        st = _time_cases(cases, settings, sync=sync)
        m = {s: v.to_dict() for s, v in st.items()}
        m["ratio"] = st["numpy"].median_ms / st["torch"].median_ms
        ntok = _tokens(cfg, batch, key)
        m["tokens_per_s"] = {s: ntok / (v.median_ms / 1e3) for s, v in st.items()}
        res["measurements"][key] = m
        log(f"    numpy {st['numpy'].median_ms:.2f} ms, torch {st['torch'].median_ms:.2f} ms, "
            f"ratio {m['ratio']:.2f}")
    gc_, gn = res["measurements"].get("greedy_cache"), res["measurements"].get("greedy_nocache")
    if gc_ and gn:
        res["cache_speedup"] = {s: gn[s]["median_ms"] / gc_[s]["median_ms"] for s in ("numpy", "torch")}

    if "profile" not in settings["skip"]:
        log(f"  {name}: training-step phases ...")
        res["phases"] = _phases(sides["numpy"], sides["torch"], 3 if settings["quick"] else 5)
        log(f"  {name}: profiling one training step per side ...")
        res["profile_numpy"] = profiling.profile_numpy(sides["numpy"].train)
        res["profile_torch"] = profiling.profile_torch(sides["torch"].train)
    return res


def _phases(a, b, rounds: int) -> dict:
    """Median ms per phase of a training step (zero_grad, forward+loss, backward, clip, optimizer), A B A B."""
    import statistics
    samples = {"numpy": [], "torch": []}
    for _ in range(rounds):
        samples["numpy"].append(a.train_phases())
        samples["torch"].append(b.train_phases())
    return {side: {ph: statistics.median(s[ph] for s in rows) for ph in rows[0]} for side, rows in samples.items()}


def _decode_agreement(a, b) -> float | None:
    """Fraction of equal tokens between the two sides' greedy outputs (None if shapes differ)."""
    import numpy as np

    def arr(x):
        if isinstance(x, (tuple, list)) and x and not np.isscalar(x[0]):
            x = x[0]
        if hasattr(x, "detach"):
            x = x.detach().cpu().numpy()
        return np.asarray(getattr(x, "data", x))
    try:
        x, y = arr(a), arr(b)
    except Exception:
        return None
    if x.shape != y.shape:
        return None
    return float((x == y).mean())


def bench_scaling(settings: dict, log) -> dict:
    """Training-step time vs sequence length and vs d_model on the scaling base model."""
    from benchmarks import profiling, workloads as W
    base = W.get_config(settings["scaling_base"])
    out = {"base": base.name, "seq_len": [], "d_model": []}
    points = [("seq_len", L, W.scaled_config(base, seq_len=L)) for L in settings["scaling_lengths"]]
    points += [("d_model", D, W.scaled_config(W.scaled_config(base, seq_len=settings["scaling_dims_len"]), d_model=D))
               for D in settings["scaling_dims"]]
    for key, x, cfg in points:
        log(f"  scaling {key}={x} ...")
        batch = W.make_batch(cfg)
        np_model = W.build_numpy_model(cfg)
        t_model = W.copy_to_torch(np_model, cfg)
        a, b = W.numpy_side(cfg, np_model, batch), W.torch_side(cfg, t_model, batch)
        st = _time_cases({"numpy": a.train, "torch": b.train}, settings)
        p = {key: x, "numpy": st["numpy"].to_dict(), "torch": st["torch"].to_dict(),
             "ratio": st["numpy"].median_ms / st["torch"].median_ms,
             "batch_size": cfg.batch_size, "seq_len_used": cfg.src_len, "d_model_used": cfg.model.d_model}
        if "profile" not in settings["skip"]:
            # Three profiled steps: one step's share is too noisy on a shared machine.
            pa, pb = profiling.profile_numpy(a.train, steps=3), profiling.profile_torch(b.train, steps=3)
            p["attention_share_numpy"] = profiling.attention_share(pa, "numpy")
            p["attention_share_torch"] = profiling.attention_share(pb, "torch")
        out[key].append(p)
    return out


def bench_memory(settings: dict, log) -> dict:
    from benchmarks.memory import measure
    out = {}
    for name in settings["configs"]:
        log(f"  memory {name} ...")
        m = measure(name, settings["memory_steps"], settings["threads"])
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
        margin = (f"{100 * (limit - value) / limit:.0f}% under the limit" if met
                  else f"{100 * (value - limit) / limit:.0f}% over the limit ({value / limit:.2f}x)")
    else:
        margin = (f"{100 * (value - limit) / limit:.0f}% above the floor" if met
                  else f"{100 * (limit - value) / limit:.0f}% short of the floor")
    return {"target": desc, "value": value, "limit": limit, "met": bool(met), "margin": margin}


def evaluate_targets(results: dict) -> list[dict]:
    cfgs, mem = results.get("configs", {}), results.get("memory", {})

    def ratio(name, key):
        return cfgs.get(name, {}).get("measurements", {}).get(key, {}).get("ratio")
    t = [_target("train step ratio NumPy/PyTorch on copy <= 1.5", ratio("copy", "train"), 1.5,
                 why="copy not run"),
         _target("train step ratio NumPy/PyTorch on copy-reverse <= 1.5", ratio("copy-reverse", "train"), 1.5,
                 why="copy-reverse not run"),
         _target("train step ratio NumPy/PyTorch on base <= 1.0", ratio("base", "train"), 1.0, why="base not run"),
         _target("peak RSS on base, NumPy/PyTorch <= 1.2", mem.get("base", {}).get("ratio_peak"), 1.2,
                 why="base memory not run"),
         _target("length-512 train step ratio NumPy/PyTorch (long) <= 1.0", ratio("long", "train"), 1.0,
                 why="long not run"),
         _target("cached greedy speed-up over uncached, 64 tokens on copy-reverse (NumPy) >= 3",
                 cfgs.get("copy-reverse", {}).get("cache_speedup", {}).get("numpy"), 3.0, ok_when_le=False,
                 why="copy-reverse decoding not run")]
    return t


# ---------------------------------------------------------------------------------------- main
def run(args) -> dict:
    """Everything after the thread environment is set: returns the results dict it also writes."""
    from benchmarks.env import facts_line, machine_facts, set_torch_threads
    t_start = time.perf_counter()
    settings = resolve_settings(args)
    set_torch_threads(settings["threads"])
    os.makedirs(args.out, exist_ok=True)

    def log(msg):
        print(f"[{time.perf_counter() - t_start:6.1f} s] {msg}", flush=True)
    facts = machine_facts(settings["threads"])
    log(facts_line(facts))
    load = facts.get("load_average")
    if load and load[0] > facts["usable_cores"]:
        log(f"WARNING: load average {load[0]:.1f} exceeds the {facts['usable_cores']} usable cores: other "
            "processes compete for the CPUs and every time below is inflated (multi-threaded ops most).")
    from benchmarks import workloads as W
    for name in settings["configs"]:
        W.get_config(name)              # fail fast on a misspelled config
    results = {"command": "python -m benchmarks " + " ".join(sys.argv[1:]),
               "started_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "machine": facts, "settings": settings, "configs": {}}
    results["gemm_gflops"] = gemm_gflops(512 if settings["quick"] else 1024, 5 if settings["quick"] else 11)
    g = results["gemm_gflops"]
    log(f"float32 GEMM {g['n']}^3: NumPy/OpenBLAS {g['numpy']:.0f} GFLOP/s, PyTorch/MKL {g['torch']:.0f} GFLOP/s")
    for name in settings["configs"]:
        log(f"config {name}")
        results["configs"][name] = bench_config(name, settings, log)
    if "memory" not in settings["skip"]:
        log("memory (fresh subprocess per side)")
        results["memory"] = bench_memory(settings, log)
    if "scaling" not in settings["skip"]:
        log("scaling series")
        results["scaling"] = bench_scaling(settings, log)
    if "ops" not in settings["skip"]:
        log("op microbenchmarks")
        from benchmarks.ops import run_ops
        results["ops"] = run_ops(settings["ops_sizes"], repeats=settings["ops_repeats"],
                                 warmup=1 if settings["quick"] else 3, target_ms=2.0 if settings["quick"] else 5.0)
    results["targets"] = evaluate_targets(results)
    results["elapsed_s"] = time.perf_counter() - t_start
    results["load_average_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    write_outputs(results, args.out)
    return results


def write_outputs(results: dict, out: str) -> None:
    from benchmarks import profiling, report
    from benchmarks.env import facts_line
    from benchmarks.ops import ops_markdown, plot_ops
    md = ["# transformer_np vs PyTorch benchmarks", "",
          f"Command: `{results['command']}`  ", f"Started {results['started_utc']}, took {results['elapsed_s']:.0f} s.  ",
          f"Machine: {facts_line(results['machine'])}  ",
          (f"Load average at the end: {' '.join(f'{x:.1f}' for x in results['load_average_end'])} "
           f"(above {results['machine']['usable_cores']} means other processes shared the cores: times inflated).  "
           if results.get("load_average_end") else ""),
          (f"float32 GEMM {results['gemm_gflops']['n']}^3: NumPy/OpenBLAS {results['gemm_gflops']['numpy']:.0f} "
           f"GFLOP/s, PyTorch/MKL {results['gemm_gflops']['torch']:.0f} GFLOP/s." if "gemm_gflops" in results else ""),
          "",
          "Times are medians in ms with the interquartile range in parentheses; ratio = transformer_np time / "
          "PyTorch time (below 1: the NumPy engine is faster). Both sides float32, same weights, same threads, "
          "interleaved A B A B after warm-up. tokens/s counts source + target positions per step "
          "(decoding: generated tokens).", ""]
    if results.get("targets"):
        md += ["## Targets", "", report.targets_markdown(results["targets"]), ""]
    md += ["## Per config", ""]
    for name, res in results["configs"].items():
        md += [report.config_markdown(name, res), ""]
        if "cache_speedup" in res:
            cs = res["cache_speedup"]
            md += [f"KV-cache speed-up (uncached / cached): minitensor {cs['numpy']:.2f}x, PyTorch {cs['torch']:.2f}x."
                   + (f" Greedy outputs agree on {100 * res['decode_agreement']:.0f}% of tokens."
                      if res.get("decode_agreement") is not None else ""), ""]
    if results.get("memory"):
        md += ["## Peak memory (ru_maxrss of a fresh child after N training steps)", "",
               report.memory_markdown(results["memory"]), ""]
    if results.get("scaling"):
        sc = results["scaling"]
        md += [f"## Scaling (training step, model of '{sc['base']}')", "", "### vs sequence length", "",
               report.scaling_markdown(sc["seq_len"], "seq_len"), "", "### vs d_model", "",
               report.scaling_markdown(sc["d_model"], "d_model"), "",
               "Attention share: profiled time of the attention-only ops (scores matmul, mask, softmax, "
               "weights x values, and their backward) over all profiled op time; approximate (see "
               "benchmarks/profiling.py for the op names counted).", ""]
    if results.get("ops"):
        md += ["## Op microbenchmarks", "", ops_markdown(results["ops"]), ""]
    prof_md = []
    for name, res in results["configs"].items():
        pa, pb = res.get("profile_numpy"), res.get("profile_torch")
        if not pa:
            continue
        prof_md += [f"### {name}", ""]
        if "error" in pa:
            prof_md += [f"_minitensor profile unavailable: {pa['error']}_", ""]
            continue
        prof_md += [f"One profiled training step: minitensor wall {pa['wall_ms']:.1f} ms of which {pa['ops_ms']:.1f} ms "
                    f"inside ops ({pa['wall_ms'] - pa['ops_ms']:.1f} ms outside: module calls, graph walk, "
                    f"optimizer); PyTorch wall {pb['wall_ms']:.1f} ms (profiler on).", "",
                    profiling.top_ops_markdown(pa, pb), "", "<details><summary>mt.profiler table</summary>", "",
                    "```", pa["table"], "```", "", "</details>", ""]
    lost = report.losses_markdown(results)
    if lost:
        md += ["## Where the NumPy engine loses", "", lost, ""]
    if prof_md:
        md += ["## Profiles of one training step", ""] + prof_md
    text = "\n".join(md)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text + "\n")
    slim = json.loads(json.dumps(results, default=float))
    for res in slim["configs"].values():     # tables are in results.md; keep the JSON to data
        for k in ("profile_numpy", "profile_torch"):
            if isinstance(res.get(k), dict):
                res[k].pop("table", None)
                res[k]["rows"] = res[k].get("rows", [])[:40]
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(slim, f, indent=1)
    report.plot_ratios(results["configs"], os.path.join(out, "ratios.png"))
    if results.get("scaling"):
        sc = results["scaling"]
        if sc["seq_len"]:
            report.plot_scaling(sc["seq_len"], "seq_len", os.path.join(out, "scaling_length.png"),
                                f"training step vs sequence length ({sc['base']} model)")
        if sc["d_model"]:
            report.plot_scaling(sc["d_model"], "d_model", os.path.join(out, "scaling_dmodel.png"),
                                f"training step vs d_model ({sc['base']} model)")
    if results.get("ops"):
        plot_ops(results["ops"], os.path.join(out, "ops.png"))
    print(text)
    print(f"\nwrote {out}/results.md, results.json, *.png")


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    set_thread_env(args.threads, args.wait_policy)   # before numpy / torch load, or it has no effect
    run(args)
