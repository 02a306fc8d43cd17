"""RNN, LSTM and GRU (and their one-step cells), as torch.nn.modules.rnn: torch's parameter names, shapes, gate
order and initialisation, so that state_dicts move between the two unchanged.

Each layer and direction holds weight_ih_l{k}{_reverse} (G H, input), weight_hh_l{k}{_reverse} (G H, H) and the
biases bias_ih_l{k}{_reverse}, bias_hh_l{k}{_reverse} (G H,), G = 1 (RNN), 4 (LSTM: gates i, f, g, o), 3 (GRU: r,
z, n). One step, with a_x = x W_ih^T + b_ih and a_h = h W_hh^T + b_hh:

    RNN   h' = tanh(a_x + a_h)  (or relu)
    LSTM  i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of the four slices of a_x + a_h;
          c' = f c + i g,  h' = o tanh(c')
    GRU   r, z = sigmoid of the first two slices of a_x + a_h;  n = tanh(a_x[n] + r a_h[n]);  h' = (1 - z) n + z h

Each layer and direction runs as the input projection of every step (one linear) and one fused node for the time
loop (ops/recurrent.py: LSTMLayer, GRULayer, RNNLayer), whose backward through time is derived by hand
(docs/backprop.md, "Recurrent layers") and writes each step's gradient once; as a composite of per-step primitives,
each step's slice of the projection would write a gradient of the projection's full size (a backward quadratic in
the length). The cells (RNNCell, LSTMCell, GRUCell) are one step: composites of rnn_step, lstm_step, gru_step.
Between layers, dropout while training (not after the last). Not supported, each refused by name: PackedSequence
inputs, LSTM's proj_size.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ...creation import zeros
from ...functions.shape import cat, stack
from ...ops.recurrent import GRULayer, LSTMLayer, RNNLayer
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .utils import check_positive_int, default_float_dtype

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNCell"]


# ----------------------------------------------------------------------------- one step of each cell


def rnn_step(x_proj, h, w_hh, b_hh, nonlinearity: str):
    """h' = act(a_x + h W_hh^T + b_hh), a_x = x W_ih^T + b_ih computed by the caller."""
    a = x_proj + F.linear(h, w_hh, b_hh)
    return a.tanh() if nonlinearity == "tanh" else F.relu(a)


def lstm_step(x_proj, state, w_hh, b_hh):
    """(h', c') from (h, c): gates i, f, g, o, c' = f c + i g, h' = o tanh(c')."""
    h, c = state
    a = x_proj + F.linear(h, w_hh, b_hh)  # (N, 4H)
    H = h.shape[-1]
    i, f, g, o = (
        a[..., :H].sigmoid(),
        a[..., H : 2 * H].sigmoid(),
        a[..., 2 * H : 3 * H].tanh(),
        a[..., 3 * H :].sigmoid(),
    )
    c = f * c + i * g
    return o * c.tanh(), c


def gru_step(x_proj, h, w_hh, b_hh):
    """h' = (1 - z) n + z h with r, z = sigmoid(a_x + a_h) and n = tanh(a_x[n] + r a_h[n])."""
    a_h = F.linear(h, w_hh, b_hh)  # (N, 3H): the hidden projection, kept apart for the r * a_h[n] term
    H = h.shape[-1]
    r = (x_proj[..., :H] + a_h[..., :H]).sigmoid()
    z = (x_proj[..., H : 2 * H] + a_h[..., H : 2 * H]).sigmoid()
    n = (x_proj[..., 2 * H :] + r * a_h[..., 2 * H :]).tanh()
    return n + z * (h - n)  # = (1 - z) n + z h


# ----------------------------------------------------------------------------- the multi-layer modules


class RNNBase(Module):
    """The stack of layers (and directions) that RNN, LSTM and GRU share; `mode` names the cell."""

    gates = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        name = type(self).__name__
        self.mode = mode
        self.input_size = check_positive_int(name, "input_size", input_size)
        self.hidden_size = check_positive_int(name, "hidden_size", hidden_size)
        self.num_layers = check_positive_int(name, "num_layers", num_layers)
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) or not 0 <= dropout <= 1:
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of an element being zeroed"
            )
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                f"dropout option adds dropout after all but last recurrent layer, so non-zero dropout expects "
                f"num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                stacklevel=3,
            )
        if proj_size != 0:
            raise ValueError(f"{name}: proj_size={proj_size} is not supported (only proj_size=0)")
        self.bias, self.batch_first, self.dropout = bool(bias), bool(batch_first), float(dropout)
        self.bidirectional, self.proj_size = bool(bidirectional), 0
        dt = default_float_dtype(dtype, name)
        G = self.gates[mode] * hidden_size
        D = 2 if bidirectional else 1
        self._flat_weights_names = []
        for layer in range(num_layers):
            width = input_size if layer == 0 else hidden_size * D
            for suffix in ("", "_reverse")[:D]:
                shapes = {"weight_ih": (G, width), "weight_hh": (G, hidden_size)}
                if bias:
                    shapes.update(bias_ih=(G,), bias_hh=(G,))
                for kind, shape in shapes.items():
                    pname = f"{kind}_l{layer}{suffix}"
                    setattr(self, pname, Parameter(np.empty(shape, dtype=dt)))
                    self._flat_weights_names.append(pname)
        self.reset_parameters()
        if device is not None:
            self.to(device)

    def reset_parameters(self) -> None:
        """torch's: every weight and bias ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def flatten_parameters(self) -> None:
        """torch's cuDNN weight-layout call: nothing to do here."""

    def _initial_state(self, hx, x, D: int):
        """The initial state(s), (L D, N, H) each, checked: zeros when hx is None."""
        name, shape = type(self).__name__, (self.num_layers * D, x.shape[1], self.hidden_size)
        if self.mode != "LSTM":
            states = (hx,)
        elif hx is None:
            states = (None, None)
        else:
            states = tuple(hx) if isinstance(hx, (tuple, list)) else None
        if states is None or len(states) != (2 if self.mode == "LSTM" else 1):
            raise TypeError(f"{name}: hx must be a tuple (h_0, c_0) of Tensors, got {type(hx).__name__}")
        out = []
        for s, what in zip(states, ("h_0", "c_0")):
            if s is None:
                s = zeros(shape, dtype=x.dtype, device=x.device)
            elif not isinstance(s, Tensor) or tuple(s.shape) != shape:
                raise ValueError(
                    f"{name}: expected {what} of shape {shape} (num_layers * num_directions, batch, hidden_size), "
                    f"got {getattr(s, 'shape', s)!r}"
                )
            elif s.dtype != x.dtype:
                raise TypeError(f"{name}: {what} is {s.dtype}, the input {x.dtype}: they must share one dtype")
            out.append(s)
        return out

    def forward(self, input, hx=None):
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(
                f"{name}: expected a Tensor input, got {type(input).__name__} (PackedSequence is not supported: "
                f"pad the batch, e.g. with nn.utils.rnn.pad_sequence)"
            )
        if input.ndim not in (2, 3):
            raise ValueError(f"{name}: expected a 2-D (unbatched) or 3-D (batched) input, got {input.shape}")
        if input.shape[-1] != self.input_size:
            raise ValueError(
                f"{name}: input.size(-1) must be equal to input_size. Expected {self.input_size}, got {input.shape[-1]}"
            )
        if input.shape[1 if self.batch_first and input.ndim == 3 else 0] == 0:
            raise ValueError(
                f"{name}: expected sequence length to be larger than 0, got an input of shape {input.shape}"
            )
        if input.dtype != self.weight_ih_l0.dtype:
            raise TypeError(f"{name}: input {input.dtype} and weights {self.weight_ih_l0.dtype} must share one dtype")
        unbatched = input.ndim == 2
        x = input.unsqueeze(1) if unbatched else input.transpose(0, 1) if self.batch_first else input  # (T, N, in)
        if unbatched and hx is not None:  # (L D, H) -> (L D, 1, H)
            if self.mode != "LSTM":
                hx = hx.unsqueeze(1) if isinstance(hx, Tensor) else hx
            elif isinstance(hx, (tuple, list)):
                hx = tuple(h.unsqueeze(1) if isinstance(h, Tensor) else h for h in hx)
        D = 2 if self.bidirectional else 1
        initial = self._initial_state(hx, x, D)
        finals = [[] for _ in initial]
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                x = F.dropout(x, self.dropout, True)
            outputs = []
            for direction, suffix in enumerate(("", "_reverse")[:D]):
                k = layer * D + direction
                state = tuple(s[k] for s in initial) if self.mode == "LSTM" else initial[0][k]
                out, state = self._run_direction(x, state, f"l{layer}{suffix}", reverse=direction == 1)
                outputs.append(out)
                for i, s in enumerate(state if self.mode == "LSTM" else (state,)):
                    finals[i].append(s)
            x = outputs[0] if D == 1 else cat(outputs, -1)  # (T, N, D H)
        output = x.squeeze(1) if unbatched else x.transpose(0, 1) if self.batch_first else x
        finals = [stack(f, 0) for f in finals]  # (L D, N, H) each
        if unbatched:
            finals = [f.squeeze(1) for f in finals]
        return output, (tuple(finals) if self.mode == "LSTM" else finals[0])

    def _run_direction(self, x, state, tag: str, reverse: bool):
        """One layer in one direction over x (T, N, in): the outputs (T, N, H) in time order, and the last state."""
        w_ih, w_hh = getattr(self, f"weight_ih_{tag}"), getattr(self, f"weight_hh_{tag}")
        b_ih, b_hh = (getattr(self, f"bias_ih_{tag}"), getattr(self, f"bias_hh_{tag}")) if self.bias else (None, None)
        if reverse:  # the steps run from the last to the first: the sequence flipped, the outputs flipped back
            out, state = self._run_layer(x.flip(0), state, w_ih, w_hh, b_ih, b_hh)
            return out.flip(0), state
        return self._run_layer(x, state, w_ih, w_hh, b_ih, b_hh)

    def _run_layer(self, x, state, w_ih, w_hh, b_ih, b_hh):
        """One layer in one direction over x (T, N, in), the steps in x's order, as the input projection of every step
        in one linear and one fused node for the time loop (ops/recurrent.py: its backward through time writes each
        step's gradient once): the outputs (T, N, H) and the last state."""
        if self.mode == "LSTM":
            bias = None if b_ih is None else b_ih + b_hh  # both biases go into the input projection
            y = LSTMLayer.apply(F.linear(x, w_ih, bias), *state, w_hh)  # (T + 1, N, H): h_1 ... h_T, then c_T
            out = y[:-1]
            return out, (out[-1], y[-1])
        if self.mode == "GRU":  # b_hh stays apart: its n block is inside r's product
            out = GRULayer.apply(F.linear(x, w_ih, b_ih), state, w_hh, *(() if b_hh is None else (b_hh,)))
            return out, out[-1]
        bias = None if b_ih is None else b_ih + b_hh
        out = RNNLayer.apply(F.linear(x, w_ih, bias), state, w_hh, relu=self.mode == "RNN_RELU")
        return out, out[-1]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (nonlinearity='relu': relu)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(
            "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            0,
            device,
            dtype,
        )
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory; forward returns (output, (h_n, c_n))."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ):
        super().__init__(
            "LSTM",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            proj_size,
            device,
            dtype,
        )


class GRU(RNNBase):
    """Gated recurrent unit; forward returns (output, h_n)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__(
            "GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0, device, dtype
        )


# ----------------------------------------------------------------------------- the cells


class _CellBase(Module):
    """One step: weight_ih (G H, input), weight_hh (G H, H), bias_ih, bias_hh (G H,), as torch's cells."""

    gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        self.input_size = check_positive_int(name, "input_size", input_size)
        self.hidden_size = check_positive_int(name, "hidden_size", hidden_size)
        self.bias = bool(bias)
        dt = default_float_dtype(dtype, name)
        G = self.gates * hidden_size
        self.weight_ih = Parameter(np.empty((G, input_size), dtype=dt))
        self.weight_hh = Parameter(np.empty((G, hidden_size), dtype=dt))
        if bias:
            self.bias_ih = Parameter(np.empty((G,), dtype=dt))
            self.bias_hh = Parameter(np.empty((G,), dtype=dt))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        bound = 1.0 / math.sqrt(hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)
        if device is not None:
            self.to(device)

    def _prepare(self, input, hx, n_states: int):
        """(x (N, in), states (N, H) each, unbatched): zeros for a missing state, checked shapes."""
        name = type(self).__name__
        if not isinstance(input, Tensor) or input.ndim not in (1, 2) or input.shape[-1] != self.input_size:
            raise ValueError(
                f"{name}: expected input of shape (N, {self.input_size}) or ({self.input_size},), "
                f"got {getattr(input, 'shape', input)!r}"
            )
        unbatched = input.ndim == 1
        x = input.unsqueeze(0) if unbatched else input
        if hx is None:
            states = [zeros((x.shape[0], self.hidden_size), dtype=x.dtype, device=x.device)] * n_states
        else:
            states = list(hx) if n_states == 2 else [hx]
            states = [s.unsqueeze(0) if unbatched else s for s in states]
            for s in states:
                if not isinstance(s, Tensor) or tuple(s.shape) != (x.shape[0], self.hidden_size):
                    raise ValueError(
                        f"{name}: expected hidden state of shape ({x.shape[0]}, {self.hidden_size}), "
                        f"got {getattr(s, 'shape', s)!r}"
                    )
        return x, states, unbatched


class RNNCell(_CellBase):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, (h,), unbatched = self._prepare(input, hx, 1)
        h = rnn_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh, self.nonlinearity)
        return h.squeeze(0) if unbatched else h


class LSTMCell(_CellBase):
    """(h', c') from (h, c), torch's gate order i, f, g, o."""

    gates = 4

    def forward(self, input, hx=None):
        x, (h, c), unbatched = self._prepare(input, hx, 2)
        h, c = lstm_step(F.linear(x, self.weight_ih, self.bias_ih), (h, c), self.weight_hh, self.bias_hh)
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(_CellBase):
    """h' = (1 - z) n + z h, torch's gate order r, z, n."""

    gates = 3

    def forward(self, input, hx=None):
        x, (h,), unbatched = self._prepare(input, hx, 1)
        h = gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return h.squeeze(0) if unbatched else h
