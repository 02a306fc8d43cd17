"""ToDevice: a tensor copied to another device, differentiably (what Tensor.to, .cuda() and .cpu() call).

A copy between devices changes where the numbers live, not what they are: its Jacobian is the identity.
So the gradient is the output's gradient copied back to the input's device, and the tangent is the
input's tangent copied forward (jvp_kind "linear": the op applied to the tangent).
"""

from __future__ import annotations

from .. import devices
from ..autograd import Function, is_tensor_like


class ToDevice(Function):
    """out = a on `device`;  da = g copied back to a's device"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a, device, module=None):
        # where a was, and its library: the backward sends g back there without asking again whether it exists
        ctx.source, ctx.module = devices.device_of(a), devices.array_module(a)
        return devices.to_device(a, device, module)

    @staticmethod
    def backward(ctx, g):
        return (moved(g, ctx.source, ctx.module),)


def moved(x, device, module):
    """x on `device` (whose library is `module`): an array by the plain transfer (a first-order backward), a
    Tensor by ToDevice itself (under create_graph, so that the backward's own copy is recorded too)."""
    if is_tensor_like(x):
        return x if x.device == device else ToDevice.apply(x, device=device, module=module)
    return devices.to_device(x, device, module)
