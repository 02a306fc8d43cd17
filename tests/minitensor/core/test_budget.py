"""minitensor/core/ stays what a learner reads in an afternoon: within its line budget, docstrings included, and
importing nothing from the rest of the package (features attach to it at its points, core/points.py)."""

import ast
from pathlib import Path

from tests.support import ROOT

CORE = Path(ROOT) / "minitensor" / "core"
BUDGET = 900  # lines, all files of the core together


def test_the_core_is_within_its_budget():
    counts = {p.name: len(p.read_text().splitlines()) for p in sorted(CORE.glob("*.py"))}
    assert sum(counts.values()) <= BUDGET, f"minitensor/core/ has {sum(counts.values())} lines > {BUDGET}: {counts}"


def test_the_core_imports_nothing_from_the_rest_of_the_package():
    outside = []
    for path in sorted(CORE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("minitensor"):
                outside.append(f"{path.name}: from {node.module}")
            elif isinstance(node, ast.ImportFrom) and node.level > 1:  # `from ..x`: above the core
                outside.append(f"{path.name}: from {'.' * node.level}{node.module or ''}")
            elif isinstance(node, ast.Import) and any(a.name.startswith("minitensor") for a in node.names):
                outside.append(f"{path.name}: import {', '.join(a.name for a in node.names)}")
    assert outside == []


def test_the_core_runs_a_backward_on_its_own():
    """The core's Tensor and a Function written against it alone: the first-order engine, nothing attached."""
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "from minitensor.core import Function, Tensor\n"
        "class Mul(Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, a, b):\n"
        "        ctx.save_for_backward(a, b)\n"
        "        return a * b\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        a, b = ctx.saved_arrays\n"
        "        return g * b, g * a\n"
        "x, w = Tensor.wrap(np.array([1.0, 2.0])), Tensor.wrap(np.array([[3.0], [4.0]]))\n"
        "x.requires_grad = w.requires_grad = True\n"
        "y = Mul.apply(x, w)\n"
        "y.backward(np.ones((2, 2)))\n"
        "print(x.grad._data.tolist(), w.grad._data.tolist())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    # x's gradient sums over the broadcast rows, w's over the broadcast columns
    assert out.strip() == "[7.0, 7.0] [[3.0], [3.0]]", out
