"""The graph walk and its entry points: backward(), grad(), and run_backward, the walk they share.

`run_backward` sorts the nodes topologically without recursion (`topological_order`), runs each node's backward,
adds up what reaches each tensor, and frees the saved arrays unless `retain_graph=True`. A backward never writes into
the incoming `g` or a saved array (x + x sends one array to two inputs): gradients are combined into new arrays, and a
leaf receives an array it owns alone. Deviation from PyTorch, flagged: every node on the path is freed after a
backward, also one that saved nothing (docs/engine.md).
"""

from __future__ import annotations

import numpy as np

from . import points
from .function import is_tensor_like
from .grad_mode import set_grad_enabled


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
    """Backpropagate `gradients` (one per root tensor) through the graph: into every leaf's .grad (inputs=None), or
    only along the paths to `inputs`, whose gradients are returned (grad()). create_graph: on Tensors, recorded."""
    roots, gradients = list(roots), list(gradients)
    early = inputs is None and points.leaf_sink is not None  # extension point: leaves served during the walk
    sink = (points.leaf_sink if early else LeafGrads)(gradients) if inputs is None else InputGrads(inputs)
    grads = {}  # node -> gradient of its output, summed
    for root, g in zip(roots, gradients):
        if root.grad_fn is None:  # a leaf: the gradient goes straight to it
            sink.add(root, g if is_tensor_like(g) else g.copy())
        else:
            grads[root.grad_fn] = grads[root.grad_fn] + g if root.grad_fn in grads else g
    order = topological_order([r.grad_fn for r in roots if r.grad_fn is not None])
    needed = None if inputs is None else sink.nodes_to_run(order)
    if early:
        sink.plan(order)
    for k, node in enumerate(order):
        if early:
            sink.deliver_ready(k, grads)
        g = grads.pop(node, None)
        if g is None:  # nothing flows into this node
            continue
        if needed is not None and node not in needed and node not in sink.nodes:
            continue  # grad(): off the path to the inputs, so its hooks do not run either (as in PyTorch)
        if node.hooks is not None or node.retained is not None:
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


class LeafGrads:
    """Gradients for the leaves, summed over the walk and handed to each leaf at its end."""

    def __init__(self, caller_gradients: list):
        self.sums = {}  # id(leaf) -> [leaf, summed gradient]
        self.owned = {id(array_of(g)) for g in caller_gradients}  # arrays a leaf must not take

    def add(self, leaf, g) -> None:
        entry = self.sums.get(id(leaf))
        if entry is None:
            self.sums[id(leaf)] = [leaf, g]
        else:
            entry[1] = entry[1] + g

    def deliver(self) -> None:
        for leaf, g in self.sums.values():
            self.give(leaf, g)

    def give(self, leaf, g, busy=()) -> None:
        # a leaf keeps its .grad array and may later scale it in place (clip_grad_norm_), so it must own it
        # alone: not a view, not the caller's gradient, not another leaf's array, not one still flowing (busy)
        a = array_of(g)
        if not (owns_memory(a) and a.flags.c_contiguous) or id(a) in self.owned or id(a) in busy:
            g = g.clone() if is_tensor_like(g) else g.copy(order="C")  # .copy: stays on the array's device
        self.owned.add(id(array_of(g)))
        leaf.accumulate_grad(g)


def owns_memory(a) -> bool:
    """Whether `a` owns its buffer and may be written (CuPy's flags have no `writeable`: every device array is)."""
    return a.flags.owndata and getattr(a.flags, "writeable", True)


def array_of(g):
    """The array of a gradient: itself, or a Tensor's under create_graph."""
    return g._data if is_tensor_like(g) else g


class InputGrads:
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
            if g is not None and t.grad_fn is None:  # a leaf's hooks, on its summed gradient (a non-leaf's ran
                g = t.apply_hooks(g)  # in Node.receive), as PyTorch applies them
            if g is None and key in (self.reached_leaves if t.grad_fn is None else self.reached):
                g = np.zeros_like(t._data)  # (zeros_like keeps the array's device)
            out.append(g)
        return out


def as_tuple(x, what: str) -> tuple:
    xs = tuple(x) if isinstance(x, (tuple, list)) else (x,)
    for i, t in enumerate(xs):
        if not is_tensor_like(t):
            raise TypeError(f"{what} {i} must be a Tensor, got {type(t).__name__}")
    return xs


def root_gradient(output, gradient, create_graph: bool, who: str, index: int = 0):
    """The gradient a backward starts from for `output`: ones for a one-element output, else `gradient` checked
    against the output's shape and dtype, in torch's words. Deviation from PyTorch, flagged: torch casts a gradient
    of another floating dtype silently; here that is refused, naming both dtypes."""
    if gradient is None:
        if output._data.size != 1:
            raise RuntimeError(
                f"{who}: grad can be implicitly created only for scalar outputs; this output has "
                f"shape {output.shape}: pass a gradient of that shape (grad_outputs= / gradient=)"
            )
        g = np.ones_like(output._data)  # (ones_like keeps the array's device)
        return output.wrap(g) if create_graph else g
    if points.devices is not None:  # extension point: a gradient may come from another device (devices.py)
        g, moved = points.devices.root_array(output, gradient, create_graph, who, index)
    else:
        g, moved = (gradient._data if is_tensor_like(gradient) else np.asarray(gradient)), None
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
    if create_graph and is_tensor_like(gradient):
        return gradient if moved is None else moved  # keeps its graph: the result depends on it
    return output.wrap(g) if create_graph else g


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False) -> None:
    """torch.autograd.backward: accumulate the gradients of `tensors` (one or a sequence), weighted by
    `grad_tensors` (None: ones, for one-element tensors), into every leaf's .grad. Tensor.backward calls it."""
    tensors = as_tuple(tensors, "tensor")
    grad_tensors = (None,) * len(tensors) if grad_tensors is None else grads_per_output(grad_tensors, tensors)
    for t in tensors:
        if not t.requires_grad:
            raise RuntimeError(
                "backward(): this tensor does not require grad and has no grad_fn "
                "(was it computed under no_grad, or from tensors without requires_grad=True?)"
            )
    gs = [root_gradient(t, g, create_graph, "backward()", i) for i, (t, g) in enumerate(zip(tensors, grad_tensors))]
    retain = create_graph if retain_graph is None else retain_graph
    with set_grad_enabled(create_graph), points.quiet():  # IEEE values at the edges, no NumPy warnings
        run_backward(tensors, gs, retain_graph=retain, create_graph=create_graph)


def grads_per_output(grads, outputs: tuple) -> tuple:
    grads = tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)
    if len(grads) != len(outputs):
        raise ValueError(f"{len(grads)} gradients given for {len(outputs)} outputs: one per output (None for ones)")
    return grads


def grad(
    outputs, inputs, grad_outputs=None, retain_graph=None, create_graph: bool = False, allow_unused: bool = False
) -> tuple:
    """torch.autograd.grad: sum_i grad_outputs[i] . d outputs[i] / d input, a Tensor per input (leaf or not); .grad is
    left alone. allow_unused=True returns None for an input the outputs do not depend on."""
    outputs, inputs = as_tuple(outputs, "output"), as_tuple(inputs, "input")
    grad_outputs = (None,) * len(outputs) if grad_outputs is None else grads_per_output(grad_outputs, outputs)
    return grad_walk(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, record=create_graph)


def grad_walk(outputs, inputs, grad_outputs, retain_graph, create_graph: bool, allow_unused: bool, record: bool):
    """grad()'s walk; create_graph: on Tensors; record: with grad mode on, so that the walk is recorded."""
    for i, o in enumerate(outputs):
        if not o.requires_grad:
            raise RuntimeError(f"grad: output {i} does not require grad and has no grad_fn")
    for i, t in enumerate(inputs):
        if not t.requires_grad:
            raise RuntimeError(f"grad: input {i} (shape {t.shape}) does not require grad, so it has no gradient")
    gs = [root_gradient(o, g, create_graph, "grad()", i) for i, (o, g) in enumerate(zip(outputs, grad_outputs))]
    retain = create_graph if retain_graph is None else retain_graph
    with set_grad_enabled(record), points.quiet():
        found = run_backward(outputs, gs, retain_graph=retain, create_graph=create_graph, inputs=inputs)
    result, taken = [], {id(g) for g in gs}  # arrays a result must not share
    for i, (t, g) in enumerate(zip(inputs, found)):
        if g is None and not allow_unused:
            raise RuntimeError(
                f"grad: input {i} (shape {t.shape}) was not used to compute the outputs; "
                f"pass allow_unused=True to get None for it"
            )
        if g is not None and not is_tensor_like(g):  # the caller may write into it: an array of its own
            g = np.asarray(g) if isinstance(g, np.generic) else g  # a NumPy scalar becomes a 0-d array
            if not owns_memory(g) or id(g) in taken:
                g = g.copy()
            taken.add(id(g))
            g = t.wrap(g)
        result.append(g)
    return tuple(result)
