"""minitensor/autograd/ is a package laid out as torch/autograd/: every name mt.autograd had as one module is
still there, the functional API is a real submodule (no sys.modules alias), and the tensor test is defined once."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import minitensor as mt
from tests.support import ROOT as SUPPORT_ROOT

ROOT = Path(SUPPORT_ROOT)
PACKAGE = ROOT / "minitensor" / "autograd"

# what `mt.autograd` offered when it was one module (its public names, stdlib imports aside)
NAMES = """Context Edge Function GradcheckError Node OpCalls VersionCounter backward enable_grad functional grad
gradcheck gradgradcheck ieee_quiet is_grad_enabled no_grad register_namespaces root_gradient run_backward
set_grad_enabled set_op_calls topological_order unbroadcast""".split()


def test_every_name_of_the_former_module_is_still_there():
    assert [n for n in NAMES if not hasattr(mt.autograd, n)] == []


def test_the_functional_api_is_a_submodule_under_both_spellings():
    from minitensor.autograd.functional import hvp

    module = importlib.import_module("minitensor.autograd.functional")
    assert mt.autograd.functional is module and module.hvp is hvp
    assert Path(module.__file__) == PACKAGE / "functional.py"


def test_the_package_init_only_re_exports():
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    body = tree.body[1:]  # after the docstring
    assert all(isinstance(s, (ast.ImportFrom, ast.Assign)) for s in body), "logic in autograd/__init__.py"


def test_each_file_opens_with_a_docstring():
    for path in sorted(PACKAGE.glob("*.py")):
        assert ast.get_docstring(ast.parse(path.read_text())), f"{path.name} does not open with a docstring"


def test_the_tensor_test_is_defined_once():
    found = []
    for path in (ROOT / "minitensor").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name in ("_is_tensor", "is_tensor_like"):
                found.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert found == ["minitensor/core/function.py:is_tensor_like"]


def test_an_op_with_optional_inputs_needs_no_padding():
    """max_inputs: needs_input_grad has a flag for every input the op can take (False for one not given), and a
    backward may return a slot for each (None for one not given); a gradient for an input not given is an error."""
    import numpy as np

    import minitensor as mt

    seen = []

    class Affine(mt.autograd.Function):
        max_inputs = 3

        @staticmethod
        def forward(ctx, x, w, b=None):
            return x * w if b is None else x * w + b

        @staticmethod
        def backward(ctx, g):
            seen.append(ctx.needs_input_grad)
            need_x, need_w, need_b = ctx.needs_input_grad
            return (g if need_x else None), None, (g if need_b else None)

    x = mt.tensor([1.0, 2.0], requires_grad=True)
    w, b = mt.tensor([3.0, 4.0]), mt.tensor([0.5, 0.5], requires_grad=True)
    Affine.apply(x, w).sum().backward()
    Affine.apply(x, w, b).sum().backward()
    assert seen == [(True, False, False), (True, False, True)]
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 1.0])

    class Wrong(Affine):
        @staticmethod
        def backward(ctx, g):
            return g, None, g  # a gradient for the bias that was not given

    import pytest

    with pytest.raises(RuntimeError, match="returned 3 gradients"):
        Wrong.apply(x, w).sum().backward()
