"""`python -m parity compare`: any PyTorch model against itself run on minitensor, module by module.

`run_compare(CompareConfig(...))` loads the user's file twice under module names of its own: once under
minitensor.compat.as_torch() (its `import torch` is minitensor), then with real torch. It builds the class in both
from the same keyword arguments (or from a config object built from them, --config-class; torch's side under
torch.manual_seed(seed), each under its library's default dtype set to --dtype), copies every state-dict entry
torch -> minitensor by name, puts both in eval mode (dropout off: the two libraries' random streams differ) and
compares:

- forward: the output of every named submodule (forward hooks on both sides, one row per call, repeat calls
  suffixed `#2`; a tuple output's tensors suffixed `[i]`) and the model's own outputs (`(model)[i]`);
- backward: every parameter's gradient and every hooked output's gradient. What is differentiated (--loss):
    random  (default) the sum over the model's floating outputs of <output, g>, with g a seeded random array
            (the same on both sides): any module, whatever it returns (logits; (logits, loss); (out, (h, c)));
    model   the model's own loss: it is called as model(x, targets), targets of x's shape drawn like a long input
            (a language model's convention), and the first 0-d floating tensor it returns is differentiated
            (forward(idx, targets) -> (logits, loss));
- training: N optimizer steps (--optimizer adamw: lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01; sgd: lr
  0.01, momentum 0.9) on the same input, each later step's objective and worst gradient compared, then every
  state-dict entry. The trajectory (--trajectory) is lockstep by default: after each step's gradients are compared,
  minitensor takes torch's, so the weights after the steps check the optimizer's arithmetic. In a free trajectory
  (each side steps on its own gradients) a gradient that is exactly zero in exact arithmetic (a key projection's
  bias, also the key third of a fused qkv bias: softmax's shift invariance) holds round-off of either sign, which
  Adam's g / (|g| + eps) turns into steps of up to lr: two correct implementations then differ by far more than
  round-off (the parity report, whose model names its key biases, bounds them by its 'drift' rule).

Each row is judged by PARITY_RTOL[dtype] of minitensor.testing (parity/results.py); the table, summary and
verdict are parity/render.py's, and the first row that fails, in the order the forward ran, is named.

What cannot be compared: a parameter whose gradient is identically zero as a whole array (a separate key projection's
bias) holds round-off on both sides, which no relative measure compares: its gradient row fails (the parity report
judges such biases by its 'zero' rule). Modules the file imports from its own folder are imported once per side only
if not already imported (minitensor's side is loaded first).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import textwrap
from dataclasses import dataclass, field

import numpy as np
import torch

import minitensor as mt
from minitensor.compat import NotInMinitensor, import_file, load_file
from minitensor.testing import FLOOR, PARITY_RTOL, error_stats

from . import render
from .convert import load_arrays, state_arrays
from .hooks import Capture, is_tensor, to_numpy
from .report import compare_after_steps, compare_output_grads, compare_param_grads, resolve_dtype
from .results import Report

INPUT_DTYPES = ("float", "long")
OPTIMIZERS = ("adamw", "sgd")
LOSSES = ("random", "model")
TRAJECTORIES = ("lockstep", "free")
OPTIMIZER_SETTINGS = {
    "adamw": dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01),
    "sgd": dict(lr=0.01, momentum=0.9),
}
_LOADS = itertools.count()


class MinitensorFailed(Exception):
    """The model ran on torch and not on minitensor: a failed comparison (exit 1), named in one line."""


def parse_target(text: str) -> tuple[str, str]:
    """'path/model.py:GPT' -> ('path/model.py', 'GPT'); ValueError naming the expected form."""
    path, sep, name = text.rpartition(":")
    if not sep or not path.endswith(".py") or not name.isidentifier():
        raise ValueError(f"expected FILE.py:CLASS (e.g. model.py:GPT), got {text!r}")
    return path, name


def parse_kwargs(text: str) -> dict:
    """--kwargs: a JSON object of the constructor's keyword arguments."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"expected a JSON object such as '{{\"n_layer\": 2}}', got {text!r} ({e})") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__} {text!r}")
    return value


def parse_shape(text: str) -> tuple[int, ...]:
    """--input-shape '2,16' -> (2, 16): positive integers separated by commas."""
    parts = text.split(",")
    if not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"expected positive integers separated by commas (e.g. 2,16), got {text!r}")
    return tuple(int(p) for p in parts)


@dataclass(frozen=True)
class CompareConfig:
    """One comparison. Validated on creation, before any file is read."""

    path: str  # the model's file
    class_name: str  # the nn.Module subclass in it
    kwargs: dict = field(default_factory=dict)  # the constructor's keyword arguments
    input_shape: tuple = (2, 8)
    input_dtype: str = "float"  # 'float' (standard normal in --dtype) or 'long' (integers in [0, input_high))
    input_high: int | None = None  # long inputs: None takes the smallest nn.Embedding's num_embeddings
    dtype: str = "float64"
    steps: int = 3
    optimizer: str = "adamw"
    loss: str = "random"
    seed: int = 0
    trajectory: str = "lockstep"
    config_class: str | None = None  # the constructor takes one config object: config_class(**kwargs), same file

    def __post_init__(self):
        resolve_dtype(self.dtype)
        for what, value, allowed in (
            ("input dtype", self.input_dtype, INPUT_DTYPES),
            ("optimizer", self.optimizer, OPTIMIZERS),
            ("loss", self.loss, LOSSES),
            ("trajectory", self.trajectory, TRAJECTORIES),
        ):
            if value not in allowed:
                raise ValueError(f"unknown {what} {value!r}: expected one of {list(allowed)}")
        if not (isinstance(self.steps, int) and self.steps >= 0):
            raise ValueError(f"steps must be a non-negative int, got {self.steps!r}")
        if not self.input_shape or not all(isinstance(n, int) and n > 0 for n in self.input_shape):
            raise ValueError(f"input shape must be positive integers, got {self.input_shape!r}")
        if self.input_high is not None and not (isinstance(self.input_high, int) and self.input_high > 0):
            raise ValueError(f"input high must be a positive int, got {self.input_high!r}")
        if not isinstance(self.kwargs, dict):
            raise ValueError(f"kwargs must be a dict, got {type(self.kwargs).__name__}")
        if self.config_class is not None and not self.config_class.isidentifier():
            raise ValueError(f"config class must be a class name, got {self.config_class!r}")

    @property
    def target(self) -> str:
        return f"{self.path}:{self.class_name}"


# ----------------------------------------------------------------------------------------------
# Loading and building
# ----------------------------------------------------------------------------------------------
def _module_name(path: str, side: str) -> str:
    stem = "".join(c if c.isalnum() else "_" for c in os.path.splitext(os.path.basename(path))[0])
    while True:
        name = f"parity_compare_{side}_{stem}_{next(_LOADS)}"
        if name not in sys.modules:
            return name


def load_twice(path: str):
    """(module on minitensor, module on torch): the file imported twice under names of its own, minitensor's first."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    try:
        ours = load_file(path, _module_name(path, "minitensor"))
    except NotInMinitensor:
        raise
    except Exception as e:
        theirs_error = _try(lambda: import_file(path, _module_name(path, "torch")))
        if theirs_error is not None:  # the file does not import with torch either: the user's file is at fault
            raise ValueError(f"cannot import {path}: {_one_line(theirs_error)}") from None
        raise MinitensorFailed(f"{path} imports with torch but not on minitensor: {_one_line(e)}") from None
    try:
        theirs = import_file(path, _module_name(path, "torch"))
    except Exception as e:
        raise ValueError(f"cannot import {path} with torch: {_one_line(e)}") from None
    return ours, theirs


def _try(fn):
    try:
        fn()
    except Exception as e:
        return e
    return None


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def model_class(module, name: str, path: str, base):
    cls = getattr(module, name, None)
    if cls is None:
        raise ValueError(f"{path} has no class {name}")
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ValueError(f"{path}:{name} is not an nn.Module subclass (got {type(cls).__name__})")
    return cls


def construct(module, cc: CompareConfig, cls):
    """cls(**kwargs), or with a config class cls(ConfigClass(**kwargs)), the config class from the same module."""
    if cc.config_class is None:
        return cls(**cc.kwargs)
    return cls(getattr(module, cc.config_class)(**cc.kwargs))


def build_pair(cc: CompareConfig):
    """(minitensor model, torch model) with torch's weights copied into minitensor's by name."""
    ours_module, theirs_module = load_twice(cc.path)
    their_class = model_class(theirs_module, cc.class_name, cc.path, torch.nn.Module)
    our_class = model_class(ours_module, cc.class_name, cc.path, mt.nn.Module)
    if cc.config_class is not None and not isinstance(getattr(theirs_module, cc.config_class, None), type):
        raise ValueError(f"{cc.path} has no class {cc.config_class}")
    mt_dtype, torch_dtype = resolve_dtype(cc.dtype)
    torch.manual_seed(cc.seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch_dtype)
    try:
        theirs = construct(theirs_module, cc, their_class)
    except Exception as e:
        arguments = f"**{json.dumps(cc.kwargs)}"
        if cc.config_class is not None:
            arguments = f"{cc.config_class}({arguments})"
        raise ValueError(f"{cc.class_name}({arguments}) does not build with torch: {_one_line(e)}") from None
    finally:
        torch.set_default_dtype(previous)
    mt.manual_seed(cc.seed)
    previous = mt.get_default_dtype()
    mt.set_default_dtype(mt_dtype)
    try:
        ours = construct(ours_module, cc, our_class)
    except NotInMinitensor:
        raise
    except Exception as e:
        raise MinitensorFailed(f"{cc.class_name} builds with torch but not on minitensor: {_one_line(e)}") from None
    finally:
        mt.set_default_dtype(previous)
    ref, sub = state_arrays(theirs), state_arrays(ours)
    only_theirs, only_ours = sorted(ref.keys() - sub.keys()), sorted(sub.keys() - ref.keys())
    if only_theirs or only_ours:
        raise ValueError(
            f"parameter names differ between the two runs of {cc.target}: only on torch: {only_theirs}; "
            f"only on minitensor: {only_ours}"
        )
    shapes = [f"{k}: {ref[k].shape} vs {sub[k].shape}" for k in ref if ref[k].shape != sub[k].shape]
    if shapes:
        raise ValueError(f"shapes differ between the two runs of {cc.target} (torch vs minitensor): {shapes}")
    dtypes = [f"{k}: {ref[k].dtype} vs {sub[k].dtype}" for k in ref if ref[k].dtype != sub[k].dtype]
    if dtypes:  # the same source made different state: minitensor's side differs (nothing is cast silently)
        raise MinitensorFailed(
            f"state-dict dtypes differ between the two runs of {cc.target} (torch vs minitensor): {dtypes}"
        )
    load_arrays(ours, ref, what="parity compare")
    ours.eval()
    theirs.eval()
    return ours, theirs


def make_inputs(cc: CompareConfig, theirs) -> tuple[np.ndarray, np.ndarray | None]:
    """(x, targets or None) as NumPy arrays from the seed: both sides get the same numbers."""
    rng = np.random.default_rng(cc.seed)
    high = cc.input_high
    if high is None and (cc.input_dtype == "long" or cc.loss == "model"):
        sizes = [m.num_embeddings for m in theirs.modules() if isinstance(m, torch.nn.Embedding)]
        if not sizes:
            raise ValueError(
                "long inputs and targets need --input-high: the model has no nn.Embedding to take the vocabulary from"
            )
        high = min(sizes)
    if cc.input_dtype == "long":
        x = rng.integers(0, high, cc.input_shape)
    else:
        x = rng.standard_normal(cc.input_shape).astype(cc.dtype)
    targets = rng.integers(0, high, cc.input_shape) if cc.loss == "model" else None
    return x, targets


# ----------------------------------------------------------------------------------------------
# Running one side
# ----------------------------------------------------------------------------------------------
def flat_tensors(output, prefix: str = "") -> list[tuple[str, object]]:
    """The tensors of a module's output, named by position: a tensor '', a tuple's '[0]', '[1][0]', ..."""
    if is_tensor(output):
        return [(prefix, output)]
    if isinstance(output, (tuple, list)):
        return [item for i, o in enumerate(output) for item in flat_tensors(o, f"{prefix}[{i}]")]
    if isinstance(output, dict):
        return [item for k, o in output.items() for item in flat_tensors(o, f"{prefix}[{k!r}]")]
    return []


class Side:
    """One library's model, its inputs and its optimizer (None: the side only runs forward and backward)."""

    def __init__(self, lib, model, x, targets, upstream: dict, optimizer: str | None):
        self.lib, self.model, self.upstream = lib, model, upstream
        self.x = lib.tensor(x)
        self.targets = None if targets is None else lib.tensor(targets)
        self.opt = None
        if optimizer is not None:
            self.opt = getattr(lib.optim, {"adamw": "AdamW", "sgd": "SGD"}[optimizer])(
                model.parameters(), **OPTIMIZER_SETTINGS[optimizer]
            )

    def forward(self):
        return self.model(self.x) if self.targets is None else self.model(self.x, self.targets)

    def objective(self, output):
        """What backward differentiates (the module docstring's --loss)."""
        tensors = flat_tensors(output)
        if self.targets is not None:
            for _, t in tensors:
                if t.ndim == 0 and t.is_floating_point():
                    return t
            raise ValueError("--loss model: forward(x, targets) returned no 0-d floating tensor (a loss)")
        total = None
        for name, t in tensors:
            if t.requires_grad:
                term = (t * self.lib.tensor(self.upstream[name])).sum()
                total = term if total is None else total + term
        if total is None:
            raise ValueError("the model's outputs do not require grad: nothing to differentiate")
        return total


def upstream_gradients(output, seed: int) -> dict[str, np.ndarray]:
    """A seeded random array per floating output of torch's model (the --loss random weights), by output name."""
    rng = np.random.default_rng(seed + 1)
    return {
        name: rng.standard_normal(tuple(t.shape)).astype(str(t.dtype).removeprefix("torch."))
        for name, t in flat_tensors(output)
        if t.requires_grad
    }


# ----------------------------------------------------------------------------------------------
# The comparison
# ----------------------------------------------------------------------------------------------
def on_minitensor(what: str, fn):
    """Run minitensor's side: its failure (a missing API or any error) is the comparison's, not the input's."""
    try:
        return fn()
    except NotInMinitensor:
        raise
    except Exception as e:
        raise MinitensorFailed(f"{what} runs on torch but not on minitensor: {_one_line(e)}") from None


def on_torch(what: str, fn):
    """Run torch's side: its failure means the input does not fit the model (bad input)."""
    try:
        return fn()
    except Exception as e:
        raise ValueError(f"{what} fails on torch: {_one_line(e)}") from None


def compare_forward(report: Report, ours: Side, theirs: Side, rtol: float):
    """Forward on both sides with every submodule hooked; returns (our output, their output, captures)."""
    ptcap, npcap = Capture(theirs.model), Capture(ours.model)
    try:
        pt_out = on_torch("the forward", theirs.forward)
        np_out = on_minitensor("the forward", ours.forward)
    finally:
        ptcap.remove()
        npcap.remove()
    for key, t in ptcap.outputs.items():
        if key in npcap.outputs:
            report.check_close("modules", "forward", key, to_numpy(npcap.outputs[key]), to_numpy(t), rtol)
        else:
            report.missing("modules", "forward", key, rtol, "no such output on minitensor")
    for key in npcap.outputs.keys() - ptcap.outputs.keys():
        report.missing("modules", "forward", key, rtol, "no such output on torch")
    np_flat = dict(flat_tensors(np_out))
    for name, t in flat_tensors(pt_out):
        key = f"(model){name}"
        if name in np_flat:
            report.check_close("modules", "forward", key, to_numpy(np_flat[name]), to_numpy(t), rtol)
        else:
            report.missing("modules", "forward", key, rtol, "no such output on minitensor")
    return np_out, pt_out, npcap, ptcap


def sync_grads(ours, theirs) -> None:
    """Lockstep: minitensor's parameters take torch's gradients (already compared)."""
    params = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        if p.grad is not None:
            params[name].grad = mt.tensor(to_numpy(p.grad))


def compare_steps(report: Report, ours: Side, theirs: Side, steps: int, trajectory: str, dtype: str) -> None:
    rtol = PARITY_RTOL[dtype]
    for i in range(steps):
        if i > 0:
            for side in (ours, theirs):
                side.opt.zero_grad()
            pt_loss = theirs.objective(theirs.forward())
            np_loss = on_minitensor(f"step {i + 1}", lambda: ours.objective(ours.forward()))
            report.check_close(
                "after-steps", "step", f"objective step {i + 1}", to_numpy(np_loss), to_numpy(pt_loss), rtol
            )
            pt_loss.backward()
            on_minitensor(f"the backward of step {i + 1}", np_loss.backward)
            np_grads = {n: to_numpy(p.grad) for n, p in ours.model.named_parameters() if p.grad is not None}
            pt_grads = {n: to_numpy(p.grad) for n, p in theirs.model.named_parameters() if p.grad is not None}
            both = [n for n in pt_grads if n in np_grads]
            if both:
                worst = max(both, key=lambda n: error_stats(np_grads[n], pt_grads[n], scale_free=True)[1])
                report.check_close(
                    "after-steps",
                    "step",
                    f"param grads step {i + 1}",
                    np_grads[worst],
                    pt_grads[worst],
                    rtol,
                    f"worst of {len(both)}: {worst}",
                )
        if trajectory == "lockstep":
            sync_grads(ours.model, theirs.model)
        on_minitensor(f"optimizer step {i + 1}", ours.opt.step)
        theirs.opt.step()


def run_compare(cc: CompareConfig) -> Report:
    """Build both, feed both, compare; returns the Report (`.passed`: every row within PARITY_RTOL[dtype])."""
    if not isinstance(cc, CompareConfig):
        raise TypeError(f"run_compare: expected a CompareConfig, got {type(cc).__name__}")
    rtol = PARITY_RTOL[cc.dtype]
    trajectory = cc.trajectory
    np_model, pt_model = build_pair(cc)
    x, targets = make_inputs(cc, pt_model)
    report = Report(
        meta=dict(
            target=cc.target,
            kwargs=cc.kwargs,
            config_class=cc.config_class,
            input=f"{cc.input_dtype} {'x'.join(map(str, cc.input_shape))}",
            dtype=cc.dtype,
            loss=cc.loss,
            optimizer=cc.optimizer,
            steps=cc.steps,
            trajectory=trajectory,
            seed=cc.seed,
            rtol=rtol,
            torch=torch.__version__,
        )
    )
    theirs = Side(torch, pt_model, x, targets, {}, cc.optimizer)
    ours = Side(mt, np_model, x, targets, {}, cc.optimizer)
    np_out, pt_out, npcap, ptcap = compare_forward(report, ours, theirs, rtol)
    # --loss random: the upstream gradients take the shapes of torch's outputs, the same arrays on both sides
    ours.upstream = theirs.upstream = upstream_gradients(pt_out, cc.seed)
    pt_loss = on_torch("the objective", lambda: theirs.objective(pt_out))
    np_loss = on_minitensor("the objective", lambda: ours.objective(np_out))
    report.check_close("modules", "loss", "(objective)", to_numpy(np_loss), to_numpy(pt_loss), rtol, cc.loss)
    pt_loss.backward()
    on_minitensor("the backward", np_loss.backward)
    compare_param_grads(report, np_model, pt_model, None, cc.dtype, key_bias=None)
    compare_output_grads(report, npcap, ptcap, rtol)
    compare_steps(report, ours, theirs, cc.steps, trajectory, cc.dtype)
    if cc.steps > 0:
        compare_after_steps(report, np_model, pt_model, {}, 0.0, cc.steps, trajectory, cc.dtype, key_bias=None)
    return report


# ----------------------------------------------------------------------------------------------
# The text
# ----------------------------------------------------------------------------------------------
LEGEND = """\
legend
  kinds  forward: a submodule's output ((model): the model's own); loss: what backward differentiated
         param.grad: a parameter's gradient; grad: an output's gradient; param: a state-dict entry after the steps
         step: a later optimizer step's objective and worst parameter gradient
  rule   rel: value = max rel = max|minitensor - torch| / max(|torch|, {floor:g} * max|torch|) <= limit"""


def first_difference(report: Report) -> str:
    """The first failing row, in the order the rows were made (the forward in execution order first)."""
    for r in report.rows:
        if not r.ok:
            return f"first difference: {r.kind} {r.name} (value {r.value:.2e} > limit {r.limit:.1e})" + (
                f": {r.note}" if r.note else ""
            )
    return "first difference: none"


def text(report: Report) -> str:
    """Everything the terminal shows: the header, the legend, render's table and summary, the first difference and
    the verdict; every line at most render.WIDTH characters."""
    m = report.meta
    head = [
        f"parity compare: {m['target']}, {m['dtype']}, minitensor against PyTorch on cpu (torch {m['torch']})",
        f"  kwargs {json.dumps(m['kwargs'])}{' through ' + m['config_class'] if m['config_class'] else ''}; "
        f"input {m['input']}; loss {m['loss']}; "
        f"{render.plural(m['steps'], m['optimizer'] + ' step')}, {m['trajectory']} trajectory; seed {m['seed']}",
        "  both models in eval mode (dropout off); torch's weights copied into minitensor's by name",
    ]
    head = [part for line in head for part in textwrap.wrap(line, render.WIDTH, subsequent_indent="    ")]
    legend = LEGEND.format(floor=FLOOR[m["dtype"]]).splitlines()
    tail = [first_difference(report), render.verdict(report)]
    tail = [part for line in tail for part in textwrap.wrap(line, render.WIDTH, subsequent_indent="    ")]
    return "\n".join(head + legend + ["", render.table(report), "", render.summary_table(report), ""] + tail)
