"""minitensor.nn: Module, Parameter, the layers, and the functional/init/utils namespaces.

`mt.nn.functional` (fused ops and their gradients) is the core's file; this package adds the
module tree on top (modules.py), initialisers (init.py) and gradient utilities (utils.py).
"""

from . import functional, init, utils
from .modules import (
    GELU,
    Dropout,
    Embedding,
    Identity,
    LayerNorm,
    Linear,
    Module,
    ModuleDict,
    ModuleList,
    Parameter,
    ReLU,
    Sequential,
)

__all__ = [
    "Module",
    "Parameter",
    "Linear",
    "Embedding",
    "LayerNorm",
    "Dropout",
    "ReLU",
    "GELU",
    "Identity",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "functional",
    "init",
    "utils",
]

# appended: activations and losses as modules
from .modules import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, LogSoftmax, MSELoss, NLLLoss, Sigmoid, Softmax, Tanh

__all__ += [
    "Tanh",
    "Sigmoid",
    "Softmax",
    "LogSoftmax",
    "CrossEntropyLoss",
    "NLLLoss",
    "MSELoss",
    "L1Loss",
    "BCEWithLogitsLoss",
]
