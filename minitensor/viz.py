"""Drawing the autograd graph: `to_dot(tensor)` gives Graphviz DOT text, `render` turns it into a file.

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

from .autograd.graph import format_bytes, node_saved
from .tensor import Tensor

__all__ = ["to_dot", "render"]

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


def to_dot(tensor, params: dict | None = None, name: str = "output") -> str:
    """Graphviz DOT text of the graph that produced `tensor`.

    `params`: optional name -> Tensor mapping (e.g. dict(model.named_parameters())) used to
    label leaves. `name`: the label of the root tensor.
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dot: expected a Tensor, got {type(tensor).__name__}")
    names = {}
    if params is not None:
        if not hasattr(params, "items"):
            raise TypeError(f"to_dot: params must be a dict name -> Tensor, got {type(params).__name__}")
        for k, v in params.items():
            if not isinstance(v, Tensor):
                raise TypeError(f"to_dot: params[{k!r}] is a {type(v).__name__}, expected a Tensor")
            names.setdefault(id(v), k)

    lines = [
        "digraph minitensor {",
        "  rankdir=BT;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
    ]
    ids: dict[int, str] = {}

    def node_id(obj) -> str:
        key = id(obj)
        if key not in ids:
            ids[key] = f"n{len(ids)}"
        return ids[key]

    root = tensor.grad_fn
    out_id = "out"
    lines.append(f'  {out_id} [label={_quote(name + chr(10) + _describe(tensor))}, fillcolor="#c8e6c9"];')
    if root is None:
        if tensor.requires_grad:  # a leaf by itself
            label = names.get(id(tensor), "leaf") + "\n" + _describe(tensor)
            lines[-1] = f'  {out_id} [label={_quote(label)}, fillcolor="#bbdefb"];'
        lines.append("}")
        return "\n".join(lines) + "\n"

    lines.append(f"  {node_id(root)} -> {out_id};")
    # Each stack entry: (node, the tensor it produced). Iterative DFS, each node drawn once.
    stack = [(root, tensor)]
    drawn = set()
    while stack:
        node, produced = stack.pop()
        if id(node) in drawn:
            continue
        drawn.add(id(node))
        nid = node_id(node)
        label = f"{node.name()}\n{_describe(produced)}"
        if node.ctx is None:  # a backward without retain_graph already ran through it
            label += "\n(saved arrays freed by backward)"
        else:
            label += _saved_label(node_saved(node))
        lines.append(f'  {nid} [label={_quote(label)}, fillcolor="#fff9c4"];')
        for t in node.inputs:
            if t is None:
                continue
            if t.grad_fn is not None:
                lines.append(f"  {node_id(t.grad_fn)} -> {nid};")
                if id(t.grad_fn) not in drawn:
                    stack.append((t.grad_fn, t))
            else:
                lid = node_id(t)
                if lid not in drawn:
                    drawn.add(lid)
                    pname = names.get(id(t))
                    color = "#bbdefb" if pname is not None else "#e0e0e0"
                    label = f"{pname if pname is not None else 'leaf'}\n{_describe(t)}"
                    lines.append(f'  {lid} [label={_quote(label)}, fillcolor="{color}"];')
                lines.append(f"  {lid} -> {nid};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(tensor, path, format: str = "svg", params: dict | None = None) -> str:
    """Write the graph of `tensor` to `path` with Graphviz's `dot`; returns the path.

    Raises RuntimeError when `dot` is not installed (the DOT text from to_dot() still works).
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
