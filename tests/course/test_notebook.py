"""The "Your turn" cells of notebooks 01-04 (course/notebook.py's check_here): each stub cell, run as the notebook
holds it, gets the course's "not written yet"; the solution's code passes; a wrong answer gets the course's
message; none of them raises, so that the notebooks run to their end whatever the learner wrote."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import course.solutions.rung2 as s2
import course.solutions.rung4 as s4
import course.solutions.rung5 as s5
import course.solutions.rung8 as s8
import minitensor as mt
from course.notebook import check_here
from tests.support import ROOT

# notebook -> (exercise, the name it checks, the solution's object)
YOUR_TURN = {
    "01_engine_from_zero.py": ("2.1", "sum_to", s2.sum_to),
    "02_fused_ops.py": ("4.1", "Softmax", s4.Softmax),
    "03_attention.py": ("5.1", "scaled_dot_product_attention", s5.scaled_dot_product_attention),
    "04_training.py": ("8.1", "train_step", s8.train_step),
}


def _cells(name: str) -> list:
    with open(os.path.join(ROOT, "notebooks", name)) as f:
        return f.read().split("# %%")


def _stub(name: str):
    """The notebook's stub, defined by running its own cell (the one just before the check cell)."""
    exercise, what, _ = YOUR_TURN[name]
    cells = _cells(name)
    (at,) = [i for i, c in enumerate(cells) if f'check_here("{exercise}", {what}={what})' in c]
    namespace = {"np": np, "mt": mt}
    exec(compile(cells[at - 1], name, "exec"), namespace)
    return namespace[what]


@pytest.mark.parametrize("name", sorted(YOUR_TURN))
def test_the_stub_in_the_notebook_gets_not_written_yet_and_the_solution_passes(name, capsys):
    exercise, what, solution = YOUR_TURN[name]
    check_here(exercise, **{what: _stub(name)})
    out = capsys.readouterr().out
    assert f"exercise {exercise}" in out and "FAIL: not written yet" in out, out
    check_here(exercise, **{what: solution})
    assert re.search(rf"exercise {re.escape(exercise)} \(.*\): PASS", capsys.readouterr().out)


def test_a_wrong_answer_in_a_notebook_gets_the_courses_diagnosis_and_does_not_raise(capsys):
    check_here("2.1", sum_to=lambda g, shape: g)
    assert "FAIL" in capsys.readouterr().out
    check_here("2.1", sum_to=lambda g, shape: g.sum(axis=tuple(range(g.ndim - len(shape)))))
    assert "axis 1 is not summed, where the target has size 1" in capsys.readouterr().out

    class Diagonal(s4.Softmax):
        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_arrays
            return (g * y * (1 - y),)

    check_here("4.1", Softmax=Diagonal)
    assert "FAIL" in (out := capsys.readouterr().out) and "diagonal-only product" in out, out
    check_here("4.1", Softmax=None)  # not even a class: a failure, not an error
    assert "FAIL" in capsys.readouterr().out
