"""The course keeps itself honest (course/): every check passes on the solutions, fails on the untouched stubs,
and catches a planted wrong solution per rung; a learner's broken file gets a message naming the exercise.

The checker is pointed at other files only explicitly (`source`: 'solutions' or a directory); its default is
the learner's course/exercises/, and a test says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from course.__main__ import exercises_of
from course.__main__ import main as course_main
from course.runner import RUNGS, run_rung
from tests.support import ROOT

SOLUTIONS = os.path.join(ROOT, "course", "solutions")

# One planted mistake per rung: (file, the right text, the wrong text, the exercise that must fail, a word of
# its message). Each is a mistake learners make.
PLANTED = {
    1: (
        "rung1.py",
        "            self.grad += out.grad\n            other.grad += out.grad",
        "            self.grad = out.grad\n            other.grad = out.grad",
        "1.1",
        "+=",
    ),
    2: ("rung2.py", "return (g * (1 - out * out),)", "return (g * (1 - out),)", "2.4", "expected"),
    3: (
        "rung3.py",
        "np.full_like(logits, label_smoothing / C)",
        "np.full_like(logits, label_smoothing / (C - 1))",
        "3.3",
        "expected",
    ),
    4: (
        "rung4.py",
        """        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)""",
        """        scores = F.softmax(scores, dim=-1).masked_fill(~mask, 0.0)
    weights = scores if mask is not None else F.softmax(scores, dim=-1)""",
        "4.1",
        "the softmax must come after the mask",
    ),
    5: (
        "rung5.py",
        "x = self.src_embed(mt.tensor(src)) * math.sqrt(self.d_model)",
        "x = self.src_embed(mt.tensor(src))",
        "5.4",
        "the first value that differs is the input of encoder",
    ),
    6: ("rung6.py", "m_hat = self.m[i] / (1 - b1**t)", "m_hat = self.m[i]", "6.2", "after step 1"),
    7: ("rung7.py", "    optimizer.zero_grad()\n", "", "7.1", "zero_grad"),
}


def _copy_solutions(tmp_path, name: str) -> str:
    folder = tmp_path / name
    shutil.copytree(SOLUTIONS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return str(folder)


def _plant(folder: str, file: str, right: str, wrong: str) -> None:
    path = os.path.join(folder, file)
    text = open(path).read()
    assert text.count(right) == 1, f"the planted mistake's anchor is not once in {file}: {right!r}"
    with open(path, "w") as f:
        f.write(text.replace(right, wrong))


@pytest.mark.parametrize("rung", sorted(RUNGS))
def test_every_check_passes_on_the_solutions(rung):
    outcomes = run_rung(rung, exercises_of(rung), "solutions")
    assert outcomes and all(o.ok for o in outcomes), [(o.exercise.id, o.message) for o in outcomes if not o.ok]


def _pristine_stubs(tmp_path) -> str:
    """The stubs as committed (git's HEAD), so that a learner who has filled course/exercises/ can still run the
    suite; outside a git checkout, the files on disk."""
    folder = tmp_path / "pristine_stubs"
    shutil.copytree(os.path.join(ROOT, "course", "exercises"), folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in os.listdir(folder):
        if name.endswith(".py"):
            proc = subprocess.run(
                ["git", "show", f"HEAD:course/exercises/{name}"], cwd=ROOT, capture_output=True, text=True, timeout=300
            )
            if proc.returncode == 0:
                (folder / name).write_text(proc.stdout)
    return str(folder)


@pytest.mark.parametrize("rung", sorted(RUNGS))
def test_every_check_fails_on_the_untouched_stubs(rung, tmp_path):
    outcomes = run_rung(rung, exercises_of(rung), _pristine_stubs(tmp_path))
    assert outcomes and not any(o.ok for o in outcomes), [o.exercise.id for o in outcomes if o.ok]
    for o in outcomes:
        assert "not written yet" in o.message, (o.exercise.id, o.message)


@pytest.mark.parametrize("rung", sorted(PLANTED))
def test_a_planted_wrong_solution_is_caught(rung, tmp_path):
    file, right, wrong, exercise, word = PLANTED[rung]
    folder = _copy_solutions(tmp_path, f"planted_r{rung}")
    _plant(folder, file, right, wrong)
    outcomes = {o.exercise.id: o for o in run_rung(rung, exercises_of(rung), folder)}
    assert not outcomes[exercise].ok, f"the planted mistake in {file} was not caught by exercise {exercise}"
    assert word in outcomes[exercise].message, outcomes[exercise].message


def test_the_planted_mistakes_cover_every_rung():
    assert sorted(PLANTED) == sorted(RUNGS)


def test_a_learner_file_that_does_not_parse_fails_every_exercise_naming_the_line(tmp_path):
    folder = _copy_solutions(tmp_path, "broken_syntax")
    with open(os.path.join(folder, "rung2.py"), "a") as f:
        f.write("\ndef oops(:\n")
    outcomes = run_rung(2, exercises_of(2), folder)
    assert all(not o.ok and "SyntaxError" in o.message and "rung2.py:" in o.message for o in outcomes)


def test_a_backward_returning_none_or_the_wrong_shape_or_dtype_is_named(tmp_path):
    folder = _copy_solutions(tmp_path, "bad_returns")
    _plant(folder, "rung2.py", "return (g * out,)", "return (None,)")
    _plant(folder, "rung2.py", "return (g * (1 - out * out),)", "return ((g * (1 - out * out)).astype(np.float32),)")
    _plant(folder, "rung2.py", "return (np.broadcast_to(g, ctx.shape).copy(),)", "return (g,)")
    out = {o.exercise.id: o.message for o in run_rung(2, exercises_of(2), folder)}
    assert "gradient for input 0: returned None" in out["2.2"], out["2.2"]
    assert "expected dtype float64, got float32" in out["2.4"], out["2.4"]
    assert "expected shape" in out["2.3"], out["2.3"]


def test_a_learner_error_keeps_the_learners_frames_and_trims_the_engines(tmp_path):
    folder = _copy_solutions(tmp_path, "raising")
    _plant(folder, "rung4.py", "return self.linear2(F.relu(self.linear1(x)))", "return self.linear2(self.linear2(x))")
    (o,) = run_rung(4, exercises_of(4), folder, only="4.3")
    assert not o.ok and "your code raised" in o.message
    frames = [line for line in o.message.splitlines() if line.strip().startswith("File ")]
    assert frames and all("raising/rung4.py" in line for line in frames), o.message  # the learner's frames only
    assert "in forward" in o.message and "frames of the engine and the checker trimmed" in o.message
    assert "ValueError: Linear(in_features=16): expected input of shape (..., 16)" in o.message  # the engine's words
    assert "(while checking PositionwiseFeedForward(8, 16))" in o.message  # which case


def test_the_command_checks_the_learners_files_by_default_and_exits_by_outcome(monkeypatch, capsys):
    monkeypatch.delenv("COURSE_FROM", raising=False)
    assert course_main(["check", "1"]) in (0, 1)  # the learner's files, whatever state they are in
    out = capsys.readouterr().out
    assert os.path.join("course", "exercises", "rung1.py") in out and "/6 passed" in out, out
    assert course_main(["check", "1", "--from", "solutions"]) == 0
    assert os.path.join("course", "solutions", "rung1.py") in capsys.readouterr().out
    monkeypatch.setenv("COURSE_FROM", "solutions")  # the substitution by environment variable, said in the output
    assert course_main(["check", "1"]) == 0 and "solutions" in capsys.readouterr().out
    assert course_main(["check", "1", "--exercise", "2.1"]) == 2
    with pytest.raises(SystemExit) as e:
        course_main(["check", "9"])
    assert e.value.code == 2
    assert course_main(["list"]) == 0 and "rung 7: training" in capsys.readouterr().out


def test_python_dash_m_course_runs_as_a_command():
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    env.pop("COURSE_FROM", None)
    proc = subprocess.run(
        [sys.executable, "-m", "course", "check", "1", "--exercise", "1.1", "--from", "solutions"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "1/1 passed" in proc.stdout, proc.stdout + proc.stderr


def test_a_name_missing_from_the_learners_file_is_named(tmp_path):
    folder = _copy_solutions(tmp_path, "missing_name")
    _plant(folder, "rung6.py", "class Adam:", "class MyAdam:")
    (o,) = run_rung(6, exercises_of(6), folder, only="6.2")
    assert not o.ok and "defines no `Adam`" in o.message and "rung6.py" in o.message, o.message


# Each planted mistake with the diagnosis its message must give: (file, the right text, the wrong text, the
# exercise that must fail, words of its message).
DIAGNOSES = {
    "a sign, on scalars": (
        "rung1.py",
        "self.grad += (1 - t**2) * out.grad",
        "self.grad -= (1 - t**2) * out.grad",
        "1.4",
        "check the sign",
    ),
    "a sign, on arrays": ("rung2.py", "return (g * out,)", "return (-g * out,)", "2.2", "check the sign"),
    "a missing 1/N": (
        "rung3.py",
        "return (g * (ctx.p - ctx.q) / ctx.n,)",
        "return (g * (ctx.p - ctx.q),)",
        "3.4",
        "Yours is 4 x the expected everywhere",
    ),
    "a transposed gradient": (
        "rung2.py",
        "np.swapaxes(a, -1, -2) @ g",
        "np.swapaxes(np.swapaxes(a, -1, -2) @ g, -1, -2)",
        "2.5",
        "last two axes swapped",
    ),
    "a parameter's gradient in neither the output's nor the input's shape": (
        "rung3.py",
        "return dx, g * xhat, g",
        "return dx, (g * xhat).sum(axis=-1, keepdims=True), g",
        "3.2",
        "expected the output's shape (4, 6) or the input's (6,)",
    ),
    "softmax's backward without the off-diagonal terms": (
        "rung3.py",
        "return (y * (g - (g * y).sum(axis=ctx.dim, keepdims=True)),)",
        "return (g * y * (1 - y),)",
        "3.1",
        "diagonal-only product",
    ),
    "layer norm's backward with the mean and variance held constant": (
        "rung3.py",
        "dx = rstd * (gx - gx.mean(axis=-1, keepdims=True) - xhat * (gx * xhat).mean(axis=-1, keepdims=True))",
        "dx = rstd * gx",
        "3.2",
        "as if the mean and the variance were constants",
    ),
    "layer norm's backward with only the Jacobian's diagonal": (
        "rung3.py",
        "dx = rstd * (gx - gx.mean(axis=-1, keepdims=True) - xhat * (gx * xhat).mean(axis=-1, keepdims=True))",
        "n = xhat.shape[-1]\n        dx = rstd * gx * (1 - 1 / n - xhat * xhat / n)",
        "3.2",
        "keeps only the Jacobian's diagonal",
    ),
    "a NaN": (
        "rung2.py",
        "return (g * (1 - out * out),)",
        "r = g * (1 - out * out)\n        r.flat[3] = np.nan\n        return (r,)",
        "2.4",
        "the first, in index order, is at element (0, 3)",
    ),
    "a wrong forward, seen by the backward's exercise": (
        "rung3.py",
        "np.full_like(logits, label_smoothing / C)",
        "np.full_like(logits, label_smoothing / (C - 1))",
        "3.4",
        "fix exercise 3.3 (CrossEntropy.forward) first",
    ),
    "a wrong attention, seen by multi-head attention": (
        "rung4.py",
        "weights = F.softmax(scores, dim=-1)",
        "weights = F.softmax(scores, dim=-1) * 1.5",
        "4.2",
        "fix exercise 4.1 (scaled_dot_product_attention) first",
    ),
    "a wrong step, seen by the loop": (
        "rung7.py",
        "    optimizer.zero_grad()\n",
        "",
        "7.2",
        "fix exercise 7.1 (train_step) first",
    ),
    "an embedding not scaled by sqrt(D)": (
        "rung5.py",
        "x = self.src_embed(mt.tensor(src)) * math.sqrt(self.d_model)",
        "x = self.src_embed(mt.tensor(src))",
        "5.4",
        "the input of encoder, the embedded source, src_embed(src) * sqrt(D) + PE[:S]: the embedding's scaling",
    ),
}


@pytest.mark.parametrize("name", sorted(DIAGNOSES))
def test_a_planted_mistake_gets_its_diagnosis(name, tmp_path):
    file, right, wrong, exercise, words = DIAGNOSES[name]
    folder = _copy_solutions(tmp_path, "diagnosed")
    _plant(folder, file, right, wrong)
    rung = int(exercise.split(".")[0])
    (o,) = run_rung(rung, exercises_of(rung), folder, only=exercise)
    assert not o.ok, f"{name}: not caught by exercise {exercise}"
    assert words in o.message, o.message


def test_the_diagnosis_names_nothing_for_an_unrelated_difference():
    from course.checks.common import diagnose, diagnose_scalar

    r = np.random.default_rng(0)
    a, b = r.standard_normal((3, 4)), r.standard_normal((3, 4))
    assert diagnose(a, b) == "" and diagnose_scalar(1.3, 1.7) == ""
    assert "transposed" in diagnose(a.T.copy(), a) and "transposed" in diagnose(b[:3, :3].T.copy(), b[:3, :3])
    assert "1/4 x" in diagnose(a / 4, a) and "input 1's shape" in diagnose(a[0], a, input_shapes=[(3, 4), (4,)])
