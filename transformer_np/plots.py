"""Figures for studying a trained (or untrained) Transformer: PNG files via matplotlib's Agg canvas.

Every function takes plain arrays (NumPy or anything `np.asarray` accepts) and an output path,
writes one PNG and returns the path. No pyplot state is touched (figures are built with
`matplotlib.figure.Figure`), so plotting never changes the caller's matplotlib backend.

What this file owns: the positional-encoding heatmap and curves, the causal mask, attention
heatmaps (one head, all heads of a layer as a grid, the head average of every layer), the
training loss curve, the learning-rate schedule, per-layer gradient norms over training, the
curvature study's four panels, and a generic line chart the experiments use.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from minitensor.serialization import atomic_write

DPI = 110


def _save(fig: Figure, path: str) -> str:
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    # atomically (a Ctrl-C mid-write leaves the previous figure); a file object needs the format named
    fmt = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    with atomic_write(path, "wb") as f:
        fig.savefig(f, dpi=DPI, bbox_inches="tight", format=fmt)
    return path


def _array(x, ndim: int | tuple, what: str) -> np.ndarray:
    a = np.asarray(x.detach().numpy() if hasattr(x, "detach") else x)  # a Tensor (minitensor's or torch's)
    ndims = (ndim,) if isinstance(ndim, int) else ndim
    if a.ndim not in ndims:
        raise ValueError(f"{what}: expected a {' or '.join(f'{n}-D' for n in ndims)} array, got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{what}: got an empty array of shape {a.shape}")
    return a


def _labels(labels, n: int, what: str, axis: str):
    if labels is None:
        return None
    labels = [str(t) for t in labels]
    if len(labels) != n:
        raise ValueError(f"{what}: {len(labels)} {axis} labels for an axis of length {n}")
    return labels


def _tick_labels(ax, axis: str, labels, cell_points: float, rotation: int = 0) -> None:
    """Label every cell when the font fits its cell, else every k-th cell, so labels never overlap."""
    fontsize = min(8.0, 0.7 * cell_points)
    every = 1
    while fontsize < 5.0:  # below 5 pt labels are unreadable: thin them out instead
        every += 1
        fontsize = min(8.0, 0.7 * cell_points * every)
    ticks = list(range(0, len(labels), every))
    set_ticks, set_labels = (ax.set_xticks, ax.set_xticklabels) if axis == "x" else (ax.set_yticks, ax.set_yticklabels)
    set_ticks(ticks)
    set_labels([labels[i] for i in ticks], fontsize=fontsize, rotation=rotation)


def _heatmap(ax, data, x_labels, y_labels, cell_inches: tuple, cmap="viridis", vmin=None, vmax=None):
    """imshow plus tick labels; `cell_inches` = (width, height) of one cell, to size the label font."""
    im = ax.imshow(data, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    if x_labels is not None:
        _tick_labels(ax, "x", x_labels, 72 * cell_inches[0], rotation=90)
    if y_labels is not None:
        _tick_labels(ax, "y", y_labels, 72 * cell_inches[1])
    return im


def _row_labels(y_labels, predicts, n: int, what: str):
    """Query-row labels; with `predicts` (what each decoder row is trained to output) 'input -> next'."""
    y_labels = _labels(y_labels, n, what, "y")
    predicts = _labels(predicts, n, what, "predicts")
    if predicts is None:
        return y_labels
    if y_labels is None:
        return [f"-> {p}" for p in predicts]
    return [f"{y} -> {p}" for y, p in zip(y_labels, predicts)]


def _query_axis_label(ylabel: str, predicts) -> str:
    if predicts is None:
        return ylabel
    return f"{ylabel}\n(row t: decoder input token t,\nattending while it predicts token t+1)"


# ----------------------------------------------------------------------------------------------
# Positional encoding and masks
# ----------------------------------------------------------------------------------------------
def plot_positional_encoding(pe, path: str, title: str = "Sinusoidal positional encoding") -> str:
    """Heatmap of PE (positions x dimensions), shown as dimension (rows) against position (columns)."""
    pe = _array(pe, (2, 3), "plot_positional_encoding")
    if pe.ndim == 3:  # (1, L, D) buffer
        pe = pe[0]
    fig = Figure(figsize=(10, 4.5))
    ax = fig.subplots()
    im = ax.imshow(pe.T, aspect="auto", cmap="RdBu", vmin=-1, vmax=1, origin="lower", interpolation="nearest")
    fig.colorbar(im, ax=ax, label="encoding value")
    ax.set_xlabel("position")
    ax.set_ylabel("dimension")
    ax.set_title(f"{title} ({pe.shape[0]} positions x {pe.shape[1]} dimensions)")
    return _save(fig, path)


def plot_positional_curves(
    pe, path: str, dims: Sequence[int] = (0, 1, 2, 3), title: str = "Positional encoding: first dimensions"
) -> str:
    """PE[:, d] against position: top, the first dimensions (a sin/cos pair per frequency);
    bottom, even dimensions spread across the width, whose wavelength grows geometrically."""
    pe = _array(pe, (2, 3), "plot_positional_curves")
    if pe.ndim == 3:
        pe = pe[0]
    D = pe.shape[1]
    dims = [d for d in dims if d < D]
    if not dims:
        raise ValueError(f"plot_positional_curves: none of the dimensions {tuple(dims)} fit a width of {D}")
    spread = sorted({0} | {2 * ((D // m) // 2) for m in (16, 8, 4, 2)})
    fig = Figure(figsize=(10, 6.5))
    top, bottom = fig.subplots(2, 1, sharex=True)
    for ax, chosen, sub in ((top, dims, "first dimensions"), (bottom, spread, "dimensions across the width")):
        for d in chosen:
            ax.plot(pe[:, d], label=f"dim {d} ({'sin' if d % 2 == 0 else 'cos'})", linewidth=1.4)
        ax.set_ylabel("encoding value")
        ax.set_title(sub, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)  # outside: the curves fill the axes
    bottom.set_xlabel("position")
    fig.suptitle(title)
    return _save(fig, path)


def plot_causal_mask(mask, path: str, title: str = "Causal (look-ahead) mask") -> str:
    """The boolean mask (T, T) or any broadcast of it: True (may attend) is dark."""
    m = np.asarray(mask.detach().numpy() if hasattr(mask, "detach") else mask)
    while m.ndim > 2 and m.shape[0] == 1:
        m = m[0]
    m = _array(m, 2, "plot_causal_mask").astype(float)
    T = m.shape[0]
    fig = Figure(figsize=(5.2, 4.5))
    ax = fig.subplots()
    from matplotlib.colors import ListedColormap

    # two colours for two values (a continuous colour bar would suggest values in between)
    im = ax.imshow(m, cmap=ListedColormap(["#f7fbff", "#08306b"]), vmin=-0.5, vmax=1.5, interpolation="nearest")
    cb = fig.colorbar(im, ax=ax, ticks=[0, 1], boundaries=[-0.5, 0.5, 1.5], shrink=0.4)
    cb.ax.set_yticklabels(["blocked (False)", "may attend (True)"])
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    if T <= 30:
        ax.set_xticks(range(T))
        ax.set_yticks(range(T))
    ax.set_title(f"{title}, T={T}")
    return _save(fig, path)


# ----------------------------------------------------------------------------------------------
# Attention
# ----------------------------------------------------------------------------------------------
def _map_inches(shape: tuple, cell: float = 0.22, low: float = 2.4, high: float = 6.5) -> tuple:
    """(width, height) in inches of one heatmap of `shape` (rows, columns): about `cell` per cell, clamped."""
    rows, cols = shape
    return min(max(cell * cols, low), high), min(max(cell * rows, low), high)


def plot_attention(
    weights,
    path: str,
    x_labels=None,
    y_labels=None,
    title: str = "Attention",
    xlabel: str = "key",
    ylabel: str = "query",
    predicts=None,
) -> str:
    """One attention map (T_q, T_k); rows are queries, columns keys, each row sums to 1.

    `predicts`: for decoder maps, the token each query row is trained to output (the next one);
    the rows are then labelled 'input -> next' and the axis says so.
    """
    w = _array(weights, 2, "plot_attention")
    x_labels = _labels(x_labels, w.shape[1], "plot_attention", "x")
    y_labels = _row_labels(y_labels, predicts, w.shape[0], "plot_attention")
    width, height = _map_inches(w.shape, cell=0.28)
    fig = Figure(figsize=(width + 2.2, height + 1.2), layout="constrained")
    ax = fig.subplots()
    im = _heatmap(ax, w, x_labels, y_labels, (width / w.shape[1], height / w.shape[0]), vmin=0, vmax=1)
    fig.colorbar(im, ax=ax, label="attention weight (each row sums to 1)")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(_query_axis_label(ylabel, predicts))
    ax.set_title(title)
    return _save(fig, path)


def plot_attention_heads(
    weights,
    path: str,
    x_labels=None,
    y_labels=None,
    title: str = "Attention heads",
    xlabel: str = "key",
    ylabel: str = "query",
    predicts=None,
) -> str:
    """All heads of one layer (H, T_q, T_k) as a grid of heatmaps sharing one colour scale (0 to 1).

    Heads are numbered from 1. `predicts` as in plot_attention.
    """
    w = _array(weights, 3, "plot_attention_heads")
    H = w.shape[0]
    x_labels = _labels(x_labels, w.shape[2], "plot_attention_heads", "x")
    y_labels = _row_labels(y_labels, predicts, w.shape[1], "plot_attention_heads")
    cols = min(H, 4)
    rows = math.ceil(H / cols)
    width, height = _map_inches(w.shape[1:], cell=0.14, high=4.0)
    label_room = 1.2 if predicts is not None else 0.6
    fig = Figure(figsize=((width + label_room) * cols + 1.5, (height + 1.0) * rows + 0.8), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).reshape(-1)
    cell = (width / w.shape[2], height / w.shape[1])
    im = None
    for h in range(rows * cols):
        ax = axes[h]
        if h >= H:
            ax.axis("off")
            continue
        im = _heatmap(ax, w[h], x_labels, y_labels if h % cols == 0 else None, cell, vmin=0, vmax=1)
        if h % cols:
            ax.set_yticks([])
        ax.set_title(f"head {h + 1} of {H}", fontsize=9)
        if h % cols == 0:
            ax.set_ylabel(_query_axis_label(ylabel, predicts), fontsize=8)
        if h >= (rows - 1) * cols or h + cols >= H:
            ax.set_xlabel(xlabel, fontsize=8)
    fig.colorbar(im, ax=list(axes), label="attention weight (each row sums to 1)", shrink=0.8)
    fig.suptitle(title)
    return _save(fig, path)


def _mean_attention_vmax(maps: list) -> float:
    """Top of the colour scale: the largest weight in any row free to spread over several keys.

    A row that may see one key only (the decoder's first row under the causal mask) holds exactly 1
    and would flatten every other row; it saturates instead (the colour bar's arrow says so).
    """
    free = [m[(m > 0).sum(axis=-1) > 1] for m in maps]
    top = max((float(f.max()) for f in free if f.size), default=0.0)
    return top if top > 0 else 1.0


def plot_attention_layers(
    layer_weights: Sequence,
    path: str,
    x_labels=None,
    y_labels=None,
    title: str = "Attention averaged over heads",
    xlabel: str = "key",
    ylabel: str = "query",
    layer_name: str = "layer",
    predicts=None,
) -> str:
    """The head average of every layer: `layer_weights` is a list of (H, T_q, T_k) (or (T_q, T_k)) arrays.

    Layers are numbered from 1 ('encoder layer 1' is the one next to the embeddings). The colour
    scale runs from 0 to the largest mean weight of any layer, not to 1: averaging over heads
    flattens the maps, and a 0-1 scale would hide their structure. `predicts` as in plot_attention.
    """
    if len(layer_weights) == 0:
        raise ValueError("plot_attention_layers: got no layers")
    maps = []
    for i, lw in enumerate(layer_weights):
        a = _array(lw, (2, 3), f"plot_attention_layers (layer {i + 1})")
        maps.append(a.mean(axis=0) if a.ndim == 3 else a)
    shape = maps[0].shape
    if any(m.shape != shape for m in maps):
        raise ValueError(f"plot_attention_layers: layers have different shapes {[m.shape for m in maps]}")
    x_labels = _labels(x_labels, shape[1], "plot_attention_layers", "x")
    y_labels = _row_labels(y_labels, predicts, shape[0], "plot_attention_layers")
    L = len(maps)
    vmax = _mean_attention_vmax(maps)
    width, height = _map_inches(shape, cell=0.16, high=4.5)
    label_room = 1.2 if predicts is not None else 0.6
    fig = Figure(figsize=((width + 0.3) * L + label_room + 1.5, height + 1.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, L, squeeze=False)).reshape(-1)
    cell = (width / shape[1], height / shape[0])
    im = None
    for i, (ax, m) in enumerate(zip(axes, maps)):
        im = _heatmap(ax, m, x_labels, y_labels if i == 0 else None, cell, vmin=0, vmax=vmax)
        if i:
            ax.set_yticks([])
        ax.set_title(f"{layer_name} {i + 1} of {L}", fontsize=10)
        ax.set_xlabel(xlabel, fontsize=8)
        if i == 0:
            ax.set_ylabel(_query_axis_label(ylabel, predicts), fontsize=8)
    fig.colorbar(
        im,
        ax=list(axes),
        label=f"mean attention weight over heads (scale 0 to {vmax:.2f})",
        shrink=0.85,
        extend="max" if any(m.max() > vmax for m in maps) else "neither",
    )
    fig.suptitle(title)
    return _save(fig, path)


# ----------------------------------------------------------------------------------------------
# Training curves
# ----------------------------------------------------------------------------------------------
def _smooth(y: np.ndarray, window: int) -> np.ndarray:
    if window <= 1 or len(y) < window:
        return y
    c = np.cumsum(np.insert(y, 0, 0.0))
    out = (c[window:] - c[:-window]) / window
    return np.concatenate([y[: window - 1].cumsum() / np.arange(1, window), out])


def plot_loss(steps, losses, path: str, eval_steps=None, eval_losses=None, title: str = "Training loss") -> str:
    """Per-step training loss (faint), its running mean, and held-out loss points if given."""
    steps = _array(steps, 1, "plot_loss (steps)")
    losses = _array(losses, 1, "plot_loss (losses)")
    if steps.shape != losses.shape:
        raise ValueError(f"plot_loss: {steps.shape[0]} steps but {losses.shape[0]} losses")
    fig = Figure(figsize=(9, 4.5))
    ax = fig.subplots()
    window = max(1, len(losses) // 50)
    if window > 1:  # a noisy per-step line, and its running mean on top
        ax.plot(steps, losses, color="tab:blue", alpha=0.3, linewidth=0.8, label="train (per step)")
        ax.plot(
            steps,
            _smooth(losses.astype(float), window),
            color="tab:blue",
            linewidth=1.8,
            label=f"train (running mean of {window} steps)",
        )
    else:  # too few steps to smooth: the per-step line is the curve
        ax.plot(steps, losses, color="tab:blue", linewidth=1.5, label="train (per step)")
    if eval_steps is not None and eval_losses is not None and len(eval_steps):
        ax.plot(eval_steps, eval_losses, "o-", color="tab:orange", label="held-out")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy loss")
    if np.all(losses > 0) and losses.max() / max(losses.min(), 1e-12) > 20:
        _log_axis(ax, "y")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return _save(fig, path)


def plot_lr(steps, lrs, path: str, title: str = "Learning-rate schedule") -> str:
    """Learning rate against optimizer step."""
    steps = _array(steps, 1, "plot_lr (steps)")
    lrs = _array(lrs, 1, "plot_lr (lrs)")
    if steps.shape != lrs.shape:
        raise ValueError(f"plot_lr: {steps.shape[0]} steps but {lrs.shape[0]} learning rates")
    fig = Figure(figsize=(8, 4))
    ax = fig.subplots()
    ax.plot(steps, lrs, color="tab:green", linewidth=1.8)
    peak = int(np.argmax(lrs))
    ax.annotate(
        f"peak {lrs[peak]:.2e} at step {int(steps[peak])}",
        (steps[peak], lrs[peak]),
        textcoords="offset points",
        xytext=(10, -15),
        fontsize=8,
    )
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("learning rate")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return _save(fig, path)


def plot_grad_norms(
    steps, norms: Mapping[str, Sequence[float]], path: str, title: str = "Gradient norm per layer"
) -> str:
    """One line per layer group ('encoder.layers.0', 'generator', ...) of the gradient 2-norm, log scale."""
    steps = _array(steps, 1, "plot_grad_norms (steps)")
    if not norms:
        raise ValueError("plot_grad_norms: got no layer groups")
    fig = Figure(figsize=(10, 5))
    ax = fig.subplots()
    cmap = {"encoder": "Blues", "decoder": "Oranges"}
    names = list(norms)
    import matplotlib

    for _i, name in enumerate(names):
        y = _array(norms[name], 1, f"plot_grad_norms ({name})").astype(float)
        if y.shape != steps.shape:
            raise ValueError(f"plot_grad_norms: {name!r} has {y.shape[0]} values for {steps.shape[0]} steps")
        window = max(1, len(y) // 100)
        side = name.split(".")[0]
        if side in cmap and ".layers." in name:
            idx = int(name.split(".")[2])
            n_side = sum(1 for n in names if n.startswith(side + ".layers."))
            color = matplotlib.colormaps[cmap[side]](0.4 + 0.5 * idx / max(1, n_side - 1))
            ax.plot(steps, _smooth(y, window), color=color, linewidth=1.3, label=name)
        else:
            ax.plot(steps, _smooth(y, window), linewidth=1.0, linestyle="--", label=name)
    _log_axis(ax, "y")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("gradient 2-norm (before clipping)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3, which="both")
    # parameter names count layers from 0: 'encoder.layers.0' is encoder layer 1, next to the embeddings
    ax.legend(fontsize=7, ncol=2, loc="upper right", title="parameter group (layers.0 = first layer)", title_fontsize=7)
    return _save(fig, path)


def _log_axis(ax, axis: str, data_values=None) -> None:
    """A log axis labelled with real values: at the data's own x values when given (1, 2, 4, 8, 16),
    else plain numbers ('0.1', '2', '50') when the range spans at most three decades; wider ranges
    keep powers of ten, the only readable labels there."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

    getattr(ax, f"set_{axis}scale")("log")
    target = ax.xaxis if axis == "x" else ax.yaxis
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    if data_values is not None:
        target.set_major_locator(FixedLocator(sorted(set(float(v) for v in data_values))))
        target.set_major_formatter(plain)
        target.set_minor_locator(NullLocator())
        return
    lo, hi = ax.get_xlim() if axis == "x" else ax.get_ylim()
    if lo > 0 and hi / lo <= 1e3:
        target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        target.set_major_formatter(plain)
        target.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def plot_lines(
    x,
    series: Mapping[str, Sequence[float]],
    path: str,
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool = False,
    logy: bool = False,
    markers: bool = True,
    lower: Mapping[str, Sequence[float]] | None = None,
    lower_ylabel: str = "",
) -> str:
    """A generic chart: one line per named series against a shared x (the experiments' summaries).

    x: numbers, or strings naming categories (length buckets '3-10', ...), drawn evenly spaced
    with their names as tick labels. With logx the ticks sit at the x values themselves.
    `lower`: series in another unit (seconds, say), drawn in a second panel below with its own
    y axis `lower_ylabel`, sharing x, so neither squashes the other.
    """
    categories = None
    if len(x) and all(isinstance(v, str) for v in x):
        categories = [str(v) for v in x]
        x = np.arange(len(categories))
        if logx:
            raise ValueError("plot_lines: a log axis needs numbers, got category names")
    x = _array(x, 1, "plot_lines (x)")
    if not series:
        raise ValueError("plot_lines: got no series")
    panels = [(series, ylabel, logy)] + ([(lower, lower_ylabel, False)] if lower else [])
    fig = Figure(figsize=(8, 4.5 if len(panels) == 1 else 6.5), layout="constrained")
    axes = np.atleast_1d(fig.subplots(len(panels), 1, sharex=True, squeeze=False)).reshape(-1)
    if len(panels) == 2:
        fig.get_layout_engine().set(h_pad=0.1)
    for ax, (panel, label, panel_logy) in zip(axes, panels):
        for name, y in panel.items():
            y = _array(y, 1, f"plot_lines ({name})")
            if y.shape != x.shape:
                raise ValueError(f"plot_lines: series {name!r} has {y.shape[0]} values for {x.shape[0]} x values")
            ax.plot(x, y, "o-" if markers else "-", label=name)
        if panel_logy:
            _log_axis(ax, "y")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3, which="both")
        ax.legend()
    bottom = axes[-1]
    if logx:
        _log_axis(bottom, "x", x)
    if categories is not None:
        bottom.set_xticks(x)
        bottom.set_xticklabels(categories)
        bottom.set_xlim(-0.5, len(categories) - 0.5)
    bottom.set_xlabel(xlabel)
    axes[0].set_title(title)
    return _save(fig, path)


def plot_curvature(
    measured_steps,
    eigenvalues: Mapping[str, Sequence[float]],
    lrs: Mapping[str, Sequence[float]],
    grad_norms: Mapping[str, Sequence[float]],
    residuals: Mapping[str, Sequence[float]],
    path: str,
    title: str = "Curvature of the loss over training",
) -> str:
    """Four panels sharing one colour per run (post-norm, pre-norm): the top Hessian eigenvalue at the
    measured steps, the learning rate and the gradient norm of every training step, and the power
    iteration's residual per iteration at the last measurement (its convergence)."""
    x = _array(measured_steps, 1, "plot_curvature (measured_steps)")
    if not eigenvalues:
        raise ValueError("plot_curvature: got no runs")
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    (top, lr_ax), (gn_ax, conv_ax) = fig.subplots(2, 2)
    colors = dict(zip(eigenvalues, ("tab:blue", "tab:orange", "tab:green", "tab:red")))
    for name, color in colors.items():
        eig = _array(eigenvalues[name], 1, f"plot_curvature ({name} eigenvalues)")
        if eig.shape != x.shape:
            raise ValueError(f"plot_curvature: {name!r} has {eig.shape[0]} eigenvalues for {x.shape[0]} steps")
        top.plot(x, eig, "o-", color=color, label=name)
        lr = np.asarray(lrs[name], dtype=float)
        shared = all(np.array_equal(lr, np.asarray(other, dtype=float)) for other in lrs.values())
        if not shared or name == next(iter(lrs)):  # one line when every run has the same schedule
            lr_ax.plot(
                np.arange(len(lr)),
                lr,
                color="tab:green" if shared else color,
                linewidth=1.5,
                label=" and ".join(lrs) if shared else name,
            )
        gn = np.asarray(grad_norms[name], dtype=float)
        window = max(1, len(gn) // 50)
        if window > 1:  # a noisy per-step line, and its running mean on top
            gn_ax.plot(np.arange(len(gn)), gn, color=color, alpha=0.25, linewidth=0.7)
            gn_ax.plot(
                np.arange(len(gn)),
                _smooth(gn, window),
                color=color,
                linewidth=1.6,
                label=f"{name} (running mean of {window} steps)",
            )
        elif gn.size:
            gn_ax.plot(np.arange(len(gn)), gn, color=color, linewidth=1.5, label=name)
        res = np.asarray(residuals[name], dtype=float)
        conv_ax.plot(np.arange(1, len(res) + 1), res, "o-", color=color, label=name)
    all_eig = np.concatenate([np.asarray(v, dtype=float) for v in eigenvalues.values()])
    if np.all(all_eig > 0) and all_eig.max() / all_eig.min() > 20:
        _log_axis(top, "y")
    top.set_ylabel("top eigenvalue of the loss Hessian")
    top.set_title("sharpness (power iteration on H v)")
    lr_ax.set_ylabel("learning rate")
    lr_ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    lr_ax.set_title("learning rate of each step")
    gn_ax.set_ylabel("gradient 2-norm (before clipping)")
    gn_ax.set_title("gradient norm of each training batch")
    if gn_ax.lines and all(np.all(np.asarray(grad_norms[n], dtype=float) > 0) for n in grad_norms):
        _log_axis(gn_ax, "y")
    conv_ax.set_ylabel("residual ||Hv - lambda v|| / |lambda|")
    conv_ax.set_xlabel(f"power iteration (last measurement, step {int(x[-1])})")
    conv_ax.set_title("convergence of the last eigenvalue estimate")
    if all(np.all(np.asarray(r, dtype=float) > 0) for r in residuals.values()):
        _log_axis(conv_ax, "y")
    from matplotlib.ticker import MaxNLocator

    for ax in (top, lr_ax, gn_ax):
        ax.set_xlabel("optimizer step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))
    for ax in (top, lr_ax, gn_ax, conv_ax):
        ax.grid(True, alpha=0.3, which="both")
        if ax.lines:
            ax.legend(fontsize=8)
    conv_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(title)
    return _save(fig, path)
