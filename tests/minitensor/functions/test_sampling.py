"""torch.multinomial: the distribution drawn (its streams differ from torch's, so counts, not indices, are compared),
with and without replacement, a generator, and the inputs torch refuses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt

P = np.array([[0.1, 0.0, 0.6, 0.3], [2.0, 1.0, 1.0, 0.0]])  # unnormalised weights, zeros that are never drawn


def test_with_replacement_draws_the_distribution():
    g = mt.Generator().manual_seed(0)
    n = 40_000
    out = mt.multinomial(mt.tensor(P), n, replacement=True, generator=g)
    assert out.shape == (2, n) and out.dtype == mt.int64
    for row, p in zip(out.numpy(), P):
        freq = np.bincount(row, minlength=4) / n
        expected = p / p.sum()
        assert (freq[expected == 0] == 0).all()
        # 5 standard errors of a binomial frequency
        assert np.all(np.abs(freq - expected) <= 5 * np.sqrt(expected * (1 - expected) / n) + 1e-12)


def test_without_replacement_draws_distinct_categories_in_torchs_order_law():
    """First draw by the weights; the second by the weights left: P(first=i, second=j) = p_i p_j / (1 - p_i)."""
    p = np.array([0.5, 0.3, 0.2])
    g = mt.Generator().manual_seed(1)
    n = 30_000
    out = mt.multinomial(mt.tensor(p).expand(n, 3), 2, generator=g).numpy()
    assert (out[:, 0] != out[:, 1]).all()
    counts = np.zeros((3, 3))
    np.add.at(counts, (out[:, 0], out[:, 1]), 1)
    for i in range(3):
        for j in range(3):
            if i != j:
                expected = p[i] * p[j] / (1 - p[i])
                assert abs(counts[i, j] / n - expected) <= 5 * np.sqrt(expected * (1 - expected) / n)
    for _ in range(20):  # a zero weight comes only after every nonzero one, as in torch
        full = mt.multinomial(mt.tensor(P), 4).numpy()
        assert full[0, 3] == 1 and full[1, 3] == 3 and sorted(full[0]) == [0, 1, 2, 3]


def test_shapes_and_dtypes_as_torch():
    for shape in [(4,), (3, 4)]:
        w = np.random.default_rng(0).random(shape)
        ref = torch.multinomial(torch.tensor(w), 3)
        out = mt.multinomial(mt.tensor(w), 3)
        assert out.shape == tuple(ref.shape) and out.dtype == mt.int64
    assert mt.tensor([1.0, 2.0]).multinomial(4, replacement=True).shape == (4,)


@pytest.mark.parametrize(
    "weights, n, replacement, match",
    [
        ([0.5, -0.1], 1, True, "element < 0"),
        ([0.5, float("nan")], 1, True, "inf, nan"),
        ([0.5, float("inf")], 1, True, "inf, nan"),
        ([0.0, 0.0], 1, True, "sum to 0"),
        ([0.5, 0.0, 0.5], 4, False, "cannot draw 4 samples without replacement"),
        ([0.5, 0.5], 0, True, "positive int"),
        ([[[0.5]]], 1, True, "1-D or 2-D"),
    ],
)
def test_refuses_what_torch_refuses(weights, n, replacement, match):
    with pytest.raises(RuntimeError):
        torch.multinomial(torch.tensor(weights), n, replacement)
    with pytest.raises(ValueError, match=match):
        mt.multinomial(mt.tensor(weights), n, replacement)


def test_refuses_integer_weights_as_torch():
    with pytest.raises(RuntimeError):
        torch.multinomial(torch.tensor([1, 2]), 1)
    with pytest.raises(TypeError, match="floating-point"):
        mt.multinomial(mt.tensor([1, 2]), 1)
