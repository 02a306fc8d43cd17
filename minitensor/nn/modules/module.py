"""`Module`: the base class of every layer and model, with PyTorch's names and semantics.

This file owns the module tree: registration of parameters, buffers and submodules by
attribute assignment, traversal (`named_parameters`, `named_modules`, ...), train/eval,
`state_dict`/`load_state_dict`, dtype and device conversion (`to`, `cuda`, `cpu`), forward
hooks and pre-hooks. The layers built on it live beside it, one family per file (linear.py, sparse.py,
normalization.py, dropout.py, activation.py, container.py, loss.py), as in torch.nn.modules.

Deviation from PyTorch, flagged:
  * `load_state_dict` never casts: a value of another dtype raises TypeError naming the key
    and both dtypes. It validates every key before writing any, and copies values into the
    existing arrays (an optimizer holding the parameters keeps working), from whatever device
    they are on, as torch does. It takes Tensors or NumPy arrays.
"""

from __future__ import annotations

from collections import OrderedDict, namedtuple
from collections.abc import Iterator, Mapping

import numpy as np

from ... import devices
from ...tensor import Tensor
from ..parameter import Parameter
from ..utils import zero_grad_

__all__ = ["Module"]

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class _RemovableHandle:
    """Returned by register_forward_hook and register_forward_pre_hook; `.remove()` unregisters the hook."""

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
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward() method")

    def __call__(self, *args, **kwargs):
        if self._forward_pre_hooks:
            for hook in list(self._forward_pre_hooks.values()):
                r = hook(self, args)
                if r is not None:  # as torch: a tuple replaces the positional inputs, anything else is the one input
                    args = r if isinstance(r, tuple) else (r,)
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

    def register_forward_pre_hook(self, hook) -> _RemovableHandle:
        """hook(module, inputs) runs before forward; a non-None return replaces the positional inputs."""
        if not callable(hook):
            raise TypeError(f"register_forward_pre_hook: hook must be callable, got {type(hook).__name__}")
        handle = _RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        return handle

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

    # ---- dtype and device --------------------------------------------------------------
    def to(self, *args, **kwargs) -> Module:
        """Move and/or convert the parameters and buffers (and their grads) in place; returns self.

        torch's forms: to(device), to(dtype), to(device, dtype), to(tensor) (its dtype and device), and the
        keywords device=, dtype=, non_blocking= (which changes nothing here). A dtype converts the floating
        tensors only (integer/bool buffers keep theirs, as in torch); a device moves them all. The Parameter
        objects stay the same (their array is replaced), so ties survive; build optimizers after.
        """
        dtype, device = kwargs.pop("dtype", None), kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        if kwargs or len(args) > 3:
            raise TypeError(f"Module.to: unexpected arguments {args!r} {kwargs!r}")
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, bool):  # non_blocking, given positionally
                continue
            elif isinstance(a, (str, int)):
                device = a
            else:
                dtype = a
        dt = None
        if dtype is not None:
            try:
                dt = np.dtype(dtype)
            except TypeError:
                raise TypeError(f"Module.to: expected a dtype such as mt.float64, got {dtype!r}") from None
            if dt.kind != "f":
                raise TypeError(f"Module.to: only floating dtypes are supported, got {dt}")
        device = None if device is None else devices.resolve(device, "Module.to")
        for t in (*self.parameters(), *self.buffers()):
            self._convert(t, dt, device)
        return self

    @staticmethod
    def _convert(t: Tensor, dt: np.dtype | None, device) -> None:
        for holder in (t, t.grad):
            if holder is None:
                continue
            data = holder._data
            if dt is not None and data.dtype.kind == "f" and data.dtype != dt:
                data = data.astype(dt)
            if device is not None:
                data = devices.to_device(data, device)
            holder._data = data

    def cuda(self, device=None) -> Module:
        """Every parameter and buffer on a CUDA device (the current one unless named), in place."""
        return self.to("cuda" if device is None else device if not isinstance(device, int) else f"cuda:{device}")

    def cpu(self) -> Module:
        return self.to("cpu")

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
        """Ordered name -> the parameter or buffer detached (sharing its array, as torch's: a write into a value,
        `sd[k].copy_(w)` under no_grad, loads w into the model; copy the dict's values to keep a snapshot), or the
        Tensor itself if keep_vars. Tied parameters appear under every name, as in torch."""
        out = OrderedDict() if destination is None else destination
        for key, t in self._state_items(prefix):
            out[key] = t if keep_vars else t.detach()
        return out

    def load_state_dict(self, state_dict: Mapping, strict: bool = True):
        """Copy Tensors (or arrays) into the existing parameters and buffers, checking everything first.

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
                v = v._data
            if not devices.is_array(v):
                type_errors.append(f"{key}: expected an np.ndarray or Tensor, got {type(v).__name__}")
                continue
            if v.shape != t._data.shape:
                shape_errors.append(f"{key}: expected shape {t._data.shape}, got {v.shape}")
            elif v.dtype != t._data.dtype:
                dtype_errors.append(f"{key}: expected dtype {t._data.dtype}, got {v.dtype}")
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
            t._data[...] = devices.to_device(v, t.device)  # a value from another device is copied over, as torch's
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
