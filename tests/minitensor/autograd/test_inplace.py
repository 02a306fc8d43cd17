"""In-place changes and the graph: a gradient is right or backward raises, never silently wrong.

Every tensor has a version counter that each in-place change bumps (the in-place methods, the
optimizers' updates, clip_grad_norm_, nn.init, load_state_dict); a view shares its base's counter.
A node records the versions of what it saved, and backward raises PyTorch's error when one changed.
Changing a tensor the graph does not need is fine. A write through `.data` bumps the same counter (torch's `.data` has
a counter of its own, so torch skips the check there and can return a wrong gradient: a deviation, tested here).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt
import minitensor.nn.functional as F
from minitensor.testing import OP_RTOL, assert_close

MODIFIED = r"modified by an inplace operation"


def _t(*shape, grad=False, seed=0):
    return mt.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=grad)


def _raises_modified(fn, *patterns):
    with pytest.raises(RuntimeError, match=MODIFIED) as info:
        fn()
    for p in patterns:
        assert p in str(info.value), f"{str(info.value)!r} lacks {p!r}"


# ----------------------------------------------------------------------------- the reported cases
def test_fill_of_a_saved_input_raises_naming_node_shape_and_versions():
    w, x = _t(3, grad=True), _t(3, seed=1)
    y = (w * x).sum()
    x.fill_(0)
    _raises_modified(y.backward, "MulBackward", "(3,)", "version 1", "expected version 0")
    assert w.grad is None


def test_fill_under_no_grad_of_a_saved_parameter_raises():
    w, x = _t(3, grad=True), _t(3, seed=1)
    y = (w * x).sum()
    with mt.no_grad():
        w.fill_(0)
    _raises_modified(y.backward, "MulBackward")


@pytest.mark.parametrize(
    "make_opt", [lambda p: mt.optim.SGD(p, lr=0.1), lambda p: mt.optim.Adam(p, lr=0.1)], ids=["SGD", "Adam"]
)
def test_optimizer_step_between_forward_and_backward_raises(make_opt):
    w, x = _t(4, 3, grad=True), _t(2, 3, seed=1)
    opt = make_opt([w])
    F.linear(x, w).sum().backward()  # a gradient for the step
    loss = F.linear(x, w).sum()  # saves w
    opt.step()
    _raises_modified(loss.backward, "LinearBackward", "(4, 3)")


def test_clip_grad_norm_bumps_the_gradients_version():
    w = _t(3, grad=True)
    (w * w).sum().backward()
    before = w.grad._version
    mt.nn.utils.clip_grad_norm_([w], 1e-3)
    assert w.grad._version == before + 1


# ----------------------------------------------------------------------------- fused ops save too
def test_fused_ops_check_their_saved_inputs():
    x, w, b = _t(2, 4, seed=1), _t(3, 4, grad=True), _t(3, grad=True)
    y = F.linear(x, w, b).sum()
    x.mul_(2)
    _raises_modified(y.backward, "LinearBackward", "(2, 4)")

    x2, g = _t(2, 4, grad=True), _t(4, grad=True, seed=2)
    y = F.layer_norm(x2, (4,), g).sum()
    with mt.no_grad():
        g.add_(1)
    _raises_modified(y.backward, "LayerNormBackward", "(4,)")

    q, k = _t(1, 3, 2, grad=True), _t(1, 4, 2, seed=3)
    y = F.attention_weights(q, k).sum()
    k[0, 0] = 5.0
    _raises_modified(y.backward, "AttentionWeightsBackward", "(1, 4, 2)")


def test_a_saved_output_changed_through_detach_raises():
    x = _t(2, 3, grad=True)
    y = F.softmax(x, dim=-1)  # saves its output
    loss = y[:, 0].sum()  # indexing and sum save nothing
    y.detach().zero_()  # detach shares the array and the version counter
    _raises_modified(loss.backward, "SoftmaxBackward", "(2, 3)")


@pytest.mark.parametrize(
    "change",
    [
        lambda x: x[0].fill_(1.0),
        lambda x: x.view(6).__setitem__(2, 7.0),
        lambda x: x.T.zero_(),
        lambda x: x.split(1, dim=0)[1].mul_(3),
    ],
    ids=["getitem", "view setitem", "T", "split"],
)
def test_a_change_through_a_view_bumps_the_base(change):
    w, x = _t(2, 3, grad=True), _t(2, 3, seed=1)
    y = (w * x).sum()
    change(x)
    _raises_modified(y.backward, "MulBackward")


def test_a_copy_is_not_a_view():
    w, x = _t(2, 3, grad=True), _t(2, 3, seed=1)
    y = (w * x).sum()
    x[[0, 1]].fill_(1.0)  # an integer-array index copies
    x.reshape(3, 2).clone().zero_()  # clone copies
    y.backward()
    np.testing.assert_array_equal(w.grad.numpy(), x.numpy())


# ----------------------------------------------------------------------------- what stays allowed
def test_changing_a_tensor_the_graph_does_not_need_is_fine():
    w, x = _t(3, grad=True), _t(3, seed=1)
    y = (w + x).sum()  # Add saves nothing
    x.fill_(0)
    other = _t(3, seed=2)
    z = (w * other).sum()
    x.add_(1)  # x is not in z's graph
    y.backward()
    z.backward()
    np.testing.assert_allclose(w.grad.numpy(), 1 + other.numpy())


@pytest.mark.parametrize(
    "write",
    [
        lambda t: t.data.add_(1.0),
        lambda t: t.data.mul_(2.0),
        lambda t: t.data.copy_(t.data * 0 + 2.0),
        lambda t: t.data.fill_(2.0),
        lambda t: t.data.__setitem__(0, 2.0),
        lambda t: t.data[1:].zero_(),  # through a view of .data: the view shares the counter too
    ],
    ids=["add_", "mul_", "copy_", "fill_", "setitem", "view-zero_"],
)
@pytest.mark.parametrize("changed", ["leaf-that-requires-grad", "input-that-does-not"])
def test_a_write_through_data_to_a_saved_tensor_raises_where_torch_is_silently_wrong(write, changed):
    """Deviation from PyTorch: the write bumps the shared version counter, so backward raises; torch's .data has
    its own counter, and torch's backward reads the changed values (its gradient is then wrong, checked here)."""
    rng = np.random.default_rng(3)
    w0, x0 = rng.standard_normal(3), rng.standard_normal(3)

    def run(lib):
        w = lib.tensor(w0, requires_grad=True)
        x = lib.tensor(x0, requires_grad=changed == "leaf-that-requires-grad")
        y = (w * x).sum()  # Mul saves both: d/dw needs x, d/dx needs w
        target, other = (w, x) if changed == "leaf-that-requires-grad" else (x, w)
        write(target)
        return y, other, target

    y, other, _ = run(torch)
    y.backward()  # torch: no error
    right = w0 if changed == "leaf-that-requires-grad" else x0  # the recorded forward's gradient of `other`
    assert not np.allclose(other.grad.numpy(), right)  # ... and a wrong gradient
    y, _, target = run(mt)
    assert target._version == 1
    _raises_modified(y.backward, "MulBackward")


def test_optimizer_style_updates_through_data_work_outside_a_live_graph():
    """p.data.add_(...) after backward (the graph freed) and before the next forward: as in torch."""
    rng = np.random.default_rng(4)
    x0, w0 = rng.standard_normal((5, 3)), rng.standard_normal(3)
    sides = {lib: (lib.tensor(w0, requires_grad=True), lib.tensor(x0)) for lib in (mt, torch)}
    for _ in range(3):
        for w, x in sides.values():
            loss = (x @ w).tanh().sum()
            loss.backward()
            w.data.add_(w.grad.data, alpha=-0.1)  # a hand-written SGD step, torch style
            w.data[0] = w.data[0] * 0.5  # and an index write through .data
            w.grad = None
    assert_close(sides[mt][0].detach().numpy(), sides[torch][0].detach().numpy(), OP_RTOL["float64"], "weights")
    w = sides[mt][0]
    assert w.requires_grad and w.is_leaf and w._version > 0


def test_retain_graph_then_change_then_second_backward_raises():
    w, x = _t(3, grad=True), _t(3, seed=1)
    y = (w * x).sum()
    y.backward(retain_graph=True)
    x.fill_(1.0)
    _raises_modified(y.backward, "MulBackward")


# ----------------------------------------------------------------------------- every in-place method bumps
INPLACE = {
    "fill_": lambda t, T: t.fill_(2.0),
    "zero_": lambda t, T: t.zero_(),
    "add_": lambda t, T: t.add_(T.ones(2, 3, dtype=T.float64)),
    "add_alpha": lambda t, T: t.add_(T.ones(3, dtype=T.float64), alpha=2),
    "sub_": lambda t, T: t.sub_(1.5),
    "mul_": lambda t, T: t.mul_(T.full((2, 1), 3.0, dtype=T.float64)),
    "div_": lambda t, T: t.div_(4.0),
    "copy_": lambda t, T: t.copy_(T.ones(3, dtype=T.float64)),
    "setitem": lambda t, T: t.__setitem__((0, 1), 9.0),
    "masked_fill_": lambda t, T: t.masked_fill_(T.tensor([True, False, True]), -1.0),
    "clamp_": lambda t, T: t.clamp_(-0.5, 0.5),
}


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_methods_bump_the_version_and_match_torch(name):
    a = np.random.default_rng(5).standard_normal((2, 3))
    ours, ref = mt.tensor(a.copy()), torch.tensor(a.copy())
    INPLACE[name](ours, mt)
    INPLACE[name](ref, torch)
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())
    assert ours._version == ref._version == 1


@pytest.mark.parametrize("name", ["uniform_", "normal_"])
def test_random_fills_bump_the_version(name):
    t = mt.zeros(3)
    getattr(t, name)()
    assert t._version == 1


@pytest.mark.parametrize("name", ["add_", "mul_", "fill_", "setitem"])
def test_inplace_refused_on_a_tensor_requiring_grad(name):
    t = _t(2, 3, grad=True)
    with pytest.raises(RuntimeError, match="in-place change of a leaf tensor that requires grad"):
        INPLACE[name](t, mt)
    assert t._version == 0


def test_inplace_operand_errors_name_the_op_and_shapes():
    t = mt.zeros(2, 3, dtype=mt.float64)
    with pytest.raises(ValueError, match=r"add_.*\(4,\).*\(2, 3\)"):
        t.add_(mt.ones(4, dtype=mt.float64))
    with pytest.raises(ValueError, match=r"mul_.*\(2, 3, 1\)"):
        t.mul_(mt.ones(2, 3, 1, dtype=mt.float64))  # the result would grow the tensor
    with pytest.raises(ValueError, match="div_"):
        mt.tensor([1, 2]).div_(2)  # int64 cannot hold a true division
    with pytest.raises(ValueError, match=r"masked_fill_.*\(4,\)"):
        t.masked_fill_(mt.tensor([True, False, True, True]), 0.0)
    assert t._version == 0


def test_updates_through_data_that_bump():
    """Optimizer steps, nn.init, clip_grad_value_, zero_grad(set_to_none=False) and load_state_dict
    write arrays directly; each records the change."""
    lin = mt.nn.Linear(3, 2)
    w, b = lin.weight, lin.bias
    v0, b0 = w._version, b._version
    mt.nn.init.normal_(w)
    mt.nn.init.zeros_(b)
    assert (w._version, b._version) == (v0 + 1, b0 + 1)
    lin(mt.ones(1, 3)).sum().backward()
    g0 = w.grad._version
    mt.nn.utils.clip_grad_value_(lin.parameters(), 0.1)
    assert w.grad._version == g0 + 1
    lin.zero_grad(set_to_none=False)
    assert w.grad._version == g0 + 2
    v1 = w._version
    mt.optim.SGD(lin.parameters(), lr=0.1).step()
    assert w._version == v1 + 1
    lin.load_state_dict(lin.state_dict())
    assert w._version == v1 + 2


# ----------------------------------------------------------------------------- which changes are refused, as torch
# Each case runs the same code on minitensor and torch (`T` is the library): None where both allow it, else the
# start of minitensor's refusal. TORCH_ALLOWS lists where torch allows what minitensor refuses (it records in-place
# ops in the graph; minitensor does not, so it refuses rather than leave the change undifferentiated).
def _leaf(T):
    return T.tensor([0.5, -1.0, 2.0], requires_grad=True)


def _nonleaf(T):
    return _leaf(T) * 1.5


def _no_grad_view(T, base):
    with T.no_grad():
        return base[:2]


def _inside_no_grad(T, change):
    with T.no_grad():
        change()


REFUSALS = {
    "leaf": (lambda T: _leaf(T).mul_(2), "mul_: in-place change of a leaf tensor that requires grad"),
    "leaf setitem": (lambda T: _leaf(T).__setitem__(0, 1.0), "__setitem__: in-place change of a leaf tensor"),
    "leaf under no_grad": (lambda T: (x := _leaf(T), _inside_no_grad(T, lambda: x.mul_(2))), None),
    "view of a leaf": (lambda T: _leaf(T)[:2].mul_(2), "mul_: in-place change of a tensor in the graph"),
    "view of a leaf under no_grad": (lambda T: (v := _leaf(T)[:2], _inside_no_grad(T, lambda: v.mul_(2))), None),
    "no_grad view of a leaf": (lambda T: _no_grad_view(T, _leaf(T)).mul_(2), "mul_: in-place change, with grad mode"),
    "no_grad view of a non-leaf": (lambda T: _no_grad_view(T, _nonleaf(T)).fill_(0), "fill_: in-place change, with"),
    "view of a no_grad view": (lambda T: _no_grad_view(T, _leaf(T))[:1].zero_(), "zero_: in-place change, with grad"),
    "no_grad view changed under no_grad": (
        lambda T: (v := _no_grad_view(T, _leaf(T)), _inside_no_grad(T, lambda: v.mul_(2))),
        None,
    ),
    "non-leaf": (lambda T: _nonleaf(T).mul_(2), "mul_: in-place change of a tensor in the graph (a non-leaf, made by"),
    "non-leaf under no_grad": (lambda T: (h := _nonleaf(T), _inside_no_grad(T, lambda: h.mul_(2))), None),
    "view of a non-leaf": (lambda T: _nonleaf(T)[1:].add_(1.0), "add_: in-place change of a tensor in the graph"),
    "view of a non-leaf under no_grad": (
        lambda T: (v := _nonleaf(T)[1:], _inside_no_grad(T, lambda: v.add_(1.0))),
        None,
    ),
    "detached leaf": (lambda T: _leaf(T).detach().mul_(2), None),
    "operand requires grad": (lambda T: T.zeros(3).copy_(_leaf(T)), "copy_: an operand requires grad"),
    "operand under no_grad": (lambda T: (z := T.zeros(3), _inside_no_grad(T, lambda: z.copy_(_leaf(T)))), None),
    "constant": (lambda T: T.zeros(3).add_(1.0), None),
}
TORCH_ALLOWS = {"non-leaf", "view of a non-leaf", "operand requires grad"}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_inplace_refusals_match_torch(name):
    change, refusal = REFUSALS[name]
    torch_refused = None
    try:
        change(torch)
    except RuntimeError as e:
        torch_refused = str(e)
    if refusal is None:
        change(mt)
        assert torch_refused is None, torch_refused
        return
    with pytest.raises(RuntimeError) as info:
        change(mt)
    assert str(info.value).startswith(refusal), str(info.value)
    assert (torch_refused is None) == (name in TORCH_ALLOWS), torch_refused


def test_a_nonleaf_changed_under_no_grad_bumps_its_version_as_torch():
    """h.mul_(2) under no_grad is allowed, and a node that saved h before the change then raises at backward (in
    torch too); a graph that did not save h backpropagates, with torch's gradient."""
    for T in (mt, torch):
        x = _leaf(T)
        h = x * 1.5
        y = h * h  # saves h
        before = h._version
        with T.no_grad():
            h.mul_(2)
        assert h._version == before + 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
    grads = []
    for T in (mt, torch):
        x = _leaf(T)
        h = x * 1.5
        z = h + 1.0  # saves nothing of h
        with T.no_grad():
            h.mul_(2)
        (z * 3.0 + h * h).sum().backward()  # h * h after the change: the new values
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


def test_each_refusals_advice_works():
    """What each refusal advises, done, is allowed and gives torch's values."""
    # a leaf: wrap it in mt.no_grad()
    x = _leaf(mt)
    with mt.no_grad():
        x.mul_(2)
    assert x.requires_grad and x.grad_fn is None
    np.testing.assert_array_equal(x.detach().numpy(), [1.0, -2.0, 4.0])
    # a tensor in the graph: the out-of-place form is differentiated as torch's in-place op is ...
    grads = []
    for T, out_of_place in ((mt, True), (torch, False)):
        x = _leaf(T)
        h = x * 1.5
        h = h.mul(2) if out_of_place else h.mul_(2)
        (h * h).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)
    # ... and a change the gradient must not see goes inside mt.no_grad()
    h = _nonleaf(mt)
    with mt.no_grad():
        h.mul_(2)
    np.testing.assert_allclose(h.detach().numpy(), [1.5, -3.0, 6.0])
    # a view made under no_grad: the change inside mt.no_grad() as well
    x = _leaf(mt)
    v = _no_grad_view(mt, x)
    with mt.no_grad():
        v.mul_(2)
    np.testing.assert_array_equal(x.detach().numpy(), [1.0, -2.0, 2.0])
    # an operand that requires grad: the out-of-place form, or operand.detach() as a constant
    w = _leaf(mt)
    z = mt.zeros(3).copy_(w.detach())
    np.testing.assert_array_equal(z.detach().numpy(), w.detach().numpy())
    z = mt.where(mt.tensor([True, False, True]), w, mt.zeros(3))
    z.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 0.0, 1.0])


def test_a_dual_tensor_changed_in_place_is_refused_and_the_out_of_place_form_works():
    from minitensor.autograd import forward_ad as fw

    x = mt.tensor([1.0, 2.0])
    with fw.dual_level():
        d = fw.make_dual(x, mt.tensor([1.0, 0.0]))
        with pytest.raises(RuntimeError, match="mul_: in-place change of a dual tensor .* use the out-of-place form"):
            d.mul_(2)
        with mt.no_grad(), pytest.raises(RuntimeError, match="in-place change of a dual tensor"):
            d.mul_(2)  # no_grad does not stop forward mode, in torch either
        np.testing.assert_array_equal(fw.unpack_dual(d.mul(2)).tangent.numpy(), [2.0, 0.0])


INPLACE_FLAG = {  # the ops that take torch's inplace flag (refused before any work, so eval mode is fine)
    "F.relu": lambda T, x, **kw: T.nn.functional.relu(x, **kw),
    "F.dropout": lambda T, x, **kw: T.nn.functional.dropout(x, 0.5, training=False, **kw),
    "nn.ReLU": lambda T, x, **kw: T.nn.ReLU(**kw)(x),
    "nn.Dropout": lambda T, x, **kw: T.nn.Dropout(0.5, **kw).eval()(x),
}


@pytest.mark.parametrize("name", list(INPLACE_FLAG))
def test_inplace_true_is_refused_and_inplace_false_gives_torchs_values(name):
    """Deviation, flagged: torch takes inplace=True; minitensor's ops never write into their input, so it is refused
    rather than ignored, and the advised inplace=False gives what torch's inplace=True gives."""
    fn, a = INPLACE_FLAG[name], np.array([-1.0, 0.5, 2.0])
    with pytest.raises(ValueError, match="inplace=True is not supported .* use inplace=False"):
        fn(mt, mt.tensor(a), inplace=True)
    ours = fn(mt, mt.tensor(a), inplace=False)
    np.testing.assert_array_equal(ours.numpy(), fn(torch, torch.tensor(a), inplace=True).numpy())
