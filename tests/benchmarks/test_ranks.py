"""`python -m benchmarks ranks` (benchmarks/ranks.py): the ring all-reduce model, the report, the refusals, and
(slow) a quick run on 2 ranks of both frameworks under mpiexec."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from benchmarks.ranks import markdown, ring_allreduce_s
from minitensor.nn.parallel import run_process_group
from tests.support import ROOT

pytestmark = pytest.mark.full


def test_ring_allreduce_cost_is_2_n_minus_1_over_n_of_the_bytes_plus_latency_rounds():
    assert ring_allreduce_s(1000, 1) == 0.0
    assert ring_allreduce_s(1000, 2, bandwidth=100.0, latency=1.0) == pytest.approx(1000 / 100 + 2)
    assert ring_allreduce_s(1000, 4, bandwidth=100.0, latency=0.0) == pytest.approx(1.5 * 10)


def test_report_has_the_table_the_limits_and_the_projection():
    row = dict(framework="minitensor", ranks=1, bucket_mb=25.0, buckets=1, tokens_per_s=100.0,
               tokens_per_s_range=[90.0, 110.0], step_ms=200.0, grad_bytes=4_000_000, allreduce_ms=0.0)  # fmt: skip
    two = dict(row, ranks=2, allreduce_ms=10.0, exposed_ms=8.0, hidden=0.2)
    text = markdown({"preset": "copy", "global_batch": 16, "steps": 2, "rounds": 1, "rows": [row, two]}, "cmd")
    assert "| minitensor | 2 | 25 MB (1) | 100 (90-110) | 200.0 | 4.00 | 10.00 | 8.0 | 20% |" in text
    assert "2 cores" in text and "Projection to a cluster" in text and "| 64 |" in text


def test_rank_counts_that_do_not_divide_the_batch_are_refused():
    cmd = [sys.executable, "-m", "benchmarks", "ranks", "--ranks", "1,3", "--batch-size", "16"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "does not divide into 3 equal shards" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None, reason="needs the distributed extra")
@pytest.mark.xdist_group("mpi")
def test_quick_run_on_two_ranks(tmp_path):
    cmd = [sys.executable, "-m", "benchmarks", "ranks", "--quick", "--ranks", "2", "--out", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = run_process_group(cmd, timeout=600, env=env)  # it starts mpiexec: the group is killed on timeout
    assert done.returncode == 0, done.stderr[-2000:]
    res = json.loads((tmp_path / "ranks.json").read_text())
    frameworks = {(r["framework"], r["bucket_mb"]) for r in res["rows"]}
    assert frameworks == {("minitensor", 25.0), ("torch", 25.0), ("minitensor", 1.0), ("torch", 1.0)}
    assert all(r["tokens_per_s"] > 0 and r["allreduce_ms"] > 0 for r in res["rows"])
