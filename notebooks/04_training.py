# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 4. Training the copy-reverse model
#
# **What you will learn**
# - the copy-reverse task (target = the input followed by the input reversed) and its preset model;
# - what one training step does (forward, loss, backward, clipping, Adam, schedule) and where its time goes,
#   op by op, with `mt.profiler`;
# - how to read the three curves of a run: the loss, the learning-rate schedule (warmup then inverse square
#   root) and the gradient norm of every layer.
#
# At full size: a few minutes on a laptop CPU (the copy-reverse preset, 400 steps). With `MT_NOTEBOOK_TINY=1`:
# a small model for 20 steps, seconds. Next: `05_decoding.py`.

# %%
import tempfile

import numpy as np
from nbutil import TINY, figure_path, say, show, sized

import minitensor as mt
from transformer_np import plots
from transformer_np.data import get_task, make_batches
from transformer_np.training import (
    build_model,
    build_optimizer,
    build_scheduler,
    config_for_task,
    default_configs,
    train,
    train_step,
)

# %% [markdown]
# ## The task and the model
# Sources are 3 to 10 symbols; the target repeats them, then reverses them. The preset (`--config copy-reverse`)
# is a 3+3-layer Transformer of width 128 with 8 heads; the tiny size shrinks it to 1+1 layers of width 32.

# %%
task = get_task("copy-reverse")
model_cfg, train_cfg = default_configs("copy-reverse")
if TINY:
    model_cfg = config_for_task(
        model_cfg.replace(d_model=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=64), task
    )
pairs, _ = task.splits(sized(20000, 2000), sized(200, 16), seed=0)
src, tgt = pairs[0]
print("source:", task.src_vocab.decode(src), "  target:", task.decode_target(tgt))
print(
    "model:",
    {
        k: v
        for k, v in model_cfg.to_dict().items()
        if k in ("d_model", "num_heads", "num_encoder_layers", "num_decoder_layers", "d_ff", "dropout")
    },
)

# %% [markdown]
# ## One step, profiled op by op
# `train_step` runs: the forward pass with teacher forcing (the decoder reads the true target shifted right),
# the label-smoothed cross-entropy, `backward`, gradient clipping to norm 1, one Adam update and one scheduler
# step. `mt.profiler.profile()` records every primitive's calls and forward/backward time.

# %%
model = build_model(model_cfg, seed=0)
optimizer = build_optimizer(model, train_cfg)
scheduler = build_scheduler(optimizer, model_cfg, train_cfg)
params = list(model.parameters())
print(f"{sum(p.numel() for p in params):,} parameters")
batch_src, batch_tgt = make_batches(pairs[:32], 32)[0]  # (B, S), (B, T) token ids
print("batch shapes: src", batch_src.shape, "tgt", batch_tgt.shape)
train_step(model, optimizer, scheduler, params, batch_src, batch_tgt, train_cfg)  # warm-up: first-call costs
with mt.profiler.profile() as prof:
    loss, grad_norm, _, _ = train_step(model, optimizer, scheduler, params, batch_src, batch_tgt, train_cfg)
print(f"loss {loss:.3f}, gradient norm before clipping {grad_norm:.3f}\n")
print(prof.table(top=12))

# %% [markdown]
# How to read it: `calls` is how often the op ran in the step, `fwd ms`/`bwd ms` its time in the forward and
# backward passes, `share` its part of all op time. The linear layers (matrix products) and the attention ops
# dominate; "outside ops" is Python glue plus the optimizer's update.
#
# ## A training loop by hand, and the bug everyone writes once
# Before the library's `train`, the loop itself: for every batch, clear the old gradients, forward, loss,
# backward, update. `backward` *adds* into `.grad` (so that a tensor used twice gets both shares), so a loop
# that forgets `optimizer.zero_grad()` feeds the optimizer the sum of every gradient so far. Same model, same
# batches, same learning rate, run twice:

# %%
from transformer_np.loss import compute_loss


def train_by_hand(model, optimizer, batches, forget_zero_grad=False):
    losses, grad_norms = [], []
    for src_b, tgt_b in batches:
        if not forget_zero_grad:
            optimizer.zero_grad()  # the line the buggy loop forgets
        loss, _, _ = compute_loss(model, src_b, tgt_b)  # forward and the loss
        loss.backward()  # adds d loss / d p into every p.grad
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(
            float(np.sqrt(sum((p.grad.numpy().astype(np.float64) ** 2).sum() for p in model.parameters())))
        )
    return losses, grad_norms


loop_batches = make_batches(pairs[: 32 * sized(60, 15)], 32)
curves = {}
for forget in (False, True):
    m_ = build_model(model_cfg.replace(dropout=0.0), seed=0)
    curves[forget] = train_by_hand(m_, mt.optim.Adam(m_.parameters(), lr=3e-3), loop_batches, forget)
for forget, (losses_, norms_) in curves.items():
    label = "zero_grad forgotten" if forget else "zero_grad each step"
    print(f"{label:<20} loss {losses_[0]:.2f} -> {losses_[-1]:.2f}; norm of .grad at the last step {norms_[-1]:.1f}")
with_, without = curves[False][0], curves[True][0]
say(
    "{n} steps: the loss went from {start:.2f} to {a:.2f} with `zero_grad`, to {b:.2f} without; without it, the "
    "loss was at its lowest at step {low} and ended {how} its start.",
    n=len(with_),
    start=with_[0],
    a=with_[-1],
    b=without[-1],
    low=int(np.argmin(without)) + 1,
    how="above" if without[-1] > without[0] else "below",
)
steps_ = list(range(1, len(loop_batches) + 1))
show(
    plots.plot_lines(
        steps_,
        {"zero_grad each step": curves[False][0], "zero_grad forgotten": curves[True][0]},
        figure_path("04_zero_grad.png"),
        "step",
        "training loss",
        "the same loop with and without optimizer.zero_grad()",
        markers=False,
        lower={"zero_grad each step": curves[False][1], "zero_grad forgotten": curves[True][1]},
        lower_ylabel="norm of .grad",
    )
)

# %% [markdown]
# Without `zero_grad` the norm of `.grad` grows step after step (it is a running sum), and the updates follow the
# sum of old gradients instead of the current batch's, so the loss does not fall as it does with `zero_grad` (the
# sentence under the loop says by how much, in this run). No error is raised; only the curve tells. The
# course's exercise 8.1, `train_step` (`python -m course check 8`), catches it with a check.
#
# ## A short run
# `train` does the same loop, plus gradient clipping, the learning-rate schedule, evaluation and logging.
# `train` loops over batches, evaluates on held-out pairs every `eval_every` steps and records, per step, the
# loss, the learning rate, the total gradient norm, each layer's gradient norm and the throughput (tok/s). The
# schedule is the paper's: the learning rate rises linearly for `warmup_steps`, then decays as 1/sqrt(step).

# %%
steps = sized(400, 20)
# lr is the schedule's factor: the peak is 0.5 * 128^-0.5 * 100^-0.5 = 4.4e-3 for d_model 128 and a warmup of 100
run_cfg = train_cfg.replace(
    steps=steps,
    warmup_steps=sized(100, 5),
    lr=0.5,
    eval_every=sized(100, 10),
    eval_size=sized(200, 16),
    train_size=sized(20000, 2000),
    checkpoint_every=0,
)
out_dir = tempfile.mkdtemp(prefix="copy_reverse_")
result = train(model_cfg.replace(dropout=0.0), run_cfg, out_dir, progress=False)
hist, m = result.history, result.metrics
print(f"{steps} steps in {result.wall_time:.1f} s, median {np.median(hist['tokens_per_s']):.0f} tok/s")
print(f"held-out: loss {m['loss']:.3f}, token accuracy {m['token_acc']:.1%}, exact match {m['exact_acc']:.1%}")
say(
    "After {steps} steps the model is far from done: token accuracy {tok:.0%}, exact match {exact:.0%}.",
    steps=steps,
    tok=m["token_acc"],
    exact=m["exact_acc"],
)

# %% [markdown]
# Token accuracy counts correct next-token predictions under teacher forcing; exact match asks the model to
# generate the whole target by itself (greedy decoding) and counts only perfect sequences, so it is much
# stricter and rises later. A short run like this one leaves the model far from done (the sentence above gives
# its numbers); `make demo` trains the same model for 2000 steps (README.md gives its exact match).
#
# ## The loss
# The line is the loss of each batch; in a run of 100 steps or more a running mean is drawn over it (the batch
# losses then faint); dots are the held-out loss. With label smoothing 0.1 the loss cannot reach 0: its floor
# is the entropy of the smoothed target.

# %%
show(
    plots.plot_loss(
        hist["step"],
        hist["loss"],
        figure_path("04_loss.png"),
        [e["step"] for e in hist["eval"]],
        [e["loss"] for e in hist["eval"]],
        "copy-reverse: training loss",
    )
)

# %% [markdown]
# ## The learning rate
# `lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`: the peak is at step `warmup_steps`. Early
# Adam steps use poor estimates of the gradient's variance; the warmup keeps them small.

# %%
show(plots.plot_lr(hist["step"], hist["lr"], figure_path("04_lr.png"), "warmup, then inverse square root"))

# %% [markdown]
# ## Gradient norms, per layer
# One line per parameter group (`encoder.layers.0` is encoder layer 1, next to the embeddings). In a post-norm
# Transformer the layers nearest the output get the largest gradients at first; the clipping threshold (1) acts
# on the total norm over all of them.

# %%
show(plots.plot_grad_norms(hist["step"], hist["layer_grad_norms"], figure_path("04_grad_norms.png")))

# %% [markdown]
# ## Your turn: the training step
# Write `train_step`, one step of teacher forcing, in the next cell (the course's exercise 8.1): clear the old
# gradients, run the model on the source and the target without its last token, take the cross-entropy against
# the target without its first token (ignoring PAD_ID), backward, step, and return the loss as a float. The cell
# after runs the course's check (three steps against the project's own, every parameter compared) and prints its
# verdict; forgetting `zero_grad` is caught at step 2.


# %%
import minitensor.nn.functional as F  # noqa: F401  (for your step: F.cross_entropy)
from transformer_np.data import PAD_ID  # noqa: F401  (for your step: the padding to ignore)


def train_step(model, optimizer, src, tgt, label_smoothing=0.0):
    """src (B, S), tgt (B, T) token ids, tgt = <bos> ... <eos> <pad>...; returns the loss (a float)"""
    raise NotImplementedError("exercise 8.1")  # your turn: replace this line


# %%
from course.notebook import check_here

check_here("8.1", train_step=train_step)

# %% [markdown]
# **Recap.** A step is forward, loss, backward, clip, update, schedule; the profiler shows that matrix
# products dominate. The full recipe (2000 steps, a step schedule; README.md gives its exact match) is
# `make demo`; `python -m transformer_np train --help` lists every knob. Your turn: `python -m course check 7`
# (SGD and Adam by hand, against torch.optim) and `check 8` (the training step and a short curve).
