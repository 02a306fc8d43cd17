"""The torch.* functions that pick entries by index: gather, index_select, sort, argsort, topk
(a gather is an integer-array index, so its gradient is GetItem's scatter-add)."""

from __future__ import annotations

import builtins

import numpy as np

from .. import ops
from ..arguments import ValuesIndices, check_tensor, index_array, normalize_dim
from ..devices import array_module
from ..dtypes import int64
from .shape import reshape_to

__all__ = ["argsort", "gather", "index_select", "sort", "topk"]


def gather(input, dim: int, index):
    """out[i][j][k] = input[index[i][j][k]][j][k] (dim=0), and so on: values picked along dim.
    Its gradient scatter-adds g back along dim (repeated indices accumulate).
    As in PyTorch, index has input's number of dimensions, a 0-d tensor counting as 1-D, and an empty
    index of any shape gives an empty result of its shape."""
    t = check_tensor(input, "gather", "input")
    idx = index_array(index, "gather")
    d = normalize_dim(dim, t.ndim, "gather")
    xp = array_module(t.data)
    if idx.size == 0:
        return t.reshape(-1)[t.wrap(xp.zeros(idx.shape, dtype=int64))]  # picks nothing: gradient 0
    t_shape, idx_shape = t.shape or (1,), idx.shape or (1,)  # a 0-d tensor counts as 1-D
    if len(idx_shape) != len(t_shape):
        raise ValueError(f"gather: index must have as many dimensions as input ({t.ndim}), got shape {idx.shape}")
    if builtins.any(idx_shape[k] > t_shape[k] for k in range(len(t_shape)) if k != d):
        raise ValueError(f"gather: index of shape {idx.shape} is larger than input {t.shape} outside dim {d}")
    outside = (idx < 0) | (idx >= t_shape[d])
    if outside.any():  # on a device, one host read (PyTorch's CUDA gather checks on the device, and raises later)
        bad = idx[outside].reshape(-1)[0]
        raise IndexError(f"gather: index {bad} is out of range for dim {d} of size {t_shape[d]}")
    return _gather(t, d, idx)


def _gather(t, d: int, idx):
    """gather for an index known to be in range (checked, or made by sort): the integer-array index that picks
    the same entries, idx along dim d and positions along the others."""
    t_shape, i = t.shape or (1,), idx.reshape(idx.shape or (1,))
    xp = array_module(t.data)
    full = tuple(i if k == d else xp.arange(n).reshape((-1,) + (1,) * (i.ndim - 1 - k)) for k, n in enumerate(i.shape))
    out = ops.GetItem.apply(reshape_to(t, t_shape), index=full, advanced=True)
    return reshape_to(out, idx.shape)


def index_select(input, dim: int, index):
    """The slices of input at `index` (a 1-D or 0-d integer tensor) along dim; the gradient scatter-adds g
    back (repeated indices accumulate). As in PyTorch, a 0-d input takes an index of one entry, 0."""
    t = check_tensor(input, "index_select", "input")
    idx = index_array(index, "index_select")
    d = normalize_dim(dim, t.ndim, "index_select")
    if idx.ndim > 1:
        raise ValueError(f"index_select: index must be a 1-D (or 0-d) tensor, got shape {idx.shape}")
    n = t.shape[d] if t.ndim else 1
    # on a device, one host read: whether an index is out of range
    if idx.size and ((idx < 0) | (idx >= n)).any() or (t.ndim == 0 and idx.size != 1):
        raise IndexError(f"index_select: index {idx.tolist()} is out of range for dim {d} of size {n}")
    if t.ndim == 0:
        return ops.GetItem.apply(t, index=(), advanced=False)
    return ops.GetItem.apply(t, index=(slice(None),) * d + (idx.reshape(-1),), advanced=True)


def _sort_indices(data: np.ndarray, d: int, descending: builtins.bool) -> np.ndarray:
    """Stable argsort along d; descending keeps equal entries in their original order and puts NaN first
    (PyTorch's order), by sorting the reversed line ascending and reading the result backwards."""
    if not descending:
        return np.argsort(data, axis=d, kind="stable")
    n = data.shape[d]
    return n - 1 - np.flip(np.argsort(np.flip(data, axis=d), axis=d, kind="stable"), axis=d)


def sort(input, dim: int = -1, descending: builtins.bool = False, stable: builtins.bool = False):
    """(values, indices) sorted along dim; ties keep their order (stable, whatever `stable` says)."""
    t = check_tensor(input, "sort", "input")
    d = normalize_dim(dim, t.ndim, "sort")
    if t.ndim == 0:
        return ValuesIndices(t.clone(), t.wrap(array_module(t.data).zeros((), dtype=int64)))
    indices = t.wrap(_sort_indices(t.data, d, descending).astype(int64))
    return ValuesIndices(_gather(t, d, indices.data), indices)


def argsort(input, dim: int = -1, descending: builtins.bool = False, stable: builtins.bool = False):
    return sort(input, dim, descending, stable).indices


def topk(input, k: int, dim: int = -1, largest: builtins.bool = True, sorted: builtins.bool = True):
    """(values, indices) of the k largest (or smallest) entries along dim, best first (also when
    sorted=False, which PyTorch leaves unspecified)."""
    t = check_tensor(input, "topk", "input")
    d = normalize_dim(dim, t.ndim, "topk")
    size = t.shape[d] if t.ndim else 1
    if not isinstance(k, (int, np.integer)) or isinstance(k, builtins.bool) or not 0 <= k <= size:
        raise ValueError(f"topk: k must be an integer in [0, {size}] (the size of dim {d}), got {k!r}")
    if t.ndim == 0:
        return sort(t)
    order = _sort_indices(t.data, d, descending=largest)
    indices = t.wrap(order[(slice(None),) * d + (slice(0, k),)].astype(int64))  # the first k along d
    return ValuesIndices(_gather(t, d, indices.data) if k else gather(t, d, indices), indices)
