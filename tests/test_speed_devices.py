"""The speed devices of the training step give the numbers of the plain formulas they stand beside.

Each device is a named helper chosen on arrays (a blocked optimizer update, an array-only fast path of
a fused op); here each is run against the readable formula on the same inputs: bitwise where the
device only reorders work (blocks of an elementwise update), else to OP_RTOL.
"""
from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor.optim import Adam, AdamW
from minitensor.optim import optimizer as optmod


def _adam_run(monkeypatch, block: int, cls=Adam, shape=(3 * 1000 + 7,), transposed=False, **kw):
    monkeypatch.setattr(optmod, "BLOCK_NUMEL", block)
    rng = np.random.default_rng(0)
    data = rng.standard_normal(shape, dtype=np.float32)
    p = mt.tensor(data.T if transposed else data, requires_grad=True)
    opt = cls([p], lr=1e-2, **kw)
    for _ in range(3):
        g = rng.standard_normal(shape, dtype=np.float32)
        p.grad = mt.tensor(g.T if transposed else g)
        opt.step()
    return p.data.copy(), {k: v.copy() for k, v in opt.state[p].items() if isinstance(v, np.ndarray)}


@pytest.mark.parametrize("cls, kw", [(Adam, {}), (Adam, dict(amsgrad=True)),
                                     (Adam, dict(weight_decay=0.1, maximize=True)), (AdamW, dict(weight_decay=0.1))])
@pytest.mark.parametrize("shape, transposed", [((3007,), False), ((70, 50), False), ((70, 50), True)])
def test_adam_in_blocks_is_bitwise_the_single_pass(monkeypatch, cls, kw, shape, transposed):
    """Blocks of 1,000 entries (several blocks, a short last one; a transposed, non-contiguous parameter
    comes whole) give exactly the parameter and state of one pass over the whole arrays."""
    whole, whole_state = _adam_run(monkeypatch, 10 ** 9, cls, shape, transposed, **kw)
    blocked, blocked_state = _adam_run(monkeypatch, 1000, cls, shape, transposed, **kw)
    np.testing.assert_array_equal(blocked, whole)
    for k in whole_state:
        np.testing.assert_array_equal(blocked_state[k], whole_state[k])


def test_in_blocks_covers_every_entry_once():
    a = np.arange(10, dtype=np.float32).reshape(2, 5)
    seen = []
    old = optmod.BLOCK_NUMEL
    try:
        optmod.BLOCK_NUMEL = 4
        for (block,), scratch in optmod.in_blocks(a):
            assert scratch.shape == block.shape and not np.shares_memory(scratch, a)
            seen.extend(block.tolist())
            block += 100                                  # views: writes land in a
    finally:
        optmod.BLOCK_NUMEL = old
    assert seen == list(range(10)) and (a >= 100).all()


def test_reuse_freed_memory_is_applied_once_and_can_be_declined(monkeypatch):
    """glibc here: the import applied it; a second call changes nothing; MINITENSOR_MALLOC=default declines."""
    import subprocess
    import sys

    from minitensor import allocator
    assert allocator.reuse_freed_memory() is allocator.reuse_freed_memory()
    code = "import minitensor.allocator as a; print(a.reuse_freed_memory())"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path), "MINITENSOR_MALLOC": "default"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"
