"""Where the parity report's two sides run: torch's `--device`, transformer_np's `--np-device`, and the reference.

The report checks transformer_np (the subject) against a reference. Three pairings (docs/gpu.md):

    --device cuda                               transformer_np on the CPU against torch on CUDA
    --np-device cuda --device cuda              transformer_np on CUDA against torch on CUDA
    --np-device cuda --against np-cpu           transformer_np on CUDA against transformer_np on the CPU: the same
                                                engine and formulas, so only the device's arithmetic differs

"cuda" for transformer_np is CuPy on a GPU, or the strict NumPy-backed fake device when MINITENSOR_FAKE_CUDA=1
(minitensor/fakecuda.py); there every result must equal the CPU's. The subject is built on the CPU from the
seed (one host stream: the same weights on every device) and moved after its weights are copied to the reference.

`host(x)` is every comparison's way back: a minitensor Tensor or a NumPy, CuPy or fake-device array as a NumPy
array (a device array is copied over: one host sync). `like(array, ref)` puts a host array beside `ref`.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

import minitensor as mt
from minitensor import devices
from transformer_np.device import array_of

DEVICES = ("cpu", "cuda", "auto")  # torch's side (--device)
NP_DEVICES = ("cpu", "cuda")  # transformer_np's side (--np-device)
AGAINST = ("torch", "np-cpu")  # the reference (--against)


class DeviceError(RuntimeError):
    """A device was asked for that this machine does not have."""


def resolve_device(device: str) -> str:
    """torch's side: 'cpu', 'cuda' or 'auto' (cuda when available) to a torch device string; clear error otherwise."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError("cuda requested but no GPU: use --device cpu")
        return "cuda"
    if device == "cpu":
        return "cpu"
    raise ValueError(f"unknown device {device!r}: expected one of {list(DEVICES)}")


def resolve_np_device(np_device: str) -> str:
    """transformer_np's side: 'cpu', or 'cuda' when minitensor sees one (CuPy and a GPU, or the fake device)."""
    if np_device == "cpu":
        return "cpu"
    if np_device == "cuda":
        if not mt.cuda.is_available():
            raise DeviceError(
                "--np-device cuda requested but minitensor sees no CUDA device: install CuPy on a GPU machine "
                "(make gpu), or set MINITENSOR_FAKE_CUDA=1 for the fake device; or use --np-device cpu"
            )
        return "cuda"
    raise ValueError(f"unknown np-device {np_device!r}: expected one of {list(NP_DEVICES)}")


def check_pairing(np_device: str, against: str) -> None:
    """ValueError naming the option that is not one of its values, or a pairing that compares nothing new."""
    if np_device not in NP_DEVICES:
        raise ValueError(f"unknown np-device {np_device!r}: expected one of {list(NP_DEVICES)}")
    if against not in AGAINST:
        raise ValueError(f"unknown reference {against!r}: expected one of {list(AGAINST)}")
    if against == "np-cpu" and np_device == "cpu":
        raise ValueError(
            "--against np-cpu compares transformer_np on a device with itself on the CPU: add --np-device cuda"
        )


def host(x) -> np.ndarray:
    """A minitensor Tensor, an array of any library minitensor runs on, or a number, as a NumPy array."""
    x = array_of(x)
    return devices.to_host(x) if devices.is_array(x) else np.asarray(x)


def like(array, ref):
    """The host `array` on the device of the array `ref` (a NumPy array stays as it is)."""
    return devices.array_module(ref).asarray(array)


def model_device(model) -> str:
    """'cpu' or 'cuda': where a minitensor or torch model's first parameter lives."""
    return str(next(iter(model.parameters())).device).partition(":")[0]


def np_reference(np_model):
    """The reference of --against np-cpu: a copy of transformer_np's model, taken while it is still on the CPU."""
    if model_device(np_model) != "cpu":
        raise RuntimeError("np_reference: copy the model before it moves to the device")
    return copy.deepcopy(np_model)


def pairing(np_device: str, device: str, against: str) -> str:
    """The report header's words for who is checked against whom."""
    reference = "transformer_np on cpu" if against == "np-cpu" else f"PyTorch on {device}"
    return f"transformer_np on {np_device} against {reference}"
