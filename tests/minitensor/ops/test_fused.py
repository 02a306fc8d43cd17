"""Each fused op equals the composite of primitives it replaces, forward and backward.

The fused kernels (softmax, log_softmax, layer_norm, cross_entropy, bce_with_logits, linear, the
attention weights) exist for speed and stability; their hand-written backward must agree with what
the engine derives from the unfused formula. Both sides run in minitensor, so this also
cross-checks the primitives.
Compared in float64 at OP_RTOL['float64'] and float32 at OP_RTOL['float32'].
Last, the bad inputs the class losses (cross_entropy, nll_loss) refuse, with PyTorch's rules.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from minitensor.testing import OP_RTOL, assert_close
from tests.support import ROOT


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


def batch_norm_ref(x, weight, bias, eps=1e-5):
    """(x - mean) / sqrt(var_biased + eps) * weight + bias per channel (dim 1), over every other dim."""
    dims = (0, *range(2, x.ndim))
    view = (-1,) + (1,) * (x.ndim - 2)
    mu = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, unbiased=False, keepdim=True)
    return (x - mu) / (var + eps).sqrt() * weight.reshape(view) + bias.reshape(view)


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


def class_cross_entropy_ref(x, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """-sum_c w_c q_nc log_softmax(x_n)_c over (N, C), q_n the smoothed one-hot of an index target (a constant)
    or the smoothed class probabilities (a Tensor); class indices: 'mean' over the sum of w[target] of kept
    rows; probabilities: over the rows."""
    logp = log_softmax_ref(x, dim=-1)  # (N, C)
    N, C = x.shape
    e = label_smoothing
    if isinstance(target, mt.Tensor) and target.dtype.kind == "f":  # class probabilities
        q = target * (1 - e) + e / C
        denominator = float(N)
    else:
        t = np.asarray(target.numpy() if isinstance(target, mt.Tensor) else target)
        keep = t != ignore_index
        onehot = np.eye(C)[np.where(keep, t, 0)] * keep[:, None]
        q = mt.tensor((onehot * (1 - e) + e / C * keep[:, None]).astype(x.dtype))  # ignored rows: q = 0
        w_t = np.ones(N) if weight is None else weight.numpy()[np.where(keep, t, 0)]
        denominator = float((w_t * keep).sum())
    wq = q if weight is None else q * weight
    per = -(logp * wq).sum(dim=-1)
    if reduction == "none":
        return per
    return per.sum() if reduction == "sum" else per.sum() / denominator


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
    return [mt.tensor(x.detach().numpy().copy(), requires_grad=True) for x in xs]


def check_fused(fused, composite, xs, dtype_name, rng, what):
    """Same forward; same gradients for one random upstream gradient."""
    rtol = OP_RTOL[dtype_name]
    a_in, b_in = _fresh(xs), _fresh(xs)
    a, b = fused(*a_in), composite(*b_in)
    assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.shape}/{a.dtype} vs {b.shape}/{b.dtype}"
    assert_close(a.detach().numpy(), b.detach().numpy(), rtol, f"{what} [{dtype_name}] forward")
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
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 5), (2, 3, 4, 2)])
def test_batch_norm_equals_composite(dtype_name, shape, rng):
    xs = _inputs(rng, dtype_name, shape, (3,), (3,))
    fused = lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)
    check_fused(fused, batch_norm_ref, xs, dtype_name, rng, f"batch_norm {shape}")


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
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_weighted_cross_entropy_equals_composite(dtype_name, reduction, label_smoothing, ignore_index, rng):
    """Class indices with a per-class weight (a constant): the fused node against log_softmax and weighting."""
    (x,) = _inputs(rng, dtype_name, (6, 5))
    weight = mt.tensor(rng.uniform(0.5, 2.0, 5).astype(dtype_name))
    target = np.array([0, 2, -100, 4, 2, 1]) if ignore_index == -100 else np.array([0, 2, 3, 4, 2, 1])
    kw = dict(weight=weight, ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing)
    check_fused(
        lambda x: F.cross_entropy(x, mt.tensor(target), **kw),
        lambda x: class_cross_entropy_ref(x, target, **kw),
        [x],
        dtype_name,
        rng,
        f"cross_entropy weight {kw}",
    )


@dtypes
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_weighted_nll_of_log_softmax_equals_weighted_cross_entropy(dtype_name, reduction, rng):
    (x,) = _inputs(rng, dtype_name, (6, 5))
    weight = mt.tensor(rng.uniform(0.5, 2.0, 5).astype(dtype_name))
    target = mt.tensor(np.array([0, 2, -100, 4, 2, 1]))
    check_fused(
        lambda x: F.cross_entropy(x, target, weight, reduction=reduction),
        lambda x: F.nll_loss(F.log_softmax(x, dim=-1), target, weight, reduction=reduction),
        [x],
        dtype_name,
        rng,
        f"nll_loss(log_softmax) weight {reduction}",
    )


@dtypes
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_probs_equals_composite(dtype_name, reduction, label_smoothing, weighted, rng):
    """Class probabilities (unnormalised, as torch allows): gradients for the logits, the target and the weight."""
    xs = _inputs(rng, dtype_name, (6, 5), *[(5,)] * weighted)
    target = mt.tensor(rng.uniform(0.0, 1.0, (6, 5)).astype(dtype_name), requires_grad=True)
    xs.insert(1, target)
    kw = dict(reduction=reduction, label_smoothing=label_smoothing)
    check_fused(
        lambda x, p, *w: F.cross_entropy(x, p, *w, **kw),
        lambda x, p, *w: class_cross_entropy_ref(x, p, *w, **kw),
        xs,
        dtype_name,
        rng,
        f"cross_entropy probabilities weighted={weighted} {kw}",
    )


@dtypes
@pytest.mark.parametrize("reduction", ["sum", "none"])
def test_one_hot_probabilities_equal_class_indices(dtype_name, reduction, rng):
    """A one-hot probability target is its class index, weight and smoothing included ('mean' differs by design:
    PyTorch divides probabilities by the rows, indices by the sum of their weights)."""
    (x,) = _inputs(rng, dtype_name, (6, 5))
    weight = mt.tensor(rng.uniform(0.5, 2.0, 5).astype(dtype_name))
    target = np.array([0, 2, 3, 4, 2, 1])
    probs = mt.tensor(np.eye(5, dtype=dtype_name)[target])
    kw = dict(weight=weight, reduction=reduction, label_smoothing=0.1)
    check_fused(
        lambda x: F.cross_entropy(x, probs, **kw),
        lambda x: F.cross_entropy(x, mt.tensor(target), **kw),
        [x],
        dtype_name,
        rng,
        f"one-hot probabilities {reduction}",
    )


def test_cross_entropy_probs_zero_probability_at_minus_inf_logit_is_the_limit():
    """Deviation from PyTorch, kept on purpose: a class of logit -inf and target probability 0 adds 0 log 0 = 0
    (the limit); torch computes 0 * -inf = NaN for the loss and the weight's gradient."""
    x_np = np.array([[0.5, -np.inf, 1.0], [0.2, 0.3, -0.1]])
    p_np = np.array([[0.3, 0.0, 0.7], [0.2, 0.5, 0.3]])
    x, p, w = (mt.tensor(a, requires_grad=True) for a in (x_np, p_np, np.array([1.0, 2.0, 0.5])))
    loss = F.cross_entropy(x, p, weight=w)
    loss.backward()
    finite = mt.tensor(x_np[1:]), mt.tensor(p_np[1:])
    logp = np.log(np.exp(x_np[0, [0, 2]]) / np.exp(x_np[0, [0, 2]]).sum())
    expected = (-(logp * p_np[0, [0, 2]] * [1.0, 0.5]).sum() + F.cross_entropy(*finite, weight=w).item()) / 2
    assert_close(loss.detach().numpy(), np.array(expected), OP_RTOL["float64"], "loss with a -inf logit")
    assert np.isfinite(x.grad.numpy()).all() and np.isfinite(w.grad.numpy()).all()
    assert x.grad.numpy()[0, 1] == 0.0  # its probability is 0, its target 0
    assert p.grad.numpy()[0, 1] == np.inf  # d loss / d p = -w log p: a positive probability there costs +inf
    torch = pytest.importorskip("torch")
    assert torch.isnan(torch.nn.functional.cross_entropy(torch.tensor(x_np), torch.tensor(p_np))), "torch changed"


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
    xs[0] = mt.tensor(xs[0].detach().numpy() * 4, requires_grad=True)  # logits well into both tails

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


# ----------------------------------------------------------------------------- bad inputs of the class losses
def _x(*shape, dtype="float64"):
    return mt.tensor(np.random.default_rng(0).standard_normal(shape).astype(dtype), requires_grad=True)


IDX = mt.tensor(np.array([0, 2, 1, 3]))
REFUSED_LOSSES = [
    # weight: a Tensor of one entry per class; of the input's dtype with class indices (torch's rule)
    (
        lambda: F.cross_entropy(_x(4, 4), IDX, mt.ones(3, dtype=mt.float64)),
        ValueError,
        r"shape \(4,\), got shape \(3,\)",
    ),
    (lambda: F.cross_entropy(_x(4, 4), IDX, mt.ones(1, 4, dtype=mt.float64)), ValueError, r"got shape \(1, 4\)"),
    (lambda: F.cross_entropy(_x(4, 4), IDX, mt.tensor(1.0)), ValueError, r"one entry per class, shape \(4,\)"),
    (lambda: F.cross_entropy(_x(4, 4), IDX, [1.0, 1.0, 1.0, 1.0]), TypeError, "weight must be a Tensor of 4 per-class"),
    (
        lambda: F.cross_entropy(_x(4, 4), IDX, np.ones(4)),
        TypeError,
        "weight must be a Tensor of 4 per-class weights, got ndarray",
    ),
    (
        lambda: F.cross_entropy(_x(4, 4), IDX, mt.ones(4)),
        TypeError,
        "weight must have the input's dtype float64, got fl",
    ),
    (lambda: F.cross_entropy(_x(4, 4), IDX, mt.ones(4, dtype=mt.int64)), TypeError, "input's dtype float64, got int64"),
    (lambda: F.nll_loss(_x(4, 4), IDX, mt.ones(5, dtype=mt.float64)), ValueError, r"nll_loss: weight must hold one"),
    (lambda: F.nll_loss(_x(4, 4, dtype="float32"), IDX, mt.ones(4, dtype=mt.float64)), TypeError, "nll_loss: weight"),
    (lambda: F.cross_entropy(_x(4, 4), _x(4, 4), mt.ones(3)), ValueError, r"cross_entropy: weight must hold one entry"),
    # a target of the input's shape holds probabilities: floating, no ignore_index >= 0 (torch's rules)
    (lambda: F.cross_entropy(_x(4, 4), mt.ones(4, 3)), ValueError, r"class probabilities \(a floating target of the"),
    (lambda: F.cross_entropy(_x(4, 4), mt.ones(3, 4)), ValueError, r"got a float32 target of shape \(3, 4\)"),
    (lambda: F.cross_entropy(_x(4), mt.ones(1, 4)), ValueError, r"input of shape \(4,\) expects class indices"),
    (lambda: F.cross_entropy(_x(4, 4), mt.ones(4, 4, dtype=mt.int64)), TypeError, "must be floating, got int64"),
    (lambda: F.cross_entropy(_x(4, 4), mt.ones(4, 4, dtype=mt.bool)), TypeError, "must be floating, got bool"),
    (lambda: F.cross_entropy(_x(4, 4), mt.ones(4), ignore_index=0), TypeError, r"integer target of shape \(4,\)"),
    (
        lambda: F.cross_entropy(_x(4, 4), _x(4, 4), ignore_index=0),
        ValueError,
        "ignore_index=0 is not supported with cl",
    ),
    (
        lambda: F.cross_entropy(_x(4, 4), _x(4, 4), label_smoothing=1.5),
        ValueError,
        r"label_smoothing must be in \[0, 1\]",
    ),
    (
        lambda: F.nll_loss(_x(4, 4), _x(4, 4)),
        ValueError,
        r"nll_loss: input of shape \(4, 4\) expects class indices \(an",
    ),
    (
        lambda: F.cross_entropy(_x(2, 3), np.full((2, 3), 0.5)),
        TypeError,
        "class probabilities must be a Tensor, got nd",
    ),
    (
        lambda: F.cross_entropy(_x(), mt.tensor(0)),
        ValueError,
        r"cross_entropy: input must have a class dim, .* got shape",
    ),
    (lambda: F.nll_loss(_x(), mt.tensor(0)), ValueError, r"nll_loss: input must have a class dim"),
    (
        lambda: F.nll_loss(np.zeros((2, 3)), mt.tensor([0, 1])),
        TypeError,
        "nll_loss: input must be a Tensor, got ndarray",
    ),
]


@pytest.mark.parametrize("call,error,message", REFUSED_LOSSES, ids=[f"refused-{i}" for i in range(len(REFUSED_LOSSES))])
def test_class_losses_refuse_bad_inputs_before_any_work(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("loss", ["cross_entropy", "cross_entropy smoothed", "nll_loss"])
def test_a_class_index_weight_that_requires_grad_is_refused_as_in_torch(loss):
    """torch: "nll_loss_forward is not differentiable with respect to argument 'weight'", raised by the forward
    while grad mode is on (whether or not the input requires grad); under no_grad the weight is just used."""
    fn = {
        "cross_entropy": lambda x, w: F.cross_entropy(x, IDX, w),
        "cross_entropy smoothed": lambda x, w: F.cross_entropy(x, IDX, w, label_smoothing=0.1),
        "nll_loss": lambda x, w: F.nll_loss(x, IDX, w),
    }[loss]
    w = mt.tensor(np.array([1.0, 2.0, 0.5, 1.5]), requires_grad=True)
    for x in (_x(4, 4), _x(4, 4).detach()):
        with pytest.raises(RuntimeError, match=r"weight requires grad, .* not differentiable with respect to weight"):
            fn(x, w)
    with mt.no_grad():
        assert_close(fn(_x(4, 4), w).numpy(), fn(_x(4, 4), w.detach()).numpy(), 0.0, "no_grad")


def test_a_probability_weight_that_requires_grad_gets_its_gradient():
    """With probabilities torch differentiates the weight and the target (its composite records them)."""
    x, p, w = _x(4, 4), mt.tensor(np.full((4, 4), 0.25), requires_grad=True), mt.ones(4, dtype=mt.float64)
    w.requires_grad = True
    F.cross_entropy(x, p, w).backward()
    assert x.grad is not None and p.grad is not None and w.grad is not None


@pytest.mark.parametrize("loss", [F.cross_entropy, F.nll_loss])
def test_weight_changed_in_place_after_the_forward_is_a_version_error_as_in_torch(loss):
    x, w = _x(4, 4), mt.ones(4, dtype=mt.float64)
    out = loss(x, IDX, w)
    w.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


def test_mixed_dtypes_of_probabilities_promote_as_in_torch():
    """Class probabilities go through torch's elementwise composite: float32 logits with float64 targets give a
    float64 loss, and an integer weight is promoted (class indices refuse both, above)."""
    x32 = _x(4, 4, dtype="float32")
    p64 = mt.tensor(np.full((4, 4), 0.25))
    assert F.cross_entropy(x32, p64).dtype == np.float64
    assert F.cross_entropy(x32, p64.float(), mt.ones(4, dtype=mt.int64)).dtype == np.float32


@pytest.mark.parametrize("module", ["CrossEntropyLoss", "NLLLoss"])
def test_loss_modules_keep_weight_as_a_buffer_as_in_torch(module):
    torch = pytest.importorskip("torch")
    w = np.array([0.5, 1.0, 2.0])
    ours, ref = getattr(mt.nn, module)(weight=mt.tensor(w)), getattr(torch.nn, module)(weight=torch.tensor(w))
    assert list(ours.state_dict()) == list(ref.state_dict()) == ["weight"]
    assert list(ours.parameters()) == [] and np.array_equal(ours.state_dict()["weight"].numpy(), w)
    assert list(getattr(mt.nn, module)().state_dict()) == list(getattr(torch.nn, module)().state_dict()) == []


# docs/backprop.md quotes these backward lines of minitensor/ops/ (fused.py, layer_norm.py, losses.py, batch_norm.py):
# they must still be the code's.
BACKPROP_QUOTES = [
    "return gy - y * xp.sum(gy, axis=dim, keepdims=True)",
    "return rstd * (v - mean_over(xp, v, axes) - xhat * m)",
    "return (eps * rstd * rstd * rstd) * (v - mean_over(xp, v, axes))",
    "(xp.exp(logp) - q) * g_rows",
    "(s * xp.exp(logp) - w * q) * g_rows",
    "xp.sum(g * xhat, axis=axes, keepdims=True)[0]",
]


@pytest.mark.parametrize("line", BACKPROP_QUOTES)
def test_backprop_doc_quotes_the_code(line):
    from pathlib import Path

    root = Path(ROOT)
    assert line in (root / "docs" / "backprop.md").read_text(), f"docs/backprop.md no longer quotes {line!r}"
    homes = ("fused.py", "layer_norm.py", "losses.py", "batch_norm.py")
    code = "".join((root / "minitensor" / "ops" / name).read_text() for name in homes)
    assert line in code, f"ops/fused.py, layer_norm.py, losses.py and batch_norm.py no longer have {line!r}"
