"""The torch.* shape functions: reshape, flatten, permute, transpose, expand, repeat, squeeze/unsqueeze,
cat, stack, split, chunk, tril, triu."""

from __future__ import annotations

import builtins
import math

import numpy as np

from .. import ops
from ..arguments import normalize_dim, normalize_dims, operand
from ..dtypes import result_type

__all__ = [
    "cat",
    "chunk",
    "expand",
    "flatten",
    "permute",
    "repeat",
    "reshape",
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
        ok = known != 0 and t.data.size % known == 0
    else:
        ok = known == t.data.size
    if not ok:
        raise ValueError(
            f"reshape: shape {tuple(shape)} is invalid for a tensor of shape {t.shape} ({t.data.size} elements)"
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
            raise ValueError(f"cat: tensor {i} has shape {x.shape}, incompatible with {ref} outside dim {d}")
    return ops.Cat.apply(*[operand(x, dt, x) for x in tensors], dim=d)


def stack(tensors, dim: int = 0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    for i, x in enumerate(tensors):
        if x.shape != tensors[0].shape:
            raise ValueError(f"stack: tensor {i} has shape {x.shape}, expected {tensors[0].shape} like tensor 0")
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
