"""Hessian-vector products of a loss by double backward, one helper for minitensor and PyTorch alike.

    hessian_vector_products(grad, loss, params) -> (gradient, v -> H v)

`grad` is the library's autograd.grad (mt.autograd.grad or torch.autograd.grad): the same lines run on
both sides, so the curvature experiment (transformer_np/experiments/curvature.py), its PyTorch column
(parity/curvature.py), the parity report's H v rows (parity/report.py) and the benchmarks' HVP
(benchmarks/workloads.py) all compute H v one way, and the parity report compares the two libraries on it.

Why double backward here, where mt.autograd.functional.hvp uses forward over reverse: the curvature
experiment runs power iteration, many directions on one batch. The gradient recorded once serves them all,
and each further H v is one backward through that record; forward over reverse reruns the forward and the
backward, with tangents, for every direction. For one direction the two cost about the same; for many, this
form costs less per direction (measured: docs/decisions/006-hvp-cost.md).
"""

from __future__ import annotations


def hessian_vector_products(grad, loss, params: list):
    """(gradient of `loss` in `params`, v -> H v): H v = d<grad loss, v>/d params, for a list v like params.

    The gradient is computed once with create_graph=True, recording its own backward pass; each H v then
    differentiates <gradient, v> through that record, kept (retain_graph) for the next direction. A one-off
    H v passes retain_graph=False: the record is freed as the second backward walks it, as for any backward.
    """
    grads = grad(loss, params, create_graph=True)

    def hvp(direction: list, retain_graph: bool = True) -> list:
        directional = sum((g * v).sum() for g, v in zip(grads, direction))  # <grad loss, v>
        return list(grad(directional, params, retain_graph=retain_graph))

    return grads, hvp
