"""Each module boundary and parameter of a recorded step against a reference, and the first module where they part.

Two references:

    against_twin                  the PyTorch twin's same step (parity/model.py, parity/gpt/model.py): per module
                                  call, its output and the gradient at its output, and every parameter's gradient,
                                  judged as the parity report judges them (parity/results.py: rule 'rel' with
                                  PARITY_RTOL, the key biases by rule 'zero'), with the ULP distance beside
    against_finite_differences    float64 only, for a model without a twin: each of those gradients along one direction
                                  v (a seeded random unit vector) against
                                  the central difference of the loss with the tensor moved by +-h v
                                  (DIRECTIONAL_FD_RTOL, fd_roundoff in minitensor/testing.py)

Inside a module the two graphs differ (a fused primitive here, several torch ops there): nodes are not compared.

A gradient at a module's input is the sum over all the input's uses (the same memory feeds every cross-attention's keys
and values), so it cannot tell which use went wrong: only outputs are compared. `first_divergence` walks the module
calls: a call whose output gradient agrees while a gradient inside it (a call's output, a parameter) does not is where
the error enters; the innermost such call, first along the backward's walk, is the one named.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import minitensor as mt
from minitensor.testing import (
    DIRECTIONAL_FD_RTOL,
    GRADCHECK,
    PARITY_RTOL,
    fd_roundoff,
    ulp_distance,
)

from ..hooks import KeyProjectionGrads, ReluBranchAligner, SharedDropoutMasks, to_numpy
from ..report import compare_param_grads
from ..results import Report, key_projection
from .capture import ROOT, ModuleCalls, record_step, select_calls

OUTPUT, OUTPUT_GRAD = "output", "output gradient"


@dataclass
class Check:
    what: str  # 'output', 'output gradient' (' 1', ... for a module with several outputs), 'gradient', 'loss'
    value: float  # the judged quantity: the relative error (rule 'rel', 'fd') or the largest |entry| ('zero')
    limit: float  # ok when value <= limit
    ok: bool
    rule: str  # 'rel', 'zero' (parity/results.py), 'fd' (directional finite difference), 'missing'
    rel: float  # the relative error of the two sides, whatever the rule
    ulp: float | None  # the largest distance in units in the last place (against the twin only)

    def ratio(self) -> float:
        """value / limit: the one scale the page colours by (1 = at the tolerance)."""
        if self.limit == 0:
            return 0.0 if self.value == 0 else math.inf
        return self.value / self.limit

    def to_json(self) -> dict:
        finite = lambda x: None if x is None or not math.isfinite(x) else float(f"{x:.3g}")
        return {
            "w": self.what,
            "v": finite(self.value),
            "lim": finite(self.limit),
            "ok": self.ok,
            "rule": self.rule,
            "rel": finite(self.rel),
            "ulp": finite(self.ulp),
            "r": finite(self.ratio()) if math.isfinite(self.ratio()) else 1e300,
        }


@dataclass
class Comparison:
    """The checks of a step: per module call key and per parameter name, and what the reference was."""

    calls: dict  # call key -> [Check]
    params: dict  # parameter name -> Check
    reference: str  # in words
    tolerance: str  # the rule, in words


def _row_check(row, what: str, ulp: float | None) -> Check:
    rule = "missing" if not math.isfinite(row.max_rel) and row.note else row.rule
    return Check(what, row.value, row.limit, row.ok, rule, row.max_rel, ulp)


def _judge(report: Report, what: str, ours, ref, rtol: float) -> Check:
    """Rule 'rel' of the parity report, with the ULP distance; a missing side fails."""
    name = f"{len(report.rows)}"
    if ours is None or ref is None:
        side = "transformer_np" if ours is None else "torch"
        report.missing("view", "grad", name, rtol, f"no gradient on {side}")
        return _row_check(report.rows[-1], what, None)
    a, b = to_numpy(ours), to_numpy(ref)
    report.check_close("view", "grad", name, a, b, rtol)
    ulp = ulp_distance(a, b) if a.shape == b.shape else None
    return _row_check(report.rows[-1], what, ulp)


def against_twin(subject, dtype: str, seed: int, plant: str | None = None):
    """Record the step (the Graph) and compare it with the twin's; returns (Graph, Comparison)."""
    rtol = PARITY_RTOL[dtype]
    np_model, pt_model = subject.np_model, subject.pt_model
    np_model.train(subject.train_mode)
    pt_model.train(subject.train_mode)
    masks = SharedDropoutMasks(seed + 1) if subject.dropout else None
    if masks is not None:
        masks.attach(np_model, pt_model)
    aligner = ReluBranchAligner(np_model, pt_model, dtype) if subject.relu else None
    keys = None
    try:
        graph = record_step(np_model, subject.np_loss, plant)
        pt_calls = ModuleCalls(pt_model)
        if subject.key_bias is not None:
            keys = KeyProjectionGrads(pt_model, "." + key_projection(subject.key_bias))
        try:
            pt_loss = subject.pt_loss()
        finally:
            pt_calls.remove()
            if keys is not None:
                keys.remove()
        if masks is not None:
            masks.finish_step()
        pt_loss.backward()
    finally:
        if masks is not None:
            masks.detach(np_model, pt_model)
        if aligner is not None:
            aligner.remove()

    report = Report(meta={})
    theirs = pt_calls.by_key()
    calls = {ROOT: [_judge(report, "loss", graph.loss, pt_loss, rtol)]}
    for call in graph.calls[1:]:
        ref = theirs.get(call.key)
        checks = calls[call.key] = []
        if ref is None:
            report.missing("view", "forward", call.key, rtol, "no such module call in torch")
            checks.append(_row_check(report.rows[-1], "call", None))
            continue
        ref_out = dict(ref.outputs)
        for i, t in call.outputs:
            suffix = f" {i}" if len(call.outputs) > 1 else ""
            checks.append(_judge(report, OUTPUT + suffix, t, ref_out.get(i), rtol))
            theirs_grad = None if ref_out.get(i) is None else ref_out[i].grad
            if t.grad is not None or theirs_grad is not None:  # (neither: an output off the loss's path)
                checks.append(_judge(report, OUTPUT_GRAD + suffix, t.grad, theirs_grad, rtol))

    report.rows = []
    compare_param_grads(report, np_model, pt_model, keys, dtype, subject.key_bias)
    ours_p, ref_p = dict(np_model.named_parameters()), dict(pt_model.named_parameters())
    params = {}
    for row in report.rows:
        a, b = ours_p.get(row.name), ref_p.get(row.name)
        both = a is not None and b is not None and a.grad is not None and b.grad is not None
        ulp = ulp_distance(to_numpy(a.grad), to_numpy(b.grad)) if both else None
        params[row.name] = _row_check(row, "gradient", ulp)
    tolerance = f"relative error <= PARITY_RTOL[{dtype}] = {rtol:g}; the key biases' gradients (exactly 0) by round-off"
    return graph, Comparison(calls, params, "the PyTorch twin", tolerance)


def _perturbed_loss(subject, path: str, number: int, position: int, delta) -> float:
    """The loss with output `position` of module `path`'s `number`-th call moved by `delta`."""
    module = dict(subject.np_model.named_modules())[path]
    seen = [0]

    def post(m, args, out):
        seen[0] += 1
        if seen[0] == number:
            if isinstance(out, (tuple, list)):
                out = list(out)
                out[position] = out[position] + delta
                return tuple(out)
            return out + delta
        return None

    handle = module.register_forward_hook(post)
    try:
        with mt.no_grad():
            return float(to_numpy(subject.np_loss()))
    finally:
        handle.remove()


def _param_loss(subject, p, delta) -> float:
    with mt.no_grad():
        p.add_(delta)
        try:
            return float(to_numpy(subject.np_loss()))
        finally:
            p.sub_(delta)


def _direction(shape, rng) -> np.ndarray:
    """A random unit vector, as gradcheck's fast mode takes. (Not g's own direction: a move along the gradient shifts
    every ReLU input of a layer together and crosses kinks within h.)"""
    v = rng.standard_normal(shape)
    return v / np.linalg.norm(v)


KINK_TRIES = 4


def _fd_check(what: str, g: np.ndarray, loss_at, loss: float, rng) -> Check:
    """g . v against (L(+h v) - L(-h v)) / 2h, v = _direction(g).

    A direction along which a kink (ReLU at 0) lies within +-h makes the difference quotient wrong by the kink's jump,
    whatever h: there the quotients with h and h/2 disagree by more than the tolerance, and another direction is
    drawn (up to KINK_TRIES in all; the last is judged as it is)."""
    h = GRADCHECK["eps"]
    norm = float(np.linalg.norm(g))
    limit = DIRECTIONAL_FD_RTOL * norm + fd_roundoff(loss, h / 2)
    for _ in range(KINK_TRIES):
        v = _direction(g.shape, rng)
        fd = (loss_at(h * v) - loss_at(-h * v)) / (2 * h)
        half = (loss_at(h / 2 * v) - loss_at(-h / 2 * v)) / h
        if abs(fd - half) <= limit:
            break
    ours = float((g * v).sum())
    diff = abs(ours - fd)
    rel = diff / norm if norm > 0 else (0.0 if diff == 0 else math.inf)
    return Check(what, diff, limit, diff <= limit, "fd", rel, None)


def against_finite_differences(subject, seed: int, plant: str | None = None, pattern: str | None = None):
    """Record the step in eval mode (no dropout: the loss must be one function of the tensors moved) and check each
    module output's and parameter's gradient along one direction, of the calls `pattern` selects (capture.select_calls;
    None: all); returns (Graph, Comparison)."""
    subject.np_model.eval()
    graph = record_step(subject.np_model, subject.np_loss, plant)
    _, chosen = select_calls(graph, pattern)
    loss = float(to_numpy(graph.loss))
    rng = np.random.default_rng(seed + 3)
    wrap = lambda x: mt.tensor(x)
    calls = {}
    numbers = {}
    for index, call in enumerate(graph.calls[1:], start=1):
        numbers[call.path] = numbers.get(call.path, 0) + 1
        if index not in chosen:
            continue
        checks = calls[call.key] = []
        number = numbers[call.path]
        for i, t in call.outputs:
            if t.grad is None:
                continue
            label = OUTPUT_GRAD + (f" {i}" if len(call.outputs) > 1 else "")
            loss_at = lambda d, i=i, call=call, number=number: _perturbed_loss(subject, call.path, number, i, wrap(d))
            checks.append(_fd_check(label, to_numpy(t.grad), loss_at, loss, rng))
    params = {}
    for name, p in subject.np_model.named_parameters():
        owner = name.rsplit(".", 1)[0] if "." in name else ""
        if p.grad is None or not any(graph.calls[i].path == owner for i in chosen):
            continue
        loss_at = lambda d, p=p: _param_loss(subject, p, wrap(d))
        params[name] = _fd_check("gradient", to_numpy(p.grad), loss_at, loss, rng)
    tolerance = (
        f"|g . v - fd| <= DIRECTIONAL_FD_RTOL |g| + round-off ({DIRECTIONAL_FD_RTOL:g}; central differences, "
        f"h = {GRADCHECK['eps']:g}, float64, eval mode)"
    )
    return graph, Comparison(calls, params, "finite differences", tolerance)


def owned_params(path: str, names) -> list:
    """The parameters of the module at `path` and its descendants ('' and ROOT's: all)."""
    if path == "":
        return list(names)
    return [n for n in names if n.startswith(path + ".")]


def first_divergence(graph, comparison: Comparison, walk_position: dict) -> int | None:
    """The index (in graph.calls) of the innermost module call whose output gradient agrees with the reference while a
    gradient inside it (the output gradient of a call within it, or a gradient of its parameters) does not, first
    along the backward's walk; None when there is none.

    walk_position: call index -> the position of its first node in the backward's walk (math.inf when it has none)."""
    calls = graph.calls
    children = {i: [] for i in range(len(calls))}
    for i, c in enumerate(calls):
        if c.parent is not None:
            children[c.parent].append(i)
    bad_params = [n for n, k in comparison.params.items() if not k.ok]
    ok = [all(k.ok for k in comparison.calls.get(c.key, ()) if k.what.startswith(OUTPUT_GRAD)) for c in calls]
    inside = {i: _descendants(children, i) for i in range(len(calls))}
    enters = [
        ok[i] and (bool(owned_params(calls[i].path if i else "", bad_params)) or not all(ok[j] for j in inside[i]))
        for i in range(len(calls))
    ]
    found = [i for i in range(len(calls)) if enters[i] and not any(enters[j] for j in inside[i])]
    if not found:
        return None
    return min(found, key=lambda i: walk_position.get(i, math.inf))


def _descendants(children: dict, i: int) -> list:
    out, stack = [], list(children[i])
    while stack:
        j = stack.pop()
        out.append(j)
        stack.extend(children[j])
    return out
