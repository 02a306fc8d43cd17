"""minitensor.nn.parallel: data parallelism over MPI, as torch.nn.parallel.

distributed.py (DistributedDataParallel: one replica per MPI rank, gradients all-reduced in buckets while the
backward runs) and launch.py (finding the `mpiexec` that pip's mpich installed, and `require_mpi`, the one clear
error when the optional `distributed` extra is missing). mpi4py is imported only when a function here needs it,
so `import minitensor` works without it.
"""

from .distributed import DistributedDataParallel, FailureChannel, OtherRankFailed, failure_channel
from .launch import find_mpiexec, mpiexec_command, require_mpi, run_process_group, run_ranks

__all__ = [
    "DistributedDataParallel",
    "FailureChannel",
    "OtherRankFailed",
    "failure_channel",
    "find_mpiexec",
    "mpiexec_command",
    "require_mpi",
    "run_process_group",
    "run_ranks",
]
