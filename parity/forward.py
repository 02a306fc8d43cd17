"""The parity report's forward-mode group: transformer_np's forward mode against torch.func, on the whole model.

Both sides take the training loss as a function of all parameters, L(θ), and one seeded random direction v
(the same arrays on both sides):

    jvp      dL/dv = J v, in one forward pass carrying tangents: forward_ad.make_dual on every parameter,
             minitensor's against torch.autograd.forward_ad's
    fwd-hvp  H v by forward over reverse: the gradient ∇L computed inside the open dual level (create_graph,
             so the backward's own ops carry the tangents) has H v as its tangent; the whole vector and v · H v

The two sides are written line for line alike (np_forward_mode, torch_forward_mode). torch.func.jvp gives the
same values (tests/parity/test_forward.py checks it) but cannot run under the report's ReLU aligner. Both
models run in eval mode for these rows (no dropout), and back in their mode after. The torch side runs on the
report's device (CUDA too); transformer_np on its own (--np-device), and with --against np-cpu the reference is
transformer_np on the CPU, by the same np_forward_mode.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.autograd.forward_ad as torch_fwAD

import minitensor as mt
from minitensor.autograd import forward_ad as fwAD
from minitensor.autograd.functional import functional_call
from minitensor.testing import PARITY_RTOL
from transformer_np.data import PAD_ID, shift_targets
from transformer_np.loss import sequence_loss as np_sequence_loss
from transformer_np.masks import padding_mask as np_padding_mask
from transformer_np.masks import target_mask as np_target_mask

from .hooks import to_numpy
from .loss import sequence_loss as torch_sequence_loss
from .masks import padding_mask, target_mask
from .results import Report

GROUP = "forward-mode"
FWD_HVP_NOTE = "forward over reverse on both sides; the key biases' entries are exactly 0 (judged within this vector)"


def np_loss_of(model, src, tgt, smoothing: float):
    """transformer_np's training loss (transformer_np.loss.compute_loss) as a function of a dict of parameters."""
    tgt_in, labels = shift_targets(tgt)
    device = next(iter(model.parameters())).device  # the tokens go where the weights are (--np-device)
    src_t, tgt_t = mt.tensor(src).to(device), mt.tensor(tgt_in).to(device)
    args = (src_t, tgt_t, np_padding_mask(src_t, PAD_ID), np_target_mask(tgt_t, PAD_ID))
    return lambda params: np_sequence_loss(functional_call(model, params, args), labels, smoothing)


def torch_loss_of(model, src, tgt, smoothing: float):
    """The same loss in PyTorch (parity.loss.compute_loss) as a function of a dict of parameters."""
    tgt_in, labels = shift_targets(tgt)
    src_t = torch.as_tensor(src, device=model.device)
    tgt_t = torch.as_tensor(np.ascontiguousarray(tgt_in), device=model.device)
    args = (src_t, tgt_t, padding_mask(src_t, PAD_ID), target_mask(tgt_t, PAD_ID))
    return lambda params: torch_sequence_loss(torch.func.functional_call(model, params, args), labels, smoothing)


def np_forward_mode(loss_of, params: dict, direction: dict) -> tuple:
    """(J v, H v as a dict) by transformer_np's forward mode: one pass with dual parameters, and the gradient
    computed inside the level (create_graph, so the backward's primitives carry the tangents)."""
    leaves = {n: p.detach().requires_grad_(True) for n, p in params.items()}
    with fwAD.dual_level():
        duals = {n: fwAD.make_dual(leaves[n], mt.tensor(direction[n]).to(leaves[n].device)) for n in params}
        loss = loss_of(duals)
        jv = fwAD.unpack_dual(loss).tangent
        grads = mt.autograd.grad(loss, list(leaves.values()), create_graph=True, allow_unused=True)
        hv = {}
        for n, g in zip(params, grads):
            t = None if g is None else fwAD.unpack_dual(g).tangent
            hv[n] = np.zeros(params[n].shape, direction[n].dtype) if t is None else to_numpy(t)
    return to_numpy(jv), hv


def torch_forward_mode(loss_of, params: dict, direction: dict) -> tuple:
    """(J v, H v as a dict) by torch.autograd.forward_ad, line for line as np_forward_mode. Not torch.func.jvp:
    its wrapped tensors have no storage, and the report's ReLU aligner (parity/hooks.py) reads the values."""
    leaves = {n: p.detach().requires_grad_(True) for n, p in params.items()}
    device = next(iter(leaves.values())).device
    with torch_fwAD.dual_level():
        duals = {n: torch_fwAD.make_dual(leaves[n], torch.from_numpy(direction[n]).to(device)) for n in params}
        loss = loss_of(duals)
        jv = torch_fwAD.unpack_dual(loss).tangent
        grads = torch.autograd.grad(loss, list(leaves.values()), create_graph=True, allow_unused=True)
        hv = {}
        for n, g in zip(params, grads):
            t = None if g is None else torch_fwAD.unpack_dual(g).tangent
            hv[n] = np.zeros(params[n].shape, direction[n].dtype) if t is None else to_numpy(t)
    return to_numpy(jv), hv


def compare_forward_mode(report: Report, np_model, pt_model, src, tgt, smoothing: float, dtype: str, seed: int) -> None:
    """The forward-mode rows: J v (the loss's directional derivative) and H v by forward over reverse."""
    rtol = PARITY_RTOL[dtype]
    np_params, pt_params = dict(np_model.named_parameters()), dict(pt_model.named_parameters())
    names = list(pt_params)
    rng = np.random.default_rng(seed + 3)  # its own direction: the hvp group's is seed + 2
    direction = {n: rng.standard_normal(tuple(pt_params[n].shape)).astype(dtype) for n in names}
    modes = (np_model.training, pt_model.training)
    np_model.eval()
    pt_model.eval()
    try:
        try:
            ours = np_forward_mode(
                np_loss_of(np_model, src, tgt, smoothing), {n: np_params[n] for n in names}, direction
            )
        except NotImplementedError as e:  # a primitive without a forward-mode rule: the rows cannot be checked
            for kind, name in (("jvp", "dL/dv = J v"), ("fwd-hvp", "H v (forward over reverse)")):
                report.missing(GROUP, kind, name, rtol, f"transformer_np: {e}")
            return
        if isinstance(pt_model, torch.nn.Module):
            ref = torch_forward_mode(torch_loss_of(pt_model, src, tgt, smoothing), pt_params, direction)
        else:  # --against np-cpu: transformer_np on the CPU
            ref = np_forward_mode(np_loss_of(pt_model, src, tgt, smoothing), pt_params, direction)
    finally:
        np_model.train(modes[0])
        pt_model.train(modes[1])
    report.check_close(GROUP, "jvp", "dL/dv = J v (forward mode)", ours[0], ref[0], rtol)
    flat = lambda hv: np.concatenate([hv[n].reshape(-1) for n in names])
    curvature = lambda hv: np.array(sum(float((hv[n] * direction[n]).sum()) for n in names))
    report.check_close(
        GROUP, "fwd-hvp", f"H v, all {len(names)} parameters", flat(ours[1]), flat(ref[1]), rtol, FWD_HVP_NOTE
    )
    report.check_close(GROUP, "fwd-hvp", "v . H v (forward over reverse)", curvature(ours[1]), curvature(ref[1]), rtol)
