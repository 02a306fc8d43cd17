"""The decoder-only configs of the benchmark: nanoGPT's baby GPT in the GPT-2 shape and a Llama-shaped model of the
same size, each side's workloads on them (transformer_np.gpt against its twin parity.gpt, same weights).

    gpt2-baby    4 layers, 4 heads, width 128, context 64, a 65-token vocabulary (character-level Shakespeare's)
    llama-baby   the same sizes in Llama's shape: rotary positions, RMSNorm, SwiGLU, no biases, 2 key/value heads

The workloads keep the encoder-decoder's names (benchmarks/workloads.py), so that the harness times, checks and
reports them unchanged:

    forward       eval mode, no_grad: logits = model(x), x (B, T) the batch of the baby recipe (12 x 64)
    fwd_bwd       train mode: forward, next-token cross-entropy (transformer_np.gpt.train.loss_of), backward
    train         the recipe's step (transformer_np.gpt.train): zero_grad, loss, backward, clip_grad_norm_(1.0),
                  AdamW with betas (0.9, 0.99) and weight decay 0.1 on the matrices only
    greedy_cache  cached generation as `gpt sample` runs it, batch 1, greedy: DECODE_TOKENS new tokens after a
                  one-token prompt, the whole context, so that every step feeds one token beside the cache
                  (transformer_np.gpt.generate.generate, parity.gpt.generate.generate). Past the context the window
                  slides, on both sides as in nanoGPT: each later step feeds the last 64 tokens afresh, a forward of
                  the whole window that no cache shortens (the forward workload's kind of work, at batch 1)

The tokens are random ids: the time of a step does not depend on their values. Dropout is 0, as in the recipe.
There is no torch.nn.Transformer side (it has no decoder-only model) and no beam search, HVP or scaling series.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import minitensor as mt
from minitensor.nn.utils import clip_grad_norm_
from transformer_np.gpt.config import GPTConfig
from transformer_np.gpt.generate import generate
from transformer_np.gpt.model import GPT
from transformer_np.gpt.train import BABY_MODEL, SHAPES, Recipe, loss_of, make_optimizer

VOCAB = 65  # character-level Shakespeare's vocabulary size (parity/gpt/report.py)
DECODE_TOKENS = 63  # the context (64) less the prompt: every step a cached one
WORKLOADS = ("forward", "fwd_bwd", "train", "greedy_cache")


@dataclass(frozen=True)
class GptBenchConfig:
    """A decoder-only model and the batch it is timed on; src_len 0 so that the harness's token count (B (S + T))
    is the batch's B T."""

    name: str
    model: GPTConfig
    batch_size: int  # B
    tgt_len: int  # T: the window
    decode_tokens: int  # new tokens of greedy_cache, batch 1
    description: str = ""
    src_len: int = 0


def _baby(name: str, shape: str, what: str) -> GptBenchConfig:
    recipe = Recipe()
    model = SHAPES[shape](VOCAB, **BABY_MODEL)
    return GptBenchConfig(name, model, recipe.batch_size, model.block_size, DECODE_TOKENS, what)


CONFIGS = {
    "gpt2-baby": _baby("gpt2-baby", "gpt2", "nanoGPT's baby GPT (GPT-2 shape), the baby recipe's batch"),
    "llama-baby": _baby("llama-baby", "llama", "the baby GPT's sizes in Llama's shape (RoPE, RMSNorm, SwiGLU, GQA)"),
}


def has_workload(workload: str) -> bool:
    return workload in WORKLOADS


def make_batch(cfg: GptBenchConfig, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(x, y), each (B, T) int64: random windows of a random token stream and the next tokens."""
    rng = np.random.default_rng(seed)
    stream = rng.integers(0, cfg.model.vocab_size, cfg.batch_size * (cfg.tgt_len + 1)).reshape(cfg.batch_size, -1)
    return stream[:, :-1].copy(), stream[:, 1:].copy()


def prompt() -> np.ndarray:
    """The generation's prompt (1, 1): one token, as `gpt sample` starts from a newline."""
    return np.zeros((1, 1), dtype=np.int64)


def build_numpy_model(cfg: GptBenchConfig, seed: int = 0) -> GPT:
    mt.manual_seed(seed)
    return GPT(cfg.model)


def copy_to_torch(np_model: GPT, device: str = "cpu"):
    """parity.gpt's GPT holding np_model's weights, copied by name."""
    import torch

    # the torch side only (parity imports torch): the numpy worker never loads torch
    from parity.convert import np_to_torch
    from parity.gpt.model import GPT as TorchGPT

    twin = TorchGPT(np_model.config)
    np_to_torch(np_model, twin)  # asserts equal key sets, shapes and dtypes
    return twin.to(device=device, dtype=torch.float32)


def numpy_parts(cfg: GptBenchConfig, model: GPT, batch) -> dict:
    """transformer_np.gpt's closures of the workloads, and the training step's phases (benchmarks.workloads makes
    them a Side)."""
    x, y = batch
    params = list(model.parameters())
    opt = make_optimizer(model, Recipe())

    def loss_fn():
        return loss_of(model, x, y)

    def forward():
        model.eval()
        with mt.no_grad():
            return model(x)

    def fwd_bwd():
        model.train()
        model.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        return loss

    def train():
        model.train()
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        clip_grad_norm_(params, 1.0)
        opt.step()
        return loss

    def greedy_cache():  # eval mode and no_grad inside, as `gpt sample` runs it
        return generate(model, prompt(), cfg.decode_tokens, greedy=True)

    return {
        "name": "numpy",
        "forward": forward,
        "fwd_bwd": fwd_bwd,
        "train": train,
        "greedy_cache": greedy_cache,
        "eval_logits": lambda: forward().numpy(),
        "model": model,
        "sync": None,
        "phases": (opt.zero_grad, loss_fn, lambda: clip_grad_norm_(params, 1.0), opt.step),
    }


def torch_parts(cfg: GptBenchConfig, model, batch, device: str = "cpu") -> dict:
    """The twin's closures of the same workloads (numpy_parts)."""
    import torch

    # the torch side only (parity imports torch): the numpy worker never loads torch
    from parity.gpt.generate import generate as twin_generate
    from parity.gpt.sides import GptTorchSide

    dev = torch.device(device)
    x, y = batch
    tx = torch.from_numpy(x).to(dev)
    twin = GptTorchSide(model, Recipe())  # the recipe's loss, AdamW groups and clipping in PyTorch
    for group in twin.opt.param_groups:  # its schedule set step 0's warmup rate: the peak rate, as numpy_parts
        group["lr"] = Recipe().lr
    params = list(model.parameters())

    def loss_fn():
        return twin.loss(tx, y)

    def forward():
        model.eval()
        with torch.no_grad():
            return model(tx)

    def fwd_bwd():
        model.train()
        model.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        return loss

    def train():
        model.train()
        twin.opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        twin.opt.step()
        return loss

    sync = torch.cuda.synchronize if dev.type == "cuda" else None

    return {
        "name": "torch" if dev.type == "cpu" else f"torch-{dev.type}",
        "forward": forward,
        "fwd_bwd": fwd_bwd,
        "train": train,
        "greedy_cache": lambda: twin_generate(model, prompt(), cfg.decode_tokens),
        "eval_logits": lambda: forward().detach().cpu().numpy(),
        "model": model,
        "sync": sync,
        "phases": (twin.opt.zero_grad, loss_fn, lambda: torch.nn.utils.clip_grad_norm_(params, 1.0), twin.opt.step),
    }


def forward_flops(cfg: GptBenchConfig) -> int:
    """Matrix-product FLOPs of one forward of the batch: per block the four projections (keys and values of Hkv
    heads), scores and weights @ values over every (query, key) pair (the masked ones are computed too), the
    feed-forward's two (GELU) or three (SwiGLU) matrices; then the output head."""
    m = cfg.model
    B, T, D, F, V = cfg.batch_size, cfg.tgt_len, m.n_embd, m.ff_dim, m.vocab_size
    N, q, kv = B * T, m.n_head * m.head_dim, m.kv_heads * m.head_dim
    mats = 2 if m.mlp == "gelu" else 3
    block = 2 * N * D * (2 * q + 2 * kv) + 2 * 2 * B * m.n_head * T * T * m.head_dim + mats * 2 * N * D * F
    return m.n_layer * block + 2 * N * D * V


def dominant_gemm(cfg: GptBenchConfig) -> tuple[int, int, int]:
    """(M, K, N) of the feed-forward's first product, the step's largest (the vocabulary of 65 is small)."""
    return (cfg.batch_size * cfg.tgt_len, cfg.model.n_embd, cfg.model.ff_dim)
