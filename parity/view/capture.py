"""One recorded step: the backward graph of a seeded forward and backward, node by node and module call by call.

`record_step(model, loss_fn)` runs the loss's forward and backward once with two recorders on:

    ModuleCalls   every module call, nested (a pre-hook opens it, a forward hook closes it), keyed as the parity
                  report keys them ('encoder.layers.0.self_attn', a second call suffixed '#2'); it keeps the call's
                  output tensors with their gradients retained: the module boundaries compared later
    NodeRecorder  the engine's way of calling primitives (autograd.OpCalls, as the profiler times them): each
                  forward's module call, input and output shapes, value statistics, saved arrays and time; each
                  backward's incoming-gradient statistics and time

After the forward, the graph is walked from the loss (the engine's own topological order, the order the backward runs
in) into `Graph.nodes`, each with the edges to the nodes and parameters its gradient flows to. ModuleCalls works on
torch modules as well, for the twin's boundaries.

A planted fault: `plant='Softmax'` multiplies every gradient that op's backward returns by PLANT_FACTOR, inside the
recorder's call of that backward, so the op's class is never changed and nothing remains once the step is done.
"""

from __future__ import annotations

import fnmatch
import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from minitensor.autograd import OpCalls, set_op_calls
from minitensor.core.engine import topological_order

from ..hooks import is_tensor

PLANT_FACTOR = 1.001  # the planted fault: an error of 1e-3, far above every dtype's parity tolerance
HIST_BINS = 12
ROOT = "(step)"  # the call that holds the whole step: the loss is computed outside the model
MODEL = "(model)"  # the model's own call (its module path is '')


def _sig(x: float) -> float:
    """A statistic rounded to 4 significant digits: the page shows no more, and the file stays small."""
    return float(f"{x:.4g}")


def summarize(a) -> dict:
    """min, max, mean, norm and a histogram of HIST_BINS bins between min and max, over the finite entries."""
    a = np.asarray(a)
    if a.size == 0 or a.dtype.kind not in "fiub":
        return {"n": int(a.size)}
    f = a.astype(np.float64, copy=False).reshape(-1)
    finite = np.isfinite(f)
    nonfinite = int(f.size - finite.sum())
    if nonfinite:
        f = f[finite]
    if f.size == 0:
        return {"n": int(a.size), "nonfinite": nonfinite}
    lo, hi = float(f.min()), float(f.max())
    # bins by arithmetic and bincount: np.histogram's general path costs several times more, on every node
    if hi > lo:
        bins = ((f - lo) * (HIST_BINS / (hi - lo))).astype(np.int64)
        np.minimum(bins, HIST_BINS - 1, out=bins)
        hist = np.bincount(bins, minlength=HIST_BINS)
    else:
        hist = np.zeros(HIST_BINS, dtype=np.int64)
        hist[HIST_BINS // 2] = f.size
    return {
        "n": int(a.size),
        "min": _sig(lo),
        "max": _sig(hi),
        "mean": _sig(float(f.mean())),
        "norm": _sig(float(np.sqrt(np.dot(f, f)))),
        "hist": [int(c) for c in hist],
        "nonfinite": nonfinite,
    }


def _shape(a) -> list:
    return [list(np.shape(a)), str(getattr(a, "dtype", type(a).__name__))]


def tensors_of(value) -> list:
    """(position, tensor) of the tensors in a module's output (a tensor, or a tuple/list of values)."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    return [(i, t) for i, t in enumerate(items) if is_tensor(t)]


@dataclass
class Call:
    """One module call: its key, module path, class and enclosing call, and its boundary tensors."""

    key: str
    path: str  # the module path ('' for the model itself)
    type: str
    parent: int | None  # index of the enclosing call in ModuleCalls.calls; None for ROOT
    outputs: list = field(default_factory=list)  # (position in the output, tensor) of each output tensor


class ModuleCalls:
    """Every call of every module of `model` during a forward, nested, with its boundary tensors."""

    def __init__(self, model):
        self.calls = [Call(ROOT, "", "step", None)]
        self.stack = [0]
        self.counts = defaultdict(int)
        self.handles = []
        for path, m in model.named_modules():
            self.handles.append(m.register_forward_pre_hook(self._open(path, type(m).__name__)))
            self.handles.append(m.register_forward_hook(self._close))

    def _open(self, path: str, kind: str):
        def hook(module, inputs):
            self.counts[path] += 1
            n = self.counts[path]
            key = (path or MODEL) + (f"#{n}" if n > 1 else "")
            self.calls.append(Call(key, path, kind, self.stack[-1]))
            self.stack.append(len(self.calls) - 1)

        return hook

    def _close(self, module, inputs, output):
        call = self.calls[self.stack.pop()]
        for i, t in tensors_of(output):
            if t.requires_grad:
                t.retain_grad()
            call.outputs.append((i, t))

    def current(self) -> int:
        return self.stack[-1]

    def by_key(self) -> dict:
        return {c.key: c for c in self.calls}

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


def _saved(ctx) -> list:
    """What a forward kept for its backward: [name, shape, dtype, bytes] per array."""
    named = [(f"saved[{i}]", a) for i, a in enumerate(ctx.saved_arrays)]
    named += [(n, getattr(ctx, n, None)) for n in ctx.saved_names]
    return [[n, list(a.shape), str(a.dtype), int(a.nbytes)] for n, a in named if hasattr(a, "nbytes")]


class NodeRecorder(OpCalls):
    """The engine's calls of each primitive, recorded (and one op's backward scaled, when a fault is planted)."""

    def __init__(self, calls: ModuleCalls, plant: str | None = None):
        self.calls = calls
        self.plant = plant
        self.records = {}  # id(ctx) -> what the forward and backward of that node showed
        self.contexts = []  # kept alive, so that no id is reused during the step

    def forward(self, fn, ctx, arrays, kwargs):
        t0 = time.perf_counter()
        out = fn.forward(ctx, *arrays, **kwargs)
        seconds = time.perf_counter() - t0
        first = out[0] if isinstance(out, tuple) else out
        self.records[id(ctx)] = {
            "op": fn.__name__,
            "call": self.calls.current(),
            "in": [_shape(a) for a in arrays],
            "out": _shape(first),
            "value": summarize(first),
            "saved": _saved(ctx),
            "tf": seconds,
        }
        self.contexts.append(ctx)
        return out

    def backward(self, fn, ctx, g):
        t0 = time.perf_counter()
        grads = fn.backward(ctx, g)
        seconds = time.perf_counter() - t0
        record = self.records.get(id(ctx))
        if fn.__name__ == self.plant:
            grads = grads if isinstance(grads, (tuple, list)) else (grads,)
            grads = tuple(None if gi is None else gi * PLANT_FACTOR for gi in grads)
            if record is not None:
                record["planted"] = True
        if record is not None:
            record["grad"] = summarize(g)
            record["tb"] = seconds
        return grads


@dataclass
class Graph:
    """The recorded step. nodes: in the backward's order (the loss's node first); each a dict with 'op', 'call',
    'in', 'out', 'value', 'grad', 'saved', 'tf', 'tb' and 'edges' (['n', node index] or ['p', parameter name] per
    input that receives a gradient). calls: ModuleCalls.calls. params: name -> parameter."""

    nodes: list
    calls: list
    params: dict
    loss: object


def record_step(model, loss_fn, plant: str | None = None) -> Graph:
    """Run loss_fn() (the forward) and its backward once under the recorders; the graph as the backward walked it."""
    calls = ModuleCalls(model)
    recorder = NodeRecorder(calls, plant)
    previous = set_op_calls(recorder)
    try:
        loss = loss_fn()
        calls.remove()
        order = topological_order([loss.grad_fn])
        index = {node: i for i, node in enumerate(order)}
        names = {id(p): name for name, p in model.named_parameters()}
        nodes = []
        for node in order:
            record = recorder.records[id(node.ctx)]  # the backward adds its gradient and time to it
            edges = []
            for t in node.inputs:
                if t is None:
                    continue
                if t.grad_fn is not None:
                    edges.append(["n", index[t.grad_fn]])
                elif id(t) in names:
                    edges.append(["p", names[id(t)]])
            record["edges"] = edges
            nodes.append(record)
        loss.backward()
    finally:
        calls.remove()
        set_op_calls(previous)
    return Graph(nodes, calls.calls, dict(model.named_parameters()), loss)


def select_calls(graph, pattern: str | None) -> tuple[set, set]:
    """(shown, chosen) call indices. chosen: all, or those whose key matches `pattern` (fnmatch) and the calls inside
    them; their nodes and parameters are drawn. shown: those and the calls around them, drawn as containers."""
    calls = graph.calls
    if pattern is None:
        return set(range(len(calls))), set(range(len(calls)))
    chosen = set()
    for i in range(len(calls)):
        j = i
        while j is not None:  # i is shown when it or an enclosing call matches
            if fnmatch.fnmatchcase(calls[j].key, pattern):
                chosen.add(i)
                break
            j = calls[j].parent
    if not chosen:
        keys = [c.key for c in calls[1:]]
        some = ", ".join(keys[:6]) + (", ..." if len(keys) > 6 else "")
        raise ValueError(f"--modules {pattern!r} matches no module call (module calls: {some})")
    shown = set(chosen)
    for i in chosen:
        j = calls[i].parent
        while j is not None:
            shown.add(j)
            j = calls[j].parent
    return shown | {0}, chosen
