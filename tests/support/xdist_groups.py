"""`--dist loadgroup` under pytest 9: the group suffix pytest-xdist means to add to each grouped test's id.

pytest-xdist (3.8) sends every test marked `xdist_group(name)` to one worker by adding "@name" to the test's id in
each worker, which it does by setting the attribute `_nodeid`; pytest 9 reads a test's id from `_id` instead, so the
suffix never shows and the grouped tests spread over the workers like any other. `add_group_suffixes` sets it where
pytest 9 reads it, in each worker (tests/conftest.py calls it), and does nothing where the suffix is already there.
tests/test_suite_tiers.py checks that a group stays on one worker.
"""

from __future__ import annotations

import os

from _pytest.nodeid import NodeId


def group_names(item) -> list[str]:
    return sorted(
        {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    )


def add_group_suffixes(config, items) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = group_names(item)
        if names and "@" not in item.nodeid and hasattr(item, "_id"):
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")
