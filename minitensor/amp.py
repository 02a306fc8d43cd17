"""torch.amp: autocast and GradScaler, for the CPU programs that name mixed precision without using it.

minitensor has no mixed-precision autocast. autocast(..., enabled=False) and GradScaler(enabled=False) are torch's
no-ops, and so is what torch itself disables: autocast(device_type='cuda') and GradScaler() where no GPU answers
(torch warns and turns them off; here too). An autocast or a GradScaler that would really run is one clear error:
cast explicitly instead (model.half(), x.to(mt.float16)).
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from . import devices

__all__ = ["CudaAutocast", "CudaGradScaler", "GradScaler", "autocast"]


def _refuse(what: str) -> None:
    raise NotImplementedError(
        f"{what}: minitensor has no automatic mixed precision; pass enabled=False, or cast explicitly "
        f"(model.half(), x.to(mt.float16))"
    )


def _runs(what: str, device_type: str, enabled: bool) -> bool:
    """Whether torch would really run this: enabled, and for 'cuda' a GPU there (else torch warns and disables)."""
    if not isinstance(enabled, bool):
        raise TypeError(f"{what}: enabled must be a bool, got {type(enabled).__name__}")
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f"{what}: device_type must be 'cpu' or 'cuda', got {device_type!r}")
    if enabled and device_type == "cuda" and not devices.cuda.is_available():
        warnings.warn(
            f"{what}: device 'cuda' asked for, but CUDA is not available; disabling it (as torch)", stacklevel=3
        )
        return False
    return enabled


class autocast:
    """autocast(device_type, dtype=None, enabled=True, cache_enabled=None): a no-op when disabled (a context
    manager and a decorator, as torch's); enabled where it would run, NotImplementedError."""

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled=None):
        self.device_type, self.fast_dtype = device_type, dtype
        if _runs("autocast", device_type, enabled):
            _refuse(f"autocast(device_type={device_type!r})")
        self.enabled = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def disabled(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return disabled


class GradScaler:
    """GradScaler(device='cuda', init_scale=2**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
    enabled=True): torch's disabled scaler, whose scale() returns the loss as it is and step() calls the
    optimizer's step; one that would run is NotImplementedError."""

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ):
        if _runs("GradScaler", device, enabled):
            _refuse(f"GradScaler(device={device!r})")
        self._enabled = False

    def is_enabled(self) -> bool:
        return self._enabled

    def scale(self, outputs):
        return outputs

    def unscale_(self, optimizer) -> None:
        pass

    def step(self, optimizer, *args, **kwargs):
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None) -> None:
        pass

    def get_scale(self) -> float:
        return 1.0

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state_dict) -> None:
        if state_dict:
            raise ValueError("GradScaler.load_state_dict: a disabled scaler has no state; got a non-empty one")


# ---------------------------------------------------------------------------------------- the deprecated spellings
# torch.cuda.amp.autocast(...) and torch.cuda.amp.GradScaler(...) are torch.amp's with device 'cuda' (deprecated in
# torch, with a FutureWarning, still in much code); torch.autocast is torch.amp.autocast. mt.cuda.amp is `cuda` below.


class CudaAutocast(autocast):
    """torch.cuda.amp.autocast(enabled=True, dtype=float16, cache_enabled=True): autocast('cuda', ...)."""

    def __init__(self, enabled: bool = True, dtype=np.float16, cache_enabled: bool = True):
        warnings.warn(
            "`torch.cuda.amp.autocast(args...)` is deprecated. "
            "Please use `torch.amp.autocast('cuda', args...)` instead.",  # torch's words
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", dtype, enabled, cache_enabled)


class CudaGradScaler(GradScaler):
    """torch.cuda.amp.GradScaler(init_scale=2**16, ...): GradScaler('cuda', ...)."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ):
        warnings.warn(
            "`torch.cuda.amp.GradScaler(args...)` is deprecated. "
            "Please use `torch.amp.GradScaler('cuda', args...)` instead.",  # torch's words
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


class _CudaAmp:
    """torch.cuda.amp's two names."""

    autocast = CudaAutocast
    GradScaler = CudaGradScaler


cuda = _CudaAmp()
