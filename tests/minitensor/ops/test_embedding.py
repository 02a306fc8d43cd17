"""F.embedding's and nn.Embedding's max_norm, norm_type, scale_grad_by_freq and sparse, against torch: the values,
the weight rescaled in place by max_norm, the gradient divided by each id's count, the tangent, the second order."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt
import minitensor.nn.functional as F
from minitensor.testing import OP_RTOL, assert_close

IDS = np.array([[0, 2, 2, 5], [5, 5, 1, 2]])


def _weight(seed=0, scale=3.0):
    return np.random.default_rng(seed).standard_normal((7, 4)) * scale


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 2.0, 100.0])
def test_max_norm_rescales_the_looked_up_rows_in_place_as_torch(max_norm, norm_type):
    w0 = _weight()
    w, wt = mt.tensor(w0.copy(), requires_grad=True), torch.tensor(w0.copy(), requires_grad=True)
    v0 = w._version
    out = F.embedding(mt.tensor(IDS), w, max_norm=max_norm, norm_type=norm_type)
    ref = torch.nn.functional.embedding(torch.tensor(IDS), wt, max_norm=max_norm, norm_type=norm_type)
    assert_close(out.detach().numpy(), ref.detach().numpy(), OP_RTOL["float64"], "output")
    assert_close(w.detach().numpy(), wt.detach().numpy(), OP_RTOL["float64"], "weight after the call")
    changed = not np.array_equal(w.detach().numpy(), w0)
    assert changed == (max_norm < 100.0)  # rows 3, 4, 6 are never looked up: they keep their norms
    assert (w._version > v0) == changed
    np.testing.assert_array_equal(w.detach().numpy()[[3, 4, 6]], w0[[3, 4, 6]])
    g = np.random.default_rng(1).standard_normal(ref.shape)
    out.backward(mt.tensor(g))
    ref.backward(torch.tensor(g))
    assert_close(w.grad.numpy(), wt.grad.numpy(), OP_RTOL["float64"], "gradient")


def test_max_norm_on_a_weight_a_graph_saved_is_caught_at_backward():
    """The in-place rescale bumps the version: a graph that saved the old weight refuses, as torch's does."""
    w = mt.tensor(_weight(), requires_grad=True)
    y = (w * w).sum()  # saves w
    F.embedding(mt.tensor(IDS), w, max_norm=0.5)
    with pytest.raises(RuntimeError, match="modified by an inplace operation|version"):
        y.backward()


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_scale_grad_by_freq_divides_each_rows_gradient_by_its_count_as_torch(padding_idx):
    w0 = _weight()
    w, wt = mt.tensor(w0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    out = F.embedding(mt.tensor(IDS), w, padding_idx=padding_idx, scale_grad_by_freq=True)
    ref = torch.nn.functional.embedding(torch.tensor(IDS), wt, padding_idx=padding_idx, scale_grad_by_freq=True)
    g = np.random.default_rng(2).standard_normal(ref.shape)
    out.backward(mt.tensor(g))
    ref.backward(torch.tensor(g))
    assert_close(w.grad.numpy(), wt.grad.numpy(), OP_RTOL["float64"], "gradient")
    plain = mt.tensor(w0, requires_grad=True)
    F.embedding(mt.tensor(IDS), plain, padding_idx=padding_idx).backward(mt.tensor(g))
    assert not np.allclose(plain.grad.numpy(), w.grad.numpy())  # the option changes something


def test_scale_grad_by_freq_tangent_as_torch_and_no_second_order():
    w0 = _weight()
    tw = np.random.default_rng(3).standard_normal(w0.shape)
    with mt.autograd.forward_ad.dual_level():
        d = mt.autograd.forward_ad.make_dual(mt.tensor(w0), mt.tensor(tw))
        got = mt.autograd.forward_ad.unpack_dual(F.embedding(mt.tensor(IDS), d, scale_grad_by_freq=True)).tangent
    with torch.autograd.forward_ad.dual_level():
        d = torch.autograd.forward_ad.make_dual(torch.tensor(w0), torch.tensor(tw))
        want = torch.autograd.forward_ad.unpack_dual(
            torch.nn.functional.embedding(torch.tensor(IDS), d, scale_grad_by_freq=True)
        ).tangent
    assert_close(got.numpy(), want.numpy(), OP_RTOL["float64"], "tangent")
    # Second order is refused: differentiated again, the division by the counts would be applied twice (torch's own
    # double backward leaves it out of the inner rule); the refusal says so instead of a wrong Hessian.
    w = mt.tensor(w0, requires_grad=True)
    with pytest.raises(RuntimeError, match="scale_grad_by_freq=True is differentiable once only"):
        mt.autograd.grad((F.embedding(mt.tensor(IDS), w, scale_grad_by_freq=True) ** 2).sum(), [w], create_graph=True)


def test_the_module_takes_the_same_options_as_torch():
    m = mt.nn.Embedding(7, 4, max_norm=1.0, scale_grad_by_freq=True, dtype=np.float64)
    t = torch.nn.Embedding(7, 4, max_norm=1.0, scale_grad_by_freq=True).double()
    m.weight.data[...] = t.weight.detach().numpy() * 3  # rows above the max norm
    with torch.no_grad():
        t.weight.mul_(3)
    out, ref = m(mt.tensor(IDS)), t(torch.tensor(IDS))
    assert_close(out.detach().numpy(), ref.detach().numpy(), OP_RTOL["float64"], "output")
    assert "max_norm=1.0" in repr(m) and "scale_grad_by_freq=True" in repr(m)


def test_sparse_is_refused_with_its_reason():
    with pytest.raises(NotImplementedError, match="sparse"):
        F.embedding(mt.tensor(IDS), mt.tensor(_weight()), sparse=True)
    with pytest.raises(NotImplementedError, match="sparse"):
        mt.nn.Embedding(7, 4, sparse=True)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_a_bad_max_norm_is_refused(bad):
    with pytest.raises(ValueError, match="max_norm"):
        F.embedding(mt.tensor(IDS), mt.tensor(_weight()), max_norm=bad)
