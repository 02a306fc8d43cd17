"""benchmarks/decode_floor.py: the bare-NumPy replica of cached greedy decoding gives transformer_np's tokens, and its
command refuses what it cannot replicate in one line. (Its timings are measured by the benchmark, never here.)"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import minitensor as mt
from benchmarks import decode_floor
from benchmarks.workloads import BOS, CONFIGS, EOS, build_numpy_model, make_batch
from transformer_np import decode

pytestmark = pytest.mark.full


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_replica_decodes_the_engines_tokens(dtype):
    cfg = CONFIGS["tiny"]
    model = build_numpy_model(cfg, seed=3).to(mt.float64 if dtype == np.float64 else mt.float32)
    model.eval()
    batch = make_batch(cfg, seed=1)
    src, src_mask = mt.tensor(batch.src), mt.tensor(batch.src_mask)  # padded rows: the cross-attention mask matters
    assert not batch.src_mask.all()
    n = 12  # beyond the tiny config's decode_tokens, within its max_len
    want = decode.greedy_decode(model, src, n, bos_id=BOS, eos_id=EOS, src_mask=src_mask)
    got = decode_floor.bare_greedy(model, src, src_mask, n)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) > 1  # not a degenerate decode that any replica would match


def test_measure_reports_equal_tokens_and_a_ratio():
    r = decode_floor.measure("tiny", rounds=2)
    assert r["same_tokens"] and r["bare_ms"] > 0 and r["engine_ms"] > 0 and r["ratio"] > 0


def test_configs_it_cannot_replicate_are_named():
    cfg = CONFIGS["tiny"]
    assert decode_floor.replicable(cfg) is None
    for change, word in ((dict(norm_first=True), "norm_first"), (dict(activation="gelu"), "gelu")):
        bad = dataclasses.replace(cfg, model=cfg.model.replace(**change))
        assert word in decode_floor.replicable(bad)


@pytest.mark.parametrize("args", [["--config", "nope"], ["--rounds", "0"], ["--threads", "x"]])
def test_bad_input_is_one_line_exit_2(args):
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.decode_floor", *args], capture_output=True, text=True, timeout=120
    )
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(err) == 1 and "decode_floor" in err[0], done.stderr


def test_ctrl_c_is_one_line_exit_130():
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.decode_floor", "--config", "copy-reverse", "--rounds", "50"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(4)  # past the imports, inside the timed rounds
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["python -m benchmarks.decode_floor: interrupted"], err
