"""Turning a results dict into results.md and PNG charts.

Every table cell is a median in milliseconds with its spread (IQR) beside it; every ratio is
minitensor/transformer_np time over PyTorch time (below 1 = the NumPy engine is faster).
Charts: `ratios.png` (ratio bars per config and workload), `scaling_length.png` and
`scaling_dmodel.png` (log-log step time with the attention share marked), `ops.png`.
"""
from __future__ import annotations

import math

MEASUREMENT_LABELS = {
    "forward": "forward (eval, no_grad)",
    "fwd_bwd": "forward + backward",
    "train": "training step",
    "greedy_nocache": "greedy decode, no cache",
    "greedy_cache": "greedy decode, KV cache",
}


def _ms(st: dict | None) -> str:
    if not st:
        return "n/a"
    return f"{st['median_ms']:.2f} ({st['iqr_ms']:.2f})"


def _fmt_ratio(r) -> str:
    return "n/a" if r is None or (isinstance(r, float) and math.isnan(r)) else f"{r:.2f}"


def _tps(x) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def config_markdown(name: str, res: dict) -> str:
    """One config's table: workload, both medians (IQR), ratio, tokens/s both sides (+ CUDA rows)."""
    b = res["batch"]
    lines = [f"### {name}", "",
             f"{res.get('description', '')}  ",
             f"B={b['batch_size']}, S={b['src_len']}, T={b['tgt_len']}, D={res['model']['d_model']}, "
             f"H={res['model']['num_heads']}, layers {res['model']['num_encoder_layers']}+"
             f"{res['model']['num_decoder_layers']}, d_ff={res['model']['d_ff']}, V={res['model']['src_vocab_size']}/"
             f"{res['model']['tgt_vocab_size']}; decode {res['decode_tokens']} tokens. "
             f"Eval logits agree: max rel err {res['parity']['max_rel']:.1e} "
             f"({'ok' if res['parity']['ok'] else 'MISMATCH'} at PARITY_RTOL float32).", ""]
    has_cuda = any("torch-cuda" in m for m in res["measurements"].values())
    head = "| workload | minitensor ms (IQR) | PyTorch ms (IQR) | ratio | minitensor tok/s | PyTorch tok/s |"
    sep = "|---|---:|---:|---:|---:|---:|"
    if has_cuda:
        head += " PyTorch CUDA ms (IQR) |"
        sep += "---:|"
    lines += [head, sep]
    for key, m in res["measurements"].items():
        row = (f"| {MEASUREMENT_LABELS.get(key, key)} | {_ms(m.get('numpy'))} | {_ms(m.get('torch'))} | "
               f"{_fmt_ratio(m.get('ratio'))} | {_tps(m.get('tokens_per_s', {}).get('numpy'))} | "
               f"{_tps(m.get('tokens_per_s', {}).get('torch'))} |")
        if has_cuda:
            row += f" {_ms(m.get('torch-cuda'))} |"
        lines.append(row)
    for note in res.get("notes", []):
        lines.append(f"\n_Note: {note}_")
    return "\n".join(lines)


def memory_markdown(mem: dict) -> str:
    lines = ["| config | steps | minitensor peak MiB | PyTorch peak MiB | peak ratio | minitensor delta MiB "
             "| PyTorch delta MiB | delta ratio | import floor MiB (mt / torch) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, m in mem.items():
        a, b = m.get("numpy", {}), m.get("torch", {})
        if "error" in a or "error" in b:
            lines.append(f"| {name} | | error: {a.get('error', '')} {b.get('error', '')} | | | | | | |")
            continue
        lines.append(f"| {name} | {a['steps']} | {a['peak_kib'] / 1024:.0f} | {b['peak_kib'] / 1024:.0f} | "
                     f"{m['ratio_peak']:.2f} | {(a['peak_kib'] - a['baseline_kib']) / 1024:.0f} | "
                     f"{(b['peak_kib'] - b['baseline_kib']) / 1024:.0f} | {m['ratio_delta']:.2f} | "
                     f"{a['baseline_kib'] / 1024:.0f} / {b['baseline_kib'] / 1024:.0f} |")
    return "\n".join(lines)


def scaling_markdown(series: list[dict], key: str) -> str:
    label = {"seq_len": "S = T", "d_model": "d_model"}[key]
    lines = [f"| {label} | minitensor ms (IQR) | PyTorch ms (IQR) | ratio | attention share mt | attention share torch |",
             "|---:|---:|---:|---:|---:|---:|"]
    for p in series:
        sa, sb = p.get("attention_share_numpy"), p.get("attention_share_torch")
        lines.append(f"| {p[key]} | {_ms(p['numpy'])} | {_ms(p['torch'])} | {p['ratio']:.2f} | "
                     f"{'n/a' if sa is None else f'{100 * sa:.0f}%'} | {'n/a' if sb is None else f'{100 * sb:.0f}%'} |")
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


# ------------------------------------------------------------------------------------------ plots
def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _plain_log_ticks(axis) -> None:
    """Log axis labelled 0.5, 1, 2 rather than 5x10^-1."""
    from matplotlib.ticker import FuncFormatter, LogLocator
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def plot_ratios(configs: dict, path: str) -> None:
    """Grouped bars: per config, one bar per workload, height = minitensor / PyTorch."""
    plt = _plt()
    keys = list(MEASUREMENT_LABELS)
    names = list(configs)
    width = 0.8 / len(keys)
    fig, ax = plt.subplots(figsize=(max(6, 1.9 * len(names) + 2), 4.2))
    for j, key in enumerate(keys):
        xs, ys = [], []
        for i, n in enumerate(names):
            r = configs[n]["measurements"].get(key, {}).get("ratio")
            if r is not None and r > 0:
                xs.append(i + (j - (len(keys) - 1) / 2) * width)
                ys.append(r)
        bars = ax.bar(xs, ys, width, label=MEASUREMENT_LABELS[key])
        for x, y in zip(xs, ys):
            ax.text(x, y, f"{y:.2f}", ha="center", va="bottom", fontsize=7, rotation=90)
        del bars
    ax.axhline(1.0, color="k", lw=1)
    ax.set_ylim(0, None)                 # linear from 0: bar heights compare directly
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("time, minitensor / PyTorch")
    ax.set_title("transformer_np vs PyTorch eager (float32, same weights and threads; < 1 = NumPy faster)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_scaling(series: list[dict], key: str, path: str, title: str) -> None:
    """Log-log step time of both sides vs `key`, the attention part dashed, share % annotated."""
    plt = _plt()
    from matplotlib.ticker import FuncFormatter
    xs = [p[key] for p in series]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for side, color, label in (("numpy", "tab:blue", "minitensor"), ("torch", "tab:orange", "PyTorch")):
        ys = [p[side]["median_ms"] for p in series]
        lo = [p[side]["median_ms"] - p[side]["q1_ms"] for p in series]
        hi = [p[side]["q3_ms"] - p[side]["median_ms"] for p in series]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", color=color, label=f"{label} training step", capsize=2)
        shares = [p.get(f"attention_share_{side}") for p in series]
        if all(s is not None for s in shares):
            att = [y * s for y, s in zip(ys, shares)]
            ax.plot(xs, att, ls="--", marker=".", color=color, alpha=0.8,
                    label=f"{label}: attention O(n^2) ops (profiled share)")
            for x, y, s in zip(xs, ys, shares):
                ax.annotate(f"{100 * s:.0f}%", (x, y), textcoords="offset points",
                            xytext=(0, 6 if side == "numpy" else -12), fontsize=7, color=color, ha="center")
    # Reference slopes through the first minitensor point.
    y0 = series[0]["numpy"]["median_ms"]
    for power, ls in ((1, ":"), (2, "-.")):
        ax.plot(xs, [y0 * (x / xs[0]) ** power for x in xs], color="gray", ls=ls, lw=0.8, label=f"O(n^{power})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    _plain_log_ticks(ax.yaxis)
    ax.set_xlabel({"seq_len": "sequence length S = T", "d_model": "d_model (d_ff = 4 d_model)"}[key])
    ax.set_ylabel("median ms per training step")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def losses_markdown(results: dict, top: int = 10) -> str:
    """Where the NumPy engine loses: step split (ops vs Python outside ops), top ops, worst op ratios."""
    lines = []
    prof_rows = []
    for name, res in results.get("configs", {}).items():
        pa, pb = res.get("profile_numpy") or {}, res.get("profile_torch") or {}
        if not pa.get("rows"):
            continue
        train = res["measurements"].get("train", {})
        prof_rows.append(f"| {name} | {_fmt_ratio(train.get('ratio'))} | {pa['wall_ms']:.1f} | {pa['ops_ms']:.1f} | "
                         f"{pa['wall_ms'] - pa['ops_ms']:.1f} ({100 * (1 - pa['ops_ms'] / pa['wall_ms']):.0f}%) | "
                         f"{pb.get('wall_ms', float('nan')):.1f} | "
                         + ", ".join(f"{r['op']} {100 * r['total_ms'] / pa['wall_ms']:.0f}%" for r in pa["rows"][:5])
                         + " |")
    if prof_rows:
        lines += ["One profiled training step per config: how much of minitensor's step is inside ops and how "
                  "much is Python outside them (module calls, graph bookkeeping, optimizer loop), and the ops "
                  "that take the most of the step.", "",
                  "| config | train ratio | mt step ms (profiled) | in ops ms | outside ops ms | torch step ms "
                  "(profiled) | top minitensor ops (share of step) |",
                  "|---|---:|---:|---:|---:|---:|---|"] + prof_rows + [""]
    phase_rows = []
    for name, res in results.get("configs", {}).items():
        ph = res.get("phases")
        if not ph:
            continue
        for k in ph["numpy"]:
            a, b = ph["numpy"][k], ph["torch"][k]
            phase_rows.append(f"| {name} | {k} | {a:.2f} | {b:.2f} | {a / b if b > 0 else float('nan'):.2f} | "
                              f"{a - b:+.2f} |")
    if phase_rows:
        lines += ["Training step split into phases (median of a few A B rounds, clock read between phases):", "",
                  "| config | phase | minitensor ms | PyTorch ms | ratio | minitensor - PyTorch ms |",
                  "|---|---|---:|---:|---:|---:|"] + phase_rows + [""]
    ops = [r for r in results.get("ops", []) if r["ratio_fb"] > 1.0]
    ops.sort(key=lambda r: (r["size"] != "large", -r["ratio_fb"]))
    if ops:
        lines += ["Ops slower than PyTorch in the microbenchmarks (forward+backward), Transformer-sized first:", "",
                  "| op | size | fwd+bwd ratio | minitensor us | torch us | lost us per call |",
                  "|---|---|---:|---:|---:|---:|"]
        for r in ops[:2 * top]:
            lines.append(f"| {r['op']} | {r['size']} | {r['ratio_fb']:.2f} | {r['numpy_fb_ms'] * 1e3:.0f} | "
                         f"{r['torch_fb_ms'] * 1e3:.0f} | {(r['numpy_fb_ms'] - r['torch_fb_ms']) * 1e3:.0f} |")
    return "\n".join(lines)
