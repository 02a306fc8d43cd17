"""Indexing primitives: a[index] and the embedding lookup W[ids]. Both scatter g back into zeros;
repeated integer indices accumulate (np.add.at), as in PyTorch."""
from __future__ import annotations

import numpy as np

from ..autograd import Function


class GetItem(Function):
    """out = a[index];  da = zeros with g written (basic index) or scatter-added (integer arrays:
    repeated indices accumulate) at index"""
    returns_view = True                 # a basic index gives a view (an integer-array index a copy)

    @staticmethod
    def forward(ctx, a, index, advanced):
        ctx.shape, ctx.index, ctx.advanced = a.shape, index, advanced
        return a[index]

    @staticmethod
    def backward(ctx, g):
        grad = np.zeros(ctx.shape, dtype=g.dtype)
        if ctx.advanced:
            np.add.at(grad, ctx.index, g)
        else:
            grad[ctx.index] = g
        return (grad,)


class Embedding(Function):
    """out = W[ids];  dW = scatter-add of g into the rows ids (repeated ids accumulate), padding row 0"""
    @staticmethod
    def forward(ctx, weight, ids, padding_idx=None):
        ctx.ids, ctx.num, ctx.padding_idx = ids, weight.shape[0], padding_idx
        return weight[ids]

    @staticmethod
    def backward(ctx, g):
        D = g.shape[-1]
        grad = np.zeros((ctx.num, D), dtype=g.dtype)
        np.add.at(grad, ctx.ids.reshape(-1), g.reshape(-1, D))
        if ctx.padding_idx is not None:
            grad[ctx.padding_idx] = 0
        return grad, None
