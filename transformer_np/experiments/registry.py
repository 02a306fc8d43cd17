"""The experiments by name: their default step counts, the refusals checked before any work, and running one."""

from __future__ import annotations

import os

from .beam import exp_beam
from .curvature import CURVATURE_SIZES, exp_curvature
from .heads import exp_heads
from .layers import exp_layers
from .memory import exp_memory
from .positional import exp_positional
from .recipe import SMOKE_STEPS
from .residual import exp_residual
from .results import result_files

DEFAULT_STEPS = {
    "heads": 300,
    "layers": 300,
    "positional": 500,
    "beam": 400,
    "residual": 0,
    "curvature": 1000,
    "memory": 0,
}

EXPERIMENTS = {
    "heads": exp_heads,
    "layers": exp_layers,
    "positional": exp_positional,
    "beam": exp_beam,
    "residual": exp_residual,
    "curvature": exp_curvature,
    "memory": exp_memory,
}


def check_experiment(
    name: str, out_dir: str, steps: int | None = None, overwrite: bool = False, tiny: bool = False
) -> None:
    """Refuse, before any work, an unknown name, a bad step count, or a result that would be overwritten."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}: expected one of {sorted(EXPERIMENTS)} (or 'all')")
    if steps is not None and steps < 1 and name not in ("residual", "memory"):
        raise ValueError(f"experiment {name}: --steps must be >= 1, got {steps}")
    if tiny and name not in ("curvature", "memory"):
        raise ValueError(
            f"experiment {name}: --tiny is only for the curvature and memory experiments (the others shrink with "
            f"--steps <= {SMOKE_STEPS})"
        )
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ValueError(f"experiment {name}: the output {out_dir!r} is a file, expected a directory")
    done = [f for f in result_files(name, out_dir) if os.path.exists(f)]
    if done and not overwrite:
        raise ValueError(
            f"experiment {name}: {done[0]!r} already holds a result; replace it with --overwrite "
            "or choose another --out"
        )


def run_experiment(
    name: str,
    out_dir: str,
    steps: int | None = None,
    progress: bool = True,
    overwrite: bool = False,
    tiny: bool = False,
    reference=None,
) -> dict:
    """Run one experiment by name into `out_dir`; see check_experiment for what is refused.

    tiny, reference (curvature only): a model and run small enough for CI, in seconds; another
    framework's Hessian-vector products to repeat each measurement with (exp_curvature).
    """
    check_experiment(name, out_dir, steps, overwrite, tiny)
    os.makedirs(out_dir, exist_ok=True)
    if name == "curvature":
        default = CURVATURE_SIZES["tiny"]["steps"] if tiny else DEFAULT_STEPS[name]
        return exp_curvature(out_dir, default if steps is None else steps, progress, tiny=tiny, reference=reference)
    if name == "memory":
        return exp_memory(out_dir, 0, progress, tiny=tiny)
    return EXPERIMENTS[name](out_dir, DEFAULT_STEPS[name] if steps is None else steps, progress)
