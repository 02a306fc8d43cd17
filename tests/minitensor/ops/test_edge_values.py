"""Engine discrepancies found by the differential fuzzer (tests/minitensor/ops/test_fuzz.py), one minimal
reproduction each.

Each test states what PyTorch (float64) does. A new finding is added here marked xfail(strict=True), with an entry of
`KNOWN` (and a guard) in tests/minitensor/ops/test_fuzz.py; when the engine is fixed, strict xfail turns the pass into a
failure, and whoever fixed it removes the mark here and the `KNOWN` entry and guard there.

A behaviour where the engine keeps its own answer on purpose is a deviation: its test states ours, and
tests/minitensor/ops/test_fuzz.py steps around it through `DEVIATIONS` (documented where it happens in the engine).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import minitensor as mt
import minitensor.nn.functional as F
from minitensor.testing import OP_RTOL, assert_close

RTOL = OP_RTOL["float64"]
nan, inf = float("nan"), float("inf")


def both(a):
    """The same float64 array as a minitensor leaf and a torch leaf, both requiring grad."""
    a = np.asarray(a, dtype=np.float64)
    return mt.tensor(a.copy(), requires_grad=True), torch.tensor(a.copy(), requires_grad=True)


def same_grad(fn, a, upstream=None):
    """Forward `fn` in both libraries, backward the same upstream gradient, compare value and gradient.

    RuntimeWarnings are silenced here: their leak is a separate known issue, and each case must fail (or,
    once fixed, pass) on its values alone."""
    x, xt = both(a)
    g = None if upstream is None else np.asarray(upstream, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        y, yt = fn(x), fn(xt)
        assert_close(np.atleast_1d(y.detach().numpy()), np.atleast_1d(yt.detach().numpy()), RTOL, what="forward")
        g = np.ones(yt.shape) if g is None else g
        y.backward(mt.tensor(g.copy()))
        yt.backward(torch.tensor(g.copy()))
    assert_close(np.atleast_1d(x.grad.numpy()), np.atleast_1d(xt.grad.numpy()), RTOL, what="gradient")


# ---------------------------------------------------------------------------------------- dims of a 0-d tensor
@pytest.mark.parametrize("op", ["sum", "mean", "logsumexp", "transpose"])
def test_dim_0_of_a_0d_tensor(op):
    fns = {
        "sum": lambda v: v.sum(dim=0),
        "mean": lambda v: v.mean(dim=-1, keepdim=True),
        "logsumexp": lambda v: v.logsumexp(dim=0),
        "transpose": lambda v: v.transpose(0, -1),
    }
    same_grad(fns[op], 0.7)


def test_argmax_keepdim_of_a_0d_tensor():
    assert mt.tensor(0.7).argmax(dim=-1, keepdim=True).shape == torch.tensor(0.7).argmax(dim=-1, keepdim=True).shape


def test_flatten_out_of_range_dim_of_a_0d_tensor():
    with pytest.raises(IndexError):
        torch.tensor(0.7).flatten(1)
    with pytest.raises((IndexError, ValueError), match="flatten"):
        mt.tensor(0.7).flatten(1)


def test_gelu_of_a_0d_tensor():
    same_grad(lambda v: (F if isinstance(v, mt.Tensor) else torch.nn.functional).gelu(v), 0.7)


@pytest.mark.parametrize("op", ["amax", "amin"])
def test_amax_over_dim_0(op):
    same_grad(lambda v: getattr(v, op)(dim=0), [[1.0, 5.0, 2.0], [4.0, 0.5, 3.0]], upstream=[1.0, 2.0, 3.0])


# ---------------------------------------------------------------------------------------- empty tensors
def test_softmax_of_an_empty_tensor():
    same_grad(lambda v: v.softmax(0), np.zeros((0, 4)))


def test_amax_of_an_empty_tensor_names_the_op():
    with pytest.raises((IndexError, RuntimeError)):
        torch.zeros(0).amax(dim=0)
    with pytest.raises((ValueError, IndexError, RuntimeError), match="amax"):
        mt.zeros(0).amax(dim=0)


@pytest.mark.parametrize("op", ["mean", "var", "std"])
def test_mean_over_zero_elements_warns_nothing(op):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = getattr(mt.zeros(0, 3, dtype=mt.float64), op)(dim=0)
    ref = getattr(torch.zeros(0, 3, dtype=torch.float64), op)(dim=0)
    assert_close(ours.numpy(), ref.numpy(), RTOL, what=op)


def test_linear_with_no_input_features():
    x, xt = both(np.zeros(0))
    w, wt = both(np.zeros((1, 0)))
    b, bt = both([1.5])
    assert_close(
        F.linear(x, w, b).detach().numpy(), torch.nn.functional.linear(xt, wt, bt).detach().numpy(), RTOL, "value"
    )


# ---------------------------------------------------------------------------------------- broadcasting semantics
def test_masked_fill_with_a_mask_that_grows_the_input():
    mask = np.array([[True, False], [False, True]])
    same_grad(
        lambda v: v.masked_fill((mt.tensor(mask) if isinstance(v, mt.Tensor) else torch.tensor(mask)), 2.5),
        [0.3],
        upstream=[[1.0, 2.0], [3.0, 4.0]],
    )


# ---------------------------------------------------------------------------------------- non-finite gradients
def test_relu_backward_with_an_infinite_upstream_gradient():
    same_grad(lambda v: v.relu(), [-2.0, 3.0], upstream=[inf, 1.0])


def test_clamp_backward_with_an_infinite_upstream_gradient():
    same_grad(lambda v: v.clamp(-0.5, 0.5), [1.5, 0.1], upstream=[inf, 1.0])


def test_minimum_backward_with_a_nan_upstream_gradient():
    other = np.array([0.0, 0.0])
    same_grad(
        lambda v: (mt if isinstance(v, mt.Tensor) else torch).minimum(
            v, mt.tensor(other) if isinstance(v, mt.Tensor) else torch.tensor(other)
        ),
        [1.0, -1.0],
        upstream=[nan, 1.0],
    )


def test_pow_zero_backward_with_an_infinite_upstream_gradient():
    same_grad(lambda v: v**0, [2.0, -3.0], upstream=[inf, 1.0])


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_backward_with_an_infinite_upstream_gradient(smoothing):
    """A deviation kept on purpose: ours is (softmax - q) * g, the limit, so a row with g = inf gets +-inf by the
    sign of p - q; torch's composite backward (log_softmax after nll_loss) computes inf - inf there and gives NaN.
    Rows with a finite g equal torch's."""
    target = np.array([0, 1])

    def ce(v):
        lib, tgt = (F, mt.tensor(target)) if isinstance(v, mt.Tensor) else (torch.nn.functional, torch.tensor(target))
        return lib.cross_entropy(v, tgt, reduction="none", label_smoothing=smoothing)

    x, xt = both([[0.2, -0.3], [1.0, 0.5]])
    upstream = np.array([inf, 1.0])
    ce(x).backward(mt.tensor(upstream.copy()))
    ce(xt).backward(torch.tensor(upstream.copy()))
    ours, ref = x.grad.numpy(), xt.grad.numpy()
    assert_close(ours[1], ref[1], RTOL, what="gradient of the finite row")
    p = torch.softmax(torch.tensor([0.2, -0.3], dtype=torch.float64), 0).numpy()
    q = (1 - smoothing) * np.array([1.0, 0.0]) + smoothing / 2
    assert np.array_equal(ours[0], np.sign(p - q) * inf), ours[0]


def test_amax_backward_with_a_nan_upstream_gradient():
    same_grad(lambda v: v.amax(dim=1), [[1.0, 3.0], [2.0, 0.0]], upstream=[nan, 1.0])


# ---------------------------------------------------------------------------------------- NaN inputs
def test_abs_backward_at_nan():
    same_grad(lambda v: v.abs(), [nan, -1.0])


def test_relu_backward_at_nan():
    same_grad(lambda v: v.relu(), [nan, -1.0])


def test_maximum_backward_at_nan():
    other = np.array([1.0, 1.0])
    same_grad(
        lambda v: (mt if isinstance(v, mt.Tensor) else torch).maximum(
            v, mt.tensor(other) if isinstance(v, mt.Tensor) else torch.tensor(other)
        ),
        [nan, 2.0],
    )


def test_max_backward_at_nan():
    same_grad(lambda v: v.max(), [[nan, 1.0], [2.0, 0.5]])


def test_amax_backward_at_nan():
    same_grad(lambda v: v.amax(dim=1), [[nan, 1.0], [2.0, 0.5]])


# ---------------------------------------------------------------------------------------- overflow, messages
def test_layer_norm_variance_overflow():
    w, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, -0.5, 1.0])

    def ln(v):
        lib, wrap = (F, mt.tensor) if isinstance(v, mt.Tensor) else (torch.nn.functional, torch.tensor)
        return lib.layer_norm(v, (3,), wrap(w), wrap(b))

    same_grad(ln, [[1e200, 1.0, 2.0]])


def test_assert_close_on_differing_0d_arrays():
    with pytest.raises(AssertionError, match="value"):
        assert_close(np.array(1.0), np.array(2.0), RTOL, what="value")


# ---------------------------------------------------------------------------------------- signed zeros
def test_power_minus_half_at_negative_zero():
    """x ** -0.5 is PyTorch's rsqrt: -inf at -0.0 and NaN at -inf (IEEE pow: +inf and 0)."""
    same_grad(lambda v: v**-0.5, [-0.0, 4.0])
    same_grad(lambda v: v**-0.5, [-inf, 4.0])


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_unbatched_zero_loss_is_positive_zero(loss):
    """A (C,) input with one class has loss exactly 0: PyTorch's is +0.0, which a later division tells from -0.0."""
    x, xt = both([0.0])
    ours = getattr(F, loss)(x, mt.tensor(np.array(0)), reduction="none")
    ref = getattr(torch.nn.functional, loss)(xt, torch.tensor(0), reduction="none")
    assert not np.signbit(ref.detach().numpy()) and not np.signbit(ours.detach().numpy()), ours


# ---------------------------------------------------------------------------------------- infinite logits
def test_bce_with_logits_at_infinite_logits():
    """+inf: both +inf (ours gave NaN: log_softmax of [0, inf]). -inf: a deviation kept on purpose, ours +inf
    (the limit), torch NaN ((1 - y) x - log sigmoid(x) = -inf + inf). The gradients, sigmoid(x) - y, agree."""
    x, xt = both([inf, -inf, 0.0])
    y = np.array([0.6, 0.6, 0.3])
    ours = F.binary_cross_entropy_with_logits(x, mt.tensor(y), reduction="none")
    ref = torch.nn.functional.binary_cross_entropy_with_logits(xt, torch.tensor(y), reduction="none")
    assert_close(ours.detach().numpy()[[0, 2]], ref.detach().numpy()[[0, 2]], RTOL, what="loss at +inf and 0")
    assert ours.detach().numpy()[1] == inf and np.isnan(ref.detach().numpy()[1])
    ours.sum().backward()
    ref.sum().backward()
    assert_close(x.grad.numpy(), xt.grad.numpy(), RTOL, what="gradient")


@pytest.mark.parametrize("pos_weight", [None, [0.5, 2.0]], ids=["no pos_weight", "pos_weight"])
def test_bce_with_logits_backward_with_an_infinite_upstream_gradient(pos_weight):
    """The fused backward ((w y + 1 - y) sigmoid(x) - w y) * g gives +-inf, as torch's; the composite it replaced
    (a log_softmax of a stacked pair) computed inf - inf there: NaN."""
    y = np.array([0.6, 0.3])

    def bce(v):
        lib, wrap = (F, mt.tensor) if isinstance(v, mt.Tensor) else (torch.nn.functional, torch.tensor)
        pw = None if pos_weight is None else wrap(np.array(pos_weight))
        return lib.binary_cross_entropy_with_logits(v, wrap(y), reduction="none", pos_weight=pw)

    same_grad(bce, [-2.5, 1.0], upstream=[inf, 1.0])


@pytest.mark.parametrize("pos_weight", [None, 0.5, 2.0])
def test_bce_with_logits_limits_at_infinite_logits(pos_weight):
    """At x = +-inf (targets 0, 0.3, 1) every value is its limit, never NaN: the loss (+inf, or 0 where the target
    switches the infinite term off; torch gives NaN at -inf and at +inf with y = 1, a deviation), dx = (1 - y) g
    at +inf and -w y g at -inf (torch's), dy = -+inf (torch's -x g), dpos_weight = -y log sigmoid(x) g (0 where
    y = 0; torch has none), and the second derivative in x, (w y + 1 - y) sigmoid'(x) g = 0."""
    xs = np.array([inf, inf, inf, -inf, -inf, -inf])
    ys = np.array([0.0, 0.3, 1.0, 0.0, 0.3, 1.0])
    w = 1.0 if pos_weight is None else pos_weight
    g = np.full(6, 1.5)
    (x, xt), (y, yt) = both(xs), both(ys)
    pw, pwt = (None, None) if pos_weight is None else both(np.full(6, w))  # one per entry: dpw stays elementwise
    ours = F.binary_cross_entropy_with_logits(x, y, reduction="none", pos_weight=pw)
    ref = torch.nn.functional.binary_cross_entropy_with_logits(
        xt, yt, reduction="none", pos_weight=None if pwt is None else pwt.detach()
    )
    limit = np.array([inf, inf, 0.0, 0.0, inf, inf])
    assert_close(ours.detach().numpy(), limit, RTOL, what="loss")
    assert np.array_equal(np.isnan(ref.detach().numpy()), [False, False, True, True, True, True])  # torch's

    wrt = [x, y] + ([] if pw is None else [pw])
    grads = mt.autograd.grad(ours, wrt, mt.tensor(g.copy()), create_graph=True)
    gx, gy = grads[0].detach().numpy(), grads[1].detach().numpy()
    gxt, gyt = torch.autograd.grad(ref, [xt, yt], torch.tensor(g.copy()))
    assert_close(gx, np.where(xs > 0, (1 - ys) * g, -w * ys * g), RTOL, what="dx")
    assert_close(gx, gxt.numpy(), RTOL, what="dx against torch")
    assert_close(gy, np.where(xs > 0, -inf, inf), RTOL, what="dy")
    assert_close(gy, gyt.numpy(), RTOL, what="dy against torch")
    if pw is not None:
        assert_close(grads[2].detach().numpy(), np.where((xs < 0) & (ys > 0), inf, 0.0), RTOL, what="dpos_weight")
    (second,) = mt.autograd.grad(grads[0].sum(), x)
    assert_close(second.numpy(), np.zeros(6), RTOL, what="d2/dx2")


def test_inf_norm_at_nan():
    """PyTorch's inf-norm gradient counts a NaN entry as the extremum with sign 0: 0 everywhere, not NaN."""
    for order in (inf, -inf):
        same_grad(
            lambda v, order=order: (mt if isinstance(v, mt.Tensor) else torch).norm(v, p=order, dim=1),
            [[nan, 1.0, -3.0], [2.0, -2.0, 0.5]],
            upstream=[1.0, 2.0],
        )


def test_power_half_gradient_at_negative_zero():
    """d/dx x ** 0.5 = 0.5 x ** -0.5, which PyTorch computes with its rsqrt: -inf at -0.0 (IEEE pow: +inf)."""
    same_grad(lambda v: v**0.5, [-0.0, 4.0])


# ---------------------------------------------------------------------------------------- zero-size features
@pytest.mark.parametrize("shapes", [((2, 3, 0), (0, 4)), ((2, 3, 4), (4, 0))], ids=["K=0", "N=0"])
def test_batched_matmul_with_a_zero_size_dim(shapes):
    """A batched left operand times a weight folds the batch into the rows (a reshape that cannot infer -1 rows
    when a side is 0): its backward raised NumPy's reshape error; torch gives the zero gradients."""
    (x, xt), (w, wt) = both(np.ones(shapes[0])), both(np.ones(shapes[1]))
    (x @ w).sum().backward()
    (xt @ wt).sum().backward()
    assert x.grad.shape == tuple(xt.grad.shape) and w.grad.shape == tuple(wt.grad.shape)
    assert_close(w.grad.numpy(), wt.grad.numpy(), RTOL, what="weight gradient")


def test_embedding_of_size_zero():
    w, wt = both(np.ones((5, 0)))
    F.embedding(mt.tensor(np.array([[1, 2]])), w).sum().backward()
    torch.nn.functional.embedding(torch.tensor([[1, 2]]), wt).sum().backward()
    assert w.grad.shape == tuple(wt.grad.shape) == (5, 0)


@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
def test_max_over_a_nonempty_dim_of_an_empty_tensor(op):
    """(0, 3).max(dim=1) is empty in torch (nothing to reduce, nothing refused); ours refused every empty tensor.
    Over the zero-size dim both refuse, ours naming the op."""
    ours, ref = getattr(mt.zeros(0, 3, dtype=mt.float64), op)(dim=1), getattr(torch.zeros(0, 3), op)(dim=1)
    ours, ref = (ours if op.startswith("arg") else ours.values), (ref if op.startswith("arg") else ref.values)
    assert ours.shape == tuple(ref.shape) == (0,)
    with pytest.raises((IndexError, RuntimeError)):
        getattr(torch.zeros(0, 3), op)(dim=0)
    with pytest.raises(ValueError, match=op):
        getattr(mt.zeros(0, 3), op)(dim=0)


@pytest.mark.parametrize("op", ["relu", "clamp_min", "clamp_max", "maximum", "minimum"])
def test_ties_keep_the_input_and_its_signed_zero(op):
    """relu(-0.0) is -0.0 in PyTorch (a tie returns the input); NumPy's maximum returns its second operand (0.0),
    which a later division turns from -inf into +inf."""
    x = np.array([-0.0, 0.0, -1.0, nan, 2.0])
    zeros = np.array([0.0, -0.0, 0.0, 0.0, 0.0])
    fns = {
        "relu": lambda v, lib: v.relu(),
        "clamp_min": lambda v, lib: v.clamp(min=0.0),
        "clamp_max": lambda v, lib: v.clamp(max=0.0),
        "maximum": lambda v, lib: lib.maximum(v, lib.tensor(zeros)),
        "minimum": lambda v, lib: lib.minimum(v, lib.tensor(zeros)),
    }
    ours, ref = fns[op](mt.tensor(x), mt).numpy(), fns[op](torch.tensor(x), torch).numpy()
    assert np.array_equal(ours, ref, equal_nan=True) and np.array_equal(np.signbit(ours), np.signbit(ref)), ours


# ---------------------------------------------------------------------------------------- dtype limits
def test_layer_norm_float32_variance_overflow_is_nan():
    """Deviation DEVIATIONS['layer_norm_variance_overflow']: ours NaN for the row; torch's 0 here (the bias alone)."""
    a = np.array([[-3e19, 1e19, 1e19, 1e19]], np.float32)
    assert np.isnan(F.layer_norm(mt.tensor(a), (4,)).numpy()).all()
    assert (torch.nn.functional.layer_norm(torch.tensor(a), (4,)).numpy() == 0).all()


def test_float16_layer_norm_and_std_compute_in_float32():
    """torch computes a float16 layer norm's statistics, and a std, in float32 or wider: finite for values of 300."""
    a = np.array([[300.0, -200.0, 500.0, 100.0]], np.float16)
    same = [(lambda v: F.layer_norm(v, (4,)), lambda v: torch.nn.functional.layer_norm(v, (4,))), (mt.std, torch.std)]
    for ours, ref in same:
        x, xt = mt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        y, yt = ours(x), ref(xt)
        assert_close(y.detach().numpy(), yt.detach().numpy(), OP_RTOL["float16"])
        g = np.linspace(-1, 2, yt.numel()).astype(np.float16).reshape(tuple(yt.shape))
        y.backward(mt.tensor(g))
        yt.backward(torch.tensor(g))
        assert_close(x.grad.numpy(), xt.grad.numpy(), OP_RTOL["float16"], what="gradient")


@pytest.mark.parametrize("a", [1.1e-308, [1.1e-308], [[-2e-300], [3e-300]], [1.1e-308, 1.1e-308]])
def test_norm_of_tiny_values(a):
    """Over one element torch's 2-norm is |x| (its square would underflow); over more, the squares underflow to 0."""
    upstream = [0.7, -1.3] if np.ndim(a) == 2 else 0.7
    same_grad(lambda v: v.norm(dim=-1) if np.ndim(a) == 2 else v.norm(), a, upstream)


# ---------------------------------------------------------------------------------------- float16
def test_masked_fill_of_float16_with_a_value_beyond_its_range():
    """torch refuses a finite fill value that float16 cannot hold (it would become inf); inf itself is fine."""
    a = np.array([1.0, -2.0, 3.0], np.float16)
    with pytest.raises(RuntimeError, match="overflow"):
        torch.tensor(a).masked_fill(torch.tensor([True, False, True]), -1e9)
    assert torch.tensor(a).masked_fill(torch.tensor([True, False, True]), -inf)[0] == -inf
    with pytest.raises((RuntimeError, ValueError), match="masked_fill"):
        mt.tensor(a).masked_fill(mt.tensor(np.array([True, False, True])), -1e9)


@pytest.mark.parametrize("dtype, x", [(np.float64, -1.7e154), (np.float32, -2e19)])
def test_gelu_tanh_backward_where_the_square_overflows(dtype, x):
    """Deviation DEVIATIONS['gelu_tanh_gradient_square_overflow']: ours 0, the limit (the Gaussian tail beats the
    growing slope); torch's NaN (0 * inf in its formula). The value is -0.0 in both."""
    a = np.array([x], dtype=dtype)
    xm, xt = mt.tensor(a.copy(), requires_grad=True), torch.tensor(a.copy(), requires_grad=True)
    ym, yt = F.gelu(xm, approximate="tanh"), torch.nn.functional.gelu(xt, approximate="tanh")
    assert ym.detach().numpy()[0] == 0 and yt.detach().numpy()[0] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ym.backward(mt.tensor(np.array([0.7], dtype=dtype)))
        yt.backward(torch.tensor(np.array([0.7], dtype=dtype)))
    assert xm.grad.numpy()[0] == 0 and np.isnan(xt.grad.numpy()[0])


def test_gelu_of_positive_infinity_is_its_limit_in_every_dtype():
    """Deviation DEVIATIONS['gelu_float32_inf']: gelu(+inf) = +inf (x Phi(x)), as torch gives in float64; torch's
    float32 CPU kernel gives NaN on its vectorized path (tensors of two or more elements). At -inf both give NaN
    (-inf * 0), as torch does in both dtypes."""
    for dtype in (np.float32, np.float64):
        y = F.gelu(mt.tensor(np.array([np.inf, -np.inf], dtype=dtype))).numpy()
        assert y[0] == np.inf and np.isnan(y[1])
    assert np.isinf(torch.nn.functional.gelu(torch.tensor([np.inf, 0.0], dtype=torch.float64)).numpy()[0])
    assert np.isnan(torch.nn.functional.gelu(torch.tensor([np.inf, 0.0], dtype=torch.float32)).numpy()[0])


@pytest.mark.parametrize("dtype, x", [(np.float64, 1.7e154), (np.float32, 2e19)])
def test_a_negative_power_of_a_huge_number_is_numpys_subnormal(dtype, x):
    """Deviation DEVIATIONS['pow_negative_of_huge']: x ** -2 where x ** 2 overflows is np.power's tiny (subnormal)
    value here, 1 / inf = 0 in torch."""
    a = np.array([x, -x], dtype=dtype)
    ours, theirs = (mt.tensor(a) ** -2).numpy(), (torch.tensor(a) ** -2).numpy()
    assert (ours > 0).all() and (theirs == 0).all()
    assert_close(ours, np.power(a.astype(np.float64), -2).astype(dtype), OP_RTOL[np.dtype(dtype).name])


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_with_an_infinite_weight_is_the_limit(training):
    """Deviation DEVIATIONS['batch_norm_infinite_weight']: ours (x - mean) * rstd * inf = +-inf; torch's kernel
    computes x * (w * rstd) + (b - mean * w * rstd), inf - inf = NaN where x and the mean have one sign."""
    x = np.array([[0.5, 1.0], [1.5, 3.0]])
    w = np.array([np.inf, 1.0])
    stats = (None, None) if training else (np.array([1.0, 0.0]), np.array([0.25, 1.0]))

    def run(lib):
        running = [None if s is None else lib.tensor(s) for s in stats]
        return lib.nn.functional.batch_norm(lib.tensor(x), *running, lib.tensor(w), training=training).numpy()

    ours, theirs = run(mt), run(torch)
    assert (ours[:, 0] == [-inf, inf]).all() and np.isnan(theirs[:, 0]).any()
    assert_close(ours[:, 1], theirs[:, 1], OP_RTOL["float64"])


def test_sigmoid_gradient_in_float16_near_one_keeps_its_digits():
    """A deviation found by the fuzzer, by the choice ops/elementwise.py's Sigmoid explains: torch's float16 backward
    forms 1 - out from out rounded to float16; ours takes sigmoid(-x), and stays within float16's precision of the
    float64 gradient where torch's does not."""
    x, g = np.array([4.04], dtype=np.float16), np.array([0.9], dtype=np.float16)

    def grad(lib, dtype):
        t = lib.tensor(x.astype(dtype), requires_grad=True)
        lib.sigmoid(t).backward(lib.tensor(g.astype(dtype)))
        return t.grad.numpy().astype(np.float64)

    exact = grad(torch, np.float64)
    assert_close(grad(mt, np.float16), exact, OP_RTOL["float16"])
    with pytest.raises(AssertionError):
        assert_close(grad(torch, np.float16), exact, OP_RTOL["float16"])


def test_norm_of_a_0d_tensor_with_a_dim_is_its_size():
    """Deviation DEVIATIONS['norm_0d_with_dim']: ours |x|; torch's sqrt(x^2), inf here (its other one-element norms
    give |x|)."""
    a = 5.47e154
    assert mt.tensor(np.array(a)).norm(dim=0).item() == a == torch.tensor(a, dtype=torch.float64).norm().item()
    assert torch.tensor(a, dtype=torch.float64).norm(dim=0).item() == inf


@pytest.mark.parametrize(
    "dtype, value", [(np.float16, 1e9), (np.float16, -7e4), (np.float32, 1e39), (np.int8, 1000), (np.int16, -40000)]
)
@pytest.mark.parametrize("op", ["masked_fill", "masked_fill_", "fill_", "setitem"])
def test_a_number_written_into_a_tensor_must_fit_its_dtype(dtype, value, op):
    """The class of masked_fill's finding: every write of a Python number (masked_fill, masked_fill_, fill_,
    t[i] = v) refuses a value its dtype cannot hold instead of storing inf or a wrapped integer, as torch's
    masked_fill and fill_ do. Deviation, flagged in minitensor/arguments.py: torch's t[i] = v on float16 stores
    inf for a finite value beyond 65504; here that write is refused like the others."""
    t = mt.tensor(np.array([1, 2, 3], dtype))
    mask = mt.tensor(np.array([True, False, True]))
    write = {
        "masked_fill": lambda: t.masked_fill(mask, value),
        "masked_fill_": lambda: t.masked_fill_(mask, value),
        "fill_": lambda: t.fill_(value),
        "setitem": lambda: t.__setitem__(0, value),
    }[op]
    with pytest.raises(RuntimeError, match=f"{op if op != 'setitem' else '__setitem__'}: value .* without overflow"):
        write()
    np.testing.assert_array_equal(t.numpy(), np.array([1, 2, 3], dtype))  # nothing written
    if op in ("masked_fill", "fill_"):  # torch refuses the same
        tt = torch.tensor(np.array([1, 2, 3], dtype))
        with pytest.raises(RuntimeError, match="overflow"):
            tt.masked_fill(torch.tensor([True, False, True]), value) if op == "masked_fill" else tt.fill_(value)


def test_inf_and_nan_still_fill_a_floating_tensor():
    t = mt.tensor(np.array([1.0, 2.0], np.float16))
    assert t.masked_fill(mt.tensor(np.array([True, False])), -inf).numpy()[0] == -inf
    assert np.isnan(t.clone().fill_(nan).numpy()).all()


def test_a_negative_number_into_uint8_is_refused_where_torch_wraps_it():
    """Deviation (minitensor/arguments.py): torch's uint8 fill_(-1) stores 255; here -1 is refused."""
    assert torch.tensor([1, 2], dtype=torch.uint8).fill_(-1).tolist() == [255, 255]
    with pytest.raises(RuntimeError, match="fill_: value -1 cannot be converted to uint8 without overflow"):
        mt.tensor(np.array([1, 2], np.uint8)).fill_(-1)


def test_batch_norm_float16_gradient_is_closer_to_the_exact_value_than_torchs():
    """Deviation DEVIATIONS['layer_norm_float16_gradient'] for batch_norm in training (the long fuzz profile's input):
    the same formulas per channel; ours computes the channel in float32 and rounds once, torch rounds its terms."""
    x = np.array([[1.268], [1.926], [0.7163]], dtype=np.float16)
    g = np.random.default_rng(3).standard_normal((3, 1)).astype(np.float16)

    def grad(lib, dtype):
        t = lib.tensor(x.astype(dtype), requires_grad=True)
        lib.nn.functional.batch_norm(t, None, None, training=True).backward(lib.tensor(g.astype(dtype)))
        return t.grad.numpy().astype(np.float64)

    exact = grad(torch, np.float64)
    assert_close(grad(mt, np.float64), exact, OP_RTOL["float64"], what="float64 gradient")
    ours, theirs = np.abs(grad(mt, np.float16) - exact).max(), np.abs(grad(torch, np.float16) - exact).max()
    assert ours <= 2e-3 < theirs / 2, (ours, theirs)


def test_layer_norm_float16_gradient_is_closer_to_the_exact_value_than_torchs():
    """Deviation DEVIATIONS['layer_norm_float16_gradient'] (the long fuzz profile's input): the gradient cancels terms
    of the row's scale; ours computes the row in float32 and rounds once, torch rounds its row terms to float16."""
    x = np.array([1.455, 0.905, 0.5615, 0.525], dtype=np.float16)
    g = np.random.default_rng(2).standard_normal(4).astype(np.float16)

    def grad(lib, dtype):
        if lib is mt:
            xm = mt.tensor(x.astype(dtype), requires_grad=True)
            F.layer_norm(xm, (4,), eps=1e-5).backward(mt.tensor(g.astype(dtype)))
            return xm.grad.numpy().astype(np.float64)
        xt = torch.tensor(x.astype(dtype), requires_grad=True)
        torch.nn.functional.layer_norm(xt, (4,), eps=1e-5).backward(torch.tensor(g.astype(dtype)))
        return xt.grad.numpy().astype(np.float64)

    exact = grad(mt, np.float64)
    assert_close(exact, grad(torch, np.float64), OP_RTOL["float64"], what="float64 gradient")
    ours, theirs = np.abs(grad(mt, np.float16) - exact).max(), np.abs(grad(torch, np.float16) - exact).max()
    assert ours <= 1e-3 < theirs and ours < theirs / 3, (ours, theirs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fast", [True, False], ids=["device", "formula"])
def test_a_row_of_equal_numbers_normalizes_to_its_means_round_off_times_rstd(dtype, fast):
    """Deviation from torch, bounded: NumPy's mean of equal numbers can be an ulp off (torch's is exact, giving 0), and
    rstd = eps^-1/2 multiplies that into the output: at most a few ulps of the value times rstd, times the weight."""
    x = np.full((4, 3), 1.45769255, dtype)
    x[1], x[2] = 0.1, 3.3
    w, b = np.linspace(0.5, 1.5, 3).astype(dtype), np.zeros(3, dtype)
    with mt.fast.speed(fast):
        out = mt.nn.functional.layer_norm(mt.tensor(x), (3,), mt.tensor(w), mt.tensor(b)).numpy()
    ref = torch.nn.functional.layer_norm(torch.tensor(x), (3,), torch.tensor(w), torch.tensor(b)).numpy()
    assert not ref.any()  # torch: exactly 0
    bound = 4 * np.finfo(dtype).eps * np.abs(x) * (1e-5**-0.5) * w.max()
    assert (np.abs(out) <= bound).all(), np.abs(out).max()
