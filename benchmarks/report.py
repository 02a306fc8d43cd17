"""Turning a results dict into results.md and PNG charts.

The report has one section per thread count. Each opens with the headline: the training step of
every config, each framework timed in its own process, the ratio (median of per-round ratios)
with its spread, each side's fraction of its own library's GEMM rate, and the peak-memory ratio;
then the interference check, the targets, one table per config, memory, scaling, the op table
and the profiles. Every time is a median in milliseconds (of per-round medians) with its
interquartile range; every ratio is transformer_np time over PyTorch time (below 1 = the NumPy
engine is faster). Charts per thread count N: `ratios_tN.png` (ratio bars per config and
workload, with the per-round spread), `scaling_length_tN.png` and `scaling_dmodel_tN.png`
(log-log step time with the attention share marked), `ops_tN.png`.
"""

from __future__ import annotations

import json
import math
import os

from benchmarks import attention, perop, profiling
from benchmarks.env import facts_line
from benchmarks.plots import plot_ops, plot_ratios, plot_scaling
from benchmarks.workloads import MEASUREMENT_LABELS
from minitensor.serialization import atomic_write
from minitensor.testing import PARITY_RTOL


def _ms(st: dict | None) -> str:
    if not st:
        return "n/a"
    return f"{st['median_ms']:.2f} ({st['iqr_ms']:.2f})"


def _fmt_ratio(r) -> str:
    return "n/a" if r is None or (isinstance(r, float) and math.isnan(r)) else f"{r:.2f}"


def _spread(m: dict) -> str:
    """A ratio with the quartiles and extremes of its per-round ratios: 0.95 [0.93-0.97; 0.90-1.01]."""
    sp = m.get("ratio_spread")
    if not sp:
        return _fmt_ratio(m.get("ratio"))
    return f"{sp['median']:.2f} [{sp['q1']:.2f}-{sp['q3']:.2f}; {sp['min']:.2f}-{sp['max']:.2f}]"


def _against(m: dict) -> str:
    """Which PyTorch side the headline ratio is taken against: the faster one (benchmarks/measure.py)."""
    return {"torch": "twin", "torch-nn": "nn.Transformer"}.get(m.get("torch_fastest", "torch"), "twin")


def _side_ratio(m: dict, side: str) -> str:
    return _fmt_ratio(m.get("ratio_by_side", {}).get(side, {}).get("median"))


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def _tps(x) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def shape_text(res: dict) -> str:
    """The model and batch of a config's results, as one sentence."""
    b, m = res["batch"], res["model"]
    if "n_embd" in m:  # a decoder-only config (benchmarks/gpt_workloads.py)
        kv = m["n_kv_head"] or m["n_head"]
        return (
            f"B={b['batch_size']}, T={b['tgt_len']}, D={m['n_embd']}, H={m['n_head']} (key/value heads {kv}), "
            f"{m['n_layer']} layers, {m['positions']} positions, {m['norm']} norm, {m['mlp']}, V={m['vocab_size']}; "
            f"generate {res['decode_tokens']} tokens at batch 1. "
        )
    return (
        f"B={b['batch_size']}, S={b['src_len']}, T={b['tgt_len']}, D={m['d_model']}, H={m['num_heads']}, layers "
        f"{m['num_encoder_layers']}+{m['num_decoder_layers']}, d_ff={m['d_ff']}, V={m['src_vocab_size']}/"
        f"{m['tgt_vocab_size']}; decode {res['decode_tokens']} tokens. "
    )


def config_markdown(name: str, res: dict) -> str:
    """One config's table: workload, both medians (IQR), ratio with spread, GEMM fractions, tokens/s (+ CUDA)."""
    rate = res.get("gemm_rate", {})
    lines = [
        f"#### {name}",
        "",
        f"{res.get('description', '')}  ",
        shape_text(res) + f"Eval logits agree: max rel err {res['parity']['max_rel']:.1e} "
        f"({'ok' if res['parity']['ok'] else 'MISMATCH'} at PARITY_RTOL float32)"
        + (
            f"; nn.Transformer's max rel err {res['parity_nn']['max_rel']:.1e} "
            f"({'ok' if res['parity_nn']['ok'] else 'MISMATCH'})"
            if res.get("parity_nn")
            else ""
        )
        + ".  ",
        (
            f"GEMM rate on this config's dominant product {'x'.join(map(str, rate['shape']))} (M x K x N): "
            f"NumPy {rate['numpy']:.1f} GFLOP/s, PyTorch {rate['torch']:.1f} GFLOP/s."
            if rate
            else ""
        ),
        "",
    ]
    has_cuda = any("torch-cuda" in m for m in res["measurements"].values())
    head = (
        "| workload | minitensor ms (IQR) | PyTorch twin ms (IQR) | nn.Transformer ms (IQR) | ratio against the "
        "faster PyTorch [IQR; min-max] | against | GFLOP | minitensor % of GEMM rate | PyTorch twin % of GEMM rate | "
        "minitensor tok/s | PyTorch twin tok/s |"
    )
    sep = "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"
    if has_cuda:
        head += " PyTorch CUDA ms (IQR) |"
        sep += "---:|"
    lines += [head, sep]
    for key, m in res["measurements"].items():
        frac, tps = m.get("gemm_fraction", {}), m.get("tokens_per_s", {})
        gflop = f"{m['gflop']:.3g}" if "gflop" in m else "n/a"
        row = (
            f"| {MEASUREMENT_LABELS.get(key, key)} | {_ms(m.get('numpy'))} | {_ms(m.get('torch'))} | "
            f"{_ms(m.get('torch-nn'))} | {_spread(m)} | {_against(m)} | {gflop} | {_pct(frac.get('numpy'))} | "
            f"{_pct(frac.get('torch'))} | {_tps(tps.get('numpy'))} | {_tps(tps.get('torch'))} |"
        )
        if has_cuda:
            row += f" {_ms(m.get('torch-cuda'))} |"
        lines.append(row)
    if "cache_speedup" in res:
        cs = res["cache_speedup"]
        lines += [
            "",
            f"KV-cache speed-up (uncached / cached): minitensor {cs['numpy']:.2f}x, "
            f"PyTorch {cs['torch']:.2f}x."
            + (
                f" Greedy outputs agree on {100 * res['decode_agreement']:.0f}% of tokens."
                if res.get("decode_agreement") is not None
                else ""
            ),
        ]
    for note in res.get("notes", []):
        lines.append(f"\n_Note: {note}_")
    return "\n".join(lines)


def headline_markdown(section: dict) -> str:
    """The training step of every config: times, ratio with spread, GEMM fractions, memory ratio."""
    lines = [
        "| config | minitensor ms | PyTorch twin ms | nn.Transformer ms | ratio against the faster PyTorch "
        "[IQR; min-max of per-round ratios] | against | ratio vs twin | ratio vs nn.Transformer | rounds | "
        "minitensor % of GEMM rate | PyTorch twin % of GEMM rate | peak memory ratio |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, res in section["configs"].items():
        m = res["measurements"].get("train")
        if not m:
            continue
        frac = m.get("gemm_fraction", {})
        mem = section.get("memory", {}).get(name, {}).get("ratio_peak")
        lines.append(
            f"| {name} | {m['numpy']['median_ms']:.2f} | {m['torch']['median_ms']:.2f} | "
            f"{m['torch-nn']['median_ms'] if 'torch-nn' in m else float('nan'):.2f} | {_spread(m)} | {_against(m)} | "
            f"{_side_ratio(m, 'torch')} | {_side_ratio(m, 'torch-nn')} | {m['ratio_spread']['rounds']} | "
            f"{_pct(frac.get('numpy'))} | {_pct(frac.get('torch'))} | {_fmt_ratio(mem)} |"
        )
    return "\n".join(lines)


def interference_markdown(section: dict) -> str:
    """One line per config: PyTorch's training step alone and right after a NumPy step, in one process."""
    lines = []
    for name, res in section["configs"].items():
        it = res.get("interference")
        if not it:
            continue
        a, b, f = it["torch_alone_ms"]["median_ms"], it["torch_after_numpy_ms"]["median_ms"], it["factor"]
        verdict = (
            f"INTERFERENCE: they differ by more than {100 * (it['threshold'] - 1):.0f}%, so timing both "
            "frameworks in one process would misstate PyTorch's time"
            if it["differs"]
            else f"no interference (within {100 * (it['threshold'] - 1):.0f}%)"
        )
        lines.append(
            f"- Interference check, {name}: PyTorch's training step in one process with NumPy took "
            f"{a:.2f} ms alone and {b:.2f} ms right after a NumPy step (x{f:.2f}): {verdict}."
        )
    return "\n".join(lines)


def memory_markdown(mem: dict) -> str:
    lines = [
        "| config | steps | minitensor peak MiB | PyTorch peak MiB | peak ratio | minitensor delta MiB "
        "| PyTorch delta MiB | delta ratio | import floor MiB (mt / torch) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, m in mem.items():
        a, b = m.get("numpy", {}), m.get("torch", {})
        if "error" in a or "error" in b:
            lines.append(f"| {name} | | error: {a.get('error', '')} {b.get('error', '')} | | | | | | |")
            continue
        lines.append(
            f"| {name} | {a['steps']} | {a['peak_kib'] / 1024:.0f} | {b['peak_kib'] / 1024:.0f} | "
            f"{m['ratio_peak']:.2f} | {(a['peak_kib'] - a['baseline_kib']) / 1024:.0f} | "
            f"{(b['peak_kib'] - b['baseline_kib']) / 1024:.0f} | {m['ratio_delta']:.2f} | "
            f"{a['baseline_kib'] / 1024:.0f} / {b['baseline_kib'] / 1024:.0f} |"
        )
    return "\n".join(lines)


def scaling_markdown(series: list[dict], key: str) -> str:
    label = {"seq_len": "S = T", "d_model": "d_model"}[key]
    lines = [
        f"| {label} | minitensor ms (IQR) | PyTorch ms (IQR) | ratio [IQR; min-max] | minitensor % of GEMM rate "
        "| PyTorch % of GEMM rate | attention share mt | attention share torch |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in series:
        frac = p.get("gemm_fraction", {})
        lines.append(
            f"| {p[key]} | {_ms(p['numpy'])} | {_ms(p['torch'])} | {_spread(p)} | {_pct(frac.get('numpy'))} | "
            f"{_pct(frac.get('torch'))} | {_pct(p.get('attention_share_numpy'))} | "
            f"{_pct(p.get('attention_share_torch'))} |"
        )
    return "\n".join(lines)


def targets_markdown(targets: list[dict]) -> str:
    lines = ["| target | measured | limit | status | margin |", "|---|---:|---:|---|---|"]
    for t in targets:
        if t.get("value") is None:
            lines.append(f"| {t['target']} | n/a | {t['limit']} | not measured | {t.get('why', '')} |")
            continue
        status = "met" if t["met"] else "MISSED"
        lines.append(f"| {t['target']} | {t['value']:.2f} | {t['limit']} | {status} | {t['margin']} |")
    return "\n".join(lines)


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


HVP_LABELS = {
    "grad": "one gradient (the unit)",
    "hvp": "HVP, double backward",
    "hvp_functional": "HVP, autograd.functional.hvp",
    "hvp_fwd_rev": "HVP, forward over reverse: func.jvp(func.grad)",
    "hvp_retained": "one more HVP on a recorded gradient (power iteration)",
}
JACOBIAN_LABELS = {"grad": "one gradient of sum(f) (the unit)", "fwd": "jacfwd", "rev": "jacrev"}


def hvp_markdown(hvp: dict) -> str:
    """One row per config and workload: both times, their ratio, and each side's cost in gradients."""
    lines = [
        "| config | workload | minitensor ms | PyTorch ms | ratio [IQR; min-max] | minitensor cost in gradients | "
        "PyTorch cost in gradients |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, res in hvp.items():
        for key, label in HVP_LABELS.items():
            if key not in res:  # a results.json from before the workload existed
                continue
            m = res[key]
            cost = res["cost_in_gradients"].get(key, {"numpy": 1.0, "torch": 1.0})
            lines.append(
                f"| {name} | {label} | {_ms(m['numpy'])} | {_ms(m['torch'])} | {_spread(m)} | "
                f"{cost['numpy']:.2f} | {cost['torch']:.2f} |"
            )
    checks = [_hvp_check_text(name, res["parity"]) for name, res in hvp.items() if "parity" in res]
    if checks:
        lines += [
            "",
            "H v of the two sides, compared in one process (float32 limit PARITY_RTOL "
            f"{PARITY_RTOL['float32']:g}; as in the parity report, a ReLU input within round-off of 0 takes "
            "transformer_np's side of 0 on the torch side): " + "; ".join(checks) + ".",
        ]
    return "\n".join(lines)


def jacobians_markdown(jac: dict) -> str:
    """jacfwd and jacrev of a tall and a wide function: both times, and each side's cost in gradients."""
    lines = [
        "| Jacobian (inputs -> outputs) | workload | minitensor ms | PyTorch ms | minitensor cost in gradients | "
        "PyTorch cost in gradients |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for kind, res in jac.items():
        n_in, _, n_out = res["shape"]
        for suffix, label in JACOBIAN_LABELS.items():
            key = f"jac_{kind}_{suffix}"
            m = res[key]
            cost = res["cost_in_gradients"].get(key, {"numpy": 1.0, "torch": 1.0})
            lines.append(
                f"| {kind} ({n_in} -> {n_out}) | {label} | {_ms(m['numpy'])} | {_ms(m['torch'])} | "
                f"{cost['numpy']:.2f} | {cost['torch']:.2f} |"
            )
    return "\n".join(lines)


def _hvp_check_text(name: str, check: dict) -> str:
    text = f"{name}: max rel {check['max_rel']:.2e} ({'ok' if check['ok'] else 'DIFFERS'}"
    branches = check.get("relu_branches")
    if branches:
        text += f"; ReLU branches aligned: {branches['aligned']:,} of {branches['seen']:,} inputs"
    return text + ")"


def losses_markdown(results: dict, top: int = 10) -> str:
    """Where the NumPy engine loses: step split (ops vs Python outside ops), top ops, worst op ratios."""
    lines = []
    prof_rows = []
    for name, res in results.get("configs", {}).items():
        pa, pb = res.get("profile_numpy") or {}, res.get("profile_torch") or {}
        if not pa.get("rows"):
            continue
        train = res["measurements"].get("train", {})
        prof_rows.append(
            f"| {name} | {_fmt_ratio(train.get('ratio'))} | {pa['wall_ms']:.1f} | {pa['ops_ms']:.1f} | "
            f"{pa['wall_ms'] - pa['ops_ms']:.1f} ({100 * (1 - pa['ops_ms'] / pa['wall_ms']):.0f}%) | "
            f"{pb.get('wall_ms', float('nan')):.1f} | "
            + ", ".join(f"{r['op']} {100 * r['total_ms'] / pa['wall_ms']:.0f}%" for r in pa["rows"][:5])
            + " |"
        )
    if prof_rows:
        lines += (
            [
                "One profiled training step per config: how much of minitensor's step is inside ops and how "
                "much is Python outside them (module calls, graph bookkeeping, optimizer loop), and the ops "
                "that take the most of the step.",
                "",
                "| config | train ratio | mt step ms (profiled) | in ops ms | outside ops ms | torch step ms "
                "(profiled) | top minitensor ops (share of step) |",
                "|---|---:|---:|---:|---:|---:|---|",
            ]
            + prof_rows
            + [""]
        )
    phase_rows = []
    for name, res in results.get("configs", {}).items():
        ph = res.get("phases")
        if not ph:
            continue
        for k in ph["numpy"]:
            a, b = ph["numpy"][k], ph["torch"][k]
            phase_rows.append(
                f"| {name} | {k} | {a:.2f} | {b:.2f} | {a / b if b > 0 else float('nan'):.2f} | {a - b:+.2f} |"
            )
    if phase_rows:
        lines += (
            [
                "Training step split into phases (median of a few A B rounds, clock read between phases):",
                "",
                "| config | phase | minitensor ms | PyTorch ms | ratio | minitensor - PyTorch ms |",
                "|---|---|---:|---:|---:|---:|",
            ]
            + phase_rows
            + [""]
        )
    ops = [r for r in results.get("ops", []) if r["ratio_fb"] > 1.0]
    ops.sort(key=lambda r: (r["size"] != "large", -r["ratio_fb"]))
    if ops:
        lines += [
            "Ops slower than PyTorch in the microbenchmarks (forward+backward), Transformer-sized first:",
            "",
            "| op | size | fwd+bwd ratio | minitensor us | torch us | lost us per call |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for r in ops[: 2 * top]:
            lines.append(
                f"| {r['op']} | {r['size']} | {r['ratio_fb']:.2f} | {r['numpy_fb_ms'] * 1e3:.0f} | "
                f"{r['torch_fb_ms'] * 1e3:.0f} | {(r['numpy_fb_ms'] - r['torch_fb_ms']) * 1e3:.0f} |"
            )
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- the report
METHOD_SEPARATE = (
    "Method: each framework runs in its own long-lived worker process (the NumPy process never imports torch), "
    "warmed up, and the two processes take turns A B A B, {settle} s apart so that the idle BLAS/OpenMP threads of "
    "the last one stop spinning; a round is the median of a few calls; a time is the median of the per-round "
    "figures (IQR in parentheses); a ratio is the median of the per-round ratios, with their IQR and min-max. "
    "% of GEMM rate = the step's matrix-product FLOPs (benchmarks/flops.py: forward from the model's shapes, "
    "3x for forward+backward) / its median time, over the float32 GEMM rate of the same library measured in the "
    "same run, in the same process, on the config's dominant product shape."
)
METHOD_IN_PROCESS = (
    "**Method: in-process (`--in-process`), not the headline method.** Both frameworks ran in one process, "
    "alternating A B A B; NumPy's BLAS threads spinning after a NumPy call can slow the PyTorch call that follows "
    "(see the interference check), so PyTorch's times and every ratio here may favour NumPy. Measure without "
    "`--in-process` for figures to quote."
)


def section_markdown(section: dict, method: str, settle_s: float) -> list[str]:
    """The report's section for one thread count."""
    n = section["threads"]
    g = section["gemm_reference"]
    md = [
        f"## {n} thread{'s' if n > 1 else ''}",
        "",
        f"Machine: {facts_line(section['machine'])}  ",
        f"float32 GEMM {'x'.join(map(str, g['shape']))}: NumPy/OpenBLAS {g['numpy']:.0f} GFLOP/s, "
        f"PyTorch {g['torch']:.0f} GFLOP/s (each in its own process).",
        "",
    ]
    md += [METHOD_IN_PROCESS if method == "in-process" else METHOD_SEPARATE.format(settle=settle_s), ""]
    md += [f"_Note: {note}_" for note in section.get("notes", [])]
    label = "both frameworks in ONE process (in-process mode)" if method == "in-process" else "separate processes"
    md += [f"### Training step, {label}", "", headline_markdown(section), "", interference_markdown(section), ""]
    if section.get("targets"):
        md += ["### Targets", "", targets_markdown(section["targets"]), ""]
    md += ["### Per config", ""]
    for name, res in section["configs"].items():
        md += [config_markdown(name, res), ""]
    if section.get("hvp"):
        md += [
            "### Hessian-vector product beside one gradient",
            "",
            "Eval mode (no dropout), the training loss (cross-entropy, label smoothing 0.1) of one batch, a fixed "
            "seeded direction v. Double backward: grad(loss, params, create_graph=True), then grad(<grads, v>, "
            "params). autograd.functional.hvp: the loss as a function of the parameters (functional_call): "
            "PyTorch computes it by the double-vjp trick (one backward more), minitensor by forward over reverse. "
            "Forward over reverse: func.jvp(func.grad(loss), (params,), (v,)) on both sides (torch.func, mt.func). "
            "Cost in gradients = median HVP time / median gradient time on the same side (theory: a small "
            "constant, about 2 to 4).",
            "",
            hvp_markdown(section["hvp"]),
            "",
        ]
    if section.get("jacobians"):
        md += [
            "### jacfwd and jacrev beside one gradient",
            "",
            "f(x) = tanh(W2 tanh(W1 x)), float32, tall (few inputs, many outputs) and wide. jacfwd costs about one "
            "forward pass with tangents per input, jacrev one backward per output; PyTorch batches those passes with "
            "vmap, minitensor runs them one by one (no vmap).",
            "",
            jacobians_markdown(section["jacobians"]),
            "",
        ]
    if section.get("memory"):
        md += [
            "### Peak memory (VmHWM of a fresh child after N training steps)",
            "",
            memory_markdown(section["memory"]),
            "",
        ]
    if section.get("attention"):
        md += [attention.markdown(section["attention"]), ""]
    if section.get("scaling"):
        sc = section["scaling"]
        md += [
            f"### Scaling (training step, model of '{sc['base']}')",
            "",
            "#### vs sequence length",
            "",
            scaling_markdown(sc["seq_len"], "seq_len"),
            "",
            "#### vs d_model",
            "",
            scaling_markdown(sc["d_model"], "d_model"),
            "",
            "Attention share: profiled time of the attention-only ops (scores matmul, mask, softmax, "
            "weights x values, and their backward) over all profiled op time; approximate (see "
            "benchmarks/profiling.py for the op names counted).",
            "",
        ]
    if section.get("ops"):
        md += [
            "### Op microbenchmarks",
            "",
            "Each side in its own process, whole passes over the op table "
            "alternating; ratios are medians of per-pass ratios.",
            "",
            ops_markdown(section["ops"]),
            "",
        ]
    if section.get("perop"):
        md += ["### The engine's cost per op", "", perop.markdown(section["perop"]), ""]
    lost = losses_markdown(section)
    if lost:
        md += ["### Where the NumPy engine loses", "", lost, ""]
    for name, res in section["configs"].items():
        pa, pb = res.get("profile_numpy"), res.get("profile_torch")
        if not pa:
            continue
        md += [f"#### Profile of one training step: {name}", ""]
        if "error" in pa:
            md += [f"_minitensor profile unavailable: {pa['error']}_", ""]
            continue
        md += [
            f"One profiled training step: minitensor wall {pa['wall_ms']:.1f} ms of which {pa['ops_ms']:.1f} ms "
            f"inside ops ({pa['wall_ms'] - pa['ops_ms']:.1f} ms outside: module calls, graph walk, "
            f"optimizer); PyTorch wall {pb['wall_ms']:.1f} ms (profiler on).",
            "",
            profiling.top_ops_markdown(pa, pb),
            "",
        ]
        if pa.get("table"):  # results.json keeps the rows only
            md += ["<details><summary>mt.profiler table</summary>", "", "```", pa["table"], "```", "", "</details>", ""]
    return md


def write_outputs(results: dict, out: str) -> str:
    """results.md, results.json and the PNGs of every thread count into `out`; returns the Markdown."""
    counts = ", ".join(results["threads"])
    md = [
        "# transformer_np vs PyTorch benchmarks",
        "",
        f"Command: `{results['command']}`  ",
        f"Started {results['started_utc']}, took {results['elapsed_s']:.0f} s; thread counts: {counts}; "
        f"method: **{results['method']}**.  ",
        (
            f"Load average at the end: {' '.join(f'{x:.1f}' for x in results['load_average_end'])} "
            "(above the usable cores means other processes shared them: times inflated)."
            if results.get("load_average_end")
            else ""
        ),
        "",
        "Times are medians in ms with the interquartile range in parentheses; ratio = transformer_np time / "
        "PyTorch time (below 1: the NumPy engine is faster). Both sides float32, same weights, same threads. "
        "tokens/s counts source + target positions per step (decoding: generated tokens).",
        "",
    ]
    for section in results["threads"].values():
        md += section_markdown(section, results["method"], results["settings"]["settle_s"])
    text = "\n".join(md)
    with atomic_write(os.path.join(out, "results.md")) as f:
        f.write(text + "\n")
    slim = json.loads(json.dumps(results, default=float))
    for section in slim["threads"].values():  # tables are in results.md; keep the JSON to data
        for res in section["configs"].values():
            for k in ("profile_numpy", "profile_torch"):
                if isinstance(res.get(k), dict):
                    res[k].pop("table", None)
                    res[k]["rows"] = res[k].get("rows", [])[:40]
    with atomic_write(os.path.join(out, "results.json")) as f:
        json.dump(slim, f, indent=1)
    for n, section in results["threads"].items():
        how = "one process" if results["method"] == "in-process" else "a process per side"
        plot_ratios(
            section["configs"],
            os.path.join(out, f"ratios_t{n}.png"),
            f"transformer_np vs PyTorch eager, {n} thread(s), {how}\n"
            "float32; < 1 = NumPy faster; whiskers: IQR of the per-round ratios",
        )
        sc = section.get("scaling")
        if sc and sc["seq_len"]:
            plot_scaling(
                sc["seq_len"],
                "seq_len",
                os.path.join(out, f"scaling_length_t{n}.png"),
                f"training step vs sequence length ({sc['base']} model, {n} thread(s))",
            )
        if sc and sc["d_model"]:
            plot_scaling(
                sc["d_model"],
                "d_model",
                os.path.join(out, f"scaling_dmodel_t{n}.png"),
                f"training step vs d_model ({sc['base']} model, {n} thread(s))",
            )
        if section.get("ops"):
            plot_ops(section["ops"], os.path.join(out, f"ops_t{n}.png"))
        if section.get("attention"):
            attention.plot(section["attention"], os.path.join(out, f"attention_t{n}.png"))
    return text
