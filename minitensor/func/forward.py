"""The forward-mode transforms of mt.func: jvp, jacfwd, and hessian (jacfwd over jacrev), as torch.func's.

Each opens the dual level (autograd/forward_ad.py), makes the differentiated arguments dual numbers
x + ẋε, runs the function once and reads the output's tangent J ẋ (`forward_call`). jacfwd does that
once per input element with ẋ a unit vector, so it costs one pass per input where jacrev costs one per
output: the cheaper one is jacfwd for a tall Jacobian (few inputs, many outputs), jacrev for a wide one
(docs/forward_mode.md). Deviation, flagged: torch.func.jacfwd batches its columns with vmap; here they are
computed one by one, with the same values.

Randomness, as torch.func's jacfwd(randomness=...): a random op inside the function (dropout, randn, rand_like,
init.normal_, ...) runs once per column, so the flag decides what each column sees. "error" (the default) refuses
the draw, naming the op; "same" puts the generator back where it stood before the first column at the start of
every column, so that every column sees the draw the function makes when called once (one dropout mask for the
whole Jacobian, and the stream ends where one call leaves it); "different" lets each column draw afresh. hessian,
jacfwd over jacrev, takes no flag (as torch.func.hessian): a draw inside it is refused.

The dual level is one at a time (forward_ad.py), so a forward transform inside another (jacfwd of
jacfwd) is refused; forward over reverse (hessian) and reverse over forward (jacrev of jacfwd) work.
"""

from __future__ import annotations

import numpy as np

from ..autograd import forward_ad
from ..autograd.tangents import dual_state
from ..random import get_rng_state, randomness_refused, set_rng_state
from .reverse import jacrev, stack_jacobian
from .trees import float_leaves, normalize_argnums, split_aux, tensor_leaves, tree_flatten, tree_unflatten

__all__ = ["hessian", "jacfwd", "jvp"]


def forward_call(func, args, kwargs, nums, tangents: dict, has_aux: bool, who: str):
    """Run func once with the leaves named in `tangents` ({(argnum index, leaf index): tangent}) as dual tensors.
    Returns (output leaves, their tangents (zeros where none came), output structure, aux)."""
    if dual_state.level is not None:
        raise RuntimeError(
            f"{who}: a forward-mode transform inside another one (jvp or jacfwd of jvp or jacfwd) needs nested "
            f"dual levels, which minitensor does not have (one level at a time); use jacrev for one of the two"
        )
    new_args = list(args)
    with forward_ad.dual_level():
        for i, a in enumerate(nums):
            leaves, spec = tree_flatten(args[a])
            duals = [
                x if (i, j) not in tangents else forward_ad.make_dual(x, tangents[i, j]) for j, x in enumerate(leaves)
            ]
            new_args[a] = tree_unflatten(duals, spec)
        out, aux = split_aux(func(*new_args, **kwargs), has_aux, who)
        out_leaves, out_spec = tensor_leaves(out, who, "the output")
        primals, tangent_out = [], []
        for o in out_leaves:
            primal, tangent = forward_ad.unpack_dual(o)
            primals.append(primal)
            tangent_out.append(tangent if tangent is not None else o.wrap(np.zeros_like(o._data)))  # on o's device
    return primals, tangent_out, out_spec, aux


def jvp(func, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """(func(*primals), J tangents) in one forward pass (with has_aux: (output, jvp_out, aux)). primals and
    tangents are tuples of the same structure; each tangent has its primal's shape and dtype."""
    who = "jvp(f, primals, tangents)"
    if strict:
        raise RuntimeError(f"{who}: strict=True is not implemented (as in torch.func)")
    for name, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, tuple):
            raise RuntimeError(
                f"{who}: expected {name} to be a tuple (it should be valid to call f(*primals)), "
                f"got {type(value).__name__}"
            )
    p_leaves, p_spec = float_leaves(primals, who, "primals")
    t_leaves, t_spec = tensor_leaves(tangents, who, "tangents")
    if p_spec != t_spec:
        raise RuntimeError(f"{who}: expected tangents with the structure of primals ({len(p_leaves)} tensors)")
    for k, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        if tuple(p.shape) != tuple(t.shape) or p.dtype != t.dtype:
            raise RuntimeError(
                f"{who}: expected tangent {k} to have its primal's shape {tuple(p.shape)} and dtype {p.dtype}, "
                f"got shape {tuple(t.shape)} and dtype {t.dtype}"
            )
        if t.device != p.device:
            raise RuntimeError(
                f"{who}: expected tangent {k} on its primal's device {p.device}, got device {t.device} "
                f"(move it with .to({str(p.device)!r}))"
            )
    nums = tuple(range(len(primals)))
    given = {}
    for i in nums:
        for j, t in enumerate(tree_flatten(tangents[i])[0]):
            given[i, j] = t
    outs, jv, spec, aux = forward_call(func, primals, {}, nums, given, has_aux, who)
    result = (tree_unflatten(outs, spec), tree_unflatten(jv, spec))
    return (*result, aux) if has_aux else result


def jacfwd(func, argnums=0, has_aux: bool = False, *, randomness: str = "error", _who: str = "jacfwd"):
    """A function returning the Jacobian of func with respect to argnums by forward mode, one pass per input
    element: entry for output o and input x has shape o.shape + x.shape (with has_aux: (jacobian, aux)).
    randomness: what a random op inside func draws in each column, "error", "same" or "different" (the module's
    docstring). (_who: the name errors give, hessian's own when hessian calls it.)"""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"jacfwd: expected randomness to be 'error', 'different' or 'same', got {randomness!r}")
    advice = "while in randomness error mode (the default), where each column would draw its own numbers. " + (
        "Please either use randomness='same' (one draw for every column) or 'different' (a draw per column) on "
        "jacfwd, or perform the random operation outside the transform"
        if _who == "jacfwd"
        else f"{_who} takes no randomness flag (as torch.func's): perform the random operation outside it, or "
        f"call jacfwd(jacrev(f), randomness='same' or 'different') instead"
    )

    def wrapper(*args, **kwargs):
        who = f"{_who}(f)(*args)"
        nums, is_tuple = normalize_argnums(argnums, len(args), who)
        trees = [float_leaves(args[a], who, f"argument {a} (argnums)") for a in nums]
        start = get_rng_state()  # where every column starts with randomness="same"
        columns = {}  # (argnum index, leaf index) -> per output leaf, its columns d out / d x[j]
        first = None
        for i, (leaves, _) in enumerate(trees):
            for j, x in enumerate(leaves):
                cols = None
                for e in range(x.numel()):
                    unit = np.zeros_like(x._data, shape=(x.numel(),))  # on x's device (zeros_like keeps the module)
                    unit[e] = 1
                    if randomness == "same":
                        set_rng_state(start)
                    with randomness_refused(_who if randomness == "error" else None, advice):
                        tangent = {(i, j): x.wrap(unit.reshape(x.shape))}
                        run = forward_call(func, args, kwargs, nums, tangent, has_aux, who)
                    first = first or run
                    cols = cols or [[] for _ in run[1]]
                    for c, t in zip(cols, run[1]):
                        c.append(t)
                columns[i, j] = cols
        if first is None:  # no input element, no column (torch draws freely then): one call gives the output's shapes
            first = forward_call(func, args, kwargs, nums, {}, has_aux, who)
        outs, _, out_spec, aux = first
        per_output = []
        for k, o in enumerate(outs):
            per_argnum = []
            for i, (leaves, spec) in enumerate(trees):
                jac = [
                    stack_jacobian(columns[i, j][k] if columns[i, j] else [], o, x, dim=-1)
                    for j, x in enumerate(leaves)
                ]
                per_argnum.append(tree_unflatten(jac, spec))
            per_output.append(tuple(per_argnum) if is_tuple else per_argnum[0])
        result = tree_unflatten(per_output, out_spec)
        return (result, aux) if has_aux else result

    return wrapper


def hessian(func, argnums=0):
    """A function returning the Hessian of a scalar func with respect to argnums: jacfwd(jacrev(func)), forward
    over reverse (one forward with tangents and one backward per input element).

    Deviation, flagged: torch.func.hessian also takes a func with a non-scalar output (the Jacobian of its
    Jacobian); here that is refused, as the Hessian is meant for a scalar (torch.autograd.functional.hessian
    refuses it too)."""

    def scalar_func(*args, **kwargs):
        out = func(*args, **kwargs)
        if not hasattr(out, "numel") or out.numel() != 1:
            got = f"a tensor of shape {tuple(out.shape)}" if hasattr(out, "shape") else type(out).__name__
            raise RuntimeError(f"hessian: expected the function to return a scalar Tensor (one element), got {got}")
        return out

    return jacfwd(jacrev(scalar_func, argnums), argnums, _who="hessian")
