"""minitensor.nn: Module, Parameter, the layers, and the functional/init/utils namespaces.

`mt.nn.functional` (fused ops and their gradients) is the core's file; this package adds the
module tree on top (modules/, one family per file, and parameter.py), initialisers (init.py) and
gradient utilities (utils.py) and data parallelism over MPI (parallel/: DistributedDataParallel).
"""

from . import functional, init, parallel, utils
from .modules import (
    GELU,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Identity,
    L1Loss,
    LayerNorm,
    Linear,
    LogSoftmax,
    Module,
    ModuleDict,
    ModuleList,
    MSELoss,
    NLLLoss,
    ReLU,
    RMSNorm,
    Sequential,
    Sigmoid,
    Softmax,
    Tanh,
)
from .parameter import Parameter

__all__ = [
    "Module",
    "Parameter",
    "Linear",
    "Embedding",
    "LayerNorm",
    "RMSNorm",
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
    "parallel",
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
