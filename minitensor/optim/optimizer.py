"""The optimizer base class: parameter groups, per-parameter state, zero_grad, state_dict.

Subclasses (SGD in sgd.py, Adam/AdamW in adam.py) implement `update_parameter(p, group)` on the raw
arrays, updating `p._data` in place: no Tensor is created and no graph is recorded during a step.
`step()` runs it for every parameter with a gradient, one after another, each parameter's update in whole-array
passes. On a device (a GPU, CuPy) the same formulas run through the arrays' own library (NumPy's functions dispatch
to CuPy's). A step reads nothing back to the host.
Hyperparameters are read from `self.param_groups[i]` at every step, so a scheduler
changes the learning rate by writing `group['lr']`, exactly as in PyTorch.

state_dict layout (PyTorch's):
    {'state': {index: {name: Tensor or number}},     # index = position over all groups' params
     'param_groups': [{hyperparameters..., 'params': [index, ...]}]}
Deviation from PyTorch, flagged: its Tensors are copies (torch's are the live state), so training after
`state_dict()` does not change a saved dict. `load_state_dict` takes Tensors or NumPy arrays.
"""

from __future__ import annotations

import copy
import functools
import math
import numbers
from collections.abc import Iterable, Mapping

from ..autograd import enable_grad
from ..devices import device_of, is_array, to_device
from ..nn.utils import zero_grad_
from ..tensor import Tensor

__all__ = ["Optimizer", "required", "check_hyperparameter"]


def check_hyperparameter(owner: str, message: str, value, *, low: float = 0.0, high: float | None = None) -> None:
    """Refuse a hyperparameter that is not a real number in [low, high) (high=None: [low, inf)).

    `message` is torch's wording ("Invalid learning rate"), so the error reads as torch's:
    "Adam: Invalid learning rate: nan (expected a finite number >= 0)".
    Deviation from torch, flagged: torch compares `lr < 0` (SGD) or `not 0 <= lr` (Adam), so SGD takes
    a NaN and both take infinity; either gives NaN or infinite parameters from the first step on
    (lr=inf: w - inf*g; eps=inf: every update is 0, a run that silently never learns). Here every
    hyperparameter must be finite."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {message.removeprefix('Invalid ')} must be a number, got {type(value).__name__}")
    bounds = f"{low} <= x < {high}" if high is not None else f">= {low}"
    if not math.isfinite(value) or value < low or (high is not None and value >= high):
        raise ValueError(f"{owner}: {message}: {value} (expected a finite number {bounds})")


class _Required:
    def __repr__(self):
        return "<required parameter>"


required = _Required()


class _ParamState(dict):
    """dict keyed by id(param) that also accepts the parameter itself as a key, like torch's
    `optimizer.state[p]`. Keying by id means a lookup never calls Tensor.__eq__ (which builds an
    elementwise comparison tensor, not a bool). The optimizer holds every parameter, so ids stay unique."""

    @staticmethod
    def _key(k):
        return k if isinstance(k, int) else id(k)

    def __getitem__(self, k):
        return dict.__getitem__(self, self._key(k))

    def __setitem__(self, k, v):
        dict.__setitem__(self, self._key(k), v)

    def __contains__(self, k):
        return dict.__contains__(self, self._key(k))

    def get(self, k, default=None):
        return dict.get(self, self._key(k), default)


class Optimizer:
    """Base class: holds `param_groups` (list of dicts) and `state` (param -> dict)."""

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.state: _ParamState = _ParamState()  # param (or id(param)) -> dict
        self.param_groups: list[dict] = []
        if isinstance(params, Tensor):
            raise TypeError(
                f"{type(self).__name__}: params should be an iterable of Tensors or dicts, "
                "got a single Tensor (wrap it in a list)"
            )
        if isinstance(params, Mapping) or not isinstance(params, Iterable):
            raise TypeError(
                f"{type(self).__name__}: params should be an iterable of Tensors or dicts, got {type(params).__name__}"
            )
        params = list(params)
        if len(params) == 0:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        if not isinstance(params[0], Mapping):
            params = [{"params": params}]
        for group in params:
            self.add_param_group(group)

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        lines.append(")")
        return "\n".join(lines)

    def add_param_group(self, param_group: Mapping) -> None:
        """Append a group; missing hyperparameters come from the defaults."""
        name = type(self).__name__
        if not isinstance(param_group, Mapping):
            raise TypeError(f"{name}: a param group must be a dict, got {type(param_group).__name__}")
        group = dict(param_group)
        if "params" not in group:
            raise ValueError(f"{name}: a param group needs a 'params' entry")
        params = group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(f"{name}: params must be an ordered collection (list/tuple), not a set")
        params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: can only optimize Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"{name}: can't optimize a non-leaf Tensor (shape {p.shape})")
            if p.dtype.kind != "f":
                raise TypeError(f"{name}: can only optimize floating-point Tensors, got dtype {p.dtype}")
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{name}: a param group contains the same parameter more than once")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if seen.intersection(ids):
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        for k, v in self.defaults.items():
            if v is required and k not in group:
                raise ValueError(
                    f"{name}: parameter group didn't specify a value of required optimization parameter {k!r}"
                )
            group.setdefault(k, v)
        self.check_hyperparameters(group)  # a group's own values too, not only the constructor's
        group["params"] = params
        self.param_groups.append(group)

    def check_hyperparameters(self, group: Mapping) -> None:
        """Raise if a group's hyperparameters are out of range (each optimizer's rule; check_hyperparameter).
        Run by the constructor, add_param_group, load_state_dict and every step(): a scheduler or a
        hand edit of group['lr'] that writes NaN is caught before it reaches a parameter."""

    def state_for(self, p) -> dict:
        """The state dict of parameter `p` (created empty on first use)."""
        st = self.state.get(id(p))
        if st is None:
            st = self.state[id(p)] = {}
        return st

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop (default) or zero every parameter's gradient."""
        for group in self.param_groups:
            zero_grad_(group["params"], set_to_none)

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure() if given."""
        loss = None
        if closure is not None:  # torch's closure protocol: re-evaluate with grad enabled
            with enable_grad():
                loss = closure()
        groups = [(group, [p for p in group["params"] if p.grad is not None]) for group in self.param_groups]
        for group, params in groups:
            self.check_hyperparameters(group)
            self._check_grads(params)
        for group, params in groups:
            update = functools.partial(self.update_parameter, group=group)
            for p in params:
                update(p)
                p.bump_version()  # a graph that saved p now refuses to backpropagate
        return loss

    def _check_grads(self, params: list) -> None:
        """Every gradient has its parameter's shape and dtype (one set through .grad._data could differ):
        an update never broadcasts a gradient into a parameter."""
        for p in params:
            if p.grad.shape != p.shape or p.grad.dtype != p.dtype:
                raise RuntimeError(
                    f"{type(self).__name__}.step: a parameter of shape {p.shape} ({p.dtype}) has a "
                    f"gradient of shape {p.grad.shape} ({p.grad.dtype}); no parameter was updated"
                )

    def update_parameter(self, p, group: dict) -> None:
        """The update rule of one parameter with a gradient (p._data in place): each optimizer's formula."""
        raise NotImplementedError

    # ---- checkpointing -------------------------------------------------------------------
    def state_dict(self) -> dict:
        """PyTorch's layout; parameters are replaced by their index over all groups."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: copy.deepcopy(v) for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {}
        for pid, i in index.items():
            if pid in self.state and self.state[pid]:
                state[i] = {
                    k: Tensor.wrap(v.copy()) if is_array(v) else copy.deepcopy(v) for k, v in self.state[pid].items()
                }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping) -> None:
        """Restore hyperparameters and state; arrays are copied, must match shape and dtype."""
        name = type(self).__name__
        if not isinstance(state_dict, Mapping) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError(f"{name}.load_state_dict: expected a dict with 'state' and 'param_groups'")
        saved_groups = list(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"{name}.load_state_dict: the loaded state has {len(saved_groups)} parameter "
                f"groups, this optimizer has {len(self.param_groups)}"
            )
        for i, (g, s) in enumerate(zip(self.param_groups, saved_groups)):
            if len(g["params"]) != len(s["params"]):
                raise ValueError(
                    f"{name}.load_state_dict: group {i} has {len(g['params'])} parameters, "
                    f"the loaded state has {len(s['params'])}"
                )
        by_index = {}
        for g, s in zip(self.param_groups, saved_groups):
            for p, idx in zip(g["params"], s["params"]):
                by_index[int(idx)] = p
        new_state: dict[int, dict] = {}
        for idx, st in dict(state_dict["state"]).items():
            idx = int(idx)
            if idx not in by_index:
                raise ValueError(f"{name}.load_state_dict: state for parameter index {idx}, which no group lists")
            p = by_index[idx]
            entry = {}
            for k, v in st.items():
                v = v._data if isinstance(v, Tensor) else v
                if is_array(v) and v.ndim > 0:
                    if v.shape != p.shape:
                        raise ValueError(
                            f"{name}.load_state_dict: state[{idx}][{k!r}] has shape {v.shape}, "
                            f"the parameter has shape {p.shape}"
                        )
                    if v.dtype != p.dtype:
                        raise TypeError(
                            f"{name}.load_state_dict: state[{idx}][{k!r}] has dtype {v.dtype}, "
                            f"the parameter has dtype {p.dtype} (cast it explicitly)"
                        )
                    moved = to_device(v, device_of(p._data))  # a host checkpoint's state goes to p's device, as torch's
                    entry[k] = v.copy() if moved is v else moved
                elif is_array(v):  # a 0-d array (e.g. 'step' after np round trip)
                    entry[k] = v.item()
                else:
                    entry[k] = copy.deepcopy(v)
            new_state[id(p)] = entry
        for s in saved_groups:  # before anything changes: a bad state leaves the optimizer as it was
            self.check_hyperparameters({**self.defaults, **{k: v for k, v in s.items() if k != "params"}})
        self.state = _ParamState(new_state)
        for g, s in zip(self.param_groups, saved_groups):
            for k, v in s.items():
                if k != "params":
                    g[k] = tuple(v) if isinstance(g.get(k), tuple) and isinstance(v, list) else copy.deepcopy(v)
