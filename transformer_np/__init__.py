"""transformer_np: the encoder-decoder Transformer of "Attention Is All You Need" in pure NumPy, on minitensor.

What a user reaches for, importable from the package root:

    from transformer_np import Transformer, ModelConfig, TrainConfig, train, greedy_decode, beam_search

The model (`Transformer`, built from a `ModelConfig` with `Transformer.from_config`), the masks,
the toy tasks and their vocabularies, training with checkpoints and exact resume, and greedy and
beam decoding with or without the key/value cache. Plots and experiments (which need matplotlib)
and the command line are imported on use: `transformer_np.plots`, `transformer_np.experiments`,
`python -m transformer_np --help`. `transformer_np.train` is the training function; the training
package is `transformer_np.training` (`from transformer_np.training import load_checkpoint`).
"""

from .config import PRESETS, ModelConfig, Preset, TrainConfig, get_preset
from .data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    TASKS,
    UNK_ID,
    Task,
    Vocab,
    get_task,
    iterate_forever,
    make_batches,
    shift_targets,
)
from .decode import beam_search, greedy_decode, length_penalty_gnmt
from .masks import causal_mask, padding_mask, target_mask
from .model import KVCache, MultiHeadAttention, Transformer, scaled_dot_product_attention, sinusoidal_table
from .training import (
    Checkpoint,
    TrainResult,
    default_configs,
    evaluate,
    fit,
    greedy_outputs,
    load_checkpoint,
    load_history,
    train,
)

__all__ = [
    # configuration
    "ModelConfig",
    "TrainConfig",
    "Preset",
    "PRESETS",
    "get_preset",
    # the model and its parts
    "Transformer",
    "MultiHeadAttention",
    "scaled_dot_product_attention",
    "sinusoidal_table",
    "KVCache",
    "padding_mask",
    "causal_mask",
    "target_mask",
    # tasks and data
    "Task",
    "TASKS",
    "get_task",
    "Vocab",
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "UNK_ID",
    "make_batches",
    "shift_targets",
    "iterate_forever",
    # training and checkpoints
    "train",
    "fit",
    "evaluate",
    "default_configs",
    "load_checkpoint",
    "load_history",
    "Checkpoint",
    "TrainResult",
    # decoding
    "greedy_decode",
    "beam_search",
    "greedy_outputs",
    "length_penalty_gnmt",
]
