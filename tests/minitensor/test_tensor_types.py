"""torch's dtype aliases, legacy tensor types (torch.LongTensor, ...), Tensor.type and the cast methods."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt

ALIASES = ["float", "double", "half", "long", "int", "short", "bool", "uint8", "int8", "float16", "float32", "int64"]
TYPES = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor"]
TYPES += ["ByteTensor", "BoolTensor"]


def name(dtype) -> str:
    return str(dtype).removeprefix("torch.") if isinstance(dtype, torch.dtype) else np.dtype(dtype).name


@pytest.mark.parametrize("alias", ALIASES)
def test_dtype_aliases_name_torchs_dtypes(alias):
    assert name(getattr(mt, alias)) == name(getattr(torch, alias))


@pytest.mark.parametrize("type_name", TYPES)
def test_legacy_types_construct_and_check_as_torch(type_name):
    ours, theirs = getattr(mt, type_name), getattr(torch, type_name)
    for args in [([1, 0, 2],), (2, 3), ()]:
        a, b = ours(*args), theirs(*args)
        assert a.shape == tuple(b.shape) and name(a.dtype) == name(b.dtype)
        if args and isinstance(args[0], list):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert isinstance(a, ours) and isinstance(a, mt.Tensor)
        assert a.type() == b.type() == f"torch.{type_name}"
    other = "LongTensor" if type_name != "LongTensor" else "FloatTensor"
    assert not isinstance(ours([1]), getattr(mt, other))


def test_type_casts_by_dtype_or_name():
    x = mt.tensor([1.5, -2.5])
    assert x.type(mt.int64).dtype == mt.int64
    assert x.type("torch.DoubleTensor").dtype == mt.float64
    assert x.type(mt.LongTensor).dtype == mt.int64
    with pytest.raises(ValueError, match="unknown tensor type 'torch.Foo'"):
        x.type("torch.Foo")


@pytest.mark.parametrize("method", ["half", "float", "double", "long", "int", "short", "char", "byte", "bool"])
def test_cast_methods_as_torch(method):
    a = np.array([1.5, -2.0, 0.0, 3.0])
    ours, ref = getattr(mt.tensor(a), method)(), getattr(torch.tensor(a), method)()
    assert name(ours.dtype) == name(ref.dtype)
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


def test_half_is_differentiable_as_torch():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    (x.half().float() * mt.tensor([3.0, 4.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])
