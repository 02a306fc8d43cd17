"""Drawing the autograd graph: `to_dot(tensor)` gives Graphviz DOT text, `render` turns it into a file with
Graphviz, `draw` draws it with matplotlib where Graphviz is not installed.

One box per recorded op (its Function name, the shape and dtype of its output, and what it keeps for
its backward: how many arrays, how many bytes, as mt.autograd.graph.saved_tensors lists them) and one per
leaf that requires a gradient (named when `params=dict(model.named_parameters())` is given,
so a reader sees 'encoder.layers.0.self_attn.W_q.weight' rather than a bare shape). Edges
point from an input to the op that consumes it, i.e. the direction of the forward pass;
backward walks them in reverse. Inputs that do not require a gradient (token ids, masks,
constants) are not part of the recorded graph and do not appear.

Draw before calling `backward()` (or pass retain_graph=True): backward frees the graph.
The walk is iterative, so graphs of any depth are fine.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np

from .autograd.graph import format_bytes, node_saved
from .tensor import Tensor

__all__ = ["draw", "to_dot", "render"]

_FORMATS = ("svg", "png", "pdf")


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _describe(t) -> str:
    return f"{tuple(t.shape)} {t.dtype}"


def _saved_label(rows) -> str:
    """'\nsaves 2 arrays, 1.5 KiB' (or '... packed' when saved-tensor hooks took them), '' when nothing."""
    if not rows:
        return ""
    packed = " packed" if all(r.packed for r in rows) else ""
    n = len(rows)
    return f"\nsaves {n} array{'s' if n > 1 else ''}, {format_bytes(sum(r.nbytes for r in rows))}{packed}"


def _fmt(a) -> str:
    """A few numbers of an array for a label: all of them up to 6, else its range."""
    a = np.asarray(a)
    if a.size <= 6:  # a matrix keeps its rows on their own lines
        return np.array2string(a, precision=4, suppress_small=True, separator=", ")
    return f"in [{float(a.min()):.4g}, {float(a.max()):.4g}]"


def _values(t) -> str:
    """The value and, when there is one, the gradient of a tensor, as label lines."""
    text = f"\ndata {_fmt(t._data)}"
    return text + (f"\ngrad {_fmt(t.grad._data)}" if t.grad is not None else "")


def _walk(tensor, params: dict | None, name: str, values: bool):
    """The drawn graph of `tensor`: (boxes, edges). boxes: id -> (label, kind) with kind 'output', 'op', 'param'
    or 'leaf'; edges: (from id, to id) pairs in the forward direction. Each op and leaf appears once."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dot: expected a Tensor, got {type(tensor).__name__}")
    names, op_names = {}, {}  # leaves by id(tensor); named non-leaf tensors by id(grad_fn)
    if params is not None:
        if not hasattr(params, "items"):
            raise TypeError(f"to_dot: params must be a dict name -> Tensor, got {type(params).__name__}")
        for k, v in params.items():
            if not isinstance(v, Tensor):
                raise TypeError(f"to_dot: params[{k!r}] is a {type(v).__name__}, expected a Tensor")
            names.setdefault(id(v), k)
            if v.grad_fn is not None:
                op_names.setdefault(id(v.grad_fn), (k, v))
    ids: dict[int, str] = {}

    def node_id(obj) -> str:
        key = id(obj)
        if key not in ids:
            ids[key] = f"n{len(ids)}"
        return ids[key]

    boxes, edges = {}, []
    root = tensor.grad_fn
    out_label = name + "\n" + _describe(tensor) + (_values(tensor) if values else "")
    boxes["out"] = (out_label, "output")
    if root is None:
        if tensor.requires_grad:  # a leaf by itself
            label = names.get(id(tensor), "leaf") + "\n" + _describe(tensor) + (_values(tensor) if values else "")
            boxes["out"] = (label, "param")
        return boxes, edges

    edges.append((node_id(root), "out"))
    # Each stack entry: (node, the tensor or edge it produced). Iterative DFS, each node drawn once.
    stack = [(root, tensor)]
    drawn = set()
    while stack:
        node, produced = stack.pop()
        if id(node) in drawn:
            continue
        drawn.add(id(node))
        nid = node_id(node)
        label = f"{node.name()}\n{_describe(produced)}"
        if id(node) in op_names:  # a tensor the caller named: its name, and its value when asked
            k, t = op_names[id(node)]
            label = f"{k} = {label}" + (_values(t) if values else "")
        if node.ctx is None:  # a backward without retain_graph already ran through it
            label += "\n(saved arrays freed by backward)"
        else:
            label += _saved_label(node_saved(node))
        boxes[nid] = (label, "op")
        for t in node.inputs:
            if t is None:
                continue
            if t.grad_fn is not None:
                edges.append((node_id(t.grad_fn), nid))
                if id(t.grad_fn) not in drawn:
                    stack.append((t.grad_fn, t))
            else:
                lid = node_id(t)
                if lid not in drawn:
                    drawn.add(lid)
                    pname = names.get(id(t))
                    label = f"{pname if pname is not None else 'leaf'}\n{_describe(t)}" + (_values(t) if values else "")
                    boxes[lid] = (label, "param" if pname is not None else "leaf")
                edges.append((lid, nid))
    return boxes, edges


_COLORS = {"output": "#c8e6c9", "op": "#fff9c4", "param": "#bbdefb", "leaf": "#e0e0e0"}


def to_dot(tensor, params: dict | None = None, name: str = "output", values: bool = False) -> str:
    """Graphviz DOT text of the graph that produced `tensor`.

    `params`: optional name -> Tensor mapping (e.g. dict(model.named_parameters())) used to label leaves; a
    non-leaf tensor in it names the op box that made it. `name`: the label of the root tensor.
    `values`: also show the data and, where there is one, the gradient of the root, every leaf and every named
    tensor (small arrays in full, larger ones as a range). Intermediate results are not kept by the graph (a
    node keeps only what its backward needs), so an op box shows values only when its tensor is named in `params`;
    call `t.retain_grad()` on it before backward to see its gradient too.
    """
    boxes, edges = _walk(tensor, params, name, values)
    lines = [
        "digraph minitensor {",
        "  rankdir=BT;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
    ]
    for bid, (label, kind) in boxes.items():
        lines.append(f'  {bid} [label={_quote(label)}, fillcolor="{_COLORS[kind]}"];')
    lines += [f"  {a} -> {b};" for a, b in edges]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _layers(boxes: dict, edges: list) -> dict:
    """Each box's layer: 0 for the output, else 1 + the largest layer of the boxes it feeds (Kahn's order)."""
    consumers = {b: [] for b in boxes}
    producers = {b: [] for b in boxes}
    for a, b in edges:
        consumers[a].append(b)
        producers[b].append(a)
    left = {b: len(set(consumers[b])) for b in boxes}  # consumers not yet placed
    layer = {}
    ready = [b for b, n in left.items() if n == 0]
    while ready:
        b = ready.pop()
        layer[b] = 1 + max((layer[c] for c in set(consumers[b])), default=-1)
        for p in set(producers[b]):
            left[p] -= 1
            if left[p] == 0:
                ready.append(p)
    return layer


MAX_DRAWN = 120  # boxes: beyond this a matplotlib drawing is unreadable; use to_dot and Graphviz


def draw(tensor, path=None, params: dict | None = None, name: str = "output", values: bool = True):
    """The graph of `tensor` drawn with matplotlib, no Graphviz needed: returns the Figure (saved to `path` if given).

    The same boxes and colours as to_dot (values on by default), output at the top, leaves below the ops that use
    them, arrows in the direction of the forward pass. For graphs of up to MAX_DRAWN boxes.
    """
    # matplotlib only here: the engine itself needs NumPy only (pyproject.toml). A bare Figure, not pyplot's: a
    # Jupyter kernel would otherwise show the figure a second time at the end of the cell.
    from matplotlib.figure import Figure

    boxes, edges = _walk(tensor, params, name, values)
    if len(boxes) > MAX_DRAWN:
        raise ValueError(
            f"draw: {len(boxes)} boxes is more than a drawing can show ({MAX_DRAWN}); use to_dot() with Graphviz"
        )
    layer = _layers(boxes, edges)
    rows: dict[int, list] = {}
    for b in boxes:
        rows.setdefault(layer[b], []).append(b)
    # Positions in character widths: each box as wide as its longest line, boxes of a layer side by side.
    chars = {b: max(len(line) for line in label.split("\n")) + 4 for b, (label, _) in boxes.items()}
    lines = {b: label.count("\n") + 1 for b, (label, _) in boxes.items()}
    width = max(sum(chars[b] for b in r) for r in rows.values())
    pos, y = {}, 0.0  # y in text lines, downwards: each layer as tall as its tallest box, plus a gap
    for lvl in sorted(rows):
        r = rows[lvl]
        tall = max(lines[b] for b in r) + 3
        x = (width - sum(chars[b] for b in r)) / 2
        for b in r:
            pos[b] = (x + chars[b] / 2, -(y + tall / 2))
            x += chars[b]
        y += tall
    fig = Figure(figsize=(max(3.0, 0.075 * width), max(2.0, 0.16 * y)))
    ax = fig.add_axes((0, 0, 1, 1))
    for a, b in edges:  # shrink by half a box's height (points), so that the arrow head shows
        arrow = {"arrowstyle": "->", "color": "#555555", "shrinkA": 5 * lines[a] + 6, "shrinkB": 5 * lines[b] + 6}
        ax.annotate("", xy=pos[b], xytext=pos[a], arrowprops=arrow, zorder=1)
    for b, (label, kind) in boxes.items():
        box = {"boxstyle": "round", "facecolor": _COLORS[kind], "edgecolor": "#888888"}
        ax.text(*pos[b], label, ha="center", va="center", fontsize=8, family="monospace", bbox=box, zorder=2)
    ax.set_xlim(0, width)
    ax.set_ylim(-y, 0)
    ax.axis("off")
    if path is not None:
        fig.savefig(os.fspath(path), dpi=100, bbox_inches="tight")
    return fig


def render(tensor, path, format: str = "svg", params: dict | None = None) -> str:
    """Write the graph of `tensor` to `path` with Graphviz's `dot`; returns the path.

    Raises RuntimeError when `dot` is not installed: then draw() (matplotlib) draws the same graph, and the DOT
    text from to_dot() still works.
    """
    if format not in _FORMATS:
        raise ValueError(f"render: format must be one of {_FORMATS}, got {format!r}")
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError("Graphviz 'dot' not found; install graphviz or use to_dot() text")
    text = to_dot(tensor, params=params)
    path = os.fspath(path)
    proc = subprocess.run([dot, f"-T{format}", "-o", path], input=text.encode(), capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(
            f"render: 'dot -T{format}' failed with exit code {proc.returncode}: "
            f"{proc.stderr.decode(errors='replace').strip()}"
        )
    return path
