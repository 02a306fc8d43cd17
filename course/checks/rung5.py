"""Rung 5's checks: attention against parity.model.scaled_dot_product_attention (no mask, a padding mask, a
causal mask; output, weights and the gradients of q, k, v, in float64), then multi-head attention (self and
cross) and the feed-forward block against parity.model's twins, weights copied in by name."""

from __future__ import annotations

import numpy as np
import torch

import minitensor as mt
import parity.model as pm

from ..runner import Exercise
from .common import CheckFailed, case, compare, expect_array, rng
from .modules import RTOL, compare_module, float64

B, H, T, S, Dh, D = 2, 2, 4, 5, 3, 8


def _masks(t_q: int, t_k: int) -> list:
    """(name, bool array) pairs: none, padding (row 1's last two keys), causal; every query keeps a key."""
    pad = np.ones((B, 1, 1, t_k), dtype=bool)
    pad[1, ..., -2:] = False
    out = [("no mask", None), ("a padding mask", pad)]
    if t_q == t_k:
        out.append(("a causal mask", np.tril(np.ones((t_q, t_k), dtype=bool))[None, None]))
    return out


def _check_attention(mod):
    r = rng(4)
    for t_q, t_k in ((T, T), (T, S)):
        q, k, v = (r.standard_normal((B, H, n, Dh)) for n in (t_q, t_k, t_k))
        for what, mask in _masks(t_q, t_k):
            where = f"scaled_dot_product_attention with q {q.shape}, k {k.shape}, {what}"
            with case(where):
                xs = [mt.tensor(a, requires_grad=True) for a in (q, k, v)]
                ts = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
                got = mod.scaled_dot_product_attention(*xs, None if mask is None else mt.tensor(mask))
                want = pm.scaled_dot_product_attention(*ts, None if mask is None else torch.tensor(mask))
                if not isinstance(got, tuple) or len(got) != 2:
                    raise CheckFailed(f"{where}: expected a pair (output, weights), got {type(got).__name__}")
                for name, ours, ref in zip(("output", "weights"), got, want):
                    expect_array(f"{where}: {name}", ours, tuple(ref.shape), np.float64)
                w = got[1].detach().numpy()
                if mask is not None and np.abs(w[~np.broadcast_to(mask, w.shape)]).max() != 0.0:
                    raise CheckFailed(f"{where}: weights: a masked key must get exactly zero weight")
                sums = w.sum(axis=-1)
                worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(np.abs(sums - 1))), sums.shape))
                if not abs(sums[worst] - 1) <= 1e-12:  # written so that a NaN row fails too
                    raise CheckFailed(
                        f"{where}: weights: the row at {worst} sums to {float(sums[worst])!r}, not 1; the softmax must "
                        f"come after the mask (masked scores set to -inf, then softmax), not before"
                    )
                for name, ours, ref in zip(("weights", "output"), got[::-1], want[::-1]):
                    compare(f"{where}: {name}", ours, ref, RTOL, "parity/'s torch twin")
                G1, G2 = r.standard_normal(tuple(want[0].shape)), r.standard_normal(tuple(want[1].shape))
                ((got[0] * mt.tensor(G1)).sum() + (got[1] * mt.tensor(G2)).sum()).backward()
                ((want[0] * torch.tensor(G1)).sum() + (want[1] * torch.tensor(G2)).sum()).backward()
                for name, x, t in zip("qkv", xs, ts):
                    if x.grad is None:
                        raise CheckFailed(f"{where}: no gradient reached {name}")
                    compare(f"{where}: gradient of {name}", x.grad, t.grad, RTOL, "parity/'s torch twin")


def _check_mha(mod):
    r = rng(6)
    for t_k, what in ((T, "self-attention"), (S, "cross-attention")):
        for mask_name, mask in _masks(T, t_k):
            with float64():
                mt.manual_seed(0)
                ours, twin = mod.MultiHeadAttention(D, H), pm.MultiHeadAttention(D, H, dropout=0.0)
            x, mem = r.standard_normal((B, T, D)), r.standard_normal((B, t_k, D))
            m = () if mask is None else ((mt.tensor(mask), torch.tensor(mask)),)
            compare_module(
                f"MultiHeadAttention({D}, {H}), {what}, {mask_name}",
                ours,
                twin,
                [x, mem],
                call=lambda mdl, q, kv, *mk: mdl(q, kv, kv, *mk),
                constants=m,
            )


def _check_ffn(mod):
    with float64():
        mt.manual_seed(0)
        ours, twin = mod.PositionwiseFeedForward(D, 16), pm.PositionwiseFeedForward(D, 16, "relu", dropout=0.0)
    compare_module(f"PositionwiseFeedForward({D}, 16)", ours, twin, [rng(7).standard_normal((B, T, D))])


EXERCISES = [
    Exercise("5.1", "scaled_dot_product_attention", _check_attention),
    Exercise("5.2", "MultiHeadAttention.forward", _check_mha, needs=("5.1",)),
    Exercise("5.3", "PositionwiseFeedForward.forward", _check_ffn),
]
