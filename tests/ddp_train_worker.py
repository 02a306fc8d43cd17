"""What tests/test_distributed_training.py runs on every rank under `mpiexec -n N`: transformer_np's train() in
float64, data-parallel over MPI. Rank 0 writes the run folder (checkpoint.npz holds the parameters compared).

    python tests/ddp_train_worker.py OUT STEPS DROPOUT [--resume] [--kill-rank-1-at-step K] [--stop-rank-1-at-step K]

--stop-rank-1-at-step K: rank 1's callback raises KeyboardInterrupt after step K (train()'s way to stop a run);
every rank must stop after that same step, with a complete checkpoint; the ranks exit with status 130.
"""

from __future__ import annotations

import os
import signal
import sys

from transformer_np.parallel import DataParallel
from transformer_np.training import default_configs, train

TINY_MODEL = dict(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32)
TINY_TRAIN = dict(
    batch_size=8, train_size=40, eval_size=8, eval_every=0, checkpoint_every=5, schedule="constant", lr=3e-3,
    clip_grad_norm=0.5,
)  # fmt: skip


def configs(steps: int, dropout: float):
    model_cfg, train_cfg = default_configs("copy-reverse")
    return model_cfg.replace(dropout=dropout, **TINY_MODEL), train_cfg.replace(steps=steps, **TINY_TRAIN)


def main() -> None:
    out, steps, dropout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    from mpi4py import MPI  # here, not at the top: the test file imports `configs` without needing MPI

    comm = MPI.COMM_WORLD
    callback = None
    if "--kill-rank-1-at-step" in sys.argv:  # a rank that dies mid-run: SIGKILL, no goodbye
        k = int(sys.argv[sys.argv.index("--kill-rank-1-at-step") + 1])

        def callback(step, record):
            if step == k and comm.Get_rank() == 1:
                os.kill(os.getpid(), signal.SIGKILL)

    if "--stop-rank-1-at-step" in sys.argv:
        k = int(sys.argv[sys.argv.index("--stop-rank-1-at-step") + 1])

        def callback(step, record):
            if step == k and comm.Get_rank() == 1:
                raise KeyboardInterrupt

    model_cfg, train_cfg = configs(steps, dropout)
    try:
        train(
            model_cfg, train_cfg, out, resume="--resume" in sys.argv, progress=False, callback=callback,
            parallel=DataParallel(comm=comm), dtype="float64",
        )  # fmt: skip
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
