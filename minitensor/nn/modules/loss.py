"""Losses as modules (CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, BCEWithLogitsLoss, KLDivLoss) calling
nn.functional."""

from __future__ import annotations

from .. import functional as F
from .module import Module

__all__ = ["BCEWithLogitsLoss", "CrossEntropyLoss", "KLDivLoss", "L1Loss", "MSELoss", "NLLLoss"]


class _Loss(Module):
    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class _ClassLoss(_Loss):
    """A loss over classes: `weight` (one rescaling factor per class, or None) is kept as a buffer, as in PyTorch."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index


class CrossEntropyLoss(_ClassLoss):
    """F.cross_entropy(input, target): logits (N, C), (C,) or (N, C, d...) against class indices or probabilities."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(weight, ignore_index, reduction)
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(
            input,
            target,
            self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
        )


class NLLLoss(_ClassLoss):
    """F.nll_loss(input, target): log-probabilities against class indices."""

    def forward(self, input, target):
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class MSELoss(_Loss):
    """(input - target)^2, averaged or summed."""

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """|input - target|, averaged or summed."""

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """F.binary_cross_entropy_with_logits; `weight` and `pos_weight` are kept as buffers, as in PyTorch."""

    def __init__(self, weight=None, reduction: str = "mean", pos_weight=None):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(
            input, target, self.weight, reduction=self.reduction, pos_weight=self.pos_weight
        )


class KLDivLoss(_Loss):
    """F.kl_div(input, target): log-probabilities against probabilities (or log-probabilities with log_target)."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False):
        if size_average is not None or reduce is not None:
            raise ValueError("KLDivLoss: size_average and reduce are deprecated in torch; use reduction= instead")
        super().__init__(reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)
