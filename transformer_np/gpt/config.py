"""GPTConfig: the shape of a decoder-only model, shared by transformer_np.gpt and its PyTorch twin parity.gpt.

One dataclass covers both families the models of today come in, each a few switches away from the other:

    GPT-2 shape   positions='learned', norm='layer', mlp='gelu', bias=True, tie_weights=True
    Llama shape   positions='rope', norm='rms', mlp='swiglu', bias=False, n_kv_head < n_head (grouped-query)

Every field is checked when the config is built, so a bad value is refused before any work with the same message
from the Python API and the command line.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass

POSITIONS = ("learned", "rope")
NORMS = ("layer", "rms")
MLPS = ("gelu", "swiglu")
ATTENTIONS = ("dense", "tiled")


def check_int(owner: str, name: str, value, low: int) -> None:
    """`value` an int (not a bool) >= low, or a TypeError/ValueError naming the field."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{owner}: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < low:
        raise ValueError(f"{owner}: expected {name} >= {low}, got {name}={value}")


def check_real(owner: str, name: str, value, low: float, high: float = math.inf, low_open: bool = False) -> None:
    """`value` a finite real number in [low, high) ((low, high) when low_open), or an error naming the field."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be a number, got {type(value).__name__} {value!r}")
    if not ((value > low if low_open else value >= low) and value < high):  # NaN fails both
        interval = ("(" if low_open else "[") + f"{low:g}, {high:g})"
        raise ValueError(f"{owner}: expected {name} in {interval}, got {name}={value}")


def check_choice(owner: str, name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{owner}: unknown {name} {value!r}: expected one of {', '.join(map(repr, choices))}")


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int  # V
    block_size: int = 64  # the context: the most positions the model sees at once (learned positions' table size)
    n_layer: int = 4  # transformer blocks
    n_head: int = 4  # query heads H
    n_kv_head: int | None = None  # key/value heads (grouped-query attention); None: n_head (multi-head)
    n_embd: int = 128  # model width D; the head width is D / H
    d_ff: int | None = None  # feed-forward inner width; None: 4 D (gelu) or nanoGPT-Llama's 8 D / 3 rounded to 8s
    dropout: float = 0.0  # on the embeddings, the attention weights and each residual branch
    bias: bool = True  # biases in the linear layers and LayerNorms
    positions: str = "learned"  # 'learned' (GPT-2's table) or 'rope' (rotary, Llama)
    norm: str = "layer"  # 'layer' (LayerNorm) or 'rms' (RMSNorm)
    mlp: str = "gelu"  # 'gelu' (GELU, tanh form, GPT-2) or 'swiglu' (down(silu(gate x) * up x), Llama)
    tie_weights: bool = True  # the output head shares the token embedding's matrix
    norm_eps: float = 1e-5  # epsilon of every norm (GPT-2: 1e-5; Llama checkpoints: 1e-5 or 1e-6)
    rope_theta: float = 10000.0  # the rotary base: pair i turns by pos * rope_theta^(-2i / Dh)
    attention: str = "dense"  # 'dense' (fused attention weights, second order) or 'tiled' (FlashAttention-2)
    activation_checkpointing: bool = False  # recompute each block in the backward instead of keeping it

    def __post_init__(self):
        owner = "GPTConfig"
        for name, low in (("vocab_size", 1), ("block_size", 1), ("n_layer", 1), ("n_head", 1), ("n_embd", 1)):
            check_int(owner, name, getattr(self, name), low)
        if self.n_kv_head is not None:
            check_int(owner, "n_kv_head", self.n_kv_head, 1)
        if self.d_ff is not None:
            check_int(owner, "d_ff", self.d_ff, 1)
        if self.n_embd % self.n_head:
            raise ValueError(f"{owner}: n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        if self.n_head % self.kv_heads:
            raise ValueError(f"{owner}: n_head ({self.n_head}) must be a multiple of n_kv_head ({self.kv_heads})")
        if self.positions == "rope" and self.head_dim % 2:
            raise ValueError(f"{owner}: rotary positions need an even head width, got {self.head_dim}")
        check_real(owner, "dropout", self.dropout, 0.0, 1.0)
        check_real(owner, "norm_eps", self.norm_eps, 0.0, low_open=True)
        check_real(owner, "rope_theta", self.rope_theta, 1.0, low_open=True)
        for name, choices in (("positions", POSITIONS), ("norm", NORMS), ("mlp", MLPS), ("attention", ATTENTIONS)):
            check_choice(owner, name, getattr(self, name), choices)
        for name in ("bias", "tie_weights", "activation_checkpointing"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{owner}: {name} must be True or False, got {getattr(self, name)!r}")

    @property
    def kv_heads(self) -> int:
        return self.n_head if self.n_kv_head is None else self.n_kv_head

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def ff_dim(self) -> int:
        if self.d_ff is not None:
            return self.d_ff
        if self.mlp == "gelu":
            return 4 * self.n_embd
        return 8 * ((8 * self.n_embd // 3 + 7) // 8)  # SwiGLU's three matrices cost what GELU's two of 4 D do

    def replace(self, **changes) -> GPTConfig:
        return dataclasses.replace(self, **changes)


def gpt2_shape(vocab_size: int, **overrides) -> GPTConfig:
    """GPT-2's layout at nanoGPT's baby size (4 layers, 4 heads, width 128, context 64)."""
    return GPTConfig(vocab_size=vocab_size, **overrides)


def llama_shape(vocab_size: int, **overrides) -> GPTConfig:
    """Llama's layout at the same size: rotary positions, RMSNorm, SwiGLU, no biases, 2 key/value heads, untied."""
    fields = dict(positions="rope", norm="rms", mlp="swiglu", bias=False, n_kv_head=2, tie_weights=False, norm_eps=1e-6)
    return GPTConfig(vocab_size=vocab_size, **{**fields, **overrides})
