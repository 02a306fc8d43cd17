"""gradcheck's and gradgradcheck's options, as torch's: each catches the bug it exists for, and passes a right rule.

fast_mode (v^T J u in one random direction per input), check_forward_ad (J d by forward mode against finite
differences), nondet_tol (the backward run twice), check_grad_dtypes, check_undefined_grad (a zero or missing
upstream gradient counts as zero), and gradgradcheck's check_fwd_over_rev / check_rev_over_rev. Every bug is
planted in a custom Function whose other rules are right, so only the option under test can see it.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor.testing import GRADCHECK

GC = mt.autograd.gradcheck
GGC = mt.autograd.gradgradcheck
Error = mt.autograd.GradcheckError


def square(backward=None, jvp=None):
    """y = x^2 with backward 2 x g and jvp 2 x ẋ, either replaceable by a planted wrong one."""

    class Square(mt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_arrays
            return backward(x, g) if backward else 2.0 * x * g

    def rule(ctx, tx):
        (x,) = ctx.saved_arrays
        return jvp(x, tx) if jvp else 2.0 * x * tx

    Square.jvp = staticmethod(rule)
    return Square


def _x(shape=(3, 4), seed=3):
    return mt.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def _off_at_1_2(x, t):
    """2 x t, but 2.5 x t at element (1, 2): a rule wrong in one element only."""
    factor = np.full(x.shape, 2.0)
    factor[1, 2] = 2.5
    return (x.wrap(factor) if hasattr(x, "wrap") else factor) * x * t


RIGHT = square()
WRONG_BACKWARD = square(backward=lambda x, g: 3.0 * x * g)
WRONG_JVP = square(jvp=lambda x, t: 3.0 * x * t)
ONE_BAD_JVP_ELEMENT = square(jvp=_off_at_1_2)


@pytest.mark.parametrize("fast_mode", [False, True])
def test_a_right_function_passes_every_check(fast_mode):
    def f(a, b):
        return (RIGHT.apply(a) @ b).exp() * 0.1, RIGHT.apply(b).sum()

    assert GC(f, [_x((2, 3)), _x((3, 4), 4)], **GRADCHECK, check_forward_ad=True, fast_mode=fast_mode)


@pytest.mark.parametrize("fast_mode", [False, True])
def test_a_wrong_backward_is_caught_in_both_modes(fast_mode):
    with pytest.raises(Error, match=r"input 0 \(backward, (slow|fast) mode"):
        GC(WRONG_BACKWARD.apply, [_x()], **GRADCHECK, fast_mode=fast_mode)
    assert not GC(WRONG_BACKWARD.apply, [_x()], **GRADCHECK, fast_mode=fast_mode, raise_exception=False)
    # forward mode alone does not look at the backward
    assert GC(
        WRONG_BACKWARD.apply, [_x()], **GRADCHECK, fast_mode=fast_mode, check_forward_ad=True, check_backward_ad=False
    )


def test_fast_mode_names_the_direction_and_then_the_worst_element():
    bad = square(backward=lambda x, g: _off_at_1_2(x, g))
    with pytest.raises(Error) as info:
        GC(bad.apply, [_x()], **GRADCHECK, fast_mode=True)
    msg = str(info.value)
    assert "random unit direction u (seed 0)" in msg and "worst at element (1, 2)" in msg, msg


@pytest.mark.parametrize("fast_mode", [False, True])
def test_a_wrong_jvp_is_caught_by_check_forward_ad_only(fast_mode):
    assert GC(WRONG_JVP.apply, [_x()], **GRADCHECK, fast_mode=fast_mode)  # the backward is right
    with pytest.raises(Error, match=r"input 0 \(forward, (slow|fast) mode\)"):
        GC(WRONG_JVP.apply, [_x()], **GRADCHECK, fast_mode=fast_mode, check_forward_ad=True)


def test_check_forward_ad_names_the_direction_and_the_worst_element():
    with pytest.raises(Error) as info:
        GC(lambda a, b: ONE_BAD_JVP_ELEMENT.apply(b) * 2.0, [_x((2,), 1), _x()], **GRADCHECK, check_forward_ad=True)
    msg = str(info.value)
    assert "input 1 (forward, slow mode), direction e_j, element (1, 2) of the input" in msg, msg
    assert "worst at element (1, 2)" in msg, msg


def test_a_function_without_a_jvp_rule_says_so():
    class NoRule(mt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return g * 2.0

    assert GC(NoRule.apply, [_x()], **GRADCHECK)
    with pytest.raises(NotImplementedError, match="NoRule"):
        GC(NoRule.apply, [_x()], **GRADCHECK, check_forward_ad=True)


def test_a_nondeterministic_backward_is_caught_unless_within_nondet_tol():
    noise = np.random.default_rng(7)
    shaky = square(backward=lambda x, g: 2.0 * x * g + noise.standard_normal(x.shape) * 1e-10)
    with pytest.raises(Error, match=r"input 0 \(backward\): the backward is not reentrant.*nondet_tol 0.0"):
        GC(shaky.apply, [_x()], **GRADCHECK)
    assert GC(shaky.apply, [_x()], **GRADCHECK, nondet_tol=1e-8)


def test_a_gradient_of_the_wrong_dtype_is_caught_by_check_grad_dtypes():
    as32 = square(backward=lambda x, g: (2.0 * x * g).astype(np.float32))
    with pytest.raises(Error, match="check_grad_dtypes.*float32"):
        GC(as32.apply, [_x()], **GRADCHECK, check_grad_dtypes=True)
    with pytest.raises(RuntimeError, match="float32 gradient for input 0"):  # the engine refuses it anyway
        GC(as32.apply, [_x()], **GRADCHECK)
    jvp32 = square(jvp=lambda x, t: (2.0 * x * t).to(mt.float32))
    with pytest.raises(Error, match=r"input 0 \(check_grad_dtypes, forward mode\).*float32 tangent"):
        GC(jvp32.apply, [_x()], **GRADCHECK, check_forward_ad=True, check_grad_dtypes=True)


def _normalised_by_g(x, g):
    """2 x g written as 2 x sum(g) (g / sum(g)): right for a random g, NaN for a zero one."""
    return 2.0 * x * g.sum() * (g / g.sum())


def test_a_backward_that_fails_on_a_zero_gradient_is_caught_by_check_undefined_grad():
    bad = square(backward=_normalised_by_g)
    assert GC(bad.apply, [_x()], **GRADCHECK, check_undefined_grad=False)
    with pytest.raises(Error, match=r"input 0 \(check_undefined_grad\): with every output's gradient zero"):
        GC(bad.apply, [_x()], **GRADCHECK)


def test_a_missing_output_gradient_counts_as_zero():
    def two_outputs(x):
        return RIGHT.apply(x), (x * 3.0).exp()

    assert GC(two_outputs, [_x()], **GRADCHECK)  # each output's gradient left out in turn

    bad = square(backward=_normalised_by_g)
    with pytest.raises(Error, match="check_undefined_grad"):
        GC(lambda x: (bad.apply(x), x * 3.0), [_x()], **GRADCHECK)


def doubled(jvp_factor: float):
    """y = 2 x, with a right backward and a jvp of factor jvp_factor (2 is right)."""

    class Double(mt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 2.0 * x

        @staticmethod
        def backward(ctx, g):
            return 2.0 * g

        @staticmethod
        def jvp(ctx, tx):
            return jvp_factor * tx

    return Double


def square_through(double):
    """y = x^2 whose backward, when differentiated (create_graph), computes 2 x by `double`: a bug in
    double's jvp shows only in forward over reverse."""

    class Square(mt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_arrays
            return (double.apply(x) if ctx.create_graph else 2.0 * x) * g

        @staticmethod
        def jvp(ctx, tx):
            (x,) = ctx.saved_arrays
            return 2.0 * x * tx

    return Square


@pytest.mark.parametrize("fast_mode", [False, True])
def test_gradgradcheck_forward_over_reverse_catches_a_wrong_rule_reverse_over_reverse_misses(fast_mode):
    right, wrong = square_through(doubled(2.0)), square_through(doubled(3.0))
    kw = dict(**GRADCHECK, fast_mode=fast_mode)
    assert GGC(right.apply, [_x()], **kw, check_fwd_over_rev=True)
    assert GGC(wrong.apply, [_x()], **kw)  # reverse over reverse: Double's backward is right
    with pytest.raises(Error, match=r"input 0 \(forward"):
        GGC(wrong.apply, [_x()], **kw, check_fwd_over_rev=True, check_rev_over_rev=False)


def test_gradgradcheck_reverse_over_reverse_catches_a_wrong_second_derivative():
    class BadDouble(mt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 2.0 * x

        @staticmethod
        def backward(ctx, g):
            return 3.0 * g  # wrong

        @staticmethod
        def jvp(ctx, tx):
            return 2.0 * tx

    wrong = square_through(BadDouble)
    assert GGC(wrong.apply, [_x()], **GRADCHECK, check_fwd_over_rev=True, check_rev_over_rev=False)
    with pytest.raises(Error, match=r"input 0 \(backward"):
        GGC(wrong.apply, [_x()], **GRADCHECK)


def test_gradgradcheck_forward_over_reverse_on_engine_ops():
    def f(a, b):
        return (a.exp() * b * a).sum() + (a * 0.5 + b).exp()

    assert GGC(f, [_x((3, 4), 1), _x((3, 4), 2)], **GRADCHECK, check_fwd_over_rev=True)
