"""The parity report's hooks on the two models: what they record, and the two places they change the torch side.

    Capture              every submodule's output by path (repeat calls suffixed #2, #3...), gradients
                         retained: the report's forward and activation-gradient rows
    KeyProjectionGrads   the gradient of each key projection's output, whose rows sum to the key bias's
                         gradient: the size of that sum sets the 'zero' rule's limit
    SharedDropoutMasks   dropout keep-masks drawn on the transformer_np side and replayed on the torch side
    ReluBranchAligner    the torch side takes transformer_np's ReLU branch for pre-activations within
                         round-off of 0; every aligned entry is counted and the count is in the report
    CheckpointReplay     with activation checkpointing: the hooks record a checkpointed layer's first run
                         only, and its recompute (in the backward) replays that run's masks and alignments

Hooks work on both frameworks: minitensor's Module has register_forward_hook and Tensor.retain_grad.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch
from torch.utils.checkpoint import noop_context_fn

import minitensor as mt
from minitensor.testing import PARITY_RTOL, error_stats
from transformer_np.device import array_of

from .model import Dropout as TorchDropout
from .placement import host, like


def to_numpy(t) -> np.ndarray:
    """A torch tensor (any device), a minitensor Tensor (any device) or an array as a NumPy array."""
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().numpy()
    return host(t)


def is_tensor(t) -> bool:
    return isinstance(t, (torch.Tensor, mt.Tensor))


def _tensors(output):
    if is_tensor(output):
        return [("", output)]
    if isinstance(output, (tuple, list)):
        return [(f"[{i}]", t) for i, t in enumerate(output) if is_tensor(t)]
    return []


class _Recomputing:
    """Whether a checkpointed layer is being recomputed in a backward (CheckpointReplay sets it): the hooks then
    record nothing, and the masks and alignments of the layer's first run are replayed."""

    active = False


RECOMPUTING = _Recomputing()


class Hooks:
    """Forward hooks registered on named submodules; `remove()` takes them all off."""

    def __init__(self):
        self.handles = []

    def register(self, model, make_hook, select=lambda name: bool(name)) -> None:
        self.handles += [m.register_forward_hook(make_hook(name)) for name, m in model.named_modules() if select(name)]

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


class Capture(Hooks):
    """Every named submodule's output by path (repeat calls suffixed #2, #3...), its gradient retained."""

    def __init__(self, model):
        super().__init__()
        self.outputs = {}
        self.calls = defaultdict(int)
        self.register(model, self._hook)

    def _hook(self, name):
        def hook(module, inputs, output):
            if RECOMPUTING.active:  # the first run's outputs are the ones the backward reaches
                return
            self.calls[name] += 1
            key = name if self.calls[name] == 1 else f"{name}#{self.calls[name]}"
            for suffix, t in _tensors(output):
                if t.requires_grad:
                    t.retain_grad()
                self.outputs[key + suffix] = t

        return hook


class KeyProjectionGrads(Hooks):
    """The output of every key projection (`*.W_k`, or the modules named `*<suffix>`) at its latest call, gradient
    retained.

    After backward, `rows(name)` is dK (n, D): the key bias's gradient is its sum over the n rows.
    """

    def __init__(self, model, suffix: str = ".W_k"):
        super().__init__()
        self.outputs = {}
        self.register(model, self._hook, lambda name: name.endswith(suffix))

    def _hook(self, name):
        def hook(module, inputs, output):
            if RECOMPUTING.active:
                return
            if output.requires_grad:
                output.retain_grad()
            self.outputs[name] = output

        return hook

    def rows(self, name: str) -> np.ndarray:
        grad = self.outputs[name].grad
        if grad is None:
            raise RuntimeError(f"KeyProjectionGrads: no gradient recorded for {name}'s output")
        g = to_numpy(grad)
        return g.reshape(-1, g.shape[-1])  # (B * S_k, D)


class SharedDropoutMasks:
    """Boolean keep-masks drawn on the minitensor side and replayed on the torch side, per module in call order.

    Drawn on the host; the minitensor side gets them on its weights' device. The reference may be transformer_np on
    the CPU (--against np-cpu): its Dropout modules replay the masks as torch's do."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.recorded = defaultdict(list)
        self.position = defaultdict(int)
        self.replay = None  # while a layer is recomputed: name -> the masks of its first run, in order

    def attach(self, np_model, torch_model) -> None:
        weight = array_of(next(iter(np_model.parameters())))
        self.place = lambda keep: like(keep, weight)
        for name, m in np_model.named_modules():
            if isinstance(m, mt.nn.Dropout):
                m.mask_fn = self._recorder(name, m.p)
        for name, m in torch_model.named_modules():
            if isinstance(m, (TorchDropout, mt.nn.Dropout)):
                m.mask_fn = self._replayer(name)

    def detach(self, np_model, torch_model) -> None:
        for model in (np_model, torch_model):
            for _, m in model.named_modules():
                if hasattr(m, "mask_fn"):
                    m.mask_fn = None

    def _again(self, name: str):
        """The mask a recomputed layer's dropout used in its first run (CheckpointReplay hands them out)."""
        return next(self.replay[name])

    def _recorder(self, name, p):
        def mask_fn(shape):
            if self.replay is not None:
                return self.place(self._again(name))
            keep = self.rng.random(shape) >= p
            self.recorded[name].append(keep)
            return self.place(keep)

        return mask_fn

    def _replayer(self, name):
        def mask_fn(shape):
            if self.replay is not None:
                return self._again(name)
            i = self.position[name]
            if i >= len(self.recorded[name]):
                raise RuntimeError(f"dropout masks: torch called {name} more often ({i + 1}) than transformer_np")
            keep = self.recorded[name][i]
            if keep.shape != tuple(shape):
                raise RuntimeError(
                    f"dropout masks: {name} call {i + 1}: transformer_np drew {keep.shape}, torch wants {shape}"
                )
            self.position[name] += 1
            return keep

        return mask_fn

    def finish_step(self) -> None:
        """Check every recorded mask was replayed, then forget them."""
        unused = {k: len(v) - self.position[k] for k, v in self.recorded.items() if len(v) != self.position[k]}
        if unused:
            raise RuntimeError(f"dropout masks: torch did not use every mask transformer_np drew: {unused}")
        self.recorded.clear()
        self.position.clear()


class ReluBranchAligner(Hooks):
    """Make torch take transformer_np's branch of ReLU where the two disagree only by round-off.

    ReLU's derivative jumps at 0. In float32 a pre-activation within round-off of 0 (about 1e-7
    of the terms summed into it) can be +1e-7 on one side and -1e-7 on the other: both are right
    to float32 precision, yet one side passes the gradient and the other blocks it, and every
    gradient below differs by a whole gradient element. So, on the torch side only, a forward
    hook on each feed-forward `linear1` replaces the few such entries by transformer_np's value
    (they already agree within the forward tolerance, which is checked first) and counts them.
    Only entries whose signs differ and whose values agree within PARITY_RTOL are touched; the
    correction is a constant, so gradients flow as before. Not used with GELU (smooth).

    `aligned` / `seen`: entries replaced / ReLU inputs compared, over the whole run (the report's
    header shows both).
    """

    def __init__(self, np_model, torch_model, dtype: str):
        super().__init__()
        self.rtol = PARITY_RTOL[dtype]
        self.last = {}
        self.applied = {}  # name -> the correction the torch side's first run added (a recompute adds it again)
        self.aligned = 0
        self.seen = 0
        ffn = lambda name: name.endswith("feed_forward.linear1")
        self.register(np_model, self._record, ffn)
        self.register(torch_model, self._align, ffn)

    def _record(self, name):
        def hook(module, inputs, output):
            if not RECOMPUTING.active:
                self.last[name] = to_numpy(output)

        return hook

    def _align(self, name):
        def hook(module, inputs, output):
            if RECOMPUTING.active:  # the recompute takes the branches the first run took
                delta = self.applied.get(name)
                return None if delta is None else output + delta
            self.applied[name] = None
            ours = self.last.pop(name, None)
            if ours is None:
                return None
            ref = to_numpy(output)
            self.seen += ref.size
            flip = (ours > 0) != (ref > 0)
            if not flip.any():
                return None
            # Only a round-off disagreement is aligned: the values must agree as the forward check demands.
            _, rel = error_stats(np.where(flip, ours, ref), ref, scale_free=True)
            if rel > self.rtol:
                return None
            self.aligned += int(flip.sum())
            delta = np.where(flip, ours - ref, 0).astype(ref.dtype)
            # the reference is torch, or transformer_np on the CPU (--against np-cpu)
            delta = mt.tensor(delta) if isinstance(output, mt.Tensor) else torch.as_tensor(delta, device=output.device)
            self.applied[name] = delta
            return output + delta

        return hook


class CheckpointReplay:
    """The context_fn of both models' checkpointed stacks (mt.utils.checkpoint and torch.utils.checkpoint take
    one): around a layer's first run it keeps the shared dropout masks that run used; around its recompute in
    the backward it sets RECOMPUTING and hands the layer those masks again, as preserve_rng_state replays a
    generator. Without it a recompute would draw (or replay) the next masks."""

    def __init__(self, masks: SharedDropoutMasks | None):
        self.masks = masks

    def attach(self, np_model, torch_model) -> None:
        for model, side in ((np_model, "np"), (torch_model, "torch")):
            for stack in (model.encoder, model.decoder):
                stack.checkpoint_context_fn = lambda side=side: self.context_fn(side)

    def detach(self, np_model, torch_model) -> None:
        for model in (np_model, torch_model):
            noop = noop_context_fn if isinstance(model, torch.nn.Module) else mt.utils.checkpoint.noop_context_fn
            for stack in (model.encoder, model.decoder):
                stack.checkpoint_context_fn = noop

    def context_fn(self, side: str):
        first = _FirstRun(self.masks, side)
        return first, _Recompute(self.masks, first)


class _FirstRun:
    """Entered around a checkpointed layer's first run: keeps the masks it used (`used`, name -> list)."""

    def __init__(self, masks, side: str):
        self.masks, self.side, self.used = masks, side, {}

    def _where(self) -> dict:
        m = self.masks
        return dict(m.position) if self.side == "torch" else {k: len(v) for k, v in m.recorded.items()}

    def __enter__(self):
        self.start = self._where() if self.masks is not None else {}

    def __exit__(self, *exc):
        if self.masks is not None:
            for name, end in self._where().items():
                self.used[name] = self.masks.recorded[name][self.start.get(name, 0) : end]
        return False


class _Recompute:
    """Entered around a checkpointed layer's recompute: RECOMPUTING on, the first run's masks handed out again."""

    def __init__(self, masks, first: _FirstRun):
        self.masks, self.first = masks, first

    def __enter__(self):
        RECOMPUTING.active = True
        if self.masks is not None:
            self.masks.replay = {name: iter(used) for name, used in self.first.used.items()}

    def __exit__(self, *exc):
        RECOMPUTING.active = False
        if self.masks is not None:
            self.masks.replay = None
        return False
