"""A run directory as a user meets it: divergence, resuming a finished run, damaged run files, time
over interrupted runs, the interrupt message's form, and progress output redirected to a file.

Every command-line case runs `python -m transformer_np` (in process through main(), or as a real
process where the terminal matters) on a tiny model in a temporary directory, and checks the exit
status, that the message is one line naming the file or step, and that nothing on disk changed
when the command refused.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import minitensor as mt
from tests.support import ROOT
from transformer_np.cli import EXIT_DIVERGED, main
from transformer_np.training import CHECKPOINT_NAME, HISTORY_NAME, NonFiniteError, default_configs, fit, train

TINY = [
    *("--d-model", "16", "--num-heads", "2", "--num-encoder-layers", "1", "--num-decoder-layers", "1"),
    *("--d-ff", "32", "--train-size", "40", "--eval-size", "8", "--batch-size", "8", "--warmup-steps", "4"),
    "--no-progress",
]
# Adam moves every parameter by about lr per step: 1e30 keeps step 1's parameters finite (float32 reaches
# 3.4e38) and makes step 2's loss NaN; 1e39 overflows the parameters in step 1's update itself.
DIVERGE = ["--schedule", "constant", "--lr", "1e30"]
OVERFLOW = ["--schedule", "constant", "--lr", "1e39"]


def tiny_configs(**train_changes):
    m, t = default_configs("copy-reverse")
    m = m.replace(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32, dropout=0.1)
    t = t.replace(steps=4, batch_size=8, train_size=40, eval_size=8, eval_every=2, checkpoint_every=2, warmup_steps=4)
    return m, t.replace(**train_changes)


def snapshot(d: str) -> dict:
    """Every file under `d` with its bytes and modification time: what 'nothing changed' compares."""
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d)] = (fh.read(), os.stat(p).st_mtime_ns)
    return out


def run_cli(argv, capsys) -> tuple[int, str, str]:
    """main(argv) -> (exit status, stdout, stderr), whether it returns or exits."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def one_line_error(argv, capsys, status=2) -> str:
    code, _, err = run_cli(argv, capsys)
    assert code == status and err.count("\n") == 1 and "Traceback" not in err, (code, err)
    return err


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A tiny run of 4 steps, finished (eval at 2 and the final one at 4, checkpoints at 2 and 4)."""
    out = str(tmp_path_factory.mktemp("run") / "cr")
    assert main(["train", "--out", out, "--steps", "4", "--eval-every", "2", "--checkpoint-every", "2", *TINY]) == 0
    return out


def copy_of(run: str, tmp_path) -> str:
    out = str(tmp_path / "copy")
    shutil.copytree(run, out)
    return out


# ---------------------------------------------------------------------------------------------
# Divergence
# ---------------------------------------------------------------------------------------------
def test_a_diverging_run_stops_at_the_step_keeps_its_finite_checkpoint_and_exits_3(tmp_path, capsys):
    out = str(tmp_path / "run")
    err = one_line_error(
        ["train", "--out", out, "--steps", "20", "--checkpoint-every", "1", *DIVERGE, *TINY], capsys, EXIT_DIVERGED
    )
    assert "step 2: the loss is nan" in err and "checkpoint.npz keeps step 1" in err and "--allow-nonfinite" in err
    assert "allow_nonfinite=True" not in err
    state = mt.load(os.path.join(out, CHECKPOINT_NAME))
    assert state["step"] == 1
    assert all(np.isfinite(v).all() for v in state["model"].values())
    with open(os.path.join(out, HISTORY_NAME)) as f:
        hist = json.load(f)  # history keeps what happened: the failing step's NaN included
    assert hist["step"] == [1, 2] and math.isfinite(hist["loss"][0]) and math.isnan(hist["loss"][1])
    assert [s["end"] for s in hist["segments"]] == ["diverged"]
    # the diverged run resumes from its finite checkpoint, and diverges again at the same step
    assert "step 2: the loss is nan" in one_line_error(["train", "--out", out, "--resume"], capsys, EXIT_DIVERGED)
    assert mt.load(os.path.join(out, CHECKPOINT_NAME))["step"] == 1


def test_the_checkpoint_saved_before_divergence_is_untouched_bitwise(tmp_path):
    m, t = tiny_configs(steps=20, checkpoint_every=1, schedule="constant", lr=1e30)
    out = str(tmp_path / "run")
    saved = {}

    def keep_bytes(step, record):
        with open(os.path.join(out, CHECKPOINT_NAME), "rb") as f:
            saved[step] = f.read()

    with pytest.raises(NonFiniteError) as e:
        train(m, t, out, progress=False, callback=keep_bytes)
    # the Python API names its own form of going on, not the command line's
    assert e.value.step == 2 and "allow_nonfinite=True" in str(e.value) and "--allow" not in str(e.value)
    with open(os.path.join(out, CHECKPOINT_NAME), "rb") as f:
        assert f.read() == saved[1]


def test_an_update_that_overflows_the_parameters_is_never_saved(tmp_path, capsys):
    out = str(tmp_path / "run")
    err = one_line_error(
        ["train", "--out", out, "--steps", "5", "--checkpoint-every", "1", *OVERFLOW, *TINY], capsys, EXIT_DIVERGED
    )
    assert "step 1: the update made" in err and "non-finite" in err and "no checkpoint was saved" in err
    assert sorted(os.listdir(out)) == [HISTORY_NAME]
    err = one_line_error(["train", "--out", out, "--steps", "5", *TINY], capsys)
    assert "saved no checkpoint" in err and "--overwrite" in err and "--resume" not in err


def test_allow_nonfinite_goes_on_and_resuming_such_a_checkpoint_needs_it_too(tmp_path, capsys):
    out = str(tmp_path / "run")
    code, stdout, err = run_cli(["train", "--out", out, "--steps", "4", *DIVERGE, "--allow-nonfinite", *TINY], capsys)
    assert code == 0 and "warning: 3 steps had a non-finite loss" in stdout and "done: 4 steps" in stdout
    state = mt.load(os.path.join(out, CHECKPOINT_NAME))
    assert state["step"] == 4 and not all(np.isfinite(v).all() for v in state["model"].values())
    before = snapshot(out)
    err = one_line_error(["train", "--out", out, "--resume", "--steps", "6"], capsys)
    assert "checkpoint.npz" in err and "holds non-finite values" in err
    assert snapshot(out) == before
    code, stdout, _ = run_cli(["train", "--out", out, "--resume", "--steps", "6", "--allow-nonfinite"], capsys)
    assert code == 0 and "done: 6 steps (steps 5-6 in this run" in stdout


def test_fit_and_the_experiments_refuse_to_train_on_nan():
    m, t = tiny_configs(schedule="constant", lr=1e30)
    from transformer_np.data import get_task

    pairs = get_task("copy-reverse").splits(40, 8, 0)[0]
    with pytest.raises(NonFiniteError, match="step 2: the loss is nan"):
        fit(m, t, pairs, steps=5)
    _, losses, _ = fit(m, t, pairs, steps=3, allow_nonfinite=True)
    assert math.isnan(losses[-1])


# ---------------------------------------------------------------------------------------------
# Resuming a run that is already where it was asked to be
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("steps", [[], ["--steps", "4"], ["--steps", "3"]], ids=["default", "same", "fewer"])
def test_resuming_a_finished_run_changes_nothing(finished_run, tmp_path, capsys, steps):
    out = copy_of(finished_run, tmp_path)
    before = snapshot(out)
    code, stdout, err = run_cli(["train", "--out", out, "--resume", *steps, "--no-progress"], capsys)
    assert code == 0 and err == "" and stdout.count("\n") == 1
    assert stdout.startswith(f"nothing to do: the run in {out!r} is already at step 4")
    assert snapshot(out) == before
    code, _, _ = run_cli(["train", "--out", out, "--resume", *steps, "--no-progress"], capsys)
    assert code == 0 and snapshot(out) == before


def test_a_run_stopped_during_its_final_evaluation_is_finished_by_resume(finished_run, tmp_path, capsys):
    out = copy_of(finished_run, tmp_path)
    path = os.path.join(out, HISTORY_NAME)
    with open(path) as f:
        hist = json.load(f)
    hist["eval"] = [e for e in hist["eval"] if e["step"] < 4]  # as if Ctrl-C came during the final evaluation
    with open(path, "w") as f:
        json.dump(hist, f)
    assert main(["train", "--out", out, "--resume", "--no-progress"]) == 0
    with open(path) as f:
        assert [e["step"] for e in json.load(f)["eval"]] == [2, 4]
    assert "nothing to do" in run_cli(["train", "--out", out, "--resume", "--no-progress"], capsys)[1]


# ---------------------------------------------------------------------------------------------
# Time over interrupted runs, and the interrupt message in each form
# ---------------------------------------------------------------------------------------------
def test_an_interrupted_runs_time_reaches_the_history_and_the_done_line(tmp_path, capsys):
    m, t = tiny_configs(steps=6, checkpoint_every=100)
    out = str(tmp_path / "run")

    def stop_at_2(step, record):
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(m, t, out, progress=False, callback=stop_at_2)
    printed = capsys.readouterr().out
    assert "continue with train(..., resume=True)" in printed and "--resume" not in printed
    with open(os.path.join(out, HISTORY_NAME)) as f:
        first = json.load(f)
    assert [(s["start_step"], s["end_step"], s["end"]) for s in first["segments"]] == [(0, 2, "interrupted")]
    assert first["segments"][0]["wall_time"] > 0 and first["wall_time"] == first["segments"][0]["wall_time"]
    code, stdout, _ = run_cli(["train", "--out", out, "--resume", "--no-progress"], capsys)
    assert code == 0 and "done: 6 steps (steps 3-6 in this run, " in stdout and " over 2 runs)" in stdout
    with open(os.path.join(out, HISTORY_NAME)) as f:
        hist = json.load(f)
    segs = hist["segments"]
    assert [(s["start_step"], s["end_step"], s["end"]) for s in segs] == [(0, 2, "interrupted"), (2, 6, "done")]
    assert hist["wall_time"] == pytest.approx(sum(s["wall_time"] for s in segs))


def test_the_command_line_names_only_its_own_resume_form(tmp_path, monkeypatch, capsys):
    import importlib

    train_module = importlib.import_module("transformer_np.commands")  # where the command line looks up train()
    real = train_module.train

    def interrupted_train(*args, **kwargs):
        kwargs["callback"] = lambda step, record: (_ for _ in ()).throw(KeyboardInterrupt())
        return real(*args, **kwargs)

    monkeypatch.setattr(train_module, "train", interrupted_train)
    out = str(tmp_path / "run")
    code, stdout, err = run_cli(["train", "--out", out, "--steps", "4", *TINY], capsys)
    assert code == 130 and err == "interrupted\n"
    assert f"continue with python -m transformer_np train --out {out} --resume" in stdout
    assert "resume=True" not in stdout


# ---------------------------------------------------------------------------------------------
# Damaged run files: one line naming the file, exit 2, nothing modified, on --resume and on plot
# ---------------------------------------------------------------------------------------------
def _history_of(run):
    with open(os.path.join(run, HISTORY_NAME)) as f:
        return json.load(f)


def _edit(change):
    def make(run):
        h = _history_of(run)
        change(h)
        return json.dumps(h)

    return make


BAD_HISTORIES = {
    "truncated": (lambda run: open(os.path.join(run, HISTORY_NAME)).read()[:-40], "truncated or damaged"),
    "empty": (lambda run: "", "truncated or damaged"),
    "binary": (lambda run: "\udcff\x00", "truncated or damaged"),
    "top-level list": (lambda run: "[1, 2]", "expected a JSON object at the top level, got list"),
    "missing key": (_edit(lambda h: h.pop("loss")), "missing 'loss'"),
    "loss not a list": (_edit(lambda h: h.update(loss=3.0)), "'loss' should be a list"),
    "NaN as a string": (_edit(lambda h: h["loss"].__setitem__(1, "NaN")), "'loss' should hold numbers, it holds 'NaN'"),
    "null entry": (_edit(lambda h: h["grad_norm"].__setitem__(0, None)), "'grad_norm' should hold numbers"),
    "short list": (_edit(lambda h: h["lr"].pop()), "'lr' has 3 entries, 'step' has 4"),
    "steps out of order": (_edit(lambda h: h.update(step=[1, 3, 2, 4])), "'step' should count 1, 2, 3"),
    "layer norms wrong type": (_edit(lambda h: h.update(layer_grad_norms=[])), "'layer_grad_norms' should be"),
    "layer norms short": (
        _edit(lambda h: next(iter(h["layer_grad_norms"].values())).pop()),
        "has 3 entries, 'step' has 4",
    ),
    "eval entry not an object": (_edit(lambda h: h["eval"].append(7)), "each 'eval' entry should be an object"),
    "eval value a string": (_edit(lambda h: h["eval"][0].update(token_acc="x")), "'token_acc' should be a number"),
    "segments wrong": (_edit(lambda h: h.update(segments=[{"start_step": 0}])), "'segments' should be a list"),
}


@pytest.mark.parametrize("case", sorted(BAD_HISTORIES))
@pytest.mark.parametrize("command", ["resume", "plot"])
def test_a_damaged_history_is_one_line_naming_the_file_and_loses_nothing(finished_run, tmp_path, capsys, case, command):
    out = copy_of(finished_run, tmp_path)
    make, expected = BAD_HISTORIES[case]
    text = make(out)
    with open(os.path.join(out, HISTORY_NAME), "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(text)
    before = snapshot(out)
    if command == "resume":
        argv = ["train", "--out", out, "--resume", "--steps", "6", "--no-progress"]
    else:
        argv = ["plot", "--checkpoint", out, "--out", os.path.join(out, "plots")]
    err = one_line_error(argv, capsys)
    assert repr(os.path.join(out, HISTORY_NAME)) in err and expected in err, err
    assert snapshot(out) == before


def test_a_history_that_stops_before_its_checkpoint_is_refused(finished_run, tmp_path, capsys):
    out = copy_of(finished_run, tmp_path)
    h = _history_of(out)
    for k in ("step", "loss", "lr", "grad_norm", "tokens_per_s"):
        h[k] = h[k][:2]
    h["layer_grad_norms"] = {k: v[:2] for k, v in h["layer_grad_norms"].items()}
    with open(os.path.join(out, HISTORY_NAME), "w") as f:
        json.dump(h, f)
    before = snapshot(out)
    err = one_line_error(["train", "--out", out, "--resume", "--steps", "6", "--no-progress"], capsys)
    assert "ends at step 2, before the checkpoint's step 4" in err and snapshot(out) == before


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],  # truncated
        lambda b: b"not a zip file at all",
        lambda b: b[:100] + bytes(200) + b[300:],  # zeros over the first members
    ],
    ids=["truncated", "text", "zeroed"],
)
def test_a_damaged_checkpoint_on_resume_is_one_line_naming_it(finished_run, tmp_path, capsys, damage):
    out = copy_of(finished_run, tmp_path)
    path = os.path.join(out, CHECKPOINT_NAME)
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(damage(data))
    before = snapshot(out)
    err = one_line_error(["train", "--out", out, "--resume", "--steps", "6", "--no-progress"], capsys)
    assert repr(path) in err and snapshot(out) == before


def test_a_checkpoint_with_a_damaged_configuration_on_resume_is_one_line_naming_it(finished_run, tmp_path, capsys):
    out = copy_of(finished_run, tmp_path)
    path = os.path.join(out, CHECKPOINT_NAME)
    state = mt.load(path)
    state["train_config"]["batch_size"] = -3
    mt.save(state, path)
    before = snapshot(out)
    err = one_line_error(["train", "--out", out, "--resume", "--no-progress"], capsys)
    assert repr(path) in err and "damaged configuration" in err and snapshot(out) == before


# ---------------------------------------------------------------------------------------------
# Progress written to a file
# ---------------------------------------------------------------------------------------------
def test_progress_redirected_to_a_file_is_a_few_lines(tmp_path):
    flags = [f for f in TINY if f != "--no-progress"]
    out = str(tmp_path / "run")
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    with open(tmp_path / "stderr.txt", "w") as err:
        r = subprocess.run(
            [sys.executable, "-m", "transformer_np", "train", "--out", out, "--steps", "40", "--eval-every", "20"]
            + flags,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            timeout=300,
        )
    assert r.returncode == 0, (tmp_path / "stderr.txt").read_text()
    text = (tmp_path / "stderr.txt").read_text()
    lines = text.splitlines()
    assert "\r" not in text and 4 <= len(lines) <= 12 and len(text) < 1500, text
    assert lines[-1].startswith("train copy-reverse: step 40/40 (100%)")
    assert "step 20: held-out loss" in r.stdout  # evaluations still go to stdout, as with the bar


def test_a_diverging_experiment_is_one_line_and_exit_3_without_a_flag_to_name(tmp_path, monkeypatch, capsys):
    import transformer_np.experiments as experiments

    def diverge(*args, **kwargs):
        raise NonFiniteError(7, float("nan"), float("inf"))

    monkeypatch.setattr(experiments, "run_experiment", diverge)
    err = one_line_error(["experiment", "heads", "--out", str(tmp_path / "e")], capsys, EXIT_DIVERGED)
    assert "step 7: the loss is nan and the gradient norm inf: training diverged" in err
    assert "allow" not in err and not os.path.exists(tmp_path / "e")


# ---------------------------------------------------------------------------------------------
# Run files behind symlinks (item 9 for the run's own files)
# ---------------------------------------------------------------------------------------------
def test_a_resume_updates_history_and_checkpoint_through_their_symlinks(finished_run, tmp_path, capsys):
    """A user who keeps the real files elsewhere and links them into the run folder: a resume writes the
    files the links point to, atomically, and the links stay links."""
    out = copy_of(finished_run, tmp_path)
    store = tmp_path / "store"
    store.mkdir()
    for name in (HISTORY_NAME, CHECKPOINT_NAME):
        os.replace(os.path.join(out, name), store / name)
        os.symlink(store / name, os.path.join(out, name))
    code, _, err = run_cli(["train", "--out", out, "--resume", "--steps", "6", *TINY], capsys)
    assert code == 0, err
    for name in (HISTORY_NAME, CHECKPOINT_NAME):
        assert os.path.islink(os.path.join(out, name)), f"{name}: the link was replaced by a file"
    with open(store / HISTORY_NAME) as f:
        assert json.load(f)["step"][-1] == 6
    assert mt.load(str(store / CHECKPOINT_NAME))["step"] == 6


def test_a_figure_is_written_atomically_in_the_format_its_name_says(tmp_path):
    from matplotlib.figure import Figure

    from transformer_np.plots import _save

    for name in ("a.png", "b.svg", "c.pdf"):
        fig = Figure()
        fig.add_subplot().plot([0, 1])
        path = _save(fig, str(tmp_path / name))
        with open(path, "rb") as f:
            head = f.read(5)
        assert head.startswith({"png": b"\x89PNG", "svg": b"<?xml", "pdf": b"%PDF"}[name[-3:]]), (name, head)
    assert sorted(os.listdir(tmp_path)) == ["a.png", "b.svg", "c.pdf"]  # no temporary left behind
