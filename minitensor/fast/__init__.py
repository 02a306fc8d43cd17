"""Speed devices: each registered against the plain formula it replaces, and switchable back to it.

The plain formula is the truth: it is declared where a reader meets the idea (an op, the engine's core, the
decoder) and it is what runs with speed off. A speed device is a faster way to the same numbers; it lives in a
module of this package and registers against the formula's name. The call site reads the slot, one attribute:

    fast.formula("softmax_grad", softmax_grad)        # beside the formula (ops/rowwise.py, say)
    fast.use.softmax_grad(g, y)                       # where it runs: the device, or the formula with speed off
    fast.device("softmax_grad", blocked_softmax_grad) # in fast/rowwise.py, with the page that measured it

A slot may belong to another object (`owner=`): the engine's core keeps its own points (core/points.py) and
imports nothing from here, so its formulas are declared with that owner and a device is put there in its place.

`MT_FAST=0` in the environment, or `set_enabled(False)`, runs the formulas alone (`MT_FAST_WITHOUT=name,...` turns
off the devices named, for measuring one device against its formula); `registered()` lists every
formula with its device, for the tests that check each device equal to its formula (tests/minitensor/fast/).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass


class _Slots:
    """The implementation in force for each registered name: `fast.use.<name>`."""

    def __repr__(self):
        return f"<fast.use: {', '.join(sorted(_entries))}>"


use = _Slots()


@dataclass
class Entry:
    """A registered formula and, once one registers, its speed device."""

    name: str
    formula: object
    owner: object
    attr: str
    device: object = None
    evidence: str = ""  # the decision page that measured the device's gain

    def install(self, speed: bool) -> None:
        on = speed and self.device is not None and self.name not in _WITHOUT
        setattr(self.owner, self.attr, self.device if on else self.formula)


_entries: dict[str, Entry] = {}


def _enabled_from_environment() -> bool:
    value = os.environ.get("MT_FAST", "1").strip()
    if value not in ("0", "1"):
        raise ValueError(f"MT_FAST must be 0 (the plain formulas alone) or 1 (speed devices on), got {value!r}")
    return value == "1"


_speed = _enabled_from_environment()
# MT_FAST_WITHOUT=name,name: those devices off, the others on (an A/B measurement of one device in its own process)
_WITHOUT = frozenset(n.strip() for n in os.environ.get("MT_FAST_WITHOUT", "").split(",") if n.strip())


def formula(name: str, fn, owner=None, attr: str | None = None):
    """Declare `fn` as the plain formula of `name`, and put it in its slot (`use.<name>`, or `owner.<attr>`) until a
    device registers. Returns fn, so it can decorate the formula's definition."""
    if name in _entries and _entries[name].formula is not fn:
        raise ValueError(f"fast.formula: {name!r} is declared twice")
    entry = _entries.get(name) or Entry(name, fn, use if owner is None else owner, attr or name)
    _entries[name] = entry
    entry.install(_speed)
    return fn


def device(name: str, fn, evidence: str):
    """Register `fn` as the speed device of formula `name` (declared first); `evidence` names the decision page with
    its measured gain. Returns fn."""
    entry = _entries.get(name)
    if entry is None:
        raise KeyError(
            f"fast.device: no formula named {name!r} is declared (fast.formula first); have {sorted(_entries)}"
        )
    if entry.device is not None and entry.device is not fn:
        raise ValueError(f"fast.device: {name!r} has a device already ({entry.device!r})")
    if not evidence:
        raise ValueError(f"fast.device: {name!r} needs the page that measured its gain (evidence=)")
    entry.device, entry.evidence = fn, evidence
    entry.install(_speed)
    return fn


def enabled() -> bool:
    """Whether the speed devices are in force (MT_FAST, set_enabled)."""
    return _speed


def set_enabled(flag: bool) -> None:
    """Put every device in force (True) or every plain formula (False), in every slot at once."""
    global _speed
    if not isinstance(flag, bool):
        raise TypeError(f"fast.set_enabled: expected True or False, got {type(flag).__name__}")
    _speed = flag
    for entry in _entries.values():
        entry.install(flag)


@contextmanager
def speed(flag: bool):
    """`with fast.speed(False):` runs the block on the plain formulas, then puts back what was in force."""
    before = _speed
    set_enabled(flag)
    try:
        yield
    finally:
        set_enabled(before)


def registered() -> dict[str, Entry]:
    """Every declared formula by name, with its device (None where none registered)."""
    return dict(_entries)
