"""`python -m course list` and `python -m course check N [--exercise N.M] [--from exercises|solutions|DIR]`.

check: runs rung N's checks on the learner's files (course/exercises/rungN.py, as on disk) and prints one line
per exercise, then what is wrong with each that failed. Each exercise runs in a process of its own with a time
limit (`--timeout`, default 60 s). Exit status 0 when all pass, 1 when one fails, 2 for a bad command line (one
line on stderr), 130 after a Ctrl-C (one line naming the exercise it stopped).
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
import time

from .runner import RUNGS, TIMEOUT_S, SourceError, resolve, run_isolated


def exercises_of(rung: int) -> list:
    """The Exercise list of rung `rung` (course/checks/rungN.py)."""
    return importlib.import_module(f"course.checks.rung{rung}").EXERCISES


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m course", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the rungs and their exercises")
    c = sub.add_parser("check", help="run one rung's checks on your files")
    c.add_argument("rung", type=int, choices=sorted(RUNGS), help=f"which rung (1-{max(RUNGS)})")
    c.add_argument("--exercise", metavar="N.M", help="only this exercise (e.g. 3.4)")
    c.add_argument(
        "--from",
        dest="source",
        default=os.environ.get("COURSE_FROM", "exercises"),
        help="whose files: 'exercises' (yours, the default), 'solutions', or a directory of rungN.py files "
        "(default: $COURSE_FROM, else exercises)",
    )
    c.add_argument(
        "--timeout",
        type=_seconds,
        default=TIMEOUT_S,
        metavar="S",
        help=f"seconds each exercise may run before it fails as an endless loop (default: {TIMEOUT_S:g})",
    )
    return p


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def error(message: str) -> int:
    print(f"python -m course: error: {message}", file=sys.stderr)
    return 2


def cmd_list() -> int:
    for n, title in RUNGS.items():
        exs = exercises_of(n)
        print(f"rung {n}: {title} ({len(exs)} exercises)  course/exercises/rung{n}.py")
        for ex in exs:
            print(f"    {ex.id}  {ex.title}")
    return 0


def cmd_check(args) -> int:
    exs = exercises_of(args.rung)
    if args.exercise is not None and args.exercise not in {ex.id for ex in exs}:
        return error(f"--exercise: rung {args.rung} has {', '.join(ex.id for ex in exs)}, got {args.exercise!r}")
    try:
        _, folder = resolve(args.source)
    except SourceError as e:
        return error(str(e))
    print(f"rung {args.rung}, {RUNGS[args.rung]}: checking {os.path.join(folder, f'rung{args.rung}.py')}")
    t0 = time.perf_counter()
    outcomes = []
    for ex in exs:
        if args.exercise is not None and ex.id != args.exercise:
            continue
        try:
            o = run_isolated(args.rung, ex, args.source, args.timeout)
        except KeyboardInterrupt:
            print(f"\npython -m course: interrupted while checking exercise {ex.id} ({ex.title})", file=sys.stderr)
            return 130
        print(f"  {'PASS' if o.ok else 'FAIL'}  {o.exercise.id}  {o.exercise.title:<34} {o.seconds:6.2f} s", flush=True)
        outcomes.append(o)
    failed = [o for o in outcomes if not o.ok]
    for o in failed:
        print(f"\nexercise {o.exercise.id} ({o.exercise.title}): {o.message}")
    passed = len(outcomes) - len(failed)
    print(f"\n{passed}/{len(outcomes)} passed in {time.perf_counter() - t0:.1f} s")
    return 1 if failed else 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return cmd_list() if args.command == "list" else cmd_check(args)
    except KeyboardInterrupt:  # outside an exercise: while importing the checks, or printing
        print("\npython -m course: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
