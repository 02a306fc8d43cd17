"""torch.compile and torch.set_float32_matmul_precision, for the programs that call them: there is no compiler here.

`mt.compile(model)` returns the model itself (and `@mt.compile` the function itself), saying so once per process
in a warning: the program runs, eagerly, with the same numbers. The precision switch is accepted and changes
nothing: NumPy's float32 matmul has no reduced-precision mode.
"""

from __future__ import annotations

import warnings

__all__ = ["compile", "get_float32_matmul_precision", "set_float32_matmul_precision"]

_said = {"compile": False}
_precision = {"value": "highest"}


def compile(model=None, **options):
    """model, as it is (eager); without a model, a decorator doing the same, as torch.compile(mode=...)."""
    if model is None:
        return lambda fn: compile(fn, **options)
    if not callable(model):
        raise TypeError(f"compile: expected a module or a function, got {type(model).__name__}")
    if not _said["compile"]:
        _said["compile"] = True
        warnings.warn("minitensor.compile: there is no compiler here; the model runs eagerly, as it is", stacklevel=2)
    return model


def set_float32_matmul_precision(precision: str) -> None:
    if precision not in ("highest", "high", "medium"):
        raise ValueError(f"set_float32_matmul_precision: expected 'highest', 'high' or 'medium', got {precision!r}")
    _precision["value"] = precision


def get_float32_matmul_precision() -> str:
    return _precision["value"]
