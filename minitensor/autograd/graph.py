"""mt.autograd.graph, as torch.autograd.graph: saved-tensor hooks, and a listing of what a graph keeps.

    with mt.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        loss = model(x)          # every array a node saves goes to pack_hook(tensor) -> anything
    loss.backward()              # ... and comes back as unpack_hook(anything) -> Tensor

    print(mt.autograd.graph.saved_tensors(loss))   # node by node: what it keeps, shapes, dtypes, bytes

Both see the same list: each node's `saved_entries` (saved.py), its save_for_backward arrays and the
arrays its forward made and kept with ctx.save. The hooks are per thread and nest (the innermost pair
applies), as torch's. Activation checkpointing (mt.utils.checkpoint) is built on them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..core import topological_order
from ..devices import is_array
from .saved import entry_label, pop_hooks, push_hooks, saved_entries

__all__ = ["SavedTensor", "SavedTensors", "saved_tensors", "saved_tensors_hooks"]


class saved_tensors_hooks:  # torch's name: a context manager spelled as a function
    """torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook): while the block runs, every array a
    recorded op keeps for its backward is handed to pack_hook as a Tensor, and the node keeps only what pack
    returns; its backward uses the Tensor that unpack_hook returns for it (of the same shape and dtype).
    Per thread; nested blocks: the innermost pair applies. Identity hooks change nothing."""

    def __init__(self, pack_hook: Callable, unpack_hook: Callable):
        for name, hook in (("pack_hook", pack_hook), ("unpack_hook", unpack_hook)):
            if not callable(hook):
                raise TypeError(f"saved_tensors_hooks: {name} must be callable, got {type(hook).__name__}")
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        push_hooks(self.pack_hook, self.unpack_hook)
        return self

    def __exit__(self, *exc):
        pop_hooks()
        return False


@dataclass(frozen=True)
class SavedTensor:
    """One array a node keeps: the node's name, which array ('input 0', 'output', 'keep', ...), its shape,
    dtype and bytes. `packed`: saved-tensor hooks took it at the forward (the bytes are the array's, not
    what the pack hook kept)."""

    node: str
    what: str
    shape: tuple
    dtype: np.dtype
    nbytes: int
    packed: bool = False


def node_saved(node) -> list:
    """[SavedTensor] for one node (empty once a backward freed it): what the listing and mt.viz show."""
    name = node.name()
    if node.packed is not None:
        return [
            SavedTensor(name, label, shape, dtype, nbytes, True) for label, shape, dtype, nbytes in node.packed.rows
        ]
    if node.ctx is None:
        return []
    sources = {id(arr): src for _, _, arr, src in node.saved}
    return [
        SavedTensor(name, entry_label(key, sources, arr), arr.shape, arr.dtype, arr.nbytes)
        for key, arr in saved_entries(node.ctx)
    ]


def _buffer(arr: np.ndarray) -> np.ndarray:
    """The array that owns arr's memory (arr itself, or the base a view was taken from), host or device.
    (The fake device hands out a new wrapper for each .base, so there a buffer shared by two views counts twice.)"""
    while is_array(arr.base):
        arr = arr.base
    return arr


class SavedTensors(list):
    """The rows of saved_tensors(), a list of SavedTensor, printed as a table with totals.

    total_bytes: the sum of the rows' bytes. held_bytes: the memory those arrays keep alive, each buffer
    counted once (an input saved by two nodes, or a view, shares its buffer); for packed rows (hooks) it is
    not known and not counted."""

    held_bytes: int = 0
    nodes: int = 0  # how many nodes keep something

    @property
    def total_bytes(self) -> int:
        return sum(r.nbytes for r in self)

    def by_node(self) -> dict:
        """node name -> bytes, summed over the nodes of that name."""
        out: dict = {}
        for r in self:
            out[r.node] = out.get(r.node, 0) + r.nbytes
        return out

    def __str__(self) -> str:
        head = ("node", "saved", "shape", "dtype", "bytes")
        rows = [
            (r.node, r.what + (" (packed)" if r.packed else ""), str(r.shape), str(r.dtype), f"{r.nbytes:,}")
            for r in self
        ]
        widths = [max(len(x) for x in col) for col in zip(head, *rows)]
        line = "  ".join(f"{{:<{w}}}" for w in widths[:-1]) + f"  {{:>{widths[-1]}}}"
        out = [line.format(*head), line.format(*("-" * w for w in widths))]
        out += [line.format(*r) for r in rows]
        out.append(
            f"{len(self)} saved arrays in {self.nodes} nodes: {format_bytes(self.total_bytes)} listed, "
            f"{format_bytes(self.held_bytes)} held (each buffer once)"
        )
        return "\n".join(out)


def format_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def saved_tensors(*roots) -> SavedTensors:
    """What the graph behind `roots` (Tensors) keeps for its backward: one row per saved array of every node
    (in backward order), with shape, dtype and bytes, and the totals. Not in torch: its nodes expose
    `_saved_*` attributes one by one; this walks them all. A node freed by a backward lists nothing."""
    from_ = [t.grad_fn for t in roots if getattr(t, "grad_fn", None) is not None]
    for i, t in enumerate(roots):
        if not hasattr(t, "version_counter"):
            raise TypeError(f"saved_tensors: argument {i} must be a Tensor, got {type(t).__name__}")
    out, buffers = SavedTensors(), {}
    for node in topological_order(from_) if from_ else []:
        rows = node_saved(node)
        out.extend(rows)
        out.nodes += bool(rows)
        if node.packed is None and node.ctx is not None:
            for _, arr in saved_entries(node.ctx):
                b = _buffer(arr)
                buffers[id(b)] = b.nbytes
    out.held_bytes = sum(buffers.values())
    return out
