"""The thread pool (minitensor/fast/pool.py) against its formula, pool.for_each (one piece after another): the same
numbers bit for bit, each piece under the caller's floating-point settings, and a forked child with its own threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import minitensor as mt
from minitensor import fast
from minitensor import pool as pieces
from minitensor.fast import pool
from tests.support.fast_devices import devices_on  # noqa: F401 (the devices in their slots)


def test_the_pool_is_the_device_of_for_each_and_runs_every_piece_once(monkeypatch):
    """for_each's slot holds the pool; at two threads a large run takes the threads, and each piece runs once."""
    assert fast.use.for_each == pool.thread_pool.run and fast.registered()["for_each"].formula is pieces.for_each
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    params = [mt.tensor(np.zeros(n, np.float32)) for n in (1 << 20, 3, 1 << 19, 7)]
    on_pool = []

    def add_one(p):
        on_pool.append(threading.current_thread().name.startswith("minitensor-pool"))
        np.add(p._data, 1, out=p._data)

    pieces.update_pool.run(add_one, params)
    assert all((p._data == 1).all() for p in params) and len(on_pool) == 4 and any(on_pool)
    pieces.for_each(add_one, params)  # the formula: in the calling thread
    assert all((p._data == 2).all() for p in params) and on_pool[4:] == [False] * 4


def test_pool_workers_run_under_the_callers_floating_point_settings(monkeypatch):
    """A piece of work on a pool thread sees the np.errstate of the thread that called run (inside an op: quiet)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    params = [mt.tensor(np.zeros(1 << 20, np.float32)) for _ in range(4)]
    seen = []
    with np.errstate(all="ignore"):
        pieces.update_pool.run(lambda p: seen.append(np.geterr()), params)
    assert len(seen) == 4 and all(set(e.values()) == {"ignore"} for e in seen)


def test_update_pool_shares_hold_every_parameter_once_and_balance():
    sizes = [1000, 10, 600, 500, 7, 7, 300]
    params = [mt.tensor(np.zeros(n, np.float32)) for n in sizes]
    shares = pool._balanced_shares(params, 2)
    assert sorted(id(p) for s in shares for p in s) == sorted(id(p) for p in params)
    loads = [sum(p._data.size for p in s) for s in shares]
    assert len(shares) == 2 and max(loads) - min(loads) <= max(sizes) and max(loads) <= 1300
    assert len(pool._balanced_shares(params[:1], 4)) == 1  # no empty share


def _clip(threads, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", str(threads))
    rng = np.random.default_rng(0)
    params = [
        mt.nn.Parameter(mt.tensor(rng.standard_normal(s).astype(np.float32))) for s in [(900, 800), (700, 9), (5,)]
    ]
    for p in params:
        p.grad = mt.tensor(rng.standard_normal(p.shape).astype(np.float32))
    total = mt.nn.utils.clip_grad_norm_(params, 1.0)
    return total, [p.grad._data.copy() for p in params]


def test_clip_grad_norm_on_the_pool_is_bitwise_the_serial_one(monkeypatch):
    """clip_grad_norm_ computes each gradient's norm and rescales each gradient on the pool; the total and the
    clipped gradients are those of the formula (one after another), bit for bit."""
    assert 900 * 800 + 700 * 900 >= pool.PARALLEL_MIN_NUMEL
    with fast.speed(False):
        t1, g1 = _clip(2, monkeypatch)
    t2, g2 = _clip(2, monkeypatch)
    assert t1 == t2
    for a, b in zip(g1, g2):
        np.testing.assert_array_equal(a, b)


def test_a_forked_child_runs_the_pool_with_threads_of_its_own(monkeypatch):
    """fork copies only the calling thread: a child that reused the parent's executor would wait for ever on work
    no thread takes (the course runner forks one child per exercise). The child starts its own pool."""
    import os
    import signal
    import time

    monkeypatch.setattr(pool, "num_threads", lambda: 2)
    params = [mt.tensor(np.zeros(pool.PARALLEL_MIN_NUMEL, np.float32)) for _ in range(4)]

    def add_one(p):
        np.add(p._data, 1, out=p._data)

    pieces.update_pool.run(add_one, params)  # the parent's pool now has its threads
    assert pool.thread_pool.executor is not None
    pid = os.fork()
    if pid == 0:  # the child: the same run, then out at once
        try:
            pieces.update_pool.run(add_one, params)
            os._exit(0 if all((p._data == 2).all() for p in params) else 1)
        finally:
            os._exit(2)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child waited on the parent's pool threads for 30 s")
