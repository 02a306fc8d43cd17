"""Finding MPI: `require_mpi` (mpi4py, or one clear error), the `mpiexec` that launches N ranks, and `run_ranks`.

The optional extra `pip install -e '.[distributed]'` brings mpi4py and mpich; mpich's wheel puts `mpiexec` in the
same bin/ folder as the Python that installed it, so that one is looked for first (a system `mpiexec` of another
MPI would start ranks that cannot talk to this mpi4py), then the PATH.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

INSTALL_HINT = "install the distributed extra: pip install -e '.[distributed]' (mpi4py and mpich)"


def require_mpi():
    """mpi4py's MPI module (importing it initialises MPI), or ModuleNotFoundError naming the extra to install."""
    try:
        from mpi4py import MPI  # optional dependency: imported here so that minitensor imports without it
    except ImportError as e:
        raise ModuleNotFoundError(f"data parallelism needs MPI, and mpi4py is not installed: {INSTALL_HINT}") from e
    return MPI


def find_mpiexec() -> str:
    """The path of `mpiexec`: beside this Python (a venv's bin/, where pip's mpich puts it), else on the PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")  # not resolved: a venv's python is a link
    if os.access(here, os.X_OK):
        return here
    found = shutil.which("mpiexec")
    if found is None:
        raise FileNotFoundError(f"no mpiexec beside {sys.executable} nor on the PATH: {INSTALL_HINT}")
    return found


def mpiexec_command(nproc: int, argv: list[str]) -> list[str]:
    """The command that runs `python argv...` on `nproc` ranks of this machine, with this Python."""
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"mpiexec_command: expected nproc >= 1, got {nproc!r}")
    return [find_mpiexec(), "-n", str(nproc), sys.executable, *argv]


def run_ranks(nproc: int, argv: list[str], timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `python argv...` on `nproc` ranks and wait at most `timeout` seconds (`run_process_group`)."""
    return run_process_group(mpiexec_command(nproc, argv), timeout, env)


def run_process_group(cmd: list[str], timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `cmd` (mpiexec, or a command that starts it) in a process group of its own, capturing its output, and
    kill the whole group on timeout (or on Ctrl-C here), so that no rank outlives the call."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own process group: killpg reaches every rank
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:  # the timeout, or KeyboardInterrupt: leave no rank behind
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
