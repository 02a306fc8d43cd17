"""Every differentiable primitive of minitensor: its forward and its vector-Jacobian product side by side.

Conventions inside a backward: `g` is the incoming gradient (the shape of the op's output);
`ctx.saved_arrays` holds the input or output arrays the forward saved with `save_for_backward`, and
`ctx.<name>` an array the forward made and kept with `ctx.save(name=...)` (a mask, row statistics): every
array a backward reads is kept one of these two ways, where saved-tensor hooks see it (docs/memory.md).
Gradients are returned in the output's broadcast shape: the graph walk (autograd.unbroadcast) sums
them back to each input's shape, so no formula deals with broadcasting. `ctx.needs_input_grad[i]`
lets a backward skip work for inputs that do not need a gradient (a mask, a constant). No backward
writes into `g` or into a saved array.

    elementwise.py   the arithmetic and elementwise primitives (Add, Exp, Relu, Cast, ...)
    selection.py     the elementwise ones that select between inputs: Clamp, Maximum, Minimum, Where, MaskedFill
    matmul.py        MatMul
    reductions.py    Sum, Mean, Var, Std, the max/min family, LogSumExp, the norms (Norm, NormInf, PNorm, and
                     SVDVals with SingularVectors for the nuclear norm)
    scan.py          CumSum, CumProd
    shape.py         reshape, transpose, permute, expand, repeat, cat, stack, tril/triu
    indexing.py      GetItem and its scatter-add IndexPut, Embedding
    fused.py         the fused ones: Linear, Softmax, LogSoftmax, Dropout, AttentionWeights
    layer_norm.py    LayerNorm, fused too, with its in-place speed devices
    batch_norm.py    BatchNorm: the normalisation by the batch's statistics, LayerNorm's formulas per channel
    losses.py        the fused losses: CrossEntropy, CrossEntropyProbs, NLLLoss, BCEWithLogits
    attention.py     ScaledDotProductAttention: FlashAttention-2's tiled attention in O(T) memory
    convolution.py   Conv (conv1d, conv2d) on im2col, and its linear pair Unfold, Fold
    pooling.py       MaxPool (argmax routing), AvgPool
    recurrent.py     LSTMLayer: an LSTM layer's whole time loop, backpropagation through time derived by hand
    rms_norm.py      RMSNorm, fused, derived by hand
    rotary.py        RotaryEmbedding: the rotary position embedding (rotate-half layout), a rotation
    device.py        ToDevice: a copy to another device (Tensor.to, .cuda(), .cpu())
    special.py       erf (array helpers for Erf and Gelu, no primitive)
    namespace.py     ARRAYS and TENSORS, the two namespaces (`ctx.xp`) every backward above is written against

This package exports every Function subclass its modules define (PRIMITIVES, derived below), so a new
primitive is its class in one of them and nothing here; `ops.Add` is ops/elementwise.py's Add.
"""

from ..autograd import Function, register_namespaces
from . import (
    attention,
    batch_norm,
    convolution,
    device,
    elementwise,
    fused,
    indexing,
    layer_norm,
    losses,
    matmul,
    pooling,
    recurrent,
    reductions,
    rms_norm,
    rotary,
    scan,
    selection,
    shape,
)
from .namespace import ARRAYS, TENSORS


def defined_primitives(*modules) -> dict:
    """name -> class, for every public Function subclass that one of `modules` defines (not imports)."""
    return {
        name: obj
        for module in modules
        for name, obj in vars(module).items()
        if isinstance(obj, type)
        and issubclass(obj, Function)
        and obj.__module__ == module.__name__
        and not name.startswith("_")
    }


PRIMITIVES = defined_primitives(
    elementwise, selection, matmul, reductions, shape, indexing, fused, layer_norm, losses, attention, device
)
PRIMITIVES.update(defined_primitives(convolution, pooling, recurrent, rms_norm, rotary, scan, batch_norm))
globals().update(PRIMITIVES)  # ops.Add, ops.Exp, ...: each primitive under its class name
__all__ = sorted(PRIMITIVES)

register_namespaces(ARRAYS, TENSORS)
