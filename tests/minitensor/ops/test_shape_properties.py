"""Property-based tests (hypothesis): broadcasting, reductions and shape round trips on random shapes.

The op table fixes a few shapes per op; here hypothesis draws the shapes, dims and keepdim
flags. Example counts are small and derandomized so the file runs in seconds and every CI
run sees the same examples. Values are compared with PyTorch in float64 at OP_RTOL.
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, basic_indices, mutually_broadcastable_shapes

import minitensor as mt
from minitensor.testing import OP_RTOL, assert_close

RTOL = OP_RTOL["float64"]
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
    "maximum": lambda a, b: (mt if isinstance(a, mt.Tensor) else torch).maximum(a, b),
}


def _pair(arr: np.ndarray):
    return mt.tensor(arr.copy(), requires_grad=True), torch.tensor(arr.copy(), requires_grad=True)


@SETTINGS
@given(
    shapes=mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4),
    op=st.sampled_from(sorted(BINARY)),
    seed=st.integers(0, 2**31 - 1),
)
def test_binary_broadcasting(shapes, op, seed):
    rng = np.random.default_rng(seed)
    sa, sb = shapes.input_shapes
    a = rng.uniform(0.5, 2.0, sa)  # positive: a valid base for pow
    b = rng.uniform(0.5, 2.0, sb) * rng.choice([-1.0, 1.0], sb)  # away from 0: a valid divisor
    (am, at), (bm, bt) = _pair(a), _pair(b)
    out_m, out_t = BINARY[op](am, bm), BINARY[op](at, bt)
    assert out_m.shape == tuple(out_t.shape) == shapes.result_shape
    assert_close(out_m.detach().numpy(), out_t.detach().numpy(), RTOL, f"{op} {sa} {sb} forward")
    g = rng.standard_normal(shapes.result_shape)
    out_m.backward(mt.tensor(g.copy()))
    out_t.backward(torch.tensor(g.copy()))
    for x, r, s in ((am, at, sa), (bm, bt, sb)):
        assert x.grad.shape == s, f"{op}: grad shape {x.grad.shape} vs input {s}"
        assert_close(x.grad.numpy(), r.grad.numpy(), RTOL, f"{op} {sa} {sb} grad of {s}")


@st.composite
def shape_and_dims(draw):
    """A shape, and `dim` as None, an int (maybe negative) or a tuple of distinct dims."""
    shape = draw(array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    nd = len(shape)
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none":
        dim = None
    elif kind == "int":
        dim = draw(st.integers(-nd, nd - 1))
    else:
        dims = draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
        dim = tuple(d - nd if draw(st.booleans()) else d for d in dims)
    return shape, dim


REDUCTIONS = ["sum", "mean", "var", "logsumexp", "max", "min", "argmax"]


def _reduce(lib, x, name, dim, keepdim):
    """Apply a reduction the same way to both libraries (torch needs dim spelled out for some)."""
    full = tuple(range(x.ndim)) if dim is None else dim
    if name in ("sum", "mean"):
        return getattr(x, name)(dim=full, keepdim=keepdim) if keepdim or dim is not None else getattr(x, name)()
    if name == "var":
        return x.var(dim=full, unbiased=False, keepdim=keepdim)
    if name == "logsumexp":
        return x.logsumexp(dim=full, keepdim=keepdim)
    if name in ("max", "min"):  # dim -> values; full reduction -> scalar
        if isinstance(dim, int):
            return getattr(x, name)(dim=dim, keepdim=keepdim).values
        return getattr(x, name)()
    if name == "argmax":
        if isinstance(dim, int):
            return x.argmax(dim=dim, keepdim=keepdim)
        return x.argmax()
    raise ValueError(name)


@SETTINGS
@given(sd=shape_and_dims(), keepdim=st.booleans(), name=st.sampled_from(REDUCTIONS), seed=st.integers(0, 2**31 - 1))
def test_reductions(sd, keepdim, name, seed):
    shape, dim = sd
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    xm, xt = _pair(x)
    out_m, out_t = _reduce(mt, xm, name, dim, keepdim), _reduce(torch, xt, name, dim, keepdim)
    what = f"{name} shape={shape} dim={dim} keepdim={keepdim}"
    assert out_m.shape == tuple(out_t.shape), f"{what}: {out_m.shape} vs torch {tuple(out_t.shape)}"
    if name == "argmax":
        np.testing.assert_array_equal(out_m.numpy(), out_t.numpy(), err_msg=what)
        return
    assert_close(out_m.detach().numpy(), out_t.detach().numpy(), RTOL, what)
    g = rng.standard_normal(out_t.shape)
    out_m.backward(mt.tensor(np.asarray(g).copy()))
    out_t.backward(torch.tensor(np.asarray(g).copy()))
    assert xm.grad.shape == shape
    assert_close(xm.grad.numpy(), xt.grad.numpy(), RTOL, f"{what} grad")


def _factorizations(n: int) -> list[tuple]:
    """A few shapes with n elements (including -1 inference) for reshape round trips."""
    out = [(n,), (1, n), (n, 1), (-1,)]
    for d in range(2, n + 1):
        if n % d == 0:
            out += [(d, n // d), (d, -1), (n // d, 1, d)]
    return out


@SETTINGS
@given(shape=array_shapes(min_dims=1, max_dims=4, max_side=4), data=st.data())
def test_reshape_permute_round_trip(shape, data):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape)
    xm = mt.tensor(x.copy(), requires_grad=True)
    perm = data.draw(st.permutations(range(len(shape))))
    inv = tuple(int(i) for i in np.argsort(perm))
    new_shape = data.draw(st.sampled_from(_factorizations(int(np.prod(shape)))))
    y = xm.permute(*perm)
    assert y.shape == tuple(shape[p] for p in perm)
    z = y.permute(*inv).reshape(*new_shape).reshape(*shape)
    assert z.shape == shape
    np.testing.assert_array_equal(z.detach().numpy(), x)
    # the permuted view must read the same elements as NumPy's transpose
    np.testing.assert_array_equal(y.detach().numpy(), np.transpose(x, perm))
    g = rng.standard_normal(shape)
    z.backward(mt.tensor(g.copy()))
    np.testing.assert_array_equal(xm.grad.numpy(), g)  # a round trip moves the gradient unchanged


@SETTINGS
@given(
    shapes=mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=3, max_side=4),
    seed=st.integers(0, 2**31 - 1),
)
def test_matmul_shapes(shapes, seed):
    """np.matmul's signature '(n?,k),(k,m?)->(n?,m?)': 1-D operands and broadcast batch dims."""
    rng = np.random.default_rng(seed)
    sa, sb = shapes.input_shapes
    (am, at), (bm, bt) = _pair(rng.standard_normal(sa)), _pair(rng.standard_normal(sb))
    out_m, out_t = am @ bm, at @ bt
    what = f"matmul {sa} @ {sb}"
    assert out_m.shape == tuple(out_t.shape) == shapes.result_shape, what
    assert_close(out_m.detach().numpy(), out_t.detach().numpy(), RTOL, f"{what} forward")
    g = np.asarray(rng.standard_normal(shapes.result_shape))
    out_m.backward(mt.tensor(g.copy()))
    out_t.backward(torch.tensor(g.copy()))
    assert_close(am.grad.numpy(), at.grad.numpy(), RTOL, f"{what} grad a")
    assert_close(bm.grad.numpy(), bt.grad.numpy(), RTOL, f"{what} grad b")


# ----------------------------------------------------------------------------- indexing
# For indexing NumPy is the reference (torch follows the same rules but has no negative steps):
# forward x[idx]; gradient: the upstream gradient scattered back with np.add.at, so repeated
# indices accumulate.
@SETTINGS
@given(data=st.data(), shape=array_shapes(min_dims=1, max_dims=4, max_side=5))
def test_basic_indexing(data, shape):
    idx = data.draw(basic_indices(shape, allow_newaxis=True, allow_ellipsis=True), label="index")
    _check_index(shape, idx)


@SETTINGS
@given(data=st.data(), shape=array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
def test_integer_array_indexing(data, shape):
    """One or two integer arrays (repeats and negatives allowed), possibly mixed with a slice."""
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=min(2, len(shape)), unique=True))
    n = data.draw(st.integers(1, 6))
    idx = [slice(None)] * len(shape)
    for ax in axes:
        idx[ax] = np.array(data.draw(st.lists(st.integers(-shape[ax], shape[ax] - 1), min_size=n, max_size=n)))
    if len(axes) == 1 and len(shape) > 1 and data.draw(st.booleans()):
        other = next(a for a in range(len(shape)) if a not in axes)
        idx[other] = slice(None, None, 2)
    as_tensor = data.draw(st.booleans())
    index = tuple(mt.tensor(i) if as_tensor and isinstance(i, np.ndarray) else i for i in idx)
    _check_index(shape, tuple(idx), index)


def _check_index(shape, idx, mt_index=None):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape)
    xm = mt.tensor(x.copy(), requires_grad=True)
    y = xm[idx if mt_index is None else mt_index]
    ref = x[idx]
    assert y.shape == ref.shape, f"{idx}: {y.shape} vs NumPy {ref.shape}"
    np.testing.assert_array_equal(y.detach().numpy(), ref)
    g = rng.standard_normal(ref.shape)
    y.backward(mt.tensor(np.asarray(g).copy()))
    expected = np.zeros(shape)
    np.add.at(expected, idx, g)
    assert_close(xm.grad.numpy(), expected, RTOL, f"grad of x{idx}")
