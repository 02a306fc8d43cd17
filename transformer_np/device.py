"""Where transformer_np's arrays live: the host, or the model's device.

The data (token batches, labels, masks built from them) is made on the host, by NumPy; the model may live on a
device (`model.to("cuda")`). At the model's boundary a host array is copied onto the model's device, a transfer
that never waits on the device; a Tensor already on another device is refused, naming both, as torch's mixed-device
error. What decoding and logging need back on the host comes back through `to_host`, each call one host sync.

    on_device(x, like)   x (NumPy array, list or Tensor) as a Tensor on the device of the array `like`
    to_host(arr)         a NumPy array with arr's values (a copy from a device: one sync)
    array_of(x)          the array behind a Tensor, where it lives (no copy, no sync)
    device_of(model)     an array of the model, whose device the model's inputs must reach
"""

from __future__ import annotations

import numpy as np

import minitensor as mt
from minitensor.devices import array_module, is_host


def array_of(x):
    """The array behind a Tensor (NumPy's, or the device library's), without a copy; x itself if it is not a Tensor.
    On the host that is `x.detach().numpy()`; a device array has no such public handle (torch's is DLPack), so the
    model's code that computes outside the graph (masks, decoding, the step's norms) reads the engine's slot, here."""
    return x._data if isinstance(x, mt.Tensor) else x


def to_host(arr) -> np.ndarray:
    """A Tensor's or an array's values as a NumPy array: a host array itself, a device array's copy (one sync);
    anything else (a number, a list) through np.asarray."""
    arr = array_of(arr)
    if is_host(arr):
        return arr
    return arr.get() if hasattr(arr, "get") and hasattr(arr, "dtype") else np.asarray(arr)


def device_of(model):
    """The array of the model's first parameter: what `on_device` copies the model's inputs beside."""
    for p in model.parameters():
        return array_of(p)
    return np.empty(0)


def _where(arr) -> str:
    return "cpu" if is_host(arr) else "cuda"


def on_device(x, like, who: str = "the model") -> mt.Tensor:
    """x as a Tensor on the device of the array `like`: a host array (or a CPU Tensor) is copied over; a Tensor
    on a device that `like` is not on is refused (no device -> host move happens silently)."""
    arr = array_of(x)
    if not hasattr(arr, "dtype"):
        arr = np.asarray(arr)
    if array_module(arr) is array_module(like):
        return x if isinstance(x, mt.Tensor) else mt.Tensor.wrap(arr)
    if not is_host(arr):
        raise RuntimeError(
            f"{who}: expected all tensors to be on the same device, but found at least two devices, "
            f"{_where(like)} and {_where(arr)} (move the input with .to('{_where(like)}'))"
        )
    return mt.Tensor.wrap(array_module(like).asarray(arr))
