"""Device shims: torch.device, torch.cuda, and the Tensor's device methods. minitensor's only device is
the CPU, so PyTorch code that picks or names a device runs unchanged (x.to(device) is in tensor.py's .to)."""

from __future__ import annotations

import builtins


class device(str):
    """torch.device. A str subclass, so `x.to(x.device)`, `x.device == "cpu"` and `str(x.device)` work
    as in PyTorch; `.type` and `.index` as torch.device has them. minitensor's only device is "cpu"."""

    def __new__(cls, type: str = "cpu", index: int | None = None):
        if not isinstance(type, str) or not type.partition(":")[0].isidentifier():
            raise ValueError(f"device: expected a string such as 'cpu' or 'cuda:0', got {type!r}")
        name, _, idx = type.partition(":")
        if idx and not idx.isdigit():
            raise ValueError(f"device: the index in {type!r} must be a non-negative integer")
        if idx and index is not None:
            raise ValueError(f"device: {type!r} already names an index; do not pass index={index} too")
        index = int(idx) if idx else index
        self = super().__new__(cls, name if index is None else f"{name}:{index}")
        self.type, self.index = name, index
        return self

    def __repr__(self) -> str:
        return f"device(type={self.type!r}" + ("" if self.index is None else f", index={self.index}") + ")"


CPU = device("cpu")


class _Cuda:
    """mt.cuda: there is no GPU here, so the usual `"cuda" if torch.cuda.is_available() else "cpu"`
    picks the CPU and the code runs unchanged."""

    @staticmethod
    def is_available() -> builtins.bool:
        return False

    @staticmethod
    def device_count() -> int:
        return 0


cuda = _Cuda()


class DeviceMethods:
    """The Tensor's device methods (a mixin Tensor inherits): the device is always the CPU."""

    __slots__ = ()

    @property
    def device(self) -> device:
        return CPU

    @property
    def is_cuda(self) -> bool:
        return False

    def cpu(self):
        return self

    def cuda(self, device=None, non_blocking=False):
        raise RuntimeError(
            "cuda(): minitensor runs on the CPU only (mt.cuda.is_available() is False); "
            "keep the tensor where it is, or use .to('cpu')"
        )
