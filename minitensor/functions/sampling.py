"""torch.multinomial and torch.bernoulli: indices drawn from the categorical distributions that the rows of a tensor
give, and 0/1 draws with the probabilities a tensor holds.

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

__all__ = ["bernoulli", "multinomial"]


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


def bernoulli(input, p=None, *, generator=None):
    """1 with probability input (each entry a probability in [0, 1]), else 0, in input's dtype; with a number p, every
    entry drawn with probability p instead. Deviation, flagged: the result is a constant (torch's records a zero
    gradient toward input: the same contribution, but input.grad stays None here where torch's is zeros)."""
    t = check_tensor(input, "bernoulli", "input")
    if t.dtype.kind != "f":
        raise TypeError(f"bernoulli: input must be a floating-point tensor (probabilities), got {t.dtype}")
    probs = devices.to_host(t._data) if p is None else bernoulli_probability("bernoulli", p)
    return t.wrap(draw_bernoulli("bernoulli", probs, t.shape, t.dtype, t.device, generator))


def bernoulli_probability(op: str, p):
    """p as the probabilities to draw with: a number, or a Tensor's host array, each in [0, 1]."""
    if isinstance(p, builtins.bool) or not isinstance(p, numbers.Real):
        p = devices.to_host(check_tensor(p, op, "p")._data)
    return p


def draw_bernoulli(op: str, probs, shape: tuple, dtype, device, gen):
    """Draws of 0 or 1 of `shape` and `dtype` on `device`, 1 with probability `probs` (broadcast to shape)."""
    probs = np.asarray(probs, dtype=np.float64)
    if not np.all((probs >= 0) & (probs <= 1)):  # NaN fails both
        raise ValueError(f"{op}: probabilities must be in [0, 1], got {probs[~((probs >= 0) & (probs <= 1))][0]}")
    try:
        probs = np.broadcast_to(probs, shape)
    except ValueError:
        raise ValueError(f"{op}: probabilities of shape {probs.shape} do not broadcast to {shape}") from None
    out = (stream(op, gen).random(shape) < probs).astype(dtype)
    return devices.to_device(out, device) if device != devices.CPU else out
