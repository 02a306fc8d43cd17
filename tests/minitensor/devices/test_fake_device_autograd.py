"""Autograd on the fake CUDA device: every way of differentiating, run on device arrays, equal to the CPU.

The fake device (minitensor/fakecuda.py) is NumPy underneath, so the same formula gives the same bits: each test
runs one computation twice, on host arrays and on FakeArrays built from the same host arrays, and asserts that
every result and gradient lives on the device and equals the CPU's bitwise. What is checked: backward() and
autograd.grad (create_graph, retain_graph, hooks), the fused softmax / log_softmax / layer norm / losses /
attention weights and the tiled scaled-dot-product attention (with dropout), forward mode (make_dual /
unpack_dual and the fused ops' JVP rules), mt.func, autograd.functional, gradcheck / gradgradcheck on device
inputs, anomaly mode, saved-tensor hooks and activation checkpointing, and how many host syncs each costs.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from minitensor import devices, fakecuda
from minitensor.autograd import forward_ad as fwAD
from minitensor.autograd import functional as AF
from minitensor.fast import rowwise, softmax
from minitensor.ops import attention
from minitensor.utils.checkpoint import checkpoint, checkpoint_sequential

pytestmark = pytest.mark.full

RNG = np.random.default_rng(24)


@pytest.fixture(autouse=True)
def plain_row_sums(monkeypatch):
    """The CPU side sums rows by the plain formula too (fast/rowwise.py's last_sum, a CPU speed device whose sums
    differ from np.sum's by round-off, off), so both sides run the same formula and must agree bitwise.
    tests/minitensor/fast/test_rowwise.py holds the speed device to the plain formula."""
    monkeypatch.setattr(rowwise, "SUM_ROW", -1)


def on_device(arr, requires_grad: bool = False):
    """A Tensor on the fake device holding a copy of the host array `arr`: wrapped directly, so that no test here
    depends on the switch that makes "cuda" the fake (.to("cuda") itself: tests/minitensor/devices/test_device_api.py,
    and the last test)."""
    t = mt.Tensor.wrap(fakecuda.asarray(arr))
    return t.requires_grad_(True) if requires_grad else t


def on_host(arr, requires_grad: bool = False):
    t = mt.Tensor.wrap(np.array(arr))
    return t.requires_grad_(True) if requires_grad else t


def host_copy(x):
    """The host array of a Tensor or array on either device; a FakeArray's copy counts as one sync."""
    a = x._data if isinstance(x, mt.Tensor) else x
    return fakecuda.asnumpy(a)


def assert_same(dev, cpu, what: str = "value") -> None:
    """`dev` lives on the device and equals `cpu` bitwise (NaN where it has NaN)."""
    if dev is None or cpu is None:
        assert dev is None and cpu is None, f"{what}: {dev!r} beside {cpu!r}"
        return
    d = dev._data if isinstance(dev, mt.Tensor) else dev
    c = cpu._data if isinstance(cpu, mt.Tensor) else cpu
    assert type(d) is fakecuda.FakeArray, f"{what}: a {type(d).__name__} on the device side, expected a FakeArray"
    h = host_copy(d)
    assert h.shape == np.shape(c) and h.dtype == np.asarray(c).dtype, f"{what}: {h.shape} {h.dtype} vs {c}"
    assert np.array_equal(h, c, equal_nan=True), f"{what}: max |diff| {np.nanmax(np.abs(h - c))}"


def both(*arrays, requires_grad=True):
    """(host tensors, device tensors) built from the same host arrays."""
    rg = requires_grad if isinstance(requires_grad, (tuple, list)) else (requires_grad,) * len(arrays)
    return (
        [on_host(a, r) for a, r in zip(arrays, rg)],
        [on_device(a, r) for a, r in zip(arrays, rg)],
    )


def randn(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def backward_both(fn, *arrays, dtype=np.float64, requires_grad=True):
    """Run fn on each side, backpropagate one random upstream gradient (the same host numbers on both), and
    assert the outputs and every input's .grad equal."""
    hs, ds = both(*(a.astype(dtype) if a.dtype.kind == "f" else a for a in arrays), requires_grad=requires_grad)
    out_h, out_d = fn(*hs), fn(*ds)
    assert_same(out_d, out_h, "output")
    g = randn(*out_h.shape, dtype=out_h.dtype)
    out_h.backward(on_host(g))
    out_d.backward(on_device(g))
    for i, (h, d) in enumerate(zip(hs, ds)):
        assert_same(d.grad, h.grad, f"grad of input {i}")
    return out_h, out_d


# ----------------------------------------------------------------------------- backward() and grad()


def test_backward_seed_and_leaf_gradients_stay_on_the_device():
    x, y = randn(3, 4), randn(4)
    backward_both(lambda a, b: ((a * b).exp() + a).sum(), x, y)  # the np.ones seed of a scalar backward
    backward_both(lambda a, b: (a * b).tanh() - b, x, y)  # an upstream gradient given, broadcast summed back


def test_backward_accumulates_on_the_device_and_retain_graph():
    hs, ds = both(randn(5))
    for a in (hs[0], ds[0]):
        y = (a * a).sum()
        y.backward(retain_graph=True)
        y.backward()  # the second pass adds into .grad
    assert_same(ds[0].grad, hs[0].grad)


def test_grad_create_graph_retain_graph_and_unused_inputs():
    hs, ds = both(randn(4), randn(4))
    res = []
    for x, z in (hs, ds):
        y = (x.sin() * x).sum()
        unused = mt.autograd.grad(y, (x, z), allow_unused=True, retain_graph=True)[1]
        (gx,) = mt.autograd.grad(y, x, create_graph=True)
        (ggx,) = mt.autograd.grad(gx.sum(), x, retain_graph=True)
        (again,) = mt.autograd.grad(gx.sum(), x)  # the retained graph runs once more
        res.append((gx, ggx, again, unused))
    for what, h, d in zip(("grad", "second derivative", "after retain_graph", "unused"), *res):
        assert_same(d, h, what)


def test_grad_with_given_grad_outputs_and_zero_filled_inputs():
    hs, ds = both(randn(3, 2), randn(2))
    v = randn(3, 2)
    res = []
    for (x, b), grad_out in ((hs, on_host(v)), (ds, on_device(v))):
        y = x * 2.0
        # b is reached through a node where nothing flows: its gradient is zeros (on the device), not None
        res.append(mt.autograd.grad((y, (b * 0.0).sum()), (x, b), grad_outputs=(grad_out, None)))
    for i in range(2):
        assert_same(res[1][i], res[0][i], f"input {i}")


def test_hooks_on_leaves_and_non_leaves_and_retain_grad():
    res = []
    hs, ds = both(randn(6))
    for (x,) in (hs, ds):
        seen = []
        x.register_hook(lambda g: g * 3.0)
        y = x.exp()
        y.retain_grad()
        y.register_hook(lambda g, seen=seen: seen.append(g) or g + 1.0)
        (y * y).sum().backward()
        res.append((x.grad, y.grad, seen[0]))
    for what, h, d in zip(("leaf hook", "retained non-leaf grad", "hook's argument"), *res):
        assert_same(d, h, what)


def test_a_plain_backward_makes_no_host_sync():
    (x, w), _ = both(randn(8, 16, dtype=np.float32), randn(16, 16, dtype=np.float32))
    x, w = on_device(host_copy(x), True), on_device(host_copy(w), True)
    with fakecuda.count_syncs() as c:
        h = F.layer_norm((x @ w).relu(), (16,))
        loss = F.log_softmax(h, -1).sum() + F.softmax(h, -1).mean()
        loss.backward()
    assert c.count == 0, f"{c.count} host syncs in a forward and backward without anomaly mode"


# ----------------------------------------------------------------------------- fused ops and losses


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_softmax_family_and_layer_norm(dtype):
    x, w, b = randn(2, 3, 5), randn(5), randn(5)
    backward_both(lambda a: F.softmax(a, -1), x, dtype=dtype)
    backward_both(lambda a: F.softmax(a, 1), x, dtype=dtype)  # not the last axis: the plain max
    backward_both(lambda a: F.log_softmax(a, -1), x, dtype=dtype)
    backward_both(lambda a, ww, bb: F.layer_norm(a, (5,), ww, bb), x, w, b, dtype=dtype)
    backward_both(lambda a, ww, bb: F.linear(a, ww, bb), x, randn(3, 5), randn(3), dtype=dtype)  # fused Linear


def test_dropout_draws_on_the_host_and_copies_the_same_mask():
    def dropped(a):
        mt.manual_seed(11)  # one host stream: the same mask on both sides
        return F.dropout(a, 0.4)

    backward_both(dropped, randn(6, 7))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses(reduction):
    x, t = randn(6, 4), np.array([0, 3, 1, -100, 2, 3])
    wt = np.abs(randn(4)) + 0.5
    kw = dict(reduction=reduction)
    backward_both(lambda a, tt: F.cross_entropy(a, tt, **kw), x, t, requires_grad=(True, False))
    backward_both(
        lambda a, tt, ww: F.cross_entropy(a, tt, weight=ww, label_smoothing=0.1, **kw),
        x,
        t,
        wt,
        requires_grad=(True, False, False),
    )
    backward_both(lambda a, tt: F.nll_loss(F.log_softmax(a, 1), tt, **kw), x, t, requires_grad=(True, False))
    backward_both(lambda a, tt, ww: F.nll_loss(a, tt, weight=ww, **kw), x, t, wt, requires_grad=(True, False, False))
    p = np.abs(randn(6, 4))
    backward_both(lambda a, pp: F.cross_entropy(a, pp / pp.sum(1, keepdim=True), **kw), x, p)
    backward_both(lambda a, tt: F.binary_cross_entropy_with_logits(a, tt, **kw), x, (p > 0.5).astype(np.float64))


def test_cross_entropy_refuses_a_target_out_of_range_on_the_device():
    x, t = on_device(randn(3, 4), True), on_device(np.array([0, 4, 1]))
    with pytest.raises(IndexError, match="target 4 is out of range"):
        F.cross_entropy(x, t)


def test_attention_weights_with_a_mask_and_an_empty_row():
    q, k = randn(2, 2, 5, 4), randn(2, 2, 6, 4)
    keep = RNG.random((5, 6)) > 0.4
    keep[2] = False  # a query row with no key: zero weights and zero gradient
    backward_both(lambda a, b: F.attention_weights(a, b), q, k)
    backward_both(lambda a, b, m: F.attention_weights(a, b, m), q, k, keep, requires_grad=(True, True, False))


@pytest.mark.parametrize("case", ["plain", "causal", "bool mask", "float mask", "dropout"])
def test_tiled_sdpa_forward_and_backward(case, monkeypatch):
    monkeypatch.setattr(attention, "BLOCK", 4)  # several tiles per axis
    q, k, v = randn(2, 3, 9, 4), randn(2, 3, 7, 4), randn(2, 3, 7, 5)
    mask = {"bool mask": RNG.random((9, 7)) > 0.3, "float mask": randn(9, 7)}.get(case)
    kw = dict(is_causal=case == "causal", dropout_p=0.3 if case == "dropout" else 0.0)

    def sdpa(a, b, c, m=None):
        mt.manual_seed(5)  # the dropout counters' seed: one draw of the host stream, the same on both sides
        return F.scaled_dot_product_attention(a, b, c, attn_mask=m, **kw)

    if mask is None:
        backward_both(sdpa, q, k, v)
    else:
        backward_both(sdpa, q, k, v, mask, requires_grad=(True, True, True, False))


# ----------------------------------------------------------------------------- forward mode


def jvp_both(fn, primals, tangents):
    """fn's output and its tangent under make_dual / unpack_dual, on each side; assert them equal."""
    res = []
    for make in (on_host, on_device):
        with fwAD.dual_level():
            duals = [fwAD.make_dual(make(p), make(t)) for p, t in zip(primals, tangents)]
            out = fwAD.unpack_dual(fn(*duals))
            res.append((out.primal, out.tangent))
    (ph, th), (pd, td) = res
    assert_same(pd, ph, "primal")
    assert_same(td, th, "tangent")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_mode_of_the_fused_ops(dtype):
    x, tx = randn(2, 3, 5, dtype=dtype), randn(2, 3, 5, dtype=dtype)
    w, b, tw, tb = (randn(5, dtype=dtype) for _ in range(4))
    jvp_both(lambda a: (a.exp() * a).sin(), (x,), (tx,))  # elementwise rules
    jvp_both(lambda a: F.softmax(a, -1), (x,), (tx,))
    jvp_both(lambda a: F.log_softmax(a, 1), (x,), (tx,))
    jvp_both(lambda a, ww, bb: F.layer_norm(a, (5,), ww, bb), (x, w, b), (tx, tw, tb))
    lw, lb, tlw, tlb = randn(3, 5, dtype=dtype), randn(3, dtype=dtype), randn(3, 5, dtype=dtype), randn(3, dtype=dtype)
    jvp_both(lambda a, ww, bb: F.linear(a, ww, bb), (x, lw, lb), (tx, tlw, tlb))
    jvp_both(lambda a: (mt.manual_seed(2), F.dropout(a, 0.3))[1], (x,), (tx,))
    q, k, tq, tk = (randn(2, n, 4, dtype=dtype) for n in (5, 6, 5, 6))
    jvp_both(lambda a, c: F.attention_weights(a, c), (q, k), (tq, tk))


def test_forward_mode_of_the_losses_and_the_tiled_attention(monkeypatch):
    monkeypatch.setattr(attention, "BLOCK", 4)
    x, tx, t = randn(6, 4), randn(6, 4), np.array([0, 3, 1, -100, 2, 3])
    p, tp = RNG.random((6, 4)), randn(6, 4)
    res = []
    for make in (on_host, on_device):
        with fwAD.dual_level():
            dual = fwAD.make_dual(make(x), make(tx))
            ce = fwAD.unpack_dual(F.cross_entropy(dual, make(t), label_smoothing=0.2)).tangent
            nll = fwAD.unpack_dual(F.nll_loss(dual, make(t), reduction="sum")).tangent
            probs = fwAD.make_dual(make(p), make(tp))  # class probabilities, with a tangent of their own
            ce_p = fwAD.unpack_dual(F.cross_entropy(dual, probs, label_smoothing=0.1)).tangent
            bce = fwAD.unpack_dual(F.binary_cross_entropy_with_logits(dual, probs, reduction="none")).tangent
            res.append((ce, nll, ce_p, bce))
    for what, h, d in zip(("cross_entropy", "nll_loss", "cross_entropy, probabilities", "bce_with_logits"), *res):
        assert_same(d, h, what)
    q, k, v = randn(2, 9, 4), randn(2, 7, 4), randn(2, 7, 3)
    tq, tk, tv = randn(2, 9, 4), randn(2, 7, 4), randn(2, 7, 3)
    jvp_both(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), (q, k, v), (tq, tk, tv))


# ----------------------------------------------------------------------------- mt.func and autograd.functional


def f_scalar(x, w):
    return (F.softmax(x @ w, -1) * x.tanh().sum(-1, keepdim=True)).sum()


def f_vector(x, w):
    return F.layer_norm(x @ w, (3,)).sin().reshape(-1)


def both_plain(*arrays):
    """Inputs without requires_grad (the transforms set it up themselves), on each side."""
    return both(*arrays, requires_grad=False)


def test_func_transforms():
    x, w, vx, vw, cot = randn(2, 3), randn(3, 3), randn(2, 3), randn(3, 3), randn(6)
    hs, ds = both_plain(x, w, vx, vw, cot)
    res = []
    for x_, w_, vx_, vw_, cot_ in (hs, ds):
        out, tangent = mt.func.jvp(f_vector, (x_, w_), (vx_, vw_))
        _, pullback = mt.func.vjp(f_vector, x_, w_)
        gx, gw = pullback(cot_)
        grads = mt.func.grad(f_scalar, argnums=(0, 1))(x_, w_)
        jr, jf = mt.func.jacrev(f_vector)(x_, w_), mt.func.jacfwd(f_vector)(x_, w_)
        hess = mt.func.hessian(f_scalar)(x_, w_)
        res.append((out, tangent, gx, gw, *grads, jr, jf, hess))
    names = ("jvp out", "jvp tangent", "vjp x", "vjp w", "grad x", "grad w", "jacrev", "jacfwd", "hessian")
    for what, h, d in zip(names, *res):
        assert_same(d, h, what)


def test_autograd_functional():
    x, w, v, u = randn(2, 3), randn(3, 3), randn(2, 3), randn(6)
    hs, ds = both_plain(x, w, v, u)
    res = []
    for x_, w_, v_, u_ in (hs, ds):
        _, vj = AF.vjp(lambda a, w_=w_: f_vector(a, w_), x_, u_)
        _, jv = AF.jvp(lambda a, w_=w_: f_vector(a, w_), x_, v_)
        jac = AF.jacobian(f_vector, (x_, w_))
        jac_fwd = AF.jacobian(lambda a, w_=w_: f_vector(a, w_), x_, strategy="forward-mode", vectorize=True)
        _, hv = AF.hvp(lambda a, w_=w_: f_scalar(a, w_), x_, v_)
        _, vh = AF.vhp(lambda a, w_=w_: f_scalar(a, w_), x_, v_)
        hess = AF.hessian(lambda a, w_=w_: f_scalar(a, w_), x_)
        res.append((vj, jv, *jac, jac_fwd, hv, vh, hess))
    names = ("vjp", "jvp", "jacobian x", "jacobian w", "forward-mode jacobian", "hvp", "vhp", "hessian")
    for what, h, d in zip(names, *res):
        assert_same(d, h, what)


# ----------------------------------------------------------------------------- gradcheck, anomaly mode


def test_gradcheck_and_gradgradcheck_on_device_inputs():
    x, w = on_device(randn(2, 3), True), on_device(randn(3, 3), True)
    assert mt.autograd.gradcheck(f_vector, (x, w))
    assert mt.autograd.gradcheck(f_vector, (x, w), fast_mode=True, check_forward_ad=True)
    assert mt.autograd.gradgradcheck(f_scalar, (x, w))
    bad = mt.autograd.gradcheck(lambda a: _WrongGrad.apply(a), (x,), raise_exception=False)
    assert bad is False, "gradcheck on device inputs must still catch a wrong backward"


class _WrongGrad(mt.autograd.Function):
    """y = x^2 with a backward that forgets the factor 2: what gradcheck is for."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_arrays
        return (g * x,)


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")
def test_anomaly_mode_finds_a_nan_on_the_device_and_costs_no_sync_when_off():
    x = on_device(np.array([1.0, 0.0, 4.0]), True)
    with fakecuda.count_syncs() as off:
        x.sqrt().sum().backward()  # d sqrt(0) = inf: no NaN, no check
        (x.sqrt() * 0.0).sum().backward()  # 0 * inf: a NaN gradient, unchecked while anomaly mode is off
    assert off.count == 0
    with mt.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="returned nan values"):
            (x.sqrt() * 0.0).sum().backward()
    with mt.autograd.detect_anomaly(), fwAD.dual_level():
        dual = fwAD.make_dual(x, on_device(np.array([1.0, 1.0, 1.0])))
        with pytest.raises(RuntimeError, match="forward-mode output"):
            dual.sqrt() * 0.0


# ----------------------------------------------------------------------------- saved-tensor hooks, checkpointing


def test_saved_tensor_hooks_see_device_tensors():
    x = randn(4, 5)
    res = []
    for make in (on_host, on_device):
        a = make(x, True)
        kinds = []

        def pack(t, kinds=kinds):
            kinds.append(type(t._data))
            return t * 1.0  # a copy, on t's device

        with mt.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = F.softmax(a.exp(), -1)
            listing = mt.autograd.graph.saved_tensors(y)
        (y * y).sum().backward()
        assert len(listing) and set(kinds) == {type(a._data)}
        res.append(a.grad)
    assert_same(res[1], res[0])


def test_checkpoint_recomputes_on_the_device():
    x, w = randn(4, 6), randn(6, 6)
    res = []
    for make in (on_host, on_device):
        a, m = make(x, True), make(w, True)

        def block(t, m=m):
            return F.dropout(F.layer_norm(t @ m, (6,)).tanh(), 0.3)

        mt.manual_seed(3)  # the recompute restores the host stream: the same dropout mask
        y = checkpoint(block, a, use_reentrant=False)
        y = checkpoint_sequential([block, block], 2, y, use_reentrant=False)
        y.sum().backward()
        res.append((y, a.grad, m.grad))
    for what, h, d in zip(("output", "grad x", "grad w"), *res):
        assert_same(d, h, what)


# ----------------------------------------------------------------------------- higher order through the fused ops


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm", "cross_entropy", "attention_weights"])
def test_second_derivatives_of_the_fused_ops(op):
    """grad(create_graph=True) runs each fused backward on device Tensors; that gradient is differentiated again
    (random weights r on the output and v on the gradient, never all ones)."""
    x, k, w, t = randn(3, 4), randn(5, 4), randn(4), np.array([1, 0, 3])
    fns = {
        "softmax": lambda a, kk, ww, tt: F.softmax(a, -1),
        "log_softmax": lambda a, kk, ww, tt: F.log_softmax(a, 0),
        "layer_norm": lambda a, kk, ww, tt: F.layer_norm(a, (4,), ww),
        "cross_entropy": lambda a, kk, ww, tt: F.cross_entropy(a, tt, weight=(ww * ww).detach(), label_smoothing=0.1),
        "attention_weights": lambda a, kk, ww, tt: F.attention_weights(a, kk),
    }
    r, v = randn(*fns[op](*both(x, k, w, t, requires_grad=False)[0]).shape), randn(*x.shape)
    res = []
    for make, (a, kk, ww, tt) in zip((on_host, on_device), both(x, k, w, t, requires_grad=(True, True, True, False))):
        out = fns[op](a, kk, ww, tt)
        (ga,) = mt.autograd.grad((out * make(r)).sum(), a, create_graph=True)
        (gga,) = mt.autograd.grad((ga * make(v)).sum(), a)
        res.append((out, ga, gga))
    for what, h, d in zip(("output", "gradient", "second derivative"), *res):
        assert_same(d, h, f"{op}: {what}")


# ----------------------------------------------------------------------------- speed devices and host syncs


def test_score_blocks_on_the_host_equal_one_pass_on_the_device(monkeypatch):
    """AttentionWeights' speed devices (score blocks, the skipped empty-row product) run on the
    host only; the device takes the plain formula in one pass. The two give the same bits."""
    monkeypatch.setattr(softmax, "SCORE_BLOCK_NUMEL", 16)  # several blocks on the host side
    q, k = randn(2, 3, 6, 4, dtype=np.float32), randn(2, 3, 5, 4, dtype=np.float32)
    keep = RNG.random((6, 5)) > 0.3
    assert len(softmax.score_blocks(np.empty((2, 3, 6, 5)))) > 1
    backward_both(lambda a, b, m: F.attention_weights(a, b, m), q, k, keep, requires_grad=(True, True, False))


def test_host_syncs_of_the_fused_ops_forward_and_backward(monkeypatch):
    """None, but cross_entropy's and nll_loss's check that every target is in range: one sync per call."""
    monkeypatch.setattr(attention, "BLOCK", 4)
    x, q, k, v = (on_device(randn(*s, dtype=np.float32), True) for s in ((4, 6), (2, 5, 4), (2, 7, 4), (2, 7, 4)))
    keep, t = on_device(RNG.random((5, 7)) > 0.5), on_device(np.array([0, 5, 2, 1]))
    counts = {}
    for name, fn in {
        "softmax, log_softmax, layer_norm": lambda: (
            F.softmax(x, -1) + F.log_softmax(x, 0) + F.layer_norm(x, (6,)) * F.dropout(x, 0.2)
        ).sum(),
        "attention_weights with a mask": lambda: F.attention_weights(q, k, keep).sum(),
        "tiled sdpa, causal, dropout": lambda: (
            F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.1).exp().sum()
        ),
        "cross_entropy": lambda: F.cross_entropy(x, t, label_smoothing=0.1),
        "nll_loss": lambda: F.nll_loss(x, t, reduction="sum"),
    }.items():
        with fakecuda.count_syncs() as c:
            fn().backward()
        counts[name] = c.count
    assert counts == {
        "softmax, log_softmax, layer_norm": 0,
        "attention_weights with a mask": 0,
        "tiled sdpa, causal, dropout": 0,
        "cross_entropy": 1,
        "nll_loss": 1,
    }


# ----------------------------------------------------------------------------- across devices: .to("cuda")


def test_backward_across_to_cuda_returns_each_gradient_to_its_leafs_device():
    """A CPU leaf moved to the device by .to("cuda") (differentiable): the walk runs on the device and the CPU leaf
    receives a host gradient, equal to the one-device run's."""
    previous = devices.use_fake_cuda(True)
    try:
        x, w = randn(3, 4), randn(4, 5)
        a, m = on_host(x, True), on_host(w, True)
        F.log_softmax(a.to("cuda") @ m.to("cuda"), -1).sum().backward()
        a_ref, m_ref = on_host(x, True), on_host(w, True)
        F.log_softmax(a_ref @ m_ref, -1).sum().backward()
    finally:
        devices.use_fake_cuda(previous)
    for leaf, ref in ((a, a_ref), (m, m_ref)):
        assert type(leaf.grad._data) is np.ndarray
        assert np.array_equal(leaf.grad._data, ref.grad._data)
