"""The layer-by-layer parity report: transformer_np against the PyTorch reference, module by module.

`run_report(ReportConfig(...))` builds both models from one seed (transformer_np initialises, the
weights are copied to parity/model.py by name), feeds both the same padded batch and compares:

- forward: the output of every submodule (forward hooks on both sides, one row per call, the
  second call of a module suffixed `#2`: the shared positional encoding runs for the source,
  then the target), every attention block's weights (`<attn>.attn_weights`), and the training
  loss (transformer_np.loss.sequence_loss against its twin parity.loss.sequence_loss);
- backward: the gradient of every parameter, and of every hooked activation (retain_grad on
  both sides);
- curvature: the Hessian-vector product H v of the training loss in a seeded random direction v
  (the same arrays on both sides), by double backward (transformer_np/hessian.py): the whole
  vector, v . H v and each parameter's block;
- forward mode: the loss's directional derivative J v and the Hessian-vector product by forward over
  reverse, against torch.autograd.forward_ad (parity/forward.py);
- training: N optimizer steps on fresh batches (Adam betas 0.9/0.98 eps 1e-9, the warmup
  schedule as WarmupInverseSqrt on minitensor and LambdaLR on torch, clip_grad_norm_ 1.0), each
  step's loss, parameter gradients and total gradient norm, then every parameter after the last
  step. The trajectory is free in float64 and lockstep in float32 (ReportConfig says why).

Dropout is checked in training mode with identical masks (parity.hooks.SharedDropoutMasks).
How each row is judged: parity/results.py. The two sides: parity/sides.py. The hooks, including
the two adjustments of the reference that every report's header states with their counts (the
float64-accumulated clipping norm, the ReLU branches aligned in float32): parity/hooks.py.
The table, Markdown and JSON: parity/render.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

import minitensor as mt
from minitensor.testing import PARITY_RTOL, error_stats, sum_roundoff_limit
from transformer_np.config import ModelConfig, TrainConfig, get_preset
from transformer_np.data import BOS_ID, EOS_ID, PAD_ID, collate
from transformer_np.hessian import hessian_vector_products
from transformer_np.model import Transformer as NpTransformer
from transformer_np.training import load_checkpoint

from .convert import load_arrays, np_to_torch, state_arrays
from .forward import compare_forward_mode
from .hooks import (
    Capture,
    CheckpointReplay,
    KeyProjectionGrads,
    ReluBranchAligner,
    SharedDropoutMasks,
    to_numpy,
)
from .model import Transformer as TorchTransformer
from .placement import DEVICES, check_pairing, np_reference, pairing, resolve_device, resolve_np_device
from .results import KEY_BIAS, Report, group_of, key_projection, structurally_zero_grad
from .sides import CLIP_NORM_ADJUSTMENT, NpSide, TorchSide

DTYPES = {"float64": (mt.float64, torch.float64), "float32": (mt.float32, torch.float32)}
TRAJECTORIES = ("auto", "free", "lockstep")
NO_ADJUSTMENT = "none: the reference is transformer_np itself, on the CPU"
FIRST_TOKEN = 4  # ids below are PAD, BOS, EOS, UNK


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_options(dtype: str, device: str, steps: int, batch_size: int | None, trajectory: str) -> None:
    """ValueError naming the first option that is not one of its allowed values."""
    resolve_dtype(dtype)
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}: expected one of {list(DEVICES)}")
    if not (_int(steps) and steps >= 0):
        raise ValueError(f"steps must be a non-negative int, got {steps!r}")
    if batch_size is not None and not (_int(batch_size) and batch_size > 0):
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if trajectory not in TRAJECTORIES:
        raise ValueError(f"unknown trajectory {trajectory!r}: expected one of {list(TRAJECTORIES)}")


@dataclass(frozen=True)
class ReportConfig:
    """What one parity report checks. Validated on creation, before any model is built.

    trajectory: how the N optimizer steps run.
      'free'      each side steps on its own gradients; the parameters after N steps must agree.
                  Well-conditioned when gradient round-off is far below Adam's eps (1e-9): float64.
      'lockstep'  each step's gradients are compared (a row per step), then transformer_np takes
                  torch's, so both optimizers (clipping, schedule, Adam) see the same input and the
                  parameters after N steps check the optimizer arithmetic over N steps. Needed in
                  float32: a gradient entry within round-off (~1e-8) of 0 is comparable to eps, so
                  Adam's first update lr * g / (|g| + eps) turns its round-off into a difference of
                  up to lr between two correct implementations.
      'auto'      free for float64, lockstep for float32.
    """

    config: str = "copy-reverse"  # a preset of transformer_np.config.PRESETS (or a label with model_cfg)
    dtype: str = "float64"  # 'float64' or 'float32', both sides
    device: str = "cpu"  # the torch side's device: 'cpu', 'cuda' or 'auto'
    steps: int = 3  # optimizer steps checked after the first backward
    trajectory: str = "auto"  # 'free', 'lockstep' or 'auto' (above)
    seed: int = 0  # weights, batches and dropout masks
    batch_size: int | None = None  # None: the preset's reference batch
    # Overrides of the preset's model; None keeps the preset's value.
    norm_first: bool | None = None
    activation: str | None = None
    dropout: float | None = None
    final_norm: bool | None = None
    positional: str | None = None
    tie_embeddings: bool | None = None
    attention: str | None = None
    activation_checkpointing: bool | None = None
    np_device: str = "cpu"  # transformer_np's device: 'cpu' or 'cuda' (parity/placement.py)
    against: str = "torch"  # the reference: 'torch', or 'np-cpu' (transformer_np on the CPU)
    # A trained model instead of the preset's fresh one (run_summary): its configs and batches.
    np_model: object = None
    model_cfg: ModelConfig | None = None
    train_cfg: TrainConfig | None = None
    batches: list | None = None  # (src, tgt) int64 arrays, tgt with <bos>

    def __post_init__(self):
        if self.model_cfg is None:
            get_preset(self.config)
        check_options(self.dtype, self.device, self.steps, self.batch_size, self.trajectory)
        check_pairing(self.np_device, self.against)

    def model_config(self) -> ModelConfig:
        cfg = self.model_cfg if self.model_cfg is not None else get_preset(self.config).model
        overrides = dict(
            norm_first=self.norm_first,
            activation=self.activation,
            dropout=self.dropout,
            final_norm=self.final_norm,
            positional=self.positional,
            tie_embeddings=self.tie_embeddings,
            attention=self.attention,
            activation_checkpointing=self.activation_checkpointing,
        )
        return cfg.replace(**{k: v for k, v in overrides.items() if v is not None})

    def train_config(self) -> TrainConfig:
        return self.train_cfg if self.train_cfg is not None else get_preset(self.config).train

    def resolved_trajectory(self) -> str:
        if self.trajectory == "auto":
            return "free" if self.dtype == "float64" else "lockstep"
        return self.trajectory


# ----------------------------------------------------------------------------------------------
# Setup: devices, dtypes, models, batches
# ----------------------------------------------------------------------------------------------
def resolve_dtype(dtype: str):
    """'float64' / 'float32' to (minitensor dtype, torch dtype); ValueError naming the supported ones."""
    if dtype not in DTYPES:
        raise ValueError(f"unsupported dtype {dtype!r}: expected one of {sorted(DTYPES)}")
    return DTYPES[dtype]


def build_models(cfg: ModelConfig, dtype: str, device: str, seed: int, np_model=None):
    """(transformer_np model, parity model) with equal weights: minitensor initialises, torch copies.

    With `np_model` (a trained model), it is converted to `dtype` by copying its state into a fresh
    model built under that default dtype.
    """

    mt_dtype, torch_dtype = resolve_dtype(dtype)
    previous = mt.get_default_dtype()
    mt.set_default_dtype(mt_dtype)
    try:
        mt.manual_seed(seed)
        fresh = NpTransformer.from_config(cfg)
    finally:
        mt.set_default_dtype(previous)
    if np_model is not None:
        # A deliberate, explicit cast: a float32 checkpoint is checked in float64 too.
        load_arrays(fresh, {k: v.astype(mt_dtype) for k, v in state_arrays(np_model).items()}, what="build_models")
    # Built under torch's default dtype set to the target one, as minitensor's side is: the float64
    # positional table is then the exact one, not a float32 table cast up.
    torch.manual_seed(seed)
    previous_torch = torch.get_default_dtype()
    torch.set_default_dtype(torch_dtype)
    try:
        ref = TorchTransformer.from_config(cfg).to(device=device)
    finally:
        torch.set_default_dtype(previous_torch)
    np_to_torch(fresh, ref)
    return fresh, ref


def synthetic_batch(
    rng: np.random.Generator, batch_size: int, src_len: int, tgt_len: int, src_vocab: int, tgt_vocab: int
) -> tuple[np.ndarray, np.ndarray]:
    """src (B, S) and tgt (B, T + 1) = <bos> tokens <eos> <pad>...: random lengths, row 0 full, so padding matters."""
    src = np.full((batch_size, src_len), PAD_ID, dtype=np.int64)
    tgt = np.full((batch_size, tgt_len + 1), PAD_ID, dtype=np.int64)
    for b in range(batch_size):
        n = src_len if b == 0 else int(rng.integers(max(1, src_len // 2), src_len + 1))
        m = tgt_len - 1 if b == 0 else int(rng.integers(max(1, (tgt_len - 1) // 2), tgt_len))
        src[b, :n] = rng.integers(FIRST_TOKEN, src_vocab, n)
        tgt[b, 0] = BOS_ID
        tgt[b, 1 : m + 1] = rng.integers(FIRST_TOKEN, tgt_vocab, m)
        tgt[b, m + 1] = EOS_ID
    return src, tgt


def _batches(rc: ReportConfig, cfg: ModelConfig) -> list:
    if rc.batches is None:
        preset = get_preset(rc.config) if rc.model_cfg is None else None
        B = rc.batch_size or (preset.batch_size if preset else 8)
        S, T = (preset.src_len, preset.tgt_len) if preset else (12, 12)
        rng = np.random.default_rng(rc.seed)
        return [synthetic_batch(rng, B, S, T, cfg.src_vocab_size, cfg.tgt_vocab_size) for _ in range(max(rc.steps, 1))]
    if rc.batch_size:
        return [(s[: rc.batch_size], t[: rc.batch_size]) for s, t in rc.batches]
    return list(rc.batches)


# ----------------------------------------------------------------------------------------------
# The comparisons
# ----------------------------------------------------------------------------------------------
KEY_BIAS_NOTE = "exact value 0 (softmax shift-invariance): |grad| <= n*eps*sum|dK| over the n = {n} key rows"


def compare_outputs(report: Report, npcap: Capture, ptcap: Capture, rtol: float) -> None:
    """One 'forward' row per hooked submodule output (a row that could not be made when one side lacks it)."""
    for key, t in ptcap.outputs.items():
        if key in npcap.outputs:
            report.check_close(group_of(key), "forward", key, to_numpy(npcap.outputs[key]), to_numpy(t), rtol)
        else:
            report.missing(group_of(key), "forward", key, rtol, "no such output in transformer_np")
    for key in npcap.outputs.keys() - ptcap.outputs.keys():
        report.missing(group_of(key), "forward", key, rtol, "no such output in torch")


def compare_param_grads(
    report: Report, np_model, pt_model, keys: KeyProjectionGrads | None, dtype: str, key_bias: str | None = KEY_BIAS
) -> None:
    """After both backwards: every parameter's gradient ('rel'; the key biases' by rule 'zero')."""
    rtol = PARITY_RTOL[dtype]
    np_params = dict(np_model.named_parameters())
    pt_params = dict(pt_model.named_parameters())
    for name, p in pt_params.items():
        q = np_params.get(name)
        if q is None or q.grad is None or p.grad is None:
            report.missing(
                "grads",
                "param.grad",
                name,
                rtol,
                "gradient missing on " + ("transformer_np" if q is None or q.grad is None else "torch"),
            )
        elif structurally_zero_grad(name, key_bias):
            rows = keys.rows(key_projection(name))
            report.check_zero(
                "grads",
                "param.grad",
                name,
                (to_numpy(q.grad), to_numpy(p.grad)),
                sum_roundoff_limit(rows, dtype),
                KEY_BIAS_NOTE.format(n=rows.shape[0]),
            )
        else:
            report.check_close("grads", "param.grad", name, to_numpy(q.grad), to_numpy(p.grad), rtol)
    for name in np_params.keys() - pt_params.keys():
        report.missing("grads", "param.grad", name, rtol, "no such parameter in torch")


def compare_output_grads(report: Report, npcap: Capture, ptcap: Capture, rtol: float) -> None:
    """After both backwards: the gradient of every hooked output on the loss's path."""
    for key, t in ptcap.outputs.items():
        ours = npcap.outputs.get(key)
        if ours is None or not t.requires_grad:
            continue
        if t.grad is None and ours.grad is None:
            continue  # off the loss's path on both sides
        if t.grad is None or ours.grad is None:
            report.missing("grads", "grad", key, rtol, "activation gradient on one side only")
        else:
            report.check_close("grads", "grad", key, to_numpy(ours.grad), to_numpy(t.grad), rtol)


def compare_forward_backward(report: Report, npside: NpSide, ptside: TorchSide, src, tgt, masks, dtype) -> None:
    """Forward outputs, attention weights, loss, then every parameter's and activation's gradient."""
    rtol = PARITY_RTOL[dtype]
    npcap, ptcap, keys = Capture(npside.model), Capture(ptside.model), KeyProjectionGrads(ptside.model)
    dense = npside.model.config.attention == "dense"  # tiled attention keeps no weights to compare
    npside.model.store_attention(dense)
    ptside.model.store_attention(dense)
    try:
        np_loss = npside.loss(src, tgt)
        pt_loss = ptside.loss(src, tgt)
        if masks is not None:
            masks.finish_step()
    finally:
        for hooks in (npcap, ptcap, keys):
            hooks.remove()
    compare_outputs(report, npcap, ptcap, rtol)
    np_mods = dict(npside.model.named_modules())
    for name, m in ptside.model.named_modules():
        if hasattr(m, "attn_weights") and dense:
            ours = getattr(np_mods.get(name), "attn_weights", None)
            if ours is None or m.attn_weights is None:
                report.missing(group_of(name), "attn", name + ".attn_weights", rtol, "attention weights not stored")
            else:
                report.check_close(group_of(name), "attn", name + ".attn_weights", ours, m.attn_weights, rtol)
    npside.model.store_attention(False)
    ptside.model.store_attention(False)
    report.check_close("loss", "loss", "loss", to_numpy(np_loss), to_numpy(pt_loss), rtol)

    np_loss.backward()
    pt_loss.backward()
    compare_param_grads(report, npside.model, ptside.model, keys, dtype)
    compare_output_grads(report, npcap, ptcap, rtol)


HVP_NOTE = "the key biases' entries are exactly 0 (their gradient is identically 0) and are judged within this vector"


def compare_hvp(report: Report, npside: NpSide, ptside: TorchSide, src, tgt, masks, dtype: str, seed: int) -> None:
    """The Hessian-vector product of the training loss on the first batch, in one random direction (the same
    seeded arrays on both sides): the whole vector, v . H v, and each parameter's block (rule 'rel')."""
    rtol = PARITY_RTOL[dtype]
    np_params = dict(npside.model.named_parameters())
    pt_params = dict(ptside.model.named_parameters())
    rng = np.random.default_rng(seed + 2)
    direction = {name: rng.standard_normal(tuple(p.shape)).astype(dtype) for name, p in pt_params.items()}
    np_loss, pt_loss = npside.loss(src, tgt), ptside.loss(src, tgt)
    if masks is not None:
        masks.finish_step()
    _, np_hvp = hessian_vector_products(npside.autograd_grad, np_loss, [np_params[n] for n in pt_params])
    ours = np_hvp([npside.tensor(direction[n]) for n in pt_params], retain_graph=False)
    _, pt_hvp = hessian_vector_products(ptside.autograd_grad, pt_loss, list(pt_params.values()))
    ref = pt_hvp([ptside.tensor(direction[n]) for n in pt_params], retain_graph=False)
    ours = {n: to_numpy(h) for n, h in zip(pt_params, ours)}
    ref = {n: to_numpy(h) for n, h in zip(pt_params, ref)}
    flat = lambda arrays: np.concatenate([arrays[n].reshape(-1) for n in pt_params])
    curvature = lambda arrays: np.array(sum(float((arrays[n] * direction[n]).sum()) for n in pt_params))
    report.check_close("hvp", "hvp", f"H v, all {len(pt_params)} parameters", flat(ours), flat(ref), rtol, HVP_NOTE)
    report.check_close("hvp", "hvp", "v . H v (curvature along v)", curvature(ours), curvature(ref), rtol)
    for name in pt_params:
        if not structurally_zero_grad(name):
            report.check_close("hvp", "hvp", name, ours[name], ref[name], rtol)


def compare_step_grads(
    report: Report,
    npside: NpSide,
    ptside: TorchSide,
    keys: KeyProjectionGrads | None,
    step: int,
    dtype: str,
    key_bias: str | None = KEY_BIAS,
) -> None:
    """Two rows for a later step's backward: the worst parameter gradient ('rel'), the key biases' ('zero')."""
    np_grads = {name: to_numpy(p.grad) for name, p in npside.model.named_parameters()}
    pt_grads = {name: to_numpy(p.grad) for name, p in ptside.model.named_parameters()}
    zero = [name for name in pt_grads if structurally_zero_grad(name, key_bias)]
    plain = [name for name in pt_grads if name not in zero]
    worst = max(plain, key=lambda name: error_stats(np_grads[name], pt_grads[name], scale_free=True)[1])
    report.check_close(
        "after-steps",
        "step",
        f"param grads step {step}",
        np_grads[worst],
        pt_grads[worst],
        PARITY_RTOL[dtype],
        f"worst of {len(plain)}: {worst}",
    )
    if zero:
        rows = {name: keys.rows(key_projection(name)) for name in zero}
        flat = lambda arrays: np.concatenate([a.reshape(-1) for a in arrays])
        report.check_zero(
            "after-steps",
            "step",
            f"key-bias grads step {step}",
            (flat(np_grads[n] for n in zero), flat(pt_grads[n] for n in zero)),
            flat(sum_roundoff_limit(rows[n], dtype) for n in zero),
            f"{len(zero)} key biases: exact value 0, |grad| <= n*eps*sum|dK| over their key rows",
        )


def sync_grads(npside: NpSide, ptside: TorchSide) -> None:
    """Lockstep: give transformer_np torch's gradients (already compared), so both optimizers see the same input."""
    np_params = dict(npside.model.named_parameters())
    for name, p in ptside.model.named_parameters():
        np_params[name].grad.copy_(to_numpy(p.grad))  # (onto the gradient's device)


DRIFT_NOTE = "gradient identically 0: exact value = init; each side within Adam's step bound of init"


def key_bias_grad_max(npside: NpSide, ptside: TorchSide, key_bias: str | None = KEY_BIAS) -> float:
    """The largest |entry| of any key bias's gradient on either side (round-off: its exact value is 0)."""
    sides = (dict(npside.model.named_parameters()), dict(ptside.model.named_parameters()))
    return max(
        (
            float(np.abs(to_numpy(params[name].grad)).max(initial=0.0))
            for params in sides
            for name in params
            if structurally_zero_grad(name, key_bias)
        ),
        default=0.0,
    )


def adam_step_bound(lrs: list, grad_maxes: list, betas, eps: float) -> float:
    """The most Adam can move a parameter whose gradients stay within grad_maxes[t] at step t: a sum over the steps of

        lr_t * min(max(1, (1 - b1) / sqrt(1 - b2)), G_t / eps),    G_t = max(grad_maxes[:t + 1]).

    Adam's update m_hat / (sqrt(v_hat) + eps) is at most 1 in magnitude when 1 - b1 <= sqrt(1 - b2), and at
    most (1 - b1) / sqrt(1 - b2) otherwise (Kingma & Ba 2015, sec. 2.1); and since m_hat is an average of the
    gradients so far and the denominator is at least eps, also at most G_t / eps. Clipping only shrinks them.
    """
    b1, b2 = betas
    cap = max(1.0, (1 - b1) / (1 - b2) ** 0.5)
    bound, running = 0.0, 0.0
    for lr, g in zip(lrs, grad_maxes, strict=True):
        running = max(running, g)
        bound += lr * min(cap, running / eps)
    return bound


def drift_limit(init: np.ndarray, bound: float, steps: int, eps: float) -> float:
    """How far a parameter with an identically zero gradient may move from its initial value `init` in `steps` Adam
    steps: Adam's step bound (adam_step_bound) plus the rounding of each step's update p - lr * u (one eps * |p| per
    step, |p| at most |init| + bound)."""
    return bound + steps * eps * (float(np.abs(init).max(initial=0.0)) + bound)


def compare_after_steps(
    report: Report,
    np_model,
    pt_model,
    init: dict,
    bound: float,
    steps: int,
    trajectory: str,
    dtype: str,
    key_bias: str | None = KEY_BIAS,
) -> None:
    """Every parameter after the steps; in the free trajectory the key biases by Adam's step bound ('drift').

    Adam turns the key bias's round-off gradient into steps of up to lr each, so two correct
    implementations drift apart by round-off amplified toward lr: each side must stay within drift_limit of its
    initial value, the exact one.
    """
    rtol = PARITY_RTOL[dtype]
    eps = float(np.finfo(np.dtype(dtype)).eps)
    ours, ref = state_arrays(np_model), state_arrays(pt_model)
    for name in ref:
        if name not in ours:
            report.missing("after-steps", "param", name, rtol, "no such parameter in transformer_np")
        elif structurally_zero_grad(name, key_bias) and trajectory == "free":
            limit = drift_limit(init[name], bound, steps, eps)
            report.check_drift(name, ours[name], ref[name], init[name], limit, DRIFT_NOTE)
        else:
            report.check_close("after-steps", "param", name, ours[name], ref[name], rtol)


def compare_steps(
    report: Report,
    npside: NpSide,
    ptside: TorchSide,
    batches,
    masks,
    steps: int,
    trajectory: str,
    dtype: str,
    key_bias: str | None = KEY_BIAS,
) -> float:
    """The N optimizer steps (the first on the gradients already compared), each later step's loss, gradients and
    gradient norm compared; returns Adam's step bound for the key biases over these steps (adam_step_bound).

    The sides may be the encoder-decoder's (parity/sides.py) or the GPT's (parity/gpt/sides.py): each batch is
    the pair their `loss` takes; `key_bias` names the biases whose gradient is identically 0 (results.py)."""
    rtol = PARITY_RTOL[dtype]
    keys = None if key_bias is None else KeyProjectionGrads(ptside.model, "." + key_projection(key_bias))
    lrs, key_grads = [], []
    for i in range(steps):
        if i > 0:
            s, t = batches[i % len(batches)]
            npside.zero_grad()
            ptside.zero_grad()
            np_loss, pt_loss = npside.loss(s, t), ptside.loss(s, t)
            if masks is not None:
                masks.finish_step()
            report.check_close("after-steps", "step", f"loss step {i + 1}", to_numpy(np_loss), to_numpy(pt_loss), rtol)
            np_loss.backward()
            pt_loss.backward()
            compare_step_grads(report, npside, ptside, keys, i + 1, dtype, key_bias)
        if trajectory == "lockstep":
            sync_grads(npside, ptside)
        lrs.append(ptside.opt.param_groups[0]["lr"])
        key_grads.append(key_bias_grad_max(npside, ptside, key_bias))
        n_np, n_pt = npside.step(), ptside.step()
        if n_np is not None:
            report.check_close("after-steps", "step", f"grad norm step {i + 1}", n_np, n_pt, rtol)
    if keys is not None:
        keys.remove()
    return adam_step_bound(lrs, key_grads, npside.train.betas, npside.train.eps)


# ----------------------------------------------------------------------------------------------
# The report
# ----------------------------------------------------------------------------------------------
def run_report(rc: ReportConfig) -> Report:
    """Build, feed, compare; returns the Report (its `.passed` says whether every check is within its limit)."""
    if not isinstance(rc, ReportConfig):
        raise TypeError(f"run_report: expected a ReportConfig, got {type(rc).__name__}")
    cfg, train = rc.model_config(), rc.train_config()
    dtype, rtol, trajectory = rc.dtype, PARITY_RTOL[rc.dtype], rc.resolved_trajectory()
    device = resolve_device(rc.device)
    if device == "cuda":
        # Full float32 matmuls: TF32 would round inputs to 10 mantissa bits (torch's default is off; make sure).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    np_device = resolve_np_device(rc.np_device)
    np_model, pt_model = build_models(cfg, dtype, device, rc.seed, rc.np_model)
    if rc.against == "np-cpu":  # the same engine on the CPU, equal weights (taken before the subject moves)
        pt_model = np_reference(np_model)
    np_model.to(np_device)
    np_model.train()
    pt_model.train()
    if cfg.attention == "tiled":
        # Each SDPA draws its dropout inside its kernel (ours from counters, torch's its own): no mask can be shared,
        # so the attention-weight dropout is off on both sides; every other dropout keeps its shared masks.
        for model in (np_model, pt_model):
            for m in model.modules():
                if hasattr(m, "attn_weights"):
                    m.dropout.p = 0.0
        report_notes = dict(attention_dropout="off: tiled attention draws its mask inside the kernel on each side")
    else:
        report_notes = {}
    Reference = NpSide if rc.against == "np-cpu" else TorchSide
    npside, ptside = NpSide(np_model, cfg, train), Reference(pt_model, cfg, train)
    masks = SharedDropoutMasks(rc.seed + 1) if cfg.dropout > 0 else None
    if masks is not None:
        masks.attach(np_model, pt_model)
    replay = CheckpointReplay(masks) if cfg.activation_checkpointing else None
    if replay is not None:
        replay.attach(np_model, pt_model)
    # Registered before the report's own hooks, so they record the aligned outputs.
    aligner = ReluBranchAligner(np_model, pt_model, dtype) if cfg.activation == "relu" else None

    batches = _batches(rc, cfg)
    src, tgt = batches[0]
    report = Report(
        meta=dict(
            config=rc.config,
            dtype=dtype,
            device=device,
            np_device=np_device,
            against=rc.against,
            pairing=pairing(np_device, device, rc.against),
            seed=rc.seed,
            steps=rc.steps,
            batch=f"B={src.shape[0]} S={src.shape[1]} T={tgt.shape[1] - 1}",
            trajectory=trajectory,
            rtol=rtol,
            model=cfg.to_dict(),
            train=train.to_dict(),
            torch=torch.__version__,
        )
    )
    init = state_arrays(pt_model)
    compare_forward_backward(report, npside, ptside, src, tgt, masks, dtype)
    if cfg.attention == "dense":
        compare_hvp(report, npside, ptside, src, tgt, masks, dtype, rc.seed)
        if cfg.activation_checkpointing:  # torch 2.13's checkpoint refuses its own forward AD: the recompute saves
            # the JVP formulas' tensors in another order, and its determinism check raises (CheckpointError)
            report.meta["forward-mode"] = "skipped: torch.utils.checkpoint fails under torch's forward AD"
        else:
            compare_forward_mode(report, np_model, pt_model, src, tgt, train.label_smoothing, dtype, rc.seed)
    else:  # the tiled kernel refuses create_graph (first order only): no Hessian-vector product to compare, by
        # double backward or by forward over reverse
        report.meta["hvp"] = "skipped: tiled attention is differentiable once only"
        report.meta["forward-mode"] = "skipped: tiled attention is differentiable once only"
    bound = compare_steps(report, npside, ptside, batches, masks, rc.steps, trajectory, dtype)
    if rc.steps > 0:
        compare_after_steps(report, np_model, pt_model, init, bound, rc.steps, trajectory, dtype)
    if masks is not None:
        masks.detach(np_model, pt_model)
    if replay is not None:
        replay.detach(np_model, pt_model)
    if aligner is not None:
        aligner.remove()
    report.meta["adjustments"] = dict(
        **report_notes,
        clip_norm=(CLIP_NORM_ADJUSTMENT if rc.against == "torch" else NO_ADJUSTMENT) if train.clip_grad_norm else None,
        relu_branches_aligned=None if aligner is None else aligner.aligned,
        relu_inputs_compared=None if aligner is None else aligner.seen,
    )
    return report


def run_summary(
    checkpoint: str | None = None,
    config: str | None = None,
    dtype: str = "float64",
    device: str = "auto",
    steps: int = 3,
    batch_size: int | None = None,
    seed: int = 0,
    trajectory: str = "auto",
):
    """(Report, description) for a trained transformer_np checkpoint, or for a preset's fresh model.

    A checkpoint's model (state via mt.save, configs in the same file; transformer_np/training/checkpoint.py) is
    copied into a model of `dtype`, its weights into torch, and checked on batches of its own
    task (held-out pairs first, then training pairs for the optimizer steps), in training mode
    with its dropout and identical masks. The steps use the paper's recipe (warmup schedule,
    Adam 0.9/0.98/1e-9, clipping 1.0, label smoothing as the checkpoint's recipe says).
    """
    if (checkpoint is None) == (config is None):
        raise ValueError("summary: give exactly one of --checkpoint or --config")
    common = dict(dtype=dtype, device=device, steps=steps, batch_size=batch_size, seed=seed, trajectory=trajectory)
    if config is not None:
        return run_report(ReportConfig(config, **common)), f"the {config} preset"

    check_options(dtype, device, steps, batch_size, trajectory)  # before the file is read
    resolve_device(device)
    ck = load_checkpoint(checkpoint)
    B = batch_size or 16
    train_pairs, held = ck.task.splits(train_size=B * max(steps, 1), eval_size=B, seed=seed + 12345)
    pairs = (held + train_pairs) if held else train_pairs
    batches = [collate(pairs[i : i + B]) for i in range(0, min(len(pairs), B * max(steps, 1)), B)]
    train = ck.train_cfg.replace(schedule="warmup", weight_decay=0.0, clip_grad_norm=ck.train_cfg.clip_grad_norm or 1.0)
    report = run_report(
        ReportConfig(
            "checkpoint",
            np_model=ck.model,
            model_cfg=ck.model_cfg,
            train_cfg=train,
            batches=batches,
            **{**common, "batch_size": None},
        )
    )
    report.meta["checkpoint"] = ck.path
    report.meta["checkpoint_step"] = ck.step
    return report, f"checkpoint {ck.path} (step {ck.step}, task {ck.task.name})"
