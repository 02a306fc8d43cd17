"""Every op that takes a float tensor option (an attention bias, a loss's class weights or target, clamp's bounds,
where's and masked_fill's values, layer norm's and linear's affine parameters): with that option requiring grad,
minitensor gives torch's gradient, or refuses where torch refuses. Never a silent constant."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import OP_RTOL, assert_close

R = np.random.default_rng(0)
X = R.standard_normal((4, 3))
P = 1 / (1 + np.exp(-R.standard_normal((4, 3))))
Y = np.array([0, 2, 1, 2])
W3 = np.abs(R.standard_normal(3)) + 0.5
LO = R.standard_normal((4, 3)) - 0.5
Q, K, V = R.standard_normal((2, 2, 4, 3)), R.standard_normal((2, 2, 5, 3)), R.standard_normal((2, 2, 5, 2))

# name -> (fn(L, *tensors) for L in (mt, torch), the arrays, all of which require grad)
CASES = {
    "sdpa attn_mask": (
        lambda L, b: L.nn.functional.scaled_dot_product_attention(L.tensor(Q), L.tensor(K), L.tensor(V), attn_mask=b),
        [R.standard_normal((4, 5))],
    ),
    "bce_with_logits target": (lambda L, a, t: L.nn.functional.binary_cross_entropy_with_logits(a, t), [X, P]),
    "mse_loss target": (lambda L, a, t: L.nn.functional.mse_loss(a, t), [X, LO]),
    "l1_loss target": (lambda L, a, t: L.nn.functional.l1_loss(a, t), [X, LO]),
    "clamp tensor bounds": (lambda L, a, lo, hi: L.clamp(a, lo, hi), [X, LO, LO + 1]),
    "clamp tensor min": (lambda L, a, lo: L.clamp(a, min=lo), [X, LO]),
    "maximum": (lambda L, a, b: L.maximum(a, b), [X, LO]),
    "where": (lambda L, a, b: L.where(L.tensor(X > 0), a, b), [X, LO]),
    "masked_fill value": (lambda L, a, v: a.masked_fill(L.tensor(X > 0), v), [X, np.array(0.7)]),
    "layer_norm weight, bias": (lambda L, a, w, b: L.nn.functional.layer_norm(a, (3,), w, b), [X, W3, W3 - 1]),
    "linear bias": (lambda L, a, w, b: L.nn.functional.linear(a, w, b), [X, R.standard_normal((2, 3)), W3[:2]]),
}
# torch refuses a gradient for these; minitensor refuses too (never a silent constant)
REFUSED_BOTH = {
    "cross_entropy weight": (lambda L, a, w: L.nn.functional.cross_entropy(a, L.tensor(Y), weight=w), [X, W3]),
    "nll_loss weight": (lambda L, a, w: L.nn.functional.nll_loss(a, L.tensor(Y), weight=w), [X, W3]),
}


def _run(L, fn, arrays):
    xs = [L.tensor(a.copy(), requires_grad=True) for a in arrays]
    out = fn(L, *xs)
    g = np.random.default_rng(1).standard_normal(tuple(out.shape))
    out.backward(L.tensor(g))
    return out, xs


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_float_option_that_requires_grad_gets_torchs_gradient(name):
    fn, arrays = CASES[name]
    out, xs = _run(mt, fn, arrays)
    ref, ts = _run(torch, fn, arrays)
    assert out.requires_grad
    assert_close(out.detach().numpy(), ref.detach().numpy(), OP_RTOL["float64"], what=f"{name}: value")
    for i, (x, t) in enumerate(zip(xs, ts)):
        assert x.grad is not None, f"{name}: argument {i} got no gradient (torch gives one)"
        assert_close(x.grad.numpy(), t.grad.numpy(), OP_RTOL["float64"], what=f"{name}: gradient of argument {i}")


@pytest.mark.parametrize("name", sorted(REFUSED_BOTH))
def test_a_class_weight_that_requires_grad_is_refused_as_torch_refuses(name):
    fn, arrays = REFUSED_BOTH[name]
    with pytest.raises(RuntimeError, match="not differentiable"):
        _run(torch, fn, arrays)
    with pytest.raises(RuntimeError, match="weight requires grad"):
        _run(mt, fn, arrays)


@pytest.mark.parametrize("name", sorted(REFUSED_BOTH))
def test_a_class_weight_tangent_is_refused_where_torch_drops_it(name):
    """torch's forward AD silently drops a tangent on the class weights; minitensor refuses it with its reason."""
    fn, (a, w) = REFUSED_BOTH[name]
    with mt.autograd.forward_ad.dual_level():
        dw = mt.autograd.forward_ad.make_dual(mt.tensor(w), mt.tensor(np.ones_like(w)))
        with pytest.raises(RuntimeError, match="forward-mode tangent"):
            fn(mt, mt.tensor(a), dw)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_logits_weights_are_differentiated_exactly_where_torch_refuses(reduction):
    """Deviation, flagged: torch refuses a gradient for weight and pos_weight; minitensor gives the exact one,
    checked by finite differences (first and second order)."""
    x = mt.tensor(X, requires_grad=True)
    w, pw = mt.tensor(W3, requires_grad=True), mt.tensor(W3[::-1].copy(), requires_grad=True)

    def f(a, b, c):
        return mt.nn.functional.binary_cross_entropy_with_logits(
            a, mt.tensor(P), weight=b, pos_weight=c, reduction=reduction
        )

    assert mt.autograd.gradcheck(f, [x, w, pw])
    assert mt.autograd.gradgradcheck(f, [x, w, pw])


@pytest.mark.parametrize("bias_shape", [(4, 5), (1, 2, 4, 5), (2, 1, 4, 5)])
def test_attention_weights_with_a_learned_bias_as_torchs_composite(bias_shape):
    """The dense path: F.attention_weights with a float mask is softmax(q k^T * scale + bias), the bias
    differentiated (first and second order) as torch differentiates the same composite."""
    rng = np.random.default_rng(3)
    q0, k0, b0 = rng.standard_normal((2, 2, 4, 3)), rng.standard_normal((2, 2, 5, 3)), rng.standard_normal(bias_shape)
    q, k, b = (mt.tensor(a, requires_grad=True) for a in (q0, k0, b0))
    tq, tk, tb = (torch.tensor(a, requires_grad=True) for a in (q0, k0, b0))
    w = mt.nn.functional.attention_weights(q, k, b, scale=0.5)
    ref = torch.softmax(tq @ tk.transpose(-2, -1) * 0.5 + tb, dim=-1)
    assert_close(w.detach().numpy(), ref.detach().numpy(), OP_RTOL["float64"], what="weights")
    g = rng.standard_normal(ref.shape)
    (gb,) = mt.autograd.grad((w * mt.tensor(g)).sum(), [b], create_graph=True)
    (tgb,) = torch.autograd.grad((ref * torch.tensor(g)).sum(), [tb], create_graph=True)
    assert_close(gb.detach().numpy(), tgb.detach().numpy(), OP_RTOL["float64"], what="gradient of the bias")
    v = rng.standard_normal(bias_shape)
    (hq,) = mt.autograd.grad((gb * mt.tensor(v)).sum(), [q])
    (thq,) = torch.autograd.grad((tgb * torch.tensor(v)).sum(), [tq])
    assert_close(hq.numpy(), thq.numpy(), OP_RTOL["float64"], what="second order")


def test_attention_weights_with_a_bias_row_all_minus_inf_is_zero_not_nan():
    b0 = np.zeros((4, 5))
    b0[2] = -np.inf
    q, k, b = (
        mt.randn(1, 4, 3, dtype=mt.float64),
        mt.randn(1, 5, 3, dtype=mt.float64),
        mt.tensor(b0, requires_grad=True),
    )
    w = mt.nn.functional.attention_weights(q, k, b)
    assert np.all(w.detach().numpy()[0, 2] == 0) and np.isfinite(w.detach().numpy()).all()
    w.sum().backward()
    assert np.isfinite(b.grad.numpy()).all()
