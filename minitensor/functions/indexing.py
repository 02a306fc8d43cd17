"""The torch.* functions that pick or place entries by index: gather, index_select, sort, argsort, topk, nonzero,
scatter, scatter_add, index_fill (a gather is an integer-array index, so its gradient is GetItem's scatter-add; a
scatter is IndexPut, the same scatter-add as a primitive, so its gradient is a gather)."""

from __future__ import annotations

import builtins
import numbers

import numpy as np

from .. import ops
from ..arguments import ValuesIndices, check_fill_value, check_tensor, index_array, normalize_dim
from ..autograd import is_grad_enabled, is_tensor_like
from ..devices import array_module, to_host
from ..dtypes import bool_, int64
from .elementwise import masked_fill
from .shape import reshape_to

__all__ = ["argsort", "gather", "index_fill", "index_select", "nonzero", "scatter", "scatter_add", "sort", "topk"]


def gather(input, dim: int, index):
    """out[i][j][k] = input[index[i][j][k]][j][k] (dim=0), and so on: values picked along dim.
    Its gradient scatter-adds g back along dim (repeated indices accumulate).
    As in PyTorch, index has input's number of dimensions, a 0-d tensor counting as 1-D, and an empty
    index of any shape gives an empty result of its shape."""
    t = check_tensor(input, "gather", "input")
    idx = index_array(index, "gather")
    d = normalize_dim(dim, t.ndim, "gather")
    xp = array_module(t._data)
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
    xp = array_module(t._data)
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
        return ValuesIndices(t.clone(), t.wrap(array_module(t._data).zeros((), dtype=int64)))
    indices = t.wrap(_sort_indices(t._data, d, descending).astype(int64))
    return ValuesIndices(_gather(t, d, indices._data), indices)


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
    order = _sort_indices(t._data, d, descending=largest)
    indices = t.wrap(order[(slice(None),) * d + (slice(0, k),)].astype(int64))  # the first k along d
    return ValuesIndices(_gather(t, d, indices._data) if k else gather(t, d, indices), indices)


def nonzero(input, *, as_tuple: builtins.bool = False):
    """The indices of input's nonzero entries, in row-major order: a (count, ndim) int64 tensor, or with as_tuple one
    1-D tensor per dim (a 0-d input counts as 1-D there, as in torch). Not differentiable (indices)."""
    t = check_tensor(input, "nonzero", "input")
    xp = array_module(t._data)
    data = t._data if t.ndim else t._data.reshape(1)
    found = xp.nonzero(data)
    if as_tuple:
        return tuple(t.wrap(i.astype(int64)) for i in found)
    out = xp.stack(found, axis=1).astype(int64) if t.ndim else xp.zeros((len(found[0]), 0), dtype=int64)
    return t.wrap(out)


def _scatter_check(op: str, t, dim: int, index, src):
    """(dim, index array) after torch's checks: an integer index of input's number of dims, no larger
    than src anywhere nor than input outside dim, its values inside input's dim; src of input's dtype."""
    d = normalize_dim(dim, t.ndim, op)
    idx = index_array(index, op)
    if idx.ndim != t.ndim and idx.size:
        raise ValueError(f"{op}: index must have as many dimensions as input ({t.ndim}), got shape {idx.shape}")
    t_shape = t.shape
    if builtins.any(idx.shape[k] > t_shape[k] for k in range(idx.ndim) if k != d):
        raise ValueError(f"{op}: index of shape {idx.shape} is larger than input {t.shape} outside dim {d}")
    if is_tensor_like(src):
        if src.dtype != t.dtype:
            raise TypeError(f"{op}: src dtype {src.dtype} must be input's dtype {t.dtype}")
        if src.ndim != idx.ndim or builtins.any(i > s for i, s in zip(idx.shape, src.shape)):
            raise ValueError(f"{op}: index of shape {idx.shape} is larger than src of shape {src.shape}")
    elif not isinstance(src, numbers.Number):
        raise TypeError(f"{op}: src must be a Tensor or a number, got {type(src).__name__}")
    if idx.size and ((idx < 0) | (idx >= t_shape[d])).any():
        bad = idx[(idx < 0) | (idx >= t_shape[d])].reshape(-1)[0]
        raise IndexError(f"{op}: index {bad} is out of range for dim {d} of size {t_shape[d]}")
    return d, idx


def _scatter_places(t, d: int, idx):
    """The integer-array index of input's entries that idx names: idx along dim d, positions along the others;
    and the mask of those entries."""
    xp = array_module(t._data)
    places = tuple(
        idx if k == d else xp.arange(n).reshape((-1,) + (1,) * (idx.ndim - 1 - k)) for k, n in enumerate(idx.shape)
    )
    mask = xp.zeros(t.shape, dtype=bool_)
    mask[places] = True
    return places, mask


def _src_values(src, idx):
    """src's entries at the positions of idx (src may be larger than idx), a basic slice."""
    return ops.GetItem.apply(src, index=tuple(slice(0, n) for n in idx.shape), advanced=False)


def _as_1d(fn, t, dim, index, src, **kwargs):
    """fn on a 0-d input as on a 1-D one of one entry, then back to 0-d."""
    normalize_dim(dim, 0, fn.__name__)
    idx = index.reshape(-1) if is_tensor_like(index) else index
    src = src.reshape(-1) if is_tensor_like(src) else src
    return reshape_to(fn(reshape_to(t, (1,)), 0, idx, src, **kwargs), ())


def scatter(input, dim: int, index, src=None, *, value=None, reduce=None):
    """input with src[i][j][k] written at [index[i][j][k]][j][k] (dim=0), and so on; src may be a number (torch's
    `value`). Gradients: input's g where nothing was written, src's the g at the entries it went to.
    Deviation from PyTorch, flagged: where index repeats a place and src is a tensor, torch leaves which value lands
    unspecified (and sends each its g); here that is refused. reduce='add' (deprecated in torch) is scatter_add;
    reduce='multiply' multiplies the values in, without a gradient (refused where one is asked for)."""
    t = check_tensor(input, "scatter", "input")
    if (src is None) == (value is None):
        raise TypeError("scatter: expected one of src (a tensor or number) and value")
    src = value if src is None else src
    if t.ndim == 0:  # a 0-d input, index and src: as 1-D of one entry (torch's rule)
        return _as_1d(scatter, t, dim, index, src, reduce=reduce)
    if reduce is not None and isinstance(src, numbers.Number):  # a number sent to every place the index names
        check_fill_value(src, t.dtype, "scatter")
        src = t.wrap(array_module(t._data).full(index_array(index, "scatter").shape, src, dtype=t.dtype))
    if reduce == "add" and is_tensor_like(src):
        return scatter_add(t, dim, index, src)
    if reduce == "multiply" and is_tensor_like(src):
        return _scatter_multiply(t, dim, index, src)
    if reduce is not None:
        raise ValueError(
            f"scatter: reduce={reduce!r} is not supported (reduce 'add' or 'multiply' with a src tensor is)"
        )
    d, idx = _scatter_check("scatter", t, dim, index, src)
    if idx.size == 0:
        return ops.Clone.apply(t)
    places, mask = _scatter_places(t, d, idx)
    if not is_tensor_like(src):
        return masked_fill(t, t.wrap(mask.reshape(t.shape)), src)
    if int(mask.sum()) != idx.size:
        raise ValueError(
            "scatter: index names a place more than once, so which src value lands there is unspecified "
            "(torch's rule); make the index unique, or use scatter_add to sum them"
        )
    placed = ops.IndexPut.apply(_src_values(src, idx), shape=t.shape, index=places, advanced=True)
    return ops.Where.apply(placed, t, cond=mask)


def _scatter_multiply(t, dim: int, index, src):
    """scatter(reduce='multiply'): each named place times every src value sent there; not differentiable here."""
    if is_grad_enabled() and (t.requires_grad or src.requires_grad):
        raise NotImplementedError(
            "scatter: reduce='multiply' has no gradient here; run it under mt.no_grad() or on tensors without grad"
        )
    d, idx = _scatter_check("scatter", t, dim, index, src)
    out = t._data.copy()
    if idx.size:
        places, _ = _scatter_places(t, d, idx)
        np.multiply.at(out, places, src._data[tuple(slice(0, n) for n in idx.shape)])
    return t.wrap(out)


def scatter_add(input, dim: int, index, src):
    """input plus src[i][j][k] added at [index[i][j][k]][j][k] (dim=0), and so on; a place named more than once
    gets each value added. Gradients: input's is g, src's the g at the entries it went to."""
    t = check_tensor(input, "scatter_add", "input")
    check_tensor(src, "scatter_add", "src")
    if t.ndim == 0:
        return _as_1d(scatter_add, t, dim, index, src)
    d, idx = _scatter_check("scatter_add", t, dim, index, src)
    if idx.size == 0:
        return ops.Clone.apply(t)
    places, _ = _scatter_places(t, d, idx)
    placed = ops.IndexPut.apply(_src_values(src, idx), shape=t.shape, index=places, advanced=True)
    return t + placed


def index_fill(input, dim: int, index, value):
    """input with `value` (a number or a 0-d tensor) in the slices at index along dim; the gradient of input is g
    outside those slices, that of a 0-d tensor value the sum of g inside them."""
    t = check_tensor(input, "index_fill", "input")
    idx = index_array(index, "index_fill")
    if idx.dtype != int64:
        raise TypeError(f"index_fill: expected an int64 index, got {idx.dtype}")
    if idx.ndim > 1:
        raise ValueError(f"index_fill: index must be a 1-D (or 0-d) tensor, got shape {idx.shape}")
    d = normalize_dim(dim, t.ndim, "index_fill")
    n = t.shape[d] if t.ndim else 1
    idx = to_host(idx).reshape(-1)  # one host read, for the range check and the mask made from it
    if idx.size and ((idx < -n) | (idx >= n)).any():
        raise IndexError(f"index_fill: index {idx.tolist()} is out of range for dim {d} of size {n}")
    along = np.zeros(n, dtype=bool_)
    along[idx] = True
    along = array_module(t._data).asarray(along)
    mask = along.reshape((n,) + (1,) * (t.ndim - 1 - d)) if t.ndim else along.reshape(())
    return masked_fill(t, t.wrap(mask), value)
