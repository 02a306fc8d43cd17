"""Configurations shared by transformer_np, parity and benchmarks.

`ModelConfig` holds exactly the arguments of `transformer_np.model.Transformer` (and of
`parity.model.Transformer`, which imports this file rather than copying it). `TrainConfig`
holds the training recipe. `PRESETS` names the seeds' configurations; each preset also fixes
the batch shape used by the parity report and the benchmarks.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelConfig:
    src_vocab_size: int                 # V_src, specials included
    tgt_vocab_size: int                 # V_tgt, specials included
    d_model: int = 512                  # D, width of every residual stream
    num_heads: int = 8                  # H; D must be divisible by H
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_ff: int = 2048                    # hidden width of the position-wise feed-forward net
    dropout: float = 0.1                # one rate for embeddings, attention weights, sublayers
    max_len: int = 5000                 # longest sequence the positional encoding covers
    norm_first: bool = False            # False: post-norm (paper, seeds 003/004); True: pre-norm (seeds 000/001)
    final_norm: bool = False            # a LayerNorm after the last encoder and decoder layer
    activation: str = "relu"            # 'relu' or 'gelu' inside the feed-forward net
    positional: str = "sinusoidal"      # 'sinusoidal' (paper) or 'learned'
    tie_embeddings: bool = False        # share the target embedding with the output projection

    def replace(self, **changes) -> "ModelConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TrainConfig:
    task: str = "copy-reverse"          # a name from transformer_np.data.TASKS
    steps: int = 3000                   # optimizer steps
    batch_size: int = 32
    lr: float = 1.0                     # with schedule='warmup' this multiplies d_model^-0.5 * min(...)
    schedule: str = "warmup"            # 'warmup' (paper), 'step' (seed 003's StepLR) or 'constant'
    warmup_steps: int = 400
    step_size: int = 1000               # StepLR period, in optimizer steps
    gamma: float = 0.5                  # StepLR factor
    betas: tuple = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    clip_grad_norm: float = 1.0         # 0 disables clipping
    train_size: int = 5000              # examples generated for training
    eval_size: int = 500                # held-out examples
    seed: int = 0
    eval_every: int = 500
    checkpoint_every: int = 1000

    def replace(self, **changes) -> "TrainConfig":
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
    batch_size: int                     # B of the reference batch (parity report, benchmarks)
    src_len: int                        # S of the reference batch
    tgt_len: int                        # T of the reference batch
    description: str = ""


PRESETS: dict[str, Preset] = {
    "copy": Preset(
        name="copy",
        model=ModelConfig(src_vocab_size=100, tgt_vocab_size=100, d_model=128, num_heads=4,
                          num_encoder_layers=2, num_decoder_layers=2, d_ff=512, dropout=0.1, max_len=5000),
        train=TrainConfig(task="copy", steps=1500, batch_size=32, warmup_steps=300),
        batch_size=32, src_len=10, tgt_len=10,
        description="seed 000: copy 10 tokens from a vocabulary of 100",
    ),
    "copy-reverse": Preset(
        name="copy-reverse",
        model=ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=128, num_heads=8,
                          num_encoder_layers=3, num_decoder_layers=3, d_ff=512, dropout=0.1, max_len=50),
        train=TrainConfig(task="copy-reverse", steps=3000, batch_size=32, warmup_steps=400),
        batch_size=32, src_len=12, tgt_len=22,
        description="seed 003: target = input + reversed input, vocabulary 20, lengths 3-10",
    ),
    "toy-translation": Preset(
        name="toy-translation",
        # vocabulary sizes are set from the shipped corpus when the task is built
        model=ModelConfig(src_vocab_size=64, tgt_vocab_size=64, d_model=64, num_heads=4,
                          num_encoder_layers=2, num_decoder_layers=2, d_ff=256, dropout=0.1, max_len=64),
        train=TrainConfig(task="toy-translation", steps=600, batch_size=16, warmup_steps=100,
                          label_smoothing=0.0),
        batch_size=16, src_len=8, tgt_len=8,
        description="seeds 001/004: a small parallel corpus of short sentences",
    ),
    "base": Preset(
        name="base",
        model=ModelConfig(src_vocab_size=10000, tgt_vocab_size=10000),
        train=TrainConfig(task="copy", batch_size=16, warmup_steps=4000),
        batch_size=16, src_len=25, tgt_len=20,
        description="the paper's base model: d 512, 8 heads, 6+6 layers, d_ff 2048",
    ),
    "long": Preset(
        name="long",
        model=ModelConfig(src_vocab_size=100, tgt_vocab_size=100, d_model=128, num_heads=4,
                          num_encoder_layers=2, num_decoder_layers=2, d_ff=512, max_len=1024),
        train=TrainConfig(task="copy", batch_size=8),
        batch_size=8, src_len=512, tgt_len=512,
        description="long sequences: attention's O(n^2) dominates",
    ),
}


def get_preset(name: str) -> Preset:
    """Look a preset up by name, with an error that lists the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown config {name!r}: expected one of {sorted(PRESETS)}") from None
