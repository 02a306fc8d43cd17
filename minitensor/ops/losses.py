"""The fused losses: cross-entropy (class indices or class probabilities), nll_loss and binary
cross-entropy with logits, each one graph node with its backward and its forward-mode rule derived by hand.

docs/backprop.md derives every formula below; tests/minitensor/ops/test_fused.py checks each against the composite it
replaces. Notation as in fused.py: x the logits, g = dL/dloss the incoming gradient, a dot the tangent.

cross_entropy with label smoothing e over C classes, per-class weight w (1 if none), p = softmax(logits):
             q_n = (1 - e) onehot(t_n) + e / C (class index t_n)  or  (1 - e) P_n + e / C (class probabilities P_n)
             loss_n = -sum_c w_c q_nc log p_nc;   s_n = sum_c w_c q_nc   (1 for an index target without weight)
             dlogits_n = (s_n p_n - w * q_n) * g_n                 (rows with t_n = ignore_index get 0)
             probabilities only: dP_n = -(1 - e) w * log p_n * g_n,  dw = -sum_n q_n * log p_n * g_n
             reduction='mean' divides by sum of w_{t_n} over non-ignored rows (index), by the row count (probabilities).
nll_loss     loss_n = -w_{t_n} x_{n, t_n};  dx_{n, t_n} = -w_{t_n} g_n   (mean: divided by sum of w_{t_n} as above)
bce_with_logits, elementwise, target t, pos_weight w (1 if none), s = sigmoid(x):
             loss = -(w t log s + (1 - t) log(1 - s)),  log s = log sigmoid(x), log(1 - s) = log sigmoid(-x)
             dx = ((w t + 1 - t) s - w t) * g   (w = 1: (s - t) * g)
             dt = -(w log sigmoid(x) - log sigmoid(-x)) * g   (w = 1: -x * g);   dw = -t log sigmoid(x) * g

Deviations from PyTorch, kept on purpose (tests/minitensor/ops/test_edge_values.py and test_fused.py check them):
- cross_entropy, an infinite dL/dloss_n gives +-inf (the limit, by the sign of p - q); PyTorch's composite backward
  (nll_loss, then log_softmax) computes inf - inf there: NaN.
- cross_entropy with class probabilities, a class with w_c q_nc = 0 and p_nc = 0 (a logit of -inf) adds 0, its
  limit (0 log 0 = 0, as torch.xlogy), in the loss, its gradients and its tangent; PyTorch's composite computes
  0 * -inf there: NaN.

Forward mode (a dot is a tangent): a loss row moves by the row of its gradient dotted with the tangents,
loṡs_n = sum_c dlogits_nc ẋ_nc (with g_n = 1) + the target's and the weight's terms, then is reduced as the
loss is (_reduced_tangent). The class-index losses take their weight as a constant, in both modes.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Function, tangent_sum
from ..devices import array_module, is_array
from .elementwise import log_sigmoid
from .fused import beside


def _rows(xp, x):
    """(N, C, d1, ...) or (C,) -> (rows, C) with the class axis last."""
    if x.ndim == 1:
        return x.reshape((1,) + x.shape)
    if x.ndim == 2:
        return x
    return xp.moveaxis(x, 1, -1).reshape(-1, x.shape[1])


def _unrows(xp, g2, shape: tuple):
    """The inverse of _rows: (rows, C) back to the input's layout."""
    if len(shape) <= 2:
        return g2.reshape(shape)
    moved = shape[:1] + shape[2:] + shape[1:2]
    return xp.moveaxis(g2.reshape(moved), -1, 1)


def _row_log_softmax(xp, x):
    """log softmax over the classes of each row of x, (rows, C) (CrossEntropy's forward and backward)."""
    return xp.log_softmax(_rows(xp, x), 1)


def _valid_targets(target: np.ndarray, C: int, ignore_index: int, op: str):
    """Flatten targets; return (targets with ignored rows set to class 0, mask of non-ignored rows)."""
    t = target.reshape(-1)
    valid = t != ignore_index
    tv = np.where(valid, t, 0)
    # One host sync per call on a device: a target out of range would index past the row there, silently
    # (CuPy does not check a fancy index), so it is checked here, as torch's CUDA kernel asserts on the device.
    if ((tv < 0) | (tv >= C)).any():
        bad = t[valid & ((t < 0) | (t >= C))][0]
        raise IndexError(f"{op}: target {bad} is out of range for {C} classes (ignore_index={ignore_index})")
    return tv, valid


def _row_weights(weight, tv: np.ndarray, valid: np.ndarray):
    """(w_{t_n}, the mean's denominator): w_{t_n} is None without weight; the denominator is the number of
    non-ignored rows, or the sum of their w_{t_n} (PyTorch's weighted mean)."""
    if weight is None:
        return None, valid.sum()
    w_t = weight[tv]
    return w_t, np.where(valid, w_t, 0).sum()


def _reduce(losses: np.ndarray, reduction: str, out_shape: tuple, denominator):
    """Apply `reduction` to per-row losses; returns (loss, per-row scale of dL/dloss_row).
    'mean' divides the sum by `denominator` (0 gives 0/0 = NaN, as in PyTorch)."""
    dt, xp = losses.dtype.type, array_module(losses)
    if reduction == "none":
        return losses.reshape(out_shape), None
    if reduction == "sum":
        return xp.asarray(losses.sum()), dt(1)  # a 0-d array on losses' device (NumPy's sum gives a scalar)
    # a row count (int), or a count or weight sum that is a 0-d array on losses' device: read without a host sync
    denominator = dt(denominator) if isinstance(denominator, int) else denominator.astype(losses.dtype)
    return xp.asarray(losses.sum() / denominator), dt(1) / denominator


def _reduced_tangent(xp, per_row, reduction: str, scale, out_shape: tuple):
    """The loss's tangent from its rows' tangents (R,), reduced as _reduce reduces the rows' losses."""
    if reduction == "none":
        return per_row.reshape(out_shape)
    total = xp.sum(per_row)
    return total if reduction == "sum" else _times_scale(total, scale)


def _times_scale(v, scale):
    """v * scale, the reduction's scale. On a device, 'mean' keeps 1 / denominator as a 0-d device array (reading
    it would be a host sync): beside a Tensor (a backward on Tensors, a forward-mode rule) it is wrapped as a constant
    Tensor, as a NumPy scalar is taken as a number."""
    if hasattr(v, "version_counter") and is_array(scale):  # (is_tensor_like, inlined)
        scale = v.wrap(scale)
    return v * scale


def _constant_weight_tangent(op: str, tw) -> None:
    """A class-index loss's weight is a constant (not differentiated, as in PyTorch's nll_loss): refuse a tangent.
    Deviation from PyTorch, flagged: torch's forward AD drops such a tangent silently (and, with label smoothing,
    follows it through part of its composite); here it is an error, not a derivative that is silently partial."""
    if tw is not None:
        raise RuntimeError(
            f"{op}: the weight carries a forward-mode tangent, but {op} with class-index targets is not "
            f"differentiable with respect to weight (as in PyTorch); give a weight without a tangent"
        )


def _per_row_grad(g: np.ndarray, reduction: str, scale) -> np.ndarray:
    """dL/dloss_row for each row: g itself (reduction 'none') or g times the reduction's scale."""
    return g.reshape(-1) if reduction == "none" else _times_scale(g, scale)


def _class_dim_removed(shape: tuple) -> tuple:
    """The shape of an unreduced loss: (N, C, d1, ...) -> (N, d1, ...), (C,) -> ()."""
    return shape[:1] + shape[2:] if len(shape) > 1 else ()


class CrossEntropy(Function):
    """loss_n = -sum_c w_c q_nc log p_nc,  q_n = (1 - e) onehot(t_n) + e / C,  p_n = softmax(x_n),  w a constant;
    dx_n = (s_n p_n - w * q_n) g_n,  s_n = sum_c w_c q_nc  (ignore_index, 'mean', the JVP: docs/backprop.md §3)"""

    max_inputs = 3  # x, target, weight; weight optional

    @staticmethod
    def forward(ctx, x, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        C = x.shape[0 if x.ndim == 1 else 1]
        tv, valid = _valid_targets(target, C, ignore_index, "cross_entropy")
        logp = _row_log_softmax(ctx.xp, x)  # (R, C)
        e = float(label_smoothing)  # a Python number: e / C is formed in double (C beyond float16's range)
        w_t, denominator = _row_weights(weight, tv, valid)
        losses, s = _index_losses(logp, tv, e, weight, w_t)
        losses = np.where(valid, losses, x.dtype.type(0))
        out, scale = _reduce(losses, reduction, target.shape, denominator)
        ctx.save(s=s, logp=logp, tv=tv, valid=valid)
        ctx.e, ctx.scale, ctx.reduction = e, scale, reduction
        ctx.save_for_backward(x, *(() if weight is None else (weight,)))  # weight: its version is checked, as torch
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, w, logp = _index_saved(ctx, tensors=ctx.create_graph)
        g_rows = xp.where(ctx.valid, _per_row_grad(g, ctx.reduction, ctx.scale), 0).reshape(-1, 1)  # ignored: 0
        dx = cross_entropy_grad(xp, logp, g_rows, ctx.tv, ctx.e, x.dtype, w, ctx.s)
        return _unrows(xp, dx, x.shape), None, None  # target, weight: no gradient

    @staticmethod
    def jvp(ctx, tx, t_target, tw=None):
        _constant_weight_tangent("cross_entropy", tw)
        if tx is None:
            return None
        xp = ctx.xp
        x, w, logp = _index_saved(ctx, tensors=True)  # the rule runs on Tensors
        d_logits = cross_entropy_grad(xp, logp, 1, ctx.tv, ctx.e, x.dtype, w, ctx.s)  # g_n = 1
        per_row = xp.where(ctx.valid, xp.sum(d_logits * _rows(xp, tx), axis=1), 0)
        return _reduced_tangent(xp, per_row, ctx.reduction, ctx.scale, _class_dim_removed(x.shape))


def _index_losses(logp, tv: np.ndarray, e: float, weight, w_t):
    """CrossEntropy's (loss_n (R,), s_n (R, 1)): loss_n = -sum_c w_c q_nc log p_nc and s_n = sum_c w_c q_nc,
    None without weight (s_n = 1 there)."""
    C = logp.shape[1]
    nll = -np.take_along_axis(logp, tv[:, None], axis=1)[:, 0]  # -log p_{n, t_n}
    if weight is None:
        return ((1 - e) * nll - e / C * logp.sum(axis=1) if e else nll), None
    losses = (1 - e) * w_t * nll - e / C * (logp @ weight) if e else w_t * nll
    return losses, ((1 - e) * w_t + e / C * weight.sum()).reshape(-1, 1)


def _index_saved(ctx, tensors: bool):
    """CrossEntropy's (x, weight, logp) for its backward and its JVP: logp saved, or recomputed under create_graph.
    On Tensors the weight is detached: a constant, as torch's, so no gradient reaches it."""
    x, w = (ctx.saved_arrays + (None,))[:2]
    if tensors and w is not None:
        w = w.detach()
    return x, w, ctx.intermediate(ctx.logp, _row_log_softmax, x)


def cross_entropy_grad(xp, logp, g_rows, tv, e, dtype, w=None, s=None):
    """dx = (p - q) * g_rows, or (s * p - w * q) * g_rows with a weight: CrossEntropy's gradient of the logits, in
    rows (R, C), with p = exp(logp) the softmax and q the target distribution (index_q) of the targets tv."""
    q, s = (beside(logp, a) for a in (index_q(tv, logp.shape[1], e, dtype), s))  # (R, C)
    # p = exp(logp) written inline: NumPy then computes p - q in p's buffer, not in a third array
    return (xp.exp(logp) - q) * g_rows if w is None else (s * xp.exp(logp) - w * q) * g_rows


def index_q(tv: np.ndarray, C: int, e, dtype) -> np.ndarray:
    """q = (1 - e) onehot(t_n) + e / C, (R, C): the target distribution of class-index targets tv."""
    dtype = np.dtype(dtype)
    xp = array_module(tv)  # on tv's device
    # filled, then indexed: np.where over a broadcast compare took 30x longer (10.9 ms against 0.36, 512 x 10000)
    q = xp.full((tv.shape[0], C), dtype.type(e / C), dtype=dtype)
    q[xp.arange(tv.shape[0]), tv] = dtype.type(1 - e + e / C)
    return q


def _soft_q(xp, target, weight, e, C: int):
    """(q, w * q) of class-probability targets, (R, C): q = (1 - e) P + e / C; w * q = q without weight."""
    q = _rows(xp, target)
    if e:
        q = q * (1 - e) + e / C
    return q, (q if weight is None else q * weight)


class CrossEntropyProbs(Function):
    """loss_n = -sum_c w_c q_nc log p_nc,  q_n = (1 - e) P_n + e / C,  p_n = softmax(x_n)  (docs/backprop.md §3);
    dx_n = (s_n p_n - w * q_n) g_n,  dP_n = -(1 - e) w log p_n g_n,  dw = -sum_n q_n log p_n g_n"""

    max_inputs = 3  # x, target, weight; weight optional

    @staticmethod
    def forward(ctx, x, target, weight=None, reduction="mean", label_smoothing=0.0):
        e = float(label_smoothing)  # a Python number: e / C is formed in double (C beyond float16's range)
        logp = _row_log_softmax(ctx.xp, x)  # (R, C)
        q, wq = _soft_q(ctx.xp, target, weight, e, logp.shape[1])
        losses = -_times_log(ctx.xp, wq, logp).sum(axis=1)  # (R,)
        out, scale = _reduce(losses, reduction, _class_dim_removed(x.shape), logp.shape[0])
        ctx.save(logp=logp, q=q, wq=wq)
        ctx.e, ctx.scale, ctx.reduction = e, scale, reduction
        ctx.save_for_backward(x, target, *(() if weight is None else (weight,)))
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, target, weight, logp, q, wq = _probs_saved(ctx)
        need_x, need_t, need_w = ctx.needs_input_grad
        per_row = _per_row_grad(g, ctx.reduction, ctx.scale).reshape(-1, 1)  # (R, 1), or (1, 1) if reduced
        gx = _unrows(xp, _probs_dlogits(xp, logp, wq) * per_row, x.shape) if need_x else None
        # d(w q)/dP = (1 - e) w; a class of weight 0 has no say, even where log p = -inf
        gt = _unrows(xp, _through_q(-_w_logp(xp, weight, logp) * per_row, ctx.e), target.shape) if need_t else None
        gw = xp.sum(-_times_log(xp, q, logp) * per_row, axis=0) if need_w else None  # 0 log 0 = 0, as in the forward
        return gx, gt, gw

    @staticmethod
    def jvp(ctx, tx, tt, tw=None):
        xp = ctx.xp
        x, target, weight, logp, q, wq = _probs_saved(ctx)
        dx = xp.sum(_probs_dlogits(xp, logp, wq) * _rows(xp, tx), axis=1) if tx is not None else None
        dt = None
        if tt is not None:
            dt = -xp.sum(_times_log(xp, _rows(xp, tt), _w_logp(xp, weight, logp)), axis=1)
            dt = _through_q(dt, ctx.e)
        dw = -xp.sum(_times_log(xp, tw, _times_log(xp, q, logp)), axis=1) if tw is not None else None
        return _reduced_tangent(xp, tangent_sum(dx, dt, dw), ctx.reduction, ctx.scale, _class_dim_removed(x.shape))


def _probs_saved(ctx):
    """CrossEntropyProbs' (x, target, weight, logp, q, wq): saved by its forward, or under create_graph recomputed
    from the saved Tensors (logp and q are (R, C))."""
    x, target, weight = (ctx.saved_arrays + (None,))[:3]
    logp = ctx.intermediate(ctx.logp, _row_log_softmax, x)
    q, wq = ctx.intermediate((ctx.q, ctx.wq), _soft_q, target, weight, ctx.e, logp.shape[1])
    return x, target, weight, logp, q, wq


def _probs_dlogits(xp, logp, wq):
    """s * p - w * q, (R, C): CrossEntropyProbs' gradient of the logits for g_n = 1, with s_n = sum_c w_c q_nc."""
    s = xp.sum(wq, axis=1, keepdims=True)  # (R, 1)
    return s * xp.exp(logp) - wq


def _w_logp(xp, weight, logp):
    """w * log p (log p without weight), 0 log 0 = 0: the loss's derivative in q, negated."""
    return logp if weight is None else _times_log(xp, weight, logp)


def _through_q(v, e: float):
    """v * (1 - e): a derivative in q carried to P through q = (1 - e) P + e / C (v itself without smoothing)."""
    return v * (1 - e) if e else v


class NLLLoss(Function):
    """loss_n = -w_{t_n} x[n, t_n] (w = 1 if not given);  dx[n, t_n] = -w_{t_n} dL/dloss_n, 0 elsewhere.
    'mean' divides by sum of w_{t_n} over the rows whose target is not ignore_index.
    loṡs_n = -w_{t_n} ẋ[n, t_n]  (0 at ignored rows), reduced as the loss is (linear in x)."""

    max_inputs = 3  # x, target, weight; weight optional

    @staticmethod
    def forward(ctx, x, target, weight=None, ignore_index=-100, reduction="mean"):
        x2 = _rows(ctx.xp, x)
        tv, valid = _valid_targets(target, x2.shape[1], ignore_index, "nll_loss")
        w_t, denominator = _row_weights(weight, tv, valid)
        picked = -x2[array_module(tv).arange(x2.shape[0]), tv]  # (the row index on tv's device)
        losses = np.where(valid, picked if w_t is None else w_t * picked, x.dtype.type(0))
        out, scale = _reduce(losses, reduction, target.shape, denominator)
        ctx.save(tv=tv, valid=valid, w_t=w_t)
        ctx.scale, ctx.reduction = scale, reduction
        ctx.shape, ctx.rows = x.shape, x2.shape
        ctx.save_for_backward(*(() if weight is None else (weight,)))  # read through w_t; saved for its version
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        per_row = xp.broadcast_to(_per_row_grad(g, ctx.reduction, ctx.scale), ctx.tv.shape)
        if ctx.w_t is not None:
            per_row = per_row * beside(per_row, ctx.w_t)
        rows = array_module(ctx.tv).arange(ctx.rows[0])  # on tv's device
        # a plain write, not a scatter-add: each row n holds one target, so the pairs (n, t_n) are all distinct
        # (nothing to accumulate, and on a device no occurrence passes to count: no host sync)
        grad = xp.index_put(ctx.rows, (rows, ctx.tv), xp.where(ctx.valid, -per_row, 0), False)  # ignored rows: +0
        return _unrows(xp, grad, ctx.shape), None, None  # target, weight: no gradient

    @staticmethod
    def jvp(ctx, tx, t_target, tw=None):
        _constant_weight_tangent("nll_loss", tw)
        if tx is None:
            return None
        xp = ctx.xp
        picked = -_rows(xp, tx)[array_module(ctx.tv).arange(ctx.rows[0]), ctx.tv]  # (R,)
        per_row = xp.where(ctx.valid, picked if ctx.w_t is None else picked * beside(picked, ctx.w_t), 0)
        return _reduced_tangent(xp, per_row, ctx.reduction, ctx.scale, _class_dim_removed(ctx.shape))


class BCEWithLogits(Function):
    """loss = -(w t log sigmoid(x) + (1 - t) log sigmoid(-x)), elementwise, w = pos_weight (1 if not given);
    dx = ((w t + 1 - t) sigmoid(x) - w t) * g,  dt = -(w log sigmoid(x) - log sigmoid(-x)) * g,
    dw = -t log sigmoid(x) * g   (w broadcasts over the last dim; the walk sums dw back to its shape)
    ẏ = ((w t + 1 - t) s - w t) ẋ - (w log sigmoid(x) - log sigmoid(-x)) ṫ - t log sigmoid(x) ẇ: elementwise in
    x, t and w (w_j meets the loss's column j only), so the VJP's formulas with the tangents for g (jvp_kind)

    Unreduced and unweighted: F.binary_cross_entropy_with_logits multiplies by `weight` and reduces after it.
    Deviation from PyTorch, kept on purpose: at an infinite logit the loss is its limit, +inf at -inf with a
    target > 0, 0 at -inf with a target of 0 and at +inf with a target of 1 (a term whose coefficient is 0 is 0,
    as in torch.xlogy); PyTorch's formula (1 - t) x - log sigmoid(x) gives NaN there (-inf + inf, 0 * inf).
    dx is finite there, and an infinite g gives +-inf, not the NaN of a composite (inf - inf)."""

    max_inputs = 3  # x, target, pos_weight; pos_weight optional

    @staticmethod
    def forward(ctx, x, target, pos_weight=None):
        ctx.save_for_backward(x, target, *(() if pos_weight is None else (pos_weight,)))
        w_t = target if pos_weight is None else pos_weight * target
        loss = -(_times_log(ctx.xp, w_t, log_sigmoid(x)) + _times_log(ctx.xp, 1 - target, log_sigmoid(-x)))
        return loss + 0.0  # a zero loss is +0.0, as PyTorch's (the negation of +0 + +0 is -0.0)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, t, w = (ctx.saved_arrays + (None,))[:3]
        need_x, need_t, need_w = ctx.needs_input_grad
        gx = gt = gw = None
        if need_x:
            s = xp.sigmoid(x)
            gx = (s - t) * g if w is None else ((w * t + 1 - t) * s - w * t) * g
        # log sigmoid(x) - log sigmoid(-x) = x, exactly: without pos_weight the target's gradient needs no log
        log_p = xp.log_sigmoid(x) if need_w or (need_t and w is not None) else None
        if need_t:
            gt = -x * g if w is None else -(_times_log(xp, w, log_p) - xp.log_sigmoid(-x)) * g
        if need_w:
            gw = -_times_log(xp, t, log_p) * g
        return gx, gt, gw

    jvp_kind = "elementwise"


def _times_log(xp, c, log_s):
    """c * log_s, and 0 where c == 0 and log_s == -inf (0 log 0 = 0, as torch.xlogy): a term that a target of
    0 or 1 switches off stays off at an infinite logit, instead of 0 * -inf = NaN."""
    return xp.where((c == 0) & (log_s == -np.inf), 0, c * log_s)
