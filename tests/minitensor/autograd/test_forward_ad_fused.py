"""Forward mode through the fused ops (ops/fused.py, layer_norm.py, losses.py, indexing.py), beyond the op table.

tests/minitensor/autograd/test_forward_ad.py runs every op-table case in forward mode; here the fused ops' options that
the table does not reach (every reduction, label smoothing, ignore_index, class weights, tangents on targets and
weights, masks with empty rows, padding rows), each against torch.autograd.forward_ad with random tangents:
- each fused op against torch, and against its own unfused composite in forward mode (minitensor both sides);
- second order both ways for softmax, layer_norm, cross_entropy and the attention weights: reverse over forward
  (the gradient of a tangent) and forward over reverse (the tangent of a create_graph gradient), each equal to
  torch.func.jvp(torch.func.grad(f)), the Hessian-vector product;
- the whole Transformer (tiny, float64, dropout off and on with a fixed seed): the loss's directional derivative
  by forward mode along a random direction of all parameters equals the reverse-mode gradient dotted with it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfw

import minitensor as mt
from minitensor.autograd import forward_ad as fw
from minitensor.testing import OP_RTOL, assert_close
from tests.support.op_cases import MT, TORCH
from transformer_np.loss import compute_loss
from transformer_np.model import Transformer


# ----------------------------------------------------------------------------- helpers
def _np(t) -> np.ndarray:
    return t.detach().numpy().copy()


def jvp(lib, fn, arrays, tangents):
    """(value, tangent) of fn(lib, *inputs) as arrays, in lib's forward mode: input i is arrays[i] with the
    tangent tangents[i] (None: without one). The tangent is None when the output has none."""
    fwd = tfw if lib.is_torch else fw
    with fwd.dual_level():
        xs = [lib.tensor(a.copy()) for a in arrays]
        duals = [x if v is None else fwd.make_dual(x, lib.tensor(v.copy())) for x, v in zip(xs, tangents)]
        primal, tangent = fwd.unpack_dual(fn(lib, *duals))
        return _np(primal), None if tangent is None else _np(tangent)


def check_against_torch(fn, arrays, tangents, dtype_name="float64", ref=None, what=""):
    """fn's value and tangent in minitensor equal torch's (ref(lib, ...) on torch's side where it is spelled
    differently), float64 to round-off, float32 to its precision. Returns the tangent."""
    arrays = [a.astype(dtype_name) for a in arrays]
    tangents = [None if v is None else v.astype(dtype_name) for v in tangents]
    value, tangent = jvp(MT, fn, arrays, tangents)
    value_t, tangent_t = jvp(TORCH, ref or fn, arrays, tangents)
    rtol = OP_RTOL[dtype_name]
    assert_close(value, value_t, rtol, f"{what} value")
    assert tangent is not None and tangent_t is not None, f"{what}: a tangent is missing"
    assert tangent.shape == tangent_t.shape and tangent.dtype == tangent_t.dtype, f"{what}: shape or dtype"
    assert_close(tangent, tangent_t, rtol, f"{what} tangent")
    return tangent


def some(rng, shape, scale=1.0):
    return rng.standard_normal(shape) * scale


def tangent_subsets(n: int) -> list[tuple[bool, ...]]:
    """Which of n inputs carry a tangent: all of them, and each alone."""
    return [(True,) * n] + [tuple(i == j for j in range(n)) for i in range(n)] if n > 1 else [(True,)]


def pick(flags, values):
    return [v if f else None for f, v in zip(flags, values)]


# ----------------------------------------------------------------------------- the losses against torch
CE_SHAPES = [(6, 5), (5,), (3, 5, 4)]  # (N, C), unbatched (C,), (N, C, d1)


def _index_targets(rng, shape, ignore: bool):
    C = shape[0 if len(shape) == 1 else 1]
    t = rng.integers(0, C, size=shape[:1] + shape[2:] if len(shape) > 1 else ())
    if ignore and t.ndim:
        t.reshape(-1)[::3] = -100  # every third row ignored
    return t


@pytest.mark.parametrize("shape", CE_SHAPES, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_cross_entropy_index_targets(rng, shape, reduction, label_smoothing, weighted):
    C = shape[0 if len(shape) == 1 else 1]
    target = _index_targets(rng, shape, ignore=True)
    weight = rng.random(C) + 0.5 if weighted else None

    def fn(t, x):
        w = None if weight is None else t.tensor(weight).to(x.dtype)
        return t.F.cross_entropy(x, t.tensor(target), weight=w, reduction=reduction, label_smoothing=label_smoothing)

    x = some(rng, shape, 2.0)
    check_against_torch(fn, [x], [some(rng, shape)], what="cross_entropy")
    check_against_torch(fn, [x], [some(rng, shape)], "float32", what="cross_entropy float32")


@pytest.mark.parametrize("shape", [(6, 5), (3, 5, 4)], ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_cross_entropy_probabilities_tangents_on_logits_target_and_weight(
    rng, shape, reduction, label_smoothing, weighted
):
    C = shape[1]
    x = some(rng, shape, 2.0)
    p = rng.random(shape)
    p /= p.sum(axis=1, keepdims=True)
    arrays = [x, p] + ([rng.random(C) + 0.5] if weighted else [])

    def fn(t, x, p, w=None):
        return t.F.cross_entropy(x, p, weight=w, reduction=reduction, label_smoothing=label_smoothing)

    for flags in tangent_subsets(len(arrays)):
        tangents = pick(flags, [some(rng, a.shape) for a in arrays])
        check_against_torch(fn, arrays, tangents, what=f"cross_entropy(probabilities), tangents on {flags}")


@pytest.mark.parametrize("shape", CE_SHAPES, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_nll_loss(rng, shape, reduction, weighted):
    C = shape[0 if len(shape) == 1 else 1]
    target = _index_targets(rng, shape, ignore=True)
    weight = rng.random(C) + 0.5 if weighted else None

    def fn(t, x):
        w = None if weight is None else t.tensor(weight).to(x.dtype)
        return t.F.nll_loss(x, t.tensor(target), weight=w, reduction=reduction)

    check_against_torch(fn, [some(rng, shape)], [some(rng, shape)], what="nll_loss")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("pos_weighted", [False, True], ids=["plain", "pos_weight"])
def test_binary_cross_entropy_with_logits_tangents_on_logits_target_and_pos_weight(rng, reduction, pos_weighted):
    shape = (4, 5)
    weight = rng.random(shape)  # the elementwise weight: a constant, applied after the fused node
    arrays = [some(rng, shape, 3.0), rng.random(shape)] + ([rng.random(5) + 0.5] if pos_weighted else [])

    def fn(t, x, y, pw=None):
        w = t.tensor(weight).to(x.dtype)
        return t.F.binary_cross_entropy_with_logits(x, y, weight=w, reduction=reduction, pos_weight=pw)

    def ref(t, x, y, pw=None):
        """torch's formula as a composite: its fused kernel refuses tangents on the logits, the target and pos_weight
        at once ("Setting a forward grad that itself has a forward gradient")."""
        w_y = y if pw is None else pw * y
        loss = -(w_y * t.F.logsigmoid(x) + (1 - y) * t.F.logsigmoid(-x)) * t.tensor(weight)
        return {"mean": loss.mean(), "sum": loss.sum(), "none": loss}[reduction]

    for flags in tangent_subsets(len(arrays)):
        tangents = pick(flags, [some(rng, a.shape) for a in arrays])
        check_against_torch(fn, arrays, tangents, ref=ref, what=f"bce_with_logits, tangents on {flags}")


@pytest.mark.parametrize("op", ["cross_entropy", "nll_loss"])
def test_a_class_index_loss_refuses_a_weight_with_a_tangent(rng, op):
    """Its weight is a constant (no gradient either): a tangent on it is an error naming it, not ignored."""
    x, w = mt.tensor(some(rng, (4, 3))), mt.tensor(rng.random(3))
    with fw.dual_level(), pytest.raises(RuntimeError, match=f"{op}: the weight carries a forward-mode tangent"):
        getattr(mt.nn.functional, op)(x, mt.tensor([0, 2, 1, 1]), weight=fw.make_dual(w, mt.tensor(rng.random(3))))


# ----------------------------------------------------------------------------- the other fused ops against torch
@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("normalized", [(6,), (3, 6)], ids=["last", "last2"])
def test_layer_norm_tangents_on_input_weight_and_bias(rng, dtype_name, normalized):
    arrays = [some(rng, (2, 3, 6), 3.0) + 1.0, some(rng, normalized), some(rng, normalized)]

    def fn(t, x, w, b):
        return t.F.layer_norm(x, normalized, w, b)

    for flags in tangent_subsets(3):
        tangents = pick(flags, [some(rng, a.shape) for a in arrays])
        check_against_torch(fn, arrays, tangents, dtype_name, what=f"layer_norm, tangents on {flags}")
    check_against_torch(lambda t, x: t.F.layer_norm(x, normalized), arrays[:1], [some(rng, (2, 3, 6))], dtype_name)


@pytest.mark.parametrize("biased", [False, True], ids=["no_bias", "bias"])
def test_linear_is_bilinear_plus_bias(rng, biased):
    arrays = [some(rng, (2, 3, 4)), some(rng, (5, 4))] + ([some(rng, (5,))] if biased else [])

    def fn(t, x, w, b=None):
        return t.F.linear(x, w, b)

    for flags in tangent_subsets(len(arrays)):
        tangents = pick(flags, [some(rng, a.shape) for a in arrays])
        check_against_torch(fn, arrays, tangents, what=f"linear, tangents on {flags}")


def _torch_attention_weights(t, q, k, keep, scale):
    """The fused op's math as torch's composite: masked_fill(lowest) -> softmax -> zero the rows that keep nothing."""
    scores = (q @ k.transpose(-2, -1)) * scale
    keep_t = torch.as_tensor(keep)
    scores = scores.masked_fill(~keep_t, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) * keep_t.any(-1, keepdim=True)


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
def test_attention_weights_with_masked_keys_and_an_empty_row(rng, dtype_name):
    B, H, T, S, Dh = 2, 2, 3, 4, 5
    keep = rng.random((B, 1, T, S)) > 0.4
    keep[..., 0] = True
    keep[0, 0, 1, :] = False  # query 1 of batch 0 sees nothing: weights and their tangent 0
    arrays = [some(rng, (B, H, T, Dh)), some(rng, (B, H, S, Dh))]
    scale = 0.37

    def fn(t, q, k):
        return t.F.attention_weights(q, k, mask=keep, scale=scale)

    def ref(t, q, k):
        return _torch_attention_weights(t, q, k, keep, scale)

    for flags in tangent_subsets(2):
        tangents = pick(flags, [some(rng, a.shape) for a in arrays])
        tangent = check_against_torch(fn, arrays, tangents, dtype_name, ref, f"attention weights, tangents on {flags}")
        assert not tangent[0, :, 1].any() and not tangent[np.broadcast_to(~keep, tangent.shape)].any()


def test_embedding_tangent_includes_the_padding_row_as_torch(rng):
    """ẏ = Ẇ[ids] everywhere, the padding row too (torch's forward AD), though the backward sends that row no
    gradient (its convention, followed by both libraries)."""
    ids = np.array([[0, 2, 1], [2, 2, 3]])

    def fn(t, w):
        return t.F.embedding(t.tensor(ids), w, padding_idx=2)

    w, v = some(rng, (4, 3)), some(rng, (4, 3))
    tangent = check_against_torch(fn, [w], [v], what="embedding")
    np.testing.assert_array_equal(tangent, v[ids])


def test_dropout_tangent_uses_the_forward_mask(rng):
    x, v = some(rng, (4, 6)), some(rng, (4, 6))
    keep = rng.random((4, 6)) > 0.3

    def fn(t, x):
        if t.is_torch:
            return x * torch.as_tensor(keep) / 0.7
        return t.F.dropout(x, p=0.3, mask=keep)

    tangent = check_against_torch(fn, [x], [v], what="dropout")
    assert not tangent[~keep].any()
    with fw.dual_level():  # a random mask: the tangent is zero exactly where the output is
        y = mt.nn.functional.dropout(fw.make_dual(mt.tensor(x), mt.tensor(v)), p=0.5)
        primal, tangent = (_np(a) for a in fw.unpack_dual(y))
    np.testing.assert_array_equal(primal == 0, tangent == 0)
    np.testing.assert_allclose(tangent[primal != 0], 2 * v[primal != 0], rtol=1e-15)


FLOAT16_CASES = {
    "softmax": lambda t, x, w, b: t.F.softmax(x, dim=-1),
    "log_softmax": lambda t, x, w, b: t.F.log_softmax(x, dim=1),
    "layer_norm": lambda t, x, w, b: t.F.layer_norm(x, (4,), w, b),
}


@pytest.mark.parametrize("name", sorted(FLOAT16_CASES))
def test_float16_tangents_are_computed_in_float32_and_rounded_once(rng, name):
    """As the forward and the backward: a float16 tangent, torch's to float16's tolerance."""
    arrays = [some(rng, (2, 3, 4), 2.0), some(rng, (4,)), some(rng, (4,))]
    tangent = check_against_torch(
        FLOAT16_CASES[name], arrays, [some(rng, a.shape) for a in arrays], "float16", what=name
    )
    assert tangent.dtype == np.float16


# ----------------------------------------------------------------------------- fused against unfused, in forward mode
def _composite_layer_norm(t, x, w, b):
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) * (x - mu)).mean(dim=-1, keepdim=True)
    return (x - mu) / (var + 1e-5).sqrt() * w + b


def _composite_cross_entropy(target, e):
    """-(q * log_softmax(x)).sum(1) over the non-ignored rows, averaged: the composite the fused node replaces."""
    valid = target != -100
    C = 5
    q = np.where(np.arange(C) == np.where(valid, target, 0)[:, None], 1 - e + e / C, e / C) * valid[:, None]

    def fn(t, x):
        logp = x - x.exp().sum(dim=1, keepdim=True).log()
        return -(t.tensor(q) * logp).sum() / float(valid.sum())

    return fn


FUSED_AND_COMPOSITE = {
    "softmax": (
        lambda t, x: t.F.softmax(x, dim=-1),
        lambda t, x: x.exp() / x.exp().sum(dim=-1, keepdim=True),  # unshifted: the inputs are moderate
        [(3, 5)],
    ),
    "log_softmax": (
        lambda t, x: t.F.log_softmax(x, dim=0),
        lambda t, x: x - x.exp().sum(dim=0, keepdim=True).log(),
        [(3, 5)],
    ),
    "layer_norm": (lambda t, x, w, b: t.F.layer_norm(x, (5,), w, b), _composite_layer_norm, [(2, 3, 5), (5,), (5,)]),
    "linear": (
        lambda t, x, w, b: t.F.linear(x, w, b),
        lambda t, x, w, b: x @ w.transpose(0, 1) + b,
        [(2, 3, 4), (5, 4), (5,)],
    ),
}


@pytest.mark.parametrize("name", sorted(FUSED_AND_COMPOSITE))
def test_fused_equals_its_composite_in_forward_mode(rng, name):
    fused, composite, shapes = FUSED_AND_COMPOSITE[name]
    arrays = [some(rng, s, 2.0) for s in shapes]
    tangents = [some(rng, s) for s in shapes]
    value, tangent = jvp(MT, fused, arrays, tangents)
    value_c, tangent_c = jvp(MT, composite, arrays, tangents)
    assert_close(value, value_c, OP_RTOL["float64"], f"{name} value")
    assert_close(tangent, tangent_c, OP_RTOL["float64"], f"{name} tangent, fused against composite")


def test_fused_cross_entropy_equals_its_composite_in_forward_mode(rng):
    target = _index_targets(rng, (7, 5), ignore=True)
    x, v = some(rng, (7, 5), 2.0), some(rng, (7, 5))

    def fused(t, x):
        return t.F.cross_entropy(x, t.tensor(target), label_smoothing=0.15)

    _, tangent = jvp(MT, fused, [x], [v])
    _, tangent_c = jvp(MT, _composite_cross_entropy(target, 0.15), [x], [v])
    assert_close(tangent, tangent_c, OP_RTOL["float64"], "cross_entropy tangent, fused against composite")


def test_fused_attention_weights_equal_their_composite_in_forward_mode(rng):
    keep = rng.random((2, 1, 3, 4)) > 0.3
    keep[..., 0] = True
    arrays, tangents = (
        [some(rng, (2, 2, 3, 5)), some(rng, (2, 2, 4, 5))],
        [some(rng, (2, 2, 3, 5)), some(rng, (2, 2, 4, 5))],
    )

    def composite(t, q, k):
        scores = (q @ k.transpose(-2, -1)) * 0.5
        return t.F.softmax(scores.masked_fill(t.tensor(~keep), float("-inf")), dim=-1)

    _, tangent = jvp(MT, lambda t, q, k: t.F.attention_weights(q, k, mask=keep, scale=0.5), arrays, tangents)
    _, tangent_c = jvp(MT, composite, arrays, tangents)
    assert_close(tangent, tangent_c, OP_RTOL["float64"], "attention weights tangent, fused against composite")


# ----------------------------------------------------------------------------- second order, both ways, against torch
def _second_order_cases(rng):
    """name -> (f(lib, *inputs) -> scalar, input arrays): each a fused op weighed by a random constant."""
    c35, c235 = some(rng, (3, 5)), some(rng, (2, 3, 5))
    target = np.array([1, -100, 4])
    p = rng.random((3, 5))
    p /= p.sum(axis=1, keepdims=True)
    keep = rng.random((2, 1, 3, 4)) > 0.3
    keep[..., 0] = True
    keep[1, 0, 2] = False
    c_att = some(rng, (2, 2, 3, 4))
    class_weight = rng.random(5) + 0.5
    return {
        "softmax": (lambda t, x: (t.F.softmax(x, dim=-1) * t.tensor(c35)).sum(), [some(rng, (3, 5))]),
        "log_softmax": (lambda t, x: (t.F.log_softmax(x, dim=0) * t.tensor(c35)).sum(), [some(rng, (3, 5))]),
        "layer_norm": (
            lambda t, x, w, b: (t.F.layer_norm(x, (5,), w, b) * t.tensor(c235)).sum(),
            [some(rng, (2, 3, 5), 2.0), some(rng, (5,)), some(rng, (5,))],
        ),
        "cross_entropy": (
            lambda t, x: t.F.cross_entropy(x, t.tensor(target), label_smoothing=0.1),
            [some(rng, (3, 5), 2.0)],
        ),
        "cross_entropy_weighted": (
            lambda t, x: t.F.cross_entropy(x, t.tensor(target), weight=t.tensor(class_weight), label_smoothing=0.1),
            [some(rng, (3, 5), 2.0)],
        ),
        "cross_entropy_probabilities": (
            lambda t, x, p: t.F.cross_entropy(x, p, label_smoothing=0.1, reduction="sum"),
            [some(rng, (3, 5), 2.0), p],
        ),
        "linear": (
            lambda t, x, w, b: (t.F.linear(x, w, b) * t.tensor(c235[..., :4])).sum(),
            [some(rng, (2, 3, 5)), some(rng, (4, 5)), some(rng, (4,))],
        ),
        "nll_loss": (
            lambda t, x: t.F.nll_loss(t.F.log_softmax(x, dim=1), t.tensor(target), reduction="sum"),
            [some(rng, (3, 5), 2.0)],
        ),
        "bce_with_logits": (
            lambda t, x, y, pw: t.F.binary_cross_entropy_with_logits(x, y, pos_weight=pw),
            [some(rng, (3, 5), 2.0), rng.random((3, 5)), rng.random(5) + 0.5],
        ),
        "attention_weights": (
            lambda t, q, k: (
                (
                    t.F.attention_weights(q, k, mask=keep, scale=0.4)
                    if not t.is_torch
                    else _torch_attention_weights(t, q, k, keep, 0.4)
                )
                * t.tensor(c_att)
            ).sum(),
            [some(rng, (2, 2, 3, 5)), some(rng, (2, 2, 4, 5))],
        ),
    }


SECOND_ORDER = sorted(_second_order_cases(np.random.default_rng(0)))


def _torch_hvp(f, arrays, tangents):
    """H v by torch.func: the tangent of the gradient (forward over reverse)."""
    args = tuple(range(len(arrays)))
    grad = torch.func.grad(lambda *xs: f(TORCH, *xs), argnums=args)
    _, hv = torch.func.jvp(grad, tuple(torch.tensor(a) for a in arrays), tuple(torch.tensor(v) for v in tangents))
    return [_np(h) for h in hv]


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_reverse_over_forward_matches_torch(rng, name):
    """The gradient of the tangent <∇f, v> (reverse mode over forward mode) is H v."""
    f, arrays = _second_order_cases(rng)[name]
    tangents = [some(rng, a.shape) for a in arrays]
    with fw.dual_level():
        leaves = [mt.tensor(a, requires_grad=True) for a in arrays]
        out = f(MT, *(fw.make_dual(x, mt.tensor(v)) for x, v in zip(leaves, tangents)))
        # layer_norm's bias adds to the loss linearly: the tangent does not depend on it (None: a zero gradient)
        grads = mt.autograd.grad(fw.unpack_dual(out).tangent, leaves, allow_unused=True)
    for i, (g, h) in enumerate(zip(grads, _torch_hvp(f, arrays, tangents))):
        got = np.zeros_like(arrays[i]) if g is None else g.numpy()
        assert_close(got, h, OP_RTOL["float64"], f"{name}: d<grad, v>/d input {i}")


@pytest.mark.parametrize("walk", ["create_graph", "tangent_grad"])
@pytest.mark.parametrize("name", SECOND_ORDER)
def test_forward_over_reverse_matches_torch(rng, name, walk):
    """The tangent of a gradient taken on Tensors (forward mode over reverse mode) is H v: recorded (create_graph),
    and unrecorded (tangent_grad, where a backward may give its intermediates their tangents by formula)."""
    f, arrays = _second_order_cases(rng)[name]
    tangents = [some(rng, a.shape) for a in arrays]
    with fw.dual_level():
        duals = [fw.make_dual(mt.tensor(a, requires_grad=True), mt.tensor(v)) for a, v in zip(arrays, tangents)]
        out = f(MT, *duals)
        grads = (
            mt.autograd.grad(out, duals, create_graph=True)
            if walk == "create_graph"
            else (mt.autograd.tangent_grad(out, duals))
        )
        tangents_of_grads = [fw.unpack_dual(g).tangent for g in grads]  # None: the gradient is a constant
        hv = [np.zeros_like(a) if h is None else _np(h) for a, h in zip(arrays, tangents_of_grads)]
    for i, (got, want) in enumerate(zip(hv, _torch_hvp(f, arrays, tangents))):
        assert_close(got, want, OP_RTOL["float64"], f"{name}: tangent of the gradient of input {i}")


# ----------------------------------------------------------------------------- the whole Transformer
def _tiny_model(dropout: float, variant: dict) -> Transformer:
    return Transformer(
        src_vocab_size=11,
        tgt_vocab_size=13,
        d_model=16,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=32,
        dropout=dropout,
        max_len=20,
        **variant,
    )


def _with_tangents(model, direction: dict):
    """Swap each parameter for a dual view carrying its direction (as torch.func.functional_call swaps parameters);
    returns the swaps (module, name, parameter, full name), for _restore."""
    swaps = []
    for module_name, module in model.named_modules():
        for name, p in list(module._parameters.items()):
            full = f"{module_name}.{name}" if module_name else name
            if p is not None and full in direction:
                swaps.append((module, name, p, full))
                module._parameters[name] = fw.make_dual(p, mt.tensor(direction[full]))
    return swaps


def _restore(swaps) -> None:
    for module, name, p, _ in swaps:
        module._parameters[name] = p


VARIANTS = [
    dict(norm_first=False, final_norm=False, positional="sinusoidal", activation="relu"),
    dict(norm_first=True, final_norm=True, positional="learned", activation="gelu"),
]


@pytest.mark.parametrize("dropout", [0.0, 0.1], ids=["no_dropout", "dropout"])
@pytest.mark.parametrize("variant", VARIANTS, ids=["post_norm_relu", "pre_norm_gelu"])
def test_transformer_directional_derivative_equals_gradient_dot_direction(rng, float64_default, dropout, variant):
    """d/dε loss(θ + ε v) by one forward-mode pass equals <∇loss(θ), v> by one backward, to round-off: every rule on
    the model's path (embedding, attention, layer norm, the feed-forward, dropout's masks, label-smoothed cross
    entropy with PAD rows ignored) agrees with every backward. Dropout draws the same masks in both passes
    (the engine's generator reseeded)."""
    mt.manual_seed(0)
    model = _tiny_model(dropout, variant)
    src = rng.integers(1, 11, size=(3, 7))
    tgt = rng.integers(1, 13, size=(3, 6))
    src[1, 5:] = 0
    tgt[2, 4:] = 0  # PAD rows: ignored by the loss
    params = dict(model.named_parameters())
    direction = {name: rng.standard_normal(p.shape) for name, p in params.items()}

    mt.manual_seed(1)
    loss, _, _ = compute_loss(model, src, tgt, label_smoothing=0.1)
    grads = mt.autograd.grad(loss, list(params.values()))
    dot = sum(float((g.numpy() * direction[name]).sum()) for name, g in zip(params, grads))

    mt.manual_seed(1)
    with mt.no_grad(), fw.dual_level():  # forward mode alone: no reverse graph is recorded
        swaps = _with_tangents(model, direction)
        try:
            loss_f, _, _ = compute_loss(model, src, tgt, label_smoothing=0.1)
            value, tangent = (float(a) for a in map(_np, fw.unpack_dual(loss_f)))
        finally:
            _restore(swaps)
    assert value == float(loss.detach().numpy())  # the same masks, the same loss
    assert_close(tangent, dot, OP_RTOL["float64"], "the loss's directional derivative against <grad, v>")


@pytest.mark.parametrize("dropout", [0.0, 0.1], ids=["no_dropout", "dropout"])
@pytest.mark.parametrize("variant", VARIANTS, ids=["post_norm_relu", "pre_norm_gelu"])
def test_transformer_hessian_vector_product_forward_over_reverse_equals_double_backward(
    rng, float64_default, dropout, variant
):
    """H v two ways on the whole model: the tangent of the create_graph gradient (forward over reverse: every
    backward's own primitives carry tangents) and the gradient of <∇L, v> (double backward), to round-off."""
    mt.manual_seed(0)
    model = _tiny_model(dropout, variant)
    src = rng.integers(1, 11, size=(3, 7))
    tgt = rng.integers(1, 13, size=(3, 6))
    src[1, 5:] = 0
    tgt[2, 4:] = 0
    params = dict(model.named_parameters())
    direction = {name: rng.standard_normal(p.shape) for name, p in params.items()}

    mt.manual_seed(1)
    loss, _, _ = compute_loss(model, src, tgt, label_smoothing=0.1)
    grads = mt.autograd.grad(loss, list(params.values()), create_graph=True)
    dot = sum((g * mt.tensor(direction[name])).sum() for name, g in zip(params, grads))
    double_backward = dict(zip(params, mt.autograd.grad(dot, list(params.values()))))

    mt.manual_seed(1)
    with fw.dual_level():
        swaps = _with_tangents(model, direction)
        try:
            loss, _, _ = compute_loss(model, src, tgt, label_smoothing=0.1)
            grads = mt.autograd.grad(loss, [p for _, _, p, _ in swaps], create_graph=True)
            tangents = {full: fw.unpack_dual(g).tangent for (_, _, _, full), g in zip(swaps, grads)}
        finally:
            _restore(swaps)
    assert set(tangents) == set(params)
    for name, hv in double_backward.items():
        got = np.zeros(hv.shape) if tangents[name] is None else _np(tangents[name])
        assert_close(
            got, hv.numpy(), OP_RTOL["float64"], f"H v of {name}, forward over reverse against double backward"
        )
