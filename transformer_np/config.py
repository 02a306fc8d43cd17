"""Configurations shared by transformer_np, parity and benchmarks.

`ModelConfig` holds exactly the arguments of `transformer_np.model.Transformer` (and of
`parity.model.Transformer`, which imports this file rather than copying it). `TrainConfig`
holds the training recipe. `PRESETS` names the task configurations; each preset also fixes
the batch shape used by the parity report and the benchmarks.

Both configs check every field when built (`__post_init__`), so a bad value is refused before any
work, with the same message from the Python API, `Transformer(...)` and the command line.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass

from .data import TASKS

ACTIVATIONS = ("relu", "gelu")
POSITIONALS = ("sinusoidal", "learned")
SCHEDULES = ("warmup", "step", "constant")
ATTENTIONS = ("dense", "tiled")


def _check_int(owner: str, name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{owner}: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < low:
        raise ValueError(f"{owner}: expected {name} >= {low}, got {name}={value}")


def _check_float(
    owner: str, name: str, value, low: float, high: float = math.inf, low_open: bool = False, high_open: bool = True
) -> None:
    """`value` a real number in the interval from low to high (each end closed unless *_open)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be a number, got {type(value).__name__} {value!r}")
    above = value > low if low_open else value >= low
    below = value < high if high_open else value <= high
    if not (above and below):  # NaN fails both
        interval = ("(" if low_open else "[") + f"{low:g}, {high:g}" + (")" if high_open else "]")
        raise ValueError(f"{owner}: expected {name} in {interval}, got {name}={value}")


def _check_choice(owner: str, name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{owner}: unknown {name} {value!r}: expected one of {', '.join(map(repr, choices))}")


def _check_bool(owner: str, name: str, value) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{owner}: {name} must be True or False, got {type(value).__name__} {value!r}")


@dataclass(frozen=True)
class ModelConfig:
    src_vocab_size: int  # V_src, specials included
    tgt_vocab_size: int  # V_tgt, specials included
    d_model: int = 512  # D, width of every residual stream
    num_heads: int = 8  # H; D must be divisible by H
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_ff: int = 2048  # hidden width of the position-wise feed-forward net
    dropout: float = 0.1  # one rate for embeddings, attention weights, sublayers
    max_len: int = 5000  # longest sequence the positional encoding covers
    norm_first: bool = False  # False: post-norm (paper; copy-reverse, toy-translation); True: pre-norm
    final_norm: bool = False  # a LayerNorm after the last encoder and decoder layer
    activation: str = "relu"  # 'relu' or 'gelu' inside the feed-forward net
    positional: str = "sinusoidal"  # 'sinusoidal' (paper) or 'learned'
    tie_embeddings: bool = False  # share the target embedding with the output projection
    # 'dense': the fused attention weights, kept for plots (O(T^2) memory); 'tiled': F.scaled_dot_product_attention,
    # FlashAttention-2 tiles in O(T) memory (no weights to plot). Checkpoints from before this field load as 'dense'.
    attention: str = "dense"
    # recompute each encoder and decoder layer in the backward instead of keeping its activations
    # (mt.utils.checkpoint / torch.utils.checkpoint): less memory, the same numbers, bitwise
    activation_checkpointing: bool = False

    def __post_init__(self):
        own = "ModelConfig"
        for name in (
            "src_vocab_size",
            "tgt_vocab_size",
            "d_model",
            "num_heads",
            "num_encoder_layers",
            "num_decoder_layers",
            "d_ff",
            "max_len",
        ):
            _check_int(own, name, getattr(self, name), 1)
        if self.d_model % self.num_heads:
            raise ValueError(
                f"{own}: d_model must be divisible by num_heads, got d_model={self.d_model} and "
                f"num_heads={self.num_heads}"
            )
        _check_float(own, "dropout", self.dropout, 0.0, 1.0)
        for name in ("norm_first", "final_norm", "tie_embeddings", "activation_checkpointing"):
            _check_bool(own, name, getattr(self, name))
        _check_choice(own, "activation", self.activation, ACTIVATIONS)
        _check_choice(own, "positional", self.positional, POSITIONALS)
        _check_choice(own, "attention", self.attention, ATTENTIONS)

    def replace(self, **changes) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TrainConfig:
    task: str = "copy-reverse"  # a name from transformer_np.data.TASKS
    steps: int = 3000  # optimizer steps
    batch_size: int = 32
    lr: float = 1.0  # with schedule='warmup' this multiplies d_model^-0.5 * min(...)
    schedule: str = "warmup"  # 'warmup' (paper), 'step' (StepLR, the demo's) or 'constant'
    warmup_steps: int = 400
    step_size: int = 1000  # StepLR period, in optimizer steps
    gamma: float = 0.5  # StepLR factor
    betas: tuple = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    clip_grad_norm: float = 1.0  # 0 disables clipping
    train_size: int = 5000  # examples generated for training
    eval_size: int = 500  # held-out examples
    seed: int = 0
    eval_every: int = 500  # 0: only the final evaluation
    checkpoint_every: int = 1000  # 0: only the final (and an interrupted run's) checkpoint

    def __post_init__(self):
        own = "TrainConfig"
        _check_choice(own, "task", self.task, tuple(TASKS))
        for name, low in (
            ("steps", 0),
            ("batch_size", 1),
            ("warmup_steps", 1),
            ("step_size", 1),
            ("train_size", 1),
            ("eval_size", 1),
            ("seed", 0),
            ("eval_every", 0),
            ("checkpoint_every", 0),
        ):
            _check_int(own, name, getattr(self, name), low)
        _check_float(own, "lr", self.lr, 0.0, low_open=True)
        _check_float(own, "gamma", self.gamma, 0.0, low_open=True)
        _check_float(own, "eps", self.eps, 0.0)
        _check_float(own, "weight_decay", self.weight_decay, 0.0)
        _check_float(own, "label_smoothing", self.label_smoothing, 0.0, 1.0)
        _check_float(own, "clip_grad_norm", self.clip_grad_norm, 0.0)
        _check_choice(own, "schedule", self.schedule, SCHEDULES)
        if not isinstance(self.betas, (tuple, list)) or len(self.betas) != 2:
            raise ValueError(f"{own}: betas must be a pair (beta1, beta2), got {self.betas!r}")
        for i, b in enumerate(self.betas):
            _check_float(own, f"betas[{i}]", b, 0.0, 1.0)

    def replace(self, **changes) -> TrainConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["betas"] = list(self.betas)
        return d


@dataclass(frozen=True)
class Preset:
    """A named configuration: the model, its training recipe, and a reference batch shape."""

    name: str
    model: ModelConfig
    train: TrainConfig
    batch_size: int  # B of the reference batch (parity report, benchmarks)
    src_len: int  # S of the reference batch
    tgt_len: int  # T of the reference batch
    description: str = ""


PRESETS: dict[str, Preset] = {
    "copy": Preset(
        name="copy",
        model=ModelConfig(
            src_vocab_size=100,
            tgt_vocab_size=100,
            d_model=128,
            num_heads=4,
            num_encoder_layers=2,
            num_decoder_layers=2,
            d_ff=512,
            dropout=0.1,
            max_len=5000,
        ),
        train=TrainConfig(task="copy", steps=1500, batch_size=32, warmup_steps=300),
        batch_size=32,
        src_len=10,
        tgt_len=10,
        description="copy 10 tokens from a vocabulary of 100",
    ),
    "copy-reverse": Preset(
        name="copy-reverse",
        model=ModelConfig(
            src_vocab_size=20,
            tgt_vocab_size=20,
            d_model=128,
            num_heads=8,
            num_encoder_layers=3,
            num_decoder_layers=3,
            d_ff=512,
            dropout=0.1,
            max_len=50,
        ),
        train=TrainConfig(task="copy-reverse", steps=3000, batch_size=32, warmup_steps=400),
        batch_size=32,
        src_len=12,
        tgt_len=22,
        description="target = input + reversed input, vocabulary 20, lengths 3-10",
    ),
    "toy-translation": Preset(
        name="toy-translation",
        # vocabulary sizes are set from the shipped corpus when the task is built
        model=ModelConfig(
            src_vocab_size=64,
            tgt_vocab_size=64,
            d_model=64,
            num_heads=4,
            num_encoder_layers=2,
            num_decoder_layers=2,
            d_ff=256,
            dropout=0.1,
            max_len=64,
        ),
        train=TrainConfig(task="toy-translation", steps=600, batch_size=16, warmup_steps=100, label_smoothing=0.0),
        batch_size=16,
        src_len=8,
        tgt_len=8,
        description="a small parallel corpus of short English -> German sentences",
    ),
    "base": Preset(
        name="base",
        model=ModelConfig(src_vocab_size=10000, tgt_vocab_size=10000),
        train=TrainConfig(task="copy", batch_size=16, warmup_steps=4000),
        batch_size=16,
        src_len=25,
        tgt_len=20,
        description="the paper's base model: d 512, 8 heads, 6+6 layers, d_ff 2048",
    ),
    "long": Preset(
        name="long",
        model=ModelConfig(
            src_vocab_size=100,
            tgt_vocab_size=100,
            d_model=128,
            num_heads=4,
            num_encoder_layers=2,
            num_decoder_layers=2,
            d_ff=512,
            max_len=1024,
        ),
        train=TrainConfig(task="copy", batch_size=8),
        batch_size=8,
        src_len=512,
        tgt_len=512,
        description="long sequences: attention's O(n^2) dominates",
    ),
}


def get_preset(name: str) -> Preset:
    """Look a preset up by name, with an error that lists the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown config {name!r}: expected one of {sorted(PRESETS)}") from None
