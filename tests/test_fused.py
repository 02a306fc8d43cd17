"""Each fused op equals the composite of primitives it replaces, forward and backward.

The fused kernels (softmax, log_softmax, layer_norm, cross_entropy, bce_with_logits, linear, the
attention weights) exist for speed and stability; their hand-written backward must agree with what
the engine derives from the unfused formula. Both sides run in minitensor, so this also
cross-checks the primitives.
Compared in float64 at OP_RTOL['float64'] and float32 at OP_RTOL['float32'].
"""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from minitensor.testing import OP_RTOL, assert_close


# ----------------------------------------------------------------------------- composites
def softmax_ref(x, dim):
    """exp(x - max) / sum exp(x - max); the max shift is a constant (no gradient needed through it)."""
    e = (x - x.detach().max(dim=dim, keepdim=True).values).exp()
    return e / e.sum(dim=dim, keepdim=True)


def log_softmax_ref(x, dim):
    """x - logsumexp(x)."""
    return x - x.logsumexp(dim=dim, keepdim=True)


def layer_norm_ref(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var_biased + eps) * weight + bias over the trailing dims."""
    dims = tuple(range(-len(normalized_shape), 0))
    mu = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, unbiased=False, keepdim=True)
    y = (x - mu) / (var + eps).sqrt()
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def cross_entropy_ref(x, target, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Smoothed NLL of log_softmax over (N, C): (1-eps) * -logp[target] + eps * mean_c(-logp)."""
    logp = log_softmax_ref(x, dim=-1)  # (N, C)
    t = target.numpy()
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    nll = -logp[np.arange(t.shape[0]), safe]  # (N,)
    smooth = -logp.mean(dim=-1)  # (N,)
    per = nll * (1 - label_smoothing) + smooth * label_smoothing
    per = per * mt.tensor(keep.astype(x.dtype))
    if reduction == "none":
        return per
    if reduction == "sum":
        return per.sum()
    return per.sum() / float(keep.sum())


def bce_with_logits_ref(x, y, weight=None, reduction="mean", pos_weight=None):
    """-(pos_weight y log sigmoid(x) + (1 - y) log sigmoid(-x)) * weight, from the LogSigmoid primitive."""
    positive = y * F.logsigmoid(x) if pos_weight is None else pos_weight * y * F.logsigmoid(x)
    loss = -(positive + (1 - y) * F.logsigmoid(-x))
    loss = loss if weight is None else loss * weight
    return loss.mean() if reduction == "mean" else (loss.sum() if reduction == "sum" else loss)


def linear_ref(x, weight, bias=None):
    """x @ W^T + b."""
    y = x @ weight.transpose(0, 1)
    return y + bias if bias is not None else y


def attention_weights_ref(q, k, keep=None, scale=1.0):
    """softmax(q k^T * scale) with excluded keys at -inf, then empty query rows set to 0."""
    s = q @ k.transpose(-2, -1) * scale
    if keep is None:
        return softmax_ref(s, dim=-1)
    row_has_key = keep.any(axis=-1, keepdims=True)
    # an empty row would be all -inf (NaN): give it finite scores, then zero its weights
    s = s.masked_fill(~keep & row_has_key, -float("inf"))
    return softmax_ref(s, dim=-1) * mt.tensor(row_has_key.astype(s.dtype))


# ----------------------------------------------------------------------------- harness
def _inputs(rng, dtype_name, *shapes):
    return [mt.tensor(rng.standard_normal(s).astype(dtype_name), requires_grad=True) for s in shapes]


def _fresh(xs):
    return [mt.tensor(x.numpy().copy(), requires_grad=True) for x in xs]


def check_fused(fused, composite, xs, dtype_name, rng, what):
    """Same forward; same gradients for one random upstream gradient."""
    rtol = OP_RTOL[dtype_name]
    a_in, b_in = _fresh(xs), _fresh(xs)
    a, b = fused(*a_in), composite(*b_in)
    assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.shape}/{a.dtype} vs {b.shape}/{b.dtype}"
    assert_close(a.numpy(), b.numpy(), rtol, f"{what} [{dtype_name}] forward")
    g = np.asarray(rng.standard_normal(a.shape) + 0.5, dtype=dtype_name)
    a.backward(mt.tensor(g.copy()))
    b.backward(mt.tensor(g.copy()))
    for i, (p, q) in enumerate(zip(a_in, b_in)):
        assert_close(p.grad.numpy(), q.grad.numpy(), rtol, f"{what} [{dtype_name}] grad of input {i}")


dtypes = pytest.mark.parametrize("dtype_name", ["float64", "float32"])


@dtypes
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_equals_composite(dtype_name, dim, rng):
    xs = _inputs(rng, dtype_name, (2, 3, 4))
    check_fused(
        lambda x: F.softmax(x, dim=dim), lambda x: softmax_ref(x, dim), xs, dtype_name, rng, f"softmax dim={dim}"
    )


@dtypes
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_log_softmax_equals_composite(dtype_name, dim, rng):
    xs = _inputs(rng, dtype_name, (2, 3, 4))
    check_fused(
        lambda x: F.log_softmax(x, dim=dim),
        lambda x: log_softmax_ref(x, dim),
        xs,
        dtype_name,
        rng,
        f"log_softmax dim={dim}",
    )


@dtypes
@pytest.mark.parametrize("normalized_shape,affine", [((4,), True), ((4,), False), ((3, 4), True), ((3, 4), False)])
def test_layer_norm_equals_composite(dtype_name, normalized_shape, affine, rng):
    if affine:
        xs = _inputs(rng, dtype_name, (2, 3, 4), normalized_shape, normalized_shape)
        fused = lambda x, w, b: F.layer_norm(x, normalized_shape, w, b)
        comp = lambda x, w, b: layer_norm_ref(x, normalized_shape, w, b)
    else:
        xs = _inputs(rng, dtype_name, (2, 3, 4))
        fused = lambda x: F.layer_norm(x, normalized_shape)
        comp = lambda x: layer_norm_ref(x, normalized_shape)
    check_fused(fused, comp, xs, dtype_name, rng, f"layer_norm {normalized_shape} affine={affine}")


@dtypes
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_cross_entropy_equals_composite(dtype_name, reduction, label_smoothing, ignore_index, rng):
    xs = _inputs(rng, dtype_name, (6, 5))
    target = mt.tensor(np.array([0, 2, -100, 4, 2, 1]))
    kw = dict(ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing)
    if ignore_index != -100:
        target = mt.tensor(np.array([0, 2, 3, 4, 2, 1]))
    check_fused(
        lambda x: F.cross_entropy(x, target, **kw),
        lambda x: cross_entropy_ref(x, target, **kw),
        xs,
        dtype_name,
        rng,
        f"cross_entropy {kw}",
    )


@dtypes
def test_nll_of_log_softmax_equals_cross_entropy(dtype_name, rng):
    xs = _inputs(rng, dtype_name, (6, 5))
    target = mt.tensor(np.array([0, 2, -100, 4, 2, 1]))
    check_fused(
        lambda x: F.cross_entropy(x, target),
        lambda x: F.nll_loss(F.log_softmax(x, dim=-1), target),
        xs,
        dtype_name,
        rng,
        "nll_loss(log_softmax)",
    )


@dtypes
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weights", ["none", "weight", "pos_weight", "both"])
def test_bce_with_logits_equals_composite(dtype_name, reduction, weights, rng):
    """Gradients for the logits, the targets and both weights (pos_weight broadcast over the last dim)."""
    shapes = (
        [(2, 3, 4), (2, 3, 4)]
        + [(3, 1)] * (weights in ("weight", "both"))
        + [(4,)] * (weights in ("pos_weight", "both"))
    )
    xs = _inputs(rng, dtype_name, *shapes)
    xs[0] = mt.tensor(xs[0].numpy() * 4, requires_grad=True)  # logits well into both tails

    def split(x, y, *w):
        weight = w[0] if weights in ("weight", "both") else None
        pos_weight = w[-1] if weights in ("pos_weight", "both") else None
        return x, y, dict(weight=weight, reduction=reduction, pos_weight=pos_weight)

    def fused(*a):
        x, y, kw = split(*a)
        return F.binary_cross_entropy_with_logits(x, y, **kw)

    def composite(*a):
        x, y, kw = split(*a)
        return bce_with_logits_ref(x, y, **kw)

    check_fused(fused, composite, xs, dtype_name, rng, f"bce_with_logits {reduction} {weights}")


@dtypes
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape", [(3, 4), (2, 3, 4)])
def test_linear_equals_composite(dtype_name, bias, x_shape, rng):
    shapes = [x_shape, (5, 4)] + ([(5,)] if bias else [])
    xs = _inputs(rng, dtype_name, *shapes)
    check_fused(F.linear, linear_ref, xs, dtype_name, rng, f"linear {x_shape} bias={bias}")


@dtypes
@pytest.mark.parametrize("masked", ["none", "some keys", "an empty row"])
def test_attention_weights_equals_composite(dtype_name, masked, rng):
    xs = _inputs(rng, dtype_name, (2, 2, 3, 4), (2, 2, 5, 4))
    keep = None
    if masked != "none":
        keep = np.random.default_rng(5).random((2, 1, 3, 5)) < 0.6
        keep[..., 0] = True
        if masked == "an empty row":
            keep[1, 0, 2] = False
    check_fused(
        lambda q, k: F.attention_weights(q, k, keep, scale=0.5),
        lambda q, k: attention_weights_ref(q, k, keep, scale=0.5),
        xs,
        dtype_name,
        rng,
        f"attention {masked}",
    )
