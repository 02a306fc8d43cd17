"""The engine's extension points: where features and speed devices attach to the core, and nothing of how.

The core reads these names and imports nothing else from the package. Each holds the plain behaviour, or None
while nothing is attached (docs/READING.md says who attaches where):

    features     how many features are on that need the extended paths (minitensor/features.py counts them)
    apply        Function.apply's extended path, taken while `features` is non-zero (autograd/extensions.py)
    backward     Node.backward's, also taken for a backward on Tensors (create_graph) (autograd/extensions.py)
    leaf_sink    early delivery of leaf gradients, while a post-accumulate-grad hook exists (autograd/leaf_delivery.py)
    devices      the device check, once a tensor can live off the CPU (devices.py)
    quiet, run_quietly   NumPy's quiet error state around every op; a speed device in fast/quiet.py
    arrays, tensors      the namespaces a backward formula calls (ctx.xp), installed by ops/namespace.py
"""

from __future__ import annotations

import numpy as np

features = 0
apply = None
backward = None
leaf_sink = None
devices = None
arrays = np  # until ops/ installs its namespaces
tensors = None


def quiet():
    """NumPy's floating-point warnings off for a block: ops give IEEE values (inf, NaN) silently, as PyTorch's do."""
    return np.errstate(all="ignore")


def run_quietly(fn, *args, **kwargs):
    """fn(*args, **kwargs) with NumPy's floating-point warnings off: how every forward runs."""
    with np.errstate(all="ignore"):
        return fn(*args, **kwargs)
