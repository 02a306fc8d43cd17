"""F.pad: torch's padding of the last dims, in its modes constant, reflect, replicate and circular.

`pad` lists (before, after) pairs from the last dim backwards: (left, right) pads the last dim, (left, right, top,
bottom) the last two, and so on. Constant padding joins blocks of `value` to the input (Cat), a negative pad cuts
(a slice); the other modes pick existing entries by an integer-array index along each padded dim (reflect: mirrored
without the edge, replicate: the edge repeated, circular: wrapped around), so each gradient is GetItem's
scatter-add: the entries read twice get both gradients.
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import ops
from ..arguments import check_fill_value
from ..devices import array_module
from ..functions.shape import cat, narrow
from ..tensor import Tensor

__all__ = ["pad"]

MODES = ("constant", "reflect", "replicate", "circular")


def pad(input: Tensor, pad, mode: str = "constant", value=None) -> Tensor:
    """input padded by `pad` ((before, after) per dim, last dim first) in `mode`; value (default 0) for constant."""
    if not isinstance(input, Tensor):
        raise TypeError(f"pad: input must be a Tensor, got {type(input).__name__}")
    if mode not in MODES:
        raise ValueError(f"pad: mode must be one of {MODES}, got {mode!r}")
    pads = tuple(pad) if isinstance(pad, (tuple, list)) else None
    if not pads or len(pads) % 2 or not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) for n in pads):
        raise ValueError(f"pad: pad must be a non-empty sequence of ints of even length, got {pad!r}")
    k = len(pads) // 2
    if k > input.ndim:
        raise ValueError(f"pad: {len(pads)} pad values pad {k} dims, but the input has {input.ndim}")
    pairs = [(input.ndim - 1 - i, int(pads[2 * i]), int(pads[2 * i + 1])) for i in range(k)]
    if mode == "constant":
        return _constant(input, pairs, 0 if value is None else value)
    if value is not None and value != 0:
        raise ValueError(f"pad: value is for mode='constant' only, got value={value!r} with mode={mode!r}")
    if k > 3 or input.ndim not in (k + 1, k + 2):
        raise ValueError(
            f"pad: mode={mode!r} pads the last 1, 2 or 3 dims of a (C, ...) or (N, C, ...) input: {k} dims of a "
            f"{input.ndim}-D input is not supported"
        )
    out = input
    for d, before, after in pairs:
        out = ops.GetItem.apply(out, index=(slice(None),) * d + (_source(mode, out, d, before, after),), advanced=True)
    return out


def _constant(t: Tensor, pairs: list, value) -> Tensor:
    if not isinstance(value, numbers.Number):
        raise TypeError(f"pad: value must be a number, got {type(value).__name__}")
    check_fill_value(value, t.dtype, "pad")  # a value the dtype cannot hold is refused, not wrapped or made inf
    out = t
    for d, before, after in pairs:
        n = out.shape[d]
        if before + after + n < 0 or -before > n or -after > n:
            raise ValueError(f"pad: pads ({before}, {after}) cut more than dim {d} of size {n} holds")
        if before < 0 or after < 0:  # a negative pad removes entries
            start = -min(before, 0)
            out = narrow(out, d, start, n - start + min(after, 0))
        blocks = [b for b in (_filled(out, d, before, value), out, _filled(out, d, after, value)) if b is not None]
        out = cat(blocks, d) if len(blocks) > 1 else out
    return out


def _filled(t: Tensor, d: int, size: int, value):
    """A block of `size` entries of value along dim d, beside t (its dtype and device), or None."""
    if size <= 0:
        return None
    shape = t.shape[:d] + (size,) + t.shape[d + 1 :]
    return t.wrap(array_module(t._data).full(shape, value, dtype=t.dtype))


def _source(mode: str, t: Tensor, d: int, before: int, after: int):
    """The entries of dim d that the padded dim reads, in order (on t's device)."""
    n = t.shape[d]
    if n + before + after < 0:
        raise ValueError(f"pad: pads ({before}, {after}) cut more than dim {d} of size {n} holds")
    if mode == "reflect" and (before >= n or after >= n):
        raise ValueError(f"pad: reflect pads ({before}, {after}) must be smaller than dim {d} of size {n}")
    if mode == "circular" and (before > n or after > n or n + min(before, 0) + min(after, 0) <= 0):
        raise ValueError(f"pad: circular pads ({before}, {after}) must be at most dim {d} of size {n}")
    if mode == "replicate" and n == 0:
        raise ValueError(f"pad: replicate needs a non-empty dim {d}")
    i = np.arange(-before, n + after)
    if mode == "reflect":
        i = np.abs(i)
        i = np.where(i >= n, 2 * (n - 1) - i, i)
    elif mode == "replicate":
        i = np.clip(i, 0, n - 1)
    else:  # circular: torch cuts first, then wraps around what is left
        kept = np.arange(max(-before, 0), n - max(-after, 0))
        i = kept[np.arange(-max(before, 0), kept.size + max(after, 0)) % kept.size]
    return array_module(t._data).asarray(i)
