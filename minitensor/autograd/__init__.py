"""Reverse-mode automatic differentiation, laid out as torch/autograd/: this file only re-exports.

    grad_mode.py           no_grad, enable_grad, set_grad_enabled, is_grad_enabled (per thread)
    function.py            Function, Context, Node, Edge: a primitive's forward, and the node it records;
                           VersionCounter, unbroadcast, the op-call hook (OpCalls)
    quiet.py               ieee_quiet: NumPy's floating-point warnings off around an op (and its speed device)
    engine.py              the graph walk (topological_order, run_backward) and its entry points,
                           backward(), grad(), and tangent_grad() (forward over reverse, unrecorded)
    finite_differences.py  gradcheck, gradgradcheck
    saved.py               what a node keeps (saved_entries) and the saved-tensor hooks' pack and unpack
    graph.py               mt.autograd.graph: saved_tensors_hooks, saved_tensors (the listing)
    functional.py          mt.autograd.functional: vjp, jvp, jacobian, hessian, hvp, vhp (torch's)
    tangents.py            forward mode in the engine: the open dual level, tangents, running an op's JVP rule
    forward_ad.py          mt.autograd.forward_ad: dual_level, make_dual, unpack_dual (torch's)
    anomaly_mode.py        detect_anomaly, set_detect_anomaly: a NaN gradient names its op and forward call

Imports point one way: grad_mode <- function <- engine <- finite_differences, and tensor.py -> ops/
-> this package. functional.py builds on Tensors (it creates and stacks them), so it sits above
tensor.py (so does forward_ad.py, which makes views with ops/): this file does not import them (that would
close a circle through tensor.py);
minitensor/__init__.py does, which makes `mt.autograd.functional` and
`from minitensor.autograd.functional import hvp` work as in PyTorch.
"""

from . import graph
from .anomaly_mode import detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly
from .engine import backward, grad, root_gradient, run_backward, tangent_grad, topological_order
from .finite_differences import GradcheckError, gradcheck, gradgradcheck
from .function import (
    Context,
    Edge,
    Function,
    Node,
    OpCalls,
    VersionCounter,
    is_tensor_like,
    register_namespaces,
    set_op_calls,
    unbroadcast,
)
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .quiet import ieee_quiet
from .tangents import tangent_sum

__all__ = [
    "Context",
    "Edge",
    "Function",
    "GradcheckError",
    "Node",
    "OpCalls",
    "VersionCounter",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "grad",
    "graph",
    "gradcheck",
    "gradgradcheck",
    "ieee_quiet",
    "is_anomaly_check_nan_enabled",
    "is_anomaly_enabled",
    "is_grad_enabled",
    "is_tensor_like",
    "no_grad",
    "register_namespaces",
    "root_gradient",
    "run_backward",
    "set_detect_anomaly",
    "set_grad_enabled",
    "set_op_calls",
    "tangent_grad",
    "tangent_sum",
    "topological_order",
    "unbroadcast",
]
