"""The parity report's forward-mode group (parity/forward.py): the loss's directional derivative J v and the
forward-over-reverse H v, transformer_np against torch.func, in float64 and float32 (CUDA: marked `cuda`);
J v equals the reverse-mode gradient dotted with v; a wrong rule fails a row; a missing rule is named."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from minitensor.ops import Embedding, MatMul
from minitensor.testing import PARITY_RTOL, error_stats
from parity import forward, render
from parity.report import ReportConfig, build_models, run_report, synthetic_batch
from parity.results import Report
from transformer_np.config import get_preset

ROWS = {"dL/dv = J v (forward mode)", "H v, all {n} parameters", "v . H v (forward over reverse)"}


def _setup(dtype="float64", device="cpu"):
    cfg = get_preset("copy-reverse").model
    np_model, pt_model = build_models(cfg, dtype, device, 0)
    src, tgt = synthetic_batch(np.random.default_rng(0), 3, 12, 22, cfg.src_vocab_size, cfg.tgt_vocab_size)
    return np_model, pt_model, src, tgt


def _group(dtype, device="cpu"):
    """The forward-mode group's rows alone (the whole report runs it too: tests/parity/test_report.py)."""
    np_model, pt_model, src, tgt = _setup(dtype, device)
    report = Report(meta={})
    forward.compare_forward_mode(report, np_model, pt_model, src, tgt, 0.1, dtype, seed=2)
    assert np_model.training and pt_model.training  # back in train mode after the group's eval-mode rows
    return report


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_forward_mode_group_passes_in_both_dtypes(dtype):
    report = _group(dtype)
    n = len(dict(_setup(dtype)[0].named_parameters()))
    assert {r.name for r in report.rows} == {name.format(n=n) for name in ROWS}
    assert all(r.group == forward.GROUP and r.limit == PARITY_RTOL[dtype] for r in report.rows)
    assert all(r.ok for r in report.rows), "\n" + render.table(report, failures_only=True)
    assert {r.kind for r in report.rows} == {"jvp", "fwd-hvp"}


def test_the_whole_report_has_the_group():
    report = run_report(ReportConfig("copy", "float64", "cpu", steps=0, batch_size=2, seed=2))
    rows = [r for r in report.rows if r.group == forward.GROUP]
    assert len(rows) == 3 and all(r.ok for r in rows), "\n" + render.table(report, failures_only=True)


def test_the_directional_derivative_is_the_gradient_dotted_with_the_direction(rng):
    np_model, _, src, tgt = _setup()
    np_model.eval()
    params = dict(np_model.named_parameters())
    direction = {n: rng.standard_normal(p.shape) for n, p in params.items()}
    loss_of = forward.np_loss_of(np_model, src, tgt, 0.1)
    jv, _ = forward.np_forward_mode(loss_of, params, direction)
    loss = loss_of(params)
    loss.backward()
    reverse = sum(float((p.grad.numpy() * direction[n]).sum()) for n, p in params.items())
    assert abs(float(jv) - reverse) <= PARITY_RTOL["float64"] * abs(reverse)


def test_torch_func_gives_the_reference_the_same_values(rng):
    """The reference side by torch.autograd.forward_ad equals torch.func.jvp and jvp(grad) (without the aligner)."""
    _, pt_model, src, tgt = _setup()
    pt_model.eval()
    params = dict(pt_model.named_parameters())
    direction = {n: rng.standard_normal(tuple(p.shape)) for n, p in params.items()}
    loss_of = forward.torch_loss_of(pt_model, src, tgt, 0.1)
    jv, hv = forward.torch_forward_mode(loss_of, params, direction)
    primals = {n: p.detach() for n, p in params.items()}
    tangents = {n: torch.from_numpy(d) for n, d in direction.items()}
    _, jv_func = torch.func.jvp(loss_of, (primals,), (tangents,))
    _, hv_func = torch.func.jvp(torch.func.grad(loss_of), (primals,), (tangents,))
    assert abs(float(jv) - jv_func.item()) <= PARITY_RTOL["float64"] * abs(jv_func.item())
    flat = np.concatenate([hv[n].reshape(-1) for n in params])
    flat_func = np.concatenate([hv_func[n].detach().numpy().reshape(-1) for n in params])
    assert error_stats(flat, flat_func, scale_free=True)[1] <= PARITY_RTOL["float64"]


def _planted_matmul_jvp(original):
    def wrong(ctx, *tangents):
        return original(ctx, *tangents) * 1.1

    return staticmethod(wrong)


def test_a_wrong_forward_mode_rule_fails_the_rows(monkeypatch):
    monkeypatch.setattr(MatMul, "jvp", _planted_matmul_jvp(MatMul.jvp))  # attention's products, 10% off
    rows = {r.name: r for r in _group("float64").rows}
    assert not rows["dL/dv = J v (forward mode)"].ok
    assert not rows["v . H v (forward over reverse)"].ok


def test_a_primitive_without_a_rule_is_a_failing_row_naming_it(monkeypatch):
    monkeypatch.setattr(Embedding, "jvp", None)
    monkeypatch.setattr(Embedding, "jvp_kind", None)
    rows = _group("float64").rows
    assert len(rows) == 2 and not any(r.ok for r in rows)
    assert all("forward-mode AD through Embedding" in r.note for r in rows)


@pytest.mark.cuda
def test_the_forward_mode_group_passes_on_cuda_float32():
    report = _group("float32", device="cuda")
    assert len(report.rows) == 3 and all(r.ok for r in report.rows), "\n" + render.table(report, failures_only=True)
