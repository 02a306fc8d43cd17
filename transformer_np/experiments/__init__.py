"""Small studies of the Transformer, reproducible: `python -m transformer_np experiment NAME --out DIR`.

    heads       number of attention heads 1..16 (D fixed at 64): quality, parameters, time
    layers      encoder/decoder depth 1..6: train and held-out loss, parameters, time
    positional  sinusoidal vs learned positions, tested on sequences longer than trained on
    beam        beam size 1..20 against exact match, model score and decoding time
    residual    gradient norm at the input of a deep stack with/without residuals and LayerNorm
    curvature   top eigenvalue of the loss Hessian over training, post-norm and pre-norm side by side
    memory      where a training step's memory goes node by node; cut by checkpointing and tiled attention

Each writes its own `NAME.md` (a Markdown table), `NAME.json` and `NAME.png` into its output
directory, so several experiments share one directory; an existing result of the same
experiment is refused unless overwrite=True. Each returns {"rows", "markdown", "files"}.
Defaults are sized for a 2-core machine: every experiment takes a few minutes at most
(heads/layers/positional/beam train several small models for DEFAULT_STEPS[name] steps each;
residual trains nothing; curvature trains the copy-reverse preset twice, the longest; their times:
docs/decisions/028-demo-and-experiment-lengths.md).
`--steps` overrides the step count (tests use a handful of steps: the numbers are then meaningless,
only the plumbing is checked; with --steps <= SMOKE_STEPS every held-out set also shrinks to 16
examples so a smoke run takes seconds; curvature also has `tiny=True`, a tiny model). Except for
curvature, the models are deliberately small (D=64, 2+2 layers, no dropout) so that the
comparison, not the absolute quality, is what the few hundred steps show.
A model whose loss or gradient norm becomes NaN or infinite stops the experiment with NonFiniteError
(train_step), before any result file is written: a table never reports a diverged model's numbers.

One module per experiment (heads.py ... curvature.py, each with its `exp_NAME(out_dir, steps, progress)`),
beside the shared ones: recipe.py (the small model and recipe the training experiments vary, training and
scoring one), results.py (the result files and the Markdown table), spectrum.py (power iteration, for
curvature) and registry.py (EXPERIMENTS by name, check_experiment, run_experiment). The names below are
this package's public surface (the command line, parity/curvature.py, the tests and the notebooks use them).
"""

from __future__ import annotations

from .beam import BEAM_SIZES, exp_beam
from .curvature import CURVATURE_SIZES, exp_curvature, loss_hvp
from .heads import exp_heads
from .layers import exp_layers
from .memory import MEMORY_LENGTHS, exp_memory
from .positional import TEST_BUCKETS, TRAIN_LENGTHS, exp_positional
from .recipe import BASE_MODEL, BASE_TRAIN, SMOKE_EVAL, SMOKE_STEPS
from .registry import DEFAULT_STEPS, EXPERIMENTS, check_experiment, run_experiment
from .residual import RESIDUAL_DEPTHS, RESIDUAL_VARIANTS, exp_residual
from .results import markdown_table, result_files
from .spectrum import POWER_TOL, power_iteration, top_eigenvalue

__all__ = [
    "BASE_MODEL",
    "BASE_TRAIN",
    "BEAM_SIZES",
    "CURVATURE_SIZES",
    "DEFAULT_STEPS",
    "EXPERIMENTS",
    "MEMORY_LENGTHS",
    "POWER_TOL",
    "RESIDUAL_DEPTHS",
    "RESIDUAL_VARIANTS",
    "SMOKE_EVAL",
    "SMOKE_STEPS",
    "TEST_BUCKETS",
    "TRAIN_LENGTHS",
    "check_experiment",
    "exp_beam",
    "exp_curvature",
    "exp_heads",
    "exp_layers",
    "exp_memory",
    "exp_positional",
    "exp_residual",
    "loss_hvp",
    "markdown_table",
    "power_iteration",
    "result_files",
    "run_experiment",
    "top_eigenvalue",
]
