"""The graph walk and its entry points: backward(), grad(), and the walk run_backward they share.

`backward()` and `grad()` check their arguments, start from the root gradient (`root_gradient`), and
hand it to `run_backward`, which sorts the nodes topologically without recursion
(`topological_order`), runs each node's backward (Node.backward, function.py: it sums a gradient back
to its input's shape there, `unbroadcast`), and frees the saved arrays unless `retain_graph=True`.
Named as PyTorch's engine (torch/csrc/autograd/engine.cpp), whose `run_backward` both entry points call.

Deviation from PyTorch, flagged: after a backward without retain_graph, every node on the path
is freed, also one that saved nothing (`y = x + 1`). PyTorch lets a second loss backpropagate
through such save-nothing nodes; here it raises the "second time" error. The reason: one rule
(a node that ran is spent) that needs no per-op knowledge of what was saved. A freed node keeps its
inputs (leaves and Edges, no arrays), as PyTorch keeps the graph's shape: grad() then knows that a
path to its inputs goes through a freed node and raises, rather than reporting the input "not used"
(or None), which would read d2/dx2 exp(x) as 0.

A backward never writes into the incoming `g` or a saved array: the same array can flow to
several inputs (x + x), so gradients are combined by creating new arrays, and a leaf receives an
array it owns alone.
"""

from __future__ import annotations

import numpy as np

from ..devices import array_module, device_of, is_array, to_device
from .function import ieee_quiet, is_tensor_like
from .grad_mode import set_grad_enabled

# --------------------------------------------------------------------------------------------
# The graph walk
# --------------------------------------------------------------------------------------------


def topological_order(roots) -> list:
    """Nodes reachable from the root node(s), each after every node that consumes it (iterative DFS)."""
    order, visited = [], set()
    for root in roots if isinstance(roots, (list, tuple)) else [roots]:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if node in visited:
                continue
            visited.add(node)
            stack.append((node, True))
            for t in node.inputs:
                if t is not None and t.grad_fn is not None and t.grad_fn not in visited:
                    stack.append((t.grad_fn, False))
    order.reverse()
    return order


def run_backward(roots, gradients, retain_graph: bool = False, create_graph: bool = False, inputs=None):
    """Backpropagate `gradients` (one per root tensor, of its shape) through the graph.

    inputs=None: every leaf's .grad accumulates its gradient (Tensor.backward). Otherwise only the nodes
    that lead to `inputs` run, and their gradients are returned instead (grad()): a list with None for
    an input that the roots do not reach. create_graph: gradients are Tensors and each node's backward
    runs on Tensors (Node.backward), so the result is differentiable again."""
    roots, gradients = list(roots), list(gradients)
    sink = _LeafGrads(gradients) if inputs is None else _InputGrads(inputs)
    grads = {}  # node -> gradient of its output, summed
    for root, g in zip(roots, gradients):
        if root.grad_fn is None:  # a leaf: the gradient goes straight to it
            sink.add(root, g if is_tensor_like(g) else g.copy())
        else:
            grads[root.grad_fn] = grads[root.grad_fn] + g if root.grad_fn in grads else g
    order = topological_order([r.grad_fn for r in roots if r.grad_fn is not None])
    needed = None if inputs is None else sink.nodes_to_run(order)
    sink.plan(order)
    for k, node in enumerate(order):
        sink.deliver_ready(k, grads)  # leaves no later node feeds get their .grad now, not at the end
        g = grads.pop(node, None)
        if g is None:  # nothing flows into this node
            continue
        if needed is not None and node not in needed and node not in sink.nodes:
            continue  # grad(): off the path to the inputs, so its hooks do not run either (as in PyTorch)
        if node.hooks is not None or node.retained is not None:  # (most nodes have neither: no call for them)
            g = node.receive(g)
        if needed is not None:
            sink.capture(node, g)
            if node not in needed:  # nothing upstream of this node is asked for
                continue
        for t, gi in zip(node.inputs, node.backward(g, create_graph)):
            if t is None or gi is None:
                continue
            if t.grad_fn is None:
                sink.add(t, gi)
            else:
                grads[t.grad_fn] = grads[t.grad_fn] + gi if t.grad_fn in grads else gi
        if not retain_graph:
            node.free()
    return sink.deliver()


class _LeafGrads:
    """Gradients for the leaves, summed over the walk and handed to each leaf once, as soon as it is complete.

    A leaf's gradient is complete once the walk has passed the last node that takes the leaf as an input
    (`plan`): from then on nothing more can flow into it. Delivering it there, rather than after the
    whole walk, is what lets a post-accumulate-grad hook (data parallelism's all-reduce) start while the
    rest of the backward still runs, as PyTorch's AccumulateGrad node fires when its inputs are done.
    The sums are the same either way, so no value changes."""

    def __init__(self, caller_gradients: list):
        self.sums = {}  # id(leaf) -> [leaf, summed gradient]
        self.owned = {id(_array(g)) for g in caller_gradients}  # arrays a leaf must not take
        self.done_after = []  # (index of the last node feeding the leaf, its input slot there, id(leaf)), latest first

    def plan(self, order: list) -> None:
        # id(leaf) -> (index in `order` of the last node taking it as an input, the input slot there). The slot orders
        # the leaves one node hands over together (a Linear's weight, then its bias) by the graph alone, not by their
        # memory addresses: every process running the same model gets the same order (data parallelism's ranks
        # rebuild their buckets in rank 0's arrival order, and compare it with their own)
        last = {}
        for k, node in enumerate(order):
            for slot, t in enumerate(node.inputs):
                if t is not None and t.grad_fn is None:
                    last[id(t)] = (k, slot)
        self.done_after = sorted(((k, slot, i) for i, (k, slot) in last.items()), reverse=True)

    def deliver_ready(self, k: int, pending: dict) -> None:
        """Hand over the leaves whose last feeding node comes before position k of the walk. `pending`: the
        gradients still to flow (node -> gradient); a leaf must not take one of their arrays (x + y, y a leaf
        and x not, sends one array both ways), since a hook may scale .grad in place while the walk goes on."""
        busy = None
        while self.done_after and self.done_after[-1][0] < k:
            entry = self.sums.pop(self.done_after.pop()[2], None)
            if entry is not None:  # None: nothing flowed into this leaf
                busy = {id(_array(g)) for g in pending.values()} if busy is None else busy
                self.give(*entry, busy=busy)

    def add(self, leaf, g) -> None:
        entry = self.sums.get(id(leaf))
        if entry is None:
            self.sums[id(leaf)] = [leaf, g]
        else:
            entry[1] = entry[1] + g

    def deliver(self) -> None:
        """The leaves still held at the end of the walk (the last nodes' inputs, leaf roots)."""
        for leaf, g in self.sums.values():
            self.give(leaf, g)

    def give(self, leaf, g, busy=()) -> None:
        # a leaf keeps its .grad array and may later scale it in place (clip_grad_norm_), so it must own
        # it alone: not a view, not the caller's gradient, not another leaf's array, not one still flowing
        a = _array(g)
        if not (owns_memory(a) and a.flags.c_contiguous) or id(a) in self.owned or id(a) in busy:
            g = g.clone() if is_tensor_like(g) else g.copy(order="C")  # .copy: stays on the array's device
        self.owned.add(id(_array(g)))
        leaf.accumulate_grad(g)


def owns_memory(a) -> bool:
    """Whether `a` owns its buffer and may be written: not a view, not read-only. CuPy's flags have no
    `writeable` (every device array is), so a missing flag reads as writable."""
    return a.flags.owndata and getattr(a.flags, "writeable", True)


def _array(g) -> np.ndarray:
    """The array of a gradient: itself, or a Tensor's under create_graph."""
    return g.data if is_tensor_like(g) else g


class _InputGrads:
    """What grad() collects: the summed gradient of each requested input, leaf or not."""

    def __init__(self, inputs):
        self.inputs = inputs
        self.leaves = {id(t) for t in inputs if t.grad_fn is None}
        self.nodes = {t.grad_fn for t in inputs if t.grad_fn is not None}
        self.found = {}  # id(leaf) or node -> gradient
        self.reached, self.reached_leaves = set(), set()  # nodes and leaves the walk reaches

    def nodes_to_run(self, order: list) -> set:
        """The nodes whose backward leads to a requested input (producers first, so one pass)."""
        run = set()
        for node in reversed(order):
            if any(
                t is not None
                and (id(t) in self.leaves if t.grad_fn is None else t.grad_fn in self.nodes or t.grad_fn in run)
                for t in node.inputs
            ):
                run.add(node)
        self.reached = run | (self.nodes & set(order))
        self.reached_leaves = {id(t) for node in run for t in node.inputs if t is not None} & self.leaves
        return run

    def plan(self, order: list) -> None:  # grad() returns its results at the end: nothing to hand over early
        pass

    def deliver_ready(self, k: int, pending: dict) -> None:
        pass

    def capture(self, node, g) -> None:
        if node in self.nodes:
            self.found[node] = g

    def add(self, leaf, g) -> None:
        if id(leaf) in self.leaves:
            key = id(leaf)
            self.found[key] = self.found[key] + g if key in self.found else g
            self.reached_leaves.add(key)

    def deliver(self) -> list:
        """Per input: its gradient, zeros where the graph reaches it but nothing flowed, None if unreached."""
        out = []
        for t in self.inputs:
            key = id(t) if t.grad_fn is None else t.grad_fn
            g = self.found.get(key)
            if g is not None and t.grad_fn is None:  # a leaf's hooks, on its summed gradient (a non-leaf's
                g = t.apply_hooks(g)  # ran in Node.receive before capture), as PyTorch applies them
            if g is None and key in (self.reached_leaves if t.grad_fn is None else self.reached):
                g = np.zeros_like(t.data)  # (zeros_like: on t's device)
            out.append(g)
        return out


# --------------------------------------------------------------------------------------------
# The entry points: Tensor.backward and grad
# --------------------------------------------------------------------------------------------


def _as_tuple(x, what: str) -> tuple:
    xs = tuple(x) if isinstance(x, (tuple, list)) else (x,)
    for i, t in enumerate(xs):
        if not is_tensor_like(t):
            raise TypeError(f"{what} {i} must be a Tensor, got {type(t).__name__}")
    return xs


def root_gradient(output, gradient, create_graph: bool, who: str, index: int = 0):
    """The gradient a backward starts from for `output` (output `index` of the call): ones for a one-element output,
    else `gradient` checked against the output's shape, dtype and device before any work, in torch's words. An
    array, or a Tensor under create_graph. A number or a list is made on the output's device; a 0-d gradient
    on another device is moved to it, as torch's engine moves one (validate_outputs); any other gradient on
    another device is refused.

    Deviation from PyTorch, flagged: torch casts a gradient of another floating dtype to the output's silently;
    here that is refused (no implicit cast), naming both dtypes."""
    if gradient is None:
        if output.data.size != 1:
            raise RuntimeError(
                f"{who}: grad can be implicitly created only for scalar outputs; this output has "
                f"shape {output.shape}: pass a gradient of that shape (grad_outputs= / gradient=)"
            )
        g = np.ones_like(output.data)  # the seed, on the output's device (ones_like keeps the array's module)
        return output.wrap(g) if create_graph else g
    if is_tensor_like(gradient) or is_array(gradient):
        g = gradient.data if is_tensor_like(gradient) else gradient
    else:  # a number or a list: it has no device of its own
        g = array_module(output.data).asarray(gradient)
    if g.shape != output.shape:
        raise RuntimeError(
            f"{who}: Mismatch in shape: grad_output[{index}] has a shape of {g.shape} and output[{index}] has a "
            f"shape of {output.shape}"
        )
    if g.dtype != output.dtype:
        raise TypeError(
            f"{who}: Mismatch in dtype: grad_output[{index}] has dtype {g.dtype} and output[{index}] has dtype "
            f"{output.dtype} (no implicit cast here: convert it with .to(mt.{output.dtype.name}))"
        )
    if type(g) is not type(output.data) and device_of(g) != output.device:
        if g.ndim != 0:
            raise RuntimeError(
                f"{who}: invalid gradient at index {index} - expected device {output.device} but got "
                f"{device_of(g)} (move it with .to({str(output.device)!r}))"
            )
        if create_graph and is_tensor_like(gradient):
            return gradient.to(output.device)  # a differentiable move: the result depends on the gradient
        g = to_device(g, output.device)
    if create_graph and is_tensor_like(gradient):
        return gradient  # keeps its graph: the result depends on it
    return output.wrap(g) if create_graph else g


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False) -> None:
    """torch.autograd.backward: accumulate the gradients of `tensors` (one or a sequence), weighted by
    `grad_tensors` (None: ones, for one-element tensors), into every leaf's .grad. Tensor.backward calls it."""
    tensors = _as_tuple(tensors, "tensor")
    grad_tensors = (None,) * len(tensors) if grad_tensors is None else _grads_per_output(grad_tensors, tensors)
    for t in tensors:
        if not t.requires_grad:
            raise RuntimeError(
                "backward(): this tensor does not require grad and has no grad_fn "
                "(was it computed under no_grad, or from tensors without requires_grad=True?)"
            )
    gs = [root_gradient(t, g, create_graph, "backward()", i) for i, (t, g) in enumerate(zip(tensors, grad_tensors))]
    retain = create_graph if retain_graph is None else retain_graph
    with set_grad_enabled(create_graph), ieee_quiet():  # IEEE values at the edges, no NumPy warnings
        run_backward(tensors, gs, retain_graph=retain, create_graph=create_graph)


def _grads_per_output(grads, outputs: tuple) -> tuple:
    grads = tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)
    if len(grads) != len(outputs):
        raise ValueError(f"{len(grads)} gradients given for {len(outputs)} outputs: one per output (None for ones)")
    return grads


def grad(
    outputs, inputs, grad_outputs=None, retain_graph=None, create_graph: bool = False, allow_unused: bool = False
) -> tuple:
    """The gradients of `outputs` with respect to `inputs`, as torch.autograd.grad: sum over outputs of
    grad_outputs[i] . d outputs[i] / d input, one Tensor per input (leaf or not); .grad is left alone.

    grad_outputs: one gradient per output (None: ones, for a one-element output). retain_graph defaults
    to create_graph. create_graph=True records the backward, so the result can be differentiated again.
    allow_unused=True returns None for an input the outputs do not depend on; otherwise that is an error."""
    outputs, inputs = _as_tuple(outputs, "output"), _as_tuple(inputs, "input")
    grad_outputs = (None,) * len(outputs) if grad_outputs is None else _grads_per_output(grad_outputs, outputs)
    return _grad_walk(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, record=create_graph)


def tangent_grad(outputs, inputs, grad_outputs=None, retain_graph: bool = False, allow_unused: bool = False) -> tuple:
    """grad() whose walk runs on Tensors, as under create_graph, but records nothing (grad mode off).

    For forward over reverse: inside an open forward-mode level the backward's primitives carry tangents
    (tangents flow under no_grad, as in PyTorch), so the tangent of the returned gradient of a scalar f is
    H v, where v is the inputs' tangent. Where no second reverse pass reads the gradient's graph, recording
    it is wasted work: this walk skips it. Outside a level it returns what grad() returns, as Tensors."""
    outputs, inputs = _as_tuple(outputs, "output"), _as_tuple(inputs, "input")
    grad_outputs = (None,) * len(outputs) if grad_outputs is None else _grads_per_output(grad_outputs, outputs)
    return _grad_walk(outputs, inputs, grad_outputs, retain_graph, True, allow_unused, record=False)


def _grad_walk(outputs, inputs, grad_outputs, retain_graph, create_graph: bool, allow_unused: bool, record: bool):
    """grad()'s walk; create_graph: on Tensors; record: with grad mode on, so that the walk is recorded."""
    for i, o in enumerate(outputs):
        if not o.requires_grad:
            raise RuntimeError(f"grad: output {i} does not require grad and has no grad_fn")
    for i, t in enumerate(inputs):
        if not t.requires_grad:
            raise RuntimeError(f"grad: input {i} (shape {t.shape}) does not require grad, so it has no gradient")
    gs = [root_gradient(o, g, create_graph, "grad()", i) for i, (o, g) in enumerate(zip(outputs, grad_outputs))]
    retain = create_graph if retain_graph is None else retain_graph
    with set_grad_enabled(record), ieee_quiet():
        found = run_backward(outputs, gs, retain_graph=retain, create_graph=create_graph, inputs=inputs)
    result, taken = [], {id(g) for g in gs}  # arrays a result must not share
    for i, (t, g) in enumerate(zip(inputs, found)):
        if g is None and not allow_unused:
            raise RuntimeError(
                f"grad: input {i} (shape {t.shape}) was not used to compute the outputs; "
                f"pass allow_unused=True to get None for it"
            )
        if g is not None and not is_tensor_like(g):  # the caller may write into it: an array of its own
            g = array_module(g).asarray(g)  # a NumPy scalar becomes a 0-d array; a device array stays as it is
            if not owns_memory(g) or id(g) in taken:
                g = g.copy()
            taken.add(id(g))
            g = t.wrap(g)
        result.append(g)
    return tuple(result)
