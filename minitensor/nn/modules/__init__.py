"""minitensor.nn.modules: the layers, one family per file as torch.nn.modules lays them out; this file only re-exports.

module.py (Module), linear.py (Linear, Identity), sparse.py (Embedding), normalization.py (LayerNorm),
dropout.py (Dropout), activation.py, container.py (Sequential, ModuleList, ModuleDict), loss.py; the
constructors' argument checks in utils.py. Parameter lives in minitensor/nn/parameter.py, as in torch.
"""

from ..parameter import Parameter
from .activation import GELU, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from .container import ModuleDict, ModuleList, Sequential
from .dropout import Dropout
from .linear import Identity, Linear
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .module import Module
from .normalization import LayerNorm, RMSNorm
from .sparse import Embedding

__all__ = [
    "Parameter",
    "Module",
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
