"""Which torch module stands for which part of minitensor: the table behind minitensor.compat.

TORCH_MODULES maps a torch module's dotted name to where minitensor keeps the same API: a minitensor module, or an
object whose attributes answer as the torch module's do (torch.cuda is minitensor.cuda, an object; torch.backends.cudnn
is minitensor.backends.cudnn). A torch module that is not in the table is not in minitensor: importing it, or reading
it as an attribute, raises minitensor.compat's one error. Only modules whose API is torch's are listed: minitensor's
own `testing` (the project's tolerances) and `profiler` (a per-primitive timer) share a name with torch modules that
are something else, and are left out. torch.cuda.amp is minitensor.amp.cuda, whose autocast and GradScaler take
torch.cuda.amp's arguments (no device_type).
"""

from __future__ import annotations

import importlib

TORCH_MODULES = {
    "torch": "minitensor",
    "torch.nn": "minitensor.nn",
    "torch.nn.functional": "minitensor.nn.functional",
    "torch.nn.init": "minitensor.nn.init",
    "torch.nn.parameter": "minitensor.nn.parameter",
    "torch.nn.modules": "minitensor.nn.modules",
    "torch.nn.modules.activation": "minitensor.nn.modules.activation",
    "torch.nn.modules.batchnorm": "minitensor.nn.modules.batchnorm",
    "torch.nn.modules.transformer": "minitensor.nn.modules.transformer",
    "torch.nn.modules.container": "minitensor.nn.modules.container",
    "torch.nn.modules.conv": "minitensor.nn.modules.conv",
    "torch.nn.modules.dropout": "minitensor.nn.modules.dropout",
    "torch.nn.modules.flatten": "minitensor.nn.modules.flatten",
    "torch.nn.modules.linear": "minitensor.nn.modules.linear",
    "torch.nn.modules.loss": "minitensor.nn.modules.loss",
    "torch.nn.modules.module": "minitensor.nn.modules.module",
    "torch.nn.modules.normalization": "minitensor.nn.modules.normalization",
    "torch.nn.modules.pooling": "minitensor.nn.modules.pooling",
    "torch.nn.modules.rnn": "minitensor.nn.modules.rnn",
    "torch.nn.modules.sparse": "minitensor.nn.modules.sparse",
    "torch.nn.parallel": "minitensor.nn.parallel",
    "torch.nn.utils": "minitensor.nn.utils",
    "torch.nn.utils.rnn": "minitensor.nn.utils.rnn",
    "torch.optim": "minitensor.optim",
    "torch.optim.optimizer": "minitensor.optim.optimizer",
    "torch.optim.lr_scheduler": "minitensor.optim.lr_scheduler",
    "torch.utils": "minitensor.utils",
    "torch.utils.checkpoint": "minitensor.utils.checkpoint",
    "torch.utils.data": "minitensor.utils.data",
    "torch.utils.data.dataloader": "minitensor.utils.data.dataloader",
    "torch.utils.data.dataset": "minitensor.utils.data.dataset",
    "torch.utils.data.sampler": "minitensor.utils.data.sampler",
    "torch.utils.data.distributed": "minitensor.utils.data.distributed",
    "torch.autograd": "minitensor.autograd",
    "torch.autograd.anomaly_mode": "minitensor.autograd.anomaly_mode",
    "torch.autograd.forward_ad": "minitensor.autograd.forward_ad",
    "torch.autograd.functional": "minitensor.autograd.functional",
    "torch.autograd.grad_mode": "minitensor.autograd.grad_mode",
    "torch.autograd.graph": "minitensor.autograd.graph",
    "torch.func": "minitensor.func",
    "torch.random": "minitensor.random",
    "torch.serialization": "minitensor.serialization",
    "torch.amp": "minitensor.amp",
    "torch.cuda": "minitensor.cuda",
    "torch.cuda.amp": "minitensor.amp.cuda",
    "torch.backends": "minitensor.backends",
    "torch.backends.cpu": "minitensor.backends.cpu",
    "torch.backends.cuda": "minitensor.backends.cuda",
    "torch.backends.cudnn": "minitensor.backends.cudnn",
    "torch.backends.mkldnn": "minitensor.backends.mkldnn",
    "torch.backends.mps": "minitensor.backends.mps",
}


def is_torch_name(name: str) -> bool:
    """'torch' or a dotted name under it ('torch.nn.functional'); not 'torchvision'."""
    return name == "torch" or name.startswith("torch.")


def resolve(target: str):
    """The module or object a TORCH_MODULES target names: the longest importable prefix, then attributes."""
    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(f"minitensor.compat: no module {target!r}")
