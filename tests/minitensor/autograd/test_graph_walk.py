"""The graph walk itself: depth, accumulation, graph freeing, hooks, grad modes, dtypes, memory.

Op values are the table's business (tests/minitensor/ops/test_op_table.py); here each test pins one behaviour
of the engine that users of PyTorch rely on, checked against torch where torch defines it.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import OP_RTOL, assert_close

RTOL = OP_RTOL["float64"]


def _both(arr, requires_grad=True):
    arr = np.asarray(arr, dtype=np.float64)
    return mt.tensor(arr.copy(), requires_grad=requires_grad), torch.tensor(arr.copy(), requires_grad=requires_grad)


# ----------------------------------------------------------------------------- depth
def test_deep_chain_no_recursion_error():
    """100,000 scalar ops in one chain: the walk must be iterative (no RecursionError)."""
    a, b, n = 0.99999, 1e-5, 50_000  # two ops per step
    x = mt.tensor(1.0, dtype=mt.float64, requires_grad=True)
    y = x
    for _ in range(n):
        y = y * a + b
    y.backward()
    expected = 1.0
    for _ in range(n):  # the same multiplications, in the same order
        expected *= a
    assert_close(x.grad.numpy(), np.array(expected), RTOL, "d(chain)/dx")
    del y  # freeing a 100k-deep graph must not overflow either


# ----------------------------------------------------------------------------- accumulation, retain_graph
def test_grad_accumulates_across_backward_calls(rng):
    g1 = rng.standard_normal((3, 4))
    (xm, xt) = _both(rng.standard_normal((3, 4)))
    for x, lib in ((xm, mt), (xt, torch)):
        (x * lib.tensor(g1)).sum().backward()
        (x * x).sum().backward()
    assert_close(xm.grad.numpy(), xt.grad.numpy(), RTOL, "accumulated grad")
    assert_close(xm.grad.numpy(), g1 + 2 * xm.detach().numpy(), RTOL, "g1 + 2x")


def test_retain_graph_allows_second_backward(rng):
    xm, xt = _both(rng.standard_normal(5))
    for x in (xm, xt):
        loss = (x.exp() * x).sum()
        loss.backward(retain_graph=True)
        loss.backward()
    assert_close(xm.grad.numpy(), xt.grad.numpy(), RTOL, "twice-accumulated grad")
    assert_close(xm.grad.numpy(), 2 * np.exp(xm.detach().numpy()) * (1 + xm.detach().numpy()), RTOL, "2 * d/dx x e^x")


def test_second_backward_without_retain_graph_raises(rng):
    x = mt.tensor(rng.standard_normal(5), requires_grad=True)
    loss = (x.exp() * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward()


def test_backward_non_scalar_needs_gradient(rng):
    x = mt.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match=r"scalar"):
        y.backward()
    y.backward(mt.tensor(np.ones((2, 3)) * 0.5))  # with a gradient it works
    assert_close(x.grad.numpy(), np.ones((2, 3)), RTOL, "x.grad")


def test_backward_gradient_shape_checked(rng):
    x = mt.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    y = x * 2
    with pytest.raises((RuntimeError, ValueError), match=r"\(2, 3\)"):
        y.backward(mt.tensor(np.ones((3, 2))))


def test_backward_on_tensor_without_grad_raises():
    x = mt.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="grad"):
        x.sum().backward()


ALIAS_GRAPHS = {
    "x + z": lambda x, z: x + z,
    "x + x + z": lambda x, z: x + x + z,
    "views": lambda x, z: x.reshape(6).view(2, 3).transpose(0, 1).T + z.expand(2, 3),
    "contiguous/clone-free": lambda x, z: x.contiguous() * 1.0 + z[...],
    "cat/split": lambda x, z: sum(mt.cat([x, z], dim=0).split(2, dim=0)),
}


@pytest.mark.parametrize("name", list(ALIAS_GRAPHS))
def test_leaf_grads_never_alias(name, rng):
    """Each leaf's .grad is an array it owns: not the caller's gradient, another leaf's grad or any data.

    Optimizers update p.grad._data and p._data in place; a shared array would silently corrupt another
    parameter."""
    x = mt.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    z = mt.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    y = ALIAS_GRAPHS[name](x, z)
    g = mt.tensor(rng.standard_normal(y.shape))
    y.backward(g)
    arrays = {
        "x.grad": x.grad.numpy(),
        "z.grad": z.grad.numpy(),
        "g": g.numpy(),
        "x": x.detach().numpy(),
        "z": z.detach().numpy(),
        "y": y.detach().numpy(),
    }
    for a in ("x.grad", "z.grad"):
        for b, arr in arrays.items():
            if a != b:
                assert not np.shares_memory(arrays[a], arr), f"{name}: {a} shares memory with {b}"
    before = z.grad.numpy().copy()
    x.grad.mul_(100.0)  # an optimizer-style in-place update on one leaf's grad
    np.testing.assert_array_equal(z.grad.numpy(), before)


# ----------------------------------------------------------------------------- hooks, retain_grad
def test_register_hook_modifies_gradient(rng):
    xm, xt = _both(rng.standard_normal(4))
    g = rng.standard_normal(4)
    seen = {}

    def observer(name):
        def hook(grad):  # returns None: observes, changes nothing
            seen[name] = grad.numpy().copy()

        return hook

    for x, lib in ((xm, mt), (xt, torch)):
        h = x * 3  # a non-leaf: its hook changes what flows on
        h.register_hook(lambda grad: grad * 2)
        x.register_hook(observer(lib.__name__))
        (h.tanh() * lib.tensor(g)).sum().backward()
    assert_close(xm.grad.numpy(), xt.grad.detach().numpy(), RTOL, "hooked grad")
    assert_close(seen["minitensor"], seen["torch"], RTOL, "gradient seen by the leaf hook")


def test_hook_handle_remove(rng):
    x = mt.tensor(rng.standard_normal(3), requires_grad=True)
    handle = x.register_hook(lambda grad: grad * 10)
    if hasattr(handle, "remove"):
        handle.remove()
        (x * 1.0).sum().backward()
        assert_close(x.grad.numpy(), np.ones(3), RTOL, "grad after hook removed")


def test_retain_grad_on_non_leaf(rng):
    xm, xt = _both(rng.standard_normal((2, 3)))
    ys = []
    for x in (xm, xt):
        y = x * 2
        y.retain_grad()
        (y**2).sum().backward()
        ys.append(y)
    ym, yt = ys
    assert not ym.is_leaf
    assert_close(ym.grad.numpy(), yt.grad.numpy(), RTOL, "y.grad")
    z = xm * 3  # without retain_grad: no .grad kept
    (z * z).sum().backward()
    assert z.grad is None


def test_leaf_and_grad_fn():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    assert x.is_leaf and x.grad_fn is None
    assert not y.is_leaf and y.grad_fn is not None
    assert mt.tensor([1.0]).is_leaf


def test_leaf_hook_replaces_gradient(rng):
    xm, xt = _both(rng.standard_normal(4))
    g = rng.standard_normal(4)
    for x, lib in ((xm, mt), (xt, torch)):
        x.register_hook(lambda grad: grad * -3)
        (x.exp() * lib.tensor(g)).sum().backward()
    assert_close(xm.grad.numpy(), xt.grad.numpy(), RTOL, "leaf grad after hook")


def test_backward_on_leaf(rng):
    x = mt.tensor(rng.standard_normal(3), requires_grad=True)
    g = rng.standard_normal(3)
    x.backward(mt.tensor(g))
    assert_close(x.grad.numpy(), g, RTOL, "a leaf's backward deposits the gradient")


# ----------------------------------------------------------------------------- custom Functions
class MulAdd(mt.autograd.Function):
    """out = a * b + c;  da = g b, db = g a, dc = g (c broadcast: the engine reduces it)."""

    @staticmethod
    def forward(ctx, a, b, c, scale=1.0):
        ctx.a, ctx.b, ctx.scale = a, b, scale
        return (a * b + c) * scale

    @staticmethod
    def backward(ctx, g):
        na, nb, nc = ctx.needs_input_grad
        MulAdd.seen_needs = ctx.needs_input_grad
        g = g * ctx.scale
        return (g * ctx.b if na else None, g * ctx.a if nb else None, g if nc else None)


def test_custom_function_matches_torch(rng):
    a, b, c = rng.standard_normal((2, 3)), rng.standard_normal((2, 3)), rng.standard_normal(3)
    am, bm, cm = mt.tensor(a, requires_grad=True), mt.tensor(b), mt.tensor(c, requires_grad=True)
    at, bt, ct = torch.tensor(a, requires_grad=True), torch.tensor(b), torch.tensor(c, requires_grad=True)
    out = MulAdd.apply(am, bm, cm, scale=0.5)
    ref = (at * bt + ct) * 0.5
    assert out.requires_grad and out.grad_fn is not None
    g = rng.standard_normal((2, 3))
    out.backward(mt.tensor(g))
    ref.backward(torch.tensor(g))
    assert_close(out.detach().numpy(), ref.detach().numpy(), RTOL, "forward")
    assert_close(am.grad.numpy(), at.grad.numpy(), RTOL, "grad a")
    assert_close(cm.grad.numpy(), ct.grad.numpy(), RTOL, "grad c (broadcast, reduced by the engine)")
    assert bm.grad is None
    assert tuple(MulAdd.seen_needs) == (True, False, True)


def _function(backward):
    """A custom Function out = a * b whose backward is `backward(ctx, g)`."""

    class Custom(mt.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

    Custom.backward = staticmethod(backward)
    return Custom


def test_custom_backward_returning_the_wrong_number_of_gradients_raises(rng):
    a, b = mt.tensor(rng.standard_normal(3), requires_grad=True), mt.tensor(rng.standard_normal(3))
    for grads in [lambda g: (g,), lambda g: (g, g, g)]:
        fn = _function(lambda ctx, g, grads=grads: grads(g))
        with pytest.raises(
            RuntimeError, match=r"CustomBackward returned (1|3) gradients.*forward took 2 tensor inputs"
        ):
            fn.apply(a, b).sum().backward()
    assert a.grad is None


def test_custom_backward_none_means_no_gradient(rng):
    a, b = mt.tensor(rng.standard_normal(3), requires_grad=True), mt.tensor(rng.standard_normal(3), requires_grad=True)
    fn = _function(lambda ctx, g: (g * ctx.saved_arrays[1], None))
    fn.apply(a, b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), b.detach().numpy())
    assert b.grad is None


def test_custom_backward_single_array_for_a_single_input(rng):
    class Double(mt.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return 2 * a

        @staticmethod
        def backward(ctx, g):
            return 2 * g  # not a tuple: accepted for one input, as in torch

    a = mt.tensor(rng.standard_normal(3), requires_grad=True)
    Double.apply(a).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full(3, 2.0))


def test_custom_backward_wrong_shape_or_dtype_raises_naming_the_function(rng):
    a, b = mt.tensor(rng.standard_normal(3), requires_grad=True), mt.tensor(rng.standard_normal(3))
    with pytest.raises(RuntimeError, match=r"CustomBackward, input 0.*\(4,\).*\(3,\)"):
        _function(lambda ctx, g: (np.ones(4), None)).apply(a, b).sum().backward()
    with pytest.raises(RuntimeError, match=r"CustomBackward returned a float32 gradient for input 0"):
        _function(lambda ctx, g: (g.astype(np.float32), None)).apply(a, b).sum().backward()


def test_apply_on_a_numpy_array_says_to_wrap_it(rng):
    a = mt.tensor(rng.standard_normal(3), requires_grad=True)
    with pytest.raises(TypeError, match=r"Custom.apply: argument 1 must be a Tensor, got ndarray.*mt.tensor"):
        _function(lambda ctx, g: (g, g)).apply(a, rng.standard_normal(3))
    with pytest.raises(TypeError, match=r"argument 0 must be a Tensor, got list"):
        _function(lambda ctx, g: (g, g)).apply([1.0], a)


def test_requires_grad_propagation():
    a, b = mt.tensor([1.0, 2.0], requires_grad=True), mt.tensor([3.0, 4.0])
    assert (a * b).requires_grad and not (b * b).requires_grad
    assert (b * b).grad_fn is None


def test_inplace_on_leaf_requiring_grad_refused_outside_no_grad():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="no_grad"):
        x.zero_()
    with mt.no_grad():
        x.fill_(3.0)
    np.testing.assert_array_equal(x.detach().numpy(), [3.0, 3.0])


# ----------------------------------------------------------------------------- grad modes, detach
def test_no_grad_context_manager():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    with mt.no_grad():
        assert not mt.is_grad_enabled()
        y = x * 2
        with mt.enable_grad():
            assert mt.is_grad_enabled()
            w = x * 2
    assert mt.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert w.requires_grad and w.grad_fn is not None


def test_no_grad_decorator():
    @mt.no_grad()
    def f(x):
        assert not mt.is_grad_enabled()
        return x * 2 + 1

    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = f(x)
    assert not y.requires_grad and y.grad_fn is None
    assert mt.is_grad_enabled()


def test_no_grad_restores_on_exception():
    with pytest.raises(KeyError):
        with mt.no_grad():
            raise KeyError("boom")
    assert mt.is_grad_enabled()


def test_detach_shares_memory_and_cuts_graph():
    x = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    assert np.shares_memory(d.detach().numpy(), y.detach().numpy())  # like torch: same storage
    loss = (y * d).sum()
    loss.backward()
    assert_close(x.grad.numpy(), 2 * d.numpy(), RTOL, "d is a constant")


@pytest.mark.parametrize("make", ["leaf", "non-leaf"])
def test_data_is_torchs_a_tensor_sharing_the_array_outside_the_graph(make):
    """t.data, as torch's: a Tensor on the same memory, not requiring grad, a leaf, and each call a new object."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 3))
    sides = {}
    for lib in (mt, torch):
        x = lib.tensor(a.copy(), requires_grad=True)
        sides[lib] = x if make == "leaf" else x * 2
    for lib, t in sides.items():
        d = t.data
        assert isinstance(d, type(t)) or lib is mt and isinstance(d, mt.Tensor)
        assert (d.requires_grad, d.grad_fn, d.is_leaf, tuple(d.shape), d.dtype == t.dtype) == (
            False,
            None,
            True,
            (2, 3),
            True,
        ), lib.__name__
        assert t.data is not t.data and t.data is not t
    ours, theirs = sides[mt], sides[torch]
    assert np.shares_memory(ours.data.numpy(), ours.detach().numpy())  # torch's .data shares the storage too
    with mt.no_grad(), torch.no_grad():
        ours.data[0, 1] = 5.0
        theirs.data[0, 1] = 5.0
    assert_close(ours.detach().numpy(), theirs.detach().numpy(), RTOL, "a write through .data reaches the tensor")
    e, te = ours.data[0, 1], theirs.data[0, 1]  # one element of .data: a 0-d Tensor
    assert isinstance(e, mt.Tensor) and e.shape == () and tuple(te.shape) == () and e.item() == te.item() == 5.0
    assert isinstance(ours.data[0], mt.Tensor) and ours.data[0].shape == tuple(theirs.data[0].shape) == (3,)


def test_data_assignment_follows_torchs_rules():
    """t.data = other: any shape or dtype (float for a tensor that requires grad), only a Tensor; t keeps its
    identity, requires_grad and version, and shares other's array."""
    for lib in (mt, torch):
        x = lib.ones(3, requires_grad=True)
        new = lib.zeros(5, dtype=lib.float64)
        x.data = new
        assert tuple(x.shape) == (5,) and x.dtype == lib.float64 and x.requires_grad and x.is_leaf
        assert x._version == 0
        with pytest.raises(RuntimeError, match="must be floating point"):
            x.data = lib.zeros(3, dtype=lib.int64)
        with pytest.raises(TypeError, match="has to be a tensor, but got numpy.ndarray"):
            x.data = np.zeros(3)
        with pytest.raises(TypeError, match="has to be a tensor, but got float"):
            x.data = 3.0
        y = lib.ones(3)
        y.data = lib.zeros(2, dtype=lib.int64)  # a tensor that does not require grad takes any dtype
        assert y.tolist() == [0, 0]
    x, new = mt.ones(3, requires_grad=True), mt.arange(3.0)
    x.data = new
    assert np.shares_memory(x.detach().numpy(), new.numpy())


def test_data_assignment_keeps_a_recorded_gradient_right():
    """A graph that saved t keeps the array it saved: t.data = other after the forward leaves the gradient that of
    the recorded forward (torch's backward reads the new values instead)."""
    w0, x0 = np.array([1.0, -2.0, 3.0]), np.array([0.5, 0.25, -1.0])
    w, x = mt.tensor(w0, requires_grad=True), mt.tensor(x0, requires_grad=True)
    y = (w * x).sum()
    x.data = mt.zeros(3, dtype=mt.float64)
    y.backward()
    assert_close(w.grad.numpy(), x0, RTOL, "dy/dw = x as the forward saw it")
    assert_close(x.grad.numpy(), w0, RTOL, "dy/dx = w")


def test_numpy_refuses_a_tensor_that_requires_grad_as_torch_does():
    for lib in (mt, torch):
        x = lib.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad"):
            x.numpy()
        with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad"):
            (x * 2).numpy()
        assert x.detach().numpy().tolist() == x.data.numpy().tolist() == [1.0, 1.0]
    with mt.no_grad():
        assert (mt.ones(2, requires_grad=True) * 2).numpy().tolist() == [2.0, 2.0]  # no graph: no grad required


def test_requires_grad_on_int_tensor_refused():
    with pytest.raises((RuntimeError, TypeError, ValueError), match="int64"):
        mt.tensor([1, 2, 3], requires_grad=True)
    t = mt.tensor([1, 2, 3])
    with pytest.raises((RuntimeError, TypeError, ValueError), match="int64"):
        t.requires_grad_()
    with pytest.raises((RuntimeError, TypeError, ValueError), match="bool"):
        mt.tensor([True, False], requires_grad=True)


# ----------------------------------------------------------------------------- dtypes
PROMOTIONS = [
    # (name, make(lib) -> result)  the result's dtype must equal torch's
    ("f32 + python float", lambda t: t.ones(2, dtype=t.float32) + 2.5),
    ("python float * f32", lambda t: 2.5 * t.ones(2, dtype=t.float32)),
    ("f32 + python int", lambda t: t.ones(2, dtype=t.float32) + 2),
    ("f32 + f64 tensor", lambda t: t.ones(2, dtype=t.float32) + t.ones(2, dtype=t.float64)),
    ("int64 + python float", lambda t: t.tensor([1, 2]) + 0.5),
    ("int64 * python float", lambda t: t.tensor([1, 2]) * 1.5),
    ("int64 + python int", lambda t: t.tensor([1, 2]) + 3),
    ("int64 + int64", lambda t: t.tensor([1, 2]) + t.tensor([3, 4])),
    ("int32 + int64", lambda t: t.tensor([1, 2], dtype=t.int32) + t.tensor([3, 4])),
    ("int64 + f32", lambda t: t.tensor([1, 2]) + t.ones(2, dtype=t.float32)),
    ("int64 / int64", lambda t: t.tensor([1, 2]) / t.tensor([2, 2])),
    ("int64 / python int", lambda t: t.tensor([1, 2]) / 2),
    ("bool + int64", lambda t: t.tensor([True, False]) + t.tensor([1, 2])),
    ("python list of floats", lambda t: t.tensor([1.0, 2.0])),
    ("python list of ints", lambda t: t.tensor([1, 2])),
    ("python list of bools", lambda t: t.tensor([True, False])),
    (
        "f32 where f64",
        lambda t: t.where(t.tensor([True, False]), t.ones(2, dtype=t.float32), t.zeros(2, dtype=t.float64)),
    ),
    ("f32 masked_fill python float", lambda t: t.ones(2, dtype=t.float32).masked_fill(t.tensor([True, False]), -1e9)),
    ("f32 ** python float", lambda t: t.ones(2, dtype=t.float32) ** 2.5),
    ("python float ** f32", lambda t: 2.0 ** t.ones(2, dtype=t.float32)),
    ("f32 sum", lambda t: t.ones(2, dtype=t.float32).sum()),
    ("int64 sum", lambda t: t.tensor([1, 2]).sum()),
    ("f32 mean", lambda t: t.ones(2, dtype=t.float32).mean()),
    ("bool sum", lambda t: t.tensor([True, False, True]).sum()),
    ("int64 clamp float bound", lambda t: t.tensor([1, 2, 3]).clamp(min=1.5)),
    ("int64 clamp int bound", lambda t: t.tensor([1, 2, 3]).clamp(max=2)),
    ("f32 clamp", lambda t: t.tensor([1.0, 2.0, 3.0], dtype=t.float32).clamp(min=1.5, max=2)),
    ("int64 exp", lambda t: t.tensor([1, 2]).exp()),
    ("int64 sqrt", lambda t: t.tensor([1, 4]).sqrt()),
    ("2 ** int64", lambda t: 2 ** t.tensor([1, 2])),
    ("2.5 ** int64", lambda t: 2.5 ** t.tensor([1, 2])),
    ("int64 ** 2", lambda t: t.tensor([1, 2]) ** 2),
    ("int64 ** 0.5", lambda t: t.tensor([1, 4]) ** 0.5),
    ("bool * python float", lambda t: t.tensor([True, False]) * 1.5),
    ("int64 where python float", lambda t: t.where(t.tensor([True, False]), t.tensor([1, 2]), 0.5)),
    ("int64 masked_fill python float", lambda t: t.tensor([1, 2]).masked_fill(t.tensor([True, False]), 0)),
    ("cat int64 f32", lambda t: t.cat([t.tensor([1, 2]), t.ones(2, dtype=t.float32)])),
    ("f32 0-d + f64 0-d", lambda t: t.tensor(1.0, dtype=t.float32) + t.tensor(2.0, dtype=t.float64)),
    ("f32 + f64 0-d", lambda t: t.ones(2, dtype=t.float32) + t.tensor(2.0, dtype=t.float64)),
    ("int64 + f32 0-d", lambda t: t.tensor([1, 2]) + t.tensor(2.0, dtype=t.float32)),
    ("int32 + int64 0-d", lambda t: t.tensor([1, 2], dtype=t.int32) + t.tensor(3)),
]


@pytest.mark.parametrize("name,make", PROMOTIONS, ids=[p[0] for p in PROMOTIONS])
def test_type_promotion_matches_torch(name, make):
    ours, ref = make(mt), make(torch)
    assert ours.dtype.name == str(ref.dtype).removeprefix("torch."), f"{name}: {ours.dtype} vs torch {ref.dtype}"
    np.testing.assert_allclose(ours.numpy(), ref.numpy())


def test_numpy_arrays_keep_their_dtype():
    assert mt.tensor(np.ones(2, dtype=np.float32)).dtype == mt.float32
    assert mt.tensor(np.ones(2, dtype=np.float64)).dtype == mt.float64
    assert mt.tensor(np.ones(2, dtype=np.int32)).dtype == mt.int32
    assert mt.tensor(np.ones(2), dtype=mt.float32).dtype == mt.float32  # an explicit dtype wins


def test_dtype_objects_are_numpy_dtypes():
    assert mt.float32 is np.dtype("float32") or mt.float32 == np.dtype("float32")
    assert mt.get_default_dtype() == mt.float32


def test_default_dtype_switching():
    assert mt.tensor([1.0]).dtype == mt.float32
    mt.set_default_dtype(mt.float64)
    torch_default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert mt.get_default_dtype() == mt.float64
        assert mt.tensor([1.0]).dtype == mt.float64
        assert mt.zeros(2).dtype == mt.float64 and mt.ones(2, 3).dtype == mt.float64
        assert mt.randn(2).dtype == mt.float64 and mt.rand(2).dtype == mt.float64
        assert mt.tensor([1, 2]).dtype == mt.int64  # ints stay int64
        assert mt.tensor(np.ones(2, dtype=np.float32)).dtype == mt.float32  # arrays keep theirs
        assert (mt.tensor([1, 2]) * 0.5).dtype == mt.float64  # int * float -> default
        assert (mt.tensor([1, 2]) * 0.5).dtype.name == str((torch.tensor([1, 2]) * 0.5).dtype)[6:]
        assert (mt.ones(2, dtype=mt.float32) + 1.5).dtype == mt.float32  # scalars never promote
    finally:
        torch.set_default_dtype(torch_default)
    mt.set_default_dtype(mt.float32)
    assert mt.tensor([1.0]).dtype == mt.float32


def test_float32_stays_float32_through_graph(rng):
    """Forward and backward in float32 end to end: no silent float64 on the way."""
    x = mt.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    w = mt.tensor(rng.standard_normal((5, 4)).astype(np.float32), requires_grad=True)
    y = mt.nn.functional.linear(x, w).tanh()
    y = mt.nn.functional.log_softmax(y * 0.5 + 1, dim=-1)
    loss = (y.exp() / 3 - 2 * y).mean()
    assert y.dtype == mt.float32 and loss.dtype == mt.float32
    loss.backward()
    assert x.grad.dtype == mt.float32 and w.grad.dtype == mt.float32


# ----------------------------------------------------------------------------- memory
def _step(w, x, saved_refs=None):
    h = (x @ w).tanh()  # intermediates referenced only by the graph
    loss = (h * h).mean()
    if saved_refs is not None:
        saved_refs.append(weakref.ref(h._data))  # h's array: Mul saved it for its backward
    return loss


def test_graph_released_after_backward(rng):
    """After backward (no retain_graph) the intermediates die even while `loss` is alive."""
    w = mt.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    x = mt.tensor(rng.standard_normal((5, 4)))
    refs = []
    loss = _step(w, x, refs)
    gc.collect()
    loss.backward()
    assert refs[0]() is None, "backward kept the intermediate tensor alive through the graph"


def test_an_activation_no_backward_reads_is_freed_during_the_forward(rng):
    """A node keeps a non-leaf input as an Edge (producer, shape, dtype), not its array: relu's input and
    dropout's input are read by no backward, so they die as soon as the forward moves on."""
    w = mt.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    x = mt.tensor(rng.standard_normal((5, 4)))
    pre = x @ w
    kept = (weakref.ref(pre._data),)
    act = mt.relu(pre)  # relu keeps a boolean mask, not its input
    kept += (weakref.ref(act._data),)
    out = mt.nn.functional.dropout(act, 0.5, training=True)  # dropout keeps its boolean mask only
    del pre, act
    gc.collect()
    assert [r() is None for r in kept] == [True, True], "the graph kept an array no backward reads"
    out.sum().backward()
    assert w.grad is not None and w.grad.shape == (4, 3)


def test_graph_freed_by_refcount_alone(rng):
    """With the cycle collector off, dropping the loss frees the whole graph (no ref cycles)."""
    w = mt.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    x = mt.tensor(rng.standard_normal((5, 4)))
    gc.collect()
    gc.disable()
    try:
        refs = []
        loss = _step(w, x, refs)
        assert refs[0]() is not None
        del loss
        assert refs[0]() is None, "the graph holds a reference cycle: freed only by the gc"
    finally:
        gc.enable()


def _live_tensors() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is mt.Tensor)  # type(): isinstance pokes lazy torch modules


def test_no_growth_of_live_objects_over_many_steps(rng):
    w = mt.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    x = mt.tensor(rng.standard_normal((5, 4)))

    def train(n):
        for _ in range(n):
            loss = _step(w, x)
            loss.backward()
            with mt.no_grad():
                w.data -= 0.1 * w.grad.data
            w.grad = None

    train(5)
    before = _live_tensors()
    train(200)
    after = _live_tensors()
    assert after <= before, f"live tensors grew from {before} to {after} over 200 steps"
