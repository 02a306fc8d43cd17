"""`MultiheadAttention`: torch.nn.MultiheadAttention (which torch keeps in torch/nn/modules/activation.py), with its
parameter names, masks and return values, on the engine's fused attention primitives.

    q, k, v = query W_q^T + b_q, key W_k^T + b_k, value W_v^T + b_v         (in_proj_weight / q,k,v_proj_weight)
    per head h: weights_h = softmax(q_h k_h^T / sqrt(Dh) + mask),  out_h = weights_h v_h
    output = concat_h(out_h) W_o^T + b_o                                       (out_proj)

The weights are F.attention_weights (one fused node) when need_weights, else the heads run through
F.scaled_dot_product_attention (the tiled kernel, which never holds the (L, S) scores), as torch switches to its SDPA.
Bool masks mean what they mean in torch's MultiheadAttention: True = this key is NOT attended (the opposite of
scaled_dot_product_attention's); float masks are added to the scores (and differentiated where they require grad).

Deviations, flagged: a query that may attend to no key (every key masked) gets zero weights and a zero attention
output (then out_proj's bias), with zero gradients, where torch's softmax gives NaN; dropout (while training, p > 0)
draws its own masks, so only p = 0 is comparable number for number, and dropout=1 is refused (torch's zeroes every
weight); is_causal is torch's hint that attn_mask is the
causal mask, and the mask given is what is applied (torch may apply its own causal mask instead).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ...functions.shape import cat
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import Linear
from .module import Module
from .utils import check_positive_int, default_float_dtype

__all__ = ["MultiheadAttention"]


class MultiheadAttention(Module):
    """Attention of a query sequence (L) over a key/value sequence (S) with num_heads heads of width
    embed_dim // num_heads. Inputs (L, N, E) and (S, N, kdim), (S, N, vdim), or batch-first (N, L, E) with
    batch_first=True, or unbatched (L, E). Returns (output, weights): output like query; weights (N, L, S), averaged
    over heads (or (N, H, L, S) with average_attn_weights=False), None when need_weights=False.

    Parameters, as torch names and initialises them: in_proj_weight (3E, E) (xavier uniform), or q_proj_weight,
    k_proj_weight, v_proj_weight where kdim or vdim differ from E; in_proj_bias (3E,) (zeros); bias_k and bias_v
    (1, 1, E) with add_bias_kv (xavier normal), a learned key and value appended to every sequence; out_proj (Linear
    E -> E, its bias zeros). add_zero_attn appends a key and a value of zeros.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        name = "MultiheadAttention"
        self.embed_dim = E = check_positive_int(name, "embed_dim", embed_dim)
        self.num_heads = check_positive_int(name, "num_heads", num_heads)
        if E % self.num_heads:
            raise ValueError(f"{name}: embed_dim ({E}) must be divisible by num_heads ({num_heads})")
        self.kdim = E if kdim is None else check_positive_int(name, "kdim", kdim)
        self.vdim = E if vdim is None else check_positive_int(name, "vdim", vdim)
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) or not 0.0 <= dropout < 1.0:
            raise ValueError(f"{name}: dropout must be a probability in [0, 1), got {dropout!r}")
        self.dropout, self.batch_first, self.add_zero_attn = float(dropout), bool(batch_first), bool(add_zero_attn)
        self.head_dim = E // self.num_heads
        self._qkv_same_embed_dim = self.kdim == E and self.vdim == E
        dt = default_float_dtype(dtype, name)
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(np.empty((3 * E, E), dtype=dt))
            for p in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(p, None)
        else:
            self.q_proj_weight = Parameter(np.empty((E, E), dtype=dt))
            self.k_proj_weight = Parameter(np.empty((E, self.kdim), dtype=dt))
            self.v_proj_weight = Parameter(np.empty((E, self.vdim), dtype=dt))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(np.empty(3 * E, dtype=dt))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(E, E, bias=bias, dtype=dt)
        if add_bias_kv:
            self.bias_k = Parameter(np.empty((1, 1, E), dtype=dt))
            self.bias_v = Parameter(np.empty((1, 1, E), dtype=dt))
        else:
            self.bias_k = self.bias_v = None
        self._reset_parameters()
        if device is not None:
            self.to(device)

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask=None,
        need_weights: bool = True,
        attn_mask=None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ):
        if is_causal and attn_mask is None:
            raise RuntimeError(
                "MultiheadAttention: is_causal is a hint that attn_mask is the causal mask, and needs that attn_mask "
                "(Transformer.generate_square_subsequent_mask builds it)"
            )
        batched = _check_inputs(self, query, key, value)
        if not batched:  # a batch of one, removed again below
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            key_padding_mask = None if key_padding_mask is None else _as_mask(key_padding_mask).reshape(1, -1)
        elif self.batch_first:  # (N, L, E) -> (L, N, E): torch's own layout, so that masks read the same
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        out, weights = self._attend(query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights)
        if not batched:
            return out.squeeze(1), None if weights is None else weights.squeeze(0)
        return (out.transpose(0, 1) if self.batch_first else out), weights

    def _attend(self, query, key, value, key_padding_mask, need_weights, attn_mask, average):
        """torch's F.multi_head_attention_forward on (L, N, E), (S, N, kdim), (S, N, vdim)."""
        L, N, E = query.shape
        H, Dh = self.num_heads, self.head_dim
        q, k, v = self._projections(query, key, value)  # (L, N, E), (S, N, E), (S, N, E)
        attn_mask = _check_attn_mask(attn_mask, query.dtype, L, key.shape[0], N * H)
        key_padding_mask = _check_key_padding_mask(key_padding_mask, query.dtype, N, key.shape[0])
        if self.bias_k is not None:  # one more key and value, learned; the masks let every query see it
            k = cat([k, self.bias_k.expand(1, N, E)], 0)
            v = cat([v, self.bias_v.expand(1, N, E)], 0)
            attn_mask, key_padding_mask = _one_more_key(attn_mask), _one_more_key(key_padding_mask)
        q, k, v = (t.reshape(t.shape[0], N, H, Dh).permute(1, 2, 0, 3) for t in (q, k, v))  # (N, H, T, Dh)
        if self.add_zero_attn:  # one more key and value of zeros
            zeros = Tensor(np.zeros((N, H, 1, Dh), dtype=q.dtype))
            k, v = cat([k, zeros], 2), cat([v, zeros], 2)
            attn_mask, key_padding_mask = _one_more_key(attn_mask), _one_more_key(key_padding_mask)
        mask = _merged_mask(attn_mask, key_padding_mask, N, H)
        p = self.dropout if self.training else 0.0
        if need_weights:
            weights = F.attention_weights(q, k, mask, scale=1.0 / math.sqrt(Dh))  # (N, H, L, S)
            if p > 0.0:
                weights = F.dropout(weights, p, True)
            heads = weights @ v
        else:
            weights, heads = None, F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        out = self.out_proj(heads.permute(2, 0, 1, 3).reshape(L, N, E))  # (L, N, E)
        if weights is not None and average:
            weights = weights.mean(dim=1)  # (N, L, S)
        return out, weights

    def _projections(self, query, key, value):
        E = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:E], b[E : 2 * E], b[2 * E :])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            wq, wk, wv = w[:E], w[E : 2 * E], w[2 * E :]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"


def _check_inputs(m: MultiheadAttention, query, key, value) -> bool:
    """Whether the inputs are batched (3-D) or not (2-D), after checking their ranks, widths and lengths."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"MultiheadAttention: {name} must be a Tensor, got {type(t).__name__}")
    if not (query.ndim == key.ndim == value.ndim) or query.ndim not in (2, 3):
        raise ValueError(
            "MultiheadAttention: query, key and value must all be 3-D (batched) or all 2-D (unbatched), got shapes "
            f"{query.shape}, {key.shape}, {value.shape}"
        )
    widths = (query.shape[-1], key.shape[-1], value.shape[-1])
    if widths != (m.embed_dim, m.kdim, m.vdim):
        raise ValueError(
            f"MultiheadAttention: expected query, key, value of widths {(m.embed_dim, m.kdim, m.vdim)} (embed_dim, "
            f"kdim, vdim), got {widths}"
        )
    seq = 1 if (query.ndim == 3 and m.batch_first) else 0
    if key.shape[seq] != value.shape[seq] or key.shape[:-1] != value.shape[:-1]:
        raise ValueError(f"MultiheadAttention: key {key.shape} and value {value.shape} must have one length and batch")
    if query.ndim == 3 and query.shape[1 - seq] != key.shape[1 - seq]:
        raise ValueError(f"MultiheadAttention: query {query.shape} and key {key.shape} must have one batch size")
    return query.ndim == 3


def _as_mask(mask) -> Tensor:
    return mask if isinstance(mask, Tensor) else Tensor(np.asarray(mask))


def _in_query_dtype(name: str, mask: Tensor, dtype) -> Tensor:
    """A bool mask as it is; a float one in the query's dtype (torch's scaled_dot_product_attention path takes a float32
    mask, such as generate_square_subsequent_mask's default, for a float64 query too); anything else refused."""
    if mask.dtype == np.bool_ or mask.dtype == dtype:
        return mask
    if mask.dtype.kind != "f":
        raise TypeError(f"MultiheadAttention: {name} must be bool or floating, got {mask.dtype}")
    return mask.to(dtype)


def _check_attn_mask(attn_mask, dtype, L: int, S: int, NH: int):
    """attn_mask (L, S) or (N * num_heads, L, S), bool (True = not attended) or float (added), as torch takes it."""
    if attn_mask is None:
        return None
    attn_mask = _in_query_dtype("attn_mask", _as_mask(attn_mask), dtype)
    expected = {2: (L, S), 3: (NH, L, S)}.get(attn_mask.ndim)
    if expected is None or attn_mask.shape != expected:
        raise ValueError(
            f"MultiheadAttention: attn_mask must be of shape {(L, S)} or {(NH, L, S)} "
            f"(L, S or N * num_heads, L, S), got {attn_mask.shape}"
        )
    return attn_mask


def _check_key_padding_mask(mask, dtype, N: int, S: int):
    """key_padding_mask (N, S): True (or -inf) where a key is padding."""
    if mask is None:
        return None
    mask = _in_query_dtype("key_padding_mask", _as_mask(mask), dtype)
    if mask.shape != (N, S):
        raise ValueError(f"MultiheadAttention: key_padding_mask must be of shape {(N, S)} (N, S), got {mask.shape}")
    return mask


def _one_more_key(mask):
    """The mask with a column for an appended key (bias_k, add_zero_attn): False or 0, attended, as torch pads."""
    if mask is None:
        return None
    return cat([mask, Tensor(np.zeros(mask.shape[:-1] + (1,), dtype=mask.dtype))], -1)


def _merged_mask(attn_mask, key_padding_mask, N: int, H: int):
    """The two masks as one that broadcasts to (N, H, L, S), in the form F.attention_weights and
    F.scaled_dot_product_attention take: a bool array, True = attended, when both are bool; else a float Tensor of
    additive biases (a bool mask's True as -inf), as torch merges them."""
    masks = []
    if attn_mask is not None:
        masks.append(attn_mask if attn_mask.ndim == 2 else attn_mask.reshape(N, H, *attn_mask.shape[1:]))
    if key_padding_mask is not None:
        masks.append(key_padding_mask.reshape(N, 1, 1, key_padding_mask.shape[-1]))
    if not masks:
        return None
    if all(m.dtype == np.bool_ for m in masks):
        masked = masks[0]._data if len(masks) == 1 else masks[0]._data | masks[1]._data
        return ~masked
    dtype = next(m.dtype for m in masks if m.dtype != np.bool_)
    biases = [m if m.dtype != np.bool_ else Tensor(np.where(m._data, -np.inf, 0.0).astype(dtype)) for m in masks]
    return biases[0] if len(biases) == 1 else biases[0] + biases[1]
