"""torch.multinomial: indices drawn from the categorical distributions that the rows of a tensor give.

The draw is made on the host from minitensor's stream (random.py), or the `generator=` one, so one seed gives the
same indices on every device; they are not torch's indices (its streams differ), but the same distribution.
"""

from __future__ import annotations

import builtins
import numbers

import numpy as np

from .. import devices
from ..arguments import check_tensor
from ..random import generator as stream

__all__ = ["multinomial"]


def multinomial(input, num_samples: int, replacement: builtins.bool = False, *, generator=None):
    """num_samples category indices per row of input (1-D: one distribution, 2-D: one per row), category k drawn
    with probability input[k] / sum(input) (weights need not sum to 1). Without replacement each row's indices are
    distinct, drawn one after another from the weights left (torch's rule); categories of zero weight come only
    after every category of nonzero weight was drawn, as in torch."""
    t = check_tensor(input, "multinomial", "input")
    if t.dtype.kind != "f":
        raise TypeError(f"multinomial: input must be a floating-point tensor, got {t.dtype}")
    if t.ndim not in (1, 2):
        raise ValueError(f"multinomial: input must be 1-D or 2-D (one distribution per row), got shape {t.shape}")
    if not isinstance(num_samples, numbers.Integral) or isinstance(num_samples, builtins.bool) or num_samples <= 0:
        raise ValueError(f"multinomial: num_samples must be a positive int, got {num_samples!r}")
    p = devices.to_host(t._data).astype(np.float64).reshape(-1, t.shape[-1])
    if p.shape[1] == 0:
        raise ValueError("multinomial: input has no categories (its last dim is 0)")
    if not np.isfinite(p).all() or (p < 0).any():
        raise ValueError("multinomial: probability tensor contains either inf, nan or element < 0")
    if (p.sum(axis=1) <= 0).any():
        raise ValueError("multinomial: invalid distribution, a row's weights sum to 0")
    rng = stream("multinomial", generator)
    if replacement:
        # the inverse of each row's cumulative distribution at uniform draws; dividing by the last entry makes it
        # exactly 1, so a draw u < 1 never passes the last category of nonzero weight
        cdf = np.cumsum(p, axis=1)
        cdf /= cdf[:, -1:]
        u = rng.random((p.shape[0], num_samples))
        out = np.stack([np.searchsorted(c, row, side="right") for c, row in zip(cdf, u)])
    else:
        if num_samples > p.shape[1]:
            raise ValueError(
                f"multinomial: cannot draw {num_samples} samples without replacement from {p.shape[1]} categories"
            )
        # the exponential race: category k finishes after an Exp(1) time divided by its weight, and the first
        # num_samples finishers are a draw without replacement in order; as speeds p / Exp(1), zero weights last
        speeds = p / rng.exponential(size=p.shape)
        out = np.argsort(-speeds, axis=1, kind="stable")[:, :num_samples]
    out = out.astype(np.int64).reshape(t.shape[:-1] + (num_samples,))
    return t.wrap(devices.to_device(out, t.device) if t.device != devices.CPU else out)
