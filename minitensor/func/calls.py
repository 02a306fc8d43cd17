"""mt.func.functional_call: a module run with tensors of your choosing as its parameters and buffers."""

from __future__ import annotations

from ..autograd import stateless


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """module(*args, **kwargs) with the named tensors in place of its own parameters and buffers, as
    torch.func.functional_call: the output becomes a function of those tensors (grad, jacrev, hessian of a
    model's loss). parameter_and_buffer_dicts: a dict name -> Tensor, or a tuple of dicts (no name in two).

    tie_weights=True (torch's default): a tensor registered under several names (a shared module, as in
    Sequential(a, a); a tied embedding and output projection) is replaced under all of them, given under any
    one (state_dict's names, not only named_parameters'); two different tensors for it are refused, with
    torch's error. tie_weights=False: only the names given are replaced (a module reached under two names is
    still one module). strict=True: every name of every parameter and buffer must be given (after tying), and
    no other name. Deviation from PyTorch, flagged: a name the module does not have is refused (KeyError) where
    torch, without strict, ignores it silently."""
    dicts = parameter_and_buffer_dicts
    dicts = tuple(dicts) if isinstance(dicts, (tuple, list)) else (dicts,)
    merged = {}
    for d in dicts:
        if not isinstance(d, dict):
            raise TypeError(
                f"functional_call: expected a dict name -> Tensor (or a tuple of them), got {type(d).__name__}"
            )
        for name, t in d.items():
            if name in merged:
                raise ValueError(f"functional_call: {name!r} appeared in more than one of the dicts given")
            merged[name] = t
    if not isinstance(tie_weights, bool):
        raise TypeError(f"functional_call: expected tie_weights to be a bool, got {tie_weights!r}")
    if tie_weights:
        merged = stateless.untie_named_tensors(module, merged)
    if strict:
        expected = set(stateless.named_tensors(module))
        missing, unexpected = sorted(expected - set(merged)), sorted(set(merged) - expected)
        if missing or unexpected:
            raise RuntimeError(
                f"functional_call (strict=True): expected exactly the module's parameters and buffers; "
                f"missing keys {missing}, unexpected keys {unexpected}"
            )
    if args is None:
        args = ()
    args = args if isinstance(args, tuple) else (args,)
    return stateless.functional_call(module, merged, args, kwargs, tie_weights=False)  # tied above
