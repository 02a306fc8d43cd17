"""mt.autograd.forward_ad: forward-mode AD as torch.autograd.forward_ad spells it.

    with forward_ad.dual_level():
        x = forward_ad.make_dual(primal, tangent)   # x carries primal and a direction v
        y = f(x)                                    # each primitive carries the tangent along (tangents.py)
        value, jv = forward_ad.unpack_dual(y)       # f(primal) and J v, in one pass

Forward mode answers "how does every output move when the inputs move along v?" in one forward pass;
reverse mode answers "how does one output depend on every input?" in one backward (docs/forward_mode.md).
Grad mode governs reverse-mode recording only: tangents flow under no_grad too, as in PyTorch.

This file sits above tensor.py (it makes views with a primitive from ops/), loaded by minitensor/__init__
as autograd/functional.py is; the engine's side of forward mode is autograd/tangents.py.
"""

from __future__ import annotations

from typing import NamedTuple

from ..core import is_tensor_like
from ..ops import Reshape
from .tangents import DualLevel, dual_state, outside_rules, set_tangent, tangent_of

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual"]


def enter_dual_level() -> int:
    """Open the forward-mode level (one at a time, as torch's Python API allows); returns its index, 0."""
    if dual_state.level is not None:
        raise RuntimeError(
            "enter_dual_level: a forward-mode level is already open; nested levels are not supported "
            "(as in torch.autograd.forward_ad): close it first"
        )
    dual_state.level = DualLevel()
    return 0


def exit_dual_level(*, level: int | None = None) -> None:
    """Close the open level: every tangent made in it vanishes (unpack_dual then gives None)."""
    if dual_state.level is None:
        raise RuntimeError("exit_dual_level: no forward-mode level is open")
    if level not in (None, 0):
        raise RuntimeError(f"exit_dual_level: level {level} is not open; the open level is 0")
    dual_state.level = None


class dual_level:  # torch's name: a context manager class
    """`with dual_level():` opens the forward-mode level for the block and closes it on the way out."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc) -> None:
        exit_dual_level()


def make_dual(tensor, tangent, *, level: int | None = None):
    """A view of `tensor` carrying `tangent` (same shape and dtype) at the open level. Reverse mode sees the
    view as `tensor` itself: gradients flow back to it."""
    if dual_state.level is None:
        raise RuntimeError(
            "make_dual: no forward-mode level is open; call it inside `with mt.autograd.forward_ad.dual_level():`"
        )
    if level not in (None, 0):
        raise RuntimeError(f"make_dual: level {level} is not open; the open level is 0")
    for name, value in (("tensor", tensor), ("tangent", tangent)):
        if not is_tensor_like(value):
            raise TypeError(f"make_dual: expected {name} to be a Tensor, got {type(value).__name__}")
    if tensor.dtype.kind != "f":
        raise TypeError(f"make_dual: expected a floating-point primal, got dtype {tensor.dtype}")
    if tangent.shape != tensor.shape:
        raise RuntimeError(
            f"make_dual: expected the tangent to have the primal's shape {tensor.shape}, got shape {tangent.shape}"
        )
    if tangent.dtype != tensor.dtype:
        raise RuntimeError(
            f"make_dual: expected the tangent to have the primal's dtype {tensor.dtype}, got dtype {tangent.dtype}"
        )
    if tangent.device != tensor.device:
        raise RuntimeError(
            f"make_dual: expected the tangent on the primal's device {tensor.device}, got device {tangent.device} "
            f"(move it with .to({str(tensor.device)!r}))"
        )
    with outside_rules():  # the view must not inherit a tangent the primal may already carry
        dual = Reshape.apply(tensor, shape=tensor.shape)
    set_tangent(dual, tangent)
    return dual


class UnpackedDualTensor(NamedTuple):
    """What unpack_dual returns: the primal (a view, without tangent) and the tangent (None if there is none)."""

    primal: object
    tangent: object


def unpack_dual(tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """(primal, tangent) of a dual tensor; the tangent is None for a tensor without one, or outside a level."""
    if not is_tensor_like(tensor):
        raise TypeError(f"unpack_dual: expected a Tensor, got {type(tensor).__name__}")
    tangent = tangent_of(tensor)
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    with outside_rules():
        primal = Reshape.apply(tensor, shape=tensor.shape)
    return UnpackedDualTensor(primal, tangent)
