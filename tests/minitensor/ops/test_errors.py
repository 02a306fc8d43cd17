"""Bad input fails loudly: the right exception type, and a message naming the op and what came.

Each case states the exception class and regexes the message must match: the op's name and
the offending shapes or dtypes, so a user reading the error alone can find the bug. Shapes
may print as tuples or lists: `_shape` accepts either.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F


def _shape(*dims) -> str:
    """Regex for a shape printed as (3, 4) or [3, 4] (a 1-tuple may print as (5,))."""
    inner = r",\s*".join(str(d) for d in dims)
    return r"[\(\[]" + inner + r",?[\)\]]"


def _f(*shape, dtype=np.float32, grad=False):
    return mt.tensor(np.random.default_rng(0).standard_normal(shape).astype(dtype), requires_grad=grad)


def _raises(exc, fn, *patterns):
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    for p in patterns:
        assert re.search(p, msg, flags=re.IGNORECASE), f"message {msg!r} lacks {p!r}"
    return msg


# ----------------------------------------------------------------------------- shape and dtype mismatches
def test_matmul_shape_mismatch():
    _raises(ValueError, lambda: _f(3, 4) @ _f(5, 6), "matmul", _shape(3, 4), _shape(5, 6))


def test_batched_matmul_shape_mismatch():
    _raises(ValueError, lambda: mt.matmul(_f(2, 3, 4), _f(2, 5, 6)), "matmul", _shape(2, 3, 4), _shape(2, 5, 6))


def test_broadcasting_mismatch():
    _raises(ValueError, lambda: _f(3, 4) + _f(5), r"add|\+|broadcast", _shape(3, 4), _shape(5))
    _raises(ValueError, lambda: _f(2, 3) * _f(4, 3), r"mul|\*|broadcast", _shape(2, 3), _shape(4, 3))
    _raises(ValueError, lambda: mt.where(mt.tensor([True, False]), _f(3), _f(3)), "where", _shape(2), _shape(3))


def test_item_on_many_elements():
    _raises((ValueError, RuntimeError), lambda: _f(2, 3).item(), "item", r"6|" + _shape(2, 3))


def test_float_index_refused():
    x = _f(3, 4)
    _raises((IndexError, TypeError), lambda: x[mt.tensor([0.0, 1.0])], "float32|float64|dtype")
    _raises((IndexError, TypeError), lambda: x[1.5], "float")


def test_index_out_of_range():
    x = _f(3, 4)
    _raises(IndexError, lambda: x[5], "5", "3")
    _raises(IndexError, lambda: x[:, -5], "-5|5", "4")
    _raises(IndexError, lambda: x[mt.tensor([0, 7])], "7", "3")
    _raises(IndexError, lambda: x[0, 0, 0], r"3|too many")


def test_bool_mask_shape_mismatch():
    _raises(IndexError, lambda: _f(3, 4)[mt.tensor([True, False])], "__getitem__", _shape(3, 4), r"\b2\b")


def test_backward_on_non_scalar():
    y = _f(2, 3, grad=True) * 2
    _raises(RuntimeError, lambda: y.backward(), "scalar", _shape(2, 3))


def test_int_tensor_requires_grad():
    _raises((RuntimeError, TypeError, ValueError), lambda: mt.tensor([1, 2], requires_grad=True), "int64")
    _raises((RuntimeError, TypeError, ValueError), lambda: mt.zeros(2, dtype=mt.int64, requires_grad=True), "int64")


# ----------------------------------------------------------------------------- shape ops
def test_reshape_wrong_size():
    _raises((ValueError, RuntimeError), lambda: _f(3, 4).reshape(5, 3), "reshape|view", _shape(3, 4), _shape(5, 3))


def test_view_wrong_size():
    _raises((ValueError, RuntimeError), lambda: _f(3, 4).view(7, -1), "view|reshape", _shape(3, 4))


def test_expand_wrong_size():
    _raises((ValueError, RuntimeError), lambda: _f(3, 2).expand(3, 4), "expand", _shape(3, 2), _shape(3, 4))


def test_cat_shape_mismatch():
    _raises(RuntimeError, lambda: mt.cat([_f(2, 3), _f(2, 4)], dim=0), "cat", _shape(2, 3), _shape(2, 4))  # as torch


def test_stack_shape_mismatch():
    _raises(RuntimeError, lambda: mt.stack([_f(2, 3), _f(3, 2)]), "stack", _shape(2, 3), _shape(3, 2))  # as torch
    with pytest.raises(RuntimeError, match="non-empty"):
        mt.stack([])


def test_dim_out_of_range():
    _raises(IndexError, lambda: _f(3, 4).sum(dim=2), "sum|dim", "2")
    _raises(IndexError, lambda: _f(3, 4).transpose(0, 3), "transpose|dim", "3")
    _raises((IndexError, ValueError), lambda: F.softmax(_f(3, 4), dim=-3), "softmax|dim", "-3")


def test_permute_wrong_dims():
    _raises((ValueError, RuntimeError), lambda: _f(3, 4, 5).permute(0, 1), "permute", r"3")


# ----------------------------------------------------------------------------- dtypes
def test_masked_fill_needs_bool_mask():
    _raises(TypeError, lambda: _f(3, 4).masked_fill(mt.tensor([[1, 0, 1, 0]]), 0.0), "masked_fill", "bool", "int64")


def test_where_needs_bool_condition():
    _raises(TypeError, lambda: mt.where(_f(3), _f(3), _f(3)), "where", "bool", "float32")


def test_bitwise_ops_on_floats_refused():
    _raises(TypeError, lambda: _f(3) & _f(3), r"and|&", "float32")


# ----------------------------------------------------------------------------- nn.functional
def test_linear_shape_mismatch():
    _raises(ValueError, lambda: F.linear(_f(2, 3), _f(5, 4)), "linear", _shape(2, 3), _shape(5, 4))


def test_layer_norm_shape_mismatch():
    _raises(ValueError, lambda: F.layer_norm(_f(2, 3, 4), (3,)), "layer_norm", _shape(2, 3, 4), r"\(3,?\)|\[3\]")


def test_embedding_index_out_of_range():
    _raises(IndexError, lambda: F.embedding(mt.tensor([[0, 7]]), _f(5, 3)), "embedding", "7", "5")


def test_embedding_needs_integer_ids():
    _raises(TypeError, lambda: F.embedding(mt.tensor([0.0, 1.0]), _f(5, 3)), "embedding", "float")


def test_cross_entropy_target_dtype():
    _raises(TypeError, lambda: F.cross_entropy(_f(4, 3), mt.tensor([0.0, 1.0, 2.0, 1.0])), "cross_entropy", "float")


def test_cross_entropy_target_shape():
    _raises(
        ValueError, lambda: F.cross_entropy(_f(4, 3), mt.tensor([0, 1, 2])), "cross_entropy", _shape(4, 3), _shape(3)
    )


def test_cross_entropy_target_out_of_range():
    _raises(IndexError, lambda: F.cross_entropy(_f(4, 3), mt.tensor([0, 1, 5, 1])), "cross_entropy", "5", "3")


def test_cross_entropy_bad_reduction():
    _raises(ValueError, lambda: F.cross_entropy(_f(4, 3), mt.tensor([0, 1, 2, 1]), reduction="avg"), "reduction", "avg")


def test_dropout_bad_p():
    _raises(ValueError, lambda: F.dropout(_f(3), p=1.5), "dropout", "1.5")


def test_dropout_mask_shape():
    mask = np.ones((3, 5), dtype=bool)
    _raises(ValueError, lambda: F.dropout(_f(3, 4), p=0.1, mask=mask), "dropout", _shape(3, 4), _shape(3, 5))


# ----------------------------------------------------------------------------- construction and arguments
def test_ragged_nested_lists():
    _raises(ValueError, lambda: mt.tensor([[1, 2], [3]]), "tensor", "ragged|inhomogeneous")


def test_non_numeric_data():
    _raises(TypeError, lambda: mt.tensor(["a", "b"]), "tensor", "<U1|str|number")


def test_dim_of_wrong_type():
    _raises(TypeError, lambda: _f(3, 4).sum(dim=1.5), "sum", "dim", "1.5")


def test_embedding_weight_must_be_2d():
    _raises(ValueError, lambda: F.embedding(mt.tensor([0, 1]), _f(5)), "embedding", "2-D|2 dim", _shape(5))


def test_backward_gradient_dtype():
    y = _f(2, grad=True) * 2
    _raises(TypeError, lambda: y.backward(mt.ones(2, dtype=mt.float64)), "backward", "float64", "float32")


# ----------------------------------------------------------------------------- gradients of the wrong shape
def test_assigning_a_grad_of_another_shape_or_dtype_raises():
    p = _f(3, grad=True)
    _raises(RuntimeError, lambda: setattr(p, "grad", mt.ones(1)), "assigned grad", _shape(1), _shape(3))
    _raises(
        RuntimeError, lambda: setattr(p, "grad", mt.ones(3, dtype=mt.float64)), "assigned grad", "float64", "float32"
    )
    _raises(TypeError, lambda: setattr(p, "grad", np.ones(3, dtype=np.float32)), "assigned grad", "ndarray")
    p.grad = mt.ones(3)  # the right shape and dtype is accepted
    p.grad = None


def test_sgd_never_broadcasts_a_gradient_into_a_parameter():
    p = _f(3, grad=True)
    before = p.detach().numpy().copy()
    p.grad = mt.zeros(3)
    p.grad.data = mt.ones(1)  # .data may change the shape, as torch lets it
    opt = mt.optim.SGD([p], lr=0.1)
    _raises(RuntimeError, opt.step, "SGD.step", _shape(3), _shape(1), "no parameter was updated")
    np.testing.assert_array_equal(p.detach().numpy(), before)


# ----------------------------------------------------------------------------- factories and conversion
@pytest.mark.parametrize(
    "make",
    [
        lambda: mt.randn(2.5),
        lambda: mt.zeros(3, 2.5),
        lambda: mt.ones((2, 1.5)),
        lambda: mt.empty(2.0),
        lambda: mt.rand(1, 2.5),
        lambda: mt.full((2.5,), 1.0),
        lambda: mt.randint(0, 5, (2.5,)),
        lambda: mt.eye(2.5),
        lambda: mt.randperm(3.0),
        lambda: mt.zeros(2).reshape(2.0),
    ],
    ids=["randn", "zeros", "ones", "empty", "rand", "full", "randint", "eye", "randperm", "reshape"],
)
def test_non_integer_sizes_raise_type_error(make):
    _raises(TypeError, make, "sizes must be integers", r"\d\.\d")


def test_negative_sizes_raise():
    _raises(ValueError, lambda: mt.zeros(2, -1), "zeros", "non-negative")


@pytest.mark.parametrize(
    "data,dtype",
    [
        ([2**63], None),
        (2**64 + 1, None),
        ([1, -(2**63) - 1], None),
        ([300], mt.uint8),
        ([-1], mt.uint8),
        ([2**31], mt.int32),
    ],
)
def test_integers_that_do_not_fit_raise_overflow(data, dtype):
    _raises(OverflowError, lambda: mt.tensor(data, dtype=dtype), "does not fit", str(np.dtype(dtype or np.int64)))


def test_largest_int64_still_fits():
    assert mt.tensor([2**63 - 1, -(2**63)]).tolist() == [2**63 - 1, -(2**63)]


# ----------------------------------------------------------------------------- errors name the op
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
    "maximum": mt.maximum,
    "minimum": mt.minimum,
    "add_fn": mt.add,
    "rsub": lambda a, b: b.__rsub__(a),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_broadcast_mismatch_names_the_op_and_both_shapes(name):
    op = name.split("_")[0].removeprefix("r")
    _raises(ValueError, lambda: BINARY[name](_f(3, 4), _f(2, 4)), rf"^{op}\b", _shape(3, 4), _shape(2, 4), "broadcast")


def test_mixed_dtype_broadcast_mismatch_names_the_op():
    _raises(ValueError, lambda: _f(3) / mt.tensor([1, 2]), r"^div\b", _shape(3), _shape(2))


def test_setitem_mismatch_names_the_op_and_shapes():
    t = mt.zeros(3, 4)
    _raises(ValueError, lambda: t.__setitem__(slice(None), mt.ones(5)), "__setitem__", _shape(5), _shape(3, 4))
    _raises(ValueError, lambda: t.__setitem__(0, np.ones((2, 4))), "__setitem__", _shape(2, 4), _shape(3, 4))
