"""Thread settings applied before NumPy/PyTorch load, and the machine facts every report records.

This module imports neither NumPy nor PyTorch at import time: `set_thread_env` must run before
either is imported, because OpenBLAS, MKL and OpenMP read their thread counts once, when their
shared library loads. Setting the variables afterwards silently does nothing.

BLAS settings move NumPy's figures a long way (OPENBLAS_CORETYPE picks the GEMM kernel; measured:
docs/decisions/007-a-process-per-side-alternating.md), so `machine_facts()` records the BLAS library, the kernel
OpenBLAS chose at run time, and every BLAS/OpenMP environment variable, next to the CPU and the library versions.
"""

from __future__ import annotations

import os
import platform
import sys
import warnings

# The variables each BLAS / threading runtime reads when it loads.
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
# Anything else that changes what BLAS does; recorded (not set) in every report.
BLAS_VARS = THREAD_VARS + (
    "OPENBLAS_CORETYPE",
    "OPENBLAS_VERBOSE",
    "OPENBLAS_THREAD_TIMEOUT",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_DEBUG_CPU_TYPE",
    "KMP_AFFINITY",
    "KMP_BLOCKTIME",
    "OMP_WAIT_POLICY",
    "OMP_PROC_BIND",
    "GOMP_CPU_AFFINITY",
)

# What idle worker threads do between parallel regions. Spinning (the libraries' default) wins on
# an idle machine; on a shared one a spinning or preempted worker stalls every op of its process
# (measured: docs/decisions/007-a-process-per-side-alternating.md). 'passive' makes them sleep at once: OpenMP
# (torch) by OMP_WAIT_POLICY/KMP_BLOCKTIME, OpenBLAS by the shortest spin timeout it accepts.
WAIT_POLICIES = {
    "default": {},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE", "KMP_BLOCKTIME": "0", "OPENBLAS_THREAD_TIMEOUT": "4"},
}


def thread_env(threads: int, wait_policy: str = "default") -> dict:
    """The environment variables that pin every BLAS/OpenMP pool to `threads` with idle policy `wait_policy`."""
    if wait_policy not in WAIT_POLICIES:
        raise ValueError(f"benchmarks: wait_policy must be one of {sorted(WAIT_POLICIES)}, got {wait_policy!r}")
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"benchmarks: threads must be a positive int, got {threads!r}")
    return {**{var: str(threads) for var in THREAD_VARS}, **WAIT_POLICIES[wait_policy]}


def set_thread_env(threads: int, wait_policy: str = "default") -> None:
    """Pin every BLAS/OpenMP thread pool to `threads` (and its idle policy); run before numpy/torch load."""
    env = thread_env(threads, wait_policy)
    loaded = [m for m in ("numpy", "torch") if m in sys.modules]
    if loaded:
        # Too late for this process (the libraries already sized their pools); still set, for children.
        warnings.warn(
            f"benchmarks: set_thread_env({threads}) called after {loaded} was imported; it only reaches subprocesses",
            RuntimeWarning,
            stacklevel=2,
        )
    os.environ.update(env)


def thread_env_from_argv(argv: list[str], default: int = 2) -> int:
    """Read `--threads N` and `--wait-policy P` from a raw argv (before argparse and numpy); apply them."""
    found = {"--threads": str(default), "--wait-policy": "default"}
    for i, arg in enumerate(argv):
        for flag in found:
            if arg == flag and i + 1 < len(argv):
                found[flag] = argv[i + 1]
            elif arg.startswith(flag + "="):
                found[flag] = arg.split("=", 1)[1]
    try:
        threads = int(found["--threads"])
    except ValueError:
        return default  # not a number: argparse refuses it in one line right after; nothing to set
    if threads < 1 or found["--wait-policy"] not in WAIT_POLICIES:
        return default  # likewise out of range
    set_thread_env(threads, found["--wait-policy"])
    return threads


def set_torch_threads(threads: int) -> None:
    """torch.set_num_threads plus one inter-op thread: eager CPU ops then use exactly `threads` cores."""
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already set once in this process (it may only be set before any parallel work)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return sorted(flags & {"avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile"})
    except OSError:
        pass
    return []


def _openblas_runtime() -> dict:
    """Ask the OpenBLAS that NumPy loaded which kernel it picked and how many threads it uses."""
    import ctypes

    out: dict = {}
    path = None
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if "openblas" in line.lower() and ".so" in line:
                    path = line.split()[-1]
                    break
    except OSError:
        return out
    if path is None:
        return out
    out["library_path"] = path
    lib = ctypes.CDLL(path)
    # scipy-openblas builds prefix and suffix the symbols; plain OpenBLAS builds do not.
    for key, names, restype in (
        (
            "corename",
            ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename"),
            ctypes.c_char_p,
        ),
        (
            "config",
            ("scipy_openblas_get_config64_", "scipy_openblas_get_config", "openblas_get_config"),
            ctypes.c_char_p,
        ),
        (
            "num_threads",
            ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads"),
            ctypes.c_int,
        ),
    ):
        for name in names:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = restype
                val = fn()
                out[key] = val.decode() if isinstance(val, bytes) else int(val)
                break
    return out


def machine_facts(threads: int) -> dict:
    """CPU, cores, BLAS libraries (build and run time), env settings, versions: JSON-ready."""
    import numpy as np

    facts: dict = {
        "cpu_model": _cpu_model(),
        "cpu_flags": _cpu_flags(),
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "threads": threads,
        "env": {v: os.environ.get(v) for v in BLAS_VARS},
        # Other processes compete for the same cores; a load above `threads` inflates every time,
        # and PyTorch's OpenMP barriers suffer most (a preempted worker stalls the whole op).
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        facts["numpy_blas"] = {k: blas.get(k) for k in ("name", "version", "openblas configuration")}
        facts["numpy_simd"] = cfg.get("SIMD Extensions", {})
    except Exception as exc:  # older NumPy without mode='dicts'
        facts["numpy_blas"] = {"error": repr(exc)}
    facts["numpy_blas_runtime"] = _openblas_runtime()
    try:
        import torch

        facts["torch"] = torch.__version__
        facts["torch_threads"] = torch.get_num_threads()
        facts["torch_interop_threads"] = torch.get_num_interop_threads()
        show = torch.__config__.show()
        facts["torch_blas"] = next(
            (p.split("=", 1)[1] for p in show.replace(",", "\n").split() if p.startswith("BLAS_INFO=")), None
        )
        facts["torch_mkl"] = next((line.strip(" -") for line in show.splitlines() if "Math Kernel" in line), None)
        facts["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        facts["cuda_available"] = bool(torch.cuda.is_available())
        if facts["cuda_available"]:
            facts["cuda_device"] = torch.cuda.get_device_name(0)
    except ImportError:
        facts["torch"] = None
    return facts


def facts_line(facts: dict) -> str:
    """One printable line: what a reader needs to compare two reports."""
    rt = facts.get("numpy_blas_runtime", {})
    return (
        f"CPU {facts['cpu_model']} ({facts['usable_cores']} usable cores), threads={facts['threads']} | "
        f"numpy {facts['numpy']} + {facts.get('numpy_blas', {}).get('name')} "
        f"{facts.get('numpy_blas', {}).get('version')} (kernel {rt.get('corename')}, "
        f"{rt.get('num_threads')} threads, OPENBLAS_CORETYPE={facts['env'].get('OPENBLAS_CORETYPE')}, "
        f"OMP_WAIT_POLICY={facts['env'].get('OMP_WAIT_POLICY')}) | "
        f"torch {facts.get('torch')} + {facts.get('torch_blas')} ({facts.get('torch_threads')} threads, "
        f"{facts.get('torch_cpu_capability')}) | python {facts['python']} | "
        f"load avg {' '.join(f'{x:.1f}' for x in facts.get('load_average') or [])}"
    )
