"""What the tests share and are not tests themselves: the op table, the refusal lists, the command-line helpers, the
scripts that MPI ranks run, and the repository's root (ROOT), which a test that starts a process or reads a file
of the repository takes its paths from."""

from __future__ import annotations

import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def runs_ranks(test):
    """Marks a test that starts MPI ranks: in the full tier, and on one pytest-xdist worker with every other such test
    (`--dist loadgroup`), so that two launches' busy-polling ranks never share the cores."""
    return pytest.mark.full(pytest.mark.xdist_group("mpi")(test))
