"""Shared fixtures for the whole suite: threads per worker, seeding, the `cuda` marker, dtype parametrization.

Every test starts from the same seeds (NumPy's global generator, minitensor's generator,
torch's), so a failure reproduces by rerunning the one test. Tolerances are NOT here: they
live only in minitensor/testing.py.
"""

from __future__ import annotations

import os
import signal

# A pytest-xdist worker (`make test` runs one per core) computes on one thread: each library's thread pool is sized
# from these variables when it is first imported, so they are set before NumPy and torch are, and the processes a
# test starts inherit them. Without it every worker's BLAS and torch would each start a thread per core.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in THREAD_VARIABLES:
        os.environ[_name] = "1"

import numpy as np
import pytest

from tests.support.xdist_groups import add_group_suffixes

try:  # the suite must still collect (and report clearly) if the core fails to import
    import minitensor as mt
except Exception:  # pragma: no cover - only while the core is broken
    mt = None

try:
    import torch
except Exception:  # pragma: no cover - torch is a dev dependency
    torch = None

if torch is not None and os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)

# A suite started in the background by a non-interactive shell inherits SIGINT ignored, and so would every process a
# test starts (an ignored signal stays ignored across exec): the Ctrl-C tests need it delivered as KeyboardInterrupt.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SEED = 0

# The two precisions every op is checked in; names index OP_RTOL / PARITY_RTOL.
DTYPE_NAMES = ("float64", "float32")


def pytest_collection_modifyitems(config, items):
    """Keep each xdist group on one worker (tests/support/xdist_groups.py); skip tests marked `cuda` when no CUDA
    device is visible to torch."""
    add_group_suffixes(config, items)
    have_cuda = torch is not None and torch.cuda.is_available()
    if have_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: torch.cuda.is_available() is False")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed_everything():
    """Seed every generator before each test; after it, restore minitensor's default dtype and Python's SIGINT
    handler (a command's Ctrl-C path ignores further SIGINTs in its process: a test calling main() in process must
    not pass that on to the tests after it in the same worker)."""
    sigint = signal.getsignal(signal.SIGINT)
    np.random.seed(SEED)
    if torch is not None:
        torch.manual_seed(SEED)
    if mt is not None and hasattr(mt, "manual_seed"):
        mt.manual_seed(SEED)
    default = mt.get_default_dtype() if mt is not None and hasattr(mt, "get_default_dtype") else None
    yield
    if default is not None:
        mt.set_default_dtype(default)
    if signal.getsignal(signal.SIGINT) is not sigint:
        signal.signal(signal.SIGINT, sigint)


@pytest.fixture
def rng():
    """A fresh seeded NumPy generator for building test inputs (independent of the engine's)."""
    return np.random.default_rng(SEED)


@pytest.fixture(params=DTYPE_NAMES)
def dtype_name(request):
    """'float64' then 'float32': the name indexes the tolerance tables."""
    return request.param


@pytest.fixture
def float64_default():
    """Run a test with minitensor's default float dtype set to float64 (restored afterwards)."""
    mt.set_default_dtype(mt.float64)
    yield
