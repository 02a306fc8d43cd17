"""transformer_np/training/: schedules, evaluation, checkpoints, exact resume, Ctrl-C, config mismatch."""

import os
import re

import numpy as np
import pytest

import minitensor as mt
from tests.support import ROOT
from transformer_np.config import ModelConfig, TrainConfig
from transformer_np.data import PAD_ID, get_task, make_batches
from transformer_np.training import (
    build_model,
    build_optimizer,
    compute_loss,
    config_for_task,
    default_configs,
    evaluate,
    layer_groups,
    load_checkpoint,
    load_history,
    schedule_curve,
    train,
)

TINY_MODEL = dict(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32, dropout=0.1)
TINY_TRAIN = dict(steps=6, batch_size=8, train_size=40, eval_size=8, eval_every=3, checkpoint_every=3, warmup_steps=4)


def tiny(task="copy-reverse", **train_changes):
    model_cfg, train_cfg = default_configs(task)
    return model_cfg.replace(**TINY_MODEL), train_cfg.replace(**{**TINY_TRAIN, **train_changes})


def _params(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def _assert_bitwise_equal(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), f"{k} differs"


def test_default_configs_follow_the_presets():
    m, t = default_configs("copy")
    assert (m.d_model, m.num_heads, m.num_encoder_layers, m.d_ff, m.src_vocab_size) == (128, 4, 2, 512, 100)
    m, t = default_configs("copy-reverse")
    assert (m.d_model, m.num_heads, m.num_encoder_layers, m.src_vocab_size) == (128, 8, 3, 20)
    m, t = default_configs("toy-translation")
    task = get_task("toy-translation")
    assert (m.src_vocab_size, m.tgt_vocab_size) == (len(task.src_vocab), len(task.tgt_vocab))
    assert default_configs("addition")[1].task == "addition"


def test_schedules():
    m, t = tiny()
    lrs = schedule_curve(m, t.replace(schedule="warmup", lr=1.0, warmup_steps=10), 40)
    n = np.arange(1, 41)
    np.testing.assert_allclose(lrs, m.d_model**-0.5 * np.minimum(n**-0.5, n * 10**-1.5), rtol=1e-12)
    assert np.argmax(lrs) == 9
    lrs = schedule_curve(m, t.replace(schedule="step", lr=0.1, step_size=5, gamma=0.5), 12)
    np.testing.assert_allclose(lrs, [0.1] * 5 + [0.05] * 5 + [0.025] * 2)
    lrs = schedule_curve(m, t.replace(schedule="constant", lr=3e-4), 5)
    np.testing.assert_allclose(lrs, 3e-4)
    with pytest.raises(ValueError, match="unknown schedule 'cosine'"):
        schedule_curve(m, t.replace(schedule="cosine"), 3)


def test_adam_uses_the_paper_betas():
    m, t = tiny()
    opt = build_optimizer(build_model(m, 0), t)
    g = opt.param_groups[0]
    assert tuple(g["betas"]) == (0.9, 0.98) and g["eps"] == 1e-9


def test_loss_ignores_padding_and_evaluate_counts_tokens():
    m, t = tiny()
    model = build_model(m, 0)
    model.eval()
    task = get_task("copy-reverse")
    pairs = task.splits(12, 4, 0)[1]
    src, tgt = make_batches(pairs, 4)[0]
    with mt.no_grad():
        loss, logits, labels = compute_loss(model, src, tgt, 0.0)
    lp = logits.numpy() - logits.numpy().max(-1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    keep = labels != PAD_ID
    assert (~keep).any()  # the batch really has padding
    nll = -np.take_along_axis(lp, labels[..., None], -1)[..., 0]
    np.testing.assert_allclose(loss.item(), nll[keep].mean(), rtol=1e-5)
    metrics = evaluate(model, pairs, batch_size=4)
    acc = (logits.numpy().argmax(-1) == labels)[keep].mean()
    np.testing.assert_allclose(metrics["token_acc"], acc)
    np.testing.assert_allclose(metrics["loss"], loss.item(), rtol=1e-5)
    assert 0.0 <= metrics["exact_acc"] <= 1.0 and metrics["num_examples"] == 4
    assert model.training is False


def test_train_writes_history_and_checkpoint(tmp_path):
    m, t = tiny()
    res = train(m, t, str(tmp_path), progress=False)
    assert res.step == 6
    hist = load_history(str(tmp_path))
    assert hist["step"] == list(range(1, 7))
    assert len(hist["loss"]) == len(hist["lr"]) == len(hist["grad_norm"]) == 6
    groups = hist["layer_grad_norms"]
    assert {"encoder.layers.0", "decoder.layers.0", "src_embed", "tgt_embed", "generator"} <= set(groups)
    assert all(len(v) == 6 and all(x > 0 for x in v) for v in groups.values())
    assert [e["step"] for e in hist["eval"]] == [3, 6]
    assert set(res.metrics) >= {"loss", "token_acc", "exact_acc"}
    ckpt = load_checkpoint(str(tmp_path))
    assert ckpt.step == 6 and ckpt.model.training is False and ckpt.model_cfg == m and ckpt.train_cfg == t
    _assert_bitwise_equal(_params(ckpt.model), _params(res.model))
    assert layer_groups(ckpt.model).keys() == groups.keys()


def test_resume_is_bitwise_identical(tmp_path):
    m, t = tiny()
    straight = train(m, t, str(tmp_path / "a"), progress=False)
    train(m, t.replace(steps=3), str(tmp_path / "b"), progress=False)
    resumed = train(m, t, str(tmp_path / "b"), resume=True, progress=False)
    assert resumed.step == 6
    _assert_bitwise_equal(_params(straight.model), _params(resumed.model))
    hb = load_history(str(tmp_path / "b"))
    assert hb["step"] == list(range(1, 7))
    assert hb["loss"] == straight.history["loss"]


def test_keyboard_interrupt_saves_a_checkpoint_and_resumes_exactly(tmp_path):
    m, t = tiny(checkpoint_every=100)
    straight = train(m, t, str(tmp_path / "a"), progress=False)

    def stop_at_4(step, record):
        if step == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(m, t, str(tmp_path / "b"), progress=False, callback=stop_at_4)
    assert load_checkpoint(str(tmp_path / "b")).step == 4
    resumed = train(m, t, str(tmp_path / "b"), resume=True, progress=False)
    _assert_bitwise_equal(_params(straight.model), _params(resumed.model))


def test_resume_with_a_different_config_names_the_fields(tmp_path):
    m, t = tiny(steps=2)
    train(m, t, str(tmp_path), progress=False)
    with pytest.raises(ValueError, match=r"d_model: checkpoint 16 vs requested 32"):
        train(m.replace(d_model=32), t, str(tmp_path), resume=True, progress=False)
    with pytest.raises(ValueError, match=r"lr: checkpoint 1.0 vs requested 0.5.*seed|seed.*lr"):
        train(m, t.replace(lr=0.5, seed=3), str(tmp_path), resume=True, progress=False)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        train(m, t, str(tmp_path / "nowhere"), resume=True, progress=False)


def test_bad_configs_are_clear_errors(tmp_path):
    m, t = tiny()
    with pytest.raises(ValueError, match="needs src/tgt vocabularies of 20/20"):
        train(m.replace(src_vocab_size=10), t, str(tmp_path), progress=False)
    with pytest.raises(ValueError, match="max_len=8"):
        train(m.replace(max_len=8), t, str(tmp_path), progress=False)
    with pytest.raises(ValueError, match="unknown task"):
        train(m, t.replace(task="nope"), str(tmp_path), progress=False)
    with pytest.raises(TypeError, match="ModelConfig, TrainConfig"):
        train(t, m, str(tmp_path), progress=False)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(str(tmp_path / "missing"))


def test_config_for_task_sets_vocab_sizes():
    task = get_task("toy-translation")
    cfg = config_for_task(ModelConfig(src_vocab_size=1, tgt_vocab_size=1), task)
    assert cfg.src_vocab_size == len(task.src_vocab) and cfg.tgt_vocab_size == len(task.tgt_vocab)


def test_real_sigint_is_held_to_the_step_boundary(tmp_path):
    import signal

    m, t = tiny(checkpoint_every=100)
    straight = train(m, t, str(tmp_path / "a"), progress=False)
    seen = []

    def ctrl_c_at_3(step, record):
        seen.append(step)
        if step == 3:
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C sends

    with pytest.raises(KeyboardInterrupt):
        train(m, t, str(tmp_path / "b"), progress=False, callback=ctrl_c_at_3)
    assert seen == [1, 2, 3] and load_checkpoint(str(tmp_path / "b")).step == 3
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored
    resumed = train(m, t, str(tmp_path / "b"), resume=True, progress=False)
    _assert_bitwise_equal(_params(straight.model), _params(resumed.model))


@pytest.mark.parametrize(
    "cls, changes, message",
    [
        (ModelConfig, dict(num_encoder_layers=-1), "expected num_encoder_layers >= 1, got num_encoder_layers=-1"),
        (ModelConfig, dict(d_model=0), "ModelConfig: expected d_model >= 1, got d_model=0"),
        (
            ModelConfig,
            dict(d_model=10, num_heads=4),
            "d_model must be divisible by num_heads, got d_model=10 and num_heads=4",
        ),
        (ModelConfig, dict(dropout=1.0), "ModelConfig: expected dropout in [0, 1), got dropout=1.0"),
        (
            ModelConfig,
            dict(activation="tanh"),
            "ModelConfig: unknown activation 'tanh': expected one of 'relu', 'gelu'",
        ),
        (ModelConfig, dict(d_ff=2.5), "ModelConfig: d_ff must be an int, got float 2.5"),
        (ModelConfig, dict(norm_first=1), "ModelConfig: norm_first must be True or False, got int 1"),
        (TrainConfig, dict(batch_size=0), "TrainConfig: expected batch_size >= 1, got batch_size=0"),
        (TrainConfig, dict(eval_size=0), "TrainConfig: expected eval_size >= 1, got eval_size=0"),
        (TrainConfig, dict(lr=float("nan")), "TrainConfig: expected lr in (0, inf), got lr=nan"),
        (TrainConfig, dict(betas=(0.9,)), "TrainConfig: betas must be a pair (beta1, beta2), got (0.9,)"),
        (TrainConfig, dict(task="nope"), "TrainConfig: unknown task 'nope'"),
    ],
)
def test_configs_refuse_every_bad_field_with_the_command_lines_message(cls, changes, message):
    base = ModelConfig(src_vocab_size=20, tgt_vocab_size=20) if cls is ModelConfig else TrainConfig()
    with pytest.raises((ValueError, TypeError)) as e:
        base.replace(**changes)
    assert message in str(e.value)
    if cls is ModelConfig:  # the model itself checks its arguments the same way, first
        from transformer_np.model import Transformer

        with pytest.raises(type(e.value), match=re.escape(str(e.value))):
            Transformer(**{**base.to_dict(), **changes})


def test_train_refuses_a_directory_that_holds_a_run(tmp_path):
    m, t = tiny(steps=1)
    train(m, t, str(tmp_path), progress=False)
    before = {f: os.path.getmtime(tmp_path / f) for f in os.listdir(tmp_path)}
    with pytest.raises(ValueError, match="already holds a run"):
        train(m, t, str(tmp_path), progress=False)
    with pytest.raises(ValueError, match="is a file"):
        train(m, t, str(tmp_path / "checkpoint.npz"), progress=False)
    assert {f: os.path.getmtime(tmp_path / f) for f in os.listdir(tmp_path)} == before
    assert train(m, t.replace(steps=2), str(tmp_path), progress=False, overwrite=True).step == 2


def test_the_package_root_is_the_public_api_and_imports_light():
    import subprocess
    import sys

    code = (
        "import sys, transformer_np as t; "
        "from transformer_np import Transformer, ModelConfig, TrainConfig, greedy_decode, beam_search, train; "
        "assert sorted(set(t.__all__)) == sorted(t.__all__) and all(hasattr(t, n) for n in t.__all__); "
        "assert 'matplotlib' not in sys.modules and 'tqdm' not in sys.modules, 'heavy import'; print('ok')"
    )
    root = ROOT
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
        timeout=300,
    )
    assert r.stdout.strip() == "ok", r.stderr


def test_no_package_attribute_hides_a_submodule_of_the_same_name():
    """`import transformer_np.training as T` binds the attribute `training` of the package: it must be the
    module (the module `transformer_np.train` was hidden by the function `train`)."""
    import importlib
    import pkgutil
    import types

    import transformer_np
    import transformer_np.training as T

    assert isinstance(T, types.ModuleType) and T is importlib.import_module("transformer_np.training")
    assert callable(transformer_np.train) and T.train is transformer_np.train
    for pkg in (transformer_np, T):
        for info in pkgutil.iter_modules(pkg.__path__):
            full = f"{pkg.__name__}.{info.name}"
            if hasattr(pkg, info.name):
                assert getattr(pkg, info.name) is importlib.import_module(full), f"{full} is hidden by an attribute"
