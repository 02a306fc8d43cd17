"""Anomaly mode, as torch.autograd's: detect_anomaly, set_detect_anomaly, is_anomaly_enabled.

"My loss became NaN: which op did it?" While anomaly mode is on:
- each recorded node keeps where its forward was called (`forward_trace`: file, line and function of each
  frame, minitensor's own innermost frames trimmed), as torch keeps "the traceback of the forward call";
- a backward that returns a NaN gradient raises RuntimeError naming the node, which of its outputs (the
  gradient for which input), its shape and dtype, and that traceback: the first node of the walk to make a
  NaN is the op to blame, since the walk runs from the loss down;
- a forward-mode rule (tangents.py) that returns a NaN tangent raises the same way, at the forward call;
- any other error raised in a backward gets the traceback of its forward call added as a note.
It only reads values: every result is what it would be without it.

The switch is global, as torch's is (AnomalyMode in torch/csrc/autograd/anomaly_mode.h is a process-wide
flag, not thread-local like grad mode): turned on in one thread, it holds in every thread. While it is off,
an op pays one attribute read (`anomaly.enabled` in Function.apply and Node.backward).
"""

from __future__ import annotations

import functools
import linecache
import os
import sys
import warnings

import numpy as np

from ..features import switch


class AnomalyState:
    """The global switch: whether anomaly mode is on, and whether it checks gradients for NaN."""

    enabled = False
    check_nan = True  # torch.is_anomaly_check_nan_enabled() is True while anomaly mode is off, too


anomaly = AnomalyState()


def is_anomaly_enabled() -> bool:
    """Whether anomaly mode is on (in every thread: the switch is global, as torch's)."""
    return anomaly.enabled


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly mode checks each backward's (and forward-mode rule's) output for NaN."""
    return anomaly.check_nan


def _set(mode, check_nan) -> None:
    for name, value in (("mode", mode), ("check_nan", check_nan)):
        if not isinstance(value, bool):
            raise TypeError(f"set_detect_anomaly: {name} must be a bool (True or False), got {type(value).__name__}")
    _put(mode, check_nan)


def _put(mode: bool, check_nan: bool) -> None:
    anomaly.enabled, anomaly.check_nan = mode, check_nan
    switch("anomaly mode", mode)  # the engine's extended paths record traces and check gradients


class _AnomalyContext:
    """Shared by detect_anomaly and set_detect_anomaly: a context manager that restores the previous mode on
    exit, and a decorator that runs the function under the mode (torch's two are both)."""

    def __init__(self, mode: bool, check_nan: bool):
        self.mode, self.check_nan = mode, check_nan
        self.previous = (anomaly.enabled, anomaly.check_nan)

    def __enter__(self):
        self.previous = (anomaly.enabled, anomaly.check_nan)
        _set(self.mode, self.check_nan)
        return self

    def __exit__(self, *exc) -> None:
        _put(*self.previous)

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"{type(self).__name__}() decorates a function, got {type(fn).__name__}")

        @functools.wraps(fn)
        def decorated(*args, **kwargs):
            with type(self)(**self.arguments()):
                return fn(*args, **kwargs)

        return decorated


class detect_anomaly(_AnomalyContext):  # torch's name: a context manager class
    """`with detect_anomaly():` (or `@detect_anomaly()`): anomaly mode on for the block, then as before."""

    def __init__(self, check_nan: bool = True):
        if not isinstance(check_nan, bool):
            raise TypeError(f"detect_anomaly: check_nan must be a bool (True or False), got {type(check_nan).__name__}")
        super().__init__(True, check_nan)

    def arguments(self) -> dict:
        return {"check_nan": self.check_nan}

    def __enter__(self):
        # torch warns the same way: the mode records a traceback per op and checks every gradient
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
            "enabled for debugging.",
            stacklevel=2,
        )
        return super().__enter__()


class set_detect_anomaly(_AnomalyContext):  # torch's name: a class that switches the mode when constructed
    """`set_detect_anomaly(True)` turns anomaly mode on (for good); as a context manager, until the block ends."""

    def __init__(self, mode: bool, check_nan: bool = True):
        super().__init__(mode, check_nan)
        _set(mode, check_nan)

    def arguments(self) -> dict:
        return {"mode": self.mode, "check_nan": self.check_nan}

    def __enter__(self):
        return self  # the constructor already switched the mode; __exit__ restores the one before it


# --------------------------------------------------------------------------------------------
# The forward's traceback (recorded while on) and the checks
# --------------------------------------------------------------------------------------------

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # minitensor/


def forward_trace(skip: int = 0) -> tuple:
    """Where the running forward was called: (file, line, function) per frame, outermost first, without the
    innermost frames inside minitensor itself (Function.apply, the Tensor method or nn function that called
    it: the last line shown is the caller's) nor the `skip` innermost frames of the caller (an OpCalls hook).
    Names only, no frame objects: no local variable is kept alive."""
    frames = []
    f = sys._getframe(1 + skip)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f = f.f_back
    while f is not None:
        frames.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    frames.reverse()
    return tuple(frames)


def format_trace(trace) -> str:
    """A recorded trace as Python prints one: `  File "x.py", line 3, in f` and the source line."""
    if not trace:
        return "  (no forward traceback was recorded: the node was made while anomaly mode was off)"
    lines = []
    for filename, lineno, name in trace:
        lines.append(f'  File "{filename}", line {lineno}, in {name}')
        source = linecache.getline(filename, lineno).strip()
        if source:
            lines.append(f"    {source}")
    return "\n".join(lines)


def check_gradients(node_name: str, grads, inputs, trace) -> None:
    """Raise if a node's backward returned NaN (anomaly mode with check_nan): name the node, which output
    (torch's word for the gradient of input i), its shape and dtype, and the forward's traceback."""
    for i, g in enumerate(grads):  # torch's wording for every index: "its 0th output", "its 1th output"
        if g is None:
            continue
        a = g._data if hasattr(g, "version_counter") else g
        if a.dtype.kind in "fc" and np.isnan(a).any():
            raise RuntimeError(
                f"Function '{node_name}' returned nan values in its {i}th output (the gradient for "
                f"input {i} of {len(inputs)}, shape {tuple(a.shape)}, {a.dtype}; "
                f"{int(np.isnan(a).sum())} of {a.size} elements NaN). "
                f"Traceback of forward call that caused the error:\n{format_trace(trace)}"
            )


def check_tangent(fn_name: str, tangent) -> None:
    """Raise if a forward-mode rule returned a NaN tangent; the forward call is the running one."""
    a = tangent._data
    if a.dtype.kind in "fc" and np.isnan(a).any():
        raise RuntimeError(
            f"Function '{fn_name}' returned nan values in its forward-mode output (the tangent of its output, "
            f"shape {tuple(a.shape)}, {a.dtype}; {int(np.isnan(a).sum())} of {a.size} elements NaN). "
            f"Traceback of forward call that caused the error:\n{format_trace(forward_trace())}"
        )


def note_forward_call(error: BaseException, node_name: str, trace) -> None:
    """Add the forward call's traceback to an error raised in a node's backward (torch prints it as a warning,
    "Error detected in ...": a note travels with the exception instead)."""
    error.add_note(
        f"Error detected in {node_name}. Traceback of forward call that caused the error:\n{format_trace(trace)}"
    )
