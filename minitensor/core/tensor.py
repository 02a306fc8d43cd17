"""The Tensor's autograd state: its array (private, `_data`), .grad, grad_fn, version counter and hooks.

The math, the in-place writers and the devices are added by minitensor/tensor.py, which subclasses it.
"""

from __future__ import annotations

import weakref
from functools import partial

import numpy as np

from . import points
from .engine import backward
from .function import VersionCounter


class Tensor:
    """An array that can record the operations applied to it and backpropagate through them."""

    # dual_tangent (forward mode), no_grad_view and _post_hooks: state features keep on a tensor (points.py)
    __slots__ = ("_data", "requires_grad", "_grad", "grad_fn", "version_counter", "_hooks")
    __slots__ += ("_post_hooks", "dual_tangent", "no_grad_view", "__weakref__")

    shape = property(lambda self: self._data.shape)
    dtype = property(lambda self: self._data.dtype)

    is_leaf = property(lambda self: self.grad_fn is None)

    @property
    def grad(self):
        """The gradient accumulated by backward(); assigning one of another shape, dtype or device is an error."""
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad must be a Tensor or None, got {type(value).__name__}")
            if value.shape != self.shape:
                raise RuntimeError(f"assigned grad has shape {value.shape}, but the tensor has shape {self.shape}")
            if value.dtype != self.dtype:
                raise RuntimeError(f"assigned grad has dtype {value.dtype}, but the tensor has dtype {self.dtype}")
            if type(value._data) is not type(self._data) and value.device != self.device:
                raise RuntimeError(
                    f"assigned grad is on device {value.device}, but the tensor is on {self.device}; "
                    f"move it first with .to({str(self.device)!r})"
                )
        self._grad = value

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) . gradient into every leaf's .grad. create_graph=True records the backward too,
        so .grad can be differentiated again; retain_graph defaults to create_graph."""
        backward(self, gradient, retain_graph, create_graph)

    def accumulate_grad(self, g) -> None:
        """Add gradient g (an array of this tensor's shape owned by the caller, or a Tensor under create_graph)
        into .grad, after the hooks; then the post-accumulate-grad hooks."""
        g = self.apply_hooks(g)
        if g.dtype != self._data.dtype:
            raise RuntimeError(f"internal: gradient dtype {g.dtype} differs from the tensor's dtype {self._data.dtype}")
        if isinstance(g, Tensor):  # create_graph: .grad keeps the gradient's graph
            self._grad = g if self._grad is None else self._grad + g
        elif self._grad is None:
            self._grad = self.wrap(g)
        else:
            self._grad._data = self._grad._data + g
        for hook in self._post_hooks or ():
            hook(self)

    def apply_hooks(self, g):
        """A leaf's gradient after its hooks, each of which may replace it (a non-leaf's run on its grad_fn)."""
        for hook in self._hooks or ():
            g = hook(g)
        return g

    def retain_grad(self) -> None:
        """Keep .grad on this non-leaf tensor after backward."""
        if not self.requires_grad:
            raise RuntimeError("retain_grad() on a tensor that does not require grad")
        if self.grad_fn is not None:
            self.grad_fn.retained = weakref.ref(self)  # weak: the node must not keep its output alive

    def register_hook(self, hook):
        """hook(grad) -> None or a replacement gradient, called when this tensor's gradient is computed."""
        if not self.requires_grad:
            raise RuntimeError("register_hook() on a tensor that does not require grad")
        holder, attr = (self.grad_fn, "hooks") if self.grad_fn is not None else (self, "_hooks")
        handle = HookHandle(holder, attr, hook, type(self))
        setattr(holder, attr, (getattr(holder, attr) or []) + [handle.on_array])
        return handle


def wrap(cls, arr) -> Tensor:
    """A new `cls` around `arr`, no checks, no copy: how ops build their results (as `t.wrap(arr)`)."""
    t = object.__new__(cls)
    t._data = arr
    t.requires_grad = False
    t._grad = t.grad_fn = t._hooks = t._post_hooks = t.dual_tangent = None
    t.version_counter = VersionCounter()  # bumped by every in-place change (shared with views)
    t.no_grad_view = False
    return t


Tensor.wrap = staticmethod(partial(wrap, Tensor))  # t.wrap(arr); a partial: no method object per op


class HookHandle:
    """A registered tensor hook: `on_array` is what the walk calls (an array in, an array out; Tensors under
    create_graph); `remove()` unregisters it."""

    def __init__(self, holder, attr: str, hook, tensor_class=Tensor):
        self._holder, self._attr, self.hook, self._wrap = holder, attr, hook, tensor_class.wrap

    def on_array(self, g):
        """What the hook returns must have g's shape, dtype and device, as torch checks; a number or a list is
        made as g's."""
        r = self.hook(g if isinstance(g, Tensor) else self._wrap(g))
        if r is None:
            return g
        arr = g._data if isinstance(g, Tensor) else g
        r_arr = r._data if isinstance(r, Tensor) else r
        if not hasattr(r_arr, "shape"):  # a number or a list: made as g's
            r_arr = _like(arr, r_arr)
        if r_arr.shape != arr.shape:
            raise ValueError(f"hook {self.hook!r} returned a gradient of shape {r_arr.shape}, expected {arr.shape}")
        where, came = (points.devices.device_of(a) for a in (arr, r_arr)) if points.devices else ("cpu", "cpu")
        if r_arr.dtype != arr.dtype or came != where:  # torch: "hook ... has changed the type of value"
            raise RuntimeError(
                f"hook {self.hook!r} has changed the type of value: it returned a {r_arr.dtype} gradient on {came} "
                f"for a {arr.dtype} gradient on {where}"
            )
        if isinstance(g, Tensor):
            return r if isinstance(r, Tensor) else self._wrap(r_arr)
        return r_arr

    def remove(self) -> None:
        hooks = getattr(self._holder, self._attr) or []
        setattr(self._holder, self._attr, [h for h in hooks if h not in (self.on_array, self.hook)] or None)


def _like(arr, value):
    """`value` (a number or a list) as an array of arr's dtype on arr's device."""
    xp = points.devices.array_module(arr) if points.devices is not None else np
    return xp.asarray(value, dtype=arr.dtype)
