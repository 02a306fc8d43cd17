"""The beam size, 1..20, against exact match, mean model score and decoding time, on one briefly trained model."""

from __future__ import annotations

import os
import time

import numpy as np

import minitensor as mt

from .. import plots
from ..data import make_batches
from ..decode import beam_search, greedy_decode
from ..training import fit, strip_decoded
from .recipe import eval_size, small_configs
from .results import write_result

BEAM_SIZES = (1, 2, 3, 5, 10, 20)


def exp_beam(out_dir: str, steps: int, progress: bool = True) -> dict:
    """One copy-reverse model, decoded with beam sizes 1..20: exact match, mean score and time.

    The model is trained briefly on purpose: a perfect model makes every beam size agree.
    """
    task, model_cfg, train_cfg = small_configs(steps=steps)
    train_pairs, held = task.splits(train_cfg.train_size, eval_size(steps, 100), train_cfg.seed)
    model, _, wall = fit(model_cfg, train_cfg, train_pairs, steps, progress, "beam model")
    src = make_batches(held, len(held))[0][0]
    targets = [strip_decoded(t) for _, t in held]
    max_len = min(task.max_tgt_len + 4, model_cfg.max_len)
    rows = []
    t0 = time.perf_counter()
    greedy = greedy_decode(model, mt.tensor(src), max_len=max_len)
    greedy_s = time.perf_counter() - t0
    greedy_acc = float(np.mean([strip_decoded(g) == t for g, t in zip(greedy, targets)]))
    for K in BEAM_SIZES:
        t0 = time.perf_counter()
        hyps = beam_search(model, mt.tensor(src), beam_size=K, max_len=max_len, length_penalty=0.6, n_best=1)
        dt = time.perf_counter() - t0
        best = [h[0] for h in hyps]
        acc = float(np.mean([strip_decoded(ids) == t for (ids, _), t in zip(best, targets)]))
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
    return write_result(
        out_dir,
        "beam",
        "Beam size vs quality and speed",
        note,
        rows,
        ["beam", "exact_acc", "mean_score", "ms_per_sentence"],
        [fig],
        {"steps": steps, "greedy_exact_acc": greedy_acc, "greedy_ms_per_sentence": 1000 * greedy_s / len(held)},
    )
