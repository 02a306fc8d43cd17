"""minitensor: a small reverse-mode autograd engine over NumPy arrays, with PyTorch's names and semantics.

    import minitensor as mt
    x = mt.randn(3, 4, requires_grad=True)
    (x.tanh() @ mt.randn(4, 2)).sum().backward()
    x.grad

Layout: tensor.py (the Tensor, factories, dtype promotion), autograd.py (Function, the graph walk,
no_grad, gradcheck), ops.py (every primitive's forward and backward side by side),
nn/functional.py (fused ops with hand-derived backward passes), nn/ (modules), optim/,
serialization.py (save/load .npz), viz.py (graph to DOT), profiler.py, testing.py (tolerances).
"""
from . import autograd, ops, random
from .autograd import Function, enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .random import manual_seed
from .tensor import (
    Tensor, tensor, as_tensor, from_numpy, zeros, ones, empty, full, arange, linspace, eye, randn, rand, randint,
    randperm, zeros_like, ones_like, full_like, empty_like, randn_like, rand_like,
    float16, float32, float64, int8, int16, int32, int64, uint8, bool_, long, double, half,
    set_default_dtype, get_default_dtype, promote_types, result_type,
    add, sub, mul, div, neg, pow, exp, log, sqrt, abs, tanh, sigmoid, relu, matmul, clamp, maximum, minimum,
    where, masked_fill, flatten, permute, expand, repeat, cat, stack, split, chunk, tril, triu,
    sum, mean, var, max, min, logsumexp, argmax, argmin, reshape, transpose, unsqueeze, squeeze,
    softmax, log_softmax, all, any, equal, allclose, numel, is_tensor,
)
from .tensor import bool_ as bool  # noqa: A001  (torch.bool)
from . import nn  # noqa: E402
from . import profiler  # noqa: E402

from . import optim  # noqa: E402
from .serialization import save, load  # noqa: E402
from . import viz  # noqa: E402

__version__ = "0.1.0"
