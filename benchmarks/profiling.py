"""Where the time goes in one training step: minitensor's profiler beside torch.profiler.

`profile_numpy(step)` runs one step under `mt.profiler.profile()` (per op: calls, forward and
backward time) and `profile_torch(step)` one step under torch.profiler (per aten op, self CPU
time). `attention_share` turns either into the fraction of the step spent in attention's O(n^2)
ops (the scores matmul, the masking, the softmax, the weights-times-values matmul and their
backward): the mark on the scaling plots. Op names differ between the two libraries, so each has
its own name set below; both are approximations stated as such in the report.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import minitensor as mt

# minitensor ops that only attention runs. Names are Function classes (minitensor/ops.py,
# minitensor/nn/functional.py, transformer_np/model.py): linear layers are the fused `Linear`, so a
# bare MatMul in this model is attention's weights @ v (or q k^T in an unfused build), and
# AttentionWeights is transformer_np's fused scores-mask-softmax primitive.
MT_ATTENTION_OPS = {"AttentionWeights", "MatMul", "Softmax", "MaskedFill"}
# aten ops that only attention runs in parity's model (nn.Linear goes through addmm / linear).
TORCH_ATTENTION_OPS = {
    "aten::bmm",
    "aten::_softmax",
    "aten::_softmax_backward_data",
    "aten::masked_fill",
    "aten::masked_fill_",
    "aten::matmul",
    "aten::softmax",
    "BmmBackward0",
    "SoftmaxBackward0",
    "MaskedFillBackward0",
}


def _get(row: dict, *keys, default=0.0):
    """A field of a profiler row under whichever of its spellings is present."""
    for k in keys:
        if k in row and row[k] is not None:
            return row[k]
    return default


def normalize_mt_rows(rows: list[dict]) -> list[dict]:
    """minitensor profiler rows as {op, calls, forward_ms, backward_ms, total_ms}, sorted by total."""
    out = []
    for r in rows:
        name = _get(r, "op", "name", "key", default="?")
        calls = int(_get(r, "calls", "count", "n_calls", default=0))
        fwd = _get(r, "forward_ms", "fwd_ms", "forward_time_ms", default=None)
        if fwd is None:
            fwd = 1e3 * _get(r, "forward_s", "forward", "forward_time", "fwd", default=0.0)
        bwd = _get(r, "backward_ms", "bwd_ms", "backward_time_ms", default=None)
        if bwd is None:
            bwd = 1e3 * _get(r, "backward_s", "backward", "backward_time", "bwd", default=0.0)
        out.append(
            {
                "op": str(name),
                "calls": calls,
                "forward_ms": float(fwd),
                "backward_ms": float(bwd),
                "total_ms": float(fwd) + float(bwd),
            }
        )
    out.sort(key=lambda r: -r["total_ms"])
    return out


def profile_numpy(step: Callable[[], object], steps: int = 1) -> dict:
    """`steps` steps under mt.profiler: its own table, normalized rows, wall time (all per step)."""
    profiler = getattr(mt, "profiler", None)
    if profiler is None or not hasattr(profiler, "profile"):
        return {"error": "mt.profiler.profile() is not available (minitensor/profiler.py, lead-owned)"}
    t0 = time.perf_counter()
    with profiler.profile() as prof:
        for _ in range(steps):
            step()
    wall = (time.perf_counter() - t0) * 1e3 / steps
    rows = normalize_mt_rows(prof.rows())
    for r in rows:
        for k in ("calls", "forward_ms", "backward_ms", "total_ms"):
            r[k] = r[k] / steps if k != "calls" else r[k] // steps
    return {
        "table": prof.table(),
        "rows": rows,
        "wall_ms": wall,
        "steps": steps,
        "ops_ms": sum(r["total_ms"] for r in rows),
    }


def profile_torch(step: Callable[[], object], top: int = 20, steps: int = 1) -> dict:
    """`steps` steps under torch.profiler (CPU): per aten op self time, its table, wall time (per step)."""
    from torch.profiler import ProfilerActivity, profile  # the torch worker only: the numpy one never loads torch

    with profile(activities=[ProfilerActivity.CPU]):
        step()  # the profiler's first session pays its own start-up: discard it
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    wall = (time.perf_counter() - t0) * 1e3 / steps
    ka = prof.key_averages()
    rows = [
        {
            "op": e.key,
            "calls": int(e.count) // steps,
            "self_ms": e.self_cpu_time_total / 1e3 / steps,
            "total_ms": e.cpu_time_total / 1e3 / steps,
        }
        for e in ka
    ]
    rows.sort(key=lambda r: -r["self_ms"])
    return {
        "table": ka.table(sort_by="self_cpu_time_total", row_limit=top),
        "rows": rows,
        "wall_ms": wall,
        "steps": steps,
        "ops_ms": sum(r["self_ms"] for r in rows),
    }


def attention_share(profile: dict, side: str) -> float | None:
    """Fraction of profiled op time spent in attention's O(n^2) ops (None when not profiled)."""
    rows = profile.get("rows")
    if not rows:
        return None
    if side == "numpy":
        total = sum(r["total_ms"] for r in rows)
        att = sum(r["total_ms"] for r in rows if r["op"] in MT_ATTENTION_OPS)
    else:
        total = sum(r["self_ms"] for r in rows)
        att = sum(r["self_ms"] for r in rows if r["op"] in TORCH_ATTENTION_OPS)
    return att / total if total > 0 else None


def top_ops_markdown(np_prof: dict, t_prof: dict, top: int = 12) -> str:
    """The two profiles side by side, top ops by time, with each op's share of its step."""
    lines = [
        "| # | minitensor op | calls | fwd ms | bwd ms | share | | PyTorch op (self) | calls | self ms | share |",
        "|---:|---|---:|---:|---:|---:|---|---|---:|---:|---:|",
    ]
    a = np_prof.get("rows", [])[:top]
    b = t_prof.get("rows", [])[:top]
    ta = sum(r["total_ms"] for r in np_prof.get("rows", [])) or 1.0
    tb = sum(r["self_ms"] for r in t_prof.get("rows", [])) or 1.0
    for i in range(max(len(a), len(b))):
        left = (
            (
                f"{a[i]['op']} | {a[i]['calls']} | {a[i]['forward_ms']:.2f} | {a[i]['backward_ms']:.2f} | "
                f"{100 * a[i]['total_ms'] / ta:.1f}%"
            )
            if i < len(a)
            else " | | | | "
        )
        right = (
            f"{b[i]['op']} | {b[i]['calls']} | {b[i]['self_ms']:.2f} | {100 * b[i]['self_ms'] / tb:.1f}%"
            if i < len(b)
            else " | | | "
        )
        lines.append(f"| {i + 1} | {left} | | {right} |")
    return "\n".join(lines)
