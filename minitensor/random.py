"""The one seeded random generator behind every random number minitensor draws.

`mt.randn`, `mt.rand`, `mt.randint`, `nn.init`, and dropout all draw from `generator(op)`, which refuses a draw
inside an mt.func transform in torch.func's randomness error mode (`randomness_refused`, used by func/forward.py).
`manual_seed` reseeds that same object in place, so a reference taken earlier stays valid.
The default seed is fixed (PyTorch's default CPU seed), so an unseeded run is reproducible too.
The streams are NumPy's PCG64, not PyTorch's Philox/MT: the same seed gives different numbers
than torch, which is why the parity checks copy weights and dropout masks instead of reseeding.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

DEFAULT_SEED = 67280421310721  # torch.initial_seed() of a fresh process

_generator = np.random.Generator(np.random.PCG64(DEFAULT_SEED))


class RandomnessError:
    """Set while a transform runs its function (or a backward) once per batch element in torch.func's randomness
    error mode (mt.func's jacfwd, hessian, jacrev's rows): a draw then raises, naming the op, as torch's vmap does.
    `advice` completes the sentence "who: called random operation op ...": why it is refused, and what to do."""

    who: str | None = None
    advice: str = ""


_refusing = RandomnessError()


@contextmanager
def randomness_refused(who: str | None, advice: str = ""):
    """Inside the block every draw raises, as the transform `who` asks (who=None: draws allowed again, as where a
    checkpoint's recompute replays the forward's draws)."""
    before = (_refusing.who, _refusing.advice)
    _refusing.who, _refusing.advice = who, advice
    try:
        yield
    finally:
        _refusing.who, _refusing.advice = before


def generator(op: str = "a random operation", gen: Generator | None = None) -> np.random.Generator:
    """The stream the random op `op` draws from: the process-wide one (the same object across manual_seed calls),
    or that of `gen`, a Generator the caller passed as `generator=`.
    Refused inside a transform in randomness error mode (randomness_refused)."""
    if _refusing.who is not None:
        raise RuntimeError(f"{_refusing.who}: called random operation {op} {_refusing.advice}")
    if gen is None:
        return _generator
    if not isinstance(gen, Generator):
        raise TypeError(f"{op}: generator must be a minitensor.Generator, got {type(gen).__name__}")
    return gen._rng


def manual_seed(seed: int) -> np.random.Generator:
    """Reseed the generator; like torch.manual_seed, returns it."""
    _check_seed(seed)
    _generator.bit_generator.state = np.random.PCG64(int(seed) & ((1 << 128) - 1)).state
    return _generator


def get_rng_state() -> dict:
    """The generator's state as a plain dict of ints and strings (JSON-serialisable)."""
    return _generator.bit_generator.state


def set_rng_state(state: dict) -> None:
    """Restore a state returned by get_rng_state (e.g. from a checkpoint)."""
    _check_state(state, "set_rng_state")
    _generator.bit_generator.state = state


class Generator:
    """torch.Generator: a random stream of its own, for the `generator=` argument of the random functions
    (rand, randn, randint, randperm, normal, multinomial, ...). A new one starts from the default seed, as torch's.
    The stream is NumPy's PCG64, so the same seed gives different numbers than torch's (see above); get_state
    returns a plain dict, where torch returns a uint8 tensor."""

    def __init__(self, device="cpu"):
        if str(device) != "cpu":
            raise ValueError(f"Generator: only device='cpu' is supported, got {device!r}")
        self._seed = DEFAULT_SEED
        self._rng = np.random.Generator(np.random.PCG64(DEFAULT_SEED))

    def manual_seed(self, seed: int) -> Generator:
        """Reseed in place; like torch's, returns the generator."""
        _check_seed(seed)
        self._seed = int(seed)
        self._rng.bit_generator.state = np.random.PCG64(int(seed) & ((1 << 128) - 1)).state
        return self

    def initial_seed(self) -> int:
        return self._seed

    def seed(self) -> int:
        """Reseed from fresh operating-system entropy; returns the new seed, as torch's."""
        new = int(np.random.SeedSequence().entropy) & ((1 << 63) - 1)
        self.manual_seed(new)
        return new

    def get_state(self) -> dict:
        return self._rng.bit_generator.state

    def set_state(self, state: dict) -> Generator:
        _check_state(state, "Generator.set_state")
        self._rng.bit_generator.state = state
        return self


def _check_seed(seed) -> None:
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise TypeError(f"manual_seed expects an int, got {type(seed).__name__}")


def _check_state(state, op: str) -> None:
    if not isinstance(state, dict) or state.get("bit_generator") != "PCG64":
        raise ValueError(f"{op} expects a PCG64 state dict from get_state(), got {state!r:.80}")
