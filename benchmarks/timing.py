"""Alternating timing: each side in its own process, one round each in turn, A B A B.

On a shared 2-core machine the clock speed and the neighbours' load change over a run. Timing
side A for a minute and then side B for a minute would charge that drift to one side; running
them in alternation round by round spreads it evenly. Each side runs in its own worker process
(benchmarks/worker.py), because two frameworks that own thread pools slow each other down in one
process. Each case is warmed up in its worker first (allocator pools, BLAS buffers, first-call
imports). A round yields a few calls; its median is the round's figure; a side's time is the
median of its round figures and the ratio the median of the per-round ratios, with their spread
(interquartile range and min/max), never the mean, which one preempted sample can drag.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Stats:
    """Summary of one case's samples, in milliseconds per call."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    max_ms: float
    n: int
    number: int = 1  # calls per sample (cheap ops are looped to beat timer noise)
    samples_ms: list = field(default_factory=list)

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms

    def to_dict(self) -> dict:
        return {
            "median_ms": self.median_ms,
            "q1_ms": self.q1_ms,
            "q3_ms": self.q3_ms,
            "iqr_ms": self.iqr_ms,
            "min_ms": self.min_ms,
            "max_ms": self.max_ms,
            "n": self.n,
            "number": self.number,
            "samples_ms": self.samples_ms,
        }


def summarize(samples_ms: list[float], number: int = 1) -> Stats:
    """Median, quartiles and extremes of per-call times."""
    if not samples_ms:
        raise ValueError("summarize: expected at least one sample, got none")
    s = sorted(samples_ms)
    if len(s) >= 4:
        q1, _, q3 = statistics.quantiles(s, n=4, method="inclusive")
    else:
        q1, q3 = s[0], s[-1]
    return Stats(
        median_ms=statistics.median(s),
        q1_ms=q1,
        q3_ms=q3,
        min_ms=s[0],
        max_ms=s[-1],
        n=len(s),
        number=number,
        samples_ms=[round(x, 4) for x in samples_ms],
    )


def calibrate(fn: Callable[[], object], target_ms: float = 5.0, max_number: int = 1000) -> int:
    """How many calls make one sample last about `target_ms` (1 for anything slower)."""
    t0 = time.perf_counter()
    fn()
    dt = (time.perf_counter() - t0) * 1e3
    if dt >= target_ms:
        return 1
    return int(min(max_number, max(1, target_ms / max(dt, 1e-4))))


def alternate(workers: dict, request: dict, rounds: int, settle_s: float = 0.0) -> dict[str, list]:
    """Send `request` to each side's worker in turn, A B A B, `rounds` times: {side: [reply per round]}.

    `workers` maps a side ('numpy', 'torch', ...) to its benchmarks.worker.Worker; the side's name is
    added to the request. Before a request goes to a different process than the last one, the
    parent sleeps `settle_s`: long enough for the other process's idle BLAS/OpenMP threads to stop
    spinning (OpenBLAS spins about 0.1 s after its last product: docs/decisions/007-a-process-per-side-alternating.md),
    so neither side starts a round
    with the other's threads still holding the cores. When both sides share one worker (the
    in-process mode) there is nothing to settle.
    """
    replies: dict[str, list] = {side: [] for side in workers}
    last = None
    for _ in range(rounds):
        for side, worker in workers.items():
            if last is not None and worker is not last and settle_s > 0:
                time.sleep(settle_s)
            replies[side].append(worker.request({**request, "side": side}))
            last = worker
    return replies


def round_medians(replies: list[dict]) -> list[float]:
    """Per-round medians of the samples a `time` request returned, one per round."""
    return [statistics.median(r["samples_ms"]) for r in replies]


def ratio_stats(a: list[float], b: list[float]) -> dict:
    """Per-round ratios a/b summarized: median, quartiles, extremes and the ratios themselves."""
    if len(a) != len(b) or not a:
        raise ValueError(f"ratio_stats: expected two equally long non-empty lists, got {len(a)} and {len(b)}")
    st = summarize([x / y for x, y in zip(a, b)])
    return {
        "median": st.median_ms,
        "q1": st.q1_ms,
        "q3": st.q3_ms,
        "min": st.min_ms,
        "max": st.max_ms,
        "rounds": st.n,
        "per_round": st.samples_ms,
    }
