"""Ctrl-C during training: the step in progress finishes, a checkpoint is saved, further Ctrl-Cs wait for it."""

from __future__ import annotations

import contextlib
import os
import signal
import threading


class InterruptGuard:
    """Ctrl-C (SIGINT) during training never leaves a half-done step in a checkpoint.

    Inside `atomic()` (an optimizer step with its bookkeeping, a checkpoint save) a SIGINT is only
    recorded, and KeyboardInterrupt is raised when the block ends. Elsewhere (evaluation, the
    progress bar, the callback) the state is that of a completed step, so the first SIGINT raises
    at once. From then on the run is stopping: every further SIGINT is recorded and dropped, so
    the checkpoint saved on the way out is written in full however often Ctrl-C is pressed.
    Only the main thread can install signal handlers; elsewhere the guard does nothing.

    defer=True (data parallelism over MPI): a SIGINT is only ever recorded; the loop asks all ranks at each step's
    end whether one of them saw it, so that every rank stops after the same step and takes part in the final save.
    """

    def __init__(self, defer: bool = False):
        self.defer = defer
        self.pending = False  # a SIGINT arrived inside an atomic block
        self.stopping = False  # KeyboardInterrupt raised: the run is on its way out
        self._depth = 0
        self._old = None

    def _handler(self, signum, frame):
        if self.stopping or self._depth or self.defer:
            self.pending = True
            # os.write, not print: a signal handler may run in the middle of a print
            os.write(2, b"\nCtrl-C: finishing the step in progress and saving a checkpoint first\n")
            return
        self.stopping = True
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def atomic(self):
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if self.pending and not self._depth and not self.stopping and not self.defer:
            self.stopping = True
            raise KeyboardInterrupt

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
        return False
