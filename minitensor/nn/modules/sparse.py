"""`Embedding`: a lookup table of learnable rows, as in torch.nn.modules.sparse."""

from __future__ import annotations

import numbers

import numpy as np

from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .utils import check_positive_int, default_float_dtype

__all__ = ["Embedding"]


class Embedding(Module):
    """out[..., :] = weight[input[...]], weight (num_embeddings, embedding_dim) ~ N(0, 1).

    With padding_idx, that row starts at zero and never receives a gradient (torch's semantics). max_norm,
    norm_type and scale_grad_by_freq as F.embedding (max_norm rescales the looked-up rows of weight in place);
    sparse=True is refused (no sparse gradients here).
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx=None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        dtype=None,
        device=None,
    ):
        super().__init__()
        self.num_embeddings = check_positive_int("Embedding", "num_embeddings", num_embeddings)
        self.embedding_dim = check_positive_int("Embedding", "embedding_dim", embedding_dim)
        if padding_idx is not None:
            if isinstance(padding_idx, bool) or not isinstance(padding_idx, numbers.Integral):
                raise TypeError(f"Embedding: padding_idx must be an int or None, got {type(padding_idx).__name__}")
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"Embedding: padding_idx must be within [-{num_embeddings}, {num_embeddings}), got {padding_idx}"
                )
            padding_idx = int(padding_idx) % num_embeddings
        self.padding_idx = padding_idx
        if sparse:
            raise NotImplementedError(
                "Embedding: sparse=True asks for sparse gradients, and minitensor has no sparse tensors; use "
                "sparse=False"
            )
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        dt = default_float_dtype(dtype, "Embedding")
        self.weight = Parameter(np.empty((num_embeddings, embedding_dim), dtype=dt))  # (V, D)
        self.reset_parameters()
        if device is not None:  # drawn on the host, then copied: the same weights on every device
            self.to(device)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight._data[self.padding_idx] = 0
            self.weight.bump_version()

    def forward(self, input):
        return F.embedding(
            input, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse
        )

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        s += f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        s += f", max_norm={self.max_norm}" if self.max_norm is not None else ""
        s += f", norm_type={self.norm_type}" if self.norm_type != 2.0 else ""
        return s + (", scale_grad_by_freq=True" if self.scale_grad_by_freq else "")
