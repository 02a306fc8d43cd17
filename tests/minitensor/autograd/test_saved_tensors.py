"""What a graph keeps: every array a node keeps goes through one path (ctx.save_for_backward, ctx.save), which
mt.autograd.graph.saved_tensors_hooks and the listing mt.autograd.graph.saved_tensors both see, for every
primitive of the op table (tests/support/op_cases.py)."""

import threading

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from minitensor.autograd import topological_order
from minitensor.autograd.graph import saved_tensors, saved_tensors_hooks
from minitensor.autograd.saved import saved_entries
from tests.support.op_cases import CASES, MT, as_list, make_inputs, samples

# the cases whose forward records a graph (differentiable, with an input that requires grad)
GRAPH_CASES = [c for c in CASES if c.grad and any(s.grad and s.is_float for s in c.specs)]
# cases whose function backpropagates inside (autograd.grad with create_graph): the nodes of the inner forward
# that the result's graph does not reach are packed too, but not listed from the result
INNER_GRAPH = {"norm_nuc_gradient"}


def _outputs(case, dtype="float64"):
    xs, _, _ = make_inputs(case, dtype)
    outs = [o for o in as_list(case.fn(MT, *xs, **case.kwargs)) if isinstance(o, mt.Tensor) and o.requires_grad]
    return xs, outs


def _arrays_in(value) -> list:
    items = value if isinstance(value, (tuple, list)) else (value,)
    return [v for v in items if isinstance(v, np.ndarray)]


@pytest.mark.parametrize("case", samples(GRAPH_CASES, None))
def test_every_array_a_node_keeps_is_listed(case):
    """No ctx attribute holds an array outside save_for_backward and ctx.save: the hooks would miss it."""
    _, outs = _outputs(case)
    for node in topological_order([o.grad_fn for o in outs if o.grad_fn is not None]):
        listed = {id(a) for _, a in saved_entries(node.ctx)}
        for name, value in vars(node.ctx).items():
            for a in _arrays_in(value):
                assert id(a) in listed, f"{case}: {node.name()} keeps ctx.{name} outside save_for_backward/ctx.save"


def _backward(case, outs, seed=0):
    rng = np.random.default_rng(seed)
    loss = sum((o * mt.tensor(rng.standard_normal(o.shape).astype(o.dtype) + 0.5)).sum() for o in outs)
    loss.backward()


@pytest.mark.parametrize("how", ["identity", "copy"])
@pytest.mark.parametrize("case", samples(GRAPH_CASES, None))
def test_hooks_see_every_saved_array_and_change_nothing(case, how):
    """pack is called once per listed array, every node drops its arrays, and the gradients are bitwise those
    without hooks."""
    xs0, outs0 = _outputs(case)
    _backward(case, outs0)
    packed = []

    def pack(t):
        packed.append((t.shape, t.dtype))
        return (
            t if how == "identity" else np.array(t.detach().numpy(), order="K")
        )  # a copy in the same layout (same BLAS path)

    def unpack(p):
        return p if how == "identity" else mt.from_numpy(p)

    xs, _, _ = make_inputs(case, "float64")
    with saved_tensors_hooks(pack, unpack):
        outs = [o for o in as_list(case.fn(MT, *xs, **case.kwargs)) if isinstance(o, mt.Tensor) and o.requires_grad]
    listing = saved_tensors(*outs)
    if case.name in INNER_GRAPH:
        assert len(packed) > len(listing)
    else:
        assert len(packed) == len(listing), f"{case}: {len(packed)} packs, the listing shows {len(listing)} arrays"
        assert sorted(str((r.shape, r.dtype)) for r in listing) == sorted(str(p) for p in packed)
    assert all(r.packed for r in listing)
    for node in topological_order([o.grad_fn for o in outs if o.grad_fn is not None]):
        held = [n for n, v in vars(node.ctx).items() if _arrays_in(v)]
        assert not held and all(arr is None for _, _, arr, _ in node.saved), f"{case}: {node.name()} kept {held}"
    for o, o0 in zip(outs, outs0):
        assert np.array_equal(o.detach().numpy(), o0.detach().numpy(), equal_nan=True)
    _backward(case, outs)
    for x, x0 in zip(xs, xs0):
        if x0.grad is not None:
            assert np.array_equal(x.grad.numpy(), x0.grad.numpy(), equal_nan=True), f"{case}: gradient changed"


def test_the_listing_names_what_each_node_keeps():
    x = mt.randn(4, 8, requires_grad=True)
    ln = mt.nn.LayerNorm(8)
    h = F.dropout(F.gelu(ln(x)), 0.5, training=True).relu()
    loss = F.cross_entropy(h, mt.tensor(np.array([1, 2, 3, 4])))
    rows = saved_tensors(loss)
    kept = {(r.node, r.what) for r in rows}
    assert {
        ("LayerNormBackward", "input 0"),
        ("LayerNormBackward", "mean"),
        ("LayerNormBackward", "rstd"),
        ("GeluBackward", "cdf"),
        ("DropoutBackward", "keep"),
        ("ReluBackward", "dead"),
        ("CrossEntropyBackward", "logp"),
    } <= kept
    keep = next(r for r in rows if r.what == "keep")
    assert keep.shape == (4, 8) and keep.dtype == np.bool_ and keep.nbytes == 32
    assert rows.total_bytes == sum(r.nbytes for r in rows) and rows.nodes == 5
    # x is saved by LayerNorm only, but h's input arrays are each their own buffer: held <= listed
    assert 0 < rows.held_bytes <= rows.total_bytes
    text = str(rows)
    assert "DropoutBackward" in text and f"{rows.nodes} nodes" in text and "held" in text
    loss.backward()
    assert len(saved_tensors(loss)) == 0  # freed by the backward


def test_held_bytes_count_a_shared_buffer_once():
    x = mt.randn(100, dtype=mt.float64, requires_grad=True)
    rows = saved_tensors(x * x)  # one array saved twice by Mul
    assert len(rows) == 2 and rows.total_bytes == 1600 and rows.held_bytes == 800
    rows = saved_tensors(x.sin()[:50] + x[:50].cos())  # Cos saves a view of x: its buffer is x's
    assert rows.total_bytes == 1200 and rows.held_bytes == 800


def test_hooks_nest_and_are_per_thread():
    seen = []
    x = mt.randn(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: seen.append("outer") or t, lambda t: t):
        x.exp()
        with saved_tensors_hooks(lambda t: seen.append("inner") or t, lambda t: t):
            x.exp()
            other = []
            thread = threading.Thread(target=lambda: other.append(x.exp().grad_fn.packed))
            thread.start()
            thread.join()
        x.exp()
    x.exp()
    assert seen == ["outer", "inner", "outer"]
    assert other == [None]  # another thread's ops are not packed


def test_unpack_must_give_back_a_tensor_of_the_same_shape_and_dtype():
    x = mt.randn(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda t: mt.zeros(4)):
        y = x.exp()
    with pytest.raises(RuntimeError, match=r"unpack_hook returned a Tensor float32 \(4,\) for output of ExpBackward"):
        y.sum().backward()
    with saved_tensors_hooks(lambda t: t, lambda t: t.detach().numpy()):
        y = x.exp()
    with pytest.raises(RuntimeError, match="returned ndarray"):
        y.sum().backward()
    with pytest.raises(TypeError, match="pack_hook must be callable"):
        saved_tensors_hooks(None, lambda t: t)


def test_version_check_and_create_graph_under_hooks():
    x = mt.randn(5, dtype=mt.float64, requires_grad=True)
    a = mt.randn(5, dtype=mt.float64)
    with saved_tensors_hooks(lambda t: t.detach().numpy().copy(), mt.tensor):
        y = (x * 1.0).exp()
        z = x * a  # saves a, whose version is checked in the backward
    a.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    (g,) = mt.autograd.grad(y.sum(), x, create_graph=True)
    (gg,) = mt.autograd.grad(g.sum(), x)
    np.testing.assert_array_equal(gg.detach().numpy(), np.exp(x.detach().numpy()))


def test_viz_labels_each_node_with_what_it_keeps():
    x = mt.randn(3, requires_grad=True)
    y = (x.exp() * x).sum()
    dot = mt.viz.to_dot(y)
    assert 'label="MulBackward\\n(3,) float32\\nsaves 2 arrays, 24 B"' in dot
    assert 'label="ExpBackward\\n(3,) float32\\nsaves 1 array, 12 B"' in dot
    assert 'label="SumBackward\\n() float32"' in dot  # keeps nothing: no line
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        z = x.exp()
    assert "saves 1 array, 12 B packed" in mt.viz.to_dot(z)


def test_an_array_saved_twice_keeps_both_paths_under_create_graph():
    """x * x saves x twice: with copying hooks each copy is still x's, so d2/dx2 sum(x * x) = 2."""
    x = mt.randn(4, dtype=mt.float64, requires_grad=True)
    with saved_tensors_hooks(lambda t: np.array(t.detach().numpy()), mt.from_numpy):
        y = (x * x).sum()
    (g,) = mt.autograd.grad(y, x, create_graph=True)
    (gg,) = mt.autograd.grad(g.sum(), x)
    np.testing.assert_array_equal(g.detach().numpy(), 2 * x.detach().numpy())
    np.testing.assert_array_equal(gg.numpy(), np.full(4, 2.0))
