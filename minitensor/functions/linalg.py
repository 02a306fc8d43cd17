"""The torch.* matrix products: matmul (batched, broadcasting), mm, bmm, and einsum as a composite."""

from __future__ import annotations

import builtins

import numpy as np

from .. import ops
from ..arguments import check_tensor, operand
from ..autograd import is_tensor_like
from ..devices import array_module
from ..dtypes import result_type
from .shape import expand, permute, reshape_to

__all__ = ["bmm", "einsum", "matmul", "mm"]


def matmul(a, b):
    """torch.matmul: batched with broadcasting; 1-D operands are promoted and the added dim removed."""
    if not is_tensor_like(a) or not is_tensor_like(b):
        raise TypeError(f"matmul: expected two tensors, got {type(a).__name__} and {type(b).__name__}")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: both arguments need at least 1 dimension, got shapes {a.shape} and {b.shape}")
    ka = a.shape[-1]
    kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if ka != kb:
        raise ValueError(
            f"matmul: shapes {a.shape} and {b.shape} are not aligned: "
            f"{ka} (last dim of the first) != {kb} "
            f"(the second's {'only' if b.ndim == 1 else 'second-to-last'} dim)"
        )
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: batch dimensions of {a.shape} and {b.shape} do not broadcast") from None
    if a.dtype != b.dtype:
        dt = result_type(a, b)
        a, b = operand(a, dt, a), operand(b, dt, b)
    return ops.MatMul.apply(a, b)


def mm(input, mat2):
    """Matrix product of two 2-D tensors (no broadcasting: torch.matmul does that)."""
    for name, x in (("input", input), ("mat2", mat2)):
        if check_tensor(x, "mm", name).ndim != 2:
            raise ValueError(f"mm: {name} must be a 2-D matrix, got shape {x.shape}")
    return matmul(input, mat2)


def bmm(input, mat2):
    """Batched matrix product of (B, n, m) and (B, m, p) tensors, the same B (no broadcasting)."""
    for name, x in (("input", input), ("mat2", mat2)):
        if check_tensor(x, "bmm", name).ndim != 3:
            raise ValueError(f"bmm: {name} must be a 3-D batch of matrices (B, n, m), got shape {x.shape}")
    if input.shape[0] != mat2.shape[0]:
        raise ValueError(
            f"bmm: batch sizes differ: input {input.shape} and mat2 {mat2.shape} (bmm does not broadcast; use matmul)"
        )
    return matmul(input, mat2)


def einsum(equation: str, *operands):
    """torch.einsum as a composite: a letter repeated within one operand first takes that operand's diagonal
    ('ii->i', 'iij->j'; an integer-array index, so the gradient lands back on the diagonal); '...' stands for
    the dims the letters do not name, aligned from the right across operands; then each operand is laid out
    over all the equation's letters (permuted, with size-1 axes for the letters it lacks), the operands are
    multiplied by broadcasting (a size-1 dim broadcasts, as in PyTorch), and the letters not in the output
    are summed. Exact; the product over every letter is materialised (no contraction order), which suits
    the small shapes one learns with."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum: expected an equation string such as 'ij,jk->ik', got {type(equation).__name__}")
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    subscripts = lhs.split(",")
    if len(subscripts) != len(operands):
        raise ValueError(f"einsum: {equation!r} names {len(subscripts)} operands, got {len(operands)}")
    for k, x in enumerate(operands):
        check_tensor(x, "einsum", f"operand {k}")
    subscripts, rhs = _einsum_ellipsis(equation, subscripts, rhs if arrow else None, operands)
    used = "".join(subscripts)
    if rhs is None:  # implicit output: the letters used once, alphabetically
        rhs = "".join(sorted(c for c in set(used) if used.count(c) == 1))
    if not (used + rhs).isalpha() and (used + rhs):
        raise ValueError(f"einsum: subscripts must be letters, got {equation!r}")
    if len(set(rhs)) != len(rhs) or not set(rhs) <= set(used):
        raise ValueError(f"einsum: the output {rhs!r} must name distinct letters of the inputs")
    laid_out = []  # (letters, tensor) per operand, each letter once
    sizes: dict = {}  # letter -> its size (> 1 where some operand has it so; 1 broadcasts)
    for k, (sub, x) in enumerate(zip(subscripts, operands)):
        if x.ndim != len(sub):
            raise ValueError(f"einsum: operand {k} has {x.ndim} dimensions but subscripts {sub!r} name {len(sub)}")
        sub, x = _einsum_diagonal(sub, x, k)
        for c, n in zip(sub, x.shape):
            if sizes.setdefault(c, n) != n and 1 not in (sizes[c], n):
                raise ValueError(f"einsum: letter {c!r} is size {sizes[c]} in one operand and {n} in operand {k}")
            sizes[c] = n if sizes[c] == 1 else sizes[c]
        laid_out.append((sub, x))
    order = list(rhs) + sorted(set(used) - set(rhs))  # output letters first, then the summed ones
    product = None
    for sub, x in laid_out:
        own = dict(zip(sub, x.shape))
        dims = sorted(range(len(sub)), key=lambda i: order.index(sub[i]))
        x = x if dims == sorted(dims) else permute(x, dims)
        x = reshape_to(x, tuple(own.get(c, 1) for c in order))
        product = x if product is None else product * x
    product = expand(product, tuple(sizes[c] for c in order))  # letters of size 1 in every operand stay 1
    summed = tuple(range(len(rhs), len(order)))
    return product.sum(dim=summed) if summed else product


def _einsum_ellipsis(equation: str, subscripts: list, rhs, operands) -> tuple:
    """'...' replaced by letters the equation does not use: operand k's '...' covers its dims the letters do
    not name, the last of the E letters of the widest '...' (dims aligned from the right, as broadcasting
    aligns them). An implicit output starts with them, as in PyTorch."""
    if "." not in equation:
        return subscripts, rhs
    counts = []
    for k, (sub, x) in enumerate(zip(subscripts, operands)):
        if sub.replace("...", "", 1).count(".") or (rhs is not None and rhs.replace("...", "", 1).count(".")):
            raise ValueError(f"einsum: '.' only as one '...' per operand and output, got {equation!r}")
        n = x.ndim - (len(sub) - 3) if "..." in sub else 0
        if n < 0:
            raise ValueError(f"einsum: operand {k} has {x.ndim} dimensions, fewer than {sub!r} names")
        counts.append(n)
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in equation][
        : builtins.max(counts)
    ]
    subscripts = [sub.replace("...", "".join(free[len(free) - n :])) for sub, n in zip(subscripts, counts)]
    if rhs is None:
        used = "".join(subscripts)
        return subscripts, "".join(free) + "".join(sorted(c for c in set(used) - set(free) if used.count(c) == 1))
    return subscripts, rhs.replace("...", "".join(free))


def _einsum_diagonal(sub: str, x, k: int) -> tuple:
    """(sub with each letter once, x's diagonal over the dims of each repeated letter): 'iij' on x gives
    'ij' and y[i, j] = x[i, i, j], as the integer-array index x[ar_i, ar_i, ar_j] with each arange laid
    along its letter's axis of the result."""
    letters = "".join(dict.fromkeys(sub))
    if letters == sub:
        return sub, x
    for c in letters:
        n = {x.shape[i] for i, ci in enumerate(sub) if ci == c}
        if len(n) > 1:
            raise ValueError(f"einsum: letter {c!r} is repeated in operand {k} ({sub!r}) with sizes {sorted(n)}")
    xp = array_module(x._data)
    index = tuple(xp.arange(x.shape[i]).reshape([-1 if c == ci else 1 for c in letters]) for i, ci in enumerate(sub))
    return letters, ops.GetItem.apply(x, index=index, advanced=True)
