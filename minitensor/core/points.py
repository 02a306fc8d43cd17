"""The engine's extension points: where features and speed devices attach to the core, and nothing of how.

The core reads these names and imports nothing else from the package. Each holds the plain behaviour, or None
while nothing is attached. Who attaches where (docs/READING.md):

    features     autograd/extensions.py: how many features are on that need the extended paths below
                 (forward mode, anomaly mode, the profiler, saved-tensor hooks, tensors on a device)
    apply        autograd/extensions.py: Function.apply's extended path, taken while `features` is non-zero
    backward     autograd/extensions.py: Node.backward's extended path, taken while `features` is non-zero and
                 for a backward on Tensors (create_graph: higher order)
    leaf_sink    autograd/leaf_delivery.py: a leaf's gradient handed over as soon as it is complete, installed
                 while some leaf has a post-accumulate-grad hook (data parallelism's overlap)
    devices      devices.py: the device check, attached once a tensor can live off the CPU
    quiet, run_quietly   fast/quiet.py: a speed device for NumPy's error state
    arrays, tensors      ops/namespace.py: the namespaces a backward formula calls (ctx.xp)
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
