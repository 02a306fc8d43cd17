"""The course runner against hostile learner code: it runs whatever a learner wrote, so NaN and inf, sys.exit,
os._exit, a signal, an endless loop, memory without end, wrong types, megabytes of printing and a Ctrl-C each
fail that exercise (or stop the run) in one clear line, and the run goes on to report the rest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

import course.runner
from course.__main__ import exercises_of
from course.__main__ import main as course_main
from course.runner import run_rung
from tests.course.test_checks import _copy_solutions as _folder
from tests.course.test_checks import _plant
from tests.support import ROOT


def _outcomes(rung: int, folder: str, timeout: float = 60.0) -> dict:
    return {o.exercise.id: o for o in run_rung(rung, exercises_of(rung), folder, timeout=timeout)}


ADD = "            self.grad += out.grad\n            other.grad += out.grad"


@pytest.mark.parametrize("value", ["math.nan", "math.inf", "-math.inf"])
def test_a_non_finite_scalar_gradient_fails(tmp_path, value):
    folder = _folder(tmp_path, "nonfinite_scalar")
    _plant(folder, "rung1.py", ADD, f"            self.grad += out.grad + {value}\n            other.grad += out.grad")
    out = _outcomes(1, folder)
    assert not out["1.1"].ok, "a non-finite gradient passed the check"
    assert all(o.ok for i, o in out.items() if i not in ("1.1", "1.6")), {i: o.message for i, o in out.items()}


def test_a_non_finite_forward_value_fails(tmp_path):
    folder = _folder(tmp_path, "nonfinite_forward")
    _plant(folder, "rung1.py", "e = math.exp(self.data)\n", "e = math.exp(self.data) * math.nan\n")
    assert not _outcomes(1, folder)["1.5"].ok


def test_a_non_finite_array_gradient_is_named_as_such(tmp_path):
    folder = _folder(tmp_path, "nonfinite_array")
    _plant(folder, "rung3.py", "return (g * out,)", "return (g * out * np.nan,)")
    o = _outcomes(3, folder)["3.2"]
    assert not o.ok and "non-finite" in o.message and "nan" in o.message, o.message


def test_an_inf_in_one_element_of_an_array_is_caught(tmp_path):
    folder = _folder(tmp_path, "inf_one_element")
    _plant(
        folder,
        "rung3.py",
        "return (g * (1 - out * out),)",
        "r = g * (1 - out * out)\n        r.flat[0] = np.inf\n        return (r,)",
    )
    o = _outcomes(3, folder)["3.4"]
    assert not o.ok and "non-finite" in o.message and "element (0" in o.message, o.message


@pytest.mark.parametrize("call", ["sys.exit()", "sys.exit(0)", "raise SystemExit(3)"])
def test_sys_exit_inside_the_learners_code_fails_that_exercise_only(tmp_path, call):
    folder = _folder(tmp_path, "exit_inside")
    _plant(folder, "rung3.py", "return (g * out,)", f"import sys\n        {call}")
    out = _outcomes(3, folder)
    assert not out["3.2"].ok and "sys.exit" in out["3.2"].message and "failed" in out["3.2"].message
    assert all(o.ok for i, o in out.items() if i != "3.2"), {i: o.message for i, o in out.items()}


def test_sys_exit_at_import_fails_every_exercise_with_a_line_that_says_so(tmp_path):
    folder = _folder(tmp_path, "exit_at_import")
    with open(os.path.join(folder, "rung4.py"), "a") as f:
        f.write("\nimport sys\nsys.exit(0)\n")
    out = _outcomes(4, folder)
    assert out
    assert all(not o.ok and "importing your file" in o.message and "sys.exit" in o.message for o in out.values())


def test_an_endless_loop_fails_by_the_time_limit_and_the_rest_still_runs(tmp_path):
    folder = _folder(tmp_path, "endless")
    _plant(folder, "rung3.py", "return (g * out,)", "while True:\n            pass")
    t0 = time.perf_counter()
    out = _outcomes(3, folder, timeout=2.0)
    assert time.perf_counter() - t0 < 30
    assert not out["3.2"].ok and "no verdict after 2 s" in out["3.2"].message, out["3.2"].message
    assert all(o.ok for i, o in out.items() if i != "3.2"), {i: o.message for i, o in out.items()}


@pytest.mark.parametrize(
    "death, words",
    [
        ("os._exit(3)", "os._exit(3)"),
        ("os.kill(os.getpid(), signal.SIGSEGV)", "killed by SIGSEGV"),
        ("os.kill(os.getpid(), signal.SIGKILL)", "killed by SIGKILL"),
    ],
)
def test_a_process_that_dies_fails_that_exercise_in_one_line(tmp_path, death, words):
    folder = _folder(tmp_path, "dies")
    _plant(folder, "rung3.py", "return (g * out,)", f"import os, signal\n        {death}")
    out = _outcomes(3, folder)
    assert not out["3.2"].ok and words in out["3.2"].message and "\n" not in out["3.2"].message, out["3.2"].message
    assert all(o.ok for i, o in out.items() if i != "3.2")


def test_memory_without_end_fails_as_a_memory_error(tmp_path, monkeypatch):
    monkeypatch.setattr(course.runner, "MEMORY_BYTES", 2**28)  # the child is forked: it sees the smaller cap
    folder = _folder(tmp_path, "memory")
    _plant(folder, "rung3.py", "return (g * out,)", "hog = [bytearray(2**26) for _ in range(10**6)]")
    o = _outcomes(3, folder)["3.2"]
    assert not o.ok and "MemoryError" in o.message, o.message


@pytest.mark.parametrize("value", ["[1.0, 2.0]", "'a string'", "42", "object()"])
def test_a_gradient_of_the_wrong_type_is_named(tmp_path, value):
    folder = _folder(tmp_path, "wrong_type")
    _plant(folder, "rung3.py", "return (g * out,)", f"return ({value},)")
    o = _outcomes(3, folder)["3.2"]
    assert not o.ok and o.message, o.message


def test_a_wrong_type_in_the_scalar_engine_is_named(tmp_path):
    folder = _folder(tmp_path, "wrong_type_scalar")
    _plant(folder, "rung1.py", "            self.grad += e * out.grad", "            self.grad = 'e'")
    o = _outcomes(1, folder)["1.5"]
    assert not o.ok and "expected a number" in o.message, o.message


def test_an_error_whose_str_raises_is_still_reported(tmp_path):
    folder = _folder(tmp_path, "bad_str")
    _plant(
        folder,
        "rung3.py",
        "return (g * out,)",
        "class Odd(Exception):\n            def __str__(self):\n                raise ValueError\n        raise Odd()",
    )
    o = _outcomes(3, folder)["3.2"]
    assert not o.ok and "Odd" in o.message and "str()" in o.message, o.message


def test_endless_recursion_is_reported_as_the_learners_error(tmp_path):
    folder = _folder(tmp_path, "recursion")
    _plant(folder, "rung3.py", "return (g * out,)", "def f(n):\n            return f(n + 1)\n        return f(0)")
    o = _outcomes(3, folder)["3.2"]
    assert not o.ok and "RecursionError" in o.message, o.message


def _run_course(args, run=subprocess.run, **kw):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    env.pop("COURSE_FROM", None)
    return run([sys.executable, "-m", "course", *args], cwd=ROOT, env=env, **kw)


def test_printing_megabytes_does_not_hang_the_runner(tmp_path):
    folder = _folder(tmp_path, "loud")
    _plant(folder, "rung3.py", "return (g * out,)", "print('x' * 2**22)\n        return (g * out,)")
    proc = _run_course(["check", "3", "--from", folder], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "5/5 passed" in proc.stdout, proc.stderr[-2000:]


def test_ctrl_c_during_an_endless_loop_is_one_line_and_130(tmp_path):
    folder = _folder(tmp_path, "interrupted")
    _plant(folder, "rung3.py", "return (g * out,)", "while True:\n            pass")
    proc = _run_course(
        ["check", "3", "--from", folder],
        subprocess.Popen,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        line = ""
        while "3.1" not in line and time.monotonic() < deadline:  # 3.1 passed: 3.2's loop is running
            line = proc.stdout.readline()
        time.sleep(1.0)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends it: to the whole process group
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, (out, err)
    lines = [x for x in err.splitlines() if x.strip()]
    assert lines == ["python -m course: interrupted while checking exercise 3.2 (Exp.backward)"], err


@pytest.mark.parametrize(
    "args, words",
    [
        (["check", "3", "--exercise", "9.9"], "--exercise: rung 3 has"),
        (["check", "3", "--from", "/no/such/folder"], "--from: expected"),
        (["check", "3", "--timeout", "0"], "--timeout"),
        (["check", "3", "--timeout", "nan"], "--timeout"),
        (["check", "11"], "invalid choice"),  # one past the last rung
    ],
)
def test_bad_command_lines_are_one_line_on_stderr_and_exit_2(args, words):
    proc = _run_course(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", (proc.stdout, proc.stderr)
    assert words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_the_command_reports_every_exercise_after_a_hostile_one(tmp_path, capsys):
    folder = _folder(tmp_path, "hostile_mix")
    _plant(folder, "rung3.py", "return (g * out,)", "import os\n        os._exit(0)")
    assert course_main(["check", "3", "--from", folder]) == 1
    out = capsys.readouterr().out
    assert "FAIL  3.2" in out and "4/5 passed" in out and "os._exit(0)" in out, out


def test_children_do_not_hang_on_the_threads_the_parent_started(tmp_path):
    """fork copies only the calling thread: the OpenMP threads torch started in the parent are gone in a child,
    and a check that waited for them hung. The runner's children compute on one thread."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x = torch.randn(1000, 1000)
        torch.softmax(x @ x, -1).sum()  # torch's OpenMP threads now exist in this process
        outcomes = run_rung(4, exercises_of(4), "solutions", timeout=20)
    finally:
        torch.set_num_threads(before)
    assert all(o.ok for o in outcomes), [(o.exercise.id, o.message) for o in outcomes if not o.ok]
