"""mt.nn.utils.rnn, as torch.nn.utils.rnn: pad_sequence, padding sequences of different lengths into one batch."""

from __future__ import annotations

from ...creation import full
from ...functions.shape import cat, stack
from ...tensor import Tensor

__all__ = ["pad_sequence"]


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"):
    """Sequences (L_i, *) -> (L, B, *) (batch_first: (B, L, *)), L = max L_i, each padded with padding_value (cast
    to the sequences' dtype) on `padding_side`. Differentiable in the sequences (a cat and a stack)."""
    if padding_side not in ("left", "right"):
        raise ValueError(f'pad_sequence: padding_side must be "left" or "right", got {padding_side!r}')
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    for k, s in enumerate(sequences):
        if not isinstance(s, Tensor) or s.ndim == 0:
            raise TypeError(f"pad_sequence: sequence {k} must be a Tensor of at least one dimension, got {s!r}")
        if s.shape[1:] != sequences[0].shape[1:] or s.dtype != sequences[0].dtype:
            raise ValueError(
                f"pad_sequence: sequence {k} is {s.dtype} {tuple(s.shape)}, but sequence 0 is {sequences[0].dtype} "
                f"{tuple(sequences[0].shape)}: every sequence must share the trailing shape and the dtype"
            )
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        pad = longest - s.shape[0]
        if pad:
            filler = full((pad, *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, filler] if padding_side == "right" else [filler, s], 0)
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)  # (B, L, *) or (L, B, *)
