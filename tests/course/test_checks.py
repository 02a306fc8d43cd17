"""The course keeps itself honest (course/): every check passes on the solutions, fails on the untouched stubs,
and catches a planted wrong solution per rung; a learner's broken file gets a message naming the exercise.

The checker is pointed at other files only explicitly (`source`: 'solutions' or a directory); its default is
the learner's course/exercises/, and a test says so.
"""

from __future__ import annotations

import glob
import os
import re
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
    2: (
        "rung2.py",
        "parent.accumulate(sum_to(np.asarray(share, dtype=np.float64), parent.data.shape))",
        "parent.accumulate(np.asarray(share, dtype=np.float64))",
        "2.3",
        "sum each share back to its parent's shape (sum_to)",
    ),
    3: ("rung3.py", "return (g * (1 - out * out),)", "return (g * (1 - out),)", "3.4", "expected"),
    4: (
        "rung4.py",
        "np.full_like(logits, label_smoothing / C)",
        "np.full_like(logits, label_smoothing / (C - 1))",
        "4.3",
        "expected",
    ),
    5: (
        "rung5.py",
        """        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)""",
        """        scores = F.softmax(scores, dim=-1).masked_fill(~mask, 0.0)
    weights = scores if mask is not None else F.softmax(scores, dim=-1)""",
        "5.1",
        "the softmax must come after the mask",
    ),
    6: (
        "rung6.py",
        "x = self.src_embed(mt.tensor(src)) * math.sqrt(self.d_model)",
        "x = self.src_embed(mt.tensor(src))",
        "6.4",
        "the first value that differs is the input of encoder",
    ),
    7: ("rung7.py", "m_hat = self.m[i] / (1 - b1**t)", "m_hat = self.m[i]", "7.2", "after step 1"),
    8: ("rung8.py", "    optimizer.zero_grad()\n", "", "8.1", "zero_grad"),
    9: (
        "rung9.py",
        "losses.append(train_step(model, optimizer, src, tgt, 0.0))",
        "losses.append(train_step(model, optimizer, src, tgt, 0.1))",
        "9.1",
        "fit, step 1 of 120 (your model, optimizer and loop against the project's): the loss",
    ),
    10: (
        "rung10.py",
        "return np.tril(np.ones((t, t), dtype=bool))",
        "return np.tril(np.ones((t, t), dtype=bool), -1)",
        "10.1",
        "The diagonal is masked: position i must see itself",
    ),
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
    with open(os.path.join(folder, "rung3.py"), "a") as f:
        f.write("\ndef oops(:\n")
    outcomes = run_rung(3, exercises_of(3), folder)
    assert all(not o.ok and "SyntaxError" in o.message and "rung3.py:" in o.message for o in outcomes)


def test_a_backward_returning_none_or_the_wrong_shape_or_dtype_is_named(tmp_path):
    folder = _copy_solutions(tmp_path, "bad_returns")
    _plant(folder, "rung3.py", "return (g * out,)", "return (None,)")
    _plant(folder, "rung3.py", "return (g * (1 - out * out),)", "return ((g * (1 - out * out)).astype(np.float32),)")
    _plant(folder, "rung3.py", "return (np.broadcast_to(g, ctx.shape).copy(),)", "return (g,)")
    out = {o.exercise.id: o.message for o in run_rung(3, exercises_of(3), folder)}
    assert "gradient for input 0: returned None" in out["3.2"], out["3.2"]
    assert "expected dtype float64, got float32" in out["3.4"], out["3.4"]
    assert "expected shape" in out["3.3"], out["3.3"]


def test_a_learner_error_keeps_the_learners_frames_and_trims_the_engines(tmp_path):
    folder = _copy_solutions(tmp_path, "raising")
    _plant(folder, "rung5.py", "return self.linear2(F.relu(self.linear1(x)))", "return self.linear2(self.linear2(x))")
    (o,) = run_rung(5, exercises_of(5), folder, only="5.3")
    assert not o.ok and "your code raised" in o.message
    frames = [line for line in o.message.splitlines() if line.strip().startswith("File ")]
    assert frames and all("raising/rung5.py" in line for line in frames), o.message  # the learner's frames only
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
    assert course_main(["check", "1", "--exercise", "3.1"]) == 2
    with pytest.raises(SystemExit) as e:
        course_main(["check", str(max(RUNGS) + 1)])
    assert e.value.code == 2
    listed = capsys.readouterr().out if course_main(["list"]) == 0 else ""
    assert "rung 8: training" in listed and "rung 10: a decoder-only model (GPT) (4 exercises)" in listed, listed


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
    _plant(folder, "rung7.py", "class Adam:", "class MyAdam:")
    (o,) = run_rung(7, exercises_of(7), folder, only="7.2")
    assert not o.ok and "defines no `Adam`" in o.message and "rung7.py" in o.message, o.message


# Each planted mistake with the diagnosis its message must give: (file, the right text, the wrong text, the
# exercise that must fail, words of its message).
WALK = """        if g is None:
            if self.data.size != 1:
                raise ValueError(f"backward: g is needed for a node of shape {self.data.shape} (not one element)")
            g = np.ones_like(self.data)
        order, seen, stack = [], {id(self)}, [(self, iter(self.parents))]
        while stack:
            node, parents = stack[-1]
            parent = next(parents, None)
            if parent is None:
                order.append(node)  # all its parents are placed: the node goes after them
                stack.pop()
            elif id(parent) not in seen:
                seen.add(id(parent))
                stack.append((parent, iter(parent.parents)))
        self.accumulate(np.asarray(g, dtype=np.float64))
        for node in reversed(order):  # every user of a node comes before it"""
RECURSIVE_WALK = """        order, seen = [], set()

        def visit(node):
            if id(node) not in seen:
                seen.add(id(node))
                for p in node.parents:
                    visit(p)
                order.append(node)

        visit(self)
        self.accumulate(np.ones_like(self.data) if g is None else np.asarray(g, dtype=np.float64))
        for node in reversed(order):"""
RAISED_LIMIT_WALK = "        import sys\n\n        sys.setrecursionlimit(50_000)\n" + RECURSIVE_WALK
BREADTH_FIRST_WALK = """        order, seen = [self], {id(self)}
        for node in order:
            for p in node.parents:
                if id(p) not in seen:
                    seen.add(id(p))
                    order.append(p)
        self.accumulate(np.ones_like(self.data) if g is None else np.asarray(g, dtype=np.float64))
        for node in order:"""
ACCUMULATE = "self.grad = g.copy() if self.grad is None else self.grad + g"
STRETCHED = "    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)"
LEAD = "    g = g.sum(axis=tuple(range(lead))) if lead else g"

TEMP = """    z = logits.astype(np.float64) / temperature  # BEFORE the softmax: T < 1 sharpens, T > 1 flattens
    if top_k is not None:
        kth = np.sort(z, axis=-1)[:, -top_k][:, None]  # the k-th largest of each row
        z = np.where(z < kth, -np.inf, z)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)"""
LAST = "return p / p.sum(axis=-1, keepdims=True)"
TEMP_UNUSED = TEMP.replace(" / temperature  #", "  #")  # the logits not divided: the planted mistakes add it after
TEMP_AFTER_SOFTMAX = TEMP_UNUSED.replace(LAST, f"{LAST} / temperature")
TEMP_AFTER_SOFTMAX_RENORMALISED = TEMP_UNUSED.replace(LAST, f"p = p / temperature\n    {LAST}")

DIAGNOSES = {
    "sum_to without the sum over a size-1 axis": (
        "rung2.py",
        STRETCHED,
        "    stretched = ()",
        "2.1",
        "axis 1 is not summed, where the target has size 1 and g has 3",
    ),
    "sum_to without the sum over the leading axes": (
        "rung2.py",
        LEAD,
        "    g = g.sum(axis=tuple(range(lead)), keepdims=True) if lead else g",
        "2.1",
        "leading axes that broadcasting added must be summed away",
    ),
    "accumulate that overwrites": ("rung2.py", ACCUMULATE, "self.grad = g.copy()", "2.2", "the second share replaced"),
    "accumulate that keeps g and adds in place": (
        "rung2.py",
        ACCUMULATE,
        "if self.grad is None:\n            self.grad = g\n        else:\n            self.grad += g",
        "2.2",
        "accumulate changed the array it was given",
    ),
    "a walk that assigns a share": (
        "rung2.py",
        "parent.accumulate(sum_to(np.asarray(share, dtype=np.float64), parent.data.shape))",
        "parent.grad = sum_to(np.asarray(share, dtype=np.float64), parent.data.shape)",
        "2.3",
        "the share from f was overwritten",
    ),
    "a recursive walk": ("rung2.py", WALK, RECURSIVE_WALK, "2.3", "RecursionError. A recursive graph walk"),
    "a recursive walk under a raised recursion limit": (
        "rung2.py",
        WALK,
        RAISED_LIMIT_WALK,
        "2.3",
        "your walk raised Python's recursion limit",
    ),
    "a walk in the wrong order": (
        "rung2.py",
        WALK,
        BREADTH_FIRST_WALK,
        "2.3",
        "ran before that of d = c + a, which uses it",
    ),
    "a wrong sum_to, seen by the walk": (
        "rung2.py",
        STRETCHED,
        "    stretched = ()",
        "2.3",
        "fix exercise 2.1 (sum_to) first",
    ),
    "a wrong sum_to, seen by an op's exercise": (
        "rung2.py",
        LEAD,
        "    g = g.sum(axis=tuple(range(lead)), keepdims=True) if lead else g",
        "3.1",
        "fix exercise 2.1 (sum_to) first",
    ),
    "a sign, on scalars": (
        "rung1.py",
        "self.grad += (1 - t**2) * out.grad",
        "self.grad -= (1 - t**2) * out.grad",
        "1.4",
        "check the sign",
    ),
    "a sign, on arrays": ("rung3.py", "return (g * out,)", "return (-g * out,)", "3.2", "check the sign"),
    "a missing 1/N": (
        "rung4.py",
        "return (g * (ctx.p - ctx.q) / ctx.n,)",
        "return (g * (ctx.p - ctx.q),)",
        "4.4",
        "Yours is 4 x the expected everywhere",
    ),
    "a transposed gradient": (
        "rung3.py",
        "np.swapaxes(a, -1, -2) @ g",
        "np.swapaxes(np.swapaxes(a, -1, -2) @ g, -1, -2)",
        "3.5",
        "last two axes swapped",
    ),
    "a parameter's gradient in neither the output's nor the input's shape": (
        "rung4.py",
        "return dx, g * xhat, g",
        "return dx, (g * xhat).sum(axis=-1, keepdims=True), g",
        "4.2",
        "expected the output's shape (4, 6) or the input's (6,)",
    ),
    "softmax's backward without the off-diagonal terms": (
        "rung4.py",
        "return (y * (g - (g * y).sum(axis=ctx.dim, keepdims=True)),)",
        "return (g * y * (1 - y),)",
        "4.1",
        "diagonal-only product",
    ),
    "layer norm's backward with the mean and variance held constant": (
        "rung4.py",
        "dx = rstd * (gx - gx.mean(axis=-1, keepdims=True) - xhat * (gx * xhat).mean(axis=-1, keepdims=True))",
        "dx = rstd * gx",
        "4.2",
        "as if the mean and the variance were constants",
    ),
    "layer norm's backward with only the Jacobian's diagonal": (
        "rung4.py",
        "dx = rstd * (gx - gx.mean(axis=-1, keepdims=True) - xhat * (gx * xhat).mean(axis=-1, keepdims=True))",
        "n = xhat.shape[-1]\n        dx = rstd * gx * (1 - 1 / n - xhat * xhat / n)",
        "4.2",
        "keeps only the Jacobian's diagonal",
    ),
    "a NaN": (
        "rung3.py",
        "return (g * (1 - out * out),)",
        "r = g * (1 - out * out)\n        r.flat[3] = np.nan\n        return (r,)",
        "3.4",
        "the first, in index order, is at element (0, 3)",
    ),
    "a wrong forward, seen by the backward's exercise": (
        "rung4.py",
        "np.full_like(logits, label_smoothing / C)",
        "np.full_like(logits, label_smoothing / (C - 1))",
        "4.4",
        "fix exercise 4.3 (CrossEntropy.forward) first",
    ),
    "a wrong attention, seen by multi-head attention": (
        "rung5.py",
        "weights = F.softmax(scores, dim=-1)",
        "weights = F.softmax(scores, dim=-1) * 1.5",
        "5.2",
        "fix exercise 5.1 (scaled_dot_product_attention) first",
    ),
    "a wrong step, seen by the loop": (
        "rung8.py",
        "    optimizer.zero_grad()\n",
        "",
        "8.2",
        "fix exercise 8.1 (train_step) first",
    ),
    "a decoder that goes on after EOS": (
        "rung9.py",
        "nxt = np.where(finished, PAD_ID, logits.numpy()[:, -1].argmax(axis=-1))",
        "nxt = logits.numpy()[:, -1].argmax(axis=-1)",
        "9.2",
        "differs first at step",
    ),
    "a wrong Adam, seen by the capstone": (
        "rung7.py",
        "m_hat = self.m[i] / (1 - b1**t)",
        "m_hat = self.m[i]",
        "9.1",
        "fix exercise 7.2 (Adam.step) first",
    ),
    "an embedding not scaled by sqrt(D)": (
        "rung6.py",
        "x = self.src_embed(mt.tensor(src)) * math.sqrt(self.d_model)",
        "x = self.src_embed(mt.tensor(src))",
        "6.4",
        "the input of encoder, the embedded source, src_embed(src) * sqrt(D) + PE[:S]: the embedding's scaling",
    ),
    "a causal mask that masks the diagonal": (
        "rung10.py",
        "return np.tril(np.ones((t, t), dtype=bool))",
        "return np.tril(np.ones((t, t), dtype=bool), -1)",
        "10.1",
        "The diagonal is masked: position i must see itself (keep j <= i, not j < i)",
    ),
    "a causal mask that shows the future": (
        "rung10.py",
        "return np.tril(np.ones((t, t), dtype=bool))",
        "return np.tril(np.ones((t, t), dtype=bool), 1)",
        "10.1",
        "Position i sees position i + 1: the future is visible",
    ),
    "a wrong causal mask, seen by the GPT": (
        "rung10.py",
        "return np.tril(np.ones((t, t), dtype=bool))",
        "return np.tril(np.ones((t, t), dtype=bool), 1)",
        "10.3",
        "fix exercise 10.1 (causal_mask) first",
    ),
    "a rotation with the wrong sign": (
        "rung10.py",
        "return mt.cat([-x[..., half:], x[..., :half]], dim=-1)",
        "return mt.cat([x[..., half:], -x[..., :half]], dim=-1)",
        "10.2",
        "Yours turns each pair by minus its angle",
    ),
    "a rotation that rotates neighbouring pairs": (
        "rung10.py",
        "return mt.cat([-x[..., half:], x[..., :half]], dim=-1)",
        "return mt.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).reshape(*x.shape)",
        "10.2",
        "You rotate neighbouring pairs (x[2i], x[2i + 1]), the interleaved layout",
    ),
    "a wrong rotation, seen by the GPT": (
        "rung10.py",
        "return mt.cat([-x[..., half:], x[..., :half]], dim=-1)",
        "return mt.cat([x[..., half:], -x[..., :half]], dim=-1)",
        "10.3",
        "fix exercise 10.2 (apply_rope (rotate-half)) first",
    ),
    "a wrong attention, seen by the GPT": (
        "rung5.py",
        "weights = F.softmax(scores, dim=-1)",
        "weights = F.softmax(scores, dim=-1) * 1.5",
        "10.3",
        "fix exercise 5.1 (scaled_dot_product_attention) first",
    ),
    "a GPT attention without the causal mask": (
        "rung10.py",
        "mt.tensor(causal_mask(T))",
        "None",
        "10.3",
        "change when only the last position's input does: the future is visible",
    ),
    "a GPT attention without the rotation": (
        "rung10.py",
        "q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)",
        "pass",
        "10.3",
        "Yours is the project's attention without the rotation",
    ),
    "a post-norm GPT block": (
        "rung10.py",
        """        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))""",
        """        x = self.norm1(x + self.attn(x))
        return self.norm2(x + self.mlp(x))""",
        "10.3",
        "Yours is the post-norm block of rung 6",
    ),
    "the temperature applied after the softmax": (
        "rung10.py",
        TEMP,
        TEMP_AFTER_SOFTMAX,
        "10.4",
        "The temperature was applied after the softmax",
    ),
    "the temperature applied after the softmax, renormalised": (
        "rung10.py",
        TEMP,
        TEMP_AFTER_SOFTMAX_RENORMALISED,
        "10.4",
        "The temperature was applied after the softmax",
    ),
    "top-k keeping k + 1": (
        "rung10.py",
        "kth = np.sort(z, axis=-1)[:, -top_k][:, None]",
        "kth = np.sort(z, axis=-1)[:, -top_k - 1][:, None]",
        "10.4",
        "Yours keeps k + 1 = 4 tokens per row",
    ),
    "a draw that takes the last token below u": (
        "rung10.py",
        "(cdf <= u).sum(axis=-1)",
        "(cdf <= u).sum(axis=-1) - 1",
        "10.4",
        "take the first token whose cumulative probability exceeds u",
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


@pytest.mark.parametrize("name", ["a missing 1/N", "a sign, on scalars"])
def test_a_diagnosis_points_to_the_planted_fault_of_parity_view(name, tmp_path):
    """A diagnosed mistake (on arrays, and on rung 1's scalars) ends with the reference that shows such a fault found
    in a whole model's graph; that anchor exists."""
    from course.checks.common import WRONG_GRADIENT_DOC
    from parity.view.formulas import anchors_in

    file, right, wrong, exercise, _ = DIAGNOSES[name]
    folder = _copy_solutions(tmp_path, "pointed")
    _plant(folder, file, right, wrong)
    rung = int(exercise.split(".")[0])
    (o,) = run_rung(rung, exercises_of(rung), folder, only=exercise)
    assert o.message.rstrip().endswith(WRONG_GRADIENT_DOC), o.message
    doc, anchor = WRONG_GRADIENT_DOC.split("#")
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        assert anchor in anchors_in(f.read())


def test_the_diagnosis_names_nothing_for_an_unrelated_difference():
    from course.checks.common import diagnose, diagnose_scalar

    r = np.random.default_rng(0)
    a, b = r.standard_normal((3, 4)), r.standard_normal((3, 4))
    assert diagnose(a, b) == "" and diagnose_scalar(1.3, 1.7) == ""
    assert "transposed" in diagnose(a.T.copy(), a) and "transposed" in diagnose(b[:3, :3].T.copy(), b[:3, :3])
    assert "1/4 x" in diagnose(a / 4, a) and "input 1's shape" in diagnose(a[0], a, input_shapes=[(3, 4), (4,)])


# Where the notebooks and docs name the course: each `course check N` / `check N` and `exercise N.M` must exist, and
# the text around it must name what that rung or exercise is about (a renumbering that missed one fails here).
REFERENCE_FILES = ["README.md", "course/README.md", "docs/*.md", "notebooks/[0-9]*.py"]
CHECK_REF = re.compile(r"course check (\d+)|`check (\d+)`")
EXERCISE_REF = re.compile(r"(?<!-)exercises? (\d+)\.(\d+)(?: and (\d+)\.(\d+))?")


def _topic_words(rung: int, exercise: str | None = None) -> set:
    """Lower-case words that name a rung (its title, its exercises' titles) or one exercise (its title)."""
    titles = [ex.title for ex in exercises_of(rung) if exercise is None or ex.id == exercise]
    if exercise is None:
        titles.append(RUNGS[rung])
    words = set()
    for title in titles:
        words |= {w for w in re.findall(r"[a-z_]+", title.lower()) if len(w) >= 3}
    # Words every rung uses are no evidence of which one is meant (unless they are all the title has).
    common = {"the", "and", "your", "with", "forward", "backward", "short", "layer", "step", "model", "optimizer"}
    return (words - common) or words


def _references():
    for pattern in REFERENCE_FILES:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
            text = open(path).read()
            for m in CHECK_REF.finditer(text):
                yield path, text, m.start(), int(m.group(1) or m.group(2)), None
            for m in EXERCISE_REF.finditer(text):
                for n, k in ((m.group(1), m.group(2)), (m.group(3), m.group(4))):
                    if n is not None:
                        yield path, text, m.start(), int(n), f"{n}.{k}"


def test_every_reference_to_the_course_names_an_existing_exercise_about_its_text():
    refs = list(_references())
    assert len(refs) >= 10, refs  # the notebooks 01-04 and the glossary name the course
    for path, text, at, rung, exercise in refs:
        where = f"{os.path.relpath(path, ROOT)}: {text[at : at + 40]!r}"
        assert rung in RUNGS, f"{where}: there is no rung {rung}"
        if exercise is not None:
            assert exercise in {ex.id for ex in exercises_of(rung)}, f"{where}: there is no exercise {exercise}"
        if rung == 1 and exercise is None:
            continue  # `course check 1` is the course's front door, named without a topic
        window = set(re.findall(r"[a-z_]+", text[max(0, at - 400) : at + 200].lower()))
        words = _topic_words(rung, exercise)
        assert words & window, f"{where}: the text around it names none of {sorted(words)}"
