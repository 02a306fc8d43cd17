"""mt.profiler.profile(): where the time of a forward and backward pass goes, op by op.

    with mt.profiler.profile() as prof:
        loss = model(src, tgt) ...; loss.backward(); opt.step()
    print(prof.table())

Records, per primitive (a Function subclass: Linear, Softmax, MatMul, ...), the number of calls
and the wall time spent in its forward and in its backward. Time outside primitives (Python glue,
optimizer updates) is reported as the difference to the block's total wall time.

On a GPU (CuPy) a call returns once its kernels are queued, so each op is timed between two device
synchronisations (`synchronize`): the times are the kernels', not their launches'. The waits themselves
cost time, so a profiled GPU run is slower than an unprofiled one, as with torch.profiler's CUDA timing.
"""

from __future__ import annotations

import time

from . import fakecuda
from .autograd import OpCalls, is_tensor_like, set_op_calls
from .devices import array_module, is_array, is_host


def synchronize(*arrays) -> None:
    """Wait until the device of the first device array among `arrays` has run every kernel queued so far
    (cupy.cuda.Device().synchronize()). Nothing to wait for on the host, nor on the fake device, whose NumPy
    computes eagerly. A Tensor (what a backward under create_graph hands over) is read through its array;
    non-arrays (None, numbers) are skipped."""
    for a in arrays:
        a = a._data if is_tensor_like(a) else a
        if not is_array(a) or is_host(a):
            continue
        xp = array_module(a)
        if xp is not fakecuda:
            xp.cuda.Device().synchronize()
        return


class _TimedCalls(OpCalls):
    """The engine's way of calling primitives, with each call timed into a profile."""

    def __init__(self, prof: profile):
        self.prof = prof

    def forward(self, fn, ctx, arrays, kwargs):
        synchronize(*arrays)  # on a GPU: what earlier ops queued is not this op's time
        t0 = time.perf_counter()
        out = fn.forward(ctx, *arrays, **kwargs)
        synchronize(*(out if isinstance(out, tuple) else (out,)))  # this op's kernels, run to the end
        self.prof.record(fn.__name__, "forward", time.perf_counter() - t0)
        self.prof.seen(arrays)
        return out

    def backward(self, fn, ctx, g):
        synchronize(*(g if isinstance(g, tuple) else (g,)))
        t0 = time.perf_counter()
        grads = fn.backward(ctx, g)
        synchronize(*(grads if isinstance(grads, tuple) else (grads,)))
        self.prof.record(fn.__name__, "backward", time.perf_counter() - t0)
        return grads


class profile:
    """Context manager recording per-op call counts and forward/backward wall times.

    On entry it installs a timing hook into the engine (autograd.set_op_calls); on exit it puts
    back the previous one, so profiles nest."""

    def __init__(self):
        self.stats: dict[str, list] = {}  # op -> [forward calls, forward s, backward calls, backward s]
        self.wall = 0.0
        self._outer = None
        self._device_array = None  # an array of the device the ops ran on, to synchronise before the wall clock

    def seen(self, arrays) -> None:
        if self._device_array is None:
            self._device_array = next((a for a in arrays if hasattr(a, "dtype") and not is_host(a)), None)

    def record(self, op: str, phase: str, seconds: float) -> None:
        s = self.stats.get(op)
        if s is None:
            s = self.stats[op] = [0, 0.0, 0, 0.0]
        if phase == "forward":
            s[0] += 1
            s[1] += seconds
        else:
            s[2] += 1
            s[3] += seconds

    def __enter__(self) -> profile:
        self._outer = set_op_calls(_TimedCalls(self))
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> bool:
        synchronize(self._device_array)  # the block's wall time ends when its last kernel has
        self.wall += time.perf_counter() - self._t0
        set_op_calls(self._outer)
        return False

    def rows(self) -> list[dict]:
        """One dict per op, sorted by total time (forward + backward), largest first."""
        out = []
        for op, (fc, ft, bc, bt) in self.stats.items():
            out.append(
                {
                    "op": op,
                    "calls": fc,
                    "forward_ms": ft * 1e3,
                    "backward_calls": bc,
                    "backward_ms": bt * 1e3,
                    "total_ms": (ft + bt) * 1e3,
                }
            )
        out.sort(key=lambda r: r["total_ms"], reverse=True)
        return out

    def total_op_ms(self) -> float:
        return sum(r["total_ms"] for r in self.rows())

    def table(self, top: int | None = None) -> str:
        """A plain-text table sorted by total time, with each op's share of the recorded op time."""
        rows = self.rows()
        total = self.total_op_ms() or 1.0
        lines = [f"{'op':<16}{'calls':>7}{'fwd ms':>10}{'bwd ms':>10}{'total ms':>10}{'share':>8}", "-" * 61]
        for r in rows[:top]:
            lines.append(
                f"{r['op']:<16}{r['calls']:>7}{r['forward_ms']:>10.2f}{r['backward_ms']:>10.2f}"
                f"{r['total_ms']:>10.2f}{r['total_ms'] / total:>8.1%}"
            )
        lines.append("-" * 61)
        lines.append(f"{'ops total':<16}{'':>7}{'':>10}{'':>10}{total:>10.2f}")
        if self.wall:
            lines.append(
                f"{'block wall':<16}{'':>7}{'':>10}{'':>10}{self.wall * 1e3:>10.2f}"
                f"   (outside ops: {max(self.wall * 1e3 - total, 0):.2f} ms)"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()
