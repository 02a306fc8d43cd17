"""mt.utils.checkpoint, as torch.utils.checkpoint: activation checkpointing, recomputing instead of keeping.

    y = checkpoint(block, x, use_reentrant=False)   # block's activations are not kept ...
    y.sum().backward()                              # ... block runs again, once, in the backward

Built as torch's non-reentrant checkpoint is, on saved-tensor hooks (mt.autograd.graph):
  - forward: `fn` runs under hooks whose pack drops every array a node of fn saves and keeps only its
    number, its shape and its dtype. The graph is the plain one; only the saved arrays are gone.
  - backward: the first unpack runs fn once more, on the same inputs, with the random generator put back
    where it was at the first run (preserve_rng_state, so dropout draws the same masks) and then restored,
    and collects what the recomputed nodes save, in the same order; each unpack hands a node its own.
  - the determinism check: the recompute must save as many arrays, of the same shapes and dtypes, as the
    first run; otherwise a CheckpointError says which one differs.
The recomputed graph itself is dropped: the gradients flow through the first run's nodes, so loss and
gradients are bitwise those of the plain run, and create_graph works as it does there.

context_fn, as torch's: a function returning two context managers, the first entered around the first run,
the second around the recompute (parity/hooks.py uses it to replay its shared dropout masks, which come
from a stream of their own, as preserve_rng_state replays the engine's generator).

use_reentrant=True (torch's older variant, a Function around the segment) is refused with a clear error.
Deviation from PyTorch, flagged: the default is use_reentrant=False; torch 2.13's default (None) warns and
takes the reentrant variant. Not supported: debug, early_stop (the recompute always runs fn to its end).
"""

from __future__ import annotations

import contextlib

from ..autograd import enable_grad, is_grad_enabled, is_tensor_like
from ..autograd.graph import saved_tensors_hooks
from ..random import get_rng_state, randomness_refused, set_rng_state

__all__ = ["CheckpointError", "checkpoint", "checkpoint_sequential", "noop_context_fn"]


def noop_context_fn():
    """checkpoint's default context_fn (torch's name): no context around either run."""
    return contextlib.nullcontext(), contextlib.nullcontext()


class CheckpointError(RuntimeError):
    """The recompute differed from the first run (torch.utils.checkpoint.CheckpointError)."""


def _refuse_reentrant(who: str, use_reentrant) -> None:
    if use_reentrant is True:
        raise ValueError(
            f"{who}: use_reentrant=True is not supported here; pass use_reentrant=False (the variant torch "
            f"recommends, built on saved-tensor hooks, which this engine implements)"
        )
    if use_reentrant not in (False, None):
        raise TypeError(f"{who}: use_reentrant must be True or False, got {use_reentrant!r}")


def checkpoint(
    function,
    *args,
    use_reentrant=False,
    context_fn=noop_context_fn,
    determinism_check: str = "default",
    preserve_rng_state: bool = True,
    **kwargs,
):
    """function(*args, **kwargs), keeping none of the arrays its nodes save: the backward recomputes them by
    running function once more. Non-tensor arguments pass through, and the result is returned as it comes (a
    Tensor, or any structure of them, dicts, lists and tuples, non-tensor leaves included), as torch's: the
    backward reaches the segment's graph through whatever tensors of it are used, wherever they came out."""
    _refuse_reentrant("checkpoint", use_reentrant)
    if not callable(function):
        raise TypeError(f"checkpoint: function must be callable, got {type(function).__name__}")
    if determinism_check not in ("default", "none"):
        raise ValueError(f"checkpoint: determinism_check must be 'default' or 'none', got {determinism_check!r}")
    if not is_grad_enabled():  # nothing is recorded, so nothing is saved: a plain call
        return function(*args, **kwargs)
    if not callable(context_fn):
        raise TypeError(f"checkpoint: context_fn must be callable, got {type(context_fn).__name__}")
    first_run, recompute_context = context_fn()
    frame = _Frame(function, args, kwargs, preserve_rng_state, determinism_check == "default", recompute_context)
    with saved_tensors_hooks(frame.pack, frame.unpack), first_run:
        return function(*args, **kwargs)


class _Frame:
    """One checkpointed call: what its pack kept (per saved array: shape and dtype), and the recompute."""

    def __init__(self, function, args, kwargs, preserve_rng_state: bool, check: bool, context):
        self.function, self.kwargs, self.check, self.context = function, kwargs, check, context
        # the inputs, detached (a recompute records a graph of its own, which is dropped), each requiring grad
        # as the original does, so that the recompute records the same nodes and they save the same arrays
        self.args = tuple(a.detach().requires_grad_(a.requires_grad) if is_tensor_like(a) else a for a in args)
        # each tensor argument's version now: an in-place change before the backward would make the recompute
        # compute other values, silently where no node saved that argument itself. Refused (torch does not check)
        # (a tensor inside a list, tuple or dict argument too: the recompute reads it all the same)
        self.versions = [(i, t, t.version_counter.value) for i, a in enumerate(self.args) for t in _tensors_in(a)]
        self.rng_state = get_rng_state() if preserve_rng_state else None
        self.packed = []  # per pack of the first run: (shape, dtype)
        self.recomputed = {}  # pack number -> the recomputed Tensor, until its unpack takes it
        self.recomputations = 0  # how many times function ran again (tests count it)

    def pack(self, t):
        self.packed.append((t.shape, t.dtype))
        return len(self.packed) - 1

    def unpack(self, number: int):
        if number not in self.recomputed:  # the first unpack of this backward: run function again, once
            self.recompute()
        return self.recomputed.pop(number)

    def recompute(self) -> None:
        name = getattr(self.function, "__name__", type(self.function).__name__)
        for i, t, version in self.versions:
            now = t.version_counter.value
            if now != version:
                raise RuntimeError(
                    f"checkpoint: argument {i} of {name} was changed in place after the checkpointed call (version "
                    f"{version}, now {now}): the backward's recompute would run on other values. Change it after "
                    f"the backward, or pass a .clone()"
                )
        kept = []

        def keep(t):
            kept.append(t)
            return t

        state_now = get_rng_state()
        if self.rng_state is not None:  # replay the first run's draws (dropout masks), then give back the stream
            set_rng_state(self.rng_state)
        # a replay draws nothing new, so it is allowed where a transform refuses new draws (jacrev's backward rows)
        replay = randomness_refused(None) if self.rng_state is not None else contextlib.nullcontext()
        try:
            with enable_grad(), saved_tensors_hooks(keep, _never_unpacked), self.context, replay:
                self.function(*self.args, **self.kwargs)
        finally:
            if self.rng_state is not None:
                set_rng_state(state_now)
        self.recomputations += 1
        self._check(kept)
        self.recomputed = dict(enumerate(kept))

    def _check(self, kept: list) -> None:
        name = getattr(self.function, "__name__", type(self.function).__name__)
        if len(kept) != len(self.packed):
            raise CheckpointError(
                f"checkpoint: recomputing {name} saved {len(kept)} arrays for the backward, the first run saved "
                f"{len(self.packed)}: the function must record the same operations each time it runs"
            )
        if not self.check:
            return
        for i, (t, (shape, dtype)) in enumerate(zip(kept, self.packed)):
            if (t.shape, t.dtype) != (shape, dtype):
                raise CheckpointError(
                    f"checkpoint: recomputed values have different metadata than during the forward pass: saved "
                    f"array {i} of {name} was {dtype} {shape} in the first run and is {t.dtype} {t.shape} in the "
                    f"recompute; the function must run the same way each time (pass determinism_check='none' "
                    f"to skip this check)"
                )


def _tensors_in(value) -> list:
    """The tensors of an argument: itself, or those inside a (nested) list, tuple or dict."""
    if is_tensor_like(value):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_in(v)]
    return []


def _never_unpacked(t):  # pragma: no cover - the recomputed graph is dropped, never backpropagated
    raise RuntimeError("checkpoint: a recomputed graph was backpropagated")


def checkpoint_sequential(functions, segments: int, input, use_reentrant=False, **kwargs):
    """torch.utils.checkpoint.checkpoint_sequential: functions (a list, or an nn.Sequential's children) run in
    order on input, split into `segments` segments of len // segments functions; every segment but the last
    is checkpointed (the last runs plainly: its backward comes first). kwargs: preserve_rng_state only."""
    _refuse_reentrant("checkpoint_sequential", use_reentrant)
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError(f"checkpoint_sequential: unexpected keyword arguments: {', '.join(kwargs)}")
    if hasattr(functions, "children") and callable(functions.children):
        functions = list(functions.children())
    functions = list(functions)
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be an int >= 1, got {segments!r}")
    if segments > len(functions):
        raise ValueError(
            f"checkpoint_sequential: segments={segments} is larger than the number of functions "
            f"({len(functions)}): each segment needs at least one"
        )

    def run(start: int, end: int):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x

        return forward

    size, end = len(functions) // segments, -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=False, preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
