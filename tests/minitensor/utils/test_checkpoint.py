"""mt.utils.checkpoint: recompute instead of keeping, bitwise the plain run (dropout included), once per backward,
under create_graph too; its refusals; and the model's activation_checkpointing (config, CLI, training, resume)."""

import numpy as np
import pytest
import torch

import minitensor as mt
import minitensor.nn.functional as F
from minitensor.autograd import forward_ad as fw
from minitensor.autograd.graph import saved_tensors
from minitensor.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential
from parity.hooks import RECOMPUTING, ReluBranchAligner
from parity.report import ReportConfig, run_report
from transformer_np.cli import build_parser
from transformer_np.config import ModelConfig
from transformer_np.training import default_configs, load_checkpoint, load_history, train


class Block(mt.nn.Module):
    """linear, layer norm, GELU, dropout, ReLU: every kind of saved array (inputs, outputs, intermediates, masks)."""

    def __init__(self, d=8, p=0.3):
        super().__init__()
        self.linear = mt.nn.Linear(d, d)
        self.norm = mt.nn.LayerNorm(d)
        self.p = p
        self.calls = 0

    def forward(self, x, scale=1.0):
        self.calls += 1
        return F.dropout(F.gelu(self.norm(self.linear(x))) * scale, self.p, training=True).relu()


def _setup(dtype=mt.float64):
    mt.manual_seed(3)
    block = Block().to(dtype)
    x = mt.randn(6, 8, dtype=dtype, requires_grad=True)
    target = mt.tensor(np.array([0, 1, 2, 3, 4, 5]))
    return block, x, target


def _step(block, x, target, checkpointed: bool, seed=11):
    """loss, every gradient and the generator's state after one forward and backward."""
    mt.manual_seed(seed)
    h = x * 2.0
    h = checkpoint(block, h, scale=0.5, use_reentrant=False) if checkpointed else block(h, scale=0.5)
    h = F.dropout(h, 0.2, training=True)  # a draw after the segment: the stream must be where it was
    loss = F.cross_entropy(h, target)
    loss.backward()
    grads = [t.grad.numpy().copy() for t in (x, *block.parameters())]
    for t in (x, *block.parameters()):
        t.grad = None
    return loss.item(), grads, mt.random.get_rng_state()


def test_checkpoint_is_bitwise_the_plain_run_with_dropout():
    block, x, target = _setup()
    loss0, grads0, state0 = _step(block, x, target, False)
    block.calls = 0
    loss1, grads1, state1 = _step(block, x, target, True)
    assert loss1 == loss0
    for g0, g1 in zip(grads0, grads1):
        assert np.array_equal(g0, g1)
    assert state1 == state0  # the generator ends where the plain run's does
    assert block.calls == 2  # the forward, and exactly one recompute in the backward


def test_checkpoint_keeps_less_and_recomputes_once_per_backward():
    block, x, target = _setup()
    h = checkpoint(block, x, use_reentrant=False)
    loss = F.cross_entropy(h, target)
    rows = saved_tensors(loss)
    inside = [r for r in rows if r.packed]
    assert {r.what for r in inside} >= {"keep", "cdf", "mean", "rstd"}  # listed, but dropped
    plain = saved_tensors(F.cross_entropy(block(x), target))
    assert rows.held_bytes < plain.held_bytes
    block.calls = 0
    loss.backward(retain_graph=True)
    assert block.calls == 1
    loss.backward()  # a second backward recomputes again, once
    assert block.calls == 2


def test_checkpoint_under_create_graph_matches_the_plain_double_backward():
    block, x, target = _setup()
    block.p = 0.0  # dropout off: the second-order terms of a mask are zero either way; keep the test about recompute

    def second(checkpointed):
        mt.manual_seed(5)
        h = checkpoint(block, x, use_reentrant=False) if checkpointed else block(x)
        loss = F.cross_entropy(h, target)
        (g,) = mt.autograd.grad(loss, x, create_graph=True)
        (gg,) = mt.autograd.grad((g * g).sum(), x)
        return g.detach().numpy(), gg.detach().numpy()

    g0, gg0 = second(False)
    g1, gg1 = second(True)
    assert np.array_equal(g0, g1) and np.array_equal(gg0, gg1)
    assert np.abs(gg0).max() > 0


def test_forward_mode_through_a_checkpoint_matches_the_plain_run():
    """J v, and H v by forward over reverse (the backward recomputes the segment inside the dual level): the
    recomputed arrays pair with the first run's tangents (ctx.saved_tangents), so both equal the plain run's."""
    block, x, target = _setup()
    block.p = 0.0
    v = mt.tensor(np.random.default_rng(2).standard_normal(x.shape))

    def jv_and_hv(checkpointed):
        mt.manual_seed(5)
        with fw.dual_level():
            xd = fw.make_dual(x, v)
            h = checkpoint(block, xd, use_reentrant=False) if checkpointed else block(xd)
            loss = F.cross_entropy(h, target)
            jv = fw.unpack_dual(loss).tangent.item()
            (g,) = mt.autograd.grad(loss, xd, create_graph=True)
            hv = fw.unpack_dual(g).tangent.detach().numpy()
        return jv, hv

    jv0, hv0 = jv_and_hv(False)
    jv1, hv1 = jv_and_hv(True)
    assert jv0 == jv1 and np.array_equal(hv0, hv1)
    assert np.abs(hv0).max() > 0


def test_preserve_rng_state_false_draws_new_masks():
    block, x, target = _setup()

    def run(**how):
        mt.manual_seed(11)
        h = checkpoint(block, x, use_reentrant=False, **how) if how else block(x)
        F.cross_entropy(h, target).backward()
        grad, x.grad = x.grad.numpy().copy(), None
        return grad, mt.random.get_rng_state()

    plain, kept, fresh = run(), run(preserve_rng_state=True), run(preserve_rng_state=False)
    assert np.array_equal(plain[0], kept[0]) and plain[1] == kept[1]
    # the recompute drew new masks from the stream: other gradients, and the stream went further
    assert not np.array_equal(plain[0], fresh[0]) and plain[1] != fresh[1]


def test_checkpoint_sequential_equals_the_plain_sequence():
    mt.manual_seed(0)
    layers = mt.nn.Sequential(*[Block() for _ in range(5)]).to(mt.float64)
    x = mt.randn(6, 8, dtype=mt.float64, requires_grad=True)
    mt.manual_seed(1)
    layers(x).sum().backward()
    plain = [p.grad.numpy().copy() for p in layers.parameters()], x.grad.numpy().copy()
    layers.zero_grad()
    x.grad = None
    for m in layers:
        m.calls = 0
    mt.manual_seed(1)
    checkpoint_sequential(layers, 2, x, use_reentrant=False).sum().backward()
    for a, b in zip(plain[0], [p.grad.numpy() for p in layers.parameters()]):
        assert np.array_equal(a, b)
    assert np.array_equal(plain[1], x.grad.numpy())
    # torch's split: 5 // 2 = 2 functions a segment; the first segment checkpointed, the last (3) run plainly
    assert [m.calls for m in layers] == [2, 2, 1, 1, 1]


def test_determinism_check_names_the_array_that_differs():
    x = mt.randn(4, requires_grad=True)
    runs = []

    def changing(x):
        runs.append(1)
        return x.exp() if len(runs) == 1 else x[:2].exp()

    y = checkpoint(changing, x, use_reentrant=False)
    with pytest.raises(CheckpointError, match=r"saved array 0 of changing was float32 \(4,\) .* is float32 \(2,\)"):
        y.sum().backward()

    def fewer(x):
        runs.append(1)
        return x.exp() * x.sin() if len(runs) < 4 else x.exp()

    y = checkpoint(fewer, x, use_reentrant=False)
    with pytest.raises(CheckpointError, match="recomputing fewer saved 1 arrays .* the first run saved 4"):
        y.sum().backward()


def test_an_argument_changed_in_place_before_the_backward_is_refused():
    x, w = mt.randn(3), mt.randn(3, requires_grad=True)
    y = checkpoint(lambda x: (x + 1) * w, x, use_reentrant=False)  # no node saves x itself: only x + 1
    x.add_(1.0)
    with pytest.raises(RuntimeError, match=r"argument 0 of <lambda> was changed in place .* \(version 0, now 1\)"):
        y.sum().backward()


def test_a_tensor_inside_a_list_argument_changed_in_place_is_refused_too():
    x, w = mt.randn(3), mt.randn(3, requires_grad=True)
    y = checkpoint(lambda xs: (xs["x"][0] + 1) * w, {"x": [x]}, use_reentrant=False)
    x.add_(1.0)
    with pytest.raises(RuntimeError, match=r"argument 0 of <lambda> was changed in place .* \(version 0, now 1\)"):
        y.sum().backward()


def test_bad_input_is_refused_clearly():
    x = mt.randn(3, requires_grad=True)
    with pytest.raises(ValueError, match="use_reentrant=True is not supported"):
        checkpoint(lambda x: x.exp(), x, use_reentrant=True)
    with pytest.raises(ValueError, match=r"segments=4 is larger than the number of functions \(3\)"):
        checkpoint_sequential([mt.exp, mt.sin, mt.cos], 4, x)
    with pytest.raises(ValueError, match="segments must be an int >= 1, got 0"):
        checkpoint_sequential([mt.exp], 0, x)
    with pytest.raises(ValueError, match="use_reentrant=True is not supported"):
        checkpoint_sequential([mt.exp], 1, x, use_reentrant=True)
    with pytest.raises(TypeError, match="function must be callable"):
        checkpoint(3, x)


def test_non_tensor_arguments_and_no_grad_pass_through():
    x = mt.randn(3, requires_grad=True)
    y = checkpoint(lambda x, n, scale=1.0: (x * n * scale, "label"), x, 2, scale=3.0)
    assert y[1] == "label"
    y[0].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 6.0, np.float32))
    with mt.no_grad():
        assert checkpoint(mt.exp, x).grad_fn is None


def _structured(T, x, w):
    """Every kind of structure a segment may return: a dict holding a list, a nested tuple, non-tensor leaves."""
    h = (x @ w).tanh()
    return {"h": h, "parts": [h.exp(), (x * h, 3, None)], "name": "block", "sq": {"s": (h * h).sum(-1)}}


def _structured_loss(out):
    return (out["h"] * 0.3).sum() + out["parts"][0].sum() + (out["parts"][1][0] ** 2).sum() + out["sq"]["s"].sum()


@pytest.mark.parametrize("checkpointed", [False, True])
def test_a_segment_returning_dicts_lists_and_nested_tuples_matches_torch(checkpointed):
    """Any structure comes back as it was returned (as torch's non-reentrant checkpoint), with the plain run's
    gradients (bitwise) and torch's (use_reentrant=False) to round-off."""
    rng = np.random.default_rng(4)
    xa, wa = rng.standard_normal((3, 4)), rng.standard_normal((4, 4))
    grads = {}
    for T, ckpt in ((mt, checkpoint), (torch, torch.utils.checkpoint.checkpoint)):
        x, w = T.tensor(xa, requires_grad=True), T.tensor(wa, requires_grad=True)
        out = ckpt(_structured, T, x, w, use_reentrant=False) if checkpointed else _structured(T, x, w)
        assert (out["name"], out["parts"][1][1], out["parts"][1][2]) == ("block", 3, None)
        assert isinstance(out["parts"], list) and isinstance(out["parts"][1], tuple)
        _structured_loss(out).backward()
        grads[T.__name__] = (x.grad.numpy(), w.grad.numpy())
    for ours, ref in zip(grads["minitensor"], grads["torch"]):
        np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-12)
    if checkpointed:  # bitwise the plain run
        x, w = mt.tensor(xa, requires_grad=True), mt.tensor(wa, requires_grad=True)
        _structured_loss(_structured(mt, x, w)).backward()
        np.testing.assert_array_equal(grads["minitensor"][0], x.grad.numpy())
        np.testing.assert_array_equal(grads["minitensor"][1], w.grad.numpy())


def test_a_segment_returning_no_tensor_passes_through_as_torch():
    x = mt.randn(3, requires_grad=True)
    assert checkpoint(lambda x: 1.0, x, use_reentrant=False) == 1.0
    assert checkpoint(lambda x: None, x) is None
    kept = []
    assert checkpoint(lambda x: kept.append(x.exp()), x) is None  # a tensor leaving by a side channel
    kept[0].sum().backward()  # recomputes the segment for Exp's saved output
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x.detach().numpy()), rtol=1e-6)


# ----------------------------------------------------------------------------------------------- the model
TINY_MODEL = dict(d_model=16, num_heads=2, num_encoder_layers=2, num_decoder_layers=2, d_ff=32, dropout=0.1)
TINY_TRAIN = dict(steps=4, batch_size=8, train_size=40, eval_size=8, eval_every=2, checkpoint_every=2, warmup_steps=4)


def _tiny(**model_changes):
    model_cfg, train_cfg = default_configs("copy-reverse")
    return model_cfg.replace(**{**TINY_MODEL, **model_changes}), train_cfg.replace(**TINY_TRAIN)


def _params(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def _same_history(a: dict, b: dict):
    for key in ("step", "loss", "lr", "grad_norm", "layer_grad_norms", "eval"):
        assert a[key] == b[key], f"history {key} differs"


def test_training_with_activation_checkpointing_is_bitwise_the_plain_training(tmp_path):
    m, t = _tiny()
    plain = train(m, t, str(tmp_path / "plain"), progress=False)
    ckpt = train(m.replace(activation_checkpointing=True), t, str(tmp_path / "ckpt"), progress=False)
    _same_history(load_history(str(tmp_path / "plain")), load_history(str(tmp_path / "ckpt")))
    p0, p1 = _params(plain.model), _params(ckpt.model)
    assert p0.keys() == p1.keys() and all(np.array_equal(p0[k], p1[k]) for k in p0)
    assert load_checkpoint(str(tmp_path / "ckpt")).model_cfg.activation_checkpointing is True


def test_a_resume_may_switch_activation_checkpointing(tmp_path):
    m, t = _tiny()
    train(m, t, str(tmp_path / "a"), progress=False)
    train(m, t.replace(steps=2), str(tmp_path / "b"), progress=False)
    resumed = train(m.replace(activation_checkpointing=True), t, str(tmp_path / "b"), resume=True, progress=False)
    assert resumed.step == 4
    _same_history(load_history(str(tmp_path / "a")), load_history(str(tmp_path / "b")))
    with pytest.raises(ValueError, match="d_model: checkpoint 16 vs requested 32"):
        train(m.replace(d_model=32, activation_checkpointing=True), t, str(tmp_path / "b"), resume=True, progress=False)


def test_a_checkpoint_written_before_the_field_loads_without_it(tmp_path):
    m, t = _tiny()
    train(m.replace(activation_checkpointing=True), t.replace(steps=2), str(tmp_path), progress=False)
    file = str(tmp_path / "checkpoint.npz")
    state = mt.load(file)
    del state["model_config"]["activation_checkpointing"]  # as written before the field existed
    mt.save(state, file)
    assert load_checkpoint(str(tmp_path)).model_cfg.activation_checkpointing is False


def test_the_config_and_the_command_line_take_the_flag():
    with pytest.raises(TypeError, match="activation_checkpointing must be True or False, got int 1"):
        ModelConfig(10, 10, activation_checkpointing=1)
    args = build_parser().parse_args(["train", "--out", "x", "--activation-checkpointing"])
    assert args.activation_checkpointing is True
    args = build_parser().parse_args(["train", "--out", "x"])
    assert args.activation_checkpointing is None  # the preset's (False), or the checkpoint's with --resume


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_parity_report_with_activation_checkpointing_equals_the_plain_report(dtype):
    """torch.utils.checkpoint beside mt.utils.checkpoint, dropout on (shared masks replayed to the recompute), ReLU
    branches aligned, the HVP through checkpointed layers: every row as in the report without checkpointing."""
    common = dict(steps=2, batch_size=3, dropout=0.1, activation="relu")
    plain = run_report(ReportConfig("copy", dtype, "cpu", **common))
    ckpt = run_report(ReportConfig("copy", dtype, "cpu", activation_checkpointing=True, **common))
    assert ckpt.meta["model"]["activation_checkpointing"] is True
    # torch's checkpoint refuses its own forward AD (the report says so): the forward-mode group is the plain report's
    assert ckpt.meta["forward-mode"].startswith("skipped")
    plain_rows = [r for r in plain.rows if r.group != "forward-mode"]
    assert ckpt.passed and len(ckpt.rows) == len(plain_rows) > 100
    assert ckpt.rows == plain_rows
    # the ReLU inputs compared include the forward-mode group's forward passes, which the checkpointed report skips
    adjusted = {k: v for k, v in ckpt.meta["adjustments"].items() if k != "relu_inputs_compared"}
    assert adjusted == {k: v for k, v in plain.meta["adjustments"].items() if k != "relu_inputs_compared"}
    assert 0 < ckpt.meta["adjustments"]["relu_inputs_compared"] < plain.meta["adjustments"]["relu_inputs_compared"]


def test_a_recompute_takes_the_relu_branches_its_first_run_took():
    """ReluBranchAligner's correction (rare: none in the reports above) is applied again to a recomputed layer."""
    aligner = ReluBranchAligner(mt.nn.Module(), torch.nn.Module(), "float32")
    hook = aligner._align("encoder.layers.0.feed_forward.linear1")
    aligner._record("encoder.layers.0.feed_forward.linear1")(None, None, mt.tensor(np.array([1e-9, 1.0], np.float32)))
    out = torch.tensor([-1e-9, 1.0])
    first = hook(None, None, out)  # torch's -1e-9 takes our branch: +1e-9
    assert aligner.aligned == 1 and first[0] > 0
    RECOMPUTING.active = True
    try:
        again = hook(None, None, out)
    finally:
        RECOMPUTING.active = False
    assert torch.equal(first, again) and aligner.aligned == 1  # the same correction, not counted twice
