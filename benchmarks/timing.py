"""Interleaved timing: every case runs once per round, A B A B, so drift hits all sides alike.

On a shared 2-core machine the clock speed and the neighbours' load change over a run. Timing
side A for a minute and then side B for a minute would charge that drift to one side; running
them in alternation within each round spreads it evenly. Each case gets its own warm-up first
(allocator pools, BLAS buffers, first-call imports). We report the median and the spread
(interquartile range and min/max), never the mean, which one preempted sample can drag.
"""
from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Stats:
    """Summary of one case's samples, in milliseconds per call."""
    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    max_ms: float
    n: int
    number: int = 1                      # calls per sample (cheap ops are looped to beat timer noise)
    samples_ms: list = field(default_factory=list)

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms

    def to_dict(self) -> dict:
        return {"median_ms": self.median_ms, "q1_ms": self.q1_ms, "q3_ms": self.q3_ms,
                "iqr_ms": self.iqr_ms, "min_ms": self.min_ms, "max_ms": self.max_ms,
                "n": self.n, "number": self.number, "samples_ms": self.samples_ms}


def summarize(samples_ms: list[float], number: int = 1) -> Stats:
    """Median, quartiles and extremes of per-call times."""
    if not samples_ms:
        raise ValueError("summarize: expected at least one sample, got none")
    s = sorted(samples_ms)
    if len(s) >= 4:
        q1, _, q3 = statistics.quantiles(s, n=4, method="inclusive")
    else:
        q1, q3 = s[0], s[-1]
    return Stats(median_ms=statistics.median(s), q1_ms=q1, q3_ms=q3, min_ms=s[0], max_ms=s[-1],
                 n=len(s), number=number, samples_ms=[round(x, 4) for x in samples_ms])


def calibrate(fn: Callable[[], object], target_ms: float = 5.0, max_number: int = 1000) -> int:
    """How many calls make one sample last about `target_ms` (1 for anything slower)."""
    t0 = time.perf_counter()
    fn()
    dt = (time.perf_counter() - t0) * 1e3
    if dt >= target_ms:
        return 1
    return int(min(max_number, max(1, target_ms / max(dt, 1e-4))))


def interleaved(cases: dict[str, Callable[[], object]], *, warmup: int = 2, repeats: int = 10,
                number: int | dict[str, int] = 1, sync: Callable[[], None] | None = None) -> dict[str, Stats]:
    """Time each case `repeats` rounds, one sample per case per round, after `warmup` calls each.

    `number` (an int, or a dict per case) loops cheap calls inside one sample; the result is per call.
    `sync` (e.g. torch.cuda.synchronize) runs before each clock read so asynchronous work is counted.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"interleaved: expected repeats >= 1 and warmup >= 0, got {repeats}, {warmup}")
    numbers = number if isinstance(number, dict) else {name: number for name in cases}
    for name, fn in cases.items():
        for _ in range(warmup):
            fn()
    if sync:
        sync()
    # One full collection before the rounds, none between samples: with torch loaded a full
    # collection costs ~0.2 s, and garbage an engine makes during its own samples is its cost.
    gc.collect()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            k = numbers[name]
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            if sync:
                sync()
            samples[name].append((time.perf_counter() - t0) * 1e3 / k)
    return {name: summarize(samples[name], numbers[name]) for name in cases}
