"""transformer_np against the PyTorch reference (parity/): the layer-by-layer report, weight transfer, decoding.

The report runs on CPU with a small batch and two optimizer steps; it must pass, and its table
must cover every parameter (gradient and value after the steps), every submodule's output and
every attention block's weights.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import PARITY_RTOL, assert_close
from parity import convert, render, results
from parity import decode as pt_decode
from parity import report as parity_report
from parity.hooks import SharedDropoutMasks
from parity.hooks import to_numpy as to_np
from parity.model import Dropout as TorchDropout
from parity.model import MultiHeadAttention as TorchMHA
from parity.report import ReportConfig, build_models, run_report
from parity.sides import warmup_lambda
from transformer_np import decode as np_decode
from transformer_np.config import get_preset
from transformer_np.hessian import hessian_vector_products
from transformer_np.model import MultiHeadAttention as NpMHA


def _assert_covers_everything(report, np_model, pt_model):
    params = {name for name, _ in pt_model.named_parameters()}
    assert params == {name for name, _ in np_model.named_parameters()}
    assert params <= report.names("param.grad"), params - report.names("param.grad")
    assert set(pt_model.state_dict()) <= report.names("param")
    forward = {name.split("#")[0] for name in report.names("forward")}
    called = {name for name, m in pt_model.named_modules() if name and not isinstance(m, torch.nn.ModuleList)}
    assert called <= forward, called - forward
    attn = {name for name, m in pt_model.named_modules() if isinstance(m, TorchMHA)}
    assert {f"{a}.attn_weights" for a in attn} == report.names("attn")
    assert "loss" in report.names("loss")
    # Every hooked output is on the loss's path, so every one has its gradient compared.
    assert report.names("grad") == report.names("forward")


CASES = [
    # config, dtype, norm_first, activation, dropout
    ("copy-reverse", "float64", False, "relu", None),
    ("copy-reverse", "float32", False, "relu", None),
    ("copy-reverse", "float64", True, "gelu", None),
    ("copy-reverse", "float32", True, "gelu", 0.0),
    ("copy", "float64", True, "relu", 0.0),
    ("copy", "float32", False, "gelu", None),
]


@pytest.mark.parametrize(
    "config,dtype,norm_first,activation,dropout", CASES, ids=["-".join(map(str, c)) for c in CASES]
)
def test_report_passes_and_covers_every_module(config, dtype, norm_first, activation, dropout):
    report = run_report(
        ReportConfig(
            config,
            dtype,
            "cpu",
            steps=2,
            norm_first=norm_first,
            activation=activation,
            dropout=dropout,
            batch_size=3,
            seed=1,
        )
    )
    assert report.passed, "\n" + render.table(report, failures_only=True)
    np_model, pt_model = build_models(
        get_preset(config).model.replace(norm_first=norm_first, activation=activation), dtype, "cpu", seed=1
    )
    _assert_covers_everything(report, np_model, pt_model)
    assert {r.group for r in report.rows} == set(results.ENCODER_DECODER_GROUPS)
    assert all(r.limit == PARITY_RTOL[dtype] for r in report.rows if r.rule == "rel")
    assert {r.name for r in report.rows if r.rule == "zero"} == (
        {n for n in report.names("param.grad") if n.endswith("W_k.bias")} | {"key-bias grads step 2"}
    )
    assert {"loss step 2", "param grads step 2", "grad norm step 1", "grad norm step 2"} <= report.names("step")
    assert report.meta["trajectory"] == ("free" if dtype == "float64" else "lockstep")


def test_report_variants_learned_positions_tied_embeddings_final_norm():
    report = run_report(
        ReportConfig(
            "copy", "float64", "cpu", steps=2, positional="learned", tie_embeddings=True, final_norm=True, batch_size=3
        )
    )
    assert report.passed, "\n" + render.table(report, failures_only=True)
    assert "pos_encoding.embedding.weight" in report.names("param.grad")
    assert {"encoder.norm", "decoder.norm"} <= report.names("forward")


def test_numpy_side_computes_the_training_loss_of_transformer_np(monkeypatch, rng):
    """The report's NumPy side runs transformer_np.loss.compute_loss, whose loss is its sequence_loss; the
    torch side's parity.loss.sequence_loss is the same function (float64, PAD labels ignored, smoothing 0.1)."""
    np_loss_module = importlib.import_module("transformer_np.loss")
    from parity.loss import sequence_loss as torch_loss
    from transformer_np.loss import sequence_loss as np_loss

    calls = []
    monkeypatch.setattr(np_loss_module, "sequence_loss", lambda *a: calls.append(a) or np_loss(*a))
    report = run_report(ReportConfig("copy", "float64", "cpu", steps=1, batch_size=2))
    assert calls and report.passed
    logits = rng.standard_normal((3, 5, 7))
    labels = rng.integers(0, 7, (3, 5))
    labels[0, 3:] = 0  # PAD
    a = mt.tensor(logits, requires_grad=True)
    b = torch.tensor(logits, requires_grad=True)
    la, lb = np_loss(a, labels, 0.1), torch_loss(b, labels, 0.1)
    la.backward()
    lb.backward()
    assert_close(la.detach().numpy(), lb.detach().numpy(), PARITY_RTOL["float64"], "loss")
    assert_close(a.grad.numpy(), b.grad.numpy(), PARITY_RTOL["float64"], "grad")


def test_report_catches_a_wrong_weight(monkeypatch):
    """Not vacuous: one perturbed weight on the torch side fails its forward rows and its gradient."""
    real = parity_report.np_to_torch

    def sabotaged(np_model, torch_model):
        real(np_model, torch_model)
        with torch.no_grad():
            torch_model.decoder.layers[1].feed_forward.linear2.bias[3] += 1e-4
        return torch_model

    monkeypatch.setattr(parity_report, "np_to_torch", sabotaged)
    report = run_report(ReportConfig("copy", "float64", "cpu", steps=1, dropout=0.0, batch_size=2))
    failed_forward = {r.name for r in report.failures() if r.kind == "forward"}
    assert not report.passed
    assert "decoder.layers.1.feed_forward.linear2" in failed_forward
    assert "decoder.layers.0.feed_forward.linear2" not in failed_forward  # upstream of the change
    assert "generator" in failed_forward and "loss" in {r.name for r in report.failures()}
    assert "decoder.layers.1.feed_forward.linear2.bias" in {r.name for r in report.failures() if r.kind == "param"}


def test_lockstep_and_free_trajectories_in_float64():
    """In float64 both trajectories pass; lockstep's parameters after the steps agree at least as well."""
    free = run_report(ReportConfig("copy", "float64", "cpu", steps=2, batch_size=2, trajectory="free"))
    lock = run_report(ReportConfig("copy", "float64", "cpu", steps=2, batch_size=2, trajectory="lockstep"))
    assert free.passed and lock.passed, "\n" + render.table(free, True) + render.table(lock, True)
    with pytest.raises(ValueError, match="unknown trajectory"):
        ReportConfig("copy", "float64", "cpu", steps=1, trajectory="sideways")


def test_dropout_masks_are_shared_in_call_order():
    """With dropout on, the report runs both sides in training mode on the same keep-masks."""
    report = run_report(ReportConfig("copy", "float64", "cpu", steps=1, dropout=0.3, batch_size=2))
    assert report.passed, "\n" + render.table(report, failures_only=True)
    np_model, pt_model = build_models(get_preset("copy").model.replace(dropout=0.3), "float64", "cpu", seed=0)
    masks = SharedDropoutMasks(0)
    masks.attach(np_model, pt_model)
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    out_np = np_model.pos_encoding.dropout(mt.tensor(x))
    out_pt = pt_model.pos_encoding.dropout(torch.tensor(x))
    masks.finish_step()
    assert_close(out_np.detach().numpy(), out_pt.numpy(), PARITY_RTOL["float64"], "dropout with a shared mask")
    assert (out_np.detach().numpy() == 0).any() and (out_np.detach().numpy() != 0).any()


def test_torch_dropout_mask_fn_checks_its_mask():
    d = TorchDropout(0.5)
    d.mask_fn = lambda shape: np.ones(shape, dtype=np.float32)
    with pytest.raises(ValueError, match="bool keep-mask"):
        d(torch.ones(2, 3))


# ----------------------------------------------------------------------------------------------
# Weight transfer
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_weight_transfer_round_trips_exactly(dtype):
    cfg = get_preset("copy").model.replace(positional="learned", final_norm=True)
    np_model, pt_model = build_models(cfg, dtype, "cpu", seed=3)
    a = convert.state_arrays(np_model)
    assert all(np.array_equal(a[k], v) for k, v in convert.state_arrays(pt_model).items())
    with torch.no_grad():
        for p in pt_model.parameters():
            p.mul_(-0.5)
    convert.torch_to_np(pt_model, np_model)
    b = convert.state_arrays(np_model)
    assert all(np.array_equal(b[k], -0.5 * a[k]) for k in a)
    assert all(b[k].dtype == np.dtype(dtype) for k in b)
    fresh, pt2 = build_models(cfg, dtype, "cpu", seed=4)
    convert.np_to_torch(np_model, pt2)
    assert all(np.array_equal(v, b[k]) for k, v in convert.state_arrays(pt2).items())


def test_weight_transfer_lists_differing_keys_and_dtypes():
    cfg = get_preset("copy").model
    np_model, _ = build_models(cfg, "float64", "cpu", seed=0)
    _, pt_other = build_models(cfg.replace(final_norm=True, num_decoder_layers=1), "float64", "cpu", seed=0)
    with pytest.raises(ValueError) as e:
        convert.np_to_torch(np_model, pt_other)
    msg = str(e.value)
    assert "encoder.norm.weight" in msg and "decoder.layers.1.norm3.bias" in msg
    _, pt32 = build_models(cfg, "float32", "cpu", seed=0)
    with pytest.raises(TypeError, match="dtypes differ"):
        convert.np_to_torch(np_model, pt32)


def test_mask_to_torch_rejects_non_bool():
    with pytest.raises(TypeError, match="bool mask"):
        convert.mask_to_torch(torch.ones(1, 1, 1, 3), 2, 1, 1, 3)


# ----------------------------------------------------------------------------------------------
# The two models outside the report: eval-mode logits, empty rows, decoding
# ----------------------------------------------------------------------------------------------
def test_fully_masked_query_rows_give_zeros_on_both_sides(rng):
    q = rng.standard_normal((2, 3, 8))
    mask = np.ones((2, 1, 3, 3), dtype=bool)
    mask[0, 0, 1, :] = False  # query 1 of sentence 0 sees nothing
    mt.set_default_dtype(mt.float64)
    a = NpMHA(8, 2, dropout=0.0)
    b = TorchMHA(8, 2, dropout=0.0).double()
    convert.load_arrays(b, convert.state_arrays(a))
    x_np, x_pt = mt.tensor(q, requires_grad=True), torch.tensor(q, requires_grad=True)
    out_np, out_pt = a(x_np, x_np, x_np, mt.tensor(mask)), b(x_pt, x_pt, x_pt, torch.tensor(mask))
    g = rng.standard_normal(out_pt.shape)
    (out_np * mt.tensor(g)).sum().backward()
    (out_pt * torch.tensor(g)).sum().backward()
    assert np.isfinite(x_pt.grad.numpy()).all()
    assert_close(out_np.detach().numpy(), out_pt.detach().numpy(), PARITY_RTOL["float64"], "output")
    assert_close(x_np.grad.numpy(), x_pt.grad.numpy(), PARITY_RTOL["float64"], "grad")


@pytest.mark.parametrize("use_cache", [True, False], ids=["cache", "no-cache"])
def test_greedy_and_beam_decoding_agree(use_cache):
    cfg = get_preset("copy").model.replace(num_encoder_layers=1, num_decoder_layers=1)
    np_model, pt_model = build_models(cfg, "float64", "cpu", seed=2)
    src, _ = parity_report.synthetic_batch(np.random.default_rng(0), 2, 6, 6, cfg.src_vocab_size, cfg.tgt_vocab_size)
    a = np_decode.greedy_decode(np_model, src, max_len=8, use_cache=use_cache)
    b = pt_decode.greedy_decode(pt_model, src, max_len=8, use_cache=use_cache)
    np.testing.assert_array_equal(a, b)
    beams_np = np_decode.beam_search(np_model, src, beam_size=3, max_len=5, n_best=2, use_cache=use_cache)
    beams_pt = pt_decode.beam_search(pt_model, src, beam_size=3, max_len=5, n_best=2, use_cache=use_cache)
    for hyps_np, hyps_pt in zip(beams_np, beams_pt):
        assert [h[0].tolist() for h in hyps_np] == [h[0].tolist() for h in hyps_pt]
        assert_close(
            np.array([h[1] for h in hyps_np]), np.array([h[1] for h in hyps_pt]), PARITY_RTOL["float64"], "beam scores"
        )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_decoding_agrees_when_rows_finish_at_different_steps(dtype):
    """Greedy and beam search on both sides with EOS made likely: rows end at different steps, sentences leave
    the beam batch (the cache and memory rows shrink), and the torch side's per-token arithmetic (argmax, flags,
    float64 log_softmax, the stable sort) picks the same tokens as transformer_np's."""
    cfg = get_preset("copy").model.replace(num_encoder_layers=1, num_decoder_layers=1)
    np_model, pt_model = build_models(cfg, dtype, "cpu", seed=4)
    for model in (np_model, pt_model):  # EOS among the likely tokens: hypotheses end early
        if isinstance(model, torch.nn.Module):
            with torch.no_grad():
                model.generator.bias[2] += 3.0
        else:
            model.generator.bias.data[2] += 3.0
    src, _ = parity_report.synthetic_batch(np.random.default_rng(1), 6, 7, 6, cfg.src_vocab_size, cfg.tgt_vocab_size)
    a = np_decode.greedy_decode(np_model, src, max_len=12)
    b = pt_decode.greedy_decode(pt_model, src, max_len=12)
    np.testing.assert_array_equal(a, b)
    beams_np = np_decode.beam_search(np_model, src, beam_size=4, max_len=12, n_best=3)
    beams_pt = pt_decode.beam_search(pt_model, src, beam_size=4, max_len=12, n_best=3)
    lengths = [len(h[0]) for hyps in beams_np for h in hyps]
    assert min(lengths) < 12 and len(set(lengths)) > 1, lengths  # the case this test is for
    for hyps_np, hyps_pt in zip(beams_np, beams_pt):
        assert [h[0].tolist() for h in hyps_np] == [h[0].tolist() for h in hyps_pt]
        assert_close(
            np.array([h[1] for h in hyps_np]), np.array([h[1] for h in hyps_pt]), PARITY_RTOL[dtype], "beam scores"
        )


def test_parity_cached_decoding_equals_full_recomputation():
    cfg = get_preset("copy").model
    _, pt_model = build_models(cfg, "float64", "cpu", seed=5)
    pt_model.eval()
    src = torch.randint(4, cfg.src_vocab_size, (2, 6))
    tgt = torch.randint(4, cfg.tgt_vocab_size, (2, 5))
    with torch.no_grad():
        memory = pt_model.encode(src)
        full = pt_model.decode(tgt, memory)
        cache = pt_model.init_cache()
        steps = [pt_model.decode(tgt[:, t : t + 1], memory, cache=cache) for t in range(5)]
    assert_close(torch.cat(steps, dim=1).numpy(), full.numpy(), PARITY_RTOL["float64"], "cached logits")


def test_parity_model_rejects_bad_input():
    cfg = get_preset("copy").model
    _, pt_model = build_models(cfg, "float32", "cpu", seed=0)
    with pytest.raises(TypeError, match="integer"):
        pt_model(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="out of range"):
        pt_model(torch.full((2, 3), cfg.src_vocab_size), torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(TypeError, match="bool mask"):
        pt_model(
            torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long), src_mask=torch.ones(2, 1, 1, 3)
        )


# ----------------------------------------------------------------------------------------------
# The judging rules: each as tight as its row claims (each test fails with the rule it replaced)
# ----------------------------------------------------------------------------------------------
def test_rel_rule_judges_a_small_array_relative_to_its_own_scale():
    """An array of scale 1e-5 off by 1e-8 of itself: 'rel' fails it in float64 (rtol 1e-9).

    The floor FLOOR * max(1, max|ref|) used before judged such an array on absolute error
    (1e-13 / 1e-3 = 1e-10 <= 1e-9: passed)."""
    ref = 1e-5 * (1.0 + np.arange(6.0))
    ours = ref * (1 + 1e-8)
    report = results.Report(meta={})
    report.check_close("grads", "param.grad", "small", ours, ref, PARITY_RTOL["float64"])
    row = report.rows[0]
    assert not row.ok and row.rule == "rel" and row.value == pytest.approx(1e-8, rel=1e-3)
    from minitensor.testing import error_stats

    assert error_stats(ours, ref)[1] <= PARITY_RTOL["float64"]  # the old, loose measure


def test_zero_rule_limit_is_n_eps_sum_of_the_terms():
    """The limit is derived from eps and the size of the sum: n * eps * sum|terms|, per entry."""
    from minitensor.testing import FLOOR, sum_roundoff_limit

    rng = np.random.default_rng(0)
    terms = rng.standard_normal((384, 4))
    terms -= terms.mean(axis=0)  # columns sum to 0 exactly in math
    limit = sum_roundoff_limit(terms, "float64")
    np.testing.assert_allclose(limit, 384 * np.finfo(np.float64).eps * np.abs(terms).sum(axis=0))
    assert np.all(np.abs(terms.sum(axis=0)) <= limit)  # the computed sum is round-off
    report = results.Report(meta={})
    off = np.array([0.0, 0.0, 1e-9, 0.0])  # a real error of 1e-9
    report.check_zero("grads", "param.grad", "b", (terms.sum(axis=0) + off, terms.sum(axis=0)), limit, "")
    row = report.rows[0]
    assert not row.ok and row.rule == "zero" and row.value == pytest.approx(1e-9, rel=1e-3)
    assert row.limit == pytest.approx(limit[2])
    scale = float(np.abs(terms).max())
    assert row.value <= FLOOR["float64"] * max(1.0, scale)  # the old limit passed it


def test_zero_rule_catches_a_key_bias_gradient_the_old_floor_passed(monkeypatch):
    """A key-bias gradient off by 1e-11 on the transformer_np side (a real bug, 1e5 times the round-off):
    the 'zero' row fails; FLOOR * scale (1e-3 of the sibling W_q.bias gradient) would have passed it."""
    from minitensor.testing import FLOOR

    real_loss = parity_report.NpSide.loss

    def with_a_bias_leak(self, src, tgt):
        loss = real_loss(self, src, tgt)
        b = self.model.encoder.layers[0].self_attn.W_k.bias
        return loss + (b * 1e-11).sum() - float((b.detach().numpy() * 1e-11).sum())  # same value, gradient + 1e-11

    monkeypatch.setattr(parity_report.NpSide, "loss", with_a_bias_leak)
    report = run_report(ReportConfig("copy", "float64", "cpu", steps=2, dropout=0.0, batch_size=2))
    rows = {r.name: r for r in report.rows if r.kind in ("param.grad", "step")}
    row = rows["encoder.layers.0.self_attn.W_k.bias"]
    assert row.rule == "zero" and not row.ok and row.value >= 1e-11 * 0.99 and row.limit < 1e-13
    assert "n*eps*sum|dK|" in row.note
    assert not rows["key-bias grads step 2"].ok
    sibling = rows["encoder.layers.0.self_attn.W_q.bias"]
    assert row.value <= FLOOR["float64"] * max(1.0, sibling.max_abs)  # the old rule's limit, loosely
    assert rows["decoder.layers.0.self_attn.W_k.bias"].ok  # the others still pass


def test_drift_rule_limit_is_adams_step_bound_for_round_off_gradients():
    """Free trajectory: the key biases after the steps are judged by Adam's step bound for gradients as small as
    theirs, sum of lr * min(1, max|g| / eps), shown as the row's limit. The old limit, the sum of the lrs, passed
    a drift of 1e-8 (a real error for round-off gradients); this one fails it."""
    report = run_report(ReportConfig("copy", "float64", "cpu", steps=2, batch_size=2, trajectory="free"))
    preset = get_preset("copy")
    rate = warmup_lambda(preset.model.d_model, preset.train.warmup_steps, 1.0)
    lrs = [preset.train.lr * rate(0), preset.train.lr * rate(1)]
    g = max(r.limit for r in report.rows if r.rule == "zero")  # passed: every key-bias gradient entry is below
    drift = [r for r in report.rows if r.rule == "drift"]
    assert {r.name for r in drift} == {n for n in report.names("param") if n.endswith("W_k.bias")}
    assert all(r.ok and r.value <= r.limit for r in drift)
    assert all(0 < r.limit <= sum(lrs) * g / preset.train.eps for r in drift)
    assert all(r.limit < 1e-8 < sum(lrs) for r in drift)
    assert parity_report.adam_step_bound([1e-3, 2e-3], [1e-15, 3e-15], (0.9, 0.98), 1e-9) == pytest.approx(
        1e-3 * 1e-6 + 2e-3 * 3e-6
    )
    assert parity_report.adam_step_bound([1e-3], [1.0], (0.9, 0.98), 1e-9) == pytest.approx(1e-3)
    assert parity_report.adam_step_bound([1e-3], [1.0], (0.9, 0.999), 1e-9) == pytest.approx(1e-3 * 0.1 / 0.001**0.5)
    bound = drift[0].limit
    row = results.Report(meta={})
    row.check_drift("b", np.full(3, 1e-8), np.zeros(3), np.zeros(3), bound, "")
    assert not row.rows[0].ok and row.rows[0].value == pytest.approx(1e-8)


# ----------------------------------------------------------------------------------------------
# The report for people: the table, the header and legend, plurals, --failures-only
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_report():
    return run_report(ReportConfig("copy-reverse", "float32", "cpu", steps=2, batch_size=2, seed=3))


def test_text_fits_120_columns_with_every_column_headed(small_report):
    out = render.text(small_report)
    lines = out.splitlines()
    assert max(map(len, lines)) <= 120
    head = next(line for line in lines if line.startswith("kind"))
    assert head.split() == ["kind", "module", "/", "parameter", "shape", "rule", "value", "limit", "result"]
    width = len(head)
    table_rows = render.table(small_report).splitlines()[2:]
    table_rows = [line for line in table_rows if not line.startswith("[")]  # the group headings
    assert len(table_rows) == len(small_report.rows) and all(len(line) <= width for line in table_rows)
    for g in results.ENCODER_DECODER_GROUPS:
        n = sum(r.group == g for r in small_report.rows)
        assert f"[{g}: {render.plural(n, 'check')}]" in out
    assert "[logits: 1 check]" in out and "[loss: 1 check]" in out
    long_name = results.Report(
        meta=small_report.meta,
        rows=[
            small_report.rows[0].__class__(
                "encoder",
                "forward",
                "encoder." + "very_long_module_name." * 8 + "end",
                (2, 3),
                0.0,
                0.0,
                "rel",
                0.0,
                1e-4,
                True,
            )
        ],
    )
    assert max(map(len, render.table(long_name).splitlines())) <= 120


def test_header_states_the_reference_adjustments_with_counts(small_report):
    head = "\n".join(render.header(small_report))
    a = small_report.meta["adjustments"]
    assert a["relu_inputs_compared"] > 0 and a["relu_branches_aligned"] >= 0
    assert "reference adjusted, torch side only" in head
    assert "the total norm is accumulated in float64" in head
    assert f"for {a['relu_branches_aligned']:,} of {a['relu_inputs_compared']:,} ReLU inputs" in " ".join(head.split())
    md = render.markdown(small_report)
    assert "ReLU inputs" in md and "accumulated in float64" in md


def test_legend_explains_kinds_rules_and_trajectories(small_report):
    legend = "\n".join(render.legend(small_report.meta))
    for word in (
        "forward:",
        "attn:",
        "loss:",
        "grad:",
        "param.grad:",
        "step:",
        "param:",
        "rel:",
        "zero:",
        "drift:",
        "free:",
        "lockstep:",
    ):
        assert word in legend, word
    kinds = {r.kind for r in small_report.rows}
    assert all(f"{k}:" in legend for k in kinds)
    assert sum("free:" in line or "lockstep:" in line for line in legend.splitlines()) == 2


def test_plurals_and_failures_only(small_report):
    assert render.plural(1, "check") == "1 check" and render.plural(2, "check") == "2 checks"
    assert render.plural(0, "check") == "0 checks"
    assert render.table(small_report, failures_only=True) == (
        f"no failures: all {len(small_report.rows)} checks within their limits"
    )
    one = results.Report(meta=small_report.meta, rows=[small_report.rows[0]])
    assert render.verdict(one) == "PASS: all 1 check within their limits"
    assert render.table(one, failures_only=True) == "no failures: all 1 check within their limits"
    bad = results.Report(meta=small_report.meta)
    bad.missing("loss", "loss", "loss", 1e-4, "no such output in torch")
    bad.rows.append(small_report.rows[0])
    out = render.table(bad, failures_only=True)
    assert "FAIL" in out and "no such output in torch" in out and "[loss: 1 check]" in out
    assert render.verdict(bad) == "FAIL: 1 check of 2 outside their limits"
    summary = render.summary_table(bad)
    assert summary.splitlines()[0].split()[:3] == ["group", "checks", "failed"]


# ----------------------------------------------------------------------------------------------
# The Hessian-vector product rows
# ----------------------------------------------------------------------------------------------
HVP_CASES = [(norm_first, activation) for norm_first in (False, True) for activation in ("relu", "gelu")]


@pytest.mark.parametrize(
    "norm_first,activation", HVP_CASES, ids=[f"{'pre' if n else 'post'}-norm-{a}" for n, a in HVP_CASES]
)
def test_whole_model_hvp_equals_torch_to_1e9_in_float64(norm_first, activation):
    """H v of the copy-reverse model's training loss, every parameter's block and the whole vector, rule 'rel'."""
    report = run_report(
        ReportConfig(
            "copy-reverse",
            "float64",
            "cpu",
            steps=0,
            norm_first=norm_first,
            activation=activation,
            batch_size=3,
            seed=2,
        )
    )
    hvp = [r for r in report.rows if r.group == "hvp"]
    assert hvp and all(r.ok and r.rule == "rel" and r.limit == PARITY_RTOL["float64"] == 1e-9 for r in hvp), (
        "\n" + render.table(report, failures_only=True)
    )
    np_model, _ = build_models(get_preset("copy-reverse").model, "float64", "cpu", seed=2)
    names = [n for n, _ in np_model.named_parameters()]
    assert {r.name for r in hvp} >= {n for n in names if not n.endswith("W_k.bias")}
    whole = next(r for r in hvp if r.name.startswith("H v, all"))
    assert whole.shape == (sum(p.numel() for p in np_model.parameters()),)
    assert "v . H v (curvature along v)" in report.names("hvp")


def test_hvp_rows_catch_a_wrong_second_derivative(monkeypatch):
    """Not vacuous: a change of 1e-7 relative in one block of minitensor's H v fails that block and the whole."""
    real = parity_report.hessian_vector_products

    def sabotaged(grad, loss, params):
        grads, hvp = real(grad, loss, params)

        def wrong(direction, retain_graph=True):
            out = hvp(direction, retain_graph)
            if grad is mt.autograd.grad:
                out[-1] = out[-1] * (1 + 1e-7)  # the output projection's bias
            return out

        return grads, wrong

    monkeypatch.setattr(parity_report, "hessian_vector_products", sabotaged)
    report = run_report(ReportConfig("copy", "float64", "cpu", steps=0, dropout=0.0, batch_size=2))
    failed = {r.name for r in report.failures()}
    assert "generator.bias" in failed and any(n.startswith("H v, all") for n in failed)
    assert {r.name for r in report.failures()} <= report.names("hvp")


def test_hessian_vector_product_is_the_derivative_of_the_directional_gradient(rng):
    """On f(x) = sum(x^3): H = diag(6 x), so H v = 6 x v, with either library's grad."""
    x, v = rng.standard_normal(5), rng.standard_normal(5)
    for lib, grad in ((mt, mt.autograd.grad), (torch, torch.autograd.grad)):
        t = lib.tensor(x, requires_grad=True)
        hv = hessian_vector_products(grad, (t**3).sum(), [t])[1]([lib.tensor(v)], retain_graph=False)[0]
        assert_close(to_np(hv), 6 * x * v, PARITY_RTOL["float64"], f"{lib.__name__} H v")


def test_hessian_vector_products_serve_many_directions_from_one_recorded_gradient(rng):
    """f(x, y) = sum(x^2 y): the gradient is returned, and H v for several directions (the power iteration's
    use) equals H v computed afresh each time, on both libraries alike."""
    x, y = rng.standard_normal(4), rng.standard_normal(4)
    directions = [(rng.standard_normal(4), rng.standard_normal(4)) for _ in range(3)]
    for lib, grad in ((mt, mt.autograd.grad), (torch, torch.autograd.grad)):
        a, b = lib.tensor(x, requires_grad=True), lib.tensor(y, requires_grad=True)
        grads, hvp = hessian_vector_products(grad, (a * a * b).sum(), [a, b])
        assert_close(to_np(grads[0]), 2 * x * y, PARITY_RTOL["float64"], f"{lib.__name__} d/dx")
        for u, w in directions:  # H = [[2 diag(y), 2 diag(x)], [2 diag(x), 0]]
            hu, hw = hvp([lib.tensor(u), lib.tensor(w)])
            assert_close(to_np(hu), 2 * y * u + 2 * x * w, PARITY_RTOL["float64"], f"{lib.__name__} (H v)_x")
            assert_close(to_np(hw), 2 * x * u, PARITY_RTOL["float64"], f"{lib.__name__} (H v)_y")
