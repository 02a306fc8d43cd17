"""The suite's own machinery: the fast tier's samples of the op table, and xdist groups that hold together.

`make test` takes one sample per primitive from each family of the op table (tests/support/op_cases.py, `samples`);
`--dist loadgroup` must keep an `xdist_group` on one worker (the MPI launches, the benchmark report), which
tests/support/xdist_groups.py makes hold under pytest 9.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import ROOT
from tests.support.op_cases import CASES, fast_cases, primitives_called, samples


def test_the_fast_tier_takes_every_primitive_once_in_float64():
    params = samples(CASES)
    fast = [p.values for p in params if not p.marks]
    assert all(dtype == "float64" for _, dtype in fast)
    reached = set().union(*(primitives_called(c) for c in CASES))
    taken = set().union(*(primitives_called(c) for c, _ in fast))
    assert taken == reached and len(fast) == len(fast_cases(CASES)) < len(CASES) // 4
    assert {"Add", "MatMul", "LayerNorm", "ScaledDotProductAttention"} <= reached
    assert all(len(p.marks) == 1 and p.marks[0].name == "full" for p in params if p.marks)


SCRATCH_TEST = """

{marks}def test_{i}():
    time.sleep(0.2)
    with open(os.path.join(os.path.dirname(__file__), "ran_{i}"), "w") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"])
"""


def test_an_xdist_group_runs_on_one_worker(tmp_path):
    """Grouped tests interleaved with others, some carrying a second mark: all on one worker."""
    (tmp_path / "conftest.py").write_text(
        "from tests.support.xdist_groups import add_group_suffixes\n\n\n"
        "def pytest_collection_modifyitems(config, items):\n    add_group_suffixes(config, items)\n"
    )
    body = "import os\nimport time\n\nimport pytest\n\nG = pytest.mark.xdist_group('g')\n"
    for i in range(6):
        marks = (
            "@G\n" + ("@pytest.mark.skipif(False, reason='a second mark')\n" if i == 2 else "") if i % 2 == 0 else ""
        )
        body += SCRATCH_TEST.format(marks=marks, i=i)
    (tmp_path / "test_scratch.py").write_text(body)
    cmd = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "-q"]
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run([*cmd, str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    workers = {i: (tmp_path / f"ran_{i}").read_text() for i in range(6)}
    assert len({workers[i] for i in (0, 2, 4)}) == 1, workers
