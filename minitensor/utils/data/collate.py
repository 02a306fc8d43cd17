"""default_collate and default_convert, as torch.utils.data's: how a DataLoader turns samples into a batch.

default_collate(batch), batch a list of samples of one structure, returns one sample of that structure whose leaves
are batched: Tensors and NumPy arrays are stacked along a new first dimension (arrays keep their dtype), Python
floats become a float64 Tensor, ints an int64 one (bools a bool one), NumPy scalars a Tensor of their dtype;
strings stay a list; dicts, namedtuples, tuples and lists are collated field by field (a tuple gives a list, as in
torch). default_convert, used when automatic batching is off (batch_size=None), only turns arrays into Tensors.
"""

from __future__ import annotations

import collections.abc

import numpy as np

from ...creation import as_tensor, tensor
from ...dtypes import float64
from ...functions.shape import stack
from ...tensor import Tensor

__all__ = ["default_collate", "default_convert"]

_ERROR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _refuse_strings(arr: np.ndarray, who: str) -> None:
    if arr.dtype.kind in "SaUO":  # strings and objects: no Tensor holds them
        raise TypeError(_ERROR.format(f"a numpy array of dtype {arr.dtype}") if who == "collate" else who)


def default_collate(batch):
    """A list of samples -> the sample structure with each leaf batched (see the module docstring)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        _refuse_strings(elem, "collate")
        return stack([as_tensor(b) for b in batch], 0)
    if isinstance(elem, (str, bytes)):  # np.str_ and np.bytes_ too, as in torch
        return batch
    if isinstance(elem, np.generic):  # a NumPy scalar: one Tensor of its dtype
        _refuse_strings(np.asarray(elem), "collate")
        return as_tensor(np.asarray(batch))
    if isinstance(elem, float):
        return tensor(batch, dtype=float64)
    if isinstance(elem, int):  # bool too: torch.tensor([True, ...]) is a bool Tensor
        return tensor(batch)
    if isinstance(elem, collections.abc.Mapping):
        fields = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(fields)
        except TypeError:  # a mapping type that cannot be built from a dict
            return fields
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(s) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        try:
            return type(elem)(columns)
        except TypeError:
            return columns
    raise TypeError(_ERROR.format(type(elem)))


def default_convert(data):
    """One sample with its NumPy arrays and scalars as Tensors (strings and other leaves as they are)."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "SaUO":
        return as_tensor(data)
    if isinstance(data, np.generic) and np.asarray(data).dtype.kind not in "SaUO":
        return as_tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        fields = {key: default_convert(data[key]) for key in data}
        try:
            return type(data)(fields)
        except TypeError:
            return fields
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
