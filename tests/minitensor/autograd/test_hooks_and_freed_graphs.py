"""The graph walk's edges, against torch: hooks under autograd.grad, a freed graph is never read as "not
used", retain_grad keeps no graph alive after the step, and nodes name their op."""

from __future__ import annotations

import gc
import re
import weakref

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import OP_RTOL, assert_close

RTOL = OP_RTOL["float64"]
LIBS = pytest.mark.parametrize("lib", [mt, torch], ids=["minitensor", "torch"])


def _leaf(lib, arr):
    return lib.tensor(np.array(arr, dtype=np.float64), requires_grad=True)


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.detach().numpy()


def _both(script, rng):
    """script(lib, arrays) run on both libraries with the same float64 arrays; results as NumPy."""
    arrays = [rng.standard_normal(3) for _ in range(4)]
    out = []
    for lib in (mt, torch):
        res = script(lib, [a.copy() for a in arrays])
        out.append([None if r is None else _np(r) if hasattr(r, "shape") else r for r in res])
    return out


def _assert_same(ours, ref, what):
    assert len(ours) == len(ref), what
    for i, (a, b) in enumerate(zip(ours, ref)):
        if a is None or b is None or isinstance(a, (str, int, float, bool, list)):
            assert a == b if not isinstance(a, np.ndarray) else False, f"{what} [{i}]: {a!r} vs {b!r}"
        else:
            assert_close(a, b, RTOL, f"{what} [{i}]")


# ----------------------------------------------------------------------------- hooks under autograd.grad
def _leaf_hooks(lib, a):
    x = _leaf(lib, a[0])
    seen = []
    x.register_hook(lambda g: seen.append(g.detach().clone()))  # returns None: observes only
    x.register_hook(lambda g: g * lib.tensor(a[1]))
    x.register_hook(lambda g: seen.append(g.detach().clone()))
    y = (x * x * x * lib.tensor(a[2])).sum()  # x used three times: the hooks see the summed gradient once
    (gx,) = lib.autograd.grad(y, x)
    return [gx, *seen, len(seen)]


def _nonleaf_input_hook(lib, a):
    def graph():
        x = _leaf(lib, a[0])
        h = x.exp()
        h.register_hook(lambda g: g * lib.tensor(a[1]))
        return x, h, (h.tanh() * lib.tensor(a[2])).sum()

    x, h, y = graph()
    (gh,) = lib.autograd.grad(y, h)
    x, h, y = graph()
    (gx,) = lib.autograd.grad(y, x)
    return [gh, gx]


def test_a_non_leaf_input_is_captured_after_its_hooks_also_when_its_node_runs(rng):
    """Deviation from torch, flagged: grad(y, [h, x]) captures h's gradient before h's hooks in torch 2.13 (its
    engine captures before the tensor pre-hooks when h's node also runs for x), but after them for grad(y, h)
    alone. Here h's gradient is the hooked one both ways, as torch's hook-order note states (tensor hooks first)."""
    a = [rng.standard_normal(3) for _ in range(3)]
    alone, _ = _nonleaf_input_hook(mt, a)
    x = _leaf(mt, a[0])
    h = x.exp()
    h.register_hook(lambda g: g * mt.tensor(a[1]))
    gh, gx = mt.autograd.grad((h.tanh() * mt.tensor(a[2])).sum(), [h, x])
    assert_close(gh.numpy(), _np(alone), RTOL, "h's gradient with x also asked for")
    assert_close(gx.numpy(), _nonleaf_input_hook(torch, a)[1].detach().numpy(), RTOL, "x's gradient")


def _intermediate_hooks(lib, a):
    """A hook on the path changes what reaches x; one off the path (b feeds y but not x) never runs, and
    retain_grad on the path keeps the hooked gradient, under grad() as under backward()."""
    x, w = _leaf(lib, a[0]), _leaf(lib, a[1])
    calls = []
    h = x.tanh()
    h.register_hook(lambda g: calls.append("h") or g * 3)
    h.retain_grad()
    b = w * 2
    b.register_hook(lambda g: calls.append("b"))
    b.retain_grad()
    y = (h * b * lib.tensor(a[2])).sum()
    (gx,) = lib.autograd.grad(y, x)
    return [gx, h.grad, b.grad, calls]


def _create_graph_leaf_hook(lib, a):
    x = _leaf(lib, a[0])
    x.register_hook(lambda g: g * x)  # a hook that is itself differentiable
    (g,) = lib.autograd.grad((x.exp() * lib.tensor(a[1])).sum(), x, create_graph=True)
    (g2,) = lib.autograd.grad((g * lib.tensor(a[2])).sum(), x)
    return [g, g2, g.requires_grad]


def _root_is_the_leaf(lib, a):
    x = _leaf(lib, a[0])
    x.register_hook(lambda g: g * 5)
    (gx,) = lib.autograd.grad(x, x, lib.tensor(a[1]))
    return [gx]


def _removed_hook(lib, a):
    x = _leaf(lib, a[0])
    handle = x.register_hook(lambda g: g * 100)
    handle.remove()
    (gx,) = lib.autograd.grad((x.tanh() * lib.tensor(a[1])).sum(), x)
    return [gx]


def _hook_and_grad_then_backward(lib, a):
    """grad() applies a leaf's hook to what it returns, and leaves .grad alone; backward() then applies it again."""
    x = _leaf(lib, a[0])
    x.register_hook(lambda g: g * lib.tensor(a[1]))
    y = (x.exp() * lib.tensor(a[2])).sum()
    (gx,) = lib.autograd.grad(y, x, retain_graph=True)
    untouched = x.grad is None
    y.backward()
    return [gx, untouched, x.grad]


HOOK_SCRIPTS = [
    _leaf_hooks,
    _nonleaf_input_hook,
    _intermediate_hooks,
    _create_graph_leaf_hook,
    _root_is_the_leaf,
    _removed_hook,
    _hook_and_grad_then_backward,
]


@pytest.mark.parametrize("script", HOOK_SCRIPTS, ids=[s.__name__.strip("_") for s in HOOK_SCRIPTS])
def test_hooks_under_autograd_grad_match_torch(script, rng):
    ours, ref = _both(script, rng)
    _assert_same(ours, ref, script.__name__)


# ----------------------------------------------------------------------------- a freed graph
def _second_time(lib, call):
    """The message of the error `call` raises (it must raise)."""
    with pytest.raises(RuntimeError) as info:
        call()
    return str(info.value)


FREED = re.compile(r"second time")


def _after_backward(lib, a):
    x = _leaf(lib, a[0])
    y = x.exp()
    y.sum().backward()  # frees ExpBackward
    return (y * lib.tensor(a[1])).sum(), x  # a fresh root whose path to x goes through the freed node


def _after_grad(lib, a):
    x = _leaf(lib, a[0])
    y = x.exp()
    lib.autograd.grad(y.sum(), x)  # grad() frees too, retain_graph defaulting to create_graph=False
    return (y * lib.tensor(a[1])).sum(), x


def _second_derivative_freed(lib, a):
    """d2/dx2 exp(x): the second grad frees the first's graph and ExpBackward under it; a third goes through it."""
    x = _leaf(lib, a[0])
    (g,) = lib.autograd.grad((x.exp() * lib.tensor(a[1])).sum(), x, create_graph=True)
    lib.autograd.grad(g.sum(), x)
    return g.sum(), x


def _first_graph_after_its_derivative(lib, a):
    """y's own graph, kept by create_graph=True, loses ExpBackward to the second-order pass."""
    x = _leaf(lib, a[0])
    y = (x.exp() * lib.tensor(a[1])).sum()
    (g,) = lib.autograd.grad(y, x, create_graph=True)
    lib.autograd.grad(g.sum(), x)
    return y, x


def _nonleaf_input(lib, a):
    x = _leaf(lib, a[0])
    h = x.exp()
    k = h.tanh()
    k.sum().backward()  # frees TanhBackward and ExpBackward
    return (k * lib.tensor(a[1])).sum(), h  # h is a non-leaf input; the path to it goes through TanhBackward


def _partly_freed(lib, a):
    """Only the branch through w was freed; the path from the new root to w goes through it."""
    x, w = _leaf(lib, a[0]), _leaf(lib, a[1])
    u = (w * 3).tanh()
    (u * lib.tensor(a[2])).sum().backward()
    return (u * x).sum() + (x * x).sum(), w


FREED_CASES = [
    _after_backward,
    _after_grad,
    _second_derivative_freed,
    _first_graph_after_its_derivative,
    _nonleaf_input,
    _partly_freed,
]


@pytest.mark.parametrize("allow_unused", [True, False])
@pytest.mark.parametrize("case", FREED_CASES, ids=[c.__name__.strip("_") for c in FREED_CASES])
@LIBS
def test_grad_through_a_freed_graph_raises_the_freed_error(lib, case, allow_unused, rng):
    root, wrt = case(lib, [rng.standard_normal(3) for _ in range(3)])
    message = _second_time(lib, lambda: lib.autograd.grad(root, wrt, allow_unused=allow_unused))
    assert FREED.search(message), message
    assert "not used" not in message and "unused" not in message


@pytest.mark.parametrize("case", FREED_CASES, ids=[c.__name__.strip("_") for c in FREED_CASES])
@LIBS
def test_backward_through_a_freed_graph_raises_the_freed_error(lib, case, rng):
    root, _ = case(lib, [rng.standard_normal(3) for _ in range(3)])
    assert FREED.search(_second_time(lib, root.backward))


def _freed_branch_off_the_path(lib, a):
    """A freed branch that does not lead to the input asked for: torch does not run it, nor does grad() here."""
    x, w = _leaf(lib, a[0]), _leaf(lib, a[1])
    feat = x.exp()
    feat.sum().backward()  # frees ExpBackward
    y = (feat * w * lib.tensor(a[2])).sum()
    (gw,) = lib.autograd.grad(y, w)
    (gw_unused,) = lib.autograd.grad((w * w).sum() + 0 * feat.sum().detach(), w, allow_unused=True)
    return [gw, gw_unused]


def test_a_freed_branch_off_the_path_is_not_needed(rng):
    ours, ref = _both(_freed_branch_off_the_path, rng)
    _assert_same(ours, ref, "freed branch off the path")


def test_an_input_truly_unused_is_still_reported_unused(rng):
    x, z = _leaf(mt, rng.standard_normal(3)), _leaf(mt, rng.standard_normal(3))
    y = x.exp()
    y.sum().backward()
    root = (z * 2).sum()  # x is not upstream of root at all
    assert mt.autograd.grad(root, [z, x], allow_unused=True, retain_graph=True)[1] is None
    with pytest.raises(RuntimeError, match="was not used"):
        mt.autograd.grad(root, [z, x])


# ----------------------------------------------------------------------------- retain_grad keeps no graph alive
def _retaining_step(w, x, c, refs=None):
    a = x @ w  # MatMul saves x and w (leaves)
    b = a.exp()  # Exp saves its output b
    h = b * c  # Mul saves b and c
    h.retain_grad()
    loss = h.tanh().sum()  # Tanh saves its output
    if refs is not None:
        refs += [weakref.ref(b._data), weakref.ref(b.grad_fn), weakref.ref(loss.grad_fn)]
    return h, loss


def test_after_backward_a_retained_tensor_keeps_only_its_gradient(rng):
    w_np, x_np, c_np = rng.standard_normal((4, 3)) / 3, rng.standard_normal((5, 4)) / 3, rng.standard_normal((5, 3))
    w, x, c = mt.tensor(w_np, requires_grad=True), mt.tensor(x_np), mt.tensor(c_np)
    gc.collect()
    gc.disable()  # reference counting alone must free it: no cycle through the retained tensor
    try:
        refs = []
        h, loss = _retaining_step(w, x, c, refs)
        loss.backward()
        del loss
        assert refs[0]() is None, "a saved array outlived the backward"
        wt = torch.tensor(w_np, requires_grad=True)
        ht = (torch.tensor(x_np) @ wt).exp() * torch.tensor(c_np)
        ht.retain_grad()
        ht.tanh().sum().backward()
        assert_close(h.grad.numpy(), ht.grad.numpy(), RTOL, "retained gradient")
        assert_close(w.grad.numpy(), wt.grad.numpy(), RTOL, "leaf gradient")
        data, node = weakref.ref(h._data), weakref.ref(h.grad_fn)
        del h
        assert data() is None and node() is None, "the retained tensor and its node live on in a cycle"
        assert refs[1]() is None and refs[2]() is None, "nodes of the step outlived it"
    finally:
        gc.enable()


def _live(kind) -> int:
    return sum(1 for o in gc.get_objects() if issubclass(type(o), kind))  # type(): isinstance pokes lazy torch modules


def test_retain_grad_over_many_steps_does_not_grow_memory(rng):
    w = mt.tensor(rng.standard_normal((4, 3)) / 3, requires_grad=True)
    x, c = mt.tensor(rng.standard_normal((5, 4)) / 3), mt.tensor(rng.standard_normal((5, 3)))

    def train(n):
        for _ in range(n):
            h, loss = _retaining_step(w, x, c)
            loss.backward()
            assert h.grad is not None
            with mt.no_grad():
                w.data -= 0.01 * w.grad.data
            w.grad = None

    gc.collect()
    gc.disable()
    try:
        train(3)
        before = (_live(mt.Tensor), _live(mt.autograd.Node), _live(np.ndarray))
        train(50)
        after = (_live(mt.Tensor), _live(mt.autograd.Node), _live(np.ndarray))
    finally:
        gc.enable()
    assert after <= before, f"live (tensors, nodes, arrays) grew from {before} to {after} over 50 steps"


def test_retain_grad_of_a_dropped_tensor_is_harmless(rng):
    x = mt.tensor(rng.standard_normal(3), requires_grad=True)
    h = x * 2
    h.retain_grad()
    y = h.exp().sum()
    del h
    y.backward()  # the retained tensor is gone: nothing to keep, no error
    assert_close(x.grad.numpy(), 2 * np.exp(2 * x.detach().numpy()), RTOL, "x.grad")


# ----------------------------------------------------------------------------- nodes name their op
OPS = {
    "tanh": lambda t: t.tanh(),
    "exp": lambda t: t.exp(),
    "sum": lambda t: t.sum(),
    "mean": lambda t: t.mean(),
    "sigmoid": lambda t: t.sigmoid(),
    "mul": lambda t: t * t,
    "add": lambda t: t + t,
    "sub": lambda t: t - t,
    "div": lambda t: t / t,
    "neg": lambda t: -t,
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_a_node_is_named_after_its_op_as_in_torch(op):
    """TanhBackward where torch says TanhBackward0: the trailing number counts overloads of torch's formula."""
    y = OPS[op](mt.tensor([0.5, 1.5], requires_grad=True))
    ours = type(y.grad_fn).__name__
    theirs = type(OPS[op](torch.tensor([0.5, 1.5], requires_grad=True)).grad_fn).__name__
    assert ours == theirs.rstrip("0123456789")
    assert y.grad_fn.name() == ours and repr(y.grad_fn) == f"<{ours}>"
    assert f"grad_fn=<{ours}>" in repr(y)
    assert isinstance(y.grad_fn, mt.autograd.Node) and y.grad_fn.fn.__name__ + "Backward" == ours


def test_a_custom_function_gets_its_node_class_once():
    class Twice(mt.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y, z = Twice.apply(x), Twice.apply(x)
    assert type(y.grad_fn) is type(z.grad_fn) and type(y.grad_fn).__name__ == "TwiceBackward"
    assert repr(mt.autograd.Edge(y)) == "<Edge from TwiceBackward (2,) float32>"


def test_viz_and_profiler_still_name_the_ops():
    x = mt.tensor([0.5, 1.5], requires_grad=True)
    with mt.profiler.profile() as prof:
        loss = x.tanh().sum()
        dot = mt.viz.to_dot(loss)
        loss.backward()
    assert {r["op"] for r in prof.rows()} == {"Tanh", "Sum"}
    assert 'label="TanhBackward' in dot and 'label="SumBackward' in dot
    assert "(saved arrays freed by backward)" in mt.viz.to_dot(loss)
