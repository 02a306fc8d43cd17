"""Speed device of dropout's keep mask: the bytes of each entry's 32-bit uniform compared as drawn, u never formed.

The formula (`keep_mask`, minitensor/nn/functional.py) builds every entry's u = top byte << 24 | low bits and keeps
u >= t; the device compares the top bytes with t's top byte directly, and the 24 low bits with t's only where the
top bytes tie (one entry in 256). The draws, their order and the mask are the formula's, bit for bit; the generator
is left where the formula leaves it (docs/decisions/013-dropout-mask.md).
"""

from __future__ import annotations

import math

import numpy as np

from ..nn.functional import keep_mask, random_bytes
from ..random import generator
from . import device


def keep_mask_by_bytes(shape: tuple, p: float) -> np.ndarray:
    """keep_mask's mask, compared a byte (then 24 bits) at a time."""
    if p == 1.0:
        return keep_mask(shape, p)  # nothing kept, nothing drawn
    t = round(p * 2**32)
    top, low = t >> 24, t & 0xFFFFFF
    gen = generator("dropout")
    hi = random_bytes(gen, math.prod(shape))
    keep = hi > top
    tied = np.flatnonzero(hi == top)
    if tied.size:
        keep[tied] = (random_bytes(gen, 4 * tied.size).view(np.uint32) & 0xFFFFFF) >= low
    return keep.reshape(shape)


device("dropout_keep_mask", keep_mask_by_bytes, evidence="docs/decisions/013-dropout-mask.md")
