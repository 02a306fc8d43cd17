"""A module as a function of its parameters (torch.nn.utils.stateless): functional_call runs a module with tensors
of your choosing in place of its parameters and buffers, and gives its own back afterwards.

A tensor registered under several names (a module shared, as in Sequential(a, a); a tied embedding and output
projection) is replaced under all of them, whichever is given, with tie_weights=True (untie_named_tensors, as torch's
_untie_named_tensors_map); mt.func.functional_call (func/calls.py) adds torch.func's dict handling and strict.
"""

from __future__ import annotations

from contextlib import contextmanager

__all__ = ["functional_call", "named_tensors", "untie_named_tensors"]


def named_tensors(module) -> dict:
    """Every parameter and buffer under every name it has, a tied or shared one under each (state_dict's names)."""
    return {
        **dict(module.named_parameters(remove_duplicate=False)),
        **dict(module.named_buffers(remove_duplicate=False)),
    }


def untie_named_tensors(module, parameters: dict) -> dict:
    """parameters with each tensor given for a tied one (registered under several names: a shared module, a tied
    embedding and output projection) given under all of its names, as torch's tie_weights=True does. Two different
    tensors given for one tied tensor are refused with torch's error (it compares them by identity, as here)."""
    names_of = {}  # id(tensor) -> all its names
    for name, t in named_tensors(module).items():
        names_of.setdefault(id(t), []).append(name)
    everything = named_tensors(module)
    untied = dict(parameters)
    for name in parameters:
        if name not in everything or len(names_of[id(everything[name])]) < 2:
            continue
        tied = names_of[id(everything[name])]
        if len({id(parameters[n]) for n in tied if n in parameters}) > 1:
            raise ValueError(
                f"functional_call got multiple values for keys {sorted(tied)}, which are tied. Consider using "
                f"tie_weights=False"
            )
        untied.update((n, parameters[name]) for n in tied)
    return untied


@contextmanager
def _parameters_replaced(module, parameters: dict):
    """Inside the block, module's parameters (and buffers) named in `parameters` are those tensors; restored after.
    Each name is replaced where it points; a module reached under two names (Sequential(a, a)) is one module, so
    its tensor changes under both (untie_named_tensors gives the rest of a tied tensor's names their value)."""
    owners = dict(module.named_modules(remove_duplicate=False))
    saved = []
    try:
        for name, tensor in parameters.items():
            owner_name, _, leaf = name.rpartition(".")
            owner = owners.get(owner_name)
            store = None if owner is None else owner._parameters if leaf in owner._parameters else owner._buffers
            if store is None or leaf not in store:
                raise KeyError(f"functional_call: {type(module).__name__} has no parameter or buffer {name!r}")
            saved.append((store, leaf, store[leaf]))
            store[leaf] = tensor
        yield
    finally:
        for store, leaf, original in reversed(saved):  # last first: a slot set twice gets its original back
            store[leaf] = original


def functional_call(module, parameters: dict, args=(), kwargs=None, *, tie_weights: bool = True):
    """module(*args, **kwargs) with the tensors of `parameters` (name -> Tensor) in place of its own.

    PyTorch's torch.func.functional_call: the module's output becomes a function of those tensors,
    which is what hvp, jacobian and the rest need of a model. The module's own parameters are back
    in place when the call returns. tie_weights=True: a tensor registered under several names is replaced
    under all of them, whichever is given (untie_named_tensors); False: only under the names given.
    """
    args = args if isinstance(args, tuple) else (args,)
    if tie_weights:
        parameters = untie_named_tensors(module, parameters)
    with _parameters_replaced(module, parameters):
        return module(*args, **(kwargs or {}))
