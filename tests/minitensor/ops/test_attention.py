"""F.scaled_dot_product_attention, the tiled (FlashAttention-2) primitive of ops/attention.py, against torch's SDPA.

Forward and the gradients of query, key and value under a random upstream gradient, in float64 (OP_RTOL: 1e-10)
and float32, with a small tile (BLOCK = 16) so that sizes that do and do not divide the tile both cross tiles;
causal, key-padding, additive and broadcast masks; rows with no key; dropout (same mask forward and backward,
the right rate); bad input; and the O(T) memory claim, measured by tracemalloc at T = 2048.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import torch

import minitensor as mt
import minitensor.nn.functional as F
from minitensor.autograd import forward_ad as fw
from minitensor.ops import attention
from minitensor.testing import OP_RTOL, assert_close


@pytest.fixture
def small_tiles(monkeypatch):
    monkeypatch.setattr(attention, "BLOCK", 16)


def _pair(shape, rng, dtype):
    a = rng.standard_normal(shape).astype(dtype)
    return mt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def check_against_torch(q_shape, k_shape, v_shape, dtype="float64", mask=None, seed=0, **kwargs):
    """Ours and torch's SDPA on the same inputs: output and the three input gradients, random upstream gradient."""
    rng = np.random.default_rng(seed)
    (q, tq), (k, tk), (v, tv) = (_pair(s, rng, dtype) for s in (q_shape, k_shape, v_shape))
    m_t = None if mask is None else torch.tensor(mask)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs)
    ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=m_t, **kwargs)
    assert out.shape == tuple(ref.shape)
    assert_close(out.detach().numpy(), ref.detach().numpy(), OP_RTOL[dtype], what="output")
    g = rng.standard_normal(out.shape).astype(dtype)
    out.backward(mt.tensor(g))
    ref.backward(torch.tensor(g))
    for name, ours, theirs in (("query", q, tq), ("key", k, tk), ("value", v, tv)):
        assert ours.grad.shape == ours.shape
        assert_close(ours.grad.numpy(), theirs.grad.numpy(), OP_RTOL[dtype], what=f"grad of {name}")
    return out, (q, k, v)


SIZES = [(32, 48), (37, 45), (5, 70)]  # (T_q, T_k): dividing the tile of 16, not dividing it, a short query block


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("t_q, t_k", SIZES)
def test_no_mask(small_tiles, dtype, t_q, t_k):
    check_against_torch((2, 3, t_q, 8), (2, 3, t_k, 8), (2, 3, t_k, 5), dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("t_q, t_k", SIZES + [(40, 40)])
def test_causal(small_tiles, dtype, t_q, t_k):
    """torch's is_causal: query i sees keys j <= i, aligned top-left when T_q != T_k."""
    check_against_torch((2, 2, t_q, 8), (2, 2, t_k, 8), (2, 2, t_k, 8), dtype, is_causal=True)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("t_q, t_k", SIZES)
def test_key_padding_mask(small_tiles, dtype, t_q, t_k):
    """A (B, 1, 1, T_k) bool mask, True = takes part, broadcast over heads and queries."""
    keep = np.ones((2, 1, 1, t_k), dtype=bool)
    keep[1, ..., t_k // 3 :] = False
    check_against_torch((2, 3, t_q, 8), (2, 3, t_k, 8), (2, 3, t_k, 8), dtype, mask=keep)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_additive_float_mask_with_minus_inf(small_tiles, dtype):
    rng = np.random.default_rng(3)
    add = rng.standard_normal((37, 45)).astype(dtype)
    add[rng.random((37, 45)) < 0.2] = -np.inf
    check_against_torch((2, 3, 37, 8), (2, 3, 45, 8), (2, 3, 45, 8), dtype, mask=add, scale=0.2)


def test_broadcast_batch_and_mask(small_tiles):
    """Batch dimensions of query, key, value and the mask broadcast; each gradient sums back to its input's shape."""
    keep = np.random.default_rng(4).random((3, 37, 45)) < 0.8
    check_against_torch((2, 3, 37, 8), (1, 3, 45, 8), (2, 1, 45, 6), mask=keep)


def test_rows_with_no_key_give_zero_as_torch(small_tiles):
    """torch 2.13 on CPU (math, flash and default backends alike) gives a fully masked query row a zero output and
    zero gradients; so do we (no NaN), with a bool mask and with a float mask of -inf."""
    keep = np.ones((1, 1, 37, 45), dtype=bool)
    keep[..., [0, 17, 36], :] = False
    out, (q, _, _) = check_against_torch((2, 2, 37, 8), (2, 2, 45, 8), (2, 2, 45, 8), mask=keep)
    assert not out.detach().numpy()[..., [0, 17, 36], :].any() and not q.grad.numpy()[..., [0, 17, 36], :].any()
    add = np.where(keep, 0.0, -np.inf)
    check_against_torch((2, 2, 37, 8), (2, 2, 45, 8), (2, 2, 45, 8), mask=add)


def test_tile_size_changes_only_round_off():
    """The online softmax over tiles is the softmax: one tile and many agree to round-off."""
    rng = np.random.default_rng(5)
    q, k, v = (mt.tensor(rng.standard_normal((2, 50, 8))) for _ in range(3))
    one = mt.ops.ScaledDotProductAttention.apply(q, k, v, scale=0.3, block_size=64).numpy()
    many = mt.ops.ScaledDotProductAttention.apply(q, k, v, scale=0.3, block_size=7).numpy()
    assert_close(many, one, OP_RTOL["float64"])


# ----------------------------------------------------------------------------- dropout


def _full_keep(seed, shape, p):
    """The whole (..., T_q, T_k) keep mask the kernel draws tile by tile (what it never stores)."""
    return attention.dropout_keep(seed, np.arange(np.prod(shape)).reshape(shape), p)


def test_dropout_forward_and_backward_use_one_mask(small_tiles):
    """With dropout, the output and all three gradients equal torch's dense attention driven by the mask that the
    counters give: the forward and the backward regenerated the same mask, tile by tile."""
    p, rng = 0.3, np.random.default_rng(6)
    (q, tq), (k, tk), (v, tv) = (_pair(s, rng, "float64") for s in ((2, 3, 37, 8), (2, 3, 45, 8), (2, 3, 45, 8)))
    state = mt.random.get_rng_state()
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=p)
    mt.random.set_rng_state(state)
    seed = int(mt.random.generator().bit_generator.random_raw())  # the one draw the call made
    keep = torch.tensor(_full_keep(seed, (2, 3, 37, 45), p))
    ref = ((tq @ tk.transpose(-1, -2)) / np.sqrt(8)).softmax(-1) * keep / (1 - p) @ tv
    assert_close(out.detach().numpy(), ref.detach().numpy(), OP_RTOL["float64"], what="output")
    g = rng.standard_normal(out.shape)
    out.backward(mt.tensor(g))
    ref.backward(torch.tensor(g))
    for ours, theirs in ((q, tq), (k, tk), (v, tv)):
        assert_close(ours.grad.numpy(), theirs.grad.numpy(), OP_RTOL["float64"])


def test_dropout_rate_and_independence_of_the_tiling():
    p = 0.3
    keep = _full_keep(12345, (4, 512, 512), p)
    rate = 1 - keep.mean()
    assert abs(rate - p) < 5 * np.sqrt(p * (1 - p) / keep.size), rate  # 5 sigma
    assert abs(keep[:, :, :-1].astype(float) - keep[:, :, 1:]).mean() == pytest.approx(2 * p * (1 - p), abs=0.01)
    rng = np.random.default_rng(7)
    q, k, v = (mt.tensor(rng.standard_normal((2, 50, 8))) for _ in range(3))
    kw = dict(scale=0.3, dropout_p=p, seed=99)
    a = mt.ops.ScaledDotProductAttention.apply(q, k, v, block_size=64, **kw).numpy()
    b = mt.ops.ScaledDotProductAttention.apply(q, k, v, block_size=7, **kw).numpy()
    assert_close(b, a, OP_RTOL["float64"])  # the mask is a function of the entry, not of the tile


def test_dropout_draws_once_from_the_engine_generator():
    q = mt.randn(1, 4, 4)
    mt.manual_seed(1)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy()
    after = mt.random.generator().bit_generator.random_raw()
    mt.manual_seed(1)
    b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy()
    assert np.array_equal(a, b) and mt.random.generator().bit_generator.random_raw() == after


# ----------------------------------------------------------------------------- what it refuses


@pytest.mark.parametrize(
    "shapes, kwargs, match",
    [
        (((2, 3, 8), (2, 5, 6), (2, 5, 8)), {}, r"query \(\.\.\., T_q, E\), key"),  # head dims differ
        (((2, 3, 8), (2, 5, 8), (2, 4, 8)), {}, r"key \(\.\.\., T_k, E\), value \(\.\.\., T_k, Ev\)"),
        (((2, 3, 8), (3, 5, 8), (3, 5, 8)), {}, r"batch dimensions .* do not broadcast"),
        (((2, 3, 8), (2, 5, 8), (2, 5, 8)), {"attn_mask": np.ones((4, 5), bool)}, r"attn_mask of shape \(4, 5\)"),
        (((2, 3, 8), (2, 5, 8), (2, 5, 8)), {"dropout_p": -0.1}, r"dropout_p must be in \[0, 1\), got -0.1"),
        (((2, 3, 8), (2, 5, 8), (2, 5, 8)), {"dropout_p": 1.0}, r"dropout_p must be in \[0, 1\), got 1.0"),
        (
            ((2, 3, 8), (2, 5, 8), (2, 5, 8)),
            {"attn_mask": np.ones((3, 5), bool), "is_causal": True},
            "not both",
        ),
    ],
)
def test_bad_input(shapes, kwargs, match):
    q, k, v = (mt.randn(*s) for s in shapes)
    with pytest.raises(ValueError, match=match):
        F.scaled_dot_product_attention(q, k, v, **kwargs)


def test_bad_dtypes():
    q = mt.randn(2, 3, 4)
    with pytest.raises(TypeError, match="one dtype"):
        F.scaled_dot_product_attention(q, q.to(mt.float64), q)
    with pytest.raises(TypeError, match="attn_mask must be bool or of query's dtype"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=np.zeros((3, 3), np.int64))


def test_second_derivative_is_refused():
    q = mt.randn(1, 4, 4, requires_grad=True)
    out = F.scaled_dot_product_attention(q, q, q).sum()
    with pytest.raises(RuntimeError, match="differentiable once only; create_graph=True"):
        mt.autograd.grad(out, q, create_graph=True)


# ----------------------------------------------------------------------------- O(T) memory


def _traced_peak(fn) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_tiled_peak_stays_below_one_score_matrix_at_t_2048():
    """tracemalloc counts NumPy's buffers: a forward and backward of causal attention at T = 2048 (one head,
    float64) must peak below one (T, T) score matrix, 32 MiB; the dense path, run the same way, does not."""
    t, e = 2048, 32
    rng = np.random.default_rng(8)
    q, k, v = (mt.tensor(rng.standard_normal((1, 1, t, e)), requires_grad=True) for _ in range(3))
    g = mt.tensor(rng.standard_normal((1, 1, t, e)))
    score_matrix = t * t * 8

    def tiled():
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)

    def dense():
        keep = np.tril(np.ones((t, t), bool))
        (F.attention_weights(q, k, keep) @ v).backward(g)

    tiled_peak = _traced_peak(tiled)
    assert tiled_peak < score_matrix, f"tiled peak {tiled_peak / 2**20:.1f} MiB"
    assert _traced_peak(dense) > score_matrix  # the measure sees a score matrix when there is one


def test_saved_tensor_hooks_and_the_listing_see_what_the_kernel_keeps():
    """q, k, v, the output, the row logsumexp (O(T)) and the mask: no (T_q, T_k) array; packed and unpacked by the
    hooks, the gradients are bitwise those of the plain run (dropout on: the counters are replayed)."""
    q = mt.randn(1, 2, 300, 16, requires_grad=True)
    keep = np.ones((1, 1, 1, 300), bool)
    listing = str(mt.autograd.graph.saved_tensors(F.scaled_dot_product_attention(q, q, q, attn_mask=keep).sum()))
    assert "lse" in listing and "(1, 2, 300, 1)" in listing and "(1, 1, 1, 300)" in listing
    assert "300, 300" not in listing

    def grad_of_q():
        mt.manual_seed(3)
        out = F.scaled_dot_product_attention(q, q, q, attn_mask=keep, dropout_p=0.2)
        out.backward(mt.ones_like(out))
        g, q.grad = q.grad.numpy().copy(), None
        return g

    plain, packed = grad_of_q(), []
    with mt.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t.shape) or t.clone(), lambda t: t):
        hooked = grad_of_q()
    assert np.array_equal(plain, hooked) and (1, 2, 300, 1) in packed


# ----------------------------------------------------------------------------- forward mode


def _dense_torch(q, k, v, mask, is_causal):
    """softmax(q k^T / sqrt(E) + mask) v written out in torch, for torch.func.jvp (rows with no key give 0)."""
    s = q @ k.transpose(-1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        m = torch.tensor(mask)
        s = s.masked_fill(~m, -np.inf) if m.dtype == torch.bool else s + m
    if is_causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), -np.inf)
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kind", ["none", "causal", "padding", "additive"])
def test_forward_mode_against_torch(small_tiles, dtype, kind):
    """The tiled JVP (ȯ = (P Ṡ Z) v + (P Z) v̇ - rowsum(P Ṡ) out, per tile) against torch.func.jvp of the dense
    composite, random tangents for q, k and v, tiles that do not divide T."""
    rng = np.random.default_rng(5)
    t_q, t_k = (37, 37) if kind == "causal" else (37, 45)
    arrays = [rng.standard_normal(s).astype(dtype) for s in ((2, 2, t_q, 8), (2, 2, t_k, 8), (2, 2, t_k, 6))]
    tangents = [rng.standard_normal(a.shape).astype(dtype) for a in arrays]
    mask = None
    if kind == "padding":
        mask = np.ones((2, 1, 1, t_k), bool)
        mask[0, ..., -7:] = False
    elif kind == "additive":
        mask = rng.standard_normal((t_q, t_k)).astype(dtype)
    with fw.dual_level():
        duals = [fw.make_dual(mt.tensor(a), mt.tensor(t)) for a, t in zip(arrays, tangents)]
        out = F.scaled_dot_product_attention(
            *duals, attn_mask=None if mask is None else mt.tensor(mask), is_causal=kind == "causal"
        )
        primal, tangent = fw.unpack_dual(out)
    ref, ref_t = torch.func.jvp(
        lambda q, k, v: _dense_torch(q, k, v, mask, kind == "causal"),
        tuple(torch.tensor(a) for a in arrays),
        tuple(torch.tensor(t) for t in tangents),
    )
    assert_close(primal.numpy(), ref.numpy(), OP_RTOL[dtype], what="primal")
    assert_close(tangent.numpy(), ref_t.numpy(), OP_RTOL[dtype], what="tangent")


def test_forward_mode_with_dropout_is_the_reverse_modes_transpose(small_tiles):
    """With dropout the same regenerated mask serves the forward, the backward and the JVP: u . (J v) = (J^T u) . v."""
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal((1, 2, 33, 8)) for _ in range(3)]
    tangents = [rng.standard_normal(a.shape) for a in arrays]
    u = rng.standard_normal((1, 2, 33, 8))
    mt.manual_seed(11)
    with fw.dual_level():
        duals = [fw.make_dual(mt.tensor(a), mt.tensor(t)) for a, t in zip(arrays, tangents)]
        jv = fw.unpack_dual(F.scaled_dot_product_attention(*duals, dropout_p=0.3)).tangent.numpy()
    mt.manual_seed(11)
    leaves = [mt.tensor(a, requires_grad=True) for a in arrays]
    F.scaled_dot_product_attention(*leaves, dropout_p=0.3).backward(mt.tensor(u))
    jtu_v = sum(float((x.grad.numpy() * t).sum()) for x, t in zip(leaves, tangents))
    assert abs(float((u * jv).sum()) - jtu_v) <= 1e-10 * max(1.0, abs(jtu_v))


def test_forward_mode_tangent_refuses_reverse_mode():
    """The tangent is computed by NumPy tile loops: a gradient through it raises instead of reading as zero."""
    q = mt.randn(1, 1, 5, 4, dtype=mt.float64, requires_grad=True)
    with fw.dual_level():
        qd = fw.make_dual(q, mt.randn(1, 1, 5, 4, dtype=mt.float64))
        tangent = fw.unpack_dual(F.scaled_dot_product_attention(qd, qd, qd)).tangent
        with pytest.raises(RuntimeError, match="differentiable no further"):
            tangent.sum().backward()


BIAS_SHAPES = [(37, 45), (1, 2, 37, 45), (2, 1, 37, 45), (2, 2, 37, 45)]  # broadcast over batch and heads, or not


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("bias_shape", BIAS_SHAPES)
def test_a_learned_bias_gets_torchs_gradient(small_tiles, dtype, bias_shape):
    """A float attn_mask that requires grad (relative positions, ALiBi) is differentiated across tiles, summed back
    over the axes it was broadcast along; some of its entries -inf (those keys get no weight and no gradient)."""
    rng = np.random.default_rng(7)
    (q, tq), (k, tk), (v, tv) = (_pair(s, rng, dtype) for s in ((2, 2, 37, 8), (2, 2, 45, 8), (2, 2, 45, 6)))
    b0 = rng.standard_normal(bias_shape).astype(dtype)
    b0[..., 3, 5:9] = -np.inf
    b, tb = mt.tensor(b0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=b)
    ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tb)
    assert out.requires_grad
    g = rng.standard_normal(out.shape).astype(dtype)
    out.backward(mt.tensor(g))
    ref.backward(torch.tensor(g))
    assert b.grad is not None and b.grad.shape == b.shape
    for name, ours, theirs in (("query", q, tq), ("key", k, tk), ("value", v, tv), ("bias", b, tb)):
        assert_close(ours.grad.numpy(), theirs.grad.numpy(), OP_RTOL[dtype], what=f"grad of {name}")


def test_a_bias_alone_requiring_grad_gets_its_gradient(small_tiles):
    """Only the bias requires grad (frozen q, k, v): the output still requires grad, and only the bias's
    gradient is made."""
    rng = np.random.default_rng(8)
    q, k, v = (mt.tensor(rng.standard_normal(s)) for s in ((1, 2, 20, 4), (1, 2, 20, 4), (1, 2, 20, 4)))
    b = mt.tensor(rng.standard_normal((20, 20)), requires_grad=True)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=b)
    assert out.requires_grad
    out.sum().backward()
    tb = torch.tensor(b.detach().numpy(), requires_grad=True)
    torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(x.numpy()) for x in (q, k, v)), attn_mask=tb
    ).sum().backward()
    assert_close(b.grad.numpy(), tb.grad.numpy(), OP_RTOL["float64"], what="grad of bias")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_bias_tangent_in_forward_mode_against_torch(small_tiles, dtype):
    rng = np.random.default_rng(9)
    arrays = [
        rng.standard_normal(s).astype(dtype) for s in ((2, 2, 37, 8), (2, 2, 45, 8), (2, 2, 45, 6), (2, 1, 37, 45))
    ]
    arrays[3][..., 2, :4] = -np.inf
    tangents = [rng.standard_normal(a.shape).astype(dtype) for a in arrays]
    with fw.dual_level():
        duals = [fw.make_dual(mt.tensor(a), mt.tensor(t)) for a, t in zip(arrays, tangents)]
        tangent = fw.unpack_dual(F.scaled_dot_product_attention(*duals[:3], attn_mask=duals[3])).tangent
    with torch.autograd.forward_ad.dual_level():
        duals = [
            torch.autograd.forward_ad.make_dual(torch.tensor(a), torch.tensor(t)) for a, t in zip(arrays, tangents)
        ]
        ref = torch.autograd.forward_ad.unpack_dual(
            torch.nn.functional.scaled_dot_product_attention(*duals[:3], attn_mask=duals[3])
        ).tangent
    assert_close(tangent.numpy(), ref.numpy(), OP_RTOL[dtype], what="tangent")


def test_a_bias_second_derivative_is_refused_as_the_kernels():
    b = mt.randn(5, 5, dtype=mt.float64, requires_grad=True)
    q = mt.randn(1, 5, 4, dtype=mt.float64)
    (g,) = mt.autograd.grad(F.scaled_dot_product_attention(q, q, q, attn_mask=b).sum(), [b], create_graph=False)
    assert g.shape == b.shape
    with pytest.raises(RuntimeError, match="differentiable once only"):
        mt.autograd.grad(F.scaled_dot_product_attention(q, q, q, attn_mask=b).sum(), [b], create_graph=True)
