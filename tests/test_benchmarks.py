"""The benchmark harness end to end on the 'tiny' config: outputs well formed, no timing assertions.

Runs `python -m benchmarks run --quick --configs tiny` (short scaling series, small ops only) in a
subprocess writing into a temporary folder, then checks the JSON keys, the Markdown tables and
that every PNG is a non-empty PNG. Timings themselves are never asserted: they depend on the
machine and its neighbours.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# One subprocess run of ~20 s (torch import, memory children, short series): slow by the house rule.
pytestmark = pytest.mark.slow
WORKLOADS = ("forward", "fwd_bwd", "train", "greedy_nocache", "greedy_cache")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    cmd = [sys.executable, "-m", "benchmarks", "run", "--quick", "--configs", "tiny", "--threads", "1",
           "--out", str(out), "--repeats", "3", "--budget", "1", "--scaling-base", "tiny",
           "--scaling-lengths", "8", "16", "--scaling-dims", "16", "32", "--scaling-dims-len", "8",
           "--memory-steps", "1", "--ops-sizes", "small"]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), MPLBACKEND="Agg")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"benchmark run failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return out, proc.stdout


def test_json_is_well_formed(tiny_run):
    out, _ = tiny_run
    res = json.loads((out / "results.json").read_text())
    for key in ("command", "machine", "settings", "configs", "memory", "scaling", "ops", "targets"):
        assert key in res, f"results.json lacks {key!r}"
    m = res["machine"]
    for key in ("cpu_model", "logical_cores", "threads", "numpy", "numpy_blas", "numpy_blas_runtime", "env", "torch",
                "python"):
        assert key in m, f"machine facts lack {key!r}"
    assert m["threads"] == 1 and m["env"]["OPENBLAS_NUM_THREADS"] == "1" and m["torch_threads"] == 1
    assert "OPENBLAS_CORETYPE" in m["env"]
    tiny = res["configs"]["tiny"]
    assert tiny["parity"]["ok"], f"eval logits of the two sides differ: {tiny['parity']}"
    for w in WORKLOADS:
        m = tiny["measurements"][w]
        for side in ("numpy", "torch"):
            st = m[side]
            assert st["n"] >= 1 and st["min_ms"] <= st["median_ms"] <= st["max_ms"]
            assert st["q1_ms"] <= st["median_ms"] <= st["q3_ms"]
            assert m["tokens_per_s"][side] > 0
        assert m["ratio"] > 0
    assert tiny["cache_speedup"]["numpy"] > 0
    assert set(tiny["phases"]["numpy"]) == set(tiny["phases"]["torch"]) == {
        "zero_grad", "forward+loss", "backward", "clip", "optimizer"}
    assert tiny["profile_numpy"]["rows"] and tiny["profile_torch"]["rows"]
    mem = res["memory"]["tiny"]
    for side in ("numpy", "torch"):
        assert mem[side]["peak_kib"] >= mem[side]["baseline_kib"] > 0
    assert [p["seq_len"] for p in res["scaling"]["seq_len"]] == [8, 16]
    assert [p["d_model"] for p in res["scaling"]["d_model"]] == [16, 32]
    assert {r["op"] for r in res["ops"]} >= {"matmul", "linear", "softmax", "layer_norm", "cross_entropy",
                                          "attention (model's)"}
    assert all(r["size"] == "small" and r["ratio_fb"] > 0 for r in res["ops"])
    assert len(res["targets"]) == 6


def test_markdown_tables(tiny_run):
    out, stdout = tiny_run
    md = (out / "results.md").read_text()
    assert "## Per config" in md and "### tiny" in md and "## Op microbenchmarks" in md
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    for label in ("forward (eval, no_grad)", "forward + backward", "training step", "greedy decode, no cache",
                  "greedy decode, KV cache"):
        row = next((r for r in rows if r.startswith(f"| {label} |")), None)
        assert row is not None, f"no table row for {label!r}"
        assert row.count("|") == 7, row
    # Every table row has as many cells as its header.
    width, fenced = None, False
    for line in md.splitlines() + [""]:
        if line.startswith("```"):
            fenced = not fenced          # the profiler's own text table is quoted verbatim
            continue
        if fenced:
            continue
        if line.startswith("|"):
            if width is None:
                width = line.count("|")
            assert line.count("|") == width, f"ragged table row: {line}"
        else:
            width = None
    assert "### tiny" in stdout                 # the table is printed too


def test_pngs_non_empty(tiny_run):
    out, _ = tiny_run
    for name in ("ratios.png", "scaling_length.png", "scaling_dmodel.png", "ops.png"):
        p = out / name
        assert p.exists(), f"{name} not written"
        data = p.read_bytes()
        assert len(data) > 1000 and data.startswith(PNG_MAGIC), f"{name} is not a non-empty PNG"
