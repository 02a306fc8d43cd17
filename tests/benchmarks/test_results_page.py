"""benchmarks/results_page.py: the committed headline page rendered from a results dict, and its command line.
(Fabricated numbers: nothing is timed here.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import results_page
from benchmarks.cli import build_parser
from tests.support import ROOT

pytestmark = pytest.mark.full


def _train(median, q1, q3, lo, hi, fastest, ms):
    a, t, nn = ms
    return {
        "ratio": median,
        "ratio_spread": {"median": median, "q1": q1, "q3": q3, "min": lo, "max": hi, "rounds": 7},
        "torch_fastest": fastest,
        "numpy": {"median_ms": a},
        "torch": {"median_ms": t},
        "torch-nn": {"median_ms": nn},
    }


def _results():
    facts = {
        "cpu_model": "Test CPU 9000",
        "usable_cores": 2,
        "threads": 1,
        "numpy": "2.4.6",
        "numpy_blas": {"name": "scipy-openblas", "version": "0.3.31"},
        "numpy_blas_runtime": {"corename": "Haswell", "num_threads": 1},
        "env": {"OPENBLAS_CORETYPE": None, "OMP_WAIT_POLICY": None},
        "torch": "2.13.0",
        "torch_blas": "mkl",
        "torch_threads": 1,
        "torch_cpu_capability": "AVX2",
        "python": "3.11.9",
        "load_average": [0.5, 0.6, 0.7],
    }
    copy = {
        "measurements": {
            "train": _train(0.87, 0.85, 0.9, 0.8, 1.02, "torch-nn", (40.0, 50.0, 46.0)),
            "greedy_cache": {"ratio": 1.1, "ratio_spread": {"median": 1.1, "q1": 1.05, "q3": 1.2, "rounds": 5}},
        }
    }
    base = {"measurements": {"train": _train(0.91, 0.89, 0.95, 0.88, 0.99, "torch", (900.0, 990.0, 1010.0))}}
    return {
        "command": "python -m benchmarks run --threads 1",
        "started_utc": "2026-11-28T10:00:00+00:00",
        "method": "separate processes",
        "threads": {
            "1": {"machine": facts, "configs": {"copy": copy, "base": base}, "memory": {"copy": {"ratio_peak": 0.23}}}
        },
    }


def test_the_page_gives_the_machine_each_ratio_with_its_spread_and_the_side_it_is_against():
    page = results_page.render(_results())
    assert "Command: `python -m benchmarks run --threads 1`" in page
    assert "## 1 thread\n" in page
    assert "Machine: CPU Test CPU 9000 (2 usable cores)" in page
    assert "| copy | 0.87 [0.85-0.90; 0.80-1.02] | nn.Transformer | 40.0 | 50.0 | 46.0 | 7 | 1.10 [1.05-1.20] |" in page
    assert "not run | 0.23 |" in page  # copy: no beam search this run, its memory ratio
    assert (
        "| base | 0.91 [0.89-0.95; 0.88-0.99] | twin | 900.0 | 990.0 | 1010.0 | 7 | not run | not run | not run |"
        in page
    )
    assert "Source:" not in page


def test_a_hand_built_results_file_names_its_source_and_machine():
    results = _results()
    results["provenance"] = "the journal's run at abc1234"
    results["threads"]["1"]["machine"] = {"description": "2 cores of a shared VM"}
    del results["threads"]["1"]["configs"]["copy"]["measurements"]["train"]["ratio_spread"]["min"]
    page = results_page.render(results)
    assert "Source: the journal's run at abc1234" in page
    assert "Machine: 2 cores of a shared VM\n" in page
    assert "| copy | 0.87 [0.85-0.90] | nn.Transformer |" in page  # no extremes recorded: none printed


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", "results", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_the_command_writes_the_page_from_a_results_file(tmp_path):
    src, out = tmp_path / "results.json", tmp_path / "RESULTS.md"
    src.write_text(json.dumps(_results()))
    proc = _cli("--in", str(src), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == results_page.render(_results())


@pytest.mark.parametrize("content", [None, "{not json", "[1, 2]"])
def test_a_missing_or_wrong_results_file_is_one_line_and_exit_2(tmp_path, content):
    src, out = tmp_path / "results.json", tmp_path / "RESULTS.md"
    if content is not None:
        src.write_text(content)
    proc = _cli("--in", str(src), "--out", str(out))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert str(src) in proc.stderr
    assert not out.exists()


def test_the_readme_is_a_short_reference_that_names_every_command_and_links_the_headline_page():
    root = Path(ROOT)
    readme = (root / "benchmarks" / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    assert "(RESULTS.md)" in readme
    page = (root / "benchmarks" / "RESULTS.md").read_text()
    assert page.startswith("# Benchmark results") and "Machine: " in page
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for command in sub.choices:
        assert f"`python -m benchmarks {command}" in readme, command
    # each command-line module names itself in its parser's prog; the internal ones (a worker, a GPU child) say so
    for path in sorted((root / "benchmarks").glob("*.py")):
        prog = re.search(r'prog="python -m benchmarks\.(\w+)", description="([^"]*)', path.read_text())
        if prog and "internal" not in prog[2] and "started by" not in prog[2]:
            assert f"`python -m benchmarks.{prog[1]}" in readme, prog[1]
