"""The same Transformer built on `torch.nn.Transformer`: the PyTorch a user would write, for the benchmarks.

parity/model.py mirrors transformer_np/model.py line for line so the parity report can compare them
layer by layer; this file is the idiomatic model of the same configuration instead:

    logits = generator(nn.Transformer(PE(E_src[src] * sqrt(D)), PE(E_tgt[tgt] * sqrt(D))))

with torch's own layers (nn.TransformerEncoderLayer / nn.TransformerDecoderLayer, batch_first, the
packed in-projection of nn.MultiheadAttention, scaled_dot_product_attention inside), the same norm
placement (norm_first), dropout, activation and d_ff as ModelConfig says. nn.Transformer builds a final
LayerNorm after each stack; with final_norm=False (the paper's post-norm recipe) the stacks are passed in
as custom_encoder / custom_decoder without one, so the function computed is exactly parity's model's.

Masks follow torch's convention, built from the tokens as a user of nn.Transformer does: key-padding
masks (True = PAD) and a boolean causal mask (True = blocked). Weights come from transformer_np (or from
parity's twin) through parity/convert.py, `np_to_nn_transformer`; the embeddings, positional table and
generator keep the twin's names, so only the encoder and decoder keys are renamed.

Deviation from parity/model.py, flagged: a query row with no key to attend to gives NaN here (torch's
attention), zeros there. Every row of a batch made by transformer_np's data has at least its BOS or
first source token, so no such row occurs in training or in the benchmarks.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from parity.model import LearnedPositionalEmbedding, PositionalEncoding
from transformer_np.config import ModelConfig
from transformer_np.data import PAD_ID


class NNTransformer(nn.Module):
    """Embeddings, positional encoding, torch.nn.Transformer (batch_first) and the generator, from a ModelConfig.

    Parameter names: src_embed.weight, tgt_embed.weight, pos_encoding.* and generator.* as in parity/model.py;
    transformer.encoder.layers.i.{self_attn.in_proj_weight, ...} and transformer.decoder.layers.i.{self_attn,
    multihead_attn, linear1, linear2, norm1..3} as torch.nn.Transformer names them.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        c = config
        self.config = c
        self.d_model = c.d_model
        self.max_len = c.max_len
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model)
        if c.positional == "sinusoidal":
            self.pos_encoding = PositionalEncoding(c.d_model, c.max_len, c.dropout)
        else:
            self.pos_encoding = LearnedPositionalEmbedding(c.d_model, c.max_len, c.dropout)
        layer_args = dict(
            d_model=c.d_model,
            nhead=c.num_heads,
            dim_feedforward=c.d_ff,
            dropout=c.dropout,
            activation=c.activation,
            batch_first=True,
            norm_first=c.norm_first,
        )
        encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(**layer_args),
            c.num_encoder_layers,
            norm=nn.LayerNorm(c.d_model) if c.final_norm else None,
            enable_nested_tensor=False,  # padded positions computed as in parity's model, not dropped
        )
        decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(**layer_args),
            c.num_decoder_layers,
            norm=nn.LayerNorm(c.d_model) if c.final_norm else None,
        )
        self.transformer = nn.Transformer(
            d_model=c.d_model, nhead=c.num_heads, custom_encoder=encoder, custom_decoder=decoder, batch_first=True
        )
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size)
        if c.tie_embeddings:
            self.generator.weight = self.tgt_embed.weight

    @classmethod
    def from_config(cls, config: ModelConfig) -> NNTransformer:
        return cls(config)

    @property
    def device(self) -> torch.device:
        return self.src_embed.weight.device

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """src (B, S), tgt (B, T) int64 ids -> logits (B, T, V_tgt); PAD keys ignored, the target causal."""
        T = tgt.shape[1]
        src_pad, tgt_pad = src == PAD_ID, tgt == PAD_ID  # (B, S), (B, T): True = ignore this key
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt.device).triu(1)  # (T, T): True = blocked
        x_src = self.pos_encoding(self.src_embed(src) * math.sqrt(self.d_model))  # (B, S, D)
        x_tgt = self.pos_encoding(self.tgt_embed(tgt) * math.sqrt(self.d_model))  # (B, T, D)
        h = self.transformer(
            x_src,
            x_tgt,
            tgt_mask=causal,
            src_key_padding_mask=src_pad,
            tgt_key_padding_mask=tgt_pad,
            memory_key_padding_mask=src_pad,
        )  # (B, T, D)
        return self.generator(h)  # (B, T, V_tgt)
