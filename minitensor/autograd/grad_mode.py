"""torch.inference_mode: here no_grad under torch's name, a context manager and a decorator.

Deviation from PyTorch, flagged: torch marks the tensors made inside as inference tensors (no version counter,
refused later by autograd); minitensor has no such tensors, so they are ordinary tensors made without a graph,
exactly as under no_grad. inference_mode(False) turns grad mode on for the block, as torch's does.
"""

from __future__ import annotations

from ..core import is_grad_enabled, no_grad, set_grad_enabled


class inference_mode(no_grad):
    """`with mt.inference_mode():`, `@mt.inference_mode()` or `@mt.inference_mode`: no graph is recorded inside."""

    def __new__(cls, mode=True):
        if callable(mode):  # @inference_mode without parentheses: decorate the function now
            return cls()(mode)
        return object.__new__(cls)

    def __init__(self, mode: bool = True):
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode: mode must be a bool, got {type(mode).__name__}")
        self.inference = mode
        self.prev = is_grad_enabled()

    def clone(self):
        return type(self)(self.inference)

    def __enter__(self):
        if self.inference:
            return super().__enter__()  # grad mode off; __exit__ restores the mode found
        self.prev = is_grad_enabled()
        set_grad_enabled(True)
