"""The two sides of the parity report: the same training step in transformer_np and in PyTorch.

Each side owns its model, optimizer, schedule and clipping, and offers `loss(src, tgt)`, `step()`
(clip, Adam, schedule; returns the total gradient norm), `zero_grad()`, `autograd_grad` and `tensor(array)`
(a tensor beside the model's weights):

    NpSide      transformer_np as it trains: transformer_np.loss.compute_loss (its loss is
                transformer_np.loss.sequence_loss), Adam, WarmupInverseSqrt, clip_grad_norm_
    TorchSide   stock PyTorch in the report's dtype: parity.loss.compute_loss, torch.optim.Adam,
                LambdaLR with the same warmup rate, clip_grads_with_norm_, with one adjustment:
                the total gradient norm used for clipping is accumulated in float64 (TorchSide.step
                says why; the report's header states it)

With `--against np-cpu` the reference is a second NpSide, on the CPU (parity/placement.py).
"""

from __future__ import annotations

import torch

import minitensor as mt
from transformer_np.loss import compute_loss as np_compute_loss

from .hooks import to_numpy
from .loss import compute_loss as torch_compute_loss

# Stated in every report's header, word for word (parity/render.py).
CLIP_NORM_ADJUSTMENT = (
    "gradient clipping: the total norm is accumulated in float64 "
    "(torch.nn.utils.clip_grad_norm_ sums the squares in the parameters' dtype)"
)


def warmup_lambda(d_model: int, warmup_steps: int, factor: float):
    """The paper's rate for torch's LambdaLR: factor * d^-0.5 * min(step^-0.5, step * warmup^-1.5), step = epoch + 1."""

    def rate(epoch: int) -> float:
        step = epoch + 1
        return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)

    return rate


class NpSide:
    name = "transformer_np"

    def __init__(self, model, cfg, train):
        self.model = model
        self.train = train
        self.opt = mt.optim.Adam(model.parameters(), lr=train.lr, betas=tuple(train.betas), eps=train.eps)
        # lr = train.lr * d^-0.5 * min(n^-0.5, n * warmup^-1.5): the base lr carries train.lr, factor 1,
        # exactly as torch's LambdaLR below multiplies its base lr.
        self.sched = mt.optim.lr_scheduler.WarmupInverseSqrt(
            self.opt, d_model=cfg.d_model, warmup_steps=train.warmup_steps, factor=1.0
        )
        self.clip = train.clip_grad_norm
        self.smoothing = train.label_smoothing

    def loss(self, src, tgt):
        return np_compute_loss(self.model, src, tgt, self.smoothing)[0]

    # How the side-generic checks (the report's hvp) differentiate and make a tensor beside the model's weights.
    autograd_grad = staticmethod(mt.autograd.grad)

    def tensor(self, array):
        return mt.tensor(array).to(next(iter(self.model.parameters())).device)

    def step(self):
        norm = mt.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip) if self.clip > 0 else None
        self.opt.step()
        self.sched.step()
        return None if norm is None else float(to_numpy(norm))

    def zero_grad(self):
        self.opt.zero_grad()


class TorchSide:
    name = "torch"

    def __init__(self, model, cfg, train):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=train.lr, betas=tuple(train.betas), eps=train.eps)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, warmup_lambda(cfg.d_model, train.warmup_steps, 1.0))
        self.clip = train.clip_grad_norm
        self.smoothing = train.label_smoothing

    def loss(self, src, tgt):
        return torch_compute_loss(self.model, src, tgt, self.smoothing)[0]

    autograd_grad = staticmethod(torch.autograd.grad)

    def tensor(self, array):
        return torch.from_numpy(array).to(next(iter(self.model.parameters())).device)

    def step(self):
        norm = None
        if self.clip > 0:
            # Deviation from torch.nn.utils.clip_grad_norm_, flagged (CLIP_NORM_ADJUSTMENT): the total norm
            # is accumulated in float64, then clipped with torch's own clip_grads_with_norm_. torch's float32
            # norm sums squares in float32: about 1e-4 relative error for the base model's 5M-entry embedding
            # gradient, more than PARITY_RTOL['float32'], so the reference would be the weaker side.
            grads = [p.grad for p in self.model.parameters() if p.grad is not None]
            norm = torch.linalg.vector_norm(
                torch.stack([torch.linalg.vector_norm(g, dtype=torch.float64) for g in grads])
            )
            torch.nn.utils.clip_grads_with_norm_(self.model.parameters(), self.clip, norm)
        self.opt.step()
        self.sched.step()
        return None if norm is None else float(norm)

    def zero_grad(self):
        self.opt.zero_grad(set_to_none=True)
