"""The encoder-decoder Transformer of "Attention Is All You Need", in NumPy on minitensor.

What this file owns, bottom-up in the paper's order (section 3); the masked softmax(Q K^T / sqrt(Dh)) is
attention_weights (one primitive in minitensor, a torch composite in parity/layers.py); with
ModelConfig.attention='tiled' the whole of softmax(...) V is F.scaled_dot_product_attention instead (tiles, O(T)
memory, no weights kept for plots):
    scaled_dot_product_attention   Attention(Q, K, V) = softmax(Q K^T / sqrt(Dh)) V        (3.2.1)
    MultiHeadAttention             Concat(head_1..head_H) W_o                              (3.2.2)
    PositionwiseFeedForward        FFN(x) = act(x W_1 + b_1) W_2 + b_2                     (3.3)
    PositionalEncoding             sinusoids, or LearnedPositionalEmbedding                (3.5)
    EncoderLayer, DecoderLayer     sublayers in residual blocks with LayerNorm             (3.1)
    Encoder, Decoder               N layers, optional final LayerNorm
    Transformer                    embeddings * sqrt(D), encoder, decoder, generator       (3.4)
    KVCache                        keys/values reused by incremental decoding (decode.py)

transformer_np/model.py (minitensor) and parity/model.py (PyTorch) say the same things class for class and
attribute for attribute, so weights move between them by name (parity/convert.py), and they differ in spelling
only (tests/parity/test_model_mirror.py holds them to it). The layers follow torch.nn.TransformerEncoderLayer /
TransformerDecoderLayer exactly (dropout placement, the feed-forward's inner dropout, LayerNorm eps 1e-5,
norm_first, final norms), so torch.nn.Transformer's weights load into this model. Cached decoding's speed devices
(keys and values in preallocated arrays, a one-position step's heads in one reshape) are transformer_np's alone:
transformer_np/decoding_cache.py registers them against its plain KVCache, split_heads and merge_heads.

Masks are boolean, True = may attend, broadcastable to (B, H, T_q, T_k) (see the masks module).
A query row with nothing to attend to gets zero weights and a zero output, with finite
gradients (PyTorch's own attention gives NaN there).

Parameter names and shapes of the base model (V_src = V_tgt = 10000, D 512, H 8, d_ff 2048,
6 + 6 layers; i is the layer index); every name appears in state_dict():

    src_embed.weight                                   (V_src, D)    (10000, 512)
    tgt_embed.weight                                   (V_tgt, D)    (10000, 512)
    pos_encoding.pe          buffer, persistent=False  (max_len, D)  (5000, 512)   not in state_dict
      or pos_encoding.embedding.weight  (learned)      (max_len, D)
    encoder.layers.i.self_attn.W_{q,k,v,o}.weight      (D, D)        (512, 512)
    encoder.layers.i.self_attn.W_{q,k,v,o}.bias        (D,)          (512,)
    encoder.layers.i.feed_forward.linear1.weight       (d_ff, D)     (2048, 512)
    encoder.layers.i.feed_forward.linear1.bias         (d_ff,)       (2048,)
    encoder.layers.i.feed_forward.linear2.weight       (D, d_ff)     (512, 2048)
    encoder.layers.i.feed_forward.linear2.bias         (D,)          (512,)
    encoder.layers.i.norm{1,2}.{weight,bias}           (D,)          (512,)
    decoder.layers.i.self_attn.W_{q,k,v,o}.{weight,bias}             as in the encoder
    decoder.layers.i.cross_attn.W_{q,k,v,o}.{weight,bias}            as in the encoder
    decoder.layers.i.feed_forward.linear{1,2}.{weight,bias}          as in the encoder
    decoder.layers.i.norm{1,2,3}.{weight,bias}         (D,)          (512,)
    encoder.norm.{weight,bias}, decoder.norm.{weight,bias}  (D,)     only when final_norm=True
    generator.weight                                   (V_tgt, D)    (10000, 512)  tgt_embed.weight when tied
    generator.bias                                     (V_tgt,)      (10000,)

Token ids are integer arrays or Tensors (B, L); PAD=0 (transformer_np.data.PAD_ID). On a device
(`model.to("cuda")`), host ids and masks are copied onto it at the model's boundary (check_inputs), nowhere else.
"""

from __future__ import annotations

import math

import numpy as np

import minitensor as mt
import minitensor.nn as nn
import minitensor.nn.functional as F
from minitensor.devices import array_module, is_array
from minitensor.nn import Dropout
from minitensor.nn.functional import attention_weights
from minitensor.utils.checkpoint import checkpoint, noop_context_fn
from transformer_np.config import ModelConfig
from transformer_np.data import PAD_ID
from transformer_np.device import array_of, device_of, on_device
from transformer_np.masks import causal_mask, padding_mask, target_mask

INTEGER_DTYPES = (mt.int64, mt.int32, mt.int16, mt.int8, mt.uint8)  # what token ids may be


# ----------------------------------------------------------------------------------------------
# Input checks (the model boundary)
# ----------------------------------------------------------------------------------------------
def _raw(x):
    """x as the checks read it, or None when x is neither a Tensor nor an array (minitensor: the array behind a
    Tensor, a device's array too; PyTorch: the tensor, a NumPy array's memory shared)."""
    if isinstance(x, mt.Tensor):
        return array_of(x)
    return x if is_array(x) else None


def check_tokens(tokens, vocab_size: int, max_len: int, who: str, offset: int = 0) -> mt.Tensor:
    """Check token ids (B, L): integer dtype, 2-D, non-empty, ids in [0, vocab_size), offset + L <= max_len.
    Returns them as a Tensor, where they are (check_inputs moves them)."""
    arr = _raw(tokens)
    if arr is None:
        raise TypeError(
            f"{who}: expected token ids as an mt.Tensor or NumPy array of shape (B, L), got {type(tokens).__name__}"
        )
    if arr.dtype not in INTEGER_DTYPES:
        raise TypeError(f"{who}: expected integer (int64) token ids, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{who}: expected token ids of shape (B, L), got shape {tuple(arr.shape)}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(
            f"{who}: expected a non-empty batch of shape (B, L) with B, L >= 1, got shape {tuple(arr.shape)}"
        )
    lo, hi = array_module(arr).stack([arr.min(), arr.max()]).tolist()  # one read on a device
    if lo < 0 or hi >= vocab_size:
        bad = lo if lo < 0 else hi
        where = tuple(int(i) for i in array_module(arr).argwhere(arr == bad)[0])
        raise ValueError(
            f"{who}: token id {bad} at {where} is out of range for a vocabulary of size "
            f"{vocab_size} (expected 0 <= id < {vocab_size})"
        )
    if offset + arr.shape[1] > max_len:
        raise ValueError(f"{who}: sequence length {offset + arr.shape[1]} exceeds max_len {max_len}")
    return tokens if isinstance(tokens, mt.Tensor) else mt.as_tensor(tokens)  # shares the array


def check_mask(mask, shape: tuple, who: str):
    """Check that a mask is boolean and broadcastable to `shape` (B, H, T_q, T_k) without growing it."""
    if mask is None:
        return None
    arr = _raw(mask)
    if arr is None:
        raise TypeError(f"{who}: expected a bool mask (mt.Tensor or NumPy array), got {type(mask).__name__}")
    if arr.dtype != mt.bool:
        raise TypeError(f"{who}: expected a bool mask (True = may attend), got dtype {arr.dtype}")
    try:
        ok = arr.ndim <= len(shape) and np.broadcast_shapes(tuple(arr.shape), tuple(shape)) == tuple(shape)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{who}: mask of shape {tuple(arr.shape)} does not broadcast to the attention "
            f"scores' shape {tuple(shape)} (B, H, T_q, T_k)"
        )
    return mask


def check_inputs(model, who: str, src=None, tgt=None, memory=None, src_mask=None, tgt_mask=None, cache=None):
    """The model's inputs checked before any work, the masks left None built from PAD=0, then everything moved
    onto the model's device: the one place where either happens.

    src (B, S) and tgt (B, T) token ids, tgt placed at cache.offset onward with a cache; memory (B, S, D), the
    encoder's output, when decoding without src. src_mask None: padding_mask(src) with src, else None (memory has
    no token ids to pad-mask). tgt_mask None: target_mask(tgt) (causal & PAD keys ignored); with a cache,
    causal_mask(T, offset) over every position fed so far (the cache keeps no token ids), none for one position.
    Returns (src, tgt, src_mask, tgt_mask) on the model's device, None where absent.
    """
    H, D = model.config.num_heads, model.d_model
    offset = cache.offset if cache is not None else 0
    if src is not None:
        src = check_tokens(src, model.src_vocab_size, model.max_len, f"{who}: src")
        B, S = src.shape
        if src_mask is None:
            src_mask = padding_mask(src, PAD_ID)  # (B, 1, 1, S)
        check_mask(src_mask, (B, H, S, S), f"{who}: src_mask")
    if tgt is not None:
        tgt = check_tokens(tgt, model.tgt_vocab_size, model.max_len, f"{who}: tgt", offset)
        B, T = tgt.shape
        if src is not None and src.shape[0] != B:
            raise ValueError(f"{who}: expected src and tgt with the same batch size, got {src.shape[0]} and {B}")
        if src is None and not (getattr(memory, "ndim", None) == 3 and memory.shape[0] == B and memory.shape[2] == D):
            got = tuple(memory.shape) if hasattr(memory, "shape") else type(memory).__name__
            raise ValueError(f"{who}: expected memory of shape ({B}, S, {D}), got {got}")
        S = src.shape[1] if src is not None else memory.shape[1]
        if tgt_mask is None:
            if cache is None:
                tgt_mask = target_mask(tgt, PAD_ID)  # (B, 1, T, T)
            elif T > 1:
                tgt_mask = causal_mask(T, offset)  # (1, 1, T, offset + T)
            # one new token with a cache: it may see every cached position and itself, no mask
        check_mask(tgt_mask, (B, H, T, offset + T), f"{who}: tgt_mask")
        check_mask(src_mask, (B, H, T, S), f"{who}: src_mask")
    like = device_of(model)
    return tuple(None if x is None else on_device(x, like, who) for x in (src, tgt, src_mask, tgt_mask))


# ----------------------------------------------------------------------------------------------
# Attention
# ----------------------------------------------------------------------------------------------
def scaled_dot_product_attention(q, k, v, mask=None, dropout=None, dropout_p: float = 0.0):
    """softmax(q k^T / sqrt(Dh) masked) v: returns (output (B, H, T_q, Dv), weights (B, H, T_q, T_k)).

    Masking: keys where mask is False get exactly zero weight; a query row with nothing to attend
    to gets zero weights and a zero output, with finite (zero) gradients (attention_weights: one
    fused primitive in minitensor, a torch composite in parity/layers.py).
    `dropout`: a Dropout module applied to the weights (it follows its own training flag), or a
    float p; `dropout_p` (torch.nn.functional's spelling) is a float p applied always, as torch's.
    The weights returned are those multiplied with v (after dropout), as torch.nn.MultiheadAttention.
    """
    if q.ndim != k.ndim or q.ndim != v.ndim or q.ndim < 2:
        raise ValueError(
            f"scaled_dot_product_attention: q, k, v must have the same rank >= 2, "
            f"got shapes {q.shape}, {k.shape}, {v.shape}"
        )
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"scaled_dot_product_attention: expected q (..., T_q, Dh), k (..., T_k, Dh), "
            f"v (..., T_k, Dv), got {q.shape}, {k.shape}, {v.shape}"
        )
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise TypeError(
            f"scaled_dot_product_attention: q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}"
        )
    if dropout is not None and dropout_p:
        raise ValueError("scaled_dot_product_attention: give dropout (module or p) or dropout_p, not both")
    keep = None
    if mask is not None:
        scores_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], k.shape[-2])
        keep = _raw(check_mask(mask, scores_shape, "scaled_dot_product_attention"))
    weights = attention_weights(q, k, keep, scale=1.0 / math.sqrt(q.shape[-1]))  # (B, H, T_q, T_k)
    if isinstance(dropout, nn.Module):
        weights = dropout(weights)
    elif dropout:  # a float p
        weights = F.dropout(weights, p=float(dropout), training=True)
    elif dropout_p:
        weights = F.dropout(weights, p=float(dropout_p), training=True)
    return weights @ v, weights  # (B, H, T_q, Dv)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_H) W_o, head_i = Attention(Q W_q^i, K W_k^i, V W_v^i).

    The H heads live in one (D, D) projection each, split as (B, H, T, Dh) with Dh = D / H.
    `dropout` acts on the attention weights (as torch.nn.MultiheadAttention's). With
    `store_attention` True, forward keeps the last weights (NumPy, detached) in `attn_weights`.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, attention: str = "dense"):
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(f"MultiHeadAttention: d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.dropout = Dropout(dropout)
        self.store_attention = False
        self.attn_weights = None
        self.attention = attention  # 'dense' or 'tiled' (ModelConfig.attention)

    def split_heads(self, x):
        B, T, _ = x.shape
        return x.reshape(B, T, self.num_heads, self.d_head).transpose(1, 2)  # (B, H, T, Dh)

    def merge_heads(self, x):
        B, _, T, _ = x.shape
        return x.transpose(1, 2).reshape(B, T, self.d_model)  # (B, T, D)

    def forward(self, query, key, value, mask=None, cache=None):
        """query (B, T_q, D), key/value (B, T_k, D), mask broadcastable to (B, H, T_q, T_k) -> (B, T_q, D).

        cache: an AttentionCache (incremental decoding). For self-attention it holds the keys and
        values of earlier positions and the new ones are appended; for cross-attention (static)
        the memory's keys and values are projected on the first call and reused after.
        """
        if query.ndim != 3 or query.shape[-1] != self.d_model:
            raise ValueError(f"MultiHeadAttention: expected query of shape (B, T, {self.d_model}), got {query.shape}")
        q = self.split_heads(self.W_q(query))  # (B, H, T_q, Dh)
        if cache is not None and cache.static and cache.k is not None:
            k, v = cache.k, cache.v  # (B, H, S, Dh)
        else:
            k = self.split_heads(self.W_k(key))  # (B, H, T_k, Dh)
            v = self.split_heads(self.W_v(value))
            if cache is not None:
                k, v = cache.update(k, v)
        if self.attention == "tiled" and not self.store_attention:
            # Attention in tiles (O(T) memory, its dropout drawn inside): no weights exist to store, so a plot that
            # asks for them (store_attention) runs the dense path.
            keep = (
                None
                if mask is None
                else _raw(check_mask(mask, q.shape[:2] + (q.shape[2], k.shape[2]), "MultiHeadAttention"))
            )
            p = self.dropout.p if self.dropout.training else 0.0
            return self.W_o(self.merge_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p)))
        out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout)
        if self.store_attention:
            # A detached copy on the host: the tensor itself is saved for backward and must not be edited by a plot.
            self.attn_weights = weights.detach().cpu().numpy().copy()  # (B, H, T_q, T_k)
        return self.W_o(self.merge_heads(out))  # (B, T_q, D)


# ----------------------------------------------------------------------------------------------
# Feed-forward and positions
# ----------------------------------------------------------------------------------------------
class PositionwiseFeedForward(nn.Module):
    """FFN(x) = linear2(dropout(act(linear1(x)))), act = ReLU (paper) or GELU; d_model -> d_ff -> d_model."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.1):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"PositionwiseFeedForward: activation must be 'relu' or 'gelu', got {activation!r}")
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        # torch.nn.TransformerEncoderLayer's `dropout` between the two linears, not in the paper.
        self.dropout = Dropout(dropout)

    def forward(self, x):
        h = self.linear1(x)  # (B, T, d_ff)
        h = F.relu(h) if self.activation == "relu" else F.gelu(h)
        return self.linear2(self.dropout(h))  # (B, T, D)


def sinusoidal_table(max_len: int, d_model: int) -> np.ndarray:
    """(max_len, D) float64: PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(pos / 10000^(2i/D))."""
    position = np.arange(max_len, dtype=np.float64)[:, None]  # (max_len, 1)
    div_term = np.exp(np.arange(0, d_model, 2, dtype=np.float64) * (-math.log(10000.0) / d_model))
    pe = np.zeros((max_len, d_model), dtype=np.float64)
    pe[:, 0::2] = np.sin(position * div_term)
    pe[:, 1::2] = np.cos(position * div_term[: d_model // 2])
    return pe


class PositionalEncoding(nn.Module):
    """x + PE[offset : offset + T], then dropout; PE is the paper's fixed sinusoid table (a buffer)."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.1):
        super().__init__()
        self.max_len = max_len
        self.dropout = Dropout(dropout)
        # Computed in float64, stored in the default dtype; persistent=False: rebuilt, never saved.
        pe = mt.from_numpy(sinusoidal_table(max_len, d_model)).to(mt.get_default_dtype())
        self.register_buffer("pe", pe, persistent=False)  # (max_len, D)

    def forward(self, x, offset: int = 0):
        """x (B, T, D) holds positions offset .. offset+T-1 (offset > 0 in incremental decoding)."""
        T = x.shape[1]
        if offset + T > self.max_len:
            raise ValueError(f"PositionalEncoding: sequence length {offset + T} exceeds max_len {self.max_len}")
        return self.dropout(x + self.pe[offset : offset + T])  # (B, T, D)


class LearnedPositionalEmbedding(nn.Module):
    """x + E[offset : offset + T] with a learned table E (max_len, D), then dropout (paper 3.5: on par)."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.1):
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        self.dropout = Dropout(dropout)

    def forward(self, x, offset: int = 0):
        T = x.shape[1]
        if offset + T > self.max_len:
            raise ValueError(f"LearnedPositionalEmbedding: sequence length {offset + T} exceeds max_len {self.max_len}")
        return self.dropout(x + self.embedding.weight[offset : offset + T])  # (B, T, D)


# ----------------------------------------------------------------------------------------------
# Layers and stacks
# ----------------------------------------------------------------------------------------------
class EncoderLayer(nn.Module):
    """Self-attention, then feed-forward, each in a residual block.

    post-norm (paper, norm_first=False): x = LayerNorm(x + dropout(sublayer(x)))
    pre-norm  (norm_first=True):         x = x + dropout(sublayer(LayerNorm(x)))
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, activation, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)

    def forward(self, x, mask=None):
        """x (B, S, D), mask broadcastable to (B, H, S, S) -> (B, S, D)."""
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, mask))
            x = x + self.dropout2(self.feed_forward(self.norm2(x)))
        else:
            x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
            x = self.norm2(x + self.dropout2(self.feed_forward(x)))
        return x


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder memory, feed-forward; residual blocks as EncoderLayer."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, activation, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)

    def forward(self, x, memory, src_mask=None, tgt_mask=None, cache=None):
        """x (B, T, D), memory (B, S, D); tgt_mask to (B, H, T, T), src_mask to (B, H, T, S) -> (B, T, D).

        cache: this layer's {'self_attn': AttentionCache, 'cross_attn': AttentionCache}, or None.
        """
        self_cache = cache["self_attn"] if cache is not None else None
        cross_cache = cache["cross_attn"] if cache is not None else None
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, tgt_mask, self_cache))
            h = self.norm2(x)
            x = x + self.dropout2(self.cross_attn(h, memory, memory, src_mask, cross_cache))
            x = x + self.dropout3(self.feed_forward(self.norm3(x)))
        else:
            x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask, self_cache)))
            x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, src_mask, cross_cache)))
            x = self.norm3(x + self.dropout3(self.feed_forward(x)))
        return x


def run_layer(stack, layer, *args):
    """layer(*args); through activation checkpointing when the stack (Encoder or Decoder) asks for it and
    grad mode is on: the layer's activations are not kept, and its backward runs the layer once more
    (mt.utils.checkpoint)."""
    if not (stack.activation_checkpointing and mt.is_grad_enabled()):
        return layer(*args)
    return checkpoint(layer, *args, use_reentrant=False, context_fn=stack.checkpoint_context_fn)


class Encoder(nn.Module):
    """N EncoderLayers, then LayerNorm when final_norm (pre-norm stacks need it; torch.nn.Transformer has it)."""

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        final_norm: bool = False,
        activation_checkpointing: bool = False,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            [EncoderLayer(d_model, num_heads, d_ff, dropout, activation, norm_first) for _ in range(num_layers)]
        )
        self.activation_checkpointing = activation_checkpointing
        self.checkpoint_context_fn = noop_context_fn  # parity/hooks.py sets one that replays its dropout masks
        if final_norm:
            self.norm = nn.LayerNorm(d_model)
        else:
            self.norm = None

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = run_layer(self, layer, x, mask)
        return self.norm(x) if self.norm is not None else x  # (B, S, D)


class Decoder(nn.Module):
    """N DecoderLayers, then LayerNorm when final_norm."""

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        final_norm: bool = False,
        activation_checkpointing: bool = False,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            [DecoderLayer(d_model, num_heads, d_ff, dropout, activation, norm_first) for _ in range(num_layers)]
        )
        self.activation_checkpointing = activation_checkpointing
        self.checkpoint_context_fn = noop_context_fn  # parity/hooks.py sets one that replays its dropout masks
        if final_norm:
            self.norm = nn.LayerNorm(d_model)
        else:
            self.norm = None

    def forward(self, x, memory, src_mask=None, tgt_mask=None, cache=None):
        for i, layer in enumerate(self.layers):
            x = run_layer(self, layer, x, memory, src_mask, tgt_mask, cache.layers[i] if cache is not None else None)
        return self.norm(x) if self.norm is not None else x  # (B, T, D)


# ----------------------------------------------------------------------------------------------
# Incremental decoding state
# ----------------------------------------------------------------------------------------------
class AttentionCache:
    """One attention module's keys and values (B, H, t, Dh) during incremental decoding.

    static=False (self-attention): each call appends the new positions' keys/values.
    static=True (cross-attention): the memory's keys/values, set on the first call, reused after.
    """

    def __init__(self, static: bool):
        self.static = static
        self.k = None
        self.v = None

    def update(self, k, v):
        """Store (append, unless static) k, v (B, H, t_new, Dh); return all keys/values so far."""
        if self.k is not None and not self.static:
            k = mt.cat([self.k, k], dim=2)  # (B, H, t + t_new, Dh)
            v = mt.cat([self.v, v], dim=2)
        self.k, self.v = k, v
        return k, v

    def index_select(self, index: np.ndarray) -> None:
        """Keep rows `index` of the batch dimension (beam search reorders hypotheses this way)."""
        if self.k is not None:
            index = mt.as_tensor(index, device=self.k.device)
            self.k = self.k.detach().index_select(0, index)
            self.v = self.v.detach().index_select(0, index)


class KVCache:
    """What incremental decoding keeps between steps: per decoder layer the self-attention keys/values
    of the target positions fed so far and the cross-attention keys/values of the memory, plus
    `offset`, the number of target positions fed so far (the positional encoding's offset).

    Use (decode.py): cache = model.init_cache(); then model.decode(newest_tokens, memory, src_mask,
    cache=cache) per step. The result equals full recomputation up to round-off.
    """

    def __init__(self, num_layers: int):
        self.offset = 0
        self.layers = [
            {"self_attn": AttentionCache(static=False), "cross_attn": AttentionCache(static=True)}
            for _ in range(num_layers)
        ]

    def reorder(self, index, static: bool = False) -> None:
        """Select batch rows `index` (int array) of every self-attention entry; of the cross-attention
        (memory) entries too when static=True (needed when rows move between source sentences)."""
        index = np.asarray(index)
        for layer in self.layers:
            layer["self_attn"].index_select(index)
            if static:
                layer["cross_attn"].index_select(index)


# ----------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------
class Transformer(nn.Module):
    """logits = generator(decoder(embed(tgt), encoder(embed(src)))), embed(x) = PE(E[x] * sqrt(D)).

    Arguments are exactly ModelConfig's fields (transformer_np/config.py). Every parameter with
    more than one dimension (embeddings included) starts Xavier-uniform, as in torch.nn.Transformer
    and the Annotated Transformer; biases keep nn.Linear's default U(-1/sqrt(in), 1/sqrt(in)) (as in
    torch.nn.Transformer, which also re-initialises only the matrices) and LayerNorms start at (1, 0).
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        num_heads: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 5000,
        norm_first: bool = False,
        final_norm: bool = False,
        activation: str = "relu",
        positional: str = "sinusoidal",
        tie_embeddings: bool = False,
        attention: str = "dense",
        activation_checkpointing: bool = False,
    ):
        # every argument checked first, with the messages the command line gives (ModelConfig.__post_init__)
        config = ModelConfig(
            src_vocab_size,
            tgt_vocab_size,
            d_model,
            num_heads,
            num_encoder_layers,
            num_decoder_layers,
            d_ff,
            dropout,
            max_len,
            norm_first,
            final_norm,
            activation,
            positional,
            tie_embeddings,
            attention,
            activation_checkpointing,
        )
        super().__init__()
        self.config = config
        self.d_model = d_model
        self.max_len = max_len
        self.src_vocab_size = src_vocab_size
        self.tgt_vocab_size = tgt_vocab_size
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        if positional == "sinusoidal":
            self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        else:
            self.pos_encoding = LearnedPositionalEmbedding(d_model, max_len, dropout)
        self.encoder = Encoder(
            num_encoder_layers,
            d_model,
            num_heads,
            d_ff,
            dropout,
            activation,
            norm_first,
            final_norm,
            activation_checkpointing,
        )
        self.decoder = Decoder(
            num_decoder_layers,
            d_model,
            num_heads,
            d_ff,
            dropout,
            activation,
            norm_first,
            final_norm,
            activation_checkpointing,
        )
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        if tie_embeddings:
            # Deviation from the paper's base recipe (it shares all three matrices): target only.
            self.generator.weight = self.tgt_embed.weight
        for m in self.modules():  # every attention block computes as ModelConfig.attention says
            if isinstance(m, MultiHeadAttention):
                m.attention = attention
        self.reset_parameters()

    @classmethod
    def from_config(cls, config: ModelConfig) -> Transformer:
        return cls(**config.to_dict())

    def reset_parameters(self) -> None:
        """Xavier-uniform for every parameter with dim > 1 (a tied matrix once); the rest keep their init."""
        for p in self.parameters():
            if p.ndim > 1:
                nn.init.xavier_uniform_(p)

    @property
    def device(self) -> mt.device:
        """Where the weights live: token ids given as NumPy arrays move here (check_inputs)."""
        return self.src_embed.weight.device

    # -- attention maps ----------------------------------------------------------------------
    def store_attention(self, flag: bool = True) -> None:
        """Switch every MultiHeadAttention's `store_attention` (off also drops the stored maps)."""
        for m in self.modules():
            if isinstance(m, MultiHeadAttention):
                m.store_attention = bool(flag)
                if not flag:
                    m.attn_weights = None

    def attention_maps(self) -> dict:
        """The last stored weights: {'encoder': [(B, H, S, S) per layer], 'decoder_self': [(B, H, T, T)],
        'decoder_cross': [(B, H, T, S)]} (None for a layer that has not run with store_attention on)."""
        return {
            "encoder": [layer.self_attn.attn_weights for layer in self.encoder.layers],
            "decoder_self": [layer.self_attn.attn_weights for layer in self.decoder.layers],
            "decoder_cross": [layer.cross_attn.attn_weights for layer in self.decoder.layers],
        }

    def init_cache(self) -> KVCache:
        """An empty KVCache for incremental decoding with this model's decoder."""
        return KVCache(len(self.decoder.layers))

    # -- the three entry points: check_inputs, then the work on inputs already checked and moved -----------------
    def encode(self, src, src_mask=None):
        """src (B, S) ids -> memory (B, S, D). src_mask None: padding_mask(src) (PAD=0 keys ignored)."""
        src, _, src_mask, _ = check_inputs(self, "Transformer.encode", src=src, src_mask=src_mask)
        return self._encode(src, src_mask)

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None, cache=None):
        """tgt (B, T) ids, memory (B, S, D) -> logits (B, T, V_tgt).

        tgt_mask None: target_mask(tgt) (causal & PAD keys ignored); with a cache, causal_mask(T,
        offset) over every position fed so far (the cache keeps no token ids, so no padding mask).
        src_mask None: every memory position may be attended (memory has no token ids to pad-mask).
        cache: a KVCache; then tgt holds only the new positions (usually the newest token), placed
        at cache.offset onward, and cache.offset advances by T.
        """
        _, tgt, src_mask, tgt_mask = check_inputs(
            self, "Transformer.decode", tgt=tgt, memory=memory, src_mask=src_mask, tgt_mask=tgt_mask, cache=cache
        )
        return self._decode(tgt, memory, src_mask, tgt_mask, cache)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None):
        """src (B, S), tgt (B, T) ids -> logits (B, T, V_tgt) (teacher forcing).

        Masks left None are built from PAD=0: src_mask = padding_mask(src) (B, 1, 1, S), used by the
        encoder and the cross-attention; tgt_mask = target_mask(tgt) (B, 1, T, T), causal & padding.
        """
        src, tgt, src_mask, tgt_mask = check_inputs(
            self, "Transformer.forward", src=src, tgt=tgt, src_mask=src_mask, tgt_mask=tgt_mask
        )
        memory = self._encode(src, src_mask)  # (B, S, D)
        return self._decode(tgt, memory, src_mask, tgt_mask)  # (B, T, V_tgt)

    def _encode(self, src, src_mask):
        x = self.pos_encoding(self.src_embed(src) * math.sqrt(self.d_model))  # (B, S, D)
        return self.encoder(x, src_mask)  # (B, S, D)

    def _decode(self, tgt, memory, src_mask, tgt_mask, cache=None):
        offset = cache.offset if cache is not None else 0
        x = self.pos_encoding(self.tgt_embed(tgt) * math.sqrt(self.d_model), offset)  # (B, T, D)
        x = self.decoder(x, memory, src_mask, tgt_mask, cache)  # (B, T, D)
        if cache is not None:
            cache.offset += tgt.shape[1]
        return self.generator(x)  # (B, T, V_tgt)
