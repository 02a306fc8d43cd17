"""minitensor: a small reverse-mode autograd engine over NumPy arrays, with PyTorch's names and semantics.

    import minitensor as mt
    x = mt.randn(3, 4, requires_grad=True)
    (x.tanh() @ mt.randn(4, 2)).sum().backward()
    x.grad

Layout, bottom-up: dtypes.py (dtypes, promotion), autograd.py (Function, the graph walk, no_grad,
gradcheck), ops/ (every primitive's forward and backward side by side, the fused ones included),
tensor.py (the Tensor and the torch.* functions), creation.py (factories), nn/ (functional
wrappers, modules), optim/, serialization.py (save/load .npz), viz.py (graph to DOT), profiler.py,
testing.py (tolerances).
"""
from . import autograd, ops, random
from .autograd import Function, enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .creation import (arange, as_tensor, empty, empty_like, eye, from_numpy, full, full_like, linspace, ones,
                       ones_like, rand, rand_like, randint, randn, randn_like, randperm, tensor, zeros, zeros_like)
from .dtypes import (bool_, double, float16, float32, float64, get_default_dtype, half, int8, int16, int32, int64,
                     long, promote_types, result_type, set_default_dtype, uint8)
from .dtypes import bool_ as bool  # noqa: A001  (torch.bool shadows the builtin inside this namespace)
from .random import manual_seed
from .tensor import (Tensor, abs, add, all, allclose, amax, amin, any, argmax, argmin, cat, chunk, clamp, div, equal,
                     erf, exp, expand, flatten, is_tensor, log, log_softmax, logsumexp, masked_fill, matmul, max,
                     maximum, mean, min, minimum, mul, neg, numel, permute, pow, relu, repeat, reshape, sigmoid,
                     softmax, split, sqrt, squeeze, stack, std, sub, sum, tanh, transpose, tril, triu, unsqueeze, var,
                     where)
from . import nn, optim, profiler, viz
from .serialization import load, save

__all__ = ["autograd", "ops", "random", "Function", "enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled",
           "arange", "as_tensor", "empty", "empty_like", "eye", "from_numpy", "full", "full_like", "linspace", "ones",
           "ones_like", "rand", "rand_like", "randint", "randn", "randn_like", "randperm", "tensor", "zeros",
           "zeros_like", "bool_", "double", "float16", "float32", "float64", "get_default_dtype", "half", "int8",
           "int16", "int32", "int64", "long", "promote_types", "result_type", "set_default_dtype", "uint8", "bool",
           "manual_seed", "Tensor", "abs", "add", "all", "allclose", "amax", "amin", "any", "argmax", "argmin", "cat",
           "chunk", "clamp", "div", "equal", "erf", "exp", "expand", "flatten", "is_tensor", "log", "log_softmax",
           "logsumexp", "masked_fill", "matmul", "max", "maximum", "mean", "min", "minimum", "mul", "neg", "numel",
           "permute", "pow", "relu", "repeat", "reshape", "sigmoid", "softmax", "split", "sqrt", "squeeze", "stack",
           "std", "sub", "sum", "tanh", "transpose", "tril", "triu", "unsqueeze", "var", "where", "nn", "optim",
           "profiler", "viz", "load", "save"]

__version__ = "0.1.0"

# appended: the names a PyTorch user reaches for in the first hour (tensor.py, last section)
from .tensor import argsort, bmm, cuda, device, einsum, gather, mm, norm, sort, topk

__all__ += ["argsort", "bmm", "cuda", "device", "einsum", "gather", "mm", "norm", "sort", "topk"]
