"""The torch.* shape functions: reshape, flatten, permute, transpose, expand, repeat, squeeze/unsqueeze,
cat, stack, split, chunk, tril, triu, and the ones that move entries along a dim: roll, narrow, flip,
repeat_interleave (a slice or an integer-array index, so GetItem's gradient)."""

from __future__ import annotations

import builtins
import math

import numpy as np

from .. import ops
from ..arguments import normalize_dim, normalize_dims, operand
from ..devices import array_module, to_host
from ..dtypes import result_type

__all__ = [
    "cat",
    "chunk",
    "expand",
    "flatten",
    "flip",
    "narrow",
    "permute",
    "repeat",
    "repeat_interleave",
    "reshape",
    "roll",
    "split",
    "squeeze",
    "stack",
    "transpose",
    "tril",
    "triu",
    "unsqueeze",
]


def reshape_to(t, shape: tuple):
    if shape == t.shape:
        return t
    known = math.prod(s for s in shape if s != -1)
    if shape.count(-1) > 1 or builtins.any(s < -1 for s in shape):
        ok = False
    elif -1 in shape:
        ok = known != 0 and t._data.size % known == 0
    else:
        ok = known == t._data.size
    if not ok:
        raise ValueError(
            f"reshape: shape {tuple(shape)} is invalid for a tensor of shape {t.shape} ({t._data.size} elements)"
        )
    return ops.Reshape.apply(t, shape=shape)


def flatten(t, start_dim: int = 0, end_dim: int = -1):
    s = normalize_dim(start_dim, t.ndim, "flatten")
    e = normalize_dim(end_dim, t.ndim, "flatten")
    if t.ndim == 0:
        return t.reshape(1)
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    return reshape_to(t, t.shape[:s] + (int(np.prod(t.shape[s : e + 1])),) + t.shape[e + 1 :])


def permute(t, dims):
    dims = tuple(dims)
    norm = normalize_dims(dims, t.ndim, "permute") if dims else ()
    if len(dims) != t.ndim:
        raise ValueError(f"permute: got {len(dims)} dims {dims} for a tensor of {t.ndim} dimensions")
    return ops.Permute.apply(t, dims=norm)


def expand(t, sizes: tuple):
    if len(sizes) < t.ndim:
        raise ValueError(f"expand: {len(sizes)} sizes {sizes} for a tensor of {t.ndim} dimensions {t.shape}")
    lead = len(sizes) - t.ndim
    shape = tuple(t.shape[i - lead] if (s == -1 and i >= lead) else s for i, s in enumerate(sizes))
    for i in range(t.ndim):
        if t.shape[i] != 1 and t.shape[i] != shape[i + lead]:
            raise ValueError(
                f"expand: the size {t.shape[i]} of dim {i} (shape {t.shape}) cannot expand to "
                f"{shape[i + lead]} (sizes {sizes})"
            )
    return t if shape == t.shape else ops.Expand.apply(t, shape=shape)


def repeat(t, sizes: tuple):
    if len(sizes) < t.ndim:
        raise ValueError(f"repeat: {len(sizes)} repeat counts {sizes} for a tensor of {t.ndim} dimensions")
    return ops.Repeat.apply(t, sizes=sizes)


def cat(tensors, dim: int = 0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty sequence of tensors")
    dt = result_type(*tensors)
    # as in PyTorch (a legacy rule): a 1-D empty tensor is skipped (ops.Cat), whatever the others' shapes
    ref = next((x.shape for x in tensors if x.shape != (0,)), tensors[0].shape)
    d = normalize_dim(dim, len(ref), "cat")
    for i, x in enumerate(tensors):
        if x.shape == (0,) and ref != (0,):
            continue
        if x.ndim != len(ref) or x.shape[:d] + x.shape[d + 1 :] != ref[:d] + ref[d + 1 :]:
            raise RuntimeError(f"cat: tensor {i} has shape {x.shape}, incompatible with {ref} outside dim {d}")
    return ops.Cat.apply(*[operand(x, dt, x) for x in tensors], dim=d)


def stack(tensors, dim: int = 0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack: expected a non-empty sequence of tensors")  # torch's classes, here and below
    for i, x in enumerate(tensors):
        if x.shape != tensors[0].shape:
            raise RuntimeError(f"stack: tensor {i} has shape {x.shape}, expected {tensors[0].shape} like tensor 0")
    n = tensors[0].ndim + 1
    if not -n <= dim < n:
        raise IndexError(f"stack: dim {dim} out of range for a result of {n} dimensions")
    dt = result_type(*tensors)
    return ops.Stack.apply(*[operand(x, dt, x) for x in tensors], dim=dim % n)


def split(t, split_size_or_sections, dim: int = 0):
    d = normalize_dim(dim, t.ndim, "split")
    n = t.shape[d]
    if isinstance(split_size_or_sections, (int, np.integer)):
        if split_size_or_sections <= 0:
            raise ValueError(f"split: split_size must be positive, got {split_size_or_sections}")
        sizes = [split_size_or_sections] * (n // split_size_or_sections)
        if n % split_size_or_sections:
            sizes.append(n % split_size_or_sections)
    else:
        sizes = list(split_size_or_sections)
        if builtins.sum(sizes) != n:
            raise ValueError(f"split: sections {sizes} sum to {builtins.sum(sizes)}, but dim {d} has size {n}")
    out, start = [], 0
    for s in sizes:
        index = (slice(None),) * d + (slice(start, start + s),)
        out.append(ops.GetItem.apply(t, index=index, advanced=False))
        start += s
    return tuple(out)


def chunk(t, chunks: int, dim: int = 0):
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    n = t.shape[normalize_dim(dim, t.ndim, "chunk")]
    size = -(-n // chunks)
    return split(t, builtins.max(size, 1), dim)


def tril(t, diagonal: int = 0):
    if t.ndim < 2:
        raise ValueError(f"tril: expected at least 2 dimensions, got shape {t.shape}")
    return ops.Tril.apply(t, diagonal=diagonal)


def triu(t, diagonal: int = 0):
    if t.ndim < 2:
        raise ValueError(f"triu: expected at least 2 dimensions, got shape {t.shape}")
    return ops.Triu.apply(t, diagonal=diagonal)


def reshape(t, shape):
    return t.reshape(shape)


def transpose(t, dim0: int, dim1: int):
    d0, d1 = normalize_dim(dim0, t.ndim, "transpose"), normalize_dim(dim1, t.ndim, "transpose")
    return t if t.ndim == 0 else ops.Transpose.apply(t, dim0=d0, dim1=d1)  # a 0-d tensor has nothing to swap


def unflatten(t, dim: int, sizes):
    d = normalize_dim(dim, t.ndim, "unflatten")
    return reshape_to(t, t.shape[:d] + tuple(sizes) + t.shape[d + 1 :])


def unsqueeze(t, dim):
    return t.unsqueeze(dim)


def squeeze(t, dim=None):
    return t.squeeze(dim)


def _int_arg(x, op: str, name: str) -> int:
    """An int argument, or a 0-d integer tensor read as one (torch accepts both for start, length, repeats)."""
    if hasattr(x, "item") and getattr(x, "ndim", None) == 0 and np.dtype(x.dtype).kind in "iu":
        x = x.item()
    if not isinstance(x, (int, np.integer)) or isinstance(x, builtins.bool):
        raise TypeError(f"{op}: {name} must be an int, got {x!r}")
    return int(x)


def _along(d: int, index) -> tuple:
    """An index that applies `index` along dim d and takes everything before it."""
    return (slice(None),) * d + (index,)


def roll(t, shifts, dims=None):
    """out[(i + shift) mod n] = t[i] along each dim in dims (all of t, flattened, when dims is None), as torch.roll;
    an integer-array index, so the gradient rolls g back."""
    shifts = (shifts,) if isinstance(shifts, (int, np.integer)) else tuple(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise ValueError(f"roll: without dims, shifts must be one int, got {shifts}")
        return roll(t.reshape(-1), shifts, 0).reshape(t.shape)
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    out = t
    for s, dim in zip(shifts, dims):
        d = normalize_dim(dim, t.ndim, "roll")
        n = t.shape[d] if t.ndim else 1
        if n and _int_arg(s, "roll", "shift") % n:
            source = (array_module(t._data).arange(n) - s) % n  # out[j] = t[(j - shift) mod n], on t's device
            out = ops.GetItem.apply(out, index=_along(d, source), advanced=True)
    return out if out is not t else ops.Clone.apply(t)  # a copy, as torch's


def narrow(t, dim: int, start, length):
    """t's entries start .. start + length - 1 along dim, a view (start may count from the end, as torch's)."""
    if t.ndim == 0:
        raise ValueError("narrow: cannot narrow a 0-d tensor")
    d = normalize_dim(dim, t.ndim, "narrow")
    n = t.shape[d]
    start, length = _int_arg(start, "narrow", "start"), _int_arg(length, "narrow", "length")
    if not -n <= start <= n:
        raise IndexError(f"narrow: start {start} is out of range for dim {d} of size {n}")
    start += n if start < 0 else 0
    if length < 0 or start + length > n:
        raise ValueError(f"narrow: start ({start}) + length ({length}) exceeds dim {d} of size {n}")
    return ops.GetItem.apply(t, index=_along(d, slice(start, start + length)), advanced=False)


def flip(t, dims):
    """t reversed along each of dims, a copy (as torch's)."""
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    ds = [normalize_dim(d, t.ndim, "flip") for d in dims]
    if len(set(ds)) != len(ds):
        raise ValueError(f"flip: dims {dims} name a dim more than once")
    if t.ndim == 0 or not ds:
        return ops.Clone.apply(t)
    index = tuple(slice(None, None, -1) if k in ds else slice(None) for k in range(t.ndim))
    return ops.Clone.apply(ops.GetItem.apply(t, index=index, advanced=False))


def repeat_interleave(t, repeats=None, dim=None, *, output_size=None):
    """Each entry of t repeated `repeats` times along dim (t flattened when dim is None): repeats is an int or a
    1-D integer tensor of one count per entry; an integer-array index, so the gradient sums g over the copies.
    repeat_interleave(counts) alone gives arange(len(counts)) repeated by counts, as torch's."""
    if repeats is None:
        if t.ndim > 1:
            raise ValueError(f"repeat_interleave: repeats must be a 0-d or 1-D tensor, got shape {t.shape}")
        counts = _repeat_counts(t, None)
        return t.wrap(np.repeat(np.arange(counts.size), counts))
    if dim is None:
        t, d = t.reshape(-1), 0
    else:
        d = normalize_dim(dim, t.ndim, "repeat_interleave")
    n = t.shape[d] if t.ndim else 1
    xp = array_module(t._data)
    if isinstance(repeats, (int, np.integer)) and not isinstance(repeats, builtins.bool) and repeats >= 0:
        source = xp.arange(n).repeat(int(repeats))  # made on t's device: no host read
    else:  # counts in a tensor: read on the host (the result's size depends on them, as in torch)
        source = xp.asarray(np.repeat(np.arange(n), _repeat_counts(repeats, n)))
    if output_size is not None and output_size != source.size:
        raise ValueError(f"repeat_interleave: output_size {output_size} differs from the repeats' sum {source.size}")
    if t.ndim == 0:
        t = t.reshape(1)
    return ops.GetItem.apply(t, index=_along(d, source), advanced=True)


def _repeat_counts(repeats, n: int | None) -> np.ndarray:
    """The counts, one per entry of a dim of size n (an int, or a tensor of 1 or n ints, none negative);
    n None: the tensor's counts, however many."""
    if hasattr(repeats, "_data"):
        counts = to_host(repeats._data).reshape(-1)
        if counts.dtype.kind not in "iu":
            raise TypeError(f"repeat_interleave: repeats must be an integer tensor, got {counts.dtype}")
        if n is not None and counts.size == 1:
            counts = np.full(n, counts[0])
        if n is not None and counts.size != n:
            raise ValueError(f"repeat_interleave: {counts.size} repeat counts for a dim of size {n}")
    else:
        counts = np.full(n, _int_arg(repeats, "repeat_interleave", "repeats"))
    if (counts < 0).any():
        raise ValueError(f"repeat_interleave: repeats must be non-negative, got {counts.tolist()}")
    return counts
