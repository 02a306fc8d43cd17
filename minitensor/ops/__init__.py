"""Every differentiable primitive of minitensor: its forward and its vector-Jacobian product side by side.

Conventions inside a backward: `g` is the incoming gradient (the shape of the op's output);
`ctx.saved_arrays` holds the input or output arrays the forward saved with `save_for_backward`.
Gradients are returned in the output's broadcast shape: the graph walk (autograd.unbroadcast) sums
them back to each input's shape, so no formula deals with broadcasting. `ctx.needs_input_grad[i]`
lets a backward skip work for inputs that do not need a gradient (a mask, a constant). No backward
writes into `g` or into a saved array.

    elementwise.py   Add Sub Mul Div DivRounded Pow PowScalar RPowScalar Neg Exp Log Sqrt Abs Tanh Sigmoid LogSigmoid
                     Relu Erf Gelu Clamp Maximum Minimum Where MaskedFill Cast Clone
    matmul.py        MatMul
    reductions.py    Sum Mean Var Std MaxMin AMaxMin LogSumExp
    shape.py         Reshape Transpose Permute Expand Repeat Cat Stack Tril Triu
    indexing.py      GetItem IndexPut Embedding
    namespace.py     ARRAYS and TENSORS, the two namespaces (`ctx.xp`) every backward above is written against
    fused.py         Linear Softmax LogSoftmax LayerNorm CrossEntropy CrossEntropyProbs NLLLoss BCEWithLogits
                     Dropout AttentionWeights
    extra.py         Norm (the 2-norm, its own node for PyTorch's gradient 0 at the origin), NormInf (max |a|)
"""

from .elementwise import (
    Abs,
    Add,
    Cast,
    Clamp,
    Clone,
    Div,
    DivRounded,
    Erf,
    Exp,
    Gelu,
    Log,
    LogSigmoid,
    MaskedFill,
    Maximum,
    Minimum,
    Mul,
    Neg,
    Pow,
    PowScalar,
    Relu,
    RPowScalar,
    Sigmoid,
    Sqrt,
    Sub,
    Tanh,
    Where,
)
from .extra import Norm, NormInf  # the primitives behind the PyTorch names at the end of tensor.py
from .fused import (
    AttentionWeights,
    BCEWithLogits,
    CrossEntropy,
    CrossEntropyProbs,
    Dropout,
    LayerNorm,
    Linear,
    LogSoftmax,
    NLLLoss,
    Softmax,
)
from .indexing import Embedding, GetItem, IndexPut
from .matmul import MatMul
from .reductions import AMaxMin, LogSumExp, MaxMin, Mean, Std, Sum, Var
from .shape import Cat, Expand, Permute, Repeat, Reshape, Stack, Transpose, Tril, Triu

__all__ = [
    "Abs",
    "Add",
    "Cast",
    "Clamp",
    "Clone",
    "Div",
    "DivRounded",
    "Erf",
    "Exp",
    "Gelu",
    "Log",
    "LogSigmoid",
    "MaskedFill",
    "Maximum",
    "Minimum",
    "Mul",
    "Neg",
    "Pow",
    "PowScalar",
    "Relu",
    "RPowScalar",
    "Sigmoid",
    "Sqrt",
    "Sub",
    "Tanh",
    "Where",
    "AttentionWeights",
    "BCEWithLogits",
    "CrossEntropy",
    "CrossEntropyProbs",
    "Dropout",
    "LayerNorm",
    "Linear",
    "LogSoftmax",
    "NLLLoss",
    "Softmax",
    "Embedding",
    "GetItem",
    "IndexPut",
    "MatMul",
    "AMaxMin",
    "LogSumExp",
    "MaxMin",
    "Mean",
    "Std",
    "Sum",
    "Var",
    "Cat",
    "Expand",
    "Permute",
    "Repeat",
    "Reshape",
    "Stack",
    "Transpose",
    "Tril",
    "Triu",
    "Norm",
    "NormInf",
]

from ..autograd import register_namespaces
from .namespace import ARRAYS, TENSORS

register_namespaces(ARRAYS, TENSORS)
