"""Memory formats, as torch.memory_format: contiguous_format, preserve_format, channels_last, channels_last_3d.

A minitensor tensor is a NumPy array, and a NumPy array has strides, so channels_last is a true layout here: the
(N, C, H, W) tensor whose memory runs in (N, H, W, C) order, as PyTorch lays it out. NumPy's elementwise ops keep
that order (order='K'), and .contiguous() returns to C order, as in PyTorch. No op here reads the layout (there
are no convolutions, whose kernels PyTorch picks by it), so it changes neither values nor gradients: code written
for torch that asks for it runs unchanged, and `x.numpy().strides` shows the layout it asked for.
"""

from __future__ import annotations


class memory_format:
    """torch.memory_format: one of the four module-level names below (repr 'minitensor.channels_last')."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"minitensor.{self.name}"


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")

RANKS = {channels_last: 4, channels_last_3d: 5}  # the rank each channels-last format lays out


def in_memory_format(t, fmt, op: str):
    """t laid out in `fmt`, t itself where it already is: preserve_format keeps t as it is, contiguous_format is
    t.contiguous() (C order), channels_last(_3d) puts the channel dim 1 last in memory, through a differentiable
    copy (a permutation, a C-order copy and the inverse permutation: the gradient passes unchanged)."""
    if fmt is preserve_format:
        return t
    if fmt is contiguous_format:
        return t.contiguous()
    if fmt not in RANKS:
        raise TypeError(
            f"{op}: memory_format must be mt.contiguous_format, mt.preserve_format, mt.channels_last or "
            f"mt.channels_last_3d, got {fmt!r}"
        )
    rank = RANKS[fmt]
    if t.ndim != rank:
        raise ValueError(f"{op}: memory_format={fmt!r} needs a tensor of {rank} dims (N, C, ...), got shape {t.shape}")
    channels_last_order = (0, *range(2, rank), 1)  # (N, *spatial, C)
    if t._data.transpose(channels_last_order).flags.c_contiguous:
        return t
    return t.permute(*channels_last_order).contiguous().permute(0, rank - 1, *range(1, rank - 1))
