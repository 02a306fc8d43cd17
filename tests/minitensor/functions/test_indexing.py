"""nonzero, and what the op table cannot hold of scatter, scatter_add and index_fill: their in-place forms, a src
larger than the index, the refusals (each with torch's behaviour beside it)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt

A = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])


@pytest.mark.parametrize("a", [A, A[0], np.array(3.0), np.array(0.0), np.zeros((2, 0))])
def test_nonzero_as_torch(a):
    ours, ref = mt.nonzero(mt.tensor(a)), torch.nonzero(torch.tensor(a))
    assert ours.dtype == mt.int64 and ours.shape == tuple(ref.shape)
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())
    ours_t, ref_t = mt.tensor(a).nonzero(as_tuple=True), torch.tensor(a).nonzero(as_tuple=True)
    assert len(ours_t) == len(ref_t)
    for o, r in zip(ours_t, ref_t):
        np.testing.assert_array_equal(o.numpy(), r.numpy())


def test_in_place_forms_as_torch():
    idx = np.array([[1, 0, 1]])
    for lib in (mt, torch):
        x = lib.zeros(2, 3)
        assert x.scatter_(0, lib.tensor(idx), lib.ones(1, 3) * 2) is x
        x.scatter_add_(1, lib.tensor(idx), lib.ones(1, 3))
        x.index_fill_(1, lib.tensor([2]), -1.0)
        x.scatter_(1, lib.tensor([[0], [1]]), 7.0)
        if lib is mt:
            ours = x.numpy()
        else:
            np.testing.assert_array_equal(ours, x.numpy())


def test_scatter_takes_a_src_larger_than_the_index_as_torch():
    idx = np.array([[0, 1], [1, 0]])
    src = np.arange(12.0).reshape(3, 4)
    ours = mt.zeros(2, 3).scatter(0, mt.tensor(idx), mt.tensor(src, dtype=mt.float32))
    ref = torch.zeros(2, 3).scatter(0, torch.tensor(idx), torch.tensor(src).float())
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


def test_scatter_reduce_as_torch():
    idx = torch.tensor([[0, 0, 1]])
    for reduce in ["add", "multiply"]:
        ref = torch.full((2, 3), 2.0).scatter(0, idx, torch.full((1, 3), 3.0), reduce=reduce)
        ours = mt.full((2, 3), 2.0).scatter(0, mt.tensor(idx.numpy()), mt.full((1, 3), 3.0), reduce=reduce)
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: mt.zeros(2, 3).scatter(1, mt.tensor([[0, 0]]), mt.ones(1, 2)), ValueError, "more than once"),
        (lambda: mt.zeros(2, 3).scatter(1, mt.tensor([[3]]), mt.ones(1, 1)), IndexError, "out of range"),
        (lambda: mt.zeros(2, 3).scatter(1, mt.tensor([[0]]), mt.ones(1, 1), reduce="max"), ValueError, "reduce"),
        (lambda: mt.zeros(2, 3).scatter(1, mt.tensor([0]), mt.ones(1)), ValueError, "as many dimensions"),
        (lambda: mt.zeros(2, 3).scatter(1, mt.tensor([[0]]), mt.ones(1, 1, dtype=mt.float64)), TypeError, "dtype"),
        (lambda: mt.zeros(2, 3).scatter(1, mt.tensor([[0.0]]), 1.0), TypeError, "integer tensor"),
        (lambda: mt.zeros(2, 3).index_fill(1, mt.tensor([3]), 1.0), IndexError, "out of range"),
        (lambda: mt.zeros(2, 3).narrow(1, 2, 2), ValueError, "exceeds"),
        (lambda: mt.zeros(2, 3).narrow(1, 4, 0), IndexError, "out of range"),
        (lambda: mt.zeros(2, 3).roll((1, 2), 0), ValueError, "same length"),
        (lambda: mt.zeros(2, 3).roll((1, 2)), ValueError, "one int"),
        (lambda: mt.zeros(2, 3).flip((0, 0)), ValueError, "more than once"),
        (lambda: mt.zeros(2, 3).flip(), TypeError, "missing the dims"),
        (lambda: mt.zeros(2, 3).repeat_interleave(mt.tensor([1, 2]), dim=1), ValueError, "repeat counts"),
        (lambda: mt.zeros(2, 3).repeat_interleave(-1), ValueError, "non-negative"),
        (lambda: mt.tensor([1, 2]) % 0, ZeroDivisionError, "division by zero"),
    ],
)
def test_refusals_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_scatter_multiply_refuses_a_gradient():
    x = mt.ones(2, 3, requires_grad=True)
    with pytest.raises(NotImplementedError, match="no gradient"):
        x.scatter(0, mt.tensor([[0]]), mt.ones(1, 1), reduce="multiply")
