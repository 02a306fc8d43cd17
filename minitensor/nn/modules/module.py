"""`Module` and `Parameter`, and the layers built on them, with PyTorch's names and semantics.

This file owns the module tree: registration of parameters, buffers and submodules by
attribute assignment, traversal (`named_parameters`, `named_modules`, ...), train/eval,
`state_dict`/`load_state_dict`, dtype conversion, forward hooks; and the layers
Linear, Embedding, LayerNorm, Dropout, ReLU, GELU, Identity and the containers Sequential,
ModuleList, ModuleDict. Layers compute through the fused ops of `minitensor.nn.functional`;
nothing here writes a gradient formula.

Deviations from PyTorch, flagged:
  * `state_dict()` values are NumPy arrays (copies, so later training does not change a saved
    dict); `keep_vars=True` gives the Parameters/Tensors themselves.
  * `load_state_dict` never casts: a value of another dtype raises TypeError naming the key
    and both dtypes. It validates every key before writing any, and copies values into the
    existing arrays (an optimizer holding the parameters keeps working).
  * Dropout has a `mask_fn` hook (see Dropout) used by the parity checks.
"""

from __future__ import annotations

import math
import numbers
from collections import OrderedDict, namedtuple
from collections.abc import Iterable, Iterator, Mapping

import numpy as np

from ...tensor import Tensor, get_default_dtype
from .. import functional as F
from .. import init
from ..utils import zero_grad_

__all__ = [
    "Parameter",
    "Module",
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

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _default_float_dtype(dtype, where: str) -> np.dtype:
    if dtype is None:
        return np.dtype(get_default_dtype())
    dt = np.dtype(dtype)
    if dt.kind != "f":
        raise TypeError(f"{where}: dtype must be floating point, got {dt}")
    return dt


def _check_positive_int(where: str, name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{where}: {name} must be an int, got {type(v).__name__} {v!r}")
    if v <= 0:
        raise ValueError(f"{where}: {name} must be positive, got {v}")
    return int(v)


# ============================================================================ Parameter


class Parameter(Tensor):
    """A Tensor that a Module registers as a learnable parameter (requires_grad=True by default).

    Shares the given array (or the given Tensor's array), as torch.nn.Parameter does."""

    __slots__ = ()

    def __init__(self, data=None, requires_grad: bool = True):
        if data is None:
            data = np.empty((0,), dtype=np.dtype(_default_float_dtype(None, "Parameter")))
        if isinstance(data, Tensor):
            data = data.data
        if not isinstance(data, np.ndarray):
            raise TypeError(f"Parameter: expected a Tensor or np.ndarray, got {type(data).__name__}")
        if requires_grad and data.dtype.kind != "f":
            raise TypeError(f"Parameter: only floating-point arrays can require gradients, got dtype {data.dtype}")
        super().__init__(data, requires_grad=requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


# ============================================================================ Module


class _RemovableHandle:
    """Returned by register_forward_hook; `.remove()` unregisters the hook."""

    _next_id = 0

    def __init__(self, hooks: dict):
        self._hooks = hooks
        self.id = _RemovableHandle._next_id
        _RemovableHandle._next_id += 1

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class Module:
    """Base class of every layer and model: subclasses set attributes in __init__ and define forward.

    Assigning a Parameter registers it, assigning a Module registers it as a child, and
    `register_buffer` registers a non-learnable Tensor (saved in state_dict unless
    persistent=False). `module(x)` runs `forward(x)`, then the forward hooks.
    """

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward() method")

    def __call__(self, *args, **kwargs):
        out = self.forward(*args, **kwargs)
        if self._forward_hooks:
            for hook in list(self._forward_hooks.values()):
                r = hook(self, args, out)
                if r is not None:
                    out = r
        return out

    # ---- registration ------------------------------------------------------------------
    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        if "_parameters" not in d:
            raise AttributeError(
                f"cannot assign {name!r} before Module.__init__() call "
                f"(call super().__init__() first in {type(self).__name__}.__init__)"
            )
        params, buffers, modules = d["_parameters"], d["_buffers"], d["_modules"]
        if isinstance(value, Parameter):
            self._remove_from(name, d, buffers, modules)
            params[name] = value
        elif name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign {type(value).__name__} as parameter {name!r} of "
                    f"{type(self).__name__} (mt.nn.Parameter or None expected)"
                )
            params[name] = None
        elif isinstance(value, Module):
            self._remove_from(name, d, params, buffers)
            modules[name] = value
        elif name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign {type(value).__name__} as child module {name!r} of "
                    f"{type(self).__name__} (Module or None expected)"
                )
            modules[name] = None
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign {type(value).__name__} as buffer {name!r} of "
                    f"{type(self).__name__} (Tensor or None expected)"
                )
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    @staticmethod
    def _remove_from(name, d, *dicts):
        for dd in dicts:
            dd.pop(name, None)
        d.pop(name, None)

    def __getattr__(self, name: str):
        # Only reached when normal lookup fails: parameters, buffers and children live in dicts.
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            if key in d and name in d[key]:
                return d[key][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for key in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__[key]:
                del self.__dict__[key][name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def _check_new_name(self, kind: str, name) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if name == "" or "." in name:
            raise KeyError(f"{kind} name can't be empty or contain '.', got {name!r}")
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot register {kind} {name!r} before Module.__init__() call")
        if hasattr(type(self), name) or (
            name in self.__dict__
            and name not in self._parameters
            and name not in self._buffers
            and name not in self._modules
        ):
            raise KeyError(f"attribute {name!r} already exists on {type(self).__name__}")

    def register_parameter(self, name: str, param) -> None:
        """Register `param` (a Parameter, or None for an absent optional one such as bias=False)."""
        self._check_new_name("parameter", name)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign {type(param).__name__} as parameter {name!r} (mt.nn.Parameter or None expected)"
            )
        self._remove_from(name, self.__dict__, self._buffers, self._modules)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        """Register a non-learnable Tensor (e.g. the positional table); persistent=False keeps it out of state_dict."""
        self._check_new_name("buffer", name)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign {type(tensor).__name__} as buffer {name!r} (Tensor or None expected)")
        self._remove_from(name, self.__dict__, self._parameters, self._modules)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module) -> None:
        self._check_new_name("module", name)
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._remove_from(name, self.__dict__, self._parameters, self._buffers)
        self._modules[name] = module

    register_module = add_module

    def register_forward_hook(self, hook) -> _RemovableHandle:
        """hook(module, inputs, output) runs after forward; a non-None return replaces the output."""
        if not callable(hook):
            raise TypeError(f"register_forward_hook: hook must be callable, got {type(hook).__name__}")
        handle = _RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle

    # ---- traversal ---------------------------------------------------------------------
    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        """(name, module) for self and every descendant, pre-order; shared modules once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, attr: str, prefix: str, recurse: bool, remove_duplicate: bool = True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mod_prefix, m in mods:
            for name, v in getattr(m, attr).items():
                if v is None:
                    continue
                if remove_duplicate:
                    if id(v) in seen:
                        continue
                    seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + name, v

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """(name, Parameter) in registration order, depth first; a tied parameter appears once (first name)."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> Module:
        """The descendant at dotted path `target` ('' is self)."""
        m = self
        if target == "":
            return m
        for part in target.split("."):
            if part not in m._modules or m._modules[part] is None:
                raise AttributeError(f"{type(m).__name__} has no submodule {part!r} (looking up {target!r})")
            m = m._modules[part]
        return m

    def apply(self, fn) -> Module:
        """fn(module) on every descendant then on self (post-order, like torch); returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- modes and gradients -----------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode on self and every descendant (Dropout reads it)."""
        if not isinstance(mode, bool):
            raise ValueError(f"train: mode is expected to be a bool, got {type(mode).__name__}")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop (default) or zero every parameter's .grad."""
        zero_grad_(self.parameters(), set_to_none)

    # ---- dtype -------------------------------------------------------------------------
    def to(self, dtype) -> Module:
        """Convert floating parameters and buffers (and their grads) to `dtype`, in place; returns self.

        Integer/bool buffers are left alone, as in torch. The Parameter objects stay the same
        (their `.data` array is replaced), so ties survive; build optimizers after converting.
        Only dtypes are accepted ('cpu' is allowed as a no-op: minitensor has one device).
        """
        if isinstance(dtype, str) and dtype == "cpu":
            return self
        try:
            dt = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"Module.to: expected a dtype such as mt.float64, got {dtype!r}") from None
        if dt.kind != "f":
            raise TypeError(f"Module.to: only floating dtypes are supported, got {dt}")
        for p in self.parameters():
            self._convert(p, dt)
        for b in self.buffers():
            self._convert(b, dt)
        return self

    @staticmethod
    def _convert(t: Tensor, dt: np.dtype) -> None:
        if t.data.dtype.kind == "f" and t.data.dtype != dt:
            t.data = t.data.astype(dt)
            if t.grad is not None:
                t.grad.data = t.grad.data.astype(dt)

    def double(self) -> Module:
        return self.to(np.float64)

    def float(self) -> Module:
        return self.to(np.float32)

    # ---- state dict --------------------------------------------------------------------
    def _state_items(self, prefix: str = ""):
        """(key, Tensor) for state_dict: per module its parameters, then persistent buffers, then children."""
        stack = [(prefix, self)]
        while stack:
            pre, m = stack.pop()
            for name, p in m._parameters.items():
                if p is not None:
                    yield pre + name, p
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent_buffers:
                    yield pre + name, b
            kids = [(pre + name + ".", c) for name, c in m._modules.items() if c is not None]
            stack.extend(reversed(kids))

    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False) -> OrderedDict:
        """Ordered name -> array copy (Tensor itself if keep_vars).
        Tied parameters appear under every name, as in torch."""
        out = OrderedDict() if destination is None else destination
        for key, t in self._state_items(prefix):
            out[key] = t if keep_vars else t.data.copy()
        return out

    def load_state_dict(self, state_dict: Mapping, strict: bool = True):
        """Copy arrays into the existing parameters and buffers, checking everything first.

        Problems are reported together: missing keys and unexpected keys (when strict), keys
        whose shape differs (always), keys whose dtype differs (always; no silent cast).
        ValueError when any key is missing/unexpected/mis-shaped, TypeError when only dtypes
        differ. Returns (missing_keys, unexpected_keys) like torch.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict: expected a dict, got {type(state_dict).__name__}")
        own = OrderedDict(self._state_items())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        shape_errors, dtype_errors, type_errors, values = [], [], [], []
        for key, t in own.items():
            if key not in state_dict:
                continue
            v = state_dict[key]
            if isinstance(v, Tensor):
                v = v.data
            if not isinstance(v, np.ndarray):
                type_errors.append(f"{key}: expected an np.ndarray or Tensor, got {type(v).__name__}")
                continue
            if v.shape != t.data.shape:
                shape_errors.append(f"{key}: expected shape {t.data.shape}, got {v.shape}")
            elif v.dtype != t.data.dtype:
                dtype_errors.append(f"{key}: expected dtype {t.data.dtype}, got {v.dtype}")
            else:
                values.append((t, v))
        problems = []
        if strict and missing:
            problems.append("missing keys: " + ", ".join(missing))
        if strict and unexpected:
            problems.append("unexpected keys: " + ", ".join(unexpected))
        if shape_errors:
            problems.append("wrong shapes: " + "; ".join(shape_errors))
        if type_errors:
            problems.append("wrong types: " + "; ".join(type_errors))
        if dtype_errors:
            problems.append(
                "wrong dtypes (no implicit cast; convert the model with .to(dtype) or the "
                "arrays with .astype): " + "; ".join(dtype_errors)
            )
        if problems:
            msg = f"Error(s) in loading state_dict for {type(self).__name__}:\n  " + "\n  ".join(problems)
            structural = shape_errors or (strict and (missing or unexpected))
            raise (TypeError if (dtype_errors or type_errors) and not structural else ValueError)(msg)
        for t, v in values:
            t.data[...] = v
            t.bump_version()
        return _IncompatibleKeys(missing, unexpected)

    # ---- printing ----------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {sub}")
        if not lines:
            return f"{type(self).__name__}({extra})"
        body = ("\n  " + extra if extra else "") + "".join("\n  " + ln for ln in lines)
        return f"{type(self).__name__}({body}\n)"


# ============================================================================ layers


class Linear(Module):
    """y = x W^T + b, W of shape (out_features, in_features) as in torch.

    Init like torch: W, b ~ U(-1/sqrt(in_features), 1/sqrt(in_features)) (kaiming_uniform_ with a=sqrt(5)).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=None):
        super().__init__()
        self.in_features = _check_positive_int("Linear", "in_features", in_features)
        self.out_features = _check_positive_int("Linear", "out_features", out_features)
        dt = _default_float_dtype(dtype, "Linear")
        self.weight = Parameter(np.empty((out_features, in_features), dtype=dt))  # (out, in)
        if bias:
            self.bias = Parameter(np.empty((out_features,), dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features)
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        if input.shape[-1:] != (self.in_features,):
            raise ValueError(
                f"Linear(in_features={self.in_features}): expected input of shape (..., "
                f"{self.in_features}), got {tuple(input.shape)}"
            )
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """out[..., :] = weight[input[...]], weight (num_embeddings, embedding_dim) ~ N(0, 1).

    With padding_idx, that row starts at zero and never receives a gradient (torch's semantics).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None, dtype=None):
        super().__init__()
        self.num_embeddings = _check_positive_int("Embedding", "num_embeddings", num_embeddings)
        self.embedding_dim = _check_positive_int("Embedding", "embedding_dim", embedding_dim)
        if padding_idx is not None:
            if isinstance(padding_idx, bool) or not isinstance(padding_idx, numbers.Integral):
                raise TypeError(f"Embedding: padding_idx must be an int or None, got {type(padding_idx).__name__}")
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"Embedding: padding_idx must be within [-{num_embeddings}, {num_embeddings}), got {padding_idx}"
                )
            padding_idx = int(padding_idx) % num_embeddings
        self.padding_idx = padding_idx
        dt = _default_float_dtype(dtype, "Embedding")
        self.weight = Parameter(np.empty((num_embeddings, embedding_dim), dtype=dt))  # (V, D)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx] = 0
            self.weight.bump_version()

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


class LayerNorm(Module):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last len(normalized_shape) dims (biased var).

    weight starts at ones, bias at zeros.
    """

    def __init__(
        self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True, dtype=None
    ):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral) and not isinstance(normalized_shape, bool):
            normalized_shape = (normalized_shape,)
        if not isinstance(normalized_shape, (tuple, list)) or len(normalized_shape) == 0:
            raise TypeError(
                f"LayerNorm: normalized_shape must be an int or a non-empty tuple of ints, got {normalized_shape!r}"
            )
        self.normalized_shape = tuple(_check_positive_int("LayerNorm", "normalized_shape", n) for n in normalized_shape)
        if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not eps > 0:
            raise ValueError(f"LayerNorm: eps must be a positive number, got {eps!r}")
        self.eps = float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        dt = _default_float_dtype(dtype, "LayerNorm")
        if self.elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, dtype=dt))
            if bias:
                self.bias = Parameter(np.zeros(self.normalized_shape, dtype=dt))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class Dropout(Module):
    """Training: y = x * keep / (1 - p) with keep ~ Bernoulli(1 - p); eval or p == 0: y = x.

    Extension, flagged: `mask_fn`. When set (and training, p > 0), forward calls
    `keep = mask_fn(shape)` for the boolean keep-mask of the input's shape instead of sampling
    one; the parity report uses it to feed both frameworks identical masks.
    """

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p!r}")
        F.refuse_inplace("Dropout", inplace)
        self.p = float(p)
        self.mask_fn = None

    def forward(self, input):
        if not self.training or self.p == 0.0:
            return input
        if self.mask_fn is None:
            return F.dropout(input, self.p, True)
        shape = tuple(input.shape)
        keep = self.mask_fn(shape)
        if isinstance(keep, Tensor):
            keep = keep.data
        if not isinstance(keep, np.ndarray) or keep.dtype != np.bool_ or keep.shape != shape:
            got = (
                f"{type(keep).__name__} of dtype {keep.dtype} and shape {keep.shape}"
                if isinstance(keep, np.ndarray)
                else type(keep).__name__
            )
            raise ValueError(f"Dropout.mask_fn must return a bool array of shape {shape}, got {got}")
        return F.dropout(input, self.p, True, mask=keep)

    def extra_repr(self):
        return f"p={self.p}"


class ReLU(Module):
    """y = max(x, 0)."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        F.refuse_inplace("ReLU", inplace)

    def forward(self, input):
        return F.relu(input)


class GELU(Module):
    """y = x * Phi(x) ('none'), or the tanh approximation ('tanh')."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Identity(Module):
    """y = x (arguments are accepted and ignored, as in torch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


# ============================================================================ containers


def _index(where: str, idx, n: int) -> int:
    if isinstance(idx, bool) or not isinstance(idx, numbers.Integral):
        raise TypeError(f"{where} indices must be integers or slices, got {type(idx).__name__}")
    if not -n <= idx < n:
        raise IndexError(f"{where} index {idx} is out of range for length {n}")
    return int(idx) % n


class Sequential(Module):
    """Modules called in order: Sequential(a, b, c)(x) = c(b(a(x))). Also Sequential(OrderedDict(name=module))."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                if not isinstance(m, Module):
                    raise TypeError(f"Sequential: argument {i} is a {type(m).__name__}, expected a Module")
                self.add_module(str(i), m)

    def __getitem__(self, idx):
        items = list(self._modules.items())
        if isinstance(idx, slice):
            return Sequential(OrderedDict(items[idx]))
        return items[_index("Sequential", idx, len(items))][1]

    def __setitem__(self, idx, module) -> None:
        key = list(self._modules)[_index("Sequential", idx, len(self._modules))]
        setattr(self, key, module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input


class ModuleList(Module):
    """A list of modules, registered as children '0', '1', ... (no forward of its own)."""

    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _rebuild(self, mods: list) -> None:
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def __getitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(mods[idx])
        return mods[_index("ModuleList", idx, len(mods))]

    def __setitem__(self, idx, module: Module) -> None:
        i = _index("ModuleList", idx, len(self))
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList: can only hold Modules, got {type(module).__name__}")
        self._modules[str(i)] = module

    def __delitem__(self, idx) -> None:
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            del mods[idx]
        else:
            del mods[_index("ModuleList", idx, len(mods))]
        self._rebuild(mods)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def append(self, module: Module) -> ModuleList:
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList.append: expected a Module, got {type(module).__name__}")
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError("ModuleList.extend: expected an iterable of Modules, got a single Module")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        mods = list(self._modules.values())
        mods.insert(index, module)
        for m in mods:
            if not isinstance(m, Module):
                raise TypeError(f"ModuleList.insert: expected a Module, got {type(m).__name__}")
        self._rebuild(mods)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(); iterate over it and call its modules")


class ModuleDict(Module):
    """An ordered dict of named child modules (no forward of its own)."""

    def __init__(self, modules: Mapping | Iterable | None = None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        try:
            return self._modules[key]
        except KeyError:
            raise KeyError(f"ModuleDict has no key {key!r}; keys are {list(self._modules)}") from None

    def __setitem__(self, key: str, module: Module) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"ModuleDict: can only hold Modules, got {type(module).__name__} for key {key!r}")
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def pop(self, key: str) -> Module:
        m = self[key]
        del self._modules[key]
        return m

    def clear(self) -> None:
        self._modules.clear()

    def update(self, modules) -> None:
        items = modules.items() if isinstance(modules, Mapping) else modules
        for item in items:
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise TypeError(f"ModuleDict.update: expected (name, Module) pairs, got {item!r}")
            self[item[0]] = item[1]

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(); index it and call its modules")


# ============================================================================ names a PyTorch user reaches for
# Activations and losses as modules, each calling its function in nn.functional (appended).


class Tanh(Module):
    """y = tanh(x)."""

    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    """y = 1 / (1 + e^-x)."""

    def forward(self, input):
        return F.sigmoid(input)


class _AlongDim(Module):
    """A softmax-like layer over one dim, which must be given (PyTorch's implicit choice is deprecated)."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def _dim(self) -> int:
        if self.dim is None:
            raise ValueError(
                f"{type(self).__name__}: dim is None; construct it with the dim to normalise over, "
                f"e.g. nn.{type(self).__name__}(dim=-1)"
            )
        return self.dim

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(_AlongDim):
    """y = e^x / sum e^x along dim."""

    def forward(self, input):
        return F.softmax(input, dim=self._dim())


class LogSoftmax(_AlongDim):
    """y = x - log sum e^x along dim."""

    def forward(self, input):
        return F.log_softmax(input, dim=self._dim())


class _Loss(Module):
    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class _ClassLoss(_Loss):
    """A loss over classes: `weight` (one rescaling factor per class, or None) is kept as a buffer, as in PyTorch."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index


class CrossEntropyLoss(_ClassLoss):
    """F.cross_entropy(input, target): logits (N, C), (C,) or (N, C, d...) against class indices or probabilities."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(weight, ignore_index, reduction)
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(
            input,
            target,
            self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
        )


class NLLLoss(_ClassLoss):
    """F.nll_loss(input, target): log-probabilities against class indices."""

    def forward(self, input, target):
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class MSELoss(_Loss):
    """(input - target)^2, averaged or summed."""

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """|input - target|, averaged or summed."""

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """F.binary_cross_entropy_with_logits; `weight` and `pos_weight` are kept as buffers, as in PyTorch."""

    def __init__(self, weight=None, reduction: str = "mean", pos_weight=None):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(
            input, target, self.weight, reduction=self.reduction, pos_weight=self.pos_weight
        )
