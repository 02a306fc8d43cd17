"""The targets of the project's speed work, each met or missed, at one thread count.

Every target compares the NumPy engine with PyTorch on a ratio measured with a process per side
(benchmarks/measure.py), or sets a floor on a fraction or a speed-up; a target whose part was
not run is listed as not measured, with why. A ratio is taken against the faster of the two PyTorch sides,
parity's twin and torch.nn.Transformer (benchmarks/measure.py, time_workload).
"""

from __future__ import annotations

from benchmarks.cli import FULL_CONFIGS, GPT_CONFIGS
from benchmarks.perop import LABELS as PEROP_LABELS
from benchmarks.perop import TARGET_US as PEROP_TARGET_US


def target(desc, value, limit, ok_when_le=True, why=""):
    if value is None:
        return {"target": desc, "value": None, "limit": limit, "met": None, "why": why}
    met = value <= limit if ok_when_le else value >= limit
    if ok_when_le:
        margin = (
            f"{100 * (limit - value) / limit:.0f}% under the limit"
            if met
            else f"{100 * (value - limit) / limit:.0f}% over the limit ({value / limit:.2f}x)"
        )
    else:
        margin = (
            f"{100 * (value - limit) / limit:.0f}% above the floor"
            if met
            else f"{100 * (limit - value) / limit:.0f}% short of the floor"
        )
    return {"target": desc, "value": value, "limit": limit, "met": bool(met), "margin": margin}


def evaluate_targets(section: dict) -> list[dict]:
    """The targets of the project's speed work at this thread count: ratios from separate processes."""
    cfgs, mem = section.get("configs", {}), section.get("memory", {})

    def meas(name, key):
        return cfgs.get(name, {}).get("measurements", {}).get(key, {})

    t = []
    encoder_decoder = [c for c in FULL_CONFIGS if c not in GPT_CONFIGS]
    for name in encoder_decoder:
        t.append(
            target(
                f"training step on {name}, NumPy/fastest PyTorch <= 0.9",
                meas(name, "train").get("ratio"),
                0.9,
                why=f"{name} not run",
            )
        )
    for name in encoder_decoder:
        t.append(
            target(
                f"peak memory on {name}, NumPy/PyTorch <= 0.8",
                mem.get(name, {}).get("ratio_peak"),
                0.8,
                why=f"{name} memory not run",
            )
        )
    for key, what in (("greedy_cache", "cached greedy decoding"), ("beam_cache", "cached beam search")):
        for name in encoder_decoder:
            t.append(
                target(
                    f"{what} on {name}, NumPy/PyTorch <= 0.7",
                    meas(name, key).get("ratio"),
                    0.7,
                    why=f"{name} decoding not run",
                )
            )
    for name in GPT_CONFIGS:  # the decoder-only models' targets: PyTorch eager's speed, no more
        t.append(
            target(
                f"training step on {name}, NumPy/PyTorch <= 1.0",
                meas(name, "train").get("ratio"),
                1.0,
                why=f"{name} not run",
            )
        )
        t.append(
            target(
                f"cached greedy generation on {name}, batch 1, NumPy/PyTorch time <= 1.0 (tokens/s >= 1.0x)",
                meas(name, "greedy_cache").get("ratio"),
                1.0,
                why=f"{name} decoding not run",
            )
        )
    t.append(
        target(
            "base training step, NumPy's fraction of the GEMM rate >= 0.9",
            meas("base", "train").get("gemm_fraction", {}).get("numpy"),
            0.9,
            ok_when_le=False,
            why="base not run",
        )
    )
    t.append(
        target(
            "cached greedy speed-up over uncached, 64 tokens on copy-reverse (NumPy) >= 3",
            cfgs.get("copy-reverse", {}).get("cache_speedup", {}).get("numpy"),
            3.0,
            ok_when_le=False,
            why="copy-reverse decoding not run",
        )
    )
    perop = section.get("perop", {}).get("frameworks", {}).get("minitensor", {})
    for mode in ("recorded", "fwd_bwd"):  # the engine's own cost per recorded op (benchmarks/perop.py)
        t.append(
            target(
                f"the engine's cost per op, {PEROP_LABELS[mode]}, us <= {PEROP_TARGET_US:g}",
                perop.get(mode, {}).get("median_us"),
                PEROP_TARGET_US,
                why="perop not run",
            )
        )
    return t
