"""`python -m parity ddp` under `mpiexec -n 2`: minitensor's DistributedDataParallel against torch's DDP (gloo).

Two ranks, float64, 3 Adam steps on the copy-reverse preset: each rank's logits, the global loss, the averaged
gradients and the parameters after each step within PARITY_RTOL of torch's, and the same gradients on both ranks.
The launch is bounded by a timeout after which mpiexec's process group is killed.
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from minitensor.nn.parallel import run_ranks
from minitensor.testing import PARITY_RTOL
from tests.support import ROOT

pytestmark = [pytest.mark.full, pytest.mark.xdist_group("mpi")]


@pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None, reason="needs the distributed extra: pip install -e '.[distributed]'"
)
def test_two_rank_ddp_matches_torch_ddp(tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    done = run_ranks(2, ["-m", "parity", "ddp", "--steps", "3", "--out", str(tmp_path)], timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "PASS" in done.stdout
    result = json.loads((tmp_path / "ddp_2ranks.json").read_text())
    assert result["world_size"] == 2 and len(result["steps"]) == 3
    for row in result["steps"]:
        assert len(row["tokens_per_rank"]) == 2 and row["grads_same_on_every_rank"]
        for key in ("logits", "loss", "grads", "params"):
            assert row[key]["max_rel"] <= PARITY_RTOL["float64"], (row["step"], key, row[key])
