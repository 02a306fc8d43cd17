"""The op table: one line per op case, and the closures that run a case on minitensor or PyTorch.

Each case is one line: a name, a size class ('small': a few hundred elements, where per-op
Python overhead dominates; 'large': the shapes the base Transformer feeds the op), its input
shapes, and one function written once for both libraries (same names: `F.linear`, `x.sum(dim)`).
Inputs come from the same seeded NumPy arrays on both sides; backward uses a random upstream
gradient (never all-ones). Both the timing workers (benchmarks/worker.py) and the op
microbenchmark's parent (benchmarks/ops.py) read this table.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import minitensor
import minitensor.nn.functional as mt_functional
from benchmarks.bare_layers import BARE_LAYERS
from benchmarks.bare_ops import BARE, bare_runner
from transformer_np.model import scaled_dot_product_attention as np_scaled_dot_product_attention


@dataclass(frozen=True)
class Index:
    """An int64 input of `shape` with values in [0, high) (no gradient)."""

    shape: tuple
    high: int


@dataclass(frozen=True)
class Mask:
    """A bool input of `shape`, True = keep; row 0 all True (no gradient)."""

    shape: tuple


@dataclass(frozen=True)
class Weight:
    """A float input of `shape` (requires grad) drawn as standard normal times `scale`: a layer's weights at the
    size of torch's initialisation, so that its gates and activations are not saturated."""

    shape: tuple
    scale: float


@dataclass(frozen=True)
class OpCase:
    name: str
    size: str  # 'small', 'large' or 'layer' (benchmarks/layer_floor.py's, not in the op table)
    inputs: tuple  # float shapes or Weight (require grad), Index or Mask
    fn: Callable  # fn(L, F, *inputs) with L = minitensor or torch, F = its functional


def _attention(L, F, q, k, v, mask):
    """softmax(q k^T / sqrt(Dh) masked) v: the attention core, as both models write it."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, T)
    scores = scores.masked_fill(~mask, -1e9)
    return F.softmax(scores, dim=-1) @ v  # (B, H, T, Dh)


def _model_attention(L, F, q, k, v, mask):
    """Each model's own scaled_dot_product_attention (transformer_np's is a fused primitive)."""
    if L.__name__ == "torch":
        # torch side only: the numpy worker never imports torch (parity.model does)
        from parity.model import scaled_dot_product_attention

        return scaled_dot_product_attention(q, k, v, mask)[0]
    return np_scaled_dot_product_attention(q, k, v, mask)[0]


def _heads(x, B, T, H, Dh):
    """(B, T, D) -> (B*H, T, Dh): the split-heads copy every attention layer makes (a real copy on both sides)."""
    return x.reshape(B, T, H, Dh).transpose(1, 2).reshape(B * H, T, Dh)


def _lstm(L, F, x, *weights):
    """nn.LSTM(256, 256, num_layers=2) of the library on x (T, N, 256) with these weights (torch.func's
    functional_call, the same on both sides): the output (T, N, 256)."""
    if L.__name__ not in _LSTMS:
        _LSTMS[L.__name__] = L.nn.LSTM(256, 256, num_layers=2)
    module = _LSTMS[L.__name__]
    names = [name for name, _ in module.named_parameters()]
    return L.func.functional_call(module, dict(zip(names, weights)), (x,))[0]


_LSTMS: dict = {}  # library name -> its nn.LSTM, built once: the weights are the case's inputs
_LSTM_LAYER = tuple(Weight(shape, 1 / 16) for shape in ((1024, 256), (1024, 256), (1024,), (1024,)))

# Large shapes are the base model's: B 16, T 32, D 512, H 8, Dh 64, d_ff 2048, V 10000.
CASES: list[OpCase] = [
    OpCase("matmul", "small", ((8, 16), (16, 8)), lambda L, F, a, b: a @ b),
    OpCase("matmul", "large", ((16, 8, 32, 64), (16, 8, 64, 32)), lambda L, F, a, b: a @ b),
    OpCase("linear", "small", ((4, 8, 32), (32, 32), (32,)), lambda L, F, x, w, b: F.linear(x, w, b)),
    OpCase("linear", "large", ((16, 32, 512), (2048, 512), (2048,)), lambda L, F, x, w, b: F.linear(x, w, b)),
    OpCase("softmax", "small", ((4, 16),), lambda L, F, x: F.softmax(x, dim=-1)),
    OpCase("softmax", "large", ((16, 8, 32, 32),), lambda L, F, x: F.softmax(x, dim=-1)),
    OpCase("log_softmax", "small", ((4, 16),), lambda L, F, x: F.log_softmax(x, dim=-1)),
    OpCase("log_softmax", "large", ((512, 10000),), lambda L, F, x: F.log_softmax(x, dim=-1)),
    OpCase("layer_norm", "small", ((4, 8, 32), (32,), (32,)), lambda L, F, x, w, b: F.layer_norm(x, (32,), w, b)),
    OpCase("layer_norm", "large", ((16, 32, 512), (512,), (512,)), lambda L, F, x, w, b: F.layer_norm(x, (512,), w, b)),
    OpCase(
        "cross_entropy",
        "small",
        ((16, 20), Index((16,), 20)),
        lambda L, F, x, t: F.cross_entropy(x, t, ignore_index=0, label_smoothing=0.1),
    ),
    OpCase(
        "cross_entropy",
        "large",
        ((512, 10000), Index((512,), 10000)),
        lambda L, F, x, t: F.cross_entropy(x, t, ignore_index=0, label_smoothing=0.1),
    ),
    OpCase("gelu", "small", ((4, 32),), lambda L, F, x: F.gelu(x)),
    OpCase("gelu", "large", ((16, 32, 2048),), lambda L, F, x: F.gelu(x)),
    OpCase("gelu (tanh)", "small", ((4, 32),), lambda L, F, x: F.gelu(x, approximate="tanh")),
    OpCase("gelu (tanh)", "large", ((16, 32, 2048),), lambda L, F, x: F.gelu(x, approximate="tanh")),
    OpCase("relu", "small", ((4, 32),), lambda L, F, x: F.relu(x)),
    OpCase("relu", "large", ((16, 32, 2048),), lambda L, F, x: F.relu(x)),
    OpCase("add (broadcast)", "small", ((4, 8), (8,)), lambda L, F, a, b: a + b),
    OpCase("add (broadcast)", "large", ((16, 32, 512), (512,)), lambda L, F, a, b: a + b),
    OpCase("sum", "small", ((4, 8),), lambda L, F, x: x.sum(dim=-1)),
    OpCase("sum", "large", ((16, 32, 512),), lambda L, F, x: x.sum(dim=-1)),
    OpCase("transpose/reshape", "small", ((2, 4, 8),), lambda L, F, x: _heads(x, 2, 4, 2, 4)),
    OpCase("transpose/reshape", "large", ((16, 32, 512),), lambda L, F, x: _heads(x, 16, 32, 8, 64)),
    OpCase("getitem (slice)", "small", ((4, 8),), lambda L, F, x: x[:, 1:5]),
    OpCase("getitem (slice)", "large", ((16, 32, 512),), lambda L, F, x: x[:, 1:, :256]),
    OpCase("embedding", "small", (Index((4, 8), 20), (20, 32)), lambda L, F, i, w: F.embedding(i, w)),
    OpCase("embedding", "large", (Index((16, 32), 10000), (10000, 512)), lambda L, F, i, w: F.embedding(i, w)),
    OpCase("attention (composite)", "small", ((2, 2, 4, 8),) * 3 + (Mask((2, 1, 4, 4)),), _attention),
    OpCase("attention (composite)", "large", ((16, 8, 32, 64),) * 3 + (Mask((16, 1, 32, 32)),), _attention),
    OpCase("attention (model's)", "small", ((2, 2, 4, 8),) * 3 + (Mask((2, 1, 4, 4)),), _model_attention),
    OpCase("attention (model's)", "large", ((16, 8, 32, 64),) * 3 + (Mask((16, 1, 32, 32)),), _model_attention),
    # the layers of benchmarks/layer_floor.py: LSTM 2 layers, hidden 256, sequence 64, batch 32; Conv2d(32, 32, 3,
    # padding=1) on (64, 32, 28, 28). Weights at torch's initial scale (1 / sqrt(fan-in) order).
    OpCase("lstm", "layer", ((64, 32, 256), *_LSTM_LAYER, *_LSTM_LAYER), _lstm),
    OpCase(
        "conv2d",
        "layer",
        ((64, 32, 28, 28), Weight((32, 32, 3, 3), 1 / 17), Weight((32,), 1 / 17)),
        lambda L, F, x, w, b: F.conv2d(x, w, b, padding=1),
    ),
]


def _arrays(case: OpCase, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for spec in case.inputs:
        if isinstance(spec, Index):
            out.append(rng.integers(0, spec.high, spec.shape).astype(np.int64))
        elif isinstance(spec, Mask):
            m = rng.random(spec.shape) < 0.8
            m[0] = True  # row 0 fully visible so no row is ever empty by chance alone
            out.append(m)
        elif isinstance(spec, Weight):
            out.append((rng.standard_normal(spec.shape) * spec.scale).astype(np.float32))
        else:
            out.append(rng.standard_normal(spec).astype(np.float32))
    return out


def _make_runner(lib: str, case: OpCase, arrays: list[np.ndarray], upstream: np.ndarray | None):
    """(forward, forward+backward, forward output as NumPy) closures for one library."""
    if lib == "numpy":
        L, F = minitensor, mt_functional
        wrap = L.tensor
    else:
        import torch as L
        import torch.nn.functional as F

        wrap = torch_from_numpy
    leaves = []
    inputs = []
    for spec, arr in zip(case.inputs, arrays):
        if isinstance(spec, (Index, Mask)):
            inputs.append(wrap(arr))
        else:
            t = wrap(arr.copy())
            t.requires_grad_(True)
            leaves.append(t)
            inputs.append(t)
    g = None if upstream is None else wrap(upstream)

    def forward():
        with L.no_grad():
            return case.fn(L, F, *inputs)

    def fwd_bwd():
        for t in leaves:
            t.grad = None  # fresh gradients each call: no accumulation add on either side
        out = case.fn(L, F, *inputs)
        out.backward(g)
        return out

    def value():
        out = forward()
        return np.array(out.detach().numpy() if lib == "torch" else out.numpy())

    return forward, fwd_bwd, value


def torch_from_numpy(a: np.ndarray):
    import torch

    # not np.ascontiguousarray: it turns a 0-d upstream gradient into shape (1,)
    return torch.from_numpy(a if a.flags.c_contiguous else a.copy())


def case_runner(lib: str, index: int):
    """(forward, forward+backward, forward output as NumPy) of CASES[index] for 'numpy', 'torch' or 'bare' (the fused
    ops and the layers only: benchmarks/bare_ops.py, benchmarks/bare_layers.py).

    Inputs and the random upstream gradient come from a generator seeded by the case's index, so
    the two sides, each in its own process, draw the very same arrays.
    """
    case = CASES[index]
    rng = np.random.default_rng(1000 + index)
    arrays = _arrays(case, rng)
    out = _make_runner("numpy" if lib == "bare" else lib, case, arrays, None)[2]()
    # A random upstream gradient of the output's shape (a 0-d array for scalar losses).
    upstream = np.asarray(rng.standard_normal(out.shape), dtype=np.float32)
    if lib == "bare":  # the same op on bare arrays (benchmarks/bare_ops.py, bare_layers.py), the same inputs
        return bare_runner(case.name, arrays, upstream, BARE_LAYERS if case.size == "layer" else BARE)
    return _make_runner(lib, case, arrays, upstream)


def selected_cases(sizes, names=None) -> list[int]:
    """Indices into CASES of the chosen size classes (and op names, when given)."""
    return [i for i, c in enumerate(CASES) if c.size in sizes and (not names or c.name in names)]
