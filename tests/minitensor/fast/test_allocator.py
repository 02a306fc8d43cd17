"""fast/allocator.py: freed memory reused (glibc's mmap and trimming off) when asked, once, and declinable; the
formula (speed off) leaves malloc as it is."""

import subprocess
import sys

import pytest


def _allocator_state_after(code: str, **env_extra) -> str:
    """Run `code` in a fresh interpreter and print whether the allocator tuning was applied (None: never asked)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path), **env_extra}
    code += "\nimport sys, minitensor.fast.allocator as a; sys.__stdout__.write(f'{a._applied}\\n')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=300)
    return out.stdout.strip().splitlines()[-1]


def test_reuse_freed_memory_is_opt_in_applied_once_and_can_be_declined():
    """`import minitensor` leaves malloc alone; the call applies it once (glibc here); MINITENSOR_MALLOC=default
    declines."""
    assert _allocator_state_after("import minitensor, transformer_np, parity") == "None"
    assert _allocator_state_after("import minitensor as mt; mt.reuse_freed_memory(); mt.reuse_freed_memory()") == "True"
    declined = _allocator_state_after("import minitensor as mt; mt.reuse_freed_memory()", MINITENSOR_MALLOC="default")
    assert declined == "False"


@pytest.mark.parametrize(
    "entry",
    [  # a real command that does its work (and here fails on its input) after the tuning is on
        "from transformer_np.cli import main; main(['decode', '--checkpoint', '/nonexistent', '--input', 'a'])",
        "from benchmarks.worker import main; import sys; sys.stdin = open('/dev/null'); main(['--side', 'numpy'])",
    ],
    ids=["transformer_np-cli", "benchmarks-worker"],
)
def test_the_training_command_line_and_the_benchmark_workers_turn_it_on(entry):
    assert _allocator_state_after(f"try:\n    {entry}\nexcept SystemExit:\n    pass") == "True"


def test_train_and_fit_turn_it_on(monkeypatch, tmp_path):
    import minitensor as mt
    from transformer_np.data import get_task
    from transformer_np.training import default_configs, fit, train

    calls = []
    monkeypatch.setattr(mt, "reuse_freed_memory", lambda: calls.append(1) or True)
    m, t = default_configs("copy")
    m = m.replace(d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=8)
    t = t.replace(steps=1, batch_size=4, train_size=8, eval_size=4, eval_every=1, checkpoint_every=1)
    fit(m, t, get_task("copy").splits(8, 4, 0)[0], steps=1)
    assert calls == [1]
    train(m, t, str(tmp_path / "run"), progress=False)
    assert calls == [1, 1]


def test_with_speed_off_the_formula_leaves_malloc_alone():
    assert _allocator_state_after("import minitensor as mt; print(mt.reuse_freed_memory())", MT_FAST="0") == "None"


def test_the_slot_holds_heap_reuse_with_speed_on_and_the_formula_with_it_off():
    from minitensor import fast
    from minitensor.fast.allocator import heap_reuse

    entry = fast.registered()["reuse_freed_memory"]
    with fast.speed(True):
        assert fast.use.reuse_freed_memory is heap_reuse
    with fast.speed(False):
        assert fast.use.reuse_freed_memory is entry.formula and entry.formula() is False  # malloc left alone
