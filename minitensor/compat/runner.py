"""run(): a PyTorch script run as `__main__` on minitensor, as `python script.py args` would run it on torch."""

from __future__ import annotations

import os
import runpy
import sys

from .importer import as_torch


def run(path: str, args=()) -> dict:
    """Run the script at `path` as `__main__` with sys.argv = [path, *args] and torch mapped to minitensor; returns
    the script's globals. As `python script.py` does, the script's folder comes first on sys.path (in place of the
    folder the runner was started from); sys.argv and sys.path are restored afterwards."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such script: {path}")
    argv, search = sys.argv, list(sys.path)
    sys.argv = [path, *args]
    sys.path[:1] = [os.path.dirname(os.path.abspath(path))]
    try:
        with as_torch():
            return runpy.run_path(path, run_name="__main__")
    finally:
        sys.argv = argv
        sys.path[:] = search
