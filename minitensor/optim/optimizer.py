"""The optimizer base class: parameter groups, per-parameter state, zero_grad, state_dict.

Subclasses (SGD in sgd.py, Adam/AdamW in adam.py) implement `update_parameter(p, group)` in raw
NumPy, updating `p.data` in place: no Tensor is created and no graph is recorded during a step.
`step()` runs it for every parameter with a gradient, on the shared update pool when the step is
large. Hyperparameters
are read from `self.param_groups[i]` at every step, so a scheduler changes the learning rate by
writing `group['lr']`, exactly as in PyTorch.

state_dict layout (PyTorch's):
    {'state': {index: {name: array or number}},      # index = position over all groups' params
     'param_groups': [{hyperparameters..., 'params': [index, ...]}]}
Arrays in it are copies, so training after `state_dict()` does not change a saved dict.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..autograd import enable_grad
from ..nn.utils import zero_grad_
from ..tensor import Tensor

__all__ = ["Optimizer", "required"]


def num_threads() -> int:
    """Threads for elementwise optimizer updates: the BLAS setting (OMP/OPENBLAS_NUM_THREADS) or the cores."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        v = os.environ.get(var, "")
        if v.isdigit() and int(v) > 0:
            return int(v)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


PARALLEL_MIN_NUMEL = 1 << 20  # below ~1M entries in a step, thread hand-off costs more than it saves


class UpdatePool:
    """Speed device shared by every optimizer: per-parameter updates run on a thread pool when a step is large.

    NumPy releases the GIL inside ufunc loops, so per-parameter updates (independent of each other,
    hence bitwise the same in any order) run on several cores, as PyTorch's multi-threaded
    optimizer kernels do. The pool has as many threads as the BLAS is allowed (num_threads), so a
    comparison run with the same thread count on both sides stays fair."""

    def __init__(self):
        self.threads = 0
        self.executor = None

    def run(self, update, params: list) -> None:
        """update(p) for every parameter p; on the pool when there are several and they are large."""
        n = num_threads()
        if n <= 1 or len(params) < 2 or sum(p.data.size for p in params) < PARALLEL_MIN_NUMEL:
            for p in params:
                update(p)
            return
        if self.executor is None or self.threads != n:
            if self.executor is not None:
                self.executor.shutdown(wait=False)
            self.executor = ThreadPoolExecutor(max_workers=n, thread_name_prefix="minitensor-optim")
            self.threads = n
        shares = _balanced_shares(params, n)
        futures = [self.executor.submit(_update_all, update, share) for share in shares[1:]]
        _update_all(update, shares[0])  # the calling thread takes a share too: one hand-off fewer
        for f in futures:
            f.result()


def _update_all(update, params: list) -> None:
    for p in params:
        update(p)


def _balanced_shares(params: list, n: int) -> list:
    """params split into n lists of about equal total size (largest first, each to the lightest list):
    one task per thread rather than one per parameter, whose hand-offs would cost more than the small
    parameters' updates (a copy-reverse step has 130)."""
    shares, loads = [[] for _ in range(n)], [0] * n
    for p in sorted(params, key=lambda p: -p.data.size):
        i = loads.index(min(loads))
        shares[i].append(p)
        loads[i] += p.data.size
    return [share for share in shares if share]


update_pool = UpdatePool()


BLOCK_NUMEL = 1 << 15  # 128 KiB of float32: the five arrays of an Adam block fit in L2 together


def in_blocks(*arrays):
    """Speed device for elementwise updates: yields (views of `arrays` over one block of BLOCK_NUMEL entries,
    scratch) block by block, scratch being a fresh array of the block's shape for intermediate terms.

    An update of a dozen passes (Adam) then runs each pass over a block that is still in the cache instead
    of over whole arrays in memory: Adam on the base model takes half the time. Every operation is
    elementwise, so the result is bitwise the one of a single pass. Arrays of the same shape; if one of
    them is not C-contiguous (a view cannot be flattened without a copy) they come whole, as one block."""
    n = arrays[0].size
    if n <= BLOCK_NUMEL or not all(a.flags.c_contiguous for a in arrays):
        yield arrays, np.empty_like(arrays[0])
        return
    flat = [a.reshape(-1) for a in arrays]
    scratch = np.empty(BLOCK_NUMEL, dtype=arrays[0].dtype)
    for start in range(0, n, BLOCK_NUMEL):
        block = tuple(a[start : start + BLOCK_NUMEL] for a in flat)
        yield block, scratch[: block[0].size]


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
        group["params"] = params
        self.param_groups.append(group)

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
        for _, params in groups:
            self._check_grads(params)
        for group, params in groups:
            update_pool.run(functools.partial(self.update_parameter, group=group), params)
            for p in params:
                p.bump_version()  # a graph that saved p now refuses to backpropagate
        return loss

    def _check_grads(self, params: list) -> None:
        """Every gradient has its parameter's shape and dtype (one set through .grad.data could differ):
        an update never broadcasts a gradient into a parameter."""
        for p in params:
            if p.grad.shape != p.shape or p.grad.dtype != p.dtype:
                raise RuntimeError(
                    f"{type(self).__name__}.step: a parameter of shape {p.shape} ({p.dtype}) has a "
                    f"gradient of shape {p.grad.shape} ({p.grad.dtype}); no parameter was updated"
                )

    def update_parameter(self, p, group: dict) -> None:
        """The update rule of one parameter with a gradient (p.data in place): each optimizer's formula."""
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
                    k: (v.copy() if isinstance(v, np.ndarray) else copy.deepcopy(v)) for k, v in self.state[pid].items()
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
                if isinstance(v, np.ndarray) and v.ndim > 0:
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
                    entry[k] = v.copy()
                elif isinstance(v, np.ndarray):  # a 0-d array (e.g. 'step' after np round trip)
                    entry[k] = v.item()
                else:
                    entry[k] = copy.deepcopy(v)
            new_state[id(p)] = entry
        self.state = _ParamState(new_state)
        for g, s in zip(self.param_groups, saved_groups):
            for k, v in s.items():
                if k != "params":
                    g[k] = tuple(v) if isinstance(g.get(k), tuple) and isinstance(v, list) else copy.deepcopy(v)
