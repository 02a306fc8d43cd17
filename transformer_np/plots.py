"""Figures for studying a trained (or untrained) Transformer: PNG files via matplotlib's Agg canvas.

Every function takes plain arrays (NumPy or anything `np.asarray` accepts) and an output path,
writes one PNG and returns the path. No pyplot state is touched (figures are built with
`matplotlib.figure.Figure`), so plotting never changes the caller's matplotlib backend.

What this file owns: the positional-encoding heatmap and curves, the causal mask, attention
heatmaps (one head, all heads of a layer as a grid, the head average of every layer), the
training loss curve, the learning-rate schedule, per-layer gradient norms over training, and
a generic line chart the experiments use.
"""
from __future__ import annotations

import math
import os
from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

DPI = 110


def _save(fig: Figure, path: str) -> str:
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


def _array(x, ndim: int | tuple, what: str) -> np.ndarray:
    a = np.asarray(getattr(x, "data", x) if not isinstance(x, np.ndarray) else x)
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


def _heatmap(ax, data, x_labels, y_labels, cmap="viridis", vmin=None, vmax=None, fontsize=8):
    im = ax.imshow(data, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    if x_labels is not None:
        ax.set_xticks(range(len(x_labels)))
        ax.set_xticklabels(x_labels, rotation=90, fontsize=fontsize)
    if y_labels is not None:
        ax.set_yticks(range(len(y_labels)))
        ax.set_yticklabels(y_labels, fontsize=fontsize)
    return im


# ----------------------------------------------------------------------------------------------
# Positional encoding and masks
# ----------------------------------------------------------------------------------------------
def plot_positional_encoding(pe, path: str, title: str = "Sinusoidal positional encoding") -> str:
    """Heatmap of PE (positions x dimensions), shown as dimension (rows) against position (columns)."""
    pe = _array(pe, (2, 3), "plot_positional_encoding")
    if pe.ndim == 3:                     # (1, L, D) buffer
        pe = pe[0]
    fig = Figure(figsize=(10, 4.5))
    ax = fig.subplots()
    im = ax.imshow(pe.T, aspect="auto", cmap="RdBu", vmin=-1, vmax=1, origin="lower", interpolation="nearest")
    fig.colorbar(im, ax=ax, label="encoding value")
    ax.set_xlabel("position")
    ax.set_ylabel("dimension")
    ax.set_title(f"{title} ({pe.shape[0]} positions x {pe.shape[1]} dimensions)")
    return _save(fig, path)


def plot_positional_curves(pe, path: str, dims: Sequence[int] = (0, 1, 2, 3),
                           title: str = "Positional encoding: first dimensions") -> str:
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
        ax.legend(loc="upper right", fontsize=8, ncol=2)
    bottom.set_xlabel("position")
    fig.suptitle(title)
    return _save(fig, path)


def plot_causal_mask(mask, path: str, title: str = "Causal (look-ahead) mask") -> str:
    """The boolean mask (T, T) or any broadcast of it: True (may attend) is dark."""
    m = np.asarray(getattr(mask, "data", mask))
    while m.ndim > 2 and m.shape[0] == 1:
        m = m[0]
    m = _array(m, 2, "plot_causal_mask").astype(float)
    T = m.shape[0]
    fig = Figure(figsize=(5.2, 4.5))
    ax = fig.subplots()
    im = ax.imshow(m, cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
    cb = fig.colorbar(im, ax=ax, ticks=[0, 1])
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
def plot_attention(weights, path: str, x_labels=None, y_labels=None, title: str = "Attention",
                   xlabel: str = "key", ylabel: str = "query") -> str:
    """One attention map (T_q, T_k); rows are queries, columns keys, each row sums to 1."""
    w = _array(weights, 2, "plot_attention")
    x_labels = _labels(x_labels, w.shape[1], "plot_attention", "x")
    y_labels = _labels(y_labels, w.shape[0], "plot_attention", "y")
    side = max(4.0, 0.35 * max(w.shape) + 2)
    fig = Figure(figsize=(side * w.shape[1] / max(w.shape) + 1.5, side * w.shape[0] / max(w.shape) + 0.5))
    ax = fig.subplots()
    im = _heatmap(ax, w, x_labels, y_labels, vmin=0, vmax=1)
    fig.colorbar(im, ax=ax, label="attention weight")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return _save(fig, path)


def plot_attention_heads(weights, path: str, x_labels=None, y_labels=None, title: str = "Attention heads",
                         xlabel: str = "key", ylabel: str = "query") -> str:
    """All heads of one layer (H, T_q, T_k) as a grid of heatmaps sharing one colour scale."""
    w = _array(weights, 3, "plot_attention_heads")
    H = w.shape[0]
    x_labels = _labels(x_labels, w.shape[2], "plot_attention_heads", "x")
    y_labels = _labels(y_labels, w.shape[1], "plot_attention_heads", "y")
    cols = min(H, 4)
    rows = math.ceil(H / cols)
    cell = max(2.6, 0.22 * max(w.shape[1:]) + 1.2)
    fig = Figure(figsize=(cell * cols + 1.2, cell * rows + 0.6))
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).reshape(-1)
    im = None
    for h in range(rows * cols):
        ax = axes[h]
        if h >= H:
            ax.axis("off")
            continue
        im = _heatmap(ax, w[h], x_labels, y_labels, vmin=0, vmax=1, fontsize=6)
        ax.set_title(f"head {h}", fontsize=9)
        if h % cols == 0:
            ax.set_ylabel(ylabel, fontsize=8)
        if h >= (rows - 1) * cols or h + cols >= H:
            ax.set_xlabel(xlabel, fontsize=8)
    fig.colorbar(im, ax=list(axes), label="attention weight", shrink=0.8)
    fig.suptitle(title)
    return _save(fig, path)


def plot_attention_layers(layer_weights: Sequence, path: str, x_labels=None, y_labels=None,
                          title: str = "Attention averaged over heads", xlabel: str = "key",
                          ylabel: str = "query") -> str:
    """The head average of every layer: `layer_weights` is a list of (H, T_q, T_k) (or (T_q, T_k)) arrays."""
    if len(layer_weights) == 0:
        raise ValueError("plot_attention_layers: got no layers")
    maps = []
    for i, lw in enumerate(layer_weights):
        a = _array(lw, (2, 3), f"plot_attention_layers (layer {i})")
        maps.append(a.mean(axis=0) if a.ndim == 3 else a)
    shape = maps[0].shape
    if any(m.shape != shape for m in maps):
        raise ValueError(f"plot_attention_layers: layers have different shapes {[m.shape for m in maps]}")
    x_labels = _labels(x_labels, shape[1], "plot_attention_layers", "x")
    y_labels = _labels(y_labels, shape[0], "plot_attention_layers", "y")
    L = len(maps)
    cell = max(3.0, 0.25 * max(shape) + 1.5)
    fig = Figure(figsize=(cell * L + 1.2, cell + 0.6))
    axes = np.atleast_1d(fig.subplots(1, L, squeeze=False)).reshape(-1)
    im = None
    for i, (ax, m) in enumerate(zip(axes, maps)):
        im = _heatmap(ax, m, x_labels, y_labels, vmin=0, vmax=1, fontsize=7)
        ax.set_title(f"layer {i}", fontsize=10)
        ax.set_xlabel(xlabel, fontsize=8)
        if i == 0:
            ax.set_ylabel(ylabel, fontsize=8)
    fig.colorbar(im, ax=list(axes), label="mean attention weight", shrink=0.85)
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
    return np.concatenate([y[:window - 1].cumsum() / np.arange(1, window), out])


def plot_loss(steps, losses, path: str, eval_steps=None, eval_losses=None,
              title: str = "Training loss") -> str:
    """Per-step training loss (faint), its running mean, and held-out loss points if given."""
    steps = _array(steps, 1, "plot_loss (steps)")
    losses = _array(losses, 1, "plot_loss (losses)")
    if steps.shape != losses.shape:
        raise ValueError(f"plot_loss: {steps.shape[0]} steps but {losses.shape[0]} losses")
    fig = Figure(figsize=(9, 4.5))
    ax = fig.subplots()
    ax.plot(steps, losses, color="tab:blue", alpha=0.3, linewidth=0.8, label="train (per step)")
    window = max(1, len(losses) // 50)
    ax.plot(steps, _smooth(losses.astype(float), window), color="tab:blue", linewidth=1.8,
            label=f"train (mean of {window})")
    if eval_steps is not None and eval_losses is not None and len(eval_steps):
        ax.plot(eval_steps, eval_losses, "o-", color="tab:orange", label="held-out")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy loss")
    if np.all(losses > 0) and losses.max() / max(losses.min(), 1e-12) > 20:
        ax.set_yscale("log")
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
    ax.annotate(f"peak {lrs[peak]:.2e} at step {int(steps[peak])}", (steps[peak], lrs[peak]),
                textcoords="offset points", xytext=(10, -15), fontsize=8)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("learning rate")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return _save(fig, path)


def plot_grad_norms(steps, norms: Mapping[str, Sequence[float]], path: str,
                    title: str = "Gradient norm per layer") -> str:
    """One line per layer group ('encoder.layers.0', 'generator', ...) of the gradient 2-norm, log scale."""
    steps = _array(steps, 1, "plot_grad_norms (steps)")
    if not norms:
        raise ValueError("plot_grad_norms: got no layer groups")
    fig = Figure(figsize=(10, 5))
    ax = fig.subplots()
    cmap = {"encoder": "Blues", "decoder": "Oranges"}
    names = list(norms)
    import matplotlib
    for i, name in enumerate(names):
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
    ax.set_yscale("log")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("gradient 2-norm (before clipping)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2, loc="upper right")
    return _save(fig, path)


def plot_lines(x, series: Mapping[str, Sequence[float]], path: str, xlabel: str, ylabel: str, title: str,
               logx: bool = False, logy: bool = False, markers: bool = True) -> str:
    """A generic chart: one line per named series against a shared x (the experiments' summaries)."""
    x = _array(x, 1, "plot_lines (x)")
    if not series:
        raise ValueError("plot_lines: got no series")
    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    for name, y in series.items():
        y = _array(y, 1, f"plot_lines ({name})")
        if y.shape != x.shape:
            raise ValueError(f"plot_lines: series {name!r} has {y.shape[0]} values for {x.shape[0]} x values")
        ax.plot(x, y, "o-" if markers else "-", label=name)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3, which="both")
    ax.legend()
    return _save(fig, path)
