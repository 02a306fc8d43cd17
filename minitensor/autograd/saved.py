"""What a node keeps for its backward, as one list, and the saved-tensor hooks that see every entry of it.

A forward keeps arrays for its backward in two ways, both on its Context (function.py):
  - `ctx.save_for_backward(*arrays)`: inputs and outputs (and any array), read back as `ctx.saved_arrays`;
  - `ctx.save(name=array)`: an array the forward made itself (a mask, row statistics, log-probabilities),
    read back as `ctx.<name>`. A tuple value saves each array in it (Gelu's two halves, an index tuple).
`saved_entries(ctx)` lists both, in that order: what the hooks are handed, and what
`mt.autograd.graph.saved_tensors` lists. Nothing a backward reads is kept any other way (tested for every
primitive: tests/minitensor/autograd/test_saved_tensors.py).

While no hooks are installed (the training fast path) nothing here runs: Function.apply tests one dict,
HOOK_STACKS. With hooks on this thread (`mt.autograd.graph.saved_tensors_hooks`, per thread as torch's),
apply hands each new node to `pack_node`: every entry goes to the innermost pack hook as a Tensor, the node
keeps only what pack returned, and the context drops the arrays. Node.backward calls `unpack_node`, which
hands each packed value to the unpack hook and rebuilds a context from the Tensors it returns.
"""

from __future__ import annotations

import copy
import threading

import numpy as np

from ..devices import is_array
from ..features import switch

# thread id -> [(pack_hook, unpack_hook), ...], innermost last. Only threads with hooks installed are listed,
# so while none is, Function.apply pays for one test of an empty dict.
HOOK_STACKS: dict = {}


def is_saved_array(value) -> bool:
    """Whether a value a forward saved is an array, as opposed to a shape, a number or None: an array of any
    device (devices.is_array), or the NumPy scalar a 0-d forward may return."""
    return is_array(value) or isinstance(value, np.generic)


def push_hooks(pack_hook, unpack_hook) -> None:
    HOOK_STACKS.setdefault(threading.get_ident(), []).append((pack_hook, unpack_hook))
    switch("saved-tensor hooks", True)


def pop_hooks() -> None:
    tid = threading.get_ident()
    stack = HOOK_STACKS[tid]
    stack.pop()
    if not stack:
        del HOOK_STACKS[tid]
    switch("saved-tensor hooks", bool(HOOK_STACKS))


def saved_entries(ctx) -> list:
    """[(key, array)] for every array ctx keeps: key ('saved', i) for ctx.saved_arrays[i], (name, None) for an
    array saved as ctx.save(name=...), (name, j) for the array at j of a tuple saved that way."""
    entries = [(("saved", i), a) for i, a in enumerate(ctx.saved_arrays) if is_saved_array(a)]
    for name in ctx.saved_names:
        value = getattr(ctx, name)
        if is_saved_array(value):
            entries.append(((name, None), value))
        elif isinstance(value, tuple):
            entries.extend(((name, j), v) for j, v in enumerate(value) if is_saved_array(v))
    return entries


def entry_label(key, sources: dict, arr) -> str:
    """How the listing names an entry: 'input 0' or 'output' for a saved input or output (sources: id(array)
    -> input index, or -1 for the output), 'saved 2' for another saved array, else its name ('keep', 'halves[1]')."""
    name, j = key
    if name == "saved":
        src = sources.get(id(arr))
        return f"saved {j}" if src is None else ("output" if src == -1 else f"input {src}")
    return name if j is None else f"{name}[{j}]"


class Packed:
    """What a node keeps while hooks were on at its forward: each entry's packed value and its description."""

    __slots__ = ("unpack_hook", "values", "rows", "positions")

    def __init__(self, unpack_hook, values, rows, positions):
        self.unpack_hook = unpack_hook
        self.values = values  # [(key, what pack returned)]
        self.rows = rows  # [(label, shape, dtype, nbytes)]: what the listing shows
        self.positions = positions  # per Node.saved entry: its position in ctx.saved_arrays


def pack_node(node, result) -> None:
    """Hand each array node keeps to this thread's innermost pack hook (as a Tensor around it, made by
    result.wrap) and keep only what it returns: ctx and node.saved drop their references to the arrays."""
    stack = HOOK_STACKS.get(threading.get_ident())
    if not stack:
        return
    ctx = node.ctx
    entries = saved_entries(ctx)
    if not entries:
        return
    pack_hook, unpack_hook = stack[-1]
    sources = {id(arr): src for _, _, arr, src in node.saved}
    rows, values = [], []
    for key, arr in entries:
        rows.append((entry_label(key, sources, arr), arr.shape, arr.dtype, arr.nbytes))
        # Deviation from PyTorch, flagged: pack gets a new Tensor around the array (no grad, no grad_fn), where
        # torch hands a saved input the input Tensor itself. What it holds, and what unpack must give back, is
        # the same: the array's values.
        values.append((key, pack_hook(result.wrap(arr))))
    # node.saved has an entry per saved array that is an input's or the output's, in saved_arrays' order (an
    # array saved twice, as by x * x, twice): where each sits in saved_arrays
    checked = {id(arr) for _, _, arr, _ in node.saved}
    positions = [i for i, a in enumerate(ctx.saved_arrays) if id(a) in checked]
    node.packed = Packed(unpack_hook, values, rows, positions)
    node.saved = tuple((counter, version, None, src) for counter, version, _, src in node.saved)
    ctx.saved_arrays = tuple(None if is_saved_array(a) else a for a in ctx.saved_arrays)
    for name in ctx.saved_names:  # an array becomes None; a tuple keeps its other items, an array's place None
        value = getattr(ctx, name)
        if is_saved_array(value):
            setattr(ctx, name, None)
        elif isinstance(value, tuple):
            setattr(ctx, name, tuple(None if is_saved_array(v) else v for v in value))


def unpack_node(node):
    """(ctx, saved): a copy of node's context with every packed entry replaced by the array of the Tensor the
    unpack hook returns, and node.saved with those arrays in place (for the version check and create_graph)."""
    packed = node.packed
    ctx = copy.copy(node.ctx)
    arrays = list(ctx.saved_arrays)  # packed places None, filled below
    tuples = {}
    for ((name, j), value), (label, shape, dtype, _) in zip(packed.values, packed.rows):
        t = packed.unpack_hook(value)
        arr = getattr(t, "_data", None)
        if not hasattr(t, "version_counter") or arr.shape != shape or arr.dtype != dtype:
            got = f"a Tensor {arr.dtype} {arr.shape}" if hasattr(t, "version_counter") else type(t).__name__
            raise RuntimeError(
                f"saved_tensors_hooks: unpack_hook returned {got} for {label} of {node.name()}, which saved a "
                f"{dtype} {shape} Tensor: unpack must return a Tensor of the packed one's shape and dtype"
            )
        if name == "saved":
            arrays[j] = arr
        elif j is None:
            setattr(ctx, name, arr)
        else:
            tuples.setdefault(name, list(getattr(ctx, name)))[j] = arr
    for name, items in tuples.items():
        setattr(ctx, name, tuple(items))
    ctx.saved_arrays = tuple(arrays)
    saved = tuple((c, v, arrays[p], src) for (c, v, _, src), p in zip(node.saved, packed.positions))
    return ctx, saved
