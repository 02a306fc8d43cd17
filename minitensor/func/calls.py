"""mt.func.functional_call: a module run with tensors of your choosing as its parameters and buffers."""

from __future__ import annotations

from ..autograd import functional


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """module(*args, **kwargs) with the named tensors in place of its own parameters and buffers, as
    torch.func.functional_call: the output becomes a function of those tensors (grad, jacrev, hessian of a
    model's loss). parameter_and_buffer_dicts: a dict name -> Tensor, or a tuple of dicts (no name in two).
    strict=True: every parameter and buffer must be given, and no other name. tie_weights is accepted: a
    parameter shared by two submodules is one entry here (named_parameters lists it once), so it is replaced
    everywhere it is used, as torch's tie_weights=True does."""
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
    if strict:
        expected = {n for n, _ in module.named_parameters()} | {n for n, _ in module.named_buffers()}
        missing, unexpected = sorted(expected - set(merged)), sorted(set(merged) - expected)
        if missing or unexpected:
            raise RuntimeError(
                f"functional_call (strict=True): expected exactly the module's parameters and buffers; "
                f"missing keys {missing}, unexpected keys {unexpected}"
            )
    if args is None:
        args = ()
    return functional.functional_call(module, merged, args if isinstance(args, tuple) else (args,), kwargs)
