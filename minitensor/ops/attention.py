"""Scaled dot-product attention as one primitive in O(T) memory: FlashAttention-2's tiled algorithm.

    out = softmax(q k^T * scale + mask) v         (masked keys get -inf; optional dropout on the probabilities)

The forward walks blocks of queries against blocks of keys with an online softmax: per query row a running
maximum m and sum l of exp(s - m), and an output accumulator rescaled by exp(m_old - m_new) whenever the
maximum grows. It keeps only the output O and the row log-sum-exp L = m + log l. The backward recomputes each
tile's probabilities P = exp(S - L) from L and uses D = rowsum(dO * O) for the softmax term:

    dV += P^T dO,   dP = dO V^T,   dS = P * (dP - D),   dQ += dS K * scale,   dK += dS^T Q * scale

No (T_q, T_k) array is ever held: a tile is (..., block, block). The derivation is in docs/backprop.md
("Tiled attention"); nn.functional.scaled_dot_product_attention validates the arguments and calls it.

Dropout cannot store its (T_q, T_k) mask here. Its keep mask is a counter-based draw instead: entry (b, i, j)
is kept when a hash of (seed, its flat index) clears the threshold (`dropout_keep`), so the backward regenerates
each tile's mask exactly, whatever the tiling. The seed is one draw of the engine's generator.
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd import Function, is_grad_enabled
from ..devices import array_module
from .reductions import opmath_dtype

BLOCK = 128  # queries and keys per tile: a float64 tile of one head is 128 KiB


def blocks(n: int, size: int) -> list[tuple[int, int]]:
    """[(start, stop)] covering range(n) in pieces of `size` (the last one shorter)."""
    return [(i, min(i + size, n)) for i in range(0, n, size)]


# ----------------------------------------------------------------------------- dropout from a counter


_GOLDEN, _MIX1, _MIX2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def dropout_keep(seed: int, index: np.ndarray, p: float) -> np.ndarray:
    """keep[...] = True with probability 1 - p, a pure function of (seed, index): SplitMix64 of the counter
    seed + index * golden gives a 64-bit uniform u; the entry is kept when its top 32 bits are >= round(p 2^32),
    the threshold F.dropout uses. (FlashAttention uses Philox for the same purpose; any counter-based
    generator works, since the backward asks for the same counters again.) On a device the hash runs there, on a
    device `index`: integer arithmetic, so the mask is bitwise the host's, from the seed drawn on the host stream."""
    z = np.uint64(seed) + index.astype(np.uint64) * _GOLDEN  # wraps modulo 2^64, as intended
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    z ^= z >> np.uint64(31)
    return (z >> np.uint64(32)) >= np.uint64(round(p * 2**32))


# ----------------------------------------------------------------------------- one tile of scores


class ScoreTiles:
    """What the forward and the backward both need to (re)compute one tile of scores S = q k^T * scale + mask,
    its causal and mask exclusions, and its dropout mask. q, k, mask are broadcast to the common batch shape
    as views (no copy); a tile is sliced from them, so only the tile itself is ever materialised."""

    def __init__(self, q, k, v_batch, mask, is_causal, scale, dropout_p, seed):
        ct = opmath_dtype(q.dtype)  # float16 computes in float32 (rounded once at the end)
        self.batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v_batch, () if mask is None else mask.shape[:-2])
        self.t_q, self.t_k = q.shape[-2], k.shape[-2]
        self.q = np.broadcast_to(q.astype(ct, copy=False), self.batch + q.shape[-2:])
        self.k = np.broadcast_to(k.astype(ct, copy=False), self.batch + k.shape[-2:])
        self.qs = self.q * ct.type(scale)  # scaling q (T_q * E numbers) is cheaper than scaling every score
        self.mask = None if mask is None else np.broadcast_to(mask, self.batch + (self.t_q, self.t_k))  # a view
        self.is_causal, self.scale, self.dropout_p, self.seed = is_causal, scale, dropout_p, seed
        self.xp = array_module(q)  # where the tiles' index arrays are made: q's device
        self.keep_scale = ct.type(1.0 / (1.0 - dropout_p))  # Z / (1 - p): the kept entries' scale

    def skipped(self, i0: int, i1: int, j0: int) -> bool:
        """Causal: a tile whose every key comes after its last query holds only masked scores."""
        return self.is_causal and j0 > i1 - 1

    def scores(self, i0: int, i1: int, j0: int, j1: int) -> np.ndarray:
        """S[..., i0:i1, j0:j1] with -inf where a key is excluded (a False bool mask, the causal future)."""
        s = self.qs[..., i0:i1, :] @ np.swapaxes(self.k[..., j0:j1, :], -1, -2)  # (..., Bq, Bk)
        if self.mask is not None:
            tile = self.mask[..., i0:i1, j0:j1]
            if tile.dtype == np.bool_:
                s = np.where(tile, s, -np.inf)
            else:
                s += tile  # an additive float mask (-inf excludes a key)
        if self.is_causal:  # torch's is_causal: query i sees keys j <= i (top-left aligned when T_q != T_k)
            future = self.xp.arange(j0, j1)[None, :] > self.xp.arange(i0, i1)[:, None]
            s = np.where(future, -np.inf, s)
        return s

    def dropout_factor(self, i0: int, i1: int, j0: int, j1: int):
        """Z / (1 - p) for the tile's dropout keep mask Z, regenerated from the counters (1 without dropout)."""
        if self.dropout_p == 0.0:
            return 1
        xp = self.xp
        n = xp.arange(math.prod(self.batch), dtype=np.uint64).reshape(self.batch + (1, 1))
        rows = xp.arange(i0, i1, dtype=np.uint64)[:, None]
        cols = xp.arange(j0, j1, dtype=np.uint64)[None, :]
        index = (n * np.uint64(self.t_q) + rows) * np.uint64(self.t_k) + cols  # flat index in (..., T_q, T_k)
        return dropout_keep(self.seed, index, self.dropout_p) * self.keep_scale


# ----------------------------------------------------------------------------- the three passes over the tiles


def tiled_forward(tiles: ScoreTiles, v, block_size: int):
    """out = softmax(S) (Z / (1 - p)) v and the row log-sum-exp L of S, by an online softmax over key tiles: a running
    row maximum m, a running sum l of exp(s - m) and an accumulator, rescaled by exp(m_old - m_new) when m grows."""
    batch, t_q, t_k = tiles.batch, tiles.t_q, tiles.t_k
    ct, xp = tiles.q.dtype, tiles.xp  # xp: q's array library, so the buffers live on q's device
    v_ = np.broadcast_to(v.astype(ct, copy=False), batch + v.shape[-2:])
    out = xp.empty(batch + (t_q, v.shape[-1]), ct)
    lse = xp.empty(batch + (t_q, 1), ct)
    for i0, i1 in blocks(t_q, block_size):
        m = xp.full(batch + (i1 - i0, 1), -np.inf, ct)  # running row maximum
        l = xp.zeros(batch + (i1 - i0, 1), ct)  # running sum of exp(s - m)
        acc = xp.zeros(batch + (i1 - i0, v.shape[-1]), ct)  # running sum of exp(s - m) (dropped) v
        for j0, j1 in blocks(t_k, block_size):
            if tiles.skipped(i0, i1, j0):
                continue
            s = tiles.scores(i0, i1, j0, j1)
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
            m_safe = np.where(m_new == -np.inf, 0, m_new)  # a row with no key yet: exp(-inf - 0) = 0, not NaN
            p = np.exp(s - m_safe)
            rescale = np.exp(m - m_safe)  # the old terms, relative to the new maximum
            l = l * rescale + p.sum(axis=-1, keepdims=True)
            acc = acc * rescale + (p * tiles.dropout_factor(i0, i1, j0, j1)) @ v_[..., j0:j1, :]
            m = m_new
        empty = l == 0  # no key takes part: out = 0 (torch's choice), and P = exp(S - inf) = 0 in the backward
        out[..., i0:i1, :] = np.where(empty, 0, acc / np.where(empty, 1, l))
        lse[..., i0:i1, :] = np.where(empty, np.inf, m + np.log(np.where(empty, 1, l)))
    return out, lse


def tiled_backward(tiles: ScoreTiles, v, out, lse, g, need_bias: bool, block_size: int):
    """dq, dk, dv (and dbias = dS when need_bias) in the compute dtype, each tile's P = exp(S - L) recomputed:
    dV += (P Z)ᵀ dO,  dP = (dO Vᵀ) Z,  dS = P (dP - D), D = rowsum(dO out),  dQ += dS K scale,  dK += dSᵀ Q scale."""
    batch, ct = tiles.batch, tiles.q.dtype
    sc = ct.type(tiles.scale)
    v_ = np.broadcast_to(v.astype(ct, copy=False), batch + v.shape[-2:])
    g = g.astype(ct, copy=False)
    d = (g * out.astype(ct, copy=False)).sum(axis=-1, keepdims=True)  # D = rowsum(dO * O), (..., T_q, 1)
    dq = tiles.xp.zeros(batch + tiles.q.shape[-2:], ct)  # on q's device
    dk = tiles.xp.zeros(batch + tiles.k.shape[-2:], ct)
    dv = tiles.xp.zeros(batch + v.shape[-2:], ct)
    dbias = tiles.xp.zeros(batch + (tiles.t_q, tiles.t_k), ct) if need_bias else None  # dS itself
    for i0, i1 in blocks(tiles.t_q, block_size):
        g_i, d_i, lse_i = g[..., i0:i1, :], d[..., i0:i1, :], lse[..., i0:i1, :]
        for j0, j1 in blocks(tiles.t_k, block_size):
            if tiles.skipped(i0, i1, j0):
                continue
            p = np.exp(tiles.scores(i0, i1, j0, j1) - lse_i)  # P, recomputed from the saved log-sum-exp
            z = tiles.dropout_factor(i0, i1, j0, j1)  # the forward's dropout mask, drawn again
            dv[..., j0:j1, :] += np.swapaxes(p * z, -1, -2) @ g_i  # dV = (P Z)^T dO
            dp = (g_i @ np.swapaxes(v_[..., j0:j1, :], -1, -2)) * z  # dP = (dO V^T) Z
            ds = p * (dp - d_i)  # dS = P * (dP - D)
            if dbias is not None:
                dbias[..., i0:i1, j0:j1] = ds
            dq[..., i0:i1, :] += (ds @ tiles.k[..., j0:j1, :]) * sc
            dk[..., j0:j1, :] += (np.swapaxes(ds, -1, -2) @ tiles.q[..., i0:i1, :]) * sc
    return dq, dk, dv, dbias


def tiled_tangent(tiles: ScoreTiles, v, out, lse, dq_, dk_, dv_, db_, block_size: int):
    """ȯ = (P Ṡ Z) v + (P Z) v̇ - c out, c = rowsum(P Ṡ), Ṡ = (q̇ kᵀ + q k̇ᵀ) scale + ḃias; the tangents (None where
    absent) come in the compute dtype, broadcast to the batch. Each tile's P from the saved log-sum-exp."""
    batch, ct = tiles.batch, tiles.q.dtype
    sc = ct.type(tiles.scale)
    v_ = np.broadcast_to(v.astype(ct, copy=False), batch + v.shape[-2:])
    acc = tiles.xp.zeros(batch + (tiles.t_q, v.shape[-1]), ct)  # sum over tiles of (P Ṡ Z) v + (P Z) v̇
    c = tiles.xp.zeros(batch + (tiles.t_q, 1), ct)  # rowsum(P * Ṡ)
    for i0, i1 in blocks(tiles.t_q, block_size):
        lse_i = lse[..., i0:i1, :]
        for j0, j1 in blocks(tiles.t_k, block_size):
            if tiles.skipped(i0, i1, j0):
                continue
            p = np.exp(tiles.scores(i0, i1, j0, j1) - lse_i)
            z = tiles.dropout_factor(i0, i1, j0, j1)  # the forward's dropout mask, drawn again
            if dq_ is not None or dk_ is not None or db_ is not None:
                s_dot = 0
                if dq_ is not None:
                    s_dot = s_dot + dq_[..., i0:i1, :] @ np.swapaxes(tiles.k[..., j0:j1, :], -1, -2)
                if dk_ is not None:
                    s_dot = s_dot + tiles.q[..., i0:i1, :] @ np.swapaxes(dk_[..., j0:j1, :], -1, -2)
                s_dot = s_dot * sc
                if db_ is not None:  # the bias's tangent; 0 where a key is excluded, whatever it holds there
                    s_dot = s_dot + np.where(p > 0, db_[..., i0:i1, j0:j1], 0)
                ps = p * s_dot  # P * Ṡ (0 where a key is excluded: P is 0 there)
                c[..., i0:i1, :] += ps.sum(axis=-1, keepdims=True)
                acc[..., i0:i1, :] += (ps * z) @ v_[..., j0:j1, :]
            if dv_ is not None:
                acc[..., i0:i1, :] += (p * z) @ dv_[..., j0:j1, :]
    return acc - c * out.astype(ct, copy=False)


# ----------------------------------------------------------------------------- the primitive


_ONCE_ONLY = (
    "scaled_dot_product_attention: the tiled kernel is differentiable once only; create_graph=True "
    "(a second derivative) is refused. Use dense attention for higher order: "
    "attention_weights(q, k, mask) @ v, the model's attention='dense'"
)


class ScaledDotProductAttention(Function):
    """out = softmax(q kᵀ scale + mask) v, tiled;  dS = P (dP - rowsum(dO out)),  dq = dS k scale,  dk = dSᵀ q scale,
    dv = Pᵀ dO;  ȯ = (P Ṡ) v + P v̇ - rowsum(P Ṡ) out (docs/backprop.md, "Tiled attention": masks, bias, dropout)"""

    max_inputs = 4  # q, k, v, bias; bias optional

    @staticmethod
    def forward(ctx, q, k, v, bias=None, mask=None, is_causal=False, scale=1.0, dropout_p=0.0, seed=0, block_size=None):
        ctx.block_size = block_size or BLOCK  # read at call time, so a test can set a small BLOCK
        mask = bias if bias is not None else mask  # the kernel reads either the same way
        tiles = ScoreTiles(q, k, v.shape[:-2], mask, is_causal, scale, dropout_p, seed)
        out, lse = tiled_forward(tiles, v, ctx.block_size)
        out = out.astype(q.dtype, copy=False)
        ctx.save_for_backward(q, k, v, out)
        ctx.save(lse=lse, mask=mask)  # what the forward made (lse) or was handed (mask): O(T), or the caller's own
        ctx.is_causal, ctx.scale, ctx.dropout_p, ctx.seed = is_causal, scale, dropout_p, seed
        return out

    @staticmethod
    def backward(ctx, g):
        if ctx.create_graph:
            raise RuntimeError(_ONCE_ONLY)
        q, k, v, out = ctx.saved_arrays
        tiles = ScoreTiles(q, k, v.shape[:-2], ctx.mask, ctx.is_causal, ctx.scale, ctx.dropout_p, ctx.seed)
        grads = tiled_backward(tiles, v, out, ctx.lse, g, ctx.needs_input_grad[3], ctx.block_size)
        return tuple(x.astype(q.dtype, copy=False) if need else None for x, need in zip(grads, ctx.needs_input_grad))

    @staticmethod
    def jvp(ctx, tq, tk, tv, tbias=None):
        q_t, k_t, v_t, out_t = ctx.saved_arrays  # Tensors (the rule runs on Tensors): their arrays below
        q, k, v = q_t._data, k_t._data, v_t._data
        tiles = ScoreTiles(q, k, v.shape[:-2], ctx.mask, ctx.is_causal, ctx.scale, ctx.dropout_p, ctx.seed)
        shapes = q.shape[-2:], k.shape[-2:], v.shape[-2:], (tiles.t_q, tiles.t_k)
        tangents = [_spread(tiles, t, shape) for t, shape in zip((tq, tk, tv, tbias), shapes)]
        tangent = tiled_tangent(tiles, v, out_t._data, ctx.lse, *tangents, ctx.block_size).astype(q.dtype, copy=False)
        given = [t for t in (q_t, k_t, v_t, tq, tk, tv, tbias) if t is not None]
        if is_grad_enabled() and any(t.requires_grad for t in given):
            return _TiledTangent.apply(out_t.wrap(tangent), *given)  # a node whose backward refuses
        return out_t.wrap(tangent)


def _spread(tiles, t, shape: tuple):
    """A tangent Tensor as the kernel reads its input: its array in the compute dtype, the batch broadcast."""
    return None if t is None else np.broadcast_to(t._data.astype(tiles.q.dtype, copy=False), tiles.batch + shape)


class _TiledTangent(Function):
    """The tiled kernel's tangent as a node of the reverse graph: its value is computed by NumPy tile loops,
    which record nothing, so a gradient through it (reverse over forward) is refused here rather than read as 0."""

    @staticmethod
    def forward(ctx, tangent, *inputs):
        return tangent

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError(
            "scaled_dot_product_attention: the tiled kernel's forward-mode tangent is differentiable no further "
            "(reverse over forward); use dense attention for that: attention_weights(q, k, mask) @ v"
        )
