"""Command-line helpers shared by `python -m transformer_np`, `python -m parity`, `parity.curvature` and
`python -m benchmarks` (here, not in parity: parity imports torch on import, and benchmarks' NumPy worker
must not; and not in transformer_np/cli.py, which imports the commands and training).

- `OneLineParser`: argparse with a one-line error (exit status 2, no usage block); every command line parses with it.
- `integer(low, high)` and `number(low, high)`: argparse types that refuse, in argparse's one line
  (exit status 2, before any work), anything but a finite number in range: 'nan', 'inf', '-inf',
  '1e400' (which float() reads as inf) and values past either bound. Every numeric flag of these
  command lines uses one of them (tests/transformer_np/test_cli_bad_input.py walks the parsers to check).
- `interrupted(prog)`: what Ctrl-C prints, as `python -m transformer_np train` does: one line on
  stderr, exit status 130, no traceback. `sigint_deferred()` holds a Ctrl-C back while a set of
  output files is written, so the set is never half new, half old (each file is also written
  atomically: minitensor.serialization.atomic_write).
- `check_out_is_a_directory(out)`: refuse an --out that names a file.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import threading

__all__ = [
    "SEED_MAX",
    "THREADS_MAX",
    "OneLineParser",
    "check_out_is_a_directory",
    "integer",
    "interrupted",
    "number",
    "sigint_deferred",
]

# The largest seed every generator a seed reaches takes: torch.manual_seed refuses 2**64 ("Overflow when
# unpacking long long"); NumPy's default_rng takes any int >= 0, and refuses negative ones.
SEED_MAX = 2**64 - 1
# Thread counts beyond this are a typo (OpenBLAS builds cap their pools at 64 to 512 threads).
THREADS_MAX = 1024


def _range_text(low, high, low_open: bool = False, high_open: bool = False) -> str:
    low, high = (f"{b:g}" if isinstance(b, float) else b for b in (low, high))
    if high is None:
        return f"> {low}" if low_open else f">= {low}"
    return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"


def integer(low: int, high: int | None = None):
    """An argparse type: an int in [low, high] (high=None: no upper bound), else a one-line error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer {_range_text(low, high)}, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"expected an integer {_range_text(low, high)}, got {value}")
        return value

    parse.__name__ = "integer"  # argparse names the type in "invalid integer value" messages
    parse.bounds = (low, high)
    return parse


def number(low: float, high: float | None = None, *, low_open: bool = False, high_open: bool = False):
    """An argparse type: a finite float in the range (bounds closed unless *_open), else a one-line error."""
    what = f"a finite number {_range_text(low, high, low_open, high_open)}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        too_low = value <= low if low_open else value < low
        too_high = high is not None and (value >= high if high_open else value > high)
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        if too_low or too_high:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value:g}")
        return value

    parse.__name__ = "number"
    parse.bounds = (low, high)
    return parse


def interrupted(prog: str) -> int:
    """Ctrl-C: one line on stderr; returns 130 (128 + SIGINT), the shell's status for it. A second Ctrl-C
    while the process winds down (closing workers, removing temporaries) is ignored, not a traceback."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(f"{prog}: interrupted", file=sys.stderr)
    return 130


@contextlib.contextmanager
def interrupts_as_such():
    """Inside the block, an error that Python raised from a Ctrl-C is raised as that KeyboardInterrupt, so that a
    command's `except KeyboardInterrupt` prints its one line. Python 3.11 turns an exception raised in a class's
    __set_name__ into RuntimeError: a Ctrl-C that lands while torch imports a module lazily (its dataclasses run
    __set_name__) came out as that RuntimeError's traceback instead."""
    try:
        yield
    except Exception as exc:
        cause = _interrupt_behind(exc)
        if cause is None:
            raise
        raise cause from None  # handled as the Ctrl-C it is: one line, no chain to print


def _interrupt_behind(exc: BaseException, depth: int = 8):
    """The KeyboardInterrupt that exc was raised from or while handling, if any (a few links deep)."""
    while exc is not None and depth > 0:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        exc, depth = exc.__cause__ or exc.__context__, depth - 1
    return None


@contextlib.contextmanager
def sigint_deferred():
    """Inside the block a Ctrl-C is recorded, and KeyboardInterrupt raised when the block ends: the files
    written in it are all written or, when the block fails, none replaced. Only the main thread can hold
    signals; elsewhere the block runs as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending = []
    old = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if pending:
        raise KeyboardInterrupt


class OneLineParser(argparse.ArgumentParser):
    """argparse with a one-line error: "PROG: error: MESSAGE" on stderr and exit status 2, no usage block.

    The three command lines (transformer_np, parity, benchmarks) all parse with it."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(str(message).split())}\n")


def check_out_is_a_directory(out: str) -> None:
    """Refuse (ValueError, before any work) an --out that names a file: the command writes files into a folder."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"--out {out!r} is a file, expected a directory")
