"""One exercise of the course, checked from inside a notebook: the "Your turn" cells of notebooks 01-04.

    check_here("2.1", sum_to=sum_to)    # the names the exercise needs, as the notebook defined them

runs the exercise's check (course/checks/) on those names in this process, prints PASS or what is wrong (the
same message as `python -m course check`), and never raises, so that a notebook with the stub still runs to its
end.
"""

from __future__ import annotations

import os
import types

from .__main__ import exercises_of
from .runner import run_exercise


def check_here(exercise: str, **names) -> None:
    rung = int(exercise.split(".")[0])
    (ex,) = [e for e in exercises_of(rung) if e.id == exercise]
    module = types.SimpleNamespace(**names)
    outcome = run_exercise(ex, module, os.getcwd())
    verdict = "PASS" if outcome.ok else "FAIL"
    print(f"exercise {ex.id} ({ex.title}): {verdict}" + ("" if outcome.ok else f": {outcome.message}"))
