"""The GPT's layer-by-layer parity report: transformer_np.gpt against its twin parity.gpt, module by module.

`run_gpt_report(GptReportConfig(...))` builds both models from one seed (minitensor initialises, torch copies by
name) at nanoGPT's baby size (4 layers, 4 heads, width 128, context 64, a 65-token vocabulary as character-level
Shakespeare's) in the GPT-2 or the Llama shape, and compares, with the encoder-decoder's machinery
(parity/report.py, results.py, render.py):

- forward: the output of every submodule (the rotary embedding's second call, on the keys, suffixed `#2`; each
  attention's `attn_dropout` output is its attention weights) and the next-token loss;
- backward: the gradient of every parameter and of every hooked output;
- training: N steps of the training recipe (transformer_np.gpt.train: AdamW with betas (0.9, 0.99), weight decay
  on matrices only, warmup then cosine decay, clipping at 1.0; parity/gpt/sides.py), with the warmup shortened to
  one step and the decay to N so that a few steps see both; each later step's loss and gradients, then every
  parameter. Free in float64, lockstep in float32 (parity.report.ReportConfig says why);
- generation: the logits of a cached decode (a prefill, then one token a step) against the twin's whole-window
  logits, and greedy decoding with the cache past the context (the window slides) on both sides, token for token.

The key projection's bias of the GPT-2 shape has an identically zero gradient (parity/results.py) and is judged by
the rules 'zero' and 'drift'; under rotary positions it is not (the rotation turns it by each key's position).
Dropout is 0 (the baby recipe's); HVP and forward mode are the encoder-decoder report's and tests/parity/test_gpt.py's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

import minitensor as mt
from minitensor.testing import PARITY_RTOL
from transformer_np.gpt import generate as np_generate
from transformer_np.gpt.config import GPTConfig
from transformer_np.gpt.model import GPT
from transformer_np.gpt.train import BABY_MODEL, SHAPES, Recipe, get_batch

from ..convert import np_to_torch, state_arrays
from ..hooks import Capture, KeyProjectionGrads, to_numpy
from ..placement import pairing, resolve_device
from ..report import (
    ReportConfig,
    check_options,
    compare_after_steps,
    compare_output_grads,
    compare_outputs,
    compare_param_grads,
    compare_steps,
    resolve_dtype,
)
from ..results import Report, key_projection
from ..sides import CLIP_NORM_ADJUSTMENT
from . import generate as pt_generate
from .model import GPT as TorchGPT
from .sides import GptNpSide, GptTorchSide

MODELS = tuple(sorted(SHAPES))  # 'gpt2', 'llama'
VOCAB = 65  # character-level Shakespeare's vocabulary size


@dataclass(frozen=True)
class GptReportConfig:
    """What one GPT parity report checks; validated on creation, before any model is built."""

    model: str = "gpt2"  # a shape of transformer_np.gpt.train.SHAPES
    dtype: str = "float64"
    device: str = "cpu"  # the torch side's device: 'cpu', 'cuda' or 'auto'
    steps: int = 3  # optimizer steps checked after the first backward
    trajectory: str = "auto"  # 'free', 'lockstep' or 'auto' (parity.report.ReportConfig)
    seed: int = 0  # weights, batches and the prompt
    batch_size: int | None = None  # None: the recipe's 12
    gpt_config: GPTConfig | None = None  # another size or mix of the shape (the tests' small models)

    def __post_init__(self):
        if self.model not in SHAPES:
            raise ValueError(f"unknown model {self.model!r}: expected one of {list(MODELS)}")
        check_options(self.dtype, self.device, self.steps, self.batch_size, self.trajectory)
        if self.gpt_config is not None and not isinstance(self.gpt_config, GPTConfig):
            raise TypeError(f"gpt_config: expected a GPTConfig, got {type(self.gpt_config).__name__}")

    def model_config(self) -> GPTConfig:
        if self.gpt_config is not None:
            return self.gpt_config
        return SHAPES[self.model](VOCAB, **BABY_MODEL)

    def recipe(self) -> Recipe:
        """The baby recipe with a one-step warmup and the cosine over the N steps."""
        return Recipe(iters=self.steps, warmup_iters=1, lr_decay_iters=max(2, self.steps))

    def resolved_trajectory(self) -> str:
        return ReportConfig.resolved_trajectory(self)


def build_gpt_models(cfg: GPTConfig, dtype: str, device: str, seed: int):
    """(transformer_np GPT, twin) with equal weights: minitensor initialises under `dtype`, torch copies by name."""
    mt_dtype, torch_dtype = resolve_dtype(dtype)
    previous = mt.get_default_dtype()
    mt.set_default_dtype(mt_dtype)
    try:
        mt.manual_seed(seed)
        ours = GPT(cfg)
    finally:
        mt.set_default_dtype(previous)
    torch.manual_seed(seed)
    twin = TorchGPT(cfg).to(device=device, dtype=torch_dtype)
    np_to_torch(ours, twin)
    return ours, twin


def key_bias_of(cfg: GPTConfig) -> str | None:
    """The parameter suffix of the biases whose gradient is identically 0, or None (parity/results.py)."""
    return "k_proj.bias" if cfg.bias and cfg.positions == "learned" else None


def compare_forward_backward(report: Report, npside, ptside, x, y, dtype: str, key_bias: str | None) -> None:
    """Every submodule's output, the loss, then every parameter's and output's gradient."""
    rtol = PARITY_RTOL[dtype]
    npcap, ptcap = Capture(npside.model), Capture(ptside.model)
    keys = None if key_bias is None else KeyProjectionGrads(ptside.model, "." + key_projection(key_bias))
    try:
        np_loss, pt_loss = npside.loss(x, y), ptside.loss(x, y)
    finally:
        for hooks in (npcap, ptcap, keys):
            if hooks is not None:
                hooks.remove()
    compare_outputs(report, npcap, ptcap, rtol)
    report.check_close("loss", "loss", "loss", to_numpy(np_loss), to_numpy(pt_loss), rtol)
    np_loss.backward()
    pt_loss.backward()
    compare_param_grads(report, npside.model, ptside.model, keys, dtype, key_bias)
    compare_output_grads(report, npcap, ptcap, rtol)


TIE_NOTE = (
    "compared up to position {t}, where row {b} parts at a near-tie: the twin's logits of the two tokens differ by "
    "{gap:.1e}, within round-off ({limit:.1e})"
)


def greedy_row(report: Report, ours: np.ndarray, ref: np.ndarray, pt_model, rtol: float) -> None:
    """Rule 'equal' on the greedy tokens. Where they first part, the twin's logits of the two candidates are
    looked at: two correct implementations may pick differently only when those logits are equal to round-off
    (rtol of the logits' scale); the tokens after that point then say nothing more, and only those before it are
    compared, which the row's note says. Any other difference fails."""
    name = f"greedy tokens, {ours.shape[1]} with the prompt, the window sliding past the context"
    differ = np.argwhere(ours != ref)
    if len(differ) == 0:
        report.check_equal("generation", "tokens", name, ours, ref)
        return
    t, b = min((int(t), int(b)) for b, t in differ)  # the first position where any row parts
    bs = pt_model.config.block_size
    device = next(pt_model.parameters()).device
    pt_model.eval()
    with torch.no_grad():
        logits = to_numpy(pt_model(torch.as_tensor(ref[b : b + 1, max(0, t - bs) : t], device=device))[0, -1])
    pt_model.train()
    gap = abs(float(logits[ours[b, t]]) - float(logits[ref[b, t]]))
    limit = rtol * float(np.abs(logits).max())
    if gap <= limit:
        note = TIE_NOTE.format(t=t, b=b, gap=gap, limit=limit)
        report.check_equal("generation", "tokens", name, ours[:, :t], ref[:, :t], note)
    else:
        report.check_equal("generation", "tokens", name, ours, ref, f"row {b} first differs at position {t}")


def compare_generation(report: Report, np_model, pt_model, dtype: str, seed: int) -> None:
    """Cached logits against the twin's whole window, then greedy tokens past the context, both in eval mode."""
    rtol = PARITY_RTOL[dtype]
    cfg = np_model.config
    bs = cfg.block_size
    rng = np.random.default_rng(seed + 3)
    idx = rng.integers(0, cfg.vocab_size, (2, bs))
    prefill = max(1, bs // 2)
    np_model.eval()
    pt_model.eval()
    try:
        with mt.no_grad(), torch.no_grad():
            cache = np_model.init_cache(bs)
            steps = [to_numpy(np_model(idx[:, :prefill], cache=cache))]
            steps += [to_numpy(np_model(idx[:, t : t + 1], cache=cache)) for t in range(prefill, bs)]
            device = next(pt_model.parameters()).device
            full = to_numpy(pt_model(torch.as_tensor(idx, device=device)))
    finally:
        np_model.train()
        pt_model.train()
    report.check_close(
        "generation",
        "cache",
        f"cached logits: prefill {prefill}, then {bs - prefill} single steps",
        np.concatenate(steps, axis=1),
        full,
        rtol,
        "transformer_np with its key/value cache against the twin's whole window",
    )
    prompt = idx[:, :5]
    n = 2 * bs  # past the context: the window slides, the cache is refilled
    ours = np_generate.generate(np_model, prompt, n, greedy=True)
    ref = pt_generate.generate(pt_model, prompt, n, greedy=True)
    greedy_row(report, ours, ref, pt_model, rtol)


def run_gpt_report(rc: GptReportConfig) -> Report:
    """Build, feed, compare; returns the Report (its `.passed` says whether every check is within its limit)."""
    if not isinstance(rc, GptReportConfig):
        raise TypeError(f"run_gpt_report: expected a GptReportConfig, got {type(rc).__name__}")
    cfg, recipe = rc.model_config(), rc.recipe()
    dtype, trajectory = rc.dtype, rc.resolved_trajectory()
    device = resolve_device(rc.device)
    if device == "cuda":  # full float32 matmuls, as parity.report.run_report
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    np_model, pt_model = build_gpt_models(cfg, dtype, device, rc.seed)
    np_model.train()
    pt_model.train()
    npside, ptside = GptNpSide(np_model, recipe), GptTorchSide(pt_model, recipe)
    key_bias = key_bias_of(cfg)

    B, T = rc.batch_size or recipe.batch_size, cfg.block_size
    rng = np.random.default_rng(rc.seed)
    stream = rng.integers(0, cfg.vocab_size, 8 * T + 1)
    batches = [get_batch(stream, B, T, rng) for _ in range(max(rc.steps, 1))]
    report = Report(
        meta=dict(
            config=rc.model,
            family="gpt",
            dtype=dtype,
            device=device,
            np_device="cpu",
            against="torch",
            pairing=pairing("cpu", device, "torch"),
            seed=rc.seed,
            steps=rc.steps,
            batch=f"B={B} T={T}",
            trajectory=trajectory,
            rtol=PARITY_RTOL[dtype],
            model=dataclasses.asdict(cfg),
            train=dataclasses.asdict(recipe),
            torch=torch.__version__,
        )
    )
    init = state_arrays(pt_model)
    x, y = batches[0]
    compare_forward_backward(report, npside, ptside, x, y, dtype, key_bias)
    # Between the first backward and the first step: generation runs under no_grad on the initial (equal) weights,
    # so that greedy decoding is compared on weights equal bit for bit, and leaves the gradients alone.
    compare_generation(report, np_model, pt_model, dtype, rc.seed)
    bound = compare_steps(report, npside, ptside, batches, None, rc.steps, trajectory, dtype, key_bias)
    if rc.steps > 0:
        compare_after_steps(report, np_model, pt_model, init, bound, rc.steps, trajectory, dtype, key_bias)
    report.meta["adjustments"] = dict(
        clip_norm=CLIP_NORM_ADJUSTMENT if recipe.grad_clip else None,
        relu_branches_aligned=None,
        relu_inputs_compared=None,
    )
    return report
