"""The baby recipe end to end on both sides: transformer_np.gpt trained on the project's Shakespeare split beside its
PyTorch twin from the same initial weights on the same batches, and the validation loss each reaches.

    python -m benchmarks gpt-recipe [--side both|numpy|torch] [--iters 2000] [--threads 1] [--out DIR]

Each side runs in a process of its own (`python -m benchmarks.gpt_recipe --side S ...`), one after the other:

    numpy   transformer_np.gpt.train.train, the very loop `gpt train --preset baby` runs: the baby GPT (GPT-2 shape)
            seeded with SEED, AdamW (betas 0.9, 0.99; weight decay 0.1 on the matrices), warmup then cosine decay,
            clipping at 1.0, its loss estimates every 250 steps; batches from minitensor's seeded generator
    torch   parity.gpt's twin holding the same initial weights (minitensor initialises, the twin copies them), the
            same loop in PyTorch (parity/gpt/sides.py: torch.optim.AdamW with the same groups, the same lr_at,
            torch.nn.utils.clip_grad_norm_), the batches drawn from the same generator in the same state, and the
            same loss estimates

Then each side evaluates the WHOLE validation split (every token, in windows of the context: whole_split_loss),
and the numpy side samples 200 characters after a newline (as `gpt train` does at its end). A side writes
DIR/SIDE.json; when both are there, the parent writes DIR/recipe.json (the two losses, their difference, the times,
the sample) and the recipe's section of benchmarks/RESULTS.md (benchmarks/results_page.py). `--side numpy` and
`--side torch` in two commands give the same result as `--side both` (a long run split in two).
"""

from __future__ import annotations

import sys

from benchmarks.env import thread_env_from_argv

if __name__ == "__main__":
    # Thread counts must be in the environment before numpy/torch load (benchmarks/env.py loads neither).
    thread_env_from_argv(sys.argv, default=1)

import json
import os
import subprocess
import time

import numpy as np

import minitensor as mt
import minitensor.nn.functional as F
from benchmarks import results_page
from benchmarks.env import machine_facts, set_torch_threads, thread_env
from minitensor.random import generator
from minitensor.serialization import atomic_write
from transformer_np.cli import OneLineParser
from transformer_np.cliutil import THREADS_MAX, integer, interrupted, interrupts_as_such
from transformer_np.gpt import shakespeare
from transformer_np.gpt.config import gpt2_shape
from transformer_np.gpt.generate import generate
from transformer_np.gpt.model import GPT
from transformer_np.gpt.tokenizer import CharTokenizer
from transformer_np.gpt.train import BABY_MODEL, Recipe, get_batch, lr_at, make_optimizer, train

SEED = 1337  # `gpt train`'s default seed: the initial weights, then the batches
EVAL_BATCH = 128  # windows per forward of the whole-split evaluation
SAMPLE_TOKENS = 200
TOLERANCE = 0.02  # the target: |val loss here - val loss of the twin| <= this
SIDES = ("numpy", "torch")
DEFAULT_OUT = os.path.join("benchmarks", "results", "gpt-recipe")


def data(cache: str | None = None):
    """(tokenizer, {'train': ids, 'val': ids}) as `gpt train --data shakespeare-char` makes them."""
    train_text, val_text, _ = shakespeare.load(cache)
    tokenizer = CharTokenizer.from_text(train_text + val_text)
    splits = {k: np.asarray(tokenizer.encode(t), dtype=np.int64) for k, t in (("train", train_text), ("val", val_text))}
    return tokenizer, splits


def windows(ids: np.ndarray, block_size: int, batch: int):
    """The whole split as (x, y) batches: consecutive windows of block_size inputs and their next tokens, the last
    window shorter when the split does not divide (its own batch); every token but the first is a target once."""
    n = (len(ids) - 1) // block_size  # whole windows
    starts = np.arange(n) * block_size
    for i in range(0, n, batch):
        s = starts[i : i + batch, None] + np.arange(block_size)
        yield ids[s], ids[s + 1]
    rest = len(ids) - 1 - n * block_size
    if rest:
        yield ids[None, n * block_size : n * block_size + rest], ids[None, n * block_size + 1 :]


def whole_split_loss(loss_sum, ids: np.ndarray, block_size: int) -> float:
    """Mean next-token cross-entropy over every target of the split; loss_sum(x, y) -> the batch's summed loss."""
    total, count = 0.0, 0
    for x, y in windows(ids, block_size, EVAL_BATCH):
        total += loss_sum(x, y)
        count += y.size
    return total / count


# ------------------------------------------------------------------------------------------- sides
def numpy_run(recipe: Recipe, tokenizer, splits, log) -> dict:
    """transformer_np.gpt's run: the model, the loop of `gpt train`, the whole validation split, a sample."""
    mt.manual_seed(SEED)
    model = GPT(gpt2_shape(tokenizer.vocab_size, **BABY_MODEL))
    opt = make_optimizer(model, recipe)
    history, progress = [], {"step": 0}
    t0 = time.perf_counter()
    train(model, opt, splits, recipe, progress, history, log)
    train_s = time.perf_counter() - t0

    def loss_sum(x, y):
        logits = model(x)
        return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum").item())

    t0 = time.perf_counter()
    model.eval()
    with mt.no_grad():
        val = whole_split_loss(loss_sum, splits["val"], model.config.block_size)
    eval_s = time.perf_counter() - t0
    out = generate(model, np.array([tokenizer.encode("\n")]), SAMPLE_TOKENS, seed=SEED)
    return {
        "val_loss": val,
        "train_s": train_s,
        "eval_s": eval_s,
        "history": history,
        "sample": tokenizer.decode(out[0]),
    }


def torch_run(recipe: Recipe, tokenizer, splits, log) -> dict:
    """The twin's run: the same initial weights and batches, transformer_np.gpt.train.train's loop in PyTorch."""
    import torch
    import torch.nn.functional as TF

    # the torch side only (parity imports torch): the numpy child never loads torch
    from parity.convert import np_to_torch
    from parity.gpt.model import GPT as TorchGPT
    from parity.gpt.sides import GptTorchSide

    mt.manual_seed(SEED)
    ours = GPT(gpt2_shape(tokenizer.vocab_size, **BABY_MODEL))  # the initial weights; the generator moves on as ours
    model = np_to_torch(ours, TorchGPT(ours.config)).float()
    del ours
    twin = GptTorchSide(model, recipe)
    params = list(model.parameters())
    rng = generator("gpt.train")  # the batches' stream, in the state the numpy side's train() finds it
    bs = model.config.block_size

    def estimate(step: int) -> dict:  # transformer_np.gpt.train.estimate_loss
        est_rng = np.random.default_rng(step)
        model.eval()
        with torch.no_grad():
            out = {
                name: float(
                    np.mean(
                        [
                            twin.loss(*get_batch(d, recipe.batch_size, bs, est_rng)).item()
                            for _ in range(recipe.eval_iters)
                        ]
                    )
                )
                for name, d in splits.items()
            }
        model.train()
        return out

    history = []
    t0 = time.perf_counter()
    model.train()
    for step in range(recipe.iters):
        if step % recipe.eval_interval == 0 or step == recipe.iters - 1:
            est = estimate(step)
            history.append({"step": step, **est, "lr": lr_at(step, recipe)})
            log(f"step {step}: train loss {est['train']:.4f}, val loss {est['val']:.4f}")
        for group in twin.opt.param_groups:
            group["lr"] = lr_at(step, recipe)
        x, y = get_batch(splits["train"], recipe.batch_size, bs, rng)
        loss = twin.loss(torch.from_numpy(x), y)
        twin.opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, recipe.grad_clip)
        twin.opt.step()
    train_s = time.perf_counter() - t0

    def loss_sum(x, y):
        logits = model(torch.from_numpy(x))
        return float(
            TF.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(y).reshape(-1), reduction="sum")
        )

    t0 = time.perf_counter()
    model.eval()
    with torch.no_grad():
        val = whole_split_loss(loss_sum, splits["val"], bs)
    return {"val_loss": val, "train_s": train_s, "eval_s": time.perf_counter() - t0, "history": history}


def child(side: str, iters: int, threads: int, cache: str | None, path: str) -> None:
    """One side's run, written to `path` as JSON."""
    if side == "torch":
        set_torch_threads(threads)
    tokenizer, splits = data(cache)
    recipe = Recipe(iters=iters, lr_decay_iters=iters) if iters != Recipe().iters else Recipe()
    log = lambda line: print(f"[{side}] {line}", file=sys.stderr, flush=True)
    run = numpy_run if side == "numpy" else torch_run
    res = run(recipe, tokenizer, splits, log)
    res.update(side=side, iters=iters, threads=threads, seed=SEED, val_tokens=int(len(splits["val"]) - 1))
    res["machine"] = machine_facts(threads)
    with atomic_write(path) as f:
        json.dump(res, f, indent=1)


# ------------------------------------------------------------------------------------------ parent
def run_side(side: str, iters: int, threads: int, cache: str | None, out: str, log) -> dict:
    """Start the child of `side` and wait for it; its JSON."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, **thread_env(threads))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    path = os.path.join(out, f"{side}.json")
    cmd = [sys.executable, "-m", "benchmarks.gpt_recipe", "--side", side, "--iters", str(iters)]
    cmd += ["--threads", str(threads), "--json", path] + (["--data-cache", cache] if cache else [])
    log(f"{side}: {iters} iterations at {threads} thread(s) ...")
    done = subprocess.run(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL)
    if done.returncode:
        raise RuntimeError(f"the {side} side exited with status {done.returncode}")
    with open(path, encoding="utf-8") as f:
        res = json.load(f)
    log(f"{side}: val loss {res['val_loss']:.4f} on the whole split, {res['train_s']:.0f} s training")
    return res


def combine(numpy: dict, torch: dict, command: str) -> dict:
    """recipe.json: both sides' losses and times, their difference against the tolerance, the sample."""
    for key in ("iters", "threads", "seed", "val_tokens"):
        if numpy[key] != torch[key]:
            raise ValueError(f"the two sides' runs differ in {key}: {numpy[key]} and {torch[key]}: rerun one of them")
    diff = numpy["val_loss"] - torch["val_loss"]
    return {
        "kind": "gpt-recipe",
        "command": command,
        "iters": numpy["iters"],
        "threads": numpy["threads"],
        "seed": numpy["seed"],
        "val_tokens": numpy["val_tokens"],
        "tolerance": TOLERANCE,
        "val_loss": {"numpy": numpy["val_loss"], "torch": torch["val_loss"]},
        "difference": diff,
        "met": bool(abs(diff) <= TOLERANCE),
        "train_s": {"numpy": numpy["train_s"], "torch": torch["train_s"]},
        "eval_s": {"numpy": numpy["eval_s"], "torch": torch["eval_s"]},
        "history": {"numpy": numpy["history"], "torch": torch["history"]},
        "sample": numpy["sample"],
        "machine": numpy["machine"],
    }


def main(args) -> int:
    """`python -m benchmarks gpt-recipe`: the sides asked for, then recipe.json and the page when both are there."""
    prog = "python -m benchmarks gpt-recipe"
    t0 = time.perf_counter()
    log = lambda msg: print(f"[{time.perf_counter() - t0:6.1f} s] {msg}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    try:
        with interrupts_as_such():
            for side in SIDES if args.side == "both" else (args.side,):
                run_side(side, args.iters, args.threads, args.data_cache, args.out, log)
    except KeyboardInterrupt:
        return interrupted(prog)
    except (RuntimeError, OSError, ValueError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    paths = [os.path.join(args.out, f"{s}.json") for s in SIDES]
    if not all(os.path.exists(p) for p in paths):
        print(f"{prog}: one side done; run the other (--side) to compare them")
        return 0
    sides = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            sides.append(json.load(f))
    command = f"python -m benchmarks gpt-recipe --iters {args.iters} --threads {args.threads}"
    try:
        res = combine(*sides, command)
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    recipe_path = os.path.join(args.out, "recipe.json")
    with atomic_write(recipe_path) as f:
        json.dump(res, f, indent=1)
    print("\n".join(results_page.recipe_markdown(res)))
    if args.page:
        results_page.write_recipe(res, args.page)
        print(f"wrote {recipe_path} and the recipe's section of {args.page}")
    return 0


def add_parser(sub) -> None:
    """`gpt-recipe` on `python -m benchmarks`'s subcommands."""
    k = sub.add_parser(
        "gpt-recipe",
        help="the baby GPT recipe on Shakespeare, transformer_np beside its PyTorch twin: validation losses",
        description="Train the baby GPT on both sides from the same weights and batches; compare the whole "
        "validation split's loss.",
    )
    add_flags(k)
    k.add_argument(
        "--out", default=DEFAULT_OUT, help="folder of the sides' JSON and recipe.json (default: %(default)s)"
    )
    k.add_argument(
        "--page",
        default=os.path.join("benchmarks", "RESULTS.md"),
        help="the page whose recipe section is rewritten when both sides are done; '' for none (default: %(default)s)",
    )


def add_flags(p) -> None:
    p.add_argument("--side", default="both", choices=["both", *SIDES], help="which side(s) to run (default: both)")
    p.add_argument("--iters", type=integer(1), default=Recipe().iters, help="optimizer steps (default: %(default)s)")
    p.add_argument(
        "--threads", type=integer(1, THREADS_MAX), default=1, help="BLAS and torch threads (default: %(default)s)"
    )
    p.add_argument("--data-cache", default=None, help="the Shakespeare archive's folder (default: gpt train's)")


def child_main(argv=None) -> int:
    p = OneLineParser(
        prog="python -m benchmarks.gpt_recipe",
        description="one side of the recipe (started by `python -m benchmarks gpt-recipe`)",
    )
    add_flags(p)
    p.add_argument("--json", required=True, help="where the side's results go")
    args = p.parse_args(argv)
    if args.side == "both":
        p.error("--side: a child runs one side, numpy or torch")
    child(args.side, args.iters, args.threads, args.data_cache, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
