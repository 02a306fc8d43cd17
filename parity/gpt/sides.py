"""The two sides of the GPT's parity report: the training step of transformer_np.gpt.train in transformer_np and in
PyTorch, with the interface of parity/sides.py (`loss`, `step`, `zero_grad`, `opt`, `train.betas`, `train.eps`), so
that the encoder-decoder's step-by-step comparison (parity.report.compare_steps) runs them unchanged.

    GptNpSide     transformer_np.gpt.train as it trains: loss_of (next-token cross-entropy), make_optimizer (AdamW,
                  weight decay on the matrices only), lr_at (warmup then cosine), clip_grad_norm_
    GptTorchSide  stock PyTorch: F.cross_entropy, torch.optim.AdamW with the same two groups, the same lr_at, and
                  the clipping of parity/sides.py (the total norm accumulated in float64, stated in the header)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from transformer_np.gpt.train import Recipe, loss_of, lr_at, make_optimizer

from ..sides import NpSide, TorchSide

ADAMW_EPS = 1e-8  # both libraries' default, which transformer_np.gpt.train keeps


@dataclass(frozen=True)
class AdamNumbers:
    """What parity.report.adam_step_bound reads of a side's optimizer."""

    betas: tuple
    eps: float


class RecipeSchedule:
    """The recipe's learning rate lr_at(n) set on every group before step n, as transformer_np.gpt.train does; works
    on a minitensor and a torch optimizer alike (both keep the rate in param_groups)."""

    def __init__(self, opt, recipe: Recipe):
        self.opt, self.recipe, self.n = opt, recipe, 0
        self._set()

    def _set(self) -> None:
        for group in self.opt.param_groups:
            group["lr"] = lr_at(self.n, self.recipe)

    def step(self) -> None:
        self.n += 1
        self._set()


class GptNpSide(NpSide):
    def __init__(self, model, recipe: Recipe):
        self.model = model
        self.opt = make_optimizer(model, recipe)
        self.train = AdamNumbers(tuple(recipe.betas), ADAMW_EPS)
        self.sched = RecipeSchedule(self.opt, recipe)
        self.clip = recipe.grad_clip

    def loss(self, x, y):
        return loss_of(self.model, x, y)


class GptTorchSide(TorchSide):
    def __init__(self, model, recipe: Recipe):
        self.model = model
        params = list(model.parameters())
        groups = [
            {"params": [p for p in params if p.ndim >= 2], "weight_decay": recipe.weight_decay},
            {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
        ]
        self.opt = torch.optim.AdamW(groups, lr=recipe.lr, betas=tuple(recipe.betas), eps=ADAMW_EPS)
        self.sched = RecipeSchedule(self.opt, recipe)
        self.clip = recipe.grad_clip

    def loss(self, x, y):
        logits = self.model(x)
        target = torch.as_tensor(y, device=logits.device).reshape(-1)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target)
