"""torch.backends: the flags that programs set (cudnn.benchmark, cuda.matmul.allow_tf32, ...), accepted.

minitensor runs on NumPy (or CuPy) without cuDNN, TF32 or MPS, so the flags hold what they are set to and change
nothing; the availability questions answer as torch does on a machine without those libraries.
"""

from __future__ import annotations

__all__ = ["cpu", "cuda", "cudnn", "mkldnn", "mps"]


class _Flags:
    """A namespace of flags, set and read as attributes."""

    def __init__(self, **flags):
        self.__dict__.update(flags)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


class _CuDNN(_Flags):
    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def version():
        return None


class _MPS(_Flags):
    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def is_built() -> bool:
        return False


class _Cuda(_Flags):
    @staticmethod
    def is_built() -> bool:
        return False


cudnn = _CuDNN(enabled=True, benchmark=False, deterministic=False, allow_tf32=True)
cuda = _Cuda(matmul=_Flags(allow_tf32=False, allow_fp16_reduced_precision_reduction=True))
mps = _MPS()
mkldnn = _Flags(enabled=True)
cpu = _Flags()
