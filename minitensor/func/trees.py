"""What the mt.func transforms share: pytrees of tensors, argnums, has_aux, and the checks on them.

A transform's differentiated arguments may be a Tensor or a nested tuple/list/dict of Tensors (a model's
parameters as a dict, as torch.func takes them); `tree_flatten` lists the leaves and `tree_unflatten`
rebuilds the structure around new ones (torch.utils._pytree does this for torch.func; here only the three
containers are trees). Every check runs before any work, and names what was expected and what came.
"""

from __future__ import annotations

from ..autograd import is_tensor_like


def tree_flatten(tree) -> tuple[list, object]:
    """(leaves, spec): the leaves of a nested tuple/list/dict in order (dicts by key order), and how to rebuild it."""
    if isinstance(tree, (tuple, list)):
        leaves, specs = [], []
        for item in tree:
            sub, spec = tree_flatten(item)
            leaves += sub
            specs.append((len(sub), spec))
        return leaves, (type(tree), specs)
    if isinstance(tree, dict):
        leaves, spec = tree_flatten(list(tree.values()))
        return leaves, (dict, (list(tree.keys()), spec))
    return [tree], None


def tree_unflatten(leaves, spec):
    """The structure `spec` (from tree_flatten) around `leaves`."""
    if spec is None:
        return leaves[0]
    kind, specs = spec
    if kind is dict:
        keys, inner = specs
        return dict(zip(keys, tree_unflatten(leaves, inner)))
    out, start = [], 0
    for n, sub in specs:
        out.append(tree_unflatten(leaves[start : start + n], sub))
        start += n
    return tuple(out) if kind is tuple else out


def tree_map(fn, tree):
    """The tree with fn applied to every leaf."""
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def tensor_leaves(tree, who: str, what: str) -> tuple[list, object]:
    """tree_flatten, refusing a leaf that is not a Tensor (named by its position)."""
    leaves, spec = tree_flatten(tree)
    for k, x in enumerate(leaves):
        if not is_tensor_like(x):
            where = f" (leaf {k})" if spec is not None else ""
            raise TypeError(f"{who}: expected {what}{where} to be a Tensor, got {type(x).__name__}")
    return leaves, spec


def float_leaves(tree, who: str, what: str) -> tuple[list, object]:
    """tensor_leaves, refusing an integer or bool leaf: only floating-point inputs can be differentiated."""
    leaves, spec = tensor_leaves(tree, who, what)
    for k, x in enumerate(leaves):
        if x.dtype.kind != "f":
            where = f" (leaf {k})" if spec is not None else ""
            raise TypeError(
                f"{who}: expected {what}{where} to be a floating-point Tensor to differentiate, got dtype {x.dtype}"
            )
    return leaves, spec


def normalize_argnums(argnums, n_args: int, who: str) -> tuple[tuple, bool]:
    """(the argnums as a tuple of non-negative ints, whether the caller gave a tuple), checked against n_args."""
    is_tuple = isinstance(argnums, tuple)
    nums = argnums if is_tuple else (argnums,)
    if is_tuple and not nums:
        raise RuntimeError(f"{who}: argnums must be non-empty, got an empty tuple")
    out = []
    for a in nums:
        if isinstance(a, bool) or not isinstance(a, int):
            raise RuntimeError(f"{who}: expected argnums to be an int or a tuple of ints, got {type(a).__name__}")
        if not -n_args <= a < n_args:
            raise RuntimeError(
                f"{who}: argnums {a} is out of range: expected an index into the {n_args} positional inputs "
                f"(from {-n_args} to {n_args - 1})"
            )
        out.append(a % n_args)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{who}: argnums must be unique, got {argnums}")
    return tuple(out), is_tuple


def split_aux(output, has_aux: bool, who: str):
    """(output, aux): with has_aux the function must return a pair (output, aux); aux is None otherwise."""
    if not has_aux:
        return output, None
    if not (isinstance(output, (tuple, list)) and len(output) == 2):
        got = (
            f"a {type(output).__name__} of length {len(output)}"
            if isinstance(output, (tuple, list))
            else (type(output).__name__)
        )
        raise RuntimeError(f"{who}: with has_aux=True, expected the function to return a pair (output, aux), got {got}")
    return output[0], output[1]


def check_scalar(output, who: str) -> None:
    """grad and grad_and_value differentiate a function with one 0-dim Tensor output (as torch.func)."""
    if not is_tensor_like(output):
        raise RuntimeError(f"{who}: expected the function to return a scalar Tensor, got {type(output).__name__}")
    if output.ndim != 0:
        raise RuntimeError(
            f"{who}: expected the function to return a scalar Tensor (0 dims), got a tensor of shape "
            f"{tuple(output.shape)}. Maybe you wanted to use the vjp or jacrev APIs instead?"
        )
