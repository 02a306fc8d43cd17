"""fast/optim.py: an update in cache-sized blocks is bitwise the formula's one pass over the whole arrays."""

import numpy as np
import pytest

import minitensor as mt
from minitensor import fast, pool
from minitensor.fast import optim as blocks
from minitensor.optim import Adam, AdamW


def _run(
    monkeypatch, block: int, speed: bool, cls=Adam, shape=(3 * 1000 + 7,), transposed=False, dtype="float32", **kw
):
    monkeypatch.setattr(blocks, "BLOCK_NUMEL", block)
    rng = np.random.default_rng(0)
    data = rng.standard_normal(shape).astype(dtype)
    p = mt.tensor(data.T if transposed else data, requires_grad=True)
    opt = cls([p], lr=1e-2, **kw)
    with fast.speed(speed):
        for _ in range(3):
            g = rng.standard_normal(shape).astype(dtype)
            p.grad = mt.tensor(g.T if transposed else g)
            opt.step()
    return p._data.copy(), {k: v.copy() for k, v in opt.state[p].items() if isinstance(v, np.ndarray)}


@pytest.mark.parametrize(
    "cls, kw",
    [
        (Adam, {}),
        (Adam, dict(amsgrad=True)),
        (Adam, dict(weight_decay=0.1, maximize=True)),
        (AdamW, dict(weight_decay=0.1)),
    ],
)
@pytest.mark.parametrize("shape, transposed", [((3007,), False), ((70, 50), False), ((70, 50), True)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_updates_in_blocks_are_bitwise_the_formula(monkeypatch, cls, kw, shape, transposed, dtype):
    """Blocks of 1,000 entries (several blocks, a short last one; a transposed, non-contiguous parameter comes
    whole) give exactly the parameter and state of the formula's one pass over the whole arrays."""
    whole, whole_state = _run(monkeypatch, 1000, False, cls, shape, transposed, dtype, **kw)
    blocked, blocked_state = _run(monkeypatch, 1000, True, cls, shape, transposed, dtype, **kw)
    np.testing.assert_array_equal(blocked, whole)
    assert whole_state.keys() == blocked_state.keys()
    for k in whole_state:
        np.testing.assert_array_equal(blocked_state[k], whole_state[k])


def test_in_blocks_covers_every_entry_once(monkeypatch):
    a = np.arange(10, dtype=np.float32).reshape(2, 5)
    monkeypatch.setattr(blocks, "BLOCK_NUMEL", 4)
    seen = []
    for (block,), scratch in blocks.in_blocks(a):
        assert scratch.shape == block.shape and not np.shares_memory(scratch, a)
        seen.extend(block.tolist())
        block += 100  # views: writes land in a
    assert seen == list(range(10)) and (a >= 100).all()
    assert len(list(blocks.in_blocks(a.T))) == 1  # not C-contiguous: whole, the formula's one block


def test_the_pool_runs_in_larger_blocks_and_says_so(monkeypatch):
    """While a run is spread over threads, in_blocks hands out THREADED_BLOCK_NUMEL-sized blocks."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    sizes = {}
    params = [mt.nn.Parameter(mt.tensor(np.zeros(1 << 20, np.float32))) for _ in range(2)]

    def record(p):
        sizes[id(p)] = (pool.update_pool.threaded, [b[0].size for b, _ in blocks.in_blocks(p._data)][0])

    pool.update_pool.run(record, params)
    assert set(sizes.values()) == {(True, blocks.THREADED_BLOCK_NUMEL)} and not pool.update_pool.threaded
    record(params[0])
    assert sizes[id(params[0])] == (False, blocks.BLOCK_NUMEL)
