"""mt.func and random draws, as torch.func: jacfwd's randomness ("error" refuses a draw, "same" gives every
column one draw, "different" a draw each), hessian refusing one, jacrev's one forward (one draw) and its backward
rows refusing a draw. The engine's numbers differ from torch's (another generator), so torch is compared by
structure: which calls raise, and whether the columns share one draw."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt
import minitensor.nn.functional as F
from minitensor.func import grad, hessian, jacfwd, jacrev, jvp
from minitensor.utils.checkpoint import checkpoint

N = 5
X = np.linspace(-1.0, 1.5, N)


def _x(T):
    return T.tensor(X, dtype=T.float64)


# Every random op of the engine, inside a function of x, beside torch's spelling of it. The draw multiplies
# x.sum(), so that each column of the Jacobian holds the whole draw: columns equal if and only if it is one draw.
RANDOM_OPS = {
    "dropout": lambda T, x: T.nn.functional.dropout(T.ones(N, dtype=T.float64), 0.5) * x.sum(),
    "randn": lambda T, x: T.randn(N, dtype=T.float64) * x.sum(),
    "rand": lambda T, x: T.rand(N, dtype=T.float64) * x.sum(),
    "randn_like": lambda T, x: T.randn_like(x) * x.sum(),
    "rand_like": lambda T, x: T.rand_like(x) * x.sum(),
    "randint": lambda T, x: T.randint(0, 1000, (N,)).to(T.float64) * x.sum(),
    "randperm": lambda T, x: T.randperm(N).to(T.float64) * x.sum(),
    "normal": lambda T, x: T.normal(0.0, 1.0, (N,), dtype=T.float64) * x.sum(),
    "uniform_": lambda T, x: T.zeros(N, dtype=T.float64).uniform_() * x.sum(),
    "normal_": lambda T, x: T.zeros(N, dtype=T.float64).normal_() * x.sum(),
    "init.uniform_": lambda T, x: T.nn.init.uniform_(T.zeros(N, dtype=T.float64)) * x.sum(),
    "init.normal_": lambda T, x: T.nn.init.normal_(T.zeros(N, dtype=T.float64)) * x.sum(),
    "init.trunc_normal_": lambda T, x: T.nn.init.trunc_normal_(T.zeros(N, dtype=T.float64)) * x.sum(),
    "scaled_dot_product_attention": lambda T, x: T.nn.functional.scaled_dot_product_attention(
        T.ones(1, N, 1, dtype=T.float64), T.ones(1, N, 1, dtype=T.float64), x.reshape(1, N, 1), dropout_p=0.5
    ).reshape(N),
}
TORCH_JACFWD = torch.func.jacfwd


@pytest.mark.parametrize("op", list(RANDOM_OPS))
def test_jacfwd_refuses_a_draw_by_default_naming_the_op_as_torch(op):
    fn = RANDOM_OPS[op]
    with pytest.raises(RuntimeError, match="vmap: called random operation while in randomness error mode"):
        TORCH_JACFWD(lambda x: fn(torch, x))(_x(torch))
    state = mt.random.get_rng_state()
    with pytest.raises(RuntimeError, match=rf"jacfwd: called random operation {op} while in randomness error mode"):
        jacfwd(lambda x: fn(mt, x))(_x(mt))
    assert mt.random.get_rng_state() == state  # refused before drawing
    with pytest.raises(RuntimeError, match="randomness='same' .* or 'different' .* on jacfwd"):
        jacfwd(lambda x: fn(mt, x), randomness="error")(_x(mt))


@pytest.mark.parametrize("op", list(RANDOM_OPS))
def test_jacfwd_same_gives_every_column_the_one_draw_of_a_plain_call(op):
    fn = RANDOM_OPS[op]
    torch.manual_seed(1)
    ref = TORCH_JACFWD(lambda x: fn(torch, x), randomness="same")(_x(torch)).numpy()
    mt.manual_seed(1)
    plain = fn(mt, _x(mt)).numpy()  # the draw of one call
    after_one_call = mt.random.get_rng_state()
    mt.manual_seed(1)
    jac = jacfwd(lambda x: fn(mt, x), randomness="same")(_x(mt)).numpy()
    assert mt.random.get_rng_state() == after_one_call  # the stream ends where one call leaves it
    if op == "scaled_dot_product_attention":  # out_i = sum_j a_ij x_j: the Jacobian is the one dropped-out matrix
        np.testing.assert_allclose(jac @ X, plain, rtol=1e-12)
        return
    for j in range(N):  # every column: the draw of the plain call (times d x.sum() / d x_j = 1), as torch's
        np.testing.assert_allclose(jac[:, j], plain / X.sum(), rtol=1e-12)
        np.testing.assert_allclose(ref[:, j], ref[:, 0], rtol=1e-12)


IN_PLACE = {"uniform_", "normal_", "init.uniform_", "init.normal_", "init.trunc_normal_"}


@pytest.mark.parametrize("op", [op for op in RANDOM_OPS if op != "scaled_dot_product_attention"])
def test_jacfwd_different_gives_each_column_its_own_draw_as_torch(op):
    """Deviation, flagged: torch refuses "different" for an in-place draw (its tensor, made inside the function, is
    unbatched and could hold one draw only); here each column's call fills its own tensor, so each gets a draw."""
    fn = RANDOM_OPS[op]
    torch.manual_seed(2)
    if op in IN_PLACE:
        with pytest.raises(RuntimeError, match="Cannot ask for different inplace randomness on an unbatched tensor"):
            TORCH_JACFWD(lambda x: fn(torch, x), randomness="different")(_x(torch))
    else:
        ref = TORCH_JACFWD(lambda x: fn(torch, x), randomness="different")(_x(torch)).numpy()
        assert all(not np.allclose(ref[:, j], ref[:, 0]) for j in range(1, N))
    mt.manual_seed(2)
    jac = jacfwd(lambda x: fn(mt, x), randomness="different")(_x(mt)).numpy()
    for j in range(1, N):
        assert not np.allclose(jac[:, j], jac[:, 0]), f"column {j} repeats column 0"


def test_a_dropout_mask_is_one_for_the_whole_jacobian_with_same():
    """The reported case: jacfwd(f, randomness="same") of a function with dropout, one mask, the plain call's."""

    def f(x):
        return F.dropout(x * x, 0.4, training=True)

    x = _x(mt)
    mt.manual_seed(5)
    keep = f(x).numpy() != 0
    mt.manual_seed(5)
    jac = jacfwd(f, randomness="same")(x).numpy()
    np.testing.assert_allclose(jac, np.diag(keep * 2 * X / 0.6), rtol=1e-12)


@pytest.mark.parametrize("randomness", ["error", "same", "different"])
def test_without_a_draw_every_randomness_gives_torchs_jacobian(randomness):
    def f(T, x):
        return T.nn.functional.dropout(x.exp() * x, 0.5, training=False) + x.sum() * x  # not training: no draw

    ours = jacfwd(lambda x: f(mt, x), randomness=randomness)(_x(mt)).numpy()
    ref = TORCH_JACFWD(lambda x: f(torch, x), randomness=randomness)(_x(torch)).numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-12)
    state = mt.random.get_rng_state()
    jacfwd(lambda x: F.dropout(x, 1.0), randomness=randomness)(_x(mt))  # p = 1 keeps nothing: no draw, as torch
    TORCH_JACFWD(lambda x: torch.nn.functional.dropout(x, 1.0), randomness=randomness)(_x(torch))
    assert mt.random.get_rng_state() == state


def test_hessian_refuses_a_draw_as_torch_and_jacfwd_of_jacrev_takes_the_flag():
    def f(T, x):
        return (T.nn.functional.dropout(x, 0.5) ** 3).sum()

    with pytest.raises(RuntimeError, match="vmap: called random operation"):
        torch.func.hessian(lambda x: f(torch, x))(_x(torch))
    with pytest.raises(RuntimeError, match="hessian: called random operation dropout .* takes no randomness flag"):
        hessian(lambda x: f(mt, x))(_x(mt))
    mt.manual_seed(3)
    keep = F.dropout(mt.ones(N, dtype=mt.float64), 0.5).numpy() != 0
    mt.manual_seed(3)
    h = jacfwd(jacrev(lambda x: f(mt, x)), randomness="same")(_x(mt)).numpy()
    np.testing.assert_allclose(h, np.diag(keep * 6 * 8 * X), rtol=1e-12)  # d2/dx2 (2x)^3 = 48 x where kept


def test_jacrev_jvp_and_grad_run_the_function_once_one_draw_as_torch():
    def f(T, x):
        return T.nn.functional.dropout(x * x, 0.5)

    for T, transform in ((mt, jacrev), (torch, torch.func.jacrev)):  # no flag, no refusal: the forward runs once
        transform(lambda x, T=T: f(T, x))(_x(T))
    mt.manual_seed(4)
    keep = f(mt, _x(mt)).numpy() != 0
    for transform in (
        lambda x: jacrev(lambda x: f(mt, x))(x).numpy().diagonal(),
        lambda x: jvp(lambda x: f(mt, x), (x,), (mt.ones(N, dtype=mt.float64),))[1].numpy(),
        lambda x: grad(lambda x: f(mt, x).sum())(x).numpy(),
    ):
        mt.manual_seed(4)
        np.testing.assert_allclose(transform(_x(mt)), keep * 4 * X, rtol=1e-12)


class NoisyBackward(mt.autograd.Function):
    """out = 2 a, with a backward that draws (a wrong backward, on purpose)."""

    @staticmethod
    def forward(ctx, a):
        return a * 2

    @staticmethod
    def backward(ctx, g):
        return (g * mt.rand(()).numpy(),)


class TorchNoisyBackward(torch.autograd.Function):
    @staticmethod
    def forward(a):
        return a * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g * torch.rand(())


def test_a_draw_in_jacrevs_backward_rows_is_refused_as_torch():
    with pytest.raises(RuntimeError, match="vmap: called random operation"):
        torch.func.jacrev(TorchNoisyBackward.apply)(_x(torch))
    with pytest.raises(RuntimeError, match="jacrev: called random operation rand .* draw the random numbers in the"):
        jacrev(NoisyBackward.apply)(_x(mt))
    grad(lambda x: NoisyBackward.apply(x).sum())(_x(mt))  # one backward: a draw is the user's to make
    torch.func.grad(lambda x: TorchNoisyBackward.apply(x).sum())(_x(torch))


def test_jacrev_through_a_checkpoint_replays_its_dropout():
    """The recompute replays the forward's draws (preserve_rng_state): no new draw, so jacrev's rows allow it and
    the Jacobian is the plain one. Deviation, flagged: torch.func.jacrev refuses saved-tensor hooks altogether.
    Without preserve_rng_state the recompute would draw new masks, row by row: refused."""

    def seg(x):
        return F.dropout(x.sin(), 0.5) * 3.0

    mt.manual_seed(6)
    plain = jacrev(seg)(_x(mt)).numpy()
    mt.manual_seed(6)
    ckpt = jacrev(lambda x: checkpoint(seg, x, use_reentrant=False))(_x(mt)).numpy()
    np.testing.assert_array_equal(ckpt, plain)
    with pytest.raises(RuntimeError, match="jacrev: called random operation dropout"):
        jacrev(lambda x: checkpoint(seg, x, use_reentrant=False, preserve_rng_state=False))(_x(mt))


def test_an_empty_input_has_no_column_and_draws_freely_as_torch():
    def f(T, x):
        return T.nn.functional.dropout(x, 0.5)

    empty = np.zeros(0)
    assert tuple(TORCH_JACFWD(lambda x: f(torch, x))(torch.tensor(empty)).shape) == (0, 0)
    assert tuple(jacfwd(lambda x: f(mt, x))(mt.tensor(empty)).shape) == (0, 0)


def test_autograd_functionals_forward_mode_strategies_refuse_a_draw_as_torch():
    """jacobian(strategy="forward-mode") and hessian(outer_jacobian_strategy="forward-mode") run the function once
    per input element: a draw is refused (torch's vmapped strategies refuse it too); the reverse-mode strategies
    run it once, one draw, in both."""

    def f(T, x):
        return T.nn.functional.dropout(x, 0.5) * x

    def g(T, x):
        return (T.nn.functional.dropout(x, 0.5) ** 3).sum()

    TAF, MAF = torch.autograd.functional, mt.autograd.functional
    with pytest.raises(RuntimeError, match="random operations inside of vmap"):
        TAF.jacobian(lambda x: f(torch, x), _x(torch), vectorize=True, strategy="forward-mode")
    with pytest.raises(RuntimeError, match="random operations inside of vmap"):
        TAF.hessian(lambda x: g(torch, x), _x(torch), vectorize=True, outer_jacobian_strategy="forward-mode")
    with pytest.raises(RuntimeError, match=r"jacobian \(strategy='forward-mode'\): called random operation dropout"):
        MAF.jacobian(lambda x: f(mt, x), _x(mt), strategy="forward-mode")
    with pytest.raises(RuntimeError, match=r"hessian \(outer_jacobian_strategy='forward-mode'\): called random"):
        MAF.hessian(lambda x: g(mt, x), _x(mt), outer_jacobian_strategy="forward-mode")
    TAF.jacobian(lambda x: f(torch, x), _x(torch))
    TAF.hessian(lambda x: g(torch, x), _x(torch))
    mt.manual_seed(8)
    keep = F.dropout(mt.ones(N, dtype=mt.float64), 0.5).numpy() != 0
    mt.manual_seed(8)
    np.testing.assert_allclose(MAF.jacobian(lambda x: f(mt, x), _x(mt)).numpy(), np.diag(keep * 4 * X), rtol=1e-12)
    mt.manual_seed(8)
    np.testing.assert_allclose(MAF.hessian(lambda x: g(mt, x), _x(mt)).numpy(), np.diag(keep * 48 * X), rtol=1e-12)
