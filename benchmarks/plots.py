"""The PNG charts of the report: ratio bars per config, the scaling series, the op table's ratios.

Each chart is written whole or not at all (atomic_write): an interrupted run never leaves a
half-written PNG. Axes with a log scale are labelled 0.5, 1, 2 (`plain_log_ticks`).
"""

from __future__ import annotations

from benchmarks.workloads import MEASUREMENT_LABELS
from minitensor.serialization import atomic_write


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plain_log_ticks(axis) -> None:
    """Log axis labelled 0.5, 1, 2 rather than 5x10^-1."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def plot_ratios(configs: dict, path: str, title: str) -> None:
    """Grouped bars: per config, one bar per workload, height = median per-round ratio, whiskers = its IQR."""
    plt = pyplot()
    keys = list(MEASUREMENT_LABELS)
    names = list(configs)
    width = 0.8 / len(keys)
    fig, ax = plt.subplots(figsize=(max(6, 1.9 * len(names) + 2), 4.2))
    for j, key in enumerate(keys):
        xs, ys, lo, hi = [], [], [], []
        for i, n in enumerate(names):
            m = configs[n]["measurements"].get(key, {})
            r, sp = m.get("ratio"), m.get("ratio_spread")
            if r is not None and r > 0:
                xs.append(i + (j - (len(keys) - 1) / 2) * width)
                ys.append(r)
                lo.append(r - sp["q1"] if sp else 0)
                hi.append(sp["q3"] - r if sp else 0)
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, error_kw={"lw": 0.8}, label=MEASUREMENT_LABELS[key])
        for x, y, h in zip(xs, ys, hi):
            ax.text(x, y + h, f"{y:.2f}", ha="center", va="bottom", fontsize=7, rotation=90)
    ax.axhline(1.0, color="k", lw=1)
    ax.set_ylim(0, None)  # linear from 0: bar heights compare directly
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("time, minitensor / PyTorch")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    with atomic_write(path, "wb", suffix=".png") as f:  # never a half-written PNG
        fig.savefig(f, dpi=110, format="png")
    plt.close(fig)


def plot_scaling(series: list[dict], key: str, path: str, title: str) -> None:
    """Log-log step time of both sides vs `key`, the attention part dashed, share % annotated."""
    plt = pyplot()
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
            ax.plot(
                xs,
                att,
                ls="--",
                marker=".",
                color=color,
                alpha=0.8,
                label=f"{label}: attention O(n^2) ops (profiled share)",
            )
            for x, y, s in zip(xs, ys, shares):
                ax.annotate(
                    f"{100 * s:.0f}%",
                    (x, y),
                    textcoords="offset points",
                    xytext=(0, 6 if side == "numpy" else -12),
                    fontsize=7,
                    color=color,
                    ha="center",
                )
    # Reference slopes through the first minitensor point.
    y0 = series[0]["numpy"]["median_ms"]
    for power, ls in ((1, ":"), (2, "-.")):
        ax.plot(xs, [y0 * (x / xs[0]) ** power for x in xs], color="gray", ls=ls, lw=0.8, label=f"O(n^{power})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    plain_log_ticks(ax.yaxis)
    ax.set_xlabel({"seq_len": "sequence length S = T", "d_model": "d_model (d_ff = 4 d_model)"}[key])
    ax.set_ylabel("median ms per training step")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    with atomic_write(path, "wb", suffix=".png") as f:  # never a half-written PNG
        fig.savefig(f, dpi=110, format="png")
    plt.close(fig)


def plot_ops(rows: list[dict], path: str) -> None:
    """Horizontal bars of the forward+backward ratio per op, log scale, 1.0 marked."""
    plt = pyplot()

    labels = [f"{r['op']} ({r['size']})" for r in rows]
    ratios = [r["ratio_fb"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(rows) + 1.2))
    colors = ["tab:red" if x > 1.5 else "tab:orange" if x > 1.0 else "tab:green" for x in ratios]
    ax.barh(range(len(rows)), ratios, color=colors)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    plain_log_ticks(ax.xaxis)
    ax.axvline(1.0, color="k", lw=1)
    ax.set_xlabel("forward+backward time, minitensor / PyTorch (log; < 1 = minitensor faster)")
    ax.set_title("Op microbenchmarks (float32)")
    for y, x in enumerate(ratios):
        ax.text(x, y, f" {x:.2f}", va="center", fontsize=7)
    fig.tight_layout()
    with atomic_write(path, "wb", suffix=".png") as f:  # never a half-written PNG
        fig.savefig(f, dpi=110, format="png")
    plt.close(fig)
