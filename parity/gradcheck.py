"""Whole-model gradcheck: is the backward (and the forward mode) of the *whole* Transformer right?

One check, as torch.autograd.gradcheck's fast_mode does it for one function: every parameter at once,
one random direction v (unit norm over all parameters, seeded), in float64,

    reverse   ∇L · v                      one backward
    forward   J v = dL/dε L(θ + εv)       one forward-mode pass (forward_ad.make_dual on every parameter)
    numerical (L(θ + εv) - L(θ - εv)) / 2ε   two forwards

the first two against the third (finite differences: GRADCHECK's atol and rtol) and against each other (two
exact derivatives: PARITY_RTOL). A few seconds where an element-wise gradcheck of the model would take hours.

When it fails it blames an op: the loss's forward is recorded call by call (the engine's OpCalls hook: each
primitive, its input arrays, its keyword arguments and the line that called it), and each call is checked
again on its own, uᵀJv with random unit u and v against finite differences, by its backward and by its
forward-mode rule, in forward order. The first primitive whose rule disagrees is named, with the file and
line of its forward call. (A random direction meets a kink, ReLU at exactly 0, with probability zero: the
inputs are the model's own activations, not chosen values.)

The model runs in eval mode (no dropout), so that L is one deterministic function of θ.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

import minitensor as mt
from minitensor.autograd import OpCalls, set_op_calls
from minitensor.autograd import forward_ad as fwAD
from minitensor.autograd.anomaly_mode import forward_trace
from minitensor.autograd.functional import functional_call
from minitensor.testing import GRADCHECK, PARITY_RTOL
from transformer_np.config import get_preset
from transformer_np.data import PAD_ID, shift_targets
from transformer_np.loss import sequence_loss
from transformer_np.masks import padding_mask, target_mask
from transformer_np.model import Transformer

from .report import synthetic_batch

MODES = ("reverse", "forward")


@dataclass
class Comparison:
    """One number against another: `what` (e.g. 'reverse vs finite differences'), both values, the verdict."""

    what: str
    ours: float
    reference: float
    limit: str  # the rule, in words
    passed: bool


@dataclass
class Blame:
    """The first recorded primitive whose rule disagrees with finite differences."""

    op: str  # the Function's name, e.g. 'Softmax'
    mode: str  # 'reverse' (its backward) or 'forward' (its forward-mode rule)
    call: int  # its index among the forward's primitive calls
    site: str  # 'file:line in function' of the forward call
    analytical: float
    numerical: float

    def line(self) -> str:
        rule = "backward" if self.mode == "reverse" else "forward-mode rule"
        return (
            f"{self.op} ({rule}), primitive call #{self.call} of the forward, called at {self.site}: "
            f"uᵀJv {self.analytical!r} by its {rule}, {self.numerical!r} by finite differences"
        )


@dataclass
class ModelCheck:
    """What check_model found: the three directional derivatives, their comparisons, and the blame if any."""

    derivatives: dict  # 'reverse' / 'forward' / 'numerical' -> float
    comparisons: list
    seconds: float
    blame: Blame | None = None
    calls_checked: int = 0
    notes: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.comparisons)


def _close(a: float, n: float, atol: float, rtol: float) -> bool:
    return bool(abs(a - n) <= atol + rtol * abs(n))


def _unit(arrays: list) -> list:
    norm = float(np.sqrt(sum(float((a * a).sum()) for a in arrays)))
    return [a / norm for a in arrays] if norm > 0 else arrays


def check_model(loss_of, params: dict, *, seed: int = 0, modes=MODES, blame: bool = True) -> ModelCheck:
    """Check d/dε loss_of(θ + εv) at ε = 0 by `modes` against finite differences, every parameter at once.

    loss_of(params) -> scalar Tensor, for params a dict name -> Tensor (float64). On a failure, and when
    `blame`, the recorded forward is checked primitive by primitive (blame_op)."""
    for m in modes:
        if m not in MODES:
            raise ValueError(f"unknown mode {m!r}: expected some of {list(MODES)}")
    for name, p in params.items():
        if p.dtype != mt.float64:
            raise TypeError(f"check_model: parameter {name!r} is {p.dtype}; finite differences need float64")
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    names = list(params)
    v = dict(zip(names, _unit([rng.standard_normal(params[n].shape) for n in names])))
    plain = {n: params[n].detach() for n in names}
    eps, atol, rtol = GRADCHECK["eps"], GRADCHECK["atol"], GRADCHECK["rtol"]

    d = {}
    with mt.no_grad():
        up = loss_of({n: plain[n] + mt.tensor(eps * v[n]) for n in names}).item()
        down = loss_of({n: plain[n] - mt.tensor(eps * v[n]) for n in names}).item()
    d["numerical"] = (up - down) / (2 * eps)
    if "reverse" in modes:
        leaves = {n: plain[n].clone().requires_grad_(True) for n in names}
        grads = mt.autograd.grad(loss_of(leaves), list(leaves.values()), allow_unused=True)
        d["reverse"] = sum(float((g.numpy() * v[n]).sum()) for n, g in zip(names, grads) if g is not None)
    if "forward" in modes:
        with fwAD.dual_level():
            duals = {n: fwAD.make_dual(plain[n], mt.tensor(v[n])) for n in names}
            tangent = fwAD.unpack_dual(loss_of(duals)).tangent
        d["forward"] = 0.0 if tangent is None else tangent.item()

    comparisons = []
    for m in modes:
        comparisons.append(
            Comparison(
                f"{m} vs finite differences",
                d[m],
                d["numerical"],
                f"|diff| <= atol {atol} + rtol {rtol} * |numerical|",
                _close(d[m], d["numerical"], atol, rtol),
            )
        )
    if len(modes) == 2:
        r = PARITY_RTOL["float64"]
        comparisons.append(
            Comparison(
                "forward vs reverse",
                d["forward"],
                d["reverse"],
                f"|diff| <= {r} * max(|reverse|, 1e-3)",  # two exact derivatives: round-off apart
                abs(d["forward"] - d["reverse"]) <= r * max(abs(d["reverse"]), 1e-3),
            )
        )
    result = ModelCheck(d, comparisons, 0.0)
    if blame and not result.passed:
        failing = tuple(m for m in modes if not all(c.passed for c in comparisons if c.what.startswith(m)))
        calls = record_calls(lambda: loss_of(plain))
        result.blame, result.calls_checked = blame_op(calls, modes=failing or modes, seed=seed)
        if result.blame is None:
            result.notes.append(
                f"every one of the {result.calls_checked} recorded primitive calls agrees with finite differences "
                f"on its own: the disagreement is in how they are composed (the engine's walk, a hook, a view)"
            )
    result.seconds = time.perf_counter() - start
    return result


# --------------------------------------------------------------------------------------------
# Blame: the forward's primitive calls, each checked on its own
# --------------------------------------------------------------------------------------------


@dataclass
class RecordedCall:
    fn: type  # the Function subclass
    arrays: list  # copies of its input arrays
    kwargs: dict
    site: str


class CallRecorder(OpCalls):
    """The engine's op-call hook (as the profiler's): runs each forward as usual and keeps a copy of its inputs."""

    def __init__(self):
        self.calls = []

    def forward(self, fn, ctx, arrays, kwargs):
        self.calls.append(RecordedCall(fn, [np.array(a, copy=True) for a in arrays], dict(kwargs), call_site()))
        return super().forward(fn, ctx, arrays, kwargs)


_MINITENSOR = os.path.dirname(os.path.abspath(mt.__file__)) + os.sep


def call_site() -> str:
    """'file:line in function' of the running forward's call in the model: the innermost frame outside the
    minitensor package (the model's line, not nn/functional.py's), relative to the working directory."""
    trace = forward_trace(skip=2)  # this function and CallRecorder.forward
    if not trace:
        return "?"
    filename, line, name = next((f for f in reversed(trace) if not f[0].startswith(_MINITENSOR)), trace[-1])
    return f"{os.path.relpath(filename)}:{line} in {name}"


def record_calls(run) -> list:
    """The primitive calls that `run()` makes, in order, with copies of their inputs."""
    recorder = CallRecorder()
    previous = set_op_calls(recorder)
    try:
        run()
    finally:
        set_op_calls(previous)
    return recorder.calls


def check_call(call: RecordedCall, rng, modes=MODES) -> dict | None:
    """uᵀJv of one recorded primitive call by `modes` and by finite differences (random unit u, v over its
    floating-point inputs; an infinite input entry, a mask's -inf, is held fixed). None: nothing to check."""
    floats = [i for i, a in enumerate(call.arrays) if a.dtype == np.float64]
    if not floats:
        return None

    def run(arrays, grad_for=()):
        tensors = [mt.tensor(a, requires_grad=i in grad_for) for i, a in enumerate(arrays)]
        return tensors, call.fn.apply(*tensors, **call.kwargs)

    _, out = run(call.arrays)
    if out.dtype != mt.float64:
        return None
    u = _unit([rng.standard_normal(out.shape)])[0]
    v = dict(zip(floats, _unit([rng.standard_normal(call.arrays[i].shape) for i in floats])))
    for i in floats:
        v[i] = np.where(np.isfinite(call.arrays[i]), v[i], 0.0)
    eps = GRADCHECK["eps"]
    shifted = lambda s: [a + s * eps * v[i] if i in v else a for i, a in enumerate(call.arrays)]
    with mt.no_grad():
        up, down = run(shifted(1))[1].numpy(), run(shifted(-1))[1].numpy()
    diff = np.where(up == down, 0.0, up - down)  # equal infinities (a masked entry) do not move
    found = {"numerical": float((u * diff).sum()) / (2 * eps)}
    if "reverse" in modes:
        tensors, out = run(call.arrays, grad_for=floats)
        grads = mt.autograd.grad(out, [tensors[i] for i in floats], mt.tensor(u), allow_unused=True)
        found["reverse"] = sum(float((g.numpy() * v[i]).sum()) for i, g in zip(floats, grads) if g is not None)
    if "forward" in modes:
        with fwAD.dual_level():
            tensors = [
                fwAD.make_dual(mt.tensor(a), mt.tensor(v[i])) if i in v else mt.tensor(a)
                for i, a in enumerate(call.arrays)
            ]
            tangent = fwAD.unpack_dual(call.fn.apply(*tensors, **call.kwargs)).tangent
        found["forward"] = 0.0 if tangent is None else float((u * tangent.numpy()).sum())
    return found


def blame_op(calls: list, *, modes=MODES, seed: int = 0) -> tuple[Blame | None, int]:
    """The first call whose rule (backward or forward-mode) disagrees with finite differences, and how many
    calls were checked (every one, when none disagrees)."""
    rng = np.random.default_rng(seed + 1)
    atol, rtol = GRADCHECK["atol"], GRADCHECK["rtol"]
    checked = 0
    for k, call in enumerate(calls):
        found = check_call(call, rng, modes)
        if found is None:
            continue
        checked += 1
        for m in modes:
            if not _close(found[m], found["numerical"], atol, rtol):
                return Blame(call.fn.__name__, m, k, call.site, found[m], found["numerical"]), checked
    return None, checked


# --------------------------------------------------------------------------------------------
# The Transformer's loss as a function of its parameters
# --------------------------------------------------------------------------------------------


def transformer_loss(config: str, *, seed: int = 0, batch_size: int | None = None):
    """(loss_of, params, what): the preset's fresh float64 Transformer in eval mode on a synthetic batch (the
    parity report's), its training loss as a function of a name -> Tensor dict of parameters."""
    preset = get_preset(config)
    previous = mt.get_default_dtype()
    mt.set_default_dtype(mt.float64)
    try:
        mt.manual_seed(seed)
        model = Transformer.from_config(preset.model)
    finally:
        mt.set_default_dtype(previous)
    model.eval()
    B = batch_size or preset.batch_size
    rng = np.random.default_rng(seed)
    vocab = (preset.model.src_vocab_size, preset.model.tgt_vocab_size)
    src, tgt = synthetic_batch(rng, B, preset.src_len, preset.tgt_len, *vocab)
    tgt_in, labels = shift_targets(tgt)
    src_t, tgt_t = mt.tensor(src), mt.tensor(tgt_in)
    args = (src_t, tgt_t, padding_mask(src_t, PAD_ID), target_mask(tgt_t, PAD_ID))
    smoothing = preset.train.label_smoothing

    def loss_of(params: dict):
        return sequence_loss(functional_call(model, params, args), labels, smoothing)

    params = dict(model.named_parameters())
    n = sum(int(np.prod(p.shape)) for p in params.values())
    what = f"{config}, float64, {n:,} parameters in {len(params)} tensors, B={B} S={src.shape[1]} T={tgt_in.shape[1]}"
    return loss_of, params, what


def render(result: ModelCheck, what: str, seed: int) -> str:
    """The check as text: the derivatives, each comparison, the blame, the verdict and the time."""
    lines = [f"whole-model gradcheck: {what}; one random unit direction v over all parameters (seed {seed})"]
    labels = {
        "reverse": "reverse   ∇L · v",
        "forward": "forward   J v (forward mode)",
        "numerical": "numerical (L(θ+εv) - L(θ-εv)) / 2ε",
    }
    for key, value in result.derivatives.items():
        lines.append(f"  {labels[key]:<38} {value: .15e}")
    for c in result.comparisons:
        verdict = "ok  " if c.passed else "FAIL"
        lines.append(f"  {verdict} {c.what:<30} |diff| {abs(c.ours - c.reference):.2e}  ({c.limit})")
    if result.blame is not None:
        lines.append(f"blame: the first primitive whose rule disagrees with finite differences: {result.blame.line()}")
    elif not result.passed:
        lines.append(f"blame: {result.calls_checked} recorded primitive calls checked")
    lines.extend(f"note: {n}" for n in result.notes)
    lines.append(f"{'passed' if result.passed else 'FAILED'} in {result.seconds:.2f} s")
    return "\n".join(lines)
