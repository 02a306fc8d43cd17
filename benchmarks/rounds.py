"""The frame the round-by-round tools share (budget.py, hvp_floor.py, fused_floor.py, layer_floor.py): their workers
started and always stopped, a median [IQR] cell, the flags every one of them takes, and a main that prints the table
(or JSON) and turns a worker's failure or Ctrl-C into one line."""

from __future__ import annotations

import json
import statistics
import sys
from contextlib import contextmanager

from benchmarks import workloads as W
from benchmarks.timing import summarize
from benchmarks.worker import Worker, WorkerError
from transformer_np.cliutil import THREADS_MAX, integer, interrupted, interrupts_as_such

SETTLE_S = 0.5  # between processes: the previous one's idle BLAS threads stop spinning (benchmarks/timing.py)


@contextmanager
def started(sides, threads: int):
    """{side: Worker} for each side, closed afterwards; on Ctrl-C or a failure killed at once, not after their
    current request."""
    workers = {side: Worker(side, threads) for side in sides}
    try:
        yield workers
    except BaseException:
        for w in workers.values():
            w.close(kill=True)
        raise
    for w in workers.values():
        w.close()


def median_ms(worker: Worker, req: dict) -> float:
    """The median of the samples a timing request ('time', 'products') returns."""
    return statistics.median(worker.request(req)["samples_ms"])


def cell(values: list[float], digits: int = 1) -> str:
    """'median [q1-q3]' of the values."""
    st = summarize(values)
    return f"{st.median_ms:.{digits}f} [{st.q1_ms:.{digits}f}-{st.q3_ms:.{digits}f}]"


def add_flags(p, threads: int, rounds: int, rounds_help: str, config: bool = True) -> None:
    """--config (unless config=False), --threads, --rounds and --json, with these defaults (the tool's own flags
    come after)."""
    if config:
        p.add_argument("--config", default="base", choices=sorted(W.CONFIGS), help="config (default: %(default)s)")
    p.add_argument(
        "--threads", type=integer(1, THREADS_MAX), default=threads, help="BLAS and torch threads (default: %(default)s)"
    )
    p.add_argument("--rounds", type=integer(1), default=rounds, help=f"{rounds_help} (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")


def report(prog: str, compute, markdown, as_json: bool) -> int:
    """Print markdown(compute()), or the result as JSON. Ctrl-C is one line and 130, as `python -m benchmarks run`;
    a worker's failure one line and 1, not a traceback. No file is written."""
    try:
        with interrupts_as_such():
            res = compute()
    except KeyboardInterrupt:
        return interrupted(prog)
    except WorkerError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(res, indent=1) if as_json else markdown(res))
    return 0
