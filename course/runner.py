"""The checker's machinery: which files are checked, running one rung's exercises, and what a failure says.

`source` names the package whose rungN.py files are checked:
    "exercises"  course/exercises/, the learner's files (the default)
    "solutions"  course/solutions/, the answers (what the CI test substitutes)
    a directory  any folder holding rung1.py ... rung10.py (the CI test's planted wrong solutions); it is
                 imported as a package named after the folder, its parent put on sys.path
The files are imported as they are on disk at the moment of the check, so a syntax error or an unsaved stub
is what gets checked, never a reference copy (TinyTorch's trap: cs249r_book #2117).

A failure says which exercise, then what was wrong: not written yet (the stub's NotImplementedError), the
learner's code raised (its own frames of the traceback kept, the engine's and the checker's trimmed), a
value returned of the wrong kind, shape or dtype, or a number that differs (which op, which element,
expected against got).

Each exercise runs in a child process of its own (forked, so that torch and the engine, imported once by the
parent, are not imported again): the learner's file is imported there and the check run. Whatever the learner's
code does (an endless loop, `sys.exit()`, `os._exit()`, a crash, memory without end), that exercise fails in one
line and the runner goes on with the next: a child that runs past `timeout` seconds is killed, one that ends
without a verdict is reported with how it ended, and the child's memory is capped (MEMORY_BYTES above what it
shares with the parent), so that a runaway allocation fails as a MemoryError instead of taking the machine.
"""

from __future__ import annotations

import faulthandler
import importlib
import multiprocessing
import os
import resource
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
RUNGS = {
    1: "the chain rule on scalars",
    2: "the engine on tensors",
    3: "tensor ops",
    4: "fused ops",
    5: "layers",
    6: "the model",
    7: "the optimizer",
    8: "training",
    9: "the capstone",
    10: "a decoder-only model (GPT)",
}
NAMED_SOURCES = {"exercises": "course.exercises", "solutions": "course.solutions"}
TIMEOUT_S = 60.0  # an exercise's time limit (`--timeout`): a correct solution takes a few seconds at most
MEMORY_BYTES = 4 * 2**30  # what a child may allocate beyond the address space it starts with


class CheckFailed(AssertionError):
    """A check's own verdict: the message says what was expected and what came."""


class SourceError(Exception):
    """The learner's file could not be imported (a syntax error, an import that fails, a missing file)."""


@dataclass
class Exercise:
    id: str  # "3.4"
    title: str  # "Tanh.backward"
    check: Callable  # check(module) -> None; raises CheckFailed (or the learner's own exception)
    needs: tuple = ()  # ids of the exercises this one runs ("5.1"): when this fails, a failing one is named first


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
    return head + "".join(lines) + f"  {type(exc).__name__}: {safe_str(exc)}" + notes


def safe_str(obj) -> str:
    """str(obj), or a stand-in when the learner's __str__ itself raises."""
    try:
        return str(obj)
    except Exception as e:
        return f"<str() of this {type(obj).__name__} raised {type(e).__name__}>"


def run_exercise(ex: Exercise, module, folder: str) -> Outcome:
    t0 = time.perf_counter()
    try:
        ex.check(module)
    except NotImplementedError as e:
        named = safe_str(e).removeprefix("exercise ").strip()
        message = "not written yet" if named in ("", ex.id) else f"needs exercise {named} first (not written yet)"
        return Outcome(ex, False, message, time.perf_counter() - t0)
    except CheckFailed as e:
        return Outcome(ex, False, safe_str(e), time.perf_counter() - t0)
    except AttributeError as e:
        if getattr(e, "obj", None) is module:  # a name the check needs is not in the learner's file
            where = getattr(module, "__file__", "your code")
            message = f"{where} defines no `{e.name}`, which this exercise checks (renamed or deleted?)"
            return Outcome(ex, False, message, time.perf_counter() - t0)
        return Outcome(
            ex, False, "your code raised an error:\n" + learner_traceback(e, folder), time.perf_counter() - t0
        )
    except Exception as e:  # the learner's code raised: say so, with the learner's own frames
        return Outcome(
            ex, False, "your code raised an error:\n" + learner_traceback(e, folder), time.perf_counter() - t0
        )
    except SystemExit as e:
        return Outcome(ex, False, exit_message(e), time.perf_counter() - t0)
    return Outcome(ex, True, "ok", time.perf_counter() - t0)


def exit_message(e: SystemExit) -> str:
    return (
        f"your code called sys.exit({safe_str(e.code) if e.code is not None else ''}) (or raised SystemExit), "
        "which would end the checker: the exercise counts as failed"
    )


def run_rung(
    rung: int, exercises: list, source: str = "exercises", only: str | None = None, timeout: float = TIMEOUT_S
) -> list[Outcome]:
    """Every exercise of the rung (or only the one with id `only`) on `source`'s rungN.py, each in a child process
    with `timeout` seconds (see the module's docstring).

    A file that does not import fails every exercise with the import error."""
    resolve(source)  # a bad source is the caller's error, raised here before any child starts
    return [run_isolated(rung, ex, source, timeout) for ex in exercises if only is None or ex.id == only]


def run_in_child(rung: int, ex: Exercise, source: str) -> Outcome:
    """Import the learner's file and run one exercise: what the child does."""
    _, folder = resolve(source)
    t0 = time.perf_counter()
    try:
        module = load(rung, source)
    except SourceError as e:
        return Outcome(ex, False, safe_str(e), 0.0)
    except SystemExit as e:  # at import
        return Outcome(ex, False, f"importing your file: {exit_message(e)}", time.perf_counter() - t0)
    outcome = run_exercise(ex, module, folder)
    if not outcome.ok and outcome.message != "not written yet" and not outcome.message.startswith("needs exercise"):
        first = failing_prerequisite(ex, source)
        if first is not None:
            saw = (
                ""
                if _first_line(first.message) == _first_line(outcome.message)
                else f" What this one saw: {outcome.message}"
            )
            outcome.message = (
                f"fix exercise {first.exercise.id} ({first.exercise.title}) first: this one runs it, and it fails "
                f"({_first_line(first.message)}).{saw}"
            )
    return outcome


def failing_prerequisite(ex: Exercise, source: str) -> Outcome | None:
    """The first exercise in ex.needs (and in theirs, earliest first) that fails on `source`, or None."""
    import course.checks  # noqa: F401  (the checks package: imported here, as the runner is imported by it)

    for needed in ex.needs:
        rung = int(needed.split(".")[0])
        (pre,) = [e for e in importlib.import_module(f"course.checks.rung{rung}").EXERCISES if e.id == needed]
        deeper = failing_prerequisite(pre, source)
        if deeper is not None:
            return deeper
        try:
            module = load(rung, source)
        except (SourceError, SystemExit) as e:
            return Outcome(pre, False, safe_str(e), 0.0)
        outcome = run_exercise(pre, module, resolve(source)[1])
        if not outcome.ok:
            return outcome
    return None


def _first_line(message: str, limit: int = 200) -> str:
    line = message.strip().splitlines()[0] if message.strip() else message
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _child(conn, rung: int, ex: Exercise, source: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's to report; it ends this child
    _one_thread_after_fork()
    faulthandler.disable()  # a crash is reported by the parent in one line, not as a dump of every thread
    _cap_memory()
    try:
        o = run_in_child(rung, ex, source)
        conn.send((o.ok, o.message, o.seconds))
    except BaseException as e:  # an error of the checker's own machinery (a MemoryError while reporting...)
        conn.send((False, f"the check could not finish: {type(e).__name__}: {safe_str(e)}", 0.0))
    finally:
        conn.close()
        sys.stdout.flush()
        os._exit(0)  # no atexit handlers, no finalizers of the learner's objects: the verdict is sent


def _one_thread_after_fork() -> None:
    """fork copies only the calling thread: the OpenMP threads torch started in the parent are gone, and an OpenMP
    region that waited for them would hang. The child computes on one thread (a check's arrays are small)."""
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


def _cap_memory() -> None:
    """Limit the child's address space to what it has now plus MEMORY_BYTES (where the platform allows it)."""
    try:
        with open("/proc/self/statm") as f:
            now = int(f.read().split()[0]) * resource.getpagesize()
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = now + MEMORY_BYTES
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (OSError, ValueError):
        pass


def _warm_up() -> None:
    """Run torch's first backward in the parent: it imports a few hundred modules lazily (0.3 s), which every
    forked child would otherwise import again."""
    global _warm
    if not _warm:
        import torch

        x = torch.ones(2, requires_grad=True)
        (x * 2).backward(torch.ones(2))  # with a given gradient: the path the checks take
        _warm = True


_warm = False


def run_isolated(rung: int, ex: Exercise, source: str, timeout: float = TIMEOUT_S) -> Outcome:
    """One exercise in a forked child: its verdict, or a failure that says how the child ended."""
    _warm_up()
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    sys.stdout.flush()
    sys.stderr.flush()
    child = ctx.Process(target=_child, args=(send, rung, ex, source), daemon=True)
    t0 = time.perf_counter()
    child.start()
    send.close()
    try:
        verdict = recv.recv() if recv.poll(timeout) else None
    except (EOFError, OSError):  # the child died before sending
        verdict = None
    except BaseException:  # a Ctrl-C: the child goes with the parent
        child.kill()
        child.join()
        raise
    finally:
        recv.close()
    seconds = time.perf_counter() - t0
    if verdict is not None:
        child.join()
        return Outcome(ex, *verdict)
    if child.is_alive():
        child.join(0.5)  # a child that closed its end while ending
    if child.is_alive():
        child.kill()
        child.join()
        return Outcome(
            ex, False, f"no verdict after {timeout:g} s (--timeout): an endless loop, or a very slow one?", seconds
        )
    return Outcome(ex, False, f"your code ended the checker's process ({_how_it_ended(child.exitcode)})", seconds)


def _how_it_ended(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        why = " (out of memory?)" if -code == signal.SIGKILL else ""
        return f"killed by {name}{why}"
    return f"os._exit({code}) or a crash, with no verdict"
