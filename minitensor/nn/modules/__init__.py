"""minitensor.nn.modules: the layers, one family per file as torch.nn.modules lays them out; this file only re-exports.

module.py (Module), linear.py (Linear, Identity), sparse.py (Embedding), normalization.py (LayerNorm, RMSNorm),
batchnorm.py (BatchNorm1d, BatchNorm2d), dropout.py (Dropout), activation.py, container.py (Sequential, ModuleList,
ModuleDict), loss.py, conv.py (Conv1d, Conv2d), pooling.py (MaxPool, AvgPool), flatten.py (Flatten, Unflatten), rnn.py
(RNN, LSTM, GRU, cells), attention.py (MultiheadAttention), transformer.py
(Transformer, its encoder and decoder and their layers); the constructors' argument checks in utils.py. Parameter
lives in minitensor/nn/parameter.py, as in torch.
"""

from ..parameter import Parameter
from .activation import GELU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .attention import MultiheadAttention
from .batchnorm import BatchNorm1d, BatchNorm2d
from .container import ModuleDict, ModuleList, Sequential
from .conv import Conv1d, Conv2d
from .dropout import Dropout
from .flatten import Flatten, Unflatten
from .linear import Identity, Linear
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss
from .module import Module
from .normalization import LayerNorm, RMSNorm
from .pooling import AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell
from .sparse import Embedding
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "Parameter",
    "Module",
    "Linear",
    "Embedding",
    "LayerNorm",
    "BatchNorm1d",
    "BatchNorm2d",
    "MultiheadAttention",
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "RMSNorm",
    "Dropout",
    "ReLU",
    "GELU",
    "SiLU",
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
    "KLDivLoss",
    "BCEWithLogitsLoss",
    "Conv1d",
    "Conv2d",
    "Flatten",
    "Unflatten",
    "AvgPool1d",
    "AvgPool2d",
    "MaxPool1d",
    "MaxPool2d",
    "RNNBase",
    "RNN",
    "LSTM",
    "GRU",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
]
