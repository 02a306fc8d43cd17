"""mt.func: function transforms as torch.func spells them (jvp, vjp, grad, grad_and_value, jacfwd, jacrev,
hessian, functional_call), with argnums and has_aux, returning what torch.func returns.

    mt.func.grad(f)(x)                      the gradient of a scalar f at x (one backward)
    mt.func.jvp(f, (x,), (v,))              (f(x), J v), one forward pass with tangents (forward mode)
    mt.func.jacrev(f)(x), jacfwd(f)(x)      the Jacobian, one backward per output / one forward per input
    mt.func.hessian(f)(x)                   jacfwd(jacrev(f)): forward over reverse
    mt.func.functional_call(model, params, args)   a module as a function of its parameters

    reverse.py   vjp, grad, grad_and_value, jacrev: one recorded forward, then backwards
    forward.py   jvp, jacfwd, hessian: forward passes in the dual level (autograd/forward_ad.py)
    calls.py     functional_call (parameters and buffers)
    trees.py     tuples/lists/dicts of tensors, argnums, has_aux, and the checks on them

Deviation, flagged: there is no vmap. Jacobian rows (jacrev) and columns (jacfwd) are computed one pass at
a time, with the values torch's batched ones have; chunk_size is accepted and changes nothing. jacfwd's
randomness is torch's: "error" (the default) refuses a random op inside the function, "same" gives every
column one draw, "different" a draw each (forward.py); hessian refuses one, and so do jacrev's backward rows.
"""

from __future__ import annotations

from .calls import functional_call
from .forward import hessian, jacfwd, jvp
from .reverse import grad, grad_and_value, jacrev, vjp
from .trees import tree_flatten, tree_map, tree_unflatten

__all__ = [
    "functional_call",
    "grad",
    "grad_and_value",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "tree_flatten",
    "tree_map",
    "tree_unflatten",
    "vjp",
]
