"""Whole-model gradcheck (parity/gradcheck.py, `python -m parity gradcheck`): the Transformer's derivative along
one random direction by reverse mode, forward mode and finite differences; a planted wrong rule (a backward, a
forward-mode rule) fails the check and is blamed by name, with the line that called it."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor.ops import LayerNorm, MatMul
from parity import gradcheck
from parity.__main__ import main


def _transformer(batch_size=4):
    return gradcheck.transformer_loss("copy-reverse", seed=0, batch_size=batch_size)


def _planted(original, scale=1.05, which=0):
    """A backward (or jvp) that returns `original`'s result with output `which` scaled: a wrong rule."""

    def wrong(ctx, *args):
        out = original(ctx, *args)
        if not isinstance(out, tuple):
            return out * scale
        return tuple(o * scale if i == which and o is not None else o for i, o in enumerate(out))

    return staticmethod(wrong)


def test_the_transformer_backward_agrees_with_finite_differences():
    loss_of, params, what = _transformer()
    result = gradcheck.check_model(loss_of, params, modes=("reverse",))
    assert result.passed, gradcheck.render(result, what, 0)
    assert result.blame is None and "130 tensors" in what
    r, n = result.derivatives["reverse"], result.derivatives["numerical"]
    assert r != 0 and abs(r - n) <= 1e-6 * abs(n)  # far inside the limit: float64 differences of a smooth loss


def test_the_transformer_forward_mode_agrees_with_finite_differences_and_reverse():
    loss_of, params, what = _transformer()
    result = gradcheck.check_model(loss_of, params)
    assert result.passed, gradcheck.render(result, what, 0)
    assert len(result.comparisons) == 3  # reverse and forward against finite differences, and each other


def test_a_planted_wrong_forward_mode_rule_in_the_transformer_is_blamed(monkeypatch):
    monkeypatch.setattr(LayerNorm, "jvp", _planted(LayerNorm.jvp, scale=1.05))
    loss_of, params, what = _transformer(batch_size=2)
    result = gradcheck.check_model(loss_of, params)
    failed = {c.what for c in result.comparisons if not c.passed}
    assert failed == {"forward vs finite differences", "forward vs reverse"}, gradcheck.render(result, what, 0)
    assert (result.blame.op, result.blame.mode) == ("LayerNorm", "forward")
    assert result.blame.site.startswith("transformer_np/")


def test_a_planted_wrong_backward_is_blamed_by_name_and_call_site(monkeypatch):
    monkeypatch.setattr(LayerNorm, "backward", _planted(LayerNorm.backward))  # dx 5% too large
    loss_of, params, what = _transformer()
    result = gradcheck.check_model(loss_of, params, modes=("reverse",))
    text = gradcheck.render(result, what, 0)
    assert not result.passed and "FAIL reverse vs finite differences" in text
    assert result.blame is not None and (result.blame.op, result.blame.mode) == ("LayerNorm", "reverse")
    assert "transformer_np/" in result.blame.site and ".py:" in result.blame.site  # the model's line, not the engine's
    assert "blame: the first primitive whose rule disagrees with finite differences: LayerNorm (backward)" in text


def test_a_wrong_weight_gradient_only_is_blamed_too(monkeypatch):
    monkeypatch.setattr(LayerNorm, "backward", _planted(LayerNorm.backward, scale=0.9, which=1))  # dw only
    loss_of, params, _ = _transformer(batch_size=2)
    result = gradcheck.check_model(loss_of, params, modes=("reverse",))
    assert not result.passed and result.blame.op == "LayerNorm"


def _small_net():
    """A loss of two weight matrices made of primitives with forward-mode rules (MatMul, Exp, Mul, Add, Sum)."""
    rng = np.random.default_rng(7)
    x = mt.tensor(rng.standard_normal((5, 4)))
    params = {"w1": mt.tensor(rng.standard_normal((4, 6)) * 0.5), "w2": mt.tensor(rng.standard_normal((6, 3)) * 0.5)}

    def loss_of(p):
        h = (x @ p["w1"]).exp() * 0.1
        return ((h @ p["w2"]) * (h @ p["w2"]) + h.sum()).sum()

    return loss_of, params


def test_forward_and_reverse_agree_with_finite_differences_and_each_other():
    loss_of, params = _small_net()
    result = gradcheck.check_model(loss_of, params)
    assert result.passed, gradcheck.render(result, "small net", 0)
    assert [c.what for c in result.comparisons] == [
        "reverse vs finite differences",
        "forward vs finite differences",
        "forward vs reverse",
    ]


def test_a_planted_wrong_forward_mode_rule_is_blamed(monkeypatch):
    monkeypatch.setattr(MatMul, "jvp", _planted(MatMul.jvp, scale=1.1))
    loss_of, params = _small_net()
    result = gradcheck.check_model(loss_of, params)
    failed = {c.what for c in result.comparisons if not c.passed}
    assert failed == {"forward vs finite differences", "forward vs reverse"}  # the backward is right
    assert (result.blame.op, result.blame.mode) == ("MatMul", "forward")
    assert "tests/parity/test_gradcheck.py" in result.blame.site and "in loss_of" in result.blame.site


def test_every_recorded_call_of_the_transformer_checks_out_on_its_own():
    loss_of, params, _ = _transformer(batch_size=2)
    calls = gradcheck.record_calls(lambda: loss_of({n: p.detach() for n, p in params.items()}))
    names = {c.fn.__name__ for c in calls}
    assert {"Linear", "LayerNorm", "AttentionWeights", "Embedding", "CrossEntropy"} <= names
    blame, checked = gradcheck.blame_op(calls, modes=("reverse",))
    assert blame is None and checked > 100


def test_check_model_refuses_float32_and_unknown_modes():
    loss_of, params = _small_net()
    with pytest.raises(TypeError, match="parameter 'w1' is float32; finite differences need float64"):
        gradcheck.check_model(loss_of, {n: p.float() for n, p in params.items()})
    with pytest.raises(ValueError, match="unknown mode 'sideways'"):
        gradcheck.check_model(loss_of, params, modes=("sideways",))


def test_the_command_line(capsys, monkeypatch):
    assert main(["gradcheck", "--mode", "reverse", "--batch-size", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("whole-model gradcheck: copy-reverse, float64") and "\npassed in " in out
    monkeypatch.setattr(LayerNorm, "backward", _planted(LayerNorm.backward))
    assert main(["gradcheck", "--mode", "reverse", "--batch-size", "2"]) == 1
    out = capsys.readouterr().out
    assert "blame: the first primitive whose rule disagrees with finite differences: LayerNorm" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--config", "nope"], "argument --config: invalid choice: 'nope'"),
        (["--mode", "sideways"], "argument --mode: invalid choice: 'sideways'"),
        (["--batch-size", "0"], "argument --batch-size: expected an integer >= 1, got 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(["gradcheck", *argv])
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and len(err.strip().splitlines()) == 1
