"""The layer-by-layer parity report: transformer_np against the PyTorch reference, module by module.

`run_report(...)` builds both models from one seed (transformer_np initialises, the weights are
copied to parity/model.py by name), feeds both the same padded batch and compares:

- forward: the output of every submodule (forward hooks on both sides, one row per call, the
  second call of a module suffixed `#2`: the shared positional encoding runs for the source,
  then the target), every attention block's weights (`<attn>.attn_weights`), and the loss
  (label-smoothed cross-entropy that ignores PAD);
- backward: the gradient of every parameter, and of every hooked activation (retain_grad on
  both sides);
- training: N optimizer steps on fresh batches (Adam betas 0.9/0.98 eps 1e-9, the warmup
  schedule as WarmupInverseSqrt on minitensor and LambdaLR on torch, clip_grad_norm_ 1.0), each
  step's loss, parameter gradients and total gradient norm, then every parameter after the last
  step. The trajectory is free in float64 and lockstep in float32 (run_report says why).

The reference's total gradient norm for clipping is accumulated in float64 (TorchSide.step says
why); everything else on the torch side is stock PyTorch in the report's dtype.

Dropout is checked in training mode with identical masks: every Dropout module on both sides
gets a `mask_fn`; the minitensor side draws boolean keep-masks from one seeded generator and
records them per module in call order, the torch side replays them.

Errors use `minitensor.testing.error_stats` (max abs, and max relative with a near-zero floor)
against `PARITY_RTOL[dtype]`; torch is the reference. Rows are grouped (embeddings, encoder,
decoder, logits, loss, grads, after-steps) for the summary.

Two places where the math, not the code, decides, each judged by its own stated rule (the row's
`rule` and `note` say so, and its columns still show the plain comparison):
- The key projection's bias W_k.bias has a gradient that is identically zero (softmax is
  shift-invariant along a query row); both sides compute round-off. Its gradient must be zero to
  round-off (FLOOR[dtype] times the sibling W_q.bias gradient's scale), and, in the free
  trajectory, after the steps each side must stay within Adam's step bound (sum of the lrs) of
  its initial value, since Adam with eps 1e-9 turns round-off into steps of up to lr
  (`structurally_zero_grad`, `drift_row`). In lockstep the plain comparison applies.
- ReLU's derivative jumps at 0: a float32 pre-activation within round-off of 0 may land on
  different sides in the two frameworks. The torch side then takes transformer_np's branch for
  those entries only (`ReluBranchAligner`); the count is in the report's meta. GELU needs nothing.
"""
from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

import minitensor as mt
import minitensor.nn.functional as mF
from minitensor.testing import FLOOR, PARITY_RTOL, error_stats
from transformer_np import masks as np_masks
from transformer_np.config import ModelConfig, get_preset
from transformer_np.data import BOS_ID, EOS_ID, PAD_ID

from . import masks as pt_masks
from .convert import load_arrays, np_to_torch, state_arrays
from .model import Dropout as TorchDropout
from .model import Transformer as TorchTransformer

DTYPES = {"float64": (mt.float64, torch.float64), "float32": (mt.float32, torch.float32)}
GROUPS = ("embeddings", "encoder", "decoder", "logits", "loss", "grads", "after-steps")
FIRST_TOKEN = 4                     # ids below are PAD, BOS, EOS, UNK


# ----------------------------------------------------------------------------------------------
# Rows and the report
# ----------------------------------------------------------------------------------------------
@dataclass
class Row:
    group: str                      # one of GROUPS
    kind: str                       # 'forward', 'attn', 'loss', 'grad', 'param.grad', 'step', 'param'
    name: str                       # module path or parameter name
    shape: tuple
    max_abs: float
    max_rel: float
    rtol: float
    ok: bool
    note: str = ""
    rule: str = "rtol"              # 'rtol': max_rel <= rtol; 'zero' / 'drift': judged as the note says


@dataclass
class Report:
    meta: dict
    rows: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.rows) and all(r.ok for r in self.rows)

    def failures(self) -> list:
        return [r for r in self.rows if not r.ok]

    def add(self, group, kind, name, ours, ref, rtol, note=""):
        ours = np.asarray(ours)
        ref = np.asarray(ref)
        if ours.shape != ref.shape:
            self.rows.append(Row(group, kind, name, tuple(ref.shape), math.inf, math.inf, rtol, False,
                                 f"shape {tuple(ours.shape)} vs reference {tuple(ref.shape)}"))
            return
        a, r = error_stats(ours, ref)
        self.rows.append(Row(group, kind, name, tuple(ref.shape), a, r, rtol, bool(r <= rtol), note))

    def missing(self, group, kind, name, rtol, note):
        self.rows.append(Row(group, kind, name, (), math.inf, math.inf, rtol, False, note))

    def names(self, kind: str) -> set:
        return {r.name for r in self.rows if r.kind == kind}

    def summary(self) -> dict:
        """Worst relative error and pass/fail per group."""
        out = {}
        for g in GROUPS:
            rows = [r for r in self.rows if r.group == g]
            if rows:
                plain = [r for r in rows if r.rule == "rtol"] or rows
                worst = max(plain, key=lambda r: r.max_rel)
                out[g] = dict(rows=len(rows), worst=worst.name, kind=worst.kind, max_abs=worst.max_abs,
                              max_rel=worst.max_rel, rtol=worst.rtol, ok=all(r.ok for r in rows))
        return out

    def table(self, only_failures: bool = False) -> str:
        rows = self.failures() if only_failures else self.rows
        head = ("group", "kind", "module / parameter", "shape", "max abs", "max rel", "rtol", "")
        body = [(r.group, r.kind, r.name, "x".join(map(str, r.shape)) or "()", f"{r.max_abs:.2e}",
                 f"{r.max_rel:.2e}", f"{r.rtol:.0e}", ("ok" if r.ok else "FAIL") + (f" {r.note}" if r.note else ""))
                for r in rows]
        widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
        line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
        return "\n".join([line(head), line(["-" * w for w in widths])] + [line(b) for b in body])

    def summary_table(self) -> str:
        lines = [f"{'group':<12} {'rows':>5}  {'max rel':>9}  {'rtol':>6}  result  worst"]
        for g, s in self.summary().items():
            lines.append(f"{g:<12} {s['rows']:>5}  {s['max_rel']:9.2e}  {s['rtol']:6.0e}  "
                         f"{'ok' if s['ok'] else 'FAIL':<6}  {s['kind']} {s['worst']}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return dict(meta=self.meta, passed=self.passed, summary=self.summary(),
                    rows=[dict(asdict(r), shape=list(r.shape)) for r in self.rows])

    def to_markdown(self) -> str:
        m = self.meta
        out = [f"# Parity report: {m['config']} ({m['dtype']}, {m['device']})", "",
               f"transformer_np against parity/model.py (PyTorch {torch.__version__}), seed {m['seed']}, "
               f"batch {m['batch']}, {m['steps']} optimizer steps ({m['trajectory']} trajectory), "
               f"dropout {m['model']['dropout']}, "
               f"norm_first={m['model']['norm_first']}, activation={m['model']['activation']}.", "",
               f"Result: **{'PASS' if self.passed else 'FAIL'}** ({len(self.rows)} checks, "
               f"{len(self.failures())} failed). Measure: minitensor.testing.error_stats, rtol PARITY_RTOL.", "",
               "## Summary", "", "| group | rows | worst | max rel | rtol | result |", "|---|---|---|---|---|---|"]
        for g, s in self.summary().items():
            out.append(f"| {g} | {s['rows']} | {s['kind']} `{s['worst']}` | {s['max_rel']:.2e} | {s['rtol']:.0e} | "
                       f"{'ok' if s['ok'] else 'FAIL'} |")
        out += ["", "## Every check", "", "| group | kind | module / parameter | shape | max abs | max rel | rtol | result |",
                "|---|---|---|---|---|---|---|---|"]
        for r in self.rows:
            out.append(f"| {r.group} | {r.kind} | `{r.name}` | {'x'.join(map(str, r.shape))} | {r.max_abs:.2e} | "
                       f"{r.max_rel:.2e} | {r.rtol:.0e} | {'ok' if r.ok else 'FAIL'}{' ' + r.note if r.note else ''} |")
        return "\n".join(out) + "\n"

    def write(self, out_dir: str) -> tuple[str, str]:
        os.makedirs(out_dir, exist_ok=True)
        stem = f"parity_{self.meta['config']}_{self.meta['dtype']}_{self.meta['device']}"
        jpath, mpath = os.path.join(out_dir, stem + ".json"), os.path.join(out_dir, stem + ".md")
        with open(jpath, "w") as f:
            json.dump(self.to_dict(), f, indent=1)
        with open(mpath, "w") as f:
            f.write(self.to_markdown())
        return jpath, mpath


def group_of(name: str) -> str:
    """The summary group of a module path or parameter name."""
    head = name.split(".")[0].split("#")[0]
    if head in ("src_embed", "tgt_embed", "pos_encoding"):
        return "embeddings"
    if head in ("encoder", "decoder"):
        return head
    if head == "generator":
        return "logits"
    return "loss"


# ----------------------------------------------------------------------------------------------
# Quantities fixed by the math, not by the arithmetic
# ----------------------------------------------------------------------------------------------
def structurally_zero_grad(name: str) -> bool:
    """True for parameters whose gradient is identically zero: the key projection's bias.

    softmax is shift-invariant along each query row, and q . (k_j + b_k) = q . k_j + q . b_k adds
    the same number to every key j of the row, so d loss / d b_k = 0 for any input. Both sides
    compute round-off there (~eps times the magnitude of the terms that cancel), which no
    relative measure can compare; torch.nn.MultiheadAttention's in_proj_bias[D:2D] is the same.
    """
    return name.endswith("W_k.bias")


def zero_to_roundoff(ours, ref, dtype: str, scale: float) -> tuple[float, float, bool]:
    """(deviation, limit, ok) for a quantity that is exactly zero in exact arithmetic.

    Both |ours| and |ref| must stay within round-off: FLOOR[dtype] (about 100 machine epsilons)
    times max(1, scale), `scale` the magnitude of a sibling quantity built the same way (the floor
    error_stats uses, with that scale).
    """
    dev = max(float(np.abs(ours).max(initial=0.0)), float(np.abs(ref).max(initial=0.0)))
    limit = FLOOR[dtype] * max(1.0, scale)
    return dev, limit, dev <= limit


def zero_row(report: "Report", group: str, kind: str, name: str, ours, ref, scale: float, dtype: str, what: str) -> None:
    """Judge a quantity that is exactly zero in exact arithmetic (zero_to_roundoff); the columns
    still show the plain comparison of the two sides."""
    a, r = error_stats(ours, ref)
    dev, limit, _ = zero_to_roundoff(ours, ref, dtype, scale)
    report.rows.append(Row(group, kind, name, tuple(np.shape(ref)), a, r, PARITY_RTOL[dtype], dev <= limit,
                           f"{what}: exact value 0, judged |value| {dev:.1e} <= round-off {limit:.1e}", "zero"))


def drift_row(report: "Report", name: str, ours, ref, init, bound: float, dtype: str) -> None:
    """Judge a parameter whose exact trajectory is constant (its gradient is identically zero).

    Adam turns the round-off gradient into steps of up to lr each (its update m_hat / (sqrt(v_hat)
    + eps) is at most 1 in magnitude when 1 - beta1 <= sqrt(1 - beta2), Kingma & Ba 2015 sec. 2.1),
    so two correct implementations drift apart by round-off amplified to lr. Judged: each side
    stays within `bound` = sum of the lrs used of its initial value; the columns show the plain comparison.
    """
    a, r = error_stats(ours, ref)
    drift = max(float(np.abs(ours - init).max(initial=0.0)), float(np.abs(ref - init).max(initial=0.0)))
    report.rows.append(Row("after-steps", "param", name, tuple(np.shape(ref)), a, r, PARITY_RTOL[dtype],
                           drift <= bound, f"gradient identically 0: exact value = init, judged drift "
                                           f"{drift:.1e} <= Adam's bound sum(lr) {bound:.1e}", "drift"))


# ----------------------------------------------------------------------------------------------
# Setup: devices, dtypes, models, batches
# ----------------------------------------------------------------------------------------------
class DeviceError(RuntimeError):
    """A device was asked for that this machine does not have."""


def resolve_device(device: str) -> str:
    """'cpu', 'cuda' or 'auto' (cuda when available) to a torch device string; clear error otherwise."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError("cuda requested but no GPU: use --device cpu")
        return "cuda"
    if device == "cpu":
        return "cpu"
    raise ValueError(f"unknown device {device!r}: expected 'cpu', 'cuda' or 'auto'")


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
    from transformer_np.model import Transformer as NpTransformer
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


def synthetic_batch(rng: np.random.Generator, batch_size: int, src_len: int, tgt_len: int,
                    src_vocab: int, tgt_vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """src (B, S) and tgt (B, T + 1) = <bos> tokens <eos> <pad>...: random lengths, row 0 full, so padding matters."""
    src = np.full((batch_size, src_len), PAD_ID, dtype=np.int64)
    tgt = np.full((batch_size, tgt_len + 1), PAD_ID, dtype=np.int64)
    for b in range(batch_size):
        n = src_len if b == 0 else int(rng.integers(max(1, src_len // 2), src_len + 1))
        m = tgt_len - 1 if b == 0 else int(rng.integers(max(1, (tgt_len - 1) // 2), tgt_len))
        src[b, :n] = rng.integers(FIRST_TOKEN, src_vocab, n)
        tgt[b, 0] = BOS_ID
        tgt[b, 1:m + 1] = rng.integers(FIRST_TOKEN, tgt_vocab, m)
        tgt[b, m + 1] = EOS_ID
    return src, tgt


# ----------------------------------------------------------------------------------------------
# Dropout masks shared between the two sides
# ----------------------------------------------------------------------------------------------
class SharedDropoutMasks:
    """Boolean keep-masks drawn on the minitensor side and replayed on the torch side, per module in call order."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.recorded = defaultdict(list)
        self.position = defaultdict(int)

    def attach(self, np_model, torch_model) -> None:
        for name, m in np_model.named_modules():
            if isinstance(m, mt.nn.Dropout):
                m.mask_fn = self._recorder(name, m.p)
        for name, m in torch_model.named_modules():
            if isinstance(m, TorchDropout):
                m.mask_fn = self._replayer(name)

    def detach(self, np_model, torch_model) -> None:
        for model in (np_model, torch_model):
            for _, m in model.named_modules():
                if hasattr(m, "mask_fn"):
                    m.mask_fn = None

    def _recorder(self, name, p):
        def mask_fn(shape):
            keep = self.rng.random(shape) >= p
            self.recorded[name].append(keep)
            return keep
        return mask_fn

    def _replayer(self, name):
        def mask_fn(shape):
            i = self.position[name]
            if i >= len(self.recorded[name]):
                raise RuntimeError(f"dropout masks: torch called {name} more often ({i + 1}) than transformer_np")
            keep = self.recorded[name][i]
            if keep.shape != tuple(shape):
                raise RuntimeError(f"dropout masks: {name} call {i + 1}: transformer_np drew {keep.shape}, torch wants {shape}")
            self.position[name] += 1
            return keep
        return mask_fn

    def finish_step(self) -> None:
        """Check every recorded mask was replayed, then forget them."""
        unused = {k: len(v) - self.position[k] for k, v in self.recorded.items() if len(v) != self.position[k]}
        if unused:
            raise RuntimeError(f"dropout masks: torch did not use every mask transformer_np drew: {unused}")
        self.recorded.clear()
        self.position.clear()


# ----------------------------------------------------------------------------------------------
# Hooks: every submodule's output, kept for its gradient
# ----------------------------------------------------------------------------------------------
def _tensors(output, is_tensor):
    if is_tensor(output):
        return [("", output)]
    if isinstance(output, (tuple, list)):
        return [(f"[{i}]", t) for i, t in enumerate(output) if is_tensor(t)]
    return []


class Capture:
    """Forward hooks on every named submodule: outputs by path (repeat calls suffixed #2, #3...), grads retained."""

    def __init__(self, model, is_tensor):
        self.is_tensor = is_tensor
        self.outputs = {}
        self.calls = defaultdict(int)
        self.handles = [m.register_forward_hook(self._hook(name)) for name, m in model.named_modules() if name]

    def _hook(self, name):
        def hook(module, inputs, output):
            self.calls[name] += 1
            key = name if self.calls[name] == 1 else f"{name}#{self.calls[name]}"
            for suffix, t in _tensors(output, self.is_tensor):
                if t.requires_grad:
                    t.retain_grad()
                self.outputs[key + suffix] = t
        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


class ReluBranchAligner:
    """Make torch take transformer_np's branch of ReLU where the two disagree only by round-off.

    ReLU's derivative jumps at 0. In float32 a pre-activation within round-off of 0 (about 1e-7
    of the terms summed into it) can be +1e-7 on one side and -1e-7 on the other: both are right
    to float32 precision, yet one side passes the gradient and the other blocks it, and every
    gradient below differs by a whole gradient element. So, on the torch side only, a forward
    hook on each feed-forward `linear1` replaces the few such entries by transformer_np's value
    (they already agree within the forward tolerance, which is checked first) and counts them.
    Only entries whose signs differ and whose values agree within PARITY_RTOL are touched; the
    correction is a constant, so gradients flow as before. Not used with GELU (smooth).
    """

    def __init__(self, np_model, torch_model, dtype: str):
        self.rtol = PARITY_RTOL[dtype]
        self.last = {}
        self.flips = 0
        self.handles = []
        for name, m in np_model.named_modules():
            if name.endswith("feed_forward.linear1"):
                self.handles.append(m.register_forward_hook(self._record(name)))
        for name, m in torch_model.named_modules():
            if name.endswith("feed_forward.linear1"):
                self.handles.append(m.register_forward_hook(self._align(name)))

    def _record(self, name):
        def hook(module, inputs, output):
            self.last[name] = output.data
        return hook

    def _align(self, name):
        def hook(module, inputs, output):
            ours = self.last.pop(name, None)
            if ours is None:
                return None
            ref = output.detach().cpu().numpy()
            flip = (ours > 0) != (ref > 0)
            if not flip.any():
                return None
            # Only a round-off disagreement is aligned: the values must agree as the forward check demands.
            _, rel = error_stats(np.where(flip, ours, ref), ref)
            if rel > self.rtol:
                return None
            self.flips += int(flip.sum())
            delta = torch.as_tensor(np.where(flip, ours - ref, 0).astype(ref.dtype), device=output.device)
            return output + delta
        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


# ----------------------------------------------------------------------------------------------
# One side each: the same steps in two frameworks
# ----------------------------------------------------------------------------------------------
def _np(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().numpy()
    return np.asarray(t.data)


def warmup_lambda(d_model: int, warmup_steps: int, factor: float):
    """The paper's rate for torch's LambdaLR: factor * d^-0.5 * min(step^-0.5, step * warmup^-1.5), step = epoch + 1."""
    def rate(epoch: int) -> float:
        step = epoch + 1
        return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)
    return rate


class NpSide:
    name = "transformer_np"

    def __init__(self, model, cfg, train):
        self.model = model
        self.is_tensor = lambda t: isinstance(t, mt.Tensor)
        self.opt = mt.optim.Adam(model.parameters(), lr=train.lr, betas=tuple(train.betas), eps=train.eps)
        # lr = train.lr * d^-0.5 * min(n^-0.5, n * warmup^-1.5): the base lr carries train.lr, factor 1,
        # exactly as torch's LambdaLR below multiplies its base lr.
        self.sched = mt.optim.lr_scheduler.WarmupInverseSqrt(self.opt, d_model=cfg.d_model,
                                                            warmup_steps=train.warmup_steps, factor=1.0)
        self.clip = train.clip_grad_norm
        self.smoothing = train.label_smoothing

    def loss(self, src, tgt):
        tgt_in, labels = tgt[:, :-1], tgt[:, 1:]
        src_t, tgt_t = mt.tensor(src), mt.tensor(np.ascontiguousarray(tgt_in))
        logits = self.model(src_t, tgt_t, np_masks.padding_mask(src_t, PAD_ID), np_masks.target_mask(tgt_t, PAD_ID))
        V = logits.shape[-1]
        return mF.cross_entropy(logits.reshape(-1, V), mt.tensor(np.ascontiguousarray(labels).reshape(-1)),
                                ignore_index=PAD_ID, label_smoothing=self.smoothing)

    def step(self):
        norm = mt.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip) if self.clip > 0 else None
        self.opt.step()
        self.sched.step()
        return None if norm is None else float(_np(norm) if self.is_tensor(norm) else norm)

    def zero_grad(self):
        self.opt.zero_grad()


class TorchSide:
    name = "torch"

    def __init__(self, model, cfg, train, device):
        self.model = model
        self.device = device
        self.is_tensor = lambda t: isinstance(t, torch.Tensor)
        self.opt = torch.optim.Adam(model.parameters(), lr=train.lr, betas=tuple(train.betas), eps=train.eps)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, warmup_lambda(cfg.d_model, train.warmup_steps, 1.0))
        self.clip = train.clip_grad_norm
        self.smoothing = train.label_smoothing

    def loss(self, src, tgt):
        tgt_in, labels = tgt[:, :-1], tgt[:, 1:]
        src_t = torch.as_tensor(src, device=self.device)
        tgt_t = torch.as_tensor(np.ascontiguousarray(tgt_in), device=self.device)
        logits = self.model(src_t, tgt_t, pt_masks.padding_mask(src_t, PAD_ID), pt_masks.target_mask(tgt_t, PAD_ID))
        V = logits.shape[-1]
        return torch.nn.functional.cross_entropy(
            logits.reshape(-1, V), torch.as_tensor(np.ascontiguousarray(labels).reshape(-1), device=self.device),
            ignore_index=PAD_ID, label_smoothing=self.smoothing)

    def step(self):
        norm = None
        if self.clip > 0:
            # Deviation from torch.nn.utils.clip_grad_norm_, flagged: the total norm is accumulated in
            # float64 (then clipped with torch's own clip_grads_with_norm_). torch's float32 norm sums
            # squares in float32: about 1e-4 relative error for the base model's 5M-entry embedding
            # gradient, more than PARITY_RTOL['float32'], so the reference would be the weaker side.
            grads = [p.grad for p in self.model.parameters() if p.grad is not None]
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, dtype=torch.float64)
                                                         for g in grads]))
            torch.nn.utils.clip_grads_with_norm_(self.model.parameters(), self.clip, norm)
        self.opt.step()
        self.sched.step()
        return None if norm is None else float(norm)

    def zero_grad(self):
        self.opt.zero_grad(set_to_none=True)


# ----------------------------------------------------------------------------------------------
# The report
# ----------------------------------------------------------------------------------------------
def compare_forward_backward(report: Report, npside: NpSide, ptside: TorchSide, src, tgt, masks, dtype) -> None:
    """Forward outputs, attention weights, loss, then every parameter's and activation's gradient."""
    rtol = PARITY_RTOL[dtype]
    npcap, ptcap = Capture(npside.model, npside.is_tensor), Capture(ptside.model, ptside.is_tensor)
    npside.model.store_attention(True)
    ptside.model.store_attention(True)
    try:
        np_loss = npside.loss(src, tgt)
        pt_loss = ptside.loss(src, tgt)
        if masks is not None:
            masks.finish_step()
    finally:
        npcap.remove()
        ptcap.remove()
    for key, t in ptcap.outputs.items():
        if key in npcap.outputs:
            report.add(group_of(key), "forward", key, _np(npcap.outputs[key]), _np(t), rtol)
        else:
            report.missing(group_of(key), "forward", key, rtol, "no such output in transformer_np")
    for key in npcap.outputs.keys() - ptcap.outputs.keys():
        report.missing(group_of(key), "forward", key, rtol, "no such output in torch")
    np_mods = dict(npside.model.named_modules())
    for name, m in ptside.model.named_modules():
        if hasattr(m, "attn_weights"):
            ours = getattr(np_mods.get(name), "attn_weights", None)
            if ours is None or m.attn_weights is None:
                report.missing(group_of(name), "attn", name + ".attn_weights", rtol, "attention weights not stored")
            else:
                report.add(group_of(name), "attn", name + ".attn_weights", ours, m.attn_weights, rtol)
    npside.model.store_attention(False)
    ptside.model.store_attention(False)
    report.add("loss", "loss", "loss", _np(np_loss), _np(pt_loss), rtol)

    np_loss.backward()
    pt_loss.backward()
    np_params = dict(npside.model.named_parameters())
    pt_params = dict(ptside.model.named_parameters())
    for name, p in pt_params.items():
        q = np_params.get(name)
        if q is None or q.grad is None or p.grad is None:
            report.missing("grads", "param.grad", name, rtol, "gradient missing on "
                           + ("transformer_np" if q is None or q.grad is None else "torch"))
        elif structurally_zero_grad(name):
            sibling = pt_params[name.replace("W_k.bias", "W_q.bias")].grad
            zero_row(report, "grads", "param.grad", name, _np(q.grad), _np(p.grad),
                     float(np.abs(_np(sibling)).max()), dtype, "softmax shift-invariance")
        else:
            report.add("grads", "param.grad", name, _np(q.grad), _np(p.grad), rtol)
    for name in np_params.keys() - pt_params.keys():
        report.missing("grads", "param.grad", name, rtol, "no such parameter in torch")
    for key, t in ptcap.outputs.items():
        ours = npcap.outputs.get(key)
        if ours is None or not t.requires_grad:
            continue
        if t.grad is None and ours.grad is None:
            continue                                     # off the loss's path on both sides
        if t.grad is None or ours.grad is None:
            report.missing("grads", "grad", key, rtol, "activation gradient on one side only")
        else:
            report.add("grads", "grad", key, _np(ours.grad), _np(t.grad), rtol)


def compare_step_grads(report: Report, npside: NpSide, ptside: TorchSide, step: int, dtype: str) -> None:
    """One row for a later step's backward: the worst parameter-gradient error (W_k.bias: zero to round-off)."""
    np_params = dict(npside.model.named_parameters())
    pt_params = dict(ptside.model.named_parameters())
    worst, worst_name, worst_abs, zero_ok = 0.0, "", 0.0, True
    for name, p in pt_params.items():
        ours, ref = _np(np_params[name].grad), _np(p.grad)
        if structurally_zero_grad(name):
            scale = float(np.abs(_np(pt_params[name.replace("W_k.bias", "W_q.bias")].grad)).max())
            zero_ok &= zero_to_roundoff(ours, ref, dtype, scale)[2]
            continue
        a, r = error_stats(ours, ref)
        if r >= worst:
            worst, worst_name, worst_abs = r, name, a
    rtol = PARITY_RTOL[dtype]
    report.rows.append(Row("after-steps", "step", f"param grads step {step}", (), worst_abs, worst, rtol,
                           worst <= rtol and zero_ok, f"worst: {worst_name}" + ("" if zero_ok else "; W_k.bias not 0")))


def sync_grads(npside: NpSide, ptside: TorchSide) -> None:
    """Lockstep: give transformer_np torch's gradients (already compared), so both optimizers see the same input."""
    np_params = dict(npside.model.named_parameters())
    for name, p in ptside.model.named_parameters():
        np_params[name].grad.data[...] = _np(p.grad)


TRAJECTORIES = ("auto", "free", "lockstep")


def run_report(config: str = "copy-reverse", dtype: str = "float64", device: str = "cpu", steps: int = 3,
               norm_first: bool | None = None, activation: str | None = None, dropout: float | None = None,
               final_norm: bool | None = None, positional: str | None = None, tie_embeddings: bool | None = None,
               batch_size: int | None = None, seed: int = 0, np_model=None, model_cfg: ModelConfig | None = None,
               train_cfg=None, batches=None, trajectory: str = "auto") -> Report:
    """Build, feed, compare; returns the Report (its `.passed` says whether every check is within tolerance).

    `np_model`/`model_cfg`/`train_cfg` (the summary of a trained checkpoint) replace the preset's
    fresh model; `batches` (a list of (src, tgt) int64 arrays, tgt with <bos>) replaces the synthetic ones.

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
    preset = get_preset(config) if model_cfg is None else None
    resolve_dtype(dtype)
    rtol = PARITY_RTOL[dtype]
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be a non-negative int, got {steps!r}")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    cfg = model_cfg if model_cfg is not None else preset.model
    overrides = dict(norm_first=norm_first, activation=activation, dropout=dropout, final_norm=final_norm,
                     positional=positional, tie_embeddings=tie_embeddings)
    cfg = cfg.replace(**{k: v for k, v in overrides.items() if v is not None})
    train = train_cfg if train_cfg is not None else preset.train
    device = resolve_device(device)
    if trajectory not in TRAJECTORIES:
        raise ValueError(f"unknown trajectory {trajectory!r}: expected one of {list(TRAJECTORIES)}")
    if trajectory == "auto":
        trajectory = "free" if dtype == "float64" else "lockstep"

    if device == "cuda":
        # Full float32 matmuls: TF32 would round inputs to 10 mantissa bits (torch's default is off; make sure).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    np_model, pt_model = build_models(cfg, dtype, device, seed, np_model)
    np_model.train()
    pt_model.train()
    npside, ptside = NpSide(np_model, cfg, train), TorchSide(pt_model, cfg, train, device)
    masks = SharedDropoutMasks(seed + 1) if cfg.dropout > 0 else None
    if masks is not None:
        masks.attach(np_model, pt_model)
    # Registered before the report's own hooks, so they record the aligned outputs.
    aligner = ReluBranchAligner(np_model, pt_model, dtype) if cfg.activation == "relu" else None

    rng = np.random.default_rng(seed)
    if batches is None:
        B = batch_size or (preset.batch_size if preset else 8)
        S, T = (preset.src_len, preset.tgt_len) if preset else (12, 12)
        batches = [synthetic_batch(rng, B, S, T, cfg.src_vocab_size, cfg.tgt_vocab_size) for _ in range(max(steps, 1))]
    elif batch_size:
        batches = [(s[:batch_size], t[:batch_size]) for s, t in batches]
    src, tgt = batches[0]
    report = Report(meta=dict(config=config, dtype=dtype, device=device, seed=seed, steps=steps,
                              batch=f"B={src.shape[0]} S={src.shape[1]} T={tgt.shape[1] - 1}",
                              trajectory=trajectory, model=cfg.to_dict(), train=train.to_dict(),
                              torch=torch.__version__))

    init = state_arrays(pt_model)
    compare_forward_backward(report, npside, ptside, src, tgt, masks, dtype)
    lrs = []
    for i in range(steps):
        if i > 0:
            s, t = batches[i % len(batches)]
            npside.zero_grad()
            ptside.zero_grad()
            np_loss, pt_loss = npside.loss(s, t), ptside.loss(s, t)
            if masks is not None:
                masks.finish_step()
            report.add("after-steps", "step", f"loss step {i + 1}", _np(np_loss), _np(pt_loss), rtol)
            np_loss.backward()
            pt_loss.backward()
            compare_step_grads(report, npside, ptside, i + 1, dtype)
        if trajectory == "lockstep":
            sync_grads(npside, ptside)
        lrs.append(ptside.opt.param_groups[0]["lr"])
        n_np, n_pt = npside.step(), ptside.step()
        if n_np is not None:
            report.add("after-steps", "step", f"grad norm step {i + 1}", n_np, n_pt, rtol)
    if steps > 0:
        ours, ref = state_arrays(np_model), state_arrays(pt_model)
        for name in ref:
            if name in ours and structurally_zero_grad(name) and trajectory == "free":
                drift_row(report, name, ours[name], ref[name], init[name], float(sum(lrs)), dtype)
            elif name in ours:
                report.add("after-steps", "param", name, ours[name], ref[name], rtol)
            else:
                report.missing("after-steps", "param", name, rtol, "no such parameter in transformer_np")
    if masks is not None:
        masks.detach(np_model, pt_model)
    if aligner is not None:
        aligner.remove()
        report.meta["relu_branches_aligned"] = aligner.flips
    return report


def run_summary(checkpoint: str | None = None, config: str | None = None, dtype: str = "float64",
                device: str = "auto", steps: int = 3, batch_size: int | None = None, seed: int = 0,
                trajectory: str = "auto"):
    """(Report, description) for a trained transformer_np checkpoint, or for a preset's fresh model.

    A checkpoint's model (state via mt.save, configs in the same file; transformer_np/train.py) is
    copied into a model of `dtype`, its weights into torch, and checked on batches of its own
    task (held-out pairs first, then training pairs for the optimizer steps), in training mode
    with its dropout and identical masks. The steps use the paper's recipe (warmup schedule,
    Adam 0.9/0.98/1e-9, clipping 1.0, label smoothing as the checkpoint's recipe says).
    """
    if (checkpoint is None) == (config is None):
        raise ValueError("summary: give exactly one of --checkpoint or --config")
    if config is not None:
        return (run_report(config, dtype, device, steps=steps, batch_size=batch_size, seed=seed,
                           trajectory=trajectory), f"config {config}")
    from transformer_np.data import collate
    from transformer_np.train import load_checkpoint
    resolve_dtype(dtype)
    resolve_device(device)
    ck = load_checkpoint(checkpoint)
    B = batch_size or 16
    train_pairs, held = ck.task.splits(train_size=B * max(steps, 1), eval_size=B, seed=seed + 12345)
    pairs = (held + train_pairs) if held else train_pairs
    batches = [collate(pairs[i:i + B]) for i in range(0, min(len(pairs), B * max(steps, 1)), B)]
    train = ck.train_cfg.replace(schedule="warmup", weight_decay=0.0,
                                 clip_grad_norm=ck.train_cfg.clip_grad_norm or 1.0)
    report = run_report("checkpoint", dtype, device, steps=steps, seed=seed, np_model=ck.model,
                        model_cfg=ck.model_cfg, train_cfg=train, batches=batches, trajectory=trajectory)
    report.meta["checkpoint"] = ck.path
    report.meta["checkpoint_step"] = ck.step
    return report, f"checkpoint {ck.path} (step {ck.step}, task {ck.task.name})"
