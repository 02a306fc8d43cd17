"""minitensor: a small reverse-mode autograd engine over NumPy arrays, with PyTorch's names and semantics.

    import minitensor as mt
    x = mt.randn(3, 4, requires_grad=True)
    (x.tanh() @ mt.randn(4, 2)).sum().backward()
    x.grad

Layout, bottom-up: dtypes.py (dtypes, promotion), autograd/ (laid out as torch/autograd/: grad mode,
Function, the graph walk, gradcheck, functional), ops/ (every primitive's forward and backward side
by side, the fused ones included),
arguments.py (argument handling), functions/ (the torch.* functions), tensor_math.py (the Tensor's
math methods), devices.py (device shims), tensor.py (the Tensor), creation.py (factories), nn/ (functional
wrappers, modules), optim/, serialization.py (save/load .npz), viz.py (graph to DOT), profiler.py,
testing.py (tolerances), layout.py (memory formats), and for programs written for torch: tensor_types.py
(torch.LongTensor, ...), amp.py (autocast and GradScaler, disabled; torch.cuda.amp's spellings), compiler.py
(torch.compile returns the model), backends.py (flags).
"""

from . import amp, autograd, backends, fast, func, functions, nn, ops, optim, profiler, random, utils, viz
from .allocator import reuse_freed_memory
from .autograd import (
    Function,
    enable_grad,
    inference_mode,
    is_anomaly_check_nan_enabled,  # torch.is_anomaly_check_nan_enabled, as torch's
    is_anomaly_enabled,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from .autograd import forward_ad as _forward_ad  # noqa: F401 (loads mt.autograd.forward_ad, as functional below)
from .autograd import functional as _functional  # noqa: F401 (loads mt.autograd.functional: autograd/__init__.py)
from .compiler import compile, get_float32_matmul_precision, set_float32_matmul_precision
from .creation import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    normal,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from .devices import cuda, device
from .dtypes import (
    bool_,
    double,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    int8,
    int16,
    int32,
    int64,
    long,
    promote_types,
    result_type,
    set_default_dtype,
    short,
    uint8,
)
from .dtypes import bool_ as bool
from .dtypes import float32 as float  # torch.float; the builtin is not used below
from .dtypes import int32 as int  # torch.int
from .fast import install as _fast_install  # noqa: F401 (the speed devices: after line 17 loaded their formulas)
from .functions import *  # noqa: F403  (the torch.* functions: functions.__all__)
from .layout import channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format
from .random import Generator, manual_seed
from .serialization import load, save
from .tensor import Tensor
from .tensor_types import (
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
)

# torch.autocast is torch.amp.autocast; torch.cuda.amp holds the deprecated spellings of autocast and GradScaler
autocast = amp.autocast
cuda.amp = amp.cuda

__all__ = [
    "amp",
    "autocast",
    "backends",
    "compile",
    "get_float32_matmul_precision",
    "set_float32_matmul_precision",
    "autograd",
    "fast",
    "func",
    "ops",
    "random",
    "reuse_freed_memory",
    "Function",
    "enable_grad",
    "inference_mode",
    "Generator",
    "is_anomaly_check_nan_enabled",
    "is_anomaly_enabled",
    "is_grad_enabled",
    "no_grad",
    "set_grad_enabled",
    "arange",
    "as_tensor",
    "empty",
    "empty_like",
    "eye",
    "from_numpy",
    "full",
    "full_like",
    "linspace",
    "ones",
    "ones_like",
    "rand",
    "rand_like",
    "randint",
    "randn",
    "randn_like",
    "randperm",
    "normal",
    "tensor",
    "zeros",
    "zeros_like",
    "bool_",
    "double",
    "float16",
    "float32",
    "float64",
    "get_default_dtype",
    "half",
    "int8",
    "int16",
    "int32",
    "int64",
    "long",
    "promote_types",
    "result_type",
    "set_default_dtype",
    "uint8",
    "bool",
    "float",
    "int",
    "short",
    "BoolTensor",
    "ByteTensor",
    "CharTensor",
    "DoubleTensor",
    "FloatTensor",
    "HalfTensor",
    "IntTensor",
    "LongTensor",
    "ShortTensor",
    "manual_seed",
    "memory_format",
    "contiguous_format",
    "preserve_format",
    "channels_last",
    "channels_last_3d",
    "Tensor",
    "cuda",
    "device",
    *functions.__all__,
    "nn",
    "optim",
    "profiler",
    "utils",
    "viz",
    "load",
    "save",
]

__version__ = "0.1.0"
