"""mt.save / mt.load: round trips of flat and nested state dicts, and the refusals.

The format is `.npz` without pickles; see minitensor/serialization.py for the key scheme.
"""
from __future__ import annotations

import io
import math
import zipfile

import numpy as np
import pytest

import minitensor as mt
from minitensor.serialization import load, save


def _assert_same(a, b, path="<root>"):
    """Exact structural equality: container types, key types, array dtypes/shapes/values."""
    assert type(a) is type(b) or (isinstance(a, dict) and isinstance(b, dict)), (path, type(a), type(b))
    if isinstance(a, dict):
        assert list(a.keys()) == list(b.keys()), path
        for k in a:
            assert type(k) is type(list(b.keys())[list(a.keys()).index(k)]), (path, k)
            _assert_same(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{path}/{i}")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), path
    else:
        assert a == b, (path, a, b)


def test_flat_state_dict_round_trip_keeps_keys_order_dtypes(tmp_path, rng):
    sd = {
        "encoder.layers.0.self_attn.W_q.weight": rng.standard_normal((4, 4)).astype(np.float32),
        "encoder.layers.0.self_attn.W_q.bias": rng.standard_normal(4),
        "tokens": np.arange(5, dtype=np.int64),
        "flag": np.array([True, False]),
        "scalar": np.array(3.5),
    }
    path = tmp_path / "model.npz"
    save(sd, path)
    back = load(path)
    _assert_same(sd, back)
    # the names are the archive's member names: readable with plain NumPy
    with np.load(path, allow_pickle=False) as npz:
        assert [k for k in npz.files if k != "__minitensor__"] == list(sd)


def test_nested_optimizer_state_round_trip(tmp_path, rng):
    state = {
        "model": {"w": rng.standard_normal((3, 2))},
        "optimizer": {
            "state": {0: {"step": 7, "exp_avg": rng.standard_normal((3, 2)), "exp_avg_sq": rng.random((3, 2))},
                      1: {"momentum_buffer": rng.standard_normal(2).astype(np.float32)}},
            "param_groups": [{"lr": 0.001, "betas": (0.9, 0.98), "eps": 1e-9, "amsgrad": False,
                              "weight_decay": 0, "params": [0, 1], "nothing": None, "name": "a/b%c"}],
        },
        "scheduler": {"last_epoch": 12, "base_lrs": [1.0], "_last_lr": [0.1 + 0.2]},
        "special": [float("inf"), -float("inf"), float("nan"), 2 ** 70, -0.0],
        "weird/key%": {"x": np.zeros(0)},
    }
    path = tmp_path / "ckpt.npz"
    save(state, path)
    back = load(path)
    _assert_same(state, back)
    assert isinstance(back["optimizer"]["param_groups"][0]["betas"], tuple)
    assert list(back["optimizer"]["state"]) == [0, 1]          # int keys stay int
    with np.load(path, allow_pickle=False) as npz:
        assert "optimizer/state/0/exp_avg" in npz.files
        assert "weird%2Fkey%25/x" in npz.files


def test_tensors_are_saved_as_arrays(tmp_path):
    t = mt.tensor([[1.0, 2.0]], requires_grad=True)
    save({"t": t}, tmp_path / "t.npz")
    back = load(tmp_path / "t.npz")
    assert isinstance(back["t"], np.ndarray) and back["t"].dtype == np.float32
    np.testing.assert_array_equal(back["t"], t.data)


def test_exact_path_is_used_and_overwrite_is_atomic(tmp_path):
    path = tmp_path / "no_suffix"
    save({"a": np.ones(2)}, path)
    assert path.exists() and not (tmp_path / "no_suffix.npz").exists()
    save({"a": np.zeros(3)}, path)
    np.testing.assert_array_equal(load(path)["a"], np.zeros(3))
    assert [p.name for p in tmp_path.iterdir()] == ["no_suffix"]   # no temporary left behind


def test_missing_file(tmp_path):
    path = tmp_path / "nope.npz"
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        load(path)


def test_corrupt_file(tmp_path):
    path = tmp_path / "garbage.npz"
    path.write_bytes(b"this is not a zip archive at all" * 10)
    with pytest.raises(ValueError, match="garbage.npz"):
        load(path)


def test_truncated_file(tmp_path, rng):
    path = tmp_path / "cut.npz"
    save({"a": rng.standard_normal(1000)}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut.npz"):
        load(path)


def test_single_npy_is_refused(tmp_path):
    path = tmp_path / "one.npy"
    np.save(path, np.ones(3))
    with pytest.raises(ValueError, match="one.npy"):
        load(path)


def test_pickled_object_array_is_refused(tmp_path):
    """An .npz member holding a pickled object array must not be unpickled."""
    path = tmp_path / "evil.npz"
    obj = np.empty(1, dtype=object)
    obj[0] = {"payload": "would run on unpickle"}
    buf = io.BytesIO()
    np.lib.format.write_array(buf, obj, allow_pickle=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("weights.npy", buf.getvalue())
    with pytest.raises(ValueError, match=r"evil\.npz.*pickle"):
        load(path)


def test_save_refuses_unsupported_values(tmp_path):
    with pytest.raises(TypeError, match="object"):
        save({"a": np.array([{"x": 1}], dtype=object)}, tmp_path / "x.npz")
    with pytest.raises(TypeError, match="set"):
        save({"a": {1, 2}}, tmp_path / "x.npz")
    with pytest.raises(TypeError, match="dict"):
        save([np.ones(2)], tmp_path / "x.npz")
    with pytest.raises(ValueError, match="same archive key"):
        save({1: np.ones(1), "1": np.ones(1)}, tmp_path / "x.npz")
    assert not any(tmp_path.iterdir())     # nothing written on failure


def test_plain_numpy_npz_loads_as_flat_dict(tmp_path):
    path = tmp_path / "plain.npz"
    np.savez(path, a=np.arange(3), b=np.eye(2))
    back = load(path)
    assert list(back) == ["a", "b"]
    np.testing.assert_array_equal(back["b"], np.eye(2))


def test_mt_namespace_exports():
    assert mt.save is save and mt.load is load


def test_model_checkpoint_through_a_file(tmp_path):
    """state_dict -> save -> load -> load_state_dict restores a model exactly (Parameters saved as arrays)."""
    mt.manual_seed(0)
    a = mt.nn.Sequential(mt.nn.Embedding(7, 4, padding_idx=0), mt.nn.LayerNorm(4), mt.nn.Linear(4, 3))
    mt.manual_seed(1)
    b = mt.nn.Sequential(mt.nn.Embedding(7, 4, padding_idx=0), mt.nn.LayerNorm(4), mt.nn.Linear(4, 3))
    save(a.state_dict(keep_vars=True), tmp_path / "m.npz")
    b.load_state_dict(load(tmp_path / "m.npz"))
    ids = mt.tensor([[1, 2, 0, 6]])
    np.testing.assert_array_equal(a(ids).data, b(ids).data)
