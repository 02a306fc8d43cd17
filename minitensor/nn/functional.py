"""mt.nn.functional: PyTorch's functional API. Each function validates its arguments (clear errors
naming the op, before any work) and calls a primitive of minitensor.ops; the fused primitives
(linear, softmax, log_softmax, layer_norm, cross_entropy, nll_loss, binary_cross_entropy_with_logits,
embedding, dropout, the attention weights) and their derivations live in ops/fused.py and ops/indexing.py;
scaled_dot_product_attention's tiled kernel lives in ops/attention.py. The convolution and pooling functions
(conv1d, conv2d, max_pool1d/2d, avg_pool1d/2d, unfold, fold) are nn/spatial.py's, re-exported here.
"""

from __future__ import annotations

import math

import numpy as np

from .. import fast, ops
from ..autograd import is_grad_enabled
from ..devices import array_module, is_array
from ..dtypes import result_type
from ..functions.elementwise import where
from ..functions.reductions import log_softmax, softmax
from ..random import generator
from ..tensor import Tensor
from .batch_norm import batch_norm
from .padding import pad
from .spatial import __all__ as _spatial_names
from .spatial import avg_pool1d, avg_pool2d, conv1d, conv2d, fold, max_pool1d, max_pool2d, unfold  # noqa: F401

__all__ = [
    "linear",
    "relu",
    "gelu",
    "sigmoid",
    "logsigmoid",
    "tanh",
    "softmax",
    "log_softmax",
    "layer_norm",
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "embedding",
    "dropout",
    "attention_weights",
    "scaled_dot_product_attention",
    "l1_loss",
    "binary_cross_entropy_with_logits",
    "one_hot",
]
__all__ += _spatial_names  # conv, pooling, unfold/fold: nn/spatial.py
__all__ += ["pad", "kl_div"]  # pad: nn/padding.py
__all__ += ["batch_norm"]  # nn/batch_norm.py


def _array_of(x):
    """The array behind a Tensor, an array of any device as it is, anything else (a list) as a host array."""
    return x._data if isinstance(x, Tensor) else x if is_array(x) else np.asarray(x)


# ----------------------------------------------------------------------------- linear


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x W^T + b (one fused node)."""
    if input.shape[-1:] != weight.shape[1:] or weight.ndim != 2:
        raise ValueError(
            f"linear: input of shape {input.shape} does not match weight of shape {weight.shape} "
            f"(expected input (..., {weight.shape[-1] if weight.ndim else '?'}))"
        )
    if bias is not None and bias.shape != weight.shape[:1]:
        raise ValueError(f"linear: bias of shape {bias.shape}, expected ({weight.shape[0]},)")
    dt = input.dtype
    if weight.dtype != dt or (bias is not None and bias.dtype != dt):
        raise TypeError(
            f"linear: input dtype {dt} differs from weight dtype {weight.dtype}"
            f"{'' if bias is None else ' / bias dtype ' + str(bias.dtype)}; convert one explicitly"
        )
    if 0 in weight.shape:  # no input or no output features: the fused node's (-1, features) reshape cannot work
        out = input @ weight.transpose(0, 1)
        return out if bias is None else out + bias
    if bias is None:
        return ops.Linear.apply(input, weight)
    return ops.Linear.apply(input, weight, bias)


# ----------------------------------------------------------------------------- activations


def refuse_inplace(op: str, inplace: bool) -> None:
    """minitensor's functional ops never write into their input: inplace=True is refused, not ignored."""
    if inplace:
        raise ValueError(
            f"{op}: inplace=True is not supported (minitensor ops never write into their input); use inplace=False"
        )


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    refuse_inplace("relu", inplace)
    return ops.Relu.apply(input)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x) (approximate='none', exact erf) or its tanh approximation (approximate='tanh')."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if input.dtype.kind != "f":
        raise TypeError(f"gelu: expected a floating tensor, got {input.dtype}")
    return ops.Gelu.apply(input, approximate=approximate)


def sigmoid(input: Tensor) -> Tensor:
    return input.sigmoid()


def logsigmoid(input: Tensor) -> Tensor:
    """log sigmoid(x), computed stably (min(x, 0) - log1p(e^-|x|)): finite where sigmoid(x) underflows."""
    if input.dtype.kind != "f":
        raise TypeError(f"logsigmoid: expected a floating tensor, got {input.dtype}")
    return ops.LogSigmoid.apply(input)


def tanh(input: Tensor) -> Tensor:
    return input.tanh()


# ----------------------------------------------------------------------------- layer norm
# softmax and log_softmax are torch.softmax / torch.log_softmax, imported from functions/reductions.py.


def layer_norm(
    input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5
) -> Tensor:
    """Normalise over the trailing `normalized_shape` dims, then scale by weight and shift by bias."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if input.shape[input.ndim - len(shape) :] != shape or len(shape) > input.ndim:
        raise ValueError(f"layer_norm: input of shape {input.shape} does not end with normalized_shape {shape}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and p.shape != shape:
            raise ValueError(f"layer_norm: {name} of shape {p.shape}, expected {shape}")
        if p is not None and p.dtype != input.dtype:
            raise TypeError(f"layer_norm: {name} dtype {p.dtype} differs from input dtype {input.dtype}")
    if input.dtype.kind != "f":
        raise TypeError(f"layer_norm: expected a floating input, got {input.dtype}")
    if weight is None and bias is not None:
        raise ValueError("layer_norm: bias without weight is not supported")
    tensors = (input,) + tuple(p for p in (weight, bias) if p is not None)
    return ops.LayerNorm.apply(*tensors, k=len(shape), eps=eps)


# ----------------------------------------------------------------------------- losses


def _check_target(input_shape: tuple, target, op: str, probabilities: bool = False) -> np.ndarray:
    """Class indices: an integer target of the input's shape without the class dim. `probabilities`: the error
    also names the other form cross_entropy takes, class probabilities of the input's shape."""
    t = _array_of(target)
    expected = input_shape[:1] + input_shape[2:] if len(input_shape) > 1 else ()
    if t.dtype.kind in "iu" and t.shape == expected:
        return t
    forms = f"class indices (an integer target of shape {expected})"
    if probabilities:
        forms += f" or class probabilities (a floating target of the input's shape {input_shape})"
    error = TypeError if t.shape == expected else ValueError
    raise error(f"{op}: input of shape {input_shape} expects {forms}, got a {t.dtype} target of shape {t.shape}")


def _check_weight(op: str, weight, C: int) -> None:
    """weight: a Tensor of one rescaling factor per class, shape (C,)."""
    if not isinstance(weight, Tensor):
        raise TypeError(f"{op}: weight must be a Tensor of {C} per-class weights, got {type(weight).__name__}")
    if weight.shape != (C,):
        raise ValueError(f"{op}: weight must hold one entry per class, shape ({C},), got shape {weight.shape}")


def _constant_weight(op: str, weight, input: Tensor) -> tuple:
    """The weight of a class-index loss as an extra input of its node: () for none. PyTorch's rules: it has the
    input's dtype, and it is not differentiated (torch refuses one that requires grad while grad mode is on)."""
    if weight is None:
        return ()
    _check_weight(op, weight, input.shape[0 if input.ndim == 1 else 1])
    if weight.dtype != input.dtype:
        raise TypeError(f"{op}: weight must have the input's dtype {input.dtype}, got {weight.dtype}")
    if weight.requires_grad and is_grad_enabled():
        raise RuntimeError(
            f"{op}: weight requires grad, but {op} with class-index targets is not differentiable with respect "
            f"to weight (as in PyTorch); pass weight.detach()"
        )
    return (weight,)


def _check_class_input(op: str, input) -> None:
    """The input of a class loss: a Tensor with a class dim, (C,), (N, C) or (N, C, d1, ...)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
    if input.ndim == 0:
        raise ValueError(f"{op}: input must have a class dim, shape (C,), (N, C) or (N, C, d1, ...), got shape ()")


def _check_reduction(op: str, reduction: str) -> None:
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _unbatched(loss: Tensor, input: Tensor, reduction: str) -> Tensor:
    """The loss of one unbatched (C,) input: PyTorch's is +0.0 where it is zero (ours -0.0 = -log 1 without this)."""
    return loss + 0.0 if input.ndim == 1 and reduction == "none" else loss


def cross_entropy(
    input: Tensor, target, weight=None, ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0
) -> Tensor:
    """torch.nn.functional.cross_entropy (one fused node): logits (N, C), (C,) or (N, C, d1, ...) against class
    indices (integers, the input's shape without C) or class probabilities (floats, the input's shape), with
    PyTorch's per-class `weight`, `ignore_index` (indices only) and `label_smoothing`."""
    _check_reduction("cross_entropy", reduction)
    _check_class_input("cross_entropy", input)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    if input.dtype.kind != "f":
        raise TypeError(f"cross_entropy: input must be floating (logits), got {input.dtype}")
    if (target.shape if isinstance(target, Tensor) else np.shape(target)) == input.shape:  # PyTorch's rule
        return _cross_entropy_probs(input, target, weight, ignore_index, reduction, label_smoothing)
    t = _check_target(input.shape, target, "cross_entropy", probabilities=True)
    weights = _constant_weight("cross_entropy", weight, input)
    loss = ops.CrossEntropy.apply(
        input,
        Tensor.wrap(t),
        *weights,
        ignore_index=ignore_index,
        reduction=reduction,
        label_smoothing=float(label_smoothing),
    )
    return _unbatched(loss, input, reduction)


def _cross_entropy_probs(input: Tensor, target, weight, ignore_index: int, reduction: str, label_smoothing: float):
    """cross_entropy against class probabilities: the target and the weight are differentiated, as in PyTorch
    (its composite for probabilities records them); mixed dtypes promote as the elementwise ops do."""
    if not isinstance(target, Tensor):  # as torch: an array's dtype would promote the loss unseen
        raise TypeError(f"cross_entropy: class probabilities must be a Tensor, got {type(target).__name__}")
    if target.dtype.kind != "f":
        raise TypeError(
            f"cross_entropy: a target of the input's shape {input.shape} holds class probabilities and must be "
            f"floating, got {target.dtype}"
        )
    if ignore_index >= 0:  # PyTorch: a negative ignore_index (the default -100) is accepted and has no effect
        raise ValueError(
            f"cross_entropy: ignore_index={ignore_index} is not supported with class-probability targets "
            f"(a row is left out by giving it zero probabilities)"
        )
    if weight is not None:
        _check_weight("cross_entropy", weight, input.shape[0 if input.ndim == 1 else 1])
    tensors = (input, target) + (() if weight is None else (weight,))
    dt = result_type(*tensors)
    loss = ops.CrossEntropyProbs.apply(
        *(t if t.dtype == dt else t.to(dt) for t in tensors),
        reduction=reduction,
        label_smoothing=float(label_smoothing),
    )
    return _unbatched(loss, input, reduction)


def nll_loss(input: Tensor, target, weight=None, ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """torch.nn.functional.nll_loss: -w_{t_n} input[n, t_n], from log-probabilities (one fused node)."""
    _check_reduction("nll_loss", reduction)
    _check_class_input("nll_loss", input)
    t = _check_target(input.shape, target, "nll_loss")
    weights = _constant_weight("nll_loss", weight, input)
    loss = ops.NLLLoss.apply(input, Tensor.wrap(t), *weights, ignore_index=ignore_index, reduction=reduction)
    return _unbatched(loss, input, reduction)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    _check_reduction("mse_loss", reduction)
    d = input - target
    sq = d * d
    return sq.mean() if reduction == "mean" else (sq.sum() if reduction == "sum" else sq)


# ----------------------------------------------------------------------------- embedding and dropout


def embedding(
    input,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of `weight` looked up by integer ids; no gradient reaches row padding_idx.

    max_norm: each row looked up whose norm_type-norm exceeds max_norm is first rescaled to that norm, IN PLACE
    in `weight` (as torch: under no_grad, the weight's version bumped). scale_grad_by_freq: each row's gradient is
    divided by how often its id occurs in `input`. sparse=True is refused: minitensor has no sparse gradients."""
    ids = _array_of(input)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"embedding: ids must be an integer tensor, got dtype {ids.dtype}")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape {weight.shape}")
    if sparse:
        raise NotImplementedError(
            "embedding: sparse=True asks for a sparse gradient, and minitensor has no sparse tensors; use sparse=False "
            "(the same values, the gradient as a dense array)"
        )
    n = weight.shape[0]
    out_of_range = (ids < 0) | (ids >= n)
    if ids.size and out_of_range.any():  # one host read (a sync on a device), as torch's device-side assert
        bad = ids[out_of_range].reshape(-1)[0]
        raise IndexError(f"embedding: id {bad} is out of range for an embedding of {n} rows (ids shape {ids.shape})")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += n
    if max_norm is not None:
        _renorm_rows(weight, ids, float(max_norm), float(norm_type))
    return ops.Embedding.apply(weight, Tensor.wrap(ids), padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq)


def _renorm_rows(weight: Tensor, ids, max_norm: float, norm_type: float) -> None:
    """torch.embedding_renorm_: every row of `weight` named in ids whose norm exceeds max_norm is scaled by
    max_norm / (norm + 1e-7), in place and outside the graph (the lookup then reads the rescaled rows)."""
    if not (math.isfinite(max_norm) and max_norm >= 0):
        raise ValueError(f"embedding: max_norm must be a finite number >= 0, got {max_norm}")
    xp = array_module(ids)
    rows = xp.unique(ids.reshape(-1))
    if rows.size == 0:
        return
    w = weight._data
    sub = w[rows]
    if norm_type == math.inf:
        norms = xp.abs(sub).max(axis=-1)
    elif norm_type == 0:
        norms = (sub != 0).sum(axis=-1).astype(sub.dtype)
    else:
        norms = (xp.abs(sub) ** norm_type).sum(axis=-1) ** (1.0 / norm_type)
    over = norms > max_norm
    if bool(over.any()):
        scale = (max_norm / (norms[over] + 1e-7)).astype(w.dtype)
        w[rows[over]] = sub[over] * scale[:, None]
        weight.bump_version()


def keep_mask(shape: tuple, p: float) -> np.ndarray:
    """keep = u >= round(p 2^32), each entry True with probability 1 - p, for u an entry's uniform 32-bit integer
    (p resolved to 2^-32, finer than the 2^-24 of a float32 uniform). u is drawn most significant byte first: every
    entry's top byte, then the 24 low bits of the entries whose top byte ties the threshold's (one in 256); an
    untied entry is decided by its top byte, whatever its low bits (0 here). The formula; fast/dropout.py has its
    device, which compares the bytes without forming u (the same draws, the same mask)."""
    if p == 1.0:  # nothing kept: no draw (as torch, whose p = 1 draws nothing, even under jacfwd's error mode)
        return np.zeros(shape, dtype=bool)
    t = round(p * 2**32)
    gen = generator("dropout")
    u = random_bytes(gen, math.prod(shape)).astype(np.uint32) << 24
    tied = np.flatnonzero(u >> 24 == t >> 24)
    u[tied] |= random_bytes(gen, 4 * tied.size).view(np.uint32) & 0xFFFFFF
    return (u >= t).reshape(shape)  # (t may be 2^32, beyond every u: p within 2^-33 of 1 keeps nothing)


fast.formula("dropout_keep_mask", keep_mask)


def random_bytes(gen: np.random.Generator, n: int) -> np.ndarray:
    """n uniform random bytes (uint8) from ceil(n / 8) 64-bit draws of the generator."""
    return gen.bit_generator.random_raw((n + 7) // 8).view(np.uint8)[:n]


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, mask=None) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p) (identity when not training).

    Extension, flagged: `mask`, a boolean keep-mask of input's shape, replaces the random draw so that
    the parity checks can drive minitensor and PyTorch with identical masks."""
    refuse_inplace("dropout", inplace)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return input
    xp = array_module(input._data)
    if mask is None:
        # drawn on the host, then copied: one mask on every device
        keep = xp.asarray(fast.use.dropout_keep_mask(input.shape, p))
    else:
        keep = mask._data if isinstance(mask, Tensor) else xp.asarray(mask)
        if keep.shape != input.shape or keep.dtype != np.bool_:
            raise ValueError(
                f"dropout: mask must be a bool array of the input's shape {input.shape}, got {keep.dtype} {keep.shape}"
            )
    dt = input.dtype.type
    scale = dt(0) if p == 1.0 else dt(1.0 / (1.0 - p))
    return ops.Dropout.apply(input, Tensor.wrap(keep), scale=scale)


# ----------------------------------------------------------------------------- attention


def attention_weights(q: Tensor, k: Tensor, mask=None, scale: float | None = None) -> Tensor:
    """softmax(q k^T * scale) over the keys where the bool `mask` is True (one fused node), or
    softmax(q k^T * scale + mask) for a float `mask` (an additive bias, differentiated when it requires grad).

    Extension, flagged (torch has no such function; its scaled_dot_product_attention returns the
    product with v): q (..., T_q, Dh), k (..., T_k, Dh); mask broadcastable to (..., T_q, T_k);
    scale defaults to 1 / sqrt(Dh). A query row whose mask is all False (or all -inf) gets zero weights
    and zero gradients, where masked_fill(-inf) -> softmax gives NaN."""
    if q.ndim < 2 or k.ndim < 2 or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"attention_weights: expected q (..., T_q, Dh) and k (..., T_k, Dh), got shapes {q.shape} and {k.shape}"
        )
    if q.dtype != k.dtype or q.dtype.kind != "f":
        raise TypeError(
            f"attention_weights: q and k must be floating tensors of one dtype, got {q.dtype} and {k.dtype}"
        )
    keep = None
    if mask is not None:
        keep = _array_of(mask)
        scores = np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], k.shape[-2])
        if keep.dtype != np.bool_ and keep.dtype != q.dtype:
            raise TypeError(
                f"attention_weights: mask must be bool (True = may attend) or of q's dtype, got {keep.dtype}"
            )
        try:
            ok = np.broadcast_shapes(keep.shape, scores) == scores
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"attention_weights: mask of shape {keep.shape} does not broadcast to the scores' shape {scores}"
            )
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if keep is not None and keep.dtype != np.bool_:
        return _biased_attention_weights(q, k, mask if isinstance(mask, Tensor) else q.wrap(keep), scale)
    return ops.AttentionWeights.apply(q, k, keep=keep, scale=scale)


def _biased_attention_weights(q: Tensor, k: Tensor, bias: Tensor, scale: float) -> Tensor:
    """softmax(q k^T * scale + bias) as a composite of the engine's primitives, so that the bias is differentiated
    (every order, both modes); a row whose bias is all -inf gets zero weights (its scores set to 0 first, so that
    neither its softmax nor its gradient is NaN)."""
    has_key = q.wrap((_array_of(bias) > -np.inf).any(axis=-1, keepdims=True))  # (..., T_q, 1), a constant
    scores = (q * scale) @ k.transpose(-2, -1) + bias
    weights = softmax(where(has_key, scores, 0.0), dim=-1)
    return where(has_key, weights, 0.0)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask=None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
) -> Tensor:
    """softmax(query key^T * scale + mask) value, as torch's: one tiled primitive (ops.ScaledDotProductAttention,
    FlashAttention-2) that never holds the (T_q, T_k) scores, forward or backward.

    query (..., T_q, E), key (..., T_k, E), value (..., T_k, Ev), batch dimensions broadcasting. attn_mask: bool
    (True = takes part) or of query's dtype (added), broadcastable to (..., T_q, T_k); is_causal: query i sees keys
    j <= i. A query row with no key gets a zero output and zero gradients (torch 2.13 on CPU gives the same).
    Dropout (applied whenever dropout_p > 0, as torch's) uses a counter-based mask seeded by one draw of the
    engine's generator, so torch's numbers are matched only at dropout_p = 0.
    A float attn_mask (a learned additive bias: relative positions, ALiBi slopes) is differentiated as in torch,
    in reverse and forward mode; its gradient costs one (..., T_q, T_k) array.
    Deviations, flagged: dropout_p = 1 is refused (torch returns zeros); the kernel is differentiable once only
    (create_graph raises); no enable_gqa."""
    op = "scaled_dot_product_attention"
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
        if t.ndim < 2:
            raise ValueError(f"{op}: {name} must have at least 2 dimensions (..., T, E), got shape {t.shape}")
    if not (query.dtype == key.dtype == value.dtype) or query.dtype.kind != "f":
        raise TypeError(
            f"{op}: query, key, value must be floating tensors of one dtype, "
            f"got {query.dtype}, {key.dtype}, {value.dtype}"
        )
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"{op}: expected query (..., T_q, E), key (..., T_k, E), value (..., T_k, Ev), got shapes "
            f"{query.shape}, {key.shape}, {value.shape}"
        )
    try:
        batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except ValueError:
        raise ValueError(
            f"{op}: the batch dimensions of query {query.shape}, key {key.shape} and value {value.shape} "
            "do not broadcast"
        ) from None
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)) or not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"{op}: dropout_p must be in [0, 1), got {dropout_p!r}")  # torch also takes 1: flagged
    mask = bias = None
    if attn_mask is not None:
        if is_causal:
            raise ValueError(f"{op}: give attn_mask or is_causal=True, not both (as torch)")
        mask = _array_of(attn_mask)
        if mask.dtype != np.bool_ and mask.dtype != query.dtype:
            raise TypeError(f"{op}: attn_mask must be bool or of query's dtype {query.dtype}, got {mask.dtype}")
        scores = batch + (query.shape[-2], key.shape[-2])
        if not _broadcasts_to(mask.shape, scores):
            raise ValueError(f"{op}: attn_mask of shape {mask.shape} does not broadcast to the scores' shape {scores}")
        if mask.dtype != np.bool_:  # an additive bias: an input of the kernel, differentiated when it requires grad
            bias, mask = (attn_mask if isinstance(attn_mask, Tensor) else query.wrap(mask)), None
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    seed = int(generator(op).bit_generator.random_raw()) if dropout_p > 0 else 0  # one draw: the dropout counters' key
    inputs = (query, key, value) if bias is None else (query, key, value, bias)
    return ops.ScaledDotProductAttention.apply(
        *inputs, mask=mask, is_causal=bool(is_causal), scale=scale, dropout_p=float(dropout_p), seed=seed
    )


# ============================================================================= names a PyTorch user reaches for
# l1_loss, binary_cross_entropy_with_logits and one_hot, appended. l1_loss and one_hot are exact composites
# of the primitives above; binary_cross_entropy_with_logits wraps the fused ops.BCEWithLogits.


def _reduced(loss: Tensor, reduction: str) -> Tensor:
    return loss.mean() if reduction == "mean" else (loss.sum() if reduction == "sum" else loss)


def _check_pair(op: str, input: Tensor, target: Tensor) -> None:
    """Elementwise losses compare input and target entry by entry: same shape, floating dtypes.
    Deviation, flagged: torch's l1_loss broadcasts different shapes with a warning; here it is an error."""
    for name, x in (("input", input), ("target", target)):
        if not isinstance(x, Tensor):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
        if x.dtype.kind != "f":
            raise TypeError(f"{op}: {name} must be floating, got {x.dtype}")
    if input.shape != target.shape:
        raise ValueError(f"{op}: target of shape {target.shape} differs from input of shape {input.shape}")


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """|input - target|, averaged or summed (the gradient at a tie is 0, as in PyTorch)."""
    _check_reduction("l1_loss", reduction)
    _check_pair("l1_loss", input, target)
    return _reduced((input - target).abs(), reduction)


def kl_div(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False
) -> Tensor:
    """The Kullback-Leibler divergence of input (log-probabilities) from target (probabilities, or log-probabilities
    with log_target): target * (log(target) - input) per entry, 0 where target is 0 (torch's xlogy); reduced by
    'mean' (over every entry, as torch's), 'batchmean' (the sum over the first dim's size: the true KL), 'sum' or
    'none'. The legacy size_average and reduce are refused: reduction says it."""
    if size_average is not None or reduce is not None:
        raise ValueError("kl_div: size_average and reduce are deprecated in torch; use reduction= instead")
    if reduction not in ("mean", "batchmean", "sum", "none"):
        raise ValueError(f"kl_div: reduction must be 'mean', 'batchmean', 'sum' or 'none', got {reduction!r}")
    _check_pair("kl_div", input, target)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        positive = target > 0  # the safe form of xlogy: log is taken of 1 where target is 0
        loss = where(positive, target * where(positive, target, 1.0).log(), 0.0) - target * input
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return _reduced(loss, reduction)


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """-(pos_weight * y * log sigmoid(x) + (1 - y) * log sigmoid(-x)) * weight, from logits x (one fused node,
    ops.BCEWithLogits, then the weight and the reduction).

    Extension, flagged: weight and pos_weight may require grad (PyTorch refuses a gradient for either)."""
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    _check_pair("binary_cross_entropy_with_logits", input, target)
    for name, w, shape in (("weight", weight, input.shape), ("pos_weight", pos_weight, input.shape[-1:])):
        if w is not None and not (isinstance(w, Tensor) and _broadcasts_to(w.shape, shape)):
            raise ValueError(
                f"binary_cross_entropy_with_logits: {name} must be a Tensor that broadcasts to "
                f"{shape}, got {getattr(w, 'shape', type(w).__name__)}"
            )
    # Deviation from PyTorch, kept on purpose (ops.BCEWithLogits): at an infinite logit the loss is the limit
    # (+inf at -inf with a target > 0, 0 where the target switches the infinite term off); PyTorch gives NaN there.
    tensors = (input, target) + (() if pos_weight is None else (pos_weight,))
    dt = result_type(*tensors)  # mixed dtypes promote as the elementwise ops do
    loss = ops.BCEWithLogits.apply(*(t if t.dtype == dt else t.to(dt) for t in tensors))
    return _reduced(loss if weight is None else loss * weight, reduction)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 tensor of shape tensor.shape + (num_classes,), 1 at each class index (num_classes=-1: max + 1)."""
    ids = tensor._data if isinstance(tensor, Tensor) else None
    if ids is None or ids.dtype.kind not in "iu":
        what = type(tensor).__name__ if ids is None else f"dtype {ids.dtype}"
        raise TypeError(f"one_hot: expected an integer tensor of class indices, got {what}")
    if num_classes == -1:
        if ids.size == 0:
            raise ValueError("one_hot: cannot infer num_classes from an empty tensor; pass num_classes")
        num_classes = int(ids.max()) + 1
    if not isinstance(num_classes, (int, np.integer)) or num_classes < 1:
        raise ValueError(f"one_hot: num_classes must be a positive integer or -1, got {num_classes!r}")
    if ids.size and bool((ids.min() < 0) | (ids.max() >= num_classes)):  # one host read on a device
        bad = ids[(ids < 0) | (ids >= num_classes)].reshape(-1)[0]
        raise ValueError(f"one_hot: class index {bad} is out of range for num_classes={num_classes}")
    return Tensor.wrap((ids[..., None] == array_module(ids).arange(num_classes)).astype(np.int64))  # ids' device


# ============================================================================= the decoder-only models' pieces
# rms_norm and rotary_embedding wrap the hand-derived primitives of ops/rms_norm.py and ops/rotary.py; silu is the
# composite x * sigmoid(x) (SwiGLU's gate), exact in every order through Sigmoid's own rules.
__all__ += ["rms_norm", "rotary_embedding", "silu"]


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the trailing `normalized_shape` dims; eps=None takes the dtype's
    machine epsilon, as torch.nn.functional.rms_norm does."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not isinstance(input, Tensor) or input.dtype.kind != "f":
        raise TypeError(f"rms_norm: expected a floating Tensor, got {getattr(input, 'dtype', type(input).__name__)}")
    if len(shape) == 0 or len(shape) > input.ndim or input.shape[input.ndim - len(shape) :] != shape:
        raise ValueError(f"rms_norm: input of shape {input.shape} does not end with normalized_shape {shape}")
    if weight is not None and weight.shape != shape:
        raise ValueError(f"rms_norm: weight of shape {weight.shape}, expected {shape}")
    if weight is not None and weight.dtype != input.dtype:
        raise TypeError(f"rms_norm: weight dtype {weight.dtype} differs from input dtype {input.dtype}")
    eps = float(np.finfo(input.dtype).eps) if eps is None else eps
    # any finite eps, as torch (its own tests pass -0.5: rows with mean(x^2) < 0.5 then give NaN, as torch's do)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps):
        raise ValueError(f"rms_norm: eps must be a finite number, got {eps!r}")
    tensors = (input,) if weight is None else (input, weight)
    return ops.RMSNorm.apply(*tensors, k=len(shape), eps=float(eps))


def rotary_embedding(input: Tensor, cos, sin) -> Tensor:
    """input * cos + rotate_half(input) * sin, rotate_half(x) = cat(-x2, x1) over the last dim's halves (Hugging
    Face Llama's layout). cos, sin: the angle tables (constants, no gradient), broadcastable to input's shape with
    its last dim. torch has no such function; transformers spells it apply_rotary_pos_emb."""
    if not isinstance(input, Tensor) or input.dtype.kind != "f":
        raise TypeError(
            f"rotary_embedding: expected a floating Tensor, got {getattr(input, 'dtype', type(input).__name__)}"
        )
    if input.ndim < 1 or input.shape[-1] % 2:
        raise ValueError(f"rotary_embedding: the last dim must be even (pairs to rotate), got shape {input.shape}")
    tables = []
    for name, table in (("cos", cos), ("sin", sin)):
        if isinstance(table, Tensor) and table.requires_grad:
            raise ValueError(f"rotary_embedding: {name} is a constant table; a gradient for it is not computed")
        arr = _array_of(table) if isinstance(table, Tensor) else table
        if not is_array(arr) or arr.dtype.kind != "f":
            raise TypeError(f"rotary_embedding: {name} must be a floating array or Tensor, got {type(table).__name__}")
        if arr.shape[-1:] != input.shape[-1:] or not _broadcasts_to(arr.shape, input.shape):
            raise ValueError(
                f"rotary_embedding: {name} of shape {arr.shape} does not broadcast to the input's shape {input.shape}"
            )
        tables.append(array_module(input._data).asarray(arr))  # constants, put on the input's device
    return ops.RotaryEmbedding.apply(input, cos=tables[0], sin=tables[1])


def silu(input: Tensor) -> Tensor:
    """x * sigmoid(x) (the swish with beta 1)."""
    if not isinstance(input, Tensor) or input.dtype.kind != "f":
        raise TypeError(f"silu: expected a floating Tensor, got {getattr(input, 'dtype', type(input).__name__)}")
    return input * ops.Sigmoid.apply(input)
