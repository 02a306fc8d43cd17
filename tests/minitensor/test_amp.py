"""mt.amp: the disabled autocast and GradScaler are torch's no-ops; an enabled one that would run is one clear error;
one that torch disables itself for want of a GPU is disabled here too, with its warning."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt


@pytest.fixture
def no_gpu():
    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU: its disabling rule does not apply")
    previous = mt.devices.use_fake_cuda(False)
    try:
        if mt.cuda.is_available():
            pytest.skip("minitensor sees a GPU")
        yield
    finally:
        mt.devices.use_fake_cuda(previous)


@pytest.mark.parametrize("lib", [mt, torch], ids=["minitensor", "torch"])
def test_disabled_autocast_and_scaler_change_nothing(lib):
    w = lib.tensor([1.0, -2.0], requires_grad=True)
    with lib.amp.autocast(device_type="cuda", enabled=False):
        loss = (w * w).sum()

    @lib.amp.autocast(device_type="cpu", enabled=False)
    def doubled(x):
        return x * 2

    assert doubled(w).dtype == w.dtype
    scaler = lib.amp.GradScaler(enabled=False)
    assert not scaler.is_enabled() and scaler.get_scale() == 1.0
    assert scaler.scale(loss) is loss
    scaler.scale(loss).backward()
    opt = lib.optim.SGD([w], lr=0.5)
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(w.detach().numpy(), [0.0, 0.0])


@pytest.mark.parametrize("lib", [mt, torch], ids=["minitensor", "torch"])
def test_cuda_autocast_and_scaler_without_a_gpu_are_disabled_with_a_warning(lib, no_gpu):
    with pytest.warns(UserWarning, match="CUDA is not available"):
        with lib.amp.autocast(device_type="cuda"):
            pass
    with pytest.warns(UserWarning, match="CUDA is not available"):
        assert not lib.amp.GradScaler().is_enabled()


def test_an_autocast_that_would_run_is_refused():
    with pytest.raises(NotImplementedError, match="no automatic mixed precision; pass enabled=False"):
        mt.amp.autocast(device_type="cpu")
    with pytest.raises(NotImplementedError, match="no automatic mixed precision"):
        mt.amp.GradScaler("cpu")
    with pytest.raises(ValueError, match="device_type must be 'cpu' or 'cuda'"):
        mt.amp.autocast(device_type="xpu", enabled=False)
    with pytest.raises(TypeError, match="enabled must be a bool"):
        mt.amp.GradScaler(enabled=0)


@pytest.mark.parametrize("lib", [mt, torch], ids=["minitensor", "torch"])
def test_the_deprecated_cuda_spellings_are_torch_amps(lib, no_gpu):
    """torch.cuda.amp.autocast() and torch.cuda.amp.GradScaler() (a FutureWarning each) are torch.amp's with device
    'cuda': without a GPU, disabled with a warning; enabled=False, a no-op; torch.autocast is torch.amp.autocast."""
    assert lib.autocast is lib.amp.autocast
    with pytest.warns(FutureWarning, match=r"torch.cuda.amp.autocast\(args...\)` is deprecated"):
        with pytest.warns(UserWarning, match="CUDA is not available"):
            with lib.cuda.amp.autocast():
                pass
    with pytest.warns(FutureWarning, match=r"torch.cuda.amp.GradScaler\(args...\)` is deprecated"):
        with pytest.warns(UserWarning, match="CUDA is not available"):
            assert not lib.cuda.amp.GradScaler().is_enabled()
    with pytest.warns(FutureWarning):
        scaler = lib.cuda.amp.GradScaler(init_scale=1024.0, enabled=False)
    loss = lib.tensor(2.0, requires_grad=True)
    assert scaler.scale(loss) is loss and not scaler.is_enabled()
    with pytest.warns(FutureWarning):

        @lib.cuda.amp.autocast(enabled=False)
        def doubled(x):
            return x * 2

    assert doubled(loss).dtype == loss.dtype


def test_the_deprecated_cuda_autocast_that_would_run_is_refused(monkeypatch):
    """With a GPU answering (the fake device), an enabled torch.cuda.amp.autocast would run: one clear error."""
    monkeypatch.setattr(mt.devices.cuda, "is_available", lambda: True)
    with pytest.warns(FutureWarning), pytest.raises(NotImplementedError, match="no automatic mixed precision"):
        mt.cuda.amp.autocast()
