"""The engine's core: the whole of reverse mode for a first-order backward on NumPy arrays, read top to bottom.

    grad_mode.py   no_grad, enable_grad, set_grad_enabled: whether this thread records
    function.py    Function, Context, Node, Edge: a primitive's forward, the node it records, unbroadcast
    engine.py      the walk (topological_order, run_backward) and its entry points backward() and grad()
    tensor.py      the Tensor's autograd state: its array, .grad, grad_fn, version counter, hooks
    points.py      the extension points where the rest of the package attaches (docs/READING.md)

It imports nothing from the rest of the package (tests/minitensor/core/test_budget.py keeps it so, and within its
line budget).
"""

from . import points  # noqa: F401
from .engine import backward, grad, grad_walk, root_gradient, run_backward, topological_order  # noqa: F401
from .function import Context, Edge, Function, Node, VersionCounter, is_tensor_like, unbroadcast  # noqa: F401
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401
from .tensor import HookHandle, Tensor  # noqa: F401
