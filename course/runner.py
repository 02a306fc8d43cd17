"""The checker's machinery: which files are checked, running one rung's exercises, and what a failure says.

`source` names the package whose rungN.py files are checked:
    "exercises"  course/exercises/, the learner's files (the default)
    "solutions"  course/solutions/, the answers (what the CI test substitutes)
    a directory  any folder holding rung1.py ... rung7.py (the CI test's planted wrong solutions); it is
                 imported as a package named after the folder, its parent put on sys.path
The files are imported as they are on disk at the moment of the check, so a syntax error or an unsaved stub
is what gets checked, never a reference copy (TinyTorch's trap: cs249r_book #2117).

A failure says which exercise, then what was wrong: not written yet (the stub's NotImplementedError), the
learner's code raised (its own frames of the traceback kept, the engine's and the checker's trimmed), a
value returned of the wrong kind, shape or dtype, or a number that differs (which op, which element,
expected against got).
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
RUNGS = {
    1: "the chain rule on scalars",
    2: "tensor ops",
    3: "fused ops",
    4: "layers",
    5: "the model",
    6: "the optimizer",
    7: "training",
}
NAMED_SOURCES = {"exercises": "course.exercises", "solutions": "course.solutions"}


class CheckFailed(AssertionError):
    """A check's own verdict: the message says what was expected and what came."""


class SourceError(Exception):
    """The learner's file could not be imported (a syntax error, an import that fails, a missing file)."""


@dataclass
class Exercise:
    id: str  # "2.4"
    title: str  # "Tanh.backward"
    check: Callable  # check(module) -> None; raises CheckFailed (or the learner's own exception)


@dataclass
class Outcome:
    exercise: Exercise
    ok: bool
    message: str
    seconds: float


def resolve(source: str) -> tuple[str, str]:
    """(package name, folder) of a source: a name in NAMED_SOURCES or a directory holding rungN.py files."""
    if source in NAMED_SOURCES:
        return NAMED_SOURCES[source], os.path.join(HERE, source)
    folder = os.path.abspath(source)
    if not os.path.isdir(folder):
        raise SourceError(f"--from: expected 'exercises', 'solutions' or a directory, got {source!r}")
    name = os.path.basename(folder)
    if not name.isidentifier():
        raise SourceError(f"--from: the folder's name must be a Python identifier (it is imported), got {name!r}")
    parent = os.path.dirname(folder)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    return name, folder


def load(rung: int, source: str = "exercises"):
    """Import rung `rung` of `source` as it is on disk now; SourceError names the file and the problem."""
    package, folder = resolve(source)
    path = os.path.join(folder, f"rung{rung}.py")
    if not os.path.exists(path):
        raise SourceError(f"{path}: no such file")
    try:
        return importlib.import_module(f"{package}.rung{rung}")
    except SyntaxError as e:
        raise SourceError(f"{e.filename}:{e.lineno}: SyntaxError: {e.msg}\n    {(e.text or '').rstrip()}") from None
    except Exception as e:
        raise SourceError(f"{path} does not import:\n{learner_traceback(e, folder)}") from None


def learner_traceback(exc: BaseException, folder: str) -> str:
    """The traceback's frames inside the learner's folder (the engine's, torch's, the checker's trimmed), then the
    error."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.abspath(f.filename).startswith(folder)]
    lines = (
        traceback.format_list(frames) if frames else ["  (raised outside your files, by the code your code called)\n"]
    )
    trimmed = len(traceback.extract_tb(exc.__traceback__)) - len(frames)
    head = f"  Traceback, your frames only ({trimmed} frames of the engine and the checker trimmed):\n"
    notes = "".join(f"\n  {n}" for n in getattr(exc, "__notes__", []))
    return head + "".join(lines) + f"  {type(exc).__name__}: {exc}" + notes


def run_exercise(ex: Exercise, module, folder: str) -> Outcome:
    t0 = time.perf_counter()
    try:
        ex.check(module)
    except NotImplementedError as e:
        named = str(e).removeprefix("exercise ").strip()
        message = "not written yet" if named in ("", ex.id) else f"needs exercise {named} first (not written yet)"
        return Outcome(ex, False, message, time.perf_counter() - t0)
    except CheckFailed as e:
        return Outcome(ex, False, str(e), time.perf_counter() - t0)
    except AttributeError as e:
        if getattr(e, "obj", None) is module:  # a name the check needs is not in the learner's file
            message = f"{module.__file__} defines no `{e.name}`, which this exercise checks (renamed or deleted?)"
            return Outcome(ex, False, message, time.perf_counter() - t0)
        return Outcome(
            ex, False, "your code raised an error:\n" + learner_traceback(e, folder), time.perf_counter() - t0
        )
    except Exception as e:  # the learner's code raised: say so, with the learner's own frames
        return Outcome(
            ex, False, "your code raised an error:\n" + learner_traceback(e, folder), time.perf_counter() - t0
        )
    return Outcome(ex, True, "ok", time.perf_counter() - t0)


def run_rung(rung: int, exercises: list, source: str = "exercises", only: str | None = None) -> list[Outcome]:
    """Every exercise of the rung (or only the one with id `only`) on `source`'s rungN.py.

    A file that does not import fails every exercise with the import error."""
    _, folder = resolve(source)
    chosen = [ex for ex in exercises if only is None or ex.id == only]
    try:
        module = load(rung, source)
    except SourceError as e:
        return [Outcome(ex, False, str(e), 0.0) for ex in chosen]
    return [run_exercise(ex, module, folder) for ex in chosen]
