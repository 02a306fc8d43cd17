"""The check of one primitive written as a minitensor.Function (rungs 2 and 3), in three steps:

1. its backward called directly in float64 (no engine in between): a tuple with one gradient per input, none
   None, each of its input's shape (or, for an input that broadcasts, the output's) and dtype;
2. through the engine (`Fn.apply`, a random upstream gradient) against PyTorch, in float64 and float32, within
   minitensor.testing.OP_RTOL: the forward and every input's gradient;
   2b. through the learner's own engine (rung 2: Node, the walk, sum_to) in float64, against the same PyTorch
   gradients: the op's broadcast gradients summed back by the learner's sum_to;
3. minitensor's gradcheck in float64: the backward against finite differences of the learner's own forward.
"""

from __future__ import annotations

import importlib

import numpy as np
import torch

import minitensor as mt
from minitensor.autograd import Context

from ..runner import Exercise
from .common import CheckFailed, case, compare, expect_array, finite_differences, rng


def _inputs(r, shapes, positive):
    return [np.abs(r.standard_normal(s)) + 0.5 if positive else r.standard_normal(s) for s in shapes]


def _sums_back(gr, shape: tuple) -> bool:
    """Whether gradient `gr` has a shape the engine sums back to `shape`: one the input broadcasts to."""
    if not isinstance(gr, np.ndarray):
        return False
    try:
        return np.broadcast_shapes(shape, gr.shape) == gr.shape
    except ValueError:
        return False


def op_exercise(
    ex: str,
    title: str,
    fn_name: str,
    cases: list,
    torch_fn,
    positive=False,
    check_forward_only=False,
    needs=(),
    known=None,
):
    """`cases`: a list of (input shapes, keyword arguments), the keyword arguments (non-tensor inputs: a dim, a
    target) a dict or a function of (rng, shapes) giving one; `torch_fn(tensors, kwargs)` the PyTorch reference.
    check_forward_only: the exercise is the forward (the backward is judged by the next exercise). needs: the
    exercises this one builds on (runner.Exercise.needs). known(arrays, G, kw, i): the known wrong gradients of
    input i, as (array, sentence) pairs that the diagnosis names when the learner's gradient equals one."""

    def check(mod):
        Fn = getattr(mod, fn_name, None)
        if Fn is None:
            raise CheckFailed(f"no class {fn_name} in your file")
        r = rng(2)
        for shapes, kw in cases:
            kw = kw(r, shapes) if callable(kw) else kw
            where = f"on inputs {', '.join(str(tuple(s)) for s in shapes)}" + (
                f" with {', '.join(f'{k}={v!r}' for k, v in kw.items() if not isinstance(v, np.ndarray))}" if kw else ""
            )
            with case(where):
                arrays = _inputs(r, shapes, positive)
                # 1. direct call
                if not check_forward_only:
                    ctx = Context()
                    ctx.needs_input_grad = (True,) * len(arrays)
                    out = Fn.forward(ctx, *[a.copy() for a in arrays], **kw)
                    g = r.standard_normal(np.shape(out))
                    grads = Fn.backward(ctx, g)
                    if not isinstance(grads, tuple):
                        raise CheckFailed(
                            f"{where}: backward must return a tuple, one gradient per input; got {type(grads).__name__}"
                        )
                    if len(grads) != len(arrays):
                        raise CheckFailed(f"{where}: backward returned {len(grads)} gradients for {len(arrays)} inputs")
                    for i, (gr, a) in enumerate(zip(grads, arrays)):
                        shape = a.shape
                        if _sums_back(gr, a.shape):
                            shape = np.shape(gr)  # a broadcast shape the engine sums back to the input's
                        elif isinstance(gr, np.ndarray) and gr.shape != a.shape:
                            _wrong_shape(f"{where}: backward's gradient for input {i}", gr, a.shape, np.shape(out))
                        expect_array(f"{where}: backward's gradient for input {i}", gr, shape, a.dtype)
                # 2. against PyTorch, through the engine
                for dtype in (np.float64, np.float32):
                    xs = [mt.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
                    ts = [torch.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
                    y, t_y = Fn.apply(*xs, **kw), torch_fn(ts, kw)
                    name = np.dtype(dtype).name
                    if not isinstance(y, mt.Tensor):
                        raise CheckFailed(f"{where}: {fn_name}.apply returned {type(y).__name__}, expected a Tensor")
                    expect_array(f"{where}: forward in {name}", y.detach().numpy(), tuple(t_y.shape), dtype)
                    compare(f"{where}: forward in {name}", y, t_y)
                    if check_forward_only:
                        continue
                    G = r.standard_normal(tuple(t_y.shape)).astype(dtype)
                    y.backward(mt.tensor(G))
                    t_y.backward(torch.tensor(G))
                    for i, (x, t) in enumerate(zip(xs, ts)):
                        if x.grad is None:
                            raise CheckFailed(f"{where}: no gradient reached input {i} ({name})")
                        wrong = known([a.astype(np.float64) for a in arrays], G, kw, i) if known else ()
                        compare(
                            f"{where}: gradient of input {i} in {name}",
                            x.grad,
                            t.grad,
                            input_shapes=[a.shape for a in arrays],
                            known=wrong,
                        )
                    if dtype == np.float64:
                        G64, want64 = G, [t.grad for t in ts]
                # 2b. through the learner's own engine (rung 2's Node, walk and sum_to), float64; not for names
                # checked from a notebook (course/notebook.py), which come without a rung 2 file beside them
                if not check_forward_only and getattr(mod, "__name__", None):
                    engine = importlib.import_module(mod.__name__.rsplit(".", 1)[0] + ".rung2")
                    nodes = [engine.Node(a.copy()) for a in arrays]
                    engine.apply(Fn, *nodes, **kw).backward(G64.copy())
                    for i, (x, t) in enumerate(zip(nodes, want64)):
                        if x.grad is None:
                            raise CheckFailed(f"{where}: through your rung 2 engine, no gradient reached input {i}")
                        compare(f"{where}: through your rung 2 engine, gradient of input {i}", x.grad, t)
                # 3. finite differences (float64)
                if not check_forward_only:
                    xs = [mt.tensor(a, requires_grad=True) for a in arrays]
                    finite_differences(where, lambda *t, kw=kw: Fn.apply(*t, **kw), xs)

    if not check_forward_only:
        needs = ("2.3", *needs)  # step 2b runs the learner's walk
    return Exercise(ex, title, check, needs=tuple(needs))


def _wrong_shape(where: str, gr: np.ndarray, shape: tuple, out_shape: tuple) -> None:
    """A gradient whose shape neither is its input's nor broadcasts to it: say which shapes would do, and what the
    one that came looks like (transposed, another input's)."""
    wanted, why = f"shape {tuple(shape)} (the input's)", ""
    if tuple(out_shape) != tuple(shape) and _sums_back(np.empty(out_shape), tuple(shape)):
        wanted = f"the output's shape {tuple(out_shape)} or the input's {tuple(shape)}"
        why = " (a gradient in the output's shape is summed back to the input's by the engine)"
    hint = ""
    if gr.ndim >= 2 and gr.shape == tuple(shape[:-2]) + tuple(shape[-1:-3:-1]):
        hint = ": that is the input's shape with its last two axes swapped; check which factor you transpose"
    raise CheckFailed(f"{where}: expected {wanted}{why}, got {gr.shape}{hint}")
