"""F.pad's refusals, each beside torch's (its values and gradients in every mode: the op table and torch's OpInfo
samples, tests/minitensor/ops/)."""

from __future__ import annotations

import pytest
import torch

import minitensor as mt


@pytest.mark.parametrize(
    "shape, pad, kwargs, match",
    [
        ((2, 3, 4), (1, 2), {"mode": "reflect_101"}, "mode must be one of"),
        ((2, 3, 4), (1,), {}, "even length"),
        ((2, 3, 4), (1, 1, 1, 1, 1, 1, 1, 1), {}, "pad 4 dims, but the input has 3"),
        ((2, 3, 4), (4, 0), {"mode": "reflect"}, "smaller than dim 2 of size 4"),
        ((2, 3, 4), (5, 0), {"mode": "circular"}, "at most dim 2 of size 4"),
        ((2, 3, 4), (1, 1), {"mode": "reflect", "value": 2.0}, "value is for mode='constant' only"),
        ((4,), (1, 1), {"mode": "replicate"}, "1-D input is not supported"),
        ((2, 3, 4), (-3, -2), {}, "cut more than dim 2"),
    ],
)
def test_pad_refuses_as_torch(shape, pad, kwargs, match):
    with pytest.raises((RuntimeError, ValueError, NotImplementedError)):
        torch.nn.functional.pad(torch.zeros(shape), pad, **kwargs)
    with pytest.raises(ValueError, match=match):
        mt.nn.functional.pad(mt.zeros(*shape), pad, **kwargs)


def test_kl_div_refuses_the_legacy_arguments_and_unknown_reductions():
    x = mt.zeros(2, 3)
    with pytest.raises(ValueError, match="use reduction="):
        mt.nn.functional.kl_div(x, x, size_average=False)
    with pytest.raises(ValueError, match="use reduction="):
        mt.nn.KLDivLoss(reduce=False)
    with pytest.raises(ValueError, match="'batchmean'"):
        mt.nn.functional.kl_div(x, x, reduction="max")
    assert "reduction='batchmean'" in repr(mt.nn.KLDivLoss(reduction="batchmean"))


def test_pad_value_cast_as_torch_and_overflow_refused():
    ours = mt.nn.functional.pad(mt.tensor([1, 2]), (1, 1), value=3)
    ref = torch.nn.functional.pad(torch.tensor([1, 2]), (1, 1), value=3)
    assert ours.tolist() == ref.tolist() and ours.dtype == mt.int64
    with pytest.raises(RuntimeError, match="without overflow"):
        mt.nn.functional.pad(mt.zeros(2, dtype=mt.float16), (1, 1), value=1e6)
