"""Reverse-mode automatic differentiation, laid out as torch/autograd/: this file only re-exports.

The engine's core (Function, Node, the walk, grad mode) is minitensor/core/; this package holds what attaches to it:

    extensions.py          the extended apply and backward while a feature is on; higher order; OpCalls (profiler)
    leaf_delivery.py       leaf gradients handed over as soon as complete (post-accumulate-grad hooks)
    quiet.py               ieee_quiet: NumPy's floating-point warnings off for a block
    finite_differences.py  gradcheck, gradgradcheck
    saved.py               what a node keeps (saved_entries) and the saved-tensor hooks' pack and unpack
    graph.py               mt.autograd.graph: saved_tensors_hooks, saved_tensors (the listing)
    functional.py          mt.autograd.functional: vjp, jvp, jacobian, hessian, hvp, vhp (torch's)
    tangents.py            forward mode in the engine: the open dual level, tangents, running an op's JVP rule,
                           tangent_grad (forward over reverse, unrecorded)
    forward_ad.py          mt.autograd.forward_ad: dual_level, make_dual, unpack_dual (torch's)
    grad_mode.py           inference_mode (no_grad under torch's name)
    anomaly_mode.py        detect_anomaly, set_detect_anomaly: a NaN gradient names its op and forward call

functional.py and forward_ad.py build on Tensors, so they sit above tensor.py: this file does not import them;
minitensor/__init__.py does, which makes `mt.autograd.functional` work as in PyTorch.
"""

from ..core import (
    Context,
    Edge,
    Function,
    Node,
    VersionCounter,
    backward,
    enable_grad,
    grad,
    is_grad_enabled,
    is_tensor_like,
    no_grad,
    root_gradient,
    run_backward,
    set_grad_enabled,
    topological_order,
    unbroadcast,
)
from ..core.function import register_namespaces
from . import graph
from .anomaly_mode import detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly
from .extensions import OpCalls, set_op_calls
from .finite_differences import GradcheckError, gradcheck, gradgradcheck
from .grad_mode import inference_mode
from .quiet import ieee_quiet
from .tangents import tangent_grad, tangent_sum

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
    "inference_mode",
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
