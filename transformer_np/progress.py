"""Progress of a training loop: tqdm's bar on a terminal, a plain line now and then elsewhere.

tqdm redraws its bar with carriage returns several times a second. On a terminal that is one line;
redirected to a file or a pipe (a log, CI) every redraw stays, about 160 KB for the demo's 2,000
steps. When stderr is not a terminal, `progress` therefore prints a whole line instead, each time
another tenth of the steps is done or a minute has passed, and at the end: about a dozen lines a run.
"""

from __future__ import annotations

import sys
import time

LINE_FRACTION = 0.1  # a line each time this fraction of the steps is done ...
LINE_SECONDS = 60.0  # ... or this long after the previous line, whichever comes first


class LineProgress:
    """The part of tqdm's interface the training loops use, written as occasional whole lines on stderr."""

    def __init__(self, iterable=None, total=None, initial=0, desc="", unit="step", **_):
        self.iterable = iterable
        self.total = len(iterable) if total is None and iterable is not None else total
        self.n = self._shown = initial
        self.desc, self.unit = desc, unit
        self.postfix = ""
        self._t0 = self._last = time.perf_counter()
        self._every = max(1, int((self.total or 0) * LINE_FRACTION))
        self._closed = False

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update(1)
        self.close()

    def update(self, n: int = 1) -> None:
        before, self.n = self.n, self.n + n
        now = time.perf_counter()
        if self.n // self._every > before // self._every or now - self._last >= LINE_SECONDS:
            self._line(now)

    def set_postfix(self, refresh: bool = True, **kw) -> None:
        self.postfix = ", ".join(f"{k} {v}" for k, v in kw.items())

    def write(self, s: str) -> None:
        print(s)  # tqdm.write's default file is stdout too

    def close(self) -> None:
        if not self._closed and self.n != self._shown:
            self._line(time.perf_counter())
        self._closed = True

    def _line(self, now: float) -> None:
        of = f"/{self.total}" if self.total else ""
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        extra = f", {self.postfix}" if self.postfix else ""
        print(f"{self.desc}: {self.unit} {self.n}{of}{pct}, {now - self._t0:.0f} s{extra}", file=sys.stderr, flush=True)
        self._shown, self._last = self.n, now


def progress(iterable=None, *, total=None, initial=0, desc="", unit="step", leave=True):
    """A tqdm bar when stderr is a terminal, else a LineProgress (same calls: update, set_postfix, write, close)."""
    if sys.stderr.isatty():
        from tqdm.auto import tqdm

        return tqdm(iterable, total=total, initial=initial, desc=desc, unit=unit, dynamic_ncols=True, leave=leave)
    return LineProgress(iterable, total=total, initial=initial, desc=desc, unit=unit)
