"""Sharpness over training: the top eigenvalue of the loss Hessian, post-norm and pre-norm side by side.

The eigenvalue comes from power iteration (spectrum.py) on Hessian-vector products by double backward
(transformer_np/hessian.py); parity/curvature.py repeats each measurement on the PyTorch twin.
"""

from __future__ import annotations

import os

import numpy as np

import minitensor as mt

from .. import plots
from ..data import collate, get_task, iterate_forever
from ..hessian import hessian_vector_products
from ..loss import compute_loss
from ..progress import progress as progress_bar
from ..training import build_model, build_optimizer, build_scheduler, default_configs, train_step
from .recipe import SMOKE_STEPS
from .results import write_result
from .spectrum import POWER_TOL, dot, top_eigenvalue

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


def loss_hvp(model, src: np.ndarray, tgt: np.ndarray, label_smoothing: float):
    """(loss, gradient arrays, v -> H v on lists of arrays) for the teacher-forced loss of `model` on one batch.

    parity/curvature.py's torch_hvp is the same on the PyTorch twin; both go through hessian_vector_products.
    """
    loss = compute_loss(model, src, tgt, label_smoothing)[0]
    grads, hvp = hessian_vector_products(mt.autograd.grad, loss, list(model.parameters()))
    return (
        loss.item(),
        [g.detach().numpy() for g in grads],
        lambda vs: [h.detach().numpy() for h in hvp([mt.tensor(v) for v in vs])],
    )


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
        "grad_norm": float(np.sqrt(dot(grads, grads))),
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
    return write_result(
        out_dir,
        "curvature",
        "Curvature of the loss over training: post-norm vs pre-norm",
        note,
        rows,
        columns,
        [fig],
        meta,
    )
