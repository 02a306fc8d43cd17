"""Which features are on that need the engine's extended paths (forward mode, anomaly mode, a profile, saved-tensor
hooks, tensors on a device): `points.features` counts them, so that the core pays one test per op for all of them."""

from __future__ import annotations

from .core import points

_on: set = set()


def switch(name: str, on: bool) -> None:
    """Turn feature `name` on or off (a feature on twice is on once)."""
    if on:
        _on.add(name)
    else:
        _on.discard(name)
    points.features = len(_on)


def active() -> frozenset:
    """The features on now, by name."""
    return frozenset(_on)
