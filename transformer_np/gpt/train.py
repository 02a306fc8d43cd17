"""Training a GPT on text, nanoGPT's way: random windows of the token stream, AdamW with betas (0.9, 0.99) and
weight decay on the matrices only, linear warmup then cosine decay of the learning rate, gradient clipping at 1.0,
an estimate of the train and validation loss every eval_interval steps, checkpoints that a run resumes from.

    RECIPES     'baby': nanoGPT's CPU recipe for character-level Shakespeare (4 layers, 4 heads, width 128,
                context 64, batch 12, 2,000 iterations, lr 1e-3 decayed to 1e-4 by 2,000, warmup 100, dropout 0)
    get_batch   (x, y): batch windows of the stream and the same windows shifted by one (the next tokens)
    lr_at       the learning rate of step n
    Run         a run folder: checkpoint.npz (model, optimizer, step, config, tokenizer), history.json
                (the losses), sample.txt

Data parallelism (`gpt train --nproc N`, docs/distributed.md's rule): every rank draws the same global batch from
the one seeded stream, as one process would, and takes its rows [r B/N, (r + 1) B/N); DistributedDataParallel
averages the ranks' gradients, and since every row holds the same number of targets, the mean of the N shard means
is the global batch's mean: N ranks take one process's steps, up to the order of the sums. Dropout draws from a
stream of each rank's own (the start's state advanced r + 1 jumps of PCG64: never the batches' stream), so with
dropout the N ranks' masks are not one process's.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass

import numpy as np

import minitensor as mt
import minitensor.nn.functional as F
from minitensor.nn.parallel import DistributedDataParallel
from minitensor.nn.utils import clip_grad_norm_
from minitensor.random import generator, get_rng_state, set_rng_state
from transformer_np.cliutil import sigint_deferred
from transformer_np.device import array_of, on_device
from transformer_np.gpt.config import GPTConfig, gpt2_shape, llama_shape
from transformer_np.gpt.model import GPT
from transformer_np.gpt.tokenizer import tokenizer_from_state
from transformer_np.parallel import jumped_state, shard_rows


@dataclass(frozen=True)
class Recipe:
    iters: int = 2000  # optimizer steps
    batch_size: int = 12  # windows per step
    lr: float = 1e-3  # peak learning rate
    min_lr: float = 1e-4  # the cosine's floor
    warmup_iters: int = 100  # linear warmup from 0
    lr_decay_iters: int = 2000  # the cosine reaches min_lr here
    weight_decay: float = 0.1  # on matrices (2-D parameters) only
    betas: tuple = (0.9, 0.99)
    grad_clip: float = 1.0  # the gradients' global norm is clipped to this (0: no clipping)
    eval_interval: int = 250  # steps between loss estimates
    eval_iters: int = 20  # batches per loss estimate


RECIPES = {"baby": Recipe()}
SHAPES = {"gpt2": gpt2_shape, "llama": llama_shape}
BABY_MODEL = dict(n_layer=4, n_head=4, n_embd=128, block_size=64, dropout=0.0)


def lr_at(step: int, r: Recipe) -> float:
    """Warmup (linear from lr / warmup to lr), cosine from lr to min_lr until lr_decay_iters, min_lr after."""
    if step < r.warmup_iters:
        return r.lr * (step + 1) / (r.warmup_iters + 1)
    if step > r.lr_decay_iters:
        return r.min_lr
    ratio = (step - r.warmup_iters) / max(1, r.lr_decay_iters - r.warmup_iters)
    return r.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (r.lr - r.min_lr)


def get_batch(data: np.ndarray, batch_size: int, block_size: int, rng: np.random.Generator):
    """(x, y), each (batch_size, block_size) int64: windows at random starts, and the tokens one position later."""
    if len(data) <= block_size:
        raise ValueError(f"the split has {len(data)} tokens, too few for windows of {block_size} + 1")
    starts = rng.integers(0, len(data) - block_size, batch_size)
    x = np.stack([data[s : s + block_size] for s in starts])
    y = np.stack([data[s + 1 : s + 1 + block_size] for s in starts])
    return x, y


def loss_of(model: GPT, x, y) -> mt.Tensor:
    logits = model(x)
    target = on_device(y.reshape(-1), array_of(logits))  # the host batch's targets beside the logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target)


def make_optimizer(model: GPT, r: Recipe):
    """AdamW with weight decay on the matrices (embeddings and linear weights), none on norms and biases."""
    params = list(model.parameters())
    decay = [p for p in params if p.ndim >= 2]
    rest = [p for p in params if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": r.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return mt.optim.AdamW(groups, lr=r.lr, betas=r.betas)


def estimate_loss(model: GPT, splits: dict, r: Recipe, step: int) -> dict:
    """Mean loss over eval_iters random batches per split, in eval mode, without a graph. The batches come from a
    generator of their own seeded by the step, so that estimating draws nothing from the training stream (a run
    interrupted and resumed draws the same training batches as one that was not)."""
    rng = np.random.default_rng(step)
    model.eval()
    out = {}
    with mt.no_grad():
        for name, data in splits.items():
            losses = [
                float(loss_of(model, *get_batch(data, r.batch_size, model.config.block_size, rng)).item())
                for _ in range(r.eval_iters)
            ]
            out[name] = float(np.mean(losses))
    model.train()
    return out


def save_checkpoint(out: str, model: GPT, opt, step: int, tokenizer, history: list, rank_rngs=None) -> None:
    """rank_rngs: under data parallelism, every rank's dropout stream (ParallelRun.streams), in rank order."""
    meta = {
        "step": step,
        "config": json.dumps(dataclasses.asdict(model.config)),
        "tokenizer": json.dumps(tokenizer.state()),
        "rng": json.dumps(mt.random.get_rng_state()),  # a resumed run draws the batches an unbroken one would
    }
    if rank_rngs is not None:
        meta["rank_rngs"] = json.dumps(rank_rngs)
    mt.save(
        {"model": model.state_dict(), "optimizer": opt.state_dict(), "meta": meta}, os.path.join(out, "checkpoint.npz")
    )
    with open(os.path.join(out, "history.json"), "w", encoding="utf-8") as f:
        json.dump(history, f, indent=1)


def load_checkpoint(path: str):
    """(model, checkpoint dict, tokenizer) of a run folder or its checkpoint.npz."""
    file = os.path.join(path, "checkpoint.npz") if os.path.isdir(path) else path
    if not os.path.isfile(file):
        raise ValueError(f"no checkpoint at {path} (expected a run folder holding checkpoint.npz)")
    ckpt = mt.load(file)
    try:
        meta = ckpt["meta"]
        config = GPTConfig(**json.loads(meta["config"]))
        tokenizer = tokenizer_from_state(json.loads(meta["tokenizer"]))
    except (KeyError, TypeError, json.JSONDecodeError) as e:
        raise ValueError(f"{file} is not a GPT checkpoint of this program ({type(e).__name__}: {e})") from None
    model = GPT(config)
    model.load_state_dict(ckpt["model"])
    return model, ckpt, tokenizer


def start_rank_streams(parallel, saved: list | None) -> None:
    """Each rank's dropout stream: its own from a checkpoint's `saved` streams when they are one per rank, else the
    batches' stream advanced r + 1 jumps (module docstring). The batches' stream is left as it was."""
    batches = get_rng_state()
    parallel.start_streams(jumped_state(batches, 1), saved)
    set_rng_state(batches)


def train(model: GPT, opt, splits: dict, r: Recipe, progress: dict, history: list, log, parallel=None) -> None:
    """Steps progress['step'] .. r.iters - 1, appending the loss estimates {step, train, val, lr} to `history`.
    progress['step'] counts the steps done; a Ctrl-C lets the step in progress finish (sigint_deferred), then
    raises KeyboardInterrupt, so the caller saves a checkpoint of whole steps.

    parallel: a transformer_np.parallel.DataParallel over an MPI communicator (under mpiexec), whose rank takes its
    shard of every global batch (module docstring); its streams started (start_rank_streams). Rank 0 alone
    estimates the losses and appends them; a Ctrl-C on any rank stops every rank after the same step."""
    rng = generator("gpt.train")
    if parallel is not None and parallel.comm is None:
        raise ValueError("gpt train: data parallelism runs under mpiexec (--nproc N); one process trains alone")
    world, rank = (1, 0) if parallel is None else (parallel.world_size, parallel.rank)
    rows = shard_rows(r.batch_size, world, rank)
    # the model as the step runs it: wrapped, its gradients are averaged over the ranks in the backward
    stepper = model if parallel is None else DistributedDataParallel(model, parallel.comm)
    model.train()
    for step in range(progress["step"], r.iters):
        if (step % r.eval_interval == 0 or step == r.iters - 1) and rank == 0:
            est = estimate_loss(model, splits, r, step)
            history.append({"step": step, **est, "lr": lr_at(step, r)})
            log(f"step {step}: train loss {est['train']:.4f}, val loss {est['val']:.4f}")
        pending = False
        try:
            with sigint_deferred():
                for group in opt.param_groups:
                    group["lr"] = lr_at(step, r)
                x, y = get_batch(splits["train"], r.batch_size, model.config.block_size, rng)
                if parallel is None:
                    loss = loss_of(stepper, x, y)
                    opt.zero_grad()
                    loss.backward()
                else:
                    batches = get_rng_state()  # dropout draws from this rank's stream, never the batches'
                    with parallel.stream(rank):
                        loss = loss_of(stepper, x[rows], y[rows])
                        opt.zero_grad()
                        loss.backward()
                    set_rng_state(batches)
                if r.grad_clip:
                    clip_grad_norm_(model.parameters(), r.grad_clip)
                opt.step()
                progress["step"] = step + 1
        except KeyboardInterrupt:
            if parallel is None:
                raise
            pending = True
        if parallel is not None and parallel.stop_together(pending, None, step + 1):
            raise KeyboardInterrupt
