"""What tests/minitensor/nn/test_distributed.py's fault tests run on every rank under `mpiexec -n 2`:
DistributedDataParallel on a small module when the ranks disagree. Every rank prints `EXIT <rank> <time.time()> <what it
raised>` and ends at once.

    python tests/support/ddp_fault_worker.py extra-buffer | missing-buffer | buffer-shape | buffer-dtype
                                     | extra-parameter | parameter-shape | parameter-dtype | unused-parameter
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
from mpi4py import MPI

import minitensor as mt
from minitensor.nn.parallel import DistributedDataParallel, failure_channel

COMM = MPI.COMM_WORLD
RANK = COMM.Get_rank()


class Net(mt.nn.Module):
    def __init__(self, scenario: str = "", skip_b=False):
        super().__init__()
        self.a, self.b = mt.nn.Linear(3, 3), mt.nn.Linear(3, 4 if scenario == "parameter-shape" else 3)
        if scenario == "parameter-dtype":
            self.b.bias.data = self.b.bias.data.double()
        if scenario == "extra-parameter":
            self.c = mt.nn.Linear(3, 3)
        scale = mt.ones(4 if scenario == "buffer-shape" else 3)
        if scenario != "missing-buffer":
            self.register_buffer("scale", scale.double() if scenario == "buffer-dtype" else scale)
        if scenario == "extra-buffer":
            self.register_buffer("running_mean", mt.zeros(3))
        self.skip_b = skip_b

    def forward(self, x):
        h = self.a(x) * self.scale if hasattr(self, "scale") else self.a(x)
        return h if self.skip_b else self.b(h)


def main(scenario: str) -> None:
    one = RANK == 1
    net = Net(scenario if one else "", skip_b=scenario == "unused-parameter" and one)
    try:
        ddp = DistributedDataParallel(net)
        x = mt.tensor(np.random.default_rng(RANK).standard_normal((4, 3)).astype(np.float32))
        for step in range(3):
            if step == 1 and one:
                print(f"FAULT {time.time()}", flush=True)
            ddp(x).sum().backward()
        print(f"EXIT {RANK} {time.time()} finished", flush=True)
    except Exception as e:
        print(f"EXIT {RANK} {time.time()} {type(e).__name__}: {e}", flush=True)
    sys.stdout.flush()
    failure_channel(COMM).finish()  # every rank's line out before any ends: mpiexec ends the rest when one does
    os._exit(0)  # a failure abandons collectives, which MPI_Finalize would wait on


if __name__ == "__main__":
    main(sys.argv[1])
