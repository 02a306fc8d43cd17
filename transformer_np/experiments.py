"""Small studies of the Transformer, reproducible: `python -m transformer_np experiment NAME --out DIR`.

    heads       number of attention heads 1..16 (D fixed at 64): quality, parameters, time
    layers      encoder/decoder depth 1..6: train and held-out loss, parameters, time
    positional  sinusoidal vs learned positions, tested on sequences longer than trained on
    beam        beam size 1..20 against exact match, model score and decoding time
    residual    gradient norm at the input of a deep stack with/without residuals and LayerNorm
    curvature   top eigenvalue of the loss Hessian over training, post-norm and pre-norm side by side

Each writes its own `NAME.md` (a Markdown table), `NAME.json` and `NAME.png` into its output
directory, so several experiments share one directory; an existing result of the same
experiment is refused unless overwrite=True. Each returns {"rows", "markdown", "files"}.
Defaults are sized for a 2-core machine: every experiment takes a few minutes at most
(heads/layers/positional/beam train several small models for DEFAULT_STEPS[name] steps each;
residual trains nothing; curvature trains the copy-reverse preset twice and takes about ten minutes).
`--steps` overrides the step count (tests use a handful of steps: the numbers are then meaningless,
only the plumbing is checked; with --steps <= SMOKE_STEPS every held-out set also shrinks to 16
examples so a smoke run takes seconds; curvature also has `tiny=True`, a tiny model). Except for
curvature, the models are deliberately small (D=64, 2+2 layers, no dropout) so that the
comparison, not the absolute quality, is what the few hundred steps show.
A model whose loss or gradient norm becomes NaN or infinite stops the experiment with NonFiniteError
(train_step), before any result file is written: a table never reports a diverged model's numbers.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

import minitensor as mt
from minitensor.serialization import atomic_write

from . import plots
from .config import ModelConfig, TrainConfig
from .data import BOS_ID, EOS_ID, collate, get_task, iterate_forever, make_batches
from .progress import progress as progress_bar
from .training import (
    build_model,
    build_optimizer,
    build_scheduler,
    config_for_task,
    default_configs,
    evaluate,
    fit,
    train_step,
)
from .training import (
    strip_decoded as _strip,
)

DEFAULT_STEPS = {"heads": 300, "layers": 300, "positional": 500, "beam": 400, "residual": 0, "curvature": 1000}
SMOKE_STEPS = 10  # at or below this many steps, held-out sets shrink to SMOKE_EVAL examples
SMOKE_EVAL = 16

# The small model every training experiment varies one field of.
BASE_MODEL = dict(
    d_model=64, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=128, dropout=0.0, max_len=64
)
# StepLR from 2e-3, halved every quarter of the run (no warmup: these models are 2 layers deep),
# the recipe that converged fastest in the acceptance tuning (tests/test_training_slow.py).
BASE_TRAIN = dict(
    task="copy-reverse",
    batch_size=32,
    lr=2e-3,
    schedule="step",
    gamma=0.5,
    label_smoothing=0.0,
    clip_grad_norm=1.0,
    train_size=20000,
    eval_size=200,
    seed=0,
)


def _eval_size(steps: int, default: int) -> int:
    return SMOKE_EVAL if steps <= SMOKE_STEPS else default


def _configs(task_name: str = "copy-reverse", steps: int = 1000, **model_changes):
    task = get_task(task_name)
    model_cfg = config_for_task(
        ModelConfig(src_vocab_size=1, tgt_vocab_size=1, **{**BASE_MODEL, **model_changes}), task
    )
    train_cfg = TrainConfig(
        **{
            **BASE_TRAIN,
            "task": task_name,
            "steps": steps,
            "step_size": max(1, steps // 4),
            "eval_size": _eval_size(steps, BASE_TRAIN["eval_size"]),
        }
    )
    return task, model_cfg, train_cfg


def _num_params(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    """A GitHub Markdown table of `rows` (dicts) restricted to `columns`; floats get 4 significant digits."""

    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def _write(
    out_dir: str, name: str, title: str, note: str, rows: list[dict], columns: list[str], figures: list[str], meta: dict
) -> dict:
    md = f"## {title}\n\n{note}\n\n{markdown_table(rows, columns)}\n"
    md_path, json_path, _ = result_files(name, out_dir)
    with atomic_write(md_path) as f:
        f.write(md)
    with atomic_write(json_path) as f:
        json.dump({"experiment": name, "rows": rows, **meta}, f, indent=1)
    return {"rows": rows, "markdown": md, "files": [md_path, json_path] + figures}


def _train_and_score(task, model_cfg, train_cfg, steps, progress, desc) -> tuple[object, dict]:
    train_pairs, held = task.splits(train_cfg.train_size, train_cfg.eval_size, train_cfg.seed)
    model, losses, wall = fit(model_cfg, train_cfg, train_pairs, steps, progress, desc)
    m = evaluate(model, held, label_smoothing=0.0)
    tail = losses[-max(1, len(losses) // 10) :]
    return model, {
        "params": _num_params(model),
        "train_s": wall,
        "train_loss": float(np.mean(tail)) if tail else float("nan"),
        "heldout_loss": m["loss"],
        "token_acc": m["token_acc"],
        "exact_acc": m["exact_acc"],
    }


# ----------------------------------------------------------------------------------------------
def exp_heads(out_dir: str, steps: int, progress: bool = True) -> dict:
    """Same model (D=64), H in 1, 2, 4, 8, 16: does splitting the width into more heads help?"""
    rows = []
    for H in (1, 2, 4, 8, 16):
        task, model_cfg, train_cfg = _configs(steps=steps, num_heads=H)
        _, r = _train_and_score(task, model_cfg, train_cfg, steps, progress, f"heads={H}")
        rows.append({"heads": H, "head_dim": model_cfg.d_model // H, **r})
    x = [r["heads"] for r in rows]
    fig = plots.plot_lines(
        x,
        {
            "held-out exact match": [r["exact_acc"] for r in rows],
            "held-out token accuracy": [r["token_acc"] for r in rows],
        },
        os.path.join(out_dir, "heads.png"),
        "attention heads (D = 64 fixed)",
        "accuracy",
        f"copy-reverse after {steps} steps: effect of the head count",
        logx=True,
    )
    note = (
        f"copy-reverse, D=64, 2+2 layers, d_ff=128, {steps} steps of batch 32 per model; the parameter count "
        "does not depend on H (the projections stay D x D), only the split of the width does."
    )
    return _write(
        out_dir,
        "heads",
        "Number of attention heads",
        note,
        rows,
        ["heads", "head_dim", "params", "train_s", "train_loss", "heldout_loss", "token_acc", "exact_acc"],
        [fig],
        {"steps": steps, "model": BASE_MODEL},
    )


def exp_layers(out_dir: str, steps: int, progress: bool = True) -> dict:
    """N = 1..6 encoder and decoder layers at D=64: loss, parameters and training time."""
    rows = []
    for N in range(1, 7):
        task, model_cfg, train_cfg = _configs(steps=steps, num_encoder_layers=N, num_decoder_layers=N)
        _, r = _train_and_score(task, model_cfg, train_cfg, steps, progress, f"layers={N}")
        rows.append({"layers": N, **r})
    x = [r["layers"] for r in rows]
    fig = plots.plot_lines(
        x,
        {
            "train loss (last 10% of steps)": [r["train_loss"] for r in rows],
            "held-out loss": [r["heldout_loss"] for r in rows],
        },
        os.path.join(out_dir, "layers.png"),
        "encoder = decoder layers",
        "cross-entropy",
        f"copy-reverse after {steps} steps: effect of depth",
    )
    note = f"copy-reverse, D=64, 4 heads, d_ff=128, post-norm, {steps} steps of batch 32 per model."
    return _write(
        out_dir,
        "layers",
        "Number of layers",
        note,
        rows,
        ["layers", "params", "train_s", "train_loss", "heldout_loss", "token_acc", "exact_acc"],
        [fig],
        {"steps": steps, "model": BASE_MODEL},
    )


def _reverse_pairs(rng: np.random.Generator, n: int, lo: int, hi: int) -> list:
    """Reversal pairs with lengths lo..hi over the 16-symbol alphabet (ids 4..19)."""
    pairs = []
    for _ in range(n):
        s = (rng.integers(0, 16, size=int(rng.integers(lo, hi + 1))) + 4).tolist()
        pairs.append(([BOS_ID] + s + [EOS_ID], [BOS_ID] + s[::-1] + [EOS_ID]))
    return pairs


TRAIN_LENGTHS = (3, 10)
TEST_BUCKETS = ((3, 10), (11, 14), (15, 20))


def exp_positional(out_dir: str, steps: int, progress: bool = True) -> dict:
    """Sinusoidal vs learned positions on reversal, trained on lengths 3-10, tested up to length 20.

    A learned table has never updated the rows past the longest training position (12 with
    <bos>/<eos>), so it cannot place those tokens; the sinusoid is defined everywhere, though
    the model has not learned to use the unseen phases either.
    """
    rng = np.random.default_rng(0)
    train_pairs = _reverse_pairs(rng, BASE_TRAIN["train_size"], *TRAIN_LENGTHS)
    tests = {f"{lo}-{hi}": _reverse_pairs(rng, _eval_size(steps, 100), lo, hi) for lo, hi in TEST_BUCKETS}
    rows = []
    for positional in ("sinusoidal", "learned"):
        task, model_cfg, train_cfg = _configs("reverse", steps, positional=positional)
        model, losses, wall = fit(model_cfg, train_cfg, train_pairs, steps, progress, positional)
        row = {
            "positional": positional,
            "params": _num_params(model),
            "train_s": wall,
            "train_loss": float(np.mean(losses[-max(1, len(losses) // 10) :])) if losses else float("nan"),
        }
        for name, pairs in tests.items():
            m = evaluate(model, pairs, label_smoothing=0.0, max_new_tokens=min(24, model_cfg.max_len))
            row[f"exact_{name}"] = m["exact_acc"]
            row[f"token_acc_{name}"] = m["token_acc"]
        rows.append(row)
    buckets = [
        f"lengths {lo}-{hi}" + (" (trained)" if (lo, hi) == TRAIN_LENGTHS else " (longer)") for lo, hi in TEST_BUCKETS
    ]
    series = {f"{r['positional']} positions": [r[f"exact_{lo}-{hi}"] for lo, hi in TEST_BUCKETS] for r in rows}
    fig = plots.plot_lines(
        buckets,
        series,
        os.path.join(out_dir, "positional.png"),
        "test sequences, by source length",
        "held-out exact match",
        f"reversal trained on lengths {TRAIN_LENGTHS[0]}-{TRAIN_LENGTHS[1]}, {steps} steps: length generalisation",
    )
    cols = (
        ["positional", "params", "train_s", "train_loss"]
        + [f"exact_{lo}-{hi}" for lo, hi in TEST_BUCKETS]
        + [f"token_acc_{lo}-{hi}" for lo, hi in TEST_BUCKETS]
    )
    note = (
        f"reverse task, trained on lengths {TRAIN_LENGTHS[0]}-{TRAIN_LENGTHS[1]} for {steps} steps; 100 test "
        "sequences per length bucket. Lengths 11+ never occur in training."
    )
    return _write(
        out_dir,
        "positional",
        "Sinusoidal vs learned positional encoding",
        note,
        rows,
        cols,
        [fig],
        {"steps": steps, "train_lengths": TRAIN_LENGTHS, "test_buckets": TEST_BUCKETS},
    )


BEAM_SIZES = (1, 2, 3, 5, 10, 20)


def exp_beam(out_dir: str, steps: int, progress: bool = True) -> dict:
    """One copy-reverse model, decoded with beam sizes 1..20: exact match, mean score and time.

    The model is trained briefly on purpose: a perfect model makes every beam size agree.
    """
    from .decode import beam_search, greedy_decode

    task, model_cfg, train_cfg = _configs(steps=steps)
    train_pairs, held = task.splits(train_cfg.train_size, _eval_size(steps, 100), train_cfg.seed)
    model, _, wall = fit(model_cfg, train_cfg, train_pairs, steps, progress, "beam model")
    src = make_batches(held, len(held))[0][0]
    targets = [_strip(t) for _, t in held]
    max_len = min(task.max_tgt_len + 4, model_cfg.max_len)
    rows = []
    t0 = time.perf_counter()
    greedy = greedy_decode(model, mt.tensor(src), max_len=max_len)
    greedy_s = time.perf_counter() - t0
    greedy_acc = float(np.mean([_strip(g) == t for g, t in zip(greedy, targets)]))
    for K in BEAM_SIZES:
        t0 = time.perf_counter()
        hyps = beam_search(model, mt.tensor(src), beam_size=K, max_len=max_len, length_penalty=0.6, n_best=1)
        dt = time.perf_counter() - t0
        best = [h[0] for h in hyps]
        acc = float(np.mean([_strip(ids) == t for (ids, _), t in zip(best, targets)]))
        rows.append(
            {
                "beam": K,
                "exact_acc": acc,
                "mean_score": float(np.mean([s for _, s in best])),
                "ms_per_sentence": 1000 * dt / len(held),
            }
        )
    fig = plots.plot_lines(
        [r["beam"] for r in rows],
        {"held-out exact match": [r["exact_acc"] for r in rows]},
        os.path.join(out_dir, "beam.png"),
        "beam size",
        "exact match",
        f"copy-reverse model after {steps} steps: beam size vs quality and speed",
        logx=True,
        lower={"decode time per sentence": [r["ms_per_sentence"] for r in rows]},
        lower_ylabel="milliseconds per sentence",
    )
    note = (
        f"copy-reverse, one model trained {steps} steps ({wall:.0f} s); {len(held)} held-out sequences decoded "
        f"as one batch; GNMT length penalty 0.6. Greedy decoding (cached): exact match {greedy_acc:.3f}, "
        f"{1000 * greedy_s / len(held):.2f} ms per sentence. mean_score = mean of log P / lp(length)."
    )
    return _write(
        out_dir,
        "beam",
        "Beam size vs quality and speed",
        note,
        rows,
        ["beam", "exact_acc", "mean_score", "ms_per_sentence"],
        [fig],
        {"steps": steps, "greedy_exact_acc": greedy_acc, "greedy_ms_per_sentence": 1000 * greedy_s / len(held)},
    )


RESIDUAL_VARIANTS = ("plain", "layernorm", "residual", "residual+post-norm", "residual+pre-norm")
RESIDUAL_DEPTHS = (1, 2, 4, 8, 16, 32)


class _Stack(mt.nn.Module):
    """`depth` blocks of Linear(D, D) + ReLU, wired as one of RESIDUAL_VARIANTS."""

    def __init__(self, d: int, depth: int, variant: str):
        super().__init__()
        self.variant = variant
        self.layers = mt.nn.ModuleList([mt.nn.Linear(d, d) for _ in range(depth)])
        self.norms = mt.nn.ModuleList([mt.nn.LayerNorm(d) for _ in range(depth)])

    def forward(self, x):
        for f, norm in zip(self.layers, self.norms):
            if self.variant == "plain":
                x = f(x).relu()
            elif self.variant == "layernorm":
                x = norm(f(x).relu())
            elif self.variant == "residual":
                x = x + f(x).relu()
            elif self.variant == "residual+post-norm":
                x = norm(x + f(x).relu())  # the paper: LayerNorm(x + Sublayer(x))
            else:
                x = x + f(norm(x)).relu()  # pre-norm: x + Sublayer(LayerNorm(x))
        return x


def exp_residual(out_dir: str, steps: int = 0, progress: bool = True, d: int = 256, repeats: int = 3) -> dict:
    """||dL/dx|| at the input of Linear+ReLU stacks of depth 1..32, five wirings, at initialisation.

    L = sum(out * G) with a random upstream gradient G (never all ones: that hides structure);
    each number is the mean over `repeats` seeds. `steps` is unused (nothing is trained).
    """
    rows = []
    for variant in RESIDUAL_VARIANTS:
        row = {"variant": variant}
        for depth in RESIDUAL_DEPTHS:
            norms = []
            for r in range(repeats):
                mt.manual_seed(1000 * r + depth)
                net = _Stack(d, depth, variant)
                x = mt.randn(16, d, requires_grad=True)
                out = net(x)
                g = mt.randn(*out.shape)
                (out * g).sum().backward()
                norms.append(float(np.linalg.norm(x.grad.data)))
            row[f"depth_{depth}"] = float(np.mean(norms))
        rows.append(row)
    fig = plots.plot_lines(
        list(RESIDUAL_DEPTHS),
        {r["variant"]: [r[f"depth_{k}"] for k in RESIDUAL_DEPTHS] for r in rows},
        os.path.join(out_dir, "residual.png"),
        "number of blocks (Linear + ReLU)",
        "||dL/dx|| at the input",
        "Gradient reaching the input of a deep stack",
        logx=True,
        logy=True,
    )
    note = (
        f"Blocks of Linear({d}, {d}) + ReLU at initialisation (PyTorch's default Linear init), batch 16, a random "
        f"upstream gradient; mean of {repeats} seeds. What the default run shows: the plain stack's gradient "
        "shrinks geometrically with depth (about 1e-11 at 32 blocks); LayerNorm alone rescales every block and "
        "lets it grow instead; a residual alone keeps it from vanishing but lets it grow with depth; residual "
        "plus LayerNorm (post- or pre-norm, the two Transformer wirings) keeps it within a small factor."
    )
    return _write(
        out_dir,
        "residual",
        "Residual connections and LayerNorm: gradient at the input",
        note,
        rows,
        ["variant"] + [f"depth_{k}" for k in RESIDUAL_DEPTHS],
        [fig],
        {"d": d, "repeats": repeats, "depths": RESIDUAL_DEPTHS},
    )


# ----------------------------------------------------------------------------------------------
# Curvature: the top eigenvalue of the loss Hessian, by power iteration on Hessian-vector products
# ----------------------------------------------------------------------------------------------
# full: the copy-reverse preset (3+3 layers, d_model 128, 8 heads, d_ff 512) and its recipe (the paper's
# warmup schedule with 400 warmup steps, label smoothing 0.1, clipping 1.0) for DEFAULT_STEPS["curvature"]
# steps, dropout off so that the loss is a function of the weights alone. tiny: a model small enough for
# CI, the same code path.
CURVATURE_SIZES = {
    "full": dict(model=dict(dropout=0.0), points=11, iterations=40, batch_size=32, train_size=20000),
    "tiny": dict(
        model=dict(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32, dropout=0.0),
        points=3,
        iterations=4,
        batch_size=4,
        train_size=200,
        steps=4,
    ),
}
POWER_TOL = 1e-3  # stop when the eigenvalue estimate changes by less than this, relatively


def _dot(a: list, b: list) -> float:
    return float(sum(np.vdot(x, y) for x, y in zip(a, b)))


def power_iteration(hvp, v0: list, iterations: int, tol: float = POWER_TOL) -> dict:
    """The eigenvalue of largest magnitude of a symmetric H given as v -> H v (lists of arrays).

    Each iteration: v unit, lambda = v . H v (the Rayleigh quotient), residual = ||H v - lambda v|| / |lambda|
    (0 for an exact eigenvector), then v <- H v / ||H v||. Stops when lambda changes by less than tol
    relatively, or after `iterations`. Returns the estimate, its last unit vector (to warm-start the
    next measurement), the number of iterations and the per-iteration history.
    """
    norm = np.sqrt(_dot(v0, v0))
    v = [x / norm for x in v0]
    history, lam = [], None
    for _ in range(iterations):
        hv = hvp(v)
        new = _dot(v, hv)
        error = [h - new * x for h, x in zip(hv, v)]  # H v - lambda v
        residual = float(np.sqrt(_dot(error, error))) / max(abs(new), 1e-300)
        history.append({"eigenvalue": new, "residual": residual})
        converged = lam is not None and abs(new - lam) <= tol * abs(new)
        lam = new
        if converged:
            break
        hv_norm = np.sqrt(_dot(hv, hv))
        v = [h / hv_norm for h in hv]
    return {
        "eigenvalue": lam,
        "vector": v,
        "iterations": len(history),
        "residual": history[-1]["residual"],
        "history": history,
    }


def loss_hvp(model, src: np.ndarray, tgt: np.ndarray, label_smoothing: float):
    """(loss, gradient arrays, v -> H v) for the teacher-forced loss of `model` on one batch.

    The gradient is computed once with create_graph=True; each H v then differentiates <gradient, v>
    through that recorded backward pass (retain_graph keeps it for the next v).
    """
    from .loss import compute_loss

    params = list(model.parameters())
    loss = compute_loss(model, src, tgt, label_smoothing)[0]
    grads = mt.autograd.grad(loss, params, create_graph=True)

    def hvp(vs: list) -> list:
        directional = sum((g * mt.tensor(v)).sum() for g, v in zip(grads, vs))  # <gradient, v>
        return [h.data for h in mt.autograd.grad(directional, params, retain_graph=True)]

    return loss.item(), [g.data for g in grads], hvp


def top_eigenvalue(hvp, v0: list, iterations: int, tol: float = POWER_TOL, counts: tuple | None = None) -> dict:
    """The largest (most positive) eigenvalue of a symmetric H given as v -> H v: the sharpness.

    Power iteration finds the eigenvalue of largest magnitude. When that one is negative (negative
    curvature dominates), a second power iteration on H - s I, s that negative eigenvalue, finds
    lambda_max - s, the largest eigenvalue of a matrix whose spectrum [0, lambda_max - s] is
    non-negative; lambda_max follows. `counts` forces the iterations of each phase (a reference run
    repeating another one). Returns power_iteration's dict for lambda_max (residual ||Hv - lambda v|| /
    |lambda|), with `negative` (the dominant negative eigenvalue, or None) and `phases` (iterations each).
    """
    first = power_iteration(hvp, v0, counts[0] if counts else iterations, 0.0 if counts else tol)
    if first["eigenvalue"] >= 0:
        return {**first, "negative": None, "phases": (first["iterations"],)}
    shift = first["eigenvalue"]
    shifted_hvp = lambda v: [h - shift * x for h, x in zip(hvp(v), v)]
    top = power_iteration(shifted_hvp, v0, counts[1] if counts else iterations, 0.0 if counts else tol)
    lam = top["eigenvalue"] + shift
    # the residual of (H - sI) v = mu v is the residual of H v = (mu + s) v: rescale it to |lambda|
    return {
        **top,
        "eigenvalue": lam,
        "residual": top["residual"] * abs(top["eigenvalue"]) / max(abs(lam), 1e-300),
        "iterations": first["iterations"] + top["iterations"],
        "negative": shift,
        "phases": (first["iterations"], top["iterations"]),
    }


def _measure(model, cfg, src, tgt, smoothing, v0, iterations, reference=None) -> tuple[dict, list]:
    """One row's figures for one norm placement: the top eigenvalue with its convergence, the batch's
    loss and gradient norm; with `reference`, the same iterations on another framework's H v."""
    loss, grads, hvp = loss_hvp(model, src, tgt, smoothing)
    top = top_eigenvalue(hvp, v0, iterations)
    row = {
        "eigenvalue": top["eigenvalue"],
        "iterations": top["iterations"],
        "residual": top["residual"],
        "negative": top["negative"],
        "grad_norm": float(np.sqrt(_dot(grads, grads))),
        "loss": loss,
        "history": top["history"],
    }
    if reference is not None:
        ref = top_eigenvalue(reference(model, cfg, src, tgt, smoothing), v0, iterations, counts=top["phases"])
        row["reference_eigenvalue"] = ref["eigenvalue"]
    return row, top["vector"]


def exp_curvature(out_dir: str, steps: int, progress: bool = True, tiny: bool = False, reference=None) -> dict:
    """Sharpness over training: the top Hessian eigenvalue of the copy-reverse loss, post-norm vs pre-norm.

    Both placements train from the same seed on the same batches. At `points` evenly spaced steps
    (step 0 included) the top eigenvalue of the loss Hessian on one fixed held-out batch is found by
    power iteration on Hessian-vector products (double backward), warm-started from the previous
    measurement's eigenvector; the learning rate and the gradient norm sit beside it. `reference`
    (parity/curvature.py): (model, its config, src, tgt, label smoothing) -> another framework's v -> H v,
    run for as many iterations from the same start.
    """
    size = CURVATURE_SIZES["tiny" if tiny else "full"]
    if steps <= SMOKE_STEPS:  # a smoke run (tests): the tiny size's batch and iteration counts
        smoke = ("points", "iterations", "batch_size", "train_size")
        size = {**size, **{k: CURVATURE_SIZES["tiny"][k] for k in smoke}}
    task = get_task("copy-reverse")
    model_cfg, train_cfg = default_configs("copy-reverse")
    model_cfg = model_cfg.replace(**size["model"])
    train_cfg = train_cfg.replace(
        steps=steps, batch_size=size["batch_size"], train_size=size["train_size"], eval_size=size["batch_size"]
    )
    train_pairs, held = task.splits(train_cfg.train_size, train_cfg.eval_size, train_cfg.seed)
    src, tgt = collate(held)
    at = sorted({int(round(x)) for x in np.linspace(0, steps, size["points"])})
    placements = {"post-norm": False, "pre-norm": True}
    runs = {}
    for label, norm_first in placements.items():
        cfg = model_cfg.replace(norm_first=norm_first)
        model = build_model(cfg, train_cfg.seed)
        optimizer, params = build_optimizer(model, train_cfg), list(model.parameters())
        scheduler = build_scheduler(optimizer, cfg, train_cfg)
        batches = iterate_forever(train_pairs, train_cfg.batch_size, train_cfg.seed)
        rng = np.random.default_rng(train_cfg.seed + 7)
        v = [rng.standard_normal(p.shape).astype(p.dtype) for p in params]
        run = {"lr": [], "grad_norm": [], "loss": [], "points": []}
        bar = range(steps + 1)
        if progress:
            bar = progress_bar(bar, desc=f"curvature {label}", leave=False)
        for step in bar:
            if step in at:
                point, v = _measure(model, cfg, src, tgt, train_cfg.label_smoothing, v, size["iterations"], reference)
                run["points"].append({"step": step, "lr": optimizer.param_groups[0]["lr"], **point})
            if step < steps:
                run["lr"].append(optimizer.param_groups[0]["lr"])
                _, _, (s, t) = next(batches)
                loss, norm, _, _ = train_step(model, optimizer, scheduler, params, s, t, train_cfg, step=step + 1)
                run["loss"].append(loss)
                run["grad_norm"].append(norm)
        runs[label] = run
    rows = []
    for i, step in enumerate(at):
        row = {"step": step, "lr": runs["post-norm"]["points"][i]["lr"]}
        for label, run in runs.items():
            p = run["points"][i]
            row.update(
                {
                    f"{label} top eig": p["eigenvalue"],
                    f"{label} iters": p["iterations"],
                    f"{label} residual": p["residual"],
                    f"{label} grad norm": p["grad_norm"],
                    f"{label} neg eig": "" if p["negative"] is None else p["negative"],
                }
            )
            if reference is not None:
                row[f"{label} torch eig"] = p["reference_eigenvalue"]
        rows.append(row)
    fig = plots.plot_curvature(
        at,
        {label: [p["eigenvalue"] for p in run["points"]] for label, run in runs.items()},
        {label: run["lr"] for label, run in runs.items()},
        {label: run["grad_norm"] for label, run in runs.items()},
        {label: [h["residual"] for h in run["points"][-1]["history"]] for label, run in runs.items()},
        os.path.join(out_dir, "curvature.png"),
        f"copy-reverse ({model_cfg.num_encoder_layers}+{model_cfg.num_decoder_layers} layers, d_model "
        f"{model_cfg.d_model}), {steps} steps: sharpness of the loss",
    )
    columns = ["step", "lr"] + [
        f"{label} {c}" for label in placements for c in ("top eig", "iters", "residual", "neg eig", "grad norm")
    ]
    if reference is not None:
        columns += [f"{label} torch eig" for label in placements]
    note = (
        f"copy-reverse, {model_cfg.num_encoder_layers}+{model_cfg.num_decoder_layers} layers, d_model "
        f"{model_cfg.d_model}, {model_cfg.num_heads} heads, d_ff {model_cfg.d_ff}, dropout 0; {steps} steps of "
        f"batch {train_cfg.batch_size} with the preset's recipe ({train_cfg.schedule} schedule, "
        f"{train_cfg.warmup_steps} warmup steps, label smoothing {train_cfg.label_smoothing}, clipping "
        f"{train_cfg.clip_grad_norm}); both placements from the same seed and batches. 'top eig': the largest "
        f"eigenvalue of the Hessian of the training loss on one fixed held-out batch of {len(held)}, by power "
        f"iteration on Hessian-vector products (double backward), warm-started from the previous step's "
        f"eigenvector; 'neg eig': when the eigenvalue of largest magnitude is negative (power iteration finds "
        f"that one first), its value; the top one then comes from a second power iteration on H - neg I. "
        f"'iters': iterations in all, each phase stopping when its estimate changes by < {POWER_TOL:g} (at "
        f"most {size['iterations']} each); 'residual': ||Hv - lambda v|| / |lambda| at the last one (0 for an "
        f"exact eigenvector; the eigenvalue converges faster than the vector). 'grad norm': the gradient norm "
        f"on that batch; 'lr': the rate of the next step."
    )
    if reference is not None:
        note += (
            " 'torch eig': the top eigenvalue by the same iterations from the same start on PyTorch's H v "
            "(parity/curvature.py)."
        )
    meta = {
        "steps": steps,
        "tiny": tiny,
        "model": model_cfg.to_dict(),
        "placements": placements,
        "train": train_cfg.to_dict(),
        "measured_at": at,
        "power_tol": POWER_TOL,
        "runs": runs,
    }
    return _write(
        out_dir,
        "curvature",
        "Curvature of the loss over training: post-norm vs pre-norm",
        note,
        rows,
        columns,
        [fig],
        meta,
    )


EXPERIMENTS = {
    "heads": exp_heads,
    "layers": exp_layers,
    "positional": exp_positional,
    "beam": exp_beam,
    "residual": exp_residual,
    "curvature": exp_curvature,
}


def result_files(name: str, out_dir: str) -> list[str]:
    """The files experiment `name` writes: NAME.md, NAME.json, NAME.png."""
    return [os.path.join(out_dir, f"{name}.{ext}") for ext in ("md", "json", "png")]


def check_experiment(
    name: str, out_dir: str, steps: int | None = None, overwrite: bool = False, tiny: bool = False
) -> None:
    """Refuse, before any work, an unknown name, a bad step count, or a result that would be overwritten."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}: expected one of {sorted(EXPERIMENTS)} (or 'all')")
    if steps is not None and steps < 1 and name != "residual":
        raise ValueError(f"experiment {name}: --steps must be >= 1, got {steps}")
    if tiny and name != "curvature":
        raise ValueError(
            f"experiment {name}: --tiny is only for the curvature experiment (the others shrink with "
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
    return EXPERIMENTS[name](out_dir, DEFAULT_STEPS[name] if steps is None else steps, progress)
