"""`Transformer`, `TransformerEncoder(Layer)`, `TransformerDecoder(Layer)`: torch.nn.modules.transformer, attribute for
attribute, so that torch's state_dicts load key for key (and ours into torch's), on MultiheadAttention, Linear,
LayerNorm and Dropout.

    post-norm (norm_first=False, the paper's):  x = norm1(x + SA(x));            x = norm2(x + FF(x))
    pre-norm  (norm_first=True):                x = x + SA(norm1(x));            x = x + FF(norm2(x))
    FF(x) = dropout2(linear2(dropout(activation(linear1(x)))));  SA(x) = dropout1(self_attn(x, x, x)[0])

The decoder layer adds cross-attention over the encoder's output (`multihead_attn`, `norm2`, `dropout2`) between the
two, its feed-forward block taking norm3 and dropout3. nn.Transformer ends the encoder and the decoder stacks with a
LayerNorm each (encoder.norm, decoder.norm) and initialises every matrix with xavier_uniform_.

Deviation, flagged: torch's evaluation-mode "fast path" (no gradient recorded, eval mode, batch_first, ...) runs the
encoder as one fused kernel and, with a src_key_padding_mask, on nested tensors, where a padded position's output is
0 (then the final norm's output of 0); here every mode runs the documented math above, so padded positions carry the
values that math gives them (the other positions are equal to round-off). Dropout draws its own masks, so only
dropout=0 (or eval) is comparable number for number.
"""

from __future__ import annotations

import copy
import numbers

import numpy as np

from ...dtypes import get_default_dtype
from ...tensor import Tensor
from .. import functional as F
from .. import init
from .attention import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm
from .utils import check_positive_int

__all__ = [
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def _activation(where: str, activation):
    """torch's activation argument: 'relu', 'gelu', or any callable (a function or a Module)."""
    if isinstance(activation, str):
        if activation not in ACTIVATIONS:
            raise ValueError(f"{where}: activation must be 'relu', 'gelu' or a callable, got {activation!r}")
        return ACTIVATIONS[activation]
    if not callable(activation):
        raise TypeError(f"{where}: activation must be 'relu', 'gelu' or a callable, got {type(activation).__name__}")
    return activation


def _check_dropout(where: str, dropout) -> float:
    if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"{where}: dropout must be a probability in [0, 1), got {dropout!r}")
    return float(dropout)


class _TransformerLayer(Module):
    """What both layers share: their constructor, which registers the sub-modules in torch's order (the state_dict
    keys follow it): self_attn (and multihead_attn), linear1, dropout, linear2, norm1.., dropout1.., activation."""

    attentions = 1  # self-attention; the decoder layer adds cross-attention

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation="relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        where = type(self).__name__
        d_model = check_positive_int(where, "d_model", d_model)
        dim_feedforward = check_positive_int(where, "dim_feedforward", dim_feedforward)
        dropout = _check_dropout(where, dropout)
        attention = dict(dropout=dropout, bias=bias, batch_first=batch_first, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, **attention)
        if self.attentions == 2:
            self.multihead_attn = MultiheadAttention(d_model, nhead, **attention)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = bool(norm_first)
        for k in range(1, self.attentions + 2):  # norm1, norm2 (and norm3), then dropout1, dropout2 (and dropout3)
            setattr(self, f"norm{k}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        for k in range(1, self.attentions + 2):
            setattr(self, f"dropout{k}", Dropout(dropout))
        self.activation = _activation(where, activation)
        if device is not None:
            self.to(device)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, key_padding_mask, False, attn_mask, is_causal=is_causal)[0]
        return self.dropout1(x)


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention then a feed-forward block, each with a residual connection and a LayerNorm (after the sum, or
    before the block with norm_first=True). Input (S, N, E), or (N, S, E) with batch_first=True, or (S, E)."""

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention, cross-attention over `memory` (the encoder's output), then a feed-forward block, each with a
    residual connection and a LayerNorm (norm1, norm2, norm3), post- or pre-norm as the encoder layer."""

    attentions = 2

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, key_padding_mask, False, attn_mask, is_causal=is_causal)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


def _clones(layer: Module, num_layers, where: str) -> ModuleList:
    """num_layers deep copies of `layer` (torch's _get_clones: each starts with the same weights)."""
    if not isinstance(layer, Module):
        raise TypeError(f"{where}: expected a layer Module, got {type(layer).__name__}")
    return ModuleList([copy.deepcopy(layer) for _ in range(check_positive_int(where, "num_layers", num_layers))])


def _causal_hint(mask, is_causal, size: int) -> bool:
    """torch's _detect_is_causal_mask: the hint as given, or (None) whether `mask` is the causal mask of `size`."""
    if is_causal is not None or mask is None:
        return bool(is_causal)
    arr = mask._data if isinstance(mask, Tensor) else np.asarray(mask)
    causal = Transformer.generate_square_subsequent_mask(size, dtype=arr.dtype if arr.dtype.kind == "f" else None)
    return arr.shape == causal.shape and bool((arr == causal._data).all())


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer applied in turn (layers.0, layers.1, ...), then `norm` when given.
    enable_nested_tensor and mask_check are accepted and change nothing (torch's evaluation fast path; see above)."""

    def __init__(self, encoder_layer, num_layers: int, norm=None, enable_nested_tensor: bool = True, mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers, "TransformerEncoder")
        self.num_layers = len(self.layers)
        self.norm = norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal: bool | None = None):
        seq = src.shape[1] if (src.ndim == 3 and self.layers[0].self_attn.batch_first) else src.shape[0]
        is_causal = _causal_hint(mask, is_causal, seq)
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=is_causal, src_key_padding_mask=src_key_padding_mask)
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """num_layers copies of decoder_layer applied in turn, each attending to `memory`, then `norm` when given."""

    def __init__(self, decoder_layer, num_layers: int, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers, "TransformerDecoder")
        self.num_layers = len(self.layers)
        self.norm = norm

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ):
        seq = tgt.shape[1] if (tgt.ndim == 3 and self.layers[0].self_attn.batch_first) else tgt.shape[0]
        tgt_is_causal = _causal_hint(tgt_mask, tgt_is_causal, seq)
        x = tgt
        for layer in self.layers:
            x = layer(
                x,
                memory,
                tgt_mask,
                memory_mask,
                tgt_key_padding_mask,
                memory_key_padding_mask,
                tgt_is_causal=tgt_is_causal,
                memory_is_causal=memory_is_causal,
            )
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """The encoder-decoder of Vaswani et al. (2017) as torch.nn.Transformer builds it: num_encoder_layers encoder
    layers then a LayerNorm (encoder.norm), num_decoder_layers decoder layers then a LayerNorm (decoder.norm);
    every parameter with more than one dim initialised by xavier_uniform_. forward(src, tgt, ...) returns the
    decoder's output, (T, N, E) (or (N, T, E) with batch_first)."""

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation="relu",
        custom_encoder=None,
        custom_decoder=None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first, bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(*args, dtype=dtype)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(*args, dtype=dtype)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        if device is not None:
            self.to(device)

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(
        self,
        src,
        tgt,
        src_mask=None,
        tgt_mask=None,
        memory_mask=None,
        src_key_padding_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ):
        batch = 0 if self.batch_first else 1
        if src.ndim == 3 and (tgt.ndim != 3 or src.shape[batch] != tgt.shape[batch]):
            raise ValueError(f"Transformer: src {src.shape} and tgt {tgt.shape} must have one batch size")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ValueError(
                f"Transformer: src {src.shape} and tgt {tgt.shape} must end with d_model = {self.d_model} features"
            )
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
        """(sz, sz) float mask: 0 where key j <= query i, -inf above the diagonal (a query sees no later key)."""
        dt = np.dtype(get_default_dtype() if dtype is None else dtype)
        mask = Tensor(np.triu(np.full((sz, sz), -np.inf, dtype=dt), k=1))
        return mask if device is None else mask.to(device)
