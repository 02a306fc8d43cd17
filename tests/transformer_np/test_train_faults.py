"""Fault tests of training: no interruption ever costs a run its exactness.

- Real SIGINTs (what Ctrl-C sends) at random points of a tiny run, one to four at a time, sometimes a few
  calls apart so that they land inside one optimizer step or one checkpoint save; the run is then resumed
  (itself interrupted again, up to three times) and must end bit for bit where the uninterrupted run ends.
  The points are chosen by counting the interpreter's call/return events (sys.setprofile) and sending the
  signal from that hook, so they cover every line training runs, not only step boundaries.
- A checkpoint save that fails at each of its stages (history file and its rename, the temporary archive,
  the first, a middle and the last array, the archive's rename; every single call behind the `slow` marker),
  by a crash or by a KeyboardInterrupt; the resume from what is left on disk is again bitwise equal to the
  uninterrupted run.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import tempfile

import numpy as np
import pytest

from tests.support import ROOT
from tests.support.cli_help import lazy_import_interrupted
from transformer_np.training import CHECKPOINT_NAME, default_configs, load_checkpoint, load_history, train

train_module = importlib.import_module("transformer_np.training.loop")  # where train() looks up save_checkpoint

TINY_MODEL = dict(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32, dropout=0.1)
TINY_TRAIN = dict(steps=6, batch_size=8, train_size=40, eval_size=8, eval_every=3, checkpoint_every=2, warmup_steps=4)
SIGINT_SCENARIOS = 16


def _configs():
    model_cfg, train_cfg = default_configs("copy-reverse")
    return model_cfg.replace(**TINY_MODEL), train_cfg.replace(**TINY_TRAIN)


def _params(res) -> dict:
    return {k: v.numpy().copy() for k, v in res.model.state_dict().items()}


def _assert_same_run(res, straight):
    a, b = _params(res), _params(straight)
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), f"{k} differs"
    hist, ref = load_history(res.out_dir), load_history(straight.out_dir)
    assert hist["step"] == ref["step"] and hist["loss"] == ref["loss"] and hist["grad_norm"] == ref["grad_norm"]
    assert hist["layer_grad_norms"] == ref["layer_grad_norms"]
    ckpt = train_module.mt.load(os.path.join(res.out_dir, CHECKPOINT_NAME))
    ref_ckpt = train_module.mt.load(os.path.join(straight.out_dir, CHECKPOINT_NAME))
    for key in ("optimizer", "scheduler", "step", "data"):
        assert json.dumps(_jsonable(ckpt[key])) == json.dumps(_jsonable(ref_ckpt[key])), key


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [str(obj.dtype), obj.shape, obj.tobytes().hex()]
    return obj


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """The uninterrupted run, and the number of profiler events it takes."""
    m, t = _configs()
    events = [0]

    def count(frame, event, arg):
        events[0] += 1

    sys.setprofile(count)
    try:
        res = train(m, t, str(tmp_path_factory.mktemp("straight")), progress=False)
    finally:
        sys.setprofile(None)
    return res, events[0]


def _train_with_sigints(out_dir: str, at: list[int]) -> bool:
    """Train (resuming when out_dir holds a checkpoint) and send SIGINT at the given profiler events;
    True if the run was interrupted."""
    m, t = _configs()
    pending, count = sorted(at), [0]

    def hook(frame, event, arg):
        count[0] += 1
        while pending and count[0] >= pending[0]:
            pending.pop(0)
            os.kill(os.getpid(), signal.SIGINT)

    resume = os.path.isfile(os.path.join(out_dir, CHECKPOINT_NAME))
    try:
        try:
            sys.setprofile(hook)
            train(m, t, out_dir, resume=resume, progress=False)
        finally:
            sys.setprofile(None)
        count[0] += 0  # a last instruction for a signal sent on the way out to land on
    except KeyboardInterrupt:
        return True
    finally:
        sys.setprofile(None)
    return False


@pytest.mark.parametrize("scenario", range(SIGINT_SCENARIOS))
def test_repeated_sigint_at_random_points_then_resume_is_bitwise_exact(straight, scenario, capsys):
    ref, n_events = straight
    rng = np.random.default_rng(scenario)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run")
        interruptions = 0
        for _attempt in range(3):
            first = int(rng.integers(0, n_events))
            # the others follow within a few calls (inside the same step or save) or much later
            gaps = [
                int(rng.integers(1, 50)) if rng.random() < 0.5 else int(rng.integers(50, n_events // 4))
                for _ in range(int(rng.integers(0, 4)))
            ]
            at = list(np.cumsum([first, *gaps]))
            if _train_with_sigints(out, at):
                interruptions += 1
                assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
            elif os.path.isfile(os.path.join(out, CHECKPOINT_NAME)):
                break
        m, t = _configs()
        resume = os.path.isfile(os.path.join(out, CHECKPOINT_NAME))
        res = train(m, t, out, resume=resume, progress=False)
        assert interruptions >= 1
        _assert_same_run(res, ref)


class _Crash(Exception):
    """A failure inside a save: a full disk, a killed process."""


class _SaveFaults:
    """Wrap the calls a checkpoint save makes, and raise `error` at call number `fail_at` of the
    second save (the first save leaves a good checkpoint behind)."""

    def __init__(self, monkeypatch, fail_at: int | None, error):
        self.fail_at, self.error, self.saves, self.armed = fail_at, error, 0, False
        self.calls: list[str] = []  # the second save's calls, in order: its stages
        import minitensor.serialization as ser

        for owner, name in (
            (os, "replace"),
            (ser.tempfile, "mkstemp"),
            (np.lib.format, "write_array"),
            (json, "dump"),
        ):
            monkeypatch.setattr(owner, name, self._wrap(name, getattr(owner, name)))
        real_save = train_module.save_checkpoint

        def save(*args, **kwargs):
            self.saves += 1
            self.armed = self.saves == 2
            try:
                return real_save(*args, **kwargs)
            finally:
                self.armed = False

        monkeypatch.setattr(train_module, "save_checkpoint", save)

    def _wrap(self, name, fn):
        def wrapper(*args, **kwargs):
            if self.armed:
                self.calls.append(name)
                if len(self.calls) == self.fail_at:
                    self.armed = False
                    raise self.error
            return fn(*args, **kwargs)

        return wrapper


def _stages_of_one_save(monkeypatch, tmp) -> list[str]:
    m, t = _configs()
    with monkeypatch.context() as mp:
        faults = _SaveFaults(mp, None, None)
        train(m, t, os.path.join(tmp, "count"), progress=False)
    return faults.calls


def _check_saves_interrupted_at(stages: list[int], straight, monkeypatch, tmp_path) -> int:
    ref, _ = straight
    m, t = _configs()
    cases = 0
    for error in (_Crash("disk full"), KeyboardInterrupt()):
        for stage in stages:
            out = str(tmp_path / f"{type(error).__name__}_{stage}")
            with monkeypatch.context() as mp:
                _SaveFaults(mp, stage, error)
                with pytest.raises(type(error)):
                    train(m, t, out, progress=False)
            assert not [f for f in os.listdir(out) if f.startswith(".tmp") or f.endswith(".tmp")]
            step = train_module.mt.load(os.path.join(out, CHECKPOINT_NAME))["step"]
            # the second save is step 4's: what is on disk is step 2's or step 4's, never anything between
            assert step in (2, 4)
            res = train(m, t, out, resume=True, progress=False)
            _assert_same_run(res, ref)
            cases += 1
    return cases


def test_a_save_interrupted_at_each_kind_of_stage_then_resume_is_bitwise_exact(straight, monkeypatch, tmp_path, capsys):
    calls = _stages_of_one_save(monkeypatch, str(tmp_path))
    # the history file (atomic_write: its temporary file, the dump, the rename), then the archive: its temporary
    # file, one member per array, the rename
    assert calls[:4] == ["mkstemp", "dump", "replace", "mkstemp"] and calls[-1] == "replace"
    assert calls[4:-1] == ["write_array"] * (len(calls) - 5) and len(calls) > 20
    arrays = range(5, len(calls))
    stages = [1, 2, 3, 4, arrays[0], arrays[len(arrays) // 2], arrays[-1], len(calls)]  # 1-based call numbers
    assert _check_saves_interrupted_at(stages, straight, monkeypatch, tmp_path) == 16


@pytest.mark.full
def test_a_save_interrupted_at_every_call_then_resume_is_bitwise_exact(straight, monkeypatch, tmp_path, capsys):
    n = len(_stages_of_one_save(monkeypatch, str(tmp_path)))
    assert _check_saves_interrupted_at(list(range(1, n + 1)), straight, monkeypatch, tmp_path) == 2 * n


def test_a_ctrl_c_python_raised_as_another_error_still_saves_the_last_step_and_resumes_exactly(straight, tmp_path):
    """A Ctrl-C that lands in a lazy import during the callback (outside any atomic block) is handled as the
    interrupt it is: KeyboardInterrupt, a checkpoint of the step just completed, a bitwise-exact resume."""
    ref, _ = straight
    m, t = _configs()
    out = str(tmp_path / "run")

    def callback(step, record):
        if step == 3:  # between checkpoints (every 2 steps): only the interrupt's own save keeps step 3
            lazy_import_interrupted()

    with pytest.raises(KeyboardInterrupt):
        train(m, t, out, progress=False, callback=callback)
    assert train_module.mt.load(os.path.join(out, CHECKPOINT_NAME))["step"] == 3
    assert load_history(out)["step"][-1] == 3
    _assert_same_run(train(m, t, out, resume=True, progress=False), ref)


def test_ctrl_c_three_times_on_the_command_line_keeps_a_run_that_resumes_exactly(tmp_path):
    """The real thing: `python -m transformer_np train` in its own process, Ctrl-C pressed three times in a row."""
    import subprocess
    import time

    root = ROOT
    out = str(tmp_path / "run")
    flags = [
        "--d-model",
        "16",
        "--num-heads",
        "2",
        "--num-encoder-layers",
        "1",
        "--num-decoder-layers",
        "1",
        "--d-ff",
        "32",
        "--batch-size",
        "8",
        "--train-size",
        "40",
        "--eval-size",
        "8",
        "--warmup-steps",
        "4",
        "--eval-every",
        "0",
        "--checkpoint-every",
        "0",
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": root, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "transformer_np", "train", "--out", out, "--steps", "100000", *flags],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().startswith("task copy-reverse")
    time.sleep(1.0)  # some steps
    for _ in range(3):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.002)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr, stderr
    # the command line names its own way to continue, not the Python API's
    assert (
        f"continue with python -m transformer_np train --out {out} --resume" in stdout and "resume=True" not in stdout
    )
    state = train_module.mt.load(os.path.join(out, CHECKPOINT_NAME))
    step = int(state["step"])
    assert step > 0 and len(load_history(out)["step"]) == step
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "transformer_np",
            "train",
            "--out",
            out,
            "--resume",
            "--steps",
            str(step + 2),
            "--no-progress",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    m, t = _configs()
    t = t.replace(steps=step + 2, eval_every=0, checkpoint_every=0)
    ref = train(m, t, str(tmp_path / "straight"), progress=False)
    resumed = load_checkpoint(out)
    assert resumed.step == step + 2
    a, b = _params(resumed), _params(ref)
    for k in a:
        assert np.array_equal(a[k], b[k]), f"{k} differs"
