"""MT_FAST=0: every slot holds its plain formula, and the engine trains and passes the op table on the formulas
alone; every registered device is tested against its formula in a file of tests/minitensor/fast/."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from minitensor import fast
from tests.support import ROOT

HERE = Path(__file__).parent


def _run(args: list[str], timeout: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # a pytest of its own, not a worker
    env.update(MT_FAST="0", PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout, check=False
    )


def test_a_training_step_on_the_formulas_alone():
    """With MT_FAST=0 every slot holds its formula, and a tiny Transformer's training steps run and lower the loss."""
    code = """
import numpy as np
import minitensor as mt
from minitensor import fast
from transformer_np.loss import compute_loss
from transformer_np.model import Transformer

assert not fast.enabled()
for name, entry in fast.registered().items():
    slot = getattr(entry.owner, entry.attr)
    assert slot is entry.formula, (name, slot)
mt.manual_seed(0)
model = Transformer(11, 11, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=24,
                    dropout=0.1, activation="gelu")
opt = mt.optim.Adam(model.parameters(), lr=1e-2)
rng = np.random.default_rng(0)
src, tgt = rng.integers(1, 11, (4, 7)), rng.integers(1, 11, (4, 8))
losses = []
for _ in range(5):
    opt.zero_grad()
    loss = compute_loss(model, src, tgt, label_smoothing=0.1)[0]
    loss.backward()
    mt.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    losses.append(loss.item())
assert losses[-1] < losses[0], losses
print("ok", len(fast.registered()))
"""
    out = _run(["-c", code], timeout=300)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stdout + out.stderr


def test_the_op_tables_fused_cases_on_the_formulas_alone():
    """The op table's fused and indexing cases (the ops whose formulas are slots) against torch with MT_FAST=0."""
    k = "softmax or log_softmax or layer_norm or cross_entropy or gelu or matmul or linear or embedding or index"
    out = _run(
        ["-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests/minitensor/ops/test_op_table.py", "-k", k], 300
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


@pytest.mark.full
def test_the_whole_op_table_on_the_formulas_alone():
    out = _run(["-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests/minitensor/ops/test_op_table.py"], 900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


def test_every_device_is_tested_against_its_formula_here():
    """Each registered device is named in a test file here, or, for a device registered outside minitensor/fast/
    (the decoder's), in the test file of its own module (tests/ mirrors the packages)."""
    texts = "".join(p.read_text() for p in HERE.glob("test_*.py") if p.name != Path(__file__).name)
    missing = []
    for name, entry in fast.registered().items():
        if name.startswith("_"):
            continue
        if entry.device is None:
            missing.append(name)
            continue
        package, _, leaf = entry.device.__module__.rpartition(".")
        own = Path(ROOT, "tests", *package.split("."), f"test_{leaf}.py")
        found = texts + (own.read_text() if not package.startswith("minitensor.fast") and own.exists() else "")
        if entry.device.__name__ not in found:
            missing.append(name)
    assert not missing, f"no test here runs these devices against their formulas: {missing}"
