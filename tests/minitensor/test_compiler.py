"""mt.compile returns what it is given, saying so once; set_float32_matmul_precision is accepted as torch's."""

from __future__ import annotations

import warnings

import pytest
import torch

import minitensor as mt
from minitensor import compiler


def test_compile_returns_the_model_and_warns_once(monkeypatch):
    monkeypatch.setitem(compiler._said, "compile", False)
    model = mt.nn.Linear(2, 3)
    with pytest.warns(UserWarning, match="no compiler here"):
        assert mt.compile(model) is model
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mt.compile(model, mode="max-autotune") is model

        @mt.compile
        def f(x):
            return x + 1

        @mt.compile(fullgraph=True)
        def g(x):
            return x * 2

        assert f(1) == 2 and g(2) == 4
    with pytest.raises(TypeError, match="a module or a function"):
        mt.compile(3)


def test_matmul_precision_as_torch():
    before = torch.get_float32_matmul_precision()
    assert mt.get_float32_matmul_precision() == before == "highest"
    mt.set_float32_matmul_precision("high")
    assert mt.get_float32_matmul_precision() == "high"
    mt.set_float32_matmul_precision("highest")
    with pytest.raises(ValueError, match="'highest', 'high' or 'medium'"):
        mt.set_float32_matmul_precision("low")


def test_backends_flags_accepted_as_torch():
    # torch's own flags are only read here: a torch test utility loaded by another test may freeze them
    for lib in (mt,):
        lib.backends.cudnn.benchmark = True
        lib.backends.cuda.matmul.allow_tf32 = True
        lib.backends.cudnn.allow_tf32 = True
        lib.backends.cudnn.deterministic = True
        assert lib.backends.cudnn.benchmark and lib.backends.cuda.matmul.allow_tf32
        lib.backends.cudnn.benchmark = lib.backends.cudnn.deterministic = False
        lib.backends.cuda.matmul.allow_tf32 = False
    assert mt.backends.mps.is_available() == torch.backends.mps.is_available()
    assert mt.backends.cudnn.enabled == torch.backends.cudnn.enabled
